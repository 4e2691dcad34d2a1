#!/usr/bin/env python
"""Write the tokenized text of the larger benchmark model (``benchmarks/ngram.py --model ...``).

Training text: 20 Newsgroups "bydate" train posts + Reuters-21578 story bodies; held-out text: 20
Newsgroups test posts (first ``--heldout-lines`` lines). One output line per non-blank input line, tokens =
cutext's tokenizer (lowercased runs of letters, digits and ``_``), separated by one space. The model is
then built with KenLM's lmplz (from the kenlm sdist, see benchmarks/README.md)::

    python benchmarks/ngram_corpus.py .devdata
    lmplz -o 5 -S 2G --prune 0 0 1 1 1 --discount_fallback < .devdata/news-reuters.train.tok.txt \\
        | gzip > .devdata/news-reuters.o5.arpa.gz
"""
from __future__ import annotations

import argparse
from pathlib import Path

from cutext.pipelines.datasets import default_data_dir, load_20newsgroups, load_reuters21578
from cutext.stages.text.tokenize import TokenizerConfig, tokenize_texts


def _lines(texts):
    return [line for t in texts for line in t.split("\n") if line.strip()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dest", help="output folder")
    ap.add_argument("--data", default=None, help="shared data folder (default: $CUTEXT_DATA or ../shared/data)")
    ap.add_argument("--heldout-lines", type=int, default=30000)
    args = ap.parse_args(argv)
    d = Path(args.data or default_data_dir()) / "corpora"
    news = load_20newsgroups(d / "20news-bydate.tar.gz")
    reut = load_reuters21578(d / "reuters21578.tar.gz", with_body_only=True)
    train = _lines(news[news.split == "train"].text) + _lines(reut.text)
    test = _lines(news[news.split == "test"].text)
    dest = Path(args.dest)
    dest.mkdir(parents=True, exist_ok=True)
    cfg = TokenizerConfig.make()
    for name, lines, limit in (("train", train, None), ("heldout", test, args.heldout_lines)):
        n_lines = n_tok = 0
        with open(dest / f"news-reuters.{name}.tok.txt", "w", encoding="utf-8") as fh:
            for toks in tokenize_texts(lines, cfg):
                if toks and (limit is None or n_lines < limit):
                    fh.write(" ".join(toks) + "\n")
                    n_lines += 1
                    n_tok += len(toks)
        print(f"{name}: {n_lines} lines, {n_tok} tokens")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
