"""Where a dask worker's share of a GPU bm25 build loses to the same build in process.

One variant per call (the environment a dask nanny gives its worker is the process's, so each variant is
a process of its own), one row of a table: build seconds and stage seconds, medians of ``--repeats``
builds after a warm-up build.

    in process        pipelines.run(..., scheduler="sync") in the main thread
    thread            the same in a thread of its own (a worker runs its task in one)
    client            a LocalCUDACluster of one worker (the stage seconds are the worker's share)
    client --quiet    the same with distributed's sampling profiler off and the nanny's
                      pre-spawn environment (MALLOC_TRIM_THRESHOLD_, OMP_NUM_THREADS, ...) emptied

Run ``in process`` again under the nanny's environment to see what it alone costs:

    python benchmarks/micro/worker_env.py --gb 4 --variant inproc
    env MALLOC_TRIM_THRESHOLD_=65536 OMP_NUM_THREADS=1 python benchmarks/micro/worker_env.py --gb 4 --variant inproc
    python benchmarks/micro/worker_env.py --gb 4 --variant client [--quiet]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

import bm25 as bench  # noqa: E402  (the corpus helpers of the bm25 benchmark)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=4.0)
    ap.add_argument("--variant", choices=["inproc", "thread", "client"], default="inproc")
    ap.add_argument("--quiet", action="store_true", help="client: no sampling profiler, empty pre-spawn environment")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backend", choices=["gpu", "cpu"], default="gpu", help="cpu: a LocalCluster of one worker")
    ap.add_argument("--data", default=None)
    ap.add_argument("--workdir", default="/tmp/cutext-segments")
    args = ap.parse_args(argv)

    import dask

    from cutext import pipelines

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    src = bench.corpus_folder(args.data, work, args.gb)
    out = work / "index-worker-env"
    kw = dict(backend=args.backend, format="lines", progress=False)
    client = cluster = None
    if args.variant == "client":
        from distributed import Client, LocalCluster

        if args.quiet:  # after distributed's import, which fills an empty mapping with its defaults
            none = {k: None for k in dask.config.get("distributed.nanny.pre-spawn-environ")}
            dask.config.set({"distributed.worker.profile.enabled": False, "distributed.nanny.pre-spawn-environ": none})

        if args.backend == "gpu":
            from dask_cuda import LocalCUDACluster

            cluster = LocalCUDACluster(n_workers=1)
        else:
            cluster = LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None)
        client = Client(cluster)
        kw["client"] = client
    else:
        kw["scheduler"] = "sync"

    def build():
        shutil.rmtree(out, ignore_errors=True)
        t = time.perf_counter()
        r = pipelines.run("bm25", str(src), out=str(out), **kw)
        return time.perf_counter() - t, dict(r.timings)

    def in_thread():
        box = {}
        th = threading.Thread(target=lambda: box.setdefault("r", build()))
        th.start()
        th.join()
        return box["r"]

    one = in_thread if args.variant == "thread" else build
    one()
    runs = [one() for _ in range(args.repeats)]
    env = " ".join(f"{k}={os.environ[k]}" for k in ("MALLOC_TRIM_THRESHOLD_", "OMP_NUM_THREADS") if k in os.environ)
    if client is not None:  # the nanny sets its environment in this process too; say the worker's
        env = client.run(lambda: " ".join(f"{k}={os.environ[k]}" for k in ("MALLOC_TRIM_THRESHOLD_", "OMP_NUM_THREADS")
                                          if k in os.environ))
        env = next(iter(env.values()))
    if client is not None:
        client.close()
        cluster.close()
    name = args.variant + (" quiet" if args.quiet else "") + (f" [{env}]" if env else "")
    stages = {k: statistics.median(r[1].get(k, 0.0) for r in runs) for k in runs[0][1]}
    st = ", ".join(f"{k} {v:.3f}" for k, v in stages.items())
    print(f"| {name} | {args.gb} | {statistics.median(r[0] for r in runs):.3f} | {st} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
