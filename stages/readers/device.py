"""The device readers: lines, Parquet, JSON Lines, CSV and one-document-per-file inputs to device
buffers, one piece a partition; the corpus source (:mod:`cutext.stages.readers.source`) calls
them for cudf partitions, so the same code runs in one process and on dask-cuda workers.

* :func:`read_lines_device` (``format="lines"``): the file's bytes are read on the host and
  copied to the device once; the device checks they are strict UTF-8
  (:func:`cutext.kernels.tokenize.utf8_valid`), splits lines (``\\n``, ``\\r\\n``) and builds
  the text column from the device buffers; a piece holding undecodable bytes goes through the
  host reader (:func:`cutext.stages.readers.files.read_piece`), so the U+FFFD replacements and
  the per-line ``replaced`` counts are the CPU reader's by construction.
* :func:`read_parquet_device`, :func:`read_files_device`: the text of Parquet files by libcudf's
  reader, the bytes of one-document-per-file pieces in one device buffer.
* :func:`read_jsonl_device`, :func:`read_csv_device`: JSON Lines parsed by libcudf, CSV/TSV parsed
  here (:func:`csv_layout`, :func:`csv_column`), each only when device checks find the bytes in a
  subset that the parser and the host reader (pyarrow) read alike; else the host reader (a
  ``DEBUG`` message of this module's logger says why).

Array code over numpy or cupy (the kernels have numba twins).
"""
from __future__ import annotations

import logging
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from cutext.kernels.backend import to_cudf, to_host
from cutext.kernels.tokenize import split_lines, utf8_valid
from cutext.stages.readers.archives import _read_file
from cutext.stages.readers.base import (
    BOM,
    ID_CANDIDATES,
    SNIFF_BYTES,
    TEXT_CANDIDATES,
    CorpusError,
    _is_utf8,
    _read_errors,
    _strip_compression,
    check_text,
)
from cutext.stages.readers.files import _pick, _read_bytes, read_piece
from cutext.stages.readers.pread import _pinned, _pread_into, _pread_to_device
from cutext.stages.runtime.compute import StepClock, device_memory_budget
from cutext.stages.runtime.compute import step_profile as profile

log = logging.getLogger(__name__)


def _xp(a):
    """numpy or cupy, the module of ``a``."""
    return __import__("cupy") if type(a).__module__.startswith("cupy") else np


__all__ = ["read_lines_device", "read_parquet_device", "read_files_device",
           "read_jsonl_device", "jsonl_plain", "jsonl_records",
           "read_csv_device", "csv_layout", "csv_plain", "csv_column",
           "read_piece_bytes", "piece_to_device", "piece_device_bytes", "split_lines", "strings_series", "profile"]


def _arrow_nbytes(arr) -> int:
    """Bytes of text of a pyarrow LargeStringArray (its last offset; ``.offsets`` is not in every pyarrow)."""
    return int(np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset + len(arr)])


def cudf_strings(arr):
    """A pyarrow LargeStringArray as a cudf Series (index 0..n-1), with 32-bit offsets when they fit."""

    if len(arr) == 0 or _arrow_nbytes(arr) < 2**31 - 1:
        arr = arr.cast(pa.string())
    return to_cudf(arr).reset_index(drop=True)


# ----------------------------------------------------------------------------- read (lines)

def strings_series(chars, offsets):
    """A cudf strings Series over device buffers (no nulls): int32 offsets when they fit.

    Parameters
    ----------
    chars : cupy uint8 array
    offsets : cupy int64 array, shape (n + 1,), ``offsets[0] == 0``
    """
    import cudf
    import pylibcudf as plc

    n = len(offsets) - 1
    total = int(offsets[-1]) if n else 0
    if total == 0:
        return to_cudf(pa.array([""] * n, type=pa.string()))
    if total < 2**31 - 1:
        off, tid = offsets.astype(np.int32), plc.TypeId.INT32
    else:
        off, tid = offsets, plc.TypeId.INT64
    off_col = plc.Column(plc.DataType(tid), n + 1, plc.gpumemoryview(off), None, 0, 0, [])
    col = plc.Column(plc.DataType(plc.TypeId.STRING), n, plc.gpumemoryview(chars), None, 0, 0, [off_col])
    return cudf.Series.from_pylibcudf(col)


def _piece_range(fh, piece) -> tuple[int, int, bytes]:
    """(start, end, tail) of an uncompressed ``lines`` piece of the open file ``fh``: the bytes
    ``[start, end)`` and then ``tail`` are the piece as ``_read_bytes`` of :mod:`cutext.stages.readers.files`
    gives them (the line that holds the range's first byte belongs to the previous piece; a range that
    ends inside a line is extended to the line's end).  ``end <= start``: the piece is empty."""
    import os

    size = os.fstat(fh.fileno()).st_size
    start = piece.start
    if start > 0:
        fh.seek(start - 1)
        if fh.read(1) != b"\n":
            start += len(fh.readline())
    end = size if piece.end is None else min(piece.end, size)
    tail = b""
    if end > start and piece.end is not None and end < size:
        fh.seek(end - 1)
        if fh.read(1) != b"\n":
            tail = fh.readline()
    return start, end, tail


def _local_plain(fs, piece) -> bool:
    from fsspec.implementations.local import LocalFileSystem

    return not piece.compression and isinstance(fs, LocalFileSystem)


def read_piece_bytes(fs, piece, alloc=np.empty):
    """The bytes of an uncompressed local ``lines`` piece, as ``_read_bytes`` of
    :mod:`cutext.stages.readers.files` gives them (the line that holds the range's first byte belongs to
    the previous piece; a range that ends inside a line is extended to the line's end), read into
    one buffer of ``alloc(n, uint8)`` (e.g. pinned host memory) by parallel ``preadv``.

    Returns
    -------
    (uint8 array, int) or None
        The bytes and their offset in the file; None where this reader does not apply (not a
        local file, compressed): use ``_read_bytes`` then.
    """
    if not _local_plain(fs, piece):
        return None
    with open(piece.paths[0], "rb") as fh:
        start, end, tail = _piece_range(fh, piece)
        if end <= start:
            return alloc(0, np.uint8), start
        out = alloc(end - start + len(tail), np.uint8)
        _pread_into(fh.fileno(), out[:end - start], start)
        out[end - start:] = np.frombuffer(tail, np.uint8)
    return out, start


def piece_bytes(piece, fs, alloc=np.empty) -> np.ndarray:
    """The bytes of a UTF-8 ``lines`` piece as the host reader takes them (``_read_bytes`` of
    :mod:`cutext.stages.readers.files`: the range extended to whole lines), the byte order mark of a file start
    dropped: by :func:`read_piece_bytes` into ``alloc(n, uint8)`` where it applies, else through fsspec
    (decompressed there).

    Raises
    ------
    CorpusError
        The file cannot be read (the message names it).
    """

    try:
        got = read_piece_bytes(fs, piece, alloc=alloc)
        if got is None:
            raw, start = _read_bytes(fs, piece)
            got = np.frombuffer(raw, dtype=np.uint8), start
    except _read_errors() as exc:
        raise CorpusError(f"{piece.paths[0]}: cannot read: {type(exc).__name__}: {exc}") from exc
    return _drop_bom(*got)


def _drop_bom(data, start: int):
    """``data`` (numpy or cupy bytes read from offset ``start`` of a file) without the byte order mark
    that a file may start with."""

    if start == 0 and len(data) >= len(BOM) and bytes(to_host(data[:len(BOM)])) == BOM:
        return data[len(BOM):]
    return data


def piece_to_device(piece, fs):
    """The bytes of :func:`piece_bytes`, read into pinned host memory and copied to the device once
    (~55 GB/s, against ~15 from pageable memory), for the JSON Lines reader (libcudf's JSON reader
    takes host bytes).  Readers that need only the device bytes take :func:`piece_device_bytes` (no
    host buffer of the piece's size).

    Returns
    -------
    (numpy uint8 array, cupy uint8 array)
        The host bytes (still referenced by the caller: the pinned buffer is reused once freed) and
        their device copy, complete when this returns.

    Raises
    ------
    CorpusError
        The file cannot be read (the message names it).
    """
    import cupy

    host = piece_bytes(piece, fs, alloc=_pinned)
    buf = cupy.asarray(host)
    cupy.cuda.get_current_stream().synchronize()  # the pinned buffer may be reused once freed
    return host, buf


def piece_device_bytes(piece, fs):
    """The bytes of :func:`piece_bytes` on the device (cupy uint8, the byte order mark of a file start
    dropped): a local uncompressed piece streams through pinned staging buffers
    (:func:`_pread_to_device`), anything else is read on the host (decompressed there) and copied.

    Raises
    ------
    CorpusError
        The file cannot be read (the message names it).
    """
    import cupy


    if not _local_plain(fs, piece):
        return cupy.asarray(piece_bytes(piece, fs))
    try:
        with open(piece.paths[0], "rb") as fh:
            start, end, tail = _piece_range(fh, piece)
            n = max(end - start, 0)
            buf = cupy.empty(n + len(tail), np.uint8)
            _pread_to_device(fh.fileno(), buf[:n], start)
            if tail:
                buf[n:] = cupy.asarray(np.frombuffer(tail, np.uint8))
    except _read_errors() as exc:
        raise CorpusError(f"{piece.paths[0]}: cannot read: {type(exc).__name__}: {exc}") from exc
    return _drop_bom(buf, start)


def _device_frame(text, ids=None):
    """The read stage's cudf frame ``(source_id, text, replaced)`` of device text: ``ids`` a cudf
    Series or a pyarrow array of strings, or None for null ids (numbered later); ``replaced`` zeros
    (only valid UTF-8 is read on the device)."""
    import cudf
    import cupy


    n = len(text)
    if ids is None:
        ids = pa.nulls(n, pa.string())
    if not isinstance(ids, cudf.Series):
        ids = to_cudf(ids)
    return cudf.DataFrame({"source_id": ids.reset_index(drop=True), "text": text.reset_index(drop=True),
                           "replaced": cupy.zeros(n, dtype=np.int32)})


def read_lines_device(piece, fs):
    """Read a ``lines`` piece into a cudf frame ``(source_id, text, replaced)`` through device buffers.

    Same rows as :func:`cutext.stages.readers.files.read_piece` (then ``to_backend(..., "gpu")``): the
    piece's byte range is read on the host (a local uncompressed file by parallel ``preadv`` into
    pinned memory, :func:`read_piece_bytes`; else through fsspec, decompressed there when
    compressed), the BOM of a file start dropped, the bytes copied to the device once, validated there
    (:func:`cutext.kernels.tokenize.utf8_valid`) and, when valid, split into lines there;
    otherwise (undecodable bytes, another encoding) the host reader reads the
    piece, so replacements and ``replaced`` counts are exactly the CPU reader's.

    Raises
    ------
    CorpusError
        The file cannot be read (the message names it).
    """
    import cupy


    encoding = piece.options.get("encoding", "utf-8")
    if not _is_utf8(encoding):
        return to_cudf(read_piece(piece, fs))
    clock = StepClock(cupy)
    buf = piece_device_bytes(piece, fs)
    clock("read: host bytes + copy to device")
    valid = utf8_valid(buf)
    clock("read: UTF-8 check")
    if not valid:
        del buf
        return to_cudf(read_piece(piece, fs))
    if piece.start == 0:   # valid UTF-8 may still be binary (NUL bytes, a tar): the host reader's rule
        check_text(piece, [(piece.paths[0], bytes(to_host(buf[:SNIFF_BYTES])), len(buf), 0, True)])
    chars, offsets = split_lines(buf)
    del buf
    text = strings_series(chars, offsets)
    clock("read: line split")
    return _device_frame(text)


# ----------------------------------------------------------------------------- read (parquet)

def _joined_text(gdf, text_cols):
    """The text column(s) of a cudf frame as one strings Series: nulls as ``""``, several columns
    joined by a space, column after column (``_table_to_docs`` of :mod:`cutext.stages.readers.files`)."""
    parts = [gdf[c].fillna("").reset_index(drop=True) for c in text_cols]
    text = parts[0]
    for more in parts[1:]:  # "a" + " " + "b", as binary_join_element_wise
        text = text.str.cat(more, sep=" ")
    return text


def read_parquet_device(piece, fs):
    """Read a ``parquet`` piece into a cudf frame ``(source_id, text, replaced)``, text on the device.

    Same rows as :func:`cutext.stages.readers.files.read_piece` (then ``to_backend(..., "gpu")``): the text
    column(s) are read by libcudf's Parquet reader straight into device memory (nulls as ``""``,
    several text columns joined by a space, as ``_table_to_docs`` does on the host); the id column,
    if any, is read alone on the host with pyarrow (its cast to string and its empty-id check are
    the host reader's).  Where this does not apply (not a local uncompressed file, a text column
    that is not a string column, no text column, a file libcudf cannot read) the host reader reads
    the piece, with its error messages.

    Raises
    ------
    CorpusError
        A missing column named by ``text_column``/``id_column``, or empty ids (the message names
        the file).
    """
    import cudf
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from fsspec.implementations.local import LocalFileSystem


    path = piece.paths[0]
    if piece.compression or not isinstance(fs, LocalFileSystem):
        return to_cudf(read_piece(piece, fs))
    try:
        schema = pq.read_schema(path)
    except Exception:  # noqa: BLE001 - the host reader reports the file's problem
        return to_cudf(read_piece(piece, fs))
    names = schema.names
    text_cols = _pick(names, piece.options.get("text_column"), TEXT_CANDIDATES, "text", path)
    if text_cols is None or not all(pa.types.is_string(schema.field(c).type)
                                    or pa.types.is_large_string(schema.field(c).type) for c in text_cols):
        return to_cudf(read_piece(piece, fs))
    id_cols = _pick(names, piece.options.get("id_column"), ID_CANDIDATES, "id", path)
    try:
        gdf = cudf.read_parquet(path, columns=list(dict.fromkeys(text_cols)))
    except Exception:  # noqa: BLE001 - the host reader reports the file's problem
        return to_cudf(read_piece(piece, fs))
    text = _joined_text(gdf, text_cols)
    ids = None
    if id_cols is not None:
        col = pq.read_table(path, columns=[id_cols[0]]).column(0)
        ids = pc.cast(col, pa.large_string())
        if ids.null_count:
            raise CorpusError(f"{path}: id column {id_cols[0]!r} has {ids.null_count} empty ids")
        ids = pa.chunked_array(ids).combine_chunks().cast(pa.string())
    return _device_frame(text, ids)


# ----------------------------------------------------------------------------- read (jsonl)

_ESCAPE_NEXT = np.zeros(256, dtype=bool)
_ESCAPE_NEXT[list(b'"/bfnrtu')] = True


def jsonl_plain(data) -> bool:
    r"""Whether the bytes of a JSON Lines piece are in the subset that libcudf's JSON reader and
    pyarrow's read the same way (checked before :func:`read_jsonl_device` trusts libcudf):
    * no control byte but ``\n`` and ``\r`` (a raw tab or other control inside a string is invalid
      JSON that a lenient reader may accept);
    * every escape is valid JSON: an odd run of backslashes is followed by one of ``"/bfnrtu``, and
      ``\u`` by four hex digits that are not a surrogate (``\ud800``-``\udfff``: pairs and lone
      halves go to the host reader);
    * every line holding a byte other than space / ``\r`` starts with ``{`` and ends with ``}`` (an
      object on every record line; blank lines are not records);
    * every line closes its strings, and outside strings there is none of what libcudf accepts and
      pyarrow refuses: a comma before ``}`` or ``]``, a number with a leading zero (``-0`` followed by
      anything is refused too), ``NaN`` / ``Infinity``.

    Parameters
    ----------
    data : uint8 array (numpy or cupy), the piece's bytes (BOM removed)

    Returns
    -------
    bool
    """
    xp = _xp(data)
    n = len(data)
    if n == 0:
        return True
    if bool(((data < 32) & (data != 10) & (data != 13)).any()):
        return False
    bs = data == 92
    escaped = xp.zeros(n, dtype=bool)  # bytes escaped by a backslash
    if bool(bs.any()):
        nxt = xp.zeros(n, dtype=bool)
        nxt[:-1] = bs[1:]
        prv = xp.zeros(n, dtype=bool)
        prv[1:] = bs[:-1]
        ends = xp.flatnonzero(bs & ~nxt)
        starts = xp.flatnonzero(bs & ~prv)
        e = ends[((ends - starts) % 2) == 0]  # odd runs: the last backslash escapes the next byte
        if len(e):
            if bool((e + 1 >= n).any()):
                return False
            escaped[e + 1] = True
            c = data[e + 1]
            if not bool(xp.asarray(_ESCAPE_NEXT)[c].all()):
                return False
            u = e[c == ord("u")]
            if len(u):
                if bool((u + 5 >= n).any()):
                    return False
                hx = data[u[:, None] + xp.arange(2, 6)]
                low = hx | 0x20
                if not bool((((hx >= 48) & (hx <= 57)) | ((low >= 97) & (low <= 102))).all()):
                    return False
                h1 = low[:, 1]
                if bool(((low[:, 0] == ord("d")) & (((h1 >= ord("8")) & (h1 <= ord("9")))
                                                    | ((h1 >= ord("a")) & (h1 <= ord("f"))))).any()):
                    return False
    pos, line, newline_count = _record_bytes(data)
    if len(pos) == 0:
        return True
    quote = (data == ord('"')) & ~escaped
    if bool(quote.any()) and bool((xp.bincount(newline_count[quote]) % 2).any()):
        return False  # a line with an unclosed string
    inside = (xp.cumsum(quote) % 2) == 1  # from an opening quote to the byte before its closing one
    # outside strings, what libcudf accepts and pyarrow refuses: a comma before a closing bracket;
    # a number with a leading zero; NaN / Infinity
    out = pos[~inside[pos]]
    c = data[out]
    prev = xp.zeros(len(out), dtype=np.uint8)
    prev[1:] = c[:-1]
    after = xp.zeros(len(out), dtype=np.uint8)
    after_pos = out + 1
    ok_after = after_pos < n
    after[ok_after] = data[after_pos[ok_after]]
    value_start = (prev == ord(":")) | (prev == ord(",")) | (prev == ord("["))
    digit_after = (after >= 48) & (after <= 57)
    if bool((((c == ord("}")) | (c == ord("]"))) & (prev == ord(","))).any()):
        return False
    if bool((value_start & (((c == ord("0")) & digit_after) | (c == ord("N")) | (c == ord("I"))
                            | ((c == ord("-")) & ((after == ord("0")) | (after == ord("I")))))).any()):
        return False
    first = xp.ones(len(pos), dtype=bool)
    first[1:] = line[1:] != line[:-1]
    last = xp.ones(len(pos), dtype=bool)
    last[:-1] = line[1:] != line[:-1]
    return bool((data[pos[first]] == ord("{")).all()) and bool((data[pos[last]] == ord("}")).all())


def _record_bytes(data):
    """The bytes of a JSON Lines piece other than space, tab, ``\r``, ``\n``: their positions, their
    lines, and the line of every byte (a newline ends its line)."""
    xp = _xp(data)
    newline_count = xp.cumsum(data == 10)
    pos = xp.flatnonzero((data != 32) & (data != 13) & (data != 10) & (data != 9))
    return pos, newline_count[pos], newline_count


def jsonl_records(data) -> int:
    r"""Record lines of a JSON Lines piece: lines holding a byte other than space, ``\r`` and tab."""
    _, line, _ = _record_bytes(data)
    if len(line) == 0:
        return 0
    return int((line[1:] != line[:-1]).sum()) + 1


def _host_reader(piece, fs, what: str):
    """``host(why)``: the piece read by the host reader as a cudf frame, ``why`` logged at DEBUG
    (logger ``cutext.stages.text.device``) -- why a table reader did not parse the piece on the device."""
    def host(why):
        log.debug("%s: %s read by the host reader: %s", piece.paths[0], what, why)
        return to_cudf(read_piece(piece, fs))

    return host


def _table_columns(names, piece):
    """(text columns, id columns or None) of a table piece with columns ``names``, picked as the host
    reader picks them (:func:`cutext.stages.readers.files._pick`); None when a named column is missing (the
    host reader then gives its message)."""

    path = piece.paths[0]
    try:
        return (_pick(names, piece.options.get("text_column"), TEXT_CANDIDATES, "text", path),
                _pick(names, piece.options.get("id_column"), ID_CANDIDATES, "id", path))
    except Exception:  # noqa: BLE001 - a missing named column: the host reader's message
        return None


def read_jsonl_device(piece, fs):
    """Read a ``jsonl`` piece into a cudf frame ``(source_id, text, replaced)`` with libcudf's JSON reader.

    Same rows as :func:`cutext.stages.readers.files.read_piece` (then ``to_backend(..., "gpu")``): the
    piece's bytes are read on the host (:func:`piece_bytes`, pinned; decompressed there when
    compressed), copied to the device once and checked there: strict UTF-8
    (:func:`cutext.kernels.tokenize.utf8_valid`) and :func:`jsonl_plain`.  libcudf parses them; the
    text column(s) must come back as strings (several joined by a space, nulls as ``""``), the id
    column as strings or int64 without nulls, and one row per record line.  Anything else (another
    encoding, undecodable bytes, escapes or values outside that subset, a parse error, a missing
    column) is read by the host reader, so its values, ``replaced`` counts and error messages (naming
    the file and line) are the CPU reader's by construction.

    Raises
    ------
    CorpusError
        The file cannot be read (the message names it), or the host reader's errors.
    """
    import io

    import cudf
    import cupy


    host = _host_reader(piece, fs, "JSON Lines")
    if not _is_utf8(piece.options.get("encoding", "utf-8")):
        return host("encoding")
    clock = StepClock(cupy)
    data, buf = piece_to_device(piece, fs)
    clock("read: host bytes + copy to device")
    if not utf8_valid(buf):
        return host("not UTF-8")
    if not jsonl_plain(buf):
        return host("outside the subset")
    n = jsonl_records(buf)
    del buf
    clock("read: UTF-8 + JSON subset check")
    if n == 0:
        return host("no record")
    try:
        gdf = cudf.read_json(io.BytesIO(memoryview(data)), lines=True, compression=None)  # decompressed
    except Exception as exc:  # noqa: BLE001 - the host reader reports the file's problem
        return host(f"libcudf: {type(exc).__name__}: {exc}")
    clock("read: libcudf JSON")
    if len(gdf) != n:
        return host(f"libcudf gave {len(gdf)} rows for {n} records")
    picked = _table_columns(list(gdf.columns), piece)
    if picked is None:
        return host("column missing")
    text_cols, id_cols = picked
    from cudf.api.types import is_string_dtype

    if text_cols is None:
        return host("no text column")
    for c in text_cols:  # libcudf does not type a column of nulls only (one record without a title) as strings
        if gdf[c].null_count == len(gdf) and not is_string_dtype(gdf[c].dtype):
            try:
                gdf[c] = gdf[c].astype(str)  # nulls still, read as "" as the host reader reads them
            except Exception:  # noqa: BLE001 - a type libcudf cannot cast: the host reader reads the piece
                return host(f"text column {c} of nulls typed {gdf[c].dtype}")
    if not all(is_string_dtype(gdf[c].dtype) for c in text_cols):
        return host("no text column of strings")
    if id_cols is not None:
        ids = gdf[id_cols[0]]
        if ids.null_count or not (is_string_dtype(ids.dtype) or ids.dtype == np.int64):
            return host(f"id column of {ids.dtype} with {ids.null_count} nulls")
        ids = ids.astype(str)
    else:
        ids = None
    return _device_frame(_joined_text(gdf, text_cols), ids)


# ----------------------------------------------------------------------------- read (csv)

# device bytes a byte of CSV needs at the peak of the device parse: csv_layout's running counts and
# masks (10 on numpy, measured with tracemalloc on 20 Newsgroups as CSV) and csv_column's compaction
# (cupy's boolean indexing makes int64 indices); a larger piece goes to the host reader
CSV_DEVICE_BYTES_PER_BYTE = 12


class CsvLayout(NamedTuple):
    """Where the fields of a CSV/TSV file lie (:func:`csv_layout`); arrays are numpy or cupy, like the data."""

    header_end: int   # byte offset of the line break that ends the header (len(data) when none)
    n_rows: int       # data records (the records after the header)
    n_cols: int       # fields per record
    starts: object    # int64 (n_fields,): first byte of every field, record after record
    ends: object      # int64 (n_fields,): the byte after every field (its delimiter or line break)
    lengths: object   # int64 (n_fields,): bytes of every field's value
    keep: object      # bool (n,): the byte is part of a field's value (not a delimiter, a line break, a
                      # quote that opens or closes a field, nor the first quote of a "" pair)


def csv_layout(data, delim: int) -> CsvLayout | None:
    r"""The fields of a CSV/TSV file, when its bytes are in the subset that the device parse
    (:func:`csv_column`) and pyarrow's reader (the host reader, ``newlines_in_values=True``) read the
    same way; else None.

    The subset:
    * no control byte but ``\n`` and tab outside quoted fields (``\r\n`` line ends, which pyarrow
      accepts, go to the host reader); inside them, any but NUL (20 Newsgroups posts hold form feeds,
      escapes, ``\r\n``);
    * RFC 4180 quoting with nothing left to interpretation: a quote that opens a field stands at the
      field's start (after the delimiter, a line break, the file start, or as the second of a ``""``
      pair), a quote that closes one is followed by the delimiter, a line break, the file end or the
      quote of a ``""`` pair; every quote is closed.  A quote inside an unquoted field (``5" disk``),
      which pyarrow keeps as a character, goes to the host reader;
    * no blank record (an empty line outside quotes, which pyarrow skips); every record has as many
      fields as the header (the first record), and none is made of spaces, tabs and delimiters alone.

    Values are what pyarrow gives: the bytes between the delimiters, a quoted field without its
    quotes and with ``""`` as ``"``, spaces kept.

    Parameters
    ----------
    data : uint8 array (numpy or cupy), the file's bytes (BOM removed)
    delim : int, the delimiter byte (``ord(",")`` or ``ord("\t")``)

    Returns
    -------
    CsvLayout or None
    """
    xp = _xp(data)
    n = len(data)
    if n == 0 or int(data[0]) == 10:
        return None
    idx = np.int32 if n < 2**31 - 1 else np.int64  # running counts: 4 bytes a byte where they fit
    has_ctrl = bool(((data < 32) & (data != 10) & (data != 9)).any())
    if has_ctrl and bool((data == 0).any()):
        return None
    is_quote = data == 34
    q = xp.flatnonzero(is_quote)
    if len(q) % 2:
        return None
    keep = ~is_quote
    dropped = q[:0]                        # quotes that are not part of a value
    if len(q):
        prev = xp.full(len(q), 10, dtype=np.uint8)
        has_prev = q > 0
        prev[has_prev] = data[q[has_prev] - 1]
        nxt = xp.full(len(q), 10, dtype=np.uint8)
        has_next = q < n - 1
        nxt[has_next] = data[q[has_next] + 1]
        opening = (xp.arange(len(q)) % 2) == 0
        ok_open = (prev == delim) | (prev == 10) | (prev == 34)
        ok_close = (nxt == delim) | (nxt == 10) | (nxt == 34)
        if not bool(xp.where(opening, ok_open, ok_close).all()):
            return None
        pair = opening & (prev == 34)      # the second quote of a "" pair is the value's quote
        keep[q[pair]] = True
        dropped = q[~pair]
        outside = (xp.cumsum(is_quote, dtype=idx) & 1) == 0  # a non-quote byte outside quoted fields
    else:
        outside = xp.ones(n, dtype=bool)
    del is_quote
    if has_ctrl and bool(((data < 32) & (data != 10) & (data != 9) & outside).any()):
        return None
    sep = (data == 10) & outside
    dlm = (data == delim) & outside
    del outside
    keep &= ~(sep | dlm)
    seps = xp.flatnonzero(sep)
    dpos = xp.flatnonzero(dlm)
    bpos = xp.flatnonzero(sep | dlm)       # every field's end but the last one's at the file end
    del sep, dlm
    last = int(data[-1]) != 10
    rec_ends = xp.concatenate([seps, xp.asarray([n])]) if last else seps
    rec_starts = xp.concatenate([xp.zeros(1, seps.dtype), seps[:len(rec_ends) - 1] + 1])
    n_rec = len(rec_ends)
    if bool((rec_ends == rec_starts).any()):
        return None  # a blank record
    fields = xp.bincount(xp.searchsorted(rec_ends, dpos), minlength=n_rec) + 1
    n_cols = int(fields[0])
    if not bool((fields == n_cols).all()):
        return None
    solid = (data != 32) & (data != delim)  # a record of blanks and delimiters only is refused
    if delim != 9:
        solid &= data != 9
    csum = xp.cumsum(solid, dtype=idx)
    del solid
    before = xp.where(rec_starts > 0, csum[xp.maximum(rec_starts - 1, 0)], 0)
    if bool(((csum[rec_ends - 1] - before) == 0).any()):
        return None
    del csum
    ends = xp.concatenate([bpos, xp.asarray([n])]) if last else bpos
    starts = xp.concatenate([xp.zeros(1, ends.dtype), ends[:-1] + 1])
    lengths = (ends - starts) - xp.bincount(xp.searchsorted(ends, dropped), minlength=len(ends))
    return CsvLayout(int(rec_ends[0]), n_rec - 1, n_cols, starts, ends, lengths, keep)


def csv_plain(data, delim: int):
    """``(header_end, n_rows)`` of :func:`csv_layout`, or None outside the subset."""
    lay = csv_layout(data, delim)
    return None if lay is None else (lay.header_end, lay.n_rows)


def csv_column(data, lay: CsvLayout, j: int):
    """The values of column ``j`` of the data records (the header excluded), as pyarrow reads them.

    Returns
    -------
    (chars, offsets)
        uint8 array of the values back to back, int64 offsets of shape ``(n_rows + 1,)``; numpy or
        cupy, like the data.
    """
    xp = _xp(data)
    k = xp.arange(lay.n_cols + j, lay.n_cols * (lay.n_rows + 1), lay.n_cols)
    edge = xp.zeros(len(data) + 1, dtype=np.int8)  # +1 where a field of the column starts, -1 after it
    edge[lay.starts[k]] = 1
    edge[lay.ends[k]] -= 1
    inside = xp.cumsum(edge[:-1], dtype=np.int8).view(bool)
    del edge
    offsets = xp.zeros(lay.n_rows + 1, dtype=np.int64)
    xp.cumsum(lay.lengths[k], out=offsets[1:])
    return data[inside & lay.keep], offsets


def read_csv_device(piece, fs):
    """Read a ``csv`` piece (a CSV or TSV file) into a cudf frame ``(source_id, text, replaced)``,
    parsed on the device.

    Same rows as :func:`cutext.stages.readers.files.read_piece` (then ``to_backend(..., "gpu")``): the file's
    bytes go to the device (:func:`piece_device_bytes`: through pinned staging buffers, or read and
    decompressed on the host when compressed) and are checked there: strict UTF-8
    (:func:`cutext.kernels.tokenize.utf8_valid`) and :func:`csv_layout`, which finds every field.  The
    header is split on the host (Python's :mod:`csv`, RFC 4180 as the subset is); its names must be
    unique and non-empty.  The text and id columns are cut out of the device buffer
    (:func:`csv_column`): strings, empty fields as ``""`` (pyarrow's string columns hold no nulls
    either), several text columns joined by a space.  Anything else (another encoding, undecodable
    bytes, CRLF line ends, quoting or widths outside the subset, a missing column) is read by the host
    reader, so its values, ``replaced`` counts and error messages (naming the file and line) are the
    CPU reader's by construction.  So is a file that would need more than ``CSV_DEVICE_BYTES_PER_BYTE``
    (12) device bytes a byte of input than the device has left (the parse's peak; a CSV file is one
    piece, however large).

    libcudf's CSV reader is not used: on 20 Newsgroups posts written by pyarrow (quoted values
    holding line breaks) it split records at the line breaks inside quotes (11,076 rows for 3,000).

    Raises
    ------
    CorpusError
        The file cannot be read (the message names it), or the host reader's errors.
    """
    import csv

    import cudf
    import cupy


    path = piece.paths[0]
    host = _host_reader(piece, fs, "CSV")
    if not _is_utf8(piece.options.get("encoding", "utf-8")):
        return host("encoding")
    delim = "\t" if _strip_compression(path)[0].lower().endswith(".tsv") else ","
    clock = StepClock(cupy)
    buf = piece_device_bytes(piece, fs)
    clock("read: host bytes + copy to device")
    if CSV_DEVICE_BYTES_PER_BYTE * len(buf) > device_memory_budget():
        return host(f"{len(buf)} bytes: too large for the device memory left")
    if not utf8_valid(buf):
        return host("not UTF-8")
    lay = csv_layout(buf, ord(delim))
    clock("read: UTF-8 + CSV layout")
    if lay is None or lay.n_rows == 0:
        return host("outside the subset" if lay is None else "no rows")
    names = next(csv.reader([bytes(to_host(buf[:lay.header_end])).decode("utf-8")], delimiter=delim))
    if len(set(names)) != len(names) or not all(names) or len(names) != lay.n_cols:
        return host(f"header {names}")
    picked = _table_columns(names, piece)
    if picked is None:
        return host("column missing")
    text_cols, id_cols = picked
    if text_cols is None:
        return host("no text column")
    cols = {c: strings_series(*csv_column(buf, lay, names.index(c)))
            for c in dict.fromkeys(text_cols + (id_cols or []))}
    del buf, lay
    clock("read: CSV columns")
    text = _joined_text(cudf.DataFrame({c: cols[c] for c in text_cols}), text_cols)
    return _device_frame(text, None if id_cols is None else cols[id_cols[0]])


# ----------------------------------------------------------------------------- read (files)

def read_files_device(piece, fs):
    """Read a ``files`` piece (one document a file) into a cudf frame ``(source_id, text, replaced)``.

    Same rows as :func:`cutext.stages.readers.files.read_piece`: every file is read on the host
    (decompressed there when compressed) and its BOM dropped; the files' bytes, back to back, are
    copied to the device once and checked there (:func:`cutext.kernels.tokenize.utf8_valid`); the
    text column is built over them (no per-file decode, no pandas).  A file that starts with a
    continuation byte is invalid on its own even when the bytes before it would complete it, so
    such a piece, like any piece that is not valid UTF-8 or another encoding, is read by the host
    reader (exact replacements and ``replaced`` counts).

    Raises
    ------
    CorpusError
        A file cannot be read (the message names it).
    """
    import cupy


    if not _is_utf8(piece.options.get("encoding", "utf-8")):
        return to_cudf(read_piece(piece, fs))
    raws = []
    try:
        for p in piece.paths:
            raw = _read_file(fs, p, _strip_compression(p)[1], piece)  # compressed: under max_ratio
            raws.append(raw[len(BOM):] if raw.startswith(BOM) else raw)
    except CorpusError:  # already names the file (an expansion past max_ratio)
        raise
    except _read_errors() as exc:
        where = piece.paths[0] if len(piece.paths) == 1 else f"{piece.paths[0]} (+{len(piece.paths) - 1} files)"
        raise CorpusError(f"{where}: cannot read: {type(exc).__name__}: {exc}") from exc
    if any(r and (r[0] & 0xC0) == 0x80 for r in raws):
        return to_cudf(read_piece(piece, fs))
    offsets = np.zeros(len(raws) + 1, np.int64)
    np.cumsum([len(r) for r in raws], out=offsets[1:])
    buf = cupy.asarray(np.frombuffer(b"".join(raws), np.uint8))
    heads = [(p, r[:SNIFF_BYTES], len(r), 0, True) for p, r in zip(piece.paths, raws)]
    del raws
    if not utf8_valid(buf):
        return to_cudf(read_piece(piece, fs))
    # valid UTF-8 may still be binary (NUL bytes, an uncompressed tar): the host reader's rule
    check_text(piece, heads)
    return _device_frame(strings_series(buf, cupy.asarray(offsets)), pa.array(piece.labels, pa.string()))
