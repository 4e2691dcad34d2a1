"""The CPU query engine over the segments of a segmented BM25 index, the weights computed at query time.

A segment keeps its postings as written (term-major: ``offsets`` (n_terms + 1,), ``doc`` local doc numbers,
``tf``) and the global term id of each local term (``ids``, ascending: the segment's terms and the global
vocabulary are sorted alike).  Nothing of a segment depends on the other segments: the global statistics
(N, avgdl, df) enter through ``idf`` and ``minus`` (float64 / float32 per global term id) and the per-document
length factor ``K`` (float64 per doc, :func:`length_factors`), all recomputed when the commit changes
(Lucene's per-segment scorers with the collection statistics of the whole reader).

Each posting's weight is computed as :func:`cutext.kernels.postings.csr_weights` computes it (the operations
of :func:`cutext.stages.text.bm25.tf_component` in float64 in their order, rounded to float32, ``minus[t]``
subtracted in float32), ``K`` holding the one product of that formula that depends on the document alone
(``k1 * norm``, or ``norm`` for bm25l), so a score is the sum :func:`cutext.kernels.search.search_cpu` adds
over stored weights, bit for bit, and its top k follow the same ties rule.

:func:`search_segments_cpu` scores every segment of a query in one numba call: the segments' arrays are read in
place through their addresses (:class:`SegmentTable`), each query's scores summed into one array over the global
doc ids (``base[s]`` + the local doc) and its top k taken once, with the selection of the merged matrix's engine.

The caller may keep those float32 weights for later batches in an array of its own (``weights``, each query
term's runs of the segments one after the other from ``at``, as a merged matrix's row): per query term a ``mode``
says whether its weights are read from there, computed and written there, or computed alone, and the terms of
``fill`` are computed there before the queries are scored (blocks of postings on numba's threads).  A weight
read costs what the merged matrix's engine pays for a posting; one computed (a gather of ``K``, a float64
division) about 1.7 times as much.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import prange, types
from numba.extending import intrinsic

import cutext.kernels._numba_cache  # noqa: F401  # before the decorators: it places and stamps their cache
from cutext.kernels.backend import numba_threads
from cutext.kernels.postings import WEIGHT_VARIANTS, _weight_setup, tf_part_kd
from cutext.kernels.search import (
    DENSE_RATIO,
    _add_track,
    _as_query_csr,
    _check_k,
    _chunk_buffers,
    _filter_arrays,
    _mark_allowed,
    _select_dense,
    _select_one,
)

__all__ = ["SegmentTable", "length_factors", "search_segments_cpu", "term_postings"]


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


FILL_BLOCK = 4096  # postings a thread of _fill weighs at a time: a few long runs still keep every thread busy


_NO_TERMS, _NO_PLACES, _NO_WEIGHTS = np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.float32)


@intrinsic
def _pointer(typingctx, addr, zero):  # pragma: no cover - numba
    """The address ``addr`` (int64) as a pointer to ``zero``'s type: a segment's array read in place (a typed
    list of the segments' arrays compiles its methods again in every process, ~0.4 s)."""
    sig = types.CPointer(zero)(types.int64, zero)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(signature.return_type))

    return sig, codegen


@numba.njit(nogil=True, cache=True, inline="always")
def _i64(addr, n):  # pragma: no cover - numba
    return numba.carray(_pointer(addr, np.int64(0)), n)


@numba.njit(nogil=True, cache=True, inline="always")
def _i32(addr, n):  # pragma: no cover - numba
    return numba.carray(_pointer(addr, np.int32(0)), n)


class SegmentTable:
    """The term-major postings of a run of segments, read in place by :func:`search_segments_cpu`.

    Parameters
    ----------
    segments : sequence of (offsets, ids, doc, tf)
        Per segment (module docstring): int64 (n_terms + 1,) offsets, int32 (n_terms,)
        ascending global term ids, local doc numbers and tf (integers; copied to int32 where they are not
        contiguous int32).

    Attributes
    ----------
    addr : int64 array (n_segments, 4)
        The addresses of each segment's offsets, ids, doc and tf (the arrays are held by this object).
    size : int64 array (n_segments, 2)
        Each segment's terms and postings.
    """

    def __init__(self, segments):
        self._held = []
        addr = np.zeros((len(segments), 4), np.int64)
        size = np.zeros((len(segments), 2), np.int64)
        for s, (offsets, ids, doc, tf) in enumerate(segments):
            arrays = (np.ascontiguousarray(offsets, np.int64), np.ascontiguousarray(ids, np.int32),
                      np.ascontiguousarray(doc, np.int32), np.ascontiguousarray(tf, np.int32))
            if arrays[0].shape != (len(arrays[1]) + 1,) or len(arrays[2]) != len(arrays[3]) or (
                    len(arrays[1]) and arrays[0][-1] > len(arrays[2])):
                raise ValueError(f"SegmentTable: segment {s}: offsets must be n_terms + 1 = {len(arrays[1]) + 1} "
                                 f"positions into its {len(arrays[2])} postings (doc and tf of one length)")
            self._held.append(arrays)
            addr[s] = [a.ctypes.data for a in arrays]
            size[s] = len(arrays[1]), len(arrays[2])
        self.addr, self.size = addr, size


@numba.njit(nogil=True, cache=True)
def _spans(addr, size, terms, out):  # pragma: no cover - numba
    """``out[u, s]``: the postings ``[a, e)`` of global term ``terms[u]`` in segment ``s`` (0, 0 absent), ascending
    terms searched from the last one found (a batch's runs looked up once, not a query at a time)."""
    for s in range(addr.shape[0]):
        offsets = _i64(addr[s, 0], size[s, 0] + 1)
        ids = _i32(addr[s, 1], size[s, 0])
        lo = 0
        for u in range(len(terms)):
            t = terms[u]
            if u and t < terms[u - 1]:
                lo = 0
            hi = len(ids)
            while lo < hi:
                mid = (lo + hi) >> 1
                if ids[mid] < t:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < len(ids) and ids[lo] == t:
                out[u, s, 0], out[u, s, 1] = offsets[lo], offsets[lo + 1]
            else:
                out[u, s, 0], out[u, s, 1] = 0, 0


@numba.njit(nogil=True, cache=True)
def _add(acc, doc, w, qw):  # pragma: no cover - numba
    """``acc[doc[i]] += qw * w[i]`` (kernels.search._score_dense's loop)."""
    for i in range(len(doc)):
        d = doc[i]
        acc[d] = acc[d] + qw * w[i]


@numba.njit(nogil=True, cache=True)
def _weigh_add(acc, b0, doc, tf, kd, w_t, m, use_minus, kind, k1, delta, qw, w, keep, touched, nt,
               track):  # pragma: no cover - numba
    """``acc[b0 + doc[i]] += qw * x`` with ``x`` the float32 weight of posting ``i`` computed here (kept in ``w[i]``
    with ``keep``); with ``track`` the documents that became nonzero appended to ``touched`` from ``nt``.  Returns
    the new ``nt``."""
    for i in range(len(doc)):
        d = b0 + doc[i]
        x = np.float32(w_t * tf_part_kd(np.float64(tf[i]), kd[d], kind, k1, delta))
        if use_minus:
            x = x - m
        if keep:
            w[i] = x
        old = acc[d]
        nw = old + qw * x
        acc[d] = nw
        if track and old == 0 and nw != 0:
            touched[nt] = d
            nt += 1
    return nt


@numba.njit(nogil=True, cache=True)
def _score(q, addr, size, base, kd, idf, minus, use_minus, kind, k1, delta, q_ptr, q_terms, q_w, mode, w, at, spans,
           inv, acc, touched, track):  # pragma: no cover - numba
    """Term-at-a-time accumulation of query ``q`` into ``acc`` by global doc id (``base[s] +`` the local one), the
    terms in their order and each term's segments in theirs (kernels.search._score_one's order over a merged matrix):
    each weight read from ``w`` (``mode`` 0), or computed here (2) and kept in ``w`` (1), query term ``j``'s runs one
    after the other from ``at[j]``, as a merged matrix's row, its runs ``spans[inv[j]]`` (:func:`_spans`); with
    ``track`` the documents that became nonzero go to ``touched``.  Returns how many."""
    n_seg = addr.shape[0]
    nt = 0
    for j in range(q_ptr[q], q_ptr[q + 1]):
        t = q_terms[j]
        qw = q_w[j]
        md = mode[j]
        w_t = idf[t]
        m = minus[t] if use_minus else np.float32(0.0)
        pos = at[j]
        u = inv[j]
        for s in range(n_seg):
            a, e = spans[u, s, 0], spans[u, s, 1]
            if a == e:
                continue
            doc = _i32(addr[s, 2], size[s, 1])
            b0 = base[s]
            o = pos - a  # the kept weight of posting p: w[o + p]
            pos += e - a
            if md == 0:  # the loops of kernels.search over the kept weights, on the segment's views
                if track:
                    nt = _add_track(acc, b0, doc[a:e], w[o + a:o + e], qw, touched, nt)
                else:
                    _add(acc[b0:base[s + 1]], doc[a:e], w[o + a:o + e], qw)
                continue
            tf = _i32(addr[s, 3], size[s, 1])
            nt = _weigh_add(acc, b0, doc[a:e], tf[a:e], kd, w_t, m, use_minus, kind, k1, delta, qw,
                            w[o + a:o + e] if md == 1 else w[:0], md == 1, touched, nt, track)
    return nt


@numba.njit(parallel=True, nogil=True, cache=True)
def _fill(addr, size, base, kd, idf, minus, use_minus, kind, k1, delta, fill, fill_at, spans,
          w):  # pragma: no cover - numba
    """The weights of the postings of the global terms ``fill`` (their runs ``spans``, :func:`_spans`) kept in ``w``,
    term ``fill[i]``'s runs one after the other from ``fill_at[i]`` (blocks of :data:`FILL_BLOCK` postings on numba's
    threads)."""
    n_seg = addr.shape[0]
    n_blocks = 0
    for i in range(len(fill)):
        for s in range(n_seg):
            n_blocks += (spans[i, s, 1] - spans[i, s, 0] + FILL_BLOCK - 1) // FILL_BLOCK
    block = np.empty((n_blocks, 4), np.int64)  # fill term, segment, first posting, where its run goes
    b = 0
    for i in range(len(fill)):
        pos = fill_at[i]
        for s in range(n_seg):
            a, e = spans[i, s, 0], spans[i, s, 1]
            for p in range(a, e, FILL_BLOCK):
                block[b, 0], block[b, 1], block[b, 2], block[b, 3] = i, s, p, pos - a
                b += 1
            pos += e - a
    for b in prange(n_blocks):
        i, s, first, o = block[b, 0], block[b, 1], block[b, 2], block[b, 3]
        t = fill[i]
        doc = _i32(addr[s, 2], size[s, 1])
        tf = _i32(addr[s, 3], size[s, 1])
        b0 = base[s]
        w_t = idf[t]
        m = minus[t] if use_minus else np.float32(0.0)
        for p in range(first, min(first + FILL_BLOCK, spans[i, s, 1])):
            x = np.float32(w_t * tf_part_kd(np.float64(tf[p]), kd[b0 + doc[p]], kind, k1, delta))
            w[o + p] = x - m if use_minus else x


@numba.njit(parallel=True, nogil=True, cache=True)
def _search(addr, size, base, kd, idf, minus, use_minus, kind, k1, delta, q_ptr, q_terms, q_w, mode, w, at, spans,
            inv, totals, k, n_chunks, out_doc, out_score, out_n, fmode, mask, a_ptr,
            a_docs):  # pragma: no cover - numba
    nq = q_ptr.shape[0] - 1
    n_docs = base[-1]
    for c in prange(n_chunks):
        acc, touched, hs, hd, qa, allow = _chunk_buffers(n_docs, k, fmode, mask)
        for q in range(c, nq, n_chunks):
            if fmode == 2:
                _mark_allowed(qa, a_ptr, a_docs, q, True)
            total = 0
            for j in range(q_ptr[q], q_ptr[q + 1]):
                total += totals[inv[j]]
            dense = total * DENSE_RATIO >= n_docs  # many postings: no touched list, scan the N scores
            nt = _score(q, addr, size, base, kd, idf, minus, use_minus, kind, k1, delta, q_ptr, q_terms, q_w,
                        mode, w, at, spans, inv, acc, touched, not dense)
            if dense:
                _select_dense(q, k, acc, hs, hd, out_doc, out_score, out_n, fmode != 0, allow, np.float32(0))
            else:
                _select_one(q, k, acc, touched, nt, hs, hd, out_doc, out_score, out_n, fmode != 0, allow,
                            np.float32(0))
            if fmode == 2:
                _mark_allowed(qa, a_ptr, a_docs, q, False)


def _runs(table, terms):
    """``(spans, totals)`` of the global term ids ``terms``: int64 (len, n_segments, 2) each term's postings
    ``[a, e)`` in each segment, int64 (len,) their sum."""
    spans = np.empty((len(terms), len(table.addr), 2), np.int64)
    if len(terms) and len(table.addr):
        _spans(table.addr, table.size, terms, spans)
    return spans, (spans[:, :, 1] - spans[:, :, 0]).sum(axis=1)


def term_postings(table: SegmentTable, terms) -> np.ndarray:
    """int64 (len(terms),): the postings each global term id of ``terms`` has in all segments of ``table``."""
    return _runs(table, np.ascontiguousarray(terms, np.int32))[1]


def _places(who: str, at, terms, used, totals, n: int) -> np.ndarray:
    """``at`` checked: one int64 a term, the runs of the ``used`` terms (``totals`` postings) inside ``n`` weights."""
    at = np.ascontiguousarray(at, np.int64)
    if at.shape != terms.shape:
        raise ValueError(f"search_segments_cpu: {who} must hold one position for each of the {len(terms)} terms, "
                         f"got shape {at.shape}")
    if used.any() and (at[used].min() < 0 or (at[used] + totals[used]).max() > n):
        raise ValueError(f"search_segments_cpu: {who} places runs outside the {n} kept weights")
    return at


def search_segments_cpu(table: SegmentTable, base, kd, idf, minus, variant: str, k1: float, delta: float, q_ptr,
                        q_terms, q_w, k: int, n_threads: int | None = None, mask=None, lists=None, weights=None,
                        mode=None, at=None, fill=None, fill_at=None):
    """Top ``k`` documents of all segments of ``table`` for every query in one pass: each query's scores summed
    into one array over the global doc ids and its top k taken once, as :func:`cutext.kernels.search.search_cpu`
    does over the merged matrix (numba threads).

    Parameters
    ----------
    table : SegmentTable
        The segments' postings (global term ids, local doc numbers).
    base : int64 array (n_segments + 1,)
        Segment ``s``'s documents are the global doc ids ``base[s]:base[s + 1]``.
    kd : float64 array (base[-1],)
        :func:`length_factors` of every document, by global doc id.
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
        A filter over the global doc ids (:func:`cutext.kernels.search.search_cpu`).
    weights : float32 array, optional
        Float32 weights (``minus`` subtracted) kept for later batches: written for the terms of ``fill`` and the
        query terms of ``mode`` 1, read for those of ``mode`` 0.
    mode : int8 array (len(q_terms),), optional
        Per query term: 0 its weights read from ``weights``, 1 computed and kept there, 2 computed (default).
    at : int64 array (len(q_terms),), optional
        Where in ``weights`` each query term's runs begin, those of the segments one after the other in their
        order, as a merged matrix's row (needed with ``mode`` 0 / 1).
    fill : int32 array, optional
        Global term ids whose weights are computed into ``weights`` before the queries are scored.
    fill_at : int64 array (len(fill),), optional
        Their places in ``weights``, as ``at``.

    Returns
    -------
    (doc, score, n) : int64 (nq, k) global doc ids, float32 (nq, k), int32 (nq,)
        As :func:`cutext.kernels.search.search_cpu` returns them over the merged matrix's stored weights.

    Raises
    ------
    ValueError
        ``k < 1``, an unknown variant, a filter of the wrong shape (:func:`cutext.kernels.search.search_cpu`),
        ``base`` not ``n_segments + 1`` ascending ids from 0 or ``kd`` not one factor a document, ``mode`` not one
        entry a query term in 0..2, ``weights`` missing for ``mode`` 0 / 1 or ``fill``, or not contiguous float32,
        ``at`` / ``fill_at`` missing, of the wrong shape or placing a run outside ``weights``.
    """
    k = _check_k(k)
    if variant not in WEIGHT_VARIANTS:
        raise ValueError(f"search_segments_cpu: unknown variant {variant!r}; one of {sorted(WEIGHT_VARIANTS)}")
    base = np.ascontiguousarray(base, np.int64)
    kd = np.ascontiguousarray(kd, np.float64)
    n_seg = len(table.addr)
    if base.shape != (n_seg + 1,) or base[0] != 0 or np.any(np.diff(base) < 0) or len(kd) != base[-1]:
        raise ValueError(f"search_segments_cpu: base must be {n_seg + 1} ascending doc ids from 0 and kd one factor "
                         f"a document, got shapes {base.shape}, {kd.shape}")
    n_docs = int(base[-1])
    q_ptr, q_terms, q_w = _as_query_csr(q_ptr, q_terms, q_w)
    nq = len(q_ptr) - 1
    fmode, fmask, a_ptr, a_docs = _filter_arrays(mask, lists, n_docs, nq)
    computed = mode is None
    mode = np.full(len(q_terms), 2, np.int8) if computed else np.ascontiguousarray(mode, np.int8)
    fill = _NO_TERMS if fill is None else np.ascontiguousarray(fill, np.int32)
    if not computed and (mode.shape != q_terms.shape or (len(mode) and mode.view(np.uint8).max() > 2)):
        raise ValueError(f"search_segments_cpu: mode must hold 0, 1 or 2 for each of the {len(q_terms)} query "
                         f"terms, got shape {mode.shape}")
    uterms, inv = np.unique(q_terms, return_inverse=True)
    spans, totals = _runs(table, uterms)
    at_u = np.minimum(np.searchsorted(uterms, fill), max(len(uterms) - 1, 0))
    if len(uterms) and np.array_equal(uterms[at_u], fill):  # the query terms' (as the caller gives them)
        fill_spans, fill_totals = spans[at_u], totals[at_u]
    else:
        fill_spans, fill_totals = _runs(table, fill)
    if weights is None:
        if len(fill) or (not computed and mode.min() < 2):
            raise ValueError("search_segments_cpu: weights are needed to keep or read weights (mode 0 / 1, fill)")
        weights, at, fill_at = _NO_WEIGHTS, np.zeros(len(q_terms), np.int64), _NO_PLACES
    else:
        if weights.dtype != np.float32 or weights.ndim != 1 or not weights.flags.c_contiguous:
            raise ValueError(f"search_segments_cpu: weights must be 1-d contiguous float32, got {weights.dtype} "
                             f"{weights.shape}")
        if (at is None and mode.min(initial=2) < 2) or (len(fill) and fill_at is None):
            raise ValueError("search_segments_cpu: at (and fill_at with fill) place the runs in weights")
        at = _places("at", np.zeros(len(q_terms), np.int64) if at is None else at, q_terms, mode < 2, totals[inv],
                     len(weights))
        fill_at = _places("fill_at", _NO_PLACES if fill_at is None else fill_at, fill, np.ones(len(fill), bool),
                          fill_totals, len(weights))
    out_doc = np.full((nq, k), -1, np.int64)
    out_score = np.zeros((nq, k), np.float32)
    out_n = np.zeros(nq, np.int32)
    if n_docs == 0:
        return out_doc, out_score, out_n
    use = minus is not None
    m = np.ascontiguousarray(minus, np.float32) if use else np.zeros(1, np.float32)
    kind = WEIGHT_VARIANTS[variant]
    idf = np.ascontiguousarray(idf, np.float64)
    k1, delta = float(k1), float(delta)
    with numba_threads(n_threads) as nth:
        if len(fill):
            _fill(table.addr, table.size, base, kd, idf, m, use, kind, k1, delta, fill, fill_at, fill_spans, weights)
        if nq:
            _search(table.addr, table.size, base, kd, idf, m, use, kind, k1, delta, q_ptr, q_terms, q_w, mode, weights,
                    at, spans, inv.astype(np.int64, copy=False), totals, k, min(nq, nth * 4), out_doc, out_score,
                    out_n, fmode, fmask, a_ptr, a_docs)
    return out_doc, out_score, out_n
