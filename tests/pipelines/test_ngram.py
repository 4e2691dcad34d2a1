"""The ngram pipeline on the CPU: ARPA reader, forward trie, KenLM semantics, distributions, pipeline.

References: the numbers published in ../shared/data/README.md, the KenLM scores shipped with the data
(expected_*.tsv, computed with the kenlm Python module 0.3.0), and the kenlm module itself.
"""
from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import math

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from cutext import pipelines
from cutext.kernels import trie as trie_kernels
from cutext.pipelines import ngram as ng
from cutext.pipelines.ngram import NGramModel
from cutext.stages.engines.trie import build_trie
from cutext.stages.readers.arpa import ArpaError, read_arpa

kenlm = pytest.importorskip("kenlm")

TOL = 1e-4


@pytest.fixture(scope="session")
def abc(arpa):
    return NGramModel.load(arpa / "lmplz" / "abc.o3.arpa.gz", backend="cpu")


@pytest.fixture(scope="session")
def abc_kenlm(arpa):
    return kenlm.Model(str(arpa / "lmplz" / "abc.o3.arpa.gz"))


@pytest.fixture(scope="session")
def heldout(arpa):
    return (arpa / "lmplz" / "heldout.inaugural2001-2009.tok.txt").read_text(encoding="utf-8").splitlines()


def _test_arpa_text(arpa):
    return (arpa / "kenlm" / "test.arpa").read_text(encoding="utf-8")


# ----------------------------------------------------------------------------- reader

@pytest.mark.filterwarnings("ignore:.*has no <unk>")
@pytest.mark.parametrize("rel, counts", [
    ("kenlm/test.arpa", [37, 47, 11, 6, 4]),
    ("pocketsphinx/100.lm.gz", [400, 1082, 1307]),
    ("lmplz/abc.o3.arpa.gz", [28592, 275002, 538258]),
])
def test_reader_counts(arpa, rel, counts):
    """The counts of the data README; every section holds what \\data\\ announced."""
    m = read_arpa(arpa / rel)
    assert m.counts == counts
    assert [len(o.prob) for o in m.orders] == [counts[0] + m.unk_added] + counts[1:]
    for n, o in enumerate(m.orders, start=1):
        assert o.words.shape == (len(o.prob), n)
        assert o.prob.dtype == np.float32 and (o.prob <= 0).all()


def test_reader_cmu_files_free_text_and_spaces(arpa):
    """The CMU files put free text (with fake section headers) before \\data\\ and separate by spaces."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # <UNK> is KenLM's unknown word too: no "no <unk>" warning
        m = read_arpa(arpa / "pocketsphinx" / "100.lm.gz")
    assert m.preamble_lines > 40  # the real \data\ is after the documentation block
    assert m.vocab[0].as_py() == "<UNK>" and not m.unk_added and m.unk_id == 0  # KenLM: <unk> and <UNK> alike
    with pytest.warns(UserWarning):
        t = read_arpa(arpa / "pocketsphinx" / "turtle.lm")
    assert t.counts == [91, 212, 177]
    with pytest.warns(UserWarning):
        u = read_arpa(arpa / "pocketsphinx" / "turtle.ug.lm")  # a unigram model, trailing spaces
    assert u.order == 1 and u.counts == [91]


@pytest.mark.parametrize("opener", [gzip.open, bz2.open, lzma.open])
def test_reader_compressed(arpa, tmp_path, opener):
    raw = (arpa / "kenlm" / "test.arpa").read_bytes()
    p = tmp_path / "m.arpa.x"
    with opener(p, "wb") as fh:
        fh.write(raw)
    a, b = read_arpa(arpa / "kenlm" / "test.arpa"), read_arpa(p)
    assert a.vocab.equals(b.vocab)
    for x, y in zip(a.orders, b.orders):
        np.testing.assert_array_equal(x.words, y.words)
        np.testing.assert_array_equal(x.prob, y.prob)
        np.testing.assert_array_equal(x.backoff, y.backoff)


def test_reader_small_blocks_same_result(arpa):
    """Blocks that cut sections (and lines) anywhere give the same model."""
    a = read_arpa(arpa / "kenlm" / "test.arpa")
    b = read_arpa(arpa / "kenlm" / "test.arpa", block_bytes=37)
    assert a.vocab.equals(b.vocab)
    for x, y in zip(a.orders, b.orders):
        np.testing.assert_array_equal(x.words, y.words)
        np.testing.assert_array_equal(x.prob, y.prob)
        np.testing.assert_array_equal(x.lines, y.lines)


def _line_of(lines, startswith):
    return next(i for i, line in enumerate(lines, start=1) if line.startswith(startswith))


def _write(tmp_path, lines, name="bad.arpa"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def test_bad_missing_data(tmp_path):
    p = _write(tmp_path, ["just some text", "ngram 1=2", "\\1-grams:", "-1 a"])
    with pytest.raises(ArpaError, match=r"bad\.arpa:4: no \\data\\"):
        read_arpa(p)


def test_bad_counts_mismatch(arpa, tmp_path):
    lines = _test_arpa_text(arpa).splitlines()
    lines[lines.index("ngram 2=47")] = "ngram 2=48"
    p = _write(tmp_path, lines)
    at = _line_of(lines, "\\3-grams:")
    with pytest.raises(ArpaError, match=rf"bad\.arpa:{at}: the \\2-grams: section .* has 47 n-grams but "
                                        r"\\data\\ announced 48"):
        read_arpa(p)


def test_bad_more_lines_than_counts(arpa, tmp_path):
    lines = _test_arpa_text(arpa).splitlines()
    lines[lines.index("ngram 3=11")] = "ngram 3=10"
    p = _write(tmp_path, lines)
    at = _line_of(lines, "-7\tto look a")  # the 11th trigram
    with pytest.raises(ArpaError, match=rf"bad\.arpa:{at}: more 3-grams than the 10 announced"):
        read_arpa(p)


def test_bad_truncated(arpa, tmp_path):
    lines = _test_arpa_text(arpa).splitlines()
    cut = _line_of(lines, "-0.1892331\tlittle more loin")
    p = _write(tmp_path, lines[:cut])
    with pytest.raises(ArpaError, match=rf"bad\.arpa:{cut}: truncated file: the \\3-grams: section"):
        read_arpa(p)
    p = _write(tmp_path, lines[:-1], "noend.arpa")  # everything but \end\
    with pytest.raises(ArpaError, match=r"noend\.arpa:\d+: truncated file: end of file before \\end\\"):
        read_arpa(p)


def test_bad_number(arpa, tmp_path):
    lines = _test_arpa_text(arpa).splitlines()
    at = _line_of(lines, "-0.2922095\tcall for")
    lines[at - 1] = "-0.29x2095\tcall for"
    with pytest.raises(ArpaError, match=rf"bad\.arpa:{at}: bad log10 probability '-0.29x2095'"):
        read_arpa(_write(tmp_path, lines))
    lines = _test_arpa_text(arpa).splitlines()
    at = _line_of(lines, "-0.09021038\tlittle more")
    lines[at - 1] = "-0.09021038\tlittle more\tx"
    with pytest.raises(ArpaError, match=rf"bo\.arpa:{at}: bad backoff weight 'x'"):
        read_arpa(_write(tmp_path, lines, "bo.arpa"))


def test_bad_fields_unknown_word_duplicates(arpa, tmp_path):
    text = _test_arpa_text(arpa)
    lines = text.splitlines()
    at = _line_of(lines, "-0.2922095\tcall for")
    lines[at - 1] = "-0.2922095\tcall"
    with pytest.raises(ArpaError, match=rf"bad\.arpa:{at}: expected 3 or 4 fields"):
        read_arpa(_write(tmp_path, lines))
    lines = text.splitlines()
    lines[at - 1] = "-0.2922095\tcall nosuchword"
    with pytest.raises(ArpaError, match=rf"bad\.arpa:{at}: word 'nosuchword' is not in the 1-grams"):
        read_arpa(_write(tmp_path, lines))
    lines = text.splitlines()
    at = _line_of(lines, "-1.687872\tbeyond")
    lines[at - 1] = "-1.687872\talso\t-0.30103"
    with pytest.raises(ArpaError, match=rf"bad\.arpa:{at}: duplicate 1-gram 'also'"):
        read_arpa(_write(tmp_path, lines))


def test_bad_trie_context_missing_and_duplicate(arpa, tmp_path):
    text = _test_arpa_text(arpa)
    lines = text.splitlines()
    at = _line_of(lines, "-0.01916512\tmore . </s>")
    lines[at - 1] = "-0.01916512\tmore watch </s>"  # context "more watch" is no bigram
    with pytest.raises(ArpaError, match=rf"bad\.arpa:{at}: the context 'more watch' of the 3-gram"):
        build_trie(read_arpa(_write(tmp_path, lines)))
    lines = text.splitlines()
    at = _line_of(lines, "-0.2922095\tcall for")
    lines[at - 1] = "-0.2922095\talso call"
    with pytest.raises(ArpaError, match=rf"bad\.arpa:{at}: duplicate 2-gram 'also call'"):
        build_trie(read_arpa(_write(tmp_path, lines)))


# ----------------------------------------------------------------------------- trie

def test_btree_search_equals_binary_search():
    """The implicit 31-key B-tree search finds exactly what a binary search finds, for runs of any length
    (one node, two and three levels)."""
    rng = np.random.default_rng(3)
    for m in [1, 2, 30, 31, 32, 33, 500, 992, 1023, 1024, 1025, 5000, 40000]:
        keys = np.sort(rng.choice(200000, size=m, replace=False)).astype(np.int32)
        pad = np.concatenate([np.array([7, 7], np.int32), keys, np.array([3], np.int32)])
        probes = np.concatenate([keys[rng.integers(0, m, 64)], rng.integers(0, 200001, 64)]).astype(np.int32)
        for w in probes:
            got = trie_kernels._find(pad, 2, 2 + m, w)
            assert trie_kernels._bisect(pad, 2, 2 + m, w) == got
            i = np.searchsorted(keys, w)
            want = 2 + i if i < m and keys[i] == w else -1
            assert got == want, (m, w)
        assert trie_kernels._find(pad, 2, 2 + m, keys[-1]) == 2 + m - 1


def test_trie_layout_and_bytes(abc):
    t = abc.host_trie
    V, N = abc.vocab_size, abc.order
    assert t.start.tolist() == [0, V, V + 275002, V + 275002 + 538258]
    # children of a context are sorted runs; child ranges tile the next level
    for n in range(1, N):
        a, b = int(t.start[n - 1]), int(t.start[n])
        lo, hi = t.child[a:b], t.child[a + 1:b + 1]
        assert lo[0] == t.start[n] and hi[-1] == t.start[n + 1] and (hi >= lo).all()
    k = t.keys[V:]
    runs_break = np.zeros(len(k), bool)
    runs_break[t.child[:int(t.start[N - 1])] - V] = True
    assert ((np.diff(k.astype(np.int64)) > 0) | runs_break[1:]).all()
    total = t.n_ngrams
    inner = int(t.start[N - 1])
    assert abc.memory()["total"] == 4 * total + 4 * total + 4 * inner + 4 * (inner + 1)
    assert abc.bytes_per_ngram() == pytest.approx(abc.memory()["total"] / total)
    assert abc.bytes_per_ngram() < 12


# ----------------------------------------------------------------------------- KenLM reference values

def test_kenlm_readme_reference_numbers(arpa):
    m = NGramModel.load(arpa / "kenlm" / "test.arpa", backend="cpu")
    sc = m.score(["looking on a little more loin", "language modeling is fun ."])
    assert sc.log10_prob[0] == pytest.approx(-1.567985, abs=TOL)
    want = [-0.484652, -0.348837, -0.015527, -0.003061, -0.001814, -0.043256, -0.670838]
    np.testing.assert_allclose([p for p, _, _ in sc.full_scores(0)], want, atol=TOL)
    assert sc.log10_prob[1] == pytest.approx(-64.594437, abs=TOL)


def test_pocketsphinx_reference_numbers(arpa):
    m = NGramModel.load(arpa / "pocketsphinx" / "100.lm.gz", backend="cpu")  # has <UNK>: no warning now
    fs = m.full_scores("david huggins daines", bos=False, eos=False)
    assert fs[1][0] == pytest.approx(-0.03610, abs=TOL) and fs[1][1] == 2
    assert fs[2][0] == pytest.approx(-0.41050, abs=TOL) and fs[2][1] == 3


def _random_sentences(model, n, seed, oov=("zzz", "qq")):
    words = [w for w in model.vocab.to_pylist() if w not in ("<s>", "</s>")] + list(oov)
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(words, int(rng.integers(0, 12)))) for _ in range(n)]


@pytest.mark.parametrize("name", ["test.arpa", "test_nounk.arpa", "toy0.arpa", "toy1.arpa"])
@pytest.mark.parametrize("bos, eos", [(True, True), (False, True), (True, False), (False, False)])
def test_equals_kenlm_module_on_kenlm_test_models(arpa, name, bos, eos, recwarn):
    path = arpa / "kenlm" / name
    m = NGramModel.load(path, backend="cpu")
    km = kenlm.Model(str(path))
    sents = _random_sentences(m, 200, seed=len(name)) + ["looking on a little more loin", "",
                                                         "to look a zzz however zzz",
                                                         "also would consider higher looking"]
    sc = m.score(sents, bos=bos, eos=eos)
    suffix_closed = name.startswith("toy")
    for i, s in enumerate(sents):
        ref = list(km.full_scores(s, bos=bos, eos=eos))
        got = sc.full_scores(i)
        assert len(ref) == len(got)
        np.testing.assert_allclose([g[0] for g in got], [r[0] for r in ref], atol=TOL, err_msg=s)
        assert [g[2] for g in got] == [r[2] for r in ref], s
        if suffix_closed:
            assert [g[1] for g in got] == [r[1] for r in ref], s
        assert sc.log10_prob[i] == pytest.approx(km.score(s, bos=bos, eos=eos), abs=TOL)


def test_equals_kenlm_module_on_abc(abc, abc_kenlm, heldout):
    sents = heldout[:200] + _random_sentences(abc, 100, seed=5)
    sc = abc.score(sents)
    ref_p, ref_n, ref_o = [], [], []
    for s in sents:
        for p, n, o in abc_kenlm.full_scores(s):
            ref_p.append(p)
            ref_n.append(n)
            ref_o.append(o)
    np.testing.assert_allclose(sc.token_log10_prob, ref_p, atol=TOL)
    np.testing.assert_array_equal(sc.ngram_length, ref_n)
    np.testing.assert_array_equal(sc.oov, ref_o)


def test_expected_scores_tsv(abc, arpa, heldout):
    d = arpa / "lmplz"
    sent = pd.read_csv(d / "expected_sentence_scores.kenlm-py.abc.o3.tsv", sep="\t", comment="#", header=None,
                       names=["score", "sentence"], quoting=3)
    assert len(sent) == 664
    sc = abc.score(sent["sentence"].tolist())
    np.testing.assert_allclose(sc.log10_prob, sent["score"], atol=TOL)
    tok = pd.read_csv(d / "expected_token_scores.kenlm-py.abc.o3.tsv", sep="\t", comment="#", header=None,
                      names=["sent", "tok", "word", "p", "n", "oov"], quoting=3, keep_default_na=False)
    sc = abc.score(heldout)
    rows = sc.offsets[tok["sent"].to_numpy()] + tok["tok"].to_numpy()
    np.testing.assert_allclose(sc.token_log10_prob[rows], tok["p"], atol=TOL)
    np.testing.assert_array_equal(sc.ngram_length[rows], tok["n"])
    np.testing.assert_array_equal(sc.oov[rows], tok["oov"].astype(bool))


def test_perplexity_of_heldout(abc, arpa):
    # data README: total -39270.0724, perplexity 520.1736 over 664 sentences
    path = arpa / "lmplz" / "heldout.inaugural2001-2009.tok.txt"
    assert abc.perplexity(path) == pytest.approx(520.1736, abs=1e-3)
    sc = abc.score(path.read_text(encoding="utf-8").splitlines())
    assert float(sc.log10_prob.sum()) == pytest.approx(-39270.0724, abs=1e-2)


# ----------------------------------------------------------------------------- distributions

def _contexts(heldout, n, seed):
    rng = np.random.default_rng(seed)
    out = []
    for s in rng.choice(len(heldout), n, replace=False):
        w = heldout[s].split()
        out.append(" ".join(w[: int(rng.integers(0, len(w)))]))
    return out


@pytest.mark.parametrize("order", [1, 2, 3])
def test_distributions_sum_to_one(abc, heldout, order):
    ctx = _contexts(heldout, 40, seed=order)
    d = abc.next_word_distribution(ctx, order=order, bos=True)
    assert d.shape == (40, abc.vocab_size) and d.dtype == np.float32
    sums = (10.0 ** d.astype(np.float64)).sum(axis=1)
    np.testing.assert_allclose(sums, 1.0, atol=TOL)
    p = abc.next_word_distribution(ctx, order=order, bos=True, log10=False)
    np.testing.assert_allclose(p.sum(axis=1, dtype=np.float64), 1.0, atol=TOL)


@pytest.mark.parametrize("name", ["toy0.arpa", "toy1.arpa"])
def test_distributions_sum_to_one_on_kenlm_toys(arpa, name):
    m = NGramModel.load(arpa / "kenlm" / name, backend="cpu")
    ctx = _random_sentences(m, 30, seed=2)
    for order in range(1, m.order + 1):
        d = m.next_word_distribution(ctx, order=order, bos=True)
        np.testing.assert_allclose((10.0 ** d.astype(np.float64)).sum(axis=1), 1.0, atol=TOL)


def test_distribution_entries_equal_kenlm(abc, abc_kenlm, heldout):
    """Every seen continuation, and a sample of unseen ones, equals KenLM's back-off score."""
    ctx = _contexts(heldout, 6, seed=11)
    d = abc.next_word_distribution(ctx, bos=True)
    sp = abc.next_word_distribution(ctx, sparse=True, bos=True, log10=True)
    vocab = abc.vocab.to_pylist()
    rng = np.random.default_rng(0)
    for r, c in enumerate(ctx):
        seen = sp.indices[sp.indptr[r]:sp.indptr[r + 1]]
        cols = np.unique(np.concatenate([seen[:300], rng.integers(0, abc.vocab_size, 200)]))
        for w in cols:
            if vocab[w] == "<s>":
                continue
            ref = list(abc_kenlm.full_scores(f"{c} {vocab[w]}".strip(), bos=True, eos=False))[-1][0]
            assert abs(d[r, w] - ref) <= TOL, (c, vocab[w])


def test_sparse_distribution_is_the_stored_ngrams(abc, heldout):
    arpa_model = read_arpa(abc.path)
    tri = arpa_model.orders[2]
    stored = {tuple(w): p for w, p in zip(tri.words[:2000].tolist(), tri.prob[:2000].tolist())}
    pairs = sorted({w[:2] for w in stored})[:20]
    vocab = abc.vocab.to_pylist()
    ctx = [f"{vocab[a]} {vocab[b]}" for a, b in pairs]
    sp = abc.next_word_distribution(ctx, order=3, sparse=True, log10=True)
    for r, (a, b) in enumerate(pairs):
        want = {w[2]: p for w, p in stored.items() if w[:2] == (a, b)}
        row = dict(zip(sp.indices[sp.indptr[r]:sp.indptr[r + 1]].tolist(),
                       sp.data[sp.indptr[r]:sp.indptr[r + 1]].tolist()))
        assert set(want) <= set(row)
        for w, p in want.items():
            assert row[w] == pytest.approx(p, abs=1e-7)
    probs = abc.next_word_prob(ctx, order=3, sparse=True)
    np.testing.assert_allclose(probs.data, 10.0 ** sp.data, rtol=1e-5)
    with pytest.warns(FutureWarning, match="next_word_prob"):  # the old name without a scale still works
        old = abc.next_word_distribution(ctx, order=3, sparse=True)
    np.testing.assert_array_equal(old.data, probs.data)


def test_distribution_names_say_their_scale(abc, heldout):
    """next_word_log10_prob is log10 (dense), next_word_prob probabilities (dense and sparse)."""
    ctx = _contexts(heldout, 8, seed=5)
    lg = abc.next_word_log10_prob(ctx, bos=True)
    p = abc.next_word_prob(ctx, bos=True)
    np.testing.assert_array_equal(lg, abc.next_word_distribution(ctx, bos=True))
    np.testing.assert_allclose(p, 10.0 ** lg.astype(np.float64), rtol=1e-5)
    np.testing.assert_allclose(p.sum(axis=1, dtype=np.float64), 1.0, atol=TOL)
    sp = abc.next_word_prob(ctx, sparse=True, bos=True)
    assert sp.shape == p.shape and float(sp.data.min()) > 0 and float(sp.data.max()) <= 1
    assert (sp.sum(axis=1) <= 1 + TOL).all()  # the stored n-grams only: at most the whole mass


def test_top_k_next_equals_kenlm_brute_force(abc, abc_kenlm, heldout):
    ctx = ["we", "the united", "i will"]
    tk = abc.top_k_next(ctx, k=8, bos=True)
    vocab = abc.vocab.to_pylist()
    for r, c in enumerate(ctx):
        state, words = kenlm.State(), c.split()
        abc_kenlm.BeginSentenceWrite(state)
        for w in words:
            nxt = kenlm.State()
            abc_kenlm.BaseScore(state, w, nxt)
            state = nxt
        scores = np.array([abc_kenlm.BaseScore(state, w, kenlm.State()) if w != "<s>" else -np.inf for w in vocab])
        best = np.argsort(-scores, kind="stable")[:8]
        np.testing.assert_allclose(tk.log10_prob[r], scores[best], atol=TOL)
        assert tk.words[r] == [vocab[i] for i in tk.ids[r]]
        assert set(tk.ids[r][:5]) == set(best[:5])


def test_bad_order(abc):
    with pytest.raises(ValueError, match="order must be in 1..3"):
        abc.next_word_distribution(["a"], order=4)


# ----------------------------------------------------------------------------- pipeline and CLI

def test_pipeline_scores_corpus_into_parquet(abc, arpa, tmp_path):
    src = arpa / "lmplz" / "heldout.inaugural2001-2009.tok.txt"
    r = pipelines.run("ngram", src, out=tmp_path / "out", model=abc, format="lines", progress=False)
    assert r.backend == "cpu" and r.counts["n_docs"] == 664
    t = pq.read_table(r.path / "scores.parquet").to_pandas()
    assert list(t.columns) == ["doc_id", "source_id", "sentences", "tokens", "oov", "log10_prob", "perplexity"]
    exp = pd.read_csv(arpa / "lmplz" / "expected_sentence_scores.kenlm-py.abc.o3.tsv", sep="\t", comment="#",
                      header=None, names=["score", "sentence"], quoting=3)
    np.testing.assert_allclose(t["log10_prob"], exp["score"], atol=TOL)
    words = exp["sentence"].str.split().str.len().to_numpy()
    np.testing.assert_array_equal(t["tokens"], words + 1)
    np.testing.assert_allclose(t["perplexity"], 10.0 ** (-exp["score"] / (words + 1)), rtol=1e-4)
    meta = json.loads((r.path / "ngram.json").read_text())
    assert meta["perplexity"] == pytest.approx(520.1736, abs=1e-3)
    assert meta["model"]["counts"] == [28592, 275002, 538258]


def test_pipeline_scores_doc_id_delta_coded(abc, arpa, tmp_path, monkeypatch):
    """The host writer codes the dense doc_id DELTA_BINARY_PACKED (HOST_SCORE_ENCODINGS) and reads back as
    written; an empty dict gives the plain column and the same table."""
    src = arpa / "lmplz" / "heldout.inaugural2001-2009.tok.txt"
    r = pipelines.run("ngram", src, out=tmp_path / "delta", model=abc, format="lines", progress=False)
    part = next((r.path / "scores.parquet").glob("*.parquet"))
    chunk = pq.ParquetFile(part).metadata.row_group(0)
    assert "DELTA_BINARY_PACKED" in chunk.column(0).encodings and chunk.column(0).path_in_schema == "doc_id"
    assert "DELTA_BINARY_PACKED" not in chunk.column(1).encodings  # source_id: PLAIN on the host
    monkeypatch.setattr(ng, "HOST_SCORE_ENCODINGS", {})
    plain = pipelines.run("ngram", src, out=tmp_path / "plain", model=abc, format="lines", progress=False)
    part = next((plain.path / "scores.parquet").glob("*.parquet"))
    assert "DELTA_BINARY_PACKED" not in pq.ParquetFile(part).metadata.row_group(0).column(0).encodings
    pd.testing.assert_frame_equal(pq.read_table(r.path / "scores.parquet").to_pandas(),
                                  pq.read_table(plain.path / "scores.parquet").to_pandas())


def test_encoded_writer_refuses_options_it_does_not_take():
    """The device writer with column encodings names an option of cudf's writer it does not take, or an
    encoding for a column it does not write, before it needs a GPU."""
    with pytest.raises(ValueError, match="use_dictionary"):
        ng._EncodedParquetWriter(io.BytesIO(), ["doc_id"], {"doc_id": "DELTA_BINARY_PACKED"}, use_dictionary=False)
    with pytest.raises(ValueError, match="doc_ids"):
        ng._EncodedParquetWriter(io.BytesIO(), ["doc_id"], {"doc_ids": "DELTA_BINARY_PACKED"})


def test_pipeline_documents_and_lines(arpa, tmp_path):
    """One document per file: each non-blank line a sentence (default), or the file one sentence."""
    lines = (arpa / "lmplz" / "heldout.inaugural2001-2009.tok.txt").read_text(encoding="utf-8").splitlines()
    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "a.txt").write_text("\n".join(lines[:3]) + "\n\n", encoding="utf-8")
    (corpus / "b.txt").write_text("\n".join(lines[3:5]), encoding="utf-8")
    path = arpa / "kenlm" / "test.arpa"
    km = kenlm.Model(str(path))
    r = pipelines.run("ngram", corpus, out=tmp_path / "o1", model=path, backend="cpu", progress=False)
    t = pq.read_table(r.path / "scores.parquet").to_pandas().set_index("source_id")
    assert t.loc["a.txt", "log10_prob"] == pytest.approx(sum(km.score(s) for s in lines[:3]), abs=TOL)
    assert t.loc["b.txt", "sentences"] == 2
    r = pipelines.run("ngram", corpus, out=tmp_path / "o2", model=path, backend="cpu", sentence="document",
                      progress=False)
    t = pq.read_table(r.path / "scores.parquet").to_pandas().set_index("source_id")
    # KenLM's score() sums in float32 (off by 1.1e-4 on this 150-word sentence); compare with the
    # float64 sum of its token scores, as we sum
    ref = math.fsum(p for p, _, _ in km.full_scores(" ".join(lines[:3])))
    assert t.loc["a.txt", "log10_prob"] == pytest.approx(ref, abs=TOL)
    assert t.loc["a.txt", "log10_prob"] == pytest.approx(km.score(" ".join(lines[:3])), abs=1e-3)


def test_pipeline_bad_model_leaves_no_output(arpa, tmp_path):
    bad = tmp_path / "bad.arpa"
    bad.write_text("\\data\\\nngram 1=2\n\n\\1-grams:\n-1\ta\n\\end\\\n", encoding="utf-8")
    with pytest.raises(ArpaError, match=r"bad\.arpa:6: the \\1-grams: section"):
        pipelines.run("ngram", arpa / "lmplz" / "heldout.inaugural2001-2009.tok.txt", out=tmp_path / "o",
                      model=bad, backend="cpu", progress=False)
    assert not (tmp_path / "o").exists()


def test_cli_stdin_line_by_line(arpa, monkeypatch, capsys):
    from cutext.pipelines.__main__ import main

    path = arpa / "kenlm" / "test.arpa"
    km = kenlm.Model(str(path))
    text = "looking on a little more loin\nlanguage modeling is fun .\n\nzzz\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    assert main(["ngram", "-", "--model", str(path), "--backend", "cpu", "--batch-lines", "2"]) == 0
    out = capsys.readouterr().out.strip().split("\n")
    assert len(out) == 4
    for line, s in zip(out, text.split("\n")):
        lp, nt, oov, ppl = line.split("\t")
        assert float(lp) == pytest.approx(km.score(s), abs=TOL)
        assert int(nt) == len(s.split()) + 1
        assert int(oov) == sum(o for _, _, o in km.full_scores(s))
        assert float(ppl) == pytest.approx(km.perplexity(s), rel=1e-4)


def test_cli_corpus(arpa, tmp_path, capsys):
    from cutext.pipelines.__main__ import main

    src = arpa / "lmplz" / "heldout.inaugural2001-2009.tok.txt"
    rc = main(["ngram", str(src), "--model", str(arpa / "kenlm" / "test.arpa"), "--out", str(tmp_path / "o"),
               "--backend", "cpu", "--no-progress", "--json"])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    assert res["counts"]["n_docs"] == 664 and math.isfinite(res["params"]["perplexity"])


def test_backend_bos_eos_and_n_workers_are_used_or_refused(abc, data_dir, tmp_path):
    """With a loaded model the trie is where it was loaded: a ``backend`` other than "auto" and the model's
    own (or an unknown one) was ignored and is refused; ``bos`` / ``eos`` take bools ("no" was recorded and
    read as True); ``n_workers`` is refused where no local cluster runs."""
    src = data_dir / "cacm" / "cacm.json"
    kw = dict(model=abc, progress=False)
    with pytest.raises(ValueError, match="backend='gpu' but the loaded model is on the CPU"):
        pipelines.run("ngram", src, out=tmp_path / "x", backend="gpu", **kw)
    with pytest.raises(ValueError, match="backend must be one of"):
        pipelines.run("ngram", src, out=tmp_path / "x", backend="bogus", **kw)
    for bad in ({"bos": "no"}, {"eos": 0}):
        with pytest.raises(ValueError, match=f"{next(iter(bad))} must be True or False"):
            pipelines.run("ngram", src, out=tmp_path / "x", **bad, **kw)
    with pytest.raises(ValueError, match="n_workers=2 sizes a local cluster"):
        pipelines.run("ngram", src, out=tmp_path / "x", scheduler="sync", n_workers=2, **kw)
    assert not (tmp_path / "x").exists()
    r = pipelines.run("ngram", src, out=tmp_path / "ok", backend="cpu", **kw)
    assert r.backend == "cpu" and r.counts["n_docs"] == 3204
