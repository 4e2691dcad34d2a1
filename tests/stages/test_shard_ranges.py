"""shard_ranges: contiguous ranges of items (documents or segments) of about equal weight."""
import numpy as np
import pytest

from cutext.stages.engines.bm25_index import shard_ranges


def _check_cover(ranges, n):
    assert ranges[0][0] == 0 and ranges[-1][1] == n
    assert all(a < b for a, b in ranges)
    assert all(r[1] == q[0] for r, q in zip(ranges, ranges[1:]))


@pytest.mark.parametrize("n_shards", [1, 2, 3, 4, 7])
def test_few_large_items_cut_at_the_nearest_boundary(n_shards):
    # 16 segments of nearly equal postings (one a little larger, as the partitions of a real build are):
    # every shard gets the same number of segments, give or take one
    rng = np.random.default_rng(0)
    lengths = rng.integers(9_900_000, 10_100_000, 16)
    ranges = shard_ranges(lengths, n_shards)
    _check_cover(ranges, 16)
    assert len(ranges) == n_shards
    sizes = [b - a for a, b in ranges]
    assert max(sizes) - min(sizes) <= 1


def test_first_boundary_past_the_share_is_not_taken_when_the_one_before_is_nearer():
    # the half of 4 equal-ish segments falls just before the end of segment 2: the cut is after segment 2,
    # not after segment 1 (which would give one shard a quarter of the work)
    assert shard_ranges(np.array([10, 11, 10, 10]), 2) == [(0, 2), (2, 4)]
    assert shard_ranges(np.array([100, 1, 1]), 2) == [(0, 1), (1, 3)]
    assert shard_ranges(np.array([1, 1, 100]), 2) == [(0, 2), (2, 3)]


def test_many_documents_balance_the_weight():
    rng = np.random.default_rng(1)
    lengths = rng.integers(0, 500, 10_000)
    for n in (2, 3, 8):
        ranges = shard_ranges(lengths, n)
        _check_cover(ranges, len(lengths))
        w = np.array([lengths[a:b].sum() + (b - a) for a, b in ranges], np.float64)
        assert w.max() / w.mean() < 1.01


def test_fewer_items_than_shards_and_empty():
    assert shard_ranges(np.array([3]), 4) == [(0, 1)]
    assert shard_ranges(np.array([1, 1]), 4) == [(0, 1), (1, 2)]
    assert shard_ranges(np.zeros(0), 3) == []
