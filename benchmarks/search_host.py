#!/usr/bin/env python
"""Where the time of ``BM25Index.search`` goes: the host side (query tokenization and term lookup,
the result frame) against the query engine.

The GPU engine scans postings at 1 % of HBM bandwidth in ``benchmarks/bm25.py``'s search rows: a
batch's time there is mostly host work that every engine shares.  This script splits one
``search`` call into its parts on an index of all of 20 Newsgroups (18,846 posts, one per line,
built once with the default analysis) and 10,000 real queries (the posts' Subject lines, as in
``benchmarks/bm25.py``), top 10, batches of ``--batch-size``:

* ``query_matrix``: tokenize a batch and look its terms up in the vocabulary (the query CSR);
* ``engine``: :meth:`BM25Index.topk_arrays` of that CSR (``--engine``, default the CPU engine);
* ``result frame``: the rest of ``search`` -- gathering ``query_id`` / ``source_id`` strings and
  building the DataFrame (``search`` with the engine's arrays answered from a cache, through
  :meth:`BM25Index.topk_start`);
* ``search``: the whole call, end to end.

Each figure is the median of ``--repeats`` runs after a warm-up (numba compiles).  Prints a table;
``--json PATH`` writes the rows.

    python benchmarks/search_host.py --data ../shared/data --repeats 7
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

sys.path.insert(0, str(Path(__file__).resolve().parent))


def median_seconds(fn, repeats: int) -> float:
    """Median wall seconds of ``repeats`` calls of ``fn`` after one untimed call."""
    fn()
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.environ.get("CUTEXT_DATA", "../shared/data"))
    ap.add_argument("--n-queries", type=int, default=10_000)
    ap.add_argument("--batch-size", type=int, default=4096)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--engine", default="cpu", choices=["cpu", "gpu", "sparse"])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", default=None)
    ap.add_argument("--mb", type=float, default=None,
                    help="index MB of replicated 20 Newsgroups (benchmarks/bm25.py's subset, tokenizer 'plain') "
                         "instead of one copy with the default analysis")
    a = ap.parse_args(argv)

    from cutext import pipelines

    from bm25 import Corpus, tokenizer_kwargs, write_lines, write_replicated  # the same corpus and queries

    corpus = Corpus(Path(a.data) / "corpora" / "20news-bydate.tar.gz")
    queries = corpus.queries(a.n_queries)
    be = "gpu" if a.engine == "gpu" else "cpu"
    print(f"# python {platform.python_version()}, {os.cpu_count()} cpus, {platform.node()}; "
          f"{a.n_queries:,} queries, k={a.k}, batch_size={a.batch_size}, engine={a.engine}")
    with tempfile.TemporaryDirectory() as tmp:
        if a.mb:
            man = write_replicated(corpus, Path(tmp) / "corpus", a.mb * 1e6, 256e6, 0)
            files, tok = [str(Path(tmp) / "corpus")], tokenizer_kwargs("plain")[0]
            print(f"# index of {man['bytes'] / 1e6:,.0f} MB, {man['n_docs']:,} documents, tokenizer plain")
        else:
            files, tok = [str(f) for f in write_lines(corpus.texts, Path(tmp) / "corpus", 4)], {}
        pipelines.run("bm25", files, out=Path(tmp) / "idx", backend=be, format="lines", progress=False, **tok)
        idx = pipelines.BM25Index.load(Path(tmp) / "idx", backend=be)
        batches = [queries[s:s + a.batch_size] for s in range(0, len(queries), a.batch_size)]
        mats = [idx.query_matrix(b) for b in batches]

        def engine():
            for Q in mats:
                idx.topk_arrays(Q, a.k, a.engine)

        arrays = [idx.topk_arrays(Q, a.k, a.engine) for Q in mats]
        from cutext.stages.runtime import compute

        rows = {
            "query_matrix": median_seconds(lambda: [idx.query_matrix(b) for b in batches], a.repeats),
            "engine": median_seconds(engine, a.repeats),
        }
        compute.step_profile(reset=True)
        rows["search"] = median_seconds(lambda: idx.search(queries, k=a.k, batch_size=a.batch_size, engine=a.engine),
                                 a.repeats)
        prof = compute.step_profile(reset=True)  # $CUTEXT_GPUTEXT_PROFILE=1: search's own clocks
        if prof:
            print("search's clocks, ms per call (mean of " f"{a.repeats + 1} calls): "
                  + ", ".join(f"{k.removeprefix('search: ')} {1e3 * v / (a.repeats + 1):.1f}" for k, v in prof.items()))
        answers = iter(())
        real = idx.topk_start

        def cached(Q, k, engine="auto", max_workspace=None, n_threads=None, doc_filter=None):
            out = next(answers)
            return lambda: out

        def frames_only():
            nonlocal answers
            answers = iter(arrays)
            idx.topk_start = cached
            try:
                idx.search(queries, k=a.k, batch_size=a.batch_size, engine=a.engine)
            finally:
                idx.topk_start = real

        with_cache = median_seconds(frames_only, a.repeats)
        rows["result frame"] = max(0.0, with_cache - rows["query_matrix"])
    out = []
    print(f"\n{'part':14s} {'ms':>9s} {'share':>7s}")
    for name in ("query_matrix", "engine", "result frame", "search"):
        sec = rows[name]
        out.append({"part": name, "seconds": sec, "n_queries": a.n_queries, "engine": a.engine,
                    "batch_size": a.batch_size, "k": a.k})
        print(f"{name:14s} {sec * 1e3:9.1f} {sec / rows['search']:7.0%}")
    print(f"\nsearch: {a.n_queries / rows['search']:,.0f} queries/s; host side (query_matrix + result frame) "
          f"alone: {a.n_queries / (rows['query_matrix'] + rows['result frame']):,.0f} queries/s")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
