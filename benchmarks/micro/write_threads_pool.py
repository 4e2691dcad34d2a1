# Ad hoc micro-benchmark of the GPU text path (issue 10), run once on the lent H200 from the repository root
# after `source benchmarks/gpu_env.sh`, data in .devdata/; output in results/textpath-micro-gpu-h200-2026-11-23.log.
import os
from concurrent.futures import ThreadPoolExecutor
import cupy as cp, rmm
from _common import med, postings_frame as frame

for label in ("default resource", "CudaAsyncMemoryResource"):
    if label != "default resource":
        rmm.mr.set_current_device_resource(rmm.mr.CudaAsyncMemoryResource())
    frames = [frame(i) for i in range(4)]
    os.makedirs("/tmp/pq", exist_ok=True)
    def serial():
        for i, f in enumerate(frames):
            f.to_parquet(f"/tmp/pq/s{i}.parquet", index=False)
    def threaded(k):
        def go():
            with ThreadPoolExecutor(k) as ex:
                list(ex.map(lambda a: a[1].to_parquet(f"/tmp/pq/t{a[0]}.parquet", index=False), enumerate(frames)))
        return go
    print(f"[{label}] 4 x 8 M postings: serial {med(serial)*1e3:.0f} ms, 2 threads {med(threaded(2))*1e3:.0f} ms, "
          f"4 threads {med(threaded(4))*1e3:.0f} ms")
    big = cp.random.default_rng(9).integers(0, 255, 250_000_000, dtype=cp.uint8)
    def allocs():
        for _ in range(10):
            a = cp.empty(250_000_000, cp.uint8); a[:1] = 1; del a
    print(f"[{label}] 10 x alloc+free 250 MB: {med(allocs)*1e3:.1f} ms; flatnonzero(big >= 128) {med(lambda: cp.flatnonzero(big >= 250))*1e3:.1f} ms")
    del frames
