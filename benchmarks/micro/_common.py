"""Shared by the micro-benchmarks: the timer (median seconds of ``r`` runs, the device synchronized
around each) and a postings frame."""
import statistics
import time

import cupy as cp


def med(fn, r=3, warmup=False):
    if warmup:
        fn()
    ts = []
    for _ in range(r):
        cp.cuda.runtime.deviceSynchronize()
        t = time.perf_counter()
        fn()
        cp.cuda.runtime.deviceSynchronize()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def postings_frame(seed, n=8_000_000):
    """``n`` random postings as the index writes them: (term_id int32, doc_id int64) sorted by
    term then doc, tf int32 (mostly 1), weight float32."""
    import cudf

    rng = cp.random.default_rng(seed)
    key = cp.sort(rng.integers(1, 170000, n, dtype=cp.int64) * 2_000_000
                  + rng.integers(0, 1_050_000, n, dtype=cp.int64))
    return cudf.DataFrame({"term_id": (key // 2_000_000).astype(cp.int32), "doc_id": key % 2_000_000,
                           "tf": cp.minimum(rng.geometric(0.6, n), 50).astype(cp.int32),
                           "weight": rng.random(n, dtype=cp.float32)})
