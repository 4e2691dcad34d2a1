"""The bm25 index in its two formats, side by side: one global vocabulary with weighted postings
(``index_format=1``) against segments storing tf and lengths (``index_format=2``).

For each format, alternated in one process: the build (wall clock and per-stage seconds, medians of
``--repeats`` builds after one warm-up build; the batches an in-process segmented build went through, the
peak host RSS and, on the GPU, the peak device memory used, each over its value before the build), the bytes
on disk and per posting, and the load (``BM25Index.load``, median; ``--no-load`` skips it).  The corpus is
20 Newsgroups (one line per post), replicated to ``--gb`` GB of text (files of 256 MB) for a GPU run.

    python benchmarks/segments.py --backend cpu                 # 20 Newsgroups, ~35 MB
    python benchmarks/segments.py --backend gpu --gb 2 --json results/segments-gpu-<device>-<date>.json
    python benchmarks/segments.py --backend gpu --gb 16 --formats 2 --scheduler sync --repeats 1 --no-load
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
    ap.add_argument("--cluster-gpus", default="", help="also build on a LocalCUDACluster of these many GPUs, "
                    "e.g. 1,2 (the in-process build is the baseline)")
    ap.add_argument("--formats", default="1,2", help="index formats to build, e.g. 2 (default 1,2)")
    ap.add_argument("--append-gb", type=float, default=0.0,
                    help="also append this many GB (another replica of 20 Newsgroups) to the in-process format-2 "
                         "index, and build those GB alone for comparison (default 0: no append)")
    ap.add_argument("--no-load", action="store_true", help="skip the loads of the built indexes")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    formats = [int(x) for x in args.formats.split(",") if x]

    from cutext import pipelines
    from cutext.stages.engines.bm25_index import BM25Index

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    src = bench.corpus_folder(args.data, work, args.gb)
    kw = dict(backend=args.backend, format="lines", scheduler=args.scheduler, progress=False)
    runs = _builds(pipelines, src, work, kw, args.repeats, formats=formats)
    rows = []
    for n in [int(x) for x in args.cluster_gpus.split(",") if x]:
        from distributed import Client

        from cutext.pipelines import local_gpu_cluster

        with local_gpu_cluster(n) as cluster, Client(cluster) as client:
            ckw = dict(backend="gpu", format="lines", client=client, progress=False)
            for fmt, rs in _builds(pipelines, src, work, ckw, args.repeats, f"-client{n}", formats).items():
                rows.append(_row(fmt, rs, f"client, {n} GPU(s)"))
    for pos, fmt in enumerate(formats):
        out = work / f"index-{fmt}"
        loads = []
        for _ in range(0 if args.no_load else args.repeats):
            t = time.perf_counter()
            BM25Index.load(out, backend=args.backend)
            loads.append(time.perf_counter() - t)
        counts = runs[fmt][-1][2]
        nbytes = _bytes(out)
        rows.insert(pos, dict(_row(fmt, runs[fmt], "in process"), index_bytes=nbytes,
                                  bytes_per_posting=round(nbytes / counts["n_postings"], 3),
                                  load_s=round(statistics.median(loads), 3) if loads else ""))
    appends = _appends(pipelines, args, work, kw) if args.append_gb and 2 in formats else []  # after the loads
    print(f"\n{args.backend}, {rows[0]['input_bytes'] / 1e9:.3f} GB of text, {rows[0]['n_postings']:,} postings, "
          f"medians of {args.repeats}")
    print("| where | format | build s | GB/s | batches | host peak RSS GB (+ over before) | device peak GB | stages s "
          "| moved between workers MB | index MB | bytes / posting | load s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        st = ", ".join(f"{k} {v}" for k, v in r["stages_s"].items())
        mb = f"{r['index_bytes'] / 1e6:.1f}" if "index_bytes" in r else ""
        host = f"{r['host_peak_gb']} (+{r['host_added_gb']})" if r["host_peak_gb"] is not None else ""
        print(f"| {r['where']} | {r['index_format']} | {r['build_s']} | {r['input_bytes'] / 1e9 / r['build_s']:.3f} | "
              f"{r['batches']} | {host} | {'' if r['device_peak_gb'] is None else r['device_peak_gb']} | "
              f"{st} | {r['moved_bytes'] / 1e6:.1f} | {mb} | {r.get('bytes_per_posting', '')} | "
              f"{r.get('load_s', '')} |")
    if appends:
        print(f"\nappend {args.append_gb:g} GB to the {rows[0]['input_bytes'] / 1e9:.1f} GB index, in process, medians "
              f"of {args.repeats} (each append adds to the index the one before left)")
        print("| what | s | GB/s | stages s |")
        print("| --- | --- | --- | --- |")
        for r in appends:
            st = ", ".join(f"{k} {v}" for k, v in r["stages_s"].items())
            print(f"| {r['what']} | {r['s']} | {r['input_bytes'] / 1e9 / r['s']:.3f} | {st} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"backend": args.backend, "rows": rows, "appends": appends}, indent=2))
    return 0


def _appends(pipelines, args, work: Path, kw: dict) -> list:
    """``--append-gb``: the in-process format-2 index grown by appends of another corpus (``repeats``
    appends after one warm-up, timed one by one), then fresh builds of that corpus alone; two rows."""
    more = bench.corpus_folder(args.data, work / "append", args.append_gb)
    index = work / "index-2"
    out = []
    # the same text appended again and again: its ids repeat, so every copy is kept (no id check of the index)
    for what, fn in (("append to the index", lambda: pipelines.run("bm25", str(more), out=str(index), append=True,
                                                                    on_duplicate="keep", **kw)),
                     ("build of the appended text alone", lambda: pipelines.run(
                         "bm25", str(more), out=str(work / "index-append-alone"), index_format=2, **kw))):
        runs = []
        for i in range(args.repeats + 1):
            shutil.rmtree(work / "index-append-alone", ignore_errors=True)
            t = time.perf_counter()
            r = fn()
            if i:
                runs.append((time.perf_counter() - t, dict(r.timings), _bytes(more)))
        out.append({"what": what, "s": round(statistics.median(x[0] for x in runs), 3),
                    "runs_s": [round(x[0], 3) for x in runs], "input_bytes": runs[-1][2],
                    "stages_s": {k: round(statistics.median(x[1].get(k, 0.0) for x in runs), 3) for k in runs[0][1]}})
    return out


def _builds(pipelines, src: Path, work: Path, kw: dict, repeats: int, tag: str = "", formats=(1, 2)) -> dict:
    """Builds of both formats alternated: ``{format: [(seconds, timings, counts)]}``, the counts with the peak
    host RSS of the build (``host_peak``, ``host_before``: bytes of this process and its children) and, on the
    GPU, the peak device memory used over its value before (``device_peak_mib``); the first round warms both
    up (imports, kernels, caches) and is not kept.  Each build prints a line as it ends."""
    runs = {fmt: [] for fmt in formats}
    gpu = kw.get("backend") == "gpu"
    for i in range(repeats + 1):
        for fmt in formats:
            out = work / f"index{tag}-{fmt}"
            shutil.rmtree(out, ignore_errors=True)
            moved0 = _moved(kw.get("client"))
            rss = bench.RssWatch()
            before = rss.sample() if rss.enabled else None
            dev = bench.GpuMemWatch(bench.GpuMemWatch.used_mib() if gpu else None)
            t = time.perf_counter()
            with rss, dev:
                r = pipelines.run("bm25", str(src), out=str(out), index_format=fmt, **kw)
            sec = time.perf_counter() - t
            c = dict(r.counts, moved_bytes=_moved(kw.get("client")) - moved0, host_peak=rss.peak,
                     host_before=before, device_peak_mib=dev.peak_mib)
            print(f"{'warm-up ' if not i else ''}build{tag} format {fmt}: {sec:.2f} s, "
                  f"{c['input_bytes'] / 1e9 / sec:.3f} GB/s, batches {c.get('batches', 1)}, host peak RSS "
                  f"{_gb(rss.peak)} GB ({_gb(before)} before), device peak {dev.peak_mib} MiB over before",
                  flush=True)
            if i:
                runs[fmt].append((sec, dict(r.timings), c))
    return runs


def _gb(n) -> float | None:
    return None if n is None else round(n / 1e9, 2)


def _moved(client) -> int:
    """Bytes the client's workers have sent to each other so far: their outgoing transfer logs, requests from
    a worker.  Not ``transfer_outgoing_bytes_total``, which also counts what the caller gathers (results,
    statistics); not the incoming logs, which miss the replication of ``scatter(broadcast=True)``."""
    if client is None:
        return 0
    workers = set(client.scheduler_info()["workers"])
    logs = client.run(lambda dask_worker: [(e.get("who"), int(e.get("total", 0)))
                                           for e in dask_worker.transfer_outgoing_log])
    return sum(n for log in logs.values() for who, n in log if who in workers)


def _row(fmt: int, runs: list, where: str) -> dict:
    counts = runs[-1][2]
    return {"where": where, "index_format": fmt, "build_s": round(statistics.median(r[0] for r in runs), 3),
            "builds_s": [round(r[0], 3) for r in runs],
            "stages_s": {k: round(statistics.median(r[1][k] for r in runs), 3) for k in runs[0][1]},
            "input_bytes": counts["input_bytes"], "n_postings": counts["n_postings"],
            "moved_bytes": int(statistics.median(r[2]["moved_bytes"] for r in runs)),
            "batches": counts.get("batches", 1),  # counted by a build in batches (in process, segmented)
            "host_peak_gb": _gb(max((r[2]["host_peak"] for r in runs if r[2]["host_peak"] is not None), default=None)),
            "host_added_gb": _gb(max((r[2]["host_peak"] - r[2]["host_before"] for r in runs
                                      if r[2]["host_peak"] is not None and r[2]["host_before"] is not None),
                                     default=None)),
            "device_peak_gb": _gb(max((r[2]["device_peak_mib"] * 2**20 for r in runs
                                       if r[2]["device_peak_mib"] is not None), default=None))}


if __name__ == "__main__":
    sys.exit(main())
