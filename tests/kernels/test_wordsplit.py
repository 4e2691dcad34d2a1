"""The n-gram LM's device text path on the CPU: the numba twins of kernels/wordsplit.py against pyarrow.

The twins (word bounds, byte-exact hash lookup) and the sentence structure of stages/text/ngram_text.py are the
oracle of the GPU path; here they are checked against the CPU path of NGramModel (pyarrow's
``ascii_split_whitespace`` + ``index_in``, itself tested against KenLM in pipelines/test_ngram.py) on the shared ARPA
models and real text, ``str`` and ``bytes``, sliced columns and nulls.
"""
from __future__ import annotations

import pickle
import warnings

import numpy as np
import pyarrow as pa
import pytest

from cutext.kernels.wordsplit import VocabHash, lookup_words, word_bounds
from cutext.pipelines import ngram as ng
from cutext.pipelines.ngram import NGramModel
from cutext.stages.engines import ngram_model as ngm
from cutext.stages.text.ngram_text import encode_text, sentences, text_buffers

MODELS = ["lmplz/abc.o3.arpa.gz", "kenlm/test.arpa", "kenlm/test_nounk.arpa", "pocketsphinx/100.lm.gz"]
EDGE = ["", " ", "\t\r\n", "a\tb\x0bc\x0cd\re  f", "<unk> <UNK> <s> </s> zzz", "caf\u00e9 na\u00efve \u00e9t\u00e9",
        "x\ny  \n\n z\n", "\n\nlast", "  lead and trail  "]


def _load(arpa, rel):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return NGramModel.load(arpa / rel, backend="cpu")


@pytest.fixture(scope="module")
def heldout(arpa):
    return (arpa / "lmplz" / "heldout.inaugural2001-2009.tok.txt").read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def lee(shared_data):
    """The Lee background corpus (300 news documents, one a line; real, untokenized text)."""
    return (shared_data / "corpora" / "gensim" / "lee_background.cor").read_text(encoding="utf-8").splitlines()


def _vocab_sample(model, n, seed):
    """Sentences of model words (so that many match) mixed with unknown words, random lengths."""
    words = model.vocab.to_pylist() + ["zzz", "Qq", "the."]
    rng = np.random.default_rng(seed)
    seps = [" ", "  ", "\t", " \r "]
    return [seps[i % 4].join(rng.choice(words, int(rng.integers(0, 15)))) for i in range(n)]


@pytest.mark.parametrize("rel", MODELS)
def test_twin_encode_equals_pyarrow(arpa, rel, heldout, lee):
    """encode_device(device=False) (numba twins) == encode (pyarrow split + index_in), str and bytes input."""
    m = _load(arpa, rel)
    sents = heldout + lee[:100] + EDGE + _vocab_sample(m, 300, 1)
    ids, off = m.encode(sents)
    got_ids, got_off = m.encode_device(sents, device=False)
    np.testing.assert_array_equal(got_off, off)
    np.testing.assert_array_equal(got_ids, ids)
    assert (ids == m.unk_id).any() and (ids != m.unk_id).any()
    raw = [s.encode("utf-8") for s in sents] + [b"\xff\xfe bad \xc3 bytes", b"\xe9t\xe9"]  # invalid UTF-8 too
    ids, off = m.encode(raw)
    got_ids, got_off = m.encode_device(raw, device=False)
    np.testing.assert_array_equal(got_off, off)
    np.testing.assert_array_equal(got_ids, ids)


def test_unk_spellings_and_exact_bytes(arpa):
    """<unk> and <UNK> are the unknown word (KenLM); a word differing in one byte (case, accent) is unknown."""
    m = _load(arpa, "pocketsphinx/100.lm.gz")  # its unknown word is spelled <UNK>
    words = m.vocab.to_pylist()
    w = next(x for x in words if x.isalpha() and x.lower() != x.upper())
    probe = [f"<unk> <UNK> {w} {w.swapcase()} {w}\u0301"]
    ids, _ = m.encode_device(probe, device=False)
    assert ids.tolist() == [m.unk_id, m.unk_id, words.index(w), m.unk_id, m.unk_id]
    np.testing.assert_array_equal(ids, m.encode(probe)[0])


def test_latin1_model_matches_bytes(tmp_path):
    """Words are bytes: a latin-1 model matches latin-1 bytes, and its UTF-8 spelling is unknown."""
    arpa = tmp_path / "l1.arpa"
    body = ("\\data\\\nngram 1=5\nngram 2=1\n\n\\1-grams:\n-1.0\t<unk>\n-1.0\t<s>\t-0.5\n-1.0\t</s>\n"
            "-0.5\tcaf\xe9\t-0.3\n-0.7\tthe\t-0.2\n\n\\2-grams:\n-0.1\tthe caf\xe9\n\n\\end\\\n")
    arpa.write_bytes(body.encode("latin-1"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = NGramModel.load(arpa, backend="cpu", encoding="latin-1")
    ids, _ = m.encode_device([b"the caf\xe9 caf\xc3\xa9"], device=False)
    assert ids.tolist() == [4, 3, m.unk_id]
    np.testing.assert_array_equal(ids, m.encode([b"the caf\xe9 caf\xc3\xa9"])[0])


def _host_lines(texts: pa.Array, sentence):
    """The CPU pipeline's sentences (ngram._sentences_of) encoded with pyarrow: ids, offsets, document."""
    return ngm._sentences_of(texts, sentence)


@pytest.mark.parametrize("sentence", ["line", "document"])
def test_sentences_equal_host_split(arpa, heldout, lee, sentence):
    """Documents of several lines (blank lines, \\r\\n, trailing newlines, empty documents, nulls, a sliced
    column): the device structure == _sentences_of + encode of the CPU pipeline."""
    m = _load(arpa, "lmplz/abc.o3.arpa.gz")
    rng = np.random.default_rng(5)
    lines = heldout + lee[:50] + EDGE
    docs, i = [], 0
    while i < len(lines):
        k = int(rng.integers(0, 6))
        sep = ["\n", "\n\n", "\r\n", " \n "][int(rng.integers(0, 4))]
        docs.append(sep.join(lines[i:i + k]) + ("\n" if k % 2 else ""))
        i += max(k, 1)
    docs += ["", "\n", "\n\n \n", None]
    full = pa.array([None, "dropped by slicing"] + docs, pa.large_string())
    texts = full.slice(2)
    chars, offsets = text_buffers(texts, device=False)
    ids, woff, sdoc = encode_text(chars, offsets, m.vocab_hash(), m.unk_id, sentence)
    sents, doc_of = _host_lines(texts.fill_null(""), sentence)
    want_ids, want_off = m.encode(sents)
    np.testing.assert_array_equal(sdoc, doc_of)
    np.testing.assert_array_equal(woff, want_off)
    np.testing.assert_array_equal(ids, want_ids)
    starts, _ = word_bounds(chars, offsets)
    assert len(starts) == len(ids)
    # the per-document scores of the kernel path (twins) equal the CPU pipeline's, bit for bit
    for bos, eos in [(True, True), (False, False)]:
        want = m.score_documents(texts, sentence, bos, eos, kernels=False)
        got = m.score_documents(texts, sentence, bos, eos, kernels=True)
        for c in ("sentences", "tokens", "oov", "log10_prob", "perplexity"):
            assert got[c].dtype == want[c].dtype, c
            np.testing.assert_array_equal(got[c], want[c], err_msg=f"{c} bos={bos} eos={eos}")
        assert (want["oov"] > 0).any() and (want["sentences"] == 0).any() == (sentence == "line")


def test_word_bounds_rows_and_offsets():
    """Words never cross rows; offsets[0] > 0 (a slice of a larger buffer) is honoured."""
    data = np.frombuffer(b"xx ab\tcd  e\x0bf g|h i", np.uint8)
    offsets = np.array([3, 8, 8, 11, 17], np.int64)  # rows 'ab\tcd', '', '  e', '\x0bf g|h'
    starts, ends = word_bounds(data, offsets)
    words = [bytes(data[a:b]) for a, b in zip(starts, ends)]
    assert words == [b"ab", b"cd", b"e", b"f", b"g|h"]
    row_words = np.searchsorted(starts, offsets)
    assert row_words.tolist() == [0, 2, 2, 3, 5]
    s_off, s_doc = sentences(data, offsets, starts, "document")
    assert s_off.tolist() == [0, 2, 2, 3, 5] and s_doc.tolist() == [0, 1, 2, 3]


def test_vocab_hash_refuses_duplicates_and_finds_every_word(arpa):
    with pytest.raises(ValueError, match="appears twice"):
        VocabHash.build(b"abcab", [0, 2, 3, 5])
    m = _load(arpa, "lmplz/abc.o3.arpa.gz")
    vh = m.vocab_hash()
    assert vh.mask + 1 >= 2 * m.vocab_size and (vh.mask + 1) & vh.mask == 0
    starts, ends = vh.offsets[:-1], vh.offsets[1:]
    ids = lookup_words(vh.chars, starts, ends, vh, -7)
    np.testing.assert_array_equal(ids, np.arange(m.vocab_size))


def test_model_pickles_as_a_reference(arpa, tmp_path):
    """A model pickles as its ARPA path (bytes, not the trie); in one process it unpickles to itself,
    cached_model loads a file once, and a changed file is refused."""
    copy = tmp_path / "t.arpa"
    copy.write_bytes((arpa / "kenlm" / "test.arpa").read_bytes())
    m = NGramModel.load(copy, backend="cpu")
    blob = pickle.dumps(m)
    assert len(blob) < 1000
    assert pickle.loads(blob) is m
    assert ngm.cached_model(str(copy), backend="cpu") is m
    c = ngm.cached_model(copy, backend="cpu")
    blob = pickle.dumps(c)
    ngm._MODELS.clear()
    copy.write_bytes(copy.read_bytes() + b"\n")
    with pytest.raises(FileNotFoundError, match="changed"):
        pickle.loads(blob)


@pytest.mark.parametrize("compress", [False, True])
def test_read_lines_buffers_equal_reader(arpa, heldout, lee, tmp_path, compress):
    """The GPU pipeline's lines reader (bytes as they are, rows ending after their \\n) gives the per-document
    scores of the general reader's lines, piece by piece (byte ranges, BOM, \\r\\n, blank lines, no final
    newline); invalid UTF-8 falls back to the reader (None)."""
    import gzip

    from cutext.stages.readers.files import plan, read_piece
    from cutext.stages.text.ngram_text import read_lines_buffers

    m = _load(arpa, "lmplz/abc.o3.arpa.gz")
    body = ("\ufeff" + "\r\n".join(heldout[:300]) + "\n\n  \n" + "\n".join(lee[:40]) + "\nlast line").encode()
    path = tmp_path / ("t.txt.gz" if compress else "t.txt")
    path.write_bytes(gzip.compress(body) if compress else body)
    fs, pieces, _ = plan(str(path), format="lines", blocksize=8192)
    assert len(pieces) == (1 if compress else len(pieces)) and (compress or len(pieces) > 3)
    for piece in pieces:
        buf = read_lines_buffers(piece, fs, device=False)
        df = read_piece(piece, fs)
        assert len(buf) == len(df)
        want = m.score_documents(pa.array(df["text"], pa.large_string(), from_pandas=True), "line")
        for kernels in (True, False):
            got = m.score_documents(buf, "line", kernels=kernels)
            for c in ("sentences", "tokens", "oov", "log10_prob", "perplexity"):
                np.testing.assert_array_equal(got[c], want[c], err_msg=f"{c} kernels={kernels}")
        # row ranges of the buffers (a piece split over workers) score as the whole piece
        whole = ng._score_slice(m, buf, 0, len(buf), "line", True, True)[0]
        k = len(buf) // 3
        parts = [ng._score_slice(m, buf, a, b, "line", True, True)[0] for a, b in ((0, k), (k, len(buf)))]
        import pandas as pd

        pd.testing.assert_frame_equal(pa.concat_tables(parts).to_pandas(), whole.to_pandas(), check_exact=True)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok line\nbad \xff byte\n")
    fs, pieces, _ = plan(str(bad), format="lines")
    assert read_lines_buffers(pieces[0], fs, device=False) is None
