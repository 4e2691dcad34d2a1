"""Stream clustering on the GPU == the CPU reference, bit for bit (run on the lent GPU machine)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cutext import pipelines
from cutext.kernels import ellpack
from cutext.kernels.backend import device_count
from cutext.pipelines import datasets
from cutext.stages.engines.streamcluster import StreamClusterer
from cutext.stages.text.termvec import term_vectors

from helpers import need_data

pytestmark = pytest.mark.gpu

K = 35


def _corpus(name):
    if name == "20news":
        return datasets.load_20newsgroups(need_data("20newsgroups"))
    return datasets.load_reuters21578(need_data("reuters21578"))


_VECTORS: dict = {}


def _vectors(name):
    """Corpus-IDF TF-ICF top-35 vectors of every document, in the loader's order (CPU stages)."""
    if name not in _VECTORS:
        from cutext.pipelines.cluster import corpus_counts
        from cutext.stages.text.tokenize import TokenizerConfig

        docs = _corpus(name)
        import tempfile
        from pathlib import Path

        with tempfile.TemporaryDirectory() as tmp:
            p = datasets.write_jsonl(docs, Path(tmp) / f"{name}.jsonl")
            cc = corpus_counts(str(p), TokenizerConfig.make(stopwords="lucene", min_len=2), "cpu")
        df = np.bincount(cc["term_id"], minlength=len(cc["vocab"]) + 1)
        _VECTORS[name] = term_vectors(cc["doc_id"], cc["term_id"], cc["tf"], cc["n_docs"], K, df=df,
                                      n_ref=cc["n_docs"])
    return _VECTORS[name]


def _assert_same(a, b, what):
    for col in ("cluster_id", "new_cluster", "similarity"):
        x, y = a[col].to_numpy(), b[col].to_numpy()
        if not np.array_equal(x, y):
            i = int(np.flatnonzero(x != y)[0])
            pytest.fail(f"{what}: {col} differs first at stream position {i}: cpu {x[i]!r} gpu {y[i]!r}")


@pytest.mark.parametrize("name", ["20news", "reuters21578"])
@pytest.mark.parametrize("threshold", [0.3, 0.6])
def test_gpu_assignments_equal_cpu_reference_full_corpus(name, threshold):
    tv = _vectors(name)
    cpu = StreamClusterer(threshold, K, backend="cpu")
    a_cpu = cpu.partial_fit(tv)
    for batch in (1, 32):
        gpu = StreamClusterer(threshold, K, backend="gpu", batch_size=batch, candidates=False)  # every row
        a_gpu = gpu.partial_fit(tv)
        _assert_same(a_cpu, a_gpu, f"{name} T={threshold} batch={batch}")
        assert gpu.engine.candidate_batches == 0
        assert gpu.n_clusters == cpu.n_clusters
        n = cpu.n_clusters
        np.testing.assert_array_equal(gpu.state.idx[:n], cpu.state.idx[:n])
        np.testing.assert_array_equal(gpu.state.w[:n], cpu.state.w[:n])
        # the device matrix holds exactly the host rows (update buffer and scatters all applied)
        (ei, ew, stride, n_rows), = gpu.engine.matrix()
        assert n_rows == n and stride >= n and stride > ellpack.BLOCK  # capacity doubled on the device
        np.testing.assert_array_equal(ei.reshape(K, stride)[:, :n].T, cpu.state.idx[:n])
        np.testing.assert_array_equal(ew.reshape(K, stride)[:, :n].T, cpu.state.w[:n])


def test_ellpack_kernels_equal_twin():
    import cupy

    tv = _vectors("reuters21578")
    n_rows = 5000
    ei, ew = ellpack.to_ellpack(tv.idx, tv.w, n_rows, K)
    stride = len(ei) // K
    gi, gw = cupy.asarray(ei), cupy.asarray(ew)
    docs = tv.take(slice(n_rows, n_rows + 64))
    dg = [cupy.asarray(x) for x in (docs.idx, docs.w, docs.length)]
    s_cpu = ellpack.ellpack_scores(ei, ew, stride, n_rows, K, docs.idx, docs.w, docs.length)
    s_gpu = ellpack.ellpack_scores(gi, gw, stride, n_rows, K, *dg).get()
    np.testing.assert_array_equal(s_cpu, s_gpu)
    b_cpu, (bs_cpu, bi_cpu) = ellpack.ellpack_best(ei, ew, stride, n_rows, K, docs.idx, docs.w, docs.length,
                                                   return_blocks=True)
    b_gpu, (bs_gpu, bi_gpu) = ellpack.ellpack_best(gi, gw, stride, n_rows, K, *dg, return_blocks=True)
    np.testing.assert_array_equal(b_cpu, b_gpu.get())
    np.testing.assert_array_equal(bs_cpu, bs_gpu.get())
    np.testing.assert_array_equal(bi_cpu, bi_gpu.get())
    # ties to the lowest row: copies of row 7 at rows 4000 and 4999
    rows = np.array([4000, 4999])
    ellpack.ellpack_scatter(ei, ew, stride, K, rows, tv.idx[[7, 7]], tv.w[[7, 7]])
    ellpack.ellpack_scatter(gi, gw, stride, K, cupy.asarray(rows), cupy.asarray(tv.idx[[7, 7]]),
                            cupy.asarray(tv.w[[7, 7]]))
    np.testing.assert_array_equal(ei, gi.get())
    np.testing.assert_array_equal(ew, gw.get())
    d = tv.take(slice(7, 8))
    bg = ellpack.ellpack_best(gi, gw, stride, n_rows, K, cupy.asarray(d.idx), cupy.asarray(d.w),
                              cupy.asarray(d.length)).get()
    np.testing.assert_array_equal(bg, ellpack.ellpack_best(ei, ew, stride, n_rows, K, d.idx, d.w, d.length))
    assert bg[0, 1] <= 7.0  # row 7 or an identical story before it, never the copies at 4000 / 4999
    # update buffer (Alg. 3): the kernel writes the row, then scores
    u = 123
    args = (tv.idx[9000:9001], tv.w[9000:9001], tv.length[9000:9001])
    b1 = ellpack.ellpack_best(ei, ew, stride, n_rows, K, *args, upd_row=u, upd_idx=tv.idx[9000], upd_w=tv.w[9000])
    b2 = ellpack.ellpack_best(gi, gw, stride, n_rows, K, *[cupy.asarray(x) for x in args], upd_row=u,
                              upd_idx=cupy.asarray(tv.idx[9000]), upd_w=cupy.asarray(tv.w[9000])).get()
    np.testing.assert_array_equal(b1, b2)
    assert b2[0, 0] >= 1.0 - 1e-12  # the updated row holds the document itself
    np.testing.assert_array_equal(ei, gi.get())
    np.testing.assert_array_equal(ew, gw.get())
    # capacity doubling keeps every row
    g2i, g2w = ellpack.grow(gi, gw, K, stride, 4 * stride)
    s2 = ellpack.ellpack_scores(g2i, g2w, 4 * stride, n_rows, K, *dg).get()
    s1 = ellpack.ellpack_scores(gi, gw, stride, n_rows, K, *dg).get()
    np.testing.assert_array_equal(s1, s2)


def test_pipeline_gpu_equals_cpu(tmp_path):
    """The whole pipeline (GPU tokenizer, encoder, counts; ELLPACK clustering) on 4,000 Reuters stories."""
    docs = _corpus("reuters21578").iloc[:4000]
    p = datasets.write_jsonl(docs.assign(id=docs["source_id"]), tmp_path / "reuters.jsonl")
    out = {}
    for be in ("cpu", "gpu"):
        r = pipelines.run("cluster", str(p), out=tmp_path / be, threshold=0.6, top_k=K, backend=be, progress=False)
        assert r.backend == be
        out[be] = pd.read_parquet(tmp_path / be / "assignments.parquet")
    pd.testing.assert_frame_equal(out["cpu"], out["gpu"])


@pytest.mark.skipif(device_count() < 2, reason="needs 2 GPUs")
def test_rows_partitioned_across_gpus_equal_cpu():
    tv = _vectors("20news")
    cpu = StreamClusterer(0.6, K, backend="cpu").partial_fit(tv)
    for batch in (1, 32):
        multi = StreamClusterer(0.6, K, backend="gpu", devices=list(range(device_count())), batch_size=batch,
                                candidates=False)
        _assert_same(cpu, multi.partial_fit(tv), f"{device_count()} GPUs batch={batch}")


# ----------------------------------------------------------------------------- the candidate pass

def _index_equals_mirror(engine):
    engine.sync()
    for sh in engine.shards:
        ix = sh.index
        np.testing.assert_array_equal(ix.d_pool.get(), ix.pool)
        np.testing.assert_array_equal(ix.d_off.get(), ix.t_off)
        np.testing.assert_array_equal(ix.d_len.get(), ix.t_len)
        assert ix.partial_uploads > 0 and not ix.seen(1, sh.stride).any()  # bitmaps cleared after every pass


@pytest.mark.parametrize("name", ["20news", "reuters21578"])
@pytest.mark.parametrize("threshold", [0.3, 0.6])
def test_gpu_candidate_pass_equals_cpu_reference_full_corpus(name, threshold):
    """The candidate pass (device inverted index) on every document of the corpus == the CPU reference."""
    tv = _vectors(name)
    cpu = StreamClusterer(threshold, K, backend="cpu")
    a_cpu = cpu.partial_fit(tv)
    n = cpu.n_clusters
    for batch in (1, 32):
        gpu = StreamClusterer(threshold, K, backend="gpu", batch_size=batch, candidates=True)
        a_gpu = gpu.partial_fit(tv)
        _assert_same(a_cpu, a_gpu, f"candidates {name} T={threshold} batch={batch}")
        e = gpu.engine
        assert e.candidate_batches > 0 and e.all_rows_batches == 0
        assert gpu.n_clusters == n
        np.testing.assert_array_equal(gpu.state.idx[:n], cpu.state.idx[:n])
        np.testing.assert_array_equal(gpu.state.w[:n], cpu.state.w[:n])
        (ei, ew, stride, n_rows), = e.matrix()
        assert n_rows == n
        np.testing.assert_array_equal(ei.reshape(K, stride)[:, :n].T, cpu.state.idx[:n])
        np.testing.assert_array_equal(ew.reshape(K, stride)[:, :n].T, cpu.state.w[:n])
        _index_equals_mirror(e)
        assert e.shards[0].index.n_entries == int(cpu.engine.plen.sum())  # the reference's entries


def test_candidate_kernels_equal_twin():
    import cupy

    tv = _vectors("reuters21578")
    n_rows = 5000
    ei, ew = ellpack.to_ellpack(tv.idx, tv.w, n_rows, K)
    stride = len(ei) // K
    # rows 0..4999 indexed; rows 100..199 then overwritten by documents 9000..9099 (stale entries stay);
    # row 4999 = a copy of row 7 (a tie)
    new = np.r_[9000:9100, 7]
    rows = np.r_[100:200, 4999]
    ellpack.ellpack_scatter(ei, ew, stride, K, rows, tv.idx[new], tv.w[new])
    ix_c, ix_g = ellpack.PostingIndex(np), ellpack.PostingIndex(cupy)
    for ix in (ix_c, ix_g):
        for r in range(n_rows):
            ix.append(tv.idx[r, :tv.length[r]], np.full(tv.length[r], r))
        ix.sync()
        for r, j in zip(rows, new):
            ix.append(tv.idx[j, :tv.length[j]], np.full(tv.length[j], r))
    gi, gw = cupy.asarray(ei), cupy.asarray(ew)
    docs = tv.take(np.r_[7, 5000:5063])
    docs.length[1] = 0  # an empty document
    docs.idx[1] = -1
    docs.w[1] = 0
    dg = [cupy.asarray(x) for x in (docs.idx, docs.w, docs.length)]
    b_cpu, c_cpu = ellpack.candidate_best(ei, ew, stride, n_rows, K, docs.idx, docs.w, docs.length, ix_c,
                                          return_candidates=True)
    b_gpu, c_gpu = ellpack.candidate_best(gi, gw, stride, n_rows, K, *dg, ix_g, return_candidates=True)
    np.testing.assert_array_equal(b_cpu, b_gpu.get())
    for a, b in zip(c_cpu, c_gpu):
        np.testing.assert_array_equal(a, b)
    assert ix_g.partial_uploads == 1 and ix_g.full_uploads >= 1
    np.testing.assert_array_equal(ix_g.d_pool.get(), ix_c.d_pool)
    full = ellpack.ellpack_best(gi, gw, stride, n_rows, K, *dg).get()
    pos = full[:, 0] > 0
    np.testing.assert_array_equal(b_gpu.get()[pos], full[pos])
    assert (b_gpu.get()[~pos] == -1).all() and not pos[1]
    assert b_cpu[0, 1] <= 7.0  # never the copy at row 4999
    assert not ix_g.seen(len(docs), stride).any()
    # update buffer: written by ct_cand_gather, scored by ct_cand_block_max
    d = tv.take(slice(9500, 9501))
    for ix in (ix_c, ix_g):
        ix.append(tv.idx[9500, :tv.length[9500]], np.full(tv.length[9500], 321))
    b1 = ellpack.candidate_best(ei, ew, stride, n_rows, K, d.idx, d.w, d.length, ix_c, upd_row=321,
                                upd_idx=tv.idx[9500], upd_w=tv.w[9500])
    b2 = ellpack.candidate_best(gi, gw, stride, n_rows, K, *[cupy.asarray(x) for x in (d.idx, d.w, d.length)], ix_g,
                                upd_row=321, upd_idx=cupy.asarray(tv.idx[9500]), upd_w=cupy.asarray(tv.w[9500])).get()
    np.testing.assert_array_equal(b1, b2)
    assert b2[0, 1] <= 321.0 and b2[0, 0] >= 1.0 - 1e-12
    np.testing.assert_array_equal(ei, gi.get())
    np.testing.assert_array_equal(ew, gw.get())


@pytest.mark.skipif(device_count() < 2, reason="needs 2 GPUs")
def test_candidate_pass_rows_partitioned_across_gpus_equal_cpu():
    tv = _vectors("20news")
    devices = list(range(min(2, device_count())))
    for threshold in (0.3, 0.6):
        cpu = StreamClusterer(threshold, K, backend="cpu").partial_fit(tv)
        for batch in (1, 32):
            multi = StreamClusterer(threshold, K, backend="gpu", devices=devices, batch_size=batch, candidates=True)
            _assert_same(cpu, multi.partial_fit(tv), f"candidates T={threshold} {len(devices)} GPUs batch={batch}")
            assert multi.engine.candidate_batches > 0
            for sh, dev in zip(multi.engine.shards, devices):
                assert sh.index.d_pool.device.id == dev
            _index_equals_mirror(multi.engine)


_TWIN: dict = {}


@pytest.mark.parametrize("threshold", [0.05, 0.6])
@pytest.mark.parametrize("max_blocks", [1, 7, None])
def test_one_launch_kernel_equals_twin(threshold, max_blocks):
    """ct_sequential (every block at a grid barrier per document, each block owning its row tiles) == its
    numba twin: decisions, similarities, rows and norms, from a state of 6,000 rows (Reuters documents) with
    3,000 more documents streamed; max_blocks=1 and 7 make each block walk many tiles."""
    import cupy

    tv = _vectors("reuters21578")
    n0, n_docs = 6000, 3000
    stride = ellpack.padded_capacity(n0 + n_docs)
    ei, ew = ellpack.to_ellpack(tv.idx, tv.w, n0, K, stride)
    norm = np.zeros(stride)
    norm[:n0] = tv.norm[:n0]
    d = tv.take(slice(n0, n0 + n_docs))
    if threshold not in _TWIN:  # the twin's run, once per threshold
        h = [a.copy() for a in (ei, ew, norm)]
        _TWIN[threshold] = h, ellpack.ellpack_sequential(h[0], h[1], h[2], stride, n0, K, d.idx, d.w, d.length,
                                                         d.norm, threshold)
    host, want = _TWIN[threshold]
    dev = [cupy.asarray(a) for a in (ei, ew, norm)]
    got = ellpack.ellpack_sequential(dev[0], dev[1], dev[2], stride, n0, K, cupy.asarray(d.idx), cupy.asarray(d.w),
                                     cupy.asarray(d.length), cupy.asarray(d.norm), threshold, max_blocks=max_blocks)
    assert got[3] == want[3]
    assert (~want[2]).sum() > 100 and (want[3] > n0 or threshold < 0.1)  # joins (and new rows at T=0.6)
    for g, w, what in zip(got[:3], want[:3], ("cluster", "sim", "new")):
        np.testing.assert_array_equal(g, w, err_msg=what)
    for g, w, what in zip(dev, host, ("idx", "w", "norm")):
        np.testing.assert_array_equal(g.get(), w, err_msg=what)
