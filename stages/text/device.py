"""The device tokenizer: one cudf partition's tokens as byte offsets with a 64-bit hash each.

:func:`scan_partition` (tokenize stage): the tokenizer's rules 1-2 (NFC of flagged rows, lowercase,
final sigma), then the word-table kernel blanks the separator bytes
(:func:`cutext.kernels.tokenize.blank_separators`), :func:`cutext.kernels.tokenize.token_bounds`
gives every token as ``(start, end, row)`` byte offsets, :func:`~cutext.kernels.tokenize.hash_tokens`
a 64-bit hash; a sort of the hashes gives the partition's local codes, one representative per code
is gathered into the partition's unique-term strings (the only strings built; with a term map, those of the
tokens new to its cache only), and every token is
checked byte for byte against its representative (:func:`~cutext.kernels.tokenize.tokens_equal`).
On a collision the partition falls back to the exact string path (nvtext tokenize + factorize).
Rules 3-5 (length, stopwords, stemming) run on the unique terms only
(:func:`cutext.stages.text.tokenize.map_terms`), and only on those no earlier partition of the process held:
a cache per tokenizer setting (and GPU) keyed by the tokens' hashes, in the data's memory (:func:`_term_map`),
finds the others on the device, checks them byte for byte against its copy of their bytes (a mismatch, i.e. a
hash shared by two different tokens, takes the exact string path as above) and gives their final terms; only
the partition's new tokens are copied to the host, mapped and merged in.

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
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from cutext.kernels.backend import is_gpu_object, to_host
from cutext.kernels.tokenize import arrow_buffers, blank_separators, code_points, hash_tokens, token_bounds
from cutext.kernels.wordbreak import standard_token_bounds
from cutext.stages.readers.device import _xp, cudf_strings
from cutext.stages.runtime.compute import StepClock
from cutext.stages.text.anserini import possessive_lower
from cutext.stages.text.count import run_lengths
from cutext.stages.text.sort import sort_pairs
from cutext.stages.text.token_bytes import cudf_string_buffers, gather_bytes, gather_strings, token_codes
from cutext.stages.text.tokenize import (
    FINAL_SIGMA,
    LUCENE_PORTER,
    SIGMA,
    TokenizerConfig,
    _nfc_cpu,
    normalize_gpu,
    stem_array,
    stem_words,
)

log = logging.getLogger(__name__)

__all__ = ["clear_term_cache", "scan_arrays", "scan_partition"]


# ----------------------------------------------------------------------------- tokenize + encode

# the distinct tokens mapped so far, per tokenizer setting (and GPU): a partition maps only the tokens no earlier
# one held (a corpus's partitions share most of their vocabulary); forgotten past TERM_CACHE_MAX tokens
TERM_CACHE_MAX = 1 << 22
_term_cache: dict = {}
_term_cache_lock = threading.Lock()


class _TermCache(NamedTuple):
    """The tokens mapped so far for one setting; never changed in place (a partition merges into a new one).

    The token side lives in the partition's array module (device memory on the GPU), sorted by hash:
    ``known_hash`` uint64 (K,), ``final`` int64 (K,) the index of the token's final term in ``terms`` or -1 (dropped),
    ``start``/``length`` int64 (K,) its bytes in ``known_bytes`` uint8 (the exactness check).  The final terms live
    on the host: ``terms`` pyarrow.LargeStringArray (F,) in the order first seen, ``term_hash`` uint64 (F,)
    sorted, ``term_at`` int64 (F,) the index in ``terms`` of each (new final terms found among the old ones).
    """
    known_hash: object
    final: object
    start: object
    length: object
    known_bytes: object
    terms: pa.LargeStringArray
    term_hash: np.ndarray
    term_at: np.ndarray


def clear_term_cache() -> None:
    """Forget the terms mapped so far (a benchmark's cold start; the cache is exact, so results never depend on it)."""
    with _term_cache_lock:
        _term_cache.clear()


def _cache_key(cfg: TokenizerConfig, xp):
    """The cache of a setting on the host (numpy) or on the current GPU (cupy arrays live on one device)."""
    return (cfg, None) if xp is np else (cfg, int(xp.cuda.Device().id))


def _empty_cache(xp) -> _TermCache:
    i64 = xp.zeros(0, np.int64)
    return _TermCache(xp.zeros(0, np.uint64), i64, i64, i64, xp.zeros(0, np.uint8), pa.array([], pa.large_string()),
                      np.zeros(0, np.uint64), np.zeros(0, np.int64))


def _same_bytes(a, a_start, b, b_start, length) -> bool:
    """Whether ``a[a_start[k]:a_start[k] + length[k]] == b[b_start[k]:b_start[k] + length[k]]`` for every k
    (numpy or cupy): the byte positions of both sides as running sums of their steps, one comparison."""
    xp = _xp(a)
    some = xp.flatnonzero(length > 0)  # empty ranges are equal; the steps below need one byte per range
    if len(some) == 0:
        return True
    length = length[some]
    end = xp.cumsum(length)
    total, nxt = int(end[-1]), end[:-1]  # nxt[k]: where range k + 1's bytes begin in the comparison

    def positions(start):
        start = start[some]
        step = xp.ones(total, dtype=np.int64)
        step[0] = start[0]
        step[nxt] = start[1:] - (start[:-1] + length[:-1]) + 1  # from the last byte of a range to the next's first
        return xp.cumsum(step)

    return bool((a[positions(a_start)] == b[positions(b_start)]).all())


def _merge_sorted(xp, keys, cols, new_keys, new_cols):
    """``keys`` (sorted) and ``new_keys`` (sorted, none among ``keys``) merged in order, the columns alike."""
    m = len(new_keys)
    at_new = xp.searchsorted(keys, new_keys) + xp.arange(m, dtype=np.int64)
    is_new = xp.zeros(len(keys) + m, dtype=bool)
    is_new[at_new] = True
    at_old = xp.flatnonzero(~is_new)
    out = []
    for old, new in zip((keys, *cols), (new_keys, *new_cols)):
        merged = xp.empty(len(keys) + m, dtype=old.dtype)
        merged[at_old] = old
        merged[at_new] = new
        out.append(merged)
    return out


def _final_terms_of(cache: _TermCache, new_terms: pa.LargeStringArray):
    """Where each of ``new_terms`` (distinct) is among the cache's final terms (-1: not there), found by hash and
    checked string for string; with the merged host side.  None on a hash collision (the caller's exact path).

    Returns
    -------
    (int64 (len(new_terms),) index into the merged terms, terms, term_hash, term_at) or None
    """
    import pyarrow.compute as pc

    d, o = arrow_buffers(new_terms)
    h = hash_tokens(d, np.ascontiguousarray(o[:-1]), np.ascontiguousarray(o[1:]))
    pos = np.minimum(np.searchsorted(cache.term_hash, h), max(len(cache.term_hash) - 1, 0))
    found = cache.term_hash[pos] == h if len(cache.term_hash) else np.zeros(len(h), bool)
    at = np.full(len(h), -1, np.int64)
    at[found] = cache.term_at[pos[found]]
    if found.any() and not pc.all(pc.equal(cache.terms.take(pa.array(at[found])),
                                           new_terms.filter(pa.array(found)))).as_py():
        return None
    fresh = np.flatnonzero(~found)
    order = np.argsort(h[fresh], kind="stable")
    fh = h[fresh][order]
    if len(fh) > 1 and bool((fh[1:] == fh[:-1]).any()):  # two new final terms share a hash
        return None
    at[fresh] = len(cache.terms) + np.arange(len(fresh))
    terms = pa.concat_arrays([cache.terms, new_terms.take(pa.array(fresh, pa.int64()))])
    term_hash, term_at = _merge_sorted(np, cache.term_hash, (cache.term_at,), fh, (at[fresh][order],))
    return at, terms, term_hash, term_at


def _term_map(data, starts, ends, code_hash, cfg: TokenizerConfig):
    """:func:`_map_terms_of` of the distinct tokens of a partition, through the mappings of earlier partitions.

    The tokens' hashes are looked up in the setting's cache (on the data's device), every hit is checked byte for
    byte against the cached token, and only the misses' strings are copied to the host, mapped and merged in.

    Parameters
    ----------
    data : uint8 array, numpy or cupy
    starts, ends : int64 arrays (U,), same library
        The distinct tokens' bytes, ``data[starts[k]:ends[k]]``.
    code_hash : uint64 array (U,), same library, increasing
        Their hashes (:func:`cutext.stages.text.token_bytes.token_codes`).
    cfg : TokenizerConfig

    Returns
    -------
    (final terms pyarrow.LargeStringArray (F,), int64 lut (U,) in the data's library) or None
        The distinct final terms of this partition (each used by the lut, in the cache's order) and, for each
        token, the index of its final term or -1 (dropped): the mapping :func:`_map_terms_of` gives, term for term.
        None when a token shares its hash with a different cached token (the caller takes the exact path).
    """
    xp = _xp(data)
    key = _cache_key(cfg, xp)
    with _term_cache_lock:
        cache = _term_cache.get(key)
    if cache is None:
        cache = _empty_cache(xp)
    n_known = len(cache.known_hash)
    pos = xp.minimum(xp.searchsorted(cache.known_hash, code_hash), max(n_known - 1, 0))
    hit = cache.known_hash[pos] == code_hash if n_known else xp.zeros(len(code_hash), dtype=bool)
    hits = xp.flatnonzero(hit)
    pos = pos[hits]
    length = ends[hits] - starts[hits]
    if not bool((length == cache.length[pos]).all()):
        return None
    if not _same_bytes(data, starts[hits], cache.known_bytes, cache.start[pos], length):
        return None
    lut = xp.full(len(code_hash), -1, dtype=np.int64)
    lut[hits] = cache.final[pos]
    del hits, pos, length
    miss = xp.flatnonzero(~hit)
    if len(miss):
        new_terms, new_lut = _map_terms_of(gather_strings(data, starts[miss], ends[miss]), cfg)
        got = _final_terms_of(cache, new_terms)
        if got is None:
            return None
        at, terms, term_hash, term_at = got
        glob = np.full(len(new_lut), -1, np.int64)
        glob[new_lut >= 0] = at[new_lut[new_lut >= 0]]
        lut[miss] = xp.asarray(glob)
        if n_known + len(miss) <= TERM_CACHE_MAX:
            off, new_data = gather_bytes(data, starts[miss], ends[miss])
            merged = _merge_sorted(xp, cache.known_hash, (cache.final, cache.start, cache.length), code_hash[miss],
                                   (xp.asarray(glob), off[:-1] + len(cache.known_bytes), off[1:] - off[:-1]))
            cache = _TermCache(*merged, xp.concatenate([cache.known_bytes, new_data]), terms, term_hash, term_at)
            with _term_cache_lock:
                _term_cache[key] = cache
        else:
            cache = cache._replace(terms=terms)
    kept = xp.flatnonzero(lut >= 0)
    present, inverse = xp.unique(lut[kept], return_inverse=True)  # the final terms used, in the cache's order
    lut[kept] = inverse
    return cache.terms.take(pa.array(to_host(present))), lut


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
    got = token_codes(data, starts, ends, with_hash=True)
    if got is None:
        return None
    codes, rep, code_hash = got
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
    elif dropped:  # stopwords, stemmer: the terms new to the cache on the host
        got = _term_map(data, starts[rep], ends[rep], code_hash, cfg)
        if got is None:
            return None
        uniq, lut = got
    else:
        uniq = gather_strings(data, starts[rep], ends[rep])
        lut = None
    del starts, ends, rep, code_hash
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
