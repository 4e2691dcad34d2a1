"""Sort stage: (term_id, doc_id) order, as one integer key sort (paper 004 step 4).

Inside a partition the pair is packed into one int64 key ``term_id * span + (doc_id - doc_min)``
(``span`` = the partition's doc-id range), so the sort is a single radix-friendly integer sort on
numpy or cupy, and equal keys are adjacent for the count primitives of :mod:`cutext.stages.count`.

Across partitions, term-major order is a range shuffle: :func:`term_divisions` cuts the term-id
axis into ranges of about equal posting counts from the global ``df`` (known exactly, so no
sampling), and :func:`term_major` moves every posting to its range and sorts inside it.
"""
from __future__ import annotations

import numpy as np

from cutext.kernels.backend import array_module


def pair_keys(term_id, doc_id):
    """Pack (term_id, doc_id) pairs into sortable int64 keys.

    Parameters
    ----------
    term_id, doc_id : numpy or cupy integer arrays, shape (n,)

    Returns
    -------
    (keys, doc_min, span) : (int64 array (n,), int, int)
    """
    d = doc_id.astype(np.int64)
    doc_min = int(d.min())
    span = int(d.max()) - doc_min + 1
    keys = term_id.astype(np.int64) * span + (d - doc_min)
    return keys, doc_min, span


def sort_pairs(term_id, doc_id):
    """Sorted pair keys (term-major, then doc) of one partition; see :func:`pair_keys`."""
    xp = array_module(term_id)
    keys, doc_min, span = pair_keys(term_id, doc_id)
    return xp.sort(keys), doc_min, span


def sort_frame_by_pairs(df):
    """The rows of a pandas or cudf frame in (term_id, doc_id) order, index 0..n-1.

    One sort of the packed keys (:func:`pair_keys`; pairs are unique, so no stability is needed)
    and one gather of every column: on the GPU a radix sort of int64 keys instead of libcudf's
    two-column sort; when the packed key could overflow int64, ``sort_values``.
    """
    from cutext.kernels.backend import values

    if len(df) == 0:
        return df.reset_index(drop=True)
    t, d = values(df["term_id"]), values(df["doc_id"])
    span = int(d.max()) - int(d.min()) + 1
    if int(t.min()) < 0 or (int(t.max()) + 1) * span >= 2**63:
        return df.sort_values(["term_id", "doc_id"], ignore_index=True)
    keys, _, _ = pair_keys(t, d)
    order = array_module(keys).argsort(keys)
    return df.take(order).reset_index(drop=True)


def _pairs_sorted(t, d) -> bool:
    """Whether the (term_id, doc_id) pairs are strictly increasing (term-major), one reduction."""
    if len(t) < 2:
        return True
    tn, tp = t[1:], t[:-1]
    return bool(((tn > tp) | ((tn == tp) & (d[1:] > d[:-1]))).all())


def merge_term_sorted(frames):
    """Rows of several frames in (term_id, doc_id) order, by positions instead of a sort.

    Each frame (pandas or cudf, the same columns) is sorted by (term_id, doc_id), and the frames hold
    increasing document ranges (every doc id of frame ``j`` is below every doc id of frame ``j + 1``):
    the slices of a term range cut from the count stage's partitions. The rows of term ``t`` then come
    frame after frame, each frame's in its own order, so every row's place is known from counts
    (paper 004 step 4, the range shuffle, without its sort)::

        dest = base[t] + before[j, t] + (i - first[j, t])

    ``base[t]``: rows of smaller terms; ``before[j, t]``: rows of term ``t`` in frames ``< j``;
    ``first[j, t]``: frame ``j``'s first row of term ``t`` (a ``searchsorted``, since the frame is
    sorted by term). One scatter a column, no key sort and no concatenation. Array code, so it runs
    where the data is (numpy or cupy). The (frame, term) tables take ``frames x terms`` entries; when
    that is more than twice the rows (a range of many rare terms), the rows are sorted instead.

    Parameters
    ----------
    frames : list of pandas or cudf DataFrame
        With integer ``term_id`` and ``doc_id`` columns.

    Returns
    -------
    DataFrame
        The rows of every frame, index 0..n-1, in (term_id, doc_id) order: the rows and order of
        ``sort_frame_by_pairs(concat(frames))``, which is what is returned when a frame is not sorted
        by term, or when the merged rows are not strictly increasing in (term_id, doc_id) (the doc
        ranges do not increase from frame to frame). For frames sorted by term the positions are a
        permutation of the rows, so that check suffices.
    """
    import importlib

    from cutext.kernels.backend import values

    kept = [f for f in frames if len(f)]
    if not kept:
        return frames[0].iloc[:0].reset_index(drop=True) if frames else None
    lib = importlib.import_module(type(kept[0]).__module__.split(".")[0])  # pandas or cudf
    if len(kept) == 1:
        return kept[0].reset_index(drop=True)
    ts = [values(f["term_id"]) for f in kept]
    xp = array_module(ts[0])
    # each frame's first and last term, and whether its terms are nondecreasing: one copy to the host
    ends = xp.stack([t[0] for t in ts] + [t[-1] for t in ts]
                    + [(t[1:] >= t[:-1]).all() for t in ts]).tolist()
    if not all(ends[2 * len(ts):]):  # not sorted by term: the positions below would not be a permutation
        return sort_frame_by_pairs(lib.concat(kept, ignore_index=True))
    lo, hi = int(min(ends[:len(ts)])), int(max(ends[len(ts):2 * len(ts)]))
    n = int(sum(len(t) for t in ts))
    if len(ts) * (hi - lo + 2) > 2 * n + (1 << 20):  # a (frame, term) table larger than the rows: sort
        return sort_frame_by_pairs(lib.concat(kept, ignore_index=True))
    keys = xp.arange(lo, hi + 2, dtype=ts[0].dtype)  # terms lo..hi, and hi + 1 closing the last run
    first = xp.stack([xp.searchsorted(t, keys, side="left") for t in ts]).astype(np.int64)  # (J, R + 1)
    cnt = first[:, 1:] - first[:, :-1]                     # (J, R) rows of each term in each frame
    tot = cnt.sum(axis=0)
    base = xp.cumsum(tot) - tot                            # rows of the smaller terms
    before = xp.cumsum(cnt, axis=0) - cnt                  # rows of the term in the earlier frames
    shift = base[None, :] + before - first[:, :-1]         # dest - local row index, per (frame, term)
    names = list(kept[0].columns)
    cols = [[values(f[c]) for f in kept] for c in names]
    out = [xp.empty(n, dtype=parts[0].dtype) for parts in cols]
    for j, t in enumerate(ts):
        dest = shift[j][(t - lo).astype(np.int64)] + xp.arange(len(t), dtype=np.int64)
        for o, parts in zip(out, cols):
            o[dest] = parts[j]
    del shift, first, before, cnt
    merged = lib.DataFrame(dict(zip(names, out)))
    if _pairs_sorted(values(merged["term_id"]), values(merged["doc_id"])):
        return merged
    return sort_frame_by_pairs(lib.concat(kept, ignore_index=True))


def term_divisions(df: np.ndarray, nparts: int) -> list[int]:
    """Term-id boundaries giving ``nparts`` ranges of about equal posting counts.

    Parameters
    ----------
    df : int64 array, shape (V + 1,)
        Postings per term id (index 0, the unknown id, has none).
    nparts : int

    Returns
    -------
    list of int
        Strictly increasing divisions for ``set_index`` (first = smallest, last = largest id).
    """
    ids = np.flatnonzero(df)
    if len(ids) == 0:
        return [0, 0]
    csum = np.cumsum(df[ids])
    total = csum[-1]
    cuts = [int(ids[0])]
    for p in range(1, max(1, nparts)):
        j = int(np.searchsorted(csum, total * p / nparts, side="left"))
        t = int(ids[min(j, len(ids) - 1)])
        if t > cuts[-1]:
            cuts.append(t)
    last = int(ids[-1])
    if last > cuts[-1]:
        cuts.append(last)
    elif len(cuts) == 1:
        cuts.append(last)
    return cuts


def _sort_within(df):
    df = df.reset_index()
    return df.sort_values(["term_id", "doc_id"], ignore_index=True)


def term_major(postings, df_counts: np.ndarray, nparts: int):
    """Range-shuffle a postings DataFrame into term-major order.

    Parameters
    ----------
    postings : dask DataFrame with ``term_id`` and ``doc_id`` columns
    df_counts : int64 array (V + 1,), postings per term
    nparts : int, wanted output partitions

    Returns
    -------
    dask DataFrame, same columns, partition i holding a contiguous term range, rows sorted by
    (term_id, doc_id); the concatenation of partitions is globally sorted.
    """
    divisions = term_divisions(df_counts, nparts)
    if len(divisions) < 2 or divisions[0] == divisions[-1] or postings.npartitions == 1 and nparts == 1:
        return postings.map_partitions(lambda p: p.sort_values(["term_id", "doc_id"], ignore_index=True),
                                       meta=postings._meta)
    cols = list(postings.columns)
    shuffled = postings.set_index("term_id", divisions=divisions, sort=True)
    meta = postings._meta[cols]
    return shuffled.map_partitions(lambda p: _sort_within(p)[cols], meta=meta)
