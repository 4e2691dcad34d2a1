"""The table readers: JSON Lines, Parquet and CSV/TSV pieces into documents, and picking their columns.

A piece's byte range (whole lines, also read for ``lines`` pieces), parsing each table format, choosing the
text and id columns (:func:`_pick`) and the other columns an index keeps (:func:`read_piece_columns`);
:func:`cutext.stages.readers.files.read_piece` dispatches to them (its docstring describes the formats).
"""
from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from cutext.stages.readers.archives import _read_file
from cutext.stages.readers.base import (
    ID_CANDIDATES,
    SNIFF_BYTES,
    TEXT_CANDIDATES,
    TITLE_COLUMN,
    CorpusError,
    Piece,
    _is_utf8,
    _read_errors,
    _strip_bom,
    _strip_compression,
    check_text,
    decode_counting,
)
from cutext.stages.runtime.params import param


def _read_bytes(fs, piece: Piece) -> tuple[bytes, int]:
    """Bytes of the piece and the byte offset where they start in the (uncompressed) file."""
    path = piece.paths[0]
    if piece.compression:
        return _read_file(fs, path, piece.compression, piece), 0
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


def _jsonl_row_line(data: bytes, fs, piece: Piece, start: int, row: int) -> str:
    """``"line N"`` (1-based, in the file) of record ``row`` of a JSON Lines piece (messages only)."""
    seen = -1
    for i, line in enumerate(data.split(b"\n")):
        if line.strip():
            seen += 1
            if seen == row:
                return f"line {_first_line_number(fs, piece, start) + i + 1}"
    return f"record {row}"


def _pick(columns, wanted, candidates, what, path):
    """The columns that are the text (``what="text"``) or the id of a table with ``columns``: ``wanted`` if
    given (each must be a column), else for the text the first of ``candidates`` present (the body), after
    ``title`` when the table has one (BEIR's ``title, text``; ``label, title, description`` of AG News), for
    the id the first candidate present; None when no candidate is.

    Raises
    ------
    CorpusError
        A column of ``wanted`` is not in ``columns`` (the message lists them).
    """
    if wanted is not None:
        wanted_list = [wanted] if isinstance(wanted, str) else list(wanted)
        missing = [c for c in wanted_list if c not in columns]
        if missing:
            raise CorpusError(f"{path}: missing {what} column(s) {missing}; columns are {list(columns)}")
        return wanted_list
    body = next((c for c in candidates if c in columns), None)
    if body is None:
        return None
    if what == "text" and TITLE_COLUMN in columns:
        # the title is part of the document, as Anserini and Pyserini index BEIR's title + text
        # (SciFact nDCG@10 0.6769 with it, 0.6644 from the text alone)
        return [TITLE_COLUMN, body]
    return [body]


def no_text_column(label, columns, string_columns=None) -> str:
    """The message for a table ``label`` with ``columns`` and no text column: what was looked for, the
    columns, and the ones that likely hold the text (``string_columns`` other than an id candidate,
    ``title`` first) spelled as the parameter that picks them."""
    looked = f"looked for {list(TEXT_CANDIDATES)}, after {TITLE_COLUMN!r} when present"
    likely = [c for c in (string_columns if string_columns is not None else columns)
              if c not in ID_CANDIDATES and isinstance(c, str)]
    likely.sort(key=lambda c: c != TITLE_COLUMN)
    if not likely:
        return f"{label}: no text column ({looked}); columns are {list(columns)}; pass {param('text_column')}"
    return (f"{label}: no text column ({looked}); columns are {list(columns)}; the text is likely in "
            f"{likely}: pass {param('text_column', likely if len(likely) > 1 else likely[0])}")


def _table_to_docs(table: pa.Table, piece: Piece, path: str, row_name=None) -> tuple[pa.Array, pa.Array | None]:
    """(text, source ids or None) of a table: the text column(s) joined by a space, nulls as ``""``.

    ``row_name(i)`` names row ``i`` of the table in messages (default ``"row i"``, 0-based).

    Raises
    ------
    CorpusError
        No text column, a named column missing or repeated, an id that is null (the message names the
        column and the first such row) or of a type with no string form (a JSON object or list).
    """
    text_cols = _pick(table.column_names, piece.options.get("text_column"), TEXT_CANDIDATES, "text", path)
    if text_cols is None:
        strings = [f.name for f in table.schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
        raise CorpusError(no_text_column(path, table.column_names, strings))
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
        col = table.column(id_cols[0])
        name = row_name or (lambda i: f"row {i}")
        if col.null_count:
            first = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
            raise CorpusError(f"{path}: id column {id_cols[0]!r} has {col.null_count} missing (null) id(s), "
                              f"the first at {name(first)}; every document needs an id (or pass no "
                              f"{param('id_column', bare=True)} and drop the column, for row numbers)")
        try:
            ids = pc.cast(col, pa.large_string())
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise CorpusError(f"{path}: id column {id_cols[0]!r} holds {col.type} values, which have no "
                              f"string form ({exc}); ids must be strings or numbers") from None
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
                raise CorpusError(f"{path}: line {first + i + 1}: expected a JSON object, "
                                  f"got {type(obj).__name__}") from None
        # every line parses alone: mixed types across lines; fall back to pandas
        try:
            rows = [json.loads(line) for line in data.split(b"\n") if line.strip()]
            df = pd.DataFrame.from_records(rows)
            for c in df.columns:
                if df[c].dtype == object:
                    df[c] = df[c].map(lambda v: v if v is None or isinstance(v, str)
                                      else json.dumps(v) if isinstance(v, (dict, list)) else str(v))
            return pa.Table.from_pandas(df, preserve_index=False)
        except Exception:
            raise CorpusError(f"{path}: cannot read JSON Lines: {exc}") from None


KEEP_FORMATS = ("jsonl", "parquet", "csv")  # the table formats, whose other columns an index can keep


def _kept(table: pa.Table, columns: list, path: str) -> pa.Table:
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise CorpusError(f"{path}: {param('keep_columns', bare=True)}: column(s) {missing} not in the input; its "
                          f"columns are {table.column_names}")
    return table.select(list(columns)).combine_chunks()


def read_piece_columns(piece: Piece, fs, columns) -> pa.Table:
    """The columns ``columns`` of a table piece (jsonl, parquet, csv), a row per document of
    :func:`read_piece` in its order: the input's other columns that an index keeps (``keep_columns=`` of
    the bm25 pipeline), with the types the reader gives them (Parquet's own; JSON numbers and booleans,
    strings for JSON strings, dates included; CSV's inferred types).

    Raises
    ------
    CorpusError
        A piece read as files, lines or from an archive (no columns), a column the piece lacks (the
        message names the file, the columns missing and those it has), unreadable input.
    """
    fmt = piece.format
    path = piece.paths[0]
    columns = list(columns)
    if piece.archive is not None or fmt not in KEEP_FORMATS:
        raise CorpusError(f"{path}: {param('keep_columns', bare=True)} keeps columns of a table input "
                          f"({', '.join(KEEP_FORMATS)}); this input is read as {fmt!r}")
    encoding = piece.options.get("encoding", "utf-8")
    try:
        if fmt == "jsonl":
            data, start = _read_bytes(fs, piece)
            data = _strip_bom(data, start, encoding)
            if not _is_utf8(encoding) or not _valid_utf8(data):  # as read_piece decodes it
                data = "\n".join(decode_counting(line, encoding)[0] for line in data.split(b"\n")).encode("utf-8")
            table = _jsonl_table(data, piece, fs, start)
            if table.num_rows == 0:  # a block without a record: no column to look for
                return pa.table({c: pa.nulls(0) for c in columns})
            return _kept(table, columns, path)
        if fmt == "parquet":
            import pyarrow.parquet as pq

            if piece.compression:
                fh = io.BytesIO(_read_file(fs, path, piece.compression, piece))
                return _kept(pq.read_table(fh), columns, path)
            with fs.open(path, "rb") as fh:
                pf = pq.ParquetFile(fh)
                _kept(pa.table({c: pa.nulls(0) for c in pf.schema_arrow.names}), columns, path)
                return pf.read(columns=columns).combine_chunks()
        import pyarrow.csv as pcsv

        delim = "\t" if _strip_compression(path)[0].lower().endswith(".tsv") else ","
        raw = _read_file(fs, path, piece.compression, piece)
        if not _is_utf8(encoding) or not _valid_utf8(raw):
            raw = decode_counting(raw, encoding)[0].encode("utf-8")
        try:
            table = pcsv.read_csv(io.BytesIO(raw), parse_options=pcsv.ParseOptions(delimiter=delim,
                                                                                  newlines_in_values=True))
        except pa.ArrowInvalid as exc:
            raise CorpusError(f"{path}: cannot parse CSV: {exc}") from None
        return _kept(table, columns, path)
    except CorpusError:
        raise
    except _read_errors() as exc:
        raise CorpusError(f"{path}: cannot read: {type(exc).__name__}: {exc}") from exc


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
    raw = _read_file(fs, path, piece.compression, piece)
    total = 0
    had_fffd = False
    if not _is_utf8(encoding) or not _valid_utf8(raw):
        had_fffd = "\ufffd".encode() in raw
        t, total = decode_counting(raw, encoding)
        check_text(piece, [(path, raw[:SNIFF_BYTES], len(raw), total, True)])
        raw = t.encode("utf-8")
    names = [TITLE_COLUMN, *TEXT_CANDIDATES, *ID_CANDIDATES]
    for key in ("text_column", "id_column"):
        v = piece.options.get(key)
        if v is not None:
            names.extend([v] if isinstance(v, str) else v)
    _check_csv_quotes(raw, delim, path)
    convert = pcsv.ConvertOptions(column_types={c: pa.large_string() for c in names})
    try:
        table = pcsv.read_csv(io.BytesIO(raw),
                              parse_options=pcsv.ParseOptions(delimiter=delim, newlines_in_values=True),
                              convert_options=convert)
    except pa.ArrowInvalid as exc:
        raise CorpusError(f"{path}: cannot parse CSV: {exc}") from None
    text, ids = _table_to_docs(table, piece, path, lambda row: f"data row {row + 1} (after the header)")
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
