"""The result frames of a BM25 search: string columns gathered by pyarrow, and Anserini's tie order.
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


topk_rows = search_stage.topk_rows  # the sparse path's top-k (moved to cutext.stages.engines.search)
