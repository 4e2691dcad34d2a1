"""An index of many small appends with and without the merge policy, against a compacted one (CPU).

20 Newsgroups (one line per post) is cut into ``--pieces`` contiguous files; the first is built and the others
appended one commit each, once with ``merge_policy="none"`` (a segment a piece stays) and once with
``"tiered"`` (runs of ten adjacent segments of a size tier merged in the appends' commits); a copy of the
"none" index is compacted into one segment (``bm25-compact``).  For each: the appends' seconds, the segments
left, the load (``BM25Index.load``, median of ``--repeats``) and search q/s (``--queries`` Subject lines, top
10, ``--threads`` threads, median of ``--repeats`` runs alternated between the three indexes); the three
must return the same documents.

    python benchmarks/segments_merge.py --json benchmarks/results/segments_merge-cpu-<date>.json
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import bm25 as bench  # noqa: E402  (the corpus helpers and environment of the bm25 benchmark)


def _build(pipelines, append_index, files: list, out: Path, policy: str) -> dict:
    kw = dict(backend="cpu", scheduler="sync", progress=False)
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    pipelines.run("bm25", files[0], out=out, **kw)
    build_s = time.perf_counter() - t0
    merged, t0 = 0, time.perf_counter()
    for f in files[1:]:
        r = append_index(f, out, merge_policy=policy, **kw)
        merged += r.counts.get("merged_segments", 0)
    appends_s = time.perf_counter() - t0
    meta = json.loads((out / "index.json").read_text())
    print(f"  {policy}: build {build_s:.2f} s, {len(files) - 1} appends {appends_s:.2f} s, "
          f"{len(meta['segments'])} segments ({merged} merged away)", flush=True)
    return {"build_s": build_s, "appends_s": appends_s, "segments": len(meta["segments"]), "merged_segments": merged}


def _pieces(texts: list, dest: Path, n: int) -> list:
    """``texts`` as ``n`` contiguous JSON Lines files of about equal bytes, each post with its number as id
    (a lines file's ids are its line numbers, which repeat from one piece to the next)."""
    import numpy as np

    dest.mkdir(parents=True)
    cum = np.cumsum([len(t) + 1 for t in texts])
    cuts = [0] + [int(np.searchsorted(cum, cum[-1] * i / n)) for i in range(1, n)] + [len(texts)]
    files = []
    for i in range(n):
        p = dest / f"part-{i:05d}.jsonl"
        p.write_text("".join(json.dumps({"id": str(j), "text": texts[j]}) + "\n" for j in range(cuts[i], cuts[i + 1])),
                     encoding="utf-8")
        files.append(p)
    return files


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pieces", type=int, default=64)
    ap.add_argument("--queries", type=int, default=4000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--data", default=None, help="folder holding corpora/20news-bydate.tar.gz")
    ap.add_argument("--workdir", default="/tmp/cutext-segments-merge")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from cutext import pipelines
    from cutext.pipelines.bm25_index_ops import append_index, compact_index
    from cutext.stages.engines.bm25_index import BM25Index

    env = bench.environment()
    bench.print_environment(env)
    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    corpus = bench.Corpus(bench.find_20news(args.data))
    files = _pieces(corpus.texts, work / "pieces", args.pieces)
    mb = sum(f.stat().st_size for f in files) / 1e6
    print(f"== 20 Newsgroups: {corpus.n_docs} posts, {mb:.1f} MB in {len(files)} pieces", flush=True)
    _build(pipelines, append_index, files[:3], work / "warm-up", "none")  # compile the numba kernels first
    rows = {p: _build(pipelines, append_index, files, work / p, p) for p in ("none", "tiered")}
    shutil.copytree(work / "none", work / "compacted")
    t0 = time.perf_counter()
    compact_index(work / "compacted")
    rows["compacted"] = {"compact_s": time.perf_counter() - t0, "segments": 1}
    print(f"  compacted: {rows['compacted']['compact_s']:.2f} s", flush=True)

    queries = corpus.queries(args.queries)
    loads = {n: [] for n in rows}
    speeds = {n: [] for n in rows}
    results = {}
    for _ in range(args.repeats):
        for name in rows:  # alternated, so that the machine's load falls on all three alike
            t0 = time.perf_counter()
            index = BM25Index.load(work / name, backend="cpu")
            loads[name].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            res = index.search(queries, k=10, n_threads=args.threads)
            speeds[name].append(len(queries) / (time.perf_counter() - t0))
            results.setdefault(name, res[["query_id", "source_id"]].reset_index(drop=True))
            del index
    same = all(results[n].equals(results["compacted"]) for n in rows)
    base = statistics.median(speeds["compacted"])
    print(f"\n== search, {len(queries)} queries, top 10, {args.threads} thread(s); medians of {args.repeats}")
    print("| index | segments | appends s | load s | q/s | x compacted |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, row in rows.items():
        row.update(load_s=statistics.median(loads[name]), qps=statistics.median(speeds[name]),
                   loads=loads[name], qps_runs=speeds[name])
        row["x_compacted"] = row["qps"] / base
        print(f"| {name} | {row['segments']} | {row.get('appends_s', float('nan')):.2f} | {row['load_s']:.3f} | "
              f"{row['qps']:,.0f} | {row['x_compacted']:.2f} |")
    print(f"same results in all three: {same}")
    if args.json:
        Path(args.json).write_text(json.dumps({"env": env, "corpus_mb": mb, "pieces": len(files),
                                               "queries": len(queries), "threads": args.threads,
                                               "repeats": args.repeats, "same_results": same, "rows": rows},
                                              indent=2) + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
