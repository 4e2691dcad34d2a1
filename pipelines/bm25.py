"""The ``bm25`` pipeline: build a term-major BM25 index, load it, search it.

Index directory layout of the default, segmented index (``index_format=2``; every file Parquet or JSON but
``terms.arrow``)::

    index.json           index_format 2, segments (names in document order), next_segment, N, avgdl,
                         variant, k1, b, delta, tokenizer, backend, version, counts, timings;
                         bm25f (fields, weights, b) with field_weights= / field_b=
    terms.arrow          the commit's global vocabulary (Arrow IPC file: term large_string, ascending by
                         UTF-8 bytes; df int64, the live df over every segment), which lets an append count
                         only its new segments (:mod:`cutext.stages.engines.index_commits`); absent from
                         indexes of earlier versions and from a Client build until its first commit
    segments/seg-NNNNN/  one segment a read partition: terms, postings (doc, tf), docs (source_id,
                         length), text (with store_text=True), columns (with keep_columns=), segment.json
                         (:mod:`cutext.stages.engines.segments`); weighted at load; with BM25F fields the
                         postings and docs carry a tf and a length column a field (segment format 2)

Format 1 (``index_format=1``), one global vocabulary with weighted postings::

    index.json           N, avgdl, variant, k1, b, delta, tokenizer, backend, version, counts, timings
    vocab.parquet        term_id: int32, term: string, df: int64, idf: float64, w0: float32
    documents/*.parquet  doc_id: int64, source_id: string, length: int32, replaced: int32
    postings/*.parquet   term_id: int32, doc_id: int64, tf: int32, weight: float32
                         (files in name order are globally sorted by (term_id, doc_id))

Term id 0 is reserved for unknown terms and has no row in ``vocab.parquet``.
"""
from __future__ import annotations

import functools
import os
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from cutext.pipelines._bm25_args import (  # noqa: F401 (moved names stay importable from here)
    _BUILD_DEFAULTS,
    _TOKENIZER_DEFAULTS,
    _check_append_settings,
    _field_spec,
    _keep_columns_arg,
    _no_kept_columns_in_place,
    _tokenizer_kw,
)
from cutext.pipelines._bm25_workers import (  # noqa: F401 (moved names stay importable from here)
    _build_parts_on_workers,
    _df_to_send,
    _piece_bytes,
    _rows_of,
    _shares,
    _summed_counts,
    _worker_units,
    _WorkerStages,
    tokenize_partition_segment,
)
from cutext.pipelines._bm25_write import (  # noqa: F401 (moved names stay importable from here)
    DOCUMENTS_PER_FILE,
    GPU_COMPRESSION,
    GPU_DOCUMENTS_ENCODING,
    GPU_POSTINGS_ENCODING,
    GPU_WRITE_WORKERS,
    ID_FORMATS,
    _add_positions,
    _dedupe,
    _documents,
    _documents_partition,
    _drop_dl,
    _IndexInput,
    _parts_tasks,
    _postings,
    _spilled_range,
    _term_major_spilled,
    _weights,
    _write_files_cpu,
    _write_files_gpu,
    _write_index,
    _write_segments,
    _write_vocabulary,
)
from cutext.pipelines._cli import Command, print_result
from cutext.pipelines._result import RunResult, default_out, param_files
from cutext.pipelines._run import PipelineRun
from cutext.pipelines.trec import anserini_scores, read_queries, write_trec_run
from cutext.stages.engines import index_commits as commit_stage
from cutext.stages.engines.bm25_index import BM25Index, bm25f_spec
from cutext.stages.engines.index_commits import SEGMENTS_DIR, segmented_commit
from cutext.stages.engines.index_ids import check_on_duplicate
from cutext.stages.engines.merge_policy import check_merge_policy, merge_on_commit
from cutext.stages.engines.segments import field_segment, segment_heads, write_segment
from cutext.stages.readers.base import DEFAULT_BLOCKSIZE, DEFAULT_MAX_RATIO, CorpusError
from cutext.stages.readers.frames import input_label
from cutext.stages.readers.source import kept_columns, open_corpus, source_of_pieces
from cutext.stages.runtime.compute import compute_context, gpu_spill_budget, host_share, share_threads
from cutext.stages.runtime.output import check_output_file, local_output
from cutext.stages.runtime.params import choice, flag, param
from cutext.stages.runtime.progress import gather as progress_gather
from cutext.stages.runtime.progress import is_terminal
from cutext.stages.text import bm25 as bm25_stage
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
INDEX_FORMATS = (1, 2)
# the corpus front end's stage names -> this index's timing names
_TIMING_NAMES = {"count": "sort+count"}


def build_index(path, out, *, variant="lucene", k1=1.2, b=0.75, delta=None,
                lowercase=True, stopwords=None, stemmer=None, min_len=1, max_len=None,
                format="auto", text_column=None, id_column=None, blocksize=None,
                encoding="utf-8", storage_options=None, glob=None, max_ratio=DEFAULT_MAX_RATIO, backend="auto",
                client=None, scheduler="auto", n_workers=None, index_format=2, overwrite=True,
                progress=True, append=False, members=None, store_text=False, field_weights=None,
                field_b=None, keep_columns=None, positions=False, norms="exact", analyzer=None,
                on_duplicate="error", merge_policy="tiered") -> RunResult:
    """Index a corpus for BM25 (Wakatsuki et al., section 3: extract, ids by scan, sort, count, weight).

    Parameters
    ----------
    path : str, os.PathLike, list, or a frame
        Corpus (see :func:`cutext.stages.readers.source.read_corpus` for the formats), or a pandas / cudf /
        dask / dask-cudf DataFrame or Series (``text_column=``, ``id_column=``;
        :mod:`cutext.stages.readers.frames`).
    out : str or os.PathLike
        Index directory to write; written under a temporary name and renamed when complete.
        ``pipelines.run("bm25", path)`` and the CLI default to ``"bm25-out"`` (one rule for
        every pipeline: ``"<name>-out"`` in the working directory).  A local path or a ``file://``
        URL of one; a URL of another file system (``s3://``, ``memory://``...) is refused before any
        work, since the commit is a rename of a directory (write to a mounted file system, then copy).
        With ``client=`` the workers write their segments (and spill files) into it themselves: it
        must be a path every worker sees, on a cluster of several hosts a shared file system (NFS,
        Lustre...); each worker is checked before the run reads anything.
    variant : {"lucene", "robertson", "atire", "bm25l", "bm25+"}
    k1, b : float
        BM25 parameters.
    delta : float, optional
        The lower bound added to the tf part by bm25l (default 0.5) and bm25+ (default 1.0); refused with
        the other variants, whose formulas have no delta.
    lowercase, stopwords, stemmer, min_len, max_len
        Tokenizer settings (:class:`cutext.stages.text.tokenize.TokenizerConfig`).
    norms : {"exact", "lucene"}
        Document lengths in the weights: as counted (``"exact"``), or as Lucene stores them, one byte each
        (``SmallFloat.intToByte4``), with Lucene 9's float32 arithmetic (``"lucene"``, variant lucene only:
        Anserini's scores; :func:`cutext.stages.text.bm25.lucene_length`).  Recorded in index.json; appends
        keep the index's.
    analyzer : {"anserini"}, optional
        ``"anserini"``: Anserini's DefaultEnglishAnalyzer (Lucene's StandardTokenizer, possessive filter,
        lowercase, Lucene's 33 stopwords, Lucene's Porter stemmer) for the documents and the queries; it fixes
        the tokenizer settings (leave them out).  CPU backend only.
    format, text_column, id_column, blocksize, encoding, storage_options, glob
        Reader settings (:func:`cutext.stages.readers.source.read_corpus`; ``glob=None``: a path that
        exists is read as itself, else ``*?[`` make it a pattern).  ``blocksize=None``: 64 MiB
        partitions on the CPU, 128 MiB on the GPU (``GPU_BLOCKSIZE``; 64 MiB when the device is
        too small to hold the run and the partitions' results are spilled to files).
    max_ratio : float or None, default 100
        Refuse a compressed file or archive member that expands more than this many times its
        compressed bytes (a zip or gz bomb; :data:`cutext.stages.readers.base.DEFAULT_MAX_RATIO`); None: no limit.
    members : str or list of str, optional
        Archive inputs: only the members whose path matches one of these fnmatch globs are documents
        (``"*/*.txt"`` leaves a top-level README out; :func:`cutext.stages.readers.source.read_corpus`).
    backend : {"auto", "cpu", "gpu"}
    client : distributed.Client, optional
        Run on this cluster.  A segmented index of files with at least one file (or unnumbered piece) per
        worker is built by the workers independently: each builds the segments of a contiguous share of
        the input (about equal bytes) as a one-GPU build would, and nothing moves between workers; frames
        and fewer files than workers take the stages' path (partitions spread over the workers).
    scheduler : {"auto", "sync", "threads", "cluster"}
        Without ``client``: ``"auto"`` builds in this process on the GPU whatever the input size, and on
        the CPU on threads under 256 MiB of input, else on a ``LocalCluster``; ``"cluster"`` starts a
        local cluster (``LocalCUDACluster`` on the GPU) (:func:`cutext.stages.runtime.compute.compute_context`).
    n_workers : int, optional
        The workers that build (default: one per GPU / core this process may use).  On the CPU under 256 MiB
        of input (``scheduler="auto"``) and with ``"threads"``: threads of this process (dask's pool and
        pyarrow's; no process is started); with ``"cluster"``, on the GPU and above 256 MiB: the workers of a
        local cluster, which ``"auto"`` then starts (:func:`cutext.stages.runtime.compute.local_plan`).
        Refused with ``"sync"``, with ``"threads"`` on the GPU, and with ``client`` (as ``scheduler`` other
        than ``"auto"``).
    index_format : {2, 1}, default 2
        2: segments (``segments/seg-NNNNN/``, :mod:`cutext.stages.engines.segments`), one per read
        partition, each written by the worker that counted it, storing tf and document lengths; the
        weights follow from the global statistics at load; ``bm25-append``, ``bm25-delete`` and
        ``bm25-compact`` work on it. 1: one global vocabulary with weighted term-major postings
        (``vocab.parquet``, ``postings/``, ``documents/``). Both load with :meth:`BM25Index.load` and
        give the same scores.
    overwrite : bool
    progress : bool
        Show the progress inside each stage (partitions done / total): a bar when standard error is
        a terminal, else a plain line every 10 s and one per finished stage.
    append : bool, default False
        Add the documents to the segmented index ``out`` as new segments (:func:`append_index`; Lucene's
        append mode): the old segments are kept as they are and the index scores afterwards as a
        one-shot build of all its documents.  The index's own BM25 and tokenizer settings are used: a
        setting given here that differs from the index's (or ``index_format=1``, ``overwrite=False``)
        is refused.
    store_text : bool, default False
        Keep every document's text in the index (``text.parquet`` beside each segment's files, zstd,
        listed and checksummed like them), for :meth:`BM25Index.doc`, :meth:`BM25Index.docs` and
        ``search(..., with_text=True)``; appends and compaction keep the texts.  Off by default: the
        build then never holds or writes the text after tokenizing it (the GPU build's throughput is
        the index's headline; with texts the input is read once more and the texts cross to the host
        and are compressed, about as many bytes again as the input).  Segmented indexes only
        (``index_format=2``).
    field_weights : dict of str to float, optional
        Score the text columns of ``text_column`` as weighted fields by BM25F (Robertson, Zaragoza and
        Taylor 2004) instead of joining them: ``{column: weight >= 0}``, a column left out weighs 1.  The
        segments then store each field's tf and length (:mod:`cutext.stages.engines.segments`) and the
        load weighs ``tf~ = sum_f w_f tf_f / (1 - b_f + b_f len_f / avglen_f)``, ``idf * tf~ / (k1 + tf~)``
        (:class:`cutext.stages.text.bm25.FieldWeights`; variants lucene, robertson, atire).  The input is
        read once a field.  Without ``field_weights`` and ``field_b`` a list ``text_column`` is joined
        into one text (Anserini's default for BEIR's title + text).
    field_b : dict of str to float, optional
        BM25F's length normalisation of each field, ``{column: b in [0, 1]}``; a column left out takes
        ``b``.  Given alone, it turns BM25F on with every weight 1.
    keep_columns : str or list of str, optional
        Other columns of a table input (jsonl, parquet, csv, a DataFrame), e.g. ``["date", "category"]``,
        kept in the index (``columns.parquet`` beside each segment's files, listed and checksummed like
        them; appends, deletes and compaction keep them) for filters before top-k:
        ``BM25Index.search(queries, k, filter=pc.field("category") == "sci")``.  The types are those the
        reader gives (Parquet's and a frame's own; JSON strings stay strings).  An append reads the
        same columns from its input.  Segmented indexes only (``index_format=2``).
    positions : bool, default False
        Store each posting's term positions (``positions.parquet`` beside each segment's files, listed and
        checksummed like them; appends, deletes and compaction keep them) for phrase and proximity
        queries: ``search('"information retrieval"~2 systems')``
        (:mod:`cutext.stages.engines.phrases`).  The documents' texts are read again and tokenized on the
        host to find the positions (Lucene's: a dropped stopword leaves a gap), so the build takes longer
        and the index holds about 1 to 1.5 bytes more a token (``docs/decisions.md``, "Phrase queries").
        Segmented one-field indexes only (not ``index_format=1``, not BM25F fields).
    on_duplicate : {"error", "replace", "keep"}, default "error"
        What to do with a document whose source id is already in the index (``append``) or earlier in the
        input (ids of a table's id column, a frame's; ids of files and lines are unique by construction):
        ``"error"`` names the ids and writes nothing; ``"replace"`` deletes the older copies in the same
        commit (Lucene's ``updateDocument``: an upsert; of copies within the input the last stays;
        segmented indexes only); ``"keep"`` indexes every copy (search may return several documents of
        one id, and a delete of the id removes them all) (:mod:`cutext.stages.engines.index_ids`).
    merge_policy : {"tiered", "none"}, default "tiered"
        With ``append``: merge runs of adjacent small segments in the append's commit
        (:mod:`cutext.stages.engines.merge_policy`), or ``"none"``; a build without ``append`` refuses
        ``"none"`` (it merges nothing).

    Returns
    -------
    RunResult
        ``path`` = the index directory; ``counts``: n_docs, n_terms, n_postings, n_tokens,
        n_empty_docs, replaced (characters replaced while decoding), ``updated_docs`` (copies deleted by
        ``on_duplicate="replace"``, when any); ``timings`` in seconds per stage (with ``append``, the counts
        of the whole index and ``appended_docs``).

    Raises
    ------
    FileNotFoundError
        The input path matches nothing.
    CorpusError (ValueError)
        Unreadable input, a missing column, or an empty corpus (message names the file).
    ValueError
        Bad BM25 or tokenizer parameters (``delta`` with a variant other than bm25l and bm25+; a switch such
        as ``append`` or ``lowercase`` that is not a bool); ``out`` is a URL of another file system than the
        local one.
        BM25F: a ``field_weights`` / ``field_b`` key that is not a column of ``text_column`` (the message
        names the columns), a negative weight, a b outside [0, 1], ``index_format=1``, ``store_text``, a
        variant other than lucene, robertson and atire; with ``append``, fields or weights that differ
        from the index's.  ``positions`` not a bool, with ``index_format=1`` or BM25F fields, or given to
        an append of an index without positions.
    DuplicateIdError (ValueError)
        ``on_duplicate="error"`` and a source id repeats (named); nothing is written.
    OutputDirectoryError (FileExistsError)
        ``out`` is not a new or empty directory nor an earlier bm25 index, or is the working
        directory, the input or a parent of either (:mod:`cutext.stages.runtime.output`); checked before any work.
    OutputNotSharedError (OSError)
        A worker of ``client`` does not see the output's temporary directory (the message names the
        worker and the path); checked before the corpus is read, and nothing is left behind.
    """
    store_text, positions = flag("store_text", store_text), flag("positions", positions)
    on_duplicate = check_on_duplicate(on_duplicate)
    append = flag("append", append)  # append="no" would otherwise append
    if check_merge_policy(merge_policy) != "tiered" and not append:
        raise ValueError(f"{param('merge_policy', merge_policy)} applies to an append's commit (append=True); a "
                         "build writes its segments unmerged: leave it out")
    if delta is not None and not append and variant not in bm25_stage.DEFAULT_DELTA:
        # bm25s and Lucene have no delta in these formulas: a given one would change nothing
        raise ValueError(f"{param('delta', delta)}: {param('variant', variant)} has no delta term; delta is "
                         f"for {' and '.join(map(repr, bm25_stage.DEFAULT_DELTA))} (leave it out)")
    fields = _field_spec(text_column, field_weights, field_b, b)
    if positions and fields is not None:
        raise ValueError(f"{param('positions', True)} is not available with BM25F fields yet: leave it out, or "
                         f"build a one-field index (no {param('field_weights', bare=True)} / "
                         f"{param('field_b', bare=True)})")
    keep_columns = _keep_columns_arg(keep_columns)
    if keep_columns is not None and fields is not None:
        raise ValueError(f"{param('keep_columns', bare=True)} is not available with BM25F fields yet: leave it out")
    if append:
        out = local_output(out)  # a URL of another file system is refused before the index is read
        _check_append_settings(out, variant=variant, k1=k1, b=b, delta=delta, index_format=index_format,
                               overwrite=overwrite, store_text=store_text, keep_columns=keep_columns,
                               positions=positions, norms=norms,
                               tokenizer=(lowercase, stopwords, stemmer, min_len, max_len, analyzer),
                               fields=fields, text_column=text_column)
        return append_index(path, out, format=format, text_column=text_column, id_column=id_column,
                            blocksize=blocksize, encoding=encoding, storage_options=storage_options, glob=glob,
                            max_ratio=max_ratio, backend=backend, client=client, scheduler=scheduler,
                            n_workers=n_workers, progress=progress, members=members, on_duplicate=on_duplicate,
                            merge_policy=merge_policy)
    if on_duplicate == "replace" and index_format == 1:
        raise ValueError(f"{param('on_duplicate', 'replace')} deletes the older copies of an id, which a segmented "
                         f"index records: use {param('index_format', 2)} (the default)")
    if fields is not None:
        if norms != "exact":
            raise ValueError(f"{param('norms', norms)} is not available with BM25F fields: leave it out")
        return _build_fields(path, out, fields, variant=variant, k1=k1, b=b, delta=delta, index_format=index_format,
                             store_text=store_text, overwrite=overwrite, progress=progress, on_duplicate=on_duplicate,
                             tokenizer=dict(lowercase=lowercase, stopwords=stopwords, stemmer=stemmer,
                                            min_len=min_len, max_len=max_len, analyzer=analyzer),
                             run_kw=dict(format=format, id_column=id_column, blocksize=blocksize, encoding=encoding,
                                         storage_options=storage_options, glob=glob, max_ratio=max_ratio,
                                         members=members, backend=backend, client=client, scheduler=scheduler,
                                         n_workers=n_workers))
    inputs = [path, *param_files(stopwords)]
    run = PipelineRun("bm25", out, manifest="index.json", inputs=inputs, overwrite=overwrite, progress=progress)
    delta = bm25_stage.check_params(variant, k1, b, delta)
    if isinstance(index_format, bool):
        raise ValueError(f"index_format must be one of {list(INDEX_FORMATS)}, got {index_format!r}")
    index_format = choice("index_format", index_format, INDEX_FORMATS)
    if store_text and index_format != 2:
        raise ValueError(f"{param('store_text', True)} keeps the texts beside the segments of a segmented index: "
                         f"use {param('index_format', 2)} (the default), or leave {param('store_text', bare=True)} out")
    if positions and index_format != 2:
        raise ValueError(f"{param('positions', True)} stores term positions beside the segments of a segmented "
                         f"index: use {param('index_format', 2)} (the default), or leave "
                         f"{param('positions', bare=True)} out")
    if keep_columns is not None and index_format != 2:
        raise ValueError(f"{param('keep_columns', bare=True)} keeps columns beside the segments of a segmented "
                         f"index: use {param('index_format', 2)} (the default), or leave "
                         f"{param('keep_columns', bare=True)} out")
    tok_cfg = TokenizerConfig.make(lowercase, stopwords, stemmer, min_len, max_len, analyzer)
    norms = bm25_stage.check_norms(norms, variant)
    if norms != "exact" and index_format != 2:
        raise ValueError(f"{param('norms', norms)} is kept by a segmented index: use {param('index_format', 2)} "
                         f"(the default)")
    be = run.resolve_backend(backend)
    if be == "gpu" and tok_cfg.analyzer is not None:
        raise ValueError(f"{param('analyzer', tok_cfg.analyzer)} splits words on the CPU only (no GPU word-break "
                         f"kernel yet): use {param('backend', 'cpu')}")
    src, reopen = _open_source(path, be, blocksize, format=format, text_column=text_column, id_column=id_column,
                               encoding=encoding, storage_options=storage_options, glob=glob, max_ratio=max_ratio,
                               members=members)
    if keep_columns is not None:
        kept_columns(src, keep_columns)  # a Series, lines or files, a frame without a column: refused before any work
    if index_format == 2:
        src.check_documents = None  # a frame's repeated ids: on_duplicate decides, over the written segments
    nbytes, fmt = src.input_bytes, src.format
    with run.shown(), run.compute(be, client=client, scheduler=scheduler, nbytes=nbytes, n_workers=n_workers,
                                  worker_threads=True) as info, run.output(workers_write=True) as tmp:
        shares = _shares(src, info) if index_format == 2 else None
        layout = {"store_text": store_text} if index_format == 2 else {}
        if keep_columns is not None:
            layout["keep_columns"] = keep_columns
        if positions:
            layout["positions"] = True
        write_text = store_text or positions  # positions are found from the texts the writers keep
        if shares is not None:  # a Client and a file input: every worker builds its share's segments
            replaced, layout["segments"], counts, vocab = _build_on_workers(run, src, tok_cfg, info, tmp, path,
                                                                            shares, store_text=write_text,
                                                                            keep_columns=keep_columns)
            layout["next_segment"] = len(src.pieces)
            avgdl = counts["n_tokens"] / counts["n_docs"]
            counts.update({"replaced": replaced, "input_bytes": nbytes, "partitions": len(src.pieces)})
            commit_stage.write_commit_terms(tmp, *vocab)  # the shares' vocabularies merged: for the next append
        elif index_format == 2 and info.client is not None:  # a frame or one unit: a segment a partition, in place
            _no_kept_columns_in_place(keep_columns, path)
            replaced, layout["segments"], counts, vocab = _build_parts_on_workers(run, src, tok_cfg, info, tmp,
                                                                                  path, store_text=write_text)
            layout["next_segment"] = len(layout["segments"])
            avgdl = counts["n_tokens"] / counts["n_docs"]
            counts.update({"replaced": replaced, "input_bytes": nbytes, "partitions": len(layout["segments"])})
            commit_stage.write_commit_terms(tmp, *vocab)  # the segments' vocabularies merged: for the next append
        else:
            src, spill, per_file = _spill_plan(src, reopen, nbytes, info, tmp)
            idx = _front_end(run, src, tok_cfg, info, spill, path)
            if index_format == 2:
                replaced, layout["segments"] = run.stage("write", _write_segments, tmp, idx, spill, info,
                                                         store_text=write_text, keep_columns=keep_columns)
                layout["next_segment"] = len(layout["segments"])
                avgdl = idx.n_tokens / idx.n_docs
                # the global vocabulary and df are at hand: the commit keeps them for the next append
                commit_stage.write_commit_terms(tmp, idx.vocab, idx.df_t[1:])
            else:
                weights = _weights(idx, variant, k1, b, delta, per_file)
                replaced = run.stage("weight+write", _write_index, tmp, idx, weights, variant=variant, k1=k1, b=b,
                                     delta=delta, spill=spill, per_file=per_file, info=info)
                avgdl = weights.avgdl
            counts = {"n_docs": idx.n_docs, "n_terms": idx.n_terms, "n_postings": idx.n_postings,
                      "n_tokens": idx.n_tokens, "n_empty_docs": int((idx.lengths == 0).sum()),
                      "replaced": replaced, "input_bytes": nbytes, "partitions": len(idx.pieces)}
        if fmt in ID_FORMATS:  # ids from a column may repeat: on_duplicate decides
            avgdl = _dedupe(tmp, layout, index_format, on_duplicate, input_label(path), counts, avgdl)
        if positions:
            counts["positions_bytes"] = run.stage("positions", _add_positions, tmp, layout["segments"], tok_cfg,
                                                  store_text)
        params = {"variant": variant, "k1": k1, "b": b, "delta": delta, "format": fmt,
                  "tokenizer": tok_cfg.to_dict()}
        if norms != "exact":
            params["norms"] = layout["norms"] = norms
        run.write_manifest(tmp, {
            "index_format": index_format, **layout, "N": counts["n_docs"], "avgdl": avgdl, "variant": variant,
            "k1": k1, "b": b, "delta": delta,
            "tokenizer": tok_cfg.to_dict(), "backend": info.backend, "scheduler": info.scheduler,
            "n_workers": info.n_workers, "source": input_label(path), "format": fmt, "counts": counts,
            "timings": run.timings})
    return run.result(info.backend, info.scheduler, info.n_workers, counts, params,
                      headline={"documents": counts["n_docs"], "terms": counts["n_terms"],
                                "postings": counts["n_postings"]})


def _field_segments(run: PipelineRun, path, tmp: Path, fields: tuple, tok_cfg: TokenizerConfig, run_kw: dict,
                    first: int = 0) -> tuple[list[str], int, RunResult]:
    """The BM25F segments of an input in ``tmp/segments``: a one-field segmented index of each field built
    into ``tmp/.fields/<i>`` (:func:`build_index` with ``text_column`` the field: every route, backend and
    cluster of a one-field build; the input read once a field), then segment by segment the fields joined
    (:func:`cutext.stages.engines.segments.field_segment`) as ``seg-<first + n>``.

    Returns
    -------
    (list of str, int, RunResult)
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

    work = tmp / ".fields"
    results, metas = [], []
    try:
        for i, f in enumerate(fields):
            try:
                r = build_index(path, work / str(i), text_column=f, **_tokenizer_kw(tok_cfg), **run_kw,
                                index_format=2, progress=run.progress, on_duplicate="keep")  # the caller decides
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


def _build_fields(path, out, fields: tuple, *, variant, k1, b, delta, index_format, store_text, overwrite,
                  progress, tokenizer: dict, run_kw: dict, on_duplicate: str = "error") -> RunResult:
    """:func:`build_index` of a BM25F index (``fields``: ``(names, weights, bs)`` of :func:`_field_spec`): the
    segments of :func:`_field_segments` and a manifest that records the fields, their weights and b's."""
    if index_format != 2 or isinstance(index_format, bool):
        raise ValueError(f"BM25F ({param('field_weights', bare=True)} / {param('field_b', bare=True)}) stores each "
                         f"field's tf and length in the segments of a segmented index: use "
                         f"{param('index_format', 2)} (the default); format 1 stores weights of one field")
    if store_text:
        raise ValueError(f"{param('store_text', True)} is not available with BM25F fields yet: leave it out")
    if variant not in bm25_stage.FIELD_VARIANTS:
        raise ValueError(f"BM25F weighs the variants {list(bm25_stage.FIELD_VARIANTS)}; "
                         f"{param('variant', variant)} adds a constant to a one-field tf part")
    delta = bm25_stage.check_params(variant, k1, b, delta)
    tok_cfg = TokenizerConfig.make(**tokenizer)
    run = PipelineRun("bm25", out, manifest="index.json", inputs=[path, *param_files(tokenizer["stopwords"])],
                      overwrite=overwrite, progress=progress)
    with run.output() as tmp:
        names, next_segment, first = _field_segments(run, path, tmp, fields[0], tok_cfg, run_kw)
        heads = segment_heads([tmp / SEGMENTS_DIR / n for n in names], [np.zeros(0, np.int64)] * len(names),
                              ids=False)
        fc = first.counts
        mt, counts = commit_stage.index_counts(heads, {}, replaced=int(fc.get("replaced", 0)),
                                               input_bytes=int(fc.get("input_bytes", 0)))
        commit_stage.write_commit_terms(tmp, mt.vocab, mt.df[1:])  # kept for the next append
        spec = {"fields": list(fields[0]), "weights": list(fields[1]), "b": list(fields[2])}
        layout = {"segments": names}
        avgdl = mt.avgdl
        if first.params.get("format") in ID_FORMATS:
            avgdl = _dedupe(tmp, layout, 2, on_duplicate, input_label(path), counts, avgdl)
        run.write_manifest(tmp, {
            "index_format": 2, **layout, "next_segment": next_segment, "store_text": False, "bm25f": spec,
            "N": counts["n_docs"], "avgdl": avgdl, "variant": variant, "k1": k1, "b": b, "delta": delta,
            "tokenizer": tok_cfg.to_dict(), "backend": first.backend, "scheduler": first.scheduler,
            "n_workers": first.n_workers, "source": input_label(path), "format": first.params.get("format"),
            "counts": counts, "timings": run.timings})
    params = {"variant": variant, "k1": k1, "b": b, "delta": delta, "format": first.params.get("format"),
              "tokenizer": tok_cfg.to_dict(), "bm25f": spec}
    return run.result(first.backend, first.scheduler, first.n_workers, counts, params,
                      headline={"documents": counts["n_docs"], "terms": counts["n_terms"],
                                "postings": counts["n_postings"]})


def append_index(path, index, *, format="auto", text_column=None, id_column=None, blocksize=None,
                 encoding="utf-8", storage_options=None, glob=None, max_ratio=DEFAULT_MAX_RATIO, backend="auto",
                 client=None, scheduler="auto", n_workers=None, progress=True, members=None,
                 on_duplicate="error", merge_policy="tiered") -> RunResult:
    """Append documents to a segmented index (Lucene's append mode): new segments beside the old ones.

    The new documents are tokenized with the index's own tokenizer settings and written as segments after
    the existing ones (their doc ids follow the index's last), with their texts when the index stores texts
    (built with ``store_text=True``), their term positions when it stores positions (``positions=True``) and
    its kept columns read from the new input (``keep_columns=``: the
    input must hold them); the old segments are not rewritten (hard
    links into the new commit) and nothing is weighted, so the index's scores afterwards are those of a
    one-shot build of all its documents in order: N, avgdl and df are global and applied at load.  The
    commit is atomic: a reader sees the index before or after the append, never between.

    Parameters
    ----------
    path : str, os.PathLike, list, or a frame
        The documents to add (the formats of :func:`build_index`).
    index : str or os.PathLike
        A segmented index (``index_format=2``) written by :func:`build_index` or by an earlier append: a
        local path or a ``file://`` URL, seen by every worker of ``client`` (see ``out`` of
        :func:`build_index`).
    format, text_column, id_column, blocksize, encoding, storage_options, glob, max_ratio, members
        Reader settings of the new documents, as for :func:`build_index`.
    backend, client, scheduler, n_workers, progress
        As for :func:`build_index`.
    on_duplicate : {"error", "replace", "keep"}, default "error"
        A new document whose source id is live in the index or repeats among the new ones: ``"error"``
        names the ids and commits nothing; ``"replace"`` deletes the older copies in the append's commit
        (Lucene's ``updateDocument``, an upsert); ``"keep"`` indexes every copy
        (:mod:`cutext.stages.engines.index_ids`).
    merge_policy : {"tiered", "none"}, default "tiered"
        ``"tiered"`` merges runs of adjacent segments in the same commit when ten of one size tier follow
        each other, and rewrites a segment more than half deleted
        (:func:`cutext.stages.engines.merge_policy.plan_merges`, Lucene's LogByteSizeMergePolicy), so many
        small appends keep O(log n) segments; ``"none"`` only adds segments.  Search is the same either way.

    Returns
    -------
    RunResult
        ``path`` = the index; ``counts`` of the whole index after the append, with ``appended_docs``,
        ``updated_docs`` (older copies deleted by ``"replace"``) and ``merged_segments`` (when the merge
        policy merged some).

    Raises
    ------
    ArtifactError (ValueError)
        ``index`` is not a cutext bm25 index, or is a format-1 index (rebuild it with
        ``index_format=2``), or its manifest is damaged.
    CorpusError (ValueError), FileNotFoundError
        As :func:`build_index` for the new documents.
    OutputDirectoryError (FileExistsError)
        ``index`` is an input of the append, or holds entries its manifest does not list.
    ValueError
        ``index`` is a URL of another file system than the local one.
    OutputNotSharedError (OSError)
        A worker of ``client`` does not see the new commit's temporary directory; nothing is left behind.
    DuplicateIdError (ValueError)
        ``on_duplicate="error"`` and a new document's id is in the index or repeats (named); nothing is
        committed.
    """
    on_duplicate = check_on_duplicate(on_duplicate)
    check_merge_policy(merge_policy)
    index = local_output(index)
    old, expect = segmented_commit(index, "appending")
    tok_cfg = TokenizerConfig.from_dict(old["tokenizer"])
    store_text = old.get("store_text") is True
    with_positions = old.get("positions") is True
    write_text = store_text or with_positions  # positions are found from the texts the writers keep
    keep = old.get("keep_columns") or None  # the index's kept columns: the new input must carry them
    run = PipelineRun("bm25", index, manifest="index.json", inputs=[path], progress=progress)
    fields = bm25f_spec(old, Path(index) / "index.json")
    if fields is not None:  # BM25F: the index's text columns, a one-field build each, joined
        _check_append_settings(index, tokenizer=_TOKENIZER_DEFAULTS, text_column=text_column)
        run_kw = dict(format=format, id_column=id_column, blocksize=blocksize, encoding=encoding,
                      storage_options=storage_options, glob=glob, max_ratio=max_ratio, members=members,
                      backend=backend, client=client, scheduler=scheduler, n_workers=n_workers)
        with run.output(expect) as tmp:
            first = int(old.get("next_segment", len(old["segments"])))
            names, _, res = _field_segments(run, path, tmp, fields[0], tok_cfg, run_kw, first)
            n_added = int(res.counts["n_docs"])
            deletes, updated = commit_stage.update_deletes(Path(index), old, tmp, names, on_duplicate)
            counts = commit_stage.write_commit(
                tmp, Path(index), old, old["segments"], deletes,
                {"replaced": int(res.counts.get("replaced", 0)), "input_bytes": int(res.counts.get("input_bytes", 0)),
                 "appended_docs": n_added, "updated_docs": updated}, added=names, timings=run.timings,
                fields={"backend": res.backend, "scheduler": res.scheduler, "n_workers": res.n_workers})
            counts = merge_on_commit(tmp, merge_policy, counts)
        return run.result(res.backend, res.scheduler, res.n_workers, counts,
                          {"variant": old["variant"], "k1": old["k1"], "b": old["b"], "delta": old["delta"],
                           "tokenizer": old["tokenizer"], "bm25f": old["bm25f"]},
                          headline={"documents": counts["n_docs"], "terms": counts["n_terms"],
                                    "postings": counts["n_postings"]})
    be = run.resolve_backend(backend)
    if be == "gpu" and tok_cfg.analyzer is not None:
        raise ValueError(f"the index {index} uses analyzer={tok_cfg.analyzer!r}, which splits words on the CPU "
                         f"only: append with {param('backend', 'cpu')}")
    src, reopen = _open_source(path, be, blocksize, format=format, text_column=text_column, id_column=id_column,
                               encoding=encoding, storage_options=storage_options, glob=glob, max_ratio=max_ratio,
                               members=members)
    src.check_documents = None  # a frame's repeated ids: on_duplicate decides, over the written segments
    with run.shown(), run.compute(be, client=client, scheduler=scheduler, nbytes=src.input_bytes,
                                  n_workers=n_workers, worker_threads=True) as info, \
            run.output(expect, workers_write=True) as tmp:
        first = int(old.get("next_segment", len(old["segments"])))
        shares = _shares(src, info)
        if shares is not None:  # a Client and a file input: every worker writes its share's segments
            replaced, names, added, _ = _build_on_workers(run, src, tok_cfg, info, tmp, path, shares, first,
                                                          store_text=write_text, keep_columns=keep)
            n_added = added["n_docs"]
        elif info.client is not None:  # a frame or one unit: a segment a partition, where its text is
            _no_kept_columns_in_place(keep, path)
            replaced, names, added, _ = _build_parts_on_workers(run, src, tok_cfg, info, tmp, path, first,
                                                                store_text=write_text)
            n_added = added["n_docs"]
        else:
            src, spill, _ = _spill_plan(src, reopen, src.input_bytes, info, tmp)
            idx = _front_end(run, src, tok_cfg, info, spill, path)
            replaced, names = run.stage("write", _write_segments, tmp, idx, spill, info, first,
                                        store_text=write_text, keep_columns=keep)
            n_added = idx.n_docs
        if keep:
            commit_stage.check_kept_types(Path(index), old["segments"], tmp, names)
        if with_positions:
            run.stage("positions", _add_positions, tmp, names, tok_cfg, store_text)
        deletes, updated = commit_stage.update_deletes(Path(index), old, tmp, names, on_duplicate)
        counts = commit_stage.write_commit(
            tmp, Path(index), old, old["segments"], deletes,
            {"replaced": replaced, "input_bytes": src.input_bytes, "appended_docs": n_added,
             "updated_docs": updated}, added=names,
            timings=run.timings, fields={"backend": info.backend, "scheduler": info.scheduler,
                                         "n_workers": info.n_workers})
        counts = merge_on_commit(tmp, merge_policy, counts)
    return run.result(info.backend, info.scheduler, info.n_workers, counts,
                      {"variant": old["variant"], "k1": old["k1"], "b": old["b"], "delta": old["delta"],
                       "tokenizer": old["tokenizer"]},
                      headline={"documents": counts["n_docs"], "terms": counts["n_terms"],
                                "postings": counts["n_postings"]})


def _open_source(path, be: str, blocksize, **read_kw):
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
    ``reopen`` (:func:`_open_source`) when the default GPU blocksize does not fit the device), the spill
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


def _front_end(run: PipelineRun, src, tok_cfg: TokenizerConfig, info, spill, path,
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


def _build_share(src, tok_cfg: TokenizerConfig, tmp: str, first: int, sharing: int = 1,
                 store_text: bool = False, keep_columns=None) -> dict:
    """Worker side of a Client build of a segmented index: the in-process front end and segment writer over
    this worker's pieces (on its GPU, one stream of work, as a one-GPU build), segments ``seg-<first>...``
    written into ``tmp/segments``, on the host's cores / ``sharing`` (the workers on this host).  Nothing
    but this summary leaves the worker: the vocabulary of the share and its df (for the index's term count
    and the commit's ``terms.arrow``), its sizes, the segment names and the stage seconds."""
    from distributed import get_worker

    tmp = Path(tmp)
    for i in range(first, first + len(src.pieces)):  # a share run again after its worker died starts clean
        shutil.rmtree(tmp / SEGMENTS_DIR / f"seg-{i:05d}", ignore_errors=True)
    work = tmp / f".share-{first:05d}"  # this worker's spill files, apart from the other workers'
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    stages = _WorkerStages()
    # one stream of work on a GPU; on the CPU the worker's own threads (one: synchronous)
    threads = get_worker().state.nthreads
    scheduler = "sync" if src.backend == "gpu" or threads <= 1 else "threads"
    files = list(dict.fromkeys(str(f) for p in src.pieces for f in p.paths))
    try:
        with _SHARE_LOCK, share_threads(sharing), compute_context(src.backend, scheduler=scheduler) as info:
            src, spill, _ = _spill_plan(src, None, src.input_bytes, info, work)
            idx = _front_end(stages, src, tok_cfg, info, spill, src.path, empty_ok=True)
            replaced, names = stages.stage("write", _write_segments, tmp, idx, spill, info, first,
                                           store_text=store_text, keep_columns=keep_columns)
    except Exception as exc:  # an error that names no file still tells which files the failed share held
        more = f" and {len(files) - 3} more" if len(files) > 3 else ""
        exc.add_note(f"in the bm25 build of a worker's share of the input: {', '.join(files[:3])}{more}")
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if len(names) > len(src.pieces):  # the caller numbered the shares' segments by their pieces
        raise RuntimeError(f"a worker's share of {len(src.pieces)} pieces made {len(names)} segments")
    terms = idx.vocab if isinstance(idx.vocab, (pa.Array, pa.ChunkedArray)) else pa.array(idx.vocab)
    return {"names": names, "terms": terms, "df": _df_to_send(idx.df_t[1:]), "n_docs": idx.n_docs,
            "sum_dl": idx.n_tokens, "n_postings": idx.n_postings, "n_empty_docs": int((idx.lengths == 0).sum()),
            "replaced": replaced, "timings": stages.timings}


def _build_on_workers(run: PipelineRun, src, tok_cfg: TokenizerConfig, info, tmp: Path, path, shares,
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


# ----------------------------------------------------------------------------- command line

def _cli_main(args, kw) -> int:
    """``bm25 PATH... [--out DIR] [options]``: build the index, print the result (``--json``: as JSON)."""
    r = build_index(kw.pop("path"), kw.pop("out"), **kw)
    print_result(r, args.json)
    return 0


def _cli_queries(args, topic_field: str) -> pd.DataFrame:
    """The queries of ``search``: ``--query TEXT`` (ids 1, 2, ... in order), or the ``--queries`` file, ``-``
    for standard input (any format :func:`cutext.pipelines.trec.read_queries` sniffs)."""
    import sys
    import tempfile

    if args.query:
        return pd.DataFrame({"query_id": [str(i + 1) for i in range(len(args.query))], "query": list(args.query)})
    if args.queries != "-":
        return read_queries(args.queries, topic_field)
    with tempfile.TemporaryDirectory() as tmp:  # the readers sniff the format of a file
        spooled = Path(tmp) / "queries.txt"
        spooled.write_text(sys.stdin.read(), encoding="utf-8")
        return read_queries(spooled, topic_field)


def _search_cli_main(args, kw) -> int:
    """``search INDEX (--queries FILE | --query TEXT...) ...``: score the queries, write a TREC run to ``--out``
    (default ``search-out``; ``-``: standard output)."""
    import sys

    out = args.out
    if out != "-":  # before any work: never over the queries, the index or inside any cutext output
        check_output_file(out, inputs=[args.index] + ([args.queries] if args.queries not in (None, "-") else []))
    queries = _cli_queries(args, kw.get("topic_field", "title"))
    index = BM25Index.load(args.index, **kw.of("load"))
    run = index.search(queries, **{"progress": is_terminal(), **kw.of("search")})
    if index.meta.get("norms") == "lucene":  # the scores of Anserini's run files
        run["score"] = anserini_scores(run["query_id"].to_numpy(), run["score"].to_numpy())
    tag = kw.get("tag", "cutext")
    if out == "-":  # the docno is the source id (the caller's id), as in write_trec_run
        for q, d, r_, s in zip(run.query_id, run.source_id, run["rank"], run.score):
            sys.stdout.write(f"{q} Q0 {d} {r_} {s:.6f} {tag}\n")
    else:
        write_trec_run(run, out, **kw.of("write_trec_run"))
        print(f"wrote {len(run)} rows for {run.query_id.nunique()} queries to {out}", file=sys.stderr)
    return 0


def _search_arguments(p) -> None:
    """The arguments of ``search`` that are no keyword of its functions: the index, the queries, the run file."""
    p.add_argument("index", help="index directory written by 'bm25'")
    q = p.add_mutually_exclusive_group(required=True)
    q.add_argument("--queries", help="queries file: TREC topics (SGML), BEIR queries.jsonl, 'qid<TAB>text' TSV, or "
                                     "one query per line; - reads them from standard input")
    q.add_argument("--query", action="append", metavar="TEXT",
                   help="a query (ids 1, 2, ... in order); repeat for several")
    p.add_argument("--out", default=default_out("search"),
                   help="run file to write; - for standard output (default: search-out, the one rule: <name>-out)")


_CORPUS = {"path": dict(nargs="+", metavar="PATH", help="corpus: files, a directory, a glob or fsspec URLs")}

# the subcommands of this module; their options are the keywords of the functions they run
COMMANDS = (
    Command("bm25", build_index, _cli_main, help="build a BM25 index from a corpus", json=True, positional=_CORPUS,
            description="Build a BM25 index (Parquet + JSON) from a corpus; the index directory appears only "
                        "when complete. The options are the keywords of cutext.pipelines.bm25.build_index."),
    Command("search", (BM25Index.load, BM25Index.search, read_queries, write_trec_run), _search_cli_main,
            help="run queries against an index, write a TREC run",
            description="Score queries with an index; writes a TREC run (qid Q0 docid rank score tag). The "
                        "options are the keywords of BM25Index.load, BM25Index.search, read_queries and "
                        "write_trec_run.",
            skip=("path", "with_text", "filter"), defaults={"k": 1000, "backend": "cpu"}, setup=_search_arguments,
            files=("queries",),
            options={"k": dict(help="documents per query (a TREC run's 1000 by default)")}),
)


def add_cli(sub) -> None:
    """Register ``bm25`` (build an index) and ``search`` (query an index, write a TREC run) with
    the ``python -m cutext.pipelines`` command line."""
    for command in COMMANDS:
        command.add_to(sub)
