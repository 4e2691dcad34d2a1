"""Parameters and resource caps of the CPU paths: a value outside the range where the arithmetic is finite and
meaningful, a size no memory holds, or an input with no end gets a clear error naming the parameter (or file),
its value and the accepted range or size -- never a silently wrong result, a hang or an OOM kill."""
from __future__ import annotations

import gzip
import json
import math
import os
import re
import shutil
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cutext import pipelines
from cutext.pipelines.bm25 import BM25Index
from cutext.pipelines.lda import LDAModel
from cutext.stages.engines.search import merge_topk
from cutext.stages.runtime import checksums
from cutext.stages.runtime.artifacts import ArtifactError
from cutext.stages.runtime.params import ResourceLimitError, check_memory, number
from cutext.stages.text import bm25 as bm25_stage
from cutext.stages.text.tokenize import TokenizerConfig


def _cacm(data_dir, tmp_path_factory, n: int) -> Path:
    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()[:n]
    p = tmp_path_factory.mktemp("cacm") / f"cacm{n}.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


@pytest.fixture(scope="module")
def cacm200(tmp_path_factory, data_dir) -> Path:
    return _cacm(data_dir, tmp_path_factory, 200)


@pytest.fixture(scope="module")
def index60(tmp_path_factory, data_dir) -> Path:
    """A BM25 index of the first 60 CACM documents (the probe's 60-document index)."""
    out = tmp_path_factory.mktemp("idx") / "index"
    pipelines.run("bm25", _cacm(data_dir, tmp_path_factory, 60), out=out, backend="cpu", scheduler="sync",
                  progress=False)
    return out


@pytest.fixture(scope="module")
def model(cacm200, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("lda") / "model"
    pipelines.run("lda", cacm200, out=out, K=3, iterations=2, text_column="contents", id_column="id",
                  backend="cpu", progress=False)
    return out


# ----------------------------------------------------------------------------- 1. float parameters

@pytest.mark.parametrize("name, kw, match", [
    ("bm25", {"k1": 1e308}, r"k1 must be <= 1000, got 1e\+308: .*every weight 0"),
    ("bm25", {"variant": "bm25+", "delta": 1e308}, r"delta must be <= 1000, got 1e\+308"),
    ("bm25", {"variant": "bm25l", "delta": 1e4}, r"delta must be <= 1000, got 10000"),
    ("lda", {"beta": 1e308}, r"beta must be <= 1e\+06, got 1e\+308: .*LLPT -inf"),
    ("lda", {"alpha": 1e308}, r"alpha must be <= 1e\+06, got 1e\+308"),
    ("lda", {"beta": 1e-300}, r"beta must be >= 1e-10, got 1e-300: .*float32 normal"),
    ("lda", {"alpha": 1e-300}, r"alpha must be >= 1e-10, got 1e-300"),
    ("cluster", {"threshold": 1e308}, r"threshold must be a finite number in \[0, 1\], got 1e\+308"),
])
def test_float_parameters_outside_their_meaningful_range_are_refused(cacm200, tmp_path, name, kw, match):
    with pytest.raises(ValueError, match=match):
        pipelines.run(name, cacm200, out=tmp_path / "out", backend="cpu", progress=False, **kw)
    assert not (tmp_path / "out").exists()


def test_bm25_bounds_are_inclusive_and_give_finite_positive_scores(cacm200, tmp_path):
    assert bm25_stage.check_params("bm25+", 1e3, 0.75, 1e3) == 1e3
    with pytest.raises(ValueError, match="k1 must be <= 1000"):
        bm25_stage.check_params("lucene", math.nextafter(1e3, 2e3), 0.75, None)
    # at the bound the weights still score: lucene's smallest weights stay far above float32's floor
    r = pipelines.run("bm25", cacm200, out=tmp_path / "idx", k1=1e3, backend="cpu", scheduler="sync",
                      progress=False)
    hits = BM25Index.load(r.path, backend="cpu").search("computer programming language", k=5)
    assert len(hits) == 5 and np.isfinite(hits["score"]).all() and (hits["score"] > 0).all()
    assert hits["score"].is_monotonic_decreasing and hits["score"].iloc[0] > hits["score"].iloc[-1]


def test_lda_priors_at_their_bounds_give_a_finite_llpt(cacm200, tmp_path):
    assert number("beta", 1e6, lo=0, lo_open=True) == 1e6 and number("alpha", 1e-10, lo=0, lo_open=True) == 1e-10
    r = pipelines.run("lda", cacm200, out=tmp_path / "m", K=2, iterations=1, alpha=1e6, beta=1e6,
                      text_column="contents", backend="cpu", progress=False)
    llpt = pq_llpt(r.path)
    assert np.isfinite(llpt).all() and (llpt < 0).all()


def pq_llpt(path) -> np.ndarray:
    import pyarrow.parquet as pq

    return pq.read_table(Path(path) / "llpt.parquet").column("llpt").to_numpy()


# ----------------------------------------------------------------------------- 2. transform of one str

def test_transform_of_a_str_is_one_document(model):
    m = LDAModel.load(model)
    text = "computer programs for the solution of linear algebraic equations"
    one = m.transform(text, iterations=5, backend="cpu")
    assert one.shape == (1, m.K)  # not one row per character
    np.testing.assert_array_equal(one, m.transform([text], iterations=5, backend="cpu"))
    assert m.log_likelihood(text, iterations=5, backend="cpu") == m.log_likelihood([text], iterations=5,
                                                                                    backend="cpu")


# ----------------------------------------------------------------------------- 3. search k past N

@pytest.mark.parametrize("engine", ["auto", "cpu", "sparse"])
@pytest.mark.parametrize("k", [10**9, 2**63])
def test_engines_cap_k_at_the_number_of_documents(index60, engine, k):
    idx = BM25Index.load(index60, backend="cpu")
    assert idx.n_docs == 60
    Q = idx.query_matrix(["computer program", "algorithm for sorting"])
    doc, score, n = idx.topk_arrays(Q, k=k, engine=engine)  # 10**9 columns would be 16 GB per query
    want = idx.topk_arrays(Q, k=60, engine=engine)
    assert doc.shape == score.shape == (2, 60)
    np.testing.assert_array_equal(doc, want[0])
    np.testing.assert_array_equal(score, want[1])
    np.testing.assert_array_equal(n, want[2])


def test_merge_of_shards_caps_k_at_their_documents(index60):
    idx = BM25Index.load(index60, backend="cpu")
    Q = idx.query_matrix(["computer program"])
    full = idx.topk_arrays(Q, k=60, engine="sparse")
    # two shards of 30 documents each, capped at their own size, merged with a k far past N
    parts = []
    for lo in (0, 30):  # a shard's result: its own documents in rank order, -1 / 0 past them
        d, sc = full[0], full[1]
        keep = (d >= lo) & (d < lo + 30)
        o = np.argsort(~keep[0], kind="stable")[:30]
        parts.append((np.where(keep, d, -1)[:, o], np.where(keep, sc, 0)[:, o], keep.sum(1).astype(np.int32)))
    doc, score, n = merge_topk(parts, 2**63)
    assert doc.shape == (1, 60)
    np.testing.assert_array_equal(doc, full[0])
    np.testing.assert_array_equal(n, full[2])


def test_search_with_k_past_the_number_of_documents(index60):
    idx = BM25Index.load(index60, backend="cpu")
    want = idx.search("computer program", k=60)
    # 2**63 first: sized by k it gives np.arange(2**63), an empty float array, so an empty result (no allocation);
    # 10**9 sized by k allocates GBs (the probe's OOM kill)
    for k in (2**63, 10**9):
        got = idx.search("computer program", k=k)
        assert len(got) <= 60
        assert got.equals(want)


def test_top_k_next_caps_k_at_the_vocabulary(arpa):
    from cutext.pipelines.ngram import NGramModel

    lm = NGramModel.load(arpa / "kenlm" / "test.arpa", backend="cpu")
    top = lm.top_k_next(["looking"], k=2**63)
    assert top.ids.shape[1] == lm.vocab_size


# ----------------------------------------------------------------------------- 4. sizes checked before allocating

def test_lda_K_that_no_memory_holds_is_refused_before_sampling(shared_data, tmp_path):
    src = shared_data / "bow" / "lda_reuters" / "reuters.ldac"
    with pytest.raises(ResourceLimitError, match=r"K=10,000,000 topics with V=4,258 words .* would need "
                                                 r"[0-9.]+ [GT]iB .* of host memory is available") as ei:
        pipelines.run("lda", str(src), out=tmp_path / "m", K=10**7, iterations=1, backend="cpu", progress=False)
    assert isinstance(ei.value, MemoryError) and isinstance(ei.value, ValueError)
    assert not (tmp_path / "m").exists()


def test_cluster_top_k_is_bounded_before_the_term_vectors(cacm200, tmp_path):
    with pytest.raises(ValueError, match=r"top_k must be an integer in \[1, 512\], got 1000000000"):
        pipelines.run("cluster", cacm200, out=tmp_path / "c", top_k=10**9, backend="cpu", progress=False)
    assert not (tmp_path / "c").exists()


def test_saved_model_with_a_huge_K_is_refused_before_W_is_sized(model, tmp_path):
    bad = tmp_path / "model"
    shutil.copytree(model, bad)
    meta = json.loads((bad / "params.json").read_text())
    V = meta["V"]
    meta["K"] = 1e9
    (bad / "params.json").write_text(json.dumps(meta))
    checksums.seal(bad, "params.json")  # a crafted value behind valid checksums: the value checks must catch it
    with pytest.raises(MemoryError, match=rf"params.json: K=1,000,000,000 and V={V:,} .* would need "
                                          r"[0-9.]+ TiB .* available"):
        LDAModel.load(bad)


def test_check_memory_states_both_sizes():
    assert check_memory(100, "x", available=100) == 100
    with pytest.raises(ResourceLimitError, match=r"^lda: K=9: would need 2.0 KiB \(2,048 bytes\) but 1.0 KiB of "
                                                 r"host memory is available$"):
        check_memory(2048, "lda: K=9", available=1024)


# ----------------------------------------------------------------------------- 5. fold-in iterations

@pytest.mark.parametrize("iterations", [10**9, -1, 0, 2.5, "5"])
def test_transform_iterations_are_checked(model, iterations):
    m = LDAModel.load(model)
    with pytest.raises(ValueError, match=r"iterations must be an integer in \[1, 100000\]"):
        m.transform(["computer programs"], iterations=iterations, backend="cpu")
    with pytest.raises(ValueError, match=r"iterations must be an integer in \[1, 100000\]"):
        m.perplexity(["computer programs"], iterations=iterations, backend="cpu")


@pytest.mark.parametrize("name, value, lo", [("iterations", 0, 1), ("iterations", 1e9, 1), ("iterations", 2.0, 1),
                                             ("iterations", True, 1), ("iterations", 100_001, 1),
                                             ("llpt_every", 1.0, 0), ("llpt_every", -1, 0), ("llpt_every", False, 0)])
def test_training_iteration_counts_follow_the_transform_rule(cacm200, tmp_path, name, value, lo):
    """Training takes the iteration counts as transform does: integers only, in a range, checked before work."""
    kw = dict(K=3, iterations=2, text_column="contents", id_column="id", backend="cpu", progress=False)
    with pytest.raises(ValueError, match=rf"^{name} must be an integer in \[{lo}, 100000\], got "):
        pipelines.run("lda", cacm200, out=tmp_path / "m", **{**kw, name: value})
    assert not (tmp_path / "m").exists()


def test_numpy_iteration_counts_are_taken(model, cacm200, tmp_path):
    r = pipelines.run("lda", cacm200, out=tmp_path / "m", K=3, iterations=np.int64(2), llpt_every=np.int32(1),
                      text_column="contents", id_column="id", backend="cpu", progress=False)
    assert r.params["iterations"] == 2
    assert LDAModel.load(model).transform(["computer programs"], iterations=np.int64(3), backend="cpu").shape[0] == 1


# ----------------------------------------------------------------------------- 6. tokenizer settings

@pytest.mark.parametrize("name", ["bm25", "lda", "cluster"])
@pytest.mark.parametrize("stopwords", [5, b"lucene", [1, 2]])
def test_stopwords_of_the_wrong_type_are_named(cacm200, tmp_path, name, stopwords):
    with pytest.raises(TypeError, match=r"stopwords must be .*(list of words|got int 5)"):
        pipelines.run(name, cacm200, out=tmp_path / "out", backend="cpu", progress=False, stopwords=stopwords)
    assert not (tmp_path / "out").exists()


def test_stopwords_from_a_path_object(tmp_path):
    f = tmp_path / "stop.txt"
    f.write_text("the\nOf\n", encoding="utf-8")
    assert TokenizerConfig.make(stopwords=f).stopwords == frozenset({"the", "of"})


def test_unknown_stemmer_in_a_saved_index_names_the_file_and_field(index60, tmp_path):
    bad = tmp_path / "index"
    shutil.copytree(index60, bad)
    meta = json.loads((bad / "index.json").read_text())
    meta["tokenizer"]["stemmer"] = "klingon"
    (bad / "index.json").write_text(json.dumps(meta))
    checksums.seal(bad, "index.json")  # a crafted value behind valid checksums
    with pytest.raises(ArtifactError, match=r"index.json: tokenizer.stemmer: unknown stemmer 'klingon'; "
                                            r"PyStemmer has \[.*'porter'"):
        BM25Index.load(bad, backend="cpu")


@pytest.mark.parametrize("field, value, match", [
    ("stemmer", "klingon", r"tokenizer.stemmer: unknown stemmer 'klingon'; PyStemmer has \["),
    ("stemmer", 7, r"tokenizer.stemmer must be a PyStemmer algorithm name"),
    ("stopwords", "the", r"tokenizer.stopwords must be a list of words"),
    ("min_len", 0, r"tokenizer.min_len must be an integer >= 1, got 0"),
    ("max_len", "9", r"tokenizer.max_len must be an integer"),
    ("lowercase", "yes", r"tokenizer.lowercase must be true or false"),
])
def test_tokenizer_settings_from_a_manifest_are_checked(field, value, match):
    d = TokenizerConfig.make(stemmer="porter").to_dict()
    assert TokenizerConfig.from_dict(d) == TokenizerConfig.make(stemmer="porter")
    d[field] = value
    with pytest.raises(ValueError, match=match):
        TokenizerConfig.from_dict(d)


# ----------------------------------------------------------------------------- 7. model files with no end

def _load_guarded(path):
    """NGramModel.load(path) in a thread; returns the exception it raised (a hang fails the test)."""
    from cutext.pipelines.ngram import NGramModel

    out = {}

    def go():
        try:
            NGramModel.load(path, backend="cpu")
        except Exception as exc:
            out["exc"] = exc

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(120)
    assert not t.is_alive(), f"NGramModel.load({path}) did not return"
    return out.get("exc")


def test_ngram_load_refuses_dev_zero():
    from cutext.stages.readers.arpa import ArpaError

    exc = _load_guarded("/dev/zero")
    assert isinstance(exc, ArpaError) and "/dev/zero: not a regular file (a character device)" in str(exc)


def test_ngram_load_refuses_a_fifo(tmp_path):
    from cutext.stages.readers.arpa import ArpaError

    fifo = tmp_path / "model.arpa"
    os.mkfifo(fifo)
    exc = _load_guarded(fifo)  # opening a FIFO without a writer blocks: it must not be opened
    assert isinstance(exc, ArpaError) and f"{fifo}: not a regular file (a FIFO)" in str(exc)


def test_ngram_load_caps_a_line_without_end(arpa, tmp_path):
    from cutext.stages.readers.arpa import MAX_LINE_BYTES, ArpaError

    # a real model's header, then a compressed run of bytes with no newline (as a device would give)
    head = (arpa / "kenlm" / "test.arpa").read_bytes().split(b"\\1-grams:")[0]
    f = tmp_path / "endless.arpa.gz"
    with gzip.open(f, "wb") as fh:
        fh.write(head + b"\\1-grams:\n")
        fh.write(b"0" * (MAX_LINE_BYTES + (2 << 20)))
    exc = _load_guarded(f)
    assert isinstance(exc, ArpaError) and f"a line longer than {MAX_LINE_BYTES:,} bytes" in str(exc)


# ----------------------------------------------------------------------------- 8. the queries of a search

@pytest.mark.parametrize("queries, match", [
    ({1: "computer", "1": "program"}, r"'1' \(from 1, '1'\)"),
    (pd.DataFrame({"query_id": [7, 7], "query": ["computer", "program"]}), r"'7' \(2 times\)"),
    (pd.DataFrame({"query_id": ["q1", "q2", "q1"], "text": ["a", "b", "c"]}), r"'q1' \(2 times\)"),
    (pd.Series(["computer", "program"], index=[2, "2"]), r"'2' \(from 2, '2'\)"),
    ({**{i: "computer" for i in range(7)}, **{str(i): "program" for i in range(7)}},
     r"'0' \(from 0, '0'\), '1' .*'4' \(from 4, '4'\) and 2 more"),
], ids=["dict", "frame", "frame-text", "series", "many"])
def test_query_ids_that_collide_are_refused(index60, queries, match):
    """Two queries whose ids are one string in the result (the dict keys 1 and "1", a repeated query_id) would
    merge their hits under one query_id: refused naming them (up to five), whatever form the queries take."""
    idx = BM25Index.load(index60, backend="cpu")
    with pytest.raises(ValueError, match=r"^queries: \d+ query id\(s\) repeat.*" + match
                       + ".*each query needs its own"):
        idx.search(queries, k=5)
    with pytest.raises(ValueError, match=r"queries: 1 query id\(s\) missing \(None or NaN\), at position\(s\) 1"):
        idx.search(pd.DataFrame({"query_id": [1, None], "query": ["computer", "program"]}))
    with pytest.raises(ValueError, match=r"\['query_id'\] more than once; it needs one query_id and one query"):
        idx.search(pd.DataFrame([[1, 2, "computer"]], columns=["query_id", "query_id", "query"]))


@pytest.mark.parametrize("queries, shown", [
    (5, "int 5"), (float("nan"), "float nan"), (None, "NoneType None"), (b"computer", "bytes b'computer'"),
    ({"computer"}, "set {'computer'}; a set has no order"),
])
def test_queries_of_another_type_are_refused_naming_the_forms(index60, queries, shown):
    idx = BM25Index.load(index60, backend="cpu")
    with pytest.raises(TypeError, match=r"^queries must be a string, a list of strings, a dict \{query_id: text\}, "
                                        r"a pandas Series .* or a DataFrame with columns query_id and query; got "
                                        + re.escape(shown)):
        idx.search(queries)
    with pytest.raises(TypeError, match=r"query must be a string \(one query"):
        idx.get_scores(queries)


def test_ordered_query_forms_number_their_queries(index60):
    """A tuple, a numpy or a pyarrow array of strings, a generator: ids "0", "1", ... as for a list; a
    Mapping's keys are its ids, and a text that is not a string is named by its id."""
    import pyarrow as pa

    idx = BM25Index.load(index60, backend="cpu")
    want = idx.search(["computer program", "matrix"], k=5)
    for form in (("computer program", "matrix"), np.array(["computer program", "matrix"]),
                 pa.array(["computer program", "matrix"]), (q for q in ["computer program", "matrix"])):
        pd.testing.assert_frame_equal(idx.search(form, k=5), want)
    import types

    mapped = idx.search(types.MappingProxyType({"q7": "matrix"}), k=5)  # any Mapping: its keys are the ids
    assert set(mapped.query_id) == {"q7"} and len(mapped)
    with pytest.raises(TypeError, match=r"^query 'q7' is 5 \(int\), not a string"):
        idx.search({"q1": "matrix", "q7": 5})


def test_a_stopwords_directory_is_named_as_one(tmp_path):
    from cutext.stages.text.tokenize import resolve_stopwords

    for given in (str(tmp_path), tmp_path):
        with pytest.raises(ValueError, match=r"stopwords '.*': is a directory; a stopword list is a file"):
            resolve_stopwords(given)
