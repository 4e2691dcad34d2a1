"""Term-major BM25 postings without a shuffle of the whole table: term ranges cut from every counts
partition (the route :func:`cutext.stages.text.public.bm25` takes when the postings span several partitions).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from cutext.kernels.backend import array_module, to_host, values
from cutext.stages.runtime.compute import StepClock, cluster_workers, on_worker, partition_homes, shared_key
from cutext.stages.text.count import run_lengths
from cutext.stages.text.sort import sort_frame_by_pairs


def _drop_dl(df):
    return df[["term_id", "doc_id", "tf", "weight"]]


def _term_cuts(part, divisions):
    """A counts partition (sorted by term) as ``(cuts, columns)``: its columns as arrays and the row
    where each term range starts, ``cuts[i]`` = first row with ``term_id >= divisions[i]``, the last
    cut after the rows ``<= divisions[-1]`` (the last range is closed).  One search and one copy to
    the host for all the ranges of the partition."""
    t = values(part["term_id"])
    xp = array_module(t)
    d = np.asarray(divisions, dtype=np.int64)
    cuts = xp.concatenate([xp.searchsorted(t, xp.asarray(d[:-1], dtype=t.dtype), side="left"),
                           xp.searchsorted(t, xp.asarray(d[-1:], dtype=t.dtype), side="right")])
    return to_host(cuts).astype(np.int64), {c: values(part[c]) for c in part.columns}


def _term_slice(cut, i: int) -> dict:
    """The rows of term range ``i`` of a partition cut by :func:`_term_cuts`: views of its columns."""
    cuts, cols = cut
    a, e = int(cuts[i]), int(cuts[i + 1])
    return {c: v[a:e] for c, v in cols.items()}


def _concat_slices(slices: list, own: bool = False) -> dict:
    """Slices (dicts of column arrays) as one dict: the non-empty ones concatenated; a lone slice is
    returned as it is (views), or copied when ``own`` (a frame of its own, not of the partition)."""
    kept = [s for s in slices if len(next(iter(s.values())))] or slices[:1]
    if len(kept) == 1:
        return {c: v.copy() for c, v in kept[0].items()} if own else kept[0]
    xp = array_module(next(iter(kept[0].values())))
    return {c: xp.concatenate([s[c] for s in kept]) for c in kept[0]}


# the rows a term range takes from another worker are weighted there and sent packed (term ids as
# runs, doc ids int32 and tf uint16 where they fit, no dl): 10 bytes a posting instead of 20 on the comm
PACK_REMOTE_SLICES = True


def _term_slices(cuts: list, i: int, weight_fn, pack: bool = True):
    """Term range ``i``'s rows of several cut partitions (those on one worker): what moves to the
    range's worker, one transfer a worker instead of one a partition.  Weighted here and packed
    (:class:`_PackedRows`, sent as the plain tuple of its arrays), or (``pack`` False) one dict of the
    counts' column arrays.

    A tuple or dict of arrays, not an object: distributed serializes each array of a plain container
    by itself, so over UCX device arrays go device to device (CUDA IPC), where an object of its own
    class is pickled through host memory (74 MB of packed rows between two
    workers in 17 ms as a tuple, 140 ms as the dataclass).  dask also sizes the container by its arrays."""
    rows = _concat_slices([_term_slice(c, i) for c in cuts])
    return _pack_rows(rows, weight_fn).astuple() if pack else rows


@dataclass
class _PackedRows:
    """Weighted postings in few bytes: ``terms`` / ``runs`` the term ids as runs (in row order),
    ``doc_id`` (int32 when the ids fit), ``tf`` (uint16 when the counts fit), ``weight`` float32."""

    terms: object
    runs: object
    doc_id: object
    tf: object
    weight: object

    def astuple(self) -> tuple:
        """``(terms, runs, doc_id, tf, weight)``: what travels between workers; ``_PackedRows(*t)`` again."""
        return (self.terms, self.runs, self.doc_id, self.tf, self.weight)

    def unpack(self) -> dict:
        """``(term_id: int32, doc_id: int64, tf: int32, weight: float32)`` column arrays."""
        xp = array_module(self.doc_id)
        if xp is np:
            t = np.repeat(self.terms, self.runs)
        else:
            t = self.terms[xp.searchsorted(xp.cumsum(self.runs), xp.arange(len(self.doc_id)), side="right")]
        return {"term_id": t.astype(np.int32, copy=False), "doc_id": self.doc_id.astype(np.int64, copy=False),
                "tf": self.tf.astype(np.int32, copy=False), "weight": self.weight}


def _pack_rows(rows: dict, weight_fn) -> _PackedRows:
    """:class:`_PackedRows` of ``(term_id, doc_id, tf, dl)`` column arrays, weighted by ``weight_fn``."""

    t, d, tf = rows["term_id"], rows["doc_id"], rows["tf"]
    xp = array_module(t)
    w = weight_fn.weights(t, tf, rows["dl"])
    terms, runs = run_lengths(t)
    if len(t):  # one copy to the host for the three bounds
        lo_d, hi_d, hi_tf = (int(v) for v in to_host(xp.stack([d.min(), d.max(), tf.max().astype(d.dtype)])))
        if lo_d >= 0 and hi_d < 2**31:
            d = d.astype(np.int32)
        if 0 <= hi_tf < 2**16:
            tf = tf.astype(np.uint16)
    return _PackedRows(terms, runs.astype(np.int32), d, tf, w)


def _is_packed(part) -> bool:
    """Packed rows (:meth:`_PackedRows.astuple`, five arrays), not a cut partition ``(cuts, columns)``."""
    return isinstance(part, tuple) and len(part) == 5


def _term_range(parts, i: int, weight_fn):
    """Term range ``i`` of the postings: its rows of every counts partition (``parts``: partitions cut by
    :func:`_term_cuts` on this worker, or what :func:`_term_slices` sent from other workers), in one
    frame (cudf for device arrays, else pandas), weighted, sorted by (term_id, doc_id)."""

    rows = [_PackedRows(*p).unpack() for p in parts if _is_packed(p)]  # weighted where they were cut
    slices = [p if isinstance(p, dict) else _term_slice(p, i) for p in parts if not _is_packed(p)]
    xp = array_module(next(iter((slices or rows)[0].values())))
    clock = StepClock(xp)
    if slices:
        cols = _concat_slices(slices, own=True)
        rows.insert(0, {"term_id": cols["term_id"], "doc_id": cols["doc_id"], "tf": cols["tf"],
                        "weight": weight_fn.weights(cols["term_id"], cols["tf"], cols["dl"])})
    cols = _concat_slices(rows)
    if xp is np:
        df = pd.DataFrame(cols)
    else:
        import cudf

        df = cudf.DataFrame(cols)
    clock("weight: concat + weights")
    df = sort_frame_by_pairs(df)
    clock("weight: sort")
    return df


def _term_ranges(counts, divisions, weight_fn) -> tuple[list, list | None]:
    """Term-major postings without a shuffle of the whole table (bounded memory), as one
    delayed frame per term range, and the workers they were spread over (None: not spread).

    ``counts`` partitions are sorted by term, so the postings of a term range are a slice of every
    partition: range ``i`` concatenates the rows of ``[div_i, div_{i+1})`` of every partition
    (:func:`cutext.stages.text.sort.term_divisions`, the last range closed), weights and sorts them.
    Same partitions and rows as :func:`cutext.stages.text.sort.term_major`.  Each partition is searched
    once for the first row of every range (:func:`_term_cuts`).  In-process or on one worker a range
    task takes those cut partitions themselves (no task a slice).  On a distributed cluster range ``i``
    goes preferably to worker ``i`` mod the workers (:func:`cutext.stages.runtime.compute.on_worker`; left to
    the scheduler, every range went where most of its slices were, all on one worker of two); it takes
    the cut partitions of its own worker, and from every other worker one :func:`_term_slices` task,
    made there, with its rows of that worker's partitions (one transfer a worker, not one a partition).
    """
    import dask

    workers = cluster_workers()
    placed = partition_homes(counts) if workers else None
    if placed is None:  # in-process, one worker, or partitions that are not futures: no placement
        parts, homes, workers = counts.to_delayed(), None, None
    else:  # cut partition j where it is (else it would follow its range's annotation)
        parts, homes = placed
    cut = []
    for j, p in enumerate(parts):  # each partition searched once for every range's first row
        with on_worker(j, homes):
            cut.append(dask.delayed(_term_cuts)(p, list(divisions)))
    wf = shared_key(weight_fn)  # idf: V + 1 floats, one key for every range and slice task
    groups = {}  # worker -> its partitions, in partition order
    for j, h in enumerate(homes or ()):
        groups.setdefault(h, []).append(j)
    out = []
    for i in range(len(divisions) - 1):
        if homes is None:
            inputs = cut
        else:
            here = workers[i % len(workers)]
            inputs = [cut[j] for j in groups.get(here, ())]
            for h, js in groups.items():
                if h != here:
                    with on_worker(js[0], homes):
                        inputs.append(dask.delayed(_term_slices)([cut[j] for j in js], i, wf, PACK_REMOTE_SLICES))
        with on_worker(i, workers):
            out.append(dask.delayed(_term_range)(inputs, i, wf))
    return out, workers
