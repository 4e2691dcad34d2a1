"""Online clustering of a document stream (Szasz and Samet): cluster state, engines, :class:`StreamClusterer`.

Engines (all give identical assignments; see :mod:`cutext.kernels.cluster_ref` for the rules):

* ``"reference"`` -- Algorithm 1: candidates through the term -> clusters inverted index, numba
  (the CPU backend and the oracle).
* ``"brute"`` -- Algorithm 1 comparing every cluster (a test oracle for the inverted index).
* ``"ellpack"`` -- the GPU design of section 4.2: the cluster matrix in column-major ELLPACK,
  similarities of a document with every row and a block-local max (:mod:`cutext.kernels.ellpack`),
  on cupy arrays (``backend="gpu"``) or on its numba CPU twin (``backend="cpu"``).  Single documents
  (``batch_size=1``) on one device without the candidate pass are clustered a whole batch in one launch
  (:func:`cutext.kernels.ellpack.ellpack_sequential`: scoring, decision and update on the device, the
  host replaying the decisions).  Otherwise cluster updates run on the host (Alg. 2) and reach the
  device through the update buffer that the next similarity kernel writes into the matrix (Alg. 3),
  or, in micro-batch mode (``batch_size > 1``), through one scatter of the changed rows per batch.  Micro-batches keep
  the sequential semantics exactly (:func:`cutext.kernels.cluster_ref.resolve_batch`).  Rows can be
  partitioned across several GPUs (``devices=[0, 1, ...]``; cluster ``g`` lives on device
  ``g % n`` as row ``g // n``) with a global max on the host (paper section 6).
  Beyond the paper, ``candidates=`` scores only the rows that share a term with the document,
  through an inverted index kept on the device (:class:`cutext.kernels.ellpack.PostingIndex`,
  :func:`cutext.kernels.ellpack.candidate_best`); same assignments and similarities.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from cutext.kernels import cluster_ref as ref
from cutext.kernels import ellpack
from cutext.kernels.backend import ARRAY_STACK, resolve_backend
from cutext.stages.runtime import artifacts as art
from cutext.stages.runtime.output import atomic_directory, write_json
from cutext.stages.runtime.params import count, number
from cutext.stages.text.termvec import WEIGHTINGS, TermVectors, count_pairs, stream_df_update, term_vectors
from cutext.stages.text.tokenize import TokenizerConfig, tokenize_texts

METHODS = ("reference", "brute", "ellpack")
MAX_TOP_K = ellpack.MAX_K  # terms per document and cluster: the ELLPACK rows (and every engine) hold at most this
CANDIDATES = ("auto", True, False)
STATE_VERSION = 1
# T of the clusterer and the cluster pipeline: the best chance-corrected NMI against the labels of 20 Newsgroups and
# Reuters-21578 among 0.02 .. 0.6 (docs/decisions.md); Szasz and Samet's T = 0.6 leaves nearly one cluster a document
DEFAULT_THRESHOLD = 0.05
# candidates="auto": the candidate pass for micro-batches (more than one document) when there are at
# least AUTO_MIN_CLUSTERS clusters and the batch's documents have, on average, fewer than
# n_clusters / AUTO_WALK_FACTOR posting entries.  Measured on one H200 (benchmarks/cluster.py, T=0.6,
# 20 Newsgroups + Reuters, whose documents walk about 22 % of the clusters): batch 32 at 100 k / 1 M
# clusters 0.024 / 0.085 ms per document against 0.031 / 0.131 for every row; batch 32 at 10 k and
# batch 1 at any size were not faster (see docs/decisions.md).
AUTO_MIN_CLUSTERS = 65536
AUTO_WALK_FACTOR = 4


def _grown(a: np.ndarray, rows: int, fill) -> np.ndarray:
    """A copy of ``a`` with ``rows`` rows (same dtype and trailing shape), new rows set to ``fill``."""
    out = np.full((rows,) + a.shape[1:], fill, a.dtype)
    out[:a.shape[0]] = a
    return out


class ClusterState:
    """Host copy of every cluster: row-major top-k vectors, magnitudes and sizes.

    Attributes
    ----------
    idx : int32 (cap, K), w : float64 (cap, K), length : int32 (cap,), norm : float64 (cap,),
    size : int64 (cap,), n : int (clusters in use)
    """

    def __init__(self, K: int, capacity: int = 1024):
        self.K = int(K)
        self.n = 0
        cap = max(1, int(capacity))
        self.idx = np.full((cap, self.K), -1, np.int32)
        self.w = np.zeros((cap, self.K), np.float64)
        self.length = np.zeros(cap, np.int32)
        self.norm = np.zeros(cap, np.float64)
        self.size = np.zeros(cap, np.int64)

    @property
    def capacity(self) -> int:
        return self.idx.shape[0]

    def ensure(self, n_rows: int) -> None:
        """Room for ``n_rows`` clusters (capacity doubling)."""
        cap = self.capacity
        if n_rows <= cap:
            return
        while cap < n_rows:
            cap *= 2
        for name, fill in (("idx", -1), ("w", 0.0), ("length", 0), ("norm", 0.0), ("size", 0)):
            setattr(self, name, _grown(getattr(self, name), cap, fill))

    def to_table(self) -> pa.Table:
        n = self.n
        L = self.length[:n].astype(np.int64)
        mask = np.arange(self.K)[None, :] < L[:, None]
        offsets = np.concatenate([[0], np.cumsum(L)]).astype(np.int32)
        return pa.table({
            "cluster_id": pa.array(np.arange(n, dtype=np.int64)),
            "size": pa.array(self.size[:n]),
            "norm": pa.array(self.norm[:n]),
            "term_ids": pa.ListArray.from_arrays(pa.array(offsets), pa.array(self.idx[:n][mask])),
            "weights": pa.ListArray.from_arrays(pa.array(offsets), pa.array(self.w[:n][mask])),
        })

    @classmethod
    def from_table(cls, table: pa.Table, K: int) -> "ClusterState":
        n = table.num_rows
        st = cls(K, max(1024, n))
        st.n = n
        if n == 0:
            return st
        ids = table.column("cluster_id").to_numpy()
        if not np.array_equal(ids, np.arange(n)):
            raise ValueError("cluster state: cluster ids must be 0..n-1 in order")
        st.size[:n] = table.column("size").to_numpy()
        st.norm[:n] = table.column("norm").to_numpy()
        terms = table.column("term_ids").combine_chunks()
        weights = table.column("weights").combine_chunks()
        L = np.diff(terms.offsets.to_numpy())
        if (L > K).any():
            raise ValueError(f"cluster state: a cluster has more than top_k={K} terms")
        st.length[:n] = L
        mask = np.arange(K)[None, :] < L[:, None]
        st.idx[:n][mask] = terms.flatten().to_numpy()
        st.w[:n][mask] = weights.flatten().to_numpy()
        return st


class _Result:
    def __init__(self, n):
        self.cluster = np.empty(n, np.int64)
        self.sim = np.empty(n, np.float64)
        self.new = np.empty(n, np.bool_)


class ReferenceEngine:
    """Algorithm 1 on the CPU (numba), with the inverted index or brute force."""

    def __init__(self, state: ClusterState, brute: bool = False):
        self.state = state
        self.brute = brute
        self.head = np.full(1024, -1, np.int64)
        self.plen = np.zeros(1024, np.int64)
        self.nxt = np.zeros(0, np.int64)
        self.pc = np.zeros(0, np.int32)
        self.n_pool = 0
        self.stamp = np.full(state.capacity, -1, np.int64)
        self.stamp_next = 0
        if state.n and not brute:
            self._ensure_terms(int(state.idx[:state.n].max()) + 1)
            self._ensure_pool(int(state.length[:state.n].sum()))
            self.n_pool = ref.build_postings(state.idx, state.length, state.n, self.head, self.nxt, self.pc,
                                             self.plen)

    def _ensure_terms(self, v1):
        if v1 > len(self.head):
            size = max(v1, 2 * len(self.head))
            self.head = _grown(self.head, size, -1)
            self.plen = _grown(self.plen, size, 0)

    def _ensure_pool(self, need):
        if need > len(self.nxt):
            cap = max(need, 2 * len(self.nxt), 4096)
            self.nxt = _grown(self.nxt, cap, 0)
            self.pc = _grown(self.pc, cap, 0)

    def run(self, tv: TermVectors, threshold: float) -> _Result:
        st = self.state
        n = len(tv)
        res = _Result(n)
        st.ensure(st.n + n)
        if len(self.stamp) < st.capacity:
            self.stamp = _grown(self.stamp, st.capacity, -1)
        if n:
            self._ensure_terms(int(tv.idx.max()) + 1)
        self._ensure_pool(self.n_pool + int(tv.length.sum()))
        st.n, self.n_pool = ref.cluster_sequential(
            tv.idx, tv.w, tv.length, tv.norm, float(threshold), st.K,
            st.idx, st.w, st.length, st.norm, st.size, st.n,
            self.head, self.nxt, self.pc, self.plen, self.n_pool, self.stamp, self.stamp_next, self.brute,
            res.cluster, res.sim, res.new)
        self.stamp_next += n
        return res


class _Shard:
    """One row partition of the ELLPACK matrix on one device (or host memory for the CPU twin)."""

    def __init__(self, K, xp, device=None, index=False):
        self.K = K
        self.xp = xp
        self.device = device
        self.n_rows = 0
        self.stride = ellpack.BLOCK
        with self._on():
            self.idx, self.w = ellpack.empty_matrix(K, self.stride, xp)
        self.index = ellpack.PostingIndex(xp) if index else None

    def _on(self):
        if self.device is None:
            import contextlib

            return contextlib.nullcontext()
        import cupy

        return cupy.cuda.Device(self.device)

    def ensure(self, n_rows):
        self.reserve(n_rows)
        self.n_rows = max(self.n_rows, n_rows)

    def reserve(self, n_rows):
        """Row capacity for ``n_rows`` rows (doubling), the rows in use unchanged."""
        if n_rows > self.stride:
            new = self.stride
            while new < n_rows:
                new *= 2
            with self._on():
                self.idx, self.w = ellpack.grow(self.idx, self.w, self.K, self.stride, new)
            self.stride = new
            self.grown = getattr(self, "grown", 0) + 1


class EllpackEngine:
    """The GPU algorithm of Szasz and Samet (Alg. 2/3) on cupy, or on the numba twin of its kernel.

    Parameters
    ----------
    state : ClusterState
    gpu : bool
        cupy arrays and the CUDA kernels; else numpy arrays and the CPU twin.
    devices : list of int, optional
        GPUs holding row partitions (default: the current device).
    n_shards : int
        Row partitions of the CPU twin (to exercise the multi-GPU logic on the CPU).
    batch_size : int
        Documents scored together (1: one kernel per document with the fused update buffer).
    candidates : {"auto", True, False}
        Score only the rows that share a term with the document (the candidate pass through an
        inverted index on each device), every row (False, the paper's design), or choose per batch
        ("auto": the candidate pass for batches of more than one document when there are at least
        :data:`AUTO_MIN_CLUSTERS` clusters and the documents' posting lists hold on average fewer than
        ``n_clusters / AUTO_WALK_FACTOR`` entries; measured thresholds, see docs/decisions.md).
        The assignments and similarities are the same.

    Attributes
    ----------
    restarts : int
        Micro-batches cut short (a batch-start best cluster changed within the batch).
    kernel_calls : int
        Scoring passes, summed over the row partitions.
    candidate_batches, all_rows_batches : int
        Batches scored with the candidate pass / over every row.

    Raises
    ------
    ValueError
        ``candidates`` not one of "auto", True, False.
    """

    def __init__(self, state: ClusterState, gpu: bool = False, devices=None, n_shards: int = 1,
                 batch_size: int = 1, candidates="auto"):
        if not any(candidates is c or (isinstance(c, str) and candidates == c) for c in CANDIDATES):
            raise ValueError(f"candidates must be 'auto', True or False, got {candidates!r}")
        self.state = state
        self.gpu = gpu
        self.batch_size = max(1, int(batch_size))
        self.candidates = candidates
        # "auto" never takes the candidate pass for one document, so batch 1 keeps no index
        self._indexed = candidates is True or (candidates is not False and self.batch_size > 1)
        if gpu:
            import cupy

            xp = cupy
            devs = list(devices) if devices else [cupy.cuda.Device().id]
        else:
            xp = np
            devs = [None] * max(1, int(n_shards))
        self.xp = xp
        self.shards = [_Shard(state.K, xp, d, index=self._indexed) for d in devs]
        self.pending: list[int] = []
        self.mark = np.full(state.capacity, -1, np.int64)
        self.batch_stamp = 0
        self.restarts = 0
        self.kernel_calls = 0
        self.candidate_batches = 0
        self.all_rows_batches = 0
        self.sequential = True  # batch 1 on one partition: the one-launch stream (False: a scoring pass a document)
        if state.n:
            self.pending = list(range(state.n))
            self._flush()
            # the inverted index of a loaded state: every term of every cluster
            n = state.n
            L = state.length[:n].astype(np.int64)
            mask = np.arange(state.K)[None, :] < L[:, None]
            self._add_postings(state.idx[:n][mask], np.repeat(np.arange(n, dtype=np.int64), L))

    @property
    def indexed(self) -> bool:
        """Whether the shards keep an inverted index (``candidates=True``, or "auto" with batches > 1)."""
        return self._indexed

    def _add_postings(self, terms, clusters):
        """Append index entries (term, global cluster) to the shards' host mirrors (uploaded before scoring)."""
        if not self.indexed or len(terms) == 0:
            return
        S = len(self.shards)
        clusters = np.asarray(clusters, np.int64)
        terms = np.asarray(terms, np.int32)
        for s, sh in enumerate(self.shards):
            sel = clusters % S == s if S > 1 else slice(None)
            sh.index.append(terms[sel], clusters[sel] // S)

    # global cluster g <-> (shard g % S, row g // S)
    def _rows_of(self, s):
        S = len(self.shards)
        n = self.state.n
        return max(0, (n - s + S - 1) // S)

    def _sync_rows(self):
        for s, sh in enumerate(self.shards):
            sh.ensure(self._rows_of(s))

    def _flush(self):
        """Scatter the pending rows (host -> device) into their shards."""
        self._sync_rows()
        if not self.pending:
            return
        st = self.state
        S = len(self.shards)
        g = np.asarray(self.pending, np.int64)
        for s, sh in enumerate(self.shards):
            sel = g[g % S == s]
            if len(sel) == 0:
                continue
            with sh._on():
                xp = sh.xp
                ellpack.ellpack_scatter(sh.idx, sh.w, sh.stride, st.K, xp.asarray(sel // S),
                                        xp.asarray(st.idx[sel]), xp.asarray(st.w[sel]))
        self.pending = []

    def _walks(self, tv: TermVectors, j0: int, j1: int):
        """Posting entries per document (B,) of each shard, or None without an index."""
        if not self.indexed:
            return None
        d_idx, d_len = tv.idx[j0:j1], tv.length[j0:j1]
        return [sh.index.walk(d_idx, d_len) for sh in self.shards]

    def use_candidates(self, walks, n_docs: int) -> bool:
        """The pass for a batch: ``candidates`` if True/False, else the "auto" rule on the posting entries."""
        if self.candidates is True or self.candidates is False:
            return self.candidates
        n = self.state.n
        return (n_docs > 1 and n >= AUTO_MIN_CLUSTERS
                and AUTO_WALK_FACTOR * int(sum(w.sum() for w in walks)) < n_docs * n)

    def _score(self, tv: TermVectors, j0: int, j1: int):
        """Batch-start best (similarity, global cluster id) of documents j0..j1-1 over all shards.

        Candidate pass: (-1, -1) for a document that shares no term with any cluster (the all-rows
        pass: similarity 0 and the lowest cluster id); both resolve to the same assignment.
        """
        st = self.state
        S = len(self.shards)
        B = j1 - j0
        walks = self._walks(tv, j0, j1)
        cand = walks is not None and self.use_candidates(walks, B)
        if cand:
            self.candidate_batches += 1
        else:
            self.all_rows_batches += 1
        fused = B == 1 and len(self.pending) == 1
        if fused:
            self._sync_rows()
            g = self.pending[0]
        else:
            self._flush()
        outs = []
        for s, sh in enumerate(self.shards):
            if sh.n_rows == 0:
                outs.append(None)
                continue
            with sh._on():
                xp = sh.xp
                d_idx = xp.asarray(tv.idx[j0:j1])
                d_w = xp.asarray(tv.w[j0:j1])
                d_len = xp.asarray(tv.length[j0:j1])
                upd = {}
                if fused and g % S == s:
                    upd = {"upd_row": g // S, "upd_idx": xp.asarray(st.idx[g]), "upd_w": xp.asarray(st.w[g])}
                if cand:
                    best = ellpack.candidate_best(sh.idx, sh.w, sh.stride, sh.n_rows, st.K, d_idx, d_w, d_len,
                                                  sh.index, walk=walks[s], **upd)
                else:
                    best = ellpack.ellpack_best(sh.idx, sh.w, sh.stride, sh.n_rows, st.K, d_idx, d_w, d_len, **upd)
                self.kernel_calls += 1
                outs.append(best)
        if fused:
            self.pending = []
        best_sim = np.full(B, -1.0)
        best_id = np.full(B, -1, np.int64)
        for s, o in enumerate(outs):
            if o is None:
                continue
            o = o.get() if hasattr(o, "get") else o
            sim = o[:, 0]
            loc = o[:, 1].astype(np.int64)
            gid = np.where(loc >= 0, loc * S + s, -1)
            better = (gid >= 0) & ((sim > best_sim) | ((sim == best_sim) & ((best_id < 0) | (gid < best_id))))
            best_sim = np.where(better, sim, best_sim)
            best_id = np.where(better, gid, best_id)
        return best_sim, best_id

    @property
    def one_launch(self) -> bool:
        """Whether :meth:`run` clusters a batch in one pass of :func:`cutext.kernels.ellpack.ellpack_sequential`
        (one document at a time, one row partition, no inverted index) instead of a scoring pass per document."""
        return self.batch_size == 1 and len(self.shards) == 1 and not self.indexed and self.sequential

    def _run_one_launch(self, tv: TermVectors, threshold: float) -> _Result:
        """The batch in one launch on the device (or its CPU twin); the host state then replays its decisions."""
        st = self.state
        n = len(tv)
        res = _Result(n)
        if n == 0:
            return res
        n0 = st.n
        st.ensure(n0 + n)
        self._flush()
        sh = self.shards[0]
        sh.reserve(n0 + n)
        with sh._on():
            xp = sh.xp
            c_norm = xp.zeros(sh.stride, np.float64)
            c_norm[:n0] = xp.asarray(st.norm[:n0])
            cl, sim, new, n_dev = ellpack.ellpack_sequential(
                sh.idx, sh.w, c_norm, sh.stride, n0, st.K, xp.asarray(tv.idx), xp.asarray(tv.w),
                xp.asarray(tv.length), xp.asarray(tv.norm), float(threshold))
        self.kernel_calls += 1
        res.cluster[:], res.sim[:], res.new[:] = cl, sim, new
        st.n, bad = ref.replay_decisions(tv.idx, tv.w, tv.length, tv.norm, float(threshold), st.K, st.idx, st.w,
                                         st.length, st.norm, st.size, n0, res.cluster, res.sim, res.new)
        if bad >= 0 or st.n != n_dev:
            raise RuntimeError(f"the one-launch clustering and the host state disagree at document {bad} "
                               f"({n_dev} rows on the device, {st.n} on the host)")
        sh.n_rows = st.n
        return res

    def run(self, tv: TermVectors, threshold: float) -> _Result:
        if self.one_launch:
            return self._run_one_launch(tv, threshold)
        st = self.state
        n = len(tv)
        res = _Result(n)
        st.ensure(st.n + n)
        if len(self.mark) < st.capacity:
            self.mark = _grown(self.mark, st.capacity, -1)
        touched = np.empty(self.batch_size, np.int64)
        post_n = self.batch_size * st.K if self.indexed else 0
        post_term = np.empty(post_n, np.int32)
        post_cluster = np.empty(post_n, np.int64)
        j = 0
        while j < n:
            j1 = min(j + self.batch_size, n)
            best_sim, best_id = self._score(tv, j, j1)
            self.batch_stamp += 1
            j_stop, st.n, n_t, n_post = ref.resolve_batch(
                tv.idx, tv.w, tv.length, tv.norm, j, j1, best_sim, best_id, float(threshold), st.K,
                st.idx, st.w, st.length, st.norm, st.size, st.n,
                self.mark, self.batch_stamp, touched, res.cluster, res.sim, res.new, post_term, post_cluster)
            if j_stop < j1:
                self.restarts += 1
            self.pending = [int(c) for c in touched[:n_t]]
            self._add_postings(post_term[:n_post], post_cluster[:n_post])
            j = j_stop
        return res

    def sync(self) -> None:
        """Push every pending row and every pending index change to the device(s)."""
        self._flush()
        if self.indexed:
            for sh in self.shards:
                with sh._on():
                    sh.index.sync()

    def matrix(self) -> tuple:
        """Host copies ``[(ell_idx, ell_w, stride, n_rows), ...]`` of every shard (tests)."""
        self._flush()
        out = []
        for sh in self.shards:
            get = (lambda a: a.get()) if self.gpu else (lambda a: a.copy())
            out.append((get(sh.idx), get(sh.w), sh.stride, sh.n_rows))
        return out


# ----------------------------------------------------------------------------- live vectorizer

class StreamVectorizer:
    """Texts -> term vectors for a live feed, with a growing vocabulary.

    Term ids continue a vocabulary (for example the sorted vocabulary of a pipeline run); new
    terms get the next ids in order of first appearance.  Default tokenizer: the pipeline's (lowercase,
    Lucene's stopwords, tokens of 2+ code points).  ``idf="stream"`` counts document
    frequencies over every document seen (:func:`cutext.stages.text.termvec.term_vectors` with
    ``stream=True``); ``idf="fixed"`` keeps the reference ``df`` / ``n_ref`` (terms it lacks get no
    weight).  ``top_k``: terms per document, in [1, :data:`MAX_TOP_K`] (512, what a clusterer's rows hold);
    a ValueError names it otherwise.
    """

    def __init__(self, top_k: int, weighting: str = "tficf", idf: str = "stream", tokenizer=None,
                 terms=None, df=None, n_ref: int = 0):
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")
        if idf not in ("stream", "fixed"):
            raise ValueError(f"idf must be 'stream' or 'fixed', got {idf!r}")

        self.top_k = count("top_k", top_k, lo=1)
        if self.top_k > MAX_TOP_K:  # term vectors are sized n_docs x top_k, and no clusterer takes more
            raise ValueError(f"top_k must be <= {MAX_TOP_K} (the clusterer's rows hold at most {MAX_TOP_K} terms), "
                             f"got {self.top_k}")
        self.weighting = weighting
        self.idf = idf
        self.tokenizer = tokenizer if tokenizer is not None else TokenizerConfig.make(stopwords="lucene", min_len=2)
        self.terms: list[str] = list(terms) if terms is not None else []
        self.ids = {t: i + 1 for i, t in enumerate(self.terms)}
        self.df = np.zeros(len(self.terms) + 1, np.int64) if df is None else np.asarray(df, np.int64).copy()
        self.n_ref = int(n_ref)

    def transform(self, texts) -> TermVectors:
        """Vectorize a block of texts (stream mode: and count them into the document frequencies); one str
        is one document, not its characters."""

        texts = [("" if t is None else str(t)) for t in ([texts] if isinstance(texts, str) else texts)]
        toks = tokenize_texts(texts, self.tokenizer)
        pos, tid = [], []
        for d, ts in enumerate(toks):
            for t in ts:
                i = self.ids.get(t)
                if i is None:
                    self.terms.append(t)
                    i = self.ids[t] = len(self.terms)
                pos.append(d)
                tid.append(i)
        V = len(self.terms)
        dp, tp, tf = count_pairs(np.asarray(pos, np.int64), np.asarray(tid, np.int64))
        if self.idf == "stream":
            tv = term_vectors(dp, tp, tf, len(texts), self.top_k, weighting=self.weighting, stream=True,
                              df_prior=self.df, n_prior=self.n_ref)
            self.df = stream_df_update(self.df, tp, V)
            self.n_ref += len(texts)
        else:
            tv = term_vectors(dp, tp, tf, len(texts), self.top_k, weighting=self.weighting, df=self.df,
                              n_ref=self.n_ref)
        return tv

    def vocab_table(self) -> pa.Table:
        V = len(self.terms)
        df = np.zeros(V + 1, np.int64)
        df[:min(len(self.df), V + 1)] = self.df[:V + 1]
        return pa.table({"term_id": pa.array(np.arange(1, V + 1, dtype=np.int32)),
                         "term": pa.array(self.terms, pa.large_string()), "df": pa.array(df[1:])})

    def to_dict(self) -> dict:
        return {"top_k": self.top_k, "weighting": self.weighting, "idf": self.idf, "n_ref": self.n_ref,
                "tokenizer": self.tokenizer.to_dict()}


# ----------------------------------------------------------------------------- the clusterer

class StreamClusterer:
    """Online document-stream clustering (Szasz and Samet, Alg. 1-3) for a live feed.

    Parameters
    ----------
    threshold : float
        ``T`` in [0, 1]: a document joins its most similar cluster when ``sim > T`` (default
        :data:`DEFAULT_THRESHOLD`, 0.05; :func:`cutext.pipelines.cluster.suggest_threshold` reads one off a corpus).
    top_k : int
        Terms per document and per cluster (paper: 35 to 60), at most 512.
    backend : {"auto", "cpu", "gpu"}
        ``"auto"`` (the default of every loader) = the GPU when cupy is installed and a device is
        visible and ``method`` is None or ``"ellpack"`` (the GPU runs only that engine), else the
        CPU.  The assignments are the same on both.  Resolved once here; ``self.backend`` holds
        ``"cpu"`` or ``"gpu"``.
    method : {"reference", "brute", "ellpack"}, optional
        Default: ``"reference"`` on the CPU, ``"ellpack"`` on the GPU.
    batch_size : int
        Micro-batch of the ELLPACK engine (exact sequential semantics for any size).
    devices : list of int, optional
        GPUs for the row partitions (``backend="gpu"``).
    n_shards : int
        Row partitions of the ELLPACK CPU twin.
    candidates : {"auto", True, False}
        ELLPACK engine: score only the clusters that share a term with the document (the candidate
        pass through an inverted index on the device), every cluster (False), or choose per batch
        ("auto"; see :class:`EllpackEngine`).  Same results.  The reference engine decides per
        document itself (Alg. 1); the brute engine compares every cluster.
    vectorizer : StreamVectorizer, optional
        Used when :meth:`partial_fit` receives texts (default: a new one, IDF from the stream).

    Attributes
    ----------
    n_docs : int
        Documents seen.
    state : ClusterState
    """

    def __init__(self, threshold: float = DEFAULT_THRESHOLD, top_k: int = 35, *, backend: str = "auto", method=None,
                 batch_size: int = 1, devices=None, n_shards: int = 1, candidates="auto", vectorizer=None,
                 _state=None):
        threshold = number("threshold", threshold, lo=0, hi=1)
        top_k = count("top_k", top_k, lo=1, hi=ellpack.MAX_K)
        batch_size = count("batch_size", batch_size, lo=1)
        n_shards = count("n_shards", n_shards, lo=1)
        if backend == "auto":  # the GPU runs only the ELLPACK engine
            backend = resolve_backend("auto", needs=ARRAY_STACK) if method in (None, "ellpack") else "cpu"
        if backend not in ("cpu", "gpu"):
            raise ValueError(f"backend must be 'auto', 'cpu' or 'gpu', got {backend!r}")
        method = method or ("ellpack" if backend == "gpu" else "reference")
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        if backend == "gpu" and method != "ellpack":
            raise ValueError("backend='gpu' runs method='ellpack'")
        if not any(candidates is c or (isinstance(c, str) and candidates == c) for c in CANDIDATES):
            raise ValueError(f"candidates must be 'auto', True or False, got {candidates!r}")
        self.threshold = float(threshold)
        self.top_k = int(top_k)
        self.backend = backend
        self.method = method
        self.batch_size = int(batch_size)
        self.devices = list(devices) if devices else None
        self.n_shards = int(n_shards)
        self.candidates = candidates
        self.vectorizer = vectorizer
        self.state = _state if _state is not None else ClusterState(self.top_k)
        self.n_docs = 0
        self.seconds = 0.0
        if method == "ellpack":
            self.engine = EllpackEngine(self.state, gpu=backend == "gpu", devices=self.devices,
                                        n_shards=self.n_shards, batch_size=self.batch_size, candidates=candidates)
        else:
            self.engine = ReferenceEngine(self.state, brute=method == "brute")

    @property
    def n_clusters(self) -> int:
        return self.state.n

    def __repr__(self) -> str:
        terms = len(self.vectorizer.terms) if self.vectorizer is not None and self.vectorizer.terms is not None \
            else None
        return (f"StreamClusterer(threshold={self.threshold:g}, top_k={self.top_k}, method={self.method!r}, "
                f"backend={self.backend!r}, batch_size={self.batch_size}, clusters={self.n_clusters:,}, "
                f"docs={self.n_docs:,}" + (f", terms={terms:,}" if terms is not None else "") + ")")

    def partial_fit(self, batch) -> pd.DataFrame:
        """Cluster the next documents of the stream, in order.

        Parameters
        ----------
        batch : TermVectors, a sequence / Series of texts, one str (one document), or a DataFrame with a
            ``text`` column

        Returns
        -------
        DataFrame ``(position: int64, cluster_id: int64, similarity: float64, new_cluster: bool)``
            ``position`` counts documents from the start of the stream; ``similarity`` is the
            largest similarity with an existing cluster (0 when none shares a term);
            ``cluster_id = -1`` for a document without a weighted term.
        """
        if isinstance(batch, TermVectors):
            tv = batch
        else:
            if isinstance(batch, pd.DataFrame):
                if "text" not in batch.columns:
                    raise ValueError(f"partial_fit: DataFrame needs a 'text' column; has {list(batch.columns)}")
                batch = batch["text"]
            if isinstance(batch, (bytes, bytearray)):
                raise TypeError("partial_fit: batch is bytes; decode it to str first (one str is one document)")
            if isinstance(batch, str):  # one document, as LDAModel.transform and BM25Index.search take one str
                batch = [batch]
            if self.vectorizer is None:
                self.vectorizer = StreamVectorizer(self.top_k)
            tv = self.vectorizer.transform(list(batch))
        if tv.top_k != self.top_k:
            raise ValueError(f"term vectors have top_k={tv.top_k}, the clusterer {self.top_k}")
        t0 = time.perf_counter()
        res = self.engine.run(tv, self.threshold)
        self.seconds += time.perf_counter() - t0
        pos = np.arange(self.n_docs, self.n_docs + len(tv), dtype=np.int64)
        self.n_docs += len(tv)
        return pd.DataFrame({"position": pos, "cluster_id": res.cluster, "similarity": res.sim,
                             "new_cluster": res.new})

    def clusters(self, terms=None, n_terms: int | None = None) -> pd.DataFrame:
        """Every cluster: ``(cluster_id, size, norm, terms|term_ids, weights)``, terms by decreasing weight.

        ``terms``: a sequence (term id ``i`` is ``terms[i - 1]``) to show strings instead of ids.
        """
        st = self.state
        rows_t, rows_w = [], []
        for c in range(st.n):
            L = st.length[c]
            ids = st.idx[c, :L]
            w = st.w[c, :L]
            o = np.lexsort((ids, -w))[: n_terms or L]
            rows_t.append([terms[i - 1] for i in ids[o]] if terms is not None else ids[o].tolist())
            rows_w.append(w[o].tolist())
        return pd.DataFrame({"cluster_id": np.arange(st.n, dtype=np.int64), "size": st.size[:st.n].copy(),
                             "norm": st.norm[:st.n].copy(), ("terms" if terms is not None else "term_ids"): rows_t,
                             "weights": rows_w})

    def top_terms(self, n: int = 10) -> pd.DataFrame:
        """One row a cluster with its ``n`` heaviest terms, largest cluster first (BERTopic's ``get_topic_info``).

        Parameters
        ----------
        n : int, default 10
            Terms a cluster (>= 1; a cluster holds at most ``top_k``).

        Returns
        -------
        pandas.DataFrame, one row a cluster
            ``cluster_id: int64``; ``size: int64`` (documents); ``weight: float64``, the cluster's share of
            the clustered documents; ``terms: str``, its terms by decreasing centroid weight (ties: the
            earlier term) joined by spaces (term ids when the clusterer was fed term vectors, without a
            vocabulary).  Sorted by size, descending, then cluster_id.

        Raises
        ------
        ValueError
            ``n`` < 1.
        """
        n = count("n", n, lo=1)
        vocab = self.vectorizer.terms if self.vectorizer is not None and self.vectorizer.terms else None
        cl = self.clusters(terms=vocab, n_terms=n)
        words = cl["terms" if vocab is not None else "term_ids"]
        total = int(cl["size"].sum())
        out = pd.DataFrame({"cluster_id": cl["cluster_id"].to_numpy(np.int64), "size": cl["size"].to_numpy(np.int64),
                            "weight": cl["size"].to_numpy(np.float64) / max(total, 1),
                            "terms": [" ".join(map(str, t)) for t in words]})
        return out.sort_values(["size", "cluster_id"], ascending=[False, True], ignore_index=True)

    # ---------------------------------------------------------------- persistence
    def save(self, path) -> Path:
        """Write the state (clusters Parquet, vocabulary Parquet, JSON) to a directory, atomically."""

        with atomic_directory(path, kind="cutext.cluster.state", manifest="state.json") as tmp:
            self.write_state(tmp)
        return Path(path)

    def write_state(self, d) -> None:
        d = Path(d)
        pq.write_table(self.state.to_table(), d / "clusters.parquet")
        meta = {"kind": "cutext.cluster.state", "version": STATE_VERSION, "threshold": self.threshold,
                "top_k": self.top_k, "n_docs": self.n_docs, "n_clusters": self.state.n,
                "vectorizer": None}
        if self.vectorizer is not None:
            pq.write_table(self.vectorizer.vocab_table(), d / "vocab.parquet")
            meta["vectorizer"] = self.vectorizer.to_dict()
            meta["n_terms"] = len(self.vectorizer.terms)
        write_json(d / "state.json", meta)

    @classmethod
    def load(cls, path, *, backend: str = "auto", method=None, batch_size: int = 1, devices=None,
             n_shards: int = 1, candidates="auto", threshold=None, verify: bool = True) -> "StreamClusterer":
        """Resume from :meth:`save` (or a pipeline's ``state/`` folder); runs on the backend given here.

        ``backend`` (default ``"auto"``), ``method``, ``batch_size``, ``devices``, ``n_shards`` and
        ``candidates`` are those of :class:`StreamClusterer`; the saved state is the same for all.

        The ELLPACK engine rebuilds its matrix and its inverted index from the saved clusters.
        ``verify`` (default True) checks every file's CRC32 against state.json first
        (:func:`cutext.stages.runtime.artifacts.read_manifest`).

        Raises
        ------
        ArtifactNotFoundError (ArtifactError, FileNotFoundError)
            Missing directory or file.
        ArtifactError (ValueError)
            Not a cutext cluster state, or a corrupt one (the message names the directory and file):
            a missing or out-of-range field (top_k >= 1, threshold in [0, 1], counts >= 0), cluster
            rows that disagree with n_clusters, term ids outside the vocabulary, weights or norms
            that are not finite, a vocabulary shorter than the one saved or with repeated terms,
            ``n_ref`` below the largest df; with ``verify``, a file whose checksum does not match.
        """

        d = Path(path)
        meta = art.read_manifest(d, "state.json", "cutext.cluster.state", "a saved StreamClusterer state",
                                 verify=verify)
        f = d / "state.json"
        K = art.field_int(meta, "top_k", f, lo=1)
        art.field_float(meta, "threshold", f, lo=0.0, hi=1.0)
        n_docs = art.field_int(meta, "n_docs", f, lo=0)
        n_clusters = art.field_int(meta, "n_clusters", f, lo=0, hi=max(n_docs, 0))
        cf = d / "clusters.parquet"
        table = art.read_table(cf, {"cluster_id": "int", "size": "int", "norm": "float", "term_ids": "list",
                                    "weights": "list"}, "cluster table")
        if table.num_rows != n_clusters:
            raise art.ArtifactError(f"{cf}: {table.num_rows} clusters, state.json says n_clusters={n_clusters}")
        art.check_range(table.column("size").to_numpy(), 1, max(n_docs, 1), "cluster sizes", cf)
        art.check_finite(table.column("norm").to_numpy(), "norms", cf)
        term_ids = table.column("term_ids").combine_chunks().flatten().to_numpy()
        art.check_finite(table.column("weights").combine_chunks().flatten().to_numpy(), "weights", cf)
        vec = None
        if meta.get("vectorizer"):
            v = art.field_dict(meta, "vectorizer", f)
            for key in ("weighting", "idf", "n_ref", "tokenizer"):
                if key not in v:
                    raise art.ArtifactError(f"{f}: vectorizer has no {key!r}")
            vf = d / "vocab.parquet"
            vt = art.read_table(vf, {"term": "string", "df": "int"}, "vocabulary")
            terms = vt.column("term").to_pylist()
            if "n_terms" in meta and art.field_int(meta, "n_terms", f, lo=0) != len(terms):
                raise art.ArtifactError(f"{vf}: {len(terms)} terms, state.json says n_terms={meta['n_terms']}")
            art.check_range(term_ids, 1, len(terms), "cluster term ids", cf)
            if len(set(terms)) != len(terms):
                raise art.ArtifactError(f"{vf}: repeated terms in the vocabulary")
            df = np.concatenate([[0], vt.column("df").to_numpy()]).astype(np.int64)
            art.check_range(df, 0, np.iinfo(np.int64).max, "document frequencies", vf)
            n_ref = art.field_int(v, "n_ref", f, lo=int(df.max()) if len(df) else 0)
            vec = StreamVectorizer(K, v["weighting"], v["idf"], TokenizerConfig.from_dict(v["tokenizer"]),
                                   terms=terms, df=df, n_ref=n_ref)
        else:
            art.check_range(term_ids, 0, np.iinfo(np.int64).max, "cluster term ids", cf)
        try:
            state = ClusterState.from_table(table, K)
        except ValueError as exc:
            raise art.ArtifactError(f"{cf}: {exc}") from None
        sc = cls(meta["threshold"] if threshold is None else threshold, K, backend=backend, method=method,
                 batch_size=batch_size, devices=devices, n_shards=n_shards, candidates=candidates, vectorizer=vec,
                 _state=state)
        sc.n_docs = int(meta["n_docs"])
        return sc
