#!/usr/bin/env python
"""Online document-stream clustering (Szasz and Samet): latency against the number of clusters, throughput, quality.

Documents: all of 20 Newsgroups (18,846 posts) and Reuters-21578 (19,043 stories with a body), tokenized
together (lowercase, Lucene stopwords, tokens of 2+ characters), TF-ICF top-``--top-k`` term vectors with
the pool itself as IDF reference.  Larger streams *replicate* these real documents, each replica in its own
shuffled order (said in the output).

Sections
--------
latency (paper Fig. 3)
    For every ``--clusters`` M: a cluster state of M clusters (M replicated documents, one cluster each), then
    the next ``--latency-docs`` documents of another shuffle are clustered one after the other (T =
    ``--threshold``); latency = wall time / documents (the paper's measure: time N documents, divide).
    Systems: cutext CPU reference (Alg. 1 with the inverted index, numba; up to ``--cpu-max-clusters``),
    the ELLPACK CPU twin (every row; up to ``--twin-max-clusters``), cutext GPU for each of ``--passes``
    (``all-rows``: the ELLPACK kernels score every cluster, the paper's design; ``candidates``: only the
    clusters that share a term, through the inverted index on the device) and each of ``--batch-sizes``
    (1 = one pass per document with the update buffer, >1 = exact micro-batches), and river's TextClust
    (PyPI; pure Python) fed the same tokens, timed in windows as its micro-clusters grow (radius = 1 - T,
    no fading, no merging).  ``postings/doc``: mean posting entries of a timed document's terms at the
    start (what the candidate pass walks; the clusters it scores are at most that many).
throughput
    A stream of ``--stream-docs`` documents (replicated, shuffled), from zero clusters, T = ``--threshold``;
    documents/s and the final number of clusters.  GPU rows (each of ``--passes`` and ``--batch-sizes``)
    with ``--gpu``; the CPU reference on ``--cpu-stream-docs`` documents.
quality
    NMI and purity against the 20 Newsgroups labels (all posts, one fixed shuffle) for ``--thresholds``.

Every timing is the median of ``--repeats`` runs.  ``--json PATH`` writes the environment and all rows.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

T0 = time.monotonic()


def log(msg):
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def _int_list(s):
    return [int(float(x)) for x in s.split(",") if x]


def _float_list(s):
    return [float(x) for x in s.split(",") if x]


PASSES = ("all-rows", "candidates", "per-doc")


def _pass_list(s):
    out = [x for x in s.split(",") if x]
    bad = [x for x in out if x not in PASSES]
    if bad or not out:
        raise argparse.ArgumentTypeError(f"passes are {', '.join(PASSES)}, got {s!r}")
    return out


# ----------------------------------------------------------------------------- data

def load_pool(data_dir, top_k):
    """Term vectors, labels (20news group or ''), token lists of the pooled real documents."""
    import pandas as pd

    from cutext.pipelines import datasets
    from cutext.pipelines.cluster import corpus_counts
    from cutext.stages.text.termvec import term_vectors
    from cutext.stages.text.tokenize import TokenizerConfig

    news = datasets.load_20newsgroups(Path(data_dir) / "corpora" / "20news-bydate.tar.gz")
    reut = datasets.load_reuters21578(Path(data_dir) / "corpora" / "reuters21578.tar.gz", with_body_only=True)
    docs = pd.concat([news[["source_id", "text"]].assign(source_id="20news/" + news["source_id"]),
                      reut[["source_id", "text"]].assign(source_id="reuters/" + reut["source_id"])],
                     ignore_index=True)
    labels = np.concatenate([news["group"].to_numpy(), np.full(len(reut), "", object)])
    cfg = TokenizerConfig.make(stopwords="lucene", min_len=2)
    with tempfile.TemporaryDirectory() as tmp:
        p = datasets.write_jsonl(docs, Path(tmp) / "pool.jsonl")
        cc = corpus_counts(str(p), cfg, "cpu")
    df = np.bincount(cc["term_id"], minlength=len(cc["vocab"]) + 1)
    tv = term_vectors(cc["doc_id"], cc["term_id"], cc["tf"], cc["n_docs"], top_k, df=df, n_ref=cc["n_docs"])
    return tv, labels, docs["text"].tolist(), cfg, len(news)


def replicated(n_pool, n, seed):
    """Indices of n documents: replicas of 0..n_pool-1, each replica in its own shuffled order."""
    rng = np.random.default_rng(seed)
    reps = -(-n // n_pool)
    return np.concatenate([rng.permutation(n_pool) for _ in range(reps)])[:n]


def state_of(tv, rows, K):
    from cutext.stages.engines.streamcluster import ClusterState

    st = ClusterState(K, max(1024, len(rows) + 100_000))
    m = len(rows)
    st.idx[:m] = tv.idx[rows]
    st.w[:m] = tv.w[rows]
    st.length[:m] = tv.length[rows]
    st.norm[:m] = tv.norm[rows]
    st.size[:m] = 1
    st.n = m
    return st


# ----------------------------------------------------------------------------- sections

def latency_rows(args, tv, texts, cfg, gpu_ok):

    K = args.top_k
    rows = []
    n_pool = len(tv)
    systems = [("cutext cpu reference", "cpu", "reference", 1, False, args.cpu_max_clusters, args.cpu_latency_docs),
               ("cutext cpu ellpack twin", "cpu", "ellpack", 1, False, args.twin_max_clusters,
                args.cpu_latency_docs)]
    if gpu_ok:
        systems += gpu_systems(args, max(args.clusters), args.latency_docs)
    for M in args.clusters:
        base = replicated(n_pool, M, seed=1)
        timed = replicated(n_pool, args.latency_docs, seed=2)
        for name, backend, method, batch, cand, max_m, n_docs in systems:
            if M > max_m:
                continue
            docs = tv.take(timed[:n_docs])
            times, clusters_after, restarts, walk = [], None, 0, None
            for _ in range(args.repeats):
                st = state_of(tv, base, K)
                sc = clusterer(name, args.threshold, K, backend=backend, method=method, batch_size=batch,
                                     candidates=cand, _state=st)
                if cand is True and walk is None:
                    walk = float(sum(sh.index.walk(docs.idx, docs.length) for sh in sc.engine.shards).mean())
                if backend == "gpu":
                    import cupy

                    cupy.cuda.Device().synchronize()
                if n_docs >= 20:  # warm-up (numba compile, CUDA module load) outside the timing
                    sc.partial_fit(docs.take(slice(0, 2)))
                    docs_t = docs.take(slice(2, n_docs))
                else:
                    docs_t = docs
                t = time.perf_counter()
                sc.partial_fit(docs_t)
                if backend == "gpu":
                    cupy.cuda.Device().synchronize()
                times.append((time.perf_counter() - t) / len(docs_t))
                clusters_after = sc.n_clusters
                restarts = getattr(sc.engine, "restarts", 0)
            row = {"section": "latency", "system": name, "clusters": M, "docs_timed": len(docs_t),
                   "ms_per_doc": 1e3 * statistics.median(times), "clusters_after": clusters_after,
                   "restarts": restarts, "repeats": args.repeats, "postings_per_doc": walk}
            log(f"latency {name} M={M:,}: {row['ms_per_doc']:.3f} ms/doc")
            rows.append(row)
    rows += river_rows(args, tv, texts, cfg)
    return rows


def river_rows(args, tv, texts, cfg):
    try:
        from river import cluster as rcluster
    except ImportError:
        log("river is not installed: TextClust rows skipped (pip install river)")
        return [{"section": "latency", "system": "river TextClust", "error": "river not importable"}]
    from collections import Counter

    from cutext.stages.text.tokenize import tokenize_texts

    order = replicated(len(texts), args.river_docs, seed=2)
    toks = tokenize_texts([texts[i] for i in order], cfg)
    model = rcluster.TextClust(radius=1.0 - args.threshold, fading_factor=0.0, tgap=10**12, term_fading=False,
                               real_time_fading=False, auto_r=False, auto_merge=False)
    rows, window = [], args.river_window
    t_start = time.perf_counter()
    for a in range(0, len(toks), window):
        n_before = len(model.micro_clusters)
        t = time.perf_counter()
        for ts in toks[a:a + window]:
            model.learn_one(dict(Counter(ts)))
        dt = (time.perf_counter() - t) / len(toks[a:a + window])
        rows.append({"section": "latency", "system": "river TextClust", "clusters": n_before,
                     "docs_timed": len(toks[a:a + window]), "ms_per_doc": 1e3 * dt,
                     "clusters_after": len(model.micro_clusters), "repeats": 1})
        log(f"latency river TextClust at {n_before:,} micro-clusters: {1e3 * dt:.2f} ms/doc")
        if time.perf_counter() - t_start > args.river_seconds:
            break
    return rows


def gpu_systems(args, max_m, n_docs):
    """(name, backend, method, batch, candidates, largest M, documents) of the GPU rows."""
    out = []
    for p in args.passes:
        for b in args.batch_sizes:
            if p == "per-doc" and b != 1:
                continue
            out.append((f"cutext gpu {p} batch={b}", "gpu", "ellpack", b, p == "candidates", max_m, n_docs))
    return out


def clusterer(name, *args, **kw):
    """The StreamClusterer of a row; a ``per-doc`` row scores every row in a pass a document (not one launch)."""
    from cutext.stages.engines.streamcluster import StreamClusterer

    sc = StreamClusterer(*args, **kw)
    if "per-doc" in name:
        sc.engine.sequential = False
    return sc


def throughput_rows(args, tv, gpu_ok):
    K = args.top_k
    rows = []
    systems = [("cutext cpu reference", "cpu", "reference", 1, False, 0, args.cpu_stream_docs)]
    if gpu_ok:
        systems += gpu_systems(args, 0, args.stream_docs)
    for name, backend, method, batch, cand, _, n in systems:
        if n <= 0:
            continue
        docs = tv.take(replicated(len(tv), n, seed=3))
        times, sc = [], None
        for _ in range(args.throughput_repeats):
            sc = clusterer(name, args.threshold, K, backend=backend, method=method, batch_size=batch, candidates=cand)
            sc.partial_fit(docs.take(slice(0, 2)))  # warm-up: compile / load kernels
            sc = clusterer(name, args.threshold, K, backend=backend, method=method, batch_size=batch, candidates=cand)
            t = time.perf_counter()
            for a in range(0, n, 65536):
                sc.partial_fit(docs.take(slice(a, min(a + 65536, n))))
            times.append(time.perf_counter() - t)
        s = statistics.median(times)
        row = {"section": "throughput", "system": name, "docs": n, "seconds": s, "docs_per_s": n / s,
               "ms_per_doc": 1e3 * s / n, "clusters_after": sc.n_clusters,
               "restarts": getattr(sc.engine, "restarts", 0), "repeats": args.throughput_repeats,
               "stream": f"{len(tv):,} real documents replicated, each replica shuffled"}
        log(f"throughput {name}: {n:,} docs in {s:.1f} s ({n / s:,.0f} docs/s), {sc.n_clusters:,} clusters")
        rows.append(row)
    return rows


def quality_rows(args, tv, labels, n_news, gpu_ok):
    from cutext.pipelines.cluster import nmi, purity
    from cutext.stages.engines.streamcluster import StreamClusterer

    order = np.random.default_rng(4).permutation(n_news)
    docs = tv.take(order)
    lab = labels[order]
    rows = []
    for T in args.thresholds:
        backend = "gpu" if gpu_ok else "cpu"
        sc = StreamClusterer(T, args.top_k, backend=backend, batch_size=32 if gpu_ok else 1)
        t = time.perf_counter()
        a = sc.partial_fit(docs)
        dt = time.perf_counter() - t
        cl = a["cluster_id"].to_numpy()
        shuffled = np.random.default_rng(0).permutation(cl)
        rows.append({"section": "quality", "system": f"cutext {backend}", "threshold": T, "docs": len(docs),
                     "clusters_after": sc.n_clusters, "nmi": nmi(lab, cl), "purity": purity(lab, cl),
                     "nmi_shuffled": nmi(lab, shuffled), "purity_shuffled": purity(lab, shuffled), "seconds": dt})
        log(f"quality T={T}: NMI {rows[-1]['nmi']:.4f} purity {rows[-1]['purity']:.4f}, {sc.n_clusters:,} clusters")
    return rows


# ----------------------------------------------------------------------------- output

def print_tables(rows):
    lat = [r for r in rows if r["section"] == "latency" and "ms_per_doc" in r]
    if lat:
        print("\nLatency per document against the number of clusters (Szasz and Samet Fig. 3), T={}, top_k={}".format(
            ENV["threshold"], ENV["top_k"]))
        print(f"{'system':38s} {'clusters':>10s} {'ms/doc':>10s} {'docs timed':>10s} {'clusters after':>15s} "
              f"{'postings/doc':>12s}")
        for r in lat:
            pw = r.get("postings_per_doc")
            print(f"{r['system']:38s} {r['clusters']:>10,d} {r['ms_per_doc']:>10.4f} {r['docs_timed']:>10,d} "
                  f"{r['clusters_after']:>15,d} {'' if pw is None else f'{pw:,.0f}':>12s}")
    for r in rows:
        if "error" in r:
            print(f"{r['system']}: {r['error']}")
    thr = [r for r in rows if r["section"] == "throughput"]
    if thr:
        print("\nThroughput over a stream from zero clusters (real documents replicated, each replica shuffled)")
        print(f"{'system':38s} {'docs':>10s} {'seconds':>10s} {'docs/s':>10s} {'ms/doc':>8s} {'clusters':>10s} "
              f"{'restarts':>9s}")
        for r in thr:
            print(f"{r['system']:38s} {r['docs']:>10,d} {r['seconds']:>10.2f} {r['docs_per_s']:>10,.0f} "
                  f"{r['ms_per_doc']:>8.4f} {r['clusters_after']:>10,d} {r['restarts']:>9,d}")
    q = [r for r in rows if r["section"] == "quality"]
    if q:
        print("\nQuality against the 20 Newsgroups labels (18,846 posts, one fixed shuffle)")
        print(f"{'system':12s} {'T':>5s} {'clusters':>9s} {'NMI':>7s} {'purity':>7s} {'NMI shuf':>9s} "
              f"{'pur shuf':>9s} {'seconds':>8s}")
        for r in q:
            print(f"{r['system']:12s} {r['threshold']:>5.2f} {r['clusters_after']:>9,d} {r['nmi']:>7.4f} "
                  f"{r['purity']:>7.4f} {r['nmi_shuffled']:>9.4f} {r['purity_shuffled']:>9.4f} {r['seconds']:>8.1f}")


ENV: dict = {}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", action="store_true", help="add the GPU rows (needs cupy and a device)")
    ap.add_argument("--sections", default="latency,throughput,quality", help="comma-separated sections to run")
    ap.add_argument("--data", default=None, help="shared data folder (default: $CUTEXT_DATA or ../shared/data)")
    ap.add_argument("--threshold", type=float, default=0.6, help="T of the latency/throughput runs (default 0.6)")
    ap.add_argument("--top-k", type=int, default=35, help="terms per vector (default 35)")
    ap.add_argument("--clusters", type=_int_list, default=None,
                    help="latency points (default 1000,10000,100000 on the CPU; up to 1000000 with --gpu)")
    ap.add_argument("--latency-docs", type=int, default=1000, help="documents timed per GPU latency point")
    ap.add_argument("--cpu-latency-docs", type=int, default=100, help="documents timed per CPU latency point")
    ap.add_argument("--cpu-max-clusters", type=int, default=100_000, help="largest M for the CPU reference")
    ap.add_argument("--twin-max-clusters", type=int, default=10_000, help="largest M for the ELLPACK CPU twin")
    ap.add_argument("--batch-sizes", type=_int_list, default=[1, 32], help="GPU micro-batch sizes (default 1,32)")
    ap.add_argument("--passes", type=_pass_list, default=["all-rows", "candidates"],
                    help="GPU scoring passes: all-rows (every cluster; batch 1 in one launch), per-doc (batch 1: "
                         "every cluster in a scoring pass a document, the host deciding), candidates (clusters "
                         "sharing a term, through the device inverted index); default all-rows,candidates")
    ap.add_argument("--stream-docs", type=int, default=1_000_000, help="GPU throughput stream (default 1,000,000)")
    ap.add_argument("--cpu-stream-docs", type=int, default=20_000, help="CPU throughput stream (default 20,000)")
    ap.add_argument("--throughput-repeats", type=int, default=1, help="runs per throughput row (default 1)")
    ap.add_argument("--river-docs", type=int, default=3000, help="documents fed to river TextClust (default 3000)")
    ap.add_argument("--river-window", type=int, default=250, help="TextClust timing window (documents)")
    ap.add_argument("--river-seconds", type=float, default=120, help="stop feeding TextClust after this")
    ap.add_argument("--thresholds", type=_float_list, default=[0.1, 0.2, 0.3, 0.5, 0.6],
                    help="quality thresholds (default 0.1,0.2,0.3,0.5,0.6)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per latency point; median (default 3)")
    ap.add_argument("--json", default=None, help="write the environment and rows as JSON here")
    args = ap.parse_args(argv)

    from cutext.kernels.backend import resolve_backend
    from cutext.pipelines import datasets

    gpu_ok = False
    if args.gpu:
        gpu_ok = resolve_backend("gpu") == "gpu"
    if args.clusters is None:
        args.clusters = [1000, 10_000, 100_000, 1_000_000] if gpu_ok else [1000, 10_000, 100_000]
    data = Path(args.data) if args.data else datasets.default_data_dir()
    if data is None:
        print("error: shared data folder not found (set CUTEXT_DATA or pass --data)", file=sys.stderr)
        return 2
    ENV.update({"threshold": args.threshold, "top_k": args.top_k, "python": sys.version.split()[0],
                "machine": platform.machine(), "cpus": os.cpu_count(), "argv": sys.argv[1:],
                "date": time.strftime("%Y-%m-%d %H:%M:%S")})
    if gpu_ok:
        import cupy

        ENV["gpu"] = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    log("vectorizing 20 Newsgroups + Reuters-21578 ...")
    tv, labels, texts, cfg, n_news = load_pool(data, args.top_k)
    ENV["pool_docs"] = len(tv)
    log(f"{len(tv):,} term vectors (top_k={args.top_k})")
    rows: list = []
    sections = args.sections.split(",")

    def dump():
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps({"env": ENV, "rows": rows}, indent=2, default=float) + "\n")

    if "latency" in sections:
        rows += latency_rows(args, tv, texts, cfg, gpu_ok)
        dump()
    if "throughput" in sections:
        rows += throughput_rows(args, tv, gpu_ok)
        dump()
    if "quality" in sections:
        rows += quality_rows(args, tv, labels, n_news, gpu_ok)
        dump()
    print(f"cutext cluster benchmark, {ENV['date']}, {ENV.get('gpu', 'no GPU')}, {ENV['cpus']} CPUs; "
          f"pool of {len(tv):,} real documents (20 Newsgroups + Reuters-21578)")
    print_tables(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
