"""The classic IR collections as they are distributed: SMART documents and queries (``.I/.T/.A/.W/.X``:
CISI, CACM's originals, Cranfield, MED), relevance lists with grades written ``0.000000``, ir_measures'
measure names, and ``irds:`` ids of ir_datasets.

Oracle: pytrec_eval (trec_eval 9); the SMART files are written here in CISI's layout, or made from the
bundled CACM (the shared data holds CACM's HTML, not its original SMART files)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pandas as pd
import pytest
import pytrec_eval

from cutext import pipelines
from cutext.pipelines.__main__ import main
from cutext.pipelines.evaluate import evaluate
from cutext.pipelines.trec import (
    read_qrels,
    read_queries,
    read_smart_qrels,
    read_smart_queries,
    read_trec_qrels,
    read_trec_run,
    read_trec_topics,
)
from cutext.stages.readers.base import CorpusError
from cutext.stages.readers.source import read_corpus

DATA = Path(__file__).resolve().parents[2] / "data"

# three records in CISI.ALL's layout: .T title, .A author(s), .W abstract, .X cross-references
CISI_ALL = """.I 1
.T
18 Editions of the Dewey Decimal Classifications
.A
Comaromi, J.P.
.W
   The present study is a history of the DEWEY Decimal
Classification.
.X
1	5	1
92	1	1
.I 2
.T
Use Made of Technical Libraries
.A
Slater, M.
.A
Keenan, S.
.W
This report is an analysis of 6300 acts of use
in 104 technical libraries in the United Kingdom.
.X
2	1	2
.I 0003
.T
Two Kinds of Power
.K
organization, control
.W
The relationships between the organization and control of writing
"""
CISI_QRY = """.I 1
.W
What problems and concerns are there in making up descriptive titles?
.I 2
.T
Computers in libraries
.A
Someone, A.
.W
How can actually pertinent data be retrieved?
.B
(no source)
"""
CISI_REL = "".join(f"{q:>6}{d:>6}\t0\t0.000000\n" for q, d in ((1, 1), (1, 3), (2, 2), (2, 3)))


@pytest.fixture
def cisi(tmp_path) -> Path:
    for name, text in (("CISI.ALL", CISI_ALL), ("CISI.QRY", CISI_QRY), ("CISI.REL", CISI_REL)):
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def _docs(path, **kw) -> pd.DataFrame:
    ddf, _, fmt = read_corpus(path, **kw)
    df = ddf.compute()
    df.attrs["format"] = fmt
    return df


# ----------------------------------------------------------------------------- SMART documents and queries

def test_smart_documents_are_detected_by_content_and_read_as_records(cisi):
    df = _docs(cisi / "CISI.ALL")
    assert df.attrs["format"] == "smart"
    assert list(df["source_id"]) == ["1", "2", "3"]  # .I 0003 is record "3", as the relevance lists name it
    first = df["text"].iloc[0]
    assert first.startswith("18 Editions of the Dewey") and "history of the DEWEY Decimal\nClassification." in first
    assert "Comaromi" not in first and "92\t1\t1" not in first  # authors and cross-references are not its text
    assert "organization, control" in df["text"].iloc[2]  # .K keywords are


def test_smart_text_fields_are_chosen_by_letter_and_id_column_is_refused(cisi):
    df = _docs(cisi / "CISI.ALL", format="smart", text_column=["W", "A"])
    assert df["text"].iloc[1] == ("This report is an analysis of 6300 acts of use\nin 104 technical libraries in the "
                                  "United Kingdom.\nSlater, M.\n\nKeenan, S.")
    with pytest.raises(ValueError, match=r"SMART input names its fields by letter; got \['Z'\]"):
        _docs(cisi / "CISI.ALL", text_column="Z")
    with pytest.raises(CorpusError, match="id_column= does not apply to a SMART input"):
        _docs(cisi / "CISI.ALL", id_column="I")


@pytest.mark.parametrize("text, match", [
    ("some preamble\n.I 1\n.W\nx\n", None),  # not SMART by content: one document a line
    (".I 1\n.W\nx\n.Q\ny\n", r"line 4: \.Q is not a SMART field"),
    (".I 1\n.W\nx\n.I 01\n.W\ny\n", r"line 4: record \.I 1 appears twice \(first on line 1\)"),
    (".I 1\nstray text\n", r"line 2: text of record \.I 1 before its first field marker"),
])
def test_malformed_smart_files_name_the_line(tmp_path, text, match):
    f = tmp_path / "X.ALL"
    f.write_text(text, encoding="utf-8")
    if match is None:
        assert _docs(f).attrs["format"] == "lines"
        with pytest.raises(CorpusError, match=r"line 1: text before the first \.I record"):
            _docs(f, format="smart")
        return
    with pytest.raises(CorpusError, match=re.escape(str(f)) + ", " + match):
        _docs(f)


def test_smart_queries_are_their_title_and_text(cisi):
    q = read_queries(cisi / "CISI.QRY")
    assert list(q["query_id"]) == ["1", "2"]
    assert q["query"].iloc[1] == "Computers in libraries How can actually pertinent data be retrieved?"
    assert read_smart_queries(cisi / "CISI.QRY", fields=["W"])["query"].iloc[1].startswith("How can")
    (cisi / "empty.qry").write_text(".I 7\n.A\nNobody\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"empty\.qry, line 1: query '7' has no text in its \.T/\.W field"):
        read_queries(cisi / "empty.qry")


# ----------------------------------------------------------------------------- qrels

def test_a_smart_relevance_list_with_zero_grades_lists_relevant_pairs(cisi):
    q = read_qrels(cisi / "CISI.REL")
    assert q.to_dict("list") == {"query_id": ["1", "1", "2", "2"], "doc_id": ["1", "3", "2", "3"],
                                 "relevance": [1, 1, 1, 1]}
    assert read_smart_qrels(cisi / "CISI.REL").equals(q)
    with pytest.raises(ValueError, match=r"CISI\.REL, line 1: a SMART relevance list 'qid docid 0 0'.*read_qrels"):
        read_trec_qrels(cisi / "CISI.REL")  # read as TREC, every document id would be "0"
    (cisi / "qrels.text").write_text("01 1410  0 0\n01 1572  0 0\n02 2434  0 0\n", encoding="utf-8")
    assert read_qrels(cisi / "qrels.text")["query_id"].tolist() == ["1", "1", "2"]  # CACM's original layout


def test_trec_and_beir_qrels_take_whole_grades_written_as_floats(tmp_path):
    f = tmp_path / "q.txt"
    f.write_text("1 0 d1 2.000000\n1 0 d2 0.000000\n2 0 d1 -1.0\n", encoding="utf-8")
    assert read_trec_qrels(f)["relevance"].tolist() == [2, 0, -1]
    assert read_qrels(f)["relevance"].tolist() == [2, 0, -1]
    f.write_text("query-id\tcorpus-id\tscore\n1\td1\t1.0\n", encoding="utf-8")
    assert read_qrels(f)["relevance"].tolist() == [1]
    f.write_text("1 0 d1 0.5\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 1: relevance '0\.5' is not a whole number"):
        read_qrels(f)


# ----------------------------------------------------------------------------- measures by ir_measures names

IR_MEASURES = {"AP": ("map", "map"), "nDCG@10": ("ndcg@10", "ndcg_cut_10"), "R@1000": ("recall@1000", "recall_1000"),
               "P@30": ("P@30", "P_30"), "RR": ("mrr", "recip_rank"), "nDCG": ("ndcg", "ndcg")}


def test_ir_measures_names_equal_trec_eval_on_cacm():
    run = read_trec_run(DATA / "cacm" / "anserini-sample-run-cacm-bm25.txt")
    qrels = read_trec_qrels(DATA / "cacm" / "qrels.cacm.txt")
    means = evaluate(run, qrels, list(IR_MEASURES))
    run_d, qrels_d = {}, {}
    for q, d, s in zip(run["query_id"], run["doc_id"], run["score"], strict=True):
        run_d.setdefault(q, {})[d] = float(s)
    for q, d, r in zip(qrels["query_id"], qrels["doc_id"], qrels["relevance"], strict=True):
        qrels_d.setdefault(q, {})[d] = int(r)
    oracle = pytrec_eval.RelevanceEvaluator(qrels_d, {te for _, te in IR_MEASURES.values()}).evaluate(run_d)
    assert list(means) == [ours for ours, _ in IR_MEASURES.values()]
    for ours, te in IR_MEASURES.values():
        assert means[ours] == pytest.approx(sum(m[te] for m in oracle.values()) / len(oracle), abs=1e-12), ours


def test_an_unknown_measure_names_the_ir_measures_spellings():
    with pytest.raises(ValueError, match=r"unknown metric 'Bpref'.*ir_measures names 'AP', 'RR', 'nDCG@k', 'R@k'"):
        evaluate({"1": {"d": 1.0}}, {"1": {"d": 1}}, ["Bpref"])


# ----------------------------------------------------------------------------- end to end

def _smart_cacm(folder: Path, n: int) -> dict:
    """The first ``n`` bundled CACM documents, CACM's topics and qrels in the SMART layout of CACM's original
    files (``cacm.all``, ``query.text``, ``qrels.text``), and the same documents as JSON Lines keyed by number."""
    rows = [json.loads(x) for x in (DATA / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()[:n]]
    num = {r["id"]: str(int(r["id"].split("-")[1])) for r in rows}
    (folder / "cacm.all").write_text("".join(f".I {num[r['id']]}\n.W\n{r['contents']}\n" for r in rows),
                                     encoding="utf-8")
    with open(folder / "docs.jsonl", "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps({"id": num[r["id"]], "contents": r["contents"]}) + "\n")
    topics = read_trec_topics(DATA / "cacm" / "topics.cacm.txt")
    (folder / "query.text").write_text("".join(f".I {q}\n.W\n{t}\n.N\n author {q}\n" for q, t in
                                               zip(topics["query_id"], topics["query"], strict=True)), encoding="utf-8")
    qrels = read_trec_qrels(DATA / "cacm" / "qrels.cacm.txt")
    kept = qrels[qrels["doc_id"].isin(list(num)) & (qrels["relevance"] > 0)]
    (folder / "qrels.text").write_text("".join(f"{int(q):02d} {num[d]:>4}  0 0\n" for q, d in
                                               zip(kept["query_id"], kept["doc_id"], strict=True)), encoding="utf-8")
    return {"docs": folder / "cacm.all", "jsonl": folder / "docs.jsonl", "queries": folder / "query.text",
            "qrels": folder / "qrels.text", "topics": topics}


def test_cacm_in_its_smart_layout_indexes_and_evaluates_as_the_converted_files(tmp_path, capsys):
    """No converter: the SMART files build, search and evaluate as JSON Lines and TREC files of the same
    collection do, on the command line and in Python."""
    c = _smart_cacm(tmp_path, 500)
    kw = dict(backend="cpu", scheduler="sync", progress=False, stopwords="lucene", stemmer="porter")
    smart = pipelines.run("bm25", c["docs"], out=tmp_path / "smart-index", **kw)
    plain = pipelines.run("bm25", c["jsonl"], out=tmp_path / "jsonl-index", **kw)
    assert json.loads((tmp_path / "smart-index" / "index.json").read_text())["format"] == "smart"
    queries = read_queries(c["queries"])
    assert queries["query"].tolist() == c["topics"]["query"].tolist()
    runs = [pipelines.BM25Index.load(r.path, backend="cpu").search(queries, k=1000) for r in (smart, plain)]
    qrels = read_qrels(c["qrels"])
    want = evaluate(runs[1], qrels, list(IR_MEASURES))
    assert evaluate(runs[0], qrels, list(IR_MEASURES)) == want and want["map"] > 0.1
    run_file = tmp_path / "smart.run"
    assert main(["search", str(tmp_path / "smart-index"), "--queries", str(c["queries"]), "--out", str(run_file),
                 "--k", "1000"]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(run_file), str(c["qrels"]), "--metrics", "AP", "nDCG@10", "R@1000"]) == 0
    printed = dict(line.split("\t") for line in capsys.readouterr().out.splitlines())
    assert printed == {k: f"{want[k]:.4f}" for k in ("map", "ndcg@10", "recall@1000")}


# ----------------------------------------------------------------------------- ir_datasets ids

def test_irds_without_ir_datasets_says_what_to_install(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ir_datasets", None)  # import fails as where it is not installed
    with pytest.raises(RuntimeError, match=r"pip install ir_datasets"):
        read_qrels("irds:beir/scifact/test")
    run = tmp_path / "r.run"
    run.write_text("1 Q0 d 1 1.0 t\n", encoding="utf-8")
    assert main(["evaluate", str(run), "irds:beir/scifact/test"]) == 2
    assert "pip install ir_datasets" in capsys.readouterr().err


def _fake_ir_datasets(monkeypatch):
    """A stand-in ``ir_datasets`` with one dataset, as the package's records look (named tuples)."""
    Doc = types.SimpleNamespace
    docs = [Doc(doc_id="d1", default_text=lambda: "gpu text analytics"),
            Doc(doc_id="d2", default_text=lambda: "library science and catalogues")]
    queries = [Doc(query_id="q1", default_text=lambda: "gpu  analytics")]
    qrels = [Doc(query_id="q1", doc_id="d1", relevance=1)]
    ds = types.SimpleNamespace(has_docs=lambda: True, has_queries=lambda: True, has_qrels=lambda: True,
                               docs_iter=lambda: iter(docs), queries_iter=lambda: iter(queries),
                               qrels_iter=lambda: iter(qrels))

    def load(name):
        if name != "toy/test":
            raise KeyError(name)
        return ds

    monkeypatch.setitem(sys.modules, "ir_datasets", types.SimpleNamespace(load=load))


def test_irds_ids_give_documents_queries_and_qrels(monkeypatch, tmp_path):
    _fake_ir_datasets(monkeypatch)
    assert read_queries("irds:toy/test").to_dict("list") == {"query_id": ["q1"], "query": ["gpu analytics"]}
    assert read_qrels("irds:toy/test").to_dict("list") == {"query_id": ["q1"], "doc_id": ["d1"], "relevance": [1]}
    r = pipelines.run("bm25", "irds:toy/test", out=tmp_path / "ix", backend="cpu", scheduler="sync", progress=False)
    hits = pipelines.BM25Index.load(r.path, backend="cpu").search(read_queries("irds:toy/test"), k=1)
    assert hits["source_id"].tolist() == ["d1"]
    with pytest.raises(ValueError, match=r"ir_datasets has no dataset 'toy/tset'"):
        read_qrels("irds:toy/tset")


@pytest.mark.slow
def test_irds_scifact_from_a_cache_built_of_the_bundled_files(tmp_path):
    """The real package, offline: its cache entries of beir/scifact/test's queries and qrels made from the bundled
    SciFact files (its documents are read out of scifact.zip, not cached as a file)."""
    pytest.importorskip("ir_datasets", reason="ir_datasets is an optional extra (pip install 'cutext[irds]')")
    import gzip

    home = tmp_path / "irds"
    base = home / "beir" / "scifact"  # where ir_datasets caches the split's queries and qrels out of scifact.zip
    base.mkdir(parents=True)
    tsv = gzip.decompress((DATA / "scifact" / "topics.test.tsv.gz").read_bytes()).decode("utf-8")
    with open(base / "queries.json", "w", encoding="utf-8") as fh:
        for line in tsv.splitlines():
            qid, text = line.split("\t", 1)
            fh.write(json.dumps({"_id": qid, "text": text, "metadata": {}}) + "\n")
    trec = read_trec_qrels(DATA / "scifact" / "qrels.test.txt")
    (base / "test.qrels").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{r}\n" for q, d, r in zip(trec["query_id"], trec["doc_id"], trec["relevance"], strict=True)))
    # a process of its own: ir_datasets fixes its home folder when first imported
    code = ("import json, sys; from cutext.pipelines.trec import read_qrels, read_queries; "
            "q = read_qrels('irds:beir/scifact/test'); "
            "print(json.dumps([q.to_dict('list'), len(read_queries('irds:beir/scifact/test'))]))")
    env = {**os.environ, "IR_DATASETS_HOME": str(home), "IR_DATASETS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    qrels, n_queries = json.loads(out.stdout.strip().splitlines()[-1])
    got = pd.DataFrame(qrels).sort_values(["query_id", "doc_id"], ignore_index=True)
    assert got.equals(trec.sort_values(["query_id", "doc_id"], ignore_index=True)) and n_queries == 300
