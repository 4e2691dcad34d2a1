"""Where a search batch on a Client spends the time the workers do not: actor calls, replies, the engine.

The index is the one ``benchmarks/search_gpus.py`` builds (``--index``, default its workdir's ``index``),
loaded on a ``LocalCUDACluster`` of ``--gpus`` workers (``BM25Index.load(client=...)``: a long-lived engine
per worker, a dask actor) and, for reference, on the same GPUs of this process (``devices=``).  One query CSR
of ``--batch-size`` Subject lines is made once; each row sends it ``--batches`` times, to every worker at once,
as the search does (the CSR serialized once for all), and waits for every reply:

- ``no-op``: each worker's actor (a stand-in engine) returns nothing: the round trip of a call that
  carries the query batch;
- ``reply``: it returns arrays of the engine's result shape, made once (doc int64 and score float32 of
  (queries, k), n int32): the round trip of a batch's results without the engine;
- ``engine``: ``BM25Index.topk_start`` of the Client index (the engines' calls and the caller's merge).

Each through the scheduler (a ``distributed.Actor`` of a client without ``direct_to_workers``, a wait a call)
and straight to the workers (``cutext.stages.runtime.compute.WorkerActors``, one wait for all).

Each with one batch in flight (send, wait, send...) and with two (the next batch sent before the last one's
replies are waited for, as ``search`` does).  Milliseconds a batch, medians of ``--repeats``.

    python benchmarks/micro/client_replies.py --gpus 4 [--index /tmp/cutext-search-gpus/index]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1]))

import bm25 as bench  # noqa: E402


class Replier:
    """A worker's stand-in engine: replies of a fixed shape, no GPU work."""

    def __init__(self, nq: int, k: int):
        self.out = (np.zeros((nq, k), np.int64), np.zeros((nq, k), np.float32), np.full(nq, k, np.int32))

    async def noop(self, Q):
        return None

    async def reply(self, Q):
        return self.out


def _per_batch(send, n_batches: int, in_flight: int, repeats: int) -> float:
    """Median ms a batch of ``n_batches`` sends, ``in_flight`` batches sent before the oldest is waited for;
    ``send()`` returns a function that waits for the batch."""
    def run():
        pending = []
        for _ in range(n_batches):
            pending.append(send())
            if len(pending) >= in_flight:
                pending.pop(0)()
        for w in pending:
            w()

    run()  # warm-up
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        run()
        out.append((time.perf_counter() - t) / n_batches * 1e3)
    return statistics.median(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", default="/tmp/cutext-search-gpus/index")
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=8192)
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--protocol", default="tcp", help="the cluster's comms: tcp (default) or ucx")
    ap.add_argument("--data", default=None, help="folder holding corpora/20news-bydate.tar.gz")
    args = ap.parse_args(argv)

    from distributed import Client

    from cutext.pipelines import local_gpu_cluster
    from cutext.stages.engines import bm25_index as bi
    from cutext.stages.runtime.compute import WorkerActors

    bench.log(f"{args.gpus} GPUs, {args.protocol}, {args.batch_size} queries a batch, k={args.k}")
    queries = bench.Corpus(bench.find_20news(args.data)).queries(args.batch_size)
    rows = []
    local = bi.BM25Index.load(args.index, backend="gpu", devices=list(range(args.gpus)) if args.gpus > 1 else None)
    Q = local.query_matrix(queries)
    reply_mb = args.batch_size * args.k * 12 / 1e6 + args.batch_size * 4 / 1e6
    send_local = partial(local.topk_start, Q, args.k, "gpu")
    for flight in (1, 2):
        rows.append((f"engine, {args.gpus} GPU(s) of this process", flight,
                     _per_batch(send_local, args.batches, flight, args.repeats)))
    del local, send_local  # the in-process shards freed before the workers take the GPUs
    cluster = local_gpu_cluster(args.gpus, CUDA_VISIBLE_DEVICES=list(range(args.gpus)), protocol=args.protocol)
    client = Client(cluster)
    try:
        workers = sorted(client.scheduler_info()["workers"])
        wa = WorkerActors(client, [client.submit(Replier, args.batch_size, args.k, actor=True, workers=[w])
                                   for w in workers], workers)
        Qs = bi._query_batch(Q)
        for name in ("noop", "reply"):
            def proxied(name=name):  # distributed.Actor: through the scheduler, a wait a call
                calls = [getattr(a, name)(Qs) for a in wa.actors]
                return lambda: [c.result() for c in calls]

            def direct(name=name):
                return wa.start(name, Qs)

            what = f"{name}, {len(workers)} workers" + (f" ({reply_mb:.2f} MB a reply)" if name == "reply" else "")
            for how, send in (("distributed.Actor, through the scheduler", proxied),
                              ("WorkerActors, straight to the workers", direct)):
                for flight in (1, 2):
                    rows.append((f"{what}: {how}", flight, _per_batch(send, args.batches, flight, args.repeats)))
        idx = bi.BM25Index.load(args.index, backend="gpu", client=client)
        direct = list(idx._engines.direct)
        for how, route in (("straight to the workers", direct), ("through the scheduler", [False] * len(direct))):
            idx._engines.direct = route
            for flight in (1, 2):
                rows.append((f"engine, Client of {len(workers)} workers, {how}", flight,
                             _per_batch(lambda: idx.topk_start(Q, args.k, "gpu"), args.batches, flight,
                                        args.repeats)))
    finally:
        client.close()
        cluster.close()
    print(f"\n{args.batch_size} queries a batch, k={args.k}, {args.batches} batches, medians of {args.repeats}, "
          f"{args.protocol}")
    print("| what | batches in flight | ms a batch | q/s |")
    print("| --- | --- | --- | --- |")
    for what, flight, ms in rows:
        print(f"| {what} | {flight} | {ms:.2f} | {args.batch_size / ms * 1e3:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
