"""Index segments: the postings of a set of documents, immutable once written, merged at load.

The design is Lucene's segment design (immutable segments, per-segment term dictionaries, tf and
norms stored, scoring from global statistics): a worker writes one segment from its own partitions,
numbering its documents locally ``0 .. n_docs - 1``; a reader lays the segments end to end in commit
order (segment ``s`` starts at global doc id ``doc_base[s]``) and merges their term dictionaries.
Only O(vocabulary) statistics (terms, df, n_docs, sum of lengths) cross workers, and a segment
stores term frequencies and document lengths, not weights, so the BM25 weights (Robertson &
Zaragoza / Lucene BM25, the formulas of :mod:`cutext.stages.text.bm25`) follow from the global N,
avgdl and df at load: scores after any sequence of appends equal a one-shot build.

A segment folder::

    terms.parquet     term: large_string (strictly ascending by UTF-8 bytes), df: int32 (>= 1)
    postings.parquet  doc: int32 (local doc number), tf: int32 (>= 1); term-major: the df[0]
                      postings of terms[0], then those of terms[1], ...; docs ascending within a term
    docs.parquet      source_id: string, length: int32 (tokens, the BM25 document length dl)
    text.parquet      text: large_string, the document's text as read, a row per local doc; only in a
                      segment written with texts (``store_text=True`` of the bm25 pipeline)
    positions.parquet pos: int32, the term positions of every posting (gap-coded within a posting), only in
                      a segment written with them (``positions=True``; :mod:`cutext.stages.engines.phrases`)
    columns.parquet   the input's kept columns (``keep_columns=`` of the bm25 pipeline), their types as
                      read, a row per local doc; only in a segment written with them (``segment.json``'s
                      ``columns`` lists their names); the metadata of filters before top-k
    segment.json      kind "cutext.segment", format, n_docs, n_terms, n_postings, sum_dl, texts (bool),
                      and the size and CRC32 of every file (:func:`cutext.stages.runtime.checksums.seal`)

A segment of a BM25F index (text fields scored apart) is format 2: ``segment.json`` lists its ``fields``
(F names) and the postings and docs files carry a column a field, ``tf_0 .. tf_{F-1}`` (int32 >= 0, the
term's occurrences in field f) after ``tf`` and ``length_0 .. length_{F-1}`` (int32, tokens of field f)
after ``length``.  The postings are those of the union of the fields (a document holds a term if any
field does), and ``tf`` and ``length`` are the sums over the fields, so the files read as the index of
the fields joined.

A term's postings start at ``cumsum(df)`` of the terms before it (no offsets are stored).  Every
file is written under a temporary name and renamed; ``segment.json`` is written last.

Encodings (Parquet's own, read and written by pyarrow and by cudf alike), chosen by measurement on
CACM (203 k postings) and 20 Newsgroups (3.07 M postings): ``doc`` DELTA_BINARY_PACKED (within a
term its deltas are the doc gaps; stored gaps were 1.45 bytes a posting with a dictionary and 1.55
delta-packed against 1.46 on 20 Newsgroups, and cost a prefix sum at read, 33 vs 53 M postings/s),
``tf`` dictionary (RLE / bit-packed indices: most tf are 1), the files zstd: 1.45 (CACM) and 1.46
(20 Newsgroups) bytes a posting, format 1's postings 6.6; ``read_segment`` reads about 45 M postings/s
on two CPU cores (no compression: 1.75 bytes a posting, read 1.5x as fast).
``term`` DELTA_BYTE_ARRAY (the prefix compression of sorted strings, as Lucene's term dictionary
blocks) and ``df`` dictionary: 2.8 to 3.4 bytes a term.  ``text`` is PLAIN under zstd (a dictionary of
whole documents would hold every value once).
"""
from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cutext.kernels.backend import array_module, is_gpu_object, to_host, values
from cutext.kernels.postings import place_runs
from cutext.stages.runtime import artifacts as art
from cutext.stages.runtime import checksums
from cutext.stages.runtime.compute import host_cpus
from cutext.stages.runtime.reprs import short_repr
from cutext.stages.text import bm25 as bm25_stage
from cutext.stages.text.encode import sorted_terms, vocabulary_frame
from cutext.stages.text.tokenize import TokenizerConfig, token_positions
from cutext.stages.text.tokens import WithDocIds, count_partition_summary, tokenize_partition_summary

__all__ = ["Segment", "MergedTerms", "MergedSegments", "SegmentWeights", "write_segment", "read_segment",
           "merge_terms", "merge_segments", "segment_weights", "segments_from_counts", "write_partition_segment",
           "write_text_segment", "read_segment_texts", "live_texts", "text_array", "column_table",
           "read_segment_columns",
           "live_segment", "posting_weights", "segment_heads", "union_terms",
           "postings_bytes", "field_segment", "segment_positions", "write_positions", "read_positions",
           "add_positions", "live_positions", "merge_positions", "run_starts"]

KIND = "cutext.segment"
FORMAT = 1
FIELDS_FORMAT = 2  # a segment of per-field tf and lengths (BM25F)
MANIFEST = "segment.json"
TERMS, POSTINGS, DOCS, TEXT = "terms.parquet", "postings.parquet", "docs.parquet", "text.parquet"
COLUMNS = "columns.parquet"
POSITIONS = "positions.parquet"
COMPRESSION = "zstd"
_INT32_MAX = 2**31 - 1
DEVICE_MERGE_BLOCK = 1 << 26  # postings scattered at a time by merge_segments(device=True)
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


@dataclass(frozen=True)
class Segment:
    """One segment, as read by :func:`read_segment` (or made in memory for :func:`merge_segments`).

    Attributes
    ----------
    terms : pyarrow.LargeStringArray, shape (n_terms,)
        Strictly ascending by UTF-8 bytes.
    df : numpy int64 array, shape (n_terms,)
        Documents of this segment containing each term (>= 1).
    doc : numpy int32 array, shape (n_postings,), or None
        Local document numbers, term-major, ascending within a term (None: read without postings).
    tf : numpy int32 array, shape (n_postings,), or None
    lengths : numpy int32 array, shape (n_docs,)
        Tokens per document (dl).
    source_ids : pyarrow.StringArray, shape (n_docs,), or None
        None: read without them (``read_segment(ids=False)``).
    path : pathlib.Path or None
    meta : dict
        ``segment.json``.
    fields : tuple of str
        The text fields of a BM25F segment (empty: one field).
    field_tf : numpy int32 array, shape (F, n_postings), or None
        Occurrences of each posting's term in each field (rows sum to ``tf``); None without fields or
        postings.
    field_lengths : numpy int32 array, shape (F, n_docs), or None
        Tokens of each field of each document (rows sum to ``lengths``).
    """

    terms: pa.Array
    df: np.ndarray
    doc: np.ndarray | None
    tf: np.ndarray | None
    lengths: np.ndarray
    source_ids: pa.Array
    path: Path | None = None
    meta: dict = field(default_factory=dict)
    fields: tuple = ()
    field_tf: np.ndarray | None = None
    field_lengths: np.ndarray | None = None

    @property
    def n_docs(self) -> int:
        return len(self.lengths)

    @property
    def n_terms(self) -> int:
        return len(self.terms)

    @property
    def n_postings(self) -> int:
        return int(self.df.sum())

    @property
    def sum_dl(self) -> int:
        return int(self.lengths.sum(dtype=np.int64))

    @property
    def offsets(self) -> np.ndarray:
        """int64 array (n_terms + 1,): the postings of ``terms[j]`` are ``offsets[j]:offsets[j + 1]``."""
        return _offsets(self.df)

    def __repr__(self) -> str:
        return short_repr(self, ["n_docs", "n_terms", "n_postings", "sum_dl", "path"],
                          postings_read=self.doc is not None)


def _offsets(df: np.ndarray) -> np.ndarray:
    out = np.zeros(len(df) + 1, np.int64)
    np.cumsum(df, out=out[1:])
    return out


def live_segment(seg: Segment, deleted) -> Segment:
    """``seg`` without the documents ``deleted`` (local doc numbers): the segment a build of its other
    documents would have written (Lucene's live docs, applied): the remaining documents renumbered in
    order, their postings kept, the df recounted and the terms no remaining document holds dropped.

    Parameters
    ----------
    seg : Segment
        Read with its postings.
    deleted : integer array
        Local doc numbers in ``[0, n_docs)`` (any order, repeats allowed).

    Returns
    -------
    Segment
        ``seg`` itself when nothing is deleted.

    Raises
    ------
    ValueError
        A doc number outside the segment, or a segment read without its postings.
    """
    deleted = np.unique(np.asarray(deleted, np.int64))
    if not len(deleted):
        return seg
    if seg.doc is None:
        raise ValueError("live_segment needs the segment's postings")
    _check_in(deleted, 0, seg.n_docs - 1, "deleted doc")
    live = np.ones(seg.n_docs, bool)
    live[deleted] = False
    rank = np.cumsum(live, dtype=np.int64) - 1  # new number of each remaining document
    keep = live[seg.doc]
    term_of = np.repeat(np.arange(seg.n_terms, dtype=np.int64), seg.df)[keep]
    df = np.bincount(term_of, minlength=seg.n_terms).astype(np.int64)
    held = df > 0
    return Segment(seg.terms.filter(pa.array(held)), df[held], rank[seg.doc[keep]].astype(np.int32),
                   seg.tf[keep], seg.lengths[live], seg.source_ids.filter(pa.array(live)), seg.path, seg.meta,
                   seg.fields, None if seg.field_tf is None else seg.field_tf[:, keep],
                   None if seg.field_lengths is None else seg.field_lengths[:, live])


# ----------------------------------------------------------------------------- write

def _as_strings(values, typ, what: str) -> pa.Array:
    """A pyarrow string array of type ``typ`` from pyarrow, pandas, cudf, numpy or a list."""
    values = to_host(values)
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not isinstance(values, pa.Array):
        values = pa.array(values.tolist() if isinstance(values, np.ndarray) else values)
    try:
        return values.cast(typ)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ValueError(f"{what}: not castable to {typ} ({exc})") from None


def text_array(texts) -> pa.Array:
    """Documents' texts as one pyarrow ``large_string`` array on the host, nulls made empty texts (as the
    tokenizer reads them).

    Parameters
    ----------
    texts : array of str, shape (n,)
        pyarrow (array or chunked), a pandas or cudf Series (cudf through ``.to_arrow()``: the device
        column is copied once, never through Python objects), a frame with a ``text`` column, numpy or
        a list.

    Returns
    -------
    pyarrow.LargeStringArray, shape (n,)

    Raises
    ------
    ValueError
        Values that are not strings.
    """
    if getattr(texts, "ndim", 1) == 2:  # a read partition: its text column
        texts = texts["text"]
    if is_gpu_object(texts):
        texts = texts.to_arrow()
    elif isinstance(texts, pd.Series):
        texts = pa.array(texts, type=pa.large_string(), from_pandas=True)
    out = _as_strings(texts, pa.large_string(), "texts")
    return out.fill_null("") if out.null_count else out


def _as_ints(values, what: str, device: bool = False):
    """A 1-d integer array from numpy, cupy, pandas, cudf or pyarrow (no copy where possible): numpy, or
    with ``device`` a cupy array stays one (cudf columns give their cupy array)."""
    if device and is_gpu_object(values):
        a = values.values if hasattr(values, "values") and not hasattr(values, "__cuda_array_interface__") else values
        if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
            raise ValueError(f"{what}: expected a 1-d integer array, got dtype {a.dtype} and shape {a.shape}")
        return a
    values = to_host(values)
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        values = values.to_numpy()
    a = np.asarray(values)
    if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise ValueError(f"{what}: expected a 1-d integer array, got dtype {a.dtype} and shape {a.shape}")
    return a


def _check_in(a: np.ndarray, lo: int, hi: int, what: str) -> None:
    if a.size and (int(a.min()) < lo or int(a.max()) > hi):
        bad = a[(a < lo) | (a > hi)][0]
        raise ValueError(f"{what} must be in [{lo}, {hi}], found {bad}")


def _ascending_within_terms(doc: np.ndarray, offsets: np.ndarray) -> bool:
    """Whether ``doc`` strictly increases inside every term's run of postings."""
    if len(doc) < 2:
        return True
    xp = array_module(doc)
    up = doc[1:] > doc[:-1]
    starts = xp.asarray(offsets[1:-1])
    starts = starts[(starts > 0) & (starts < len(doc))]
    up[starts - 1] = True  # a term's first posting may be below the previous term's last
    return bool(up.all())


def _write_parquet(folder: Path, name: str, columns: dict, n_fields: int = 0) -> None:
    """``folder/name`` written under a temporary name and renamed; device (cupy) columns are encoded by
    cudf with the same encodings and codec, into host memory (then written through the page cache);
    ``n_fields``: the per-field columns of a BM25F segment, dictionary-coded as ``tf`` and ``length``."""
    dictionary, encoding = _ENCODINGS[name]
    if n_fields:
        dictionary = dictionary + [c for c in columns if c.startswith(("tf_", "length_"))]
    tmp = folder / f".{name}.tmp"
    if any(is_gpu_object(c) for c in columns.values()):
        import io

        import cudf

        enc = dict(encoding, **{c: "DICTIONARY" for c in dictionary})
        buf = io.BytesIO()
        cudf.DataFrame(columns).to_parquet(buf, index=False, compression=COMPRESSION.upper(), column_encoding=enc,
                                           statistics="NONE")
        with open(tmp, "wb") as fh:
            fh.write(buf.getbuffer())
        os.replace(tmp, folder / name)
        return
    table = pa.table(columns, schema=_field_schema(name, n_fields))
    # no statistics: min/max of local doc numbers or of terms prune nothing for a reader of whole files
    pq.write_table(table, tmp, use_dictionary=dictionary, column_encoding=encoding, compression=COMPRESSION,
                   write_statistics=False)
    os.replace(tmp, folder / name)


def write_segment(folder, terms, df, doc, tf, lengths, source_ids, texts=None, fields=None, field_tf=None,
                  field_lengths=None, columns=None, positions=None) -> dict:
    """Write one immutable segment (module docstring for the layout).

    Lucene's segment design (immutable segments, per-segment term dictionaries, tf and norms stored,
    scoring from global statistics).  Host arrays are written by pyarrow; cupy / cudf ``doc`` and ``tf``
    are checked on the device and their postings file encoded by cudf (the same encodings and codec,
    read back alike); terms and documents go through the host.

    Parameters
    ----------
    folder : str or os.PathLike
        The segment's folder: new, or an empty folder (segments are written once).
    terms : array of str, shape (n_terms,)
        pyarrow (string / large_string), pandas, cudf, numpy or a list; strictly ascending by
        UTF-8 bytes (the order of ``pyarrow.compute.sort_indices`` and of cutext's vocabulary), no nulls.
    df : integer array, shape (n_terms,)
        Postings of each term (>= 1), which is the number of documents containing it.
    doc : integer array, shape (n_postings,)
        Local document numbers in ``[0, n_docs)``, term-major (the ``df[0]`` postings of ``terms[0]``
        first), strictly ascending within a term.
    tf : integer array, shape (n_postings,)
        Occurrences of the term in the document, in ``[1, 2**31 - 1]``.
    lengths : integer array, shape (n_docs,)
        Tokens per document (BM25's dl), in ``[0, 2**31 - 1]``; at least the sum of its postings' tf.
    source_ids : array of str, shape (n_docs,)
        The documents' ids in the source (cast to string).
    texts : array of str, shape (n_docs,), optional
        The documents' texts (:func:`text_array`: pyarrow, pandas, cudf, numpy or a list; a null is an
        empty text), written to ``text.parquet``; None writes no text.
    fields : sequence of str, optional
        The text fields of a BM25F segment (format 2, module docstring), with ``field_tf`` and
        ``field_lengths``; None: one field (format 1).
    field_tf : integer array, shape (F, n_postings), optional
        Occurrences of each posting's term in each field, in ``[0, 2**31 - 1]``, summing to ``tf``.
    field_lengths : integer array, shape (F, n_docs), optional
        Tokens of each field of each document, summing to ``lengths``; at least the field's tf sum.
    columns : pyarrow Table or pandas / cudf DataFrame, n_docs rows, optional
        Kept columns of the documents (:func:`column_table`), written to ``columns.parquet`` with their
        types; None writes none.
    positions : integer array, shape (sum(tf),), optional
        The postings' term positions, posting by posting, ascending within one, written to
        ``positions.parquet`` (:mod:`cutext.stages.engines.phrases`); None writes none.

    Returns
    -------
    dict
        The segment's manifest (``segment.json``): ``kind``, ``format``, ``n_docs``, ``n_terms``,
        ``n_postings``, ``sum_dl``, ``texts``, ``fields`` (BM25F), ``columns`` (kept column names) and
        ``files`` (``{name: {"bytes", "crc32"}}``).

    Raises
    ------
    FileExistsError
        ``folder`` exists and is not an empty folder.
    ValueError
        Shapes that disagree, terms that are not strictly ascending or null, df < 1 or not summing to
        n_postings, doc numbers out of range or not ascending within a term, tf < 1, negative or
        too large lengths, a document whose tf sum exceeds its length, more than 2**31 - 1 documents;
        field arrays of another shape, with negative entries or whose sums are not ``tf`` and
        ``lengths``, fields without both arrays, or repeated field names.
    """
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise FileExistsError(f"{folder}: a segment is written once, into a new or empty folder")
    if fields is not None or field_tf is not None or field_lengths is not None:
        fields, field_tf, field_lengths = _checked_fields(fields, field_tf, field_lengths, to_host(tf),
                                                          to_host(lengths))
    terms = _as_strings(terms, pa.large_string(), "terms")
    doc, tf = _as_ints(doc, "doc", device=True), _as_ints(tf, "tf", device=True)
    df, lengths = _as_ints(df, "df", device=True), _as_ints(lengths, "lengths", device=True)
    xp = array_module(doc)
    df, tf, lengths = xp.asarray(df), xp.asarray(tf), xp.asarray(lengths)
    source_ids = _as_strings(source_ids, pa.string(), "source_ids")
    texts = text_array(texts) if texts is not None else None
    n_docs, n_terms, n_postings = len(lengths), len(terms), len(doc)
    if len(df) != n_terms or len(tf) != n_postings or len(source_ids) != n_docs:
        raise ValueError(f"shapes disagree: {n_terms} terms and {len(df)} df, {n_postings} doc and {len(tf)} tf, "
                         f"{n_docs} lengths and {len(source_ids)} source_ids")
    if texts is not None and len(texts) != n_docs:
        raise ValueError(f"shapes disagree: {len(texts)} texts for {n_docs} documents")
    columns = column_table(columns) if columns is not None else None
    if columns is not None and columns.num_rows != n_docs:
        raise ValueError(f"shapes disagree: {columns.num_rows} rows of kept columns for {n_docs} documents")
    if n_docs > _INT32_MAX:
        raise ValueError(f"a segment holds at most {_INT32_MAX} documents, got {n_docs}")
    if terms.null_count:
        raise ValueError("terms must not be null")
    if n_terms > 1 and not pc.all(pc.less(terms[:-1], terms[1:])).as_py():
        i = int(np.flatnonzero(~pc.less(terms[:-1], terms[1:]).to_numpy(zero_copy_only=False))[0])
        raise ValueError(f"terms must be strictly ascending by UTF-8 bytes: {terms[i].as_py()!r} at {i} "
                         f"is followed by {terms[i + 1].as_py()!r}")
    _check_in(df, 1, _INT32_MAX, "df")
    offsets = xp.zeros(n_terms + 1, np.int64)
    xp.cumsum(df, out=offsets[1:])
    if int(offsets[-1]) != n_postings:
        raise ValueError(f"df sums to {int(offsets[-1])}, but there are {n_postings} postings")
    _check_in(doc, 0, n_docs - 1, "doc")
    _check_in(tf, 1, _INT32_MAX, "tf")
    _check_in(lengths, 0, _INT32_MAX, "lengths")
    if not _ascending_within_terms(doc, offsets):
        raise ValueError("doc must be strictly ascending within each term (term-major postings)")
    if n_postings:  # lengths that belong to other documents (a shifted slice) show here
        tf_sum = xp.bincount(doc, weights=tf, minlength=n_docs)
        if bool((tf_sum > lengths).any()):
            i = int(xp.flatnonzero(tf_sum > lengths)[0])
            raise ValueError(f"document {i} has tf summing to {int(tf_sum[i])} but length {int(lengths[i])}")
        for i, name in enumerate(fields or ()):
            over = np.bincount(to_host(doc), weights=field_tf[i], minlength=n_docs) > field_lengths[i]
            if over.any():
                raise ValueError(f"document {int(np.flatnonzero(over)[0])}: field {name!r} has more tf than tokens")
    folder.mkdir(parents=True, exist_ok=True)
    _write_parquet(folder, TERMS, {"term": terms, "df": to_host(df).astype(np.int32, copy=False)})
    n_fields = len(fields) if fields is not None else 0
    _write_parquet(folder, POSTINGS, {"doc": doc.astype(np.int32, copy=False), "tf": tf.astype(np.int32, copy=False),
                                      **{f"tf_{i}": field_tf[i] for i in range(n_fields)}}, n_fields)
    _write_parquet(folder, DOCS, {"source_id": source_ids, "length": to_host(lengths).astype(np.int32, copy=False),
                                  **{f"length_{i}": field_lengths[i] for i in range(n_fields)}}, n_fields)
    if texts is not None:
        _write_parquet(folder, TEXT, {"text": texts})
    if positions is not None:
        if n_fields:
            raise ValueError("positions of BM25F fields are not stored")
        write_positions(folder, to_host(positions), to_host(tf))
    if columns is not None:  # the input's own types; pyarrow's default dictionary suits categories and dates
        tmp = folder / f".{COLUMNS}.tmp"
        pq.write_table(columns, tmp, compression=COMPRESSION)
        os.replace(tmp, folder / COLUMNS)
    meta = {"kind": KIND, "format": FORMAT, "n_docs": n_docs, "n_terms": n_terms, "n_postings": n_postings,
            "sum_dl": int(lengths.sum(dtype=np.int64)), "compression": COMPRESSION, "texts": texts is not None}
    if n_fields:
        meta.update(format=FIELDS_FORMAT, fields=list(fields))
    if columns is not None:
        meta["columns"] = list(columns.column_names)
    if positions is not None:
        meta["positions"] = True
    tmp = folder / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, folder / MANIFEST)
    checksums.seal(folder, MANIFEST)  # sizes and CRC32 of the files, rewritten under a temporary name
    return json.loads((folder / MANIFEST).read_text(encoding="utf-8"))


def _checked_fields(fields, field_tf, field_lengths, tf: np.ndarray, lengths: np.ndarray) -> tuple:
    """``(fields, field_tf, field_lengths)`` of :func:`write_segment` checked: a tuple of distinct names and
    two host int32 arrays (F, n_postings) and (F, n_docs) whose columns sum to ``tf`` and ``lengths``."""
    if fields is None or field_tf is None or field_lengths is None:
        raise ValueError("a BM25F segment needs fields, field_tf and field_lengths together")
    fields = tuple(str(f) for f in fields)
    if not fields or len(set(fields)) != len(fields):
        raise ValueError(f"fields must be distinct names, got {list(fields)}")
    out = []
    for what, a, ref in (("field_tf", field_tf, tf), ("field_lengths", field_lengths, lengths)):
        a = np.asarray(to_host(a))
        if a.shape != (len(fields), len(ref)) or (a.size and not np.issubdtype(a.dtype, np.integer)):
            raise ValueError(f"{what}: expected integers of shape ({len(fields)}, {len(ref)}), got dtype {a.dtype} "
                             f"and shape {a.shape}")
        _check_in(a, 0, _INT32_MAX, what)
        if not np.array_equal(a.sum(axis=0, dtype=np.int64), np.asarray(ref, np.int64)):
            raise ValueError(f"{what} must sum over the fields to {'tf' if what == 'field_tf' else 'lengths'}")
        out.append(a.astype(np.int32, copy=False))
    return fields, out[0], out[1]


# ----------------------------------------------------------------------------- read

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


def read_segment(folder, *, verify: bool = True, postings: bool = True, ids: bool = True) -> Segment:
    """Read a segment written by :func:`write_segment`, exactly as written, checked.

    Parameters
    ----------
    folder : str or os.PathLike
    verify : bool, default True
        Check the size and CRC32 of every file against ``segment.json`` first (one read of the
        segment, :func:`cutext.stages.runtime.artifacts.read_manifest`).  The value checks below run
        either way.
    postings : bool, default True
        False: skip ``postings.parquet`` (``doc`` and ``tf`` are None), for the global statistics
        (:func:`merge_terms`), which need the terms, df and lengths only.
    ids : bool, default True
        False: skip the documents' source ids (``source_ids`` is None), which the statistics do not need
        and which are most of the bytes read for them (one string a document).

    Returns
    -------
    Segment

    Raises
    ------
    ArtifactNotFoundError (ArtifactError, FileNotFoundError)
        No ``segment.json``, or a missing file.
    ArtifactError (ValueError)
        Naming the file: a size or CRC32 that does not match ``segment.json`` (edited, truncated),
        unreadable Parquet, another kind or format, missing or ill-typed columns, nulls, counts that
        disagree with ``segment.json``, terms not strictly ascending, df < 1, postings that disagree
        with df, doc numbers outside ``[0, n_docs)`` or not ascending within a term, tf < 1, negative
        lengths.
    """
    folder = Path(folder)
    meta = art.read_manifest(folder, MANIFEST, KIND, "a cutext segment", verify=verify)
    mf = folder / MANIFEST
    if meta.get("format") not in (FORMAT, FIELDS_FORMAT):
        raise art.ArtifactError(f"{mf}: segment format {meta.get('format')!r}, this cutext reads formats "
                                f"{FORMAT} and {FIELDS_FORMAT}")
    fields = tuple(meta.get("fields") or ())
    if (meta["format"] == FIELDS_FORMAT) != bool(fields) or not all(isinstance(x, str) for x in fields):
        raise art.ArtifactError(f"{mf}: format {meta['format']} with fields {meta.get('fields')!r} (format "
                                f"{FIELDS_FORMAT} lists its field names, format {FORMAT} none)")
    n_docs = art.field_int(meta, "n_docs", mf, lo=0, hi=_INT32_MAX)
    n_terms = art.field_int(meta, "n_terms", mf, lo=0)
    n_postings = art.field_int(meta, "n_postings", mf, lo=0)
    sum_dl = art.field_int(meta, "sum_dl", mf, lo=0)

    tt = _read_parquet(folder, TERMS)
    f = folder / TERMS
    if tt.num_rows != n_terms:
        raise art.ArtifactError(f"{f}: {tt.num_rows} terms, {MANIFEST} records {n_terms}")
    terms = tt.column("term").combine_chunks()
    df = tt.column("df").to_numpy().astype(np.int64)
    if n_terms > 1 and not pc.all(pc.less(terms[:-1], terms[1:])).as_py():
        raise art.ArtifactError(f"{f}: terms are not strictly ascending by UTF-8 bytes (shuffled or repeated)")
    art.check_range(df, 1, max(n_docs, 1), "df", f)
    offsets = _offsets(df)
    if offsets[-1] != n_postings:
        raise art.ArtifactError(f"{f}: df sums to {int(offsets[-1])}, {MANIFEST} records {n_postings} postings")

    dt = _read_parquet(folder, DOCS, len(fields), skip=() if ids else ("source_id",))
    f = folder / DOCS
    if dt.num_rows != n_docs:
        raise art.ArtifactError(f"{f}: {dt.num_rows} documents, {MANIFEST} records {n_docs}")
    lengths = dt.column("length").to_numpy()
    source_ids = dt.column("source_id").combine_chunks() if ids else None
    art.check_range(lengths, 0, _INT32_MAX, "lengths", f)
    if int(lengths.sum(dtype=np.int64)) != sum_dl:
        raise art.ArtifactError(f"{f}: lengths sum to {int(lengths.sum(dtype=np.int64))}, {MANIFEST} records {sum_dl}")
    field_lengths = field_tf = None
    if fields:
        field_lengths = _field_columns(dt, "length", len(fields), lengths, f)
    del dt

    doc = tf = None
    if postings:
        pt = _read_parquet(folder, POSTINGS, len(fields))
        f = folder / POSTINGS
        if pt.num_rows != n_postings:
            raise art.ArtifactError(f"{f}: {pt.num_rows} postings, {MANIFEST} and df record {n_postings}")
        doc, tf = pt.column("doc").to_numpy(), pt.column("tf").to_numpy()
        if fields:
            field_tf = _field_columns(pt, "tf", len(fields), tf, f)
        del pt
        art.check_range(doc, 0, n_docs - 1, "doc numbers", f)
        art.check_range(tf, 1, _INT32_MAX, "tf", f)
        if not _ascending_within_terms(doc, offsets):
            raise art.ArtifactError(f"{f}: doc numbers are not strictly ascending within a term")
    return Segment(terms, df, doc, tf, lengths, source_ids, folder, meta, fields, field_tf, field_lengths)


def _field_columns(table: pa.Table, col: str, n_fields: int, total: np.ndarray, f: Path) -> np.ndarray:
    """int32 (F, n) of the columns ``col_0 .. col_{F-1}`` of a BM25F segment file, checked to be >= 0 and to
    sum to ``total`` (the ``col`` column), else ArtifactError."""
    out = np.empty((n_fields, table.num_rows), np.int32)
    for i in range(n_fields):
        out[i] = table.column(f"{col}_{i}").to_numpy()
    art.check_range(out, 0, _INT32_MAX, f"{col}_*", f)
    if not np.array_equal(out.sum(axis=0, dtype=np.int64), total.astype(np.int64)):
        raise art.ArtifactError(f"{f}: the columns {col}_* do not sum to {col}")
    return out


def read_segment_texts(folder, deleted=None, *, verify: bool = False) -> pa.Array | None:
    """The texts of a segment's documents (``text.parquet``), checked against its ``segment.json``.

    Parameters
    ----------
    folder : str or os.PathLike
    deleted : integer array, optional
        Local doc numbers to leave out (:func:`live_texts`), as :func:`live_segment` leaves them out.
    verify : bool, default False
        Check the size and CRC32 of the segment's files first (an index's load has checked them).

    Returns
    -------
    pyarrow.LargeStringArray, shape (n_docs - deleted,), or None
        Local doc order; None when the segment stores no text.

    Raises
    ------
    ArtifactNotFoundError (ArtifactError, FileNotFoundError)
        ``segment.json`` records texts but ``text.parquet`` is missing.
    ArtifactError (ValueError)
        Unreadable Parquet, another column or type, nulls, or a row count other than ``n_docs``.
    """
    folder = Path(folder)
    meta = art.read_manifest(folder, MANIFEST, KIND, "a cutext segment", verify=verify)
    if meta.get("texts") is not True:
        return None
    n_docs = art.field_int(meta, "n_docs", folder / MANIFEST, lo=0, hi=_INT32_MAX)
    t = _read_parquet(folder, TEXT)
    if t.num_rows != n_docs:
        raise art.ArtifactError(f"{folder / TEXT}: {t.num_rows} texts, {MANIFEST} records {n_docs} documents")
    texts = t.column("text").combine_chunks()
    return texts if deleted is None else live_texts(texts, deleted)


def column_table(columns) -> pa.Table:
    """Kept columns as one pyarrow Table on the host (cudf through ``.to_arrow()``, pandas without its index).

    Parameters
    ----------
    columns : pyarrow Table, pandas or cudf DataFrame
        Columns named by distinct non-empty strings.

    Returns
    -------
    pyarrow.Table

    Raises
    ------
    ValueError
        Not a table, no column, or names that are not distinct non-empty strings.
    """
    if is_gpu_object(columns):
        columns = columns.to_arrow()
    elif isinstance(columns, pd.DataFrame):
        columns = pa.Table.from_pandas(columns, preserve_index=False)
    if not isinstance(columns, pa.Table):
        raise ValueError(f"kept columns must be a table (pyarrow, pandas or cudf), got {type(columns).__name__}")
    names = columns.column_names
    if not names or len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"kept columns need distinct non-empty names, got {names}")
    return columns.combine_chunks()


def read_segment_columns(folder, deleted=None, *, verify: bool = False) -> pa.Table | None:
    """The kept columns of a segment's documents (``columns.parquet``), checked against its ``segment.json``.

    Parameters
    ----------
    folder : str or os.PathLike
    deleted : integer array, optional
        Local doc numbers to leave out, as :func:`live_segment` leaves them out.
    verify : bool, default False
        Check the size and CRC32 of the segment's files first (an index's load has checked them).

    Returns
    -------
    pyarrow.Table, n_docs - deleted rows, or None
        Local doc order, the columns ``segment.json`` lists; None when the segment keeps no column.

    Raises
    ------
    ArtifactNotFoundError (ArtifactError, FileNotFoundError)
        ``segment.json`` lists columns but ``columns.parquet`` is missing.
    ArtifactError (ValueError)
        Unreadable Parquet, other columns than listed, or a row count other than ``n_docs``.
    """
    folder = Path(folder)
    meta = art.read_manifest(folder, MANIFEST, KIND, "a cutext segment", verify=verify)
    names = meta.get("columns")
    if names is None:
        return None
    n_docs = art.field_int(meta, "n_docs", folder / MANIFEST, lo=0, hi=_INT32_MAX)
    path = folder / COLUMNS
    if not path.exists():
        raise art.ArtifactNotFoundError(f"{path}: missing ({MANIFEST} lists the kept columns {names})")
    try:
        t = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise art.ArtifactError(f"{path}: unreadable Parquet ({exc})") from None
    if t.column_names != list(names) or t.num_rows != n_docs:
        raise art.ArtifactError(f"{path}: columns {t.column_names} and {t.num_rows} rows; {MANIFEST} records "
                                f"{names} and {n_docs} documents")
    if deleted is None or not len(deleted):
        return t
    deleted = np.unique(np.asarray(deleted, np.int64))
    _check_in(deleted, 0, n_docs - 1, "deleted doc")
    live = np.ones(n_docs, bool)
    live[deleted] = False
    return t.filter(pa.array(live))


def live_texts(texts: pa.Array, deleted) -> pa.Array:
    """``texts`` (a segment's, local doc order) without the local doc numbers ``deleted`` (any order,
    repeats allowed): the rows :func:`live_segment` keeps."""
    deleted = np.unique(np.asarray(deleted, np.int64))
    if not len(deleted):
        return texts
    _check_in(deleted, 0, len(texts) - 1, "deleted doc")
    live = np.ones(len(texts), bool)
    live[deleted] = False
    return texts.filter(pa.array(live))


def postings_bytes(folder) -> dict:
    """Bytes of a segment's files and bytes per posting, from its ``segment.json``.

    Returns
    -------
    dict
        ``files`` ({name: bytes}), ``n_postings``, ``bytes_per_posting`` (postings.parquet's bytes /
        n_postings) and ``total_bytes_per_posting`` (all files' bytes / n_postings); NaN without postings.
    """
    meta = art.read_manifest(folder, MANIFEST, KIND, "a cutext segment", verify=False)
    files = {k: int(v["bytes"]) for k, v in meta["files"].items()}
    n = int(meta["n_postings"])
    return {"files": files, "n_postings": n,
            "bytes_per_posting": files[POSTINGS] / n if n else float("nan"),
            "total_bytes_per_posting": sum(files.values()) / n if n else float("nan")}


# ----------------------------------------------------------------------------- merge

@dataclass(frozen=True)
class MergedTerms:
    """The global statistics of a list of segments in commit order (:func:`merge_terms`).

    Attributes
    ----------
    vocab : pyarrow.LargeStringArray, shape (V,)
        Union of the segments' terms, ascending by UTF-8 bytes; term id ``i + 1`` is ``vocab[i]``
        (id 0: unknown terms).
    df : numpy int64 array, shape (V + 1,)
        Documents per term id over all segments (``df[0] = 0``).
    n_docs : int
        N, the documents of all segments.
    sum_dl : int
        Tokens of all documents.
    doc_base : numpy int64 array, shape (n_segments + 1,)
        Segment ``s`` holds the global doc ids ``doc_base[s] .. doc_base[s + 1] - 1``.
    term_ids : list of numpy int32 arrays, shape (n_terms of each segment,)
        The global term id of each segment's local terms.
    field_sum_dl : numpy int64 array, shape (F,), or None
        Tokens of each field of all documents (BM25F segments; None: one field).
    n_nonempty : int or None
        Documents with a token (Lucene's ``docCount``, what ``norms="lucene"`` counts); None: not counted.
    """

    vocab: pa.Array
    df: np.ndarray
    n_docs: int
    sum_dl: int
    doc_base: np.ndarray
    term_ids: list
    field_sum_dl: np.ndarray | None = None
    n_nonempty: int | None = None

    @property
    def avgdl(self) -> float:
        """``sum_dl / n_docs`` in float64 (0.0 without documents), as the one-shot build computes it."""
        return self.sum_dl / self.n_docs if self.n_docs else 0.0

    def __repr__(self) -> str:
        return short_repr(self, ["vocab", "n_docs", "sum_dl"], segments=len(self.term_ids))


def _segments(segments, postings: bool) -> list:
    return [s if isinstance(s, Segment) else read_segment(s, postings=postings) for s in segments]


def merge_terms(segments) -> MergedTerms:
    """The global vocabulary, df, N, sum of lengths and doc bases of segments, in commit order.

    Reads only the terms and documents of each segment (O(vocabulary + documents)), what crosses
    workers in the segmented build.  The local terms map to global ids in one hash pass over
    their concatenation (``pyarrow.compute.dictionary_encode``) and one sort of the distinct terms.

    Parameters
    ----------
    segments : sequence of Segment or folder paths
        In commit order (segment 0 holds the first documents).

    Returns
    -------
    MergedTerms

    Raises
    ------
    ArtifactError
        A segment that :func:`read_segment` refuses.
    """
    segs = _segments(segments, postings=False)
    n = np.array([s.n_docs for s in segs], np.int64)
    doc_base = np.zeros(len(segs) + 1, np.int64)
    np.cumsum(n, out=doc_base[1:])
    sum_dl = sum(s.sum_dl for s in segs)
    nonempty = sum(int(np.count_nonzero(s.lengths)) for s in segs)
    field_sum_dl = _field_sums(segs)
    sizes = [s.n_terms for s in segs]
    if sum(sizes) == 0:
        return MergedTerms(pa.array([], pa.large_string()), np.zeros(1, np.int64), int(doc_base[-1]), sum_dl,
                           doc_base, [np.zeros(0, np.int32) for _ in segs], field_sum_dl, nonempty)
    vocab, term_ids = union_terms([s.terms for s in segs])
    df = np.zeros(len(vocab) + 1, np.int64)
    for s, g in zip(segs, term_ids):  # a loop over segments; within one, a term occurs once
        df[g] += s.df
    return MergedTerms(vocab, df, int(doc_base[-1]), sum_dl, doc_base, term_ids, field_sum_dl, nonempty)


def union_terms(term_arrays) -> tuple[pa.Array, list]:
    """The sorted union of vocabularies and each one's terms as ids of it: one hash pass over their
    concatenation (``pyarrow.compute.dictionary_encode``) and one sort of the distinct terms.

    Parameters
    ----------
    term_arrays : sequence of pyarrow string arrays
        Vocabularies (a segment's terms, a commit's kept ones), each term once in each.

    Returns
    -------
    (pyarrow.LargeStringArray (V,), list of int32 arrays)
        The distinct terms ascending by UTF-8 bytes, and for each input array the id of each of its terms
        (``i + 1`` for ``vocab[i]``: id 0 stays the unknown term's).
    """
    arrays = [(t.combine_chunks() if isinstance(t, pa.ChunkedArray) else t).cast(pa.large_string())
              for t in term_arrays]
    enc = pc.dictionary_encode(pa.concat_arrays(arrays) if arrays else pa.array([], pa.large_string()))
    distinct, first = enc.dictionary, enc.indices.to_numpy()
    order = pc.sort_indices(distinct).to_numpy()  # binary comparison: UTF-8 byte order
    rank = np.empty(len(order), np.int32)
    rank[order] = np.arange(1, len(order) + 1, dtype=np.int32)
    gid = rank[first]
    ids, a = [], 0
    for t in arrays:
        ids.append(gid[a:a + len(t)])
        a += len(t)
    return distinct.take(pa.array(order)), ids


def _field_sums(segs) -> np.ndarray | None:
    """Tokens of each field over BM25F segments (int64, (F,)); None for one-field segments.

    Raises
    ------
    ValueError
        Segments of different fields (one BM25F index has one list of fields).
    """
    kinds = {s.fields for s in segs}
    if len(kinds) > 1:
        raise ValueError(f"segments of different fields: {sorted(kinds)}")
    if not segs or not segs[0].fields:
        return None
    return np.sum([s.field_lengths.sum(axis=1, dtype=np.int64) for s in segs], axis=0).astype(np.int64)


@dataclass(frozen=True)
class MergedSegments:
    """Segments merged into one term-major CSR over global doc ids (:func:`merge_segments`).

    Attributes
    ----------
    terms : MergedTerms
        vocab, df, n_docs, sum_dl, doc_base.
    indptr : numpy int64 array, shape (V + 2,)
        The postings of term id ``t`` are ``indptr[t]:indptr[t + 1]`` (id 0: none).
    doc : numpy int32 array (int64 when N >= 2**31), shape (n_postings,)
        Global doc ids, ascending within a term.
    tf : numpy int32 array, shape (n_postings,)
    lengths : numpy int32 array, shape (N,)
        dl of every document, index = global doc id.
    source_ids : pyarrow.StringArray, shape (N,)
    fields : tuple of str
        The text fields of BM25F segments (empty: one field).
    field_tf : numpy int32 array, shape (F, n_postings), or None
        Each posting's tf in each field, in the CSR's order.
    field_lengths : numpy int32 array, shape (F, N), or None
        Tokens of each field of every document.
    """

    terms: MergedTerms
    indptr: np.ndarray
    doc: np.ndarray
    tf: np.ndarray
    lengths: np.ndarray
    source_ids: pa.Array
    fields: tuple = ()
    field_tf: np.ndarray | None = None
    field_lengths: np.ndarray | None = None

    @property
    def vocab(self) -> pa.Array:
        return self.terms.vocab

    @property
    def df(self) -> np.ndarray:
        return self.terms.df

    @property
    def n_docs(self) -> int:
        return self.terms.n_docs

    @property
    def avgdl(self) -> float:
        return self.terms.avgdl

    @property
    def doc_base(self) -> np.ndarray:
        return self.terms.doc_base

    def term_ids(self) -> np.ndarray:
        """int32 array (n_postings,): the term id of every posting (the CSR's row indices)."""
        return np.repeat(np.arange(len(self.indptr) - 1, dtype=np.int32), np.diff(self.indptr))

    def __repr__(self) -> str:
        return short_repr(self, ["n_docs", "avgdl", "vocab", "doc", "tf"])


def merge_segments(segments, terms: MergedTerms | None = None, *, device: bool = False) -> MergedSegments:
    """Lay segments end to end in commit order and merge their postings into one term-major CSR.

    Lucene's segment design (immutable segments, per-segment term dictionaries, tf and norms stored,
    scoring from global statistics): segment ``s``'s local doc ``d`` is global doc ``doc_base[s] + d``.
    Postings are placed by a counting scatter, not a sort: a term's postings from segment ``s`` go
    after those of the earlier segments, whose doc ids are all smaller, so docs stay ascending.

    Parameters
    ----------
    segments : sequence of Segment or folder paths
        In commit order.
    terms : MergedTerms, optional
        The global statistics of a larger index that ``segments`` are a consecutive run of (a shard), with
        ``term_ids`` those of ``segments``: the CSR's rows are the global term ids, its doc ids count from
        the run's first document (default: :func:`merge_terms` of ``segments``).
    device : bool, default False
        Place the postings on the current GPU: ``doc``, ``tf`` (and ``field_tf``) are cupy arrays, each
        segment's postings are copied to the device as read and scattered there (the same slots as on the
        host: the host path is this one's twin); ``indptr``, ``lengths`` and the terms stay on the host.

    Returns
    -------
    MergedSegments

    Raises
    ------
    ArtifactError
        A segment that :func:`read_segment` refuses.
    ValueError
        A Segment given without its postings.
    """
    segs = _segments(segments, postings=True)
    if any(s.doc is None for s in segs):
        raise ValueError("merge_segments needs the segments' postings (read_segment(..., postings=True))")
    mt = merge_terms(segs) if terms is None else terms
    if len(mt.term_ids) != len(segs):
        raise ValueError(f"terms maps {len(mt.term_ids)} segments, {len(segs)} given")
    rows = mt.df
    if terms is not None:  # a run of a larger index: the rows hold these segments' postings only
        rows = np.zeros(len(mt.df), np.int64)
        for seg, g in zip(segs, mt.term_ids):
            rows[g] += seg.df
    n = np.array([seg.n_docs for seg in segs], np.int64)
    bases = np.concatenate([[0], np.cumsum(n)[:-1]]) if len(segs) else n
    indptr = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(rows, out=indptr[1:])
    n_postings = int(indptr[-1])
    fields = segs[0].fields if segs else ()
    if any(s.fields != fields for s in segs):
        raise ValueError(f"segments of different fields: {sorted({s.fields for s in segs})}")
    if device:
        import cupy as xp
    else:
        xp = np
    doc = xp.empty(n_postings, np.int32 if int(n.sum()) <= _INT32_MAX else np.int64)
    tf = xp.empty(n_postings, np.int32)
    field_tf = xp.empty((len(fields), n_postings), np.int32) if fields else None
    fill = indptr[:-1].copy()  # next free slot of each term id
    for s, g, base in zip(segs, mt.term_ids, bases):
        if not s.n_postings:
            continue
        start = fill[g]
        fill[g] += s.df
        if device:
            _scatter_on_device(s, start - s.offsets[:-1], base, doc, tf, field_tf)
            continue
        place_runs(start, s.offsets, s.doc, doc, base)  # each term's run copied whole, terms on numba's threads
        place_runs(start, s.offsets, s.tf, tf)
        for f in range(len(fields)):
            place_runs(start, s.offsets, s.field_tf[f], field_tf[f])
    lengths = (np.concatenate([s.lengths for s in segs]).astype(np.int32, copy=False) if segs
               else np.zeros(0, np.int32))
    source_ids = (pa.concat_arrays([s.source_ids.cast(pa.string()) for s in segs]) if segs
                  else pa.array([], pa.string()))
    field_lengths = np.concatenate([s.field_lengths for s in segs], axis=1) if fields else None
    return MergedSegments(mt, indptr, doc, tf, lengths, source_ids, fields, field_tf, field_lengths)


def _scatter_on_device(s: Segment, shift: np.ndarray, base: int, doc, tf, field_tf) -> None:
    """One segment's postings into the device CSR of :func:`merge_segments`: local posting ``i`` of local
    term ``j`` goes to slot ``shift[j] + i`` (``shift = start - offsets[:-1]``), as the host's
    :func:`cutext.kernels.postings.place_runs` places it; ``j`` is found by a binary search of ``i`` in the
    segment's offsets, a block of postings at a time (about 24 bytes of temporaries a posting of a block)."""
    import cupy

    offsets = cupy.asarray(s.offsets)
    shift_d = cupy.asarray(shift)
    block = DEVICE_MERGE_BLOCK
    for a in range(0, s.n_postings, block):
        e = min(a + block, s.n_postings)
        i = cupy.arange(a, e, dtype=np.int64)
        dest = shift_d[cupy.searchsorted(offsets, i, side="right") - 1]
        dest += i
        del i
        d = cupy.asarray(s.doc[a:e]).astype(doc.dtype, copy=False)
        d += doc.dtype.type(base)
        doc[dest] = d
        tf[dest] = cupy.asarray(s.tf[a:e])
        if field_tf is not None:
            field_tf[:, dest] = cupy.asarray(s.field_tf[:, a:e])
        del dest, d


def field_segment(segments, fields) -> dict:
    """One BM25F segment from the one-field segments of the same documents, one a text field (the bm25
    pipeline builds a segment of each field from one read partition, then joins them here).

    The terms are the union of the fields' terms, the postings those of the union (a (term, doc) pair in
    any field), ``field_tf[f]`` the pair's tf in field f (0 where the field lacks the term), ``tf`` and
    ``lengths`` the sums over the fields.

    Parameters
    ----------
    segments : sequence of Segment or folder paths, shape (F,)
        One-field segments with their postings, of the same documents (equal ``source_ids``) in order.
    fields : sequence of str, shape (F,)

    Returns
    -------
    dict
        The arguments of :func:`write_segment` (``terms``, ``df``, ``doc``, ``tf``, ``lengths``,
        ``source_ids``, ``fields``, ``field_tf``, ``field_lengths``).

    Raises
    ------
    ValueError
        Another number of segments than fields, a segment with fields itself, or segments of different
        documents.
    """
    segs = _segments(segments, postings=True)
    fields = tuple(fields)
    if len(segs) != len(fields) or not segs:
        raise ValueError(f"{len(segs)} segments for the {len(fields)} fields {list(fields)}")
    if any(s.fields for s in segs):
        raise ValueError("field_segment joins one-field segments")
    n_docs = segs[0].n_docs
    for name, s in zip(fields, segs):
        if s.n_docs != n_docs or not s.source_ids.cast(pa.string()).equals(segs[0].source_ids.cast(pa.string())):
            raise ValueError(f"the segment of field {name!r} holds other documents ({s.n_docs} documents, "
                             f"{segs[0].n_docs} in field {fields[0]!r})")
    mt = merge_terms(segs)  # the union of the fields' terms; its doc bases are not used
    # a (term, doc) key of the union, sorted term-major with docs ascending
    keys = [np.repeat(g.astype(np.int64), s.df) * max(n_docs, 1) + s.doc for g, s in zip(mt.term_ids, segs)]
    union, where = np.unique(np.concatenate(keys), return_inverse=True)
    field_tf = np.zeros((len(fields), len(union)), np.int32)
    a = 0
    for i, (k, s) in enumerate(zip(keys, segs)):
        field_tf[i, where[a:a + len(k)]] = s.tf
        a += len(k)
    term = union // max(n_docs, 1)
    held = np.bincount(term, minlength=len(mt.vocab) + 1)[1:]
    field_lengths = np.stack([s.lengths for s in segs]).astype(np.int32)
    return {"terms": mt.vocab, "df": held.astype(np.int64), "doc": (union % max(n_docs, 1)).astype(np.int32),
            "tf": field_tf.sum(axis=0, dtype=np.int64).astype(np.int32),
            "lengths": field_lengths.sum(axis=0, dtype=np.int64).astype(np.int32),
            "source_ids": segs[0].source_ids, "fields": fields, "field_tf": field_tf, "field_lengths": field_lengths}


# ----------------------------------------------------------------------------- weights

@dataclass(frozen=True)
class SegmentWeights:
    """BM25 weights of merged segments from their global statistics (:func:`segment_weights`).

    Attributes
    ----------
    weight : numpy float32 array, shape (n_postings,)
        ``w_td`` of every posting, in the CSR's order.
    idf : numpy float64 array, shape (V + 1,)
    w0 : numpy float64 array, shape (V + 1,)
        The weight of a document without the term (nonzero for bm25l and bm25+); format 1's
        ``vocab.parquet`` stores it as float32.
    avgdl : float
    """

    weight: np.ndarray
    idf: np.ndarray
    w0: np.ndarray
    avgdl: float

    def __repr__(self) -> str:
        return short_repr(self)


def segment_weights(merged: MergedSegments, *, variant: str = "lucene", k1: float = 1.2, b: float = 0.75,
                    delta: float | None = None, block: int = 1 << 22, norms: str = "exact") -> SegmentWeights:
    """float32 BM25 weights of every posting, from the global N, avgdl and df.

    Robertson & Zaragoza / Lucene BM25, the formulas and the code of :mod:`cutext.stages.text.bm25`
    (``idf``, ``absent_weight``, ``WeightPartition.weights``) with ``avgdl = sum_dl / N`` in float64:
    the weights of a one-shot build of the same documents, bit for bit.

    Parameters
    ----------
    merged : MergedSegments
    variant : {"lucene", "robertson", "atire", "bm25l", "bm25+"}
    k1, b, delta : float
        As :func:`cutext.pipelines.bm25.build_index` (``delta``: default 0.5 for bm25l, 1.0 for bm25+).
    block : int
        Postings weighted at a time (the float64 temporaries are about 24 bytes a posting of a block).
    norms : {"exact", "lucene"}
        Document lengths as they are, or through Lucene's one-byte norms
        (:class:`cutext.stages.text.bm25.WeightPartition`).

    Returns
    -------
    SegmentWeights

    Raises
    ------
    ValueError
        Bad BM25 parameters, or no document has a token (avgdl = 0); BM25F segments (weigh them with
        :func:`cutext.stages.text.bm25.field_corpus_weights` and :func:`posting_weights`).
    """
    if merged.fields:
        raise ValueError(f"segments of the fields {list(merged.fields)} are weighed by BM25F: "
                         "posting_weights(merged, bm25.field_corpus_weights(...))")
    fn = bm25_stage.corpus_weights(merged.df, merged.n_docs, merged.terms.sum_dl, variant, k1, b, delta, norms,
                                   doc_count=int(np.count_nonzero(merged.lengths)))
    return SegmentWeights(posting_weights(merged, fn, block=block), fn.idf_t, fn.w0, fn.avgdl)


def posting_weights(merged: MergedSegments, fn, *, minus=None, block: int = 1 << 22) -> np.ndarray:
    """float32 weight of every posting of ``merged`` by the corpus's weight function ``fn``
    (:func:`cutext.stages.text.bm25.corpus_weights`), in blocks of postings (elementwise formulas: blocks
    give the same bits); ``minus`` (float32, (V + 1,)): that of each posting's term subtracted (the
    ``w - w0`` the search matrix stores)."""
    t = merged.term_ids()
    out = np.empty(len(t), np.float32)
    # BM25F (fn: cutext.stages.text.bm25.FieldWeights) takes the (F, n) tf and lengths of the fields
    tf, lengths = ((merged.field_tf, merged.field_lengths) if merged.field_tf is not None
                   else (merged.tf, merged.lengths))

    def one(a):
        e = a + block
        out[a:e] = fn.weights(t[a:e], tf[..., a:e], lengths[..., merged.doc[a:e]])
        if minus is not None:
            out[a:e] -= minus[t[a:e]]

    starts = range(0, len(t), block)
    if len(starts) < 2:
        for a in starts:
            one(a)
        return out
    # blocks on threads (numpy's elementwise loops release the GIL): the same operations a posting, the
    # same bits; a few threads, since each block holds about 24 bytes of float64 temporaries a posting
    with ThreadPoolExecutor(min(len(starts), host_cpus(), 8)) as pool:
        list(pool.map(one, starts))
    return out


def segment_heads(folders, deletes, ids: bool = True) -> list:
    """The segments of an index for its global statistics (:func:`merge_terms`): terms and documents only,
    except a segment with deletions (``deletes[i]``, local doc numbers), read whole and made live
    (:func:`live_segment`), since its df needs its postings.  ``ids=False``: without the documents' source
    ids (a commit's counts need none; a load does)."""
    return [live_segment(read_segment(f, verify=False), d) if len(d)
            else read_segment(f, verify=False, postings=False, ids=ids)
            for f, d in zip(folders, deletes)]


# ----------------------------------------------------------------------------- from the count stage

def segments_from_counts(counts, vocab, source_ids, doc_lo: int, doc_hi: int, lengths=None) -> dict:
    """The arguments of :func:`write_segment` for one partition of the count stage.

    Parameters
    ----------
    counts : pandas or cudf DataFrame
        ``(term_id: int32, doc_id: int64, tf: int32, dl: int32)`` rows of documents ``[doc_lo, doc_hi)``
        (:class:`cutext.stages.text.public.Counts` partitions), global term ids into ``vocab``; any
        row order (re-sorted by (term_id, doc_id) unless already so).  Rows of term id 0 (unknown
        terms, no string) are dropped: a query can never match them; their tokens stay in dl.
    vocab : pyarrow string array, shape (V,)
        Term id ``i + 1`` is ``vocab[i]``, sorted by UTF-8 bytes (:func:`cutext.stages.text.public.encode`),
        so the segment's terms in term id order are sorted too.
    source_ids : array of str, shape (doc_hi - doc_lo,)
    doc_lo, doc_hi : int
        The partition's documents; local doc = doc_id - doc_lo.
    lengths : integer array, shape (doc_hi - doc_lo,), optional
        dl of the partition's documents; default from the ``dl`` column (0 for a document without rows).

    Returns
    -------
    dict
        ``terms`` (pyarrow.LargeStringArray), ``df`` (int64), ``doc`` (int32), ``tf`` (int32),
        ``lengths`` (int32), ``source_ids``: ``write_segment(folder, **result)``.

    Raises
    ------
    ValueError
        A missing column, doc ids outside ``[doc_lo, doc_hi)``, term ids outside ``[0, V]``, a repeated
        (term, doc) pair, ``dl`` that differs between rows of one document, or ``lengths`` /
        ``source_ids`` of another length.
    """
    need = {"term_id", "doc_id", "tf"} | ({"dl"} if lengths is None else set())
    if not need <= set(counts.columns):
        raise ValueError(f"counts needs columns {sorted(need)}, has {list(counts.columns)}")
    n_docs = int(doc_hi) - int(doc_lo)
    if n_docs < 0:
        raise ValueError(f"doc_hi {doc_hi} < doc_lo {doc_lo}")
    vocab = _as_strings(vocab, pa.large_string(), "vocab")
    t, d, f = values(counts["term_id"]), values(counts["doc_id"]), values(counts["tf"])
    dl = values(counts["dl"]) if lengths is None else None
    xp = array_module(t)
    known = t != 0
    if not bool(known.all()):
        t, d, f = t[known], d[known], f[known]
        dl = dl[known] if dl is not None else None
    _check_in(d, doc_lo, doc_hi - 1, "doc_id")
    _check_in(t, 1, len(vocab), "term_id")
    if lengths is None:
        lengths = xp.zeros(n_docs, np.int32)
        lengths[d - doc_lo] = dl
        if not bool(xp.array_equal(lengths[d - doc_lo], dl)):
            raise ValueError("dl differs between rows of one document")
    else:
        lengths = _as_ints(lengths, "lengths").astype(np.int32, copy=False)
        if len(lengths) != n_docs:
            raise ValueError(f"lengths has {len(lengths)} entries for the {n_docs} documents [{doc_lo}, {doc_hi})")
    n = len(t)
    if n > 1:
        same = t[1:] == t[:-1]
        if not bool(((t[1:] > t[:-1]) | (same & (d[1:] > d[:-1]))).all()):  # not term-major already
            o = xp.lexsort(xp.stack([d, t]))
            t, d, f = t[o], d[o], f[o]
            same = t[1:] == t[:-1]
            if bool((same & (d[1:] == d[:-1])).any()):
                raise ValueError("counts repeat a (term_id, doc_id) pair")
        starts = xp.flatnonzero(xp.concatenate([xp.ones(1, bool), ~same]))
    else:
        starts = xp.arange(n)
    ids = to_host(t[starts]).astype(np.int64)
    df = xp.diff(xp.concatenate([starts, xp.asarray([n])])).astype(np.int64)
    return {"terms": vocab.take(pa.array(ids - 1)), "df": df,
            "doc": (d - doc_lo).astype(np.int32), "tf": f.astype(np.int32, copy=False), "lengths": lengths,
            "source_ids": source_ids}


def write_partition_segment(counts, docs, vocab, folder, texts=None, columns=None, host: bool = False) -> dict:
    """One segment from a partition of the count stage and the same partition of the document table:
    the bm25 pipeline's segmented writer, run by the worker that holds the partition (no postings move
    between workers; the vocabulary's strings are the one O(V) input every writer shares).

    Parameters
    ----------
    counts : pandas or cudf DataFrame
        ``(term_id, doc_id, tf, dl)`` of the partition's documents (:func:`segments_from_counts`).
    docs : pandas or cudf DataFrame
        ``(doc_id, source_id, replaced)`` of the partition, doc ids consecutive and ascending (the read
        stage numbers them so).
    vocab : pyarrow string array, shape (V,)
    folder : str or os.PathLike
        New or empty.
    texts : pandas or cudf DataFrame or Series, optional
        The same partition as read (a ``text`` column, a row per document of ``docs`` in its order): the
        segment stores the texts (:func:`text_array`; a cudf column reaches the host through Arrow).
    columns : pyarrow Table or pandas / cudf DataFrame, optional
        The partition's kept columns, a row per document of ``docs`` in its order (:func:`column_table`).
    host : bool
        Move device counts to host memory first and encode the segment there (the same files): for a
        build under a device memory budget, since libcudf's ZSTD encoder asks for scratch of hundreds of MB
        even for a small segment.

    Returns
    -------
    dict
        The segment's ``segment.json``, ``doc_lo`` (its first global doc id), ``replaced`` (U+FFFD
        replacements of its documents), and its ``terms`` and their ``df`` (what a commit's vocabulary
        counts).

    Raises
    ------
    ValueError
        Doc ids that are not consecutive; see :func:`segments_from_counts`, :func:`write_segment`.
    """
    texts = text_array(texts) if texts is not None else None
    docs = to_host(docs)
    if host:
        counts = to_host(counts)
    ids = docs["doc_id"].to_numpy()
    lo, hi = (int(ids[0]), int(ids[-1]) + 1) if len(ids) else (0, 0)
    if hi - lo != len(ids) or (len(ids) and not (np.diff(ids) == 1).all()):
        raise ValueError(f"{folder}: the partition's doc ids are not consecutive ({len(ids)} ids in [{lo}, {hi}))")
    source_ids = pa.array(docs["source_id"].to_numpy(dtype=object), pa.large_string())
    seg = segments_from_counts(counts, vocab, source_ids, lo, hi)
    meta = write_segment(folder, **seg, texts=texts, columns=columns)
    return dict(meta, doc_lo=lo, replaced=int(docs["replaced"].sum()) if "replaced" in docs.columns else 0,
                terms=seg["terms"], df=seg["df"])


def write_text_segment(texts, docs, tokenizer, folder, store_text: bool = False) -> dict:
    """One segment straight from a read partition's text, with the partition's own vocabulary: the
    tokenize and count stages of :mod:`cutext.stages.text` on this partition alone, then
    :func:`write_partition_segment`.  A segment stores its terms as strings and numbers its documents
    locally, so it needs no global term id: the files equal those written from the global
    vocabulary's counts (its terms, in UTF-8 byte order, are the partition's distinct tokens in that
    order), and a cluster run that writes each segment where its text is moves no vocabulary between
    workers.

    Parameters
    ----------
    texts : pandas or cudf DataFrame
        A read partition with a ``text`` column, a row per document of ``docs`` in the same order.
    docs : pandas or cudf DataFrame
        ``(doc_id, source_id, replaced)`` of the partition, doc ids consecutive and ascending (the read
        stage's numbering).
    tokenizer : cutext.stages.text.tokenize.TokenizerConfig
    folder : str or os.PathLike
        New or empty.
    store_text : bool, default False
        Keep the texts in the segment (``text.parquet``).

    Returns
    -------
    dict
        :func:`write_partition_segment`'s result (``terms``: the partition's vocabulary, sorted, and
        ``df``), with ``n_empty_docs`` (documents without a token).

    Raises
    ------
    ValueError
        ``texts`` and ``docs`` of different lengths; see :func:`write_partition_segment`.
    """
    if len(texts) != len(docs):
        raise ValueError(f"{folder}: {len(texts)} texts for {len(docs)} documents")
    ids = values(docs["doc_id"])
    lo = int(ids[0]) if len(ids) else 0
    summary = tokenize_partition_summary(WithDocIds([lo], "text")(texts, {"number": 0}), tokenizer, "text")
    kept = text_array(texts) if store_text else None
    del texts
    vocab = sorted_terms(summary.scan.uniq)
    counts = count_partition_summary(summary, vocabulary_frame(vocab, docs), docs)
    n_empty = int((to_host(summary.scan.lengths) == 0).sum())
    del summary
    return dict(write_partition_segment(counts, docs, vocab, folder, texts=kept), n_empty_docs=n_empty)


# ----------------------------------------------------------------------------- term positions

def segment_positions(terms: pa.Array, df: np.ndarray, doc: np.ndarray, tf: np.ndarray, texts,
                      cfg: TokenizerConfig) -> np.ndarray:
    """The positions of a segment's postings, from its documents' texts tokenized again on the host.

    Parameters
    ----------
    terms : pyarrow string array (n_terms,), the segment's sorted terms
    df : int array (n_terms,), postings a term
    doc, tf : int arrays (n_postings,), the segment's term-major postings (docs ascending within a term)
    texts : pyarrow string array (n_docs,), the segment's texts (local doc order)
    cfg : TokenizerConfig, the index's

    Returns
    -------
    numpy int32 array (sum(tf),)
        Absolute positions, posting by posting, ascending within a posting.

    Raises
    ------
    RuntimeError
        The host tokenizer's postings or counts differ from the segment's (the texts are not those the
        segment counted), naming the first posting that differs.
    """
    tokens, row, pos = token_positions(texts, cfg)
    tid = pc.index_in(tokens, value_set=terms.cast(pa.large_string())).fill_null(-1).to_numpy()
    n_docs = max(len(texts), 1)
    if (tid < 0).any():
        raise RuntimeError(f"positions: token {tokens[int(np.flatnonzero(tid < 0)[0])].as_py()!r} of the texts "
                           "is not a term of the segment; the index's counts and its texts do not match")
    key = tid.astype(np.int64) * n_docs + row
    order = np.argsort(key, kind="stable")  # by term, then doc; a doc's positions stay ascending
    key, pos = key[order], pos[order]
    first = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]])) if len(key) else np.zeros(0, np.int64)
    got, counts = key[first], np.diff(np.concatenate([first, [len(key)]]))
    want = np.repeat(np.arange(len(df), dtype=np.int64), np.asarray(df, np.int64)) * n_docs + np.asarray(doc)
    tf = np.asarray(tf)
    if len(want) != len(got) or not np.array_equal(want, got) or not np.array_equal(counts, tf):
        n = min(len(want), len(got))
        diff = np.flatnonzero((want[:n] != got[:n]) | (counts[:n] != tf[:n]))
        bad = int(diff[0]) if len(diff) else n
        raise RuntimeError(f"positions: the host tokenizer disagrees with the segment's postings at posting {bad} "
                           f"of {len(want)}; the index's counts and its texts do not match")
    return pos.astype(np.int32)


def run_starts(tf: np.ndarray) -> np.ndarray:
    """int64 (n + 1,): where each posting's run of positions starts (prefix sum of ``tf``)."""
    out = np.zeros(len(tf) + 1, np.int64)
    np.cumsum(tf, out=out[1:])
    return out


def write_positions(folder, positions: np.ndarray, tf: np.ndarray) -> None:
    """``folder/positions.parquet`` (module docstring): ``positions`` (absolute, a posting's run ascending)
    gap-coded within each posting, written under a temporary name and renamed.  The caller seals
    ``segment.json``.

    Raises
    ------
    ValueError
        ``len(positions) != sum(tf)``, or a posting's positions that are negative or not strictly ascending.
    """
    folder = Path(folder)
    positions = np.asarray(positions, np.int64)
    starts = run_starts(np.asarray(tf, np.int64))
    if len(positions) != starts[-1]:
        raise ValueError(f"positions: {len(positions)} positions for postings whose tf sums to {int(starts[-1])}")
    gaps = np.diff(positions, prepend=0)
    gaps[starts[:-1][np.asarray(tf) > 0]] = positions[starts[:-1][np.asarray(tf) > 0]]  # a run starts absolute
    if len(gaps) and (gaps.min() < 0 or (np.delete(gaps, starts[:-1]) <= 0).any()):
        raise ValueError("positions must be >= 0 and strictly ascending within a posting")
    tmp = folder / f".{POSITIONS}.tmp"
    # dictionary (RLE / bit-packed indices): most gaps are small numbers; measured in docs/decisions.md
    pq.write_table(pa.table({"pos": gaps.astype(np.int32)}), tmp, use_dictionary=["pos"], compression=COMPRESSION,
                   write_statistics=False)
    os.replace(tmp, folder / POSITIONS)


def read_positions(folder, tf: np.ndarray) -> np.ndarray:
    """The absolute positions of a segment's postings (int32, ``sum(tf)``), ``tf`` the segment's.

    Raises
    ------
    ArtifactNotFoundError (ArtifactError, FileNotFoundError)
        No ``positions.parquet``.
    ArtifactError (ValueError)
        Unreadable Parquet, another column, or a row count other than ``sum(tf)``, or negative gaps.
    """
    f = Path(folder) / POSITIONS
    t = _read_parquet(Path(folder), POSITIONS)  # the column, its type, no nulls
    starts = run_starts(np.asarray(tf, np.int64))
    if t.num_rows != starts[-1]:
        raise art.ArtifactError(f"{f}: {t.num_rows} positions; expected {int(starts[-1])} (the sum of tf)")
    gaps = t.column("pos").to_numpy().astype(np.int64)
    if len(gaps) and gaps.min() < 0:
        raise art.ArtifactError(f"{f}: negative position gaps")
    # absolute positions: a prefix sum restarted at every posting's run
    total = np.cumsum(gaps)
    base = np.repeat(total[starts[:-1]] - gaps[starts[:-1]], np.asarray(tf, np.int64)) if len(gaps) else total
    return (total - base).astype(np.int32)


def add_positions(folder, cfg: TokenizerConfig, keep_text: bool) -> int:
    """Add ``positions.parquet`` to a segment written with its texts, and seal its ``segment.json`` again.

    The segment's texts (``text.parquet``) are tokenized again on the host (:func:`segment_positions`);
    without ``keep_text`` the text file is removed afterwards (``segment.json``'s ``texts`` becomes false).

    Returns
    -------
    int
        Bytes of ``positions.parquet``.

    Raises
    ------
    ValueError
        A segment without texts or of BM25F fields.
    RuntimeError
        Texts whose tokens disagree with the segment's postings (:func:`segment_positions`).
    """
    folder = Path(folder)
    seg = read_segment(folder, verify=False)
    if seg.fields:
        raise ValueError(f"{folder}: positions of BM25F fields are not stored")
    texts = read_segment_texts(folder)
    if texts is None:
        raise ValueError(f"{folder}: positions are computed from the segment's texts; it has none")
    write_positions(folder, segment_positions(seg.terms, seg.df, seg.doc, seg.tf, texts, cfg), seg.tf)
    meta = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    meta["positions"] = True
    if not keep_text:
        (folder / TEXT).unlink()
        meta["texts"] = False
    for k in ("files", "dirs", "checksum"):
        meta.pop(k, None)
    tmp = folder / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, folder / MANIFEST)
    checksums.seal(folder, MANIFEST)
    return (folder / POSITIONS).stat().st_size


def live_positions(positions: np.ndarray, tf: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The positions of the postings ``keep`` (bool (n_postings,)) of a segment, as :func:`live_segment`
    keeps its postings."""
    return positions[np.repeat(np.asarray(keep, bool), np.asarray(tf, np.int64))]


def merge_positions(segs, positions: list, merged) -> np.ndarray:
    """The positions of :func:`cutext.stages.engines.segments.merge_segments`'s postings: each segment's runs
    moved to where the merge placed its postings (the same counting scatter).

    Parameters
    ----------
    segs : list of Segment (with postings), in the merge's order
    positions : list of int32 arrays, ``sum(tf)`` a segment
    merged : MergedSegments of ``segs``

    Returns
    -------
    numpy int32 array (sum of merged tf,)
    """
    mt = merged.terms
    out_starts = run_starts(merged.tf.astype(np.int64))
    out = np.empty(int(out_starts[-1]), np.int32)
    fill = merged.indptr[:-1].copy()
    for s, g, pos in zip(segs, mt.term_ids, positions):
        if not s.n_postings:
            continue
        start = fill[g]
        fill[g] += s.df
        dest = np.repeat(start - s.offsets[:-1], s.df) + np.arange(s.n_postings, dtype=np.int64)
        tf = s.tf.astype(np.int64)
        src = run_starts(tf)
        out[np.repeat(out_starts[dest] - src[:-1], tf) + np.arange(len(pos), dtype=np.int64)] = pos
    return out
