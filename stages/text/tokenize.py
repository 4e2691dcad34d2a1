"""Tokenize stage: ``(doc_id, text)`` partitions -> long table ``(doc_id, token)``.

Rules (the same on both backends, applied in this order)
-------------------------------------------------------
1. **NFC**: text is put in Unicode Normalization Form C (UAX #15), so canonically equivalent
   spellings (decomposed ``cafe\u0301`` and composed ``caf\u00e9``) give the same tokens.  Only the
   rows that hold an NFC-unstable code point
   (:func:`cutext.kernels.tokenize.nfc_unstable_table`: nonzero combining class, NFC_Quick_Check
   No or Maybe) can change.  Both backends find those rows with
   :func:`cutext.kernels.tokenize.rows_containing` (numba twin on the CPU, CUDA kernel on the GPU)
   and normalize only them with Python's ``unicodedata`` (:func:`nfc_strings`; libcudf has no NFC
   in cudf 26.10, and pyarrow's ``utf8_normalize`` is not NFC in every build).  By the UAX #15
   quick check the other rows are already NFC, so both give NFC of the text.
2. **Lowercase** (``lowercase=True``): Unicode lowercasing of every character (pyarrow
   ``utf8_lower``), then final sigma ``ς`` folded into ``σ``, then NFC again (same row selection).
   On the GPU (:func:`normalize_gpu`) ASCII rows are lowered by a byte fold and the other rows go
   through these same CPU rules on the host; only when they hold most of the text does cudf's
   ``str.lower`` run (U+0130 mapped to ``i`` first, as pyarrow lowers it).  NFC comes first so that the result depends
   only on the canonical equivalence class of the text (lowercasing before NFC splits them:
   ``İ`` lowercases to ``i`` while its decomposition ``I\u0307`` lowercases to ``i\u0307``);
   the second NFC makes the lowercased text NFC again (``H\u0331`` is NFC, its lowercase
   ``h\u0331`` composes to ``ẖ``), so tokens are always NFC and ``H\u0331`` matches ``ẖ``.  No
   single code point lowercases differently before and after NFC; the order matters only for
   a base character followed by marks (74 such pairs of a cased letter and one mark).
3. **Split**: a token is a maximal run of *word characters*: code points whose Unicode general
   category is a letter (``L*``), a mark (``Mn``, ``Mc``, ``Me``), a number (``N*``) or connector
   punctuation (``Pc``, e.g. ``_``), :func:`cutext.kernels.tokenize.word_table`.  Marks belong to
   words as in UAX #29 word boundaries (rule WB4), so ``हिन्दी`` and Arabic with harakat stay
   whole.  Every other character (space, other punctuation, symbols such as emoji, control and
   format characters, unassigned code points) separates tokens.  CPU: the numba kernel
   :func:`cutext.kernels.tokenize.split_utf8` over the UTF-8 bytes; GPU: the CUDA kernel
   :func:`cutext.kernels.tokenize.blank_separators` replaces every byte of a non-word code point
   by a space in the column's character buffer (same word table, same UTF-8 decoding), then
   nvtext ``tokenize`` splits on spaces.  The corpus front end's GPU path
   (:mod:`cutext.stages.text.device`) takes the token byte offsets of that blanked buffer instead and
   never builds the token strings (same tokens, tested).
4. **Length filter**: tokens shorter than ``min_len`` or longer than ``max_len`` code points are
   dropped (measured before stemming).
5. **Stopwords**: tokens in the stopword set are dropped (matched after lowercasing, before
   stemming).  ``"lucene"`` is Lucene's English stop set (33 words, as Anserini uses);
   ``"english"`` is Snowball's English stop list (:data:`ENGLISH_STOPWORDS`, 146 tokens);
   ``"english-topics"`` adds 50 words of closed classes a topic model never needs
   (:data:`ENGLISH_TOPIC_STOPWORDS`, 196 tokens: the lda pipeline's default for text).
6. **Stemming**: ``stemmer`` names a Snowball algorithm of PyStemmer (``"porter"`` is Porter's
   original algorithm, as in Lucene's PorterStemFilter, and like Lucene and Porter's reference C
   implementation it leaves words of one or two characters unstemmed; ``"english"`` is Snowball
   English).
   Stemming, stopwords and the length filter are applied to the *unique* tokens of a partition
   (factorize, map the uniques on the host, gather back), so on the GPU only the vocabulary is
   stemmed, never every token.

Documents that yield no token stay in the corpus with length 0 (they appear in no row here).
Queries (``BM25Index.search``), the cluster and LDA text inputs all tokenize through this module,
so they follow the same rules.
"""
from __future__ import annotations

import unicodedata
from typing import NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
from dask.utils import Dispatch

from cutext.kernels.backend import array_module, is_gpu_object, to_cudf, to_host, values
from cutext.kernels.tokenize import (
    arrow_buffers,
    blank_separators,
    nfc_unstable_table,
    rows_containing,
    rows_with_high_bytes,
    split_utf8,
)
from cutext.stages.readers.base import text_array as read_text_array
from cutext.stages.text.token_bytes import (
    _anserini_host_codes,
    cudf_string_buffers,
    split_anserini_gpu,
    split_anserini_host,
)
from cutext.stages.text.tokenizer_config import (  # noqa: F401  # the settings stay importable from here
    ENGLISH_STOPWORDS,
    ENGLISH_TOPIC_STOPWORDS,
    LUCENE_PORTER,
    LUCENE_STOPWORDS,
    STOPWORD_SETS,
    TokenizerConfig,
    _stemmer,
    _stemmers,
    check_stemmer,
    map_terms,
    map_terms_arrow,
    read_snowball_list,
    resolve_stopwords,
    stem_array,
    stem_words,
)

# Lowercasing folds final sigma into sigma (as Lucene's GreekLowerCaseFilter does): libcudf and
# Arrow disagree on when "Σ" lowercases to "ς", so the fold also makes both backends agree.
FINAL_SIGMA, SIGMA = "\u03c2", "\u03c3"
# The GPU split: separators are blanked to this byte by a kernel, then nvtext splits on it.
GPU_SPLIT_PATTERN = " "


class TextEncodingError(ValueError):
    """A text holds a lone surrogate (a str that UTF-8 cannot encode); ``row`` is its position in the batch."""

    row: int = -1


def text_array(texts):
    """``texts`` as a pyarrow ``large_string`` array (:func:`cutext.stages.readers.base.text_array`); a
    pyarrow string array as it is (cast to ``large_string``), not converted again.

    Raises
    ------
    TextEncodingError (ValueError)
        A text that UTF-8 cannot encode; the message and ``row`` give its position in ``texts``.
    """
    if isinstance(texts, pa.Array) and (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
        return texts.cast(pa.large_string()) if pa.types.is_string(texts.type) else texts
    return read_text_array(texts if isinstance(texts, list) else list(texts), "texts", error=TextEncodingError)


# ----------------------------------------------------------------------------- split

def nfc_strings(values) -> pa.Array:
    """NFC (UAX #15) of a list of Python strings by :func:`unicodedata.normalize`, as a LargeStringArray.

    The one normalizer of both backends.  pyarrow's ``utf8_normalize`` is not used: some pyarrow
    builds return decomposed text unchanged (pyarrow 25.0.1 of the lent GPU machine's image leaves
    ``cafe\u0301`` as it is), and the rows that need it are few (:func:`_nfc_flagged`).
    """
    norm = unicodedata.normalize
    return pa.array([None if v is None else norm("NFC", v) for v in values], type=pa.large_string())


def _nfc_cpu(arr):
    """Rule 1 on a LargeStringArray: NFC of the rows that hold an NFC-unstable code point.

    :func:`cutext.kernels.tokenize.rows_containing` (the numba twin of the GPU kernel) flags the
    rows; by the UAX #15 quick check every other row is already NFC.  The flagged rows are
    normalized with :func:`nfc_strings`, the same rows and the same normalizer as on the GPU.
    """
    import pyarrow.compute as pc


    flags = rows_containing(*arrow_buffers(arr), nfc_unstable_table()).astype(bool)
    if not flags.any():
        return arr
    mask = pa.array(flags)
    return pc.replace_with_mask(arr, mask, nfc_strings(arr.filter(mask).to_pylist()))


def non_ascii_rows(chars, offsets):
    """Rows of a strings buffer that hold a byte >= 0x80 (the rows whose NFC or lowercase is more than an
    ASCII byte fold): :func:`cutext.kernels.tokenize.rows_with_high_bytes`.

    Parameters
    ----------
    chars : uint8 array (numpy or cupy)
    offsets : int64 array (n + 1,) of the same library, nondecreasing (absolute positions in ``chars``)

    Returns
    -------
    int64 array of the same library, sorted row indices.
    """

    return rows_with_high_bytes(chars, offsets)


def _normalize_cpu(arr, lowercase: bool):
    """Rules 1-2 before the split on a LargeStringArray: NFC, then (``lowercase``) Unicode lowercase with
    final sigma folded to sigma and NFC again."""
    import pyarrow.compute as pc

    arr = _nfc_cpu(arr)
    if lowercase:
        arr = _nfc_cpu(pc.replace_substring(pc.utf8_lower(arr), FINAL_SIGMA, SIGMA).cast(pa.large_string()))
    return arr


def normalize_texts(texts, lowercase: bool):
    """A batch of short texts (queries) made ready for a byte-level split, normalizing only the rows
    that need it.

    A row of ASCII bytes is its own NFC and its lowercase is a byte fold, so only the rows with a
    byte >= 0x80 go through :func:`_normalize_cpu` (pyarrow); the caller folds the ASCII capitals
    (``fold``) while splitting (:func:`cutext.kernels.termhash.text_csr`).  Splitting the result
    gives the tokens of :func:`split_tokens` on ``texts``.

    Parameters
    ----------
    texts : sequence of str, length n
    lowercase : bool

    Returns
    -------
    (data, offsets, fold)
        uint8 bytes, int64 offsets (n + 1,), and whether ASCII capitals are still to be folded.
    """
    import pyarrow.compute as pc


    arr = text_array(texts)
    data, offsets = arrow_buffers(arr)
    rows = non_ascii_rows(data, offsets)
    if len(rows):
        flags = np.zeros(len(arr), bool)
        flags[rows] = True
        mask = pa.array(flags)
        arr = pc.replace_with_mask(arr, mask, _normalize_cpu(arr.filter(mask), lowercase))
        data, offsets = arrow_buffers(arr)
    return data, offsets, bool(lowercase)


def _split_cpu(text: pd.Series, doc_id: np.ndarray, lowercase: bool):
    import pyarrow as pa
    import pyarrow.compute as pc


    arr = pa.array(text, type=pa.large_string()) if not isinstance(text, (pa.Array, pa.ChunkedArray)) else text
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    arr = _normalize_cpu(pc.fill_null(arr.cast(pa.large_string()), ""), lowercase)
    data, offsets = arrow_buffers(arr)
    tok_off, tok_bytes, parent = split_utf8(data, offsets)
    flat = pa.LargeStringArray.from_buffers(len(parent), pa.py_buffer(tok_off), pa.py_buffer(tok_bytes))
    tokens = pd.Series(flat, dtype=pd.StringDtype("pyarrow"))
    return tokens, doc_id[parent]


def _replace_rows(s, fix, fixed):
    """``s`` (cudf strings, RangeIndex) with rows ``fix`` (sorted int64 cupy) replaced by ``fixed``."""
    import cudf
    import cupy

    keep = cupy.ones(len(s), dtype=bool)
    keep[fix] = False
    keep = cupy.flatnonzero(keep)
    joined = cudf.concat([s.take(keep).reset_index(drop=True), fixed.reset_index(drop=True)], ignore_index=True)
    order = cupy.empty(len(s), dtype=np.int64)
    order[cupy.concatenate([keep, fix])] = cupy.arange(len(s), dtype=np.int64)
    return joined.take(order).reset_index(drop=True)


def _nfc_gpu(s):
    """Rule 1 on a cudf strings Series (no nulls, RangeIndex): NFC of the flagged rows on the host."""
    import cupy
    import pyarrow as pa


    _, chars, offsets = cudf_string_buffers(s)
    fix = cupy.flatnonzero(rows_containing(chars, offsets, nfc_unstable_table()))
    if len(fix) == 0:
        return s
    fixed = to_cudf(nfc_strings(s.take(fix).to_arrow().to_pylist()).cast(pa.string()))
    return _replace_rows(s, fix, fixed)


def scatter_ranges(dst, dst_starts, src, src_offsets):
    """Copy row ``k`` of a strings buffer, ``src[src_offsets[k]:src_offsets[k + 1]]``, to
    ``dst[dst_starts[k]:]``, in place, for every row at once (numpy or cupy; one gather-scatter
    over the copied bytes).  Rows must not overlap in ``dst``.

    Parameters
    ----------
    dst, src : uint8 arrays, same library
    dst_starts : int64 array (n,)
    src_offsets : int64 array (n + 1,), nondecreasing (absolute positions in ``src``)
    """
    xp = array_module(dst)
    rel = src_offsets - src_offsets[0]
    total = int(rel[-1])
    if total == 0:
        return dst
    j = xp.arange(total, dtype=np.int64)
    k = xp.searchsorted(rel, j, side="right") - 1
    dst[dst_starts[k] + (j - rel[k])] = src[int(src_offsets[0]):int(src_offsets[0]) + total]
    return dst


_ASCII_LOWER = None
CAPITAL_I_DOT = "\u0130"


def _cudf_lower(s):
    """cudf ``str.lower`` as the CPU rule lowercases: U+0130 (İ) first mapped to ``i``, then final sigma folded.

    libcudf applies the full lowercase mapping of U+0130 (``i`` + U+0307, SpecialCasing.txt, the only
    unconditional lowercase mapping to two code points) while pyarrow's ``utf8_lower`` (utf8proc) and
    so the CPU backend apply the simple one (``i``).
    """
    return s.str.replace(CAPITAL_I_DOT, "i", regex=False).str.lower().str.replace(FINAL_SIGMA, SIGMA, regex=False)


def _lower_gpu(s, max_fraction: float = 0.25):
    """Rule 2 on a cudf strings Series (no nulls, RangeIndex): lowercase, then final sigma -> sigma.

    Rows of ASCII bytes only are lowered by one byte kernel over the character buffer ('A'-'Z' ->
    'a'-'z', what ``str.lower`` does to them); rows with a byte >= 0x80 go through cudf's
    ``str.lower`` and the sigma fold, as every row did before, and are put back in place (their
    bytes copied into the kernel's output when no row changed length).  When
    more than ``max_fraction`` of the rows have such a byte, cudf lowers the whole column.
    """
    import cudf
    import pylibcudf as plc

    col, chars, offsets = cudf_string_buffers(s)
    n = len(s)
    if n == 0 or len(chars) == 0:
        return s
    fix = non_ascii_rows(chars, offsets)
    if len(fix) > max_fraction * n:
        return _cudf_lower(s)
    low = ascii_lower(chars)
    fixed = None
    if len(fix):
        fixed = _cudf_lower(s.take(fix)).reset_index(drop=True)
        _, fchars, foff = cudf_string_buffers(fixed)
        if bool(((foff[1:] - foff[:-1]) == (offsets[fix + 1] - offsets[fix])).all()):
            scatter_ranges(low, offsets[fix], fchars, foff)  # same byte lengths: copied in place
            fixed = None
    new = plc.Column(col.type(), col.size(), plc.gpumemoryview(low), col.null_mask(), col.null_count(),
                     col.offset(), col.children())
    out = cudf.Series.from_pylibcudf(new)
    # a row that changed length (e.g. U+0130 -> i + U+0307) needs the rows rebuilt
    return out if fixed is None else _replace_rows(out, fix, fixed)


def ascii_lower(chars):
    """A copy of a byte buffer with 'A'-'Z' folded to 'a'-'z' (numpy, or one CuPy byte kernel)."""
    global _ASCII_LOWER
    xp = array_module(chars)
    if xp is np:
        return np.where((chars - np.uint8(65)) < 26, chars + np.uint8(32), chars).astype(np.uint8)
    if _ASCII_LOWER is None:
        _ASCII_LOWER = xp.ElementwiseKernel("uint8 c", "uint8 o",
                                            "o = (unsigned char)(c - 65) < 26 ? c + 32 : c", "cutext_ascii_lower")
    return _ASCII_LOWER(chars)


def gather_ranges(src, starts, rel):
    """The byte ranges ``src[starts[k]:starts[k] + rel[k + 1] - rel[k]]`` back to back (numpy or cupy).

    Parameters
    ----------
    src : uint8 array
    starts : int64 array (n,)
    rel : int64 array (n + 1,), ``rel[0] == 0``, the running lengths

    Returns
    -------
    uint8 array (rel[-1],), same library
    """
    xp = array_module(src)
    total = int(rel[-1])
    if total == 0:
        return xp.zeros(0, np.uint8)
    j = xp.arange(total, dtype=np.int64)
    k = xp.searchsorted(rel, j, side="right") - 1
    return src[starts[k] + (j - rel[k])]


class Normalized(NamedTuple):
    """Rules 1-2 applied to a strings buffer (:func:`normalize_buffers`).

    ``chars`` (same offsets as the input) holds every row's result, except, when ``fixed`` is not
    None, the rows ``fix``: their results are ``fixed`` (a pyarrow LargeStringArray) and have other
    byte lengths, so the caller rebuilds the column with them (:func:`_replace_rows`,
    ``pyarrow.compute.replace_with_mask``).
    """
    chars: object
    fix: object
    fixed: object


def normalize_buffers(chars, offsets, lowercase: bool, max_fraction: float = 0.05):
    """Rules 1-2 (NFC, then lowercase + final sigma fold + NFC) on a strings buffer: ASCII rows on the
    array's device, the rest by the CPU path's own code.

    A row of ASCII bytes is its own NFC and its lowercase is the byte fold :func:`ascii_lower`, so
    only the rows holding a byte >= 0x80 (a few in most corpora: 37 of 18,846 posts of 20 Newsgroups)
    are copied to the host, where :func:`_normalize_cpu` (what the CPU backend runs on every row)
    normalizes them; the results are copied back in place when no row changed length.  So both
    backends give the same bytes by construction.  Used by the GPU tokenize paths
    (:func:`normalize_gpu`); the same code runs on numpy in the CPU tests.

    Parameters
    ----------
    chars : uint8 array, numpy or cupy
    offsets : int64 array (n + 1,), same library, nondecreasing (absolute positions in ``chars``)
    lowercase : bool
    max_fraction : float
        The most of the text's bytes that the rows with a byte >= 0x80 may hold for the host to
        take them (above it, a text mostly in another script, the device does them).

    Returns
    -------
    Normalized or None
        None when the rows with a byte >= 0x80 hold more than ``max_fraction`` of the bytes or are
        not valid UTF-8 (the caller takes its device path for the whole column).
    """

    xp = array_module(chars)
    lo, hi = int(offsets[0]), int(offsets[-1])
    fix = non_ascii_rows(chars, offsets)
    out = ascii_lower(chars) if lowercase else chars
    if len(fix) == 0:
        return Normalized(out, fix, None)
    starts = offsets[fix]
    rel = xp.zeros(len(fix) + 1, dtype=np.int64)
    xp.cumsum(offsets[fix + 1] - starts, out=rel[1:])
    if int(rel[-1]) > max_fraction * (hi - lo):
        return None
    old = to_host(gather_ranges(chars, starts, rel))
    rel_h = to_host(rel)
    arr = pa.LargeStringArray.from_buffers(len(fix), pa.py_buffer(rel_h), pa.py_buffer(old))
    try:
        arr.validate(full=True)
    except pa.ArrowInvalid:  # bytes that are not UTF-8 (a frame handed in as is): the device's rules
        return None
    new = _normalize_cpu(arr, lowercase)
    data, noff = arrow_buffers(new)
    data = data[int(noff[0]):int(noff[-1])]
    if not np.array_equal(np.diff(noff), np.diff(rel_h)):
        return Normalized(out, fix, new)
    if not lowercase:
        if np.array_equal(data, old):
            return Normalized(chars, fix[:0], None)
        out = chars.copy()
    scatter_ranges(out, starts, xp.asarray(data), xp.asarray(noff - noff[0]))
    return Normalized(out, fix, None)


def normalize_gpu(s, lowercase: bool, max_fraction: float = 0.05):
    """Rules 1-2 on a cudf strings Series (nulls read as ""): :func:`normalize_buffers` on its device
    buffers, the rows that changed length put back by :func:`_replace_rows`; when that returns None,
    the device's rules (:func:`_nfc_gpu`, :func:`_lower_gpu`: NFC of the flagged rows on the host,
    cudf ``str.lower``).  Returns a Series with index 0..n-1.
    """
    import cudf
    import pylibcudf as plc

    if s.null_count:
        s = s.fillna("")
    s = s.reset_index(drop=True)
    col, chars, offsets = cudf_string_buffers(s)
    if len(s) == 0 or len(chars) == 0:
        return s
    got = normalize_buffers(chars, offsets, lowercase, max_fraction)
    if got is None:
        s = _nfc_gpu(s)
        return _nfc_gpu(_lower_gpu(s)) if lowercase else s
    if got.chars is not chars:
        new = plc.Column(col.type(), col.size(), plc.gpumemoryview(got.chars), col.null_mask(), col.null_count(),
                         col.offset(), col.children())
        s = cudf.Series.from_pylibcudf(new)
    if got.fixed is not None:
        s = _replace_rows(s, got.fix, to_cudf(got.fixed.cast(pa.string())))
    return s


def _blank_gpu(s):
    """Rule 3 on the GPU: a copy of ``s`` with every byte of a non-word code point set to a space."""
    import cudf
    import pylibcudf as plc


    col, chars, offsets = cudf_string_buffers(s)
    if len(chars) == 0:
        return s
    out = blank_separators(chars, offsets)
    new = plc.Column(col.type(), col.size(), plc.gpumemoryview(out), col.null_mask(), col.null_count(),
                     col.offset(), col.children())
    return cudf.Series.from_pylibcudf(new)


def _split_gpu(text, doc_id, lowercase: bool):
    import cupy

    s = normalize_gpu(text, lowercase)
    # separators (non-word code points, invalid bytes) become GPU_SPLIT_PATTERN, byte for byte, so
    # nvtext splits on that single delimiter (empty tokens are skipped) into split_utf8's tokens
    s = _blank_gpu(s)
    counts = s.str.token_count(GPU_SPLIT_PATTERN).values.astype(np.int64)
    tokens = s.str.tokenize(GPU_SPLIT_PATTERN)
    tokens = tokens.reset_index(drop=True)
    # the doc_id of every token: doc_id[r] repeated counts[r] times, by a search over the running
    # counts (cupy.repeat takes no device array of repeats)
    ends = cupy.cumsum(counts)
    total = int(ends[-1]) if len(ends) else 0
    ids = cupy.asarray(doc_id)[cupy.searchsorted(ends, cupy.arange(total, dtype=np.int64), side="right")]
    return tokens, ids


# the token split is where pandas/pyarrow and cudf differ: a type-keyed dispatch (as dask's
# dataframe/dispatch.py does), cudf registered lazily so that CPU machines never import it
split_dispatch = Dispatch("split_tokens")


@split_dispatch.register((pd.Series, pa.Array, pa.ChunkedArray))
def _split_host(text, doc_id, lowercase):
    return _split_cpu(text, np.asarray(doc_id), lowercase)


@split_dispatch.register_lazy("cudf")
def _register_cudf():
    import cudf

    split_dispatch.register(cudf.Series, _split_gpu)


def split_tokens(text, doc_id, lowercase=True):
    """Steps 1-2 of the rules: lowercase and split (dispatched on the type of ``text``).

    Parameters
    ----------
    text : pandas.Series, pyarrow string array or cudf.Series of str, shape (n_docs,)
    doc_id : numpy or cupy int64 array, shape (n_docs,)

    Returns
    -------
    (Series of str, int64 array)
        Tokens in document order, shape (n_tokens,), and the doc_id of each: pandas and numpy for
        host input (:func:`_split_cpu`), cudf and cupy for cudf input (:func:`_split_gpu`).

    Raises
    ------
    TypeError
        ``text`` of a type no split is registered for.
    """
    return split_dispatch(text, doc_id, lowercase)


def _split(text, doc_id, cfg: TokenizerConfig):
    """:func:`split_tokens`, or the analyzer's split (:func:`cutext.stages.text.anserini.split_anserini`)."""
    if cfg.analyzer is not None:
        if is_gpu_object(text):
            return split_anserini_gpu(text, doc_id)
        return split_anserini_host(text, doc_id)
    return split_tokens(text, doc_id, cfg.lowercase)


def _arrow_strings(uniq) -> pa.Array:
    """A pandas Index / array of str as one Arrow large_string array (no Python string a value)."""
    arr = pa.array(getattr(uniq, "array", uniq))
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr.cast(pa.large_string())


def _host_strings(uniq) -> list[str]:
    if is_gpu_object(uniq):
        return uniq.to_arrow().to_pylist()
    return list(np.asarray(uniq, dtype=object))


def _mapped_codes(tokens, doc_ids, cfg: TokenizerConfig):
    """``(codes, final)``: the distinct terms of ``tokens`` after steps 3-5 (a list of str, unique) and each
    token's index into them, -1 for a dropped token (an array of ``doc_ids``' library)."""
    codes, uniq = tokens.factorize()
    lut, final = _map_distinct(uniq, cfg)
    xp = array_module(doc_ids)
    return xp.asarray(lut)[xp.asarray(codes)], final


def _map_distinct(uniq, cfg: TokenizerConfig):
    """``(lut, final)``: steps 3-5 of the tokens ``uniq`` (pandas / cudf Index or pyarrow strings; repeats
    allowed): ``final`` the distinct terms (a list of str), ``lut`` (int64 numpy, (len(uniq),)) each token's
    index into them, -1 for a dropped token."""
    if is_gpu_object(uniq):
        mapped = map_terms(_host_strings(uniq), cfg)
        keep_mask = np.fromiter((m is not None for m in mapped), bool, len(mapped))
        kept = pa.array([m for m in mapped if m is not None], type=pa.large_string())
    else:  # the rules in Arrow's kernels, off the GIL that the partitions' threads share
        keep_mask, kept = map_terms_arrow(_arrow_strings(uniq), cfg)
    lut = np.full(len(keep_mask), -1, dtype=np.int64)
    if cfg.stemmer is None:  # survivors are still unique: no second factorize
        final = kept.to_pylist()
        lut[keep_mask] = np.arange(len(kept))
    else:
        import pyarrow.compute as pc

        enc = pc.dictionary_encode(kept)
        final = enc.dictionary.to_pylist()
        lut[keep_mask] = enc.indices.to_numpy()
    return lut, final


def apply_term_map(tokens, doc_ids, cfg: TokenizerConfig):
    """Steps 3-5 on the unique tokens of a partition, gathered back to every token."""
    if not cfg.needs_term_map or len(tokens) == 0:
        return tokens, doc_ids
    if not cfg.stopwords and cfg.stemmer is None and not is_gpu_object(tokens):
        # the length filter alone: code points counted by pyarrow, no Python string per unique token
        n = tokens.str.len().to_numpy()
        keep = n >= cfg.min_len
        if cfg.max_len is not None:
            keep &= n <= cfg.max_len
        return tokens[keep].reset_index(drop=True), doc_ids[keep]
    new_codes, final = _mapped_codes(tokens, doc_ids, cfg)
    keep = new_codes >= 0
    new_codes = new_codes[keep]
    if is_gpu_object(tokens):
        import pyarrow as pa

        cats = to_cudf(pa.array(list(final), type=pa.string()))
    else:
        cats = pd.Series(list(final), dtype=pd.StringDtype("pyarrow"))
    out = cats.take(new_codes).reset_index(drop=True)
    return out, doc_ids[keep]


def tokenize_partition(df, cfg: TokenizerConfig):
    """Tokenize one partition.

    Parameters
    ----------
    df : pandas.DataFrame or cudf.DataFrame
        Columns ``doc_id: int64`` and ``text: str``.
    cfg : TokenizerConfig

    Returns
    -------
    DataFrame of the same library, columns ``doc_id: int64, token: str``, one row per token, in
    document order (``cutext.kernels.backend.meta("tokens", like=df)`` is its empty form).
    """

    tokens, ids = _split(df["text"], values(df["doc_id"]), cfg)
    tokens, ids = apply_term_map(tokens, ids, cfg)
    if is_gpu_object(df):
        import cudf

        return cudf.DataFrame({"doc_id": ids.astype(np.int64), "token": tokens})
    return pd.DataFrame({"doc_id": np.asarray(ids, dtype=np.int64), "token": tokens.array})


def tokenize_partition_codes(df, cfg: TokenizerConfig):
    """Tokenize one pandas partition into codes: the tokens of :func:`tokenize_partition` as indices into
    their distinct terms, without a string a token.

    Returns
    -------
    doc_id : int64 array, shape (n_tokens,)
        As :func:`tokenize_partition`'s, in document order.
    codes : int64 array, shape (n_tokens,)
        Each token's index in ``uniq``.
    uniq : pandas.Index of str, shape (U,)
        The distinct tokens, each once (in no particular order).

    With stopwords or a stemmer the codes are the term map's own (the partition's tokens are factorized
    once, not again after the map gathered their strings back); otherwise the tokens are factorized.
    """
    if cfg.analyzer is not None:  # the distinct tokens of the word-break kernels' split alone are strings
        got = _anserini_host_codes(df["text"], values(df["doc_id"]))
        if got is not None:
            distinct, codes, ids = got
            lut, final = _map_distinct(distinct, cfg)
            codes = lut[codes]
            keep = codes >= 0
            return ids[keep], codes[keep], pd.Index(pd.array(final, dtype=pd.StringDtype("pyarrow")))
    tokens, ids = _split(df["text"], values(df["doc_id"]), cfg)
    if len(tokens) and (cfg.stopwords or cfg.stemmer is not None):
        codes, final = _mapped_codes(tokens, ids, cfg)
        keep = codes >= 0
        return (np.asarray(ids, dtype=np.int64)[keep], codes[keep],
                pd.Index(pd.array(final, dtype=pd.StringDtype("pyarrow"))))
    tokens, ids = apply_term_map(tokens, ids, cfg)
    codes, uniq = pd.Series(tokens.array).factorize()
    return np.asarray(ids, dtype=np.int64), codes, uniq


def tokenize_flat(texts, cfg: TokenizerConfig):
    """Tokenize a list of strings on the CPU into one flat array (a batch of queries).

    Parameters
    ----------
    texts : sequence of str, length n
    cfg : TokenizerConfig

    Returns
    -------
    tokens : pyarrow.LargeStringArray, shape (n_tokens,)
        Every kept token, text by text, in text order.
    row : numpy int64 array, shape (n_tokens,)
        The index in ``texts`` of each token's text.
    """
    import pyarrow as pa

    s = pd.Series(pd.arrays.ArrowStringArray(text_array(texts).cast(pa.string())))
    ids = np.arange(len(s), dtype=np.int64)
    tokens, doc = _split(s, ids, cfg)
    tokens, doc = apply_term_map(tokens, doc, cfg)
    arr = pa.array(tokens.array)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr.cast(pa.large_string()), np.asarray(doc, dtype=np.int64)


def tokenize_texts(texts, cfg: TokenizerConfig) -> list[list[str]]:
    """Tokenize a list of strings on the CPU (tests, a few documents); returns one token list per
    text (:func:`tokenize_flat` gives the same tokens as one array)."""
    texts = list(texts)
    tokens, doc = tokenize_flat(texts, cfg)
    out: list[list[str]] = [[] for _ in range(len(texts))]
    for d, t in zip(doc.tolist(), tokens.to_pylist()):
        out[d].append(t)
    return out


def token_positions(texts, cfg: TokenizerConfig):
    """Tokenize strings on the CPU with each kept token's position (Lucene's position increments).

    A token's position counts every token of the split (rules 1-3) before it in its text, so a token that
    the length filter or the stopwords drop leaves a gap, as Lucene's ``StopFilter`` and ``LengthFilter``
    leave a position increment (``"state of the art"`` with English stopwords: ``state`` 0, ``art`` 3).

    Parameters
    ----------
    texts : sequence of str or pyarrow string array, length n (a null is an empty text)
    cfg : TokenizerConfig

    Returns
    -------
    tokens : pyarrow.LargeStringArray, shape (n_tokens,)
        The kept tokens, text by text, in text order (those of :func:`tokenize_flat`).
    row : numpy int64 array, shape (n_tokens,)
        The index in ``texts`` of each token's text.
    pos : numpy int64 array, shape (n_tokens,)
        Each token's position in its text, from 0, ascending within a text.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    arr = (pc.fill_null(texts.cast(pa.string()), "") if isinstance(texts, pa.Array)  # a segment's stored texts
           else text_array(texts).cast(pa.string()))
    s = pd.Series(pd.arrays.ArrowStringArray(arr))
    tokens, doc = _split(s, np.arange(len(s), dtype=np.int64), cfg)
    doc = np.asarray(doc, dtype=np.int64)
    pos = np.arange(len(doc), dtype=np.int64) - np.searchsorted(doc, doc)  # split order: texts ascending
    tokens, kept = apply_term_map(tokens, np.arange(len(doc), dtype=np.int64), cfg)  # the flat index survives
    kept = np.asarray(kept, dtype=np.int64)
    arr = pa.array(tokens.array)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr.cast(pa.large_string()), doc[kept], pos[kept]
