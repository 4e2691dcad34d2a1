"""What every reader shares: the errors and warnings a bad input gets, the checks of text
(binary-looking input, encodings, lone surrogates), the expansion guard's limits, the piece a
partition is read from, and the lines table (:mod:`cutext.stages.readers.files` describes the formats).
"""
from __future__ import annotations

import codecs
import posixpath
import re
import stat
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from cutext.stages.runtime.params import number, param

COMPRESSIONS = {".gz": "gzip", ".gzip": "gzip", ".bz2": "bz2", ".zst": "zstd", ".zstd": "zstd",
                ".xz": "xz", ".lzma": "xz"}
TABLE_SUFFIXES = {
    ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl",
    ".parquet": "parquet", ".pq": "parquet",
    ".csv": "csv", ".tsv": "csv",
}
ID_CANDIDATES = ("id", "_id", "doc_id", "docid", "docno")
# A table's text: the first of these present (its body), with a ``title`` column joined in front when there is
# one, as Anserini indexes BEIR's title + text (``files._pick``)
TEXT_CANDIDATES = ("text", "contents", "content", "body", "abstract", "description")
TITLE_COLUMN = "title"
DEFAULT_BLOCKSIZE = 64 << 20
IGNORED_NAMES = {"_SUCCESS", "_metadata", "_common_metadata"}   # Spark / dask dataset markers
# the notes a collection ships about itself (collection_notes): README, LICENSE / LICENCE, CHANGES / CHANGELOG
_NOTE_NAME = re.compile(r"(readme|licen[cs]e|changes|changelog)([^a-z0-9].*)?", re.IGNORECASE)
BOM = codecs.BOM_UTF8
# Expansion guard of compressed input (zip/gz bombs).  100x is Apache POI's ZipSecureFile default
# (MIN_INFLATE_RATIO = 0.01); text compresses 3-10x under gzip/bz2/xz/zstd, so real corpora stay far
# below it, while a member can never grow past 100x its compressed bytes in memory (deflate allows
# 1,032x, bzip2 more).  Output under RATIO_GRACE is never refused (tiny repetitive members).
DEFAULT_MAX_RATIO = 100
RATIO_GRACE = 1 << 20
READ_CHUNK = 1 << 20             # decompressed bytes read at a time from a compressed stream
# The text rule: more than this share of undecodable (replaced) bytes, or NUL bytes / a known binary
# signature in the first SNIFF_BYTES, means "this is probably not text" (one warning per file).
REPLACED_SHARE = 0.01
SNIFF_BYTES = 8192
# (offset, signature, what): formats whose bytes are never text in an ASCII-compatible encoding
MAGIC = ((0, b"\x1f\x8b", "gzip"), (0, b"\xfd7zXZ\x00", "xz"), (0, b"\x28\xb5\x2f\xfd", "zstd"),
         (0, b"PK\x03\x04", "zip"), (0, b"PK\x05\x06", "zip (empty)"), (0, b"7z\xbc\xaf\x27\x1c", "7z"),
         (0, b"Rar!\x1a\x07", "rar"), (257, b"ustar", "tar"), (0, b"%PDF-", "PDF"),
         (0, b"\x89PNG\r\n\x1a\n", "PNG"), (0, b"\xff\xd8\xff", "JPEG"), (0, b"\x7fELF", "ELF"))
_FILE_TYPES = {stat.S_IFIFO: "FIFO (named pipe)", stat.S_IFCHR: "character device", stat.S_IFBLK: "block device",
               stat.S_IFSOCK: "socket", stat.S_IFLNK: "symbolic link (broken)", stat.S_IFDIR: "directory"}

_tls = threading.local()


def _count_replace(exc):
    _tls.replaced = getattr(_tls, "replaced", 0) + 1
    return ("\ufffd", exc.end)


def _is_utf8(encoding: str) -> bool:
    return encoding.lower().replace("_", "-") in ("utf-8", "utf8")


def decode_counting(data: bytes, encoding: str = "utf-8") -> tuple[str, int]:
    """Decode bytes, replacing undecodable sequences by U+FFFD; returns (text, replacements)."""
    try:
        return data.decode(encoding), 0
    except UnicodeDecodeError:
        _tls.replaced = 0
        text = data.decode(encoding, errors="cutext_count")
        return text, _tls.replaced


class CorpusError(ValueError):
    """Bad input: the message names the file (and the line where there is one)."""


class NoDocumentError(CorpusError):
    """The input (or the part of it being read) holds no document: the message names the file."""


class ExpansionError(CorpusError):
    """A compressed file or archive member that expands beyond ``max_ratio`` (a zip/gz bomb)."""


class InputWarning(UserWarning):
    """Input that was read, but probably not as the user meant (the message names the file)."""


class BinaryInputWarning(InputWarning):
    """A file read as text that looks binary: NUL bytes or a binary signature at its start, or more
    than 1 % of its bytes undecodable (replaced by U+FFFD)."""


class ArchiveMemberWarning(InputWarning):
    """Archive members skipped (path traversal names, links, devices) or renamed (duplicate names)."""


_WARNED: OrderedDict = OrderedDict()   # (read id, file) -> None: the warnings already given
_WARNED_LOCK = threading.Lock()
_WARNED_MAX = 10_000


def warn_once(key, message: str, category=InputWarning, stacklevel: int = 3) -> bool:
    """Issue ``message`` unless ``key`` was warned about in this process (pieces of one file share the
    key, so a file split into blocks warns once); returns whether it was issued."""
    with _WARNED_LOCK:
        if key in _WARNED:
            return False
        _WARNED[key] = None
        while len(_WARNED) > _WARNED_MAX:
            _WARNED.popitem(last=False)
    warnings.warn(message, category, stacklevel=stacklevel)
    return True


def binary_reason(head: bytes, nbytes: int, replaced: int, file_start: bool = True) -> str | None:
    """Why bytes read as text look binary, or None: the one rule of the CPU and GPU readers.

    Parameters
    ----------
    head : bytes
        The first bytes read (up to :data:`SNIFF_BYTES` are looked at).
    nbytes : int
        Bytes read (after decompression).
    replaced : int
        Undecodable byte sequences replaced by U+FFFD in them (each is at least one byte).
    file_start : bool
        Whether ``head`` is the start of the file (the signatures are only looked for there).

    Returns
    -------
    str or None
        ``"it starts like a gzip stream"``, ``"it holds NUL bytes ..."`` or ``"... undecodable"``
        when more than :data:`REPLACED_SHARE` (1 %) of the bytes were replaced; None for text.
    """
    head = bytes(head[:SNIFF_BYTES])
    if file_start:
        for off, sig, what in MAGIC:
            if head[off:off + len(sig)] == sig:
                return f"it starts like a {what} file"
        if head.startswith(b"BZh") and head[4:10] in (b"1AY&SY", b"\x17rE8P\x90"):
            return "it starts like a bzip2 file"
    nul = head.find(b"\x00")
    if nul >= 0:
        return f"it holds NUL bytes (the first at byte {nul:,})"
    if nbytes and replaced > REPLACED_SHARE * nbytes:
        return (f"{replaced:,} of its {nbytes:,} bytes ({100 * replaced / nbytes:.1f} %) are undecodable "
                f"and were replaced by U+FFFD")
    return None


def check_text(piece, items, archive: str | None = None) -> int:
    """Warn (:class:`BinaryInputWarning`) when bytes read as text look binary (:func:`binary_reason`):
    the one check of the CPU and GPU readers.

    One warning per file and read (pieces of one file share it): it names the first such file (or
    archive member) and counts the others of the piece.

    Parameters
    ----------
    piece : Piece
        The piece being read (``options["read_id"]`` tells one read from another).
    items : iterable of (str, bytes, int, int, bool)
        ``(where, head, nbytes, replaced, file_start)`` per file or member: ``where`` names it (a
        path, or ``"member 'x'"`` with ``archive``), the rest as for :func:`binary_reason`.
    archive : str, optional
        The archive the members belong to.

    Returns
    -------
    int
        How many of ``items`` look binary.
    """
    bad = [(where, why) for where, head, nbytes, replaced, first in items
           if (why := binary_reason(head, nbytes, replaced, first)) is not None]
    if not bad:
        return 0
    where, why = bad[0]
    name = f"{archive}: {where}" if archive else where
    encoding = piece.options.get("encoding") or "utf-8"
    more = ""
    if len(bad) > 1:
        unit = "member(s) of this archive" if archive else "file(s) read with it"
        more = f" ({len(bad) - 1} more {unit} too, e.g. {bad[1][0]})"
    warn_once((piece.options.get("read_id"), archive or where),
              f"{name}: read as text ({encoding}), but {why}{more}: is it really text? A compressed file "
              f"or an archive needs its suffix (.gz, .tar.gz, .zip ...), text in another encoding needs "
              f"{param('encoding')}", BinaryInputWarning, stacklevel=4)
    return len(bad)


def check_max_ratio(max_ratio):
    """``max_ratio`` as a float >= 1, or None (no limit).

    Raises
    ------
    ValueError
        Not None nor a finite number >= 1 (the message names ``max_ratio``).
    """

    return number("max_ratio", max_ratio, lo=1, none_ok=True)


def check_encoding(encoding) -> str:
    """``encoding`` if it is a known, ASCII-compatible text codec (``None`` is ``"utf-8"``).

    Lines are split at the byte ``\n``, so the codec must write ASCII as ASCII (UTF-16/32 do not).

    Raises
    ------
    ValueError
        An unknown codec, a codec that is not a text encoding, or one that is not ASCII-compatible;
        the message names ``encoding``.
    """
    if encoding is None:
        return "utf-8"
    if not isinstance(encoding, str):
        raise ValueError(f"encoding must be a codec name (str), got {encoding!r}")
    try:
        codecs.lookup(encoding)
        probe = "\n\r\t az09{}\"".encode(encoding)
        back = probe.decode(encoding)
    except LookupError as exc:
        raise ValueError(f"{param('encoding', encoding)}: unknown text codec ({exc}); use a Python codec name "
                         f"such as 'utf-8', 'latin-1' or 'cp1252'") from None
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{param('encoding', encoding)}: not usable for text ({exc})") from None
    if probe != "\n\r\t az09{}\"".encode("ascii") or back != "\n\r\t az09{}\"":
        raise ValueError(f"{param('encoding', encoding)} is not ASCII-compatible (lines are split at the byte "
                         f"\\n); convert the input to UTF-8 first")
    return encoding


def _escape_name(name: str) -> str:
    """A file or member name as text: bytes that were not UTF-8 (surrogate escapes) become ``\\xNN``."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def text_array(values, what: str, row_name=None, error=ValueError) -> pa.Array:
    """Python strings as a pyarrow ``large_string`` array; a string that is not valid Unicode (a lone
    surrogate, e.g. from ``os.fsdecode`` or ``bytes.decode(errors="surrogateescape")``) is an error
    naming its row, where pyarrow raises a bare ``UnicodeEncodeError``.

    Parameters
    ----------
    values : sequence of str or None, or a pandas Series
    what : str
        The start of the message: the input and column (``"<pandas DataFrame: 3 rows>: text column 'text'"``).
    row_name : callable, optional
        ``row_name(i)`` names row ``i`` (e.g. with its id); default ``"row i"`` (0-based).
    error : type
        The exception class raised (a ``ValueError`` subclass).

    Returns
    -------
    pyarrow.LargeStringArray

    Raises
    ------
    ValueError (``error``)
        A lone surrogate: the message names the row and the character's position; the exception's
        ``row`` attribute is the row's position in ``values``, its ``detail`` the message without the row.
    """
    try:
        return pa.array(values, type=pa.large_string(), from_pandas=True)
    except UnicodeEncodeError:
        pass
    seq = values.tolist() if hasattr(values, "tolist") else list(values)
    for i, v in enumerate(seq):
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError as exc:
                who = row_name(i) if row_name is not None else f"row {i}"
                detail = (f"holds a lone surrogate {v[exc.start]!r} at character {exc.start} "
                          f"({v[max(0, exc.start - 20):exc.start + 20]!r}); text must be valid Unicode "
                          "(decode bytes with errors='replace' rather than 'surrogateescape')")
                err = error(f"{what}: {who} {detail}")
                err.row, err.detail = i, detail  # a caller that batches names the row in its own terms
                raise err from None
    raise error(f"{what}: holds strings that are not valid Unicode")  # pragma: no cover


@dataclass
class Piece:
    """One partition's worth of input: a file, or a byte range of one, or a group of files."""

    format: str
    paths: list
    labels: list
    compression: str | None = None
    start: int = 0
    end: int | None = None          # byte range [start, end) of an uncompressed file
    file_index: int = 0             # which input file (for line numbering across blocks)
    numbered: bool = False          # source ids are row numbers to be filled in by assign_doc_ids
    options: dict = field(default_factory=dict)
    archive: str | None = None      # "tar" or "zip": ``paths[0]`` is an archive read member by member
    members: list | None = None     # the members to read: zip ``(name, header offset)``, or tar
                                    # ``(name, data offset, size)``;
                                    # None = every member (a compressed tar, streamed in one pass)
    first_row: int = 0              # rows of its file before it, where they are read apart (a build in
                                    # batches): the row numbers of the file's pieces read with it start here


def _strip_compression(path: str) -> tuple[str, str | None]:
    root, ext = posixpath.splitext(path)
    comp = COMPRESSIONS.get(ext.lower())
    return (root, comp) if comp else (path, None)


def _ignored(relpath: str) -> bool:
    """Directory entries that are not part of a corpus: hidden paths, dataset marker files."""
    parts = relpath.split("/")
    return any(p.startswith(".") for p in parts) or parts[-1] in IGNORED_NAMES


def collection_notes(relpaths) -> set:
    """Positions of the entries of a collection (an archive's members, a directory's files, as relative paths)
    that describe it rather than belong to it: a file named ``README*``, ``LICENSE*`` / ``LICENCE*`` or
    ``CHANGES*`` / ``CHANGELOG*`` (any case, e.g. ``README.TXT``) whose folder holds no other document while
    the documents below it live in its subfolders (BBC's ``bbc/README.TXT`` beside ``bbc/business/001.txt``).

    Such a file beside documents of its own folder (Reuters-21578's ``README.txt`` among its ``.sgm`` files) or
    without documents in subfolders (a collection of READMEs) is kept: it may be a document.

    Parameters
    ----------
    relpaths : sequence of str
        ``/``-separated paths relative to the collection's root.

    Returns
    -------
    set of int
        Positions in ``relpaths`` to leave out.
    """
    relpaths = list(relpaths)
    notes = [i for i, p in enumerate(relpaths) if _NOTE_NAME.fullmatch(posixpath.basename(p))]
    if not notes:
        return set()
    skip = set(notes)
    doc_dirs = {posixpath.dirname(p) for i, p in enumerate(relpaths) if i not in skip}
    out = set()
    for i in notes:
        folder = posixpath.dirname(relpaths[i])
        below = folder + "/" if folder else ""
        if folder not in doc_dirs and any(d.startswith(below) for d in doc_dirs):
            out.add(i)
    return out


def _line_offsets(data: bytes) -> np.ndarray:
    """int64 offsets (n+1) of the lines in ``data``; a final newline ends the last line."""
    buf = np.frombuffer(data, dtype=np.uint8)
    nl = np.flatnonzero(buf == 10)
    ends = nl + 1
    if len(buf) and (len(nl) == 0 or nl[-1] != len(buf) - 1):
        ends = np.append(ends, len(buf))
    return np.concatenate([[0], ends]).astype(np.int64)


def _strip_bom(data: bytes, start: int, encoding: str) -> bytes:
    """Drop a UTF-8 byte order mark at the start of a file (it is not part of the first document)."""
    if start == 0 and _is_utf8(encoding) and data.startswith(BOM):
        return data[len(BOM):]
    return data


def _lines_table(data: bytes, piece: Piece, fs, start: int) -> tuple[pa.Array, np.ndarray]:
    """Lines of ``data`` as a string array and per-line replacement counts.

    The line terminator (``\n`` or ``\r\n``) is not part of the line.
    """
    offsets = _line_offsets(data)
    n = len(offsets) - 1
    if n == 0:
        return pa.array([], pa.large_string()), np.zeros(0, np.int32)
    encoding = piece.options.get("encoding", "utf-8")
    if _is_utf8(encoding):
        # strip the terminator: ends are offsets[1:] minus the '\n' (and a '\r' before it)
        buf = np.frombuffer(data, dtype=np.uint8)
        starts = offsets[:-1]
        ends = offsets[1:].copy()
        has_nl = buf[ends - 1] == 10          # only the last line can lack one
        ends[has_nl] -= 1
        has_cr = has_nl & (ends > starts)
        has_cr[has_cr] = buf[ends[has_cr] - 1] == 13
        ends[has_cr] -= 1
        lengths = ends - starts
        keep = np.ones(len(buf), dtype=bool)
        keep[(offsets[1:] - 1)[has_nl]] = False
        keep[ends[has_cr]] = False
        values = buf[keep]
        new_off = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        arr = pa.LargeStringArray.from_buffers(n, pa.py_buffer(new_off), pa.py_buffer(values))
        try:
            arr.validate(full=True)
            return arr, np.zeros(n, np.int32)
        except pa.ArrowInvalid:
            pass
    texts, counts = [None] * n, np.zeros(n, np.int32)
    for i in range(n):
        raw = data[offsets[i]:offsets[i + 1]]
        if raw.endswith(b"\n"):
            raw = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
        texts[i], counts[i] = decode_counting(raw, encoding)
    return pa.array(texts, pa.large_string()), counts


def _read_errors() -> tuple:
    """Exception types that mean "this input cannot be read" (corrupt, truncated, not the format)."""
    import lzma
    import zlib

    errors = [OSError, EOFError, ValueError, pa.ArrowException, lzma.LZMAError, zlib.error]
    try:
        import zstandard

        errors.append(zstandard.ZstdError)
    except ImportError:  # pragma: no cover
        pass
    return tuple(errors)


def _frame(ids, text, reps) -> pd.DataFrame:
    n = len(text)
    if ids is None:
        ids = pa.nulls(n, pa.large_string())
    table = pa.table({"source_id": ids, "text": text, "replaced": pa.array(reps, pa.int32())})
    return table.to_pandas(types_mapper={pa.large_string(): pd.StringDtype("pyarrow")}.get)
