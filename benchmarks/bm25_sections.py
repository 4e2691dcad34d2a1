"""The sections of ``benchmarks/bm25.py`` (cpu, memory, gpu), the measurements they make and the tables they
print; the environment, corpus and measuring helpers they use are ``bm25``'s."""
from __future__ import annotations

import gc
import math
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

from bm25 import (
    GB,
    MB,
    Bench,
    Corpus,
    DevicePools,
    GpuMemWatch,
    RssWatch,
    _log_gputext_profile,
    _run_text,
    bm25s_from_index,
    bm25s_index_run,
    bm25s_numba_model,
    bm25s_search_run,
    error_label,
    log,
    tokenizer_kwargs,
    write_lines,
    write_replicated,
)


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

def _gpu_data(corpus: Corpus, args, work: Path) -> tuple:
    """The gpu section's data, written once under ``work`` (the full data reused across runs): the replicated
    ``--gpu-gb`` and the ``--peer-mb`` subset with its texts in memory."""
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
    return data_dir, data, nbytes, ndocs, sub_dir, sub_texts, sub_data, sub_bytes, sub_docs


def _gpu_memory(args, be: str) -> tuple:
    """``(baseline MiB, RMM pools, note)`` of the gpu section's peak device memory (``None`` where unknown)."""
    baseline = GpuMemWatch.used_mib() if be == "gpu" else None
    if be == "gpu" and baseline is None:
        log("gpu: memory.used unavailable (no pynvml, no nvidia-smi); no peak memory numbers")
    pools = DevicePools(enabled=(be == "gpu") and not args.no_rmm_stats)
    mem_note = f"peak over a {baseline:,.0f} MiB baseline" if baseline is not None else None
    if baseline is not None:
        log(f"gpu: peak MiB = max of memory.used (summed over GPUs, polled every 0.1 s "
            f"{'through NVML in this process' if GpuMemWatch._handles() else 'by nvidia-smi'}) minus "
            f"{baseline:,.0f} MiB used before the section")
    return baseline, pools, mem_note


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


def _full_index_rows(bench: Bench, gbase: dict, corpus: Corpus, work: Path, idx_root: Path, data_dir: Path,
                     full: tuple, tok_c: dict, args, blocksize, baseline, pools, mem_note) -> None:
    """The warm-up, then the index of the full data (``full``: its label, bytes and documents) on one GPU,
    on a LocalCUDACluster (``--cluster``) and with ``client=`` (``--client-gpus``)."""
    be = args.gpu_backend
    gpu_label = "gpu" if be == "gpu" else f"gpu-dry-run({be})"
    data, nbytes, ndocs = full
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


def _subset_gpu_rows(bench: Bench, sbase: dict, sub_dir: Path, sub_index: Path, queries, tok_c: dict, args,
                     blocksize, baseline, pools, mem_note) -> dict:
    """The subset's index on one GPU, then the searches of it; the search rows and results by engine."""
    be, nq, k = args.gpu_backend, args.n_queries, args.k
    gpu_label = "gpu" if be == "gpu" else f"gpu-dry-run({be})"
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
    return gpu_results


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

    data_dir, data, nbytes, ndocs, sub_dir, sub_texts, sub_data, sub_bytes, sub_docs = _gpu_data(corpus, args, work)
    queries = corpus.queries(nq, args.seed)
    idx_root = work / "indexes"
    idx_root.mkdir(exist_ok=True)

    baseline, pools, mem_note = _gpu_memory(args, be)
    blocksize = int(args.gpu_blocksize_mb * 2**20) if args.gpu_blocksize_mb else None
    gbase = {"section": "gpu", "tokenizer": setting}
    try:
        _full_index_rows(bench, gbase, corpus, work, idx_root, data_dir, (data, nbytes, ndocs), tok_c, args,
                         blocksize, baseline, pools, mem_note)

        # the subset: cutext GPU (its index serves the queries), then the CPU peers
        sbase = dict(gbase, data=sub_data, nbytes=sub_bytes, n_docs=sub_docs)
        sub_index = idx_root / "subset-gpu"
        gpu_results = _subset_gpu_rows(bench, sbase, sub_dir, sub_index, queries, tok_c, args, blocksize, baseline,
                                       pools, mem_note)

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
