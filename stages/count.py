"""Count stage: tf per (doc, term), df per term, document lengths, N and avgdl.

Paper 004's *count* primitive (sort, mark boundaries where the key changes, subtract boundary
indices) applied to the sorted pair keys of :mod:`cutext.stages.sort`:

* step 3, document length ``L_d``: a count over doc ids (``bincount``);
* step 5, ``tf_td``: the run lengths of equal (term, doc) keys;
* step 6, ``df_t``: a count over the term ids of the unique pairs, summed across partitions.

All of it is array code on numpy (CPU) or cupy (GPU), the module taken from the data.
"""
from __future__ import annotations

import numpy as np

from cutext.kernels.backend import array_module, to_host, values
from cutext.stages.sort import sort_pairs


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


def document_frequencies(counts_ddf, n_terms: int) -> np.ndarray:
    """Global ``df`` (step 6), int64 array of shape (n_terms + 1,), index = term id."""
    vc = to_host(counts_ddf["term_id"].value_counts().compute())
    df = np.zeros(n_terms + 1, dtype=np.int64)
    df[vc.index.to_numpy().astype(np.int64)] = vc.to_numpy()
    return df


def document_lengths(tokens_ddf, n_docs: int) -> np.ndarray:
    """Global document lengths (step 3), int64 array (n_docs,); documents without tokens are 0."""
    vc = to_host(tokens_ddf["doc_id"].value_counts().compute())
    lengths = np.zeros(n_docs, dtype=np.int64)
    lengths[vc.index.to_numpy().astype(np.int64)] = vc.to_numpy()
    return lengths
