"""LDA Gibbs sampling kernels: CUDA (``lda.cu``) for cupy input, numba CPU twins for numpy input.

Every function here takes its arrays from one backend and returns arrays of the same backend; the
CPU twin is the CPU backend *and* the oracle of the GPU tests, which compare draws token for token.

State (arrays of one backend; ``N`` tokens, ``D`` documents, ``V`` words, ``K`` topics):

==============  =============  ==========================================================
``word``        int32 (N,)     word id of every token (tokens in chunk order, sorted by word)
``doc``         int32 (N,)     document id of every token
``keys``        int64 (N,)     the token's position in document-major order: the RNG counter
``z``           int32 (N,)     topic of every token
``doc_ptr``     int64 (D+1,)   document-major token offsets (CSR of the inverted index)
``doc_tok``     int64 (N,)     token positions of every document (EZLDA Fig. 5)
``d_topic``     int32 (N,)     D in padded CSR: row d at ``doc_ptr[d]``, ``d_nnz[d]`` entries,
``d_cnt``       int32 (N,)     topics ascending, counts > 0
``d_nnz``       int32 (D,)
``W``           int32 (V, K)   word-topic counts
``nk``          int64 (K,)     topic totals (column sums of W)
==============  =============  ==========================================================

Sampling semantics: one pass draws a topic for *every* token against the counts of the previous
pass (EZLDA: W and D are rebuilt from the token list after sampling), so tokens are independent
within a pass and the result does not depend on thread scheduling.  Random numbers come from a
counter-based generator, ``uniform(seed, iteration, key)`` = splitmix64 applied three times to
(seed, iteration, token key), top 53 bits / 2^53, so a GPU thread and the CPU loop draw the same
number for the same token.  Float arithmetic is IEEE float64 with float32 tables (the sparse samplers'
lane sums of D-row entries in float32), in the same order on both sides (CUDA compiled with
``--fmad=false``).

Every public function validates its input, allocates its outputs once with the input's array module
(:func:`cutext.kernels.backend.array_module`) and branches only at the launch: the numba twin
``_twin_<name>`` on numpy, the kernel of ``lda.cu`` (loaded by :mod:`cutext.kernels._cuda`) on cupy.
The sampler for W in the hybrid dense/sparse layout is :mod:`cutext.kernels.lda_hybrid`.
"""
from __future__ import annotations

import numba
import numpy as np

import cutext.kernels._numba_cache  # noqa: F401  # before the decorators: it places and stamps their cache
from cutext.kernels import _cuda
from cutext.kernels.backend import array_module

_GOLD = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
_TWO_M53 = 1.1102230246251565404236316680908203125e-16

FLAG_SQ, FLAG_MAX, FLAG_SKIP, FLAG_OWN = 0, 1, 2, 3
THREADS = _cuda.THREADS
HIST_BYTES = 48 * 1024  # lda_rebuild_d_hist: K + THREADS int32 bins must fit this shared memory
SOURCE = "lda.cu"


def _kernel(name):
    """A kernel of ``lda.cu`` on the current device (:func:`cutext.kernels._cuda.kernel`)."""
    return _cuda.kernel(SOURCE, name)



# ----------------------------------------------------------------------------- random numbers

@numba.njit(inline="always", cache=True)
def _splitmix(x):
    x = x + _GOLD
    x = (x ^ (x >> _S30)) * _M1
    x = (x ^ (x >> _S27)) * _M2
    return x ^ (x >> _S31)


@numba.njit(inline="always", cache=True)
def _uniform1(seed, it, key):
    h = _splitmix(_splitmix(_splitmix(seed) ^ it) ^ key)
    return np.float64(h >> _S11) * _TWO_M53


@numba.njit(cache=True, parallel=True)
def _twin_uniform(seed, it, keys, out):
    s = np.uint64(seed)
    i_ = np.uint64(it)
    for i in numba.prange(keys.shape[0]):
        out[i] = _uniform1(s, i_, np.uint64(keys[i]))


def uniform(seed: int, iteration: int, keys):
    """Counter-based uniform numbers in [0, 1): one per key, identical on CPU and GPU.

    Parameters
    ----------
    seed, iteration : int
        Non-negative, < 2**64.
    keys : numpy or cupy int64 array, shape (n,)

    Returns
    -------
    float64 array (n,) of the input's backend: splitmix64(splitmix64(splitmix64(seed) ^ iteration)
    ^ key) >> 11, times 2**-53.
    """
    xp = array_module(keys)
    out = xp.empty(keys.shape[0], dtype=np.float64)
    if xp is np:
        _twin_uniform(np.uint64(seed), np.uint64(iteration), np.ascontiguousarray(keys, dtype=np.int64), out)
    else:
        g, b = _cuda.grid(keys.shape[0])
        _kernel("lda_uniform_kernel")(g, b, (np.uint64(seed), np.uint64(iteration), keys,
                                             np.int64(keys.shape[0]), out))
    return out


def uniform_reference(seed: int, iteration: int, key: int) -> float:
    """Pure-Python definition of :func:`uniform` for one key (the tests' oracle)."""
    mask = (1 << 64) - 1

    def mix(x):
        x = (x + 0x9E3779B97F4A7C15) & mask
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & mask
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & mask
        return x ^ (x >> 31)

    h = mix(mix(mix(seed & mask) ^ (iteration & mask)) ^ (key & mask))
    return (h >> 11) * 2.0 ** -53


# ----------------------------------------------------------------------------- initialisation

@numba.njit(cache=True, parallel=True)
def _twin_init(seed, keys, K, z):
    s = np.uint64(seed)
    zero = np.uint64(0)
    for i in numba.prange(keys.shape[0]):
        u = _uniform1(s, zero, np.uint64(keys[i]))
        k = np.int32(u * np.float64(K))
        if k >= K:
            k = K - 1
        z[i] = k


def init_topics(seed: int, keys, K: int):
    """Initial topics ``floor(uniform(seed, 0, key) * K)``, int32 (n,), same backend as ``keys``."""
    xp = array_module(keys)
    z = xp.empty(keys.shape[0], dtype=np.int32)
    if xp is np:
        _twin_init(np.uint64(seed), keys, K, z)
    else:
        g, b = _cuda.grid(keys.shape[0])
        _kernel("lda_init_topics")(g, b, (np.uint64(seed), keys, np.int64(keys.shape[0]), np.int32(K), z))
    return z


# ----------------------------------------------------------------------------- count rebuild

@numba.njit(cache=True)
def _twin_rebuild_w(word, z, W):
    for i in range(word.shape[0]):
        W[word[i], z[i]] += 1


@numba.njit(cache=True, parallel=True)
def _twin_rebuild_d(doc_ptr, doc_tok, z, d_topic, d_cnt, d_nnz):
    n_docs = doc_ptr.shape[0] - 1
    for d in numba.prange(n_docs):
        b = doc_ptr[d]
        e = doc_ptr[d + 1]
        zs = np.empty(e - b, dtype=np.int32)
        for i in range(b, e):
            zs[i - b] = z[doc_tok[i]]
        zs.sort()
        nnz = 0
        i = 0
        m = e - b
        while i < m:
            k = zs[i]
            c = 0
            while i < m and zs[i] == k:
                c += 1
                i += 1
            d_topic[b + nnz] = k
            d_cnt[b + nnz] = c
            nnz += 1
        d_nnz[d] = nnz


def rebuild_counts(word, doc, z, doc_ptr, doc_tok, V: int, K: int):
    """Rebuild W and D from the token list (EZLDA section IV-C).

    On the GPU, W is rebuilt with integer atomics; D with one block per document counting its topics
    in a shared-memory histogram when ``K`` bins fit (``lda_rebuild_d_hist``), else by sorting
    ``doc * K + z`` keys and run-length encoding them (``lda_rebuild_d``).  Both give the same rows.

    Returns
    -------
    (W int32 (V, K), nk int64 (K,), d_topic int32 (N,), d_cnt int32 (N,), d_nnz int32 (D,)) of the
    input's backend; D in the padded CSR described in the module docstring.
    """
    n = word.shape[0]
    xp = array_module(word)
    W = xp.zeros((V, K), dtype=np.int32)
    if xp is np:
        _twin_rebuild_w(word, z, W)
    else:
        g, b = _cuda.grid(n)
        _kernel("lda_rebuild_w")(g, b, (word, z, np.int64(n), np.int32(K), W))
    d_topic, d_cnt, d_nnz = rebuild_d(doc, z, doc_ptr, doc_tok, K)
    nk = W.sum(axis=0, dtype=np.int64)
    return W, nk, d_topic, d_cnt, d_nnz


def rebuild_d(doc, z, doc_ptr, doc_tok, K: int):
    """D in padded CSR from the token topics (the D part of :func:`rebuild_counts`).

    Also rebuilds the sparse W rows of the hybrid layout: pass the word-major ``w_ptr`` / ``word_tok``
    as ``doc_ptr`` / ``doc_tok`` and ``word - n_dense`` as ``doc``.

    Returns
    -------
    (d_topic int32 (N,), d_cnt int32 (N,), d_nnz int32 (D,)) of the input's backend.
    """
    n = doc_tok.shape[0]
    n_docs = doc_ptr.shape[0] - 1
    xp = array_module(doc_tok)
    d_topic = xp.zeros(n, dtype=np.int32)
    d_cnt = xp.zeros(n, dtype=np.int32)
    d_nnz = xp.zeros(n_docs, dtype=np.int32)
    if xp is np:
        _twin_rebuild_d(doc_ptr, doc_tok, z, d_topic, d_cnt, d_nnz)
    elif (K + THREADS) * 4 <= HIST_BYTES:
        if n_docs:
            _kernel("lda_rebuild_d_hist")((n_docs,), (THREADS,), (doc_ptr, doc_tok, z, np.int32(n_docs),
                                                                  np.int32(K), d_topic, d_cnt, d_nnz),
                                          shared_mem=(K + THREADS) * 4)
    else:
        keys = doc.astype(np.int64) * K + z.astype(np.int64)
        keys = xp.sort(keys[doc_tok])
        g, b = _cuda.grid(n_docs)
        _kernel("lda_rebuild_d")(g, b, (doc_ptr, keys, np.int32(n_docs), np.int32(K), d_topic, d_cnt, d_nnz))
    return d_topic, d_cnt, d_nnz


# ----------------------------------------------------------------------------- per-word tables

@numba.njit(cache=True, parallel=True)
def _twin_prepare(W, nk, beta, vbeta, what, qcum, qtot, top, topv):
    V, K = W.shape
    for v in numba.prange(V):
        acc = 0.0
        t1 = np.float32(-1.0)
        t2 = np.float32(-1.0)
        t3 = np.float32(-1.0)
        k1 = -1
        k2 = -1
        k3 = -1
        for k in range(K):
            num = np.float64(W[v, k]) + beta
            den = np.float64(nk[k]) + vbeta
            w = np.float32(num / den)
            what[v, k] = w
            acc = acc + np.float64(w)
            qcum[v, k] = np.float32(acc)
            if w > t1:
                t3 = t2
                k3 = k2
                t2 = t1
                k2 = k1
                t1 = w
                k1 = k
            elif w > t2:
                t3 = t2
                k3 = k2
                t2 = w
                k2 = k
            elif w > t3:
                t3 = w
                k3 = k
        qtot[v] = acc
        top[v, 0] = k1
        top[v, 1] = k2
        topv[v, 0] = t1
        topv[v, 1] = t2 if k2 >= 0 else np.float32(0.0)
        topv[v, 2] = t3 if k3 >= 0 else np.float32(0.0)


def prepare_words(W, nk, beta: float, vbeta: float):
    """Per-word tables for sampling: What (EZLDA Eq. 1 part 2), its running sums, top-3 topics.

    Parameters
    ----------
    W : int32 (V, K);  nk : int64 (K,)
    beta : float
    vbeta : float
        ``V * beta`` (V = vocabulary size of the model).

    Returns
    -------
    dict of arrays of the input's backend: ``what`` float32 (V, K) = float32((W + beta) / (nk + vbeta))
    computed in float64; ``qcum`` float32 (V, K) running sum of what along k (float64 accumulator,
    rounded); ``qtot`` float64 (V,) the sum; ``top`` int32 (V, 2) the two most probable topics
    (K1, K2 of Eq. 7; the first index wins ties); ``topv`` float32 (V, 3) the three largest values.
    """
    V, K = W.shape
    xp = array_module(W)
    what = xp.empty((V, K), dtype=np.float32)
    qcum = xp.empty((V, K), dtype=np.float32)
    qtot = xp.empty(V, dtype=np.float64)
    top = xp.empty((V, 2), dtype=np.int32)
    topv = xp.empty((V, 3), dtype=np.float32)
    if xp is np:
        _twin_prepare(W, nk, float(beta), float(vbeta), what, qcum, qtot, top, topv)
    else:
        g, b = _cuda.grid(V)
        _kernel("lda_prepare_words")(g, b, (W, nk, np.int32(V), np.int32(K), np.float64(beta), np.float64(vbeta),
                                            what, qcum, qtot, top, topv))
    return {"what": what, "qcum": qcum, "qtot": qtot, "top": top, "topv": topv}


# ----------------------------------------------------------------------------- sampling

@numba.njit(inline="always", cache=True)
def _pos(d_topic, base, nnz, k):
    """Position of topic k in the sorted row d_topic[base : base + nnz], or -1 (binary search)."""
    lo = 0
    hi = nnz
    while lo < hi:
        mid = (lo + hi) >> 1
        if d_topic[base + mid] < k:
            lo = mid + 1
        else:
            hi = mid
    if lo < nnz and d_topic[base + lo] == k:
        return lo
    return -1


@numba.njit(inline="always", cache=True)
def _find(d_topic, d_cnt, base, nnz, k):
    """Count of topic k in the row (0 when absent)."""
    p = _pos(d_topic, base, nnz, k)
    return d_cnt[base + p] if p >= 0 else 0


@numba.njit(inline="always", cache=True)
def _ks_step(src, dst, off):
    for ln in range(off):
        dst[ln] = src[ln]
    for ln in range(off, 32):
        dst[ln] = src[ln - off] + src[ln]


@numba.njit(inline="always", cache=True)
def _scan_prefix(x, tmp):
    """In place on the 32 lanes x: the inclusive Kogge-Stone scan of ``lda_warp_scan`` (lane l receives
    old[l - off] + old[l] for off = 1, 2, 4, 8, 16).  Ping-pong between x and tmp, so that every step
    vectorizes."""
    _ks_step(x, tmp, 1)
    _ks_step(tmp, x, 2)
    _ks_step(x, tmp, 4)
    _ks_step(tmp, x, 8)
    _ks_step(x, tmp, 16)
    for ln in range(32):
        x[ln] = tmp[ln]


@numba.njit(cache=True, parallel=True)
def _twin_sample(word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz, W, nk, what, qcum, qtot, top, topv,
                 K, alpha, beta, vbeta, w_self, seed, it, three, exclude, z_out, flags):
    """The twin of ``lda_sample`` / ``lda_sample_doc``: every token's draw with the kernels' float operations in
    their order (kernels/lda.cu, ``lda_sample_warp``).  ``lsum`` holds the 32 lane sums (float32, K1 excluded)
    of the (word, document) ``(pv, pd)`` of an earlier token, reused when a token has the same pair; ``incl``
    their Kogge-Stone scan, ``tmp`` its scratch.  (One loop body, not a function per token: numba's call of a
    function with twenty array arguments cost more than the sampling.)"""
    s_ = np.uint64(seed)
    it_ = np.uint64(it)
    n = word.shape[0]
    step = 4096
    for b in numba.prange((n + step - 1) // step):
        tmp = np.empty(32, dtype=np.float64)
        incl = np.empty(32, dtype=np.float64)
        lsum = np.zeros(32, dtype=np.float32)
        pv = -1
        pd = -1
        for t in range(b * step, min(n, (b + 1) * step)):
            v = word[t]
            d = doc[t]
            zo = z[t]
            base = doc_ptr[d]
            L = np.int64(doc_ptr[d + 1] - base)
            nnz = d_nnz[d]
            u = _uniform1(s_, it_, np.uint64(keys[t]))
            K1 = -1
            K2 = -1
            if three:
                K1 = top[v, 0]
                K2 = top[v, 1]
            zs = zo if (exclude and zo != K1) else -1
            p1 = _pos(d_topic, base, nnz, K1) if K1 >= 0 else -1
            p2 = _pos(d_topic, base, nnz, K2) if K2 >= 0 else -1
            pz = _pos(d_topic, base, nnz, zs) if zs >= 0 else -1
            a1d = 0.0
            M = 0.0
            if three:
                b1 = d_cnt[base + p1] if p1 >= 0 else 0
                a1d = np.float64(topv[v, 0])
                if exclude and zo == K1:
                    wadj = (np.float64(W[v, K1]) - w_self + beta) / (np.float64(nk[K1]) - w_self + vbeta)
                    M = (np.float64(b1) - 1.0 + alpha) * wadj
                else:
                    M = (np.float64(b1) + alpha) * a1d
                b2 = d_cnt[base + p2] if p2 >= 0 else 0
                a2d = np.float64(topv[v, 1])
                a3d = np.float64(topv[v, 2])
                rest = np.float64(L - b1 - b2)
                sest = a2d * np.float64(b2) + a3d * rest
                qb = alpha * (qtot[v] - a1d)
                tt = M + sest
                tt = tt + qb
                if u * tt < M:
                    z_out[t] = K1
                    flags[t] = 2
                    continue
            zw = 0.0
            wzs = 0.0
            szs = 0.0
            if zs >= 0:
                dz = d_cnt[base + pz] if pz >= 0 else 0
                wadj = (np.float64(W[v, zs]) - w_self + beta) / (np.float64(nk[zs]) - w_self + vbeta)
                zw = (np.float64(dz) - 1.0 + alpha) * wadj
                wzs = np.float64(what[v, zs])
                szs = np.float64(dz) * wzs
            q = qtot[v]
            if K1 >= 0:
                q = q - a1d
            if zs >= 0:
                q = q - wzs
            Q = alpha * q
            if v != pv or d != pd:
                for ln in range(32):
                    lsum[ln] = np.float32(0.0)
                for j in range(nnz):
                    k = d_topic[base + j]
                    if k == K1:
                        continue
                    lsum[j & 31] = lsum[j & 31] + np.float32(d_cnt[base + j]) * what[v, k]
                pv = v
                pd = d
            lz = pz & 31 if pz >= 0 else -1
            for ln in range(32):
                incl[ln] = np.float64(lsum[ln])
            if lz >= 0:
                incl[lz] = incl[lz] - szs
            ladj = incl[lz] if lz >= 0 else 0.0  # the own topic's lane value after the subtraction
            _scan_prefix(incl, tmp)
            s = incl[31]
            tot = M + zw
            tot = tot + s
            tot = tot + Q
            x = u * tot
            if x < M:
                z_out[t] = K1
                flags[t] = 1
                continue
            x = x - M
            if x < zw:
                z_out[t] = zs
                flags[t] = 3
                continue
            x = x - zw
            flags[t] = 0
            if x < s:
                Ls = -1
                for ln in range(32):
                    a = ladj if ln == lz else np.float64(lsum[ln])
                    if incl[ln] > x and a > 0.0:
                        Ls = ln
                        break
                if Ls < 0:
                    for ln in range(31, -1, -1):
                        a = ladj if ln == lz else np.float64(lsum[ln])
                        if a > 0.0:
                            Ls = ln
                            break
                # walk lane Ls's entries j = Ls, Ls + 32, ... in order, their float values added to acc
                carry = incl[Ls - 1] if Ls > 0 else 0.0
                acc = np.float32(0.0)
                last = -1
                pick = -1
                for j in range(Ls, nnz, 32):
                    k = d_topic[base + j]
                    if k == K1 or k == zs:
                        continue
                    val = np.float32(d_cnt[base + j]) * what[v, k]
                    acc = acc + val
                    if val > 0.0:
                        last = k
                        if carry + np.float64(acc) > x:
                            pick = k
                            break
                if pick < 0 and last < 0:  # lane Ls held only excluded entries (its sum a rounding residue)
                    for j in range(nnz - 1, -1, -1):  # the row's last drawable entry
                        k = d_topic[base + j]
                        if k != K1 and k != zs and np.float32(d_cnt[base + j]) * what[v, k] > 0.0:
                            last = k
                            break
                if pick >= 0 or last >= 0:
                    z_out[t] = pick if pick >= 0 else last
                    continue
                x = s  # no drawable entry at all: the smoothing bucket's first topic
            y = x - s
            lo = 0
            hi = K - 1
            while lo < hi:
                mid = (lo + hi) >> 1
                c = np.float64(qcum[v, mid])
                if K1 >= 0 and mid >= K1:
                    c = c - a1d
                if zs >= 0 and mid >= zs:
                    c = c - wzs
                if alpha * c > y:
                    hi = mid
                else:
                    lo = mid + 1
            z_out[t] = lo


ORDERS = ("word", "doc")
DOC_CAP = 768  # D-row entries a warp of lda_sample_doc keeps in shared memory: 8 warps x 2 x 768 int32 = 48 KiB
DOC_DEFINES: tuple = ()  # extra -D switches of lda_sample_doc's build (benchmarks: "LDA_UNROLL=8", ...)


def sample(word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz, W, nk, tables, *, alpha: float, beta: float,
           vbeta: float, seed: int, iteration: int, three: bool = False, exclude: bool = True,
           fixed_w: bool = False, order: str = "word", doc_tok=None, doc_cap: int = DOC_CAP):
    """One sparsity-aware Gibbs pass over tokens (EZLDA Eq. 1-4; three-branch Eq. 6-10, g = 2).

    Every token draws from ``p(k) ∝ (D[d][k] + alpha) (W[v][k] + beta) / (n_k + V beta)`` with the
    counts of the previous pass.  The draw splits ``p`` into branches searched in this order: the
    max topic ``K1`` of ``What[v]`` (three-branch only, ``M`` of Eq. 8), the token's own topic (when
    ``exclude``: its counts minus the token itself, as collapsed Gibbs sampling does, Moon et al.
    Eq. 1), ``S`` = sum over the nonzeros of ``D[d]`` of ``D[d][k] What[v][k]`` (a linear prefix
    search over the sparse row), and ``Q = alpha sum_k What[v][k]`` (a binary search of the running
    sums).  Three-branch sampling first compares ``u`` with ``M / (M + S_est + Q')`` (Eq. 10,
    ``g = 2``: ``S_est = a2 b2 + a3 (L_d - b1 - b2)`` >= ``S'``) and skips building ``S'`` when the
    token stays in ``K1``.

    Parameters
    ----------
    word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz, W, nk
        The state (module docstring), all numpy or all cupy.
    tables : dict
        :func:`prepare_words` of ``W``, ``nk``.
    alpha, beta, vbeta : float
        Priors; ``vbeta = V * beta``.
    seed, iteration : int
        RNG counter (iteration >= 1; 0 is the initialisation).
    three : bool
        Three-branch sampling.
    exclude : bool
        Take the token out of its own counts (collapsed Gibbs); False samples Eq. 1 as printed.
    fixed_w : bool
        W is a trained model's, not built from these tokens (inference): exclude from D only.
    order : {"word", "doc"}
        The order in which the GPU visits the tokens; the draws are the same token for token (each one
        depends on the previous pass's counts and its own uniform number only).  ``"word"``: ``lda_sample``,
        a warp per 32 consecutive tokens of the chunk order (sorted by word, then document).  ``"doc"``:
        ``lda_sample_doc``, a warp per 32 consecutive document-major positions of ``doc_tok`` (one or a
        few documents a warp), the document's D row staged in shared memory (``doc_cap`` entries a warp;
        longer rows are read from global memory by the same code); results are written at the tokens'
        own positions.  The CPU twin is the same for both orders.
    doc_tok : int64 (N,), optional
        The inverted index (module docstring): required with ``order="doc"``.
    doc_cap : int
        ``order="doc"``: D-row entries per warp in shared memory (8 warps a block, ``8 * 2 * doc_cap``
        int32 of dynamic shared memory; above 48 KiB the kernel is given the larger limit).

    Returns
    -------
    (z_new int32 (N,), flags int8 (N,)) of the input's backend; flags: 0 = S/Q branch, 1 = max-topic
    branch after building S', 2 = skipped by the S_est test, 3 = own-topic branch.
    """
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    if order == "doc":
        if doc_tok is None or doc_tok.shape[0] != word.shape[0]:
            raise ValueError("order='doc' needs doc_tok, the document-major token index of the same tokens")
        if int(doc_cap) < 1:
            raise ValueError(f"doc_cap must be >= 1, got {doc_cap}")
    n = word.shape[0]
    K = W.shape[1]
    w_self = 0.0 if fixed_w else 1.0
    args_tail = (np.int32(K), np.float64(alpha), np.float64(beta), np.float64(vbeta), np.float64(w_self))
    xp = array_module(word)
    z_out = xp.empty(n, dtype=np.int32)
    flags = xp.zeros(n, dtype=np.int8)
    if xp is np:
        _twin_sample(word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz, W, nk, tables["what"], tables["qcum"],
                     tables["qtot"], tables["top"], tables["topv"], K, float(alpha), float(beta), float(vbeta),
                     w_self, np.uint64(seed), np.uint64(iteration), bool(three), bool(exclude), z_out, flags)
    elif order == "doc":
        if n:
            shmem = (THREADS // 32) * 2 * int(doc_cap) * 4
            f = _cuda.kernel(SOURCE, "lda_sample_doc", _cuda.COMPILE_OPTIONS + tuple(f"-D{x}" for x in DOC_DEFINES))
            if shmem > 48 * 1024 and getattr(f, "max_dynamic_shared_size_bytes", 0) < shmem:
                f.max_dynamic_shared_size_bytes = shmem  # opt in above the default 48 KiB
            g, b = _cuda.grid((n + 31) // 32 * 32)  # a warp per 32 consecutive doc-major positions
            f(g, b, (np.int64(n), doc_tok, word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz, W, nk,
                     tables["what"], tables["qcum"], tables["qtot"], tables["top"], tables["topv"])
              + args_tail + (np.uint64(seed), np.uint64(iteration), np.int32(bool(three)), np.int32(bool(exclude)),
                             np.int32(doc_cap), z_out, flags), shared_mem=shmem)
    else:
        g, b = _cuda.grid((n + 31) // 32 * 32)  # a warp per 32 consecutive tokens
        _kernel("lda_sample")(g, b, (np.int64(n), word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz, W, nk,
                                     tables["what"], tables["qcum"], tables["qtot"], tables["top"], tables["topv"])
                              + args_tail + (np.uint64(seed), np.uint64(iteration), np.int32(bool(three)),
                                             np.int32(bool(exclude)), z_out, flags))
    return z_out, flags


# ----------------------------------------------------------------------------- dense (Moon et al.)

@numba.njit(cache=True, parallel=True)
def _twin_dnt(doc_ptr, d_topic, d_cnt, d_nnz, nk, K, alpha, vbeta, dnt):
    n_docs = doc_ptr.shape[0] - 1
    for d in numba.prange(n_docs):
        for k in range(K):
            c = _find(d_topic, d_cnt, doc_ptr[d], d_nnz[d], k)
            dnt[d, k] = np.float32((np.float64(c) + alpha) / (np.float64(nk[k]) + vbeta))


@numba.njit(cache=True, parallel=True)
def _twin_dense(panel_ptr, panel_word0, word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz, W, nk, dnt,
                K, alpha, beta, vbeta, w_self, seed, it, exclude, z_out):
    s_ = np.uint64(seed)
    it_ = np.uint64(it)
    for p in numba.prange(panel_ptr.shape[0] - 1):
        for t in range(panel_ptr[p], panel_ptr[p + 1]):
            v = word[t]
            d = doc[t]
            zo = z[t] if exclude else -1
            own = 0.0
            if zo >= 0:
                dz = _find(d_topic, d_cnt, doc_ptr[d], d_nnz[d], zo)
                own = (np.float64(dz) - 1.0 + alpha) / (np.float64(nk[zo]) - w_self + vbeta)
            sm = 0.0
            for k in range(K):
                if k == zo:
                    pk = (np.float64(W[v, k]) - w_self + beta) * own
                else:
                    pk = (np.float64(W[v, k]) + beta) * np.float64(dnt[d, k])
                sm = sm + pk
            x = _uniform1(s_, it_, np.uint64(keys[t])) * sm
            acc = 0.0
            pick = K - 1
            for k in range(K):
                if k == zo:
                    pk = (np.float64(W[v, k]) - w_self + beta) * own
                else:
                    pk = (np.float64(W[v, k]) + beta) * np.float64(dnt[d, k])
                acc = acc + pk
                if acc > x:
                    pick = k
                    break
            z_out[t] = pick


@numba.njit(cache=True)
def _panels(w, panel_words, max_tokens, starts, word0):
    n = w.shape[0]
    P = 0
    w0 = 0
    start = 0
    for i in range(n):
        if i == 0 or w[i] < w[i - 1] or w[i] >= w0 + panel_words or i - start >= max_tokens:
            w0 = w[i]
            start = i
            starts[P] = i
            word0[P] = w0
            P += 1
    starts[P] = n
    return P


def word_panels(word, panel_words: int, max_tokens: int = 4096):
    """Column panels of the dense sampler: token ranges whose words lie in ``panel_words`` consecutive ids.

    ``word`` is sorted by word id inside each chunk; a panel starts where the word id leaves
    ``[word0, word0 + panel_words)``, decreases (a new chunk), or the panel already holds
    ``max_tokens`` tokens: a frequent word is split over several thread blocks (EZLDA section V-A,
    large-word dissection), which is possible because W is read-only during a pass.

    Returns
    -------
    (panel_ptr int64 (P+1,), panel_word0 int32 (P,)), numpy arrays.
    """
    w = np.ascontiguousarray(np.asarray(word), dtype=np.int32)
    starts = np.empty(w.shape[0] + 1, dtype=np.int64)
    word0 = np.empty(w.shape[0], dtype=np.int32)
    P = _panels(w, int(panel_words), int(max_tokens), starts, word0)
    return starts[: P + 1].copy(), word0[:P].copy()


def sample_dense(word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz, W, nk, panels, *, alpha: float, beta: float,
                 vbeta: float, seed: int, iteration: int, exclude: bool = True, fixed_w: bool = False,
                 panel_words: int = 16):
    """Moon et al.'s dense sampler for small K (Alg. 2 and 4): DNT precomputed, W panels in shared memory.

    ``p(k) = (W[v][k] + beta) DNT[d][k]`` with ``DNT[d][k] = float32((D[d][k] + alpha) / (n_k + V beta))``,
    the own topic's term recomputed with the token taken out (when ``exclude``).  Two sweeps over K:
    the sum, then the search for ``u * sum`` (Alg. 2 lines 21-32).  Counts are those of the previous
    pass (no atomics: every draw is reproducible).

    Parameters
    ----------
    panels : (panel_ptr, panel_word0)
        From :func:`word_panels` with the same ``panel_words`` (numpy or cupy arrays).
    Other parameters as :func:`sample`.

    Returns
    -------
    z_new int32 (N,) of the input's backend.
    """
    n = word.shape[0]
    K = W.shape[1]
    n_docs = doc_ptr.shape[0] - 1
    w_self = 0.0 if fixed_w else 1.0
    panel_ptr, panel_word0 = panels
    xp = array_module(word)
    dnt = xp.empty((n_docs, K), dtype=np.float32)
    z_out = xp.empty(n, dtype=np.int32)
    if xp is np:
        _twin_dnt(doc_ptr, d_topic, d_cnt, d_nnz, nk, K, float(alpha), float(vbeta), dnt)
        _twin_dense(np.asarray(panel_ptr), np.asarray(panel_word0), word, doc, keys, z, doc_ptr, d_topic, d_cnt,
                    d_nnz, W, nk, dnt, K, float(alpha), float(beta), float(vbeta), w_self, np.uint64(seed),
                    np.uint64(iteration), bool(exclude), z_out)
    else:
        g, b = _cuda.grid(n_docs * K)
        _kernel("lda_dense_dnt")(g, b, (doc_ptr, d_topic, d_cnt, d_nnz, nk, np.int32(n_docs), np.int32(K),
                                        np.float64(alpha), np.float64(vbeta), dnt))
        n_panels = int(panel_word0.shape[0])
        if n_panels:
            shmem = panel_words * K * 4
            # the last panel may reach past V: pad W so the staging loop reads valid rows
            V = W.shape[0]
            Wp = W
            need = int(panel_word0.max()) + panel_words
            if need > V:
                Wp = xp.zeros((need, K), dtype=np.int32)
                Wp[:V] = W
            _kernel("lda_dense_sample")((n_panels,), (THREADS,), (
                panel_ptr, panel_word0, word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz, Wp, nk, dnt,
                np.int32(K), np.int32(panel_words), np.float64(alpha), np.float64(beta), np.float64(vbeta),
                np.float64(w_self), np.uint64(seed), np.uint64(iteration), np.int32(bool(exclude)), z_out),
                shared_mem=shmem)
    return z_out


# ----------------------------------------------------------------------------- likelihood

@numba.njit(cache=True, parallel=True)
def _twin_llpt(word, doc, doc_ptr, d_topic, d_cnt, d_nnz, what, qtot, K, alpha, out):
    for t in numba.prange(word.shape[0]):
        v = word[t]
        d = doc[t]
        base = doc_ptr[d]
        L = doc_ptr[d + 1] - base
        s = 0.0
        for j in range(d_nnz[d]):
            s = s + np.float64(d_cnt[base + j]) * np.float64(what[v, d_topic[base + j]])
        p = (s + alpha * qtot[v]) / (np.float64(L) + np.float64(K) * alpha)
        out[t] = np.log2(p)


def log2_likelihood_terms(word, doc, doc_ptr, d_topic, d_cnt, d_nnz, tables, *, alpha: float):
    """Per-token ``log2 sum_k theta[d][k] phi[k][v]`` of EZLDA Eq. 5.

    ``theta[d][k] = (D[d][k] + alpha) / (L_d + K alpha)``, ``phi[k][v] = What[v][k]`` (float32 table of
    :func:`prepare_words`).  The mean of the result is the LLPT (bits per token).

    Returns
    -------
    float64 (N,) of the input's backend, log base 2.
    """
    n = word.shape[0]
    K = tables["what"].shape[1]
    xp = array_module(word)
    out = xp.empty(n, dtype=np.float64)
    if xp is np:
        _twin_llpt(word, doc, doc_ptr, d_topic, d_cnt, d_nnz, tables["what"], tables["qtot"], K, float(alpha), out)
    else:
        g, b = _cuda.grid(n)
        _kernel("lda_llpt_terms")(g, b, (np.int64(n), word, doc, doc_ptr, d_topic, d_cnt, d_nnz, tables["what"],
                                         tables["qtot"], np.int32(K), np.float64(alpha), out))
    return out
