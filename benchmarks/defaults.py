#!/usr/bin/env python
"""The defaults a first-day user gets: lda and cluster with the old and the new defaults, next to tomotopy and gensim.

Data: 20 Newsgroups "bydate" (all 18,846 posts, the group as label) and Reuters-21578 (stories with a body and
at least one topic, the first topic as label), from ``corpora/`` of the shared data folder (``--data DIR``,
``$CUTEXT_DATA``, or ``../shared/data`` beside the checkout).

Sections
--------
lda
    ``--docs`` (3,000) documents drawn at random (``--seed``) from each corpus train the models, ``--heldout``
    (300) others are folded in.  K = ``--K`` (20; 20 Newsgroups has 20 groups), ``--iterations`` (100) Gibbs
    passes, the CPU backend.  Rows:

    * cutext with the old defaults (no stopwords, alpha = 50 / K);
    * cutext with the new defaults (Snowball's English stop list, alpha = 0.1), and the new defaults with
      alpha = 50 / K (the prior alone), with ``max_df=0.5`` and with ``min_df=5, max_df=0.5`` (gensim's
      ``filter_extremes`` defaults);
    * tomotopy ``LDAModel(k=K)`` and gensim ``LdaModel(num_topics=K)`` with their own defaults (tomotopy: alpha
      0.1, eta 0.01, ``train(--iterations)``; gensim: alpha and eta 1 / K, one pass), fed cutext's tokens
      without stopwords (neither removes any by default) and with the English list removed.  A peer that is
      not installed is skipped, and the output says so.

    Columns: ``NPMI`` -- mean over topics of the normalized PMI of the pairs of a topic's 10 top words
    (Bouma 2009; Aletras and Stevenson 2013), probabilities from document co-occurrence in the training
    documents with every token kept (lowercase, no stopword removed); a pair that never co-occurs counts -1, a
    pair of words in every document 0.  ``div`` -- topic diversity (Dieng, Ruiz and Blei 2020): distinct words
    among all topics' top 10 / (10 K).  ``stop%`` -- top-10 words in a reference stop set: Snowball's English
    list and, where gensim is installed, gensim's ``STOPWORDS`` (the Glasgow list), so it is not the list the
    new default removes.  ``max theta`` -- mean over the held-out documents of their largest topic share
    (cutext ``transform``, tomotopy ``infer``, gensim ``get_document_topics``): near 1 / K means the mixtures
    say nothing.  ``heldout ll`` -- cutext's held-out log-likelihood per token (Moon et al. Eq. 3-4, ln); it
    compares rows with the same vocabulary only.

cluster
    Every labelled document of each corpus (``--cluster-docs`` 0 = all), in one fixed random order, clustered by
    ``pipelines.run("cluster", ...)`` at T = 0.6 (the old default), at the new default, at the value of
    ``suggest_threshold`` and at each of ``--thresholds`` (0.02, 0.1, 0.2, 0.3).  Columns: clusters, classes,
    ``NMI`` against the labels, ``NMI shuf`` -- the NMI of the same clusters against the labels shuffled (what the
    cluster count alone scores: NMI grows with the number of clusters), ``ARI`` (adjusted Rand index, Hubert and Arabie
    1985; 0 = chance).

``--json PATH`` writes the environment and all rows.  About 7 minutes on 2 cores.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))

import bm25 as bench  # noqa: E402  (the benchmarks' environment record)

T0 = time.monotonic()


def log(msg):
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- data

def load_corpora(data_dir: Path) -> dict:
    """name -> DataFrame (source_id, text, label) of every labelled document, in the loader's order."""
    from cutext.pipelines import datasets

    news = datasets.load_20newsgroups(data_dir / "corpora" / "20news-bydate.tar.gz")
    news["label"] = news["group"]
    reut = datasets.load_reuters21578(data_dir / "corpora" / "reuters21578.tar.gz", with_body_only=True)
    reut = reut[reut["topics"].str.len() > 0].copy()
    reut["label"] = reut["topics"].str.split().str[0]
    return {"20news": news[["source_id", "text", "label"]].reset_index(drop=True),
            "reuters": reut[["source_id", "text", "label"]].reset_index(drop=True)}


def reference_stopwords() -> tuple:
    from cutext.stages.text.tokenize import ENGLISH_STOPWORDS

    try:
        from gensim.parsing.preprocessing import STOPWORDS
    except ImportError:
        return frozenset(ENGLISH_STOPWORDS), "Snowball English"
    return frozenset(ENGLISH_STOPWORDS) | frozenset(STOPWORDS), "Snowball English + gensim STOPWORDS"


class Cooccurrence:
    """Document co-occurrence of words in a list of token lists (the NPMI reference)."""

    def __init__(self, token_lists):
        import scipy.sparse as sp

        self.index: dict = {}
        rows, cols = [], []
        for d, toks in enumerate(token_lists):
            for w in set(toks):
                rows.append(d)
                cols.append(self.index.setdefault(w, len(self.index)))
        self.D = len(token_lists)
        self.X = sp.csc_matrix((np.ones(len(rows), np.float64), (rows, cols)), shape=(self.D, len(self.index)))

    def npmi(self, words) -> float:
        """Mean NPMI of the pairs of ``words`` (words absent from the reference are skipped)."""
        ids = [self.index[w] for w in words if w in self.index]
        sub = self.X[:, ids]
        co = (sub.T @ sub).toarray() / self.D
        p = np.diag(co)
        vals = []
        for i in range(len(ids)):
            for j in range(i + 1, len(ids)):
                pij = co[i, j]
                if pij == 0:
                    vals.append(-1.0)
                elif pij >= 1.0:
                    vals.append(0.0)  # both in every document: no information
                else:
                    vals.append(np.log(pij / (p[i] * p[j])) / -np.log(pij))
        return float(np.mean(vals)) if vals else float("nan")


def topic_scores(topics, ref: Cooccurrence, stop) -> dict:
    """NPMI, diversity and stopword share of a list of top-word lists."""
    words = [w for t in topics for w in t]
    return {"npmi": float(np.mean([ref.npmi(t) for t in topics])), "diversity": len(set(words)) / len(words),
            "stop_share": float(np.mean([w in stop for w in words]))}


# ----------------------------------------------------------------------------- lda

def lda_rows(name, train, held, args, stop, workdir) -> list:
    from cutext import pipelines
    from cutext.pipelines.lda import LDAModel
    from cutext.stages.text.tokenize import ENGLISH_STOPWORDS, TokenizerConfig, tokenize_texts

    K, iters = args.K, args.iterations
    raw = tokenize_texts(train["text"].tolist(), TokenizerConfig.make())  # every token: the NPMI reference
    ref = Cooccurrence(raw)
    held_raw = tokenize_texts(held["text"].tolist(), TokenizerConfig.make())
    rows = []
    configs = [("cutext old defaults", {"stopwords": None, "alpha": 50.0 / K}),
               ("cutext new defaults", {}),
               ("cutext new, alpha=50/K", {"alpha": 50.0 / K}),
               ("cutext new, max_df=0.5", {"max_df": 0.5}),
               ("cutext new, min_df=5 max_df=0.5", {"min_df": 5, "max_df": 0.5})]
    for label, kw in configs:
        t = time.perf_counter()
        r = pipelines.run("lda", train, out=workdir / f"lda-{name}-{len(rows)}", text_column="text",
                          id_column="source_id", K=K, iterations=iters, seed=args.seed, backend="cpu",
                          progress=False, **kw)
        secs = time.perf_counter() - t
        m = LDAModel.load(r.path)
        tw = m.top_words(10)
        topics = [g["term"].tolist() for _, g in tw.groupby("topic")]
        theta = m.transform(held["text"].tolist(), iterations=50, backend="cpu")
        row = {"corpus": name, "system": label, "K": K, "alpha": m.alpha, "stopwords": m.params.get("stopwords"),
               "min_df": m.params.get("min_df"), "max_df": m.params.get("max_df"), "V": m.params["V"],
               "tokens": m.params["n_tokens"], **topic_scores(topics, ref, stop),
               "max_theta": float(theta.max(1).mean()),
               "heldout_ll": m.log_likelihood(held["text"].tolist(), iterations=50, backend="cpu"),
               "seconds": secs, "topics": [" ".join(t) for t in topics]}
        rows.append(row)
        log(f"lda {name} {label}: NPMI {row['npmi']:.3f} stop {row['stop_share']:.2f} max theta "
            f"{row['max_theta']:.3f} ({secs:.1f} s); {row['topics'][0]}")
    no_stop = [[w for w in d if w not in ENGLISH_STOPWORDS] for d in raw]
    held_no_stop = [[w for w in d if w not in ENGLISH_STOPWORDS] for d in held_raw]
    for tokens, held_tokens, what in ((raw, held_raw, "no stopwords removed"),
                                      (no_stop, held_no_stop, "English list removed")):
        for peer, fn in (("tomotopy", tomotopy_topics), ("gensim", gensim_topics)):
            try:
                t = time.perf_counter()
                topics, max_theta = fn(tokens, held_tokens, K, iters, args.seed)
            except ImportError:
                log(f"{peer} is not installed: its rows are skipped")
                continue
            secs = time.perf_counter() - t
            rows.append({"corpus": name, "system": f"{peer} defaults, {what}", "K": K,
                         **topic_scores(topics, ref, stop), "max_theta": max_theta, "seconds": secs,
                         "topics": [" ".join(x) for x in topics]})
            log(f"lda {name} {peer} ({what}): NPMI {rows[-1]['npmi']:.3f} ({secs:.1f} s)")
    return rows


def tomotopy_topics(tokens, held_tokens, K, iterations, seed):
    import tomotopy as tp

    mdl = tp.LDAModel(k=K, seed=seed + 1)  # tomotopy's seed 0 draws a random seed
    for toks in tokens:
        if toks:
            mdl.add_doc(toks)
    mdl.train(iterations, workers=1)
    topics = [[w for w, _ in mdl.get_topic_words(k, top_n=10)] for k in range(K)]
    docs = [mdl.make_doc(t) for t in held_tokens if any(w in mdl.used_vocabs for w in t)]
    dist, _ = mdl.infer(docs, workers=1)
    return topics, float(np.mean([np.max(d) for d in dist]))


def gensim_topics(tokens, held_tokens, K, iterations, seed):
    from gensim.corpora import Dictionary
    from gensim.models import LdaModel

    dictionary = Dictionary(tokens)
    bows = [dictionary.doc2bow(t) for t in tokens]
    lda = LdaModel(bows, num_topics=K, id2word=dictionary, random_state=seed)
    topics = [[w for w, _ in lda.show_topic(k, topn=10)] for k in range(K)]
    theta = [max(p for _, p in lda.get_document_topics(dictionary.doc2bow(t), minimum_probability=0.0))
             for t in held_tokens if dictionary.doc2bow(t)]
    return topics, float(np.mean(theta))


# ----------------------------------------------------------------------------- cluster

def ari(labels, clusters) -> float:
    """Adjusted Rand index (Hubert and Arabie 1985)."""
    lab = pd.factorize(pd.Series(labels))[0]
    clu = pd.factorize(pd.Series(clusters))[0]
    n_c = clu.max() + 1
    m = np.bincount(lab * n_c + clu, minlength=(lab.max() + 1) * n_c).reshape(-1, n_c).astype(np.float64)

    def pairs(x):
        return (x * (x - 1) / 2).sum()

    s, a, b, n = pairs(m), pairs(m.sum(1)), pairs(m.sum(0)), pairs(np.array([m.sum()]))
    expected = a * b / n
    return float((s - expected) / ((a + b) / 2 - expected))


def cluster_rows(name, df, args, workdir) -> list:
    import pyarrow.parquet as pq

    from cutext import pipelines
    from cutext.pipelines.cluster import SUGGEST_QUANTILE, cluster_corpus, nmi, suggest_threshold

    default = cluster_corpus.__kwdefaults__["threshold"]
    t = time.perf_counter()
    suggested = suggest_threshold(df, text_column="text", id_column="source_id", backend="cpu")
    log(f"cluster {name}: suggest_threshold = {suggested:.4f} ({time.perf_counter() - t:.1f} s)")
    plan = [("old default", 0.6), ("new default", default), (f"suggest_threshold (q={SUGGEST_QUANTILE:g})", suggested)]
    plan += [("sweep", T) for T in args.thresholds if T not in (0.6, default)]
    rng = np.random.default_rng(args.seed)
    rows = []
    for label, T in plan:
        t = time.perf_counter()
        r = pipelines.run("cluster", df, out=workdir / f"cluster-{name}-{len(rows)}", text_column="text",
                          id_column="source_id", threshold=T, backend="cpu", progress=False)
        secs = time.perf_counter() - t
        a = pq.read_table(Path(r.path) / "assignments.parquet", columns=["doc_id", "cluster_id"]).to_pandas()
        a = a.sort_values("doc_id")
        lab = df["label"].to_numpy()[a["doc_id"].to_numpy()]
        cl = a["cluster_id"].to_numpy()
        rows.append({"corpus": name, "setting": label, "threshold": float(T), "docs": len(df),
                     "clusters": int(r.counts["n_clusters"]), "classes": int(df["label"].nunique()),
                     "nmi": nmi(lab, cl), "nmi_shuffled": nmi(rng.permutation(lab), cl), "ari": ari(lab, cl),
                     "seconds": secs})
        log(f"cluster {name} {label} T={T:.3f}: {rows[-1]['clusters']:,} clusters, NMI {rows[-1]['nmi']:.3f}, "
            f"ARI {rows[-1]['ari']:.3f} ({secs:.1f} s)")
    return rows


# ----------------------------------------------------------------------------- main

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None, help="the shared data folder (default $CUTEXT_DATA or ../shared/data)")
    ap.add_argument("--sections", default="lda,cluster")
    ap.add_argument("--corpora", default="20news,reuters")
    ap.add_argument("--docs", type=int, default=3000, help="lda: training documents per corpus (0 = all)")
    ap.add_argument("--heldout", type=int, default=300, help="lda: held-out documents per corpus")
    ap.add_argument("--K", type=int, default=20)
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--cluster-docs", type=int, default=0, help="cluster: documents per corpus (0 = all)")
    ap.add_argument("--thresholds", type=lambda s: [float(x) for x in s.split(",") if x],
                    default=[0.02, 0.1, 0.2, 0.3])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from cutext.pipelines.datasets import default_data_dir

    data = Path(args.data) if args.data else default_data_dir()
    if data is None or not (data / "corpora").is_dir():
        print("no shared data folder: give --data DIR", file=sys.stderr)
        return 2
    env = bench.environment(extra=("tomotopy", "gensim"))
    sections = args.sections.split(",")
    print(f"cutext defaults benchmark, {time.strftime('%Y-%m-%d %H:%M:%S')}, {env.get('cpu_count')} CPUs; "
          f"tomotopy {env['versions']['tomotopy'] or 'not installed'}, "
          f"gensim {env['versions']['gensim'] or 'not installed'}")
    corpora = {k: v for k, v in load_corpora(data).items() if k in args.corpora.split(",")}
    log("corpora: " + ", ".join(f"{k} {len(v):,} labelled documents" for k, v in corpora.items()))
    stop, stop_name = reference_stopwords()
    lda_out, cluster_out = [], []
    with tempfile.TemporaryDirectory(prefix="cutext-defaults-") as tmp:
        work = Path(tmp)
        for name, df in corpora.items():
            if "lda" in sections:
                rng = np.random.default_rng(args.seed)
                perm = rng.permutation(len(df))
                n = len(df) - args.heldout if args.docs <= 0 else min(args.docs, len(df) - args.heldout)
                train = df.iloc[np.sort(perm[:n])].reset_index(drop=True)
                held = df.iloc[np.sort(perm[n:n + args.heldout])].reset_index(drop=True)
                lda_out += lda_rows(name, train, held, args, stop, work)
            if "cluster" in sections:
                c = df.sample(frac=1.0, random_state=args.seed).reset_index(drop=True)  # a stream of mixed classes
                if args.cluster_docs > 0:
                    c = c.iloc[:args.cluster_docs].reset_index(drop=True)
                cluster_out += cluster_rows(name, c, args, work)
    if lda_out:
        print(f"\nlda: K={args.K}, {args.iterations} iterations, {args.docs or 'all'} training documents a corpus "
              f"(drawn at random, seed {args.seed}), {args.heldout} held out; NPMI of the top 10 words by document "
              f"co-occurrence in the training documents; stop% against {stop_name} ({len(stop)} words)")
        print(f"{'corpus':<8} {'system':<44} {'V':>7} {'NPMI':>7} {'div':>5} {'stop%':>6} {'max theta':>9} "
              f"{'heldout ll':>10} {'s':>6}")
        for r in lda_out:
            print(f"{r['corpus']:<8} {r['system']:<44} {r.get('V', float('nan')):>7} {r['npmi']:>7.3f} "
                  f"{r['diversity']:>5.2f} {100 * r['stop_share']:>6.1f} {r['max_theta']:>9.3f} "
                  f"{r.get('heldout_ll', float('nan')):>10.3f} {r['seconds']:>6.1f}")
        print("\ntopic 0..2 of each cutext row:")
        for r in lda_out:
            if r["system"].startswith("cutext"):
                print(f"  {r['corpus']} {r['system']}: " + " | ".join(r["topics"][:3]))
    if cluster_out:
        print("\ncluster: every labelled document, one fixed shuffle; NMI shuf = NMI against shuffled labels "
              "(chance for these cluster sizes)")
        print(f"{'corpus':<8} {'setting':<30} {'T':>6} {'docs':>7} {'clusters':>8} {'classes':>7} {'NMI':>6} "
              f"{'NMI shuf':>8} {'ARI':>6} {'s':>6}")
        for r in cluster_out:
            print(f"{r['corpus']:<8} {r['setting']:<30} {r['threshold']:>6.3f} {r['docs']:>7,} {r['clusters']:>8,} "
                  f"{r['classes']:>7} {r['nmi']:>6.3f} {r['nmi_shuffled']:>8.3f} {r['ari']:>6.3f} "
                  f"{r['seconds']:>6.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"environment": env, "args": vars(args), "lda": lda_out,
                                               "cluster": cluster_out}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
