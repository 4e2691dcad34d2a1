"""Corpus sources that are not files: data frames; and the spreading of a source over workers.

Frames as corpora
----------------------------
Every pipeline takes, where it takes a path, a **frame**: a pandas or cudf ``DataFrame`` /
``Series``, or a dask / dask-cudf ``DataFrame`` / ``Series``.  :func:`frame_source` turns it into
the :class:`~cutext.stages.readers.source.CorpusSource` that the file readers make, so the front end
(:func:`cutext.stages.text.frontend.build_corpus`) and every stage after it run unchanged:

* **partitions**: a dask frame's documents flow as its own partitions (one corpus partition per
  frame partition; nothing is written to files, nothing is collected to one process); an
  in-memory pandas / cudf frame is cut into partitions of about ``blocksize`` bytes of text, in
  row order;
* **columns**: ``text_column`` (default: the first of ``text``, ``contents``, ``content``,
  ``body``, ``abstract``, ``description`` present, after ``title`` when the frame has one; a list of
  columns is joined by a space; as for tables) and ``id_column``
  (default: the first of ``id``, ``_id``, ``doc_id``, ``docid``, ``docno`` present; its values
  become the ``source_id`` as strings, numbers as their decimal string, as for Parquet files).
  Without an id column the source id is the row number (``"0"``, ``"1"``, ...), as for a single
  table file.  A Series is the text column itself (its name does not matter; ``id_column`` is
  refused).
* ``doc_id``: dense ``0 .. N-1`` in row order, by the same scan over partition sizes as files
  (:func:`cutext.stages.readers.files.number_documents`);
* **errors** (:class:`FrameError`, a ``CorpusError`` so a ``ValueError``): a frame without the
  text column (the message lists the columns), a text column that does not hold strings (numbers,
  categories, dates, or Python objects other than ``str``: the message names the column and the
  first bad row), text or ids holding a lone surrogate (``"\\udc80"``, not valid Unicode: the
  message names the row, its index and id), an id column with missing values (the message names
  the first such row) or values with no string form (dicts, lists), and **duplicate ids** (the
  message names them): results are joined back to the user's table on ``source_id`` (search hits,
  cluster assignments, topic mixtures, scores), so a frame's ids must be unique.  Missing text
  (None / NA) is an empty document, as in table files.  An object id column mixing numbers and
  strings gives every id its string form (``1`` -> ``"1"``).
* reader settings that mean nothing for a frame (``format`` other than ``"auto"``/``"frame"``,
  ``encoding``, ``storage_options``, ``glob``, ``max_ratio``, ``members``) are refused, never ignored.

The compute context's size test (in-process below 256 MiB) sees an in-memory frame's text bytes;
a lazy dask frame's size is unknown without computing it, so it counts as small (in-process):
pass ``client=`` (or ``scheduler="cluster"``) to run it on a cluster.

Work for every worker
----------------------------------------
A compressed file that cannot be split (``corpus.txt.gz``) is one partition: on a 2-worker
Client the second worker would idle.  :func:`spread_source` cuts every partition into row
slices so that a source has at least one partition per worker; the slices keep their piece (so
line numbers and ``doc_id`` stay those of the unsplit input) and the results are identical.
"""
from __future__ import annotations

import dataclasses
import numbers
import sys

import numpy as np
import pandas as pd
import pyarrow as pa

from cutext.kernels.backend import is_gpu, is_gpu_object, to_host
from cutext.stages.readers.base import (
    DEFAULT_BLOCKSIZE,
    DEFAULT_MAX_RATIO,
    ID_CANDIDATES,
    TEXT_CANDIDATES,
    CorpusError,
    Piece,
    _frame,
    text_array,
)
from cutext.stages.readers.files import CorpusSource, _pick, meta_frame, no_text_column, to_backend

__all__ = ["FrameError", "is_frame", "input_label", "frame_source", "spread_source", "frame_column",
           "check_unique_ids"]

FRAME_FORMAT = "frame"


class FrameError(CorpusError):
    """A frame that cannot be a corpus: no text column, non-string text, missing or duplicate ids."""


def is_dask(obj) -> bool:
    """Whether ``obj`` is a dask (or dask-cudf) DataFrame or Series."""
    dd = sys.modules.get("dask.dataframe")  # not imported: obj cannot be one (the import costs 0.2-0.5 s)
    return dd is not None and isinstance(obj, (dd.DataFrame, dd.Series))


def is_frame(obj) -> bool:
    """Whether ``obj`` is a frame input: pandas / cudf / dask / dask-cudf DataFrame or Series."""
    if isinstance(obj, (pd.DataFrame, pd.Series)) or is_dask(obj):
        return True
    return is_gpu_object(obj) and type(obj).__name__ in ("DataFrame", "Series")


def input_label(path) -> str:
    """A short name of a pipeline's input for messages and manifests: the path as given, or
    ``"<pandas DataFrame: 3 columns>"`` / ``"<dask DataFrame: 4 partitions>"`` for a frame."""
    if not is_frame(path):
        return str(path)
    lib = type(path).__module__.split(".")[0]
    lib = {"dask_cudf": "dask-cudf"}.get(lib, lib)
    if lib == "dask" and is_gpu(path):
        lib = "dask-cudf"
    kind = "Series" if _is_series(path) else "DataFrame"
    if is_dask(path):
        return f"<{lib} {kind}: {path.npartitions} partitions>"
    return f"<{lib} {kind}: {len(path)} rows>"


def _is_series(obj) -> bool:
    return getattr(obj, "ndim", 2) == 1


def _string_dtype(dtype, gpu: bool) -> bool | None:
    """True: a string dtype; None: object (strings to be checked per partition); False: not strings."""
    if isinstance(dtype, pd.StringDtype):
        return True
    if isinstance(dtype, pd.ArrowDtype):
        return pa.types.is_string(dtype.pyarrow_dtype) or pa.types.is_large_string(dtype.pyarrow_dtype)
    if gpu and str(dtype) in ("object", "str", "string"):  # cudf strings are "object" (or "str")
        return True
    if dtype == np.dtype(object):
        return None
    return False


def _check_reader_settings(format, encoding, storage_options, glob, max_ratio=DEFAULT_MAX_RATIO, members=None):
    bad = [f"members={members!r}"] if members is not None else []
    if max_ratio != DEFAULT_MAX_RATIO:
        bad.append(f"max_ratio={max_ratio!r}")
    if format not in ("auto", FRAME_FORMAT):
        bad.append(f"format={format!r}")
    if encoding not in (None, "utf-8"):
        bad.append(f"encoding={encoding!r}")
    if storage_options:
        bad.append("storage_options=")
    if glob is not None:
        bad.append(f"glob={glob!r}")
    if bad:
        raise ValueError(f"{', '.join(bad)}: reader settings for files, meaningless for a frame input "
                         "(its columns are already typed text)")


class _FrameDocs:
    """Picklable partition function: a frame partition -> ``(source_id, text, replaced)`` partition."""

    def __init__(self, text_cols, id_col, backend: str, label: str):
        self.text_cols = list(text_cols)
        self.id_col = id_col
        self.backend = backend
        self.label = label

    def __call__(self, part, partition_info=None):
        if _is_series(part):
            part = part.to_frame(name=self.text_cols[0])
        if is_gpu_object(part) and is_gpu(self.backend):
            return self._cudf(part)
        return to_backend(self._pandas(to_host(part), partition_info), self.backend)

    def _bad_row(self, col, part, partition_info):
        where = f"partition {partition_info['number']}, " if partition_info else ""
        for i, v in enumerate(part[col].tolist()):
            if v is not None and not isinstance(v, str) and not (isinstance(v, float) and np.isnan(v)) \
                    and v is not pd.NA:
                return FrameError(f"{self.label}: text column {col!r} holds a {type(v).__name__} "
                                  f"({v!r:.60}) at {where}row {i} (index {_index_value(part, i)!r}); the text must be "
                                  "strings (convert with .astype(str), or pick text_column=)")
        return None

    def _row_name(self, part, partition_info, ids=None):
        """``row_name(i)``: row ``i`` of a partition for messages, with its index and id."""
        where = f"partition {partition_info['number']}, " if partition_info else ""

        def name(i):
            extra = f", id {ids[i].as_py()!r}" if ids is not None else ""
            return f"{where}row {i} (index {_index_value(part, i)!r}{extra})"

        return name

    def _ids(self, part, partition_info):
        """The id column as a ``large_string`` array (numbers as their decimal string).

        Raises :class:`FrameError` naming the column and the first bad row: a missing id, a lone
        surrogate, a value with no string form (dict, list, bytes)."""
        col = part[self.id_col]
        what = f"{self.label}: id column {self.id_col!r}"
        row = self._row_name(part, partition_info)
        try:
            ids = pa.array(col, from_pandas=True)
        except UnicodeEncodeError:
            text_array(col, what, row, FrameError)
            raise  # pragma: no cover - text_array raised
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
            # an object column of mixed types (1 and "a"): every value's string form
            values = []
            for i, v in enumerate(col.tolist()):
                if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)) or isinstance(v, str):
                    values.append(v)
                elif isinstance(v, (numbers.Number, np.generic)) and not isinstance(v, (bool, np.bool_)):
                    values.append(str(v))
                else:
                    raise FrameError(f"{what} holds a {type(v).__name__} ({v!r:.60}) at {row(i)}; ids must be "
                                     "strings or numbers") from None
            ids = text_array(values, what, row, FrameError)
        if ids.null_count:
            first = int(np.flatnonzero(ids.is_null().to_numpy(zero_copy_only=False))[0])
            raise FrameError(f"{what} has {ids.null_count} missing ids (the first at {row(first)}); every "
                             "document needs an id (or pass no id_column, for row numbers)")
        try:
            return ids.cast(pa.large_string())
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise FrameError(f"{what} holds {ids.type} values, which have no string form ({exc}); ids must "
                             "be strings or numbers") from None

    def _pandas(self, part, partition_info):
        ids = self._ids(part, partition_info) if self.id_col is not None else None
        parts = []
        for c in self.text_cols:
            try:
                arr = pa.array(part[c], type=pa.large_string(), from_pandas=True)
            except UnicodeEncodeError:
                text_array(part[c], f"{self.label}: text column {c!r}", self._row_name(part, partition_info, ids),
                           FrameError)
                raise  # pragma: no cover - text_array raised
            except (pa.ArrowTypeError, pa.ArrowInvalid, TypeError) as exc:
                raise (self._bad_row(c, part, partition_info) or FrameError(
                    f"{self.label}: text column {c!r} does not hold strings ({exc})")) from None
            parts.append(arr.fill_null(""))
        if len(parts) == 1:
            text = parts[0]
        else:
            import pyarrow.compute as pc

            text = pc.binary_join_element_wise(*parts, pa.scalar(" ", pa.large_string()))  # one string type
        return _frame(ids, text, np.zeros(len(text), np.int32))

    def _cudf(self, part):
        import cudf

        text = part[self.text_cols[0]].fillna("")
        for c in self.text_cols[1:]:
            text = text.str.cat(part[c].fillna(""), sep=" ")
        n = len(part)
        if self.id_col is not None:
            ids = part[self.id_col]
            if int(ids.isna().sum()):
                raise FrameError(f"{self.label}: id column {self.id_col!r} has {int(ids.isna().sum())} missing ids")
            ids = ids.astype(str)
        else:
            ids = cudf.Series([None] * n, dtype="str")
        return cudf.DataFrame({"source_id": ids.reset_index(drop=True), "text": text.reset_index(drop=True),
                               "replaced": cudf.Series(np.zeros(n, np.int32))})


def _index_value(part, i: int):
    """The index label of row ``i`` as a plain Python value (``12``, not ``np.int64(12)``)."""
    v = part.index[i]
    return v.item() if isinstance(v, np.generic) else v


def _columns(frame):
    return [frame.name] if _is_series(frame) else list(frame.columns)


def _text_bytes(frame, cols) -> int:
    """Bytes of text of an in-memory frame (the partition size test)."""
    if _is_series(frame):
        return int(frame.memory_usage(deep=True))
    return int(frame[cols].memory_usage(deep=True, index=False).sum())


def frame_source(frame, *, backend: str = "cpu", text_column=None, id_column=None,
                 blocksize=DEFAULT_BLOCKSIZE, format="auto", encoding="utf-8", storage_options=None,
                 glob=None, max_ratio=DEFAULT_MAX_RATIO, members=None):
    """A :class:`~cutext.stages.readers.source.CorpusSource` reading a frame (module docstring).

    Parameters
    ----------
    frame : pandas/cudf DataFrame or Series, dask/dask-cudf DataFrame or Series
    backend : {"cpu", "gpu"}
        The resolved backend: pandas or cudf partitions (a frame of the other library is converted
        partition by partition).
    text_column : str or list of str, optional
        Default: the first of ``text``, ``contents``, ``content``, ``body``, ``abstract``, ``description``
        present, after ``title`` when the frame has one (``["title", "text"]``: BEIR's layout), as for files.
    id_column : str, optional
    blocksize : int
        Bytes of text per partition for an in-memory (pandas / cudf) frame; a dask frame keeps its
        partitions.
    format, encoding, storage_options, glob, max_ratio, members
        File reader settings: refused unless at their defaults.

    Returns
    -------
    CorpusSource
        ``docs``: lazy ``(source_id: string, text: string, replaced: int32)``, one partition per
        frame partition; ``pieces``: one :class:`~cutext.stages.readers.base.Piece` (format ``"frame"``) a
        partition; ``format = "frame"``; ``input_bytes``: text bytes of an in-memory frame, 0 for a
        lazy one; ``check_documents``: the duplicate-id check (with an id column).

    Raises
    ------
    FrameError (CorpusError, ValueError)
        No text column, a non-string text column (dtype known up front; object columns when their
        partition is read), an ``id_column`` on a Series, a missing id column; when a partition is
        read: text or ids holding a lone surrogate, a missing id, an id with no string form (the
        message names the column and the row).
    ValueError
        File reader settings given for a frame; an empty frame.
    """
    import dask.dataframe as dd


    is_gpu(backend)
    _check_reader_settings(format, encoding, storage_options, glob, max_ratio, members)
    label = input_label(frame)
    cols = _columns(frame)
    if _is_series(frame):
        if id_column is not None:
            raise FrameError(f"{label}: id_column={id_column!r} given with a Series (the text alone); "
                             "pass a DataFrame holding the text and id columns")
        if text_column is not None and text_column not in (cols[0], cols):
            raise FrameError(f"{label}: text_column={text_column!r} given with a Series named {cols[0]!r}; "
                             "a Series is the text column itself")
        text_cols, id_cols = ["text"], None   # the Series' partitions become a "text" column
    else:
        try:
            text_cols = _pick(cols, text_column, TEXT_CANDIDATES, "text", label)
            id_cols = _pick(cols, id_column, ID_CANDIDATES, "id", label)
        except CorpusError as exc:
            raise FrameError(str(exc)) from None
        if text_cols is None:
            meta = frame._meta if is_dask(frame) else frame.iloc[:0]
            strings = [c for c in cols if _string_dtype(meta[c].dtype, is_gpu_object(meta)) is not False]
            raise FrameError(no_text_column(label, cols, strings))
        if isinstance(id_column, (list, tuple)):
            raise FrameError(f"{label}: id_column must name one column, got {id_column!r}")
    meta = frame._meta if is_dask(frame) else frame.iloc[:0]
    gpu_meta = is_gpu_object(meta)
    for c in text_cols:
        dtype = meta.dtype if _is_series(meta) else meta[c].dtype
        if _string_dtype(dtype, gpu_meta) is False:
            raise FrameError(f"{label}: text column {c!r} has dtype {dtype}, not strings; convert it "
                             "(e.g. .astype(str)) or pick another text_column=")
    id_col = id_cols[0] if id_cols else None
    fn = _FrameDocs(text_cols, id_col, backend, label)
    if is_dask(frame):
        ddf = frame
        nbytes = 0
    else:
        if len(frame) == 0:
            raise FrameError(f"{label}: the corpus holds no document")
        nbytes = _text_bytes(frame, text_cols)
        nparts = int(max(1, min(len(frame), -(-nbytes // int(blocksize)))))
        if gpu_meta:
            import dask_cudf

            ddf = dask_cudf.from_cudf(frame, npartitions=nparts)
        else:
            import dask

            with dask.config.set({"dataframe.convert-string": False}):  # keep object text as given (checked)
                ddf = dd.from_pandas(frame, npartitions=nparts, sort=False)
    docs = ddf.map_partitions(fn, meta=meta_frame(backend), enforce_metadata=False)
    pieces = [Piece(FRAME_FORMAT, [label], [None], None, 0, None, 0, id_col is None, {})
              for _ in range(ddf.npartitions)]
    check = None if id_col is None else _UniqueIds(label, id_col)
    return CorpusSource(frame, docs, pieces, FRAME_FORMAT, nbytes, backend, check,
                        frame=None if _is_series(frame) else ddf)


class _UniqueIds:
    def __init__(self, label, column):
        self.label, self.column = label, column

    def __call__(self, table):
        check_unique_ids(table["source_id"], f"{self.label}: id column {self.column!r}")


def check_unique_ids(ids, what: str) -> None:
    """Raise :class:`FrameError` naming up to five duplicated ids.

    Parameters
    ----------
    ids : dask Series, pandas / cudf Series or pyarrow array of strings
    what : str
        The start of the message (the frame and column).
    """
    if is_dask(ids):
        dup = _dask_duplicates(ids)
    else:
        s = pd.Series(to_host(ids.to_pandas() if isinstance(ids, (pa.Array, pa.ChunkedArray)) else ids))
        vc = s.value_counts()
        dup = vc[vc > 1]
    if len(dup):
        shown = ", ".join(f"{k!r} ({int(v)} times)" for k, v in dup.sort_index().head(5).items())
        raise FrameError(f"{what} has {len(dup)} duplicate id(s): {shown}; ids must be unique "
                         "(results are joined back on source_id)")


def _id_hashes(ids) -> np.ndarray:
    return pd.util.hash_pandas_object(pd.Series(to_host(ids), dtype=object), index=False).to_numpy()


def _ids_hashed_in(ids, hashes: np.ndarray):
    host = pd.Series(to_host(ids), dtype=object).reset_index(drop=True)
    return host[np.isin(_id_hashes(host), hashes)]


def _dask_duplicates(ids) -> pd.Series:
    """The counts of a dask Series' repeated values (value -> count > 1).  Each partition sends the caller a
    64-bit hash a value (pandas' ``hash_pandas_object``), then the values of repeated hashes (a repeated
    value, or a collision): the workers exchange nothing, where dask's ``value_counts`` shuffles every
    value between them (0.9-1.1 MB, 2.5-3 % of 20 Newsgroups' text, on two workers)."""
    import dask

    parts = ids.to_delayed()
    hashes = np.concatenate([np.zeros(0, np.uint64), *dask.compute(*[dask.delayed(_id_hashes)(p) for p in parts])])
    uniq, n = np.unique(hashes, return_counts=True)
    repeated = uniq[n > 1]
    if not len(repeated):
        return pd.Series([], dtype=np.int64)
    values = pd.concat(dask.compute(*[dask.delayed(_ids_hashed_in)(p, repeated) for p in parts]), ignore_index=True)
    vc = values.value_counts()
    return vc[vc > 1]


def frame_column(frame, column: str):
    """A column of a frame input as a pandas Series in row (doc_id) order (e.g. cluster's order_by).

    Raises
    ------
    FrameError
        The frame has no such column.
    """
    cols = _columns(frame)
    if column not in cols or _is_series(frame):
        raise FrameError(f"{input_label(frame)}: order_by column {column!r} not found; columns are {cols}")
    col = frame[column]
    if is_dask(col):
        col = col.compute()
    return to_host(col).reset_index(drop=True)


# ----------------------------------------------------------------------------- spreading

def _row_slice(df, i: int, k: int):
    n = len(df)
    return df.iloc[n * i // k: n * (i + 1) // k]


def _here(df):
    return df


class InTask:
    """A dask object (a partition) that the task it is given to computes itself, from its own graph,
    instead of a task of its own whose result the scheduler may place on another worker: a task that
    reads its partition inside moves no rows between workers, wherever it runs (a task without inputs
    can be stolen by an idle worker; its read then happens there).  Only for graphs that hold no
    futures (:func:`holds_futures`): what is persisted is on a worker already."""

    def __init__(self, obj):
        self.graph = dict(obj.__dask_graph__())
        self.key = obj.key

    def __call__(self):
        from dask.local import get_sync

        return get_sync(self.graph, self.key)


def holds_futures(obj) -> bool:
    """Whether the graph of a dask object depends on persisted data: ``distributed`` futures, or keys
    outside the graph (dask's ``from_delayed`` of futures keeps only their keys)."""
    try:
        from distributed import futures_of
    except ImportError:  # pragma: no cover
        return False
    return bool(futures_of(obj)) or bool(_outside_keys(dict(obj.__dask_graph__())))


def _outside_keys(graph: dict) -> set:
    deps = set()
    for v in graph.values():
        deps.update(getattr(v, "dependencies", None) or ())
    return deps - set(graph)


def partition_inputs(ddf) -> list:
    """For each partition of ``ddf``, what a task given it needs to have the partition without a task of
    its own in front: an :class:`InTask` (a graph without persisted data, computed by the task), the key
    of the persisted data the partition is (a graph of aliases to one key outside it: a slice that
    :func:`spread_source` keeps on a worker), or the delayed partition (a graph over persisted data,
    left to dask)."""
    from dask._task_spec import Alias

    out = []
    for part in ddf.to_delayed():
        graph = dict(part.__dask_graph__())
        outside = _outside_keys(graph)
        if not holds_futures(part):
            out.append(InTask(part))
        elif len(outside) == 1 and all(isinstance(v, Alias) for v in graph.values()):
            out.append(next(iter(outside)))
        else:
            out.append(part)
    return out


def _slice_in_task(part: InTask, i: int, k: int):
    return _row_slice(part(), i, k)


def spread_source(source, n_workers: int, client=None):
    """The source with at least ``n_workers`` partitions: each partition cut into row slices.

    A partition of ``n`` rows cut ``k`` ways gives slices ``[n i / k, n (i+1) / k)``; every slice
    keeps its piece (so a line-numbered file is numbered as one file).

    With a ``client`` the pieces are read now and slice ``j`` is kept on worker ``j mod W`` for the
    stages: without that the scheduler runs every slice where the piece was read (data locality), and
    the other workers idle.  The worker of a slice reads the piece itself and keeps its rows (a file,
    or any partition whose graph holds no futures: :class:`InTask`), so no text moves between
    workers: each of the ``k`` workers of a piece reads all of it, at the same time.  A persisted
    partition is cut where it is and only the slice travels.  The text is then held in the workers'
    memory while the front end runs (instead of being read once per stage), the price of spreading an
    input that cannot be read in parallel.

    Parameters
    ----------
    source : CorpusSource
    n_workers : int
        Workers of the Client the stages run on.
    client : distributed.Client, optional

    Returns
    -------
    CorpusSource
        ``source`` itself when it already has ``n_workers`` partitions or more.
    """
    nparts = source.docs.npartitions
    if n_workers <= 1 or nparts >= n_workers:
        return source
    import dask
    import dask.dataframe as dd

    k = -(-int(n_workers) // nparts)
    pieces = [piece for piece in source.pieces for _ in range(k)]
    if client is None:
        out = [dask.delayed(_row_slice, pure=True)(p, i, k) for p in source.docs.to_delayed() for i in range(k)]
    else:
        from distributed import wait

        workers = sorted(client.scheduler_info()["workers"])
        out, wholes = [], []
        for part in source.docs.to_delayed():
            if not holds_futures(part):  # each slice's worker reads the piece: no rows between workers
                read = InTask(part)
                for i in range(k):
                    # a preference, not a pin: a slice lost with its worker is read again by another one
                    out.append(client.submit(_slice_in_task, read, i, k, workers=[workers[len(out) % len(workers)]],
                                             allow_other_workers=True, pure=False))
                continue
            wholes.append(client.compute(part))
            for i in range(k):
                s = client.submit(_row_slice, wholes[-1], i, k, pure=False)
                out.append(client.submit(_here, s, workers=[workers[len(out) % len(workers)]],
                                         allow_other_workers=True, pure=False))
        wait(out)
        del wholes
    docs = dd.from_delayed(out, meta=source.docs._meta, verify_meta=False)
    return dataclasses.replace(source, docs=docs, pieces=pieces)
