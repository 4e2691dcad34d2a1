"""Where numba keeps the compiled CPU twins of cutext between processes, and when a kept one is stale.

Every numba function of cutext is jitted at module level with ``cache=True``: a new process loads its
machine code from disk (a first search then takes 0.7 s) instead of compiling it (11-20 s on 2 cores;
``benchmarks/first_call.py``).  Every module that defines numba functions imports this module before
its decorators run; the import adds one cache locator to numba, for cutext's own functions only, which
differs from numba's own locators in two ways:

* **Staleness.**  numba stamps a cached function with the content of its own source file only, so a
  function that calls a jitted function of another file (``termhash`` calls ``tokenize._decode``,
  ``ellpack`` calls ``cluster_ref.dot_merge``, ``lda_hybrid`` calls ``lda._twin_sample``) would keep
  the callee's old machine code after that file changed.  Here the stamp also covers every ``.py``
  file of ``cutext.kernels`` (:func:`kernels_digest`): an edit of any of them, or an upgrade,
  recompiles the kernels on their next call.
* **Place.**  numba's order -- ``$NUMBA_CACHE_DIR`` if set; else ``__pycache__`` beside the source
  where it is writable (an editable install, a user's own site-packages); else numba's user-wide
  folder (``$XDG_CACHE_HOME/numba`` or ``~/.cache/numba``: a read-only install) -- and, where numba
  has none of these and would refuse to import the module ("cannot cache function ...: no locator
  available"; a read-only install run with no writable home), this user's folder in the system temp
  directory (:func:`temp_cache_root`).

Functions of other packages keep numba's own locators.
"""
from __future__ import annotations

import atexit
import hashlib
import inspect
import os
import shutil
import stat
import tempfile
from functools import lru_cache
from pathlib import Path

from numba.core import caching

__all__ = ["CutextCacheLocator", "cache_folder", "is_cutext_function", "kernels_digest", "temp_cache_root"]

KERNELS_DIR = Path(__file__).resolve().parent


def _numba_locator(name: str):
    # numba 0.60 names its locators with a leading underscore, later versions without
    return getattr(caching, name, None) or getattr(caching, "_" + name)


@lru_cache(maxsize=1)
def kernels_digest() -> str:
    """SHA-256 (hex) of the names and contents of every ``.py`` file of ``cutext.kernels``, read once a
    process: the part of every cutext cache stamp that a change of a kernel file invalidates."""
    h = hashlib.sha256()
    for p in sorted(KERNELS_DIR.glob("*.py")):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


@lru_cache(maxsize=1)
def temp_cache_root() -> str:
    """``<system temp>/cutext-numba-<uid>``, created with mode 0700; a private folder of this process
    (removed at exit) instead where that path is not a directory of this user's that only they may
    write: numba's cache files are pickles, loaded with the rights of the process."""
    uid = os.getuid() if hasattr(os, "getuid") else None
    root = os.path.join(tempfile.gettempdir(), f"cutext-numba-{uid if uid is not None else 'user'}")
    try:
        os.makedirs(root, mode=0o700, exist_ok=True)
        st = os.lstat(root)
        safe = stat.S_ISDIR(st.st_mode) and (uid is None or (st.st_uid == uid and not st.st_mode & 0o022))
    except OSError:
        safe = False
    if not safe:
        root = tempfile.mkdtemp(prefix="cutext-numba-")
        atexit.register(shutil.rmtree, root, True)
    return root


class _KernelsStamp:
    """Mixin of a numba locator: the stamp is numba's (the function's own source file) and :func:`kernels_digest`."""

    def get_source_stamp(self):
        return (super().get_source_stamp(), kernels_digest())


class _UserProvided(_KernelsStamp, _numba_locator("UserProvidedCacheLocator")):
    pass


class _InTree(_KernelsStamp, _numba_locator("InTreeCacheLocator")):
    pass


class _UserWide(_KernelsStamp, _numba_locator("UserWideCacheLocator")):
    pass


class _TempDir(_KernelsStamp, _numba_locator("UserWideCacheLocator")):
    """The last resort: :func:`temp_cache_root` in place of numba's user-wide folder."""

    def __init__(self, py_func, py_file):
        super().__init__(py_func, py_file)
        self._cache_path = os.path.join(temp_cache_root(), self.get_suitable_cache_subpath(py_file))


def is_cutext_function(py_func) -> bool:
    """Whether ``py_func`` (a jitted function's Python function) belongs to cutext."""
    return (getattr(py_func, "__module__", None) or "").startswith("cutext.")


def cache_folder(py_func) -> str | None:
    """The folder where numba keeps the compiled ``py_func`` (a function of cutext), created if needed; None
    for a function of another package.  Also the place of other data that every process would compute
    the same way (:func:`cutext.kernels.tokenize.word_table`)."""
    loc = CutextCacheLocator.from_function(py_func, inspect.getfile(py_func))
    return None if loc is None else loc.get_cache_path()


class CutextCacheLocator:
    """The numba cache locator of cutext's functions (see the module docstring); ``from_function``
    returns None for any other function, which then goes to numba's own locators."""

    ORDER = (_UserProvided, _InTree, _UserWide, _TempDir)

    @classmethod
    def from_function(cls, py_func, py_file):
        if not is_cutext_function(py_func):
            return None
        for locator in cls.ORDER:
            found = locator.from_function(py_func, py_file)
            if found is not None:
                return found
        return None


_LOCATORS = _numba_locator("CacheImpl")._locator_classes
if CutextCacheLocator not in _LOCATORS:
    _LOCATORS.insert(0, CutextCacheLocator)
