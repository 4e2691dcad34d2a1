# Ad hoc micro-benchmark (issue 10, seventh pass): do two cudf Parquet writes overlap when each runs on
# its own CUDA stream (pylibcudf's write_parquet with stream=) instead of the default stream that
# cudf.DataFrame.to_parquet uses? Run on the lent GPU from the repository root after
# `source benchmarks/gpu_env.sh`:
#   python benchmarks/micro/writer_streams.py [--index /tmp/cutext-bench/ab-index]
# Uses two postings files of a 2 GB index (benchmarks/micro/index_ab.py or postings_writer.py writes
# one). Prints the median ms of 3 (after a warm-up) of: both files serially (to_parquet), in two threads
# (to_parquet), serially and in two threads through pylibcudf on the default stream and on one new
# stream a thread. Every file is written with the index's options (snappy, delta-encoded ids).
import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import med


def two(fn, n):
    with ThreadPoolExecutor(2) as ex:
        return list(ex.map(fn, range(n)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", default="/tmp/cutext-bench/ab-index")
    ap.add_argument("--tmp", default="/tmp/pqs2")
    args = ap.parse_args()

    import cudf
    import pylibcudf as plc

    enc = {"term_id": "DELTA_BINARY_PACKED", "doc_id": "DELTA_BINARY_PACKED"}
    files = sorted((Path(args.index) / "postings").iterdir())[:2]
    frames = [cudf.read_parquet(f) for f in files]
    Path(args.tmp).mkdir(parents=True, exist_ok=True)
    print(f"{sum(len(f) for f in frames):,} postings in {len(frames)} frames", flush=True)

    def via_cudf(i):
        frames[i].to_parquet(f"{args.tmp}/c{i}.parquet", index=False, compression="snappy", column_encoding=enc)

    def plc_column(c):  # the column's pylibcudf view (the accessor's name and arguments vary by cudf version)
        for get in (lambda: c.to_pylibcudf(mode="read"), lambda: c.to_pylibcudf(), lambda: c.plc_column):
            try:
                return get()
            except (TypeError, AttributeError):
                continue
        raise TypeError(f"no pylibcudf view of {type(c).__name__}")

    def plc_write(i, stream=None):
        df = frames[i]
        tbl = plc.Table([plc_column(c) for c in df._columns])
        meta = plc.io.types.TableInputMetadata(tbl)
        for j, name in enumerate(df.columns):
            meta.column_metadata[j].set_name(name)
            if name in enc:
                meta.column_metadata[j].set_encoding(plc.io.types.ColumnEncoding.DELTA_BINARY_PACKED)
        opts = (plc.io.parquet.ParquetWriterOptions.builder(plc.io.SinkInfo([f"{args.tmp}/p{i}.parquet"]), tbl)
                .metadata(meta).compression(plc.io.types.CompressionType.SNAPPY).build())
        if stream is None:
            plc.io.parquet.write_parquet(opts)
        else:
            plc.io.parquet.write_parquet(opts, stream)

    def streams():
        from rmm.pylibrmm.stream import Stream

        return [Stream() for _ in frames]

    rows = [
        ("to_parquet, serial", lambda: [via_cudf(i) for i in range(len(frames))]),
        ("to_parquet, 2 threads", lambda: two(via_cudf, len(frames))),
        ("pylibcudf, default stream, serial", lambda: [plc_write(i) for i in range(len(frames))]),
        ("pylibcudf, default stream, 2 threads", lambda: two(plc_write, len(frames))),
    ]
    try:
        ss = streams()
        rows += [("pylibcudf, a stream each, serial", lambda: [plc_write(i, ss[i]) for i in range(len(frames))]),
                 ("pylibcudf, a stream each, 2 threads",
                  lambda: two(lambda i: plc_write(i, ss[i]), len(frames)))]
    except Exception as e:  # no stream objects in this rmm
        print(f"no streams: {type(e).__name__}: {e}")
    for name, fn in rows:
        try:
            print(f"| {name} | {med(fn, warmup=True) * 1e3:.1f} ms |", flush=True)
        except Exception as e:  # an API this pylibcudf lacks
            print(f"| {name} | failed: {type(e).__name__}: {str(e)[:200]} |", flush=True)
    try:
        import pyarrow.parquet as pq

        for i in range(len(frames)):
            back = pq.read_table(f"{args.tmp}/p{i}.parquet")
            host = frames[i].to_arrow()
            same = all(back.column(c).equals(host.column(c)) for c in host.column_names)
            print(f"pylibcudf file {i}: columns {back.column_names}, equal values {same}")
    except Exception as e:
        print(f"read back: {type(e).__name__}: {e}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
