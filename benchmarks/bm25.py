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
written to the lines files (one newline per document included).  See benchmarks/README.md.
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
import tempfile
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


def cutext_index_run(path, out, *, backend, scheduler, tok, args, blocksize=None, n_workers=None,
                     mem_baseline=None, pools: DevicePools | None = None, client=None):
    """One end-to-end cutext index build (lines files -> index on disk), wall-clock timed."""
    from cutext import pipelines
    from cutext.stages.text.device import clear_term_cache

    def fn():
        kw = dict(out=str(out), backend=backend, scheduler=scheduler, format="lines", variant="lucene",
                  k1=args.k1, b=args.b, progress=False, **tok)
        if blocksize:
            kw["blocksize"] = int(blocksize)
        if n_workers:
            kw["n_workers"] = n_workers
        if client is not None:
            kw["client"] = client
            kw.pop("scheduler")
        # every timed build writes a new directory, as a first build does: replacing an earlier index
        # would add the removal of its files (0.24 s for the 2 GB index on an H200) to the build
        shutil.rmtree(out, ignore_errors=True)
        clear_term_cache()  # the terms of earlier builds are mapped again, as in a new process
        gc.collect()
        if pools:
            pools.start()
        with GpuMemWatch(mem_baseline, enabled=mem_baseline is not None) as mw, RssWatch() as rw:
            t = time.perf_counter()
            r = pipelines.run("bm25", str(path), **kw)
            sec = time.perf_counter() - t
        extra = pools.stop() if pools else {}
        extra["stage_sum_s"] = sum(r.timings.values())
        # host memory: peak RSS of this process + its LocalCluster workers (summed), and its
        # multiple of the input bytes (<= 3x the input plus a constant)
        extra["rss_peak_mib"] = rw.peak_mib
        if rw.peak_mib is not None and r.counts.get("input_bytes"):
            extra["rss_peak_x_input"] = round(rw.peak / r.counts["input_bytes"], 2)
        extra.update(RssWatch.maxrss_mib())
        return {"seconds": sec, "stages": dict(r.timings), "counts": dict(r.counts, backend=r.backend,
                                                                           scheduler=r.scheduler,
                                                                           n_workers=r.n_workers),
                "n_docs": r.counts.get("n_docs"), "peak_mib": mw.peak_mib, "extra": extra, "keep": r}

    return fn


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


def postings_scanned(idx, queries) -> int:
    """Postings the engines read for ``queries``: the df of every distinct term of every query."""
    Q = idx.query_matrix(queries)
    return int(idx.df[Q.indices].sum())


# HBM bandwidth by GPU name (vendor data sheets, SXM parts), for the postings-scanned comparison
HBM_BYTES_S = {"H200": 4.8e12, "H100": 3.35e12, "A100": 2.0e12}


def hbm_bandwidth() -> tuple[str, float] | tuple[None, None]:
    name = _run_text(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]) or ""
    for key, bw in HBM_BYTES_S.items():
        if key in name:
            return key, bw
    return None, None


def cutext_search_run(idx, queries, k, batch_size, mem_baseline=None, pools=None, engine="auto", n_threads=None,
                      postings=None, max_workspace=None):
    """``idx.search`` of all queries with ``engine`` (``n_threads`` for the CPU engine, ``max_workspace`` for
    the GPU engine); ``extra`` gets
    ``postings_s`` (postings scanned per second) when ``postings`` is given."""
    def fn():
        gc.collect()
        if pools:
            pools.start()
        kw = {"n_threads": n_threads} if n_threads is not None else {}
        if max_workspace is not None:
            kw["max_workspace"] = max_workspace
        # nvidia-smi is read once after the search, not polled during it: a poller's nvidia-smi processes
        # slowed 20-40 ms searches by up to 1.6x (results/search-poller-ab-gpu-h200-2026-11-23.log);
        # the pools' RMM statistics give the live peak
        t = time.perf_counter()
        res = idx.search(queries, k=k, batch_size=batch_size, engine=engine, **kw)
        sec = time.perf_counter() - t
        used = GpuMemWatch.used_mib() if mem_baseline is not None else None
        peak = None if used is None else round(used - mem_baseline, 1)
        extra = pools.stop() if pools else {}
        if postings:
            extra["postings_s"] = postings / sec
        return {"seconds": sec, "peak_mib": peak, "extra": extra, "keep": res,
                "counts": {"result_rows": len(res)}}

    return fn


def sharded_search_rows(bench, sbase, index_dir, be, gpu_label, queries, k, bs, n_shards, postings):
    """Search on an index sharded over ``n_shards`` workers (LocalCUDACluster on the GPU, LocalCluster
    processes on a dry run); cluster start and shard load excluded (in the notes)."""
    from distributed import Client

    from cutext import pipelines

    nq = len(queries)
    label = f"cutext {gpu_label} sharded search, {n_shards} shard{'s' * (n_shards > 1)} bs={bs}"
    try:
        t = time.perf_counter()
        if be == "gpu":
            from cutext.pipelines import local_gpu_cluster

            cluster = local_gpu_cluster(n_shards)
        else:
            from distributed import LocalCluster

            cluster = LocalCluster(n_workers=n_shards, threads_per_worker=1, dashboard_address=":0")
        with cluster, Client(cluster) as client:
            idx = pipelines.BM25Index.load(index_dir, backend=be, client=client)
            idx.search(queries[:256], k=k, batch_size=256)
            setup = time.perf_counter() - t
            row, _ = bench.measure(
                dict(sbase, task="search", system=label, n_queries=nq, nbytes=None,
                     notes=[f"tokenize on the caller + top-{k} per shard + merge; cluster start, shard load and "
                            f"warm-up {setup:.1f} s excluded"]),
                cutext_search_run(idx, queries, k, bs, postings=postings))
            postings_note(row, postings)
            del idx
    except Exception as exc:
        bench.fail(dict(sbase, task="search", system=label, n_queries=nq), f"{type(exc).__name__}: {exc}")
        traceback.print_exc(limit=6, file=sys.stdout)


def client_index_rows(bench, gbase, data_dir, warm_dir, idx_root, be, gpu_label, tok_c, args, blocksize,
                      data, nbytes, ndocs, notes, baseline, n_gpus, protocol="tcp") -> None:
    """The full data indexed with ``client=`` on a LocalCUDACluster of ``n_gpus`` workers (one GPU
    each) started before the row: cluster start-up and one warm-up build (CUDA contexts, kernels)
    excluded, so the row compares with the in-process one-GPU row (2 GPUs >= 1.8x one).
    ``protocol`` "ucx": the workers talk over UCX and allocate from an RMM pool (8 GiB to start), since
    UCX sends cudaMalloc memory by CUDA IPC but stages cudaMallocAsync memory through the host."""
    from distributed import Client

    label = f"cutext {gpu_label} client ({n_gpus} GPU{'s' * (n_gpus > 1)}{', ucx' * (protocol == 'ucx')})"
    try:
        t = time.perf_counter()
        if be == "gpu":
            from cutext.pipelines import local_gpu_cluster
            from cutext.stages.runtime.compute import rmm_cupy

            memory = dict(rmm_async=False, rmm_pool_size="8GiB") if protocol == "ucx" else {}  # tcp: as cutext's own
            cluster = local_gpu_cluster(n_gpus, protocol=protocol, **memory)
        else:
            from distributed import LocalCluster

            cluster = LocalCluster(n_workers=n_gpus, threads_per_worker=1, dashboard_address=":0", protocol=protocol)
        with cluster, Client(cluster) as client:
            if be == "gpu":
                client.run(rmm_cupy)
            start = time.perf_counter() - t
            t = time.perf_counter()
            cutext_index_run(warm_dir, idx_root / f"warm-client{n_gpus}", backend=be, scheduler=None, tok=tok_c,
                             args=args, blocksize=blocksize, client=client)()
            warm = time.perf_counter() - t
            shutil.rmtree(idx_root / f"warm-client{n_gpus}", ignore_errors=True)
            bench.measure(dict(gbase, task="index", system=label, data=data, nbytes=nbytes, n_docs=ndocs,
                               notes=notes + [f"LocalCUDACluster({n_gpus} workers, {protocol}) passed as client=; "
                                              f"start-up {start:.1f} s and a warm-up build {warm:.1f} s excluded"]),
                          cutext_index_run(data_dir, idx_root / f"full-client{n_gpus}", backend=be, scheduler=None,
                                           tok=tok_c, args=args, blocksize=blocksize, mem_baseline=baseline,
                                           client=client))
            shutil.rmtree(idx_root / f"full-client{n_gpus}", ignore_errors=True)
    except Exception as exc:
        bench.fail(dict(gbase, task="index", system=label, data=data), f"{type(exc).__name__}: {exc}")
        traceback.print_exc(limit=6, file=sys.stdout)


def index_device_mib(idx) -> float:
    """MiB of an index's CSR (data, indices, indptr) wherever it lives."""
    M = idx.matrix
    return (M.data.nbytes + M.indices.nbytes + M.indptr.nbytes) / 2**20


def search_memory_note(row: dict, index_mib: float) -> None:
    """Note the device memory of a GPU search: the index plus the RMM peak of live allocations during the
    row (the engine's workspace and query arrays).  The nvidia-smi column also counts what pools kept from
    earlier rows, and JAX's preallocation once bm25s has used JAX in this process."""
    rmm_peak = (row.get("extra") or {}).get("rmm_peak_mib")
    if rmm_peak is not None:
        row["notes"].append(f"device memory of the search: index {index_mib:,.0f} MiB + live peak {rmm_peak:,.1f} MiB "
                            f"(RMM) = {index_mib + rmm_peak:,.0f} MiB")


def postings_note(row: dict, postings: int | None, hbm=(None, None)) -> None:
    """Note postings scanned per second (and, on a GPU, the bytes of postings read against HBM bandwidth)."""
    ps = (row.get("extra") or {}).get("postings_s")
    if not ps:
        return
    note = f"{postings:,} postings, {ps / 1e6:,.0f} M postings/s"
    if hbm[1]:
        gbs = ps * 8 / 1e9  # doc id int32 + weight float32 per posting
        note += (f" = {gbs:,.0f} GB/s of postings, {100 * gbs * 1e9 / hbm[1]:.1f}% of {hbm[0]} HBM "
                 f"{hbm[1] / 1e12:.2f} TB/s")
    row["notes"].append(note)


def agreement(res, bm25s_out, n_queries: int, k: int, overlap: bool = True) -> dict:
    """Compare cutext's top-k with bm25s's: max |score difference| rank by rank (tie-proof), and
    the mean share of cutext's documents that bm25s also returned (meaningless under many ties)."""
    docs_b, scores_b = bm25s_out
    if res is None or len(res) == 0:
        return {}
    qi = res["query_id"].astype(np.int64).to_numpy()
    rk = res["rank"].to_numpy().astype(np.int64) - 1
    S = np.full((n_queries, k), np.nan)
    S[qi, rk] = res["score"].to_numpy()
    mask = ~np.isnan(S)
    out = {"max_abs_dscore": float(np.max(np.abs(S[mask] - scores_b[mask]))) if mask.any() else None}
    if overlap:
        D = np.full((n_queries, k), -1, np.int64)
        D[qi, rk] = res["doc_index"].to_numpy()
        shares = []
        for q in np.flatnonzero(mask.any(axis=1)):
            a = set(D[q][mask[q]].tolist())
            shares.append(len(a & set(docs_b[q].tolist())) / len(a))
        out["overlap_at_k"] = float(np.mean(shares)) if shares else None
    return out


def counts_note(bench: Bench, row: dict) -> None:
    """Note bm25s's token and term counts on its index row (to compare with cutext's)."""
    c = row.get("counts") or {}
    if c.get("n_tokens") is not None:
        row["notes"].append(f"{c['n_tokens']:,} tokens, {c['n_terms']:,} terms")
        bench.save()


def agreement_note(a: dict, k: int) -> str | None:
    if not a:
        return None
    s = [f"max|dscore| vs bm25s {a['max_abs_dscore']:.1e}"] if a.get("max_abs_dscore") is not None else []
    if a.get("overlap_at_k") is not None:
        s.append(f"overlap@{k} {a['overlap_at_k']:.4f}")
    return ", ".join(s) if s else None


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


def check_bm25s_from_index(converted, native, queries, tokb, k) -> str:
    """Retrieve with the converted and the native bm25s index: max |score difference| rank by rank, and
    the share of queries whose top-k document sets are equal (ties among replicas may reorder them)."""
    import bm25s

    qt = bm25s.tokenize(queries, show_progress=False, **tokb)
    d1, s1 = converted.retrieve(qt, k=k, show_progress=False, n_threads=os.cpu_count())
    d2, s2 = native.retrieve(bm25s.tokenize(queries, show_progress=False, **tokb), k=k, show_progress=False,
                             n_threads=os.cpu_count())
    same = np.mean([set(a.tolist()) == set(b.tolist()) for a, b in zip(np.asarray(d1), np.asarray(d2))])
    return (f"bm25s over cutext's index vs bm25s's own index ({len(queries):,} queries, top-{k}): max|dscore| "
            f"{float(np.max(np.abs(np.asarray(s1) - np.asarray(s2)))):.1e}, equal document sets {100 * same:.1f}%")


def engine_search_rows(bench, qbase, idx, load_s, queries, engines, be, gpu_label, args, pools, baseline,
                       mem_note) -> tuple[dict, int]:
    """One search row per ``(engine, batch size)`` of ``engines`` on the loaded index ``idx``: postings
    scanned per second (against HBM on a GPU), the device memory of the search, the sub-step clocks.
    Returns ``({(engine, bs): (row, result frame)}, postings scanned)``."""
    k = args.k
    postings = postings_scanned(idx, queries)
    hbm = hbm_bandwidth() if be == "gpu" else (None, None)
    index_mib = index_device_mib(idx)
    labels = {"gpu": "engine", "cpu": "cpu engine", "sparse": "sparse path (cupyx Q @ M)"}
    results = {}
    for engine, bs in engines:
        mw = {"max_workspace": args.gpu_workspace_mb << 20} if engine == "gpu" else {}
        row, res = bench.measure(
            dict(qbase, system=f"cutext {gpu_label} {labels[engine]} bs={bs}",
                 notes=[f"tokenize + top-{k}; index load {load_s:.2f} s excluded"]
                 + ([f"max_workspace {args.gpu_workspace_mb} MiB"] if mw else [])
                 + ([mem_note.replace("peak over", "nvidia-smi after the search (not polled) over")]
                    if mem_note else [])),
            cutext_search_run(idx, queries, k, bs, mem_baseline=baseline, pools=pools, engine=engine,
                              postings=postings, **mw))
        postings_note(row, postings, hbm)
        if be == "gpu":
            search_memory_note(row, index_mib)
        if res is not None:
            results[(engine, bs)] = (row, res)
        _log_gputext_profile()
    return results, postings


def full_search_rows(bench, fbase, full_dir, sub_index, native_sub, be, gpu_label, queries, tok_b, args, pools,
                     baseline, mem_note) -> None:
    """``--search-full``: the same queries on the index of the whole ``--gpu-gb`` corpus: cutext's GPU engine
    (``--gpu-batch-sizes``) and bm25s numba with all threads over the same weights (:func:`bm25s_from_index`;
    bm25s itself would index 2 GB in minutes)."""
    from cutext import pipelines

    nq, k, ncpu = len(queries), args.k, os.cpu_count() or 1
    qbase = dict(fbase, task="search", n_queries=nq)
    results = {}
    try:
        t = time.perf_counter()
        idx = pipelines.BM25Index.load(full_dir, backend=be)
        load_s = time.perf_counter() - t
        idx.search(queries[:256], k=k, batch_size=256)
        import importlib.util

        if be == "gpu" and importlib.util.find_spec("jax") is not None:
            log("gpu: jax is installed: bm25s's numpy backend selects its top k with JAX, which reserves 75% of the "
                "device, so the nvidia-smi peak of the rows below includes it (see the device memory notes)")
        engine = "gpu" if be == "gpu" else "cpu"
        results, _ = engine_search_rows(bench, qbase, idx, load_s, queries,
                                        [(engine, bs) for bs in args.gpu_batch_sizes], be, gpu_label, args, pools,
                                        baseline, mem_note)
        del idx
        gc.collect()
        pools.free()
    except Exception as exc:
        bench.fail(dict(qbase, system=f"cutext {gpu_label} search"), f"{type(exc).__name__}: {exc}")
        traceback.print_exc(limit=6, file=sys.stdout)
    if args.no_numba or bench.over_budget():
        return
    try:
        import bm25s

        if native_sub is not None and (sub_index / "index.json").is_file():
            log("gpu: " + check_bm25s_from_index(bm25s_from_index(pipelines.BM25Index.load(sub_index, backend="cpu")),
                                                 native_sub, queries[:2000], tok_b, k))
        t = time.perf_counter()
        model = bm25s_from_index(pipelines.BM25Index.load(full_dir, backend="cpu"))
        model.retrieve(bm25s.tokenize(queries[:8], show_progress=False, **tok_b), k=k, n_threads=ncpu,
                       show_progress=False)
        prep = time.perf_counter() - t
        _, bm_out = bench.measure(
            dict(qbase, system=f"bm25s (numba backend) {ncpu} threads",
                 notes=[f"tokenize + retrieve top-{k}, n_threads={ncpu}",
                        f"bm25s retriever over cutext's index weights (bm25s_from_index; {prep:.1f} s excluded)"]),
            bm25s_search_run(model, queries, tok_b, k, n_threads=ncpu))
        if bm_out is not None:
            for row, res in results.values():
                note = agreement_note(agreement(res, bm_out, nq, k, overlap=False), k)
                if note:
                    row["notes"].append(note)
        del model
        gc.collect()
    except Exception as exc:
        bench.fail(dict(qbase, system="bm25s (numba backend)"), f"{type(exc).__name__}: {exc}")
        traceback.print_exc(limit=6, file=sys.stdout)
    bench.save()


# ----------------------------------------------------------------------------- cpu section

def section_cpu(bench: Bench, corpus: Corpus, args) -> None:
    import bm25s

    nq, k = args.n_queries, args.k
    tmp = Path(tempfile.mkdtemp(prefix="cutext-bench-cpu-", dir=args.tmpdir))
    try:
        n_files = max(1, min(args.cpu_files or (os.cpu_count() or 1), 64))
        files = write_lines(corpus.texts, tmp / "corpus", n_files)
        nbytes = sum(f.stat().st_size for f in files)
        data = f"20news {nbytes / MB:.1f}MB"
        log(f"cpu: 20 Newsgroups, {corpus.n_docs:,} posts, {nbytes / MB:.2f} MB in {len(files)} lines files "
            f"under {tmp} (loaded in {corpus.load_s:.1f} s)")
        queries = corpus.queries(nq, args.seed)
        ncpu = os.cpu_count() or 1
        # warm-up: imports, dask and pyarrow first-call costs (excluded)
        write_lines(corpus.texts[:500], tmp / "warm", 1)
        t = time.perf_counter()
        from cutext import pipelines

        pipelines.run("bm25", str(tmp / "warm"), out=str(tmp / "warm-index"), backend="cpu", scheduler="sync",
                      format="lines", progress=False)
        log(f"cpu: warm-up run on 500 posts {time.perf_counter() - t:.2f} s (excluded)")
        base = {"section": "cpu", "data": data, "nbytes": nbytes, "n_docs": corpus.n_docs}
        for setting in args.settings:
            try:
                tok_c, tok_b = tokenizer_kwargs(setting)
            except Exception as exc:
                bench.fail(dict(base, task="index", system="(tokenizer setting)", tokenizer=setting),
                           f"{type(exc).__name__}: {exc}")
                continue
            index_dir = {}
            for sched in args.cpu_schedulers:
                out = tmp / f"index-{setting}-{sched}"
                row, r = bench.measure(dict(base, task="index", system=f"cutext cpu {sched}", tokenizer=setting,
                                            notes=["files -> index on disk"]),
                                       cutext_index_run(tmp / "corpus", out, backend="cpu", scheduler=sched,
                                                        tok=tok_c, args=args))
                if not row["error"]:
                    index_dir.setdefault("any", out)
            row, model = bench.measure(
                dict(base, task="index", system=f"bm25s {bm25s.__version__}", tokenizer=setting,
                     notes=["in-memory texts; excludes reading files and writing the index"]),
                bm25s_index_run(corpus.texts, tok_b, args))
            counts_note(bench, row)
            # queries
            qbase = dict(base, task="search", n_queries=nq, nbytes=None, n_docs=corpus.n_docs)
            bm_out = None
            if model is not None:
                if not args.no_bm25s_numpy:
                    row, bm_out = bench.measure(
                        dict(qbase, system="bm25s (numpy backend, default)", tokenizer=setting,
                             notes=[f"tokenize + retrieve top-{k}, n_threads=1"]),
                        bm25s_search_run(model, queries, tok_b, k, n_threads=1))
                if not args.no_numba:
                    try:
                        t = time.perf_counter()
                        mn = bm25s_numba_model(model)
                        for nt in sorted({1, ncpu}):  # JIT of the serial and the parallel function
                            mn.retrieve(bm25s.tokenize(queries[:8], show_progress=False, **tok_b), k=k,
                                        n_threads=nt, show_progress=False)
                        warm = time.perf_counter() - t
                        for nt in sorted({1, ncpu}):
                            _, out = bench.measure(
                                dict(qbase, system=f"bm25s (numba backend) {nt} thread{'s' * (nt > 1)}",
                                     tokenizer=setting, notes=[f"tokenize + retrieve top-{k}, n_threads={nt}",
                                                               f"numba JIT warm-up {warm:.1f} s excluded"]),
                                bm25s_search_run(mn, queries, tok_b, k, n_threads=nt))
                            bm_out = out if bm_out is None else bm_out
                        del mn
                    except Exception as exc:
                        bench.fail(dict(qbase, system="bm25s (numba backend)", tokenizer=setting),
                                   f"{type(exc).__name__}: {exc}")
            if "any" in index_dir:
                try:
                    t = time.perf_counter()
                    idx = pipelines.BM25Index.load(index_dir["any"], backend="cpu")
                    load_s = time.perf_counter() - t
                except Exception as exc:
                    idx, load_s = None, None
                    bench.fail(dict(qbase, system="cutext cpu search", tokenizer=setting),
                               f"BM25Index.load: {type(exc).__name__}: {exc}")
                if idx is not None:
                    postings = postings_scanned(idx, queries)
                    idx.search(queries[:64], k=k)  # numba JIT of the CPU engine (cached on disk), excluded
                    runs = [("cpu", 1), ("cpu", ncpu)] if ncpu > 1 else [("cpu", 1)]
                    runs += [("sparse", None)]
                    for bs in args.cpu_batch_sizes:
                        for engine, nt in runs:
                            label = (f"cutext cpu engine {nt} thread{'s' * (nt > 1)}" if engine == "cpu"
                                     else "cutext sparse path (scipy Q @ M)")
                            row, res = bench.measure(
                                dict(qbase, system=f"{label} bs={bs}", tokenizer=setting,
                                     notes=[f"tokenize + top-{k}; index load {load_s:.2f} s excluded"]),
                                cutext_search_run(idx, queries, k, bs, engine=engine, n_threads=nt,
                                                  postings=postings))
                            postings_note(row, postings)
                            if res is not None and bm_out is not None:
                                a = agreement(res, bm_out, nq, k)
                                row["extra"].update(a)
                                note = agreement_note(a, k)
                                if note:
                                    row["notes"].append(note)
                            bench.save()
                            del res
                    del idx
            del model, bm_out
            gc.collect()
    finally:
        if args.keep:
            log(f"cpu: kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


# ----------------------------------------------------------------------------- memory section

def section_memory(bench: Bench, corpus: Corpus, args) -> None:
    """Host memory of CPU indexing and of index load on replicated 20 Newsgroups:
    ``--memory-mb`` sizes, the scheduler the pipeline picks (``auto``) and a 2-worker LocalCluster."""
    from cutext import pipelines

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    tok_c, _ = tokenizer_kwargs("plain")
    for mb in args.memory_mb:
        man = write_replicated(corpus, work / f"mem-{mb:g}MB", mb * MB, args.file_mb * MB, args.seed)
        src = work / f"mem-{mb:g}MB"
        nbytes = man["bytes"]
        data = f"replicated {nbytes / MB:,.0f}MB"
        log(f"memory: {nbytes / MB:,.1f} MB ({man['n_docs']:,} docs, {man['replicas']} replicas, "
            f"{len(man['files'])} files) under {src}")
        base = {"section": "memory", "data": data, "nbytes": nbytes, "n_docs": man["n_docs"],
                "tokenizer": "plain"}
        scheds = []
        for s in args.memory_schedulers:
            if s == "cluster" and "auto" in scheds and nbytes >= (256 << 20):
                continue  # auto is the cluster already at this size
            scheds.append(s)
        for sched in scheds:
            out = work / f"mem-{mb:g}MB-index-{sched}"
            nw = 2 if sched == "cluster" else None
            row, r = bench.measure(dict(base, task="index", system=f"cutext cpu {sched}",
                                        notes=["files -> index on disk"]),
                                   cutext_index_run(src, out, backend="cpu", scheduler=sched, tok=tok_c,
                                                    args=args, n_workers=nw), repeats=1)
            if row["error"] or sched != scheds[0]:
                continue

            def load_fn(path=out):
                gc.collect()
                with RssWatch() as rw:
                    rss0 = RssWatch().sample() if rw.enabled else None
                    t = time.perf_counter()
                    idx = pipelines.BM25Index.load(path, backend="cpu")
                    sec = time.perf_counter() - t
                disk = sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())
                extra = {"rss_peak_mib": rw.peak_mib, "index_mib": round(disk / 2**20, 1)}
                if rw.peak is not None and rss0 is not None:
                    extra["rss_growth_mib"] = round((rw.peak - rss0) / 2**20, 1)
                    extra["rss_growth_x_index"] = round((rw.peak - rss0) / disk, 2)
                del idx
                gc.collect()
                return {"seconds": sec, "extra": extra}

            bench.measure(dict(base, task="load", system="BM25Index.load cpu",
                               notes=["RSS growth over the index's bytes on disk"]), load_fn, repeats=1)
            if not args.keep:
                shutil.rmtree(out, ignore_errors=True)
        if not args.keep:
            for sched in scheds:
                shutil.rmtree(work / f"mem-{mb:g}MB-index-{sched}", ignore_errors=True)


# ----------------------------------------------------------------------------- gpu section

def analyzer_index_rows(bench, gbase, data_dir, warm_dir, idx_root, be, gpu_label, args, blocksize, data, nbytes,
                        ndocs, notes, baseline, pools) -> None:
    """The index row of ``--analyzer`` (Anserini's DefaultEnglishAnalyzer: the word-break kernels on the device,
    possessive, lowercase, stopwords and Porter on the distinct terms) beside the default analyzer's row, after a
    warm-up of its own (the word-break kernels' compilation and code point table)."""
    abase = dict(gbase, tokenizer=args.analyzer)
    tok = {"analyzer": args.analyzer}
    bench.measure(dict(abase, task="warm-up", system=f"cutext {gpu_label} sync", data="20news 1 copy",
                       notes=["first build with the analyzer: word-break kernels compiled; excluded from other rows"]),
                  cutext_index_run(warm_dir, idx_root / "warm-analyzer", backend=be, scheduler="sync", tok=tok,
                                   args=args, blocksize=blocksize, mem_baseline=baseline, pools=pools), repeats=1)
    _log_gputext_profile(quiet=True)
    bench.measure(dict(abase, task="index", system=f"cutext {gpu_label} sync (1 GPU)", data=data, nbytes=nbytes,
                       n_docs=ndocs, notes=notes + [f"analyzer={args.analyzer}"]),
                  cutext_index_run(data_dir, idx_root / "full-analyzer", backend=be, scheduler="sync", tok=tok,
                                   args=args, blocksize=blocksize, mem_baseline=baseline, pools=pools))
    shutil.rmtree(idx_root / "full-analyzer", ignore_errors=True)
    _log_gputext_profile()


def section_gpu(bench: Bench, corpus: Corpus, args) -> None:
    be = args.gpu_backend
    nq, k = args.n_queries, args.k
    gpu_label = "gpu" if be == "gpu" else f"gpu-dry-run({be})"
    if be == "gpu":
        import importlib.util

        missing = [m for m in ("cudf", "cupy") if importlib.util.find_spec(m) is None]
        if missing:
            bench.fail({"section": "gpu", "task": "index", "system": "cutext gpu", "tokenizer": args.gpu_tokenizer,
                        "data": "-"}, f"the gpu section needs {', '.join(missing)} (pip install 'cutext[gpu]')")
            return
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    setting = args.gpu_tokenizer
    try:
        tok_c, tok_b = tokenizer_kwargs(setting)
    except Exception as exc:  # en-snowball needs bm25s's stopword list
        log(f"gpu: tokenizer setting {setting}: {type(exc).__name__}: {exc}")
        return

    # data: replicated real documents
    t = time.perf_counter()
    man = write_replicated(corpus, work / f"data-{args.gpu_gb:g}GB", args.gpu_gb * GB, args.file_mb * MB, args.seed)
    data_dir = work / f"data-{args.gpu_gb:g}GB"
    nbytes, ndocs = man["bytes"], man["n_docs"]
    data = f"replicated {nbytes / GB:.2f}GB"
    log(f"gpu: {nbytes / GB:.3f} GB of replicated real documents (20 Newsgroups x {man['replicas']} replicas, "
        f"each shuffled), {ndocs:,} docs in {len(man['files'])} lines files under {data_dir} "
        f"({'reused' if man['reused'] else f'written in {time.perf_counter() - t:.1f} s'})")
    t = time.perf_counter()
    sub = write_replicated(corpus, work / f"peer-{args.peer_mb:g}MB", args.peer_mb * MB, args.file_mb * MB,
                           args.seed, keep_texts=True)
    sub_dir = work / f"peer-{args.peer_mb:g}MB"
    sub_texts = sub.pop("texts")
    sub_bytes, sub_docs = sub["bytes"], sub["n_docs"]
    sub_data = f"subset {sub_bytes / MB:.0f}MB"
    log(f"gpu: peer subset {sub_bytes / MB:.1f} MB, {sub_docs:,} docs (the first documents of the same "
        f"replicated stream) under {sub_dir} ({time.perf_counter() - t:.1f} s)")
    queries = corpus.queries(nq, args.seed)
    idx_root = work / "indexes"
    idx_root.mkdir(exist_ok=True)

    baseline = GpuMemWatch.used_mib() if be == "gpu" else None
    if be == "gpu" and baseline is None:
        log("gpu: memory.used unavailable (no pynvml, no nvidia-smi); no peak memory numbers")
    pools = DevicePools(enabled=(be == "gpu") and not args.no_rmm_stats)
    blocksize = int(args.gpu_blocksize_mb * 2**20) if args.gpu_blocksize_mb else None
    mem_note = f"peak over a {baseline:,.0f} MiB baseline" if baseline is not None else None
    if baseline is not None:
        log(f"gpu: peak MiB = max of memory.used (summed over GPUs, polled every 0.1 s "
            f"{'through NVML in this process' if GpuMemWatch._handles() else 'by nvidia-smi'}) minus "
            f"{baseline:,.0f} MiB used before the section")
    gbase = {"section": "gpu", "tokenizer": setting}
    try:
        # warm-up: CUDA context, cudf/cupy kernel compilation (excluded from the other rows)
        warm_dir = work / "warm"
        if not (warm_dir / "part-00000.txt").is_file():
            write_lines(corpus.texts, warm_dir, 1)
        bench.measure(dict(gbase, task="warm-up", system=f"cutext {gpu_label} sync", data="20news 1 copy",
                           nbytes=corpus.total_bytes, n_docs=corpus.n_docs,
                           notes=["first run in the process: CUDA context + kernel compilation; "
                                  "excluded from other rows"]),
                      cutext_index_run(warm_dir, idx_root / "warm", backend=be, scheduler="sync", tok=tok_c,
                                       args=args, blocksize=blocksize, mem_baseline=baseline, pools=pools),
                      repeats=1)

        _log_gputext_profile(quiet=True)
        notes = ["files -> index on disk", "replicated real documents"]
        if blocksize:
            notes.append(f"blocksize {args.gpu_blocksize_mb:g} MiB")
        if mem_note:
            notes.append(mem_note)
        bench.measure(dict(gbase, task="index", system=f"cutext {gpu_label} sync (1 GPU)", data=data,
                           nbytes=nbytes, n_docs=ndocs, notes=notes),
                      cutext_index_run(data_dir, idx_root / "full", backend=be, scheduler="sync", tok=tok_c,
                                       args=args, blocksize=blocksize, mem_baseline=baseline, pools=pools))
        if not args.search_full:
            shutil.rmtree(idx_root / "full", ignore_errors=True)
        _log_gputext_profile()
        if args.analyzer:
            analyzer_index_rows(bench, gbase, data_dir, warm_dir, idx_root, be, gpu_label, args, blocksize, data,
                                nbytes, ndocs, notes, baseline, pools)
        if args.cluster:
            ngpu = len(bench.env.get("gpus") or []) or "?"
            bench.measure(dict(gbase, task="index", system=f"cutext {gpu_label} cluster ({ngpu} GPUs)", data=data,
                               nbytes=nbytes, n_docs=ndocs,
                               notes=notes + ["LocalCUDACluster; wall includes cluster start-up (see 'other')"]),
                          cutext_index_run(data_dir, idx_root / "full-cluster", backend=be, scheduler="cluster",
                                           tok=tok_c, args=args, blocksize=blocksize, mem_baseline=baseline,
                                           pools=pools))
            shutil.rmtree(idx_root / "full-cluster", ignore_errors=True)
        for n_gpus in args.client_gpus:
            for protocol in args.client_protocols:
                client_index_rows(bench, gbase, data_dir, warm_dir, idx_root, be, gpu_label, tok_c, args, blocksize,
                                  data, nbytes, ndocs, notes, baseline, n_gpus, protocol)

        # the subset: cutext GPU (its index serves the queries), then the CPU peers
        sbase = dict(gbase, data=sub_data, nbytes=sub_bytes, n_docs=sub_docs)
        sub_index = idx_root / "subset-gpu"
        row, _ = bench.measure(dict(sbase, task="index", system=f"cutext {gpu_label} sync (1 GPU)",
                                    notes=["files -> index on disk"] + ([mem_note] if mem_note else [])),
                               cutext_index_run(sub_dir, sub_index, backend=be, scheduler="sync", tok=tok_c,
                                                args=args, blocksize=blocksize, mem_baseline=baseline,
                                                pools=pools))
        gpu_results = {}
        if not row["error"] and (sub_index / "index.json").is_file():
            from cutext import pipelines

            try:
                t = time.perf_counter()
                idx = pipelines.BM25Index.load(sub_index, backend=be)
                load_s = time.perf_counter() - t
                t = time.perf_counter()
                idx.search(queries[:256], k=k, batch_size=min(256, max(args.gpu_batch_sizes)))
                log(f"gpu: index load {load_s:.2f} s, search warm-up (256 queries) {time.perf_counter() - t:.2f} s "
                    "(both excluded)")
                engines = [("gpu", bs) for bs in args.gpu_batch_sizes] if be == "gpu" else \
                    [("cpu", bs) for bs in args.gpu_batch_sizes]
                engines += [("sparse", max(args.gpu_batch_sizes))]
                gpu_results, postings = engine_search_rows(
                    bench, dict(sbase, task="search", n_queries=nq, nbytes=None), idx, load_s, queries, engines, be,
                    gpu_label, args, pools, baseline, mem_note)
                del idx
                gc.collect()
                pools.free()
                for n_shards in args.search_shards:
                    sharded_search_rows(bench, sbase, sub_index, be, gpu_label, queries, k,
                                        max(args.gpu_batch_sizes), n_shards, postings)
            except Exception as exc:
                bench.fail(dict(sbase, task="search", system=f"cutext {gpu_label} search", n_queries=nq),
                           f"{type(exc).__name__}: {exc}")
                traceback.print_exc(limit=6, file=sys.stdout)
            gc.collect()
            pools.free()

        ncpu = os.cpu_count() or 1
        cpu_bs = min(64 << 20, max(1 << 20, math.ceil(sub_bytes / ncpu)))
        bench.measure(dict(sbase, task="index", system=f"cutext cpu cluster ({ncpu} procs)",
                           notes=["files -> index on disk", f"LocalCluster; blocksize {cpu_bs / 2**20:.1f} MiB "
                                  "(>= 1 partition per process); wall includes cluster start-up"]),
                      cutext_index_run(sub_dir, idx_root / "subset-cpu", backend="cpu", scheduler="cluster",
                                       tok=tok_c, args=args, blocksize=cpu_bs))
        shutil.rmtree(idx_root / "subset-cpu", ignore_errors=True)

        try:
            import bm25s
        except ImportError as exc:
            bench.fail(dict(sbase, task="index", system="bm25s"), f"bm25s not installed ({exc})")
            return
        row, model = bench.measure(
            dict(sbase, task="index", system=f"bm25s {bm25s.__version__}",
                 notes=["in-memory texts; excludes reading files and writing the index",
                        "single-threaded (bm25s indexing has no thread option)"]),
            bm25s_index_run(sub_texts, tok_b, args))
        counts_note(bench, row)
        del sub_texts
        gc.collect()
        if model is None:
            return
        qbase = dict(sbase, task="search", n_queries=nq, nbytes=None)
        row, bm_out = bench.measure(dict(qbase, system=f"bm25s (numpy backend, default) {ncpu} threads",
                                         notes=[f"tokenize + retrieve top-{k}, n_threads={ncpu}"]),
                                    bm25s_search_run(model, queries, tok_b, k, n_threads=ncpu))
        mn = None
        if not args.no_numba and not bench.over_budget():
            try:
                t = time.perf_counter()
                mn = bm25s_numba_model(model)
                mn.retrieve(bm25s.tokenize(queries[:8], show_progress=False, **tok_b), k=k, n_threads=ncpu,
                            show_progress=False)
                warm = time.perf_counter() - t
                bench.measure(dict(qbase, system=f"bm25s (numba backend) {ncpu} threads",
                                   notes=[f"tokenize + retrieve top-{k}, n_threads={ncpu}",
                                          f"numba JIT warm-up {warm:.1f} s excluded"]),
                              bm25s_search_run(mn, queries, tok_b, k, n_threads=ncpu))
            except Exception as exc:
                bench.fail(dict(qbase, system="bm25s (numba backend)"), f"{type(exc).__name__}: {exc}")
        if bm_out is not None:
            for _, (row, res) in gpu_results.items():
                a = agreement(res, bm_out, nq, k, overlap=False)
                row["extra"].update(a)
                note = agreement_note(a, k)
                if note:
                    row["notes"].append(note + " (doc overlap not shown: replicas tie)")
        bench.save()
        if args.search_full and (idx_root / "full" / "index.json").is_file():
            full_search_rows(bench, dict(gbase, data=data, nbytes=None, n_docs=ndocs), idx_root / "full",
                             sub_index, mn, be, gpu_label, queries, tok_b, args, pools, baseline, mem_note)
    finally:
        if not args.keep:
            shutil.rmtree(idx_root, ignore_errors=True)
            shutil.rmtree(sub_dir, ignore_errors=True)  # the big data folder is kept for reuse
            sub_dir.with_name(sub_dir.name + ".manifest.json").unlink(missing_ok=True)


# ----------------------------------------------------------------------------- tables

def _f(v, spec):
    if v is None:
        return "-"
    return format(v, spec)


def _secs(v):
    if v is None:
        return "-"
    return f"{v:.3g}" if v < 100 else f"{v:.0f}"


def print_table(rows: list[dict], section: str) -> None:
    rows = [r for r in rows if r.get("section") == section]
    if not rows:
        return
    cols = [("task", lambda r: r["task"]), ("system", lambda r: r["system"]),
            ("tokenizer", lambda r: r["tokenizer"] or "-"), ("data", lambda r: r["data"]),
            ("n", lambda r: str(r["n"])), ("time s", lambda r: _secs(r["seconds"])),
            ("MB/s", lambda r: _f(r["mb_s"], ".1f"))]
    if section == "gpu":
        cols += [("GB/s", lambda r: _f(r["gb_s"], ".3f"))]
    cols += [("docs/s", lambda r: _f(r["docs_s"], ",.0f")), ("queries/s", lambda r: _f(r["q_s"], ",.0f"))]
    if section == "gpu":
        cols += [("peak MiB", lambda r: _f(r["peak_mib"], ",.0f"))]
    cols += [("RSS peak MiB", lambda r: _f((r.get("extra") or {}).get("rss_peak_mib"), ",.0f")),
             ("RSS/input", lambda r: _f((r.get("extra") or {}).get("rss_peak_x_input"), ".2f"))]
    if section == "memory":
        cols += [("index MiB", lambda r: _f((r.get("extra") or {}).get("index_mib"), ",.0f")),
                 ("load RSS growth MiB", lambda r: _f((r.get("extra") or {}).get("rss_growth_mib"), ",.0f")),
                 ("growth/index", lambda r: _f((r.get("extra") or {}).get("rss_growth_x_index"), ".2f"))]
    cols += [("notes", lambda r: error_label(r) if r.get("error") else "; ".join(r["notes"]))]
    _print(cols, rows, f"== {section} section (medians of repeats; n = repeats done)")
    srows = [r for r in rows if r.get("stages")]
    if srows:
        names = []
        for r in srows:
            for k in r["stages"]:
                if k not in names and k != "other":
                    names.append(k)
        scols = [("system", lambda r: r["system"]), ("tokenizer", lambda r: r["tokenizer"]),
                 ("data", lambda r: r["data"])]
        scols += [(k, (lambda k: lambda r: _secs(r["stages"].get(k)))(k)) for k in names]
        scols += [("other", lambda r: _secs(r["stages"].get("other"))), ("wall", lambda r: _secs(r["seconds"]))]
        if section == "gpu":
            scols += [("rmm peak MiB", lambda r: _f(r["extra"].get("rmm_peak_mib"), ",.0f")),
                      ("cupy pool MiB", lambda r: _f(r["extra"].get("cupy_pool_mib"), ",.0f"))]
        scols += [("tokens", lambda r: _f(r["counts"].get("n_tokens"), ",")),
                  ("terms", lambda r: _f(r["counts"].get("n_terms"), ",")),
                  ("postings", lambda r: _f(r["counts"].get("n_postings"), ","))]
        _print(scols, srows, f"== {section}: cutext per-stage seconds (medians; other = wall - sum of stages)")


def _print(cols, rows, title):
    cells = [[c[1](r) for c in cols] for r in rows]
    widths = [max(len(c[0]), *(len(x[i]) for x in cells)) for i, c in enumerate(cols)]
    print("\n" + title, flush=True)
    print("  ".join(c[0].ljust(w) for c, w in zip(cols, widths)).rstrip())
    print("  ".join("-" * w for w in widths))
    for x in cells:
        print("  ".join(v.ljust(w) for v, w in zip(x, widths)).rstrip())
    sys.stdout.flush()


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
