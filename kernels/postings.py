"""Host kernels of the segmented index's load (numba): the postings of a segment placed in the merged CSR.

:func:`cutext.stages.engines.segments.merge_segments` lays segments end to end: local term ``j`` of a
segment owns the slots ``start[j] : start[j] + df[j]`` of the merged CSR (after the same term's postings of
the earlier segments), and its postings ``offsets[j] : offsets[j + 1]`` go there in order.  On the GPU the
scatter runs on the device (cupy, :func:`cutext.stages.engines.segments._scatter_on_device`); on the host
:func:`place_runs` copies each term's run as one contiguous block, the terms on numba's threads, instead of
a fancy-indexed store per posting.
"""
from __future__ import annotations

import cutext.kernels._numba_cache  # noqa: F401  # before the decorators: it places and stamps their cache
import numba
import numpy as np
from numba import prange

__all__ = ["place_runs"]


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
