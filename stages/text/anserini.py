"""Anserini's ``DefaultEnglishAnalyzer`` on the CPU: the split and the filters before the stop list.

Anserini 1.7 (Lucene 9.9) analyzes text and queries with, in this order:

1. ``StandardTokenizer``: Unicode word boundaries (UAX #29, Lucene's JFlex grammar), keeping the
   segments that hold a letter (``Word_Break`` ALetter or Hebrew_Letter), a number (``Numeric``),
   Katakana, Hiragana, an ideograph, a South East Asian letter (``Line_Break`` Complex_Context), an
   emoji (``Extended_Pictographic``) or a regional indicator; so ``0.05``, ``U.S.A`` and ``don't`` are
   one token each, and ``²`` or ``-`` are none.  A run of South East Asian letters (Thai, Lao, Khmer,
   Myanmar; UAX #29 leaves them to a dictionary) is one token, as Lucene's grammar keeps it.  A word longer
   than 255 characters (``maxTokenLength``, the scanner's buffer) gives the longest token within its first
   255 characters, and the rest is scanned again.
2. ``EnglishPossessiveFilter``: a trailing ``'s`` (apostrophe U+0027, U+2019 or U+FF07; ``s`` or ``S``)
   is removed.
3. ``LowerCaseFilter``: each code point's simple lowercase mapping (pyarrow ``utf8_lower``).
4. ``StopFilter`` with Lucene's 33 English stopwords, and 5. ``PorterStemFilter``
   (:mod:`cutext.stages.text.porter`): the tokenizer's term map
   (:func:`cutext.stages.text.tokenize.apply_term_map`) with ``stopwords="lucene"`` and
   ``stemmer="lucene_porter"``.

The word boundaries are the ``regex`` module's (``(?w)\b``, the default rules of UAX #29), read as Lucene's
scanner reads its grammar; they equal Lucene's ``StandardTokenizer`` token for token on every document and
query of CACM, SciFact and 20 Newsgroups (against Anserini 1.7.1; benchmarks/anserini_reference.py), and on
97 % of 3,000 random strings of letters, digits, punctuation, marks, emoji, kana, Hangul, Hebrew and Thai (the
rest: emoji joined by ZWJ, a mark after ``_``, a Hebrew letter, quote and digit).
No NFC: Lucene analyzes the characters as they come.

A build splits with :func:`cutext.kernels.wordbreak.standard_token_bounds` (CUDA kernels over the same
``regex`` tables on the GPU, their numba twins on the CPU, equal to :func:`standard_tokens` token for token) and
runs steps 2-3 on the distinct tokens (:func:`possessive_lower`; ``stages/text/token_bytes.py``,
``split_anserini_host`` and ``split_anserini_gpu``); the ``regex`` split here is their reference, the split of
queries, and the fallback where the kernels report text past their stack.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from cutext.kernels.wordbreak import MAX_TOKEN_LENGTH, TOKEN_CHARS

__all__ = ["ANALYZERS", "MAX_TOKEN_LENGTH", "possessive_lower", "split_anserini", "standard_tokens"]

ANALYZERS = ("anserini",)
# EnglishPossessiveFilter: an apostrophe (U+0027, U+2019, U+FF07) and s or S at the end of a token
_POSSESSIVE = "['\u2019\uff07][sS]$"
_TOKEN_CHARS = TOKEN_CHARS
# a run of South East Asian letters with the marks inside it: one token (Lucene's SOUTHEAST_ASIAN type)
_MARKS = r"\p{WB=Extend}\p{WB=Format}\p{WB=ZWJ}"
# a segment of South East Asian letters (UAX #29 leaves them one a segment, for a dictionary); Lucene joins a run
_SOUTH_EAST_ASIAN = rf"\p{{Line_Break=Complex_Context}}[\p{{Line_Break=Complex_Context}}{_MARKS}]*"
_compiled = None


def _patterns():
    global _compiled
    if _compiled is None:
        try:
            import regex
        except ImportError:
            raise ImportError("analyzer='anserini' splits words with the 'regex' module (a dependency of cutext): "
                              "pip install regex") from None
        _compiled = (regex.compile(r"(?w)\b"), regex.compile(f"[{_TOKEN_CHARS}]"),
                     regex.compile(_SOUTH_EAST_ASIAN), regex.compile(f"[{_TOKEN_CHARS}\\p{{WB=ExtendNumLet}}]"))
    return _compiled


def _words(text: str, at: int, pats, out: list, sa_end: list) -> None:
    """Append the tokens of ``text`` (which starts at offset ``at`` of the document) to ``out``; a run of South
    East Asian letters that starts where the last one ended (``sa_end[0]``) is joined to it."""
    bounds, token, sea, start = pats
    for seg in bounds.split(text):
        lo, at = at, at + len(seg)
        if not seg:
            continue
        if seg.isascii():  # the common case: a word is a token when it holds a letter or a digit
            c = seg[0]
            if not (c.isalnum() or (c == "_" and seg.strip("_"))):
                continue
        elif token.search(seg) is None:
            continue
        elif start.match(seg) is None:  # the scanner skips a character no token starts with (marks after "!")
            _words(seg[1:], lo + 1, pats, out, sa_end)
            continue
        elif sea.fullmatch(seg) is not None:
            if sa_end[0] == lo:
                out[-1] += seg
            else:
                out.append(seg)
            sa_end[0] = at
            continue
        while len(seg) > MAX_TOKEN_LENGTH:  # the longest token in the scanner's buffer, then the rest
            head = next(p for p in bounds.split(seg[:MAX_TOKEN_LENGTH]) if p)
            if token.search(head) is not None:
                out.append(head)
            seg, lo = seg[len(head):], lo + len(head)
            if len(seg) <= MAX_TOKEN_LENGTH:
                _words(seg, lo, pats, out, sa_end)
                seg = ""
        if seg:
            out.append(seg)


def standard_tokens(text: str) -> list[str]:
    """The tokens of Lucene's ``StandardTokenizer`` in one text (step 1 above), in order, case kept.

    Raises
    ------
    ImportError
        The ``regex`` module is missing.
    """
    out: list[str] = []
    _words(text, 0, _patterns(), out, [-1])
    if any(len(t) > MAX_TOKEN_LENGTH for t in out):  # a joined South East Asian run: the buffer's pieces
        out = [t[i:i + MAX_TOKEN_LENGTH] for t in out for i in range(0, len(t), MAX_TOKEN_LENGTH)]
    return out


def possessive_lower(tokens) -> pa.LargeStringArray:
    """Steps 2-3 above (possessive filter, then lowercase) on tokens of step 1.

    Parameters
    ----------
    tokens : pyarrow string array, shape (n,)

    Returns
    -------
    pyarrow.LargeStringArray, shape (n,)
        Each token without a trailing apostrophe + ``s`` / ``S``, lowercased (pyarrow ``utf8_lower``).
    """
    import pyarrow.compute as pc

    return pc.utf8_lower(pc.replace_substring_regex(tokens.cast(pa.large_string()), _POSSESSIVE, "",
                                                    max_replacements=1))


def split_anserini(text, doc_id):
    """Steps 1-3 above on a column of texts (the CPU split of ``analyzer="anserini"``).

    Parameters
    ----------
    text : pandas.Series or pyarrow string array, shape (n_docs,) (a null is an empty text)
    doc_id : numpy int64 array, shape (n_docs,)

    Returns
    -------
    (pandas.Series of str (pyarrow), numpy int64 array)
        The tokens in document order, lowercased, shape (n_tokens,), and the doc_id of each.

    Raises
    ------
    TypeError
        A cudf column (its split is :func:`cutext.stages.text.token_bytes.split_anserini_gpu`).
    """
    if type(text).__module__.split(".")[0] == "cudf":
        raise TypeError("split_anserini takes host text; a cudf column splits on the device "
                        "(cutext.stages.text.token_bytes.split_anserini_gpu)")
    values = text.to_pylist() if isinstance(text, (pa.Array, pa.ChunkedArray)) else text.tolist()
    tokens: list[str] = []
    counts = np.zeros(len(values), np.int64)
    for i, t in enumerate(values):
        if t is None or t is pd.NA or t != t:  # null, NA or NaN: an empty text
            continue
        got = standard_tokens(t)
        tokens.extend(got)
        counts[i] = len(got)
    arr = possessive_lower(pa.array(tokens, type=pa.large_string()))
    return pd.Series(arr, dtype=pd.StringDtype("pyarrow")), np.repeat(np.asarray(doc_id), counts)
