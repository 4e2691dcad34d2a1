"""Device memory of loading the 2 GB bm25 index on the GPU (issue 11): nvidia-smi memory.used and RMM
statistics around the load and a small search, under cupy's pool ("plain") and RMM's cudaMallocAsync
("async"), each in a fresh process.  Result: benchmarks/results/search-load-memory-gpu-h200-2026-11-23.log.

    python benchmarks/micro/search_load_memory.py build   # 2 GB of replicated 20 Newsgroups -> /tmp/diag/index
    python benchmarks/micro/search_load_memory.py plain
    python benchmarks/micro/search_load_memory.py async
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/


def used():
    from bm25 import GpuMemWatch  # benchmarks/bm25.py: nvidia-smi memory.used, MiB

    return GpuMemWatch.used_mib()


def main():
    mode = sys.argv[1]
    idx_dir = Path("/tmp/diag/index")
    if mode == "build":
        from bm25 import Corpus, find_20news, write_replicated
        from cutext import pipelines
        corpus = Corpus(find_20news(None))
        write_replicated(corpus, Path("/tmp/diag/data"), 2e9, 256e6, 0)
        pipelines.run("bm25", "/tmp/diag/data", out=idx_dir, backend="gpu", scheduler="sync", format="lines",
                      stopwords=None, stemmer=None, min_len=2, progress=False)
        print("built; used", used())
        return
    import cupy
    import rmm
    import rmm.statistics
    print("resource", type(rmm.mr.get_current_device_resource()).__name__, "cupy allocator",
          cupy.cuda.get_allocator())
    if mode == "async":
        rmm.mr.set_current_device_resource(rmm.mr.CudaAsyncMemoryResource())
        from rmm.allocators.cupy import rmm_cupy_allocator
        cupy.cuda.set_allocator(rmm_cupy_allocator)
    rmm.statistics.enable_statistics()
    from cutext import pipelines
    cupy.zeros(1)
    print(mode, "start used", used())
    t = time.perf_counter()
    rmm.statistics.push_statistics()
    # the steps of BM25Index.load, timed apart
    idx = pipelines.BM25Index.load(idx_dir, backend="gpu")
    st = rmm.statistics.pop_statistics()
    print(mode, f"load {time.perf_counter() - t:.2f} s; used {used()} MiB; rmm peak {st.peak_bytes / 2**20:.0f} MiB, "
          f"cupy pool total {cupy.get_default_memory_pool().total_bytes() / 2**20:.0f} MiB")
    M = idx.matrix
    print("matrix", type(M), M.shape, M.data.dtype, M.indices.dtype, M.indptr.dtype,
          (M.data.nbytes + M.indices.nbytes + M.indptr.nbytes) / 2**20, "MiB")
    idx.search(["hello world"] * 256, k=10)
    print(mode, "after search used", used())


main()
