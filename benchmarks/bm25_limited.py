"""The 2 GB bm25 index under limited device memory.

Builds the index of ``--gb`` GB of replicated 20 Newsgroups posts (the data of ``benchmarks/bm25.py
--gpu``, reused when it exists) twice:

1. unrestricted, in-process on one GPU (the run ``benchmarks/bm25.py --gpu`` times), with RMM's peak
   (cudf's and CuPy's allocations: cutext routes CuPy to RMM during a run);
2. in-process again with RMM limited to ``--fraction`` of that peak (a ``LimitingResourceAdaptor``
   over the same ``cudaMallocAsync`` resource: an allocation past the limit raises), which makes the
   pipeline keep its partitions in files (``spill=``, :func:`cutext.stages.runtime.compute.gpu_spill_budget`),

and checks that the two index directories hold the same vocabulary, documents and postings.  The
indexes are format 1 (``index_format=1``: weighted postings in term ranges sized to the device budget,
counted as ``postings files``).
Prints a table; ``--json`` writes the rows.

    source benchmarks/gpu_env.sh
    python benchmarks/bm25_limited.py --data ../shared/data --gb 2 --fraction 0.25
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bm25 as bench  # noqa: E402  (benchmarks/bm25.py: the data and the 20 Newsgroups loader)

GB, MB = 1e9, 1e6


INDEX_TABLES = {  # file or folder of an index directory -> its columns (the format the loader reads)
    "vocab.parquet": {"term_id": "int", "term": "string", "df": "int", "idf": "float", "w0": "float"},
    "documents": {"doc_id": "int", "source_id": "any", "length": "int", "replaced": "int"},
    "postings": {"term_id": "int", "doc_id": "int", "tf": "int", "weight": "float"},
}


def read_dir(path: Path) -> dict:
    """The three tables of an index directory (folders read file by file in name order)."""
    from cutext.stages.runtime.artifacts import read_table

    return {name: read_table(path / name, cols, what=name) for name, cols in INDEX_TABLES.items()}


def same_index(a: Path, b: Path) -> str:
    """'' when the two directories hold equal tables (weights to 1e-6 relative), else what differs."""
    x, y = read_dir(a), read_dir(b)
    for name in INDEX_TABLES:
        ta, tb = x[name], y[name]
        if ta.num_rows != tb.num_rows:
            return f"{name}: {ta.num_rows} rows vs {tb.num_rows}"
        for col in ta.column_names:
            ca, cb = ta[col].combine_chunks(), tb[col].combine_chunks()
            if col in ("weight", "idf", "w0"):
                va, vb = ca.to_numpy(), cb.to_numpy()
                if not np.allclose(va, vb, rtol=1e-6, atol=0):
                    return f"{name}.{col}: max |diff| {np.abs(va - vb).max()}"
            elif not ca.equals(cb):
                return f"{name}.{col} differs"
    return ""


def _build(path: Path, out: Path, repeats: int) -> dict:
    """``repeats`` in-process GPU builds under the current RMM resource; the last one's seconds,
    RMM peak (cudf and CuPy: cutext routes CuPy to RMM during a run) and stages."""
    import rmm.statistics

    from cutext import pipelines

    rmm.statistics.enable_statistics()
    rows = []
    for _ in range(repeats):
        rmm.statistics.push_statistics()
        t = time.perf_counter()
        r = pipelines.run("bm25", str(path), out=str(out), backend="gpu", scheduler="sync", format="lines",
                          index_format=1, progress=False)
        sec = time.perf_counter() - t
        peak = rmm.statistics.pop_statistics().peak_bytes
        rows.append({"seconds": sec, "peak_bytes": peak, "stages": dict(r.timings), "counts": dict(r.counts),
                     "files": len(list((out / "postings").glob("*.parquet")))})
    return rows[-1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="folder holding corpora/20news-bydate.tar.gz (default: $CUTEXT_DATA)")
    ap.add_argument("--gb", type=float, default=2.0, help="GB of replicated text (default 2)")
    ap.add_argument("--fraction", type=float, default=0.25,
                    help="the limited run's RMM limit as a fraction of the unrestricted peak (default 0.25)")
    ap.add_argument("--workdir", default="/tmp/cutext-bench", help="where the data and indexes go")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    work = Path(args.workdir)
    corpus = bench.Corpus(bench.find_20news(args.data))
    data = work / f"data-{args.gb:g}GB"
    man = bench.write_replicated(corpus, data, args.gb * GB, 256 * MB, 0)
    print(f"data: {man['bytes'] / GB:.2f} GB, {man['n_docs']:,} documents under {data}", flush=True)
    a, b = work / "limited-a", work / "limited-b"
    import rmm

    base = rmm.mr.CudaAsyncMemoryResource()
    rmm.mr.set_current_device_resource(base)
    rows = []
    u = _build(data, a, 2)  # the first run compiles the kernels
    rows.append({"run": "unrestricted", "limit_mib": None, **u})
    print(f"unrestricted: {u['seconds']:.2f} s, RMM peak {u['peak_bytes'] / 2**20:,.0f} MiB "
          f"({u['peak_bytes'] / man['bytes']:.2f}x the input)", flush=True)
    limit = int(u["peak_bytes"] * args.fraction)
    rmm.mr.set_current_device_resource(rmm.mr.LimitingResourceAdaptor(base, limit))
    try:
        lim = _build(data, b, 1)
        lim["equal"] = same_index(a, b) or "equal"
    except Exception as exc:
        lim = {"seconds": None, "error": f"{type(exc).__name__}: {str(exc)[:300]}", "equal": "-"}
    rows.append({"run": f"RMM limited to {args.fraction:g} x that peak", "limit_mib": limit / 2**20, **lim})
    print()
    print(f"input {man['bytes'] / GB:.2f} GB; RMM peaks count cudf and CuPy allocations")
    print("| run | RMM limit (MiB) | seconds | GB/s | RMM peak (MiB) | x input | postings files | index |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    nb = man["bytes"]
    for r in rows:
        sec, peak, lim_ = r.get("seconds"), r.get("peak_bytes"), r["limit_mib"]
        cells = [r["run"], f"{lim_:,.0f}" if lim_ else "none", f"{sec:.2f}" if sec else "-",
                 f"{nb / sec / GB:.3f}" if sec else "-", f"{peak / 2**20:,.0f}" if peak else "-",
                 f"{peak / nb:.2f}" if peak else "-", str(r.get("files", "-")),
                 r.get("equal", r.get("error", "reference"))]
        print("| " + " | ".join(cells) + " |")
        if r.get("error"):
            print(f"  error: {r['error']}")
        if r.get("stages"):
            print("  stages (s): " + ", ".join(f"{k} {v:.2f}" for k, v in r["stages"].items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"input_bytes": man["bytes"], "rows": rows}, indent=1, default=str))
    shutil.rmtree(a, ignore_errors=True)
    shutil.rmtree(b, ignore_errors=True)
    return 0 if rows[-1].get("equal") == "equal" else 1


if __name__ == "__main__":
    sys.exit(main())
