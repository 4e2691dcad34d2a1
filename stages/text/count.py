"""Count stage: tf per (doc, term), df per term, document lengths, N and avgdl.

Wakatsuki et al.'s *count* primitive (sort, mark boundaries where the key changes, subtract boundary
indices) applied to the sorted pair keys of :mod:`cutext.stages.text.sort`:

* step 3, document length ``L_d``: a count over doc ids (``bincount``);
* step 5, ``tf_td``: the run lengths of equal (term, doc) keys;
* step 6, ``df_t``: a count over the term ids of the unique pairs, summed across partitions.

All of it is array code on numpy (CPU) or cupy (GPU), the module taken from the data.
"""
from __future__ import annotations

import numpy as np

from cutext.kernels.backend import array_module, to_host, values
from cutext.stages.text.sort import sort_pairs


def run_lengths(sorted_keys):
    """Count primitive on a sorted key array.

    Returns
    -------
    (unique_keys, counts) : arrays of the input's module, shape (n_unique,)
    """
    xp = array_module(sorted_keys)
    n = len(sorted_keys)
    if n == 0:
        return sorted_keys[:0], xp.zeros(0, np.int64)
    flag = xp.empty(n, dtype=bool)
    flag[0] = True
    flag[1:] = sorted_keys[1:] != sorted_keys[:-1]
    starts = xp.flatnonzero(flag)
    ends = xp.empty_like(starts)
    ends[:-1] = starts[1:]
    ends[-1] = n
    return sorted_keys[starts], ends - starts


def count_partition(df):
    """tf and document length for one partition of ``(doc_id, term_id)`` rows.

    Parameters
    ----------
    df : pandas/cudf DataFrame ``(doc_id: int64, term_id: int32)``

    Returns
    -------
    DataFrame ``(term_id: int32, doc_id: int64, tf: int32, dl: int32)``, one row per distinct
    (term, doc) pair, sorted by (term_id, doc_id); ``dl`` is the length of the row's document.
    """
    lib = type(df)
    t = values(df["term_id"])
    d = values(df["doc_id"])
    xp = array_module(t)
    if len(t) == 0:
        return lib({"term_id": xp.zeros(0, np.int32), "doc_id": xp.zeros(0, np.int64),
                    "tf": xp.zeros(0, np.int32), "dl": xp.zeros(0, np.int32)})
    keys, doc_min, span = sort_pairs(t, d)
    ukeys, tf = run_lengths(keys)
    term = (ukeys // span).astype(np.int32)
    doc_local = ukeys % span
    lengths = xp.bincount((d - doc_min).astype(np.int64), minlength=span)
    dl = lengths[doc_local].astype(np.int32)
    return lib({"term_id": term, "doc_id": doc_local + doc_min, "tf": tf.astype(np.int32), "dl": dl})


def _term_histogram(part, n_terms: int) -> np.ndarray:
    """Postings per term id of one partition: int64 host array (n_terms + 1,)."""
    t = values(part["term_id"])
    xp = array_module(t)
    if len(t) == 0:
        return np.zeros(n_terms + 1, dtype=np.int64)
    lo, hi = int(t.min()), int(t.max())
    if lo < 0 or hi > n_terms:
        raise ValueError(f"term_id {lo if lo < 0 else hi} is outside [0, {n_terms}]")
    return to_host(xp.bincount(t, minlength=n_terms + 1)).astype(np.int64)


def _doc_histogram(part):
    """``(doc ids, tokens per doc id)`` of one partition's ``doc_id`` column (host int64 arrays):
    a ``bincount`` over the partition's id range, or the distinct ids when that range is sparse."""
    d = values(part["doc_id"])
    xp = array_module(d)
    if len(d) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    lo, hi = int(d.min()), int(d.max())
    if lo < 0:
        raise ValueError(f"doc_id {lo} is negative")
    if hi - lo < 4 * len(d) + 1024:
        return np.arange(lo, hi + 1, dtype=np.int64), to_host(xp.bincount(d - lo)).astype(np.int64)
    ids, counts = xp.unique(d, return_counts=True)
    return to_host(ids).astype(np.int64), to_host(counts).astype(np.int64)


def _add(*arrays):
    out = arrays[0].copy()
    for a in arrays[1:]:
        out += a
    return out


def document_frequencies(counts_ddf, n_terms: int) -> np.ndarray:
    """Global ``df`` (step 6), int64 array of shape (n_terms + 1,), index = term id.

    A ``bincount`` of every partition's term ids (on its device), summed in a tree of eight.

    Raises
    ------
    ValueError
        A term id outside ``[0, n_terms]``.
    """
    root = document_frequencies_delayed(counts_ddf, n_terms)
    return np.zeros(n_terms + 1, dtype=np.int64) if root is None else np.asarray(root.compute(), dtype=np.int64)


def document_frequencies_delayed(counts_ddf, n_terms: int):
    """The graph of :func:`document_frequencies`: a delayed ``df`` array (of the partitions' device), or
    None for a collection without partitions."""
    import dask

    hs = [dask.delayed(_term_histogram)(p, n_terms) for p in counts_ddf.to_delayed()]
    if not hs:
        return None
    while len(hs) > 1:
        hs = [dask.delayed(_add)(*hs[i:i + 8]) for i in range(0, len(hs), 8)]
    return hs[0]


def document_lengths(tokens_ddf, n_docs: int) -> np.ndarray:
    """Global document lengths (step 3), int64 array (n_docs,); documents without tokens are 0.

    Raises
    ------
    ValueError
        A doc id outside ``[0, n_docs)``.
    """
    import dask

    parts = dask.compute(*[dask.delayed(_doc_histogram)(p) for p in tokens_ddf.to_delayed()])
    lengths = np.zeros(n_docs, dtype=np.int64)
    for ids, h in parts:
        if len(ids) and ids[-1] >= n_docs:
            raise ValueError(f"doc_id {ids[-1]} is outside [0, {n_docs})")
        lengths[ids] += h  # ids are distinct within a partition
    return lengths
