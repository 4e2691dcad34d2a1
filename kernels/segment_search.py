"""The CPU query engine over one segment of a segmented BM25 index, the weights computed at query time.

A segment keeps its postings as written (term-major: ``offsets`` (n_terms + 1,), ``doc`` local doc numbers,
``tf``) and the global term id of each local term (``ids``, ascending: the segment's terms and the global
vocabulary are sorted alike).  Nothing of a segment depends on the other segments: the global statistics
(N, avgdl, df) enter through ``idf`` and ``minus`` (float64 / float32 per global term id) and the per-document
length factor ``K`` (float64 per local doc, :func:`length_factors`), all recomputed when the commit changes
(Lucene's per-segment scorers with the collection statistics of the whole reader).

Each posting's weight is computed as :func:`cutext.kernels.postings.csr_weights` computes it (the operations
of :func:`cutext.stages.text.bm25.tf_component` in float64 in their order, rounded to float32, ``minus[t]``
subtracted in float32), ``K`` holding the one product of that formula that depends on the document alone
(``k1 * norm``, or ``norm`` for bm25l), so a score is the sum :func:`cutext.kernels.search.search_cpu` adds
over stored weights, bit for bit, and its top k follow the same ties rule.

The caller may keep those float32 weights for later batches in an array of its own (``weights``, each query
term's run of this segment at ``at``): per query term a ``mode`` says whether its weights are read from there,
computed and written there, or computed alone, and the terms of ``fill`` are computed there before the queries
are scored (blocks of postings on numba's threads).  A weight read costs what the merged matrix's engine pays
for a posting; one computed (a gather of ``K``, a float64 division) about 1.7 times as much.  ``floor`` gives
each query the score a document must beat (the k-th of the earlier segments), which the top-k selection skips to.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import prange

import cutext.kernels._numba_cache  # noqa: F401  # before the decorators: it places and stamps their cache
from cutext.kernels.backend import numba_threads
from cutext.kernels.postings import WEIGHT_VARIANTS, _weight_setup, tf_part_kd
from cutext.kernels.search import (
    DENSE_RATIO,
    _as_query_csr,
    _check_k,
    _chunk_buffers,
    _filter_arrays,
    _mark_allowed,
    _select_dense,
    _select_one,
)

__all__ = ["advance_runs", "length_factors", "raise_floor", "search_segment_cpu"]


@numba.njit(nogil=True, cache=True)
def _factors(lengths, avgdl, b, k1, kind, out):  # pragma: no cover - numba
    one_b = 1.0 - b
    for d in range(len(lengths)):
        norm = one_b + b * (np.float64(lengths[d]) / avgdl)
        out[d] = norm if kind == 2 else k1 * norm


def length_factors(lengths, avgdl: float, variant: str, k1: float, b: float) -> np.ndarray:
    """float64 (n_docs,): each document's ``K_d`` of the query-time weights, ``k1 * (1 - b + b * dl / avgdl)``
    (bm25l: ``1 - b + b * dl / avgdl``), with the operations and rounding of
    :func:`cutext.kernels.postings.csr_weights`.

    Raises
    ------
    ValueError
        An unknown variant or ``avgdl <= 0``.
    """
    kind = _weight_setup("length_factors", variant, avgdl, None)[0]
    out = np.empty(len(lengths), np.float64)
    _factors(np.ascontiguousarray(lengths), float(avgdl), float(b), float(k1), kind, out)
    return out


@numba.njit(nogil=True, cache=True, inline="always")
def _row(ids, t):  # pragma: no cover - numba
    """The local row of global term ``t`` in the ascending ``ids``, or -1."""
    lo, hi = 0, len(ids)
    while lo < hi:
        mid = (lo + hi) >> 1
        if ids[mid] < t:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < len(ids) and ids[lo] == t else -1


@numba.njit(nogil=True, cache=True)
def _score_seg(q, offsets, ids, doc, tf, kd, idf, minus, use_minus, kind, k1, delta, q_ptr, q_terms, q_w, mode, w,
               at, acc, touched, track):  # pragma: no cover - numba
    """Term-at-a-time accumulation of query ``q`` into ``acc`` (as kernels.search._score_one), each weight read
    from ``w`` (``mode`` 0), or computed here (2) and kept in ``w`` (1), query term ``j``'s run from ``at[j]``;
    with ``track`` the documents that became nonzero go to ``touched``.  Returns how many."""
    nt = 0
    for j in range(q_ptr[q], q_ptr[q + 1]):
        t = q_terms[j]
        r = _row(ids, t)
        if r < 0:
            continue
        qw = q_w[j]
        md = mode[j]
        a = offsets[r]
        o = at[j] - a  # the kept weight of posting p: w[o + p]
        if md == 0:  # the loop of kernels.search._score_one over the kept weights
            for p in range(a, offsets[r + 1]):
                d = doc[p]
                old = acc[d]
                nw = old + qw * w[o + p]
                acc[d] = nw
                if track and old == 0 and nw != 0:
                    touched[nt] = d
                    nt += 1
            continue
        w_t = idf[t]
        m = minus[t] if use_minus else np.float32(0.0)
        if md == 1:  # computed and kept (a loop of its own: a store in the loop below slowed it by a tenth)
            for p in range(a, offsets[r + 1]):
                d = doc[p]
                x = np.float32(w_t * tf_part_kd(np.float64(tf[p]), kd[d], kind, k1, delta))
                if use_minus:
                    x = x - m
                w[o + p] = x
                old = acc[d]
                nw = old + qw * x
                acc[d] = nw
                if track and old == 0 and nw != 0:
                    touched[nt] = d
                    nt += 1
            continue
        for p in range(a, offsets[r + 1]):
            d = doc[p]
            x = np.float32(w_t * tf_part_kd(np.float64(tf[p]), kd[d], kind, k1, delta))
            if use_minus:
                x = x - m
            old = acc[d]
            nw = old + qw * x
            acc[d] = nw
            if track and old == 0 and nw != 0:
                touched[nt] = d
                nt += 1
    return nt


FILL_BLOCK = 4096  # postings a thread of _fill weighs at a time: a few long runs still keep every thread busy


@numba.njit(parallel=True, nogil=True, cache=True)
def _fill(offsets, ids, doc, tf, kd, idf, minus, use_minus, kind, k1, delta, fill, fill_at,
          w):  # pragma: no cover - numba
    """The weights of the segment's postings of the global terms ``fill`` kept in ``w``, term ``fill[i]``'s run
    from ``fill_at[i]`` (blocks of :data:`FILL_BLOCK` postings on numba's threads)."""
    rows = np.empty(len(fill), np.int64)
    n_blocks = 0
    for i in range(len(fill)):
        rows[i] = _row(ids, fill[i])
        if rows[i] >= 0:
            n_blocks += (offsets[rows[i] + 1] - offsets[rows[i]] + FILL_BLOCK - 1) // FILL_BLOCK
    which = np.empty(n_blocks, np.int64)  # the fill term of each block, and where the block begins
    first = np.empty(n_blocks, np.int64)
    b = 0
    for i in range(len(fill)):
        if rows[i] >= 0:
            for p in range(offsets[rows[i]], offsets[rows[i] + 1], FILL_BLOCK):
                which[b] = i
                first[b] = p
                b += 1
    for b in prange(n_blocks):
        i = which[b]
        t = fill[i]
        r = rows[i]
        w_t = idf[t]
        m = minus[t] if use_minus else np.float32(0.0)
        o = fill_at[i] - offsets[r]
        for p in range(first[b], min(first[b] + FILL_BLOCK, offsets[r + 1])):
            x = np.float32(w_t * tf_part_kd(np.float64(tf[p]), kd[doc[p]], kind, k1, delta))
            w[o + p] = x - m if use_minus else x


@numba.njit(parallel=True, nogil=True, cache=True)
def _seg_search(offsets, ids, doc, tf, kd, idf, minus, use_minus, kind, k1, delta, n_docs, q_ptr, q_terms, q_w, mode,
                w, at, k, floor, n_chunks, out_doc, out_score, out_n, fmode, mask, a_ptr,
                a_docs):  # pragma: no cover - numba
    nq = q_ptr.shape[0] - 1
    for c in prange(n_chunks):
        acc, touched, hs, hd, qa, allow = _chunk_buffers(n_docs, k, fmode, mask)
        for q in range(c, nq, n_chunks):
            if fmode == 2:
                _mark_allowed(qa, a_ptr, a_docs, q, True)
            total = 0
            for j in range(q_ptr[q], q_ptr[q + 1]):
                r = _row(ids, q_terms[j])
                if r >= 0:
                    total += offsets[r + 1] - offsets[r]
            if total * DENSE_RATIO >= n_docs:  # many postings: no touched list, scan the N scores
                _score_seg(q, offsets, ids, doc, tf, kd, idf, minus, use_minus, kind, k1, delta, q_ptr, q_terms, q_w,
                           mode, w, at, acc, touched, False)
                _select_dense(q, k, acc, hs, hd, out_doc, out_score, out_n, fmode != 0, allow, floor[q])
            elif total > 0:
                nt = _score_seg(q, offsets, ids, doc, tf, kd, idf, minus, use_minus, kind, k1, delta, q_ptr, q_terms,
                                q_w, mode, w, at, acc, touched, True)
                _select_one(q, k, acc, touched, nt, hs, hd, out_doc, out_score, out_n, fmode != 0, allow, floor[q])
            else:
                out_n[q] = 0
            if fmode == 2:
                _mark_allowed(qa, a_ptr, a_docs, q, False)


@numba.njit(nogil=True, cache=True)
def _runs(offsets, ids, terms, at, used, n, out):  # pragma: no cover - numba
    """Each term's run start in the segment into ``out`` (-1 absent, when ``out`` has room); whether the runs of
    the ``used`` entries, placed at ``at``, lie inside ``n`` kept weights."""
    inside = True
    for j in range(len(terms)):
        r = _row(ids, terms[j])
        if len(out):
            out[j] = offsets[r] if r >= 0 else -1
        if r >= 0 and used[j] and (at[j] < 0 or at[j] + offsets[r + 1] - offsets[r] > n):
            inside = False
    return inside


@numba.njit(nogil=True, cache=True)
def _advance(offsets, ids, terms, at):  # pragma: no cover - numba
    for j in range(len(terms)):
        r = _row(ids, terms[j])
        if r >= 0:
            at[j] += offsets[r + 1] - offsets[r]


def advance_runs(offsets, ids, terms, at) -> None:
    """Add to ``at`` (int64, in place) the postings each global term id of ``terms`` has in the segment (``offsets``,
    ``ids`` as :func:`search_segment_cpu` takes them): where the next segment's runs go when the segments' runs of
    a term follow one another in the kept weights."""
    _advance(offsets, ids, np.ascontiguousarray(terms, np.int32), at)


@numba.njit(nogil=True, cache=True)
def _raise_floor(best, score, n, floor):  # pragma: no cover - numba
    for q in range(best.shape[0]):
        for i in range(min(n[q], score.shape[1])):
            s = score[q, i]
            if s <= floor[q]:  # ranked: none after it beats the floor either
                break
            low = 0
            for j in range(1, best.shape[1]):
                if best[q, j] < best[q, low]:
                    low = j
            best[q, low] = s
            m = best[q, 0]
            for j in range(1, best.shape[1]):
                m = min(m, best[q, j])
            floor[q] = m


def raise_floor(best, score, n, floor) -> None:
    """Take a segment's ranked scores into the ``k`` best so far of each query and raise ``floor`` to the k-th.

    Parameters
    ----------
    best : float32 array (nq, k)
        The k best scores so far of each query, in any order, 0 where fewer (updated in place).
    score : float32 array (nq, k'), n : int32 array (nq,)
        The segment's results (:func:`search_segment_cpu`): row ``q``'s first ``n[q]`` scores, descending.
    floor : float32 array (nq,)
        ``best.min(axis=1)``, updated in place: what a document of a later segment must beat.
    """
    _raise_floor(best, score, n, floor)


_NO_TERMS, _NO_PLACES, _NO_WEIGHTS = np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.float32)


def _places(who: str, offsets, ids, terms, at, used, n: int) -> np.ndarray:
    """``at`` checked (int64 of the shape of ``terms``; None: each run where the segment holds it), the runs of the
    entries ``used`` inside ``n`` kept weights."""
    own = at is None
    at = np.zeros(len(terms), np.int64) if own else np.ascontiguousarray(at, np.int64)
    if at.shape != terms.shape:
        raise ValueError(f"search_segment_cpu: {who} must hold one position for each of the {len(terms)} terms, got "
                         f"shape {at.shape}")
    if not len(terms):
        return at
    if own:
        _runs(offsets, ids, terms, at, np.zeros(len(terms), np.bool_), n, at)
    if not _runs(offsets, ids, terms, at, np.ascontiguousarray(used, np.bool_), n, at[:0]):
        raise ValueError(f"search_segment_cpu: {who} places runs outside the {n} kept weights")
    return at


def search_segment_cpu(offsets, ids, doc, tf, kd, idf, minus, variant: str, k1: float, delta: float, q_ptr, q_terms,
                       q_w, k: int, n_threads: int | None = None, mask=None, lists=None, weights=None, mode=None,
                       at=None, fill=None, fill_at=None, floor=None):
    """Top ``k`` documents of one segment for every query, the weights computed at query time or read from those
    kept from earlier batches (numba threads).

    Parameters
    ----------
    offsets : int64 array (n_terms + 1,)
        Local term ``j``'s postings are ``offsets[j]:offsets[j + 1]``.
    ids : int32 array (n_terms,)
        The global term id of each local term, strictly ascending.
    doc : int32 array (n_postings,)
        Local doc numbers in ``[0, n_docs)``, ascending within a term.
    tf : integer array (n_postings,)
    kd : float64 array (n_docs,)
        :func:`length_factors` of the segment's documents (global avgdl).
    idf : float64 array (V + 1,)
        By global term id.
    minus : float32 array (V + 1,) or None
        Subtracted from every weight (``w0`` of bm25l / bm25+); None: nothing.
    variant : {"lucene", "robertson", "atire", "bm25l", "bm25+"}
    k1, delta : float
    q_ptr, q_terms, q_w : the query CSR of global term ids (:func:`cutext.kernels.search.search_cpu`)
    k : int >= 1
    n_threads : int, optional
    mask, lists : optional
        A filter over the segment's local doc numbers (:func:`cutext.kernels.search.search_cpu`).
    weights : float32 array, optional
        Float32 weights (``minus`` subtracted) kept for later batches, a term's run of this segment at a given
        place: written for the terms of ``fill`` and the query terms of ``mode`` 1, read for those of ``mode`` 0.
    mode : int8 array (len(q_terms),), optional
        Per query term: 0 its weights read from ``weights``, 1 computed and kept there, 2 computed (default).
    at : int64 array (len(q_terms),), optional
        Per query term, where in ``weights`` its run of this segment's postings is (default: the segment's own
        offsets, ``weights`` one slot a posting).
    fill : int32 array, optional
        Global term ids whose weights are computed into ``weights`` before the queries are scored.
    fill_at : int64 array (len(fill),), optional
        Their places in ``weights``, as ``at``.
    floor : float32 array (nq,), optional
        Only documents scoring above ``floor[q]`` (>= 0) are returned for query ``q`` (default 0): the k-th score
        of the earlier segments, which a document of this one must beat (at equal scores the earlier, smaller
        doc id ranks first).

    Returns
    -------
    (doc, score, n) : int64 (nq, k) local doc numbers, float32 (nq, k), int32 (nq,)
        As :func:`cutext.kernels.search.search_cpu` returns them over the segment's stored weights (those above
        ``floor``).

    Raises
    ------
    ValueError
        ``k < 1``, an unknown variant, a filter of the wrong shape (:func:`cutext.kernels.search.search_cpu`),
        ``mode`` not one entry a query term in 0..2, ``weights`` missing for ``mode`` 0 / 1 or ``fill``, or not
        contiguous float32, ``at`` / ``fill_at`` of the wrong shape or placing a run outside ``weights``, or
        ``floor`` not ``nq`` scores >= 0.
    """
    k = _check_k(k)
    if variant not in WEIGHT_VARIANTS:
        raise ValueError(f"search_segment_cpu: unknown variant {variant!r}; one of {sorted(WEIGHT_VARIANTS)}")
    n_docs = len(kd)
    q_ptr, q_terms, q_w = _as_query_csr(q_ptr, q_terms, q_w)
    nq = len(q_ptr) - 1
    fmode, fmask, a_ptr, a_docs = _filter_arrays(mask, lists, n_docs, nq)
    computed = mode is None
    mode = np.full(len(q_terms), 2, np.int8) if computed else np.ascontiguousarray(mode, np.int8)
    fill = _NO_TERMS if fill is None else np.ascontiguousarray(fill, np.int32)
    if not computed and (mode.shape != q_terms.shape or (len(mode) and mode.view(np.uint8).max() > 2)):
        raise ValueError(f"search_segment_cpu: mode must hold 0, 1 or 2 for each of the {len(q_terms)} query terms, "
                         f"got shape {mode.shape}")
    if weights is None:
        if len(fill) or (not computed and mode.min() < 2):
            raise ValueError("search_segment_cpu: weights are needed to keep or read weights (mode 0 / 1, fill)")
        weights, at, fill_at = _NO_WEIGHTS, np.zeros(len(q_terms), np.int64), _NO_PLACES
    else:
        if weights.dtype != np.float32 or weights.ndim != 1 or not weights.flags.c_contiguous:
            raise ValueError(f"search_segment_cpu: weights must be 1-d contiguous float32, got {weights.dtype} "
                             f"{weights.shape}")
        at = _places("at", offsets, ids, q_terms, at, mode < 2, len(weights))
        fill_at = _places("fill_at", offsets, ids, fill, fill_at, np.ones(len(fill), bool), len(weights))
    if floor is None:
        floor = np.zeros(nq, np.float32)
    else:
        floor = np.ascontiguousarray(floor, np.float32)
        if floor.shape != (nq,) or (nq and not floor.min() >= 0):
            raise ValueError(f"search_segment_cpu: floor must be {nq} scores >= 0, got shape {floor.shape}")
    out_doc = np.full((nq, k), -1, np.int64)
    out_score = np.zeros((nq, k), np.float32)
    out_n = np.zeros(nq, np.int32)
    if n_docs == 0 or len(ids) == 0:
        return out_doc, out_score, out_n
    use = minus is not None
    m = np.ascontiguousarray(minus, np.float32) if use else np.zeros(1, np.float32)
    kind = WEIGHT_VARIANTS[variant]
    with numba_threads(n_threads) as nth:
        if len(fill):
            _fill(offsets, ids, doc, tf, kd, idf, m, use, kind, float(k1), float(delta), fill, fill_at, weights)
        if nq:
            _seg_search(offsets, ids, doc, tf, kd, idf, m, use, kind, float(k1), float(delta), n_docs, q_ptr, q_terms,
                        q_w, mode, weights, at, k, floor, min(nq, nth * 4), out_doc, out_score, out_n, fmode, fmask,
                        a_ptr, a_docs)
    return out_doc, out_score, out_n
