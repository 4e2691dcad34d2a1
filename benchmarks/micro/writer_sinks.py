# Ad hoc micro-benchmark of cudf's Parquet writer by sink (issue 10, eighth pass): four postings files of the
# 2 GB index (benchmarks/micro/index_ab.py or postings_writer.py writes it) written as the GPU index writes
# them (cutext.pipelines.bm25._write_part_gpu) to a file on the disk (/tmp), to a file in memory (/dev/shm,
# tmpfs) and to a BytesIO, by 1-4 threads; medians of 5 after a warm-up, with the process's CPU seconds per
# wall second. Run on the lent GPU from the repository root after `source benchmarks/gpu_env.sh`:
#   python benchmarks/micro/writer_sinks.py [--index /tmp/cutext-bench/ab-index]
# (LIBCUDF_CUFILE_POLICY / KVIKIO_NTHREADS in the environment are printed: they are read at start-up.)
import argparse
import io
import os
import shutil
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SINKS = ["/tmp/cutext-writer-sinks", "/dev/shm/cutext-writer-sinks", None]  # None: a BytesIO


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", default="/tmp/cutext-bench/ab-index")
    args = ap.parse_args()

    import cudf
    import cupy

    from cutext.pipelines.bm25 import GPU_POSTINGS_ENCODING, _write_part_gpu

    files = sorted((Path(args.index) / "postings").iterdir())[:4]
    dfs = [cudf.read_parquet(f) for f in files]
    print("rows", [len(d) for d in dfs], "LIBCUDF_CUFILE_POLICY", os.environ.get("LIBCUDF_CUFILE_POLICY"),
          "KVIKIO_NTHREADS", os.environ.get("KVIKIO_NTHREADS"))

    def write(df, path):
        _write_part_gpu(df, io.BytesIO() if path is None else path, GPU_POSTINGS_ENCODING)

    def run(where, nthreads):
        paths = [None if where is None else f"{where}/f{i}.parquet" for i in range(len(dfs))]
        cupy.cuda.Device().synchronize()
        t, c0 = time.perf_counter(), time.process_time()
        with ThreadPoolExecutor(nthreads) as ex:
            list(ex.map(write, dfs, paths))
        cupy.cuda.Device().synchronize()
        return time.perf_counter() - t, time.process_time() - c0

    for where in SINKS:
        if where:
            os.makedirs(where, exist_ok=True)
    print(f"| sink | threads | ms for {len(dfs)} files (median of 5) | CPU s / wall s |")
    for where in SINKS:
        for nt in [1, 2, 3, 4]:
            run(where, nt)
            r = [run(where, nt) for _ in range(5)]
            med = statistics.median(x[0] for x in r)
            cpu = statistics.median(x[1] / x[0] for x in r)
            print(f"| {where or 'BytesIO'} | {nt} | {med * 1e3:.1f} | {cpu:.2f} |", flush=True)
    for where in SINKS:
        if where:
            shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    main()
