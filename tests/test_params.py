"""Strict parameters (issue 14 item 2, issue 15 items 3 and 7): unknown keywords fail with a suggestion,
numbers are checked for type and range, and the message names the parameter and the accepted range."""
from __future__ import annotations

import math

import numpy as np
import pytest

from cutext import pipelines
from cutext.stages.params import UnknownParameterError, check_keywords, choice, count, number


@pytest.mark.parametrize("name, kw, suggestion", [
    ("lda", {"iteration": 3}, "iterations"),
    ("lda", {"alpah": 0.5}, "alpha"),
    ("lda", {"k": 10}, "K"),
    ("lda", {"n_topics": 20}, "K"),
    ("bm25", {"k_1": 1.2}, "k1"),
    ("bm25", {"stop_words": "lucene"}, "stopwords"),
    ("cluster", {"treshold": 0.3}, "threshold"),
    ("ngram", {"modle": "x.arpa"}, "model"),
])
def test_pipeline_typo_fails_with_the_closest_name(tmp_path, name, kw, suggestion):
    with pytest.raises(UnknownParameterError) as exc:
        pipelines.run(name, tmp_path / "corpus.txt", out=tmp_path / "out", **kw)
    msg = str(exc.value)
    assert f"pipeline {name!r}" in msg and repr(next(iter(kw))) in msg
    assert f"did you mean {suggestion!r}" in msg
    assert not (tmp_path / "out").exists()


def test_reader_options_are_accepted_where_a_pipeline_forwards_them(tmp_path, data_dir):
    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()[:50]
    p = tmp_path / "c.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = pipelines.run("lda", p, out=tmp_path / "m", K=2, iterations=1, text_column="contents", id_column="id",
                      backend="cpu", progress=False)
    assert r.counts["n_docs"] == 50
    with pytest.raises(UnknownParameterError, match="'text_colum' \\(did you mean 'text_column'\\?\\)"):
        pipelines.run("lda", p, out=tmp_path / "m", K=2, text_colum="contents")


def test_check_keywords_lists_every_unknown_name():
    with pytest.raises(UnknownParameterError, match=r"unknown parameters 'x', 'yy'; valid parameters: a, b"):
        check_keywords("f", ["a", "x", "yy"], ["a", "b"])
    check_keywords("f", ["a"], ["a", "b"])  # no error


@pytest.mark.parametrize("value, ok", [(3, 3), (np.int64(4), 4), (5.0, 5), (2.7, None), (True, None),
                                       ("3", None), (math.inf, None), (math.nan, None), (1, None)])
def test_count(value, ok):
    if ok is None:
        with pytest.raises(ValueError, match=r"K must be an integer >= 2"):
            count("K", value, lo=2)
    else:
        assert count("K", value, lo=2) == ok and isinstance(count("K", value, lo=2), int)


@pytest.mark.parametrize("value, ok", [(0.0, False), (1e-9, True), (1.0, True), (math.inf, False),
                                       (math.nan, False), (-1, False), ("0.1", False), (True, False)])
def test_number(value, ok):
    if ok:
        assert number("beta", value, lo=0, lo_open=True) == float(value)
    else:
        with pytest.raises(ValueError, match=r"beta must be a finite number > 0"):
            number("beta", value, lo=0, lo_open=True)


def test_choice_suggests():
    assert choice("variant", "bm25l", ("lucene", "bm25l")) == "bm25l"
    with pytest.raises(ValueError, match="did you mean 'lucene'"):
        choice("variant", "lucen", ("lucene", "bm25l"))
