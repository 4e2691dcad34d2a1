"""kernels/postings.py: a segment's runs placed in the merged CSR, against the per-posting scatter."""
from __future__ import annotations

import numpy as np
import pytest

from cutext.kernels.postings import place_runs


def _runs(rng, m, total_extra):
    """m runs (some empty) of a source, and a destination where each run owns disjoint, shuffled slots."""
    lengths = rng.integers(0, 6, m)
    lengths[rng.random(m) < 0.2] = 0
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    gaps = rng.integers(0, 3, m)  # other segments' postings between this one's runs
    order = rng.permutation(m)  # terms' slots in another order than the runs
    start = np.empty(m, np.int64)
    pos = 0
    for j in order:
        pos += gaps[j]
        start[j] = pos
        pos += lengths[j]
    return start, offsets, pos + total_extra


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_runs_land_where_the_per_posting_scatter_puts_them(dtype):
    rng = np.random.default_rng(7)
    start, offsets, n = _runs(rng, 400, 5)
    src = rng.integers(0, 1000, offsets[-1]).astype(np.int32)
    dst = np.full(n, -1, dtype)
    place_runs(start, offsets, src, dst, add=12345)
    want = np.full(n, -1, dtype)
    dest = np.repeat(start - offsets[:-1], np.diff(offsets)) + np.arange(offsets[-1])
    want[dest] = src.astype(dtype) + 12345
    np.testing.assert_array_equal(dst, want)


def test_runs_outside_the_arrays_are_refused_and_nothing_is_written():
    dst = np.zeros(4, np.int32)
    with pytest.raises(ValueError, match="outside"):
        place_runs(np.array([2]), np.array([0, 3]), np.arange(3, dtype=np.int32), dst)  # 2 + 3 > 4
    with pytest.raises(ValueError, match="outside"):
        place_runs(np.array([0]), np.array([0, 5]), np.arange(3, dtype=np.int32), dst)  # past src
    with pytest.raises(ValueError, match="offsets"):
        place_runs(np.array([0, 1]), np.array([0, 1]), np.arange(3, dtype=np.int32), dst)
    assert not dst.any()
    place_runs(np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int32), dst)  # no run: nothing
    assert not dst.any()
