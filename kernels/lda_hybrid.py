"""LDA Gibbs sampling with W in EZLDA's hybrid dense/sparse layout (section IV-B, Table I).

CUDA kernels ``lda_*hybrid*`` / ``lda_rebuild_w_dense`` of ``lda.cu`` for cupy input, numba CPU twins
(``_twin_*``) for numpy input, with the contract of :mod:`cutext.kernels.lda` (whose module docstring
describes the state arrays, the counter-based random numbers and the float rules): every function takes
the arrays of one backend and returns arrays of the same backend, and a twin performs the float
operations of its kernel in the same order, so the GPU tests compare draws token for token.

Words are relabelled by frequency; the ``n_dense`` words with more than K tokens keep a dense row of W
(sampled by :func:`cutext.kernels.lda.sample`), the others a sparse (topic, count) row (:class:`HybridW`)
sampled by :func:`sample_hybrid`'s SparseLDA buckets.
"""
from __future__ import annotations

import numba
import numpy as np

import cutext.kernels._numba_cache  # noqa: F401  # before the decorators: it places and stamps their cache
from cutext.kernels import _cuda
from cutext.kernels.backend import array_module, to_host
from cutext.kernels.lda import SOURCE, _find, _twin_sample, _uniform1, rebuild_d

FLAG_X, FLAG_Y, FLAG_R, FLAG_S, FLAG_Z = 4, 5, 6, 7, 8
HYBRID_DOC_C = 4  # a sparse-word token takes the doc-side split when nnz(W[v]) > HYBRID_DOC_C * nnz(D[d])


def _kernel(name):
    """A kernel of ``lda.cu`` on the current device (:func:`cutext.kernels._cuda.kernel`)."""
    return _cuda.kernel(SOURCE, name)


class HybridW:
    """Word-topic counts in EZLDA's hybrid layout (section IV-B, Table I), on one backend.

    Words are relabelled by frequency, so the words with more than K tokens are ``0 .. n_dense - 1``.

    ===============  ==================  ==========================================================
    ``W_dense``      int32 (n_dense, K)  dense rows of the frequent words
    ``w_ptr``        int64 (V_s + 1,)    row offsets of the sparse words ``s = v - n_dense``;
                                         capacity of row s = the word's token count (<= K)
    ``w_topic``      int32 (N_s,)        topics of row s at ``w_ptr[s]``, ascending, ``w_nnz[s]`` of
    ``w_cnt``        int32 (N_s,)        them, counts > 0 (entries past ``w_nnz[s]`` are padding)
    ``w_nnz``        int32 (V_s,)
    ``word_tok``     int64 (N_s,)        word-major token index: positions of row s's tokens at
                                         ``w_ptr[s] .. w_ptr[s+1]`` (the rebuild gathers through it)
    ===============  ==================  ==========================================================

    ``N_s`` = tokens of sparse words, ``V_s = V - n_dense``.
    """

    def __init__(self, n_dense, K, W_dense, w_ptr, w_topic, w_cnt, w_nnz, word_tok):
        self.n_dense, self.K = int(n_dense), int(K)
        self.W_dense, self.w_ptr, self.w_topic, self.w_cnt, self.w_nnz = W_dense, w_ptr, w_topic, w_cnt, w_nnz
        self.word_tok = word_tok

    def nbytes(self) -> dict:
        """Bytes of the layout: ``dense`` (W_dense), ``sparse`` (w_ptr, w_topic, w_cnt, w_nnz), ``index``
        (word_tok, a per-token array like the document inverted index) and ``w`` = dense + sparse."""
        dense = int(self.W_dense.nbytes)
        sparse = int(self.w_ptr.nbytes + self.w_topic.nbytes + self.w_cnt.nbytes + self.w_nnz.nbytes)
        return {"dense": dense, "sparse": sparse, "index": int(self.word_tok.nbytes), "w": dense + sparse}

    def to_dense(self):
        """int32 (V, K) host array (tests, small V only)."""
        h = to_host
        V = self.n_dense + int(self.w_ptr.shape[0]) - 1
        W = np.zeros((V, self.K), dtype=np.int32)
        W[: self.n_dense] = h(self.W_dense)
        t = self.table()
        W[t[0], t[1]] = t[2]
        return W

    def table(self):
        """Nonzeros ``(word int32, topic int32, count int32)`` as host arrays, word-major, topics ascending
        (the order of ``np.nonzero`` on the dense matrix)."""
        h = to_host
        Wd = h(self.W_dense)
        dv, dk = np.nonzero(Wd)
        dc = Wd[dv, dk]
        ptr, nnz = h(self.w_ptr), h(self.w_nnz).astype(np.int64)
        rows = np.repeat(np.arange(nnz.shape[0], dtype=np.int64), nnz)
        offs = np.arange(int(nnz.sum()), dtype=np.int64) - np.repeat(np.cumsum(nnz) - nnz, nnz)
        pos = np.repeat(ptr[:-1], nnz) + offs
        sv = (rows + self.n_dense).astype(np.int32)
        return (np.concatenate([dv.astype(np.int32), sv]),
                np.concatenate([dk.astype(np.int32), h(self.w_topic)[pos].astype(np.int32)]),
                np.concatenate([dc.astype(np.int32), h(self.w_cnt)[pos].astype(np.int32)]))


def hybrid_index(word, word_count, n_dense: int):
    """Row offsets and the word-major token index of the sparse words (host, once per corpus).

    Parameters
    ----------
    word : int32 (N,)
        Token words in chunk order (numpy).
    word_count : int64 (V,)
        Tokens per word.
    n_dense : int

    Returns
    -------
    (w_ptr int64 (V - n_dense + 1,), word_tok int64 (N_s,)), numpy arrays.
    """
    word = np.asarray(word)
    w_ptr = np.zeros(len(word_count) - n_dense + 1, dtype=np.int64)
    np.cumsum(np.asarray(word_count[n_dense:], dtype=np.int64), out=w_ptr[1:])
    order = np.argsort(word, kind="stable")
    word_tok = order[np.asarray(word_count[:n_dense], dtype=np.int64).sum():].astype(np.int64)
    return w_ptr, word_tok


@numba.njit(cache=True)
def _twin_rebuild_w_dense(word, z, n_dense, W):
    for i in range(word.shape[0]):
        v = word[i]
        if v < n_dense:
            W[v, z[i]] += 1


def rebuild_hybrid(word, z, w_ptr, word_tok, n_dense: int, K: int) -> HybridW:
    """Rebuild the hybrid W from the token topics (EZLDA section IV-C).

    Dense rows by integer atomics over the tokens of dense words (``lda_rebuild_w_dense``); sparse rows
    as D rows are (:func:`rebuild_d` over the word-major index: a shared-memory histogram per word when
    K bins fit, else a sort of ``(v - n_dense) * K + z`` keys and a run-length kernel).

    Returns
    -------
    HybridW of the input's backend.
    """
    n = word.shape[0]
    xp = array_module(word)
    Wd = xp.zeros((n_dense, K), dtype=np.int32)
    if xp is np:
        _twin_rebuild_w_dense(word, z, n_dense, Wd)
        row = None  # the CPU rebuild does not read it
    else:
        if n_dense:
            g, b = _cuda.grid(n)
            _kernel("lda_rebuild_w_dense")(g, b, (word, z, np.int64(n), np.int32(K), np.int32(n_dense), Wd))
        row = word - np.int32(n_dense)
    w_topic, w_cnt, w_nnz = rebuild_d(row, z, w_ptr, word_tok, K)
    return HybridW(n_dense, K, Wd, w_ptr, w_topic, w_cnt, w_nnz, word_tok)


@numba.njit(cache=True)
def _twin_hybrid_topics(nk, vbeta, inv, rcum):
    acc = 0.0
    for k in range(nk.shape[0]):
        x = 1.0 / (np.float64(nk[k]) + vbeta)
        inv[k] = x
        acc = acc + x
        rcum[k] = acc


@numba.njit(cache=True, parallel=True)
def _twin_doc_y(doc_ptr, d_topic, d_cnt, d_nnz, inv, ydoc):
    for d in numba.prange(doc_ptr.shape[0] - 1):
        base = doc_ptr[d]
        acc = 0.0
        for j in range(d_nnz[d]):
            acc = acc + np.float64(d_cnt[base + j]) * inv[d_topic[base + j]]
        ydoc[d] = acc


@numba.njit(cache=True, parallel=True)
def _twin_word_z(w_ptr, w_topic, w_cnt, w_nnz, inv, zsum):
    for s in numba.prange(w_nnz.shape[0]):
        wb = w_ptr[s]
        acc = 0.0
        for j in range(w_nnz[s]):
            acc = acc + np.float64(w_cnt[wb + j]) * inv[w_topic[wb + j]]
        zsum[s] = acc


def hybrid_tables(nk, vbeta: float, doc_ptr, d_topic, d_cnt, d_nnz, hw: HybridW) -> dict:
    """Per-pass tables of the sparse-word sampler.

    Returns
    -------
    dict of float64 arrays of the input's backend: ``inv`` (K,) = 1 / (n_k + V beta); ``rcum`` (K,)
    running sums of ``inv`` (sequential from k = 0); ``ydoc`` (D,) = sum over the nonzeros of D[d] (in
    order) of ``D[d][k] inv[k]`` (sequential); ``zsum`` (V_s,) = sum over the nonzeros of the sparse row s
    of ``hw`` (in order) of ``W[v][k] inv[k]`` (sequential; the doc-side split's Z_v).
    """
    K = nk.shape[0]
    n_docs = doc_ptr.shape[0] - 1
    n_sparse = hw.w_nnz.shape[0]
    xp = array_module(nk)
    inv = xp.empty(K, dtype=np.float64)
    rcum = xp.empty(K, dtype=np.float64)
    ydoc = xp.empty(n_docs, dtype=np.float64)
    zsum = xp.empty(n_sparse, dtype=np.float64)
    if xp is np:
        _twin_hybrid_topics(nk, float(vbeta), inv, rcum)
        _twin_doc_y(doc_ptr, d_topic, d_cnt, d_nnz, inv, ydoc)
        _twin_word_z(hw.w_ptr, hw.w_topic, hw.w_cnt, hw.w_nnz, inv, zsum)
    else:
        _kernel("lda_hybrid_topics")((1,), (1,), (nk, np.int32(K), np.float64(vbeta), inv, rcum))
        g, b = _cuda.grid(n_docs)
        _kernel("lda_hybrid_doc_y")(g, b, (doc_ptr, d_topic, d_cnt, d_nnz, np.int32(n_docs), inv, ydoc))
        if n_sparse:
            g, b = _cuda.grid(n_sparse)
            _kernel("lda_hybrid_word_z")(g, b, (hw.w_ptr, hw.w_topic, hw.w_cnt, hw.w_nnz, np.int32(n_sparse), inv,
                                                zsum))
    return {"inv": inv, "rcum": rcum, "ydoc": ydoc, "zsum": zsum}


@numba.njit(inline="always", cache=True)
def _dcount(d_topic, d_cnt, base, nnz, k, merge, p):
    """``lda_dcount``: D[d][k] by binary search, or by a forward merge from ``p``; returns (count, p)."""
    if not merge:
        return _find(d_topic, d_cnt, base, nnz, k), p
    q = p
    while q < nnz and d_topic[base + q] < k:
        q += 1
    if q < nnz and d_topic[base + q] == k:
        return d_cnt[base + q], q
    return 0, q


@numba.njit(inline="always", cache=True)
def _walk_row(topic, cnt, base, n, zs, inv, scale, x):
    """The Zv and Y searches of ``lda_sample_hybrid``: walk a sorted row (topics != zs) with the running sum
    acc of cnt * inv[k]; the first topic with scale * acc > x, else the row's last one."""
    acc = 0.0
    last = -1
    for j in range(n):
        k = topic[base + j]
        if k == zs:
            continue
        acc = acc + np.float64(cnt[base + j]) * inv[k]
        last = k
        if scale * acc > x:
            return k
    return last


@numba.njit(inline="always", cache=True)
def _x_bucket(docside, merge, zs, d_topic, d_cnt, base, nnz, w_topic, w_cnt, wb, wn, inv, alpha, search, x):
    """``lda_hybrid_x``: the X bucket of ``lda_sample_hybrid``, written once for its sum and its search.

    Word side: over W[v]'s nonzeros j (k_j != zs) the running sum of ``(D[d][k_j] + alpha) * (c_j inv[k_j])``;
    doc side: over D[d]'s nonzeros j (k_j != zs, W[v][k_j] > 0) of ``cnt_j * (W[v][k_j] inv[k_j])``.
    Returns ``(sum, pick)``: with ``search`` the walk stops at the first entry whose running sum exceeds x
    (``pick`` = its topic, else the last topic walked, -1 when none); without, it sums every entry (pick -1).
    """
    acc = 0.0
    last = -1
    if docside:
        for j in range(nnz):
            k = d_topic[base + j]
            if k == zs:
                continue
            wk = _find(w_topic, w_cnt, wb, wn, k)
            if wk == 0:
                continue
            acc = acc + np.float64(d_cnt[base + j]) * (np.float64(wk) * inv[k])
            last = k
            if search and acc > x:
                return acc, k
    else:
        mp = 0
        for j in range(wn):
            k = w_topic[wb + j]
            if k == zs:
                continue
            dk, mp = _dcount(d_topic, d_cnt, base, nnz, k, merge, mp)
            acc = acc + (np.float64(dk) + alpha) * (np.float64(w_cnt[wb + j]) * inv[k])
            last = k
            if search and acc > x:
                return acc, k
    return acc, (last if search else -1)


@numba.njit(inline="always", cache=True)  # inlined: a numba call per token with these arrays costs more than it
def _hybrid_one(t, word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz, n_dense, w_ptr, w_topic, w_cnt, w_nnz,
                nk, inv, rcum, ydoc, zsum, K, alpha, beta, vbeta, s_, it_, exclude, doc_c, z_out, flags):
    """One token of ``lda_sample_hybrid`` (a sparse word), the same float operations in the same order."""
    v = word[t]
    d = doc[t]
    zs = z[t] if exclude else -1
    base = doc_ptr[d]
    nnz = d_nnz[d]
    s = v - n_dense
    wb = w_ptr[s]
    wn = w_nnz[s]
    u = _uniform1(s_, it_, np.uint64(keys[t]))
    zw = 0.0
    iz = 0.0
    yown = 0.0
    zown = 0.0
    if zs >= 0:
        dz = _find(d_topic, d_cnt, base, nnz, zs)
        wz = _find(w_topic, w_cnt, wb, wn, zs)
        wadj = (np.float64(wz) - 1.0 + beta) / (np.float64(nk[zs]) - 1.0 + vbeta)
        zw = (np.float64(dz) - 1.0 + alpha) * wadj
        iz = inv[zs]
        yown = np.float64(dz) * iz
        zown = np.float64(wz) * iz
    docside = np.int64(wn) > np.int64(doc_c) * np.int64(nnz)
    merge = 8 * wn >= nnz
    X, _ = _x_bucket(docside, merge, zs, d_topic, d_cnt, base, nnz, w_topic, w_cnt, wb, wn, inv, alpha, False, 0.0)
    Zv = 0.0
    if docside:
        Zv = alpha * (zsum[s] - zown)
    Y = beta * (ydoc[d] - yown)
    R = (alpha * beta) * (rcum[K - 1] - iz)
    tot = zw + X
    tot = tot + Zv
    tot = tot + Y
    tot = tot + R
    x = u * tot
    if x < zw:
        z_out[t] = zs
        flags[t] = 3
        return
    x = x - zw
    if x < X:
        _, pick = _x_bucket(docside, merge, zs, d_topic, d_cnt, base, nnz, w_topic, w_cnt, wb, wn, inv, alpha, True, x)
        z_out[t] = pick
        flags[t] = 7 if docside else 4
        return
    x = x - X
    if x < Zv:
        z_out[t] = _walk_row(w_topic, w_cnt, wb, wn, zs, inv, alpha, x)
        flags[t] = 8
        return
    x = x - Zv
    if x < Y:
        z_out[t] = _walk_row(d_topic, d_cnt, base, nnz, zs, inv, beta, x)
        flags[t] = 5
        return
    y = x - Y
    ab = alpha * beta
    lo = 0
    hi = K - 1
    while lo < hi:
        mid = (lo + hi) >> 1
        c = rcum[mid]
        if zs >= 0 and mid >= zs:
            c = c - iz
        if ab * c > y:
            hi = mid
        else:
            lo = mid + 1
    z_out[t] = lo
    flags[t] = 6


@numba.njit(cache=True, parallel=True)
def _twin_hybrid(word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz, n_dense, w_ptr, w_topic, w_cnt, w_nnz,
                 nk, inv, rcum, ydoc, zsum, K, alpha, beta, vbeta, seed, it, exclude, doc_c, z_out, flags):
    s_ = np.uint64(seed)
    it_ = np.uint64(it)
    n = word.shape[0]
    step = 4096
    for b in numba.prange((n + step - 1) // step):
        for t in range(b * step, min(n, (b + 1) * step)):
            if word[t] >= n_dense:
                _hybrid_one(t, word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz, n_dense, w_ptr, w_topic, w_cnt,
                            w_nnz, nk, inv, rcum, ydoc, zsum, K, alpha, beta, vbeta, s_, it_, exclude, doc_c,
                            z_out, flags)


def sample_hybrid(word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz, hw: HybridW, nk, tables, htables,
                  dense_ranges, *, alpha: float, beta: float, vbeta: float, seed: int, iteration: int,
                  exclude: bool = True, doc_c: int = HYBRID_DOC_C):
    """One Gibbs pass over every token with W in the hybrid layout (EZLDA section IV-B).

    Tokens of dense words (``v < n_dense``; in every chunk the token range ``dense_ranges[c]``) are drawn
    by :func:`sample`'s two-branch sampler (``lda_sample``) against the dense rows.  Tokens of sparse
    words draw from the same conditional ``p(k) ∝ (D[d][k] + alpha)(W[v][k] + beta) / (n_k + V beta)``
    (own topic taken out when ``exclude``, Moon et al. Eq. 1) split into SparseLDA buckets searched in the
    order own topic, X (W[v]'s nonzeros with their D counts), Y (D[d]'s nonzeros times beta inv_k),
    R (alpha beta sum_k inv_k).  A token whose W row is long (``nnz(W[v]) > doc_c * nnz(D[d])``) splits X
    on the doc side instead: S (D[d]'s nonzeros times W[v][k] inv_k, W[v][k] by binary search) and
    Z (alpha sum over W[v]'s nonzeros of W[v][k] inv_k, from the per-word table ``zsum``), searched after
    the own topic and before Y.  ``lda_sample_hybrid`` in ``lda.cu`` defines every float operation.

    Parameters
    ----------
    word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz
        The token list and D (module docstring).
    hw : HybridW
    nk : int64 (K,)
    tables : dict
        :func:`prepare_words` of ``hw.W_dense`` (its rows: the dense words).
    htables : dict
        :func:`hybrid_tables`.
    doc_c : int
        The doc-side rule's constant (tests lower it to make the doc side fire often).
    dense_ranges : list of (int, int)
        Token ranges of dense words (``(chunk_ptr[c], chunk_split[c])``).

    Returns
    -------
    (z_new int32 (N,), flags int8 (N,)); flags 0 / 3 for dense-word tokens as :func:`sample`, and for
    sparse-word tokens 3 = own topic, 4 = X, 5 = Y, 6 = R, 7 = S (doc side), 8 = Z (doc side).
    """
    n = word.shape[0]
    K = hw.K
    nd = hw.n_dense
    w_self = 1.0
    xp = array_module(word)
    z_out = xp.empty(n, dtype=np.int32)
    flags = xp.zeros(n, dtype=np.int8)
    if xp is np:
        for a, b in dense_ranges:
            if b > a:
                _twin_sample(word[a:b], doc[a:b], keys[a:b], z[a:b], doc_ptr, d_topic, d_cnt, d_nnz, hw.W_dense, nk,
                             tables["what"], tables["qcum"], tables["qtot"], tables["top"], tables["topv"], K,
                             float(alpha), float(beta), float(vbeta), w_self, np.uint64(seed), np.uint64(iteration),
                             False, bool(exclude), z_out[a:b], flags[a:b])
        _twin_hybrid(word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz, nd, hw.w_ptr, hw.w_topic, hw.w_cnt,
                     hw.w_nnz, nk, htables["inv"], htables["rcum"], htables["ydoc"], htables["zsum"], K, float(alpha),
                     float(beta), float(vbeta), np.uint64(seed), np.uint64(iteration), bool(exclude), int(doc_c),
                     z_out, flags)
    else:
        for a, b in dense_ranges:
            m = b - a
            if m <= 0:
                continue
            g, bl = _cuda.grid((m + 31) // 32 * 32)
            _kernel("lda_sample")(g, bl, (np.int64(m), word[a:b], doc[a:b], keys[a:b], z[a:b], doc_ptr, d_topic,
                                          d_cnt, d_nnz, hw.W_dense, nk, tables["what"], tables["qcum"],
                                          tables["qtot"], tables["top"], tables["topv"], np.int32(K),
                                          np.float64(alpha), np.float64(beta), np.float64(vbeta),
                                          np.float64(w_self), np.uint64(seed), np.uint64(iteration), np.int32(0),
                                          np.int32(bool(exclude)), z_out[a:b], flags[a:b]))
        g, bl = _cuda.grid(n)
        _kernel("lda_sample_hybrid")(g, bl, (np.int64(n), word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz,
                                             np.int32(nd), hw.w_ptr, hw.w_topic, hw.w_cnt, hw.w_nnz, nk,
                                             htables["inv"], htables["rcum"], htables["ydoc"], htables["zsum"],
                                             np.int32(K), np.float64(alpha), np.float64(beta), np.float64(vbeta),
                                             np.uint64(seed), np.uint64(iteration), np.int32(bool(exclude)),
                                             np.int32(doc_c), z_out, flags))
    return z_out, flags


@numba.njit(cache=True, parallel=True)
def _twin_llpt_hybrid(word, doc, doc_ptr, d_topic, d_cnt, d_nnz, n_dense, what, qtot, w_ptr, w_topic, w_cnt, w_nnz,
                      inv, rcum, K, alpha, beta, out):
    for t in numba.prange(word.shape[0]):
        v = word[t]
        d = doc[t]
        base = doc_ptr[d]
        L = doc_ptr[d + 1] - base
        nnz = d_nnz[d]
        s = 0.0
        if v < n_dense:
            for j in range(nnz):
                s = s + np.float64(d_cnt[base + j]) * np.float64(what[v, d_topic[base + j]])
            q = qtot[v]
        else:
            wb = w_ptr[v - n_dense]
            wn = w_nnz[v - n_dense]
            for j in range(nnz):
                k = d_topic[base + j]
                wk = _find(w_topic, w_cnt, wb, wn, k)
                s = s + np.float64(d_cnt[base + j]) * ((np.float64(wk) + beta) * inv[k])
            q = 0.0
            for j in range(wn):
                q = q + np.float64(w_cnt[wb + j]) * inv[w_topic[wb + j]]
            q = q + beta * rcum[K - 1]
        p = (s + alpha * q) / (np.float64(L) + np.float64(K) * alpha)
        out[t] = np.log2(p)


def log2_likelihood_terms_hybrid(word, doc, doc_ptr, d_topic, d_cnt, d_nnz, hw: HybridW, tables, htables, *,
                                 alpha: float, beta: float):
    """Per-token log2 terms of EZLDA Eq. 5 for the hybrid layout (``lda_llpt_hybrid``).

    Dense words as :func:`log2_likelihood_terms` (float32 What rows); sparse words with
    ``phi[k][v] = (W[v][k] + beta) inv[k]`` in float64 from the sparse row.

    Returns
    -------
    float64 (N,) of the input's backend, log base 2.
    """
    n = word.shape[0]
    K = hw.K
    xp = array_module(word)
    out = xp.empty(n, dtype=np.float64)
    if xp is np:
        _twin_llpt_hybrid(word, doc, doc_ptr, d_topic, d_cnt, d_nnz, hw.n_dense, tables["what"], tables["qtot"],
                          hw.w_ptr, hw.w_topic, hw.w_cnt, hw.w_nnz, htables["inv"], htables["rcum"], K, float(alpha),
                          float(beta), out)
    else:
        g, b = _cuda.grid(n)
        _kernel("lda_llpt_hybrid")(g, b, (np.int64(n), word, doc, doc_ptr, d_topic, d_cnt, d_nnz,
                                          np.int32(hw.n_dense), tables["what"], tables["qtot"], hw.w_ptr,
                                          hw.w_topic, hw.w_cnt, hw.w_nnz, htables["inv"], htables["rcum"],
                                          np.int32(K), np.float64(alpha), np.float64(beta), out))
    return out


__all__ = ["FLAG_R", "FLAG_S", "FLAG_X", "FLAG_Y", "FLAG_Z", "HYBRID_DOC_C", "HybridW", "hybrid_index",
           "hybrid_tables", "log2_likelihood_terms_hybrid", "rebuild_hybrid", "sample_hybrid"]
