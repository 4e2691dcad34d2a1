"""The device tokenizer: one cudf partition's tokens as byte offsets with a 64-bit hash each.

:func:`scan_partition` (tokenize stage): the tokenizer's rules 1-2 (NFC of flagged rows, lowercase,
final sigma), then the word-table kernel blanks the separator bytes
(:func:`cutext.kernels.tokenize.blank_separators`), :func:`cutext.kernels.tokenize.token_bounds`
gives every token as ``(start, end, row)`` byte offsets, :func:`~cutext.kernels.tokenize.hash_tokens`
a 64-bit hash; a sort of the hashes gives the partition's local codes, one representative per code
is gathered into the partition's unique-term strings (the only strings built), and every token is
checked byte for byte against its representative (:func:`~cutext.kernels.tokenize.tokens_equal`).
On a collision the partition falls back to the exact string path (nvtext tokenize + factorize).
Rules 3-5 (length, stopwords, stemming) run on the unique terms only
(:func:`cutext.stages.text.tokenize.map_terms`), and only on those no earlier partition of the process held
(a cache per tokenizer setting, keyed by the exact term: :func:`_term_map`).

With ``analyzer="anserini"`` the text is taken as it comes (no NFC, no lowercase), the word-break kernels
(:func:`cutext.kernels.wordbreak.standard_token_bounds`, Lucene's ``StandardTokenizer``) give the token offsets,
and the analyzer's possessive filter and lowercase run on the unique terms before rules 4-5; when the kernels
report a text (nested scans past their stack) the partition takes the exact string path as on a collision.

Array code over numpy or cupy (the kernels have numba twins), so the CPU tests run the same code
on numpy and compare with the CPU front end.
"""
from __future__ import annotations

import logging
import threading

import numpy as np
import pyarrow as pa

from cutext.kernels.backend import is_gpu_object
from cutext.kernels.tokenize import arrow_buffers, blank_separators, code_points, token_bounds
from cutext.kernels.wordbreak import standard_token_bounds
from cutext.stages.readers.device import _xp, cudf_strings
from cutext.stages.runtime.compute import StepClock
from cutext.stages.text.anserini import possessive_lower
from cutext.stages.text.count import run_lengths
from cutext.stages.text.sort import sort_pairs
from cutext.stages.text.tokenize import (
    FINAL_SIGMA,
    LUCENE_PORTER,
    SIGMA,
    TokenizerConfig,
    _nfc_cpu,
    cudf_string_buffers,
    gather_strings,
    normalize_gpu,
    stem_array,
    stem_words,
    token_codes,
)

log = logging.getLogger(__name__)

__all__ = ["clear_term_cache", "scan_arrays", "scan_partition"]


# ----------------------------------------------------------------------------- tokenize + encode

# the distinct terms mapped so far, per tokenizer setting: a partition maps only the terms no earlier one held
# (a corpus's partitions share most of their vocabulary); forgotten past TERM_CACHE_MAX terms
TERM_CACHE_MAX = 1 << 22
_term_cache: dict = {}
_term_cache_lock = threading.Lock()


def clear_term_cache() -> None:
    """Forget the terms mapped so far (a benchmark's cold start; the cache is exact, so results never depend on it)."""
    with _term_cache_lock:
        _term_cache.clear()


def _term_map(uniq: pa.LargeStringArray, cfg: TokenizerConfig):
    """:func:`_map_terms_of` of the unique terms of a partition, through the mappings of earlier partitions.

    Returns
    -------
    (final terms pyarrow.LargeStringArray (F,), int64 lut (len(uniq),))
        The distinct final terms of this partition (each used by the lut) and, for each unique term, the index
        of its final term or -1 (dropped): the mapping :func:`_map_terms_of` gives, term for term.
    """
    import pyarrow.compute as pc

    with _term_cache_lock:
        hit = _term_cache.get(cfg)
    if hit is None:
        terms, lut = _map_terms_of(uniq, cfg)
        known, codes = uniq, lut
    else:
        known, terms, codes = hit
        idx = pc.index_in(uniq, value_set=known).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        miss = np.flatnonzero(idx < 0)
        if len(miss):
            new = uniq.take(pa.array(miss))
            new_terms, new_lut = _map_terms_of(new, cfg)
            at = pc.index_in(new_terms, value_set=terms).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
            fresh = at < 0
            at[fresh] = len(terms) + np.arange(int(fresh.sum()))
            terms = pa.concat_arrays([terms, new_terms.filter(pa.array(fresh))])
            glob = np.full(len(new_lut), -1, np.int64)
            glob[new_lut >= 0] = at[new_lut[new_lut >= 0]]
            idx[miss] = len(known) + np.arange(len(miss))
            known, codes = pa.concat_arrays([known, new]), np.concatenate([codes, glob])
        lut = codes[idx]
    if len(known) <= TERM_CACHE_MAX:
        with _term_cache_lock:
            _term_cache[cfg] = (known, terms, codes)
    present = np.unique(lut[lut >= 0])  # the final terms this partition uses, in the cache's order
    return terms.take(pa.array(present)), np.where(lut >= 0, np.searchsorted(present, lut), -1)


def _map_terms_of(uniq: pa.LargeStringArray, cfg: TokenizerConfig):
    """Rules 3-5 on the unique terms: (final unique terms, int64 lut old code -> new code, -1 dropped).

    With an analyzer, its filters before the stop list come first (``"anserini"``: possessive, lowercase,
    :func:`cutext.stages.text.anserini.possessive_lower`; they can merge terms).  The length filter and the
    stopwords are Arrow kernels over the unique terms (code points as
    :func:`cutext.stages.text.tokenize.map_terms` counts them, exact string match), the stemmer (PyStemmer;
    ``lucene_porter``: the numba kernel of :func:`cutext.stages.text.porter.porter_stem_array` over the Arrow
    buffers) runs on the survivors only; the result is ``map_terms``'s, term for term.
    """
    import pyarrow.compute as pc

    if cfg.analyzer is not None:
        uniq = possessive_lower(uniq)
    n_cp = pc.utf8_length(uniq)
    keep = pc.greater_equal(n_cp, cfg.min_len)
    if cfg.max_len is not None:
        keep = pc.and_(keep, pc.less_equal(n_cp, cfg.max_len))
    if cfg.stopwords:
        stop = pa.array(sorted(cfg.stopwords), type=pa.large_string())
        keep = pc.and_(keep, pc.invert(pc.is_in(uniq, value_set=stop)))
    kept = uniq.filter(keep)
    keep = keep.to_numpy(zero_copy_only=False).astype(bool)
    lut = np.full(len(uniq), -1, dtype=np.int64)
    if cfg.stemmer is None and cfg.analyzer is None:
        lut[keep] = np.arange(len(kept))
        return kept, lut
    if cfg.stemmer == LUCENE_PORTER:  # stems can merge terms
        stems = stem_array(kept, cfg.stemmer)  # numba over the Arrow buffers: no str a term
    else:
        stems = kept.to_pylist()
        if cfg.stemmer is not None:
            stems = stem_words(stems, cfg.stemmer)
        stems = pa.array(stems, type=pa.large_string())
    enc = pc.dictionary_encode(stems)
    lut[keep] = enc.indices.to_numpy()
    return enc.dictionary.cast(pa.large_string()), lut


def scan_arrays(data, offsets, cfg: TokenizerConfig):
    """Tokenize and count one partition's prepared text (after rules 1-2) without token strings.

    Parameters
    ----------
    data : uint8 array, numpy or cupy
        UTF-8 bytes of the rows (NFC, lowercased when the config says so; as they come with an analyzer).
    offsets : int64 array, shape (n_rows + 1,), same library
    cfg : TokenizerConfig

    Returns
    -------
    tuple or None
        ``(uniq, code, pos, tf, lengths)``: ``uniq`` a pyarrow LargeStringArray (U,) of the
        partition's distinct terms; ``code``, ``pos``, ``tf`` int32 arrays (P,) of the distinct
        (term, row) pairs sorted by (code, pos); ``lengths`` int64 (n_rows,) terms per row.
        None when two different tokens share a hash, or the word-break kernels report a text (the caller
        takes the exact string path).
    """
    xp = _xp(data)
    clock = StepClock(xp)
    n_rows = len(offsets) - 1
    if cfg.analyzer is not None:  # Lucene's StandardTokenizer: the word-break kernels
        got = standard_token_bounds(data, offsets)
        if got is None:
            return None
        starts, ends, rows = got
        clock("scan: word breaks + token offsets")
    else:
        blanked = blank_separators(data, offsets)
        starts, ends, rows = token_bounds(blanked, offsets)
        del blanked
        clock("scan: blank + token offsets")
    empty = (pa.array([], pa.large_string()), xp.zeros(0, np.int32), xp.zeros(0, np.int32),
             xp.zeros(0, np.int32), xp.zeros(n_rows, np.int64))
    if len(starts) == 0:
        return empty
    got = token_codes(data, starts, ends)
    if got is None:
        return None
    codes, rep = got
    del got
    clock("scan: collision check")
    dropped = cfg.needs_term_map
    if dropped and not cfg.stopwords and cfg.stemmer is None:
        # rule 4 alone (length bounds): code points counted on the device, only the kept terms copied
        n_cp = code_points(data, starts[rep], ends[rep])
        keep = n_cp >= cfg.min_len
        if cfg.max_len is not None:
            keep &= n_cp <= cfg.max_len
        lut = xp.where(keep, xp.cumsum(keep, dtype=np.int64) - 1, -1)
        kept = xp.flatnonzero(keep)
        uniq = gather_strings(data, starts[rep[kept]], ends[rep[kept]])
        del n_cp, keep, kept
    else:
        uniq = gather_strings(data, starts[rep], ends[rep])
        lut = None
        if dropped:  # stopwords, stemmer: the unique terms on the host
            uniq, lut = _term_map(uniq, cfg)
            lut = xp.asarray(lut)
    del starts, ends, rep
    clock("scan: unique terms + term map")
    if dropped:
        codes = lut[codes]  # -1: the term is dropped; its pairs sort first and are cut below
        del lut
    else:
        lengths = xp.bincount(rows, minlength=n_rows).astype(np.int64)
    keys, doc_min, span = sort_pairs(codes, rows)
    del codes, rows
    ukeys, tf = run_lengths(keys)
    del keys
    if dropped:
        cut = int(xp.searchsorted(ukeys, 0))
        ukeys, tf = ukeys[cut:], tf[cut:]
        if len(ukeys) == 0:
            return (uniq,) + empty[1:]
    code, pos = (ukeys // span).astype(np.int32), (ukeys % span + doc_min).astype(np.int32)
    if dropped:  # terms per row: the counts of the kept pairs
        lengths = xp.bincount(pos, weights=tf, minlength=n_rows).astype(np.int64)
    clock("scan: pair sort + tf")
    return uniq, code, pos, tf.astype(np.int32), lengths


def _prepare_host(text, nfc: bool = True):
    """Rule 1 on host text (the CPU split's own step; none with an analyzer): a LargeStringArray, nulls empty."""
    import pyarrow.compute as pc

    arr = pa.array(text, type=pa.large_string()) if not isinstance(text, (pa.Array, pa.ChunkedArray)) else text
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    arr = pc.fill_null(arr.cast(pa.large_string()), "")
    return _nfc_cpu(arr) if nfc else arr


def _prepare_device(text, lowercase: bool):
    """Rules 1-2 on a cudf strings Series, as :func:`cutext.stages.text.tokenize._split_gpu` does."""

    import cupy

    clock = StepClock(cupy)
    s = normalize_gpu(text, lowercase)
    clock("scan: NFC + lowercase")
    return s


def scan_partition(text, cfg: TokenizerConfig):
    """:func:`scan_arrays` of a partition's text column, rules 1-2 applied first.

    Parameters
    ----------
    text : cudf.Series of str (device path) or pandas Series / pyarrow array (the same code on
        the host, for tests)
    cfg : TokenizerConfig

    Returns
    -------
    tuple or None
        As :func:`scan_arrays`, with ``uniq`` a Series of the input's library (cudf or pandas).
    """
    import pandas as pd

    if cfg.analyzer is not None:  # no NFC, no lowercase before the split: Lucene takes the text as it comes
        if is_gpu_object(text):
            _, data, offsets = cudf_string_buffers(text)
            out = scan_arrays(data, offsets, cfg)
            return None if out is None else (cudf_strings(out[0]),) + tuple(out[1:])
        data, offsets = arrow_buffers(_prepare_host(text, nfc=False))
        out = scan_arrays(data, offsets, cfg)
        return None if out is None else (pd.Series(out[0], dtype=pd.StringDtype("pyarrow")),) + tuple(out[1:])
    if is_gpu_object(text):
        s = _prepare_device(text, cfg.lowercase)
        _, data, offsets = cudf_string_buffers(s)
        out = scan_arrays(data, offsets, cfg)
        del s, data, offsets
        if out is None:
            return None
        return (cudf_strings(out[0]),) + tuple(out[1:])
    import pyarrow.compute as pc

    arr = _prepare_host(text)
    if cfg.lowercase:
        arr = _nfc_cpu(pc.replace_substring(pc.utf8_lower(arr), FINAL_SIGMA, SIGMA).cast(pa.large_string()))
    data, offsets = arrow_buffers(arr)
    out = scan_arrays(data, offsets, cfg)
    if out is None:
        return None
    return (pd.Series(out[0], dtype=pd.StringDtype("pyarrow")),) + tuple(out[1:])
