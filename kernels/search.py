"""BM25 query engines: score a batch of queries against a term-major CSR index and keep the top k.

The index is the term-major CSR matrix of :class:`cutext.pipelines.bm25.BM25Index`: ``indptr`` (V + 2,
int64), ``indices`` (doc ids, int32, sorted within a term), ``data`` (float32 stored weights
``w_td - w0_t``, never negative).  A batch of ``nq`` queries is a CSR of query terms: ``q_ptr``
(nq + 1, int64), ``q_terms`` (int32, ascending within a query), ``q_w`` (float32 query term counts).

Both engines compute, for every query and every document that holds one of its terms,

    score = sum over the query's terms t, in ascending term id, of  float32(q_w[t] * data[t, d])

accumulated in float32, term at a time (the order and precision of ``scipy.sparse``'s CSR product,
so the scores are bit-identical to the sparse-product path on the CPU), and keep the ``k`` best
documents with a positive score, ranked by score descending, **ties broken by the smaller doc id**.

* :func:`search_cpu` -- the CPU engine (numba, ``prange`` over queries; per thread a dense score array of
  N float32, the list of documents touched, and a heap of k for the partial selection).
* :func:`search_tiled` -- the GPU engine (CUDA kernels of ``search.cu``, loaded lazily by
  :mod:`cutext.kernels._cuda`), and its numba twin when the arrays are numpy: documents in tiles of T
  per pass, a per-query dense tile of T float32 scores and a list of the documents touched
  (:func:`plan_workspace` bounds the two by ``max_workspace`` bytes, whatever the batch size), one
  block per query scatters the query's postings that fall in the tile (binary search of the tile's
  bounds in each posting list), then a per-query radix select of the k largest 64-bit keys
  ``sortable(score) << 32 | ~doc`` among the tile's candidates and the k kept from earlier tiles, and at
  the end a bitonic sort of the k keys per query.  The key order is (score desc, doc asc), so the
  ties rule holds by construction.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import prange

from cutext.kernels import _cuda
from cutext.kernels.backend import array_module

SOURCE = "search.cu"
THREADS = 256  # SB_THREADS in search.cu
MAX_K_GPU = 4096  # SB_MAX_SORT in search.cu: the final bitonic sort is in shared memory
DEFAULT_WORKSPACE = 1 << 30
SCAN_BLOCK = 64  # CPU engine: scores per block of the dense top-k scan
DENSE_RATIO = 8  # CPU engine: a query with >= N / 8 postings is scored densely (no touched list)


def _check_k(k: int) -> int:
    if int(k) < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return int(k)


# ----------------------------------------------------------------------------- CPU engine

@numba.njit(nogil=True, cache=True, inline="always")
def _worse(s_a, d_a, s_b, d_b):
    """Whether (score a, doc a) ranks after (score b, doc b): lower score, or equal score and larger doc."""
    return s_a < s_b or (s_a == s_b and d_a > d_b)


@numba.njit(nogil=True, cache=True)
def _sift_down(hs, hd, m, i):
    while True:
        lft = 2 * i + 1
        if lft >= m:
            return
        c = lft
        r = lft + 1
        if r < m and _worse(hs[r], hd[r], hs[lft], hd[lft]):
            c = r
        if _worse(hs[c], hd[c], hs[i], hd[i]):
            hs[i], hs[c] = hs[c], hs[i]
            hd[i], hd[c] = hd[c], hd[i]
            i = c
        else:
            return


@numba.njit(nogil=True, cache=True)
def _heap_push(hs, hd, m, s, d):
    """Add ``(s, d)`` to the heap ``hs, hd`` of ``m`` entries (root = the worst kept) and sift it up."""
    c = m
    hs[c] = s
    hd[c] = d
    while c > 0:
        par = (c - 1) // 2
        if _worse(hs[c], hd[c], hs[par], hd[par]):
            hs[c], hs[par] = hs[par], hs[c]
            hd[c], hd[par] = hd[par], hd[c]
            c = par
        else:
            break


@numba.njit(nogil=True, cache=True)
def _heap_drain(q, hs, hd, m, out_doc, out_score, out_n):
    """Row ``q`` of the outputs from the heap of ``m`` entries, best first (pop the worst into the last rank)."""
    out_n[q] = m
    for r in range(m - 1, -1, -1):
        out_score[q, r] = hs[0]
        out_doc[q, r] = hd[0]
        hs[0] = hs[r]
        hd[0] = hd[r]
        _sift_down(hs, hd, r, 0)


@numba.njit(nogil=True, cache=True)
def _score_one(q, indptr, indices, data, q_ptr, q_terms, q_w, acc, touched):
    """Term-at-a-time accumulation of query ``q`` into ``acc``; the documents that became nonzero go to
    ``touched``.  Returns how many."""
    nt = 0
    for j in range(q_ptr[q], q_ptr[q + 1]):
        t = q_terms[j]
        w = q_w[j]
        for p in range(indptr[t], indptr[t + 1]):
            d = indices[p]
            old = acc[d]
            nw = old + w * data[p]
            acc[d] = nw
            if old == 0 and nw != 0:
                touched[nt] = d
                nt += 1
    return nt


@numba.njit(nogil=True, cache=True)
def _select_one(q, k, acc, touched, nt, hs, hd, out_doc, out_score, out_n):
    """Top k of the touched documents (a heap of k whose root is the worst kept), resetting ``acc``."""
    m = 0
    th = np.float32(0)  # 0 until k are kept, then the worst kept score
    for i in range(nt):
        d = touched[i]
        s = acc[d]
        acc[d] = 0
        if s < th or s <= 0:
            continue
        if m < k:
            _heap_push(hs, hd, m, s, d)
            m += 1
        elif _worse(hs[0], hd[0], s, d):
            hs[0] = s
            hd[0] = d
            _sift_down(hs, hd, m, 0)
        if m == k:
            th = hs[0]
    _heap_drain(q, hs, hd, m, out_doc, out_score, out_n)


@numba.njit(nogil=True, cache=True)
def _score_dense(q, indptr, indices, data, q_ptr, q_terms, q_w, acc):
    """Term-at-a-time accumulation of query ``q`` into ``acc`` without tracking (a dense scan follows)."""
    for j in range(q_ptr[q], q_ptr[q + 1]):
        t = q_terms[j]
        w = q_w[j]
        for p in range(indptr[t], indptr[t + 1]):
            d = indices[p]
            acc[d] = acc[d] + w * data[p]


@numba.njit(nogil=True, cache=True)
def _f32_bits(x):
    a = np.empty(1, np.float32)
    a[0] = x
    return a.view(np.int32)[0]


@numba.njit(nogil=True, cache=True)
def _select_dense(q, k, acc, hs, hd, out_doc, out_score, out_n):
    """Top k of a dense score array scanned in doc order (an equal score never displaces a kept, smaller
    doc), then ``acc`` reset.  Blocks of :data:`SCAN_BLOCK` scores whose maximum does not beat the
    threshold are skipped (the maximum over the int32 bits of non-negative floats, which orders as the
    floats and vectorizes)."""
    m = 0
    th = np.float32(0)  # a score must beat this: 0 until k are kept, then the worst kept (predictable branch)
    bits = acc.view(np.int32)
    th_bits = np.int32(0)
    n = acc.shape[0]
    for b in range(0, n, SCAN_BLOCK):
        e = min(n, b + SCAN_BLOCK)
        mx = np.int32(0)
        for i in range(b, e):
            mx = max(mx, bits[i])
        if mx <= th_bits:
            continue
        for d in range(b, e):
            s = acc[d]
            if s <= th:
                continue
            if m < k:
                _heap_push(hs, hd, m, s, d)
                m += 1
            else:
                hs[0] = s
                hd[0] = d
                _sift_down(hs, hd, m, 0)
            if m == k:
                th = hs[0]
                th_bits = _f32_bits(th)
    acc[:] = 0
    _heap_drain(q, hs, hd, m, out_doc, out_score, out_n)


@numba.njit(parallel=True, nogil=True, cache=True)
def _cpu_search(indptr, indices, data, n_docs, q_ptr, q_terms, q_w, k, n_chunks, out_doc, out_score, out_n):
    nq = q_ptr.shape[0] - 1
    for c in prange(n_chunks):
        acc = np.zeros(n_docs, np.float32)
        touched = np.empty(n_docs, np.int64)
        hs = np.empty(k, np.float32)
        hd = np.empty(k, np.int64)
        for q in range(c, nq, n_chunks):
            total = 0
            for j in range(q_ptr[q], q_ptr[q + 1]):
                total += indptr[q_terms[j] + 1] - indptr[q_terms[j]]
            if total * DENSE_RATIO >= n_docs:  # many postings: no touched list, scan the N scores
                _score_dense(q, indptr, indices, data, q_ptr, q_terms, q_w, acc)
                _select_dense(q, k, acc, hs, hd, out_doc, out_score, out_n)
            else:
                nt = _score_one(q, indptr, indices, data, q_ptr, q_terms, q_w, acc, touched)
                _select_one(q, k, acc, touched, nt, hs, hd, out_doc, out_score, out_n)


def _as_query_csr(q_ptr, q_terms, q_w):
    return (np.ascontiguousarray(q_ptr, dtype=np.int64), np.ascontiguousarray(q_terms, dtype=np.int32),
            np.ascontiguousarray(q_w, dtype=np.float32))


def search_cpu(indptr, indices, data, n_docs: int, q_ptr, q_terms, q_w, k: int, n_threads: int | None = None):
    """Top ``k`` documents of every query, on the CPU (numba threads).

    Parameters
    ----------
    indptr : int64 array (V + 2,)
    indices : int32 or int64 array (nnz,)
        Doc ids in ``[0, n_docs)``, sorted within each term.
    data : float32 array (nnz,)
        Stored weights (>= 0).
    n_docs : int
    q_ptr, q_terms, q_w : query CSR (nq + 1,), (nnz_q,) int32 term ids, (nnz_q,) float32 counts
    k : int >= 1
    n_threads : int, optional
        numba threads (default: numba's current setting, all cores).

    Returns
    -------
    (doc, score, n) : int64 (nq, k), float32 (nq, k), int32 (nq,)
        Row q holds its ``n[q]`` documents in rank order (score desc, doc id asc); the rest is -1 / 0.
    """
    k = _check_k(k)
    q_ptr, q_terms, q_w = _as_query_csr(q_ptr, q_terms, q_w)
    nq = len(q_ptr) - 1
    out_doc = np.full((nq, k), -1, np.int64)
    out_score = np.zeros((nq, k), np.float32)
    out_n = np.zeros(nq, np.int32)
    if nq == 0 or n_docs == 0:
        return out_doc, out_score, out_n
    prev = numba.get_num_threads()
    nth = prev if n_threads is None else int(n_threads)
    if nth < 1 or nth > numba.config.NUMBA_NUM_THREADS:
        raise ValueError(f"n_threads must be in [1, {numba.config.NUMBA_NUM_THREADS}], got {n_threads}")
    numba.set_num_threads(nth)
    try:
        _cpu_search(np.asarray(indptr, np.int64), indices, np.asarray(data, np.float32), int(n_docs),
                    q_ptr, q_terms, q_w, k, min(nq, nth * 4), out_doc, out_score, out_n)
    finally:
        numba.set_num_threads(prev)
    return out_doc, out_score, out_n


# ----------------------------------------------------------------------------- GPU engine (tiles)

def plan_workspace(n_docs: int, n_queries: int, k: int, max_workspace: int) -> tuple[int, int]:
    """(queries per pass ``nqt``, documents per tile ``T``) so that the engine's device workspace,
    ``nqt * (8 T + 28 k + 16)`` bytes (dense tile scores float32 and touched list int32 per query, two
    buffers of k uint64 keys, the k doc ids int64 and scores float32 of the output), stays within
    ``max_workspace`` bytes.  Aims for at least 256 queries in flight (a block each), then the widest
    tile (T = n_docs: one pass).

    Raises
    ------
    ValueError
        ``max_workspace`` cannot hold one query with a tile of min(n_docs, 1024) documents.
    """
    per_q_k = 28 * k + 16
    n_docs = max(int(n_docs), 1)
    want_q = max(1, min(int(n_queries), 256))
    t = min(n_docs, max(0, (max_workspace // want_q - per_q_k) // 8))
    t_min = min(n_docs, 1024)
    if t < t_min:
        t = t_min
    nqt = min(max(int(n_queries), 1), max_workspace // (8 * t + per_q_k))
    if nqt < 1:
        raise ValueError(f"max_workspace={max_workspace} bytes is too small for k={k}: one query needs "
                         f"{8 * t_min + per_q_k} bytes (a tile of {t_min} documents)")
    return int(nqt), int(t)


def _unsortable(u):
    u = u.astype(np.uint64)
    bits = np.where(u & np.uint64(0x80000000), u & np.uint64(0x7FFFFFFF), np.uint64(0xFFFFFFFF) - u)
    return bits.astype(np.uint32).view(np.float32)


@numba.njit(nogil=True, cache=True)
def _lower_bound(a, lo, hi, x):
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(nogil=True, cache=True)
def _twin_tile_score(indptr, indices, data, q_ptr, q_terms, q_w, nq, d0, d1, tile, acc, cand, cand_n):
    """Twin of ``bm25_tile_score``: query q's postings with doc in [d0, d1) into its tile."""
    for q in range(nq):
        base = q * tile
        n = cand_n[q]
        for j in range(q_ptr[q], q_ptr[q + 1]):
            t = q_terms[j]
            w = q_w[j]
            lo = _lower_bound(indices, indptr[t], indptr[t + 1], d0)
            hi = _lower_bound(indices, lo, indptr[t + 1], d1)
            for p in range(lo, hi):
                d = indices[p] - d0
                old = acc[base + d]
                nw = old + w * data[p]
                acc[base + d] = nw
                if old == 0 and nw != 0:
                    cand[base + n] = d
                    n += 1
        cand_n[q] = n


@numba.njit(nogil=True, cache=True)
def _twin_tile_select(acc, cand, cand_n, tile, d0, k, nq, top_in, top_in_n, top_out, top_out_n):
    """Twin of ``bm25_tile_select``: the k largest keys of the tile's candidates and of ``top_in``."""
    for q in range(nq):
        base = q * tile
        n = cand_n[q]
        m = top_in_n[q]
        keys = np.empty(n + m, np.uint64)
        sc = np.empty(n, np.float32)
        for i in range(n):
            sc[i] = acc[base + cand[base + i]]
        bits = sc.view(np.uint32)
        for i in range(n):
            d = cand[base + i]
            u = np.uint64(bits[i])
            if u & np.uint64(0x80000000):
                u = np.uint64(0xFFFFFFFF) - u
            else:
                u = u | np.uint64(0x80000000)
            keys[i] = (u << np.uint64(32)) | (np.uint64(0xFFFFFFFF) - np.uint64(d0 + d))
            acc[base + d] = 0
        for i in range(m):
            keys[n + i] = top_in[q * k + i]
        keys = np.sort(keys)[::-1]
        r = min(k, n + m)
        for i in range(r):
            top_out[q * k + i] = keys[i]
        top_out_n[q] = r
        cand_n[q] = 0


def _twin_sort(top, top_n, k, nq, out_doc, out_score):
    keys = top.reshape(nq, k).copy()
    mask = np.arange(k)[None, :] < top_n[:, None]
    keys[~mask] = 0
    keys = np.sort(keys, axis=1)[:, ::-1]
    out_doc[:] = np.where(mask, (np.uint64(0xFFFFFFFF) - (keys & np.uint64(0xFFFFFFFF))).astype(np.int64), -1)
    out_score[:] = np.where(mask, _unsortable(keys >> np.uint64(32)), 0).astype(np.float32)


def search_tiled(indptr, indices, data, n_docs: int, q_ptr, q_terms, q_w, k: int,
                 max_workspace: int = DEFAULT_WORKSPACE):
    """Top ``k`` documents of every query with the tiled engine: the CUDA kernels of ``search.cu`` when
    the index arrays are cupy arrays, their numba twin when they are numpy arrays.

    Parameters
    ----------
    indptr : int64 array (V + 2,), indices : int32 array (nnz,), data : float32 array (nnz,)
        The index (cupy: on the device).  ``n_docs < 2**31``.
    n_docs : int
    q_ptr, q_terms, q_w : host arrays, the query CSR (see :func:`search_cpu`)
    k : int in [1, 4096] (:data:`MAX_K_GPU`, the shared-memory sort)
    max_workspace : int
        Bytes of device workspace (:func:`plan_workspace`); the batch is scored in passes of ``nqt``
        queries, so the device memory does not grow with the batch size.

    Returns
    -------
    (doc, score, n) : host int64 (nq, k), float32 (nq, k), int32 (nq,), as :func:`search_cpu`.

    Raises
    ------
    ValueError
        ``k`` outside [1, 4096], ``max_workspace`` too small, ``n_docs >= 2**31``.
    """
    k = _check_k(k)
    if k > MAX_K_GPU:
        raise ValueError(f"k must be <= {MAX_K_GPU} for the GPU engine (its top-k sort is in shared memory), "
                         f"got {k}; use engine='cpu' or 'sparse' for deeper runs")
    if n_docs >= 2**31:
        raise ValueError(f"the GPU engine needs n_docs < 2**31, got {n_docs}; shard the index (client=...)")
    q_ptr, q_terms, q_w = _as_query_csr(q_ptr, q_terms, q_w)
    nq = len(q_ptr) - 1
    out_doc = np.full((nq, k), -1, np.int64)
    out_score = np.zeros((nq, k), np.float32)
    out_n = np.zeros(nq, np.int32)
    if nq == 0 or n_docs == 0:
        return out_doc, out_score, out_n
    xp = array_module(data)
    gpu = xp is not np
    nqt, tile = plan_workspace(n_docs, nq, k, max_workspace)
    acc = xp.zeros(nqt * tile, dtype=np.float32)
    cand = xp.zeros(nqt * tile, dtype=np.int32)
    cand_n = xp.zeros(nqt, dtype=np.int32)
    tops = [xp.zeros(nqt * k, dtype=np.uint64), xp.zeros(nqt * k, dtype=np.uint64)]
    top_ns = [xp.zeros(nqt, dtype=np.int32), xp.zeros(nqt, dtype=np.int32)]
    d_doc = xp.zeros(nqt * k, dtype=np.int64)
    d_score = xp.zeros(nqt * k, dtype=np.float32)
    for s in range(0, nq, nqt):
        e = min(nq, s + nqt)
        n = e - s
        qp = q_ptr[s:e + 1] - q_ptr[s]
        qt = xp.asarray(q_terms[q_ptr[s]:q_ptr[e]])
        qw = xp.asarray(q_w[q_ptr[s]:q_ptr[e]])
        qp = xp.asarray(qp)
        top_ns[0][:] = 0
        cur = 0
        for d0 in range(0, n_docs, tile):
            d1 = min(n_docs, d0 + tile)
            if gpu:
                _cuda.kernel(SOURCE, "bm25_tile_score")(
                    (n,), (THREADS,), (indptr, indices, data, qp, qt, qw, np.int32(d0), np.int32(d1),
                                       np.int64(tile), acc, cand, cand_n))
                _cuda.kernel(SOURCE, "bm25_tile_select")(
                    (n,), (THREADS,), (acc, cand, cand_n, np.int64(tile), np.int32(d0), np.int32(k),
                                       tops[cur], top_ns[cur], tops[1 - cur], top_ns[1 - cur]))
            else:
                _twin_tile_score(indptr, indices, data, qp, qt, qw, n, d0, d1, tile, acc, cand, cand_n)
                _twin_tile_select(acc, cand, cand_n, tile, d0, k, n, tops[cur], top_ns[cur],
                                  tops[1 - cur], top_ns[1 - cur])
            cur = 1 - cur
        if gpu:
            _cuda.kernel(SOURCE, "bm25_topk_sort")(
                (n,), (THREADS,), (tops[cur], top_ns[cur], np.int32(k), d_doc, d_score))
            out_doc[s:e] = d_doc[:n * k].get().reshape(n, k)
            out_score[s:e] = d_score[:n * k].get().reshape(n, k)
            out_n[s:e] = top_ns[cur][:n].get()
        else:
            _twin_sort(tops[cur][:n * k], top_ns[cur][:n], k, n, out_doc[s:e], out_score[s:e])
            out_n[s:e] = top_ns[cur][:n]
    return out_doc, out_score, out_n


__all__ = ["DEFAULT_WORKSPACE", "MAX_K_GPU", "plan_workspace", "search_cpu", "search_tiled"]
