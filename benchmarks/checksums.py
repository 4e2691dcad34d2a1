"""What the checksums of a BM25 index cost: sealing at build, verifying at load.

Builds an index of ``--gb`` GB of replicated 20 Newsgroups posts (the data of ``benchmarks/bm25.py``),
then times, medians of ``--repeats`` runs each:

* ``seal``: :func:`cutext.stages.runtime.checksums.seal` of the built index (what every build now adds before
  its swap: a CRC32 of every file, read back from the page cache on a pool of threads);
* ``load verify=True`` and ``load verify=False``: :meth:`BM25Index.load` with and without the CRC32 of
  every file (both run the value checks); their difference is the verification's cost.

Prints a table and writes ``--json``.  Example (one GPU)::

    python benchmarks/checksums.py --data .devdata --gb 2 --backend gpu --json out.json
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cutext import pipelines  # noqa: E402
from cutext.pipelines.bm25 import BM25Index  # noqa: E402
from cutext.stages.runtime import checksums  # noqa: E402

import bm25 as bench  # noqa: E402  (benchmarks/bm25.py: the replicated corpus)


def _median_time(fn, repeats: int) -> tuple[float, list[float]]:
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts), ts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=None, help="folder holding corpora/20news-bydate.tar.gz (default: CUTEXT_DATA)")
    ap.add_argument("--gb", type=float, default=0.1, help="GB of text to index (default 0.1)")
    ap.add_argument("--backend", default="auto", choices=["auto", "cpu", "gpu"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work", default=None, help="work folder (default: a temporary one, removed after)")
    ap.add_argument("--json", default=None, help="write the figures here")
    args = ap.parse_args(argv)

    work = Path(args.work or tempfile.mkdtemp(prefix="cutext-checksums-"))
    try:
        corpus = bench.Corpus(bench.find_20news(args.data))
        man = bench.write_replicated(corpus, work / f"data-{args.gb:g}GB", args.gb * 1e9, 256e6, seed=0)
        data = work / f"data-{args.gb:g}GB"
        out = work / "index"
        t = time.perf_counter()
        r = pipelines.run("bm25", str(data), out=out, backend=args.backend, format="lines", progress=False)
        build_s = time.perf_counter() - t
        files = sorted(p for p in out.rglob("*") if p.is_file())
        index_bytes = sum(p.stat().st_size for p in files)
        seal_s, seal_all = _median_time(lambda: checksums.seal(out, "index.json"), args.repeats)
        BM25Index.load(out, backend=r.backend)  # warm the page cache and the imports
        on_s, on_all = _median_time(lambda: BM25Index.load(out, backend=r.backend, verify=True), args.repeats)
        off_s, off_all = _median_time(lambda: BM25Index.load(out, backend=r.backend, verify=False), args.repeats)
        row = {"input_bytes": man["bytes"], "backend": r.backend, "build_s": build_s, "index_bytes": index_bytes,
               "files": len(files), "postings": r.counts.get("n_postings"), "threads": os.cpu_count(),
               "seal_s": seal_s, "seal_runs": seal_all, "load_verify_s": on_s, "load_verify_runs": on_all,
               "load_noverify_s": off_s, "load_noverify_runs": off_all,
               "verify_cost_s": on_s - off_s, "crc_gb_per_s": index_bytes / seal_s / 1e9}
        print(f"index of {man['bytes'] / 1e9:.2f} GB of text on {r.backend}: {index_bytes / 1e9:.3f} GB in "
              f"{len(files)} files, {row['postings']:,} postings, build {build_s:.2f} s "
              f"({os.cpu_count()} cores; medians of {args.repeats})")
        print("| step | seconds | note |")
        print("| --- | --- | --- |")
        print(f"| seal (CRC32 of every file, in each build) | {seal_s:.3f} | {row['crc_gb_per_s']:.2f} GB/s "
              f"from the page cache |")
        print(f"| load, verify=True | {on_s:.3f} | |")
        print(f"| load, verify=False | {off_s:.3f} | |")
        print(f"| verification cost | {on_s - off_s:.3f} | {100 * (on_s - off_s) / max(off_s, 1e-9):.0f} % of a "
              "load without it |")
        if args.json:
            Path(args.json).write_text(json.dumps(row, indent=1))
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
