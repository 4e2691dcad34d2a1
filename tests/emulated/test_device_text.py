"""The device text path's cupy branches on the CPU: kernels as g++-compiled CUDA C, arrays as numpy.

A stand-in ``cupy`` module (numpy functions whose array results are marked as device arrays; its
``RawModule`` runs the launchers of ``tests/cuda_emu/tokenize_emu.cpp``, i.e. the CUDA C of
``kernels/tokenize.cu`` thread by thread) lets :mod:`cutext.kernels.tokenize` and
:mod:`cutext.stages.text.device` take their GPU code paths here: kernel launches (argument order and
types, grid shapes), device-table caching and the array code of :func:`scan_arrays` and
:func:`split_lines` are compared with the numpy path.  tests/gpu/test_device_text.py runs the real thing.
"""
from __future__ import annotations

import ctypes
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cutext.kernels import tokenize as K
from cutext.pipelines import datasets
from cutext.stages.readers import device as GR
from cutext.stages.text import device as GT
from cutext.stages.text.tokenize import TokenizerConfig

from helpers import build_cuda_emulation


class _DevArray(np.ndarray):
    def get(self):
        return np.array(self, copy=True)


_DevArray.__module__ = "cupy"

# kernel name in tokenize.cu -> launcher in tokenize_emu.cpp
LAUNCHERS = {"tk_blank_separators": "launch_blank", "tk_rows_containing": "launch_rows",
             "tk_hash_tokens": "launch_hash", "tk_tokens_equal": "launch_equal", "tk_utf8_invalid": "launch_utf8",
             "tk_bounds_count": "launch_bounds_count", "tk_bounds_write": "launch_bounds_write",
             "tk_lines_count": "launch_lines_count", "tk_lines_write": "launch_lines_write",
             "tk_code_points": "launch_code_points", "tk_rows_high": "launch_rows_high"}


def _dev(x):
    if isinstance(x, np.ndarray) and not isinstance(x, _DevArray):
        return x.view(_DevArray)
    if isinstance(x, tuple):
        return tuple(_dev(v) for v in x)
    return x


def _fake_cupy(lib, launches):
    mod = types.ModuleType("cupy")
    mod.ndarray = _DevArray

    def __getattr__(name):
        fn = getattr(np, name)
        if callable(fn) and not isinstance(fn, type):
            return lambda *a, **k: _dev(fn(*a, **k))
        return fn

    mod.__getattr__ = __getattr__
    mod.asarray = lambda a, dtype=None: _dev(np.array(np.asarray(a), dtype=dtype, copy=True))
    mod.ascontiguousarray = lambda a, dtype=None: _dev(np.ascontiguousarray(a, dtype=dtype))

    class Device:
        def __init__(self, device=None):
            self.id = 0

    mod.cuda = types.SimpleNamespace(Device=Device)

    def arg(a):
        if isinstance(a, np.ndarray):
            assert isinstance(a, _DevArray), "a host array was passed to a kernel"
            assert a.flags.c_contiguous
            return a.ctypes.data_as(ctypes.c_void_p)
        assert isinstance(a, np.int64), f"kernel argument of type {type(a).__name__}"
        return ctypes.c_longlong(int(a))

    class RawModule:
        def __init__(self, code, options=()):
            self.code = code

        def get_function(self, name):
            fn = getattr(lib, LAUNCHERS[name])

            def launch(grid, block, args):
                assert len(grid) == len(block) == 1 and grid[0] > 0
                launches.append(name)
                fn(ctypes.c_uint(grid[0]), ctypes.c_uint(block[0]), *[arg(a) for a in args])
            return launch

    mod.RawModule = RawModule
    return mod


@pytest.fixture(scope="module")
def emu_lib(tmp_path_factory):
    return build_cuda_emulation(tmp_path_factory.mktemp("emu"), Path(K.__file__).with_name("tokenize.cu"),
                                "tokenize_emu.cpp", std="c++17", flags=("-O1",))


@pytest.fixture
def cp(emu_lib, monkeypatch):
    launches = []
    mod = _fake_cupy(ctypes.CDLL(str(emu_lib)), launches)
    mod.launches = launches
    monkeypatch.setitem(sys.modules, "cupy", mod)
    monkeypatch.setattr(K, "_modules", {})
    monkeypatch.setattr(K, "_device_tables", {})
    monkeypatch.setattr(K, "_THREADS", 32)  # several blocks on small inputs
    monkeypatch.setattr(GT, "_term_cache", {})  # no device arrays of this stand-in kept past the test
    return mod


def _rows():
    d = datasets.default_data_dir()
    texts = datasets.shared_corpora(d)["gensim-lee.cor"]()["text"].tolist()[:25] if d else []
    rows = [t.lower().encode() for t in texts] + [b"", b"caf\xc3\xa9 x\xff\xfey", "हिन्दी भाषा".encode(),
                                                 b"a_b  c\r\n", "ΟΔΟΣ σ".encode().lower(), b"\xed\xa0\x80z"]
    data = np.frombuffer(b"".join(rows), np.uint8).copy()
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    return data, offsets


@pytest.mark.parametrize("chunk", [1, 3, 64])
def test_token_kernels_gpu_branch_equals_numpy(cp, chunk, monkeypatch):
    monkeypatch.setattr(K, "BOUNDS_CHUNK", chunk)  # tokens across chunk edges, chunks inside tokens
    data, offsets = _rows()
    dd, do = cp.asarray(data), cp.asarray(offsets)
    blanked = K.blank_separators(dd, do)
    assert isinstance(blanked, cp.ndarray)
    want = K.token_bounds(K.blank_separators(data, offsets), offsets)
    got = K.token_bounds(blanked, do)
    for w, g in zip(want, got):
        assert isinstance(g, cp.ndarray)
        np.testing.assert_array_equal(w, g.get())
    s, e, _ = want
    np.testing.assert_array_equal(K.hash_tokens(dd, cp.asarray(s), cp.asarray(e)).get(), K.hash_tokens(data, s, e))
    rep = np.random.default_rng(3).integers(0, len(s), len(s)).astype(np.int64)
    np.testing.assert_array_equal(K.tokens_equal(dd, cp.asarray(s), cp.asarray(e), cp.asarray(rep)).get(),
                                  K.tokens_equal(data, s, e, rep))
    assert K.utf8_valid(cp.asarray(np.frombuffer("ok é".encode(), np.uint8))) is True
    assert K.utf8_valid(dd) is False  # \xff\xfe and a surrogate
    assert {"tk_blank_separators", "tk_hash_tokens", "tk_tokens_equal", "tk_utf8_invalid", "tk_bounds_count",
            "tk_bounds_write"} <= set(cp.launches)
    np.testing.assert_array_equal(K.rows_with_high_bytes(dd, do).get(), K.rows_with_high_bytes(data, offsets))
    table = K.nfc_unstable_table()
    np.testing.assert_array_equal(K.rows_containing(dd, do, table).get(), K.rows_containing(data, offsets, table))
    assert "tk_rows_containing" in cp.launches
    assert len(K.rows_with_high_bytes(data, offsets)) > 0
    # rows that start after byte 0 and end before the buffer does, empty rows inside and at the end
    sub = np.array([0, 5, 5, 40, 41, 41], np.int64) + 7
    want = K.token_bounds(K.blank_separators(data, sub), sub)
    got = K.token_bounds(K.blank_separators(dd, cp.asarray(sub)), cp.asarray(sub))
    for w, g in zip(want, got):
        np.testing.assert_array_equal(w, g.get())


@pytest.mark.parametrize("cfg", [TokenizerConfig.make(), TokenizerConfig.make(stopwords="lucene", stemmer="porter",
                                                                            min_len=2),
                                 TokenizerConfig.make(min_len=2, max_len=6)])
def test_scan_arrays_gpu_branch_equals_numpy(cp, cfg):
    data, offsets = _rows()
    want = GT.scan_arrays(data, offsets, cfg)
    got = GT.scan_arrays(cp.asarray(data), cp.asarray(offsets), cfg)
    assert want is not None and got is not None
    assert got[0].to_pylist() == want[0].to_pylist()  # same hashes, same order of the unique terms
    for w, g in zip(want[1:], got[1:]):
        assert isinstance(g, cp.ndarray)
        np.testing.assert_array_equal(w, g.get())
    assert "tk_tokens_equal" in cp.launches
    assert ("tk_code_points" in cp.launches) == (cfg.needs_term_map and not cfg.stopwords)


@pytest.mark.parametrize("cfg", [TokenizerConfig.make(stopwords="lucene", stemmer="porter"),
                                 TokenizerConfig.make(analyzer="anserini")], ids=["lucene+porter", "anserini"])
def test_term_cache_gpu_branch_equals_numpy_over_partitions(cp, cfg, monkeypatch):
    """Partitions in sequence through the term cache: the device cache (keyed by the device) holds device arrays
    and gives what the host cache gives, partition for partition."""
    real = GT.standard_token_bounds  # the word-break kernels are not emulated here: their twins' offsets uploaded
    monkeypatch.setattr(GT, "standard_token_bounds", lambda d, o: (
        real(d, o) if not isinstance(d, cp.ndarray) else tuple(map(cp.asarray, real(np.asarray(d), np.asarray(o))))))
    data, offsets = _rows()
    n = len(offsets) - 1
    for lo, hi in [(0, n // 3), (n // 3, n), (0, n // 2)]:  # the last partition: rows seen before
        d, o = data[offsets[lo]:offsets[hi]].copy(), offsets[lo:hi + 1] - offsets[lo]
        want = GT.scan_arrays(d, o, cfg)
        got = GT.scan_arrays(cp.asarray(d), cp.asarray(o), cfg)
        assert want is not None and got is not None
        assert got[0].to_pylist() == want[0].to_pylist()
        for w, g in zip(want[1:], got[1:]):
            assert isinstance(g, cp.ndarray)
            np.testing.assert_array_equal(w, g.get())
    assert set(GT._term_cache) == {(cfg, None), (cfg, 0)}
    device = GT._term_cache[(cfg, 0)]
    assert all(isinstance(a, cp.ndarray) for a in (device.known_hash, device.final, device.start, device.length,
                                                   device.known_bytes))
    np.testing.assert_array_equal(device.known_hash.get(), GT._term_cache[(cfg, None)].known_hash)


@pytest.mark.parametrize("chunk", [1, 2, 64])
def test_split_lines_gpu_branch_equals_numpy(cp, chunk, monkeypatch):
    monkeypatch.setattr(K, "BOUNDS_CHUNK", chunk)  # "\\r\\n" across chunk edges
    raw = b"a\r\nb\n\nc\r\r\n\xc3\xa9 d"
    want = GR.split_lines(np.frombuffer(raw, np.uint8))
    got = GR.split_lines(cp.asarray(np.frombuffer(raw, np.uint8)))
    for w, g in zip(want, got):
        np.testing.assert_array_equal(w, g.get())
    assert pd.Series([bytes(want[0][want[1][i]:want[1][i + 1]]) for i in range(len(want[1]) - 1)]).tolist() == \
        [b"a", b"b", b"", b"c\r", b"\xc3\xa9 d"]
    rng = np.random.default_rng(chunk)
    for raw in [b"", b"\n", b"\r", b"\r\n", b"x\r", b"\n\n\r\n", bytes(rng.choice(list(b"ab\r\n "), 300))]:
        want = GR.split_lines(np.frombuffer(raw, np.uint8))
        got = GR.split_lines(cp.asarray(np.frombuffer(raw, np.uint8)))
        for w, g in zip(want, got):
            np.testing.assert_array_equal(w, g.get() if hasattr(g, "get") else g, err_msg=repr(raw))
    assert {"tk_lines_count", "tk_lines_write"} <= set(cp.launches)
