"""The corpus front end: read -> tokenize -> encode -> count on dask partitions (paper 004, steps 1-6).

Every pipeline that starts from text (``bm25``, ``cluster``, ``lda``) builds its input here, so the
chain is written once and runs under the one scheduler policy
(:func:`cutext.stages.compute.compute_context`): a ``client=`` given to a pipeline runs these stages.

Two calls, because the compute context is chosen from the input's size::

    src = open_corpus(path, backend="cpu")                  # plan the pieces; nothing is read
    with compute_context(src.backend, client=client, nbytes=src.input_bytes) as info:
        corpus = build_corpus(src, TokenizerConfig.make(), info)
        corpus.counts                                       # (term_id, doc_id, tf, dl), persisted

or the two at once with :func:`corpus_session`.  The persisted collections live as long as the
compute context (a local cluster closes with it): take to the host (:meth:`Corpus.host_counts`,
:meth:`Corpus.source_ids`) what must outlive it.

Stages and their timing names (seconds, wall clock; each stage is persisted before the next one
starts, so the timings are honest):

``read``      :func:`cutext.stages.read.number_documents` (read every piece, dense ``doc_id``);
``tokenize``  :func:`cutext.stages.api.tokenize` -> ``(doc_id, token)`` (partition summaries persisted);
``encode``    :func:`cutext.stages.api.encode` -> vocabulary (the global step), ``(doc_id, term_id)``;
``count``     :func:`cutext.stages.api.count` -> ``(term_id, doc_id, tf, dl)``, global ``df``, lengths.

The last three are the public stages (``cutext.stages.tokenize`` ... re-exported by
``cutext.stages``): the pipelines are made of exactly the calls a user makes on a dask frame.

The backend is the resolved string at the edge (:func:`open_corpus` makes pandas or cudf
partitions); past it every stage takes its library from the partitions.
"""
from __future__ import annotations

import contextlib
import functools
import time
from dataclasses import dataclass, field

import dask.dataframe as dd
import numpy as np
import pyarrow as pa

from cutext.kernels.backend import array_module, is_gpu, meta, to_host, values
from cutext.stages.compute import (ComputeInfo, StepClock, compute_all, compute_context, input_bytes, materialize,
                                   nbytes_of, shared_key)
from cutext.stages.count import run_lengths
from cutext.stages.encode import build_vocabulary, encode_partition, lookup_ids, vocabulary_frame
from cutext.stages.read import DEFAULT_BLOCKSIZE, DEFAULT_MAX_RATIO, read_corpus
from cutext.stages.sort import pair_keys, sort_pairs
from cutext.stages.tokenize import TokenizerConfig, tokenize_partition

__all__ = ["CorpusSource", "Corpus", "open_corpus", "build_corpus", "corpus_session", "STAGES"]

STAGES = ("read", "tokenize", "encode", "count")


@dataclass
class CorpusSource:
    """A planned corpus: the lazy reader and what the compute context needs to know.

    Attributes
    ----------
    path : str, os.PathLike or list
        The input as given.
    docs : dask.dataframe.DataFrame
        Lazy ``(source_id: string, text: string, replaced: int32)``, one partition a piece, pandas
        or cudf partitions.
    pieces : list of cutext.stages.read.Piece
    format : str
        The resolved reader format.
    input_bytes : int
        Bytes of the input files (the compute context's size test).
    backend : {"cpu", "gpu"}
        The resolved backend the partitions were made for.
    check_documents : callable, optional
        ``check_documents(table)`` on the read stage's document table ``(source_id, replaced)``
        (a frame input's duplicate-id check, :mod:`cutext.stages.sources`); raises on bad input.
    """

    path: object
    docs: object
    pieces: list
    format: str
    input_bytes: int
    backend: str
    check_documents: object = None


def open_corpus(path, *, backend: str = "cpu", format="auto", text_column=None, id_column=None,
                blocksize=DEFAULT_BLOCKSIZE, encoding="utf-8", storage_options=None, glob=None,
                max_ratio=DEFAULT_MAX_RATIO) -> CorpusSource:
    """Plan a corpus (list its pieces, measure its bytes); nothing is read yet.

    Parameters
    ----------
    path : str, os.PathLike, list, or a frame
        A file, a directory, a glob or fsspec URLs (:func:`cutext.stages.read.read_corpus`); or a
        pandas / cudf / dask / dask-cudf DataFrame or Series (:func:`cutext.stages.sources.frame_source`).
    backend : {"cpu", "gpu"}
        The resolved backend (``cutext.kernels.backend.resolve_backend``): pandas or cudf partitions.
    format, text_column, id_column, blocksize, encoding, storage_options, glob, max_ratio
        Reader settings (:func:`cutext.stages.read.read_corpus`; for a frame only ``text_column``,
        ``id_column`` and ``blocksize`` apply, the others are refused unless at their defaults).

    Returns
    -------
    CorpusSource

    Raises
    ------
    FileNotFoundError
        The path matches nothing.
    CorpusError (ValueError)
        An unknown format or unreadable input found while planning; a frame without its text
        column or with non-string text (``FrameError``).
    ValueError
        ``backend`` is not ``"cpu"`` / ``"gpu"`` (resolve ``"auto"`` first).
    """
    from fsspec.core import url_to_fs

    from cutext.stages.sources import frame_source, is_frame

    is_gpu(backend)  # validates the resolved string
    if is_frame(path):
        return frame_source(path, backend=backend, format=format, text_column=text_column, id_column=id_column,
                            blocksize=blocksize, encoding=encoding, storage_options=storage_options, glob=glob,
                            max_ratio=max_ratio)
    docs, pieces, fmt = read_corpus(path, format=format, text_column=text_column, id_column=id_column,
                                    blocksize=blocksize, encoding=encoding, storage_options=storage_options,
                                    glob=glob, backend=backend, max_ratio=max_ratio)
    p0 = path[0] if isinstance(path, (list, tuple)) else path
    fs = url_to_fs(str(p0), **(storage_options or {}))[0]
    return CorpusSource(path, docs, pieces, fmt, input_bytes(pieces, fs), backend)


@dataclass
class Corpus:
    """A corpus through the front end: persisted dask collections and host summaries.

    Attributes
    ----------
    docs : dask.dataframe.DataFrame
        ``(doc_id: int64, source_id: string, text: string, replaced: int32)``, persisted.
    tokens : dask.dataframe.DataFrame or None
        ``(doc_id: int64, token: string)``, persisted; None unless ``keep_tokens=True`` (it is
        the largest table and is dropped after the encode stage).
    vocab : pyarrow.LargeStringArray, shape (V,)
        Sorted by UTF-8 bytes; term id ``i + 1`` is ``vocab[i]``, id 0 is reserved for unknown terms.
    encoded : dask.dataframe.DataFrame
        ``(doc_id: int64, term_id: int32)``, one row per token, persisted.
    counts : dask.dataframe.DataFrame or None
        ``(term_id: int32, doc_id: int64, tf: int32, dl: int32)``, one row per distinct
        (document, term), sorted by (term_id, doc_id) within each partition, persisted; None when
        built with ``count=False``.
    lengths : numpy int64 array, shape (n_docs,)
        Tokens per document (0 for a document without a token).
    df : numpy int64 array, shape (V + 1,) or None
        Documents per term id (``df[0] = 0``); None when built with ``count=False``.
    n_docs : int
    source : CorpusSource
    info : ComputeInfo
        Where the stages ran.
    timings : dict
        Seconds per stage, keys of :data:`STAGES` that ran.
    """

    docs: object
    tokens: object
    vocab: pa.Array
    encoded: object
    counts: object
    lengths: np.ndarray
    df: np.ndarray | None
    n_docs: int
    source: CorpusSource
    info: ComputeInfo
    timings: dict = field(default_factory=dict)

    @property
    def n_terms(self) -> int:
        """V, the vocabulary size (term ids 1 .. V)."""
        return len(self.vocab)

    @property
    def n_tokens(self) -> int:
        return int(self.lengths.sum())

    @property
    def format(self) -> str:
        return self.source.format

    @property
    def pieces(self) -> list:
        return self.source.pieces

    @property
    def input_bytes(self) -> int:
        return self.source.input_bytes

    def host_counts(self) -> dict:
        """The counts on the host: ``doc_id``, ``term_id``, ``tf``, int64 arrays, one entry per
        distinct (document, term), in partition order (each partition sorted by term, then document).

        Raises
        ------
        ValueError
            The corpus was built with ``count=False``.
        """
        if self.counts is None:
            raise ValueError("this corpus was built without the count stage (count=False)")
        c = to_host(self.counts[["doc_id", "term_id", "tf"]].compute())
        return {k: c[k].to_numpy(np.int64) for k in ("doc_id", "term_id", "tf")}

    def source_ids(self):
        """pandas DataFrame ``(doc_id: int64, source_id: string)`` on the host, sorted by doc_id."""
        ids = to_host(self.docs[["doc_id", "source_id"]].compute())
        return ids.sort_values("doc_id", ignore_index=True)


def _shown(run, partitions: int):
    """``run`` with each stage's progress shown (partitions done / total) inside a pipeline run
    (:func:`cutext.stages.progress.stage`; a no-op outside one or with ``progress=False``)."""
    from cutext.stages.progress import stage

    def shown(name, fn):
        with stage(name, partitions):
            return run(name, fn)
    return shown


def _timed(timings: dict):
    def run(name, fn):
        t0 = time.perf_counter()
        out = fn()
        timings[name] = time.perf_counter() - t0
        return out
    return run


# ----------------------------------------------------------------------------- partition tasks
# Bounded memory (issue 15): no stage persists the text or a row per token.  The read stage keeps
# the document table without its text; the tokenize stage re-reads each piece and keeps only a
# compact per-partition result (:class:`_Scan`: the partition's unique tokens and its distinct
# (local code, document) pairs with their tf, 12 bytes a pair); the count stage turns those into
# the ``counts`` table with global term ids.

def _doc_table(df):
    """A read partition without its text: ``(source_id, replaced)``."""
    return df[["source_id", "replaced"]].copy()


@dataclass
class _Scan:
    """The tokenize stage's result for one partition (arrays of the partition's library).

    uniq : Series of str, shape (U,)
        The partition's distinct tokens (local code ``i`` is ``uniq[i]``).
    code, pos, tf : int32 arrays, shape (P,)
        One entry per distinct (token, document) pair of the partition, sorted by (code, pos):
        the local code, the document's position in the partition, the count.
    lengths : int64 array, shape (n_docs_of_partition,)
        Tokens per document.
    """

    uniq: object
    code: object
    pos: object
    tf: object
    lengths: object

    def __sizeof__(self) -> int:  # what a distributed scheduler weighs before moving it (nbytes_of)
        return object.__sizeof__(self) + nbytes_of(self.uniq, self.code, self.pos, self.tf, self.lengths)


class _Tokens:
    """``(doc_id, token)`` of one read partition, doc ids from the partition offsets."""

    def __init__(self, cfg, offsets):
        self.cfg = cfg
        self.offsets = offsets

    def __call__(self, df, partition_info=None):
        xp = array_module(df)
        off = int(self.offsets[partition_info["number"]]) if partition_info is not None else 0
        frame = df[["text"]].copy()
        frame.insert(0, "doc_id", xp.arange(off, off + len(df), dtype=np.int64))
        return tokenize_partition(frame, self.cfg)


# the task keys name their stage (tokenize_/encode_/count_partition...): progress, task streams
# and tests/test_faults.py find the stages by them
def tokenize_partition_scan(df, cfg):
    """Tokenize one read partition and count its (token, document) pairs locally (a :class:`_Scan`).

    cudf partitions take the device text path (:func:`cutext.stages.gputext.scan_partition`:
    token byte offsets and hashes, no token strings); the string path below is the CPU path and
    the device path's exact fallback (a hash collision)."""
    if is_gpu(df):
        from cutext.stages.gputext import scan_partition

        got = scan_partition(df["text"], cfg)
        if got is not None:
            return _Scan(*got)
    xp = array_module(df)
    n = len(df)
    toks = _Tokens(cfg, None)(df)  # doc_id = position within the partition
    del df
    pos = values(toks["doc_id"])
    lengths = xp.bincount(pos, minlength=n).astype(np.int64) if len(pos) else xp.zeros(n, np.int64)
    if len(toks) == 0:
        z = xp.zeros(0, np.int32)
        return _Scan(toks["token"].iloc[:0], z, z, z, lengths)
    codes, uniq = toks["token"].factorize()
    del toks
    codes = xp.asarray(codes).astype(np.int32)
    keys, doc_min, span = sort_pairs(codes, pos)
    del codes, pos
    ukeys, tf = run_lengths(keys)
    del keys
    return _Scan(uniq, (ukeys // span).astype(np.int32), (ukeys % span + doc_min).astype(np.int32),
                 tf.astype(np.int32), lengths)


def encode_partition_uniques(scan: _Scan, like):
    """The scan's unique tokens as a ``(token,)`` frame (for :func:`build_vocabulary`)."""
    lib = type(like)
    return lib({"token": scan.uniq})


def _scan_lengths(scan: _Scan):
    return to_host(scan.lengths)


def count_partition_scan(scan: _Scan, vocab_frame, offset: int, like):
    """``(term_id, doc_id, tf, dl)`` of one partition from its scan: what
    :func:`cutext.stages.count.count_partition` gives for the partition's encoded tokens."""
    lib = type(like)
    xp = array_module(scan.lengths)
    if len(scan.code) == 0:
        return lib({"term_id": xp.zeros(0, np.int32), "doc_id": xp.zeros(0, np.int64),
                    "tf": xp.zeros(0, np.int32), "dl": xp.zeros(0, np.int32)})
    clock = StepClock(xp)
    lut = lookup_ids(scan.uniq, vocab_frame)
    term = lut[scan.code]
    clock("count: term ids")
    keys, _, span = pair_keys(term, scan.pos)
    order = xp.argsort(keys, kind="stable")
    del keys
    clock("count: pair sort")
    pos = scan.pos[order]
    out = lib({"term_id": term[order], "doc_id": pos.astype(np.int64) + offset, "tf": scan.tf[order],
               "dl": scan.lengths[pos].astype(np.int32)})
    clock("count: gather")
    return out


# ----------------------------------------------------------------------------- spilled partitions
# With ``spill=`` (a directory every worker can reach), the per-partition results are files, not
# persisted collections: host memory then holds the partitions in flight, never the corpus
# (and on the GPU, device memory holds the partitions in flight: each is copied to the host when
# written and back when read)
# (issue 15: <= 3x the input plus a constant).  Each file is written under a temporary name and
# renamed, so a retried task (a killed worker) rewrites it whole.

SPILL_SCAN, SPILL_COUNTS = "scan", "counts"
COUNT_COLUMNS = ("term_id", "doc_id", "tf", "dl")


def spill_dir(spill, stage: str, i: int):
    """Folder of partition ``i``'s spilled ``stage`` (``"scan"`` or ``"counts"``) result."""
    from pathlib import Path

    return Path(spill) / f"{stage}-{i:05d}"


def _save_arrays(folder, arrays: dict) -> None:
    import os

    folder.mkdir(parents=True, exist_ok=True)
    for name, a in arrays.items():
        tmp = folder / f".{name}.{os.getpid()}.npy"
        np.save(tmp, np.ascontiguousarray(to_host(a)), allow_pickle=False)
        os.replace(tmp, folder / f"{name}.npy")


def load_spilled(folder, names, mmap: bool = False) -> dict:
    """Arrays ``names`` of a spilled partition (``mmap``: memory-mapped, read only where sliced)."""
    return {n: np.load(folder / f"{n}.npy", mmap_mode="r" if mmap else None, allow_pickle=False) for n in names}


def tokenize_partition_spill(df, cfg, folder):
    """:func:`tokenize_partition_scan` of one read partition, written to ``folder`` (numpy files and the
    unique tokens as an Arrow IPC file); returns the partition's document lengths (int64)."""
    import os

    scan = tokenize_partition_scan(df, cfg)
    del df
    _save_arrays(folder, {"code": scan.code, "pos": scan.pos, "tf": scan.tf})
    uniq = scan.uniq.to_arrow() if is_gpu(scan.uniq) else scan.uniq
    uniq = pa.array(uniq, type=pa.large_string()) if len(uniq) else pa.array([], pa.large_string())
    tmp = folder / f".uniq.{os.getpid()}.arrow"
    with pa.OSFile(str(tmp), "wb") as fh, pa.ipc.new_file(fh, pa.schema([("token", pa.large_string())])) as w:
        w.write_table(pa.table({"token": uniq}))
    os.replace(tmp, folder / "uniq.arrow")
    return np.asarray(to_host(scan.lengths), np.int64)


def _spilled_uniques(folder, like=None):
    """The spilled scan's unique tokens: a pandas Series, or a cudf one when ``like`` is a cudf object."""
    import pandas as pd

    with pa.memory_map(str(folder / "uniq.arrow")) as mm:
        arr = pa.ipc.open_file(mm).read_all().column("token").combine_chunks()
    if like is not None and is_gpu(like):
        from cutext.stages.gputext import cudf_strings

        return cudf_strings(arr)
    return pd.Series(arr, dtype=pd.StringDtype("pyarrow"))


def _to_like(arrays: dict, like) -> dict:
    """Host arrays as arrays of ``like``'s library (copied to the device for a cudf ``like``)."""
    if not is_gpu(like):
        return arrays
    import cupy

    return {k: cupy.asarray(a) for k, a in arrays.items()}


def encode_partition_uniques_spilled(folder, like):
    """The spilled scan's unique tokens as a ``(token,)`` frame (for :func:`build_vocabulary`)."""
    return type(like)({"token": _spilled_uniques(folder, like)})


def count_partition_spill(scan_folder, vocab_frame, offset: int, lengths, like, folder):
    """:func:`count_partition_scan` of a spilled scan, written to ``folder`` as ``term_id`` (int32),
    ``doc_id`` (int64), ``tf``, ``dl`` (int32) numpy files, sorted by (term_id, doc_id).

    Returns
    -------
    (terms, n) : int32 and int64 arrays, the partition's distinct term ids and their document counts
        (its share of ``df``).
    """
    a = _to_like(dict(load_spilled(scan_folder, ("code", "pos", "tf")), lengths=np.asarray(lengths)), like)
    scan = _Scan(_spilled_uniques(scan_folder, like), a["code"], a["pos"], a["tf"], a["lengths"])
    del a
    c = count_partition_scan(scan, vocab_frame, offset, like)
    del scan
    terms, n = run_lengths(values(c["term_id"]))
    terms, n = to_host(terms).astype(np.int32), to_host(n).astype(np.int64)
    _save_arrays(folder, {k: values(c[k]) for k in COUNT_COLUMNS})
    return terms, n


def load_counts_partition(folder, like):
    """A spilled counts partition as a ``(term_id, doc_id, tf, dl)`` frame (of ``like``'s library)."""
    return type(like)(_to_like(load_spilled(folder, COUNT_COLUMNS), like))


def _number_documents(table, counts: np.ndarray, pieces):
    """``doc_id`` and filled-in source ids for the document table (as ``assign_doc_ids`` does)."""
    from cutext.stages.read import number_documents

    return number_documents(table, counts, pieces)


def build_corpus(source: CorpusSource, tokenizer: TokenizerConfig | None, info: ComputeInfo, *,
                 count: bool = True, keep_tokens: bool = False, run_stage=None, spill=None) -> Corpus:
    """Run the front end's stages on a planned corpus, inside an entered compute context.

    Memory stays bounded by the input (issue 15): the text is read twice (once to number the
    documents, once to tokenize) instead of being persisted, and no table with a row per token
    is persisted; ``encoded`` (and ``tokens`` unless ``keep_tokens``) are lazy collections that
    recompute from the input.

    Parameters
    ----------
    source : CorpusSource
        From :func:`open_corpus`.
    tokenizer : TokenizerConfig, optional
        Default ``TokenizerConfig.make()`` (lowercase, no stopwords, no stemming).
    info : ComputeInfo
        The context the stages run in (:func:`cutext.stages.compute.compute_context`); its
        client, if any, runs every task.
    count : bool
        Run the count stage (``counts``, ``df``).
    keep_tokens : bool
        Keep a persisted ``(doc_id, token)`` table in the result.
    run_stage : callable, optional
        ``run_stage(name, fn) -> fn()``: runs each stage (``name`` in :data:`STAGES`), e.g. to time
        it under another name or move a progress bar.  Default: time it into ``Corpus.timings``.
    spill : str or os.PathLike, optional
        A directory (reachable by every worker) for the per-partition results.  The tokenize stage
        writes its scans there instead of persisting them, and ``counts`` is a lazy collection
        reading the count stage's files (``spill/counts-NNNNN/*.npy``, see
        :func:`load_counts_partition`): host memory holds the partitions in flight, not the corpus.
        On the GPU the same bounds device memory (the text is read twice instead of kept, and
        partitions are copied to the host as they are written); the bm25 pipeline takes this
        path when the device is too small for the corpus (:func:`cutext.stages.compute.gpu_spill_budget`).
        The caller removes the directory when it is done with ``counts``.

    Returns
    -------
    Corpus
        ``timings`` holds the stages' seconds when ``run_stage`` is the default.

    Raises
    ------
    CorpusError (ValueError)
        Unreadable input, or a corpus without documents (the message names the file).
    """
    from cutext.stages import api
    from cutext.stages.sources import spread_source

    cfg = tokenizer or TokenizerConfig.make()
    timings: dict[str, float] = {}
    raw = source.docs
    run = _shown(run_stage or _timed(timings), raw.npartitions)
    like = raw._meta

    # GPU (issue 10): the device keeps the read text until the tokenize stage has scanned it, so
    # the input is read once; the CPU, and the GPU with spill=, read it twice and keep no text
    # (issue 15's host bound, issue 10's limited device memory)
    held = {}

    def _read():
        nonlocal source, raw
        if info.client is not None:  # issue 12: an unsplittable input still gives every worker partitions
            source = spread_source(source, info.n_workers, info.client)
            raw = source.docs
        src = raw
        if is_gpu(like) and spill is None:
            src = held["text"] = materialize(raw, info)
        table = materialize(src.map_partitions(_doc_table, meta=_doc_table(like)), info)
        if source.check_documents is not None:
            source.check_documents(table)
        part_counts = np.asarray(table.map_partitions(len, meta=(None, "int64")).compute(), dtype=np.int64)
        numbered, offsets = _number_documents(table, part_counts, source.pieces)
        return materialize(numbered, info), part_counts, offsets

    docs, part_counts, offsets = run("read", _read)
    n_docs = int(part_counts.sum())

    if spill is not None:
        return _build_spilled(source, cfg, info, run, docs, part_counts, offsets, count, keep_tokens,
                              spill, timings)

    # the public stages (cutext.stages.api), on the text numbered by the read stage's scan (on the GPU
    # the text the read stage kept on the device)
    def numbered_texts(frames):
        return frames.map_partitions(api._WithDocIds(offsets, "text"),
                                     meta=meta({"doc_id": "int64", "text": "string"}, like),
                                     enforce_metadata=False, align_dataframes=False)

    was_held = "text" in held
    texts = numbered_texts(held.pop("text", raw))
    tokens_lazy = run("tokenize", functools.partial(api.tokenize, texts, cfg))
    if was_held:
        # the device text is not needed after the scan: its lazy token rows re-read the input, so the
        # text is freed before the count stage adds its table (peak device memory, issue 10)
        tokens_lazy = api.retext(tokens_lazy, numbered_texts(raw))
    del texts
    vocab, encoded = run("encode", lambda: api.encode(tokens_lazy))
    counts = df = None
    if count:
        if info.client is None and not keep_tokens:
            # in-process: each partition's scan is freed as its counts are made (peak memory:
            # the counts, not the counts beside every scan); encoded / tokens_lazy then recompute
            # from their rows if used again
            c = run("count", lambda: api.count_releasing(encoded, n_docs=n_docs))
        else:
            c = run("count", lambda: api.count(encoded, n_docs=n_docs))
        counts, df, lengths = c.counts, c.df, c.lengths
    else:
        lengths = api.token_lengths(tokens_lazy, n_docs)
    tokens = materialize(tokens_lazy, info) if keep_tokens else None
    return Corpus(docs, tokens, vocab, encoded, counts, lengths, df, n_docs, source, info, timings)


def _build_spilled(source, cfg, info, run, docs, part_counts, offsets, count, keep_tokens, spill, timings):
    """:func:`build_corpus`'s tokenize, encode and count stages with the per-partition results in files."""
    import shutil
    from pathlib import Path

    import dask

    raw, like = source.docs, source.docs._meta
    spill = Path(spill)
    spill.mkdir(parents=True, exist_ok=True)
    n_parts = raw.npartitions
    scan_dirs = [spill_dir(spill, SPILL_SCAN, i) for i in range(n_parts)]

    def _tokenize():
        tasks = [dask.delayed(tokenize_partition_spill)(p, cfg, f) for p, f in zip(raw.to_delayed(), scan_dirs)]
        lengths = compute_all(tasks, info)
        return lengths, np.concatenate(lengths) if lengths else np.zeros(0, np.int64)

    part_lengths, lengths = run("tokenize", _tokenize)
    tokens_lazy = raw.map_partitions(_Tokens(cfg, offsets), meta=meta("tokens", like), enforce_metadata=False,
                                     align_dataframes=False)

    def _encode():
        uniques = dd.from_delayed([dask.delayed(encode_partition_uniques_spilled)(f, like) for f in scan_dirs],
                                  meta=meta({"token": "string"}, like), verify_meta=False)
        vocab = build_vocabulary(uniques)
        vf = vocabulary_frame(vocab, like)
        enc = tokens_lazy.map_partitions(encode_partition, vf, meta=meta("encoded", like))
        return vocab, vf, enc

    vocab, vf, encoded = run("encode", _encode)
    counts = df = None
    if count:
        count_dirs = [spill_dir(spill, SPILL_COUNTS, i) for i in range(n_parts)]

        def _count():
            vf_key = shared_key(vf, info.client)
            tasks = [dask.delayed(count_partition_spill)(f, vf_key, int(o), ln, like, c)
                     for f, o, ln, c in zip(scan_dirs, offsets, part_lengths, count_dirs)]
            df_t = np.zeros(len(vocab) + 1, np.int64)
            for terms, n in compute_all(tasks, info):
                df_t[terms] += n
            c = dd.from_delayed([dask.delayed(load_counts_partition)(f, like) for f in count_dirs],
                                meta=meta("counts", like), verify_meta=False)
            return c, df_t

        counts, df = run("count", _count)
    for f in scan_dirs:  # superseded by the vocabulary and the counts
        shutil.rmtree(f, ignore_errors=True)
    tokens = materialize(tokens_lazy, info) if keep_tokens else None
    return Corpus(docs, tokens, vocab, encoded, counts, lengths, df, int(part_counts.sum()), source, info, timings)


@contextlib.contextmanager
def corpus_session(path, tokenizer: TokenizerConfig | None = None, backend: str = "cpu", *, client=None,
                   scheduler: str = "auto", n_workers: int | None = None, count: bool = True,
                   keep_tokens: bool = False, run_stage=None, **read_kw):
    """Plan, enter the compute context, run the front end; yields the :class:`Corpus`.

    The collections are valid inside the ``with`` block (a local cluster closes at its end).

    Parameters
    ----------
    path : str, os.PathLike or list
    tokenizer : TokenizerConfig, optional
    backend : {"cpu", "gpu"}
        The resolved backend.
    client : distributed.Client, optional
        Run every stage on this cluster.
    scheduler : {"auto", "sync", "threads", "cluster"}
        Without a client: the policy of :func:`cutext.stages.compute.compute_context`.
    n_workers : int, optional
        Workers of a local cluster.
    count, keep_tokens, run_stage
        See :func:`build_corpus`.
    **read_kw
        ``format``, ``text_column``, ``id_column``, ``blocksize``, ``encoding``,
        ``storage_options``, ``glob`` (:func:`open_corpus`).

    Yields
    ------
    Corpus

    Raises
    ------
    FileNotFoundError, CorpusError
    """
    src = open_corpus(path, backend=backend, **read_kw)
    with compute_context(backend, client=client, scheduler=scheduler, nbytes=src.input_bytes,
                         n_workers=n_workers) as info:
        yield build_corpus(src, tokenizer, info, count=count, keep_tokens=keep_tokens, run_stage=run_stage)
