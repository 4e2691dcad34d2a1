#!/usr/bin/env python
"""Text ingestion of the ``cluster`` and ``lda`` pipelines: seconds from text files to counts.

Both pipelines read text corpora through the corpus front end (``stages/text/frontend.py``): the cluster
pipeline takes its ``(doc, term, tf)`` triples with :func:`cutext.pipelines.cluster.corpus_counts`,
the lda pipeline its bag of words with :func:`cutext.stages.engines.lda_chunk.bow_from_corpus`.  This script
times both, end to end from files on local disk to host arrays, on all of 20 Newsgroups
(``20news-bydate.tar.gz``, 18,846 posts, read as the archive) and Reuters-21578 (one document per
article, 21,578 articles, written once as a JSON Lines file by
:func:`cutext.pipelines.datasets.load_reuters21578`), for the backends asked for.

Each figure is the median of ``--repeats`` runs after one warm-up run (which compiles the numba
kernels / CUDA kernels and starts the scheduler's pools).  Prints a table; ``--json PATH`` writes
the rows.

    python benchmarks/ingest.py --data ../shared/data --backends cpu,gpu --repeats 3
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _corpora(data: Path, tmp: Path) -> dict:
    from cutext.pipelines import datasets

    news = data / "corpora" / "20news-bydate.tar.gz"
    reuters = datasets.load_reuters21578(data / "corpora" / "reuters21578.tar.gz")
    rpath = datasets.write_jsonl(reuters, tmp / "reuters.jsonl")
    return {"20news (tar.gz)": (news, {}),
            "reuters (jsonl)": (rpath, {"text_column": "text", "id_column": "id"})}


def _time(fn, repeats: int) -> tuple[float, list[float]]:
    fn()  # warm-up
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs), runs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.environ.get("CUTEXT_DATA", "../shared/data"))
    ap.add_argument("--backends", default="cpu")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)

    from cutext.pipelines.cluster import corpus_counts
    from cutext.stages.engines.lda_chunk import bow_from_corpus
    from cutext.stages.text.tokenize import TokenizerConfig

    cfg = TokenizerConfig.make()
    rows = []
    print(f"# python {platform.python_version()}, {os.cpu_count()} cpus, {platform.node()}")
    with tempfile.TemporaryDirectory() as tmp:
        corpora = _corpora(Path(a.data), Path(tmp))
        for be in a.backends.split(","):
            for name, (path, kw) in corpora.items():
                jobs = {
                    "cluster corpus_counts": lambda: corpus_counts(path, cfg, be, scheduler="sync", **kw),
                    "lda bow_from_corpus": lambda: bow_from_corpus(path, tokenizer=cfg, backend=be,
                                                                   scheduler="sync", **kw),
                }
                for job, fn in jobs.items():
                    try:
                        med, runs = _time(fn, a.repeats)
                        rows.append({"backend": be, "corpus": name, "job": job, "seconds": med, "runs": runs})
                    except Exception as e:  # a row per failure, the run goes on
                        rows.append({"backend": be, "corpus": name, "job": job, "error": repr(e)[:200]})
                    r = rows[-1]
                    print(f"{be:5s} {name:18s} {job:24s} "
                          + (f"{r['seconds']:8.3f} s" if "seconds" in r else r["error"]), flush=True)
    print("\nbackend corpus             job                      median s")
    for r in rows:
        print(f"{r['backend']:7s} {r['corpus']:18s} {r['job']:24s} "
              + (f"{r['seconds']:8.3f}" if "seconds" in r else "ERROR"))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
