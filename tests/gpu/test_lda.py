"""LDA kernels on the GPU equal their numba CPU twins draw for draw (run on the lent GPU machine).

Real data: Reuters in LDA-C (84,010 tokens) and KOS (UCI, 467,714 tokens) from ../shared/data/bow.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cutext import pipelines
from cutext.kernels import lda as K_
from cutext.kernels import lda_hybrid as KH
from cutext.pipelines.lda import LDAModel
from cutext.stages.engines.lda_chunk import build_chunks, read_ldac, read_uci
from cutext.stages.engines.lda_gibbs import GibbsState, resolve_sample_order

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy")


@pytest.fixture(scope="module")
def reuters(shared_data):
    return read_ldac(shared_data / "bow" / "lda_reuters" / "reuters.ldac")


@pytest.fixture(scope="module")
def kos(shared_data):
    return read_uci(shared_data / "bow" / "uci" / "docword.kos.txt.gz")


def _g(a):
    return cupy.asarray(a)


def _h(a):
    return cupy.asnumpy(a)


def test_uniform_and_init_equal():
    keys = np.concatenate([np.arange(100_000), [2**40 + 3, 2**62 - 1]]).astype(np.int64)
    for seed, it in [(0, 0), (5, 17), (2**63 + 11, 2**40)]:
        np.testing.assert_array_equal(_h(K_.uniform(seed, it, _g(keys))), K_.uniform(seed, it, keys))
    np.testing.assert_array_equal(_h(K_.init_topics(9, _g(keys), 1000)), K_.init_topics(9, keys, 1000))


@pytest.mark.parametrize("K", [16, 128, 1000, 12100])
def test_rebuild_and_prepare_equal(reuters, K):
    """K = 12100: D is rebuilt by the sort path (the histogram of K bins would not fit in 48 KiB)."""
    ch = build_chunks(reuters, K, n_chunks=3)
    z = K_.init_topics(1, ch.keys, K)
    cpu = K_.rebuild_counts(ch.word, ch.doc, z, ch.doc_ptr, ch.doc_tok, ch.V, K)
    gpu = K_.rebuild_counts(_g(ch.word), _g(ch.doc), _g(z), _g(ch.doc_ptr), _g(ch.doc_tok), ch.V, K)
    for a, b in zip(cpu, gpu):
        np.testing.assert_array_equal(a, _h(b))
    tc = K_.prepare_words(cpu[0], cpu[1], 0.01, ch.V * 0.01)
    tg = K_.prepare_words(gpu[0], gpu[1], 0.01, ch.V * 0.01)
    for name in tc:
        np.testing.assert_array_equal(tc[name], _h(tg[name]), err_msg=name)


@pytest.mark.parametrize("sampler,exclude,K", [("sparse", True, 64), ("sparse", False, 64),
                                               ("three_branch", True, 64), ("three_branch", False, 1000),
                                               ("three_branch", True, 1000), ("dense", True, 64),
                                               ("dense", False, 128)])
def test_sampler_draw_for_draw(kos, sampler, exclude, K):
    """Along a CPU chain on KOS, every GPU draw equals the CPU twin's (same state, seed, iteration)."""
    ch = build_chunks(kos, K, n_chunks=2)
    cpu = GibbsState(ch, K, 0.1, 0.1, seed=4)
    gpu = GibbsState(ch, K, 0.1, 0.1, seed=4, gpu=True)
    for it in range(1, 6):
        sc = cpu.step(it, sampler, exclude=exclude)
        sg = gpu.step(it, sampler, exclude=exclude)
        np.testing.assert_array_equal(cpu.z, _h(gpu.z), err_msg=f"iteration {it}")
        assert sc == sg
        np.testing.assert_array_equal(cpu.W, _h(gpu.W))
        np.testing.assert_array_equal(cpu.d_cnt, _h(gpu.d_cnt))
        gpu.check_invariants()
    assert gpu.llpt() == pytest.approx(cpu.llpt(), rel=1e-12)
    if sampler == "three_branch":
        assert sc["skipped"] > 0


@pytest.mark.parametrize("sampler", ["sparse", "three_branch"])
def test_sampler_draw_for_draw_long_rows(shared_data, sampler):
    """All of NIPS at K = 4096: D rows of more than 1,024 nonzeros (more than 32 entries a lane in the lane
    sums and the S walk); every GPU draw equals the CPU twin's."""
    nips = read_uci(shared_data / "bow" / "uci" / "docword.nips.txt.gz")
    ch = build_chunks(nips, 4096)
    cpu = GibbsState(ch, 4096, 0.05, 0.01, seed=2)
    gpu = GibbsState(ch, 4096, 0.05, 0.01, seed=2, gpu=True)
    assert int(cpu.d_nnz.max()) > 1024
    for it in range(1, 3):
        sc = cpu.step(it, sampler)
        sg = gpu.step(it, sampler)
        np.testing.assert_array_equal(cpu.z, _h(gpu.z), err_msg=f"iteration {it}")
        assert sc == sg


def test_auto_order_by_what_size():
    """sample_order="auto" on a GPU of 50-60 MiB of L2 (H100, H200): document order for NIPS at K=1000 (What 50 MB),
    word order at K=32768 (1.6 GB)."""
    import cupy

    l2 = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["l2CacheSize"]
    if not 48 * 2**20 <= l2 <= 64 * 2**20:
        pytest.skip(f"L2 of {l2} bytes")
    assert resolve_sample_order("auto", 12419, 1000) == "doc"
    assert resolve_sample_order("auto", 12419, 32768) == "word"
    assert resolve_sample_order("word", 12419, 1000) == "word"


def _sample_both(cpu, gpu, it, sampler, exclude, cap):
    """One pass's draws on the CPU twin and on the GPU in both orders (word: lda_sample, doc: lda_sample_doc)."""
    three = sampler == "three_branch"
    kw = dict(alpha=cpu.alpha, beta=cpu.beta, vbeta=cpu.vbeta, seed=cpu.seed, iteration=it, three=three,
              exclude=exclude)
    c = K_.sample(cpu.word, cpu.doc, cpu.keys, cpu.z, cpu.doc_ptr, cpu.d_topic, cpu.d_cnt, cpu.d_nnz, cpu.W, cpu.nk,
                  cpu.tables, **kw)
    ga = (gpu.word, gpu.doc, gpu.keys, gpu.z, gpu.doc_ptr, gpu.d_topic, gpu.d_cnt, gpu.d_nnz, gpu.W, gpu.nk,
          gpu.tables)
    w = K_.sample(*ga, **kw, order="word")
    d = K_.sample(*ga, **kw, order="doc", doc_tok=gpu.doc_tok, doc_cap=cap)
    return c, w, d


@pytest.mark.parametrize("sampler,exclude,K,cap", [("sparse", True, 1000, K_.DOC_CAP), ("sparse", False, 128, 32),
                                                   ("three_branch", True, 1000, K_.DOC_CAP),
                                                   ("three_branch", False, 1000, 64),
                                                   ("three_branch", True, 64, K_.DOC_CAP)])
def test_sampler_doc_order_draw_for_draw(kos, sampler, exclude, K, cap):
    """lda_sample_doc (tokens in document-major order, D rows in shared memory up to cap entries a warp, longer
    rows from global memory) equals the CPU twin and lda_sample draw for draw, z and flags, along a chain on
    KOS; the chain stepped with GibbsState(sample_order="doc") stays equal to the CPU chain.  cap 32 / 64:
    many rows past the cap."""
    ch = build_chunks(kos, K, n_chunks=2)
    cpu = GibbsState(ch, K, 0.1, 0.1, seed=4)
    gpu = GibbsState(ch, K, 0.1, 0.1, seed=4, gpu=True, sample_order="doc")
    gpu.doc_cap = cap
    over = 0
    for it in range(1, 6):
        (zc, fc), (zw, fw), (zd, fd) = _sample_both(cpu, gpu, it, sampler, exclude, cap)
        np.testing.assert_array_equal(zc, _h(zd), err_msg=f"iteration {it}")
        np.testing.assert_array_equal(fc, _h(fd), err_msg=f"iteration {it}")
        np.testing.assert_array_equal(_h(zw), _h(zd), err_msg=f"iteration {it}")
        over += int((cpu.d_nnz > cap).sum())
        sc = cpu.step(it, sampler, exclude=exclude)
        sg = gpu.step(it, sampler, exclude=exclude)
        np.testing.assert_array_equal(cpu.z, _h(gpu.z), err_msg=f"iteration {it}")
        assert sc == sg
        gpu.check_invariants()
    assert (over > 0) == (cap < 100)


@pytest.mark.parametrize("sampler,cap", [("sparse", K_.DOC_CAP), ("three_branch", 3000)])
def test_sampler_doc_order_long_rows(shared_data, sampler, cap):
    """All of NIPS at K = 4096 (D rows of more than 1,024 nonzeros): lda_sample_doc equals the CPU twin draw for
    draw with the default cap (long rows from global memory) and with cap = 3,000 (192,000 bytes of shared
    memory a block: the launch raises the kernel's dynamic shared-memory limit; rows of 1,024 to 3,000
    nonzeros staged, lane sums of many rounds in shared memory)."""
    nips = read_uci(shared_data / "bow" / "uci" / "docword.nips.txt.gz")
    ch = build_chunks(nips, 4096)
    cpu = GibbsState(ch, 4096, 0.05, 0.01, seed=2)
    gpu = GibbsState(ch, 4096, 0.05, 0.01, seed=2, gpu=True)
    for it in range(1, 3):
        nz = cpu.d_nnz
        assert (nz > max(cap, 1024)).any() or ((nz > 1024) & (nz <= cap)).any()
        assert (nz > K_.DOC_CAP).any() and (nz <= K_.DOC_CAP).any()
        (zc, fc), _, (zd, fd) = _sample_both(cpu, gpu, it, sampler, True, cap)
        np.testing.assert_array_equal(zc, _h(zd), err_msg=f"iteration {it}")
        np.testing.assert_array_equal(fc, _h(fd), err_msg=f"iteration {it}")
        cpu.step(it, sampler)
        gpu.step(it, sampler)
        np.testing.assert_array_equal(cpu.z, _h(gpu.z), err_msg=f"iteration {it}")


def test_pipeline_gpu_equals_cpu(shared_data, tmp_path):
    src = shared_data / "bow" / "lda_reuters" / "reuters.ldac"
    seen = []

    def check(it, state):
        state.check_invariants()
        seen.append(it)

    for smp in ("three_branch", "dense"):
        pipelines.run("lda", str(src), out=tmp_path / f"cpu-{smp}", K=32, iterations=8, sampler=smp,
                           backend="cpu", progress=False)
        rg = pipelines.run("lda", str(src), out=tmp_path / f"gpu-{smp}", K=32, iterations=8, sampler=smp,
                           backend="gpu", progress=False, callback=check)
        assert rg.backend == "gpu"
        for f in ("topic_word.parquet", "doc_topic.parquet", "vocab.parquet"):
            pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / f"cpu-{smp}" / f),
                                          pd.read_parquet(tmp_path / f"gpu-{smp}" / f))
        lc = LDAModel.load(tmp_path / f"cpu-{smp}").llpt
        lg = LDAModel.load(tmp_path / f"gpu-{smp}").llpt
        np.testing.assert_allclose(lg["llpt"], lc["llpt"], rtol=1e-12)
        np.testing.assert_array_equal(lg["skipped"], lc["skipped"])
    assert seen == list(range(9)) * 2
    m = LDAModel.load(tmp_path / "cpu-three_branch")
    docs = [["pope", "church", "vatican"], ["oil", "price", "market", "oil"]]
    np.testing.assert_array_equal(m.transform(docs, backend="gpu"), m.transform(docs, backend="cpu"))


def test_two_gpus_equal_one_cpu(shared_data, tmp_path):
    """EZLDA V-B: chunks on 2 GPUs, W summed after every iteration = the CPU chain draw for draw."""
    from cutext.kernels.backend import device_count

    if device_count() < 2:
        pytest.skip("needs 2 GPUs (nvidia-h200-x2)")
    src = shared_data / "bow" / "uci" / "docword.kos.txt.gz"

    def check(it, state):
        state.check_invariants()

    rc = pipelines.run("lda", str(src), out=tmp_path / "cpu", K=64, iterations=4, sampler="three_branch",
                       backend="cpu", progress=False)
    rg = pipelines.run("lda", str(src), out=tmp_path / "gpu2", K=64, iterations=4, sampler="three_branch",
                       backend="gpu", n_devices=2, progress=False, callback=check)
    assert rg.n_workers == 2
    for f in ("topic_word.parquet", "doc_topic.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "cpu" / f), pd.read_parquet(tmp_path / "gpu2" / f))
    assert rg.params["llpt"] == pytest.approx(rc.params["llpt"], rel=1e-12)


# ----------------------------------------------------------------------------- hybrid dense/sparse W

def _hybrid_equal(cpu, gpu):
    for a, b in zip(cpu.hw.table(), gpu.hw.table()):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(cpu.hw.W_dense, _h(gpu.hw.W_dense))
    np.testing.assert_array_equal(cpu.hw.w_nnz, _h(gpu.hw.w_nnz))
    np.testing.assert_array_equal(cpu.nk, _h(gpu.nk))
    np.testing.assert_array_equal(cpu.d_cnt, _h(gpu.d_cnt))
    for name in ("inv", "rcum", "ydoc", "zsum"):
        np.testing.assert_array_equal(cpu.htables[name], _h(gpu.htables[name]), err_msg=name)
    for name in cpu.tables:
        np.testing.assert_array_equal(cpu.tables[name], _h(gpu.tables[name]), err_msg=name)


@pytest.mark.parametrize("corpus,K,iters", [("kos", 1000, 4), ("nips", 4096, 2)])
def test_hybrid_draw_for_draw(shared_data, corpus, K, iters):
    """sampler="hybrid" on KOS (K = 1000) and all of NIPS (K = 4096: D rows of > 1,024 nonzeros): every GPU
    draw and branch flag equals the CPU twin's, the rebuilt dense and sparse rows and the per-pass tables
    are equal, invariants hold, Eq. 5 agrees to 1e-12.  The sparse rows are rebuilt through the
    shared-memory histogram at both K (K + 256 int32 bins fit 48 KiB up to K = 12,032)."""
    bow = read_uci(shared_data / "bow" / "uci" / f"docword.{corpus}.txt.gz")
    ch = build_chunks(bow, K, n_chunks=2)
    cpu = GibbsState(ch, K, 0.1, 0.01, seed=6, w_layout="hybrid")
    gpu = GibbsState(ch, K, 0.1, 0.01, seed=6, gpu=True, w_layout="hybrid")
    assert 0 < ch.n_dense < ch.V
    _hybrid_equal(cpu, gpu)
    for it in range(1, iters + 1):
        cpu.sample_pass(it, "hybrid")
        gpu.sample_pass(it, "hybrid")
        np.testing.assert_array_equal(cpu._pending, _h(gpu._pending), err_msg=f"iteration {it}")
        np.testing.assert_array_equal(cpu._flags, _h(gpu._flags), err_msg=f"iteration {it}")
        cpu.commit()
        gpu.commit()
        _hybrid_equal(cpu, gpu)
        gpu.check_invariants()
    fl = np.bincount(cpu._flags[ch.word >= ch.n_dense], minlength=9)
    assert (fl[3:7] > 0).all(), fl
    assert gpu.llpt() == pytest.approx(cpu.llpt(), rel=1e-12)


def test_hybrid_memory_on_device(shared_data):
    """NIPS at K = 4096 and K = 32768: the hybrid state's W bytes (measured on the device arrays) are a
    small fraction of the dense V x K int32 matrix; the device memory the state holds is below the dense
    W alone plus its two float32 tables.  K = 32768 runs two passes (invariants after each)."""
    nips = read_uci(shared_data / "bow" / "uci" / "docword.nips.txt.gz")
    pool = cupy.get_default_memory_pool()
    for K in (4096, 32768):
        ch = build_chunks(nips, K)
        pool.free_all_blocks()
        before = pool.used_bytes()
        st = GibbsState(ch, K, 50.0 / K, 0.01, seed=1, gpu=True, w_layout="hybrid")
        for it in (1, 2) if K == 32768 else ():
            st.step(it, "hybrid")
            st.check_invariants()
        st.sync()
        if K == 32768:  # K + 256 bins exceed 48 KiB: the sparse rows were rebuilt by the sort path
            ref = KH.rebuild_hybrid(ch.word, _h(st.z), _h(st.hw.w_ptr), _h(st.hw.word_tok), ch.n_dense, K)
            for a, b in zip(ref.table(), st.hw.table()):
                np.testing.assert_array_equal(a, b)
        held = pool.used_bytes() - before
        nb = st.nbytes()
        dense_w = ch.V * K * 4
        print(f"NIPS K={K}: n_dense={ch.n_dense} hybrid W={nb['W']:,} B tables={nb['tables']:,} B "
              f"total={nb['total']:,} B device={held:,} B; dense W={dense_w:,} B (+ 2 x {dense_w:,} B tables)")
        assert nb["W"] < 0.25 * dense_w
        assert held < 3 * dense_w
        del st


def test_hybrid_pipeline_gpu_equals_cpu(shared_data, tmp_path):
    src = shared_data / "bow" / "lda_reuters" / "reuters.ldac"

    def check(it, state):
        state.check_invariants()

    pipelines.run("lda", str(src), out=tmp_path / "cpu", K=64, iterations=6, sampler="hybrid", backend="cpu",
                  progress=False)
    pipelines.run("lda", str(src), out=tmp_path / "gpu", K=64, iterations=6, sampler="hybrid", backend="gpu",
                  progress=False, callback=check)
    for f in ("topic_word.parquet", "doc_topic.parquet", "vocab.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "cpu" / f), pd.read_parquet(tmp_path / "gpu" / f))
    np.testing.assert_allclose(LDAModel.load(tmp_path / "gpu").llpt["llpt"],
                               LDAModel.load(tmp_path / "cpu").llpt["llpt"], rtol=1e-12)
