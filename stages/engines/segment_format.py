"""A segment's files: their names, Parquet schemas and encodings (the format of
:mod:`cutext.stages.engines.segments`' module docstring), the checked read of one file, and the partial reads
of a segment that a deletion needs (its ids; the deleted documents' terms and lengths).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cutext.kernels.postings import marked_term_counts
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


def terms_of_docs(df: np.ndarray, doc: np.ndarray, docs: np.ndarray) -> tuple:
    """The local terms that the documents ``docs`` (a bool mask over the segment's documents) hold, and in how
    many of them each (the df those documents add), from a term-major segment's ``df`` and posting ``doc``
    column (one array, or its chunks in a list): (int64 local term ids ascending, int64 counts); ValueError
    for a doc number outside the mask (:func:`cutext.kernels.postings.marked_term_counts`)."""
    return marked_term_counts(df, doc if isinstance(doc, list) else [doc], docs)


def _head(folder: Path) -> tuple:
    """``segment.json`` of a segment read unverified (its files are checked by a full read or a load), with
    ``n_docs`` and ``n_postings`` and the number of fields."""
    meta = art.read_manifest(folder, MANIFEST, KIND, "a cutext segment", verify=False)
    mf = folder / MANIFEST
    fields = meta.get("fields") or ()
    if not isinstance(fields, list | tuple):
        raise art.ArtifactError(f"{mf}: fields {fields!r} is not a list")
    return (art.field_int(meta, "n_docs", mf, lo=0, hi=_INT32_MAX), art.field_int(meta, "n_postings", mf, lo=0),
            len(fields))


def segment_ids(folder) -> pa.Array:
    """The source ids of a segment's documents (pyarrow string, local doc order): ``docs.parquet``'s
    ``source_id`` column alone, its row count checked against ``segment.json`` (ArtifactError)."""
    folder = Path(folder)
    n_docs, _, n_fields = _head(folder)
    skip = ("length", *(f"length_{i}" for i in range(n_fields)))
    ids = _read_parquet(folder, DOCS, n_fields, skip=skip).column("source_id").combine_chunks()
    if len(ids) != n_docs:
        raise art.ArtifactError(f"{folder / DOCS}: {len(ids)} documents, {MANIFEST} records {n_docs}")
    return ids.cast(pa.string())


def deleted_postings(folder, gone) -> tuple:
    """What the documents ``gone`` (local doc numbers) of a segment hold: the df they add to each of their
    terms and their lengths, from the postings' ``doc`` column, the terms and the documents' lengths only
    (O(the segment's postings) read, no tf, no source ids: a deletion's statistics).

    Returns
    -------
    (terms, counts, lengths)
        pyarrow large_string (their distinct terms, ascending), int64 (how many of ``gone`` hold each) and
        int64 (the length of each of ``gone``, in its order).

    Raises
    ------
    ArtifactError
        A file that disagrees with ``segment.json`` (rows) or a doc number outside the segment.
    ValueError
        A number of ``gone`` outside ``[0, n_docs)``.
    """
    folder = Path(folder)
    n_docs, n_postings, n_fields = _head(folder)
    gone = np.asarray(gone, np.int64)
    _check_in(gone, 0, n_docs - 1, "deleted doc")
    skip = ("source_id", *(f"length_{i}" for i in range(n_fields)))
    lengths = _read_parquet(folder, DOCS, n_fields, skip=skip).column("length").to_numpy()
    tt = _read_parquet(folder, TERMS)
    doc = _doc_chunks(folder, n_fields)  # not concatenated: the count runs over the read's chunks
    df = tt.column("df").to_numpy()
    n_doc = sum(len(c) for c in doc)
    if len(lengths) != n_docs or n_doc != n_postings or int(df.sum(dtype=np.int64)) != n_postings:
        raise art.ArtifactError(f"{folder}: {len(lengths)} documents, {n_doc} postings and df summing to "
                                f"{int(df.sum(dtype=np.int64))}; {MANIFEST} records {n_docs} and {n_postings}")
    mask = np.zeros(n_docs, bool)
    mask[gone] = True
    try:  # the doc numbers' range is checked in the same pass
        local, counts = terms_of_docs(df, doc, mask)
    except ValueError as exc:
        raise art.ArtifactError(f"{folder / POSTINGS}: doc numbers outside [0, {n_docs}) ({exc})") from None
    terms = tt.column("term").combine_chunks().take(pa.array(local))
    return terms, counts.astype(np.int64), lengths[gone].astype(np.int64)


def _doc_chunks(folder: Path, n_fields: int) -> list:
    """The ``doc`` column of a segment's postings alone (no tf read), as the read's int32 chunks."""
    col = _read_parquet(folder, POSTINGS, n_fields, skip=("tf", *(f"tf_{i}" for i in range(n_fields)))).column("doc")
    return [c.to_numpy() for c in col.chunks]


def _doc_column(folder: Path, n_fields: int) -> np.ndarray:
    """The ``doc`` column of a segment's postings alone (no tf read), as one array."""
    chunks = _doc_chunks(folder, n_fields)
    if len(chunks) == 1:
        return chunks[0]
    return np.concatenate(chunks) if chunks else np.zeros(0, np.int32)


def postings_doc(folder, n_postings: int, n_docs: int) -> np.ndarray:
    """The local doc number of each posting of a segment (term-major), read from its postings file alone.

    Returns
    -------
    numpy int32 array (n_postings,)

    Raises
    ------
    ArtifactError
        A row count other than ``n_postings`` or a doc number outside ``[0, n_docs)``, naming the file.
    """
    folder = Path(folder)
    doc = _doc_column(folder, _head(folder)[2])
    f = folder / POSTINGS
    if len(doc) != n_postings:
        raise art.ArtifactError(f"{f}: {len(doc)} postings, {MANIFEST} and df record {n_postings}")
    art.check_range(doc, 0, n_docs - 1, "doc numbers", f)
    return doc


def read_postings_device(folder, n_postings: int, n_docs: int, offsets: np.ndarray, n_fields: int = 0) -> tuple:
    """A segment's ``postings.parquet`` decoded on the current GPU (cudf's Parquet reader: the zstd pages and
    the delta-coded doc numbers are decoded on the device, so only the file's compressed bytes cross the bus),
    checked as :func:`cutext.stages.engines.segments.read_segment` checks the host read.

    Parameters
    ----------
    folder : str or os.PathLike
        The segment.
    n_postings, n_docs : int
        As ``segment.json`` records them (read and checked with the terms and documents).
    offsets : int64 array (n_terms + 1,)
        Each local term's first posting (the cumulative df).
    n_fields : int
        The per-field columns of a BM25F segment (0: one field).

    Returns
    -------
    (doc, tf, field_tf) : cupy int32 arrays (n_postings,), (n_postings,), (F, n_postings) or None

    Raises
    ------
    ArtifactError
        Naming the file: unreadable, other columns, a row count other than ``n_postings``, doc numbers outside
        ``[0, n_docs)`` or not ascending within a term, tf < 1, per-field tf < 0 or not summing to tf.
    ArtifactNotFoundError
        No such file.
    """
    import cudf
    import cupy

    f = Path(folder) / POSTINGS
    if not f.is_file():
        raise art.ArtifactNotFoundError(f"{f}: missing segment file")
    schema = _field_schema(POSTINGS, n_fields)
    try:
        table = cudf.read_parquet(str(f))
    except Exception as exc:  # cudf raises RuntimeError / ValueError / its own types for a damaged file
        raise art.ArtifactError(f"{f}: unreadable segment file ({exc})") from None
    if list(table.columns) != schema.names:
        raise art.ArtifactError(f"{f}: columns {list(table.columns)}, expected {schema.names}")
    if len(table) != n_postings:
        raise art.ArtifactError(f"{f}: {len(table)} postings, {MANIFEST} and df record {n_postings}")
    cols = {}
    for name in schema.names:
        col = table[name]
        if col.has_nulls or col.dtype.kind not in "iu":
            raise art.ArtifactError(f"{f}: column {name!r} must be int32 without nulls, got {col.dtype}")
        cols[name] = cupy.asarray(col.values).astype(np.int32, copy=False)
    del table
    doc, tf = cols["doc"], cols["tf"]
    if n_postings:
        lo, hi, tmin = (int(v) for v in cupy.stack([doc.min(), doc.max(), tf.min()]).get())
        if lo < 0 or hi >= n_docs:
            raise art.ArtifactError(f"{f}: doc numbers must be in [0, {n_docs - 1}], found {lo if lo < 0 else hi}")
        if tmin < 1:
            raise art.ArtifactError(f"{f}: tf must be in [1, {_INT32_MAX}], found {tmin}")
        up = doc[1:] > doc[:-1]
        starts = cupy.asarray(offsets[1:-1])
        up[starts[(starts > 0) & (starts < n_postings)] - 1] = True  # a term's first posting may be below
        if not bool(up.all()):
            raise art.ArtifactError(f"{f}: doc numbers are not strictly ascending within a term")
    field_tf = None
    if n_fields:
        field_tf = cupy.stack([cols[f"tf_{i}"] for i in range(n_fields)])
        if n_postings and (int(field_tf.min()) < 0 or not bool((field_tf.sum(axis=0) == tf).all())):
            raise art.ArtifactError(f"{f}: the columns tf_* are negative or do not sum to tf")
    return doc, tf, field_tf
