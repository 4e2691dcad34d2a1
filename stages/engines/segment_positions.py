"""The term positions of a segment's postings (``positions.parquet``): computed from its texts, written,
read, and kept or moved as :mod:`cutext.stages.engines.segments` keeps or merges the postings.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cutext.stages.engines.segment_format import COMPRESSION, POSITIONS, _read_parquet
from cutext.stages.runtime import artifacts as art
from cutext.stages.text.tokenize import TokenizerConfig, token_positions


def segment_positions(terms: pa.Array, df: np.ndarray, doc: np.ndarray, tf: np.ndarray, texts,
                      cfg: TokenizerConfig) -> np.ndarray:
    """The positions of a segment's postings, from its documents' texts tokenized again on the host.

    Parameters
    ----------
    terms : pyarrow string array (n_terms,), the segment's sorted terms
    df : int array (n_terms,), postings a term
    doc, tf : int arrays (n_postings,), the segment's term-major postings (docs ascending within a term)
    texts : pyarrow string array (n_docs,), the segment's texts (local doc order)
    cfg : TokenizerConfig, the index's

    Returns
    -------
    numpy int32 array (sum(tf),)
        Absolute positions, posting by posting, ascending within a posting.

    Raises
    ------
    RuntimeError
        The host tokenizer's postings or counts differ from the segment's (the texts are not those the
        segment counted), naming the first posting that differs.
    """
    tokens, row, pos = token_positions(texts, cfg)
    tid = pc.index_in(tokens, value_set=terms.cast(pa.large_string())).fill_null(-1).to_numpy()
    n_docs = max(len(texts), 1)
    if (tid < 0).any():
        raise RuntimeError(f"positions: token {tokens[int(np.flatnonzero(tid < 0)[0])].as_py()!r} of the texts "
                           "is not a term of the segment; the index's counts and its texts do not match")
    key = tid.astype(np.int64) * n_docs + row
    order = np.argsort(key, kind="stable")  # by term, then doc; a doc's positions stay ascending
    key, pos = key[order], pos[order]
    first = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]])) if len(key) else np.zeros(0, np.int64)
    got, counts = key[first], np.diff(np.concatenate([first, [len(key)]]))
    want = np.repeat(np.arange(len(df), dtype=np.int64), np.asarray(df, np.int64)) * n_docs + np.asarray(doc)
    tf = np.asarray(tf)
    if len(want) != len(got) or not np.array_equal(want, got) or not np.array_equal(counts, tf):
        n = min(len(want), len(got))
        diff = np.flatnonzero((want[:n] != got[:n]) | (counts[:n] != tf[:n]))
        bad = int(diff[0]) if len(diff) else n
        raise RuntimeError(f"positions: the host tokenizer disagrees with the segment's postings at posting {bad} "
                           f"of {len(want)}; the index's counts and its texts do not match")
    return pos.astype(np.int32)


def run_starts(tf: np.ndarray) -> np.ndarray:
    """int64 (n + 1,): where each posting's run of positions starts (prefix sum of ``tf``)."""
    out = np.zeros(len(tf) + 1, np.int64)
    np.cumsum(tf, out=out[1:])
    return out


def write_positions(folder, positions: np.ndarray, tf: np.ndarray) -> None:
    """``folder/positions.parquet`` (module docstring): ``positions`` (absolute, a posting's run ascending)
    gap-coded within each posting, written under a temporary name and renamed.  The caller seals
    ``segment.json``.

    Raises
    ------
    ValueError
        ``len(positions) != sum(tf)``, or a posting's positions that are negative or not strictly ascending.
    """
    folder = Path(folder)
    positions = np.asarray(positions, np.int64)
    starts = run_starts(np.asarray(tf, np.int64))
    if len(positions) != starts[-1]:
        raise ValueError(f"positions: {len(positions)} positions for postings whose tf sums to {int(starts[-1])}")
    gaps = np.diff(positions, prepend=0)
    gaps[starts[:-1][np.asarray(tf) > 0]] = positions[starts[:-1][np.asarray(tf) > 0]]  # a run starts absolute
    if len(gaps) and (gaps.min() < 0 or (np.delete(gaps, starts[:-1]) <= 0).any()):
        raise ValueError("positions must be >= 0 and strictly ascending within a posting")
    tmp = folder / f".{POSITIONS}.tmp"
    # dictionary (RLE / bit-packed indices): most gaps are small numbers; measured in docs/decisions.md
    pq.write_table(pa.table({"pos": gaps.astype(np.int32)}), tmp, use_dictionary=["pos"], compression=COMPRESSION,
                   write_statistics=False)
    os.replace(tmp, folder / POSITIONS)


def read_positions(folder, tf: np.ndarray) -> np.ndarray:
    """The absolute positions of a segment's postings (int32, ``sum(tf)``), ``tf`` the segment's.

    Raises
    ------
    ArtifactNotFoundError (ArtifactError, FileNotFoundError)
        No ``positions.parquet``.
    ArtifactError (ValueError)
        Unreadable Parquet, another column, or a row count other than ``sum(tf)``, or negative gaps.
    """
    f = Path(folder) / POSITIONS
    t = _read_parquet(Path(folder), POSITIONS)  # the column, its type, no nulls
    starts = run_starts(np.asarray(tf, np.int64))
    if t.num_rows != starts[-1]:
        raise art.ArtifactError(f"{f}: {t.num_rows} positions; expected {int(starts[-1])} (the sum of tf)")
    gaps = t.column("pos").to_numpy().astype(np.int64)
    if len(gaps) and gaps.min() < 0:
        raise art.ArtifactError(f"{f}: negative position gaps")
    # absolute positions: a prefix sum restarted at every posting's run
    total = np.cumsum(gaps)
    base = np.repeat(total[starts[:-1]] - gaps[starts[:-1]], np.asarray(tf, np.int64)) if len(gaps) else total
    return (total - base).astype(np.int32)


def live_positions(positions: np.ndarray, tf: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The positions of the postings ``keep`` (bool (n_postings,)) of a segment, as :func:`live_segment`
    keeps its postings."""
    return positions[np.repeat(np.asarray(keep, bool), np.asarray(tf, np.int64))]


def merge_positions(segs, positions: list, merged) -> np.ndarray:
    """The positions of :func:`cutext.stages.engines.segments.merge_segments`'s postings: each segment's runs
    moved to where the merge placed its postings (the same counting scatter).

    Parameters
    ----------
    segs : list of Segment (with postings), in the merge's order
    positions : list of int32 arrays, ``sum(tf)`` a segment
    merged : MergedSegments of ``segs``

    Returns
    -------
    numpy int32 array (sum of merged tf,)
    """
    mt = merged.terms
    out_starts = run_starts(merged.tf.astype(np.int64))
    out = np.empty(int(out_starts[-1]), np.int32)
    fill = merged.indptr[:-1].copy()
    for s, g, pos in zip(segs, mt.term_ids, positions):
        if not s.n_postings:
            continue
        start = fill[g]
        fill[g] += s.df
        dest = np.repeat(start - s.offsets[:-1], s.df) + np.arange(s.n_postings, dtype=np.int64)
        tf = s.tf.astype(np.int64)
        src = run_starts(tf)
        out[np.repeat(out_starts[dest] - src[:-1], tf) + np.arange(len(pos), dtype=np.int64)] = pos
    return out
