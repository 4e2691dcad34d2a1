#!/usr/bin/env python
"""BM25 indexing and query throughput: cutext (CPU and GPU backends) against bm25s.

Sections
--------
cpu (default, or ``--cpu``)
    20 Newsgroups (all 18,846 posts), written once to a temporary folder as "lines" files.
    Indexing: cutext CPU end to end (lines files -> index directory on disk; schedulers "sync" and
    "threads") and bm25s (``bm25s.tokenize`` + ``BM25().index`` from texts already in memory: its
    time excludes reading files and writing an index).  Two tokenizer settings, the same on both
    sides.  Queries: 10,000 real queries (the posts' Subject lines, cycled), top-10: cutext's CPU engine
    (1 thread and all threads) and sparse path against bm25s retrieve (numpy backend = bm25s's default,
    1 thread; numba backend, 1 thread and all threads), with postings scanned per second.
gpu (``--gpu``)
    ``--gpu-gb`` GB of replicated real documents (20 Newsgroups posts, each replica in its own
    shuffled order) in lines files of about ``--file-mb`` MB under ``--workdir``.  cutext GPU end to
    end (scheduler "sync" on one GPU; ``--cluster`` adds a LocalCUDACluster run) with per-stage timings
    and peak device memory; peers on the same machine on a ``--peer-mb`` MB subset: bm25s and cutext
    CPU (scheduler "cluster").  Queries: cutext's GPU engine (``--gpu-batch-sizes``, ``--gpu-workspace-mb``)
    and sparse path on an index of the subset, peak device memory and postings scanned per second
    against the HBM bandwidth, against bm25s retrieve with n_threads=os.cpu_count().

Every measurement is the median of ``--repeats`` runs; a failing measurement prints an error row
and the run goes on; past ``--max-seconds`` no new measurement (or repeat) starts.  The table is
printed at the end; ``--json PATH`` also writes the rows (rewritten after every measurement, so a
run that is cut off leaves what it measured).  MB = 10**6 bytes, GB = 10**9 bytes of UTF-8 text as
written to the lines files (one newline per document included).  See benchmarks/README.md.  The sections'
code is in ``bm25_sections.py``; this module keeps the helpers other benchmarks import.
"""
from __future__ import annotations

import argparse
import copy
import gc
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

import numpy as np

T0 = time.monotonic()
MB = 1e6
GB = 1e9
STAGES = ("read", "tokenize", "encode", "sort+count", "weight+write")
SETTINGS = ("plain", "en-snowball")
SETTING_HELP = {
    "plain": "lowercase, tokens = runs of word characters of >= 2 chars (bm25s's default pattern "
             r"(?u)\b\w\w+\b; cutext min_len=2), no stopwords, no stemming",
    "en-snowball": "plain + bm25s's English stopword list (bm25s.stopwords.STOPWORDS_EN, removed before "
                   "stemming) + Snowball English stemmer (PyStemmer; cutext stemmer='english')",
}


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", flush=True)


# ----------------------------------------------------------------------------- environment

def _run_text(cmd, timeout=20) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return out.stdout.strip() if out.returncode == 0 else None
    except Exception:
        return None


def _version(*dists) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    for d in dists:
        try:
            return version(d)
        except PackageNotFoundError:
            continue
    return None


def environment(extra=()) -> dict:
    """The machine, the devices and the versions of the packages a benchmark ran with (``extra``: more
    distribution names whose versions to record, e.g. a peer of another benchmark)."""
    env: dict = {"python": sys.version.split()[0], "platform": platform.platform()}
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    env["cpu_model"] = model or platform.processor() or platform.machine()
    env["cpu_count"] = os.cpu_count()
    try:
        env["cpu_affinity"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    try:
        env["loadavg_1m"] = round(os.getloadavg()[0], 2)
    except OSError:
        pass
    try:
        kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
        env["mem_gib"] = round(kb / 2**20, 1)
    except (OSError, AttributeError):
        pass
    gpus = []
    if shutil.which("nvidia-smi"):
        txt = _run_text(["nvidia-smi", "--query-gpu=index,name,memory.total,driver_version",
                         "--format=csv,noheader"])
        gpus = [line.strip() for line in (txt or "").splitlines() if line.strip()]
    env["gpus"] = gpus
    env["CUDA_VISIBLE_DEVICES"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    versions = {}
    for name, dists in [("cutext", ["cutext"]), ("bm25s", ["bm25s"]), ("numpy", ["numpy"]),
                        ("scipy", ["scipy"]), ("pandas", ["pandas"]), ("pyarrow", ["pyarrow"]),
                        ("dask", ["dask"]), ("distributed", ["distributed"]), ("numba", ["numba"]),
                        ("PyStemmer", ["PyStemmer", "pystemmer"]),
                        ("cudf", ["cudf-cu13", "cudf-cu12", "cudf"]),
                        ("cupy", ["cupy-cuda13x", "cupy-cuda12x", "cupy"]),
                        ("rmm", ["rmm-cu13", "rmm-cu12", "rmm"]), ("dask-cuda", ["dask-cuda"])]:
        versions[name] = _version(*dists)
    for name in extra:
        versions[name] = _version(name)
    env["versions"] = versions
    here = Path(__file__).resolve().parent.parent
    env["cutext_commit"] = _run_text(["git", "-C", str(here), "rev-parse", "--short", "HEAD"])
    return env


def print_environment(env: dict) -> None:
    print("== environment", flush=True)
    aff = f" ({env['cpu_affinity']} usable)" if env.get("cpu_affinity") not in (None, env["cpu_count"]) else ""
    print(f"  CPU: {env['cpu_model']} x {env['cpu_count']}{aff}; RAM {env.get('mem_gib', '?')} GiB; "
          f"load average (1 min) {env.get('loadavg_1m', '?')}")
    print(f"  GPU: {'; '.join(env['gpus']) if env['gpus'] else 'none visible (no nvidia-smi or no device)'}")
    print(f"  Python {env['python']} on {env['platform']}")
    v = env["versions"]
    print("  " + ", ".join(f"{k} {v[k] or 'not installed'}" for k in v))
    print(f"  cutext commit {env.get('cutext_commit') or '?'}", flush=True)


# ----------------------------------------------------------------------------- data

def find_20news(data: str | None) -> Path:
    from cutext.pipelines import datasets

    if data:
        p = Path(data)
        if p.is_file():
            return p
        cand = p / "corpora" / "20news-bydate.tar.gz"
        if cand.is_file():
            return cand
        cand = p / "20news-bydate.tar.gz"
        if cand.is_file():
            return cand
        raise FileNotFoundError(f"--data {data}: no 20news-bydate.tar.gz there (looked in corpora/ too)")
    d = datasets.default_data_dir()
    if d is None or not (d / "corpora" / "20news-bydate.tar.gz").is_file():
        raise FileNotFoundError("20news-bydate.tar.gz not found: pass --data DIR (holding "
                                "corpora/20news-bydate.tar.gz) or set CUTEXT_DATA")
    return d / "corpora" / "20news-bydate.tar.gz"


_NEWLINES = str.maketrans({"\n": " ", "\r": " "})
_SUBJECT = re.compile(r"^Subject:[ \t]*(.*)$", re.M)
_REPLY = re.compile(r"^(\s*(re|fwd?)\s*(\[\d+\])?\s*:\s*)+", re.I)


class Corpus:
    """20 Newsgroups as one line per post, and real queries (the posts' Subject lines)."""

    def __init__(self, tarball: Path):
        from cutext.pipelines import datasets

        t = time.perf_counter()
        df = datasets.load_20newsgroups(tarball)
        self.texts: list[str] = [s.translate(_NEWLINES) for s in df["text"]]
        self.nbytes = np.fromiter((len(s.encode("utf-8")) + 1 for s in self.texts), np.int64, len(self.texts))
        subjects = []
        for s in df["text"]:
            m = _SUBJECT.search(s)
            if m:
                q = _REPLY.sub("", m.group(1)).strip()
                if q:
                    subjects.append(q)
        self.subjects = subjects
        self.load_s = time.perf_counter() - t

    @property
    def n_docs(self) -> int:
        return len(self.texts)

    @property
    def total_bytes(self) -> int:
        return int(self.nbytes.sum())

    def queries(self, n: int, seed: int = 0) -> list[str]:
        """``n`` Subject lines ("Re:"/"Fwd:" prefixes removed), shuffled, cycled to length ``n``."""
        order = np.random.default_rng(seed).permutation(len(self.subjects))
        return [self.subjects[order[i % len(order)]] for i in range(n)]


def write_lines(texts: list[str], dest: Path, n_files: int) -> list[Path]:
    """Contiguous, byte-balanced chunks of ``texts`` as ``part-NNNNN.txt`` (file order = doc order)."""
    dest.mkdir(parents=True, exist_ok=True)
    lens = np.fromiter((len(s) + 1 for s in texts), np.int64, len(texts))
    cum = np.cumsum(lens)
    cuts = [0] + [int(np.searchsorted(cum, cum[-1] * i / n_files)) for i in range(1, n_files)] + [len(texts)]
    files = []
    for i in range(n_files):
        lo, hi = cuts[i], cuts[i + 1]
        if hi <= lo:
            continue
        p = dest / f"part-{i:05d}.txt"
        with open(p, "w", encoding="utf-8", newline="\n") as fh:
            fh.write("\n".join(texts[lo:hi]))
            fh.write("\n")
        files.append(p)
    return files


def replicated_stream(corpus: Corpus, seed: int):
    """Endless (replica, permutation) pairs: every replica is the whole corpus in its own order."""
    r = 0
    while True:
        yield r, np.random.default_rng(seed + r).permutation(corpus.n_docs)
        r += 1


def corpus_folder(data: str | None, work: Path, gb: float) -> Path:
    """``work/corpus``: 20 Newsgroups as lines files, once (``gb`` 0: two files) or replicated to ``gb`` GB
    (:func:`write_replicated`, files of 256 MB); an existing folder of the same content is reused."""
    corpus = Corpus(find_20news(data))
    src = work / "corpus"
    if gb:
        write_replicated(corpus, src, gb * 1e9, 256e6, seed=0)
    elif not src.exists():
        write_lines(corpus.texts, src, 2)
    return src


def write_replicated(corpus: Corpus, dest: Path, target_bytes: float, file_bytes: float, seed: int,
                     keep_texts: bool = False) -> dict:
    """Write >= ``target_bytes`` of replicated documents as lines files of about ``file_bytes``.

    ``<dest>.manifest.json`` (beside the folder, so that cutext does not read it as a corpus file)
    records what was written; a folder whose manifest matches is reused.
    Returns the manifest (``texts``: the documents in order, when ``keep_texts``).
    """
    want = {"source_docs": corpus.n_docs, "source_bytes": corpus.total_bytes,
            "target_bytes": int(target_bytes), "file_bytes": int(file_bytes), "seed": seed}
    man_path = dest.with_name(dest.name + ".manifest.json")
    if man_path.is_file() and not keep_texts:
        try:
            man = json.loads(man_path.read_text())
            if all(man.get(k) == v for k, v in want.items()) and \
                    all((dest / f).is_file() for f in man["files"]):
                man["reused"] = True
                return man
        except (OSError, ValueError, KeyError):
            pass
    if dest.exists():
        shutil.rmtree(dest)
    man_path.unlink(missing_ok=True)
    dest.mkdir(parents=True)
    enc = [s.encode("utf-8") + b"\n" for s in corpus.texts]
    files, kept = [], []
    written = n_docs = 0
    fh, fbytes = None, 0
    replicas = 0
    t = time.perf_counter()
    for r, perm in replicated_stream(corpus, seed):
        if written >= target_bytes:
            break
        replicas = r + 1
        for i in perm:
            if written >= target_bytes:
                break
            if fh is None or fbytes >= file_bytes:
                if fh is not None:
                    fh.close()
                name = f"part-{len(files):05d}.txt"
                files.append(name)
                fh, fbytes = open(dest / name, "wb"), 0
            b = enc[i]
            fh.write(b)
            fbytes += len(b)
            written += len(b)
            n_docs += 1
            if keep_texts:
                kept.append(corpus.texts[i])
    if fh is not None:
        fh.close()
    man = dict(want, files=files, bytes=written, n_docs=n_docs, replicas=replicas,
               write_s=round(time.perf_counter() - t, 2))
    man_path.write_text(json.dumps(man, indent=1))
    man["reused"] = False
    if keep_texts:
        man["texts"] = kept
    return man


# ----------------------------------------------------------------------------- measuring

class _PeakPoller:
    """A daemon thread that calls ``sample()`` every ``interval`` s inside a ``with`` block and keeps
    the largest value in ``peak`` (None until one sample succeeds)."""

    def __init__(self, interval: float, enabled: bool = True):
        self.interval = interval
        self.enabled = enabled
        self.peak = None
        self._stop = threading.Event()
        self._thread = None

    def sample(self) -> float | None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _poll(self):
        while not self._stop.is_set():
            v = self.sample()
            if v is not None:
                self.peak = v if self.peak is None else max(self.peak, v)
            self._stop.wait(self.interval)

    def __enter__(self):
        if self.enabled:
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=15)
        return False


class GpuMemWatch(_PeakPoller):
    """Peak of the devices' memory.used (all GPUs summed, as ``nvidia-smi`` shows it) polled every
    ``interval`` s, read through NVML in this process (pynvml); ``nvidia-smi`` where pynvml is missing.

    ``peak_mib`` is the peak minus ``baseline`` (MiB), None where neither is available.  An
    ``nvidia-smi`` process every 0.1 s slowed what it watched (searches up to 1.6x,
    results/search-poller-ab-gpu-h200-2026-11-23.log); an NVML query in this process does not start one.
    """

    _nvml = None  # list of device handles once NVML is initialised; False where it cannot be

    def __init__(self, baseline: float | None, interval: float = 0.1, enabled: bool = True):
        super().__init__(interval, enabled and baseline is not None)
        self.baseline = baseline

    @classmethod
    def _handles(cls):
        if cls._nvml is None:
            try:
                import pynvml

                pynvml.nvmlInit()
                cls._nvml = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
            except Exception:  # pynvml absent, or no driver
                cls._nvml = False
        return cls._nvml

    @classmethod
    def used_mib(cls) -> float | None:
        handles = cls._handles()
        if handles:
            import pynvml

            try:
                return float(sum(pynvml.nvmlDeviceGetMemoryInfo(h).used for h in handles)) / 2**20
            except Exception:
                return None
        if not shutil.which("nvidia-smi"):
            return None
        txt = _run_text(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"], timeout=10)
        if not txt:
            return None
        try:
            return float(sum(float(x) for x in txt.split()))
        except ValueError:
            return None

    def sample(self) -> float | None:
        return self.used_mib()

    @property
    def peak_mib(self) -> float | None:
        if self.peak is None or self.baseline is None:
            return None
        return round(self.peak - self.baseline, 1)


class RssWatch(_PeakPoller):
    """Peak resident memory of this process plus its children (LocalCluster workers), summed,
    sampled with psutil every ``interval`` s; also ``ru_maxrss`` of the process and of its
    largest waited-for child (``resource.getrusage``).  ``peak_mib`` is None without psutil."""

    def __init__(self, interval: float = 0.05):
        try:
            import psutil  # noqa: F401
            ok = True
        except ImportError:
            ok = False
        super().__init__(interval, ok)

    def sample(self) -> float:
        import psutil

        me = psutil.Process()
        total = 0
        for p in [me] + me.children(recursive=True):
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        return total

    @property
    def peak_mib(self):
        return None if self.peak is None else round(self.peak / 2**20, 1)

    @staticmethod
    def maxrss_mib() -> dict:
        import resource

        return {"ru_maxrss_self_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "ru_maxrss_children_mib": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)}


class DevicePools:
    """RMM statistics (peak bytes per measurement) and the CuPy pool, where they can be had."""

    def __init__(self, enabled: bool):
        self.rmm = None
        if enabled:
            try:
                import rmm
                import rmm.statistics

                if type(rmm.mr.get_current_device_resource()) is rmm.mr.CudaMemoryResource:
                    # the pool cutext's in-process GPU runs take (stages.compute.device_pool), set
                    # here because a statistics adaptor on top makes cutext leave the resource alone
                    rmm.mr.set_current_device_resource(rmm.mr.CudaAsyncMemoryResource())
                rmm.statistics.enable_statistics()
                self.rmm = rmm.statistics
            except Exception as exc:  # rmm absent, or an older rmm without statistics
                log(f"rmm statistics unavailable ({type(exc).__name__}: {exc})")
        self.enabled = enabled

    def start(self):
        if self.rmm is not None:
            try:
                self.rmm.push_statistics()
            except Exception:
                pass

    def stop(self) -> dict:
        out = {}
        if self.rmm is not None:
            try:
                st = self.rmm.pop_statistics()
                out["rmm_peak_mib"] = round(st.peak_bytes / 2**20, 1)
            except Exception:
                pass
        if self.enabled and "cupy" in sys.modules:
            try:
                import cupy

                out["cupy_pool_mib"] = round(cupy.get_default_memory_pool().total_bytes() / 2**20, 1)
            except Exception:
                pass
        self.free()
        return out

    def free(self):
        """Empty CuPy's pools, so that the next measurement's peak starts from nothing cached."""
        if self.enabled and "cupy" in sys.modules:
            try:
                import cupy

                cupy.get_default_memory_pool().free_all_blocks()
                cupy.get_default_pinned_memory_pool().free_all_blocks()
            except Exception:
                pass


def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


class Bench:
    """Runs measurements (median of repeats), keeps rows, prints and saves them."""

    def __init__(self, args, env):
        self.args = args
        self.env = env
        self.rows: list[dict] = []

    def elapsed(self) -> float:
        return time.monotonic() - T0

    def over_budget(self, predicted: float = 0.0) -> bool:
        return self.elapsed() + predicted > self.args.max_seconds

    def add(self, row: dict) -> dict:
        self.rows.append(row)
        self.save()
        return row

    def save(self):
        if not self.args.json:
            return
        p = Path(self.args.json)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + ".tmp")
        args = {k: (None if isinstance(v, float) and math.isinf(v) else v) for k, v in vars(self.args).items()}
        tmp.write_text(json.dumps({"environment": self.env, "args": args, "rows": self.rows},
                                  indent=1, default=str))
        os.replace(tmp, p)

    def fail(self, base: dict, error: str) -> dict:
        """Add an error row (a measurement that could not run)."""
        row = new_row(base)
        row["error"] = error.splitlines()[0][:300] if error else "error"
        log(f"FAIL {row['system']} [{row['tokenizer'] or '-'}]: {row['error']}")
        return self.add(row)

    def measure(self, base: dict, fn, repeats: int | None = None):
        """Run ``fn`` up to ``repeats`` times; add one row; return (row, what the last run kept).

        ``fn()`` returns a dict: ``seconds`` (required), optional ``stages`` (dict), ``counts``
        (dict), ``extra`` (dict of numbers, medians taken), ``peak_mib`` (max taken), ``keep``
        (an object handed back to the caller), ``n_docs`` (overrides base's).
        """
        repeats = repeats or self.args.repeats
        row = new_row(base)
        label = f"{row['section']}/{row['task']}: {row['system']} [{row['tokenizer'] or '-'}] on {row['data']}"
        runs, keep = [], None
        for i in range(repeats):
            predicted = runs[-1]["seconds"] if runs else 0.0
            if self.over_budget(predicted):
                msg = f"time budget --max-seconds {self.args.max_seconds:g} would be exceeded"
                if runs:
                    row["notes"].append(f"stopped after {len(runs)} of {repeats} repeats ({msg})")
                else:
                    row["error"] = f"skipped: {msg}"
                log(f"SKIP {label}: {msg}")
                break
            log(f"RUN  {label} (repeat {i + 1}/{repeats})")
            try:
                out = fn()
            except Exception as exc:  # one failing measurement must not end the benchmark
                msg = f"{type(exc).__name__}: {exc}"
                row["error"] = msg.splitlines()[0][:300] if msg else type(exc).__name__
                log(f"FAIL {label}: {row['error']}")
                traceback.print_exc(limit=6, file=sys.stdout)
                sys.stdout.flush()
                gc.collect()
                break
            runs.append(out)
            keep = out.get("keep")
            log(f"     {out['seconds']:.3f} s")
        if runs:
            row["n"] = len(runs)
            row["all_seconds"] = [round(r["seconds"], 4) for r in runs]
            sec = _median([r["seconds"] for r in runs])
            row["seconds"] = sec
            n_docs = runs[-1].get("n_docs", row["n_docs"])
            row["n_docs"] = n_docs
            if row["nbytes"] and sec:
                row["mb_s"] = row["nbytes"] / MB / sec
                row["gb_s"] = row["nbytes"] / GB / sec
            if n_docs and sec and row["task"] in ("index", "warm-up"):
                row["docs_s"] = n_docs / sec
            if row["n_queries"] and sec and row["task"] == "search":
                row["q_s"] = row["n_queries"] / sec
            names = []
            for r in runs:
                for k in r.get("stages", {}):
                    if k not in names:
                        names.append(k)
            row["stages"] = {k: _median([r.get("stages", {}).get(k) for r in runs]) for k in names}
            if row["stages"]:
                row["stages"]["other"] = sec - sum(v for v in row["stages"].values() if v is not None)
            row["counts"] = runs[-1].get("counts", {})
            extra_keys = []
            for r in runs:
                for k in r.get("extra", {}):
                    if k not in extra_keys:
                        extra_keys.append(k)
            row["extra"] = {k: _median([r.get("extra", {}).get(k) for r in runs]) for k in extra_keys}
            peaks = [r.get("peak_mib") for r in runs if r.get("peak_mib") is not None]
            row["peak_mib"] = max(peaks) if peaks else None
            if row["error"]:
                row["notes"].append(f"repeat {len(runs) + 1} failed: {row['error']}")
                row["error"] = None
        self.add(row)
        print("     " + one_line(row), flush=True)
        return row, keep


def new_row(base: dict) -> dict:
    return {"section": base.get("section"), "task": base.get("task"), "system": base.get("system"),
            "tokenizer": base.get("tokenizer"), "data": base.get("data"), "n": 0, "seconds": None,
            "nbytes": base.get("nbytes"), "n_docs": base.get("n_docs"), "n_queries": base.get("n_queries"),
            "mb_s": None, "gb_s": None, "docs_s": None, "q_s": None, "peak_mib": None,
            "notes": list(base.get("notes", [])), "error": None, "stages": {}, "counts": {},
            "extra": {}, "all_seconds": []}


def error_label(row: dict) -> str:
    """``SKIPPED: why`` for a measurement the time budget left out, ``ERROR: what`` for a failure."""
    e = str(row.get("error") or "")
    return f"SKIPPED: {e[len('skipped: '):]}" if e.startswith("skipped: ") else f"ERROR: {e}"


def one_line(row: dict) -> str:
    if row["error"]:
        return f"{row['system']} [{row['tokenizer']}]: {error_label(row)}"
    parts = [f"{row['system']} [{row['tokenizer']}]", f"median {row['seconds']:.3f} s (n={row['n']})"]
    if row["mb_s"]:
        parts.append(f"{row['mb_s']:.1f} MB/s")
    if row["docs_s"]:
        parts.append(f"{row['docs_s']:,.0f} docs/s")
    if row["q_s"]:
        parts.append(f"{row['q_s']:,.0f} queries/s")
    if row["peak_mib"] is not None:
        parts.append(f"peak {row['peak_mib']:,.0f} MiB")
    return ", ".join(parts)


# ----------------------------------------------------------------------------- the systems

def tokenizer_kwargs(setting: str) -> tuple[dict, dict]:
    """(cutext build_index kwargs, bm25s.tokenize kwargs) for a tokenizer setting."""
    if setting == "plain":
        return {"stopwords": None, "stemmer": None, "min_len": 2}, {"stopwords": None, "stemmer": None}
    if setting == "en-snowball":
        import Stemmer
        from bm25s.stopwords import STOPWORDS_EN

        return ({"stopwords": sorted(STOPWORDS_EN), "stemmer": "english", "min_len": 2},
                {"stopwords": "en", "stemmer": Stemmer.Stemmer("english")})
    raise ValueError(f"unknown tokenizer setting {setting!r}; choose from {SETTINGS}")


def _log_gputext_profile(quiet: bool = False):
    """Sub-steps of the stages (read, tokenize, encode, count, write) when ``CUTEXT_GPUTEXT_PROFILE=1``;
    ``quiet``: only clear them (after the warm-up)."""
    from cutext.stages.runtime import compute

    prof = compute.step_profile(reset=True)
    if prof and not quiet:
        log("gpu: device text path sub-steps (s, summed over partitions and repeats, "
            f"${compute.PROFILE_ENV}=1): " + ", ".join(f"{k} {v:.2f}" for k, v in prof.items()))




def bm25s_index_run(texts, tokb, args):
    """bm25s.tokenize + BM25.index from in-memory texts (no file read, no index written)."""
    import bm25s

    def fn():
        gc.collect()
        t = time.perf_counter()
        tokens = bm25s.tokenize(texts, show_progress=False, **tokb)
        model = bm25s.BM25(k1=args.k1, b=args.b, method="lucene")
        model.index(tokens, show_progress=False)
        sec = time.perf_counter() - t
        # index() adds an empty token "" to the vocabulary (create_empty_token=True): not a term
        counts = {"n_tokens": int(sum(len(x) for x in tokens.ids)),
                  "n_terms": len(tokens.vocab) - ("" in tokens.vocab)}
        return {"seconds": sec, "counts": counts, "n_docs": len(texts), "keep": model}

    return fn


def bm25s_numba_model(model):
    """The same bm25s index with the numba retrieval backend (what BM25(backend='numba') sets up)."""
    m = copy.copy(model)
    m.backend = "numba"
    m.compile(activate_numba=True, warmup=False)
    return m


def bm25s_search_run(model, queries, tokb, k, n_threads):
    """bm25s.tokenize(queries) + retrieve(top-k)."""
    import bm25s

    def fn():
        gc.collect()
        t = time.perf_counter()
        qt = bm25s.tokenize(queries, show_progress=False, **tokb)
        docs, scores = model.retrieve(qt, k=k, n_threads=n_threads, show_progress=False)
        sec = time.perf_counter() - t
        return {"seconds": sec, "keep": (np.asarray(docs), np.asarray(scores))}

    return fn


def bm25s_from_index(idx):
    """A bm25s retriever (numba backend) over the weights of a cutext index loaded on the CPU.

    bm25s 0.3.16 keeps its index as ``scores = {data, indices, indptr, num_docs}`` (term-major: a column per
    vocabulary id) and ``vocab_dict`` (token -> id), with ``""`` as the empty token whose column is empty.
    cutext's term-major CSR is the same layout (row 0 = unknown terms, empty), and for the lucene variant its
    stored weights are bm25s's.  Used where bm25s would take minutes to index (the >= 2 GB corpus) and only its
    retrieval is measured; :func:`check_bm25s_from_index` compares it with a native bm25s index first.
    """
    import bm25s

    M = idx.matrix
    model = bm25s.BM25(k1=float(idx.meta.get("k1", 1.2)), b=float(idx.meta.get("b", 0.75)), method="lucene")
    model.scores = {"data": np.asarray(M.data, np.float32), "indices": np.asarray(M.indices, np.int32),
                    "indptr": np.asarray(M.indptr, np.int64), "num_docs": int(idx.n_docs)}
    vocab = {"": 0}
    vocab.update((t, i + 1) for i, t in enumerate(idx.vocab.to_pylist()))
    model.vocab_dict = vocab
    model.unique_token_ids_set = set(vocab.values())
    model.nonoccurrence_array = None  # what index() sets for lucene (no per-term absent-score array)
    return bm25s_numba_model(model)




# ----------------------------------------------------------------------------- main

def _int_list(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x.strip()]


def _str_list(choices):
    def parse(s: str) -> list[str]:
        out = [x.strip() for x in s.split(",") if x.strip()]
        bad = [x for x in out if x not in choices]
        if bad:
            raise argparse.ArgumentTypeError(f"unknown {bad}; choose from {list(choices)}")
        return out

    return parse


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        prog="benchmarks/bm25.py",
        description="BM25 indexing (MB/s, docs/s) and query (queries/s) throughput of cutext against bm25s, "
                    "on 20 Newsgroups (cpu section) and on GBs of replicated 20 Newsgroups posts (gpu section). "
                    "Prints a table of medians; see benchmarks/README.md for the columns.",
        epilog="tokenizer settings: " + "; ".join(f"{k}: {v}" for k, v in SETTING_HELP.items()))
    ap.add_argument("--cpu", action="store_true", help="run the cpu section (the default when --gpu is not given)")
    ap.add_argument("--gpu", action="store_true", help="run the gpu section (needs cudf and cupy; add --cpu for both)")
    ap.add_argument("--memory", action="store_true",
                    help="run the memory section: peak RSS of CPU indexing and index load on --memory-mb "
                         "MB of replicated posts (add --cpu / --gpu for those too)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per measurement; the median is reported (default 3)")
    ap.add_argument("--json", metavar="PATH", help="also write the environment and the rows as JSON here")
    ap.add_argument("--data", metavar="DIR_OR_TARBALL",
                    help="folder holding corpora/20news-bydate.tar.gz, or the tarball itself "
                         "(default: cutext.pipelines.datasets.default_data_dir(), i.e. $CUTEXT_DATA or ../shared/data)")
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="time budget from start: no new measurement or repeat starts once it would run past it "
                         "(default 480 when --gpu is given, else no limit)")
    ap.add_argument("--n-queries", type=int, default=10_000, help="queries per search measurement (default 10000)")
    ap.add_argument("-k", "--k", type=int, default=10, help="top-k of every query (default 10)")
    ap.add_argument("--k1", type=float, default=1.2, help="BM25 k1, both systems (default 1.2)")
    ap.add_argument("--b", type=float, default=0.75, help="BM25 b, both systems (default 0.75)")
    ap.add_argument("--seed", type=int, default=0, help="seed of query order and replica shuffles (default 0)")
    ap.add_argument("--no-numba", action="store_true", help="skip the bm25s numba-backend retrieval rows")
    ap.add_argument("--no-bm25s-numpy", action="store_true",
                    help="skip bm25s's numpy-backend retrieval rows (slow: about 35 s per run on 2 cores)")
    ap.add_argument("--keep", action="store_true", help="keep the generated files and indexes")
    g = ap.add_argument_group("cpu section")
    g.add_argument("--settings", type=_str_list(SETTINGS), default=list(SETTINGS),
                   help=f"tokenizer settings, comma-separated (default {','.join(SETTINGS)})")
    g.add_argument("--cpu-schedulers", type=_str_list(("sync", "threads", "cluster")), default=["sync", "threads"],
                   help="cutext schedulers for the cpu section (default sync,threads)")
    g.add_argument("--cpu-files", type=int, default=None,
                   help="number of lines files the corpus is split into (default: os.cpu_count(), so that "
                        "the threads scheduler has a partition per core)")
    g.add_argument("--cpu-batch-sizes", type=_int_list, default=[4096],
                   help="cutext CPU search batch sizes, comma-separated (default 4096, the library default)")
    g.add_argument("--tmpdir", default=None, help="parent of the cpu section's temporary folder (default: system tmp)")
    g = ap.add_argument_group("memory section")
    g.add_argument("--memory-mb", type=_int_list, default=[100, 1000],
                   help="MB of replicated text per memory measurement, comma-separated (default 100,1000)")
    g.add_argument("--memory-schedulers", type=_str_list(("auto", "sync", "threads", "cluster")),
                   default=["auto", "cluster"],
                   help="schedulers of the memory rows (default auto,cluster: the pipeline's own choice, and a "
                        "2-worker LocalCluster where auto is not one already)")
    g = ap.add_argument_group("gpu section")
    g.add_argument("--gpu-gb", type=float, default=2.0, help="GB of replicated text to index (default 2.0)")
    g.add_argument("--peer-mb", type=float, default=300.0,
                   help="MB subset for the CPU peers and the query benchmark (default 300)")
    g.add_argument("--workdir", default="/tmp/cutext-bench",
                   help="where the replicated data (reused across runs) and indexes go (default /tmp/cutext-bench)")
    g.add_argument("--file-mb", type=float, default=256.0, help="size of each generated lines file (default 256)")
    g.add_argument("--gpu-tokenizer", choices=SETTINGS, default="plain", help="tokenizer setting (default plain)")
    g.add_argument("--analyzer", choices=("anserini",), default=None,
                   help="also index with this analyzer preset (anserini: Anserini's DefaultEnglishAnalyzer, the "
                        "word-break kernels on the GPU): a row beside the --gpu-tokenizer row")
    g.add_argument("--gpu-batch-sizes", type=_int_list, default=[1024, 4096],
                   help="cutext GPU search batch sizes (default 1024,4096)")
    g.add_argument("--search-full", action="store_true",
                   help="also search the index of the whole --gpu-gb corpus: cutext's GPU engine and bm25s numba "
                        "(all threads) over the same weights")
    g.add_argument("--search-shards", type=_int_list, default=[],
                   help="also search the subset's index sharded over N workers (LocalCUDACluster), e.g. 1,2")
    g.add_argument("--gpu-workspace-mb", type=int, default=1024,
                   help="max_workspace of the GPU search engine in MiB (default 1024)")
    g.add_argument("--gpu-blocksize-mb", type=float, default=None,
                   help="cutext reader blocksize for GPU runs in MiB (default: cutext's own, GPU_BLOCKSIZE = 128)")
    g.add_argument("--cluster", action="store_true",
                   help="also index the full data on a LocalCUDACluster (one worker per GPU)")
    g.add_argument("--client-gpus", type=_int_list, default=[],
                   help="also index the full data with client= on a LocalCUDACluster of N workers started "
                        "beforehand (start-up and a warm-up excluded), e.g. 1,2")
    g.add_argument("--client-protocols", type=lambda v: v.split(","), default=["tcp"],
                   help="the --client-gpus clusters' comm, a row each: tcp (default; cutext's own cluster's), "
                        "ucx (distributed-ucxx; the workers then allocate from an RMM pool over cudaMalloc, "
                        "which UCX can send by CUDA IPC), e.g. tcp,ucx")
    g.add_argument("--no-rmm-stats", action="store_true", help="do not enable rmm statistics (rmm peak column)")
    g.add_argument("--gpu-backend", default="gpu", choices=("gpu", "cpu"), help=argparse.SUPPRESS)  # dry runs
    args = ap.parse_args(argv)
    if not args.cpu and not args.gpu and not args.memory:
        args.cpu = True
    if args.max_seconds is None:
        args.max_seconds = 480.0 if args.gpu else math.inf
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    # bm25_sections imports this module by name: run as a script, it is that module (not a second copy)
    sys.modules.setdefault("bm25", sys.modules[__name__])
    from bm25_sections import print_table, section_cpu, section_gpu, section_memory

    env = environment()
    print_environment(env)
    bench = Bench(args, env)
    try:
        tarball = find_20news(args.data)
        corpus = Corpus(tarball)
    except Exception as exc:
        print(f"error: cannot load 20 Newsgroups: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 2
    log(f"20 Newsgroups: {corpus.n_docs:,} posts, {corpus.total_bytes / MB:.2f} MB as lines, "
        f"{len(corpus.subjects):,} Subject lines (queries), loaded in {corpus.load_s:.1f} s from {tarball}")
    print("  tokenizer settings: " + "; ".join(f"{k} = {v}" for k, v in SETTING_HELP.items()), flush=True)
    print(f"  BM25 lucene variant, k1={args.k1:g}, b={args.b:g}, on both sides", flush=True)
    sections = [s for s, on in (("cpu", args.cpu), ("memory", args.memory), ("gpu", args.gpu)) if on]
    run_section = {"cpu": section_cpu, "memory": section_memory, "gpu": section_gpu}
    for s in sections:
        try:
            run_section[s](bench, corpus, args)
        except Exception as exc:  # the tables of what was measured still print
            log(f"{s} section stopped: {type(exc).__name__}: {exc}")
            traceback.print_exc(limit=8, file=sys.stdout)
            bench.fail({"section": s, "task": "-", "system": f"{s} section", "data": "-"},
                       f"section stopped: {type(exc).__name__}: {exc}")
    print()
    print_environment(env)
    for s in sections:
        print_table(bench.rows, s)
    bench.save()
    if args.json:
        print(f"\nrows written to {args.json}", flush=True)
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
