"""The bm25 CPU build on 1 and 2 workers against Anserini's IndexCollection on 1 and 2 threads, quiet and
beside other jobs, on the same machine in the same run.

20 Newsgroups (``corpora/20news-bydate.tar.gz`` of the data folder, 18,846 posts, 36.6 MB) as a folder of
``--files`` JSON Lines files of ``{"id", "contents"}`` (Anserini's ``JsonCollection``; cutext reads the same
files with ``text_column="contents"``, ``id_column="id"``).  Both analyse as Anserini's default
``DefaultEnglishAnalyzer`` (cutext ``analyzer="anserini"``: the same tokens; ``--analysis lucene-porter``: cutext's
tokenizer with Lucene's stop words and Porter, the analysis in spirit); neither stores the texts, positions or
document vectors.

* **cutext**: ``build_index(..., backend="cpu", n_workers=N)``, each run in a fresh interpreter that builds
  twice: ``build`` is the seconds of the second build (what a build costs a program that already runs),
  ``command`` the process's wall time less that second build (interpreter start, imports, the first build,
  which loads the compiled kernels from numba's cache, and the exit: a command that builds once).
* **Anserini**: ``java -cp FATJAR io.anserini.index.IndexCollection -collection JsonCollection -generator
  DefaultLuceneDocumentGenerator -input DIR -index IDX -threads N``; ``command`` is its wall time (JVM start
  included).

Every setting runs ``--repeats`` times, the settings and the conditions interleaved (a repeat runs each
setting once quiet, then once beside the busy processes) so that a change of the machine's load falls on all
of them; the table gives medians and the median 1-minute load average read before each run
(``/proc/loadavg``; the machine is shared).  "Beside other jobs": the script starts ``--busy`` processes that
spin on the CPU (``python -c "while True: pass"``) before each busy round and stops them after it.

    python benchmarks/cpu_build.py --jar /tmp/a61/anserini-1.7.1-fatjar.jar \\
        --json benchmarks/results/cpu_build-cpu-2core-<date>.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JAVA = "/usr/lib/jvm/temurin-25-jdk-amd64/bin/java"
# "anserini": Anserini's DefaultEnglishAnalyzer exactly (the same tokens as IndexCollection's);
# "lucene-porter": cutext's tokenizer with Lucene's stop words and PyStemmer's Porter (the analysis in spirit)
ANALYSES = {"anserini": {"analyzer": "anserini"}, "lucene-porter": {"stopwords": "lucene", "stemmer": "porter"}}

def child(src: str, out: str, n: int, scheduler: str, analysis: str) -> None:
    """One cutext run in a fresh interpreter (``--child``): the first build (the caller times the whole
    command), then a second one timed here; prints a JSON line."""
    t0 = time.perf_counter()
    from cutext.pipelines.bm25 import build_index

    kw = dict(backend="cpu", progress=False, text_column="contents", id_column="id", n_workers=n,
              scheduler=scheduler, **ANALYSES[analysis])
    t1 = time.perf_counter()
    build_index(src, out + "-a", **kw)
    t2 = time.perf_counter()
    second = build_index(src, out + "-b", **kw)
    t3 = time.perf_counter()
    print(json.dumps({"import": t1 - t0, "first": t2 - t1, "build": t3 - t2, "scheduler": second.scheduler,
                      "n_workers": second.n_workers, "n_docs": second.counts["n_docs"], "timings": second.timings}))


def corpus(work: Path, data: str | None, files: int) -> Path:
    """``work/20news-<files>/part-NN.jsonl`` (made once): the posts in the archive's order, cut into ``files``
    files of about equal counts."""
    d, done = work / f"20news-{files}", work / f"20news-{files}.done"
    if done.exists():
        return d
    from cutext.pipelines import datasets

    root = Path(data) if data else datasets.default_data_dir()
    df = datasets.load_20newsgroups(root / "corpora" / "20news-bydate.tar.gz")
    d.mkdir(parents=True, exist_ok=True)
    step = -(-len(df) // files)
    for k in range(files):
        with open(d / f"part-{k:02d}.jsonl", "w", encoding="utf-8") as fh:
            for i in range(k * step, min(len(df), (k + 1) * step)):
                fh.write(json.dumps({"id": df["source_id"].iat[i], "contents": df["text"].iat[i]}) + "\n")
    done.write_text("")
    return d


def load1() -> float:
    with open("/proc/loadavg") as fh:
        return float(fh.read().split()[0])


def run_cutext(src: Path, work: Path, n: int, analysis: str, scheduler: str = "auto",
               python: str | None = None) -> dict:
    out = work / f"cutext-{scheduler}-{n}{'-before' if python else ''}"
    for suffix in ("-a", "-b"):
        shutil.rmtree(f"{out}{suffix}", ignore_errors=True)
    t = time.perf_counter()
    res = subprocess.run([python or sys.executable, __file__, "--child", str(src), str(out), str(n), scheduler,
                          analysis], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"the cutext run failed ({res.returncode}): {res.stderr[-3000:]}")
    wall = time.perf_counter() - t
    got = json.loads(res.stdout.strip().splitlines()[-1])
    return {"process": wall, "command": wall - got["build"], **got}  # command: a process that builds once


def run_anserini(src: Path, work: Path, n: int, java: str, jar: str) -> dict:
    idx = work / f"anserini-{n}"
    shutil.rmtree(idx, ignore_errors=True)
    t = time.perf_counter()
    res = subprocess.run([java, "-cp", jar, "io.anserini.index.IndexCollection", "-collection", "JsonCollection",
                          "-generator", "DefaultLuceneDocumentGenerator", "-input", str(src), "-index", str(idx),
                          "-threads", str(n)], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if res.returncode != 0 or "documents indexed" not in res.stdout + res.stderr:
        raise RuntimeError(f"IndexCollection failed ({res.returncode}): {(res.stdout + res.stderr)[-2000:]}")
    return {"command": wall}


def busy(n: int) -> list:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def settings_of(workers: list, jar: str | None, cluster: bool, baseline: str | None = None) -> list:
    return [("cutext", n) for n in workers] + ([("cluster", n) for n in workers] if cluster else []) \
        + ([("before", n) for n in workers] if baseline else []) \
        + ([("anserini", n) for n in workers] if jar else [])


def measure_once(src: Path, work: Path, settings: list, java: str, jar: str | None, condition: str, r: int,
                 runs: dict, analysis: str, baseline: str | None = None) -> None:
    """Run each setting once, appending to ``runs[condition]["<tool> <n>"]`` a dict with ``command`` (and
    cutext's ``build``) seconds and ``load1``; ``cluster`` is cutext on a LocalCluster of worker processes
    (``scheduler="cluster"``), ``before`` cutext's ``n_workers=N`` run by the interpreter ``baseline`` (a
    checkout of the code before, in its own virtual environment)."""
    for tool, n in settings:
        before = load1()
        got = (run_anserini(src, work, n, java, jar) if tool == "anserini"
               else run_cutext(src, work, n, analysis, "cluster" if tool == "cluster" else "auto",
                               baseline if tool == "before" else None))
        got["load1"] = before
        runs[condition].setdefault(f"{tool} {n}", []).append(got)
        extra = f", build {got['build']:.2f} s ({got['scheduler']}, {got['n_workers']})" if "build" in got else ""
        print(f"{condition:>6} repeat {r + 1}: {tool} {n}: command {got['command']:.2f} s{extra}, "
              f"load {before:.2f}", flush=True)


def summary(runs: dict) -> dict:
    out = {}
    for name, rs in runs.items():
        row = {"command": statistics.median(x["command"] for x in rs),
               "load1": statistics.median(x["load1"] for x in rs), "runs": len(rs)}
        if "build" in rs[0]:
            row["build"] = statistics.median(x["build"] for x in rs)
        out[name] = row
    return out


def _cell(row: dict | None, key: str) -> str:
    return f"{row[key]:.2f}" if row and key in row else "-"


_TOOLS = (("cutext", "cutext"), ("before", "cutext before"), ("cluster", "cutext on a LocalCluster"),
          ("anserini", "Anserini"))


def table(results: dict, workers: list) -> str:
    """Markdown: a row a condition and worker count (build / command seconds of each tool that ran, the
    median load), then one of the ratios of the last count to the first."""
    tools = [(t, name) for t, name in _TOOLS if any(f"{t} {n}" in s for s in results.values() for n in workers)]
    head = " | ".join(f"{name} build / command (s)" if t != "anserini" else f"{name} command (s)"
                      for t, name in tools)
    lines = [f"| condition | workers | {head} | load 1 min |", "| --- " * (3 + len(tools)) + "|"]

    def cells(row, t):
        return _cell(row, "command") if t == "anserini" else f"{_cell(row, 'build')} / {_cell(row, 'command')}"

    for cond, s in results.items():
        for n in workers:
            rows = [s.get(f"{t} {n}") for t, _ in tools]
            loads = "/".join(f"{r['load1']:.1f}" for r in rows if r)
            lines.append(f"| {cond} | {n} | " + " | ".join(cells(r, t) for r, (t, _) in zip(rows, tools))
                         + f" | {loads} |")
        if len(workers) > 1:
            lo, hi = workers[0], workers[-1]

            def ratio(t, key):
                a, b = s.get(f"{t} {lo}"), s.get(f"{t} {hi}")
                return f"{b[key] / a[key]:.2f}x" if a and b and key in a else "-"

            lines.append(f"| {cond} | {hi} / {lo} | " + " | ".join(
                ratio(t, "command") if t == "anserini" else f"{ratio(t, 'build')} / {ratio(t, 'command')}"
                for t, _ in tools) + " | |")
    return "\n".join(lines)


def environment() -> dict:
    import cutext.kernels._version as v

    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                 platform.processor())
    return {"cpu": model, "cpu_count": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)),
            "python": platform.python_version(), "cutext": v.__version__, "platform": platform.platform()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.environ.get("CUTEXT_SHARED_DATA"), help="data folder (corpora/...)")
    ap.add_argument("--work", default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--files", type=int, default=8, help="JSON Lines files the corpus is cut into")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--busy", type=int, default=2, help="spinning processes beside the 'busy' runs")
    ap.add_argument("--conditions", nargs="+", default=["quiet", "busy"], choices=["quiet", "busy"])
    ap.add_argument("--jar", default=None, help="anserini-1.7.1-fatjar.jar (no Anserini rows without it)")
    ap.add_argument("--java", default=JAVA)
    ap.add_argument("--baseline", default=None, metavar="PYTHON",
                    help="also cutext's n_workers=N under this interpreter (a checkout of the code before)")
    ap.add_argument("--cluster", action="store_true",
                    help="also cutext on a LocalCluster of n worker processes (scheduler='cluster')")
    ap.add_argument("--json", default=None, help="write the runs and medians here")
    ap.add_argument("--table", default=None, metavar="JSON",
                    help="print the table of a JSON this script wrote (command: process less build), run nothing")
    ap.add_argument("--analysis", default="anserini", choices=sorted(ANALYSES),
                    help="cutext's analysis: Anserini's exactly (default) or its tokenizer with Lucene's stop words")
    ap.add_argument("--child", nargs=5, metavar=("SRC", "OUT", "N", "SCHEDULER", "ANALYSIS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        src, out, n, scheduler, analysis = args.child
        child(src, out, int(n), scheduler, analysis)
        return 0
    if args.table:
        doc = json.loads(Path(args.table).read_text())
        for cond in doc["runs"].values():
            for rs in cond.values():
                for x in rs:
                    if "build" in x and "process" not in x:  # written before "process" was kept apart
                        x["process"], x["command"] = x["command"], x["command"] - x["build"]
        print(table({c: summary(r) for c, r in doc["runs"].items()}, doc.get("workers", args.workers)))
        return 0
    env = environment()
    print(json.dumps(env), flush=True)
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        work = Path(tmp)
        src = corpus(work, args.data, args.files)
        runs = {cond: {} for cond in args.conditions}
        settings = settings_of(args.workers, args.jar, args.cluster, args.baseline)
        for r in range(args.repeats):  # the conditions alternate too: a change of the others' load falls on both
            for cond in args.conditions:
                procs = busy(args.busy) if cond == "busy" else []
                try:
                    time.sleep(1.0 if procs else 0.0)
                    measure_once(src, work, settings, args.java, args.jar, cond, r, runs, args.analysis, args.baseline)
                finally:
                    for p in procs:
                        p.kill()
                        p.wait()
        results = {cond: summary(runs[cond]) for cond in args.conditions}
    print(table(results, args.workers))
    if args.json:
        doc = {"environment": env, "corpus": "20news-bydate", "files": args.files, "analysis": ANALYSES[args.analysis],
               "busy_processes": args.busy, "repeats": args.repeats,
               "workers": args.workers, "medians": results, "runs": runs}
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
