"""The first GPU build of a process: where its seconds go when CuPy has no compiled kernel yet.

Builds the corpus of ``search_gpus.py`` (20 Newsgroups replicated to ``--gb`` GB, lines files) with
``pipelines.run("bm25", backend="gpu", scheduler="sync", index_format=2)`` in this process, prints the
stages' seconds and the threads' stacks, sampled every ``--interval`` s (a stack's seconds are summed over the
threads that were in it, so 16 threads in one call for 5 s show 80 s; idle pool threads show as
``thread.py:_worker``).  Point ``CUPY_CACHE_DIR`` at an empty folder for a first build on a new machine, and run
again with the same folder for a new process that finds the kernels on disk.

``--all-at-once``: every segment's writer at once from the start (the behaviour before
:func:`cutext.stages.runtime.compute.compute_fanned_out`, which writes the first segment alone the first time);
``--twice``: a second build in the same process.

    source benchmarks/gpu_env.sh
    CUPY_CACHE_DIR=$(mktemp -d) python benchmarks/micro/first_build.py --all-at-once
    CUPY_CACHE_DIR=/tmp/cache python benchmarks/micro/first_build.py --twice    # a new, empty /tmp/cache
    CUPY_CACHE_DIR=/tmp/cache python benchmarks/micro/first_build.py            # the kernels on disk
"""
from __future__ import annotations

import argparse
import collections
import sys
import threading
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from cutext import pipelines  # noqa: E402
from cutext.stages.runtime import compute  # noqa: E402

import bm25 as bench  # noqa: E402


def _stack_sampler(interval: float):
    """Start a thread that counts the other threads' stacks (innermost 14 frames) every ``interval`` s;
    returns ``(counts, stop)``."""
    stacks: collections.Counter = collections.Counter()
    stop = threading.Event()

    def sample():
        me = threading.get_ident()
        while not stop.wait(interval):
            for tid, frame in sys._current_frames().items():
                if tid == me:
                    continue
                frames = traceback.extract_stack(frame)[-14:]
                stacks[" <- ".join(f"{Path(f.filename).name}:{f.lineno}:{f.name}" for f in reversed(frames))] += 1

    threading.Thread(target=sample, daemon=True).start()
    return stacks, stop


def build(src: Path, out: Path, tag: str, interval: float, top: int) -> None:
    tok_c, _ = bench.tokenizer_kwargs("plain")
    stacks, stop = _stack_sampler(interval)
    t = time.perf_counter()
    r = pipelines.run("bm25", str(src), out=str(out), backend="gpu", scheduler="sync", format="lines",
                      progress=False, index_format=2, variant="lucene", k1=1.2, b=0.75, **tok_c)
    s = time.perf_counter() - t
    stop.set()
    bench.log(f"{tag}: build {s:.2f} s; " + ", ".join(f"{k} {v:.2f}" for k, v in r.timings.items()))
    for st, n in stacks.most_common(top):
        print(f"  {n * interval:7.1f} s  {st[:400]}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gb", type=float, default=2.0)
    ap.add_argument("--data", default=None, help="folder of the shared data (default: $CUTEXT_DATA)")
    ap.add_argument("--workdir", default="/tmp/cutext-search-gpus", help="the corpus is kept (and reused) here")
    ap.add_argument("--all-at-once", action="store_true", help="every segment's writer at once from the start")
    ap.add_argument("--twice", action="store_true", help="a second build in the same process")
    ap.add_argument("--interval", type=float, default=0.2)
    ap.add_argument("--top", type=int, default=8, help="stacks printed a build")
    args = ap.parse_args(argv)
    bench.print_environment(bench.environment())
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    src = bench.corpus_folder(args.data, work, args.gb)
    if args.all_at_once:
        compute._FANNED_OUT.add("bm25 segments")  # as if it had run: no first segment alone
    label = "every writer at once" if args.all_at_once else "the first segment alone"
    build(src, work / "first-build-index", f"first build ({label})", args.interval, args.top)
    if args.twice:
        build(src, work / "first-build-index-2", "second build", args.interval, args.top)


if __name__ == "__main__":
    main()
