"""The CUDA C of ``kernels/trie.cu``, run on the CPU (g++, one thread per CUDA thread), equals the trie's numba twins.

No GPU is needed: ``tests/cuda_emu/trie_emu.cpp`` defines the CUDA names the trie kernels use (``threadIdx``,
``blockIdx``, ``__syncthreads`` as a block barrier, ``__shared__`` as block-wide storage, ``__ballot_sync``
as a vote at a per-warp barrier, ``__ffs`` / ``__popc``, ``__fadd_rn`` / ``__dadd_rn`` as plain IEEE adds),
includes the kernel source, and runs every block's threads as ``std::thread`` s; it is built with
``-ffp-contract=off`` (the CPU analogue of ``--fmad=false``).  ``tests/cuda_emu/fake_cupy.py`` stands in for
cupy, so :func:`cutext.kernels.trie.score_tokens`, :func:`~cutext.kernels.trie.suffix_entries` and
:func:`~cutext.kernels.trie.fill_distribution` take their GPU path (the loader of
:mod:`cutext.kernels._cuda`, the launch shapes, the warp B-tree search ``warp_find``) and are compared with
the same calls on host arrays (the numba twins, which bisect the sorted runs: an independent search).  The
GPU tests (tests/gpu/test_ngram.py) then check the real kernels.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cutext.kernels import _cuda
from cutext.kernels import trie as trie_kernels
from cutext.pipelines.ngram import NGramModel

from helpers import build_cuda_emulation, install_fake_cupy

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves this module out


@pytest.fixture(scope="module")
def emu_lib(tmp_path_factory):
    return build_cuda_emulation(tmp_path_factory.mktemp("emu"), Path(trie_kernels.__file__).with_name("trie.cu"),
                                "trie_emu.cpp")


@pytest.fixture
def fake_cupy(emu_lib, monkeypatch):
    """``import cupy`` gives the CPU stand-in whose kernels are the emulated CUDA C of trie.cu."""
    return install_fake_cupy(emu_lib, monkeypatch)


def _sentences(model: NGramModel, n: int, seed: int) -> list[str]:
    """Random word sequences of 0 to 11 words over the model's vocabulary plus two unknown words."""
    words = [w for w in model.vocab.to_pylist() if w not in ("<s>", "</s>")] + ["zzz", "qq"]
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(words, int(rng.integers(0, 12)))) for _ in range(n)]


def _walks(model: NGramModel, n: int, seed: int):
    """``n`` id sequences that follow the trie down from a random word (each next word a random child of the
    entry so far, a random word where the entry has no child), so that contexts of every order occur."""
    t = model.host_trie
    rng = np.random.default_rng(seed)
    seqs = []
    for i in range(n):
        e = int(rng.integers(0, t.vocab_size))
        seq = [e]
        steps = int(rng.integers(0, model.order)) if i % 4 else int(rng.integers(model.order, model.order + 3))
        for _ in range(steps):
            lo, hi = (int(t.child[e]), int(t.child[e + 1])) if e < len(t.child) - 1 else (0, 0)
            if hi > lo:
                e = int(rng.integers(lo, hi))
                seq.append(int(t.keys[e]))
            else:
                e = int(rng.integers(0, t.vocab_size))
                seq.append(e)
        seqs.append(seq)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum([len(q) for q in seqs], out=offsets[1:])
    return np.concatenate(seqs).astype(np.int32), offsets


@pytest.fixture(scope="module")
def kenlm_test(arpa):
    """KenLM's test model (order 5, 37 words): every run of children fits one B-tree node."""
    m = NGramModel.load(arpa / "kenlm" / "test.arpa", backend="cpu")
    return m, _sentences(m, 40, 1)


@pytest.fixture(scope="module")
def abc(arpa):
    """The lmplz model of the shared data (order 3, 28,592 words) with held-out text: runs of children longer
    than 31 * 32 keys, so ``warp_find`` descends through three B-tree levels."""
    m = NGramModel.load(arpa / "lmplz" / "abc.o3.arpa.gz", backend="cpu")
    text = (arpa / "lmplz" / "heldout.inaugural2001-2009.tok.txt").read_text(encoding="utf-8").splitlines()
    return m, text[:24] + _sentences(m, 8, 2)


def _check_model(fake, model: NGramModel, sentences, seed):
    host = model.host_trie
    dev = host.to_device()  # fake device arrays
    assert dev.on_gpu and not host.on_gpu
    ids, offsets = model.encode(sentences)
    w_ids, w_off = _walks(model, 64, seed)
    ids = np.concatenate([ids, w_ids])
    offsets = np.concatenate([offsets, offsets[-1] + w_off[1:]])
    d_ids, d_off = fake.asarray(ids), fake.asarray(offsets)
    for bos, eos in [(True, True), (False, True), (True, False), (False, False)]:
        want = trie_kernels.score_tokens(host, ids, offsets, bos_id=model.bos_id, eos_id=model.eos_id, bos=bos,
                                         eos=eos)
        del fake.launches[:]
        got = trie_kernels.score_tokens(dev, d_ids, d_off, bos_id=model.bos_id, eos_id=model.eos_id, bos=bos,
                                        eos=eos)
        assert [name for name, _ in fake.launches] == ["score_sentences"]
        for name, w, g in zip(("tok_prob", "tok_len", "sent_total", "out_offsets"), want, got):
            assert type(g).__module__ == "cupy"
            np.testing.assert_array_equal(g.get(), w, err_msg=f"{name} bos={bos} eos={eos}")
    N = model.order
    want = trie_kernels.suffix_entries(host, ids, offsets, N)
    got = trie_kernels.suffix_entries(dev, d_ids, d_off, N)
    np.testing.assert_array_equal(got.get(), want)
    assert (want[:, 2] >= 0).any(), "no sequence ends in a trigram of the model"
    deep = [np.flatnonzero(want[:, k] >= 0) for k in range(N - 1)]
    rows = np.unique(np.concatenate([d[:2] for d in deep]))  # contexts of every order
    for n in range(1, N + 1):
        ctx = np.ascontiguousarray(want[rows, : n - 1])  # column k - 1: the entry of the last k words
        w = trie_kernels.fill_distribution(host, ctx, n)
        g = trie_kernels.fill_distribution(dev, fake.asarray(ctx), n)
        np.testing.assert_array_equal(g.get(), w, err_msg=f"fill_distribution order {n}")
    return want


def test_trie_kernels_equal_twin_small_model(fake_cupy, kenlm_test):
    model, sentences = kenlm_test
    assert any(s == "" for s in sentences)  # an empty sentence: only </s> is scored
    _check_model(fake_cupy, model, sentences, 3)


def test_trie_kernels_equal_twin_multilevel_btree(fake_cupy, abc):
    model, sentences = abc
    t = model.host_trie
    runs = np.diff(t.child.astype(np.int64))
    assert runs.max() > 31 * 32  # the warp search walks three node levels for the longest runs
    _check_model(fake_cupy, model, sentences, 4)


def test_loader_builds_one_module_per_device(fake_cupy, kenlm_test):
    """kernels/_cuda.py caches modules by (source, options, device) and function handles by device and name."""
    model, _ = kenlm_test
    dev = model.host_trie.to_device()
    ids, off = fake_cupy.asarray(np.array([1, 2], np.int32)), fake_cupy.asarray(np.array([0, 2], np.int64))
    for d in (0, 1, 0, 1):
        with fake_cupy.cuda.Device(d):
            trie_kernels.suffix_entries(dev, ids, off, 2)
    assert sorted(_cuda._modules) == [("trie.cu", _cuda.COMPILE_OPTIONS, 0), ("trie.cu", _cuda.COMPILE_OPTIONS, 1)]
    assert sorted(_cuda._functions) == [("trie.cu", _cuda.COMPILE_OPTIONS, d, "suffix_entries") for d in (0, 1)]
    assert [name for name, _ in fake_cupy.launches] == ["suffix_entries"] * 4
