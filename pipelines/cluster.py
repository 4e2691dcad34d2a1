"""The ``cluster`` pipeline: online document-stream clustering (Szasz and Samet, Szasz and Samet).

``cluster_corpus(path, out, threshold=0.05, top_k=35, order_by=None)`` reads a corpus, tokenizes,
dictionary-encodes and counts it with the shared stages (dask, pandas or cudf partitions), builds
TF-ICF / TF-IDF top-k term vectors (:mod:`cutext.stages.text.termvec`), and clusters the documents one
after the other in stream order with :class:`cutext.stages.engines.streamcluster.StreamClusterer`: the
numba reference of Algorithm 1 on the CPU, the ELLPACK kernels of Algorithm 3 on the GPU (the
assignments are identical).

Output directory (every file Parquet or JSON)::

    cluster.json        parameters, backend, counts, timings, similarity_histogram (the documents' best
                        similarities with an earlier cluster in 20 bins over [0, 1]: where a threshold cuts)
    assignments.parquet doc_id: int64, source_id: string, position: int64 (stream order),
                        cluster_id: int64 (-1: document without a weighted term),
                        similarity: float64 (largest similarity with an earlier cluster),
                        new_cluster: bool
    clusters.parquet    cluster_id: int64, size: int64, first_doc_id: int64,
                        terms: list<string>, weights: list<float64> (top terms by weight)
    state/              StreamClusterer state (clusters, vocabulary, df): resume a live feed with
                        ``StreamClusterer.load(out / "state")``
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cutext.kernels.backend import resolve_backend
from cutext.pipelines._cli import Command, print_result
from cutext.pipelines._result import RunResult, param_files
from cutext.pipelines._run import PipelineRun
from cutext.stages.engines import segments
from cutext.stages.engines.index_commits import commit_segments
from cutext.stages.engines.index_manifest import read_index_manifest
from cutext.stages.engines.streamcluster import DEFAULT_THRESHOLD, MAX_TOP_K, StreamClusterer, StreamVectorizer
from cutext.stages.readers.base import DEFAULT_MAX_RATIO, CorpusError
from cutext.stages.readers.files import input_format
from cutext.stages.readers.frames import frame_column, input_label, is_frame
from cutext.stages.runtime import artifacts as art
from cutext.stages.runtime.params import count, number, param
from cutext.stages.text.frontend import corpus_session
from cutext.stages.text.termvec import WEIGHTINGS, nearest_similarities, term_vectors
from cutext.stages.text.tokenize import TokenizerConfig

CHUNK = 4096  # documents per progress step
SUGGEST_QUANTILE = 0.05  # of the nearest-neighbour similarities: measured, see suggest_threshold
SUGGEST_SAMPLE = 1000  # documents sampled by suggest_threshold

__all__ = ["cluster_corpus", "suggest_threshold", "StreamClusterer", "corpus_counts", "nmi", "purity", "add_cli"]


def corpus_counts(path, tok_cfg: TokenizerConfig, backend: str = "cpu", *, format="auto", text_column=None,
                  id_column=None, blocksize=64 << 20, encoding="utf-8", storage_options=None, glob=None,
                  max_ratio=DEFAULT_MAX_RATIO, client=None, scheduler="auto", n_workers=None, timings=None,
                  members=None):
    """The corpus front end (:mod:`cutext.stages.text.frontend`) with its counts taken to the host.

    Parameters
    ----------
    path : str, os.PathLike or list
    tok_cfg : TokenizerConfig
    backend : {"cpu", "gpu"}
        The resolved backend.
    format, text_column, id_column, blocksize, encoding, storage_options, glob, max_ratio, members
        Reader settings (:func:`cutext.stages.readers.source.read_corpus`).
    client, scheduler, n_workers
        Where the stages run (:func:`cutext.stages.runtime.compute.compute_context`).
    timings : dict, optional
        Filled with seconds: ``read`` (reading and the host copy of the source ids), ``tokenize``,
        ``encode+count`` (encoding, counting and the host copy of the counts).

    Returns
    -------
    dict
        ``docs``: DataFrame ``(doc_id, source_id)``; ``vocab``: pyarrow string array (term id
        ``i + 1`` is ``vocab[i]``); ``doc_id``, ``term_id``, ``tf``: int64 arrays, one entry per
        distinct (document, term); ``n_docs``; ``format``; ``pieces``; ``info`` (scheduler).

    Raises
    ------
    FileNotFoundError, CorpusError
    """
    timings = {} if timings is None else timings
    t0 = time.perf_counter()
    with corpus_session(path, tok_cfg, backend, client=client, scheduler=scheduler, n_workers=n_workers,
                        format=format, text_column=text_column, id_column=id_column, blocksize=blocksize,
                        encoding=encoding, storage_options=storage_options, glob=glob, max_ratio=max_ratio,
                        members=members) as c:
        t1 = time.perf_counter()
        ids = c.source_ids()
        t2 = time.perf_counter()
        host = c.host_counts()
        t3 = time.perf_counter()
        # the planning and the context's start count as reading, as before the front end existed
        timings["read"] = (t1 - t0) - c.timings["tokenize"] - c.timings["encode"] - c.timings["count"] + (t2 - t1)
        timings["tokenize"] = c.timings["tokenize"]
        timings["encode+count"] = c.timings["encode"] + c.timings["count"] + (t3 - t2)
    return {"docs": ids, "vocab": c.vocab, **host, "n_docs": c.n_docs, "format": c.format, "pieces": c.pieces,
            "info": c.info}


def _index_df(p: Path):
    """``(terms, df, N)`` of a BM25 index directory, its checksums verified: format 1's ``vocab.parquet``, or the
    global statistics of a segmented index's live segments (terms and documents only,
    :func:`cutext.stages.engines.segments.merge_terms`)."""
    mf = p / "index.json"
    meta = read_index_manifest(p)  # checksums verified, every field checked
    n_ref = art.field_int(meta, "N", mf, lo=0)
    fmt = meta.get("index_format", 1)
    if fmt == 2:
        heads = segments.segment_heads(*commit_segments(p, meta), ids=False)
        mt = segments.merge_terms(heads)
        if mt.n_docs != n_ref:
            raise art.ArtifactError(f"{mf}: N={n_ref}, the segments hold {mt.n_docs} documents")
        return mt.vocab, mt.df[1:], n_ref
    if fmt != 1:
        raise art.ArtifactError(f"{mf}: index_format {fmt!r} is not one this cutext reads (1 or 2)")
    vt = art.read_table(p / "vocab.parquet", {"term": "string", "df": "int"}, "vocabulary")
    ref_terms, ref_df = vt.column("term").combine_chunks(), vt.column("df").to_numpy()
    art.check_range(ref_df, 0, n_ref, "df", p / "vocab.parquet")
    return ref_terms, ref_df, n_ref


def _reference_df(idf_from, vocab: pa.Array, tok_cfg, backend, **read_kw):
    """(df over our vocabulary (V + 1,), N) from a BM25 index directory (either format) or a reference corpus."""
    p = Path(str(idf_from))
    if p.is_dir() and (p / "index.json").is_file() and ((p / "vocab.parquet").is_file() or (p / "segments").is_dir()):
        ref_terms, ref_df, n_ref = _index_df(p)
    else:
        fmt = None if is_frame(idf_from) else input_format(idf_from, read_kw.get("format", "auto"),
                                                          read_kw.get("storage_options"), read_kw.get("glob"))
        if fmt in ("files", "lines"):  # plain text: the main input's columns name nothing here
            read_kw = dict(read_kw, text_column=None, id_column=None)
        rc = corpus_counts(idf_from, tok_cfg, backend, **read_kw)
        ref_terms = rc["vocab"]
        ref_df = np.bincount(rc["term_id"], minlength=len(ref_terms) + 1)[1:]
        n_ref = rc["n_docs"]
    pos = pc.index_in(vocab.cast(pa.large_string()), value_set=ref_terms.cast(pa.large_string()))
    pos = pc.fill_null(pos, -1).to_numpy().astype(np.int64)
    df = np.zeros(len(vocab) + 1, np.int64)
    df[1:][pos >= 0] = np.asarray(ref_df, np.int64)[pos[pos >= 0]]
    return df, n_ref


def _order_column(pieces, fmt, column, n_docs, storage_options):
    """The values of a column of the input (jsonl / parquet / csv) in doc_id order."""
    import fsspec

    if fmt not in ("jsonl", "parquet", "csv"):
        raise ValueError(f"{param('order_by', column)}: a column can only order table inputs (jsonl, parquet, csv), "
                         f"this input is {fmt!r}; use None, 'doc_id', 'source_id' or an array")
    paths = list(dict.fromkeys(p for piece in pieces for p in piece.paths))
    parts = []
    for path in paths:
        with fsspec.open(path, "rb", compression="infer", **(storage_options or {})) as fh:
            if fmt == "parquet":
                t = pq.read_table(fh)
            elif fmt == "jsonl":
                import pyarrow.json as pj

                t = pj.read_json(fh)
            else:
                import pyarrow.csv as pcsv

                t = pcsv.read_csv(fh)
        if column not in t.column_names:
            raise CorpusError(f"{path}: order_by column {column!r} not found; columns are {t.column_names}")
        parts.append(t.column(column).to_pandas())
    s = pd.concat(parts, ignore_index=True)
    if len(s) != n_docs:
        raise CorpusError(f"order_by column {column!r} has {len(s)} values for {n_docs} documents")
    return s


def stream_order(keys) -> np.ndarray:
    """Stream positions from sort keys: ``order[p]`` = doc_id at position p (stable, missing keys last)."""
    s = pd.Series(keys).reset_index(drop=True)
    if s.dtype == object or isinstance(s.dtype, pd.StringDtype):
        s = s.astype(object).where(s.astype(str).str.strip() != "", None)
        parsed = pd.to_datetime(s, errors="coerce", format="mixed")
        if parsed.notna().sum() == s.notna().sum() and s.notna().any():
            s = parsed
    return np.asarray(s.sort_values(kind="mergesort", na_position="last").index, dtype=np.int64)


def _default_batch(backend, method):
    return 32 if backend == "gpu" else 1


def _engine(run, idf_from, backend, method, batch_size, devices, candidates) -> tuple[str, str, int]:
    """``(backend, method, batch_size)`` of :func:`cluster_corpus` resolved, after the checks of ``idf_from``
    and of the engine's options (its ``ValueError``)."""
    if isinstance(idf_from, str) and not idf_from.strip():  # "" would read the working directory as a corpus
        raise ValueError(f"{param('idf_from', idf_from)}: give None (the corpus), \"stream\" or a path")
    be = run.resolve_backend(backend)
    method = method or ("ellpack" if be == "gpu" else "reference")
    _check_engine_options(method, batch_size, devices, candidates)
    return be, method, batch_size or _default_batch(be, method)


def _front_end(run, path, tok_cfg, be, client, scheduler, n_workers, read_kw) -> dict:
    """The corpus' ``(doc, term, tf)`` counts (:func:`corpus_counts`), its stages shown as they run.

    Raises
    ------
    CorpusError
        The corpus holds no document.
    """
    with run.shown():  # the front end's stages show partitions done / total
        cc = corpus_counts(path, tok_cfg, be, client=client, scheduler=scheduler, n_workers=n_workers,
                           timings=run.timings, **read_kw)
    if cc["n_docs"] == 0:
        raise CorpusError(f"{input_label(path)}: the corpus holds no document")
    return cc


def cluster_corpus(path, out, *, threshold=DEFAULT_THRESHOLD, top_k=35, order_by=None, idf_from=None, weighting="tficf",
                   lowercase=True, stopwords="lucene", stemmer=None, min_len=2, max_len=None,
                   format="auto", text_column=None, id_column=None, blocksize=64 << 20, encoding="utf-8",
                   storage_options=None, glob=None, max_ratio=DEFAULT_MAX_RATIO, backend="auto", method=None,
                   batch_size=None, devices=None,
                   candidates="auto", client=None, scheduler="auto", n_workers=None, n_top_terms=10, overwrite=True,
                   progress=True, members=None) -> RunResult:
    """Cluster a corpus as a document stream (Szasz and Samet, Algorithm 1; GPU: Algorithms 2-3).

    Parameters
    ----------
    path : str, os.PathLike, list, or a frame
        Corpus (formats of :func:`cutext.stages.readers.source.read_corpus`), or a pandas / cudf / dask /
        dask-cudf DataFrame or Series (``text_column=``, ``id_column=``; :mod:`cutext.stages.readers.frames`).
    out : str or os.PathLike
        Output directory, written under a temporary name and renamed when complete.
        ``pipelines.run("cluster", path)`` and the CLI default to ``"cluster-out"`` (one rule for
        every pipeline: ``"<name>-out"`` in the working directory).  A local path or a ``file://`` URL
        (another URL is refused before any work: :mod:`cutext.stages.runtime.output`); this process
        writes it, the workers of ``client`` do not.
    threshold : float
        ``T`` in [0, 1]: a document joins its most similar cluster when the cosine similarity
        is ``> T``.  Default 0.05: the best NMI over chance against the labels of 20 Newsgroups and
        Reuters-21578 (docs/decisions.md; 875 clusters for 18,846 posts, 292 for 10,377 stories).  Szasz and
        Samet's throughput runs use 0.6, which leaves nearly one cluster a document on such corpora.
        :func:`suggest_threshold` reads one off a corpus, and cluster.json's ``similarity_histogram`` shows
        where a run's similarities lie.
    top_k : int
        Terms kept per document and per cluster (paper: 35 to 60), in [1, 512] (the clusterer's rows hold
        at most 512 terms).
    order_by : None, str or array-like
        Stream order: None or ``"doc_id"`` = input order; ``"source_id"``; the name of a column
        of a jsonl / parquet / csv input or of a frame input (dates are parsed); or one key per document (doc_id
        order).  Stable: ties keep input order.
    idf_from : None, "stream", or path
        IDF reference: None = the corpus itself; ``"stream"`` = the documents seen so far;
        a path = a BM25 index directory (``pipelines.run("bm25", ...)``) or another corpus (not ``""``).
    weighting : {"tficf", "tfidf"}
        See :mod:`cutext.stages.text.termvec` (natural logarithms).
    lowercase, stopwords, stemmer, min_len, max_len
        Tokenizer (default: lowercase, Lucene's 33 stopwords, tokens of 2+ code points).
    format, text_column, id_column, blocksize, encoding, storage_options, glob, max_ratio, members
        Reader settings (:func:`cutext.stages.readers.source.read_corpus`; ``members``: the archive members
        read, fnmatch globs), also used for an ``idf_from`` corpus.
    backend : {"auto", "cpu", "gpu"}
    method : {"reference", "brute", "ellpack"}, optional
        Clustering engine (default: reference on the CPU, ellpack on the GPU).  ``batch_size``, ``devices``
        and ``candidates`` are options of ellpack, refused with the others.
    batch_size : int, optional
        Micro-batch of the ELLPACK engine (default 32 on the GPU, 1 on the CPU); exact for any size.
    devices : list of int, optional
        GPUs holding row partitions of the cluster matrix (paper section 6); not empty.
    candidates : {"auto", True, False}
        ELLPACK engine: score only the clusters that share a term with the document (an inverted
        index on the device), every cluster (False), or choose per batch ("auto", the default: the
        candidate pass for micro-batches from 65,536 clusters on when the documents' posting lists
        hold fewer than 1/4 as many entries as there are clusters; measured, see docs/decisions.md).
        Same assignments either way.
    client : distributed.Client, optional
        Runs the corpus front end (read, tokenize, encode, count: :mod:`cutext.stages.text.frontend`) as tasks
        on the client's workers.  The clustering itself stays **one ordered stream in this process**
        (on its CPU, or its GPUs with ``devices``): Szasz and Samet's Algorithm 1 is sequential -- a document's
        cluster depends on the clusters every earlier document made or joined -- so it cannot be spread
        over workers without changing the result.  With a client, ``scheduler`` and ``n_workers`` (which
        choose a local cluster for the front end) are refused.
    scheduler, n_workers
        Without a client: where the front end runs (:func:`cutext.stages.runtime.compute.compute_context`).
    n_top_terms : int
        Terms per cluster written to clusters.parquet.
    progress : bool
        Show the progress of the front end's stages (partitions done / total) and of the clustering
        (documents): a bar when standard error is a terminal, else a plain line every 10 s and one
        per finished stage.

    Returns
    -------
    RunResult
        ``counts``: n_docs, n_clusters, n_empty_docs, n_terms, n_singletons; ``timings`` (s):
        read, tokenize, encode+count, vectors, cluster, write; ``params``; ``scheduler`` /
        ``n_workers``: where the front end ran (``cluster.json`` also records ``"clustering":
        "in-process"``).  ``assignments.parquet`` has one row per document with its ``source_id``
        (the input's id column, file name or line id, as a string): join it to the input table on
        ``source_id`` (``doc_id`` is the reader's running number).

    Raises
    ------
    FileNotFoundError
        Input path matches nothing.
    CorpusError (ValueError)
        Unreadable or empty corpus, a missing order_by column.
    ValueError
        Bad parameters; ``scheduler`` or ``n_workers`` given with ``client`` (the clustering is one
        ordered stream in this process; the client only runs the front end); ``n_workers`` with
        ``scheduler="sync"`` / ``"threads"``; ``batch_size``, ``devices`` or ``candidates`` with ``method``
        "reference" or "brute"; ``devices=[]``; ``idf_from=""``.
    OutputDirectoryError (FileExistsError)
        ``out`` is not a new or empty directory nor an earlier cluster output, or is the working
        directory, the input or a parent of either (:mod:`cutext.stages.runtime.output`).
    """
    _check_front_end_placement(client, scheduler, n_workers)
    run = PipelineRun("cluster", out, manifest="cluster.json", inputs=[path, idf_from, *param_files(stopwords)],
                      overwrite=overwrite, progress=progress)
    threshold, top_k, n_top_terms, batch_size = _checked(weighting, threshold, top_k, n_top_terms, batch_size,
                                                         n_workers)
    tok_cfg = TokenizerConfig.make(lowercase, stopwords, stemmer, min_len, max_len)
    be, method, batch_size = _engine(run, idf_from, backend, method, batch_size, devices, candidates)
    read_kw = dict(format=format, text_column=text_column, id_column=id_column, blocksize=blocksize,
                   encoding=encoding, storage_options=storage_options, glob=glob, max_ratio=max_ratio,
                   members=members)
    cc = _front_end(run, path, tok_cfg, be, client, scheduler, n_workers, read_kw)
    order, tv, vec, idf_desc = run.stage("vectors", _vectors, cc, path, order_by, idf_from, top_k, weighting,
                                         tok_cfg, be, read_kw)
    sc, assign = run.stage("cluster", _cluster, run, tv, vec, cc["n_docs"], threshold, top_k, be, method=method,
                           batch_size=batch_size, devices=devices, candidates=candidates)
    params = {"threshold": float(threshold), "top_k": int(top_k), "order_by": order_by if isinstance(order_by, str)
              or order_by is None else "keys", "idf_from": idf_desc, "weighting": weighting, "method": method,
              "batch_size": int(batch_size), "devices": devices, "candidates": candidates,
              "tokenizer": tok_cfg.to_dict(), "format": cc["format"]}
    return _write_output(run, path, be, cc, sc, tv, vec, assign, order, params, n_top_terms)


def suggest_threshold(path, *, quantile=SUGGEST_QUANTILE, n_sample=SUGGEST_SAMPLE, seed=0, top_k=35,
                      weighting="tficf", lowercase=True, stopwords="lucene", stemmer=None, min_len=2, max_len=None,
                      format="auto", text_column=None, id_column=None, backend="auto", **read_kw) -> float:
    """A ``threshold`` for :func:`cluster_corpus` read off the corpus: the ``quantile`` of the documents'
    nearest-neighbour cosine similarities in a random sample.

    The corpus goes through the same front end and term vectors as :func:`cluster_corpus` (same tokenizer,
    ``top_k`` and weighting, IDF from the whole corpus); ``n_sample`` documents with a weighted term are
    drawn (all of them when there are fewer), and each one's largest similarity with another sampled
    document is taken (:func:`cutext.stages.text.termvec.nearest_similarities`).  A document of the stream
    whose best similarity with the clusters stays at or below the threshold starts a cluster, so the
    quantile steers how many do.  The default, 0.05 of 1,000 documents, lands where the fixed thresholds
    scored best against the labels of 20 Newsgroups and Reuters-21578 (0.047 and 0.077 there; the best
    fixed T is 0.05 on both, docs/decisions.md, ``benchmarks/defaults.py``); on a corpus whose documents
    are more (or less) alike, such as short texts, it moves with them.  The nearest neighbour of a larger
    sample is closer, so the value grows with ``n_sample``: keep the default to reproduce the measured
    choice.

    Parameters
    ----------
    path : str, os.PathLike, list, or a frame
        The corpus, as :func:`cluster_corpus` takes it (for a list of texts, a ``pandas.Series``).
    quantile : float
        In (0, 1); higher gives a higher threshold and more, purer clusters.
    n_sample : int
        Documents sampled, >= 2.
    seed : int
        Seed of the sample.
    top_k, weighting, lowercase, stopwords, stemmer, min_len, max_len
        As in :func:`cluster_corpus` (give the values the clustering will use).
    format, text_column, id_column, backend, **read_kw
        Reader settings and the backend of the front end, as in :func:`cluster_corpus`.

    Returns
    -------
    float
        In [0, 1]: pass it as ``cluster_corpus(..., threshold=...)``.

    Raises
    ------
    ValueError
        ``quantile`` outside (0, 1), ``n_sample`` < 2, bad tokenizer or reader settings; fewer than two
        documents with a weighted term.
    FileNotFoundError, CorpusError
        As :func:`cluster_corpus`.
    """
    quantile = number("quantile", quantile, lo=0, hi=1, lo_open=True, hi_open=True)
    n_sample = count("n_sample", n_sample, lo=2)
    seed = count("seed", seed, lo=0)
    _, top_k, _, _ = _checked(weighting, 0.5, top_k, 1, None, None)
    tok_cfg = TokenizerConfig.make(lowercase, stopwords, stemmer, min_len, max_len)
    cc = corpus_counts(path, tok_cfg, resolve_backend(backend), format=format, text_column=text_column,
                       id_column=id_column, **read_kw)
    n_docs = cc["n_docs"]
    df = np.bincount(cc["term_id"], minlength=len(cc["vocab"]) + 1).astype(np.int64)
    tv = term_vectors(cc["doc_id"], cc["term_id"], cc["tf"], n_docs, top_k, weighting=weighting, df=df,
                      n_ref=n_docs)
    weighted = np.flatnonzero(tv.length > 0)
    if len(weighted) < 2:
        raise ValueError(f"{input_label(path)}: {len(weighted)} document(s) with a weighted term; a threshold "
                         "needs two to compare")
    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(weighted, size=min(n_sample, len(weighted)), replace=False))
    return float(np.quantile(nearest_similarities(tv.take(pick)), quantile))


def _checked(weighting, threshold, top_k, n_top_terms, batch_size, n_workers):
    """``(threshold, top_k, n_top_terms, batch_size)`` checked, in this order (``n_workers`` too).

    Raises
    ------
    ValueError
        An unknown weighting, threshold outside [0, 1], top_k outside [1, MAX_TOP_K], n_top_terms,
        batch_size or n_workers < 1.
    """
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")
    threshold = number("threshold", threshold, lo=0, hi=1)
    top_k = count("top_k", top_k, lo=1, hi=MAX_TOP_K)  # before the n_docs x top_k term vectors are sized
    n_top_terms = count("n_top_terms", n_top_terms, lo=1)
    batch_size = count("batch_size", batch_size, lo=1, none_ok=True)
    count("n_workers", n_workers, lo=1, none_ok=True)
    return threshold, top_k, n_top_terms, batch_size


def _write_output(run: PipelineRun, path, be: str, cc: dict, sc, tv, vec, assign: pd.DataFrame,
                  order: np.ndarray, params: dict, n_top_terms: int) -> RunResult:
    """The write stage: the assignments, clusters and clusterer state, and the manifest; the run's result."""
    written = run.start("write")
    assign, cl = _tables(assign, order, cc, sc, vec, n_top_terms)
    n_docs, info = cc["n_docs"], cc["info"]
    counts = {"n_docs": n_docs, "n_clusters": sc.n_clusters, "n_empty_docs": int((tv.length == 0).sum()),
              "n_terms": len(cc["vocab"]), "n_singletons": int((cl["size"] == 1).sum())}
    with run.output() as tmp:
        _write_tables(tmp, assign, cl, sc)
        written()
        run.write_manifest(tmp, {
            "backend": be, "scheduler": info.scheduler, "n_workers": info.n_workers, "clustering": "in-process",
            "source": input_label(path), "params": params, "counts": counts, "timings": run.timings,
            "similarity_histogram": similarity_histogram(assign),
            "kernel_restarts": getattr(sc.engine, "restarts", 0),
            "candidate_batches": getattr(sc.engine, "candidate_batches", 0),
            "all_rows_batches": getattr(sc.engine, "all_rows_batches", 0)})
    return run.result(be, info.scheduler, info.n_workers, counts, params,
                      headline={"clusters": sc.n_clusters, "documents": n_docs})


def similarity_histogram(assign: pd.DataFrame, bins: int = 20) -> dict:
    """How the documents' best similarities with an earlier cluster spread over [0, 1] (cluster.json's
    ``similarity_histogram``): a document joins when its value is above the threshold, so the mass left of
    it is the clusters started.  Documents without a weighted term are left out.

    Returns
    -------
    dict
        ``edges``: ``bins + 1`` floats from 0 to 1; ``counts``: ``bins`` ints (the last bin includes 1).
    """
    sim = assign.loc[assign["cluster_id"].to_numpy() >= 0, "similarity"].to_numpy(np.float64)
    counts, edges = np.histogram(np.clip(sim, 0.0, 1.0), bins=bins, range=(0.0, 1.0))
    return {"edges": [round(float(e), 6) for e in edges], "counts": [int(c) for c in counts]}


def _check_engine_options(method: str, batch_size, devices, candidates) -> None:
    """Refuse the ELLPACK engine's options with the reference and brute engines, which take one document at
    a time over every cluster, and an empty ``devices`` list.

    Raises
    ------
    ValueError
        ``batch_size``, ``devices`` or ``candidates`` other than their defaults with ``method`` "reference" or
        "brute"; ``devices=[]``.
    """
    if devices is not None and len(devices) == 0:
        raise ValueError(f"{param('devices', devices)} names no GPU: give device numbers, or None (one device)")
    if method == "ellpack":
        return
    given = [(k, v) for k, v in (("batch_size", batch_size), ("devices", devices)) if v is not None]
    if candidates is True or candidates is False:  # another value is refused by the clusterer itself
        given.append(("candidates", candidates))
    if given:
        k, v = given[0]
        raise ValueError(f"{param(k, v)} is an option of the ELLPACK engine, but {param('method', method)} "
                         f"clusters one document at a time on the CPU: use {param('method', 'ellpack')} or drop "
                         f"{param(k, bare=True)}")


def _check_front_end_placement(client, scheduler, n_workers) -> None:
    """Refuse ``scheduler`` / ``n_workers`` with a client: they size a local cluster for the front end,
    and the clustering stays one ordered stream in this process."""
    if client is not None and (scheduler != "auto" or n_workers is not None):
        given = [(k, v) for k, v in (("scheduler", scheduler), ("n_workers", n_workers))
                 if (k == "scheduler" and v != "auto") or (k == "n_workers" and v is not None)]
        raise ValueError(f"cluster: {', '.join(param(k, v) for k, v in given)} with {param('client')}: the client "
                         "runs the front end (read, tokenize, encode, count) on its own workers, and the clustering "
                         "is one ordered stream in this process (Szasz and Samet Algorithm 1 is sequential), so "
                         f"there is no local cluster to size; drop {param(given[0][0], bare=True)}")


def _stream_positions(cc: dict, path, order_by, storage_options) -> np.ndarray:
    """The stream order of ``order_by`` (see :func:`cluster_corpus`): ``order[p]`` = doc_id at position p.

    Raises
    ------
    CorpusError
        An order_by column with a value count other than the documents'.
    ValueError
        Keys of another length than the documents; a column name on an input that is not a table.
    """
    n_docs = cc["n_docs"]
    if order_by is None or (isinstance(order_by, str) and order_by == "doc_id"):
        return np.arange(n_docs, dtype=np.int64)
    if isinstance(order_by, str) and order_by == "source_id":
        return stream_order(cc["docs"]["source_id"].astype(str))
    if isinstance(order_by, str) and is_frame(path):
        col = frame_column(path, order_by)
        if len(col) != n_docs:
            raise CorpusError(f"order_by column {order_by!r} has {len(col)} values for {n_docs} documents")
        return stream_order(col)
    if isinstance(order_by, str):
        return stream_order(_order_column(cc["pieces"], cc["format"], order_by, n_docs, storage_options))
    keys = np.asarray(order_by)
    if len(keys) != n_docs:
        raise ValueError(f"order_by has {len(keys)} keys for {n_docs} documents")
    return stream_order(keys)


def _vectors(cc: dict, path, order_by, idf_from, top_k: int, weighting: str, tok_cfg, be: str, read_kw: dict):
    """The vectors stage: the stream order and the documents' top-k term vectors in it.

    Returns
    -------
    order : ndarray (n_docs,) int64
        doc_id at each stream position.
    tv : TermVectors
        A row per stream position (:func:`cutext.stages.text.termvec.term_vectors`).
    vec : StreamVectorizer
        The vocabulary and IDF reference the clusterer keeps in its state.
    idf_desc : str
        ``"corpus"``, ``"stream"`` or the reference's path (the ``idf_from`` parameter recorded).
    """
    n_docs, vocab = cc["n_docs"], cc["vocab"]
    order = _stream_positions(cc, path, order_by, read_kw["storage_options"])
    position = np.empty(n_docs, np.int64)
    position[order] = np.arange(n_docs)
    V = len(vocab)
    doc_pos = position[cc["doc_id"]]
    if idf_from is None:
        df = np.bincount(cc["term_id"], minlength=V + 1).astype(np.int64)
        tv = term_vectors(doc_pos, cc["term_id"], cc["tf"], n_docs, top_k, weighting=weighting, df=df, n_ref=n_docs)
        vec = StreamVectorizer(top_k, weighting, "fixed", tok_cfg, terms=vocab.to_pylist(), df=df, n_ref=n_docs)
        idf_desc = "corpus"
    elif isinstance(idf_from, str) and idf_from == "stream":
        tv = term_vectors(doc_pos, cc["term_id"], cc["tf"], n_docs, top_k, weighting=weighting, stream=True)
        df = np.bincount(cc["term_id"], minlength=V + 1).astype(np.int64)
        vec = StreamVectorizer(top_k, weighting, "stream", tok_cfg, terms=vocab.to_pylist(), df=df, n_ref=n_docs)
        idf_desc = "stream"
    else:
        df, n_ref = _reference_df(idf_from, vocab, tok_cfg, be, **read_kw)
        tv = term_vectors(doc_pos, cc["term_id"], cc["tf"], n_docs, top_k, weighting=weighting, df=df, n_ref=n_ref)
        vec = StreamVectorizer(top_k, weighting, "fixed", tok_cfg, terms=vocab.to_pylist(), df=df, n_ref=n_ref)
        idf_desc = str(idf_from)
    return order, tv, vec, idf_desc


def _cluster(run: PipelineRun, tv, vec, n_docs: int, threshold: float, top_k: int, be: str, *, method,
             batch_size, devices, candidates):
    """The cluster stage: the documents one after the other, in stream order, :data:`CHUNK` a progress step.

    Returns
    -------
    sc : StreamClusterer
    assign : pandas.DataFrame
        A row per stream position: cluster_id, similarity, new_cluster.
    """
    sc = StreamClusterer(threshold, top_k, backend=be, method=method, batch_size=batch_size, devices=devices,
                         candidates=candidates, vectorizer=vec)
    bar = run.bar(n_docs, "cluster", "docs")
    parts = []
    for a in range(0, n_docs, CHUNK):
        parts.append(sc.partial_fit(tv.take(slice(a, min(a + CHUNK, n_docs)))))
        if bar is not None:
            bar.set_postfix_str(f"{sc.n_clusters} clusters")
            bar.update(min(CHUNK, n_docs - a))
    if bar is not None:
        bar.close()
    return sc, pd.concat(parts, ignore_index=True)


def _tables(assign: pd.DataFrame, order: np.ndarray, cc: dict, sc, vec, n_top_terms: int):
    """``(assignments, clusters)`` as written: the assignments with their doc_id and source_id, the
    clusters with their first document and top ``n_top_terms`` terms."""
    assign.insert(0, "doc_id", order)
    assign.insert(1, "source_id", cc["docs"]["source_id"].astype(str).to_numpy()[order])
    cl = sc.clusters(terms=vec.terms, n_terms=n_top_terms)
    first = assign.loc[assign["new_cluster"], ["cluster_id", "doc_id"]].set_index("cluster_id")["doc_id"]
    cl.insert(2, "first_doc_id", first.reindex(cl["cluster_id"]).to_numpy(np.int64))
    cl = cl.drop(columns=["norm"])
    return assign, cl


def _write_tables(tmp: Path, assign: pd.DataFrame, cl: pd.DataFrame, sc) -> None:
    """``assignments.parquet``, ``clusters.parquet`` and the clusterer's ``state/`` into ``tmp``."""
    pq.write_table(pa.Table.from_pandas(assign, preserve_index=False), tmp / "assignments.parquet")
    pq.write_table(pa.Table.from_pandas(cl, preserve_index=False), tmp / "clusters.parquet")
    (tmp / "state").mkdir()
    sc.write_state(tmp / "state")


# ----------------------------------------------------------------------------- quality

def _contingency(labels, clusters):
    lab = pd.factorize(pd.Series(labels))[0]
    clu = pd.factorize(pd.Series(clusters))[0]
    n_l, n_c = lab.max() + 1, clu.max() + 1
    return np.bincount(lab * n_c + clu, minlength=n_l * n_c).reshape(n_l, n_c).astype(np.float64)


def nmi(labels, clusters) -> float:
    """Normalized mutual information ``I(L; C) / sqrt(H(L) H(C))`` (natural logarithms; 1 = identical).

    Parameters
    ----------
    labels, clusters : array-like (n,)
        Class labels and cluster ids of the same documents.
    """
    m = _contingency(labels, clusters)
    n = m.sum()
    pl = m.sum(1) / n
    pcl = m.sum(0) / n
    nz = m > 0
    pij = m[nz] / n
    mi = float(np.sum(pij * np.log(pij / np.outer(pl, pcl)[nz])))
    hl = float(-np.sum(pl[pl > 0] * np.log(pl[pl > 0])))
    hc = float(-np.sum(pcl[pcl > 0] * np.log(pcl[pcl > 0])))
    if hl == 0.0 or hc == 0.0:
        return 1.0 if hl == hc else 0.0
    return mi / np.sqrt(hl * hc)


def purity(labels, clusters) -> float:
    """Purity: the fraction of documents whose cluster's majority label is their own label."""
    m = _contingency(labels, clusters)
    return float(m.max(axis=0).sum() / m.sum())


# ----------------------------------------------------------------------------- CLI

def _cli_main(args, kw) -> int:
    """``cluster PATH... [--out DIR] [options]``: cluster the corpus, print the result (``--json``: as JSON)."""
    r = cluster_corpus(kw.pop("path"), kw.pop("out"), **kw)
    print_result(r, args.json)
    return 0


# the subcommand of this module; its options are the keywords of cluster_corpus()
COMMANDS = (
    Command("cluster", cluster_corpus, _cli_main, help="online document-stream clustering (Szasz and Samet)",
            description="Cluster a corpus as a document stream; writes assignments and clusters (Parquet + JSON) "
                        "and a state to resume from. The options are the keywords of "
                        "cutext.pipelines.cluster.cluster_corpus.",
            positional={"path": dict(nargs="+", metavar="PATH",
                                     help="corpus: files, a directory, a glob or fsspec URLs")},
            json=True),
)


def add_cli(sub) -> None:
    """Register ``cluster`` with the ``python -m cutext.pipelines`` command line."""
    for command in COMMANDS:
        command.add_to(sub)
