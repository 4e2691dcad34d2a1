"""The word-break kernels of ``analyzer="anserini"`` (kernels/wordbreak.py) on the CPU, phase by phase.

The numba twins of :func:`cutext.kernels.wordbreak.standard_token_bounds` on the text of 20 Newsgroups
(``--corpus``: a corpus of ``cutext.pipelines.datasets.CORPORA``), its posts as one strings column; each row is
the median of ``--repeats`` runs, in seconds and MB/s of text:

- ``flags``: ``_segment_flags`` (a word-boundary decision a byte);
- ``pieces``: ``_pieces_cpu`` twice (count, then write: the pieces of every segment);
- ``joins``: the rest of ``standard_token_bounds`` (joins of South East Asian runs, their cuts, the rows);
- ``total``: ``standard_token_bounds`` end to end, timed on its own.

The twins are compiled (or loaded from numba's cache) by a run that is not timed.  ``--full-rules`` times the
twins without their ASCII fast paths (:func:`~cutext.kernels.wordbreak.ascii_pairs` all "undecided", every
segment through the full scan), as they were before those.

    python benchmarks/micro/wordbreak.py [--corpus 20news] [--repeats 5] [--full-rules]
"""
from __future__ import annotations

import argparse
import statistics
import time


def _median(fn, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def corpus_buffers(corpus: str):
    """(data uint8, offsets int64) of the corpus's texts as one large_string column."""
    import pyarrow as pa

    from cutext.kernels.tokenize import arrow_buffers
    from cutext.pipelines.datasets import CORPORA, fetch

    dataset, load = CORPORA[corpus]
    texts = load(fetch(dataset, download=False))["text"].tolist()
    return arrow_buffers(pa.array(texts, type=pa.large_string()))


def phases(data, offsets, repeats):
    """{phase: median seconds} and the number of tokens."""
    import numpy as np

    from cutext.kernels import wordbreak as W

    body, bound, _ = W._buffers(data, offsets)
    flags = W._segment_flags_of(body, bound)
    got = W._pieces(body, bound, flags)
    ps, pe, pf = got
    tokens = W.standard_token_bounds(data, offsets)

    def joins():  # standard_token_bounds's array code after the pieces, as it runs there
        join = np.zeros(len(ps), bool)
        join[1:] = (pf[1:] == 1) & (pf[:-1] == 1) & (pe[:-1] == ps[1:]) & (bound[ps[1:]] == 0)
        head = np.flatnonzero(~join)
        last = np.empty_like(head)
        last[:-1] = head[1:] - 1
        last[-1:] = len(ps) - 1
        starts, ends = ps[head], pe[last]
        if bool(pf.any()):
            starts, ends = W._cut_long(body, starts, ends, pf[head] == 1)
        np.searchsorted(np.asarray(offsets, dtype=np.int64), starts, side="right")

    out = {
        "flags": _median(lambda: W._segment_flags_of(body, bound), repeats),
        "pieces": _median(lambda: W._pieces(body, bound, flags), repeats),
        "joins": _median(joins, repeats),
        "total": _median(lambda: W.standard_token_bounds(data, offsets), repeats),
    }
    n_segments = int(flags.sum())
    return out, len(tokens[0]), n_segments


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="20news")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--full-rules", action="store_true",
                    help="no ASCII fast path: the full rules for every byte and every segment")
    args = ap.parse_args(argv)
    from cutext.kernels import wordbreak as W

    if args.full_rules:
        import numpy as np

        undecided = np.full_like(W.ascii_pairs(), W.PAIR_UNDECIDED)
        W.ascii_pairs = lambda: undecided
        pieces = W._pieces_cpu
        W._pieces_cpu = lambda *a: pieces(*a, False)
    mode = "full rules" if args.full_rules else "ASCII fast paths" if hasattr(W, "ascii_pairs") else "no fast paths"
    data, offsets = corpus_buffers(args.corpus)
    W.standard_token_bounds(data[:100_000], offsets[offsets <= 100_000])  # compile (not timed)
    times, n_tokens, n_segments = phases(data, offsets, args.repeats)
    mb = len(data) / 1e6
    print(f"{args.corpus}: {mb:.1f} MB, {len(offsets) - 1} rows, {n_segments} segments, {n_tokens} tokens; "
          f"medians of {args.repeats}, {mode}")
    print("| phase | s | MB/s | ns/byte | ns/segment |\n| --- | --- | --- | --- | --- |")
    for name, s in times.items():
        print(f"| {name} | {s:.3f} | {mb / s:.1f} | {s * 1e9 / len(data):.1f} | {s * 1e9 / n_segments:.0f} |")


if __name__ == "__main__":
    main()
