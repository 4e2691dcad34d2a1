# Does bm25.py's measuring slow the GPU build it measures? (issue 10, eighth pass) One process, the 2 GB
# corpus of index_ab.py, builds alternated: plain pipelines.run; inside bm25.py's device-memory poller
# (NVML); inside its RSS poller (psutil); between its DevicePools start/stop (RMM statistics, CuPy pools
# emptied); and bm25.py's cutext_index_run as its gpu section calls it. Medians of 3 after a warm-up.
# Run on the lent GPU from the repository root after `source benchmarks/gpu_env.sh`:
#   python benchmarks/micro/harness_ab.py
import gc
import shutil
import statistics
import sys
import time
import types
from pathlib import Path
sys.path.insert(0, "benchmarks")
import bm25 as B
from cutext import pipelines
data = Path("/tmp/cutext-bench/data-2GB")
if not data.is_dir():
    B.write_replicated(B.Corpus(Path(".devdata/corpora/20news-bydate.tar.gz")), data, 2e9, 256e6, 0)
out = Path("/tmp/cutext-bench/poll-index")
tok = B.tokenizer_kwargs("plain")[0]
args = types.SimpleNamespace(k1=1.2, b=0.75)
pools = B.DevicePools(enabled=True)
base = B.GpuMemWatch.used_mib()
print("baseline", base, "nvml", bool(B.GpuMemWatch._handles()))
kw = dict(out=str(out), backend="gpu", scheduler="sync", format="lines", variant="lucene", k1=1.2, b=0.75, progress=False, **tok)
def plain():
    shutil.rmtree(out, ignore_errors=True); gc.collect()
    t = time.perf_counter(); r = pipelines.run("bm25", str(data), **kw); return time.perf_counter() - t, r.timings
def gpuw():
    shutil.rmtree(out, ignore_errors=True); gc.collect()
    with B.GpuMemWatch(base):
        t = time.perf_counter(); r = pipelines.run("bm25", str(data), **kw); return time.perf_counter() - t, r.timings
def rssw():
    shutil.rmtree(out, ignore_errors=True); gc.collect()
    with B.RssWatch():
        t = time.perf_counter(); r = pipelines.run("bm25", str(data), **kw); return time.perf_counter() - t, r.timings
def poolsw():
    shutil.rmtree(out, ignore_errors=True); gc.collect(); pools.start()
    t = time.perf_counter(); r = pipelines.run("bm25", str(data), **kw); s = time.perf_counter() - t; pools.stop(); return s, r.timings
f = B.cutext_index_run(data, out, backend="gpu", scheduler="sync", tok=tok, args=args, mem_baseline=base, pools=pools)
def bench():
    r = f(); return r["seconds"], r["stages"]
V = {"plain": plain, "nvml poller": gpuw, "rss poller": rssw, "pools": poolsw, "bm25.py run": bench}
plain()
res = {k: [] for k in V}
for rep in range(3):
    for k, fn in V.items():
        s, st = fn(); res[k].append((s, st)); print(f"  {rep} {k:12s} {s:.2f}", flush=True)
print("| variant | median s | runs | stages |")
for k, v in res.items():
    st = {n: statistics.median(x[1][n] for x in v) for n in v[0][1]}
    print(f"| {k} | {statistics.median(x[0] for x in v):.2f} | {', '.join(f'{x[0]:.2f}' for x in v)} | {', '.join(f'{a} {b:.2f}' for a, b in st.items())} |")
