"""The CUDA C of ``kernels/search.cu``, run on the CPU (g++, one thread per CUDA thread), equals the numba
twin of the tiled engine and the CPU engine; and the engines' top-k against an independent brute force.

``tests/cuda_emu/search_emu.cpp`` defines the CUDA names the search kernels use (``threadIdx``, ``blockIdx``,
``__syncthreads`` as a block barrier, ``__shared__`` as block-wide storage, ``atomicAdd``, ``__float_as_uint``),
includes the kernel source and runs every block's threads as ``std::thread`` s, built with
``-ffp-contract=off`` (the CPU analogue of ``--fmad=false``).  ``tests/cuda_emu/fake_cupy.py`` stands in for
cupy, so :func:`cutext.kernels.search.search_tiled` takes its GPU path (the loader, the launch shapes, the
workspace plan, the passes over tiles and query sub-batches).  The GPU tests (tests/test_gpu.py) then check
the real kernels.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from cutext.kernels import search as ks
from cutext.stages.search import merge_topk
from helpers import build_cuda_emulation, install_fake_cupy


@pytest.fixture(scope="module")
def emu_lib(tmp_path_factory):
    return build_cuda_emulation(tmp_path_factory.mktemp("emu"), Path(ks.__file__).with_name("search.cu"),
                                "search_emu.cpp")


@pytest.fixture
def fake_cupy(emu_lib, monkeypatch):
    """``import cupy`` gives the CPU stand-in whose kernels are the emulated CUDA C of search.cu."""
    mod = install_fake_cupy(emu_lib, monkeypatch)
    monkeypatch.setattr(ks, "THREADS", 32)  # 32 emulated threads per block keep the emulation fast
    return mod


def _problem(seed, n_terms=60, n_docs=2500, nq=12, levels=3):
    """A random term-major index whose weights take few values (many equal scores) and query CSR."""
    rng = np.random.default_rng(seed)
    M = sp.random(n_terms + 1, n_docs, density=0.03, format="csr", random_state=seed, dtype=np.float32)
    M.data = (np.ceil(M.data * levels) / 4).astype(np.float32)
    M.eliminate_zeros()
    M.sort_indices()
    rows = np.repeat(np.arange(nq), rng.integers(0, 5, nq))
    Q = sp.csr_matrix((rng.integers(1, 3, len(rows)).astype(np.float32),
                       (rows, rng.integers(1, n_terms + 1, len(rows)))), shape=(nq, n_terms + 1))
    Q.sum_duplicates()
    return M, Q


def _brute(M, Q, k):
    """Dense scores (float32, the same term order), then a full lexsort: an independent top-k."""
    nq = Q.shape[0]
    doc = np.full((nq, k), -1, np.int64)
    score = np.zeros((nq, k), np.float32)
    n = np.zeros(nq, np.int32)
    for q in range(nq):
        acc = np.zeros(M.shape[1], np.float32)
        for j in range(Q.indptr[q], Q.indptr[q + 1]):
            t, w = Q.indices[j], Q.data[j]
            s, e = M.indptr[t], M.indptr[t + 1]
            acc[M.indices[s:e]] += np.float32(w) * M.data[s:e]
        cand = np.flatnonzero(acc > 0)
        o = cand[np.lexsort((cand, -acc[cand]))][:k]
        n[q] = len(o)
        doc[q, :len(o)] = o
        score[q, :len(o)] = acc[o]
    return doc, score, n


def _same(a, b, what=""):
    for x, y, name in zip(a, b, ("doc", "score", "n")):
        np.testing.assert_array_equal(x, y, err_msg=f"{what} {name}")


def _args(M):
    return M.indptr.astype(np.int64), M.indices.astype(np.int32), M.data


@pytest.mark.parametrize("k", [1, 7, 40])
def test_engines_equal_brute_force(k):
    M, Q = _problem(k, nq=40)
    want = _brute(M, Q, k)
    _same(ks.search_cpu(*_args(M), M.shape[1], Q.indptr, Q.indices, Q.data, k), want, "cpu")
    _same(ks.search_cpu(*_args(M), M.shape[1], Q.indptr, Q.indices, Q.data, k, n_threads=1), want, "cpu 1")
    for ws in (1 << 30, 3 * (8 * 1024 + 28 * k + 16)):
        _same(ks.search_tiled(*_args(M), M.shape[1], Q.indptr, Q.indices, Q.data, k, max_workspace=ws), want,
              f"twin ws={ws}")


@pytest.mark.parametrize("k,ws", [(5, 1 << 30), (5, 4 * (8 * 1024 + 28 * 5 + 16)), (300, 1 << 30)])
def test_emulated_cuda_equals_twin(fake_cupy, k, ws):
    """search.cu through the GPU path of search_tiled (radix select when candidates > k, the pass-through when
    fewer, several tiles and query sub-batches, the bitonic sort) equals the twin and the brute force."""
    M, Q = _problem(3 + k, nq=9)
    nqt, tile = ks.plan_workspace(M.shape[1], 9, k, ws)
    dev = [fake_cupy.asarray(a) for a in _args(M)]
    got = ks.search_tiled(*dev, M.shape[1], Q.indptr, Q.indices, Q.data, k, max_workspace=ws)
    twin = ks.search_tiled(*_args(M), M.shape[1], Q.indptr, Q.indices, Q.data, k, max_workspace=ws)
    _same(got, twin, f"emulated vs twin (passes of {nqt} queries, tiles of {tile} docs)")
    _same(got, _brute(M, Q, k), "emulated vs brute force")
    names = {name for name, _ in fake_cupy.launches}
    assert names == {"bm25_tile_score", "bm25_tile_select", "bm25_topk_sort"}
    assert sum(name == "bm25_tile_select" for name, _ in fake_cupy.launches) == \
        -(-9 // nqt) * -(-M.shape[1] // tile)


def test_workspace_plan_is_bounded_and_refuses_too_small():
    for n_docs, nq, k, ws in [(10**6, 10**5, 10, 1 << 30), (10**7, 4096, 1000, 256 << 20), (500, 3, 10, 1 << 20)]:
        nqt, tile = ks.plan_workspace(n_docs, nq, k, ws)
        assert nqt * (8 * tile + 28 * k + 16) <= ws and 1 <= nqt <= nq and 1 <= tile <= n_docs
        assert ks.plan_workspace(n_docs, nq * 10, k, ws)[0] * (8 * tile + 28 * k + 16) <= ws
    with pytest.raises(ValueError, match="max_workspace=1000 bytes is too small for k=10"):
        ks.plan_workspace(10**6, 10, 10, 1000)
    with pytest.raises(ValueError, match="k must be <= 4096"):
        ks.search_tiled(np.zeros(2, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32), 5,
                        np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32), 5000)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 4), st.integers(1, 12))
def test_merge_of_shards_equals_one_index(seed, n_shards, k):
    """Top k of document ranges, merged, is the top k of the whole (ties across shard edges included)."""
    M, Q = _problem(seed % 1000, n_terms=20, n_docs=300, nq=6, levels=2)
    want = _brute(M, Q, k)
    cuts = np.unique(np.r_[0, np.sort(np.random.default_rng(seed).integers(0, 300, n_shards - 1)), 300])
    parts = []
    for lo, hi in zip(cuts, cuts[1:]):
        S = M[:, lo:hi].tocsr()
        d, s, n = ks.search_cpu(*_args(S), hi - lo, Q.indptr, Q.indices, Q.data, k)
        parts.append((np.where(d >= 0, d + lo, -1), s, n))
    _same(merge_topk(parts, k), want, f"shards {cuts}")
