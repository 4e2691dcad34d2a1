# A/B of the GPU corpus memory changes on the 2 GB index, in one process, variants alternated,
# median of 3 each; run on the lent GPU from the repository root after `source benchmarks/gpu_env.sh`
# (the data of benchmarks/bm25.py --gpu under /tmp/cutext-bench/data-2GB must exist):
#   python benchmarks/micro/memory_ab.py
# Variants: "now" (CuPy from RMM, each scan freed once counted); "cupy pool" (CuPy's own pool, as before);
# "keep scans" (api.count instead of api.count_releasing). RMM's peak misses CuPy's arrays in "cupy pool".
import contextlib
import statistics
import time

import cupy
import rmm
import rmm.statistics

from cutext import pipelines
from cutext.stages.runtime import compute
from cutext.stages.text import public as api

DATA, OUT = "/tmp/cutext-bench/data-2GB", "/tmp/cutext-bench/ab-index"


def variant(name):
    stack = contextlib.ExitStack()
    if name == "cupy pool":
        old = compute.cupy_from_rmm
        compute.cupy_from_rmm = contextlib.nullcontext
        stack.callback(setattr, compute, "cupy_from_rmm", old)
    if name == "keep scans":
        old_c = api.count_releasing
        api.count_releasing = lambda encoded, n_docs=None: api.count(encoded, n_docs=n_docs)
        stack.callback(setattr, api, "count_releasing", old_c)
    return stack


def main():
    rmm.mr.set_current_device_resource(rmm.mr.CudaAsyncMemoryResource())
    rmm.statistics.enable_statistics()
    names = ["now", "cupy pool", "keep scans"]
    res = {n: [] for n in names}
    pipelines.run("bm25", DATA, out=OUT, backend="gpu", scheduler="sync", format="lines", progress=False)  # warm-up
    for _ in range(3):
        for n in names:
            cupy.get_default_memory_pool().free_all_blocks()
            with variant(n):
                rmm.statistics.push_statistics()
                t = time.perf_counter()
                r = pipelines.run("bm25", DATA, out=OUT, backend="gpu", scheduler="sync", format="lines",
                                  progress=False)
                sec = time.perf_counter() - t
                peak = rmm.statistics.pop_statistics().peak_bytes
            res[n].append((sec, peak, cupy.get_default_memory_pool().total_bytes(), r.timings))
    print("| variant | seconds (median of 3) | runs | RMM peak MiB | CuPy pool MiB | stages (median s) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for n in names:
        secs = [x[0] for x in res[n]]
        st = {k: statistics.median(x[3][k] for x in res[n]) for k in res[n][0][3]}
        print(f"| {n} | {statistics.median(secs):.2f} | {', '.join(f'{s:.2f}' for s in secs)} "
              f"| {max(x[1] for x in res[n]) / 2**20:,.0f} | {max(x[2] for x in res[n]) / 2**20:,.0f} "
              f"| {', '.join(f'{k} {v:.2f}' for k, v in st.items())} |")


if __name__ == "__main__":
    main()
