"""Output directories that are replaced safely: never a user's folder, never a window with no output.

Every pipeline writes one directory (``out=``) through :func:`atomic_directory`.  The rules:

1. **What may be replaced.**  ``out`` may be a new path, an empty directory, or an earlier output of
   the *same* pipeline: a directory whose manifest (``index.json``, ``params.json``...) says
   ``"kind": <the pipeline's kind>``.  Anything else (a folder of the user's files, an output of
   another pipeline, a file) is refused with :class:`OutputDirectoryError` naming it, and
   :func:`check_output` lets a pipeline refuse it before any work.  An earlier output is replaced
   only when every entry in it is one its manifest lists (:mod:`cutext.stages.runtime.checksums`): a forged
   manifest beside a user's files, or files a user added inside an earlier output, are refused with
   the unknown entries named.  Never replaced, whatever they hold: the working directory or a parent
   of it, an input of the run or a parent of an input (every file a run reads is an input: the
   corpus and parameter files such as a stopword list or a vocabulary), a symbolic link.  Never
   written inside an input folder either (the next run over that folder would read the output as
   documents).  ``out`` is a path on a file system: a ``file://`` URL names the local path it holds
   (as fsspec reads it), any other URL (``s3://``, ``gs://``, ``memory://``...) is refused with a
   ``ValueError`` before any work, because the commit below is a rename of a directory, which object
   stores and fsspec's other file systems do not offer atomically.  Inputs stay fsspec URLs.
2. **No window.**  The new output is written into a hidden temporary directory beside ``out``
   (``.<name>.tmp-<tag>-<pid>-<host>``) and swapped in with one ``renameat2(RENAME_EXCHANGE)``
   (Linux): at every instant ``out`` is either the old complete output or the new one, as Lucene
   makes a commit visible with one rename of its segments file.  Where the exchange is not supported
   (another OS, a file system without it), two renames are used and a later run restores the old
   output if a writer died between them.
3. **Concurrent writers.**  The swap happens under an exclusive, non-blocking ``flock`` on
   ``.<name>.lock`` beside ``out``: of two runs finishing together one wins, the other gets
   :class:`OutputBusyError` and removes its temporary directory; nothing is left behind.  A run that
   builds on the output it read (an append, delete or compact of a segmented index) passes ``expect``,
   which checks under that lock that the output is still the commit it started from.
4. **Temporaries of dead writers.**  Every run removes the temporary directories of ``out`` whose
   writer process (pid, same host) is gone; a live writer's are never touched.
5. **Sealed.**  Before the swap, the manifest records the size and CRC32 of every file and its own
   CRC32 (:func:`cutext.stages.runtime.checksums.seal`); loaders verify them.
6. **Written where the workers are.**  A pipeline whose dask workers write into the temporary
   directory themselves (a bm25 index's segments and spill files) first checks, with one cheap task
   on every worker (:func:`check_workers_see`), that each of them sees that very directory and can
   write into it; on a cluster of several hosts ``out`` must lie on a file system every host mounts
   (NFS, Lustre...).  A worker that does not see it fails the run with
   :class:`OutputNotSharedError` naming the worker and the path, before any work, and nothing is
   left behind.

Files the command line writes (a TREC run of ``search --out``) go through :func:`check_output_file`:
never an input of the command, never a folder, never inside a cutext output.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import fnmatch
import json
import os
import re
import shutil
import socket
import uuid
from pathlib import Path

from cutext.stages.runtime import checksums
from cutext.stages.runtime.params import param

__all__ = ["OutputDirectoryError", "OutputBusyError", "OutputNotSharedError", "check_output", "check_output_file",
           "check_workers_see", "local_output", "atomic_directory", "write_json", "clean_stale", "param_files"]


class OutputDirectoryError(FileExistsError):
    """``out=`` names a directory that a pipeline must not replace (the message says which and why)."""


class OutputBusyError(OutputDirectoryError):
    """Another run is replacing the same output directory at this moment."""


class OutputNotSharedError(OSError):
    """A dask worker that writes into the output cannot see or write its directory (the message names the
    worker and the path): the output is not on a file system every worker mounts."""


# manifests of the outputs cutext writes (named in the error when another kind is in the way)
_MANIFESTS = ("index.json", "params.json", "cluster.json", "ngram.json", "state.json")
_TEMP = re.compile(r"^\.(?P<name>.+)\.(?P<what>tmp|old)-(?P<tag>[0-9a-f]{8})-(?P<pid>\d+)-(?P<host>.+)$")


# fsspec's protocols of the local file system (``LocalFileSystem.protocol``): their URLs name local paths
_LOCAL_PROTOCOLS = ("file", "local")


def _protocol(s) -> str | None:
    """The protocol of the URL ``s`` (``"s3"`` of ``"s3://b/k"``, lower case), else None."""
    s = os.fspath(s) if isinstance(s, os.PathLike) else s
    if not isinstance(s, str):
        return None
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.\-]*)://", s)
    return m.group(1).lower() if m else None


def _is_remote(out) -> bool:
    proto = _protocol(out)
    return proto is not None and proto not in _LOCAL_PROTOCOLS


def _strip_local(s: str) -> str:
    """``s`` without a ``file://`` (or ``local://``) prefix: the path fsspec reads for it (``file:///x`` is
    ``/x``; ``file://x`` the relative ``x``, as fsspec takes it)."""
    proto = _protocol(s)
    return s[len(proto) + 3:] if proto in _LOCAL_PROTOCOLS else s


def _refuse_remote(out, what: str = "output directories") -> None:
    """Raise the ValueError of an ``out`` that is a URL of a file system other than the local one, or a
    ``file://`` URL whose path is not absolute (``file://localhost/x``: fsspec reads it as ``localhost/x``)."""
    if _is_remote(out):
        raise ValueError(
            f"{param('out', os.fspath(out))}: remote {what} ({_protocol(out)}://) are not supported: a run commits "
            "its output with an atomic rename on a file system, which object stores and fsspec's other file systems "
            "do not offer. Write to a local path (or file:// URL), or, on a cluster of several hosts, to a file system "
            "every worker mounts (NFS, Lustre, CephFS); then copy the output where it should go (e.g. with "
            "fsspec's put)")
    proto = _protocol(out)
    if proto is not None and not os.path.isabs(_strip_local(os.fspath(out))):
        raise ValueError(
            f"{param('out', os.fspath(out))}: a {proto}:// URL of an output must name an absolute path "
            f"({proto}:///abs/path): fsspec reads {os.fspath(out)!r} as the relative path "
            f"{_strip_local(os.fspath(out))!r} (a host part such as localhost is not understood); pass the path itself")


def _local_path(out) -> Path:
    if isinstance(out, str):
        out = _strip_local(out)
    return Path(out).expanduser().absolute()


def local_output(out) -> Path:
    """``out`` as an absolute local path: a path, or a ``file://`` URL's path (as fsspec reads it).

    Raises
    ------
    ValueError
        ``out`` is a URL of another file system (``s3://``, ``memory://``...): outputs are committed by
        renaming a directory, which those file systems do not offer (the message says what to do instead).
    """
    _refuse_remote(out)
    return _local_path(out)


def _within(child: Path, parent: Path) -> bool:
    """True when ``child`` is ``parent`` or lies below it (both resolved)."""
    return child == parent or parent in child.parents


def _flat(inputs) -> list:
    """``inputs`` as one flat list: a pipeline passes ``[path, *param_files(...)]``, and path may be a list."""
    if isinstance(inputs, (str, os.PathLike)):
        return [inputs]
    if not isinstance(inputs, (list, tuple)):
        return []  # frames and other in-memory inputs have no path to protect
    return [x for p in inputs for x in (p if isinstance(p, (list, tuple)) else [p])]


def _inputs(inputs) -> list[tuple[Path, str | None, bool]]:
    """Each local input as ``(path, pattern, is_dir)``: an existing path resolved with ``pattern`` None, or a
    glob (no such path, ``*?[`` in the name) as the folder of its fixed part and the absolute pattern."""
    found = []
    for p in _flat(inputs):
        if not isinstance(p, (str, os.PathLike)) or _is_remote(p):
            continue
        s = os.path.abspath(os.path.expanduser(_strip_local(os.fspath(p))))
        m = re.search(r"[*?\[]", s)
        if m is None or os.path.exists(s):
            found.append((Path(s).resolve(), None, os.path.isdir(s)))
        else:
            cut = s.rfind(os.sep, 0, m.start())
            folder = Path(s[:cut] or os.sep).resolve()
            found.append((folder, str(folder) + s[cut:], False))
    return found


def _input_paths(inputs) -> list[Path]:
    """Local paths among the run's inputs (a path, a list of paths, globs reduced to their fixed folder)."""
    return [q for q, _, _ in _inputs(inputs)]


def _read_by_glob(real: Path, patterns: list[str]) -> str | None:
    """The pattern that matches ``real`` or a folder above it (so a run would read the output), else None;
    fnmatch's ``*`` also crosses ``/``, which errs on the side of refusing."""
    for pat in patterns:
        for d in (real, *real.parents):
            if fnmatch.fnmatchcase(str(d), pat):
                return pat
    return None


def param_files(*values) -> list:
    """The values that name existing local files (a stopword list, a vocabulary, a model): protected
    inputs of a run, like its corpus.  Names of built-in lists (``"lucene"``), lists of words, None
    and missing paths are left out."""
    return [v for v in values if isinstance(v, (str, os.PathLike)) and not _is_remote(v)
            and os.path.isfile(os.fspath(v))]


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
        The output directory: a path, or a ``file://`` URL of one.
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
        ``out`` is a URL of another file system than the local one (``s3://``, ``memory://``...): the
        commit is a rename of a directory, which they do not offer; the message says what to do instead.
    """
    _refuse_remote(out)
    path = _local_path(out)
    if path.is_symlink():  # swapping would replace the link by a folder and strand the link in a temporary
        raise OutputDirectoryError(f"{param('out', os.fspath(out))} is a symbolic link (to {os.readlink(path)}); "
                                   "pass the directory it points to, or a new path")
    real = path.resolve()
    cwd = Path.cwd().resolve()
    if _within(cwd, real):
        raise OutputDirectoryError(f"{param('out', os.fspath(out))} is the working directory or a parent of it "
                                   f"({real}); choose a new directory for the output")
    specs = _inputs(inputs)
    for q, _, is_dir in specs:
        if _within(q, real):
            what = "the input" if q == real else f"a parent of the input {q}"
            raise OutputDirectoryError(f"{param('out', os.fspath(out))} ({real}) is {what}; "
                                       "choose a directory outside the corpus")
        if is_dir and _within(real, q):
            raise OutputDirectoryError(f"{param('out', os.fspath(out))} ({real}) is inside the input folder {q}: the "
                                       "next run over that folder would read the output as documents; "
                                       "choose a directory outside the corpus")
    pat = _read_by_glob(real, [g for _, g, _ in specs if g is not None])
    if pat is not None:
        raise OutputDirectoryError(f"{param('out', os.fspath(out))} ({real}) matches the input pattern {pat!r}: the "
                                   "next run of that pattern would read the output as documents; choose a directory "
                                   "outside the corpus")
    if not os.path.lexists(path):
        return path
    if not overwrite:
        raise OutputDirectoryError(f"{path} exists (pass {param('overwrite', True)} to replace an earlier output)")
    if not path.is_dir():
        raise OutputDirectoryError(f"{param('out', os.fspath(out))}: {path} exists and is not a directory")
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
    meta = json.loads((path / manifest).read_text(encoding="utf-8"))
    if not isinstance(meta.get("files"), dict):
        raise OutputDirectoryError(
            f"refusing to replace {path}: its {manifest} lists none of its files (written by an older cutext, "
            "or not by cutext), so nothing shows that every file in it is cutext's. Remove it yourself.")
    extra = checksums.unlisted(path, manifest, meta)
    if extra:
        raise OutputDirectoryError(
            f"refusing to replace {path}: it holds entries its {manifest} does not list: "
            + ", ".join(extra[:5]) + (f" and {len(extra) - 5} more" if len(extra) > 5 else "")
            + ". Move them out (or remove the directory yourself).")
    return path


def _artifact_above(path: Path) -> Path | None:
    """The nearest folder at or above ``path`` that holds a cutext output's manifest, else None."""
    for d in (path, *path.parents):
        for m in _MANIFESTS:
            k = _manifest_kind(d / m)
            if isinstance(k, str) and k.startswith("cutext."):
                return d
    return None


def check_output_file(out, *, inputs=None) -> Path:
    """Check that the command line may write the file ``out`` (a TREC run, a table); change nothing.

    Parameters
    ----------
    out : str or os.PathLike
        The file to write (replaced if it exists).
    inputs : path, list of paths, or None
        What the command reads (an index directory, a queries file, qrels): ``out`` may be none of
        them, nor lie inside one.

    Returns
    -------
    pathlib.Path
        ``out`` as an absolute local path.

    Raises
    ------
    OutputDirectoryError
        ``out`` is an input or lies inside an input folder, is a directory, or lies inside a cutext
        output (an index, a model: writing there changes a sealed output, and the file would be
        deleted with it at the next run).
    FileNotFoundError
        The folder of ``out`` does not exist (or is a file).
    ValueError
        ``out`` is a URL of another file system than the local one.
    """
    _refuse_remote(out, "output files")
    path = _local_path(out)
    real = path.resolve()
    for q in _input_paths(inputs):
        if real == q or (q.is_dir() and _within(real, q)):
            raise OutputDirectoryError(f"refusing to write {os.fspath(out)!r} ({real}): it is "
                                       + ("an input of this command" if real == q else f"inside the input {q}")
                                       + "; choose another file")
    if real.is_dir():
        raise OutputDirectoryError(f"refusing to write {os.fspath(out)!r}: {real} is a directory")
    art = _artifact_above(real.parent)
    if art is not None:
        raise OutputDirectoryError(f"refusing to write {os.fspath(out)!r}: it lies inside the cutext output {art}, "
                                   "whose files are checksummed and replaced whole; choose a path outside it")
    if not real.parent.is_dir():  # else the write fails late, naming its temporary file
        raise FileNotFoundError(f"refusing to write {os.fspath(out)!r}: its folder {real.parent} "
                                + ("is a file, not a folder" if real.parent.exists() else
                                   "does not exist; create it first"))
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


def _seal_all(tmp: Path, manifest: str, written: dict | None = None) -> None:
    """Seal the outputs nested inside ``tmp`` (a cluster run's ``state/``), deepest first, then ``tmp``.
    ``written``: ``{path relative to tmp: (bytes, crc32)}`` of files whose writer took their CRC32 as it
    wrote them (:func:`cutext.stages.runtime.checksums.open_checksummed`), not read back.

    A nested output already sealed and unchanged (an index's segments: sealed by their writer, or hard-linked
    from the commit before) keeps its manifest, and the outer manifests take its files' CRC32s from it: a
    commit reads only the bytes it wrote (an append to a 32 GB index read all 4.2 GB of it)."""
    nested = [m for name in _MANIFESTS + ("segment.json",) for m in tmp.rglob(name)
              if m.parent != tmp and (_manifest_kind(m) or "").startswith("cutext.")]
    known: dict = dict(written or {})
    for m in sorted(nested, key=lambda m: -len(m.parts)):
        rel = m.parent.relative_to(tmp)
        files = checksums.sealed_files(m.parent, m.name)
        if files is None:
            inner = {Path(f).relative_to(rel).as_posix(): v for f, v in known.items() if Path(f).is_relative_to(rel)}
            checksums.seal(m.parent, m.name, known=inner)
            files = checksums.sealed_files(m.parent, m.name) or {}
        known.update({(rel / f).as_posix(): v for f, v in files.items()})
    checksums.seal(tmp, manifest, known=known)


@contextlib.contextmanager
def atomic_directory(out, overwrite: bool = True, *, kind: str | None = None, manifest: str | None = None,
                     inputs=None, expect=None, written: dict | None = None):
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
    expect : callable, optional
        ``expect(out)`` is called under the output's lock just before the swap; whatever it raises
        aborts the run with nothing written (a commit that must build on the output it read, e.g.
        an append raising :class:`OutputBusyError` when another writer committed meanwhile).  It is
        also called when the block raises: a read of the output that failed because another writer
        replaced what it read (a segment a compaction merged away) raises its OutputBusyError, chained
        to the failure, instead of the failure.
    written : dict, optional
        Filled by the block: ``{path relative to the directory: (bytes, crc32)}`` of files whose CRC32
        their writer took as it wrote them; the seal takes it from there for a file of that size instead
        of reading the file back.

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
        try:
            yield tmp
        except OutputBusyError:
            raise
        except Exception as exc:  # a read that failed because another writer replaced what it read
            if expect is not None:
                try:
                    expect(path)
                except OutputBusyError as busy:  # committed meanwhile: that commit, not damage, failed the read
                    raise busy from exc
            raise
        if manifest != "\0none" and (tmp / manifest).is_file():
            _seal_all(tmp, manifest, written)
        with _lock(path):
            check_output(out, kind=kind, manifest=manifest, inputs=inputs, overwrite=overwrite)
            if expect is not None:
                expect(path)
            _swap_in(tmp, path, tag, suffix)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_json(path, obj) -> None:
    """Write ``obj`` as indented, key-sorted JSON (a manifest or summary)."""
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=2, sort_keys=True, default=str)
        fh.write("\n")


def _probe_directory(path: str) -> str | None:
    """Run on a worker: None when ``path`` is a directory this process sees and can create a file in, else
    what is wrong (a probe file is created and removed at once)."""
    if not os.path.isdir(path):
        return f"cannot see the output directory {path}" + (" (a file there)" if os.path.lexists(path) else "")
    probe = os.path.join(path, f".probe-{uuid.uuid4().hex[:8]}-{os.getpid()}-{socket.gethostname()}")
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        os.unlink(probe)
    except OSError as exc:
        return f"cannot write into the output directory {path} ({exc.strerror or exc})"
    return None


def check_workers_see(client, path) -> None:
    """Check that every worker of ``client`` sees the directory ``path`` and can write into it.

    A pipeline whose workers write into its output (the temporary directory of :func:`atomic_directory`)
    calls it before they write anything: one task on every worker (``client.run``) checks that ``path`` is
    a directory there and creates and removes a probe file in it.  The temporary directory's name is
    unique to the run, so a worker that sees it shares the caller's file system.

    Parameters
    ----------
    client : distributed.Client
        The run's client; all its workers are checked (any of them may be given a write).
    path : str or os.PathLike
        The directory the workers will write into, as this process names it (absolute).

    Raises
    ------
    OutputNotSharedError (OSError)
        A worker does not see ``path`` or cannot write into it; the message names each such worker's
        address and the path.  Nothing is written.
    """
    path = os.fspath(path)
    seen = client.run(_probe_directory, path)
    bad = sorted((w, why) for w, why in seen.items() if why is not None)
    if bad:
        shown = "; ".join(f"worker {w}: {why}" for w, why in bad[:5])
        more = f" (and {len(bad) - 5} more workers)" if len(bad) > 5 else ""
        raise OutputNotSharedError(
            f"{shown}{more}: the output must be on a file system every worker mounts (a shared file system "
            "such as NFS or Lustre on a cluster of several hosts, or a path that is the same directory on every "
            "worker's host); nothing was written")
