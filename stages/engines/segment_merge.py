"""Merges of segments inside a commit: a run of adjacent segments rewritten as one, without its deleted
documents (Lucene's ``SegmentMerger``; :mod:`cutext.stages.engines.merge_policy` chooses the runs).

A merge takes a consecutive run ``names[a:e]`` of a commit's segments, lays their live documents end to
end in commit order (:func:`cutext.stages.engines.segments.merge_segments`) and writes them as one new
segment in the run's place; the texts, kept columns, term positions and BM25F fields move with them.
Documents keep their order, so the global doc ids (and the ties of equal scores, broken by doc id) are
those before, and a merge changes no statistic of the commit: N, the sum of lengths, df and the kept
vocabulary (``terms.arrow``) are those of the same live documents.
"""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from cutext.stages.engines.phrases import read_live_positions
from cutext.stages.engines.segments import (
    live_segment,
    merge_positions,
    merge_segments,
    read_segment,
    read_segment_columns,
    read_segment_texts,
    write_segment,
)
from cutext.stages.runtime.output import write_json

__all__ = ["SEGMENTS_DIR", "live_run", "merge_commit_runs", "check_runs"]

SEGMENTS_DIR = "segments"


def live_run(folders: list, deletes: list, positions: bool = False) -> dict:
    """The live documents of a run of segments as the arguments of one
    :func:`cutext.stages.engines.segments.write_segment`.

    Parameters
    ----------
    folders : list of pathlib.Path
        The run's segment folders, in commit order.
    deletes : list of int64 arrays
        The deleted local doc numbers of each (empty: none).
    positions : bool, default False
        Move the term positions (an index written with ``positions=True``) with their postings.

    Returns
    -------
    dict
        ``terms``, ``df``, ``doc``, ``tf``, ``lengths``, ``source_ids`` of the live documents in order; with
        ``fields``, ``field_tf``, ``field_lengths`` for BM25F segments, ``texts`` when every segment stores
        them, ``columns`` (their types unified: an int column of one segment and a double of another become
        double) when every segment keeps them, and ``positions`` when asked.

    Raises
    ------
    ArtifactError (ValueError)
        A damaged segment.
    """
    segs = [live_segment(read_segment(f), d) for f, d in zip(folders, deletes)]
    merged = merge_segments(segs)
    staged = {"terms": merged.vocab, "df": merged.df[1:], "doc": merged.doc, "tf": merged.tf,
              "lengths": merged.lengths, "source_ids": merged.source_ids}
    if merged.fields:  # a BM25F index keeps its per-field tf and lengths
        staged.update(fields=merged.fields, field_tf=merged.field_tf, field_lengths=merged.field_lengths)
    texts = [read_segment_texts(f, d) for f, d in zip(folders, deletes)]
    if texts and all(t is not None for t in texts):
        staged["texts"] = pa.concat_arrays(texts)
    del texts
    kept = [read_segment_columns(f, d) for f, d in zip(folders, deletes)]
    if kept and all(t is not None for t in kept):  # the kept columns, their types unified across segments
        staged["columns"] = pa.concat_tables(kept, promote_options="permissive")
    del kept
    if positions:
        staged["positions"] = _merged_positions(folders, deletes, segs, merged)
    return staged


def _merged_positions(folders: list, deletes: list, segs: list, merged) -> np.ndarray:
    """The term positions of merged postings: each segment's live postings' positions
    (:func:`cutext.stages.engines.segments.read_positions`), moved as :func:`merge_segments` moved the postings."""
    pos = [read_live_positions(f, d)[1] for f, d in zip(folders, deletes)]
    return merge_positions(segs, pos, merged)


def check_runs(runs, n: int) -> list:
    """``runs`` as a sorted list of ``(start, end)`` int pairs: each a run of at least one of ``n`` segments,
    disjoint from the others.

    Raises
    ------
    ValueError
        A run that is not a pair of ints with ``0 <= start < end <= n``, or runs that overlap.
    """
    out = []
    for r in runs:
        try:
            a, e = (int(x) for x in r)
        except (TypeError, ValueError):
            raise ValueError(f"a merge run must be a (start, end) pair of segment positions, got {r!r}") from None
        if not 0 <= a < e <= n:
            raise ValueError(f"merge run {(a, e)}: needs 0 <= start < end <= {n} (the commit's segments)")
        out.append((a, e))
    out.sort()
    for (_, e0), (a1, _) in zip(out, out[1:]):
        if a1 < e0:
            raise ValueError(f"merge runs overlap: {out}")
    return out


def merge_commit_runs(tmp, runs, deletes: list, extra: dict | None = None) -> dict:
    """Merge runs of adjacent segments of a commit being written, each into one new segment in its place.

    ``tmp`` holds a whole commit not yet swapped in (``index.json`` written by
    :func:`cutext.stages.engines.index_commits.write_commit`, its segments under ``segments/``, hard links
    or new); each run's live documents become one segment named by the commit's ``next_segment``
    (:func:`live_run`), the run's folders and deletion files leave the commit, and ``index.json`` lists the
    new segments.  A run whose documents are all deleted leaves no segment, unless the commit would keep
    none (then one empty segment, as a compaction of an index without live documents writes).  N, avgdl,
    df, the kept vocabulary and the document counts stay as written: a merge keeps the live documents and
    their order.

    Parameters
    ----------
    tmp : str or os.PathLike
        The commit's temporary directory (sealed at the swap, after this).
    runs : iterable of (int, int)
        ``(start, end)``: the segments ``segments[start:end]`` of ``tmp/index.json`` (:func:`check_runs`).
    deletes : list of int64 arrays
        The deleted local doc numbers of each of the commit's segments
        (:func:`cutext.stages.engines.index_commits.read_deletes` of ``tmp``).
    extra : dict, optional
        Added to the manifest's ``counts`` (e.g. ``{"merged_segments": 12}``).

    Returns
    -------
    dict
        The commit's ``counts``, ``partitions`` the number of segments after the merges.

    Raises
    ------
    ValueError
        Runs that overlap or lie outside the commit's segments, or ``deletes`` of another length.
    ArtifactError (ValueError)
        A damaged segment.
    """
    tmp = Path(tmp)
    t0 = time.perf_counter()
    meta = json.loads((tmp / "index.json").read_text(encoding="utf-8"))
    names = list(meta["segments"])
    if len(deletes) != len(names):
        raise ValueError(f"{len(deletes)} deletion arrays for {len(names)} segments")
    runs = check_runs(runs, len(names))
    spec = dict(meta.get("deletes") or {})
    number = int(meta.get("next_segment", len(names)))
    out, at, empty = [], 0, None
    for a, e in runs:
        out += names[at:a]
        folders = [tmp / SEGMENTS_DIR / n for n in names[a:e]]
        staged = live_run(folders, deletes[a:e], positions=meta.get("positions") is True)
        if len(staged["lengths"]):
            out.append(_write_next(tmp, number, staged))
            number += 1
        else:  # no live document: the run leaves no segment
            empty = staged
        del staged
        for n, f in zip(names[a:e], folders):
            shutil.rmtree(f)
            if n in spec:
                (tmp / "deletes" / spec.pop(n)).unlink()
        at = e
    out += names[at:]
    if not out and empty is not None:  # a commit keeps one segment, empty as a compaction of no live document
        out.append(_write_next(tmp, number, empty))
        number += 1
    if (tmp / "deletes").is_dir() and not any((tmp / "deletes").iterdir()):
        (tmp / "deletes").rmdir()
    counts = {**meta["counts"], "partitions": len(out), **(extra or {})}
    timings = {**(meta.get("timings") or {}), "merge": time.perf_counter() - t0}
    write_json(tmp / "index.json", {**meta, "segments": out, "deletes": spec, "next_segment": number,
                                    "counts": counts, "timings": timings})
    return counts


def _write_next(tmp: Path, number: int, staged: dict) -> str:
    """Write ``staged`` as the commit's segment ``seg-<number>``; its name."""
    name = f"seg-{number:05d}"
    write_segment(tmp / SEGMENTS_DIR / name, **staged)
    return name
