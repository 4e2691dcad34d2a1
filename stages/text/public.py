"""The public stages: cutext's dataflow as functions on dask (or dask-cudf) collections.

These are the building blocks the pipelines are made of (``bm25``, ``cluster`` and ``lda`` run
exactly these calls through :func:`cutext.stages.text.frontend.build_corpus`), for a user who already
holds a dask DataFrame (read from a data lake, filtered, joined) and wants term statistics the
pipelines do not offer::

    import dask.dataframe as dd
    from cutext import stages

    texts = dd.read_parquet("lake/posts/")[["doc_id", "text"]]   # or any (doc_id, text) frame
    tokens = stages.tokenize(texts, stopwords="lucene")              # a TokenTable: (doc_id, token)
    vocab, encoded = stages.encode(tokens)                           # vocabulary; (doc_id, term_id)
    c = stages.count(encoded)                                        # tf per (term, doc); df; lengths
    w = stages.bm25(c, k1=0.9, b=0.4)                                # weighted term-major postings
    ch = stages.lda_chunks(c, vocab, K=20)                           # LDA's chunked token list

Every function takes its library from the partitions: pandas partitions run the CPU kernels
(numpy, numba, pyarrow), cudf partitions the GPU ones (cupy, CUDA kernels).  A ``client`` is the
one of the surrounding context (a ``distributed.Client`` set as default, or the dask scheduler
in effect).

The token table
---------------
:func:`tokenize` returns a :class:`~cutext.stages.text.tokens.TokenTable`: with ``persist=True`` (the
default) every partition is tokenized once and summarized (its distinct tokens and its distinct
(token, document) pairs with their counts; no row per token is kept), the summaries persisted in
memory or, with ``spill=``, written to a folder per partition.  :func:`encode` of a table and
:func:`count` of its :class:`~cutext.stages.text.tokens.EncodedTable` use those summaries, so the text is
tokenized once and memory stays bounded by the distinct pairs.  ``table.to_frame()`` gives the rows
as a lazy dask collection; a collection derived from it (filtered, joined, re-partitioned) is a
plain frame, encoded and counted row by row; both ways give the same tables.

Shapes and dtypes follow the data model (``cutext.kernels.backend.SCHEMAS``):
``tokens (doc_id: int64, token: string)``, ``encoded (doc_id: int64, term_id: int32)``,
``counts (term_id: int32, doc_id: int64, tf: int32, dl: int32)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from cutext.kernels.backend import is_gpu_object, meta
from cutext.stages.readers.frames import FrameError, _string_dtype, is_dask, is_frame
from cutext.stages.runtime.compute import StepClock, cluster_client, compute_all, persist_all, shared_key
from cutext.stages.runtime.params import param
from cutext.stages.runtime.reprs import short_repr
from cutext.stages.text import bm25 as _bm25
from cutext.stages.text.count import (
    count_partition,
    document_frequencies,
    document_frequencies_delayed,
    document_lengths,
)
from cutext.stages.text.encode import build_vocabulary, vocabulary_frame
from cutext.stages.text.partitions import load_counts_partition
from cutext.stages.text.ranges import _drop_dl, _term_ranges
from cutext.stages.text.sort import term_divisions, term_major
from cutext.stages.text.tokenize import TokenizerConfig
from cutext.stages.text.tokens import (
    EncodedTable,
    TokenTable,
    WithDocIds,
    _Taker,
    count_partition_spill,
    count_partition_summary,
    count_partition_taken,
    counts_folders,
    encode_partition_uniques,
    encode_partition_uniques_spilled,
    encoded_rows,
    spill_folders,
    summary_docs,
    tokenize_partition_spill,
    tokenize_partition_summary,
)

__all__ = [
    "BM25Postings",
    "Counts",
    "EncodedTable",
    "TokenTable",
    "bm25",
    "count",
    "count_releasing",
    "encode",
    "number_documents",
    "token_lengths",
    "tokenize",
]


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
    return texts.map_partitions(WithDocIds(offsets, text_column), meta=m, enforce_metadata=False,
                                align_dataframes=False)


def _check_texts(texts, column: str):
    m = texts._meta
    if m.ndim == 1:
        dtype = m.dtype
    elif column not in m.columns:
        raise FrameError(f"texts: no text column {column!r}; columns are {list(m.columns)} "
                         f"(pass {param('text_column')})")
    else:
        dtype = m[column].dtype
    if _string_dtype(dtype, is_gpu_object(m)) is False:
        raise FrameError(f"texts: text column {column!r} has dtype {dtype}, not strings")
    if m.ndim == 2 and "doc_id" in m.columns and not np.issubdtype(np.dtype(str(m["doc_id"].dtype)), np.integer):
        raise FrameError(f"texts: doc_id has dtype {m['doc_id'].dtype}; doc ids are integers")


# ----------------------------------------------------------------------------- the stages

def tokenize(texts, tokenizer: TokenizerConfig | None = None, *, text_column: str = "text", persist: bool = True,
             spill=None, **tokenizer_kw) -> TokenTable:
    """Tokenize documents: text partitions -> a token table of ``(doc_id, token)`` rows.

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
        Tokenize every partition now and keep its compact summary (distinct tokens and distinct
        (token, document) pairs with counts), so that :func:`encode` and :func:`count` of the table
        do not tokenize again.  False: a lazy table only (its rows are counted row by row).
    spill : str or os.PathLike, optional
        A folder (reachable by every worker) for the summaries, one ``scan-NNNNN/`` folder per
        partition, instead of persisting them in memory: memory then holds the partitions in flight,
        not the corpus.  :func:`count` writes its partitions beside them (``counts-NNNNN/``); the
        caller removes the folder when done.
    **tokenizer_kw
        ``lowercase``, ``stopwords``, ``stemmer``, ``min_len``, ``max_len``
        (:meth:`TokenizerConfig.make`), when ``tokenizer`` is not given.

    Returns
    -------
    TokenTable
        ``to_frame()``: dask DataFrame ``(doc_id: int64, token: string)``, one row per token in
        document order, lazy (it recomputes from ``texts``); pandas or cudf partitions as ``texts``.
        Documents without a token have no row.

    Raises
    ------
    FrameError (ValueError)
        No text column, text that is not strings, non-integer doc ids.
    TypeError
        ``texts`` is not a frame; ``tokenizer`` given together with ``tokenizer_kw``.
    ValueError
        ``spill`` with ``persist=False``.
    """
    if tokenizer is not None and tokenizer_kw:
        raise TypeError("pass either tokenizer= or tokenizer keywords, not both")
    if spill is not None and not persist:
        raise ValueError("spill= is where the summaries go: it needs persist=True")
    cfg = tokenizer or TokenizerConfig.make(**tokenizer_kw)
    texts = _as_dask(texts, "texts")
    _check_texts(texts, text_column)
    if texts.ndim == 1 or "doc_id" not in texts.columns:
        texts = number_documents(texts, text_column)
        text_column = "text"
    if not persist:
        return TokenTable(texts, cfg, text_column)
    if spill is not None:
        parts, docs = _summarize_spilled(texts, cfg, text_column, Path(spill))
    else:
        parts, docs = _summarize_in_memory(texts, cfg, text_column)
    doc_ids = np.concatenate([d for d, _ in docs]) if docs else np.zeros(0, np.int64)
    lengths = np.concatenate([n for _, n in docs]) if docs else np.zeros(0, np.int64)
    return TokenTable(texts, cfg, text_column, parts, doc_ids, lengths, "spill" if spill is not None else "memory",
                      Path(spill) if spill is not None else None)


def _summarize_in_memory(texts, cfg, column):
    """The persisted summaries of every partition and their (doc ids, lengths)."""
    import dask

    tasks = [dask.delayed(tokenize_partition_summary)(p, cfg, column) for p in texts.to_delayed()]
    client = cluster_client()
    if client is None:
        summaries = persist_all(tasks)
        return summaries, dask.compute(*[dask.delayed(summary_docs)(s) for s in summaries])
    # each partition's lengths submitted with its summary, not after all of them (one round trip less)
    summaries = list(dask.persist(*tasks))
    docs_futures = client.compute([dask.delayed(summary_docs)(s) for s in summaries])
    persist_all(summaries)  # waits, feeding the stage's progress
    return summaries, client.gather(docs_futures)


def _summarize_spilled(texts, cfg, column, spill: Path):
    """The summaries of every partition written under ``spill``: their folders and (doc ids, lengths)."""
    import dask

    spill.mkdir(parents=True, exist_ok=True)
    folders = spill_folders(spill, texts.npartitions)
    tasks = [dask.delayed(tokenize_partition_spill)(p, cfg, column, f) for p, f in zip(texts.to_delayed(), folders)]
    return folders, compute_all(tasks)


def encode(tokens):
    """Dictionary-encode tokens: the global vocabulary and a term id for every token.

    Parameters
    ----------
    tokens : TokenTable, or dask DataFrame ``(doc_id: int64, token: string)``
        From :func:`tokenize` (its summaries give the vocabulary), or any such frame (e.g. the rows of
        a table filtered by the user, ``table.to_frame()[...]``).

    Returns
    -------
    vocab : pyarrow.LargeStringArray, shape (V,)
        The distinct tokens sorted by UTF-8 bytes; term id ``i + 1`` is ``vocab[i]`` (id 0 is
        reserved for unknown terms).  Computed now (the one global step).
    encoded : EncodedTable
        ``to_frame()``: dask DataFrame ``(doc_id: int64, term_id: int32)``, one row per token, rows
        and order of ``tokens``; lazy.

    Raises
    ------
    ValueError
        ``tokens`` lacks the ``doc_id`` / ``token`` columns.
    """
    import dask
    import dask.dataframe as dd

    table = tokens if isinstance(tokens, TokenTable) else None
    frame = table.to_frame() if table is not None else _as_dask(tokens, "tokens")
    if frame.ndim != 2 or not {"doc_id", "token"} <= set(frame.columns):
        raise ValueError(f"tokens must have columns doc_id and token, got {list(getattr(frame, 'columns', []))}")
    like = frame._meta
    if table is not None and table.summarized:
        if table.storage == "spill":
            parts = [dask.delayed(encode_partition_uniques_spilled)(f, like) for f in table.parts]
        else:
            parts = [dask.delayed(encode_partition_uniques)(s, like) for s in table.parts]
        vocab = build_vocabulary(dd.from_delayed(parts, meta=meta({"token": "string"}, like), verify_meta=False))
    else:
        vocab = build_vocabulary(frame)
    clock = StepClock(np)
    vf = vocabulary_frame(vocab, like)
    clock("encode: vocabulary frame")
    return vocab, EncodedTable(encoded_rows(frame, vf), vf, table)


@dataclass
class Counts:
    """The count stage's result (Wakatsuki et al. steps 3, 5, 6).

    Attributes
    ----------
    counts : dask DataFrame ``(term_id: int32, doc_id: int64, tf: int32, dl: int32)``
        One row per distinct (term, document) pair, ``tf`` its occurrences, ``dl`` the document's
        length; sorted by ``term_id`` within each partition (then by ``doc_id`` where the
        partition's doc ids increase, as numbered ones do); persisted, or read from ``folders``.
    df : numpy int64 array, shape (V + 1,)
        Documents per term id (``df[0] = 0``, the unknown id).
    lengths : numpy int64 array, shape (n_docs,)
        Tokens per document, index = ``doc_id`` (0 for a document without a token).
    n_docs : int
        Documents (``len(lengths)``).
    n_terms : int
        V.
    folders : list of pathlib.Path, optional
        Counted from a spilled token table: partition ``i``'s columns as numpy files in ``folders[i]``
        (:func:`cutext.stages.text.partitions.load_spilled`), what ``counts`` reads.
    """

    counts: object
    df: np.ndarray
    lengths: np.ndarray
    n_docs: int
    n_terms: int
    folders: list | None = None

    @property
    def n_tokens(self) -> int:
        return int(self.lengths.sum())

    def __repr__(self) -> str:
        return short_repr(self, ["counts", "n_docs", "n_terms", "n_tokens", "df", "lengths"])


def token_lengths(tokens, n_docs: int | None = None) -> np.ndarray:
    """Tokens per document, int64 array of shape (n_docs,), index = doc_id.

    From the summaries of a :class:`TokenTable` or :class:`EncodedTable` (documents without a token
    included), else counted from the rows (``n_docs`` default: largest doc_id + 1).
    """
    table = tokens.tokens if isinstance(tokens, EncodedTable) else tokens
    if isinstance(table, TokenTable) and table.doc_ids is not None:
        return table.lengths_by_id(n_docs)
    frame = tokens.to_frame() if isinstance(tokens, (TokenTable, EncodedTable)) else tokens
    if n_docs is None:
        n_docs = int(frame["doc_id"].max().compute()) + 1
    return document_lengths(frame, int(n_docs))


def count(encoded, *, n_terms: int | None = None, n_docs: int | None = None) -> Counts:
    """Count: tf per (term, document), df per term, document lengths.

    Parameters
    ----------
    encoded : EncodedTable, or dask DataFrame ``(doc_id: int64, term_id: int32)``
        From :func:`encode` (counted from the token table's summaries), or any such frame.
    n_terms : int, optional
        V (default: the vocabulary's size, else the largest term id).
    n_docs : int, optional
        Documents (default: from the summaries, else the largest doc id + 1).

    Returns
    -------
    Counts
        ``counts`` persisted (or, from a spilled table, written beside its summaries and read from
        there), ``df`` and ``lengths`` on the host.
    """
    return _count(encoded, n_terms, n_docs, release=False)


def count_releasing(encoded, *, n_docs: int | None = None) -> Counts:
    """:func:`count` of an :func:`encode` result with its summaries that frees each partition's summary
    as soon as its counts are computed (a spilled table's folders once all are counted), so that the
    stage's peak memory is about the counts, not the counts and every summary.

    In memory only for in-process schedulers (the summaries must be in this process).  Afterwards the
    token table has no summaries (``summarized`` is False): it is counted from its rows if used again.

    Raises
    ------
    ValueError
        ``encoded`` is not an :class:`EncodedTable` with its token table's summaries.
    """
    if not (isinstance(encoded, EncodedTable) and encoded.summarized):
        raise ValueError("count_releasing needs the unchanged result of encode(tokenize(...))")
    return _count(encoded, None, n_docs, release=True)


def _count(encoded, n_terms, n_docs, release: bool) -> Counts:
    if isinstance(encoded, EncodedTable) and encoded.summarized:
        table = encoded.tokens
        V = len(encoded.vocab_frame) if n_terms is None else int(n_terms)
        lengths = table.lengths_by_id(n_docs)
        if table.storage == "spill":
            counts, df = _count_spilled(table, encoded.vocab_frame, V, encoded._meta)
            if release:
                table.release()
            return Counts(counts, df, lengths, len(lengths), V, counts_folders(table))
        counts = _count_summaries(table, encoded.vocab_frame, encoded._meta, release)
    else:
        frame = encoded.to_frame() if isinstance(encoded, EncodedTable) else _as_dask(encoded, "encoded")
        counts = frame.map_partitions(count_partition, meta=meta("counts", frame._meta))
        if n_terms is None and isinstance(encoded, EncodedTable):
            n_terms = len(encoded.vocab_frame)
        V = int(frame["term_id"].max().compute()) if n_terms is None else int(n_terms)
        nd = int(frame["doc_id"].max().compute()) + 1 if n_docs is None else int(n_docs)
        lengths = document_lengths(frame, nd)
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


def _count_summaries(table: TokenTable, vocab_frame, like, release: bool):
    """The lazy counts collection of a table's summaries in memory (``release``: each freed once used)."""
    import dask
    import dask.dataframe as dd

    vf_key = shared_key(vocab_frame)  # to every worker once, not through the scheduler
    if release:
        taker = dask.delayed(_Taker(table.parts), pure=True)
        parts = [dask.delayed(count_partition_taken)(taker, i, vf_key, like) for i in range(len(table.parts))]
    else:
        parts = [dask.delayed(count_partition_summary)(s, vf_key, like) for s in table.parts]
    return dd.from_delayed(parts, meta=meta("counts", like), verify_meta=False)


def _count_spilled(table: TokenTable, vocab_frame, V: int, like):
    """Counts of a spilled table, written beside its summaries: (a lazy collection reading them, df)."""
    import dask
    import dask.dataframe as dd

    folders = counts_folders(table)
    vf_key = shared_key(vocab_frame)
    tasks = [dask.delayed(count_partition_spill)(s, vf_key, like, f) for s, f in zip(table.parts, folders)]
    df = np.zeros(V + 1, np.int64)
    for terms, n in compute_all(tasks):
        df[terms] += n
    counts = dd.from_delayed([dask.delayed(load_counts_partition)(f, like) for f in folders],
                             meta=meta("counts", like), verify_meta=False)
    return counts, df


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

    def __repr__(self) -> str:
        return short_repr(self, ["postings", "n_docs", "avgdl", "delta", "idf"])


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

    weight_fn = _bm25.corpus_weights(counts.df, counts.n_docs, counts.n_tokens, variant, k1, b, delta)
    idf_t, w0, avgdl, delta, n_docs = weight_fn.idf_t, weight_fn.w0, weight_fn.avgdl, weight_fn.delta, counts.n_docs
    n_postings = int(counts.df.sum())
    nparts = int(n_partitions) if n_partitions else max(1, -(-n_postings // 8_000_000))
    c = counts.counts
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
