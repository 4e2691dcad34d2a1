"""Words of a strings column and their vocabulary ids: CUDA kernels (``wordsplit.cu``) and numba CPU twins.

The GPU text path of the n-gram LM (:mod:`cutext.stages.text.ngram_text`): text bytes on the device are split
into words and the words mapped to the model's word ids without leaving the device, so that scoring from
text runs near the speed of the trie kernel (:mod:`cutext.kernels.trie`).

* A *word* is a maximal run of bytes that are not ASCII white space (space and ``\\t \\n \\v \\f \\r``),
  inside one row: KenLM's Python module splits a sentence with ``bytes.split()``, the CPU path of
  :class:`cutext.pipelines.ngram.NGramModel` with pyarrow's ``ascii_split_whitespace``; both split at
  exactly these six bytes.  Words are bytes: nothing is decoded or case-folded (KenLM matches bytes).
* Word ids: the vocabulary (the model's words as bytes, id = position) is an open-addressing hash table
  (:class:`VocabHash`: linear probing, FNV-1a 64-bit hash, power-of-two size at least twice the
  vocabulary).  A word matches a vocabulary entry only when all its bytes are equal (KenLM's probing
  vocabulary compares 64-bit hashes only; here a hash collision can never merge two words).  A word that
  is not in the vocabulary gets the caller's ``unk_id``, as KenLM maps every unknown word to ``<unk>``.

Functions take numpy or cupy arrays and run where the data is (numpy -> numba twin, cupy -> CUDA kernel
compiled once per device by :mod:`cutext.kernels._cuda`).  The twins are the CPU oracle of the GPU tests
and are themselves tested against pyarrow's split and ``index_in`` (an independent implementation).
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

import cutext.kernels._numba_cache  # noqa: F401  # before the decorators: it places and stamps their cache
from cutext.kernels import _cuda
from cutext.kernels.backend import array_module, is_gpu_object

SOURCE = "wordsplit.cu"
FNV_OFFSET = np.uint64(14695981039346656037)
FNV_PRIME = np.uint64(1099511628211)
WHITESPACE = b" \t\n\x0b\x0c\r"


# ----------------------------------------------------------------------------- CPU twins (numba)

@numba.njit(cache=True, nogil=True, inline="always")
def _space(c):
    return c == 32 or (c >= 9 and c <= 13)


@numba.njit(cache=True, nogil=True)
def _hash(data, a, length):
    """FNV-1a 64 of ``data[a:a + length]`` (``ws_hash`` in wordsplit.cu)."""
    h = FNV_OFFSET
    for k in range(length):
        h ^= np.uint64(data[a + k])
        h *= FNV_PRIME
    return h


@numba.njit(cache=True, nogil=True, inline="always")
def _same_bytes(x, xa, y, ya, length):
    """Whether ``x[xa:xa + length]`` and ``y[ya:ya + length]`` hold the same bytes."""
    for k in range(length):
        if x[xa + k] != y[ya + k]:
            return False
    return True


@numba.njit(cache=True, nogil=True, parallel=True)
def _twin_flags(data, bound, flags):
    n = len(data)
    for i in numba.prange(n):
        f = 0
        if not _space(data[i]):
            if bound[i] or _space(data[i - 1]):
                f |= 1
            if bound[i + 1] or _space(data[i + 1]):
                f |= 2
        flags[i] = f


@numba.njit(cache=True, nogil=True, parallel=True)
def _twin_lookup(data, starts, ends, vchars, voff, table, mask, unk_id, ids):
    umask = np.uint64(mask)
    for w in numba.prange(len(starts)):
        a = starts[w]
        length = ends[w] - a
        slot = np.int64(_hash(data, a, length) & umask)
        wid = unk_id
        while True:
            v = table[slot]
            if v < 0:
                break
            va = voff[v]
            if voff[v + 1] - va == length and _same_bytes(vchars, va, data, a, length):
                wid = v
                break
            slot = (slot + 1) & mask
        ids[w] = wid


@numba.njit(cache=True, nogil=True, parallel=True)
def _twin_segment_sum(x, seg, out):
    for s in numba.prange(len(seg) - 1):
        acc = 0.0
        for k in range(seg[s], seg[s + 1]):
            acc += x[k]
        out[s] = acc


@numba.njit(cache=True, nogil=True)
def _build_table(vchars, voff, table, mask):
    """Insert every word (in id order) into ``table``; returns the id of the first duplicate or -1."""
    for v in range(len(voff) - 1):
        a = voff[v]
        length = voff[v + 1] - a
        slot = np.int64(_hash(vchars, a, length) & np.uint64(mask))
        while table[slot] >= 0:
            u = table[slot]
            ua = voff[u]
            if voff[u + 1] - ua == length and _same_bytes(vchars, ua, vchars, a, length):
                return v
            slot = (slot + 1) & mask
        table[slot] = v
    return -1


# ----------------------------------------------------------------------------- vocabulary hash

@dataclass
class VocabHash:
    """The vocabulary as a byte-exact hash table (numpy on the host, cupy on the device).

    Attributes
    ----------
    chars : uint8 (total bytes,)
        The words' bytes back to back; word ``v`` is ``chars[offsets[v]:offsets[v + 1]]``.
    offsets : int64 (V + 1,)
    table : int32 (size,)
        Word id in each slot, -1 for an empty slot; ``size`` is a power of two >= 2 V.
    mask : int
        ``size - 1``.
    """

    chars: object
    offsets: object
    table: object
    mask: int

    @property
    def vocab_size(self) -> int:
        return len(self.offsets) - 1

    @property
    def on_gpu(self) -> bool:
        return is_gpu_object(self.table)

    @classmethod
    def build(cls, chars, offsets) -> VocabHash:
        """The table of the words ``chars[offsets[v]:offsets[v + 1]]`` (host arrays), id = position.

        Parameters
        ----------
        chars : uint8 array or bytes-like
        offsets : int array (V + 1,)

        Raises
        ------
        ValueError
            Two words with the same bytes (their ids would be ambiguous).
        """
        chars = np.frombuffer(chars, np.uint8) if isinstance(chars, (bytes, bytearray, memoryview)) \
            else np.ascontiguousarray(chars, dtype=np.uint8)
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        V = len(offsets) - 1
        size = 1
        while size < 2 * max(V, 1):
            size *= 2
        table = np.full(size, -1, np.int32)
        dup = _build_table(chars, offsets, table, np.int64(size - 1))
        if dup >= 0:
            word = bytes(chars[offsets[dup]:offsets[dup + 1]])
            raise ValueError(f"word {word!r} (id {dup}) appears twice in the vocabulary")
        return cls(chars, offsets, table, size - 1)

    def to_device(self) -> VocabHash:
        """A copy on the current CUDA device (one copy per array)."""
        import cupy

        return VocabHash(cupy.asarray(self.chars), cupy.asarray(self.offsets), cupy.asarray(self.table), self.mask)


# ----------------------------------------------------------------------------- entry points

def word_bounds(chars, offsets):
    """Start and end byte of every word of every row, in row order (KenLM's ``bytes.split()`` words).

    Parameters
    ----------
    chars : uint8 array (n_bytes,), numpy or cupy
        The bytes of a strings column (e.g. an Arrow / cudf chars buffer).
    offsets : int64 array (n_rows + 1,), same module, non-decreasing
        Row r is ``chars[offsets[r]:offsets[r + 1]]``; ``offsets[0]`` may be > 0 (a sliced column).

    Returns
    -------
    starts, ends : int64 arrays (n_words,)
        Word w is ``chars[starts[w]:ends[w]]`` (positions in ``chars``); words are in byte order, so
        the words of row r are those with ``offsets[r] <= starts[w] < offsets[r + 1]``
        (``searchsorted(starts, offsets)`` gives the word offsets of the rows).

    Raises
    ------
    ValueError
        ``offsets`` shorter than 1 or outside ``chars``.
    """
    xp = array_module(chars)
    if len(offsets) < 1:
        raise ValueError("offsets must hold n_rows + 1 >= 1 values")
    offsets = xp.ascontiguousarray(offsets, dtype=np.int64)
    base, stop = int(offsets[0]), int(offsets[-1])
    if base < 0 or stop > len(chars) or stop < base:
        raise ValueError(f"offsets [{base}, {stop}] outside the {len(chars)} bytes of chars")
    n = stop - base
    if n == 0:
        return xp.zeros(0, np.int64), xp.zeros(0, np.int64)
    data = xp.ascontiguousarray(chars[base:stop], dtype=np.uint8)
    bound = xp.zeros(n + 1, np.uint8)
    bound[offsets - base] = 1
    flags = xp.empty(n, np.uint8)
    if xp is np:
        _twin_flags(data, bound, flags)
    else:
        g, b = _cuda.grid(min(n, 1 << 26))  # grid-stride loop beyond 2**26 bytes
        _cuda.kernel(SOURCE, "ws_word_flags")(g, b, (data, bound, np.int64(n), flags))
    starts = xp.flatnonzero(flags & 1).astype(np.int64) + base
    ends = xp.flatnonzero(flags & 2).astype(np.int64) + (base + 1)
    return starts, ends


def lookup_words(chars, starts, ends, vocab: VocabHash, unk_id: int):
    """Vocabulary id of every word ``chars[starts[w]:ends[w]]`` (byte-exact), ``unk_id`` when absent.

    Parameters
    ----------
    chars : uint8 array, numpy or cupy
    starts, ends : int64 arrays (n_words,), same module
    vocab : VocabHash
        On the same side as ``chars`` (``VocabHash.to_device()`` for cupy input).
    unk_id : int
        Id of unknown words (the model's ``<unk>``).

    Returns
    -------
    int32 array (n_words,)

    Raises
    ------
    TypeError
        ``chars`` and ``vocab`` on different sides.
    """
    gpu = is_gpu_object(chars)
    if vocab.on_gpu != gpu:
        raise TypeError(f"the text is {'cupy' if gpu else 'numpy'} but the vocabulary is on the "
                        f"{'device' if vocab.on_gpu else 'host'}; use VocabHash.to_device() or host arrays")
    xp = array_module(chars)
    n = len(starts)
    ids = xp.empty(n, np.int32)
    if n == 0:
        return ids
    chars = xp.ascontiguousarray(chars, dtype=np.uint8)
    starts = xp.ascontiguousarray(starts, dtype=np.int64)
    ends = xp.ascontiguousarray(ends, dtype=np.int64)
    if xp is np:
        _twin_lookup(chars, starts, ends, vocab.chars, vocab.offsets, vocab.table, np.int64(vocab.mask),
                     np.int32(unk_id), ids)
    else:
        g, b = _cuda.grid(min(n, 1 << 26))
        _cuda.kernel(SOURCE, "ws_lookup")(g, b, (chars, starts, ends, np.int64(n), vocab.chars, vocab.offsets,
                                                 vocab.table, np.int64(vocab.mask), np.int32(unk_id), ids))
    return ids


def segment_sum(x, seg):
    """Sums of consecutive segments of ``x``, each added in index order from 0.0 (deterministic).

    Parameters
    ----------
    x : float64 array (n,), numpy or cupy
    seg : int64 array (n_seg + 1,), same module, non-decreasing, ``seg[-1] <= n``
        Segment s is ``x[seg[s]:seg[s + 1]]``.

    Returns
    -------
    float64 array (n_seg,)
        Equal, bit for bit, to ``numpy.bincount(segment_of_each_x, weights=x)`` (which adds in index
        order too), on the GPU as on the CPU; atomics would make the last bits depend on the schedule.
    """
    xp = array_module(x)
    x = xp.ascontiguousarray(x, dtype=np.float64)
    seg = xp.ascontiguousarray(seg, dtype=np.int64)
    n_seg = len(seg) - 1
    out = xp.empty(max(n_seg, 0), np.float64)
    if n_seg <= 0:
        return out
    if xp is np:
        _twin_segment_sum(x, seg, out)
    else:
        g, b = _cuda.grid(min(n_seg, 1 << 26))
        _cuda.kernel(SOURCE, "ws_segment_sum")(g, b, (x, seg, np.int64(n_seg), out))
    return out


__all__ = ["VocabHash", "WHITESPACE", "lookup_words", "segment_sum", "word_bounds"]
