# Ad hoc micro-benchmark of cudf's Parquet writer by sink (issue 10, eighth pass): four postings files of the
# 2 GB index (benchmarks/micro/index_ab.py or postings_writer.py writes it) written to a file on the disk
# (/tmp), to a file in memory (/dev/shm, tmpfs) and to a BytesIO, by 1-4 threads; medians of 5 after a
# warm-up, with the process's CPU seconds per wall second. Run on the lent GPU from the repository root
# after `source benchmarks/gpu_env.sh`:
#   python benchmarks/micro/writer_sinks.py
# (LIBCUDF_CUFILE_POLICY / KVIKIO_NTHREADS in the environment are printed: they are read at start-up.)
import io
import os
import shutil
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
import cudf, cupy
src = "/tmp/cutext-bench/ab-index/postings/"
files = sorted(os.listdir(src))[:4]
dfs = [cudf.read_parquet(src + f) for f in files]
print("rows", [len(d) for d in dfs], "policy", os.environ.get("LIBCUDF_CUFILE_POLICY"), "kvikio", os.environ.get("KVIKIO_NTHREADS"))
enc = {"term_id": "DELTA_BINARY_PACKED", "doc_id": "DELTA_BINARY_PACKED"}
def w(df, path):
    if path is None:
        b = io.BytesIO(); df.to_parquet(b, index=False, compression="snappy", column_encoding=enc); return len(b.getbuffer())
    df.to_parquet(path, index=False, compression="snappy", column_encoding=enc); return 0
def run(where, nthreads):
    paths = [None if where is None else f"{where}/f{i}.parquet" for i in range(4)]
    cupy.cuda.Device().synchronize()
    t = time.perf_counter(); c0 = time.process_time()
    if nthreads == 1:
        for d, p in zip(dfs, paths): w(d, p)
    else:
        with ThreadPoolExecutor(nthreads) as ex: list(ex.map(w, dfs, paths))
    cupy.cuda.Device().synchronize()
    return time.perf_counter() - t, time.process_time() - c0
os.makedirs("/tmp/wtest", exist_ok=True); os.makedirs("/dev/shm/wtest", exist_ok=True)
print("| sink | threads | ms for 4 files (median of 5) | CPU s / wall s |")
for where in ["/tmp/wtest", "/dev/shm/wtest", None]:
    for nt in [1, 2, 3, 4]:
        run(where, nt)
        r = [run(where, nt) for _ in range(5)]
        med = statistics.median(x[0] for x in r); cpu = statistics.median(x[1] / x[0] for x in r)
        print(f"| {where or 'BytesIO'} | {nt} | {med*1e3:.1f} | {cpu:.2f} |", flush=True)
# D2H of the 4 frames' columns (pageable), for scale
cupy.cuda.Device().synchronize(); t = time.perf_counter()
for d in dfs:
    for c in d.columns: d[c].values.get()
print(f"D2H of the raw columns: {(time.perf_counter()-t)*1e3:.1f} ms")
shutil.rmtree("/dev/shm/wtest")
