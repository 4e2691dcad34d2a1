"""Unit tests of the count stage (stages/text/count.py): tf, document lengths and df.

Tested through ``count_partition`` (one partition) and ``document_frequencies`` /
``document_lengths`` (global steps over dask partitions), on small inputs and on the Lee corpus,
against pandas group-bys of the token table.
"""
from __future__ import annotations

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from cutext.stages.text.count import count_partition, document_frequencies, document_lengths
from cutext.stages.text.encode import build_vocabulary, encode_partition
from cutext.stages.text.tokenize import TokenizerConfig, tokenize_partition

from helpers import need_data

COLUMNS = {"term_id": np.int32, "doc_id": np.int64, "tf": np.int32, "dl": np.int32}


def _pairs(doc_ids, term_ids) -> pd.DataFrame:
    return pd.DataFrame({"doc_id": np.asarray(doc_ids, np.int64), "term_id": np.asarray(term_ids, np.int32)})


@pytest.fixture(scope="module")
def lee_encoded():
    """The Lee corpus as dask partitions of (doc_id, term_id) rows, 5 partitions split between documents."""
    path = need_data("lee") / "lee_background.cor"
    texts = path.read_text(encoding="utf-8", errors="replace").splitlines()
    docs = pd.DataFrame({"doc_id": np.arange(len(texts), dtype=np.int64), "text": pd.Series(texts, dtype=object)})
    cfg = TokenizerConfig.make(stopwords="lucene")
    with dask.config.set({"dataframe.convert-string": False, "scheduler": "sync"}):
        ddocs = dd.from_pandas(docs, npartitions=5, sort=False)
        no_tokens = tokenize_partition(docs.iloc[:0], cfg)
        tokens = ddocs.map_partitions(tokenize_partition, cfg, meta=no_tokens)
        vocab = build_vocabulary(tokens)
        vf = pd.DataFrame({"token": pd.Series(vocab.to_pylist(), dtype=pd.StringDtype("pyarrow")),
                           "term_id": np.arange(1, len(vocab) + 1, dtype=np.int32)})
        encoded = tokens.map_partitions(encode_partition, vf, meta=encode_partition(no_tokens, vf))
        pairs = encoded.compute().reset_index(drop=True)
    assert encoded.npartitions == 5
    return {"n_docs": len(texts), "V": len(vocab), "tokens": tokens, "encoded": encoded, "pairs": pairs}


def _check_dtypes(out):
    assert list(out.columns) == list(COLUMNS)
    for c, dt in COLUMNS.items():
        assert out[c].dtype == dt, c


def test_small_partition_by_hand():
    # doc 10: terms 3 3 1 ; doc 12: terms 1 2 1 1 (doc ids need not start at 0 nor be contiguous)
    out = count_partition(_pairs([10, 10, 10, 12, 12, 12, 12], [3, 3, 1, 1, 2, 1, 1]))
    _check_dtypes(out)
    assert list(zip(out.term_id, out.doc_id, out.tf, out.dl)) == [
        (1, 10, 1, 3), (1, 12, 3, 4), (2, 12, 1, 4), (3, 10, 2, 3)]


def test_empty_partition_keeps_the_dtypes():
    out = count_partition(_pairs([], []))
    assert len(out) == 0
    _check_dtypes(out)


def test_large_and_sparse_doc_ids():
    rng = np.random.default_rng(7)
    docs = rng.choice(np.arange(10**12, 10**12 + 10**6, 997), size=400)
    terms = rng.integers(1, 60, size=400)
    out = count_partition(_pairs(docs, terms))
    want = _pairs(docs, terms).groupby(["term_id", "doc_id"]).size()
    assert out.set_index(["term_id", "doc_id"])["tf"].to_dict() == want.to_dict()


def test_counts_on_real_text(lee_encoded):
    pairs = lee_encoded["pairs"]
    out = count_partition(pairs)
    _check_dtypes(out)
    # one row per distinct (term, doc), sorted by (term_id, doc_id)
    keys = out[["term_id", "doc_id"]]
    assert not keys.duplicated().any()
    assert keys.equals(keys.sort_values(["term_id", "doc_id"], kind="mergesort").reset_index(drop=True))
    # tf sums: over the whole partition = its rows, over a document = its length dl
    assert int(out["tf"].sum()) == len(pairs)
    per_doc = out.groupby("doc_id")["tf"].sum()
    dl = out.groupby("doc_id")["dl"].agg(["min", "max"])
    assert (dl["min"] == dl["max"]).all()
    np.testing.assert_array_equal(per_doc.to_numpy(), dl["min"].to_numpy())
    np.testing.assert_array_equal(per_doc.to_numpy(), pairs.groupby("doc_id").size().loc[per_doc.index].to_numpy())


def test_document_frequencies(lee_encoded):
    V = lee_encoded["V"]
    with dask.config.set(scheduler="sync"):
        counts = lee_encoded["encoded"].map_partitions(count_partition,
                                                       meta=count_partition(_pairs([], [])))
        df = document_frequencies(counts, V)
    assert df.dtype == np.int64 and df.shape == (V + 1,)
    assert df[0] == 0  # no unknown term in a corpus encoded with its own vocabulary
    want = lee_encoded["pairs"].groupby("term_id")["doc_id"].nunique()
    np.testing.assert_array_equal(df[want.index.to_numpy()], want.to_numpy())
    assert (df[1:] >= 1).all()  # every vocabulary term occurs somewhere
    assert df.max() <= lee_encoded["n_docs"]


def test_document_lengths(lee_encoded):
    n = lee_encoded["n_docs"] + 3  # three trailing documents without tokens
    with dask.config.set(scheduler="sync"):
        lengths = document_lengths(lee_encoded["tokens"], n)
    assert lengths.dtype == np.int64 and lengths.shape == (n,)
    pairs = lee_encoded["pairs"]
    assert int(lengths.sum()) == len(pairs)
    want = np.bincount(pairs["doc_id"].to_numpy(), minlength=n)
    np.testing.assert_array_equal(lengths, want)
    assert (lengths[-3:] == 0).all()


@pytest.mark.parametrize("doc_base", [0, 5_000_000_000, 2**62])
def test_sort_frame_by_pairs_equals_sort_values(lee_encoded, doc_base):
    """The packed-key sort of a term range (weight step of bm25) gives sort_values' rows: counts of
    real text in shuffled order, doc ids far from 0, and ids whose packed key would overflow int64
    (then sort_values itself); an empty frame keeps its columns."""
    from cutext.stages.text.sort import sort_frame_by_pairs

    c = count_partition(lee_encoded["pairs"]).sample(frac=1.0, random_state=3)
    c["doc_id"] = c["doc_id"].astype(np.int64) + doc_base
    if doc_base == 2**62:
        c.loc[c.index[0], "doc_id"] = 0  # a span of 2**62: the key would overflow
    want = c.sort_values(["term_id", "doc_id"], ignore_index=True)
    got = sort_frame_by_pairs(c)
    pd.testing.assert_frame_equal(got, want)
    assert list(sort_frame_by_pairs(c.iloc[:0]).columns) == list(c.columns)
