# Ad hoc profile (issue 10, ninth pass): where does the 2 GB GPU index spend its time on a
# LocalCUDACluster? Run on the lent GPU machine from the repository root after
# `source benchmarks/gpu_env.sh`:
#   python benchmarks/micro/client_profile.py --data .devdata [--workers 1,2] [--same-gpu] [--repeats 2]
#       [--variants now,nospread,slices0,pack0] [--cprofile] [--steps] [--threads N]
# Per worker count: a LocalCUDACluster (rmm_async, as cutext's own; --same-gpu: every worker on GPU 0,
# to see the transfers on a one-GPU machine), one warm-up build, then --repeats builds with client=
# under distributed's task stream. Prints per build the stage seconds, and per task kind (the key's
# name) the tasks, compute seconds, and the seconds and number of the transfers of their inputs from
# other workers (distributed records a transfer on the task that waited for it), summed over workers.
import argparse
import contextlib
import cProfile
import io
import os
import pstats
import re
import shutil
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (bm25.py's corpus writer)


def kind(key) -> str:
    """A task's kind: its key's name without the token (hex, uuid) or the object address."""
    name = key[0] if isinstance(key, tuple) else str(key)
    name = re.sub(r" object at 0x[0-9a-f]+>?", ">", name)
    name = re.sub(r"-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", "", name)
    return re.sub(r"-[0-9a-f]{16,}$", "", name)


def busy(intervals, lo, hi) -> float:
    """Seconds of [lo, hi) covered by the union of the intervals."""
    t, end = 0.0, lo
    for a, b in sorted(intervals):
        a, b = max(a, end), min(b, hi)
        if b > a:
            t += b - a
            end = b
    return t


def windows(stream, stages):
    """Per stage: wall seconds, and per worker the seconds its threads computed (union) and the tasks."""
    out = []
    for name, lo, hi in stages:
        per = defaultdict(list)
        for t in stream:
            for ss in t.get("startstops", ()):
                if ss["action"] == "compute" and ss["stop"] > lo and ss["start"] < hi:
                    per[t["worker"]].append((ss["start"], ss["stop"]))
        out.append((name, hi - lo, {w: (busy(v, lo, hi), len(v)) for w, v in sorted(per.items())}))
    return out


def summarize(stream):
    rows = defaultdict(lambda: [0, 0.0, 0.0, 0])  # tasks, compute s, transfer s, transfers
    for t in stream:
        r = rows[kind(t["key"])]
        r[0] += 1
        for ss in t.get("startstops", ()):
            d = ss["stop"] - ss["start"]
            if ss["action"] == "compute":
                r[1] += d
            elif ss["action"] == "transfer":
                r[2] += d
                r[3] += 1
    return rows


def tenth_term_ranges(counts, divisions, weight_fn):
    """The term ranges of the tenth pass: a ``_term_slice`` task a (range, partition), each made where its
    partition is, the range concatenating the slices of every partition."""
    import dask

    from cutext.stages import api
    from cutext.stages.compute import cluster_workers, on_worker, partition_homes

    def slice_(cut, i):
        return api._term_slice(cut, i)

    slice_.__name__ = "_term_slice"
    workers = cluster_workers()
    placed = partition_homes(counts) if workers else None
    if placed is None:
        parts, homes, workers = counts.to_delayed(), None, None
    else:
        parts, homes = placed
    cut = []
    for j, p in enumerate(parts):
        with on_worker(j, homes):
            cut.append(dask.delayed(api._term_cuts)(p, list(divisions)))
    out = []
    for i in range(len(divisions) - 1):
        slices = []
        for j, c in enumerate(cut):
            with on_worker(j, homes):
                slices.append(dask.delayed(slice_)(c, i))
        with on_worker(i, workers):
            out.append(dask.delayed(api._term_range)(slices, i, weight_fn))
    return out, workers


@contextlib.contextmanager
def variant(v: str):
    """now; nospread (term ranges where the scheduler puts them: no workers to spread over); slices0 (a
    slice task a (range, partition), the tenth pass); pack0 (the rows from other workers unpacked; the
    flag is read where the graph is made)."""
    from cutext.pipelines import bm25 as bm25_pipe
    from cutext.stages import api

    with contextlib.ExitStack() as stack:
        if v == "nospread":
            stack.enter_context(mock.patch.object(api, "cluster_workers", lambda: None))
            stack.enter_context(mock.patch.object(bm25_pipe, "cluster_workers", lambda: None))
        if v == "slices0":
            stack.enter_context(mock.patch.object(api, "_term_ranges", tenth_term_ranges))
        if v == "pack0":
            stack.enter_context(mock.patch.object(api, "PACK_REMOTE_SLICES", False))
        yield


def device_resource(kind: str):
    """The worker's RMM resource: ``async`` (cudaMallocAsync, as cutext's own cluster), ``async-ipc`` (the
    same with an IPC-exportable pool), ``pool`` (an RMM pool over cudaMalloc, 8 GiB to start)."""
    import rmm

    if kind == "pool":
        mr = rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), 8 << 30)
    else:
        mr = rmm.mr.CudaAsyncMemoryResource(enable_ipc=kind == "async-ipc")
    rmm.mr.set_current_device_resource(mr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--gb", type=float, default=2.0)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--same-gpu", action="store_true",
                    help="every worker on GPU 0 (distributed's LocalCluster of processes: dask-cuda refuses a GPU twice)")
    ap.add_argument("--cprofile", action="store_true", help="cProfile the client process in the last build")
    ap.add_argument("--steps", action="store_true",
                    help="print the client process's own sub-steps per build (cutext's StepClock, "
                         "$CUTEXT_GPUTEXT_PROFILE=1 set in this process only, not on the workers)")
    ap.add_argument("--variants", default="now",
                    help="now (main), nospread (term ranges where the scheduler puts them, the eighth pass), "
                         "slices0 (a slice task a range and partition, the tenth pass), pack0 (the rows of "
                         "other workers sent unpacked: term_id, doc_id int64, tf, dl); alternated")
    ap.add_argument("--threads", type=int, default=None,
                    help="threads a worker (default: cutext's own cluster's, GPU_THREADS_PER_WORKER)")
    ap.add_argument("--protocol", default="tcp", help="the workers' comm: tcp, or ucx (distributed-ucxx)")
    ap.add_argument("--rmm", default="async", choices=("async", "async-ipc", "pool"),
                    help="the workers' device memory resource (device_resource); UCX sent only pool memory "
                         "by CUDA IPC in the twelfth pass (async and async-ipc went through the host)")
    ap.add_argument("--workdir", default="/tmp/cutext-bench")
    args = ap.parse_args()

    from dask_cuda import LocalCUDACluster
    from distributed import Client, LocalCluster, get_task_stream

    from bm25 import Corpus, tokenizer_kwargs, write_replicated
    from cutext import pipelines
    from cutext.stages.compute import GPU_THREADS_PER_WORKER, PROFILE_ENV, rmm_cupy, step_profile

    threads = args.threads or GPU_THREADS_PER_WORKER

    from cutext.pipelines import bm25 as bm25_pipe

    stages = []  # (name, start, end) in time.time(), as the task stream
    run_stage = bm25_pipe._Stages.run

    def run_timed(self, name, fn, *a, **k):
        t0 = time.time()
        try:
            return run_stage(self, name, fn, *a, **k)
        finally:
            stages.append((name, t0, time.time()))

    bm25_pipe._Stages.run = run_timed
    data = Path(args.workdir) / f"data-{args.gb:g}GB"
    write_replicated(Corpus(Path(args.data) / "corpora" / "20news-bydate.tar.gz"), data, args.gb * 1e9, 256e6, 0)
    tok = tokenizer_kwargs("plain")[0]
    out = Path(args.workdir) / "client-profile-index"
    for w in map(int, args.workers.split(",")):
        t = time.perf_counter()
        os.environ.pop(PROFILE_ENV, None)  # the workers start without it (see --steps)
        if args.same_gpu:
            # UCX on a worker without dask-cuda: a CUDA context before UCX starts (as LocalCUDACluster does)
            os.environ["DASK_DISTRIBUTED_UCXX__CREATE_CUDA_CONTEXT"] = "True"
            cluster = LocalCluster(n_workers=w, threads_per_worker=threads, processes=True,
                                   dashboard_address=None, protocol=args.protocol)
        else:
            cluster = LocalCUDACluster(n_workers=w, threads_per_worker=threads, rmm_async=True,
                                       protocol=args.protocol)
        with cluster, Client(cluster) as client:
            if args.same_gpu or args.rmm != "async":
                client.run(device_resource, args.rmm)
            client.run(rmm_cupy)
            print(f"\n== {w} workers{' on GPU 0' if args.same_gpu else ''}, {args.protocol}, rmm {args.rmm}: "
                  f"cluster up in {time.perf_counter() - t:.1f} s", flush=True)

            if args.steps:  # set after the workers started, so only this process records its steps
                os.environ[PROFILE_ENV] = "1"

            def build():
                step_profile(reset=True)
                stages.clear()
                shutil.rmtree(out, ignore_errors=True)
                t = time.perf_counter()
                r = pipelines.run("bm25", str(data), out=str(out), backend="gpu", client=client, format="lines",
                                  progress=False, **tok)
                return time.perf_counter() - t, r

            build()  # warm-up
            walls = defaultdict(list)
            variants = args.variants.split(",")
            for i, v in [(i, v) for i in range(args.repeats) for v in variants]:
                prof = cProfile.Profile() if args.cprofile and i == args.repeats - 1 and v == variants[-1] else None
                with variant(v), get_task_stream(client) as ts:
                    if prof:
                        prof.enable()
                    sec, r = build()
                    if prof:
                        prof.disable()
                walls[v].append(sec)
                print(f"\n{v} build {i + 1}: {sec:.2f} s; stages "
                      + ", ".join(f"{k} {x:.2f}" for k, x in r.timings.items()), flush=True)
                if args.steps:
                    print("client steps (s): " + ", ".join(f"{k} {x:.3f}" for k, x in step_profile().items()),
                          flush=True)
                rows = summarize(ts.data)
                print("| task | tasks | compute s | transfer s | transfers |")
                print("| --- | --- | --- | --- | --- |")
                for k, (n, c, tr, nt) in sorted(rows.items(), key=lambda kv: -(kv[1][1] + kv[1][2])):
                    if c + tr >= 0.01:
                        print(f"| {k} | {n} | {c:.2f} | {tr:.2f} | {nt} |")
                tot = [sum(x[j] for x in rows.values()) for j in (1, 2, 3)]
                print(f"| all | {sum(x[0] for x in rows.values())} | {tot[0]:.2f} | {tot[1]:.2f} | {tot[2]} |",
                      flush=True)
                print("| stage | wall s | per worker: seconds computing (union of its tasks), tasks |")
                print("| --- | --- | --- |")
                for name, wall, per in windows(ts.data, stages):
                    print(f"| {name} | {wall:.2f} | " + "; ".join(f"{w.rsplit(':', 1)[-1]}: {b:.2f} s, {n}"
                                                              for w, (b, n) in per.items()) + " |")
                if prof:
                    for key in ("tottime", "cumulative"):
                        buf = io.StringIO()
                        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(30)
                        print(f"\ncProfile of the client process, by {key}:\n"
                              + "\n".join(buf.getvalue().splitlines()[6:40]), flush=True)
                    # the client's own work (not its waits): cutext's functions, and who sleeps or
                    # makes device frames in the client process
                    buf = io.StringIO()
                    st = pstats.Stats(prof, stream=buf).sort_stats("cumulative")
                    st.print_stats("cutext", 40)
                    st.print_callers(r"time.sleep|from_pandas|\(meta\)")
                    print("\ncProfile of the client process, cutext's functions and callers:\n"
                          + "\n".join(buf.getvalue().splitlines()[6:160]), flush=True)
            print(f"\n{w} workers, median of {args.repeats}: "
                  + "; ".join(f"{v} {statistics.median(x):.2f} s ({', '.join(f'{y:.2f}' for y in x)})"
                              for v, x in walls.items()), flush=True)
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
