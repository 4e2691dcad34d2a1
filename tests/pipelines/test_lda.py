"""The lda pipeline on the CPU: readers, the LDA-chunk stage, the samplers (numba twins), the model.

Real data from ../shared/data/bow: Reuters in LDA-C (395 docs, 4,258 words, 84,010 tokens) and the
UCI KOS corpus (3,430 docs, 6,906 words, 353,160 triples, 467,714 tokens).
"""
from __future__ import annotations

import gzip
import json
import re

import numpy as np
import pandas as pd
import pytest

from cutext import pipelines
from cutext.kernels import lda as K_
from cutext.kernels import lda_hybrid as KH
from cutext.pipelines.lda import LDAModel
from cutext.stages.engines.lda_chunk import (
    BagOfWords,
    LDAInputError,
    bow_from_tokens,
    build_chunks,
    read_ldac,
    read_uci,
)
from cutext.stages.engines.lda_gibbs import GibbsState

from helpers import need_data


def _subset(bow: BagOfWords, n_docs: int) -> BagOfWords:
    e = bow.doc_ptr[n_docs]
    return BagOfWords(bow.doc_ptr[: n_docs + 1].copy(), bow.word[:e].copy(), bow.count[:e].copy(), bow.vocab,
                      bow.doc_names[:n_docs], bow.source + f"[:{n_docs}]")


# ----------------------------------------------------------------------------- RNG

def test_uniform_is_the_counter_based_definition():
    keys = np.array([0, 1, 2, 12345, 2**40 + 7, 2**62 - 1], dtype=np.int64)
    for seed, it in [(0, 0), (1, 2), (2**63 + 5, 2**33)]:
        got = K_.uniform(seed, it, keys)
        want = [K_.uniform_reference(seed, it, int(k)) for k in keys]
        np.testing.assert_array_equal(got, want)
    u = K_.uniform(7, 3, np.arange(200_000, dtype=np.int64))
    assert 0.0 <= u.min() and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.003 and abs(u.var() - 1 / 12) < 0.002
    assert not np.array_equal(u, K_.uniform(7, 4, np.arange(200_000, dtype=np.int64)))


# ----------------------------------------------------------------------------- readers

def test_read_real_corpora(reuters, kos_path):
    assert (reuters.n_docs, len(reuters.vocab), reuters.n_tokens) == (395, 4258, 84010)
    assert reuters.vocab[:3] == ["church", "pope", "years"]
    kos = read_uci(kos_path)
    assert (kos.n_docs, len(kos.vocab), kos.word.shape[0], kos.n_tokens) == (3430, 6906, 353160, 467714)
    assert kos.doc_lengths.sum() == 467714


def _write_uci(tmp_path, lines, name="docword.t.txt"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


def test_uci_errors_name_file_and_line(tmp_path):
    with pytest.raises(LDAInputError, match=r"docword\.t\.txt:5: wordID 9 out of range 1\.\.4"):
        read_uci(_write_uci(tmp_path, ["2", "4", "3", "1 1 2", "1 9 1", "2 3 1"]))
    with pytest.raises(LDAInputError, match=r":6: docID 3 out of range 1\.\.2"):
        read_uci(_write_uci(tmp_path, ["2", "4", "3", "1 1 2", "1 2 1", "3 3 1"]))
    with pytest.raises(LDAInputError, match=r":2: bad UCI header"):
        read_uci(_write_uci(tmp_path, ["2", "four", "3", "1 1 2"]))
    with pytest.raises(LDAInputError, match=r":5: expected 'docID wordID count'"):
        read_uci(_write_uci(tmp_path, ["2", "4", "2", "1 1 2", "1 2"]))
    with pytest.raises(LDAInputError, match=r":4: count 0 < 1"):
        read_uci(_write_uci(tmp_path, ["2", "4", "1", "1 1 0"]))
    with pytest.raises(LDAInputError, match=r"NNZ = 5 but the file holds 2"):
        read_uci(_write_uci(tmp_path, ["2", "4", "5", "1 1 2", "2 2 1"]))


def test_uci_counts_and_ids_range_checked(tmp_path):
    """Values beyond int32 (counts, ids, header sizes, the token total) and ones beyond int64 are
    refused naming file and line, before any array is sized from them (a count of
    99,999,999,999 used to wrap to 1.2e9 and the process was killed at 24 GB)."""
    with pytest.raises(LDAInputError, match=r"docword\.t\.txt:5: count 99999999999 out of range 1\.\.2,147,483,647"):
        read_uci(_write_uci(tmp_path, ["2", "4", "3", "1 1 2", "1 2 99999999999", "2 3 1"]))
    with pytest.raises(LDAInputError, match=r"docword\.t\.txt:5: count 99999999999999999999 out of range"):
        read_uci(_write_uci(tmp_path, ["2", "4", "3", "1 1 2", "1 2 99999999999999999999", "2 3 1"]))
    with pytest.raises(LDAInputError, match=r":6: count -3 < 1"):
        read_uci(_write_uci(tmp_path, ["2", "4", "3", "1 1 2", "1 2 1", "2 3 -3"]))
    with pytest.raises(LDAInputError, match=r":4: wordID 0 out of range 1\.\.4"):
        read_uci(_write_uci(tmp_path, ["2", "4", "1", "1 0 2"]))
    with pytest.raises(LDAInputError, match=r":4: docID -1 out of range 1\.\.2"):
        read_uci(_write_uci(tmp_path, ["2", "4", "1", "-1 1 2"]))
    with pytest.raises(LDAInputError, match=r":1: bad UCI header: 99999999999 documents D is more than"):
        read_uci(_write_uci(tmp_path, ["99999999999", "4", "1", "1 1 2"]))
    with pytest.raises(LDAInputError, match=r":2: bad UCI header: negative number of words W"):
        read_uci(_write_uci(tmp_path, ["2", "-4", "1", "1 1 2"]))
    with pytest.raises(LDAInputError, match=r":3: header NNZ = 2 but the file holds 3 triples"):
        read_uci(_write_uci(tmp_path, ["2", "4", "2", "1 1 2", "1 2 1", "2 3 1"]))
    # every count fits int32, their sum does not: the line where the total passes 2**31 - 1
    big = 2**31 - 10
    with pytest.raises(LDAInputError, match=r":5: the corpus exceeds 2,147,483,647 tokens"):
        read_uci(_write_uci(tmp_path, ["2", "4", "3", f"1 1 {big}", "1 2 20", "2 3 1"]))
    ok = read_uci(_write_uci(tmp_path, ["2", "4", "2", f"1 1 {big}", "2 3 9"]))
    assert ok.n_tokens == 2**31 - 1 and ok.count.dtype == np.int32


def test_ldac_counts_and_ids_range_checked(tmp_path):
    p = tmp_path / "y.ldac"
    p.write_text("1 0:1\n2 0:1 1:99999999999\n")
    with pytest.raises(LDAInputError, match=r"y\.ldac:2: count 99999999999 out of range 1\.\.2,147,483,647"):
        read_ldac(p)
    p.write_text("1 0:1\n1 1:-2\n")
    with pytest.raises(LDAInputError, match=r"y\.ldac:2: count -2 < 1"):
        read_ldac(p)
    p.write_text("1 0:1\n1 -1:2\n")
    with pytest.raises(LDAInputError, match=r"y\.ldac:2: word id -1 out of range"):
        read_ldac(p)
    p.write_text("1 4294967296:1\n")   # no vocabulary: ids must still fit int32
    with pytest.raises(LDAInputError, match=r"y\.ldac:1: word id 4294967296 out of range 0\.\.2147483646"):
        read_ldac(p)
    p.write_text(f"1 0:{2**31 - 10}\n1 1:5\n1 1:5\n")
    with pytest.raises(LDAInputError, match=r"y\.ldac:3: the corpus exceeds 2,147,483,647 tokens"):
        read_ldac(p)


def test_uci_vocab_next_to_docword_and_empty_documents(tmp_path):
    (tmp_path / "vocab.t.txt").write_text("a\nb\nc\nd\n")
    p = _write_uci(tmp_path, ["4", "4", "3", "1 1 2", "3 2 1", "3 4 3"])  # documents 2 and 4 are empty
    bow = read_uci(p)
    assert bow.vocab == ["a", "b", "c", "d"]
    np.testing.assert_array_equal(bow.doc_lengths, [2, 0, 4, 0])


def test_ldac_errors(tmp_path, reuters_path):
    p = tmp_path / "x.ldac"
    p.write_text("2 0:1 3:2\n3 1:1 2:1\n")
    with pytest.raises(LDAInputError, match=r"x\.ldac:2: declares 3 distinct words but lists 2"):
        read_ldac(p)
    p.write_text("2 0:1 3:2\n1 1:x\n")
    with pytest.raises(LDAInputError, match=r"x\.ldac:2: expected 'n id:count"):
        read_ldac(p)
    (tmp_path / "x.tokens").write_text("a\nb\nc\n")
    p.write_text("1 0:1\n2 0:1 3:2\n")
    with pytest.raises(LDAInputError, match=r"x\.ldac:2: word id 3 out of range 0\.\.2"):
        read_ldac(p)
    p.write_text("1 0:0\n")
    with pytest.raises(LDAInputError, match=r"x\.ldac:1: count 0 < 1"):
        read_ldac(p)


def test_bad_corpora_and_parameters_leave_no_model(tmp_path):
    out = tmp_path / "model"
    one = tmp_path / "one.ldac"
    one.write_text("1 0:5\n1 0:2\n")
    with pytest.raises(LDAInputError, match="single distinct word"):
        pipelines.run("lda", str(one), out=out, K=4, iterations=2, progress=False)
    empty = tmp_path / "empty.ldac"
    empty.write_text("\n0\n")
    with pytest.raises(LDAInputError, match="no token"):
        pipelines.run("lda", str(empty), out=out, K=4, iterations=2, progress=False)
    good = tmp_path / "good.ldac"
    good.write_text("2 0:5 1:1\n1 1:2\n")
    with pytest.raises(ValueError, match="K must be an integer >= 2"):
        pipelines.run("lda", str(good), out=out, K=1, iterations=2, progress=False)
    with pytest.raises(ValueError, match="beta must be a finite number > 0"):
        pipelines.run("lda", str(good), out=out, K=3, beta=0.0, progress=False)
    bad = tmp_path / "docword.bad.txt"
    bad.write_text("1\n2\n1\n1 7 1\n")
    with pytest.raises(LDAInputError, match=r"docword\.bad\.txt:4"):
        pipelines.run("lda", str(bad), out=out, K=3, progress=False)
    assert not out.exists() and not list(tmp_path.glob(".model*"))


# ----------------------------------------------------------------------------- LDA-chunk stage

def test_chunks_relabel_partition_sort_index(reuters):
    K = 20
    ch = build_chunks(reuters, K, n_chunks=4)
    N = reuters.n_tokens
    assert ch.n_tokens == N and ch.n_docs == 395
    # relabelled by frequency: non-increasing counts, the same multiset of tokens per word
    assert (np.diff(ch.word_count) <= 0).all()
    freq_in = np.bincount(reuters.word, weights=reuters.count, minlength=len(reuters.vocab))
    np.testing.assert_array_equal(ch.word_count, freq_in[ch.old_id])
    np.testing.assert_array_equal(np.bincount(ch.word, minlength=ch.V), ch.word_count)
    assert ch.vocab == [reuters.vocab[i] for i in ch.old_id]
    assert ch.n_dense == int((ch.word_count > K).sum()) and ch.n_dense > 0
    # chunks: contiguous documents, near-equal token counts (within one document's length)
    sizes = np.diff(ch.chunk_ptr)
    assert sizes.sum() == N and len(sizes) == 4
    assert sizes.max() - sizes.min() <= 2 * reuters.doc_lengths.max()
    for c in range(4):
        sl = ch.chunk(c)
        w, d = ch.word[sl], ch.doc[sl]
        assert ((np.diff(w) > 0) | ((np.diff(w) == 0) & (np.diff(d) >= 0))).all()  # sorted by (word, doc)
        assert d.min() >= ch.chunk_docs[c] and d.max() < ch.chunk_docs[c + 1]
        split = ch.chunk_split[c]
        assert (ch.word[sl.start:split] < ch.n_dense).all() and (ch.word[split:sl.stop] >= ch.n_dense).all()
    # inverted index: the tokens of document d, and their words, are the document's bag of words
    for d in (0, 17, 394):
        pos = ch.doc_tok[ch.doc_ptr[d]:ch.doc_ptr[d + 1]]
        assert (ch.doc[pos] == d).all()
        a, b = reuters.doc_ptr[d], reuters.doc_ptr[d + 1]
        want = np.repeat(reuters.word[a:b], reuters.count[a:b])
        got = ch.old_id[ch.word[pos]]
        np.testing.assert_array_equal(np.sort(got), np.sort(want))
    assert sorted(ch.doc_tok.tolist()) == list(range(N))
    np.testing.assert_array_equal(np.sort(ch.keys), np.arange(N))
    mem = ch.memory_estimate()
    assert mem["hybrid_w"] < mem["dense_w"]


# ----------------------------------------------------------------------------- samplers

def _brute_force_p(state: GibbsState, exclude: bool) -> np.ndarray:
    """p(k) for every token from dense counts (the definition the samplers must draw from)."""
    W = state.dense_w().astype(np.float64)
    nk = state.nk.astype(np.float64)
    n_docs = state.ch.n_docs
    D = np.zeros((n_docs, state.K))
    dt = state.doc_topic_table()
    D[dt["doc_id"], dt["topic"]] = dt["count"]
    v, d, z = state.word, state.doc, state.z
    Wt, Dt, nt = W[v].copy(), D[d].copy(), np.broadcast_to(nk, (len(v), state.K)).copy()
    if exclude:
        r = np.arange(len(v))
        Wt[r, z] -= 1
        Dt[r, z] -= 1
        nt[r, z] -= 1
    p = (Dt + state.alpha) * (Wt + state.beta) / (nt + state.vbeta)
    return p / p.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("sampler,exclude", [("sparse", True), ("sparse", False), ("three_branch", True),
                                             ("three_branch", False), ("dense", True), ("hybrid", True),
                                             ("hybrid", False), ("hybrid-doc", True), ("hybrid-doc", False)])
def test_samplers_draw_from_the_gibbs_conditional(reuters, sampler, exclude):
    """Many draws with the state fixed: pooled and per-token frequencies match p(k) of Eq. 1.
    The hybrid state has dense rows for the words with more than K = 8 tokens and sparse rows for the
    others; every bucket of the sparse-word sampler (own, X, Y, R) is drawn.  "hybrid-doc" sets the
    doc-side constant to 0, so every sparse-word token takes the doc-side split (own, S, Z, Y, R)."""
    ch = build_chunks(_subset(reuters, 12), 8, n_chunks=2)
    doc_side = sampler == "hybrid-doc"
    hyb = sampler.startswith("hybrid")
    st = GibbsState(ch, 8, alpha=0.5, beta=0.05, seed=3, w_layout="hybrid" if hyb else "dense")
    for it in range(1, 6):  # move away from the uniform start so that three-branch skips tokens
        st.step(it, "hybrid" if hyb else "sparse")
    p = _brute_force_p(st, exclude)
    R = 400
    counts = np.zeros_like(p)
    rows = np.arange(ch.n_tokens)
    skipped = 0.0
    branches = np.zeros(9)
    panels = [np.asarray(a) for a in K_.word_panels(ch.word, 8)]
    for it in range(100, 100 + R):
        if hyb:
            z, fl = KH.sample_hybrid(st.word, st.doc, st.keys, st.z, st.doc_ptr, st.d_topic, st.d_cnt, st.d_nnz, st.hw,
                                     st.nk, st.tables, st.htables, st._dense_ranges, alpha=st.alpha, beta=st.beta,
                                     vbeta=st.vbeta, seed=1, iteration=it, exclude=exclude,
                                     doc_c=0 if doc_side else KH.HYBRID_DOC_C)
            branches += np.bincount(fl[ch.word >= ch.n_dense], minlength=9)
        elif sampler == "dense":
            z = K_.sample_dense(st.word, st.doc, st.keys, st.z, st.doc_ptr, st.d_topic, st.d_cnt, st.d_nnz, st.W,
                                st.nk, panels, alpha=st.alpha, beta=st.beta, vbeta=st.vbeta, seed=1, iteration=it,
                                exclude=exclude, panel_words=8)
        else:
            z, fl = K_.sample(st.word, st.doc, st.keys, st.z, st.doc_ptr, st.d_topic, st.d_cnt, st.d_nnz, st.W, st.nk,
                              st.tables, alpha=st.alpha, beta=st.beta, vbeta=st.vbeta, seed=1, iteration=it,
                              three=sampler == "three_branch", exclude=exclude)
            skipped += (fl == K_.FLAG_SKIP).mean()
        counts[rows, z] += 1
    pooled_obs = counts.sum(0) / counts.sum()
    pooled_exp = p.mean(0)
    np.testing.assert_allclose(pooled_obs, pooled_exp, atol=0.004)
    # per token: total variation distance, averaged, is at the level of multinomial noise
    tv = 0.5 * np.abs(counts / R - p).sum(1)
    noise = 0.5 * np.sqrt(2 / np.pi) * np.sqrt(p * (1 - p) / R).sum(1)  # E|N(0, var)| summed
    assert tv.mean() < 1.3 * noise.mean(), (tv.mean(), noise.mean())
    if sampler == "three_branch":
        assert skipped / R > 0.05  # the S_est test does skip tokens
    if hyb:
        assert 0 < ch.n_dense < ch.V // 4
        side = [7, 8] if doc_side else [4]
        assert (branches[side + [5, 6]] > 0).all() and (branches[3] > 0) == exclude, branches
        assert branches[:3].sum() == 0 and branches[[4] if doc_side else [7, 8]].sum() == 0, branches


def test_invariants_after_every_iteration_and_reproducibility(reuters_path, tmp_path):
    seen = []

    def check(it, state):
        state.check_invariants()
        W = state.host(state.W)
        assert W.sum() == 84010 and (W >= 0).all()
        assert int(state.host(state.d_cnt)[:84010].sum()) >= 84010 - 0  # padded CSR holds every token
        seen.append(it)

    r1 = pipelines.run("lda", str(reuters_path), out=tmp_path / "a", K=16, iterations=6, sampler="sparse",
                       seed=5, progress=False, callback=check, n_chunks=3)
    assert seen == list(range(7))
    r2 = pipelines.run("lda", str(reuters_path), out=tmp_path / "b", K=16, iterations=6, sampler="sparse",
                       seed=5, progress=False, n_chunks=1)
    a = pd.read_parquet(tmp_path / "a" / "topic_word.parquet")
    b = pd.read_parquet(tmp_path / "b" / "topic_word.parquet")
    pd.testing.assert_frame_equal(a, b)  # the chain does not depend on the chunking
    assert r1.params["llpt"] == pytest.approx(r2.params["llpt"], rel=1e-12)
    pipelines.run("lda", str(reuters_path), out=tmp_path / "c", K=16, iterations=6, sampler="sparse",
                       seed=6, progress=False)
    assert not pd.read_parquet(tmp_path / "c" / "topic_word.parquet").equals(a)


def test_model_directory_and_model(reuters_path, tmp_path):
    out = tmp_path / "m"
    r = pipelines.run("lda", str(reuters_path), out=out, K=12, iterations=25, alpha=0.5, beta=0.05,
                      sampler="three_branch", progress=False)
    assert r.pipeline == "lda" and r.backend == "cpu" and r.counts["n_tokens"] == 84010
    params = json.loads((out / "params.json").read_text())
    assert params["K"] == 12 and params["sampler"] == "three_branch" and params["n_tokens"] == 84010
    m = LDAModel.load(out)
    assert m.W.sum() == 84010 and m.W.shape == (4258, 12)
    ll = m.llpt["llpt"].to_numpy()
    assert list(m.llpt["iteration"]) == list(range(26))
    assert ll[-1] > ll[0] + 0.3  # LLPT (bits) increases from the random start
    assert (m.llpt["skipped"].iloc[-5:] > 0.05).all()
    theta = m.theta()
    np.testing.assert_allclose(theta.sum(1), 1.0)
    tw = m.top_words(5)
    assert len(tw) == 60 and (tw.groupby("topic")["prob"].apply(lambda s: s.is_monotonic_decreasing)).all()
    # LLPT recomputed from the saved counts (Eq. 5) equals the logged final value
    phi = m.phi
    ch = build_chunks(read_ldac(reuters_path), 12)
    old_to_new = {w: i for i, w in enumerate(m.vocab)}
    assert [old_to_new[w] for w in ch.vocab] == list(range(len(ch.vocab)))
    eq5 = np.log2((theta[ch.doc] * phi[:, ch.word].T).sum(1)).mean()
    assert abs(eq5 - ll[-1]) < 1e-5
    # inference with W fixed: held-out documents get their dominant topic; LDA beats the unigram model
    bow = read_ldac(reuters_path)
    held = [[bow.vocab[w] for w, c in zip(bow.word[bow.doc_ptr[d]:bow.doc_ptr[d + 1]],
                                          bow.count[bow.doc_ptr[d]:bow.doc_ptr[d + 1]]) for _ in range(c)]
            for d in range(5)]
    th = m.transform(held, iterations=20)
    assert th.shape == (5, 12)
    np.testing.assert_allclose(th.sum(1), 1.0)
    agree = (th.argmax(1) == theta[:5].argmax(1)).mean()
    assert agree >= 0.6
    lpw = m.log_likelihood(held, iterations=20)
    unigram = m.W.sum(1) / m.W.sum()
    idx = {w: i for i, w in enumerate(m.vocab)}
    uni = np.mean([np.log(unigram[idx[w]]) for doc in held for w in doc])
    assert lpw > uni + 0.2
    assert m.perplexity(held, iterations=20) == pytest.approx(np.exp(-lpw))
    assert np.allclose(m.transform([[], ["zzzz-not-a-word"]]), 1 / 12)


@pytest.mark.slow
def test_three_branch_curve_matches_two_branch(reuters_path, tmp_path):
    curves = {}
    for smp, seed in [("sparse", 0), ("sparse", 1), ("three_branch", 0), ("dense", 0), ("hybrid", 0)]:
        pipelines.run("lda", str(reuters_path), out=tmp_path / f"{smp}{seed}", K=20, iterations=30, alpha=0.1,
                      beta=0.1, sampler=smp, seed=seed, progress=False)
        curves[smp, seed] = LDAModel.load(tmp_path / f"{smp}{seed}").llpt["llpt"].to_numpy()
    two0, two1 = curves["sparse", 0], curves["sparse", 1]
    noise = np.abs(two0[15:] - two1[15:]).max()
    for key in (("three_branch", 0), ("dense", 0), ("hybrid", 0)):
        diff = np.abs(curves[key][15:] - two0[15:]).max()
        assert diff < max(3 * noise, 0.01 * abs(two0[-1])), (key, diff, noise)


def test_from_text_corpus_and_cli(shared_data, tmp_path, capsys):
    from cutext.pipelines.__main__ import main

    need_data("lee")  # skipped by name where the Lee corpus is not here
    src = shared_data / "corpora" / "gensim" / "lee_background.cor"
    out = tmp_path / "lee"
    rc = main(["lda", str(src), "--out", str(out), "-K", "5", "--iterations", "5", "--format", "lines",
               "--stopwords", "lucene", "--top", "4", "--backend", "cpu", "--no-progress"])
    assert rc == 0
    text = capsys.readouterr().out
    assert re.search(r"^  LLPT = -[0-9.]+$", text, flags=re.M)  # the headline
    assert re.search(r"^  topic 4 ", text, flags=re.M)
    m = LDAModel.load(out)
    assert m.params["format"] == "lines" and len(m.documents) == 300
    assert "the" not in m.vocab and "government" in m.vocab
    assert m.W.sum() == m.params["n_tokens"]
    p = m.params["pruning"]  # the defaults' pruning, told on one line: "said" is in most news stories
    assert "said" not in m.vocab and p["words_removed"] > 0
    line = (rf"^pruned: {p['words_removed']:,} words in fewer than 2 or more than 90 documents \(min_df=2, "
            rf"max_df=0\.3\), the most frequent: {p['most_frequent_removed'][0]} ")
    assert re.search(line, text, flags=re.M)


@pytest.mark.slow
def test_tomotopy_llpt_on_reuters(reuters):
    """EZLDA Eq. 5 computed from each system's counts after 100 iterations, K=20, alpha=beta=0.1
    (ours: the sparse sampler and the hybrid-W sampler)."""
    tp = pytest.importorskip("tomotopy")
    K, iters = 20, 100
    ch = build_chunks(reuters, K)
    ours = {}
    for smp in ("sparse", "hybrid"):
        st = GibbsState(ch, K, 0.1, 0.1, seed=0, w_layout="hybrid" if smp == "hybrid" else "dense")
        for it in range(1, iters + 1):
            st.step(it, smp)
        ours[smp] = st.llpt()
    mdl = tp.LDAModel(k=K, alpha=0.1, eta=0.1, seed=1)
    mdl.optim_interval = 0
    for d in range(reuters.n_docs):
        a, b = reuters.doc_ptr[d], reuters.doc_ptr[d + 1]
        words = [reuters.vocab[w] for w, c in zip(reuters.word[a:b], reuters.count[a:b]) for _ in range(int(c))]
        mdl.add_doc(words)
    mdl.train(iters, workers=1)
    phi = np.array([mdl.get_topic_word_dist(k) for k in range(K)])
    tot = n = 0
    for doc in mdl.docs:
        w = np.asarray(doc.words)
        tot += np.log2(np.asarray(doc.get_topic_dist()) @ phi[:, w]).sum()
        n += len(w)
    theirs = tot / n
    assert n == 84010
    for smp, ll in ours.items():  # measured: sparse -9.877, hybrid -9.867, tomotopy -9.909
        assert abs(ll - theirs) / abs(theirs) < 0.01, (smp, ll, theirs)


def test_bow_from_tokens_drops_unknown_words():
    bow = bow_from_tokens([["a", "b", "a", "x"], []], ["a", "b"])
    assert bow.extra["unknown"] == 1
    np.testing.assert_array_equal(bow.doc_lengths, [3, 0])


def test_gzip_uci_subset_trains(kos_path, tmp_path):
    """A KOS subset (first 300 documents) written as UCI again and trained with the defaults (alpha = 0.1, no
    stopword list and no pruning for a UCI input: every token is kept)."""
    kos = read_uci(kos_path)
    sub = _subset(kos, 300)
    p = tmp_path / "docword.kos300.txt.gz"
    d = np.repeat(np.arange(300), np.diff(sub.doc_ptr)) + 1
    with gzip.open(p, "wt") as fh:
        fh.write(f"300\n{len(kos.vocab)}\n{len(sub.word)}\n")
        for a, b, c in zip(d, sub.word + 1, sub.count):
            fh.write(f"{a} {b} {c}\n")
    (tmp_path / "vocab.kos300.txt").write_text("\n".join(kos.vocab) + "\n")
    r = pipelines.run("lda", str(p), out=tmp_path / "kos", K=10, iterations=5, progress=False)
    assert r.params["alpha"] == 0.1 and r.params["sampler"] == "sparse" and r.params["format"] == "uci"
    assert r.params["stopwords"] == "none" and (r.params["min_df"], r.params["max_df"]) == (1, 1.0)
    assert r.counts["n_tokens"] == int(sub.count.sum())
    assert "bush" in LDAModel.load(tmp_path / "kos").vocab


def test_sharded_chain_equals_single_chain(reuters_path, tmp_path):
    """EZLDA V-B on CPU shards: local W per shard, summed after every iteration = the one-shard chain."""
    seen = []

    def check(it, state):
        state.check_invariants()
        seen.append(it)

    outs = {}
    for n in (1, 3):
        for smp in ("three_branch", "dense"):
            r = pipelines.run("lda", str(reuters_path), out=tmp_path / f"{smp}{n}", K=10, iterations=4, sampler=smp,
                              n_devices=n, progress=False, callback=check if n == 3 else None)
            assert r.n_workers == n
            outs[smp, n] = r
    assert seen == list(range(5)) * 2
    for smp in ("three_branch", "dense"):
        for f in ("topic_word.parquet", "doc_topic.parquet"):
            pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / f"{smp}1" / f),
                                          pd.read_parquet(tmp_path / f"{smp}3" / f))
        assert outs[smp, 1].params["llpt"] == pytest.approx(outs[smp, 3].params["llpt"], rel=1e-12)


def test_dense_sampler_panels_split_large_words(reuters):
    ch = build_chunks(reuters, 16, n_chunks=2)
    ptr, w0 = K_.word_panels(ch.word, 8, max_tokens=500)
    assert ptr[0] == 0 and ptr[-1] == ch.n_tokens and (np.diff(ptr) > 0).all()
    assert np.diff(ptr).max() <= 500
    for p in range(len(w0)):
        w = ch.word[ptr[p]:ptr[p + 1]]
        assert (w >= w0[p]).all() and (w < w0[p] + 8).all()
    top = ch.word_count[0]  # the most frequent word is dissected over several panels (chunks)
    assert (w0 == 0).sum() >= top // 500


# ----------------------------------------------------------------------------- hybrid dense/sparse W

def test_hybrid_pipeline_invariants_model_directory_and_errors(reuters_path, tmp_path):
    """sampler="hybrid": invariants after every iteration, the chain does not depend on the chunking, the
    model directory has the dense sampler's layout (W assembled from the sparse rows), clear errors."""
    seen = []

    def check(it, state):
        state.check_invariants()
        assert state.hybrid and state.W is None
        W = state.dense_w()
        assert W.sum() == 84010 and (W >= 0).all()
        np.testing.assert_array_equal(W.sum(0), state.nk)
        seen.append(it)

    r1 = pipelines.run("lda", str(reuters_path), out=tmp_path / "h3", K=16, iterations=5, sampler="hybrid", seed=2,
                       progress=False, callback=check, n_chunks=3)
    r2 = pipelines.run("lda", str(reuters_path), out=tmp_path / "h1", K=16, iterations=5, sampler="hybrid", seed=2,
                       progress=False)
    assert seen == list(range(6))
    for f in ("topic_word.parquet", "doc_topic.parquet", "vocab.parquet", "llpt.parquet"):
        a, b = pd.read_parquet(tmp_path / "h3" / f), pd.read_parquet(tmp_path / "h1" / f)
        if f == "llpt.parquet":
            np.testing.assert_allclose(a["llpt"], b["llpt"], rtol=1e-12)
        else:
            pd.testing.assert_frame_equal(a, b)
    assert r1.params["sampler"] == "hybrid" and r1.params["llpt"] == pytest.approx(r2.params["llpt"], rel=1e-12)
    m = LDAModel.load(tmp_path / "h1")
    assert m.W.sum() == 84010 and m.W.shape == (4258, 16)
    tw = pd.read_parquet(tmp_path / "h1" / "topic_word.parquet")
    assert list(tw.dtypes) == [np.int32, np.int32, np.int32] and (tw["count"] > 0).all()
    assert tw.equals(tw.sort_values(["word_id", "topic"], ignore_index=True))
    params = json.loads((tmp_path / "h1" / "params.json").read_text())
    sb = params["state_bytes"]  # K = 16 is small: the saving is in the per-word float tables (3 x V x K x 4 dense)
    assert sb["W"] + sb["tables"] < 3 * params["memory_bytes"]["dense_w"]
    th = m.transform([["pope", "church"]], iterations=5, sampler="hybrid")
    np.testing.assert_allclose(th.sum(1), 1.0)
    with pytest.raises(ValueError, match="n_devices > 1"):
        pipelines.run("lda", str(reuters_path), out=tmp_path / "x", K=16, iterations=1, sampler="hybrid",
                      n_devices=2, progress=False)
    ch = build_chunks(read_ldac(reuters_path), 16)
    st = GibbsState(ch, 16, 0.1, 0.1, w_layout="hybrid")
    with pytest.raises(ValueError, match="hybrid"):
        st.step(1, "sparse")
    with pytest.raises(ValueError, match="w_layout"):
        GibbsState(ch, 16, 0.1, 0.1, w_layout="sparse")


def test_hybrid_state_equals_dense_counts(reuters):
    """The hybrid rebuild gives the dense W (same topics), rows sorted with counts > 0 within capacity."""
    K = 12
    ch = build_chunks(reuters, K, n_chunks=2)
    h = GibbsState(ch, K, 0.1, 0.1, seed=4, w_layout="hybrid")
    d = GibbsState(ch, K, 0.1, 0.1, seed=4)
    np.testing.assert_array_equal(h.dense_w(), d.W)
    np.testing.assert_array_equal(h.nk, d.nk)
    np.testing.assert_array_equal(h.d_cnt, d.d_cnt)
    hw = h.hw
    for s in range(0, hw.w_nnz.shape[0], 97):
        a, n = hw.w_ptr[s], hw.w_nnz[s]
        assert n <= min(hw.w_ptr[s + 1] - a, K)
        assert (np.diff(hw.w_topic[a:a + n]) > 0).all() and (hw.w_cnt[a:a + n] > 0).all()
    np.testing.assert_array_equal(h.htables["inv"], 1.0 / (d.nk + d.vbeta))
    assert h.htables["rcum"][-1] == pytest.approx(h.htables["inv"].sum(), rel=1e-14)
    # Eq. 5 from the sparse rows (float64 phi) agrees with the dense float32 What tables
    assert h.llpt() == pytest.approx(d.llpt(), rel=1e-6)


def test_hybrid_memory_kos_k4096(kos_path):
    """KOS at K = 4096: the hybrid state's W bytes are a fraction of the dense V x K int32 matrix."""
    K = 4096
    ch = build_chunks(read_uci(kos_path), K)
    st = GibbsState(ch, K, 0.1, 0.01, seed=0, w_layout="hybrid")
    st.check_invariants()
    nb = st.nbytes()
    dense_w = ch.V * K * 4
    assert nb["W"] < 0.2 * dense_w, (nb, dense_w)
    assert nb["tables"] < 0.2 * 2 * dense_w  # What and qcum only for the dense words
    assert nb["W"] == st.hw.nbytes()["w"] == ch.n_dense * K * 4 + (ch.n_tokens - int(ch.word_count[:ch.n_dense].sum())
                                                                    ) * 8 + (ch.V - ch.n_dense) * 12 + 8


def test_hybrid_dense_ranges_come_from_the_words(reuters):
    """Chunks built for another K (a stale ``chunk_split``, as a benchmark that reuses the token order makes
    them) give the same hybrid chain as chunks built for this K: the dense-token ranges are found from the
    words, not from ``chunk_split``."""
    import dataclasses

    K = 40
    fresh = build_chunks(reuters, K, n_chunks=2)
    other = build_chunks(reuters, 12, n_chunks=2)
    stale = dataclasses.replace(other, K=K, n_dense=fresh.n_dense)
    assert fresh.n_dense > 0 and not np.array_equal(stale.chunk_split, fresh.chunk_split)
    a = GibbsState(fresh, K, 0.1, 0.05, seed=5, w_layout="hybrid")
    b = GibbsState(stale, K, 0.1, 0.05, seed=5, w_layout="hybrid")
    assert b._dense_ranges == a._dense_ranges
    for (lo, hi), c0, c1 in zip(b._dense_ranges, stale.chunk_ptr[:-1], stale.chunk_ptr[1:]):
        assert (stale.word[lo:hi] < stale.n_dense).all() and (stale.word[hi:c1] >= stale.n_dense).all()
        assert lo == c0
    for it in range(1, 4):
        a.step(it, "hybrid")
        b.step(it, "hybrid")
        np.testing.assert_array_equal(a.z, b.z, err_msg=f"iteration {it}")
    b.check_invariants()


@pytest.mark.parametrize("layout", ["dense", "hybrid"])
def test_state_likelihood_is_eq5(reuters, layout):
    """GibbsState's public likelihood (EZLDA Eq. 5) against the definition on dense counts: per token
    log2 sum_k (D[d][k] + alpha) / (L_d + K alpha) * (W[v][k] + beta) / (n_k + V beta).  The kernels use float32
    phi tables for dense rows, hence the tolerance; the sharded chain sums the same terms."""
    from cutext.stages.engines.lda_gibbs import ShardedGibbs

    K = 8
    ch = build_chunks(_subset(reuters, 40), K, n_chunks=2)
    st = GibbsState(ch, K, alpha=0.3, beta=0.05, seed=2, w_layout=layout)
    st.step(1, "hybrid" if layout == "hybrid" else "sparse")
    W = st.dense_w().astype(np.float64)
    D = np.zeros((ch.n_docs, K))
    dt = st.doc_topic_table()
    D[dt["doc_id"], dt["topic"]] = dt["count"]
    L = np.diff(ch.doc_ptr).astype(np.float64)
    theta = (D + st.alpha) / (L[:, None] + K * st.alpha)
    phi = (W + st.beta) / (W.sum(axis=0) + st.vbeta)
    want = np.log2((theta[st.doc] * phi[st.word]).sum(axis=1))
    terms = st.log2_likelihood_terms()
    assert terms.shape == (ch.n_tokens,) and terms.dtype == np.float64
    np.testing.assert_allclose(terms, want, rtol=1e-6)
    assert st.log_likelihood() == pytest.approx(float(terms.sum()), rel=1e-12)
    assert st.llpt() == pytest.approx(st.log_likelihood() / ch.n_tokens, rel=1e-12)
    if layout == "dense":
        sh = ShardedGibbs(ch, K, 0.3, 0.05, seed=2, devices=[None, None])
        sh.step(1, "sparse")
        assert sh.log_likelihood() == pytest.approx(st.log_likelihood(), rel=1e-12)
        assert sh.llpt() == pytest.approx(st.llpt(), rel=1e-12)


# ----------------------------------------------------------------------------- the corpus front end

def _two_topic_lines(path, n_docs=60, seed=3):
    """A text corpus of two vocabularies (one document a line), generated from a seed."""
    rng = np.random.default_rng(seed)
    topics = [[f"alpha{i}" for i in range(12)], [f"beta{i}" for i in range(12)]]
    lines = [" ".join(rng.choice(topics[d % 2], size=int(rng.integers(5, 15)))) for d in range(n_docs)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return lines


@pytest.mark.slow
def test_text_corpus_runs_on_the_client_and_equals_the_local_run(tmp_path):
    """``pipelines.run("lda", <text>, client=c)``: the front end's tasks run on the client's workers,
    then one sampling shard per worker; the model is the one trained without a client (draws equal,
    the LLPT summed over two shards equal to rounding; tests/pipelines/test_lda_client.py compares with two shards)."""
    distributed = pytest.importorskip("distributed")
    src = tmp_path / "two.txt"
    lines = _two_topic_lines(src)
    kw = dict(K=2, iterations=5, format="lines", backend="cpu", progress=False, seed=1, blocksize=256)
    local = pipelines.run("lda", str(src), out=str(tmp_path / "local"), **kw)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        with distributed.get_task_stream(client=client) as ts:
            remote = pipelines.run("lda", str(src), out=str(tmp_path / "remote"), client=client, **kw)
    keys = [str(t["key"]) for t in ts.data]
    assert any("tokenize_partition" in k for k in keys), keys[:10]
    assert any("encode_partition" in k for k in keys) and any("count_partition" in k for k in keys)
    workers = {t["worker"] for t in ts.data}
    assert len(workers) == 2, workers  # both workers of the cluster ran tasks (blocksize: several pieces)
    params = json.loads((tmp_path / "remote" / "params.json").read_text())
    assert params["front_end"]["scheduler"] == "client" and params["front_end"]["n_workers"] == 2
    a, b = LDAModel.load(local.path), LDAModel.load(remote.path)
    assert a.vocab == b.vocab and len(a.documents) == len(lines)
    np.testing.assert_array_equal(a.W, b.W)
    pd.testing.assert_frame_equal(a.documents, b.documents)
    pd.testing.assert_frame_equal(a.doc_topic, b.doc_topic)
    np.testing.assert_allclose(a.llpt["llpt"].to_numpy(), b.llpt["llpt"].to_numpy(), rtol=1e-12)
    assert remote.counts == {**local.counts, "n_chunks": 2}  # one chunk per worker


def test_bow_from_corpus_counts_every_token(tmp_path):
    """The front end's bag of words equals counting the tokenizer's output by hand."""
    from collections import Counter

    from cutext.stages.engines.lda_chunk import bow_from_corpus
    from cutext.stages.text.tokenize import TokenizerConfig, tokenize_texts

    src = tmp_path / "two.txt"
    lines = _two_topic_lines(src, n_docs=23, seed=9)
    cfg = TokenizerConfig.make()
    bow = bow_from_corpus(str(src), tokenizer=cfg, format="lines", backend="cpu", blocksize=200)
    assert bow.vocab == sorted(bow.vocab) and bow.n_docs == len(lines)
    for d, toks in enumerate(tokenize_texts(lines, cfg)):
        a, b = bow.doc_ptr[d], bow.doc_ptr[d + 1]
        got = {bow.vocab[w]: int(c) for w, c in zip(bow.word[a:b], bow.count[a:b])}
        assert got == dict(Counter(toks)), d
        assert list(bow.word[a:b]) == sorted(bow.word[a:b])
