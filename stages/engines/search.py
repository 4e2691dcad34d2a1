"""Search stage: score a batch of queries against a term-major BM25 matrix and keep the top k.

Engines (``engine=``):

* ``"cpu"`` -- :func:`cutext.kernels.search.search_cpu` (numba threads, term at a time, heap top-k);
* ``"gpu"`` -- :func:`cutext.kernels.search.search_tiled` on cupy arrays (``search.cu``; device workspace
  bounded by ``max_workspace`` bytes, whatever the batch size);
* ``"sparse"`` -- the sparse product ``Q @ M`` (scipy or cupyx) and a top-k of its rows
  (:func:`topk_rows`), the oracle of the two engines;
* ``"auto"`` -- ``"gpu"`` for a matrix on the device (``"sparse"`` when ``k`` exceeds the GPU engine's
  4096), else ``"cpu"``.

``k`` is capped at the number of documents (``min(k, n_docs)``, at least 1) before anything is sized
by it, so any ``k`` (``10**9``, ``2**63``) is a request for every document, not an allocation.

Every engine returns the same arrays: ``(doc int64 (nq, k), score float32 (nq, k), n int32 (nq,))``, row
q holding its ``n[q]`` documents with a positive score ranked by score descending, **ties broken by the
smaller doc id**; the float32 scores are the sums of ``q_w * weight`` in ascending term order (the
order of scipy's CSR product, so the CPU engine equals the sparse path bit for bit).
:func:`merge_topk` merges the results of document shards with the same rule, so a sharded index
returns what one index returns.

A :class:`DocFilter` (a mask over the documents, or per query the documents it may return) is applied by
every engine before its top k: a row then holds ``min(k, allowed documents with a positive score)``
documents and never a filtered-out one (:meth:`DocFilter.shard` gives a shard its own documents' part).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cutext.kernels import search as ks
from cutext.kernels.backend import array_module, to_host
from cutext.kernels.search import MAX_K_GPU
from cutext.stages.runtime.params import choice, count, param

ENGINES = ("auto", "cpu", "gpu", "sparse")


def _sortable_u32(x):
    """float32 -> uint32 whose unsigned order is the float order (numpy or cupy)."""
    xp = array_module(x)
    u = x.astype(np.float32).view(np.uint32).astype(np.int64)
    return xp.where(u & 0x80000000, 0xFFFFFFFF - u, u | 0x80000000)


@dataclass(frozen=True)
class DocFilter:
    """The documents a batch of queries may return (a filter applied before the top k).

    Exactly one form is set:

    mask : numpy bool array (n_docs,), optional
        The same documents for every query.
    ptr, docs : numpy int64 (nq + 1,) and int64 (nnz,), optional
        Per query ``q`` the doc ids ``docs[ptr[q]:ptr[q + 1]]``, strictly ascending.
    """

    mask: np.ndarray | None = None
    ptr: np.ndarray | None = None
    docs: np.ndarray | None = None

    def queries(self, s: int, e: int) -> "DocFilter":
        """The filter of queries ``[s, e)`` (a batch)."""
        if self.ptr is None:
            return self
        return DocFilter(ptr=self.ptr[s:e + 1] - self.ptr[s], docs=self.docs[self.ptr[s]:self.ptr[e]])

    def shard(self, lo: int, hi: int) -> "DocFilter":
        """The filter of documents ``[lo, hi)``, renumbered from 0 (a shard's)."""
        if self.mask is not None:
            return DocFilter(mask=self.mask[lo:hi])
        keep = (self.docs >= lo) & (self.docs < hi)
        rows = np.repeat(np.arange(len(self.ptr) - 1), np.diff(self.ptr))[keep]
        ptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=len(self.ptr) - 1))]).astype(np.int64)
        return DocFilter(ptr=ptr, docs=self.docs[keep] - lo)

    def engine_args(self) -> dict:
        """The keywords of :func:`cutext.kernels.search.search_cpu` / ``search_tiled`` (``mask`` or ``lists``)."""
        if self.mask is not None:
            return {"mask": self.mask}
        return {"lists": (self.ptr, self.docs)}

    def allowed(self, rows, cols, xp=np):
        """Whether entry ``(rows[i], cols[i])`` (query, doc) is allowed: bool array of ``xp`` (numpy or cupy)."""
        if self.mask is not None:
            return xp.asarray(self.mask)[cols]
        n_docs = int(max(int(self.docs.max()) + 1 if len(self.docs) else 0, int(cols.max()) + 1 if len(cols) else 0))
        q = np.repeat(np.arange(len(self.ptr) - 1, dtype=np.int64), np.diff(self.ptr))
        allowed_keys = xp.asarray(q * n_docs + self.docs)  # sorted: queries in order, docs ascending within
        keys = rows.astype(np.int64) * n_docs + cols.astype(np.int64)
        pos = xp.minimum(xp.searchsorted(allowed_keys, keys), max(len(allowed_keys) - 1, 0))
        return (allowed_keys[pos] == keys) if len(allowed_keys) else xp.zeros(len(keys), dtype=bool)


def cap_k(k, n_docs: int) -> int:
    """``k`` as an int capped at ``n_docs`` (at least 1): no query has more documents to return, and the
    result arrays are sized by it.

    Raises
    ------
    ValueError
        ``k`` is not an integer >= 1.
    """
    return max(1, min(count("k", k, lo=1), int(n_docs)))


def topk_rows(indptr, indices, data, k: int):
    """Top ``k`` entries of every row of a CSR matrix whose rows have sorted column indices.

    Ties are broken by the smaller column index.  CPU: a partition per row, then a sort of the
    candidates only.  GPU: one stable radix sort of ``row << 32 | descending score`` keys (columns
    ascending within a row, so equal scores keep the smaller column first).

    Returns
    -------
    (rows, cols, vals, rank) : arrays of the input's module, rank 0-based within the row.
    """
    xp = array_module(data)
    nq = len(indptr) - 1
    if xp is not np:
        counts = xp.diff(indptr).astype(np.int64)
        rows = xp.repeat(xp.arange(nq, dtype=np.int64), counts)
        key = (rows << 32) | (0xFFFFFFFF - _sortable_u32(data))
        order = xp.argsort(key, kind="stable")
        rank = xp.arange(len(order), dtype=np.int64) - indptr[rows[order]].astype(np.int64)
        sel = order[rank < k]
        return rows[sel], indices[sel].astype(np.int64), data[sel], rank[rank < k]
    out_rows, out_cols, out_vals, out_rank = [], [], [], []
    indptr = np.asarray(indptr)
    for r in range(nq):
        s, e = int(indptr[r]), int(indptr[r + 1])
        if s == e:
            continue
        v = data[s:e]
        c = indices[s:e]
        if e - s > k:
            kth = np.partition(v, e - s - k)[e - s - k]
            cand = np.flatnonzero(v >= kth)
            v, c = v[cand], c[cand]
        o = np.lexsort((c, -v))[:k]
        out_rows.append(np.full(len(o), r, np.int64))
        out_cols.append(c[o].astype(np.int64))
        out_vals.append(v[o])
        out_rank.append(np.arange(len(o), dtype=np.int64))
    if not out_rows:
        z = np.zeros(0, np.int64)
        return z, z, data[:0], z
    return (np.concatenate(out_rows), np.concatenate(out_cols), np.concatenate(out_vals),
            np.concatenate(out_rank))


def resolve_engine(engine: str, on_gpu: bool, k: int, nonnegative: bool = True) -> str:
    """The engine in effect for ``engine`` on a matrix on the GPU (``on_gpu``) or the CPU.

    Raises
    ------
    ValueError
        Unknown engine; ``"gpu"`` on a CPU matrix or ``"cpu"`` on a GPU one; ``"gpu"`` with ``k > 4096``;
        ``"cpu"``/``"gpu"`` on a matrix with a negative stored weight (the engines skip documents whose
        score stays 0 and need weights >= 0; no cutext variant stores one).
    """

    engine = choice("engine", engine, ENGINES)
    if engine == "auto":
        if not nonnegative:
            return "sparse"
        return ("gpu" if k <= MAX_K_GPU else "sparse") if on_gpu else "cpu"
    if engine == "gpu" and not on_gpu:
        raise ValueError("engine='gpu' needs an index loaded with backend='gpu' (this one is on the CPU)")
    if engine == "cpu" and on_gpu:
        raise ValueError("engine='cpu' needs an index loaded with backend='cpu' (this one is on the GPU)")
    if engine == "gpu" and k > MAX_K_GPU:
        raise ValueError(f"{param('k', bare=True)} must be <= {MAX_K_GPU} with {param('engine', 'gpu')}, got {k}; "
                         f"use {param('engine', 'sparse')} (or 'auto') for deeper runs")
    if engine in ("cpu", "gpu") and not nonnegative:
        raise ValueError(f"{param('engine', engine)} needs stored weights >= 0; this index has a negative one "
                         f"(use {param('engine', 'sparse')})")
    return engine


def check_engine_options(engine: str, max_workspace, n_threads):
    """Refuse options that the engine in effect does not use; returns (max_workspace, n_threads) checked.

    Raises
    ------
    ValueError
        ``max_workspace`` with an engine other than ``"gpu"`` or not an integer >= 1 MiB;
        ``n_threads`` with an engine other than ``"cpu"`` or outside [1, numba's thread count].
    """
    import numba


    if max_workspace is not None:
        if engine != "gpu":
            raise ValueError(f"max_workspace is a setting of the GPU engine; the engine in effect is {engine!r}")
        max_workspace = count("max_workspace", max_workspace, lo=1 << 20)
    if n_threads is not None:
        if engine != "cpu":
            raise ValueError(f"n_threads is a setting of the CPU engine; the engine in effect is {engine!r}")
        n_threads = count("n_threads", n_threads, lo=1, hi=numba.config.NUMBA_NUM_THREADS)
    return max_workspace, n_threads


class SearchMatrix:
    """A term-major CSR matrix (scipy on the CPU, cupyx on the GPU) ready for the engines.

    Parameters
    ----------
    matrix : scipy.sparse.csr_matrix or cupyx.scipy.sparse.csr_matrix, (V + 1, n_docs) float32
    """

    def __init__(self, matrix):
        self.matrix = matrix
        self.n_docs = int(matrix.shape[1])
        self.on_gpu = array_module(matrix.data) is not np
        xp = array_module(matrix.data)
        self.indptr64 = matrix.indptr.astype(np.int64) if matrix.indptr.dtype != np.int64 else matrix.indptr
        self.indices32 = (matrix.indices if matrix.indices.dtype == np.int32 or self.n_docs >= 2**31
                          else matrix.indices.astype(np.int32))
        self.nonnegative = bool(len(matrix.data) == 0 or float(xp.min(matrix.data)) >= 0)
        self.workspace = ks.Workspace() if self.on_gpu else None  # the GPU engine's buffers, kept between batches
        # postings of each term on the host: the GPU engine's launch order (kernels.search.launch_order)
        self.term_postings = np.diff(to_host(self.indptr64)).astype(np.int32) if self.on_gpu else None

    def dense(self, Q):
        """Dense float32 scores (nq, n_docs) on the host of a host query CSR ``Q`` (sparse product)."""
        return to_host((self._device_q(Q) @ self.matrix).toarray()).astype(np.float32)

    def _device_q(self, Q):
        if not self.on_gpu:
            return Q
        import cupy
        import cupyx.scipy.sparse as csp

        return csp.csr_matrix((cupy.asarray(Q.data), cupy.asarray(Q.indices.astype(np.int32)),
                               cupy.asarray(Q.indptr.astype(np.int32))), shape=Q.shape)

    def topk(self, Q, k: int, engine: str = "auto", max_workspace=None, n_threads=None,
             doc_filter: DocFilter | None = None):
        """Top ``k`` of every row of ``Q @ M`` (``Q``: host CSR (nq, V + 1) float32, canonical), among the
        documents of ``doc_filter`` if given (this matrix's doc numbers; queries as the rows of ``Q``).

        Returns
        -------
        (doc, score, n) : host int64 (nq, k'), float32 (nq, k'), int32 (nq,) (module docstring), with
            ``k' = min(k, n_docs)`` (at least 1).

        Raises
        ------
        ValueError
            ``k`` not an integer >= 1; the engine's options (:func:`resolve_engine`,
            :func:`check_engine_options`).
        """
        return self.topk_start(Q, k, engine, max_workspace, n_threads, doc_filter)()

    def topk_start(self, Q, k: int, engine: str = "auto", max_workspace=None, n_threads=None,
                   doc_filter: DocFilter | None = None):
        """:meth:`topk` in two halves: launches the work and returns ``finish()`` -> ``(doc, score, n)``.
        The GPU engine is still running when this returns (:func:`cutext.kernels.search.search_tiled_start`),
        so the host can tokenize the next batch meanwhile; the other engines have finished."""

        k = cap_k(k, self.n_docs)  # every engine sizes (nq, k) arrays: never more columns than documents
        engine = resolve_engine(engine, self.on_gpu, k, self.nonnegative)
        max_workspace, n_threads = check_engine_options(engine, max_workspace, n_threads)
        fkw = doc_filter.engine_args() if doc_filter is not None else {}
        if engine == "gpu":
            return ks.search_tiled_start(self.indptr64, self.indices32, self.matrix.data, self.n_docs,
                                         Q.indptr, Q.indices, Q.data, k,
                                         max_workspace=ks.DEFAULT_WORKSPACE if max_workspace is None
                                         else max_workspace, workspace=self.workspace,
                                         term_postings=self.term_postings, **fkw)
        if engine == "cpu":
            out = ks.search_cpu(self.indptr64, self.indices32, self.matrix.data, self.n_docs,
                                Q.indptr, Q.indices, Q.data, k, n_threads=n_threads, **fkw)
        else:
            out = self._sparse_topk(Q, k, doc_filter)
        return lambda: out

    def _sparse_topk(self, Q, k: int, doc_filter: DocFilter | None = None):
        """The sparse path (the oracle): ``Q @ M`` and the top ``k`` of each row (:func:`topk_rows`); a
        filtered-out entry of the product is dropped before the top k."""
        S = (self._device_q(Q) @ self.matrix).tocsr()
        if not S.has_canonical_format:
            S.sum_duplicates()
        if doc_filter is not None:
            xp = array_module(S.data)
            counts = np.diff(to_host(S.indptr)).astype(np.int64)  # on the host: cupy.repeat takes no array
            rows = xp.asarray(np.repeat(np.arange(S.shape[0], dtype=np.int64), counts))
            S.data = S.data * doc_filter.allowed(rows, S.indices, xp).astype(S.data.dtype)
            S.eliminate_zeros()
        rows, cols, vals, rank = (to_host(x) for x in topk_rows(S.indptr, S.indices, S.data, k))
        nq = Q.shape[0]
        doc = np.full((nq, k), -1, np.int64)
        score = np.zeros((nq, k), np.float32)
        keep = vals > 0  # the engines' rule: documents with a positive score
        doc[rows, rank] = cols
        score[rows, rank] = vals
        n = np.bincount(rows, minlength=nq).astype(np.int32)
        if not keep.all():  # zero sums are dropped by the product; negative ones only with foreign weights
            n = np.bincount(rows[keep], minlength=nq).astype(np.int32)
            doc[rows[~keep], rank[~keep]] = -1
            score[rows[~keep], rank[~keep]] = 0
        return doc, score, n


def merge_topk(parts, k: int, offsets=None):
    """Merge per-shard results ``[(doc, score, n), ...]`` into the top ``k`` of each query, by score descending
    then doc id ascending (the engines' rule, so the merge equals one index's result).

    The parts come in the order of their documents (shard ``j``'s doc ids below shard ``j + 1``'s) and each
    row of a part is ranked by that rule already, so a P-way merge of the rows that takes the earlier shard
    on equal scores keeps the rule (:func:`cutext.kernels.search.merge_shards`, numba: O(k P) a query,
    reading the parts in place).  ``offsets``: the global doc id of each part's first document when the
    parts hold doc ids numbered within their shard (added in the merge, no pass over the parts); None when
    they hold global ids already.

    Returns
    -------
    (doc, score, n) : int64 (nq, k'), float32 (nq, k'), int32 (nq,), ``k' = min(k, total columns of the
        parts)``: shards capped at their own size (:meth:`SearchMatrix.topk`) give ``min(k, n_docs)``.
    """
    if len(parts) == 1 and (offsets is None or int(offsets[0]) == 0):
        return parts[0]
    width = sum(p[0].shape[1] for p in parts)
    k = max(1, min(int(k), width))  # the parts hold every candidate: padding past them would only allocate
    return ks.merge_shards(parts, [0] * len(parts) if offsets is None else offsets, k)


__all__ = ["DocFilter", "ENGINES", "SearchMatrix", "cap_k", "check_engine_options", "merge_topk", "resolve_engine",
           "topk_rows"]
