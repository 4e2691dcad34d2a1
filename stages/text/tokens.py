"""The token table: the tokenize stage's one intermediate, in memory or spilled to files.

:func:`cutext.stages.text.public.tokenize` returns a :class:`TokenTable`; :func:`~cutext.stages.text.public.encode`
an :class:`EncodedTable` beside the vocabulary; :func:`~cutext.stages.text.public.count` reads either (or a plain
frame of the same columns).  A table holds, for every partition, a compact summary instead of a row per
token (the partition's distinct tokens and its distinct (token, document) pairs with their tf: a
:class:`PartSummary`), stored one of two ways:

``"memory"``  persisted dask objects (on the workers of a ``distributed.Client``, or in this process);
``"spill"``   a folder per partition (numpy files and an Arrow IPC file of the distinct tokens), so host
              (or device) memory holds the partitions in flight, never the corpus.

Both storages give the same counts.  The rows themselves, ``(doc_id, token)`` or ``(doc_id, term_id)``, are a
lazy dask collection computed again from the texts (:meth:`TokenTable.to_frame`); a collection derived from
them (filtered, joined) is a plain frame, counted row by row.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

import dask.local
import numpy as np
import pandas as pd
import pyarrow as pa

from cutext.kernels.backend import array_module, is_gpu, is_gpu_object, meta, to_host, values
from cutext.stages.runtime.compute import nbytes_of
from cutext.stages.runtime.reprs import short_repr
from cutext.stages.text.count import run_lengths
from cutext.stages.text.encode import encode_partition
from cutext.stages.text.partitions import (
    COUNT_COLUMNS,
    SPILL_COUNTS,
    SPILL_SCAN,
    _save_arrays,
    _Scan,
    _spilled_uniques,
    _to_like,
    count_partition_scan,
    load_spilled,
    spill_dir,
    tokenize_partition_scan,
)
from cutext.stages.text.tokenize import TokenizerConfig, tokenize_partition

__all__ = ["STORAGES", "EncodedTable", "PartSummary", "TokenTable"]

STORAGES = ("memory", "spill")


# ----------------------------------------------------------------------------- partition tasks

class WithDocIds:
    """``(doc_id, text)`` of a partition, ``doc_id`` from the partition offsets (the numbering scan)."""

    def __init__(self, offsets, column: str):
        self.offsets = offsets
        self.column = column

    def __call__(self, df, partition_info=None):
        xp = array_module(df)
        off = int(self.offsets[partition_info["number"]]) if partition_info is not None else 0
        col = df if df.ndim == 1 else df[self.column]
        frame = col.to_frame(name="text")
        frame.insert(0, "doc_id", xp.arange(off, off + len(frame), dtype=np.int64))
        return frame


def _host_text(col):
    """A host text column as pandas' pyarrow string dtype (what the CPU split reads)."""
    if isinstance(col.dtype, pd.StringDtype) and col.dtype.storage == "pyarrow":
        return col
    return pd.Series(pa.array(col, type=pa.large_string(), from_pandas=True), index=col.index,
                     dtype=pd.StringDtype("pyarrow"))


def _text_frame(df, column: str):
    """``(doc_id, text)`` of a partition of the user's frame (text as strings, missing text empty)."""
    lib = type(df)
    col = df[column]
    col = col.fillna("") if is_gpu_object(col) else _host_text(col)
    return lib({"doc_id": values(df["doc_id"]).astype(np.int64, copy=False), "text": col.reset_index(drop=True)})


class _Tokenize:
    """Picklable partition function: ``(doc_id, <text column>)`` -> ``(doc_id, token)``."""

    def __init__(self, cfg: TokenizerConfig, column: str):
        self.cfg = cfg
        self.column = column

    def __call__(self, df):
        return tokenize_partition(_text_frame(df, self.column), self.cfg)


@dataclass
class PartSummary:
    """One partition's summary: the scan (:class:`cutext.stages.text.partitions._Scan`, positions within the
    partition) and how positions map to doc ids (``offset + pos`` when the partition's ids are
    contiguous, else ``doc_ids[pos]``)."""

    scan: object
    offset: int
    doc_ids: object

    def __sizeof__(self) -> int:  # the scan's arrays, not a few dozen bytes (compute.nbytes_of)
        return object.__sizeof__(self) + nbytes_of(self.scan, self.doc_ids)


# the task keys name their stage (tokenize_/encode_/count_partition...): progress, task streams
# and tests/faults/test_workers.py find the stages by them
def tokenize_partition_summary(df, cfg: TokenizerConfig, column: str) -> PartSummary:
    """Tokenize one partition and summarize it."""
    frame = _text_frame(df, column)
    d = values(frame["doc_id"])
    n = len(d)
    xp = array_module(d)
    contiguous = n == 0 or (int(d[-1]) - int(d[0]) == n - 1 and bool((xp.diff(d) == 1).all()))
    offset = int(d[0]) if n else 0
    scan = tokenize_partition_scan(frame, cfg)
    return PartSummary(scan, offset, None if contiguous else d)


def summary_docs(ps: PartSummary):
    """(doc ids, lengths) of a summary, host int64 arrays."""
    lengths = np.asarray(to_host(ps.scan.lengths), np.int64)
    if ps.doc_ids is None:
        return np.arange(ps.offset, ps.offset + len(lengths), dtype=np.int64), lengths
    return np.asarray(to_host(ps.doc_ids), np.int64), lengths


def tokenize_partition_spill(df, cfg: TokenizerConfig, column: str, folder):
    """:func:`tokenize_partition_summary` of one partition, written to ``folder`` (numpy files, the distinct
    tokens as an Arrow IPC file, ``summary.json``); returns :func:`summary_docs` of it.  Each file is
    written under a temporary name and renamed, so a retried task (a killed worker) rewrites it whole."""
    ps = tokenize_partition_summary(df, cfg, column)
    del df
    scan = ps.scan
    arrays = {"code": scan.code, "pos": scan.pos, "tf": scan.tf, "lengths": scan.lengths}
    if ps.doc_ids is not None:
        arrays["doc_ids"] = ps.doc_ids
    _save_arrays(folder, arrays)
    uniq = scan.uniq.to_arrow() if is_gpu(scan.uniq) else scan.uniq
    uniq = pa.array(uniq, type=pa.large_string()) if len(uniq) else pa.array([], pa.large_string())
    tmp = folder / f".uniq.{os.getpid()}.arrow"
    with pa.OSFile(str(tmp), "wb") as fh, pa.ipc.new_file(fh, pa.schema([("token", pa.large_string())])) as w:
        w.write_table(pa.table({"token": uniq}))
    os.replace(tmp, folder / "uniq.arrow")
    tmp = folder / f".summary.{os.getpid()}.json"
    tmp.write_text(json.dumps({"offset": ps.offset, "contiguous": ps.doc_ids is None}))
    os.replace(tmp, folder / "summary.json")
    return summary_docs(ps)


def load_summary(folder, like) -> PartSummary:
    """A spilled :class:`PartSummary` (arrays of ``like``'s library: copied to the device for cudf)."""
    head = json.loads((folder / "summary.json").read_text())
    names = ("code", "pos", "tf", "lengths") + (() if head["contiguous"] else ("doc_ids",))
    a = _to_like(load_spilled(folder, names), like)
    scan = _Scan(_spilled_uniques(folder, like), a["code"], a["pos"], a["tf"], a["lengths"])
    return PartSummary(scan, int(head["offset"]), a.get("doc_ids"))


def encode_partition_uniques(ps: PartSummary, like):
    """The summary's distinct tokens as a ``(token,)`` frame (the encode stage's global step)."""
    return type(like)({"token": ps.scan.uniq})


def encode_partition_uniques_spilled(folder, like):
    """The spilled summary's distinct tokens as a ``(token,)`` frame."""
    return type(like)({"token": _spilled_uniques(folder, like)})


def count_partition_summary(ps: PartSummary, vocab_frame, like):
    """``(term_id, doc_id, tf, dl)`` of one partition from its summary (the count stage)."""
    if ps.doc_ids is None:
        return count_partition_scan(ps.scan, vocab_frame, ps.offset, like)
    out = count_partition_scan(ps.scan, vocab_frame, 0, like)
    out["doc_id"] = ps.doc_ids[values(out["doc_id"])].astype(np.int64)
    return out


def count_partition_spill(scan_folder, vocab_frame, like, folder):
    """:func:`count_partition_summary` of a spilled summary, written to ``folder`` as ``term_id`` (int32),
    ``doc_id`` (int64), ``tf``, ``dl`` (int32) numpy files.

    Returns
    -------
    (terms, n) : int32 and int64 arrays, the partition's distinct term ids and their document counts
        (its share of ``df``).
    """
    c = count_partition_summary(load_summary(scan_folder, like), vocab_frame, like)
    terms, n = run_lengths(values(c["term_id"]))
    terms, n = to_host(terms).astype(np.int32), to_host(n).astype(np.int64)
    _save_arrays(folder, {k: values(c[k]) for k in COUNT_COLUMNS})
    return terms, n


class _Taker:
    """Hands out a table's persisted summaries one at a time and forgets each one handed out, so that
    a partition's summary is freed as soon as its count task has used it (in-process runs)."""

    def __init__(self, items: list):
        self.items = items

    def take(self, i: int):
        item, self.items[i] = self.items[i], None
        if item is None:
            raise RuntimeError(f"the summary of partition {i} was already counted and released")
        return item.compute(scheduler=dask.local.get_sync) if hasattr(item, "dask") else item

    def __dask_tokenize__(self):
        return ("cutext-taker", id(self))


def count_partition_taken(taker: _Taker, i: int, vocab_frame, like):
    """:func:`count_partition_summary` of partition ``i``'s summary, released as it is used."""
    return count_partition_summary(taker.take(i), vocab_frame, like)


# ----------------------------------------------------------------------------- the tables

@dataclass
class TokenTable:
    """The tokenize stage's result: ``(doc_id, token)`` rows and a summary per partition.

    Attributes
    ----------
    texts : dask DataFrame ``(doc_id: int64, <column>: string)``
        What the rows are computed from (:meth:`to_frame`).
    tokenizer : TokenizerConfig
    column : str
        The text column of ``texts``.
    parts : list or None
        One summary per partition: persisted dask objects of :class:`PartSummary` (``storage="memory"``),
        or folders (``storage="spill"``); None for a table tokenized lazily (``persist=False``).  An
        entry is None once :func:`~cutext.stages.text.public.count_releasing` has used it.
    doc_ids, lengths : numpy int64 arrays, shape (n_docs,), or None
        Every document's id and token count, in partition order (None without summaries).
    storage : {"memory", "spill"} or None
    spill : pathlib.Path or None
        The folder of a spilled table (``scan-NNNNN/`` per partition; the count stage writes
        ``counts-NNNNN/`` beside them).
    """

    texts: object
    tokenizer: TokenizerConfig
    column: str = "text"
    parts: list | None = None
    doc_ids: np.ndarray | None = None
    lengths: np.ndarray | None = None
    storage: str | None = None
    spill: Path | None = None
    _frame: object = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        return short_repr(self, ["texts", "column", "storage", "lengths"])

    @property
    def columns(self) -> list:
        return ["doc_id", "token"]

    @property
    def npartitions(self) -> int:
        return self.texts.npartitions

    @property
    def _meta(self):
        return meta("tokens", self.texts._meta)

    @property
    def summarized(self) -> bool:
        """The summaries are all there: :func:`~cutext.stages.text.public.encode` and ``count`` use them
        (else the rows are computed again and counted row by row)."""
        return self.parts is not None and all(p is not None for p in self.parts)

    def to_frame(self):
        """dask DataFrame ``(doc_id: int64, token: string)``: one row per token in document order, lazy
        (computed from ``texts``); documents without a token have no row."""
        if self._frame is None:
            self._frame = self.texts.map_partitions(_Tokenize(self.tokenizer, self.column), meta=self._meta,
                                                    enforce_metadata=False, align_dataframes=False)
        return self._frame

    def compute(self, **kw):
        """``to_frame().compute()``: the rows in memory (pandas or cudf)."""
        return self.to_frame().compute(**kw)

    def with_texts(self, texts) -> TokenTable:
        """This table with its rows computed from ``texts`` (the same ``(doc_id, text)`` partitions, e.g.
        the same files read again) and its summaries shared, so that a persisted text collection can
        be freed once it is tokenized."""
        if not self.summarized:
            raise ValueError("with_texts needs a table with its summaries (tokenize(..., persist=True))")
        return replace(self, texts=texts, column="text", _frame=None)

    def lengths_by_id(self, n_docs: int | None = None) -> np.ndarray:
        """Tokens per document, int64 array of shape (n_docs,), index = doc_id (default n_docs: the
        largest doc id + 1, or the number of documents when they are numbered 0..N-1)."""
        ids = self.doc_ids
        contiguous = len(ids) == 0 or (ids[0] == 0 and bool(np.all(np.diff(ids) == 1)))
        n = len(ids) if n_docs is None and contiguous else (int(ids.max()) + 1 if n_docs is None else int(n_docs))
        if contiguous and n == len(ids):
            return self.lengths
        out = np.zeros(n, np.int64)
        out[ids] = self.lengths
        return out

    def release(self) -> None:
        """Free the summaries (a spilled table's folders are removed); the rows stay computable."""
        if self.storage == "spill" and self.parts is not None:
            for f in self.parts:
                if f is not None:
                    shutil.rmtree(f, ignore_errors=True)
        if self.parts is not None:
            self.parts[:] = [None] * len(self.parts)


def spill_folders(spill, n: int, stage: str = SPILL_SCAN) -> list:
    """The folders of a spilled table's ``n`` partitions (``stage``: ``"scan"`` or ``"counts"``)."""
    return [spill_dir(spill, stage, i) for i in range(n)]


@dataclass
class EncodedTable:
    """The encode stage's result beside the vocabulary: ``(doc_id, term_id)`` rows.

    Attributes
    ----------
    rows : dask DataFrame ``(doc_id: int64, term_id: int32)``
        One row per token, lazy (:meth:`to_frame`).
    vocab_frame : frame
        The vocabulary as the partitions' library sees it (:func:`cutext.stages.text.encode.vocabulary_frame`).
    tokens : TokenTable or None
        The table it was encoded from (its summaries give the counts); None when encoded from a frame.
    """

    rows: object
    vocab_frame: object
    tokens: TokenTable | None = None

    def __repr__(self) -> str:
        return short_repr(self, ["rows", "vocab_frame"])

    @property
    def columns(self) -> list:
        return ["doc_id", "term_id"]

    @property
    def _meta(self):
        return self.rows._meta

    @property
    def summarized(self) -> bool:
        return self.tokens is not None and self.tokens.summarized

    def to_frame(self):
        return self.rows

    def compute(self, **kw):
        return self.rows.compute(**kw)


def encoded_rows(tokens, vocab_frame):
    """The lazy ``(doc_id, term_id)`` rows of ``tokens`` (a frame) under ``vocab_frame``."""
    return tokens.map_partitions(encode_partition, vocab_frame, meta=meta("encoded", tokens._meta))


def counts_folders(table: TokenTable) -> list:
    """Where the count stage writes a spilled table's counts: ``counts-NNNNN/`` beside its summaries."""
    return spill_folders(table.spill, len(table.parts), SPILL_COUNTS)
