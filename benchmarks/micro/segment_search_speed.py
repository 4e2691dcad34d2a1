"""The CPU search of a segmented index segment by segment (query-time weights) beside the merged matrix's, in one
process, on the same query CSR: queries a second of the engines alone (``SegmentSearch.topk`` against the merged
``SearchMatrix.topk``, tokenization excluded) and of ``BM25Index.search`` end to end.

20 Newsgroups as JSON Lines (``benchmarks/index_costs.py``'s files: x4 in 4 parts and 1x "more"), built x4 (a
segment a part) then ``--appends`` 1x appended without merges (``on_duplicate="keep"``), so x(4 + appends) in
4 + appends segments; loaded twice, with ``MERGE_AFTER = None`` (never merged: per segment) and ``0`` (merged at
the load).  Queries: the posts' Subject lines, top 10, in batches of 10 (as between near-real-time refreshes)
and of 4,000; the two engines alternated, medians of ``--repeats``.  Each run of the per-segment form starts as a
refresh leaves it (no weights kept from earlier batches, where the code keeps them), but for the row "the same 50
again".  Both return the same bits (checked).

    python benchmarks/micro/segment_search_speed.py [--work /tmp/segsearch-speed] [--appends 8] [--repeats 7]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1]))

import index_costs  # noqa: E402


def _index(work: Path, data: str | None, appends: int) -> Path:
    """``work/ix-<appends>``: x4 built, then ``appends`` 1x appended without merges (made once)."""
    from cutext import pipelines

    ix = work / f"ix-{appends}"
    if (ix / "index.json").exists():
        return ix
    index_costs.SIZES = (1, 4)  # the files of x1 (queries), x4 and "more" only
    index_costs._corpus(work, data)
    kw = dict(backend="cpu", progress=False)
    pipelines.run("bm25", str(work / "x4"), out=str(ix), **kw)
    for _ in range(appends):
        pipelines.run("bm25", str(work / "more"), out=str(ix), append=True, merge_policy="none",
                      on_duplicate="keep", **kw)
    return ix


def _cold(form) -> None:
    """The per-segment form as a refresh leaves it: no weights kept from earlier batches (where it keeps them)."""
    if hasattr(form, "drop_weights"):
        form.drop_weights()


def main(argv=None) -> int:
    import numba

    from cutext.stages.engines import bm25_index
    from cutext.stages.engines.bm25_index import BM25Index

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="/tmp/segsearch-speed", help="folder for the corpus files and the index")
    ap.add_argument("--data", default=None, help="the data folder (holding corpora/20news-bydate.tar.gz)")
    ap.add_argument("--appends", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=None, help="numba threads of the engines (default: all)")
    args = ap.parse_args(argv)
    if args.threads:
        numba.set_num_threads(args.threads)  # search() too
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    ix = _index(work, args.data, args.appends)
    bm25_index.MERGE_AFTER = None
    seg = BM25Index.load(ix, backend="cpu")
    bm25_index.MERGE_AFTER = 0
    merged = BM25Index.load(ix, backend="cpu")
    bm25_index.MERGE_AFTER = None  # the per-segment index never merges in the timed searches
    assert seg._seg is not None and merged._matrix is not None
    texts = index_costs._queries(work)
    small = [seg.query_matrix(texts[i:i + 10]) for i in range(0, 50, 10)]
    big = [seg.query_matrix(texts)]
    for a, b in zip(seg._seg.topk(big[0], 10, args.threads), merged._sm.topk(big[0], 10, "cpu", None, args.threads)):
        np.testing.assert_array_equal(a, b)  # the same bits, the same ties
    engines = {"per segment": lambda Q: seg._seg.topk(Q, 10, args.threads),
               "merged": lambda Q: merged._sm.topk(Q, 10, "cpu", None, args.threads)}
    ends = {"per segment": lambda b: seg.search(b, k=10), "merged": lambda b: merged.search(b, k=10)}
    fifty = [texts[i:i + 10] for i in range(0, 50, 10)]
    cases = [  # (what, functions, batches, whether the per-segment form starts as a refresh leaves it)
        ("engine, 50 queries in batches of 10", engines, small, True),
        ("engine, the same 50 again", engines, small, False),
        ("engine, 4,000 queries in one batch", engines, big, True),
        ("search(), 50 queries in batches of 10", ends, fifty, True),
        ("search(), 4,000 queries in one batch", ends, [texts], True)]
    n_post = seg._seg.n_postings
    print(f"index: {len(seg._seg.parts)} segments, {seg.n_docs:,} documents, {n_post:,} postings; "
          f"threads {args.threads or 'all'}; medians of {args.repeats}")
    print(f"{'what':<40} {'per segment q/s':>16} {'merged q/s':>12} {'ratio':>7}")
    for what, fns, batches, cold in cases:
        for fn in fns.values():
            fn(batches[0])  # compiled and warm
        got = {name: [] for name in fns}
        for _ in range(args.repeats):  # alternated, so a change of the machine's load falls on both
            for name, fn in fns.items():
                if name == "per segment":
                    _cold(seg._seg) if cold else [fn(b) for b in batches]
                t = time.perf_counter()
                for b in batches:
                    fn(b)
                got[name].append(time.perf_counter() - t)
        nq = sum(b.shape[0] if hasattr(b, "shape") else len(b) for b in batches)
        rate = {name: nq / statistics.median(r) for name, r in got.items()}
        print(f"{what:<40} {rate['per segment']:>16,.0f} {rate['merged']:>12,.0f} "
              f"{rate['per segment'] / rate['merged']:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
