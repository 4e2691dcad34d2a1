"""ngram on the GPU == its CPU twin (and KenLM's published scores) on the shared ARPA models.

Runs on the lent GPU machine (skipped without a device); needs only cupy, numpy, numba, pandas, pyarrow
(the kenlm module is not used here: the CPU twin is the oracle, itself tested against KenLM).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from cutext import pipelines
from cutext.kernels import trie as trie_kernels
from cutext.pipelines.ngram import NGramModel

pytestmark = pytest.mark.gpu

TOL = 1e-4


@pytest.fixture(scope="module")
def abc_pair(arpa):
    path = arpa / "lmplz" / "abc.o3.arpa.gz"
    return NGramModel.load(path, backend="cpu"), NGramModel.load(path, backend="gpu")


def _random_sentences(model, n, seed):
    words = [w for w in model.vocab.to_pylist() if w not in ("<s>", "</s>")] + ["zzz", "qq"]
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(words, int(rng.integers(0, 40)))) for _ in range(n)]


def _assert_same_scores(a, b):
    np.testing.assert_array_equal(a.token_log10_prob, b.token_log10_prob)
    np.testing.assert_array_equal(a.ngram_length, b.ngram_length)
    np.testing.assert_array_equal(a.oov, b.oov)
    np.testing.assert_array_equal(a.offsets, b.offsets)
    np.testing.assert_allclose(a.log10_prob, b.log10_prob, rtol=0, atol=1e-9)


def test_gpu_trie_is_on_device(abc_pair):
    cpu, gpu = abc_pair
    assert gpu.backend == "gpu" and gpu.trie.on_gpu and not cpu.trie.on_gpu
    assert gpu.bytes_per_ngram() == cpu.bytes_per_ngram()


@pytest.mark.parametrize("bos, eos", [(True, True), (False, False), (True, False)])
def test_gpu_scores_equal_cpu_on_abc(abc_pair, heldout, bos, eos):
    cpu, gpu = abc_pair
    sents = heldout + _random_sentences(cpu, 2000, seed=1) + [""]
    _assert_same_scores(gpu.score(sents, bos, eos), cpu.score(sents, bos, eos))


def test_gpu_expected_kenlm_scores(abc_pair, arpa, heldout):
    _, gpu = abc_pair
    d = arpa / "lmplz"
    sent = pd.read_csv(d / "expected_sentence_scores.kenlm-py.abc.o3.tsv", sep="\t", comment="#", header=None,
                       names=["score", "sentence"], quoting=3)
    sc = gpu.score(sent["sentence"].tolist())
    np.testing.assert_allclose(sc.log10_prob, sent["score"], atol=TOL)
    assert gpu.perplexity(heldout) == pytest.approx(520.1736, abs=1e-3)  # data README
    tok = pd.read_csv(d / "expected_token_scores.kenlm-py.abc.o3.tsv", sep="\t", comment="#", header=None,
                      names=["sent", "tok", "word", "p", "n", "oov"], quoting=3, keep_default_na=False)
    sc = gpu.score(heldout)
    rows = sc.offsets[tok["sent"].to_numpy()] + tok["tok"].to_numpy()
    np.testing.assert_allclose(sc.token_log10_prob[rows], tok["p"], atol=TOL)
    np.testing.assert_array_equal(sc.ngram_length[rows], tok["n"])


@pytest.mark.filterwarnings("ignore:.*has no <unk>")
@pytest.mark.parametrize("rel", ["kenlm/test.arpa", "kenlm/test_nounk.arpa", "kenlm/toy0.arpa", "kenlm/toy1.arpa",
                                 "pocketsphinx/100.lm.gz", "pocketsphinx/turtle.lm", "pocketsphinx/turtle.ug.lm"])
def test_gpu_scores_equal_cpu_on_small_models(arpa, rel):
    cpu = NGramModel.load(arpa / rel, backend="cpu")
    gpu = NGramModel.load(arpa / rel, backend="gpu")
    sents = _random_sentences(cpu, 500, seed=7)
    for bos, eos in [(True, True), (False, False)]:
        _assert_same_scores(gpu.score(sents, bos, eos), cpu.score(sents, bos, eos))


def test_gpu_kenlm_readme_reference_numbers(arpa):
    m = NGramModel.load(arpa / "kenlm" / "test.arpa", backend="gpu")
    sc = m.score(["looking on a little more loin", "language modeling is fun ."])
    assert sc.log10_prob[0] == pytest.approx(-1.567985, abs=TOL)
    want = [-0.484652, -0.348837, -0.015527, -0.003061, -0.001814, -0.043256, -0.670838]
    np.testing.assert_allclose([p for p, _, _ in sc.full_scores(0)], want, atol=TOL)
    assert sc.log10_prob[1] == pytest.approx(-64.594437, abs=TOL)


def test_gpu_btree_finds_every_child_of_the_largest_runs(abc_pair):
    """The warp K-ary search over multi-level implicit B-trees (runs longer than 31 * 32 keys) finds
    every child of the largest contexts, on both sides."""
    cpu, gpu = abc_pair
    t = cpu.host_trie
    V = cpu.vocab_size
    sizes = np.diff(t.child[:V + 1])
    assert sizes.max() > 31 * 32  # at least one three-level tree
    rows, want = [], []
    for c in np.argsort(-sizes)[:4]:
        for e in range(t.child[c], t.child[c + 1]):
            rows.append([c, t.keys[e]])
            want.append(e)
    h = int(np.argmax(np.diff(t.child[V:int(t.start[2]) + 1]))) + V  # largest bigram context
    parent = int(np.searchsorted(t.child[:V + 1], h, side="right") - 1)
    for e in range(t.child[h], t.child[h + 1]):
        rows.append([parent, t.keys[h], t.keys[e]])
        want.append(e)
    rows.append([int(np.argmax(sizes)), 10 ** 8 % V])  # very probably absent
    ids = np.concatenate([np.asarray(r, np.int32) for r in rows])
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    import cupy

    on_cpu = trie_kernels.suffix_entries(t, ids, offsets, 3)
    on_gpu = trie_kernels.suffix_entries(gpu.trie, cupy.asarray(ids), cupy.asarray(offsets), 3).get()
    np.testing.assert_array_equal(on_gpu, on_cpu)
    got = on_cpu[np.arange(len(rows)), np.array([len(r) for r in rows]) - 1]
    np.testing.assert_array_equal(got[:-1], want)


@pytest.mark.parametrize("order", [1, 2, 3])
def test_gpu_distributions_equal_cpu(abc_pair, heldout, order):
    cpu, gpu = abc_pair
    rng = np.random.default_rng(order)
    ctx = [" ".join(s.split()[: int(rng.integers(0, 12))]) for s in heldout[:300]]
    dc = cpu.next_word_distribution(ctx, order=order, bos=True)
    dg = gpu.next_word_distribution(ctx, order=order, bos=True)
    np.testing.assert_array_equal(dg.get(), dc)
    np.testing.assert_allclose((10.0 ** dc.astype(np.float64)).sum(axis=1), 1.0, atol=TOL)
    sc = cpu.next_word_prob(ctx, order=order, bos=True, sparse=True)
    sg = gpu.next_word_prob(ctx, order=order, bos=True, sparse=True)
    np.testing.assert_array_equal(sg.indptr.get(), sc.indptr)
    np.testing.assert_array_equal(sg.indices.get(), sc.indices)
    np.testing.assert_array_equal(sg.data.get(), sc.data)
    lc = cpu.next_word_distribution(ctx, order=order, bos=True, sparse=True, log10=True)
    lg = gpu.next_word_distribution(ctx, order=order, bos=True, sparse=True, log10=True)
    np.testing.assert_array_equal(lg.data.get(), lc.data)


def test_gpu_distribution_entries_equal_scores(abc_pair, heldout):
    """An entry of the GPU distribution is the GPU score of context + word (same float32 sums)."""
    _, gpu = abc_pair
    ctx = [" ".join(s.split()[:5]) for s in heldout[:20]]
    d = gpu.next_word_distribution(ctx, bos=True).get()
    rng = np.random.default_rng(0)
    vocab = gpu.vocab.to_pylist()
    for r, c in enumerate(ctx):
        ws = [w for w in rng.integers(0, gpu.vocab_size, 50) if vocab[w] != "<s>"]
        sc = gpu.score([f"{c} {vocab[w]}" for w in ws], bos=True, eos=False)
        last = sc.token_log10_prob[sc.offsets[1:] - 1]
        np.testing.assert_array_equal(d[r, ws], last)


def test_gpu_top_k_equals_cpu(abc_pair, heldout):
    cpu, gpu = abc_pair
    ctx = [" ".join(s.split()[:3]) for s in heldout[:100]]
    a, b = cpu.top_k_next(ctx, k=10, bos=True), gpu.top_k_next(ctx, k=10, bos=True)
    np.testing.assert_array_equal(a.log10_prob, b.log10_prob)
    np.testing.assert_array_equal(a.ids[:, 0], b.ids[:, 0])


def test_gpu_pipeline_equals_cpu(abc_pair, arpa, tmp_path):
    cpu, gpu = abc_pair
    src = arpa / "lmplz" / "heldout.inaugural2001-2009.tok.txt"
    rc = pipelines.run("ngram", src, out=tmp_path / "c", model=cpu, format="lines", progress=False)
    rg = pipelines.run("ngram", src, out=tmp_path / "g", model=gpu, format="lines", progress=False)
    assert rg.backend == "gpu" and rc.backend == "cpu"
    tc = pq.read_table(rc.path / "scores.parquet").to_pandas()
    tg = pq.read_table(rg.path / "scores.parquet").to_pandas()
    pd.testing.assert_frame_equal(tc, tg, check_exact=False, rtol=0, atol=1e-9)
    rg2 = pipelines.run("ngram", src, out=tmp_path / "g2", model=src.parent / "abc.o3.arpa.gz", backend="gpu",
                        format="lines", progress=False)
    assert rg2.backend == "gpu" and rg2.params["perplexity"] == pytest.approx(520.1736, abs=1e-3)
