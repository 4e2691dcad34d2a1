"""Porter's stemmer as Martin Porter's reference C implementation and Lucene's ``PorterStemmer`` run it.

M. F. Porter, "An algorithm for suffix stripping", Program 14(3), 1980, with the two departures of
Porter's own implementation (tartarus.org/martin/PorterStemmer, which Lucene's ``PorterStemFilter``
follows): step 2 maps ``-bli`` to ``-ble`` (the paper: ``-abli`` to ``-able``) and ``-logi`` to ``-log``.
Snowball's ``porter`` (PyStemmer) is the paper's algorithm without them, so it stems ``technology``
to ``technologi`` where Lucene gives ``technolog`` (1,500 of the 72,825 CACM + SciFact terms differ).

Words of one or two characters are left as they are.  Any character other than ``a e i o u`` (and
``y`` after a vowel) counts as a consonant, as in the reference implementation, so non-ASCII words
go through the same rules.

:func:`porter_stem` is the reference, one word at a time in Python; :func:`porter_stems` (a list) and
:func:`porter_stem_array` (an Arrow array) run the same algorithm in numba over UTF-8 bytes
(:mod:`cutext.kernels.porter`) when they have ``FAST_MIN_WORDS`` words or more.
"""
from __future__ import annotations

import pyarrow as pa

from cutext.kernels.porter import RULES, stem_buffers
from cutext.kernels.tokenize import arrow_buffers

__all__ = ["FAST_MIN_WORDS", "porter_stem", "porter_stem_array", "porter_stems"]

# below this many words the Python stemmer is as fast as a numba call and its conversions
FAST_MIN_WORDS = 256

_VOWELS = frozenset("aeiou")

# steps 2, 3 and 4's (suffix, replacement) rules, keyed by the letter the step looks at (the kernel's table); the
# first suffix that matches ends the step whether or not its measure lets it be replaced (the reference's break)
_STEP2, _STEP3 = RULES[0], RULES[1]
_STEP4 = {c: tuple(suf for suf, _ in rules) for c, rules in RULES[2].items()}


def _cons(w: str, i: int) -> bool:
    c = w[i]
    if c in _VOWELS:
        return False
    if c == "y":
        return i == 0 or not _cons(w, i - 1)
    return True


def _measure(w: str, j: int) -> int:
    """m of ``w[:j + 1]``: the number of vowel-consonant sequences [C](VC)^m[V]."""
    n, i = 0, 0
    while i <= j and _cons(w, i):
        i += 1
    while True:
        while i <= j and not _cons(w, i):
            i += 1
        if i > j:
            return n
        while i <= j and _cons(w, i):
            i += 1
        n += 1
        if i > j:
            return n


def _vowel_in(w: str, j: int) -> bool:
    return any(not _cons(w, i) for i in range(j + 1))


def _double_c(w: str, j: int) -> bool:
    return j >= 1 and w[j] == w[j - 1] and _cons(w, j)


def _cvc(w: str, i: int) -> bool:
    """``w[i-2:i+1]`` is consonant-vowel-consonant and ``w[i]`` is not w, x or y."""
    if i < 2 or not _cons(w, i) or _cons(w, i - 1) or not _cons(w, i - 2):
        return False
    return w[i] not in "wxy"


def _step1(w: str) -> str:
    if w.endswith("s"):
        if w.endswith("sses"):
            w = w[:-2]
        elif w.endswith("ies"):
            w = w[:-2]
        elif len(w) < 2 or w[-2] != "s":
            w = w[:-1]
    if w.endswith("eed"):
        if _measure(w, len(w) - 4) > 0:
            w = w[:-1]
        return w
    for suf in ("ed", "ing"):
        if w.endswith(suf) and _vowel_in(w, len(w) - len(suf) - 1):
            w = w[:-len(suf)]
            if w.endswith(("at", "bl", "iz")):
                return w + "e"
            if _double_c(w, len(w) - 1):
                return w if w[-1] in "lsz" else w[:-1]
            if _measure(w, len(w) - 1) == 1 and _cvc(w, len(w) - 1):
                return w + "e"
            return w
        if w.endswith(suf):  # "ed" matched without a vowel before it: "ing" is not tried
            return w
    return w


def _replace(w: str, rules) -> str:
    for suf, rep in rules:
        if w.endswith(suf):
            j = len(w) - len(suf) - 1
            return w[:j + 1] + rep if _measure(w, j) > 0 else w
    return w


def _step4(w: str) -> str:
    for suf in _STEP4.get(w[-2], ()):
        if not w.endswith(suf):
            continue
        j = len(w) - len(suf) - 1
        if suf == "ion" and (j < 0 or w[j] not in "st"):
            continue
        return w[:j + 1] if _measure(w, j) > 1 else w
    return w


def _step5(w: str) -> str:
    k = len(w) - 1
    if w[k] == "e":
        m = _measure(w, k - 1)
        if m > 1 or (m == 1 and not _cvc(w, k - 1)):
            w = w[:k]
    if w.endswith("l") and _double_c(w, len(w) - 1) and _measure(w, len(w) - 1) > 1:
        w = w[:-1]
    return w


def porter_stem(word: str) -> str:
    """The stem of one lowercase word (Lucene's ``PorterStemFilter``).

    Parameters
    ----------
    word : str

    Returns
    -------
    str
    """
    if len(word) <= 2:
        return word
    w = _step1(word)
    if w.endswith("y") and _vowel_in(w, len(w) - 2):  # step 1c
        w = w[:-1] + "i"
    if len(w) > 1:
        w = _replace(w, _STEP2.get(w[-2], ()))
    w = _replace(w, _STEP3.get(w[-1], ()))
    if len(w) > 1:
        w = _step4(w)
    return _step5(w)


def porter_stems(words) -> list[str]:
    """:func:`porter_stem` of every word of a sequence of str, in order.

    Parameters
    ----------
    words : sequence of str, length n

    Returns
    -------
    list of str, length n
        From the numba kernel (:func:`porter_stem_array`) for ``FAST_MIN_WORDS`` words or more, unless a
        word is not encodable as UTF-8 (a lone surrogate), which the Python stemmer takes as any other word.
    """
    if len(words) < FAST_MIN_WORDS:
        return [porter_stem(w) for w in words]
    try:
        arr = pa.array(words, type=pa.large_string())
    except UnicodeEncodeError:
        return [porter_stem(w) for w in words]
    return porter_stem_array(arr, min_words=0).to_pylist()


def porter_stem_array(words, *, min_words: int | None = None) -> pa.LargeStringArray:
    """:func:`porter_stem` of every string of an Arrow array, in order, by the numba kernel of
    :mod:`cutext.kernels.porter`.

    Parameters
    ----------
    words : pyarrow.Array or ChunkedArray of string or large_string, length n, without nulls
    min_words : int >= 0, optional
        Under this many strings (default ``FAST_MIN_WORDS``) the Python stemmer runs instead: the same stems.

    Returns
    -------
    pyarrow.LargeStringArray, length n

    Raises
    ------
    TypeError
        ``words`` is not an Arrow array of strings.
    ValueError
        ``words`` has nulls, or ``min_words`` is negative.
    """
    min_words = FAST_MIN_WORDS if min_words is None else min_words
    if min_words < 0:
        raise ValueError(f"porter_stem_array: min_words must be >= 0, got {min_words}")
    if isinstance(words, pa.ChunkedArray):
        words = words.combine_chunks()
    kind = getattr(words, "type", type(words))
    if not isinstance(words, pa.Array) or not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise TypeError(f"porter_stem_array: words must be a pyarrow string array, got {kind}")
    if words.null_count:
        raise ValueError(f"porter_stem_array: words has {words.null_count} nulls; drop them first (words.drop_null())")
    if words.type != pa.large_string():
        words = words.cast(pa.large_string())
    if len(words) < min_words:
        return pa.array([porter_stem(w) for w in words.to_pylist()], type=pa.large_string())
    data, offsets = arrow_buffers(words)
    new_offsets, out = stem_buffers(offsets, data)
    return pa.LargeStringArray.from_buffers(len(words), pa.py_buffer(new_offsets), pa.py_buffer(out))
