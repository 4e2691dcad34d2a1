"""Plots of the pipelines' results, for notebooks: topics, cluster sizes, search scores.

Each helper takes what the pipeline gave (a model, an output directory or its :class:`RunResult`, a result
frame) and returns a ``matplotlib.figure.Figure`` (nothing is shown or saved: ``fig.savefig(...)``, or a
notebook displays it).  matplotlib is imported when a helper is called; it comes with
``pip install cutext[plot]`` (or ``[notebooks]``).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from cutext.stages.engines.lda_model import LDAModel

__all__ = ["plot_topics", "plot_cluster_sizes", "plot_scores"]


def _pyplot():
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - matplotlib is in the test extra
        raise ImportError("the plot helpers need matplotlib: pip install 'cutext[plot]' (or 'cutext[notebooks]')") \
            from exc
    return Figure


def _out_dir(result) -> Path:
    path = getattr(result, "path", result)
    return Path(path)


def plot_topics(model, n: int = 10, topics=None, cols: int = 4):
    """The ``n`` most probable words of each topic as horizontal bars, one panel a topic.

    Parameters
    ----------
    model : LDAModel, or str / os.PathLike
        A trained model or its directory (:meth:`cutext.pipelines.LDAModel.load`).
    n : int
        Words a topic (>= 1).
    topics : list of int, optional
        The topics to draw (default: every topic).
    cols : int
        Panels a row.

    Returns
    -------
    matplotlib.figure.Figure
        One axes a topic, titled ``topic k``, bars = phi[k, w] (the word's probability in the topic).

    Raises
    ------
    ValueError
        ``n`` < 1, ``cols`` < 1, or a topic outside 0 .. K-1.
    """
    if n < 1 or cols < 1:
        raise ValueError(f"n and cols must be >= 1, got n={n}, cols={cols}")
    if not isinstance(model, LDAModel):
        model = LDAModel.load(model)
    tw = model.top_words(n)
    K = int(tw["topic"].max()) + 1
    topics = list(range(K)) if topics is None else [int(t) for t in topics]
    bad = [t for t in topics if not 0 <= t < K]
    if bad:
        raise ValueError(f"topics {bad} are not in 0 .. {K - 1}")
    Figure = _pyplot()
    rows = math.ceil(len(topics) / cols)
    fig = Figure(figsize=(3.2 * min(cols, len(topics)), 0.28 * n * rows + 0.8 * rows), layout="constrained")
    axes = fig.subplots(rows, min(cols, len(topics)), squeeze=False)
    for ax in axes.ravel()[len(topics):]:
        ax.remove()
    for ax, k in zip(axes.ravel(), topics):
        g = tw[tw["topic"] == k].sort_values("rank", ascending=False)
        ax.barh(g["term"], g["prob"], color="tab:blue")
        ax.set_title(f"topic {k}", fontsize=10)
        ax.tick_params(axis="both", labelsize=8)
    return fig


def plot_cluster_sizes(result, threshold: float | None = None):
    """Cluster sizes by rank (log-log) and the documents' best similarities against the threshold.

    Parameters
    ----------
    result : RunResult, str / os.PathLike, or pandas.DataFrame
        A cluster run (its output directory: ``clusters.parquet`` and ``cluster.json``), or assignments:
        ``assignments.parquet`` read back, or :meth:`StreamClusterer.partial_fit`'s frames concatenated
        (``cluster_id``, ``similarity``; ``cluster_id`` -1, a document without a weighted term, is left out).
    threshold : float, optional
        Where to draw the threshold (default: the run's; none for a frame).

    Returns
    -------
    matplotlib.figure.Figure
        Two axes: sizes in decreasing order against their rank; the histogram of each document's largest
        similarity with an earlier cluster (``cluster.json``'s ``similarity_histogram``) with the run's
        threshold as a vertical line (a document at or below it started a cluster).

    Raises
    ------
    FileNotFoundError
        The directory holds no ``clusters.parquet`` / ``cluster.json``.
    ValueError
        A frame without ``cluster_id`` and ``similarity`` columns.
    """
    if isinstance(result, pd.DataFrame):
        sizes, hist = _assignment_sizes(result)
    else:
        d = _out_dir(result)
        for name in ("clusters.parquet", "cluster.json"):
            if not (d / name).is_file():
                raise FileNotFoundError(f"{d / name}: not a cluster output (pipelines.run('cluster', ..., out=...))")
        sizes = np.sort(pd.read_parquet(d / "clusters.parquet", columns=["size"])["size"].to_numpy())[::-1]
        meta = json.loads((d / "cluster.json").read_text())
        hist = meta.get("similarity_histogram") or {}
        if threshold is None:
            threshold = (meta.get("params") or {}).get("threshold", meta.get("threshold"))
    Figure = _pyplot()
    fig = Figure(figsize=(9, 3.4), layout="constrained")
    a, b = fig.subplots(1, 2)
    a.loglog(np.arange(1, len(sizes) + 1), sizes, marker=".", linestyle="none")
    a.set_xlabel("rank")
    a.set_ylabel("documents")
    a.set_title(f"{len(sizes):,} clusters, {int(sizes.sum()):,} documents", fontsize=10)
    if hist.get("counts"):
        edges = np.asarray(hist["edges"], float)
        b.bar(edges[:-1], hist["counts"], width=np.diff(edges), align="edge", color="tab:gray")
    if threshold is not None:
        b.axvline(float(threshold), color="tab:red", label=f"threshold {float(threshold):g}")
        b.legend(fontsize=8)
    b.set_xlabel("best similarity with an earlier cluster")
    b.set_ylabel("documents")
    b.set_title("where the threshold cuts", fontsize=10)
    return fig


def _assignment_sizes(assign: pd.DataFrame) -> tuple:
    """Sizes in decreasing order and the similarity histogram (20 bins over [0, 1], as cluster.json's) of
    assignments."""
    missing = {"cluster_id", "similarity"} - set(assign.columns)
    if missing:
        raise ValueError(f"plot_cluster_sizes needs assignments with cluster_id and similarity columns; "
                         f"missing {sorted(missing)}")
    ids = assign["cluster_id"].to_numpy(np.int64)
    kept = ids >= 0
    sizes = np.sort(np.bincount(ids[kept]))[::-1] if kept.any() else np.zeros(0, np.int64)
    sizes = sizes[sizes > 0]
    sim = np.clip(assign["similarity"].to_numpy(np.float64)[kept], 0.0, 1.0)
    counts, edges = np.histogram(sim, bins=20, range=(0.0, 1.0))
    return sizes, {"edges": edges.tolist(), "counts": counts.tolist()}


def plot_scores(hits: pd.DataFrame, max_rank: int | None = None):
    """BM25 scores of a search result: their spread at each rank, and their histogram.

    Parameters
    ----------
    hits : pandas.DataFrame
        :meth:`cutext.pipelines.BM25Index.search`'s result (``query_id``, ``rank``, ``score``).
    max_rank : int, optional
        Ranks drawn (default: every rank of the frame).

    Returns
    -------
    matplotlib.figure.Figure
        Two axes: the median score at each rank with the 10-90 % band across queries; the histogram of
        every score.

    Raises
    ------
    ValueError
        A frame without ``rank`` and ``score`` columns, or without rows.
    """
    missing = {"rank", "score"} - set(hits.columns)
    if missing or len(hits) == 0:
        raise ValueError(f"plot_scores needs a search result with rows and rank, score columns; "
                         f"missing {sorted(missing)}" if missing else "plot_scores: the result has no rows")
    h = hits if max_rank is None else hits[hits["rank"] <= int(max_rank)]
    q = h.groupby("rank")["score"].quantile([0.1, 0.5, 0.9]).unstack()
    Figure = _pyplot()
    fig = Figure(figsize=(9, 3.4), layout="constrained")
    a, b = fig.subplots(1, 2)
    a.plot(q.index, q[0.5], color="tab:blue", label="median")
    a.fill_between(q.index, q[0.1], q[0.9], color="tab:blue", alpha=0.25, label="10-90 %")
    a.set_xlabel("rank")
    a.set_ylabel("score")
    a.legend(fontsize=8)
    a.set_title(f"{h['query_id'].nunique() if 'query_id' in h else len(h):,} queries", fontsize=10)
    b.hist(h["score"].to_numpy(), bins=40, color="tab:gray")
    b.set_xlabel("score")
    b.set_ylabel("hits")
    return fig
