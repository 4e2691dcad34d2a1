"""The merge policy of a segmented BM25 index: which runs of adjacent segments a commit merges, so that many
small appends do not leave as many segments (each costs every load and search a fixed share).

The policy is Lucene's ``LogByteSizeMergePolicy`` (``LogMergePolicy.findMerges``), not its default
``TieredMergePolicy``: a merge takes only ADJACENT segments (a consecutive run in commit order), as
LogMergePolicy's do, so the documents keep their order, global doc ids stay in commit order, and search
(ties of equal scores broken by doc id) stays equal to a one-shot build of the live documents; Tiered
merges segments of any positions, which reorders documents.  A segment's size is its live postings
(``n_postings`` pro-rated by its live documents, as Lucene's ``calibrateSizeByDeletes``); its level is
``log(size) / log(merge_factor)``, sizes below ``min_size`` counted as ``min_size`` (Lucene's
``minMergeSize``: the tiny segments of small appends form one level); from the first segment, a level is
every segment up to the last one within 0.75 of the largest level left (Lucene's ``LEVEL_LOG_SPAN``), and
each full window of ``merge_factor`` adjacent segments of a level is merged into one of the next level,
unless the merge would not be 1.5 times its largest segment (then the window slides on by one segment; the
floored level merges whatever its sizes, each small, so that tiny segments never pile up beside a larger
one).  A segment not merged so whose deleted share exceeds ``max_deleted`` is rewritten alone (its deleted
documents dropped, as Tiered's ``deletesPctAllowed``).  With ``n`` appends of equal size the index keeps
O(merge_factor * log n) segments, and a posting of segments over ``min_size`` is rewritten O(log n) times.
A segment of ``max_size`` live postings or more (``MAX_SIZE``, a build's full partition; Lucene's
``maxMergeMB``) is in no merge: a commit merges in place, so an append never rewrites the index's large
segments, and segments past that size grow in number as the index does, as Lucene's past ``maxMergeMB``.

:func:`plan_merges` and :func:`plan_forced_merges` are pure; :func:`merge_on_commit` applies the policy to
an append's commit before it is swapped in, :func:`commit_merges` makes a commit of merges on request
(``BM25Index.merge``, ``bm25-merge``).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from cutext.stages.engines.index_commits import KIND, read_deletes, segmented_commit, write_commit
from cutext.stages.engines.segment_merge import SEGMENTS_DIR, merge_commit_runs
from cutext.stages.runtime import artifacts as art
from cutext.stages.runtime.output import atomic_directory
from cutext.stages.runtime.params import choice, param

__all__ = ["MERGE_POLICIES", "MERGE_FACTOR", "MIN_SIZE", "MAX_DELETED", "MAX_SIZE", "check_merge_policy", "plan_merges",
           "plan_forced_merges", "segment_sizes", "merge_on_commit", "commit_merges"]

MERGE_POLICIES = ("tiered", "none")
MERGE_FACTOR = 10  # Lucene's LogMergePolicy.DEFAULT_MERGE_FACTOR
# sizes below this many live postings are one level (Lucene's minMergeMB of 1.6 MB, at about 2.5 bytes a posting)
MIN_SIZE = 1 << 16
MAX_DELETED = 0.5  # a segment more than half deleted is rewritten
# a segment of this many live postings or more is not merged by the policy (Lucene's LogByteSizeMergePolicy
# maxMergeMB): a commit merges in place, not in a background thread as Lucene's do, so it leaves alone the
# segments of a build's full partitions (64 MiB of text on the CPU, about 5 M postings; 128 MiB on the GPU) and
# an append costs about its own build, not a rewrite of the index
MAX_SIZE = 1 << 22
_LEVEL_SPAN = 0.75  # Lucene's LEVEL_LOG_SPAN: the sizes of one level, in powers of merge_factor


def check_merge_policy(value) -> str:
    """``value`` if it is one of :data:`MERGE_POLICIES`, else a ValueError naming ``merge_policy``."""
    return choice("merge_policy", value, MERGE_POLICIES)


def _sizes(sizes, deleted) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(sizes, np.float64)
    d = np.zeros(len(s)) if deleted is None else np.asarray(deleted, np.float64)
    if s.ndim != 1 or d.shape != s.shape:
        raise ValueError(f"sizes and deleted must be 1-d of one length, got shapes {s.shape} and {d.shape}")
    if not (np.isfinite(s).all() and np.isfinite(d).all()) or (s < 0).any() or (d < 0).any():
        raise ValueError("sizes and deleted must be finite and >= 0")
    return s, d


def _check_int(name: str, value, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
        raise ValueError(f"{param(name, value)}: must be an integer >= {lo}")
    return int(value)


def plan_merges(sizes, deleted=None, *, merge_factor: int = MERGE_FACTOR, min_size: float = MIN_SIZE,
                max_deleted: float = MAX_DELETED, max_size: float = MAX_SIZE) -> list[tuple[int, int]]:
    """The runs of adjacent segments to merge (Lucene's ``LogMergePolicy.findMerges``, module docstring).

    Only adjacent segments are merged, LogMergePolicy's rule (TieredMergePolicy merges any): the documents
    keep their order, so ties of equal scores, broken by doc id, and with them search stay those of a
    one-shot build of the live documents.

    Parameters
    ----------
    sizes : sequence of float, shape (n,)
        Each segment's live size in commit order (live postings; any unit, >= 0).
    deleted : sequence of float, shape (n,), optional
        Each segment's deleted size, in the unit of ``sizes`` (default: none deleted).
    merge_factor : int, default 10
        Segments merged at once, and the size ratio of one level to the next (>= 2).
    min_size : float, default 65536
        Sizes below it count as it: the smallest segments form one level.
    max_deleted : float, default 0.5
        A segment not otherwise merged whose deleted share ``deleted / (sizes + deleted)`` exceeds it is
        rewritten alone (a run of one); 1 never rewrites one.
    max_size : float, default 4194304
        A segment of this size or more is in no merge (Lucene's ``maxMergeMB``): the runs are planned in
        each stretch between such segments; ``math.inf`` merges any.  The deletion rule above still applies.

    Returns
    -------
    list of (int, int)
        ``(start, end)`` runs ``segments[start:end]``, ascending, disjoint; a run of several segments holds
        ``merge_factor`` of them.

    Raises
    ------
    ValueError
        ``sizes`` and ``deleted`` of other shapes, negative or not finite; ``merge_factor`` not an int >= 2;
        ``min_size`` negative; ``max_deleted`` outside [0, 1]; ``max_size`` not a number > 0.
    """
    s, d = _sizes(sizes, deleted)
    merge_factor = _check_int("merge_factor", merge_factor, 2)
    if not (isinstance(min_size, (int, float, np.number)) and math.isfinite(min_size) and min_size >= 0):
        raise ValueError(f"{param('min_size', min_size)}: must be a number >= 0")
    if not (isinstance(max_deleted, (int, float, np.number)) and 0 <= max_deleted <= 1):
        raise ValueError(f"{param('max_deleted', max_deleted)}: must be a share in [0, 1]")
    if not (isinstance(max_size, (int, float, np.number)) and max_size > 0):
        raise ValueError(f"{param('max_size', max_size)}: must be a number > 0 (math.inf: no limit)")
    n = len(s)
    runs, start = [], 0
    for end in [*np.flatnonzero(s >= max_size).tolist(), n]:  # the stretches between segments too large to merge
        runs += [(start + a, start + e) for a, e in _level_runs(s[start:end], merge_factor, min_size)]
        start = end + 1
    covered = np.zeros(n, bool)
    for a, e in runs:
        covered[a:e] = True
    total = s + d
    share = np.divide(d, total, out=np.zeros(n), where=total > 0)
    runs += [(int(i), int(i) + 1) for i in np.flatnonzero(~covered & (share > max_deleted))]
    return sorted(runs)


def _level_runs(s: np.ndarray, merge_factor: int, min_size: float) -> list[tuple[int, int]]:
    """The windows of ``merge_factor`` adjacent segments of one level that :func:`plan_merges` merges, in a
    stretch of segments that may all be merged."""
    n = len(s)
    level = np.log(np.maximum(s, max(min_size, 1.0))) / math.log(merge_factor)
    floor = math.log(max(min_size, 1.0)) / math.log(merge_factor)
    runs, start = [], 0
    while start < n:
        top = float(level[start:].max())
        bottom = -math.inf if top <= floor else max(top - _LEVEL_SPAN, floor)
        upto = start + int(np.flatnonzero(level[start:] >= bottom)[-1])  # the level's last segment
        guard = bottom > floor  # a level of floored segments merges whatever its sizes: each is small
        while start + merge_factor <= upto + 1:
            window = s[start:start + merge_factor]
            if guard and window.sum() < 1.5 * window.max():  # it would mostly rewrite one segment: slide on
                start += 1
                continue
            runs.append((start, start + merge_factor))
            start += merge_factor
        start = upto + 1
    return runs


def plan_forced_merges(sizes, deleted=None, *, max_segments: int = 1) -> list[tuple[int, int]]:
    """The runs of adjacent segments that leave at most ``max_segments`` (Lucene's ``forceMerge(n)``).

    The two adjacent groups of the smallest total size are joined until ``max_segments`` groups remain, so
    the runs stay balanced; a group of several segments is a run.  ``max_segments=1`` rewrites even a single
    segment that has deletions (a compaction).

    Parameters
    ----------
    sizes, deleted : sequence of float, shape (n,)
        As :func:`plan_merges`.
    max_segments : int, default 1
        At most this many segments after the merges (>= 1).

    Returns
    -------
    list of (int, int)
        Ascending, disjoint runs; empty when the index has no more than ``max_segments`` segments (and,
        for 1, no deletions).

    Raises
    ------
    ValueError
        ``max_segments`` not an int >= 1, or bad ``sizes`` / ``deleted`` (:func:`plan_merges`).
    """
    s, d = _sizes(sizes, deleted)
    max_segments = _check_int("max_segments", max_segments, 1)
    n = len(s)
    if n <= max_segments:
        return [(0, 1)] if n == 1 and max_segments == 1 and d[0] > 0 else []
    starts, totals = list(range(n)), list(s)
    while len(starts) > max_segments:
        j = int(np.argmin(np.add(totals[:-1], totals[1:])))  # join groups j and j + 1
        totals[j:j + 2] = [totals[j] + totals[j + 1]]
        del starts[j + 1]
    ends = starts[1:] + [n]
    return [(a, e) for a, e in zip(starts, ends) if e - a > 1]


def segment_sizes(commit, meta: dict, deletes: list) -> tuple[np.ndarray, np.ndarray]:
    """The live and deleted sizes of a commit's segments for :func:`plan_merges`, from their ``segment.json``
    alone (no postings read): ``n_postings`` shared between live and deleted documents by their counts.

    Parameters
    ----------
    commit : str or os.PathLike
        The commit's directory (an index, or a commit being written).
    meta : dict
        Its manifest (``segments``).
    deletes : list of int64 arrays
        The deleted local doc numbers of each segment.

    Returns
    -------
    (float64 array, float64 array), shape (n_segments,) each

    Raises
    ------
    ArtifactError (ValueError)
        A segment without a readable ``segment.json`` or its counts.
    """
    live, gone = [], []
    for n, d in zip(meta["segments"], deletes):
        folder = Path(commit) / SEGMENTS_DIR / n
        seg = art.read_manifest(folder, "segment.json", "cutext.segment", "a cutext segment", verify=False)
        docs = art.field_int(seg, "n_docs", folder / "segment.json", lo=0)
        postings = art.field_int(seg, "n_postings", folder / "segment.json", lo=0)
        share = len(np.unique(d)) / docs if docs else 0.0
        live.append(postings * (1 - share))
        gone.append(postings * share)
    return np.array(live, np.float64), np.array(gone, np.float64)


def merge_on_commit(tmp, merge_policy: str, counts: dict, *, merge_factor: int = MERGE_FACTOR) -> dict:
    """Apply ``merge_policy`` to a commit written into ``tmp`` and not yet swapped in (an append's): the
    runs :func:`plan_merges` chooses are merged in the same commit
    (:func:`cutext.stages.engines.segment_merge.merge_commit_runs`).

    Parameters
    ----------
    tmp : pathlib.Path
        The commit's temporary directory (``index.json`` written by
        :func:`cutext.stages.engines.index_commits.write_commit`).
    merge_policy : {"tiered", "none"}
        ``"none"`` merges nothing.
    counts : dict
        The commit's counts, returned as they are when nothing is merged.
    merge_factor : int, default 10

    Returns
    -------
    dict
        The commit's counts; with ``merged_segments`` (the segments merged away) when a merge ran.

    Raises
    ------
    ValueError
        ``merge_policy`` not one of :data:`MERGE_POLICIES`.
    """
    if check_merge_policy(merge_policy) == "none":
        return counts
    tmp = Path(tmp)
    meta = json.loads((tmp / "index.json").read_text(encoding="utf-8"))
    deletes = read_deletes(tmp, meta, meta["segments"])
    runs = plan_merges(*segment_sizes(tmp, meta, deletes), merge_factor=merge_factor)
    if not runs:
        return counts
    return merge_commit_runs(tmp, runs, deletes, {"merged_segments": sum(e - a for a, e in runs)})


def commit_merges(index, max_segments: int | None = None, *, merge_factor: int = MERGE_FACTOR) -> dict:
    """Merge a segmented index's segments on request: a new commit with the runs of the merge policy
    (:func:`plan_merges`, Lucene's ``maybeMerge``) or, with ``max_segments``, those that leave at most that
    many segments (:func:`plan_forced_merges`, Lucene's ``forceMerge``).  Search and scores are unchanged.

    Parameters
    ----------
    index : str or os.PathLike
        A segmented index.
    max_segments : int, optional
        At most this many segments afterwards (>= 1; 1 is a compaction); None: the policy's merges.
    merge_factor : int, default 10
        As :func:`plan_merges`.

    Returns
    -------
    dict
        The counts of the index afterwards, with ``merged_segments`` (0: nothing to merge, and no new commit
        is written).

    Raises
    ------
    ArtifactError (ValueError)
        Not a segmented cutext bm25 index (a format-1 one: the message names ``bm25-convert``), or a damaged
        one.
    ValueError
        ``max_segments`` or ``merge_factor`` not an integer of their range.
    OutputBusyError
        Another writer committed to the index meanwhile; nothing is written.
    """
    index = Path(index)
    if max_segments is not None:
        _check_int("max_segments", max_segments, 1)
    _check_int("merge_factor", merge_factor, 2)
    old, expect = segmented_commit(index, "merging segments")
    names = old["segments"]
    deletes = read_deletes(index, old, names)
    sizes = segment_sizes(index, old, deletes)
    runs = (plan_merges(*sizes, merge_factor=merge_factor) if max_segments is None
            else plan_forced_merges(*sizes, max_segments=max_segments))
    if not runs:
        return {**old.get("counts", {}), "merged_segments": 0}
    extra = {"merged_segments": sum(e - a for a, e in runs)}
    with atomic_directory(index, kind=KIND, manifest="index.json", expect=expect) as tmp:
        write_commit(tmp, index, old, names, deletes, extra)
        return merge_commit_runs(tmp, runs, deletes)
