#!/usr/bin/env python
"""n-gram LM query throughput and memory: cutext (CPU numba twin, GPU CUDA trie) against KenLM.

Model: ``arpa/lmplz/abc.o3.arpa.gz`` of the shared data (KenLM lmplz 3-gram of the NLTK ABC corpus,
841,852 n-grams; ``--model`` takes any ARPA file). Queries: the 664 held-out sentences
(``heldout.inaugural2001-2009.tok.txt``, 14,458 scored tokens with ``</s>``), replicated to the asked
number of queries. A *query* is one n-gram probability with back-off (gLM's definition): every scored
token of a sentence, ``</s>`` included, in the context of its predecessors (``<s>`` first).

Rows
----
load          read ARPA + build trie (cutext) / ``kenlm.Model(arpa)`` (KenLM probing hash)
memory        trie bytes per n-gram (cutext: exact array sizes) / KenLM: growth of the resident set of a
              fresh process when it loads the model (probing, the kenlm module's only ARPA load path;
              includes its vocabulary hash table), divided by the n-gram count
score         queries/s; cutext CPU = numba kernel over sentences (prange, all cores; word ids
              ready, as gLM times); cutext CPU end to end = ``NGramModel.score`` from strings;
              KenLM = ``Model.score(sentence)`` in a Python loop (includes the Python call per sentence)
distribution  outputs/s of full next-word distributions (V floats per context, the gLM paper's query);
              KenLM = ``BaseScore`` for every word of the vocabulary from the context's state (Python loop)
gpu           (``--gpu``) the same on the device: trie and word ids resident (one copy), kernel time
              measured with CUDA events; ``--gpu-queries`` (default 100 M) queries; distributions for
              ``--gpu-contexts`` contexts; paper targets: gLM 65 M queries/s (Titan X), issue target
              >= 650 M/s (H200); the gLM paper (Li): 3.6 G outputs/s (K80)
end to end    ``pipelines.run("ngram", file, format="lines")`` from a text file on local disk (the held-out
              sentences replicated to ``--e2e-queries`` queries, written to ``--tmp``) to a finished output
              directory: read (host), split + word ids + score + per-document sums (device, GPU rows;
              numba / pyarrow, CPU row), write Parquet; queries/s = scored tokens / wall seconds, with
              the per-stage seconds. Target: >= 300 M queries/s on one H200.
              ``--cluster-gpus 1 2``: the same file on a LocalCUDACluster of 1 and 2 workers (``client=``).

Every number is the median of ``--repeats`` runs. ``--json PATH`` writes the rows.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def data_dir(arg):
    if arg:
        return Path(arg)
    if os.environ.get("CUTEXT_DATA"):
        return Path(os.environ["CUTEXT_DATA"])
    return Path(__file__).resolve().parents[2] / "shared" / "data"


def environment():
    env = {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as fh:
            env["cpu_model"] = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=False)
        env["gpus"] = [g.strip() for g in out.stdout.splitlines() if g.strip()]
    except (OSError, subprocess.SubprocessError):
        env["gpus"] = []
    from importlib.metadata import PackageNotFoundError, version

    for d in ("cutext", "numpy", "numba", "pyarrow", "kenlm", "cupy-cuda13x", "cupy-cuda12x"):
        try:
            env[d] = version(d)
        except PackageNotFoundError:
            pass
    return env


def median_time(fn, repeats, sync=None):
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), ts


def kenlm_memory(path) -> int | None:
    """Resident-set growth (bytes) of a fresh Python process loading the model with kenlm."""
    code = ("import kenlm,sys\n"
            "def rss():\n"
            "    return int([l for l in open('/proc/self/status') if l.startswith('VmRSS')][0].split()[1])*1024\n"
            "a=rss(); m=kenlm.Model(sys.argv[1]); b=rss(); print(b-a)\n")
    try:
        out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=900,
                             check=False)
        return int(out.stdout.strip().splitlines()[-1])
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


def replicate(sentences, n_queries):
    per = sum(len(s.split()) + 1 for s in sentences)
    reps = max(1, round(n_queries / per))
    return sentences * reps, per * reps


_FILES: dict = {}


def text_file(sentences, n_queries, folder):
    """A lines file of the sentences replicated to about ``n_queries`` queries (written once per size)."""
    import tempfile

    reps_sents, nq = replicate(sentences, n_queries)
    key = (len(reps_sents), folder)
    if key not in _FILES:
        d = Path(tempfile.mkdtemp(prefix="ngram-e2e-", dir=folder))
        path = d / "text.txt"
        block = ("\n".join(sentences) + "\n").encode("utf-8")
        with open(path, "wb") as fh:
            for _ in range(len(reps_sents) // len(sentences)):
                fh.write(block)
        _FILES[key] = (path, nq)
    return _FILES[key]


def end_to_end(add, model, sentences, n_queries, args, system, client=None):
    """``pipelines.run("ngram", file)`` from a text file to a finished output directory (median of repeats)."""
    import shutil
    import tempfile

    from cutext import pipelines

    path, nq = text_file(sentences, n_queries, args.tmp)
    size = path.stat().st_size
    out_root = Path(tempfile.mkdtemp(prefix="ngram-e2e-out-", dir=args.tmp))
    runs = []
    for k in range(args.repeats + 1):  # the first run warms the page cache and the kernels
        out = out_root / f"run{k}"
        t0 = time.perf_counter()
        r = pipelines.run("ngram", path, out=out, model=model, format="lines", blocksize=args.blocksize,
                          progress=False, client=client)
        runs.append((time.perf_counter() - t0, r))
        shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(out_root, ignore_errors=True)
    t, r = sorted(runs[1:], key=lambda x: x[0])[len(runs[1:]) // 2]
    nq = r.counts["n_tokens"]
    add(row="end to end", system=system, queries=nq, seconds=round(t, 4), queries_per_s=round(nq / t),
        bytes=size, mb_per_s=round(size / t / 1e6, 1),
        detail=json.dumps({"timings": {k: round(v, 3) for k, v in r.timings.items()},
                           "docs": r.counts["n_docs"], "pieces": r.counts["partitions"],
                           "workers": r.counts.get("workers"), "parts": r.counts.get("parts")}))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=None, help="shared data folder (default $CUTEXT_DATA or ../shared/data)")
    ap.add_argument("--model", default=None, help="ARPA model (default arpa/lmplz/abc.o3.arpa.gz)")
    ap.add_argument("--heldout", default=None, help="sentences to score, one per line")
    ap.add_argument("--cpu-queries", type=float, default=2e6, help="queries of the CPU score rows")
    ap.add_argument("--kenlm-queries", type=float, default=1e6, help="queries of the KenLM score row")
    ap.add_argument("--cpu-contexts", type=int, default=2000, help="contexts of the CPU distribution row")
    ap.add_argument("--kenlm-contexts", type=int, default=20, help="contexts of the KenLM distribution row")
    ap.add_argument("--gpu", action="store_true", help="also the GPU rows (needs cupy and a device)")
    ap.add_argument("--no-cpu", action="store_true", help="skip the CPU and KenLM rows")
    ap.add_argument("--gpu-queries", type=float, default=1e8)
    ap.add_argument("--gpu-contexts", type=int, default=20000)
    ap.add_argument("--e2e-queries", type=float, default=1e8, help="queries of the GPU end-to-end file rows")
    ap.add_argument("--cpu-e2e-queries", type=float, default=2e6, help="queries of the CPU end-to-end file row")
    ap.add_argument("--cluster-gpus", type=int, nargs="*", default=[],
                    help="also the end-to-end file row on a LocalCUDACluster of each of these worker counts")
    ap.add_argument("--blocksize", type=int, default=None,
                    help="bytes per piece of the end-to-end rows (default: the pipeline's, 256 MiB for a GPU model)")
    ap.add_argument("--tmp", default=None, help="folder for the end-to-end text files (default: the system temp)")
    ap.add_argument("--build-binary", default=None,
                    help="KenLM's build_binary executable: adds the sizes of its probing and trie binary files")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None, help="write the rows and environment here")
    return ap.parse_args(argv)


def load_rows(add, args, model_path, kenlm):
    """The load and memory rows: ``(the CPU model, KenLM's model or None, n-grams)``."""
    from cutext.pipelines.ngram import NGramModel

    km = None
    t0 = time.perf_counter()
    cpu = NGramModel.load(model_path, backend="cpu")
    n_ngrams = cpu.host_trie.n_ngrams
    add(row="load", system="cutext", seconds=round(time.perf_counter() - t0, 3), n_ngrams=n_ngrams,
        detail=json.dumps({k: round(v, 3) for k, v in cpu.load_seconds.items()}))
    mem = cpu.memory()
    add(row="memory", system="cutext trie", bytes=mem["total"], bytes_per_ngram=round(mem["bytes_per_ngram"], 2),
        detail=f"+ vocabulary strings {mem['vocab_bytes']} B ({mem['vocab_bytes'] / n_ngrams:.2f} B/n-gram)")
    both = mem["total"] + mem["vocab_bytes"]
    add(row="memory", system="cutext trie + vocabulary strings", bytes=both, bytes_per_ngram=round(both / n_ngrams, 2))
    if kenlm is not None and not args.no_cpu:
        t0 = time.perf_counter()
        km = kenlm.Model(str(model_path))
        add(row="load", system="KenLM probing (ARPA)", seconds=round(time.perf_counter() - t0, 3), n_ngrams=n_ngrams)
        rss = kenlm_memory(model_path)
        if rss:
            add(row="memory", system="KenLM probing (RSS growth)", bytes=rss, bytes_per_ngram=round(rss / n_ngrams, 2))
    return cpu, km, n_ngrams


def binary_rows(add, args, model_path, n_ngrams) -> None:
    """The sizes of KenLM's probing and trie binary files (``--build-binary``)."""
    import gzip
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        arpa = Path(tmp) / "model.arpa"
        with gzip.open(model_path) if model_path.suffix == ".gz" else open(model_path, "rb") as src, \
                open(arpa, "wb") as dst:
            shutil.copyfileobj(src, dst)
        for kind in ("probing", "trie"):
            out = Path(tmp) / f"model.{kind}.bin"
            r = subprocess.run([args.build_binary, kind, str(arpa), str(out)], capture_output=True, text=True,
                               check=False)
            if r.returncode == 0:
                size = out.stat().st_size
                add(row="memory", system=f"KenLM {kind} binary file (incl. vocabulary)", bytes=size,
                    bytes_per_ngram=round(size / n_ngrams, 2))
            else:
                log(f"build_binary {kind} failed: {r.stderr[-300:]}")


def cpu_rows(add, args, cpu, km, kenlm, sentences) -> None:
    """The CPU kernel, end-to-end and distribution rows, and KenLM's beside them."""
    from cutext.kernels import trie as tk

    sents, nq = replicate(sentences, args.cpu_queries)
    ids, offsets = cpu.encode(sents)
    tk.score_tokens(cpu.trie, ids[:100], offsets[:2], bos_id=cpu.bos_id, eos_id=cpu.eos_id)  # compile
    t, _ = median_time(lambda: tk.score_tokens(cpu.trie, ids, offsets, bos_id=cpu.bos_id, eos_id=cpu.eos_id),
                       args.repeats)
    add(row="score", system=f"cutext CPU kernel ({os.cpu_count()} cores)", queries=nq, seconds=round(t, 4),
        queries_per_s=round(nq / t))
    t, _ = median_time(lambda: cpu.score(sents), args.repeats)
    add(row="score", system="cutext CPU end to end (strings)", queries=nq, seconds=round(t, 4),
        queries_per_s=round(nq / t))
    end_to_end(add, cpu, sentences, args.cpu_e2e_queries, args, f"cutext CPU end to end from a text file "
               f"({os.cpu_count()} cores)")
    if kenlm is not None:
        ks, kq = replicate(sentences, args.kenlm_queries)

        def run_kenlm():
            score = km.score
            for s in ks:
                score(s)

        t, _ = median_time(run_kenlm, args.repeats)
        add(row="score", system="KenLM Model.score (Python loop, 1 core)", queries=kq, seconds=round(t, 4),
            queries_per_s=round(kq / t))
    ctx = [" ".join(s.split()[: max(0, len(s.split()) // 2)]) for s in sentences]
    ctx = (ctx * (args.cpu_contexts // len(ctx) + 1))[: args.cpu_contexts]
    ce = cpu.context_entries(ctx, bos=True)
    tk.fill_distribution(cpu.trie, ce[:2], cpu.order)
    t, _ = median_time(lambda: tk.fill_distribution(cpu.trie, ce, cpu.order), args.repeats)
    outs = len(ctx) * cpu.vocab_size
    add(row="distribution", system=f"cutext CPU kernel ({os.cpu_count()} cores)", contexts=len(ctx),
        outputs=outs, seconds=round(t, 4), outputs_per_s=round(outs / t))
    if kenlm is not None:
        vocab = cpu.vocab.to_pylist()
        kc = ctx[: args.kenlm_contexts]

        def run_kenlm_dist():
            for c in kc:
                st = kenlm.State()
                km.BeginSentenceWrite(st)
                for w in c.split():
                    nx = kenlm.State()
                    km.BaseScore(st, w, nx)
                    st = nx
                out = kenlm.State()
                for w in vocab:
                    km.BaseScore(st, w, out)

        t, _ = median_time(run_kenlm_dist, args.repeats)
        outs = len(kc) * len(vocab)
        add(row="distribution", system="KenLM BaseScore over the vocabulary (Python loop)", contexts=len(kc),
            outputs=outs, seconds=round(t, 4), outputs_per_s=round(outs / t))


def gpu_rows(add, args, env, cpu, model_path, sentences, n_ngrams) -> None:
    """The GPU load, kernel, end-to-end and distribution rows, and the check of its scores against the CPU's."""
    import cupy

    from cutext.kernels import trie as tk
    from cutext.pipelines.ngram import NGramModel

    gpu = NGramModel.load(model_path, backend="gpu")
    add(row="load", system="cutext GPU", seconds=round(sum(gpu.load_seconds.values()), 3), n_ngrams=n_ngrams,
        detail=json.dumps({k: round(v, 3) for k, v in gpu.load_seconds.items()}))
    base_ids, base_off = cpu.encode(sentences)
    per = int(base_off[-1]) + len(sentences)
    reps = max(1, round(args.gpu_queries / per))
    n_sent = len(sentences) * reps
    ids = cupy.tile(cupy.asarray(base_ids), reps)
    lens = cupy.tile(cupy.asarray(np.diff(base_off)), reps)
    off = cupy.zeros(n_sent + 1, cupy.int64)
    cupy.cumsum(lens, out=off[1:])
    nq = per * reps
    tk.score_tokens(gpu.trie, ids[:100], off[:2], bos_id=gpu.bos_id, eos_id=gpu.eos_id)  # compile
    cupy.cuda.Device().synchronize()

    def gpu_score():
        return tk.score_tokens(gpu.trie, ids, off, bos_id=gpu.bos_id, eos_id=gpu.eos_id)

    times = []
    for _ in range(args.repeats):
        a, b = cupy.cuda.Event(), cupy.cuda.Event()
        a.record()
        res = gpu_score()
        b.record()
        b.synchronize()
        times.append(cupy.cuda.get_elapsed_time(a, b) / 1e3)
        del res
    t = statistics.median(times)
    name = env["gpus"][0] if env.get("gpus") else "GPU"
    add(row="score", system=f"cutext GPU kernel ({name})", queries=nq, seconds=round(t, 5),
        queries_per_s=round(nq / t), detail="vs gLM 65 M/s (Titan X); target >= 650 M/s (H200)")
    ssents, sq = replicate(sentences, args.cpu_queries)
    gpu.score(ssents[:10])
    t, _ = median_time(lambda: gpu.score(ssents), args.repeats)
    add(row="score", system=f"cutext GPU end to end (strings, {name})", queries=sq, seconds=round(t, 4),
        queries_per_s=round(sq / t), detail="list of str -> pyarrow -> device; split + ids on the device; "
                                            "per-token results back to the host")
    end_to_end(add, gpu, sentences, args.e2e_queries, args, f"cutext GPU end to end from a text file ({name})")
    for n in args.cluster_gpus:
        from distributed import Client

        from cutext.pipelines import local_gpu_cluster

        with local_gpu_cluster(n) as cluster, Client(cluster) as client:
            end_to_end(add, gpu, sentences, args.e2e_queries, args,
                       f"cutext GPU end to end from a text file, LocalCUDACluster {n} GPU(s)", client=client)
    check = gpu_score()[0][: int(base_off[-1]) + len(sentences)].get()
    ref = tk.score_tokens(cpu.trie, base_ids, base_off, bos_id=cpu.bos_id, eos_id=cpu.eos_id)[0]
    add(row="check", system="GPU == CPU on the held-out tokens", equal=bool(np.array_equal(check, ref)))
    ids = off = lens = None  # the device arrays freed before the distribution rows
    ctx = [" ".join(s.split()[: max(0, len(s.split()) // 2)]) for s in sentences]
    ctx = (ctx * (args.gpu_contexts // len(ctx) + 1))[: args.gpu_contexts]
    ce = gpu.context_entries(ctx, bos=True)
    out = cupy.empty((len(ctx), gpu.vocab_size), cupy.float32)
    tk.fill_distribution(gpu.trie, ce, gpu.order, out=out)
    times = []
    for _ in range(args.repeats):
        a, b = cupy.cuda.Event(), cupy.cuda.Event()
        a.record()
        tk.fill_distribution(gpu.trie, ce, gpu.order, out=out)
        b.record()
        b.synchronize()
        times.append(cupy.cuda.get_elapsed_time(a, b) / 1e3)
    t = statistics.median(times)
    outs = len(ctx) * gpu.vocab_size
    add(row="distribution", system=f"cutext GPU kernel ({name})", contexts=len(ctx), outputs=outs,
        seconds=round(t, 5), outputs_per_s=round(outs / t), detail="vs the gLM paper (Li): 3.6 G outputs/s (K80)")


def print_rows(rows) -> None:
    print()
    print(f"{'row':<13} {'system':<52} {'value':>18}  unit")
    for r in rows:
        if "queries_per_s" in r:
            v, u = f"{r['queries_per_s'] / 1e6:,.2f}", "M queries/s"
        elif "outputs_per_s" in r:
            v, u = f"{r['outputs_per_s'] / 1e6:,.1f}", "M outputs/s"
        elif "bytes_per_ngram" in r:
            v, u = f"{r['bytes_per_ngram']:.2f}", "bytes/n-gram"
        elif "seconds" in r:
            v, u = f"{r['seconds']:.3f}", "s"
        else:
            v, u = str(r.get("equal")), ""
        print(f"{r['row']:<13} {r['system']:<52} {v:>18}  {u}")


def main(argv=None):
    args = parse_args(argv)
    d = data_dir(args.data)
    model_path = Path(args.model) if args.model else d / "arpa" / "lmplz" / "abc.o3.arpa.gz"
    held_path = Path(args.heldout) if args.heldout else d / "arpa" / "lmplz" / "heldout.inaugural2001-2009.tok.txt"
    sentences = held_path.read_text(encoding="utf-8").splitlines()
    env = environment()
    print(json.dumps(env, indent=2))
    rows = []

    def add(**row):
        rows.append(row)
        log(" | ".join(f"{k}={v}" for k, v in row.items()))

    try:
        import kenlm
    except ImportError:
        kenlm = None
        log("kenlm is not installed: KenLM rows skipped (pip install kenlm)")

    cpu, km, n_ngrams = load_rows(add, args, model_path, kenlm)
    if args.build_binary:
        binary_rows(add, args, model_path, n_ngrams)
    if not args.no_cpu:
        cpu_rows(add, args, cpu, km, kenlm, sentences)
    if args.gpu:
        gpu_rows(add, args, env, cpu, model_path, sentences, n_ngrams)
    print_rows(rows)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"environment": env, "model": str(model_path), "rows": rows},
                                              indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
