"""Source ids of a segmented BM25 index: the ids a user gives, and documents whose ids repeat.

An id is what the user wrote: a Python ``str`` taken byte for byte (never stripped, case-folded or
converted from a number), so that ``" spaced "`` and ``"spaced"`` are two ids, and ``5`` (an int) is refused
rather than read as ``"5"`` (:func:`source_id_list`).

A document whose source id is already in the index (or earlier in the same input) is handled by the
writer's ``on_duplicate`` choice (:data:`ON_DUPLICATE`), as Lucene's ``IndexWriter`` offers ``addDocument``
(keep both) and ``updateDocument`` (delete the old copies by their id term, add the new one, in one commit):

* ``"error"`` (the default): the duplicated ids are named and nothing is committed;
* ``"replace"``: the older copies are deleted in the same commit that adds the new ones (an upsert; of
  copies within one input the last one stays, as a sequence of ``updateDocument`` calls leaves it);
* ``"keep"``: every copy is indexed and searchable; a delete of the id removes them all.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cutext.stages.engines.segments import segment_ids
from cutext.stages.runtime.params import choice, param

__all__ = ["ON_DUPLICATE", "DuplicateIdError", "check_on_duplicate", "source_id_list", "segment_source_ids",
           "duplicate_deletes"]

ON_DUPLICATE = ("error", "replace", "keep")


class DuplicateIdError(ValueError):
    """Documents whose source ids are already in the index, or repeat in the input, with ``on_duplicate="error"``."""


def check_on_duplicate(value) -> str:
    """``value`` if it is one of :data:`ON_DUPLICATE`, else a ValueError naming ``on_duplicate``."""
    return choice("on_duplicate", value, ON_DUPLICATE)


def source_id_list(source_ids, name: str = "source_ids") -> list:
    """The source ids a user gives, checked and kept exactly as given (order kept, repeats kept).

    Parameters
    ----------
    source_ids : str or iterable of str
        One id (a ``str``) or an iterable of them (list, tuple, set, numpy array, pandas Series, pyarrow
        array of strings).
    name : str
        The parameter's name, for the messages.

    Returns
    -------
    list of str

    Raises
    ------
    TypeError
        ``None``, bytes, a number or another non-iterable; an element that is not a ``str`` (the first one
        named with its position: ids are strings, and ``5`` is not ``"5"``); a missing value (None, NaN).
    """
    if isinstance(source_ids, str):
        return [source_ids]
    if isinstance(source_ids, (pa.Array, pa.ChunkedArray)):
        source_ids = source_ids.to_pylist()
    if source_ids is None or isinstance(source_ids, (bytes, bytearray, dict)) or not isinstance(source_ids, Iterable):
        raise TypeError(f"{param(name, bare=True)} must be a source id (str) or a list of them, "
                        f"got {type(source_ids).__name__} {source_ids!r:.80}")
    out = list(source_ids.tolist() if isinstance(source_ids, np.ndarray) else source_ids)
    for i, x in enumerate(out):
        if not isinstance(x, str):
            raise TypeError(f"{param(name, bare=True)}[{i}] is {type(x).__name__} {x!r:.80}, not a str: source "
                            f"ids are the strings the index stores, taken as written (pass {str(x)!r} if that is "
                            "the id)")
    return out


def segment_source_ids(folders, deletes=None) -> list:
    """The source ids of each segment, deleted documents as nulls (pyarrow string arrays, local doc order).

    Parameters
    ----------
    folders : list of pathlib.Path
        Segment folders.
    deletes : list of int arrays, optional
        Each segment's deleted local doc numbers.
    """
    deletes = deletes if deletes is not None else [np.zeros(0, np.int64)] * len(folders)

    def one(f, d):
        ids = segment_ids(f)  # the ids column alone
        if len(d):
            live = np.ones(len(ids), bool)
            live[np.asarray(d, np.int64)] = False
            ids = pc.if_else(pa.array(live), ids, pa.nulls(len(ids), pa.string()))
        return ids

    with ThreadPoolExecutor(max(1, min(len(folders), os.cpu_count() or 1))) as pool:  # pyarrow decodes off the GIL
        return list(pool.map(one, folders, deletes))


def _named(ids: list) -> str:
    shown = ", ".join(repr(x) for x in ids[:5])
    return f"{shown}{', ...' if len(ids) > 5 else ''}"


def duplicate_deletes(old_ids: list, new_ids: list, on_duplicate: str, where: str) -> tuple[list, list, int]:
    """The deletions that ``on_duplicate`` makes of documents whose source ids repeat.

    Parameters
    ----------
    old_ids : list of pyarrow string arrays
        The live ids of the segments already in the index (deleted documents null), in segment order.
    new_ids : list of pyarrow string arrays
        The ids of the segments being added, in document order.
    on_duplicate : {"error", "replace", "keep"}
    where : str
        The index or input, for the message.

    Returns
    -------
    (list of int64 arrays, list of int64 arrays, int)
        For each old segment and each new one, the local doc numbers to delete now (empty: none), and the
        number of documents so deleted.  Only ``"replace"`` deletes: an id's every copy but its last (a new
        document, the last of its input) goes.

    Raises
    ------
    DuplicateIdError (ValueError)
        ``"error"`` and an id of the new documents is live in the index or repeats among them (up to five
        named, with the fix).
    """
    empty = [np.zeros(0, np.int64)] * len(old_ids), [np.zeros(0, np.int64)] * len(new_ids), 0
    if on_duplicate == "keep" or not new_ids:
        return empty
    new = pa.chunked_array(new_ids, pa.string()).combine_chunks() if new_ids else pa.array([], pa.string())
    counts = pc.value_counts(new)
    repeated = counts.field("values").filter(pc.greater(counts.field("counts"), 1))
    distinct = counts.field("values")
    in_old = []
    for ids in old_ids:
        hit = pc.is_in(ids, value_set=distinct).to_numpy(zero_copy_only=False)
        hit &= ids.is_valid().to_numpy(zero_copy_only=False)
        in_old.append(hit)
    clash = sorted(set(repeated.to_pylist()) | {x for ids, h in zip(old_ids, in_old) if h.any()
                                                for x in ids.filter(pa.array(h)).to_pylist()})
    if not clash:
        return empty
    if on_duplicate == "error":
        raise DuplicateIdError(
            f"{where}: {len(clash)} source id(s) of the new documents are already in the index or repeat in the "
            f"input: {_named(clash)}; nothing was written. Pass {param('on_duplicate', 'replace')} to replace the "
            f"older copies (an update), or {param('on_duplicate', 'keep')} to index every copy")
    old_del = [np.flatnonzero(h).astype(np.int64) for h in in_old]
    new_del, n = [], 0
    if len(repeated):  # of copies within the input the last one stays
        flat = new.to_numpy(zero_copy_only=False)
        last = {}
        for i in np.flatnonzero(pc.is_in(new, value_set=repeated).to_numpy(zero_copy_only=False)):
            last[flat[i]] = i
        keep_at = np.array(sorted(last.values()), np.int64)
        dup = np.flatnonzero(pc.is_in(new, value_set=repeated).to_numpy(zero_copy_only=False))
        gone = np.setdiff1d(dup, keep_at)
    else:
        gone = np.zeros(0, np.int64)
    start = 0
    for ids in new_ids:
        local = gone[(gone >= start) & (gone < start + len(ids))] - start
        new_del.append(local.astype(np.int64))
        start += len(ids)
    n = int(sum(len(d) for d in old_del) + len(gone))
    return old_del, new_del, n
