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

The device text path (:mod:`cutext.stages.text.device`) adds :func:`token_bounds` (token
byte offsets of a blanked buffer, count and write passes), :func:`hash_tokens` and :func:`tokens_equal` (a
64-bit hash per token and the byte-exact check of a hash group) and :func:`utf8_valid` (strict
UTF-8 check of a read buffer); each has its numba twin and is checked under g++
(tests/kernels/test_device_text.py) and on the device (tests/gpu/test_device_text.py).
"""
from __future__ import annotations

import os
import threading
import unicodedata
from functools import lru_cache, wraps
from pathlib import Path

import numba
import numpy as np

import cutext.kernels._numba_cache  # noqa: F401  # before the decorators: it places and stamps their cache
from cutext.kernels import _numba_cache

N_CODE_POINTS = 0x110000
SEPARATOR, WORD, MARK = 0, 1, 2
WORD_CATEGORIES = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Nd", "Nl", "No", "Pc"})
MARK_CATEGORIES = frozenset({"Mn", "Mc", "Me"})
# Hangul vowel (V) and trailing consonant (T) jamo: they compose with a preceding syllable by the
# algorithm of Unicode 3.12, not by a decomposition in the character database (NFC_QC = Maybe).
_HANGUL_V = (0x1161, 0x1175)
_HANGUL_T = (0x11A8, 0x11C2)


def arrow_buffers(arr) -> tuple[np.ndarray, np.ndarray]:
    """(data uint8, offsets int64 (n + 1,)) of a pyarrow LargeStringArray, zero-copy (the array's own
    slice offset applied): the buffers every CPU twin here reads."""
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[arr.offset:arr.offset + len(arr) + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return data, offsets


def _kept_on_disk(build, tag=None, size=N_CODE_POINTS):
    """``build()`` (a uint8 table of ``size`` entries: every code point unless told) kept as a raw ``.u8`` file
    beside the numba cache of
    this module, named after what it depends on (Python's Unicode database, pyarrow's version, the
    kernels' source, and ``tag()`` when given: another library's version): built once a machine instead of
    once a process (0.2-0.7 s each on one core).  Raw
    bytes of a known length, not ``.npy``: ``numpy.load`` parses headers with ``ast``, which is not
    thread-safe on CPython 3.11-3.12 (gh-106905), and the kernels cannot use the stages' reader."""

    @wraps(build)
    def kept():
        import pyarrow as pa

        folder = _numba_cache.cache_folder(arrow_buffers)  # looked up at the call: tests point it elsewhere
        digest = _numba_cache.kernels_digest()[:16]
        extra = f"{tag()}-" if tag is not None else ""
        name = f"{build.__name__}-{extra}{unicodedata.unidata_version}-{pa.__version__}-{digest}.u8"
        path = Path(folder) / name if folder else None
        if path is not None and path.is_file():
            try:
                t = np.fromfile(path, dtype=np.uint8)
                if t.shape == (size,):
                    return t
            except (OSError, ValueError):  # a torn or foreign file: build it again
                pass
        t = build()
        if path is not None:
            tmp = path.with_name(f".{name}.{os.getpid()}.{threading.get_ident()}.tmp")
            try:
                np.ascontiguousarray(t, dtype=np.uint8).tofile(tmp)
                os.replace(tmp, path)  # readers see the whole file or none
                for old in [*path.parent.glob(f"{build.__name__}-*.u8"), *path.parent.glob(f"{build.__name__}-*.npy")]:
                    if old != path:
                        old.unlink(missing_ok=True)
            except OSError:  # a read-only cache folder: the table is built again next time
                tmp.unlink(missing_ok=True)
        return t

    return kept


@lru_cache(maxsize=1)
@_kept_on_disk
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
@_kept_on_disk
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


_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


@numba.njit(cache=True, nogil=True)
def _bounds_cpu(blanked, offsets, starts, ends, rows, fill):
    """Twin of ``tk_bounds_count`` / ``tk_bounds_write`` (one sequential pass): the tokens of a blanked
    buffer, maximal runs of bytes other than ``0x20`` inside a row; returns their count and, with
    ``fill``, writes each one's start, end and row (the last row whose offset is <= its start)."""
    n_rows = len(offsets) - 1
    lo, hi = offsets[0], offsets[n_rows]
    r = 0
    k = 0
    for i in range(lo, hi):
        while r + 1 < n_rows and offsets[r + 1] <= i:
            r += 1
        if blanked[i] == 0x20 or not (i == lo or offsets[r] == i or blanked[i - 1] == 0x20):
            continue
        if fill:
            j = i + 1
            stop = offsets[r + 1]
            while j < stop and blanked[j] != 0x20:
                j += 1
            starts[k] = i
            ends[k] = j
            rows[k] = r
        k += 1
    return k


@numba.njit(cache=True, nogil=True)
def _lines_cpu(buf, chars, ends, fill):
    """Twin of ``tk_lines_count`` / ``tk_lines_write`` (one sequential pass): drops every ``\\n`` and a
    ``\\r`` just before one; returns (kept bytes, newlines) and, with ``fill``, copies the kept bytes
    to ``chars`` and writes ``ends[L]`` = kept bytes before the L-th newline."""
    n = len(buf)
    k = 0
    nl = 0
    for i in range(n):
        b = buf[i]
        if b == 10:
            if fill:
                ends[nl] = k
            nl += 1
        elif not (b == 13 and i + 1 < n and buf[i + 1] == 10):
            if fill:
                chars[k] = b
            k += 1
    return k, nl


@numba.njit(cache=True, nogil=True)
def count_newlines(buf) -> int:
    """The ``\\n`` bytes of ``buf`` (uint8, 1-d): one pass, no temporary, without the GIL (threads that count
    the chunks of a file run beside the rest of the process)."""
    n = 0
    for i in range(len(buf)):
        n += buf[i] == 10
    return n


@numba.njit(cache=True, nogil=True)
def _code_points_cpu(data, starts, ends, out):
    """Twin of ``tk_code_points``: bytes of each token that are not continuation bytes."""
    for k in range(len(starts)):
        n = 0
        for i in range(starts[k], ends[k]):
            if data[i] & 0xC0 != 0x80:
                n += 1
        out[k] = n


@numba.njit(cache=True, nogil=True)
def _rows_high_cpu(data, offsets, flags):
    """Twin of ``tk_rows_high``: flags the rows holding a byte >= 0x80."""
    for r in range(len(offsets) - 1):
        for i in range(offsets[r], offsets[r + 1]):
            if data[i] >= 0x80:
                flags[r] = 1
                break


@numba.njit(cache=True, nogil=True)
def _hash_cpu(data, starts, ends, out):
    """Twin of ``tk_hash_tokens``: FNV-1a 64 of the bytes, the length, splitmix64 finalizer."""
    for k in range(len(starts)):
        h = _FNV_OFFSET
        for i in range(starts[k], ends[k]):
            h = (h ^ np.uint64(data[i])) * _FNV_PRIME
        h = h ^ np.uint64(ends[k] - starts[k])
        h = h + _GOLDEN
        h = (h ^ (h >> np.uint64(30))) * _MIX1
        h = (h ^ (h >> np.uint64(27))) * _MIX2
        out[k] = h ^ (h >> np.uint64(31))


@numba.njit(cache=True, nogil=True)
def _equal_cpu(data, starts, ends, rep, same):
    """Twin of ``tk_tokens_equal``."""
    for k in range(len(starts)):
        a = starts[k]
        n = ends[k] - a
        b = starts[rep[k]]
        eq = ends[rep[k]] - b == n
        i = 0
        while eq and i < n:
            eq = data[a + i] == data[b + i]
            i += 1
        same[k] = 1 if eq else 0


@numba.njit(cache=True, nogil=True)
def _strict_len(b):
    if b < 0x80:
        return 1
    if 0xC2 <= b <= 0xDF:
        return 2
    if 0xE0 <= b <= 0xEF:
        return 3
    if 0xF0 <= b <= 0xF4:
        return 4
    return 0


@numba.njit(cache=True, nogil=True)
def _utf8_invalid_cpu(data):
    """Twin of ``tk_utf8_invalid``: whether any byte of ``data`` is not strict UTF-8."""
    n = len(data)
    for i in range(n):
        b = data[i]
        if b < 0x80:
            continue
        if b & 0xC0 == 0x80:
            k = i - 1
            while k >= 0 and k > i - 4 and data[k] & 0xC0 == 0x80:
                k -= 1
            if k < 0 or data[k] & 0xC0 == 0x80 or k + _strict_len(data[k]) <= i:
                return True
        else:
            ln = _strict_len(b)
            if ln == 0 or i + ln > n:
                return True
            c = data[i + 1]
            lo, hi = 0x80, 0xBF
            if b == 0xE0:
                lo = 0xA0
            elif b == 0xED:
                hi = 0x9F
            elif b == 0xF0:
                lo = 0x90
            elif b == 0xF4:
                hi = 0x8F
            if c < lo or c > hi:
                return True
            for j in range(2, ln):
                if data[i + j] & 0xC0 != 0x80:
                    return True
    return False


# ----------------------------------------------------------------------------- CUDA (tokenize.cu)

_COMPILE_OPTIONS = ("--std=c++17",)
_THREADS = 256
# bytes a thread of tk_bounds_count / tk_bounds_write scans (token_bounds)
BOUNDS_CHUNK = 64
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


def _flag_rows(kernel: str, twin, data, offsets, table: np.ndarray | None = None):
    """uint8 flags (n_rows,) set by a row-flagging kernel of ``tokenize.cu`` (a thread a byte; with a
    code point ``table`` when given) on cupy, by its numba ``twin`` on numpy."""
    xp = _array_module(data)
    n = _check(data, offsets)
    flags = xp.zeros(len(offsets) - 1, dtype=np.uint8)
    tab = () if table is None else (table,)
    if xp is np:
        twin(np.ascontiguousarray(data), np.ascontiguousarray(offsets), *tab, flags)
    elif n:
        blocks = int(max(1, min((n + _THREADS - 1) // _THREADS, 1 << 20)))
        tab = tuple(_device_table(t) for t in tab)
        _fn(kernel)((blocks,), (_THREADS,), (xp.ascontiguousarray(data), xp.ascontiguousarray(offsets),
                                             xp.int64(len(offsets) - 1)) + tab + (flags,))
    return flags


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
    return _flag_rows("tk_rows_containing", _rows_cpu, data, offsets, table).astype(bool)


def rows_with_high_bytes(data, offsets):
    """Rows that hold a byte >= 0x80 (a non-ASCII character, or a byte that is not UTF-8).

    Parameters
    ----------
    data : uint8 array, numpy or cupy
    offsets : int64 array, shape (n_rows + 1,), same library, nondecreasing

    Returns
    -------
    int64 array, same library: the sorted row indices (numpy: the twin ``_rows_high_cpu``; cupy:
    ``tk_rows_high``, a thread a byte, then the flagged rows).

    Raises
    ------
    ValueError
        Wrong dtypes or shapes, or offsets outside ``data``.
    """
    flags = _flag_rows("tk_rows_high", _rows_high_cpu, data, offsets)
    return _array_module(data).flatnonzero(flags).astype(np.int64)


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


def split_lines(buf):
    """Lines of a byte buffer, terminators (``\\n``, ``\\r\\n``) removed, as the host reader does.

    Every ``\\n`` ends a line and is dropped with a ``\\r`` just before it; bytes after the last
    ``\\n`` are one more line (a final newline adds none).  numpy: the numba twin ``_lines_cpu``;
    cupy: ``tk_lines_count`` (kept bytes and newlines of each chunk of ``BOUNDS_CHUNK`` bytes), a scan
    of both, ``tk_lines_write`` (bytes copied to their places, line ends written).

    Parameters
    ----------
    buf : uint8 array, numpy or cupy
        The bytes of a piece (BOM already stripped).

    Returns
    -------
    (chars, offsets) : uint8 array, int64 array (n_lines + 1,), same library
        Line ``i`` is ``chars[offsets[i]:offsets[i + 1]]``.

    Raises
    ------
    ValueError
        ``buf`` is not a 1-D uint8 array.
    """
    xp = _array_module(buf)
    if buf.ndim != 1 or buf.dtype != np.uint8:
        raise ValueError(f"buf must be a 1-D uint8 array, got {buf.dtype} with shape {buf.shape}")
    n = len(buf)
    if n == 0:
        return buf[:0], xp.zeros(1, np.int64)
    if xp is np:
        buf = np.ascontiguousarray(buf)
        k, nl = _lines_cpu(buf, np.zeros(0, np.uint8), np.zeros(0, np.int64), False)
        chars, ends = np.empty(k, np.uint8), np.empty(nl, np.int64)
        _lines_cpu(buf, chars, ends, True)
        tail = int(buf[-1]) != 10
        offsets = np.empty(nl + 1 + tail, np.int64)
        offsets[0] = 0
        offsets[1:nl + 1] = ends
        if tail:
            offsets[-1] = k
        return chars, offsets
    buf = xp.ascontiguousarray(buf)
    chunk = BOUNDS_CHUNK
    n_chunks = -(-n // chunk)
    blocks = int(max(1, min(-(-n_chunks // _THREADS), 1 << 20)))
    geometry = (xp.int64(n), xp.int64(chunk), xp.int64(n_chunks))
    kept, newlines = xp.empty(n_chunks, np.int64), xp.empty(n_chunks, np.int64)
    _fn("tk_lines_count")((blocks,), (_THREADS,), (buf,) + geometry + (kept, newlines))
    kept_first, nl_first = xp.cumsum(kept), xp.cumsum(newlines)
    k, nl, last = (int(v) for v in xp.stack([kept_first[-1], nl_first[-1], buf[-1].astype(np.int64)]).tolist())
    kept_first -= kept
    nl_first -= newlines
    tail = last != 10
    chars = xp.empty(k, np.uint8)
    offsets = xp.empty(nl + 1 + tail, np.int64)
    offsets[0] = 0
    if tail:
        offsets[-1] = k
    _fn("tk_lines_write")((blocks,), (_THREADS,), (buf,) + geometry + (kept_first, nl_first, chars, offsets[1:]))
    return chars, offsets


def token_bounds(blanked, offsets):
    """Token boundaries of a blanked buffer (:func:`blank_separators`): start, end and row of
    every token, in row order (the device tokenizer's split; no token strings are built).

    A token is a maximal run of bytes other than ``0x20`` inside one row.  numpy: the numba twin
    ``_bounds_cpu`` (count, then fill); cupy: ``tk_bounds_count`` (the tokens starting in each chunk of
    ``BOUNDS_CHUNK`` bytes, a thread a chunk), a scan of the counts, ``tk_bounds_write`` (each token
    written at its place): two passes over the bytes instead of the flag arrays and stream compactions
    of array code.

    Parameters
    ----------
    blanked : uint8 array, numpy or cupy
        :func:`blank_separators` of the text bytes (token bytes kept, every other byte a space).
    offsets : int64 array, shape (n_rows + 1,), same library

    Returns
    -------
    (starts, ends, rows) : int64 arrays, shape (n_tokens,), same library
        Token ``k`` is ``data[starts[k]:ends[k]]`` of row ``rows[k]``; the same tokens, in the same
        order, as :func:`split_utf8` of the unblanked bytes.

    Raises
    ------
    ValueError
        Wrong dtypes or shapes, or offsets outside ``blanked``.
    """
    xp = _array_module(blanked)
    n = _check(blanked, offsets)
    if n == 0:
        z = xp.zeros(0, np.int64)
        return z, z.copy(), z.copy()
    if xp is np:
        blanked, offsets = np.ascontiguousarray(blanked), np.ascontiguousarray(offsets)
        e = np.zeros(0, np.int64)
        k = _bounds_cpu(blanked, offsets, e, e, e, False)
        starts, ends, rows = (np.empty(k, np.int64) for _ in range(3))
        _bounds_cpu(blanked, offsets, starts, ends, rows, True)
        return starts, ends, rows
    blanked, offsets = xp.ascontiguousarray(blanked), xp.ascontiguousarray(offsets)
    n_rows, chunk = len(offsets) - 1, BOUNDS_CHUNK
    n_chunks = -(-n // chunk)
    blocks = int(max(1, min(-(-n_chunks // _THREADS), 1 << 20)))
    geometry = (xp.int64(n_rows), xp.int64(chunk), xp.int64(n_chunks))
    counts = xp.empty(n_chunks, np.int64)
    _fn("tk_bounds_count")((blocks,), (_THREADS,), (blanked, offsets) + geometry + (counts,))
    first = xp.cumsum(counts)
    k = int(first[-1])
    first -= counts  # exclusive
    starts, ends, rows = (xp.empty(k, np.int64) for _ in range(3))
    if k:
        _fn("tk_bounds_write")((blocks,), (_THREADS,), (blanked, offsets) + geometry + (first, starts, ends, rows))
    return starts, ends, rows


def _check_tokens(data, starts, ends):
    if data.ndim != 1 or data.dtype != np.uint8:
        raise ValueError(f"data must be a 1-D uint8 array, got {data.dtype} with shape {data.shape}")
    if starts.dtype != np.int64 or ends.dtype != np.int64 or starts.shape != ends.shape or starts.ndim != 1:
        raise ValueError(f"starts and ends must be 1-D int64 arrays of one shape, got {starts.dtype} "
                         f"{starts.shape} and {ends.dtype} {ends.shape}")


def _launch_tokens(name, n_tokens, args):
    import cupy

    blocks = int(max(1, min((n_tokens + _THREADS - 1) // _THREADS, 1 << 20)))
    _fn(name)((blocks,), (_THREADS,), args)
    return cupy


def _per_token(kernel: str, twin, data, starts, ends, dtype):
    """One value of ``dtype`` per token ``data[starts[k]:ends[k]]``: the numba ``twin`` on numpy, the
    kernel of ``tokenize.cu`` named ``kernel`` (a thread a token) on cupy."""
    xp = _array_module(data)
    _check_tokens(data, starts, ends)
    out = xp.empty(len(starts), dtype=dtype)
    if xp is np:
        twin(np.ascontiguousarray(data), np.ascontiguousarray(starts), np.ascontiguousarray(ends), out)
    elif len(starts):
        _launch_tokens(kernel, len(starts), (xp.ascontiguousarray(data), xp.ascontiguousarray(starts),
                                             xp.ascontiguousarray(ends), xp.int64(len(starts)), out))
    return out


def hash_tokens(data, starts, ends):
    """A 64-bit hash of every token's bytes (FNV-1a 64, length, splitmix64 finalizer).

    Parameters
    ----------
    data : uint8 array, numpy or cupy
    starts, ends : int64 arrays, shape (n_tokens,), same library
        Token ``k`` is ``data[starts[k]:ends[k]]``.

    Returns
    -------
    uint64 array, shape (n_tokens,), same library
        Equal bytes give equal hashes (unequal tokens may collide: check with :func:`tokens_equal`).

    Raises
    ------
    ValueError
        Wrong dtypes or shapes.
    """
    return _per_token("tk_hash_tokens", _hash_cpu, data, starts, ends, np.uint64)


def code_points(data, starts, ends):
    """Code points of every token (the count :func:`cutext.stages.text.tokenize.map_terms`' length filters
    use), on the device for the term map of a scan.

    Parameters
    ----------
    data : uint8 array, numpy or cupy
        Valid UTF-8 at the tokens (a token is whole code points).
    starts, ends : int64 arrays, shape (n_tokens,), same library

    Returns
    -------
    int64 array, shape (n_tokens,), same library

    Raises
    ------
    ValueError
        Wrong dtypes or shapes.
    """
    return _per_token("tk_code_points", _code_points_cpu, data, starts, ends, np.int64)


def tokens_equal(data, starts, ends, rep):
    """Whether every token's bytes equal those of another token ``rep[k]`` (collision check).

    Parameters
    ----------
    data, starts, ends : as in :func:`hash_tokens`
    rep : int64 array, shape (n_tokens,), values in [0, n_tokens)

    Returns
    -------
    bool array, shape (n_tokens,), same library

    Raises
    ------
    ValueError
        Wrong dtypes or shapes.
    """
    xp = _array_module(data)
    _check_tokens(data, starts, ends)
    if rep.dtype != np.int64 or rep.shape != starts.shape:
        raise ValueError(f"rep must be int64 of shape {starts.shape}, got {rep.dtype} {rep.shape}")
    same = xp.zeros(len(starts), dtype=np.uint8)
    if xp is np:
        _equal_cpu(np.ascontiguousarray(data), np.ascontiguousarray(starts), np.ascontiguousarray(ends),
                   np.ascontiguousarray(rep), same)
    elif len(starts):
        _launch_tokens("tk_tokens_equal", len(starts),
                       (xp.ascontiguousarray(data), xp.ascontiguousarray(starts), xp.ascontiguousarray(ends),
                        xp.ascontiguousarray(rep), xp.int64(len(starts)), same))
    return same.astype(bool)


def utf8_valid(data) -> bool:
    """Whether ``data`` is strict UTF-8 (what Python's ``bytes.decode("utf-8")`` accepts).

    Parameters
    ----------
    data : uint8 array, numpy or cupy

    Returns
    -------
    bool
        Computed where the data is (numba twin or the CUDA kernel ``tk_utf8_invalid``).

    Raises
    ------
    ValueError
        ``data`` is not a 1-D uint8 array.
    """
    xp = _array_module(data)
    if data.ndim != 1 or data.dtype != np.uint8:
        raise ValueError(f"data must be a 1-D uint8 array, got {data.dtype} with shape {data.shape}")
    if xp is np:
        return not _utf8_invalid_cpu(np.ascontiguousarray(data))
    flag = xp.zeros(1, dtype=np.uint8)
    if len(data):
        _launch_tokens("tk_utf8_invalid", len(data), (xp.ascontiguousarray(data), xp.int64(len(data)), flag))
    return not bool(flag.get()[0])
