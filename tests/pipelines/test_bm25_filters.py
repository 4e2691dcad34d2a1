"""Filters before top-k: ``keep_columns=`` keeps columns of the input in the index, and ``search(filter=...)``
(an expression over them, a boolean mask over the doc ids, or per-query lists of source ids) equals a brute
force (every document scored by ``get_scores``, the filter applied, the top k by score then the smaller doc
id) on CACM and SciFact, for filters of 0.1 % to 90 % of the documents; kept columns through append, delete
and compaction; the errors."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from cutext import pipelines
from cutext.pipelines.__main__ import main
from cutext.stages.engines.bm25_index import BM25Index

from helpers import cacm_topics, scifact_topics

KW = dict(backend="cpu", scheduler="sync", progress=False)
SELECTIVITY = (0.001, 0.01, 0.1, 0.5, 0.9)
CATEGORIES = np.array(["sci", "math", "os", "db", "nlp"])


def _columns(n: int, seed: int) -> dict:
    """Metadata of ``n`` documents: a uniform ``r`` (thresholds give any selectivity), a category, a year."""
    rng = np.random.default_rng(seed)
    return {"r": rng.random(n), "category": CATEGORIES[rng.integers(0, len(CATEGORIES), n)],
            "year": rng.integers(1960, 2025, n)}


def _records(data_dir, name):
    if name == "cacm":
        recs = [json.loads(x) for x in (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()]
        return pd.DataFrame({"id": [r["id"] for r in recs], "text": [r["contents"] for r in recs]})
    with gzip.open(data_dir / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        recs = [json.loads(x) for x in fh if x.strip()]
    return pd.DataFrame({"id": [str(r["_id"]) for r in recs], "text": [f"{r['title']} {r['text']}" for r in recs]})


@pytest.fixture(scope="module", params=["cacm", "scifact"])
def collection(request, data_dir, tmp_path_factory):
    """(index, metadata frame in doc order, queries): CACM from two Parquet files, SciFact from a DataFrame
    in partitions, each with three kept columns and several segments."""
    name = request.param
    df = _records(data_dir, name)
    df = df.assign(**_columns(len(df), 7))
    folder = tmp_path_factory.mktemp(name)
    if name == "cacm":  # two files: two segments, so a search crosses segments and the load merges them
        half = len(df) // 2
        (folder / "in").mkdir()
        pq.write_table(pa.Table.from_pandas(df.iloc[:half], preserve_index=False), folder / "in" / "a.parquet")
        pq.write_table(pa.Table.from_pandas(df.iloc[half:], preserve_index=False), folder / "in" / "b.parquet")
        src, queries = folder / "in", list(cacm_topics(data_dir).values())
        read = {}
    else:  # partitions of 2 MB of text: several segments
        src, queries, read = df, list(scifact_topics(data_dir).values())[:150], {"blocksize": 2_000_000}
    r = pipelines.run("bm25", src, out=folder / "ix", keep_columns=["r", "category", "year"], id_column="id",
                      text_column="text", **read, **KW)
    index = BM25Index.load(r.path, backend="cpu")
    meta = df.set_index("id").loc[list(index.source_ids)].reset_index()
    return index, meta, queries


def _brute(index: BM25Index, queries, k: int, allowed) -> pd.DataFrame:
    """Every document scored (``get_scores``), the allowed ones with a positive score ranked by score
    descending then doc id: ``allowed[i]`` the bool mask of query i."""
    rows = []
    for i, q in enumerate(queries):
        s = index.get_scores(q)
        cand = np.flatnonzero((s > 0) & allowed[i])
        top = cand[np.lexsort((cand, -s[cand]))][:k]
        rows.append(pd.DataFrame({"query_id": str(i), "doc_id": top.astype(np.int64),
                                  "rank": np.arange(1, len(top) + 1), "score": s[top].astype(np.float64)}))
    return pd.concat(rows, ignore_index=True)


def _check(got: pd.DataFrame, want: pd.DataFrame, what: str):
    got = got[["query_id", "doc_id", "rank", "score"]].reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want.astype(got.dtypes.to_dict()), obj=what)


def _queries(queries):
    return {str(i): q for i, q in enumerate(queries)}


@pytest.mark.parametrize("sel", SELECTIVITY)
def test_expression_filter_equals_brute_force(collection, sel):
    index, meta, queries = collection
    expr = pc.field("r") < sel
    allowed = meta["r"].to_numpy() < sel
    assert 0 < allowed.sum() < len(allowed)
    for k in (10, 100):
        want = _brute(index, queries, k, [allowed] * len(queries))
        for engine in ("cpu", "sparse"):
            got = index.search(_queries(queries), k=k, filter=expr, engine=engine, batch_size=37)
            _check(got, want, f"{engine} k={k} r < {sel}")
            assert got.doc_id.isin(np.flatnonzero(allowed)).all()


def test_expressions_on_strings_and_integers(collection):
    index, meta, queries = collection
    for expr, allowed in ((pc.field("category") == "sci", meta["category"].to_numpy() == "sci"),
                          (pc.field("category").isin(["os", "db"]) & (pc.field("year") >= 2000),
                           meta["category"].isin(["os", "db"]).to_numpy() & (meta["year"].to_numpy() >= 2000))):
        want = _brute(index, queries, 20, [allowed] * len(queries))
        _check(index.search(_queries(queries), k=20, filter=expr), want, str(expr))


@pytest.mark.parametrize("sel", SELECTIVITY)
def test_mask_filter_equals_brute_force(collection, sel):
    index, _, queries = collection
    mask = np.random.default_rng(int(sel * 1000)).random(index.n_docs) < sel
    mask[0] = True  # at least one allowed document whatever the draw
    want = _brute(index, queries, 50, [mask] * len(queries))
    for engine in ("cpu", "sparse"):
        _check(index.search(_queries(queries), k=50, filter=mask, engine=engine), want, f"{engine} mask {sel}")


@pytest.mark.parametrize("sel", SELECTIVITY)
def test_per_query_source_ids_equal_brute_force(collection, sel):
    """A list of allowed source ids a query (drawn apart for each query; an id not in the index and a
    repeated one are harmless), through batches of queries."""
    index, _, queries = collection
    queries = queries[:60]
    rng = np.random.default_rng(int(sel * 1e4) + 1)
    masks = [rng.random(index.n_docs) < sel for _ in queries]
    lists = [list(index.source_ids[m]) + ["not-a-document"] + list(index.source_ids[m][:1]) for m in masks]
    lists[3] = []  # a query that may return nothing
    masks[3] = np.zeros(index.n_docs, bool)
    want = _brute(index, queries, 30, masks)
    for engine in ("cpu", "sparse"):
        _check(index.search(_queries(queries), k=30, filter=lists, engine=engine, batch_size=16), want,
               f"{engine} lists {sel}")


def test_filter_keeps_min_k_and_matches_topk_arrays(collection):
    """Every query returns min(k, allowed documents with a positive score): never fewer because others
    outscore them (a weight mask that zeroes scores would), never a filtered-out one."""
    index, meta, queries = collection
    allowed = meta["r"].to_numpy() < 0.05
    Q = index.query_matrix(queries)
    doc, score, n = index.topk_arrays(Q, k=25, filter=allowed)
    pd.testing.assert_frame_equal(index.search(queries, k=25, filter=pd.Series(allowed)),
                                  index.search(queries, k=25, filter=list(allowed)))  # any array-like mask
    for i, q in enumerate(queries):
        s = index.get_scores(q)
        assert n[i] == min(25, int(((s > 0) & allowed).sum()))
        assert allowed[doc[i, :n[i]]].all()


def test_sharded_search_filters_each_shard(collection):
    """Shards on the workers of a client: each gets its documents' part of the filter (mask and lists)."""
    from distributed import Client, LocalCluster

    index, meta, queries = collection
    queries = queries[:40]
    allowed = meta["category"].to_numpy() == "math"
    rng = np.random.default_rng(5)
    lists = [list(index.source_ids[rng.random(index.n_docs) < 0.2]) for _ in queries]
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        sharded = BM25Index.load(index.path, backend="cpu", client=client)
        assert len(sharded.shards) == 2 and sharded.keep_columns == ["r", "category", "year"]
        for f in (pc.field("category") == "math", allowed, lists):
            pd.testing.assert_frame_equal(sharded.search(_queries(queries), k=15, filter=f),
                                          index.search(_queries(queries), k=15, filter=f))


def test_filter_errors(collection, tmp_path, data_dir):
    index, _, queries = collection
    qs = _queries(queries[:3])
    with pytest.raises(ValueError, match=r"column\(s\) \['lang'\] not kept in this index.*keep_columns=\['lang'\]"):
        index.search(qs, filter=pc.field("lang") == "en")
    with pytest.raises(ValueError, match=rf"shape \({index.n_docs},\); got \(10,\)"):
        index.search(qs, filter=np.ones(10, bool))
    with pytest.raises(ValueError, match="2 lists for 3 queries"):
        index.search(qs, filter=[["a"], ["b"]])
    with pytest.raises(ValueError, match="must be boolean"):
        index.search(qs, filter=np.ones(index.n_docs, np.int8))
    with pytest.raises(ValueError, match="boolean expression"):
        index.search(qs, filter=pc.field("year") + 1)
    plain = pipelines.run("bm25", data_dir / "cacm" / "cacm.json", out=tmp_path / "plain", **KW)
    with pytest.raises(ValueError, match=r"not kept in this index \(kept: none\).*keep_columns=\['category'\]"):
        BM25Index.load(plain.path).search(qs, filter=pc.field("category") == "sci")
    with pytest.raises(ValueError, match="this index keeps no column"):
        BM25Index.load(plain.path).column_table()


def test_build_errors(tmp_path, data_dir):
    src = data_dir / "cacm" / "cacm.json"
    with pytest.raises(ValueError, match=r"cacm.json: keep_columns: column\(s\) \['date'\] not in the input"):
        pipelines.run("bm25", src, out=tmp_path / "a", keep_columns=["date"], **KW)
    assert not (tmp_path / "a" / "index.json").exists()
    with pytest.raises(ValueError, match="segmented index: use index_format=2"):
        pipelines.run("bm25", src, out=tmp_path / "b", keep_columns="id", index_format=1, **KW)
    frame = pd.DataFrame({"text": ["a b", "b c"], "lang": ["en", "de"]})
    with pytest.raises(ValueError, match=r"DataFrame: 2 rows>: keep_columns: column\(s\) \['date'\] not in the input"):
        pipelines.run("bm25", frame, out=tmp_path / "c", keep_columns=["lang", "date"], **KW)
    lines = tmp_path / "lines.txt"
    lines.write_text("a b\nc d\n")
    with pytest.raises(ValueError, match="keeps columns of a table input"):
        pipelines.run("bm25", lines, out=tmp_path / "d", keep_columns=["x"], **KW)
    fmt1 = pipelines.run("bm25", src, out=tmp_path / "f1", index_format=1, **KW)
    with pytest.raises(ValueError, match="a format-1 index keeps no column"):
        BM25Index.load(fmt1.path).search("random numbers", filter=pc.field("x") == 1)
    v1 = BM25Index.load(fmt1.path)  # masks and source ids need no kept column: format 1 takes them
    got = v1.search("random numbers", k=5, filter=np.arange(v1.n_docs) < 1000)
    assert len(got) == 5 and (got.doc_id < 1000).all()
    assert v1.search("random numbers", k=5, filter=[list(got.source_id[:2])]).source_id.tolist() == \
        got.source_id[:2].tolist()


def test_kept_columns_survive_append_delete_and_compaction(tmp_path):
    rng = np.random.default_rng(3)
    words = np.array("alpha beta gamma delta epsilon zeta eta theta".split())

    def frame(lo, hi):
        return pd.DataFrame({"id": [f"d{i}" for i in range(lo, hi)],
                             "text": [" ".join(rng.choice(words, 6)) for _ in range(lo, hi)],
                             "lang": np.where(np.arange(lo, hi) % 3 == 0, "en", "de"),
                             "year": np.arange(lo, hi, dtype=np.int64)})

    a, b = frame(0, 60), frame(60, 100)
    ix = pipelines.run("bm25", a, out=tmp_path / "ix", keep_columns=["lang", "year"], **KW).path
    with pytest.raises(ValueError, match=r"keep_columns differ from them \(the index has keep_columns=\['lang', "
                                         r"'year'\]\)"):
        pipelines.run("bm25", b, out=ix, append=True, keep_columns=["lang"], **KW)
    with pytest.raises(ValueError, match=r"keep_columns: column\(s\) \['year'\] not in the input"):
        pipelines.run("bm25", b.drop(columns="year"), out=ix, append=True, **KW)
    pipelines.run("bm25", b, out=ix, append=True, **KW)
    index = BM25Index.load(ix)
    both = pd.concat([a, b], ignore_index=True)
    assert index.column_table().to_pandas().equals(both[["lang", "year"]])
    gone = [f"d{i}" for i in range(0, 100, 7)]
    index.delete(gone)
    live = both[~both.id.isin(gone)].reset_index(drop=True)
    assert list(index.source_ids) == list(live.id)
    assert index.column_table().to_pandas().equals(live[["lang", "year"]])
    expr = (pc.field("lang") == "en") & (pc.field("year") >= 30)
    before = index.search("alpha gamma", k=100, filter=expr)
    assert len(before) and set(before.source_id) <= set(live.id[(live.lang == "en") & (live.year >= 30)])
    assert index.compact() == 2  # the build's segment and the append's
    assert index.column_table().to_pandas().equals(live[["lang", "year"]])
    pd.testing.assert_frame_equal(index.search("alpha gamma", k=100, filter=expr), before)
    assert json.loads((ix / "index.json").read_text())["keep_columns"] == ["lang", "year"]


def test_cli_keep_column(tmp_path, data_dir):
    src = tmp_path / "docs.jsonl"
    src.write_text("\n".join(json.dumps({"id": f"d{i}", "text": f"alpha beta {i}", "lang": ["en", "de"][i % 2]})
                             for i in range(20)) + "\n")
    assert main(["bm25", str(src), "--out", str(tmp_path / "ix"), "--keep-column", "lang", "--backend", "cpu",
                 "--scheduler", "sync", "--no-progress"]) == 0
    index = BM25Index.load(tmp_path / "ix")
    assert index.keep_columns == ["lang"]
    got = index.search("alpha", k=20, filter=pc.field("lang") == "de")
    assert len(got) == 10 and set(got.source_id) == {f"d{i}" for i in range(1, 20, 2)}


def test_client_build_keeps_the_columns_of_an_in_process_build(tmp_path, data_dir):
    """A Client and a file input: each worker writes its share's segments with their kept columns."""
    from distributed import Client, LocalCluster

    df = _records(data_dir, "cacm").assign(**_columns(3204, 1))
    (tmp_path / "in").mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(df)), 4)):
        pq.write_table(pa.Table.from_pandas(df.iloc[part], preserve_index=False), tmp_path / "in" / f"{i}.parquet")
    kw = dict(keep_columns=["category", "year"], id_column="id", text_column="text", backend="cpu", progress=False)
    one = BM25Index.load(pipelines.run("bm25", tmp_path / "in", out=tmp_path / "one", scheduler="sync", **kw).path)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        got = BM25Index.load(pipelines.run("bm25", tmp_path / "in", out=tmp_path / "two", client=client, **kw).path)
    assert list(got.source_ids) == list(one.source_ids)
    assert got.column_table().equals(one.column_table())
    f = pc.field("category") == "db"
    pd.testing.assert_frame_equal(got.search("parallel sorting", k=20, filter=f),
                                  one.search("parallel sorting", k=20, filter=f))
    assert pd.Series(one.column_table()["category"].to_pylist()).eq("db").sum() > 100


def test_a_source_id_appended_again_allows_each_of_its_documents(tmp_path):
    a = pd.DataFrame({"id": ["x", "y", "z"], "text": ["alpha beta", "alpha", "beta"]})
    ix = pipelines.run("bm25", a, out=tmp_path / "ix", id_column="id", **KW).path
    pipelines.run("bm25", a.iloc[:1].assign(text="alpha alpha"), out=ix, append=True, id_column="id",
                  on_duplicate="keep", **KW)
    index = BM25Index.load(ix)
    got = index.search(["alpha", "alpha"], k=10, filter=[["x"], ["y", "nope"]])
    assert got[got.query_id == "0"].doc_id.tolist() == [3, 0] and got[got.query_id == "1"].doc_id.tolist() == [1]


# ----------------------------------------------------------------------------- filter types

@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    """A 6-document index keeping a column of each kind: int64, another int64, string, double, timestamp."""
    texts = ["alpha beta", "alpha", "beta gamma", "alpha gamma", "alpha delta", "alpha beta"]
    df = pd.DataFrame({"id": [f"{10 + i}" for i in range(6)], "text": texts,
                       "year": np.arange(2000, 2006, dtype=np.int64), "month": np.arange(1, 7, dtype=np.int64),
                       "cat": ["a", "b", "a", "b", "a", "b"], "r": np.linspace(0.1, 0.6, 6),
                       "day": pd.date_range("2020-01-01", periods=6, freq="MS", tz="UTC")})
    out = tmp_path_factory.mktemp("typed") / "ix"
    pipelines.run("bm25", df, out=out, id_column="id", keep_columns=["year", "month", "cat", "r", "day"], **KW)
    return BM25Index.load(out, backend="cpu")


@pytest.mark.parametrize("expr, match", [
    (pc.field("year") == "abc", r"column 'year' is int64 \(number\) and the value is string"),
    (pc.field("cat") == 1, r"column 'cat' is large_string \(string\) and the value is int8 \(number\)"),
    (pc.field("year") == True, r"column 'year' is int64 \(number\) and the value is bool"),  # noqa: E712
    (pc.field("day") > 3, r"column 'day' is timestamp\[.*\] \(date or timestamp\) and the value is int8"),
    ((pc.field("r") > 0) & (pc.field("cat") < 5), r"column 'cat' is large_string .* value is int8"),
    (pc.field("year").isin(["2000"]), r"column 'year' is int64 \(number\) and the value is string"),
    (pc.field("year").isin([True]), r"column 'year' is int64 \(number\) and the value is bool"),
    (pc.field("cat").isin([1, 2]), r"column 'cat' is large_string \(string\) and the value is int64"),
    (pc.field("year") == pc.field("cat"), r"columns 'year' \(int64\) and 'cat' \(large_string\) cannot be compared"),
    (pc.field("year") == None, r"comparison with null is null for every document.*is_null\(\)"),  # noqa: E711
    ((pc.field("r") > 0) & (pc.field("r") != float("nan")), r"comparison with nan is false .*is_nan\(\)"),
], ids=["int==str", "str==int", "int==bool", "timestamp>int", "and", "int-isin-str", "int-isin-bool",
        "str-isin-int", "int==str-column", "==None", "!=nan"])
def test_a_filter_whose_types_cannot_match_the_column_is_refused(typed, expr, match):
    """One line naming the column, its type and the value's; never a raw Arrow error, never a set lookup
    whose values Arrow would cast to the column's type ("2000" to 2000, True to 1) where == refuses them, and
    never a comparison with null or NaN, which no document satisfies (0 rows without a word)."""
    with pytest.raises(ValueError, match=match) as exc:
        typed.search(["alpha", "beta"], filter=expr)
    assert "\n" not in str(exc.value) and str(exc.value).startswith("filter ")


def test_numbers_of_any_width_compare_and_keep_filtering(typed):
    """An int column against a float value (and a float column against ints) compares by value."""
    for expr, want in ((pc.field("year") == 2001.0, {"11"}), (pc.field("year").isin([2000.0, 2003]), {"10", "13"}),
                       (pc.field("r").isin([0.1, 1]), {"10"}), (pc.field("cat").isin([None, "b"]), {"11", "13", "15"})):
        assert set(typed.search("alpha", k=10, filter=expr).source_id) == want, str(expr)


@pytest.mark.parametrize("lists, shown", [
    ([[10, 11]], r"10 \(int, query 0\), 11 \(int, query 0\).*write '10'"),
    ([["10"], np.array([12, 13])], r"np.int64\(12\) \(int64, query 1\)"),
    ([["10", None]], r"None \(NoneType, query 0\)"),
    ([[b"10"]], r"b'10' \(bytes, query 0\)"),
], ids=["int", "numpy-int", "None", "bytes"])
def test_per_query_source_ids_must_be_strings(typed, lists, shown):
    """Source ids are strings: an int (or None, bytes) in a list of allowed ids is refused naming it, not
    converted with str() and not left to match nothing."""
    queries = ["alpha", "beta"][:len(lists)]
    with pytest.raises(ValueError, match=r"filter: the source ids of the index are strings \(str\).*" + shown):
        typed.search(queries, filter=lists)
    ok = [[str(x) for x in lst if isinstance(x, (int, np.integer))] or ["10"] for lst in lists]
    assert set(typed.search(queries, k=10, filter=ok).source_id) <= {x for lst in ok for x in lst}
