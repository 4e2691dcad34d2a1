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

from pathlib import Path

import pandas as pd

from cutext.pipelines._bm25_args import (  # noqa: F401 (moved names stay importable from here)
    _BUILD_DEFAULTS,
    _TOKENIZER_DEFAULTS,
    _check_append_settings,
    _field_spec,
    _keep_columns_arg,
    _tokenizer_kw,
)
from cutext.pipelines._cli import Command, print_result
from cutext.pipelines._result import RunResult, default_out, param_files
from cutext.pipelines._run import PipelineRun
from cutext.pipelines.trec import anserini_scores, read_queries, write_trec_run
from cutext.stages.engines.bm25_index import BM25Index, bm25f_spec
from cutext.stages.engines.index_commits import segmented_commit
from cutext.stages.engines.index_ids import check_on_duplicate
from cutext.stages.engines.index_writer import IndexWriter, WriterConfig, open_source
from cutext.stages.engines.merge_policy import check_merge_policy
from cutext.stages.readers.base import DEFAULT_MAX_RATIO
from cutext.stages.readers.source import kept_columns
from cutext.stages.runtime.output import check_output_file, local_output
from cutext.stages.runtime.params import choice, flag, param
from cutext.stages.runtime.progress import is_terminal
from cutext.stages.text import bm25 as bm25_stage
from cutext.stages.text.tokenize import TokenizerConfig

INDEX_FORMATS = (1, 2)


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
        the tokenizer settings (leave them out).  Both backends, the same tokens (on the GPU the word-break
        kernels of :mod:`cutext.kernels.wordbreak` split the text).
    format, text_column, id_column, blocksize, encoding, storage_options, glob
        Reader settings (:func:`cutext.stages.readers.source.read_corpus`; ``glob=None``: a path that
        exists is read as itself, else ``*?[`` make it a pattern).  ``blocksize=None``: 64 MiB
        partitions on the CPU, 128 MiB on the GPU (``index_writer.GPU_BLOCKSIZE``; 64 MiB when the device is
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
        give the same scores.  In process, a segmented index of files larger than a batch (half the memory
        free at the start, the device's or the host's, over the front end's 4 bytes an input byte) is built
        batch after batch over runs of read partitions, each batch's segments with its own vocabulary: the
        same segments, ids and scores, memory bounded by a batch (``counts["batches"]``; docs/decisions.md).
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
        ``on_duplicate="replace"``, when any), ``batches`` (of a build in batches, see ``index_format``);
        ``timings`` in seconds per stage, summed over the batches (with ``append``, the counts of the whole
        index and ``appended_docs``).

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
    fields, keep_columns = _check_build_switches(append, merge_policy, variant, delta, b, positions, keep_columns,
                                                 text_column, field_weights, field_b)
    read_kw = dict(format=format, text_column=text_column, id_column=id_column, blocksize=blocksize,
                   encoding=encoding, storage_options=storage_options, glob=glob, max_ratio=max_ratio,
                   members=members)
    compute_kw = dict(backend=backend, client=client, scheduler=scheduler, n_workers=n_workers)
    tokenizer = dict(lowercase=lowercase, stopwords=stopwords, stemmer=stemmer, min_len=min_len, max_len=max_len,
                     analyzer=analyzer)
    if append:
        out = local_output(out)  # a URL of another file system is refused before the index is read
        _check_append_settings(out, variant=variant, k1=k1, b=b, delta=delta, index_format=index_format,
                               overwrite=overwrite, store_text=store_text, keep_columns=keep_columns,
                               positions=positions, norms=norms, tokenizer=tuple(tokenizer.values()),
                               fields=fields, text_column=text_column)
        return append_index(path, out, **read_kw, **compute_kw, progress=progress, on_duplicate=on_duplicate,
                            merge_policy=merge_policy)
    if on_duplicate == "replace" and index_format == 1:
        raise ValueError(f"{param('on_duplicate', 'replace')} deletes the older copies of an id, which a segmented "
                         f"index records: use {param('index_format', 2)} (the default)")
    if fields is not None:
        if norms != "exact":
            raise ValueError(f"{param('norms', norms)} is not available with BM25F fields: leave it out")
        del read_kw["text_column"]  # each field's build reads its own column
        return _build_fields(path, out, fields, variant=variant, k1=k1, b=b, delta=delta, index_format=index_format,
                             store_text=store_text, overwrite=overwrite, progress=progress, on_duplicate=on_duplicate,
                             tokenizer=tokenizer, run_kw={**read_kw, **compute_kw})
    return _build_one_field(path, out, read_kw, compute_kw, tokenizer, variant=variant, k1=k1, b=b, delta=delta,
                            index_format=index_format, overwrite=overwrite, progress=progress, store_text=store_text,
                            keep_columns=keep_columns, positions=positions, norms=norms, on_duplicate=on_duplicate)


def _check_build_switches(append: bool, merge_policy, variant, delta, b, positions: bool, keep_columns,
                          text_column, field_weights, field_b) -> tuple:
    """The checks of :func:`build_index` that hold on every route (a build, BM25F, an append): returns
    ``(fields, keep_columns)``, the BM25F spec (:func:`_field_spec`, None for one field) and the kept columns
    as a list (or None).

    Raises
    ------
    ValueError
        ``merge_policy="none"`` without ``append``; ``delta`` with a variant without one; ``positions`` or
        ``keep_columns`` with BM25F fields; bad BM25F fields or a bad ``keep_columns``.
    """
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
    return fields, keep_columns


def _check_layout(index_format, store_text: bool, positions: bool, keep_columns) -> int:
    """The ``index_format`` of a one-field build, checked, and what only a segmented index keeps (texts,
    positions, columns) refused with ``index_format=1``.

    Raises
    ------
    ValueError
        An index format not in ``INDEX_FORMATS``; ``store_text``, ``positions`` or ``keep_columns`` with
        ``index_format=1``.
    """
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
    return index_format


def _build_one_field(path, out, read_kw: dict, compute_kw: dict, tokenizer: dict, *, variant, k1, b, delta,
                     index_format, overwrite, progress, store_text, keep_columns, positions, norms,
                     on_duplicate) -> RunResult:
    """:func:`build_index` of a one-field index, its arguments checked by :func:`_check_build_switches`: the
    input opened, then the build by :meth:`IndexWriter.build` (its route, segments, counts, ``on_duplicate``,
    positions and commit)."""
    run = PipelineRun("bm25", out, manifest="index.json", inputs=[path, *param_files(tokenizer["stopwords"])],
                      overwrite=overwrite, progress=progress)
    delta = bm25_stage.check_params(variant, k1, b, delta)
    index_format = _check_layout(index_format, store_text, positions, keep_columns)
    tok_cfg = TokenizerConfig.make(**tokenizer)
    norms = bm25_stage.check_norms(norms, variant)
    if norms != "exact" and index_format != 2:
        raise ValueError(f"{param('norms', norms)} is kept by a segmented index: use {param('index_format', 2)} "
                         f"(the default)")
    be = run.resolve_backend(compute_kw["backend"])
    src, reopen = open_source(path, be, **read_kw)
    if keep_columns is not None:
        kept_columns(src, keep_columns)  # a Series, lines or files, a frame without a column: refused before any work
    if index_format == 2:
        src.check_documents = None  # a frame's repeated ids: on_duplicate decides, over the written segments
    nbytes, fmt = src.input_bytes, src.format
    config = WriterConfig(tok_cfg, index_format, (variant, k1, b, delta), norms, store_text, positions, keep_columns,
                          on_duplicate)
    with run.shown(), run.compute(be, client=compute_kw["client"], scheduler=compute_kw["scheduler"], nbytes=nbytes,
                                  n_workers=compute_kw["n_workers"], worker_threads=True) as info, \
            run.output(workers_write=True) as tmp:
        counts = IndexWriter(run, tmp, info, config, path).build(src, reopen)
    params = {"variant": variant, "k1": k1, "b": b, "delta": delta, "format": fmt, "tokenizer": tok_cfg.to_dict()}
    if norms != "exact":
        params["norms"] = norms
    return run.result(info.backend, info.scheduler, info.n_workers, counts, params,
                      headline={"documents": counts["n_docs"], "terms": counts["n_terms"],
                                "postings": counts["n_postings"]})


def _field_builder(run: PipelineRun, tok_cfg: TokenizerConfig, path, run_kw: dict):
    """``build_field(field, out)`` for :meth:`IndexWriter.build_fields` / :meth:`IndexWriter.append_fields`: a
    one-field segmented index of the column ``field`` written into ``out`` (:func:`build_index` with
    ``text_column`` the field: every route, backend and cluster of a one-field build; the input read once a
    field), its ids left as they are (the BM25F commit applies ``on_duplicate``)."""
    def build_field(field: str, out: Path) -> RunResult:
        return build_index(path, out, text_column=field, **_tokenizer_kw(tok_cfg), **run_kw, index_format=2,
                           progress=run.progress, on_duplicate="keep")

    return build_field


def _build_fields(path, out, fields: tuple, *, variant, k1, b, delta, index_format, store_text, overwrite,
                  progress, tokenizer: dict, run_kw: dict, on_duplicate: str = "error") -> RunResult:
    """:func:`build_index` of a BM25F index (``fields``: ``(names, weights, bs)`` of :func:`_field_spec`): the
    segments of each field (:func:`_field_builder`) joined and committed by :meth:`IndexWriter.build_fields`."""
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
    config = WriterConfig(tok_cfg, 2, (variant, k1, b, delta), on_duplicate=on_duplicate, fields=fields)
    with run.output() as tmp:
        counts, first = IndexWriter(run, tmp, None, config, path).build_fields(_field_builder(run, tok_cfg, path,
                                                                                             run_kw))
    params = {"variant": variant, "k1": k1, "b": b, "delta": delta, "format": first.params.get("format"),
              "tokenizer": tok_cfg.to_dict(), "bm25f": config.bm25f}
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
    run = PipelineRun("bm25", index, manifest="index.json", inputs=[path], progress=progress)
    read_kw = dict(format=format, id_column=id_column, blocksize=blocksize, encoding=encoding,
                   storage_options=storage_options, glob=glob, max_ratio=max_ratio, members=members)
    compute_kw = dict(backend=backend, client=client, scheduler=scheduler, n_workers=n_workers)
    fields = bm25f_spec(old, Path(index) / "index.json")
    if fields is not None:  # BM25F: the index's text columns, a one-field build each, joined
        _check_append_settings(index, tokenizer=_TOKENIZER_DEFAULTS, text_column=text_column)
        return _append_fields(run, path, index, old, expect, fields, tok_cfg, {**read_kw, **compute_kw},
                              on_duplicate, merge_policy)
    return _append_one_field(run, path, index, old, expect, tok_cfg, dict(read_kw, text_column=text_column),
                             compute_kw, on_duplicate, merge_policy)


def _append_fields(run: PipelineRun, path, index, old: dict, expect, fields: tuple, tok_cfg: TokenizerConfig,
                   run_kw: dict, on_duplicate: str, merge_policy: str) -> RunResult:
    """:func:`append_index` to a BM25F index (``old``: its manifest): the new documents' segments of each field
    built (:func:`_field_builder`) and joined, then the commit (:meth:`IndexWriter.append_fields`)."""
    config = WriterConfig(tok_cfg, on_duplicate=on_duplicate, fields=fields)
    with run.output(expect) as tmp:
        counts, res = IndexWriter(run, tmp, None, config, path).append_fields(
            _field_builder(run, tok_cfg, path, run_kw), index, old, merge_policy)
    return run.result(res.backend, res.scheduler, res.n_workers, counts,
                      {"variant": old["variant"], "k1": old["k1"], "b": old["b"], "delta": old["delta"],
                       "tokenizer": old["tokenizer"], "bm25f": old["bm25f"]},
                      headline={"documents": counts["n_docs"], "terms": counts["n_terms"],
                                "postings": counts["n_postings"]})


def _append_one_field(run: PipelineRun, path, index, old: dict, expect, tok_cfg: TokenizerConfig, read_kw: dict,
                      compute_kw: dict, on_duplicate: str, merge_policy: str) -> RunResult:
    """:func:`append_index` to a one-field index (``old``: its manifest): the new documents' segments built on
    the build's routes with the index's texts, positions and kept columns, then the commit
    (:meth:`IndexWriter.append`)."""
    config = WriterConfig.of_index(old, on_duplicate)
    be = run.resolve_backend(compute_kw["backend"])
    src, reopen = open_source(path, be, **read_kw)
    src.check_documents = None  # a frame's repeated ids: on_duplicate decides, over the written segments
    with run.shown(), run.compute(be, client=compute_kw["client"], scheduler=compute_kw["scheduler"],
                                  nbytes=src.input_bytes, n_workers=compute_kw["n_workers"],
                                  worker_threads=True) as info, \
            run.output(expect, workers_write=True) as tmp:
        counts = IndexWriter(run, tmp, info, config, path).append(src, reopen, index, old, merge_policy)
    return run.result(info.backend, info.scheduler, info.n_workers, counts,
                      {"variant": old["variant"], "k1": old["k1"], "b": old["b"], "delta": old["delta"],
                       "tokenizer": old["tokenizer"]},
                      headline={"documents": counts["n_docs"], "terms": counts["n_terms"],
                                "postings": counts["n_postings"]})


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
