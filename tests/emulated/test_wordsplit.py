"""The CUDA C of ``kernels/wordsplit.cu``, run on the CPU (g++), equals the numba twins of kernels/wordsplit.py.

``tests/cuda_emu/wordsplit_emu.cpp`` defines the CUDA names the kernels use and runs every thread of a launch
in turn; ``tests/cuda_emu/fake_cupy.py`` stands in for cupy, so :func:`cutext.kernels.wordsplit.word_bounds`,
:func:`~cutext.kernels.wordsplit.lookup_words` and :meth:`cutext.pipelines.ngram.NGramModel.encode_device`
take their GPU path (the loader of :mod:`cutext.kernels._cuda`, the launch shapes, the kernels) on real
models and text, including bytes that are not UTF-8.  tests/gpu/test_ngram_text.py then checks the real
kernels on a device.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from cutext.kernels import wordsplit as ws
from cutext.pipelines.ngram import NGramModel

from helpers import build_cuda_emulation, install_fake_cupy


@pytest.fixture(scope="module")
def emu_lib(tmp_path_factory):
    return build_cuda_emulation(tmp_path_factory.mktemp("emu"), Path(ws.__file__).with_name("wordsplit.cu"),
                                "wordsplit_emu.cpp")


@pytest.fixture
def fake_cupy(emu_lib, monkeypatch):
    """``import cupy`` gives the CPU stand-in whose kernels are the emulated CUDA C of wordsplit.cu."""
    def extend(mod, fake):  # what word_bounds needs beyond fake_cupy's arrays: device-array results
        mod.flatnonzero = lambda a: np.flatnonzero(np.asarray(a)).view(fake.ndarray)
        mod.searchsorted = lambda a, v, side="left": np.searchsorted(np.asarray(a), np.asarray(v),
                                                                     side).view(fake.ndarray)
        mod.concatenate = lambda arrs: np.concatenate([np.asarray(a) for a in arrs]).view(fake.ndarray)

    return install_fake_cupy(emu_lib, monkeypatch, extend)


def _texts(arpa, shared_data):
    held = (arpa / "lmplz" / "heldout.inaugural2001-2009.tok.txt").read_bytes().splitlines()[:200]
    lee = (shared_data / "corpora" / "gensim" / "lee_background.cor").read_bytes().splitlines()[:40]
    return held + lee + [b"", b" \t\r\n\x0b\x0c ", b"\xff\xfe bad \xc3 bytes \xe9t\xe9", b"<unk> <UNK> zzz",
                         b"a\nb  c\n"]


def _buffers(texts):
    offsets = np.zeros(len(texts) + 1, np.int64)
    np.cumsum([len(t) for t in texts], out=offsets[1:])
    return np.frombuffer(b"".join(texts), np.uint8).copy(), offsets


def test_word_bounds_and_lookup_equal_twins(fake_cupy, arpa, shared_data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = NGramModel.load(arpa / "lmplz" / "abc.o3.arpa.gz", backend="cpu")
    chars, offsets = _buffers(_texts(arpa, shared_data))
    # a slice of the buffer: rows start at offsets[0] > 0
    for lo in (0, 3):
        off = offsets[lo:]
        want_s, want_e = ws.word_bounds(chars, off)
        del fake_cupy.launches[:]
        got_s, got_e = ws.word_bounds(fake_cupy.asarray(chars), fake_cupy.asarray(off))
        assert [n for n, _ in fake_cupy.launches] == ["ws_word_flags"]
        np.testing.assert_array_equal(got_s.get(), want_s)
        np.testing.assert_array_equal(got_e.get(), want_e)
        host_vh = m.vocab_hash()
        dev_vh = ws.VocabHash(*(fake_cupy.asarray(a) for a in (host_vh.chars, host_vh.offsets, host_vh.table)),
                              host_vh.mask)
        want = ws.lookup_words(chars, want_s, want_e, host_vh, m.unk_id)
        got = ws.lookup_words(fake_cupy.asarray(chars), got_s, got_e, dev_vh, m.unk_id)
        assert type(got).__module__ == "cupy"
        np.testing.assert_array_equal(got.get(), want)
        assert (want == m.unk_id).any() and (want != m.unk_id).sum() > 1000
    with pytest.raises(TypeError, match="vocabulary is on the host"):
        ws.lookup_words(fake_cupy.asarray(chars), got_s, got_e, m.vocab_hash(), m.unk_id)


def test_empty_inputs_launch_nothing(fake_cupy):
    s, e = ws.word_bounds(fake_cupy.asarray(np.zeros(0, np.uint8)), fake_cupy.asarray(np.zeros(3, np.int64)))
    assert len(s) == len(e) == 0 and fake_cupy.launches == []
    s, e = ws.word_bounds(fake_cupy.asarray(np.frombuffer(b"   ", np.uint8)), fake_cupy.asarray(np.array([0, 3])))
    assert len(s) == 0


@pytest.mark.parametrize("sentence", ["line", "document"])
def test_encode_text_on_fake_device_equals_host(fake_cupy, arpa, shared_data, sentence):
    """stages/ngram_text.encode_text and NGramModel.encode_device with device arrays == the host run."""
    from cutext.stages.text.ngram_text import encode_text

    m = NGramModel.load(arpa / "kenlm" / "test.arpa", backend="cpu")
    texts = _texts(arpa, shared_data)
    chars, offsets = _buffers([b"\n".join(texts[i:i + 3]) for i in range(0, len(texts), 3)])
    want = encode_text(chars, offsets, m.vocab_hash(), m.unk_id, sentence)
    got = encode_text(fake_cupy.asarray(chars), fake_cupy.asarray(offsets), m.vocab_hash(device=True), m.unk_id,
                      sentence)
    for name, w, g in zip(("ids", "word_offsets", "sent_doc"), want, got):
        assert type(g).__module__ == "cupy", name
        np.testing.assert_array_equal(np.asarray(g), w, err_msg=name)
    ids, off = m.encode_device(texts)
    want_ids, want_off = m.encode(texts)
    np.testing.assert_array_equal(np.asarray(ids), want_ids)
    np.testing.assert_array_equal(np.asarray(off), want_off)


def test_segment_sum_equals_twin_and_bincount(fake_cupy):
    rng = np.random.default_rng(2)
    x = rng.normal(size=5000) * 10.0 ** rng.integers(-8, 8, 5000)
    seg = np.unique(np.concatenate([[0, 5000], rng.integers(0, 5000, 700), [17, 17, 17]]))
    seg = np.sort(np.concatenate([seg, [17, 17]]))  # empty segments
    want = ws.segment_sum(x, seg)
    got = ws.segment_sum(fake_cupy.asarray(x), fake_cupy.asarray(seg))
    np.testing.assert_array_equal(got.get(), want)
    which = np.repeat(np.arange(len(seg) - 1), np.diff(seg))
    np.testing.assert_array_equal(want, np.bincount(which, weights=x, minlength=len(seg) - 1))
