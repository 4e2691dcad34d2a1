"""Token boundaries over UTF-8 bytes: the tokenizer kernels (numba twins and CUDA, ``tokenize.cu``).

A token is a maximal run of *word* code points.  ``word_table()[cp]`` classifies every code point
by its Unicode general category (``unicodedata.category``, the Unicode version of this Python):
1 (``WORD``) for letters (``L*``), numbers (``N*``) and connector punctuation (``Pc``: ``_``,
``‿`` ...), 2 (``MARK``) for marks (``Mn``, ``Mc``, ``Me``), 0 for everything else.  Marks are
treated as UAX #29 word boundaries treat them (rule WB4, ``X Extend* -> X``): a mark never breaks
a word and belongs to the character before it, so Devanagari vowel signs and viramas, Arabic
harakat and the combining accents of decomposed Latin stay inside their words, while a mark after a
separator (an emoji's variation selector U+FE0F, a stray accent after a space, a mark at the start
of a text) is a separator like its base.
Bytes that are not valid UTF-8 are separators (the readers have already replaced them).

``nfc_unstable_table()[cp]`` is 1 for code points whose presence means that NFC normalization may
change a text (nonzero canonical combining class, NFC_Quick_Check No or Maybe); a text with none of
them is already NFC, so the tokenizer normalizes only the rows that hold one
(:func:`rows_containing`).

Functions take numpy or cupy arrays and run where the data is: numpy -> the CPU twin (numba, plain
loops), cupy -> the CUDA kernels of ``tokenize.cu`` (one thread per byte; compiled lazily, once per
device).  :func:`split_utf8` is the CPU tokenizer itself (two passes over the bytes: count, then
fill, so the output is allocated once); the GPU tokenizer blanks the separator bytes with
:func:`blank_separators` and lets nvtext split on spaces, which gives the same tokens.
"""
from __future__ import annotations

import threading
import unicodedata
from functools import lru_cache
from pathlib import Path

import numba
import numpy as np

N_CODE_POINTS = 0x110000
SEPARATOR, WORD, MARK = 0, 1, 2
WORD_CATEGORIES = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Nd", "Nl", "No", "Pc"})
MARK_CATEGORIES = frozenset({"Mn", "Mc", "Me"})
# Hangul vowel (V) and trailing consonant (T) jamo: they compose with a preceding syllable by the
# algorithm of Unicode 3.12, not by a decomposition in the character database (NFC_QC = Maybe).
_HANGUL_V = (0x1161, 0x1175)
_HANGUL_T = (0x11A8, 0x11C2)


@lru_cache(maxsize=1)
def word_table() -> np.ndarray:
    """uint8 array (0x110000,): ``WORD`` (1) for L*, N*, Pc; ``MARK`` (2) for M*; else ``SEPARATOR`` (0).

    Built from ``unicodedata.category`` over every code point; surrogates are 0 (they never
    appear in valid UTF-8).
    """
    cat = unicodedata.category

    def kind(c):
        k = cat(chr(c))
        return WORD if k in WORD_CATEGORIES else MARK if k in MARK_CATEGORIES else SEPARATOR

    t = np.fromiter((kind(c) for c in range(N_CODE_POINTS)), dtype=np.uint8, count=N_CODE_POINTS)
    t[0xD800:0xE000] = 0
    return t


@lru_cache(maxsize=1)
def nfc_unstable_table() -> np.ndarray:
    """uint8 array (0x110000,): 1 for code points that can make NFC change a text, else 0.

    A code point is flagged when its canonical combining class is nonzero (canonical reordering),
    when NFC maps it to something else on its own (singletons, composition exclusions: NFC_QC=No),
    or when it can compose with a preceding character (the second character of a two-character
    canonical decomposition, and the Hangul V and T jamo: NFC_QC=Maybe).  By the quick-check
    algorithm of UAX #15 (section 9) a string without any flagged code point is in NFC.  Both
    ``unicodedata`` and pyarrow's ``utf8_normalize`` (utf8proc, which may know a newer Unicode) are
    asked, so the table is a superset for either.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    t = np.zeros(N_CODE_POINTS, dtype=np.uint8)
    norm, comb, dec = unicodedata.normalize, unicodedata.combining, unicodedata.decomposition
    for c in range(N_CODE_POINTS):
        if 0xD800 <= c < 0xE000:
            continue
        ch = chr(c)
        if comb(ch) or norm("NFC", ch) != ch:
            t[c] = 1
        d = dec(ch)
        if d and not d.startswith("<"):
            parts = d.split()
            if len(parts) == 2:
                t[int(parts[1], 16)] = 1
    t[_HANGUL_V[0]:_HANGUL_V[1] + 1] = 1
    t[_HANGUL_T[0]:_HANGUL_T[1] + 1] = 1
    cps = np.r_[np.arange(0xD800), np.arange(0xE000, N_CODE_POINTS)]
    arr = pa.array([chr(c) for c in cps.tolist()], type=pa.large_string())
    changed = pc.not_equal(pc.utf8_normalize(arr, "NFC"), arr).to_numpy(zero_copy_only=False)
    t[cps[changed]] = 1
    return t


# ----------------------------------------------------------------------------- CPU twins (numba)

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
            k = table[cp] if cp >= 0 and cp < 0x110000 else 0
            w = k == 1 or (k == 2 and in_tok)
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


@numba.njit(cache=True, nogil=True)
def _blank_cpu(data, offsets, table, out):
    for d in range(len(offsets) - 1):
        i = offsets[d]
        end = offsets[d + 1]
        in_tok = False
        while i < end:
            cp, n = _decode(data, i, end)
            k = table[cp] if cp >= 0 and cp < 0x110000 else 0
            in_tok = k == 1 or (k == 2 and in_tok)
            for j in range(n):
                out[i + j] = data[i + j] if in_tok else np.uint8(0x20)
            i += n


@numba.njit(cache=True, nogil=True)
def _rows_cpu(data, offsets, table, flags):
    for d in range(len(offsets) - 1):
        i = offsets[d]
        end = offsets[d + 1]
        while i < end:
            cp, n = _decode(data, i, end)
            if cp >= 0 and cp < 0x110000 and table[cp] != 0:
                flags[d] = 1
                break
            i += n


# ----------------------------------------------------------------------------- CUDA (tokenize.cu)

_COMPILE_OPTIONS = ("--std=c++17",)
_THREADS = 256
_lock = threading.Lock()
_modules: dict = {}
_device_tables: dict = {}


def _fn(name: str):
    """A kernel of ``tokenize.cu`` on the current device (module compiled once per device)."""
    import cupy

    dev = cupy.cuda.Device().id
    with _lock:
        mod = _modules.get(dev)
        if mod is None:
            src = Path(__file__).with_name("tokenize.cu").read_text(encoding="utf-8")
            mod = _modules[dev] = cupy.RawModule(code=src, options=_COMPILE_OPTIONS)
    return mod.get_function(name)


def _device_table(table: np.ndarray):
    """The device copy of a host table (cached per device and table)."""
    import cupy

    key = (cupy.cuda.Device().id, id(table))
    with _lock:
        hit = _device_tables.get(key)
        if hit is None or hit[0] is not table:
            hit = _device_tables[key] = (table, cupy.asarray(table))
    return hit[1]


def _launch(name, data, offsets, table, out, n_bytes):
    import cupy

    n_rows = len(offsets) - 1
    blocks = int(max(1, min((n_bytes + _THREADS - 1) // _THREADS, 1 << 20)))
    _fn(name)((blocks,), (_THREADS,), (data, offsets, cupy.int64(n_rows), _device_table(table), out))


# ----------------------------------------------------------------------------- entry points

def _check(data, offsets):
    if data.ndim != 1 or data.dtype != np.uint8:
        raise ValueError(f"data must be a 1-D uint8 array, got {data.dtype} with shape {data.shape}")
    if offsets.ndim != 1 or len(offsets) < 1 or offsets.dtype != np.int64:
        raise ValueError(f"offsets must be a 1-D int64 array of n_rows + 1 >= 1 entries, got {offsets.dtype} "
                         f"with shape {offsets.shape}")
    lo, hi = (int(v) for v in offsets[[0, -1]].tolist())  # one device->host copy on the GPU
    if lo < 0 or hi > len(data) or hi < lo:
        raise ValueError(f"offsets span [{lo}, {hi}) outside the {len(data)} bytes of data")
    return hi - lo


def _array_module(a):
    return __import__("cupy") if type(a).__module__.startswith("cupy") else np


def blank_separators(data, offsets, table: np.ndarray | None = None):
    """Replace every byte that is not part of a token by a space (0x20).

    Parameters
    ----------
    data : uint8 array, numpy or cupy
        The UTF-8 bytes of all rows, back to back (a strings column's character buffer).
    offsets : int64 array, shape (n_rows + 1,), same library as ``data``
        Row ``r`` is ``data[offsets[r]:offsets[r + 1]]``; offsets are nondecreasing.
    table : uint8 array (0x110000,), optional
        Code point kinds ``SEPARATOR``/``WORD``/``MARK`` (default :func:`word_table`).

    Returns
    -------
    uint8 array, shape of ``data``, same library
        The bytes of token code points (``WORD``, and ``MARK`` after a token code point)
        unchanged, every other byte inside the rows (separators, marks after a separator,
        invalid bytes) ``0x20``; bytes outside ``[offsets[0], offsets[-1])`` are unspecified.
        Splitting each row on spaces, empty pieces dropped, gives exactly :func:`split_utf8`'s
        tokens.

    Raises
    ------
    ValueError
        Wrong dtypes or shapes, or offsets outside ``data``.
    """
    xp = _array_module(data)
    table = word_table() if table is None else table
    n = _check(data, offsets)
    if xp is np:
        out = np.empty_like(data)
        _blank_cpu(np.ascontiguousarray(data), np.ascontiguousarray(offsets), table, out)
        return out
    out = xp.empty_like(data)
    if n:
        _launch("tk_blank_separators", xp.ascontiguousarray(data), xp.ascontiguousarray(offsets), table, out, n)
    return out


def rows_containing(data, offsets, table: np.ndarray):
    """Which rows hold at least one code point ``cp`` with ``table[cp] != 0``.

    Parameters
    ----------
    data, offsets : as in :func:`blank_separators`
    table : uint8 array (0x110000,)
        For instance :func:`nfc_unstable_table`.

    Returns
    -------
    bool array, shape (n_rows,), same library as ``data``
        Invalid bytes are no code point and never flag a row.

    Raises
    ------
    ValueError
        Wrong dtypes or shapes, or offsets outside ``data``.
    """
    xp = _array_module(data)
    n = _check(data, offsets)
    flags = xp.zeros(len(offsets) - 1, dtype=np.uint8)
    if xp is np:
        _rows_cpu(np.ascontiguousarray(data), np.ascontiguousarray(offsets), table, flags)
    elif n:
        _launch("tk_rows_containing", xp.ascontiguousarray(data), xp.ascontiguousarray(offsets), table, flags, n)
    return flags.astype(bool)


def split_utf8(data: np.ndarray, offsets: np.ndarray):
    """Split every document into word tokens (CPU).

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
