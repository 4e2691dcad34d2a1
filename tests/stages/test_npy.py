"""The package's one ``.npy`` reader: what ``numpy.save`` writes reads back equal, anything else is refused
naming the file, and no reader of the package parses a header with ``ast`` (not thread-safe on CPython
3.11-3.12: ``benchmarks/micro/npy_threads.py``)."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from cutext.stages.runtime.npy import NpyFormatError, read_npy

ARRAYS = {
    "int64": np.array([0, -1, 2**40], np.int64),
    "int32": np.array([7, -3], np.int32),
    "uint8": np.arange(256, dtype=np.uint8),
    "uint32": np.array([1, 2**31], np.uint32),
    "float32": np.array([0.5, np.inf, np.nan], np.float32),
    "float64": np.linspace(0, 1, 5),
    "bool": np.array([True, False, True]),
    "complex64": np.array([1 + 2j], np.complex64),
    "2d": np.arange(12, dtype=np.int16).reshape(3, 4),
    "fortran": np.asfortranarray(np.arange(12.0).reshape(3, 4)),
    "0-d": np.array(3.25),
    "empty": np.zeros(0, np.int64),
    "empty 2d": np.zeros((4, 0), np.float32),
}


@pytest.mark.parametrize("mmap", [False, True])
@pytest.mark.parametrize("name", list(ARRAYS))
def test_round_trip_of_what_numpy_save_writes(tmp_path, name, mmap):
    a = ARRAYS[name]
    f = tmp_path / "a.npy"
    np.save(f, a, allow_pickle=False)
    b = read_npy(f, mmap=mmap)
    assert b.dtype == a.dtype and b.shape == a.shape
    assert b.flags.f_contiguous == a.flags.f_contiguous and b.flags.c_contiguous == a.flags.c_contiguous
    np.testing.assert_array_equal(b, a)
    assert isinstance(b, np.memmap) == (mmap and a.size > 0)


def test_format_version_2_header(tmp_path):
    a = np.arange(5, dtype=np.int32)
    f = tmp_path / "v2.npy"
    with open(f, "wb") as fh:
        np.lib.format.write_array(fh, a, version=(2, 0))
    np.testing.assert_array_equal(read_npy(f), a)


def _npy(header: str, data: bytes = b"", version: bytes = b"\x01\x00") -> bytes:
    raw = header.encode("latin-1")
    return b"\x93NUMPY" + version + struct.pack("<H", len(raw)) + raw + data


@pytest.mark.parametrize("content, match", [
    (b"PK\x03\x04 a zip", "not a .npy file"),
    (_npy("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", b"\0" * 16, b"\x09\x00"), "version 9.0"),
    (_npy("{'descr': '>i8', 'fortran_order': False, 'shape': (2,), }", b"\0" * 16), "little-endian"),
    (_npy("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", b"\0" * 16), "dtype"),
    (_npy("{'descr': '<U3', 'fortran_order': False, 'shape': (1,), }", b"\0" * 12), "dtype"),
    (_npy("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,), }", b"\0" * 4), "header"),
    (_npy("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", b"\0" * 15), "truncated"),
    (_npy("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", b"\0" * 24), "24 bytes of data"),
    (_npy("{'descr': '<i8', 'fortran_order': False, 'shape': (2), }", b"\0" * 16), "header"),
    (_npy("{'descr': '<i8', 'fortran_order': 0, 'shape': (2,), }", b"\0" * 16), "header"),
    (_npy("{'descr': '<i8', 'shape': (2,), }", b"\0" * 16), "exactly"),
    (_npy("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), 'extra': 1, }", b"\0" * 16), "header"),
    (_npy("__import__('os')", b""), "dict literal"),
    (_npy("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }")[:20], "truncated"),
])
def test_anything_else_is_refused_naming_the_file(tmp_path, content, match):
    f = tmp_path / "bad.npy"
    f.write_bytes(content)
    with pytest.raises(NpyFormatError, match=match) as exc:
        read_npy(f)
    assert str(exc.value).startswith(str(f))
    assert isinstance(exc.value, ValueError)


def test_an_object_array_numpy_pickles_is_refused(tmp_path):
    f = tmp_path / "obj.npy"
    np.save(f, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(NpyFormatError, match="dtype"):
        read_npy(f)


def test_the_package_reads_npy_files_without_numpy_load(tmp_path, monkeypatch):
    """Spilled partitions, deletions: every .npy the package writes is read back by read_npy."""
    from cutext.stages.engines.index_commits import read_deletes
    from cutext.stages.text.partitions import _save_arrays, load_spilled

    arrays = {"term_id": np.array([3, 1], np.int32), "doc_id": np.array([5, 9], np.int64)}
    _save_arrays(tmp_path / "spill", arrays)
    (tmp_path / "deletes").mkdir()
    np.save(tmp_path / "deletes" / "s0-g00001.npy", np.array([4, 2], np.int64))
    monkeypatch.setattr(np, "load", lambda *a, **k: pytest.fail("numpy.load parses headers with ast"))
    for mmap in (False, True):
        got = load_spilled(tmp_path / "spill", list(arrays), mmap=mmap)
        for k, v in arrays.items():
            np.testing.assert_array_equal(got[k], v)
    (d,) = read_deletes(tmp_path, {"deletes": {"s0": "s0-g00001.npy"}}, ["s0"])
    np.testing.assert_array_equal(d, [4, 2])

