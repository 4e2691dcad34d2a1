"""BM25 pipeline on the CPU backend: scores against bm25s / rank_bm25, effectiveness, invariances."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cutext import pipelines
from cutext.stages.engines import bm25_index
from cutext.stages.engines import index_writer as bm25_build
from cutext.stages.text.count import count_partition, run_lengths
from cutext.stages.text.sort import term_divisions
from cutext.stages.text.tokenize import TokenizerConfig, tokenize_texts

from helpers import assert_same_index, cacm_topics, qrels_dict, read_index, scifact_topics

ANALYSIS = dict(stopwords="lucene", stemmer="porter")
# our variant -> the bm25s method with the same formula (bm25s "robertson" uses the RSJ idf)
BM25S_METHOD = {"lucene": "lucene", "robertson": "atire", "atire": "atire", "bm25l": "bm25l", "bm25+": "bm25+"}


def _corpus(data_dir, name):
    if name == "cacm":
        return data_dir / "cacm" / "cacm.json", {}, cacm_topics(data_dir)
    return data_dir / "scifact" / "corpus.jsonl.gz", {"text_column": ["title", "text"]}, scifact_topics(data_dir)


@pytest.fixture(scope="module")
def built(tmp_path_factory, data_dir):
    cache = {}

    def get(name, variant="lucene", k1=0.9, b=0.4, **kw):
        key = (name, variant, k1, b, tuple(sorted(kw.items())))
        if key not in cache:
            path, read_kw, topics = _corpus(data_dir, name)
            out = tmp_path_factory.mktemp(f"{name}-{variant.replace('+', 'p')}")
            r = pipelines.run("bm25", path, out=out / "index", variant=variant, k1=k1, b=b,
                              progress=False, **ANALYSIS, **read_kw, **kw)
            cache[key] = (r, pipelines.BM25Index.load(r.path), topics)
        return cache[key]

    return get


def _doc_tokens(index):
    """Tokens of every document of an index, re-tokenized from the bundled corpus in doc order."""
    from cutext.pipelines.datasets import load_jsonl

    src = index.meta["source"]
    if src.endswith("cacm.json"):
        df = load_jsonl(src, ("contents",), "id")
    else:
        df = load_jsonl(src, ("title", "text"), "_id")
    df = df.set_index("source_id").loc[list(index.source_ids)]
    return tokenize_texts(df["text"].tolist(), index.tokenizer)


@pytest.mark.slow
@pytest.mark.parametrize("corpus", ["cacm", "scifact"])
@pytest.mark.parametrize("variant", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_scores_equal_bm25s(built, corpus, variant):
    import bm25s

    r, index, topics = built(corpus, variant, k1=1.2, b=0.75)
    toks = _doc_tokens(index)
    assert sum(map(len, toks)) == r.counts["n_tokens"]
    ret = bm25s.BM25(method=BM25S_METHOD[variant], k1=1.2, b=0.75,
                     delta=index.meta["delta"] if variant in ("bm25l", "bm25+") else 0.5)
    ret.index(toks, show_progress=False)
    vocab = set(ret.vocab_dict)
    checked = 0
    for qid, q in list(topics.items())[:40]:
        qt = [t for t in tokenize_texts([q], index.tokenizer)[0] if t in vocab]
        if not qt:
            continue
        ours = index.get_scores(q).astype(np.float64)
        theirs = np.asarray(ret.get_scores(qt), dtype=np.float64)
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6 * np.abs(theirs).max(),
                                   err_msg=f"{corpus} {variant} query {qid}")
        checked += 1
    assert checked >= 30


# rank_bm25's BM25L multiplies its term score by tf once more, which is not Lv & Zhai's BM25L (nor
# bm25s's), so only BM25Plus shares our formula there; BM25Okapi's idf floor differs from all ours.
@pytest.mark.parametrize("variant,cls", [("bm25+", "BM25Plus")])
def test_scores_equal_rank_bm25(tmp_path, data_dir, variant, cls):
    import rank_bm25

    from cutext.pipelines.datasets import load_jsonl, write_jsonl

    docs = load_jsonl(data_dir / "cacm" / "cacm.json").iloc[:400]
    src = write_jsonl(docs, tmp_path / "c.jsonl", text_field="contents")
    r = pipelines.run("bm25", src, out=tmp_path / "idx", variant=variant, k1=1.5, b=0.75, progress=False)
    index = pipelines.BM25Index.load(r.path)
    toks = tokenize_texts(docs["text"].tolist(), index.tokenizer)
    delta = index.meta["delta"]
    peer = getattr(rank_bm25, cls)(toks, k1=1.5, b=0.75, delta=delta)
    for q in ["computer program algorithm", "matrix inversion numerical", "compiler syntax"]:
        qt = tokenize_texts([q], index.tokenizer)[0]
        np.testing.assert_allclose(index.get_scores(q), peer.get_scores(qt), rtol=1e-5)


def _evaluate(index, topics, qrels_path, metrics):
    from cutext.pipelines.evaluate import evaluate

    run = index.search(topics, k=1000)
    qrels = pd.DataFrame([(q, d, r) for q, dd in qrels_dict(qrels_path).items() for d, r in dd.items()],
                         columns=["query_id", "doc_id", "relevance"])
    return evaluate(run[["query_id", "source_id", "score"]], qrels, metrics=metrics)


def test_cacm_effectiveness_matches_anserini(built, data_dir):
    _, index, topics = built("cacm", "lucene", k1=0.9, b=0.4)
    m = _evaluate(index, topics, data_dir / "cacm" / "qrels.cacm.txt", ("map", "P@30"))
    assert abs(m["map"] - 0.3123) <= 0.01, m
    assert abs(m["P@30"] - 0.1942) <= 0.01, m


@pytest.mark.slow
def test_scifact_effectiveness_matches_anserini(built, data_dir):
    _, index, topics = built("scifact", "lucene", k1=0.9, b=0.4)
    m = _evaluate(index, topics, data_dir / "scifact" / "qrels.test.txt", ("ndcg@10",))
    assert abs(m["ndcg@10"] - 0.6789) <= 0.01, m


def test_search_is_topk_of_dense_scores(built):
    _, index, topics = built("cacm", "lucene", k1=0.9, b=0.4)
    qs = dict(list(topics.items())[:10])
    run = index.search(qs, k=7)
    for qid, q in qs.items():
        s = index.get_scores(q)
        order = np.lexsort((np.arange(len(s)), -s))
        want = [i for i in order[:7] if s[i] > 0]
        got = run[run.query_id == qid].sort_values("rank")
        assert got["doc_index"].tolist() == want
        np.testing.assert_allclose(got["score"].to_numpy(), s[want], rtol=1e-6)
        assert got["rank"].tolist() == list(range(1, len(want) + 1))


def test_search_rows_of_queries_short_of_k(built, monkeypatch):
    """Batches mixing queries that find fewer than k documents (a rare term; none) with ones that find k: each
    query's rows are its top documents by the dense scores, ranked 1..n, in query order."""
    _, index, topics = built("cacm", "lucene", k1=0.9, b=0.4)
    vocab = index.vocab.to_pylist()  # term id t + 1 (id 0: terms outside the vocabulary)
    rare = [t for t, d in zip(vocab, index.df[1:len(vocab) + 1]) if 1 <= d <= 3 and t.isalpha()][:6]
    assert len(rare) == 6
    texts = [q for _, q in list(topics.items())[:6]]
    qs = {f"q{i}": t for i, t in enumerate([texts[0], rare[0], texts[1], "zzzqqqxxunknownterm", rare[1], texts[2],
                                            " ".join(rare[2:4]), texts[3], rare[4], texts[4], rare[5], texts[5]])}
    run = index.search(qs, k=7, batch_size=5)
    assert run["query_id"].tolist() == sorted(run["query_id"].tolist(), key=lambda q: int(q[1:]))
    short = 0
    for qid, q in qs.items():
        s = index.get_scores(q)
        order = np.lexsort((np.arange(len(s)), -s))
        want = [i for i in order[:7] if s[i] > 0]
        got = run[run.query_id == qid]
        short += len(want) < 7
        assert got["doc_index"].tolist() == want, qid
        assert got["rank"].tolist() == list(range(1, len(want) + 1)), qid
        np.testing.assert_allclose(got["score"].to_numpy(), s[want], rtol=1e-6)
    assert short >= 6
    monkeypatch.setattr(bm25_index, "RESULT_ROWS_FIRST", 4)  # the columns grow batch after batch: the same frame
    pd.testing.assert_frame_equal(index.search(qs, k=7, batch_size=5), run)


def test_search_edge_cases(built):
    _, index, _ = built("cacm", "lucene", k1=0.9, b=0.4)
    assert len(index.search(["zzzqqqxxunknownterm"], k=5)) == 0
    assert len(index.search(["the of and"], k=5)) == 0  # stopwords only
    with pytest.raises(ValueError):
        index.search(["x"], k=0)
    run = index.search(pd.DataFrame({"query_id": ["a", "b"], "query": ["parallel", "sorting"]}), k=3)
    assert set(run.query_id) == {"a", "b"}


@pytest.mark.parametrize("index_format", [2, 1])
def test_index_json_and_layout(built, index_format):
    """index.json and the files of the default (segmented) index and of format 1; the statistics they hold."""
    r, index, _ = built("cacm", "lucene", k1=0.9, b=0.4, **({} if index_format == 2 else {"index_format": 1}))
    meta = json.loads((r.path / "index.json").read_text())
    for key in ("N", "avgdl", "variant", "k1", "b", "tokenizer", "backend", "version", "counts", "timings"):
        assert key in meta
    assert meta["index_format"] == index_format
    if index_format == 2:
        # the commit's vocabulary is kept beside its segments, but for one segment: its own is the commit's
        kept = ["terms.arrow"] if len(meta["segments"]) > 1 else []
        assert sorted(p.name for p in r.path.iterdir()) == ["index.json", "segments", *kept]
        assert meta["segments"] == sorted(p.name for p in (r.path / "segments").iterdir())
        assert len(meta["segments"]) == r.counts["partitions"] == meta["next_segment"]
    else:
        assert sorted(p.name for p in r.path.iterdir()) == ["documents", "index.json", "postings", "vocab.parquet"]
    assert meta["N"] == 3204 == r.counts["n_docs"]
    assert meta["backend"] == r.backend == "cpu" and meta["scheduler"] == r.scheduler == "threads"
    assert meta["tokenizer"]["stemmer"] == "porter"
    ix = read_index(r.path)
    assert ix["postings"]["tf"].sum() == r.counts["n_tokens"] == ix["docs"]["length"].sum()
    np.testing.assert_allclose(meta["avgdl"], ix["docs"]["length"].mean())
    # term-major order (format 1: on disk, across its files; format 2: the segments merged)
    p = ix["postings"]
    key = p["term_id"].to_numpy().astype(np.int64) * (meta["N"] + 1) + p["doc_id"].to_numpy()
    assert np.all(np.diff(key) > 0)
    # vocabulary: sorted terms, ids 1..V, df = postings per term
    v = ix["vocab"]
    assert v["term"].tolist() == sorted(v["term"].tolist(), key=lambda t: t.encode())
    np.testing.assert_array_equal(v["term_id"], np.arange(1, len(v) + 1))
    np.testing.assert_array_equal(np.bincount(p["term_id"], minlength=len(v) + 1)[1:], v["df"])


@pytest.mark.slow
@pytest.mark.parametrize("index_format", [2, 1])
def test_partitioning_does_not_change_the_index(tmp_path, data_dir, monkeypatch, index_format):
    """Many input partitions (format 2: a segment each; format 1: several postings files), threads or sync:
    the same index."""
    src = data_dir / "cacm" / "cacm.json"
    kw = dict(progress=False, index_format=index_format, **ANALYSIS)
    ref = pipelines.run("bm25", src, out=tmp_path / "one", **kw)
    monkeypatch.setattr(bm25_build, "POSTINGS_PER_FILE", 20_000)
    many = pipelines.run("bm25", src, out=tmp_path / "many", blocksize=200_000, scheduler="threads", **kw)
    assert many.counts["partitions"] > 5
    if index_format == 2:
        assert len(json.loads((many.path / "index.json").read_text())["segments"]) == many.counts["partitions"]
    else:
        assert len(list((many.path / "postings").glob("*.parquet"))) > 3
    assert_same_index(read_index(ref.path), read_index(many.path))


@pytest.mark.slow
def test_local_cluster_gives_the_same_index(tmp_path, data_dir):
    src = data_dir / "cacm" / "cacm.json"
    ref = pipelines.run("bm25", src, out=tmp_path / "one", progress=False)
    clu = pipelines.run("bm25", src, out=tmp_path / "clu", blocksize=500_000, scheduler="cluster",
                        n_workers=2, progress=False)
    assert clu.scheduler == "cluster" and clu.n_workers == 2
    assert_same_index(read_index(ref.path), read_index(clu.path))


def test_two_cpu_workers_build_the_one_worker_index_on_threads(tmp_path, data_dir):
    """``n_workers`` on the CPU below 256 MiB: threads of this process (no LocalCluster), and every file of
    the index the same bytes as a one-worker build's; the manifest differs only where it says so."""
    src = data_dir / "cacm" / "cacm.json"
    kw = dict(backend="cpu", blocksize=300_000, progress=False)
    one = pipelines.run("bm25", src, out=tmp_path / "one", n_workers=1, **kw)
    two = pipelines.run("bm25", src, out=tmp_path / "two", n_workers=2, **kw)
    assert (one.scheduler, one.n_workers) == ("threads", 1) and (two.scheduler, two.n_workers) == ("threads", 2)
    assert one.counts["partitions"] > 2
    files = sorted(p.relative_to(one.path) for p in one.path.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(two.path) for p in two.path.rglob("*") if p.is_file())
    for f in files:
        if f.name != "index.json":
            assert (one.path / f).read_bytes() == (two.path / f).read_bytes(), f
    manifests = [json.loads((r.path / "index.json").read_text()) for r in (one, two)]
    for m in manifests:
        for k in ("timings", "created", "n_workers", "checksum"):  # the last: of the manifest itself
            m.pop(k, None)
    assert manifests[0] == manifests[1]


def test_bad_parameters(tmp_path, data_dir):
    src = data_dir / "cacm" / "cacm.json"
    for kw in ({"variant": "bm99"}, {"k1": -1}, {"b": 1.5}, {"stemmer": "klingon"}, {"min_len": 0}):
        with pytest.raises(ValueError):
            pipelines.run("bm25", src, out=tmp_path / "x", progress=False, **kw)
    assert not (tmp_path / "x").exists()
    with pytest.raises(ValueError, match="unknown pipeline"):
        pipelines.run("nope", src)


# ----------------------------------------------------------------------------- stages

def test_tokenizer_rules():
    cfg = TokenizerConfig.make()
    got = tokenize_texts(["Hello, World! foo_bar 3.14 ÜBER-straße  naïve\tx²", "", "--"], cfg)
    assert got[0] == ["hello", "world", "foo_bar", "3", "14", "über", "straße", "naïve", "x²"]
    assert got[1] == [] and got[2] == []
    assert tokenize_texts(["3Σ ΟΔΟΣ οδός"], cfg)[0] == ["3σ", "οδοσ", "οδόσ"]  # final sigma folded
    cfg = TokenizerConfig.make(stopwords="lucene", stemmer="porter", min_len=2, max_len=9)
    assert tokenize_texts(["The computers are running a x verylongtoken"], cfg)[0] == ["comput", "run"]
    cfg = TokenizerConfig.make(lowercase=False)
    assert tokenize_texts(["Mixed Case"], cfg)[0] == ["Mixed", "Case"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 40)), min_size=0, max_size=300))
def test_count_partition_matches_groupby(pairs):
    df = pd.DataFrame(pairs, columns=["doc_id", "term_id"]).astype({"doc_id": np.int64, "term_id": np.int32})
    got = count_partition(df)
    if not len(df):
        assert len(got) == 0
        return
    want = df.groupby(["term_id", "doc_id"]).size().rename("tf").reset_index()
    np.testing.assert_array_equal(got["term_id"], want["term_id"])
    np.testing.assert_array_equal(got["doc_id"], want["doc_id"])
    np.testing.assert_array_equal(got["tf"], want["tf"])
    dl = df.groupby("doc_id").size()
    np.testing.assert_array_equal(got["dl"], dl.loc[got["doc_id"]].to_numpy())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 50), max_size=200))
def test_run_lengths(keys):
    k = np.sort(np.asarray(keys, dtype=np.int64))
    u, c = run_lengths(k)
    wu, wc = np.unique(k, return_counts=True)
    np.testing.assert_array_equal(u, wu)
    np.testing.assert_array_equal(c, wc)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=2, max_size=60), st.integers(1, 12))
def test_term_divisions(df_list, nparts):
    df = np.asarray([0] + df_list, dtype=np.int64)
    cuts = term_divisions(df, nparts)
    assert all(a < b for a, b in zip(cuts, cuts[1:])) or len(set(cuts)) == 1
    nz = np.flatnonzero(df)
    if len(nz):
        assert cuts[0] == nz[0] and cuts[-1] == nz[-1]
        assert len(cuts) - 1 <= nparts


@pytest.mark.parametrize("k", [1, 3, 10, 1000])
def test_topk_rows_matches_full_sort(k):
    import scipy.sparse as sp

    from cutext.stages.engines.search import topk_rows

    M = sp.random(200, 3000, density=0.05, format="csr", random_state=k, dtype=np.float32)
    M.data = np.round(M.data * 5).astype(np.float32)  # many ties
    rows, cols, _, rank = topk_rows(M.indptr, M.indices, M.data, k)
    for q in range(M.shape[0]):
        s, e = M.indptr[q], M.indptr[q + 1]
        want = M.indices[s:e][np.lexsort((M.indices[s:e], -M.data[s:e]))[:k]]
        np.testing.assert_array_equal(cols[rows == q], want)
        np.testing.assert_array_equal(rank[rows == q], np.arange(len(want)))


# ----------------------------------------------------------------------------- query engines

def _tiled_twin(index, Q, k, max_workspace):
    """The GPU engine's algorithm (tiles, radix-select order) through its numba twin, on the host index."""
    from cutext.kernels.search import search_tiled

    M = index.matrix
    return search_tiled(M.indptr.astype(np.int64), M.indices, M.data, index.n_docs, Q.indptr, Q.indices,
                        Q.data, k, max_workspace=max_workspace)


def _assert_same_topk(a, b, what):
    (da, sa, na), (db, sb, nb) = a, b
    np.testing.assert_array_equal(na, nb, err_msg=f"{what}: documents per query")
    np.testing.assert_array_equal(da, db, err_msg=f"{what}: doc ids")
    np.testing.assert_array_equal(sa, sb, err_msg=f"{what}: scores")


@pytest.mark.slow
@pytest.mark.parametrize("corpus", ["cacm", "scifact"])
@pytest.mark.parametrize("variant", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_engines_equal_sparse_product(built, corpus, variant):
    """CPU engine, the GPU engine's twin (one pass and many tiles) and the sparse product give the same
    top-k, scores bit for bit (float32 sums in the same term order), equal scores by the smaller doc id."""
    _, index, topics = built(corpus, variant, k1=1.2, b=0.75)
    Q = index.query_matrix(list(topics.values()))
    for k in (1, 10, 100):
        sparse = index.topk_arrays(Q, k, engine="sparse")
        _assert_same_topk(index.topk_arrays(Q, k, engine="cpu"), sparse, f"cpu k={k}")
        _assert_same_topk(index.topk_arrays(Q, k, engine="cpu", n_threads=1), sparse, f"cpu 1 thread k={k}")
        _assert_same_topk(_tiled_twin(index, Q, k, 1 << 30), sparse, f"tiled k={k}")
        # a workspace of 2 queries x 1024 documents per pass: many passes and tiles
        _assert_same_topk(_tiled_twin(index, Q, k, 2 * (8 * 1024 + 28 * k + 16)), sparse, f"tiles k={k}")
        doc, score, n = sparse
        for q in range(len(n)):  # the ties rule, checked on the result itself
            d, s = doc[q, :n[q]], score[q, :n[q]]
            assert np.all((s[1:] < s[:-1]) | ((s[1:] == s[:-1]) & (d[1:] > d[:-1])))


def test_search_result_columns_and_engines(built):
    _, index, topics = built("cacm", "lucene", k1=0.9, b=0.4)
    qs = dict(list(topics.items())[:20])
    runs = {e: index.search(qs, k=50, engine=e, batch_size=7) for e in ("auto", "cpu", "sparse")}
    run = runs["auto"]
    assert list(run.columns) == ["query_id", "doc_id", "source_id", "rank", "score", "doc_index"]
    assert run["doc_id"].dtype == np.int64 and run["doc_index"].dtype == np.int64
    np.testing.assert_array_equal(run["doc_id"], run["doc_index"])
    assert run["source_id"].tolist() == [index.source_ids[d] for d in run["doc_id"]]
    for e in ("cpu", "sparse"):
        pd.testing.assert_frame_equal(runs[e], run)
    for empty in (index.search(["zzzqqqxxunknownterm"], k=5), index.search([], k=5)):  # no row; no query
        assert len(empty) == 0 and empty.dtypes.to_dict() == run.dtypes.to_dict()


def test_search_engine_options_refused(built):
    _, index, _ = built("cacm", "lucene", k1=0.9, b=0.4)
    with pytest.raises(ValueError, match="engine must be one of"):
        index.search(["computer"], engine="fast")
    with pytest.raises(ValueError, match="engine='gpu' needs an index loaded with backend='gpu'"):
        index.search(["computer"], engine="gpu")
    with pytest.raises(ValueError, match="max_workspace is a setting of the GPU engine"):
        index.search(["computer"], max_workspace=1 << 30)
    with pytest.raises(ValueError, match="n_threads is a setting of the CPU engine"):
        index.search(["computer"], engine="sparse", n_threads=1)
    with pytest.raises(ValueError, match="n_threads must be"):
        index.search(["computer"], n_threads=0)
    with pytest.raises(ValueError, match="batch_size"):
        index.search(["computer"], batch_size=-3)


def test_cli_search_writes_source_ids(built, tmp_path, data_dir):
    """The TREC run of the CLI names documents by their source id (evaluation unchanged)."""
    from cutext.pipelines.__main__ import main
    from cutext.pipelines.trec import read_trec_run

    r, index, _ = built("cacm", "lucene", k1=0.9, b=0.4)
    out = tmp_path / "run.txt"
    assert main(["search", str(r.path), "--queries", str(data_dir / "cacm" / "topics.cacm.txt"), "--k", "20",
                 "--out", str(out)]) == 0
    run = read_trec_run(out)
    assert set(run["doc_id"]) <= set(map(str, index.source_ids)) and len(run) > 0


@pytest.mark.slow
def test_sharded_search_on_a_local_cluster_equals_one_index(built):
    """``load(client=...)`` of a format-1 index over 2 worker processes (documents cut into ranges; a
    segmented index is cut into runs of whole segments: test_sharded_search_of_a_segmented_index_equals_one_index):
    the same rows as the single index, every engine."""
    from distributed import Client, LocalCluster

    r, index, topics = built("cacm", "bm25+", k1=1.2, b=0.75, index_format=1)
    qs = dict(list(topics.items())[:30])
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        sharded = pipelines.BM25Index.load(r.path, backend="cpu", client=client)
        assert len(sharded.shards) == 2 and sharded.shards[0][0] == 0 and sharded.shards[-1][1] == index.n_docs
        assert sharded.shards[0][1] == sharded.shards[1][0]
        for engine in ("auto", "sparse"):
            pd.testing.assert_frame_equal(sharded.search(qs, k=25, engine=engine, batch_size=8), index.search(qs, k=25))
        # the batches went to each worker's long-lived engine (a dask actor), not as tasks (dask drops the "_")
        prefixes = client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
        assert "ShardEngine" in prefixes and "shard_topk" not in prefixes, prefixes
        q = next(iter(qs.values()))
        np.testing.assert_array_equal(sharded.get_scores(q), index.get_scores(q))
        with pytest.raises(ValueError, match="n_threads must be"):
            sharded.search(qs, n_threads=0)
        # batches are tokenized ahead on a thread of their own: a bad query of a later batch still names itself
        bad = dict(qs, broken="two \ud800")
        with pytest.raises(ValueError, match="query 'broken': .*surrogate"):
            sharded.search(bad, k=5, batch_size=8)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["a", "bb", "c", "zz", "é", "q", "", "x1", "ab", "b"]), max_size=40),
       st.integers(0, 3))
def test_term_hash_equals_encode_terms(terms, offset):
    """TermHash ids == encode_terms ids (pyarrow index_in), for string, large_string, chunked and sliced
    arrays; the empty string and prefixes of terms included."""
    import pyarrow as pa

    from cutext.kernels.termhash import TermHash
    from cutext.stages.text.encode import encode_terms

    words = sorted(["a", "bb", "c", "d", "zz", "é", "", "abc"], key=str.encode)
    vocab = pa.array(["pad"] * offset + words, pa.large_string()).slice(offset)
    table = TermHash(vocab)
    assert len(table) == len(words)
    want = encode_terms(terms, vocab) if terms else np.zeros(0, np.int64)
    for arr in (pa.array(terms, pa.string()), pa.array(terms, pa.large_string()),
                pa.chunked_array([pa.array(terms, pa.large_string())]),
                pa.array(["x"] + terms, pa.large_string()).slice(1)):
        np.testing.assert_array_equal(table.lookup(arr), want)
    with pytest.raises(ValueError, match="1 nulls"):
        table.lookup(pa.array(["a", None]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 6)), max_size=50))
def test_query_csr_equals_scipy_sum_duplicates(pairs):
    """query_csr (rows sorted, unknown id 0 dropped, duplicates counted) == scipy's canonical CSR."""
    import scipy.sparse as sp

    from cutext.kernels.termhash import query_csr

    pairs = sorted(pairs, key=lambda p: p[0])
    rows = np.array([p[0] for p in pairs], np.int64)
    ids = np.array([p[1] for p in pairs], np.int64)
    q_ptr, q_terms, q_w = query_csr(rows, ids, 6)
    keep = ids != 0
    want = sp.csr_matrix((np.ones(int(keep.sum()), np.float32), (rows[keep], ids[keep])), shape=(6, 7))
    want.sum_duplicates()
    np.testing.assert_array_equal(q_ptr, want.indptr)
    np.testing.assert_array_equal(q_terms, want.indices)
    np.testing.assert_array_equal(q_w, want.data)
    assert q_terms.dtype == np.int32 and q_w.dtype == np.float32


def test_query_csr_long_query_and_gaps():
    """A query of more than 32 tokens (sorted by np.sort, not the insertion sort), empty queries between."""
    from cutext.kernels.termhash import query_csr

    rng = np.random.default_rng(5)
    ids = rng.integers(0, 9, 70)
    rows = np.r_[np.full(3, 1), np.full(67, 3)].astype(np.int64)
    q_ptr, q_terms, q_w = query_csr(rows, ids, 5)
    for q in range(5):
        mine = ids[rows == q]
        u, c = np.unique(mine[mine != 0], return_counts=True)
        np.testing.assert_array_equal(q_terms[q_ptr[q]:q_ptr[q + 1]], u)
        np.testing.assert_array_equal(q_w[q_ptr[q]:q_ptr[q + 1]], c)


def _token_path_csr(texts, cfg, table):
    """The query CSR the long way: the token array of tokenize_flat, TermHash.lookup, query_csr."""
    from cutext.kernels.termhash import query_csr
    from cutext.stages.text.tokenize import tokenize_flat

    tokens, rows = tokenize_flat(texts, cfg)
    return query_csr(rows, table.lookup(tokens), len(texts))


TRICKY_QUERIES = ["The CAFÉ and the café", "", "--", "cafe\u0301 Café CAFE\u0301", "ΟΔΟΣ οδός Σίσυφος ΣΊΣΥΦΟΣ",
                  "x² 3.14 İstanbul ǅemal", "naïve na\u0308ive NAÏVE", "\u0301lead mark", "a " * 40 + "b a",
                  "emoji 👍🏽 ok\ufe0f", "日本語のテキスト", "x_y snake_case __init__", "ǅ ǆ Ǆ", "straße STRASSE"]


@pytest.mark.parametrize("cfg", [TokenizerConfig(), TokenizerConfig.make(min_len=2),
                                 TokenizerConfig.make(stopwords="lucene", max_len=6),
                                 TokenizerConfig.make(lowercase=False, min_len=2)],
                         ids=["default", "min_len", "stopwords-max_len", "no-lowercase"])
def test_text_csr_equals_the_token_path(data_dir, cfg):
    """text_csr (split + lookup in one pass, only non-ASCII rows normalized by pyarrow) gives the CSR of
    the token path for every analysis without a stemmer: the vocabulary of SciFact's abstracts under
    that analysis, queried by SciFact's claims and by texts with marks, final sigma, decomposed
    accents, titlecase digraphs, emoji and repeated terms."""
    import gzip

    import pyarrow as pa

    from cutext.kernels.termhash import TermHash, text_csr
    from cutext.stages.text.tokenize import normalize_texts, tokenize_flat

    with gzip.open(data_dir / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        docs = [json.loads(line)["text"] for _, line in zip(range(2000), fh)]
    tokens, _ = tokenize_flat(docs + TRICKY_QUERIES[:8], cfg)
    vocab = pa.array(sorted(set(tokens.to_pylist()), key=str.encode), pa.large_string())
    table = TermHash(vocab)
    queries = list(scifact_topics(data_dir).values()) + TRICKY_QUERIES + [t.upper() for t in TRICKY_QUERIES]
    for batch in (queries, queries[-30:], [queries[0]], docs[:1500] + queries):  # the last: several chunks
        want = _token_path_csr(batch, cfg, table)
        data, offsets, fold = normalize_texts(batch, cfg.lowercase)
        got = text_csr(data, offsets, table, fold)
        assert got[1].dtype == np.int32 and got[2].dtype == np.float32
        for w, g, name in zip(want, got, ("q_ptr", "q_terms", "q_w")):
            np.testing.assert_array_equal(g, w, err_msg=name)
        for w, g in zip(want, text_csr(data, offsets, table, fold, n_threads=1)):  # one thread, same chunks' result
            np.testing.assert_array_equal(g, w)
    assert got[0][-1] > 0
    with pytest.raises(ValueError, match="n_threads must be in"):
        text_csr(data, offsets, table, fold, n_threads=0)


def test_query_matrix_without_a_stemmer_equals_the_token_path(tmp_path, data_dir):
    """BM25Index.query_matrix of an index without a stemmer (the one-pass text_csr) equals the token path
    over the index's own vocabulary, and its search equals the sparse product's."""
    path, read_kw, topics = _corpus(data_dir, "scifact")
    r = pipelines.run("bm25", path, out=tmp_path / "index", stopwords="lucene", min_len=2, progress=False, **read_kw)
    index = pipelines.BM25Index.load(r.path)
    texts = list(topics.values()) + TRICKY_QUERIES
    Q = index.query_matrix(texts)
    q_ptr, q_terms, q_w = _token_path_csr(texts, index.tokenizer, index._term_hash)
    np.testing.assert_array_equal(Q.indptr, q_ptr)
    np.testing.assert_array_equal(Q.indices, q_terms)
    np.testing.assert_array_equal(Q.data, q_w)
    assert Q.nnz > len(topics)
    pd.testing.assert_frame_equal(index.search(texts, k=10), index.search(texts, k=10, engine="sparse"))
    # search reads its batches as slices of one Arrow array: a slice gives the rows of its texts
    arr = pa.array(texts, pa.string())
    for lo, hi in ((0, len(texts)), (3, len(texts) - 2)):
        P = index.query_matrix(arr[lo:hi])
        R = Q[lo:hi]
        np.testing.assert_array_equal(P.indptr, R.indptr)
        np.testing.assert_array_equal(P.indices, R.indices)
        np.testing.assert_array_equal(P.data, R.data)


def test_tokenize_flat_batch_equals_each_text_alone():
    """The batch tokenizer of queries (one token array and the text of each token) gives, for every
    text, the tokens of that text tokenized alone, in order (stopwords and stemming on the batch's
    distinct terms); texts without a token add none."""
    from cutext.stages.text.tokenize import tokenize_flat

    texts = ["The computers are running", "", "--", "Ünïcode café and the CAFÉ", "x²  3.14 οδός", "a", "running"]
    for cfg in (TokenizerConfig(), TokenizerConfig.make(stopwords="lucene", stemmer="porter")):
        tokens, row = tokenize_flat(texts, cfg)
        assert row.dtype == np.int64 and np.all(np.diff(row) >= 0)
        for i, text in enumerate(texts):
            alone, alone_row = tokenize_flat([text], cfg)
            assert tokens.to_pylist()[row.searchsorted(i):row.searchsorted(i, "right")] == alone.to_pylist()
            assert set(alone_row.tolist()) <= {0}
        assert tokenize_texts(texts, cfg)[0] == tokens.to_pylist()[:row.searchsorted(1)]
        assert 1 not in row and 2 not in row


# ----------------------------------------------------------------------------- segmented index (format 2)

def _assert_same_loaded(a, b):
    """Two loaded indexes hold the same vocabulary, documents, statistics and matrix, bit for bit."""
    assert a.vocab.equals(b.vocab) and list(a.source_ids) == list(b.source_ids)
    for k in ("df", "idf", "w0", "lengths"):
        np.testing.assert_array_equal(getattr(a, k), getattr(b, k), err_msg=k)
    for k in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(a.matrix, k), getattr(b.matrix, k), err_msg=k)


@pytest.mark.parametrize("variant", ["lucene", "bm25+"])
@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_segmented_index_scores_equal_the_one_shot_index(tmp_path, data_dir, variant, scheduler):
    """index_format=2 writes one segment a read partition (tf and lengths, no weights); loaded, its
    vocabulary, statistics, matrix and search results equal the format-1 index bit for bit, in fewer
    bytes."""
    from cutext.stages.engines.bm25_index import BM25Index

    src = data_dir / "cacm" / "cacm.json"
    kw = dict(backend="cpu", progress=False, scheduler=scheduler, blocksize=400_000, variant=variant, **ANALYSIS)
    r1 = pipelines.run("bm25", src, out=tmp_path / "v1", index_format=1, **kw)
    r2 = pipelines.run("bm25", src, out=tmp_path / "v2", index_format=2, **kw)
    assert r2.counts == r1.counts and r1.counts["partitions"] > 3
    meta = json.loads((r2.path / "index.json").read_text())
    assert meta["index_format"] == 2 and len(meta["segments"]) == r1.counts["partitions"]
    assert sorted(p.name for p in r2.path.iterdir()) == ["index.json", "segments", "terms.arrow"]
    a, b = BM25Index.load(r1.path), BM25Index.load(r2.path)
    _assert_same_loaded(a, b)
    queries = ["parallel sorting algorithms", "compiler optimization of loops", "unknownterm"]
    pd.testing.assert_frame_equal(a.search(queries, k=10), b.search(queries, k=10))

    def size(d):
        return sum(p.stat().st_size for p in d.rglob("*") if p.is_file())

    assert size(r2.path) < 0.5 * size(r1.path)


def test_segmented_index_refusals(tmp_path, data_dir):
    """A format the loader does not know is refused naming it; index_format other than 1 or 2 is refused
    before any work; an edited segment file is refused naming it."""
    from cutext.stages.engines.bm25_index import BM25Index
    from cutext.stages.runtime import artifacts as art
    from cutext.stages.runtime import checksums

    src = data_dir / "cacm" / "cacm.json"
    for bad in (3, "2", True):
        with pytest.raises(ValueError, match="index_format"):
            pipelines.run("bm25", src, out=tmp_path / "bad", backend="cpu", progress=False, index_format=bad)
    assert not (tmp_path / "bad").exists()
    r = pipelines.run("bm25", src, out=tmp_path / "v2", backend="cpu", progress=False, index_format=2)
    seg = r.path / "segments" / json.loads((r.path / "index.json").read_text())["segments"][0] / "postings.parquet"
    raw = bytearray(seg.read_bytes())
    raw[len(raw) // 2] ^= 1
    seg.write_bytes(bytes(raw))
    with pytest.raises(art.ArtifactError, match="postings.parquet"):  # the commit's checksums cover every segment
        BM25Index.load(r.path)
    raw[len(raw) // 2] ^= 1
    seg.write_bytes(bytes(raw))
    mf = r.path / "index.json"
    meta = json.loads(mf.read_text())
    meta["index_format"] = 7
    mf.write_text(json.dumps(meta))
    checksums.seal(r.path, "index.json")
    with pytest.raises(art.ArtifactError, match="index_format 7"):
        BM25Index.load(r.path)


def test_cli_builds_a_segmented_index(tmp_path, data_dir):
    """The CLI writes a segmented index by default and with --index-format 2, format 1 with --index-format 1;
    the pipeline's default is the segmented index too."""
    from cutext.pipelines.__main__ import main

    src = data_dir / "cacm" / "cacm.json"
    for flag, want in ((), 2), (("--index-format", "2"), 2), (("--index-format", "1"), 1):
        out = tmp_path / f"ix{len(flag)}{want}"
        assert main(["bm25", str(src), "--out", str(out), "--backend", "cpu", *flag, "--no-progress"]) == 0
        assert json.loads((out / "index.json").read_text())["index_format"] == want
        assert (out / "segments").is_dir() == (want == 2) and (out / "postings").is_dir() == (want == 1)
    r = pipelines.run("bm25", src, out=tmp_path / "run", backend="cpu", progress=False)
    assert json.loads((r.path / "index.json").read_text())["index_format"] == 2


def test_sharded_search_of_a_segmented_index_equals_one_index(tmp_path, data_dir):
    """``load(client=...)`` of a segmented index: each of 2 worker processes reads a run of whole segments and
    weighs it from the global statistics; the same rows and scores as the one-shot index."""
    from distributed import Client, LocalCluster

    from cutext.stages.engines.bm25_index import BM25Index

    src = data_dir / "cacm" / "cacm.json"
    kw = dict(backend="cpu", progress=False, blocksize=400_000, variant="bm25+", k1=1.2, b=0.75)
    one = BM25Index.load(pipelines.run("bm25", src, out=tmp_path / "v1", index_format=1, **kw).path)
    r = pipelines.run("bm25", src, out=tmp_path / "v2", index_format=2, **kw)
    topics = cacm_topics(data_dir)
    qs = dict(list(topics.items())[:30])
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        sharded = BM25Index.load(r.path, backend="cpu", client=client)
        assert len(sharded.shards) == 2 and sharded.shards[0][0] == 0 and sharded.shards[-1][1] == one.n_docs
        assert sharded.shards[0][1] == sharded.shards[1][0]
        assert list(sharded.source_ids) == list(one.source_ids)
        np.testing.assert_array_equal(sharded.idf, one.idf)
        for engine in ("auto", "sparse"):
            pd.testing.assert_frame_equal(sharded.search(qs, k=25, engine=engine), one.search(qs, k=25))
        q = next(iter(qs.values()))
        np.testing.assert_array_equal(sharded.get_scores(q), one.get_scores(q))


def test_append_equals_a_one_shot_build_of_all_documents(tmp_path, data_dir):
    """Two appends to a segmented index (the second through the CLI) give the vocabulary, statistics, matrix
    and results of one build of all the documents in order; old segments are linked, not rewritten."""
    from cutext.pipelines.__main__ import main
    from cutext.pipelines.bm25_index_ops import append_index
    from cutext.stages.engines.bm25_index import BM25Index

    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()
    parts = {"all": lines, "a": lines[:1500], "b": lines[1500:2500], "c": lines[2500:]}
    for name, ls in parts.items():
        (tmp_path / f"{name}.jsonl").write_text("\n".join(ls) + "\n", encoding="utf-8")
    kw = dict(backend="cpu", progress=False, k1=0.9, b=0.4, variant="bm25+", **ANALYSIS)
    one = pipelines.run("bm25", tmp_path / "all.jsonl", out=tmp_path / "one", index_format=2, **kw)
    ix = pipelines.run("bm25", tmp_path / "a.jsonl", out=tmp_path / "ix", index_format=2, **kw)
    first = sorted((ix.path / "segments").iterdir())[0] / "postings.parquet"
    inode = first.stat().st_ino
    r = append_index(tmp_path / "b.jsonl", ix.path, backend="cpu", progress=False)
    assert r.counts["appended_docs"] == 1000 and r.counts["n_docs"] == 2500
    assert first.stat().st_ino == inode  # linked into the new commit, not copied
    assert main(["bm25-append", str(tmp_path / "c.jsonl"), "--index", str(ix.path), "--backend", "cpu",
                 "--no-progress"]) == 0
    meta = json.loads((ix.path / "index.json").read_text())
    assert meta["N"] == len(lines) and meta["segments"] == ["seg-00000", "seg-00001", "seg-00002"]
    assert meta["tokenizer"] == json.loads((one.path / "index.json").read_text())["tokenizer"]
    a, b = BM25Index.load(one.path), BM25Index.load(ix.path)
    _assert_same_loaded(a, b)
    qs = dict(list(cacm_topics(data_dir).items())[:20])
    pd.testing.assert_frame_equal(a.search(qs, k=10), b.search(qs, k=10))


def test_append_refuses_a_format_1_index_and_leaves_it_whole(tmp_path, data_dir):
    from cutext.pipelines.bm25_index_ops import append_index
    from cutext.stages.runtime import artifacts as art

    src = data_dir / "cacm" / "cacm.json"
    v1 = pipelines.run("bm25", src, out=tmp_path / "v1", backend="cpu", progress=False, index_format=1)
    before = sorted(p.name for p in v1.path.rglob("*"))
    with pytest.raises(art.ArtifactError, match="bm25-convert"):
        append_index(src, v1.path, backend="cpu", progress=False)
    assert sorted(p.name for p in v1.path.rglob("*")) == before
    with pytest.raises(art.ArtifactNotFoundError):
        append_index(src, tmp_path / "nothing", backend="cpu", progress=False)


def test_delete_append_compact_equal_a_one_shot_build_of_the_live_documents(tmp_path, data_dir):
    """Deleting documents by source id, appending after a delete, and compacting: each commit loads to the
    matrix, statistics and results of one build of the documents it holds (in order)."""
    from cutext.pipelines.__main__ import main
    from cutext.pipelines.bm25_index_ops import append_index, delete_documents
    from cutext.stages.engines.bm25_index import BM25Index

    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()
    ids = [json.loads(x)["id"] for x in lines]
    gone = set(ids[10:400:7]) | {ids[0], ids[2999]}
    kw = dict(backend="cpu", progress=False, blocksize=400_000, **ANALYSIS)

    def write(name, ls):
        (tmp_path / f"{name}.jsonl").write_text("\n".join(ls) + "\n", encoding="utf-8")
        return tmp_path / f"{name}.jsonl"

    def same(ref_lines, path):
        ref = BM25Index.load(pipelines.run("bm25", write("ref", ref_lines), out=tmp_path / "ref", index_format=2,
                                           **kw).path)
        got = BM25Index.load(path)
        _assert_same_loaded(got, ref)
        qs = dict(list(cacm_topics(data_dir).items())[:10])
        pd.testing.assert_frame_equal(got.search(qs, k=10), ref.search(qs, k=10))

    ix = pipelines.run("bm25", write("a", lines[:3000]), out=tmp_path / "ix", index_format=2, **kw).path
    r = delete_documents(ix, sorted(gone)[:-1])
    (tmp_path / "ids.txt").write_text(sorted(gone)[-1] + "\n")
    assert main(["bm25-delete", "--index", str(ix), "--ids-file", str(tmp_path / "ids.txt")]) == 0
    assert r.counts["deleted_docs"] == len(gone) - 1
    assert json.loads((ix / "index.json").read_text())["N"] == 3000 - len(gone)
    live = [x for x, i in zip(lines[:3000], ids) if i not in gone]
    same(live, ix)
    with pytest.raises(ValueError, match="not in the index"):  # already deleted, or never there
        delete_documents(ix, [ids[0], "no-such-id"])
    append_index(write("b", lines[3000:]), ix, backend="cpu", progress=False)
    same(live + lines[3000:], ix)
    n_seg = len(json.loads((ix / "index.json").read_text())["segments"])
    assert main(["bm25-compact", "--index", str(ix), "--json"]) == 0
    meta = json.loads((ix / "index.json").read_text())
    assert len(meta["segments"]) == 1 and meta["deletes"] == {} and meta["counts"]["compacted_segments"] == n_seg
    assert not (ix / "deletes").exists()
    same(live + lines[3000:], ix)


def test_sharded_load_of_a_segmented_index_with_deletions_equals_one_index(tmp_path, data_dir):
    from distributed import Client, LocalCluster

    from cutext.pipelines.bm25_index_ops import delete_documents
    from cutext.stages.engines.bm25_index import BM25Index

    src = data_dir / "cacm" / "cacm.json"
    ix = pipelines.run("bm25", src, out=tmp_path / "ix", backend="cpu", progress=False, blocksize=400_000,
                       index_format=2).path
    one = BM25Index.load(ix)
    delete_documents(ix, list(one.source_ids[5:600:11]))
    one = BM25Index.load(ix)
    qs = dict(list(cacm_topics(data_dir).items())[:10])
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        sharded = BM25Index.load(ix, backend="cpu", client=client)
        assert len(sharded.shards) == 2 and sharded.shards[-1][1] == one.n_docs
        np.testing.assert_array_equal(sharded.df, one.df)
        pd.testing.assert_frame_equal(sharded.search(qs, k=10), one.search(qs, k=10))


def test_convert_a_format_1_index_scores_as_before_and_takes_appends(tmp_path, data_dir, capsys):
    from cutext.pipelines.__main__ import main
    from cutext.pipelines.bm25_index_ops import append_index
    from cutext.stages.engines.bm25_index import BM25Index

    src = data_dir / "cacm" / "cacm.json"
    v1 = pipelines.run("bm25", src, out=tmp_path / "v1", backend="cpu", progress=False, variant="bm25l",
                       index_format=1, **ANALYSIS)
    ref = BM25Index.load(v1.path)
    assert main(["bm25-convert", "--index", str(v1.path), "--out", str(tmp_path / "v2")]) == 0
    got = BM25Index.load(tmp_path / "v2")
    assert json.loads((tmp_path / "v2" / "index.json").read_text())["index_format"] == 2
    assert got.vocab.equals(ref.vocab) and list(got.source_ids) == list(ref.source_ids)
    for k in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(got.matrix, k), getattr(ref.matrix, k), err_msg=k)
    np.testing.assert_array_equal(got.w0, ref.w0)
    qs = dict(list(cacm_topics(data_dir).items())[:10])
    pd.testing.assert_frame_equal(got.search(qs, k=10), ref.search(qs, k=10))
    assert main(["bm25-convert", "--index", str(tmp_path / "v2")]) == 2
    assert "already a segmented index" in capsys.readouterr().err
    r = append_index(src, tmp_path / "v2", backend="cpu", progress=False, on_duplicate="keep")
    assert r.counts["n_docs"] == 2 * ref.n_docs


def test_delta_is_refused_with_a_variant_without_one(tmp_path, data_dir):
    """``delta`` belongs to bm25l and bm25+; lucene, robertson and atire have no delta term, so a given one
    is refused naming it, not recorded and ignored; None keeps each variant's default."""
    src = data_dir / "cacm" / "cacm.json"
    for variant in ("lucene", "robertson", "atire"):
        with pytest.raises(ValueError, match=r"delta=0\.5.*no delta term"):
            pipelines.run("bm25", src, out=tmp_path / "x", variant=variant, delta=0.5, progress=False)
    assert not (tmp_path / "x").exists()
    r = pipelines.run("bm25", src, out=tmp_path / "l", variant="bm25l", delta=0.7, backend="cpu", progress=False)
    assert r.params["delta"] == 0.7


def test_switches_and_local_cluster_sizes_are_checked(tmp_path, data_dir):
    """A switch takes a bool ("no" is truthy: append="no" would append), and ``n_workers`` is refused where
    it sizes nothing (``scheduler="sync"``) instead of being ignored; with ``"threads"`` it sizes the threads."""
    src = data_dir / "cacm" / "cacm.json"
    for kw, name in (({"append": "no"}, "append"), ({"lowercase": "no"}, "lowercase"),
                     ({"overwrite": 0}, "overwrite"), ({"progress": "yes"}, "progress")):
        with pytest.raises(ValueError, match=f"{name} must be True or False"):
            pipelines.run("bm25", src, out=tmp_path / "x", backend="cpu", **{"progress": False, **kw})
    with pytest.raises(ValueError, match="n_workers=2 sizes a local cluster"):
        pipelines.run("bm25", src, out=tmp_path / "x", backend="cpu", scheduler="sync", n_workers=2, progress=False)
    assert not (tmp_path / "x").exists()
    r = pipelines.run("bm25", src, out=tmp_path / "t", backend="cpu", scheduler="threads", n_workers=2, progress=False)
    assert (r.scheduler, r.n_workers) == ("threads", 2)
