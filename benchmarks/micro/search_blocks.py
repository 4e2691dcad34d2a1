"""Where a batch of the GPU search engine spends its time, block by block, on the whole index and on its
first half and quarter of the documents (what one shard of 2 or 4 GPUs holds).

For each part the kernels of one batch are timed alone (CUDA events, medians of ``--repeats``), then run once
more built with ``-DSB_PROFILE`` (``kernels/search.cu``), which records for every block (query) its start and
end (``%globaltimer``), its SM and its counts of tiles, scoring steps, appends, selects by rank in the
shared list and radix selects.  Printed
per part: the kernel span; the blocks' mean, median, 99th percentile and longest duration; how many blocks
ran at once on average against the most; the tail (the span after the last block started); a least-squares
fit of a block's duration on its postings and its steps; the longest blocks.  If the engine has a cost that
does not shrink with the documents, this says whether it is in the blocks or around them.

``--variant NAME=OPTIONS`` (nvrtc options, e.g. ``-DSB_STEP_BARRIER``) or ``--variant NAME=@FILE`` (another
``search.cu`` with the same kernels, e.g. an earlier commit's) times other builds of the kernels on the same
parts and queries, and checks that they return the same documents and scores.  ``--batch-order`` times
the default build with the queries' blocks launched in batch order instead of the engine's order by cost
(``kernels.search.launch_order``).

    python benchmarks/micro/search_blocks.py [--index /tmp/cutext-search-gpus/index] [--parts 1,2,4]
        [--variant old=@/tmp/search-old.cu] [--batch-order]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1]))

import bm25 as bench

PROFILE_OPTIONS = ("-DSB_PROFILE",)  # __launch_bounds__ keeps it at the default build's 40 registers
PROFILE_BLOCKS, PROFILE_SLOTS = 65536, 8  # SB_PROF_BLOCKS, SB_PROF_SLOTS in search.cu


def doc_range(indptr, indices, data, lo: int, hi: int):
    """The CSR of documents ``[lo, hi)`` of a term-major CSR on the device, doc ids from 0."""
    import cupy

    keep = (indices >= lo) & (indices < hi)
    c = cupy.concatenate([cupy.zeros(1, cupy.int64), cupy.cumsum(keep, dtype=cupy.int64)])
    return c[indptr], (indices[keep] - lo).astype(cupy.int32), data[keep]


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", default="/tmp/cutext-search-gpus/index")
    ap.add_argument("--parts", default="1,2,4", help="the first 1/P of the documents for each P")
    ap.add_argument("--batch-size", type=int, default=8192)
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--data", default=None, help="folder holding corpora/20news-bydate.tar.gz")
    ap.add_argument("--batch-order", action="store_true",
                    help="also time the default build with the queries' blocks in batch order (not by cost)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=OPTIONS|NAME=@FILE",
                    help="another build of the kernels, timed beside the default (repeatable)")
    args = ap.parse_args(argv)
    if not 1 <= args.batch_size <= PROFILE_BLOCKS:
        ap.error(f"--batch-size must be in [1, {PROFILE_BLOCKS}] (the blocks the profile build records)")
    return args


def report_blocks(rec, post, q_ptr, parts: int, n_docs: int, n_postings: int, ms: float, ms_prof: float) -> tuple:
    """Print a part's blocks as the profile build recorded them (``rec``: a row a query); its summary row."""
    nq = len(q_ptr) - 1
    t0, t1 = rec[:, 0], rec[:, 1]
    dur = (t1 - t0) / 1e3  # microseconds
    span = (t1.max() - t0.min()) / 1e3
    tail = (t1.max() - t0.max()) / 1e3
    # blocks running at once, sampled over the span
    grid = np.linspace(t0.min(), t1.max(), 2000)
    running = np.searchsorted(np.sort(t0), grid, "right") - np.searchsorted(np.sort(t1), grid, "right")
    tiles, steps, appends, selects, radix = (rec[:, i].astype(np.float64) for i in (3, 4, 5, 6, 7))
    A = np.column_stack([np.ones(nq), post, steps])
    coef, *_ = np.linalg.lstsq(A, dur, rcond=None)
    print(f"\n## first 1/{parts} of the documents: {n_docs:,} docs, {n_postings:,} postings")
    print(f"kernels alone {ms:.2f} ms a batch (profile build {ms_prof:.2f}); block span {span / 1e3:.2f} ms, "
          f"{len(np.unique(rec[:, 2]))} SMs")
    print(f"block us: mean {dur.mean():.1f}, median {np.median(dur):.1f}, p99 {np.percentile(dur, 99):.1f}, "
          f"max {dur.max():.1f}; sum / span = {dur.sum() / span:.0f} blocks at once (most {running.max()}); "
          f"tail after the last start {tail / 1e3:.2f} ms")
    print(f"per block mean: tiles {tiles.mean():.1f}, steps {steps.mean():.1f}, appends {appends.mean():.2f}, "
          f"ranked selects {selects.mean():.2f}, radix selects {radix.mean():.2f}, postings {post.mean():,.0f}")
    print(f"fit us = {coef[0]:.1f} + {coef[1] * 1e3:.3f} ns a posting + {coef[2] * 1e3:.1f} ns a step")
    order = np.argsort(-dur)[:5]
    for q in order:
        print(f"  query {q}: {dur[q]:.0f} us, started at {(t0[q] - t0.min()) / 1e3:.0f} us, "
              f"{q_ptr[q + 1] - q_ptr[q]} terms, {post[q]:,} postings, {steps[q]:.0f} steps, "
              f"{selects[q]:.0f} + {radix[q]:.0f} selects")
    return parts, ms, span / 1e3, dur.mean(), tail / 1e3, dur.sum() / span


def print_tables(summary, vrows) -> None:
    print("\n| documents | kernels ms | span ms | mean block us | tail ms | blocks at once |")
    print("| --- | --- | --- | --- | --- | --- |")
    for parts, ms, span, mean, tail, conc in summary:
        print(f"| 1/{parts} | {ms:.2f} | {span:.2f} | {mean:.1f} | {tail:.2f} | {conc:.0f} |")
    if vrows:
        print("\n| documents | build | kernels ms | default ms | build / default | same results |")
        print("| --- | --- | --- | --- | --- | --- |")
        for parts, name, vms, ms, same in vrows:
            print(f"| 1/{parts} | {name} | {vms:.2f} | {ms:.2f} | {vms / ms:.2f}x | {'yes' if same else 'NO'} |")


def main(argv=None) -> int:
    args = parse_args(argv)
    import cupy

    from cutext.kernels import _cuda
    from cutext.kernels import search as ks
    from cutext.stages.engines import bm25_index as bi

    queries = bench.Corpus(bench.find_20news(args.data)).queries(args.batch_size)
    index = bi.BM25Index.load(args.index, backend="gpu")
    sm = index._sm
    Q = index.query_matrix(queries)
    q_ptr, q_terms = np.asarray(Q.indptr, np.int64), np.asarray(Q.indices, np.int64)
    nq = len(q_ptr) - 1
    print(f"index {args.index}: {sm.n_docs:,} documents, {int(sm.indices32.size):,} postings; {nq} queries, "
          f"{len(q_terms):,} query terms, k={args.k}")

    def timed(fn):
        ev = [cupy.cuda.Event(), cupy.cuda.Event()]
        out = []
        for _ in range(args.repeats + 1):
            ev[0].record()
            fn()
            ev[1].record()
            ev[1].synchronize()
            out.append(cupy.cuda.get_elapsed_time(ev[0], ev[1]))
        return float(np.median(out[1:]))

    variants = []
    for v in args.variant:
        name, _, spec = v.partition("=")
        if spec.startswith("@"):
            text = Path(spec[1:]).read_text()
            variants.append((name, f"search-{name}.cu", (), text))
        else:
            variants.append((name, ks.SOURCE, tuple(spec.split()), None))
    real_source = _cuda.source

    def source(name):
        for _, src, _, text in variants:
            if text is not None and name == src:
                return text
        return real_source(name)

    _cuda.source = source
    summary, vrows = [], []
    for parts in [int(p) for p in args.parts.split(",")]:
        hi = -(-sm.n_docs // parts)
        indptr, indices, data = ((sm.indptr64, sm.indices32, sm.matrix.data) if parts == 1
                                 else doc_range(sm.indptr64, sm.indices32, sm.matrix.data, 0, hi))
        n_docs = hi if parts > 1 else sm.n_docs
        df = np.diff(indptr.get())
        cs = np.concatenate([[0], np.cumsum(df[q_terms])])
        post = cs[q_ptr[1:]] - cs[q_ptr[:-1]]  # postings of each query's terms
        ws = ks.Workspace()

        def run(indptr=indptr, indices=indices, data=data, n_docs=n_docs, ws=ws, df=df):  # this part's arrays
            return ks.search_tiled_start(indptr, indices, data, n_docs, q_ptr, Q.indices, Q.data, args.k,
                                         workspace=ws, term_postings=df)()

        ms = timed(run)
        want = run()
        real, real_src = ks._cuda, ks.SOURCE
        for name, src, opts, _ in variants + ([("batch-order", ks.SOURCE, (), None)] if args.batch_order else []):
            ks._cuda, ks.SOURCE = _cuda.Options(opts), src
            ks.ORDER_BY_COST = name != "batch-order"
            try:
                vms = timed(run)
                got = run()
            finally:
                ks._cuda, ks.SOURCE, ks.ORDER_BY_COST = real, real_src, True
            same = all(np.array_equal(x, y) for x, y in zip(got, want))
            vrows.append((parts, name, vms, ms, same))
        ks._cuda = _cuda.Options(PROFILE_OPTIONS)
        try:
            ms_prof = timed(run)
            prof = _cuda.module(ks.SOURCE, _cuda.COMPILE_OPTIONS + PROFILE_OPTIONS).get_global("sb_prof")
            rec = cupy.ndarray((PROFILE_BLOCKS, PROFILE_SLOTS), cupy.uint64, prof).get()[:nq].astype(np.int64)
        finally:
            ks._cuda = real
        summary.append(report_blocks(rec, post, q_ptr, parts, n_docs, int(indices.size), ms, ms_prof))
    print_tables(summary, vrows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
