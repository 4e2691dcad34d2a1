#!/usr/bin/env python
"""LDA training: cutext's Gibbs samplers (CPU twins and GPU kernels) against tomotopy.

Sections
--------
speed (default)
    Tokens per second per iteration on KOS and NIPS (UCI bag of words) for K in ``--ks``: cutext CPU
    (numba twins: ``sparse``, ``three_branch``, ``dense`` for K <= 256) and tomotopy ``LDAModel.train``
    with ``workers = os.cpu_count()`` on the same machine.  An iteration = one sampling pass over every
    token plus the count rebuild (no likelihood).  Median over ``--iterations`` timed iterations after
    ``--warmup`` untimed ones (cutext: numba compilation excluded).
quality (``--quality``)
    KOS and NIPS, K=128, alpha=beta=0.1, ``--quality-iterations`` (200): EZLDA Eq. 5 (LLPT, log2,
    bits per token) computed from each system's own counts every 10 iterations: cutext from its W and
    D, tomotopy from ``get_topic_word_dist`` and ``doc.get_topic_dist`` (both (count + prior) /
    (total + prior mass)), alpha fixed on both sides (tomotopy ``optim_interval = 0``).  Also
    tomotopy's own ``ll_per_word`` (ln of the joint likelihood; a different quantity, for reference).
gpu (``--gpu``)
    NIPS replicated to >= ``--gpu-tokens`` (100 M) tokens (whole documents copied; each replica a new
    document), K in ``--gpu-ks`` (128, 1000, 32768): tokens/s per iteration for each sampler on one
    GPU (``--gpu-devices 1 2``: also the three-branch sampler sharded over 2 GPUs, W summed after every
    iteration), device memory in use (cupy memory pool, bytes) after setup and at the peak, and the hybrid-W
    estimate of EZLDA Table I for the same corpus; ``sampler="hybrid"`` (sparse W rows) for K in
    ``--gpu-hybrid-ks``, with the state's own bytes (``GibbsState.nbytes``).  The timed iterations are
    3-7 from a random start, where D rows are densest (the slowest iterations); ``--gpu-late N`` also
    times iterations N+1..N+5 of the same chain, when D has become sparse.  ``--gpu-orders word doc``:
    the sparse and three-branch samplers on one GPU once per token order (``GibbsState.sample_order``;
    ``doc`` = ``lda_sample_doc``, D rows in shared memory, ``--gpu-doc-cap`` entries a warp; rows
    ``...-doc``), each row with a digest of the final topics (``z_sha1``: equal across orders, since the
    draws are the same token for token).

client (``--client``)
    The sampler on a dask Client (``pipelines.run("lda", ..., client=c)``: one shard per worker, W summed
    every iteration) next to the in-process chain: tokens/s per iteration (median) of the one-shard chain
    and the in-process chain sharded as each client size (``n_devices=n``; CPU: the shards run one after
    the other in one process), then ``DistributedGibbs`` on a fresh local cluster of each size in
    ``--client-workers`` (1 2): a process ``LocalCluster`` (one thread per worker; numba's own threads
    inside each) on the CPU, a ``LocalCUDACluster`` (one GPU per worker) with ``--gpu``; each timed one
    ``step`` a call (rows ``...-nccl``/``...-client``, what a callback watching every iteration costs) and
    ``--iterations`` passes in one ``steps`` call (rows ``...-steps``, what the pipeline does otherwise).
    Corpora ``--corpora`` (KOS, NIPS) tiled ``--client-replicate`` times (whole documents), K in ``--client-ks``,
    sampler ``--client-sampler``, collective ``--collective`` (auto: nccl on GPU workers where available, else through
    the client).

Results: a table on stdout, ``--json`` (default ``benchmarks/results/lda-<section>-<date>.json``).
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

T0 = time.monotonic()
ROOT = Path(__file__).resolve().parents[1]


def log(msg):
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", flush=True)


def data_dir(arg):
    if arg:
        return Path(arg)
    from cutext.pipelines.datasets import default_data_dir

    d = default_data_dir()
    if d is None:
        sys.exit("shared data folder not found (--data or $CUTEXT_DATA)")
    return Path(d)


def load(name, ddir):
    from cutext.stages.engines.lda_chunk import read_uci

    return read_uci(ddir / "bow" / "uci" / f"docword.{name}.txt.gz")


def tomotopy_model(bow, K, alpha, beta, seed=1):
    import tomotopy as tp

    mdl = tp.LDAModel(k=K, alpha=alpha, eta=beta, seed=seed)
    mdl.optim_interval = 0
    for d in range(bow.n_docs):
        a, b = bow.doc_ptr[d], bow.doc_ptr[d + 1]
        words = [bow.vocab[w] for w, c in zip(bow.word[a:b], bow.count[a:b]) for _ in range(int(c))]
        if words:
            mdl.add_doc(words)
    return mdl


def tomotopy_eq5(mdl, K):
    phi = np.array([mdl.get_topic_word_dist(k) for k in range(K)])
    tot = n = 0
    for doc in mdl.docs:
        w = np.asarray(doc.words)
        tot += float(np.log2(np.asarray(doc.get_topic_dist()) @ phi[:, w]).sum())
        n += len(w)
    return tot / n


def env():
    info = {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()}
    for m in ("numpy", "numba", "tomotopy", "cupy"):
        try:
            info[m] = __import__(m).__version__
        except Exception:  # noqa: BLE001
            info[m] = None
    try:
        import subprocess

        info["gpus"] = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20,
                                      check=False).stdout.strip()
    except Exception:  # noqa: BLE001
        info["gpus"] = None
    return info


# ----------------------------------------------------------------------------- sections

def time_ours(bow, K, sampler, warmup, iterations, gpu, alpha, beta):
    from cutext.stages.engines.lda_chunk import build_chunks
    from cutext.stages.engines.lda_gibbs import GibbsState

    ch = build_chunks(bow, K)
    st = GibbsState(ch, K, alpha, beta, seed=0, gpu=gpu)
    times, skipped = [], []
    for it in range(1, warmup + iterations + 1):
        st.sync()
        t = time.perf_counter()
        s = st.step(it, sampler)
        st.sync()
        if it > warmup:
            times.append(time.perf_counter() - t)
            skipped.append(s["skipped"])
    return ch.n_tokens, times, skipped, st


def speed(args, ddir, rows):
    for name in args.corpora:
        bow = load(name, ddir)
        for K in args.ks:
            alpha = 50.0 / K
            for smp in ("sparse", "three_branch", "dense"):
                if smp == "dense" and K > 256:
                    continue
                log(f"cutext cpu {name} K={K} {smp}")
                n, times, skipped, _ = time_ours(bow, K, smp, args.warmup, args.iterations, False, alpha, 0.01)
                med = statistics.median(times)
                rows.append({"section": "speed", "corpus": name, "K": K, "system": f"cutext-cpu-{smp}",
                             "tokens": n, "s_per_iter": med, "Mtok_per_s": n / med / 1e6,
                             "skipped_last": skipped[-1], "iterations": args.iterations, "warmup": args.warmup})
            try:
                mdl = tomotopy_model(bow, K, alpha, 0.01)
            except ImportError:
                log("tomotopy not importable: skipped")
                continue
            log(f"tomotopy {name} K={K}")
            mdl.train(args.warmup, workers=os.cpu_count())
            times = []
            for _ in range(args.iterations):
                t = time.perf_counter()
                mdl.train(1, workers=os.cpu_count())
                times.append(time.perf_counter() - t)
            med = statistics.median(times)
            n = bow.n_tokens
            rows.append({"section": "speed", "corpus": name, "K": K, "system": f"tomotopy-{os.cpu_count()}w",
                         "tokens": n, "s_per_iter": med, "Mtok_per_s": n / med / 1e6, "iterations": args.iterations,
                         "warmup": args.warmup})


def quality(args, ddir, rows):
    from cutext.stages.engines.lda_chunk import build_chunks
    from cutext.stages.engines.lda_gibbs import GibbsState

    K, alpha, beta, T = 128, 0.1, 0.1, args.quality_iterations
    for name in args.corpora:
        bow = load(name, ddir)
        curves = {}
        for smp in args.quality_samplers:
            log(f"quality cutext {name} {smp} ({'gpu' if args.gpu else 'cpu'})")
            ch = build_chunks(bow, K)
            st = GibbsState(ch, K, alpha, beta, seed=0, gpu=args.gpu)
            c = {}
            for it in range(1, T + 1):
                s = st.step(it, smp)
                if it % 10 == 0:
                    c[it] = (st.llpt(), s["skipped"])
            curves[smp] = c
        try:
            mdl = tomotopy_model(bow, K, alpha, beta)
            tc = {}
            for it in range(10, T + 1, 10):
                mdl.train(10, workers=os.cpu_count())
                tc[it] = (tomotopy_eq5(mdl, K), float(mdl.ll_per_word))
            log(f"quality tomotopy {name} done")
        except ImportError:
            tc = None
            log("tomotopy not importable: no peer")
        for it in range(10, T + 1, 10):
            row = {"section": "quality", "corpus": name, "K": K, "alpha": alpha, "beta": beta, "iteration": it}
            for smp, c in curves.items():
                row[f"llpt_{smp}"] = c[it][0]
                row[f"skipped_{smp}"] = c[it][1]
            if tc:
                row["llpt_tomotopy"] = tc[it][0]
                row["tomotopy_ll_per_word_ln"] = tc[it][1]
                for smp in curves:
                    row[f"reldiff_{smp}"] = (row[f"llpt_{smp}"] - tc[it][0]) / abs(tc[it][0])
            rows.append(row)


def replicate(bow, reps):
    """The corpus with its documents repeated ``reps`` times (each replica new documents)."""
    from cutext.stages.engines.lda_chunk import BagOfWords

    if reps <= 1:
        return bow
    lengths = np.diff(bow.doc_ptr)
    return BagOfWords(np.concatenate([[0], np.cumsum(np.tile(lengths, reps))]).astype(np.int64),
                      np.tile(bow.word, reps), np.tile(bow.count, reps), bow.vocab,
                      [f"{r}:{n}" for r in range(reps) for n in bow.doc_names], f"{bow.source} x{reps}")


def time_state(st, smp, warmup, iterations):
    times = []
    for it in range(1, warmup + iterations + 1):
        st.sync()
        t = time.perf_counter()
        st.step(it, smp)
        st.sync()
        if it > warmup:
            times.append(time.perf_counter() - t)
    return statistics.median(times)


def client_section(args, ddir, rows):
    import distributed

    from cutext.stages.engines.lda_chunk import build_chunks
    from cutext.stages.engines.lda_dist import DistributedGibbs
    from cutext.stages.engines.lda_gibbs import GibbsState, ShardedGibbs

    gpu = args.gpu
    dev = "gpu" if gpu else "cpu"
    for name in args.corpora:
        bow = replicate(load(name, ddir), args.client_replicate)
        log(f"{bow.source}: {bow.n_docs} documents, {bow.n_tokens:,} tokens")
        for K in args.client_ks:
            alpha, smp = 50.0 / K, args.client_sampler

            def row(system, n, med, **extra):
                rows.append({"section": "client", "corpus": name if args.client_replicate <= 1 else
                             f"{name}x{args.client_replicate}", "K": K, "system": system, "workers": n,
                             "tokens": bow.n_tokens, "s_per_iter": med, "Mtok_per_s": bow.n_tokens / med / 1e6,
                             "sampler": smp, "iterations": args.iterations, "warmup": args.warmup, **extra})

            # one chunking for every size (as many chunks as the largest): each size splits it into
            # contiguous groups, so every row samples the same chain; built once (minutes at 100 M tokens)
            ch = build_chunks(bow, K, max(args.client_workers))
            for n in sorted({1, *args.client_workers}):
                if gpu and n > 1:
                    from cutext.kernels.backend import device_count

                    if device_count() < n:
                        continue
                log(f"in-process {dev} {name} K={K} shards={n}")
                st = (GibbsState(ch, K, alpha, 0.01, seed=0, gpu=gpu) if n == 1 else
                      ShardedGibbs(ch, K, alpha, 0.01, seed=0, devices=list(range(n)) if gpu else [None] * n))
                row(f"cutext-{dev}-in-process-{n}", n, time_state(st, smp, args.warmup, args.iterations))
                del st
                if gpu:  # give the device memory back before the cluster's workers take the GPUs
                    import cupy

                    for d in range(n):
                        with cupy.cuda.Device(d):
                            cupy.get_default_memory_pool().free_all_blocks()
            for n in args.client_workers:
                log(f"client {dev} {name} K={K} workers={n}")
                if gpu:
                    from cutext.pipelines import local_gpu_cluster

                    cluster = local_gpu_cluster(n, threads_per_worker=1, dashboard_address=None)
                else:
                    cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                                       dashboard_address=None)
                try:
                    with distributed.Client(cluster) as c:
                        c.wait_for_workers(n)
                        t = time.perf_counter()
                        st = DistributedGibbs(ch, K, alpha, 0.01, seed=0, client=c, gpu=gpu,
                                              collective=args.collective)
                        setup = time.perf_counter() - t
                        row(f"cutext-{dev}-client-{n}w-{st.collective}", n,
                            time_state(st, smp, args.warmup, args.iterations), setup_s=setup)
                        # what the pipeline does without a callback: several passes a call to the shards
                        t = time.perf_counter()
                        st.steps(args.warmup + args.iterations + 1, args.iterations, smp)
                        row(f"cutext-{dev}-client-{n}w-{st.collective}-steps", n,
                            (time.perf_counter() - t) / args.iterations, setup_s=setup)
                        st.close()
                except Exception as exc:  # noqa: BLE001
                    rows.append({"section": "client", "K": K, "system": f"cutext-{dev}-client-{n}w",
                                 "error": repr(exc)[:300]})
                    log(f"error: {exc!r}")
                finally:
                    cluster.close()


def gpu_section(args, ddir, rows):
    import cupy

    from cutext.kernels import lda as lda_kernels
    from cutext.stages.engines.lda_chunk import BagOfWords, build_chunks
    from cutext.stages.engines.lda_gibbs import SAMPLE_ORDER, GibbsState, ShardedGibbs, resolve_sample_order

    bow = load("nips", ddir)
    reps = int(np.ceil(args.gpu_tokens / bow.n_tokens))
    lengths = np.diff(bow.doc_ptr)
    big = BagOfWords(np.concatenate([[0], np.cumsum(np.tile(lengths, reps))]).astype(np.int64),
                     np.tile(bow.word, reps), np.tile(bow.count, reps), bow.vocab,
                     [f"{r}:{n}" for r in range(reps) for n in bow.doc_names], f"nips x{reps}")
    log(f"NIPS x {reps}: {big.n_docs} documents, {big.n_tokens:,} tokens")
    pool = cupy.get_default_memory_pool()
    configs = [(K, smp, 1, order) for K in args.gpu_ks
               for smp in ["sparse", "three_branch"] + (["dense"] if K <= 256 else [])
               + (["hybrid"] if K in args.gpu_hybrid_ks else [])
               for order in (args.gpu_orders if smp in ("sparse", "three_branch") else ["word"])]
    # the shards sample in the library's order (lda_gibbs.SAMPLE_ORDER)
    configs += [(K, "three_branch", n, SAMPLE_ORDER) for n in args.gpu_devices if n > 1 for K in args.gpu_ks
                if K <= 1000]
    chunks = {}
    for K, smp, ndev, spec in configs:
        # spec "word", "doc" or "doc:NAME=VALUE,...": lda_sample_doc built with these -D switches
        order, _, dfs = spec.partition(":")
        defines = tuple(x for x in dfs.split(",") if x)
        lda_kernels.DOC_DEFINES = defines
        if ndev not in chunks:  # the token order does not depend on K: build once per device count
            chunks.clear()
            chunks[ndev] = build_chunks(big, K, ndev)
        base = chunks[ndev]
        n_dense = int((base.word_count > K).sum())
        split = np.array([a + np.searchsorted(base.word[a:b], n_dense, side="left")
                          for a, b in zip(base.chunk_ptr[:-1], base.chunk_ptr[1:])], dtype=np.int64)
        ch = dataclasses.replace(base, K=K, n_dense=n_dense, chunk_split=split)
        if smp in ("sparse", "three_branch"):  # "auto": the library's order for this V, K and device
            order = resolve_sample_order(order, ch.V, K)
        system = f"cutext-gpu{ndev}-{smp}" + (f"-{order}" if order not in ("word", "auto") else "") + \
            "".join(f"-{x.removeprefix('LDA_').lower()}" for x in defines)
        est = ch.memory_estimate()
        pool.free_all_blocks()
        log(f"gpu K={K} {smp} devices={ndev} order={order}")
        try:
            if ndev > 1:
                st = ShardedGibbs(ch, K, 50.0 / K, 0.01, seed=0, devices=list(range(ndev)))
            else:
                st = GibbsState(ch, K, 50.0 / K, 0.01, seed=0, gpu=True,
                                w_layout="hybrid" if smp == "hybrid" else "dense", sample_order=order)
                st.doc_cap = args.gpu_doc_cap
            st.sync()
            setup_bytes = pool.used_bytes()
            times, skipped = [], []
            for it in range(1, args.gpu_warmup + args.gpu_iterations + 1):
                st.sync()
                t = time.perf_counter()
                s = st.step(it, smp)
                st.sync()
                if it > args.gpu_warmup:
                    times.append(time.perf_counter() - t)
                    skipped.append(s["skipped"])
            peak = pool.total_bytes()
            t = time.perf_counter()
            ll = st.llpt()
            t_ll = time.perf_counter() - t
            med = statistics.median(times)
            late = {}
            if args.gpu_late:
                # the same chain continued to iteration --gpu-late, then --gpu-iterations more timed
                it0 = args.gpu_warmup + args.gpu_iterations
                late_times = []
                for it in range(it0 + 1, args.gpu_late + args.gpu_iterations + 1):
                    st.sync()
                    t = time.perf_counter()
                    st.step(it, smp)
                    st.sync()
                    if it > args.gpu_late:
                        late_times.append(time.perf_counter() - t)
                lm = statistics.median(late_times)
                late = {"late_from_iteration": args.gpu_late + 1, "late_s_per_iter": lm,
                        "late_Mtok_per_s": ch.n_tokens / lm / 1e6, "late_llpt": st.llpt()}
            zs = [p.z for p in st.parts] if ndev > 1 else [st.z]
            z_sha1 = hashlib.sha1(b"".join(cupy.asnumpy(z).tobytes() for z in zs)).hexdigest()
            rows.append({"section": "gpu", "corpus": big.source, "K": K, "system": system, "order": order,
                         "doc_defines": list(defines),
                         "doc_cap": args.gpu_doc_cap if order == "doc" else None, "z_sha1": z_sha1,
                         "devices": ndev,
                         "tokens": ch.n_tokens, "s_per_iter": med, "Mtok_per_s": ch.n_tokens / med / 1e6,
                         "skipped_last": skipped[-1], "llpt": ll, "llpt_seconds": t_ll,
                         "device_bytes_setup": int(setup_bytes), "device_bytes_pool_peak": int(peak),
                         "hybrid_w_bytes_estimate": est["hybrid_w"], "dense_w_bytes": est["dense_w"],
                         "state_bytes": st.nbytes(),
                         "iterations": args.gpu_iterations, "warmup": args.gpu_warmup, **late})
            log(f"  {ch.n_tokens / med / 1e6:.1f} M tokens/s, z sha1 {z_sha1[:12]}")
            del st
        except Exception as exc:  # noqa: BLE001
            rows.append({"section": "gpu", "K": K, "system": system, "error": repr(exc)[:300]})
            log(f"error: {exc!r}")
        pool.free_all_blocks()


def print_table(rows):
    for sec in ("speed", "gpu", "client"):
        rs = [r for r in rows if r.get("section") == sec]
        if not rs:
            continue
        print(f"\n{sec}: tokens per second per iteration (median)")
        print(f"{'corpus':<12} {'K':>6} {'system':<29} {'tokens':>12} {'s/iter':>9} {'Mtok/s':>9} {'skipped':>8} "
              f"{'dev MB':>8} {'late Mtok/s':>12} {'W+tab MB':>9}")
        for r in rs:
            if "error" in r:
                print(f"{'':<12} {r['K']:>6} {r['system']:<29} ERROR {r['error'][:60]}")
                continue
            dev = r.get("device_bytes_pool_peak")
            sb = r.get("state_bytes")
            wt = sb["W"] + sb["tables"] if sb else float("nan")
            print(f"{r['corpus'][:12]:<12} {r['K']:>6} {r['system']:<29} {r['tokens']:>12,} {r['s_per_iter']:>9.4f} "
                  f"{r['Mtok_per_s']:>9.2f} {r.get('skipped_last', float('nan')):>8.3f} "
                  f"{(dev / 1e6 if dev else float('nan')):>8.0f} {r.get('late_Mtok_per_s', float('nan')):>12.2f} "
                  f"{wt / 1e6:>9.0f}")
    rs = [r for r in rows if r.get("section") == "quality"]
    if rs:
        smps = [k[5:] for k in rs[0] if k.startswith("llpt_") and k != "llpt_tomotopy"]
        print("\nquality: LLPT (EZLDA Eq. 5, bits/token) from each system's counts, K=128, alpha=beta=0.1")
        print(f"{'corpus':<6} {'iter':>5} " + " ".join(f"{s:>13}" for s in smps) + f" {'tomotopy':>10} "
              + " ".join(f"{'rel ' + s[:8]:>13}" for s in smps))
        for r in rs:
            if r["iteration"] % 50 and r["iteration"] not in (10, 20):
                continue
            tp = r.get("llpt_tomotopy", float("nan"))
            print(f"{r['corpus']:<6} {r['iteration']:>5} " + " ".join(f"{r['llpt_' + s]:>13.4f}" for s in smps)
                  + f" {tp:>10.4f} " + " ".join(f"{r.get('reldiff_' + s, float('nan')):>+13.4%}" for s in smps))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=None, help="shared data folder (default ../shared/data or $CUTEXT_DATA)")
    ap.add_argument("--corpora", nargs="+", default=["kos", "nips"])
    ap.add_argument("--ks", nargs="+", type=int, default=[128, 1000])
    ap.add_argument("--iterations", type=int, default=5, help="timed iterations (speed)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed iterations first (speed)")
    ap.add_argument("--quality", action="store_true", help="run the quality section instead of speed")
    ap.add_argument("--quality-iterations", type=int, default=200)
    ap.add_argument("--quality-samplers", nargs="+", default=["sparse", "three_branch", "dense"])
    ap.add_argument("--gpu", action="store_true", help="gpu section (with --quality: cutext on the GPU)")
    ap.add_argument("--gpu-tokens", type=float, default=100e6)
    ap.add_argument("--gpu-ks", nargs="+", type=int, default=[128, 1000, 32768])
    ap.add_argument("--gpu-iterations", type=int, default=5)
    ap.add_argument("--gpu-warmup", type=int, default=2)
    ap.add_argument("--gpu-hybrid-ks", nargs="*", type=int, default=[1000, 32768],
                    help="K values of --gpu-ks that also run sampler='hybrid' (sparse W rows)")
    ap.add_argument("--gpu-late", type=int, default=0,
                    help="also continue each chain to this iteration and time --gpu-iterations more "
                         "(D is sparser later in training; 0 = off)")
    ap.add_argument("--gpu-orders", nargs="+", default=None,
                    help="token orders of the sparse / three-branch samplers on one GPU (default: the library's, "
                         "lda_gibbs.SAMPLE_ORDER, auto; word: lda_sample; doc: "
                         "lda_sample_doc, D rows in shared memory; doc:NAME=VALUE,...: lda_sample_doc built with "
                         "-D switches, e.g. doc:LDA_UNROLL=8); 'word doc' times both side by side")
    ap.add_argument("--gpu-doc-cap", type=int, default=768,
                    help="order doc: D-row entries a warp keeps in shared memory (kernels.lda.DOC_CAP)")
    ap.add_argument("--gpu-devices", nargs="+", type=int, default=[1],
                    help="device counts to run (e.g. 1 2 on nvidia-h200-x2: scaling rows for K <= 1000)")
    ap.add_argument("--client", action="store_true",
                    help="client section: the sampler on a dask Client (1 and 2 workers) next to in-process")
    ap.add_argument("--client-workers", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--client-ks", nargs="+", type=int, default=[128])
    ap.add_argument("--client-sampler", default="sparse")
    ap.add_argument("--client-replicate", type=int, default=1, help="tile the corpus this many times")
    ap.add_argument("--collective", default="auto", choices=["auto", "nccl", "client"])
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.gpu_orders is None:
        from cutext.stages.engines.lda_gibbs import SAMPLE_ORDER

        args.gpu_orders = [SAMPLE_ORDER]
    bad = [o for o in args.gpu_orders if o.partition(":")[0] not in ("auto", "word", "doc") or ":" in o and
           not o.startswith("doc:")]
    if bad:
        ap.error(f"--gpu-orders: auto, word, doc or doc:NAME=VALUE,... (got {bad})")
    ddir = data_dir(args.data)
    info = env()
    log(json.dumps(info))
    rows: list = []
    section = "client" + ("-gpu" if args.gpu else "") if args.client else \
        ("quality" if args.quality else ("gpu" if args.gpu else "speed"))
    if args.client:
        client_section(args, ddir, rows)
    elif args.quality:
        quality(args, ddir, rows)
    elif args.gpu:
        gpu_section(args, ddir, rows)
    else:
        speed(args, ddir, rows)
    print_table(rows)
    out = Path(args.json) if args.json else ROOT / "benchmarks" / "results" / \
        f"lda-{section}-{time.strftime('%Y-%m-%d')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"env": info, "args": vars(args), "rows": rows}, indent=2, default=str) + "\n")
    log(f"wrote {out}")


if __name__ == "__main__":
    main()
