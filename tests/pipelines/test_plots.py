"""The plot helpers draw what the results hold (matplotlib, Agg; the figures are inspected, not looked at)."""
from __future__ import annotations

import pytest

from cutext import pipelines
from cutext.pipelines.lda import LDAModel
from cutext.pipelines.plots import plot_cluster_sizes, plot_scores, plot_topics

pytest.importorskip("matplotlib")

KW = dict(backend="cpu", progress=False)


@pytest.fixture(scope="module")
def cacm(data_dir):
    return str(data_dir / "cacm" / "cacm.json")


def test_plot_topics_draws_a_panel_a_topic_with_its_top_words(cacm, tmp_path):
    r = pipelines.run("lda", cacm, out=tmp_path / "lda", K=5, iterations=3, seed=1, **KW)
    fig = plot_topics(r.path, n=6, cols=2)
    axes = fig.get_axes()
    assert [a.get_title() for a in axes] == [f"topic {k}" for k in range(5)]
    model = LDAModel.load(r.path)
    top = model.top_words(6)
    for k, ax in enumerate(axes):
        labels = [t.get_text() for t in ax.get_yticklabels()]
        assert len(ax.patches) == 6
        assert labels[::-1] == list(top[top["topic"] == k]["term"])  # the most probable word on top
    assert [a.get_title() for a in plot_topics(model, n=3, topics=[4, 1]).get_axes()] == ["topic 4", "topic 1"]
    with pytest.raises(ValueError, match="not in 0 .. 4"):
        plot_topics(model, topics=[5])


def test_plot_cluster_sizes_ranks_the_sizes_and_marks_the_threshold(cacm, tmp_path):
    r = pipelines.run("cluster", cacm, out=tmp_path / "cl", **KW)
    import pandas as pd

    sizes = pd.read_parquet(r.path / "clusters.parquet")["size"]
    fig = plot_cluster_sizes(r)
    a, b = fig.get_axes()
    x, y = a.get_lines()[0].get_data()
    assert list(y) == sorted(sizes, reverse=True) and x[0] == 1
    assert f"{len(sizes):,} clusters" in a.get_title()
    assert len(b.patches) == 20  # the histogram's bins
    assert b.get_lines()[0].get_xdata()[0] == pytest.approx(0.05)  # the default threshold
    with pytest.raises(FileNotFoundError, match="not a cluster output"):
        plot_cluster_sizes(tmp_path)


def test_plot_scores_follows_the_scores_by_rank(cacm, tmp_path, data_dir):
    r = pipelines.run("bm25", cacm, out=tmp_path / "idx", **KW)
    hits = pipelines.BM25Index.load(r.path).search({"q1": "parallel sorting algorithms", "q2": "compiler"}, k=10)
    fig = plot_scores(hits)
    a, b = fig.get_axes()
    x, med = a.get_lines()[0].get_data()
    assert list(x) == list(range(1, 11))
    assert list(med) == pytest.approx(list(hits.groupby("rank")["score"].median()))
    assert all(m1 >= m2 for m1, m2 in zip(med, med[1:]))  # ranked by score
    assert sum(p.get_height() for p in b.patches) == len(hits)
    with pytest.raises(ValueError, match="rank, score"):
        plot_scores(hits.drop(columns="score"))


def test_plot_cluster_sizes_of_an_assignments_frame_equals_the_runs(cacm, tmp_path):
    import json

    import pandas as pd

    r = pipelines.run("cluster", cacm, out=tmp_path / "cl", **KW)
    assign = pd.read_parquet(r.path / "assignments.parquet")
    a, b = plot_cluster_sizes(r).get_axes()
    fa, fb = plot_cluster_sizes(assign).get_axes()
    assert list(fa.get_lines()[0].get_ydata()) == list(a.get_lines()[0].get_ydata())
    assert fa.get_title() == a.get_title()
    hist = json.loads((r.path / "cluster.json").read_text())["similarity_histogram"]["counts"]
    assert [p.get_height() for p in fb.patches] == hist == [p.get_height() for p in b.patches]
    assert not fb.get_lines()  # a frame carries no threshold
    (line,) = plot_cluster_sizes(assign, threshold=0.2).get_axes()[1].get_lines()
    assert line.get_xdata()[0] == pytest.approx(0.2)
    with pytest.raises(ValueError, match="cluster_id and similarity"):
        plot_cluster_sizes(assign.drop(columns="similarity"))
