"""The in-process build's back end: a read corpus's postings, documents and vocabulary weighted and
written as a format-1 index or as segments (with their positions), and ``on_duplicate`` applied to them."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import dask
import dask.threaded
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from cutext.kernels.backend import array_module, is_gpu
from cutext.stages.engines import index_commits as commit_stage
from cutext.stages.engines.index_commits import SEGMENTS_DIR
from cutext.stages.engines.index_ids import duplicate_deletes
from cutext.stages.engines.segments import add_positions, write_partition_segment
from cutext.stages.readers.source import kept_columns
from cutext.stages.runtime.compute import StepClock, cluster_workers, compute_fanned_out, on_worker, shared_key
from cutext.stages.text import bm25 as bm25_stage
from cutext.stages.text import public as stage_api
from cutext.stages.text.partitions import COUNT_COLUMNS, SPILL_COUNTS, _to_like, load_spilled, spill_dir
from cutext.stages.text.sort import term_divisions, term_major

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
    """One index file from a cudf partition, encoded by cudf (``GPU_COMPRESSION``) into host memory and
    written to ``path`` through the page cache; returns its rows.

    cudf writing the path itself leaves the file's pages out of the page cache, so sealing the
    index read them back from the disk (0.32 s of a 2 GB build on an H100, 0.05 s from the cache)."""
    buf = io.BytesIO()
    df.to_parquet(buf, index=False, compression=GPU_COMPRESSION, column_encoding=column_encoding)
    with open(path, "wb") as fh:
        fh.write(buf.getbuffer())
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


ID_FORMATS = ("jsonl", "parquet", "csv", "frame")  # inputs whose source ids come from a column (may repeat)


def _dedupe(tmp: Path, layout: dict, index_format: int, on_duplicate: str, where: str, counts: dict,
            avgdl: float) -> float:
    """``on_duplicate`` applied to a one-shot build's documents (:func:`commit_stage.dedupe_build`); the avgdl
    of the live documents.  A format-1 index is checked for repeated ids only (``"replace"`` is refused)."""
    if index_format == 1:
        if on_duplicate == "error":
            ids = pq.read_table(tmp / "documents", columns=["source_id"]).column("source_id").cast(pa.string())
            duplicate_deletes([], [ids.combine_chunks()], "error", where)
        return avgdl
    changed = commit_stage.dedupe_build(tmp, layout["segments"], on_duplicate, where, counts)
    if changed is None:
        return avgdl
    layout["deletes"] = changed["deletes"]
    return changed["avgdl"]


def _add_positions(tmp: Path, names: list, tok_cfg, store_text: bool) -> int:
    """Add term positions to the segments ``names`` written (with their texts) into ``tmp``, a thread a
    segment (:func:`cutext.stages.engines.segments.add_positions`; pyarrow and numpy release the GIL); the
    texts are removed again unless ``store_text``.  Returns the bytes of the positions files."""
    from concurrent.futures import ThreadPoolExecutor

    folders = [Path(tmp) / SEGMENTS_DIR / n for n in names]
    with ThreadPoolExecutor(max(1, min(len(folders), os.cpu_count() or 1))) as pool:
        return int(sum(pool.map(lambda f: add_positions(f, tok_cfg, store_text), folders)))


@dataclass
class _IndexInput:
    """The front end's outputs that the index is weighted and written from.

    Attributes
    ----------
    docs : dask DataFrame
        The document table (doc_id, source_id, replaced), a row per document.
    vocab : pyarrow.Array of str (n_terms,)
        Term id ``i + 1`` is ``vocab[i]``.
    counts : dask DataFrame
        (term_id, doc_id, tf, dl), a row per distinct (document, term).
    df_t : ndarray (n_terms + 1,) int64
        Documents per term id (id 0: the unknown terms).
    lengths : ndarray (n_docs,) int64
        Tokens per document.
    n_docs, n_terms : int
    pieces : list
        The read partitions.
    n_tokens, n_postings : int
    texts : dask DataFrame or None
        The read partitions (``source_id, text, replaced``), a partition per partition of ``docs``: read
        again only by a writer that stores the texts.
    source : CorpusSource or None
        The corpus as read (its pieces or frame partitions): a writer that keeps columns reads them from it.
    """

    docs: object
    vocab: object
    counts: object
    df_t: np.ndarray
    lengths: np.ndarray
    n_docs: int
    n_terms: int
    pieces: list
    n_tokens: int
    n_postings: int
    texts: object = None
    source: object = None


def _weights(idx: _IndexInput, variant, k1, b, delta, per_file: int):
    """The public bm25 stage (:func:`cutext.stages.text.public.bm25`) on the front end's counts, in term
    ranges of about ``per_file`` postings."""
    counts, df_t, lengths, n_docs, n_terms = idx.counts, idx.df_t, idx.lengths, idx.n_docs, idx.n_terms
    n_postings = idx.n_postings
    return stage_api.bm25(stage_api.Counts(counts, df_t, lengths, n_docs, n_terms), variant=variant,
                          k1=k1, b=b, delta=delta,
                          n_partitions=max(1, -(-n_postings // per_file)))


def _postings(idx: _IndexInput, weights, *, variant, k1, b, delta, spill, per_file: int, be: str):
    """The weighted postings to write, ``(postings, range_workers)``: a collection (or the GPU's delayed
    term ranges) and the workers its ranges were made on (None: anywhere)."""
    counts, df_t, n_postings = idx.counts, idx.df_t, idx.n_postings
    avgdl, idf_t = weights.avgdl, weights.idf
    if spill is not None:  # an external merge of the spilled counts, a term range a task
        weight_fn = bm25_stage.WeightPartition(idf_t, avgdl, variant, k1, b, delta)
        nparts = max(1, -(-n_postings // per_file))
        folders = [spill_dir(spill, SPILL_COUNTS, i) for i in range(counts.npartitions)]
        postings, range_workers = _term_major_spilled(folders, df_t, nparts, weight_fn, counts,
                                                      counts._meta)
    elif weights.ranges is not None and be == "gpu":  # the ranges' own delayed objects keep their workers
        postings, range_workers = weights.ranges, weights.range_workers
    else:
        postings, range_workers = weights.postings, None
    return postings, range_workers


def _documents(idx: _IndexInput, info):
    """The documents table to write, at most one file per ``DOCUMENTS_PER_FILE`` documents."""
    docs, lengths, n_docs = idx.docs, idx.lengths, idx.n_docs
    # the lengths (8 bytes a document) as one key, on every worker before any documents file
    documents = docs.map_partitions(_documents_partition, shared_key(lengths, info.client),
                                    meta=_documents_partition(docs._meta, np.zeros(0, np.int64)))
    n_files = max(1, -(-n_docs // DOCUMENTS_PER_FILE))
    if documents.npartitions > n_files:  # a file per read partition costs ~28 ms each on the GPU
        documents = documents.repartition(npartitions=n_files)
    return documents


def _write_vocabulary(path: Path, idx: _IndexInput, weights) -> None:
    """``vocab.parquet``: term_id, term, df, idf, w0 of the term ids 1..n_terms."""
    n_terms, vocab, df_t = idx.n_terms, idx.vocab, idx.df_t
    idf_t, w0 = weights.idf, weights.w0
    vt = pa.table({"term_id": pa.array(np.arange(1, n_terms + 1, dtype=np.int32)),
                   "term": vocab,
                   "df": pa.array(df_t[1:]),
                   "idf": pa.array(idf_t[1:]),
                   "w0": pa.array(w0[1:].astype(np.float32))})
    pq.write_table(vt, path)


def _write_files_gpu(tmp: Path, postings, range_workers, documents, docs, info, vocabulary, clock) -> int:
    """Write the postings, documents and (``vocabulary()``) vocabulary files on the GPU; returns the
    replaced-bytes total."""
    # cudf writes each term range and document file straight to its path, with the
    # delta encoding of the sorted ids (GPU_POSTINGS_ENCODING), while a host thread
    # writes the vocabulary. In-process: GPU_WRITE_WORKERS files in flight.
    import concurrent.futures

    tasks = (_parts_tasks(postings, tmp / "postings", GPU_POSTINGS_ENCODING, range_workers)
             + _parts_tasks(documents, tmp / "documents", GPU_DOCUMENTS_ENCODING))
    overlap = info.client is None and info.scheduler == "sync"
    with concurrent.futures.ThreadPoolExecutor(1) as side:
        vocab_written = side.submit(vocabulary)
        in_flight = (dask.config.set(scheduler=dask.threaded.get, num_workers=GPU_WRITE_WORKERS)
                     if overlap else contextlib.nullcontext())
        with in_flight:
            # the replaced-bytes total with the writes (one round trip less on a cluster)
            replaced = int(compute_fanned_out(tasks + [docs["replaced"].sum()], info, "bm25 index files",
                                              GPU_WRITE_WORKERS if overlap else 1)[-1])
        clock("write: postings + documents (weight + sort + parquet)")
        vocab_written.result()
    return replaced


def _write_files_cpu(tmp: Path, postings, documents, docs, vocabulary, clock) -> int:
    """Write the postings, documents and vocabulary files with dask's writer; returns the
    replaced-bytes total."""
    postings.to_parquet(str(tmp / "postings"), write_index=False, write_metadata_file=False,
                        name_function=lambda i: f"part.{i:05d}.parquet")
    clock("write: postings (weight + sort + parquet)")
    documents.to_parquet(str(tmp / "documents"), write_index=False, write_metadata_file=False,
                         name_function=lambda i: f"part.{i:05d}.parquet")
    clock("write: documents")
    vocabulary()
    return int(docs["replaced"].sum().compute())


def _write_index(tmp: Path, idx: _IndexInput, weights, *, variant, k1, b, delta, spill, per_file: int,
                 info) -> int:
    """The weight+write stage: weight the postings, write ``postings/``, ``documents/`` and
    ``vocab.parquet`` into ``tmp``, remove the spill directory; returns the replaced-bytes total."""
    be = info.backend
    clock = StepClock(np)
    postings, range_workers = _postings(idx, weights, variant=variant, k1=k1, b=b, delta=delta, spill=spill,
                                        per_file=per_file, be=be)
    documents = _documents(idx, info)
    vocabulary = functools.partial(_write_vocabulary, tmp / "vocab.parquet", idx, weights)
    if be == "gpu":
        replaced = _write_files_gpu(tmp, postings, range_workers, documents, idx.docs, info, vocabulary, clock)
    else:
        replaced = _write_files_cpu(tmp, postings, documents, idx.docs, vocabulary, clock)
    if spill is not None:
        shutil.rmtree(spill, ignore_errors=True)
    clock("write: replaced + vocabulary")
    return replaced


def _write_segments(tmp: Path, idx: _IndexInput, spill, info, first: int = 0,
                    store_text: bool = False, keep_columns=None) -> tuple[int, list[str]]:
    """The write stage of a segmented index: one segment a partition of the count stage, each written
    where its counts are (:func:`cutext.stages.engines.segments.write_partition_segment`), with
    ``store_text`` the partition's texts read again beside them (cudf text reaches the host through
    Arrow) and with ``keep_columns`` those columns of the partition read from the input
    (:func:`cutext.stages.readers.source.kept_columns`); returns the replaced-bytes total and the segment
    names in document order."""
    folder = tmp / SEGMENTS_DIR
    folder.mkdir(exist_ok=True)
    names = [f"seg-{first + i:05d}" for i in range(idx.counts.npartitions)]
    vocab = shared_key(idx.vocab)  # the one O(V) input of every writer, one key of the graph
    texts = [None] * len(names)
    if store_text:
        if idx.texts is None or idx.texts.npartitions != len(names):
            raise RuntimeError(f"store_text: {len(names)} count partitions but "
                               f"{getattr(idx.texts, 'npartitions', 0)} read partitions")
        texts = idx.texts.to_delayed()
    kept = [None] * len(names)
    if keep_columns:
        kept = kept_columns(idx.source, keep_columns)
        if len(kept) != len(names):
            raise RuntimeError(f"keep_columns: {len(names)} count partitions but {len(kept)} read partitions")
    # partitions spilled on the GPU were put in files because device memory holds about one: one at a time,
    # encoded on the host (libcudf's ZSTD encoder asks for hundreds of MB of scratch)
    tight = spill is not None and info.backend == "gpu"
    tasks = [dask.delayed(write_partition_segment)(c, d, vocab, str(folder / n), t, columns=kc, host=tight)
             for c, d, n, t, kc in zip(idx.counts.to_delayed(), idx.docs.to_delayed(), names, texts, kept)]
    # in process a segment a core at a time (pyarrow's and cudf's encoders release the GIL)
    threads = 1 if tight else pa.cpu_count()  # a worker's share of the cores
    with dask.config.set(scheduler=dask.threaded.get, num_workers=threads):
        metas = compute_fanned_out(tasks, info, "bm25 segments", threads)
    if spill is not None:
        shutil.rmtree(spill, ignore_errors=True)
    order = np.argsort([m["doc_lo"] for m in metas], kind="stable")
    return sum(m["replaced"] for m in metas), [names[i] for i in order]
