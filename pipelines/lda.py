"""The ``lda`` pipeline: train LDA by GPU Gibbs sampling (papers 000 EZLDA and 001), load, infer.

Model directory (every file Parquet or JSON; written under a temporary name, renamed when complete)::

    params.json          K, alpha, beta, iterations, sampler, seed, V, n_docs, n_tokens, backend,
                         final LLPT, counts, timings, input format and source, tokenizer, stopwords,
                         min_df, max_df and pruning (what they removed), sampling
                         (where the chain ran: in-process devices, or client workers and the collective)
    vocab.parquet        word_id: int32 (frequency rank), term: string, count: int64 (tokens),
                         input_id: int64 (the word's id in the input)
    topic_word.parquet   word_id: int32, topic: int32, count: int32 (the nonzeros of W)
    doc_topic.parquet    doc_id: int64, source_id: string, topic: int32, count: int32, theta: float64
                         (the nonzeros of D; theta = (count + alpha) / (length + K alpha), a topic
                         absent from a document has theta = alpha / (length + K alpha))
    documents.parquet    doc_id: int64, source_id: string, length: int64, topic: int32 (the document's
                         main topic: the largest count, the smaller topic on a tie; -1 without a token),
                         topic_prob: float64 (theta of that topic; 1 / K without a token)

``doc_id`` is the document's position 0..D-1 in the input (as in every cutext output) and
``source_id`` the caller's id (the UCI / LDA-C document number, the id column or member path of a
text corpus).  Models written before this rule name the source id ``name``; ``LDAModel.load`` reads
both.
    llpt.parquet         iteration: int32, llpt: float64 (EZLDA Eq. 5, log2, bits per token, of the
                         counts after the iteration; iteration 0 = the random initialisation),
                         seconds: float64 (sampling + count rebuild of that iteration),
                         skipped: float64 (three-branch: fraction of tokens skipped by the S_est test),
                         changed: float64 (fraction of tokens whose topic changed)

``LDAModel.load(dir)`` reads it back: ``top_words``, ``transform`` (inference with W fixed, of lists or of
pandas / cudf / dask / dask-cudf frames),
``log_likelihood`` / ``perplexity`` on held-out documents (Moon et al. Eq. 3-4).
"""
from __future__ import annotations

import inspect
import json
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from cutext.kernels.backend import device_count
from cutext.pipelines._cli import Command, print_result
from cutext.pipelines._result import RunResult, param_files
from cutext.pipelines._run import PipelineRun
from cutext.stages.engines.lda_chunk import (
    LDAInputError,
    check_df_limit,
    detect_format,
    lda_chunks,
    prune_bow,
    read_bow,
)
from cutext.stages.engines.lda_dist import COLLECTIVES, DistributedGibbs
from cutext.stages.engines.lda_gibbs import SAMPLERS, GibbsState, ShardedGibbs, check_state_memory, resolve_sampler
from cutext.stages.engines.lda_model import LDAModel, check_iterations, main_topics
from cutext.stages.readers.frames import input_label
from cutext.stages.readers.source import read_corpus
from cutext.stages.runtime.params import count, flag, number, param
from cutext.stages.text.tokenize import STOPWORD_SETS, TokenizerConfig, resolve_stopwords

# a client's shards run this many iterations a call (NCCL sums W among them): one round trip, not two a pass
STEPS_PER_CALL = 10
# the default document-topic prior per topic (tomotopy's): sharper documents and better held-out likelihood
# than 50 / K at equal coherence on 20 Newsgroups and Reuters-21578 (docs/decisions.md)
ALPHA = 0.1
# K="auto": sqrt(n_docs / 2) topics within these bounds (benchmarks/lda_defaults.py, docs/decisions.md)
AUTO_K_MIN, AUTO_K_MAX = 10, 100
# min_df="auto" / max_df="auto" on a text corpus: words in one document, and in more than 30 % of them, are dropped
AUTO_MIN_DF, AUTO_MAX_DF = 2, 0.3
# below this many documents "auto" prunes nothing: 30 % of a handful of documents leaves hardly any word
AUTO_PRUNE_MIN_DOCS = 50


def auto_topics(n_docs: int) -> int:
    """The number of topics ``K="auto"`` gives a corpus of ``n_docs`` documents.

    ``round(sqrt(n_docs / 2))`` (the rule of thumb for the number of clusters, Mardia, Kent and Bibby 1979,
    p. 365) within [:data:`AUTO_K_MIN`, :data:`AUTO_K_MAX`]: 10 topics up to 220 documents, 33 for 2,225, 100
    from 19,801 on.  On 20 Newsgroups, Reuters-21578 and CACM its topics are more coherent (NPMI on held-out
    documents) than K=100's (benchmarks/lda_defaults.py).

    Parameters
    ----------
    n_docs : int
        Documents of the corpus (>= 0; empty documents count).

    Returns
    -------
    int
        K in [10, 100].
    """
    n = count("n_docs", n_docs, lo=0)
    return int(min(AUTO_K_MAX, max(AUTO_K_MIN, round((n / 2) ** 0.5))))


def train(path, out, *, K="auto", iterations=100, alpha=ALPHA, beta=0.01, sampler="auto", seed=0,
          exclude_self=True, backend="auto", format="auto", vocab=None, n_chunks=None, llpt_every=1,
          stopwords="auto", min_df="auto", max_df="auto", stemmer=None, lowercase=True, min_len=1, max_len=None,
          n_devices=1, overwrite=True,
          progress=True, callback=None, client=None, scheduler="auto", n_workers=None, collective="auto",
          **read_kw) -> RunResult:
    """Train an LDA model by collapsed Gibbs sampling on the GPU (or the CPU twins).

    Parameters
    ----------
    path : str, os.PathLike, list, or a frame
        A UCI ``docword.*.txt[.gz]`` (vocabulary ``vocab.*.txt`` next to it), an LDA-C file, or any
        corpus the readers take (tokenized and encoded by the stages), or a pandas / cudf / dask /
        dask-cudf DataFrame or Series (``text_column=``, ``id_column=``;
        :mod:`cutext.stages.readers.frames`).
    out : str or os.PathLike
        Model directory to write (atomically).
        ``pipelines.run("lda", path)`` and the CLI default to ``"lda-out"`` (one rule for
        every pipeline: ``"<name>-out"`` in the working directory).  A local path or a ``file://`` URL
        (another URL is refused before any work: :mod:`cutext.stages.runtime.output`); this process
        writes it, the workers of ``client`` do not.
    K : int or "auto"
        Topics, >= 2.  ``"auto"`` (default): ``round(sqrt(n_docs / 2))`` within [10, 100] (:func:`auto_topics`:
        10 up to 220 documents, 33 for 2,225, 100 from 19,801), the documents counted after reading;
        params.json records the K used.
    iterations : int
        Gibbs passes over every token, an integer in [1, 100000] (as ``LDAModel.transform``'s: a float such
        as ``1e9`` or a bool is refused).
    alpha : float
        Symmetric document-topic prior per topic (default 0.1, tomotopy's default and Moon et al.'s setting;
        None = the default; EZLDA section II-B uses Griffiths and Steyvers' 50 / K: pass ``alpha=50 / K``), in
        [1e-10, 1e6] (:data:`cutext.stages.runtime.params.FLOAT_LIMITS`: one count must still move the float32
        sampling tables).
    beta : float
        Symmetric topic-word prior (default 0.01), in [1e-10, 1e6] (same reason).
    sampler : {"auto", "sparse", "three_branch", "dense", "hybrid"}
        ``sparse``: EZLDA's two-branch sparsity-aware sampler (Eq. 3-4); ``three_branch``: Eq. 6-10
        with g = 2; ``dense``: Moon et al.'s sampler (DNT precomputed, W panels in shared memory),
        for K <= 4096; ``hybrid``: the conditional of ``sparse`` with W in EZLDA's hybrid layout
        (section IV-B: dense rows only for words with more than K tokens, sparse (topic, count) rows for
        the others; SparseLDA buckets for their tokens), for large K on one device (not with
        ``n_devices > 1``); ``auto`` = sparse (the fastest at every K measured, docs/decisions.md).
    seed : int
        Seed of the counter-based generator; a run is reproducible bit for bit, on CPU and GPU.
    exclude_self : bool
        Take a token out of its own counts when sampling it (collapsed Gibbs, Moon et al. Eq. 1).
        False samples EZLDA Eq. 1 as printed (counts include the token).
    backend : {"auto", "cpu", "gpu"}
    format : str
        ``"auto"``, ``"uci"``, ``"ldac"`` or a reader format for text corpora.
    vocab : path, optional
        Vocabulary file for UCI / LDA-C input; refused with a text corpus.
    n_chunks : int, optional
        Chunks of the token list (default ``n_devices``, or the number of sampling workers with a
        ``client``; the sampling result does not depend on it).
    n_devices : int
        GPUs to spread the chunks over (devices 0 .. n-1; each samples its chunks against a local W,
        the W are summed after every iteration, EZLDA section V-B).  On the CPU backend, n > 1
        runs the same sharded chain in-process (used to test the reduction).  The result equals the
        one-device result draw for draw.
    llpt_every : int
        Compute the LLPT every this many iterations (and always after the last); 0 = only at the end; an
        integer in [0, 100000].
    stopwords : "auto", str, os.PathLike, list of str or None
        ``"auto"`` (default): ``"english-topics"`` for a text corpus -- Snowball's English stop list
        (:data:`cutext.stages.text.tokenize.ENGLISH_STOPWORDS`) and 50 words of closed classes a topic never needs
        (:data:`cutext.stages.text.tokenizer_config.TOPIC_EXTRA_STOPWORDS`: modal verbs, number words, general
        adverbs and quantifiers, ``said``, ``says``, ``mr`` ...; 196 tokens) -- and none for a UCI / LDA-C input
        (its vocabulary is already chosen).  Otherwise a list name (``"english"``, ``"english-topics"``,
        ``"lucene"``, ``"none"``), a file (one word per line) or the words; None = none.  A text corpus drops them
        in the tokenizer; a UCI / LDA-C input drops them from its vocabulary (the term lowercased).
    min_df, max_df : int, float or "auto"
        Document-frequency pruning after counting, as scikit-learn's ``CountVectorizer`` and gensim's
        ``Dictionary.filter_extremes`` (``no_below`` / ``no_above``): a word is kept when it is in at least
        ``min_df`` and at most ``max_df`` documents; an int counts documents (>= 1), a float is a fraction of
        them in [0, 1]; ``min_df=1, max_df=1.0`` prune nothing.  ``"auto"`` (default): ``min_df=2, max_df=0.3``
        for a text corpus of at least 50 documents (a word of one document belongs to no topic; a word in
        more than 30 % of the documents, such as ``said``, ``film`` in film reviews or a mail header, fills every
        topic), no pruning for a smaller one or a UCI / LDA-C input (its vocabulary is already chosen).  A subject
        word goes too where its subject fills a third of the corpus: ``pruning`` in params.json (and the CLI)
        names the most frequent words removed; pass ``max_df=1.0`` to keep them.  With ``stopwords="auto"`` and
        ``K="auto"``, 10 % or less of the topics' top-10 words are in scikit-learn's 318-word stop list on ten
        corpora of news, posts, abstracts, reviews, speeches and one-line texts (``benchmarks/lda_defaults.py``,
        docs/decisions.md).  Any input format.  params.json records the values used and ``pruning`` (words and
        tokens removed, the most frequent of them).
    stemmer, lowercase, min_len, max_len
        Tokenizer settings for text corpora; refused (when not the default) with a UCI / LDA-C input, whose
        words are already counted.
    overwrite : bool
    progress : bool
        Show the progress of the iterations (with the LLPT) and, for a text corpus, of the front
        end's stages (partitions done / total): a bar when standard error is a terminal, else a
        plain line every 10 s and one per finished stage.
    callback : callable, optional
        ``callback(iteration, state)`` after every iteration (the tests check invariants there).
    client : distributed.Client, optional
        Run on this cluster: text corpora's front end (read, tokenize, encode, count;
        :mod:`cutext.stages.text.frontend`) as tasks on its workers, then the sampler with one shard of
        documents per worker (:class:`cutext.stages.engines.lda_dist.DistributedGibbs`): every worker samples its
        chunk against the summed W of the previous pass, and the workers' W are summed after every
        iteration (``collective``).  The chain equals the in-process chain with the same chunking
        (``n_devices=n`` / ``n_chunks=n``) draw for draw.  On a dask-cuda cluster each worker uses its
        GPU (``backend`` resolved in this process: ``"gpu"`` for GPU workers).  The model directory is
        written by this process.  Not with ``n_devices > 1`` (the in-process multi-GPU mode for one
        machine) nor ``sampler="hybrid"``.
    scheduler : {"auto", "sync", "threads", "cluster"}
        Text corpora without a client: where the front end runs
        (:func:`cutext.stages.runtime.compute.compute_context`); refused with a client and with a UCI / LDA-C
        input.
    n_workers : int, optional
        Without a client: workers of a local cluster for the front end of a text corpus (also with
        ``scheduler="auto"``; refused with ``"sync"`` / ``"threads"`` and with a UCI / LDA-C input).  With a client: how
        many of its workers sample (the first ``n_workers`` addresses in sorted order; default all).
    collective : {"auto", "nccl", "client"}
        With a client: how W is summed between the workers every iteration -- ``"nccl"``: ncclAllReduce
        in GPU memory (``cupy.cuda.nccl``; communicator set up through the client); ``"client"``: local
        W copied to the client, summed, sent back; ``"auto"``: nccl on GPU workers where NCCL is
        available, else client.  Without a client only ``"auto"`` is accepted.
    **read_kw
        Reader settings for text corpora, passed to :func:`cutext.stages.readers.source.read_corpus`
        (``text_column``, ``id_column``, ``blocksize``, ``encoding``, ``storage_options``,
        ``glob``); ``run()`` checks their names against the reader.  Refused with a UCI / LDA-C input.

    Returns
    -------
    RunResult
        ``counts``: n_docs, n_empty_docs, n_words, n_tokens, n_dense_words, K; ``timings`` (s): read,
        chunk, init, sample (all iterations), llpt, write; ``params`` include the final LLPT and the
        mean tokens per second of sampling.

    Raises
    ------
    ValueError
        K neither an integer >= 2 nor ``"auto"``, iterations not an integer in [1, 100000], alpha or beta outside
        [1e-10, 1e6] (or <= 0), unknown sampler, stopwords that are not a name, path or list of words, ``min_df`` /
        ``max_df`` that are not ``"auto"``, an int >= 1 or a float in [0, 1] (checked before any work), bounds no
        word can meet; a setting the input cannot use (``vocab`` with a text corpus; tokenizer, reader,
        ``scheduler`` or ``n_workers`` settings with a UCI / LDA-C input); ``exclude_self`` not a bool; a
        ``callback`` that is not callable; ``LDAInputError`` (a ValueError) for malformed input, a corpus without
        tokens or with a single distinct word (after pruning, the message names the bounds and the most frequent
        words removed).
    ResourceLimitError (MemoryError, ValueError)
        The sampler's arrays for this K and vocabulary (word-topic counts and tables, V x K) exceed the
        memory available (host, or the device's on the GPU); checked after reading the corpus, before
        any K-sized array is allocated (:func:`cutext.stages.engines.lda_gibbs.check_state_memory`).
    FileNotFoundError
    OutputDirectoryError (FileExistsError)
        ``out`` is not a new or empty directory nor an earlier lda output, or is the working
        directory, the input or a parent of either (:mod:`cutext.stages.runtime.output`); checked before any work.
    """
    run = PipelineRun("lda", out, manifest="params.json", inputs=[path, vocab, *param_files(stopwords)],
                      overwrite=overwrite, progress=progress)
    chain = _Chain.checked(K, iterations, alpha, beta, sampler, seed, exclude_self, llpt_every, n_chunks, n_devices)
    if callback is not None and not callable(callback):  # else a TypeError after the corpus is read
        raise ValueError(f"{param('callback', bare=True)} must be a function callback(iteration, state), "
                         f"got {callback!r}")
    vocab_input = (detect_format(path) if format == "auto" else format) in ("uci", "ldac")
    _check_input_settings(vocab_input, vocab=vocab, lowercase=lowercase, stemmer=stemmer, min_len=min_len,
                          max_len=max_len, scheduler=scheduler, n_workers=None if client is not None else n_workers,
                          **read_kw)
    stopwords = _stopwords(stopwords, vocab_input)
    text_stop, vocab_stop = (None, resolve_stopwords(stopwords)) if vocab_input else (stopwords, frozenset())
    prune = {"stopwords": vocab_stop, "min_df": _df_limit("min_df", min_df), "max_df": _df_limit("max_df", max_df)}
    be, tok_cfg = run.resolve_backend(backend), TokenizerConfig.make(lowercase, text_stop, stemmer, min_len, max_len)
    # with a client n_workers counts the sampling workers; the front end runs on all of the client's
    bow, fmt = _read(run, path, be, tok_cfg, format=format, vocab=vocab, client=client, scheduler=scheduler,
                     n_workers=None if client is not None else n_workers, prune=prune, **read_kw)
    bow.extra["pruning"]["stopwords"] = _stopword_label(stopwords, len(tok_cfg.stopwords | vocab_stop))
    chain = chain.sized(bow.n_docs)
    return _fit(run, path, bow, fmt, chain, be, tok_cfg, client=client, n_workers=n_workers, collective=collective,
                callback=callback)


@dataclass(frozen=True)
class _Chain:
    """The parameters of the Gibbs chain, checked (see :func:`train`)."""

    K: int | str  # "auto" until the corpus is read (:meth:`sized`)
    iterations: int
    alpha: float
    beta: float
    sampler: str  # resolved: "sparse", "three_branch", "dense" or "hybrid"
    seed: int
    exclude_self: bool
    llpt_every: int
    n_chunks: int | None
    n_devices: int

    @classmethod
    def checked(cls, K, iterations, alpha, beta, sampler, seed, exclude_self, llpt_every, n_chunks,
                n_devices) -> _Chain:
        """Check the chain's parameters, in this order, and resolve the defaults (alpha None = :data:`ALPHA`, the
        sampler).

        Raises
        ------
        ValueError
            K neither an integer >= 2 nor ``"auto"``, iterations not an integer in [1, 100000], alpha or beta
            outside [1e-10, 1e6] (or <= 0), llpt_every not an integer in [0, 100000],
            n_chunks < 1, seed < 0, n_devices < 1, an unknown sampler, exclude_self not a bool.
        """
        if not (isinstance(K, str) and K == "auto"):
            if isinstance(K, str):
                raise ValueError(f"{param('K', K)}: give an integer >= 2 or \"auto\" (sqrt(n_docs / 2) in "
                                 f"[{AUTO_K_MIN}, {AUTO_K_MAX}])")
            K = count("K", K, lo=2)
        iterations = check_iterations("iterations", iterations)
        alpha = ALPHA if alpha is None else number("alpha", alpha, lo=0, lo_open=True)
        beta = number("beta", beta, lo=0, lo_open=True)
        llpt_every = check_iterations("llpt_every", llpt_every, lo=0)  # 0: the LLPT after the last iteration only
        exclude_self = flag("exclude_self", exclude_self)
        count("n_chunks", n_chunks, lo=1, none_ok=True)
        count("seed", seed, lo=0)
        n_devices = count("n_devices", n_devices, lo=1)
        sampler = resolve_sampler(sampler, AUTO_K_MAX if K == "auto" else K)
        return cls(K, iterations, alpha, beta, sampler, seed, exclude_self, llpt_every, n_chunks, n_devices)

    def sized(self, n_docs: int) -> _Chain:
        """The chain with ``K="auto"`` resolved for a corpus of ``n_docs`` documents (:func:`auto_topics`)."""
        return replace(self, K=auto_topics(n_docs)) if self.K == "auto" else self


def _read(run: PipelineRun, path, be: str, tok_cfg: TokenizerConfig, *, format, vocab, client, scheduler,
          n_workers, prune, **read_kw):
    """The read stage: ``(bow, fmt)`` of :func:`cutext.stages.engines.lda_chunk.read_bow` (a text corpus
    through the front end, which shows its stages' progress), pruned after counting by
    :func:`cutext.stages.engines.lda_chunk.prune_bow` (``prune``: its keywords)."""
    read = run.start("read")
    with run.shown():  # a text corpus: the front end shows partitions done / total
        bow, fmt = read_bow(path, format=format, vocab=vocab, tokenizer=tok_cfg, backend=be, client=client,
                            scheduler=scheduler, n_workers=n_workers, **read_kw)
    bow = prune_bow(bow, **_auto_pruning(prune, bow.n_docs, fmt in ("uci", "ldac")))
    read()
    return bow, fmt


def _df_limit(name: str, value):
    """``min_df`` / ``max_df`` checked before any work: ``"auto"`` as it is, else
    :func:`cutext.stages.engines.lda_chunk.check_df_limit`."""
    if isinstance(value, str) and value == "auto":
        return value
    return check_df_limit(name, value)


def _auto_pruning(prune: dict, n_docs: int, vocab_input: bool) -> dict:
    """``prune`` with ``min_df="auto"`` / ``max_df="auto"`` resolved: :data:`AUTO_MIN_DF` and :data:`AUTO_MAX_DF`
    for a text corpus of at least :data:`AUTO_PRUNE_MIN_DOCS` documents, else no pruning (1 and 1.0)."""
    on = not vocab_input and n_docs >= AUTO_PRUNE_MIN_DOCS
    auto = {"min_df": AUTO_MIN_DF if on else 1, "max_df": AUTO_MAX_DF if on else 1.0}
    return {k: auto[k] if isinstance(v, str) and v == "auto" else v for k, v in prune.items()}


# the settings that only a text corpus uses, with their defaults in train() (the reader's from its signature)
_TEXT_ONLY = {"lowercase": True, "stemmer": None, "min_len": 1, "max_len": None, "scheduler": "auto",
              "n_workers": None}


def _check_input_settings(vocab_input: bool, *, vocab, **given) -> None:
    """Refuse what the input cannot use: ``vocab`` with a text corpus (its vocabulary comes from its tokens);
    tokenizer, reader and front-end settings with a UCI / LDA-C input (already counted words, read on the
    host).  ``given``: those settings, the reader's keywords among them.

    Raises
    ------
    ValueError
        Names the first such parameter and the input kind.
    """
    if not vocab_input:
        if vocab is not None:
            raise ValueError(f"{param('vocab')} is the vocabulary file of a UCI / LDA-C input; a text corpus takes "
                             f"its words from its tokens: drop {param('vocab', bare=True)}")
        return
    reader = inspect.signature(read_corpus).parameters
    for name, value in given.items():
        default = _TEXT_ONLY[name] if name in _TEXT_ONLY else reader[name].default if name in reader else None
        if value is not default and value != default:
            raise ValueError(f"{param(name, value)} is a setting of text corpora; a UCI / LDA-C input holds "
                             f"counted word ids and is read on the host: drop {param(name, bare=True)}")


def _stopword_label(stopwords, n: int) -> str:
    """How params.json names the stopwords a run dropped: a built-in list's name, else their number."""
    if stopwords is None:
        return "none"
    if isinstance(stopwords, str) and stopwords in STOPWORD_SETS:
        return stopwords
    return f"{n} words"


def _stopwords(stopwords, vocab_input: bool):
    """``stopwords="auto"`` resolved: ``"english-topics"`` (Snowball's English list and closed classes) for a text
    corpus, None for a UCI / LDA-C input, whose vocabulary was chosen by whoever built it; any other value as given
    (with such an input its words are dropped from that vocabulary,
    :func:`cutext.stages.engines.lda_chunk.prune_bow`)."""
    if isinstance(stopwords, str) and stopwords == "auto":
        return None if vocab_input else "english-topics"
    return stopwords


def _fit(run: PipelineRun, path, bow, fmt: str, chain: _Chain, be: str, tok_cfg: TokenizerConfig, *, client,
         n_workers, collective, callback) -> RunResult:
    """Chunk, initialise, sample and write the model: the stages of :func:`train` after the read.

    Raises
    ------
    ValueError, RuntimeError
        See :func:`_chunks`.
    ResourceLimitError
        The sampler's state does not fit the memory (:func:`cutext.stages.engines.lda_gibbs.check_state_memory`).
    """
    c, gpu = chain, be == "gpu"
    workers, ch = run.stage("chunk", _chunks, bow, c.K, c.n_chunks, c.n_devices, c.sampler, gpu, client=client,
                            n_workers=n_workers, collective=collective)
    if not workers:  # a client's workers hold their shards in their own memory
        check_state_memory(ch, c.K, c.sampler, gpu=gpu, n_states=1 if gpu else c.n_devices)
    state = run.stage("init", _init_state, ch, c, gpu, client=client, workers=workers, collective=collective)
    try:
        rows = _sample(run, state, ch, c, callback)
        written = run.start("write")
        llpt_df = pd.DataFrame(rows).astype({"iteration": np.int32})
        final = float(llpt_df["llpt"].iloc[-1])
        n_empty = int((np.diff(ch.doc_ptr) == 0).sum())
        counts = {"n_docs": ch.n_docs, "n_empty_docs": n_empty, "n_words": ch.V, "n_tokens": ch.n_tokens,
                  "n_dense_words": ch.n_dense, "K": c.K, "n_chunks": int(len(ch.chunk_ptr) - 1)}
        t_sample = run.timings["sample"]
        tps = ch.n_tokens * c.iterations / t_sample if t_sample > 0 else float("nan")
        pruning = bow.extra.get("pruning") or {}
        params = {"K": c.K, "iterations": int(c.iterations), "alpha": c.alpha, "beta": c.beta, "sampler": c.sampler,
                  "seed": int(c.seed), "exclude_self": bool(c.exclude_self), "format": fmt, "llpt": final,
                  "tokens_per_s": tps, "stopwords": pruning.get("stopwords"), "min_df": pruning.get("min_df"),
                  "max_df": pruning.get("max_df"), "pruning": pruning or None}
        with run.output() as tmp:
            _write_model(tmp, state, ch, bow, llpt_df, c.K, c.alpha)
            written()
            run.write_manifest(tmp, {
                **params, "V": ch.V, "n_docs": ch.n_docs, "n_tokens": ch.n_tokens, "backend": be,
                "n_devices": c.n_devices, "source": input_label(path), "counts": counts,
                "sampling": ({"scheduler": "client", "n_workers": len(workers), "collective": state.collective}
                             if workers else {"scheduler": "in-process", "n_devices": c.n_devices}),
                "timings": run.timings, "tokenizer": tok_cfg.to_dict() if fmt not in ("uci", "ldac") else None,
                "memory_bytes": ch.memory_estimate(), "state_bytes": state.nbytes(),
                "front_end": ({k: bow.extra[k] for k in ("scheduler", "n_workers", "timings") if k in bow.extra}
                              or None)})
    finally:
        if workers:  # the shards' actors freed on their workers, also when a shard or the write failed
            state.close()
    headline = {"LLPT": final}  # bits per token after the last iteration (EZLDA Eq. 5)
    if workers:
        return run.result(be, "client", len(workers), counts, params, headline=headline)
    return run.result(be, "in-process", c.n_devices, counts, params, headline=headline)


def _chunks(bow, K: int, n_chunks, n_devices: int, sampler: str, gpu: bool, *, client, n_workers, collective):
    """The chunk stage: the sampling workers (None in-process) and the token list cut into chunks
    (:func:`cutext.stages.engines.lda_chunk.lda_chunks`), one shard per worker or device at least.

    Raises
    ------
    ValueError
        ``sampler="hybrid"`` with several devices; a client's parameters (:func:`_sampling_workers`).
    RuntimeError
        ``n_devices`` more than the visible CUDA devices.
    """
    workers = _sampling_workers(client, n_workers, n_devices, sampler, collective)
    if sampler == "hybrid" and n_devices > 1:
        raise ValueError(f"{param('sampler', 'hybrid')} runs on one device; the sharded chain "
                         f"({param('n_devices', bare=True)} > 1) keeps W dense")
    if gpu and n_devices > 1:
        if device_count() < n_devices:
            raise RuntimeError(f"{param('n_devices', n_devices)} but {device_count()} CUDA device(s) are visible")
    n_shards = len(workers) if workers else n_devices
    ch = lda_chunks(bow, K=K, n_chunks=max(int(n_chunks or n_shards), n_shards))
    return workers, ch


def _init_state(ch, c: _Chain, gpu: bool, *, client, workers, collective):
    """The init stage: the sampler's state (on the client's workers, sharded over devices, or one state)
    with the random initial topics, synchronized."""
    K, alpha, beta, seed, sampler, n_devices = c.K, c.alpha, c.beta, c.seed, c.sampler, c.n_devices
    if workers:
        state = DistributedGibbs(ch, K, alpha, beta, seed=seed, client=client, workers=workers, gpu=gpu,
                                 collective=collective)
    elif n_devices > 1:
        devices = list(range(n_devices)) if gpu else [None] * n_devices
        state = ShardedGibbs(ch, K, alpha, beta, seed=seed, devices=devices)
    else:
        state = GibbsState(ch, K, alpha, beta, seed=seed, gpu=gpu,
                           w_layout="hybrid" if sampler == "hybrid" else "dense")
    state.sync()
    return state


def _sample(run: PipelineRun, state, ch, c: _Chain, callback) -> list:
    """The Gibbs iterations; their seconds go to ``timings["sample"]`` and the LLPT's to ``timings["llpt"]``.

    Returns
    -------
    list of dict
        A row of ``llpt.parquet`` per iteration, 0 (the initialisation) included.
    """
    K, iterations, sampler, exclude_self, llpt_every = c.K, c.iterations, c.sampler, c.exclude_self, c.llpt_every
    rows = [{"iteration": 0, "llpt": state.llpt(), "seconds": 0.0, "skipped": 0.0, "changed": 1.0}]
    bar = run.bar(iterations, f"lda K={K}", "it")
    t_sample = t_ll = 0.0
    try:
        if callback is not None:
            callback(0, state)
        it = 0
        while it < iterations:
            count = _block(state, it, iterations, llpt_every, callback)
            t1 = time.perf_counter()
            if count == 1:
                stats = [state.step(it + 1, sampler, exclude=exclude_self)]
                state.sync()
                stats[0]["seconds"] = time.perf_counter() - t1
            else:
                stats = state.steps(it + 1, count, sampler, exclude=exclude_self)
            t_sample += time.perf_counter() - t1
            for s in stats:
                it += 1
                ll = float("nan")
                if it == iterations or (llpt_every and it % llpt_every == 0):
                    t2 = time.perf_counter()
                    ll = state.llpt()
                    t_ll += time.perf_counter() - t2
                rows.append({"iteration": it, "llpt": ll, **s})
                if callback is not None:
                    callback(it, state)
                if bar is not None:
                    bar.set_postfix_str(f"LLPT {ll:.4f}" if not np.isnan(ll) else
                                        f"{ch.n_tokens / s['seconds'] / 1e6:.1f} Mtok/s")
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    run.timings["sample"] = t_sample
    run.timings["llpt"] = t_ll
    return rows


def _block(state, done: int, iterations: int, llpt_every, callback) -> int:
    """How many iterations to run in one call after ``done``: one where the state has no ``steps`` (in
    process nothing is saved by grouping) or a callback watches every one; on a client's shards, up to the
    next LLPT or the end, at most ``STEPS_PER_CALL`` so that the progress bar moves."""
    if callback is not None or not hasattr(state, "steps"):
        return 1
    stop = iterations
    if llpt_every:
        stop = min(stop, (done // llpt_every + 1) * llpt_every)
    return max(1, min(stop - done, STEPS_PER_CALL))


def _write_model(tmp: Path, state, ch, bow, llpt_df: pd.DataFrame, K: int, alpha: float) -> None:
    """The model's Parquet files into ``tmp``: topic_word, vocab, doc_topic (with theta), documents, llpt."""
    wv, wk, wc = state.topic_word_table()
    pq.write_table(pa.table({"word_id": wv, "topic": wk, "count": wc}), tmp / "topic_word.parquet")
    pq.write_table(pa.table({"word_id": np.arange(ch.V, dtype=np.int32),
                             "term": pa.array(ch.vocab, type=pa.string()),
                             "count": ch.word_count.astype(np.int64), "input_id": ch.old_id.astype(np.int64)}),
                   tmp / "vocab.parquet")
    dtab = state.doc_topic_table()
    lengths = np.diff(ch.doc_ptr)
    dtab["theta"] = (dtab["count"].to_numpy(np.float64) + alpha) / (lengths[dtab["doc_id"].to_numpy()] + K * alpha)
    source_ids = pa.array([str(x) for x in bow.doc_names], type=pa.string())
    dt_table = pa.Table.from_pandas(dtab, preserve_index=False)
    dt_table = dt_table.add_column(1, "source_id", source_ids.take(dt_table.column("doc_id")))
    pq.write_table(dt_table, tmp / "doc_topic.parquet")
    main, prob = main_topics(dtab["doc_id"], dtab["topic"], dtab["count"], lengths, K, alpha)
    pq.write_table(pa.table({"doc_id": np.arange(ch.n_docs, dtype=np.int64), "source_id": source_ids,
                             "length": lengths.astype(np.int64), "topic": main, "topic_prob": prob}),
                   tmp / "documents.parquet")
    pq.write_table(pa.Table.from_pandas(llpt_df, preserve_index=False), tmp / "llpt.parquet")


def _sampling_workers(client, n_workers, n_devices, sampler, collective):
    """The worker addresses that sample (one shard each) when ``client`` is given, else None; checks the
    parameters that go with a client."""

    if collective not in COLLECTIVES:
        raise ValueError(f"collective must be one of {COLLECTIVES}, got {collective!r}")
    if client is None:
        if collective != "auto":
            raise ValueError(f"{param('collective', collective)} sums W between the workers of a client; "
                             f"no {param('client')} given")
        return None
    if n_devices > 1:
        raise ValueError(f"{param('n_devices', n_devices)} with {param('client')}: on a Client every worker is one "
                         "shard (one GPU "
                         "per worker on a dask-cuda cluster); n_devices > 1 is the in-process multi-GPU mode "
                         "of one machine -- give one or the other")
    if sampler == "hybrid":
        raise ValueError(f"{param('sampler', 'hybrid')} runs on one device; the sharded chain on a client keeps W "
                         "dense")
    addrs = sorted(client.scheduler_info().get("workers", {}))
    if not addrs:
        raise ValueError(f"{param('client')} has no workers (wait for them, e.g. client.wait_for_workers(n))")
    if n_workers is not None:
        n = count("n_workers", n_workers, lo=1)
        if n > len(addrs):
            raise ValueError(f"{param('n_workers', n)} but the client has {len(addrs)} worker(s)")
        addrs = addrs[:n]
    return addrs


# ----------------------------------------------------------------------------- CLI

# words a topic printed at the end of a CLI run without --top (a line a topic reads at a glance)
CLI_TOP_WORDS = 8


def _cli_main(args, kw) -> int:
    """``lda PATH... [--out DIR] [options]``: train, then print the result and one line a topic (its share of
    the tokens, the documents whose main topic it is, its ``--top`` most probable words, default 8; ``--top 0``:
    none); with ``--json`` the result as JSON, the topics under ``"topics"``."""
    top = CLI_TOP_WORDS if args.top is None else count("top", args.top, lo=0)  # before any work
    r = train(kw.pop("path"), kw.pop("out"), **kw)
    table = LDAModel.load(r.path).topic_table(top) if top else None
    if args.json:
        d = r.to_dict()
        if table is not None:
            d["topics"] = [{"topic": int(t.topic), "weight": float(t.weight), "docs": int(t.docs), "words": t.words}
                           for t in table.itertuples()]
        print(json.dumps(d, indent=2, default=str))
        return 0
    print_result(r, False)  # its headline: the final LLPT (EZLDA Eq. 5, bits per token)
    line = _pruning_line(r.params)
    if line:
        print(line)
    if table is not None:
        print(f"topics: share of the tokens, documents whose main topic it is, top {top} words")
        w = len(str(len(table) - 1))
        for t in table.itertuples():
            print(f"  topic {t.topic:<{w}} {100 * t.weight:5.1f} % {t.docs:>7,} docs  {t.words}")
    return 0


def _pruning_line(params: dict) -> str:
    """One line saying what min_df / max_df removed (the words a user may miss in the topics), "" when nothing."""
    p = params.get("pruning") or {}
    n = p.get("words_removed", 0) - p.get("stopwords_removed", 0)
    if n <= 0:
        return ""
    return (f"pruned: {n:,} words in fewer than {p['min_docs']:g} or more than {p['max_docs']:g} documents "
            f"(min_df={p['min_df']!r}, max_df={p['max_df']!r}), the most frequent: "
            f"{' '.join(p.get('most_frequent_removed', [])[:8])}")


# the subcommand of this module; its options are the keywords of train() and of the reader it forwards to
COMMANDS = (
    Command("lda", train, _cli_main, help="train an LDA topic model (GPU Gibbs sampling)", json=True,
            description="Train LDA by collapsed Gibbs sampling (EZLDA / Moon et al. samplers). Input: a UCI docword "
                        "file, an LDA-C file, or any text corpus the readers take. The options are the keywords of "
                        "cutext.pipelines.lda.train.",
            positional={"path": dict(nargs="+", metavar="PATH",
                                     help="docword.*.txt[.gz], *.ldac, or a corpus (files, directory, glob)")},
            extra=((("--top",), dict(type=int, default=None, metavar="N",
                                     help=f"print this many top words a topic after training (default "
                                          f"{CLI_TOP_WORDS}; 0: no topic)")),)),
)


def add_cli(sub) -> None:
    """Register ``lda`` with the ``python -m cutext.pipelines`` command line."""
    for command in COMMANDS:
        command.add_to(sub)


__all__ = ["SAMPLERS", "LDAInputError", "LDAModel", "resolve_sampler", "train"]
