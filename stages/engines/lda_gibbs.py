"""The LDA Gibbs sampler state (papers 000 EZLDA and 001): one chain's token list and counts, on one device or
sharded over several.

The engine of :mod:`cutext.pipelines.lda` (which keeps the orchestration, the model files and the CLI), as
:mod:`cutext.stages.engines.streamcluster` is the clustering pipeline's.  It owns every call into the kernels
(:mod:`cutext.kernels.lda`, :mod:`cutext.kernels.lda_hybrid`), whose numba twins are the CPU backend and
whose CUDA kernels the GPU backend; both draw the same topics token for token.

* :class:`GibbsState` -- the token list, the topics ``z``, W (dense, fixed for inference, or in the hybrid
  layout), n_k, D (padded CSR) and the per-word tables of one chain on one backend; :meth:`GibbsState.step`
  samples every token against the previous pass's counts and rebuilds the counts (EZLDA section IV-C);
  :meth:`GibbsState.llpt` / :meth:`GibbsState.log_likelihood` / :meth:`GibbsState.log2_likelihood_terms`
  evaluate EZLDA Eq. 5.
* :class:`ShardedGibbs` -- the same chain over several shards (GPUs), W summed after every pass (EZLDA
  section V-B); equal to the one-shard chain draw for draw.
* :func:`resolve_sampler`, :data:`SAMPLERS`, :func:`panel_words` -- sampler names and the dense sampler's
  panel width.
* :func:`state_bytes` / :func:`check_state_memory` -- the bytes a chain's arrays will take, checked against
  the memory available before any K-sized array is allocated.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from cutext.kernels import lda as lda_kernels
from cutext.kernels import lda_hybrid
from cutext.stages.engines.lda_chunk import Chunks
from cutext.stages.runtime.params import check_memory, param

SAMPLERS = ("auto", "sparse", "three_branch", "dense", "hybrid")
PANEL_WORDS = 8
# token order of the GPU sparse / three-branch passes: "doc" (lda_sample_doc, D rows in shared memory), "word"
# (lda_sample) or "auto" (resolve_sample_order); the same draws either way
SAMPLE_ORDER = "auto"
# "auto" visits tokens in document order while the What table (V x K float32) is at most this many times the
# device's L2 cache: one H200 (60 MiB of L2), NIPS, K=1000 / 2048 / 4096 / 32768 (What 50 / 102 / 203 / 1,628 MB):
# document order 1.56x / 1.37x / 0.92x / 0.40x word order (lda-gpu-h200-orders-k-2026-11-28.*)
DOC_ORDER_L2_FACTOR = 2


def resolve_sample_order(order: str, V: int, K: int, gpu: bool = True, device=None) -> str:
    """The token order a pass of the sparse samplers takes: ``order`` itself, or for ``"auto"`` ``"doc"`` while
    What (``V * K * 4`` bytes) is at most :data:`DOC_ORDER_L2_FACTOR` times the L2 cache of ``device`` (the
    current device by default), else ``"word"``: document order gathers What[v][k] of every word of a document,
    word order keeps one word's row in cache.  On the CPU the twin does not depend on the order: ``"word"``.

    Raises
    ------
    ValueError
        ``order`` is not ``"auto"``, ``"word"`` or ``"doc"``.
    """
    if order not in ("auto",) + lda_kernels.ORDERS:
        raise ValueError(f"sample_order must be one of {('auto',) + lda_kernels.ORDERS}, got {order!r}")
    if order != "auto":
        return order
    if not gpu:
        return "word"
    import cupy
    dev = cupy.cuda.Device(device).id if device is not None else cupy.cuda.Device().id
    l2 = int(cupy.cuda.runtime.getDeviceProperties(dev)["l2CacheSize"])
    return "doc" if 4 * int(V) * int(K) <= DOC_ORDER_L2_FACTOR * l2 else "word"


def panel_words(K: int) -> int:
    """Words per column panel of the dense sampler: at most 8, and K x words int32 within 48 KiB of shared memory."""
    return max(1, min(PANEL_WORDS, 12288 // int(K)))


def resolve_sampler(sampler: str, K: int) -> str:
    """``"auto"``: EZLDA's two-branch sparse sampler at every K (the fastest of the exact samplers measured: on
    one H200, NIPS x52, K=128 3,129 M tokens/s against dense 2,211 and three-branch 2,996; K=1000 2,070 against
    three-branch 1,980; also later in the chain and on the CPU)."""
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
    if sampler == "auto":
        return "sparse"
    if sampler == "dense" and K > 4096:
        raise ValueError(f"the dense sampler stages K counts per word in shared memory; {param('K', K)} is too "
                         "large")
    return sampler


def state_bytes(V: int, K: int, n_docs: int, n_tokens: int, sampler: str = "sparse", *, fixed: bool = False,
                hybrid_w: int | None = None, n_dense: int | None = None) -> dict:
    """Bytes the arrays of one :class:`GibbsState` will take (all Python ints, so any K is exact).

    Parameters
    ----------
    V, K, n_docs, n_tokens : int
        Vocabulary size, topics, documents and tokens of the chain.
    sampler : str
        A resolved sampler name; ``"dense"`` adds its (n_docs, K) float32 DNT table.
    fixed : bool
        Inference with a trained W already held in this memory (:meth:`cutext.pipelines.lda.LDAModel.transform`
        on the CPU): that W is not counted, the rebuild still makes a (V, K) int32 W of the new documents.
    hybrid_w, n_dense : int, optional
        The hybrid layout (``sampler="hybrid"``): bytes of its W (:meth:`Chunks.memory_estimate`
        ``hybrid_w``) and the words with dense rows; W and its tables are then sized by them.

    Returns
    -------
    dict
        ``W`` (the (V, K) int32 counts, plus the one the rebuild makes beside them), ``tables``
        (float32 (V, K) What and running sums and the per-word rows; the dense sampler's (n_docs, K)
        float32 DNT), ``tokens`` (token arrays, topics, D in padded CSR), ``total``.
    """
    V, K, n_docs, n_tokens = int(V), int(K), int(n_docs), int(n_tokens)
    if sampler == "hybrid" and hybrid_w is not None:
        w = 2 * int(hybrid_w)
        tables = int(n_dense or 0) * K * 8 + int(hybrid_w) + V * 28
    else:
        w = V * K * 4 * (1 if fixed else 2)
        tables = V * K * 8 + V * 28  # what, qcum (float32 (V, K)); qtot, top, topv per word
    if sampler == "dense":
        tables += n_docs * K * 4
    tokens = n_tokens * (4 + 4 + 8 + 4 + 8 + 4 + 1 + 8) + (n_docs + 1) * 8 * 2 + K * 8 * 2
    return {"W": w, "tables": tables, "tokens": tokens, "total": w + tables + tokens}


def check_state_memory(ch: Chunks, K: int, sampler: str, *, gpu: bool = False, n_states: int = 1,
                       fixed: bool = False, V: int | None = None, owner: str = "lda") -> int:
    """Refuse a chain whose arrays (:func:`state_bytes`) the memory available cannot hold, before any is
    allocated.

    Parameters
    ----------
    ch : Chunks
    K : int
    sampler : str
        Resolved sampler name.
    gpu : bool
        Compare with the current device's free memory (each shard of a multi-GPU chain has its device).
    n_states : int
        Chains held in this memory at once (CPU shards of :class:`ShardedGibbs` share the host).
    fixed : bool
        Inference against a trained W already in this memory (see :func:`state_bytes`).
    V : int, optional
        Vocabulary size (default ``ch.V``; a model's for inference).
    owner : str
        Named in the message.

    Returns
    -------
    int
        Bytes needed.

    Raises
    ------
    cutext.stages.runtime.params.ResourceLimitError (MemoryError, ValueError)
        The estimate exceeds the memory available; the message names K, V and both sizes.
    """

    V = ch.V if V is None else int(V)
    hyb = None
    if sampler == "hybrid":
        hyb = ch.memory_estimate()["hybrid_w"]
    est = state_bytes(V, K, ch.n_docs, ch.n_tokens, sampler, fixed=fixed, hybrid_w=hyb, n_dense=ch.n_dense)
    need = est["total"] * max(1, int(n_states))
    return check_memory(need, f"{owner}: K={int(K):,} topics with V={V:,} words and {ch.n_docs:,} documents "
                              f"(word-topic arrays V x K: {est['W'] + est['tables']:,} bytes"
                              f"{f', {n_states} shards' if n_states > 1 else ''}); lower {param('K', bare=True)}",
                        gpu=gpu)


class GibbsState:
    """Token list and counts of one LDA chain on one backend (numpy or cupy).

    Parameters
    ----------
    ch : Chunks
    K : int
    alpha, beta : float
    seed : int
    gpu : bool
    W_fixed : int32 (V, K), optional
        A trained model's W (inference: only D is resampled).
    vbeta : float, optional
        ``V * beta`` of the model (default ``V * beta``).
    V : int, optional
        Vocabulary size (default ``ch.V``).
    device : int, optional
        CUDA device of this state (default: the current one).
    shard : bool
        Part of a :class:`ShardedGibbs`: the rebuild keeps this shard's W in ``W_local`` and the
        caller installs the summed W with :meth:`set_global_w`.
    w_layout : {"dense", "hybrid"}
        ``"dense"``: ``W`` int32 (V, K) with float32 (V, K) tables.  ``"hybrid"`` (EZLDA section IV-B):
        dense rows only for the ``ch.n_dense`` words with more than K tokens, sparse rows (topic, count)
        for the others (``self.hw``, a :class:`cutext.kernels.lda_hybrid.HybridW`; ``self.W`` is None); sample
        with ``sampler="hybrid"``.  Not with ``W_fixed`` or ``shard``.
    sample_order : {"auto", "word", "doc"}, optional
        Token order of the GPU's sparse and three-branch passes (:func:`cutext.kernels.lda.sample`'s
        ``order``; the draws are the same either way): ``"doc"`` runs ``lda_sample_doc`` over the
        document-major index ``doc_tok`` with D rows in shared memory; ``"auto"``: :func:`resolve_sample_order`.
        Default :data:`SAMPLE_ORDER`.  The attribute ``sample_order`` holds the resolved order and may be changed
        between passes.
    """

    def __init__(self, ch: Chunks, K: int, alpha: float, beta: float, seed: int = 0, gpu: bool = False,
                 W_fixed=None, vbeta=None, V=None, device=None, shard=False, w_layout="dense", sample_order=None):
        if gpu:
            import cupy as xp
        else:
            xp = np
        self.xp, self.gpu, self.device, self.shard = xp, gpu, device, shard
        self.ch, self.K, self.alpha, self.beta, self.seed = ch, int(K), float(alpha), float(beta), int(seed)
        self.V = int(V) if V is not None else (ch.V if W_fixed is None else int(W_fixed.shape[0]))
        self.vbeta = float(vbeta) if vbeta is not None else self.V * self.beta
        self.fixed = W_fixed is not None
        if w_layout not in ("dense", "hybrid"):
            raise ValueError(f"w_layout must be 'dense' or 'hybrid', got {w_layout!r}")
        if w_layout == "hybrid" and (self.fixed or shard):
            raise ValueError("the hybrid W layout is for single-device training (no W_fixed, no shards)")
        self.hybrid = w_layout == "hybrid"
        self.doc_c = lda_hybrid.HYBRID_DOC_C  # the hybrid sampler's doc-side rule (tests lower it)
        self.sample_order = resolve_sample_order(SAMPLE_ORDER if sample_order is None else sample_order, self.V,
                                                 self.K, gpu, device)
        self.doc_cap = lda_kernels.DOC_CAP  # shared-memory D-row entries a warp with sample_order="doc"
        self.W = self.hw = self.htables = None
        self._panels = None
        self._pending = None
        with self.ctx():
            if self.hybrid:
                if ch.K != self.K:
                    raise ValueError(f"chunks were built for K={ch.K}, the state has K={self.K}")
                w_ptr, word_tok = lda_hybrid.hybrid_index(ch.word, ch.word_count, ch.n_dense)
                self._w_ptr, self._word_tok = xp.asarray(w_ptr), xp.asarray(word_tok)
                # tokens of dense words: the head of every chunk (sorted by word), found from the words
                # themselves rather than trusting chunk_split to match n_dense
                self._dense_ranges = [(int(a), int(a) + int(np.searchsorted(ch.word[a:b], ch.n_dense, side="left")))
                                      for a, b in zip(ch.chunk_ptr[:-1], ch.chunk_ptr[1:])]
            self.word = xp.asarray(ch.word)
            self.doc = xp.asarray(ch.doc)
            self.keys = xp.asarray(ch.keys)
            self.doc_ptr = xp.asarray(ch.doc_ptr)
            self.doc_tok = xp.asarray(ch.doc_tok)
            if self.fixed:
                self.W = xp.asarray(W_fixed, dtype=np.int32)
                self.nk = self.W.sum(axis=0, dtype=np.int64)
                self.tables = lda_kernels.prepare_words(self.W, self.nk, self.beta, self.vbeta)
            self.z = lda_kernels.init_topics(self.seed, self.keys, self.K)
            self.rebuild()

    def ctx(self):
        """Context manager selecting this state's device (a no-op on the CPU)."""
        import contextlib

        if self.gpu and self.device is not None:
            import cupy

            return cupy.cuda.Device(self.device)
        return contextlib.nullcontext()

    def rebuild(self):
        """W, n_k, D and the per-word tables from the current topics (EZLDA section IV-C)."""
        with self.ctx():
            if self.hybrid:
                self.hw = lda_hybrid.rebuild_hybrid(self.word, self.z, self._w_ptr, self._word_tok, self.ch.n_dense,
                                                    self.K)
                self.d_topic, self.d_cnt, self.d_nnz = lda_kernels.rebuild_d(self.doc, self.z, self.doc_ptr,
                                                                             self.doc_tok, self.K)
                self.nk = self.xp.bincount(self.z, minlength=self.K).astype(np.int64)
                self.tables = lda_kernels.prepare_words(self.hw.W_dense, self.nk, self.beta, self.vbeta)
                self.htables = lda_hybrid.hybrid_tables(self.nk, self.vbeta, self.doc_ptr, self.d_topic, self.d_cnt,
                                                        self.d_nnz, self.hw)
                return
            W, _nk, self.d_topic, self.d_cnt, self.d_nnz = lda_kernels.rebuild_counts(
                self.word, self.doc, self.z, self.doc_ptr, self.doc_tok, self.V, self.K)
            if self.shard:
                self.W_local = W
            elif not self.fixed:
                self.set_global_w(W)

    def set_global_w(self, W):
        """Install the (summed) word-topic counts and rebuild the per-word tables."""
        with self.ctx():
            self.W = W
            self.nk = W.sum(axis=0, dtype=np.int64)
            self.tables = lda_kernels.prepare_words(self.W, self.nk, self.beta, self.vbeta)

    def sample_pass(self, iteration: int, sampler: str, exclude: bool = True):
        """Draw new topics for every token (kept pending until :meth:`commit`)."""
        if (sampler == "hybrid") != self.hybrid:
            raise ValueError(f"sampler {sampler!r} on a state with the {'hybrid' if self.hybrid else 'dense'} "
                             "W layout (sampler='hybrid' needs w_layout='hybrid' and the reverse)")
        with self.ctx():
            xp = self.xp
            if sampler == "hybrid":
                z_new, flags = lda_hybrid.sample_hybrid(
                    self.word, self.doc, self.keys, self.z, self.doc_ptr, self.d_topic, self.d_cnt, self.d_nnz,
                    self.hw, self.nk, self.tables, self.htables, self._dense_ranges, alpha=self.alpha,
                    beta=self.beta, vbeta=self.vbeta, seed=self.seed, iteration=iteration, exclude=exclude,
                    doc_c=self.doc_c)
                self._flags = flags
                skipped = 0
            elif sampler == "dense":
                if self._panels is None:
                    ptr, w0 = lda_kernels.word_panels(self.ch.word, panel_words(self.K))
                    self._panels = (xp.asarray(ptr), xp.asarray(w0))
                z_new = lda_kernels.sample_dense(self.word, self.doc, self.keys, self.z, self.doc_ptr, self.d_topic,
                                                 self.d_cnt, self.d_nnz, self.W, self.nk, self._panels,
                                                 alpha=self.alpha, beta=self.beta, vbeta=self.vbeta, seed=self.seed,
                                                 iteration=iteration, exclude=exclude, fixed_w=self.fixed,
                                                 panel_words=panel_words(self.K))
                skipped = 0
            else:
                z_new, flags = lda_kernels.sample(self.word, self.doc, self.keys, self.z, self.doc_ptr, self.d_topic,
                                                  self.d_cnt, self.d_nnz, self.W, self.nk, self.tables,
                                                  alpha=self.alpha, beta=self.beta, vbeta=self.vbeta,
                                                  seed=self.seed, iteration=iteration,
                                                  three=sampler == "three_branch", exclude=exclude,
                                                  fixed_w=self.fixed, order=self.sample_order,
                                                  doc_tok=self.doc_tok, doc_cap=self.doc_cap)
                skipped = int((flags == lda_kernels.FLAG_SKIP).sum())
            changed = int((z_new != self.z).sum())
        self._pending = z_new
        return {"skipped": skipped, "changed": changed}

    def commit(self):
        """Adopt the pending topics and rebuild the counts."""
        self.z, self._pending = self._pending, None
        self.rebuild()

    def step(self, iteration: int, sampler: str, exclude: bool = True) -> dict:
        """One Gibbs pass over every token, then the count rebuild.  Returns fractions skipped / changed."""
        c = self.sample_pass(iteration, sampler, exclude)
        self.commit()
        n = max(1, int(self.word.shape[0]))
        return {"skipped": c["skipped"] / n, "changed": c["changed"] / n}

    def _llpt_terms(self):
        """Per-token log2 terms of EZLDA Eq. 5 on this state's backend (:meth:`log2_likelihood_terms`)."""
        if self.hybrid:
            return lda_hybrid.log2_likelihood_terms_hybrid(self.word, self.doc, self.doc_ptr, self.d_topic,
                                                           self.d_cnt, self.d_nnz, self.hw, self.tables,
                                                           self.htables, alpha=self.alpha, beta=self.beta)
        return lda_kernels.log2_likelihood_terms(self.word, self.doc, self.doc_ptr, self.d_topic, self.d_cnt,
                                                 self.d_nnz, self.tables, alpha=self.alpha)

    def llpt_sum(self) -> float:
        """Sum over tokens of the log2 terms of EZLDA Eq. 5."""
        if self.word.shape[0] == 0:
            return 0.0
        with self.ctx():
            return float(self._llpt_terms().sum())

    def llpt(self) -> float:
        """EZLDA Eq. 5 (log2, bits per token) of the current counts (hybrid: sparse words' phi in float64
        from their sparse rows, dense words' from the float32 What rows)."""
        if self.word.shape[0] == 0:
            return float("nan")
        with self.ctx():
            return float(self._llpt_terms().mean())

    def log2_likelihood_terms(self) -> np.ndarray:
        """Per-token log-likelihood of the current counts, EZLDA Eq. 5 before the mean.

        ``log2 sum_k theta[d][k] phi[k][v]`` for every token (v, d) of the chunk list, with
        ``theta[d][k] = (D[d][k] + alpha) / (L_d + K alpha)`` and ``phi[k][v]`` the float32 What table
        (:func:`cutext.kernels.lda.log2_likelihood_terms`; hybrid layout: sparse words' phi in float64 from
        their sparse rows, :func:`cutext.kernels.lda_hybrid.log2_likelihood_terms_hybrid`).  For a state with
        ``W_fixed`` (inference) this is the held-out likelihood of Moon et al. Eq. 3-4, in log2.

        Returns
        -------
        float64 (N,) host array, log base 2, in chunk (token) order; empty when the state has no token.
        """
        if self.word.shape[0] == 0:
            return np.zeros(0, dtype=np.float64)
        with self.ctx():
            return self.host(self._llpt_terms())

    def log_likelihood(self) -> float:
        """Total log2 likelihood of the tokens under the current counts: the sum of EZLDA Eq. 5's terms.

        ``llpt() = log_likelihood() / N`` (bits per token; summed per shard in :class:`ShardedGibbs`).
        Returns 0.0 for a state without tokens.
        """
        return self.llpt_sum()

    def dense_w(self) -> np.ndarray:
        """W as int32 (V, K) on the host (for the hybrid layout: assembled from its rows; small V only)."""
        if self.hybrid:
            return self.hw.to_dense()
        return self.host(self.W)

    def topic_word_table(self):
        """Nonzeros of W as host arrays ``(word_id int32, topic int32, count int32)``, word-major, topics
        ascending (the rows of ``topic_word.parquet``), for either layout."""
        if self.hybrid:
            return self.hw.table()
        W = self.host(self.W)
        wv, wk = np.nonzero(W)
        return wv.astype(np.int32), wk.astype(np.int32), W[wv, wk].astype(np.int32)

    def nbytes(self) -> dict:
        """Device (or host) bytes of the state: ``W`` (the word-topic counts: V x K int32, or the hybrid
        dense rows + sparse rows), ``tables`` (per-word float32 What / qcum rows and the other per-pass
        tables), ``D`` (padded CSR), ``tokens`` (token arrays and inverted indexes), ``total``."""
        def b(*arrays):
            return int(sum(int(a.nbytes) for a in arrays if a is not None))

        tabs = b(*self.tables.values()) if getattr(self, "tables", None) else 0
        if self.hybrid:
            hb = self.hw.nbytes()
            w = hb["w"]
            tabs += b(*self.htables.values())
            idx = hb["index"]
        else:
            w = b(self.W)
            idx = 0
        out = {"W": w, "tables": tabs, "D": b(self.d_topic, self.d_cnt, self.d_nnz, self.doc_ptr),
               "tokens": b(self.word, self.doc, self.keys, self.z, self.doc_tok) + idx + b(self.nk)}
        out["total"] = sum(out.values())
        return out

    def sync(self):
        if self.gpu:
            import cupy

            with self.ctx():
                cupy.cuda.Device().synchronize()

    def host(self, a) -> np.ndarray:
        return a.get() if self.gpu else a

    def doc_topic_table(self) -> pd.DataFrame:
        """Nonzeros of D as ``(doc_id, topic, count)`` (host)."""
        ptr = self.ch.doc_ptr
        nnz = self.host(self.d_nnz).astype(np.int64)
        d = np.repeat(np.arange(len(nnz), dtype=np.int64), nnz)
        starts = np.repeat(ptr[:-1], nnz)
        offs = np.arange(int(nnz.sum()), dtype=np.int64) - np.repeat(np.cumsum(nnz) - nnz, nnz)
        pos = starts + offs
        return pd.DataFrame({"doc_id": d, "topic": self.host(self.d_topic)[pos].astype(np.int32),
                             "count": self.host(self.d_cnt)[pos].astype(np.int32)})

    def check_invariants(self):
        """sum W = sum D = N tokens, no negative counts (raises AssertionError)."""
        n = int(self.word.shape[0])
        with self.ctx():
            if self.hybrid:
                hw = self.hw
                Wd = self.host(hw.W_dense)
                wv, wk, wc = hw.table()  # dense rows' nonzeros, then the sparse rows
                assert int(wc.sum(dtype=np.int64)) == n, "sum W != N"
                assert (Wd.size == 0 or int(Wd.min()) >= 0) and (wc.size == 0 or int(wc.min()) > 0), "negative W"
                nk = np.bincount(wk, weights=wc, minlength=self.K).astype(np.int64)
                np.testing.assert_array_equal(nk, self.host(self.nk), err_msg="n_k != column sums of W")
                rows = np.bincount(wv, weights=wc, minlength=self.ch.V)[hw.n_dense:]
                np.testing.assert_array_equal(rows, self.ch.word_count[hw.n_dense:], err_msg="sparse row sums")
                nz = self.host(hw.w_nnz)
                assert (nz <= np.minimum(np.diff(self.host(hw.w_ptr)), self.K)).all(), "row over capacity"
            elif not self.fixed and not self.shard:
                W = self.host(self.W)
                assert int(W.sum(dtype=np.int64)) == n, "sum W != N"
                assert int(W.min()) >= 0, "negative W"
                assert int(self.host(self.nk).sum()) == n, "sum n_k != N"
            dt = self.doc_topic_table()
            assert int(dt["count"].sum()) == n, "sum D != N"
            assert int(dt["count"].min()) > 0 if n else True, "non-positive D entry"
            lengths = np.diff(self.ch.doc_ptr)
            assert (dt.groupby("doc_id")["count"].sum().reindex(range(len(lengths)), fill_value=0).to_numpy()
                    == lengths).all(), "D row sums != document lengths"


def _sub_chunks(ch: Chunks, c0: int, c1: int) -> Chunks:
    """Chunks ``[c0, c1)`` of ``ch`` as a stand-alone chunk list (local document ids and positions)."""
    t0, t1 = int(ch.chunk_ptr[c0]), int(ch.chunk_ptr[c1])
    d0, d1 = int(ch.chunk_docs[c0]), int(ch.chunk_docs[c1])
    p0, p1 = int(ch.doc_ptr[d0]), int(ch.doc_ptr[d1])
    return Chunks(ch.word[t0:t1], ch.doc[t0:t1] - d0, ch.keys[t0:t1], ch.doc_ptr[d0:d1 + 1] - p0,
                  ch.doc_tok[p0:p1] - t0, ch.chunk_ptr[c0:c1 + 1] - t0, ch.chunk_docs[c0:c1 + 1] - d0,
                  ch.chunk_split[c0:c1] - t0, ch.vocab, ch.word_count, ch.old_id, ch.n_dense, ch.K)


class ShardedGibbs:
    """One chain over several shards (GPUs): each samples its chunks against a local copy of W; the
    shards' W are summed after every iteration and the sum installed on every shard (EZLDA V-B).

    Because every token draws against the previous pass's counts with a counter-based RNG keyed by
    its global position, the chain equals the single-shard chain draw for draw.

    Parameters
    ----------
    ch : Chunks
        At least ``len(devices)`` chunks; shard ``i`` takes a contiguous group of chunks.
    devices : list
        CUDA device ids (GPU) or ``None`` entries (CPU shards, used to test the reduction).
    """

    def __init__(self, ch: Chunks, K: int, alpha: float, beta: float, seed: int = 0, devices=(None,)):
        n = len(devices)
        if len(ch.chunk_ptr) - 1 < n:
            raise ValueError(f"{len(ch.chunk_ptr) - 1} chunks for {n} shards")
        C = len(ch.chunk_ptr) - 1
        bounds = np.linspace(0, C, n + 1).round().astype(int)
        self.ch, self.K, self.devices = ch, K, list(devices)
        self.gpu = devices[0] is not None
        self.parts = [GibbsState(_sub_chunks(ch, int(bounds[i]), int(bounds[i + 1])), K, alpha, beta, seed=seed,
                                 gpu=self.gpu, V=ch.V, device=devices[i], shard=True) for i in range(n)]
        self.doc_offsets = [int(ch.chunk_docs[b]) for b in bounds[:-1]]
        self._allreduce()

    def _allreduce(self):
        """W = sum of the shards' W, installed on every shard."""
        parts = self.parts
        if not self.gpu:
            W = parts[0].W_local.copy()
            for p in parts[1:]:
                W += p.W_local
            for p in parts:
                p.set_global_w(W)
            return
        import cupy

        with parts[0].ctx():
            acc = parts[0].W_local.copy()
            for p in parts[1:]:
                tmp = cupy.empty_like(acc)
                tmp.data.copy_from_device(p.W_local.data, acc.nbytes)  # peer copy (cudaMemcpyDefault, UVA)
                acc += tmp
            cupy.cuda.Device().synchronize()
        parts[0].set_global_w(acc)
        for p in parts[1:]:
            with p.ctx():
                Wp = cupy.empty_like(p.W_local)
                Wp.data.copy_from_device(acc.data, acc.nbytes)
                cupy.cuda.Device().synchronize()
            p.set_global_w(Wp)

    def step(self, iteration: int, sampler: str, exclude: bool = True) -> dict:
        from concurrent.futures import ThreadPoolExecutor

        def one(p):
            c = p.sample_pass(iteration, sampler, exclude)
            p.commit()
            p.sync()
            return c

        if self.gpu and len(self.parts) > 1:
            with ThreadPoolExecutor(len(self.parts)) as ex:
                cs = list(ex.map(one, self.parts))
        else:
            cs = [one(p) for p in self.parts]
        self._allreduce()
        n = max(1, self.ch.n_tokens)
        return {"skipped": sum(c["skipped"] for c in cs) / n, "changed": sum(c["changed"] for c in cs) / n}

    @property
    def W(self):
        return self.parts[0].W

    def topic_word_table(self):
        return self.parts[0].topic_word_table()

    def nbytes(self) -> dict:
        """Bytes of every shard's state (:meth:`GibbsState.nbytes`), summed."""
        out: dict = {}
        for p in self.parts:
            for k, v in p.nbytes().items():
                out[k] = out.get(k, 0) + v
        return out

    @property
    def nk(self):
        return self.parts[0].nk

    def host(self, a) -> np.ndarray:
        return self.parts[0].host(a)

    def sync(self):
        for p in self.parts:
            p.sync()

    def llpt(self) -> float:
        """EZLDA Eq. 5 (log2, bits per token) over every shard's tokens."""
        return sum(p.llpt_sum() for p in self.parts) / max(1, self.ch.n_tokens)

    def log_likelihood(self) -> float:
        """Total log2 likelihood of every shard's tokens (the sum of EZLDA Eq. 5's terms)."""
        return sum(p.llpt_sum() for p in self.parts)

    def doc_topic_table(self) -> pd.DataFrame:
        tabs = []
        for p, off in zip(self.parts, self.doc_offsets):
            t = p.doc_topic_table()
            t["doc_id"] += off
            tabs.append(t)
        return pd.concat(tabs, ignore_index=True)

    def check_invariants(self):
        n = self.ch.n_tokens
        W = self.host(self.W)
        assert int(W.sum(dtype=np.int64)) == n and int(W.min()) >= 0, "sum W != N or negative W"
        for p in self.parts:
            p.check_invariants()
            np.testing.assert_array_equal(p.host(p.W), W)  # every shard holds the same summed W


__all__ = ["PANEL_WORDS", "SAMPLERS", "GibbsState", "ShardedGibbs", "check_state_memory",
           "panel_words", "resolve_sample_order", "resolve_sampler", "state_bytes"]
