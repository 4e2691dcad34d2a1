#!/usr/bin/env python
"""The first call in a new process: what a user waits for before cutext answers, with numba's cache cold and warm.

Every measurement is a fresh Python process (``python benchmarks/first_call.py --child ...``) that times

* ``import``: ``from cutext import pipelines`` (and the workload's own module);
* ``first``: the first call (it loads or compiles the numba kernels it uses, builds its tables, imports
  what it imports lazily);
* ``second``: the same call again in the same process (what every later call costs);

and counts the numba functions of cutext it compiled (cache misses) and loaded from the cache (hits).
``process`` is the child's wall time seen from here (interpreter start-up included).

Caches
------
cold
    ``NUMBA_CACHE_DIR`` set to a new empty folder: every kernel the workload uses is compiled (a first
    run on a machine, or the first after an upgrade or an edit of a kernel file).
warm
    A second process with the same folder: every kernel comes from the cache.

Workloads
---------
search
    ``BM25Index.load`` + one ``search`` of one query (first), one more query (second), on an index of the
    bundled CACM collection (3,204 abstracts) built once beforehand with the README's quick-start
    settings (k1=0.9, b=0.4, Lucene stopwords, Porter stemmer).
cluster
    ``pipelines.run("cluster", "data/cacm/cacm.json", threshold=0.3)`` on the CPU (first), and again
    into another folder (second).
ngram
    ``NGramModel.load`` of KenLM's test model (``arpa/kenlm/test.arpa`` of the shared data) + ``score``
    of one sentence (first), another sentence (second).  Skipped where the model is absent.
lda
    ``pipelines.run("lda", "bow/uci/docword.kos.txt.gz", K=--lda-k, iterations=--lda-iterations)`` on
    the CPU (first), and again (second).  Skipped where KOS is absent.

Every figure is the median of ``--repeats`` runs (each cold run with its own empty folder).  The table
goes to stdout; ``--json`` writes the environment and the rows to
``benchmarks/results/first_call-cpu-<date>.json`` (``--json PATH``: there).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import bm25 as bench  # noqa: E402  (the benchmarks' environment record)

ROOT = Path(__file__).resolve().parents[1]
T0 = time.monotonic()
WORKLOADS = ("search", "cluster", "ngram", "lda")


def log(msg):
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- the child process

def _numba_stats() -> tuple[int, int]:
    """(cache hits, cache misses) summed over the numba functions of cutext loaded in this process."""
    from numba.core.registry import CPUDispatcher

    hits = misses = 0
    for name, mod in list(sys.modules.items()):
        if name.startswith("cutext."):
            for d in vars(mod).values():
                if isinstance(d, CPUDispatcher) and d.__module__ == name:
                    hits += sum(d.stats.cache_hits.values())
                    misses += sum(d.stats.cache_misses.values())
    return hits, misses


def child(workload: str, args) -> dict:
    """Time import, first and second call of ``workload`` in this (fresh) process."""
    work = Path(args.workdir)
    t = time.perf_counter()
    from cutext import pipelines

    if workload == "ngram":
        from cutext.pipelines.ngram import NGramModel
    t_import = time.perf_counter() - t
    state = {}
    if workload == "search":
        def first():
            state["index"] = pipelines.BM25Index.load(work / "cacm-index", backend="cpu")
            state["index"].search({"q1": "parallel sorting algorithms"}, k=10)

        def second():
            state["index"].search({"q2": "hash table collision resolution"}, k=10)
    elif workload == "cluster":
        def first():
            out = Path(tempfile.mkdtemp(prefix="cluster-", dir=work)) / "out"
            pipelines.run("cluster", ROOT / "data" / "cacm" / "cacm.json", out=out, backend="cpu", threshold=0.3)

        second = first
    elif workload == "ngram":
        def first():
            state["lm"] = NGramModel.load(args.arpa, backend="cpu")
            state["lm"].score(["looking on a little more loin"])

        def second():
            state["lm"].score(["language modeling is fun ."])
    elif workload == "lda":
        def first():
            out = Path(tempfile.mkdtemp(prefix="lda-", dir=work)) / "out"
            pipelines.run("lda", args.kos, out=out, backend="cpu", K=args.lda_k, iterations=args.lda_iterations)

        second = first
    else:
        raise ValueError(f"unknown workload {workload!r}")
    t = time.perf_counter()
    first()
    t_first = time.perf_counter() - t
    hits, misses = _numba_stats()
    t = time.perf_counter()
    second()
    t_second = time.perf_counter() - t
    return {"import_s": t_import, "first_s": t_first, "second_s": t_second, "cache_hits": hits,
            "cache_misses": misses}


# ----------------------------------------------------------------------------- the parent

def run_child(workload: str, cache: Path, args) -> dict:
    from cutext.stages.runtime.progress import COMPILE_NOTICE

    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", workload, "--workdir", str(args.workdir),
           "--arpa", str(args.arpa), "--kos", str(args.kos), "--lda-k", str(args.lda_k),
           "--lda-iterations", str(args.lda_iterations)]
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout, check=False)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{workload}: child exited {p.returncode}:\n{p.stderr[-2000:]}")
    row = json.loads(p.stdout.strip().splitlines()[-1])
    row["process_s"] = wall
    row["notice"] = COMPILE_NOTICE in p.stderr
    return row


def build_index(work: Path):
    from cutext import pipelines

    pipelines.run("bm25", ROOT / "data" / "cacm" / "cacm.json", out=work / "cacm-index", backend="cpu", k1=0.9,
                  b=0.4, stopwords="lucene", stemmer="porter", progress=False)


KEYS = ("import_s", "first_s", "second_s", "process_s")


def summarize(runs: list[dict]) -> dict:
    row = {k: statistics.median(r[k] for r in runs) for k in KEYS}
    row["first_minus_second_s"] = statistics.median(r["first_s"] - r["second_s"] for r in runs)
    for k in ("cache_hits", "cache_misses"):
        row[k] = int(statistics.median(r[k] for r in runs))
    row["notice"] = sum(r["notice"] for r in runs)
    row["n"] = len(runs)
    row["runs"] = runs
    return row


def print_table(rows, env):
    print(f"\nfirst call in a new process, CPU backend, {env.get('cpu_count')} cores ({env.get('cpu_model', '?')}), "
          f"medians of n runs (seconds)")
    print(f"{'workload':<9} {'cache':<6} {'n':>2} {'import':>7} {'first':>7} {'second':>7} {'1st-2nd':>8} "
          f"{'process':>8} {'compiled':>9} {'loaded':>7} {'notice':>7}")
    for r in rows:
        if "skipped" in r:
            print(f"{r['workload']:<9} {'':<6} skipped: {r['skipped']}")
            continue
        print(f"{r['workload']:<9} {r['cache']:<6} {r['n']:>2} {r['import_s']:>7.2f} {r['first_s']:>7.2f} "
              f"{r['second_s']:>7.3f} {r['first_minus_second_s']:>8.2f} {r['process_s']:>8.2f} "
              f"{r['cache_misses']:>9} {r['cache_hits']:>7} {r['notice']:>4}/{r['n']}")
    print("compiled / loaded: numba functions of cutext compiled / loaded from the cache by the first call "
          "(callees compiled into a caller count too); notice: runs that printed the compile notice")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=None, help="shared data folder (default: $CUTEXT_DATA or ../shared/data)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma-separated (default {','.join(WORKLOADS)})")
    ap.add_argument("--repeats", type=int, default=3, help="cold + warm runs per workload; medians (default 3)")
    ap.add_argument("--lda-k", type=int, default=20, help="topics of the lda workload (default 20)")
    ap.add_argument("--lda-iterations", type=int, default=3, help="iterations of the lda workload (default 3)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds a child may run (default 600)")
    ap.add_argument("--workdir", default=None, help="folder for the index, outputs and caches (default: a temp folder)")
    ap.add_argument("--json", nargs="?", const="", default=None,
                    help="write the environment and rows as JSON "
                         "(no value: benchmarks/results/first_call-cpu-<date>.json)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--arpa", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--kos", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        print(json.dumps(child(args.child, args)))
        return 0

    from cutext.pipelines.datasets import default_data_dir

    data = Path(args.data) if args.data else default_data_dir()
    args.arpa = data / "arpa" / "kenlm" / "test.arpa" if data else None
    args.kos = data / "bow" / "uci" / "docword.kos.txt.gz" if data else None
    workloads = [w for w in args.workloads.split(",") if w]
    bad = [w for w in workloads if w not in WORKLOADS]
    if bad:
        ap.error(f"unknown workloads {bad}; choose from {WORKLOADS}")
    env = bench.environment(extra=("llvmlite",))
    log(json.dumps(env))
    own = args.workdir is None
    args.workdir = Path(args.workdir or tempfile.mkdtemp(prefix="cutext-first-call-"))
    args.workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        if "search" in workloads:
            log("building the CACM index (README quick-start settings)")
            build_index(args.workdir)
        runs = {(w, c): [] for w in workloads for c in ("cold", "warm")}
        skipped = {}
        for w, path in (("ngram", args.arpa), ("lda", args.kos)):
            if w in workloads and (path is None or not Path(path).exists()):
                skipped[w] = f"{path} not found"
        for rep in range(args.repeats):
            for w in workloads:
                if w in skipped:
                    continue
                cache = Path(tempfile.mkdtemp(prefix=f"numba-{w}-", dir=args.workdir))
                for c in ("cold", "warm"):
                    r = run_child(w, cache, args)
                    runs[(w, c)].append(r)
                    log(f"{w} {c} run {rep + 1}/{args.repeats}: import {r['import_s']:.2f} s, "
                        f"first {r['first_s']:.2f} s, second {r['second_s']:.3f} s, compiled {r['cache_misses']}, "
                        f"loaded {r['cache_hits']}")
                shutil.rmtree(cache, ignore_errors=True)
        for w in workloads:
            if w in skipped:
                rows.append({"workload": w, "skipped": skipped[w]})
                continue
            for c in ("cold", "warm"):
                rows.append({"workload": w, "cache": c, **summarize(runs[(w, c)])})
    finally:
        if own:
            shutil.rmtree(args.workdir, ignore_errors=True)
    print_table(rows, env)
    if args.json is not None:
        out = Path(args.json) if args.json else ROOT / "benchmarks" / "results" / \
            f"first_call-cpu-{time.strftime('%Y-%m-%d')}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"environment": env, "args": {k: str(v) for k, v in vars(args).items()},
                                   "rows": rows}, indent=2) + "\n")
        log(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
