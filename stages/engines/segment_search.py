"""Search of a segmented BM25 index segment by segment, the weights computed at query time (Lucene's
per-segment scorers over the collection statistics of the whole reader).

A :class:`SegmentSearch` holds, for each live segment of an :class:`~cutext.stages.engines.index_reader.IndexReader`,
the postings as read (term-major offsets, local doc numbers, tf: the segment reader's own arrays, never copied),
the global term id of each local term, and the length factor ``K_d`` of each document
(:func:`cutext.kernels.segment_search.length_factors`); the idf and ``w0`` of the global df are by global term id.
Only ``K_d``, the term ids and the idf depend on the other segments, so the search form of a refreshed commit is
O(documents + vocabulary + the new segments) to make, whatever the size of the unchanged segments.

A batch is scored on all segments in one call of :func:`cutext.kernels.segment_search.search_segments_cpu`: each
query's scores summed into one array over the global doc ids and its top k taken once, as the merged matrix's CPU
engine does (equal scores: the smaller doc id, so the earlier segment).  Every weight is the float32 a merged matrix
stores (:func:`cutext.kernels.postings.csr_weights`) and each document's score the same float32 sum, so the results
equal the merged matrix's CPU engine bit for bit.

A term's weights are computed once a commit and kept for the later batches (float32, in one array of a slot a
posting, each term's segment runs one after the other as a merged matrix's row, placed in the order the batches
first use the terms: the pages written are those used, up to 4 bytes a posting of the terms searched), so a term
scored again costs a read of a stored weight, as in the merged matrix's engine.  A batch computes those of its new terms
that two or more of its queries hold before scoring (``fill``), and those that one query holds while scoring it;
a term another batch is computing at the time is computed and not kept.  The index drops them when it merges its
matrix.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from cutext.kernels.segment_search import SegmentTable, length_factors, search_segments_cpu
from cutext.stages.engines import search as search_stage

__all__ = ["SegmentSearch"]


@dataclass
class _Kept:
    """The weights a commit's batches computed: ``state`` per global term (0 not kept, 1 being computed by a
    batch, 2 kept), ``slot`` where its runs begin in ``weights`` (the segments' runs one after the other, as a
    merged matrix's row), and ``end``, the first place not given (float32 ``weights``: pages exist once written)."""

    state: np.ndarray
    slot: np.ndarray
    weights: np.ndarray
    end: int = 0


class SegmentSearch:
    """The per-segment search form of a segmented commit (module docstring).

    Parameters
    ----------
    reader : cutext.stages.engines.index_reader.IndexReader
    fn : cutext.stages.text.bm25.WeightPartition
        The commit's one-field weight function (``norms="exact"``): idf, avgdl, variant, k1, b, delta.
    w0 : float32 array (V + 1,)
        Subtracted from every weight (bm25l / bm25+; zeros otherwise).
    previous : SegmentSearch, optional
        The form of an earlier commit of the index: the offsets of the live segments it shares (the same
        objects) are taken over.

    Attributes
    ----------
    parts : list of tuple
        Per segment with documents: ``(segment reader, offsets int64 (n_terms + 1,), ids int32 (n_terms,),
        K float64 (n_docs,), first global doc id)``; the segments' documents follow one another from 0 (``K`` is a
        view of one array over the global doc ids).
    n_docs : int
    n_postings : int
        Postings of all segments.
    scored : int
        Postings scored through this form so far (the index merges its matrix before a batch would take them
        past a multiple of ``n_postings``: :meth:`cutext.stages.engines.bm25_index.BM25Index.topk_start`).
    """

    def __init__(self, reader, fn, w0: np.ndarray, previous: "SegmentSearch | None" = None):
        mt = reader.terms
        old = {id(p[0].segment): p[1] for p in previous.parts} if previous is not None else {}
        self.idf = np.ascontiguousarray(fn.idf_t, np.float64)
        self.minus = np.ascontiguousarray(w0, np.float32) if np.any(w0) else None
        self.variant, self.k1, self.delta = fn.variant, fn.k1, fn.delta
        self.df = mt.df
        self.n_docs = int(mt.n_docs)
        self.parts = []
        for r, ids, base in zip(reader.segments, mt.term_ids, mt.doc_base[:-1]):
            sg = r.segment
            if not sg.n_docs:
                continue
            offsets = old.get(id(sg))
            if offsets is None:
                offsets = sg.offsets
            self.parts.append([r, offsets, np.ascontiguousarray(ids, np.int32), None, int(base)])
        ends = [p[4] + p[0].segment.n_docs for p in self.parts]
        self._base = np.array([0] + ends, np.int64)
        if ends and np.any(self._base[:-1] != [p[4] for p in self.parts]):
            raise ValueError(f"SegmentSearch: the segments' documents must follow one another from 0, got first "
                             f"ids {[p[4] for p in self.parts]}")
        lengths = np.concatenate([p[0].segment.lengths for p in self.parts]) if self.parts else np.zeros(0, np.int32)
        self._kd = length_factors(lengths, fn.avgdl, fn.variant, fn.k1, fn.b)  # by global doc id
        for p, lo, hi in zip(self.parts, self._base[:-1], self._base[1:]):
            p[3] = self._kd[lo:hi]
        self.parts = [tuple(p) for p in self.parts]
        self._table = SegmentTable([(o, ids, r.segment.doc, r.segment.tf) for r, o, ids, _, _ in self.parts])
        self.n_postings = int(mt.df.sum())
        self.scored = 0
        self._lock = threading.Lock()
        self.drop_weights()

    def drop_weights(self) -> None:
        """Forget the kept weights (:meth:`topk`), freeing their memory (the index's merged matrix replaces them)."""
        with self._lock:
            self._kept = _Kept(np.zeros(len(self.idf), np.int8), np.full(len(self.idf), -1, np.int64),
                               np.empty(sum(len(p[0].segment.doc) for p in self.parts), np.float32))

    def _plan(self, terms):
        """``(kept, mode, fill, claimed)`` of a batch of query terms ``terms`` (int32, one a query term): per query
        term 0 read its kept weights, 1 compute and keep them, 2 compute them (another batch keeps them); the
        new terms of two or more query terms computed first (``fill``); the terms this batch keeps, each given
        its place in the kept weights (after those kept before: the pages written are the ones used)."""
        with self._lock:
            kept = self._kept
            state = kept.state[terms]
            new = state == 0
            uniq, first, counts = np.unique(terms[new], return_index=True, return_counts=True)
            ends = kept.end + np.cumsum(self.df[uniq], dtype=np.int64)
            fits = ends <= len(kept.weights)  # a batch that failed leaves its places unused: the rest computed
            kept.slot[uniq[fits]] = ends[fits] - self.df[uniq[fits]]
            lo, kept.end = kept.end, int(ends[fits][-1]) if fits.any() else kept.end
            kept.state[uniq[fits]] = 1
        # the pages this batch writes, faulted in by this thread (a write a page): the kernels' threads faulting in
        # fresh pages at once took twice the time of the cold batches on 2 cores
        kept.weights[lo:kept.end:1024] = 0
        mode = np.where(state == 2, 0, 2).astype(np.int8)
        if len(uniq):
            at = np.flatnonzero(new)
            mode[at[np.isin(terms[at], uniq[fits])]] = 0  # the terms of fill: computed before the queries
            one = first[(counts == 1) & fits]
            mode[at[one]] = 1  # one query term: computed and kept while it is scored
        keep = uniq[fits]
        return kept, mode, keep[counts[fits] > 1].astype(np.int32), keep

    def postings(self, Q) -> int:
        """The postings the queries of ``Q`` score (those of their terms in every segment)."""
        return int(self.df[Q.indices].sum())

    def topk(self, Q, k: int, n_threads: int | None = None, doc_filter=None):
        """Top ``k`` of every row of a canonical query CSR ``Q`` (global term ids), among the documents of
        ``doc_filter`` (a :class:`cutext.stages.engines.search.DocFilter` over global doc ids) if given.

        Returns
        -------
        (doc, score, n) : int64 (nq, k) global doc ids, float32 (nq, k), int32 (nq,)
            As :meth:`cutext.stages.engines.search.SearchMatrix.topk` with ``engine="cpu"`` returns them.
        """
        k = search_stage.cap_k(k, self.n_docs)
        nq = Q.shape[0]
        if not self.parts:
            return np.full((nq, k), -1, np.int64), np.zeros((nq, k), np.float32), np.zeros(nq, np.int32)
        terms = np.ascontiguousarray(Q.indices, np.int32)
        kept, mode, fill, claimed = self._plan(terms)
        done = 0
        try:
            out = search_segments_cpu(self._table, self._base, self._kd, self.idf, self.minus, self.variant, self.k1,
                                      self.delta, Q.indptr, terms, Q.data, k, n_threads=n_threads,
                                      weights=kept.weights, mode=mode, at=kept.slot[terms], fill=fill,
                                      fill_at=kept.slot[fill],
                                      **(doc_filter.engine_args() if doc_filter is not None else {}))
            done = 2
        finally:  # kept only once every segment holds them; an error leaves them to a later batch
            with self._lock:
                kept.state[claimed] = done
        self.scored += self.postings(Q)
        return out
