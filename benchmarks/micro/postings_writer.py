# Ad hoc micro-benchmark of cudf's Parquet writer on real postings: which
# options, encodings and columns cost what. Run on the lent GPU from the repository root after
# `source benchmarks/gpu_env.sh`:
#   python benchmarks/micro/postings_writer.py [--index /tmp/cutext-bench/ab-index] [--rows 16000000]
# The postings are the first file of a 2 GB index (benchmarks/micro/index_ab.py writes one; this
# script builds it when missing). Per variant: median wall ms of 3 after a warm-up, the process's CPU
# seconds per wall second (all threads: near 1 or above = the host is busy, near 0 = the device or
# waits), the file size, and whether pyarrow reads back the same values (column by column: cudf marks
# columns without nulls required, so whole-table equality fails on the schema alone; the script's first
# version compared whole tables and printed False for that).
import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (bm25.py's corpus writer)

DELTA = {"term_id": "DELTA_BINARY_PACKED", "doc_id": "DELTA_BINARY_PACKED"}
VARIANTS = [
    ("default (snappy, dictionary, row-group stats)", {}),
    ("no compression", {"compression": None}),
    ("no compression, no dictionary, no stats", {"compression": None, "use_dictionary": False, "statistics": "NONE"}),
    ("LZ4", {"compression": "LZ4"}),
    ("ZSTD", {"compression": "ZSTD"}),
    ("snappy, no dictionary", {"use_dictionary": False}),
    ("snappy, no stats", {"statistics": "NONE"}),
    ("v2 headers", {"header_version": "2.0"}),
    ("delta term+doc, v2", {"column_encoding": DELTA, "header_version": "2.0"}),
    ("delta term+doc, v2, no compression", {"column_encoding": DELTA, "header_version": "2.0", "compression": None}),
    ("delta term+doc, v2, those not compressed",
     {"column_encoding": DELTA, "header_version": "2.0", "skip_compression": {"term_id", "doc_id"}}),
    ("delta term+doc, v1", {"column_encoding": DELTA}),
    ("weight byte-stream-split", {"column_encoding": {"weight": "BYTE_STREAM_SPLIT"}}),
    ("pages of 1 M rows / 8 MiB", {"max_page_size_rows": 1 << 20, "max_page_size_bytes": 8 << 20}),
    ("one row group", {"row_group_size_rows": 1 << 30, "row_group_size_bytes": 1 << 40}),
    ("row groups of 256 k rows", {"row_group_size_rows": 1 << 18}),
]
# on top of what the GPU index writes now (GPU_POSTINGS_ENCODING, snappy): `--pass 2`
PIPE = {"column_encoding": DELTA}
VARIANTS2 = [
    ("index now (delta term+doc, snappy)", PIPE),
    ("now, weight not compressed", dict(PIPE, skip_compression={"weight"})),
    ("now, weight PLAIN, not compressed",
     {"column_encoding": dict(DELTA, weight="PLAIN"), "skip_compression": {"weight"}}),
    ("now, weight + tf PLAIN", {"column_encoding": dict(DELTA, weight="PLAIN", tf="PLAIN")}),
    ("now, no compression", dict(PIPE, compression=None)),
    ("now, no stats", dict(PIPE, statistics="NONE")),
    ("now, one row group", dict(PIPE, row_group_size_rows=1 << 30, row_group_size_bytes=1 << 40)),
    ("now, row groups of 4 M rows", dict(PIPE, row_group_size_rows=1 << 22, row_group_size_bytes=1 << 40)),
    ("now, pages of 256 k rows / 4 MiB", dict(PIPE, max_page_size_rows=1 << 18, max_page_size_bytes=4 << 20)),
    ("now, LZ4", dict(PIPE, compression="LZ4")),
    ("now, ZSTD", dict(PIPE, compression="ZSTD")),
]


def timed(fn, r=3):
    import cupy as cp

    fn()
    walls, cpus = [], []
    for _ in range(r):
        cp.cuda.runtime.deviceSynchronize()
        c, t = time.process_time(), time.perf_counter()
        fn()
        cp.cuda.runtime.deviceSynchronize()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    i = walls.index(statistics.median(walls))
    return walls[i], cpus[i] / walls[i]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", default="/tmp/cutext-bench/ab-index")
    ap.add_argument("--data", default=".devdata")
    ap.add_argument("--rows", type=int, default=16_000_000)
    ap.add_argument("--tmp", default="/tmp/pqw")
    ap.add_argument("--pass", dest="npass", type=int, default=1,
                    help="1: the first table (options on cudf's defaults); 2: options on the index's encoding")
    args = ap.parse_args()

    import cudf
    import pyarrow.parquet as pq

    index = Path(args.index)
    if not (index / "postings").is_dir():
        from cutext import pipelines

        from bm25 import Corpus, tokenizer_kwargs, write_replicated

        data = index.parent / "data-2GB"
        write_replicated(Corpus(Path(args.data) / "corpora" / "20news-bydate.tar.gz"), data, 2e9, 256e6, 0)
        pipelines.run("bm25", str(data), out=str(index), backend="gpu", scheduler="sync", format="lines",
                      index_format=1, progress=False, **tokenizer_kwargs("plain")[0])
    first = sorted((index / "postings").iterdir())[0]
    df = cudf.read_parquet(first).iloc[:args.rows].reset_index(drop=True)
    n = len(df)
    raw = sum(df[c].dtype.itemsize for c in df.columns) * n
    host = df.to_arrow()
    os.makedirs(args.tmp, exist_ok=True)
    print(f"{n:,} postings of {first}, {raw / 1e6:.0f} MB raw; {os.cpu_count()} cores", flush=True)
    print("| variant | ms | GB/s raw | CPU s / wall s | MB on disk | encodings | read back equal |")
    print("| --- | --- | --- | --- | --- | --- | --- |")

    def row(name, fn, path):
        try:
            wall, cpu = timed(fn)
        except Exception as e:  # an option this cudf lacks or refuses
            print(f"| {name} | failed: {type(e).__name__}: {str(e)[:120]} | | | | | |", flush=True)
            return None
        md = pq.ParquetFile(path).metadata
        enc = sorted({f"{md.schema.column(j).name}:{'/'.join(md.row_group(0).column(j).encodings)}"
                      for j in range(md.num_columns)})
        back = pq.read_table(path) if path.endswith("x.parquet") else None
        same = "" if back is None else all(back.column(c).equals(host.column(c)) for c in host.column_names)
        print(f"| {name} | {wall * 1e3:.1f} | {raw / wall / 1e9:.2f} | {cpu:.2f} | {os.path.getsize(path) / 1e6:.1f} "
              f"| {' '.join(enc)} | {same} |", flush=True)
        return wall

    path = f"{args.tmp}/x.parquet"
    for name, kw in VARIANTS if args.npass == 1 else VARIANTS2:
        row(name, lambda kw=kw: df.to_parquet(path, index=False, **kw), path)
    if args.npass == 2:
        for c in df.columns:
            one = df[[c]]
            enc = {k: v for k, v in DELTA.items() if k == c}
            row(f"column {c} alone, index encoding", lambda one=one, enc=enc: one.to_parquet(
                f"{args.tmp}/c.parquet", index=False, column_encoding=enc), f"{args.tmp}/c.parquet")
        return
    # one column at a time (default options): which column costs what
    for c in df.columns:
        one = df[[c]]
        row(f"column {c} alone", lambda one=one: one.to_parquet(f"{args.tmp}/c.parquet", index=False),
            f"{args.tmp}/c.parquet")
    # the fixed cost of a call
    small = df.iloc[:1000]
    row("1,000 postings", lambda: small.to_parquet(f"{args.tmp}/s.parquet", index=False), f"{args.tmp}/s.parquet")
    # two halves in two threads (what the pipeline's two writers do) and serially
    halves = [df.iloc[:n // 2], df.iloc[n // 2:]]
    for kw_name, kw in (("default", {}), ("no compression, no dictionary, no stats", VARIANTS[2][1])):
        def serial(kw=kw):
            for i, h in enumerate(halves):
                h.to_parquet(f"{args.tmp}/h{i}.parquet", index=False, **kw)

        def threads(kw=kw):
            with ThreadPoolExecutor(2) as ex:
                list(ex.map(lambda i: halves[i].to_parquet(f"{args.tmp}/h{i}.parquet", index=False, **kw), (0, 1)))

        row(f"2 halves serial, {kw_name}", serial, f"{args.tmp}/h0.parquet")
        row(f"2 halves in 2 threads, {kw_name}", threads, f"{args.tmp}/h0.parquet")


if __name__ == "__main__":
    main()
