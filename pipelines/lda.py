"""The ``lda`` pipeline: train LDA by GPU Gibbs sampling (papers 000 EZLDA and 001), load, infer.

Model directory (every file Parquet or JSON; written under a temporary name, renamed when complete)::

    params.json          K, alpha, beta, iterations, sampler, seed, V, n_docs, n_tokens, backend,
                         final LLPT, counts, timings, input format and source, tokenizer
    vocab.parquet        word_id: int32 (frequency rank), term: string, count: int64 (tokens),
                         input_id: int64 (the word's id in the input)
    topic_word.parquet   word_id: int32, topic: int32, count: int32 (the nonzeros of W)
    doc_topic.parquet    doc_id: int64, topic: int32, count: int32, theta: float64 (the nonzeros of D;
                         theta = (count + alpha) / (length + K alpha), a topic absent from a document
                         has theta = alpha / (length + K alpha))
    documents.parquet    doc_id: int64, name: string, length: int64
    llpt.parquet         iteration: int32, llpt: float64 (paper 000 Eq. 5, log2, bits per token, of the
                         counts after the iteration; iteration 0 = the random initialisation),
                         seconds: float64 (sampling + count rebuild of that iteration),
                         skipped: float64 (three-branch: fraction of tokens skipped by the S_est test),
                         changed: float64 (fraction of tokens whose topic changed)

``LDAModel.load(dir)`` reads it back: ``top_words``, ``transform`` (inference with W fixed),
``log_likelihood`` / ``perplexity`` on held-out documents (paper 001 Eq. 3-4).
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from cutext.kernels._version import __version__
from cutext.kernels.backend import ARRAY_STACK, resolve_backend
from cutext.pipelines._result import RunResult, atomic_directory, check_output, write_json
from cutext.stages.lda_chunk import (
    BagOfWords,
    LDAInputError,
    bow_from_tokens,
    build_chunks,
    read_bow,
)
from cutext.stages.lda_gibbs import SAMPLERS, GibbsState, ShardedGibbs, resolve_sampler


def train(path, out, *, K=100, iterations=100, alpha=None, beta=0.01, sampler="auto", seed=0,
          exclude_self=True, backend="auto", format="auto", vocab=None, n_chunks=None, llpt_every=1,
          stopwords=None, stemmer=None, lowercase=True, min_len=1, max_len=None, n_devices=1, overwrite=True,
          progress=True, callback=None, client=None, scheduler="auto", n_workers=None, **read_kw) -> RunResult:
    """Train an LDA model by collapsed Gibbs sampling on the GPU (or the CPU twins).

    Parameters
    ----------
    path : str, os.PathLike or list
        A UCI ``docword.*.txt[.gz]`` (vocabulary ``vocab.*.txt`` next to it), an LDA-C file, or any
        corpus the readers take (tokenized and encoded by the stages).
    out : str or os.PathLike
        Model directory to write (atomically).
    K : int
        Topics, >= 2.
    iterations : int
        Gibbs passes over every token, >= 0.
    alpha : float, optional
        Symmetric document-topic prior per topic (default 50 / K, paper 000 section II-B).
    beta : float
        Symmetric topic-word prior (default 0.01).
    sampler : {"auto", "sparse", "three_branch", "dense", "hybrid"}
        ``sparse``: paper 000's two-branch sparsity-aware sampler (Eq. 3-4); ``three_branch``: Eq. 6-10
        with g = 2; ``dense``: paper 001's sampler (DNT precomputed, W panels in shared memory),
        for K <= 4096; ``hybrid``: the conditional of ``sparse`` with W in paper 000's hybrid layout
        (section IV-B: dense rows only for words with more than K tokens, sparse (topic, count) rows for
        the others; SparseLDA buckets for their tokens), for large K on one device (not with
        ``n_devices > 1``); ``auto`` = dense for K <= 256, else three_branch.
    seed : int
        Seed of the counter-based generator; a run is reproducible bit for bit, on CPU and GPU.
    exclude_self : bool
        Take a token out of its own counts when sampling it (collapsed Gibbs, paper 001 Eq. 1).
        False samples paper 000 Eq. 1 as printed (counts include the token).
    backend : {"auto", "cpu", "gpu"}
    format : str
        ``"auto"``, ``"uci"``, ``"ldac"`` or a reader format for text corpora.
    vocab : path, optional
        Vocabulary file for UCI / LDA-C input.
    n_chunks : int, optional
        Chunks of the token list (default ``n_devices``; the sampling result does not depend on it).
    n_devices : int
        GPUs to spread the chunks over (devices 0 .. n-1; each samples its chunks against a local W,
        the W are summed after every iteration, paper 000 section V-B).  On the CPU backend, n > 1
        runs the same sharded chain in-process (used to test the reduction).  The result equals the
        one-device result draw for draw.
    llpt_every : int
        Compute the LLPT every this many iterations (and always after the last); 0 = only at the end.
    stopwords, stemmer, lowercase, min_len, max_len
        Tokenizer settings for text corpora.
    overwrite : bool
    progress : bool
        A tqdm bar over the iterations showing the LLPT.
    callback : callable, optional
        ``callback(iteration, state)`` after every iteration (the tests check invariants there).
    client : distributed.Client, optional
        Text corpora: run the corpus front end (read, tokenize, encode, count;
        :mod:`cutext.stages.corpus`) on this cluster.  The sampler runs in this process.
    scheduler : {"auto", "sync", "threads", "cluster"}
        Text corpora without a client: where the front end runs
        (:func:`cutext.stages.compute.compute_context`).
    n_workers : int, optional
        Workers of a local cluster for the front end.
    **read_kw
        Reader settings for text corpora, passed to :func:`cutext.stages.read.read_corpus`
        (``text_column``, ``id_column``, ``blocksize``, ``encoding``, ``storage_options``,
        ``glob``); ``run()`` checks their names against the reader.

    Returns
    -------
    RunResult
        ``counts``: n_docs, n_empty_docs, n_words, n_tokens, n_dense_words, K; ``timings`` (s): read,
        chunk, init, sample (all iterations), llpt, write; ``params`` include the final LLPT and the
        mean tokens per second of sampling.

    Raises
    ------
    ValueError
        K < 2, iterations < 0, alpha or beta <= 0, unknown sampler; ``LDAInputError`` (a ValueError)
        for malformed input, a corpus without tokens or with a single distinct word.
    FileNotFoundError
    OutputDirectoryError (FileExistsError)
        ``out`` is not a new or empty directory nor an earlier lda output, or is the working
        directory, the input or a parent of either (:mod:`cutext.stages.output`); checked before any work.
    """
    check_output(out, kind="cutext.lda", manifest="params.json", inputs=[path, vocab], overwrite=overwrite)
    from cutext.stages.params import count, number

    K = count("K", K, lo=2)
    iterations = count("iterations", iterations, lo=0)
    alpha = 50.0 / K if alpha is None else number("alpha", alpha, lo=0, lo_open=True)
    beta = number("beta", beta, lo=0, lo_open=True)
    llpt_every = count("llpt_every", llpt_every, lo=1)
    count("n_chunks", n_chunks, lo=1, none_ok=True)
    count("seed", seed, lo=0)
    sampler = resolve_sampler(sampler, K)
    be = resolve_backend(backend)
    gpu = be == "gpu"
    from cutext.stages.tokenize import TokenizerConfig

    tok_cfg = TokenizerConfig.make(lowercase, stopwords, stemmer, min_len, max_len)
    timings: dict = {}
    t0 = time.perf_counter()
    bow, fmt = read_bow(path, format=format, vocab=vocab, tokenizer=tok_cfg, backend=be, client=client,
                        scheduler=scheduler, n_workers=n_workers, **read_kw)
    timings["read"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    n_devices = int(n_devices)
    if n_devices < 1:
        raise ValueError(f"n_devices must be >= 1, got {n_devices}")
    if sampler == "hybrid" and n_devices > 1:
        raise ValueError("sampler='hybrid' runs on one device; the sharded chain (n_devices > 1) keeps W dense")
    if gpu and n_devices > 1:
        from cutext.kernels.backend import device_count

        if device_count() < n_devices:
            raise RuntimeError(f"n_devices={n_devices} but {device_count()} CUDA device(s) are visible")
    ch = build_chunks(bow, K, max(int(n_chunks or 1), n_devices))
    timings["chunk"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if n_devices > 1:
        devices = list(range(n_devices)) if gpu else [None] * n_devices
        state = ShardedGibbs(ch, K, alpha, beta, seed=seed, devices=devices)
    else:
        state = GibbsState(ch, K, alpha, beta, seed=seed, gpu=gpu,
                           w_layout="hybrid" if sampler == "hybrid" else "dense")
    state.sync()
    timings["init"] = time.perf_counter() - t0
    rows = [{"iteration": 0, "llpt": state.llpt(), "seconds": 0.0, "skipped": 0.0, "changed": 1.0}]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=iterations, desc=f"lda K={K}", unit="it")
    t_sample = t_ll = 0.0
    try:
        if callback is not None:
            callback(0, state)
        for it in range(1, iterations + 1):
            t1 = time.perf_counter()
            stats = state.step(it, sampler, exclude=exclude_self)
            state.sync()
            dt = time.perf_counter() - t1
            t_sample += dt
            ll = float("nan")
            if it == iterations or (llpt_every and it % llpt_every == 0):
                t2 = time.perf_counter()
                ll = state.llpt()
                t_ll += time.perf_counter() - t2
            rows.append({"iteration": it, "llpt": ll, "seconds": dt, **stats})
            if callback is not None:
                callback(it, state)
            if bar is not None:
                bar.update(1)
                bar.set_postfix_str(f"LLPT {ll:.4f}" if not np.isnan(ll) else f"{ch.n_tokens / dt / 1e6:.1f} Mtok/s")
    finally:
        if bar is not None:
            bar.close()
    timings["sample"] = t_sample
    timings["llpt"] = t_ll
    t0 = time.perf_counter()
    llpt_df = pd.DataFrame(rows).astype({"iteration": np.int32})
    final = float(llpt_df["llpt"].iloc[-1])
    n_empty = int((np.diff(ch.doc_ptr) == 0).sum())
    counts = {"n_docs": ch.n_docs, "n_empty_docs": n_empty, "n_words": ch.V, "n_tokens": ch.n_tokens,
              "n_dense_words": ch.n_dense, "K": K, "n_chunks": int(len(ch.chunk_ptr) - 1)}
    tps = ch.n_tokens * iterations / t_sample if t_sample > 0 else float("nan")
    params = {"K": K, "iterations": int(iterations), "alpha": alpha, "beta": beta, "sampler": sampler,
              "seed": int(seed), "exclude_self": bool(exclude_self), "format": fmt, "llpt": final,
              "tokens_per_s": tps}
    with atomic_directory(out, overwrite=overwrite, kind="cutext.lda", manifest="params.json",
                          inputs=[path, vocab]) as tmp:
        wv, wk, wc = state.topic_word_table()
        pq.write_table(pa.table({"word_id": wv, "topic": wk, "count": wc}), tmp / "topic_word.parquet")
        pq.write_table(pa.table({"word_id": np.arange(ch.V, dtype=np.int32),
                                 "term": pa.array(ch.vocab, type=pa.string()),
                                 "count": ch.word_count.astype(np.int64), "input_id": ch.old_id.astype(np.int64)}),
                       tmp / "vocab.parquet")
        dtab = state.doc_topic_table()
        lengths = np.diff(ch.doc_ptr)
        dtab["theta"] = (dtab["count"].to_numpy(np.float64) + alpha) / (lengths[dtab["doc_id"].to_numpy()] + K * alpha)
        pq.write_table(pa.Table.from_pandas(dtab, preserve_index=False), tmp / "doc_topic.parquet")
        pq.write_table(pa.table({"doc_id": np.arange(ch.n_docs, dtype=np.int64),
                                 "name": pa.array([str(x) for x in bow.doc_names], type=pa.string()),
                                 "length": lengths.astype(np.int64)}), tmp / "documents.parquet")
        pq.write_table(pa.Table.from_pandas(llpt_df, preserve_index=False), tmp / "llpt.parquet")
        timings["write"] = time.perf_counter() - t0
        write_json(tmp / "params.json", {
            "kind": "cutext.lda", "version": __version__, **params, "V": ch.V, "n_docs": ch.n_docs,
            "n_tokens": ch.n_tokens, "backend": be, "n_devices": n_devices, "source": str(path), "counts": counts,
            "timings": timings, "tokenizer": tok_cfg.to_dict() if fmt not in ("uci", "ldac") else None,
            "memory_bytes": ch.memory_estimate(), "state_bytes": state.nbytes(),
            "front_end": {k: bow.extra[k] for k in ("scheduler", "n_workers", "timings") if k in bow.extra} or None,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    return RunResult("lda", Path(out).absolute(), be, "in-process", n_devices, counts, timings, params)


class LDAModel:
    """A trained LDA model (see the module docstring for the directory layout).

    Attributes
    ----------
    params : dict
    vocab : list of str, length V (word id = frequency rank)
    W : int32 (V, K) word-topic counts
    nk : int64 (K,)
    llpt : pandas.DataFrame (iteration, llpt, seconds, skipped, changed)
    """

    def __init__(self, path, params, vocab, W, llpt, documents, doc_topic):
        self.path = Path(path)
        self.params = params
        self.vocab = vocab
        self.W = W
        self.nk = W.sum(axis=0, dtype=np.int64)
        self.llpt = llpt
        self.documents = documents
        self.doc_topic = doc_topic
        self.K = int(params["K"])
        self.alpha = float(params["alpha"])
        self.beta = float(params["beta"])
        self._index = {w: i for i, w in enumerate(vocab)}

    @classmethod
    def load(cls, path) -> LDAModel:
        """Read a model directory written by :func:`train`, checking every table against params.json.

        Raises
        ------
        ArtifactNotFoundError (ArtifactError, FileNotFoundError)
            Missing directory or file.
        ArtifactError (ValueError)
            Not an LDA model directory, or a corrupt one (the message names the directory and file):
            K, alpha, beta, V, n_docs or n_tokens missing or out of range; word ids outside [0, V),
            topics outside [0, K), doc ids outside [0, n_docs), negative counts, counts that do not
            add up to n_tokens or to the document lengths.
        """
        from cutext.stages import artifacts as art

        path = Path(path)
        params = art.read_manifest(path, "params.json", "cutext.lda", "a cutext LDA model")
        pf = path / "params.json"
        K = art.field_int(params, "K", pf, lo=2)
        art.field_float(params, "alpha", pf, lo=0, lo_open=True)
        art.field_float(params, "beta", pf, lo=0, lo_open=True)
        V = art.field_int(params, "V", pf, lo=1)
        n_docs = art.field_int(params, "n_docs", pf, lo=0)
        n_tokens = art.field_int(params, "n_tokens", pf, lo=0)
        f = path / "vocab.parquet"
        voc = art.read_table(f, {"word_id": "int", "term": "string"}, "vocabulary").to_pandas()
        if len(voc) != V or not np.array_equal(np.sort(voc["word_id"].to_numpy()), np.arange(V)):
            raise art.ArtifactError(f"{f}: expected word ids 0..{V - 1} (V={V} in params.json), got {len(voc)} rows")
        voc = voc.sort_values("word_id")
        f = path / "topic_word.parquet"
        tw = art.read_table(f, {"word_id": "int", "topic": "int", "count": "int"}, "topic-word table").to_pandas()
        art.check_range(tw["word_id"].to_numpy(), 0, V - 1, "word ids", f)
        art.check_range(tw["topic"].to_numpy(), 0, K - 1, "topics", f)
        art.check_range(tw["count"].to_numpy(), 0, n_tokens, "counts", f)
        if int(tw["count"].sum()) != n_tokens:
            raise art.ArtifactError(f"{f}: counts add up to {int(tw['count'].sum())}, params.json says "
                                    f"n_tokens={n_tokens}")
        W = np.zeros((V, K), dtype=np.int32)
        W[tw["word_id"].to_numpy(), tw["topic"].to_numpy()] = tw["count"].to_numpy()
        f = path / "documents.parquet"
        docs = art.read_table(f, {"doc_id": "int", "name": "string", "length": "int"}, "documents table").to_pandas()
        if len(docs) != n_docs or not np.array_equal(docs["doc_id"].to_numpy(), np.arange(n_docs)):
            raise art.ArtifactError(f"{f}: expected doc ids 0..{n_docs - 1} in order (n_docs={n_docs})")
        art.check_range(docs["length"].to_numpy(), 0, n_tokens, "lengths", f)
        f = path / "doc_topic.parquet"
        dtc = art.read_table(f, {"doc_id": "int", "topic": "int", "count": "int"}, "doc-topic table").to_pandas()
        art.check_range(dtc["doc_id"].to_numpy(), 0, max(n_docs - 1, 0), "doc ids", f)
        art.check_range(dtc["topic"].to_numpy(), 0, K - 1, "topics", f)
        art.check_range(dtc["count"].to_numpy(), 0, n_tokens, "counts", f)
        per_doc = np.bincount(dtc["doc_id"].to_numpy(), weights=dtc["count"].to_numpy(), minlength=n_docs)
        if len(per_doc) != n_docs or not np.array_equal(per_doc, docs["length"].to_numpy()):
            raise art.ArtifactError(f"{f}: counts per document do not match the lengths in documents.parquet")
        dt = pq.read_table(f).to_pandas()  # with its theta column, which ties K and alpha to the counts
        if "theta" in dt.columns and len(dt):
            alpha = float(params["alpha"])
            lengths = docs["length"].to_numpy(np.float64)[dtc["doc_id"].to_numpy()]
            expect = (dtc["count"].to_numpy(np.float64) + alpha) / (lengths + K * alpha)
            if not np.allclose(dt["theta"].to_numpy(np.float64), expect, rtol=1e-6, atol=0):
                raise art.ArtifactError(f"{f}: theta does not match K={K} and alpha={alpha} of params.json")
        art.read_table(path / "llpt.parquet", {"llpt": "float"}, "LLPT table")
        llpt = pq.read_table(path / "llpt.parquet").to_pandas()
        return cls(path, params, voc["term"].astype(str).tolist(), W, llpt, docs, dt)

    @property
    def phi(self) -> np.ndarray:
        """float64 (K, V): (W[v][k] + beta) / (n_k + V beta)."""
        return ((self.W + self.beta) / (self.nk + len(self.vocab) * self.beta)).T

    def theta(self) -> np.ndarray:
        """float64 (n_docs, K) training document-topic distributions (D + alpha) / (L + K alpha)."""
        n = len(self.documents)
        lengths = self.documents["length"].to_numpy(np.float64)
        th = np.zeros((n, self.K))
        th[self.doc_topic["doc_id"].to_numpy(), self.doc_topic["topic"].to_numpy()] = self.doc_topic["count"]
        return (th + self.alpha) / (lengths[:, None] + self.K * self.alpha)

    def top_words(self, n: int = 10) -> pd.DataFrame:
        """The ``n`` most probable words of every topic: ``(topic, rank, term, prob)``, rank 0 first."""
        phi = self.phi
        n = min(n, phi.shape[1])
        idx = np.argsort(-phi, axis=1, kind="stable")[:, :n]
        K = phi.shape[0]
        return pd.DataFrame({"topic": np.repeat(np.arange(K), n), "rank": np.tile(np.arange(n), K),
                             "term": [self.vocab[i] for i in idx.ravel()],
                             "prob": np.take_along_axis(phi, idx, axis=1).ravel()})

    def _bow(self, docs) -> BagOfWords:
        if isinstance(docs, BagOfWords):
            lists = []
            for d in range(docs.n_docs):
                a, b = docs.doc_ptr[d], docs.doc_ptr[d + 1]
                lists.append([docs.vocab[w] for w, c in zip(docs.word[a:b], docs.count[a:b]) for _ in range(int(c))])
            docs = lists
        docs = list(docs)
        if docs and isinstance(docs[0], str):
            from cutext.stages.tokenize import TokenizerConfig, tokenize_texts

            cfg = self.params.get("tokenizer") or {}
            tc = TokenizerConfig.make(cfg.get("lowercase", True), cfg.get("stopwords"), cfg.get("stemmer"),
                                      cfg.get("min_len", 1), cfg.get("max_len"))
            docs = tokenize_texts(docs, tc)
        return bow_from_tokens(docs, self.vocab)

    def _fold_in(self, docs, iterations, seed, backend, sampler):
        bow = self._bow(docs)
        be = resolve_backend(backend, needs=ARRAY_STACK)
        if bow.n_tokens == 0:
            return None, bow
        ch = build_chunks(bow, self.K, 1, relabel=False)
        state = GibbsState(ch, self.K, self.alpha, self.beta, seed=seed, gpu=be == "gpu", W_fixed=self.W,
                           vbeta=len(self.vocab) * self.beta)
        smp = "sparse" if sampler in ("auto", "hybrid") else sampler  # W fixed is dense: hybrid = sparse
        for it in range(1, iterations + 1):
            state.step(it, smp, exclude=True)
        return state, bow

    def transform(self, docs, iterations: int = 50, seed: int = 0, backend: str = "auto", sampler: str = "auto"):
        """Topic distributions of new documents, W fixed (Gibbs sampling of their topics only).

        Parameters
        ----------
        docs : list of str (tokenized as in training), list of token lists, or BagOfWords
            Words not in the model's vocabulary are ignored.
        iterations : int
            Gibbs passes.
        seed : int
        backend : {"auto", "cpu", "gpu"}
            Where the fold-in samples.  ``"auto"`` (the default of every loader) = the GPU when
            cupy is installed and a device is visible, else the CPU; a given seed draws the same
            topics on both.
        sampler : {"auto", "sparse", "three_branch", "dense"}

        Returns
        -------
        float64 (n_docs, K): (D + alpha) / (L + K alpha) after the last pass (rows sum to 1).
        """
        state, bow = self._fold_in(docs, iterations, seed, backend, sampler)
        n = bow.n_docs
        th = np.zeros((n, self.K))
        lengths = bow.doc_lengths.astype(np.float64)
        if state is not None:
            dt = state.doc_topic_table()
            th[dt["doc_id"].to_numpy(), dt["topic"].to_numpy()] = dt["count"].to_numpy()
        return (th + self.alpha) / (lengths[:, None] + self.K * self.alpha)

    def log_likelihood(self, docs, iterations: int = 50, seed: int = 0, backend: str = "auto") -> float:
        """Held-out per-word log-likelihood (natural log), paper 001 Eq. 3-4.

        ``(1 / W_test) sum_tokens ln sum_k phi[k][v] theta[j][k]`` with phi from the model and theta
        from :meth:`transform` of the same documents (fold-in with W fixed).  ``backend``: as in
        :meth:`transform` (default ``"auto"``).

        Raises
        ------
        ValueError
            None of the documents' words is in the vocabulary.
        """
        state, _ = self._fold_in(docs, iterations, seed, backend, "auto")
        if state is None:
            raise ValueError("no token of these documents is in the model's vocabulary")
        terms = state.log2_likelihood_terms()
        return float(terms.mean() * np.log(2.0))

    def perplexity(self, docs, iterations: int = 50, seed: int = 0, backend: str = "auto") -> float:
        """``exp(-log_likelihood(docs))`` (paper 001 Eq. 3-4); ``backend`` as in :meth:`transform` (default ``"auto"``)."""
        return float(np.exp(-self.log_likelihood(docs, iterations, seed, backend)))


# ----------------------------------------------------------------------------- CLI

def add_cli(sub):
    p = sub.add_parser("lda", help="train an LDA topic model (GPU Gibbs sampling)",
                       description="Train LDA by collapsed Gibbs sampling (EZLDA / paper 001 samplers). Input: a "
                                   "UCI docword file, an LDA-C file, or any text corpus the readers take.")
    p.add_argument("path", help="docword.*.txt[.gz], *.ldac, or a corpus (file, directory, glob)")
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("-K", "--topics", type=int, default=100, help="number of topics (default 100)")
    p.add_argument("--iterations", type=int, default=100, help="Gibbs passes (default 100)")
    p.add_argument("--alpha", type=float, default=None, help="document-topic prior (default 50/K)")
    p.add_argument("--beta", type=float, default=0.01, help="topic-word prior (default 0.01)")
    p.add_argument("--sampler", default="auto", choices=list(SAMPLERS), help="default: dense for K<=256")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", "gpu"])
    p.add_argument("--format", default="auto", help="auto, uci, ldac, or a corpus format (lines, jsonl, ...)")
    p.add_argument("--vocab", default=None, help="vocabulary file for UCI / LDA-C input")
    p.add_argument("--stopwords", default=None, help="for text corpora: 'lucene' or a file")
    p.add_argument("--top", type=int, default=0, help="print this many top words per topic")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(cli_main=_cli_main)


def _cli_main(args) -> int:
    r = train(args.path, args.out, K=args.topics, iterations=args.iterations, alpha=args.alpha, beta=args.beta,
              sampler=args.sampler, seed=args.seed, backend=args.backend, format=args.format, vocab=args.vocab,
              stopwords=args.stopwords, progress=not args.no_progress)
    print(str(r))
    print(f"  LLPT (paper 000 Eq. 5, bits/token) = {r.params['llpt']:.4f}")
    if args.top:
        tw = LDAModel.load(r.path).top_words(args.top)
        for k, g in tw.groupby("topic"):
            print(f"  topic {k}: " + " ".join(g["term"]))
    return 0


__all__ = ["SAMPLERS", "LDAInputError", "LDAModel", "resolve_sampler", "train"]
