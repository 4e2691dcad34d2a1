"""The CPU split of ``analyzer="anserini"`` through the word-break kernels' numba twins equals the ``regex`` split
(``split_anserini``, itself checked against Lucene in tests/pipelines/test_anserini.py) token for token."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from cutext.stages.text import token_bytes as B
from cutext.stages.text import tokenize as T
from cutext.stages.text.anserini import split_anserini
from cutext.stages.text.tokenizer_config import TokenizerConfig

from wordbreak_cases import HOSTILE, random_texts

pytest.importorskip("regex")


def _texts():
    return HOSTILE + random_texts(11, n_short=400, n_long=20) + [None, "", "Don't STOP the U.S.A.'s 0.05 runs"]


def _frame(texts):
    return pd.DataFrame({"doc_id": np.arange(100, 100 + len(texts), dtype=np.int64),
                         "text": pd.Series(texts, dtype=pd.StringDtype("pyarrow"))})


@pytest.mark.parametrize("kind", ["series", "arrow", "chunked"])
def test_host_split_equals_the_regex_split(kind):
    texts = _texts()
    ids = np.arange(7, 7 + len(texts), dtype=np.int64)
    col = {"series": pd.Series(texts, dtype=object), "arrow": pa.array(texts, pa.string()),
           "chunked": pa.chunked_array([pa.array(texts[:50]), pa.array(texts[50:])])}[kind]
    got, got_ids = B.split_anserini_host(col, ids)
    want, want_ids = split_anserini(col, ids)
    assert got.tolist() == want.tolist()
    np.testing.assert_array_equal(got_ids, want_ids)


def test_host_split_falls_back_to_the_regex_split_when_the_kernels_report(monkeypatch):
    texts = HOSTILE[:20]
    ids = np.arange(len(texts), dtype=np.int64)
    want = split_anserini(pd.Series(texts), ids)[0].tolist()
    monkeypatch.setattr(B, "standard_token_bounds", lambda data, offsets: None)  # a segment past the stack
    assert B.split_anserini_host(pd.Series(texts), ids)[0].tolist() == want
    monkeypatch.setattr(B, "token_codes", lambda data, starts, ends: None)  # a hash collision
    assert B.split_anserini_host(pd.Series(texts), ids)[0].tolist() == want


def test_partition_codes_equal_the_partitions_tokens():
    """The codes path (no string a token) gives tokenize_partition's terms, document by document."""
    df = _frame(_texts())
    cfg = TokenizerConfig.make(analyzer="anserini")
    ids, codes, uniq = T.tokenize_partition_codes(df, cfg)
    want = T.tokenize_partition(df, cfg)
    np.testing.assert_array_equal(ids, want["doc_id"].to_numpy())
    assert np.asarray(uniq, dtype=object)[codes].tolist() == want["token"].tolist()
    assert len(set(uniq)) == len(uniq) and "stop" in set(uniq) and "the" not in set(uniq)


def test_partition_codes_of_text_without_tokens():
    df = _frame(["", None, "!!! ---", " "])
    ids, codes, uniq = T.tokenize_partition_codes(df, TokenizerConfig.make(analyzer="anserini"))
    assert len(ids) == len(codes) == len(uniq) == 0


def test_host_token_codes_number_tokens_by_their_bytes(monkeypatch):
    from cutext.kernels.tokenize import arrow_buffers

    words = ["b", "a", "b", "ccc", "a", "dd", "ccc", "b"]
    arr = pa.array([" ".join(words)], pa.large_string())
    data, offsets = arrow_buffers(arr)
    starts = np.array([0, 2, 4, 6, 10, 12, 15, 19], np.int64)
    ends = starts + np.array([len(w) for w in words], np.int64)
    codes, rep = B.token_codes(data, starts, ends)
    assert [words[i] for i in rep[codes]] == words and len(rep) == 4
    assert list(rep) == [0, 1, 3, 5]  # the first token of each code
    monkeypatch.setattr(B, "hash_tokens", lambda d, s, e: np.zeros(len(s), np.uint64))  # every hash collides
    assert B.token_codes(data, starts, ends) is None
