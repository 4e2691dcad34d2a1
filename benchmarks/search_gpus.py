"""Search of one segmented bm25 index on 1, 2, 4 GPUs of one process, against bm25s (numba, all cores).

The corpus is 20 Newsgroups (one line per post) replicated to ``--gb`` GB, indexed once on the GPU
(``index_format=2``: one segment per partition); a copy is compacted to one segment.  The queries are
the posts' Subject lines.  Rows (medians of ``--repeats`` searches of all queries after a warm-up;
tokenize + top-k + merge, the load excluded and reported): the index on one GPU as built (its
segments) and compacted, then sharded over ``--devices`` GPUs (``BM25Index.load(devices=[...])``),
then over the workers of a ``LocalCUDACluster`` of ``--client-gpus`` GPUs (``BM25Index.load(client=...)``:
a long-lived engine per worker), then bm25s's numba backend over the same weights with every core.  Every cutext
row's results are compared with the one-GPU row's (doc ids and ranks; scores to 1e-6).  With
``--filter-selectivity 0.01,0.1,0.5`` the compacted index on one GPU is searched again with a random mask of that
share of the documents (``search(filter=mask)``, the filter before top-k), against the unfiltered row.  With
``--profile`` each row also prints (and writes to ``--json``) the host clocks of ``BM25Index.search``
(``CUTEXT_GPUTEXT_PROFILE=1``, StepClock), ms per search: query csr (waiting for the tokenizer thread), engine (start),
engine (wait) (the engines' time not hidden behind the caller's work, and the merge of the shards' top k), collect (a
batch's rows and strings), result frame (the DataFrame of all batches).

    python benchmarks/search_gpus.py --gb 2 --devices 1,2 --client-gpus 1,2 \\
        --json results/search_gpus-gpu-<device>-<date>.json
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from cutext.kernels import search as ks  # noqa: E402
from cutext.stages.runtime.compute import PROFILE_ENV, cupy_from_rmm, step_profile  # noqa: E402

import bm25 as bench  # noqa: E402  (the corpus helpers and the bm25s peer of the bm25 benchmark)


def _search(idx, queries, k: int, bs: int, repeats: int, filter=None, client=None):
    idx.search(queries[: min(len(queries), bs)], k=k, batch_size=bs)  # warm-up: kernels, query hash
    step_profile(reset=True)  # --profile: the timed searches' clocks only
    if client is not None:
        client.run(step_profile, True)  # the workers' clocks too
    secs, out = [], None
    for _ in range(repeats):
        gc.collect()
        t = time.perf_counter()
        out = idx.search(queries, k=k, batch_size=bs, filter=filter)
        secs.append(time.perf_counter() - t)
    return statistics.median(secs), secs, out


def _search_peak_bytes(idx, queries, k: int, batch_size: int) -> int:
    """Peak bytes of device memory a search of a one-GPU index allocates (its workspace made anew; the
    index's arrays excluded): RMM's statistics around the call, CuPy allocating from RMM."""
    import rmm

    idx._sm.workspace = ks.Workspace()  # the engine's buffers counted from their first batch
    old = rmm.mr.get_current_device_resource()
    stats = rmm.mr.StatisticsResourceAdaptor(old)
    rmm.mr.set_current_device_resource(stats)
    try:
        with cupy_from_rmm():
            idx.search(queries, k=k, batch_size=batch_size)
    finally:
        rmm.mr.set_current_device_resource(old)
    c = stats.allocation_counts  # a Statistics object, or a dict in older rmm
    return int(c["peak_bytes"] if isinstance(c, dict) else c.peak_bytes)


def _index_device_bytes(idx) -> int:
    """Bytes of the device arrays of a one-GPU index's search matrix (each buffer once)."""
    sm = idx._sm
    arrays = [sm.indptr64, sm.indices32, sm.matrix.data, sm.matrix.indices, sm.matrix.indptr]
    return sum({a.data.ptr: a.nbytes for a in arrays if hasattr(a, "data") and hasattr(a.data, "ptr")}.values())


def _same(a, b) -> bool:
    return (a["query_id"].equals(b["query_id"]) and np.array_equal(a["doc_id"].to_numpy(), b["doc_id"].to_numpy())
            and np.allclose(a["score"].to_numpy(), b["score"].to_numpy(), rtol=1e-6, atol=0))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gb", type=float, default=2.0, help="GB of replicated 20 Newsgroups text (default 2)")
    ap.add_argument("--devices", default="1,2", help="GPU counts of the sharded rows, e.g. 1,2,4 (default 1,2)")
    ap.add_argument("--n-queries", type=int, default=100_000)
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=8192)
    ap.add_argument("--client-gpus", default="",
                    help="worker counts of LocalCUDACluster rows (BM25Index.load(client=...)), e.g. 1,2 (default none)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-bm25s", action="store_true", help="skip the bm25s numba row")
    ap.add_argument("--filter-selectivity", default="",
                    help="shares of the documents a random filter mask keeps, e.g. 0.01,0.1,0.5 (default none)")
    ap.add_argument("--data", default=None, help="folder holding corpora/20news-bydate.tar.gz")
    ap.add_argument("--workdir", default="/tmp/cutext-search-gpus")
    ap.add_argument("--json", default=None)
    ap.add_argument("--reuse-index", action="store_true",
                    help="search the indexes an earlier run left in --workdir (same --gb) instead of building them")
    ap.add_argument("--switch-intervals", default="",
                    help="also run each Client row with the caller's sys.setswitchinterval at these seconds, "
                         "e.g. 0.0005 (Python's default 0.005: a thread that waits for the GIL waits up to that long)")
    ap.add_argument("--profile", action="store_true",
                    help="set CUTEXT_GPUTEXT_PROFILE=1: print each row's StepClock parts of BM25Index.search "
                         "(host clocks, ms per search; the engine's time shows as its wait)")
    return ap.parse_args(argv)


def built_indexes(args, src, ix: Path, ixc: Path, made: Path, tok_c: dict) -> dict:
    """The index of ``src`` at ``ix`` and its compacted copy at ``ixc``, built (or an earlier run's, with
    ``--reuse-index``); their counts, also kept in ``made``."""
    from cutext import pipelines
    from cutext.stages.engines.bm25_index import BM25Index

    if args.reuse_index and made.exists():  # the indexes of an earlier run of this workdir (same --gb)
        built = json.loads(made.read_text())
        if built["gb"] != args.gb:
            raise SystemExit(f"--reuse-index: {ix} holds {built['gb']} GB, not --gb {args.gb}")
    else:
        made.unlink(missing_ok=True)
        t = time.perf_counter()
        r = pipelines.run("bm25", str(src), out=str(ix), backend="gpu", scheduler="sync", format="lines",
                          progress=False, index_format=2, variant="lucene", k1=1.2, b=0.75, **tok_c)
        built = {"gb": args.gb, "build_s": time.perf_counter() - t,
                 **{c: r.counts[c] for c in ("input_bytes", "n_docs", "n_postings")}}
        shutil.rmtree(ixc, ignore_errors=True)
        shutil.copytree(ix, ixc)
        built["n_segments"] = BM25Index.load(ixc, backend="cpu").compact()
        made.write_text(json.dumps(built))
    return built


def search_configs(args, ix: Path, ixc: Path, n_seg: int, n_gpus: int) -> list:
    """``(label, index path, devices)`` of each row: a list of GPUs, or ``("client", workers, switch interval)``."""
    configs = [("1 GPU, compacted (1 segment)", ixc, [0]), (f"1 GPU, {n_seg} segments", ix, [0])]
    for n in (int(x) for x in args.devices.split(",") if x):
        if n > 1 and n <= n_gpus:
            configs.append((f"{n} GPUs, {n_seg} segments", ix, list(range(n))))
        elif n > n_gpus:
            bench.log(f"skipped {n} GPUs: {n_gpus} visible")
    for n in (int(x) for x in args.client_gpus.split(",") if x):
        if n <= n_gpus:
            for sw in [None] + [float(x) for x in args.switch_intervals.split(",") if x]:
                configs.append((f"Client of {n} GPU worker{'s' if n > 1 else ''}, {n_seg} segments"
                                + (f", switch interval {sw * 1e3:g} ms" if sw else ""), ix, ("client", n, sw)))
        else:
            bench.log(f"skipped a Client of {n} GPUs: {n_gpus} visible")
    return configs


def print_rows(rows, built, args, n_queries: int) -> None:
    base = rows[1]["qps"]  # one GPU, the index as built
    peer = rows[-1]["qps"] if not args.no_bm25s else None
    print(f"\n{built['input_bytes'] / 1e9:.2f} GB of text, {built['n_docs']:,} docs, {built['n_postings']:,} "
          f"postings; {n_queries:,} queries, top-{args.k}, batches of {args.batch_size}; medians of {args.repeats}")
    print("| system | load s | q/s | x 1 GPU | x bm25s | same results as 1 GPU |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        xp = f"{row['qps'] / peer:.1f}" if peer else ""
        same = "" if row["same_results"] is None else ("yes" if row["same_results"] else "**no**")
        print(f"| {row['system']} | {row['load_s']} | {row['qps']:,} | {row['qps'] / base:.2f} | {xp} | {same} |")


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.profile:
        os.environ[PROFILE_ENV] = "1"  # read by every StepClock when it starts

    import cupy

    from cutext.stages.engines.bm25_index import BM25Index

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    src = bench.corpus_folder(args.data, work, args.gb)
    queries = bench.Corpus(bench.find_20news(args.data)).queries(args.n_queries)
    tok_c, tok_b = bench.tokenizer_kwargs("plain")
    ix, ixc, made = work / "index", work / "index-compacted", work / "index-counts.json"
    built = built_indexes(args, src, ix, ixc, made, tok_c)
    n_seg = built["n_segments"]
    bench.log(f"index: {built['input_bytes'] / 1e9:.2f} GB, {built['n_docs']:,} docs, "
              f"{built['n_postings']:,} postings, {n_seg} segments; build {built['build_s']:.2f} s"
              + (" (an earlier run's, --reuse-index)" if args.reuse_index else ""))
    configs = search_configs(args, ix, ixc, n_seg, cupy.cuda.runtime.getDeviceCount())
    step_profile(reset=True)  # the build's clocks are not the searches'
    rows, ref = [], None
    for label, path, devices in configs:
        cluster = client = None
        t = time.perf_counter()
        switch = devices[2] if isinstance(devices, tuple) else None  # the caller's GIL switch interval
        if isinstance(devices, tuple):  # a LocalCUDACluster: one long-lived engine per worker
            from distributed import Client

            from cutext.pipelines import local_gpu_cluster

            cluster = local_gpu_cluster(devices[1], CUDA_VISIBLE_DEVICES=list(range(devices[1])))
            client = Client(cluster)
            t = time.perf_counter()
            idx = BM25Index.load(path, backend="gpu", client=client)
            devices = list(range(devices[1]))
        else:
            idx = BM25Index.load(path, backend="gpu", devices=devices if len(devices) > 1 else None)
        load_s = time.perf_counter() - t
        before = sys.getswitchinterval()
        if switch:
            sys.setswitchinterval(switch)
        try:
            med, secs, out = _search(idx, queries, args.k, args.batch_size, args.repeats, client=client)
        finally:
            sys.setswitchinterval(before)
        same = True if ref is None else _same(out, ref)
        ref = out if ref is None else ref
        rows.append({"system": f"cutext {label}", "devices": len(devices), "load_s": round(load_s, 3),
                     "seconds": round(med, 4), "runs_s": [round(x, 4) for x in secs],
                     "qps": round(len(queries) / med), "same_results": same})
        bench.log(f"{label}: {len(queries) / med:,.0f} q/s (load {load_s:.2f} s), same results: {same}")
        if client is None and len(devices) == 1:  # device memory: the index's arrays, a search's own peak
            index_mib = _index_device_bytes(idx) / 2**20
            peak = _search_peak_bytes(idx, queries, args.k, args.batch_size) / 2**20
            rows[-1].update(index_device_mib=round(index_mib, 1), search_peak_mib=round(peak, 1))
            bench.log(f"  device memory: the index's arrays {index_mib:,.0f} MiB; a search's allocations at their "
                      f"peak {peak:,.1f} MiB (index + search {index_mib + peak:,.0f} MiB)")
        prof = step_profile(reset=True)  # $CUTEXT_GPUTEXT_PROFILE=1 (--profile): the timed searches' host clocks
        if prof:
            bench.log(f"  ms per search ({args.repeats} searches): " + ", ".join(
                f"{k.split(': ', 1)[-1]} {1e3 * v / args.repeats:.1f}" for k, v in sorted(prof.items())))
            rows[-1]["profile_ms"] = {k: round(1e3 * v / args.repeats, 2) for k, v in sorted(prof.items())}
            if client is not None:  # each worker's side of the batches
                for w, wp in sorted(client.run(step_profile, True).items()):
                    bench.log(f"  ms per search on {w}: " + ", ".join(
                        f"{k.split(': ', 1)[-1]} {1e3 * v / args.repeats:.1f}" for k, v in sorted(wp.items())))
        del idx, out
        if client is not None:
            client.close()
            cluster.close()
        gc.collect()
        cupy.get_default_memory_pool().free_all_blocks()
    sels = [float(x) for x in args.filter_selectivity.split(",") if x]
    if sels:  # the filter before top-k: the compacted index on one GPU, a random mask of each share
        idx = BM25Index.load(ixc, backend="gpu")
        rng = np.random.default_rng(0)
        for sel in sels:
            mask = rng.random(idx.n_docs) < sel
            med, secs, _ = _search(idx, queries, args.k, args.batch_size, args.repeats, filter=mask)
            rows.append({"system": f"cutext 1 GPU, compacted, filter of {sel:.0%} of the documents", "devices": 1,
                         "load_s": 0.0, "seconds": round(med, 4), "runs_s": [round(x, 4) for x in secs],
                         "qps": round(len(queries) / med), "same_results": None})
            bench.log(f"filter {sel:.0%}: {len(queries) / med:,.0f} q/s")
        del idx
        gc.collect()
        cupy.get_default_memory_pool().free_all_blocks()
    if not args.no_bm25s:
        import bm25s

        ncpu = os.cpu_count() or 1
        t = time.perf_counter()
        model = bench.bm25s_from_index(BM25Index.load(ixc, backend="cpu"))
        prep = time.perf_counter() - t
        fn = bench.bm25s_search_run(model, queries, tok_b, args.k, ncpu)
        model.retrieve(bm25s.tokenize(queries[:8], show_progress=False, **tok_b), k=args.k, n_threads=ncpu,
                       show_progress=False)
        secs = [fn()["seconds"] for _ in range(args.repeats)]
        med = statistics.median(secs)
        rows.append({"system": f"bm25s (numba) {ncpu} threads, same weights", "devices": 0, "load_s": round(prep, 3),
                     "seconds": round(med, 4), "runs_s": [round(x, 4) for x in secs],
                     "qps": round(len(queries) / med), "same_results": None})
    print_rows(rows, built, args, len(queries))
    if args.json:
        Path(args.json).write_text(json.dumps({"counts": built, "build_s": built["build_s"],
                                               "index_reused": args.reuse_index, "n_queries": len(queries),
                                               "k": args.k, "batch_size": args.batch_size, "rows": rows}, indent=2))
    return 0 if all(row["same_results"] in (True, None) for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
