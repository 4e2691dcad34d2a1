"""Unit tests of the encode stage (stages/text/encode.py): the global vocabulary and term ids.

Tested through ``build_vocabulary``, ``encode_partition`` and ``encode_terms``; the vocabulary
frame is built here from its documented contract (``token: str, term_id: int32``, ids 1..V).
"""
from __future__ import annotations

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from cutext.stages.text.encode import UNKNOWN_TERM_ID, build_vocabulary, encode_partition, encode_terms
from cutext.stages.text.tokenize import TokenizerConfig, tokenize_partition

from helpers import need_data


def _vocab_frame(vocab: pa.Array) -> pd.DataFrame:
    """The (token, term_id) frame encode_partition documents: term ``vocab[i]`` has id ``i + 1``."""
    return pd.DataFrame({"token": pd.Series(vocab.to_pylist(), dtype=pd.StringDtype("pyarrow")),
                         "term_id": np.arange(1, len(vocab) + 1, dtype=np.int32)})


def _tokens(texts, first_id=0) -> pd.DataFrame:
    docs = pd.DataFrame({"doc_id": np.arange(first_id, first_id + len(texts), dtype=np.int64),
                         "text": pd.Series(list(texts), dtype=object)})
    return tokenize_partition(docs, TokenizerConfig.make(stopwords="lucene", stemmer="porter"))


def _vocabulary(tokens: pd.DataFrame, npartitions: int) -> pa.Array:
    with dask.config.set({"dataframe.convert-string": False, "scheduler": "sync"}):
        return build_vocabulary(dd.from_pandas(tokens, npartitions=npartitions, sort=False))


@pytest.fixture(scope="module")
def lee():
    path = need_data("lee") / "lee_background.cor"
    return path.read_text(encoding="utf-8", errors="replace").splitlines()


def test_unknown_term_id_is_zero():
    assert UNKNOWN_TERM_ID == 0


def test_vocabulary_is_the_sorted_unique_tokens(lee):
    tokens = _tokens(lee)
    vocab = _vocabulary(tokens, npartitions=4)
    assert pa.types.is_large_string(vocab.type)
    terms = vocab.to_pylist()
    assert terms == sorted(set(tokens["token"].tolist()), key=lambda s: s.encode("utf-8"))
    assert len(terms) == len(set(terms)) > 1000


def test_vocabulary_sorts_by_utf8_bytes():
    toks = pd.DataFrame({"doc_id": np.zeros(6, np.int64),
                         "token": pd.Series(["zeta", "äpfel", "Zulu", "éclair", "apple", "\U0001f600x"],
                                            dtype=pd.StringDtype("pyarrow"))})
    terms = _vocabulary(toks, npartitions=2).to_pylist()
    assert [t.encode() for t in terms] == sorted(t.encode() for t in terms)
    assert terms[0] == "Zulu" and terms[-1] == "\U0001f600x"


def test_vocabulary_does_not_depend_on_the_partitioning(lee):
    tokens = _tokens(lee[:150])
    one = _vocabulary(tokens, npartitions=1)
    assert one.equals(_vocabulary(tokens, npartitions=7))
    shuffled = tokens.sample(frac=1.0, random_state=3).reset_index(drop=True)
    assert one.equals(_vocabulary(shuffled, npartitions=3))


def test_encode_partition_contract(lee):
    tokens = _tokens(lee[:100], first_id=5000)
    vocab = _vocabulary(tokens, npartitions=3)
    out = encode_partition(tokens, _vocab_frame(vocab))
    assert list(out.columns) == ["doc_id", "term_id"]
    assert out["doc_id"].dtype == np.int64 and out["term_id"].dtype == np.int32
    # same rows and order; every id names its token (term vocab[i] has id i + 1); none unknown
    np.testing.assert_array_equal(out["doc_id"].to_numpy(), tokens["doc_id"].to_numpy())
    ids = out["term_id"].to_numpy()
    assert ids.min() >= 1 and ids.max() <= len(vocab)
    terms = np.asarray(vocab.to_pylist(), dtype=object)
    assert terms[ids - 1].tolist() == tokens["token"].tolist()


def test_tokens_outside_the_vocabulary_get_the_reserved_id(lee):
    train, test = _tokens(lee[:150]), _tokens(lee[150:], first_id=150)
    vocab = _vocabulary(train, npartitions=2)
    known = set(vocab.to_pylist())
    out = encode_partition(test, _vocab_frame(vocab))
    unknown = ~test["token"].isin(known).to_numpy()
    assert unknown.any() and (~unknown).any()  # the split really has both kinds
    ids = out["term_id"].to_numpy()
    assert (ids[unknown] == UNKNOWN_TERM_ID).all()
    assert (ids[~unknown] >= 1).all()
    terms = np.asarray(vocab.to_pylist(), dtype=object)
    assert terms[ids[~unknown] - 1].tolist() == test["token"][~unknown].tolist()


def test_empty_partition_keeps_the_dtypes():
    vocab = pa.array(["a", "b"], type=pa.large_string())
    empty = _tokens([])
    out = encode_partition(empty, _vocab_frame(vocab))
    assert len(out) == 0 and list(out.columns) == ["doc_id", "term_id"]
    assert out["doc_id"].dtype == np.int64 and out["term_id"].dtype == np.int32


def test_query_lookup_agrees_with_the_partition_encoding(lee):
    tokens = _tokens(lee[:120])
    vocab = _vocabulary(tokens, npartitions=2)
    absent = ["zzzz-not-a-term", "Über", "x y"]
    assert not set(absent) & set(vocab.to_pylist())
    probe = tokens["token"].tolist()[:500] + absent
    q = encode_terms(probe, vocab)
    assert q.dtype == np.int64
    frame = pd.DataFrame({"doc_id": np.zeros(len(probe), np.int64),
                          "token": pd.Series(probe, dtype=pd.StringDtype("pyarrow"))})
    np.testing.assert_array_equal(q, encode_partition(frame, _vocab_frame(vocab))["term_id"].to_numpy())
    assert (q[-3:] == UNKNOWN_TERM_ID).all()
