"""What the segmented index's operations cost as the index grows: open, refresh, delete, append (CPU).

20 Newsgroups (``corpora/20news-bydate.tar.gz`` of the data folder) as JSON Lines, replicated x1 / x4 / x16
(each replica in its own shuffled order, ids ``"<replica>:<post>"``), built once a size with the CPU backend
(one segment a replica), then timed, medians of ``--repeats`` runs:

* **open**: ``BM25Index.load(index, backend="cpu")`` with verification (every file's CRC32);
* **refresh**: a loaded x1 / x4 / x16 index after another 1x of posts appended without merges
  (``merge_policy="none"``): ``BM25Index.refresh()``; and the x16 index after an append whose commit merges;
* **search**: the posts' Subject lines, top 10, on the refreshed index: 50 queries in batches of 10 (as between
  near-real-time refreshes), then 4,000 in one batch twice (queries a second in the table);
* **delete 100**: ``delete_documents`` of 100 random live documents (a new commit), and ``BM25Index.delete``
  of 100 more through a loaded index (the commit, then the object refreshed);
* **append 1x**: ``append_index`` of 1x more to the x16 index (with the merges its commit makes; and, where
  the code has a merge policy, with ``merge_policy="none"`` on a copy), beside the build of that 1x alone.

``--only delete,append`` limits the run to those rows (of ``open``, ``delete``, ``refresh`` -- with its
searches --, ``append``) and ``--sizes 16`` to those sizes (the append rows need x16).  Each append row also
has the build's step timings, and ``append 1x, no merge, a fresh process`` / ``build 1x alone, a fresh
process`` time the call alone (after ``import cutext``) in a new interpreter: a user's first append; these
rows also give the user and system CPU seconds (huge-page compaction by the kernel shows as system time).

``--baseline PYTHON`` runs the same measurements with another interpreter (a checkout of the code before,
installed in its own virtual environment) in a subprocess, so that both rows come from one run on one
machine.  Prints a table; ``--json`` writes the rows.

    python benchmarks/index_costs.py --work /tmp/index-costs --baseline /path/to/old/.venv/bin/python \\
        --json benchmarks/results/index_costs-cpu-2core-<date>.json
"""
from __future__ import annotations

import argparse
import gc
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
ROWS = ("open", "delete", "refresh", "append")
_FRESH = """import json, os, sys, time
from cutext import pipelines
src, kw = json.loads(sys.argv[1])
c, t = os.times(), time.perf_counter()
r = pipelines.run("bm25", src, **kw)
s, c1 = time.perf_counter() - t, os.times()
print(json.dumps({"s": s, "user_s": c1.user - c.user, "sys_s": c1.system - c.system, "timings": r.timings}))
"""


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


def _queries(work: Path, n: int = 4000) -> list:
    """``n`` Subject lines of the posts ("Re:" prefixes removed), in a fixed shuffled order."""
    import re

    import numpy as np

    subjects = []
    with open(work / "x1" / "part-000.jsonl", encoding="utf-8") as fh:
        for line in fh:
            m = re.search(r"^Subject:(.*)$", json.loads(line)["text"], re.M)
            q = re.sub(r"^(\s*(re|fwd?):\s*)+", "", m.group(1), flags=re.I).strip() if m else ""
            if q:
                subjects.append(q)
    order = np.random.default_rng(0).permutation(len(subjects))
    return [subjects[order[i % len(order)]] for i in range(n)]


def _refresh_rows(work: Path, ix: Path, n: int, backend: str, merges: bool, repeats: int = 1) -> list:
    """A loaded index, 1x appended (without merges where the code merges), refreshed; without merges the
    refreshed index then searched twice.  ``repeats`` times (one more 1x each time), medians."""
    from cutext import pipelines
    from cutext.pipelines.bm25 import append_index
    from cutext.stages.engines.bm25_index import BM25Index

    kw = dict(backend=backend, progress=False, append=True)
    if "merge_policy" in inspect.signature(append_index).parameters and not merges:
        kw["merge_policy"] = "none"
    if repeats > 1:  # the same posts appended again: kept as further copies
        kw["on_duplicate"] = "keep"
    qs = _queries(work)
    runs: dict = {}
    for _ in range(repeats):
        fresh = loaded = None  # the last run's indexes freed before, not inside, the timed calls
        gc.collect()
        loaded = BM25Index.load(ix, backend=backend)
        pipelines.run("bm25", str(work / "more"), out=str(ix), **kw)
        gc.collect()  # the append's garbage collected before, not inside, the timed call
        t = time.perf_counter()
        fresh = loaded.refresh() if hasattr(loaded, "refresh") else BM25Index.load(ix, backend=backend)
        runs.setdefault("refresh", []).append(time.perf_counter() - t)
        if not merges:  # a few queries, as between near-real-time refreshes, then the whole set twice
            t = time.perf_counter()
            for i in range(0, 50, 10):
                fresh.search(qs[i:i + 10], k=10)
            runs.setdefault("50 queries in 5 batches", []).append(time.perf_counter() - t)
        for label in ([] if merges else ["1st pass", "2nd pass"]):
            t = time.perf_counter()
            fresh.search(qs, k=10)
            runs.setdefault(label, []).append(time.perf_counter() - t)
    what = "refresh after append 1x" + (", with its merges" if merges else ", no merge")
    rows = [{"what": what, "size": f"x{n}", "s": round(statistics.median(runs["refresh"]), 4),
             "runs_s": [round(x, 4) for x in runs["refresh"]]}]
    for label in ([] if merges else ["50 queries in 5 batches", "1st pass", "2nd pass"]):
        s = statistics.median(runs[label])
        nq = 50 if label.startswith("50") else len(qs)
        rows.append({"what": f"search after refresh, {label}", "size": f"x{n}", "s": round(s, 4),
                     "q_s": round(nq / s), "runs_s": [round(x, 4) for x in runs[label]]})
    return rows


def _timed(fn, repeats: int) -> tuple[float, list]:
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs), [round(x, 4) for x in runs]


def _fresh(src: Path, **kw) -> dict:
    """``pipelines.run("bm25", src, **kw)`` timed in a new interpreter (after its imports): a row's fields."""
    res = subprocess.run([sys.executable, "-c", _FRESH, json.dumps([str(src), kw])], capture_output=True, text=True)
    if res.returncode:
        sys.exit(f"a fresh process's run failed:\n{res.stderr[-3000:]}")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    return {"s": round(out["s"], 3), "user_s": round(out["user_s"], 2), "sys_s": round(out["sys_s"], 2),
            "timings": {k: round(v, 3) for k, v in out["timings"].items()}}


def _steps(r) -> dict:
    return {k: round(v, 3) for k, v in getattr(r, "timings", {}).items()}


def measure(work: Path, repeats: int, backend: str = "cpu", only=ROWS, sizes=SIZES) -> list:
    """The rows of this interpreter's cutext: one dict a measurement (``only`` those kinds of rows, at
    ``sizes``)."""
    import numpy as np

    from cutext import pipelines
    from cutext.pipelines.bm25 import append_index
    from cutext.pipelines.bm25_index_ops import delete_documents
    from cutext.stages.engines.bm25_index import BM25Index

    kw = dict(backend=backend, progress=False)
    out = work / f"indexes-{os.getpid()}"
    rows = []
    for n in sizes:
        ix = out / f"x{n}"
        t = time.perf_counter()
        pipelines.run("bm25", str(work / f"x{n}"), out=str(ix), **kw)
        rows.append({"what": "build", "size": f"x{n}", "s": round(time.perf_counter() - t, 3)})
        warm = BM25Index.load(ix, backend=backend)  # warm: numba's cache, the page cache
        if n == sizes[0] and "refresh" in only:
            warm.search(_queries(work, 100))  # the search kernels compiled before the first timed search
        if "open" in only:
            s, runs = _timed(lambda: BM25Index.load(ix, backend=backend), repeats)
            rows.append({"what": "open", "size": f"x{n}", "s": round(s, 4), "runs_s": runs})
        if "delete" in only:
            ids = list(BM25Index.load(ix, backend=backend).source_ids)
            rng = np.random.default_rng(n)
            picks = iter(rng.permutation(len(ids)))
            s, runs = _timed(lambda: delete_documents(ix, [ids[next(picks)] for _ in range(100)]), repeats)
            rows.append({"what": "delete 100", "size": f"x{n}", "s": round(s, 4), "runs_s": runs})
            index = BM25Index.load(ix, backend=backend)
            s, runs = _timed(lambda: index.delete([ids[next(picks)] for _ in range(100)]), repeats)
            rows.append({"what": "delete 100 via a loaded index", "size": f"x{n}", "s": round(s, 4),
                         "runs_s": runs})
        if n != 16 and "refresh" in only:  # x16 is appended to below, with and without merges
            rows += _refresh_rows(work, ix, n, backend, False, repeats)
    if 16 not in sizes or not {"append", "refresh"} & set(only):
        shutil.rmtree(out, ignore_errors=True)
        return rows
    ix = out / "x16"
    if "merge_policy" in inspect.signature(append_index).parameters:  # the code has a merge policy
        plain = out / "x16-plain"
        if "append" in only:
            for fresh in (False, True):  # in this process, then a user's first append (a new interpreter)
                shutil.copytree(ix, plain)
                if fresh:
                    row = _fresh(work / "more", out=str(plain), append=True, merge_policy="none", **kw)
                else:  # user and system CPU: the kernel's huge-page compaction shows as system time
                    c, t = os.times(), time.perf_counter()
                    r = pipelines.run("bm25", str(work / "more"), out=str(plain), append=True, merge_policy="none",
                                      **kw)
                    row = {"s": round(time.perf_counter() - t, 3), "user_s": round(os.times().user - c.user, 2),
                           "sys_s": round(os.times().system - c.system, 2), "timings": _steps(r)}
                rows.append({"what": "append 1x, no merge" + (", a fresh process" if fresh else ""), "size": "x16",
                             **row})
                shutil.rmtree(plain)
        if "refresh" in only:
            shutil.copytree(ix, plain)
            rows += _refresh_rows(work, plain, 16, backend, False, repeats)
            shutil.rmtree(plain)
    loaded = BM25Index.load(ix, backend=backend)
    t = time.perf_counter()
    r = pipelines.run("bm25", str(work / "more"), out=str(ix), append=True, **kw)
    rows.append({"what": "append 1x", "size": "x16", "s": round(time.perf_counter() - t, 3),
                 "n_docs": r.counts["n_docs"], "merged_segments": r.counts.get("merged_segments", 0),
                 "timings": _steps(r)})
    alone = out / "alone"
    c, t = os.times(), time.perf_counter()
    r = pipelines.run("bm25", str(work / "more"), out=str(alone), **kw)
    rows.append({"what": "build 1x alone", "size": "x1", "s": round(time.perf_counter() - t, 3),
                 "user_s": round(os.times().user - c.user, 2), "sys_s": round(os.times().system - c.system, 2),
                 "timings": _steps(r)})
    if "append" in only:
        shutil.rmtree(alone)
        rows.append({"what": "build 1x alone, a fresh process", "size": "x1", **_fresh(work / "more", out=str(alone),
                                                                                        **kw)})
    if "refresh" not in only:
        pass
    elif hasattr(loaded, "refresh"):
        t = time.perf_counter()
        fresh = loaded.refresh()
        rows.append({"what": "refresh after append 1x, with its merges", "size": "x16",
                     "s": round(time.perf_counter() - t, 4), "n_docs": fresh.n_docs})
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
    ap.add_argument("--only", default=",".join(ROWS), help=f"the rows to measure, of {','.join(ROWS)} (comma list)")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="the sizes, of 1,4,16 (comma list)")
    ap.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # the subprocess's part
    args = ap.parse_args(argv)
    only = [x for x in args.only.split(",") if x]
    sizes = [int(x) for x in args.sizes.split(",") if x]
    if not set(only) <= set(ROWS) or not only:
        ap.error(f"--only {args.only!r}: name some of {','.join(ROWS)}")
    if not set(sizes) <= set(SIZES) or not sizes:
        ap.error(f"--sizes {args.sizes!r}: name some of 1,4,16")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.measure:
        print(json.dumps(measure(work, args.repeats, args.backend, only, sorted(sizes))))
        return 0
    _corpus(work, args.data)
    runs = {}
    for label, python in (("before", args.baseline), ("now", sys.executable)):
        if python is None:
            continue
        res = subprocess.run([python, __file__, "--measure", "--work", str(work), "--repeats", str(args.repeats),
                              "--backend", args.backend, "--only", args.only, "--sizes", args.sizes],
                             capture_output=True, text=True)
        if res.returncode:
            sys.exit(f"the {label} run failed:\n{res.stderr[-3000:]}")
        runs[label] = json.loads(res.stdout.strip().splitlines()[-1])
    keys = [(r["what"], r["size"]) for r in runs["now"]]
    print(f"{'what':<44} {'size':<5} " + " ".join(f"{k:>10}" for k in runs))
    for what, size in keys:
        cells = []
        for label in runs:
            hit = [r for r in runs[label] if r["size"] == size and r["what"].split(" (")[0] == what.split(" (")[0]]
            v = hit[0].get("q_s", hit[0]["s"]) if hit else None  # search rows: queries a second
            cells.append(f"{'-':>10}" if v is None else f"{v:>10.0f}" if "q_s" in hit[0] else f"{v:>10.3f}")
        print(f"{what:<44} {size:<5} " + " ".join(cells))
    if args.json:
        Path(args.json).write_text(json.dumps({"cpus": os.cpu_count(), "runs": runs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
