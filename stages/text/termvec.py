"""Term-vector stage for stream clustering (Szasz and Samet section 1 and 4.1): TF-ICF / TF-IDF top-k vectors.

A document's term vector keeps its ``top_k`` largest weights (ties: smaller term id first), is
L2-normalized, and is stored sorted by term id as fixed-width arrays:

* ``idx``  int32 (n_docs, top_k): term ids, padded with ``-1``;
* ``w``    float64 (n_docs, top_k): normalized weights, padded with 0;
* ``length`` int32 (n_docs,): terms kept (0 for a document without a weighted term);
* ``norm`` float64 (n_docs,): the magnitude before normalization (Szasz and Samet keeps it to
  de-normalize when adding a document to a cluster).

Weights (natural logarithms)
----------------------------
* ``weighting="tficf"`` (default; Reed et al. 2006, the TF-ICF of Szasz and Samet's ref. [13]):
  ``w = ln(1 + tf) * ln(1 + N / df)``.
* ``weighting="tfidf"``: ``w = tf * ln(N / df)``; terms in every document get weight 0.

``N`` and ``df`` come from a *reference*: the clustered corpus itself (``idf_from=None``, what
the paper's experiments do with the whole PubMed set), another corpus or a BM25 index
(``idf_from=path``; terms the reference lacks get no weight), or the *stream so far*
(``idf_from="stream"``): for the document at stream position ``p``, ``N = p + 1`` and ``df`` counts
the documents at positions ``<= p`` that hold the term (so it is always >= 1).  Terms of weight 0
are dropped.  All of it runs on the host in float64 with numpy/numba, so both backends cluster
identical vectors.
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

import cutext.kernels._numba_cache  # noqa: F401  # before the decorators: it places and stamps their cache
from cutext.stages.runtime.reprs import short_repr

WEIGHTINGS = ("tficf", "tfidf")


@dataclass
class TermVectors:
    """Fixed-width top-k term vectors (see the module docstring for the layout)."""

    idx: np.ndarray
    w: np.ndarray
    length: np.ndarray
    norm: np.ndarray

    @property
    def top_k(self) -> int:
        return self.idx.shape[1]

    def __len__(self) -> int:
        return self.idx.shape[0]

    def __repr__(self) -> str:
        return short_repr(self, [], docs=len(self), top_k=self.top_k, terms=int(self.length.sum()))

    def take(self, sel) -> "TermVectors":
        """Rows ``sel`` (slice, int array or boolean mask), as a new TermVectors."""
        return TermVectors(np.ascontiguousarray(self.idx[sel]), np.ascontiguousarray(self.w[sel]),
                           np.ascontiguousarray(self.length[sel]), np.ascontiguousarray(self.norm[sel]))

    @classmethod
    def concat(cls, parts) -> "TermVectors":
        parts = list(parts)
        return cls(np.concatenate([p.idx for p in parts]), np.concatenate([p.w for p in parts]),
                   np.concatenate([p.length for p in parts]), np.concatenate([p.norm for p in parts]))

    def validate(self) -> None:
        """Check shapes, dtypes, order and normalization.

        Raises
        ------
        ValueError
            Naming the first bad document.
        """
        n, k = self.idx.shape
        if self.idx.dtype != np.int32 or self.w.dtype != np.float64 or self.w.shape != (n, k) \
                or self.length.shape != (n,) or self.norm.shape != (n,):
            raise ValueError("term vectors need idx int32 (n, k), w float64 (n, k), length (n,), norm (n,)")
        bad = _first_bad(self.idx, self.w, self.length.astype(np.int64))
        if bad >= 0:
            raise ValueError(f"term vector of document {bad} is not sorted by term id, has non-positive "
                             f"weights, bad padding, or is not L2-normalized")


@numba.njit(cache=True, nogil=True)
def _first_bad(idx, w, length):
    for j in range(idx.shape[0]):
        L = length[j]
        if L < 0 or L > idx.shape[1]:
            return j
        ss = 0.0
        for p in range(L):
            if w[j, p] <= 0.0 or idx[j, p] < 0 or (p > 0 and idx[j, p] <= idx[j, p - 1]):
                return j
            ss += w[j, p] * w[j, p]
        for p in range(L, idx.shape[1]):
            if idx[j, p] != -1 or w[j, p] != 0.0:
                return j
        if L > 0 and abs(ss - 1.0) > 1e-9:
            return j
    return -1


@numba.njit(cache=True, nogil=True)
def _top_k(offsets, terms, weights, K, out_idx, out_w, out_len, out_norm):
    for d in range(offsets.shape[0] - 1):
        a = offsets[d]
        b = offsets[d + 1]
        m = 0
        for p in range(a, b):
            if weights[p] > 0.0:
                m += 1
        t = np.empty(m, np.int32)
        x = np.empty(m, np.float64)
        q = 0
        for p in range(a, b):
            if weights[p] > 0.0:
                t[q] = terms[p]
                x[q] = weights[p]
                q += 1
        if m > K:
            # larger weight first, then smaller term id (stable sort of a term-ordered segment)
            order = np.argsort(-x, kind="mergesort")
            keep = np.sort(order[:K])
            n = K
        else:
            keep = np.arange(m)
            n = m
        ss = 0.0
        for p in range(n):
            ss = ss + x[keep[p]] * x[keep[p]]
        norm = np.sqrt(ss)
        for p in range(n):
            out_idx[d, p] = t[keep[p]]
            out_w[d, p] = x[keep[p]] / norm
        out_len[d] = n
        out_norm[d] = norm if n > 0 else 0.0


def weight_pairs(tf, df, N, weighting: str) -> np.ndarray:
    """Weights of (document, term) pairs: float64, same shape as ``tf`` (0 where ``df == 0``)."""
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")
    tf = np.asarray(tf, dtype=np.float64)
    df = np.asarray(df, dtype=np.float64)
    N = np.asarray(N, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        if weighting == "tficf":
            w = np.log1p(tf) * np.log1p(N / df)
        else:
            w = tf * np.log(N / df)
    w[~(df > 0)] = 0.0
    return np.where(np.isfinite(w), w, 0.0)


def term_vectors(doc_pos, term_id, tf, n_docs: int, top_k: int, *, weighting: str = "tficf",
                 df=None, n_ref: int | None = None, stream: bool = False, df_prior=None, n_prior: int = 0):
    """Top-k L2-normalized term vectors of documents given as (document, term, tf) triples.

    Parameters
    ----------
    doc_pos : int64 array (P,)
        Position of the pair's document in the stream, ``0 .. n_docs-1``.
    term_id : int array (P,)
        Term ids (``>= 1``); a (document, term) pair appears once.
    tf : int array (P,)
        Term frequencies.
    n_docs : int
    top_k : int
        Terms kept per document (Szasz and Samet: 35 to 60).
    weighting : {"tficf", "tfidf"}
    df : int array (V + 1,), optional
        Reference document frequencies by term id (fixed IDF), with ``n_ref`` documents.
    stream : bool
        IDF from the stream so far instead: ``df_prior`` (V + 1,) document frequencies and
        ``n_prior`` documents seen before this block (both default to an empty history).

    Returns
    -------
    TermVectors
        In stream-position order.

    Raises
    ------
    ValueError
        ``top_k < 1``, a position outside ``0 .. n_docs-1``, a bad weighting, or no IDF source.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    doc_pos = np.asarray(doc_pos, dtype=np.int64)
    term_id = np.asarray(term_id, dtype=np.int64)
    tf = np.asarray(tf, dtype=np.int64)
    if len(doc_pos) and (doc_pos.min() < 0 or doc_pos.max() >= n_docs):
        raise ValueError("document positions must be in [0, n_docs)")
    if stream:
        V1 = int(term_id.max()) + 1 if len(term_id) else 1
        prior = np.zeros(V1, np.int64)
        if df_prior is not None:
            dp = np.asarray(df_prior, dtype=np.int64)[:V1]
            prior[:len(dp)] = dp
        order = np.lexsort((doc_pos, term_id))
        t_sorted = term_id[order]
        start = np.ones(len(order), bool)
        start[1:] = t_sorted[1:] != t_sorted[:-1]
        first = np.maximum.accumulate(np.where(start, np.arange(len(order)), 0))
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order)) - first + 1
        df_pair = prior[term_id] + rank
        N_pair = n_prior + doc_pos + 1
    else:
        if df is None or n_ref is None:
            raise ValueError("term_vectors needs df and n_ref (a fixed IDF) or stream=True")
        df = np.asarray(df, dtype=np.int64)
        known = term_id < len(df)
        df_pair = np.zeros(len(term_id), np.int64)
        df_pair[known] = df[term_id[known]]
        N_pair = np.full(len(term_id), n_ref, np.int64)
    w = weight_pairs(tf, df_pair, N_pair, weighting)
    order = np.lexsort((term_id, doc_pos))
    pos_sorted = doc_pos[order]
    offsets = np.searchsorted(pos_sorted, np.arange(n_docs + 1)).astype(np.int64)
    out_idx = np.full((n_docs, top_k), -1, np.int32)
    out_w = np.zeros((n_docs, top_k), np.float64)
    out_len = np.zeros(n_docs, np.int32)
    out_norm = np.zeros(n_docs, np.float64)
    _top_k(offsets, term_id[order].astype(np.int32), w[order], top_k, out_idx, out_w, out_len, out_norm)
    return TermVectors(out_idx, out_w, out_len, out_norm)


def stream_df_update(df_prior, term_id, V: int) -> np.ndarray:
    """Document frequencies after a block: ``df_prior`` (grown to V + 1) plus one per (document, term) pair."""
    out = np.zeros(V + 1, np.int64)
    if df_prior is not None:
        out[:len(df_prior)] = df_prior
    if len(term_id):
        out += np.bincount(np.asarray(term_id, np.int64), minlength=V + 1)[:V + 1]
    return out


def count_pairs(doc_pos, term_id):
    """(document, term) -> tf for token-level rows: returns ``(doc_pos, term_id, tf)`` unique pairs."""
    doc_pos = np.asarray(doc_pos, dtype=np.int64)
    term_id = np.asarray(term_id, dtype=np.int64)
    if len(doc_pos) == 0:
        z = np.zeros(0, np.int64)
        return z, z, z
    span = int(term_id.max()) + 1
    key = doc_pos * span + term_id
    uk, tf = np.unique(key, return_counts=True)
    return uk // span, uk % span, tf.astype(np.int64)


def nearest_similarities(tv: TermVectors) -> np.ndarray:
    """Every document's largest cosine similarity with another document of ``tv`` (the nearest neighbour).

    The vectors are L2-normalized, so the similarity of two documents is the dot product of their top-k
    weights (Szasz and Samet Eq. 2).  Exact, by a sparse product of the n x n similarities (for samples:
    a thousand documents take milliseconds).

    Parameters
    ----------
    tv : TermVectors
        n documents; those without a weighted term have similarity 0 with every other.

    Returns
    -------
    float64 (n,)
        In [0, 1]; 0 for a document that shares no term with another (and for n = 1).
    """
    import scipy.sparse as sp

    n, k = tv.idx.shape
    if n == 0:
        return np.zeros(0, np.float64)
    mask = tv.idx >= 0
    rows = np.repeat(np.arange(n), k)[mask.ravel()]
    X = sp.csr_matrix((tv.w[mask], (rows, tv.idx[mask].astype(np.int64))), shape=(n, int(tv.idx.max()) + 1))
    S = (X @ X.T).tocsr()
    S.setdiag(0.0)
    S.eliminate_zeros()
    best = np.asarray(S.max(axis=1).todense()).ravel() if S.nnz else np.zeros(n)
    return np.clip(best, 0.0, 1.0)
