#!/usr/bin/env python
"""BM25F on SciFact: retrieval quality of the abstract alone, title + abstract joined, and title + abstract as
BM25F fields (Robertson, Zaragoza and Taylor 2004) under a few field weights and b's.

Data: BEIR SciFact as the repository bundles it (``data/scifact``: 5,183 abstracts with ``title`` and ``text``,
the 300 test queries, 339 judgements; ``--data DIR`` for another copy of that folder).

Every row builds an index with the same BM25 settings (Lucene variant, ``--k1`` 0.9, ``--b`` 0.4: Anserini's
BEIR settings; Lucene's 33 English stopwords, Porter stemmer), on the CPU, then searches the 300 queries for
the top 1,000 documents and scores the run with :func:`cutext.pipelines.evaluate.evaluate` (trec_eval's MAP,
nDCG@10, recall@100).  Rows:

* ``body only``: ``text_column="text"``;
* ``title + body joined``: ``text_column=["title", "text"]`` (one text, the columns joined by a space; Anserini's
  "flat" BEIR index);
* ``BM25F ...``: ``text_column=["title", "text"]`` with ``field_weights`` / ``field_b`` (a field left out of
  ``field_b`` takes ``--b``).  With weights 1 and equal b's BM25F differs from the joined text only in the
  length normalisation (each field against its own mean length).

One more row, ``simplified BM25F (CombinedFieldQuery form)``, is not a cutext index: it scores the same tokens
(cutext's tokenizer) in numpy / scipy by the form of Lucene's ``CombinedFieldQuery``: the weighted tf and the
weighted field lengths are summed into one pseudo-field, normalised by one ``b`` against the mean of the
weighted lengths (exact lengths, not Lucene's one-byte norms); title weight ``--simplified-title-weight`` (2).

``build s`` is the index build after a first, untimed one (a BM25F build reads the input once a field).
``--json PATH`` writes the environment and the rows.  About a minute on 2 cores.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import bm25 as bench  # noqa: E402  (the benchmarks' environment record)

T0 = time.monotonic()
REPO = Path(__file__).resolve().parents[1]


def log(msg):
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


# (label, build keywords) of the rows; BM25F rows name their weights and b's
def rows(b: float) -> list:
    both = {"text_column": ["title", "text"]}
    return [
        ("body only", {"text_column": "text"}),
        ("title + body joined", both),
        ("BM25F title 1, body 1 (b 0.4 / 0.4)", dict(both, field_weights={"title": 1.0, "text": 1.0})),
        ("BM25F title 2, body 1 (b 0.4 / 0.4)", dict(both, field_weights={"title": 2.0})),
        ("BM25F title 3, body 1 (b 0.4 / 0.4)", dict(both, field_weights={"title": 3.0})),
        ("BM25F title 2, body 1 (b 0.2 / 0.6)", dict(both, field_weights={"title": 2.0},
                                                     field_b={"title": 0.2, "text": 0.6})),
        ("BM25F title 0.5, body 1 (b 0.4 / 0.4)", dict(both, field_weights={"title": 0.5})),
    ]


def simplified_bm25f(data: Path, queries, k1: float, b: float, weights: dict, k: int = 1000):
    """The run of the simplified BM25F (Lucene's ``CombinedFieldQuery``): ``tf~ = sum_f w_f tf_f``, ``len~ = sum_f
    w_f len_f``, ``score = idf * tf~ / (tf~ + k1 (1 - b + b len~ / mean len~))`` with Lucene's idf over the
    union of the fields; cutext's tokens (Lucene stopwords, Porter).  A frame (query_id, doc_id, score)."""
    import gzip

    import numpy as np
    import pandas as pd
    import scipy.sparse as sp

    from cutext.stages.text.tokenize import TokenizerConfig, tokenize_flat

    with gzip.open(data / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        recs = [json.loads(x) for x in fh if x.strip()]
    cfg = TokenizerConfig.make(stopwords="lucene", stemmer="porter")
    n = len(recs)
    toks = {f: tokenize_flat([r[f] for r in recs], cfg) for f in weights}
    vocab, ids = np.unique(np.concatenate([np.asarray(toks[f][0].to_pylist(), object) for f in weights]),
                           return_inverse=True)
    tf_c, union, length, a = sp.csr_matrix((n, len(vocab))), sp.csr_matrix((n, len(vocab))), np.zeros(n), 0
    for f, w in weights.items():
        rows = toks[f][1]
        tf = sp.csr_matrix((np.ones(len(rows)), (rows, ids[a:a + len(rows)])), shape=(n, len(vocab)))
        a += len(rows)
        tf_c, union = tf_c + w * tf, union + tf
        length += w * np.asarray(tf.sum(axis=1)).ravel()
    df = np.asarray((union > 0).sum(axis=0)).ravel()
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    norm = k1 * (1 - b + b * length / length.mean())
    m = tf_c.tocsr()
    m.data = idf[m.indices] * m.data / (m.data + np.repeat(norm, np.diff(m.indptr)))
    where = {t: i for i, t in enumerate(vocab)}
    qt, qrow = tokenize_flat(list(queries["query"]), cfg)
    q = np.zeros((len(queries), len(vocab)))
    for t, r in zip(qt.to_pylist(), qrow):
        if t in where:
            q[r, where[t]] += 1
    scores = np.asarray(m @ q.T).T
    out = []
    for i, qid in enumerate(queries["query_id"]):
        top = np.argsort(-scores[i], kind="stable")[:k]
        top = top[scores[i, top] > 0]
        out.append(pd.DataFrame({"query_id": qid, "doc_id": [str(recs[j]["_id"]) for j in top],
                                 "score": scores[i, top]}))
    return pd.concat(out, ignore_index=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=REPO / "data" / "scifact",
                   help="SciFact folder: corpus.jsonl.gz, topics.test.tsv.gz, qrels.test.txt")
    p.add_argument("--k1", type=float, default=0.9)
    p.add_argument("--b", type=float, default=0.4)
    p.add_argument("--simplified-title-weight", type=float, default=2.0)
    p.add_argument("--json", type=Path, help="write the environment and the rows here")
    args = p.parse_args(argv)

    from cutext import pipelines
    from cutext.pipelines.evaluate import evaluate
    from cutext.pipelines.trec import read_queries, read_trec_qrels
    from cutext.stages.engines.bm25_index import BM25Index

    env = bench.environment()
    print(json.dumps(env, indent=2))
    queries = read_queries(args.data / "topics.test.tsv.gz")
    qrels = read_trec_qrels(args.data / "qrels.test.txt")
    common = dict(variant="lucene", k1=args.k1, b=args.b, stopwords="lucene", stemmer="porter", id_column="_id",
                  backend="cpu", progress=False)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        # the process's first build loads the CPU kernels and the tokenizer's tables: not a row's cost
        pipelines.run("bm25", args.data / "corpus.jsonl.gz", out=Path(tmp) / "warm", **common, text_column="text")
        for i, (label, kw) in enumerate(rows(args.b)):
            t0 = time.perf_counter()
            r = pipelines.run("bm25", args.data / "corpus.jsonl.gz", out=Path(tmp) / f"ix{i}", **common, **kw)
            build = time.perf_counter() - t0
            index = BM25Index.load(r.path, backend="cpu")
            t0 = time.perf_counter()
            run = index.search(queries, k=1000)
            search = time.perf_counter() - t0
            m = evaluate(run, qrels, ["map", "ndcg@10", "recall@100"])
            row = {"row": label, **{k: v for k, v in kw.items()}, "map": m["map"], "ndcg@10": m["ndcg@10"],
                   "recall@100": m["recall@100"], "build_s": build, "search_s": search,
                   "n_terms": r.counts["n_terms"], "n_postings": r.counts["n_postings"]}
            out.append(row)
            log(f"{label}: MAP {m['map']:.4f} nDCG@10 {m['ndcg@10']:.4f} R@100 {m['recall@100']:.4f} "
                f"(build {build:.2f} s)")
    w = args.simplified_title_weight
    label = f"simplified BM25F (CombinedFieldQuery form, numpy) title {w:g}, body 1 (b {args.b:g})"
    m = evaluate(simplified_bm25f(args.data, queries, args.k1, args.b, {"title": w, "text": 1.0}), qrels,
                 ["map", "ndcg@10", "recall@100"])
    out.append({"row": label, "map": m["map"], "ndcg@10": m["ndcg@10"], "recall@100": m["recall@100"],
                "build_s": None, "search_s": None})
    log(f"{label}: MAP {m['map']:.4f} nDCG@10 {m['ndcg@10']:.4f} R@100 {m['recall@100']:.4f}")
    print(f"\nSciFact test (300 queries, 339 judgements), lucene k1={args.k1} b={args.b}, Lucene stopwords, Porter; "
          f"CPU ({env.get('cpu_model', '?')}, {env['cpu_count']} cores)\n")
    print("| fields | MAP | nDCG@10 | R@100 | build s |")
    print("| --- | --- | --- | --- | --- |")
    for row in out:
        build = "" if row["build_s"] is None else f"{row['build_s']:.2f}"
        print(f"| {row['row']} | {row['map']:.4f} | {row['ndcg@10']:.4f} | {row['recall@100']:.4f} | {build} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"environment": env, "settings": {"k1": args.k1, "b": args.b,
                                                                          "variant": "lucene",
                                                                          "stopwords": "lucene", "stemmer": "porter"},
                                         "rows": out}, indent=2) + "\n", encoding="utf-8")
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
