"""One reader of the ``.npy`` files the package writes, safe to call from many threads at once.

``numpy.load`` parses a ``.npy`` header with ``ast.literal_eval``; on CPython 3.11 and 3.12 the AST
constructor keeps one recursion counter for the whole interpreter, so headers parsed in several threads at
once may raise ``SystemError: AST constructor recursion depth mismatch`` (CPython gh-106905).  The header
is a documented, fixed layout (NumPy's NEP 1 / ``numpy.lib.format``: magic ``\\x93NUMPY``, a version, the
header length, then a Python dict literal with ``'descr'``, ``'fortran_order'`` and ``'shape'``), so
:func:`read_npy` parses it with a regular expression and reads or maps the data itself
(``numpy.fromfile`` / ``numpy.memmap`` at the data's offset), taking only what ``numpy.save`` writes for
a plain numeric array.
"""
from __future__ import annotations

import math
import os
import re
import struct

import numpy as np

from cutext.stages.runtime.artifacts import ArtifactError

__all__ = ["NpyFormatError", "read_npy"]

MAGIC = b"\x93NUMPY"
# descr -> kind and item sizes numpy writes for a little-endian machine's plain numeric arrays
_SIZES = {"b": (1,), "i": (1, 2, 4, 8), "u": (1, 2, 4, 8), "f": (2, 4, 8), "c": (8, 16)}
_DESCR = re.compile(r"([<|])([biufc])(\d+)")
_ITEM = re.compile(r"\s*'(\w+)'\s*:\s*('[^'\\]*'|True|False|\((?:\s*\d+\s*,)+(?:\s*\d+)?\s*\)|\(\s*\))\s*(,|(?=\}))")


class NpyFormatError(ArtifactError):
    """A ``.npy`` file that is not what ``numpy.save`` writes for a plain little-endian numeric array, or
    that is truncated; the message names the file."""


def _prefix(path, head: bytes) -> tuple:
    """``(header length, header start, header encoding)`` of the first 12 bytes ``head`` of a ``.npy`` file."""
    if len(head) < 10 or not head.startswith(MAGIC):
        raise NpyFormatError(f"{path}: not a .npy file (no \\x93NUMPY magic)")
    major, minor = head[6], head[7]
    if (major, minor) == (1, 0):
        return struct.unpack_from("<H", head, 8)[0], 10, "latin-1"
    if (major, minor) in ((2, 0), (3, 0)) and len(head) >= 12:
        return struct.unpack_from("<I", head, 8)[0], 12, "latin-1" if major == 2 else "utf-8"
    if (major, minor) in ((2, 0), (3, 0)):
        raise NpyFormatError(f"{path}: truncated .npy header")
    raise NpyFormatError(f"{path}: .npy format version {major}.{minor} is not one numpy writes (1.0, 2.0, 3.0)")


def _header(path, raw: bytes, enc: str) -> tuple:
    """``(dtype, fortran_order, shape)`` of a ``.npy`` header ``raw`` (the dict literal's bytes)."""
    text = raw.decode(enc, errors="replace").strip()
    fields, pos = {}, 1
    if not (text.startswith("{") and text.endswith("}")):
        raise NpyFormatError(f"{path}: the .npy header is not a dict literal: {text[:80]!r}")
    while pos < len(text) - 1:
        m = _ITEM.match(text, pos)
        if m is None:
            if text[pos:-1].strip():
                raise NpyFormatError(f"{path}: unreadable .npy header: {text[:120]!r}")
            break
        fields[m.group(1)] = m.group(2)
        pos = m.end()
    if set(fields) != {"descr", "fortran_order", "shape"}:
        raise NpyFormatError(f"{path}: the .npy header must hold exactly 'descr', 'fortran_order' and 'shape', "
                             f"got {sorted(fields)}")
    descr = fields["descr"].strip("'") if fields["descr"].startswith("'") else None
    d = _DESCR.fullmatch(descr or "")
    if d is None or int(d.group(3)) not in _SIZES[d.group(2)] or (d.group(1) == "|") != (int(d.group(3)) == 1):
        raise NpyFormatError(f"{path}: dtype {fields['descr']} is not a plain little-endian numeric dtype "
                             "(bool, int, uint, float, complex); cutext writes no other")
    if fields["fortran_order"] not in ("True", "False"):
        raise NpyFormatError(f"{path}: 'fortran_order' must be True or False, got {fields['fortran_order']}")
    if not fields["shape"].startswith("("):
        raise NpyFormatError(f"{path}: 'shape' must be a tuple of integers, got {fields['shape']}")
    shape = tuple(int(x) for x in fields["shape"].strip("()").split(",") if x.strip())
    return np.dtype(descr), fields["fortran_order"] == "True", shape


def read_npy(path, mmap: bool = False) -> np.ndarray:
    """The array of a ``.npy`` file written by ``numpy.save``, read without ``ast`` (thread-safe).

    Parameters
    ----------
    path : str or os.PathLike
    mmap : bool, default False
        Memory-map the data read-only (``numpy.memmap``, as ``numpy.load(mmap_mode="r")``) instead of
        reading it into memory.  An empty array is read, not mapped.

    Returns
    -------
    numpy.ndarray
        The array, of the file's dtype (bool, int8-64, uint8-64, float16-64, complex64/128), shape and
        order (C or Fortran).

    Raises
    ------
    NpyFormatError (ArtifactError, ValueError)
        Not a ``.npy`` file, a format version, dtype (big-endian, structured, string, object, datetime)
        or header numpy does not write for a plain numeric array, or a data size that is not the one
        the header gives (a truncated or overlong file); the message names the file.
    OSError
        The file cannot be opened or read.
    """
    with open(path, "rb") as fh:
        n, start, enc = _prefix(path, fh.read(12))
        fh.seek(start)
        raw = fh.read(n)
        if len(raw) < n:
            raise NpyFormatError(f"{path}: truncated .npy header ({len(raw)} of {n} bytes)")
        dtype, fortran, shape = _header(path, raw, enc)
        offset = start + n
        count = math.prod(shape)
        size = os.fstat(fh.fileno()).st_size
        if size - offset != count * dtype.itemsize:
            raise NpyFormatError(f"{path}: {size - offset} bytes of data where the header {shape} of {dtype} "
                                 f"gives {count * dtype.itemsize} (a truncated or altered file)")
        order = "F" if fortran else "C"
        if mmap and count:
            return np.memmap(fh, dtype=dtype, mode="r", offset=offset, shape=shape, order=order)
        fh.seek(offset)
        a = np.fromfile(fh, dtype=dtype, count=count)
    return a.reshape(shape, order="F" if fortran else "C")
