"""Stream clustering (Szasz and Samet): reference == brute force == ELLPACK twin == micro-batches == resumed runs."""
from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from cutext import pipelines
from cutext.kernels import cluster_ref, ellpack
from cutext.pipelines import datasets
from cutext.pipelines.cluster import nmi, purity, stream_order
from cutext.stages.engines.streamcluster import StreamClusterer, StreamVectorizer
from cutext.stages.readers.base import CorpusError
from cutext.stages.text.termvec import TermVectors, term_vectors
from cutext.stages.text.tokenize import TokenizerConfig, tokenize_texts

K = 35
N_SUB = 1500


@pytest.fixture(scope="module")
def news(shared_data):
    docs = datasets.load_20newsgroups(shared_data / "corpora" / "20news-bydate.tar.gz")
    # a fixed, shuffled subset (all groups mixed, as a live feed would be)
    rng = np.random.default_rng(20)
    sel = np.sort(rng.choice(len(docs), N_SUB, replace=False))
    return docs.iloc[sel].reset_index(drop=True)


@pytest.fixture(scope="module")
def news_tv(news):
    return StreamVectorizer(K).transform(news["text"].tolist())


def _run(tv, threshold, **kw):
    sc = StreamClusterer(threshold, K, **kw)
    return sc, sc.partial_fit(tv)


def _same(a, b):
    np.testing.assert_array_equal(a["cluster_id"].to_numpy(), b["cluster_id"].to_numpy())
    np.testing.assert_array_equal(a["new_cluster"].to_numpy(), b["new_cluster"].to_numpy())
    np.testing.assert_array_equal(a["similarity"].to_numpy(), b["similarity"].to_numpy())  # bit for bit


def _same_state(s1, s2):
    n = s1.n
    assert n == s2.n
    for name in ("idx", "w", "length", "norm", "size"):
        np.testing.assert_array_equal(getattr(s1, name)[:n], getattr(s2, name)[:n], err_msg=name)


# ----------------------------------------------------------------------------- term vectors

def test_term_vectors_are_tficf_top_k(news):
    texts = news["text"].tolist()[:200]
    cfg = TokenizerConfig.make(stopwords="lucene")
    vec = StreamVectorizer(K, tokenizer=cfg)
    tv = vec.transform(texts)
    tv.validate()
    toks = tokenize_texts(texts, cfg)
    # stream IDF by hand: df over documents 0..j, N = j + 1, w = ln(1 + tf) ln(1 + N / df)
    seen: Counter = Counter()
    for j, ts in enumerate(toks):
        tf = Counter(ts)
        seen.update(tf.keys())
        w = {t: math.log1p(c) * math.log1p((j + 1) / seen[t]) for t, c in tf.items()}
        top = sorted(w.items(), key=lambda x: (-x[1], vec.ids[x[0]]))[:K]
        norm = math.sqrt(sum(x * x for _, x in top))
        want = sorted((vec.ids[t], x / norm) for t, x in top if x > 0)
        L = tv.length[j]
        assert L == len(want)
        assert tv.idx[j, :L].tolist() == [i for i, _ in want]
        np.testing.assert_allclose(tv.w[j, :L], [x for _, x in want], rtol=1e-12)
        assert abs(tv.norm[j] - norm) <= 1e-12 * norm


def test_term_vectors_fixed_idf_and_tfidf():
    # doc 0: a a b ; doc 1: b c ; reference df: a=1, b=2, c=0 (unknown), N = 4
    tv = term_vectors([0, 0, 1, 1], [1, 2, 2, 3], [2, 1, 1, 1], 2, 5, weighting="tfidf",
                      df=np.array([0, 1, 2, 0]), n_ref=4)
    wa, wb = 2 * math.log(4), math.log(2)
    n0 = math.hypot(wa, wb)
    assert tv.length.tolist() == [2, 1]
    np.testing.assert_allclose(tv.w[0, :2], [wa / n0, wb / n0], rtol=1e-14)
    assert tv.idx[1, 0] == 2 and tv.w[1, 0] == 1.0  # term 3 has no reference df: dropped
    assert tv.idx[1, 1] == -1 and tv.w[1, 1] == 0.0
    with pytest.raises(ValueError, match="top_k"):
        term_vectors([0], [1], [1], 1, 0, df=np.array([0, 1]), n_ref=1)


# ----------------------------------------------------------------------------- the rules

def test_update_rule_section_4_1(news_tv):
    """merge_update == de-normalize, add, keep top K (ties: smaller id), re-normalize, sort by id."""
    tv = news_tv
    rng = np.random.default_rng(1)
    out_i = np.empty(K, np.int32)
    out_w = np.empty(K)
    scratch = (np.empty(2 * K, np.int32), np.empty(2 * K), np.empty(2 * K, np.int64))
    for _ in range(50):
        a, b = rng.choice(len(tv), 2, replace=False)
        raw: dict = {}
        for j in (a, b):
            for t, x in zip(tv.idx[j, :tv.length[j]], tv.w[j, :tv.length[j]]):
                raw[int(t)] = raw.get(int(t), 0.0) + x * tv.norm[j]
        top = sorted(raw.items(), key=lambda x: (-x[1], x[0]))[:K]
        norm = math.sqrt(sum(x * x for _, x in sorted(top)))
        n, nn = cluster_ref.merge_update(tv.idx[a], tv.w[a], tv.length[a], tv.norm[a], tv.idx[b], tv.w[b],
                                         tv.length[b], tv.norm[b], K, out_i, out_w, *scratch)
        assert out_i[:n].tolist() == sorted(t for t, _ in top)
        np.testing.assert_allclose(out_w[:n], [x / norm for _, x in sorted(top)], rtol=1e-12)
        assert abs(nn - norm) <= 1e-12 * norm
        assert (out_i[n:] == -1).all() and (out_w[n:] == 0).all()


def test_similarity_is_cosine(news_tv):
    import scipy.sparse as sp

    tv = news_tv.take(slice(0, 300))
    rows = np.repeat(np.arange(len(tv)), K)
    mask = tv.idx.ravel() >= 0
    m = sp.csr_matrix((tv.w.ravel()[mask], (rows[mask], tv.idx.ravel()[mask])))
    dense = (m @ m.T).toarray()
    for a in range(0, 300, 7):
        for b in range(0, 300, 11):
            s = cluster_ref.dot_merge(tv.idx[a], tv.w[a], tv.length[a], tv.idx[b], tv.w[b], tv.length[b])
            assert abs(s - dense[a, b]) <= 1e-12


# ----------------------------------------------------------------------------- engines agree

@pytest.mark.parametrize("threshold", [0.3, 0.6])
def test_reference_equals_brute_force(news_tv, threshold):
    s1, a1 = _run(news_tv, threshold)
    s2, a2 = _run(news_tv, threshold, method="brute")
    _same(a1, a2)
    _same_state(s1.state, s2.state)
    assert 1 < s1.n_clusters < len(news_tv)
    assert (a1["cluster_id"] >= 0).all()


@pytest.mark.parametrize("threshold,shards", [(0.3, 1), (0.6, 3)])
def test_ellpack_twin_equals_reference(news_tv, threshold, shards):
    tv = news_tv.take(slice(0, 700))
    s1, a1 = _run(tv, threshold)
    s2, a2 = _run(tv, threshold, method="ellpack", n_shards=shards)
    _same(a1, a2)
    _same_state(s1.state, s2.state)
    # the device matrix (here: host arrays) holds exactly the host rows; capacity doubled past 256 rows
    mats = s2.engine.matrix()
    S = len(mats)
    for s, (ei, ew, stride, n_rows) in enumerate(mats):
        g = np.arange(s, s2.n_clusters, S)
        assert n_rows == len(g)
        np.testing.assert_array_equal(ei.reshape(K, stride)[:, :n_rows].T, s2.state.idx[g])
        np.testing.assert_array_equal(ew.reshape(K, stride)[:, :n_rows].T, s2.state.w[g])
    assert all(sh.stride >= sh.n_rows for sh in s2.engine.shards)
    if S == 1:
        assert s2.n_clusters > 2 * ellpack.BLOCK and s2.engine.shards[0].stride >= 2 * ellpack.BLOCK


@pytest.mark.parametrize("batch,candidates", [(7, False), (64, False), (7, True), (64, True)])
def test_micro_batch_equals_sequential(news, batch, candidates):
    # bursty order (grouped by newsgroup): documents of a batch often pick the same cluster,
    # which exercises the recompute-touched-clusters and the restart paths
    texts = news.sort_values(["group", "source_id"])["text"].tolist()[:600]
    tv = StreamVectorizer(K).transform(texts)
    s1, a1 = _run(tv, 0.3)
    s2, a2 = _run(tv, 0.3, method="ellpack", batch_size=batch, candidates=candidates)
    _same(a1, a2)
    _same_state(s1.state, s2.state)
    assert s2.engine.restarts > 0
    assert s2.engine.kernel_calls < len(tv)
    assert (s2.engine.candidate_batches > 0) == candidates and (s2.engine.all_rows_batches > 0) != candidates


# ----------------------------------------------------------------------------- the candidate pass

@pytest.fixture(scope="module")
def reuters_tv(shared_data):
    docs = datasets.load_reuters21578(shared_data / "corpora" / "reuters21578.tar.gz").iloc[:900]
    return StreamVectorizer(K).transform(docs["text"].tolist())


def _index_holds_every_cluster_term(engine):
    """Every (term, cluster) of the current rows has an entry on the cluster's shard; device copy == mirror."""
    st = engine.state
    S = len(engine.shards)
    engine.sync()
    for s, sh in enumerate(engine.shards):
        ix = sh.index
        np.testing.assert_array_equal(ix.d_pool, ix.pool)
        np.testing.assert_array_equal(ix.d_off[:len(ix.t_off)], ix.t_off)
        np.testing.assert_array_equal(ix.d_len[:len(ix.t_len)], ix.t_len)
        lists = ix.lists()
        n_stale = 0
        for t, rows in lists.items():
            assert (rows >= 0).all() and (rows < sh.n_rows).all()
            for r in rows:
                n_stale += not ref_contains(st, r * S + s, t)
        for g in range(s, st.n, S):
            for t in st.idx[g, :st.length[g]]:
                assert g // S in lists[int(t)], (g, t)
    return n_stale


def ref_contains(st, c, t):
    return t in st.idx[c, :st.length[c]]


@pytest.mark.parametrize("corpus,threshold,shards,batch", [
    ("news", 0.3, 1, 1), ("news", 0.6, 3, 1), ("reuters", 0.3, 3, 1), ("reuters", 0.6, 1, 1),
    ("news", 0.3, 3, 16), ("reuters", 0.6, 1, 16)])
def test_candidate_pass_equals_reference_and_all_rows(news_tv, reuters_tv, corpus, threshold, shards, batch):
    """The candidate pass of the ELLPACK twin == every row of the twin == the CPU reference, bit for bit."""
    tv = (news_tv if corpus == "news" else reuters_tv).take(slice(0, 700))
    s1, a1 = _run(tv, threshold)
    s2, a2 = _run(tv, threshold, method="ellpack", n_shards=shards, batch_size=batch, candidates=True)
    s3, a3 = _run(tv, threshold, method="ellpack", n_shards=shards, batch_size=batch, candidates=False)
    _same(a1, a2)
    _same(a1, a3)
    _same_state(s1.state, s2.state)
    e = s2.engine
    assert e.candidate_batches > 0 and e.all_rows_batches == 0
    assert s3.engine.candidate_batches == 0 and not s3.engine.indexed
    # the device matrix == the host rows; the index holds every term of every cluster, plus stale entries
    for s, (ei, _ew, stride, n_rows) in enumerate(e.matrix()):
        g = np.arange(s, s2.n_clusters, shards)
        np.testing.assert_array_equal(ei.reshape(K, stride)[:, :n_rows].T, s2.state.idx[g])
    n_stale = _index_holds_every_cluster_term(e)
    assert n_stale > 0 or threshold == 0.6
    # the same entries as the reference's inverted index (Alg. 1): per term, the same clusters
    ref_plen = s1.engine.plen
    total = np.zeros(len(ref_plen), np.int64)
    for sh in e.shards:
        n = min(len(sh.index.t_len), len(total))
        total[:n] += sh.index.t_len[:n]
    np.testing.assert_array_equal(total, ref_plen[:len(total)])
    assert sum(sh.index.partial_uploads for sh in e.shards) > 0  # only the changes, most of the time


def test_candidate_pass_auto_switches_and_stays_exact(news_tv, monkeypatch):
    """"auto" mixes both passes within one stream of micro-batches (the index is kept while the all-rows pass
    runs); with batches of one document it always takes the all-rows pass (measured: never slower) and
    keeps no index."""
    from cutext.stages.engines import streamcluster

    monkeypatch.setattr(streamcluster, "AUTO_MIN_CLUSTERS", 300)
    monkeypatch.setattr(streamcluster, "AUTO_WALK_FACTOR", 1)
    tv = news_tv.take(slice(0, 900))
    _, a1 = _run(tv, 0.3)
    for batch in (1, 8):
        s2, a2 = _run(tv, 0.3, method="ellpack", batch_size=batch, n_shards=2)
        _same(a1, a2)
        e = s2.engine
        assert e.all_rows_batches > 0
        assert (e.candidate_batches > 0) == (batch > 1)
        if batch > 1:
            _index_holds_every_cluster_term(e)
        else:  # "auto" never takes the candidate pass for one document: no index is kept
            assert not e.indexed and all(sh.index is None for sh in e.shards)
    with pytest.raises(ValueError, match="candidates"):
        StreamClusterer(0.3, K, method="ellpack", candidates="yes")


def test_candidate_kernel_twin(news_tv):
    """candidate_best: candidates = rows sharing a term (+ stale entries), best = ellpack_best's when > 0."""
    tv = news_tv
    n_rows = 500
    ei, ew = ellpack.to_ellpack(tv.idx, tv.w, n_rows, K)
    stride = len(ei) // K
    ix = ellpack.PostingIndex(np, n_terms=4, pool_capacity=4)
    for r in range(n_rows):
        ix.append(tv.idx[r, :tv.length[r]], np.full(tv.length[r], r))
    docs = tv.take(np.r_[3, 600:620])
    scores = ellpack.ellpack_scores(ei, ew, stride, n_rows, K, docs.idx, docs.w, docs.length)
    full = ellpack.ellpack_best(ei, ew, stride, n_rows, K, docs.idx, docs.w, docs.length)
    best, cands = ellpack.candidate_best(ei, ew, stride, n_rows, K, docs.idx, docs.w, docs.length, ix,
                                         return_candidates=True)
    for b in range(len(docs)):
        np.testing.assert_array_equal(cands[b], np.flatnonzero(scores[b] > 0))  # no stale entry here
        if full[b, 0] > 0:
            np.testing.assert_array_equal(best[b], full[b])
        else:
            assert best[b].tolist() == [-1.0, -1.0]
    assert best[0, 1] == 3.0
    walk = ix.walk(docs.idx, docs.length)
    assert (walk >= [len(c) for c in cands]).all() and walk.sum() > len(docs)
    np.testing.assert_array_equal(ellpack.candidate_best(ei, ew, stride, n_rows, K, docs.idx, docs.w, docs.length,
                                                         ix, walk=walk), best)
    assert not ix.seen(len(docs), stride).any()
    with pytest.raises(ValueError, match="update buffer"):
        ellpack.candidate_best(ei, ew, stride, n_rows, K, docs.idx, docs.w, docs.length, ix, upd_row=1,
                               upd_idx=tv.idx[0], upd_w=tv.w[0])
    with pytest.raises(ValueError, match=">= 0"):
        ix.append(np.array([-1]), np.array([0]))


def test_kernel_twin_blocks_and_scores(news_tv):
    tv = news_tv
    n_rows = 700
    ei, ew = ellpack.to_ellpack(tv.idx, tv.w, n_rows, K)
    stride = len(ei) // K
    docs = tv.take(slice(n_rows, n_rows + 5))
    scores = ellpack.ellpack_scores(ei, ew, stride, n_rows, K, docs.idx, docs.w, docs.length)
    best, (bsim, bid) = ellpack.ellpack_best(ei, ew, stride, n_rows, K, docs.idx, docs.w, docs.length,
                                             return_blocks=True)
    for b in range(5):
        for r in range(0, n_rows, 37):
            assert scores[b, r] == cluster_ref.dot_merge(tv.idx[r], tv.w[r], tv.length[r], docs.idx[b], docs.w[b],
                                                         docs.length[b])
        assert best[b, 0] == scores[b].max() and best[b, 1] == np.argmax(scores[b])  # first max = lowest id
        for k in range(bsim.shape[1]):
            blk = scores[b, k * ellpack.BLOCK:(k + 1) * ellpack.BLOCK]
            assert bsim[b, k] == blk.max() and bid[b, k] == k * ellpack.BLOCK + np.argmax(blk)
    # ties go to the lowest row: duplicate row 3 into row 650
    ellpack.ellpack_scatter(ei, ew, stride, K, np.array([650]), tv.idx[3:4], tv.w[3:4])
    d = tv.take(slice(3, 4))
    best = ellpack.ellpack_best(ei, ew, stride, n_rows, K, d.idx, d.w, d.length)
    assert best[0, 1] == 3.0
    # the update buffer writes its row before the similarities are computed (Alg. 3)
    best = ellpack.ellpack_best(ei, ew, stride, n_rows, K, tv.idx[800:801], tv.w[800:801], tv.length[800:801],
                                upd_row=5, upd_idx=tv.idx[800], upd_w=tv.w[800])
    assert best[0, 1] == 5.0 and abs(best[0, 0] - 1.0) < 1e-12
    with pytest.raises(ValueError):
        ellpack.ellpack_best(ei, ew, stride, n_rows, K, docs.idx, docs.w, docs.length, upd_row=1,
                             upd_idx=tv.idx[0], upd_w=tv.w[0])


# ----------------------------------------------------------------------------- live feed

@pytest.mark.parametrize("resume_method,candidates", [("reference", "auto"), ("ellpack", False), ("ellpack", True)])
def test_save_and_resume_equals_one_run(news, tmp_path, resume_method, candidates):
    texts = news["text"].tolist()[:900]
    one = StreamClusterer(0.3, K)
    whole = pd.concat([one.partial_fit(texts[a:a + 250]) for a in range(0, 900, 250)], ignore_index=True)
    first = StreamClusterer(0.3, K)
    part1 = first.partial_fit(texts[:400])
    first.save(tmp_path / "state")
    again = StreamClusterer.load(tmp_path / "state", method=resume_method, batch_size=16, candidates=candidates)
    assert again.n_docs == 400 and again.n_clusters == first.n_clusters
    if candidates is True:  # the index was rebuilt from the saved clusters
        assert again.engine.shards[0].index.n_entries == int(again.state.length[:again.n_clusters].sum())
    part2 = again.partial_fit(pd.DataFrame({"text": texts[400:]}))
    _same(whole, pd.concat([part1, part2], ignore_index=True))
    assert part2["position"].tolist() == list(range(400, 900))
    _same_state(one.state, again.state)
    if candidates is True:
        assert again.engine.candidate_batches > 0
        _index_holds_every_cluster_term(again.engine)
    assert one.vectorizer.terms == again.vectorizer.terms
    np.testing.assert_array_equal(one.vectorizer.df, again.vectorizer.df)


def test_clusterer_input_errors(tmp_path):
    with pytest.raises(ValueError, match="threshold"):
        StreamClusterer(1.5)
    with pytest.raises(ValueError, match="top_k"):
        StreamClusterer(0.5, 0)
    with pytest.raises(ValueError, match="text"):
        StreamClusterer(0.5).partial_fit(pd.DataFrame({"body": ["x"]}))
    with pytest.raises(ValueError, match="top_k"):
        StreamClusterer(0.5, 10).partial_fit(TermVectors(np.full((1, 5), -1, np.int32), np.zeros((1, 5)),
                                                         np.zeros(1, np.int32), np.zeros(1)))
    with pytest.raises(FileNotFoundError):
        StreamClusterer.load(tmp_path)
    sc = StreamClusterer(0.5, 5)
    a = sc.partial_fit(["", "the of and", "gpu clusters text"])  # no weighted term: no cluster
    assert a["cluster_id"].tolist() == [-1, -1, 0] and sc.n_clusters == 1


# ----------------------------------------------------------------------------- quality

def test_nmi_and_purity_definitions():
    lab = np.array([0, 0, 1, 1, 2, 2])
    assert nmi(lab, [5, 5, 3, 3, 9, 9]) == pytest.approx(1.0)
    assert purity(lab, [5, 5, 3, 3, 9, 9]) == 1.0
    assert nmi([0, 0, 1, 1], [0, 1, 0, 1]) == pytest.approx(0.0, abs=1e-12)
    assert purity([0, 0, 1, 1], [0, 1, 0, 1]) == 0.5
    # I = ln 2 - 0.75 ln 3 + ... for this table, computed from the definition by hand
    L, C = [0, 0, 0, 1], [0, 0, 1, 1]
    pij = {(0, 0): .5, (0, 1): .25, (1, 1): .25}
    pl, pc = {0: .75, 1: .25}, {0: .5, 1: .5}
    mi = sum(p * math.log(p / (pl[i] * pc[j])) for (i, j), p in pij.items())
    h = lambda d: -sum(p * math.log(p) for p in d.values())  # noqa: E731
    assert nmi(L, C) == pytest.approx(mi / math.sqrt(h(pl) * h(pc)), rel=1e-12)


def test_clusters_follow_newsgroups(news, news_tv):
    """Clusters at T=0.1 carry label information: NMI and purity beat the same partition shuffled."""
    _, a = _run(news_tv, 0.1)
    lab = news["group"].to_numpy()
    rng = np.random.default_rng(0)
    shuffled = rng.permutation(a["cluster_id"].to_numpy())
    assert nmi(lab, a["cluster_id"]) > nmi(lab, shuffled) + 0.05
    assert purity(lab, a["cluster_id"]) > purity(lab, shuffled) + 0.1


# ----------------------------------------------------------------------------- pipeline

@pytest.fixture(scope="module")
def reuters_jsonl(shared_data, tmp_path_factory):
    docs = datasets.load_reuters21578(shared_data / "corpora" / "reuters21578.tar.gz").iloc[:1200]
    p = tmp_path_factory.mktemp("reuters") / "reuters.jsonl"
    with open(p, "w", encoding="utf-8") as fh:
        for sid, text, date in zip(docs["source_id"], docs["text"], docs["date"]):
            fh.write(json.dumps({"id": sid, "text": text, "date": date}) + "\n")
    return p, docs


@pytest.mark.slow
def test_pipeline_writes_assignments_clusters_and_state(reuters_jsonl, tmp_path):
    path, docs = reuters_jsonl
    out = tmp_path / "out"
    r = pipelines.run("cluster", str(path), out=out, threshold=0.3, top_k=K, order_by="date", backend="cpu",
                      progress=False)
    assert r.backend == "cpu" and r.counts["n_docs"] == len(docs)
    meta = json.loads((out / "cluster.json").read_text())
    assert meta["params"]["order_by"] == "date" and meta["counts"]["n_clusters"] == r.counts["n_clusters"]
    a = pd.read_parquet(out / "assignments.parquet")
    assert list(a.columns) == ["doc_id", "source_id", "position", "cluster_id", "similarity", "new_cluster"]
    assert a["position"].tolist() == list(range(len(docs)))
    dates = pd.to_datetime(docs["date"], format="%d-%b-%Y %H:%M:%S.%f", errors="coerce").to_numpy()[a["doc_id"]]
    valid = ~pd.isna(dates)
    assert (np.diff(dates[valid].astype("int64")) >= 0).all()  # stream in date order
    assert a["source_id"].tolist() == docs["source_id"].to_numpy()[a["doc_id"]].tolist()
    cl = pd.read_parquet(out / "clusters.parquet")
    assert len(cl) == r.counts["n_clusters"] == int(a["new_cluster"].sum())
    sizes = a.loc[a["cluster_id"] >= 0, "cluster_id"].value_counts().sort_index()
    np.testing.assert_array_equal(cl["size"].to_numpy(), sizes.to_numpy())
    assert (a.loc[~a["new_cluster"] & (a["cluster_id"] >= 0), "similarity"] > 0.3).all()
    assert all(isinstance(t, str) for t in cl["terms"].iloc[0])
    # the same stream through StreamClusterer with the ELLPACK twin in micro-batches: same result
    r2 = pipelines.run("cluster", str(path), out=tmp_path / "out2", threshold=0.3, top_k=K, order_by="date",
                       backend="cpu", method="ellpack", batch_size=16, progress=False)
    pd.testing.assert_frame_equal(a, pd.read_parquet(tmp_path / "out2" / "assignments.parquet"))
    assert r2.params["method"] == "ellpack"
    # ... and with the candidate pass
    r3 = pipelines.run("cluster", str(path), out=tmp_path / "out3", threshold=0.3, top_k=K, order_by="date",
                       backend="cpu", method="ellpack", candidates=True, progress=False)
    pd.testing.assert_frame_equal(a, pd.read_parquet(tmp_path / "out3" / "assignments.parquet"))
    meta3 = json.loads((tmp_path / "out3" / "cluster.json").read_text())
    assert r3.params["candidates"] is True
    assert meta3["candidate_batches"] == len(docs) and meta3["all_rows_batches"] == 0
    # the state resumes a live feed
    sc = StreamClusterer.load(out / "state")
    assert sc.n_docs == len(docs) and sc.n_clusters == len(cl)
    more = sc.partial_fit(["Oil prices rose sharply as OPEC cut output", ""])
    assert more["position"].tolist() == [len(docs), len(docs) + 1]


@pytest.mark.slow
def test_pipeline_idf_options_and_errors(reuters_jsonl, tmp_path):
    path, docs = reuters_jsonl
    res = {}
    for idf in (None, "stream", str(path)):
        r = pipelines.run("cluster", str(path), out=tmp_path / f"o{len(res)}", threshold=0.5, idf_from=idf,
                          backend="cpu", progress=False)
        res[idf] = pd.read_parquet(tmp_path / f"o{len(res)}" / "assignments.parquet")
        assert r.counts["n_clusters"] > 1
    # the corpus as its own reference == the default
    pd.testing.assert_frame_equal(res[None], res[str(path)])
    assert not res[None]["cluster_id"].equals(res["stream"]["cluster_id"])
    with pytest.raises(CorpusError, match="nosuch"):
        pipelines.run("cluster", str(path), out=tmp_path / "bad", order_by="nosuch", backend="cpu", progress=False)
    assert not (tmp_path / "bad").exists()
    with pytest.raises(ValueError, match="threshold"):
        pipelines.run("cluster", str(path), out=tmp_path / "bad", threshold=2, backend="cpu", progress=False)


@pytest.mark.parametrize("index_format", [2, 1])
def test_idf_from_a_bm25_index_of_either_format(tmp_path, data_dir, index_format):
    """idf_from=<a bm25 index>: N and df from the index (format 1's vocabulary; a segmented index's global
    statistics over its segments): an index of the clustered corpus under the clusterer's analysis gives the
    clusters and the reference of idf_from=None; an index of half of it another reference."""
    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()[:300]
    src, half = tmp_path / "cacm300.jsonl", tmp_path / "cacm150.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    half.write_text("\n".join(lines[:150]) + "\n", encoding="utf-8")
    kw = dict(text_column="contents", id_column="id", backend="cpu", progress=False)
    ix = {}
    for name, corpus in (("all", src), ("half", half)):
        ix[name] = pipelines.run("bm25", corpus, out=tmp_path / f"ix-{name}", stopwords="lucene", min_len=2,
                                 blocksize=40_000, scheduler="sync", index_format=index_format, **kw).path
    meta = json.loads((ix["all"] / "index.json").read_text())
    assert meta["index_format"] == index_format and (index_format == 1 or len(meta["segments"]) > 2)
    ref = pipelines.run("cluster", src, out=tmp_path / "self", threshold=0.3, **kw)
    got = {name: pipelines.run("cluster", src, out=tmp_path / f"c-{name}", threshold=0.3, idf_from=str(p), **kw)
           for name, p in ix.items()}
    assignments = {k: pd.read_parquet(r.path / "assignments.parquet") for k, r in [("self", ref), *got.items()]}
    pd.testing.assert_frame_equal(assignments["all"], assignments["self"])
    a, b, c = (StreamClusterer.load(r.path / "state", backend="cpu").vectorizer for r in (ref, got["all"], got["half"]))
    assert a.n_ref == b.n_ref == 300 and c.n_ref == 150
    np.testing.assert_array_equal(a.df, b.df)
    assert not np.array_equal(a.df, c.df)


def test_cli(reuters_jsonl, tmp_path, capsys):
    from cutext.pipelines.__main__ import main

    path, docs = reuters_jsonl
    rc = main(["cluster", str(path), "--out", str(tmp_path / "cli"), "--threshold", "0.4", "--backend", "cpu",
               "--no-progress", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["pipeline"] == "cluster" and out["counts"]["n_docs"] == len(docs)
    rc = main(["cluster", str(path), "--out", str(tmp_path / "cli2"), "--threshold", "0.4", "--backend", "cpu",
               "--method", "ellpack", "--batch-size", "8", "--candidates", "on", "--no-progress", "--json"])
    assert rc == 0
    out2 = json.loads(capsys.readouterr().out)
    assert out2["params"]["candidates"] is True and out2["counts"] == out["counts"]
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "cli" / "assignments.parquet"),
                                  pd.read_parquet(tmp_path / "cli2" / "assignments.parquet"))


def test_stream_order_parses_dates_and_is_stable():
    keys = ["02-MAR-1987 10:00:00.00", "26-FEB-1987 15:01:01.79", "", "26-FEB-1987 15:01:01.79"]
    assert stream_order(keys).tolist() == [1, 3, 0, 2]
    assert stream_order(np.array([3, 1, 2, 1])).tolist() == [1, 3, 2, 0]


# ----------------------------------------------------------------------------- the default threshold and its guidance

def test_suggest_threshold_on_a_real_sample(news, tmp_path):
    """A value in (0, 1) from 300 real posts that gives far fewer clusters than 0.99; seeded; bad values refused."""
    from cutext.pipelines.cluster import suggest_threshold

    sample = news.iloc[:300][["source_id", "text"]]
    t = suggest_threshold(sample, text_column="text", id_column="source_id", backend="cpu")
    assert 0.0 < t < 1.0
    assert t == suggest_threshold(sample["text"], backend="cpu")  # a Series of texts is the same corpus
    assert suggest_threshold(sample["text"], quantile=0.5, backend="cpu") > t  # a higher quantile, a higher T
    got = {}
    for T in (t, 0.99):
        r = pipelines.run("cluster", sample, out=tmp_path / f"t{T}", text_column="text", id_column="source_id",
                          threshold=T, backend="cpu", progress=False)
        got[T] = r.counts["n_clusters"]
    assert got[t] < 0.5 * got[0.99], got
    for kw, match in (({"quantile": 1.0}, "quantile"), ({"quantile": 0}, "quantile"), ({"n_sample": 1}, "n_sample"),
                      ({"top_k": 0}, "top_k")):
        with pytest.raises(ValueError, match=match):
            suggest_threshold(sample["text"], backend="cpu", **kw)
    with pytest.raises(ValueError, match="1 document"):
        suggest_threshold(pd.Series(["gpu clusters text", "the of and"]), backend="cpu")


def test_nearest_similarities_are_the_largest_other_cosine(news_tv):
    from cutext.stages.text.termvec import nearest_similarities

    tv = news_tv.take(slice(0, 120))
    dense = np.zeros((len(tv), int(tv.idx.max()) + 1))
    for i in range(len(tv)):
        L = tv.length[i]
        dense[i, tv.idx[i, :L]] = tv.w[i, :L]
    S = dense @ dense.T
    np.fill_diagonal(S, 0.0)
    np.testing.assert_allclose(nearest_similarities(tv), np.clip(S.max(1), 0, 1), rtol=1e-12, atol=1e-15)


def test_default_threshold_and_similarity_histogram(reuters_jsonl, tmp_path):
    """The default T is 0.05; cluster.json holds the histogram of the documents' best similarities."""
    from cutext.stages.engines.streamcluster import DEFAULT_THRESHOLD

    path, docs = reuters_jsonl
    r = pipelines.run("cluster", str(path), out=tmp_path / "o", backend="cpu", progress=False)
    assert r.params["threshold"] == DEFAULT_THRESHOLD == StreamClusterer().threshold == 0.05
    assert r.counts["n_clusters"] < 0.25 * len(docs)  # T = 0.6 leaves about one cluster a story
    meta = json.loads((tmp_path / "o" / "cluster.json").read_text())
    h = meta["similarity_histogram"]
    assert len(h["edges"]) == 21 and h["edges"][0] == 0.0 and h["edges"][-1] == 1.0
    a = pd.read_parquet(tmp_path / "o" / "assignments.parquet")
    sim = a.loc[a["cluster_id"] >= 0, "similarity"].to_numpy()
    assert sum(h["counts"]) == len(sim)
    assert h["counts"][0] == int((sim < 0.05).sum())  # a document at or below T started a cluster


def test_one_str_is_one_document():
    sc = StreamClusterer(0.3, 10, backend="cpu")
    a = sc.partial_fit("oil prices rose as opec cut output")
    assert len(a) == 1 and sc.n_docs == 1 and a["new_cluster"].tolist() == [True]
    b = sc.partial_fit("oil prices fell")
    assert b["position"].tolist() == [1] and b["cluster_id"].tolist() == [0]
    assert len(StreamVectorizer(10).transform("oil prices")) == 1  # not one vector per character
    with pytest.raises(TypeError, match="bytes"):
        sc.partial_fit(b"oil prices")


def test_ellpack_options_empty_devices_and_empty_idf_from_are_refused(data_dir, tmp_path):
    """``batch_size``, ``devices`` and ``candidates`` steer the ELLPACK engine: the reference and brute
    engines ignored them and now refuse them; ``devices=[]`` names no GPU; ``idf_from=""`` read the working
    directory as the IDF corpus."""
    src = data_dir / "cacm" / "cacm.json"
    kw = dict(backend="cpu", progress=False)
    for method in ("reference", "brute"):
        for bad in ({"batch_size": 8}, {"devices": [0]}, {"candidates": False}):
            with pytest.raises(ValueError, match=f"{next(iter(bad))}=.*option of the ELLPACK engine"):
                pipelines.run("cluster", src, out=tmp_path / "x", method=method, **bad, **kw)
    with pytest.raises(ValueError, match=r"devices=\[\] names no GPU"):
        pipelines.run("cluster", src, out=tmp_path / "x", method="ellpack", devices=[], **kw)
    with pytest.raises(ValueError, match="idf_from=''"):
        pipelines.run("cluster", src, out=tmp_path / "x", idf_from="", **kw)
    assert not (tmp_path / "x").exists()
    r = pipelines.run("cluster", src, out=tmp_path / "ok", method="ellpack", batch_size=8, **kw)
    assert r.params["batch_size"] == 8
