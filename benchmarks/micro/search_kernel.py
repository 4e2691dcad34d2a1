#!/usr/bin/env python
"""The GPU query engine alone, build variant by build variant: ``bm25_block_search`` compiled with each
set of ``search.cu`` switches of :data:`cutext.kernels.search.VARIANTS` (or given with ``--extra``), timed
on the same index and query CSR, each variant's results checked against the default build's.

The index is 20 Newsgroups replicated to ``--gb`` GB (or ``--mb`` MB) of text as ``benchmarks/search_gpus.py``
builds it (:func:`bm25.corpus_folder`, tokenizer "plain", lucene k1=1.2 b=0.75, built on the GPU), or the
index at ``--index PATH``; the queries are the posts' Subject lines (:meth:`bm25.Corpus.queries`), turned into
one query CSR per batch of ``--batch-size`` once (``BM25Index.query_matrix``).  Each variant: one warm-up
pass (nvrtc compile, reported apart), then ``--repeats`` passes over all batches of
:func:`cutext.kernels.search.search_tiled_start` + ``finish()`` (what ``BM25Index.topk_arrays`` runs on one
GPU: the query CSR to the device, the two kernels, the results back; no tokenization, no frame), timed with
``cupy.cuda.Device().synchronize()`` and ``time.perf_counter``; the median is reported.  Postings read = the
sum over queries of their terms' document frequencies, 8 bytes each (int32 doc + float32 weight); GB/s of
postings against the HBM bandwidth of the device (4.8 TB/s for an H200, ``--hbm-tbs`` to set it).

    python benchmarks/micro/search_kernel.py --gb 2 --data ../shared/data --json results/search_kernel-<gpu>-<date>.json
    python benchmarks/micro/search_kernel.py --index /tmp/cutext-search-kernel/index-2gb --variants all,jump
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bm25 as bench  # noqa: E402  (the replicated 20 Newsgroups corpus, its Subject-line queries, the HBM table)

from cutext.kernels import search as ks  # noqa: E402


def parse_extra(spec: str) -> tuple[str, tuple, int | None]:
    """``"SB_JUMP SB_TILE=4096@128"`` -> ``(spec, ("-DSB_JUMP", "-DSB_TILE=4096"), 128)``: search.cu's macros
    (``-D`` optional) separated by spaces or commas, ``@THREADS`` optional."""
    opts, _, thr = spec.partition("@")
    options = tuple(o if o.startswith("-D") else "-D" + o for o in opts.replace(",", " ").split() if o)
    bad = [o for o in options if not o[2:3].isalpha()]
    if bad or not options:
        raise argparse.ArgumentTypeError(f"--extra {spec!r}: macros of search.cu such as SB_JUMP, got {bad}")
    return spec, options, int(thr) if thr else None


def select_variants(names: str, extra) -> list[tuple[str, tuple, int | None]]:
    """The variants to run, ``(name, options, threads)``, the default build first (the reference)."""
    want = list(ks.VARIANTS) if names in ("", "all-variants") else [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in want if n not in ks.VARIANTS]
    if unknown:
        raise SystemExit(f"--variants: unknown {unknown}; known: {', '.join(ks.VARIANTS)}")
    out = [("default", *ks.VARIANTS["default"])]
    out += [(n, *ks.VARIANTS[n]) for n in want if n != "default"]
    out += list(extra or [])
    for name, options, threads in out:
        ks._launch_shape(options, threads)  # refuse a bad tile or thread count before any GPU work
    return out


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--gb", type=float, default=None, help="GB of replicated 20 Newsgroups text (default 2)")
    size.add_argument("--mb", type=float, default=None, help="MB of replicated 20 Newsgroups text instead of --gb")
    ap.add_argument("--index", default=None, help="an index folder to load instead of building one")
    ap.add_argument("--data", default=None, help="folder holding corpora/20news-bydate.tar.gz (or $CUTEXT_DATA)")
    ap.add_argument("--workdir", default="/tmp/cutext-search-kernel",
                    help="corpus and built index (reused by a later run of the same size)")
    ap.add_argument("--n-queries", type=int, default=16384)
    ap.add_argument("--batch-size", type=int, default=8192)
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--variants", default="",
                    help=f"comma-separated names of cutext.kernels.search.VARIANTS (default all: {', '.join(ks.VARIANTS)}); "
                         "the default build always runs first, as the reference")
    ap.add_argument("--extra", action="append", type=parse_extra, default=[],
                    help='another variant: search.cu macros, "@THREADS" optional, e.g. "SB_JUMP SB_TILE=4096@128" '
                         "(repeatable)")
    ap.add_argument("--hbm-tbs", type=float, default=None, help="HBM TB/s for the %% column (default: by GPU name; H200 4.8)")
    ap.add_argument("--budget-s", type=float, default=220.0,
                    help="no new variant starts after this many seconds of the run (default 220)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if a.gb is None and a.mb is None:
        a.gb = 2.0
    if a.n_queries < 1 or a.batch_size < 1 or a.repeats < 1:
        ap.error("--n-queries, --batch-size and --repeats must be >= 1")
    try:
        a.variant_list = select_variants(a.variants, a.extra)
    except ValueError as exc:
        ap.error(str(exc))
    return a


def build_or_load(a, log):
    """The index (GPU backend) and its folder: ``--index``, or built once under ``--workdir`` for the size."""
    from cutext import pipelines
    from cutext.stages.engines.bm25_index import BM25Index

    work = Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    if a.index:
        path = Path(a.index)
    else:
        gb = a.gb if a.gb is not None else a.mb / 1000
        path = work / f"index-{gb:g}gb"
        if not (path / "index.json").is_file():
            t = time.perf_counter()
            src = bench.corpus_folder(a.data, work, gb)
            log(f"corpus {src} ready in {time.perf_counter() - t:.1f} s")
            tok_c, _ = bench.tokenizer_kwargs("plain")
            t = time.perf_counter()
            r = pipelines.run("bm25", str(src), out=str(path), backend="gpu", scheduler="sync", format="lines",
                              progress=False, index_format=2, variant="lucene", k1=1.2, b=0.75, **tok_c)
            log(f"index built in {time.perf_counter() - t:.1f} s: {r.counts.get('n_docs', 0):,} docs, "
                f"{r.counts.get('n_postings', 0):,} postings")
        else:
            log(f"reusing {path}")
    t = time.perf_counter()
    idx = BM25Index.load(path, backend="gpu")
    if idx.matrix is None:
        raise SystemExit(f"{path}: the index did not load as one matrix on this GPU")
    log(f"loaded in {time.perf_counter() - t:.1f} s: {idx.n_docs:,} docs, {idx.matrix.nnz:,} postings")
    return idx, path


def run_variant(sm, mats, k, options, threads, repeats, sync):
    """(compile + first pass seconds, median seconds of a pass over all batches, runs, results)."""
    def one_pass():
        outs = []
        for Q in mats:  # a batch is waited for before the next, as topk_arrays does
            outs.append(ks.search_tiled_start(sm.indptr64, sm.indices32, sm.matrix.data, sm.n_docs, Q.indptr,
                                              Q.indices, Q.data, k, options=options, threads=threads)())
        sync()
        return outs

    sync()
    t = time.perf_counter()
    out = one_pass()
    first = time.perf_counter() - t
    runs = []
    for _ in range(repeats):
        sync()
        t = time.perf_counter()
        one_pass()
        runs.append(time.perf_counter() - t)
    doc, score, n = (np.concatenate([o[i] for o in out]) for i in range(3))
    return first, statistics.median(runs), runs, (doc, score, n)


def main(argv=None) -> int:
    a = parse_args(argv)
    t_start = time.perf_counter()

    def log(msg):
        print(f"[{time.perf_counter() - t_start:7.1f} s] {msg}", flush=True)

    import cupy

    from cutext.stages.engines.search import SearchMatrix, cap_k

    idx, path = build_or_load(a, log)
    sm = SearchMatrix(idx.matrix)
    k = cap_k(a.k, sm.n_docs)
    queries = bench.Corpus(bench.find_20news(a.data)).queries(a.n_queries)
    mats = [idx.query_matrix(queries[s:s + a.batch_size]) for s in range(0, len(queries), a.batch_size)]
    postings = int(sum(int(idx.df[Q.indices].sum()) for Q in mats))  # each query's distinct terms' df
    gpu = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"].decode()
    hbm = a.hbm_tbs * 1e12 if a.hbm_tbs else next((bw for key, bw in bench.HBM_BYTES_S.items() if key in gpu), 4.8e12)
    log(f"{gpu}; {len(queries):,} queries in {len(mats)} batches of <= {a.batch_size}, k={k}; "
        f"{postings:,} postings read a pass ({postings / len(queries):,.0f} a query); HBM {hbm / 1e12:.2f} TB/s")
    sync = cupy.cuda.Device().synchronize
    rows, ref = [], None
    for name, options, threads in a.variant_list:
        if ref is not None and time.perf_counter() - t_start > a.budget_s:
            log(f"{name}: skipped (past --budget-s {a.budget_s:g})")
            rows.append({"variant": name, "options": list(options), "threads": threads, "error": "skipped: budget"})
            continue
        row = {"variant": name, "options": list(options), "threads": threads or ks.THREADS}
        try:
            first, med, runs, out = run_variant(sm, mats, k, options, threads, a.repeats, sync)
        except Exception as exc:  # a variant that does not compile or launch here: a row, and the next
            row["error"] = f"{type(exc).__name__}: {exc}"[:300]
            log(f"{name}: ERROR {row['error']}")
            rows.append(row)
            cupy.get_default_memory_pool().free_all_blocks()
            continue
        same = True if ref is None else all(np.array_equal(x, y) for x, y in zip(out, ref))
        ref = out if ref is None else ref
        row.update({"first_s": round(first, 3), "seconds": round(med, 5), "runs_s": [round(x, 5) for x in runs],
                    "ms_per_batch": round(1e3 * med / len(mats), 3), "qps": round(len(queries) / med),
                    "postings": postings, "gb_s": round(8 * postings / med / 1e9, 1),
                    "hbm_pct": round(100 * 8 * postings / med / hbm, 1), "same_as_default": same})
        rows.append(row)
        log(f"{name}: {row['ms_per_batch']} ms a batch, {row['qps']:,} q/s, {row['gb_s']} GB/s of postings "
            f"({row['hbm_pct']} % of HBM), same as default: {same} (first pass {first:.2f} s)")
    print(f"\n{gpu}; index {path}: {sm.n_docs:,} docs, {idx.matrix.nnz:,} postings; {len(queries):,} queries "
          f"(Subject lines), top-{k}, batches of {a.batch_size}; medians of {a.repeats}; postings read a pass "
          f"{postings:,} (8 bytes each)")
    print("| variant | options | threads | ms / batch | q/s | postings read | GB/s | % of HBM | x default | same as default |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    base = next((r["qps"] for r in rows if "qps" in r), None)
    for r in rows:
        opts = " ".join(r["options"]) or "(none)"
        if "error" in r:
            print(f"| {r['variant']} | {opts} | {r['threads']} | {r['error']} | | | | | | |")
            continue
        print(f"| {r['variant']} | {opts} | {r['threads']} | {r['ms_per_batch']} | {r['qps']:,} | {r['postings']:,} "
              f"| {r['gb_s']} | {r['hbm_pct']} | {r['qps'] / base:.2f} | {'yes' if r['same_as_default'] else '**no**'} |")
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps({"gpu": gpu, "index": str(path), "n_docs": sm.n_docs,
                                            "n_postings": int(idx.matrix.nnz), "n_queries": len(queries),
                                            "batch_size": a.batch_size, "k": k, "repeats": a.repeats,
                                            "hbm_bytes_s": hbm, "rows": rows}, indent=2))
    log("done")
    return 0 if all(r.get("same_as_default", True) and "error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
