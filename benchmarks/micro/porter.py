"""Porter's stemmer (Lucene's): the Python reference against the numba kernel, with the conversions around it.

The words are the distinct terms the ``anserini`` analyzer hands its stemmer on 20 Newsgroups (``--corpus``:
a corpus of ``cutext.pipelines.datasets.CORPORA``), and ``--replicate`` words made by repeating them (each
copy's words given a distinct prefix letter run, so the copies stem as new words of the same shapes).  Each row
is the median of ``--repeats`` runs, seconds:

- ``python``: ``[porter_stem(w) for w in words]`` (the reference);
- ``list -> list``: :func:`cutext.stages.text.porter.porter_stems` on the list (pyarrow array in, kernel,
  ``to_pylist`` out), and its parts: ``pa.array``, the kernel on the array (``porter_stem_array``), ``to_pylist``;
- ``arrow -> arrow``: ``porter_stem_array`` alone (what the build paths call: the terms are Arrow already), on
  numba's threads and on one;
- ``term map before``: what the ``lucene_porter`` term maps did before the kernel on words new to the memo
  (``to_pylist``, the Python stemmer, ``pa.array``), the memo's own costs left out.

The kernel is compiled (or loaded from numba's cache) before the first timed run.

    python benchmarks/micro/porter.py [--corpus 20news] [--replicate 2000000] [--repeats 5]
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


def distinct_terms(corpus: str) -> list[str]:
    """The words the stemmer gets on ``corpus`` with the anserini analyzer (distinct, sorted)."""
    from cutext.pipelines.datasets import CORPORA, fetch
    from cutext.stages.text import tokenizer_config as tc
    from cutext.stages.text.tokenize import tokenize_texts

    dataset, load = CORPORA[corpus]
    texts = load(fetch(dataset, download=False))["text"].tolist()
    seen: set[str] = set()
    real, real_array = tc._stem_fresh, tc.porter_stem_array
    tc._stem_fresh = lambda words, stemmer: seen.update(words) or real(words, stemmer)
    tc.porter_stem_array = lambda words, **kw: seen.update(words.to_pylist()) or real_array(words, **kw)
    try:
        tc._stem_memo.clear()
        tc._arrow_memo.clear()
        tokenize_texts(texts, tc.TokenizerConfig.make(analyzer="anserini"))
    finally:
        tc._stem_fresh, tc.porter_stem_array = real, real_array
    if not seen:
        raise SystemExit(f"no word of {corpus} reached the stemmer")
    return sorted(seen)


def replicate(words: list[str], n: int) -> list[str]:
    """``n`` words: ``words``, then copies of them with the prefixes ``b``, ``c``, ... ``bb`` ... (no two alike)."""
    out, k = list(words), 0
    while len(out) < n:
        k += 1
        prefix, q = "", k
        while q:
            q, r = divmod(q - 1, 20)
            prefix += "bcdfghjklmnpqrstvwxz"[r]
        out.extend(prefix + w for w in words)
    return out[:n]


def rows(words, repeats):
    import pyarrow as pa

    from cutext.kernels.backend import numba_threads
    from cutext.stages.text.porter import porter_stem, porter_stem_array, porter_stems

    def one_thread():
        with numba_threads(1):
            porter_stem_array(arr)

    arr = pa.array(words, type=pa.large_string())
    stems = porter_stem_array(arr)  # compiled or loaded here, not in a timed run
    assert stems.to_pylist() == porter_stems(words)
    return {
        "python": _median(lambda: [porter_stem(w) for w in words], max(1, repeats // 2)),
        "list -> list": _median(lambda: porter_stems(words), repeats),
        "  pa.array": _median(lambda: pa.array(words, type=pa.large_string()), repeats),
        "  kernel (arrow -> arrow)": _median(lambda: porter_stem_array(arr), repeats),
        "  to_pylist": _median(lambda: stems.to_pylist(), repeats),
        "arrow -> arrow, 1 thread": _median(one_thread, repeats),
        "term map before": _median(lambda: pa.array([porter_stem(w) for w in arr.to_pylist()],
                                                    type=pa.large_string()), max(1, repeats // 2)),
    }


def main(argv=None):
    import numba

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="20news")
    ap.add_argument("--replicate", type=int, default=2_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args(argv)
    words = distinct_terms(a.corpus)
    print(f"numba threads {numba.get_num_threads()}")
    for label, ws in ((f"{a.corpus} distinct terms", words), ("replicated", replicate(words, a.replicate))):
        mb = sum(len(w.encode()) for w in ws) / 1e6
        print(f"\n{label}: {len(ws):,} words, {mb:.1f} MB of UTF-8")
        for name, sec in rows(ws, a.repeats).items():
            print(f"{name:28s} {sec:9.4f} s")


if __name__ == "__main__":
    main()
