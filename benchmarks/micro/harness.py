# Does bm25.py's way of measuring slow the 2 GB GPU build it measures? (issue 10, eighth pass) Run on the lent
# GPU from the repository root after `source benchmarks/gpu_env.sh`:
#   python benchmarks/micro/harness.py ab     [--data .devdata]
#   python benchmarks/micro/harness.py order  [--data .devdata]
# ab: one process, index_ab.py's 2 GB corpus, builds alternated after a warm-up, medians of 3: plain
#     pipelines.run; inside bm25.py's device-memory poller (GpuMemWatch, NVML); inside its RSS poller
#     (RssWatch, psutil); between its DevicePools start/stop (RMM statistics, CuPy pools emptied); and
#     bm25.py's cutext_index_run as its gpu section calls it.
# order: bm25.py's order: the corpus written afresh, a warm-up on one copy of 20 Newsgroups, then 4 builds;
#     then os.sync() (no dirty pages left to write back) and 4 builds again; prints the page cache's
#     Dirty/Writeback before each build.
import argparse
import gc
import os
import shutil
import statistics
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (bm25.py)

import bm25 as B  # noqa: E402

KW = dict(backend="gpu", scheduler="sync", format="lines", variant="lucene", k1=1.2, b=0.75, progress=False,
          **B.tokenizer_kwargs("plain")[0])


def build(src: Path, out: Path) -> tuple[float, dict]:
    """One timed build into a new directory: (seconds, stage seconds)."""
    from cutext import pipelines

    shutil.rmtree(out, ignore_errors=True)
    gc.collect()
    t = time.perf_counter()
    r = pipelines.run("bm25", str(src), out=str(out), **KW)
    return time.perf_counter() - t, r.timings


def table(res: dict) -> None:
    print("| variant | median s | runs | stages (median s) |")
    print("| --- | --- | --- | --- |")
    for k, v in res.items():
        st = {n: statistics.median(x[1][n] for x in v) for n in v[0][1]}
        print(f"| {k} | {statistics.median(x[0] for x in v):.2f} | {', '.join(f'{x[0]:.2f}' for x in v)} "
              f"| {', '.join(f'{a} {b:.2f}' for a, b in st.items())} |")


def ab(corpus) -> None:
    data = Path("/tmp/cutext-bench/data-2GB")  # index_ab.py's corpus
    if not data.is_dir():
        B.write_replicated(corpus, data, 2e9, 256e6, 0)
    out = Path("/tmp/cutext-bench/harness-index")
    pools = B.DevicePools(enabled=True)
    base = B.GpuMemWatch.used_mib()
    print("memory.used baseline", base, "MiB; NVML", bool(B.GpuMemWatch._handles()))

    def within(ctx):
        def fn():
            with ctx():
                return build(data, out)
        return fn

    def with_pools():
        pools.start()
        got = build(data, out)
        pools.stop()
        return got

    run = B.cutext_index_run(data, out, backend="gpu", scheduler="sync", tok=B.tokenizer_kwargs("plain")[0],
                             args=types.SimpleNamespace(k1=KW["k1"], b=KW["b"]), mem_baseline=base, pools=pools)

    def bm25_run():
        r = run()
        return r["seconds"], r["stages"]

    variants = {"plain": lambda: build(data, out), "nvml poller": within(lambda: B.GpuMemWatch(base)),
                "rss poller": within(B.RssWatch), "pools": with_pools, "bm25.py run": bm25_run}
    build(data, out)  # warm-up
    res = {k: [] for k in variants}
    for rep in range(3):
        for k, fn in variants.items():
            res[k].append(fn())
            print(f"  {rep} {k:12s} {res[k][-1][0]:.2f}", flush=True)
    table(res)


def meminfo() -> str:
    d = {k: int(v.split()[0]) / 1024 for k, v in (line.split(":") for line in open("/proc/meminfo"))}
    return f"Dirty {d['Dirty']:,.0f} MiB, Writeback {d['Writeback']:,.0f} MiB"


def order(corpus) -> None:
    work = Path("/tmp/cutext-harness-order")
    shutil.rmtree(work, ignore_errors=True)
    t0 = time.time()
    data, warm, out = work / "data", work / "warm", work / "index"
    B.write_replicated(corpus, data, 2e9, 256e6, 0)
    B.write_lines(corpus.texts, warm, 1)
    print(f"data written at {time.time() - t0:.1f} s; {meminfo()}", flush=True)
    s, _ = build(warm, out)
    print(f"warm-up (1 copy) {s:.1f} s at {time.time() - t0:.1f} s; {meminfo()}", flush=True)
    res = {}
    for phase in ["as bm25.py (data just written)", "after os.sync()"]:
        if phase.startswith("after"):
            t = time.perf_counter()
            os.sync()
            print(f"os.sync() {time.perf_counter() - t:.2f} s; {meminfo()}", flush=True)
        res[phase] = []
        for _ in range(4):
            before = meminfo()
            res[phase].append(build(data, out))
            s, st = res[phase][-1]
            print(f"  {phase}: {s:.2f} s at {time.time() - t0:.1f} s (before: {before}) "
                  + ", ".join(f"{k} {v:.2f}" for k, v in st.items()), flush=True)
    table(res)
    shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("ab", "order"))
    ap.add_argument("--data", default=".devdata", help="folder holding corpora/20news-bydate.tar.gz")
    args = ap.parse_args()
    corpus = B.Corpus(Path(args.data) / "corpora" / "20news-bydate.tar.gz")
    (ab if args.mode == "ab" else order)(corpus)


if __name__ == "__main__":
    main()
