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
(:func:`cutext.stages.text.tokenize.map_terms`).

Array code over numpy or cupy (the kernels have numba twins), so the CPU tests run the same code
on numpy and compare with the CPU front end.
"""
from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa

from cutext.kernels.backend import is_gpu_object, to_host
from cutext.kernels.tokenize import (
    arrow_buffers,
    blank_separators,
    code_points,
    hash_tokens,
    token_bounds,
    tokens_equal,
)
from cutext.stages.readers.device import _xp, cudf_strings
from cutext.stages.runtime.compute import StepClock
from cutext.stages.text.count import run_lengths
from cutext.stages.text.sort import sort_pairs
from cutext.stages.text.tokenize import (
    FINAL_SIGMA,
    SIGMA,
    TokenizerConfig,
    _nfc_cpu,
    cudf_string_buffers,
    normalize_gpu,
    stem_words,
)

log = logging.getLogger(__name__)

__all__ = ["scan_arrays", "scan_partition"]



# ----------------------------------------------------------------------------- tokenize + encode

def _gather_strings(data, starts, ends) -> pa.LargeStringArray:
    """The byte ranges ``data[starts[k]:ends[k]]`` as a host string array (a few strings: uniques)."""
    xp = _xp(data)
    lens = ends - starts
    off = xp.zeros(len(starts) + 1, dtype=np.int64)
    off[1:] = xp.cumsum(lens)
    total = int(off[-1])
    j = xp.arange(total, dtype=np.int64)
    k = xp.searchsorted(off, j, side="right") - 1
    chars = data[starts[k] + (j - off[k])]
    return pa.LargeStringArray.from_buffers(len(starts), pa.py_buffer(to_host(off)),
                                            pa.py_buffer(to_host(chars)))


def _term_map(uniq: pa.LargeStringArray, cfg: TokenizerConfig):
    """Rules 3-5 on the unique terms: (final unique terms, int64 lut old code -> new code, -1 dropped).

    The length filter and the stopwords are Arrow kernels over the unique terms (code points
    as :func:`cutext.stages.text.tokenize.map_terms` counts them, exact string match), the stemmer
    (PyStemmer) runs on the survivors only; the result is ``map_terms``'s, term for term.
    """
    import pyarrow.compute as pc


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
    if cfg.stemmer is None:
        lut[keep] = np.arange(len(kept))
        return kept, lut
    stems = stem_words(kept.to_pylist(), cfg.stemmer)  # stems can merge terms
    enc = pc.dictionary_encode(pa.array(stems, type=pa.large_string()))
    lut[keep] = enc.indices.to_numpy()
    return enc.dictionary.cast(pa.large_string()), lut


def scan_arrays(data, offsets, cfg: TokenizerConfig):
    """Tokenize and count one partition's prepared text (after rules 1-2) without token strings.

    Parameters
    ----------
    data : uint8 array, numpy or cupy
        UTF-8 bytes of the rows (NFC, lowercased when the config says so).
    offsets : int64 array, shape (n_rows + 1,), same library
    cfg : TokenizerConfig

    Returns
    -------
    tuple or None
        ``(uniq, code, pos, tf, lengths)``: ``uniq`` a pyarrow LargeStringArray (U,) of the
        partition's distinct terms; ``code``, ``pos``, ``tf`` int32 arrays (P,) of the distinct
        (term, row) pairs sorted by (code, pos); ``lengths`` int64 (n_rows,) terms per row.
        None when two different tokens share a hash (the caller takes the exact string path).
    """
    xp = _xp(data)
    clock = StepClock(xp)
    n_rows = len(offsets) - 1
    blanked = blank_separators(data, offsets)
    starts, ends, rows = token_bounds(blanked, offsets)
    del blanked
    clock("scan: blank + token offsets")
    empty = (pa.array([], pa.large_string()), xp.zeros(0, np.int32), xp.zeros(0, np.int32),
             xp.zeros(0, np.int32), xp.zeros(n_rows, np.int64))
    if len(starts) == 0:
        return empty
    h = hash_tokens(data, starts, ends)
    clock("scan: hash")
    order = xp.argsort(h)
    hs = h[order]
    del h
    new = xp.empty(len(hs), dtype=bool)
    new[0] = True
    new[1:] = hs[1:] != hs[:-1]
    del hs
    group_first = xp.flatnonzero(new)          # position in sorted order of each group's first token
    rep = order[group_first]                   # token index of each group's representative
    code_sorted = xp.cumsum(new, dtype=np.int64) - 1
    del new, group_first
    codes = xp.empty(len(order), dtype=np.int64)
    codes[order] = code_sorted
    del order, code_sorted
    clock("scan: sort hashes, codes")
    if not bool(tokens_equal(data, starts, ends, rep[codes]).all()):
        return None
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
        uniq = _gather_strings(data, starts[rep[kept]], ends[rep[kept]])
        del n_cp, keep, kept
    else:
        uniq = _gather_strings(data, starts[rep], ends[rep])
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


def _prepare_host(text):
    """Rules 1-2 on host text (the CPU split's own steps): (data uint8, offsets int64)."""
    import pyarrow.compute as pc


    arr = pa.array(text, type=pa.large_string()) if not isinstance(text, (pa.Array, pa.ChunkedArray)) else text
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    arr = _nfc_cpu(pc.fill_null(arr.cast(pa.large_string()), ""))
    return arr


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
