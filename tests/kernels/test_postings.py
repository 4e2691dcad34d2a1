"""kernels/postings.py: a segment's runs placed in the merged CSR, against the per-posting scatter."""
from __future__ import annotations

import numpy as np
import pytest

from cutext.kernels.postings import place_runs


def _runs(rng, m, total_extra):
    """m runs (some empty) of a source, and a destination where each run owns disjoint, shuffled slots."""
    lengths = rng.integers(0, 6, m)
    lengths[rng.random(m) < 0.2] = 0
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    gaps = rng.integers(0, 3, m)  # other segments' postings between this one's runs
    order = rng.permutation(m)  # terms' slots in another order than the runs
    start = np.empty(m, np.int64)
    pos = 0
    for j in order:
        pos += gaps[j]
        start[j] = pos
        pos += lengths[j]
    return start, offsets, pos + total_extra


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_runs_land_where_the_per_posting_scatter_puts_them(dtype):
    rng = np.random.default_rng(7)
    start, offsets, n = _runs(rng, 400, 5)
    src = rng.integers(0, 1000, offsets[-1]).astype(np.int32)
    dst = np.full(n, -1, dtype)
    place_runs(start, offsets, src, dst, add=12345)
    want = np.full(n, -1, dtype)
    dest = np.repeat(start - offsets[:-1], np.diff(offsets)) + np.arange(offsets[-1])
    want[dest] = src.astype(dtype) + 12345
    np.testing.assert_array_equal(dst, want)


def test_runs_outside_the_arrays_are_refused_and_nothing_is_written():
    dst = np.zeros(4, np.int32)
    with pytest.raises(ValueError, match="outside"):
        place_runs(np.array([2]), np.array([0, 3]), np.arange(3, dtype=np.int32), dst)  # 2 + 3 > 4
    with pytest.raises(ValueError, match="outside"):
        place_runs(np.array([0]), np.array([0, 5]), np.arange(3, dtype=np.int32), dst)  # past src
    with pytest.raises(ValueError, match="offsets"):
        place_runs(np.array([0, 1]), np.array([0, 1]), np.arange(3, dtype=np.int32), dst)
    assert not dst.any()
    place_runs(np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int32), dst)  # no run: nothing
    assert not dst.any()


def test_sorted_term_ids_finds_each_term_as_a_hash_lookup_does():
    import pyarrow as pa
    import pyarrow.compute as pc

    from cutext.kernels.postings import sorted_term_ids

    rng = np.random.default_rng(3)
    alphabet = list("ab\u00e9z\u4e2d0") + ["", "\U0001f600"]
    words = {"".join(rng.choice(alphabet, rng.integers(1, 6))) for _ in range(3000)}
    vocab = pa.array(sorted(w.encode() for w in words), pa.binary()).cast(pa.large_string())
    local = vocab.filter(pa.array(rng.random(len(vocab)) < 0.3))
    extra = pa.array(sorted({"zzzz\u00e9", "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"} - set(words)))
    terms = pa.array(sorted((local.to_pylist() + extra.to_pylist()), key=str.encode))
    got = sorted_term_ids(vocab, terms)
    want = pc.index_in(terms, value_set=vocab).to_numpy(zero_copy_only=False)
    want = np.where(np.isnan(want.astype(float)), 0, np.nan_to_num(want.astype(float)) + 1).astype(np.int32)
    np.testing.assert_array_equal(got, want)
    assert (got == 0).sum() == len(extra)
    assert len(sorted_term_ids(vocab, pa.array([], pa.string()))) == 0
    np.testing.assert_array_equal(sorted_term_ids(vocab[5:9], vocab[5:9]), [1, 2, 3, 4])  # sliced arrays
    few = pa.array(sorted(local.to_pylist()[::40] + extra.to_pylist() + ["", "\U0010ffff"], key=str.encode))
    assert len(few) * 32 < len(vocab)  # the binary-searched path of a deletion's few terms
    want = pc.index_in(few, value_set=vocab).to_numpy(zero_copy_only=False)
    want = np.where(np.isnan(want.astype(float)), 0, np.nan_to_num(want.astype(float)) + 1).astype(np.int32)
    np.testing.assert_array_equal(sorted_term_ids(vocab, few), want)


@pytest.mark.parametrize("variant", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_weights_of_the_csr_kernels_are_the_bits_of_the_numpy_formulas(variant):
    from cutext.kernels.postings import csr_weights, place_weighted_runs
    from cutext.stages.text import bm25 as bm25_stage

    rng = np.random.default_rng(11)
    V, N = 300, 2000
    df = rng.integers(1, 40, V + 1)
    df[0] = 0
    indptr = np.concatenate([[0], np.cumsum(df)]).astype(np.int64)
    doc = np.concatenate([np.sort(rng.choice(N, d, replace=False)) for d in df]).astype(np.int32)
    tf = rng.integers(1, 30, len(doc)).astype(np.int32)
    lengths = rng.integers(0, 400, N).astype(np.int32)
    np.maximum.at(lengths, doc, tf)
    fn = bm25_stage.corpus_weights(df, N, int(lengths.sum()), variant, 0.9, 0.4, None)
    t = np.repeat(np.arange(V + 1), df)
    w0 = fn.w0.astype(np.float32)
    want = fn.weights(t, tf, lengths[doc]) - w0[t]
    got = csr_weights(indptr, doc, tf, lengths, fn.idf_t, fn.avgdl, variant, 0.9, 0.4, fn.delta, minus=w0)
    np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))
    # the same postings as a segment of local terms (every other term), placed after a gap and weighed
    keep = np.arange(1, V + 1, 2)
    offsets = np.concatenate([[0], np.cumsum(df[keep])]).astype(np.int64)
    sel = np.concatenate([np.arange(indptr[j], indptr[j + 1]) for j in keep])
    start = offsets[:-1] + 7
    doc_out, data_out = np.full(len(sel) + 7, -1, np.int32), np.zeros(len(sel) + 7, np.float32)
    place_weighted_runs(start, offsets, keep, doc[sel], tf[sel], lengths, 100, fn.idf_t, fn.avgdl, variant, 0.9, 0.4,
                        fn.delta, doc_out, data_out, minus=w0)
    np.testing.assert_array_equal(doc_out[7:], doc[sel] + 100)
    np.testing.assert_array_equal(data_out[7:].view(np.int32), want[sel].view(np.int32))
    with pytest.raises(ValueError, match="variant"):
        csr_weights(indptr, doc, tf, lengths, fn.idf_t, fn.avgdl, "bm99", 0.9, 0.4, 0.0)


def test_marked_term_counts_over_chunks_count_what_the_whole_column_holds():
    """The one-pass count over a Parquet read's chunks equals the marked postings' terms found by a search of
    the cumulative df over the whole column, however the column is cut (a cut inside a term's run too)."""
    from cutext.kernels.postings import marked_term_counts

    rng = np.random.default_rng(11)
    n_docs = 300
    df = rng.integers(1, 40, 500)
    df[rng.random(500) < 0.1] = 0  # a term without postings (a forged df) is skipped
    doc = np.concatenate([np.sort(rng.choice(n_docs, d, replace=False)) for d in df]).astype(np.int32)
    mask = np.zeros(n_docs, bool)
    mask[rng.choice(n_docs, 9, replace=False)] = True
    want = np.unique(np.searchsorted(np.cumsum(df), np.flatnonzero(mask[doc]), side="right"), return_counts=True)
    for cuts in ([], [1], sorted(rng.choice(len(doc), 7, replace=False))):
        local, counts = marked_term_counts(df, np.split(doc, cuts), mask)
        np.testing.assert_array_equal(local, want[0])
        np.testing.assert_array_equal(counts, want[1])
    local, counts = marked_term_counts(df, [doc], np.zeros(n_docs, bool))
    assert len(local) == len(counts) == 0


def test_marked_term_counts_refuses_a_doc_outside_the_mask_and_a_short_column():
    from cutext.kernels.postings import marked_term_counts

    df = np.array([2, 3])
    with pytest.raises(ValueError, match=r"posting 3: doc number 5 outside \[0, 5\)"):
        marked_term_counts(df, [np.array([0, 1, 0], np.int32), np.array([5, 4], np.int32)], np.ones(5, bool))
    with pytest.raises(ValueError, match=r"posting 0: doc number -1"):
        marked_term_counts(df, [np.array([-1, 1, 0, 2, 4], np.int32)], np.zeros(5, bool))
    with pytest.raises(ValueError, match="4 postings, df sums to 5"):
        marked_term_counts(df, [np.array([0, 1, 0, 2], np.int32)], np.ones(5, bool))


@pytest.mark.parametrize("tf_dtype", [np.int32, np.int64])
def test_drop_docs_keeps_what_a_mask_over_the_postings_keeps(tf_dtype):
    """The one-pass drop equals the postings a boolean mask keeps, the live documents renumbered in order and
    each term's df recounted (0 where no live document holds it)."""
    from cutext.kernels.postings import drop_docs

    rng = np.random.default_rng(5)
    n_docs = 200
    df = rng.integers(0, 30, 300)
    doc = np.concatenate([np.sort(rng.choice(n_docs, d, replace=False)) for d in df]).astype(np.int32)
    tf = rng.integers(1, 9, len(doc)).astype(tf_dtype)
    live = rng.random(n_docs) < 0.6
    keep = live[doc]
    got_doc, got_tf, got_df = drop_docs(doc, tf, df, live)
    np.testing.assert_array_equal(got_doc, (np.cumsum(live) - 1)[doc[keep]])
    np.testing.assert_array_equal(got_tf, tf[keep])
    np.testing.assert_array_equal(got_df, np.bincount(np.repeat(np.arange(len(df)), df)[keep], minlength=len(df)))
    assert got_doc.dtype == np.int32 and got_tf.dtype == tf_dtype and got_df.dtype == np.int64
    with pytest.raises(ValueError, match="df summing to"):
        drop_docs(doc[:-1], tf[:-1], df, live)
