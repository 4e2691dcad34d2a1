"""The corpus front end: read -> tokenize -> encode -> count on dask partitions (Wakatsuki et al., steps 1-6).

Every pipeline that starts from text (``bm25``, ``cluster``, ``lda``) builds its input here, so the
chain is written once and runs under the one scheduler policy
(:func:`cutext.stages.runtime.compute.compute_context`): a ``client=`` given to a pipeline runs these stages.

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

``read``      :func:`cutext.stages.readers.files.number_documents` (read every piece, dense ``doc_id``);
``tokenize``  :func:`cutext.stages.text.public.tokenize` -> ``(doc_id, token)`` (partition summaries persisted);
``encode``    :func:`cutext.stages.text.public.encode` -> vocabulary (the global step), ``(doc_id, term_id)``;
``count``     :func:`cutext.stages.text.public.count` -> ``(term_id, doc_id, tf, dl)``, global ``df``, lengths.

The last three are the public stages (``cutext.stages.text.tokenize`` ... re-exported by
``cutext.stages``): the pipelines are made of exactly the calls a user makes on a dask frame.

The backend is the resolved string at the edge (:func:`open_corpus` makes pandas or cudf
partitions); past it every stage takes its library from the partitions.
"""
from __future__ import annotations

import contextlib
import functools
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from cutext.kernels.backend import is_gpu, meta, to_host
from cutext.stages.readers.files import CorpusSource, number_documents
from cutext.stages.readers.frames import spread_source
from cutext.stages.readers.source import open_corpus
from cutext.stages.runtime.compute import ComputeInfo, compute_context, materialize
from cutext.stages.runtime.progress import stage
from cutext.stages.runtime.reprs import short_repr
from cutext.stages.text import public as api
from cutext.stages.text.partitions import _doc_table
from cutext.stages.text.tokenize import TokenizerConfig
from cutext.stages.text.tokens import WithDocIds

__all__ = ["STAGES", "Corpus", "build_corpus", "corpus_session"]

STAGES = ("read", "tokenize", "encode", "count")


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

    def __repr__(self) -> str:
        return short_repr(self, ["docs", "n_docs", "n_terms", "n_tokens", "counts", "format"])

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
    (:func:`cutext.stages.runtime.progress.stage`; a no-op outside one or with ``progress=False``)."""

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


def _number_documents(table, counts: np.ndarray, pieces):
    """``doc_id`` and filled-in source ids for the document table (as ``assign_doc_ids`` does)."""

    return number_documents(table, counts, pieces)


def build_corpus(source: CorpusSource, tokenizer: TokenizerConfig | None, info: ComputeInfo, *,
                 count: bool = True, keep_tokens: bool = False, run_stage=None, spill=None) -> Corpus:
    """Run the front end's stages on a planned corpus, inside an entered compute context.

    Memory stays bounded by the input: the text is read twice (once to number the
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
        The context the stages run in (:func:`cutext.stages.runtime.compute.compute_context`); its
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
        path when the device is too small for the corpus (:func:`cutext.stages.runtime.compute.gpu_spill_budget`).
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

    cfg = tokenizer or TokenizerConfig.make()
    timings: dict[str, float] = {}
    raw = source.docs
    run = _shown(run_stage or _timed(timings), raw.npartitions)
    like = raw._meta

    # GPU: the device keeps the read text until the tokenize stage has scanned it, so
    # the input is read once; the CPU, and the GPU with spill=, read it twice and keep no text
    # (the host bound, limited device memory)
    held = {}

    def _read():
        nonlocal source, raw
        if info.client is not None:  # an unsplittable input still gives every worker partitions
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

    # the public stages (cutext.stages.text.public) on the text numbered by the read stage's scan (on the GPU
    # the text the read stage kept on the device); with spill= the token table's summaries are files
    def numbered_texts(frames):
        return frames.map_partitions(WithDocIds(offsets, "text"),
                                     meta=meta({"doc_id": "int64", "text": "string"}, like),
                                     enforce_metadata=False, align_dataframes=False)

    was_held = "text" in held
    texts = numbered_texts(held.pop("text", raw))
    spill = Path(spill) if spill is not None else None
    tokens = run("tokenize", functools.partial(api.tokenize, texts, cfg, spill=spill))
    if was_held:
        # the device text is not needed after the scan: the table's rows re-read the input, so the
        # text is freed before the count stage adds its table (peak device memory)
        tokens = tokens.with_texts(numbered_texts(raw))
    del texts
    vocab, encoded = run("encode", lambda: api.encode(tokens))
    counts = df = None
    if count:
        # in-process (or spilled): each partition's summary is freed as its counts are made (peak
        # memory: the counts, not the counts beside every summary)
        release = spill is not None or (info.client is None and not keep_tokens)
        c = run("count", lambda: (api.count_releasing if release else api.count)(encoded, n_docs=n_docs))
        counts, df, lengths = c.counts, c.df, c.lengths
    else:
        lengths = api.token_lengths(tokens, n_docs)
    if spill is not None:  # the summaries are superseded by the vocabulary and the counts
        tokens.release()
    kept = materialize(tokens.to_frame(), info) if keep_tokens else None
    return Corpus(docs, kept, vocab, encoded.to_frame(), counts, lengths, df, n_docs, source, info, timings)


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
        Without a client: the policy of :func:`cutext.stages.runtime.compute.compute_context`.
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
