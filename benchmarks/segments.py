"""The bm25 index in its two formats, side by side: one global vocabulary with weighted postings
(``index_format=1``) against segments storing tf and lengths (``index_format=2``).

For each format, alternated in one process: the build (wall clock and per-stage seconds, medians of
``--repeats`` builds after one warm-up build), the bytes on disk and per posting, and the load
(``BM25Index.load``, median).  The corpus is 20 Newsgroups (one line per post), replicated to ``--gb``
GB of text for a GPU run.

    python benchmarks/segments.py --backend cpu                 # 20 Newsgroups, ~35 MB
    python benchmarks/segments.py --backend gpu --gb 2 --json results/segments-gpu-<device>-<date>.json
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

import bm25 as bench  # noqa: E402  (the corpus helpers of the bm25 benchmark)


def _bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--gb", type=float, default=0.0, help="replicate 20 Newsgroups to this many GB (0: once)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scheduler", default="auto")
    ap.add_argument("--data", default=None, help="folder holding corpora/20news-bydate.tar.gz")
    ap.add_argument("--workdir", default="/tmp/cutext-segments")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from cutext import pipelines
    from cutext.stages.engines.bm25_index import BM25Index

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    corpus = bench.Corpus(bench.find_20news(args.data))
    src = work / "corpus"
    if args.gb:
        bench.write_replicated(corpus, src, args.gb * 1e9, 256e6, seed=0)
    elif not src.exists():
        bench.write_lines(corpus.texts, src, 2)
    kw = dict(backend=args.backend, format="lines", scheduler=args.scheduler, progress=False)
    runs = {1: [], 2: []}
    for i in range(args.repeats + 1):  # the first round warms both up (imports, kernels, caches)
        for fmt in (1, 2):
            out = work / f"index-{fmt}"
            shutil.rmtree(out, ignore_errors=True)
            t = time.perf_counter()
            r = pipelines.run("bm25", str(src), out=str(out), index_format=fmt, **kw)
            sec = time.perf_counter() - t
            if i:
                runs[fmt].append((sec, dict(r.timings), r.counts))
    rows = []
    for fmt in (1, 2):
        out = work / f"index-{fmt}"
        loads = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            BM25Index.load(out, backend=args.backend)
            loads.append(time.perf_counter() - t)
        counts = runs[fmt][-1][2]
        stages = {k: round(statistics.median(r[1][k] for r in runs[fmt]), 3) for k in runs[fmt][0][1]}
        nbytes = _bytes(out)
        rows.append({"index_format": fmt, "build_s": round(statistics.median(r[0] for r in runs[fmt]), 3),
                     "builds_s": [round(r[0], 3) for r in runs[fmt]], "stages_s": stages,
                     "input_bytes": counts["input_bytes"], "n_postings": counts["n_postings"],
                     "index_bytes": nbytes, "bytes_per_posting": round(nbytes / counts["n_postings"], 3),
                     "load_s": round(statistics.median(loads), 3)})
    print(f"\n{args.backend}, {rows[0]['input_bytes'] / 1e9:.3f} GB of text, {rows[0]['n_postings']:,} postings, "
          f"medians of {args.repeats}")
    print("| format | build s | GB/s | stages s | index MB | bytes / posting | load s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        st = ", ".join(f"{k} {v}" for k, v in r["stages_s"].items())
        print(f"| {r['index_format']} | {r['build_s']} | {r['input_bytes'] / 1e9 / r['build_s']:.3f} | {st} | "
              f"{r['index_bytes'] / 1e6:.1f} | {r['bytes_per_posting']} | {r['load_s']} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"backend": args.backend, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
