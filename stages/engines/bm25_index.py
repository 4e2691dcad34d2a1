"""A BM25 index on disk, loaded for search: the vocabulary, the documents table and the postings as a
CSR matrix on the host or the device (or one shard per worker of a Client), scored by the query
engines of :mod:`cutext.stages.engines.search`.  Built by the ``bm25`` pipeline
(:func:`cutext.pipelines.bm25.build_index`).
"""
from __future__ import annotations

import math
import re
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from cutext.kernels.backend import ARRAY_STACK, resolve_backend, to_host
from cutext.kernels.postings import csr_weights, place_weighted_runs
from cutext.kernels.termhash import TermHash, query_csr, text_csr
from cutext.stages.engines import index_commits, merge_policy, search_input, segments
from cutext.stages.engines import phrases as phrase_stage
from cutext.stages.engines import search as search_stage
from cutext.stages.engines.index_ids import source_id_list
from cutext.stages.engines.index_manifest import bm25f_spec, read_index_manifest
from cutext.stages.engines.index_reader import IndexReader
from cutext.stages.runtime import artifacts as art
from cutext.stages.runtime.compute import StepClock, WorkerActors
from cutext.stages.runtime.params import choice, count, param
from cutext.stages.runtime.progress import notice_compiles, notice_gpu_compiles
from cutext.stages.text import bm25 as bm25_stage
from cutext.stages.text.tokenize import (
    TextEncodingError,
    TokenizerConfig,
    normalize_texts,
    text_array,
    token_positions,
    tokenize_flat,
)


def read_postings(folder, N: int, V: int, df: np.ndarray, wmax: np.ndarray | None = None):
    """The postings of an index, read file by file and row group by row group into preallocated arrays.

    Bounded memory: the result is one copy of each column in its final dtype, filled
    from one row group at a time (about 1 M rows), so loading never holds the Arrow table and the
    arrays together; ``tf`` is not read.

    Parameters
    ----------
    folder : pathlib.Path
        ``<index>/postings``.
    N, V : int
        Documents and vocabulary size from the manifest and the vocabulary.
    df : int64 array, shape (V + 1,)
        The vocabulary's df (its sum is the number of postings).
    wmax : float array, shape (V + 1,), optional
        The largest weight each term can have (:func:`weight_bounds`); weights must lie in
        ``[0, wmax[term_id]]``.

    Returns
    -------
    (term_id, doc_id, weight, counts) : int32 array, int32 (int64 when N >= 2**31) array, float32
        array, shape (n_postings,), in file order; int64 array (V + 1,), postings per term id.

    Raises
    ------
    ArtifactNotFoundError
        No postings folder.
    ArtifactError
        Unreadable Parquet, a missing or ill-typed column, nulls, term ids outside [1, V], doc ids
        outside [0, N), weights that are not finite, or a row count other than ``df.sum()``;
        the message names the file.
    """
    import pyarrow.parquet as pq


    cols = {"term_id": "int", "doc_id": "int", "weight": "float"}
    if not folder.exists():
        raise art.ArtifactNotFoundError(f"{folder}: missing postings")
    files = sorted(folder.glob("*.parquet")) if folder.is_dir() else [folder]
    try:
        pfs = [pq.ParquetFile(f) for f in files]
    except (OSError, pa.ArrowException) as exc:
        raise art.ArtifactError(f"{folder}: unreadable postings ({exc})") from None
    for f, pf in zip(files, pfs):
        schema = pf.schema_arrow
        for name, kind in cols.items():
            if name not in schema.names:
                raise art.ArtifactError(f"{f}: postings has no column {name!r} (columns: {schema.names})")
            if not art._TYPES[kind](schema.field(name).type):
                raise art.ArtifactError(f"{f}: column {name!r} of postings must be {kind}, "
                                        f"got {schema.field(name).type}")
    n = sum(pf.metadata.num_rows for pf in pfs)
    if n != int(df.sum()):
        raise art.ArtifactError(f"{folder}: postings do not match the vocabulary's df "
                                f"({n} postings, df sums to {int(df.sum())})")
    t = np.empty(n, np.int32)
    d = np.empty(n, np.int32 if N < 2**31 else np.int64)
    w = np.empty(n, np.float32)
    counts = np.zeros(V + 1, np.int64)
    pos = 0
    for f, pf in zip(files, pfs):
        for g in range(pf.num_row_groups):
            try:
                tb = pf.read_row_group(g, columns=list(cols))
            except (OSError, pa.ArrowException) as exc:
                raise art.ArtifactError(f"{f}: unreadable postings ({exc})") from None
            k = tb.num_rows
            if pos + k > n or any(c.null_count for c in tb.columns):
                raise art.ArtifactError(f"{f}: postings row group {g} has nulls or more rows than its footer")
            tt, dd, ww = (tb.column(c).to_numpy() for c in cols)
            del tb
            art.check_range(tt, 1, V, "posting term ids", f)
            art.check_range(dd, 0, N - 1, "posting doc ids", f)
            art.check_finite(ww, "posting weights", f)
            if wmax is not None and k and ((ww < 0).any() or (ww > wmax[tt]).any()):
                i = int(np.flatnonzero((ww < 0) | (ww > wmax[tt]))[0])
                raise art.ArtifactError(f"{f}: posting weight {float(ww[i])!r} of term id {int(tt[i])} is outside "
                                        f"[0, {float(wmax[tt[i]])!r}], the range its idf, k1 and delta allow")
            t[pos:pos + k], d[pos:pos + k], w[pos:pos + k] = tt, dd, ww
            counts += np.bincount(t[pos:pos + k], minlength=V + 1)
            pos += k
            del tt, dd, ww
    if pos != n:
        raise art.ArtifactError(f"{folder}: postings hold {pos} rows, their footers {n}")
    pa.default_memory_pool().release_unused()  # the row groups' buffers, kept by the allocator
    return t, d, w, counts


def _term_major_order(t, d, block: int = 1 << 22) -> bool:
    """Whether (t, d) pairs are strictly increasing (term-major, then doc), checked in blocks so
    that the temporaries stay small (index load)."""
    n = len(t)
    for a in range(0, max(n - 1, 0), block):
        e = min(a + block + 1, n)
        tt, dd = t[a:e], d[a:e]
        dt = tt[1:] > tt[:-1]
        if not bool(np.all(dt | ((tt[1:] == tt[:-1]) & (dd[1:] > dd[:-1])))):
            return False
    return True


# ----------------------------------------------------------------------------- retrieval

# queries a numba thread of the query CSR takes at least (text_csr's chunk): a batch of 8192 on a 64-core
# host took 0.134 us a query on 32 threads and 0.236 on all 64 (benchmarks/micro/query_csr.py)
QUERIES_PER_THREAD = 256
RESULT_ROWS_FIRST = 1 << 24  # rows a search's result columns hold before they first grow


def ties_by_source_id(search, queries, k: int, n_docs: int, extra: int = 64) -> pd.DataFrame:
    """``search(queries, k')`` with equal scores ranked by the documents' source ids, as Anserini's
    ``SearchCollection`` sorts its hits (score descending, then the id field's UTF-8 bytes ascending).

    The engines break ties by the smaller ``doc_id``, so ``k' = k + extra`` hits are asked for and re-sorted; a
    query whose ``k``-th score still equals its ``k'``-th (a tie across the cut) asks again with ``extra``
    four times larger, so the first ``k`` rows are exact.

    Parameters
    ----------
    search : callable ``(queries, k) -> DataFrame`` (:meth:`BM25Index.search`'s frame)
    queries
        As :meth:`BM25Index.search`.
    k, n_docs : int
        Hits a query (already checked) and the documents of the index.

    Returns
    -------
    pandas.DataFrame
        The frame of ``search``, at most ``k`` rows a query, ranks renumbered.
    """
    while True:
        kk = min(n_docs, k + extra)
        hits = search(queries, kk)
        q = pd.factorize(hits["query_id"])[0]
        sid = hits["source_id"].astype(object).to_numpy()
        order = np.lexsort((sid, -hits["score"].to_numpy(), q))  # code point order of str = UTF-8 byte order
        hits = hits.iloc[order].reset_index(drop=True)
        q = q[order]
        rank = np.arange(len(q)) - np.searchsorted(q, q)
        score = hits["score"].to_numpy()
        n = np.bincount(q) if len(q) else np.zeros(0, np.int64)
        last = (np.cumsum(n) - 1)[q]  # the row of each query's lowest score
        cut = (rank == k - 1) & (n[q] == kk) & (score == score[last])
        if kk >= n_docs or not cut.any():
            keep = rank < k
            hits = hits[keep].reset_index(drop=True)
            hits["rank"] = rank[keep] + 1
            return hits
        extra *= 4


def _take_str(values: pa.Array, idx: np.ndarray) -> pd.Series:
    """``values[idx]`` as a pandas Series of the default string dtype, gathered by pyarrow."""
    taken = values.take(pa.array(idx, type=pa.int64()))
    return pd.Series(pd.array(taken, dtype=pd.Series([], dtype=str).dtype))


def _str_series(chunks: list) -> pd.Series:
    """pyarrow string arrays (a search's batches) as one pandas Series of the default string dtype, the
    chunks kept as they are (no copy)."""
    return pd.Series(pd.array(pa.chunked_array(chunks, pa.string()), dtype=pd.Series([], dtype=str).dtype))


topk_rows = search_stage.topk_rows  # the sparse path's top-k (moved to cutext.stages.engines.search)


def weight_bounds(idf_t: np.ndarray, k1: float, delta: float) -> np.ndarray:
    """The largest weight a posting of each term can have, float64 (V + 1,): ``idf * (k1 + 1 + delta)``
    bounds every variant's weight (the tf factor of each variant is below ``k1 + 1 + delta``,
    :mod:`cutext.stages.text.bm25`), widened by float32 rounding."""
    return np.abs(idf_t) * (k1 + 1.0 + delta) * (1 + 1e-5) + 1e-6


def _read_postings(path, N: int, V: int, df, w0, lo: int = 0, hi: int | None = None, wmax=None):
    """The postings of documents ``[lo, hi)`` as a scipy CSR (V + 1, hi - lo) float32 of ``w - w0``
    (columns = doc id - lo), validated (see :meth:`BM25Index.load`; :func:`read_postings` reads them
    row group by row group into one copy of each column)."""
    import scipy.sparse as sp


    hi = N if hi is None else hi
    t, d, w, counts = read_postings(path / "postings", N, V, df, wmax)
    if lo == 0 and hi == N:
        if not np.array_equal(counts, df):
            raise art.ArtifactError(f"{path / 'postings'}: postings do not match the vocabulary's df")
    else:  # a shard: keep the rows of its document range
        keep = (d >= lo) & (d < hi)
        t, d, w = t[keep], d[keep] - lo, w[keep]
        del keep
        counts = np.bincount(t, minlength=V + 1) if len(t) else np.zeros(V + 1, np.int64)
    if not _term_major_order(t, d):  # not term-major on disk: sort (older or foreign writers)
        o = np.lexsort((d, t))
        t, d, w = t[o], d[o], w[o]
        del o
    if hi - lo < 2**31 and d.dtype != np.int32:
        d = d.astype(np.int32)
    if np.any(w0):  # store w - w0 (in place, in blocks); search adds the w0 of every query term back
        for a in range(0, len(w), 1 << 22):
            w[a:a + (1 << 22)] -= w0[t[a:a + (1 << 22)]]
    del t
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return sp.csr_matrix((w, d, indptr), shape=(V + 1, hi - lo), copy=False)


def _read_documents(folder: Path, N: int) -> pd.DataFrame:
    """The documents table (``doc_id``, ``source_id``, ``length``) in doc id order, checked: each file holds
    ascending consecutive doc ids (as the build writes them) and together they are 0..N-1."""

    files = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
    if not folder.exists():
        raise art.ArtifactNotFoundError(f"{folder}: missing documents table")
    parts = []
    for f in files:
        t = art.read_table(f, {"doc_id": "int", "source_id": "any", "length": "int"}, "documents table")
        ids = t.column("doc_id").to_numpy()
        if len(ids) and not np.array_equal(ids, np.arange(ids[0], ids[0] + len(ids))):
            raise art.ArtifactError(f"{f}: doc ids are not ascending and consecutive (reordered rows)")
        parts.append((int(ids[0]) if len(ids) else -1, t))
    parts = [t for _, t in sorted(parts, key=lambda x: x[0])]
    docs = (pa.concat_tables(parts).to_pandas() if parts else
            pd.DataFrame({"doc_id": np.zeros(0, np.int64), "source_id": [], "length": np.zeros(0, np.int64)}))
    if len(docs) != N or not np.array_equal(docs["doc_id"].to_numpy(), np.arange(N)):
        raise art.ArtifactError(f"{folder}: documents table does not hold doc ids 0..{N - 1}")
    return docs


def _to_backend(M, backend: str):
    """The CSR on the device for ``backend == "gpu"`` (cupyx), else as is."""
    if backend != "gpu":
        return M
    import cupy
    import cupyx.scipy.sparse as csp

    return csp.csr_matrix((cupy.asarray(M.data), cupy.asarray(M.indices.astype(np.int32)),
                           cupy.asarray(M.indptr.astype(np.int32) if M.nnz < 2**31 else M.indptr)),
                          shape=M.shape)


class _Shard:
    """The documents ``[lo, hi)`` of an index, held by one worker of a cluster (sharded search)."""

    def __init__(self, lo: int, hi: int, matrix, backend: str):
        self.lo, self.hi, self.backend = lo, hi, backend
        self.sm = search_stage.SearchMatrix(matrix)
        self.device = None  # the GPU of a shard of BM25Index.load(devices=...)


def _load_shard(path: str, lo: int, hi: int, backend: str, N: int, V: int, df, w0, wmax=None) -> _Shard:
    """Worker side of :meth:`BM25Index.load` with a client: read the shard, put it on this worker's device."""
    be = resolve_backend(backend, needs=ARRAY_STACK)
    return _Shard(lo, hi, _to_backend(_read_postings(Path(path), N, V, df, w0, lo, hi, wmax), be), be)


def _load_segment_shard(folders: list, deletes: list, vocab, df, run: tuple, lo: int, hi: int, backend: str, fn,
                        w0) -> _Shard:
    """Worker side of a segmented :meth:`BM25Index.load` with a client: a consecutive run of segments
    (``vocab``, ``df``: the index's global terms, shared by every worker; ``run``: ``(n_docs, sum_dl,
    doc_base, term_ids)`` of the :class:`cutext.stages.engines.segments.MergedTerms` of this run;
    ``deletes``: their deleted documents) as the shard of documents ``[lo, hi)``, weighted on this
    worker's device."""
    be = resolve_backend(backend, needs=ARRAY_STACK)
    terms = segments.MergedTerms(vocab, df, *run)
    segs = [segments.live_segment(segments.read_segment(Path(f), verify=False), d) for f, d in zip(folders, deletes)]
    merged = segments.merge_segments(segs, terms=terms, device=be == "gpu")
    del segs
    return _Shard(lo, hi, _segment_matrix(merged, fn, w0, be), be)


class _Devices:
    """Shards on GPUs of this process (``BM25Index.load(devices=...)``): the stand-in of a client whose
    workers are devices; a shard is loaded, and its engine started, under its own device."""

    def __init__(self, devices, backend: str):
        if backend != "gpu":
            raise ValueError(f"BM25Index.load: devices= shards the index over GPUs, but the backend is {backend!r}")
        if isinstance(devices, (int, np.integer)):
            devices = [devices]
        devices = list(devices)
        import cupy

        n = cupy.cuda.runtime.getDeviceCount()
        if not devices or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and 0 <= d < n
                                  for d in devices):
            raise ValueError(f"BM25Index.load: devices must be a non-empty list of device numbers in [0, {n}), "
                             f"got {devices!r}")
        self.devices = [int(d) for d in devices]
        self._lanes: dict = {}  # device -> the thread that starts its batches (:meth:`submit`)

    def place(self, jobs) -> list:
        """Run each ``(device, lo, hi, (loader, *args))`` under its device, on a thread each."""
        import cupy

        def one(job):
            dev, lo, hi, (fn, *args) = job
            with cupy.cuda.Device(dev):
                shard = fn(*args)
                shard.device = dev
                cupy.cuda.Device(dev).synchronize()
            return lo, hi, f"gpu:{dev}", shard

        with ThreadPoolExecutor(len(jobs) or 1) as pool:
            return list(pool.map(one, jobs))

    def run(self, shard: "_Shard", fn, *args):
        import cupy

        with cupy.cuda.Device(shard.device):
            return fn(shard, *args)

    def submit(self, shard: "_Shard", fn, *args):
        """:meth:`run` on the thread of the shard's device (one a device, made at its first call): a future."""
        lane = self._lanes.get(shard.device)
        if lane is None:
            lane = ThreadPoolExecutor(1, thread_name_prefix=f"cutext-search-gpu{shard.device}")
            self._lanes[shard.device] = lane
        return lane.submit(self.run, shard, fn, *args)


def _slots(client) -> list:
    """Where the shards go: the client's workers (sorted), or the devices of :class:`_Devices`."""
    if isinstance(client, _Devices):
        return client.devices
    workers = sorted(client.scheduler_info()["workers"])
    if not workers:
        raise ValueError("BM25Index.load(client=...): the client has no workers")
    return workers


def _shard_topk_start(shard: _Shard, Q, k: int, engine: str, max_workspace, n_threads, doc_filter=None):
    """Worker side of a sharded search: :meth:`cutext.stages.engines.search.SearchMatrix.topk_start` of the shard,
    doc ids numbered within the shard (the merge adds the shard's first doc id,
    :func:`cutext.stages.engines.search.merge_topk`; ``doc_filter``: the shard's part of the filter,
    :meth:`cutext.stages.engines.search.DocFilter.shard`)."""
    return shard.sm.topk_start(Q, k, engine, max_workspace, n_threads, doc_filter)


def _shard_finish(shard: _Shard, finish):
    return finish()


def _on_device(device: int, fn, *args):
    """``fn(*args)`` under GPU ``device`` (on a thread of its own, whose current device is not the caller's)."""
    import cupy

    with cupy.cuda.Device(device):
        return fn(*args)


def _query_batch(Q):
    """The query CSR ``Q`` serialized once (``distributed.protocol.Serialized``), for every worker's call: the
    message to each worker carries the same header and frames (the arrays' buffers, no copy), none pickled
    again per worker; the worker receives the CSR itself."""
    from distributed.protocol import Serialized, serialize

    return Serialized(*serialize(Q, serializers=("dask", "pickle"), on_error="raise"))


class _ShardEngine:
    """A shard's long-lived search engine on its worker (a dask actor): a query batch is one call sent
    straight to the worker that holds the shard, with no task for the scheduler to place.

    A call starts its batch on one thread and waits for it on another (:meth:`topk` is a coroutine, run on
    the worker's event loop): the next batch, sent while this one is scored, is started as soon as it
    arrives, so the device scores it while this one's results are copied out and sent back, as the engines
    of one process do (``devices=``)."""

    def __init__(self, shard: _Shard):
        self.shard = shard
        self._start = ThreadPoolExecutor(1, thread_name_prefix="cutext-shard-start")
        self._finish = ThreadPoolExecutor(1, thread_name_prefix="cutext-shard-finish")

    async def topk(self, Q, k: int, engine: str, max_workspace, n_threads, doc_filter=None):
        import asyncio

        from distributed.protocol import Serialized, deserialize

        if isinstance(Q, Serialized):  # an in-process worker is handed the message's objects as they are
            Q = deserialize(Q.header, Q.frames)
        loop = asyncio.get_running_loop()
        clock = StepClock(np)  # $CUTEXT_GPUTEXT_PROFILE=1: the worker's side of a batch (queue waits included)
        finish = await loop.run_in_executor(self._start, _shard_topk_start, self.shard, Q, k, engine,
                                            max_workspace, n_threads, doc_filter)
        clock("shard: start (worker)")
        out = await loop.run_in_executor(self._finish, finish)
        clock("shard: finish (worker)")
        return out


def _shard_dense(shard: _Shard, Q):
    return shard.sm.dense(Q)


def _shard_info(shard: _Shard):
    return shard.lo, shard.hi, shard.backend, shard.sm.nonnegative


def shard_ranges(lengths: np.ndarray, n_shards: int) -> list[tuple[int, int]]:
    """Split items ``0..N-1`` (documents, or whole segments) into at most ``n_shards`` contiguous non-empty
    ranges of about equal weight (``lengths``: postings or tokens, +1 each so that empty items count).
    Each cut is the item boundary nearest to its share ``i / n_shards`` of the total: with few, large
    items (segments) the first boundary past the share could leave one shard a third of the work."""
    N = len(lengths)
    if N == 0:
        return []
    ends = np.concatenate([[0.0], np.cumsum(np.asarray(lengths, np.float64) + 1.0)])  # ends[j]: weight of 0..j-1
    cuts = [0]
    for i in range(1, n_shards):
        t = ends[-1] * i / n_shards
        j = int(np.searchsorted(ends, t))  # ends[j - 1] < t <= ends[j]
        if j > 0 and t - ends[j - 1] <= ends[min(j, N)] - t:
            j -= 1
        cuts.append(min(max(j, cuts[-1]), N))
    cuts.append(N)
    cuts = sorted(set(cuts))
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]


def _weight_fn(meta: dict, mf, terms, variant: str, k1: float, delta: float):
    """The weight function of a segmented index from its global statistics ``terms``
    (:class:`cutext.stages.engines.segments.MergedTerms`): BM25F (:func:`bm25_stage.field_corpus_weights`)
    for an index of fields, else the variant's BM25 (:func:`bm25_stage.corpus_weights`).

    Raises
    ------
    ArtifactError
        Bad parameters, no token, or segments whose fields are not those of index.json.
    """
    spec = bm25f_spec(meta, mf)
    try:
        if spec is None:
            if terms.field_sum_dl is not None:
                raise ValueError("the segments store fields, index.json has no bm25f entry")
            return bm25_stage.corpus_weights(terms.df, terms.n_docs, terms.sum_dl, variant, k1,
                                             float(meta.get("b", 0.4)), delta, meta.get("norms", "exact"),
                                             doc_count=terms.n_nonempty)
        fields, ws, bs = spec
        if meta.get("norms", "exact") != "exact":
            raise ValueError("index.json's norms apply to one-field indexes, not to its bm25f fields")
        if terms.field_sum_dl is None or len(terms.field_sum_dl) != len(fields):
            raise ValueError(f"index.json's bm25f fields {list(fields)} are not those of the segments")
        return bm25_stage.field_corpus_weights(terms.df, terms.n_docs, terms.field_sum_dl, variant, k1, ws, bs)
    except ValueError as exc:
        raise art.ArtifactError(f"{mf}: {exc}") from None


def _weighted_matrix(segs: list, mt, fn, w0: np.ndarray):
    """The scipy CSR (V + 1, N) float32 of ``w - w0`` of live segments in commit order (``mt``: their global
    statistics, :class:`cutext.stages.engines.segments.MergedTerms`; ``fn``: the corpus's one-field weight
    function), each segment's postings placed and weighted in one pass
    (:func:`cutext.kernels.postings.place_weighted_runs`): the matrix :func:`_segment_matrix` makes of
    :func:`cutext.stages.engines.segments.merge_segments`, bit for bit, without the merged tf."""
    import scipy.sparse as sp

    indptr = np.zeros(len(mt.df) + 1, np.int64)
    np.cumsum(mt.df, out=indptr[1:])
    doc = np.empty(int(indptr[-1]), np.int32 if mt.n_docs <= np.iinfo(np.int32).max else np.int64)
    data = np.empty(int(indptr[-1]), np.float32)
    fill = indptr[:-1].copy()  # next free slot of each term id: a term's postings of earlier segments first
    minus = w0 if np.any(w0) else None  # search adds the w0 of every query term back
    for sg, g, base in zip(segs, mt.term_ids, mt.doc_base[:-1]):
        if not sg.n_postings:
            continue
        start = fill[g]
        fill[g] += sg.df
        place_weighted_runs(start, sg.offsets, g, sg.doc, sg.tf, sg.lengths, int(base), fn.idf_t, fn.avgdl,
                            fn.variant, fn.k1, fn.b, fn.delta, doc, data, minus=minus)
    return sp.csr_matrix((data, doc, indptr), shape=(len(mt.df), mt.n_docs), copy=False)


def _segment_matrix(merged, fn, w0: np.ndarray, be: str, block: int = 1 << 24):
    """The CSR (V + 1, N) float32 of ``w - w0`` of merged segments (``fn``: the corpus's weight function),
    scipy on the host or, for ``be == "gpu"``, cupyx with the weights computed on the device (the same
    formulas on the same operands: the same bits as the host) from postings already there
    (``merge_segments(device=True)``) or copied there."""
    V, N = len(merged.indptr) - 2, len(merged.lengths)
    if be != "gpu":
        import scipy.sparse as sp

        # search adds the w0 of every query term back
        minus = w0 if np.any(w0) else None
        if isinstance(fn, bm25_stage.WeightPartition) and fn.norms == "exact":  # the numba twin of the formulas
            data = csr_weights(merged.indptr, merged.doc, merged.tf, merged.lengths, fn.idf_t, fn.avgdl, fn.variant,
                               fn.k1, fn.b, fn.delta, minus=minus)
        else:
            data = segments.posting_weights(merged, fn, minus=minus, block=block)
        return sp.csr_matrix((data, merged.doc, merged.indptr), shape=(V + 1, N), copy=False)
    import cupy
    import cupyx.scipy.sparse as csp

    indptr = cupy.asarray(merged.indptr)
    doc = cupy.asarray(merged.doc)
    # BM25F (fn: bm25_stage.FieldWeights) weighs the (F, n) per-field tf and lengths, as posting_weights does
    fields = merged.field_tf is not None
    tf = cupy.asarray(merged.field_tf if fields else merged.tf)
    lengths = cupy.asarray(merged.field_lengths if fields else merged.lengths)
    w0_d = cupy.asarray(w0)
    data = cupy.empty(len(doc), np.float32)
    for a in range(0, len(doc), block):
        e = min(a + block, len(doc))
        t = (cupy.searchsorted(indptr, cupy.arange(a, e, dtype=np.int64), side="right") - 1).astype(np.int32)
        data[a:e] = fn.weights(t, tf[..., a:e], lengths[..., doc[a:e]])
        if np.any(w0):
            data[a:e] -= w0_d[t]
    del tf, lengths
    return csp.csr_matrix((data, doc.astype(np.int32, copy=False),
                           indptr.astype(np.int32) if len(doc) < 2**31 else indptr), shape=(V + 1, N))


class BM25Index:
    """A BM25 index loaded for search.

    The postings form a term-major CSR matrix ``M`` of shape (V + 1, N), float32 (stored weights
    ``w - w0``); a batch of queries is a CSR ``Q`` (n_queries, V + 1) of query term counts; the
    scores are the rows of ``Q @ M`` plus, for bm25l/bm25+, the weight ``w0`` of the query terms a
    document lacks.  The top k of each query come from one of the engines of
    :mod:`cutext.stages.engines.search` (CPU: numba threads; GPU: the tiled CUDA engine; or the sparse
    product itself), all with one ties rule: equal scores are ranked by the smaller ``doc_id``.

    Loaded with a dask ``client``, the documents are split into ranges (shards) over the client's
    workers; each worker keeps its shard (on its GPU or CPU) in a long-lived engine (a dask actor:
    a batch is one call to each worker, no task graph), every query batch is tokenized once here,
    scored on every shard and the top k merged on the caller, the same result as one index.  With
    ``devices``, the shards live on GPUs of this process and each batch runs on all of them at once.

    Attributes
    ----------
    path : pathlib.Path
    meta : dict        (index.json)
    vocab : pyarrow.LargeStringArray, shape (V,), sorted
    df, idf, w0 : numpy arrays, shape (V + 1,), index = term id
    source_ids : numpy object array, shape (N,)
    lengths : numpy int32 array, shape (N,)
    backend : str      ("cpu" / "gpu"; with a client, that of the shards, comma-joined if they differ)
    matrix : scipy / cupyx CSR, or None for a sharded index
    shards : list of (lo, hi, worker address or "gpu:<device>"), empty unless loaded with a client or devices
    store_text : bool  (the documents' texts are kept: :meth:`doc`, :meth:`docs`, ``search(with_text=True)``)
    keep_columns : list of str  (the input's columns kept for filters: :meth:`column_table`, ``search(filter=)``)
    positions : bool  (term positions are stored: phrase and proximity queries, ``search('"a b"~2')``)
    """

    def __init__(self, path, meta, vocab, df, idf, w0, source_ids, lengths, matrix, backend,
                 client=None, shards=None):
        self.path, self.meta, self.vocab = Path(path), meta, vocab
        self.df, self.idf, self.w0 = df, idf, w0
        self.source_ids, self.lengths = source_ids, lengths
        self.matrix, self.backend = matrix, backend
        self.tokenizer = TokenizerConfig.from_dict(meta["tokenizer"])
        self._has_w0 = bool(np.any(w0 != 0))
        self._sm = search_stage.SearchMatrix(matrix) if matrix is not None else None
        self._term_hash = None  # kernels.termhash.TermHash of the vocabulary, built at the first query
        self._client = client
        self._engines = None  # WorkerActors: the engines (_ShardEngine) of a client's shards, one per worker
        self._shard_futures = list(shards or [])  # (lo, hi, worker, future)
        self.shards = [(lo, hi, w) for lo, hi, w, _ in self._shard_futures]
        self._text_segments = None  # (folders, deletes, doc_base) of a segmented index, for its texts
        self._texts_cache: dict = {}  # segment number -> its live texts, read at the first use
        self._id_index = None  # pandas Index of the source ids (first of equal ids), built at the first doc()
        self._columns = None  # pyarrow Table of the kept columns, read at the first filter by them
        self._phrase_index = None  # phrases.PhraseIndex (postings with positions), read at the first phrase query
        self._reader = None  # index_reader.IndexReader of a segmented index loaded in this process: refresh()

    @property
    def store_text(self) -> bool:
        """Whether the index keeps its documents' texts (built with ``store_text=True``)."""
        return self._text_segments is not None and self.meta.get("store_text") is True

    @property
    def n_docs(self) -> int:
        return int(self.meta["N"])

    @property
    def positions(self) -> bool:
        """Whether the index stores term positions (built with ``positions=True``): phrase queries."""
        return self._text_segments is not None and self.meta.get("positions") is True

    @property
    def keep_columns(self) -> list:
        """The input's columns kept in the index (``keep_columns=`` of the build), for filters; [] if none."""
        return list(self.meta.get("keep_columns") or []) if self._text_segments is not None else []

    def __repr__(self) -> str:
        m = self.meta
        delta = f", delta={m['delta']}" if m.get("variant") in ("bm25l", "bm25+") else ""
        delta += f", norms={m['norms']!r}" if m.get("norms", "exact") != "exact" else ""
        postings = self.matrix.nnz if self.matrix is not None else int(self.df.sum())
        shards = f", shards={len(self.shards)}" if self.shards else ""
        texts = ", texts=True" if self.store_text else ""
        texts += f", keep_columns={self.keep_columns}" if self.keep_columns else ""
        texts += ", positions=True" if self.positions else ""
        f = m.get("bm25f") if isinstance(m.get("bm25f"), dict) else None
        # BM25F: the fields' weights and b's stand for the one b
        b = (f"fields={dict(zip(f['fields'], f['weights']))}, field_b={dict(zip(f['fields'], f['b']))}"
             if f is not None else f"b={m.get('b')}")
        return (f"BM25Index(N={self.n_docs:,}, V={len(self.vocab):,}, postings={postings:,}, "
                f"variant={m.get('variant')!r}, k1={m.get('k1')}, {b}{delta}, "
                f"backend={self.backend!r}{shards}{texts}, path={str(self.path)!r})")

    @classmethod
    def load(cls, path, backend="auto", client=None, verify: bool = True, devices=None) -> "BM25Index":
        """Load an index directory written by :func:`build_index`.

        Parameters
        ----------
        path : str or os.PathLike
        backend : {"auto", "cpu", "gpu"}
            Where the matrix lives and queries are scored.  ``"auto"`` (the default of every loader)
            = the GPU when cupy is installed and a device is visible, else the CPU; the index files
            are the same for both.  With a ``client``, each worker resolves it for itself.
        client : distributed.Client, optional
            Shard the index over the client's workers: documents ``0..N-1`` are cut into one contiguous
            range per worker (about equal token counts, :func:`shard_ranges`); each worker reads and
            keeps its range's postings (the path must be readable by the workers).  Search results are
            the same as without a client.
        verify : bool, default True
            Check the CRC32 of every file against index.json before reading (one extra read of the
            index; :func:`cutext.stages.runtime.artifacts.read_manifest`, ``benchmarks/checksums.py`` for its
            cost).  False skips it; the value checks below still run.
        devices : list of int, optional
            Shard the index over these GPUs of this process (the GPU backend): one contiguous range of
            documents per entry, as with a client (a segmented index is cut on segment boundaries), read
            on a thread each; every query batch runs on all of them at once and the top k are merged
            here.  Search results are the same as one device's.  A device may be named twice (two shards
            on it).

        Raises
        ------
        ArtifactNotFoundError (ArtifactError, FileNotFoundError)
            Not an index directory (no index.json), or a missing table.
        ArtifactError (ValueError)
            A corrupt index, naming the directory and file: a file whose checksum or size does not
            match index.json or that it does not list (with ``verify``), invalid JSON, another kind, a
            missing or ill-typed field or column, BM25 parameters out of range, a vocabulary that is
            not strictly sorted (shuffled or duplicated terms), df outside [1, N], idf or w0 that do
            not follow from df, N and the variant, document ids that are not 0..N-1 ascending in
            every file, doc ids outside [0, N), term ids outside [1, V], weights that are not finite
            or outside [0, idf * (k1 + 1 + delta)], postings that disagree with the vocabulary's df.
        ValueError
            A client without workers; ``devices`` that are not visible device numbers, with a client or
            on the CPU backend.
        """
        if devices is not None:
            if client is not None:
                raise ValueError(f"BM25Index.load: {param('devices')} shards over this process's GPUs; with "
                                 f"{param('client')} each worker holds the shard of its own device (pass one or the "
                                 "other)")
            client = _Devices(devices, resolve_backend(backend, needs=ARRAY_STACK))
        index = cls._open(Path(path), backend, client, verify)
        # a commit made through the index (delete, compact) reloads it alike
        index._load_args = (backend, None if isinstance(client, _Devices) else client, verify, devices)
        return index

    @classmethod
    def _open(cls, path: Path, backend, client, verify: bool) -> "BM25Index":
        meta = read_index_manifest(path, verify=verify)  # every field checked
        mf = path / "index.json"
        N = art.field_int(meta, "N", mf, lo=0)
        avgdl = art.field_float(meta, "avgdl", mf, lo=0)
        try:
            TokenizerConfig.from_dict(art.field_dict(meta, "tokenizer", mf))
            variant = meta.get("variant", "lucene")
            delta = bm25_stage.check_params(variant, meta.get("k1", 0.9), meta.get("b", 0.4), meta.get("delta"))
            k1 = float(meta.get("k1", 0.9))
            if bm25_stage.check_norms(meta.get("norms", "exact"), variant) != "exact" and meta.get("index_format") != 2:
                raise ValueError("norms='lucene' is kept by segmented indexes (index_format 2) only")
        except (TypeError, ValueError, KeyError) as exc:
            raise art.ArtifactError(f"{mf}: {exc}") from None
        if client is None or isinstance(client, _Devices):
            be = resolve_backend(backend, needs=ARRAY_STACK)
        else:
            be = choice("backend", backend, ("auto", "cpu", "gpu"))
        fmt = meta.get("index_format", 1)
        if fmt == 2:
            return cls._load_segments(path, meta, N, avgdl, variant, k1, delta, be, client)
        if fmt != 1:
            raise art.ArtifactError(f"{mf}: index_format {fmt!r} is not one this cutext reads (1 or 2); "
                                    "rebuild the index with this version (cutext bm25 PATH --out DIR)")
        vt = art.read_table(path / "vocab.parquet", {"term_id": "int", "term": "string", "df": "int",
                                                      "idf": "float", "w0": "float"}, "vocabulary")
        V = vt.num_rows
        if not np.array_equal(vt.column("term_id").to_numpy(), np.arange(1, V + 1)):
            raise art.ArtifactError(f"{path / 'vocab.parquet'}: term ids must be 1..{V} in order")
        vocab = vt.column("term").combine_chunks().cast(pa.large_string())
        vf = path / "vocab.parquet"
        if V > 1 and not pc.all(pc.less(vocab[:-1], vocab[1:])).as_py():  # sorted at build: a shuffle or repeat
            raise art.ArtifactError(f"{vf}: terms are not strictly ascending (shuffled or duplicated terms)")
        docs = _read_documents(path / "documents", N)
        df = np.concatenate([[0], vt.column("df").to_numpy()]).astype(np.int64)
        idf_t = np.concatenate([[0.0], vt.column("idf").to_numpy()])
        w0 = np.concatenate([[0.0], vt.column("w0").to_numpy()]).astype(np.float32)
        art.check_range(df[1:], 1, N, "df", vf)
        art.check_finite(idf_t, "idf", vf)
        art.check_finite(w0, "w0", vf)
        if V and not np.allclose(idf_t[1:], bm25_stage.idf(df[1:], N, variant), rtol=1e-6, atol=1e-9):
            raise art.ArtifactError(f"{vf}: idf does not follow from df, N={N} and variant {variant!r}")
        if V and not np.allclose(w0[1:], bm25_stage.absent_weight(idf_t[1:], variant, k1, delta), rtol=1e-5,
                                 atol=1e-6):
            raise art.ArtifactError(f"{vf}: w0 does not follow from idf, k1 and delta of index.json")
        lengths = docs["length"].to_numpy()
        art.check_range(lengths, 0, np.iinfo(np.int64).max, "lengths", path / "documents")
        if N and not math.isclose(float(lengths.sum()) / N, avgdl, rel_tol=1e-6, abs_tol=1e-9):
            raise art.ArtifactError(f"{mf}: avgdl={avgdl} is not the mean length of the documents table "
                                    f"({float(lengths.sum()) / N})")
        source_ids = docs["source_id"].to_numpy(dtype=object)
        wmax = weight_bounds(idf_t, k1, delta)
        if client is None:
            M = _to_backend(_read_postings(path, N, V, df, w0, wmax=wmax), be)
            return cls(path, meta, vocab, df, idf_t, w0, source_ids, lengths, M, be)
        slots = _slots(client)
        jobs = [(slot, lo, hi, (_load_shard, str(path.absolute()), lo, hi, be, N, V, df, w0, wmax))
                for (lo, hi), slot in zip(shard_ranges(lengths, len(slots)), slots)]
        return cls._placed(client, jobs, path, meta, vocab, df, idf_t, w0, source_ids, lengths)

    @classmethod
    def _placed(cls, client, jobs, *fields) -> "BM25Index":
        """The sharded index of ``jobs`` = ``[(slot, lo, hi, (loader, *args)), ...]``: each loader run on its
        slot (a client's worker, or a device of :class:`_Devices`), the shards' engines checked alike."""
        if isinstance(client, _Devices):
            futures = client.place(jobs)
            infos = [_shard_info(f) for _, _, _, f in futures]
        else:
            futures = [(lo, hi, w, client.submit(*job, workers=[w], allow_other_workers=False, pure=False))
                       for w, lo, hi, job in jobs]
            infos = client.gather([client.submit(_shard_info, f, workers=[w], allow_other_workers=False,
                                                 pure=False) for _, _, w, f in futures])
        index = cls(*fields, None, ",".join(sorted({i[2] for i in infos})), client=client, shards=futures)
        index._shard_nonnegative = all(i[3] for i in infos)
        if not isinstance(client, _Devices):  # one engine per worker, holding the shard it loaded
            engines = [client.submit(_ShardEngine, f, workers=[w], allow_other_workers=False, actor=True, pure=False)
                       for _, _, w, f in futures]
            index._engines = WorkerActors(client, engines, [w for _, _, w, _ in futures])
        return index

    @classmethod
    def _load_segments(cls, path: Path, meta: dict, N: int, avgdl: float, variant: str, k1: float, delta: float,
                       be: str, client, reader: IndexReader | None = None) -> "BM25Index":
        """:meth:`load` of a segmented index (``index_format`` 2): the commit's segment readers
        (:class:`cutext.stages.engines.index_reader.IndexReader`: ``reader``, or those of ``path``'s commit,
        whose files :meth:`load` verified) merged in their order, weighted from the global N, avgdl and df
        (:mod:`cutext.stages.engines.segments`; on the GPU backend the weights are computed on the device)."""
        mf = path / "index.json"
        folders, deletes = index_commits.commit_segments(path, meta)
        if client is not None:
            return cls._load_segment_shards(path, meta, folders, deletes, N, avgdl, variant, k1, delta, be, client)
        if reader is None:
            reader = IndexReader.open(path, verify=False)
            if reader.meta != meta:  # committed since the manifest was read and verified: read the new commit
                return cls._open(path, be, None, True)
        mt, segs = reader.terms, [r.segment for r in reader.segments]
        if mt.n_docs != N:
            raise art.ArtifactError(f"{mf}: N={N}, the segments hold {mt.n_docs} documents")
        if N and not math.isclose(mt.avgdl, avgdl, rel_tol=1e-12, abs_tol=1e-12):
            raise art.ArtifactError(f"{mf}: avgdl={avgdl} is not the segments' mean length ({mt.avgdl})")
        fn = _weight_fn(meta, mf, mt, variant, k1, delta)
        w0 = fn.w0.astype(np.float32)  # as format 1 stores it: the scores of both formats are the same
        if be != "gpu" and isinstance(fn, bm25_stage.WeightPartition) and fn.norms == "exact":  # one pass
            M = _weighted_matrix(segs, mt, fn, w0)
            lengths = np.concatenate([sg.lengths for sg in segs]).astype(np.int32, copy=False) if segs else \
                np.zeros(0, np.int32)
            ids = pa.concat_arrays([sg.source_ids.cast(pa.string()) for sg in segs]) if segs else \
                pa.array([], pa.string())
        else:
            merged = segments.merge_segments(segs, terms=mt, device=be == "gpu")  # the GPU's postings placed there
            M = _segment_matrix(merged, fn, w0, be)
            lengths, ids = merged.lengths, merged.source_ids
            del merged
        source_ids = ids.to_numpy(zero_copy_only=False).astype(object)
        index = cls(path, meta, mt.vocab, mt.df, fn.idf_t, w0, source_ids, lengths, M, be)
        index._text_segments = (folders, deletes, mt.doc_base)
        index._reader = reader
        return index

    @classmethod
    def _load_segment_shards(cls, path: Path, meta: dict, folders: list, deletes: list, N: int, avgdl: float,
                             variant: str, k1: float, delta: float, be: str, client) -> "BM25Index":
        """:meth:`load` of a segmented index with a client (or ``devices``): the global statistics from every
        segment's terms and documents here (O(vocabulary + documents)), then each worker (device) reads a
        consecutive run of segments (about equal postings) and weighs its postings on its own device."""
        mf = path / "index.json"
        slots = _slots(client)
        heads = segments.segment_heads(folders, deletes)
        mt = segments.merge_terms(heads)
        if mt.n_docs != N or (N and not math.isclose(mt.avgdl, avgdl, rel_tol=1e-12, abs_tol=1e-12)):
            raise art.ArtifactError(f"{mf}: N={N}, avgdl={avgdl}; the segments hold {mt.n_docs} documents of "
                                    f"mean length {mt.avgdl}")
        fn = _weight_fn(meta, mf, mt, variant, k1, delta)
        w0 = fn.w0.astype(np.float32)
        lengths = (np.concatenate([h.lengths for h in heads]).astype(np.int32) if heads else np.zeros(0, np.int32))
        source_ids = (pa.concat_arrays([h.source_ids.cast(pa.string()) for h in heads]).to_numpy(zero_copy_only=False)
                      .astype(object) if heads else np.zeros(0, object))
        runs = shard_ranges(np.array([h.n_postings for h in heads], np.int64), len(slots))
        shared = [mt.vocab, mt.df, fn, w0]  # O(V), the same for every worker: sent to each once, not in a graph
        if not isinstance(client, _Devices):
            shared = client.scatter(shared, broadcast=True, hash=False)
        vocab, df, fn_s, w0_s = shared
        jobs = []
        for (a, e), slot in zip(runs, slots):
            run = (mt.n_docs, mt.sum_dl, mt.doc_base[a:e + 1], mt.term_ids[a:e])
            lo, hi = int(mt.doc_base[a]), int(mt.doc_base[e])
            jobs.append((slot, lo, hi, (_load_segment_shard, [str(p.absolute()) for p in folders[a:e]], deletes[a:e],
                                        vocab, df, run, lo, hi, be, fn_s, w0_s)))
        index = cls._placed(client, jobs, path, meta, mt.vocab, mt.df, fn.idf_t, w0, source_ids, lengths)
        index._text_segments = (folders, deletes, mt.doc_base)
        return index

    # -- documents
    def _no_text(self) -> str:
        if self.meta.get("index_format", 1) != 2:
            return (f"{self.path}: a format-1 index stores no document text; rebuild it with store_text=True "
                    "(segmented, the default index_format=2)")
        return (f"{self.path}: this index stores no document text; build it with store_text=True "
                "(python -m cutext.pipelines bm25 ... --store-text)")

    def doc_ids(self, source_ids) -> np.ndarray:
        """The doc ids (0..N-1) of documents given by their source ids.

        Parameters
        ----------
        source_ids : str or iterable of str
            Source ids as search results give them, exactly (a non-str is refused, not converted:
            :func:`cutext.stages.engines.index_ids.source_id_list`).  Of equal source ids in the index (an
            append with ``on_duplicate="keep"``) the first document is taken.

        Returns
        -------
        numpy int64 array, shape (len(source_ids),) (1 for one str)

        Raises
        ------
        KeyError
            A source id that is not in the index (up to five named).
        """
        if self._id_index is None:
            ids = pd.Index(self.source_ids, dtype=object)
            first = ~ids.duplicated(keep="first")  # equal ids after an append: the first document answers
            self._id_index, self._id_pos = ids[first], np.flatnonzero(first).astype(np.int64)
        wanted = source_id_list(source_ids)
        pos = self._id_index.get_indexer(wanted)
        if (pos < 0).any():
            missing = [w for w, p in zip(wanted, pos) if p < 0]
            raise KeyError(f"{len(missing)} source id(s) not in the index {self.path}, e.g. {missing[:5]}")
        return self._id_pos[pos]

    def _segment_texts(self, s: int) -> pa.Array:
        """The live texts of segment ``s``, read at the first use and kept."""
        if s not in self._texts_cache:
            folders, deletes, _ = self._text_segments
            t = segments.read_segment_texts(folders[s], deletes[s])
            if t is None:
                raise ValueError(f"{folders[s]}: this segment stores no document text; " + self._no_text())
            self._texts_cache[s] = t
        return self._texts_cache[s]

    def texts_at(self, doc_ids) -> pa.Array:
        """The texts of documents given by doc id, read from the segments that hold them.

        Parameters
        ----------
        doc_ids : integer array, shape (n,)
            In ``[0, N)``, any order, repeats allowed.

        Returns
        -------
        pyarrow.LargeStringArray, shape (n,)
            The texts as read at the build (``text_column=`` lists joined by a space, invalid UTF-8
            replaced by U+FFFD).

        Raises
        ------
        ValueError
            The index stores no text (the message names ``store_text=True``), or a doc id out of range.
        """
        if not self.store_text:
            raise ValueError(self._no_text())
        d = np.asarray(doc_ids, np.int64).ravel()
        if d.size and (d.min() < 0 or d.max() >= self.n_docs):
            raise ValueError(f"doc ids must be in [0, {self.n_docs}), got {int(d[(d < 0) | (d >= self.n_docs)][0])}")
        if not d.size:
            return pa.array([], pa.large_string())
        base = self._text_segments[2]
        seg = np.searchsorted(base, d, side="right") - 1
        order = np.argsort(seg, kind="stable")  # gathered segment by segment, then put back in order
        cuts = np.flatnonzero(np.diff(seg[order])) + 1
        parts = [self._segment_texts(int(seg[g[0]])).take(pa.array(d[g] - base[seg[g[0]]]))
                 for g in np.split(order, cuts)]
        back = np.empty(len(d), np.int64)
        back[order] = np.arange(len(d), dtype=np.int64)
        return pa.concat_arrays(parts).take(pa.array(back))

    def doc(self, source_id) -> str:
        """The text of the document with this source id (Pyserini's ``doc(docid).raw()``).

        Parameters
        ----------
        source_id : str
            As search results give it.

        Returns
        -------
        str

        Raises
        ------
        KeyError
            ``source_id`` is not in the index (a deleted document is not).
        ValueError
            The index stores no text: build it with ``store_text=True``.
        """
        if not self.store_text:
            raise ValueError(self._no_text())
        return self.texts_at(self.doc_ids([source_id]))[0].as_py()

    def docs(self, source_ids) -> list:
        """The texts of documents given by their source ids, in the order given (:meth:`doc` of each).

        Returns
        -------
        list of str, len(source_ids)

        Raises
        ------
        KeyError, ValueError
            As :meth:`doc`.
        """
        if not self.store_text:
            raise ValueError(self._no_text())
        ids = [source_ids] if isinstance(source_ids, str) else list(source_ids)
        return self.texts_at(self.doc_ids(ids)).to_pylist()

    # -- kept columns and filters
    def _not_kept(self, names) -> str:
        how = (f"build the index with {param('keep_columns', list(names))} (python -m cutext.pipelines bm25 ... "
               + " ".join(f"--keep-column {n}" for n in names) + ")")
        if self.meta.get("index_format", 1) != 2:
            return (f"{self.path}: a format-1 index keeps no column; rebuild it (segmented, the default "
                    f"index_format=2) and {how}")
        kept = self.keep_columns
        return (f"{self.path}: column(s) {list(names)} not kept in this index (kept: {kept or 'none'}); "
                f"to filter by them, {how}")

    def column_table(self) -> pa.Table:
        """The kept columns of every live document (``keep_columns=`` of the build), read from the segments
        at the first call and kept.

        Returns
        -------
        pyarrow.Table, N rows (row = doc id), the kept columns; their types unified across segments
            (``promote_options="permissive"``: an int column of one segment and a double of another are double).

        Raises
        ------
        ValueError
            The index keeps no column (the message names ``keep_columns=``), or segments whose types of a
            column cannot be unified (strings in one, numbers in another).
        """
        if not self.keep_columns:
            raise ValueError(f"{self.path}: this index keeps no column; build it with "
                             f"{param('keep_columns', ['date', 'category'])} (python -m cutext.pipelines bm25 ... "
                             "--keep-column date --keep-column category)")
        if self._columns is None:
            folders, deletes, _ = self._text_segments
            parts = [segments.read_segment_columns(f, d) for f, d in zip(folders, deletes)]
            if any(t is None for t in parts):
                bad = [str(f) for f, t in zip(folders, parts) if t is None][:3]
                raise art.ArtifactError(f"{self.path}: index.json keeps {self.keep_columns} but segment(s) {bad} "
                                        "hold no columns.parquet")
            try:
                table = pa.concat_tables(parts, promote_options="permissive").combine_chunks()
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise ValueError(f"{self.path}: the kept columns have types that differ between segments "
                                 f"({exc})") from None
            if table.num_rows != self.n_docs:
                raise art.ArtifactError(f"{self.path}: {table.num_rows} rows of kept columns for N={self.n_docs}")
            self._columns = table
        return self._columns

    def doc_filter(self, filter, n_queries: int):
        """A search filter as the engines take it (:class:`cutext.stages.engines.search.DocFilter`).

        Parameters
        ----------
        filter : pyarrow.compute.Expression, bool array (N,) or list of n_queries lists of source ids
            An expression over the kept columns (``pc.field("category") == "sci"``; a null result
            excludes the document), a boolean mask over the doc ids (numpy, a list or anything
            ``numpy.asarray`` takes, cupy included), or per query the source ids it may return (ids not
            in the index match nothing, as a terms filter; every document of a repeated id matches).
        n_queries : int

        Returns
        -------
        DocFilter or None (None for ``filter=None``)

        Raises
        ------
        ValueError
            An expression on a column that is not kept (the message names it and ``keep_columns=``) or that
            is not boolean; an expression that compares a column with a value of another kind, a set lookup
            included, or with a null or NaN literal (:func:`cutext.stages.engines.search_input.check_filter_types`:
            the message names the column, its type and the value's); a mask of another length than N;
            per-query lists whose number is not ``n_queries`` or that hold an id that is not a string (an int
            is never converted: the message names it); a filter of another type.
        TypeError
            A per-query entry that is a single string (a list of ids is needed).
        """
        import pyarrow.dataset as ds

        if filter is None:
            return None
        if isinstance(filter, pc.Expression):
            # without kept columns an empty table names the expression's first column in pyarrow's error
            table = self.column_table() if self.keep_columns else pa.table({"": pa.nulls(0)})
            try:
                got = ds.dataset(table).to_table(columns={"allowed": filter}).column("allowed")
            except pa.ArrowInvalid as exc:
                names = re.findall(r"FieldRef\.Name\(([^)]*)\)", str(exc))
                if names:
                    raise ValueError("filter: " + self._not_kept(names)) from None
                detail = (str(exc).splitlines() or [type(exc).__name__])[0]
                raise ValueError(f"filter {search_input.expression_text(filter)}: {detail}") from None
            except (pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:  # no kernel for the types compared
                raise search_input.type_error(filter, table.schema, exc) from None
            if not self.keep_columns:  # an expression of no column (pc.scalar(True)): column_table's message
                self.column_table()
            search_input.check_filter_types(filter, table.schema)  # what Arrow casts or answers with nothing
            if not pa.types.is_boolean(got.type):
                raise ValueError(f"filter {search_input.expression_text(filter)} gives {got.type} values; a filter "
                                 "must be a boolean expression (a comparison such as pc.field('year') >= 2000)")
            return search_stage.DocFilter(mask=got.fill_null(False).to_numpy(zero_copy_only=False).astype(bool))
        if isinstance(filter, (list, tuple)) and filter and all(
                not isinstance(x, (bool, np.bool_, str)) and hasattr(x, "__iter__") for x in filter):
            return self._id_filter(filter, n_queries)
        if isinstance(filter, (str, dict)):
            raise ValueError(f"filter must be a pyarrow expression, a boolean mask over the {self.n_docs} documents "
                             f"or a list of allowed source ids per query, got {type(filter).__name__}")
        mask = np.asarray(to_host(filter))  # a cupy or cudf mask comes to the host (the engines cut it per shard)
        if mask.dtype != np.bool_:
            raise ValueError(f"filter: a mask must be boolean (got dtype {mask.dtype}); a per-query filter is a list "
                             "of lists of source ids, one a query")
        if mask.shape != (self.n_docs,):
            raise ValueError(f"filter: a mask needs one entry a document, shape ({self.n_docs},); got {mask.shape}")
        return search_stage.DocFilter(mask=np.ascontiguousarray(mask))

    def _id_filter(self, lists, n_queries: int):
        """:meth:`doc_filter` of per-query lists of source ids: doc ids sorted within a query (an Arrow hash
        lookup of the ids; where the index holds a source id twice, a merge, so each of its documents is
        allowed)."""
        if len(lists) != n_queries:
            raise ValueError(f"filter: per-query lists of source ids need one list a query: {len(lists)} lists "
                             f"for {n_queries} queries")
        for i, x in enumerate(lists):
            if isinstance(x, (str, bytes)):
                raise TypeError(f"filter: entry {i} is a string; each query's entry is a list of source ids")
        lists = [x if isinstance(x, list) else list(x) for x in lists]
        search_input.check_source_id_lists(lists)  # strings only: an id is compared as the caller wrote it
        nested = pa.array(lists, pa.list_(pa.string()))
        ids = nested.flatten()
        rows = np.repeat(np.arange(len(lists), dtype=np.int64), pc.list_value_length(nested).to_numpy())
        known = self._source_ids_arrow()
        if getattr(self, "_ids_unique", None) is None:
            self._ids_unique = pc.count_distinct(known).as_py() == len(known)
        if self._ids_unique:  # a hash lookup in Arrow (10k queries x 188 ids: 0.12 s; a pandas merge took 1.8)
            pos = pc.index_in(ids, value_set=known).fill_null(-1).to_numpy()
            rows, docs = rows[pos >= 0], pos[pos >= 0].astype(np.int64)
        else:  # an id held by several documents (appended again) allows each of them
            given = pd.DataFrame({"row": rows, "sid": ids.to_pandas()})
            m = given.merge(pd.DataFrame({"sid": pd.Series(self.source_ids, dtype=object),
                                          "doc": np.arange(self.n_docs, dtype=np.int64)}), on="sid", how="inner")
            rows, docs = m["row"].to_numpy(np.int64), m["doc"].to_numpy(np.int64)
        key = np.sort(rows * max(self.n_docs, 1) + docs)  # by query, then doc (a sort: numpy's unique hashes)
        key = key[np.concatenate([[True], key[1:] != key[:-1]])] if len(key) else key  # repeats dropped
        rows, docs = key // max(self.n_docs, 1), key % max(self.n_docs, 1)
        ptr = np.zeros(len(lists) + 1, np.int64)
        np.cumsum(np.bincount(rows, minlength=len(lists)), out=ptr[1:])
        return search_stage.DocFilter(ptr=ptr, docs=docs)

    def phrase_filter(self, phrase_lists: list, texts: list, doc_filter=None):
        """The documents each query may return given its phrases
        (:func:`cutext.stages.engines.phrases.parse_queries`), as one
        :class:`cutext.stages.engines.search.DocFilter` of per-query sorted doc lists, intersected with the
        user's ``doc_filter`` (a mask or lists; None: none).

        A query with phrases may return the documents that match every one of them
        (:func:`cutext.stages.engines.phrases.match_phrase`; a phrase with a term not in the index matches
        nothing, one whose words are all dropped by the tokenizer constrains nothing, as Lucene's parser drops
        an empty phrase); a query without one, the documents that hold one of its terms (the only ones with a
        positive score, so its result is the one without phrases in the batch).

        Parameters
        ----------
        phrase_lists : list (n_queries,) of lists of Phrase
        texts : list (n_queries,) of str, the queries' BM25 texts (quotes and ``~N`` removed)
        doc_filter : DocFilter or None

        Returns
        -------
        DocFilter (ptr int64 (n_queries + 1,), docs int64)

        Raises
        ------
        ValueError
            The index stores no positions (the message names ``positions=True`` and ``--positions``).
        """
        if not self.positions:
            raise ValueError(phrase_stage.no_positions_message(self.path))
        if self._phrase_index is None:
            folders, deletes, _ = self._text_segments
            self._phrase_index = phrase_stage.PhraseIndex.load(folders, deletes)
        px = self._phrase_index
        flat = [ph for lst in phrase_lists for ph in lst]
        tokens, row, pos = token_positions([ph.text for ph in flat], self.tokenizer)
        if self._term_hash is None:
            self._term_hash = TermHash(self.vocab)
        ids = self._term_hash.lookup(tokens) if len(tokens) else np.zeros(0, np.int64)
        cut = np.searchsorted(row, np.arange(len(flat) + 1))
        Q = self.query_matrix(texts)
        out, k = [], 0
        for q, lst in enumerate(phrase_lists):
            allowed = None
            for _ in lst:
                a, e = cut[k], cut[k + 1]
                slop = flat[k].slop
                k += 1
                if a == e:  # every word dropped by the tokenizer: no constraint
                    continue
                got = phrase_stage.match_phrase(px, ids[a:e], pos[a:e] - pos[a], slop)
                allowed = got if allowed is None else np.intersect1d(allowed, got, assume_unique=True)
            if allowed is None:  # no phrase constraint: the documents holding a query term
                terms = Q.indices[Q.indptr[q]:Q.indptr[q + 1]]
                allowed = (np.unique(np.concatenate([px.doc[px.indptr[t]:px.indptr[t + 1]] for t in terms]))
                           .astype(np.int64) if len(terms) else np.zeros(0, np.int64))
            if doc_filter is not None:
                if doc_filter.mask is not None:
                    allowed = allowed[doc_filter.mask[allowed]]
                else:
                    allowed = np.intersect1d(allowed, doc_filter.docs[doc_filter.ptr[q]:doc_filter.ptr[q + 1]],
                                             assume_unique=True)
            out.append(allowed.astype(np.int64))
        ptr = np.zeros(len(out) + 1, np.int64)
        np.cumsum([len(x) for x in out], out=ptr[1:])
        docs = np.concatenate(out) if out else np.zeros(0, np.int64)
        return search_stage.DocFilter(ptr=ptr, docs=docs)

    # -- commits
    def delete(self, source_ids) -> int:
        """Delete documents by their source ids: a new commit of the index, then this index reloaded from it.

        The deletion is recorded, not rewritten (Lucene's deleteDocuments): every later load, and this
        object from now on, scores as a one-shot build of the remaining documents (N, avgdl and df
        recounted), and search never returns a deleted document.  :meth:`compact` rewrites the segments
        without them.  :func:`cutext.stages.engines.index_commits.commit_deletion`.

        Parameters
        ----------
        source_ids : str or iterable of str
            The ``source_id`` of each document to delete, exactly as stored; each must be in the index and
            live.

        Returns
        -------
        int
            The number of documents deleted (every live copy of an id counts).

        Raises
        ------
        ArtifactError (ValueError)
            A format-1 index (the message names the command that converts it), or a damaged one.
        ValueError
            Source ids that are not in the index or already deleted (up to five named), or none
            given; nothing is written.
        OutputBusyError (FileExistsError)
            Another writer committed to the index meanwhile; nothing is written.
        """
        counts = index_commits.commit_deletion(self.path, source_ids, reader=self._reader)
        self._reload()
        return int(counts["deleted_docs"])

    def compact(self) -> int:
        """Merge the index's segments into one without its deleted documents (Lucene's ``forceMerge(1)``):
        a new commit, then this index reloaded from it; scores and results are unchanged.
        :func:`cutext.stages.engines.index_commits.commit_compaction`.

        Returns
        -------
        int
            The number of segments merged.

        Raises
        ------
        ArtifactError (ValueError)
            A format-1 index, or a damaged one.
        OutputBusyError (FileExistsError)
            Another writer committed to the index meanwhile; nothing is written.
        """
        counts = index_commits.commit_compaction(self.path)
        self._reload()
        return int(counts["compacted_segments"])

    def merge(self, max_segments: int | None = None) -> int:
        """Merge runs of adjacent segments (the merge policy's, Lucene's ``maybeMerge``; with ``max_segments``,
        until at most that many remain, Lucene's ``forceMerge(n)``): a new commit, then this index reloaded
        from it; scores and results are unchanged.
        :func:`cutext.stages.engines.merge_policy.commit_merges`.

        Parameters
        ----------
        max_segments : int, optional
            At most this many segments afterwards (>= 1; 1 is :meth:`compact`); None: the merges of the
            policy (:func:`cutext.stages.engines.merge_policy.plan_merges`).

        Returns
        -------
        int
            The number of segments merged away (0: nothing to merge; nothing is written).

        Raises
        ------
        ArtifactError (ValueError)
            A format-1 index, or a damaged one.
        ValueError
            ``max_segments`` not an integer >= 1.
        OutputBusyError (FileExistsError)
            Another writer committed to the index meanwhile; nothing is written.
        """
        counts = merge_policy.commit_merges(self.path, max_segments)
        if counts["merged_segments"]:
            self._reload()
        return int(counts["merged_segments"])

    def refresh(self) -> "BM25Index":
        """The index as of its newest commit (Lucene's ``DirectoryReader.openIfChanged``, Tantivy's
        ``IndexReader::reload``): this object when nothing was committed since it was loaded, else a new
        one; this object keeps searching its own commit either way.

        A segmented index loaded in this process reuses every segment whose files and deletions are
        unchanged (:class:`cutext.stages.engines.index_reader.IndexReader`): only the new segments, and the
        segments with new deletions, are read and verified; the global statistics are summed again and the
        postings merged and weighted from memory.  An index loaded with a ``client`` or ``devices``, or of
        format 1, is loaded again whole.

        Returns
        -------
        BM25Index

        Raises
        ------
        ArtifactError, ArtifactNotFoundError
            The newest commit is damaged (the file named) or gone.
        """
        backend, client, verify, devices = getattr(self, "_load_args", (self.backend, self._client, True, None))
        if self._reader is None or client is not None or devices is not None:
            raw = (self.path / "index.json").read_bytes() if (self.path / "index.json").exists() else b""
            if self._reader is not None and raw == self._reader.raw:
                return self
            fresh = type(self).load(self.path, backend=backend, client=client, verify=verify, devices=devices)
            return fresh if fresh.meta != self.meta else self
        reader = self._reader.refresh(verify=verify)
        if reader is self._reader:
            return self
        fresh = type(self)._from_reader(reader, backend)
        fresh._load_args = (backend, client, verify, devices)
        return fresh

    @classmethod
    def _from_reader(cls, reader: IndexReader, backend) -> "BM25Index":
        """The index of a segmented commit's reader (its manifest's settings checked as :meth:`load` does)."""
        meta, mf = reader.meta, reader.path / "index.json"
        N = art.field_int(meta, "N", mf, lo=0)
        avgdl = art.field_float(meta, "avgdl", mf, lo=0)
        try:
            variant = meta.get("variant", "lucene")
            delta = bm25_stage.check_params(variant, meta.get("k1", 0.9), meta.get("b", 0.4), meta.get("delta"))
            k1 = float(meta.get("k1", 0.9))
        except (TypeError, ValueError, KeyError) as exc:
            raise art.ArtifactError(f"{mf}: {exc}") from None
        be = resolve_backend(backend, needs=ARRAY_STACK)
        return cls._load_segments(reader.path, meta, N, avgdl, variant, k1, delta, be, None, reader=reader)

    def _reload(self) -> None:
        fresh = self.refresh()
        if fresh is self:
            return
        self.__dict__.clear()
        self.__dict__.update(fresh.__dict__)

    # -- queries
    def query_matrix(self, texts, n_threads: int | None = None):
        """CSR (n_queries, V + 1) float32 of query term counts (unknown terms dropped), canonical
        (term ids ascending within a query), looked up in a hash of the vocabulary built at the first
        call (:class:`cutext.kernels.termhash.TermHash`).  Without a stemmer the batch is split and
        looked up in one pass over its bytes on numba's threads
        (:func:`cutext.kernels.termhash.text_csr`); with one, it is tokenized into one array first
        (stopwords and stemming on its distinct terms).  ``texts``: a sequence of str, or a pyarrow string
        array (read as it is: :meth:`search` converts all its queries once).  ``n_threads``: numba threads of
        the one pass (default: one per :data:`QUERIES_PER_THREAD` queries, at most numba's setting)."""
        import scipy.sparse as sp

        if not isinstance(texts, pa.Array):
            texts = list(texts)
        if self._term_hash is None:  # built once: a batch then costs one probe per token
            self._term_hash = TermHash(self.vocab)
        cfg = self.tokenizer
        if cfg.stemmer is None:
            # without a stemmer a kept token is the raw token, and a token that stopwords or the length
            # bounds drop is not in the vocabulary (they dropped it from the corpus): the split and the
            # lookup of the raw tokens are then one pass over the bytes, with no token array
            data, offsets, fold = normalize_texts(texts, cfg.lowercase)
            if n_threads is None:  # a thread per QUERIES_PER_THREAD queries: a many-core fork/join costs more
                import numba

                n_threads = max(1, min(numba.get_num_threads(), -(-len(texts) // QUERIES_PER_THREAD)))
            q_ptr, q_terms, q_w = text_csr(data, offsets, self._term_hash, fold, n_threads)
        else:
            tokens, rows = tokenize_flat(texts if isinstance(texts, list) else texts.to_pylist(),
                                         cfg)  # one array for the batch, no list per query
            ids = self._term_hash.lookup(tokens)
            if len(rows) > 1 and np.any(rows[1:] < rows[:-1]):
                o = np.argsort(rows, kind="stable")
                rows, ids = rows[o], ids[o]
            q_ptr, q_terms, q_w = query_csr(rows, ids, len(texts))
        Q = sp.csr_matrix((q_w, q_terms, q_ptr), shape=(len(texts), len(self.vocab) + 1))
        Q.has_canonical_format = True  # ascending, distinct term ids within a query (query_csr)
        return Q

    def _absent(self, Q):
        """Per-query constant: sum over query terms of w0 (bm25l / bm25+), shape (n_queries,)."""
        return np.asarray(Q @ self.w0.astype(np.float64)).ravel()

    def _submit(self, fn, *args):
        """Run ``fn(shard, *args)`` on every shard's worker; the results in shard order."""
        c = self._client
        if isinstance(c, _Devices):
            return [c.run(f, fn, *args) for _, _, _, f in self._shard_futures]
        futs = [c.submit(fn, f, *args, workers=[w], allow_other_workers=False, pure=False)
                for _, _, w, f in self._shard_futures]
        return c.gather(futs)

    def _source_ids_arrow(self) -> pa.Array:
        """:attr:`source_ids` as a pyarrow string array (built once, for the result frames)."""
        cached = getattr(self, "_source_ids_pa", None)
        if cached is None or len(cached) != len(self.source_ids):
            cached = self._source_ids_pa = pa.array(self.source_ids, type=pa.string())
        return cached

    def get_scores(self, query: str) -> np.ndarray:
        """Dense BM25 scores of one query against every document, float32 array (N,), on the host
        (the sparse product; on every shard for a sharded index).  A ``query`` that is not a string is a
        TypeError."""
        if not isinstance(query, str):
            raise TypeError(f"query must be a string (one query; search() takes several), got {type(query).__name__} "
                            f"{query!r}"[:300])
        Q = self.query_matrix([query])
        if self._sm is not None:
            dense = self._sm.dense(Q)[0].astype(np.float64)
        else:
            parts = self._submit(_shard_dense, Q)
            dense = np.concatenate([p[0] for p in parts]).astype(np.float64) if parts else np.zeros(0)
        if self._has_w0:
            dense += self._absent(Q)[0]
        return dense.astype(np.float32)

    def topk_start(self, Q, k: int = 10, engine: str = "auto", max_workspace=None, n_threads=None,
                   doc_filter=None):
        """:meth:`topk_arrays` in two halves: starts the engine and returns ``finish()`` -> ``(doc, score,
        n)``; the GPU engine is still running when this returns
        (:meth:`cutext.stages.engines.search.SearchMatrix.topk_start`).  ``doc_filter``: a
        :class:`cutext.stages.engines.search.DocFilter` of the rows of ``Q`` (:meth:`doc_filter`), cut into
        each shard's part here, so a worker receives only its documents' part."""
        if self._sm is not None:
            if not self._sm.on_gpu:
                return self._sm.topk_start(Q, k, engine, max_workspace, n_threads, doc_filter)
            # on the index's own thread (as a shard of devices=): the device scores this batch as soon as it
            # has copied out the last one, while the caller merges and collects that one
            return self._gpu_lane().submit(_on_device, self._sm.matrix.data.device.id, self._sm.topk, Q, k, engine,
                                           max_workspace, n_threads, doc_filter).result

        def part(lo, hi):
            return doc_filter.shard(lo, hi) if doc_filter is not None else None

        offsets = [lo for lo, _, _, _ in self._shard_futures]  # added to each shard's doc ids in the merge
        if isinstance(self._client, _Devices):  # every device's batch started on that device's own thread (its
            # order, upload and launches), so the devices start at once while this thread collects the batch
            # before; the results are waited for here (a device's thread that also waited measured slower)
            starts = [(f, self._client.submit(f, _shard_topk_start, Q, k, engine, max_workspace, n_threads,
                                              part(lo, hi)))
                      for lo, hi, _, f in self._shard_futures]

            def finish_devices():
                got, err = [], None
                for f, fin in starts:  # every device's batch waited for (its buffers given back), even after an error
                    try:
                        got.append(self._client.run(f, _shard_finish, fin.result()))
                    except BaseException as exc:
                        err = err or exc
                if err is not None:
                    raise err
                return search_stage.merge_topk(got, k, offsets)

            return finish_devices
        # every worker's engine called at once; the calls return at finish() (the next batch may be sent first)
        clock = StepClock(np)  # $CUTEXT_GPUTEXT_PROFILE=1: parts of a Client batch on the caller
        Qs = _query_batch(Q)  # serialized once for all the workers
        wait = self._engines.start("topk", per_actor=[(Qs, k, engine, max_workspace, n_threads, part(lo, hi))
                                                      for lo, hi, _, _ in self._shard_futures])
        clock("search: shards' calls sent (client)")

        def finish():
            clock = StepClock(np)
            got = wait()
            clock("search: shards' results waited for (client)")
            out = search_stage.merge_topk(got, k, offsets)
            clock("search: shards' results merged (client)")
            return out

        return finish

    def _gpu_lane(self) -> ThreadPoolExecutor:
        """The thread of an index on one GPU that runs its batches (:meth:`topk_start`), made at the first."""
        lane = self.__dict__.get("_lane")
        if lane is None:
            lane = self._lane = ThreadPoolExecutor(1, thread_name_prefix="cutext-search")
        return lane

    def topk_arrays(self, Q, k: int = 10, engine: str = "auto", max_workspace=None, n_threads=None, filter=None):
        """Top ``k`` of a query CSR ``Q`` (:meth:`query_matrix`) as arrays (no frame, no w0 term).

        ``filter``: the documents each query may return, applied before the top k (:meth:`doc_filter`; per-query
        lists one a row of ``Q``).

        Returns
        -------
        (doc, score, n) : int64 (nq, k) doc ids (-1 past ``n``), float32 (nq, k) scores of the stored
            weights (without the per-query w0 constant), int32 (nq,) documents found per query.
        """
        return self.topk_start(Q, k, engine, max_workspace, n_threads, self.doc_filter(filter, Q.shape[0]))()

    def search(self, queries, k: int = 10, batch_size: int = 4096, progress: bool = False,
               engine: str = "auto", max_workspace: int | None = None, n_threads: int | None = None,
               with_text: bool = False, filter=None, phrases: bool | None = None) -> pd.DataFrame:
        """Top-``k`` documents for every query, among the documents of ``filter`` if given.

        Parameters
        ----------
        queries : str, list of str, dict {query_id: text}, pandas Series (index = query id) or
            DataFrame ``(query_id, query)``
            A list (tuple, numpy or pyarrow array, any ordered iterable) numbers its queries ``"0"``,
            ``"1"``, ...; other ids are written with ``str`` and must stay distinct.
        k : int >= 1
        batch_size : int >= 1
            Queries tokenized and scored together.
        progress : bool
        engine : {"auto", "cpu", "gpu", "sparse"}
            ``"cpu"``: numba threads (an index on the CPU); ``"gpu"``: the tiled CUDA engine (an index
            on the GPU, ``k <= 4096``); ``"sparse"``: the sparse product ``Q @ M`` and a top-k of its rows
            (the oracle); ``"auto"``: ``"gpu"`` on the GPU (``"sparse"`` for ``k > 4096``), else ``"cpu"``.
            :mod:`cutext.stages.engines.search`.
        max_workspace : int, optional
            Bytes of device workspace of the GPU engine (default 1 GiB, at least 1 MiB); the engine's
            device memory does not grow with ``batch_size``.  Refused by the other engines.
        n_threads : int, optional
            Threads of the CPU engine and of its query tokenization (default: all, numba's setting).
            Refused by the other engines.
        with_text : bool, default False
            Add a ``text`` column: each hit's document text (:meth:`texts_at`; an index built with
            ``store_text=True``), read from the segments of the hits only.
        filter : optional
            Documents a query may return, applied inside the engines before the top k, so every query
            returns ``min(k, allowed documents with a positive score)`` rows and never a filtered-out
            document: a ``pyarrow.compute`` expression over the kept columns (``keep_columns=`` of the
            build; ``pc.field("category") == "sci"``, a null counts as False), a boolean mask over the doc
            ids (shape (N,)), or a list with one list of allowed source ids a query (ids not in the index
            match nothing).  :meth:`doc_filter`.
        phrases : bool or None, default None
            Read ``"..."`` in a query as a phrase and ``"..."~N`` as a proximity query (Lucene's PhraseQuery
            slop, :mod:`cutext.stages.engines.phrases`): a query returns only the documents that hold each of
            its phrases, scored by the BM25 of all its words (a phrase's words are terms of the query too).
            None: when the index stores positions (``positions=True`` of the build); True: always (an index
            without positions is refused); False: never (quotes are ordinary characters, as in natural-language
            topics such as CACM's, which quote titles).

        Returns
        -------
        pandas.DataFrame
            ``query_id: str``; ``doc_id: int64``, the document's number in the index (0..N-1, the
            ``doc_id`` of ``documents/``); ``source_id``: the caller's id of the document (the source
            id the corpus gave it); ``rank: int64`` (1-based); ``score: float64``; ``doc_index:
            int64``, an alias of ``doc_id`` (kept for the earlier contract); with ``with_text``, ``text``
            (pandas' str dtype).  Rows by query, then rank:
            score descending, equal scores by the smaller ``doc_id`` (every engine and a sharded
            index give the same rows); on an index built with ``norms="lucene"``, equal scores by the
            source id (UTF-8 bytes ascending), as Anserini ranks (:func:`ties_by_source_id`), and each
            score summed as Lucene sums it (float32 term scores added in float64).  Documents that match
            no query term (score of the stored weights not > 0) are not returned, so a query may have
            fewer than ``k`` rows.

        Raises
        ------
        ValueError
            ``k``, ``batch_size``, ``engine``, ``max_workspace`` or ``n_threads`` out of range, or
            an option the engine in effect does not use; ``with_text`` on an index without texts (the
            message names ``store_text=True``); a filter on a column that is not kept (the message names it
            and ``keep_columns=``), a mask of another length than N, per-query lists whose number is not
            the number of queries, a filter whose types cannot match its column or a per-query id that is not
            a string (:meth:`doc_filter`).  Query ids that are one string once written as ``query_id`` (``1``
            and ``"1"``, a repeated DataFrame id) or missing (the message names up to five).  With phrases: an
            unbalanced quote, a ``~`` after a phrase that is not followed by a non-negative integer, a slop
            above 2**31 - 1 (Lucene's int); ``phrases=True`` on an index without positions (the message names
            ``positions=True`` and ``--positions``).
        TypeError
            ``queries`` of another type (a number, None, bytes, a set), or a query that is not a string
            (:func:`cutext.stages.engines.search_input.as_queries`).
        """
        if self.meta.get("norms") == "lucene":  # Anserini's ranking: equal scores by source id
            k = search_stage.cap_k(k, self.n_docs)
            kw = dict(batch_size=batch_size, progress=progress, engine=engine, max_workspace=max_workspace,
                      n_threads=n_threads, with_text=with_text, filter=filter, phrases=phrases)
            return ties_by_source_id(lambda qs, kk: self._lucene_sums(qs, self._search(qs, kk, **kw), phrases),
                                     queries, k, self.n_docs)
        return self._search(queries, k, batch_size, progress, engine, max_workspace, n_threads, with_text, filter,
                            phrases)

    def _lucene_sums(self, queries, hits: pd.DataFrame, phrases) -> pd.DataFrame:
        """``hits`` with each score summed as Lucene sums a BooleanQuery's clauses: the float32 term scores
        added in float64, then rounded to float32 (the engines add in float32, one ulp away at times).  On an
        index whose matrix is on the host (scipy); elsewhere the engines' sums are kept."""
        import scipy.sparse as sp

        if len(hits) == 0 or not sp.issparse(self.matrix):
            return hits
        qids, texts = search_input.as_queries(queries)
        parsed = phrase_stage.parse_queries(texts) if (self.positions if phrases is None else phrases) else None
        Q = self.query_matrix(parsed[0] if parsed is not None else texts)  # the words the engines scored
        where = {q: i for i, q in enumerate(qids.to_pylist())}
        rows = hits["query_id"].map(where).to_numpy()
        docs = hits["doc_id"].to_numpy()
        out = hits["score"].to_numpy(np.float64).copy()
        for r in np.unique(rows):
            sel = np.flatnonzero(rows == r)
            lo, hi = Q.indptr[r], Q.indptr[r + 1]
            terms, c = Q.indices[lo:hi], Q.data[lo:hi].astype(np.float32)
            w = self.matrix[terms][:, docs[sel]].toarray().astype(np.float32) * c[:, None]
            out[sel] = w.astype(np.float64).sum(axis=0).astype(np.float32)
        return hits.assign(score=out)

    def _search(self, queries, k, batch_size, progress, engine, max_workspace, n_threads, with_text, filter,
                phrases) -> pd.DataFrame:
        """:meth:`search` with the engines' ties (the smaller ``doc_id``)."""
        if with_text and not self.store_text:  # before any work
            raise ValueError("with_text=True: " + self._no_text())
        notice_compiles()  # the first search on a machine compiles the CPU kernels for seconds: say so once
        if self.backend == "gpu":  # and, on the GPU, CuPy compiles the engine's CUDA kernels
            notice_gpu_compiles()
        k = search_stage.cap_k(k, self.n_docs)  # no query has more than N documents; arrays are sized by k
        batch_size = count("batch_size", batch_size, lo=1)
        engine = choice("engine", engine, search_stage.ENGINES)
        if self._sm is not None:  # check the options before any work (shards check them on their worker)
            eff = search_stage.resolve_engine(engine, self._sm.on_gpu, k, self._sm.nonnegative)
            search_stage.check_engine_options(eff, max_workspace, n_threads)
        qids, texts = search_input.as_queries(queries)
        if not (phrases is None or isinstance(phrases, bool)):
            raise ValueError(f"{param('phrases', bare=True)} must be True, False or None, got {phrases!r}")
        if phrases is True and not self.positions:  # before any work
            raise ValueError(phrase_stage.no_positions_message(self.path))
        use = self.positions if phrases is None else phrases
        parsed = phrase_stage.parse_queries(texts) if use else None  # None also when no query holds a quote
        doc_filter = self.doc_filter(filter, len(texts))  # checked and resolved once, before any query is scored
        if parsed is not None:  # phrases: per-query doc lists, the user's filter intersected
            texts = parsed[0]
            doc_filter = self.phrase_filter(parsed[1], texts, doc_filter)
        rng = range(0, len(texts), batch_size)
        if progress:
            from tqdm.auto import tqdm

            rng = tqdm(rng, desc="search", unit="batch")
        clock = StepClock(np)  # $CUTEXT_GPUTEXT_PROFILE=1: host clocks of the parts of a search
        parts = []
        source_ids = self._source_ids_arrow()
        # the frame's numeric columns, filled batch by batch while the engines score the next one (no
        # concatenation after the last); at most k rows a query, room for RESULT_ROWS_FIRST at first, doubled as needed
        cols = {name: np.empty(min(len(texts) * k, RESULT_ROWS_FIRST), dt) for name, dt in
                (("rank", np.int64), ("doc_id", np.int64), ("doc_index", np.int64), ("score", np.float64))}
        filled = 0

        def collect(s, Q, finish):
            nonlocal filled
            doc, score, n = finish()
            clock("search: engine (wait)")
            if n.size and n.min() == k:  # every query has k documents: the arrays in row order as they are
                rows = np.repeat(np.arange(len(n), dtype=np.int64), k)
                rank = np.tile(np.arange(k, dtype=np.int64), len(n))
                docs, vals = doc.reshape(-1), score.reshape(-1).astype(np.float64)
            else:  # a query's first n[q] columns, row by row
                keep = np.arange(k)[None, :] < n[:, None]
                docs, vals = doc[keep], score[keep].astype(np.float64)
                n64 = n.astype(np.int64)
                rows = np.repeat(np.arange(len(n), dtype=np.int64), n64)
                rank = np.arange(len(rows), dtype=np.int64) - np.repeat(np.cumsum(n64) - n64, n64)
            if self._has_w0:
                vals += self._absent(Q)[rows]
            rows += s  # fresh arrays: in place
            end = filled + len(docs)
            if end > len(cols["rank"]):
                for name, c in list(cols.items()):
                    cols[name] = np.empty(min(max(end, 2 * len(c)), len(texts) * k), c.dtype)
                    cols[name][:filled] = c[:filled]
            np.add(rank, 1, out=cols["rank"][filled:end])
            cols["doc_id"][filled:end] = docs
            cols["doc_index"][filled:end] = docs
            cols["score"][filled:end] = vals
            filled = end
            # the batch's strings gathered while the engines score the next batch: on a thread of their own
            # where the engines run off this thread's cores (pyarrow releases the GIL), so that this thread
            # starts the next batch meanwhile
            parts.append(takes.submit(strings, rows, docs) if takes is not None else strings(rows, docs))
            clock("search: collect")

        def strings(rows, docs):
            return qids.take(pa.array(rows)), source_ids.take(pa.array(docs))

        # batch i + 1 is tokenized while the GPU engine scores batch i (topk_start returns before the
        # kernels end; the other engines have finished when it returns).  Where the engines run off this
        # thread's cores (a GPU, or the shards of workers or devices), the next two batches are tokenized on
        # a thread of its own meanwhile, beside this thread's merge and collection of the last one (numba
        # and numpy release the GIL); the CPU engine uses every core itself.
        ahead = self._sm is None or self._sm.on_gpu
        pool = ThreadPoolExecutor(1) if ahead and len(rng) > 1 else None
        takes = ThreadPoolExecutor(1, thread_name_prefix="cutext-collect") if pool is not None else None

        try:  # the texts in Arrow once (under the GIL): a batch's tokenizer then reads its slice without it
            arrow_texts = text_array(texts)
        except TextEncodingError as exc:
            raise ValueError(f"query {qids[exc.row].as_py()!r}: {exc.detail}") from None

        def csr(s):
            own = StepClock(np)  # on the tokenizer's thread: its own time, not the caller's wait
            Q = self.query_matrix(arrow_texts[s:s + batch_size], n_threads)  # n_threads: the CPU engine's
            own("search: query csr (tokenizer thread)")
            return Q

        starts = list(range(0, len(texts), batch_size))  # the bar (if any) advances as the loop takes a batch
        # two batches queued on the tokenizer's thread, so it does not wait for the caller to take one
        nxt = deque(pool.submit(csr, s) for s in starts[:2]) if pool is not None else None
        pending = None
        try:
            for i, s in enumerate(rng):
                Q = nxt.popleft().result() if pool is not None else csr(s)  # the texts were checked above
                if pool is not None and i + 2 < len(starts):
                    nxt.append(pool.submit(csr, starts[i + 2]))
                clock("search: query csr")
                fb = doc_filter.queries(s, s + Q.shape[0]) if doc_filter is not None else None
                started = (s, Q, self.topk_start(Q, k, engine, max_workspace, n_threads, fb))
                clock("search: engine (start)")
                if pending is not None:  # batch i - 1 collected while the engines score batch i
                    collect(*pending)
                pending = started
            if pending is not None:
                collect(*pending)
            strs = [p.result() if takes is not None else p for p in parts]
        finally:
            for ex in (pool, takes):
                if ex is not None:
                    ex.shutdown(wait=True, cancel_futures=True)
        # views of the filled rows (copies when under half were filled, so the rest is not kept alive)
        num = {name: c[:filled] if 2 * filled >= len(c) else c[:filled].copy() for name, c in cols.items()}
        docs = num["doc_id"]
        # string columns gathered in pyarrow per batch and wrapped as pandas' str dtype (no Python objects)
        out = pd.DataFrame({"query_id": _str_series([q for q, _ in strs]), "doc_id": docs,
                            "source_id": _str_series([d for _, d in strs]), "rank": num["rank"],
                            "score": num["score"], "doc_index": num["doc_index"]}, copy=False)
        if with_text:
            out["text"] = _take_str(self.texts_at(docs), np.arange(len(docs)))
        clock("search: result frame")
        return out

__all__ = ["BM25Index", "bm25f_spec", "read_postings", "shard_ranges", "weight_bounds"]
