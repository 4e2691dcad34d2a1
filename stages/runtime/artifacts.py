"""Checks for saved outputs (BM25 index, LDA model, cluster state) before anything uses them.

A loader reads its manifest with :func:`read_manifest`, which first verifies the output against the
sizes and CRC32 checksums its manifest records (:mod:`cutext.stages.runtime.checksums`, as Lucene checks each
file's footer), then its tables with :func:`read_table`, and checks every value that later indexes an
array (:func:`check_range`) or enters a score (:func:`check_finite`), so a corrupt or crafted directory
raises :class:`ArtifactError` naming the directory and the file, instead of a segmentation fault, a
bare ``KeyError`` or silently wrong results.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa

from cutext.stages.runtime import checksums

__all__ = ["ArtifactError", "ArtifactNotFoundError", "read_manifest", "read_table", "field_int",
           "field_float", "field_dict", "check_range", "check_finite"]


class ArtifactError(ValueError):
    """A saved output is not what its loader expects; the message names the directory and the file."""


class ArtifactNotFoundError(ArtifactError, FileNotFoundError):
    """A saved output, or one of its files, does not exist."""


def read_manifest(directory, name: str, kind: str, what: str, verify: bool = True) -> dict:
    """The JSON manifest ``directory/name``, checked to be an object of the given ``kind``, and the
    output checked against it (:func:`cutext.stages.runtime.checksums.verify`).

    Parameters
    ----------
    directory : str or os.PathLike
    name : str
        Manifest file name, e.g. ``"index.json"``.
    kind : str
        Expected value of its ``"kind"`` key, e.g. ``"cutext.bm25"``.
    what : str
        What the directory should be, for messages (``"a cutext BM25 index"``).
    verify : bool, default True
        Check the CRC32 of the manifest and of every file it lists: one read of the whole output
        (on a pool of threads; on a warm page cache several GB/s, see ``benchmarks/checksums.py``).
        False skips the checksums, and still checks, where the manifest lists its files, that
        nothing unlisted is there (a listing: no reads).

    Raises
    ------
    ArtifactNotFoundError
        No such directory or manifest.
    ArtifactError
        Invalid JSON, not an object, or another kind; with ``verify``, no checksums recorded, a
        checksum, size or listing that does not match (the message names the file).
    """
    d = Path(directory)
    f = d / name
    if not f.is_file():
        raise ArtifactNotFoundError(f"{d}: not {what} (no {name})")
    try:
        meta = json.loads(f.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ArtifactError(f"{f}: not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise ArtifactError(f"{f}: expected a JSON object, got {type(meta).__name__}")
    if meta.get("kind") != kind:
        raise ArtifactError(f"{f}: not {what} (kind={meta.get('kind')!r}, expected {kind!r})")
    try:
        if verify:
            checksums.verify(d, name, meta)
        elif isinstance(meta.get("files"), dict):
            checksums.verify(d, name, meta, contents=False)
    except checksums.MissingFileError as exc:
        raise ArtifactNotFoundError(str(exc)) from None
    except checksums.ChecksumError as exc:
        raise ArtifactError(str(exc)) from None
    return meta


def _get(meta: dict, key: str, file):
    if key not in meta:
        raise ArtifactError(f"{file}: missing field {key!r}")
    return meta[key]


def field_int(meta: dict, key: str, file, lo: int | None = None, hi: int | None = None) -> int:
    """``meta[key]`` as an int in ``[lo, hi]``; bools, floats with a fraction and strings are refused."""
    v = _get(meta, key, file)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
        raise ArtifactError(f"{file}: field {key!r} must be an integer, got {v!r}")
    v = int(v)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ArtifactError(f"{file}: field {key!r} = {v} is outside [{lo}, {hi}]")
    return v


def field_float(meta: dict, key: str, file, lo: float | None = None, hi: float | None = None,
                lo_open: bool = False) -> float:
    """``meta[key]`` as a finite float in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``)."""
    v = _get(meta, key, file)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ArtifactError(f"{file}: field {key!r} must be a finite number, got {v!r}")
    v = float(v)
    if (lo is not None and (v <= lo if lo_open else v < lo)) or (hi is not None and v > hi):
        lb = "(" if lo_open else "["
        raise ArtifactError(f"{file}: field {key!r} = {v} is outside {lb}{lo}, {hi}]")
    return v


def field_dict(meta: dict, key: str, file) -> dict:
    """``meta[key]``, which must be a JSON object."""
    v = _get(meta, key, file)
    if not isinstance(v, dict):
        raise ArtifactError(f"{file}: field {key!r} must be an object, got {v!r}")
    return v


_TYPES = {
    "int": pa.types.is_integer,
    "float": lambda t: pa.types.is_floating(t) or pa.types.is_integer(t),
    "string": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
    "list": lambda t: pa.types.is_list(t) or pa.types.is_large_list(t),
    "any": lambda t: True,
}


def read_table(path, columns: dict, what: str = "table") -> pa.Table:
    """Read a Parquet file or folder and check its columns' types.

    Parameters
    ----------
    path : str or os.PathLike
        A Parquet file, or a folder of Parquet files (read as one table, files in name order).
    columns : dict
        Column name -> ``"int"``, ``"float"`` (integers accepted), ``"string"``, ``"list"`` or ``"any"``.
    what : str
        Name of the table for messages.

    Returns
    -------
    pyarrow.Table
        Only the named columns, in the order given.

    Raises
    ------
    ArtifactNotFoundError
        The file or folder is missing.
    ArtifactError
        Unreadable Parquet, a missing column, or a column of the wrong type.
    """
    import pyarrow.parquet as pq

    p = Path(path)
    if not p.exists():
        raise ArtifactNotFoundError(f"{p}: missing {what}")
    try:
        if p.is_dir():
            files = sorted(p.glob("*.parquet"))
            tables = [pq.read_table(f) for f in files]
            table = pa.concat_tables(tables) if tables else None
        else:
            table = pq.read_table(p)
    except (OSError, pa.ArrowException) as exc:
        raise ArtifactError(f"{p}: unreadable {what} ({exc})") from None
    if table is None:  # an empty folder: no rows, the expected columns
        return None
    for name, kind in columns.items():
        if name not in table.column_names:
            raise ArtifactError(f"{p}: {what} has no column {name!r} (columns: {table.column_names})")
        t = table.schema.field(name).type
        if not _TYPES[kind](t):
            raise ArtifactError(f"{p}: column {name!r} of {what} must be {kind}, got {t}")
    return table.select(list(columns))


def check_range(values, lo, hi, what: str, file) -> None:
    """Every value is in ``[lo, hi]`` (integers that index arrays: doc ids, term ids, topics)."""
    a = np.asarray(values)
    if a.size and (a.min() < lo or a.max() > hi):
        bad = a[(a < lo) | (a > hi)][0]
        raise ArtifactError(f"{file}: {what} must be in [{lo}, {hi}], found {bad}")


def check_finite(values, what: str, file) -> None:
    """No NaN or infinity (weights, probabilities)."""
    a = np.asarray(values)
    if a.size and not np.isfinite(a).all():
        bad = a[~np.isfinite(a)][0]
        raise ArtifactError(f"{file}: {what} must be finite, found {bad}")
