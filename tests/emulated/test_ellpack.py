"""The CUDA C of ``kernels/ellpack.cu``, run on the CPU (g++, one thread per CUDA thread), equals the numba twin.

No GPU is needed: ``tests/cuda_emu/ellpack_emu.cpp`` defines the few CUDA names the kernels use
(``threadIdx``, ``blockIdx``, ``__syncthreads`` as a barrier, ``__shared__`` as block-wide
storage), includes the kernel source, and runs every block's threads as ``std::thread`` s; it is
built with ``-ffp-contract=off`` (the CPU analogue of ``--fmad=false``).  This checks the kernels'
indexing, merge loop, update buffer, reductions and tie rule before they meet a device; the GPU
tests (tests/gpu/test_cluster.py) then check the real thing.
"""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cutext.kernels import ellpack
from cutext.pipelines import datasets
from cutext.stages.engines.streamcluster import ClusterState, StreamClusterer, StreamVectorizer

from helpers import build_cuda_emulation, install_fake_cupy

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves this module out

K = 35


@pytest.fixture(scope="module")
def emu_lib(tmp_path_factory):
    return build_cuda_emulation(tmp_path_factory.mktemp("emu"), Path(ellpack.__file__).with_name("ellpack.cu"),
                                "ellpack_emu.cpp")


@pytest.fixture(scope="module")
def emu(emu_lib):
    return ctypes.CDLL(str(emu_lib))


@pytest.fixture
def fake_cupy(emu_lib, monkeypatch):
    """``import cupy`` gives the CPU stand-in whose kernels are the emulated CUDA C."""
    return install_fake_cupy(emu_lib, monkeypatch)


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
    partitions over two devices; the candidate pass with its device index) driving the emulated kernels
    gives the CPU reference's assignments.

    Blocks of 32 threads (instead of 256) keep the emulation fast and make the capacity double early."""
    monkeypatch.setattr(ellpack, "BLOCK", 32)
    tv = vectors.take(slice(0, 120))
    cpu = StreamClusterer(0.6, K)
    want = cpu.partial_fit(tv)
    assert cpu.n_clusters > 64
    for batch, devices, candidates, one in ((1, None, False, True), (1, None, False, False), (8, None, False, False),
                                            (4, [0, 1], False, False), (1, None, True, False), (8, None, True, False),
                                            (1, [0, 1], True, False), (4, [0, 1], True, False)):
        sc = StreamClusterer(0.6, K, backend="gpu", batch_size=batch, devices=devices, candidates=candidates)
        sc.engine.sequential = one
        assert sc.engine.one_launch == one
        got = pd.concat([sc.partial_fit(tv.take(slice(0, 50))), sc.partial_fit(tv.take(slice(50, len(tv))))],
                        ignore_index=True)
        assert (sc.engine.candidate_batches > 0) == candidates
        if candidates:
            sc.engine.sync()
            for sh in sc.engine.shards:  # the device index == the host mirror, on the "device"
                assert isinstance(sh.index.d_pool, fake_cupy.ndarray) and sh.index.partial_uploads > 0
                np.testing.assert_array_equal(sh.index.d_pool.get(), sh.index.pool)
                np.testing.assert_array_equal(sh.index.d_len.get(), sh.index.t_len)
                np.testing.assert_array_equal(sh.index.d_off.get(), sh.index.t_off)
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
    assert {"ct_sequential", "ct_block_max", "ct_block_max_multi", "ct_argmax", "ct_scatter", "ct_cand_gather",
            "ct_cand_block_max", "ct_index_update"} <= names


# ----------------------------------------------------------------------------- candidate pass

def _index_of(tv, rows_of_docs, n_terms=8, pool_capacity=8):
    """A PostingIndex (numpy twin) holding row r for every term of document rows_of_docs[r]; tiny start
    capacities so that segments move and the pool and the term arrays double while it is built."""
    ix = ellpack.PostingIndex(np, n_terms=n_terms, pool_capacity=pool_capacity)
    for r, j in enumerate(rows_of_docs):
        L = tv.length[j]
        ix.append(tv.idx[j, :L], np.full(L, r))
    return ix


def _emu_candidates(emu, ix, docs, ei, ew, stride, n_rows, bx, gx_gather, gx_score, upd=None, cand_in=None):
    """Run ct_cand_gather (unless cand_in gives the candidates), ct_cand_block_max and ct_argmax emulated."""
    B = len(docs)
    d_off, d_len, d_pool = ix.d_off.copy(), ix.d_len.copy(), ix.d_pool.copy()
    walk = ix.walk(docs.idx, docs.length)
    caps = np.minimum(walk, n_rows)
    cand_off = np.zeros(B, np.int64)
    cand_off[1:] = np.cumsum(caps)[:-1]
    cand = np.full(max(1, caps.sum()), -7, np.int32)
    cand_n = np.zeros(B, np.int32)
    words = -(-stride // 32)
    seen = np.zeros((B, words), np.uint32)
    if upd is None:
        upd_row, ui, uw = -1, np.zeros(1, np.int32), np.zeros(1)
    else:
        upd_row, ui, uw = upd
    if cand_in is None:
        emu.launch_ct_cand_gather(ctypes.c_uint(gx_gather), ctypes.c_uint(B), ctypes.c_uint(bx), _p(docs.idx),
                                  _p(docs.length), K, _p(d_off), _p(d_len), ctypes.c_longlong(len(d_off)), _p(d_pool),
                                  _p(seen), ctypes.c_longlong(words), _p(cand_off), _p(cand), _p(cand_n), _p(ei),
                                  _p(ew), ctypes.c_longlong(stride), upd_row, _p(ui), _p(uw))
    else:
        for b, c in enumerate(cand_in):
            cand[cand_off[b]:cand_off[b] + len(c)] = c
            cand_n[b] = len(c)
            for r in c:
                seen[b, r >> 5] |= np.uint32(1 << (r & 31))
    found = [np.sort(cand[cand_off[b]:cand_off[b] + cand_n[b]]) for b in range(B)]
    # the bitmap holds exactly the candidates between the two kernels
    for b in range(B):
        bits = np.flatnonzero(np.unpackbits(seen[b].view(np.uint8), bitorder="little"))
        np.testing.assert_array_equal(bits, found[b])
    osim, oid = np.zeros((B, gx_score)), np.zeros((B, gx_score), np.int32)
    emu.launch_ct_cand_block_max(ctypes.c_uint(gx_score), ctypes.c_uint(B), ctypes.c_uint(bx), _p(ei), _p(ew),
                                 ctypes.c_longlong(stride), K, _p(docs.idx), _p(docs.w), _p(docs.length), _p(cand),
                                 _p(cand_off), _p(cand_n), _p(seen), ctypes.c_longlong(words), _p(osim), _p(oid))
    assert not seen.any()  # every bit cleared for the next pass
    best = np.zeros((B, 2))
    emu.launch_ct_argmax(ctypes.c_uint(B), ctypes.c_uint(1), ctypes.c_uint(bx), _p(osim), _p(oid), gx_score, _p(best))
    return found, (osim, oid), best


def test_emulated_candidate_pass_equals_twin_and_all_rows(emu, vectors):
    """ct_cand_gather / ct_cand_block_max / ct_argmax (C++ threads) == the numba twin == the all-rows pass.

    Rows 0..599 hold documents 0..599; rows 40..59 are then overwritten by documents 1300..1319 with their
    terms appended (the old entries stay: stale candidates); row 590 duplicates row 5 (a tie); documents:
    one per case (a copy of row 5, ordinary stories, an empty one, one whose terms no row holds)."""
    tv = vectors
    n_rows = 600
    ei, ew = ellpack.to_ellpack(tv.idx, tv.w, n_rows, K)
    stride = len(ei) // K
    ix = _index_of(tv, range(n_rows))
    assert ix.full_uploads == 0 and len(ix.pool) >= ix.top > ix.n_entries  # grown, with garbage
    ix.sync()
    new = np.arange(1300, 1320)
    ellpack.ellpack_scatter(ei, ew, stride, K, np.arange(40, 60), tv.idx[new], tv.w[new])
    for r, j in zip(range(40, 60), new):
        ix.append(tv.idx[j, :tv.length[j]], np.full(tv.length[j], r))
    ellpack.ellpack_scatter(ei, ew, stride, K, np.array([590]), tv.idx[5:6], tv.w[5:6])
    ix.append(tv.idx[5, :tv.length[5]], np.full(tv.length[5], 590))
    ix.sync()  # only the changes
    assert ix.partial_uploads == 1
    np.testing.assert_array_equal(ix.d_pool, ix.pool)
    np.testing.assert_array_equal(ix.d_off, ix.t_off)
    np.testing.assert_array_equal(ix.d_len, ix.t_len)
    sel = np.r_[5, 1000:1006, 1305, 1100]
    docs = tv.take(sel)
    docs.length[7] = 0  # an empty document
    docs.idx[7] = -1
    docs.w[7] = 0
    L = docs.length[8]
    docs.idx[8, :L] = np.arange(L) + 10**6 + 1  # terms beyond every posting list (and the term arrays)
    scores = ellpack.ellpack_scores(ei, ew, stride, n_rows, K, docs.idx, docs.w, docs.length)
    want_all = ellpack.ellpack_best(ei, ew, stride, n_rows, K, docs.idx, docs.w, docs.length)
    twin, twin_c = ellpack.candidate_best(ei, ew, stride, n_rows, K, docs.idx, docs.w, docs.length, ix,
                                          return_candidates=True)
    stale = 0
    for b in range(len(docs)):
        shared = np.flatnonzero(scores[b] > 0)
        assert np.isin(shared, twin_c[b]).all()  # every row that shares a term is a candidate
        stale += len(np.setdiff1d(twin_c[b], shared))
        if want_all[b, 0] > 0:
            np.testing.assert_array_equal(twin[b], want_all[b])
        else:
            assert twin[b].tolist() == [-1.0, -1.0] and len(twin_c[b]) == 0
    assert stale > 0  # some candidates come from stale entries only
    assert twin[0].tolist() == [want_all[0, 0], 5.0] and abs(twin[0, 0] - 1.0) < 1e-12  # tie with row 590
    assert twin[7].tolist() == [-1.0, -1.0] and twin[8].tolist() == [-1.0, -1.0]
    assert want_all[7].tolist() == [0.0, 0.0] and want_all[8].tolist() == [0.0, 0.0]
    walk = ix.walk(docs.idx, docs.length)
    for bx, gx_g, gx_s in ((32, 1, 1), (64, 3, 2), (256, 2, 5)):  # grid-stride loops, idle blocks
        found, _, best = _emu_candidates(emu, ix, docs, ei.copy(), ew.copy(), stride, n_rows, bx, gx_g, gx_s)
        for b in range(len(docs)):
            np.testing.assert_array_equal(found[b], twin_c[b])
        np.testing.assert_array_equal(best, twin)
    assert walk.max() > 64 * 3  # the gather loops several times per thread
    # the twin's candidate order into the emulated scoring kernel: block maxima identical to the twin's
    words = -(-stride // 32)
    cand_off = np.zeros(len(docs), np.int64)
    cand_off[1:] = np.cumsum(np.minimum(walk, n_rows))[:-1]
    cand = np.zeros(max(1, np.minimum(walk, n_rows).sum()), np.int32)
    cand_n = np.zeros(len(docs), np.int32)
    seen = np.zeros((len(docs), words), np.uint32)
    ellpack._twin_cand_gather(docs.idx, docs.length, ix.d_off, ix.d_len, ix.d_pool, seen, cand_off, cand, cand_n)
    order = [cand[cand_off[b]:cand_off[b] + cand_n[b]].copy() for b in range(len(docs))]
    gx = 3
    tsim, tid = np.zeros((len(docs), gx)), np.zeros((len(docs), gx), np.int32)
    ellpack._twin_cand_block_max(ei, ew, stride, K, docs.idx, docs.w, docs.length, cand, cand_off, cand_n, seen,
                                 64, tsim, tid)
    _, (osim, oid), best = _emu_candidates(emu, ix, docs, ei.copy(), ew.copy(), stride, n_rows, 64, 1, gx,
                                           cand_in=order)
    np.testing.assert_array_equal(osim, tsim)
    np.testing.assert_array_equal(oid, tid)
    np.testing.assert_array_equal(best, twin)


def test_emulated_candidate_gather_writes_the_update_row(emu, vectors):
    """The update buffer of Alg. 3 in the candidate pass: ct_cand_gather writes the row, the scoring sees it."""
    tv = vectors
    n_rows = 300
    ei, ew = ellpack.to_ellpack(tv.idx, tv.w, n_rows, K)
    stride = len(ei) // K
    ix = _index_of(tv, range(n_rows))
    d = tv.take(slice(1200, 1201))
    ix.append(tv.idx[1200, :tv.length[1200]], np.full(tv.length[1200], 77))  # row 77 gains these terms
    ix.sync()
    ui, uw = np.ascontiguousarray(tv.idx[1200]), np.ascontiguousarray(tv.w[1200])
    twin_i, twin_w = ei.copy(), ew.copy()
    want = ellpack.candidate_best(twin_i, twin_w, stride, n_rows, K, d.idx, d.w, d.length, ix, upd_row=77,
                                  upd_idx=ui, upd_w=uw)
    ci, cw = ei.copy(), ew.copy()
    _, _, best = _emu_candidates(emu, ix, d, ci, cw, stride, n_rows, 64, 2, 1, upd=(77, ui, uw))
    np.testing.assert_array_equal(best, want)
    assert best[0, 1] == 77.0 and abs(best[0, 0] - 1.0) < 1e-12
    np.testing.assert_array_equal(ci, twin_i)
    np.testing.assert_array_equal(cw, twin_w)
    assert not np.array_equal(ci, ei)


def test_emulated_index_update_equals_host_mirror(emu, vectors, monkeypatch):
    """ct_index_update applies the host's changes (appends, moved segments, new terms) to a device copy."""
    tv = vectors
    ix = _index_of(tv, range(100), n_terms=1 << 16, pool_capacity=1 << 16)
    ix.sync()
    dev = [ix.d_pool.copy(), ix.d_off.copy(), ix.d_len.copy()]
    calls = []
    real = ellpack.index_update

    def emulated(pool, t_off, t_len, pos, val, terms, term_off, term_len):
        calls.append(len(pos))
        args = [np.ascontiguousarray(a, dt) for a, dt in ((pos, np.int64), (val, np.int32), (terms, np.int32),
                                                          (term_off, np.int64), (term_len, np.int32))]
        n = max(len(pos), len(terms))
        emu.launch_ct_index_update(ctypes.c_uint(-(-n // 64)), ctypes.c_uint(1), ctypes.c_uint(64), _p(dev[0]),
                                   len(pos), _p(args[0]), _p(args[1]), _p(dev[1]), _p(dev[2]), len(terms),
                                   _p(args[2]), _p(args[3]), _p(args[4]))
        real(pool, t_off, t_len, pos, val, terms, term_off, term_len)

    monkeypatch.setattr(ellpack, "index_update", emulated)
    for r, j in enumerate(range(100, 400)):  # rows 100..399, synced every 7 rows
        ix.append(tv.idx[j, :tv.length[j]], np.full(tv.length[j], 100 + r))
        if r % 7 == 0:
            ix.sync()
    ix.sync()
    assert ix.full_uploads == 1 and ix.partial_uploads == len(calls) > 30 and max(calls) > K  # segments moved
    for a, h in zip(dev, (ix.pool, ix.t_off, ix.t_len)):
        np.testing.assert_array_equal(a, h)
    lists = ix.lists()
    for t in np.unique(tv.idx[:400][tv.idx[:400] > 0])[::50]:
        holders = [r for r in range(400) if t in tv.idx[r, :tv.length[r]]]
        assert sorted(lists[int(t)].tolist()) == holders


# ----------------------------------------------------------------------------- the stream in one launch

@pytest.mark.parametrize("top_k,threshold", [(8, 0.05), (35, 0.3)])
def test_one_launch_stream_equals_reference_on_twin_and_emulated_kernel(fake_cupy, shared_data, monkeypatch,
                                                                         top_k, threshold):
    """ellpack_sequential (the CPU twin, and ct_sequential emulated: one block of 32 threads walking several
    row tiles) gives the sequential reference's decisions, similarities, rows and norms, from a state that
    already holds rows; top_k=8 at T=0.05 makes most documents join and most merges drop terms."""
    monkeypatch.setattr(ellpack, "BLOCK", 32)
    docs = datasets.load_reuters21578(shared_data / "corpora" / "reuters21578.tar.gz").iloc[:260]
    tv = StreamVectorizer(top_k).transform(docs["text"].tolist())
    n0 = 40  # the first documents are the state's rows; the others are streamed
    start = ClusterState(top_k, 512)
    for name in ("idx", "w", "length", "norm"):
        getattr(start, name)[:n0] = getattr(tv, name)[:n0]
    start.size[:n0] = 1
    start.n = n0
    rest = tv.take(slice(n0, len(tv)))
    # the reference: Algorithm 1 over every cluster (brute), on a copy of the state
    want = StreamClusterer(threshold, top_k, method="brute", _state=ClusterState.from_table(start.to_table(), top_k))
    w_out = want.partial_fit(rest)
    assert (~w_out["new_cluster"]).sum() > 50 and want.n_clusters > n0 + 20
    joined = want.state.size[:want.n_clusters] > 1
    assert (want.state.length[:want.n_clusters][joined] == top_k).sum() > 10  # merged rows filled to top_k
    stride = 512
    for xp in (np, fake_cupy):
        ei, ew = ellpack.to_ellpack(start.idx, start.w, n0, top_k, stride)
        ei, ew = xp.asarray(ei), xp.asarray(ew)
        norm = xp.zeros(stride, np.float64)
        norm[:n0] = start.norm[:n0]
        cl, sim, new, n_after = ellpack.ellpack_sequential(
            ei, ew, norm, stride, n0, top_k, xp.asarray(rest.idx), xp.asarray(rest.w), xp.asarray(rest.length),
            xp.asarray(rest.norm), threshold)
        what = "twin" if xp is np else "emulated kernel"
        np.testing.assert_array_equal(cl, w_out["cluster_id"].to_numpy(), err_msg=what)
        np.testing.assert_array_equal(sim, w_out["similarity"].to_numpy(), err_msg=what)
        np.testing.assert_array_equal(new, w_out["new_cluster"].to_numpy(), err_msg=what)
        n = want.n_clusters
        assert n_after == n
        ei, ew, norm = (np.asarray(a) for a in (ei, ew, norm))
        np.testing.assert_array_equal(ei.reshape(top_k, stride)[:, :n].T, want.state.idx[:n], err_msg=what)
        np.testing.assert_array_equal(ew.reshape(top_k, stride)[:, :n].T, want.state.w[:n], err_msg=what)
        np.testing.assert_array_equal(norm[:n], want.state.norm[:n], err_msg=what)
    assert ("ct_sequential", (1, 1)) in fake_cupy.launches
    with pytest.raises(ValueError, match="capacity"):
        ellpack.ellpack_sequential(ei, ew, norm, n, n, top_k, rest.idx, rest.w, rest.length, rest.norm, threshold)
