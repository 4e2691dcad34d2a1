"""Anserini's runs, exactly: ``analyzer="anserini"`` and ``norms="lucene"`` against runs and tokens of Anserini 1.7.1.

The reference files in tests/data/anserini come from benchmarks/anserini_reference.py (Anserini's fat jar on
Java; these tests need neither).
"""
from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cutext import pipelines
from cutext.pipelines.evaluate import evaluate
from cutext.pipelines.trec import anserini_scores, read_trec_qrels
from cutext.stages.engines.bm25_index import ties_by_source_id
from cutext.stages.text.anserini import standard_tokens
from cutext.stages.text.bm25 import lucene_length, lucene_norm_cache
from cutext.stages.text.porter import porter_stem
from cutext.stages.text.tokenize import TokenizerConfig, tokenize_texts
from tests.helpers import cacm_topics, scifact_topics

REF = Path(__file__).resolve().parents[1] / "data" / "anserini"
ANSERINI = dict(analyzer="anserini", norms="lucene", k1=0.9, b=0.4)


def _digest(tokens) -> str:
    return hashlib.sha1("\x1f".join(tokens).encode("utf-8")).hexdigest()[:16]


def _reference_run(name: str) -> pd.DataFrame:
    with gzip.open(REF / f"run.{name}.txt.gz", "rt", encoding="utf-8") as fh:
        rows = [line.split() for line in fh]
    return pd.DataFrame({"query_id": [r[0] for r in rows], "doc_id": [r[2] for r in rows],
                         "rank": [int(r[3]) for r in rows], "score": [float(r[4]) for r in rows]})


def _reference_tokens(name: str) -> pd.DataFrame:
    return pd.read_csv(REF / f"tokens.{name}.tsv.gz", sep="\t", dtype=str, keep_default_na=False)


def _corpus(name: str, data_dir: Path) -> tuple[list, list, dict]:
    """(ids, texts, topics) as benchmarks/anserini_reference.py gave them to Anserini."""
    if name == "cacm":
        docs = [json.loads(line) for line in (data_dir / "cacm" / "cacm.json").read_text("utf-8").splitlines()]
        return [d["id"] for d in docs], [d["contents"] for d in docs], cacm_topics(data_dir)
    with gzip.open(data_dir / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        docs = [json.loads(line) for line in fh]
    return [d["_id"] for d in docs], [d["title"] + "\n" + d["text"] for d in docs], scifact_topics(data_dir)


# SciFact (5,183 abstracts) takes about 3 s a test: the slow tier
COLLECTIONS = ["cacm", pytest.param("scifact", marks=pytest.mark.slow)]


@pytest.fixture(scope="module", params=COLLECTIONS)
def anserini_search(request, data_dir, tmp_path_factory):
    """(name, our top-100 run with Anserini's printed scores, Anserini's run, qrels) of one collection."""
    name = request.param
    ids, texts, topics = _corpus(name, data_dir)
    out = tmp_path_factory.mktemp(name) / "index"
    frame = pd.DataFrame({"id": ids, "text": texts})
    pipelines.run("bm25", frame, out=out, id_column="id", text_column="text", backend="cpu", scheduler="sync",
                  progress=False, **ANSERINI)
    index = pipelines.BM25Index.load(out)
    hits = index.search(pd.DataFrame({"query_id": list(topics), "query": list(topics.values())}), k=100)
    run = pd.DataFrame({"query_id": hits["query_id"].astype(str), "doc_id": hits["source_id"].astype(str),
                        "score": anserini_scores(hits["query_id"].to_numpy(), hits["score"].to_numpy())})
    qrels = data_dir / name / ("qrels.cacm.txt" if name == "cacm" else "qrels.test.txt")
    return name, run, _reference_run(name), read_trec_qrels(qrels)


def test_runs_top10_identical_and_map_equal(anserini_search):
    name, ours, ref, qrels = anserini_search
    mine = {q: g["doc_id"].tolist()[:10] for q, g in ours.groupby("query_id", sort=False)}
    theirs = {q: g.sort_values("rank")["doc_id"].tolist()[:10] for q, g in ref.groupby("query_id", sort=False)}
    same = sum(mine.get(q) == t for q, t in theirs.items())
    assert same >= 0.99 * len(theirs), f"{name}: {same} of {len(theirs)} top-10 lists identical"
    m_ours = evaluate(ours, qrels, metrics=["map", "ndcg@10"])
    m_ref = evaluate(ref[["query_id", "doc_id", "score"]], qrels, metrics=["map", "ndcg@10"])
    assert round(m_ours["map"], 4) == round(m_ref["map"], 4), (m_ours, m_ref)
    assert round(m_ours["ndcg@10"], 4) == round(m_ref["ndcg@10"], 4), (m_ours, m_ref)


def test_runs_print_anserini_scores(anserini_search):
    """The scores written equal Anserini's printed ones (a query term repeated 3 or more times can move a
    score by one ulp: Lucene boosts the idf before the saturation, the index stores the saturated weight)."""
    name, ours, ref, _ = anserini_search
    j = ref.merge(ours, on=["query_id", "doc_id"], how="left", suffixes=("_ref", "_ours"))
    assert j["score_ours"].notna().all(), f"{name}: documents of Anserini's top 100 missing from ours"
    equal = (j["score_ref"] == j["score_ours"]).mean()
    assert equal >= 0.999, f"{name}: {equal:.4%} of the scores equal"
    assert np.abs(j["score_ref"] - j["score_ours"]).max() <= 1.5e-4


@pytest.mark.parametrize("name", COLLECTIONS)
def test_tokens_equal_lucene(name, data_dir):
    """Every document and topic gives Lucene's StandardTokenizer tokens and Anserini's analyzed tokens."""
    ref = _reference_tokens(name)
    ids, texts, topics = _corpus(name, data_dir)
    cfg = TokenizerConfig.make(analyzer="anserini")
    docs = ref[ref["kind"] == "doc"].set_index("id")
    analyzed = tokenize_texts(texts, cfg)
    bad_std = [i for i, t in zip(ids, texts) if _digest(standard_tokens(t)) != docs.at[i, "std"]]
    bad_ana = [i for i, a in zip(ids, analyzed) if _digest(a) != docs.at[i, "ana"]]
    assert len(docs) == len(ids) and bad_std == [] and bad_ana == [], (bad_std[:5], bad_ana[:5])
    tops = ref[ref["kind"] == "topic"].set_index("id")
    got = tokenize_texts(list(topics.values()), cfg)
    bad = [q for q, a in zip(topics, got) if _digest(a) != tops.at[q, "ana"]]
    assert len(tops) == len(topics) and bad == [], bad[:5]


def test_standard_tokenizer_keeps_words_whole():
    assert standard_tokens("U.S.A. costs 0.05, don't e-mail controls.Only x\u00b2 \u00a9") == [
        "U.S.A", "costs", "0.05", "don't", "e", "mail", "controls.Only", "x", "\u00a9"]
    assert [len(t) for t in standard_tokens("a" * 600)] == [255, 255, 90]


def test_standard_tokenizer_as_lucenes_scanner():
    # Lucene 9.9.1's StandardTokenizer gave these (benchmarks/anserini/Analyze.java): the longest token in the
    # scanner's 255-character buffer; a run of Thai letters one token (UAX #29 breaks between them); a mark after
    # a character no token starts with is a token of its own
    assert standard_tokens("x" * 254 + ".y" * 5) == ["x" * 254, "y.y.y.y.y"]
    assert standard_tokens("abc\u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22123") == [
        "abc", "\u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22", "123"]
    assert standard_tokens("!\u0e49,\u00e9\u0e499") == ["\u0e49", "\u00e9\u0e499"]


def test_anserini_analyzer_order_and_stems():
    cfg = TokenizerConfig.make(analyzer="anserini")
    assert tokenize_texts(["The Technology's assemblies ARE reproducibly irreversible"], cfg) == [
        ["technolog", "assembl", "reproduc", "irrevers"]]


def test_porter_stem_is_lucenes():
    # Lucene's PorterStemFilter (Porter's C departures: -bli -> -ble, -logi -> -log) where Snowball's porter differs
    assert [porter_stem(w) for w in ("technology", "assembly", "possibly", "analogi", "irreversibly")] == [
        "technolog", "assembl", "possibl", "analog", "irrevers"]
    assert [porter_stem(w) for w in ("caresses", "ponies", "agreed", "hopping", "generalizations", "is", "s")] == [
        "caress", "poni", "agre", "hop", "gener", "is", "s"]


def test_old_spellings_keep_pystemmer_porter():
    cfg = TokenizerConfig.make(stopwords="lucene", stemmer="porter")
    assert cfg.analyzer is None and "analyzer" not in cfg.to_dict()
    assert tokenize_texts(["technology U.S.S.R"], cfg) == [["technologi", "u", "s", "s", "r"]]


def test_lucene_length_is_smallfloat():
    d = np.arange(0, 1 << 16)
    got = lucene_length(d)
    assert np.array_equal(got[:24], d[:24])  # SmallFloat keeps lengths below 24
    assert got[1000] == 984 and got[255] == 248 and got[40] == 40 and got[41] == 40
    assert np.all(np.diff(got) >= 0) and np.array_equal(lucene_length(got), got) and np.all(got <= d)
    assert len(np.unique(lucene_length(np.array([0, 2**31 - 1, *range(0, 2**31, 4099)])))) <= 256
    cache = lucene_norm_cache(100.0, 0.9, 0.4)
    assert cache.dtype == np.float32 and cache.shape == (256,) and np.all(np.diff(cache) < 0)


def test_anserini_scores_adjust_ties():
    # rounded to 4 decimals, then equal (within 1e-4) neighbours step down by 1e-6 each, as ScoreTiesAdjuster
    got = anserini_scores(["1"] * 4 + ["2"], [12.033018, 9.84732, 9.84732, 9.84718, 9.84732])
    assert got.tolist() == [12.033, 9.8473, 9.847299, 9.847198, 9.8473]


def test_ties_by_source_id_looks_past_the_cut():
    ids = np.array([f"d{i:02d}" for i in range(40)])[::-1]  # doc 0 has the largest source id

    def search(queries, k):
        rows = min(k, len(ids))  # every document ties; the engines return the smaller doc ids first
        return pd.DataFrame({"query_id": ["q"] * rows, "doc_id": np.arange(rows), "source_id": ids[:rows],
                             "rank": np.arange(1, rows + 1), "score": np.ones(rows)})

    hits = ties_by_source_id(search, ["x"], k=3, n_docs=len(ids), extra=4)
    assert hits["source_id"].tolist() == ["d00", "d01", "d02"] and hits["rank"].tolist() == [1, 2, 3]


def test_norms_recorded_loaded_and_kept_by_append(tmp_path, data_dir):
    lines = (data_dir / "cacm" / "cacm.json").read_text("utf-8").splitlines()
    (tmp_path / "a.jsonl").write_text("\n".join(lines[:300]) + "\n", "utf-8")
    (tmp_path / "b.jsonl").write_text("\n".join(lines[300:400]) + "\n", "utf-8")
    (tmp_path / "ab.jsonl").write_text("\n".join(lines[:400]) + "\n", "utf-8")
    kw = dict(backend="cpu", scheduler="sync", progress=False, **ANSERINI)
    pipelines.run("bm25", tmp_path / "a.jsonl", out=tmp_path / "idx", **kw)
    pipelines.run("bm25", tmp_path / "b.jsonl", out=tmp_path / "idx", append=True, backend="cpu",
                  scheduler="sync", progress=False)
    pipelines.run("bm25", tmp_path / "ab.jsonl", out=tmp_path / "one", **kw)
    pipelines.run("bm25", tmp_path / "ab.jsonl", out=tmp_path / "exact", **dict(kw, norms="exact"))
    meta = json.loads((tmp_path / "idx" / "index.json").read_text())
    assert meta["norms"] == "lucene" and meta["tokenizer"]["analyzer"] == "anserini"
    q = "parallel sorting algorithms for computers"
    a = pipelines.BM25Index.load(tmp_path / "idx").search(q, k=20)
    b = pipelines.BM25Index.load(tmp_path / "one").search(q, k=20)
    c = pipelines.BM25Index.load(tmp_path / "exact").search(q, k=20)
    assert a["source_id"].tolist() == b["source_id"].tolist() and np.array_equal(a["score"], b["score"])
    assert not np.array_equal(b["score"], c["score"])  # the one-byte lengths change the scores
    assert "norms='lucene'" in repr(pipelines.BM25Index.load(tmp_path / "one"))
    with pytest.raises(ValueError, match="norms"):  # an append takes the index's norms, never others
        pipelines.run("bm25", tmp_path / "b.jsonl", out=tmp_path / "exact", append=True, norms="lucene",
                      backend="cpu", scheduler="sync", progress=False)


@pytest.mark.parametrize("kw, match", [
    (dict(norms="lucene", variant="robertson"), "variant=.lucene."),
    (dict(norms="bytes"), "norms must be one of"),
    (dict(analyzer="anserini", stemmer="porter"), "leave stemmer out"),
    (dict(analyzer="anserini", stopwords="english"), "leave stopwords out"),
    (dict(analyzer="lucene"), "analyzer must be one of"),
    (dict(norms="lucene", index_format=1), "index_format"),
])
def test_bad_settings_refused(tmp_path, data_dir, kw, match):
    with pytest.raises(ValueError, match=match):
        pipelines.run("bm25", data_dir / "cacm" / "cacm.json", out=tmp_path / "idx", backend="cpu",
                      progress=False, **kw)


def test_phrase_queries_sum_the_words_they_score(tmp_path, data_dir):
    lines = (data_dir / "cacm" / "cacm.json").read_text("utf-8").splitlines()
    (tmp_path / "a.jsonl").write_text("\n".join(lines[:250]) + "\n", "utf-8")
    pipelines.run("bm25", tmp_path / "a.jsonl", out=tmp_path / "idx", backend="cpu", scheduler="sync",
                  progress=False, positions=True, **ANSERINI)
    index = pipelines.BM25Index.load(tmp_path / "idx")
    phrase = index.search('"programming language"~2 compiler', k=50)
    plain = index.search("programming language compiler", k=250).set_index("source_id")["score"]
    assert len(phrase) > 0 and np.array_equal(phrase["score"].to_numpy(), plain[phrase["source_id"]].to_numpy())


def test_lucene_doc_count_leaves_out_documents_without_tokens(tmp_path):
    """Lucene's N and avgdl count the documents with a token: Anserini 1.7.1 (``-bm25 -bm25.k1 0.9 -bm25.b 0.4``)
    printed 0.264000, 0.232700 (apple) and 0.649600 (cherry) for this corpus, whose d3 is all stopwords."""
    docs = pd.DataFrame({"id": ["d1", "d2", "d3", "d4"],
                         "text": ["apple banana", "apple cherry cherry date", "the of and", "elder fig grape"]})
    kw = dict(id_column="id", text_column="text", backend="cpu", scheduler="sync", progress=False)
    pipelines.run("bm25", docs, out=tmp_path / "idx", **kw, **ANSERINI)
    hits = pipelines.BM25Index.load(tmp_path / "idx").search({"1": "apple", "2": "cherry"}, k=10)
    got = anserini_scores(hits["query_id"].to_numpy(), hits["score"].to_numpy())
    assert hits["source_id"].tolist() == ["d1", "d2", "d2"] and got.tolist() == [0.264, 0.2327, 0.6496]
