"""Host kernels of the segmented index's load (numba): the postings of a segment placed in the merged CSR,
a segment's terms found in the commit's vocabulary, and the BM25 weight of every posting.

:func:`cutext.stages.engines.segments.merge_segments` lays segments end to end: local term ``j`` of a
segment owns the slots ``start[j] : start[j] + df[j]`` of the merged CSR (after the same term's postings of
the earlier segments), and its postings ``offsets[j] : offsets[j + 1]`` go there in order.  On the GPU the
scatter runs on the device (cupy, :func:`cutext.stages.engines.segments._scatter_on_device`); on the host
:func:`place_runs` copies each term's run as one contiguous block, the terms on numba's threads, instead of
a fancy-indexed store per posting.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import prange

import cutext.kernels._numba_cache  # noqa: F401  # before the decorators: it places and stamps their cache

__all__ = ["place_runs", "sorted_term_ids", "marked_term_counts", "drop_docs", "csr_weights", "place_weighted_runs",
           "tf_part_kd", "WEIGHT_VARIANTS"]

# the variants csr_weights computes (cutext.stages.text.bm25.tf_component, in its order of operations)
WEIGHT_VARIANTS = {"lucene": 0, "robertson": 1, "atire": 1, "bm25l": 2, "bm25+": 3}


@numba.njit(parallel=True, nogil=True, cache=True)
def _place_runs(start, offsets, src, add, dst):  # pragma: no cover - numba
    for j in prange(len(start)):
        a = offsets[j]
        s = start[j]
        for i in range(offsets[j + 1] - a):
            dst[s + i] = src[a + i] + add


def place_runs(start: np.ndarray, offsets: np.ndarray, src: np.ndarray, dst: np.ndarray, add: int = 0) -> None:
    """``dst[start[j] + i] = src[offsets[j] + i] + add`` for every run ``j`` and ``i < offsets[j+1] - offsets[j]``.

    Parameters
    ----------
    start : int64 array (m,)
        The first slot of each run in ``dst``; the runs' slots must not overlap (each term owns its slots).
    offsets : int64 array (m + 1,)
        The runs in ``src`` (ascending; ``offsets[-1] <= len(src)``).
    src : 1-d integer array
        The values (doc numbers or tf), cast to ``dst``'s dtype.
    dst : 1-d integer array
        Written in place.
    add : int
        Added to every value (the segment's first global doc id for the doc numbers).

    Raises
    ------
    ValueError
        Arrays of the wrong shape, or runs that do not fit ``src`` or ``dst``.
    """
    start = np.ascontiguousarray(start, np.int64)
    offsets = np.ascontiguousarray(offsets, np.int64)
    if start.ndim != 1 or offsets.shape != (len(start) + 1,) or src.ndim != 1 or dst.ndim != 1:
        raise ValueError(f"place_runs: start (m,), offsets (m + 1,), 1-d src and dst; got {start.shape}, "
                         f"{offsets.shape}, {src.shape}, {dst.shape}")
    if len(start) == 0:
        return
    lengths = np.diff(offsets)
    if lengths.min() < 0 or offsets[0] < 0 or offsets[-1] > len(src) or start.min() < 0 \
            or int((start + lengths).max()) > len(dst):
        raise ValueError("place_runs: runs outside src or dst")
    _place_runs(start, offsets, np.ascontiguousarray(src).astype(dst.dtype, copy=False), dst.dtype.type(add), dst)


@numba.njit(nogil=True, cache=True)
def _less(a_data, a0, a1, b_data, b0, b1):  # pragma: no cover - numba
    """Whether the UTF-8 bytes ``a_data[a0:a1]`` sort before ``b_data[b0:b1]`` (Arrow's string order)."""
    n = min(a1 - a0, b1 - b0)
    for i in range(n):
        x, y = a_data[a0 + i], b_data[b0 + i]
        if x != y:
            return x < y
    return (a1 - a0) < (b1 - b0)


@numba.njit(nogil=True, cache=True)
def _sorted_term_ids(g_off, g_data, l_off, l_data, out):  # pragma: no cover - numba
    i = 0
    n_g = len(g_off) - 1
    for j in range(len(l_off) - 1):
        a0, a1 = l_off[j], l_off[j + 1]
        while i < n_g and _less(g_data, g_off[i], g_off[i + 1], l_data, a0, a1):
            i += 1
        if i < n_g and not _less(l_data, a0, a1, g_data, g_off[i], g_off[i + 1]):
            out[j] = i + 1
        else:
            out[j] = 0


@numba.njit(nogil=True, cache=True)
def _count_marked(doc, first, ends, mask, counts):  # pragma: no cover - numba
    """Add to ``counts[t]`` the postings ``first + i`` of term ``t`` (``ends``: each term's end) whose doc
    ``doc[i]`` is marked; the first ``i`` whose doc is outside ``[0, len(mask))``, or -1."""
    n = len(mask)
    lo, hi = 0, len(ends)
    while lo < hi:  # the term of posting `first`
        mid = (lo + hi) // 2
        if ends[mid] <= first:
            lo = mid + 1
        else:
            hi = mid
    t = lo
    for i in range(len(doc)):
        d = doc[i]
        if d < 0 or d >= n:
            return i
        if mask[d]:
            p = first + i
            while ends[t] <= p:
                t += 1
            counts[t] += 1
    return -1


def marked_term_counts(df: np.ndarray, doc_chunks, mask: np.ndarray) -> tuple:
    """The local terms that the marked documents hold and in how many of them each, from a term-major
    segment's ``df`` and its posting ``doc`` column in chunks: one pass over the postings, no copy of them.

    Parameters
    ----------
    df : integer array (n_terms,)
        Each local term's postings, in the postings' order.
    doc_chunks : sequence of int32 arrays
        The posting ``doc`` column, in consecutive pieces (a Parquet read's chunks) summing to ``df.sum()``.
    mask : bool array (n_docs,)
        The marked documents.

    Returns
    -------
    (int64 array, int64 array)
        The local term ids ascending and, for each, the marked documents holding it.

    Raises
    ------
    ValueError
        Chunks whose lengths do not sum to ``df.sum()``, or a doc number outside ``[0, n_docs)`` (named with
        its posting).
    """
    ends = np.cumsum(np.asarray(df, np.int64))
    total = int(ends[-1]) if len(ends) else 0
    if sum(len(c) for c in doc_chunks) != total:
        raise ValueError(f"{sum(len(c) for c in doc_chunks)} postings, df sums to {total}")
    counts = np.zeros(len(ends), np.int64)
    mask = np.ascontiguousarray(mask, np.bool_)
    first = 0
    for c in doc_chunks:
        c = np.ascontiguousarray(c, np.int32)
        bad = _count_marked(c, first, ends, mask, counts) if len(c) else -1
        if bad >= 0:
            raise ValueError(f"posting {first + bad}: doc number {int(c[bad])} outside [0, {len(mask)})")
        first += len(c)
    local = np.flatnonzero(counts)
    return local.astype(np.int64), counts[local]


@numba.njit(nogil=True, cache=True)
def _drop_docs(doc, tf, df, live, rank, out_doc, out_tf, out_df):  # pragma: no cover - numba
    p = 0
    k = 0
    for t in range(len(df)):
        c = 0
        for _ in range(df[t]):
            d = doc[p]
            if live[d]:
                out_doc[k] = rank[d]
                out_tf[k] = tf[p]
                k += 1
                c += 1
            p += 1
        out_df[t] = c
    return k


def drop_docs(doc: np.ndarray, tf: np.ndarray, df: np.ndarray, live: np.ndarray) -> tuple:
    """A term-major segment's postings without those of the documents not ``live``, the live documents
    renumbered in order: one pass, no per-posting index arrays.

    Parameters
    ----------
    doc, tf : integer arrays (n_postings,)
        The postings' local doc numbers (in ``[0, len(live))``, checked by the segment's read) and tf.
    df : integer array (n_terms,)
        Each term's postings, summing to ``n_postings``.
    live : bool array (n_docs,)

    Returns
    -------
    (doc, tf, df)
        int32 (kept,), ``tf``'s dtype (kept,), int64 (n_terms,): the kept postings, each term's count of them
        (0: no live document holds it).

    Raises
    ------
    ValueError
        ``doc``, ``tf`` and ``df`` that disagree in length.
    """
    df = np.asarray(df, np.int64)
    if len(doc) != len(tf) or int(df.sum()) != len(doc):
        raise ValueError(f"drop_docs: {len(doc)} doc numbers, {len(tf)} tf and df summing to {int(df.sum())}")
    live = np.ascontiguousarray(live, np.bool_)
    rank = (np.cumsum(live, dtype=np.int64) - 1).astype(np.int32)
    out_doc, out_tf, out_df = np.empty(len(doc), np.int32), np.empty(len(tf), tf.dtype), np.empty(len(df), np.int64)
    k = _drop_docs(np.ascontiguousarray(doc), np.ascontiguousarray(tf), df, live, rank, out_doc, out_tf, out_df)
    return out_doc[:k], out_tf[:k], out_df


@numba.njit(nogil=True, cache=True)
def _sparse_term_ids(g_off, g_data, l_off, l_data, out):  # pragma: no cover - numba
    lo = 0
    n_g = len(g_off) - 1
    for j in range(len(l_off) - 1):
        a0, a1 = l_off[j], l_off[j + 1]
        hi = n_g
        while lo < hi:  # the first vocabulary term not below term j: after the one term j - 1 found
            mid = (lo + hi) // 2
            if _less(g_data, g_off[mid], g_off[mid + 1], l_data, a0, a1):
                lo = mid + 1
            else:
                hi = mid
        if lo < n_g and not _less(l_data, a0, a1, g_data, g_off[lo], g_off[lo + 1]):
            out[j] = lo + 1
        else:
            out[j] = 0


def _utf8_buffers(terms):
    """(int64 offsets (n + 1,), uint8 bytes) of a pyarrow string array (any offset width, sliced or not)."""
    import pyarrow as pa

    terms = terms.combine_chunks() if isinstance(terms, pa.ChunkedArray) else terms
    terms = terms.cast(pa.large_string())
    if terms.null_count:
        raise ValueError("sorted_term_ids: terms must not be null")
    bufs = terms.buffers()
    off = np.frombuffer(bufs[1], np.int64, len(terms) + 1, terms.offset * 8) if len(terms) else np.zeros(1, np.int64)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return np.ascontiguousarray(off), data


def sorted_term_ids(vocab, terms) -> np.ndarray:
    """The global term id (``1 + position in vocab``) of each of ``terms``, 0 for a term not in ``vocab``.

    One merge pass over two arrays sorted by UTF-8 bytes (Arrow's order, the order segments and commits
    keep their terms in): O(len(vocab) + len(terms)) byte comparisons, no hash table; a few terms (a
    deletion's) are binary-searched instead, O(len(terms) log len(vocab)).

    Parameters
    ----------
    vocab : pyarrow string array, shape (V,)
        Strictly ascending by UTF-8 bytes.
    terms : pyarrow string array, shape (n,)
        Strictly ascending by UTF-8 bytes.

    Returns
    -------
    numpy int32 array, shape (n,)

    Raises
    ------
    ValueError
        Null terms.
    """
    g_off, g_data = _utf8_buffers(vocab)
    l_off, l_data = _utf8_buffers(terms)
    out = np.empty(len(l_off) - 1, np.int32)
    if len(out) * 32 < len(g_off) - 1:
        _sparse_term_ids(g_off, g_data, l_off, l_data, out)
    elif len(out):
        _sorted_term_ids(g_off, g_data, l_off, l_data, out)
    return out


@numba.njit(nogil=True, cache=True, inline="always")
def tf_part_kd(f, kd, kind, k1, delta):  # pragma: no cover - numba
    """cutext.stages.text.bm25.tf_component of one posting, its operations in their order (float64), given the
    document's length factor ``kd`` = ``k1 * norm`` (bm25l, ``kind`` 2: ``norm``), the one product of the
    formula that depends on the document alone (the query-time engine keeps it per document)."""
    if kind == 0:
        return f / (kd + f)
    if kind == 1:
        return (k1 + 1.0) * f / (kd + f)
    if kind == 2:
        q = f / kd
        return (k1 + 1.0) * (q + delta) / (k1 + q + delta)
    return (k1 + 1.0) * f / (kd + f) + delta


@numba.njit(nogil=True, cache=True)
def _tf_part(f, norm, kind, k1, delta):  # pragma: no cover - numba
    """:func:`tf_part_kd` of a document of length norm ``norm``."""
    return tf_part_kd(f, norm if kind == 2 else k1 * norm, kind, k1, delta)


def _weight_setup(who: str, variant: str, avgdl: float, minus) -> tuple:
    """(variant code, float32 minus or a dummy, whether to subtract) of the weight kernels, the variant and
    avgdl checked (ValueError naming ``who``)."""
    if variant not in WEIGHT_VARIANTS:
        raise ValueError(f"{who}: unknown variant {variant!r}; one of {sorted(WEIGHT_VARIANTS)}")
    if not avgdl > 0:
        raise ValueError(f"{who}: avgdl must be > 0, got {avgdl}")
    use = minus is not None
    return WEIGHT_VARIANTS[variant], np.ascontiguousarray(minus, np.float32) if use else np.zeros(1, np.float32), use


@numba.njit(parallel=True, nogil=True, cache=True)
def _place_weighted(start, offsets, ids, doc, tf, lengths, base, idf, minus, use_minus, avgdl, kind, k1, b, delta,
                    doc_out, data_out):  # pragma: no cover - numba
    one_b = 1.0 - b
    for j in prange(len(start)):
        g = ids[j]
        w_t = idf[g]
        m = minus[g] if use_minus else np.float32(0.0)
        a = offsets[j]
        s = start[j]
        for i in range(offsets[j + 1] - a):
            d = doc[a + i]
            norm = one_b + b * (np.float64(lengths[d]) / avgdl)
            w = np.float32(w_t * _tf_part(np.float64(tf[a + i]), norm, kind, k1, delta))
            doc_out[s + i] = d + base
            data_out[s + i] = w - m if use_minus else w


def place_weighted_runs(start, offsets, ids, doc, tf, lengths, base: int, idf, avgdl: float, variant: str, k1: float,
                        b: float, delta: float, doc_out, data_out, minus=None) -> None:
    """One segment's postings placed in a merged term-major CSR and weighted in the same pass: for local term
    ``j`` (global id ``ids[j]``) and its ``i``-th posting, ``doc_out[start[j] + i] = doc + base`` and
    ``data_out[start[j] + i]`` = the posting's float32 BM25 weight (as :func:`csr_weights`: the bits of
    :mod:`cutext.stages.text.bm25`'s numpy formulas), ``minus[ids[j]]`` subtracted.

    Parameters
    ----------
    start : int64 array (m,)
        The first slot of each local term's run in the merged arrays (runs do not overlap).
    offsets : int64 array (m + 1,)
        The segment's postings of local term ``j`` are ``offsets[j]:offsets[j + 1]``.
    ids : integer array (m,)
        Global term id of each local term (indexes ``idf`` and ``minus``).
    doc, tf : integer arrays (n_postings,)
        The segment's local doc numbers and term frequencies.
    lengths : integer array (n_docs,)
        The segment's document lengths (local doc order).
    base : int
        The segment's first global doc id.
    idf : float64 array (V + 1,)
    avgdl, variant, k1, b, delta
        As :func:`csr_weights`.
    doc_out : int32 or int64 array, data_out : float32 array
        The merged CSR's doc ids and weights, written in place.
    minus : float32 array (V + 1,), optional

    Raises
    ------
    ValueError
        An unknown variant, ``avgdl <= 0`` or mismatched shapes.
    """
    kind, m, use = _weight_setup("place_weighted_runs", variant, avgdl, minus)
    start = np.ascontiguousarray(start, np.int64)
    offsets = np.ascontiguousarray(offsets, np.int64)
    if offsets.shape != (len(start) + 1,) or len(ids) != len(start) or len(doc) != len(tf) \
            or (len(start) and offsets[-1] > len(doc)):
        raise ValueError(f"place_weighted_runs: start {start.shape}, offsets {offsets.shape}, ids {len(ids)}, "
                         f"doc {len(doc)}, tf {len(tf)}")
    if len(start) == 0:
        return
    _place_weighted(start, offsets, np.ascontiguousarray(ids), doc, tf, lengths, doc_out.dtype.type(base),
                    np.ascontiguousarray(idf, np.float64), m, use, float(avgdl), kind, float(k1),
                    float(b), float(delta), doc_out, data_out)


@numba.njit(parallel=True, nogil=True, cache=True)
def _csr_weights(indptr, doc, tf, lengths, idf, minus, use_minus, avgdl, kind, k1, b, delta, out):  # pragma: no cover
    one_b = 1.0 - b
    for t in prange(len(indptr) - 1):
        w_t = idf[t]
        m = minus[t] if use_minus else np.float32(0.0)
        for p in range(indptr[t], indptr[t + 1]):
            norm = one_b + b * (np.float64(lengths[doc[p]]) / avgdl)
            w = np.float32(w_t * _tf_part(np.float64(tf[p]), norm, kind, k1, delta))
            out[p] = w - m if use_minus else w


def csr_weights(indptr, doc, tf, lengths, idf, avgdl: float, variant: str, k1: float, b: float, delta: float,
                minus=None) -> np.ndarray:
    """float32 BM25 weight of every posting of a term-major CSR, the terms on numba's threads.

    The operations of :func:`cutext.stages.text.bm25.tf_component` times ``idf[t]`` in float64, in their
    order, then rounded to float32 (``minus[t]`` subtracted in float32): the bits of the numpy formulas
    (Robertson and Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", Eq. 3.15; the
    variants of Kamphuis et al. 2020, as :mod:`cutext.stages.text.bm25`), at memory speed.

    Parameters
    ----------
    indptr : int64 array, shape (V + 2,)
        Row ``t``'s postings are ``indptr[t]:indptr[t + 1]``.
    doc, tf : integer arrays, shape (n_postings,)
    lengths : integer array, shape (N,)
        Tokens of each document.
    idf : float64 array, shape (V + 1,)
    avgdl : float
        Mean document length (> 0).
    variant : {"lucene", "robertson", "atire", "bm25l", "bm25+"}
    k1, b, delta : float
    minus : float32 array, shape (V + 1,), optional
        Subtracted from each posting's weight (the ``w - w0`` of bm25l and bm25+).

    Returns
    -------
    numpy float32 array, shape (n_postings,)

    Raises
    ------
    ValueError
        An unknown variant, ``avgdl <= 0``, or arrays of mismatched shapes.
    """
    kind, m, use = _weight_setup("csr_weights", variant, avgdl, minus)
    indptr = np.ascontiguousarray(indptr, np.int64)
    idf = np.ascontiguousarray(idf, np.float64)
    if len(idf) != len(indptr) - 1 or len(doc) != len(tf) or (len(indptr) and indptr[-1] != len(doc)):
        raise ValueError(f"csr_weights: indptr {indptr.shape}, idf {idf.shape}, doc {len(doc)}, tf {len(tf)}")
    out = np.empty(len(doc), np.float32)
    _csr_weights(indptr, doc, tf, lengths, idf, m, use, float(avgdl), kind, float(k1), float(b),
                 float(delta), out)
    return out
