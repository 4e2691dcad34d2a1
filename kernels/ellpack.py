"""ELLPACK similarity kernel with block-local max reduction (Szasz and Samet, section 4.2, Algorithm 3).

The cluster matrix ``C`` (one row per cluster, at most ``K = top_k`` terms a row) is stored in
ELLPACK, column-major: two flat arrays ``ell_idx`` (int32 term ids, padding ``-1``) and ``ell_w``
(float64 weights, padding 0) of length ``K * stride``; entry ``n`` of row ``r`` is at
``n * stride + r``.  ``stride`` is the row capacity (a multiple of :data:`BLOCK`, so every column
starts on an aligned boundary, as the paper's padding does); it doubles when the rows outgrow it
(:func:`grow`).  Rows are left-packed and sorted by term id.

Functions take numpy or cupy arrays and run where the data is: numpy -> the CPU twin (numba,
plain loops), cupy -> the CUDA kernels of ``ellpack.cu`` (loaded lazily by :mod:`cutext.kernels._cuda`,
compiled with ``--fmad=false``).  Both compute each dot product with the same merge-seek loop in float64
(:func:`cutext.kernels.cluster_ref.dot_merge`), and both break ties in the max to the lowest row
id, so they return identical values.

* :func:`ellpack_best` -- for every document of a batch, the largest similarity over all rows and
  its row id (block-local max per :data:`BLOCK` rows, then the global argmax), optionally first
  writing one updated row from the update buffer (Alg. 3 lines 10-19).
* :func:`ellpack_scores` -- every similarity, (n_docs, n_rows) (tests, diagnostics).
* :func:`ellpack_scatter` -- write changed rows (the micro-batch update).
* :func:`ellpack_sequential` -- a stream of single documents in one launch (``ct_sequential``): blocks that
  own row tiles score, meet at a grid barrier per document, take the same decision, and the owner block
  merges the document into its row on the device (the update of section 4.1, as ``merge_update``).
* :class:`PostingIndex` and :func:`candidate_best` -- the candidate pass: a device inverted index
  term -> rows (one segment per term in a pool, capacity doubling; the host mirror decides every
  change and uploads only the changes), and the best row of each document among the rows that share
  one of its terms (gather + dedup, then the same ``ct_dot`` on the candidates only).  The result
  equals :func:`ellpack_best`'s whenever a document shares a term with some row (weights are
  positive, so every other row scores exactly 0); with no candidate it is ``(-1, -1)``.
"""
from __future__ import annotations

import numba
import numpy as np

import cutext.kernels._numba_cache  # noqa: F401  # before the decorators: it places and stamps their cache
from cutext.kernels import _cuda
from cutext.kernels.backend import array_module
from cutext.kernels.cluster_ref import dot_merge, merge_scratch, merge_update

BLOCK = _cuda.THREADS  # threads per block = rows per block-local max (CT_BLOCK = 256 in ellpack.cu)
MAX_K = 512
MULTI_DOCS, MULTI_MAX_K = 8, 64  # ct_block_max_multi: documents per block, largest K
SOURCE = "ellpack.cu"


def _fn(name: str):
    """A kernel of ``ellpack.cu`` on the current device (:func:`cutext.kernels._cuda.kernel`)."""
    return _cuda.kernel(SOURCE, name)


def padded_capacity(n_rows: int) -> int:
    """Row capacity for ``n_rows`` rows: a power of two, at least :data:`BLOCK`."""
    cap = BLOCK
    while cap < n_rows:
        cap *= 2
    return cap


def empty_matrix(K: int, capacity: int, xp=np):
    """Column-major ELLPACK arrays ``(ell_idx int32, ell_w float64)`` of ``K * capacity`` entries, all padding."""
    if K < 1 or K > MAX_K:
        raise ValueError(f"top_k must be in [1, {MAX_K}], got {K}")
    return xp.full(K * capacity, -1, dtype=np.int32), xp.zeros(K * capacity, dtype=np.float64)


def grow(ell_idx, ell_w, K: int, stride: int, new_stride: int):
    """Copy the matrix into arrays of capacity ``new_stride`` (capacity doubling); same module as the input."""
    xp = array_module(ell_idx)
    ni, nw = empty_matrix(K, new_stride, xp)
    ni.reshape(K, new_stride)[:, :stride] = ell_idx.reshape(K, stride)
    nw.reshape(K, new_stride)[:, :stride] = ell_w.reshape(K, stride)
    return ni, nw


def to_ellpack(rows_idx, rows_w, n_rows: int, K: int, stride: int | None = None):
    """Row-major ``(n, K)`` host rows -> column-major ELLPACK numpy arrays (``stride`` >= n_rows)."""
    stride = padded_capacity(n_rows) if stride is None else stride
    ei, ew = empty_matrix(K, stride)
    ei.reshape(K, stride)[:, :n_rows] = np.asarray(rows_idx[:n_rows], dtype=np.int32).T
    ew.reshape(K, stride)[:, :n_rows] = np.asarray(rows_w[:n_rows], dtype=np.float64).T
    return ei, ew


# ----------------------------------------------------------------------------- CPU twin

@numba.njit(cache=True, nogil=True)
def _row_dot(ell_idx, ell_w, stride, row, K, d_idx, d_w, L):
    acc = 0.0
    v = 0
    for n in range(K):
        p = n * stride + row
        col = ell_idx[p]
        if col < 0:
            break
        while v < L and d_idx[v] < col:
            v += 1
        if v == L:
            break
        if d_idx[v] == col:
            prod = ell_w[p] * d_w[v]
            acc = acc + prod
            v += 1
    return acc


@numba.njit(cache=True, nogil=True)
def _twin_scores(ell_idx, ell_w, stride, n_rows, K, d_idx, d_w, d_len, out):
    for b in range(d_len.shape[0]):
        for r in range(n_rows):
            out[b, r] = _row_dot(ell_idx, ell_w, stride, r, K, d_idx[b], d_w[b], d_len[b])


@numba.njit(cache=True, nogil=True)
def _twin_update(ell_idx, ell_w, stride, K, upd_row, upd_idx, upd_w):
    for n in range(K):
        ell_idx[n * stride + upd_row] = upd_idx[n]
        ell_w[n * stride + upd_row] = upd_w[n]


@numba.njit(cache=True, nogil=True)
def _twin_block_max(ell_idx, ell_w, stride, n_rows, K, d_idx, d_w, d_len, block, out_sim, out_id):
    n_blocks = out_sim.shape[1]
    for b in range(d_len.shape[0]):
        for k in range(n_blocks):
            bs = -1.0
            bi = 0x7FFFFFFF
            for r in range(k * block, min((k + 1) * block, n_rows)):
                s = _row_dot(ell_idx, ell_w, stride, r, K, d_idx[b], d_w[b], d_len[b])
                if s > bs or (s == bs and r < bi):
                    bs = s
                    bi = r
            out_sim[b, k] = bs
            out_id[b, k] = bi


@numba.njit(cache=True, nogil=True)
def _twin_argmax(in_sim, in_id, best):
    for b in range(in_sim.shape[0]):
        bs = -1.0
        bi = 0x7FFFFFFF
        for k in range(in_sim.shape[1]):
            s = in_sim[b, k]
            i = in_id[b, k]
            if s > bs or (s == bs and i < bi):
                bs = s
                bi = i
        best[b, 0] = bs
        best[b, 1] = -1.0 if bi == 0x7FFFFFFF else float(bi)


def _check_docs(d_idx, d_w, d_len, K):
    if d_idx.ndim != 2 or d_idx.shape[1] != K or d_w.shape != d_idx.shape or d_len.shape != (d_idx.shape[0],):
        raise ValueError(f"documents must be (n, {K}) term ids and weights with (n,) lengths; got "
                         f"{d_idx.shape}, {d_w.shape}, {d_len.shape}")


# ----------------------------------------------------------------------------- public

def _check_batch(d_idx, d_w, d_len, K: int, n_rows: int, upd_row: int) -> int:
    """The checks of a scoring call (documents, top_k, update buffer); returns the batch size B."""
    _check_docs(d_idx, d_w, d_len, K)
    if not 1 <= K <= MAX_K:
        raise ValueError(f"top_k must be in [1, {MAX_K}], got {K}")
    B = d_idx.shape[0]
    if upd_row >= 0 and (B != 1 or upd_row >= n_rows):
        raise ValueError(f"the update buffer needs one document and a row < n_rows (B={B}, row={upd_row})")
    return B


def ellpack_best(ell_idx, ell_w, stride: int, n_rows: int, K: int, d_idx, d_w, d_len,
                 upd_row: int = -1, upd_idx=None, upd_w=None, return_blocks: bool = False):
    """Best cluster of every document: largest similarity over all rows, ties to the lowest row id.

    Szasz and Samet Algorithm 3 (similarity, thread-block local max reduction) followed by the global
    maximum over the block maxima (Alg. 2 line 9, here a second kernel).

    Parameters
    ----------
    ell_idx : int32 array (K * stride,), numpy or cupy
        Column-major ELLPACK term ids, padding -1.
    ell_w : float64 array (K * stride,)
        Column-major ELLPACK weights (L2-normalized rows), padding 0.
    stride : int
        Row capacity (``>= n_rows``).
    n_rows : int
        Rows in use.
    K : int
        Entries per row (``top_k``, at most :data:`MAX_K`).
    d_idx : int32 array (B, K), d_w : float64 array (B, K), d_len : int32 array (B,)
        The documents (sorted by term id, L2-normalized, padded with -1 / 0), same module.
    upd_row : int
        When ``>= 0``: write ``upd_idx`` / ``upd_w`` (K entries each) into that row first (the
        update buffer of Alg. 3; only with ``B == 1``).
    return_blocks : bool
        Also return the block maxima.

    Returns
    -------
    best : float64 array (B, 2), same module
        ``best[b] = (similarity, row id)``; ``(-1, -1)`` when ``n_rows == 0``.
    (block_sim float64 (B, n_blocks), block_id int32 (B, n_blocks)) when ``return_blocks``;
    ``n_blocks = ceil(n_rows / 256)``.

    Raises
    ------
    ValueError
        Bad shapes, ``K`` out of range, an update with ``B != 1`` or an update row outside the rows.
    """
    B = _check_batch(d_idx, d_w, d_len, K, n_rows, upd_row)
    xp = array_module(ell_idx)
    n_blocks = -(-n_rows // BLOCK)
    best = xp.empty((B, 2), dtype=np.float64)
    if n_rows == 0 or B == 0:
        best[:, 0] = -1.0
        best[:, 1] = -1.0
        blocks = (xp.zeros((B, 0), np.float64), xp.zeros((B, 0), np.int32))
        return (best, blocks) if return_blocks else best
    bsim = xp.empty((B, n_blocks), dtype=np.float64)
    bid = xp.empty((B, n_blocks), dtype=np.int32)
    if xp is np:
        if upd_row >= 0:
            _twin_update(ell_idx, ell_w, stride, K, upd_row, np.ascontiguousarray(upd_idx, np.int32),
                         np.ascontiguousarray(upd_w, np.float64))
        _twin_block_max(ell_idx, ell_w, stride, n_rows, K, d_idx, d_w, d_len, BLOCK, bsim, bid)
        _twin_argmax(bsim, bid, best)
    else:
        docs = (xp.ascontiguousarray(d_idx, np.int32), xp.ascontiguousarray(d_w, np.float64),
                xp.ascontiguousarray(d_len, np.int32))
        if B > 1 and upd_row < 0 and K <= MULTI_MAX_K:
            # micro-batch: each row is read once per MULTI_DOCS documents (same sums as ct_block_max)
            _fn("ct_block_max_multi")(
                (n_blocks, -(-B // MULTI_DOCS)), (BLOCK,),
                (ell_idx, ell_w, np.int64(stride), np.int32(n_rows), np.int32(K), *docs, np.int32(B), bsim, bid))
            _fn("ct_argmax")((B,), (BLOCK,), (bsim, bid, np.int32(n_blocks), best))
            return (best, (bsim, bid)) if return_blocks else best
        if upd_row < 0:
            upd_idx = xp.empty(1, np.int32)
            upd_w = xp.empty(1, np.float64)
        _fn("ct_block_max")(
            (n_blocks, B), (BLOCK,),
            (ell_idx, ell_w, np.int64(stride), np.int32(n_rows), np.int32(K), *docs,
             np.int32(upd_row), upd_idx, upd_w, bsim, bid))
        _fn("ct_argmax")((B,), (BLOCK,), (bsim, bid, np.int32(n_blocks), best))
    return (best, (bsim, bid)) if return_blocks else best


def ellpack_scores(ell_idx, ell_w, stride: int, n_rows: int, K: int, d_idx, d_w, d_len):
    """Every similarity: float64 array (B, n_rows) of the input's module (same arithmetic as :func:`ellpack_best`)."""
    _check_docs(d_idx, d_w, d_len, K)
    xp = array_module(ell_idx)
    B = d_idx.shape[0]
    out = xp.zeros((B, n_rows), dtype=np.float64)
    if n_rows == 0 or B == 0:
        return out
    if xp is np:
        _twin_scores(ell_idx, ell_w, stride, n_rows, K, d_idx, d_w, d_len, out)
    else:
        _fn("ct_scores")(
            (-(-n_rows // BLOCK), B), (BLOCK,),
            (ell_idx, ell_w, np.int64(stride), np.int32(n_rows), np.int32(K),
             xp.ascontiguousarray(d_idx, np.int32), xp.ascontiguousarray(d_w, np.float64),
             xp.ascontiguousarray(d_len, np.int32), out))
    return out


def ellpack_scatter(ell_idx, ell_w, stride: int, K: int, rows, r_idx, r_w) -> None:
    """Write rows into the matrix in place.

    Parameters
    ----------
    rows : int64 array (U,)
        Row ids (``< stride``).
    r_idx : int32 array (U, K), r_w : float64 array (U, K)
        The rows, row-major, padded with -1 / 0; same module as the matrix.
    """
    xp = array_module(ell_idx)
    U = len(rows)
    if U == 0:
        return
    if xp is np:
        ei = ell_idx.reshape(K, stride)
        ew = ell_w.reshape(K, stride)
        ei[:, rows] = np.asarray(r_idx, np.int32).T
        ew[:, rows] = np.asarray(r_w, np.float64).T
        return
    n = U * K
    _fn("ct_scatter")(
        (-(-n // BLOCK),), (BLOCK,),
        (ell_idx, ell_w, np.int64(stride), np.int32(K), np.int32(U),
         xp.ascontiguousarray(rows, np.int64), xp.ascontiguousarray(r_idx, np.int32),
         xp.ascontiguousarray(r_w, np.float64)))


# ----------------------------------------------------------------------------- the stream in one launch

@numba.njit(cache=True, nogil=True)
def _twin_sequential(ell_idx, ell_w, c_norm, stride, n_rows, K, d_idx, d_w, d_len, d_norm, threshold,
                     out_cluster, out_sim, out_new):
    """CPU twin of ``ct_sequential``: Algorithm 1 over every row, the merge written into the matrix."""
    row_idx = np.empty(K, np.int32)
    row_w = np.empty(K, np.float64)
    new_idx, new_w, tmp_idx, tmp_w, order = merge_scratch(K)
    for j in range(d_len.shape[0]):
        L = d_len[j]
        if L == 0:
            out_cluster[j] = -1
            out_sim[j] = 0.0
            out_new[j] = False
            continue
        best = -1.0
        best_c = -1
        for r in range(n_rows):
            s = _row_dot(ell_idx, ell_w, stride, r, K, d_idx[j], d_w[j], L)
            if s > best:
                best = s
                best_c = r
        out_sim[j] = best if best > 0.0 else 0.0
        if best_c >= 0 and best > threshold:
            cl = 0
            for p in range(K):
                c = ell_idx[p * stride + best_c]
                if c < 0:
                    break
                row_idx[p] = c
                row_w[p] = ell_w[p * stride + best_c]
                cl += 1
            _, nn = merge_update(row_idx, row_w, cl, c_norm[best_c], d_idx[j], d_w[j], L, d_norm[j], K,
                                 new_idx, new_w, tmp_idx, tmp_w, order)
            _twin_update(ell_idx, ell_w, stride, K, best_c, new_idx, new_w)
            c_norm[best_c] = nn
            out_cluster[j] = best_c
            out_new[j] = False
        else:
            for p in range(K):
                ell_idx[p * stride + n_rows] = d_idx[j, p] if p < L else -1
                ell_w[p * stride + n_rows] = d_w[j, p] if p < L else 0.0
            c_norm[n_rows] = d_norm[j]
            out_cluster[j] = n_rows
            out_new[j] = True
            n_rows += 1
    return n_rows


def _resident_blocks(fn) -> int:
    """Blocks of ``fn`` (BLOCK threads each) that the current device holds at once: its SMs times the blocks an
    SM fits by threads, registers (allocated per warp in units of 256) and shared memory.  ``ct_sequential``
    launches at most this many, so that every block is resident and reaches its grid barrier (a kernel of
    another stream only delays blocks until it ends).  1 when the kernel's attributes are not known."""
    import cupy

    try:
        a = cupy.cuda.Device().attributes
        regs, smem = int(fn.num_regs), int(fn.shared_size_bytes)
        warps = BLOCK // 32
        per_block_regs = warps * (-(-regs * 32 // 256) * 256)
        per_sm = min(a["MaxThreadsPerMultiProcessor"] // BLOCK,
                     a["MaxRegistersPerMultiprocessor"] // max(1, per_block_regs),
                     a["MaxSharedMemoryPerMultiprocessor"] // (smem + 1024),  # 1 KiB a block reserved by CUDA
                     a.get("MaxBlocksPerMultiprocessor", 16))
        return max(1, int(a["MultiProcessorCount"]) * max(1, int(per_sm)))
    except (AttributeError, KeyError, TypeError):
        return 1


def ellpack_sequential(ell_idx, ell_w, c_norm, stride: int, n_rows: int, K: int, d_idx, d_w, d_len, d_norm,
                       threshold: float, max_blocks: int | None = None):
    """Cluster documents one after another against every row, the matrix updated in place after each.

    Szasz and Samet Algorithm 1 with the all-rows similarity of Algorithm 3 and the update of section 4.1
    (:func:`cutext.kernels.cluster_ref.merge_update`) for a stream of single documents, with no round trip
    to the host between them: on the GPU one launch of resident blocks (``ct_sequential``) that own fixed
    row ranges, meet at a grid barrier per document and each take the same decision; on the CPU its numba
    twin.  Decisions, similarities and the matrix afterwards equal the sequential reference
    (:func:`cutext.kernels.cluster_ref.cluster_sequential` with ``brute=True``) bit for bit.

    Parameters
    ----------
    ell_idx : int32 (K * stride,), ell_w : float64 (K * stride,)
        The column-major ELLPACK matrix (numpy or cupy), updated in place.
    c_norm : float64 (>= n_rows + n_docs,)
        Each row's magnitude before normalization (section 4.1's stored norm), same module, updated in place.
    stride : int
        Row capacity; must hold ``n_rows + n_docs`` rows (every document may start a cluster).
    n_rows : int
        Rows in use before the first document.
    K : int
        ``top_k`` (entries per row, at most :data:`MAX_K`).
    d_idx : int32 (n_docs, K), d_w : float64 (n_docs, K), d_len : int32 (n_docs,), d_norm : float64 (n_docs,)
        Term vectors sorted by term id and L2-normalized, with their magnitudes.
    threshold : float
        ``T``: a document joins its best row when ``sim > T``.
    max_blocks : int, optional
        At most this many blocks (GPU; default and upper bound: as many as the device holds at once).

    Returns
    -------
    (cluster int64 (n_docs,), sim float64 (n_docs,), new bool (n_docs,), n_rows after), on the host.
        ``cluster = -1`` for a document without a term.

    Raises
    ------
    ValueError
        Bad shapes, ``K`` out of range, or a capacity below ``n_rows + n_docs``.
    """
    _check_docs(d_idx, d_w, d_len, K)
    if not 1 <= K <= MAX_K:
        raise ValueError(f"top_k must be in [1, {MAX_K}], got {K}")
    n_docs = d_idx.shape[0]
    if n_rows + n_docs > stride or c_norm.shape[0] < n_rows + n_docs:
        raise ValueError(f"ellpack_sequential: capacity {stride} (norms {c_norm.shape[0]}) below "
                         f"{n_rows} rows + {n_docs} documents")
    xp = array_module(ell_idx)
    if xp is np:
        cluster = np.empty(n_docs, np.int64)
        sim = np.empty(n_docs, np.float64)
        new = np.empty(n_docs, np.bool_)
        n_after = _twin_sequential(ell_idx, ell_w, c_norm, stride, n_rows, K, np.asarray(d_idx, np.int32),
                                   np.asarray(d_w, np.float64), np.asarray(d_len, np.int32),
                                   np.asarray(d_norm, np.float64), float(threshold), cluster, sim, new)
        return cluster, sim, new, int(n_after)
    fn = _fn("ct_sequential")
    tiles = max(1, -(-(n_rows + n_docs) // BLOCK))
    G = min(tiles, _resident_blocks(fn), max(1, int(max_blocks)) if max_blocks is not None else tiles)
    blk_sim = xp.empty(2 * G, np.float64)
    blk_id = xp.empty(2 * G, np.int32)
    bar = xp.zeros(2, np.uint32)
    cluster = xp.empty(n_docs, np.int64)
    sim = xp.empty(n_docs, np.float64)
    new = xp.empty(n_docs, np.uint8)
    n_out = xp.empty(1, np.int32)
    args = (ell_idx, ell_w, c_norm, np.int64(stride), np.int32(n_rows), np.int32(K),
            xp.ascontiguousarray(d_idx, np.int32), xp.ascontiguousarray(d_w, np.float64),
            xp.ascontiguousarray(d_len, np.int32), xp.ascontiguousarray(d_norm, np.float64), np.int32(n_docs),
            np.float64(threshold), blk_sim, blk_id, bar, cluster, sim, new, n_out)
    fn((G,), (BLOCK,), args)
    return cluster.get(), sim.get(), new.get().astype(bool), int(n_out.get()[0])


# ----------------------------------------------------------------------------- candidate pass

SEGMENT_MIN = 4  # first capacity of a term's posting segment (then doubling)
GATHER_MAX_BLOCKS = 1024  # grid-stride beyond this many blocks per document
SCORE_MAX_BLOCKS = 4096


@numba.njit(cache=True, nogil=True)
def _index_append(terms, rows, i0, off, ln, cap, pool, top, r_start, r_count, n_r, dirty, n_dirty, seg_min):
    """Append ``rows[i]`` to the posting list of ``terms[i]`` for i >= i0 (host mirror).

    A full segment moves to the pool's end with twice the capacity (the old one becomes garbage).
    Records the changed pool ranges (r_start, r_count) and the changed terms (dirty).  Stops early,
    returning the first entry not appended, when the pool is full (the caller grows it and goes on).
    """
    n = terms.shape[0]
    for i in range(i0, n):
        t = terms[i]
        if ln[t] == cap[t]:
            new_cap = max(seg_min, 2 * cap[t])
            if top + new_cap > pool.shape[0]:
                return i, top, n_r, n_dirty
            o = off[t]
            for e in range(ln[t]):
                pool[top + e] = pool[o + e]
            off[t] = top
            cap[t] = new_cap
            top += new_cap
            pool[off[t] + ln[t]] = rows[i]
            ln[t] += 1
            r_start[n_r] = off[t]
            r_count[n_r] = ln[t]
        else:
            p = off[t] + ln[t]
            pool[p] = rows[i]
            ln[t] += 1
            r_start[n_r] = p
            r_count[n_r] = 1
        n_r += 1
        dirty[n_dirty] = t
        n_dirty += 1
    return n, top, n_r, n_dirty


@numba.njit(cache=True, nogil=True)
def _walk(d_idx, d_len, ln, out):
    """Posting entries of each document's terms (terms outside the mirror have none)."""
    V = ln.shape[0]
    for b in range(d_len.shape[0]):
        s = 0
        for t in range(d_len[b]):
            term = d_idx[b, t]
            if 0 <= term < V:
                s += ln[term]
        out[b] = s


@numba.njit(cache=True, nogil=True)
def _twin_index_update(pool, pos, val, t_off, t_len, terms, term_off, term_len):
    for i in range(pos.shape[0]):
        pool[pos[i]] = val[i]
    for i in range(terms.shape[0]):
        t_off[terms[i]] = term_off[i]
        t_len[terms[i]] = term_len[i]


@numba.njit(cache=True, nogil=True)
def _twin_cand_gather(d_idx, d_len, t_off, t_len, pool, seen, cand_off, cand, cand_n):
    n_terms = t_off.shape[0]
    for b in range(d_len.shape[0]):
        for t in range(d_len[b]):
            term = d_idx[b, t]
            if term < 0 or term >= n_terms:
                continue
            o = t_off[term]
            for e in range(t_len[term]):
                row = pool[o + e]
                bit = np.uint32(1) << np.uint32(row & 31)
                word = seen[b, row >> 5]
                if (word & bit) == 0:
                    seen[b, row >> 5] = word | bit
                    cand[cand_off[b] + cand_n[b]] = row
                    cand_n[b] += 1


@numba.njit(cache=True, nogil=True)
def _twin_cand_block_max(ell_idx, ell_w, stride, K, d_idx, d_w, d_len, cand, cand_off, cand_n, seen, block,
                         out_sim, out_id):
    """ct_cand_block_max: candidate k of a document is read by block (k // block) % n_blocks."""
    n_blocks = out_sim.shape[1]
    for b in range(d_len.shape[0]):
        for k in range(n_blocks):
            out_sim[b, k] = -1.0
            out_id[b, k] = 0x7FFFFFFF
        for q in range(cand_n[b]):
            row = cand[cand_off[b] + q]
            s = _row_dot(ell_idx, ell_w, stride, row, K, d_idx[b], d_w[b], d_len[b])
            k = (q // block) % n_blocks
            if s > out_sim[b, k] or (s == out_sim[b, k] and row < out_id[b, k]):
                out_sim[b, k] = s
                out_id[b, k] = row
            seen[b, row >> 5] &= ~(np.uint32(1) << np.uint32(row & 31))


def index_update(pool, t_off, t_len, pos, val, terms, term_off, term_len) -> None:
    """Apply index changes in place: ``pool[pos] = val``, ``t_off[terms] = term_off``, ``t_len[terms] = term_len``.

    Parameters
    ----------
    pool : int32 (P,), t_off : int64 (V,), t_len : int32 (V,)
        The device index (numpy: the twin; cupy: the ``ct_index_update`` kernel).
    pos : int64 (n,), val : int32 (n,)
        Pool positions and their rows.
    terms : int32 (m,), term_off : int64 (m,), term_len : int32 (m,)
        Changed terms and their new segment offset and length.  Same module as ``pool``.
    """
    n, m = len(pos), len(terms)
    if n == 0 and m == 0:
        return
    xp = array_module(pool)
    if xp is np:
        _twin_index_update(pool, np.asarray(pos, np.int64), np.asarray(val, np.int32), t_off, t_len,
                           np.asarray(terms, np.int32), np.asarray(term_off, np.int64), np.asarray(term_len, np.int32))
        return
    _fn("ct_index_update")(
        (-(-max(n, m) // BLOCK),), (BLOCK,),
        (pool, np.int32(n), xp.ascontiguousarray(pos, np.int64), xp.ascontiguousarray(val, np.int32),
         t_off, t_len, np.int32(m), xp.ascontiguousarray(terms, np.int32),
         xp.ascontiguousarray(term_off, np.int64), xp.ascontiguousarray(term_len, np.int32)))


class PostingIndex:
    """Inverted index term -> rows of one row partition: a host mirror that decides, a device copy that serves.

    Layout (host and device alike): the posting list of term ``t`` is the segment
    ``pool[t_off[t] : t_off[t] + t_len[t]]`` of one int32 pool of row ids; a term's segment has room for
    ``t_cap[t]`` entries (host only; first :data:`SEGMENT_MIN`, then doubling: a full segment is copied to
    the end of the pool with twice the room and the old one is left as garbage, so appends are amortized
    O(1) and the garbage stays below the live room).  The pool and the term arrays double too.
    Entries are appended (:meth:`append`) and never removed.

    :meth:`sync` brings the device copy up to date: the pool positions written and the headers of the
    terms changed since the last sync (one ``ct_index_update`` launch), or the whole index after the host
    arrays grew (or when the pending changes exceed half the pool).  With ``xp=numpy`` the "device" copy
    is a separate set of numpy arrays (the CPU twin runs the same bookkeeping).

    Parameters
    ----------
    xp : module
        numpy or cupy (arrays of the device copy; create it under the right ``cupy.cuda.Device``).

    Attributes
    ----------
    t_off : int64 (V,), t_len : int32 (V,), t_cap : int32 (V,), pool : int32 (P,), top : int
        Host mirror (``top``: pool entries in use, garbage included).
    d_off, d_len, d_pool : arrays of ``xp``
        The device copy (valid after :meth:`sync`).
    n_entries : int
        Posting entries (``t_len.sum()``).
    full_uploads, partial_uploads : int
        Syncs that copied everything / only the changes.
    """

    def __init__(self, xp=np, n_terms: int = 1024, pool_capacity: int = 1 << 14):
        self.xp = xp
        self.t_off = np.zeros(max(1, n_terms), np.int64)
        self.t_len = np.zeros(max(1, n_terms), np.int32)
        self.t_cap = np.zeros(max(1, n_terms), np.int32)
        self.pool = np.full(max(SEGMENT_MIN, pool_capacity), -1, np.int32)
        self.top = 0
        self.n_entries = 0
        self.d_off = self.d_len = self.d_pool = None
        self._full = True
        self._ranges: list = []
        self._dirty: list = []
        self._n_pending = 0
        self.full_uploads = 0
        self.partial_uploads = 0
        self._seen = None

    def _grow_terms(self, V):
        cap = len(self.t_off)
        if V <= cap:
            return
        while cap < V:
            cap *= 2
        for name in ("t_off", "t_len", "t_cap"):
            a = getattr(self, name)
            b = np.zeros(cap, a.dtype)
            b[:len(a)] = a
            setattr(self, name, b)

    def append(self, terms, rows) -> None:
        """Add ``rows[i]`` to the posting list of ``terms[i]`` (host mirror; the device gets it at :meth:`sync`).

        Parameters
        ----------
        terms : int array (n,)
            Term ids (>= 0).
        rows : int array (n,)
            Row ids of this partition.

        Raises
        ------
        ValueError
            A negative term id or row id.
        """
        terms = np.ascontiguousarray(terms, np.int32)
        rows = np.ascontiguousarray(rows, np.int32)
        n = len(terms)
        if n == 0:
            return
        if terms.min() < 0 or rows.min() < 0:
            raise ValueError("PostingIndex.append: term and row ids must be >= 0")
        self._grow_terms(int(terms.max()) + 1)
        r_start = np.empty(n, np.int64)
        r_count = np.empty(n, np.int64)
        dirty = np.empty(n, np.int32)
        i, n_r, n_d = 0, 0, 0
        while True:
            i, self.top, n_r, n_d = _index_append(terms, rows, i, self.t_off, self.t_len, self.t_cap, self.pool,
                                                  self.top, r_start, r_count, n_r, dirty, n_d, SEGMENT_MIN)
            if i == n:
                break
            new = np.full(2 * len(self.pool), -1, np.int32)  # pool full: double it and go on
            new[:self.top] = self.pool[:self.top]
            self.pool = new
            self._full = True
        self.n_entries += n
        if not self._full:
            self._ranges.append((r_start[:n_r], r_count[:n_r]))
            self._dirty.append(dirty[:n_d])
            self._n_pending += int(r_count[:n_r].sum())
            if self._n_pending > max(self.top // 2, 1 << 16):
                self._full = True
        if self._full:
            self._ranges, self._dirty, self._n_pending = [], [], 0

    def walk(self, d_idx, d_len) -> np.ndarray:
        """Posting entries of each document's terms: int64 (B,) (host arrays in, host array out)."""
        out = np.empty(len(d_len), np.int64)
        _walk(np.ascontiguousarray(d_idx, np.int32), np.ascontiguousarray(d_len, np.int32), self.t_len, out)
        return out

    def sync(self) -> None:
        """Upload the pending changes (or everything, after growth) to the device copy."""
        xp = self.xp
        if (self._full or self.d_pool is None or len(self.d_pool) != len(self.pool)
                or len(self.d_off) != len(self.t_off)):
            self.d_off = xp.array(self.t_off)
            self.d_len = xp.array(self.t_len)
            self.d_pool = xp.array(self.pool)
            self._full = False
            self._ranges, self._dirty, self._n_pending = [], [], 0
            self.full_uploads += 1
            return
        if not self._ranges:
            return
        starts = np.concatenate([r[0] for r in self._ranges])
        counts = np.concatenate([r[1] for r in self._ranges])
        pos = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts) + np.arange(counts.sum())
        terms = np.unique(np.concatenate(self._dirty))
        self._ranges, self._dirty, self._n_pending = [], [], 0
        index_update(self.d_pool, self.d_off, self.d_len, xp.asarray(pos), xp.asarray(self.pool[pos]),
                     xp.asarray(terms), xp.asarray(self.t_off[terms]), xp.asarray(self.t_len[terms]))
        self.partial_uploads += 1

    def seen(self, n_docs: int, stride: int):
        """The zeroed dedup bitmaps, (>= n_docs, stride / 32) uint32 of ``xp`` (reallocated when too small)."""
        words = -(-stride // 32)
        s = self._seen
        if s is None or s.shape[0] < n_docs or s.shape[1] < words:
            rows = max(n_docs, 0 if s is None else s.shape[0])
            self._seen = self.xp.zeros((rows, words), np.uint32)
        return self._seen

    def lists(self) -> dict:
        """Host mirror as ``{term: row ids in append order}`` (tests, diagnostics)."""
        return {int(t): self.pool[self.t_off[t]:self.t_off[t] + self.t_len[t]].copy()
                for t in np.flatnonzero(self.t_len)}


def candidate_best(ell_idx, ell_w, stride: int, n_rows: int, K: int, d_idx, d_w, d_len, index: PostingIndex,
                   walk=None, upd_row: int = -1, upd_idx=None, upd_w=None, return_candidates: bool = False):
    """Best row of every document among the rows that share a term with it (the candidate pass).

    Beyond Szasz and Samet: ``ct_cand_gather`` collects the union of the document's posting lists (each row
    once, through a per-document bitmap), ``ct_cand_block_max`` computes ``ct_dot`` for those rows
    only, with the block-local max, and ``ct_argmax`` (the kernel of :func:`ellpack_best`) gives the best
    (similarity, row), ties to the lowest row.  The similarities are those of the all-rows pass bit for
    bit; every row that is not a candidate shares no term and scores exactly 0, so the best equals
    :func:`ellpack_best`'s whenever it is > 0.

    Parameters
    ----------
    ell_idx, ell_w, stride, n_rows, K, d_idx, d_w, d_len
        As in :func:`ellpack_best` (numpy: the CPU twin; cupy: the CUDA kernels).
    index : PostingIndex
        The row partition's inverted index (synced here); same module as the matrix.
    walk : int64 array (B,), optional
        Posting entries per document (``index.walk`` on the host arrays); computed when omitted.
    upd_row, upd_idx, upd_w
        The update buffer (one document only): ``ct_cand_gather`` writes the row before the scoring.
    return_candidates : bool
        Also return each document's candidate rows (host arrays, sorted).

    Returns
    -------
    best : float64 array (B, 2), same module
        ``(similarity, row)``; ``(-1, -1)`` for a document without a candidate (no shared term, no
        term at all) and when ``n_rows == 0``.
    candidates : list of int32 arrays, when ``return_candidates``

    Raises
    ------
    ValueError
        Bad shapes, ``K`` out of range, an index of another module, an update with ``B != 1`` or an
        update row outside the rows.
    """
    B = _check_batch(d_idx, d_w, d_len, K, n_rows, upd_row)
    xp = array_module(ell_idx)
    if index.xp is not xp:
        raise ValueError(f"the index lives in {index.xp.__name__}, the matrix in {xp.__name__}")
    best = xp.empty((B, 2), dtype=np.float64)
    if n_rows == 0 or B == 0:
        best[:, 0] = -1.0
        best[:, 1] = -1.0
        return (best, [np.zeros(0, np.int32)] * B) if return_candidates else best
    index.sync()
    if walk is None:
        h_idx = d_idx.get() if hasattr(d_idx, "get") else d_idx
        h_len = d_len.get() if hasattr(d_len, "get") else d_len
        walk = index.walk(h_idx, h_len)
    walk = np.asarray(walk, np.int64)
    caps = np.minimum(walk, n_rows)
    cand_off = np.zeros(B, np.int64)
    cand_off[1:] = np.cumsum(caps)[:-1]
    n_cand = max(1, int(caps.sum()))
    gx_gather = int(min(max(1, -(-int(walk.max()) // BLOCK)), GATHER_MAX_BLOCKS))
    gx_score = int(min(max(1, -(-int(caps.max()) // BLOCK)), SCORE_MAX_BLOCKS))
    seen = index.seen(B, stride)
    cand = xp.empty(n_cand, np.int32)
    cand_n = xp.zeros(B, np.int32)
    bsim = xp.empty((B, gx_score), np.float64)
    bid = xp.empty((B, gx_score), np.int32)
    if xp is np:
        if upd_row >= 0:
            _twin_update(ell_idx, ell_w, stride, K, upd_row, np.ascontiguousarray(upd_idx, np.int32),
                         np.ascontiguousarray(upd_w, np.float64))
        _twin_cand_gather(d_idx, d_len, index.d_off, index.d_len, index.d_pool, seen, cand_off, cand, cand_n)
        if return_candidates:
            found = [np.sort(cand[cand_off[b]:cand_off[b] + cand_n[b]]) for b in range(B)]
        _twin_cand_block_max(ell_idx, ell_w, stride, K, d_idx, d_w, d_len, cand, cand_off, cand_n, seen, BLOCK,
                             bsim, bid)
        _twin_argmax(bsim, bid, best)
    else:
        d_idx = xp.ascontiguousarray(d_idx, np.int32)
        d_w = xp.ascontiguousarray(d_w, np.float64)
        d_len = xp.ascontiguousarray(d_len, np.int32)
        g_off = xp.asarray(cand_off)
        if upd_row < 0:
            upd_idx = xp.empty(1, np.int32)
            upd_w = xp.empty(1, np.float64)
        _fn("ct_cand_gather")(
            (gx_gather, B), (BLOCK,),
            (d_idx, d_len, np.int32(K), index.d_off, index.d_len, np.int64(len(index.d_off)), index.d_pool,
             seen, np.int64(seen.shape[1]), g_off, cand, cand_n, ell_idx, ell_w, np.int64(stride),
             np.int32(upd_row), upd_idx, upd_w))
        if return_candidates:
            h_cand, h_n = cand.get(), cand_n.get()
            found = [np.sort(h_cand[cand_off[b]:cand_off[b] + h_n[b]]) for b in range(B)]
        _fn("ct_cand_block_max")(
            (gx_score, B), (BLOCK,),
            (ell_idx, ell_w, np.int64(stride), np.int32(K), d_idx, d_w, d_len, cand, g_off, cand_n,
             seen, np.int64(seen.shape[1]), bsim, bid))
        _fn("ct_argmax")((B,), (BLOCK,), (bsim, bid, np.int32(gx_score), best))
    return (best, found) if return_candidates else best


__all__ = ["BLOCK", "MAX_K", "ellpack_best", "ellpack_scores", "ellpack_scatter", "grow", "empty_matrix",
           "to_ellpack", "padded_capacity", "dot_merge", "PostingIndex", "candidate_best", "index_update"]
