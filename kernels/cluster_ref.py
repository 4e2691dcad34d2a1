"""Sequential document-stream clustering (Szasz and Samet, Algorithm 1) and its shared arithmetic (numba).

Paper: M. J. Szasz and H. Samet, *Document Stream Clustering using GPUs*, section 4.1.

Everything that decides an assignment is defined here once and used by every backend, so that
the CPU reference, the ELLPACK CPU twin and the CUDA kernel (``ellpack.cu``) agree bit for bit:

* **Similarity** (Eq. 2 on L2-normalized vectors): :func:`dot_merge`, a merge over the cluster
  row and the document, both sorted by term id, accumulating ``acc = acc + c_w * d_w`` in float64
  in increasing term-id order.  The CUDA kernel runs the same loop, compiled with
  ``--fmad=false`` so that no multiply-add is contracted.
* **Choice**: the cluster of largest similarity, ties to the lowest cluster id; a document joins
  it when ``sim > threshold`` (strict, Alg. 1 line 4), else starts a new cluster.  A document
  without any term joins nothing and creates nothing (cluster id ``-1``).
* **Update** (section 4.1, steps 1-5): :func:`merge_update`: de-normalize the cluster and the
  document by their stored magnitudes, add like terms, keep the ``top_k`` largest weights (ties:
  smaller term id first), re-normalize (norm summed in term-id order) and store sorted by term
  id together with the new magnitude.  Cluster updates run on the host (as in the paper's Alg. 2)
  with this one function, except single documents on one GPU, which ``ct_sequential`` merges on the
  device with the same operations (the host then replays the decisions, :func:`replay_decisions`).

Cluster state (row-major on the host): ``c_idx (cap, K) int32`` term ids padded with ``-1``,
``c_w (cap, K) float64`` weights padded with 0, ``c_len (cap,) int32``, ``c_norm (cap,) float64``
(the magnitude before normalization), ``c_size (cap,) int64`` (documents in the cluster).

The inverted index of Alg. 1 line 2 (term -> clusters that hold it) is a pool of linked lists:
``head (V + 1,) int64`` first entry of each term, ``nxt (P,) int64`` and ``pc (P,) int32`` next
entry and cluster of each entry.  Entries are added when a term enters a cluster and never
removed: a stale entry only adds a candidate whose similarity is computed exactly (0 when it
shares no term), so the result is the brute-force result.  Candidates are deduplicated with a
per-cluster stamp.
"""
from __future__ import annotations

import numba
import numpy as np

import cutext.kernels._numba_cache  # noqa: F401  # before the decorators: it places and stamps their cache


@numba.njit(cache=True, nogil=True)
def dot_merge(a_idx, a_w, a_len, b_idx, b_w, b_len):
    """Dot product of two term vectors sorted by term id (the kernel's merge-seek loop).

    ``a`` is the cluster row (the loop runs over its entries), ``b`` the document.
    Accumulates ``acc = acc + a_w * b_w`` in float64, in increasing term-id order.
    """
    acc = 0.0
    v = 0
    for n in range(a_len):
        col = a_idx[n]
        while v < b_len and b_idx[v] < col:
            v += 1
        if v == b_len:
            break
        if b_idx[v] == col:
            acc = acc + a_w[n] * b_w[v]
            v += 1
    return acc


@numba.njit(cache=True, nogil=True)
def _before(wa, ia, wb, ib):
    """Top-k order: larger weight first, then smaller term id."""
    return wa > wb or (wa == wb and ia < ib)


@numba.njit(cache=True, nogil=True)
def merge_scratch(K):
    """The output row and scratch of :func:`merge_update` for ``top_k = K``: ``(out_idx (K,) int32, out_w (K,)
    float64, tmp_idx (2K,) int32, tmp_w (2K,) float64, order (2K,) int64)``."""
    return (np.empty(K, np.int32), np.empty(K, np.float64), np.empty(2 * K, np.int32), np.empty(2 * K, np.float64),
            np.empty(2 * K, np.int64))


@numba.njit(cache=True, nogil=True)
def merge_update(c_idx, c_w, c_len, c_norm, d_idx, d_w, d_len, d_norm, K, out_idx, out_w, tmp_idx, tmp_w, order):
    """Add a document to a cluster (Szasz and Samet section 4.1, steps 1-5).

    Parameters
    ----------
    c_idx, c_w, c_len, c_norm : cluster row (sorted term ids, normalized weights, length, magnitude)
    d_idx, d_w, d_len, d_norm : document vector, same layout
    K : int
        Terms kept (``top_k``).
    out_idx (K,) int32, out_w (K,) float64 : output row (padded with -1 / 0)
    tmp_idx (2K,) int32, tmp_w (2K,) float64, order (2K,) int64 : scratch

    Returns
    -------
    (new_len, new_norm)
    """
    i = 0
    j = 0
    m = 0
    while i < c_len or j < d_len:
        if j >= d_len or (i < c_len and c_idx[i] < d_idx[j]):
            tmp_idx[m] = c_idx[i]
            tmp_w[m] = c_w[i] * c_norm
            i += 1
        elif i >= c_len or d_idx[j] < c_idx[i]:
            tmp_idx[m] = d_idx[j]
            tmp_w[m] = d_w[j] * d_norm
            j += 1
        else:
            a = c_w[i] * c_norm
            b = d_w[j] * d_norm
            tmp_idx[m] = c_idx[i]
            tmp_w[m] = a + b
            i += 1
            j += 1
        m += 1
    keep_all = m <= K
    if not keep_all:
        # insertion sort of positions by (weight desc, term id asc); m <= 2K is small
        for p in range(m):
            order[p] = p
        for p in range(1, m):
            x = order[p]
            q = p - 1
            while q >= 0 and _before(tmp_w[x], tmp_idx[x], tmp_w[order[q]], tmp_idx[order[q]]):
                order[q + 1] = order[q]
                q -= 1
            order[q + 1] = x
        flag = np.zeros(m, np.bool_)
        for p in range(K):
            flag[order[p]] = True
    else:
        flag = np.zeros(0, np.bool_)
    n = 0
    ss = 0.0
    for p in range(m):
        if keep_all or flag[p]:
            out_idx[n] = tmp_idx[p]
            out_w[n] = tmp_w[p]
            ss = ss + tmp_w[p] * tmp_w[p]
            n += 1
    norm = np.sqrt(ss)
    for p in range(n):
        out_w[p] = out_w[p] / norm
    for p in range(n, K):
        out_idx[p] = -1
        out_w[p] = 0.0
    return n, norm


@numba.njit(cache=True, nogil=True)
def _dots_all(c_idx, c_w, c_len, n, d_idx, d_w, L, sims):
    for c in range(n):
        sims[c] = dot_merge(c_idx[c], c_w[c], c_len[c], d_idx, d_w, L)


@numba.njit(cache=True, nogil=True, parallel=True)
def _dots_all_parallel(c_idx, c_w, c_len, n, d_idx, d_w, L, sims):
    for c in numba.prange(n):
        sims[c] = dot_merge(c_idx[c], c_w[c], c_len[c], d_idx, d_w, L)


# clusters above which one document's similarities are computed on all cores (below, the thread
# start-up costs more than it saves)
PARALLEL_MIN_CLUSTERS = 8192


@numba.njit(cache=True, nogil=True)
def _dots_list(cand, m, c_idx, c_w, c_len, d_idx, d_w, L, sims):
    for q in range(m):
        c = cand[q]
        sims[q] = dot_merge(c_idx[c], c_w[c], c_len[c], d_idx, d_w, L)


@numba.njit(cache=True, nogil=True)
def _add_posting(t, c, head, nxt, pc, n_pool):
    pc[n_pool] = c
    nxt[n_pool] = head[t]
    head[t] = n_pool
    return n_pool + 1


@numba.njit(cache=True, nogil=True)
def _contains(idx, length, t):
    lo = 0
    hi = length
    while lo < hi:
        mid = (lo + hi) // 2
        if idx[mid] < t:
            lo = mid + 1
        else:
            hi = mid
    return lo < length and idx[lo] == t


@numba.njit(cache=True, nogil=True)
def apply_decision(j, best, best_c, threshold, K, d_idx, d_w, d_len, d_norm,
                   c_idx, c_w, c_len, c_norm, c_size, n_clusters,
                   out_cluster, out_sim, out_new, new_idx, new_w, tmp_idx, tmp_w, order):
    """Alg. 1 lines 4-8 for document ``j``: join ``best_c`` when ``best > threshold``, else a new cluster.

    Returns ``(cluster id, n_clusters after)``.
    """
    L = d_len[j]
    out_sim[j] = best if best > 0.0 else 0.0
    if best_c >= 0 and best > threshold:
        c = best_c
        nl, nn = merge_update(c_idx[c], c_w[c], c_len[c], c_norm[c], d_idx[j], d_w[j], L, d_norm[j], K,
                              new_idx, new_w, tmp_idx, tmp_w, order)
        for p in range(K):
            c_idx[c, p] = new_idx[p]
            c_w[c, p] = new_w[p]
        c_len[c] = nl
        c_norm[c] = nn
        c_size[c] += 1
        out_cluster[j] = c
        out_new[j] = False
        return c, n_clusters
    c = n_clusters
    for p in range(K):
        c_idx[c, p] = d_idx[j, p] if p < L else -1
        c_w[c, p] = d_w[j, p] if p < L else 0.0
    c_len[c] = L
    c_norm[c] = d_norm[j]
    c_size[c] = 1
    out_cluster[j] = c
    out_new[j] = True
    return c, n_clusters + 1


@numba.njit(cache=True, nogil=True)
def cluster_sequential(d_idx, d_w, d_len, d_norm, threshold, K,
                       c_idx, c_w, c_len, c_norm, c_size, n_clusters,
                       head, nxt, pc, plen, n_pool, stamp, stamp0, brute,
                       out_cluster, out_sim, out_new):
    """Algorithm 1 over a block of documents, in order (the CPU reference).

    Parameters
    ----------
    d_idx (n, K) int32, d_w (n, K) float64, d_len (n,) int32, d_norm (n,) float64
        Term vectors (sorted by term id, L2-normalized, magnitudes).
    threshold : float
        ``T``: join when ``sim > T``.
    K : int
        ``top_k``.
    c_* : cluster state (capacity >= n_clusters + n)
    head, nxt, pc, plen, n_pool : inverted index (pool capacity >= n_pool + n * K; head and plen, the
        entries per term, cover every term id)
    stamp (cap,) int64, stamp0 : candidate dedup stamps (stamp0 larger than any stamp in use)
    brute : bool
        Compare with every cluster instead of the candidates of the inverted index.
    out_cluster (n,) int64, out_sim (n,) float64, out_new (n,) bool : the assignments

    Returns
    -------
    (n_clusters, n_pool) after the block.
    """
    new_idx, new_w, tmp_idx, tmp_w, order = merge_scratch(K)
    old_idx = np.empty(K, np.int32)
    cap = c_idx.shape[0]
    sims = np.empty(cap, np.float64)
    cand = np.empty(cap, np.int64)
    n = d_len.shape[0]
    for j in range(n):
        L = d_len[j]
        if L == 0:
            out_cluster[j] = -1
            out_sim[j] = 0.0
            out_new[j] = False
            continue
        best = -1.0
        best_c = -1
        st = stamp0 + j
        walk = 0
        if not brute:
            for t in range(L):
                walk += plen[d_idx[j, t]]
        if brute or walk >= n_clusters:
            # every cluster (brute force, or when the posting lists are longer than the cluster list)
            if n_clusters >= PARALLEL_MIN_CLUSTERS:
                _dots_all_parallel(c_idx, c_w, c_len, n_clusters, d_idx[j], d_w[j], L, sims)
            else:
                _dots_all(c_idx, c_w, c_len, n_clusters, d_idx[j], d_w[j], L, sims)
            for c in range(n_clusters):
                s = sims[c]
                if s > best:
                    best = s
                    best_c = c
        else:
            m = 0
            for t in range(L):
                e = head[d_idx[j, t]]
                while e != -1:
                    c = pc[e]
                    if stamp[c] != st:
                        stamp[c] = st
                        cand[m] = c
                        m += 1
                    e = nxt[e]
            _dots_list(cand, m, c_idx, c_w, c_len, d_idx[j], d_w[j], L, sims)
            for q in range(m):
                s = sims[q]
                c = cand[q]
                if s > best or (s == best and c < best_c):
                    best = s
                    best_c = c
        joined = best_c >= 0 and best > threshold
        old_len = 0
        if joined:
            old_len = c_len[best_c]
            for p in range(old_len):
                old_idx[p] = c_idx[best_c, p]
        c, n_clusters = apply_decision(j, best, best_c, threshold, K, d_idx, d_w, d_len, d_norm,
                                       c_idx, c_w, c_len, c_norm, c_size, n_clusters,
                                       out_cluster, out_sim, out_new, new_idx, new_w, tmp_idx, tmp_w, order)
        if not brute:
            for p in range(c_len[c]):
                t = c_idx[c, p]
                if not joined or not _contains(old_idx, old_len, t):
                    n_pool = _add_posting(t, c, head, nxt, pc, n_pool)
                    plen[t] += 1
    return n_clusters, n_pool


@numba.njit(cache=True, nogil=True)
def build_postings(c_idx, c_len, n_clusters, head, nxt, pc, plen):
    """Inverted index of the current cluster vectors (after loading a saved state); returns n_pool."""
    n_pool = 0
    for c in range(n_clusters):
        for p in range(c_len[c]):
            n_pool = _add_posting(c_idx[c, p], c, head, nxt, pc, n_pool)
            plen[c_idx[c, p]] += 1
    return n_pool


@numba.njit(cache=True, nogil=True)
def replay_decisions(d_idx, d_w, d_len, d_norm, threshold, K, c_idx, c_w, c_len, c_norm, c_size, n_clusters,
                     out_cluster, out_sim, out_new):
    """Apply decisions taken elsewhere (the one-launch GPU stream, ``ellpack_sequential``) to the host state.

    ``out_cluster`` / ``out_sim`` / ``out_new`` hold each document's decision: :func:`apply_decision`
    repeats it (joining ``out_cluster[j]`` or starting a cluster) so the host rows equal the device rows.

    Returns
    -------
    (n_clusters after, first document whose new cluster id disagrees with the host's count, or -1)
    """
    new_idx, new_w, tmp_idx, tmp_w, order = merge_scratch(K)
    for j in range(d_len.shape[0]):
        if d_len[j] == 0:
            continue
        want = out_cluster[j]
        best_c = -1 if out_new[j] else want
        c, n_clusters = apply_decision(j, out_sim[j], best_c, threshold, K, d_idx, d_w, d_len, d_norm,
                                       c_idx, c_w, c_len, c_norm, c_size, n_clusters,
                                       out_cluster, out_sim, out_new, new_idx, new_w, tmp_idx, tmp_w, order)
        if c != want:
            return n_clusters, j
    return n_clusters, -1


@numba.njit(cache=True, nogil=True)
def resolve_batch(d_idx, d_w, d_len, d_norm, j0, j1, best_sim, best_id, threshold, K,
                  c_idx, c_w, c_len, c_norm, c_size, n_clusters,
                  mark, batch_stamp, touched, out_cluster, out_sim, out_new, post_term, post_cluster):
    """Exact sequential resolution of a micro-batch scored against the batch-start clusters.

    Documents ``j0 .. j1-1`` were scored (``best_sim``, ``best_id``: the largest similarity and its
    lowest cluster id over the clusters as they were at the batch start).  Document ``j`` must
    also see the clusters that documents ``j0 .. j-1`` created or changed ("touched"): their
    similarities are recomputed here with :func:`dot_merge`; an untouched batch-start best stays
    valid.  When a document's batch-start best was itself touched, the best among the untouched
    clusters is unknown: resolution stops there, and the caller rescores from that document.

    Parameters
    ----------
    mark (cap,) int64 : ``mark[c] == batch_stamp`` when cluster ``c`` is touched in this batch
    touched (j1 - j0,) int64 : out, the touched cluster ids in first-touch order
    post_term ((j1 - j0) * K,) int32, post_cluster ((j1 - j0) * K,) int64 : out, the entries the inverted
        index gains, as :func:`cluster_sequential` adds them (every term of a new cluster, the terms that
        enter a joined one); nothing is recorded when the arrays are shorter than ``(j1 - j0) * K``.

    Returns
    -------
    (j_stop, n_clusters, n_touched, n_post)
        ``j_stop`` is the first document not resolved (``j1`` when all are); ``n_post`` entries recorded.
    """
    new_idx, new_w, tmp_idx, tmp_w, order = merge_scratch(K)
    old_idx = np.empty(K, np.int32)
    record = post_term.shape[0] >= (j1 - j0) * K and post_cluster.shape[0] >= (j1 - j0) * K
    n_post = 0
    n_touched = 0
    for j in range(j0, j1):
        L = d_len[j]
        if L == 0:
            out_cluster[j] = -1
            out_sim[j] = 0.0
            out_new[j] = False
            continue
        bc = best_id[j - j0]
        if bc >= 0 and mark[bc] == batch_stamp:
            return j, n_clusters, n_touched, n_post
        best = -1.0
        best_c = -1
        if bc >= 0:
            best = best_sim[j - j0]
            best_c = bc
        for q in range(n_touched):
            c = touched[q]
            s = dot_merge(c_idx[c], c_w[c], c_len[c], d_idx[j], d_w[j], L)
            if s > best or (s == best and c < best_c):
                best = s
                best_c = c
        joined = best_c >= 0 and best > threshold
        old_len = 0
        if record and joined:
            old_len = c_len[best_c]
            for p in range(old_len):
                old_idx[p] = c_idx[best_c, p]
        c, n_clusters = apply_decision(j, best, best_c, threshold, K, d_idx, d_w, d_len, d_norm,
                                       c_idx, c_w, c_len, c_norm, c_size, n_clusters,
                                       out_cluster, out_sim, out_new, new_idx, new_w, tmp_idx, tmp_w, order)
        if record:
            for p in range(c_len[c]):
                t = c_idx[c, p]
                if not joined or not _contains(old_idx, old_len, t):
                    post_term[n_post] = t
                    post_cluster[n_post] = c
                    n_post += 1
        if mark[c] != batch_stamp:
            mark[c] = batch_stamp
            touched[n_touched] = c
            n_touched += 1
    return j1, n_clusters, n_touched, n_post
