"""ELLPACK similarity kernel with block-local max reduction (paper 002, section 4.2, Algorithm 3).

The cluster matrix ``C`` (one row per cluster, at most ``K = top_k`` terms a row) is stored in
ELLPACK, column-major: two flat arrays ``ell_idx`` (int32 term ids, padding ``-1``) and ``ell_w``
(float64 weights, padding 0) of length ``K * stride``; entry ``n`` of row ``r`` is at
``n * stride + r``.  ``stride`` is the row capacity (a multiple of :data:`BLOCK`, so every column
starts on an aligned boundary, as the paper's padding does); it doubles when the rows outgrow it
(:func:`grow`).  Rows are left-packed and sorted by term id.

Functions take numpy or cupy arrays and run where the data is: numpy -> the CPU twin (numba,
plain loops), cupy -> the CUDA kernels of ``ellpack.cu`` (loaded lazily, compiled with
``--fmad=false``).  Both compute each dot product with the same merge-seek loop in float64
(:func:`cutext.kernels.cluster_ref.dot_merge`), and both break ties in the max to the lowest row
id, so they return identical values.

* :func:`ellpack_best` -- for every document of a batch, the largest similarity over all rows and
  its row id (block-local max per :data:`BLOCK` rows, then the global argmax), optionally first
  writing one updated row from the update buffer (Alg. 3 lines 10-19).
* :func:`ellpack_scores` -- every similarity, (n_docs, n_rows) (tests, diagnostics).
* :func:`ellpack_scatter` -- write changed rows (the micro-batch update).
"""
from __future__ import annotations

import threading
from pathlib import Path

import numba
import numpy as np
from cutext.kernels.backend import is_gpu_object
from cutext.kernels.cluster_ref import dot_merge

BLOCK = 256
MAX_K = 512
MULTI_DOCS, MULTI_MAX_K = 8, 64  # ct_block_max_multi: documents per block, largest K
_COMPILE_OPTIONS = ("--std=c++17", "--fmad=false")
_lock = threading.Lock()
_modules: dict = {}
_functions: dict = {}


def _module():
    """The compiled ``ellpack.cu`` for the current device (cached per device)."""
    import cupy

    dev = cupy.cuda.Device().id
    with _lock:
        mod = _modules.get(dev)
        if mod is None:
            src = (Path(__file__).with_name("ellpack.cu")).read_text(encoding="utf-8")
            mod = cupy.RawModule(code=src, options=_COMPILE_OPTIONS)
            _modules[dev] = mod
    return mod


def _fn(name: str):
    """A kernel of ``ellpack.cu`` on the current device (function handles cached per device)."""
    import cupy

    key = (cupy.cuda.Device().id, name)
    f = _functions.get(key)
    if f is None:
        f = _functions[key] = _module().get_function(name)
    return f


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
    xp = _xp(ell_idx)
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


def _xp(a):
    if is_gpu_object(a):
        import cupy

        return cupy
    return np


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

def ellpack_best(ell_idx, ell_w, stride: int, n_rows: int, K: int, d_idx, d_w, d_len,
                 upd_row: int = -1, upd_idx=None, upd_w=None, return_blocks: bool = False):
    """Best cluster of every document: largest similarity over all rows, ties to the lowest row id.

    Paper 002 Algorithm 3 (similarity, thread-block local max reduction) followed by the global
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
    _check_docs(d_idx, d_w, d_len, K)
    if not 1 <= K <= MAX_K:
        raise ValueError(f"top_k must be in [1, {MAX_K}], got {K}")
    B = d_idx.shape[0]
    if upd_row >= 0 and (B != 1 or upd_row >= n_rows):
        raise ValueError(f"the update buffer needs one document and a row < n_rows (B={B}, row={upd_row})")
    xp = _xp(ell_idx)
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
        import cupy

        docs = (cupy.ascontiguousarray(d_idx, np.int32), cupy.ascontiguousarray(d_w, np.float64),
                cupy.ascontiguousarray(d_len, np.int32))
        if B > 1 and upd_row < 0 and K <= MULTI_MAX_K:
            # micro-batch: each row is read once per MULTI_DOCS documents (same sums as ct_block_max)
            _fn("ct_block_max_multi")(
                (n_blocks, -(-B // MULTI_DOCS)), (BLOCK,),
                (ell_idx, ell_w, np.int64(stride), np.int32(n_rows), np.int32(K), *docs, np.int32(B), bsim, bid))
            _fn("ct_argmax")((B,), (BLOCK,), (bsim, bid, np.int32(n_blocks), best))
            return (best, (bsim, bid)) if return_blocks else best
        if upd_row < 0:
            upd_idx = cupy.empty(1, np.int32)
            upd_w = cupy.empty(1, np.float64)
        _fn("ct_block_max")(
            (n_blocks, B), (BLOCK,),
            (ell_idx, ell_w, np.int64(stride), np.int32(n_rows), np.int32(K), *docs,
             np.int32(upd_row), upd_idx, upd_w, bsim, bid))
        _fn("ct_argmax")((B,), (BLOCK,), (bsim, bid, np.int32(n_blocks), best))
    return (best, (bsim, bid)) if return_blocks else best


def ellpack_scores(ell_idx, ell_w, stride: int, n_rows: int, K: int, d_idx, d_w, d_len):
    """Every similarity: float64 array (B, n_rows) of the input's module (same arithmetic as :func:`ellpack_best`)."""
    _check_docs(d_idx, d_w, d_len, K)
    xp = _xp(ell_idx)
    B = d_idx.shape[0]
    out = xp.zeros((B, n_rows), dtype=np.float64)
    if n_rows == 0 or B == 0:
        return out
    if xp is np:
        _twin_scores(ell_idx, ell_w, stride, n_rows, K, d_idx, d_w, d_len, out)
    else:
        import cupy

        _fn("ct_scores")(
            (-(-n_rows // BLOCK), B), (BLOCK,),
            (ell_idx, ell_w, np.int64(stride), np.int32(n_rows), np.int32(K),
             cupy.ascontiguousarray(d_idx, np.int32), cupy.ascontiguousarray(d_w, np.float64),
             cupy.ascontiguousarray(d_len, np.int32), out))
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
    xp = _xp(ell_idx)
    U = len(rows)
    if U == 0:
        return
    if xp is np:
        ei = ell_idx.reshape(K, stride)
        ew = ell_w.reshape(K, stride)
        ei[:, rows] = np.asarray(r_idx, np.int32).T
        ew[:, rows] = np.asarray(r_w, np.float64).T
        return
    import cupy

    n = U * K
    _fn("ct_scatter")(
        (-(-n // BLOCK),), (BLOCK,),
        (ell_idx, ell_w, np.int64(stride), np.int32(K), np.int32(U),
         cupy.ascontiguousarray(rows, np.int64), cupy.ascontiguousarray(r_idx, np.int32),
         cupy.ascontiguousarray(r_w, np.float64)))


__all__ = ["BLOCK", "MAX_K", "ellpack_best", "ellpack_scores", "ellpack_scatter", "grow", "empty_matrix",
           "to_ellpack", "padded_capacity", "dot_merge"]
