"""A hash table of a vocabulary for host lookups of query terms (numba, no GPU twin).

A batch of queries holds a few thousand distinct terms; looking them up in a vocabulary of V terms
with pyarrow's ``index_in`` builds a hash table of one side per call (O(V) per batch when the
vocabulary is the value set, or V probes when the batch is).  :class:`TermHash` builds an
open-addressing table of the vocabulary once (FNV-1a 64 of the UTF-8 bytes, linear probing, size a
power of two >= 2 V) over the vocabulary's Arrow buffers, and then a batch costs one probe per token.

Ids follow :mod:`cutext.stages.text.encode`: ``vocab[i]`` has id ``i + 1``; an unknown term has id 0.
"""
from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa

import cutext.kernels._numba_cache  # noqa: F401  # before the decorators: it places and stamps their cache
from cutext.kernels.backend import numba_threads
from cutext.kernels.tokenize import _decode, arrow_buffers, word_table

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
def _byte(data, i, fold):
    """``data[i]``, an ASCII capital read as its small letter when ``fold``."""
    c = data[i]
    if fold and c >= 65 and c <= 90:
        c += 32
    return c


@numba.njit(nogil=True, cache=True, inline="always")
def _fnv1a(data, s, e, fold):
    h = _FNV_OFFSET
    for i in range(s, e):
        h = (h ^ np.uint64(_byte(data, i, fold))) * _FNV_PRIME
    return h


@numba.njit(nogil=True, cache=True, inline="always")
def _equal(a, sa, ea, b, sb, eb, fold):
    """``a[sa:ea] == b[sb:eb]``, the bytes of ``b`` folded when ``fold``."""
    if ea - sa != eb - sb:
        return False
    for i in range(ea - sa):
        if a[sa + i] != _byte(b, sb + i, fold):
            return False
    return True


@numba.njit(nogil=True, cache=True)
def _build(offsets, data, size):
    """Slot -> vocabulary index + 1 (0 = empty) for the V strings; a repeated string keeps its first index."""
    table = np.zeros(size, np.int32)
    mask = np.uint64(size - 1)
    for v in range(offsets.shape[0] - 1):
        s, e = offsets[v], offsets[v + 1]
        slot = _fnv1a(data, s, e, False) & mask
        while True:
            cur = table[slot]
            if cur == 0:
                table[slot] = v + 1
                break
            if _equal(data, offsets[cur - 1], offsets[cur], data, s, e, False):
                break
            slot = (slot + np.uint64(1)) & mask
    return table


@numba.njit(nogil=True, cache=True, inline="always")
def _probe(table, v_off, v_data, data, s, e, fold):
    """Id (index + 1, 0 = unknown) of ``data[s:e]`` in the table, its ASCII capitals read as small letters
    when ``fold``: FNV-1a 64 of the (folded) bytes, linear probing, a byte compare with the vocabulary."""
    mask = np.uint64(table.shape[0] - 1)
    slot = _fnv1a(data, s, e, fold) & mask
    while True:
        cur = table[slot]
        if cur == 0:
            return 0
        if _equal(v_data, v_off[cur - 1], v_off[cur], data, s, e, fold):
            return cur
        slot = (slot + np.uint64(1)) & mask


@numba.njit(nogil=True, cache=True)
def _lookup(table, v_off, v_data, q_off, q_data):
    n = q_off.shape[0] - 1
    out = np.zeros(n, np.int64)
    for i in range(n):
        out[i] = _probe(table, v_off, v_data, q_data, q_off[i], q_off[i + 1], False)
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


@numba.njit(nogil=True, cache=True, inline="always")
def _sort_count(seg, q_terms, q_w, out):
    """Sort one query's term ids ``seg`` in place (insertion sort up to 32, else ``np.sort``) and append its
    distinct nonzero ids, with their counts, to ``q_terms`` / ``q_w`` from ``out``; returns the new end."""
    m = seg.shape[0]
    if m > 32:
        seg.sort()
    else:  # a short query: insertion sort in place, no allocation
        for a in range(1, m):
            x = seg[a]
            b = a
            while b > 0 and seg[b - 1] > x:
                seg[b] = seg[b - 1]
                b -= 1
            seg[b] = x
    prev = np.int64(-1)
    for a in range(m):
        x = seg[a]
        if x == 0:
            continue
        if x == prev:
            q_w[out - 1] += np.float32(1)
        else:
            q_terms[out] = x
            q_w[out] = np.float32(1)
            out += 1
            prev = x
    return out


@numba.njit(nogil=True, cache=True)
def query_csr(rows, ids, nq):
    """The canonical query CSR of tokens: ``rows`` (int64, nondecreasing, in [0, nq)) and term ``ids``
    (int64, 0 = unknown, dropped).  Returns ``q_ptr`` int64 (nq + 1,), ``q_terms`` int32 ascending within a
    query, ``q_w`` float32 counts."""
    n = rows.shape[0]
    q_ptr = np.zeros(nq + 1, np.int64)
    q_terms = np.empty(n, np.int32)
    q_w = np.empty(n, np.float32)
    buf = ids.copy()
    out = 0
    i = 0
    for q in range(nq):
        q_ptr[q] = out
        j = i
        while j < n and rows[j] == q:
            j += 1
        out = _sort_count(buf[i:j], q_terms, q_w, out)
        i = j
    q_ptr[nq] = out
    return q_ptr, q_terms[:out].copy(), q_w[:out].copy()


@numba.njit(nogil=True, cache=True)
def _rows_csr(data, offsets, q0, q1, wtable, table, v_off, v_data, fold, q_ptr, q_terms, q_w, buf, out):
    """Queries q0..q1 - 1 into the CSR arrays from position ``out`` (``q_ptr`` absolute); returns the end."""
    for q in range(q0, q1):
        q_ptr[q] = out
        m = 0
        i, end = offsets[q], offsets[q + 1]
        start = i
        in_tok = False
        while True:  # the token rule of kernels.tokenize._scan
            if i < end:
                cp, nb = _decode(data, i, end)
                kind = wtable[cp] if cp >= 0 and cp < 0x110000 else 0
                w = kind == 1 or (kind == 2 and in_tok)
            else:
                w, nb = False, 1
            if w and not in_tok:
                start = i
                in_tok = True
            elif not w and in_tok:
                tid = _probe(table, v_off, v_data, data, start, i, fold)
                if tid != 0:
                    buf[out + m] = tid
                    m += 1
                in_tok = False
            if i >= end:
                break
            i += nb
        out = _sort_count(buf[out:out + m], q_terms, q_w, out)
    return out


@numba.njit(parallel=True, nogil=True, cache=True)
def _text_csr(data, offsets, wtable, table, v_off, v_data, fold, n_chunks):
    """Chunks of queries split and looked up in parallel, each into its own region of scratch arrays
    (a token is >= 1 byte and two tokens of a query have a separator between them, so a chunk of B
    bytes and R queries has at most B // 2 + R tokens), then the regions packed."""
    nq = offsets.shape[0] - 1
    lo = np.empty(n_chunks + 1, np.int64)
    base = np.zeros(n_chunks + 1, np.int64)
    for c in range(n_chunks + 1):
        lo[c] = c * nq // n_chunks
    for c in range(n_chunks):
        base[c + 1] = base[c] + (offsets[lo[c + 1]] - offsets[lo[c]]) // 2 + (lo[c + 1] - lo[c]) + 1
    cap = base[n_chunks]
    q_ptr = np.zeros(nq + 1, np.int64)
    t_terms = np.empty(cap, np.int32)
    t_w = np.empty(cap, np.float32)
    buf = np.empty(cap, np.int64)
    ends = np.empty(n_chunks, np.int64)
    for c in numba.prange(n_chunks):
        ends[c] = _rows_csr(data, offsets, lo[c], lo[c + 1], wtable, table, v_off, v_data, fold,
                            q_ptr, t_terms, t_w, buf, base[c])
    start = np.zeros(n_chunks + 1, np.int64)
    for c in range(n_chunks):
        start[c + 1] = start[c] + ends[c] - base[c]
    q_terms = np.empty(start[n_chunks], np.int32)
    q_w = np.empty(start[n_chunks], np.float32)
    for c in numba.prange(n_chunks):
        shift = base[c] - start[c]
        q_terms[start[c]:start[c + 1]] = t_terms[base[c]:ends[c]]
        q_w[start[c]:start[c + 1]] = t_w[base[c]:ends[c]]
        for q in range(lo[c], lo[c + 1]):
            q_ptr[q] -= shift
    q_ptr[nq] = start[n_chunks]
    return q_ptr, q_terms, q_w


def text_csr(data, offsets, term_hash: TermHash, fold: bool, n_threads: int | None = None):
    """The canonical query CSR of texts, split and looked up in one pass (no token array).

    Every text is split by the rule of :func:`cutext.kernels.tokenize.split_utf8` (maximal runs of
    word code points, a mark joining the run before it) and every token is looked up in
    ``term_hash``; unknown tokens are dropped, repeated ones counted.  The caller has normalized the
    texts (:func:`cutext.stages.text.tokenize.normalize_texts`); ``fold`` reads ASCII capitals as small
    letters, the lowercase of an ASCII text.

    Parameters
    ----------
    data : uint8 array
        UTF-8 bytes of the texts, back to back.
    offsets : int64 array, shape (nq + 1,)
    term_hash : TermHash
        The vocabulary (V terms).
    fold : bool
    n_threads : int, optional
        numba threads (default: numba's current setting).

    Returns
    -------
    (q_ptr, q_terms, q_w)
        int64 (nq + 1,); int32 term ids (``i + 1`` for ``vocab[i]``), ascending within a query;
        float32 counts.  The same arrays as :func:`query_csr` of the split tokens' ids.

    Raises
    ------
    ValueError
        ``n_threads`` out of range.

    Notes
    -----
    Runs on numba's threads (chunks of at least 256 queries).
    """
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    with numba_threads(n_threads) as nth:
        n_chunks = max(1, min(nth * 4, (len(offsets) - 1) // 256))
        return _text_csr(np.ascontiguousarray(data, dtype=np.uint8), offsets, word_table(), term_hash.table,
                         term_hash.offsets, term_hash.data, bool(fold), n_chunks)


__all__ = ["TermHash", "query_csr", "string_buffers", "text_csr"]
