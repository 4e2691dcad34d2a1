"""The CUDA C of ``kernels/wordbreak.cu``, run on the CPU (g++), equals the numba twins of kernels/wordbreak.py.

``tests/cuda_emu/wordbreak_emu.cpp`` runs every thread of a launch in turn; ``tests/cuda_emu/fake_cupy.py`` stands
in for cupy, so :func:`cutext.kernels.wordbreak.standard_token_bounds` takes its GPU path (launch shapes, the
two-level table on the "device", count and write passes, the joins and cuts in array code).
tests/gpu/test_wordbreak.py checks the real kernels on a device.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from cutext.kernels import wordbreak as W
from cutext.kernels.tokenize import arrow_buffers

from helpers import build_cuda_emulation, install_fake_cupy, need_corpus
from wordbreak_cases import HOSTILE, random_texts


@pytest.fixture(scope="module")
def emu_lib(tmp_path_factory):
    return build_cuda_emulation(tmp_path_factory.mktemp("emu"), Path(W.__file__).with_name("wordbreak.cu"),
                                "wordbreak_emu.cpp", std="c++17", flags=("-O1",))


@pytest.fixture
def fake_cupy(emu_lib, monkeypatch):
    def extend(mod, fake):  # the array functions standard_token_bounds calls on device arrays
        for name in ("flatnonzero", "cumsum", "stack", "empty_like", "argsort", "concatenate", "ones"):
            fn = getattr(np, name)
            setattr(mod, name, lambda *a, _fn=fn, **k: np.asarray(_fn(*a, **k)).view(fake.ndarray))
        mod.searchsorted = lambda a, v, side="left": np.searchsorted(np.asarray(a), np.asarray(v),
                                                                     side=side).view(fake.ndarray)

    monkeypatch.setattr(W, "_device_tables", {})
    return install_fake_cupy(emu_lib, monkeypatch, extend)


def test_cuda_c_equals_twin(fake_cupy):
    texts = HOSTILE + random_texts(3, n_short=1000, n_long=40) + need_corpus("20news")["text"].tolist()[:300]
    data, offsets = arrow_buffers(pa.array([None, "x y"] + texts, type=pa.large_string()).slice(1))
    want = W.standard_token_bounds(data, offsets)
    del fake_cupy.launches[:]
    got = W.standard_token_bounds(fake_cupy.asarray(data), fake_cupy.asarray(offsets))
    assert [n for n, _ in fake_cupy.launches] == ["wb_segment_starts", "wb_count_pieces", "wb_write_pieces",
                                                  "wb_code_points"]  # the text holds South East Asian runs
    for g, w in zip(got, want):
        assert type(g).__module__ == "cupy"
        np.testing.assert_array_equal(np.asarray(g), w)
    assert len(want[0]) > 50_000


def test_cuda_c_reads_the_pair_table_as_the_twin(fake_cupy, monkeypatch):
    """Under a random pair table (any of no break / break / undecided for each ASCII pair) the CUDA C gives the
    twin's flags byte for byte, and then its pieces of those segments: the table is indexed (left << 7) | right,
    used only between two ASCII bytes inside a row, and the rules run on "undecided"."""
    pairs = np.random.default_rng(0).integers(0, 3, 128 * 128).astype(np.uint8)
    monkeypatch.setattr(W, "ascii_pairs", lambda: pairs)
    texts = HOSTILE + random_texts(4, n_short=500, n_long=10) + need_corpus("20news")["text"].tolist()[:40]
    data, offsets = arrow_buffers(pa.array(texts, type=pa.large_string()))
    body, bound, _ = W._buffers(data, offsets)
    want = W._segment_flags_of(body, bound)
    got = W._segment_flags_of(fake_cupy.asarray(body), fake_cupy.asarray(bound))
    np.testing.assert_array_equal(np.asarray(got), want)
    rules = np.zeros(len(body), np.uint8)
    W._segment_flags(body, bound, *W.lookup_tables(), np.full_like(pairs, W.PAIR_UNDECIDED), rules)
    assert (want != rules).sum() > 1000  # the random table, not the rules, decided many pairs
    want_pieces = W._pieces(body, bound, want)
    got_pieces = W._pieces(fake_cupy.asarray(body), fake_cupy.asarray(bound), got)
    for g, w in zip(got_pieces, want_pieces):
        np.testing.assert_array_equal(np.asarray(g), w)
