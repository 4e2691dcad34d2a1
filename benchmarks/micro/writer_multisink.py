# Ad hoc micro-benchmark (issue 10, ninth pass): does one cudf Parquet write of many files (libcudf's
# multi-sink write: DataFrame.to_parquet([paths], partition_offsets=...)) cost less than one call a
# file? Run on the lent GPU from the repository root after `source benchmarks/gpu_env.sh`:
#   python benchmarks/micro/writer_multisink.py [--index /tmp/cutext-bench/ab-index] [--files 8]
# The postings are the first --files files of a 2 GB index (benchmarks/micro/index_ab.py writes one),
# concatenated on the device. Every variant writes the same files with the index's options (snappy,
# delta-encoded ids) into --tmp. Prints the median ms of 3 (after a warm-up) and whether every file
# reads back (pyarrow) with the values of its slice.
import argparse
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import med


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", default="/tmp/cutext-bench/ab-index")
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--tmp", default="/tmp/pqms")
    args = ap.parse_args()

    import cudf
    import numpy as np
    import pyarrow.parquet as pq

    enc = {"term_id": "DELTA_BINARY_PACKED", "doc_id": "DELTA_BINARY_PACKED"}
    kw = dict(index=False, compression="snappy", column_encoding=enc)
    files = sorted((Path(args.index) / "postings").iterdir())[:args.files]
    parts = [cudf.read_parquet(f) for f in files]
    sizes = [len(p) for p in parts]
    df = cudf.concat(parts, ignore_index=True)
    del parts
    bounds = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    slices = [df.iloc[bounds[i]:bounds[i + 1]] for i in range(len(sizes))]
    print(f"{len(df):,} postings in {len(sizes)} files of {min(sizes):,}-{max(sizes):,} rows", flush=True)

    def folder(name):
        d = Path(args.tmp) / name
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        return d

    def paths(name):
        d = folder(name)
        return [str(d / f"part.{i:05d}.parquet") for i in range(len(sizes))]

    def one_call_a_file(name, threads):
        ps = paths(name)

        def write(i):
            slices[i].to_parquet(ps[i], **kw)

        if threads == 1:
            for i in range(len(ps)):
                write(i)
        else:
            with ThreadPoolExecutor(threads) as ex:
                list(ex.map(write, range(len(ps))))

    def multisink(name, groups):
        ps = paths(name)
        per = -(-len(ps) // groups)

        def write(g):
            a, e = g * per, min(len(ps), (g + 1) * per)
            if a >= e:
                return
            part = df.iloc[bounds[a]:bounds[e]]
            part.to_parquet(ps[a:e], partition_offsets=[b - bounds[a] for b in bounds[a:e + 1]], **kw)

        if groups == 1:
            write(0)
        else:
            with ThreadPoolExecutor(groups) as ex:
                list(ex.map(write, range(groups)))

    variants = [("a call a file, serial", lambda: one_call_a_file("serial", 1)),
                ("a call a file, 2 threads (the index now)", lambda: one_call_a_file("threads2", 2)),
                ("one call, every file", lambda: multisink("multi1", 1)),
                ("two calls of half the files, 2 threads", lambda: multisink("multi2", 2))]
    for name, fn in variants:
        try:
            ms = med(fn, warmup=True) * 1e3
        except Exception as e:  # an option this cudf refuses
            print(f"| {name} | failed: {type(e).__name__}: {str(e)[:200]} |", flush=True)
            continue
        print(f"| {name} | {ms:.1f} ms | {ms / len(sizes):.1f} ms a file |", flush=True)
    # read back: every variant's files equal the slices
    host = [s.to_arrow() for s in slices]
    for d in ("serial", "threads2", "multi1", "multi2"):
        fs = sorted((Path(args.tmp) / d).glob("*.parquet"))
        if len(fs) != len(host):
            print(f"{d}: {len(fs)} files, expected {len(host)}")
            continue
        same = all(all(pq.read_table(f).column(c).equals(h.column(c)) for c in h.column_names)
                   for f, h in zip(fs, host))
        mb = sum(f.stat().st_size for f in fs) / 1e6
        print(f"{d}: {len(fs)} files, {mb:.1f} MB, equal values {same}", flush=True)


if __name__ == "__main__":
    main()
