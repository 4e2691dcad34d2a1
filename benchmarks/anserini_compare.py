"""cutext against Anserini 1.7.1's runs (tests/data/anserini) on CACM and SciFact, four ways: cutext's
tokenizer or ``analyzer="anserini"``, exact lengths or ``norms="lucene"`` (k1 0.9, b 0.4, top 100, CPU).

    python benchmarks/anserini_compare.py [--out DIR]

Prints, a row a setting: queries whose top 10 (and top 100) equal Anserini's, mean overlap@10, MAP at depth
100 of both (cutext's scores as Anserini prints them, ``pipelines.trec.anserini_scores``), and the share of
Anserini's printed scores that cutext's equal.
"""
from __future__ import annotations

import argparse
import gzip
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from cutext import pipelines
from cutext.pipelines.evaluate import evaluate
from cutext.pipelines.trec import anserini_scores, read_trec_qrels

ROOT = Path(__file__).resolve().parents[1]
DATA, REF = ROOT / "data", ROOT / "tests" / "data" / "anserini"
SETTINGS = {"cutext": dict(stopwords="lucene", stemmer="porter"), "analyzer": dict(analyzer="anserini"),
            "norms": dict(stopwords="lucene", stemmer="porter", norms="lucene"),
            "both": dict(analyzer="anserini", norms="lucene")}


def collection(name: str):
    """(documents frame, queries {id: text}, qrels path)."""
    if name == "cacm":
        docs = pd.read_json(DATA / "cacm" / "cacm.json", lines=True, dtype={"id": str}).rename(
            columns={"contents": "text"})
        topics = pipelines.trec.read_queries(DATA / "cacm" / "topics.cacm.txt")
        return docs, dict(zip(topics["query_id"], topics["query"])), DATA / "cacm" / "qrels.cacm.txt"
    with gzip.open(DATA / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    docs = pd.DataFrame({"id": [r["_id"] for r in rows], "text": [r["title"] + "\n" + r["text"] for r in rows]})
    with gzip.open(DATA / "scifact" / "topics.test.tsv.gz", "rt", encoding="utf-8") as fh:
        topics = dict(line.rstrip("\n").split("\t", 1) for line in fh)
    return docs, topics, DATA / "scifact" / "qrels.test.txt"


def reference(name: str) -> pd.DataFrame:
    with gzip.open(REF / f"run.{name}.txt.gz", "rt", encoding="utf-8") as fh:
        rows = [line.split() for line in fh]
    return pd.DataFrame({"query_id": [r[0] for r in rows], "doc_id": [r[2] for r in rows],
                         "score": [float(r[4]) for r in rows]})


def compare(ours: pd.DataFrame, ref: pd.DataFrame, qrels) -> dict:
    mine = {q: g["doc_id"].tolist() for q, g in ours.groupby("query_id", sort=False)}
    theirs = {q: g["doc_id"].tolist() for q, g in ref.groupby("query_id", sort=False)}
    same10 = sum(mine.get(q, [])[:10] == t[:10] for q, t in theirs.items())
    same100 = sum(mine.get(q, []) == t for q, t in theirs.items())
    overlap = np.mean([len(set(mine.get(q, [])[:10]) & set(t[:10])) / max(1, len(t[:10])) for q, t in theirs.items()])
    j = ref.merge(ours, on=["query_id", "doc_id"], how="left", suffixes=("_ref", "_ours"))
    return {"queries": len(theirs), "top10": same10, "top100": same100, "overlap10": overlap,
            "map": evaluate(ours, qrels, ["map"])["map"], "map_anserini": evaluate(ref, qrels, ["map"])["map"],
            "scores_equal": float((j["score_ref"] == j["score_ours"]).mean())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="folder for the indexes (default: a temporary one)")
    a = ap.parse_args(argv)
    print(f"python {platform.python_version()}, {platform.processor() or platform.machine()}, "
          f"pandas {pd.__version__}, numpy {np.__version__}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(a.out or tmp)
        rows = []
        for name in ("cacm", "scifact"):
            docs, topics, qrels_path = collection(name)
            ref, qrels = reference(name), read_trec_qrels(qrels_path)
            queries = pd.DataFrame({"query_id": list(topics), "query": list(topics.values())})
            for label, kw in SETTINGS.items():
                t0 = time.perf_counter()
                pipelines.run("bm25", docs, out=out / f"{name}-{label}", id_column="id", text_column="text", k1=0.9,
                              b=0.4, backend="cpu", progress=False, **kw)
                hits = pipelines.BM25Index.load(out / f"{name}-{label}").search(queries, k=100)
                ours = pd.DataFrame({"query_id": hits["query_id"].astype(str), "doc_id": hits["source_id"].astype(str),
                                     "score": anserini_scores(hits["query_id"].to_numpy(), hits["score"].to_numpy())})
                row = {"collection": name, "setting": label, **compare(ours, ref, qrels),
                       "seconds": time.perf_counter() - t0}
                rows.append(row)
                print(f"{name} {label}: {row}", flush=True)
    table = pd.DataFrame(rows)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
