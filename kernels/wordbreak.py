"""Lucene's ``StandardTokenizer`` over UTF-8 bytes: CUDA kernels (``wordbreak.cu``) and their numba CPU twins.

The split of ``analyzer="anserini"`` (:mod:`cutext.stages.text.anserini`, whose ``standard_tokens`` is the
reference these kernels equal token for token), as byte offsets of the tokens, case kept:

1. **Word boundaries** (``wb_segment_starts``, a thread a byte): UAX #29 default word boundaries as the
   ``regex`` module decides ``(?w)\\b`` (``unicode_at_default_boundary`` of its ``_regex.c``, version 2026.12.2:
   rules WB1-WB16 without WB5a, the WB4 skip of Extend / Format / ZWJ to the left, the look-ahead and
   look-behind of WB6, WB7, WB7b, WB7c, WB11, WB12, regional indicators counted back for WB15/16), inside each
   row; ``regex`` changed these rules in 2026.11.18, so an older one may split rare text otherwise.  Every
   decision reads a few code points on each side, so each code point start decides its own boundary.  Between
   two ASCII bytes one lookup in :func:`ascii_pairs` decides most of them (the full rules run where it says
   "undecided", or next to a non-ASCII byte).
2. **Tokens of a segment** (``wb_count_pieces`` / ``wb_write_pieces``, a thread the segments that start in a
   chunk of :data:`CHUNK` bytes, count, scan, then write):
   a segment is kept when it holds a token character (:data:`TOKEN_CHARS`); one whose first character no token
   starts with is split again without it (Lucene's scanner skips that character); a segment longer than
   :data:`MAX_TOKEN_LENGTH` code points gives the first segment of its first 255 code points, and the rest is
   scanned again; a segment of South East Asian letters (``Line_Break=Complex_Context`` with its marks) is
   marked, and runs of marked segments that touch are joined (:func:`standard_token_bounds`), then cut every
   255 code points.  The nested scans keep their ranges in a stack of :data:`STACK_DEPTH` levels per thread (a
   scan that ends where its parent's range ends replaces it); deeper nesting (adversarial text only: a run of
   more than 32 nested punctuation + format-character segments) is reported, and the caller takes the exact
   CPU analyzer for that batch.  A segment of at most 255 ASCII bytes (most of them) is read in one pass over
   its bytes (``_ascii_pieces``: one piece when it starts with a token character or an ExtendNumLet and holds
   a token character, none when it holds none); only one that needs a nested scan takes the full one.

Code point properties come from the ``regex`` module's own Unicode tables (the CPU analyzer's), read once
by matching each property against every code point, into one class byte a code point
(:func:`class_table`: bits 0-4 the ``Word_Break`` value numbered as ``_regex_unicode.h`` numbers it, bit 5 a
token character, bit 6 ``Extended_Pictographic``, bit 7 ``Line_Break=Complex_Context``), stored as a two-level
table (:func:`lookup_tables`: ``stage2[stage1[cp >> 7] * 128 + (cp & 127)]``, 128-code-point blocks, equal
blocks shared).  Input is valid UTF-8 (the readers guarantee it); a byte that is not is one ``Other`` character.

Functions take numpy or cupy arrays and run where the data is: numpy -> the numba twins (plain loops, one
thread), cupy -> the CUDA kernels, compiled once per device by :mod:`cutext.kernels._cuda`.  The twins are
the oracle of the GPU tests (tests/gpu/test_wordbreak.py) and are checked against ``standard_tokens``
(tests/kernels/test_wordbreak.py), their ASCII fast paths against their full rules byte for byte (the pair
table of all "undecided", ``_pieces_cpu(..., ascii_fast=False)``); the CUDA C runs under g++ in
tests/emulated/test_wordbreak.py.
"""
from __future__ import annotations

import threading
from functools import lru_cache

import numba
import numpy as np

import cutext.kernels._numba_cache  # noqa: F401  # before the decorators: it places and stamps their cache
from cutext.kernels import _cuda
from cutext.kernels.backend import array_module, to_host
from cutext.kernels.tokenize import BOUNDS_CHUNK, N_CODE_POINTS, _kept_on_disk

__all__ = ["MAX_TOKEN_LENGTH", "PAIR_BREAK", "PAIR_NO_BREAK", "PAIR_UNDECIDED", "SOUTH_EAST_ASIAN", "STACK_DEPTH",
           "TOKEN_CHARS", "ascii_pairs", "class_table", "lookup_tables", "segment_starts", "standard_token_bounds"]

SOURCE = "wordbreak.cu"
# StandardAnalyzer.DEFAULT_MAX_TOKEN_LENGTH (code points)
MAX_TOKEN_LENGTH = 255
# nested scans a thread keeps (wordbreak.cu's WB_DEPTH)
STACK_DEPTH = 32
# characters that make a segment a token (Lucene's grammar: letters, numbers, kana, ideographs, South East
# Asian letters, emoji, regional indicators); a token starts with one of them or with an ExtendNumLet
TOKEN_CHARS = (r"\p{WB=ALetter}\p{WB=Hebrew_Letter}\p{WB=Numeric}\p{WB=Katakana}\p{Ideographic}"
               r"\p{Script=Hiragana}\p{Line_Break=Complex_Context}\p{Extended_Pictographic}"
               r"\p{Emoji_Modifier}\p{WB=Regional_Indicator}")
# Word_Break values in _regex_unicode.h's numbering (RE_WBREAK_*), the low 5 bits of a class byte
WORD_BREAK = ("Other", "LF", "Newline", "CR", "WSegSpace", "Double_Quote", "Single_Quote", "MidNum", "MidNumLet",
              "Numeric", "MidLetter", "ALetter", "ExtendNumLet", "Format", "Extend", "Hebrew_Letter", "ZWJ",
              "Katakana", "Regional_Indicator")
(OTHER, LF, NEWLINE, CR, WSEG, DQUOTE, SQUOTE, MIDNUM, MIDNUMLET, NUMERIC, MIDLETTER, ALETTER, EXTENDNUMLET, FORMAT,
 EXTEND, HEBREW, ZWJ, KATAKANA, RI) = range(len(WORD_BREAK))
NONE = 31  # outside the scanned range (the 0xFFFF of _regex.c)
TOKEN, PICT, SOUTH_EAST_ASIAN = 32, 64, 128
# the values of ascii_pairs(): the boundary between two ASCII bytes, whatever surrounds them, or "read the rules"
PAIR_NO_BREAK, PAIR_BREAK, PAIR_UNDECIDED = 0, 1, 2
BLOCK_BITS = 7
# bytes whose segments one thread of wb_count_pieces / wb_write_pieces takes (tokenize's chunk)
CHUNK = BOUNDS_CHUNK


def _regex():
    try:
        import regex
    except ImportError:
        raise ImportError("analyzer='anserini' reads word boundaries from the 'regex' module (a dependency of "
                          "cutext): pip install regex") from None
    return regex


@lru_cache(maxsize=1)
def _class_table_tag() -> str:
    return f"regex{_regex().__version__}"


def _build_class_table() -> np.ndarray:
    regex = _regex()
    cps = np.r_[np.arange(0xD800), np.arange(0xE000, N_CODE_POINTS)]
    text = "".join(map(chr, cps.tolist()))

    def where(prop):
        return cps[[m.start() for m in regex.finditer(prop, text)]]

    t = np.zeros(N_CODE_POINTS, np.uint8)
    for value, name in enumerate(WORD_BREAK):
        t[where(rf"\p{{WB={name}}}")] = value
    t[where(f"[{TOKEN_CHARS}]")] |= TOKEN
    t[where(r"\p{Extended_Pictographic}")] |= PICT
    t[where(r"\p{Line_Break=Complex_Context}")] |= SOUTH_EAST_ASIAN
    return t


_class_table_kept = _kept_on_disk(_build_class_table, tag=_class_table_tag)


@lru_cache(maxsize=1)
def class_table() -> np.ndarray:
    """uint8 array (0x110000,): the class byte of every code point (the ``regex`` module's Unicode data).

    Bits 0-4: the ``Word_Break`` value (:data:`WORD_BREAK` order, ``_regex_unicode.h``'s numbering); bit 5
    (:data:`TOKEN`): a token character (:data:`TOKEN_CHARS`); bit 6 (:data:`PICT`): ``Extended_Pictographic``;
    bit 7 (:data:`SOUTH_EAST_ASIAN`): ``Line_Break=Complex_Context``.  Surrogates are 0.  Built once a
    machine (about 1 s) and kept beside the numba cache, named after the ``regex`` version.

    Raises
    ------
    ImportError
        The ``regex`` module is missing.
    """
    return _class_table_kept()


@lru_cache(maxsize=1)
def lookup_tables() -> tuple[np.ndarray, np.ndarray]:
    """The two-level form of :func:`class_table`: ``(stage1 uint16 (0x110000 >> 7,), stage2 uint8 (B * 128,))``,
    ``class(cp) = stage2[(stage1[cp >> 7] << 7) | (cp & 127)]``; equal 128-code-point blocks are stored once."""
    blocks = class_table().reshape(-1, 1 << BLOCK_BITS)
    uniq, index = np.unique(blocks, axis=0, return_inverse=True)
    return index.reshape(-1).astype(np.uint16), np.ascontiguousarray(uniq.reshape(-1))


def _pair_contexts():
    """(ascii_reps, rows, at): every text ``X L R Y`` with L, R an ASCII byte of each ASCII class (``ascii_reps``,
    in class order) and X, Y one code point of each class byte or nothing, as UTF-8 rows; ``at[r]``: R's byte."""
    t = class_table()
    cps = np.arange(len(t))
    scalar = (cps < 0xD800) | (cps >= 0xE000)
    reps = [""] + [chr(int(cps[scalar & (t == v)][0])) for v in np.unique(t)]
    ascii_reps = [chr(int(np.flatnonzero(t[:128] == v)[0])) for v in np.unique(t[:128])]
    rows, at = [], []
    for left in ascii_reps:
        for right in ascii_reps:
            for x in reps:
                for y in reps:
                    rows.append((x + left + right + y).encode())
                    at.append(len(x.encode()) + 1)
    return ascii_reps, rows, np.array(at, np.int64)


def _build_ascii_pairs() -> np.ndarray:
    t = class_table()
    t1, t2 = lookup_tables()
    ascii_reps, rows, at = _pair_contexts()
    lengths = np.fromiter(map(len, rows), np.int64, len(rows))
    starts = np.r_[0, np.cumsum(lengths)]
    data = np.frombuffer(b"".join(rows), np.uint8).copy()
    bound = np.zeros(len(data) + 1, np.uint8)
    bound[starts] = 1
    flags = np.zeros(len(data), np.uint8)
    _segment_flags(data, bound, t1, t2, np.full(128 * 128, PAIR_UNDECIDED, np.uint8), flags)
    got = flags[starts[:-1] + at].reshape(len(ascii_reps) ** 2, -1)
    decided = (got == got[:, :1]).all(axis=1)
    by_class = np.where(decided, got[:, 0], PAIR_UNDECIDED).reshape(len(ascii_reps), len(ascii_reps))
    index = np.searchsorted(np.unique(t[:128]), t[:128])  # each ASCII byte's row in by_class
    return np.ascontiguousarray(by_class[index[:, None], index[None, :]].reshape(-1).astype(np.uint8))


# kept on disk: the GPU path would otherwise load the numba twin (0.3 s) in every process to make it
_ascii_pairs_kept = _kept_on_disk(_build_ascii_pairs, tag=_class_table_tag, size=128 * 128)


@lru_cache(maxsize=1)
def ascii_pairs() -> np.ndarray:
    """uint8 array (128 * 128,): ``pairs[(a << 7) | b]`` decides the word boundary between the ASCII bytes ``a``
    and ``b`` inside a row: :data:`PAIR_NO_BREAK`, :data:`PAIR_BREAK`, or :data:`PAIR_UNDECIDED` (the rules read
    the characters around them: WB6, WB7, WB11, WB12 at ``'`` ``.`` ``:`` ``,`` ``;``).

    Made from the full rules themselves (``_is_break`` with no table): each pair of ASCII classes is set in every
    context ``X L R Y``, X and Y each a code point of every class byte or nothing (a row's edge), and is decided
    only when every context gives the same answer.  The rules read beyond L and R only the first character
    that is not Extend / Format / ZWJ on each side (or the row's edge), which one such neighbour stands for.
    Built once a machine (about 0.4 s) and kept beside the numba cache, as :func:`class_table` is.

    Raises
    ------
    ImportError
        The ``regex`` module is missing.
    """
    return _ascii_pairs_kept()


# ----------------------------------------------------------------------------- CPU twins (numba)

@numba.njit(cache=True, nogil=True)
def _step(data, pos, end):
    """Bytes of the code point at ``pos`` (its lead byte's length, at most ``end - pos``; ``wb_step``)."""
    b = data[pos]
    n = 1
    if b >= 0xF0 and b < 0xF8:
        n = 4
    elif b >= 0xE0 and b < 0xF0:
        n = 3
    elif b >= 0xC0 and b < 0xE0:
        n = 2
    if pos + n > end:
        n = end - pos
    return n


@numba.njit(cache=True, nogil=True)
def _prev(data, pos, lo):
    """Start of the code point before ``pos`` (not before ``lo``; ``wb_prev``)."""
    q = pos - 1
    while q > lo and (data[q] & 0xC0) == 0x80:
        q -= 1
    return q


@numba.njit(cache=True, nogil=True)
def _cls(data, pos, end, t1, t2):
    """Class byte of the code point at ``pos`` (``wb_class``); a byte that is not UTF-8 is Other (0)."""
    b0 = np.int64(data[pos])
    if b0 < 0x80:
        return np.int64(t2[(np.int64(t1[0]) << 7) | b0])
    if b0 >= 0xC0 and b0 < 0xE0:
        n, cp = 2, b0 & 0x1F
    elif b0 >= 0xE0 and b0 < 0xF0:
        n, cp = 3, b0 & 0x0F
    elif b0 >= 0xF0 and b0 < 0xF8:
        n, cp = 4, b0 & 0x07
    else:
        return 0
    if pos + n > end:
        return 0
    for k in range(1, n):
        cp = (cp << 6) | np.int64(data[pos + k] & 0x3F)
    if cp >= 0x110000:
        return 0
    return np.int64(t2[(np.int64(t1[cp >> 7]) << 7) | (cp & 127)])


@numba.njit(cache=True, nogil=True, inline="always")
def _efz(w):
    return w == EXTEND or w == FORMAT or w == ZWJ


@numba.njit(cache=True, nogil=True, inline="always")
def _ahl(w):
    return w == ALETTER or w == HEBREW


@numba.njit(cache=True, nogil=True, inline="always")
def _midnumletq(w):
    return w == MIDNUMLET or w == SQUOTE


@numba.njit(cache=True, nogil=True)
def _ahead(data, bound, hi, pos, t1, t2):
    """Word_Break of the first character after ``pos`` that is not Extend / Format / ZWJ (NONE past ``hi``)."""
    while True:
        pos += _step(data, pos, hi)
        if pos >= hi or bound[pos]:
            return NONE
        w = _cls(data, pos, hi, t1, t2) & 31
        if not _efz(w):
            return w


@numba.njit(cache=True, nogil=True)
def _behind(data, bound, lo, hi, pos, t1, t2):
    """Word_Break of the last character before ``pos`` that is not Extend / Format / ZWJ (NONE before ``lo``)."""
    while True:
        if pos <= lo or bound[pos]:
            return NONE
        pos = _prev(data, pos, lo)
        w = _cls(data, pos, hi, t1, t2) & 31
        if not _efz(w):
            return w


@numba.njit(cache=True, nogil=True)
def _is_break(data, bound, lo, hi, p, t1, t2):
    """Whether ``regex``'s ``(?w)\\b`` holds at byte ``p`` of the text ``data[lo:hi]`` (``wb_is_break``;
    ``bound[q]``: a row starts at ``q``, nothing before it is read)."""
    if p <= lo or p >= hi or bound[p]:  # WB1, WB2
        return True
    lp = _prev(data, p, lo)
    lc = _cls(data, lp, hi, t1, t2)
    rc = _cls(data, p, hi, t1, t2)
    lw = lc & 31
    rw = rc & 31
    if lw == CR and rw == LF:  # WB3
        return False
    if lw == NEWLINE or lw == CR or lw == LF or rw == NEWLINE or rw == CR or rw == LF:  # WB3a, WB3b
        return True
    if lw == ZWJ and (rc & PICT) != 0:  # WB3c
        return False
    if lw == WSEG and rw == WSEG:  # WB3d
        return False
    if _efz(rw):  # WB4
        return False
    while _efz(lw):
        if lp <= lo or bound[lp]:
            lw = NONE
        else:
            lp = _prev(data, lp, lo)
            lw = _cls(data, lp, hi, t1, t2) & 31
    if _ahl(lw) and _ahl(rw):  # WB5
        return False
    if _ahl(lw) and (rw == MIDLETTER or _midnumletq(rw)) and _ahl(_ahead(data, bound, hi, p, t1, t2)):  # WB6
        return False
    if (lw == MIDLETTER or _midnumletq(lw)) and _ahl(rw) and _ahl(_behind(data, bound, lo, hi, lp, t1, t2)):  # WB7
        return False
    if lw == HEBREW and rw == SQUOTE:  # WB7a
        return False
    if lw == HEBREW and rw == DQUOTE and _ahead(data, bound, hi, p, t1, t2) == HEBREW:  # WB7b
        return False
    if lw == DQUOTE and rw == HEBREW and _behind(data, bound, lo, hi, lp, t1, t2) == HEBREW:  # WB7c
        return False
    if (lw == NUMERIC or _ahl(lw)) and rw == NUMERIC:  # WB8, WB9
        return False
    if lw == NUMERIC and _ahl(rw):  # WB10
        return False
    if (lw == MIDNUM or _midnumletq(lw)) and rw == NUMERIC and _behind(data, bound, lo, hi, lp, t1, t2) == NUMERIC:
        return False  # WB11
    if lw == NUMERIC and (rw == MIDNUM or _midnumletq(rw)) and _ahead(data, bound, hi, p, t1, t2) == NUMERIC:
        return False  # WB12
    if lw == KATAKANA and rw == KATAKANA:  # WB13
        return False
    if (_ahl(lw) or lw == NUMERIC or lw == KATAKANA or lw == EXTENDNUMLET) and rw == EXTENDNUMLET:  # WB13a
        return False
    if lw == EXTENDNUMLET and (_ahl(rw) or rw == NUMERIC or rw == KATAKANA):  # WB13b
        return False
    if rw == RI:  # WB15, WB16: an odd number of regional indicators before
        pair = True
        w = lw
        q = lp
        while True:
            if w == RI:
                pair = not pair
            elif not _efz(w):
                break
            if q <= lo or bound[q]:
                break
            q = _prev(data, q, lo)
            w = _cls(data, q, hi, t1, t2) & 31
        if not pair:
            return False
    return True  # WB999


@numba.njit(cache=True, nogil=True)
def _segment_flags(data, bound, t1, t2, pairs, flags):
    """Twin of ``wb_segment_starts``: flags[i] = 1 where a word-boundary segment of a row starts at byte i;
    ``pairs`` (:func:`ascii_pairs`, or all PAIR_UNDECIDED for the full rules alone) decides two ASCII bytes."""
    n = len(data)
    for i in range(n):
        b = np.int64(data[i])
        if (b & 0xC0) == 0x80:
            flags[i] = 0
            continue
        if b < 0x80 and i > 0 and bound[i] == 0 and data[i - 1] < 0x80:
            v = pairs[(np.int64(data[i - 1]) << 7) | b]
            if v != PAIR_UNDECIDED:
                flags[i] = v
                continue
        flags[i] = 1 if _is_break(data, bound, 0, n, i, t1, t2) else 0


@numba.njit(cache=True, nogil=True)
def _has_token(data, s, e, t1, t2):
    while s < e:
        if _cls(data, s, e, t1, t2) & TOKEN:
            return True
        s += _step(data, s, e)
    return False


@numba.njit(cache=True, nogil=True)
def _is_sea(data, s, e, t1, t2):
    """Whether ``data[s:e]`` is a South East Asian letter followed by such letters and marks only."""
    if (_cls(data, s, e, t1, t2) & SOUTH_EAST_ASIAN) == 0:
        return False
    s += _step(data, s, e)
    while s < e:
        c = _cls(data, s, e, t1, t2)
        if (c & SOUTH_EAST_ASIAN) == 0 and not _efz(c & 31):
            return False
        s += _step(data, s, e)
    return True


@numba.njit(cache=True, nogil=True)
def _n_code_points(data, s, e):
    n = 0
    while s < e:
        s += _step(data, s, e)
        n += 1
    return n


@numba.njit(cache=True, nogil=True)
def _next_break(data, bound, lo, hi, s, t1, t2):
    """The end of the segment of ``data[lo:hi]`` that starts at ``s``."""
    q = s + _step(data, s, hi)
    while q < hi and not _is_break(data, bound, lo, hi, q, t1, t2):
        q += _step(data, q, hi)
    return q


@numba.njit(cache=True, nogil=True)
def _segment_pieces(data, bound, t1, t2, a, b, los, his, ps, pe, pf, k, fill):
    """Twin of ``wb_pieces``: the pieces of the segment ``data[a:b]`` (``standard_tokens``'s ``_words`` on it),
    written from ``k`` when ``fill``; returns the next ``k``, or -1 when the nested scans need more levels than
    ``los`` / ``his`` hold.  A piece is (start, end, 1 for South East Asian letters else 0)."""
    depth = 0
    pos = a
    while True:
        if depth == 0:
            if pos >= b:
                return k
            s = a
            e = b
        else:
            lo = los[depth - 1]
            hi = his[depth - 1]
            if pos >= hi:  # this scan is done: its parent goes on after the segment it was scanning
                depth -= 1
                continue
            s = pos
            e = _next_break(data, bound, lo, hi, s, t1, t2)
        nlo = -1
        if not _has_token(data, s, e, t1, t2):
            pos = e
        elif (_cls(data, s, e, t1, t2) & TOKEN) == 0 and (_cls(data, s, e, t1, t2) & 31) != EXTENDNUMLET:
            nlo = s + _step(data, s, e)  # no token starts here: the rest of the segment is scanned again
        elif _is_sea(data, s, e, t1, t2):
            if fill:
                ps[k] = s
                pe[k] = e
                pf[k] = 1
            k += 1
            pos = e
        else:
            left = _n_code_points(data, s, e)
            if left <= MAX_TOKEN_LENGTH:
                if fill:
                    ps[k] = s
                    pe[k] = e
                    pf[k] = 0
                k += 1
                pos = e
            else:  # the first segment of the scanner's buffer of 255 code points, until the rest fits
                cur = s
                while left > MAX_TOKEN_LENGTH:
                    lim = cur
                    for _ in range(MAX_TOKEN_LENGTH):
                        lim += _step(data, lim, e)
                    h = _next_break(data, bound, cur, lim, cur, t1, t2)
                    if _has_token(data, cur, h, t1, t2):
                        if fill:
                            ps[k] = cur
                            pe[k] = h
                            pf[k] = 0
                        k += 1
                    left -= _n_code_points(data, cur, h)
                    cur = h
                nlo = cur
        if nlo >= 0:  # scan data[nlo:e]; a scan that ends where this one does replaces it
            if depth > 0 and his[depth - 1] == e:
                los[depth - 1] = nlo
            else:
                if depth == len(los):
                    return -1
                los[depth] = nlo
                his[depth] = e
                depth += 1
            pos = nlo


@numba.njit(cache=True, nogil=True)
def _ascii_pieces(data, t2, base, a, b):
    """Twin of ``wb_ascii_pieces``: the pieces of the ASCII segment ``data[a:b]`` of at most 255 bytes as
    ``_segment_pieces`` makes them, 0 or 1 (the piece ``data[a:b]``), or -1 when it needs the full scan (its first
    character starts no token but a later one is a token character); ``base``: the ASCII block of ``t2``."""
    c0 = np.int64(t2[base | np.int64(data[a])])
    if (c0 & SOUTH_EAST_ASIAN) != 0:
        return -1
    tok = (c0 & TOKEN) != 0
    q = a + 1
    while not tok and q < b:
        tok = (t2[base | np.int64(data[q])] & TOKEN) != 0
        q += 1
    if not tok:
        return 0
    if (c0 & TOKEN) != 0 or (c0 & 31) == EXTENDNUMLET:
        return 1
    return -1


@numba.njit(cache=True, nogil=True)
def _pieces_cpu(data, bound, t1, t2, flags, chunk, first, ps, pe, pf, fill, los, his, ascii_fast=True):
    """Twin of ``wb_count_pieces`` (``fill`` False: the pieces of the segments that start in each chunk of
    ``chunk`` bytes into ``first``, -1 on overflow) and ``wb_write_pieces`` (``fill``: chunk c's pieces written
    from ``first[c]``); ``flags``: the segment starts; ``los``, ``his``: the stack of nested scans;
    ``ascii_fast`` False: every segment through the full scan (the fast path's oracle)."""
    n = len(data)
    base = np.int64(t1[0]) << 7
    for c in range((n + chunk - 1) // chunk):
        k = first[c] if fill else 0
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            if flags[i] == 0:
                continue
            j = i + 1
            high = np.int64(data[i])
            while j < n and flags[j] == 0:
                high |= np.int64(data[j])
                j += 1
            if ascii_fast and high < 0x80 and j - i <= MAX_TOKEN_LENGTH:
                m = _ascii_pieces(data, t2, base, i, j)
                if m >= 0:
                    if m and fill:
                        ps[k] = i
                        pe[k] = j
                        pf[k] = 0
                    k += m
                    continue
            k = _segment_pieces(data, bound, t1, t2, i, j, los, his, ps, pe, pf, k, fill)
            if k < 0:
                break
        if not fill:
            first[c] = k


@numba.njit(cache=True, nogil=True)
def _code_points_cpu(data, starts, ends, out):
    """Twin of ``wb_code_points``."""
    for k in range(len(starts)):
        out[k] = _n_code_points(data, starts[k], ends[k])


# ----------------------------------------------------------------------------- entry points

_lock = threading.Lock()
_device_tables: dict = {}


def _tables(xp):
    """(t1, t2, pairs): :func:`lookup_tables` and :func:`ascii_pairs` in ``xp``'s memory (once per device)."""
    tables = lookup_tables() + (ascii_pairs(),)
    if xp is np:
        return tables
    import cupy

    key = cupy.cuda.Device().id
    with _lock:
        hit = _device_tables.get(key)
        if hit is None:
            hit = _device_tables[key] = tuple(cupy.asarray(t) for t in tables)
    return hit


def _buffers(data, offsets):
    """(row-relative bytes, bound (n + 1,) uint8 with 1 at every row start and at n, base) of a strings buffer."""
    xp = array_module(data)
    if data.ndim != 1 or data.dtype != np.uint8:
        raise ValueError(f"data must be a 1-D uint8 array, got {data.dtype} with shape {data.shape}")
    if offsets.ndim != 1 or len(offsets) < 1:
        raise ValueError(f"offsets must be a 1-D array of n_rows + 1 >= 1 entries, got shape {offsets.shape}")
    offsets = xp.ascontiguousarray(offsets, dtype=np.int64)
    base, stop = (int(v) for v in offsets[[0, -1]].tolist())
    if base < 0 or stop > len(data) or stop < base:
        raise ValueError(f"offsets span [{base}, {stop}) outside the {len(data)} bytes of data")
    body = xp.ascontiguousarray(data[base:stop])
    bound = xp.zeros(stop - base + 1, np.uint8)
    bound[offsets - base] = 1
    return body, bound, base


def segment_starts(data, offsets):
    """Byte positions where a word-boundary segment starts (``regex``'s ``(?w)\\b`` inside each row).

    Parameters
    ----------
    data : uint8 array (n_bytes,), numpy or cupy
        Valid UTF-8 of the rows back to back (a strings column's character buffer).
    offsets : int64 array (n_rows + 1,), same module, nondecreasing
        Row ``r`` is ``data[offsets[r]:offsets[r + 1]]``; ``offsets[0]`` may be > 0 (a sliced column).

    Returns
    -------
    int64 array (n_segments,), same module
        Ascending positions in ``data``; every nonempty row's first byte is one, and a segment ends where
        the next starts or at ``offsets[-1]``.

    Raises
    ------
    ValueError
        Wrong dtypes or shapes, or offsets outside ``data``.
    ImportError
        The ``regex`` module is missing (the code point classes are its).
    """
    body, bound, base = _buffers(data, offsets)
    return array_module(body).flatnonzero(_segment_flags_of(body, bound)).astype(np.int64) + base


def _segment_flags_of(body, bound):
    """uint8 (n,): 1 where a segment starts (``wb_segment_starts`` or its twin)."""
    xp = array_module(body)
    n = len(body)
    flags = xp.zeros(n, np.uint8)
    t1, t2, pairs = _tables(xp)
    if n and xp is np:
        _segment_flags(body, bound, t1, t2, pairs, flags)
    elif n:
        g, b = _cuda.grid(min(n, 1 << 26))  # grid-stride loop beyond 2**26 bytes
        _cuda.kernel(SOURCE, "wb_segment_starts")(g, b, (body, bound, np.int64(n), t1, t2, pairs, flags))
    return flags


def _pieces(body, bound, flags):
    """(starts, ends, South East Asian flag) of the pieces of every segment, or None on a stack overflow.  A
    thread a chunk of CHUNK bytes takes the segments that start in it: count, scan, write."""
    xp = array_module(body)
    n = len(body)
    n_chunks = -(-n // CHUNK)
    t1, t2, _ = _tables(xp)
    counts = xp.empty(n_chunks, np.int64)
    stack = np.empty(STACK_DEPTH, np.int64), np.empty(STACK_DEPTH, np.int64)
    e64, e8 = xp.zeros(0, np.int64), xp.zeros(0, np.uint8)
    args = (body, bound, np.int64(n), t1, t2, flags, np.int64(CHUNK), np.int64(n_chunks))
    g, b = _cuda.grid(min(n_chunks, 1 << 26))
    if xp is np:
        _pieces_cpu(body, bound, t1, t2, flags, CHUNK, counts, e64, e64, e8, False, *stack)
    else:
        _cuda.kernel(SOURCE, "wb_count_pieces")(g, b, args + (counts,))
    first = xp.cumsum(counts)
    total, low = (int(v) for v in xp.stack([first[-1], counts.min()]).tolist())
    if low < 0:
        return None
    first -= counts
    ps, pe, pf = xp.empty(total, np.int64), xp.empty(total, np.int64), xp.empty(total, np.uint8)
    if xp is np:
        _pieces_cpu(body, bound, t1, t2, flags, CHUNK, first, ps, pe, pf, True, *stack)
    elif total:
        _cuda.kernel(SOURCE, "wb_write_pieces")(g, b, args + (first, ps, pe, pf))
    return ps, pe, pf


def _cut_long(body, starts, ends, sea):
    """Tokens of South East Asian runs (``sea``) longer than MAX_TOKEN_LENGTH code points cut every 255 code
    points, on the host (a rare case: ``standard_tokens`` cuts them last)."""
    xp = array_module(body)
    cand = xp.flatnonzero(sea)
    s0, e0 = starts[cand], ends[cand]
    n_cp = xp.empty(len(cand), np.int64)
    if xp is np:
        _code_points_cpu(body, s0, e0, n_cp)
    elif len(cand):
        g, b = _cuda.grid(min(len(cand), 1 << 26))
        _cuda.kernel(SOURCE, "wb_code_points")(g, b, (body, s0, e0, np.int64(len(cand)), n_cp))
    long = cand[n_cp > MAX_TOKEN_LENGTH]
    if len(long) == 0:
        return starts, ends
    cuts = []
    for s, e in zip(*(to_host(a).tolist() for a in (starts[long], ends[long]))):
        lead = s + np.flatnonzero((to_host(body[s:e]) & 0xC0) != 0x80)
        at = lead[::MAX_TOKEN_LENGTH]
        cuts.append(np.c_[at, np.r_[at[1:], e]])
    extra = xp.asarray(np.concatenate(cuts))
    keep = xp.ones(len(starts), bool)
    keep[long] = False
    starts = xp.concatenate([starts[keep], extra[:, 0]])
    ends = xp.concatenate([ends[keep], extra[:, 1]])
    order = xp.argsort(starts)  # starts are distinct
    return starts[order], ends[order]


def standard_token_bounds(data, offsets):
    """Every token of Lucene's ``StandardTokenizer`` in every row, as byte offsets (case kept, possessives kept).

    The tokens of :func:`cutext.stages.text.anserini.standard_tokens` of each row, in order, token for token.

    Parameters
    ----------
    data : uint8 array (n_bytes,), numpy or cupy
        Valid UTF-8 of the rows back to back.
    offsets : int64 array (n_rows + 1,), same module, nondecreasing (``offsets[0]`` may be > 0)

    Returns
    -------
    (starts, ends, rows) : int64 arrays (n_tokens,), same module, or None
        Token ``k`` is ``data[starts[k]:ends[k]]`` of row ``rows[k]``, in row order.  None when a segment's
        nested scans need more than :data:`STACK_DEPTH` levels (adversarial text): take the CPU analyzer.

    Raises
    ------
    ValueError
        Wrong dtypes or shapes, or offsets outside ``data``.
    ImportError
        The ``regex`` module is missing.
    """
    xp = array_module(data)
    body, bound, base = _buffers(data, offsets)
    if len(body) == 0:
        z = xp.zeros(0, np.int64)
        return z, z.copy(), z.copy()
    flags = _segment_flags_of(body, bound)
    got = _pieces(body, bound, flags)
    del flags
    if got is None:
        return None
    ps, pe, pf = got
    # a South East Asian piece that starts where the last piece (one too) ended, inside the row, joins it
    join = xp.zeros(len(ps), bool)
    if len(ps) > 1:
        join[1:] = (pf[1:] == 1) & (pf[:-1] == 1) & (pe[:-1] == ps[1:]) & (bound[ps[1:]] == 0)
    head = xp.flatnonzero(~join)
    last = xp.empty_like(head)
    last[:-1] = head[1:] - 1
    last[-1:] = len(ps) - 1
    starts, ends = ps[head], pe[last]
    if bool(pf.any()):
        starts, ends = _cut_long(body, starts, ends, pf[head] == 1)
    rows = xp.searchsorted(xp.asarray(offsets, dtype=np.int64) - base, starts, side="right") - 1
    return starts + base, ends + base, rows.astype(np.int64)
