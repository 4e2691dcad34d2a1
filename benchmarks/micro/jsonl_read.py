# The GPU read stage of JSON Lines (issue 10): libcudf's JSON reader after the device checks
# (stages/gputext.py::read_jsonl_device) against the host reader + one copy to the device (what the GPU
# path did before), on 20 Newsgroups posts written as JSON Lines (json.dumps) and replicated to --mb MB,
# pieces of 64 MiB; then a bm25 index from that file on the GPU (read stage seconds). Medians of 3.
# Run on the lent GPU from the repository root after `source benchmarks/gpu_env.sh`:
#   python benchmarks/micro/jsonl_read.py [--data ../shared/data] [--mb 512]
import argparse
import json
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
    ap.add_argument("--tmp", default="/tmp/cutext-jsonl")
    args = ap.parse_args()
    from cutext import pipelines
    from cutext.kernels.backend import to_cudf
    from cutext.pipelines import datasets
    from cutext.stages import gputext as G
    from cutext.stages.read import plan, read_piece

    tmp = Path(args.tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    src = tmp / f"news-{args.mb:g}MB.jsonl"
    if not src.exists():
        news = datasets.load_20newsgroups(Path(args.data) / "corpora" / "20news-bydate.tar.gz")
        block = "".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n"
                        for i, t in enumerate(news["text"])).encode()
        with open(src, "wb") as fh:
            for _ in range(max(1, round(args.mb * 1e6 / len(block)))):
                fh.write(block)
    size = src.stat().st_size
    fs, pieces, _ = plan(str(src), format="jsonl", blocksize=64 << 20)
    print(f"{src}: {size / 1e6:.0f} MB, {len(pieces)} pieces")

    def all_pieces(read):
        for p in pieces:
            df = read(p)
            del df
        cupy.cuda.runtime.deviceSynchronize()

    readers = {"host reader + copy (before)": lambda p: to_cudf(read_piece(p, fs)),
               "libcudf JSON (read_jsonl_device)": lambda p: G.read_jsonl_device(p, fs)}
    for name, read in readers.items():
        all_pieces(read)  # warm
        ts = []
        for _ in range(3):
            t = time.perf_counter()
            all_pieces(read)
            ts.append(time.perf_counter() - t)
        med = statistics.median(ts)
        print(f"{name:36s} {med:7.3f} s  {size / med / 1e9:6.2f} GB/s")
    runs = []
    for _ in range(3):
        t = time.perf_counter()
        r = pipelines.run("bm25", str(src), out=str(tmp / "idx"), backend="gpu", scheduler="sync", format="jsonl",
                          progress=False, overwrite=True)
        runs.append((time.perf_counter() - t, r.timings))
    t, timings = sorted(runs, key=lambda x: x[0])[1]
    print(f"bm25 index on the GPU from the JSON Lines file: {t:.3f} s = {size / t / 1e9:.3f} GB/s; stages "
          + ", ".join(f"{k} {v:.3f}" for k, v in timings.items()))


if __name__ == "__main__":
    main()
