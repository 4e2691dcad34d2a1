"""Term positions of a segmented index and the phrase / proximity queries answered from them.

Storage (``positions=True`` of the bm25 build; written and read by :mod:`cutext.stages.engines.segments`): a
segment's ``positions.parquet`` holds one int32 column ``pos`` with ``sum(tf)`` rows: the positions of every
posting in posting order (term-major, docs ascending within a term), ``tf`` of them a posting, the first
absolute and the others as gaps to the one before (Lucene's ``.pos`` file codes position deltas the same
way); no offsets are stored, since a posting's run starts at the prefix sum of ``tf``.  ``segment.json`` records
``"positions": true`` and the file's size and CRC32 like the others'.  A position counts the tokens of the split before
it in its document, so a token that stopwords or the length bounds dropped leaves a gap (Lucene's position increments,
:func:`cutext.stages.text.tokenize.token_positions`).

Queries: ``"a b c"`` is a phrase and ``"a b c"~N`` a proximity query with slop N, Lucene's
``PhraseQuery`` semantics (``SloppyPhraseMatcher``): with each phrase term's document position ``p_j``
shifted by its position in the analysed phrase ``q_j``, a document matches when some choice of one
occurrence a term has ``max_j (p_j - q_j) - min_j (p_j - q_j) <= N``; a term repeated in the phrase takes
distinct occurrences.  N = 0 is the exact phrase; swapping two adjacent terms needs N = 2.
:func:`match_phrase` answers it on the host in one pass over the documents that hold every phrase term.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numba
import numpy as np

from cutext.stages.engines.segments import (
    live_positions,
    live_segment,
    merge_positions,
    merge_segments,
    read_positions,
    read_segment,
    run_starts,
)

__all__ = ["MAX_SLOP", "Phrase", "parse_query", "parse_queries", "PhraseIndex", "match_phrase", "no_positions_message",
           "read_live_positions"]


def no_positions_message(path) -> str:
    """The error of a phrase query on an index without positions, naming the keyword that stores them."""
    return (f"{path}: this index stores no term positions, so it cannot answer a phrase query (\"...\" or "
            "\"...\"~N); rebuild it with positions=True (python -m cutext.pipelines bm25 ... --positions)")


# ----------------------------------------------------------------------------- queries

@dataclass(frozen=True)
class Phrase:
    """A quoted phrase of a query: its text (inside the quotes) and its slop (``~N``; 0 without)."""

    text: str
    slop: int = 0


_SLOP = re.compile(r"~(\d+)(?![\w.~])")
MAX_SLOP = 2**31 - 1  # Lucene's slop is a Java int; positions are int32, so no larger slop matches more


def _clip(text: str, n: int = 200) -> str:
    return text if len(text) <= n else text[:n - 3] + "..."


def parse_query(text: str) -> tuple[str, list]:
    """Split a query string into its BM25 text and its phrases.

    ``"..."`` is a phrase, ``"..."~N`` (N a non-negative integer, right after the closing quote) a proximity
    query; everything else is ordinary terms.  The BM25 text is the query with each phrase's quotes and
    ``~N`` removed (its words stay BM25 terms of the query).  N is at most :data:`MAX_SLOP`.

    Returns
    -------
    (str, list of Phrase)

    Raises
    ------
    ValueError
        An odd number of ``"`` (an unbalanced quote), a ``~`` after a closing quote that is not followed
        by a non-negative integer (``~``, ``~-1``, ``~1.5``, ``~x``), or a slop above :data:`MAX_SLOP`
        (2**31 - 1, Lucene's: its slop is an int).
    """
    if text.count('"') % 2:
        raise ValueError(f"query {text!r}: unbalanced quote (an odd number of \"); a phrase is \"...\" or \"...\"~N")
    parts, phrases, i = [], [], 0
    while True:
        a = text.find('"', i)
        if a < 0:
            parts.append(text[i:])
            break
        b = text.find('"', a + 1)
        parts.append(text[i:a])
        inner, slop, i = text[a + 1:b], 0, b + 1
        if text.startswith("~", i):
            m = _SLOP.match(text, i)
            if m is None:
                bad = re.match(r"~\S*", text[i:]).group(0)
                raise ValueError(f"query {text!r}: bad proximity {bad!r} after a phrase; write \"...\"~N with N a "
                                 "non-negative integer (Lucene's slop)")
            digits, i = m.group(1).lstrip("0") or "0", m.end()
            # the length first: Python refuses int() of thousands of digits
            if len(digits) > len(str(MAX_SLOP)) or int(digits) > MAX_SLOP:
                raise ValueError(f"query {_clip(text)!r}: slop ~{_clip(digits, 30)} is past {MAX_SLOP:,} (2**31 - 1, "
                                 "Lucene's bound: a slop is a 32-bit int); any slop at least a document's length "
                                 "already matches the words anywhere in it")
            slop = int(digits)
        phrases.append(Phrase(inner, slop))
        parts.append(f" {inner} ")
    return "".join(parts), phrases


def parse_queries(texts: list) -> tuple[list, list] | None:
    """:func:`parse_query` of every query: ``(bm25 texts, phrases of each query)``; None when no query holds a
    quote (the plain path, no cost).  Raises as :func:`parse_query`, the message naming the query."""
    if not any('"' in t for t in texts):
        return None
    out = [parse_query(t) if '"' in t else (t, []) for t in texts]
    return [t for t, _ in out], [p for _, p in out]


@dataclass
class PhraseIndex:
    """Postings with positions of a whole index, global doc ids, for phrase matching.

    indptr : int64 (V + 2,), a term id's postings ``[indptr[t], indptr[t + 1])`` (term ids of the index's
        vocabulary, 1-based as in its matrix; row 0 empty)
    doc : int32/int64 (n_postings,), ascending within a term
    starts : int64 (n_postings + 1,), a posting's positions ``pos[starts[i]:starts[i + 1]]``
    pos : int32 (sum tf,), ascending within a posting
    """

    indptr: np.ndarray
    doc: np.ndarray
    starts: np.ndarray
    pos: np.ndarray

    @classmethod
    def load(cls, folders: list, deletes: list) -> "PhraseIndex":
        """Read the segments' postings and positions (deleted documents dropped) and merge them as the
        index's load does (:func:`cutext.stages.engines.segments.merge_segments`)."""
        segs, pos = [], []
        for f, d in zip(folders, deletes):
            seg, p = read_live_positions(f, d)
            segs.append(live_segment(seg, d))
            pos.append(p)
        merged = merge_segments(segs)
        positions = merge_positions(segs, pos, merged)
        return cls(merged.indptr, merged.doc, run_starts(merged.tf.astype(np.int64)), positions)


def read_live_positions(folder, deleted) -> tuple:
    """A segment read whole and the term positions of its live postings (``deleted``: local doc numbers),
    in the order :func:`cutext.stages.engines.segments.live_segment` keeps its postings.

    Returns
    -------
    (Segment, numpy int32 array)
        The segment as written (deletions not applied) and the positions of its live postings.
    """
    seg = read_segment(folder, verify=False)
    p = read_positions(folder, seg.tf)
    d = np.unique(np.asarray(deleted, np.int64))
    if len(d):
        live = np.ones(seg.n_docs, bool)
        live[d] = False
        p = live_positions(p, seg.tf, live[seg.doc])
    return seg, p


def match_phrase(index: PhraseIndex, term_ids: np.ndarray, offsets: np.ndarray, slop: int) -> np.ndarray:
    """The documents that hold a phrase within ``slop`` (module docstring: Lucene's sloppy phrase semantics).

    Parameters
    ----------
    index : PhraseIndex
    term_ids : int array (m,), the phrase's terms in phrase order (0 or less: a term not in the vocabulary)
    offsets : int array (m,), their positions in the analysed phrase (ascending; gaps where stopwords were)
    slop : int >= 0

    Returns
    -------
    numpy int64 array, the matching doc ids ascending (empty when a term is not in the index).
    """
    term_ids = np.asarray(term_ids, np.int64)
    if not len(term_ids) or (term_ids <= 0).any():
        return np.zeros(0, np.int64)
    uniq = np.unique(term_ids)
    cand = None
    for t in uniq:  # documents holding every term of the phrase (rarest first would cut the work, not the result)
        d = index.doc[index.indptr[t]:index.indptr[t + 1]].astype(np.int64)
        cand = d if cand is None else np.intersect1d(cand, d, assume_unique=True)
    if len(term_ids) == 1 or not len(cand):
        return cand
    # each slot's posting of each candidate: docs ascend within a term
    pidx = np.empty((len(term_ids), len(cand)), np.int64)
    for j, t in enumerate(term_ids):
        lo = index.indptr[t]
        pidx[j] = lo + np.searchsorted(index.doc[lo:index.indptr[t + 1]], cand)
    prev = np.full(len(term_ids), -1, np.int64)  # the slot before of the same term (distinct occurrences)
    for j in range(len(term_ids)):
        same = np.flatnonzero(term_ids[:j] == term_ids[j])
        prev[j] = same[-1] if len(same) else -1
    hit = np.zeros(len(cand), np.bool_)
    _match(pidx, index.starts, index.pos, np.asarray(offsets, np.int64), prev, int(slop), hit)
    return cand[hit]


@numba.njit(cache=True, nogil=True)
def _match(pidx, starts, pos, offsets, prev, slop, hit):
    """``hit[c]``: candidate ``c`` has, for some window start ``s`` (every shifted position ``p - q_j`` is
    tried), an occurrence of each slot ``j`` in ``[s + q_j, s + q_j + slop]``, distinct for a repeated term:
    the slots of one term take, in phrase order, the first occurrence past the previous one's (greedy is
    exact for these intervals, sorted by both ends)."""
    m, n = pidx.shape
    chosen = np.empty(m, np.int64)
    for c in range(n):
        found = False
        for j0 in range(m):
            p0 = pidx[j0, c]
            for r in range(starts[p0], starts[p0 + 1]):
                s = pos[r] - offsets[j0]
                ok = True
                for j in range(m):
                    p = pidx[j, c]
                    lo = s + offsets[j]
                    if prev[j] >= 0 and chosen[prev[j]] + 1 > lo:
                        lo = chosen[prev[j]] + 1
                    i = starts[p] + np.searchsorted(pos[starts[p]:starts[p + 1]], lo)  # first >= lo in the run
                    if i == starts[p + 1] or pos[i] > s + offsets[j] + slop:
                        ok = False
                        break
                    chosen[j] = pos[i]
                if ok:
                    found = True
                    break
            if found:
                break
        hit[c] = found
