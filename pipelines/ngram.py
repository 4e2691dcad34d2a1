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

    scores.parquet   doc_id: int64, source_id: string, sentences: int32, tokens: int64, oov: int64,
                     log10_prob: float64, perplexity: float64
    ngram.json       model, order, counts, memory, corpus totals and perplexity, backend, timings

Tokens are the white-space separated words of the text (ASCII white space, as KenLM's Python module
splits), without lowercasing. Words are matched byte for byte, as KenLM matches them: a ``str``
sentence is encoded with the model's ``encoding`` (UTF-8 by default, what KenLM's module does with a
``str``), a ``bytes`` sentence is taken as it is. With ``sentence="line"`` (default) every non-blank line of a document is
a sentence (``<s>`` ... ``</s>``) and the document's log10 probability is the sum over its lines;
with ``sentence="document"`` the whole document is one sentence. ``tokens`` counts the scored tokens
(words plus one ``</s>`` per sentence when ``eos``), the denominator of the perplexity
``10 ** (-log10_prob / tokens)``, as KenLM's ``perplexity``.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from cutext.kernels.backend import (gpu_stack_installed, to_cudf, to_host)
from cutext.pipelines._result import RunResult, default_out
from cutext.pipelines._run import PipelineRun
from cutext.stages.readers.frames import input_label, is_frame
from cutext.stages.readers.base import DEFAULT_MAX_RATIO, CorpusError
from cutext.stages.readers.files import add_max_ratio_option
from cutext.stages.readers.files import read_piece, plan
from cutext.stages.readers.source import open_corpus
from cutext.stages.text.ngram_text import read_lines_buffers, TextBuffers
from cutext.stages.engines.ngram_model import SCORE_COLUMNS, NGramModel


def _read_texts(piece, fs):
    """One piece of the corpus as ``(source_id, text)`` host arrays (the reader of :mod:`cutext.stages.readers.files`)."""

    df = read_piece(piece, fs)
    src = pa.array(df["source_id"], pa.large_string(), from_pandas=True)
    texts = pa.array(df["text"], pa.large_string(), from_pandas=True).fill_null("")
    return pa.table({"source_id": src, "text": texts})


def _frame_texts(df):
    """A partition of a frame corpus (``source_id``, ``text``; pandas or cudf) as the host table of
    :func:`_read_texts`."""
    df = to_host(df)
    src = pa.array(df["source_id"], pa.large_string(), from_pandas=True)
    texts = pa.array(df["text"], pa.large_string(), from_pandas=True).fill_null("")
    return pa.table({"source_id": src, "text": texts})


def _read_for(lm, piece, fs):
    """A piece read for ``lm``: on a GPU model, a lines piece goes straight to device buffers
    (:func:`cutext.stages.text.ngram_text.read_lines_buffers`), anything else through the reader."""
    if lm.backend == "gpu":
        buf = read_lines_buffers(piece, fs, device=True)
        if buf is not None:
            return buf
    return _read_texts(piece, fs)


def _n_rows(texts) -> int:
    return texts.num_rows if isinstance(texts, pa.Table) else len(texts)


def _score_slice(lm, table, a: int, b: int, sentence: str, bos: bool, eos: bool):
    """Score documents ``a:b`` of a piece (a task on a worker): a host table of the per-document
    columns, and the address of the worker that scored it ("local" outside a worker)."""
    if not isinstance(table, pa.Table):  # TextBuffers of a lines piece: numbered source ids

        if (a, b) != (0, len(table)):
            table = TextBuffers(table.chars, table.offsets[a:b + 1])
        cols = lm.score_documents(table, sentence, bos, eos)
        out = {"source_id": pa.nulls(b - a, pa.large_string())}
    else:
        part = table.slice(a, b - a)
        cols = lm.score_documents(part["text"].combine_chunks(), sentence, bos, eos)
        out = {"source_id": part["source_id"].combine_chunks()}
    for name, dtype in SCORE_COLUMNS:
        out[name] = pa.array(to_host(cols[name]).astype(dtype))
    try:
        from distributed import get_worker

        where = get_worker().address
    except (ImportError, ValueError):
        where = "local"
    return pa.table(out), where


def _score_piece_device(lm, texts, sentence: str, bos: bool, eos: bool):
    """Score a whole piece on a GPU model and keep the per-document columns on the device: a cudf
    frame of :data:`SCORE_COLUMNS` (and ``source_id`` when the piece was read as a host table), for
    :class:`_ScoresWriter` with ``device=True``."""
    import cudf
    import cupy

    if isinstance(texts, pa.Table):
        cols = lm.score_documents(texts["text"].combine_chunks(), sentence, bos, eos)
        src = {"source_id": cudf.Series.from_arrow(texts["source_id"].combine_chunks())}
    else:
        cols = lm.score_documents(texts, sentence, bos, eos)
        src = {}
    # nan_as_null=False: a NaN perplexity stays NaN (a null would also give the column a mask, and
    # cudf's writer then records a nullable pandas dtype, Float64, in the file's metadata)
    out = {name: cudf.Series(cupy.asarray(cols[name]).astype(dtype, copy=False), nan_as_null=False)
           for name, dtype in SCORE_COLUMNS}
    return cudf.DataFrame({**src, **out})


def _split_bounds(n_rows: int, parts: int) -> list:
    """``parts`` (at most ``n_rows``, at least 1) contiguous row ranges covering ``n_rows`` rows."""
    parts = max(1, min(parts, n_rows))
    cuts = [n_rows * k // parts for k in range(parts + 1)]
    return list(zip(cuts[:-1], cuts[1:]))


def _score_on_client(client, lm, pieces, read_remote, sentence, bos, eos, bar):
    """Score the pieces on the Client's workers: every piece is read on a worker (a lines piece of a GPU
    model straight to that worker's device), and split into row ranges when there are fewer pieces than
    workers (a single compressed file), so that every worker scores.

    Returns the per-piece row counts and the scored slices ``(piece index, table)`` in corpus order,
    and the addresses of the workers that scored.
    """
    from distributed import as_completed

    workers = sorted(client.scheduler_info().get("workers", {}))
    if not workers:
        raise RuntimeError("the dask Client has no workers")
    W = len(workers)
    reads = [read_remote(client, i, workers[i % W]) for i in range(len(pieces))]
    n_rows = client.gather(client.map(_n_rows, reads, pure=False))
    per_piece = -(-W // len(pieces)) if len(pieces) < W else 1
    tasks = []
    for i, (f, n) in enumerate(zip(reads, n_rows)):
        for a, b in _split_bounds(n, per_piece):
            tasks.append((i, f, a, b))
    futs = [client.submit(_score_slice, lm, f, a, b, sentence, bos, eos, workers=[workers[k % W]],
                          allow_other_workers=True, pure=False) for k, (i, f, a, b) in enumerate(tasks)]
    if bar is not None:
        bar.reset(total=len(futs))
        for _ in as_completed(futs):
            bar.update(1)
    results = client.gather(futs)
    del reads
    slices = [(i, t) for (i, _, _, _), (t, _) in zip(tasks, results)]
    return list(n_rows), slices, sorted({w for _, w in results})


def score_corpus(path, out, *, model, backend: str = "auto", sentence: str = "line", bos: bool = True,
                 eos: bool = True, format="auto", text_column=None, id_column=None, blocksize=64 << 20,
                 encoding="utf-8", storage_options=None, glob=None, max_ratio=DEFAULT_MAX_RATIO,
                 overwrite: bool = True, progress: bool = True, client=None, scheduler="auto", n_workers=None) -> RunResult:
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
        every pipeline: ``"<name>-out"`` in the working directory).
    model : str, os.PathLike or NGramModel
        An ARPA file or a loaded model (whose backend is then used).
    backend : {"auto", "cpu", "gpu"}
        Where the trie is queried when ``model`` is a path. On the GPU the text of every piece goes to
        the device once, and sentences, words, word ids, scores and per-document sums are computed there
        (:meth:`NGramModel.score_documents`); reading stays on the host.
    sentence : {"line", "document"}
        ``"line"``: every non-blank line of a document is a sentence; ``"document"``: one sentence.
    bos, eos : bool
        KenLM's sentence boundaries.
    format, text_column, id_column, blocksize, encoding, storage_options, glob, max_ratio
        Reader settings (:func:`cutext.stages.readers.source.read_corpus`).
    overwrite : bool
    progress : bool
        Show pieces scored / total: a bar when standard error is a terminal, else a plain line
        every 10 s and one at the end.
    client : distributed.Client, optional
        Score on the Client's workers: each piece is read and scored on a worker (the model travels as a
        reference to its ARPA file and is loaded once per worker process, on the worker's GPU for a GPU
        model: one GPU per worker on a ``LocalCUDACluster``); when there are fewer pieces than workers
        (e.g. one compressed file) the pieces are split into row ranges so that every worker scores.
        The per-document rows come back to this process, which writes the output. Scores are identical
        to a run in one process.
    scheduler : {"auto", "sync", "threads", "cluster"}
        Without ``client``: ``"cluster"`` starts a local cluster (:func:`cutext.stages.runtime.compute.compute_context`;
        ``n_workers`` workers) and scores there as with ``client``; the others (``"auto"`` whatever the
        input size) score the pieces one after another in this process (the numba kernels use every core).
    n_workers : int, optional
        Workers of the local cluster (``scheduler="cluster"``).

    Returns
    -------
    RunResult
        ``counts``: n_docs, n_sentences, n_tokens, n_oov, empty_docs, partitions (pieces read),
        tasks (row ranges scored), workers (distinct workers that scored); ``params`` records the model.

    Raises
    ------
    FileNotFoundError
    CorpusError
        Unreadable input or an empty corpus (message names the file).
    ArpaError
        Malformed model (message names the file and line).
    OutputDirectoryError (FileExistsError)
        ``out`` is not a new or empty directory nor an earlier ngram output, or is the working
        directory, an input or a parent of one (:mod:`cutext.stages.runtime.output`); checked before any work.
    """
    run = PipelineRun("ngram", out, manifest="ngram.json", inputs=[path, model], overwrite=overwrite,
                      progress=progress)

    if sentence not in ("line", "document"):
        raise ValueError(f"sentence must be 'line' or 'document', got {sentence!r}")
    if n_workers is not None and client is not None:
        raise ValueError("pass client= or n_workers=, not both (n_workers sizes a local cluster)")
    lm = run.stage("load_model", _load_model, model, backend)
    pieces, fmt, check, read_local, read_remote = _corpus_readers(
        lm, path, format=format, text_column=text_column, id_column=id_column, blocksize=blocksize,
        encoding=encoding, storage_options=storage_options, glob=glob, max_ratio=max_ratio)
    # a bar on a terminal, else a plain line every 10 s and one at the end
    bar = run.bar(len(pieces), "ngram score", "partitions")
    try:
        # nbytes=0: "auto" scores in this process whatever the input size (a piece at a time, streaming)
        with run.compute(lm.backend, client=client, scheduler=scheduler, nbytes=0, n_workers=n_workers) as info, \
                run.output() as tmp:
            sink, n_tasks, workers_used, written = _score(run, tmp, lm, pieces, read_local, read_remote, info,
                                                          sentence, bos, eos, bar)
            n_docs = sink.n_docs
            if n_docs == 0:
                raise CorpusError(f"{input_label(path)}: the corpus holds no document")
            if check is not None:  # a frame's id column: unique ids
                check(pq.read_table(tmp / "scores.parquet", columns=["source_id"]))
            tot, sum_log10, empty = sink.totals, sink.sum_log10, sink.empty
            ppl_all = 10.0 ** (-sum_log10 / tot["n_tokens"]) if tot["n_tokens"] else float("nan")
            written()  # what was left of the write (it overlaps scoring)
            counts = {"n_docs": n_docs, **tot, "empty_docs": empty, "partitions": len(pieces),
                      "tasks": n_tasks, "workers": len(workers_used)}
            run.write_manifest(tmp, {
                "source": input_label(path), "format": fmt,
                "model": lm.summary(), "sentence": sentence, "bos": bos, "eos": eos,
                "log10_prob": sum_log10, "perplexity": ppl_all, "counts": counts, "timings": run.timings,
                "backend": lm.backend, "scheduler": info.scheduler, "n_workers": info.n_workers})
    finally:
        if bar is not None:
            bar.close()
    params = {"model": str(lm.path), "order": lm.order, "sentence": sentence, "bos": bos, "eos": eos,
              "format": fmt, "perplexity": ppl_all, "log10_prob": sum_log10}
    return run.result(lm.backend, info.scheduler, info.n_workers, counts, params,
                      headline={"perplexity": ppl_all})  # 10 ** (-sum log10 p / tokens) over the corpus


def _load_model(model, backend: str) -> NGramModel:
    """``model`` itself when it is a loaded :class:`NGramModel`, else the ARPA file it names, loaded."""
    if isinstance(model, NGramModel):
        return model
    return NGramModel.load(model, backend=backend)


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
    read_local : callable
        ``read_local(i)``: piece ``i`` as a host table (or, for a GPU model, device text buffers).
    read_remote : callable
        ``read_remote(client, i, worker)``: a future of the same, read on ``worker``.
    """
    check = None
    if is_frame(path):  # a frame: its partitions, one at a time (cutext.stages.readers.frames)
        import dask

        src = open_corpus(path, backend="cpu", **read_kw)
        pieces, fmt, check = src.pieces, src.format, src.check_documents
        parts = src.docs.to_delayed()

        def read_local(i):
            return _frame_texts(parts[i].compute())

        def read_remote(client, i, worker):
            return client.compute(dask.delayed(_frame_texts)(parts[i]), workers=[worker], allow_other_workers=True)
    else:
        fs, pieces, fmt = plan(path, **read_kw)

        def read_local(i):
            return _read_for(lm, pieces[i], fs)

        def read_remote(client, i, worker):
            return client.submit(_read_for, lm, pieces[i], fs, workers=[worker], allow_other_workers=True,
                                 pure=False)
    return pieces, fmt, check, read_local, read_remote


def _score(run: PipelineRun, tmp: Path, lm: NGramModel, pieces, read_local, read_remote, info, sentence: str,
           bos: bool, eos: bool, bar):
    """Score every piece into ``tmp / "scores.parquet"``, on the client's workers or piece by piece here.

    Its seconds go to ``timings["read+score"]`` (client) or ``timings["read"]`` and ``timings["score"]``.

    Returns
    -------
    sink : _ScoresWriter
        Closed: its rows written, its totals complete.
    n_tasks : int
        Row ranges scored.
    workers_used : list of str
        Addresses of the workers that scored (``["local"]`` in this process).
    written : callable
        Records ``timings["write"]``: the seconds since the last scores were handed to the writer.
    """
    ta = time.perf_counter()
    # one GPU in this process: the scores stay on the device and cudf's Parquet writer writes
    # them (pyarrow's writer took 75 ms a 574 k-row piece, 4x the scoring)
    on_device = lm.backend == "gpu" and info.client is None and gpu_stack_installed()
    sink = _ScoresWriter(tmp / "scores.parquet", pieces, device=on_device)
    workers_used = ["local"]
    try:
        if info.client is not None:
            n_rows, slices, workers_used = _score_on_client(info.client, lm, pieces, read_remote, sentence,
                                                            bos, eos, bar)
            for i, t in slices:
                sink.add(i, t)
            n_tasks = len(slices)
            run.timings["read+score"] = time.perf_counter() - ta
        else:
            t_read = _score_here(lm, pieces, read_local, sink, on_device, sentence, bos, eos, bar)
            n_tasks = len(pieces)
            # "read": waiting for reads (they overlap scoring); "score": the rest, but the write
            run.timings.update({"read": t_read, "score": time.perf_counter() - ta - t_read})
        written = run.start("write")
        sink.close()
    except BaseException:
        sink.abort()
        raise
    return sink, n_tasks, workers_used, written


def _score_here(lm: NGramModel, pieces, read_local, sink, on_device: bool, sentence: str, bos: bool, eos: bool,
                bar) -> float:
    """Score the pieces one after the other in this process, each handed to ``sink``; returns the
    seconds spent waiting for reads (the next piece is read while this one is scored)."""
    from concurrent.futures import ThreadPoolExecutor

    t_read = 0.0
    with ThreadPoolExecutor(1) as pool:  # the next piece is read while this one is scored
        nxt = pool.submit(read_local, 0) if pieces else None
        for i in range(len(pieces)):
            tr = time.perf_counter()
            texts = nxt.result()
            t_read += time.perf_counter() - tr
            nxt = pool.submit(read_local, i + 1) if i + 1 < len(pieces) else None
            n = _n_rows(texts)
            sink.add(i, _score_piece_device(lm, texts, sentence, bos, eos) if on_device
                     else _score_slice(lm, texts, 0, n, sentence, bos, eos)[0])
            del texts
            if bar is not None:
                bar.update(1)
    return t_read


# options of cudf's chunked Parquet writer for scores.parquet on the device (benchmarks/micro/ngram_write.py
# measured no compression: 1.5x faster at 1 row group a piece, 2.5x the bytes; snappy kept)
DEVICE_WRITER_OPTIONS: dict = {}
# rows of scores given to cudf's writer at once (a row group): pieces are gathered up to this (each call
# costs ~10 ms; 100 M queries end to end on an H200: 295 M q/s at a piece a write, 338 at 1 M rows, 389 at
# 2 M, 357 at 4 M, where the last write no longer overlaps scoring)
DEVICE_ROWS_PER_WRITE = 1 << 21


class _ScoresWriter:
    """Writes ``scores.parquet`` piece by piece, in corpus order, in a background thread (one row group per
    added table, so writing overlaps scoring): the dense ``doc_id``, the source ids of line-numbered
    inputs filled with ``<label>:<row>`` (row within its file, across the file's pieces), and the totals.

    ``device=True``: the added tables are cudf frames (:func:`_score_piece_device`); the source ids are
    made and the file written on the device (cudf's chunked Parquet writer); the same columns, rows
    and totals (the log10 sum is taken on the host, in numpy's order, as for host tables). Two
    threads: one makes each piece's frame, the other writes the frames gathered up to
    :data:`DEVICE_ROWS_PER_WRITE` rows as one row group.
    """

    def __init__(self, path, pieces, device: bool = False):
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
        self.n_docs = 0
        self.rows_seen: dict = {}
        self.totals = {"n_sentences": 0, "n_tokens": 0, "n_oov": 0}
        self.sum_log10 = 0.0
        self.empty = 0

    def add(self, i: int, table):
        """The scored rows of (a range of) piece ``i`` (a pyarrow table, or with ``device=True`` a cudf
        frame); called in corpus order."""
        piece = self.pieces[i]
        n = len(table)  # a pyarrow table or a cudf frame
        r0 = self.rows_seen.get(piece.file_index, 0)
        self.rows_seen[piece.file_index] = r0 + n
        d0 = self.n_docs
        self.n_docs += n
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
            self.writer = pq.ParquetWriter(self.path, t.schema, use_dictionary=False)
        self.writer.write_table(t)
        for k, c in (("n_sentences", "sentences"), ("n_tokens", "tokens"), ("n_oov", "oov")):
            self.totals[k] += int(pc.sum(t[c]).as_py() or 0)
        self.sum_log10 += float(np.sum(t["log10_prob"].to_numpy()))
        self.empty += int(pc.sum(pc.equal(t["tokens"], 0)).as_py() or 0)

    def _frame_device(self, piece, df, r0, d0):
        """The device frame of a piece as written (``doc_id``, ``source_id`` filled, the scores) and its
        totals (prepared in a thread of its own, while the previous frame is written)."""
        import cudf
        import cupy

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
        return t, [int(x) for x in sums], t["log10_prob"].values.get()

    def _write_device(self, made):
        import cudf

        parts = [m.result() for m in made]
        t = parts[0][0] if len(parts) == 1 else cudf.concat([p[0] for p in parts], ignore_index=True)
        if self.writer is None:
            from cudf.io.parquet import ParquetWriter

            self.writer = ParquetWriter(str(self.path), index=False, **DEVICE_WRITER_OPTIONS)
        self.writer.write_table(t)
        for _, (n_sent, n_tok, n_oov, empty), log10 in parts:
            self.totals["n_sentences"] += n_sent
            self.totals["n_tokens"] += n_tok
            self.totals["n_oov"] += n_oov
            self.sum_log10 += float(np.sum(log10))  # piece by piece, numpy's sum: as for host tables
            self.empty += empty

    def close(self):
        """Wait for every write (raising the first error) and close the file."""
        try:
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
        if self.writer is not None:
            self.writer.close()


# ----------------------------------------------------------------------------- command line

def add_cli(sub):
    """Register ``ngram``: score a corpus into Parquet, or standard input line by line (path ``-``)."""
    p = sub.add_parser("ngram", help="score text with an ARPA n-gram language model",
                       description="Score a corpus with an ARPA model into Parquet (per-document log10 "
                                   "probability, tokens, perplexity), or, with path '-', score standard "
                                   "input line by line and print 'log10_prob<TAB>tokens<TAB>oov<TAB>"
                                   "perplexity' per line.")
    p.add_argument("path", nargs="+", help="corpus (files, directory, glob), or '-' for standard input")
    p.add_argument("--model", required=True, help="ARPA file (plain, .gz, .bz2, .xz)")
    p.add_argument("--out", default=None, help="output directory (default: ngram-out; not used with path '-')")
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", "gpu"])
    p.add_argument("--sentence", default="line", choices=["line", "document"],
                   help="sentence unit inside a document (default: every non-blank line)")
    p.add_argument("--no-bos", action="store_true", help="do not start sentences in the <s> context")
    p.add_argument("--no-eos", action="store_true", help="do not score </s>")
    p.add_argument("--format", default="auto", choices=["auto", "files", "lines", "jsonl", "parquet", "csv"])
    p.add_argument("--text-column", default=None)
    p.add_argument("--id-column", default=None)
    p.add_argument("--glob", default="auto", choices=["auto", "on", "off"],
                   help="paths as glob patterns: auto (default: a path that exists is itself, else *?[ are "
                        "patterns), on (always), off (never)")
    add_max_ratio_option(p)
    p.add_argument("--batch-lines", type=int, default=10000, help="stdin lines scored per batch")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(cli_main=_cli_main)


def _cli_main(args) -> int:
    bos, eos = not args.no_bos, not args.no_eos
    if args.path == ["-"]:
        lm = NGramModel.load(args.model, backend=args.backend)
        out = sys.stdout
        total_lp, total_tok = 0.0, 0

        def flush(lines):
            nonlocal total_lp, total_tok
            sc = lm.score(lines, bos=bos, eos=eos)
            oov = sc.oov_counts()
            for lp, nt, no in zip(sc.log10_prob, sc.tokens, oov):
                ppl = 10.0 ** (-lp / nt) if nt else float("nan")
                out.write(f"{lp:.6f}\t{int(nt)}\t{int(no)}\t{ppl:.4f}\n")
            total_lp += float(sc.log10_prob.sum())
            total_tok += int(sc.tokens.sum())

        batch = []
        for line in sys.stdin:
            batch.append(line.rstrip("\n"))
            if len(batch) >= args.batch_lines:
                flush(batch)
                out.flush()
                batch = []
        if batch:
            flush(batch)
        ppl = 10.0 ** (-total_lp / total_tok) if total_tok else float("nan")
        print(f"total log10_prob={total_lp:.6f} tokens={total_tok} perplexity={ppl:.4f}", file=sys.stderr)
        return 0
    path = args.path[0] if len(args.path) == 1 else args.path
    r = score_corpus(path, args.out or default_out("ngram"), model=args.model, backend=args.backend, sentence=args.sentence, bos=bos,
                     eos=eos, format=args.format, text_column=args.text_column, id_column=args.id_column,
                     glob={"auto": None, "on": True, "off": False}[args.glob], max_ratio=args.max_ratio,
                     progress=not args.no_progress)
    print(json.dumps(r.to_dict(), indent=2, default=str) if args.json else str(r))
    return 0
