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
    one JSON object per line; ``text_column`` may be a list of columns joined by a space; its default
    is the first of ``text``, ``contents``, ``content``, ``body``, ``abstract``, ``description`` present
    (the body), after ``title`` when the table has one (``["title", "text"]`` for BEIR's layout, as
    Anserini indexes it; ``["title", "description"]`` for AG News' ``label, title, description``);
    without any of them the error lists the columns and the ones likely holding the text;
    ``id_column`` defaults to the first of ``id``, ``_id``, ``doc_id``, ``docid`` present.
``parquet``, ``csv``
    a table with a text column and an optional id column, as for ``jsonl``.  CSV/TSV quoting is
    RFC 4180's (a quoted field may span lines, ``""`` is a quote); a quoted field that is never
    closed is an error naming the line of its opening quote (it would swallow every later row).

Archives (``.tar``, ``.tar.gz``/``.tgz``, ``.tar.bz2``/``.tbz2``, ``.tar.xz``/``.txz``,
``.tar.zst``, ``.zip``; by suffix) are collections: ``auto`` reads them as ``files``, one document
per member, ``source_id`` = the member path (``./`` dropped; ``"<archive>/<member>"`` when the
archive is one of several inputs); ``format="lines"`` reads one document per line of each member
(``source_id`` = ``"<member>:<line>"``).  Directories, hidden members and marker files (the
directory rules below) are skipped silently; members whose path has a ``..`` component (path
traversal names), symbolic and hard links and other non-regular members (devices, FIFOs, sparse
files) are skipped with one :class:`ArchiveMemberWarning` per archive giving their counts.  Source
ids are unique: a member whose name was already taken (a tar may hold a path twice) gets ``#2``,
``#3`` ... (the first free suffix), as a frame's ids must be unique too.  Member names that are not
UTF-8 (tar) become ``\\xNN`` escapes in the source id; a zip name flagged as UTF-8 that is not is an
error naming the bytes.  ``members=`` (an :mod:`fnmatch` glob or a list of them, matched against
the member path; ``*`` also matches ``/``) keeps only the matching members, e.g. ``"*/*.txt"`` leaves
a README out.  Without ``members=``, a ``README*``, ``LICENSE*`` / ``LICENCE*`` or ``CHANGES*`` /
``CHANGELOG*`` member whose folder holds no other document while documents live in its subfolders
(BBC's ``bbc/README.TXT`` beside ``bbc/business/...``) describes the collection and is left out, with one
:class:`ArchiveMemberWarning` naming it (:func:`cutext.stages.readers.base.collection_notes`); such a
file among documents of its own folder is read (it may be one).  A ``members=`` pattern that matches
no member of an archive is an error naming the archive, and ``members=`` for an input without an
archive is refused.  A member compressed on its own
(``x.txt.gz``) is decompressed.  Members are
streamed from the archive (fsspec file objects, Python's ``tarfile``/``zipfile``), never extracted to
disk; compressed data is decompressed in 1 MiB pieces, and a file or member that expands more than
``max_ratio`` (default 100) times its compressed bytes is an :class:`ExpansionError` naming the
archive, the member and the ratio (zip/gz bombs; a zip member's declared size is checked while
planning).  Table formats inside
archives are not read (extract them).  Reuters-21578's tarball holds SGML files of many articles
each: read as an archive it is one document per file; ``cutext.pipelines.datasets.load_reuters21578``
gives one document per article.

Paths: a path that exists is read as itself even when its name holds ``*``, ``?`` or ``[``
(``a[1].txt``); otherwise such a path is a glob pattern.  ``glob=True`` / ``False`` forces
either reading.

Columns are taken as written: JSON strings and the CSV text/id columns stay strings (no date or
number inference: an id ``"007"`` or ``"2020-01-01"`` is kept verbatim); numbers become their
decimal string.  A UTF-8 byte order mark at the start of a file is dropped.  Without an id column
the source ids are the row numbers within each file; an id column with a null value is an error
naming the column and the first such line (JSON Lines) or row.  ``text_column`` / ``id_column``
apply to tables only: given for input read as ``files`` or ``lines`` they are refused.
``encoding`` must be a known, ASCII-compatible codec (lines are split at the byte ``\n``); it is
checked before any file is read.

Only regular files, directories and archives are read: a FIFO, a character or block device
(``/dev/zero``), a socket or a broken link is refused from its listing entry, never opened
(opening a FIFO blocks).  A file read as text that looks binary -- NUL bytes or a compression,
archive or image signature in its first 8 KiB, or more than 1 % of its bytes undecodable -- gives
one :class:`BinaryInputWarning` naming it (:func:`binary_reason`; a file split into blocks is
judged by its first block; the GPU reader applies the same function); it is still read as asked.

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
import os
import posixpath
import stat
import uuid
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from cutext.kernels.backend import array_module, is_gpu, is_gpu_object, to_cudf
from cutext.kernels.backend import meta as frame_meta
from cutext.stages.readers.archives import (
    MAX_MEMBERS_PER_PIECE,
    _archive_pieces,
    _read_archive_piece,
    _read_file,
    archive_kind,
    check_members,
)
from cutext.stages.readers.base import (
    _FILE_TYPES,
    DEFAULT_BLOCKSIZE,
    DEFAULT_MAX_RATIO,
    SNIFF_BYTES,
    TABLE_SUFFIXES,
    CorpusError,
    NoDocumentError,
    Piece,
    _count_replace,
    _escape_name,
    _frame,
    _ignored,
    _is_utf8,
    _lines_table,
    _read_errors,
    _strip_bom,
    _strip_compression,
    check_encoding,
    check_max_ratio,
    check_text,
    decode_counting,
)
from cutext.stages.readers.smart import DOC_TEXT_FIELDS, check_fields, is_smart, parse_smart, smart_texts
from cutext.stages.readers.tables import (  # noqa: F401  # the table readers stay importable from here
    KEEP_FORMATS,
    _check_csv_quotes,
    _first_line_number,
    _jsonl_row_line,
    _jsonl_table,
    _kept,
    _pick,
    _read_bytes,
    _read_csv,
    _read_json,
    _table_to_docs,
    _valid_utf8,
    no_text_column,
    read_piece_columns,
)
from cutext.stages.runtime.params import count, param

codecs.register_error("cutext_count", _count_replace)


def input_format(path, format="auto", storage_options=None, glob=None) -> str:
    """The format a read of ``path`` uses (``format`` itself unless ``"auto"``): ``files``, ``lines``,
    ``jsonl``, ``parquet`` or ``csv``; only the listing is read.

    Raises
    ------
    FileNotFoundError
        The path matches nothing.
    """
    if format != "auto":
        return format
    fs, files, root = _fs_and_paths(path, storage_options, glob)
    if not files:
        raise FileNotFoundError(f"{path}: no input files found")
    return _auto_format(fs, files, root is not None or len(files) > 1)


def _auto_format(fs, files: list, is_collection: bool) -> str:
    """:func:`detect_format`, then a single text file whose first non-blank line is ``.I <number>`` is
    ``smart`` (the classic collections' ``CISI.ALL``, ``cacm.all``, ``cran.all.1400`` have no telling suffix)."""
    fmt = detect_format(files, is_collection)
    if fmt != "lines" or len(files) != 1 or archive_kind(files[0])[0] is not None:
        return fmt
    comp = _strip_compression(files[0])[1]
    try:
        with fs.open(files[0], "rb", compression=comp) as fh:
            head = fh.read(SNIFF_BYTES)
    except Exception:  # noqa: BLE001  # unreadable or corrupt here: the read itself names the file and the fault
        return fmt
    return "smart" if is_smart(head.decode("latin-1")) else fmt


def add_max_ratio_option(parser) -> None:
    """Add ``--max-ratio`` (a number, or ``none`` for no limit) to a command-line parser."""
    parser.add_argument("--max-ratio", default=DEFAULT_MAX_RATIO,
                        type=lambda v: None if v.lower() == "none" else float(v),
                        help=f"refuse compressed input that expands more than this many times (zip/gz bombs; "
                             f"default {DEFAULT_MAX_RATIO}; 'none': no limit)")


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
        found = fs.glob(fspath, detail=True)
        files = sorted(f for f, info in found.items() if info.get("type") != "directory")
        for f in files:
            _check_regular(f, found[f])
        root = fspath.split("*")[0].split("?")[0].split("[")[0]
        root = root if root.endswith("/") else posixpath.dirname(root)
        return fs, files, root
    try:
        info = fs.info(fspath)
    except FileNotFoundError:
        hint = ("" if glob is not False or not any(ch in fspath for ch in "*?[")
                else f" ({param('glob', False)}: the name is taken literally, not as a pattern)")
        raise FileNotFoundError(f"{path}: no such file or directory{hint}") from None
    if info.get("type") == "directory":
        found = fs.find(fspath, detail=True)
        files = sorted(f for f in found if not _ignored(posixpath.relpath(f, fspath)))
        for f in files:
            _check_regular(f, found[f])
        return fs, files, fspath
    _check_regular(fspath, info)
    return fs, [fspath], None


def _check_regular(path: str, info: dict) -> None:
    """Refuse what is neither a regular file nor a directory (a FIFO, a device, a socket, a broken
    link), from its listing entry: opening a FIFO blocks and ``/dev/zero`` never ends, so such a path
    is never opened."""
    kind = info.get("type")
    if kind in ("file", "directory"):
        return
    mode = info.get("mode")
    what = _FILE_TYPES.get(stat.S_IFMT(mode)) if isinstance(mode, int) else None
    raise CorpusError(f"{_escape_name(path)}: not a regular file but a {what or kind or 'special file'}; "
                      "only regular files, directories and archives are read (a FIFO or a device "
                      "would block or never end: copy its data to a file first)")


def _label(path: str, root: str | None) -> str:
    """The source id of a file: its path relative to ``root`` (else its name), bytes that are not
    UTF-8 written as ``\\xNN``."""
    if root:
        return _escape_name(posixpath.relpath(path, root))
    return _escape_name(posixpath.basename(path))


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

    bs = count("blocksize", blocksize, lo=1)
    if n_pieces is not None and bs < MIN_BLOCKSIZE and n_pieces > MAX_SMALL_PIECES:
        least = -(-int(nbytes) // MAX_SMALL_PIECES) if nbytes else MIN_BLOCKSIZE
        raise ValueError(f"{param('blocksize', bs)} bytes splits the input{f' ({nbytes:,} bytes)' if nbytes else ''} "
                         f"into {n_pieces:,} partitions; {param('blocksize', bare=True)} must be an integer >= "
                         f"{MIN_BLOCKSIZE:,} "
                         f"(1 MiB), or >= {least:,} to stay within {MAX_SMALL_PIECES:,} partitions "
                         f"(default {DEFAULT_BLOCKSIZE:,})")
    return bs


def plan(path, *, format="auto", text_column=None, id_column=None, blocksize=DEFAULT_BLOCKSIZE,
         encoding="utf-8", storage_options=None, glob=None, max_ratio=DEFAULT_MAX_RATIO, members=None):
    """Expand ``path`` into partition pieces (files are listed and sized; archives' member lists read).

    ``blocksize``: bytes per piece, an integer >= 1; under 1 MiB only while the input makes at most
    1,000 pieces (:func:`check_blocksize`).  ``encoding`` must be a known ASCII-compatible codec
    (:func:`check_encoding`), ``max_ratio`` a number >= 1 or None (:func:`check_max_ratio`),
    ``members`` None or glob pattern(s) (:func:`~cutext.stages.readers.archives.check_members`); all are
    checked before any file is touched.  Other parameters and the result: see the inner planner below.

    Raises
    ------
    ValueError
        A bad ``blocksize`` (:func:`check_blocksize`), ``encoding``, ``max_ratio`` or ``members``, plus
        the errors listed below.
    """
    blocksize = check_blocksize(blocksize)
    encoding = check_encoding(encoding)
    max_ratio = check_max_ratio(max_ratio)
    members = check_members(members)
    fs, pieces, fmt = _plan(path, format=format, text_column=text_column, id_column=id_column,
                            blocksize=blocksize, encoding=encoding, storage_options=storage_options, glob=glob,
                            max_ratio=max_ratio, members=members)
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
          encoding="utf-8", storage_options=None, glob=None, max_ratio=DEFAULT_MAX_RATIO, members=None):
    """Expand ``path`` into partition pieces (files are listed and sized; archives' member lists read).

    ``glob``: None (a path that exists is taken literally, else a path holding ``*?[`` is a
    glob pattern), True (always a pattern) or False (never).  ``members``: None or a tuple of glob
    patterns; only the archive members matching one are documents, and each pattern must match a
    member of every archive read.

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
        An archive that cannot be listed, or an archive with a table format (jsonl, parquet, csv);
        a path that is not a regular file nor a directory (a FIFO, a device, a socket: never
        opened); ``text_column`` / ``id_column`` given for text read as ``files`` or ``lines``;
        ``members`` for an input with no archive, or a pattern matching no member of a listed archive
        (a compressed tar is checked when read).
    ExpansionError
        A zip member that declares more than ``max_ratio`` times its compressed size.
    """
    if glob is not None and not isinstance(glob, bool):
        raise ValueError(f"glob must be None (auto), True or False, got {glob!r}")
    fs, files, root = _fs_and_paths(path, storage_options, glob)
    if not files:
        raise FileNotFoundError(f"{path}: no input files found")
    is_collection = root is not None or len(files) > 1
    fmt = _auto_format(fs, files, is_collection) if format == "auto" else format
    if fmt not in ("files", "lines", "jsonl", "parquet", "csv", "smart"):
        raise ValueError(f"unknown format {format!r}; use auto, files, lines, jsonl, parquet, csv or smart")
    archives = [f for f in files if archive_kind(f)[0] is not None]
    if fmt == "smart":
        return fs, _smart_pieces(files, root, text_column, id_column, encoding, max_ratio), fmt
    if archives and fmt not in ("files", "lines"):
        raise CorpusError(f"{archives[0]}: archives are read with format 'files' (one document per "
                          f"member) or 'lines' (one per line of each member), not {fmt!r}")
    if fmt in ("files", "lines"):
        given = [param(k, v) for k, v in (("text_column", text_column), ("id_column", id_column)) if v is not None]
        if given:
            where = files[0] if len(files) == 1 else f"{files[0]} (+{len(files) - 1} files)"
            unit = "file or archive member" if fmt == "files" else "line"
            raise CorpusError(f"{where}: {' and '.join(given)} applies only to tables (JSON Lines, Parquet, "
                              f"CSV/TSV), but this input is read as {fmt!r}: one document per {unit}, whose "
                              f"text is all of it; drop the option, or pass {param('format')} for a table")
    if members is not None and not archives:
        where = files[0] if len(files) == 1 else f"{files[0]} (+{len(files) - 1} files)"
        raise CorpusError(f"{where}: members={list(members)!r} selects archive members, but this input holds no "
                          "archive (.tar, .tar.gz, .zip ...); drop the option, or pass a glob as the path")
    # read_id tells this read's pieces from another read's (a file warns once per read)
    opts = dict(text_column=text_column, id_column=id_column, encoding=encoding, max_ratio=max_ratio,
                members=members, read_id=uuid.uuid4().hex)
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


def _smart_pieces(files, root, text_column, id_column, encoding, max_ratio) -> list:
    """One piece a SMART file (records are not split across pieces); ``text_column``: its text fields."""
    if id_column is not None:
        raise CorpusError(f"{files[0]}: {param('id_column')} does not apply to a SMART input: its ids are the "
                          ".I numbers; drop the option")
    bad = [f for f in files if archive_kind(f)[0] is not None]
    if bad:
        raise CorpusError(f"{bad[0]}: a SMART input is a file of records, not an archive (extract it)")
    fields = check_fields(text_column, param("text_column")) if text_column is not None else DOC_TEXT_FIELDS
    opts = dict(text_column=fields, encoding=encoding, max_ratio=max_ratio, read_id=uuid.uuid4().hex)
    multi = len(files) > 1
    return [Piece("smart", [f], [_label(f, root) if multi else None], _strip_compression(f)[1], 0, None, i, False,
                  opts) for i, f in enumerate(files)]


def _read_smart(fs, piece: Piece) -> pd.DataFrame:
    """A SMART file's records: ``source_id`` the ``.I`` number (``"<file>:<number>"`` among several files),
    ``text`` the piece's fields (:mod:`cutext.stages.readers.smart`)."""
    path = piece.paths[0]
    encoding = piece.options.get("encoding", "utf-8")
    raw = _read_file(fs, path, piece.compression, piece)
    text, reps = decode_counting(_strip_bom(raw, 0, encoding), encoding)
    check_text(piece, [(path, raw[:SNIFF_BYTES], len(raw), reps, True)])
    starts: list = []
    records = parse_smart(text, path, starts)
    prefix = f"{piece.labels[0]}:" if piece.labels[0] else ""
    texts = smart_texts(records, piece.options["text_column"])
    counts = np.zeros(len(texts), np.int32)
    if reps and len(texts):  # each record's replacements: those of its lines (a '\n' byte is never inside one)
        per_line = np.array([decode_counting(line, encoding)[1] for line in _strip_bom(raw, 0, encoding).split(b"\n")])
        counts[:] = np.add.reduceat(per_line, np.asarray(starts))
    return _frame(pa.array([prefix + rid for rid, _ in records], pa.large_string()),
                  pa.array(texts, pa.large_string()), counts)


# ----------------------------------------------------------------------------- piece readers

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
        if fmt == "smart":
            return _read_smart(fs, piece)
        if fmt == "files":
            texts, reps, checks = [], [], []
            encoding = piece.options.get("encoding", "utf-8")
            for p in piece.paths:
                raw = _read_file(fs, p, _strip_compression(p)[1], piece)
                t, r = decode_counting(_strip_bom(raw, 0, encoding), encoding)
                texts.append(t)
                reps.append(r)
                checks.append((p, raw[:SNIFF_BYTES], len(raw), r, True))
            check_text(piece, checks)
            return _frame(pa.array(piece.labels, pa.large_string()), pa.array(texts, pa.large_string()),
                          np.asarray(reps, np.int32))
        path = piece.paths[0]
        encoding = piece.options.get("encoding", "utf-8")
        if fmt in ("lines", "jsonl"):
            data, start = _read_bytes(fs, piece)
            data = _strip_bom(data, start, encoding)
            if fmt == "lines":
                text, reps = _lines_table(data, piece, fs, start)
                if piece.start == 0:   # a file is judged by its first block: one verdict per file
                    check_text(piece, [(path, data[:SNIFF_BYTES], len(data), int(reps.sum()), True)])
                return _frame(None, text, reps)
            record_reps = None
            if not _is_utf8(encoding) or not _valid_utf8(data):
                # decode line by line (a '\n' byte never sits inside a UTF-8 sequence), so
                # that the replacements are counted per record; blank lines hold no record
                decoded = [decode_counting(line, encoding) for line in data.split(b"\n")]
                if piece.start == 0:   # a file is judged by its first block: one verdict per file
                    check_text(piece, [(path, data[:SNIFF_BYTES], len(data), sum(r for _, r in decoded), True)])
                data = "\n".join(t for t, _ in decoded).encode("utf-8")
                record_reps = [r for t, r in decoded if t.strip(" \t\r")]
            table = _jsonl_table(data, piece, fs, start)
            if table.num_rows == 0:
                return _frame(None, pa.array([], pa.large_string()), np.zeros(0, np.int32))
            text, ids = _table_to_docs(table, piece, path, lambda row: _jsonl_row_line(data, fs, piece, start, row))
            reps = np.zeros(len(text), np.int32)
            if record_reps is not None:
                if len(record_reps) == len(reps):
                    reps[:] = record_reps
                else:  # cannot happen with pyarrow's reader; keep the total exact anyway
                    reps[0] = sum(record_reps)
            return _frame(ids, text, reps)
        if fmt == "parquet":
            import pyarrow.parquet as pq

            if piece.compression:
                table = pq.read_table(io.BytesIO(_read_file(fs, path, piece.compression, piece)))
            else:
                with fs.open(path, "rb") as fh:
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


def meta_frame(backend: str = "cpu"):
    """Empty ``(source_id: string, text: string, replaced: int32)`` frame: pandas, or cudf for ``"gpu"``."""
    return frame_meta("corpus", backend)




def to_backend(df: pd.DataFrame, backend: str):
    """A host frame as a partition of the resolved ``backend``: itself (``"cpu"``) or cudf (``"gpu"``)."""
    if not is_gpu(backend):
        return df
    return to_cudf(df)




class _Numberer:
    def __init__(self, doc_offsets, row_offsets, pieces):
        self.doc_offsets = doc_offsets
        self.row_offsets = row_offsets
        self.pieces = pieces

    def part(self, i: int) -> _Numberer:
        """The numbering of partition ``i`` alone, as partition 0 (what a task of that partition takes)."""
        return _Numberer(self.doc_offsets[i:i + 1], self.row_offsets[i:i + 1], self.pieces[i:i + 1])

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
                if is_gpu_object(df):  # the row numbers as strings on the device
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
    """Persist the corpus and give every document its dense ``doc_id`` (Wakatsuki et al. step 2: a scan).

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
    numberer = document_numberer(counts, pieces)
    meta = ddf._meta.copy()
    meta.insert(0, "doc_id", array_module(meta).zeros(0, np.int64))
    out = ddf.map_partitions(numberer, meta=meta, enforce_metadata=False, align_dataframes=False)
    return out, numberer.doc_offsets


def document_numberer(counts: np.ndarray, pieces):
    """The numbering of :func:`number_documents` as a picklable callable ``f(df, {"number": i})`` that
    numbers partition ``i`` (a partition, or its document table ``(source_id, replaced)``) by itself,
    for a task that reads its partition; ``f.doc_offsets`` is the first doc_id of each partition.

    Raises
    ------
    NoDocumentError (CorpusError)
        The corpus holds no document (the message names the file).
    """
    counts = np.asarray(counts, np.int64)
    if counts.sum() == 0:
        paths = list(dict.fromkeys(p for piece in pieces for p in piece.paths))
        where = paths[0] if len(paths) == 1 else f"{paths[0]} and {len(paths) - 1} other file(s)"
        raise NoDocumentError(f"{where}: the corpus holds no document")
    doc_offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    row_offsets = np.zeros(len(pieces), np.int64)
    seen: dict[int, int] = {}
    for i, p in enumerate(pieces):
        if p.numbered:
            row_offsets[i] = seen.get(p.file_index, p.first_row)
            seen[p.file_index] = row_offsets[i] + counts[i]
    return _Numberer(doc_offsets, row_offsets, pieces)


@dataclass
class CorpusSource:
    """A planned corpus: the lazy reader and what the compute context needs to know.

    Attributes
    ----------
    path : str, os.PathLike or list
        The input as given.
    docs : dask.dataframe.DataFrame
        Lazy ``(source_id: string, text: string, replaced: int32)``, one partition a piece, pandas
        or cudf partitions.
    pieces : list of cutext.stages.readers.files.Piece
    format : str
        The resolved reader format.
    input_bytes : int
        Bytes of the input files (the compute context's size test).
    backend : {"cpu", "gpu"}
        The resolved backend the partitions were made for.
    check_documents : callable, optional
        ``check_documents(table)`` on the read stage's document table ``(source_id, replaced)``
        (a frame input's duplicate-id check, :mod:`cutext.stages.readers.frames`); raises on bad input.
    fs : fsspec.AbstractFileSystem, optional
        The filesystem of the input files (None for a frame): :func:`cutext.stages.readers.source.source_of_pieces`
        reads a subset of the pieces with it.
    frame : dask DataFrame, optional
        A frame input's partitions, one a piece (None for files): its other columns are read from it
        (:func:`cutext.stages.readers.source.kept_columns`).
    """

    path: object
    docs: object
    pieces: list
    format: str
    input_bytes: int
    backend: str
    check_documents: object = None
    fs: object = None
    frame: object = None
