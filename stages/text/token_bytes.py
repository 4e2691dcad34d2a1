"""Tokens as byte ranges of a strings buffer: views of a cudf column's buffers, gathers of ranges, local codes by a
64-bit hash of the bytes, and the split of ``analyzer="anserini"`` built on them (numpy or cupy, where the data is).

The word-break kernels (:func:`cutext.kernels.wordbreak.standard_token_bounds`) give a partition's tokens as byte
offsets; :func:`token_codes` numbers them; only the distinct tokens become strings, for Anserini's possessive
filter and lowercase (:func:`cutext.stages.text.anserini.possessive_lower`).  The ``regex`` split
(:func:`cutext.stages.text.anserini.split_anserini`) is the reference and the fallback.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from cutext.kernels.backend import array_module, to_cudf, to_host
from cutext.kernels.tokenize import arrow_buffers, hash_tokens, tokens_equal
from cutext.kernels.wordbreak import standard_token_bounds
from cutext.stages.text.anserini import possessive_lower, split_anserini

__all__ = ["cudf_string_buffers", "gather_bytes", "gather_strings", "split_anserini_gpu", "split_anserini_host",
           "token_codes"]


def _cupy_view(mem, dtype, start, count):
    """cupy array over ``count`` items of a pylibcudf gpumemoryview from item ``start`` (no copy)."""
    import cupy

    itemsize = np.dtype(dtype).itemsize
    if mem is None or count == 0:
        return cupy.zeros(count, dtype=dtype)
    um = cupy.cuda.UnownedMemory(mem.ptr, mem.nbytes, mem)
    return cupy.ndarray((count,), dtype=dtype, memptr=cupy.cuda.MemoryPointer(um, start * itemsize))


def cudf_string_buffers(s):
    """(pylibcudf column, chars uint8 cupy, offsets int64 cupy (n + 1,)) of a cudf strings Series: views
    of its device buffers, no copy (the offsets widened to int64); used by the GPU text path and ngram."""
    import pylibcudf as plc

    col, _ = s.to_pylibcudf()
    n = col.size()
    if n == 0 or col.num_children() == 0:
        import cupy

        return col, cupy.zeros(0, np.uint8), cupy.zeros(n + 1, np.int64)
    off_col = col.child(0)
    off_dtype = np.int64 if off_col.type().id() == plc.TypeId.INT64 else np.int32
    offsets = _cupy_view(off_col.data(), off_dtype, off_col.offset() + col.offset(), n + 1).astype(np.int64)
    data = col.data()
    chars = _cupy_view(data, np.uint8, 0, 0 if data is None else data.nbytes)
    return col, chars, offsets


def gather_bytes(data, starts, ends):
    """The byte ranges ``data[starts[k]:ends[k]]`` side by side, in the library of ``data`` (numpy or cupy).

    Returns
    -------
    (offsets int64 (n + 1,), bytes uint8 (offsets[-1],))
        Range ``k`` is ``bytes[offsets[k]:offsets[k + 1]]``.
    """
    xp = array_module(data)
    off = xp.zeros(len(starts) + 1, dtype=np.int64)
    off[1:] = xp.cumsum(ends - starts)
    j = xp.arange(int(off[-1]), dtype=np.int64)
    k = xp.searchsorted(off, j, side="right") - 1
    return off, data[starts[k] + (j - off[k])]


def gather_strings(data, starts, ends) -> pa.LargeStringArray:
    """The byte ranges ``data[starts[k]:ends[k]]`` (numpy or cupy) as a host string array (a few strings:
    the distinct terms of a partition)."""
    off, chars = gather_bytes(data, starts, ends)
    return pa.LargeStringArray.from_buffers(len(starts), pa.py_buffer(to_host(off)),
                                            pa.py_buffer(to_host(chars)))


def token_codes(data, starts, ends, with_hash: bool = False):
    """Local codes of tokens given as byte ranges, by a 64-bit hash of their bytes (numpy or cupy).

    Returns
    -------
    (codes, rep) or (codes, rep, hash) or None
        ``codes`` int64 (n_tokens,) numbers the distinct tokens (in hash order, or on the host without ``with_hash``
        in order of first appearance); ``rep`` int64 (n_codes,) is a token of each code (its first on the host);
        with ``with_hash``, ``hash`` uint64 (n_codes,) the hash of each code (increasing: codes follow the hashes).
        None when two different tokens share a hash (every token is checked byte for byte against its code's
        representative): the caller takes an exact string path.
    """
    xp = array_module(data)
    h = hash_tokens(data, starts, ends)
    if xp is np and not with_hash:  # a hash table on the host: O(n), where the sort is O(n log n)
        codes = pd.factorize(h)[0].astype(np.int64, copy=False)
        top = np.maximum.accumulate(codes)  # codes number first appearances: a new code is a new maximum
        rep = np.flatnonzero(np.r_[True, top[1:] > top[:-1]]).astype(np.int64)
        return (codes, rep) if bool(tokens_equal(data, starts, ends, rep[codes]).all()) else None
    order = xp.argsort(h)
    hs = h[order]
    del h
    new = xp.empty(len(hs), dtype=bool)
    new[:1] = True
    new[1:] = hs[1:] != hs[:-1]
    first = xp.flatnonzero(new)
    rep, code_hash = order[first], hs[first]
    del hs, first
    codes = xp.empty(len(order), dtype=np.int64)
    codes[order] = xp.cumsum(new, dtype=np.int64) - 1
    del order, new
    if not bool(tokens_equal(data, starts, ends, rep[codes]).all()):
        return None
    return (codes, rep, code_hash) if with_hash else (codes, rep)


def _anserini_by_bounds(data, offsets, doc_id):
    """``(distinct, codes, ids)`` of the word-break kernels' split (numpy or cupy buffers), or None.

    ``distinct`` (pyarrow large_string) holds each distinct token after steps 2-3 of the analyzer (possessive,
    lowercase), ``codes`` (int64, (n_tokens,)) each token's row of it, ``ids`` each token's doc_id.  None when
    the kernels report a segment past their stack or two tokens share a hash: the caller takes the exact
    ``regex`` split."""
    xp = array_module(data)
    got = standard_token_bounds(data, offsets)
    if got is None:
        return None
    starts, ends, rows = got
    if len(starts) == 0:
        return pa.array([], pa.large_string()), xp.zeros(0, np.int64), xp.zeros(0, np.int64)
    codes = token_codes(data, starts, ends)
    if codes is None:
        return None
    codes, rep = codes
    distinct = possessive_lower(gather_strings(data, starts[rep], ends[rep]))
    return distinct, codes, xp.asarray(doc_id, dtype=np.int64)[rows]


def _host_large_strings(text):
    """``text`` (pandas Series or pyarrow strings) as one pyarrow LargeStringArray, nulls empty; None when it is
    not strings."""
    arr = text if isinstance(text, (pa.Array, pa.ChunkedArray)) else pa.array(text, from_pandas=True)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        return None
    arr = arr.cast(pa.large_string())
    return arr.fill_null("") if arr.null_count else arr


def _anserini_host_codes(text, doc_id):
    """:func:`_anserini_by_bounds` of host text, or None (not strings, or the kernels' report)."""
    arr = _host_large_strings(text)
    return None if arr is None else _anserini_by_bounds(*arrow_buffers(arr), doc_id)


def split_anserini_host(text, doc_id):
    """:func:`cutext.stages.text.anserini.split_anserini` of host text, token for token, through the numba twins
    of the word-break kernels (no Python string a token; the GIL released, so partitions split in parallel).

    Parameters
    ----------
    text : pandas.Series or pyarrow string array, shape (n_docs,) (a null is an empty text)
    doc_id : numpy int64 array, shape (n_docs,)

    Returns
    -------
    (pandas.Series of str (pyarrow), numpy int64 array)
        The tokens in document order, possessives removed, lowercased, shape (n_tokens,), and their doc_ids.
    """
    got = _anserini_host_codes(text, doc_id)
    if got is None:  # the reference split: exact, and it raises the errors of text that is not strings
        return split_anserini(text, doc_id)
    distinct, codes, ids = got
    return pd.Series(distinct.take(pa.array(codes)), dtype=pd.StringDtype("pyarrow")), ids


def split_anserini_gpu(text, doc_id):
    """:func:`cutext.stages.text.anserini.split_anserini` of a cudf column, token for token.

    The word-break kernels (:func:`cutext.kernels.wordbreak.standard_token_bounds`) give the tokens as byte
    offsets of the column's buffer, their hashes the distinct tokens (:func:`token_codes`), whose strings alone
    are built and filtered on the host (:func:`cutext.stages.text.anserini.possessive_lower`) and gathered back.
    Text the kernels report (nested scans past their stack) or a hash collision take the CPU split of the
    column (exact, slower).

    Parameters
    ----------
    text : cudf.Series of str, shape (n_docs,)
    doc_id : cupy int64 array, shape (n_docs,)

    Returns
    -------
    (cudf.Series of str, cupy int64 array)
        The tokens in document order, possessives removed, lowercased, shape (n_tokens,), and their doc_ids.
    """
    _, data, offsets = cudf_string_buffers(text)
    got = _anserini_by_bounds(data, offsets, doc_id)
    if got is None:
        import cupy

        tokens, ids = split_anserini(text.to_arrow(), to_host(doc_id))
        return to_cudf(pa.array(tokens.array).cast(pa.string())), cupy.asarray(ids)
    distinct, codes, ids = got
    return to_cudf(distinct.cast(pa.string())).take(codes).reset_index(drop=True), ids
