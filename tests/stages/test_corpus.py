"""The corpus front end (stages/text/frontend.py) and the backend form (kernels/backend.py) on the CPU."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from cutext.kernels import backend as B
from cutext.stages.readers.source import open_corpus
from cutext.stages.runtime.compute import compute_context
from cutext.stages.text.frontend import STAGES, build_corpus, corpus_session
from cutext.stages.text.tokenize import TokenizerConfig, split_dispatch, split_tokens, tokenize_texts

TEXTS = ["The cat sat on the mat.", "", "Dogs and cats, cats and dogs!", "σοφία Σοφία ΣΟΦΊΑΣ",
         "x_1 y2 z-3", "the the THE"]


@pytest.fixture()
def lines(tmp_path):
    p = tmp_path / "c.txt"
    p.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return p


# ----------------------------------------------------------------------------- backend form

@pytest.mark.parametrize("kind", sorted(B.SCHEMAS))
def test_meta_has_the_schema_of_its_table(kind):
    m = B.meta(kind, "cpu")
    assert isinstance(m, pd.DataFrame) and len(m) == 0
    assert [(c, "string" if isinstance(m[c].dtype, pd.StringDtype) else str(m[c].dtype)) for c in m.columns] \
        == list(B.SCHEMAS[kind])
    assert B.meta(kind, m).columns.tolist() == m.columns.tolist()  # like= host data -> pandas


def test_meta_of_given_columns_and_errors():
    m = B.meta({"a": "int16", "s": "string"}, np.zeros(3))
    assert str(m["a"].dtype) == "int16" and isinstance(m["s"].dtype, pd.StringDtype)
    with pytest.raises(ValueError, match="unknown table"):
        B.meta("postings", "cpu")
    with pytest.raises(ValueError, match="resolve 'auto' first"):
        B.meta("tokens", "auto")


def test_to_host_is_the_identity_on_host_data():
    a, s = np.arange(4), pd.Series([1, 2])
    assert B.to_host(a) is a and B.to_host(s) is s and B.to_host(3) == 3


def test_is_gpu_reads_strings_data_and_dask_collections():
    import dask.dataframe as dd

    assert B.is_gpu("gpu") and not B.is_gpu("cpu")
    assert not B.is_gpu(np.zeros(1)) and not B.is_gpu(pd.DataFrame({"a": [1]}))
    assert not B.is_gpu(dd.from_pandas(pd.DataFrame({"a": [1, 2]}), npartitions=1))


def test_one_resolver_with_the_modules_each_caller_needs():
    assert B.resolve_backend("cpu") == "cpu"
    assert B.resolve_backend("auto", needs=("cutext_no_such_module",)) == "cpu"  # auto falls back
    with pytest.raises(RuntimeError, match="cutext_no_such_module"):
        B.resolve_backend("gpu", needs=("cutext_no_such_module",))
    with pytest.raises(ValueError):
        B.resolve_backend("tpu")
    want = "gpu" if B.gpu_stack_installed(B.ARRAY_STACK) and B.device_count() > 0 else "cpu"
    assert B.resolve_backend("auto", needs=B.ARRAY_STACK) == want


def test_loaders_default_to_auto():
    import inspect

    from cutext.pipelines.bm25 import BM25Index
    from cutext.pipelines.lda import LDAModel
    from cutext.pipelines.ngram import NGramModel
    from cutext.stages.engines.streamcluster import StreamClusterer

    for f in (BM25Index.load, NGramModel.load, LDAModel.transform, LDAModel.log_likelihood, LDAModel.perplexity,
              StreamClusterer.__init__, StreamClusterer.load):
        assert inspect.signature(f).parameters["backend"].default == "auto", f.__qualname__
        assert '"auto"' in (f.__doc__ or StreamClusterer.__doc__), f.__qualname__
    want = B.resolve_backend("auto", needs=B.ARRAY_STACK)
    assert StreamClusterer(0.5, 5).backend == want
    assert StreamClusterer(0.5, 5, method="reference").backend == "cpu"  # the GPU runs only ellpack


def test_split_dispatches_on_the_text_type():
    ids = np.arange(2, dtype=np.int64)
    a = split_tokens(pd.Series(["A b", "c"], dtype=pd.StringDtype("pyarrow")), ids)
    b = split_tokens(pa.array(["A b", "c"], pa.large_string()), ids)
    assert a[0].tolist() == b[0].tolist() == ["a", "b", "c"]
    np.testing.assert_array_equal(a[1], [0, 0, 1])
    assert "cudf" in split_dispatch._lazy or any("cudf" in t.__module__ for t in split_dispatch._lookup)
    with pytest.raises(TypeError):
        split_tokens(["A b"], ids[:1])


# ----------------------------------------------------------------------------- front end

def test_front_end_counts_equal_counting_the_tokenizer_by_hand(lines):
    cfg = TokenizerConfig.make(stopwords="lucene")
    with corpus_session(str(lines), cfg, "cpu", format="lines", blocksize=16, keep_tokens=True) as c:
        assert set(c.timings) == set(STAGES) and all(v >= 0 for v in c.timings.values())
        assert c.n_docs == len(TEXTS) and c.info.scheduler == "threads" and c.format == "lines"
        assert c.docs.npartitions > 1 and c.tokens is not None
        host = c.host_counts()
        names = c.source_ids()
        enc = c.encoded.compute()
    toks = tokenize_texts(TEXTS, cfg)
    vocab = c.vocab.to_pylist()
    assert vocab == sorted({t for d in toks for t in d}, key=lambda t: t.encode())
    got = Counter()
    for d, t, tf in zip(host["doc_id"], host["term_id"], host["tf"]):
        got[(int(d), vocab[t - 1])] += int(tf)
    assert got == Counter((d, t) for d, ts in enumerate(toks) for t in ts)
    np.testing.assert_array_equal(c.lengths, [len(t) for t in toks])
    assert c.df[0] == 0 and c.df.sum() == len(host["tf"])
    np.testing.assert_array_equal(c.df, np.bincount(host["term_id"], minlength=c.n_terms + 1))
    assert len(enc) == c.n_tokens == sum(len(t) for t in toks)
    assert names["doc_id"].tolist() == list(range(len(TEXTS)))


def test_build_corpus_in_an_explicit_context_and_without_counts(lines):
    src = open_corpus(str(lines), backend="cpu", format="lines")
    assert src.input_bytes == lines.stat().st_size
    calls = []

    def run_stage(name, fn):
        calls.append(name)
        return fn()

    with compute_context("cpu", scheduler="sync", nbytes=src.input_bytes) as info:
        c = build_corpus(src, None, info, count=False, run_stage=run_stage)
        assert c.counts is None and c.df is None and c.tokens is None
        with pytest.raises(ValueError, match="count=False"):
            c.host_counts()
    assert calls == ["read", "tokenize", "encode"] and c.timings == {} and info.scheduler == "sync"


def test_in_process_persist_keeps_rows_and_divisions_without_hashing_partitions(lines, monkeypatch):
    """materialize / persist_all in-process: the same rows, meta and divisions as dask.persist, delayed
    objects persisted too, and no computed partition tokenized (dask names a persisted collection by
    hashing its partitions, which for cudf hashes every row on the device); dask.persist itself does
    hash them (so the check can fail), and on a client the persist stays dask's own."""
    import dask
    import dask.dataframe as dd

    from cutext.stages.runtime.compute import ComputeInfo, materialize, persist_all

    pdf = pd.DataFrame({"a": np.arange(40), "b": np.arange(40) * 0.5})
    ddf = dd.from_pandas(pdf, npartitions=4).map_partitions(lambda f: f.assign(c=f.a * 2))
    hashed = []

    from dask.tokenize import normalize_token

    pandas_token = normalize_token.dispatch(pd.DataFrame)  # (registers dask's pandas tokenizers)

    def tokenize_frame(df):  # only the computed partitions have rows (metas are empty)
        if len(df):
            hashed.append(len(df))
        return pandas_token(df)

    monkeypatch.setitem(normalize_token._lookup, pd.DataFrame, tokenize_frame)
    with dask.config.set(scheduler="sync"):
        got = materialize(ddf, ComputeInfo("cpu", "sync", 1))
        (again, total) = persist_all([ddf, dask.delayed(sum)([1, 2, 3])])
        assert hashed == []
        pd.testing.assert_frame_equal(got.compute(), ddf.compute())
        pd.testing.assert_frame_equal(again.compute(), ddf.compute())
        assert got.divisions == ddf.divisions == again.divisions and got.npartitions == 4
        assert list(got._meta.columns) == ["a", "b", "c"] and total.compute() == 6
        dask.persist(ddf)
        assert hashed  # what the in-process path avoids


def test_open_corpus_wants_a_resolved_backend(lines):
    with pytest.raises(ValueError, match="resolve 'auto' first"):
        open_corpus(str(lines), backend="auto")
