"""The CUDA C of ``kernels/ellpack.cu``, run on the CPU (g++, one thread per CUDA thread), equals the numba twin.

No GPU is needed: ``tests/cuda_emu/ellpack_emu.cpp`` defines the few CUDA names the kernels use
(``threadIdx``, ``blockIdx``, ``__syncthreads`` as a barrier, ``__shared__`` as block-wide
storage), includes the kernel source, and runs every block's threads as ``std::thread`` s; it is
built with ``-ffp-contract=off`` (the CPU analogue of ``--fmad=false``).  This checks the kernels'
indexing, merge loop, update buffer, reductions and tie rule before they meet a device; the GPU
tests (tests/test_gpu_cluster.py) then check the real thing.
"""
from __future__ import annotations

import ctypes
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cutext.kernels import ellpack
from cutext.pipelines import datasets
from cutext.stages.streamcluster import StreamClusterer, StreamVectorizer

HERE = Path(__file__).resolve().parent
K = 35


@pytest.fixture(scope="module")
def emu_lib(tmp_path_factory):
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ not found")
    lib = tmp_path_factory.mktemp("emu") / "libellpack_emu.so"
    src = Path(ellpack.__file__).with_name("ellpack.cu")
    cmd = [gxx, "-std=c++20", "-O1", "-ffp-contract=off", "-shared", "-fPIC", f'-DKERNEL_SOURCE="{src}"',
           str(HERE / "cuda_emu" / "ellpack_emu.cpp"), "-o", str(lib), "-lpthread"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        if "c++20" in r.stderr or "barrier" in r.stderr:
            pytest.skip(f"g++ without C++20 <barrier>: {r.stderr[:200]}")
        pytest.fail(f"the kernel source does not compile as C++:\n{r.stderr}")
    return lib


@pytest.fixture(scope="module")
def emu(emu_lib):
    return ctypes.CDLL(str(emu_lib))


@pytest.fixture
def fake_cupy(emu_lib, monkeypatch):
    """``import cupy`` gives the CPU stand-in whose kernels are the emulated CUDA C."""
    spec = importlib.util.spec_from_file_location("fake_cupy", HERE / "cuda_emu" / "fake_cupy.py")
    fake = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake)
    mod = fake.make(emu_lib)
    monkeypatch.setitem(sys.modules, "cupy", mod)
    monkeypatch.setattr(ellpack, "_modules", {})
    monkeypatch.setattr(ellpack, "_functions", {})
    return mod


def _p(a):
    return a.ctypes.data_as(ctypes.c_void_p)


@pytest.fixture(scope="module")
def vectors(shared_data):
    docs = datasets.load_reuters21578(shared_data / "corpora" / "reuters21578.tar.gz").iloc[:1400]
    return StreamVectorizer(K).transform(docs["text"].tolist())


def test_emulated_kernels_equal_twin(emu, vectors):
    tv = vectors
    n_rows = 600
    ei, ew = ellpack.to_ellpack(tv.idx, tv.w, n_rows, K)
    stride = len(ei) // K
    docs = tv.take(slice(1000, 1006))
    B = len(docs)
    # every similarity
    want = ellpack.ellpack_scores(ei, ew, stride, n_rows, K, docs.idx, docs.w, docs.length)
    got = np.zeros((B, n_rows))
    emu.emu_scores(_p(ei), _p(ew), ctypes.c_longlong(stride), n_rows, K, _p(docs.idx), _p(docs.w),
                   _p(docs.length), B, _p(got))
    np.testing.assert_array_equal(got, want)
    assert (want > 0).sum() > 10
    # block maxima and the global argmax; a duplicate of row 5 at row 590 (tie -> row 5)
    ellpack.ellpack_scatter(ei, ew, stride, K, np.array([590]), tv.idx[5:6], tv.w[5:6])
    ci, cw = ei.copy(), ew.copy()
    docs = tv.take(np.r_[5, 1000:1005])
    best, (bsim, bid) = ellpack.ellpack_best(ei, ew, stride, n_rows, K, docs.idx, docs.w, docs.length,
                                             return_blocks=True)
    nb = bsim.shape[1]
    osim, oid, obest = np.zeros((B, nb)), np.zeros((B, nb), np.int32), np.zeros((B, 2))
    dummy_i, dummy_w = np.zeros(1, np.int32), np.zeros(1)
    emu.emu_block_max(_p(ci), _p(cw), ctypes.c_longlong(stride), n_rows, K, _p(docs.idx), _p(docs.w),
                      _p(docs.length), B, -1, _p(dummy_i), _p(dummy_w), _p(osim), _p(oid), _p(obest))
    np.testing.assert_array_equal(osim, bsim)
    np.testing.assert_array_equal(oid, bid)
    np.testing.assert_array_equal(obest, best)
    assert best[0, 1] == 5.0
    # several documents per block (micro-batches): 6 documents (one partial group) and 11 (two groups)
    for sel in (np.r_[5, 1000:1005], np.r_[5, 0:3, 1000:1007]):
        docs = tv.take(sel)
        Bm = len(docs)
        best, (bsim, bid) = ellpack.ellpack_best(ei, ew, stride, n_rows, K, docs.idx, docs.w, docs.length,
                                                 return_blocks=True)
        osim, oid = np.zeros((Bm, nb)), np.zeros((Bm, nb), np.int32)
        emu.launch_ct_block_max_multi(ctypes.c_uint(nb), ctypes.c_uint(-(-Bm // ellpack.MULTI_DOCS)),
                                      ctypes.c_uint(256), _p(ci), _p(cw), ctypes.c_longlong(stride), n_rows, K,
                                      _p(docs.idx), _p(docs.w), _p(docs.length), Bm, _p(osim), _p(oid))
        np.testing.assert_array_equal(osim, bsim)
        np.testing.assert_array_equal(oid, bid)
    # the update buffer (one document): the row is written, then scored
    d = tv.take(slice(1300, 1301))
    upd_i, upd_w = np.ascontiguousarray(tv.idx[1300]), np.ascontiguousarray(tv.w[1300])
    want = ellpack.ellpack_best(ei, ew, stride, n_rows, K, d.idx, d.w, d.length, upd_row=77, upd_idx=upd_i,
                                upd_w=upd_w)
    osim, oid, obest = np.zeros((1, nb)), np.zeros((1, nb), np.int32), np.zeros((1, 2))
    emu.emu_block_max(_p(ci), _p(cw), ctypes.c_longlong(stride), n_rows, K, _p(d.idx), _p(d.w), _p(d.length), 1,
                      77, _p(upd_i), _p(upd_w), _p(osim), _p(oid), _p(obest))
    np.testing.assert_array_equal(obest, want)
    assert want[0, 1] == 77.0
    np.testing.assert_array_equal(ci, ei)
    np.testing.assert_array_equal(cw, ew)
    # scatter of several rows
    rows = np.array([3, 250, 256, 599], np.int64)
    src = tv.take(slice(1100, 1104))
    ellpack.ellpack_scatter(ei, ew, stride, K, rows, src.idx, src.w)
    emu.emu_scatter(_p(ci), _p(cw), ctypes.c_longlong(stride), K, len(rows), _p(rows), _p(src.idx), _p(src.w))
    np.testing.assert_array_equal(ci, ei)
    np.testing.assert_array_equal(cw, ew)


def test_emulated_kernels_with_no_rows_in_a_block_tail(emu, vectors):
    """n_rows not a multiple of 256, a single row, and documents without terms."""
    tv = vectors
    for n_rows in (1, 257):
        ei, ew = ellpack.to_ellpack(tv.idx, tv.w, n_rows, K)
        stride = len(ei) // K
        docs = tv.take(np.r_[0, 1200])
        docs.length[1] = 0
        docs.idx[1] = -1
        docs.w[1] = 0
        best = ellpack.ellpack_best(ei, ew, stride, n_rows, K, docs.idx, docs.w, docs.length)
        nb = -(-n_rows // 256)
        osim, oid, obest = np.zeros((2, nb)), np.zeros((2, nb), np.int32), np.zeros((2, 2))
        z_i, z_w = np.zeros(1, np.int32), np.zeros(1)
        emu.emu_block_max(_p(ei), _p(ew), ctypes.c_longlong(stride), n_rows, K, _p(docs.idx), _p(docs.w),
                          _p(docs.length), 2, -1, _p(z_i), _p(z_w), _p(osim), _p(oid), _p(obest))
        np.testing.assert_array_equal(obest, best)
        assert best[0, 1] == 0.0 and abs(best[0, 0] - 1.0) < 1e-12  # document 0 is row 0
        assert best[1].tolist() == [0.0, 0.0]  # no term: similarity 0 everywhere, lowest row


def test_gpu_engine_on_emulated_kernels_equals_cpu_reference(fake_cupy, vectors, monkeypatch):
    """The GPU engine's host code (update buffer, micro-batches, scatters, capacity doubling, row
    partitions over two devices) driving the emulated kernels gives the CPU reference's assignments.

    Blocks of 32 threads (instead of 256) keep the emulation fast and make the capacity double early."""
    monkeypatch.setattr(ellpack, "BLOCK", 32)
    tv = vectors.take(slice(0, 120))
    cpu = StreamClusterer(0.6, K)
    want = cpu.partial_fit(tv)
    assert cpu.n_clusters > 64
    for batch, devices in ((1, None), (8, None), (4, [0, 1])):
        sc = StreamClusterer(0.6, K, backend="gpu", batch_size=batch, devices=devices)
        got = sc.partial_fit(tv)
        for col in ("cluster_id", "new_cluster", "similarity"):
            np.testing.assert_array_equal(got[col].to_numpy(), want[col].to_numpy(), err_msg=f"{col} {batch}")
        mats = sc.engine.matrix()
        S = len(mats)
        for s, (ei, ew, stride, n_rows) in enumerate(mats):
            assert isinstance(ei, np.ndarray) and not isinstance(ei, fake_cupy.ndarray)
            g = np.arange(s, sc.n_clusters, S)
            assert n_rows == len(g) and stride >= n_rows
            np.testing.assert_array_equal(ei.reshape(K, stride)[:, :n_rows].T, cpu.state.idx[g])
            np.testing.assert_array_equal(ew.reshape(K, stride)[:, :n_rows].T, cpu.state.w[g])
        if S == 1:
            assert mats[0][2] >= 128  # capacity doubled twice on the "device" (from 32 rows)
    names = {n for n, _ in fake_cupy.launches}
    assert {"ct_block_max", "ct_block_max_multi", "ct_argmax", "ct_scatter"} <= names
