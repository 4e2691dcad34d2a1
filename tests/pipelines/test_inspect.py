"""Results a user can inspect: one meaning per name (doc_id = position, source_id =
the caller's id) in every pipeline's Parquet, short reprs, headline figures, one ``out=`` default."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from cutext import pipelines
from cutext.pipelines._result import RunResult, default_out


@pytest.fixture
def corpus(tmp_path, data_dir):
    """80 CACM abstracts as JSON Lines, ids CACM-xxxx (the caller's ids)."""
    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()[:80]
    p = tmp_path / "cacm80.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    ids = [json.loads(ln)["id"] for ln in lines]
    return p, ids


KW = dict(backend="cpu", progress=False, text_column="contents", id_column="id")


def _doc_columns_follow_the_rule(df: pd.DataFrame, ids: list, where: str):
    assert df["doc_id"].dtype == np.int64, where
    assert df["source_id"].astype(str).tolist() == [ids[i] for i in df["doc_id"]], where


def test_every_pipeline_output_has_doc_id_positions_and_source_ids(tmp_path, corpus):
    path, ids = corpus
    b = pipelines.run("bm25", path, out=tmp_path / "bm25", scheduler="sync", **KW)
    # the segmented index: a document's doc_id is its position in the segments' order of index.json
    names = json.loads((b.path / "index.json").read_text())["segments"]
    seg_docs = [pq.read_table(b.path / "segments" / n / "docs.parquet").to_pandas() for n in names]
    assert all(list(d.columns) == ["source_id", "length"] for d in seg_docs)
    docs = pd.concat(seg_docs, ignore_index=True)
    _doc_columns_follow_the_rule(docs.assign(doc_id=np.arange(len(docs), dtype=np.int64)), ids, "bm25 segments/")
    assert len(docs) == len(ids)
    b1 = pipelines.run("bm25", path, out=tmp_path / "bm25-1", scheduler="sync", index_format=1, **KW)
    docs = pq.read_table(b1.path / "documents").to_pandas()
    assert docs["doc_id"].tolist() == list(range(len(ids)))
    _doc_columns_follow_the_rule(docs, ids, "bm25 documents/")
    c = pipelines.run("cluster", path, out=tmp_path / "cl", threshold=0.3, **KW)
    a = pd.read_parquet(c.path / "assignments.parquet")
    _doc_columns_follow_the_rule(a, ids, "cluster assignments")
    cl = pd.read_parquet(c.path / "clusters.parquet")
    assert cl["first_doc_id"].dtype == np.int64 and cl["first_doc_id"].between(0, len(ids) - 1).all()
    m = pipelines.run("lda", path, out=tmp_path / "lda", K=3, iterations=3, **KW)
    d = pd.read_parquet(m.path / "documents.parquet")
    assert list(d.columns) == ["doc_id", "source_id", "length", "topic", "topic_prob"]
    assert d["doc_id"].tolist() == list(range(len(ids)))
    _doc_columns_follow_the_rule(d, ids, "lda documents.parquet")
    dt = pd.read_parquet(m.path / "doc_topic.parquet")
    assert list(dt.columns[:2]) == ["doc_id", "source_id"]
    _doc_columns_follow_the_rule(dt, ids, "lda doc_topic.parquet")


def test_lda_model_written_before_the_rule_still_loads(tmp_path, corpus):
    """Older models name the source id ``name`` in documents.parquet (and record no checksums: they load
    with ``verify=False``)."""
    from cutext.pipelines.lda import LDAModel

    path, ids = corpus
    r = pipelines.run("lda", path, out=tmp_path / "lda", K=3, iterations=2, **KW)
    f = r.path / "documents.parquet"
    old = pq.read_table(f).select(["doc_id", "source_id", "length"])  # as written before the main topics
    pq.write_table(old.rename_columns(["doc_id", "name", "length"]), f)
    m = LDAModel.load(r.path, verify=False)
    assert m.documents["source_id"].tolist() == ids


def test_reprs_are_one_short_line(tmp_path, corpus, arpa):
    from cutext.pipelines.lda import LDAModel
    from cutext.pipelines.ngram import NGramModel
    from cutext.stages.engines.streamcluster import StreamClusterer

    path, ids = corpus
    b = pipelines.run("bm25", path, out=tmp_path / "bm25", scheduler="sync", k1=0.9, b=0.4, **KW)
    index = pipelines.BM25Index.load(b.path, backend="cpu")
    lm = NGramModel.load(arpa / "kenlm" / "test.arpa", backend="cpu")
    c = pipelines.run("cluster", path, out=tmp_path / "cl", threshold=0.3, **KW)
    sc = StreamClusterer.load(c.path / "state", backend="cpu")
    m = LDAModel.load(pipelines.run("lda", path, out=tmp_path / "lda", K=3, iterations=2, **KW).path)
    kept = pipelines.BM25Index.load(pipelines.run("bm25", path, out=tmp_path / "kept", scheduler="sync",
                                                  store_text=True, **KW).path, backend="cpu")
    reprs = {
        "bm25": (repr(index), rf"^BM25Index\(N=80, V={len(index.vocab):,}, postings={index.matrix.nnz:,}, "
                              r"variant='lucene', k1=0\.9, b=0\.4, backend='cpu', path='.*bm25'\)$"),
        "ngram": (repr(lm), r"^NGramModel\(order=5, V=\d+, ngrams=\[37, 47, 11, 6, 4\], bytes_per_ngram=[\d.]+, "
                            r"backend='cpu', path='.*test\.arpa'\)$"),
        "cluster": (repr(sc), rf"^StreamClusterer\(threshold=0\.3, top_k=35, method='reference', backend='cpu', "
                              rf"batch_size=1, clusters={sc.n_clusters}, docs=80, terms=[\d,]+\)$"),
        "lda": (repr(m), r"^LDAModel\(K=3, V=[\d,]+, docs=80, tokens=[\d,]+, sampler='sparse', alpha=0\.1, "
                         r"beta=0\.01, iterations=2, LLPT=-[\d.]+, trained on 'cpu', path='.*lda'\)$"),
        "result": (repr(c), rf"^RunResult\('cluster', path='.*cl', backend='cpu', clusters={sc.n_clusters}, "
                            r"documents=80, [\d.]+ s\)$"),
        "texts": (repr(kept), r"^BM25Index\(N=80, .*, backend='cpu', texts=True, path='.*kept'\)$"),
        # KenLM's scores of these two sentences (shared data README): -1.567985 and -64.594437
        "scores": (repr(lm.score(["looking on a little more loin", "language modeling is fun ."])),
                   r"^Scores\(sentences=2, tokens=13, oov=3, log10_prob=-66\.1624, perplexity=[\d.]+\)$"),
        "topk": (repr(lm.top_k_next(["the"] * 400, k=7)), r"^TopK\(contexts=400, k=7, words\[0\]=\['\S+', "
                                                        r"'\S+', '\S+', '\S+', '\S+', '\.\.\.'\]\)$"),
    }
    for name, (text, pattern) in reprs.items():
        assert "\n" not in text and len(text) < 300, name
        assert re.match(pattern, text), (name, text)


def test_headline_figures(tmp_path, corpus, arpa):
    path, ids = corpus
    b = pipelines.run("bm25", path, out=tmp_path / "bm25", scheduler="sync", **KW)
    assert b.headline == {"documents": 80, "terms": b.counts["n_terms"], "postings": b.counts["n_postings"]}
    c = pipelines.run("cluster", path, out=tmp_path / "cl", threshold=0.3, **KW)
    assert c.headline["clusters"] == json.loads((c.path / "cluster.json").read_text())["counts"]["n_clusters"]
    m = pipelines.run("lda", path, out=tmp_path / "lda", K=3, iterations=2, **KW)
    assert m.headline["LLPT"] == pd.read_parquet(m.path / "llpt.parquet")["llpt"].iloc[-1]
    src = tmp_path / "s.txt"
    src.write_text("looking on a little more loin\nlanguage modeling is fun .\n", encoding="utf-8")
    n = pipelines.run("ngram", src, out=tmp_path / "ng", model=arpa / "kenlm" / "test.arpa", backend="cpu",
                      progress=False)
    # KenLM's scores of these two sentences (shared data README): -1.567985 and -64.594437 over 7 + 6 tokens
    assert n.headline["perplexity"] == pytest.approx(10 ** ((1.567985 + 64.594437) / 13), rel=1e-5)
    assert str(n).splitlines()[1].strip().startswith("perplexity = ")
    assert "perplexity=" in repr(n)


def test_one_out_default_for_every_pipeline(tmp_path, corpus, monkeypatch, arpa):
    path, _ = corpus
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for name, kw in (("bm25", dict(scheduler="sync", **KW)), ("cluster", dict(threshold=0.3, **KW)),
                     ("lda", dict(K=2, iterations=1, **KW))):
        r = pipelines.run(name, path, **kw)
        assert r.path == (work / f"{name}-out").absolute() == (work / default_out(name)).absolute()
    r = pipelines.run("ngram", path, model=arpa / "kenlm" / "test.arpa", backend="cpu", progress=False,
                      text_column="contents")
    assert r.path == (work / "ngram-out").absolute()
    from cutext.pipelines.__main__ import main

    (work / "bm25-out").rename(work / "older")
    assert main(["bm25", str(path), "--backend", "cpu", "--scheduler", "sync", "--text-column", "contents",
                 "--no-progress"]) == 0
    assert (work / "bm25-out" / "index.json").is_file()


def test_run_result_summary_leads_with_the_headline():
    r = RunResult("lda", "x", "cpu", "sync", 1, {"n_docs": 3}, {"sample": 1.0}, {}, {"LLPT": -9.87654})
    lines = str(r).splitlines()
    assert lines[1] == "  LLPT = -9.8765" and "n_docs=3" in lines[2]


def test_run_result_html_shows_headline_counts_and_seconds_escaped():
    r = RunResult("bm25", "<out>", "cpu", "sync", 1, {"n_docs": 3204, "n_terms": 17748}, {"read": 0.25, "write": 1.5},
                  {}, {"documents": 3204})
    html = r._repr_html_()
    assert "documents = <b>3,204</b>" in html or "documents = <b>3204</b>" in html
    assert "<td>n_terms</td><td style='text-align:right'>17,748</td>" in html
    assert "<td>write</td><td style='text-align:right'>1.500</td>" in html
    assert "&lt;out&gt;" in html and "<out>" not in html
    assert "total 1.75 s" in html


def test_stage_results_print_shapes_not_arrays(tmp_path, corpus, arpa):
    from cutext import stages
    from cutext.pipelines.ngram import NGramModel
    from cutext.stages.engines import segments
    from cutext.stages.runtime.reprs import describe

    path, _ = corpus
    texts = pd.read_json(path, lines=True).rename(columns={"contents": "text"})[["text"]]
    tokens = stages.tokenize(texts)
    vocab, encoded = stages.encode(tokens)
    c = stages.count(encoded)
    V = len(vocab)
    b = pipelines.run("bm25", path, out=tmp_path / "bm25", scheduler="sync", **KW)
    seg = segments.read_segment(b.path / "segments" / "seg-00000")
    merged = segments.merge_segments([seg])
    lm = NGramModel.load(arpa / "kenlm" / "test.arpa", backend="cpu")
    shown = {
        "tokens": (tokens, r"^TokenTable\(texts=dask DataFrame\[1 partition\], column='text', storage='memory', "
                           r"lengths=int64\[80\]\)$"),
        "counts": (c, rf"^Counts\(counts=dask DataFrame\[1 partition\], n_docs=80, n_terms={V:,}, n_tokens=[\d,]+, "
                      rf"df=int64\[{V + 1:,}\], lengths=int64\[80\]\)$"),
        "bm25": (stages.bm25(c), rf"^BM25Postings\(postings=dask DataFrame\[\d+ partitions?\], n_docs=80, "
                                 rf"avgdl=[\d.]+, delta=0, idf=float64\[{V + 1:,}\]\)$"),
        "chunks": (stages.lda_chunks(c, vocab, K=4), rf"^Chunks\(n_tokens=[\d,]+, n_docs=80, V={V:,}, K=4, "
                                                     r"n_dense=[\d,]+, chunks=\d+\)$"),
        "segment": (seg, r"^Segment\(n_docs=80, n_terms=[\d,]+, n_postings=[\d,]+, sum_dl=[\d,]+, "
                         r"path='.*seg-00000', postings_read=True\)$"),
        "merged": (merged, r"^MergedSegments\(n_docs=80, avgdl=[\d.]+, vocab=large_string\[[\d,]+\], "
                           r"doc=int32\[[\d,]+\], tf=int32\[[\d,]+\]\)$"),
    }
    for name, (obj, pattern) in shown.items():
        text = repr(obj)
        assert "\n" not in text and len(text) < 200 and "array(" not in text, (name, text)
        assert re.match(pattern, text), (name, text)
    assert describe(np.zeros((3, 1000), np.float32)) == "float32[3 x 1,000]"
    assert describe(pd.DataFrame({"a": range(5), "b": range(5)})) == "DataFrame[5 x 2]"
    assert describe(list(range(20000))) == "list[20,000]" and describe(np.int64(12345)) == "12,345"
    assert describe("x" * 100) == repr("x" * 40 + "...")
    s = lm.score(["looking on a little more loin", "language modeling is fun ."] * 6)
    frame = s.to_frame()
    assert list(frame.columns) == ["log10_prob", "tokens", "oov", "perplexity"] and len(frame) == 12
    assert frame["perplexity"].iloc[0] == pytest.approx(10 ** (1.567985 / 7), rel=1e-5)
    html = s._repr_html_()
    assert html.count("</tr>") == 11 and "2 more sentences" in html  # a header row and the first 10


def test_topic_table_and_top_terms_read_as_one_row_a_topic_or_cluster(tmp_path, corpus):
    from cutext.pipelines.lda import LDAModel
    from cutext.stages.engines.streamcluster import StreamClusterer

    path, _ = corpus
    r = pipelines.run("lda", path, out=tmp_path / "lda", K=3, iterations=3, **KW)
    m = LDAModel.load(r.path)
    t = m.topic_table(5)
    assert list(t.columns) == ["topic", "weight", "docs", "words"] and t["topic"].tolist() == [0, 1, 2]
    assert t["weight"].to_numpy() == pytest.approx(m.nk / m.nk.sum()) and t["weight"].sum() == pytest.approx(1)
    top = m.top_words(5)
    assert t["words"].tolist() == [" ".join(top[top["topic"] == k]["term"]) for k in range(3)]
    # a document counts for the topic of its largest count, as the dense theta's argmax
    theta = m.theta()
    has_tokens = m.documents["length"].to_numpy() > 0
    assert t["docs"].tolist() == np.bincount(theta[has_tokens].argmax(axis=1), minlength=3).tolist()
    pd.testing.assert_frame_equal(r.topic_table(5), t)
    assert "<table" in m._repr_html_() and t["words"][0].split()[0] in m._repr_html_()
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        m.topic_table(0)
    with pytest.raises(ValueError, match="top_terms\\(\\) reads a 'cluster' output; this is a 'lda' result"):
        r.top_terms()

    c = pipelines.run("cluster", path, out=tmp_path / "cl", threshold=0.3, **KW)
    got = c.top_terms(3)
    cl = pd.read_parquet(c.path / "clusters.parquet")
    assert list(got.columns) == ["cluster_id", "size", "weight", "terms", "first_doc_id"] and len(got) == len(cl)
    assert got["size"].is_monotonic_decreasing and got["weight"].sum() == pytest.approx(1)
    by_id = cl.set_index("cluster_id")
    assert got["terms"].tolist() == [" ".join(by_id.loc[i, "terms"][:3]) for i in got["cluster_id"]]
    live = StreamClusterer.load(c.path / "state", backend="cpu").top_terms(3)
    pd.testing.assert_frame_equal(live, got.drop(columns="first_doc_id"))
    with pytest.raises(ValueError, match="topic_table\\(\\) reads a 'lda' output"):
        c.topic_table()
