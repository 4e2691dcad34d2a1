"""The ``ngram`` pipeline: an ARPA language model in a GPU forward trie, queried in batches.

the gLM paper (Li) (Li, "Language Model on GPU", building on gLM by Bogoychev and Lopez): the model is a
forward trie whose levels hold each context's children as B-tree nodes of 31 keys, searched K-ary
by a warp; the queries are batched. :class:`NGramModel` loads an ARPA file and answers

* :meth:`NGramModel.score` -- per-sentence and per-token log10 probabilities (KenLM's semantics);
* :meth:`NGramModel.next_word_log10_prob` / :meth:`NGramModel.next_word_prob` -- the full
  distribution over the vocabulary for each context (the gLM paper's query, for neural / n-gram
  mixtures), in log10 (dense) or as probabilities (dense or sparse); the scale is in the name;
* :meth:`NGramModel.top_k_next` -- the k most probable next words;
* :meth:`NGramModel.perplexity` -- of a corpus.

:func:`score_corpus` (``pipelines.run("ngram", path, model=...)``) scores a corpus into Parquet.

Output directory::

    scores.parquet/  a folder of Parquet part files, part-00000.parquet, part-00001.parquet ...: read as one
                     table (pyarrow, pandas, cudf, dask read the folder in file name order), the documents
                     in corpus order: doc_id: int64, source_id: string, sentences: int32, tokens: int64,
                     oov: int64, log10_prob: float64, perplexity: float64. One part in one process; on a
                     Client one part a worker, written by that worker.
    ngram.json       model, order, counts, memory, corpus totals and perplexity, backend, timings

Tokens are the white-space separated words of the text (ASCII white space, as KenLM's Python module
splits), without lowercasing. Words are matched byte for byte, as KenLM matches them: a ``str``
sentence is encoded with the model's ``encoding`` (UTF-8 by default, what KenLM's module does with a
``str``), a ``bytes`` sentence is taken as it is. With ``sentence="line"`` (default) every non-blank line of a document
is a sentence (``<s>`` ... ``</s>``) and the document's log10 probability is the sum over its lines;
with ``sentence="document"`` the whole document is one sentence. ``tokens`` counts the scored tokens
(words plus one ``</s>`` per sentence when ``eos``), the denominator of the perplexity
``10 ** (-log10_prob / tokens)``, as KenLM's ``perplexity``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cutext.kernels.backend import gpu_stack_installed, to_cudf
from cutext.pipelines._cli import Command, print_result
from cutext.pipelines._ngram_pieces import (  # noqa: F401  # the pieces' helpers stay reachable here
    _frame_texts,
    _load_model,
    _n_rows,
    _on_stream,
    _read_for,
    _score_piece_device,
    _score_slice,
    _slice_bounds,
    _slice_texts,
    _worker_address,
)
from cutext.pipelines._ngram_shares import (  # noqa: F401  # the shares' helpers stay reachable here
    _COUNT_FAILED,
    _byte_range_piece,
    _check_counted,
    _client_totals,
    _contiguous_shares,
    _gather_pinned,
    _Offsets,
    _piece_weight,
    _publish_rows,
    _slices_per_piece,
    _summed_rows,
    _Totals,
)
from cutext.pipelines._ngram_write import _EncodedParquetWriter, _score_stdin
from cutext.pipelines._result import RunResult
from cutext.pipelines._run import PipelineRun
from cutext.stages.engines.ngram_model import SCORE_COLUMNS, NGramModel
from cutext.stages.readers.base import DEFAULT_BLOCKSIZE, DEFAULT_MAX_RATIO, CorpusError
from cutext.stages.readers.files import plan
from cutext.stages.readers.frames import input_label, is_frame
from cutext.stages.readers.source import open_corpus
from cutext.stages.runtime.checksums import open_checksummed
from cutext.stages.runtime.compute import StepClock, device_pool, host_share, share_threads
from cutext.stages.runtime.params import flag, param
from cutext.stages.runtime.progress import released_check, stop_tasks
from cutext.stages.text.ngram_text import count_lines_rows, lines_rows_counted

# bytes a piece for a GPU model: a piece costs ~12 ms besides its bytes (launches, syncs, a writer call), so
# 7.75 GB of text took 3.96 s in process at 64 MiB pieces and 2.90 s at 256 MiB (one H200,
# benchmarks/micro/ngram_shares.py; docs/decisions.md, "ngram scores written on the device")
GPU_BLOCKSIZE = 256 << 20
# the smallest byte range a piece is cut into on a Client (equal shares, halves of a row count): below it a
# piece's fixed cost (~12 ms on a GPU, above) outweighs the balance it buys
MIN_SPLIT = 1 << 20

# the scores of a run: a folder of Parquet part files in corpus order, each written by one writer (one part in
# this process, one a worker on a Client); pyarrow, pandas, cudf and dask read the folder as one table
SCORES = "scores.parquet"


def _part_path(folder, k: int) -> Path:
    """Part ``k`` of the scores folder: the parts sort by name in corpus order."""
    return Path(folder) / f"part-{k:05d}.parquet"


def _split_bytes(piece, size: int, cuts) -> list:
    """``piece`` of ``size`` bytes (:func:`_piece_weight`) cut at the byte offsets ``cuts`` (ascending, inside
    it: relative to its start) into consecutive byte ranges of the same file; a cut that would leave a part
    under :data:`MIN_SPLIT` bytes is not made."""
    out, a = [], 0
    for c in cuts:
        c = int(c)
        if c - a >= MIN_SPLIT and size - c >= MIN_SPLIT:
            out.append(dataclasses.replace(piece, start=piece.start + a, end=piece.start + c))
            a = c
    if not out:
        return [piece]
    out.append(dataclasses.replace(piece, start=piece.start + a))
    return out


def _split_at_shares(pieces, fs, n: int) -> tuple[list, list]:
    """The pieces with those that hold a cut between two of ``n`` equal shares of the bytes split there
    (byte ranges only, :func:`_byte_range_piece`), so that each worker's share is the same bytes and not
    the nearest whole pieces (29 pieces of 256 MiB on 2 workers: 14 against 15).  Returns the pieces and,
    for each, the index of the plan's piece it comes from."""
    if n < 2 or fs is None or not pieces:
        return list(pieces), list(range(len(pieces)))
    weights = np.array([_piece_weight(p, fs) for p in pieces], np.int64)
    ends = np.cumsum(weights)
    total = int(ends[-1])
    targets = [total * k // n for k in range(1, n)]
    out, source = [], []
    for i, p in enumerate(pieces):
        lo = int(ends[i] - weights[i])
        inside = [t - lo for t in targets if lo < t < int(ends[i])]
        parts = _split_bytes(p, int(weights[i]), inside) if inside and _byte_range_piece(p) else [p]
        out.extend(parts)
        source.extend([i] * len(parts))
    return out, source


def _halves(entries, fs) -> tuple[list, list]:
    """The row-count entries of a share (``(piece, None, 0, 1)``, local lines pieces) cut at half their bytes,
    the piece across the middle split there (:func:`_split_bytes`): two counts that run at once and sum to
    the share's rows, since a line belongs to the range its first byte is in.  Entries of row slices
    (``m > 1``) are not cut: ``([], entries)``."""
    if not entries or any(m != 1 for _, _, _, m in entries):
        return [], list(entries)
    weights = [_piece_weight(p, fs) for p, _, _, _ in entries]
    half = sum(weights) // 2
    first, second, a = [], [], 0
    for (p, read, k, m), w in zip(entries, weights):
        if a + w <= half:
            first.append((p, read, k, m))
        elif a >= half:
            second.append((p, read, k, m))
        else:
            parts = _split_bytes(p, w, [half - a])
            first.append((parts[0], read, k, m))
            second.extend((q, read, k, m) for q in parts[1:])
        a += w
    return first, second


def _share_rows(entries, fs, name: str | None = None) -> dict:
    """``{file_index: rows}`` of the items of one share: where the shares after it start (their first dense
    ``doc_id``, and per file the first row number of numbered source ids).  A task that runs before the
    shares after it score.

    Parameters
    ----------
    entries : list of (piece, read, k, m)
        Slice ``k`` of ``m`` of the piece (``m == 1``: the whole piece).  ``read``: the piece as read on this
        worker (its rows counted), or None: an uncompressed local ``lines`` piece, whose rows are counted from
        its bytes without decoding or keeping them (:func:`cutext.stages.text.ngram_text.count_lines_rows`).
    fs : fsspec file system
    name : str, optional
        Also publish the counts as the dask ``Variable`` of this name and then set the ``Event`` of this name,
        for the shares after this one that score before the counts arrive (:class:`_Offsets`).
    """
    out: dict = {}
    try:
        for piece, read, k, m in entries:
            n = count_lines_rows(piece, fs) if read is None else _n_rows(read)
            a, b = _slice_bounds(n, k, m)
            out[piece.file_index] = out.get(piece.file_index, 0) + (b - a)
    except BaseException as exc:
        if name is not None:  # the shares waiting for this count stop instead of waiting for ever
            _publish_rows(name, {_COUNT_FAILED: f"{type(exc).__name__}: {exc}"})
        raise
    if name is not None:
        _publish_rows(name, out)
    return out


def _score_share(lm, fs, items, before, path: str, sentence: str, bos: bool, eos: bool, sharing: int = 1) -> dict:
    """Worker side of a Client run: read, score and write one share of the corpus into the part file
    ``path``, as a run in one process does (:func:`_score_here`: the next item is read while this one is
    scored; a GPU model reads lines pieces to this worker's device, keeps the scores there and writes them
    with libcudf's writer).  Nothing but this summary leaves the worker.

    Parameters
    ----------
    lm : NGramModel
        Loaded once per worker process from its ARPA file (it pickles as a reference).
    fs : fsspec file system or None
    items : list of (piece index, piece, k, m, read)
        Slice ``k`` of ``m`` of each piece (``m == 1``: the whole piece), in corpus order; ``read``: the piece
        already read on this worker, or None: read here, from ``fs``.
    before : list of dict, or _Offsets
        ``{file_index: rows}`` of the items of every share before this one (:func:`_share_rows`): they give
        the share's first ``doc_id`` and, per file, the first row number of numbered source ids.  As
        :class:`_Offsets` (the keys of those tasks) the share scores without them and its writer holds the
        scored rows until they arrive.
    path : str
        The part file to write (in the run's temporary output directory, which this worker sees).
    sentence, bos, eos
        As :func:`score_corpus`.
    sharing : int
        The workers on this worker's host: the share's pyarrow work takes the host's cores / ``sharing``.

    Returns
    -------
    dict
        ``rows`` ({file_index: rows} scored), ``n_docs``, ``totals`` (n_sentences, n_tokens, n_oov),
        ``log10`` (the log10 sum of each item, in order: the caller adds them in corpus order, as one process
        does), ``empty``, ``part`` (the file's name), ``checksum`` (its bytes and CRC32, taken as it was
        written), ``where`` (this worker's address) and ``timings``
        (seconds: ``read`` waiting for reads, ``score``, ``write`` the write left after the last score).
    """
    t0 = time.perf_counter()
    on_device = lm.backend == "gpu" and gpu_stack_installed()
    offsets = before if isinstance(before, _Offsets) else None
    doc0, rows0 = (0, {}) if offsets is not None else _summed_rows(before)

    released = released_check()  # asked on the reading thread

    def read(j):
        if released():  # the run failed elsewhere: no more of this share is read or written
            raise RuntimeError("this share of the corpus stopped: the run was stopped")
        _, piece, _, _, got = items[j]
        return _read_for(lm, piece, fs) if got is None else got

    # the in-process run's stream-ordered device pool, where the worker has none of its own (cudaMalloc
    # and a device-wide cudaFree an allocation otherwise)
    with share_threads(sharing), (device_pool() if on_device else contextlib.nullcontext()):
        sink = _ScoresWriter(Path(path), {i: p for i, p, *_ in items}, device=on_device, doc0=doc0, rows0=rows0,
                             offsets=offsets)
        try:
            t_read = _score_here(lm, [(i, k, m) for i, _, k, m, _ in items], read, sink, on_device, sentence,
                                 bos, eos, None)
            t1 = time.perf_counter()
            sink.close()
        except BaseException:
            sink.abort()
            raise
    return {"rows": dict(sink.rows_seen), "n_docs": sink.n_docs,
            "totals": dict(sink.totals), "log10": list(sink.log10_parts), "empty": sink.empty,
            "part": Path(path).name if sink.writer is not None else None, "checksum": sink.checksum,
            "where": _worker_address(),
            "timings": {"read": t_read, "score": t1 - t0 - t_read, "write": time.perf_counter() - t1}}


def _score_on_client(client, lm, pieces, fs, read_remote, folder: Path, sentence, bos, eos, bar, wrote):
    """Score the pieces on the Client's workers, each worker writing its own part of ``folder``; ``wrote(path,
    checksum)`` records each part's bytes and CRC32, taken by its worker as it wrote it
    (:meth:`cutext.pipelines._run.PipelineRun.wrote`).

    The pieces are cut into one share a worker, contiguous in corpus order and of equal bytes (a byte range
    that holds a cut between two shares is split there, :func:`_split_at_shares`; with still fewer pieces than
    workers, each piece is cut into row slices so that every worker scores; every worker of a piece reads it
    whole).  One task a worker, pinned to it, reads its share (on its GPU for a GPU model),
    scores it and writes part ``k`` (:func:`_score_share`); only counts, totals and seconds come back, no
    score row.  Where a share's documents start (its first ``doc_id`` and per file its first row number)
    comes from the row counts of the shares before it, counted while it scores (:class:`_Offsets`: its
    writer holds the scored rows until they arrive): the uncompressed local ``lines`` pieces of a share are
    counted from their bytes, half by the share's own worker beside its scoring (on its second thread; none
    on a worker of one thread) and half by the worker of the next share beside that share's scoring (or, on
    a worker of one thread, while the share waits for its offsets), so that the piece's own worker reads it
    while scoring;
    any other piece is read ahead by its own worker, which counts its rows and then scores it from memory.
    The last share's pieces are read while scoring.

    Returns
    -------
    totals : _Totals
    n_items : int
        Row ranges scored (pieces, or slices of pieces).
    workers_used : list of str
        Addresses of the workers that scored.
    timings : dict
        ``workers``: seconds until every part was written; ``read``, ``score``, ``write``: the slowest
        worker's (:func:`_score_share`).

    Raises
    ------
    RuntimeError
        The Client has no worker, a worker left during the run (its share was pinned to it), or a share did
        not hold the rows counted for it (the input changed while it was read).
    """
    t0 = time.perf_counter()
    info = client.scheduler_info().get("workers", {})
    workers = sorted(info)
    if not workers:
        raise RuntimeError("the dask Client has no workers")
    if not pieces:
        return _Totals(0, {"n_sentences": 0, "n_tokens": 0, "n_oov": 0}, 0.0, 0), 0, [], {"workers": 0.0}
    pieces, source = _split_at_shares(pieces, fs, len(workers))  # source[i]: the plan's index of piece i
    weights = [_piece_weight(p, fs) for p in pieces]
    if len(pieces) >= len(workers):
        shares = [[(i, 0, 1) for i in range(a, b)] for a, b in _contiguous_shares(weights, len(workers))]
    else:
        shares = [[(i, k, m)] for i, m in enumerate(_slices_per_piece(weights, len(workers))) for k in range(m)]
    # pinned: a loose restriction lets an idle worker steal a share, two shares then run on one GPU
    pin = {"allow_other_workers": False, "pure": False}
    threads = {w: int(info.get(w, {}).get("nthreads", 1) or 1) for w in workers}
    sharing = host_share(client, workers[:len(shares)])
    counts, futures = [], []
    run_id = uuid.uuid4().hex
    names: list = []  # the published row counts of the shares so far (:class:`_Offsets`)
    for s, share in enumerate(shares):
        last = s == len(shares) - 1
        items, counted, ahead = [], [], []
        for i, k, m in share:
            if fs is not None and (last or lines_rows_counted(pieces[i], fs)):
                read = None  # read by the share's task while the item before it is scored
                if not last:
                    counted.append((pieces[i], None, k, m))
            else:
                read = read_remote(client, source[i], workers[s])
                ahead.append((pieces[i], read, k, m))
            items.append((i, pieces[i], k, m, read))
        # the counts before this share by name: it scores while they count, and waits for them only to write
        later = _Offsets(tuple(names))
        futures.append(client.submit(_score_share, lm, fs, items, later, str(_part_path(folder, s)),
                                     sentence, bos, eos, sharing[workers[s]], workers=[workers[s]], **pin))
        rows = []
        if not last:  # the shares after this one write once its rows are counted: counted first (priority,
            # earlier shares' first), in two halves at once by this share's worker (beside its scoring, on its
            # second thread) and the next share's
            own, nxt = _halves(counted, fs) if threads[workers[s]] > 1 else ([], counted)
            for part, w in ((own, workers[s]), (nxt, workers[s + 1]), (ahead, workers[s])):
                if part:
                    names.append(f"cutext-ngram-rows-{run_id}-{s}-{len(rows)}")
                    rows.append(client.submit(_share_rows, part, fs, names[-1], workers=[w],
                                              priority=10 + len(shares) - s, **pin))
        counts.append(rows)
    if bar is not None:
        bar.reset(total=sum(len(share) for share in shares))
    offsets = _Offsets(tuple(names))
    counting = [f for rows in counts for f in rows]
    try:
        # the counts waited for too: a failed count raises its own error (the shares after it stop)
        def done(k):
            if bar is not None and k < len(shares):  # a share, not a count
                bar.update(len(shares[k]))

        results = _gather_pinned(client, futures + counting, workers[:len(shares)], done)[:len(shares)]
        counted_rows = client.gather(counts)
    except BaseException:
        # the other shares stop before the caller removes the output they write into: a share waiting for a
        # count that will not come wakes and raises, one scoring stops before its next item
        with contextlib.suppress(Exception):  # a scheduler that is gone: the run's own error is the one raised
            offsets.stop(client)
        stop_tasks(futures + counting)
        raise
    finally:
        offsets.release(client)
    _check_counted(counted_rows, results, [pieces[share[0][0]] for share in shares])
    totals, timings = _client_totals(results, folder, wrote)
    timings = {"workers": time.perf_counter() - t0, **timings}
    return totals, sum(len(share) for share in shares), sorted({r["where"] for r in results}), timings


def score_corpus(path, out, *, model, backend: str = "auto", sentence: str = "line", bos: bool = True,
                 eos: bool = True, format="auto", text_column=None, id_column=None, blocksize=None,
                 encoding="utf-8", storage_options=None, glob=None, max_ratio=DEFAULT_MAX_RATIO,
                 overwrite: bool = True, progress: bool = True, client=None, scheduler="auto", n_workers=None,
                 members=None) -> RunResult:
    """Score every document of a corpus with an n-gram model; write Parquet (per document) and JSON.

    Parameters
    ----------
    path : str, os.PathLike, list, or a frame
        Corpus (see :func:`cutext.stages.readers.source.read_corpus` for the formats), or a pandas / cudf /
        dask / dask-cudf DataFrame or Series (``text_column=``, ``id_column=``;
        :mod:`cutext.stages.readers.frames`), read partition by partition.
    out : str or os.PathLike
        Output directory (appears only when complete).
        ``pipelines.run("ngram", path)`` and the CLI default to ``"ngram-out"`` (one rule for
        every pipeline: ``"<name>-out"`` in the working directory).  A local path or a ``file://`` URL
        (another URL is refused before any work: :mod:`cutext.stages.runtime.output`).  With ``client``
        the workers write their parts of ``scores.parquet/`` into it themselves: it must be a path every
        worker sees (a shared file system on a cluster of several hosts; checked on every worker before
        any work, :func:`cutext.stages.runtime.output.check_workers_see`).
    model : str, os.PathLike or NGramModel
        An ARPA file or a loaded model (whose backend is then used).
    backend : {"auto", "cpu", "gpu"}
        Where the trie is queried when ``model`` is a path; with a loaded model only ``"auto"`` or the
        model's own backend (``lm.backend``) is taken. On the GPU the text of every piece goes to
        the device once, and sentences, words, word ids, scores and per-document sums are computed there
        (:meth:`NGramModel.score_documents`); reading stays on the host.
    sentence : {"line", "document"}
        ``"line"``: every non-blank line of a document is a sentence; ``"document"``: one sentence.
    bos, eos : bool
        KenLM's sentence boundaries.
    format, text_column, id_column, blocksize, encoding, storage_options, glob, max_ratio, members
        Reader settings (:func:`cutext.stages.readers.source.read_corpus`; ``members``: the archive members
        read, fnmatch globs).  ``blocksize=None``: pieces of 64 MiB for a CPU model, 256 MiB for a GPU
        model (:data:`GPU_BLOCKSIZE`).
    overwrite : bool
    progress : bool
        Show pieces scored / total: a bar when standard error is a terminal, else a plain line
        every 10 s and one at the end.
    client : distributed.Client, optional
        Score on the Client's workers: the pieces are cut into one share a worker, contiguous in corpus
        order, and one task a worker, pinned to it, reads its share, scores it and writes it as one part
        file of ``scores.parquet/`` (the model travels as a reference to its ARPA file and is loaded once
        per worker process, on the worker's GPU for a GPU model, where the text is read and the scores
        stay: one GPU per worker on a ``LocalCUDACluster``); when there are fewer pieces than workers
        (e.g. one compressed file) the pieces are split into row ranges so that every worker scores.
        Only row counts, totals and seconds come back to this process, which writes ``ngram.json``.
        Rows, source ids, scores and counts are identical to a run in one process; the corpus log10 sum
        too, but for a piece split into row ranges, summed a range at a time (its last bits may differ).
    scheduler : {"auto", "sync", "threads", "cluster"}
        Without ``client``: ``"cluster"`` starts a local cluster (:func:`cutext.stages.runtime.compute.compute_context`;
        ``n_workers`` workers) and scores there as with ``client``; the others (``"auto"`` without
        ``n_workers``, whatever the input size) score the pieces one after another in this process (the
        numba kernels use every core).
    n_workers : int, optional
        Workers of the local cluster: ``scheduler="cluster"``, or ``"auto"`` (which then starts it).  Refused
        with ``"sync"`` / ``"threads"`` (nothing to size) and with ``client``.

    Returns
    -------
    RunResult
        ``counts``: n_docs, n_sentences, n_tokens, n_oov, empty_docs, partitions (pieces read),
        tasks (row ranges scored), workers (distinct workers that scored), parts (files of
        ``scores.parquet/``); ``params`` records the model.  ``timings``: in one process ``read`` (waiting for
        reads), ``score`` and ``write`` (the write left after the last score); on a Client ``workers`` (until
        every part was written) and the slowest worker's ``read``, ``score`` and ``write``.

    Raises
    ------
    FileNotFoundError
    CorpusError
        Unreadable input or an empty corpus (message names the file).
    ArpaError
        Malformed model (message names the file and line).
    ValueError
        An unknown ``sentence``, ``bos`` / ``eos`` not a bool, a ``backend`` other than ``"auto"`` and the
        loaded model's own, ``n_workers`` with ``client`` or with ``scheduler="sync"`` / ``"threads"``.
    OutputDirectoryError (FileExistsError)
        ``out`` is not a new or empty directory nor an earlier ngram output, or is the working
        directory, an input or a parent of one (:mod:`cutext.stages.runtime.output`); checked before any work.
    """
    run = PipelineRun("ngram", out, manifest="ngram.json", inputs=[path, model], overwrite=overwrite,
                      progress=progress)
    bos, eos = _checked_options(sentence, bos, eos, client, n_workers)
    lm = run.stage("load_model", _load_model, model, backend)
    if blocksize is None:
        blocksize = GPU_BLOCKSIZE if lm.backend == "gpu" else DEFAULT_BLOCKSIZE
    pieces, fmt, check, fs, read_local, read_remote = _corpus_readers(
        lm, path, format=format, text_column=text_column, id_column=id_column, blocksize=blocksize,
        encoding=encoding, storage_options=storage_options, glob=glob, max_ratio=max_ratio, members=members)
    # a bar on a terminal, else a plain line every 10 s and one at the end
    bar = run.bar(len(pieces), "ngram score", "partitions")
    try:
        # nbytes=0: "auto" scores in this process whatever the input size (a piece at a time, streaming)
        with run.compute(lm.backend, client=client, scheduler=scheduler, nbytes=0, n_workers=n_workers) as info, \
                run.output(workers_write=True) as tmp:  # the workers of a Client write their parts
            scored = _score(run, tmp, lm, pieces, fs, read_local, read_remote, info, sentence, bos, eos, bar)
            counts, sum_log10, ppl_all = _finish(run, tmp, path, fmt, lm, len(pieces), check, info, scored,
                                                 sentence, bos, eos)
    finally:
        if bar is not None:
            bar.close()
    params = {"model": str(lm.path), "order": lm.order, "sentence": sentence, "bos": bos, "eos": eos,
              "format": fmt, "perplexity": ppl_all, "log10_prob": sum_log10}
    return run.result(lm.backend, info.scheduler, info.n_workers, counts, params,
                      headline={"perplexity": ppl_all})  # 10 ** (-sum log10 p / tokens) over the corpus


def _checked_options(sentence, bos, eos, client, n_workers) -> tuple[bool, bool]:
    """``(bos, eos)`` as bools, after the checks of :func:`score_corpus`'s options (its ``ValueError``)."""
    if sentence not in ("line", "document"):
        raise ValueError(f"{param('sentence', bare=True)} must be 'line' or 'document', got {sentence!r}")
    bos, eos = flag("bos", bos), flag("eos", eos)  # recorded in ngram.json as given
    if n_workers is not None and client is not None:
        raise ValueError(f"pass {param('client')} or {param('n_workers')}, not both (n_workers sizes a local "
                         "cluster)")
    return bos, eos


def _finish(run: PipelineRun, tmp: Path, path, fmt, lm: NGramModel, n_pieces: int, check, info, scored,
            sentence: str, bos: bool, eos: bool) -> tuple[dict, float, float]:
    """Check the scored output in ``tmp`` and write ``ngram.json`` into it: ``(counts, log10 sum, perplexity)``.

    Raises
    ------
    CorpusError
        The corpus holds no document, or a frame's id column repeats an id.
    """
    sink, n_tasks, workers_used, written = scored
    n_docs = sink.n_docs
    if n_docs == 0:
        raise CorpusError(f"{input_label(path)}: the corpus holds no document")
    if check is not None:  # a frame's id column: unique ids
        check(pq.read_table(tmp / SCORES, columns=["source_id"]))
    tot, sum_log10, empty = sink.totals, sink.sum_log10, sink.empty
    ppl_all = 10.0 ** (-sum_log10 / tot["n_tokens"]) if tot["n_tokens"] else float("nan")
    written()  # what was left of the write (it overlaps scoring)
    counts = {"n_docs": n_docs, **tot, "empty_docs": empty, "partitions": n_pieces,
              "tasks": n_tasks, "workers": len(workers_used),
              "parts": sum(1 for _ in (tmp / SCORES).glob("part-*.parquet"))}
    run.write_manifest(tmp, {
        "source": input_label(path), "format": fmt,
        "model": lm.summary(), "sentence": sentence, "bos": bos, "eos": eos,
        "log10_prob": sum_log10, "perplexity": ppl_all, "counts": counts, "timings": run.timings,
        "backend": lm.backend, "scheduler": info.scheduler, "n_workers": info.n_workers})
    return counts, sum_log10, ppl_all


def _corpus_readers(lm: NGramModel, path, **read_kw):
    """The corpus' pieces and how to read one, in this process or on a worker.

    Returns
    -------
    pieces : list
        The read partitions (the plan of :func:`cutext.stages.readers.files.plan`, or a frame's).
    fmt : str
        The input format.
    check : callable or None
        ``check(table)`` checks a frame's source ids (unique); None for files.
    fs : fsspec file system or None
        The files' (None for a frame: its partitions are computed, not read).
    read_local : callable
        ``read_local(i)``: piece ``i`` as a host table (or, for a GPU model, device text buffers).
    read_remote : callable
        ``read_remote(client, i, worker)``: a future of the same, read on ``worker`` (pinned to it, first
        in its queue: the shares after it wait for its row count).
    """
    check, fs = None, None
    if is_frame(path):  # a frame: its partitions, one at a time (cutext.stages.readers.frames)
        import dask

        src = open_corpus(path, backend="cpu", **read_kw)
        pieces, fmt, check = src.pieces, src.format, src.check_documents
        parts = src.docs.to_delayed()

        def read_local(i):
            return _frame_texts(parts[i].compute())

        def read_remote(client, i, worker):
            return client.compute(dask.delayed(_frame_texts, pure=False)(parts[i]), workers=[worker],
                                  allow_other_workers=False, priority=10)
    else:
        fs, pieces, fmt = plan(path, **read_kw)

        def read_local(i):
            return _read_for(lm, pieces[i], fs)

        def read_remote(client, i, worker):
            return client.submit(_read_for, lm, pieces[i], fs, workers=[worker], allow_other_workers=False,
                                 pure=False, priority=10)
    return pieces, fmt, check, fs, read_local, read_remote


def _score(run: PipelineRun, tmp: Path, lm: NGramModel, pieces, fs, read_local, read_remote, info, sentence: str,
           bos: bool, eos: bool, bar):
    """Score every piece into the part files of ``tmp / SCORES``: on the client's workers, each writing its
    share (:func:`_score_on_client`), or piece by piece here into one part.

    Its seconds go to ``timings``: here ``read`` (waiting for reads) and ``score``; on a client ``workers``
    and the slowest worker's ``read``, ``score`` and ``write``.

    Returns
    -------
    totals : _ScoresWriter or _Totals
        ``n_docs``, ``totals``, ``sum_log10`` and ``empty`` of the corpus (a writer: closed, its rows written).
    n_tasks : int
        Row ranges scored.
    workers_used : list of str
        Addresses of the workers that scored (``["local"]`` in this process).
    written : callable
        Records ``timings["write"]`` here: the seconds since the last scores were handed to the writer
        (nothing on a client, where the workers report theirs).
    """
    ta = time.perf_counter()
    folder = tmp / SCORES
    folder.mkdir()
    if info.client is not None:
        totals, n_tasks, workers_used, timings = _score_on_client(info.client, lm, pieces, fs, read_remote, folder,
                                                                  sentence, bos, eos, bar, run.wrote)
        run.timings.update(timings)
        return totals, n_tasks, workers_used, lambda: None
    # one GPU in this process: the scores stay on the device and cudf's Parquet writer writes
    # them (pyarrow's writer took 75 ms a 574 k-row piece, 4x the scoring)
    on_device = lm.backend == "gpu" and gpu_stack_installed()
    sink = _ScoresWriter(_part_path(folder, 0), pieces, device=on_device)
    try:
        t_read = _score_here(lm, [(i, 0, 1) for i in range(len(pieces))], read_local, sink, on_device, sentence,
                             bos, eos, bar)
        # "read": waiting for reads (they overlap scoring); "score": the rest, but the write
        run.timings.update({"read": t_read, "score": time.perf_counter() - ta - t_read})
        written = run.start("write")
        sink.close()
    except BaseException:
        sink.abort()
        raise
    if sink.checksum is not None:
        run.wrote(sink.path, sink.checksum)
    return sink, len(pieces), ["local"], written


# a GPU model's reads and scores run on CUDA streams of their own (non-blocking), so that they wait neither
# for the writer's cudf kernels and copies on the legacy default stream nor it for them
DEVICE_STREAMS = True


def _score_here(lm: NGramModel, items, read, sink, on_device: bool, sentence: str, bos: bool, eos: bool,
                bar) -> float:
    """Score ``items`` one after the other in this process (the whole corpus, or a worker's share), each
    handed to ``sink``; returns the seconds spent waiting for reads (the next item is read while this one is
    scored).

    ``items``: ``(piece index, k, m)``, slice ``k`` of ``m`` of the piece (``m == 1``: all of it); ``read(j)``
    gives item ``j``'s piece, read.  ``on_device``: a GPU model's scores stay on the device
    (:func:`_score_piece_device`, a ``sink`` with ``device=True``)."""
    from concurrent.futures import ThreadPoolExecutor

    if on_device and DEVICE_STREAMS:
        import cupy

        reading, scoring = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
        read = functools.partial(_on_stream, reading, read)
    else:
        scoring = contextlib.nullcontext()
    t_read = 0.0
    with ThreadPoolExecutor(1) as pool, scoring:  # the next item is read while this one is scored
        nxt = pool.submit(read, 0) if items else None
        for j, (i, k, m) in enumerate(items):
            tr = time.perf_counter()
            texts = nxt.result()
            t_read += time.perf_counter() - tr
            nxt = pool.submit(read, j + 1) if j + 1 < len(items) else None
            a, b = _slice_bounds(_n_rows(texts), k, m)
            if b > a or m == 1:  # (an empty slice of a piece cut for more workers than it has rows: nothing)
                sink.add(i, _score_piece_device(lm, _slice_texts(texts, a, b), sentence, bos, eos) if on_device
                         else _score_slice(lm, texts, a, b, sentence, bos, eos)[0])
            del texts
            if bar is not None:
                bar.update(1)
    return t_read


# options of cudf's chunked Parquet writer for scores.parquet on the device, used where
# DEVICE_SCORE_ENCODINGS is None (benchmarks/micro/ngram_write.py measured no compression: 1.5x faster at 1
# row group a piece, 2.5x the bytes; snappy kept)
DEVICE_WRITER_OPTIONS: dict = {}
# Parquet encodings of the score columns by name: doc_id is dense and a line-numbered source_id is
# "<label>:<row>", so a delta (DELTA_BINARY_PACKED) and shared prefixes (DELTA_BYTE_ARRAY) store them in a
# few bits a row where cudf's dictionary-or-plain with snappy takes ~24 and ~29 bytes
# (benchmarks/micro/ngram_encode.py). The device writes them with pylibcudf's chunked writer (cudf's
# ParquetWriter takes no encodings); None: cudf's ParquetWriter with DEVICE_WRITER_OPTIONS.
DEVICE_SCORE_ENCODINGS: dict | None = {"doc_id": "DELTA_BINARY_PACKED", "source_id": "DELTA_BYTE_ARRAY"}
# the same for pyarrow's writer on the host: its DELTA_BYTE_ARRAY takes twice PLAIN's time, so doc_id only
HOST_SCORE_ENCODINGS: dict = {"doc_id": "DELTA_BINARY_PACKED"}
# rows of scores given to cudf's writer at once (a row group): pieces are gathered up to this (each call
# costs ~10 ms; 100 M queries end to end on an H200: 295 M q/s at a piece a write, 338 at 1 M rows, 389 at
# 2 M, 357 at 4 M, where the last write no longer overlaps scoring)
DEVICE_ROWS_PER_WRITE = 1 << 21


class _ScoresWriter:
    """Writes one Parquet file of scores (a part of ``scores.parquet/``) piece by piece, in corpus order, in a
    background thread (one row group per added table, so writing overlaps scoring): the dense ``doc_id``, the
    source ids of line-numbered inputs filled with ``<label>:<row>`` (row within its file, across the file's
    pieces), and the totals.  ``doc0`` and ``rows0`` (``{file_index: rows}``) are the first ``doc_id`` and the
    rows of each file before the first added table (a worker's share that does not start the corpus), or
    come later from ``offsets`` (:class:`_Offsets`): the added tables wait in memory until they are known
    (asked at every add without waiting, and waited for at :meth:`close`), then go to the writer in order.

    ``device=True``: the added tables are cudf frames (:func:`_score_piece_device`); the source ids are
    made and the file written on the device (libcudf's chunked Parquet writer, the ids delta-coded:
    :data:`DEVICE_SCORE_ENCODINGS`); the same columns, rows and totals (the log10 sum is taken on the
    host, in numpy's order, as for host tables). Two
    threads: one makes each piece's frame, the other writes the frames gathered up to
    :data:`DEVICE_ROWS_PER_WRITE` rows as one row group.
    """

    def __init__(self, path, pieces, device: bool = False, doc0: int = 0, rows0: dict | None = None,
                 offsets=None):
        from concurrent.futures import ThreadPoolExecutor

        self.path = path
        self.pieces = pieces
        self.device = device
        self.pool = ThreadPoolExecutor(1)
        self.prep = ThreadPoolExecutor(1) if device else None
        self.pending: list = []  # device: frames being made, not yet given to the writer
        self.pending_rows = 0
        self.futures = []
        self.writer = None
        self.file = None  # the part file, its CRC32 taken as written (checksums.open_checksummed)
        self.checksum = None  # (bytes, crc32) once closed
        self.offsets = offsets
        self.doc0 = doc0 if offsets is None else None  # None: not known yet
        self.rows0: dict = dict(rows0 or {})
        self.waiting: list = []  # tables added before the offsets were known
        self.n_docs = 0  # rows added
        self.rows_seen: dict = {}  # rows added of each file
        self.totals = {"n_sentences": 0, "n_tokens": 0, "n_oov": 0}
        self.sum_log10 = 0.0
        self.log10_parts: list = []  # the log10 sum of each added table, in order
        self.empty = 0

    def add(self, i: int, table):
        """The scored rows of (a range of) piece ``i`` (a pyarrow table, or with ``device=True`` a cudf
        frame); called in corpus order."""
        piece = self.pieces[i]
        n = len(table)  # a pyarrow table or a cudf frame
        r = self.rows_seen.get(piece.file_index, 0)
        self.rows_seen[piece.file_index] = r + n
        d = self.n_docs
        self.n_docs += n
        if self.doc0 is None and self.offsets.ready():
            self._known(*self.offsets.get())
        if self.doc0 is None:
            self.waiting.append((piece, table, r, d))
        else:
            self._submit(piece, table, r, d)

    def _known(self, doc0: int, rows0: dict) -> None:
        """The share's offsets arrived: the tables that waited go to the writer, in order."""
        self.doc0, self.rows0 = doc0, dict(rows0)
        waiting, self.waiting = self.waiting, []
        for w in waiting:
            self._submit(*w)

    def _submit(self, piece, table, r: int, d: int) -> None:
        """Write a table whose first row is row ``r`` of its file and document ``d`` of this writer."""
        n = len(table)
        r0 = self.rows0.get(piece.file_index, 0) + r
        d0 = self.doc0 + d
        if self.device:  # two stages: the next frames are made while the last ones are written
            self.pending.append(self.prep.submit(self._frame_device, piece, table, r0, d0))
            self.pending_rows += n
            if self.pending_rows >= DEVICE_ROWS_PER_WRITE:
                self._flush()
        else:
            self.futures.append(self.pool.submit(self._write, piece, table, r0, d0))

    def _flush(self):
        """Write the frames made so far as one row group (cudf's writer costs ~10 ms a call)."""
        if self.pending:
            self.futures.append(self.pool.submit(self._write_device, self.pending))
            self.pending, self.pending_rows = [], 0

    def _write(self, piece, table, r0, d0):
        n = table.num_rows
        src = table["source_id"].combine_chunks()
        if piece.numbered and src.null_count:
            rows = pc.cast(pa.array(np.arange(r0, r0 + n, dtype=np.int64)), pa.large_string())
            if piece.labels[0]:
                rows = pc.binary_join_element_wise(pa.scalar(f"{piece.labels[0]}:", pa.large_string()), rows,
                                                   pa.scalar("", pa.large_string()))
            src = rows if src.null_count == n else pc.coalesce(src, rows)
        # string (32-bit offsets), the type cudf's writer gives the same column on the device
        cols = {"doc_id": pa.array(np.arange(d0, d0 + n, dtype=np.int64)), "source_id": src.cast(pa.string())}
        for name, _ in SCORE_COLUMNS:
            cols[name] = table[name]
        t = pa.table(cols)
        if self.writer is None:
            self.file = open_checksummed(self.path)
            self.writer = pq.ParquetWriter(self.file, t.schema, use_dictionary=False,
                                           column_encoding=dict(HOST_SCORE_ENCODINGS) or None)
        self.writer.write_table(t)
        for k, c in (("n_sentences", "sentences"), ("n_tokens", "tokens"), ("n_oov", "oov")):
            self.totals[k] += int(pc.sum(t[c]).as_py() or 0)
        self.log10_parts.append(float(np.sum(t["log10_prob"].to_numpy())))
        self.sum_log10 += self.log10_parts[-1]
        self.empty += int(pc.sum(pc.equal(t["tokens"], 0)).as_py() or 0)

    def _frame_device(self, piece, df, r0, d0):
        """The device frame of a piece as written (``doc_id``, ``source_id`` filled, the scores) and its
        totals (prepared in a thread of its own, while the previous frame is written)."""
        import cudf
        import cupy

        clock = StepClock(np)  # $CUTEXT_GPUTEXT_PROFILE=1: the writer's parts (host clocks, the thread's own)
        n = len(df)
        src = df["source_id"] if "source_id" in df.columns else None
        if piece.numbered and (src is None or src.null_count):
            rows = cudf.Series(cupy.arange(r0, r0 + n, dtype=np.int64)).astype(str)
            if piece.labels[0]:
                rows = rows.str.insert(0, f"{piece.labels[0]}:")
            src = rows if src is None or src.null_count == n else src.fillna(rows)
        elif src is None:
            src = to_cudf(pa.nulls(n, pa.string()))
        t = cudf.DataFrame({"doc_id": cupy.arange(d0, d0 + n, dtype=np.int64)})
        t["source_id"] = src.reset_index(drop=True)
        for name, _ in SCORE_COLUMNS:
            t[name] = df[name].reset_index(drop=True)
        sums = cupy.stack([t[c].values.sum() for c in ("sentences", "tokens", "oov")]
                          + [(t["tokens"].values == 0).sum()]).get()
        log10 = t["log10_prob"].values.get()
        clock("ngram write: frame (device)")
        return t, [int(x) for x in sums], log10

    def _write_device(self, made):
        import cudf

        parts = [m.result() for m in made]
        clock = StepClock(np)
        t = parts[0][0] if len(parts) == 1 else cudf.concat([p[0] for p in parts], ignore_index=True)
        if self.writer is None:
            # through a file object: cudf writing the path itself bypasses the page cache (the disk's speed,
            # shared by the workers of a host), and the seal then read the file back from the disk
            self.file = open_checksummed(self.path)
            if DEVICE_SCORE_ENCODINGS is None:
                from cudf.io.parquet import ParquetWriter

                self.writer = ParquetWriter(self.file, index=False, **DEVICE_WRITER_OPTIONS)
            else:
                self.writer = _EncodedParquetWriter(self.file, list(t.columns), DEVICE_SCORE_ENCODINGS,
                                                    **DEVICE_WRITER_OPTIONS)
        self.writer.write_table(t)
        clock("ngram write: encode + write (device)")
        for _, (n_sent, n_tok, n_oov, empty), log10 in parts:
            self.totals["n_sentences"] += n_sent
            self.totals["n_tokens"] += n_tok
            self.totals["n_oov"] += n_oov
            self.log10_parts.append(float(np.sum(log10)))  # piece by piece, numpy's sum: as for host tables
            self.sum_log10 += self.log10_parts[-1]
            self.empty += empty

    def close(self):
        """Wait for every write (raising the first error) and close the file."""
        try:
            if self.doc0 is None:
                self._known(*self.offsets.get())
            if self.device:
                self._flush()
            for f in self.futures:
                f.result()
        finally:
            self._shutdown()

    def abort(self):
        for f in self.futures + (self.pending if self.device else []):
            f.cancel()
        self._shutdown()

    def _shutdown(self):
        self.pool.shutdown(wait=True)
        if self.prep is not None:
            self.prep.shutdown(wait=True)
        try:
            if self.writer is not None:
                self.writer.close()
                self.checksum = self.file.checksum
        finally:
            if self.file is not None:
                self.file.close()


# ----------------------------------------------------------------------------- command line


def _cli_main(args, kw) -> int:
    """``ngram PATH... --model ARPA``: score the corpus into Parquet; path ``-``: standard input line by line."""
    if kw["path"] == "-":
        return _score_stdin(kw, args.batch_lines)
    r = score_corpus(kw.pop("path"), kw.pop("out"), **kw)
    print_result(r, args.json)
    return 0


# the subcommand of this module; its options are the keywords of score_corpus()
COMMANDS = (
    Command("ngram", score_corpus, _cli_main, help="score text with an ARPA n-gram language model", json=True,
            description="Score a corpus with an ARPA model into Parquet (per-document log10 probability, tokens, "
                        "perplexity), or, with path '-', score standard input line by line and print "
                        "'log10_prob<TAB>tokens<TAB>oov<TAB>perplexity' per line. The options are the keywords of "
                        "cutext.pipelines.ngram.score_corpus.",
            positional={"path": dict(nargs="+", metavar="PATH",
                                     help="corpus (files, directory, glob), or '-' for standard input")},
            extra=((("--batch-lines",), dict(type=int, default=10000, help="stdin lines scored per batch")),)),
)


def add_cli(sub) -> None:
    """Register ``ngram``: score a corpus into Parquet, or standard input line by line (path ``-``)."""
    for command in COMMANDS:
        command.add_to(sub)
