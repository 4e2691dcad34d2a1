"""The public stages: cutext's dataflow as functions on dask (or dask-cudf) collections.

These are the building blocks the pipelines are made of (``bm25``, ``cluster`` and ``lda`` run
exactly these calls through :func:`cutext.stages.text.frontend.build_corpus`), for a user who already
holds a dask DataFrame (read from a data lake, filtered, joined) and wants term statistics the
pipelines do not offer::

    import dask.dataframe as dd
    from cutext import stages

    texts = dd.read_parquet("lake/posts/")[["doc_id", "text"]]   # or any (doc_id, text) frame
    tokens = stages.tokenize(texts, stopwords="lucene")              # (doc_id, token), lazy
    vocab, encoded = stages.encode(tokens)                           # vocabulary; (doc_id, term_id)
    c = stages.count(encoded)                                        # tf per (term, doc); df; lengths
    w = stages.bm25(c, k1=0.9, b=0.4)                                # weighted term-major postings
    ch = stages.lda_chunks(c, vocab, K=20)                           # LDA's chunked token list

Every function takes its library from the partitions: pandas partitions run the CPU kernels
(numpy, numba, pyarrow), cudf partitions the GPU ones (cupy, CUDA kernels).  A ``client`` is the
one of the surrounding context (a ``distributed.Client`` set as default, or the dask scheduler
in effect).

Partition summaries
-------------------
:func:`tokenize` with ``persist=True`` (the default) tokenizes every partition once and
persists a compact summary of it (the partition's distinct tokens and its distinct
(token, document) pairs with their counts; no row per token is kept); :func:`encode` and
:func:`count` of the *unchanged* results use those summaries, so the text is tokenized once
and memory stays bounded by the distinct pairs.  A collection derived from the
result (filtered, joined, re-partitioned) carries no summary and is processed row by row; both
ways give the same tables.

Shapes and dtypes follow the data model (``cutext.kernels.backend.SCHEMAS``):
``tokens (doc_id: int64, token: string)``, ``encoded (doc_id: int64, term_id: int32)``,
``counts (term_id: int32, doc_id: int64, tf: int32, dl: int32)``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from cutext.kernels.backend import array_module, is_gpu_object, meta, to_host, values
from cutext.stages.text import bm25 as _bm25
from cutext.stages.runtime.compute import (StepClock, cluster_client, cluster_workers, nbytes_of, on_worker,
                                           partition_homes, persist_all, shared_key)
from cutext.stages.text.count import (count_partition, document_frequencies, document_frequencies_delayed,
                                      document_lengths)
from cutext.stages.text.encode import build_vocabulary, encode_partition, vocabulary_frame
from cutext.stages.readers.frames import is_dask, is_frame
from cutext.stages.text.tokenize import TokenizerConfig, tokenize_partition
from cutext.stages.readers.frames import FrameError, _string_dtype
from cutext.stages.text.count import run_lengths
from cutext.stages.text.partitions import (tokenize_partition_scan, encode_partition_uniques as uniques,
                                           count_partition_scan)
from cutext.stages.text.sort import term_major, term_divisions, sort_frame_by_pairs

__all__ = ["tokenize", "encode", "count", "bm25", "Counts", "BM25Postings", "number_documents",
           "token_lengths"]

_PLAN = "_cutext_plan"   # attribute carrying the partition summaries on an unchanged result


def _as_dask(obj, what: str):
    """A dask collection of ``obj`` (pandas / cudf objects become one partition)."""
    import dask.dataframe as dd

    if is_dask(obj):
        return obj
    if isinstance(obj, (pd.DataFrame, pd.Series)):
        return dd.from_pandas(obj, npartitions=1, sort=False)
    if is_frame(obj):  # a cudf DataFrame or Series
        import dask_cudf

        return dask_cudf.from_cudf(obj, npartitions=1)
    raise TypeError(f"{what} must be a dask (or pandas / cudf) DataFrame or Series, got {type(obj).__name__}")


def _plan(obj):
    """The persisted plan of a tokenize / encode result, or None (none, or spent by
    :func:`count_releasing`: the rows are then computed again)."""
    plan = obj.__dict__.get(_PLAN) if hasattr(obj, "__dict__") else None
    tokens = plan.tokens if isinstance(plan, _EncodedPlan) else plan
    if isinstance(tokens, _TokensPlan) and any(s is None for s in tokens.summaries):
        return None
    return plan


def _set_plan(obj, plan):
    object.__setattr__(obj, _PLAN, plan)
    return obj


# ----------------------------------------------------------------------------- partition tasks

class _WithDocIds:
    """``(doc_id, text)`` of a partition, ``doc_id`` from the partition offsets (the numbering scan)."""

    def __init__(self, offsets, column: str):
        self.offsets = offsets
        self.column = column

    def __call__(self, df, partition_info=None):
        xp = array_module(df)
        off = int(self.offsets[partition_info["number"]]) if partition_info is not None else 0
        col = df if df.ndim == 1 else df[self.column]
        frame = col.to_frame(name="text")
        frame.insert(0, "doc_id", xp.arange(off, off + len(frame), dtype=np.int64))
        return frame


def _host_text(col):
    """A host text column as pandas' pyarrow string dtype (what the CPU split reads)."""
    if isinstance(col.dtype, pd.StringDtype) and col.dtype.storage == "pyarrow":
        return col
    return pd.Series(pa.array(col, type=pa.large_string(), from_pandas=True), index=col.index,
                     dtype=pd.StringDtype("pyarrow"))


def _text_frame(df, column: str):
    """``(doc_id, text)`` of a partition of the user's frame (text as strings, missing text empty)."""
    lib = type(df)
    col = df[column]
    col = col.fillna("") if is_gpu_object(col) else _host_text(col)
    return lib({"doc_id": values(df["doc_id"]).astype(np.int64, copy=False), "text": col.reset_index(drop=True)})


class _Tokenize:
    """Picklable partition function: ``(doc_id, <text column>)`` -> ``(doc_id, token)``."""

    def __init__(self, cfg: TokenizerConfig, column: str):
        self.cfg = cfg
        self.column = column

    def __call__(self, df):
        return tokenize_partition(_text_frame(df, self.column), self.cfg)


@dataclass
class _PartScan:
    """One partition's summary: the scan (:class:`cutext.stages.text.partitions._Scan`, positions within the
    partition) and how positions map to doc ids (``offset + pos`` when the partition's ids are
    contiguous, else ``doc_ids[pos]``)."""

    scan: object
    offset: int
    doc_ids: object

    def __sizeof__(self) -> int:  # the scan's arrays, not a few dozen bytes (compute.nbytes_of)
        return object.__sizeof__(self) + nbytes_of(self.scan, self.doc_ids)


def tokenize_partition_summary(df, cfg: TokenizerConfig, column: str):
    """Tokenize one partition and summarize it (the task key names the tokenize stage)."""

    frame = _text_frame(df, column)
    d = values(frame["doc_id"])
    n = len(d)
    xp = array_module(d)
    contiguous = n == 0 or (int(d[-1]) - int(d[0]) == n - 1 and bool((xp.diff(d) == 1).all()))
    offset = int(d[0]) if n else 0
    scan = tokenize_partition_scan(frame, cfg)
    return _PartScan(scan, offset, None if contiguous else d)


def _summary_docs(ps: _PartScan):
    """(doc ids, lengths) of a summary, host int64 arrays."""
    lengths = np.asarray(to_host(ps.scan.lengths), np.int64)
    if ps.doc_ids is None:
        return np.arange(ps.offset, ps.offset + len(lengths), dtype=np.int64), lengths
    return np.asarray(to_host(ps.doc_ids), np.int64), lengths


def encode_partition_uniques(ps: _PartScan, like):
    """The summary's distinct tokens as a ``(token,)`` frame (the encode stage's global step)."""

    return uniques(ps.scan, like)


def count_partition_summary(ps: _PartScan, vocab_frame, like):
    """``(term_id, doc_id, tf, dl)`` of one partition from its summary (the count stage)."""

    if ps.doc_ids is None:
        return count_partition_scan(ps.scan, vocab_frame, ps.offset, like)
    out = count_partition_scan(ps.scan, vocab_frame, 0, like)
    out["doc_id"] = ps.doc_ids[values(out["doc_id"])].astype(np.int64)
    return out


class _Taker:
    """Hands out a plan's persisted summaries one at a time and forgets each one handed out, so that
    a partition's summary is freed as soon as its count task has used it (in-process runs)."""

    def __init__(self, items: list):
        self.items = items

    def take(self, i: int):
        item, self.items[i] = self.items[i], None
        if item is None:
            raise RuntimeError(f"the summary of partition {i} was already counted and released")
        return item.compute(scheduler="sync") if hasattr(item, "dask") else item

    def __dask_tokenize__(self):
        return ("cutext-taker", id(self))


def count_partition_taken(taker: _Taker, i: int, vocab_frame, like):
    """:func:`count_partition_summary` of partition ``i``'s summary, released as it is used."""
    return count_partition_summary(taker.take(i), vocab_frame, like)


@dataclass
class _TokensPlan:
    cfg: TokenizerConfig
    summaries: list
    doc_ids: np.ndarray      # int64 (n_docs,), in partition order
    lengths: np.ndarray      # int64 (n_docs,), tokens per document


@dataclass
class _EncodedPlan:
    tokens: _TokensPlan
    vocab_frame: object


# ----------------------------------------------------------------------------- the stages

def number_documents(texts, text_column: str = "text"):
    """``(doc_id, text)``: a text collection numbered ``0 .. N-1`` in partition order.

    The scan of Wakatsuki et al. step 2: the rows of every partition are counted, and partition ``i``
    starts at the sum of the earlier counts (:func:`cutext.stages.readers.files.number_documents` does the
    same for files).

    Parameters
    ----------
    texts : dask DataFrame with ``text_column``, or dask Series of strings
    text_column : str

    Returns
    -------
    dask DataFrame ``(doc_id: int64, text: string)``, the partitions of ``texts``.
    """
    texts = _as_dask(texts, "texts")
    counts = np.asarray(texts.map_partitions(len, meta=(None, "int64")).compute(), dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    m = meta({"doc_id": "int64", "text": "string"}, texts._meta)
    return texts.map_partitions(_WithDocIds(offsets, text_column), meta=m, enforce_metadata=False,
                                align_dataframes=False)


def _check_texts(texts, column: str):
    m = texts._meta
    if m.ndim == 1:
        dtype = m.dtype
    elif column not in m.columns:
        raise FrameError(f"texts: no text column {column!r}; columns are {list(m.columns)} (pass text_column=)")
    else:
        dtype = m[column].dtype
    if _string_dtype(dtype, is_gpu_object(m)) is False:
        raise FrameError(f"texts: text column {column!r} has dtype {dtype}, not strings")
    if m.ndim == 2 and "doc_id" in m.columns and not np.issubdtype(np.dtype(str(m["doc_id"].dtype)), np.integer):
        raise FrameError(f"texts: doc_id has dtype {m['doc_id'].dtype}; doc ids are integers")


def tokenize(texts, tokenizer: TokenizerConfig | None = None, *, text_column: str = "text", persist: bool = True,
             **tokenizer_kw):
    """Tokenize documents: text partitions -> ``(doc_id, token)`` partitions.

    Parameters
    ----------
    texts : dask DataFrame or Series (pandas / cudf objects are taken as one partition)
        A Series of strings, or a DataFrame with ``text_column`` and optionally ``doc_id``
        (integers; any values, unique within the corpus).  Without ``doc_id`` the documents are
        numbered ``0 .. N-1`` in partition order (:func:`number_documents`; this reads the
        partitions once to count their rows).  Missing text is an empty document.
    tokenizer : TokenizerConfig, optional
        The rules (:mod:`cutext.stages.text.tokenize`); default from ``tokenizer_kw``.
    text_column : str
    persist : bool
        Tokenize every partition now and persist its compact summary (distinct tokens and distinct
        (token, document) pairs with counts), so that :func:`encode` and :func:`count` of the result
        do not tokenize again.  False: a lazy result only.
    **tokenizer_kw
        ``lowercase``, ``stopwords``, ``stemmer``, ``min_len``, ``max_len``
        (:meth:`TokenizerConfig.make`), when ``tokenizer`` is not given.

    Returns
    -------
    dask DataFrame ``(doc_id: int64, token: string)``
        One row per token in document order, lazy (it recomputes from ``texts``); pandas or cudf
        partitions as ``texts``.  Documents without a token have no row.

    Raises
    ------
    FrameError (ValueError)
        No text column, text that is not strings, non-integer doc ids.
    TypeError
        ``texts`` is not a frame; ``tokenizer`` given together with ``tokenizer_kw``.
    """
    import dask

    if tokenizer is not None and tokenizer_kw:
        raise TypeError("pass either tokenizer= or tokenizer keywords, not both")
    cfg = tokenizer or TokenizerConfig.make(**tokenizer_kw)
    texts = _as_dask(texts, "texts")
    _check_texts(texts, text_column)
    if texts.ndim == 1 or "doc_id" not in texts.columns:
        texts = number_documents(texts, text_column)
        text_column = "text"
    fn = _Tokenize(cfg, text_column)
    tokens = texts.map_partitions(fn, meta=meta("tokens", texts._meta), enforce_metadata=False,
                                  align_dataframes=False)
    if not persist:
        return tokens
    parts = texts.to_delayed()
    tasks = [dask.delayed(tokenize_partition_summary)(p, cfg, text_column) for p in parts]
    client = cluster_client()
    if client is None:
        summaries = persist_all(tasks)
        docs = dask.compute(*[dask.delayed(_summary_docs)(s) for s in summaries])
    else:  # each partition's lengths submitted with its summary, not after all of them (one round trip less)
        summaries = list(dask.persist(*tasks))
        docs_futures = client.compute([dask.delayed(_summary_docs)(s) for s in summaries])
        persist_all(summaries)  # waits, feeding the stage's progress
        docs = client.gather(docs_futures)
    doc_ids = np.concatenate([d for d, _ in docs]) if docs else np.zeros(0, np.int64)
    lengths = np.concatenate([n for _, n in docs]) if docs else np.zeros(0, np.int64)
    return _set_plan(tokens, _TokensPlan(cfg, summaries, doc_ids, lengths))


def retext(tokens, texts):
    """A :func:`tokenize` result whose lazy rows are computed from ``texts`` instead of the
    collection it was tokenized from; its persisted summaries (what :func:`encode` and
    :func:`count` use) are kept.

    ``texts`` must hold the same ``(doc_id, text)`` partitions (e.g. the same files read again), so
    that a persisted text collection can be freed once it is tokenized.
    """
    plan = _plan(tokens)
    if not isinstance(plan, _TokensPlan):
        raise ValueError("retext needs the result of tokenize(..., persist=True)")
    out = texts.map_partitions(_Tokenize(plan.cfg, "text"), meta=tokens._meta, enforce_metadata=False,
                               align_dataframes=False)
    return _set_plan(out, plan)


def encode(tokens):
    """Dictionary-encode tokens: the global vocabulary and a term id for every token.

    Parameters
    ----------
    tokens : dask DataFrame ``(doc_id: int64, token: string)``
        From :func:`tokenize` (or any such frame, e.g. tokens filtered by the user).

    Returns
    -------
    vocab : pyarrow.LargeStringArray, shape (V,)
        The distinct tokens sorted by UTF-8 bytes; term id ``i + 1`` is ``vocab[i]`` (id 0 is
        reserved for unknown terms).  Computed now (the one global step).
    encoded : dask DataFrame ``(doc_id: int64, term_id: int32)``
        One row per token, rows and order of ``tokens``; lazy.

    Raises
    ------
    ValueError
        ``tokens`` lacks the ``doc_id`` / ``token`` columns.
    """
    import dask
    import dask.dataframe as dd

    tokens = _as_dask(tokens, "tokens")
    if tokens.ndim != 2 or not {"doc_id", "token"} <= set(tokens.columns):
        raise ValueError(f"tokens must have columns doc_id and token, got {list(getattr(tokens, 'columns', []))}")
    like = tokens._meta
    plan = _plan(tokens)
    if plan is not None:
        uniques = dd.from_delayed([dask.delayed(encode_partition_uniques)(s, like) for s in plan.summaries],
                                  meta=meta({"token": "string"}, like), verify_meta=False)
        vocab = build_vocabulary(uniques)
    else:
        vocab = build_vocabulary(tokens)
    clock = StepClock(np)
    vf = vocabulary_frame(vocab, like)
    clock("encode: vocabulary frame")
    encoded = tokens.map_partitions(encode_partition, vf, meta=meta("encoded", like))
    if plan is not None:
        _set_plan(encoded, _EncodedPlan(plan, vf))
    return vocab, encoded


@dataclass
class Counts:
    """The count stage's result (Wakatsuki et al. steps 3, 5, 6).

    Attributes
    ----------
    counts : dask DataFrame ``(term_id: int32, doc_id: int64, tf: int32, dl: int32)``
        One row per distinct (term, document) pair, ``tf`` its occurrences, ``dl`` the document's
        length; sorted by ``term_id`` within each partition (then by ``doc_id`` where the
        partition's doc ids increase, as numbered ones do); persisted.
    df : numpy int64 array, shape (V + 1,)
        Documents per term id (``df[0] = 0``, the unknown id).
    lengths : numpy int64 array, shape (n_docs,)
        Tokens per document, index = ``doc_id`` (0 for a document without a token).
    n_docs : int
        Documents (``len(lengths)``).
    n_terms : int
        V.
    """

    counts: object
    df: np.ndarray
    lengths: np.ndarray
    n_docs: int
    n_terms: int

    @property
    def n_tokens(self) -> int:
        return int(self.lengths.sum())


def token_lengths(tokens, n_docs: int | None = None) -> np.ndarray:
    """Tokens per document, int64 array of shape (n_docs,), index = doc_id.

    From the summaries of an unchanged :func:`tokenize` result (documents without a token
    included), else counted from the rows (``n_docs`` default: largest doc_id + 1).
    """
    plan = _plan(tokens)
    if isinstance(plan, _EncodedPlan):
        plan = plan.tokens
    if plan is not None:
        return _lengths_by_id(plan, n_docs)
    if n_docs is None:
        n_docs = int(tokens["doc_id"].max().compute()) + 1
    return document_lengths(tokens, int(n_docs))


def _lengths_by_id(plan: _TokensPlan, n_docs: int | None) -> np.ndarray:
    ids = plan.doc_ids
    contiguous = len(ids) == 0 or (ids[0] == 0 and bool(np.all(np.diff(ids) == 1)))
    n = len(ids) if n_docs is None and contiguous else (int(ids.max()) + 1 if n_docs is None else int(n_docs))
    if contiguous and n == len(ids):
        return plan.lengths
    out = np.zeros(n, np.int64)
    out[ids] = plan.lengths
    return out


def count(encoded, *, n_terms: int | None = None, n_docs: int | None = None) -> Counts:
    """Count: tf per (term, document), df per term, document lengths.

    Parameters
    ----------
    encoded : dask DataFrame ``(doc_id: int64, term_id: int32)``
        From :func:`encode` (or any such frame).
    n_terms : int, optional
        V (default: from the summaries, else the largest term id).
    n_docs : int, optional
        Documents (default: from the summaries, else the largest doc id + 1).

    Returns
    -------
    Counts
        ``counts`` persisted, ``df`` and ``lengths`` on the host.
    """
    return _count(encoded, n_terms, n_docs, release=False)


def count_releasing(encoded, *, n_docs: int | None = None) -> Counts:
    """:func:`count` of an unchanged :func:`encode` result that frees each partition's tokenize
    summary as soon as its counts are computed, so that the stage's peak memory is about the
    counts, not the counts and every summary (the corpus front end on one GPU).

    Only for in-process schedulers (the summaries must be in this process).  Afterwards the plan
    of ``encoded`` and of its tokens is spent (:func:`_plan` gives None): they are computed from
    their rows if used again.
    """
    if not isinstance(_plan(encoded), _EncodedPlan):
        raise ValueError("count_releasing needs the unchanged result of encode(tokenize(...))")
    return _count(encoded, None, n_docs, release=True)


def _count(encoded, n_terms, n_docs, release: bool) -> Counts:
    import dask
    import dask.dataframe as dd

    encoded = _as_dask(encoded, "encoded")
    like = encoded._meta
    plan = _plan(encoded)
    if plan is not None:
        vf_key = shared_key(plan.vocab_frame)  # to every worker once, not through the scheduler
        if release:
            taker = dask.delayed(_Taker(plan.tokens.summaries), pure=True)
            parts = [dask.delayed(count_partition_taken)(taker, i, vf_key, like)
                     for i in range(len(plan.tokens.summaries))]
        else:
            parts = [dask.delayed(count_partition_summary)(s, vf_key, like) for s in plan.tokens.summaries]
        counts = dd.from_delayed(parts, meta=meta("counts", like), verify_meta=False)
        V = len(plan.vocab_frame) if n_terms is None else int(n_terms)
        lengths = _lengths_by_id(plan.tokens, n_docs)
    else:
        counts = encoded.map_partitions(count_partition, meta=meta("counts", like))
        V = int(encoded["term_id"].max().compute()) if n_terms is None else int(n_terms)
        nd = int(encoded["doc_id"].max().compute()) + 1 if n_docs is None else int(n_docs)
        lengths = document_lengths(encoded, nd)
    clock = StepClock(np)
    client = cluster_client()
    if client is None:
        counts = persist_all([counts])[0]
        df = document_frequencies(counts, V)
    else:  # the df histograms submitted with the counts: each runs when its partition is counted
        counts = counts.persist()
        root = document_frequencies_delayed(counts, V)
        df_future = client.compute(root) if root is not None else None
        persist_all([counts])  # waits, feeding the stage's progress
        df = np.asarray(df_future.result() if df_future is not None else np.zeros(V + 1), dtype=np.int64)
    clock("count: df")
    return Counts(counts, df, lengths, len(lengths), V)


# ----------------------------------------------------------------------------- BM25

@dataclass
class BM25Postings:
    """Weighted postings of a corpus (:func:`bm25`).

    Attributes
    ----------
    postings : dask DataFrame ``(term_id: int32, doc_id: int64, tf: int32, weight: float32)``
        Term-major: partition ``i`` holds a range of term ids, rows sorted by (term_id, doc_id);
        lazy (write it, e.g. ``to_parquet``, or compute it).
    idf, w0 : numpy float64 arrays, shape (V + 1,)
        idf per term id and the weight of an absent term (nonzero for bm25l, bm25+).
    avgdl : float
    n_docs : int
    delta : float
        The delta in effect (0 for variants without one).
    ranges : list of dask.delayed.Delayed, optional
        The partitions of ``postings`` as delayed objects (one term range each) when they are built
        from slices of every counts partition.
    range_workers : list of str, optional
        When the ranges are spread over a distributed cluster: range ``i`` goes preferably to worker
        ``i`` mod these, and a task made under ``cutext.stages.runtime.compute.on_worker(i, range_workers)``
        from ``ranges[i]`` (writing it, say) runs beside it.  (``postings.to_delayed()`` loses that
        placement: dask's ``from_delayed`` drops the annotations.)
    """

    postings: object
    idf: np.ndarray
    w0: np.ndarray
    avgdl: float
    n_docs: int
    delta: float
    ranges: list | None = None
    range_workers: list | None = None


def bm25(counts: Counts, *, variant: str = "lucene", k1: float = 1.2, b: float = 0.75, delta=None,
         n_partitions: int | None = None) -> BM25Postings:
    """BM25 weights of every (term, document) pair, as term-major postings (Wakatsuki et al. Eq. 1).

    Parameters
    ----------
    counts : Counts
        From :func:`count`.
    variant : {"lucene", "robertson", "atire", "bm25l", "bm25+"}
        The formulas of :mod:`cutext.stages.text.bm25`.
    k1, b, delta : float
    n_partitions : int, optional
        Term ranges (output partitions) of about equal postings; default one per 8 M postings.

    Returns
    -------
    BM25Postings

    Raises
    ------
    ValueError
        Bad BM25 parameters, or a corpus without a token (avgdl = 0).
    """
    import dask.dataframe as dd


    delta = _bm25.check_params(variant, k1, b, delta)
    n_docs = counts.n_docs
    n_tokens = counts.n_tokens
    if n_tokens == 0 or n_docs == 0:
        raise ValueError(f"no document has a token ({n_docs} documents): BM25 needs avgdl > 0")
    avgdl = n_tokens / n_docs
    idf_t = _bm25.idf(counts.df, n_docs, variant)
    w0 = _bm25.absent_weight(idf_t, variant, k1, delta)
    n_postings = int(counts.df.sum())
    nparts = int(n_partitions) if n_partitions else max(1, -(-n_postings // 8_000_000))
    c = counts.counts
    weight_fn = _bm25.WeightPartition(idf_t, avgdl, variant, k1, b, delta)
    wmeta = _bm25.weights_meta(c._meta)
    divisions = term_divisions(counts.df, nparts)
    ranges = range_workers = None
    if len(divisions) < 2 or divisions[0] == divisions[-1] or c.npartitions == 1 and nparts == 1:
        weighted = c.map_partitions(weight_fn, meta=wmeta).map_partitions(_drop_dl, meta=_drop_dl(wmeta))
        postings = term_major(weighted, counts.df, nparts)
    else:
        ranges, range_workers = _term_ranges(c, divisions, weight_fn)
        postings = dd.from_delayed(ranges, meta=_drop_dl(wmeta), verify_meta=False)
    return BM25Postings(postings, idf_t, w0, avgdl, n_docs, delta, ranges, range_workers)


def _drop_dl(df):
    return df[["term_id", "doc_id", "tf", "weight"]]


def _term_cuts(part, divisions):
    """A counts partition (sorted by term) as ``(cuts, columns)``: its columns as arrays and the row
    where each term range starts, ``cuts[i]`` = first row with ``term_id >= divisions[i]``, the last
    cut after the rows ``<= divisions[-1]`` (the last range is closed).  One search and one copy to
    the host for all the ranges of the partition."""
    t = values(part["term_id"])
    xp = array_module(t)
    d = np.asarray(divisions, dtype=np.int64)
    cuts = xp.concatenate([xp.searchsorted(t, xp.asarray(d[:-1], dtype=t.dtype), side="left"),
                           xp.searchsorted(t, xp.asarray(d[-1:], dtype=t.dtype), side="right")])
    return to_host(cuts).astype(np.int64), {c: values(part[c]) for c in part.columns}


def _term_slice(cut, i: int) -> dict:
    """The rows of term range ``i`` of a partition cut by :func:`_term_cuts`: views of its columns."""
    cuts, cols = cut
    a, e = int(cuts[i]), int(cuts[i + 1])
    return {c: v[a:e] for c, v in cols.items()}


def _concat_slices(slices: list, own: bool = False) -> dict:
    """Slices (dicts of column arrays) as one dict: the non-empty ones concatenated; a lone slice is
    returned as it is (views), or copied when ``own`` (a frame of its own, not of the partition)."""
    kept = [s for s in slices if len(next(iter(s.values())))] or slices[:1]
    if len(kept) == 1:
        return {c: v.copy() for c, v in kept[0].items()} if own else kept[0]
    xp = array_module(next(iter(kept[0].values())))
    return {c: xp.concatenate([s[c] for s in kept]) for c in kept[0]}


# the rows a term range takes from another worker are weighted there and sent packed (eleventh
# pass): term ids as runs, doc ids as int32 and tf as uint16 where they fit, no dl: 10 bytes a posting
# instead of 20 through the workers' comm (TCP between GPUs without UCX)
PACK_REMOTE_SLICES = True


def _term_slices(cuts: list, i: int, weight_fn, pack: bool = True):
    """Term range ``i``'s rows of several cut partitions (those on one worker): what moves to the
    range's worker, one transfer a worker instead of one a partition.  Weighted here and packed
    (:class:`_PackedRows`, sent as the plain tuple of its arrays), or (``pack`` False) one dict of the
    counts' column arrays.

    A tuple or dict of arrays, not an object: distributed serializes each array of a plain container
    by itself, so over UCX device arrays go device to device (CUDA IPC), where an object of its own
    class is pickled through host memory (74 MB of packed rows between two
    workers in 17 ms as a tuple, 140 ms as the dataclass).  dask also sizes the container by its arrays."""
    rows = _concat_slices([_term_slice(c, i) for c in cuts])
    return _pack_rows(rows, weight_fn).astuple() if pack else rows


@dataclass
class _PackedRows:
    """Weighted postings in few bytes: ``terms`` / ``runs`` the term ids as runs (in row order),
    ``doc_id`` (int32 when the ids fit), ``tf`` (uint16 when the counts fit), ``weight`` float32."""

    terms: object
    runs: object
    doc_id: object
    tf: object
    weight: object

    def astuple(self) -> tuple:
        """``(terms, runs, doc_id, tf, weight)``: what travels between workers; ``_PackedRows(*t)`` again."""
        return (self.terms, self.runs, self.doc_id, self.tf, self.weight)

    def unpack(self) -> dict:
        """``(term_id: int32, doc_id: int64, tf: int32, weight: float32)`` column arrays."""
        xp = array_module(self.doc_id)
        if xp is np:
            t = np.repeat(self.terms, self.runs)
        else:
            t = self.terms[xp.searchsorted(xp.cumsum(self.runs), xp.arange(len(self.doc_id)), side="right")]
        return {"term_id": t.astype(np.int32, copy=False), "doc_id": self.doc_id.astype(np.int64, copy=False),
                "tf": self.tf.astype(np.int32, copy=False), "weight": self.weight}


def _pack_rows(rows: dict, weight_fn) -> _PackedRows:
    """:class:`_PackedRows` of ``(term_id, doc_id, tf, dl)`` column arrays, weighted by ``weight_fn``."""

    t, d, tf = rows["term_id"], rows["doc_id"], rows["tf"]
    xp = array_module(t)
    w = weight_fn.weights(t, tf, rows["dl"])
    terms, runs = run_lengths(t)
    if len(t):  # one copy to the host for the three bounds
        lo_d, hi_d, hi_tf = (int(v) for v in to_host(xp.stack([d.min(), d.max(), tf.max().astype(d.dtype)])))
        if lo_d >= 0 and hi_d < 2**31:
            d = d.astype(np.int32)
        if 0 <= hi_tf < 2**16:
            tf = tf.astype(np.uint16)
    return _PackedRows(terms, runs.astype(np.int32), d, tf, w)


def _is_packed(part) -> bool:
    """Packed rows (:meth:`_PackedRows.astuple`, five arrays), not a cut partition ``(cuts, columns)``."""
    return isinstance(part, tuple) and len(part) == 5


def _term_range(parts, i: int, weight_fn):
    """Term range ``i`` of the postings: its rows of every counts partition (``parts``: partitions cut by
    :func:`_term_cuts` on this worker, or what :func:`_term_slices` sent from other workers), in one
    frame (cudf for device arrays, else pandas), weighted, sorted by (term_id, doc_id)."""

    rows = [_PackedRows(*p).unpack() for p in parts if _is_packed(p)]  # weighted where they were cut
    slices = [p if isinstance(p, dict) else _term_slice(p, i) for p in parts if not _is_packed(p)]
    xp = array_module(next(iter((slices or rows)[0].values())))
    clock = StepClock(xp)
    if slices:
        cols = _concat_slices(slices, own=True)
        rows.insert(0, {"term_id": cols["term_id"], "doc_id": cols["doc_id"], "tf": cols["tf"],
                        "weight": weight_fn.weights(cols["term_id"], cols["tf"], cols["dl"])})
    cols = _concat_slices(rows)
    if xp is np:
        df = pd.DataFrame(cols)
    else:
        import cudf

        df = cudf.DataFrame(cols)
    clock("weight: concat + weights")
    df = sort_frame_by_pairs(df)
    clock("weight: sort")
    return df


def _term_ranges(counts, divisions, weight_fn) -> tuple[list, list | None]:
    """Term-major postings without a shuffle of the whole table (bounded memory), as one
    delayed frame per term range, and the workers they were spread over (None: not spread).

    ``counts`` partitions are sorted by term, so the postings of a term range are a slice of every
    partition: range ``i`` concatenates the rows of ``[div_i, div_{i+1})`` of every partition
    (:func:`cutext.stages.text.sort.term_divisions`, the last range closed), weights and sorts them.
    Same partitions and rows as :func:`cutext.stages.text.sort.term_major`.  Each partition is searched
    once for the first row of every range (:func:`_term_cuts`).  In-process or on one worker a range
    task takes those cut partitions themselves (no task a slice).  On a distributed cluster range ``i``
    goes preferably to worker ``i`` mod the workers (:func:`cutext.stages.runtime.compute.on_worker`; left to
    the scheduler, every range went where most of its slices were, all on one worker of two); it takes
    the cut partitions of its own worker, and from every other worker one :func:`_term_slices` task,
    made there, with its rows of that worker's partitions (one transfer a worker, not one a partition).
    """
    import dask

    workers = cluster_workers()
    placed = partition_homes(counts) if workers else None
    if placed is None:  # in-process, one worker, or partitions that are not futures: no placement
        parts, homes, workers = counts.to_delayed(), None, None
    else:  # cut partition j where it is (else it would follow its range's annotation)
        parts, homes = placed
    cut = []
    for j, p in enumerate(parts):  # each partition searched once for every range's first row
        with on_worker(j, homes):
            cut.append(dask.delayed(_term_cuts)(p, list(divisions)))
    wf = shared_key(weight_fn)  # idf: V + 1 floats, one key for every range and slice task
    groups = {}  # worker -> its partitions, in partition order
    for j, h in enumerate(homes or ()):
        groups.setdefault(h, []).append(j)
    out = []
    for i in range(len(divisions) - 1):
        if homes is None:
            inputs = cut
        else:
            here = workers[i % len(workers)]
            inputs = [cut[j] for j in groups.get(here, ())]
            for h, js in groups.items():
                if h != here:
                    with on_worker(js[0], homes):
                        inputs.append(dask.delayed(_term_slices)([cut[j] for j in js], i, wf, PACK_REMOTE_SLICES))
        with on_worker(i, workers):
            out.append(dask.delayed(_term_range)(inputs, i, wf))
    return out, workers


# ----------------------------------------------------------------------------- LDA
