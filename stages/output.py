"""Output directories that are replaced safely: never a user's folder, never a window with no output.

Every pipeline writes one directory (``out=``) through :func:`atomic_directory`.  The rules:

1. **What may be replaced.**  ``out`` may be a new path, an empty directory, or an earlier output of
   the *same* pipeline: a directory whose manifest (``index.json``, ``params.json``...) says
   ``"kind": <the pipeline's kind>``.  Anything else (a folder of the user's files, an output of
   another pipeline, a file) is refused with :class:`OutputDirectoryError` naming it, and
   :func:`check_output` lets a pipeline refuse it before any work.  Never replaced, whatever they
   hold: the working directory or a parent of it, an input of the run or a parent of an input.
   Remote URLs (``s3://...``) are refused with a clear error: outputs are written locally.
2. **No window.**  The new output is written into a hidden temporary directory beside ``out``
   (``.<name>.tmp-<tag>-<pid>-<host>``) and swapped in with one ``renameat2(RENAME_EXCHANGE)``
   (Linux): at every instant ``out`` is either the old complete output or the new one, as Lucene
   makes a commit visible with one rename of its segments file.  Where the exchange is not supported
   (another OS, a file system without it), two renames are used and a later run restores the old
   output if a writer died between them.
3. **Concurrent writers.**  The swap happens under an exclusive, non-blocking ``flock`` on
   ``.<name>.lock`` beside ``out``: of two runs finishing together one wins, the other gets
   :class:`OutputBusyError` and removes its temporary directory; nothing is left behind.
4. **Temporaries of dead writers.**  Every run removes the temporary directories of ``out`` whose
   writer process (pid, same host) is gone; a live writer's are never touched.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import json
import os
import re
import shutil
import socket
import uuid
from pathlib import Path

__all__ = ["OutputDirectoryError", "OutputBusyError", "check_output", "atomic_directory", "write_json",
           "clean_stale"]


class OutputDirectoryError(FileExistsError):
    """``out=`` names a directory that a pipeline must not replace (the message says which and why)."""


class OutputBusyError(OutputDirectoryError):
    """Another run is replacing the same output directory at this moment."""


# manifests of the outputs cutext writes (named in the error when another kind is in the way)
_MANIFESTS = ("index.json", "params.json", "cluster.json", "ngram.json", "state.json")
_TEMP = re.compile(r"^\.(?P<name>.+)\.(?P<what>tmp|old)-(?P<tag>[0-9a-f]{8})-(?P<pid>\d+)-(?P<host>.+)$")


def _is_remote(out) -> bool:
    s = os.fspath(out) if isinstance(out, os.PathLike) else out
    if not isinstance(s, str):
        return False
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.\-]*)://", s)
    return bool(m) and m.group(1).lower() != "file"


def _local_path(out) -> Path:
    if isinstance(out, str) and out.lower().startswith("file://"):
        out = out[len("file://"):]
    return Path(out).expanduser().absolute()


def _within(child: Path, parent: Path) -> bool:
    """True when ``child`` is ``parent`` or lies below it (both resolved)."""
    return child == parent or parent in child.parents


def _input_paths(inputs) -> list[Path]:
    """Local paths among the run's inputs (a path, a list of paths, globs reduced to their fixed part)."""
    if inputs is None:
        return []
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    elif not isinstance(inputs, (list, tuple)):
        return []  # frames and other in-memory inputs have no path to protect
    found = []
    for p in inputs:
        if not isinstance(p, (str, os.PathLike)) or _is_remote(p):
            continue
        s = os.fspath(p)
        if s.lower().startswith("file://"):
            s = s[len("file://"):]
        fixed = re.split(r"[*?\[]", s, maxsplit=1)[0] if not os.path.exists(s) else s
        if not fixed:
            continue
        q = Path(fixed).expanduser().absolute()
        if fixed != s:  # a glob: protect the folder its fixed part names
            q = q if fixed.endswith(os.sep) else q.parent
        found.append(q.resolve())
    return found


def _manifest_kind(path: Path) -> str | None:
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta.get("kind") if isinstance(meta, dict) else None


def check_output(out, *, kind: str, manifest: str, inputs=None, overwrite: bool = True) -> Path:
    """Check that ``out`` may receive (or be replaced by) an output of kind ``kind``; change nothing.

    Parameters
    ----------
    out : str or os.PathLike
        The output directory.
    kind : str
        The pipeline's manifest kind, e.g. ``"cutext.bm25"``.
    manifest : str
        The manifest file inside an output of that kind, e.g. ``"index.json"``.
    inputs : path, list of paths, or None
        The run's inputs: ``out`` may be none of them nor a parent of one.
    overwrite : bool
        False: an existing ``out`` is refused even when it is an earlier output.

    Returns
    -------
    pathlib.Path
        ``out`` as an absolute local path.

    Raises
    ------
    OutputDirectoryError
        ``out`` is the working directory or a parent of it, an input or a parent of one, a file, a
        non-empty directory that is not an earlier output of kind ``kind``, or exists while
        ``overwrite`` is False.
    ValueError
        ``out`` is a remote URL (not supported: write locally, then copy).
    """
    if _is_remote(out):
        raise ValueError(f"out={out!r}: remote output directories are not supported; write to a local "
                         "directory and copy it (e.g. with fsspec's put)")
    path = _local_path(out)
    real = path.resolve()
    cwd = Path.cwd().resolve()
    if _within(cwd, real):
        raise OutputDirectoryError(f"out={os.fspath(out)!r} is the working directory or a parent of it "
                                   f"({real}); choose a new directory for the output")
    for q in _input_paths(inputs):
        if _within(q, real):
            what = "the input" if q == real else f"a parent of the input {q}"
            raise OutputDirectoryError(f"out={os.fspath(out)!r} ({real}) is {what}; "
                                       "choose a directory outside the corpus")
    if not os.path.lexists(path):
        return path
    if not overwrite:
        raise OutputDirectoryError(f"{path} exists (pass overwrite=True to replace an earlier output)")
    if not path.is_dir():
        raise OutputDirectoryError(f"out={os.fspath(out)!r}: {path} exists and is not a directory")
    if not any(path.iterdir()):
        return path
    found = _manifest_kind(path / manifest)
    if found != kind:
        other = found or next((k for m in _MANIFESTS if (k := _manifest_kind(path / m))), None)
        why = (f"it is a {other!r} output" if other is not None
               else f"it holds no {manifest} of a cutext output")
        raise OutputDirectoryError(
            f"refusing to replace {path}: it is not empty and not an earlier {kind!r} output ({why}). "
            "Choose a new or empty directory, or remove this one yourself.")
    return path


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(out) -> list[Path]:
    """Remove the temporaries of ``out`` left by writers that are gone; restore a lost output.

    A temporary (``.<name>.tmp-*`` or ``.<name>.old-*``) is stale when it was made on this host by a
    process that no longer exists.  If ``out`` itself is missing and a stale ``.old-`` copy exists
    (a writer died between the two renames of the fallback swap), the newest such copy is renamed
    back to ``out`` instead of being removed.

    Returns
    -------
    list of pathlib.Path
        The paths removed.
    """
    path = _local_path(out)
    parent, name = path.parent, path.name
    if not parent.is_dir():
        return []
    host = socket.gethostname()
    stale = []
    for entry in parent.iterdir():
        m = _TEMP.match(entry.name)
        if not m or m["name"] != name or m["host"] != host or _pid_alive(int(m["pid"])):
            continue
        stale.append((entry, m["what"]))
    removed = []
    if not os.path.lexists(path):
        olds = sorted((e for e, w in stale if w == "old"), key=lambda e: e.stat().st_mtime)
        if olds:
            os.rename(olds[-1], path)
            stale = [(e, w) for e, w in stale if e != olds[-1]]
    for entry, _ in stale:
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


@contextlib.contextmanager
def _lock(path: Path):
    """Exclusive non-blocking flock on ``.<name>.lock`` beside ``path``; the file is removed after."""
    import fcntl

    lock = path.parent / f".{path.name}.lock"
    for _ in range(20):
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputBusyError(f"another run is replacing {path} right now; this run's output was "
                                  "not written (run it again when that one has finished)") from None
        try:  # the lock file may have been unlinked by the previous holder: lock the current one
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    else:  # pragma: no cover - only under a storm of writers
        raise OutputBusyError(f"could not lock {lock}")
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock)
        os.close(fd)


_RENAME_EXCHANGE = 2
_libc = None


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported."""
    global _libc
    if not hasattr(os, "uname") or os.uname().sysname != "Linux":
        return False
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    fn = getattr(_libc, "renameat2", None)
    if fn is None:
        return False
    at_fdcwd = -100
    rc = fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), ctypes.c_uint(_RENAME_EXCHANGE))
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, f"renameat2({a}, {b}, RENAME_EXCHANGE): {os.strerror(err)}")


def _swap_in(tmp: Path, out: Path, tag: str, suffix: str) -> None:
    """Make ``tmp`` visible as ``out``; the old ``out`` (if any) is removed after the switch."""
    if not os.path.lexists(out):
        os.rename(tmp, out)
        return
    if _exchange(tmp, out):
        shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the old output
        return
    old = out.parent / f".{out.name}.old-{tag}-{suffix}"
    os.rename(out, old)
    os.rename(tmp, out)
    shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def atomic_directory(out, overwrite: bool = True, *, kind: str | None = None, manifest: str | None = None,
                     inputs=None):
    """Yield a temporary directory beside ``out``; make it ``out`` only when the block succeeds.

    Parameters
    ----------
    out : str or os.PathLike
        The output directory.
    overwrite : bool
        False: an existing ``out`` is an error.
    kind, manifest : str
        The output's kind and its manifest file (see :func:`check_output`).  Without them only a
        new path or an empty directory is accepted.
    inputs : path, list of paths or None
        The run's inputs, which ``out`` must not be nor contain.

    Yields
    ------
    pathlib.Path
        The temporary directory to write into.

    Raises
    ------
    OutputDirectoryError
        ``out`` may not be replaced (see :func:`check_output`); checked on entry and again at the swap.
    OutputBusyError
        Another run held the output's lock at the swap: nothing was written and nothing is left behind.
    """
    kind = kind or "\0none"
    manifest = manifest or "\0none"
    path = check_output(out, kind=kind, manifest=manifest, inputs=inputs, overwrite=overwrite)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(path)
    tag = uuid.uuid4().hex[:8]
    suffix = f"{os.getpid()}-{socket.gethostname()}"
    tmp = path.parent / f".{path.name}.tmp-{tag}-{suffix}"
    tmp.mkdir()
    try:
        yield tmp
        with _lock(path):
            check_output(out, kind=kind, manifest=manifest, inputs=inputs, overwrite=overwrite)
            _swap_in(tmp, path, tag, suffix)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_json(path, obj) -> None:
    """Write ``obj`` as indented, key-sorted JSON (a manifest or summary)."""
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=2, sort_keys=True, default=str)
        fh.write("\n")
