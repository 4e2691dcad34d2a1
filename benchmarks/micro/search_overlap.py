"""Do the shards of an index on several GPUs of one process score a batch at the same time?

The engine part of a search batch only (the query CSR made once beforehand, no frame): the index on one GPU,
each shard of ``BM25Index.load(devices=[0..n-1])`` alone, every shard started from the caller's thread
before any is waited for (what ``search`` does), and a thread a shard that starts and waits for its own.
Wall seconds a batch of ``--batch-size`` queries, medians of ``--repeats``, each device synchronized
before the clock stops.  If the shards overlap, "all started" is about the slowest shard alone.  The index
is the one ``benchmarks/search_gpus.py`` builds (``--index``, default its workdir's ``index``).

    python benchmarks/micro/search_overlap.py --devices 2 [--index /tmp/cutext-search-gpus/index]
"""
from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

import bm25 as bench  # noqa: E402
from search_host import median_seconds  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", default="/tmp/cutext-search-gpus/index")
    ap.add_argument("--devices", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=8192)
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--data", default=None, help="folder holding corpora/20news-bydate.tar.gz")
    args = ap.parse_args(argv)

    import cupy

    from cutext.stages.engines import bm25_index as bi

    queries = bench.Corpus(bench.find_20news(args.data)).queries(args.batch_size)
    one = bi.BM25Index.load(args.index, backend="gpu")
    Q = one.query_matrix(queries)
    rows = []

    def sync(devs):
        for d in devs:
            cupy.cuda.Device(d).synchronize()

    def single():
        one._sm.topk_start(Q, args.k, "gpu")()
        sync([0])

    rows.append(("1 GPU, whole index", median_seconds(single, args.repeats)))
    sharded = bi.BM25Index.load(args.index, backend="gpu", devices=list(range(args.devices)))
    devs, shards = sharded._client, [f for _, _, _, f in sharded._shard_futures]

    def start(f):
        return devs.run(f, bi._shard_topk_start, Q, args.k, "gpu", None, None, None)

    def alone(f):
        devs.run(f, bi._shard_finish, start(f))
        sync([f.device])

    for i, f in enumerate(shards):
        rows.append((f"shard {i} alone (GPU {f.device}, docs {f.hi - f.lo:,})",
                     median_seconds(lambda f=f: alone(f), args.repeats)))

    def all_started():
        fins = [(f, start(f)) for f in shards]
        for f, fin in fins:
            devs.run(f, bi._shard_finish, fin)
        sync([f.device for f in shards])

    rows.append((f"{len(shards)} shards, all started on the caller's thread",
                 median_seconds(all_started, args.repeats)))
    pool = ThreadPoolExecutor(len(shards))

    def own(f):
        devs.run(f, bi._shard_finish, start(f))
        sync([f.device])

    rows.append((f"{len(shards)} shards, a thread a shard",
                 median_seconds(lambda: list(pool.map(own, shards)), args.repeats)))

    def uploads():
        for f in shards:  # the query CSR copied to each device, as a start does
            with cupy.cuda.Device(f.device):
                cupy.asarray(Q.indices), cupy.asarray(Q.data), cupy.asarray(Q.indptr)
        sync([f.device for f in shards])

    rows.append((f"query CSR copied to {len(shards)} devices", median_seconds(uploads, args.repeats)))
    print(f"\n{args.batch_size} queries a batch, k={args.k}, medians of {args.repeats}")
    print("| what | ms a batch | q/s |")
    print("| --- | --- | --- |")
    for what, s in rows:
        print(f"| {what} | {1e3 * s:.2f} | {args.batch_size / s:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
