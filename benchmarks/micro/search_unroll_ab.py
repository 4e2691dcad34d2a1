# A/B of the GPU engine's scoring step (kernels/search.cu) on the device: the engine alone (topk_arrays of
# precomputed query CSRs, 10,000 Subject-line queries, top 10, batches of 8,192) and the whole search, in
# alternating rounds.  A term's first step in a tile is one posting per thread, the next ones SB_UNROLL per
# thread: -DSB_UNROLL=1 (always one, the earlier engine's step), 2, and the default 4.
# Run from the repository root after `source benchmarks/gpu_env.sh`:
#   python benchmarks/micro/search_unroll_ab.py INDEX_DIR...
# (GPU indexes of benchmarks/bm25.py's replicated 20 Newsgroups, tokenizer 'plain').
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, "benchmarks")
from bm25 import Corpus  # noqa: E402

from cutext import pipelines  # noqa: E402
from cutext.kernels import _cuda  # noqa: E402
from cutext.kernels import search as ks  # noqa: E402

corpus = Corpus(Path(os.environ.get("CUTEXT_DATA", "../shared/data")) / "corpora" / "20news-bydate.tar.gz")
queries = corpus.queries(10000)
orig = _cuda.kernel
VARIANTS = {"steps of 1": ("-DSB_UNROLL=1",), "1, then 2": ("-DSB_UNROLL=2",), "1, then 4 (default)": ()}


def use(extra):
    ks._cuda.kernel = lambda name, fn, options=_cuda.COMPILE_OPTIONS: orig(name, fn, tuple(options) + extra)


for d in sys.argv[1:]:
    import cupy as cp

    idx = pipelines.BM25Index.load(d, backend="gpu")
    mats = [idx.query_matrix(queries[s:s + 8192]) for s in range(0, len(queries), 8192)]
    ref = None
    for name, extra in VARIANTS.items():  # compile each, and check they agree
        use(extra)
        out = [idx.topk_arrays(Q, 10) for Q in mats]
        if ref is None:
            ref = out
        for (a, b) in zip(out, ref):
            assert all((x == y).all() for x, y in zip(a, b)), name
    res = {}
    for r in range(7):
        for name, extra in VARIANTS.items():
            use(extra)
            cp.cuda.Device().synchronize()
            t = time.perf_counter()
            for Q in mats:
                idx.topk_arrays(Q, 10)
            res.setdefault((name, "engine"), []).append(time.perf_counter() - t)
            t = time.perf_counter()
            idx.search(queries, k=10, batch_size=8192)
            res.setdefault((name, "search"), []).append(time.perf_counter() - t)
    use(())
    print(d, "(equal results across variants)", flush=True)
    for (name, part), ts in res.items():
        m = statistics.median(ts)
        print(f"  {name:20s} {part:7s}: median {m * 1e3:7.1f} ms = {len(queries) / m:9,.0f} q/s  runs "
              + " ".join(f"{t * 1e3:.0f}" for t in ts), flush=True)
