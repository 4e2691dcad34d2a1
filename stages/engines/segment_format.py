"""A segment's files: their names, Parquet schemas and encodings (the format of
:mod:`cutext.stages.engines.segments`' module docstring), and the checked read of one file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cutext.stages.runtime import artifacts as art

KIND = "cutext.segment"
FORMAT = 1
FIELDS_FORMAT = 2  # a segment of per-field tf and lengths (BM25F)
MANIFEST = "segment.json"
TERMS, POSTINGS, DOCS, TEXT = "terms.parquet", "postings.parquet", "docs.parquet", "text.parquet"
COLUMNS = "columns.parquet"
POSITIONS = "positions.parquet"
COMPRESSION = "zstd"
_INT32_MAX = 2**31 - 1
# (use_dictionary, column_encoding) per file; the module docstring gives the measurements
_ENCODINGS = {
    TERMS: (["df"], {"term": "DELTA_BYTE_ARRAY"}),
    POSTINGS: (["tf"], {"doc": "DELTA_BINARY_PACKED"}),
    DOCS: (["length"], {"source_id": "DELTA_BYTE_ARRAY"}),
    TEXT: ([], {}),
}
_SCHEMAS = {
    TERMS: pa.schema([("term", pa.large_string()), ("df", pa.int32())]),
    POSTINGS: pa.schema([("doc", pa.int32()), ("tf", pa.int32())]),
    DOCS: pa.schema([("source_id", pa.string()), ("length", pa.int32())]),
    TEXT: pa.schema([("text", pa.large_string())]),
    POSITIONS: pa.schema([("pos", pa.int32())]),
}


def _field_schema(name: str, n_fields: int) -> pa.Schema:
    """The schema of a segment file with ``n_fields`` per-field columns (``tf_f`` / ``length_f``; none: the
    one-field schema)."""
    schema = _SCHEMAS[name]
    if n_fields and name in (POSTINGS, DOCS):
        col = "tf" if name == POSTINGS else "length"
        schema = pa.schema(list(schema) + [(f"{col}_{i}", pa.int32()) for i in range(n_fields)])
    return schema


def _check_in(a: np.ndarray, lo: int, hi: int, what: str) -> None:
    if a.size and (int(a.min()) < lo or int(a.max()) > hi):
        bad = a[(a < lo) | (a > hi)][0]
        raise ValueError(f"{what} must be in [{lo}, {hi}], found {bad}")


def _read_parquet(folder: Path, name: str, n_fields: int = 0, skip: tuple = ()) -> pa.Table:
    """``folder/name`` with the columns and types of ``_SCHEMAS[name]`` (with ``n_fields`` per-field columns:
    :func:`_field_schema`) and no nulls, else ArtifactError; the columns named in ``skip`` are not read (the
    file must still hold them)."""
    f = folder / name
    if not f.is_file():
        raise art.ArtifactNotFoundError(f"{f}: missing segment file")
    schema = _field_schema(name, n_fields)
    try:
        if skip:
            names = pq.read_schema(f).names
            if names != schema.names:
                raise art.ArtifactError(f"{f}: columns {names}, expected {schema.names}")
            schema = pa.schema([fld for fld in schema if fld.name not in skip])
            table = pq.read_table(f, columns=schema.names)
        else:
            table = pq.read_table(f)
    except (OSError, pa.ArrowException) as exc:
        raise art.ArtifactError(f"{f}: unreadable segment file ({exc})") from None
    if table.schema.names != schema.names:
        raise art.ArtifactError(f"{f}: columns {table.schema.names}, expected {schema.names}")
    for fld in schema:
        col = table.column(fld.name)
        kind = "int" if pa.types.is_integer(fld.type) else "string"
        if not art._TYPES[kind](col.type):
            raise art.ArtifactError(f"{f}: column {fld.name!r} must be {fld.type}, got {col.type}")
        if col.null_count:
            raise art.ArtifactError(f"{f}: column {fld.name!r} has nulls")
    try:
        return table.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:  # integers beyond int32
        raise art.ArtifactError(f"{f}: {exc}") from None
