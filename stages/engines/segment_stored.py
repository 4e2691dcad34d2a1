"""The stored texts and kept columns of a segment (``text.parquet``, ``columns.parquet``) and the sizes of its
postings' files.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cutext.stages.engines.segment_format import (
    _INT32_MAX,
    COLUMNS,
    KIND,
    MANIFEST,
    POSTINGS,
    TEXT,
    _check_in,
    _read_parquet,
)
from cutext.stages.runtime import artifacts as art


def read_segment_texts(folder, deleted=None, *, verify: bool = False) -> pa.Array | None:
    """The texts of a segment's documents (``text.parquet``), checked against its ``segment.json``.

    Parameters
    ----------
    folder : str or os.PathLike
    deleted : integer array, optional
        Local doc numbers to leave out (:func:`live_texts`), as :func:`live_segment` leaves them out.
    verify : bool, default False
        Check the size and CRC32 of the segment's files first (an index's load has checked them).

    Returns
    -------
    pyarrow.LargeStringArray, shape (n_docs - deleted,), or None
        Local doc order; None when the segment stores no text.

    Raises
    ------
    ArtifactNotFoundError (ArtifactError, FileNotFoundError)
        ``segment.json`` records texts but ``text.parquet`` is missing.
    ArtifactError (ValueError)
        Unreadable Parquet, another column or type, nulls, or a row count other than ``n_docs``.
    """
    folder = Path(folder)
    meta = art.read_manifest(folder, MANIFEST, KIND, "a cutext segment", verify=verify)
    if meta.get("texts") is not True:
        return None
    n_docs = art.field_int(meta, "n_docs", folder / MANIFEST, lo=0, hi=_INT32_MAX)
    t = _read_parquet(folder, TEXT)
    if t.num_rows != n_docs:
        raise art.ArtifactError(f"{folder / TEXT}: {t.num_rows} texts, {MANIFEST} records {n_docs} documents")
    texts = t.column("text").combine_chunks()
    return texts if deleted is None else live_texts(texts, deleted)


def read_segment_columns(folder, deleted=None, *, verify: bool = False) -> pa.Table | None:
    """The kept columns of a segment's documents (``columns.parquet``), checked against its ``segment.json``.

    Parameters
    ----------
    folder : str or os.PathLike
    deleted : integer array, optional
        Local doc numbers to leave out, as :func:`live_segment` leaves them out.
    verify : bool, default False
        Check the size and CRC32 of the segment's files first (an index's load has checked them).

    Returns
    -------
    pyarrow.Table, n_docs - deleted rows, or None
        Local doc order, the columns ``segment.json`` lists; None when the segment keeps no column.

    Raises
    ------
    ArtifactNotFoundError (ArtifactError, FileNotFoundError)
        ``segment.json`` lists columns but ``columns.parquet`` is missing.
    ArtifactError (ValueError)
        Unreadable Parquet, other columns than listed, or a row count other than ``n_docs``.
    """
    folder = Path(folder)
    meta = art.read_manifest(folder, MANIFEST, KIND, "a cutext segment", verify=verify)
    names = meta.get("columns")
    if names is None:
        return None
    n_docs = art.field_int(meta, "n_docs", folder / MANIFEST, lo=0, hi=_INT32_MAX)
    path = folder / COLUMNS
    if not path.exists():
        raise art.ArtifactNotFoundError(f"{path}: missing ({MANIFEST} lists the kept columns {names})")
    try:
        t = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise art.ArtifactError(f"{path}: unreadable Parquet ({exc})") from None
    if t.column_names != list(names) or t.num_rows != n_docs:
        raise art.ArtifactError(f"{path}: columns {t.column_names} and {t.num_rows} rows; {MANIFEST} records "
                                f"{names} and {n_docs} documents")
    if deleted is None or not len(deleted):
        return t
    deleted = np.unique(np.asarray(deleted, np.int64))
    _check_in(deleted, 0, n_docs - 1, "deleted doc")
    live = np.ones(n_docs, bool)
    live[deleted] = False
    return t.filter(pa.array(live))


def live_texts(texts: pa.Array, deleted) -> pa.Array:
    """``texts`` (a segment's, local doc order) without the local doc numbers ``deleted`` (any order,
    repeats allowed): the rows :func:`live_segment` keeps."""
    deleted = np.unique(np.asarray(deleted, np.int64))
    if not len(deleted):
        return texts
    _check_in(deleted, 0, len(texts) - 1, "deleted doc")
    live = np.ones(len(texts), bool)
    live[deleted] = False
    return texts.filter(pa.array(live))


def postings_bytes(folder) -> dict:
    """Bytes of a segment's files and bytes per posting, from its ``segment.json``.

    Returns
    -------
    dict
        ``files`` ({name: bytes}), ``n_postings``, ``bytes_per_posting`` (postings.parquet's bytes /
        n_postings) and ``total_bytes_per_posting`` (all files' bytes / n_postings); NaN without postings.
    """
    meta = art.read_manifest(folder, MANIFEST, KIND, "a cutext segment", verify=False)
    files = {k: int(v["bytes"]) for k, v in meta["files"].items()}
    n = int(meta["n_postings"])
    return {"files": files, "n_postings": n,
            "bytes_per_posting": files[POSTINGS] / n if n else float("nan"),
            "total_bytes_per_posting": sum(files.values()) / n if n else float("nan")}
