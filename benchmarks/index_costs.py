"""What the segmented index's operations cost as the index grows: open, refresh, delete, append (CPU).

20 Newsgroups (``corpora/20news-bydate.tar.gz`` of the data folder) as JSON Lines, replicated x1 / x4 / x16
(each replica in its own shuffled order, ids ``"<replica>:<post>"``), built once a size with the CPU backend
(one segment a replica), then timed, medians of ``--repeats`` runs:

* **open**: ``BM25Index.load(index, backend="cpu")`` with verification (every file's CRC32);
* **refresh**: a loaded x16 index after another 1x of posts appended: ``BM25Index.refresh()``;
* **delete 100**: ``delete_documents`` of 100 random live documents (a new commit), and ``BM25Index.delete``
  of 100 more through a loaded index (the commit, then the object refreshed);
* **append 1x**: ``append_index`` of 1x more to the x16 index (with the merges its commit makes; and, where
  the code has a merge policy, with ``merge_policy="none"`` on a copy), beside the build of that 1x alone.

``--baseline PYTHON`` runs the same measurements with another interpreter (a checkout of the code before,
installed in its own virtual environment) in a subprocess, so that both rows come from one run on one
machine.  Prints a table; ``--json`` writes the rows.

    python benchmarks/index_costs.py --work /tmp/index-costs --baseline /path/to/old/.venv/bin/python \\
        --json benchmarks/results/index_costs-cpu-2core-<date>.json
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

SIZES = (1, 4, 16)


def _corpus(work: Path, data: str | None) -> None:
    """``work/x<n>/part-<r>.jsonl`` and ``work/more/part-more.jsonl`` (made once)."""
    import numpy as np

    from cutext.pipelines import datasets

    if (work / "more" / "part-more.jsonl").exists():
        return
    root = Path(data) if data else datasets.default_data_dir()
    texts = list(datasets.load_20newsgroups(root / "corpora" / "20news-bydate.tar.gz")["text"])
    for n in SIZES:
        d = work / f"x{n}"
        d.mkdir(parents=True, exist_ok=True)
        for r in range(n):
            order = np.random.default_rng(r).permutation(len(texts))
            with open(d / f"part-{r:03d}.jsonl", "w", encoding="utf-8") as fh:
                fh.writelines(json.dumps({"id": f"{r}:{i}", "text": texts[i]}) + "\n" for i in order)
    d = work / "more"
    d.mkdir(exist_ok=True)
    order = np.random.default_rng(99).permutation(len(texts))
    with open(d / "part-more.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps({"id": f"more:{i}", "text": texts[i]}) + "\n" for i in order)


def _timed(fn, repeats: int) -> tuple[float, list]:
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs), [round(x, 4) for x in runs]


def measure(work: Path, repeats: int, backend: str = "cpu") -> list:
    """The rows of this interpreter's cutext: one dict a measurement."""
    import numpy as np

    from cutext import pipelines
    from cutext.pipelines.bm25 import append_index
    from cutext.pipelines.bm25_index_ops import delete_documents
    from cutext.stages.engines.bm25_index import BM25Index

    kw = dict(backend=backend, progress=False)
    out = work / f"indexes-{os.getpid()}"
    rows = []
    for n in SIZES:
        ix = out / f"x{n}"
        t = time.perf_counter()
        pipelines.run("bm25", str(work / f"x{n}"), out=str(ix), **kw)
        rows.append({"what": "build", "size": f"x{n}", "s": round(time.perf_counter() - t, 3)})
        BM25Index.load(ix, backend=backend)  # warm: numba's cache, the page cache
        s, runs = _timed(lambda: BM25Index.load(ix, backend=backend), repeats)
        rows.append({"what": "open", "size": f"x{n}", "s": round(s, 4), "runs_s": runs})
        ids = list(BM25Index.load(ix, backend=backend).source_ids)
        rng = np.random.default_rng(n)
        picks = iter(rng.permutation(len(ids)))
        s, runs = _timed(lambda: delete_documents(ix, [ids[next(picks)] for _ in range(100)]), repeats)
        rows.append({"what": "delete 100", "size": f"x{n}", "s": round(s, 4), "runs_s": runs})
        index = BM25Index.load(ix, backend=backend)
        s, runs = _timed(lambda: index.delete([ids[next(picks)] for _ in range(100)]), repeats)
        rows.append({"what": "delete 100 via a loaded index", "size": f"x{n}", "s": round(s, 4), "runs_s": runs})
    ix = out / "x16"
    if "merge_policy" in inspect.signature(append_index).parameters:  # the code has a merge policy
        plain = out / "x16-plain"
        shutil.copytree(ix, plain)
        t = time.perf_counter()
        pipelines.run("bm25", str(work / "more"), out=str(plain), append=True, merge_policy="none", **kw)
        rows.append({"what": "append 1x, no merge", "size": "x16", "s": round(time.perf_counter() - t, 3)})
        shutil.rmtree(plain)
    loaded = BM25Index.load(ix, backend=backend)
    t = time.perf_counter()
    r = pipelines.run("bm25", str(work / "more"), out=str(ix), append=True, **kw)
    rows.append({"what": "append 1x", "size": "x16", "s": round(time.perf_counter() - t, 3),
                 "n_docs": r.counts["n_docs"], "merged_segments": r.counts.get("merged_segments", 0)})
    alone = out / "alone"
    t = time.perf_counter()
    pipelines.run("bm25", str(work / "more"), out=str(alone), **kw)
    rows.append({"what": "build 1x alone", "size": "x1", "s": round(time.perf_counter() - t, 3)})
    if hasattr(loaded, "refresh"):
        t = time.perf_counter()
        fresh = loaded.refresh()
        rows.append({"what": "refresh after append 1x", "size": "x16", "s": round(time.perf_counter() - t, 4),
                     "n_docs": fresh.n_docs})
    else:
        t = time.perf_counter()
        fresh = BM25Index.load(ix, backend=backend)
        rows.append({"what": "refresh after append 1x (a full load)", "size": "x16",
                     "s": round(time.perf_counter() - t, 4), "n_docs": fresh.n_docs})
    shutil.rmtree(out, ignore_errors=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", default="/tmp/cutext-index-costs", help="folder for the corpus and the indexes")
    ap.add_argument("--data", default=None, help="the data folder (holding corpora/20news-bydate.tar.gz)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backend", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--baseline", default=None, help="a Python interpreter with the code before installed")
    ap.add_argument("--json", default=None, help="write the rows here")
    ap.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # the subprocess's part
    args = ap.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.measure:
        print(json.dumps(measure(work, args.repeats, args.backend)))
        return 0
    _corpus(work, args.data)
    runs = {}
    for label, python in (("before", args.baseline), ("now", sys.executable)):
        if python is None:
            continue
        res = subprocess.run([python, __file__, "--measure", "--work", str(work), "--repeats", str(args.repeats),
                              "--backend", args.backend],
                             check=True, capture_output=True, text=True)
        runs[label] = json.loads(res.stdout.strip().splitlines()[-1])
    keys = [(r["what"], r["size"]) for r in runs["now"]]
    print(f"{'what':<40} {'size':<5} " + " ".join(f"{k:>10}" for k in runs))
    for what, size in keys:
        cells = []
        for label in runs:
            hit = [r for r in runs[label] if r["size"] == size and r["what"].split(" (")[0] == what.split(" (")[0]]
            cells.append(f"{hit[0]['s']:>10.3f}" if hit else f"{'-':>10}")
        print(f"{what:<40} {size:<5} " + " ".join(cells))
    if args.json:
        Path(args.json).write_text(json.dumps({"cpus": os.cpu_count(), "runs": runs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
