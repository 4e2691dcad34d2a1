"""The ``bm25`` pipeline: build a term-major BM25 index, load it, search it.

Index directory layout (every file Parquet or JSON)::

    index.json           N, avgdl, variant, k1, b, delta, tokenizer, backend, version, counts, timings
    vocab.parquet        term_id: int32, term: string, df: int64, idf: float64, w0: float32
    documents/*.parquet  doc_id: int64, source_id: string, length: int32, replaced: int32
    postings/*.parquet   term_id: int32, doc_id: int64, tf: int32, weight: float32
                         (files in name order are globally sorted by (term_id, doc_id))

Term id 0 is reserved for unknown terms and has no row in ``vocab.parquet``.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from cutext.kernels._version import __version__
from cutext.kernels.backend import ARRAY_STACK, array_module, resolve_backend, to_host, values
from cutext.pipelines._result import RunResult, atomic_directory, check_output, write_json
from cutext.stages import bm25 as bm25_stage
from cutext.stages.compute import compute_context
from cutext.stages.corpus import build_corpus, open_corpus
from cutext.stages.encode import encode_terms
from cutext.stages.read import CorpusError
from cutext.stages.sort import term_major
from cutext.stages.tokenize import TokenizerConfig, tokenize_texts

POSTINGS_PER_FILE = 8_000_000


class _Stages:
    """Progress over the pipeline's stages (tqdm), and their wall-clock timings."""

    def __init__(self, names, progress: bool):
        self.timings: dict[str, float] = {}
        self.bar = None
        if progress:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=len(names), desc="bm25", unit="stage", leave=True)

    def run(self, name, fn, *args, **kwargs):
        if self.bar is not None:
            self.bar.set_postfix_str(name)
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        self.timings[name] = time.perf_counter() - t0
        if self.bar is not None:
            self.bar.update(1)
        return out

    def close(self):
        if self.bar is not None:
            self.bar.close()


class _DocumentsPartition:
    def __init__(self, lengths: np.ndarray):
        self.lengths = lengths

    def __call__(self, df):
        ids = df["doc_id"].values
        xp = array_module(ids)
        lengths = xp.asarray(self.lengths)[ids].astype(np.int32)
        out = df[["doc_id", "source_id", "replaced"]].copy()
        out["length"] = lengths
        return out[["doc_id", "source_id", "length", "replaced"]]


def _drop_dl(df):
    return df[["term_id", "doc_id", "tf", "weight"]]


def _term_major_order(t, d, block: int = 1 << 22) -> bool:
    """Whether (t, d) pairs are strictly increasing (term-major, then doc), checked in blocks so
    that the temporaries stay small (index load, issue 15)."""
    n = len(t)
    for a in range(0, max(n - 1, 0), block):
        e = min(a + block + 1, n)
        tt, dd = t[a:e], d[a:e]
        dt = tt[1:] > tt[:-1]
        if not bool(np.all(dt | ((tt[1:] == tt[:-1]) & (dd[1:] > dd[:-1])))):
            return False
    return True


def _term_slice(part, lo: int, hi: int, last: bool):
    """Rows of a counts partition (sorted by term) with ``lo <= term_id < hi`` (``<= hi`` if ``last``)."""
    t = values(part["term_id"])
    xp = array_module(t)
    a = int(xp.searchsorted(t, lo, side="left"))
    e = int(xp.searchsorted(t, hi, side="right" if last else "left"))
    return part.iloc[a:e]


def _term_range(slices, weight_fn):
    """One term range of the postings: the slices of every counts partition, weighted, sorted."""
    import importlib

    kept = [s for s in slices if len(s)] or slices[:1]
    lib = importlib.import_module(type(kept[0]).__module__.split(".")[0])  # pandas or cudf
    df = lib.concat(kept, ignore_index=True)
    df = _drop_dl(weight_fn(df))
    return df.sort_values(["term_id", "doc_id"], ignore_index=True)


def _term_major(counts, weighted, df_t: np.ndarray, nparts: int, weight_fn):
    """Term-major postings without a shuffle of the whole table (bounded memory, issue 15).

    ``counts`` partitions are sorted by (term_id, doc_id) and hold increasing doc-id ranges, so the
    postings of a term range are a slice of every partition: output partition ``i`` concatenates
    the slices of the range ``[div_i, div_{i+1})`` (:func:`cutext.stages.sort.term_divisions`, the
    last range closed), weights and sorts them.  Same partitions and rows as
    :func:`cutext.stages.sort.term_major` (whose degenerate cases it still uses).
    """
    import dask
    import dask.dataframe as dd

    from cutext.stages.sort import term_divisions

    divisions = term_divisions(df_t, nparts)
    if len(divisions) < 2 or divisions[0] == divisions[-1] or counts.npartitions == 1 and nparts == 1:
        return term_major(weighted, df_t, nparts)
    parts = counts.to_delayed()
    out = []
    for i in range(len(divisions) - 1):
        lo, hi, last = divisions[i], divisions[i + 1], i == len(divisions) - 2
        slices = [dask.delayed(_term_slice)(p, lo, hi, last) for p in parts]
        out.append(dask.delayed(_term_range)(slices, weight_fn))
    m = _drop_dl(bm25_stage.weights_meta(counts._meta))
    return dd.from_delayed(out, meta=m, verify_meta=False)


def build_index(path, out, *, variant="lucene", k1=1.2, b=0.75, delta=None,
                lowercase=True, stopwords=None, stemmer=None, min_len=1, max_len=None,
                format="auto", text_column=None, id_column=None, blocksize=64 << 20,
                encoding="utf-8", storage_options=None, glob=None, backend="auto", client=None,
                scheduler="auto", n_workers=None, overwrite=True, progress=True) -> RunResult:
    """Index a corpus for BM25 (paper 004, section 3: extract, ids by scan, sort, count, weight).

    Parameters
    ----------
    path : str, os.PathLike or list
        Corpus (see :func:`cutext.stages.read.read_corpus` for the formats).
    out : str or os.PathLike
        Index directory to write; written under a temporary name and renamed when complete.
    variant : {"lucene", "robertson", "atire", "bm25l", "bm25+"}
    k1, b, delta : float
        BM25 parameters (``delta`` only for bm25l, default 0.5, and bm25+, default 1.0).
    lowercase, stopwords, stemmer, min_len, max_len
        Tokenizer settings (:class:`cutext.stages.tokenize.TokenizerConfig`).
    format, text_column, id_column, blocksize, encoding, storage_options, glob
        Reader settings (:func:`cutext.stages.read.read_corpus`; ``glob=None``: a path that
        exists is read as itself, else ``*?[`` make it a pattern).
    backend : {"auto", "cpu", "gpu"}
    client : distributed.Client, optional
        Run on this cluster.
    scheduler : {"auto", "sync", "threads", "cluster"}
    n_workers : int, optional
        Workers of a local cluster (default: one per GPU / core).
    overwrite : bool
    progress : bool
        Show a progress bar over the stages.

    Returns
    -------
    RunResult
        ``path`` = the index directory; ``counts``: n_docs, n_terms, n_postings, n_tokens,
        n_empty_docs, replaced; ``timings`` in seconds per stage.

    Raises
    ------
    FileNotFoundError
        The input path matches nothing.
    CorpusError (ValueError)
        Unreadable input, a missing column, or an empty corpus (message names the file).
    ValueError
        Bad BM25 or tokenizer parameters.
    OutputDirectoryError (FileExistsError)
        ``out`` is not a new or empty directory nor an earlier bm25 index, or is the working
        directory, the input or a parent of either (:mod:`cutext.stages.output`); checked before any work.
    """
    check_output(out, kind="cutext.bm25", manifest="index.json", inputs=path, overwrite=overwrite)
    delta = bm25_stage.check_params(variant, k1, b, delta)
    tok_cfg = TokenizerConfig.make(lowercase, stopwords, stemmer, min_len, max_len)
    be = resolve_backend(backend)
    src = open_corpus(path, backend=be, format=format, text_column=text_column, id_column=id_column,
                      blocksize=blocksize, encoding=encoding, storage_options=storage_options,
                      glob=glob)
    nbytes, pieces, fmt = src.input_bytes, src.pieces, src.format
    stages = _Stages(["read", "tokenize", "encode", "sort+count", "weight+write"], progress)
    names = {"count": "sort+count"}  # the front end's stage names -> this index's timing names
    try:
        with compute_context(be, client=client, scheduler=scheduler, nbytes=nbytes, n_workers=n_workers) as info, \
                atomic_directory(out, overwrite=overwrite, kind="cutext.bm25", manifest="index.json",
                                 inputs=path) as tmp:
            corpus = build_corpus(src, tok_cfg, info,
                                  run_stage=lambda name, fn: stages.run(names.get(name, name), fn))
            docs, vocab, counts, df_t, lengths = corpus.docs, corpus.vocab, corpus.counts, corpus.df, corpus.lengths
            n_docs, n_terms = corpus.n_docs, corpus.n_terms
            del corpus
            n_tokens = int(lengths.sum())
            if n_tokens == 0:
                raise CorpusError(f"{path}: no document has a token after tokenization ({n_docs} documents)")
            avgdl = n_tokens / n_docs
            idf_t = bm25_stage.idf(df_t, n_docs, variant)
            w0 = bm25_stage.absent_weight(idf_t, variant, k1, delta)
            n_postings = int(df_t.sum())

            def _write():
                weight_fn = bm25_stage.WeightPartition(idf_t, avgdl, variant, k1, b, delta)
                weighted = counts.map_partitions(weight_fn, meta=bm25_stage.weights_meta(counts._meta))
                weighted = weighted.map_partitions(_drop_dl, meta=_drop_dl(bm25_stage.weights_meta(counts._meta)))
                nparts = max(1, -(-n_postings // POSTINGS_PER_FILE))
                postings = _term_major(counts, weighted, df_t, nparts, weight_fn)
                postings.to_parquet(str(tmp / "postings"), write_index=False, write_metadata_file=False,
                                    name_function=lambda i: f"part.{i:05d}.parquet")
                documents = docs.map_partitions(_DocumentsPartition(lengths),
                                                meta=_DocumentsPartition(np.zeros(0, np.int64))(docs._meta))
                documents.to_parquet(str(tmp / "documents"), write_index=False, write_metadata_file=False,
                                     name_function=lambda i: f"part.{i:05d}.parquet")
                replaced = int(docs["replaced"].sum().compute())
                vt = pa.table({"term_id": pa.array(np.arange(1, n_terms + 1, dtype=np.int32)),
                               "term": vocab,
                               "df": pa.array(df_t[1:]),
                               "idf": pa.array(idf_t[1:]),
                               "w0": pa.array(w0[1:].astype(np.float32))})
                pq.write_table(vt, tmp / "vocab.parquet")
                return replaced

            replaced = stages.run("weight+write", _write)
            result_counts = {"n_docs": n_docs, "n_terms": n_terms, "n_postings": n_postings,
                             "n_tokens": n_tokens, "n_empty_docs": int((lengths == 0).sum()),
                             "replaced": replaced, "input_bytes": nbytes, "partitions": len(pieces)}
            params = {"variant": variant, "k1": k1, "b": b, "delta": delta, "format": fmt,
                      "tokenizer": tok_cfg.to_dict()}
            write_json(tmp / "index.json", {
                "kind": "cutext.bm25", "version": __version__, "N": n_docs, "avgdl": avgdl,
                "variant": variant, "k1": k1, "b": b, "delta": delta, "tokenizer": tok_cfg.to_dict(),
                "backend": info.backend, "scheduler": info.scheduler, "n_workers": info.n_workers,
                "source": str(path), "format": fmt, "counts": result_counts, "timings": stages.timings,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    finally:
        stages.close()
    return RunResult("bm25", Path(out).absolute(), info.backend, info.scheduler, info.n_workers,
                     result_counts, stages.timings, params)


# ----------------------------------------------------------------------------- retrieval

def _as_queries(queries) -> tuple[list[str], list[str]]:
    """(query ids, query texts); a query that is not a string (None, NaN, a number) is an error naming it."""
    if isinstance(queries, str):
        return ["0"], [queries]
    if isinstance(queries, pd.DataFrame):
        qcol = "query" if "query" in queries.columns else "text"
        if qcol not in queries.columns or "query_id" not in queries.columns:
            raise ValueError(f"query DataFrame needs columns query_id and query; has {list(queries.columns)}")
        ids, texts = queries["query_id"].astype(str).tolist(), queries[qcol].tolist()
    elif isinstance(queries, pd.Series):
        ids, texts = [str(i) for i in queries.index], queries.tolist()
    elif isinstance(queries, dict):
        ids, texts = [str(k) for k in queries], list(queries.values())
    elif queries is None:
        raise TypeError("queries must be a string, a list, a dict, a Series or a DataFrame, got None")
    else:
        texts = list(queries)
        ids = [str(i) for i in range(len(texts))]
    for i, t in zip(ids, texts):
        if not isinstance(t, str):
            raise TypeError(f"query {i!r} is {t!r} ({type(t).__name__}), not a string")
    return ids, texts


def _sortable_u32(x):
    """float32 -> uint32 whose unsigned order is the float order (numpy or cupy)."""
    xp = array_module(x)
    u = x.astype(np.float32).view(np.uint32).astype(np.int64)
    return xp.where(u & 0x80000000, 0xFFFFFFFF - u, u | 0x80000000)


def topk_rows(indptr, indices, data, k: int):
    """Top ``k`` entries of every row of a CSR matrix whose rows have sorted column indices.

    Ties are broken by the smaller column index.  CPU: a partition per row, then a sort of the
    candidates only.  GPU: one stable radix sort of ``row << 32 | descending score`` keys.

    Returns
    -------
    (rows, cols, vals, rank) : arrays of the input's module, rank 0-based within the row.
    """
    xp = array_module(data)
    nq = len(indptr) - 1
    if xp is not np:
        counts = xp.diff(indptr).astype(np.int64)
        rows = xp.repeat(xp.arange(nq, dtype=np.int64), counts)
        key = (rows << 32) | (0xFFFFFFFF - _sortable_u32(data))
        order = xp.argsort(key, kind="stable")
        rank = xp.arange(len(order), dtype=np.int64) - indptr[rows[order]].astype(np.int64)
        sel = order[rank < k]
        return rows[sel], indices[sel].astype(np.int64), data[sel], rank[rank < k]
    out_rows, out_cols, out_vals, out_rank = [], [], [], []
    indptr = np.asarray(indptr)
    for r in range(nq):
        s, e = int(indptr[r]), int(indptr[r + 1])
        if s == e:
            continue
        v = data[s:e]
        c = indices[s:e]
        if e - s > k:
            kth = np.partition(v, e - s - k)[e - s - k]
            cand = np.flatnonzero(v >= kth)
            v, c = v[cand], c[cand]
        o = np.lexsort((c, -v))[:k]
        out_rows.append(np.full(len(o), r, np.int64))
        out_cols.append(c[o].astype(np.int64))
        out_vals.append(v[o])
        out_rank.append(np.arange(len(o), dtype=np.int64))
    if not out_rows:
        z = np.zeros(0, np.int64)
        return z, z, data[:0], z
    return (np.concatenate(out_rows), np.concatenate(out_cols), np.concatenate(out_vals),
            np.concatenate(out_rank))


class BM25Index:
    """A BM25 index loaded for search.

    The postings form a term-major CSR matrix ``M`` of shape (V + 1, N), float32; a batch of
    queries is a CSR matrix ``Q`` (n_queries, V + 1) of query term counts; scores are ``Q @ M``
    (scipy.sparse on the CPU, cupyx.scipy.sparse on the GPU) plus, for bm25l/bm25+, the weight
    of absent query terms.

    Attributes
    ----------
    path : pathlib.Path
    meta : dict        (index.json)
    vocab : pyarrow.LargeStringArray, shape (V,), sorted
    df, idf, w0 : numpy arrays, shape (V + 1,), index = term id
    source_ids : numpy object array, shape (N,)
    lengths : numpy int32 array, shape (N,)
    backend : str
    """

    def __init__(self, path, meta, vocab, df, idf, w0, source_ids, lengths, matrix, backend):
        self.path, self.meta, self.vocab = Path(path), meta, vocab
        self.df, self.idf, self.w0 = df, idf, w0
        self.source_ids, self.lengths = source_ids, lengths
        self.matrix, self.backend = matrix, backend
        self.tokenizer = TokenizerConfig.from_dict(meta["tokenizer"])
        self._has_w0 = bool(np.any(w0 != 0))
        self._w0_dev = None

    @property
    def n_docs(self) -> int:
        return int(self.meta["N"])

    @classmethod
    def load(cls, path, backend="auto") -> "BM25Index":
        """Load an index directory written by :func:`build_index`.

        Parameters
        ----------
        path : str or os.PathLike
        backend : {"auto", "cpu", "gpu"}
            Where the matrix lives and queries are scored (cupyx.scipy.sparse on ``"gpu"``).
            ``"auto"`` (the default of every loader) = the GPU when cupy is installed and a device
            is visible, else the CPU; the index files are the same for both.

        Raises
        ------
        ArtifactNotFoundError (ArtifactError, FileNotFoundError)
            Not an index directory (no index.json), or a missing table.
        ArtifactError (ValueError)
            A corrupt index, naming the directory and file: invalid JSON, another kind, a missing or
            ill-typed field or column, doc ids outside [0, N), term ids outside [1, V], weights that
            are not finite, postings that disagree with the vocabulary's df.
        """
        from cutext.stages import artifacts as art

        path = Path(path)
        meta = art.read_manifest(path, "index.json", "cutext.bm25", "a cutext BM25 index")
        mf = path / "index.json"
        N = art.field_int(meta, "N", mf, lo=0)
        art.field_float(meta, "avgdl", mf, lo=0)
        art.field_dict(meta, "tokenizer", mf)
        be = resolve_backend(backend, needs=ARRAY_STACK)
        vt = art.read_table(path / "vocab.parquet", {"term_id": "int", "term": "string", "df": "int",
                                                      "idf": "float", "w0": "float"}, "vocabulary")
        V = vt.num_rows
        if not np.array_equal(vt.column("term_id").to_numpy(), np.arange(1, V + 1)):
            raise art.ArtifactError(f"{path / 'vocab.parquet'}: term ids must be 1..{V} in order")
        vocab = vt.column("term").combine_chunks().cast(pa.large_string())
        df = np.concatenate([[0], vt.column("df").to_numpy()]).astype(np.int64)
        idf_t = np.concatenate([[0.0], vt.column("idf").to_numpy()])
        w0 = np.concatenate([[0.0], vt.column("w0").to_numpy()]).astype(np.float32)
        art.check_finite(idf_t, "idf", path / "vocab.parquet")
        art.check_finite(w0, "w0", path / "vocab.parquet")
        dt = art.read_table(path / "documents", {"doc_id": "int", "source_id": "any", "length": "int"},
                            "documents table")
        docs = (dt.to_pandas() if dt is not None else
                pd.DataFrame({"doc_id": [], "source_id": [], "length": []})).sort_values("doc_id")
        if len(docs) != N or not np.array_equal(docs["doc_id"].to_numpy(), np.arange(N)):
            raise art.ArtifactError(f"{path / 'documents'}: documents table does not hold doc ids 0..{N - 1}")
        art.check_range(docs["length"].to_numpy(), 0, np.iinfo(np.int64).max, "lengths", path / "documents")
        post = art.read_table(path / "postings", {"term_id": "int", "doc_id": "int", "weight": "float"}, "postings")
        if post is None:
            post = pa.table({"term_id": pa.array([], pa.int32()), "doc_id": pa.array([], pa.int64()),
                             "weight": pa.array([], pa.float32())})
        # one copy of each column (chunks -> one array), no widening: term ids stay as stored
        # (int32 by contract), doc ids become scipy's int32 indices when N allows
        t = post.column("term_id").to_numpy()
        d = post.column("doc_id").to_numpy()
        w = post.column("weight").to_numpy().astype(np.float32, copy=False)
        art.check_range(t, 1, V, "posting term ids", path / "postings")
        art.check_range(d, 0, N - 1, "posting doc ids", path / "postings")
        art.check_finite(w, "posting weights", path / "postings")
        counts = np.bincount(t, minlength=V + 1) if len(t) else np.zeros(V + 1, np.int64)
        if len(counts) != V + 1 or not np.array_equal(counts, df):
            raise art.ArtifactError(f"{path / 'postings'}: postings do not match the vocabulary's df")
        if not _term_major_order(t, d):  # not term-major on disk: sort (older or foreign writers)
            o = np.lexsort((d, t))
            t, d, w = t[o], d[o], w[o]
        if N < 2**31 and d.dtype != np.int32:
            d = d.astype(np.int32)
        if np.any(w0):
            w = w - w0[t]  # store w - w0; search adds the w0 of every query term back
        indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        import scipy.sparse as sp

        M = sp.csr_matrix((w, d, indptr), shape=(V + 1, N), copy=False)
        if be == "gpu":
            import cupy
            import cupyx.scipy.sparse as csp

            M = csp.csr_matrix((cupy.asarray(M.data), cupy.asarray(M.indices.astype(np.int32)),
                                cupy.asarray(M.indptr.astype(np.int32) if M.nnz < 2**31 else M.indptr)),
                               shape=M.shape)
        return cls(path, meta, vocab, df, idf_t, w0, docs["source_id"].to_numpy(dtype=object),
                   docs["length"].to_numpy(), M, be)

    # -- queries
    def query_matrix(self, texts):
        """CSR (n_queries, V + 1) float32 of query term counts (unknown terms dropped)."""
        import scipy.sparse as sp

        toks = tokenize_texts(texts, self.tokenizer)
        lens = np.fromiter((len(x) for x in toks), np.int64, len(toks))
        flat = [t for q in toks for t in q]
        ids = encode_terms(flat, self.vocab) if flat else np.zeros(0, np.int64)
        rows = np.repeat(np.arange(len(toks)), lens)
        keep = ids != 0
        Q = sp.csr_matrix((np.ones(int(keep.sum()), np.float32), (rows[keep], ids[keep])),
                          shape=(len(toks), len(self.vocab) + 1))
        Q.sum_duplicates()
        return Q

    def _to_device(self, Q):
        if self.backend != "gpu":
            return Q
        import cupy
        import cupyx.scipy.sparse as csp

        return csp.csr_matrix((cupy.asarray(Q.data), cupy.asarray(Q.indices.astype(np.int32)),
                               cupy.asarray(Q.indptr.astype(np.int32))), shape=Q.shape)

    def _absent(self, Q):
        """Per-query constant: sum over query terms of w0 (bm25l / bm25+), shape (n_queries,)."""
        return np.asarray(Q @ self.w0.astype(np.float64)).ravel()

    def get_scores(self, query: str) -> np.ndarray:
        """Dense BM25 scores of one query against every document, float32 array (N,), on the host."""
        Q = self.query_matrix([query])
        S = self._to_device(Q) @ self.matrix
        dense = S.toarray()
        dense = to_host(dense).ravel().astype(np.float64)
        if self._has_w0:
            dense += self._absent(Q)[0]
        return dense.astype(np.float32)

    def search(self, queries, k: int = 10, batch_size: int = 4096, progress: bool = False) -> pd.DataFrame:
        """Top-``k`` documents for every query.

        Parameters
        ----------
        queries : str, list of str, dict {query_id: text}, pandas Series (index = query id) or
            DataFrame ``(query_id, query)``
        k : int
        batch_size : int
            Queries scored per sparse matrix product.
        progress : bool

        Returns
        -------
        pandas.DataFrame
            ``query_id: str, doc_id: str`` (the source id), ``rank: int`` (1-based),
            ``score: float``, ``doc_index: int64``; documents that match no query term are not
            returned, so a query may have fewer than ``k`` rows.
        """
        from cutext.stages.params import count

        k = count("k", k, lo=1)
        batch_size = count("batch_size", batch_size, lo=1)
        qids, texts = _as_queries(queries)
        frames = []
        rng = range(0, len(texts), batch_size)
        if progress:
            from tqdm.auto import tqdm

            rng = tqdm(rng, desc="search", unit="batch")
        for s in rng:
            Q = self.query_matrix(texts[s:s + batch_size])
            S = (self._to_device(Q) @ self.matrix).tocsr()
            if not S.has_canonical_format:
                S.sum_duplicates()
            rows, cols, vals, rank = topk_rows(S.indptr, S.indices, S.data, k)
            rows, cols, vals, rank = (to_host(x) for x in (rows, cols, vals, rank))
            vals = vals.astype(np.float64)
            if self._has_w0:
                vals = vals + self._absent(Q)[rows]
            frames.append(pd.DataFrame({"query_id": np.asarray(qids[s:s + batch_size], dtype=object)[rows],
                                        "doc_id": self.source_ids[cols], "rank": rank + 1, "score": vals,
                                        "doc_index": cols}))
        if not frames:
            return pd.DataFrame(columns=["query_id", "doc_id", "rank", "score", "doc_index"])
        return pd.concat(frames, ignore_index=True)


# ----------------------------------------------------------------------------- command line

def add_cli(sub) -> None:
    """Register ``bm25`` (build an index) and ``search`` (query an index, write a TREC run) with
    the ``python -m cutext.pipelines`` command line."""
    p = sub.add_parser("bm25", help="build a BM25 index from a corpus",
                       description="Build a term-major BM25 index (Parquet + JSON) from a corpus. "
                                   "The index directory appears only when complete.")
    p.add_argument("path", nargs="+", help="corpus: files, a directory, a glob or fsspec URLs")
    p.add_argument("--out", required=True, help="index directory to write")
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", "gpu"],
                   help="auto = GPU when cudf and a device are present (default: auto)")
    p.add_argument("--scheduler", default="auto", choices=["auto", "sync", "threads", "cluster"],
                   help="auto = in-process for inputs under 256 MiB, else a local (CUDA) cluster")
    p.add_argument("--workers", type=int, default=None, help="workers of a local cluster (default: one per GPU/core)")
    p.add_argument("--scheduler-address", default=None, help="connect to an existing dask scheduler (tcp://host:8786)")
    p.add_argument("--variant", default="lucene", choices=["lucene", "robertson", "atire", "bm25l", "bm25+"],
                   help="BM25 formula (default lucene)")
    p.add_argument("--k1", type=float, default=1.2, help="term-frequency saturation (default 1.2)")
    p.add_argument("--b", type=float, default=0.75, help="length normalization in [0, 1] (default 0.75)")
    p.add_argument("--delta", type=float, default=None, help="bm25l/bm25+ lower bound (default 0.5 / 1.0)")
    p.add_argument("--stopwords", default=None,
                   help="'lucene' (Lucene's 33 English stopwords), 'none', or a file with one word per line")
    p.add_argument("--stemmer", default=None, help="Snowball algorithm: porter, english, german, ... (default none)")
    p.add_argument("--no-lowercase", action="store_true", help="keep case")
    p.add_argument("--min-len", type=int, default=1, help="drop tokens shorter than this (code points)")
    p.add_argument("--max-len", type=int, default=None, help="drop tokens longer than this (code points)")
    p.add_argument("--format", default="auto", choices=["auto", "files", "lines", "jsonl", "parquet", "csv"],
                   help="input format (auto: by suffix; a directory of other files, or a tar/zip archive "
                        "= one document per file or member)")
    p.add_argument("--text-column", action="append", default=None,
                   help="text column of jsonl/parquet/csv input; repeat to join several (title, text)")
    p.add_argument("--id-column", default=None, help="source id column (default: id, _id, doc_id, docid if present)")
    p.add_argument("--blocksize", type=int, default=64 << 20, help="bytes per input partition (default 64 MiB)")
    p.add_argument("--glob", default="auto", choices=["auto", "on", "off"],
                   help="paths as glob patterns: auto (default: a path that exists is itself, else *?[ are "
                        "patterns), on (always), off (never)")
    p.add_argument("--encoding", default="utf-8", help="input text encoding (undecodable bytes are replaced and counted)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(cli_main=_cli_main)

    p = sub.add_parser("search", help="run queries against an index, write a TREC run",
                       description="Score queries with an index; writes a TREC run (qid Q0 docid rank score tag).")
    p.add_argument("index", help="index directory written by 'bm25'")
    p.add_argument("--queries", required=True,
                   help="queries: TREC topics (SGML), BEIR queries.jsonl, 'qid<TAB>text' TSV, or one query per line")
    p.add_argument("--k", type=int, default=1000, help="documents per query (default 1000)")
    p.add_argument("--out", default="-", help="run file to write (default: standard output)")
    p.add_argument("--backend", default="cpu", choices=["auto", "cpu", "gpu"], help="where to score (default cpu)")
    p.add_argument("--batch-size", type=int, default=4096, help="queries per sparse product")
    p.add_argument("--tag", default="cutext", help="run tag (last column)")
    p.add_argument("--topic-field", default="title", choices=["title", "desc", "title+desc"],
                   help="field of classic TREC topics to use")
    p.set_defaults(cli_main=_search_cli_main)


def _cli_main(args) -> int:
    """``bm25 PATH --out DIR ...``: build the index, print the result (``--json``: as JSON)."""
    client = None
    if args.scheduler_address:
        from distributed import Client

        client = Client(args.scheduler_address)
    text_col = args.text_column[0] if args.text_column and len(args.text_column) == 1 else args.text_column
    path = args.path[0] if len(args.path) == 1 else args.path
    r = build_index(path, args.out, backend=args.backend, scheduler=args.scheduler,
                    n_workers=args.workers, client=client, variant=args.variant, k1=args.k1, b=args.b,
                    delta=args.delta, stopwords=args.stopwords, stemmer=args.stemmer,
                    lowercase=not args.no_lowercase, min_len=args.min_len, max_len=args.max_len,
                    format=args.format, text_column=text_col, id_column=args.id_column,
                    blocksize=args.blocksize, encoding=args.encoding,
                    glob={"auto": None, "on": True, "off": False}[args.glob], progress=not args.no_progress)
    print(json.dumps(r.to_dict(), indent=2, default=str) if args.json else str(r))
    return 0


def _search_cli_main(args) -> int:
    """``search INDEX --queries FILE ...``: score the queries, write a TREC run (``--out -``: standard output)."""
    import sys

    from cutext.pipelines.trec import read_queries, write_trec_run

    queries = read_queries(args.queries, args.topic_field)
    index = BM25Index.load(args.index, backend=args.backend)
    run = index.search(queries, k=args.k, batch_size=args.batch_size, progress=sys.stderr.isatty())
    if args.out == "-":
        for q, d, r_, s in zip(run.query_id, run.doc_id, run["rank"], run.score):
            sys.stdout.write(f"{q} Q0 {d} {r_} {s:.6f} {args.tag}\n")
    else:
        write_trec_run(run, args.out, tag=args.tag)
        print(f"wrote {len(run)} rows for {run.query_id.nunique()} queries to {args.out}", file=sys.stderr)
    return 0
