"""The ``bm25`` build on a Client's workers: the shares of file units a worker, and the partition-a-segment
route of frames and single units, with the counts their segments sum to."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import dask
import numpy as np
from dask.delayed import Delayed

from cutext.stages.engines import index_commits as commit_stage
from cutext.stages.engines.bm25_shards import shard_ranges
from cutext.stages.engines.index_commits import SEGMENTS_DIR
from cutext.stages.engines.segments import write_text_segment
from cutext.stages.readers.base import CorpusError
from cutext.stages.readers.files import document_numberer
from cutext.stages.readers.frames import InTask, input_label, partition_inputs, spread_source
from cutext.stages.runtime.compute import input_bytes
from cutext.stages.runtime.progress import released_check
from cutext.stages.runtime.progress import wait as progress_wait
from cutext.stages.text.partitions import _doc_table
from cutext.stages.text.tokenize import TokenizerConfig


def _worker_units(pieces) -> list[list[int]]:
    """The pieces grouped into the units a worker of a Client build reads whole: the pieces of one
    line-numbered file together (their source ids count rows across the file), any other piece alone."""
    units: list[list[int]] = []
    for i, p in enumerate(pieces):
        prev = pieces[units[-1][-1]] if units else None
        if prev is not None and p.numbered and prev.numbered and prev.file_index == p.file_index:
            units[-1].append(i)
        else:
            units.append([i])
    return units


def _piece_bytes(p, fs) -> int:
    """Bytes of a piece: its byte range, else the size of its files past its start (the last piece of a file
    runs to its end)."""
    if p.end is not None:
        return max(0, int(p.end) - int(p.start))
    return max(0, input_bytes([p], fs) - int(p.start or 0))


class _WorkerStages:
    """The stage timer of a worker's share of a Client build (:func:`_build_share`): no bars."""

    def __init__(self):
        self.timings: dict[str, float] = {}
        self.released = released_check()  # made on the share's task thread, asked on any

    def stage(self, name, fn, *args, **kwargs):
        if self.released():  # the run failed elsewhere (its caller stops the other shares): no more writes
            raise RuntimeError(f"this share's build stopped before its {name} stage: the run was stopped")
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        self.timings[name] = time.perf_counter() - t0
        return out


def _unit_weights(src) -> tuple[list[list[int]], np.ndarray]:
    """The units of the input's pieces (:func:`_worker_units`) and their bytes (int64, one a unit)."""
    units = _worker_units(src.pieces)
    return units, np.array([sum(_piece_bytes(src.pieces[i], src.fs) for i in u) for u in units], np.int64)


def _shares(src, info) -> list | None:
    """The worker shares of a Client build: ``[(worker, pieces, first piece number), ...]``, contiguous runs
    of whole units (:func:`_worker_units`) of about equal bytes in worker order; None when the input is a
    frame or has fewer units than the client has workers (the partitions are then spread by the stages)."""
    if info.client is None or src.fs is None:
        return None
    workers = sorted(info.client.scheduler_info()["workers"])
    units, weights = _unit_weights(src)
    if len(workers) < 1 or len(units) < len(workers):
        return None
    out = []
    for (a, e), w in zip(shard_ranges(weights, len(workers)), workers):
        ix = [i for u in units[a:e] for i in u]
        out.append((w, [src.pieces[i] for i in ix], ix[0]))
    return out


def _df_to_send(df) -> np.ndarray:
    """A writer's df for its summary to the caller: int32 (half the bytes of int64) when every value fits,
    as a segment's do (its documents are numbered in int32)."""
    df = np.asarray(df)
    return df.astype(np.int32) if not len(df) or int(df.max()) <= np.iinfo(np.int32).max else df.astype(np.int64)


def _summed_counts(path, parts: list) -> tuple[dict, tuple]:
    """The index's counts and vocabulary from its writers' summaries (each with ``n_docs``, ``sum_dl``,
    ``n_postings``, ``n_empty_docs``, ``terms``, its distinct terms ascending by UTF-8 bytes, and ``df``,
    theirs): the term count is the size of their union, and ``(terms, df)`` the union with the df summed
    (:func:`cutext.stages.engines.index_commits.merge_vocabularies`), for the commit's ``terms.arrow``.

    Raises
    ------
    CorpusError
        No document has a token after tokenization.
    """
    n_tokens = sum(m["sum_dl"] for m in parts)
    n_docs = sum(m["n_docs"] for m in parts)
    if n_tokens == 0:
        raise CorpusError(f"{input_label(path)}: no document has a token after tokenization ({n_docs} documents)")
    terms, df = commit_stage.merge_vocabularies([(m["terms"], m["df"]) for m in parts])
    counts = {"n_docs": n_docs, "n_terms": len(terms), "n_postings": sum(m["n_postings"] for m in parts),
              "n_tokens": n_tokens, "n_empty_docs": sum(m["n_empty_docs"] for m in parts)}
    return counts, (terms, df)


def _rows_of(text) -> int:
    """Documents of a read partition (given, or read in this task: :class:`InTask`)."""
    return len(text() if isinstance(text, InTask) else text)


def tokenize_partition_segment(text, numberer, tok_cfg: TokenizerConfig, folder: str,
                               store_text: bool = False) -> dict:
    """The segment of one read partition (given, or read in this task), numbered by ``numberer`` (the
    partition's own, :func:`cutext.stages.readers.files.document_numberer`), with its own vocabulary.  Its
    task keys name the tokenize stage, as the stages' keys do (progress, task streams and the fault tests
    find the stages by them).  Returns :func:`cutext.stages.engines.segments.write_text_segment`'s summary
    (its ``terms`` and their ``df``, for the commit's ``terms.arrow``)."""
    text = text() if isinstance(text, InTask) else text
    shutil.rmtree(folder, ignore_errors=True)  # a task run again after its worker died starts clean
    meta = write_text_segment(text, numberer(_doc_table(text), {"number": 0}), tok_cfg, folder, store_text)
    return dict(meta, df=_df_to_send(meta["df"]))


def _build_parts_on_workers(run, src, tok_cfg: TokenizerConfig, info, tmp: Path, path,
                            first: int = 0, store_text: bool = False) -> tuple[int, list[str], dict, tuple]:
    """A segmented index on a Client from an input that :func:`_shares` cannot cut (a frame, or fewer units than
    workers): the read stage counts the documents of every partition (to the caller), then one task a
    partition tokenizes, counts and writes its segment with the partition's own vocabulary
    (:func:`cutext.stages.engines.segments.write_text_segment`).  A task reads its partition itself
    (:class:`cutext.stages.readers.frames.InTask`; partitions spread over the workers in turn), or takes the
    slice that ``spread_source`` keeps on a worker, there.  No global vocabulary is built: segments store
    their terms as strings, so the files equal those of the stages' path, and no text, term or statistic
    moves between workers (a frame's id check sends hashes of the ids to the caller:
    :func:`cutext.stages.readers.frames.check_unique_ids`).  Each partition's terms and their df return to
    the caller for the index's term count and the commit's ``terms.arrow``.  Returns ``(replaced, segment
    names, counts, (terms, df))``, as :func:`_build_on_workers`.

    Raises
    ------
    CorpusError
        The input holds no document, or no document has a token after tokenization.
    """
    from distributed import Future

    client = info.client
    source, parts, homes = None, [], []  # the source holds the slices spread_source keeps on the workers

    def submit(fn, i, part, *args):
        if isinstance(part, Delayed):  # a graph over persisted data (a persisted frame): dask places it
            return client.compute(dask.delayed(fn)(part, *args))
        # a slice that spread_source keeps on a worker is used there, a partition read in its task goes to
        # the workers in turn; a preference, not a pin: a task whose worker died runs on another one
        return client.submit(fn, part, *args, workers=[homes[i]], allow_other_workers=True, pure=False)

    def gather(futures):
        progress_wait(futures)  # the first error at once, the other tasks stopped
        return client.gather(futures)

    def read():
        nonlocal source, parts, homes
        source = spread_source(src, info.n_workers, client)
        raw = source.docs
        if source.check_documents is not None:
            source.check_documents(raw.map_partitions(_doc_table, meta=_doc_table(raw._meta)))
        parts = [Future(p, client) if isinstance(p, (str, tuple)) else p for p in partition_inputs(raw)]
        workers = sorted(client.scheduler_info()["workers"])
        where = client.who_has([p for p in parts if isinstance(p, Future)])
        homes = [(where.get(p.key) or [None])[0] if isinstance(p, Future) else workers[i % len(workers)]
                 for i, p in enumerate(parts)]
        counts = gather([submit(_rows_of, i, p) for i, p in enumerate(parts)])  # to the caller
        return document_numberer(np.asarray(counts, np.int64), source.pieces)

    numberer = run.stage("read", read)
    folder = tmp / SEGMENTS_DIR
    folder.mkdir(exist_ok=True)
    names = [f"seg-{first + i:05d}" for i in range(len(parts))]
    metas = run.stage("tokenize+write", lambda: gather([
        submit(tokenize_partition_segment, i, p, numberer.part(i), tok_cfg, str(folder / names[i]), store_text)
        for i, p in enumerate(parts)]))
    counts, vocab = _summed_counts(path, metas)
    order = np.argsort([m["doc_lo"] for m in metas], kind="stable")
    return sum(m["replaced"] for m in metas), [names[i] for i in order], counts, vocab
