"""The CUDA C of ``kernels/search.cu``, run on the CPU (g++, one thread per CUDA thread), equals the numba
twin of the tiled engine and the CPU engine; and the engines' top-k against an independent brute force.

``tests/cuda_emu/search_emu.cpp`` defines the CUDA names the search kernels use (``threadIdx``, ``blockIdx``,
``__syncthreads`` as a block barrier (and its count / and forms), ``__shared__`` as block-wide storage, ``atomicAdd``,
``__float_as_uint``), includes the kernel source and runs every block's threads as ``std::thread`` s, built with
``-ffp-contract=off`` (the CPU analogue of ``--fmad=false``), ``-DSB_TILE=512`` (a tile of 512 scores, so
the small problems here span several tiles) and ``-DSB_LIST=32`` (a shared list of 32 keys, one a thread of
the 32 emulated a block: k <= 16 keeps its keys there, a larger k takes the radix select).
``tests/cuda_emu/fake_cupy.py`` stands in for cupy, so :func:`cutext.kernels.search.search_tiled` takes its GPU path
(the loader, the launch shapes, the workspace plan, the passes of queries).  The GPU tests (tests/gpu/test_bm25.py) then
check the real kernels.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from cutext.kernels import search as ks
from cutext.stages.engines.search import merge_topk

from helpers import build_cuda_emulation, install_fake_cupy


@pytest.fixture(scope="module")
def emu_lib(tmp_path_factory):
    return build_cuda_emulation(tmp_path_factory.mktemp("emu"), Path(ks.__file__).with_name("search.cu"),
                                "search_emu.cpp", flags=("-O1", "-ffp-contract=off", "-DSB_TILE=512", "-DSB_LIST=32"))


@pytest.fixture(scope="module")
def emu_lib_qt2(tmp_path_factory):
    """search.cu with SB_QT=2: a query's terms past its second keep their cursor, end and weight in global memory."""
    return build_cuda_emulation(tmp_path_factory.mktemp("emu_qt2"), Path(ks.__file__).with_name("search.cu"),
                                "search_emu.cpp",
                                flags=("-O1", "-ffp-contract=off", "-DSB_TILE=512", "-DSB_LIST=32", "-DSB_QT=2"))


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
    for ws in (1 << 30, 3 * (28 * k + 24 + 16 * 4)):
        _same(ks.search_tiled(*_args(M), M.shape[1], Q.indptr, Q.indices, Q.data, k, max_workspace=ws), want,
              f"twin ws={ws}")


@pytest.mark.parametrize("tile", [1, 97, 2500])
@pytest.mark.parametrize("k", [1, 6, 300])
def test_twin_over_tiles_equals_brute_force(monkeypatch, tile, k):
    """The twin's tiles (one document each, an odd width, all in one) with the append and select branches."""
    monkeypatch.setattr(ks, "TILE", tile)
    M, Q = _problem(11 * k + tile, nq=15)
    _same(ks.search_tiled(*_args(M), M.shape[1], Q.indptr, Q.indices, Q.data, k), _brute(M, Q, k), f"tile {tile}")


@pytest.mark.parametrize("k,ws", [(5, 1 << 30), (5, 4 * (28 * 5 + 24 + 16 * 4)), (300, 1 << 30)])
def test_emulated_cuda_equals_twin(fake_cupy, k, ws):
    """search.cu through the GPU path of search_tiled (shared-memory tiles of 512 documents, per-term cursors,
    the append branch while fewer than k are kept, the radix select after, several passes of queries, the
    bitonic sort) equals the twin and the brute force."""
    M, Q = _problem(3 + k, nq=9)
    passes = ks.plan_passes(Q.indptr, k, ws)
    dev = [fake_cupy.asarray(a) for a in _args(M)]
    got = ks.search_tiled(*dev, M.shape[1], Q.indptr, Q.indices, Q.data, k, max_workspace=ws)
    twin = ks.search_tiled(*_args(M), M.shape[1], Q.indptr, Q.indices, Q.data, k, max_workspace=ws)
    _same(got, twin, f"emulated vs twin (passes {passes})")
    _same(got, _brute(M, Q, k), "emulated vs brute force")
    names = [name for name, _ in fake_cupy.launches]
    assert set(names) == {"bm25_block_search", "bm25_topk_sort"}
    assert names.count("bm25_block_search") == len(passes)
    assert (len(passes) > 1) == (ws < 1 << 30)


@pytest.mark.parametrize("k", [15, 16, 17])
def test_emulated_cuda_kept_in_the_shared_list_or_not(fake_cupy, k):
    """Around the list's bound (``2 k <= SB_LIST``, 32 here): k = 15 and 16 keep their keys in the shared list
    (tiles whose kept keys and candidates fit are merged by rank, the first tiles' overflow by the radix
    select from the list), k = 17 takes the radix select with the key buffers; over 8 tiles of 512, with
    many equal scores, each equals the twin and the brute force."""
    M, Q = _problem(100 + k, n_terms=40, n_docs=4000, nq=10, levels=2)
    dev = [fake_cupy.asarray(a) for a in _args(M)]
    got = ks.search_tiled(*dev, M.shape[1], Q.indptr, Q.indices, Q.data, k)
    _same(got, ks.search_tiled(*_args(M), M.shape[1], Q.indptr, Q.indices, Q.data, k), "emulated vs twin")
    _same(got, _brute(M, Q, k), "emulated vs brute force")
    assert (got[2] == k).sum() >= 3  # queries that fill their k: the select ran


def test_workspace_batches_in_flight_borrow_and_give_back_their_buffers(fake_cupy):
    """Batches started before the last is finished (as a search over devices does), of growing sizes and with
    several passes, through one Workspace: each equals the twin, the two sets are reused (no new arrays once
    grown), a third batch in flight scores on buffers of its own, and every set is free again at the end."""
    ws = ks.Workspace()
    M = _problem(17, nq=30)[0]
    dev = [fake_cupy.asarray(a) for a in _args(M)]
    probs = [_problem(17, nq=nq)[1] for nq in (5, 30, 12, 30)]
    tight = 4 * (28 * 6 + 24 + 16 * 4)  # several passes of queries for the 30-query batches

    def start(Q, mws=1 << 30):
        return ks.search_tiled_start(*dev, M.shape[1], Q.indptr, Q.indices, Q.data, 6, max_workspace=mws,
                                     workspace=ws)

    def want(Q, mws=1 << 30):
        return ks.search_tiled(*_args(M), M.shape[1], Q.indptr, Q.indices, Q.data, 6, max_workspace=mws)

    a, b = start(probs[0]), start(probs[1])  # two in flight: both sets taken
    assert ws.take() is None
    c = start(probs[2])  # a third: buffers of its own
    for fin, Q in ((a, probs[0]), (b, probs[1]), (c, probs[2])):
        _same(fin(), want(Q))
    assert len(ws._free) == 2
    grown = {id(x) for st in ws._sets for x in st.values()}
    for Q in probs:  # one at a time, no batch larger than before: the same arrays
        _same(start(Q)(), want(Q))
    _same(start(probs[3], tight)(), want(probs[3], tight), "several passes")
    assert {id(x) for st in ws._sets for x in st.values()} >= grown and len(ws._free) == 2


def test_emulated_cuda_long_postings_and_ties(fake_cupy):
    """Posting lists longer than a block's threads in one tile (cursor chunks), every score equal (the ties
    rule alone decides), and a query without terms."""
    n_docs = 1300
    M = sp.csr_matrix(np.ones((3, n_docs), np.float32))
    M.data[:] = 0.5
    Q = sp.csr_matrix(np.array([[0, 1, 0], [0, 0, 0], [0, 2, 1]], np.float32))
    want = _brute(M, Q, 40)
    assert want[2][1] == 0 and (want[0][0] == np.arange(40)).all()
    dev = [fake_cupy.asarray(a) for a in _args(M)]
    _same(ks.search_tiled(*dev, n_docs, Q.indptr, Q.indices, Q.data, 40), want, "emulated")


def test_emulated_cuda_terms_past_those_in_shared_memory(emu_lib_qt2, monkeypatch):
    """Queries of 1-9 terms over a build that keeps two terms a query in shared memory: the third and later terms'
    cursors advance in global memory, tile by tile, and the results equal the twin and the brute force."""
    fake = install_fake_cupy(emu_lib_qt2, monkeypatch)
    monkeypatch.setattr(ks, "THREADS", 32)
    M = _problem(23, n_terms=30, n_docs=3000)[0]
    M = (sp.random(31, 3000, density=0.2, format="csr", random_state=5, dtype=np.float32) + M).tocsr()
    M.sort_indices()
    rng = np.random.default_rng(23)
    rows = [rng.choice(np.arange(1, 31), size=n, replace=False) for n in range(1, 10)]
    Q = sp.csr_matrix((np.ones(sum(map(len, rows)), np.float32), (np.repeat(np.arange(9), [len(r) for r in rows]),
                       np.concatenate(rows))), shape=(9, 31))
    Q.sort_indices()
    dev = [fake.asarray(a) for a in _args(M)]
    for k in (4, 100):
        got = ks.search_tiled(*dev, 3000, Q.indptr, Q.indices, Q.data, k)
        _same(got, ks.search_tiled(*_args(M), 3000, Q.indptr, Q.indices, Q.data, k), f"emulated vs twin k={k}")
        _same(got, _brute(M, Q, k), f"emulated vs brute force k={k}")


@pytest.mark.parametrize("density", [0.3, 0.9])
def test_emulated_cuda_dense_postings(fake_cupy, density):
    """Terms with hundreds of postings per tile of 512 documents: a tile's postings of a term take several
    steps of 4 x 32 postings, and a tile's end falls anywhere inside a step (the cursor of the next tile is
    set by the thread that meets the first posting out of the tile)."""
    M, Q = _problem(int(density * 10), n_terms=8, n_docs=2000, nq=10, levels=5)
    M = (sp.random(9, 2000, density=density, format="csr", random_state=4, dtype=np.float32) + M).tocsr()
    M.sort_indices()
    Q = sp.csr_matrix(np.maximum(Q.toarray(), 0)[:, :9])
    Q[np.arange(10), np.arange(10) % 9] = 1.0
    Q.sort_indices()
    assert np.diff(M.indptr).max() > 4 * 32 * 2000 // 512
    dev = [fake_cupy.asarray(a) for a in _args(M)]
    for k in (3, 200):
        _same(ks.search_tiled(*dev, 2000, Q.indptr, Q.indices, Q.data, k), _brute(M, Q, k), f"emulated k={k}")


def test_workspace_plan_is_bounded_and_refuses_too_small():
    rng = np.random.default_rng(0)
    for nq, k, ws in [(10**5, 10, 1 << 30), (4096, 1000, 1 << 20), (3, 10, 1 << 20), (500, 7, 5000)]:
        q_ptr = np.r_[0, np.cumsum(rng.integers(0, 30, nq))]
        passes = ks.plan_passes(q_ptr, k, ws)
        assert passes[0][0] == 0 and passes[-1][1] == nq
        assert all(a[1] == b[0] for a, b in zip(passes, passes[1:]))
        for s, e in passes:
            assert e > s
            assert (e - s) * (28 * k + 24) + 16 * (q_ptr[e] - q_ptr[s]) <= ws
        if ws >= 1 << 30:
            assert len(passes) == 1
    with pytest.raises(ValueError, match="max_workspace=1000 bytes is too small for k=10: query 1 of the batch"):
        ks.plan_passes(np.array([0, 1, 100]), 10, 1000)
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
    parts, local = [], []
    for lo, hi in zip(cuts, cuts[1:]):
        S = M[:, lo:hi].tocsr()
        d, s, n = ks.search_cpu(*_args(S), hi - lo, Q.indptr, Q.indices, Q.data, k)
        parts.append((np.where(d >= 0, d + lo, -1), s, n))
        local.append((d, s, n))
    _same(merge_topk(parts, k), want, f"shards {cuts}")
    # shard-local doc ids, each shard's first doc id added in the merge (what shards and workers return)
    _same(merge_topk(local, k, list(cuts[:-1])), want, f"shard-local ids, shards {cuts}")


def _filters(n_docs, nq, seed):
    """A mask (about 30 % of the documents) and per-query sorted lists (0 to 40 % each, one query empty)."""
    rng = np.random.default_rng(seed)
    mask = rng.random(n_docs) < 0.3
    rows = [np.flatnonzero(rng.random(n_docs) < rng.uniform(0, 0.4)) for _ in range(nq)]
    rows[nq // 2] = np.zeros(0, np.int64)
    a_ptr = np.r_[0, np.cumsum([len(r) for r in rows])].astype(np.int64)
    return mask, (a_ptr, np.concatenate(rows).astype(np.int32)), rows


def _brute_filtered(M, Q, k, allowed):
    """The brute force over the allowed documents only: ``allowed[q]`` a bool array over the documents."""
    doc, score, n = _brute(M, Q, M.shape[1])
    out = (np.full((len(n), k), -1, np.int64), np.zeros((len(n), k), np.float32), np.zeros(len(n), np.int32))
    for q in range(len(n)):
        keep = [j for j in range(n[q]) if allowed[q][doc[q, j]]][:k]
        out[2][q] = len(keep)
        out[0][q, :len(keep)] = doc[q, keep]
        out[1][q, :len(keep)] = score[q, keep]
    return out


@pytest.mark.parametrize("k", [1, 6, 300])
def test_filters_equal_brute_force_cpu_and_twin(k):
    """Both filter forms before the top k: the CPU engine (touched and dense selections) and the twin."""
    M, Q = _problem(5 + k, nq=14)
    mask, lists, rows = _filters(M.shape[1], Q.shape[0], k)
    per_q = [np.isin(np.arange(M.shape[1]), r) for r in rows]
    for kw, allowed in ((dict(mask=mask), [mask] * Q.shape[0]), (dict(lists=lists), per_q)):
        want = _brute_filtered(M, Q, k, allowed)
        _same(ks.search_cpu(*_args(M), M.shape[1], Q.indptr, Q.indices, Q.data, k, **kw), want, f"cpu {list(kw)}")
        _same(ks.search_tiled(*_args(M), M.shape[1], Q.indptr, Q.indices, Q.data, k, **kw), want,
              f"twin {list(kw)}")
        _same(ks.search_tiled(*_args(M), M.shape[1], Q.indptr, Q.indices, Q.data, k,
                              max_workspace=3 * (28 * k + 24 + 16 * 4), **kw), want, f"twin passes {list(kw)}")


@pytest.mark.parametrize("k,ws", [(5, 1 << 30), (5, 4 * (28 * 5 + 24 + 16 * 4)), (300, 1 << 30)])
def test_emulated_cuda_filters_equal_twin_and_brute_force(fake_cupy, k, ws):
    """search.cu's filter (the bitset words of a tile, a query's run of allowed docs found by binary search and
    set with atomicOr in shared memory) over tiles of 512 documents and passes of queries."""
    M, Q = _problem(7 + k, nq=9)
    mask, lists, rows = _filters(M.shape[1], Q.shape[0], k + 1)
    per_q = [np.isin(np.arange(M.shape[1]), r) for r in rows]
    dev = [fake_cupy.asarray(a) for a in _args(M)]
    for kw, allowed in ((dict(mask=mask), [mask] * Q.shape[0]), (dict(lists=lists), per_q)):
        got = ks.search_tiled(*dev, M.shape[1], Q.indptr, Q.indices, Q.data, k, max_workspace=ws, **kw)
        _same(got, ks.search_tiled(*_args(M), M.shape[1], Q.indptr, Q.indices, Q.data, k, max_workspace=ws, **kw),
              f"emulated vs twin {list(kw)}")
        _same(got, _brute_filtered(M, Q, k, allowed), f"emulated vs brute force {list(kw)}")


def test_filter_arrays_are_checked():
    M, Q = _problem(1, nq=3)
    n = M.shape[1]
    with pytest.raises(ValueError, match=rf"shape \({n},\)"):
        ks.search_cpu(*_args(M), n, Q.indptr, Q.indices, Q.data, 5, mask=np.ones(n - 1, bool))
    with pytest.raises(ValueError, match="4 non-decreasing offsets"):
        ks.search_cpu(*_args(M), n, Q.indptr, Q.indices, Q.data, 5, lists=(np.array([0, 1]), np.array([3])))
    with pytest.raises(ValueError, match="strictly ascending"):
        ks.search_cpu(*_args(M), n, Q.indptr, Q.indices, Q.data, 5, lists=(np.array([0, 2, 2, 2]), np.array([3, 1])))
    with pytest.raises(ValueError, match="not both"):
        ks.search_cpu(*_args(M), n, Q.indptr, Q.indices, Q.data, 5, mask=np.ones(n, bool),
                      lists=(np.array([0, 0, 0, 0]), np.zeros(0)))


def test_emulated_cuda_rare_terms_over_many_tiles(fake_cupy):
    """Terms with a posting every few tiles, or none past a point, or none at all (a term's cursor waits through
    tiles that hold none of its postings): over 24 tiles of 512, with postings at the first and last document of
    a tile, the results equal the twin and the brute force."""
    n_docs = 24 * 512
    rng = np.random.default_rng(31)
    rows, cols = [], []
    edges = np.array([0, 511, 512, 1023, 1024, 5 * 512 - 1, 5 * 512, n_docs - 1])
    for t in range(1, 13):
        docs = np.unique(np.concatenate([rng.choice(n_docs, size=int(rng.integers(1, 12)), replace=False),
                                         edges[rng.random(len(edges)) < 0.4]]))
        if t == 12:
            docs = docs[docs < 700]  # none after the second tile
        rows.append(np.full(len(docs), t))
        cols.append(docs)
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    M = sp.csr_matrix(((rng.integers(1, 4, len(rows)) / 4).astype(np.float32), (rows, cols)), shape=(14, n_docs))
    M.sort_indices()  # term 13 and term 0: no postings
    qrows = [rng.choice(np.arange(14), size=int(rng.integers(1, 8)), replace=False) for _ in range(10)]
    Q = sp.csr_matrix((np.ones(sum(map(len, qrows)), np.float32),
                       (np.repeat(np.arange(10), [len(r) for r in qrows]), np.concatenate(qrows))), shape=(10, 14))
    Q.sort_indices()
    dev = [fake_cupy.asarray(a) for a in _args(M)]
    for k in (3, 20):
        got = ks.search_tiled(*dev, n_docs, Q.indptr, Q.indices, Q.data, k)
        _same(got, ks.search_tiled(*_args(M), n_docs, Q.indptr, Q.indices, Q.data, k), f"k={k} emulated vs twin")
        _same(got, _brute(M, Q, k), f"k={k} emulated vs brute force")
        assert (got[2] > 0).sum() >= 8


def test_launch_order_costliest_first(monkeypatch):
    """The blocks' order (kernels.search.launch_order): a permutation of the queries by cost descending (postings
    of the terms plus a step a term and tile), ties in batch order; a pass's rows of a larger CSR rebased; batch
    order when switched off."""
    term_postings = np.array([0, 5000, 3, 3, 40000, 10], np.int64)
    # costs with 2 tiles (n_docs 9000 at TILE 8192), a step 1024 postings a term and tile:
    # q0 [1, 2] 5003 + 4096; q1 [] 0; q2 [4] 40000 + 2048; q3 [2] 3 + 2048; q4 [3] 3 + 2048; q5 [5, 2] 13 + 4096
    q_ptr = np.array([0, 2, 2, 3, 4, 5, 7], np.int64)
    q_terms = np.array([1, 2, 4, 2, 3, 5, 2], np.int32)
    order = ks.launch_order(q_ptr, q_terms, term_postings, 9000)
    assert order.dtype == np.int32
    assert order.tolist() == [2, 0, 5, 3, 4, 1]
    assert ks.launch_order(q_ptr, q_terms, term_postings.astype(np.int32), 9000).tolist() == order.tolist()
    # rows 2..5 of the batch as a pass: their terms alone, q_ptr not from 0
    assert ks.launch_order(q_ptr[2:6], q_terms[q_ptr[2]:q_ptr[5]], term_postings, 9000).tolist() == [0, 1, 2]
    assert ks.launch_order(q_ptr[3:6], q_terms[q_ptr[3]:q_ptr[5]], term_postings, 9000).tolist() == [0, 1]
    M, Q = _problem(7, nq=200)
    lens = np.diff(M.indptr).astype(np.int64)
    got = ks.launch_order(Q.indptr, Q.indices, lens, M.shape[1])
    assert sorted(got.tolist()) == list(range(200))
    cost = np.array([lens[Q.indices[Q.indptr[q]:Q.indptr[q + 1]]].sum() + 1024 * (Q.indptr[q + 1] - Q.indptr[q])
                     for q in range(200)])
    assert (np.diff(cost[got]) <= 0).all()
    monkeypatch.setattr(ks, "ORDER_BY_COST", False)
    assert ks.launch_order(q_ptr, q_terms, term_postings, 9000).tolist() == list(range(6))
