"""The one loader of the CUDA sources of :mod:`cutext.kernels` (lda, lda_hybrid, ellpack, trie and every new kernel).

A kernel module keeps its CUDA C in a ``*.cu`` file beside it (package data, read with
:mod:`importlib.resources`, so it works from a wheel or a zip as well as from a checkout) and launches
its kernels through :func:`kernel`::

    from cutext.kernels import _cuda

    g, b = _cuda.grid(n)
    _cuda.kernel("lda.cu", "lda_init_topics")(g, b, (np.uint64(seed), keys, np.int64(n), np.int32(K), z))

* Modules are compiled lazily with ``cupy.RawModule`` and cached per device: the key is
  ``(source name, options, device id)`` (a RawModule belongs to the device current when it is built,
  so a multi-GPU run needs one per device); function handles are cached with the same key plus the
  kernel name.  The caches are guarded by a lock (the sharded LDA chain launches from threads).
* :data:`COMPILE_OPTIONS` is the one place for the compile options: C++17 and ``--fmad=false`` (no
  fused multiply-add, so the float operations are those of the numba twins, which the GPU tests compare
  draw for draw; the host emulation in ``tests/cuda_emu/`` compiles with ``-ffp-contract=off``).
* :data:`THREADS` (threads per block) and :func:`grid` (one thread per item) are the common launch
  shape; kernels with another shape pass their own.

Nothing here imports cupy at module level; :func:`module` and :func:`kernel` import it when called.
"""
from __future__ import annotations

import threading
from functools import cache
from importlib import resources

THREADS = 256
COMPILE_OPTIONS = ("--std=c++17", "--fmad=false")
PACKAGE = "cutext.kernels"

_lock = threading.Lock()
_modules: dict = {}
_functions: dict = {}


@cache
def source(name: str) -> str:
    """The text of the CUDA source ``name`` (e.g. ``"lda.cu"``), package data of :mod:`cutext.kernels`.

    Raises
    ------
    FileNotFoundError
        No such file in the package.
    """
    return resources.files(PACKAGE).joinpath(name).read_text(encoding="utf-8")


def module(name: str, options: tuple = COMPILE_OPTIONS):
    """The compiled ``cupy.RawModule`` of source ``name`` for the current device (built once per device).

    Parameters
    ----------
    name : str
        File name of the source in :mod:`cutext.kernels` (``"lda.cu"``, ``"ellpack.cu"``, ``"trie.cu"``).
    options : tuple of str
        nvrtc options (default :data:`COMPILE_OPTIONS`; a benchmark may add ``-D`` switches).

    Raises
    ------
    ImportError
        cupy is not installed.
    """
    import cupy

    options = tuple(options)
    key = (name, options, cupy.cuda.Device().id)
    mod = _modules.get(key)
    if mod is None:
        with _lock:
            mod = _modules.get(key)
            if mod is None:
                mod = _modules[key] = cupy.RawModule(code=source(name), options=options)
    return mod


def kernel(name: str, function: str, options: tuple = COMPILE_OPTIONS):
    """The kernel ``function`` of source ``name`` on the current device (handles cached per device).

    Call it as cupy's ``RawKernel``: ``kernel(...)(grid, block, args, shared_mem=...)``.
    """
    import cupy

    options = tuple(options)
    key = (name, options, cupy.cuda.Device().id, function)
    f = _functions.get(key)
    if f is None:
        f = module(name, options).get_function(function)
        with _lock:
            _functions[key] = f
    return f


class Options:
    """This module with ``extra`` nvrtc options added to every kernel it builds: another build of a source (a test
    or a benchmark sets it as a kernel module's ``_cuda``, e.g. ``-DSB_TILE=1024`` for ``search.cu``).

    Parameters
    ----------
    extra : iterable of str
        nvrtc options appended to :data:`COMPILE_OPTIONS` (``-D`` switches of the source).
    """

    def __init__(self, extra):
        self.extra = tuple(extra)

    def kernel(self, name: str, function: str):
        """:func:`kernel` built with the extra options."""
        return kernel(name, function, COMPILE_OPTIONS + self.extra)

    def __getattr__(self, attr):  # everything else is the module's own
        try:
            return globals()[attr]
        except KeyError:
            raise AttributeError(attr) from None


def grid(n, threads: int = THREADS):
    """Launch shape for one thread per item: ``((ceil(n / threads),), (threads,))``, at least one block."""
    return (max(1, (int(n) + threads - 1) // threads),), (threads,)


def clear() -> None:
    """Forget every compiled module and function handle (tests that swap the cupy module call it)."""
    with _lock:
        _modules.clear()
        _functions.clear()


__all__ = ["COMPILE_OPTIONS", "THREADS", "Options", "clear", "grid", "kernel", "module", "source"]
