"""Strict parameters: unknown keywords fail with a suggestion,
numbers are checked for type and range, and the message names the parameter and the accepted range."""
from __future__ import annotations

import math

import numpy as np
import pytest

from cutext import pipelines
from cutext.stages.runtime.params import UnknownParameterError, check_keywords, choice, count, number


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


# --------------------------------------------------------------------------- numbers of every pipeline
@pytest.fixture(scope="module")
def cacm200(tmp_path_factory, data_dir):
    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()[:200]
    p = tmp_path_factory.mktemp("c") / "cacm200.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


@pytest.mark.parametrize("name, kw, match", [
    ("bm25", {"k1": math.inf}, r"k1 must be a finite number >= 0, got inf"),
    ("bm25", {"k1": math.nan}, r"k1 must be a finite number"),
    ("bm25", {"b": 1.5}, r"b must be a finite number in \[0, 1\]"),
    ("bm25", {"variant": "bm25+", "delta": math.inf}, r"delta must be a finite number >= 0"),
    ("lda", {"beta": math.inf}, r"beta must be a finite number > 0"),
    ("lda", {"alpha": 0}, r"alpha must be a finite number > 0"),
    ("lda", {"K": 2.7}, r"K must be an integer >= 2, got 2.7"),
    ("lda", {"iterations": 2.5}, r"iterations must be an integer in \[1, 100000\], got 2.5 \(a float\)"),
    ("cluster", {"n_top_terms": -1}, r"n_top_terms must be an integer >= 1, got -1"),
    ("cluster", {"batch_size": 0}, r"batch_size must be an integer >= 1, got 0"),
    ("cluster", {"threshold": math.nan}, r"threshold must be a finite number in \[0, 1\]"),
])
def test_nonsense_numbers_are_refused(cacm200, tmp_path, name, kw, match):
    with pytest.raises(ValueError, match=match):
        pipelines.run(name, cacm200, out=tmp_path / "out", backend="cpu", progress=False, **kw)
    assert not (tmp_path / "out").exists()


def test_search_k_and_queries_are_checked(cacm200, tmp_path):
    r = pipelines.run("bm25", cacm200, out=tmp_path / "idx", backend="cpu", scheduler="sync", progress=False)
    idx = pipelines.BM25Index.load(r.path)
    for k in (2.5, 0, -1, "10"):
        with pytest.raises(ValueError, match="k must be an integer >= 1"):
            idx.search(["computer"], k=k)
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1"):
        idx.search(["computer"], batch_size=0)
    with pytest.raises(TypeError, match=r"query '1' is None"):
        idx.search(["computer", None])
    with pytest.raises(TypeError, match=r"query 'q2' is nan"):
        idx.search({"q1": "computer", "q2": float("nan")})
    assert len(idx.search(["computer"], k=3.0)) == 3  # an integral float is a count


def test_top_k_next_k_is_checked(arpa):
    from cutext.pipelines.ngram import NGramModel

    models = sorted(arpa.rglob("*.arpa*"))
    lm = NGramModel.load(models[0], backend="cpu")
    for k in (0, -1, 2.5):
        with pytest.raises(ValueError, match="k must be an integer >= 1"):
            lm.top_k_next(["the"], k=k)
    assert lm.top_k_next(["the"], k=3).ids.shape[1] == 3


@pytest.mark.parametrize("argv, hint", [
    (["bm25", "c.jsonl", "--out", "o", "--k_1", "0.9"], "--k_1 (did you mean --k1?)"),
    (["lda", "c.txt", "--out", "o", "--iteration", "3"], "--iteration (did you mean --iterations?)"),
    (["cluster", "c.txt", "--out", "o", "--treshold=0.3"], "--treshold (did you mean --threshold?)"),
])
def test_cli_typo_fails_with_the_closest_option(argv, hint, capsys):
    from cutext.pipelines.__main__ import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert hint in capsys.readouterr().err


def test_cli_and_package_say_their_version(capsys):
    """``--version`` prints the installed distribution's version, the one every output's manifest records."""
    from importlib.metadata import version

    from cutext.pipelines.__main__ import main

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"cutext {version('cutext')}" == f"cutext {pipelines.__version__}"


# --------------------------------------------------------------------------- sizes and counts
@pytest.mark.parametrize("blocksize, match", [
    (0, r"blocksize must be an integer >= 1, got 0"),
    (-5, r"blocksize must be an integer >= 1, got -5"),
    (2.5, r"blocksize must be an integer >= 1, got 2.5"),
    ("64MB", r"blocksize must be an integer >= 1, got '64MB'"),
])
def test_blocksize_that_is_not_a_positive_integer_is_refused(cacm200, tmp_path, blocksize, match):
    with pytest.raises(ValueError, match=match):
        pipelines.run("bm25", cacm200, out=tmp_path / "out", backend="cpu", progress=False, blocksize=blocksize)
    assert not (tmp_path / "out").exists()


def test_tiny_blocksize_that_shreds_the_input_is_refused_with_the_range(tmp_path, data_dir):
    """blocksize=100 on 2 MB made 22k partitions (minutes); now: the error names the partitions and
    the accepted range, before any text is read.  A tiny blocksize on a small input still works."""
    from cutext.stages.readers.files import MAX_SMALL_PIECES, plan

    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()
    p = tmp_path / "cacm.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    size = p.stat().st_size
    assert size // 100 > MAX_SMALL_PIECES
    with pytest.raises(ValueError, match=r"blocksize=100 bytes splits the input .* into [\d,]+ partitions; "
                                         r"blocksize must be an integer >= 1,048,576 \(1 MiB\), or >= [\d,]+"):
        pipelines.run("bm25", p, out=tmp_path / "out", backend="cpu", progress=False, blocksize=100)
    assert not (tmp_path / "out").exists()
    least = -(-size // MAX_SMALL_PIECES)
    assert len(plan(p, blocksize=least)[1]) <= MAX_SMALL_PIECES  # the bound the message gives is accepted
    assert len(plan(p, blocksize=1 << 20)[1]) == -(-size // (1 << 20))


@pytest.mark.parametrize("kw, match", [
    ({"batch_size": 0}, r"batch_size must be an integer >= 1, got 0"),
    ({"batch_size": 2.5}, r"batch_size must be an integer >= 1, got 2.5"),
    ({"top_k": 2.5}, r"top_k must be an integer in \[1, \d+\], got 2.5"),
    ({"top_k": 0}, r"top_k must be an integer in \[1, \d+\], got 0"),
    ({"n_shards": 0}, r"n_shards must be an integer >= 1, got 0"),
    ({"threshold": math.inf}, r"threshold must be a finite number in \[0, 1\], got inf"),
    ({"threshold": math.nan}, r"threshold must be a finite number in \[0, 1\]"),
])
def test_stream_clusterer_sizes_are_checked(kw, match):
    from cutext.stages.engines.streamcluster import StreamClusterer

    with pytest.raises(ValueError, match=match):
        StreamClusterer(backend="cpu", **kw)
    assert StreamClusterer(backend="cpu", batch_size=4.0, top_k=10).batch_size == 4  # integral floats are counts


def test_stream_clusterer_load_checks_batch_size(tmp_path):
    from cutext.stages.engines.streamcluster import StreamClusterer

    sc = StreamClusterer(backend="cpu")
    sc.save(tmp_path / "state")
    with pytest.raises(ValueError, match=r"batch_size must be an integer >= 1, got 0"):
        StreamClusterer.load(tmp_path / "state", backend="cpu", batch_size=0)


def test_stream_vectorizer_top_k_is_checked():
    from cutext.stages.engines.streamcluster import StreamVectorizer

    for k in (0, 2.5, -1):
        with pytest.raises(ValueError, match="top_k must be an integer >= 1"):
            StreamVectorizer(k)


@pytest.mark.parametrize("name, kw, match", [
    ("bm25", {"min_len": 2.5}, r"min_len must be an integer >= 1, got 2.5"),
    ("bm25", {"min_len": 0}, r"min_len must be an integer >= 1, got 0"),
    ("bm25", {"min_len": 3, "max_len": 2}, r"max_len must be an integer >= 3, got 2"),
    ("bm25", {"n_workers": 0, "scheduler": "cluster"}, r"n_workers must be an integer >= 1, got 0"),
    ("bm25", {"n_workers": 1.5}, r"n_workers must be an integer >= 1, got 1.5"),
    ("lda", {"n_devices": 0}, r"n_devices must be an integer >= 1, got 0"),
    ("lda", {"n_devices": 1.5}, r"n_devices must be an integer >= 1, got 1.5"),
])
def test_other_sizes_and_counts_are_refused(cacm200, tmp_path, name, kw, match):
    with pytest.raises(ValueError, match=match):
        pipelines.run(name, cacm200, out=tmp_path / "out", backend="cpu", progress=False, **kw)
    assert not (tmp_path / "out").exists()
