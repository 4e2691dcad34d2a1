"""A trained LDA model (the ``lda`` pipeline's output directory, :func:`cutext.pipelines.lda.train`):
topics, document-topic mixtures, and the fold-in of new documents (``transform``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from cutext.kernels.backend import ARRAY_STACK, resolve_backend
from cutext.stages.engines.lda_chunk import BagOfWords, bow_from_tokens, build_chunks, document_keys
from cutext.stages.engines.lda_gibbs import SAMPLERS, GibbsState, check_state_memory
from cutext.stages.readers.frames import is_dask, is_frame
from cutext.stages.runtime import artifacts as art
from cutext.stages.runtime.params import FLOAT_LIMITS, check_memory, count, flag, integer, param
from cutext.stages.text.tokenize import TokenizerConfig, tokenize_texts


class CallableArray(np.ndarray):
    """A numpy array that also answers a call with itself: :attr:`LDAModel.theta` and :attr:`LDAModel.phi` are
    properties, and ``model.theta()`` / ``model.phi()`` (the method spelling) give the same values as a plain
    ``numpy.ndarray``.  Arithmetic and reductions on it give plain arrays."""

    @classmethod
    def of(cls, a: np.ndarray) -> CallableArray:
        return np.asarray(a).view(cls)

    def __call__(self) -> np.ndarray:
        return self.view(np.ndarray)

    def __array_wrap__(self, arr, context=None, return_scalar=False):
        arr = arr.view(np.ndarray)  # results of ufuncs and reductions are plain arrays
        return arr[()] if return_scalar else arr

    def __repr__(self) -> str:
        return repr(self.view(np.ndarray))


def main_topics(doc_id, topic, count, lengths, K: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Each document's main topic and its theta, from the nonzeros of the document-topic counts D.

    Parameters
    ----------
    doc_id, topic, count : int arrays (nnz,)
        The nonzeros of D (``doc_topic.parquet``); zero counts are ignored.
    lengths : int array (n_docs,)
        Tokens a document.
    K : int
    alpha : float

    Returns
    -------
    topic : int32 (n_docs,)
        The topic of the largest count (= argmax of theta; the smaller topic on a tie), -1 for a document
        without a token (as :meth:`LDAModel.transform`).
    topic_prob : float64 (n_docs,)
        theta of that topic, (count + alpha) / (length + K alpha); 1 / K (the prior) for an empty document.
    """
    doc_id, topic, count = (np.asarray(a, np.int64) for a in (doc_id, topic, count))
    lengths = np.asarray(lengths, np.float64)
    keep = count > 0
    doc_id, topic, count = doc_id[keep], topic[keep], count[keep]
    order = np.lexsort((topic, -count, doc_id))  # by document, the largest count first, then the smaller topic
    d = doc_id[order]
    first = order[np.r_[True, d[1:] != d[:-1]]] if len(d) else order
    main = np.full(len(lengths), -1, np.int32)
    best = np.zeros(len(lengths), np.float64)
    main[doc_id[first]] = topic[first]
    best[doc_id[first]] = count[first]
    return main, (best + alpha) / (lengths + K * alpha)


class LDAModel:
    """A trained LDA model (see the module docstring for the directory layout).

    Attributes
    ----------
    params : dict
    vocab : list of str, length V (word id = frequency rank)
    W : int32 (V, K) word-topic counts
    nk : int64 (K,)
    llpt : pandas.DataFrame (iteration, llpt, seconds, skipped, changed)
    documents : pandas.DataFrame (doc_id, source_id, length, topic, topic_prob)
        One row a training document: its main topic (-1 without a token) and that topic's theta
        (:func:`main_topics`; computed on load, so also for models written before ``documents.parquet`` held them).
    doc_topic : pandas.DataFrame (doc_id, source_id, topic, count, theta)
        The nonzeros of the document-topic counts D.
    theta : float64 (n_docs, K), phi : float64 (K, V)
        Properties; calling them (``theta()``, ``phi()``) gives the same arrays.
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
    def load(cls, path, verify: bool = True) -> LDAModel:
        """Read a model directory written by :func:`train`, checking every table against params.json.

        ``verify`` (default True) first checks every file's CRC32 against params.json
        (:func:`cutext.stages.runtime.artifacts.read_manifest`); False skips it, the value checks still run.

        Raises
        ------
        ArtifactNotFoundError (ArtifactError, FileNotFoundError)
            Missing directory or file.
        ArtifactError (ValueError)
            Not an LDA model directory, or a corrupt one (the message names the directory and file):
            with ``verify``, a file whose checksum does not match or that params.json does not list;
            K, alpha, beta, V, n_docs or n_tokens missing or out of range; repeated vocabulary terms;
            word ids outside [0, V),
            topics outside [0, K), doc ids outside [0, n_docs), negative counts, counts that do not
            add up to n_tokens or to the document lengths.
        ResourceLimitError (MemoryError, ValueError)
            K and V of params.json make a V x K int32 W larger than the host memory available
            (checked before any array is allocated; the message names params.json, K and V).
        """

        path = Path(path)
        params = art.read_manifest(path, "params.json", "cutext.lda", "a cutext LDA model", verify=verify)
        pf = path / "params.json"
        K = art.field_int(params, "K", pf, lo=2)
        for prior in ("alpha", "beta"):  # the bounds of training: past them the tables are uniform or inf
            art.field_float(params, prior, pf, lo=0, hi=FLOAT_LIMITS[prior][1], lo_open=True)
            art.field_float(params, prior, pf, lo=FLOAT_LIMITS[prior][0])
        V = art.field_int(params, "V", pf, lo=1)
        # W below is V x K int32: refuse a size no memory holds before allocating it
        check_memory(V * K * 4, f"{pf}: K={K:,} and V={V:,} (the V x K int32 word-topic counts W)")
        n_docs = art.field_int(params, "n_docs", pf, lo=0)
        n_tokens = art.field_int(params, "n_tokens", pf, lo=0)
        f = path / "vocab.parquet"
        voc = art.read_table(f, {"word_id": "int", "term": "string"}, "vocabulary").to_pandas()
        if len(voc) != V or not np.array_equal(np.sort(voc["word_id"].to_numpy()), np.arange(V)):
            raise art.ArtifactError(f"{f}: expected word ids 0..{V - 1} (V={V} in params.json), got {len(voc)} rows")
        voc = voc.sort_values("word_id")
        if voc["term"].duplicated().any():
            raise art.ArtifactError(f"{f}: repeated terms in the vocabulary, e.g. "
                                    f"{voc['term'][voc['term'].duplicated()].iloc[0]!r}")
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
        try:  # models written before the doc_id rule call the source id "name"
            legacy = f.is_file() and "source_id" not in pq.read_schema(f).names
        except Exception:
            legacy = False  # unreadable: read_table names the file
        if legacy:
            docs = art.read_table(f, {"doc_id": "int", "name": "string", "length": "int"}, "documents table")
            docs = docs.to_pandas().rename(columns={"name": "source_id"})
        else:
            docs = art.read_table(f, {"doc_id": "int", "source_id": "string", "length": "int"},
                                  "documents table").to_pandas()
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
        docs["topic"], docs["topic_prob"] = main_topics(dtc["doc_id"], dtc["topic"], dtc["count"], docs["length"], K,
                                                        float(params["alpha"]))
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

    def __repr__(self) -> str:
        p = self.params
        llpt = p.get("llpt")
        return (f"LDAModel(K={self.K}, V={len(self.vocab):,}, docs={len(self.documents):,}, "
                f"tokens={int(p.get('n_tokens', 0)):,}, sampler={p.get('sampler')!r}, alpha={self.alpha:g}, "
                f"beta={self.beta:g}, iterations={p.get('iterations')}"
                + (f", LLPT={llpt:.4f}" if isinstance(llpt, (int, float)) else "")
                + f", trained on {p.get('backend')!r}, path={str(self.path)!r})")

    @property
    def phi(self) -> np.ndarray:
        """float64 (K, V) topic-word distributions: phi[k][v] = (W[v][k] + beta) / (n_k + V beta), rows sum to 1.

        A property, as :attr:`theta`; ``phi()`` (called) gives the same array (:class:`CallableArray`).
        """
        return CallableArray.of(((self.W + self.beta) / (self.nk + len(self.vocab) * self.beta)).T)

    @property
    def theta(self) -> np.ndarray:
        """float64 (n_docs, K) training document-topic distributions: theta[d][k] = (D[d][k] + alpha) / (L_d + K
        alpha), rows sum to 1 (a document without a token has the prior, 1 / K everywhere).

        A property, as :attr:`phi`; ``theta()`` (the method of earlier versions) gives the same array
        (:class:`CallableArray`).  A document's main topic and its theta: :attr:`documents` ``topic``,
        ``topic_prob``.
        """
        n = len(self.documents)
        lengths = self.documents["length"].to_numpy(np.float64)
        th = np.zeros((n, self.K))
        th[self.doc_topic["doc_id"].to_numpy(), self.doc_topic["topic"].to_numpy()] = self.doc_topic["count"]
        return CallableArray.of((th + self.alpha) / (lengths[:, None] + self.K * self.alpha))

    def top_words(self, n: int = 10) -> pd.DataFrame:
        """The ``n`` most probable words of every topic: ``(topic, rank, term, prob)``, rank 0 first."""
        phi = self.phi
        n = min(n, phi.shape[1])
        idx = np.argsort(-phi, axis=1, kind="stable")[:, :n]
        K = phi.shape[0]
        return pd.DataFrame({"topic": np.repeat(np.arange(K), n), "rank": np.tile(np.arange(n), K),
                             "term": [self.vocab[i] for i in idx.ravel()],
                             "prob": np.take_along_axis(phi, idx, axis=1).ravel()})

    def topic_table(self, n: int = 10) -> pd.DataFrame:
        """One row a topic, for reading a model at a glance (tomotopy's ``summary``, BERTopic's ``get_topic_info``).

        Parameters
        ----------
        n : int, default 10
            Words a topic (>= 1; at most V).

        Returns
        -------
        pandas.DataFrame, K rows in topic order
            ``topic: int64``; ``weight: float64``, the topic's share of the training tokens (n_k / n_tokens,
            the rows sum to 1); ``docs: int64``, training documents whose largest topic count it is (ties:
            the smaller topic; documents without a token count for none); ``words: str``, the ``n`` most
            probable words (:meth:`top_words`) joined by spaces, the most probable first.

        Raises
        ------
        ValueError
            ``n`` < 1.
        """
        n = count("n", n, lo=1)
        tw = self.top_words(n)
        words = tw.groupby("topic", sort=True)["term"].agg(" ".join).reindex(range(self.K), fill_value="")
        total = int(self.nk.sum())
        dt = self.doc_topic[self.doc_topic["count"] > 0]
        # each document's largest count, the smaller topic on ties
        top = dt.sort_values(["doc_id", "count", "topic"], ascending=[True, False, True]).drop_duplicates("doc_id")
        docs = np.bincount(top["topic"].to_numpy(np.int64), minlength=self.K)
        return pd.DataFrame({"topic": np.arange(self.K, dtype=np.int64),
                             "weight": self.nk / total if total else np.zeros(self.K),
                             "docs": docs.astype(np.int64), "words": words.to_numpy(dtype=object)})

    def _repr_html_(self) -> str:
        """The one-line repr and the topic table (first 20 topics, 8 words each), for notebooks."""
        import html

        t = self.topic_table(8)
        more = f"<p>... {self.K - 20} more topics: topic_table()</p>" if self.K > 20 else ""
        return (f"<p><code>{html.escape(repr(self))}</code></p>"
                + t.head(20).to_html(index=False, float_format=lambda v: f"{v:.3f}") + more)

    def _bow(self, docs) -> BagOfWords:
        if isinstance(docs, BagOfWords):
            lists = []
            for d in range(docs.n_docs):
                a, b = docs.doc_ptr[d], docs.doc_ptr[d + 1]
                lists.append([docs.vocab[w] for w, c in zip(docs.word[a:b], docs.count[a:b]) for _ in range(int(c))])
            docs = lists
        docs = _documents(docs)
        if docs and isinstance(docs[0], str):
            cfg = self.params.get("tokenizer") or {}
            tc = TokenizerConfig.make(cfg.get("lowercase", True), cfg.get("stopwords"), cfg.get("stemmer"),
                                      cfg.get("min_len", 1), cfg.get("max_len"))
            docs = tokenize_texts(docs, tc)
        return bow_from_tokens(docs, self.vocab)

    def _fold_in(self, docs, iterations, seed, backend, sampler):
        iterations = check_fold_in_iterations(iterations)
        seed, sampler = _fold_in_options(seed, sampler)
        bow = self._bow(docs)
        be = resolve_backend(backend, needs=ARRAY_STACK)
        if bow.n_tokens == 0:
            return None, bow
        ch = build_chunks(bow, self.K, 1, relabel=False)
        ch.keys = document_keys(bow, ch)  # a document draws the same topics in any batch / partition

        check_state_memory(ch, self.K, "sparse" if sampler in ("auto", "hybrid") else sampler, gpu=be == "gpu",
                           fixed=be != "gpu", V=len(self.vocab), owner="LDAModel.transform")
        state = GibbsState(ch, self.K, self.alpha, self.beta, seed=seed, gpu=be == "gpu", W_fixed=self.W,
                           vbeta=len(self.vocab) * self.beta)
        smp = "sparse" if sampler in ("auto", "hybrid") else sampler  # W fixed is dense: hybrid = sparse
        for it in range(1, iterations + 1):
            state.step(it, smp, exclude=True)
        return state, bow

    def transform(self, docs, text_column=None, *, iterations: int = 50, seed: int = 0, backend: str = "auto",
                  sampler: str = "auto", theta_columns: bool = True):
        """Topic distributions of new documents, W fixed (Gibbs sampling of their topics only).

        Every document's draws are keyed by its own words (:func:`cutext.stages.engines.lda_chunk.document_keys`),
        so a document gets the same distribution whether it comes alone, in a list, in a pandas frame or
        in any partition of a dask frame.

        Parameters
        ----------
        docs : str, list of str, list of token lists, BagOfWords, or a DataFrame
            A list of str is tokenized as in training; words not in the model's vocabulary are ignored.
            A single str is one document (as :meth:`cutext.pipelines.bm25.BM25Index.search` takes a
            single str as one query): the result has one row.
            A DataFrame -- pandas, cudf, dask or dask-cudf -- needs ``text_column`` and gets new columns
            (see Returns).
        text_column : str, optional
            The text column of a DataFrame (required for frames, refused for lists).
        iterations : int
            Gibbs passes, an integer in [1, 100000] (:data:`MAX_ITERATIONS`).
        seed : int
        backend : {"auto", "cpu", "gpu"}
            Where the fold-in samples.  ``"auto"`` (the default of every loader) = the GPU when
            cupy is installed and a device is visible, else the CPU; a given seed draws the same
            topics on both.  For a dask frame it is resolved on each worker.
            Seed of the draws, >= 0 (as :func:`cutext.pipelines.lda.train`).
        sampler : {"auto", "sparse", "three_branch", "dense", "hybrid"}
            ``"auto"`` and ``"hybrid"`` sample with ``"sparse"`` (the fixed W is dense).
        theta_columns : bool
            Frames: add the K ``theta_<k>`` columns (True, the default) or only ``topic``, ``topic_prob``
            and ``n_tokens`` (False).  Refused (False) for a list, whose result is the theta array.

        Returns
        -------
        float64 (n_docs, K) ndarray for a list: (D + alpha) / (L + K alpha) after the last pass (rows sum
        to 1).  For a DataFrame, the same frame type with its rows, index and columns unchanged and these
        columns appended:
        * ``topic`` int32 -- the most probable topic (argmax of theta, the lowest topic on a tie);
          -1 for a document without a word of the model's vocabulary (its theta is the prior);
        * ``topic_prob`` float64 -- theta of that topic;
        * ``n_tokens`` int64 -- tokens of the document in the model's vocabulary;
        * ``theta_0`` .. ``theta_<K-1>`` float64 -- the distribution (with ``theta_columns=True``).

        A dask frame is transformed partition by partition (``map_partitions``, lazily: call
        ``.compute()`` / ``.to_parquet()``); each task receives only the model directory, and every worker
        process loads the model once (:func:`load_cached`), so the directory must be readable by the
        workers.  Texts are tokenized on the host (cudf partitions: the text column is copied to the host,
        the new columns are cudf).

        Raises
        ------
        ValueError
            A frame without ``text_column``, a column name that already exists, a dask Series,
            ``text_column`` given with a list or a str, ``iterations`` not an integer in [1, 100000], ``seed``
            not an integer >= 0, an unknown ``sampler``, ``theta_columns`` not a bool (or False for a list).
        TypeError
            Non-string values in the text column; bytes, a non-iterable, or a list mixing texts and token
            lists (the message names the first odd item).
        ResourceLimitError (MemoryError, ValueError)
            The fold-in's (V, K) tables exceed the memory available (checked before allocating them).
        """
        iterations = check_fold_in_iterations(iterations)
        seed, sampler = _fold_in_options(seed, sampler)
        theta_columns = flag("theta_columns", theta_columns)
        if not _is_frame(docs) and not theta_columns:  # a list gets the whole theta array anyway
            raise ValueError(f"{param('theta_columns', theta_columns)} chooses the columns added to a DataFrame; "
                             f"docs is a {type(docs).__name__}, whose result is the (n_docs, K) theta array")
        if _is_frame(docs):
            return self._transform_frame(docs, text_column, iterations=iterations, seed=seed, backend=backend,
                                         sampler=sampler, theta_columns=theta_columns)
        if is_dask(docs):
            raise ValueError("transform takes a dask DataFrame with text_column=; for a dask Series use "
                             "series.to_frame() and text_column=<its name>")
        if text_column is not None:
            raise ValueError(f"text_column={text_column!r} is for DataFrames; docs is a {type(docs).__name__}")
        return self._theta(docs, iterations, seed, backend, sampler)[0]

    def _theta(self, docs, iterations, seed, backend, sampler):
        """(theta float64 (n, K), tokens in vocabulary int64 (n,))."""
        state, bow = self._fold_in(docs, iterations, seed, backend, sampler)
        n = bow.n_docs
        th = np.zeros((n, self.K))
        lengths = bow.doc_lengths.astype(np.float64)
        if state is not None:
            dt = state.doc_topic_table()
            th[dt["doc_id"].to_numpy(), dt["topic"].to_numpy()] = dt["count"].to_numpy()
        return (th + self.alpha) / (lengths[:, None] + self.K * self.alpha), bow.doc_lengths

    def _new_columns(self, theta_columns: bool) -> list:
        cols = ["topic", "topic_prob", "n_tokens"]
        return cols + [f"theta_{k}" for k in range(self.K)] if theta_columns else cols

    def _transform_frame(self, frame, text_column, **kw):
        if text_column is None:
            raise ValueError("transform of a DataFrame needs text_column= (the column holding the documents)")
        if text_column not in frame.columns:
            raise ValueError(f"text_column={text_column!r} is not a column of the frame "
                             f"(columns: {list(frame.columns)})")
        clash = [c for c in self._new_columns(kw["theta_columns"]) if c in frame.columns]
        if clash:
            raise ValueError(f"the frame already has column(s) {clash} that transform would add; rename them")
        if not is_dask(frame):
            return _transform_partition(frame, self, text_column, **kw)
        meta = _transform_partition(frame._meta, self, text_column, **kw)
        stamp = _model_stamp(self.path)
        return frame.map_partitions(_transform_partition_by_path, str(self.path.absolute()), stamp, text_column,
                                    meta=meta, **kw)

    def log_likelihood(self, docs, iterations: int = 50, seed: int = 0, backend: str = "auto") -> float:
        """Held-out per-word log-likelihood (natural log), Moon et al. Eq. 3-4.

        ``(1 / W_test) sum_tokens ln sum_k phi[k][v] theta[j][k]`` with phi from the model and theta
        from :meth:`transform` of the same documents (fold-in with W fixed).  ``backend``: as in
        :meth:`transform` (default ``"auto"``).

        ``docs`` as in :meth:`transform` (a single str is one document).

        Raises
        ------
        ValueError
            None of the documents' words is in the vocabulary; ``iterations`` not an integer in
            [1, 100000].
        """
        state, _ = self._fold_in(docs, iterations, seed, backend, "auto")
        if state is None:
            raise ValueError("no token of these documents is in the model's vocabulary")
        terms = state.log2_likelihood_terms()
        return float(terms.mean() * np.log(2.0))

    def perplexity(self, docs, iterations: int = 50, seed: int = 0, backend: str = "auto") -> float:
        """``exp(-log_likelihood(docs))`` (Moon et al. Eq. 3-4); ``backend`` as in :meth:`transform` (default
        ``"auto"``)."""
        return float(np.exp(-self.log_likelihood(docs, iterations, seed, backend)))


def _documents(docs) -> list:
    """``docs`` of :meth:`LDAModel.transform` as a list of texts (str) or of token lists.

    Raises
    ------
    TypeError
        bytes (decode them first), a non-iterable, or a list that mixes texts and token lists or holds
        something else (the message names the first such item and its position).
    """
    if isinstance(docs, (bytes, bytearray)):
        raise TypeError("docs is bytes: decode it to str first (one str is one document)")
    # one str is one document (as BM25Index.search takes one str as one query), not its characters
    if isinstance(docs, str):
        return [docs]
    try:
        docs = list(docs)
    except TypeError:
        raise TypeError(f"docs must be a str (one document), a list of str, a list of token lists, a BagOfWords "
                        f"or a DataFrame, got {type(docs).__name__} {docs!r}"[:300]) from None
    if not docs:
        return docs
    texts = isinstance(docs[0], str)
    for i, d in enumerate(docs):
        ok = isinstance(d, str) if texts else (isinstance(d, (list, tuple, np.ndarray, pd.Series))
                                               and all(isinstance(t, str) for t in d))
        if not ok:
            want = "a str (a text), as docs[0]" if texts else "a list of str (tokens)"
            raise TypeError(f"docs[{i}] must be {want}, got {type(d).__name__} {d!r}; give texts or token lists, "
                            "not a mix"[:400])
    return docs


# Training runs hundreds to a few thousand Gibbs passes (Mallet's default is 1,000) and fold-in tens (Moon et
# al. use 50); 1e5 is far past both and keeps a slip such as 10**9 from sampling for days.
MAX_ITERATIONS = 100_000
MAX_FOLD_IN_ITERATIONS = MAX_ITERATIONS


def check_iterations(name: str, value, lo: int = 1) -> int:
    """An iteration count of the LDA code (``iterations`` of training and of inference, ``llpt_every``) as an
    int in ``[lo, MAX_ITERATIONS]``: integers only (numpy ints taken; a bool or a float such as ``1e9``
    refused), through :func:`cutext.stages.runtime.params.integer`.

    Raises
    ------
    ValueError
        Not an integer, or outside the range (the message names the parameter, the value and the range).
    """
    return integer(name, value, lo=lo, hi=MAX_ITERATIONS)


def check_fold_in_iterations(iterations) -> int:
    """``iterations`` of an inference (:meth:`LDAModel.transform`): :func:`check_iterations` in [1, MAX_ITERATIONS].

    Raises
    ------
    ValueError
        Not an integer, or outside the range (the message names ``iterations`` and the range).
    """
    return check_iterations("iterations", iterations)


# ----------------------------------------------------------------------------- frames

def _is_frame(obj) -> bool:
    """A pandas / cudf / dask / dask-cudf DataFrame (not a Series: transform adds columns to a table)."""
    return is_frame(obj) and type(obj).__name__ == "DataFrame"


_MODEL_CACHE: dict = {}
_MODEL_CACHE_LOCK = __import__("threading").Lock()
MODEL_LOADS = [0]  # models read from disk by this process (tests check once per worker)


def _model_stamp(path) -> str:
    """Version key of a model directory: its params.json's size and modification time (ns)."""
    st = (Path(path) / "params.json").stat()
    return f"{st.st_size}-{st.st_mtime_ns}"


def load_cached(path, stamp=None) -> LDAModel:
    """The model at ``path``, read once per process and kept (keyed by the absolute path and
    :func:`_model_stamp`, so a rewritten model is read again).  Used by the workers of
    :meth:`LDAModel.transform` on a dask frame."""
    path = str(Path(path).absolute())
    key = (path, stamp or _model_stamp(path))
    with _MODEL_CACHE_LOCK:
        m = _MODEL_CACHE.get(key)
        if m is None:
            for k in [k for k in _MODEL_CACHE if k[0] == path]:
                del _MODEL_CACHE[k]  # an older version of the same directory
            m = _MODEL_CACHE[key] = LDAModel.load(path)
            MODEL_LOADS[0] += 1
    return m


def _transform_partition_by_path(part, path, stamp, text_column, **kw):
    return _transform_partition(part, load_cached(path, stamp), text_column, **kw)


def _transform_partition(part, model: LDAModel, text_column, *, iterations, seed, backend, sampler,
                         theta_columns):
    """One pandas / cudf partition with the transform columns appended (see :meth:`LDAModel.transform`)."""
    col = part[text_column]
    gpu_frame = type(part).__module__.split(".")[0] == "cudf"
    host = col.to_pandas() if gpu_frame else col
    if len(host):
        na = host.isna().to_numpy()
        if na.any():
            i = int(np.flatnonzero(na)[0])
            raise TypeError(f"text_column={text_column!r}: row {host.index[i]!r} is missing (null), not a string")
        if host.dtype == object:
            bad = host.map(lambda x: not isinstance(x, str)).to_numpy(bool)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise TypeError(f"text_column={text_column!r}: row {host.index[i]!r} holds "
                                f"{type(host.iloc[i]).__name__} {host.iloc[i]!r}, not a string")
        elif not pd.api.types.is_string_dtype(host.dtype):
            raise TypeError(f"text_column={text_column!r} holds {host.dtype}, not strings")
        theta, n_tok = model._theta(host.astype(str).tolist(), iterations, seed, backend, sampler)
    else:
        theta, n_tok = np.zeros((0, model.K)), np.zeros(0, np.int64)
    topic = theta.argmax(1).astype(np.int32) if len(theta) else np.zeros(0, np.int32)
    prob = theta[np.arange(len(theta)), topic] if len(theta) else np.zeros(0)
    topic[n_tok == 0] = -1
    cols = {"topic": topic, "topic_prob": prob, "n_tokens": n_tok.astype(np.int64)}
    if theta_columns:
        cols.update({f"theta_{k}": theta[:, k] for k in range(model.K)})
    if gpu_frame:
        import cudf

        return cudf.concat([part, cudf.DataFrame(cols, index=part.index)], axis=1)
    return pd.concat([part, pd.DataFrame(cols, index=part.index)], axis=1)

__all__ = ["LDAModel", "CallableArray", "main_topics", "load_cached", "check_iterations", "check_fold_in_iterations",
           "MAX_ITERATIONS", "MAX_FOLD_IN_ITERATIONS"]


def _fold_in_options(seed, sampler) -> tuple:
    """``(seed, sampler)`` of a fold-in, checked before any document is read.

    Raises
    ------
    ValueError
        ``seed`` not an integer >= 0; ``sampler`` not one of :data:`cutext.stages.engines.lda_gibbs.SAMPLERS`.
    """
    seed = count("seed", seed, lo=0)  # the counter-based generator takes a uint64
    if sampler not in SAMPLERS:
        raise ValueError(f"{param('sampler', bare=True)} must be one of {SAMPLERS}, got {sampler!r}")
    return seed, sampler
