"""The default text columns of a table (``files._pick``): a title joined with its body, as Anserini joins BEIR's
title + text, for every pipeline and for frames; and the error that names the likely columns when none is found."""
from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

from cutext import pipelines
from cutext.pipelines.__main__ import main
from cutext.stages.engines.bm25_index import BM25Index
from cutext.stages.readers.base import CorpusError
from cutext.stages.readers.frames import FrameError

KW = dict(backend="cpu", progress=False, scheduler="sync")


@pytest.fixture(scope="module")
def news_table(data_dir) -> pd.DataFrame:
    """AG News' layout ``label, title, description`` holding 40 SciFact titles and abstracts (real text)."""
    with gzip.open(data_dir / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        recs = [json.loads(line) for line, _ in zip(fh, range(40))]
    return pd.DataFrame({"label": [i % 4 + 1 for i in range(len(recs))],
                         "title": [r["title"] for r in recs],
                         "description": [" ".join(r["text"].split()[:60]) for r in recs]})


def test_a_csv_with_title_and_description_clusters_and_indexes_both(news_table, tmp_path):
    src = tmp_path / "news.csv"
    news_table.to_csv(src, index=False)
    r = pipelines.run("cluster", src, out=tmp_path / "cl", **KW)
    assert r.counts["n_docs"] == len(news_table)
    assert len(pd.read_parquet(r.path / "assignments.parquet")) == len(news_table)
    r = pipelines.run("bm25", src, out=tmp_path / "ix", store_text=True, **KW)
    index = BM25Index.load(r.path)
    hits = index.search(news_table["title"].iloc[7], k=1, with_text=True)
    assert hits["source_id"].iloc[0] == "7"
    assert hits["text"].iloc[0] == news_table["title"].iloc[7] + " " + news_table["description"].iloc[7]


@pytest.mark.parametrize("body", ["abstract", "body", "contents"])
def test_a_frame_with_title_and_a_body_column_joins_them(news_table, tmp_path, body):
    frame = news_table.rename(columns={"description": body}).head(12)
    r = pipelines.run("bm25", frame, out=tmp_path / "ix", store_text=True, **KW)
    texts = BM25Index.load(r.path).docs(["3"])
    assert texts == [frame["title"].iloc[3] + " " + frame[body].iloc[3]]


def test_no_text_column_names_the_likely_columns(news_table, tmp_path, capsys):
    table = news_table.rename(columns={"title": "headline", "description": "summary"}).head(5)
    src = tmp_path / "news.csv"
    table.to_csv(src, index=False)
    assert main(["cluster", str(src), "--out", str(tmp_path / "cl"), "--backend", "cpu", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "columns are ['label', 'headline', 'summary']" in err
    assert "pass --text-column headline --text-column summary" in err and "Traceback" not in err
    assert not (tmp_path / "cl").exists()
    # the label column holds numbers: not suggested; the Python spelling outside the command line
    with pytest.raises(FrameError, match=r"likely in \['headline', 'summary'\]: pass text_column=\['headline', "):
        pipelines.run("cluster", table, out=tmp_path / "c2", **KW)
    with pytest.raises(CorpusError, match=r"likely in \['headline'\]: pass text_column='headline'"):
        pipelines.run("bm25", table[["label", "headline"]].assign(id=range(5)), out=tmp_path / "c3", **KW)
