"""The result frames of a BM25 search: the numeric columns filled batch by batch, string columns gathered by
pyarrow, and Anserini's tie order.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from cutext.stages.engines import search as search_stage


def ties_by_source_id(search, queries, k: int, n_docs: int, extra: int = 64) -> pd.DataFrame:
    """``search(queries, k')`` with equal scores ranked by the documents' source ids, as Anserini's
    ``SearchCollection`` sorts its hits (score descending, then the id field's UTF-8 bytes ascending).

    The engines break ties by the smaller ``doc_id``, so ``k' = k + extra`` hits are asked for and re-sorted; a
    query whose ``k``-th score still equals its ``k'``-th (a tie across the cut) asks again with ``extra``
    four times larger, so the first ``k`` rows are exact.

    Parameters
    ----------
    search : callable ``(queries, k) -> DataFrame`` (:meth:`BM25Index.search`'s frame)
    queries
        As :meth:`BM25Index.search`.
    k, n_docs : int
        Hits a query (already checked) and the documents of the index.

    Returns
    -------
    pandas.DataFrame
        The frame of ``search``, at most ``k`` rows a query, ranks renumbered.
    """
    while True:
        kk = min(n_docs, k + extra)
        hits = search(queries, kk)
        q = pd.factorize(hits["query_id"])[0]
        sid = hits["source_id"].astype(object).to_numpy()
        order = np.lexsort((sid, -hits["score"].to_numpy(), q))  # code point order of str = UTF-8 byte order
        hits = hits.iloc[order].reset_index(drop=True)
        q = q[order]
        rank = np.arange(len(q)) - np.searchsorted(q, q)
        score = hits["score"].to_numpy()
        n = np.bincount(q) if len(q) else np.zeros(0, np.int64)
        last = (np.cumsum(n) - 1)[q]  # the row of each query's lowest score
        cut = (rank == k - 1) & (n[q] == kk) & (score == score[last])
        if kk >= n_docs or not cut.any():
            keep = rank < k
            hits = hits[keep].reset_index(drop=True)
            hits["rank"] = rank[keep] + 1
            return hits
        extra *= 4


def _take_str(values: pa.Array, idx: np.ndarray) -> pd.Series:
    """``values[idx]`` as a pandas Series of the default string dtype, gathered by pyarrow."""
    taken = values.take(pa.array(idx, type=pa.int64()))
    return pd.Series(pd.array(taken, dtype=pd.Series([], dtype=str).dtype))


def _str_series(chunks: list) -> pd.Series:
    """pyarrow string arrays (a search's batches) as one pandas Series of the default string dtype, the
    chunks kept as they are (no copy)."""
    return pd.Series(pd.array(pa.chunked_array(chunks, pa.string()), dtype=pd.Series([], dtype=str).dtype))


def _batch_rows(doc, score, n, k: int) -> tuple:
    """A batch's hits as rows: ``(query row, rank from 0, doc, score as float64)`` (rows, ranks and scores fresh
    arrays), from the engines' ``(doc, score)`` of shape ``(queries, k)`` of which query ``q`` fills its first
    ``n[q]``."""
    if n.size and n.min() == k:  # every query has k documents: the arrays in row order as they are
        rows = np.repeat(np.arange(len(n), dtype=np.int64), k)
        rank = np.tile(np.arange(k, dtype=np.int64), len(n))
        return rows, rank, doc.reshape(-1), score.reshape(-1).astype(np.float64)
    keep = np.arange(k)[None, :] < n[:, None]  # a query's first n[q] columns, row by row
    n64 = n.astype(np.int64)
    rows = np.repeat(np.arange(len(n), dtype=np.int64), n64)
    rank = np.arange(len(rows), dtype=np.int64) - np.repeat(np.cumsum(n64) - n64, n64)
    return rows, rank, doc[keep], score[keep].astype(np.float64)


class _ResultColumns:
    """A search's numeric columns (rank, doc_id, doc_index, score) filled batch by batch, with no concatenation
    after the last: room for ``first`` rows at first, at most ``cap`` (k rows a query), doubled as needed."""

    def __init__(self, cap: int, first: int):
        self.cap, self.filled = cap, 0
        self.cols = {name: np.empty(min(cap, first), dt) for name, dt in
                     (("rank", np.int64), ("doc_id", np.int64), ("doc_index", np.int64), ("score", np.float64))}

    def add(self, rank, docs, vals) -> None:
        """Append a batch's rows (``rank`` from 0)."""
        filled, end, cols = self.filled, self.filled + len(docs), self.cols
        if end > len(cols["rank"]):
            for name, c in list(cols.items()):
                cols[name] = np.empty(min(max(end, 2 * len(c)), self.cap), c.dtype)
                cols[name][:filled] = c[:filled]
        np.add(rank, 1, out=cols["rank"][filled:end])
        cols["doc_id"][filled:end] = docs
        cols["doc_index"][filled:end] = docs
        cols["score"][filled:end] = vals
        self.filled = end

    def views(self) -> dict:
        """Views of the filled rows (copies when under half were filled, so the rest is not kept alive)."""
        f = self.filled
        return {name: c[:f] if 2 * f >= len(c) else c[:f].copy() for name, c in self.cols.items()}


topk_rows = search_stage.topk_rows  # the sparse path's top-k (moved to cutext.stages.engines.search)
