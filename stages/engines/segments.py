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

This module reads and merges segments; the files' names and schemas are in :mod:`.segment_format`, the
writers in :mod:`.segment_writers`, texts and columns in :mod:`.segment_stored`, positions in
:mod:`.segment_positions`, and every name stays importable from here.
"""
from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cutext.kernels.postings import drop_docs, place_runs
from cutext.stages.engines.segment_format import (  # noqa: F401  (names of the format, importable from here)
    _INT32_MAX,
    COLUMNS,
    COMPRESSION,
    DOCS,
    FIELDS_FORMAT,
    FORMAT,
    KIND,
    MANIFEST,
    POSITIONS,
    POSTINGS,
    TERMS,
    TEXT,
    _check_in,
    _field_schema,
    _read_parquet,
    deleted_postings,
    postings_doc,
    read_postings_device,
    segment_ids,
    terms_of_docs,
)
from cutext.stages.engines.segment_positions import (  # noqa: F401
    live_positions,
    merge_positions,
    read_positions,
    run_starts,
    segment_positions,
    write_positions,
)
from cutext.stages.engines.segment_stored import live_texts, postings_bytes, read_segment_columns, read_segment_texts  # noqa: F401
from cutext.stages.engines.segment_writers import (  # noqa: F401
    _ascending_within_terms,
    column_table,
    segments_from_counts,
    text_array,
    write_partition_segment,
    write_segment,
    write_text_segment,
)
from cutext.stages.runtime import artifacts as art
from cutext.stages.runtime import checksums
from cutext.stages.runtime.compute import host_cpus
from cutext.stages.runtime.reprs import short_repr
from cutext.stages.text import bm25 as bm25_stage
from cutext.stages.text.tokenize import TokenizerConfig

__all__ = ["Segment", "MergedTerms", "MergedSegments", "SegmentWeights", "write_segment", "read_segment",
           "merge_terms", "merge_segments", "segment_weights", "segments_from_counts", "write_partition_segment",
           "write_text_segment", "read_segment_texts", "live_texts", "text_array", "column_table",
           "read_segment_columns",
           "live_segment", "posting_weights", "segment_heads", "union_terms",
           "postings_bytes", "field_segment", "segment_positions", "write_positions", "read_positions",
           "add_positions", "live_positions", "merge_positions", "run_starts"]

DEVICE_MERGE_BLOCK = 1 << 26  # postings scattered at a time by merge_segments(device=True)


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


def live_segment(seg: Segment, deleted, with_held: bool = False):
    """``seg`` without the documents ``deleted`` (local doc numbers): the segment a build of its other
    documents would have written (Lucene's live docs, applied): the remaining documents renumbered in
    order, their postings kept, the df recounted and the terms no remaining document holds dropped.

    Parameters
    ----------
    seg : Segment
        Read with its postings.
    deleted : integer array
        Local doc numbers in ``[0, n_docs)`` (any order, repeats allowed).

    with_held : bool
        Also return which of ``seg``'s terms the live segment keeps.

    Returns
    -------
    Segment, or (Segment, bool array (seg.n_terms,)) with ``with_held``
        ``seg`` itself when nothing is deleted.

    Raises
    ------
    ValueError
        A doc number outside the segment, or a segment read without its postings.
    """
    deleted = np.unique(np.asarray(deleted, np.int64))
    if not len(deleted):
        return (seg, np.ones(seg.n_terms, bool)) if with_held else seg
    if seg.doc is None:
        raise ValueError("live_segment needs the segment's postings")
    _check_in(deleted, 0, seg.n_docs - 1, "deleted doc")
    live = np.ones(seg.n_docs, bool)
    live[deleted] = False
    doc, tf, df = drop_docs(seg.doc, seg.tf, seg.df, live)  # one pass: a refresh after a deletion renumbers
    held = df > 0
    field_tf = None if seg.field_tf is None else seg.field_tf[:, live[seg.doc]]
    out = Segment(seg.terms.filter(pa.array(held)), df[held], doc, tf, seg.lengths[live],
                  seg.source_ids.filter(pa.array(live)), seg.path, seg.meta, seg.fields, field_tf,
                  None if seg.field_lengths is None else seg.field_lengths[:, live])
    return (out, held) if with_held else out


# ----------------------------------------------------------------------------- read



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
        host: the host path is this one's twin); ``indptr``, ``lengths`` and the terms stay on the host.  A
        segment read without its postings has them decoded on the device from its file
        (:func:`cutext.stages.engines.segment_format.read_postings_device`).

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
    segs = _segments(segments, postings=not device)
    if any(s.doc is None and (not device or s.path is None) for s in segs):
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

    src_doc, src_tf, src_ftf = s.doc, s.tf, s.field_tf
    if src_doc is None:  # read without postings: decoded on the device, no host copy
        src_doc, src_tf, src_ftf = read_postings_device(s.path, s.n_postings, s.n_docs, s.offsets, len(s.fields))
    offsets = cupy.asarray(s.offsets)
    shift_d = cupy.asarray(shift)
    block = DEVICE_MERGE_BLOCK
    for a in range(0, s.n_postings, block):
        e = min(a + block, s.n_postings)
        i = cupy.arange(a, e, dtype=np.int64)
        dest = shift_d[cupy.searchsorted(offsets, i, side="right") - 1]
        dest += i
        del i
        d = cupy.asarray(src_doc[a:e]).astype(doc.dtype)
        d += doc.dtype.type(base)
        doc[dest] = d
        tf[dest] = cupy.asarray(src_tf[a:e])
        if field_tf is not None:
            field_tf[:, dest] = cupy.asarray(src_ftf[:, a:e])
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


# ----------------------------------------------------------------------------- term positions


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

