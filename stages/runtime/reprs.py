"""Short reprs of result objects: one line of shapes, sizes and key parameters, never a whole array.

A notebook cell and the interpreter show the repr of a cell's last value; a dataclass's generated repr
prints every element of its arrays (a million-row ``df`` or a vocabulary list fills the screen).
:func:`short_repr` writes ``Name(field=description, ...)`` where an array reads ``int64[3,205]``, a frame
``DataFrame[80 x 4]``, a dask collection ``dask DataFrame[4 partitions]`` and a list ``list[17,748]``.
"""
from __future__ import annotations

import dataclasses
from pathlib import PurePath

__all__ = ["describe", "short_repr"]

_STR_MAX = 40  # characters of a string field shown before it is cut


def _dims(shape) -> str:
    return " x ".join(f"{int(d):,}" for d in shape)


def describe(value) -> str:
    """A short description of ``value`` for a repr (no import of any array library).

    Parameters
    ----------
    value : object
        numpy / cupy array -> ``dtype[shape]``; pyarrow array -> ``type[length]``; pandas / cudf frame or
        Series -> ``DataFrame[rows x columns]`` / ``Series[rows]``; dask collection -> ``dask
        DataFrame[n partitions]``; scipy / cupyx sparse matrix -> ``csr_matrix[shape, nnz=...]``; list,
        tuple, dict -> their type and length; a path or short string -> its repr; a string longer than 40
        characters is cut; an int with thousands separators, a float to 6 significant digits; bools and
        None -> their repr; another object -> its repr when that
        is one line of at most 80 characters, else its type's name.

    Returns
    -------
    str
    """
    mod = type(value).__module__ or ""
    name = type(value).__name__
    if mod.startswith("numpy") and getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        value = value.item()  # a numpy scalar reads as the number it holds
    if value is None or isinstance(value, (bool, complex)):
        return repr(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, str):
        return repr(value if len(value) <= _STR_MAX else value[:_STR_MAX] + "...")
    if isinstance(value, PurePath):
        return repr(str(value))
    if mod.startswith("dask") and hasattr(value, "npartitions"):
        n = value.npartitions
        return f"dask {name}[{n:,} partition{'s' if n != 1 else ''}]"
    if hasattr(value, "nnz") and hasattr(value, "shape"):  # a sparse matrix
        return f"{name}[{_dims(value.shape)}, nnz={int(value.nnz):,}]"
    if mod.startswith(("numpy", "cupy")) and hasattr(value, "dtype") and hasattr(value, "shape"):
        return f"{value.dtype}[{_dims(value.shape)}]" + (" (device)" if mod.startswith("cupy") else "")
    if mod.startswith("pyarrow") and hasattr(value, "type") and hasattr(value, "__len__"):
        return f"{value.type}[{len(value):,}]"
    if mod.startswith(("pandas", "cudf")) and hasattr(value, "shape"):
        dims = _dims(value.shape)
        return f"{name}[{dims}]" + (" (device)" if mod.startswith("cudf") else "")
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        return f"{name}[{len(value):,}]"
    text = repr(value)
    return text if "\n" not in text and len(text) <= 80 else name


def short_repr(obj, fields=None, **extra) -> str:
    """``Name(field=description, ...)`` on one line (:func:`describe` of each value).

    Parameters
    ----------
    obj : object
    fields : sequence of str, optional
        Attributes (or properties) to show, in order; default: the dataclass fields of ``obj``.
    **extra
        More ``name=value`` pairs shown after them (values described alike).

    Returns
    -------
    str
    """
    names = [f.name for f in dataclasses.fields(obj)] if fields is None else list(fields)
    parts = [f"{n}={describe(getattr(obj, n))}" for n in names]
    parts += [f"{k}={describe(v)}" for k, v in extra.items()]
    return f"{type(obj).__name__}({', '.join(parts)})"
