#!/usr/bin/env python
"""lda's defaults chosen by measurement: topics, stop list and document-frequency pruning on corpora of several sizes.

Data: the raw-text corpora of the shared data folder (``--data DIR``, ``$CUTEXT_SHARED_DATA``, or ``../shared/data``
beside the checkout), through :func:`cutext.pipelines.datasets.shared_corpora`.  Each corpus is shuffled (``--seed``);
a fifth of it (at most ``--heldout`` documents) is held out, the rest (at most ``--max-docs``) trains.

Corpora, in four groups, each first run after the choices the groups before it led to:

* tuning (K="auto", min_df=2 and max_df=0.3 chosen with Snowball's list): ``cacm`` (CACM titles and abstracts with
  their reference lists, short), ``reuters`` (Reuters-21578 news stories), ``20news`` (20 Newsgroups posts, mail
  headers included);
* check 1 (``lee`` had 17 % stopwords: max_df moved to 0.2): ``lee`` (gensim's Lee background corpus, 300
  Australian news stories, the kind of the issue's BBC corpus at a seventh of its size), ``movie_reviews`` (NLTK,
  2,000 long reviews), ``scifact`` (BEIR SciFact, 5,183 abstracts);
* check 2 (``abc`` had 23 %, which no max_df reaches in documents of a sentence: the stop list moved to
  ``"english-topics"``): ``abc`` (NLTK's ABC news items, a sentence or two each), ``speeches`` (NLTK's 59 inaugural
  and 65 State of the Union addresses, the longest and fewest);
* fresh (first run with the defaults of then, max_df=0.2, 8.2 % and 1.4 %): ``webtext`` (NLTK's web text, a line
  each: forum posts, overheard talk, personal ads, wine notes), ``brown`` (the Brown corpus, 500 samples of 15
  genres, POS tags removed).

With the larger list, max_df=0.3 met the bound on all ten corpora and kept subject words that 0.2 drops
(``government`` in Lee, ``protein`` in SciFact, ``company`` in Reuters): the final default, compared on all ten
after the fact (section ``max_df``).

Each row trains ``pipelines.run("lda", ...)`` on the CPU backend with ``--iterations`` (100, the default) and the
row's settings; every setting it leaves out is the pipeline's default at the time of the run.  ``K="auto"`` is the
pipeline's rule from the number of documents (:func:`cutext.pipelines.lda.auto_topics`).  Columns:

``stop%``
    top-10 words of all topics that are in the judging list: scikit-learn's ``ENGLISH_STOP_WORDS`` (318 words, the
    Glasgow list) together with Snowball's English list (146 tokens), so a row filtering with Snowball's list is
    judged by the 199 words Snowball does not hold (``will``, ``also``, ``one``, ``can``, ``may`` ...).  A row
    that filters with scikit-learn's list scores 0 by construction (marked ``*``).
``filler%``
    topics of which at least 5 of the 10 top words are *general*: in the judging list or in more than a quarter of
    the held-out documents (the issue's ``said will think make people like way just``).
``NPMI``
    mean over topics of the normalized PMI of the pairs of a topic's 10 top words (Bouma 2009), probabilities from
    document co-occurrence in the held-out documents with every token kept; a pair that never co-occurs counts -1.
``div``
    topic diversity (Dieng, Ruiz and Blei 2020): distinct words among all top-10 lists / 10 K.
``s``
    seconds of the run (read, tokenize, sample, write), on the CPU backend.

``--json PATH`` writes the environment and all rows (default ``benchmarks/results/lda_defaults-cpu-<date>.json``).
About 5 minutes on 2 shared cores for the default section, 8 with ``final,max_df,lists``.  Needs scikit-learn (the
judging list).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from defaults import Cooccurrence  # noqa: E402  (NPMI by document co-occurrence)

import bm25 as bench  # noqa: E402  (the benchmarks' environment record)

T0 = time.monotonic()
GROUPS = {"cacm": "tuning", "reuters": "tuning", "20news": "tuning", "lee": "check 1", "movie_reviews": "check 1",
          "scifact": "check 1", "abc": "check 2", "speeches": "check 2", "webtext": "fresh", "brown": "fresh"}
LOADERS = {"reuters": ("reuters21578",), "20news": ("20news",), "cacm": ("cacm",),
           "lee": ("gensim-lee_background.cor",), "movie_reviews": ("nltk-movie_reviews",), "scifact": ("scifact",),
           "abc": ("nltk-abc",), "speeches": ("nltk-inaugural", "nltk-state_union"), "webtext": ("nltk-webtext",),
           "brown": ("nltk-brown",)}
# a top word in more than this share of the held-out documents is general (the filler column)
GENERAL_DF = 0.25
# a topic with at least this many general words among its 10 top words is filler
FILLER_MIN = 5


def log(msg):
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def sklearn_stopwords() -> frozenset:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def judge_list() -> frozenset:
    from cutext.stages.text.tokenize import ENGLISH_STOPWORDS

    return sklearn_stopwords() | ENGLISH_STOPWORDS


def topics_for(n_docs: int) -> int:
    """K of ``K="auto"``: the pipeline's rule where it has one, else sqrt(n / 2) in [10, 100]."""
    try:
        from cutext.pipelines.lda import auto_topics
    except ImportError:
        return int(min(100, max(10, round((n_docs / 2) ** 0.5))))
    return auto_topics(n_docs)


def sections() -> dict:
    """name -> list of (label, settings).  The sweeps (``K`` .. ``neighbours``) ran on the tuning group with Snowball's
    list (``"english"``, the stop list before ``"english-topics"``), which they pin; ``lists`` and ``final`` compare
    the final defaults with the old ones and with other lists."""
    sb = {"stopwords": "english", "min_df": 1}
    sweep_df = [(f"max_df={m:g}", {"max_df": m}) for m in (1.0, 0.5, 0.3, 0.2, 0.1)]
    return {
        "K": [(f"K={k} max_df=1", {**sb, "K": k, "max_df": 1.0}) for k in (100, 20, "auto")],
        "max_df@K100": [(f"K=100 {lab}", {**sb, "K": 100, **kw}) for lab, kw in sweep_df],
        "max_df@Kauto": [(f"K=auto {lab}", {**sb, "K": "auto", **kw}) for lab, kw in sweep_df],
        "min_df": [(f"K=auto max_df=0.3 min_df={m}", {**sb, "K": "auto", "max_df": 0.3, "min_df": m})
                   for m in (1, 2, 5)],
        "stoplist": [("K=auto max_df=0.3 lucene", {**sb, "K": "auto", "max_df": 0.3, "stopwords": "lucene"}),
                     ("K=auto max_df=1 sklearn*", {**sb, "K": "auto", "max_df": 1.0, "stopwords": "sklearn"}),
                     ("K=auto max_df=0.3 sklearn*", {**sb, "K": "auto", "max_df": 0.3, "stopwords": "sklearn"})],
        "candidates": [(f"K={k} max_df={m:g} min_df=2", {**sb, "K": k, "max_df": m, "min_df": 2})
                       for k, m in ((20, 0.3), ("auto", 0.5), ("auto", 0.3), ("auto", 0.2))],
        "neighbours": [(f"K={k} max_df={m:g} min_df=2", {**sb, "K": k, "max_df": m, "min_df": 2})
                       for k, m in ((20, 0.2), ("auto", 0.5), ("auto", 0.3))],
        "lists": [("new defaults, Snowball's list only", {"stopwords": "english"}),
                  ("new defaults, Snowball+sklearn lists*", {"stopwords": "snowball+sklearn"})],
        "max_df": [(f"new defaults, max_df={m:g}", {"max_df": m}) for m in (0.2, 0.5)],
        "final": [("old defaults (K=100, Snowball, no pruning)", {**sb, "K": 100, "max_df": 1.0}),
                  ("new defaults", {})],
    }


def load(name: str, data_dir: Path, args):
    """(train texts, held-out texts) of a corpus, shuffled with the seed."""
    from cutext.pipelines import datasets

    corpora = datasets.shared_corpora(data_dir)
    if name == "webtext":  # a line a document, as abc
        texts = datasets.load_nltk_zip(data_dir / "corpora" / "nltk" / "webtext.zip", lines=True)["text"].tolist()
    else:
        texts = [t for key in LOADERS[name] for t in corpora[key]()["text"].tolist()]
    if name == "brown":  # word/TAG tokens: the words alone
        texts = [re.sub(r"/\S+", "", t) for t in texts]
    texts = [t for t in texts if t.strip()]
    order = np.random.default_rng(args.seed).permutation(len(texts))
    n_held = min(args.heldout, len(texts) // 5)
    held = [texts[i] for i in order[:n_held]]
    train = [texts[i] for i in order[n_held:n_held + args.max_docs]]
    return train, held


def scores(topics, ref: Cooccurrence, held_df: dict, judge: frozenset) -> dict:
    words = [w for t in topics for w in t]

    def general(w):
        return w in judge or held_df.get(w, 0.0) > GENERAL_DF

    return {"stop_share": float(np.mean([w in judge for w in words])),
            "filler_share": float(np.mean([sum(general(w) for w in t) >= FILLER_MIN for t in topics])),
            "npmi": float(np.mean([ref.npmi(t) for t in topics])), "diversity": len(set(words)) / len(words)}


def run_row(name, label, settings, train, ref, held_df, judge, args, workdir) -> dict:
    import pandas as pd

    from cutext import pipelines
    from cutext.pipelines.lda import LDAModel

    kw = dict(settings)
    if kw.get("K") == "auto":
        kw["K"] = topics_for(len(train))
    if kw.get("stopwords") == "sklearn":
        kw["stopwords"] = sorted(sklearn_stopwords())
    elif kw.get("stopwords") == "snowball+sklearn":
        from cutext.stages.text.tokenize import ENGLISH_STOPWORDS

        kw["stopwords"] = sorted(ENGLISH_STOPWORDS | sklearn_stopwords())
    frame = pd.DataFrame({"source_id": [str(i) for i in range(len(train))], "text": train})
    t = time.perf_counter()
    r = pipelines.run("lda", frame, out=workdir / f"lda-{name}-{label.replace(' ', '_').replace('=', '')}",
                      text_column="text", id_column="source_id", iterations=args.iterations, seed=args.seed,
                      backend="cpu", progress=False, **kw)
    secs = time.perf_counter() - t
    m = LDAModel.load(r.path)
    tw = m.top_words(10)
    topics = [g["term"].tolist() for _, g in tw.groupby("topic")]
    pruning = m.params.get("pruning") or {}
    row = {"corpus": name, "group": GROUPS[name], "setting": label,
           "settings": settings, "n_docs": len(train), "K": int(m.params["K"]), "V": int(m.params["V"]),
           "tokens": int(m.params["n_tokens"]), "stopwords": m.params.get("stopwords"),
           "min_df": m.params.get("min_df"), "max_df": m.params.get("max_df"),
           "pruned_top": pruning.get("most_frequent_removed"),
           **scores(topics, ref, held_df, judge), "seconds": secs,
           "stop_hits": Counter(w for t in topics for w in t if w in judge).most_common(12),
           "topics": [" ".join(t) for t in topics]}
    log(f"{name} {label}: K={row['K']} V={row['V']:,} stop {100 * row['stop_share']:.1f} % filler "
        f"{100 * row['filler_share']:.0f} % NPMI {row['npmi']:.3f} div {row['diversity']:.2f} ({secs:.1f} s); "
        f"{row['topics'][0]}")
    return row


def table(rows) -> str:
    out = [f"{'corpus':<14}{'group':<9}{'setting':<44}{'docs':>7}{'K':>5}{'V':>8}{'stop%':>7}{'filler%':>8}"
           f"{'NPMI':>7}{'div':>6}{'s':>7}"]
    for r in rows:
        out.append(f"{r['corpus']:<14}{r['group']:<9}{r['setting']:<44}{r['n_docs']:>7,}{r['K']:>5}{r['V']:>8,}"
                   f"{100 * r['stop_share']:>7.1f}{100 * r['filler_share']:>8.0f}{r['npmi']:>7.3f}"
                   f"{r['diversity']:>6.2f}{r['seconds']:>7.1f}")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=None, help="shared data folder (default $CUTEXT_SHARED_DATA)")
    p.add_argument("--corpora", default=",".join(GROUPS), help="comma-separated, small first")
    p.add_argument("--sections", default="final", help=f"comma-separated of {', '.join(sections())}")
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--max-docs", type=int, default=4000, help="training documents a corpus at most")
    p.add_argument("--heldout", type=int, default=1000, help="held-out documents a corpus at most")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    data_dir = args.data or Path(os.environ.get("CUTEXT_SHARED_DATA") or Path(__file__).resolve().parents[2]
                                 / "shared" / "data")
    from cutext.stages.runtime.artifacts import ArtifactError
    from cutext.stages.text.tokenize import TokenizerConfig, tokenize_texts

    env = bench.environment(("scikit-learn",))
    judge = judge_list()
    plan = sections()
    chosen = [s for s in args.sections.split(",") if s]
    unknown = [s for s in chosen if s not in plan]
    if unknown:
        p.error(f"--sections: unknown {unknown}; choose from {list(plan)}")
    print(f"cutext lda defaults benchmark, {datetime.datetime.now():%Y-%m-%d %H:%M:%S}, {os.cpu_count()} CPUs; "
          f"{args.iterations} iterations, seed {args.seed}; judging list: scikit-learn ENGLISH_STOP_WORDS + Snowball "
          f"English ({len(judge)} words); filler: >= {FILLER_MIN} of 10 top words in that list or in > "
          f"{100 * GENERAL_DF:.0f} % of the held-out documents; NPMI on the held-out documents")
    rows, failures = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in [c for c in args.corpora.split(",") if c]:
            train, held = load(name, data_dir, args)
            held_tokens = tokenize_texts(held, TokenizerConfig.make())  # every token: the NPMI reference
            ref = Cooccurrence(held_tokens)
            df = np.asarray(ref.X.sum(0)).ravel() / max(ref.D, 1)
            held_df = {w: float(df[i]) for w, i in ref.index.items()}
            log(f"{name}: {len(train):,} training, {len(held):,} held-out documents")
            seen = set()
            for section in chosen:
                for label, settings in plan[section]:
                    if label in seen:
                        continue
                    seen.add(label)
                    try:
                        rows.append(run_row(name, label, settings, train, ref, held_df, judge, args, Path(tmp)))
                    except ArtifactError as e:  # a model the pipeline wrote but cannot read back: a fault, reported
                        log(f"{name} {label}: FAILED, the model does not load: {e}")
                        failures.append({"corpus": name, "setting": label, "error": str(e)})
    print(table(rows))
    for f in failures:
        print(f"FAILED {f['corpus']} {f['setting']}: {f['error']}")
    print("\nthe judging list's words among the top 10 (times), and topics 0..2 of each row:")
    for r in rows:
        print(f"  {r['corpus']} {r['setting']}: {' '.join(f'{w}:{n}' for w, n in r['stop_hits'])}; pruned "
              f"(most frequent): {' '.join(r['pruned_top'] or [])}")
        print(f"    {' | '.join(r['topics'][:3])}")
    if args.json is None:
        args.json = Path(__file__).parent / "results" / f"lda_defaults-cpu-{datetime.date.today():%Y-%m-%d}.json"
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"environment": env, "args": {k: str(v) for k, v in vars(args).items()},
                                         "rows": rows, "failures": failures}, indent=1, default=str))
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
