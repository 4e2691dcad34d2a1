"""Where ``BM25Index.load`` of a segmented index spends its time, phase by phase.

Builds (once) 20 Newsgroups replicated to ``--gb`` GB with ``--backend``, then loads it ``--repeats`` times,
timing each phase by wrapping the functions the load calls: the checksums (``checksums.verify``), the
segment reads (``segments.read_segment``, summed over the reader's threads, so their sum may exceed the
wall time), the global statistics (``index_reader._global_terms``), the merge (``segments.merge_segments``,
GPU) or the one-pass placement (``bm25_weights._weighted_matrix``, CPU), the weights on the device
(``bm25_weights._segment_matrix``) and the rest.  Prints one table of medians.

    python benchmarks/micro/open_phases.py --backend gpu --gb 2
"""
from __future__ import annotations

import argparse
import collections
import functools
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

import bm25 as bench  # noqa: E402  (the corpus helpers of the bm25 benchmark)

_spent: dict = collections.defaultdict(float)
_lock = threading.Lock()


def _timed(mod, name: str, label: str) -> None:
    real = getattr(mod, name)

    @functools.wraps(real)
    def wrapper(*a, **k):
        t = time.perf_counter()
        try:
            return real(*a, **k)
        finally:
            with _lock:
                _spent[label] += time.perf_counter() - t

    setattr(mod, name, wrapper)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="gpu", choices=["cpu", "gpu"])
    ap.add_argument("--gb", type=float, default=2.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--data", default=None, help="folder holding corpora/20news-bydate.tar.gz")
    ap.add_argument("--workdir", default="/tmp/cutext-open")
    args = ap.parse_args(argv)

    from cutext import pipelines
    from cutext.stages.engines import bm25_index, bm25_weights, index_reader, segments
    from cutext.stages.runtime import checksums

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    src = bench.corpus_folder(args.data, work, args.gb)
    ix = work / f"index-{args.backend}"
    if not (ix / "index.json").is_file():
        t = time.perf_counter()
        pipelines.run("bm25", str(src), out=str(ix), backend=args.backend, format="lines", progress=False)
        print(f"built {ix} in {time.perf_counter() - t:.2f} s")
    _timed(checksums, "verify", "verify (checksums)")
    _timed(segments, "read_segment", "read_segment (summed over threads)")
    _timed(index_reader, "_global_terms", "global terms")
    _timed(index_reader.IndexReader, "open", "IndexReader.open (reads + terms)")
    _timed(segments, "merge_segments", "merge_segments")
    _timed(bm25_index, "_segment_matrix", "weights (_segment_matrix)")
    _timed(bm25_index, "_weighted_matrix", "place + weigh (_weighted_matrix)")
    del bm25_weights
    rows = collections.defaultdict(list)
    for _ in range(args.repeats + 1):
        _spent.clear()
        t = time.perf_counter()
        index = bm25_index.BM25Index.load(ix, backend=args.backend)
        if args.backend == "gpu":
            import cupy

            cupy.cuda.Device().synchronize()
        rows["load (wall)"].append(time.perf_counter() - t)
        for k, v in _spent.items():
            rows[k].append(v)
        del index
    print(f"{args.backend}, {args.gb} GB, medians of {args.repeats} loads after one warm-up")
    print("| phase | s |\n| --- | --- |")
    for k, v in rows.items():
        print(f"| {k} | {statistics.median(v[1:]):.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
