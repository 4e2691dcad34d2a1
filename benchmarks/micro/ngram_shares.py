"""Where a worker's share of the ngram pipeline on a Client loses to the same work in process.

Rows (each the median of ``--repeats`` runs after a warm-up run), on one lines file of the held-out
sentences replicated to ``--queries`` queries (as ``benchmarks/ngram.py --e2e-queries``):

    inproc        pipelines.run("ngram", file) in this process, on the first GPU (the baseline)
    client N      the same file on ``local_gpu_cluster(N)``; per worker: when its share's task started and
                  ended (seconds after the call), its read / score / write seconds, and the other tasks it
                  ran (dask's task stream: the row counts of the shares before another's)
    procs N       the file cut at line ends into N files; N processes, each ``pipelines.run`` on one file in
                  process on a GPU of its own, started together (what N GPUs of one host give without dask)
    alone         the first of those files in one such process alone (the share's work without neighbours)
    count         the row count of the first share's pieces in this process, alone (what the second share
                  waits for before it writes: ``count_lines_rows``), with each of ``--count-kernels``:
                  ``loop`` (the pipeline's numba kernel: one int64 count a byte), ``lanes`` (32 uint8 counters
                  a group of bytes, defined here: vectorized by the compiler, measured and not kept) or
                  ``numpy``

``--blocksize-mb 64,256`` repeats every row at each piece size (a fixed cost a piece shows as a gap).

    source benchmarks/gpu_env.sh
    python benchmarks/micro/ngram_shares.py --queries 1.6e9 --gpus 2 --rows inproc,client,procs,alone
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from cutext.pipelines import ngram as ng
from cutext.stages.readers.files import plan
from cutext.stages.text import ngram_text

import ngram as bench  # noqa: E402  (the text files and data folder of the ngram benchmark)


def split_file(path: Path, n: int) -> list:
    """``path`` cut into ``n`` files of about equal bytes at line ends (written once beside it)."""
    size = path.stat().st_size
    outs = [path.with_name(f"{path.stem}-{k}of{n}.txt") for k in range(n)]
    if all(p.exists() for p in outs):
        return outs
    with open(path, "rb") as fh:
        start = 0
        for k, p in enumerate(outs):
            end = size
            if k < n - 1:
                fh.seek(size * (k + 1) // n)
                fh.readline()
                end = fh.tell()
            fh.seek(start)
            with open(p, "wb") as out:
                left = end - start
                while left:
                    buf = fh.read(min(left, 64 << 20))
                    out.write(buf)
                    left -= len(buf)
            start = end
    return outs


def child(args) -> int:
    """One process of the ``procs`` rows: score ``--child`` ``repeats + 1`` times, each when the parent says go."""
    from cutext import pipelines
    from cutext.pipelines.ngram import NGramModel

    lm = NGramModel.load(args.model, backend=args.backend)
    sync = Path(args.sync)
    for r in range(args.repeats + 1):
        (sync / f"ready-{args.rank}-{r}").touch()
        while not (sync / f"go-{r}").exists():
            time.sleep(0.001)
        out = sync / f"out-{args.rank}-{r}"
        t0 = time.perf_counter()
        res = pipelines.run("ngram", args.child, out=out, model=lm, format="lines", blocksize=args.blocksize,
                            progress=False)
        t = time.perf_counter() - t0
        print(json.dumps({"rank": args.rank, "repeat": r, "seconds": t, "timings": res.timings,
                          "queries": res.counts["n_tokens"]}), flush=True)
        shutil.rmtree(out, ignore_errors=True)
    return 0


def procs(files, args, blocksize) -> list:
    """Runs of one process a file, each on GPU ``k``, started together; a list (one a repeat) of lists."""
    sync = Path(tempfile.mkdtemp(prefix="ngram-shares-sync-", dir=args.tmp))
    kids = []
    for k, f in enumerate(files):
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(k))
        kids.append(subprocess.Popen([sys.executable, __file__, "--child", str(f), "--rank", str(k), "--sync",
                                      str(sync), "--model", str(args.model_path), "--blocksize", str(blocksize),
                                      "--repeats", str(args.repeats), "--backend", args.backend],
                                     env=env, stdout=subprocess.PIPE, text=True))
    for r in range(args.repeats + 1):
        while not all((sync / f"ready-{k}-{r}").exists() for k in range(len(files))):
            time.sleep(0.001)
        (sync / f"go-{r}").touch()
    runs: dict = {}
    for p in kids:
        out, _ = p.communicate()
        if p.returncode:
            raise RuntimeError(f"a child process failed ({p.returncode})")
        for line in out.splitlines():
            if line.startswith("{"):
                d = json.loads(line)
                runs.setdefault(d["repeat"], []).append(d)
    shutil.rmtree(sync, ignore_errors=True)
    return [runs[r] for r in sorted(runs) if r > 0]


def client_runs(path, lm, n, args, blocksize) -> list:
    """Runs on ``local_gpu_cluster(n)``: (seconds, timings, per worker dict) each."""
    from distributed import Client, get_task_stream

    from cutext import pipelines
    from cutext.pipelines import local_gpu_cluster
    from cutext.stages.runtime.compute import step_profile

    seen = {}
    gather = ng._gather_pinned

    def spy(client, futures, workers, on_done=None):
        seen["results"] = gather(client, futures, workers, on_done)
        return seen["results"]

    ng._gather_pinned = spy
    runs = []
    try:
        if args.backend == "gpu":
            cluster = local_gpu_cluster(n)
        else:  # a check of this script on a machine without a GPU
            from distributed import LocalCluster

            cluster = LocalCluster(n_workers=n, threads_per_worker=1, dashboard_address=None)
        with cluster, Client(cluster) as client:
            client.run(set_constants, args.constants)
            if args.timeline:
                client.run(install_timeline, args.timeline == "sync")
            for r in range(args.repeats + 1):
                out = Path(args.tmp) / f"ngram-shares-client-{r}"
                shutil.rmtree(out, ignore_errors=True)
                with get_task_stream(client) as ts:
                    t_wall = time.time()
                    t0 = time.perf_counter()
                    res = pipelines.run("ngram", path, out=out, model=lm, format="lines", blocksize=blocksize,
                                        progress=False, client=client)
                    t = time.perf_counter() - t0
                shutil.rmtree(out, ignore_errors=True)
                if args.timeline:
                    got = client.run(take_timeline)
                    if r == args.repeats:
                        print(f"client {n} run of {t:.3f} s", flush=True)
                        for w, ev in got.items():
                            print_timeline(f"client {n} {w}", ev, t_wall)
                workers = {}
                for task in ts.data:
                    w = workers.setdefault(task["worker"], {"tasks": {}})
                    name = task["key"][0] if isinstance(task["key"], tuple) else str(task["key"])
                    name = name.split("-")[0]
                    for ss in task["startstops"]:
                        if ss["action"] == "compute":
                            got = w["tasks"].setdefault(name, [0, 0.0, None, None])
                            got[0] += 1
                            got[1] += ss["stop"] - ss["start"]
                            got[2] = ss["start"] - t_wall if got[2] is None else min(got[2], ss["start"] - t_wall)
                            got[3] = ss["stop"] - t_wall if got[3] is None else max(got[3], ss["stop"] - t_wall)
                for s, got in enumerate(r for r in seen["results"] if "where" in r):  # the shares, not the counts
                    w = workers.setdefault(got["where"], {"tasks": {}})
                    w["share"] = s
                    w["timings"] = got["timings"]
                if r > 0:
                    runs.append((t, dict(res.timings), workers))
            if args.profile:
                for w, prof in client.run(step_profile, reset=True).items():
                    print(f"client {n} worker {w}, seconds a run:",
                          {k: round(v / (args.repeats + 1), 3) for k, v in prof.items()}, flush=True)
            if args.cprofile:
                out = Path(args.tmp) / "ngram-shares-client-profiled"
                profiled(lambda: pipelines.run("ngram", path, out=out, model=lm, format="lines", blocksize=blocksize,
                                               progress=False, client=client), f"client {n}", args.cprofile)
                shutil.rmtree(out, ignore_errors=True)
    finally:
        ng._gather_pinned = gather
    return runs


def uint8_lanes():
    """A newline count in 32 uint8 counters, one a byte lane of a group, summed every 255 groups (the compiler
    vectorizes the lane loop): twice the pipeline's kernel on a 2-core AMD EPYC, 0.4x on the 64-core Xeon of
    the GPU hosts, so not kept; here for the count row."""
    import numba
    import numpy as np

    @numba.njit(cache=True, nogil=True)
    def count(buf):
        n = 0
        groups = len(buf) // 32
        acc = np.zeros(32, np.uint8)
        g = 0
        while g < groups:
            end = min(g + 255, groups)
            acc[:] = 0
            for q in range(g, end):
                for lane in range(32):
                    acc[lane] += buf[q * 32 + lane] == 10
            for lane in range(32):
                n += acc[lane]
            g = end
        for i in range(groups * 32, len(buf)):
            n += buf[i] == 10
        return n

    return count


def count_runs(path, args, blocksize) -> list:
    """``(kernel, median seconds, rows)`` of counting the first of ``args.gpus`` shares' pieces, per kernel."""
    fs, pieces, _ = plan(str(path), format="lines", blocksize=blocksize)
    a, b = ng._contiguous_shares([ng._piece_weight(p, fs) for p in pieces], args.gpus)[0]
    first = pieces[a:b]
    out = []
    for kernel in args.count_kernels.split(","):
        saved = ngram_text.count_newlines, ngram_text.COUNT_WITH
        if kernel == "lanes":
            ngram_text.count_newlines = uint8_lanes()
        ngram_text.COUNT_WITH = "numpy" if kernel == "numpy" else "numba"
        try:
            secs = []
            for r in range(max(1, args.repeats + 1)):
                t0 = time.perf_counter()
                rows = sum(ngram_text.count_lines_rows(p, fs) for p in first)
                if r > 0 or args.repeats == 0:
                    secs.append(time.perf_counter() - t0)
        finally:
            ngram_text.count_newlines, ngram_text.COUNT_WITH = saved
        out.append((kernel, statistics.median(secs), rows, sum(ng._piece_weight(p, fs) for p in first)))
    return out


def inproc_runs(path, lm, args, blocksize) -> list:
    from cutext import pipelines

    runs = []
    for r in range(max(1, args.repeats + 1)):
        out = Path(args.tmp) / f"ngram-shares-inproc-{r}"
        shutil.rmtree(out, ignore_errors=True)
        take_timeline()
        t_wall = time.time()
        t0 = time.perf_counter()
        res = pipelines.run("ngram", path, out=out, model=lm, format="lines", blocksize=blocksize, progress=False)
        t = time.perf_counter() - t0
        shutil.rmtree(out, ignore_errors=True)
        if args.timeline and r == args.repeats:
            print(f"inproc run of {t:.3f} s", flush=True)
            print_timeline("inproc", take_timeline(), t_wall)
        if r > 0 or args.repeats == 0:
            runs.append((t, dict(res.timings)))
    return runs


def install_timeline(sync: bool = False) -> None:
    """Record (name, thread, start, end) in wall-clock seconds of each piece's score, each frame made and each
    write of the scores writer, and the writer's close, in this process (``client.run`` it on the workers).
    ``sync``: synchronize the device at the end of each, so that the end is when the GPU finished it."""
    import functools
    import threading

    if hasattr(ng, "_timeline_events"):  # (the list lives in the module: this function may be a pickled copy)
        return
    events = ng._timeline_events = []

    def wrap(fn, name):
        @functools.wraps(fn)
        def timed(*a, **kw):
            t0 = time.time()
            out = fn(*a, **kw)
            if sync:
                import cupy

                cupy.cuda.runtime.deviceSynchronize()
            events.append((name, threading.current_thread().name[-12:], t0, time.time()))
            return out
        return timed

    ng._score_piece_device = wrap(ng._score_piece_device, "score")
    ng._ScoresWriter._frame_device = wrap(ng._ScoresWriter._frame_device, "frame")
    ng._ScoresWriter._write_device = wrap(ng._ScoresWriter._write_device, "write")
    ng._ScoresWriter._write = wrap(ng._ScoresWriter._write, "write")
    ng._ScoresWriter._shutdown = wrap(ng._ScoresWriter._shutdown, "close")


def take_timeline() -> list:
    events = getattr(ng, "_timeline_events", [])
    out = list(events)
    events.clear()
    return out


def print_timeline(label: str, events: list, t0: float) -> None:
    """The events of one run, seconds after ``t0``, and the end of the last score against the last write."""
    if not events:
        return
    last = {}
    lines = []
    for name, thread, a, b in sorted(events, key=lambda e: e[2]):
        lines.append(f"{name}@{thread} {a - t0:.3f}-{b - t0:.3f}")
        last[name] = max(last.get(name, 0.0), b - t0)
    print(f"timeline {label}: " + "; ".join(lines), flush=True)
    print(f"timeline {label} ends: " + ", ".join(f"{k} {v:.3f}" for k, v in last.items()), flush=True)


def set_constants(constants: dict) -> dict:
    """Set constants of cutext.pipelines.ngram (or, for a dotted name, of that module under cutext, e.g.
    ``stages.text.ngram_text.COUNT_WITH``) in this process (``client.run`` it on the workers); returns the
    values they had."""
    import importlib

    before = {}
    for k, v in constants.items():
        mod, _, name = ("pipelines.ngram." + k if "." not in k else k).rpartition(".")
        m = importlib.import_module(f"cutext.{mod}")
        if not hasattr(m, name):
            raise SystemExit(f"cutext.{mod} has no {name}")
        before[k] = getattr(m, name)
        setattr(m, name, v)
    return before


def profiled(fn, label: str, top: int) -> None:
    """``fn()`` once under cProfile: the calls of this process (the caller's part) by cumulative seconds."""
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(top)
    print(f"--- cProfile of one {label} run (this process) ---\n{s.getvalue()}", flush=True)


def fmt_timings(t: dict) -> str:
    return ", ".join(f"{k} {v:.3f}" for k, v in t.items())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=float, default=1.6e9)
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--rows", default="inproc,client,procs,alone")
    ap.add_argument("--blocksize-mb", default="256")
    ap.add_argument("--count-kernels", default="loop,lanes",
                    help="the count row's kernels: loop (the pipeline's), lanes, numpy")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="set CUTEXT_GPUTEXT_PROFILE=1: print the seconds of the "
                    "writer's parts (frame, encode + write) a run, in process and on each worker")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=JSON",
                    help="set a constant of cutext.pipelines.ngram for the rows, in process and on the workers, e.g. "
                         "DEVICE_ROWS_PER_WRITE=524288 or 'DEVICE_WRITER_OPTIONS={\"compression\": null}'")
    ap.add_argument("--variants", default=None, metavar="JSON",
                    help="a JSON list of {NAME: value} (as --set): every row is run once for each, e.g. "
                         "'[{}, {\"stages.text.ngram_text.COUNT_WITH\": \"numpy\"}]'")
    ap.add_argument("--cprofile", type=int, default=0, help="also one run of inproc / client under cProfile: "
                    "print this many entries")
    ap.add_argument("--timeline", nargs="?", const="host", choices=["host", "sync"], default=None,
                    help="print when each piece's score, frame and write started and ended in the last run of each "
                         "row (in process and on each worker); 'sync': the device synchronized after each")
    ap.add_argument("--data", default=None)
    ap.add_argument("--backend", choices=["gpu", "cpu"], default="gpu", help="cpu: check the script without a GPU")
    ap.add_argument("--tmp", default="/tmp")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--sync", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--model", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--blocksize", type=int, default=64 << 20, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)
    if args.profile:  # before any cluster starts: its workers inherit it
        os.environ["CUTEXT_GPUTEXT_PROFILE"] = "1"
    base = {k: json.loads(v) for k, v in (x.split("=", 1) for x in args.set)}
    variants = [dict(base, **v) for v in json.loads(args.variants)] if args.variants else [base]
    if args.timeline:
        install_timeline(args.timeline == "sync")

    from cutext.pipelines.ngram import NGramModel

    global step_profile
    from cutext.stages.runtime.compute import step_profile

    d = bench.data_dir(args.data)
    args.model_path = d / "arpa" / "lmplz" / "abc.o3.arpa.gz"
    sentences = (d / "arpa" / "lmplz" / "heldout.inaugural2001-2009.tok.txt").read_text(encoding="utf-8").splitlines()
    print(json.dumps(bench.environment()), flush=True)
    path, _ = bench.text_file(sentences, args.queries, args.tmp)
    size = path.stat().st_size
    lm = NGramModel.load(args.model_path, backend=args.backend)
    rows = args.rows.split(",")
    table = []
    for mb, constants in ((int(x), c) for x in args.blocksize_mb.split(",") for c in variants):
        bs = mb << 20
        args.constants = constants
        defaults = set_constants(constants)
        if constants:
            print(f"constants {constants}", flush=True)
        mb = f"{mb} {json.dumps(constants)}" if len(variants) > 1 else mb
        if "inproc" in rows:
            step_profile(reset=True)
            runs = inproc_runs(path, lm, args, bs)
            if args.profile:
                print(f"inproc {mb} MB, seconds a run:", {k: round(v / (args.repeats + 1), 3)
                                                          for k, v in step_profile(reset=True).items()}, flush=True)
            t, tim = sorted(runs, key=lambda x: x[0])[len(runs) // 2]
            table.append(("inproc", mb, t, size / t / 1e9, fmt_timings(tim)))
            print(table[-1], flush=True)
            if args.cprofile:
                profiled(lambda: inproc_runs(path, lm, argparse.Namespace(**{**vars(args), "repeats": 0}), bs),
                         "inproc", args.cprofile)
        if "client" in rows:
            runs = client_runs(path, lm, args.gpus, args, bs)
            t, tim, workers = sorted(runs, key=lambda x: x[0])[len(runs) // 2]
            detail = fmt_timings(tim)
            for _addr, w in sorted(workers.items(), key=lambda x: x[1].get("share", 99)):
                tasks = "; ".join(f"{k} x{v[0]} {v[1]:.3f} s [{v[2]:.3f}, {v[3]:.3f}]" for k, v in w["tasks"].items())
                detail += f" || share {w.get('share')}: {fmt_timings(w.get('timings', {}))}; {tasks}"
            table.append((f"client {args.gpus}", mb, t, size / t / 1e9, detail))
            print(table[-1], flush=True)
        if "count" in rows:
            for kernel, t, n, nbytes in count_runs(path, args, bs):
                table.append((f"count {kernel}", mb, t, nbytes / t / 1e9, f"{n} rows of the first of {args.gpus} "
                              f"shares, {nbytes / 1e9:.2f} GB"))
                print(table[-1], flush=True)
        if "procs" in rows or "alone" in rows:
            files = split_file(path, args.gpus)
            for name, fs in (("procs", files), ("alone", files[:1])):
                if name not in rows:
                    continue
                reps = procs(fs, args, bs)
                walls = [max(x["seconds"] for x in rep) for rep in reps]
                k = sorted(range(len(walls)), key=walls.__getitem__)[len(walls) // 2]
                detail = " || ".join(f"proc {x['rank']}: {x['seconds']:.3f} s, {fmt_timings(x['timings'])}"
                                     for x in sorted(reps[k], key=lambda x: x["rank"]))
                nbytes = sum(f.stat().st_size for f in fs)
                table.append((f"{name} {len(fs)}", mb, walls[k], nbytes / walls[k] / 1e9, detail))
                print(table[-1], flush=True)
        set_constants(defaults)
    print("\n| row | piece MB | seconds | GB/s | detail |\n| --- | --- | --- | --- | --- |")
    for row in table:
        print(f"| {row[0]} | {row[1]} | {row[2]:.3f} | {row[3]:.3f} | {row[4]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
