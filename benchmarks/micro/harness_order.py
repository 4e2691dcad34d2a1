# The order of bm25.py's gpu section (issue 10, eighth pass): the corpus written afresh, a warm-up on one copy
# of 20 Newsgroups, then 2 GB builds; then os.sync() (no dirty pages left to write back) and the builds again.
# Prints the page cache's Dirty/Writeback before each build. Run on the lent GPU from the repository root
# after `source benchmarks/gpu_env.sh`:
#   python benchmarks/micro/harness_order.py
import gc
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
sys.path.insert(0, "benchmarks")
import bm25 as B
from cutext import pipelines
work = Path("/tmp/cutext-order"); shutil.rmtree(work, ignore_errors=True); work.mkdir()
corpus = B.Corpus(Path(".devdata/corpora/20news-bydate.tar.gz"))
def meminfo():
    d = dict(l.split(":") for l in open("/proc/meminfo"))
    return f"Dirty {int(d['Dirty'].split()[0])/1024:,.0f} MiB, Writeback {int(d['Writeback'].split()[0])/1024:,.0f} MiB"
t0 = time.time()
data = work / "data"; B.write_replicated(corpus, data, 2e9, 256e6, 0)
warm = work / "warm"; B.write_lines(corpus.texts, warm, 1)
print(f"data written at {time.time()-t0:.1f} s; {meminfo()}", flush=True)
tok = B.tokenizer_kwargs("plain")[0]
kw = dict(backend="gpu", scheduler="sync", format="lines", variant="lucene", k1=1.2, b=0.75, progress=False, **tok)
out = work / "index"
def run(src):
    shutil.rmtree(out, ignore_errors=True); gc.collect()
    t = time.perf_counter(); r = pipelines.run("bm25", str(src), out=str(out), **kw); return time.perf_counter() - t, r.timings
s, _ = run(warm); print(f"warm-up (1 copy) {s:.1f} s at {time.time()-t0:.1f} s; {meminfo()}", flush=True)
res = {}
for phase in ["as bm25.py (data just written)", "after os.sync()"]:
    if phase.startswith("after"):
        t = time.perf_counter(); os.sync(); print(f"os.sync() {time.perf_counter()-t:.2f} s; {meminfo()}", flush=True)
    res[phase] = []
    for i in range(4):
        m = meminfo(); s, st = run(data); res[phase].append((s, st))
        print(f"  {phase}: {s:.2f} s at {time.time()-t0:.1f} s (before: {m}) " + ", ".join(f"{k} {v:.2f}" for k, v in st.items()), flush=True)
print("| phase | median s | runs |")
for k, v in res.items():
    print(f"| {k} | {statistics.median(x[0] for x in v):.2f} | {', '.join(f'{x[0]:.2f}' for x in v)} |")
shutil.rmtree(work, ignore_errors=True)
