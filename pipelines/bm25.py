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

import contextlib
import json
import math
import time
from pathlib import Path

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cutext.kernels._version import __version__
from cutext.kernels.backend import ARRAY_STACK, array_module, is_gpu, resolve_backend
from cutext.pipelines._result import (RunResult, atomic_directory, check_output, default_out, param_files,
                                     write_json)
from cutext.stages.text import bm25 as bm25_stage
from cutext.stages.engines import search as search_stage
from cutext.stages.runtime.compute import (StepClock, cluster_workers, compute_all, compute_context, gpu_spill_budget,
                                           on_worker, shared_key)
from cutext.stages.text import public as stage_api
from cutext.stages.text.frontend import build_corpus
from cutext.stages.readers.source import open_corpus
from cutext.stages.readers.files import DEFAULT_BLOCKSIZE, DEFAULT_MAX_RATIO, CorpusError, add_max_ratio_option
from cutext.stages.text.sort import term_major
from cutext.stages.readers.frames import input_label
from cutext.stages.text.tokenize import TextEncodingError, TokenizerConfig, normalize_texts, tokenize_flat
from cutext.kernels.termhash import TermHash, query_csr, text_csr
from cutext.pipelines.trec import read_queries, write_trec_run
from cutext.stages.runtime import artifacts as art
from cutext.stages.runtime.output import check_output_file
from cutext.stages.runtime.params import choice, count
from cutext.stages.runtime.progress import pipeline_progress, stage
from cutext.stages.text.partitions import COUNT_COLUMNS, _to_like, load_spilled
from cutext.stages.text.sort import term_divisions

POSTINGS_PER_FILE = 8_000_000
# The GPU backend's defaults (issue 10, sixth pass; benchmarks/micro/index_ab.py, 2.00 GB on an H200):
# fewer, larger read partitions and term ranges cut the per-partition and per-file costs
# (4.76 -> 3.27 s) while the RMM peak stays under 3x the input (2.82x; 256 MiB partitions: 3.5x).
GPU_BLOCKSIZE = 128 << 20
GPU_POSTINGS_PER_FILE = 16_000_000
DOCUMENTS_PER_FILE = 4_000_000
# The GPU writes the index files with cudf's writer straight to their paths, the sorted integer
# columns DELTA_BINARY_PACKED (an encoding of the Parquet format; the index's columns and types are
# unchanged, and pyarrow, the index loader, reads it). On 14.7 M postings of the 2 GB index on an H200
# (benchmarks/micro/postings_writer.py): 122 -> 74 ms a file and 89 -> 47 MB; the plain int64
# doc_id column alone was 82 ms of the write.
GPU_POSTINGS_ENCODING = {"term_id": "DELTA_BINARY_PACKED", "doc_id": "DELTA_BINARY_PACKED"}
GPU_DOCUMENTS_ENCODING = {"doc_id": "DELTA_BINARY_PACKED"}
GPU_COMPRESSION = "snappy"
# Index files in flight in an in-process GPU build (threads): one file's Parquet encoding and copy
# to the host overlap the next term range's weights and sort.
GPU_WRITE_WORKERS = 2


class _Stages:
    """The pipeline's stages: wall-clock timings, and the progress inside each (partitions done /
    total, :mod:`cutext.stages.runtime.progress`: a bar on a terminal, plain periodic lines in a log)."""

    def __init__(self, names, progress: bool):
        self.timings: dict[str, float] = {}
        self._shown = pipeline_progress("bm25", progress)
        self._shown.__enter__()

    def run(self, name, fn, *args, **kwargs):
        t0 = time.perf_counter()
        with stage(name):  # a no-op inside a front-end stage, which shows itself
            out = fn(*args, **kwargs)
        self.timings[name] = time.perf_counter() - t0
        return out

    def close(self):
        self._shown.__exit__(None, None, None)


def _documents_partition(df, lengths: np.ndarray):
    """A documents partition of the index: ``(doc_id, source_id, length, replaced)`` from the document
    table's partition and the token count of every document (``lengths``, index = doc id)."""
    ids = df["doc_id"].values
    xp = array_module(ids)
    lo, hi = (int(ids[0]), int(ids[-1]) + 1) if len(ids) else (0, 0)
    if hi - lo == len(ids):  # a read partition's ids are a range: copy only its lengths (not all N)
        part_lengths = xp.asarray(lengths[lo:hi]).astype(np.int32)
    else:
        part_lengths = xp.asarray(lengths)[ids].astype(np.int32)
    out = df[["doc_id", "source_id", "replaced"]].copy()
    out["length"] = part_lengths
    return out[["doc_id", "source_id", "length", "replaced"]]


def _drop_dl(df):
    return df[["term_id", "doc_id", "tf", "weight"]]


def _write_part_gpu(df, path: str, column_encoding: dict) -> int:
    """One index file from a cudf partition, written by cudf to ``path`` (``GPU_COMPRESSION``); returns its rows."""
    df.to_parquet(path, index=False, compression=GPU_COMPRESSION, column_encoding=column_encoding)
    return len(df)


def _parts_tasks(frames, folder: Path, column_encoding: dict, workers: list[str] | None = None) -> list:
    """Delayed writes of cudf partitions as ``folder/part.NNNNN.parquet`` (the file names of dask's
    ``to_parquet`` with the index's ``name_function``), one file a partition.

    ``frames``: a collection, or a list of delayed partitions; with ``workers`` (a list's partitions
    made under :func:`cutext.stages.runtime.compute.on_worker`, e.g. the term ranges of
    :class:`cutext.stages.text.public.BM25Postings`), partition ``i``'s write goes preferably to worker
    ``i`` mod the workers, beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    parts = frames if isinstance(frames, list) else frames.to_delayed()
    tasks = []
    for i, p in enumerate(parts):
        with on_worker(i, workers):
            tasks.append(dask.delayed(_write_part_gpu)(p, str(folder / f"part.{i:05d}.parquet"), column_encoding))
    return tasks


def read_postings(folder, N: int, V: int, df: np.ndarray, wmax: np.ndarray | None = None):
    """The postings of an index, read file by file and row group by row group into preallocated arrays.

    Bounded memory (issue 15): the result is one copy of each column in its final dtype, filled
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
    that the temporaries stay small (index load, issue 15)."""
    n = len(t)
    for a in range(0, max(n - 1, 0), block):
        e = min(a + block + 1, n)
        tt, dd = t[a:e], d[a:e]
        dt = tt[1:] > tt[:-1]
        if not bool(np.all(dt | ((tt[1:] == tt[:-1]) & (dd[1:] > dd[:-1])))):
            return False
    return True


def _spilled_range(folders, lo: int, hi: int, last: bool, weight_fn, like=None):
    """One term range of the postings from spilled counts partitions (an external merge pass).

    Each partition's ``term_id`` file is memory-mapped and binary-searched, so only the rows of
    ``[lo, hi)`` (``<= hi`` if ``last``) are read.  The partitions hold increasing doc-id ranges and
    each is sorted by (term_id, doc_id), so a stable sort by term of their concatenation is the
    (term_id, doc_id) order: the rows and order of :func:`_term_range` on the same slices.
    A frame of ``like``'s library (pandas by default; cudf: the range is weighted on the device).
    """

    pieces = {k: [] for k in COUNT_COLUMNS}
    for f in folders:
        a = load_spilled(f, COUNT_COLUMNS, mmap=True)
        t = a["term_id"]
        s_ = int(np.searchsorted(t, lo, side="left"))
        e = int(np.searchsorted(t, hi, side="right" if last else "left"))
        if e > s_:
            for k in COUNT_COLUMNS:
                pieces[k].append(np.array(a[k][s_:e]))
        del a, t
    cols = {k: (np.concatenate(v) if v else np.zeros(0, np.int64 if k == "doc_id" else np.int32))
            for k, v in pieces.items()}
    del pieces
    order = np.argsort(cols["term_id"], kind="stable")
    cols = {k: cols.pop(k)[order] for k in COUNT_COLUMNS}
    del order
    df = pd.DataFrame(cols) if like is None else type(like)(_to_like(cols, like))
    del cols
    return _drop_dl(weight_fn(df))


def _term_major_spilled(folders, df_t: np.ndarray, nparts: int, weight_fn, counts, like=None):
    """:func:`cutext.stages.text.public._term_ranges` over counts partitions spilled to ``folders`` (a task per
    term range reads its slice of every partition's files; nothing of the corpus is held in memory);
    the ranges are frames of ``like``'s library.  Returns ``(postings, workers)``: a collection and
    None, or for cudf, when there are several ranges, the delayed ranges and the workers they are
    spread over (range ``i`` on worker ``i`` mod ``workers``, :func:`cutext.stages.runtime.compute.on_worker`;
    None in-process)."""
    import dask
    import dask.dataframe as dd


    divisions = term_divisions(df_t, nparts)
    if len(divisions) < 2 or divisions[0] == divisions[-1]:
        weighted = counts.map_partitions(weight_fn, meta=bm25_stage.weights_meta(counts._meta))
        weighted = weighted.map_partitions(_drop_dl, meta=_drop_dl(bm25_stage.weights_meta(counts._meta)))
        return term_major(weighted, df_t, nparts), None
    workers = cluster_workers()
    out = []
    for i in range(len(divisions) - 1):
        with on_worker(i, workers):
            out.append(dask.delayed(_spilled_range)(folders, divisions[i], divisions[i + 1], i == len(divisions) - 2,
                                                    weight_fn, like))
    if like is not None and is_gpu(like):
        return out, workers  # the GPU writes each range's delayed frame, beside it (see BM25Postings.ranges)
    m = _drop_dl(bm25_stage.weights_meta(counts._meta))
    return dd.from_delayed(out, meta=m, verify_meta=False), None


def build_index(path, out, *, variant="lucene", k1=1.2, b=0.75, delta=None,
                lowercase=True, stopwords=None, stemmer=None, min_len=1, max_len=None,
                format="auto", text_column=None, id_column=None, blocksize=None,
                encoding="utf-8", storage_options=None, glob=None, max_ratio=DEFAULT_MAX_RATIO, backend="auto",
                client=None, scheduler="auto", n_workers=None, overwrite=True, progress=True) -> RunResult:
    """Index a corpus for BM25 (paper 004, section 3: extract, ids by scan, sort, count, weight).

    Parameters
    ----------
    path : str, os.PathLike, list, or a frame
        Corpus (see :func:`cutext.stages.readers.source.read_corpus` for the formats), or a pandas / cudf /
        dask / dask-cudf DataFrame or Series (``text_column=``, ``id_column=``;
        :mod:`cutext.stages.readers.frames`).
    out : str or os.PathLike
        Index directory to write; written under a temporary name and renamed when complete.
        ``pipelines.run("bm25", path)`` and the CLI default to ``"bm25-out"`` (one rule for
        every pipeline: ``"<name>-out"`` in the working directory).
    variant : {"lucene", "robertson", "atire", "bm25l", "bm25+"}
    k1, b, delta : float
        BM25 parameters (``delta`` only for bm25l, default 0.5, and bm25+, default 1.0).
    lowercase, stopwords, stemmer, min_len, max_len
        Tokenizer settings (:class:`cutext.stages.text.tokenize.TokenizerConfig`).
    format, text_column, id_column, blocksize, encoding, storage_options, glob
        Reader settings (:func:`cutext.stages.readers.source.read_corpus`; ``glob=None``: a path that
        exists is read as itself, else ``*?[`` make it a pattern).  ``blocksize=None``: 64 MiB
        partitions on the CPU, 128 MiB on the GPU (``GPU_BLOCKSIZE``; 64 MiB when the device is
        too small to hold the run and the partitions' results are spilled to files).
    max_ratio : float or None, default 100
        Refuse a compressed file or archive member that expands more than this many times its
        compressed bytes (a zip or gz bomb; :data:`cutext.stages.readers.files.DEFAULT_MAX_RATIO`); None: no limit.
    backend : {"auto", "cpu", "gpu"}
    client : distributed.Client, optional
        Run on this cluster.
    scheduler : {"auto", "sync", "threads", "cluster"}
    n_workers : int, optional
        Workers of a local cluster (default: one per GPU / core).
    overwrite : bool
    progress : bool
        Show the progress inside each stage (partitions done / total): a bar when standard error is
        a terminal, else a plain line every 10 s and one per finished stage.

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
        directory, the input or a parent of either (:mod:`cutext.stages.runtime.output`); checked before any work.
    """
    check_output(out, kind="cutext.bm25", manifest="index.json", inputs=[path, *param_files(stopwords)],
                 overwrite=overwrite)
    delta = bm25_stage.check_params(variant, k1, b, delta)
    tok_cfg = TokenizerConfig.make(lowercase, stopwords, stemmer, min_len, max_len)
    be = resolve_backend(backend)
    default_blocksize = blocksize is None
    if default_blocksize:
        blocksize = GPU_BLOCKSIZE if be == "gpu" else DEFAULT_BLOCKSIZE

    def _open(blocksize):
        return open_corpus(path, backend=be, format=format, text_column=text_column, id_column=id_column,
                           blocksize=blocksize, encoding=encoding, storage_options=storage_options, glob=glob,
                           max_ratio=max_ratio)

    src = _open(blocksize)
    nbytes, pieces, fmt = src.input_bytes, src.pieces, src.format
    stages = _Stages(["read", "tokenize", "encode", "sort+count", "weight+write"], progress)
    names = {"count": "sort+count"}  # the front end's stage names -> this index's timing names
    try:
        with compute_context(be, client=client, scheduler=scheduler, nbytes=nbytes, n_workers=n_workers) as info, \
                atomic_directory(out, overwrite=overwrite, kind="cutext.bm25", manifest="index.json",
                                 inputs=[path, *param_files(stopwords)]) as tmp:
            # CPU: the per-partition results go to files inside the output's temporary directory
            # (removed before the swap), so host memory holds the partitions in flight (issue 15);
            # GPU: the same when the device is too small to hold them (issue 10)
            budget = gpu_spill_budget(nbytes, info) if be == "gpu" else None
            spill = tmp / ".spill" if be == "cpu" or budget is not None else None
            if budget is not None and default_blocksize and blocksize > DEFAULT_BLOCKSIZE:
                src = _open(DEFAULT_BLOCKSIZE)  # a device too small for the run: the spilled path's smaller partitions
                pieces = src.pieces
            per_file = GPU_POSTINGS_PER_FILE if be == "gpu" else POSTINGS_PER_FILE
            if budget is not None:  # term ranges that fit: two in flight, <= 200 device bytes a posting
                per_file = int(min(per_file, max(1 << 16, budget // (2 * 200))))
            corpus = build_corpus(src, tok_cfg, info, spill=spill,
                                  run_stage=lambda name, fn: stages.run(names.get(name, name), fn))
            docs, vocab, counts, df_t, lengths = corpus.docs, corpus.vocab, corpus.counts, corpus.df, corpus.lengths
            n_docs, n_terms, pieces = corpus.n_docs, corpus.n_terms, corpus.pieces
            del corpus
            n_tokens = int(lengths.sum())
            if n_tokens == 0:
                raise CorpusError(f"{input_label(path)}: no document has a token after tokenization ({n_docs} documents)")
            n_postings = int(df_t.sum())
            # the public bm25 stage (cutext.stages.text.public.bm25) on the front end's counts
            weights = stage_api.bm25(stage_api.Counts(counts, df_t, lengths, n_docs, n_terms), variant=variant,
                                     k1=k1, b=b, delta=delta,
                                     n_partitions=max(1, -(-n_postings // per_file)))
            avgdl, idf_t, w0 = weights.avgdl, weights.idf, weights.w0

            def _write():
                clock = StepClock(np)
                if spill is not None:  # an external merge of the spilled counts, a term range a task
                    from cutext.stages.text.partitions import SPILL_COUNTS, spill_dir

                    weight_fn = bm25_stage.WeightPartition(idf_t, avgdl, variant, k1, b, delta)
                    nparts = max(1, -(-n_postings // per_file))
                    folders = [spill_dir(spill, SPILL_COUNTS, i) for i in range(counts.npartitions)]
                    postings, range_workers = _term_major_spilled(folders, df_t, nparts, weight_fn, counts,
                                                                  counts._meta)
                elif weights.ranges is not None and be == "gpu":  # the ranges' own delayed objects keep their workers
                    postings, range_workers = weights.ranges, weights.range_workers
                else:
                    postings, range_workers = weights.postings, None
                # the lengths (8 bytes a document) as one key, on every worker before any documents file
                documents = docs.map_partitions(_documents_partition, shared_key(lengths, info.client),
                                                meta=_documents_partition(docs._meta, np.zeros(0, np.int64)))
                n_files = max(1, -(-n_docs // DOCUMENTS_PER_FILE))
                if documents.npartitions > n_files:  # a file per read partition costs ~28 ms each on the GPU
                    documents = documents.repartition(npartitions=n_files)

                def _vocabulary():
                    vt = pa.table({"term_id": pa.array(np.arange(1, n_terms + 1, dtype=np.int32)),
                                   "term": vocab,
                                   "df": pa.array(df_t[1:]),
                                   "idf": pa.array(idf_t[1:]),
                                   "w0": pa.array(w0[1:].astype(np.float32))})
                    pq.write_table(vt, tmp / "vocab.parquet")

                if be == "gpu":
                    # cudf writes each term range and document file straight to its path, with the
                    # delta encoding of the sorted ids (GPU_POSTINGS_ENCODING), while a host thread
                    # writes the vocabulary. In-process: GPU_WRITE_WORKERS files in flight.
                    import concurrent.futures

                    tasks = (_parts_tasks(postings, tmp / "postings", GPU_POSTINGS_ENCODING, range_workers)
                             + _parts_tasks(documents, tmp / "documents", GPU_DOCUMENTS_ENCODING))
                    overlap = info.client is None and info.scheduler == "sync"
                    with concurrent.futures.ThreadPoolExecutor(1) as side:
                        vocab_written = side.submit(_vocabulary)
                        in_flight = (dask.config.set(scheduler="threads", num_workers=GPU_WRITE_WORKERS)
                                     if overlap else contextlib.nullcontext())
                        with in_flight:
                            # the replaced-bytes total with the writes (one round trip less on a cluster)
                            replaced = int(compute_all(tasks + [docs["replaced"].sum()], info)[-1])
                        clock("write: postings + documents (weight + sort + parquet)")
                        vocab_written.result()
                else:
                    postings.to_parquet(str(tmp / "postings"), write_index=False, write_metadata_file=False,
                                        name_function=lambda i: f"part.{i:05d}.parquet")
                    clock("write: postings (weight + sort + parquet)")
                    documents.to_parquet(str(tmp / "documents"), write_index=False, write_metadata_file=False,
                                         name_function=lambda i: f"part.{i:05d}.parquet")
                    clock("write: documents")
                    _vocabulary()
                    replaced = int(docs["replaced"].sum().compute())
                if spill is not None:
                    import shutil

                    shutil.rmtree(spill, ignore_errors=True)
                clock("write: replaced + vocabulary")
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
                "source": input_label(path), "format": fmt, "counts": result_counts, "timings": stages.timings,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    finally:
        stages.close()
    return RunResult("bm25", Path(out).absolute(), info.backend, info.scheduler, info.n_workers,
                     result_counts, stages.timings, params,
                     headline={"documents": n_docs, "terms": n_terms, "postings": n_postings})


# ----------------------------------------------------------------------------- retrieval

def _as_queries(queries) -> tuple[pa.Array, list[str]]:
    """(query ids as a pyarrow string array, query texts); a query that is not a string (None, NaN, a
    number) is an error naming it."""
    if isinstance(queries, str):
        return pa.array(["0"], pa.string()), [queries]
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
        ids = None  # "0", "1", ... made by pyarrow below
    if not all(isinstance(t, str) for t in texts):
        i = next(i for i, t in enumerate(texts) if not isinstance(t, str))
        qid = str(i) if ids is None else ids[i]
        raise TypeError(f"query {qid!r} is {texts[i]!r} ({type(texts[i]).__name__}), not a string")
    if ids is None:
        return pa.array(np.arange(len(texts), dtype=np.int64)).cast(pa.string()), texts
    return pa.array(ids, pa.string()), texts


def _take_str(values: pa.Array, idx: np.ndarray) -> pd.Series:
    """``values[idx]`` as a pandas Series of the default string dtype, gathered by pyarrow."""
    taken = values.take(pa.array(idx, type=pa.int64()))
    return pd.Series(pd.array(taken, dtype=pd.Series([], dtype=str).dtype))


topk_rows = search_stage.topk_rows  # the sparse path's top-k (moved to cutext.stages.engines.search)


def weight_bounds(idf_t: np.ndarray, k1: float, delta: float) -> np.ndarray:
    """The largest weight a posting of each term can have, float64 (V + 1,): ``idf * (k1 + 1 + delta)``
    bounds every variant's weight (the tf factor of each variant is below ``k1 + 1 + delta``,
    :mod:`cutext.stages.text.bm25`), widened by float32 rounding."""
    return np.abs(idf_t) * (k1 + 1.0 + delta) * (1 + 1e-5) + 1e-6


def _read_postings(path, N: int, V: int, df, w0, lo: int = 0, hi: int | None = None, wmax=None):
    """The postings of documents ``[lo, hi)`` as a scipy CSR (V + 1, hi - lo) float32 of ``w - w0``
    (columns = doc id - lo), validated (see :meth:`BM25Index.load`; :func:`read_postings` reads them
    row group by row group into one copy of each column, issue 15)."""
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


def _load_shard(path: str, lo: int, hi: int, backend: str, N: int, V: int, df, w0, wmax=None) -> _Shard:
    """Worker side of :meth:`BM25Index.load` with a client: read the shard, put it on this worker's device."""
    be = resolve_backend(backend, needs=ARRAY_STACK)
    return _Shard(lo, hi, _to_backend(_read_postings(Path(path), N, V, df, w0, lo, hi, wmax), be), be)


def _shard_topk(shard: _Shard, Q, k: int, engine: str, max_workspace, n_threads):
    """Worker side of a sharded search: the shard's top k, doc ids made global."""
    doc, score, n = shard.sm.topk(Q, k, engine, max_workspace, n_threads)
    return np.where(doc >= 0, doc + shard.lo, -1), score, n


def _shard_dense(shard: _Shard, Q):
    return shard.sm.dense(Q)


def _shard_info(shard: _Shard):
    return shard.lo, shard.hi, shard.backend, shard.sm.nonnegative


def shard_ranges(lengths: np.ndarray, n_shards: int) -> list[tuple[int, int]]:
    """Split documents ``0..N-1`` into at most ``n_shards`` contiguous non-empty ranges of about equal
    token counts (postings), the cuts on document boundaries."""
    N = len(lengths)
    if N == 0:
        return []
    cum = np.cumsum(np.asarray(lengths, np.float64) + 1.0)  # +1: empty documents still count
    cuts = [0] + [int(np.searchsorted(cum, cum[-1] * i / n_shards, side="right")) for i in range(1, n_shards)] + [N]
    cuts = sorted(set(min(max(c, 0), N) for c in cuts))
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]


class BM25Index:
    """A BM25 index loaded for search.

    The postings form a term-major CSR matrix ``M`` of shape (V + 1, N), float32 (stored weights
    ``w - w0``); a batch of queries is a CSR ``Q`` (n_queries, V + 1) of query term counts; the
    scores are the rows of ``Q @ M`` plus, for bm25l/bm25+, the weight ``w0`` of the query terms a
    document lacks.  The top k of each query come from one of the engines of
    :mod:`cutext.stages.engines.search` (CPU: numba threads; GPU: the tiled CUDA engine; or the sparse
    product itself), all with one ties rule: equal scores are ranked by the smaller ``doc_id``.

    Loaded with a dask ``client``, the documents are split into ranges (shards) over the client's
    workers; each worker keeps its shard (on its GPU or CPU), every query batch is scored on every
    shard and the top k merged on the caller, the same result as one index.

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
    shards : list of (lo, hi, worker address), empty unless loaded with a client
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
        self._shard_futures = list(shards or [])  # (lo, hi, worker, future)
        self.shards = [(lo, hi, w) for lo, hi, w, _ in self._shard_futures]

    @property
    def n_docs(self) -> int:
        return int(self.meta["N"])

    def __repr__(self) -> str:
        m = self.meta
        delta = f", delta={m['delta']}" if m.get("variant") in ("bm25l", "bm25+") else ""
        postings = self.matrix.nnz if self.matrix is not None else int(self.df.sum())
        shards = f", shards={len(self.shards)}" if self.shards else ""
        return (f"BM25Index(N={self.n_docs:,}, V={len(self.vocab):,}, postings={postings:,}, "
                f"variant={m.get('variant')!r}, k1={m.get('k1')}, b={m.get('b')}{delta}, "
                f"backend={self.backend!r}{shards}, path={str(self.path)!r})")

    @classmethod
    def load(cls, path, backend="auto", client=None, verify: bool = True) -> "BM25Index":
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
            A client without workers.
        """

        path = Path(path)
        meta = art.read_manifest(path, "index.json", "cutext.bm25", "a cutext BM25 index", verify=verify)
        mf = path / "index.json"
        N = art.field_int(meta, "N", mf, lo=0)
        avgdl = art.field_float(meta, "avgdl", mf, lo=0)
        try:
            TokenizerConfig.from_dict(art.field_dict(meta, "tokenizer", mf))
            variant = meta.get("variant", "lucene")
            delta = bm25_stage.check_params(variant, meta.get("k1", 0.9), meta.get("b", 0.4), meta.get("delta"))
            k1 = float(meta.get("k1", 0.9))
        except (TypeError, ValueError, KeyError) as exc:
            raise art.ArtifactError(f"{mf}: {exc}") from None
        if client is None:
            be = resolve_backend(backend, needs=ARRAY_STACK)
        else:
            be = choice("backend", backend, ("auto", "cpu", "gpu"))
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
        workers = sorted(client.scheduler_info()["workers"])
        if not workers:
            raise ValueError("BM25Index.load(client=...): the client has no workers")
        futures = []
        for (lo, hi), w in zip(shard_ranges(lengths, len(workers)), workers):
            f = client.submit(_load_shard, str(path.absolute()), lo, hi, be, N, V, df, w0, wmax, workers=[w],
                              allow_other_workers=False, pure=False)
            futures.append((lo, hi, w, f))
        infos = client.gather([client.submit(_shard_info, f, workers=[w], allow_other_workers=False, pure=False)
                               for _, _, w, f in futures])
        bes = sorted({i[2] for i in infos})
        index = cls(path, meta, vocab, df, idf_t, w0, source_ids, lengths, None, ",".join(bes),
                    client=client, shards=futures)
        index._shard_nonnegative = all(i[3] for i in infos)
        return index

    # -- queries
    def query_matrix(self, texts, n_threads: int | None = None):
        """CSR (n_queries, V + 1) float32 of query term counts (unknown terms dropped), canonical
        (term ids ascending within a query), looked up in a hash of the vocabulary built at the first
        call (:class:`cutext.kernels.termhash.TermHash`).  Without a stemmer the batch is split and
        looked up in one pass over its bytes on numba's threads
        (:func:`cutext.kernels.termhash.text_csr`); with one, it is tokenized into one array first
        (stopwords and stemming on its distinct terms).  ``n_threads``: numba threads of the one pass
        (default all)."""
        import scipy.sparse as sp


        texts = list(texts)
        if self._term_hash is None:  # built once: a batch then costs one probe per token
            self._term_hash = TermHash(self.vocab)
        cfg = self.tokenizer
        if cfg.stemmer is None:
            # without a stemmer a kept token is the raw token, and a token that stopwords or the length
            # bounds drop is not in the vocabulary (they dropped it from the corpus): the split and the
            # lookup of the raw tokens are then one pass over the bytes, with no token array
            data, offsets, fold = normalize_texts(texts, cfg.lowercase)
            q_ptr, q_terms, q_w = text_csr(data, offsets, self._term_hash, fold, n_threads)
        else:
            tokens, rows = tokenize_flat(texts, cfg)  # one array for the batch, no list per query
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
        (the sparse product; on every shard for a sharded index)."""
        Q = self.query_matrix([query])
        if self._sm is not None:
            dense = self._sm.dense(Q)[0].astype(np.float64)
        else:
            parts = self._submit(_shard_dense, Q)
            dense = np.concatenate([p[0] for p in parts]).astype(np.float64) if parts else np.zeros(0)
        if self._has_w0:
            dense += self._absent(Q)[0]
        return dense.astype(np.float32)

    def topk_start(self, Q, k: int = 10, engine: str = "auto", max_workspace=None, n_threads=None):
        """:meth:`topk_arrays` in two halves: starts the engine and returns ``finish()`` -> ``(doc, score,
        n)``; the GPU engine is still running when this returns
        (:meth:`cutext.stages.engines.search.SearchMatrix.topk_start`)."""
        if self._sm is not None:
            return self._sm.topk_start(Q, k, engine, max_workspace, n_threads)
        out = search_stage.merge_topk(self._submit(_shard_topk, Q, k, engine, max_workspace, n_threads), k)
        return lambda: out

    def topk_arrays(self, Q, k: int = 10, engine: str = "auto", max_workspace=None, n_threads=None):
        """Top ``k`` of a query CSR ``Q`` (:meth:`query_matrix`) as arrays (no frame, no w0 term).

        Returns
        -------
        (doc, score, n) : int64 (nq, k) doc ids (-1 past ``n``), float32 (nq, k) scores of the stored
            weights (without the per-query w0 constant), int32 (nq,) documents found per query.
        """
        return self.topk_start(Q, k, engine, max_workspace, n_threads)()

    def search(self, queries, k: int = 10, batch_size: int = 4096, progress: bool = False,
               engine: str = "auto", max_workspace: int | None = None, n_threads: int | None = None) -> pd.DataFrame:
        """Top-``k`` documents for every query.

        Parameters
        ----------
        queries : str, list of str, dict {query_id: text}, pandas Series (index = query id) or
            DataFrame ``(query_id, query)``
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

        Returns
        -------
        pandas.DataFrame
            ``query_id: str``; ``doc_id: int64``, the document's number in the index (0..N-1, the
            ``doc_id`` of ``documents/``); ``source_id``: the caller's id of the document (the source
            id the corpus gave it); ``rank: int64`` (1-based); ``score: float64``; ``doc_index:
            int64``, an alias of ``doc_id`` (kept for the earlier contract).  Rows by query, then rank:
            score descending, equal scores by the smaller ``doc_id`` (every engine and a sharded
            index give the same rows).  Documents that match no query term (score of the stored
            weights not > 0) are not returned, so a query may have fewer than ``k`` rows.

        Raises
        ------
        ValueError
            ``k``, ``batch_size``, ``engine``, ``max_workspace`` or ``n_threads`` out of range, or
            an option the engine in effect does not use.
        TypeError
            A query that is not a string.
        """

        k = search_stage.cap_k(k, self.n_docs)  # no query has more than N documents; arrays are sized by k
        batch_size = count("batch_size", batch_size, lo=1)
        engine = choice("engine", engine, search_stage.ENGINES)
        if self._sm is not None:  # check the options before any work (shards check them on their worker)
            eff = search_stage.resolve_engine(engine, self._sm.on_gpu, k, self._sm.nonnegative)
            search_stage.check_engine_options(eff, max_workspace, n_threads)
        qids, texts = _as_queries(queries)
        rng = range(0, len(texts), batch_size)
        if progress:
            from tqdm.auto import tqdm

            rng = tqdm(rng, desc="search", unit="batch")
        clock = StepClock(np)  # $CUTEXT_GPUTEXT_PROFILE=1: host clocks of the parts of a search
        parts = []

        def collect(s, Q, finish):
            doc, score, n = finish()
            if n.size and n.min() == k:  # every query has k documents: the arrays in row order as they are
                rows, rank = np.repeat(np.arange(len(n)), k), np.tile(np.arange(k), len(n))
                docs, vals = doc.reshape(-1), score.reshape(-1).astype(np.float64)
            else:
                rows, rank = np.nonzero(np.arange(k)[None, :] < n[:, None])
                docs, vals = doc[rows, rank], score[rows, rank].astype(np.float64)
            if self._has_w0:
                vals = vals + self._absent(Q)[rows]
            parts.append((rows + s, rank, docs, vals))

        # batch i + 1 is tokenized while the GPU engine scores batch i (topk_start returns before the
        # kernels end; the other engines have finished when it returns)
        pending = None
        for s in rng:
            try:
                Q = self.query_matrix(texts[s:s + batch_size], n_threads)  # n_threads: the CPU engine's, else None
            except TextEncodingError as exc:
                why = str(exc).split(f"row {exc.row} ", 1)[-1]
                raise ValueError(f"query {qids[s + exc.row].as_py()!r}: {why}") from None
            clock("search: query csr")
            if pending is not None:
                collect(*pending)
                clock("search: engine (wait)")
            pending = (s, Q, self.topk_start(Q, k, engine, max_workspace, n_threads))
            clock("search: engine (start)")
        if pending is not None:
            collect(*pending)
            clock("search: engine (wait)")
        rows, rank, docs, vals = (np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, dt)
                                  for i, dt in enumerate((np.int64, np.int64, np.int64, np.float64)))
        # string columns gathered in pyarrow and wrapped as pandas' str dtype (no Python objects)
        out = pd.DataFrame({"query_id": _take_str(qids, rows), "doc_id": docs,
                            "source_id": _take_str(self._source_ids_arrow(), docs),
                            "rank": (rank + 1).astype(np.int64), "score": vals, "doc_index": docs})
        clock("search: result frame")
        return out


# ----------------------------------------------------------------------------- command line

def add_cli(sub) -> None:
    """Register ``bm25`` (build an index) and ``search`` (query an index, write a TREC run) with
    the ``python -m cutext.pipelines`` command line."""
    p = sub.add_parser("bm25", help="build a BM25 index from a corpus",
                       description="Build a term-major BM25 index (Parquet + JSON) from a corpus. "
                                   "The index directory appears only when complete.")
    p.add_argument("path", nargs="+", help="corpus: files, a directory, a glob or fsspec URLs")
    p.add_argument("--out", default=default_out("bm25"),
                   help="index directory to write (default: bm25-out, the one rule: <pipeline>-out)")
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
    p.add_argument("--blocksize", type=int, default=None,
                   help="bytes per input partition (default 64 MiB on the CPU, 128 MiB on the GPU; under 1 MiB "
                        "only while the input makes at most 1,000 partitions)")
    p.add_argument("--glob", default="auto", choices=["auto", "on", "off"],
                   help="paths as glob patterns: auto (default: a path that exists is itself, else *?[ are "
                        "patterns), on (always), off (never)")
    p.add_argument("--encoding", default="utf-8", help="input text encoding (undecodable bytes are replaced and counted)")
    add_max_ratio_option(p)
    p.add_argument("--no-progress", action="store_true", help="no progress (bar or plain lines) on standard error")
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
    p.add_argument("--batch-size", type=int, default=4096, help="queries tokenized and scored together")
    p.add_argument("--engine", default="auto", choices=["auto", "cpu", "gpu", "sparse"],
                   help="query engine: auto (gpu on the GPU, else cpu), cpu (numba threads), gpu (CUDA tiles), "
                        "sparse (sparse product Q @ M, the oracle)")
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
                    blocksize=args.blocksize, encoding=args.encoding, max_ratio=args.max_ratio,
                    glob={"auto": None, "on": True, "off": False}[args.glob], progress=not args.no_progress)
    print(json.dumps(r.to_dict(), indent=2, default=str) if args.json else str(r))
    return 0


def _search_cli_main(args) -> int:
    """``search INDEX --queries FILE ...``: score the queries, write a TREC run (``--out -``: standard output)."""
    import sys


    if args.out != "-":  # before any work: never over the queries, the index or inside any cutext output
        check_output_file(args.out, inputs=[args.index, args.queries])
    queries = read_queries(args.queries, args.topic_field)
    index = BM25Index.load(args.index, backend=args.backend)
    run = index.search(queries, k=args.k, batch_size=args.batch_size, progress=sys.stderr.isatty(),
                       engine=args.engine)
    if args.out == "-":  # the docno is the source id (the caller's id), as in write_trec_run
        for q, d, r_, s in zip(run.query_id, run.source_id, run["rank"], run.score):
            sys.stdout.write(f"{q} Q0 {d} {r_} {s:.6f} {args.tag}\n")
    else:
        write_trec_run(run, args.out, tag=args.tag)
        print(f"wrote {len(run)} rows for {run.query_id.nunique()} queries to {args.out}", file=sys.stderr)
    return 0
