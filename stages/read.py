"""Corpus readers: files, lines, JSON Lines, Parquet, CSV (plain or gzip/bz2/zstd/xz, any fsspec URL), archives.

A corpus is a dask DataFrame with one row per document::

    doc_id: int64      dense, 0..N-1 in input order (assigned by :func:`assign_doc_ids`)
    source_id: string  the id the document had in its source (see below)
    text: string       the document text (UTF-8; undecodable bytes replaced by U+FFFD)
    replaced: int32    how many undecodable byte sequences were replaced in this document

Formats (``format=``; ``"auto"`` chooses by file suffix, ignoring a compression suffix):

``files``
    one document per file (a directory or a glob); ``source_id`` is the path relative to the
    directory (or to the glob's fixed prefix).  Chosen for directories and globs of anything that is
    not .jsonl/.json/.ndjson/.parquet/.pq/.csv/.tsv.
``lines``
    one document per line of each text file (a single ``.txt`` file chooses it); a line ends at
    ``\n`` or ``\r\n`` (the terminator is not part of the text), a last line without one is a
    line, and empty lines are empty documents (a file of zero bytes holds no line).
    ``source_id`` is the 0-based line number, prefixed by ``"<file>:"`` when several files are read.
``jsonl``
    one JSON object per line; ``text_column`` (default ``"text"``, or ``"contents"`` when that is
    the column present) may be a list of columns joined by a space (BEIR: ``["title", "text"]``);
    ``id_column`` defaults to the first of ``id``, ``_id``, ``doc_id``, ``docid`` present.
``parquet``, ``csv``
    a table with a text column and an optional id column, as for ``jsonl``.  CSV/TSV quoting is
    RFC 4180's (a quoted field may span lines, ``""`` is a quote); a quoted field that is never
    closed is an error naming the line of its opening quote (it would swallow every later row).

Archives (``.tar``, ``.tar.gz``/``.tgz``, ``.tar.bz2``/``.tbz2``, ``.tar.xz``/``.txz``,
``.tar.zst``, ``.zip``; by suffix) are collections: ``auto`` reads them as ``files``, one document
per member, ``source_id`` = the member path (``./`` dropped; ``"<archive>/<member>"`` when the
archive is one of several inputs); ``format="lines"`` reads one document per line of each member
(``source_id`` = ``"<member>:<line>"``).  Directories, links and other non-regular members, and
hidden members and marker files (the directory rules below) are skipped; a member compressed on
its own (``x.txt.gz``) is decompressed.  Members are streamed from the archive (fsspec file
objects, Python's ``tarfile``/``zipfile``), never extracted to disk.  Table formats inside
archives are not read (extract them).  Reuters-21578's tarball holds SGML files of many articles
each: read as an archive it is one document per file; ``cutext.pipelines.datasets.load_reuters21578``
gives one document per article.

Paths: a path that exists is read as itself even when its name holds ``*``, ``?`` or ``[``
(``a[1].txt``); otherwise such a path is a glob pattern.  ``glob=True`` / ``False`` forces
either reading.

Columns are taken as written: JSON strings and the CSV text/id columns stay strings (no date or
number inference: an id ``"007"`` or ``"2020-01-01"`` is kept verbatim); numbers become their
decimal string.  A UTF-8 byte order mark at the start of a file is dropped.  Source ids missing
from a table become the row number within its file.  ``encoding`` must be ASCII-compatible
(lines are split at the byte ``\n``).

A directory is read recursively; hidden entries (a path component starting with ``.``) and the
dataset marker files ``_SUCCESS``, ``_metadata``, ``_common_metadata`` are skipped.

Errors are :class:`CorpusError` (a ``ValueError``) whose message starts with the file's path
and, for JSON Lines, names the 1-based line in the file; a corpus with no document at all (only
empty files) is an error of :func:`assign_doc_ids`.

Uncompressed ``lines``/``jsonl`` files larger than ``blocksize`` are split at line boundaries into
several partitions; everything else is one partition per file (``files``: groups of files of about
``blocksize`` bytes).  A ``.tar`` or ``.zip`` archive is one partition per group of members of
about ``blocksize`` bytes (their member lists give random access); a compressed tar has no
index, so it is one partition read in a single streaming pass (repack as ``.zip`` or ``.tar``
for parallel reading).
"""
from __future__ import annotations

import codecs
import io
import json
import os
import posixpath
import stat
import threading
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from cutext.kernels.backend import array_module, is_gpu, is_gpu_object, to_cudf
from cutext.kernels.backend import meta as frame_meta

COMPRESSIONS = {".gz": "gzip", ".gzip": "gzip", ".bz2": "bz2", ".zst": "zstd", ".zstd": "zstd",
                ".xz": "xz", ".lzma": "xz"}
TABLE_SUFFIXES = {
    ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl",
    ".parquet": "parquet", ".pq": "parquet",
    ".csv": "csv", ".tsv": "csv",
}
ID_CANDIDATES = ("id", "_id", "doc_id", "docid", "docno")
TEXT_CANDIDATES = ("text", "contents", "content", "body")
DEFAULT_BLOCKSIZE = 64 << 20
IGNORED_NAMES = {"_SUCCESS", "_metadata", "_common_metadata"}   # Spark / dask dataset markers
BOM = codecs.BOM_UTF8
# archive suffix -> (kind, compression of the whole archive); ".tar.gz" etc. are ".tar" after
# the compression suffix is stripped
ARCHIVE_SUFFIXES = {".tar": ("tar", None), ".tgz": ("tar", "gzip"), ".taz": ("tar", "gzip"),
                    ".tbz": ("tar", "bz2"), ".tbz2": ("tar", "bz2"), ".txz": ("tar", "xz"),
                    ".tzst": ("tar", "zstd"), ".zip": ("zip", None)}
MAX_MEMBERS_PER_PIECE = 4096

_tls = threading.local()


def _count_replace(exc):
    _tls.replaced = getattr(_tls, "replaced", 0) + 1
    return ("\ufffd", exc.end)


codecs.register_error("cutext_count", _count_replace)


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
    members: list | None = None     # the members to read: zip names, or tar ``(name, data offset, size)``;
                                    # None = every member (a compressed tar, streamed in one pass)


def _strip_compression(path: str) -> tuple[str, str | None]:
    root, ext = posixpath.splitext(path)
    comp = COMPRESSIONS.get(ext.lower())
    return (root, comp) if comp else (path, None)


def _is_glob(fs, fspath: str, glob) -> bool:
    """Whether ``fspath`` is taken as a glob pattern (``glob``: None = auto, True, False)."""
    if glob is None:
        # a path that exists is itself, even when its name holds ``*?[`` (a file ``a[1].txt``)
        return any(ch in fspath for ch in "*?[") and not fs.exists(fspath)
    return bool(glob)


def _fs_and_paths(path, storage_options, glob=None):
    from fsspec.core import url_to_fs

    if isinstance(path, (list, tuple)):
        if not path:
            raise FileNotFoundError("no input path given (empty list)")
        fs, _ = url_to_fs(str(path[0]), **(storage_options or {}))
        files = []
        for p in path:
            files.extend(_fs_and_paths(p, storage_options, glob)[1])
        return fs, files, None
    path = os.fspath(path)
    fs, fspath = url_to_fs(path, **(storage_options or {}))
    if _is_glob(fs, fspath, glob):
        files = sorted(f for f in fs.glob(fspath) if fs.isfile(f))
        root = fspath.split("*")[0].split("?")[0].split("[")[0]
        root = root if root.endswith("/") else posixpath.dirname(root)
        return fs, files, root
    if fs.isdir(fspath):
        files = sorted(f for f in fs.find(fspath) if not _ignored(posixpath.relpath(f, fspath)))
        return fs, files, fspath
    if not fs.exists(fspath):
        hint = ("" if glob is not False or not any(ch in fspath for ch in "*?[")
                else " (glob=False: the name is taken literally, not as a pattern)")
        raise FileNotFoundError(f"{path}: no such file or directory{hint}")
    return fs, [fspath], None


def _ignored(relpath: str) -> bool:
    """Directory entries that are not part of a corpus: hidden paths, dataset marker files."""
    parts = relpath.split("/")
    return any(p.startswith(".") for p in parts) or parts[-1] in IGNORED_NAMES


def _label(path: str, root: str | None) -> str:
    if root:
        rel = posixpath.relpath(path, root)
        return rel
    return posixpath.basename(path)


def archive_kind(path: str) -> tuple[str | None, str | None]:
    """``(kind, compression)`` of an archive path by its suffix: ``("tar", "gzip")`` for ``.tar.gz``
    and ``.tgz``, ``("tar", None)`` for ``.tar``, ``("zip", None)`` for ``.zip``; ``(None, None)``
    for anything else."""
    name = path.lower()
    ext = posixpath.splitext(name)[1]
    if ext in ARCHIVE_SUFFIXES:
        return ARCHIVE_SUFFIXES[ext]
    base, comp = _strip_compression(name)
    if comp is not None and posixpath.splitext(base)[1] == ".tar":
        return "tar", comp
    return None, None


def detect_format(files: list[str], is_collection: bool) -> str:
    """The format ``"auto"`` resolves to for these input files.

    Table suffixes (``.jsonl``, ``.parquet``, ``.csv`` ...) choose their format when all files
    share it; archives (``.tar``, ``.tar.gz``/``.tgz``, ``.tar.bz2``, ``.tar.xz``, ``.zip``) are
    collections read as ``files`` (one document per member); other collections are ``files`` and a
    single other file is ``lines``.
    """
    kinds = set()
    for f in files:
        if archive_kind(f)[0] is not None:
            kinds.add("archive")
            continue
        base, _ = _strip_compression(f)
        kinds.add(TABLE_SUFFIXES.get(posixpath.splitext(base)[1].lower(), "text"))
    if len(kinds) == 1 and kinds.isdisjoint(("text", "archive")):
        return kinds.pop()
    if is_collection or "archive" in kinds:
        return "files"
    return "lines"


def _member_name(name: str) -> str:
    """A member's path as its source id: without a leading ``/`` or ``./``."""
    while name.startswith("./"):
        name = name[2:]
    return name.lstrip("/")


def _archive_members(fs, path: str, kind: str, compression: str | None):
    """The members of an archive to read, in archive order: ``(name, data offset, size)``.

    Directories, links and other non-regular members, hidden members and dataset marker files
    (the rules of directory input, :func:`_ignored`) are left out.  Returns None for a compressed
    tar, whose listing would cost a full decompression: it is read in one streaming pass.
    """
    import tarfile
    import zipfile

    try:
        if kind == "zip":
            with fs.open(path, "rb") as fh, zipfile.ZipFile(fh) as zf:
                out = []
                for info in zf.infolist():
                    ftype = stat.S_IFMT(info.external_attr >> 16)   # 0: no Unix type recorded
                    if info.is_dir() or ftype not in (0, stat.S_IFREG):
                        continue
                    name = _member_name(info.filename)
                    if name and not _ignored(name):
                        out.append((info.filename, name, info.file_size))
                return out
        if compression is not None:
            return None
        with fs.open(path, "rb") as fh, tarfile.open(fileobj=fh, mode="r:") as tf:
            out = []
            for m in tf:   # uncompressed: tarfile seeks over member data, only headers are read
                name = _member_name(m.name)
                if m.isreg() and name and not _ignored(name):
                    out.append((m.name, name, m.offset_data, m.size))
            return out
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as exc:
        raise CorpusError(f"{path}: cannot read {kind} archive: {type(exc).__name__}: {exc}") from None


def _archive_pieces(fs, path: str, fmt: str, prefix: str, opts: dict, blocksize: int,
                    file_index: int) -> list:
    """Pieces of one archive: its members grouped to about ``blocksize`` bytes (a compressed tar:
    one piece, streamed)."""
    kind, comp = archive_kind(path)
    members = _archive_members(fs, path, kind, comp)
    if members is None:
        return [Piece(fmt, [path], [prefix], comp, 0, None, file_index, False, opts, kind, None)]
    pieces, group, size = [], [], 0
    for m in members:
        group.append(m)
        size += m[-1]
        if size >= blocksize or len(group) >= MAX_MEMBERS_PER_PIECE:
            pieces.append(group)
            group, size = [], 0
    if group or not pieces:
        pieces.append(group)
    out = []
    for g in pieces:
        labels = [prefix + m[1] for m in g]
        ref = [m[0] if kind == "zip" else (m[0], m[2], m[3]) for m in g]
        out.append(Piece(fmt, [path], labels, None, 0, None, file_index, False, opts, kind, ref))
    return out


MIN_BLOCKSIZE = 1 << 20
MAX_SMALL_PIECES = 1000


def check_blocksize(blocksize, n_pieces: int | None = None, nbytes: int | None = None) -> int:
    """``blocksize`` as a positive int; with the plan's piece count, refuse a tiny one that shreds the input.

    A blocksize under :data:`MIN_BLOCKSIZE` (1 MiB) is accepted while it splits the input into at most
    :data:`MAX_SMALL_PIECES` (1,000) partitions (small inputs, tests); beyond that every partition is a
    task and its overhead dominates (``blocksize=100`` on 2 MB made 22,000 partitions and ran minutes).

    Raises
    ------
    ValueError
        Not an integer >= 1, or under 1 MiB with more than 1,000 partitions; the message gives the
        accepted range for this input.
    """
    from cutext.stages.params import count

    bs = count("blocksize", blocksize, lo=1)
    if n_pieces is not None and bs < MIN_BLOCKSIZE and n_pieces > MAX_SMALL_PIECES:
        least = -(-int(nbytes) // MAX_SMALL_PIECES) if nbytes else MIN_BLOCKSIZE
        raise ValueError(f"blocksize={bs:,} bytes splits the input{f' ({nbytes:,} bytes)' if nbytes else ''} "
                         f"into {n_pieces:,} partitions; blocksize must be an integer >= {MIN_BLOCKSIZE:,} "
                         f"(1 MiB), or >= {least:,} to stay within {MAX_SMALL_PIECES:,} partitions "
                         f"(default {DEFAULT_BLOCKSIZE:,})")
    return bs


def plan(path, *, format="auto", text_column=None, id_column=None, blocksize=DEFAULT_BLOCKSIZE,
         encoding="utf-8", storage_options=None, glob=None):
    """Expand ``path`` into partition pieces (files are listed and sized; archives' member lists read).

    ``blocksize``: bytes per piece, an integer >= 1; under 1 MiB only while the input makes at most
    1,000 pieces (:func:`check_blocksize`).  Other parameters and the result: see the inner planner
    below.

    Raises
    ------
    ValueError
        A bad ``blocksize`` (:func:`check_blocksize`), plus the errors listed below.
    """
    blocksize = check_blocksize(blocksize)
    fs, pieces, fmt = _plan(path, format=format, text_column=text_column, id_column=id_column,
                            blocksize=blocksize, encoding=encoding, storage_options=storage_options, glob=glob)
    if blocksize < MIN_BLOCKSIZE and len(pieces) > MAX_SMALL_PIECES:
        nbytes = 0
        for f in dict.fromkeys(f for p in pieces for f in p.paths):
            try:
                nbytes += fs.size(f) or 0
            except Exception:
                pass
        check_blocksize(blocksize, len(pieces), nbytes)
    return fs, pieces, fmt


def _plan(path, *, format="auto", text_column=None, id_column=None, blocksize=DEFAULT_BLOCKSIZE,
          encoding="utf-8", storage_options=None, glob=None):
    """Expand ``path`` into partition pieces (files are listed and sized; archives' member lists read).

    ``glob``: None (a path that exists is taken literally, else a path holding ``*?[`` is a
    glob pattern), True (always a pattern) or False (never).

    Returns
    -------
    (fsspec.AbstractFileSystem, list[Piece], str)
        the filesystem, the pieces in input order, and the resolved format.

    Raises
    ------
    FileNotFoundError
        Nothing matches ``path``.
    ValueError
        Unknown ``format``.
    CorpusError
        An archive that cannot be listed, or an archive with a table format (jsonl, parquet, csv).
    """
    if glob is not None and not isinstance(glob, bool):
        raise ValueError(f"glob must be None (auto), True or False, got {glob!r}")
    fs, files, root = _fs_and_paths(path, storage_options, glob)
    if not files:
        raise FileNotFoundError(f"{path}: no input files found")
    is_collection = root is not None or len(files) > 1
    fmt = detect_format(files, is_collection) if format == "auto" else format
    if fmt not in ("files", "lines", "jsonl", "parquet", "csv"):
        raise ValueError(f"unknown format {format!r}; use auto, files, lines, jsonl, parquet or csv")
    archives = [f for f in files if archive_kind(f)[0] is not None]
    if archives and fmt not in ("files", "lines"):
        raise CorpusError(f"{archives[0]}: archives are read with format 'files' (one document per "
                          f"member) or 'lines' (one per line of each member), not {fmt!r}")
    opts = dict(text_column=text_column, id_column=id_column, encoding=encoding)
    pieces: list[Piece] = []
    multi = len(files) > 1

    def archive_prefix(f):
        # a lone archive: source ids are member paths; among other inputs: "<archive>/<member>"
        return _label(f, root) + "/" if multi or root is not None else ""

    if fmt == "files":
        group, size = [], 0

        def flush():
            if group:
                pieces.append(Piece("files", list(group), [_label(g, root) for g in group], options=opts))
                group.clear()

        for i, f in enumerate(files):
            if archive_kind(f)[0] is not None:
                flush()
                size = 0
                pieces.extend(_archive_pieces(fs, f, fmt, archive_prefix(f), opts, blocksize, i))
                continue
            sz = fs.size(f) or 0
            group.append(f)
            size += sz
            if size >= blocksize or len(group) >= MAX_MEMBERS_PER_PIECE:
                flush()
                size = 0
        flush()
        return fs, pieces, fmt
    for i, f in enumerate(files):
        if archive_kind(f)[0] is not None:
            pieces.extend(_archive_pieces(fs, f, fmt, archive_prefix(f), opts, blocksize, i))
            continue
        _, comp = _strip_compression(f)
        label = _label(f, root) if multi else None
        if fmt in ("lines", "jsonl") and comp is None:
            size = fs.size(f) or 0
            nblocks = max(1, -(-size // blocksize))
            for b in range(nblocks):
                start = b * blocksize
                end = None if b == nblocks - 1 else (b + 1) * blocksize
                pieces.append(Piece(fmt, [f], [label], None, start, end, i, True, opts))
        else:
            pieces.append(Piece(fmt, [f], [label], comp, 0, None, i, True, opts))
    return fs, pieces, fmt


# ----------------------------------------------------------------------------- piece readers

def _read_bytes(fs, piece: Piece) -> tuple[bytes, int]:
    """Bytes of the piece and the byte offset where they start in the (uncompressed) file."""
    path = piece.paths[0]
    if piece.compression:
        with fs.open(path, "rb", compression=piece.compression) as fh:
            return fh.read(), 0
    with fs.open(path, "rb") as fh:
        start = piece.start
        if start > 0:
            fh.seek(start - 1)
            head = fh.read(1)
            if head != b"\n":  # the line containing `start` belongs to the previous block
                rest = fh.readline()
                start += len(rest)
        fh.seek(start)
        if piece.end is None:
            data = fh.read()
        else:
            if piece.end <= start:
                return b"", start
            data = fh.read(piece.end - start)
            if data and not data.endswith(b"\n"):
                data += fh.readline()
        return data, start


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


def _first_line_number(fs, piece: Piece, start: int) -> int:
    """0-based line number of byte ``start`` in the piece's file (only used for error messages)."""
    if start == 0 or piece.compression:
        return 0
    with fs.open(piece.paths[0], "rb") as fh:
        n, left = 0, start
        while left > 0:
            chunk = fh.read(min(left, 16 << 20))
            if not chunk:
                break
            n += chunk.count(b"\n")
            left -= len(chunk)
    return n


def _pick(columns, wanted, candidates, what, path):
    if wanted is not None:
        wanted_list = [wanted] if isinstance(wanted, str) else list(wanted)
        missing = [c for c in wanted_list if c not in columns]
        if missing:
            raise CorpusError(f"{path}: missing {what} column(s) {missing}; columns are {list(columns)}")
        return wanted_list
    for c in candidates:
        if c in columns:
            return [c]
    return None


def _table_to_docs(table: pa.Table, piece: Piece, path: str) -> tuple[pa.Array, pa.Array | None]:
    text_cols = _pick(table.column_names, piece.options.get("text_column"), TEXT_CANDIDATES, "text", path)
    if text_cols is None:
        raise CorpusError(f"{path}: no text column (looked for {list(TEXT_CANDIDATES)}); "
                          f"columns are {table.column_names}; pass text_column=")
    id_cols = _pick(table.column_names, piece.options.get("id_column"), ID_CANDIDATES, "id", path)
    for c in text_cols + (id_cols or [])[:1]:
        if table.column_names.count(c) > 1:  # a CSV header may repeat a name
            raise CorpusError(f"{path}: column {c!r} appears {table.column_names.count(c)} times in the "
                              f"header; columns are {table.column_names}")
    parts = []
    for c in text_cols:
        col = table.column(c)
        if not pa.types.is_large_string(col.type):  # one string type for the join below
            col = pc.cast(col, pa.large_string())
        parts.append(pc.fill_null(col, ""))
    text = parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, pa.scalar(" ", pa.large_string()))
    ids = None
    if id_cols is not None:
        ids = pc.cast(table.column(id_cols[0]), pa.large_string())
        if ids.null_count:
            raise CorpusError(f"{path}: id column {id_cols[0]!r} has {ids.null_count} empty ids")
    return pa.chunked_array(text).combine_chunks().cast(pa.large_string()), (
        None if ids is None else pa.chunked_array(ids).combine_chunks())


def _read_json(data: bytes) -> pa.Table:
    """pyarrow's JSON Lines reader, keeping JSON strings as strings.

    Arrow infers ``timestamp`` for strings that look like dates (an id ``"2020-01-01"`` would
    come back as ``"2020-01-01 00:00:00"``); such columns are read again as strings.
    """
    import pyarrow.json as pj

    ro = pj.ReadOptions(block_size=max(1 << 20, min(len(data), 1 << 30)))
    table = pj.read_json(io.BytesIO(data), read_options=ro)
    temporal = [f.name for f in table.schema
                if pa.types.is_timestamp(f.type) or pa.types.is_date(f.type) or pa.types.is_time(f.type)]
    if temporal:
        schema = pa.schema([(c, pa.large_string()) for c in temporal])
        table = pj.read_json(io.BytesIO(data), read_options=ro, parse_options=pj.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="infer"))
    return table


def _jsonl_table(data: bytes, piece: Piece, fs, start: int) -> pa.Table:
    path = piece.paths[0]
    if not data.strip():
        return pa.table({})
    try:
        return _read_json(data)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        first = _first_line_number(fs, piece, start)
        for i, line in enumerate(data.split(b"\n")):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as e:
                raise CorpusError(f"{path}: line {first + i + 1}: invalid JSON: {e}") from None
            if not isinstance(obj, dict):
                raise CorpusError(f"{path}: line {first + i + 1}: expected a JSON object, got {type(obj).__name__}")
        # every line parses alone: mixed types across lines; fall back to pandas
        try:
            rows = [json.loads(line) for line in data.split(b"\n") if line.strip()]
            df = pd.DataFrame.from_records(rows)
            for c in df.columns:
                if df[c].dtype == object:
                    df[c] = df[c].map(lambda v: v if v is None or isinstance(v, str) else json.dumps(v) if isinstance(v, (dict, list)) else str(v))
            return pa.Table.from_pandas(df, preserve_index=False)
        except Exception:
            raise CorpusError(f"{path}: cannot read JSON Lines: {exc}") from None


def read_piece(piece: Piece, fs) -> pd.DataFrame:
    """Read one piece into a pandas DataFrame ``(source_id, text, replaced)``.

    Raises
    ------
    CorpusError
        The file cannot be read or parsed, or lacks the text/id column; the message names the file
        and the line where there is one.
    """
    fmt = piece.format
    try:
        if piece.archive is not None:
            return _read_archive_piece(piece, fs)
        if fmt == "files":
            texts, reps = [], []
            for p in piece.paths:
                _, comp = _strip_compression(p)
                with fs.open(p, "rb", compression=comp) as fh:
                    raw = fh.read()
                encoding = piece.options.get("encoding", "utf-8")
                t, r = decode_counting(_strip_bom(raw, 0, encoding), encoding)
                texts.append(t)
                reps.append(r)
            return _frame(pa.array(piece.labels, pa.large_string()), pa.array(texts, pa.large_string()),
                          np.asarray(reps, np.int32))
        path = piece.paths[0]
        encoding = piece.options.get("encoding", "utf-8")
        if fmt in ("lines", "jsonl"):
            data, start = _read_bytes(fs, piece)
            data = _strip_bom(data, start, encoding)
            if fmt == "lines":
                text, reps = _lines_table(data, piece, fs, start)
                return _frame(None, text, reps)
            record_reps = None
            if not _is_utf8(encoding) or not _valid_utf8(data):
                # decode line by line (a '\n' byte never sits inside a UTF-8 sequence), so
                # that the replacements are counted per record; blank lines hold no record
                decoded = [decode_counting(line, encoding) for line in data.split(b"\n")]
                data = "\n".join(t for t, _ in decoded).encode("utf-8")
                record_reps = [r for t, r in decoded if t.strip(" \t\r")]
            table = _jsonl_table(data, piece, fs, start)
            if table.num_rows == 0:
                return _frame(None, pa.array([], pa.large_string()), np.zeros(0, np.int32))
            text, ids = _table_to_docs(table, piece, path)
            reps = np.zeros(len(text), np.int32)
            if record_reps is not None:
                if len(record_reps) == len(reps):
                    reps[:] = record_reps
                else:  # cannot happen with pyarrow's reader; keep the total exact anyway
                    reps[0] = sum(record_reps)
            return _frame(ids, text, reps)
        if fmt == "parquet":
            import pyarrow.parquet as pq

            with fs.open(path, "rb", compression=piece.compression) as fh:
                table = pq.read_table(fh)
            text, ids = _table_to_docs(table, piece, path)
            return _frame(ids, text, np.zeros(len(text), np.int32))
        if fmt != "csv":
            raise ValueError(fmt)
        text, ids, reps = _read_csv(fs, piece, path, encoding)
        return _frame(ids, text, reps)
    except CorpusError:
        raise
    except _read_errors() as exc:
        where = piece.paths[0] if len(piece.paths) == 1 else f"{piece.paths[0]} (+{len(piece.paths) - 1} files)"
        raise CorpusError(f"{where}: cannot read: {type(exc).__name__}: {exc}") from exc


def _archive_members_data(fs, piece: Piece):
    """Yield ``(source id, bytes)`` of the piece's archive members, in archive order, streaming
    (nothing is extracted to disk; a compressed tar is decompressed once, front to back)."""
    import tarfile
    import zipfile

    path = piece.paths[0]
    if piece.archive == "zip":
        with fs.open(path, "rb") as fh, zipfile.ZipFile(fh) as zf:
            for name, label in zip(piece.members, piece.labels):
                yield label, zf.read(name)
    elif piece.members is not None:   # uncompressed tar: seek to each member's data
        with fs.open(path, "rb") as fh:
            for (name, offset, size), label in zip(piece.members, piece.labels):
                fh.seek(offset)
                data = fh.read(size)
                if len(data) != size:
                    raise EOFError(f"member {name!r} is truncated ({len(data)} of {size} bytes)")
                yield label, data
    else:
        prefix = piece.labels[0] or ""
        with fs.open(path, "rb", compression=piece.compression) as fh, \
                tarfile.open(fileobj=fh, mode="r|") as tf:
            for m in tf:
                name = _member_name(m.name)
                if m.isreg() and name and not _ignored(name):
                    yield prefix + name, tf.extractfile(m).read()


def _decompress_member(data: bytes, name: str) -> bytes:
    """A member compressed on its own (``x.txt.gz`` inside a tar) is decompressed, as a file is."""
    _, comp = _strip_compression(name)
    if comp is None:
        return data
    from fsspec.compression import compr

    with compr[comp](io.BytesIO(data), mode="rb") as fh:
        return fh.read()


def _read_archive_piece(piece: Piece, fs) -> pd.DataFrame:
    """Members of a tar/zip archive as documents: one per member (``files``) or per line of each
    member (``lines``, source id ``"<member>:<line>"``, line 0-based)."""
    import tarfile
    import zipfile

    encoding = piece.options.get("encoding", "utf-8")
    ids, texts, reps = [], [], []
    label = None
    try:
        for label, raw in _archive_members_data(fs, piece):
            raw = _strip_bom(_decompress_member(raw, label), 0, encoding)
            if piece.format == "lines":
                t, r = _lines_table(raw, piece, fs, 0)
                ids.append(pa.array([f"{label}:{i}" for i in range(len(t))], pa.large_string()))
                texts.append(t)
                reps.append(r)
            else:
                t, r = decode_counting(raw, encoding)
                ids.append(label)
                texts.append(t)
                reps.append(r)
    except (tarfile.TarError, zipfile.BadZipFile) + _read_errors() as exc:
        where = f"{piece.paths[0]}" + (f" (after member {label!r})" if label else "")
        raise CorpusError(f"{where}: cannot read {piece.archive} archive: {type(exc).__name__}: {exc}") from exc
    if piece.format == "lines":
        if not texts:
            return _frame(None, pa.array([], pa.large_string()), np.zeros(0, np.int32))
        return _frame(pa.concat_arrays(ids), pa.concat_arrays(texts), np.concatenate(reps).astype(np.int32))
    return _frame(pa.array(ids, pa.large_string()), pa.array(texts, pa.large_string()),
                  np.asarray(reps, np.int32))


def _valid_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _read_csv(fs, piece: Piece, path: str, encoding: str):
    """(text, ids, replaced per row) of a CSV/TSV piece.

    The text and id columns are read as strings (no type inference: id ``007`` stays ``"007"``).
    Undecodable bytes are replaced before parsing; each row is charged the U+FFFD it holds
    (any left over, e.g. in the header, go to the first row so that the total stays exact).
    """
    import pyarrow.csv as pcsv

    delim = "\t" if _strip_compression(path)[0].lower().endswith(".tsv") else ","
    with fs.open(path, "rb", compression=piece.compression) as fh:
        raw = fh.read()
    total = 0
    had_fffd = False
    if not _is_utf8(encoding) or not _valid_utf8(raw):
        had_fffd = "\ufffd".encode() in raw
        t, total = decode_counting(raw, encoding)
        raw = t.encode("utf-8")
    names = list(TEXT_CANDIDATES) + list(ID_CANDIDATES)
    for key in ("text_column", "id_column"):
        v = piece.options.get(key)
        if v is not None:
            names.extend([v] if isinstance(v, str) else v)
    _check_csv_quotes(raw, delim, path)
    convert = pcsv.ConvertOptions(column_types={c: pa.large_string() for c in names})
    try:
        table = pcsv.read_csv(io.BytesIO(raw), parse_options=pcsv.ParseOptions(delimiter=delim, newlines_in_values=True),
                              convert_options=convert)
    except pa.ArrowInvalid as exc:
        raise CorpusError(f"{path}: cannot parse CSV: {exc}") from None
    text, ids = _table_to_docs(table, piece, path)
    reps = np.zeros(len(text), np.int64)
    if total and len(reps):
        if not had_fffd:
            for col in table.columns:
                if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
                    reps += pc.fill_null(pc.count_substring(col, "\ufffd"), 0).to_numpy()
        reps[0] += total - min(int(reps.sum()), total)
    return text, ids, reps.astype(np.int32)


def _check_csv_quotes(raw: bytes, delim: str, path: str) -> None:
    """Raise :class:`CorpusError` when a quoted CSV field is never closed.

    pyarrow's reader (``newlines_in_values=True``) lets such a field run to the end of the file,
    swallowing every later row into one value.  RFC 4180 quoting: a ``"`` opens a quoted field
    only at the start of a field (after a delimiter, a line break or the file start; elsewhere it
    is a literal character, as pyarrow reads it); inside, ``""`` is a quote and ``"`` closes.
    Only the quote characters are visited, so the cost is small beside the parse.
    """
    buf = np.frombuffer(raw, dtype=np.uint8)
    quotes = np.flatnonzero(buf == 34)
    if len(quotes) == 0:
        return
    prev = np.where(quotes > 0, buf[np.maximum(quotes - 1, 0)], 10)
    at_start = (quotes == 0) | np.isin(prev, (ord(delim), 10, 13))
    qs, starts = quotes.tolist(), at_start.tolist()
    n, i, open_at = len(qs), 0, -1
    while i < n:
        if open_at < 0:
            if starts[i]:
                open_at = qs[i]
            i += 1
            continue
        if i + 1 < n and qs[i + 1] == qs[i] + 1:   # "" inside a quoted field
            i += 2
            continue
        open_at = -1                              # the closing quote
        i += 1
    if open_at >= 0:
        line = int(np.count_nonzero(buf[:open_at] == 10)) + 1
        raise CorpusError(f"{path}: line {line}: unterminated quoted field (the quote opened here is "
                          f"never closed, so every later row would be read into this value)")


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


def meta_frame(backend: str = "cpu"):
    """Empty ``(source_id: string, text: string, replaced: int32)`` frame: pandas, or cudf for ``"gpu"``."""
    return frame_meta("corpus", backend)


class _PieceReader:
    """Picklable callable for dask.dataframe.from_map: a piece -> a pandas or cudf partition."""

    def __init__(self, fs, backend: str):
        self.fs = fs
        self.backend = backend

    def __call__(self, piece: Piece):
        if is_gpu(self.backend) and piece.archive is None and piece.format in ("lines", "parquet", "files",
                                                                                "jsonl", "csv"):
            from cutext.stages import gputext  # text read into device buffers (issue 10)

            read = {"lines": gputext.read_lines_device, "parquet": gputext.read_parquet_device,
                    "files": gputext.read_files_device, "jsonl": gputext.read_jsonl_device,
                    "csv": gputext.read_csv_device}[piece.format]
            return read(piece, self.fs)
        df = read_piece(piece, self.fs)
        return to_backend(df, self.backend)


def to_backend(df: pd.DataFrame, backend: str):
    """A host frame as a partition of the resolved ``backend``: itself (``"cpu"``) or cudf (``"gpu"``)."""
    if not is_gpu(backend):
        return df
    return to_cudf(df)


def read_corpus(path, *, format="auto", text_column=None, id_column=None, blocksize=DEFAULT_BLOCKSIZE,
                encoding="utf-8", storage_options=None, glob=None, backend="cpu"):
    """Lazily read a corpus into a dask DataFrame ``(source_id, text, replaced)``, one partition a piece.

    Call :func:`assign_doc_ids` on the result to get the dense ``doc_id`` column.

    Parameters
    ----------
    path : str, os.PathLike or list
        A file, a directory, an archive (``.tar``, ``.tar.gz``/``.tgz``, ``.tar.bz2``, ``.tar.xz``,
        ``.zip``), a glob, or any fsspec URL (``s3://``, ``memory://`` ...).
    format : {"auto", "files", "lines", "jsonl", "parquet", "csv"}
    text_column, id_column : str or list of str, optional
        Column(s) holding the text (joined by a space) and the source id (table formats).
    blocksize : int
        Bytes per partition for splittable inputs.
    encoding : str
        Text encoding of the input; undecodable bytes are replaced and counted.
    storage_options : dict, optional
        fsspec options of the filesystem (credentials, endpoints).
    glob : bool or None
        None (default): a path that exists is read as itself even when its name holds ``*``,
        ``?`` or ``[`` (a file ``a[1].txt``), otherwise such a path is a glob pattern; True: always
        a pattern; False: never (the name is literal).
    backend : {"cpu", "gpu"}
        The resolved backend (:func:`cutext.kernels.backend.resolve_backend`): pandas or cudf
        partitions.  Downstream stages take the library from the partitions.

    Returns
    -------
    (dask.dataframe.DataFrame, list[Piece], str)
        The lazy corpus, its pieces (one per partition) and the resolved format.
    """
    import dask.dataframe as dd

    fs, pieces, fmt = plan(path, format=format, text_column=text_column, id_column=id_column,
                           blocksize=blocksize, encoding=encoding, storage_options=storage_options,
                           glob=glob)
    ddf = dd.from_map(_PieceReader(fs, backend), pieces, meta=meta_frame(backend), enforce_metadata=False,
                      label="read-corpus")
    return ddf, pieces, fmt


class _Numberer:
    def __init__(self, doc_offsets, row_offsets, pieces):
        self.doc_offsets = doc_offsets
        self.row_offsets = row_offsets
        self.pieces = pieces

    def __call__(self, df, partition_info=None):
        i = partition_info["number"]
        n = len(df)
        xp = array_module(df)
        df = df.copy()
        piece = self.pieces[i]
        if piece.numbered:
            src = df["source_id"]
            missing = src.isna()
            if bool(missing.any()):
                prefix = f"{piece.labels[0]}:" if piece.labels[0] else ""
                if is_gpu_object(df):  # the row numbers as strings on the device (issue 10)
                    import cudf

                    filled = cudf.Series(xp.arange(self.row_offsets[i], self.row_offsets[i] + n,
                                                   dtype=np.int64)).astype(str)
                    if prefix:
                        filled = filled.str.insert(0, prefix)
                else:
                    rows = np.arange(self.row_offsets[i], self.row_offsets[i] + n).astype(str)
                    filled = pd.Series([prefix + r for r in rows], dtype=pd.StringDtype("pyarrow"))
                filled.index = src.index
                df["source_id"] = src.where(~missing, filled)
        df.insert(0, "doc_id", xp.arange(self.doc_offsets[i], self.doc_offsets[i] + n, dtype=np.int64))
        return df


def assign_doc_ids(ddf, pieces):
    """Persist the corpus and give every document its dense ``doc_id`` (paper 004 step 2: a scan).

    Source ids missing from the input become row numbers within their file.

    Returns
    -------
    (dask.dataframe.DataFrame, numpy.ndarray)
        The corpus ``(doc_id, source_id, text, replaced)`` and the document count of every partition.

    Raises
    ------
    CorpusError
        The corpus holds no document.
    """
    ddf = ddf.persist()
    counts = np.asarray(ddf.map_partitions(len, meta=(None, "int64")).compute(), dtype=np.int64)
    out, _ = number_documents(ddf, counts, pieces)
    return out, counts


def number_documents(ddf, counts: np.ndarray, pieces):
    """Add the dense ``doc_id`` (and fill line-numbered source ids) given the rows of each partition.

    Parameters
    ----------
    ddf : dask DataFrame, one partition a piece
    counts : int64 array, shape (n_partitions,)
        Documents per partition.
    pieces : list of Piece

    Returns
    -------
    (dask DataFrame, int64 array of shape (n_partitions,))
        The numbered frame and the first doc_id of each partition.

    Raises
    ------
    CorpusError
        The corpus holds no document (the message names the file).
    """
    if counts.sum() == 0:
        paths = list(dict.fromkeys(p for piece in pieces for p in piece.paths))
        where = paths[0] if len(paths) == 1 else f"{paths[0]} and {len(paths) - 1} other file(s)"
        raise CorpusError(f"{where}: the corpus holds no document")
    doc_offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    row_offsets = np.zeros(len(pieces), np.int64)
    seen: dict[int, int] = {}
    for i, p in enumerate(pieces):
        if p.numbered:
            row_offsets[i] = seen.get(p.file_index, 0)
            seen[p.file_index] = row_offsets[i] + counts[i]
    meta = ddf._meta.copy()
    meta.insert(0, "doc_id", array_module(meta).zeros(0, np.int64))
    out = ddf.map_partitions(_Numberer(doc_offsets, row_offsets, pieces), meta=meta,
                             enforce_metadata=False, align_dataframes=False)
    return out, doc_offsets
