"""LDA kernels on the GPU equal their numba CPU twins draw for draw (run on the lent GPU machine).

Real data: Reuters in LDA-C (84,010 tokens) and KOS (UCI, 467,714 tokens) from ../shared/data/bow.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from cutext import pipelines
from cutext.kernels import lda as K_
from cutext.pipelines.lda import GibbsState, LDAModel
from cutext.stages.lda_chunk import build_chunks, read_ldac, read_uci

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
    """All of NIPS at K = 4096: D rows of more than 1,024 nonzeros (several steps of the warp search and
    several rounds of the S walk); every GPU draw equals the CPU twin's."""
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
    """Paper 000 V-B: chunks on 2 GPUs, W summed after every iteration = the CPU chain draw for draw."""
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
