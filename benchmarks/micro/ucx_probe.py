# Ad hoc probe (issue 10, twelfth pass): the time to move one term range's packed rows (~74 MB) from
# one worker process to another on GPU 0, by the comm (tcp, or ucx through distributed-ucxx) and the
# workers' RMM resource (async: cudaMallocAsync as cutext's own cluster; async-ipc: the same with an
# IPC-exportable pool; pool: an RMM pool over cudaMalloc), for three payloads: one cupy array, the
# packed rows as the plain tuple of cupy arrays cutext sends (stages.api._term_slices), and the same
# rows as the _PackedRows dataclass (which distributed pickles through host memory). Each transfer is
# a task on the other worker that reads the payload (median of the last 4 of 5; "same worker" is the
# task's own cost). Run on the lent GPU machine from the repository root, after
# `source benchmarks/gpu_env.sh` (and distributed-ucxx installed for ucx):
#   python benchmarks/micro/ucx_probe.py [tcp,ucx] [async,async-ipc,pool]
import os
import statistics
import sys
import time

os.environ["DASK_DISTRIBUTED_UCXX__CREATE_CUDA_CONTEXT"] = "True"

from distributed import Client, LocalCluster, wait  # noqa: E402

N = 7_400_000  # ~74 MB packed (10 B a posting)


def setup(kind):
    """The worker's RMM resource (as client_profile.py's device_resource), and CuPy allocating from it."""
    import rmm

    from cutext.stages.compute import rmm_cupy

    if kind.startswith("async"):
        rmm.mr.set_current_device_resource(rmm.mr.CudaAsyncMemoryResource(enable_ipc=kind == "async-ipc"))
    else:
        rmm.mr.set_current_device_resource(rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), 8 << 30))
    rmm_cupy()


def make(form, n, seed):
    import cupy as cp

    from cutext.stages.api import _PackedRows

    terms = cp.arange(n // 500, dtype=cp.int32)
    runs = cp.full(len(terms), 500, dtype=cp.int32)
    d = cp.arange(n, dtype=cp.int32) + seed
    tf = cp.ones(n, dtype=cp.uint16)
    w = cp.ones(n, dtype=cp.float32)
    if form == "packed":
        return _PackedRows(terms, runs, d, tf, w)
    if form == "tuple":
        return (terms, runs, d, tf, w)
    return cp.zeros(n * 10 // 8, dtype=cp.int64)


def touch(x):
    import cupy as cp

    a = x.doc_id if hasattr(x, "doc_id") else (x[2] if isinstance(x, tuple) else x)
    return int(cp.asarray(a)[-1]) + 0 * len(a)


def main():
    protos = sys.argv[1].split(",") if len(sys.argv) > 1 else ["tcp", "ucx"]
    for proto in protos:
        for kind in (sys.argv[2].split(",") if len(sys.argv) > 2 else ("async", "pool")):
            t = time.perf_counter()
            try:
                cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, protocol=proto,
                                       dashboard_address=None)
            except Exception as e:  # noqa: BLE001
                print(f"{proto} {kind}: cluster failed: {type(e).__name__}: {e}", flush=True)
                continue
            with cluster, Client(cluster) as c:
                c.run(setup, kind)
                a, b = list(c.scheduler_info()["workers"])
                print(f"\n== {proto} {kind}: up in {time.perf_counter() - t:.1f} s; workers {a} {b}", flush=True)
                for form, dest in (("array", a), ("array", b), ("tuple", b), ("packed", b)):
                    secs = []
                    for rep in range(5):
                        x = c.submit(make, form, N, rep, workers=[a], pure=False)
                        wait(x)
                        t = time.perf_counter()
                        y = c.submit(touch, x, workers=[dest], pure=False)
                        y.result()
                        secs.append(time.perf_counter() - t)
                        del x, y
                    med = statistics.median(secs[1:])
                    print(f"{proto:4} {kind:5} {form:6} {'same worker' if dest == a else 'to other':11} median {med * 1e3:7.1f} ms = {N * 10 / med / 1e9:5.2f} GB/s"
                          f"  ({', '.join(f'{s * 1e3:.0f}' for s in secs)} ms)", flush=True)


if __name__ == "__main__":
    main()
