"""Sort stage: (term_id, doc_id) order, as one integer key sort (Wakatsuki et al. step 4).

Inside a partition the pair is packed into one int64 key ``term_id * span + (doc_id - doc_min)``
(``span`` = the partition's doc-id range), so the sort is a single radix-friendly integer sort on
numpy or cupy, and equal keys are adjacent for the count primitives of :mod:`cutext.stages.text.count`.

Across partitions, term-major order is a range shuffle: :func:`term_divisions` cuts the term-id
axis into ranges of about equal posting counts from the global ``df`` (known exactly, so no
sampling), and :func:`term_major` moves every posting to its range and sorts inside it.
"""
from __future__ import annotations

import numpy as np

from cutext.kernels.backend import array_module, values


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

    if len(df) == 0:
        return df.reset_index(drop=True)
    t, d = values(df["term_id"]), values(df["doc_id"])
    span = int(d.max()) - int(d.min()) + 1
    if int(t.min()) < 0 or (int(t.max()) + 1) * span >= 2**63:
        return df.sort_values(["term_id", "doc_id"], ignore_index=True)
    keys, _, _ = pair_keys(t, d)
    order = array_module(keys).argsort(keys)
    return df.take(order).reset_index(drop=True)


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
