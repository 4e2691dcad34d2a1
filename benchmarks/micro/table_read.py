# The GPU read stage of JSON Lines and CSV: libcudf's JSON reader / our CSV parse after the device
# checks (stages/readers/device.py::read_jsonl_device, read_csv_device) against the host reader + one copy to
# the device (what the GPU path did before), on 20 Newsgroups posts replicated to --mb MB: JSON Lines
# (json.dumps) in one file read in pieces of 64 MiB; CSV (pyarrow's writer: every string quoted) in 8
# files, a piece each. Then a bm25 index from those files on the GPU (read stage seconds). Medians of 3.
# Run on the lent GPU from the repository root after `source benchmarks/gpu_env.sh`:
#   python benchmarks/micro/table_read.py [--data ../shared/data] [--mb 512] [--formats jsonl,csv]
import argparse
import io
import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path

import cupy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=".devdata")
    ap.add_argument("--mb", type=float, default=512)
    ap.add_argument("--tmp", default="/tmp/cutext-tables")
    ap.add_argument("--formats", default="jsonl,csv")
    args = ap.parse_args()
    for fmt in args.formats.split(","):
        if fmt not in ("jsonl", "csv"):
            ap.error(f"--formats: {fmt!r} is not jsonl or csv")
        bench(args, fmt)


def _write(args, tmp: Path, fmt: str) -> Path:
    """The replicated corpus: ``news-<mb>MB.jsonl`` (one file) or ``news-<mb>MB-csv/part-<i>.csv``."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    from cutext.pipelines import datasets

    if fmt == "jsonl":
        src = tmp / f"news-{args.mb:g}MB.jsonl"
    else:
        src = tmp / f"news-{args.mb:g}MB-csv"
    if src.exists():
        return src
    news = datasets.load_20newsgroups(Path(args.data) / "corpora" / "20news-bydate.tar.gz")
    if fmt == "jsonl":
        block = "".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n"
                        for i, t in enumerate(news["text"])).encode()
        with open(src, "wb") as fh:
            for _ in range(max(1, round(args.mb * 1e6 / len(block)))):
                fh.write(block)
        return src
    buf = io.BytesIO()
    pcsv.write_csv(pa.table({"id": [f"n{i}" for i in range(len(news))], "text": news["text"].tolist()}), buf)
    data = buf.getvalue()
    header, block = data[:data.index(b"\n") + 1], data[data.index(b"\n") + 1:]
    part = tmp / (src.name + ".part")
    part.mkdir(parents=True, exist_ok=True)
    for i in range(8):
        with open(part / f"part-{i}.csv", "wb") as fh:
            fh.write(header)
            for _ in range(max(1, round(args.mb * 1e6 / 8 / len(block)))):
                fh.write(block)
    part.rename(src)
    return src


def bench(args, fmt):
    from cutext import pipelines
    from cutext.kernels.backend import to_cudf
    from cutext.stages.readers import device as G
    from cutext.stages.readers.files import plan, read_piece
    from cutext.stages.runtime.compute import PROFILE_ENV

    tmp = Path(args.tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    src = _write(args, tmp, fmt)
    size = sum(f.stat().st_size for f in src.iterdir()) if src.is_dir() else src.stat().st_size
    fs, pieces, _ = plan(str(src), format=fmt, blocksize=64 << 20)
    print(f"{src}: {size / 1e6:.0f} MB, {len(pieces)} pieces")

    def all_pieces(read):
        for p in pieces:
            df = read(p)
            del df
        cupy.cuda.runtime.deviceSynchronize()

    device = {"jsonl": ("libcudf JSON (read_jsonl_device)", G.read_jsonl_device),
              "csv": ("device parse (read_csv_device)", G.read_csv_device)}[fmt]
    readers = {"host reader + copy (before)": lambda p: to_cudf(read_piece(p, fs)),
               device[0]: lambda p: device[1](p, fs)}
    for name, read in readers.items():
        all_pieces(read)  # warm
        ts = []
        for _ in range(3):
            t = time.perf_counter()
            all_pieces(read)
            ts.append(time.perf_counter() - t)
        med = statistics.median(ts)
        print(f"{name:36s} {med:7.3f} s  {size / med / 1e9:6.2f} GB/s")
    # one more pass of the device reader with its sub-steps timed (device synchronized at each), and
    # the pieces it handed to the host reader, with the reason
    fallbacks = []
    handler = logging.Handler()
    handler.emit = lambda rec: fallbacks.append(rec.getMessage())
    G.log.addHandler(handler)
    G.log.setLevel(logging.DEBUG)
    os.environ[PROFILE_ENV] = "1"
    G.profile(reset=True)
    all_pieces(readers[device[0]])
    del os.environ[PROFILE_ENV]
    G.log.removeHandler(handler)
    print("  device reader sub-steps (s, summed over pieces): "
          + ", ".join(f"{k} {v:.3f}" for k, v in G.profile(reset=True).items()))
    print(f"  pieces read by the host reader: {len(fallbacks)} of {len(pieces)}"
          + (f" ({fallbacks[0]})" if fallbacks else ""))
    runs = []
    for _ in range(3):
        t = time.perf_counter()
        r = pipelines.run("bm25", str(src), out=str(tmp / "idx"), backend="gpu", scheduler="sync", format=fmt,
                          progress=False, overwrite=True)
        runs.append((time.perf_counter() - t, r.timings))
    t, timings = sorted(runs, key=lambda x: x[0])[1]
    print(f"bm25 index on the GPU from the {fmt} input: {t:.3f} s = {size / t / 1e9:.3f} GB/s; stages "
          + ", ".join(f"{k} {v:.3f}" for k, v in timings.items()))


if __name__ == "__main__":
    main()
