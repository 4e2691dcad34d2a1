"""Unit tests of the term-vector stage (stages/text/termvec.py): weights, top-k vectors, stream IDF.

Expected vectors come from a plain-Python reading of the module docstring (weights per formula,
sort by weight then term id, keep k, sort by term id, L2-normalize), never from the stage.
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from cutext.stages.text.termvec import TermVectors, count_pairs, stream_df_update, term_vectors, weight_pairs

from helpers import need_data


def _weight(tf, df, N, weighting):
    if df <= 0:
        return 0.0
    if weighting == "tficf":
        return math.log(1 + tf) * math.log(1 + N / df)
    return tf * math.log(N / df)


def _reference(doc_pos, term_id, tf, n_docs, k, weighting, df_of, n_of):
    """One (terms, weights, norm) triple per document; df_of / n_of give the IDF of a pair."""
    docs = [[] for _ in range(n_docs)]
    for i, (d, t, f) in enumerate(zip(doc_pos, term_id, tf)):
        w = _weight(f, df_of(i), n_of(i), weighting)
        if w > 0:
            docs[d].append((int(t), w))
    out = []
    for pairs in docs:
        kept = sorted(sorted(pairs, key=lambda p: (-p[1], p[0]))[:k])
        norm = math.sqrt(sum(w * w for _, w in kept))
        out.append(([t for t, _ in kept], [w / norm for _, w in kept], norm))
    return out


def _assert_matches(tv: TermVectors, ref):
    for j, (terms, ws, norm) in enumerate(ref):
        L = len(terms)
        assert tv.length[j] == L, j
        assert tv.idx[j, :L].tolist() == terms, j
        np.testing.assert_allclose(tv.w[j, :L], ws, rtol=1e-12, atol=0)
        assert tv.norm[j] == pytest.approx(norm, rel=1e-12)


@pytest.fixture(scope="module")
def lee_pairs():
    """(doc_pos, term_id, tf) unique pairs of the Lee corpus (whitespace-split lowercase words)."""
    path = need_data("lee") / "lee_background.cor"
    docs = [line.lower().split() for line in path.read_text(encoding="utf-8", errors="replace").splitlines()]
    ids: dict[str, int] = {}
    pos, term = [], []
    for d, words in enumerate(docs):
        for w in words:
            pos.append(d)
            term.append(ids.setdefault(w, len(ids) + 1))
    p, t, f = count_pairs(np.asarray(pos), np.asarray(term))
    return {"n_docs": len(docs), "V": len(ids), "pos": p, "term": t, "tf": f, "n_tokens": len(pos),
            "tokens": list(zip(pos, term))}


# ----------------------------------------------------------------------------- weights

@pytest.mark.parametrize("weighting", ["tficf", "tfidf"])
def test_weight_pairs_formulas(weighting):
    tf = np.array([1, 3, 2, 5, 4])
    df = np.array([1, 2, 10, 0, 10])
    N = np.array([10, 10, 10, 10, 20])
    w = weight_pairs(tf, df, N, weighting)
    assert w.dtype == np.float64 and w.shape == tf.shape
    np.testing.assert_allclose(w, [_weight(*x, weighting) for x in zip(tf, df, N)], rtol=1e-15)
    assert w[3] == 0.0  # df = 0: no weight
    if weighting == "tfidf":
        assert w[2] == 0.0  # a term in every document
    else:
        assert w[2] > 0.0


def test_weight_pairs_rejects_unknown_weighting():
    with pytest.raises(ValueError, match="weighting"):
        weight_pairs([1], [1], [1], "bm25")


# ----------------------------------------------------------------------------- count_pairs

def test_count_pairs_on_real_text(lee_pairs):
    p, t, f = lee_pairs["pos"], lee_pairs["term"], lee_pairs["tf"]
    assert p.dtype == t.dtype == f.dtype == np.int64
    assert int(f.sum()) == lee_pairs["n_tokens"]
    assert len(set(zip(p.tolist(), t.tolist()))) == len(p)
    assert dict(zip(zip(p.tolist(), t.tolist()), f.tolist())) == dict(Counter(lee_pairs["tokens"]))


# ----------------------------------------------------------------------------- fixed IDF

@pytest.mark.parametrize("weighting,k", [("tficf", 35), ("tficf", 3), ("tfidf", 10)])
def test_top_k_vectors_with_a_fixed_idf(lee_pairs, weighting, k):
    p, t, f, n = lee_pairs["pos"], lee_pairs["term"], lee_pairs["tf"], lee_pairs["n_docs"]
    df = np.bincount(t, minlength=lee_pairs["V"] + 1)
    tv = term_vectors(p, t, f, n, k, weighting=weighting, df=df, n_ref=n)
    assert tv.idx.dtype == np.int32 and tv.idx.shape == (n, k)
    assert tv.w.dtype == np.float64 and tv.w.shape == (n, k)
    assert tv.length.dtype == np.int32 and tv.norm.dtype == np.float64 and len(tv) == n and tv.top_k == k
    tv.validate()  # sorted by term id, positive weights, padding -1 / 0, unit L2 norm
    ref = _reference(p, t, f, n, k, weighting, lambda i: df[t[i]], lambda i: n)
    _assert_matches(tv, ref)
    assert (tv.length == k).sum() > n // 2  # most Lee documents have more than k weighted terms


def test_ties_keep_the_smaller_term_id_and_padding():
    # document 0: four terms of equal weight; document 1: one term; document 2: nothing
    tv = term_vectors([0, 0, 0, 0, 1], [9, 5, 7, 3, 4], [2, 2, 2, 2, 1], 3, 2,
                      df=np.ones(10, np.int64), n_ref=5)
    assert tv.idx.tolist() == [[3, 5], [4, -1], [-1, -1]]
    assert tv.length.tolist() == [2, 1, 0]
    np.testing.assert_allclose(tv.w[0], [2 ** -0.5, 2 ** -0.5], rtol=1e-15)
    assert tv.w[1].tolist() == [1.0, 0.0] and tv.w[2].tolist() == [0.0, 0.0]
    assert tv.norm[2] == 0.0 and tv.norm[1] == pytest.approx(math.log(2) * math.log(6))


def test_terms_the_reference_lacks_get_no_weight():
    df = np.array([0, 3, 0], np.int64)  # term 2 has df 0; term 7 is beyond the reference
    tv = term_vectors([0, 0, 0], [1, 2, 7], [1, 1, 1], 1, 5, df=df, n_ref=4)
    assert tv.idx[0].tolist() == [1, -1, -1, -1, -1] and tv.length[0] == 1


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="top_k"):
        term_vectors([0], [1], [1], 1, 0, df=np.ones(2, np.int64), n_ref=1)
    with pytest.raises(ValueError, match="positions"):
        term_vectors([0, 2], [1, 1], [1, 1], 2, 3, df=np.ones(2, np.int64), n_ref=2)
    with pytest.raises(ValueError, match="df and n_ref"):
        term_vectors([0], [1], [1], 1, 3)


def test_validate_rejects_a_vector_that_is_not_normalized():
    tv = term_vectors([0, 0], [1, 2], [1, 3], 1, 4, df=np.ones(3, np.int64), n_ref=3)
    tv.validate()
    tv.w[0, 0] *= 1.01
    with pytest.raises(ValueError, match="document 0"):
        tv.validate()


# ----------------------------------------------------------------------------- stream IDF

def test_stream_idf_counts_the_stream_so_far(lee_pairs):
    p, t, f = lee_pairs["pos"], lee_pairs["term"], lee_pairs["tf"]
    n, k = 60, 20
    sel = p < n
    p, t, f = p[sel], t[sel], f[sel]
    tv = term_vectors(p, t, f, n, k, stream=True)
    tv.validate()
    # df of a pair: documents at positions <= its own that hold the term; N = position + 1
    first_docs: dict[int, list[int]] = {}
    for d, term in zip(p.tolist(), t.tolist()):
        first_docs.setdefault(term, []).append(d)
    df_pair = [sum(1 for x in first_docs[term] if x <= d) for d, term in zip(p.tolist(), t.tolist())]
    ref = _reference(p, t, f, n, k, "tficf", lambda i: df_pair[i], lambda i: p[i] + 1)
    _assert_matches(tv, ref)


def test_stream_in_blocks_equals_one_pass(lee_pairs):
    p, t, f, V = lee_pairs["pos"], lee_pairs["term"], lee_pairs["tf"], lee_pairs["V"]
    n, k, cut = 120, 15, 47
    sel = p < n
    p, t, f = p[sel], t[sel], f[sel]
    whole = term_vectors(p, t, f, n, k, stream=True)
    a, b = p < cut, p >= cut
    first = term_vectors(p[a], t[a], f[a], cut, k, stream=True)
    df_prior = stream_df_update(None, t[a], V)
    assert df_prior.dtype == np.int64 and df_prior.shape == (V + 1,)
    np.testing.assert_array_equal(df_prior, np.bincount(t[a], minlength=V + 1))
    second = term_vectors(p[b] - cut, t[b], f[b], n - cut, k, stream=True, df_prior=df_prior, n_prior=cut)
    both = TermVectors.concat([first, second])
    for name in ("idx", "length"):
        np.testing.assert_array_equal(getattr(both, name), getattr(whole, name))
    np.testing.assert_allclose(both.w, whole.w, rtol=1e-14, atol=0)
    np.testing.assert_allclose(both.norm, whole.norm, rtol=1e-14, atol=0)
    part = whole.take(slice(cut, n))
    np.testing.assert_array_equal(part.idx, second.idx)
