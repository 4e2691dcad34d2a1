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

A filter restricts the documents before the top k (so a query gets ``min(k, allowed documents with a
positive score)``, never a filtered-out one): ``mask``, one boolean array over the documents for every
query, or ``lists``, per query the sorted doc ids it may return (a CSR ``(a_ptr, a_docs)``).  Scores are
computed as without a filter; a document outside it is never a candidate of the selection.

* :func:`search_cpu` -- the CPU engine (numba, ``prange`` over queries; per thread a dense score array of
  N float32, the list of documents touched, and a heap of k for the partial selection).
* :func:`search_tiled` -- the GPU engine (CUDA kernels of ``search.cu``, loaded lazily by
  :mod:`cutext.kernels._cuda`), and its numba twin when the arrays are numpy: one block per query scores
  the documents a tile of :data:`TILE` at a time in **shared memory**, each query term's postings read
  from a cursor that advances tile by tile (the postings of a term are sorted by doc, so no search of the
  posting list); a tile's scores that beat the k-th kept key are merged with the kept ones, keeping the k
  largest 64-bit keys ``sortable(score) << 32 | ~doc``: for k <= 128 the kept keys and the tile's
  candidates sit in a shared list of 256 and the k largest are found by rank (each key's place = the keys
  that beat it), else (or when the candidates overflow the list) by a radix select; at the end a bitonic
  sort of the k keys per query.  The device workspace is the k keys per query and a cursor per query term
  (:func:`plan_passes` bounds it by ``max_workspace`` bytes, whatever the batch size).  The key order is
  (score desc, doc asc), so the ties rule holds by construction.  The blocks take the queries costliest
  first (:func:`launch_order`), so the kernel does not end on one long query while SMs idle.
"""
from __future__ import annotations

import threading

import numba
import numpy as np
from numba import prange

import cutext.kernels._numba_cache  # noqa: F401  # before the decorators: it places and stamps their cache
from cutext.kernels import _cuda
from cutext.kernels.backend import array_module, numba_threads

SOURCE = "search.cu"
THREADS = 256  # SB_THREADS in search.cu
MAX_K_GPU = 4096  # SB_MAX_SORT in search.cu: the final bitonic sort is in shared memory
DEFAULT_WORKSPACE = 1 << 30
TILE = 8192  # SB_TILE in search.cu: float32 scores of a block's tile in shared memory (32 KiB)
BYTES_PER_QUERY_K = 28  # plan_passes: device bytes per query and unit of k
BYTES_PER_QUERY_TERM = 16  # plan_passes: device bytes per query term
ORDER_BY_COST = True  # launch_order: the costliest queries' blocks first (False: in batch order, for A/B runs)
STEP_POSTINGS = 1024  # launch_order: postings a block's step reads (SB_UNROLL * SB_THREADS in search.cu)
SCAN_BLOCK = 64  # CPU engine: scores per block of the dense top-k scan
DENSE_RATIO = 8  # CPU engine: a query with >= N / 8 postings is scored densely (no touched list)


# documents a GPU index (or shard) may hold: a step's 32-bit offsets within a term reach past its last posting
# by up to SB_UNROLL * blockDim.x (search.cu, sb_step)
MAX_DOCS_GPU = 2**31 - 2**16


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
def _add_track(acc, b0, doc, w, qw, touched, nt):  # pragma: no cover - numba
    """``acc[b0 + doc[i]] += qw * w[i]``, the documents that became nonzero appended to ``touched`` from ``nt``
    (a term's postings: the loop of every CPU engine).  Returns the new ``nt``."""
    for i in range(len(doc)):
        d = b0 + doc[i]
        old = acc[d]
        nw = old + qw * w[i]
        acc[d] = nw
        if old == 0 and nw != 0:
            touched[nt] = d
            nt += 1
    return nt


@numba.njit(nogil=True, cache=True)
def _score_one(q, indptr, indices, data, q_ptr, q_terms, q_w, acc, touched):
    """Term-at-a-time accumulation of query ``q`` into ``acc``; the documents that became nonzero go to
    ``touched``.  Returns how many."""
    nt = 0
    for j in range(q_ptr[q], q_ptr[q + 1]):
        t = q_terms[j]
        a, e = indptr[t], indptr[t + 1]
        nt = _add_track(acc, 0, indices[a:e], data[a:e], q_w[j], touched, nt)
    return nt


@numba.njit(nogil=True, cache=True)
def _select_one(q, k, acc, touched, nt, hs, hd, out_doc, out_score, out_n, use, allow, floor):
    """Top k of the touched documents (a heap of k whose root is the worst kept) scoring above ``floor``
    (>= 0), resetting ``acc``; with ``use``, only the documents ``d`` with ``allow[d]``."""
    m = 0
    th = np.float32(0)  # 0 until k are kept, then the worst kept score
    for i in range(nt):
        d = touched[i]
        s = acc[d]
        acc[d] = 0
        if s < th or s <= floor or (use and not allow[d]):
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
def _select_dense(q, k, acc, hs, hd, out_doc, out_score, out_n, use, allow, floor):
    """Top k of a dense score array scanned in doc order (an equal score never displaces a kept, smaller
    doc) among the scores above ``floor`` (>= 0), then ``acc`` reset.  Blocks of :data:`SCAN_BLOCK` scores
    whose maximum does not beat the threshold are skipped (the maximum over the int32 bits of non-negative
    floats, which orders as the floats and vectorizes; with a filter it bounds the allowed scores too).
    With ``use``, only the documents ``d`` with ``allow[d]``."""
    m = 0
    th = floor  # a score must beat this: floor until k are kept, then the worst kept (predictable branch)
    bits = acc.view(np.int32)
    th_bits = _f32_bits(th)
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
            if s <= th or (use and not allow[d]):
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


@numba.njit(nogil=True, cache=True)
def _chunk_buffers(n_docs, k, fmode, mask):
    """A chunk of queries' buffers: scores and touched documents (n_docs), the heap of k, and the allowed
    documents (fmode 2: of the query at hand, :func:`_mark_allowed`; else ``mask``)."""
    qa = np.zeros(n_docs if fmode == 2 else 0, np.bool_)
    allow = qa if fmode == 2 else mask
    return (np.zeros(n_docs, np.float32), np.empty(n_docs, np.int64), np.empty(k, np.float32), np.empty(k, np.int64),
            qa, allow)


@numba.njit(nogil=True, cache=True, inline="always")
def _mark_allowed(qa, a_ptr, a_docs, q, value):
    """fmode 2: set (before its selection) or clear (after) query ``q``'s allowed documents in ``qa``."""
    for p in range(a_ptr[q], a_ptr[q + 1]):
        qa[a_docs[p]] = value


@numba.njit(parallel=True, nogil=True, cache=True)
def _cpu_search(indptr, indices, data, n_docs, q_ptr, q_terms, q_w, k, n_chunks, out_doc, out_score, out_n,
                fmode, mask, a_ptr, a_docs):
    nq = q_ptr.shape[0] - 1
    for c in prange(n_chunks):
        acc, touched, hs, hd, qa, allow = _chunk_buffers(n_docs, k, fmode, mask)
        for q in range(c, nq, n_chunks):
            if fmode == 2:
                _mark_allowed(qa, a_ptr, a_docs, q, True)
            total = 0
            for j in range(q_ptr[q], q_ptr[q + 1]):
                total += indptr[q_terms[j] + 1] - indptr[q_terms[j]]
            if total * DENSE_RATIO >= n_docs:  # many postings: no touched list, scan the N scores
                _score_dense(q, indptr, indices, data, q_ptr, q_terms, q_w, acc)
                _select_dense(q, k, acc, hs, hd, out_doc, out_score, out_n, fmode != 0, allow, np.float32(0))
            else:
                nt = _score_one(q, indptr, indices, data, q_ptr, q_terms, q_w, acc, touched)
                _select_one(q, k, acc, touched, nt, hs, hd, out_doc, out_score, out_n, fmode != 0, allow,
                            np.float32(0))
            if fmode == 2:
                _mark_allowed(qa, a_ptr, a_docs, q, False)


def _as_query_csr(q_ptr, q_terms, q_w):
    return (np.ascontiguousarray(q_ptr, dtype=np.int64), np.ascontiguousarray(q_terms, dtype=np.int32),
            np.ascontiguousarray(q_w, dtype=np.float32))


def _filter_arrays(mask, lists, n_docs: int, nq: int):
    """``(fmode, mask, a_ptr, a_docs)`` of the engines from a filter given as ``mask`` or ``lists``, checked
    (module docstring): fmode 0 none, 1 a mask, 2 per-query lists; unused arrays are empty.

    Raises
    ------
    ValueError
        Both given; a mask that is not 1-d of length ``n_docs``; lists whose pointer is not ``nq + 1``
        non-decreasing offsets into the doc ids, or doc ids outside ``[0, n_docs)`` or not ascending
        within a query.
    """
    no_mask, no_ptr, no_docs = np.zeros(0, np.bool_), np.zeros(1, np.int64), np.zeros(0, np.int32)
    if mask is not None and lists is not None:
        raise ValueError("a filter is a mask or per-query lists, not both")
    if mask is not None:
        mask = np.ascontiguousarray(mask, dtype=np.bool_)
        if mask.shape != (n_docs,):
            raise ValueError(f"a filter mask must have shape ({n_docs},) (one entry a document), got {mask.shape}")
        return 1, mask, no_ptr, no_docs
    if lists is not None:
        a_ptr, a_docs = np.ascontiguousarray(lists[0], np.int64), np.ascontiguousarray(lists[1], np.int32)
        if a_ptr.shape != (nq + 1,) or a_ptr[0] != 0 or a_ptr[-1] != len(a_docs) or np.any(np.diff(a_ptr) < 0):
            raise ValueError(f"filter lists: the pointer must be {nq + 1} non-decreasing offsets from 0 to "
                             f"{len(a_docs)}, got shape {a_ptr.shape}")
        if len(a_docs) and (a_docs.min() < 0 or a_docs.max() >= n_docs):
            raise ValueError(f"filter lists: doc ids must be in [0, {n_docs})")
        starts = np.zeros(len(a_docs), np.bool_)  # where a query's list begins: no order across queries
        starts[a_ptr[:-1][a_ptr[:-1] < len(a_docs)]] = True
        if len(a_docs) > 1 and np.any((np.diff(a_docs) <= 0) & ~starts[1:]):
            raise ValueError("filter lists: the doc ids of a query must be strictly ascending")
        return 2, no_mask, a_ptr, a_docs
    return 0, no_mask, no_ptr, no_docs


def search_cpu(indptr, indices, data, n_docs: int, q_ptr, q_terms, q_w, k: int, n_threads: int | None = None,
               mask=None, lists=None):
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
    mask : bool array (n_docs,), optional
        Only the documents ``d`` with ``mask[d]`` are returned (every query).
    lists : (a_ptr, a_docs), optional
        Per query ``q`` only the documents ``a_docs[a_ptr[q]:a_ptr[q + 1]]`` are returned: int64 (nq + 1,)
        offsets and int32 doc ids, strictly ascending within a query.  Not with ``mask``.

    Returns
    -------
    (doc, score, n) : int64 (nq, k), float32 (nq, k), int32 (nq,)
        Row q holds its ``n[q]`` documents in rank order (score desc, doc id asc); the rest is -1 / 0.

    Raises
    ------
    ValueError
        ``k < 1``; a filter of the wrong shape or with doc ids out of range (:func:`_filter_arrays`).
    """
    k = _check_k(k)
    q_ptr, q_terms, q_w = _as_query_csr(q_ptr, q_terms, q_w)
    nq = len(q_ptr) - 1
    fmode, fmask, a_ptr, a_docs = _filter_arrays(mask, lists, int(n_docs), nq)
    out_doc = np.full((nq, k), -1, np.int64)
    out_score = np.zeros((nq, k), np.float32)
    out_n = np.zeros(nq, np.int32)
    if nq == 0 or n_docs == 0:
        return out_doc, out_score, out_n
    with numba_threads(n_threads) as nth:
        _cpu_search(np.asarray(indptr, np.int64), indices, np.asarray(data, np.float32), int(n_docs),
                    q_ptr, q_terms, q_w, k, min(nq, nth * 4), out_doc, out_score, out_n, fmode, fmask, a_ptr, a_docs)
    return out_doc, out_score, out_n


# ----------------------------------------------------------------------------- GPU engine (tiles)

def plan_passes(q_ptr, k: int, max_workspace: int) -> list[tuple[int, int]]:
    """Query ranges ``[(s, e), ...]`` scored one pass each, so that a pass's device workspace stays within
    ``max_workspace`` bytes, whatever the batch size: :data:`BYTES_PER_QUERY_K` ``* k + 24`` bytes a query
    (two buffers of k uint64 keys, the k doc ids int64 and scores float32 of the output, the query's count
    and its CSR pointer) and :data:`BYTES_PER_QUERY_TERM` a query term (its cursor int64, term id int32 and
    count float32).  The scores themselves live in shared memory (tiles of :data:`TILE` documents).

    Raises
    ------
    ValueError
        ``max_workspace`` cannot hold one of the queries (named by its position in the batch).
    """
    q_ptr = np.asarray(q_ptr, np.int64)
    nq = len(q_ptr) - 1
    per_q = BYTES_PER_QUERY_K * int(k) + 24
    cum = np.arange(nq + 1, dtype=np.int64) * per_q + (q_ptr - q_ptr[0]) * BYTES_PER_QUERY_TERM
    out = []
    s = 0
    while s < nq:
        e = int(np.searchsorted(cum, cum[s] + int(max_workspace), side="right")) - 1
        if e <= s:
            need = int(cum[s + 1] - cum[s])
            raise ValueError(f"max_workspace={max_workspace} bytes is too small for k={k}: query {s} of the batch "
                             f"({int(q_ptr[s + 1] - q_ptr[s])} terms) needs {need} bytes")
        e = min(e, nq)
        out.append((s, e))
        s = e
    return out


def _unsortable(u):
    u = u.astype(np.uint64)
    bits = np.where(u & np.uint64(0x80000000), u & np.uint64(0x7FFFFFFF), np.uint64(0xFFFFFFFF) - u)
    return bits.astype(np.uint32).view(np.float32)


@numba.njit(nogil=True, cache=True, inline="always")
def _key(s, doc):
    """``sb_key`` of search.cu: sortable(score) << 32 | (0xFFFFFFFF - doc)."""
    u = np.uint64(_f32_bits(s)) & np.uint64(0xFFFFFFFF)
    if u & np.uint64(0x80000000):
        u = np.uint64(0xFFFFFFFF) - u
    else:
        u = u | np.uint64(0x80000000)
    return (u << np.uint64(32)) | (np.uint64(0xFFFFFFFF) - np.uint64(doc))


@numba.njit(nogil=True, cache=True)
def _twin_block_search(indptr, indices, data, q_ptr, q_terms, q_w, nq, n_docs, k, tile, top, top_n,
                       fmode, mask, a_ptr, a_docs):
    """Twin of ``bm25_block_search``: per query, tiles of ``tile`` documents scored from per-term cursors,
    candidates = scores > 0 of allowed documents (``fmode``: 1 ``mask``, 2 the query's run of ``a_docs``)
    whose key beats the k-th kept key, appended while fewer than k, else the k largest of the kept and the
    candidates (a sort here, a radix select there: the same k keys)."""
    a = np.zeros(tile, np.float32)
    kept = np.empty(k, np.uint64)
    qa = np.zeros(n_docs if fmode == 2 else 0, np.bool_)
    for q in range(nq):
        if fmode == 2:
            qa[:] = False
            for p in range(a_ptr[q], a_ptr[q + 1]):
                qa[a_docs[p]] = True
        j0 = q_ptr[q]
        nt = q_ptr[q + 1] - j0
        cursor = np.empty(nt, np.int64)
        for jj in range(nt):
            cursor[jj] = indptr[q_terms[j0 + jj]]
        m = 0
        theta = np.uint64(0)
        for d0 in range(0, n_docs, tile):
            d1 = min(n_docs, d0 + tile)
            for jj in range(nt):
                t = q_terms[j0 + jj]
                w = q_w[j0 + jj]
                p = cursor[jj]
                end = indptr[t + 1]
                while p < end and indices[p] < d1:
                    d = indices[p] - d0
                    a[d] = a[d] + w * data[p]
                    p += 1
                cursor[jj] = p
            cand = np.empty(d1 - d0, np.uint64)
            nc = 0
            for i in range(d1 - d0):
                s = a[i]
                a[i] = 0
                if (fmode == 1 and not mask[d0 + i]) or (fmode == 2 and not qa[d0 + i]):
                    continue
                if s > 0:
                    key = _key(s, d0 + i)
                    if key > theta:
                        cand[nc] = key
                        nc += 1
            if nc == 0:
                continue
            if m + nc < k:
                kept[m:m + nc] = cand[:nc]
                m += nc
                continue
            u = np.sort(np.concatenate((kept[:m], cand[:nc])))[::-1]
            kept[:k] = u[:k]
            m = k
            theta = u[k - 1]
        top[q * k:q * k + m] = kept[:m]
        top_n[q] = m


def _twin_sort(top, top_n, k, nq, out_doc, out_score):
    keys = top.reshape(nq, k).copy()
    mask = np.arange(k)[None, :] < top_n[:, None]
    keys[~mask] = 0
    keys = np.sort(keys, axis=1)[:, ::-1]
    out_doc[:] = np.where(mask, (np.uint64(0xFFFFFFFF) - (keys & np.uint64(0xFFFFFFFF))).astype(np.int64), -1)
    out_score[:] = np.where(mask, _unsortable(keys >> np.uint64(32)), 0).astype(np.float32)


def search_tiled(indptr, indices, data, n_docs: int, q_ptr, q_terms, q_w, k: int,
                 max_workspace: int = DEFAULT_WORKSPACE, mask=None, lists=None):
    """Top ``k`` documents of every query with the tiled engine: the CUDA kernels of ``search.cu`` when
    the index arrays are cupy arrays, their numba twin when they are numpy arrays.

    One block per query scores the documents a tile of :data:`TILE` at a time in shared memory (each query
    term's postings consumed from a cursor, so a tile costs no search of the posting lists) and keeps the k
    best keys, merging a tile's candidates only when they beat the k-th key kept (by rank in a shared list
    for k <= 128, else a radix select).

    Parameters
    ----------
    indptr : int64 array (V + 2,), indices : int32 array (nnz,), data : float32 array (nnz,)
        The index (cupy: on the device).  ``n_docs < 2**31 - 2**16`` (the kernel's 32-bit offsets).
    n_docs : int
    q_ptr, q_terms, q_w : host arrays, the query CSR (see :func:`search_cpu`)
    k : int in [1, 4096] (:data:`MAX_K_GPU`, the shared-memory sort)
    max_workspace : int
        Bytes of device workspace (:func:`plan_passes`); the batch is scored in passes of queries, so the
        device memory does not grow with the batch size.
    mask, lists : optional
        A filter, as for :func:`search_cpu` (host arrays): the mask goes to the device as a bitset of
        ``ceil(n_docs / 32)`` uint32 words, the lists as they are (not counted in ``max_workspace``).

    Returns
    -------
    (doc, score, n) : host int64 (nq, k), float32 (nq, k), int32 (nq,), as :func:`search_cpu`.

    Raises
    ------
    ValueError
        ``k`` outside [1, 4096], ``max_workspace`` too small for a query, ``n_docs >= 2**31 - 2**16``; a
        filter of the wrong shape (:func:`search_cpu`).
    """
    return search_tiled_start(indptr, indices, data, n_docs, q_ptr, q_terms, q_w, k, max_workspace, mask, lists)()


def _mask_words(mask: np.ndarray) -> np.ndarray:
    """A bool mask (n,) as the kernel's bitset: uint32 words, bit ``d & 31`` of word ``d >> 5``."""
    b = np.packbits(mask, bitorder="little")
    b = np.concatenate([b, np.zeros(-len(b) % 4, np.uint8)])
    return (b.view("<u4") if len(b) else np.zeros(1, "<u4")).astype(np.uint32)


class Workspace:
    """Device buffers of the GPU engine kept from one batch to the next (:func:`search_tiled_start`'s
    ``workspace``), in two sets: the batch being scored and the one before it, still being collected.

    A batch takes a free set and gives it back when its results are copied out; its buffers are views of
    the set's arrays, grown when a batch needs more.  So a steady stream of batches allocates and frees
    no device memory: under RMM's plain resource (what CuPy uses once cudf is imported) every free is a
    device-wide ``cudaFree``, which would wait for the next batch's kernels and serialize the caller's
    collection with them.  A set also holds the page-locked host buffers of a batch's one upload and one
    copy-out (so both are queued on the stream, not waited for).  When both sets are taken a batch allocates
    its own buffers, as without one.
    """

    def __init__(self, n_sets: int = 2):
        self._sets = [{} for _ in range(n_sets)]
        self._free = list(range(n_sets))
        self._lock = threading.Lock()

    def take(self) -> dict | None:
        """A free set of buffers (a dict name -> array, filled by :meth:`view`), or None when all are taken."""
        with self._lock:
            return self._sets[self._free.pop()] if self._free else None

    def give_back(self, store: dict) -> None:
        with self._lock:
            i = next(j for j, x in enumerate(self._sets) if x is store)
            if i not in self._free:
                self._free.append(i)

    @staticmethod
    def view(store: dict, xp, name: str, size: int, dtype, pinned: bool = False):
        """``store[name]``'s first ``size`` items (``dtype``), the array replaced by a larger one when short;
        ``pinned``: a host array in page-locked memory (``xp.cuda.alloc_pinned_memory``) instead of a device one."""
        a = store.get(name)
        if a is None or a.size < size or a.dtype != np.dtype(dtype):
            n = max(size, 1)
            if pinned:
                a = np.frombuffer(xp.cuda.alloc_pinned_memory(n * np.dtype(dtype).itemsize), dtype, n)
            else:
                a = xp.empty(n, dtype)
            store[name] = a
        return a[:size]


def launch_order(q_ptr, q_terms, term_postings, n_docs: int) -> np.ndarray:
    """The order in which the GPU engine's blocks take a pass's queries: by estimated cost, descending
    (costs as 16-bit fractions of the largest; ties in batch order), the longest-processing-time-first
    rule of list scheduling (Graham, "Bounds on multiprocessing timing anomalies", 1969).  Blocks start in
    index order as SMs free up, so the cheapest queries run last and the kernel's tail is short.

    A query's cost, in postings: those of its terms (``term_postings[t]``, host int32 or int64), plus a step of
    :data:`STEP_POSTINGS` for each of its terms in each tile of :data:`TILE` documents (a term's first step
    in a tile, and its barrier, are paid even for a posting or none).  ``q_ptr``: a pass's rows of a
    batch's query CSR (int64, need not start at 0), ``q_terms``: that pass's terms alone.

    Returns
    -------
    int32 array (nq,): a permutation of ``0 .. nq - 1``.
    """
    q_ptr = np.asarray(q_ptr, np.int64)
    nq = len(q_ptr) - 1
    if not ORDER_BY_COST or nq < 2:
        return np.arange(nq, dtype=np.int32)
    cost = _query_costs(q_ptr, np.asarray(q_terms), term_postings, -(-int(n_docs) // TILE) * STEP_POSTINGS)
    # 16-bit keys of the cost against the largest (a stable sort of them is numpy's radix sort, 10x a
    # comparison sort of the costs; the order needs no finer grain)
    key = (cost * (65535.0 / max(int(cost.max()), 1))).astype(np.uint16)
    return np.argsort(65535 - key, kind="stable").astype(np.int32)


@numba.njit(nogil=True, cache=True)
def _query_costs(q_ptr, q_terms, term_postings, per_term):  # pragma: no cover - numba
    """launch_order's cost of each query, int64 (nq,): its terms' postings plus ``per_term`` a term (``q_ptr``
    a pass's rows of the batch's CSR, its terms alone in ``q_terms``)."""
    nq = len(q_ptr) - 1
    out = np.empty(nq, np.int64)
    base = q_ptr[0]
    for q in range(nq):
        c = 0
        for j in range(q_ptr[q] - base, q_ptr[q + 1] - base):
            c += term_postings[q_terms[j]] + per_term
        out[q] = c
    return out


def search_tiled_start(indptr, indices, data, n_docs: int, q_ptr, q_terms, q_w, k: int,
                       max_workspace: int = DEFAULT_WORKSPACE, mask=None, lists=None,
                       workspace: Workspace | None = None, term_postings=None):
    """:func:`search_tiled` in two halves: this call launches the work and returns ``finish``, a function
    of no arguments that waits for it and returns ``(doc, score, n)``.  On the GPU the last pass of queries
    (the only one under the default workspace) is still running when this returns, so the caller can
    prepare the next batch meanwhile; the numba twin has finished.  Same parameters and errors;
    ``workspace`` (GPU only): the :class:`Workspace` whose buffers the batch borrows until ``finish``;
    ``term_postings`` (GPU only): host int32, the postings of each term (``diff(indptr)``) for
    :func:`launch_order`, read from the device's ``indptr`` when not given."""
    k = _check_k(k)
    if k > MAX_K_GPU:
        raise ValueError(f"k must be <= {MAX_K_GPU} for the GPU engine (its top-k sort is in shared memory), "
                         f"got {k}; use engine='cpu' or 'sparse' for deeper runs")
    if n_docs >= MAX_DOCS_GPU:
        raise ValueError(f"the GPU engine needs n_docs < 2**31 - 2**16, got {n_docs}; shard the index "
                         "(devices=... or client=...)")
    q_ptr, q_terms, q_w = _as_query_csr(q_ptr, q_terms, q_w)
    nq = len(q_ptr) - 1
    fmode, fmask, a_ptr, a_docs = _filter_arrays(mask, lists, int(n_docs), nq)
    out_doc = np.full((nq, k), -1, np.int64)
    out_score = np.zeros((nq, k), np.float32)
    out_n = np.zeros(nq, np.int32)

    def done():
        return out_doc, out_score, out_n

    if nq == 0 or n_docs == 0:
        return done
    xp = array_module(data)
    gpu = xp is not np
    passes = plan_passes(q_ptr, k, max_workspace)
    nqt = max(e - s for s, e in passes)
    nterms = max(int(q_ptr[e] - q_ptr[s]) for s, e in passes)
    if not gpu:
        dev = {name: np.zeros(size, dtype) for name, size, dtype in
               (("top_a", nqt * k, np.uint64), ("top_n", nqt, np.int32))}
        for s, e in passes:
            n = e - s
            qp = q_ptr[s:e + 1] - q_ptr[s]
            qt, qw = q_terms[q_ptr[s]:q_ptr[e]], q_w[q_ptr[s]:q_ptr[e]]
            _twin_block_search(indptr, indices, data, qp, qt, qw, n, int(n_docs), k, TILE, dev["top_a"],
                               dev["top_n"], fmode, fmask, a_ptr[s:e + 1] if fmode == 2 else a_ptr, a_docs)
            _twin_sort(dev["top_a"][:n * k], dev["top_n"][:n], k, n, out_doc[s:e], out_score[s:e])
            out_n[s:e] = dev["top_n"][:n]
        return done
    # every device buffer of the call lives in ``dev`` until ``finish`` has copied the results: a buffer
    # freed while the kernels run would, under RMM's default resource (cudaFree), wait for them
    borrowed = workspace.take() if workspace is not None else None
    store = borrowed if borrowed is not None else {}
    # The kernels write every buffer they read (top_a / top_b up to a query's kept count, the cursors past
    # SB_QT at a query's start, top_n, doc and score in full), so none is cleared.  A batch makes one upload
    # and one copy-out: each packs its arrays into one page-locked host buffer and one device buffer (the
    # workspace's, kept), so a device's batch costs a few calls of the caller's thread, none of which waits.
    dev = {"store": store,  # the page-locked buffers stay alive (and unused by another batch) until finish
           "top_a": Workspace.view(store, xp, "top_a", nqt * k, np.uint64),
           "top_b": Workspace.view(store, xp, "top_b", nqt * k, np.uint64),
           "cursor": Workspace.view(store, xp, "cursor", max(nterms, 1), np.int64)}
    out_layout, out_bytes = _packed([("doc", nqt * k, np.int64), ("score", nqt * k, np.float32),
                                     ("top_n", nqt, np.int32)])
    out_dev = Workspace.view(store, xp, "out", out_bytes, np.uint8)
    dev.update(_views(out_dev, out_layout))
    stream = xp.cuda.get_current_stream()
    # the filter on the device (a one-word or one-entry stand-in for what fmode does not read)
    bits = _mask_words(fmask) if fmode == 1 else np.zeros(1, np.uint32)
    docs = a_docs if len(a_docs) else np.zeros(1, np.int32)

    if term_postings is None:
        term_postings = np.diff(indptr.get()).astype(np.int32)

    def fetch(s, e):
        n = e - s
        out_doc[s:e] = dev["doc"][:n * k].get().reshape(n, k)
        out_score[s:e] = dev["score"][:n * k].get().reshape(n, k)
        out_n[s:e] = dev["top_n"][:n].get()

    for i, (s, e) in enumerate(passes):
        n = e - s
        ups = [("qp", q_ptr[s:e + 1] - q_ptr[s]), ("qt", q_terms[q_ptr[s]:q_ptr[e]]), ("qw", q_w[q_ptr[s]:q_ptr[e]]),
               ("a_ptr", a_ptr[s:e + 1] if fmode == 2 else np.zeros(n + 1, np.int64)), ("allow_bits", bits),
               ("a_docs", docs), ("order", launch_order(q_ptr[s:e + 1], q_terms[q_ptr[s]:q_ptr[e]], term_postings,
                                                        n_docs))]
        ups = [(name, np.ascontiguousarray(h)) for name, h in ups]
        layout, total = _packed([(name, h.size, h.dtype) for name, h in ups])
        staged = Workspace.view(store, xp, "host:in", total, np.uint8, pinned=True)
        sv = _views(staged, layout)
        for name, h in ups:  # the previous pass's upload is done: its results were fetched
            sv[name][...] = h
        up_dev = Workspace.view(store, xp, "in", total, np.uint8)
        up_dev.set(staged, stream=stream)  # page-locked: queued on the stream, returns at once
        u = _views(up_dev, layout)
        _cuda.kernel(SOURCE, "bm25_block_search")(
            (n,), (THREADS,), (indptr, indices, data, u["qp"], u["qt"], u["qw"], np.int32(n_docs), np.int32(k),
                               dev["cursor"], dev["top_a"], dev["top_b"], dev["top_n"], np.int32(fmode),
                               u["allow_bits"], u["a_ptr"], u["a_docs"], u["order"]))
        _cuda.kernel(SOURCE, "bm25_topk_sort")(
            (n,), (THREADS,), (dev["top_a"], dev["top_n"], np.int32(k), dev["doc"], dev["score"]))
        if i < len(passes) - 1:
            fetch(s, e)
            continue
        # the results' copy queued behind this batch's kernels: the device's next batch, queued before the
        # caller collects this one, does not hold the collection up
        host_out = Workspace.view(store, xp, "host:out", out_bytes, np.uint8, pinned=True)
        got = _views(host_out, out_layout)
        out_dev.get(out=host_out, blocking=False)  # page-locked: returns before the copy is done
        ready = xp.cuda.Event()
        ready.record(stream)

        def finish(s=s, e=e, n=n, got=got, ready=ready):
            ready.synchronize()
            out_doc[s:e] = got["doc"][:n * k].reshape(n, k)
            out_score[s:e] = got["score"][:n * k].reshape(n, k)
            out_n[s:e] = got["top_n"][:n]
            dev.clear()  # the kernels are done: freeing waits for nothing
            if borrowed is not None:
                workspace.give_back(borrowed)
            return done()
        return finish
    return done  # pragma: no cover - the last pass returns finish


def _packed(arrays) -> tuple[dict, int]:
    """``({name: (byte offset, size, dtype)}, total bytes)`` of ``(name, size, dtype)`` arrays back to back
    in one byte buffer, each at a multiple of 16 bytes (at least 16 bytes each)."""
    layout, total = {}, 0
    for name, size, dtype in arrays:
        dtype = np.dtype(dtype)
        layout[name] = (total, int(size), dtype)
        total += max(16, -(-int(size) * dtype.itemsize // 16) * 16)
    return layout, total


def _views(buf, layout: dict) -> dict:
    """``{name: array}``: the arrays of ``layout`` (:func:`_packed`) as views of the byte buffer ``buf``."""
    return {name: buf[off:off + size * dt.itemsize].view(dt) for name, (off, size, dt) in layout.items()}


@numba.njit(nogil=True, cache=True)
def _merge_shards(docs, scores, ns, starts, offs, k, out_doc, out_score, out_n):  # pragma: no cover - numba
    # the parts side by side (columns starts[p]:starts[p + 1] of docs and scores, row p of ns): one signature
    # whatever the number of parts, which a tuple of parts is not (a segment count compiles once, not each)
    nq = out_n.shape[0]
    P = len(offs)
    pos = np.zeros(P, np.int64)
    cnt = np.zeros(P, np.int64)
    head = np.zeros(P, np.float32)  # the score at pos[p], -inf once shard p is exhausted (scores are finite)
    for r in range(nq):
        for p in range(P):
            pos[p] = 0
            c = np.int64(ns[p, r])
            cnt[p] = min(c, starts[p + 1] - starts[p])
            head[p] = scores[r, starts[p]] if cnt[p] > 0 else -np.inf
        j = 0
        while j < k:
            best = -1
            bs = -np.inf
            for p in range(P):
                if head[p] > bs:  # strictly: equal scores keep the earlier shard (smaller doc ids)
                    best = p
                    bs = head[p]
            if best < 0:
                break
            i = pos[best]
            out_doc[r, j] = docs[r, starts[best] + i] + offs[best]
            out_score[r, j] = bs
            i += 1
            pos[best] = i
            head[best] = scores[r, starts[best] + i] if i < cnt[best] else -np.inf
            j += 1
        out_n[r] = j


def merge_shards(parts, offsets, k: int):
    """Top ``k`` of each query over ``P`` shards' ranked rows, doc ids made global (``+ offsets[p]``).

    Parameters
    ----------
    parts : list of (doc, score, n)
        Per shard, in document order (shard ``p``'s documents below shard ``p + 1``'s): int64 (nq, k_p) doc
        ids numbered from 0 within the shard, float32 (nq, k_p) scores, int32 (nq,) counts; the first
        ``n[r]`` entries of row ``r`` ranked by score descending then doc id ascending.
    offsets : sequence of int, (P,)
        The global doc id of each shard's first document.
    k : int >= 1

    Returns
    -------
    (doc, score, n) : int64 (nq, k), float32 (nq, k), int32 (nq,); entries past ``n`` are -1 / 0.  Equal
        scores keep the earlier shard first (the smaller doc id), so the merge equals one index's ranking.

    Raises
    ------
    ValueError
        No parts, parts with different numbers of queries, ``len(offsets) != len(parts)`` or ``k < 1``.
    """
    if not parts:
        raise ValueError("merge_shards: no parts")
    if len(offsets) != len(parts):
        raise ValueError(f"merge_shards: {len(parts)} parts but {len(offsets)} offsets")
    k = int(k)
    if k < 1:
        raise ValueError(f"merge_shards: k must be >= 1, got {k}")
    nq = len(parts[0][2])
    if any(len(p[2]) != nq or p[0].shape[0] != nq or p[1].shape != p[0].shape for p in parts):
        raise ValueError("merge_shards: the parts must hold the same queries (nq rows each)")
    docs = np.ascontiguousarray(np.hstack([p[0] for p in parts]), dtype=np.int64)
    scores = np.ascontiguousarray(np.hstack([p[1] for p in parts]), dtype=np.float32)
    ns = np.ascontiguousarray(np.stack([p[2] for p in parts]), dtype=np.int32)
    starts = np.zeros(len(parts) + 1, np.int64)
    np.cumsum([p[0].shape[1] for p in parts], out=starts[1:])
    out_doc = np.full((nq, k), -1, np.int64)
    out_score = np.zeros((nq, k), np.float32)
    out_n = np.zeros(nq, np.int32)
    _merge_shards(docs, scores, ns, starts, np.asarray(offsets, np.int64), k, out_doc, out_score, out_n)
    return out_doc, out_score, out_n


__all__ = ["DEFAULT_WORKSPACE", "MAX_K_GPU", "TILE", "launch_order", "merge_shards", "plan_passes", "search_cpu",
           "search_tiled", "search_tiled_start"]
