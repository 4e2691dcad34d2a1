"""Checksums of saved outputs: every file's CRC32 in its manifest, and the manifest's own.

Lucene ends every index file with a CRC32 footer and checks it when the file is opened
(``CodecUtil.checkFooter``); cutext records the same checksum in the output's manifest instead, so
the files stay plain Parquet / JSON that other tools read.  When a pipeline's output is complete,
:func:`seal` adds to its manifest (``index.json``, ``params.json``, ...)

* ``"files"``: ``{relative path: {"bytes": size, "crc32": "8 hex digits"}}`` for every file of the
  output except the manifest, and ``"dirs"``: the relative paths of its folders;
* ``"checksum"``: the CRC32 of the manifest's own bytes, computed with this value written as
  ``"00000000"``.

:func:`verify` checks them on load: any byte edit of any file (the manifest included), a missing or
resized file is refused naming the file, and so is a file or folder the manifest does not list (a
loader that reads every ``*.parquet`` of a folder would read it).  CRC32 is the checksum of Lucene's
footers and of zlib (no dependency); it detects every burst error of up to 32 bits and any other
edit with probability 1 - 2**-32.  It is not a signature: a writer that recomputes it can forge an
output, which is why loaders also check values (:mod:`cutext.stages.runtime.artifacts`).
"""
from __future__ import annotations

import functools
import io
import json
import mmap
import os
import re
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

__all__ = ["crc32_file", "listing", "open_checksummed", "seal", "sealed_files", "verify", "unlisted", "ChecksumError",
           "MissingFileError"]

_BLOCK = 8 << 20  # bytes read and checked at a time (zlib.crc32 releases the GIL for each)
_SPAN = 64 << 20  # a larger file is checked in spans of this size on several threads, then combined
_PLACEHOLDER = "00000000"
_CHECKSUM_LINE = re.compile(rb'^  "checksum": "([0-9a-f]{8})",?$', re.MULTILINE)


class ChecksumError(ValueError):
    """A file of a saved output does not match its manifest (edited, truncated, missing or unknown)."""


class MissingFileError(ChecksumError, FileNotFoundError):
    """A file the manifest lists is not there."""


def _crc_span(path, start: int, length: int) -> int:
    """CRC32 of ``length`` bytes of a file from ``start``, read with ``readinto`` into an anonymous mapping
    of 8 MiB: a file just written (the seal at the end of a build) costs a page fault a 4 KiB page through
    ``mmap`` (5x slower, measured on a 0.5 GB index), and the buffer is not a Python object (a load's Python
    memory stays one copy of the index)."""
    crc = 0
    with open(path, "rb", buffering=0) as fh, mmap.mmap(-1, _BLOCK) as buf, memoryview(buf) as view:
        fh.seek(start)
        while length > 0 and (n := fh.readinto(view[:min(_BLOCK, length)])):
            crc = zlib.crc32(view[:n], crc)
            length -= n
    return crc


def _gf2_times(mat, vec: int) -> int:
    """A 32x32 matrix over GF(2) (a column per bit) times a 32-bit vector."""
    out, i = 0, 0
    while vec:
        if vec & 1:
            out ^= mat[i]
        vec >>= 1
        i += 1
    return out


@functools.lru_cache(maxsize=8)
def _zeros_operator(nbytes: int) -> tuple:
    """The GF(2) matrix that runs a CRC32 register over ``nbytes`` zero bytes, by repeated squaring of the
    one-bit step (the method of zlib's ``crc32_combine``)."""
    op = [0xEDB88320] + [1 << n for n in range(31)]  # one zero bit through the reflected polynomial
    for _ in range(3):  # 8 bits: one zero byte
        op = [_gf2_times(op, c) for c in op]
    result = [1 << n for n in range(32)]  # identity
    while nbytes:
        if nbytes & 1:
            result = [_gf2_times(op, c) for c in result]
        nbytes >>= 1
        if nbytes:
            op = [_gf2_times(op, c) for c in op]
    return tuple(result)


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """CRC32 of ``A + B`` from ``crc1`` = CRC32(A), ``crc2`` = CRC32(B) and ``len2`` = len(B) in bytes."""
    return _gf2_times(_zeros_operator(len2), crc1) ^ crc2


def _spans(size: int) -> list[tuple[int, int]]:
    """A file of ``size`` bytes as (start, length) spans checked on separate threads: a first span of
    ``size mod _SPAN`` bytes (or ``_SPAN``) and full spans after it, so that every combine shifts by
    ``_SPAN`` (one cached operator)."""
    first = size % _SPAN or min(size, _SPAN)
    return [(0, first)] + [(a, _SPAN) for a in range(first, size, _SPAN)]


def _crc_files(paths: list) -> list[str]:
    """CRC32 of each file as 8 lowercase hex digits, the spans of every file on one pool of threads
    (zlib releases the GIL), so one large file is read by several threads."""
    jobs = [(i, p, a, n) for i, p in enumerate(paths) for a, n in _spans(os.path.getsize(p))]
    jobs.sort(key=lambda j: -j[3])  # the largest first: the pool ends together
    with ThreadPoolExecutor(_threads(len(jobs))) as pool:
        crcs = dict(zip(((i, a) for i, _, a, _ in jobs), pool.map(lambda j: _crc_span(j[1], j[2], j[3]), jobs)))
    out = []
    for i, p in enumerate(paths):
        spans = _spans(os.path.getsize(p))
        crc = crcs[(i, 0)]
        for a, n in spans[1:]:
            crc = crc32_combine(crc, crcs[(i, a)], n)
        out.append(f"{crc:08x}")
    return out


def crc32_file(path) -> str:
    """CRC32 of a file's bytes as 8 lowercase hex digits (``zlib.crc32`` of its whole content)."""
    return _crc_files([path])[0]


@functools.lru_cache(maxsize=1)
def _crc_pool() -> ThreadPoolExecutor:
    """Threads that take the CRC32s of a large write's spans (:class:`_ChecksummedRaw`), made at the first."""
    return ThreadPoolExecutor(_threads(8), thread_name_prefix="cutext-crc")


class _ChecksummedRaw(io.RawIOBase):
    """A new file written front to back, the CRC32 of its bytes taken as they are written (no seek)."""

    def __init__(self, path):
        super().__init__()
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.crc = 0
        self.nbytes = 0

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.nbytes

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if (whence, offset) in ((os.SEEK_CUR, 0), (os.SEEK_SET, self.nbytes), (os.SEEK_END, 0)):
            return self.nbytes  # where it is: a tell
        raise io.UnsupportedOperation("a checksummed file is written front to back")

    def write(self, b) -> int:
        with memoryview(b) as view, view.cast("B") as data:
            # a large write: its whole spans' CRC32s on the pool while this thread writes (zlib and the write
            # release the GIL), then combined (one cached operator: the spans are of one size); the rest here
            n_spans = len(data) // _BLOCK if len(data) >= 2 * _BLOCK else 0
            spans = [_crc_pool().submit(zlib.crc32, data[i * _BLOCK:(i + 1) * _BLOCK]) for i in range(n_spans)]
            try:
                done = 0
                while done < len(data):
                    done += os.write(self.fd, data[done:])
            finally:
                crcs = [f.result() for f in spans]  # the buffer is the caller's again only once they are done
            crc = self.crc
            for c in crcs:
                crc = crc32_combine(crc, c, _BLOCK)
            self.crc = zlib.crc32(data[n_spans * _BLOCK:], crc)
        self.nbytes += done
        return done

    def close(self) -> None:
        if not self.closed:
            try:
                os.close(self.fd)
            finally:
                super().close()


class ChecksummedFile(io.BufferedWriter):
    """A file opened for writing whose size and CRC32 are known when it is closed, without reading it back
    (:func:`open_checksummed`)."""

    @property
    def checksum(self) -> tuple[int, str]:
        """``(bytes, crc32 as 8 hex digits)`` of what was written so far (flushed first)."""
        if not self.closed:
            self.flush()
        return self.raw.nbytes, f"{self.raw.crc:08x}"


def open_checksummed(path, buffer_size: int = 1 << 20) -> ChecksummedFile:
    """Open ``path`` to write it front to back, its CRC32 taken on the bytes as they pass: the file's
    ``checksum`` (``(bytes, crc32)``) then goes to :func:`seal` as ``known``, so the seal does not read
    the file back (a writer that wrote around the page cache made the seal read it from the disk).  Not
    seekable: a writer that seeks back fails instead of recording a CRC32 of other bytes than the file's.
    A writer that takes a path (pyarrow's, cudf's) takes this object as its file (an ``io.IOBase``)."""
    return ChecksummedFile(_ChecksummedRaw(path), buffer_size=buffer_size)


def listing(directory, manifest: str) -> tuple[list[str], list[str]]:
    """The files (except ``manifest``) and the folders below ``directory``, as sorted relative POSIX
    paths; symbolic links count as files (they are never followed)."""
    d = Path(directory)
    files, dirs = [], []
    for root, dnames, fnames in os.walk(d):
        rel = Path(root).relative_to(d)
        for n in list(dnames):
            p = d / rel / n
            if p.is_symlink():  # never descend through a link
                dnames.remove(n)
                files.append((rel / n).as_posix())
            else:
                dirs.append((rel / n).as_posix())
        files.extend((rel / n).as_posix() for n in fnames if not (rel == Path(".") and n == manifest))
    return sorted(files), sorted(dirs)


def _threads(n: int) -> int:
    return max(1, min(n, os.cpu_count() or 1, 32))


def _manifest_bytes(meta: dict) -> bytes:
    return (json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n").encode("utf-8")


def seal(directory, manifest: str, known: dict | None = None) -> None:
    """Record every file's size and CRC32 in ``directory/manifest`` and the manifest's own CRC32.

    The manifest must already hold a JSON object; it is rewritten (indented, sorted keys) with the
    keys ``files``, ``dirs`` and ``checksum`` (module docstring).  The files are read back on a pool
    of threads (zlib releases the GIL), so sealing costs about one read of the output from the page
    cache, except the files of ``known`` (``{relative path: (bytes, crc32)}``, e.g. those a sealed
    manifest inside ``directory`` records: :func:`sealed_files`) whose size is the one recorded: their
    CRC32 is taken from there, as written, not recomputed from what the disk holds now.

    Raises
    ------
    ChecksumError
        The manifest is not a JSON object.
    """
    d = Path(directory)
    mf = d / manifest
    meta = json.loads(mf.read_text(encoding="utf-8"))
    if not isinstance(meta, dict):
        raise ChecksumError(f"{mf}: expected a JSON object")
    files, dirs = listing(d, manifest)
    known = known or {}
    sizes = {f: os.lstat(d / f).st_size for f in files}
    todo = [f for f in files if f not in known or known[f][0] != sizes[f]]
    crcs = dict(zip(todo, _crc_files([d / f for f in todo])))
    meta["files"] = {f: {"bytes": sizes[f], "crc32": crcs[f] if f in crcs else known[f][1]} for f in files}
    meta["dirs"] = dirs
    meta["checksum"] = _PLACEHOLDER
    raw = _manifest_bytes(meta)
    crc = f"{zlib.crc32(raw):08x}"
    m = _CHECKSUM_LINE.search(raw)
    raw = raw[:m.start(1)] + crc.encode() + raw[m.end(1):]
    tmp = mf.with_name(f".{manifest}.tmp")
    tmp.write_bytes(raw)
    os.replace(tmp, mf)


def sealed_files(directory, manifest: str) -> dict | None:
    """``{relative path: (bytes, crc32)}`` that the sealed ``directory/manifest`` records, if its own checksum
    matches and it lists exactly the files and folders there with their sizes (a stat each, no read);
    else None (unsealed, edited, or files added, removed or resized since)."""
    d = Path(directory)
    try:
        raw = (d / manifest).read_bytes()
        meta = json.loads(raw)
    except (OSError, ValueError):
        return None
    files = meta.get("files") if isinstance(meta, dict) else None
    if not isinstance(files, dict) or not _manifest_ok(raw):
        return None
    have, dirs = listing(d, manifest)
    if set(have) != set(files) or set(dirs) != set(meta.get("dirs") or ()):
        return None
    out = {}
    for f, rec in files.items():
        if (not isinstance(rec, dict) or rec.get("bytes") != os.lstat(d / f).st_size
                or not isinstance(rec.get("crc32"), str)):
            return None
        out[f] = (rec["bytes"], rec["crc32"])
    return out


def _manifest_ok(raw: bytes) -> bool:
    m = _CHECKSUM_LINE.search(raw)
    if m is None:
        return False
    blank = raw[:m.start(1)] + _PLACEHOLDER.encode() + raw[m.end(1):]
    return f"{zlib.crc32(blank):08x}" == m.group(1).decode()


def unlisted(directory, manifest: str, meta: dict) -> list[str]:
    """Entries below ``directory`` that the manifest ``meta`` does not list (files and folders)."""
    files, dirs = listing(directory, manifest)
    known_f = meta.get("files") if isinstance(meta.get("files"), dict) else {}
    known_d = set(meta.get("dirs") or ()) if isinstance(meta.get("dirs"), list) else set()
    return [f for f in files if f not in known_f] + [x for x in dirs if x not in known_d]


def verify(directory, manifest: str, meta: dict, *, contents: bool = True, listed_only: bool = False) -> None:
    """Check a saved output against its sealed manifest (see :func:`seal`).

    Parameters
    ----------
    directory : str or os.PathLike
    manifest : str
        The manifest's file name, e.g. ``"index.json"``.
    meta : dict
        The manifest, parsed.
    contents : bool, default True
        Also check the CRC32 of the manifest and of every file (reads the whole output once, on a
        pool of threads), their sizes and that they exist.  False checks only that nothing unlisted
        is there.
    listed_only : bool, default False
        Check only the files ``meta["files"]`` lists, not what else the directory holds (a reader that
        verifies the files it reads anew passes the manifest with those files alone).

    Raises
    ------
    ChecksumError
        The manifest records no checksums (written by an older cutext, or not by cutext), its own
        checksum or a file's size or CRC32 does not match, or an entry is not listed; the message
        names the file.
    MissingFileError (ChecksumError, FileNotFoundError)
        A listed file is missing.
    """
    d = Path(directory)
    mf = d / manifest
    files = meta.get("files")
    if not isinstance(files, dict) or not isinstance(meta.get("checksum"), str):
        raise ChecksumError(f"{mf}: records no file checksums (written by an older cutext, or not by "
                            "cutext); rebuild it, or load it with verify=False to skip every integrity check")
    if contents and not _manifest_ok(mf.read_bytes()):
        raise ChecksumError(f"{mf}: the manifest's checksum does not match its bytes (edited or damaged)")
    extra = [] if listed_only else unlisted(d, manifest, meta)
    if extra:
        raise ChecksumError(f"{d}: holds entries its {manifest} does not list: "
                            + ", ".join(extra[:5]) + (f" and {len(extra) - 5} more" if len(extra) > 5 else "")
                            + " (move them out of the output)")
    if not contents:
        return
    for rel, rec in files.items():
        p = d / rel
        if not isinstance(rec, dict) or not os.path.lexists(p):
            raise MissingFileError(f"{p}: listed in {manifest} but missing")
        if os.lstat(p).st_size != rec.get("bytes"):
            raise ChecksumError(f"{p}: {os.lstat(p).st_size} bytes, {manifest} records {rec.get('bytes')} "
                                "(truncated, extended or replaced)")
    names = sorted(files)
    crcs = dict(zip(names, _crc_files([d / r for r in names])))
    for rel in sorted(files):
        if crcs[rel] != files[rel].get("crc32"):
            raise ChecksumError(f"{d / rel}: CRC32 {crcs[rel]} does not match {files[rel].get('crc32')} "
                                f"recorded in {manifest} (the file was edited or damaged)")
