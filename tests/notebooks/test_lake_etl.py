"""notebooks/lake_etl.ipynb runs top to bottom on the CPU backend and shows what it should.

The per-category statistics it writes are checked against an independent count: the document
frequency of its top terms, recounted with the tokenizer on the posts of one category.
"""
from __future__ import annotations

import re

import pytest

from helpers import need_data
from notebook_helpers import NOTEBOOKS, _execute, _metric, _outputs, kernel, nbformat  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves this module out

LAKE_NB = NOTEBOOKS / "lake_etl.ipynb"


def test_lake_etl_notebook(kernel, tmp_path, monkeypatch, shared_data):  # noqa: F811
    import numpy as np
    import pandas as pd

    from cutext.pipelines.datasets import load_20newsgroups
    from cutext.stages.text.tokenize import TokenizerConfig, tokenize_texts

    monkeypatch.setenv("CUTEXT_NOTEBOOK_WORKDIR", str(tmp_path))
    monkeypatch.setenv("CUTEXT_DATA", str(shared_data))
    need_data("20newsgroups")  # what the notebook fetches: skipped by name where it is not here
    nb = _execute(nbformat.read(LAKE_NB, as_version=4), NOTEBOOKS, kernel)
    text, outs = _outputs(nb)
    assert not [o for o in outs if o.output_type == "error"]

    # 1. the lake: 8 Parquet files holding every post
    lake = tmp_path / "lake"
    parts = sorted((lake / "posts").glob("*.parquet"))
    assert len(parts) == 8
    posts = pd.read_parquet(lake / "posts")
    assert len(posts) == 18846

    # 2. the filter and join, recounted with pandas
    want = load_20newsgroups(shared_data / "corpora" / "20news-bydate.tar.gz")
    want = want[(want["split"] == "train") & (want["text"].str.len() >= 200)]
    want = want.assign(category=want["group"].str.split(".").str[0])
    assert _metric(text, "documents") == len(want)
    assert _metric(text, "categories") == want["category"].nunique() == 7

    # 3-5. the statistics written back, partitioned by category
    stats = pd.read_parquet(lake / "term_stats_by_category")
    assert sorted(p.name for p in (lake / "term_stats_by_category").glob("category=*")) == \
        sorted(f"category={c}" for c in want["category"].unique())
    assert (stats.groupby("category", observed=True).size() == 8).all()
    assert (stats["lift"] > 0).all() and (stats["weight"] > 0).all()
    # df of the top terms of one category, by the tokenizer on that category's posts
    cat = "sci"
    sci = want[want["category"] == cat]
    toks = tokenize_texts(sci["text"].tolist(), TokenizerConfig.make(stopwords="lucene", min_len=3))
    sets = [set(t) for t in toks]
    got = stats[stats["category"] == cat]
    assert len(got) == 8
    for term, df, tf in zip(got["term"], got["df"], got["tf"]):
        assert df == sum(term in s for s in sets), term
        assert tf == sum(t.count(term) for t in toks), term
    # the weights are summed BM25 weights: ordered, largest first
    assert np.all(np.diff(got["weight"].to_numpy()) <= 0)

    # a plot: inline and as a PNG
    assert any("image/png" in o.get("data", {}) for o in outs)
    assert (tmp_path / "lake-term-stats.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert re.search(r"V = [0-9,]+ terms", text)
