"""The merge policy on its own (:mod:`cutext.stages.engines.merge_policy`): runs of adjacent segments, disjoint,
a window of ``merge_factor`` at a time; a segment count that grows as log n under n equal appends; forced
merges to ``max_segments``; and its refusals."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cutext.stages.engines.merge_policy import MAX_SIZE, MERGE_FACTOR, plan_forced_merges, plan_merges


def _apply(sizes: list, runs) -> list:
    """The segment sizes after merging ``runs`` (each run becomes one segment of their summed size)."""
    out, at = [], 0
    for a, e in runs:
        out += sizes[at:a] + [sum(sizes[a:e])]
        at = e
    return out + sizes[at:]


def _appends(n: int, size: float, **kw) -> tuple[int, int]:
    """Segments after ``n`` appends of one segment of ``size`` each, the policy applied at every commit; and
    the most segments seen after any commit."""
    segs, most = [], 0
    for _ in range(n):
        segs = _apply(segs + [size], plan_merges(segs + [size], **kw))
        most = max(most, len(segs))
    return len(segs), most


def _check_runs(runs, n: int) -> None:
    assert runs == sorted(runs)
    for a, e in runs:
        assert 0 <= a < e <= n
    for (_, e0), (a1, _) in zip(runs, runs[1:]):
        assert e0 <= a1  # disjoint


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1e7), max_size=60), st.data(), st.integers(2, 12))
def test_runs_are_adjacent_disjoint_and_full_windows(sizes, data, merge_factor):
    deleted = data.draw(st.lists(st.floats(0, 1e7), min_size=len(sizes), max_size=len(sizes)))
    runs = plan_merges(sizes, deleted, merge_factor=merge_factor)
    _check_runs(runs, len(sizes))
    for a, e in runs:
        if e - a > 1:
            assert e - a == merge_factor
        else:  # a segment rewritten alone: more than half of it deleted
            assert deleted[a] > sizes[a]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0, 1e7), min_size=1, max_size=60), st.integers(1, 20))
def test_forced_merges_leave_at_most_max_segments(sizes, max_segments):
    runs = plan_forced_merges(sizes, max_segments=max_segments)
    _check_runs(runs, len(sizes))
    assert all(e - a > 1 for a, e in runs)
    assert len(_apply(list(sizes), runs)) == min(len(sizes), max_segments)


@pytest.mark.parametrize("size", [150.0, 47_000.0, 3e6])
@pytest.mark.parametrize("min_size", [1, 1 << 16])
def test_n_equal_appends_keep_a_logarithmic_number_of_segments(size, min_size):
    for n in (30, 300, 3000):
        last, most = _appends(n, size, min_size=min_size, max_size=math.inf)
        # a base-10 counter: at most merge_factor - 1 segments a level, a level per power of merge_factor
        bound = MERGE_FACTOR * (math.log(n, MERGE_FACTOR) + 2)
        assert most <= bound, (n, most, bound)
        assert last <= most
    assert _appends(3000, size, merge_factor=4, min_size=min_size, max_size=math.inf)[1] <= 4 * (math.log(3000, 4) + 2)


def test_appends_of_mixed_sizes_stay_bounded():
    """Small appends between large ones (tiny segments beside big ones in one level) do not pile up."""
    rng = np.random.default_rng(7)
    segs, most = [], 0
    for i in range(2000):
        segs.append(float(rng.integers(100, 300)) * (1000 if i % 7 == 0 else 1))
        segs = _apply(segs, plan_merges(segs))
        most = max(most, len(segs))
    assert most <= MERGE_FACTOR * (math.log(2000, MERGE_FACTOR) + 3)


def test_levels_merge_ten_of_a_kind_and_leave_fewer_alone():
    big, small = 1e8, 1e5
    assert plan_merges([big] + [small] * 9) == []
    assert plan_merges([big] + [small] * 10) == [(1, 11)]  # the big one is a level of its own
    assert plan_merges([small] * 25) == [(0, 10), (10, 20)]
    assert plan_merges([small] * 10, merge_factor=5) == [(0, 5), (5, 10)]
    # sizes below min_size form one level, whatever their spread
    assert plan_merges([1, 50_000, 3, 200, 9, 9, 9, 9, 9, 9]) == [(0, 10)]


def test_segments_of_max_size_are_in_no_merge():
    """A build's full-partition segments (MAX_SIZE or more) stay as they are: an append onto them merges only
    the small segments between and after them, never the index."""
    big, small = float(MAX_SIZE), 1e5
    assert plan_merges([big] * 136) == []  # 16 GB built on one GPU, then 2 GB appended: nothing rewritten
    assert plan_merges([big] * 20, max_size=math.inf) == [(0, 10), (10, 20)]
    # the windows are planned in the stretches between large segments
    assert plan_merges([small] * 9 + [big] + [small] * 10) == [(10, 20)]
    assert plan_merges([small] * 12 + [big] * 3 + [small] * 5) == [(0, 10)]
    assert plan_merges([big, big], [0, 1.5 * big]) == [(1, 2)]  # a large segment mostly deleted: rewritten alone
    last, most = _appends(3000, 1e6)  # equal appends past the cap: one segment a MAX_SIZE or so, never more
    assert most <= 3000 * 1e6 / MAX_SIZE + MERGE_FACTOR * (math.log(MAX_SIZE / 1e6, MERGE_FACTOR) + 2)
    with pytest.raises(ValueError, match="max_size"):
        plan_merges([1.0], max_size=0)


def test_mostly_deleted_segments_are_rewritten_alone():
    assert plan_merges([1e6, 1e6, 1e6], [0, 1.1e6, 0]) == [(1, 2)]
    assert plan_merges([1e6, 1e6], [0, 0.9e6]) == []  # less than half deleted
    assert plan_merges([0.0, 1e6], [5.0, 0]) == [(0, 1)]  # all deleted
    assert plan_merges([1e6, 1e6], [0, 1.1e6], max_deleted=1.0) == []
    assert plan_merges([1e5] * 10, [0] * 9 + [1e6]) == [(0, 10)]  # merged with its level: not twice


def test_forced_merges_join_the_smallest_neighbours():
    assert plan_forced_merges([10, 1, 1, 10], max_segments=3) == [(1, 3)]
    assert plan_forced_merges([5, 5, 5, 5], max_segments=2) == [(0, 2), (2, 4)]
    assert plan_forced_merges([5, 5], max_segments=1) == [(0, 2)]
    assert plan_forced_merges([5], max_segments=1) == []
    assert plan_forced_merges([5], [1], max_segments=1) == [(0, 1)]  # forceMerge(1) drops deletions
    assert plan_forced_merges([5, 5], [1, 1], max_segments=2) == []


@pytest.mark.parametrize("kw, match", [
    (dict(sizes=[1, -1]), "finite and >= 0"),
    (dict(sizes=[1, float("nan")]), "finite and >= 0"),
    (dict(sizes=[1, 2], deleted=[1]), "one length"),
    (dict(sizes=[[1, 2]]), "1-d"),
    (dict(sizes=[1], merge_factor=1), "merge_factor=1: must be an integer >= 2"),
    (dict(sizes=[1], merge_factor=2.5), "merge_factor"),
    (dict(sizes=[1], merge_factor=True), "merge_factor"),
    (dict(sizes=[1], max_deleted=1.5), "max_deleted"),
    (dict(sizes=[1], min_size=-1), "min_size"),
])
def test_bad_arguments_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        plan_merges(**kw)


def test_bad_max_segments_is_refused():
    for bad in (0, -1, 1.5, None, True):
        with pytest.raises(ValueError, match="max_segments"):
            plan_forced_merges([1, 2], max_segments=bad)
