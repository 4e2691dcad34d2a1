"""Porter's stemmer (Lucene's ``PorterStemFilter``) over the UTF-8 buffers of an Arrow string array (numba).

The algorithm is :func:`cutext.stages.text.porter.porter_stem`'s (its reference and test oracle), run on
bytes with one thread a word.  Bytes stand for code points without changing a stem because every letter
the rules name is ASCII, which UTF-8 never uses inside a longer character:

* a suffix of ASCII letters ends the bytes exactly where it ends the code points;
* every byte of a non-ASCII character is a consonant, and a run of consonants counts once in the measure
  ``m``, so ``m`` and "has a vowel" come out as on code points;
* the places that look at whole characters do so: a word of one or two *code points* is left as it is,
  step 1b's double consonant compares (and drops) the last two whole characters, and
  consonant-vowel-consonant takes the last character whole.

Stems are never longer than their words, so each word is stemmed in place in a copy of the data buffer
and the stems are then packed (:func:`stem_buffers`).
"""
from __future__ import annotations

import threading

import numba
import numpy as np

import cutext.kernels._numba_cache  # noqa: F401  # before the decorators: it places and stamps their cache

__all__ = ["RULES", "stem_buffers"]

_A, _E, _I, _L, _S, _Y = (ord(c) for c in "aeilsy")

_VOWEL = np.zeros(256, np.bool_)
_VOWEL[[ord(c) for c in "aeiou"]] = True

# rules of steps 2, 3 and 4 as Lucene's PorterStemmer orders them, keyed by the letter the step looks at
# (step 2 and 4: the last but one, step 3: the last); the first suffix that matches ends the step
RULES = (
    {"a": (("ational", "ate"), ("tional", "tion")),
     "c": (("enci", "ence"), ("anci", "ance")),
     "e": (("izer", "ize"),),
     "l": (("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous")),
     "o": (("ization", "ize"), ("ation", "ate"), ("ator", "ate")),
     "s": (("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous")),
     "t": (("aliti", "al"), ("iviti", "ive"), ("biliti", "ble")),
     "g": (("logi", "log"),)},
    {"e": (("icate", "ic"), ("ative", ""), ("alize", "al")),
     "i": (("iciti", "ic"),),
     "l": (("ical", "ic"), ("ful", "")),
     "s": (("ness", ""),)},
    {"a": (("al", ""),), "c": (("ance", ""), ("ence", "")), "e": (("er", ""),), "i": (("ic", ""),),
     "l": (("able", ""), ("ible", "")), "n": (("ant", ""), ("ement", ""), ("ment", ""), ("ent", "")),
     "o": (("ion", ""), ("ou", "")), "s": (("ism", ""),), "t": (("ate", ""), ("iti", "")), "u": (("ous", ""),),
     "v": (("ive", ""),), "z": (("ize", ""),)},
)


def _rule_tables():
    """(first int32 (3, 257): rows of step t keyed by byte c are ``first[t, c]:first[t, c + 1]``;
    rows int32 (R, 4): suffix offset, suffix length, replacement offset, replacement length in pool;
    pool uint8)."""
    pool, rows = bytearray(), []
    first = np.zeros((3, 257), np.int32)
    for t, step in enumerate(RULES):
        for c in range(256):
            first[t, c] = len(rows)
            for suf, rep in step.get(chr(c), ()):
                rows.append((len(pool), len(suf), len(pool) + len(suf), len(rep)))
                pool += (suf + rep).encode()
        first[t, 256] = len(rows)
    return first, np.array(rows, np.int32), np.frombuffer(bytes(pool), np.uint8).copy()


_FIRST, _ROWS, _POOL = _rule_tables()
# one call at a time: numba's workqueue threading layer (where neither OpenMP nor TBB loads) aborts the process on
# parallel regions entered from two threads at once, and each call already runs on all of numba's threads
_LOCK = threading.Lock()
_STEP2, _STEP3, _STEP4 = 0, 1, 2


@numba.njit(nogil=True, cache=True, inline="always")
def _cons(b, s, i):
    """Whether ``b[i]`` is a consonant of the word that starts at ``s``: not a e i o u, and a ``y`` only at
    the start or after a vowel (the reference's recursion, unrolled over the run of y's before ``i``)."""
    c = b[i]
    if _VOWEL[c]:
        return False
    if c != _Y:
        return True
    j = i
    while j > s and b[j - 1] == _Y:
        j -= 1
    first = True if j == s else _VOWEL[b[j - 1]]
    return first if (i - j) % 2 == 0 else not first


@numba.njit(nogil=True, cache=True, inline="always")
def _next_cons(b, s, i, prev):
    """:func:`_cons` of ``b[i]`` given ``prev``, that of ``b[i - 1]`` (forward scans)."""
    c = b[i]
    if _VOWEL[c]:
        return False
    if c != _Y:
        return True
    return i == s or not prev


@numba.njit(nogil=True, cache=True)
def _measure(b, s, e):
    """``m`` of ``b[s:e]``: its vowel-to-consonant changes, the m of [C](VC)^m[V]."""
    m = 0
    prev = True
    for i in range(s, e):
        c = _next_cons(b, s, i, prev)
        if c and not prev:
            m += 1
        prev = c
    return m


@numba.njit(nogil=True, cache=True)
def _has_vowel(b, s, e):
    prev = True
    for i in range(s, e):
        prev = _next_cons(b, s, i, prev)
        if not prev:
            return True
    return False


@numba.njit(nogil=True, cache=True, inline="always")
def _cvc(b, s, i):
    """The last three characters of ``b[s:i+1]`` are consonant-vowel-consonant and the last is not w, x or y
    (``b[i]`` ends a character, which may be several bytes: a consonant)."""
    p = i
    while p > s and (b[p] & 0xC0) == 0x80:
        p -= 1
    if p - 2 < s or _cons(b, s, p - 1) or not _cons(b, s, p - 2):
        return False
    if p < i:
        return True
    c = b[i]
    return _cons(b, s, i) and c != 119 and c != 120 and c != _Y


@numba.njit(nogil=True, cache=True, inline="always")
def _ends(b, s, e, off, n):
    """Whether ``b[s:e]`` ends with ``_POOL[off:off + n]``."""
    if n > e - s:
        return False
    for t in range(n):
        if b[e - n + t] != _POOL[off + t]:
            return False
    return True


@numba.njit(nogil=True, cache=True, inline="always")
def _ends2(b, s, e, c0, c1):
    return e - s >= 2 and b[e - 2] == c0 and b[e - 1] == c1


@numba.njit(nogil=True, cache=True)
def _double_end(b, s, e):
    """Bytes of the last character of ``b[s:e]`` when it equals the character before it and is a consonant, else 0."""
    if e - s < 2:
        return 0
    c = b[e - 1]
    if c < 0x80:
        return 1 if b[e - 2] == c and _cons(b, s, e - 1) else 0
    p = e - 1
    while p > s and (b[p] & 0xC0) == 0x80:
        p -= 1
    n = e - p
    if p - n < s:
        return 0
    for t in range(n):  # equal bytes from a lead byte: the character before is this one
        if b[p - n + t] != b[p + t]:
            return 0
    return n


@numba.njit(nogil=True, cache=True)
def _step1ab(b, s, e):
    if b[e - 1] == _S:
        if e - s >= 4 and b[e - 4] == _S and b[e - 3] == _S and b[e - 2] == _E:
            e -= 2
        elif e - s >= 3 and b[e - 3] == _I and b[e - 2] == _E:
            e -= 2
        elif b[e - 2] != _S:
            e -= 1
    if e - s >= 3 and b[e - 3] == _E and _ends2(b, s, e, _E, 100):  # eed
        if _measure(b, s, e - 3) > 0:
            e -= 1
        return e
    if _ends2(b, s, e, _E, 100):  # ed
        n = 2
    elif e - s >= 3 and b[e - 3] == _I and _ends2(b, s, e, 110, 103):  # ing
        n = 3
    else:
        return e
    if not _has_vowel(b, s, e - n):
        return e
    e -= n
    if _ends2(b, s, e, _A, 116) or _ends2(b, s, e, 98, _L) or _ends2(b, s, e, _I, 122):  # at bl iz
        b[e] = _E
        return e + 1
    d = _double_end(b, s, e)
    if d:
        c = b[e - 1]
        return e if c == _L or c == _S or c == 122 else e - d
    if _measure(b, s, e) == 1 and _cvc(b, s, e - 1):
        b[e] = _E
        return e + 1
    return e


@numba.njit(nogil=True, cache=True)
def _replace(b, s, e, step, key, least):
    """Steps 2-4: the first rule of ``step`` keyed by ``key`` whose suffix ends the word replaces it when the
    measure before it exceeds ``least``; step 4's ``-ion`` (key o, 3 letters) needs an s or t before it."""
    for r in range(_FIRST[step, key], _FIRST[step, key + 1]):
        off, n, roff, rn = _ROWS[r, 0], _ROWS[r, 1], _ROWS[r, 2], _ROWS[r, 3]
        if not _ends(b, s, e, off, n):
            continue
        j = e - n
        if step == _STEP4 and key == 111 and n == 3 and (j == s or (b[j - 1] != _S and b[j - 1] != 116)):
            continue
        if _measure(b, s, j) <= least:
            return e
        for t in range(rn):
            b[j + t] = _POOL[roff + t]
        return j + rn
    return e


@numba.njit(nogil=True, cache=True)
def stem_word(b, s, e):
    """Stem ``b[s:e]`` (UTF-8) in place; returns the stem's end (``<= e``)."""
    n_cp = 0
    for i in range(s, e):
        if (b[i] & 0xC0) != 0x80:
            n_cp += 1
            if n_cp > 2:
                break
    if n_cp <= 2:
        return e
    e = _step1ab(b, s, e)
    if b[e - 1] == _Y and _has_vowel(b, s, e - 1):  # step 1c
        b[e - 1] = _I
    if e - s > 1:
        e = _replace(b, s, e, _STEP2, b[e - 2], 0)
    e = _replace(b, s, e, _STEP3, b[e - 1], 0)
    if e - s > 1:
        e = _replace(b, s, e, _STEP4, b[e - 2], 1)
    if b[e - 1] == _E:  # step 5
        m = _measure(b, s, e - 1)
        if m > 1 or (m == 1 and not _cvc(b, s, e - 2)):
            e -= 1
    if e > s and b[e - 1] == _L and _double_end(b, s, e) and _measure(b, s, e) > 1:
        e -= 1
    return e


@numba.njit(nogil=True, cache=True, parallel=True)
def _stem_all(offsets, work, lengths):
    base = offsets[0]
    for w in numba.prange(offsets.shape[0] - 1):
        s = offsets[w] - base
        lengths[w] = stem_word(work, s, offsets[w + 1] - base) - s


@numba.njit(nogil=True, cache=True, parallel=True)
def _pack(offsets, work, new_offsets, out):
    base = offsets[0]
    for w in numba.prange(offsets.shape[0] - 1):
        s = offsets[w] - base
        d = new_offsets[w]
        for t in range(new_offsets[w + 1] - d):
            out[d + t] = work[s + t]


def stem_buffers(offsets: np.ndarray, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Porter stems of the n UTF-8 strings ``data[offsets[i]:offsets[i + 1]]``, as new buffers.

    Parameters
    ----------
    offsets : int64 array, shape (n + 1,)
        Byte offsets into ``data`` (those of an Arrow ``large_string`` array, its slice offset applied).
    data : uint8 array
        Valid UTF-8 (Arrow's strings are).

    Returns
    -------
    (int64 offsets (n + 1,) from 0, uint8 data)
        The stems, the buffers of a ``large_string`` array.  Calls from several threads run one after another.
    """
    n = offsets.shape[0] - 1
    work = data[offsets[0]:offsets[-1]].copy()
    lengths = np.empty(n, np.int64)
    new_offsets = np.zeros(n + 1, np.int64)
    if n == 0:
        return new_offsets, np.zeros(0, np.uint8)
    with _LOCK:
        _stem_all(offsets, work, lengths)
        np.cumsum(lengths, out=new_offsets[1:])
        out = np.empty(int(new_offsets[-1]), np.uint8)
        _pack(offsets, work, new_offsets, out)
    return new_offsets, out
