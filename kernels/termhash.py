"""A hash table of a vocabulary for host lookups of query terms (numba, no GPU twin).

A batch of queries holds a few thousand distinct terms; looking them up in a vocabulary of V terms
with pyarrow's ``index_in`` builds a hash table of one side per call (O(V) per batch when the
vocabulary is the value set, or V probes when the batch is).  :class:`TermHash` builds an
open-addressing table of the vocabulary once (FNV-1a 64 of the UTF-8 bytes, linear probing, size a
power of two >= 2 V) over the vocabulary's Arrow buffers, and then a batch costs one probe per token.

Ids follow :mod:`cutext.stages.encode`: ``vocab[i]`` has id ``i + 1``; an unknown term has id 0.
"""
from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa

from cutext.kernels.tokenize import arrow_buffers

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


def string_buffers(arr) -> tuple[np.ndarray, np.ndarray]:
    """(offsets int64 (n + 1,), bytes uint8) of a pyarrow string array without nulls: a ``string`` or chunked
    array is made one ``large_string`` array first, then :func:`cutext.kernels.tokenize.arrow_buffers`.

    Raises
    ------
    ValueError
        The array has nulls.
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.null_count:
        raise ValueError(f"a string array with {arr.null_count} nulls cannot be hashed")
    if arr.type != pa.large_string():
        arr = arr.cast(pa.large_string())
    if len(arr) == 0:
        return np.zeros(1, np.int64), np.zeros(0, np.uint8)
    data, offsets = arrow_buffers(arr)
    return offsets, data


@numba.njit(nogil=True, cache=True, inline="always")
def _fnv1a(data, s, e):
    h = _FNV_OFFSET
    for i in range(s, e):
        h = (h ^ np.uint64(data[i])) * _FNV_PRIME
    return h


@numba.njit(nogil=True, cache=True, inline="always")
def _equal(a, sa, ea, b, sb, eb):
    if ea - sa != eb - sb:
        return False
    for i in range(ea - sa):
        if a[sa + i] != b[sb + i]:
            return False
    return True


@numba.njit(nogil=True, cache=True)
def _build(offsets, data, size):
    """Slot -> vocabulary index + 1 (0 = empty) for the V strings; a repeated string keeps its first index."""
    table = np.zeros(size, np.int32)
    mask = np.uint64(size - 1)
    for v in range(offsets.shape[0] - 1):
        s, e = offsets[v], offsets[v + 1]
        slot = _fnv1a(data, s, e) & mask
        while True:
            cur = table[slot]
            if cur == 0:
                table[slot] = v + 1
                break
            if _equal(data, offsets[cur - 1], offsets[cur], data, s, e):
                break
            slot = (slot + np.uint64(1)) & mask
    return table


@numba.njit(nogil=True, cache=True)
def _lookup(table, v_off, v_data, q_off, q_data):
    n = q_off.shape[0] - 1
    out = np.zeros(n, np.int64)
    mask = np.uint64(table.shape[0] - 1)
    for i in range(n):
        s, e = q_off[i], q_off[i + 1]
        slot = _fnv1a(q_data, s, e) & mask
        while True:
            cur = table[slot]
            if cur == 0:
                break
            if _equal(v_data, v_off[cur - 1], v_off[cur], q_data, s, e):
                out[i] = cur
                break
            slot = (slot + np.uint64(1)) & mask
    return out


class TermHash:
    """The vocabulary ``vocab`` (pyarrow string array, V terms, no nulls) as a hash table.

    Parameters
    ----------
    vocab : pyarrow.StringArray or LargeStringArray, shape (V,)

    Notes
    -----
    Memory: the vocabulary's buffers (kept, as large_string) and an int32 table of the smallest power of
    two >= 2 V slots.  V must be < 2**31 - 1.
    """

    def __init__(self, vocab):
        self.offsets, self.data = string_buffers(vocab)
        self._keep = vocab  # the buffers above may view its memory
        n = len(self.offsets) - 1
        if n >= 2**31 - 1:
            raise ValueError(f"a vocabulary of {n:,} terms is too large for TermHash (< 2**31 - 1)")
        size = 1 << max(4, int(2 * max(n, 1) - 1).bit_length())
        self.table = _build(self.offsets, self.data, size)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lookup(self, terms) -> np.ndarray:
        """Ids of ``terms`` (pyarrow string array without nulls, shape (n,)): int64 (n,), ``i + 1`` for
        ``vocab[i]``, 0 for a term not in the vocabulary."""
        q_off, q_data = string_buffers(terms)
        if len(q_off) <= 1:
            return np.zeros(0, np.int64)
        return _lookup(self.table, self.offsets, self.data, q_off, q_data)


@numba.njit(nogil=True, cache=True)
def query_csr(rows, ids, nq):
    """The canonical query CSR of tokens: ``rows`` (int64, nondecreasing, in [0, nq)) and term ``ids``
    (int64, 0 = unknown, dropped).  Returns ``q_ptr`` int64 (nq + 1,), ``q_terms`` int32 ascending within a
    query, ``q_w`` float32 counts."""
    n = rows.shape[0]
    q_ptr = np.zeros(nq + 1, np.int64)
    q_terms = np.empty(n, np.int32)
    q_w = np.empty(n, np.float32)
    buf = np.empty(n, np.int64)
    out = 0
    i = 0
    for q in range(nq):
        q_ptr[q] = out
        j = i
        while j < n and rows[j] == q:
            j += 1
        m = j - i
        if m > 32:
            seg = np.sort(ids[i:j])
        else:  # a short query: insertion sort in place, no allocation
            seg = buf[i:j]
            for a in range(m):
                x = ids[i + a]
                b = a
                while b > 0 and seg[b - 1] > x:
                    seg[b] = seg[b - 1]
                    b -= 1
                seg[b] = x
        prev = np.int64(-1)
        for x in seg:
            if x == 0:
                continue
            if x == prev:
                q_w[out - 1] += np.float32(1)
            else:
                q_terms[out] = x
                q_w[out] = np.float32(1)
                out += 1
                prev = x
        i = j
    q_ptr[nq] = out
    return q_ptr, q_terms[:out].copy(), q_w[:out].copy()


__all__ = ["TermHash", "query_csr", "string_buffers"]
