# A/B of the search host side on the device (results/search-poller-ab-gpu-h200-2026-11-23.log): text_csr in parallel
# chunks vs one chunk, with and without the benchmark's nvidia-smi poller; alternating rounds in one process.
# Run from the repository root after `source benchmarks/gpu_env.sh`: python benchmarks/micro/search_poller_ab.py INDEX_DIR...
# (GPU indexes of benchmarks/bm25.py's replicated 20 Newsgroups, 200 MB and 2 GB, tokenizer 'plain').
import sys, time, statistics, os
sys.path.insert(0, "benchmarks")
from bm25 import Corpus, GpuMemWatch
from cutext import pipelines
from cutext.kernels import termhash
corpus = Corpus(__import__("pathlib").Path(os.environ.get("CUTEXT_DATA", "../shared/data")) / "corpora" / "20news-bydate.tar.gz")
queries = corpus.queries(10000)
orig = termhash._text_csr
def serial(*a):
    return orig(*a[:-1], 1)
for d in sys.argv[1:]:
    idx = pipelines.BM25Index.load(d, backend="gpu")
    idx.search(queries[:256], k=10, batch_size=256)
    idx.search(queries, k=10, batch_size=8192)
    import numba
    print(d, "numba layer", numba.threading_layer(), numba.get_num_threads(), "OMP_WAIT_POLICY", os.environ.get("OMP_WAIT_POLICY"), flush=True)
    res = {}
    for r in range(7):
        for mode in ("par", "serial", "par+watch", "serial+watch"):
            termhash._text_csr = serial if mode.startswith("serial") else orig
            for bs in (4096, 8192):
                with GpuMemWatch(0.0, enabled="watch" in mode):
                    t = time.perf_counter(); idx.search(queries, k=10, batch_size=bs); dt = time.perf_counter() - t
                res.setdefault((mode, bs), []).append(dt)
    termhash._text_csr = orig
    for (mode, bs), ts in res.items():
        print(f"  {mode:13s} bs {bs}: median {statistics.median(ts)*1e3:6.1f} ms = {1e4/statistics.median(ts):9,.0f} q/s  runs " + " ".join(f"{t*1e3:.0f}" for t in ts), flush=True)
