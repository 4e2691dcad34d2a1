"""The bm25 index build of this tree against another checkout, alternated on one machine.

Each round runs one process per tree (the other tree imported as ``cutext`` through a folder of links), each
process building the same corpus ``--builds`` times (the first a cold start, not counted); rounds alternate
old, new, old, new.  The corpus is 20 Newsgroups, once (``--gb 0``, the CPU comparison) or replicated to
``--gb`` GB (the GPU one).  Prints each process's builds, the median of its warm builds and its stages.
Each tree builds its default index format unless ``--index-format`` names one for both (a tree from before
the segmented default builds format 1, this tree format 2).

    git worktree add /tmp/old 27bb999
    python benchmarks/ab_build.py --old /tmp/old --backend cpu --scheduler threads
    python benchmarks/ab_build.py --old /tmp/old --backend gpu --gb 2 --scheduler sync
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

_CHILD = """
import json, shutil, statistics, sys, time
from cutext import pipelines
src, out, backend, scheduler, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
fmt = {"index_format": int(sys.argv[6])} if sys.argv[6] else {}
ts = []
for i in range(n):
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    r = pipelines.run("bm25", src, out=out, backend=backend, format="lines", scheduler=scheduler, progress=False, **fmt)
    ts.append(time.perf_counter() - t)
print(json.dumps({"cutext": pipelines.__file__, "builds_s": [round(x, 3) for x in ts],
                  "median_warm_s": round(statistics.median(ts[1:]), 3), "n_postings": r.counts["n_postings"],
                  "stages_s": {k: round(v, 3) for k, v in r.timings.items()}}))
"""


def _linked(tree: Path, dest: Path) -> Path:
    """A folder in which ``cutext`` is ``tree``'s pipelines / stages / kernels (the package mapping)."""
    pkg = dest / "cutext"
    pkg.mkdir(parents=True, exist_ok=True)
    for d in ("pipelines", "stages", "kernels"):
        link = pkg / d
        if not link.exists():
            link.symlink_to(tree / d)
    return dest


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", required=True, help="the other checkout (a worktree of an earlier commit)")
    ap.add_argument("--backend", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--gb", type=float, default=0.0, help="replicate 20 Newsgroups to this many GB (0: once)")
    ap.add_argument("--scheduler", default="auto")
    ap.add_argument("--builds", type=int, default=4, help="builds a process (the first is not counted)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--index-format", type=int, default=None, choices=[1, 2],
                    help="the index format both trees build (default: each tree's own default)")
    ap.add_argument("--data", default=None, help="folder holding corpora/20news-bydate.tar.gz")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args(argv)

    import bm25 as bench  # the corpus helpers of the bm25 benchmark

    work = Path(args.workdir or tempfile.mkdtemp(prefix="cutext-ab-"))
    src = bench.corpus_folder(args.data, work, args.gb)
    trees = {"old": _linked(Path(args.old).resolve(), work / "old"),
             "new": _linked(Path(__file__).resolve().parent.parent, work / "new")}
    for _ in range(args.rounds):
        for name, path in trees.items():
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(path), os.environ.get("PYTHONPATH", "")]))
            out = subprocess.run([sys.executable, "-c", _CHILD, str(src), str(work / "index"), args.backend,
                                  args.scheduler, str(args.builds), str(args.index_format or "")], env=env,
                                 cwd=work, capture_output=True, text=True, check=True)
            print(name, out.stdout.strip().splitlines()[-1], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
