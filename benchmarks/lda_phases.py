#!/usr/bin/env python
"""Where one GPU LDA iteration spends its time: sampling, count rebuild (W and D), per-word tables.

NIPS (UCI) replicated to >= ``--gpu-tokens`` tokens, as in ``benchmarks/lda.py --gpu``.  For each K in
``--ks`` and each sampler in ``--samplers`` it runs ``--warmup`` + ``--iterations`` Gibbs iterations on
one GPU and times every phase with CUDA events (median over the timed iterations, milliseconds):

``sample``   the sampling kernel (``kernels.lda.sample`` / ``sample_dense``)
``count``    the changed / skipped reductions of ``GibbsState.sample_pass``
``W``        W from the tokens (zeroing + integer atomics)
``D``        D from the tokens (shared-memory histogram per document, or sort + run-length for large K)
``D sort``   the sort + run-length path for comparison (always timed)
``tables``   n_k and ``prepare_words`` (What, running sums, top-3)

``--old-cu FILE`` also times the ``lda_sample`` kernel of an older ``lda.cu`` (the thread-per-token
kernel of the first GPU run, signature without ``per_warp``) on the same state, as ``old sample``.
The table also gives the mean number of nonzeros of D[d] per token (the length of the S sum).

Usage: ``python benchmarks/lda_phases.py [--ks 128 1000 32768] [--old-cu old_lda.cu] [--json out.json]``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lda import data_dir, load  # noqa: E402  (the benchmark script beside this one)


def replicated_nips(ddir, tokens):
    from cutext.stages.engines.lda_chunk import BagOfWords

    bow = load("nips", ddir)
    reps = int(np.ceil(tokens / bow.n_tokens))
    lengths = np.diff(bow.doc_ptr)
    return BagOfWords(np.concatenate([[0], np.cumsum(np.tile(lengths, reps))]).astype(np.int64),
                      np.tile(bow.word, reps), np.tile(bow.count, reps), bow.vocab,
                      [f"{r}:{n}" for r in range(reps) for n in bow.doc_names], f"nips x{reps}")


class Timer:
    def __init__(self):
        self.t = {}

    def __call__(self, name, fn):
        import cupy

        a, b = cupy.cuda.Event(), cupy.cuda.Event()
        a.record()
        out = fn()
        b.record()
        b.synchronize()
        self.t.setdefault(name, []).append(cupy.cuda.get_elapsed_time(a, b))
        return out


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=None)
    ap.add_argument("--gpu-tokens", type=float, default=100e6)
    ap.add_argument("--ks", nargs="+", type=int, default=[128, 1000, 32768])
    ap.add_argument("--samplers", nargs="+", default=["sparse", "three_branch"])
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--old-cu", default=None)
    ap.add_argument("--variants", nargs="*", default=[],
                    help="compile-time variants of lda_sample to time on the same state, e.g. "
                         "'LDA_SAMPLE_MINB=0,LDA_UNROLL=2' (draws are checked against the default build)")
    ap.add_argument("--json", default=None)
    return ap.parse_args(argv)


def print_rows(rows, variants, args, big) -> None:
    """The variants' sampling times, then the table of ms per phase."""
    cols = ["sample", "old sample", "count", "W", "D", "D sort", "tables"]
    if variants:
        print("\nlda_sample variants (ms, median):")
        for r in rows:
            print(f"  K={r['K']:>6} {r['sampler']:<13} default {r['ms']['sample']:8.2f}  "
                  + "  ".join(f"{spec}: {r['ms'][spec]:8.2f}" for spec in variants))
    print(f"\nms per iteration (median of {args.iterations}), {big.source}, {big.n_tokens:,} tokens")
    print(f"{'K':>6} {'sampler':<13} " + " ".join(f"{c:>10}" for c in cols)
          + f" {'iter ms':>9} {'Mtok/s':>8} {'old Mtok/s':>10} {'nnz/tok':>8}")
    for r in rows:
        old_rate = r["Mtok_per_s_old_sample"]
        print(f"{r['K']:>6} {r['sampler']:<13} " + " ".join(f"{r['ms'].get(c, float('nan')):>10.2f}" for c in cols)
              + f" {r['iteration_ms']:>9.2f} {r['Mtok_per_s']:>8.1f} "
              + f"{(old_rate if old_rate else float('nan')):>10.1f} {r['nnz_per_token']:>8.1f}")


def main(argv=None):
    args = parse_args(argv)

    import cupy

    from cutext.kernels import _cuda
    from cutext.kernels import lda as K_
    from cutext.stages.engines.lda_chunk import build_chunks
    from cutext.stages.engines.lda_gibbs import GibbsState

    big = replicated_nips(data_dir(args.data), args.gpu_tokens)
    print(f"{big.source}: {big.n_docs} documents, {big.n_tokens:,} tokens", flush=True)
    old = None
    if args.old_cu:
        old = cupy.RawModule(code=Path(args.old_cu).read_text(), options=_cuda.COMPILE_OPTIONS)
        old = old.get_function("lda_sample")
    variants = {}
    for spec in args.variants:
        defs = tuple(f"-D{d.strip()}" for d in spec.split(",") if d.strip())
        variants[spec] = _cuda.kernel(K_.SOURCE, "lda_sample", _cuda.COMPILE_OPTIONS + defs)
    rows = []
    ch0 = None
    for K in args.ks:
        ch = build_chunks(big, K) if ch0 is None else ch0
        ch0 = ch
        for smp in args.samplers:
            if smp == "dense" and K > 256:
                continue
            st = GibbsState(ch, K, 50.0 / K, 0.01, seed=0, gpu=True)
            tm = Timer()
            n = ch.n_tokens
            for it in range(1, args.warmup + args.iterations + 1):
                if it == args.warmup + 1:
                    tm.t.clear()
                if smp == "dense":
                    tm("sample", lambda: st.sample_pass(it, smp))
                    st.z = st._pending
                else:
                    z_new, flags = tm("sample", lambda: K_.sample(
                        st.word, st.doc, st.keys, st.z, st.doc_ptr, st.d_topic, st.d_cnt, st.d_nnz, st.W, st.nk,
                        st.tables, alpha=st.alpha, beta=st.beta, vbeta=st.vbeta, seed=st.seed, iteration=it,
                        three=smp == "three_branch"))
                    tm("count", lambda: (int((flags == K_.FLAG_SKIP).sum()), int((z_new != st.z).sum())))
                    if old is not None:
                        zo = cupy.empty(n, np.int32)
                        fo = cupy.zeros(n, np.int8)
                        tb = st.tables
                        g = ((n + 255) // 256,)
                        tm("old sample", lambda: old(g, (256,), (
                            np.int64(n), st.word, st.doc, st.keys, st.z, st.doc_ptr, st.d_topic, st.d_cnt, st.d_nnz,
                            st.W, st.nk, tb["what"], tb["qcum"], tb["qtot"], tb["top"], tb["topv"], np.int32(K),
                            np.float64(st.alpha), np.float64(st.beta), np.float64(st.vbeta), np.float64(1.0),
                            np.uint64(st.seed), np.uint64(it), np.int32(smp == "three_branch"), np.int32(1), zo, fo)))
                        del zo, fo
                    for spec, fn in variants.items():
                        zv = cupy.empty(n, np.int32)
                        fv = cupy.zeros(n, np.int8)
                        tb = st.tables
                        g = ((n + 31) // 32 * 32 // 256 + 1,)
                        tm(spec, lambda: fn(g, (256,), (
                            np.int64(n), st.word, st.doc, st.keys, st.z, st.doc_ptr, st.d_topic, st.d_cnt, st.d_nnz,
                            st.W, st.nk, tb["what"], tb["qcum"], tb["qtot"], tb["top"], tb["topv"], np.int32(K),
                            np.float64(st.alpha), np.float64(st.beta), np.float64(st.vbeta), np.float64(1.0),
                            np.uint64(st.seed), np.uint64(it), np.int32(smp == "three_branch"), np.int32(1), zv, fv)))
                        if not (bool((zv == z_new).all()) and bool((fv == flags).all())):
                            sys.exit(f"variant {spec} draws differ from the default build (K={K}, iteration {it})")
                        del zv, fv
                    st._pending = z_new
                    st.z = z_new
                # count rebuild, by phase
                def w_only():
                    W = cupy.zeros((st.V, K), dtype=np.int32)
                    g, b = _cuda.grid(n)
                    K_._kernel("lda_rebuild_w")(g, b, (st.word, st.z, np.int64(n), np.int32(K), W))
                    return W

                def d_sort():
                    keys = st.doc.astype(np.int64) * K + st.z.astype(np.int64)
                    keys = cupy.sort(keys[st.doc_tok])
                    dt, dc = cupy.zeros(n, np.int32), cupy.zeros(n, np.int32)
                    dn = cupy.zeros(ch.n_docs, np.int32)
                    g, b = _cuda.grid(ch.n_docs)
                    K_._kernel("lda_rebuild_d")(g, b, (st.doc_ptr, keys, np.int32(ch.n_docs), np.int32(K), dt, dc, dn))
                    return dn

                tm("W", w_only)
                tm("D sort", d_sort)
                W, _nk, st.d_topic, st.d_cnt, st.d_nnz = tm("W+D", lambda: K_.rebuild_counts(
                    st.word, st.doc, st.z, st.doc_ptr, st.doc_tok, st.V, K))
                tm("tables", lambda: st.set_global_w(W))
                st._pending = None
            med = {k: statistics.median(v) for k, v in tm.t.items()}
            if "W+D" in med:
                med["D"] = med["W+D"] - med["W"]
            total = sum(med.get(k, 0.0) for k in ("sample", "count", "W+D", "tables"))
            nnz_tok = float((st.d_nnz.astype(np.float64) * cupy.diff(st.doc_ptr)).sum()) / n
            row = {"K": K, "sampler": smp, "tokens": n, "ms": med, "iteration_ms": total,
                   "Mtok_per_s": n / total / 1e3, "nnz_per_token": nnz_tok,
                   "Mtok_per_s_old_sample": (n / (total - med["sample"] + med["old sample"]) / 1e3
                                             if "old sample" in med else None)}
            rows.append(row)
            print(json.dumps(row), flush=True)
            st = None
            cupy.get_default_memory_pool().free_all_blocks()

    print_rows(rows, variants, args, big)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "args": vars(args),
                                               "time": time.strftime("%Y-%m-%d %H:%M")}, indent=2) + "\n")


if __name__ == "__main__":
    main()
