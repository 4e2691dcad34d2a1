"""Token boundaries over UTF-8 bytes: the CPU tokenizer kernel (numba).

A token is a maximal run of *word* code points; ``word_table()[cp]`` is 1 when
``chr(cp).isalnum()`` (Unicode letters and numbers, Python's definition) or ``cp == "_"``.
Bytes that are not valid UTF-8 are separators (the readers have already replaced them).

The kernel makes two passes over the bytes of every document (count, then fill), so the output
is allocated once; the GPU path does the same split with cudf string operations and is tested
against this one on every corpus of the shared data.
"""
from __future__ import annotations

from functools import lru_cache

import numba
import numpy as np


@lru_cache(maxsize=1)
def word_table() -> np.ndarray:
    """uint8 array (0x110000,): 1 for word code points (isalnum or underscore), else 0."""
    t = np.fromiter((chr(c).isalnum() for c in range(0x110000)), dtype=np.uint8, count=0x110000)
    t[ord("_")] = 1
    t[0xD800:0xE000] = 0  # surrogates never appear in valid UTF-8
    return t


@numba.njit(cache=True, nogil=True)
def _decode(data, i, end):
    """(code point, byte length) of the UTF-8 sequence at i; (-1, 1) when invalid."""
    b0 = data[i]
    if b0 < 0x80:
        return np.int64(b0), 1
    if b0 >> 5 == 0x6:
        n, cp = 2, np.int64(b0 & 0x1F)
    elif b0 >> 4 == 0xE:
        n, cp = 3, np.int64(b0 & 0x0F)
    elif b0 >> 3 == 0x1E:
        n, cp = 4, np.int64(b0 & 0x07)
    else:
        return np.int64(-1), 1
    if i + n > end:
        return np.int64(-1), 1
    for k in range(1, n):
        b = data[i + k]
        if b >> 6 != 0x2:
            return np.int64(-1), 1
        cp = (cp << 6) | np.int64(b & 0x3F)
    return cp, n


@numba.njit(cache=True, nogil=True)
def _scan(data, offsets, table, starts, ends, docs, fill):
    ntok = 0
    for d in range(len(offsets) - 1):
        i = offsets[d]
        end = offsets[d + 1]
        in_tok = False
        start = 0
        while i < end:
            cp, n = _decode(data, i, end)
            w = cp >= 0 and cp < 0x110000 and table[cp] == 1
            if w and not in_tok:
                start = i
                in_tok = True
            elif not w and in_tok:
                if fill:
                    starts[ntok] = start
                    ends[ntok] = i
                    docs[ntok] = d
                ntok += 1
                in_tok = False
            i += n
        if in_tok:
            if fill:
                starts[ntok] = start
                ends[ntok] = end
                docs[ntok] = d
            ntok += 1
    return ntok


@numba.njit(cache=True, nogil=True)
def _gather(data, starts, ends, out_offsets, out):
    for k in range(len(starts)):
        o = out_offsets[k]
        for j in range(ends[k] - starts[k]):
            out[o + j] = data[starts[k] + j]


def split_utf8(data: np.ndarray, offsets: np.ndarray):
    """Split every document into word tokens.

    Parameters
    ----------
    data : uint8 array
        The UTF-8 bytes of all documents, back to back.
    offsets : int64 array, shape (n_docs + 1,)
        Document ``d`` is ``data[offsets[d]:offsets[d + 1]]``.

    Returns
    -------
    (token_offsets, token_bytes, doc_index)
        int64 (n_tokens + 1,), uint8 (total token bytes,), int64 (n_tokens,): the tokens as an
        Arrow-style string buffer and the document of each token, in document order.
    """
    table = word_table()
    data = np.ascontiguousarray(data, dtype=np.uint8)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    e = np.zeros(0, np.int64)
    n = _scan(data, offsets, table, e, e, e, False)
    starts = np.empty(n, np.int64)
    ends = np.empty(n, np.int64)
    docs = np.empty(n, np.int64)
    _scan(data, offsets, table, starts, ends, docs, True)
    tok_off = np.zeros(n + 1, np.int64)
    np.cumsum(ends - starts, out=tok_off[1:])
    out = np.empty(int(tok_off[-1]), np.uint8)
    _gather(data, starts, ends, tok_off, out)
    return tok_off, out, docs
