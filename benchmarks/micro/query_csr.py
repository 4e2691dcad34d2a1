"""The host side of a search batch, part by part, on this machine's cores: the query CSR
(``BM25Index.query_matrix``: :func:`normalize_texts` and the numba split + lookup,
:func:`cutext.kernels.termhash.text_csr`) at several numba thread counts, and the top-k merge of two
shards (``merge_topk``).  The index is 20 Newsgroups (one line per post, built on the CPU; the query
CSR depends on the vocabulary only), the queries its Subject lines, in batches of ``--batch-size``.

    python benchmarks/micro/query_csr.py [--threads 1,2,4,16,64]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1]))

import bm25 as bench  # noqa: E402


def _per_query(fn, batches, repeats=5):
    fn(batches[0])
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        for b in batches:
            fn(b)
        out.append((time.perf_counter() - t) / sum(len(b) for b in batches) * 1e6)
    return statistics.median(out)


def main(argv=None) -> int:
    import numba

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="")
    ap.add_argument("--batch-size", type=int, default=8192)
    ap.add_argument("--n-queries", type=int, default=65536)
    args = ap.parse_args(argv)

    from cutext import pipelines
    from cutext.stages.engines import search as search_stage
    from cutext.stages.engines.bm25_index import BM25Index
    from cutext.stages.text.tokenize import normalize_texts

    corpus = bench.Corpus(bench.find_20news(None))
    work = Path(tempfile.mkdtemp())
    src = bench.corpus_folder(None, work, 0)
    tok_c, _ = bench.tokenizer_kwargs("plain")
    r = pipelines.run("bm25", str(src), out=str(work / "ix"), backend="cpu", format="lines", progress=False, **tok_c)
    idx = BM25Index.load(r.path, backend="cpu")
    qs = corpus.queries(args.n_queries)
    batches = [qs[s:s + args.batch_size] for s in range(0, len(qs), args.batch_size)]
    ncpu = numba.config.NUMBA_NUM_THREADS
    counts = [int(x) for x in args.threads.split(",") if x] or sorted({1, 2, 4, 8, 16, ncpu} & set(range(1, ncpu + 1)))
    idx.query_matrix(batches[0])
    print(f"numba {numba.__version__}, threading layer {numba.threading_layer()}, {ncpu} threads; "
          f"{len(qs):,} queries in batches of {args.batch_size}; V = {len(idx.vocab):,}")
    print("| part | threads | us / query | queries/s |")
    print("| --- | --- | --- | --- |")
    us = _per_query(lambda b: normalize_texts(b, True), batches)
    print(f"| normalize_texts | 1 | {us:.3f} | {1e6 / us:,.0f} |")
    for n in [None] + counts:  # None: the default (a thread per QUERIES_PER_THREAD queries)
        us = _per_query(lambda b: idx.query_matrix(b, n_threads=n), batches)
        print(f"| query_matrix | {'default' if n is None else n} | {us:.3f} | {1e6 / us:,.0f} |")
    rng = np.random.default_rng(0)
    nq, k = args.batch_size, 10
    parts = []
    for lo in (0, 500_000):
        score = -np.sort(-rng.random((nq, k), dtype=np.float32), axis=1)
        parts.append((rng.integers(lo, lo + 500_000, (nq, k)), score, np.full(nq, k, np.int32)))
    us = _per_query(lambda _: search_stage.merge_topk(parts, k), [[0] * nq] * 4)
    print(f"| merge_topk, 2 shards, k={k} | 1 | {us:.3f} | {1e6 / us:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
