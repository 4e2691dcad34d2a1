"""The writer of a BM25 index (Lucene's ``IndexWriter``): :class:`IndexWriter` takes a corpus source and the
settings a pipeline resolved, and owns the build from there to the commit.

It chooses the route: each worker of a Client builds the segments of its share of a file input
(:func:`_build_on_workers`), or a task a partition on a Client (a frame, fewer files than workers:
:func:`cutext.stages.engines.index_writer_workers._build_parts_on_workers`), or this process builds batch after
batch sized by the memory free (:func:`_batches`: a RAM buffer flushed to segments), or the whole input in one
pass through the corpus front end (:func:`_front_end`, its spill plan :func:`_spill_plan`).  Each route writes
segments (:mod:`cutext.stages.engines.index_writer_files` in process) and returns their summed counts and
vocabulary; the writer then applies ``on_duplicate`` and the positions and commits: a build's ``terms.arrow``
and manifest, an append's commit (:func:`commit_append`) and merge policy, a BM25F index's fields joined
segment by segment (:meth:`IndexWriter.build_fields`).
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Protocol

import numpy as np
import pyarrow as pa

from cutext.stages.engines import index_commits as commit_stage
from cutext.stages.engines.bm25_shards import shard_ranges
from cutext.stages.engines.index_commits import SEGMENTS_DIR
from cutext.stages.engines.index_writer_files import (
    ID_FORMATS,
    _add_positions,
    _dedupe,
    _IndexInput,
    _weights,
    _write_index,
    _write_segments,
)
from cutext.stages.engines.index_writer_workers import (
    _build_parts_on_workers,
    _df_to_send,
    _piece_bytes,
    _shares,
    _summed_counts,
    _WorkerStages,
)
from cutext.stages.engines.merge_policy import merge_on_commit
from cutext.stages.engines.segments import field_segment, segment_heads, write_segment
from cutext.stages.readers.base import DEFAULT_BLOCKSIZE, CorpusError, NoDocumentError
from cutext.stages.readers.frames import input_label
from cutext.stages.readers.source import open_corpus, source_of_pieces
from cutext.stages.runtime.compute import (
    DEVICE_BYTES_PER_INPUT_BYTE,
    compute_context,
    device_memory_budget,
    gpu_spill_budget,
    host_share,
    share_threads,
)
from cutext.stages.runtime.params import available_memory, param
from cutext.stages.runtime.progress import gather as progress_gather
from cutext.stages.text.frontend import build_corpus
from cutext.stages.text.tokenize import TokenizerConfig

# the workers of one process (LocalCluster(processes=False)) share dask's configuration, which a share's
# in-process build sets for its own scheduler: their shares take turns
_SHARE_LOCK = threading.Lock()
POSTINGS_PER_FILE = 8_000_000
# The GPU backend's defaults (benchmarks/micro/index_ab.py, 2.00 GB on an H200):
# fewer, larger read partitions and term ranges cut the per-partition and per-file costs
# (4.76 -> 3.27 s) while the RMM peak stays under 3x the input (2.82x; 256 MiB partitions: 3.5x).
GPU_BLOCKSIZE = 128 << 20
GPU_POSTINGS_PER_FILE = 16_000_000
# the corpus front end's stage names -> this index's timing names
_TIMING_NAMES = {"count": "sort+count"}
# The share of the memory free at the start of an in-process segmented build that one batch may take at the
# front end's peak (DEVICE_BYTES_PER_INPUT_BYTE on the GPU, HOST_BYTES_PER_INPUT_BYTE on the CPU): builds of
# one GPU held 4x the input in 45 % of an H200 at full speed (16 GB, 14.5 s) and fell 12-16x slower at 80-91 %
# of the device (16 GB on an H100, 32 GB on an H200) (docs/decisions.md, "An in-process build in batches").
BATCH_MEMORY_FRACTION = 0.5
# Host bytes an input byte the in-process CPU build holds at its peak (its partitions' results go to files): peak
# RSS over the RSS before, 2.7x on 200 MB of replicated 20 Newsgroups in 50 MB files, 4.0x in one file, 5.1x on
# 36 MB (fixed costs included) (scheduler="sync", 2 cores)
HOST_BYTES_PER_INPUT_BYTE = 4


class BuildRun(Protocol):
    """What the writer asks of the run it builds for (the pipeline's ``PipelineRun``): a timed stage with its
    progress, the stage seconds, and a progress counter of its own loops (None: no progress shown)."""

    timings: dict

    def stage(self, name: str, fn, /, *args, **kwargs): ...

    def bar(self, total: int | None, desc: str, unit: str): ...

    def write_manifest(self, tmp: Path, fields: dict) -> None: ...


def open_source(path, be: str, blocksize, **read_kw):
    """``(src, reopen)``: the corpus opened with ``blocksize`` (None: the backend's default partitions,
    ``GPU_BLOCKSIZE`` or ``DEFAULT_BLOCKSIZE``), and ``reopen(blocksize=...)`` to open it again with other
    partitions (None when the caller chose the blocksize)."""
    reopen = functools.partial(open_corpus, path, backend=be, **read_kw)
    if blocksize is not None:
        return reopen(blocksize=blocksize), None
    return reopen(blocksize=GPU_BLOCKSIZE if be == "gpu" else DEFAULT_BLOCKSIZE), reopen


def _spill_plan(src, reopen, nbytes: int, info, tmp: Path):
    """Where the per-partition results go and how many postings an index file holds.

    Returns ``(src, spill, per_file)``: the corpus to read (opened again with 64 MiB partitions by
    ``reopen`` (:func:`open_source`) when the default GPU blocksize does not fit the device), the spill
    directory (None: held in memory) and the postings per file (bytes: ``nbytes`` of input; a posting takes
    <= 200 device bytes in flight).
    """
    be = info.backend
    # CPU: the per-partition results go to files inside the output's temporary directory
    # (removed before the swap), so host memory holds the partitions in flight;
    # GPU: the same when the device is too small to hold them
    budget = gpu_spill_budget(nbytes, info) if be == "gpu" else None
    spill = tmp / ".spill" if be == "cpu" or budget is not None else None
    if budget is not None and reopen is not None:
        src = reopen(blocksize=DEFAULT_BLOCKSIZE)  # a device too small for the run: the spilled path's partitions
    per_file = GPU_POSTINGS_PER_FILE if be == "gpu" else POSTINGS_PER_FILE
    if budget is not None:  # term ranges that fit: two in flight, <= 200 device bytes a posting
        per_file = int(min(per_file, max(1 << 16, budget // (2 * 200))))
    return src, spill, per_file


def _front_end(run: BuildRun, src, tok_cfg: TokenizerConfig, info, spill, path,
               empty_ok: bool = False) -> _IndexInput:
    """The corpus front end's stages (read, tokenize, encode, sort+count), timed under the index's names
    (``run``: a :class:`PipelineRun`, or on a worker :class:`_WorkerStages`).

    Raises
    ------
    CorpusError
        No document has a token after tokenization (unless ``empty_ok``: a worker's share of a corpus).
    """
    corpus = build_corpus(src, tok_cfg, info, spill=spill,
                          run_stage=lambda name, fn: run.stage(_TIMING_NAMES.get(name, name), fn))
    docs, vocab, counts, df_t, lengths = corpus.docs, corpus.vocab, corpus.counts, corpus.df, corpus.lengths
    n_docs, n_terms, pieces = corpus.n_docs, corpus.n_terms, corpus.pieces
    texts = corpus.source.docs  # lazy: the read partitions, as the read stage planned them
    source = corpus.source
    del corpus
    n_tokens = int(lengths.sum())
    if n_tokens == 0 and not empty_ok:
        raise CorpusError(f"{input_label(path)}: no document has a token after tokenization ({n_docs} documents)")
    n_postings = int(df_t.sum())
    return _IndexInput(docs, vocab, counts, df_t, lengths, n_docs, n_terms, pieces, n_tokens, n_postings, texts,
                       source)


def _share_segments(stages, src, tok_cfg: TokenizerConfig, info, tmp: Path, first: int,
                    store_text: bool = False, keep_columns=None) -> dict:
    """The segments ``seg-<first>...`` of a share of the input (``src``, a run of the input's pieces: whole
    units for a Client worker, any run for a batch; numbered from the share's first piece ``first``), built
    as a one-GPU build builds them: the front end and the segment writer in the compute context ``info``,
    entered by the caller, with the share's own vocabulary.  Returns the share's summary: the segment names,
    its vocabulary and df (for the index's term count and the commit's ``terms.arrow``), its sizes, the
    replaced bytes and the documents of each piece (``piece_docs``); the stage seconds go to ``stages``."""
    for i in range(first, first + len(src.pieces)):  # a share run again after its worker died starts clean
        shutil.rmtree(tmp / SEGMENTS_DIR / f"seg-{i:05d}", ignore_errors=True)
    work = tmp / f".share-{first:05d}"  # this share's spill files, apart from the other shares'
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    try:
        src, spill, _ = _spill_plan(src, None, src.input_bytes, info, work)
        idx = _front_end(stages, src, tok_cfg, info, spill, src.path, empty_ok=True)
        replaced, names = stages.stage("write", _write_segments, tmp, idx, spill, info, first,
                                       store_text=store_text, keep_columns=keep_columns)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if len(names) > len(src.pieces):  # the caller numbered the shares' segments by their pieces
        raise RuntimeError(f"a share of {len(src.pieces)} pieces made {len(names)} segments")
    terms = idx.vocab if isinstance(idx.vocab, (pa.Array, pa.ChunkedArray)) else pa.array(idx.vocab)
    piece_docs = idx.docs.map_partitions(len, meta=(None, "int64")).compute()  # of the persisted table
    return {"names": names, "terms": terms, "df": _df_to_send(idx.df_t[1:]), "n_docs": idx.n_docs,
            "sum_dl": idx.n_tokens, "n_postings": idx.n_postings, "n_empty_docs": int((idx.lengths == 0).sum()),
            "replaced": replaced, "piece_docs": np.asarray(piece_docs, np.int64)}


def _build_share(src, tok_cfg: TokenizerConfig, tmp: str, first: int, sharing: int = 1,
                 store_text: bool = False, keep_columns=None) -> dict:
    """Worker side of a Client build of a segmented index: :func:`_share_segments` over this worker's pieces
    (on its GPU, one stream of work, as a one-GPU build), segments ``seg-<first>...`` written into
    ``tmp/segments``, on the host's cores / ``sharing`` (the workers on this host).  Nothing but this summary
    leaves the worker (with ``timings``, its stage seconds)."""
    from distributed import get_worker

    stages = _WorkerStages()
    # one stream of work on a GPU; on the CPU the worker's own threads (one: synchronous)
    threads = get_worker().state.nthreads
    scheduler = "sync" if src.backend == "gpu" or threads <= 1 else "threads"
    files = list(dict.fromkeys(str(f) for p in src.pieces for f in p.paths))
    try:
        with _SHARE_LOCK, share_threads(sharing), compute_context(src.backend, scheduler=scheduler) as info:
            summary = _share_segments(stages, src, tok_cfg, info, Path(tmp), first, store_text, keep_columns)
    except Exception as exc:  # an error that names no file still tells which files the failed share held
        more = f" and {len(files) - 3} more" if len(files) > 3 else ""
        exc.add_note(f"in the bm25 build of a worker's share of the input: {', '.join(files[:3])}{more}")
        raise
    return dict(summary, timings=stages.timings)


def _build_on_workers(run: BuildRun, src, tok_cfg: TokenizerConfig, info, tmp: Path, path, shares,
                      first: int = 0, store_text: bool = False,
                      keep_columns=None) -> tuple[int, list[str], dict, tuple]:
    """Each worker builds the segments of its share of the input as a one-GPU build would, on its own
    (Lucene's indexing: a writer per worker, no postings and no statistics exchanged); the caller then
    only lists the segments in document order and merges the shares' vocabularies (their terms and df, to
    the caller).  Returns ``(replaced, segment names, counts, (terms, df))``, the last the vocabulary of
    all the segments (:func:`_summed_counts`, for the commit's ``terms.arrow``); stage seconds go to
    ``run.timings`` (the slowest worker's, and ``"workers"``, the wall time of them all).

    Raises
    ------
    CorpusError
        No document of the input has a token after tokenization.
    """
    client = info.client
    t0 = time.perf_counter()
    # a share runs on its worker; if that worker dies, on another (its segments are written again from scratch)
    sharing = host_share(client, [w for w, _, _ in shares])
    futures = [client.submit(_build_share, source_of_pieces(src, pieces), tok_cfg, str(tmp), first + k, sharing[w],
                             store_text, keep_columns, workers=[w], allow_other_workers=True, pure=False)
               for w, pieces, k in shares]
    bar = run.bar(len(src.pieces), "bm25 build on workers", "pieces")  # a share's pieces count when it is done
    try:
        # a share that fails raises at once, after the other shares stopped writing into tmp (removed next)
        results = progress_gather(futures, None if bar is None else (lambda k: bar.update(len(shares[k][1]))))
    finally:
        if bar is not None:
            bar.close()
    run.timings["workers"] = time.perf_counter() - t0
    for name in dict.fromkeys(n for r in results for n in r["timings"]):
        run.timings[name] = max(r["timings"].get(name, 0.0) for r in results)
    counts, vocab = _summed_counts(path, results)
    return sum(r["replaced"] for r in results), [n for r in results for n in r["names"]], counts, vocab


# ----------------------------------------------------------------------------- in-process batches

def _batch_bytes(info) -> int:
    """Input bytes one batch of an in-process segmented build may hold: ``BATCH_MEMORY_FRACTION`` of the
    memory free now (the device's, :func:`cutext.stages.runtime.compute.device_memory_budget`, on the GPU;
    the host's available memory on the CPU) over the front end's peak bytes an input byte."""
    if info.backend == "gpu":
        return max(1, int(BATCH_MEMORY_FRACTION * device_memory_budget() / DEVICE_BYTES_PER_INPUT_BYTE))
    return max(1, int(BATCH_MEMORY_FRACTION * available_memory() / HOST_BYTES_PER_INPUT_BYTE))


def _device_holds_a_batch(info) -> bool:
    """True on the CPU; on the GPU, whether a batch of one default partition (``GPU_BLOCKSIZE``) fits the device
    at the front end's peak.  Below that (a device of a few hundred MB, or one RMM limits so) a batch's
    segment writer alone needs more than the device holds (cudf's Parquet writer asked 750 MB for a 9 MB batch
    under a 69 MB limit); the one-pass build with its partitions spilled to files stays within any device."""
    if info.backend != "gpu":
        return True
    need = DEVICE_BYTES_PER_INPUT_BYTE * GPU_BLOCKSIZE / BATCH_MEMORY_FRACTION
    return device_memory_budget() >= need


def _batches(src, info) -> list[list[int]] | None:
    """The batches of an in-process segmented build, each a list of piece numbers: contiguous runs of the
    input's pieces, the fewest of about equal bytes (:func:`cutext.stages.engines.bm25_shards.shard_ranges`)
    that each hold at most :func:`_batch_bytes` (a piece larger than that alone).  A batch may start inside a
    line-numbered file: :func:`_build_in_batches` numbers its rows on from the batch before.  None (one pass
    over the whole input, as before) when the input fits one batch, is a frame or has one piece, the build
    runs on a Client, or a device too small for a batch of one full partition (:func:`_device_holds_a_batch`:
    the spilled one-pass path serves it)."""
    if info.client is not None or src.fs is None or not _device_holds_a_batch(info):
        return None
    limit = _batch_bytes(info)
    if src.input_bytes <= limit or len(src.pieces) < 2:
        return None
    weights = np.array([_piece_bytes(p, src.fs) for p in src.pieces], np.int64)
    ranges = [(0, len(weights))]
    for k in range(min(max(2, -(-int(weights.sum()) // limit)), len(weights)), len(weights) + 1):
        ranges = shard_ranges(weights, k)
        if all(e - a == 1 or int(weights[a:e].sum()) <= limit for a, e in ranges):
            break
    return [list(range(a, e)) for a, e in ranges] if len(ranges) > 1 else None


def _build_in_batches(run: BuildRun, src, tok_cfg: TokenizerConfig, info, tmp: Path, path, batches,
                      first: int = 0, store_text: bool = False,
                      keep_columns=None) -> tuple[int, list[str], dict, tuple]:
    """An in-process segmented build, one batch of pieces after the other (:func:`_batches`): each batch
    through the front end and the segment writer with its own vocabulary (:func:`_share_segments`, a Client
    worker's share), its device (or host) memory freed before the next one starts; the batches' vocabularies
    merged as they finish, so the host holds one batch and the merged vocabulary.  Returns, as
    :func:`_build_on_workers`, ``(replaced, segment names, counts, (terms, df))``; the stage seconds summed
    over the batches go to ``run.timings``.

    A batch that starts inside a line-numbered file numbers its rows on from the batches before
    (``Piece.first_row``).  A batch of files without a document (empty files) adds no segment, where a build
    in one pass writes an empty segment for each of them; the documents, their ids and the scores are the same.

    Raises
    ------
    CorpusError
        No document of the input has a token after tokenization, or the input holds no document.
    """
    stages = _SummedStages(run)
    merged = empty = None
    rows: dict[int, int] = {}  # a line-numbered file's rows read by the batches before, by file
    for pieces in batches:
        if merged is not None:
            gc.collect()  # the batch before's device buffers held in reference cycles are freed first
        ps = [src.pieces[i] for i in pieces]
        if ps[0].numbered and ps[0].file_index in rows:  # the batch starts inside a file: its rows go on
            ps[0] = dataclasses.replace(ps[0], first_row=rows[ps[0].file_index])
        # the batch's bytes, not its files' (a file cut between batches), for its spill plan
        batch = dataclasses.replace(source_of_pieces(src, ps), input_bytes=sum(_piece_bytes(p, src.fs) for p in ps))
        try:
            part = _share_segments(stages, batch, tok_cfg, info, tmp, first + pieces[0], store_text, keep_columns)
        except NoDocumentError as exc:  # files without a document (empty ones) add no segment
            empty = exc
            continue
        for p, n in zip(ps, part.pop("piece_docs")):
            if p.numbered:
                rows[p.file_index] = rows.get(p.file_index, p.first_row) + int(n)
        merged = part if merged is None else _merged_summaries(merged, part)
    if merged is None:
        raise empty
    run.timings.update(stages.timings)
    counts, vocab = _summed_counts(path, [merged])
    return merged["replaced"], merged["names"], counts, vocab


class _SummedStages:
    """The stages of a build in batches: each run as ``run``'s stage (its bar), the seconds summed in
    :attr:`timings`."""

    def __init__(self, run: BuildRun):
        self.run, self.timings = run, {}

    def stage(self, name, fn, *args, **kwargs):
        out = self.run.stage(name, fn, *args, **kwargs)
        self.timings[name] = self.timings.get(name, 0.0) + self.run.timings[name]
        return out


def _merged_summaries(a: dict, b: dict) -> dict:
    """Two consecutive shares' summaries (:func:`_share_segments`) as one: the vocabularies merged, the
    sizes summed, the segment names in order."""
    terms, df = commit_stage.merge_vocabularies([(a["terms"], a["df"]), (b["terms"], b["df"])])
    return {"names": a["names"] + b["names"], "terms": terms, "df": df,
            **{k: a[k] + b[k] for k in ("n_docs", "sum_dl", "n_postings", "n_empty_docs", "replaced")}}


def _no_kept_columns_in_place(keep_columns, path) -> None:
    """Refuse ``keep_columns`` on the route that writes a segment where each partition is (a Client and a frame
    or a single file unit): that route reads no column but the text yet."""
    if keep_columns:
        raise ValueError(f"{input_label(path)}: {param('keep_columns', bare=True)} with a client needs a file input "
                         "of several files or blocks (a frame or a single unit is written a segment a partition, "
                         "which keeps no column yet); build without the client, or from files")


def _segments_apart(run: BuildRun, src, tok_cfg: TokenizerConfig, info, tmp: Path, path, first: int,
                    write_text: bool, keep_columns) -> tuple | None:
    """The segments ``seg-<first>...`` of a build or an append built apart, not by one pass of the whole
    input through this process's front end: by each worker of a Client over its share of a file input
    (:func:`_build_on_workers`), a partition a task on a Client (a frame, fewer files than workers:
    :func:`cutext.stages.engines.index_writer_workers._build_parts_on_workers`), or in process batch after batch
    when the input does not fit one (:func:`_batches`).  Returns ``(replaced, names, counts, (terms, df), next segment
    number)`` (``counts["batches"]`` in batches), or None: the input is built in one pass in process."""
    shares = _shares(src, info)
    if shares is not None:  # a Client and a file input: every worker builds its share's segments
        built = _build_on_workers(run, src, tok_cfg, info, tmp, path, shares, first, store_text=write_text,
                                  keep_columns=keep_columns)
        return *built, first + len(src.pieces)
    if info.client is not None:  # a frame or one unit: a segment a partition, in place
        _no_kept_columns_in_place(keep_columns, path)
        built = _build_parts_on_workers(run, src, tok_cfg, info, tmp, path, first, store_text=write_text)
        return *built, first + len(built[1])
    batches = _batches(src, info)
    if batches is None:
        return None
    replaced, names, counts, vocab = _build_in_batches(run, src, tok_cfg, info, tmp, path, batches, first,
                                                       store_text=write_text, keep_columns=keep_columns)
    counts["batches"] = len(batches)
    return replaced, names, counts, vocab, first + len(src.pieces)


# ----------------------------------------------------------------------------- the writer

@dataclasses.dataclass(frozen=True)
class WriterConfig:
    """The settings an :class:`IndexWriter` builds with, already checked by its caller.

    Attributes
    ----------
    tokenizer : TokenizerConfig
    index_format : {2, 1}
        2: segments; 1: one global vocabulary with weighted postings.
    bm25 : tuple
        ``(variant, k1, b, delta)`` of a build: recorded in its manifest; a format-1 index stores its weights (an
        append keeps the index's).
    norms : {"exact", "lucene"}
        The document lengths a segmented index weighs with (recorded when not ``"exact"``).
    store_text, positions : bool
        Keep the documents' texts; store the postings' positions (segmented indexes).
    keep_columns : list of str or None
        Columns of a table input kept beside the segments.
    on_duplicate : {"error", "replace", "keep"}
        What a repeated source id does (:mod:`cutext.stages.engines.index_ids`).
    fields : tuple or None
        BM25F: ``(names, weights, bs)``, the text columns scored as weighted fields (None: one field).
    """

    tokenizer: TokenizerConfig
    index_format: int = 2
    bm25: tuple = ("lucene", 1.2, 0.75, None)
    norms: str = "exact"
    store_text: bool = False
    positions: bool = False
    keep_columns: list | None = None
    on_duplicate: str = "error"
    fields: tuple | None = None

    @classmethod
    def of_index(cls, meta: dict, on_duplicate: str) -> WriterConfig:
        """An append's settings: those of the index whose manifest is ``meta`` (its tokenizer, texts, positions and
        kept columns), with ``on_duplicate``."""
        return cls(TokenizerConfig.from_dict(meta["tokenizer"]), store_text=meta.get("store_text") is True,
                   positions=meta.get("positions") is True, keep_columns=meta.get("keep_columns") or None,
                   on_duplicate=on_duplicate)

    @property
    def bm25f(self) -> dict | None:
        """The manifest's ``bm25f``: the fields, their weights and b's (None: one field)."""
        if self.fields is None:
            return None
        return {"fields": list(self.fields[0]), "weights": list(self.fields[1]), "b": list(self.fields[2])}

    @property
    def write_text(self) -> bool:
        """The segment writers keep the texts: stored, or read again for the positions."""
        return self.store_text or self.positions


class IndexWriter:
    """The build of a BM25 index into a run's temporary directory, from a corpus source to a commit (Lucene's
    ``IndexWriter``): it chooses the route (a Client's workers, in-process batches, or one pass), plans the
    spill, writes the segments (or a format-1 index), sums the counts, applies ``on_duplicate`` and the
    positions, and commits.  The pipeline resolves the settings, opens the corpus (:func:`open_source`) and
    the run's compute context and output, and calls :meth:`build` or :meth:`append` once.

    Parameters
    ----------
    run : BuildRun
        The pipeline's run: its stages (timings, progress) and its manifest.
    tmp : pathlib.Path
        The output's temporary directory (renamed into place by the run when the block succeeds).
    info : ComputeInfo or None
        The compute context (backend, client, scheduler, workers); None for :meth:`build_fields` and
        :meth:`append_fields`, whose fields' builds enter their own.
    config : WriterConfig
    path
        The input as given (its label names it in errors and the manifest's ``source``).
    """

    def __init__(self, run: BuildRun, tmp: Path, info, config: WriterConfig, path):
        self.run, self.tmp, self.info, self.config, self.path = run, Path(tmp), info, config, path

    def build(self, src, reopen) -> dict:
        """A new index of ``src`` (``reopen``: :func:`open_source`'s), committed by its manifest
        (``index.json``) written last.  Returns the counts: n_docs, n_terms, n_postings, n_tokens, n_empty_docs,
        replaced, input_bytes, partitions (with ``batches``, ``updated_docs``, ``positions_bytes`` where they apply).

        Raises
        ------
        CorpusError
            No document has a token after tokenization.
        DuplicateIdError
            ``on_duplicate="error"`` and a source id repeats; nothing is committed.
        """
        cfg, run, tmp = self.config, self.run, self.tmp
        fmt = src.format
        layout = {"store_text": cfg.store_text} if cfg.index_format == 2 else {}
        if cfg.keep_columns is not None:
            layout["keep_columns"] = cfg.keep_columns
        if cfg.positions:
            layout["positions"] = True
        avgdl, counts = self._routes(src, reopen, layout)
        if fmt in ID_FORMATS:  # ids from a column may repeat: on_duplicate decides
            avgdl = _dedupe(tmp, layout, cfg.index_format, cfg.on_duplicate, input_label(self.path), counts, avgdl)
        if cfg.positions:
            counts["positions_bytes"] = run.stage("positions", _add_positions, tmp, layout["segments"],
                                                  cfg.tokenizer, cfg.store_text)
        if cfg.norms != "exact":
            layout["norms"] = cfg.norms
        variant, k1, b, delta = cfg.bm25
        info = self.info
        run.write_manifest(tmp, {
            "index_format": cfg.index_format, **layout, "N": counts["n_docs"], "avgdl": avgdl, "variant": variant,
            "k1": k1, "b": b, "delta": delta,
            "tokenizer": cfg.tokenizer.to_dict(), "backend": info.backend, "scheduler": info.scheduler,
            "n_workers": info.n_workers, "source": input_label(self.path), "format": fmt, "counts": counts,
            "timings": run.timings})
        return counts

    def _routes(self, src, reopen, layout: dict) -> tuple[float, dict]:
        """The build on its route: a segmented index by a Client's workers or in batches in this process
        (:func:`_segments_apart`), else the whole input through the front end in this process, written as
        segments or as a format-1 index.  Adds the segment names and the next segment number to ``layout``;
        returns ``(avgdl, counts)``."""
        cfg, run, tmp, info, path = self.config, self.run, self.tmp, self.info, self.path
        tok_cfg, keep_columns = cfg.tokenizer, cfg.keep_columns
        nbytes = src.input_bytes
        apart = _segments_apart(run, src, tok_cfg, info, tmp, path, 0, cfg.write_text, keep_columns) \
            if cfg.index_format == 2 else None
        if apart is not None:
            replaced, layout["segments"], counts, vocab, layout["next_segment"] = apart
            counts.update({"replaced": replaced, "input_bytes": nbytes, "partitions": layout["next_segment"]})
            # the vocabularies of the shares (batches, partitions) merged: for the next append
            commit_stage.write_commit_terms(tmp, *vocab)
            return counts["n_tokens"] / counts["n_docs"], counts
        src, spill, per_file = _spill_plan(src, reopen, nbytes, info, tmp)
        idx = _front_end(run, src, tok_cfg, info, spill, path)
        if cfg.index_format == 2:
            replaced, layout["segments"] = run.stage("write", _write_segments, tmp, idx, spill, info,
                                                     store_text=cfg.write_text, keep_columns=keep_columns)
            layout["next_segment"] = len(layout["segments"])
            avgdl = idx.n_tokens / idx.n_docs
            # the global vocabulary and df are at hand: the commit keeps them for the next append
            commit_stage.write_commit_terms(tmp, idx.vocab, idx.df_t[1:])
        else:
            variant, k1, b, delta = cfg.bm25
            weights = _weights(idx, variant, k1, b, delta, per_file)
            replaced = run.stage("weight+write", _write_index, tmp, idx, weights, variant=variant, k1=k1, b=b,
                                 delta=delta, spill=spill, per_file=per_file, info=info)
            avgdl = weights.avgdl
        counts = {"n_docs": idx.n_docs, "n_terms": idx.n_terms, "n_postings": idx.n_postings,
                  "n_tokens": idx.n_tokens, "n_empty_docs": int((idx.lengths == 0).sum()),
                  "replaced": replaced, "input_bytes": nbytes, "partitions": len(idx.pieces)}
        return avgdl, counts

    def append(self, src, reopen, index, old: dict, merge_policy: str) -> dict:
        """The documents of ``src`` added to the segmented ``index`` (``old``: its manifest) as segments after its
        own, on the build's routes; ``on_duplicate`` applied, the commit written into the run's directory and
        ``merge_policy`` applied to it.  Returns the counts of the whole index after the append.

        Raises
        ------
        CorpusError
            As :meth:`build`, for the new documents; a kept column whose type differs from the index's.
        DuplicateIdError
            ``on_duplicate="error"`` and a new document's id is in the index or repeats.
        """
        cfg, run, tmp, info = self.config, self.run, self.tmp, self.info
        first = int(old.get("next_segment", len(old["segments"])))
        apart = _segments_apart(run, src, cfg.tokenizer, info, tmp, self.path, first, cfg.write_text,
                                cfg.keep_columns)
        if apart is not None:
            replaced, names, added, _, _ = apart
            n_added = added["n_docs"]
        else:
            src, spill, _ = _spill_plan(src, reopen, src.input_bytes, info, tmp)
            idx = _front_end(run, src, cfg.tokenizer, info, spill, self.path)
            replaced, names = run.stage("write", _write_segments, tmp, idx, spill, info, first,
                                        store_text=cfg.write_text, keep_columns=cfg.keep_columns)
            n_added = idx.n_docs
        if cfg.keep_columns:
            commit_stage.check_kept_types(Path(index), old["segments"], tmp, names)
        if cfg.positions:
            run.stage("positions", _add_positions, tmp, names, cfg.tokenizer, cfg.store_text)
        return commit_append(run, tmp, index, old, names, cfg.on_duplicate, merge_policy,
                             {"replaced": replaced, "input_bytes": src.input_bytes, "appended_docs": n_added},
                             {"backend": info.backend, "scheduler": info.scheduler, "n_workers": info.n_workers})


    # ------------------------------------------------------------------------- BM25F

    def build_fields(self, build_field) -> tuple[dict, object]:
        """A new BM25F index (``config.fields``): the segments of :meth:`_field_segments`, committed by a manifest
        that records the fields, their weights and b's.  Returns ``(counts, the first field's result)`` (its
        backend, scheduler and workers are the run's)."""
        cfg, run, tmp = self.config, self.run, self.tmp
        names, next_segment, first = self._field_segments(build_field)
        heads = segment_heads([tmp / SEGMENTS_DIR / n for n in names], [np.zeros(0, np.int64)] * len(names),
                              ids=False)
        fc = first.counts
        mt, counts = commit_stage.index_counts(heads, {}, replaced=int(fc.get("replaced", 0)),
                                               input_bytes=int(fc.get("input_bytes", 0)))
        commit_stage.write_commit_terms(tmp, mt.vocab, mt.df[1:])  # kept for the next append
        layout = {"segments": names}
        avgdl = mt.avgdl
        if first.params.get("format") in ID_FORMATS:
            avgdl = _dedupe(tmp, layout, 2, cfg.on_duplicate, input_label(self.path), counts, avgdl)
        variant, k1, b, delta = cfg.bm25
        run.write_manifest(tmp, {
            "index_format": 2, **layout, "next_segment": next_segment, "store_text": False, "bm25f": cfg.bm25f,
            "N": counts["n_docs"], "avgdl": avgdl, "variant": variant, "k1": k1, "b": b, "delta": delta,
            "tokenizer": cfg.tokenizer.to_dict(), "backend": first.backend, "scheduler": first.scheduler,
            "n_workers": first.n_workers, "source": input_label(self.path), "format": first.params.get("format"),
            "counts": counts, "timings": run.timings})
        return counts, first

    def append_fields(self, build_field, index, old: dict, merge_policy: str) -> tuple[dict, object]:
        """The new documents added to the BM25F ``index`` (``old``: its manifest): their segments of each field
        built and joined (:meth:`_field_segments`) after the index's, then the commit (:func:`commit_append`).
        Returns ``(counts of the whole index after it, the first field's result)``."""
        first = int(old.get("next_segment", len(old["segments"])))
        names, _, res = self._field_segments(build_field, first)
        return commit_append(self.run, self.tmp, index, old, names, self.config.on_duplicate, merge_policy,
                             {"replaced": int(res.counts.get("replaced", 0)),
                              "input_bytes": int(res.counts.get("input_bytes", 0)),
                              "appended_docs": int(res.counts["n_docs"])},
                             {"backend": res.backend, "scheduler": res.scheduler, "n_workers": res.n_workers}), res

    def _field_segments(self, build_field, first: int = 0) -> tuple[list[str], int, object]:
        """The BM25F segments of an input in ``tmp/segments``: a one-field segmented index of each field built
        into ``tmp/.fields/<i>`` by ``build_field(field, out)`` (the pipeline's one-field build with
        ``text_column`` the field: every route, backend and cluster of a one-field build; the input read once a
        field), then segment by segment the fields joined (:func:`cutext.stages.engines.segments.field_segment`)
        as ``seg-<first + n>``.

        Returns
        -------
        (list of str, int, result)
            The segment names in document order, the next free segment number and the first field's result
            (backend, scheduler, workers, input counts); the fields' stage seconds go to ``run.timings`` as
            ``"<stage> (<field>)"``.

        Raises
        ------
        CorpusError
            A field without a token in any document (named).
        RuntimeError
            The fields' builds cut the input into different segments.
        """
        from concurrent.futures import ThreadPoolExecutor

        run, tmp, fields = self.run, self.tmp, self.config.fields[0]
        work = tmp / ".fields"
        results, metas = [], []
        try:
            for i, f in enumerate(fields):
                try:
                    r = build_field(f, work / str(i))
                except CorpusError as exc:
                    raise CorpusError(f"BM25F field {f!r}: {exc}") from None
                results.append(r)
                run.timings.update({f"{k} ({f})": v for k, v in r.timings.items()})
                metas.append(commit_stage.read_commit(work / str(i))[0])
            names = metas[0]["segments"]
            if any(m["segments"] != names for m in metas):
                raise RuntimeError(f"BM25F: the fields' builds cut the input into different segments "
                                   f"{[m['segments'] for m in metas]}")
            (tmp / SEGMENTS_DIR).mkdir(exist_ok=True)
            renamed = [f"seg-{first + int(n.rsplit('-', 1)[1]):05d}" for n in names]

            def join(k: int) -> None:
                parts = [work / str(i) / SEGMENTS_DIR / names[k] for i in range(len(fields))]
                write_segment(tmp / SEGMENTS_DIR / renamed[k], **field_segment(parts, fields))

            t0 = time.perf_counter()
            with ThreadPoolExecutor(max(1, min(len(names), os.cpu_count() or 1))) as pool:
                list(pool.map(join, range(len(names))))
            run.timings["join fields"] = time.perf_counter() - t0
            next_segment = first + int(metas[0].get("next_segment", len(names)))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return renamed, next_segment, results[0]


def commit_append(run: BuildRun, tmp: Path, index, old: dict, added: list, on_duplicate: str, merge_policy: str,
                  extra: dict, fields: dict) -> dict:
    """The commit of an append written into ``tmp``: the segments ``added`` after ``old``'s (the index's manifest),
    the older copies of their ids deleted by ``on_duplicate``
    (:func:`cutext.stages.engines.index_commits.update_deletes`), the manifest with ``extra`` counts and ``fields``
    (:func:`cutext.stages.engines.index_commits.write_commit`), then ``merge_policy``
    (:func:`cutext.stages.engines.merge_policy.merge_on_commit`).  Returns the index's counts after it."""
    deletes, updated = commit_stage.update_deletes(Path(index), old, tmp, added, on_duplicate)
    counts = commit_stage.write_commit(tmp, Path(index), old, old["segments"], deletes,
                                       {**extra, "updated_docs": updated}, added=added, timings=run.timings,
                                       fields=fields)
    return merge_on_commit(tmp, merge_policy, counts)
