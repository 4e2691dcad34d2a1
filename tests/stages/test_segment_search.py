"""stages/engines/segment_search.py and kernels/segment_search.py: a segmented index searched segment by
segment with the weights of the global statistics computed at query time (on CACM documents), its refresh
taking the unchanged segments over, and the merged matrix it switches to."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from cutext import pipelines
from cutext.kernels.postings import csr_weights
from cutext.kernels.search import search_cpu
from cutext.kernels.segment_search import SegmentTable, length_factors, search_segments_cpu, term_postings
from cutext.stages.engines import bm25_index, index_reader, segments
from cutext.stages.engines.bm25_index import BM25Index
from cutext.stages.text import bm25 as bm25_stage

KW = dict(backend="cpu", scheduler="sync", progress=False)
QUERIES = {"q1": "computer programs", "q2": "algorithm for sorting", "q3": "information retrieval systems",
           "q4": "parallel matrix computation on a computer", "q5": "zzzunknown"}


def _exact(a: pd.DataFrame, b: pd.DataFrame):
    pd.testing.assert_frame_equal(a.drop(columns="score"), b.drop(columns="score"))
    np.testing.assert_array_equal(a["score"].to_numpy(), b["score"].to_numpy())  # the same bits


def _merged_load(path, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(bm25_index, "MERGE_AFTER", 0)  # merged at the load: today's one matrix
        index = BM25Index.load(path, backend="cpu")
    assert index._matrix is not None and index._seg is None
    return index


def _split(M, cuts):
    """The segments of the term-major tf matrix ``M`` (terms x docs) cut at the doc ids ``cuts``: per segment
    (offsets, global term ids, local docs, tf) of the terms it holds."""
    out = []
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        part = M[:, lo:hi].tocsr()
        held = np.flatnonzero(np.diff(part.indptr))
        out.append((np.concatenate([[0], np.cumsum(np.diff(part.indptr)[held])]).astype(np.int64),
                    held.astype(np.int32), part.indices.astype(np.int32), part.data.astype(np.int32)))
    return out


@pytest.mark.parametrize("variant", ["lucene", "robertson", "bm25l", "bm25+"])
def test_the_kernel_scores_all_segments_as_the_engine_over_the_merged_stored_weights(variant):
    rng = np.random.default_rng(3)
    n_docs, V = 60, 12
    dense = (rng.random((V + 1, n_docs)) < 0.3) * rng.integers(1, 9, (V + 1, n_docs))
    dense[0] = 0
    dense[5] = 0  # a term no segment holds
    dense[8, 25:] = 0  # a term of the first segment only
    dense[10] = 0
    dense[10, [3, 30, 50]] = 2  # a rare term: its query keeps a list of the documents it touched
    dense[:, 40:44] = dense[:, 10:14]  # equal scores in two segments: the smaller doc id first
    lengths = dense.sum(axis=0) + rng.integers(0, 5, n_docs)
    lengths[40:44] = lengths[10:14]
    M = sp.csr_matrix(dense.astype(np.int32))
    df = np.diff(M.indptr).astype(np.int64)
    fn = bm25_stage.corpus_weights(df, n_docs, int(lengths.sum()) + 7, variant, 1.2, 0.75, None)
    w0 = fn.w0.astype(np.float32)
    minus = w0 if np.any(w0) else None
    data = csr_weights(M.indptr, M.indices, M.data, lengths, fn.idf_t, fn.avgdl, variant, 1.2, 0.75, fn.delta,
                       minus=minus)
    base = np.array([0, 25, 25, 37, 60])  # an empty segment among them
    table = SegmentTable(_split(M, base))
    kd = length_factors(lengths, fn.avgdl, variant, 1.2, 0.75)
    q_ptr, q_terms = np.array([0, 2, 5, 6, 6, 8, 9]), np.array([1, 5, 2, 3, 7, 5, 8, 9, 10])
    q_w = np.array([1, 2, 1, 1, 3, 1, 1, 2, 1], np.float32)
    at = M.indptr[q_terms]  # each term's runs where the merged matrix's row is
    mask = rng.random(n_docs) < 0.6
    lists = (np.array([0, 9, 9, 28, 28, 88, 88]),
             np.concatenate([np.arange(0, 60, 7), np.arange(3, 60, 3), np.arange(60)]).astype(np.int32))
    args = (table, base, kd, fn.idf_t, minus, variant, 1.2, fn.delta, q_ptr, q_terms, q_w, 7)
    for kw in ({}, {"mask": mask}, {"lists": lists}):
        want = search_cpu(M.indptr, M.indices, data, n_docs, q_ptr, q_terms, q_w, 7, **kw)
        kept = np.full(M.nnz, np.nan, np.float32)
        runs = [{},  # computed
                {"weights": kept, "mode": [1, 2, 1, 1, 1, 2, 1, 1, 1], "at": at, "fill": [5], "fill_at": [0]},
                {"weights": kept, "mode": [0] * 9, "at": at},  # read back
                {"weights": np.full(M.nnz, np.nan, np.float32), "mode": [0, 0, 2, 0, 0, 0, 0, 0, 0], "at": at,
                 "fill": [1, 3, 5, 7, 8, 9, 10], "fill_at": M.indptr[[1, 3, 5, 7, 8, 9, 10]]}]
        for run in runs:
            got = search_segments_cpu(*args, **run, **kw)
            for a, b in zip(got, want):
                np.testing.assert_array_equal(a, b)
        rows = np.concatenate([np.arange(M.indptr[t], M.indptr[t + 1]) for t in (1, 2, 3, 7, 8, 9, 10)])
        np.testing.assert_array_equal(kept[rows], data[rows])  # the merged matrix's stored weights
        assert np.isnan(np.delete(kept, rows)).all()  # nothing else written
    n = search_cpu(M.indptr, M.indices, data, n_docs, q_ptr, q_terms, q_w, 7)[2]
    assert n[2] == 0 and n[5] == 3  # a query of terms no document holds; one of a rare term (a touched list)
    np.testing.assert_array_equal(term_postings(table, np.arange(V + 1)), df)
    with pytest.raises(ValueError, match="weights are needed"):
        search_segments_cpu(*args, mode=[0] * 9)
    with pytest.raises(ValueError, match="mode must hold"):
        search_segments_cpu(*args, weights=kept, mode=[0, 3, 0, 0, 0, 0, 0, 0, 0], at=at)
    with pytest.raises(ValueError, match="weights must be 1-d contiguous float32"):
        search_segments_cpu(*args, weights=kept.astype(np.float64), fill=[1], fill_at=[0])
    with pytest.raises(ValueError, match="at .and fill_at with fill. place the runs"):
        search_segments_cpu(*args, weights=kept, mode=[0] * 9)
    with pytest.raises(ValueError, match="fill_at places runs outside the"):
        search_segments_cpu(*args, weights=kept[:-1], fill=[12], fill_at=[M.indptr[12]])
    with pytest.raises(ValueError, match="at places runs outside the"):
        search_segments_cpu(*args, weights=kept, mode=[0] * 9, at=np.where(q_terms == 7, len(kept) - 1, at))
    with pytest.raises(ValueError, match="base must be 5 ascending doc ids from 0"):
        search_segments_cpu(table, base[::-1], *args[2:])
    with pytest.raises(ValueError, match="segment 1: offsets must be"):
        SegmentTable([_split(M, base)[0], (np.array([0, 5]), np.array([1, 2], np.int32), np.zeros(5), np.ones(5))])


def test_refresh_after_appends_deletes_and_merges_equals_a_fresh_load(tmp_path, pieces, monkeypatch):
    ix = tmp_path / "ix"
    pipelines.run("bm25", str(pieces[0]), out=str(ix), **KW)
    index = BM25Index.load(ix, backend="cpu")
    steps = [lambda: pipelines.run("bm25", str(pieces[1]), out=str(ix), append=True, **KW),
             lambda: index.delete(list(index.source_ids[::9])),
             lambda: pipelines.run("bm25", str(pieces[2]), out=str(ix), append=True, merge_policy="none", **KW),
             lambda: index.delete(list(index.source_ids[5:400:4])),
             lambda: index.merge(max_segments=2)]
    for step in steps:
        step()
        index = index.refresh()
        fresh = BM25Index.load(ix, backend="cpu")
        assert index._seg is not None and index._matrix is None  # searched segment by segment, not merged
        for a, b in zip(index._reader.terms.term_ids, fresh._reader.terms.term_ids):  # renumbered, not re-merged
            np.testing.assert_array_equal(a, b)
        got = index.search(QUERIES, k=30)
        _exact(got, fresh.search(QUERIES, k=30))
        _exact(got, _merged_load(ix, monkeypatch).search(QUERIES, k=30))  # the one matrix: the same bits
        assert set(got["source_id"]) <= set(fresh.source_ids)  # no deleted document
    assert len(index._reader.segments) == 2


def test_a_refresh_takes_the_unchanged_segments_over_and_reads_only_the_new_one(tmp_path, pieces, monkeypatch):
    ix = tmp_path / "ix"
    pipelines.run("bm25", str(pieces[0]), out=str(ix), **KW)
    pipelines.run("bm25", str(pieces[1]), out=str(ix), append=True, **KW)
    loaded = BM25Index.load(ix, backend="cpu")
    pipelines.run("bm25", str(pieces[2]), out=str(ix), append=True, merge_policy="none", **KW)
    reads = []
    real = segments.read_segment
    monkeypatch.setattr(segments, "read_segment", lambda folder, **kw: reads.append(folder) or real(folder, **kw))
    fresh = loaded.refresh()
    assert [p.name for p in reads] == [fresh._reader.meta["segments"][-1]]  # the appended segment alone
    assert fresh._matrix is None  # nothing merged or weighted
    for old, new in zip(loaded._seg.parts, fresh._seg.parts[:2]):
        assert new[0] is old[0] and new[0].segment.tf is old[0].segment.tf and new[1] is old[1]
    assert not np.array_equal(fresh._seg.parts[0][3], loaded._seg.parts[0][3])  # K_d of the new avgdl


def test_a_refresh_renumbers_the_kept_segments_terms_after_a_commit_that_renames_their_deletions(tmp_path, pieces,
                                                                                                monkeypatch):
    ix = tmp_path / "ix"
    pipelines.run("bm25", str(pieces[0]), out=str(ix), **KW)
    pipelines.run("bm25", str(pieces[1]), out=str(ix), append=True, **KW)
    loaded = BM25Index.load(ix, backend="cpu")
    loaded.delete(list(loaded.source_ids[::5]))
    pipelines.run("bm25", str(pieces[2]), out=str(ix), append=True, merge_policy="none", **KW)
    merges = []
    real = index_reader.sorted_term_ids
    monkeypatch.setattr(index_reader, "sorted_term_ids", lambda v, t: merges.append(len(t)) or real(v, t))
    fresh = loaded.refresh()
    assert len(merges) == 2  # the old vocabulary's and the new segment's terms, not the kept segments'
    assert fresh._seg.parts[0][0].segment is loaded._seg.parts[0][0].segment
    assert fresh._seg.parts[0][1] is loaded._seg.parts[0][1]
    _exact(fresh.search(QUERIES, k=30), BM25Index.load(ix, backend="cpu").search(QUERIES, k=30))
    pipelines.run("bm25", str(pieces[2]), out=str(ix), append=True, merge_policy="none", on_duplicate="keep", **KW)
    merges.clear()
    again = fresh.refresh()  # no new term: the kept ids as they are, the new segment merged alone
    assert len(merges) == 1 and again._reader.terms.term_ids[0] is fresh._reader.terms.term_ids[0]
    _exact(again.search(QUERIES, k=30), BM25Index.load(ix, backend="cpu").search(QUERIES, k=30))


def test_filters_and_deletes_hold_across_segments(tmp_path, pieces, monkeypatch):
    ix = tmp_path / "ix"
    pipelines.run("bm25", str(pieces[0]), out=str(ix), **KW)
    for p in pieces[1:]:
        pipelines.run("bm25", str(p), out=str(ix), append=True, merge_policy="none", **KW)
    index = BM25Index.load(ix, backend="cpu")
    gone = list(index.source_ids[::3])
    index.delete(gone)
    merged = _merged_load(ix, monkeypatch)
    assert len(index._seg.parts) == 3
    ids = index.source_ids
    mask = np.zeros(index.n_docs, bool)
    mask[::2] = True
    per_query = [list(ids[150:450]), [], list(ids[::5]), list(ids[-40:]), list(ids[:3])]
    for flt in (mask, per_query):
        got = index.search(QUERIES, k=25, filter=flt)
        _exact(got, merged.search(QUERIES, k=25, filter=flt))
        assert not set(got["source_id"]) & set(gone)
    assert mask[index.search(QUERIES, k=25, filter=mask)["doc_id"]].all()


def test_the_index_merges_its_matrix_before_a_batch_that_takes_its_queries_past_its_postings(tmp_path, pieces,
                                                                                             monkeypatch):
    ix = tmp_path / "ix"
    pipelines.run("bm25", str(pieces[0]), out=str(ix), **KW)
    pipelines.run("bm25", str(pieces[1]), out=str(ix), append=True, **KW)
    index = BM25Index.load(ix, backend="cpu")
    per = index._seg.postings(index.query_matrix(list(QUERIES.values())))
    assert 0 < per < index._seg.n_postings
    monkeypatch.setattr(bm25_index, "MERGE_AFTER", 2.5 * per / index._seg.n_postings)  # room for two batches
    first = index.search(QUERIES, k=10)
    _exact(index.search(QUERIES, k=10), first)
    assert index._matrix is None and index._seg.scored == 2 * per
    _exact(index.search(QUERIES, k=10), first)  # the third would pass it: merged first, the same bits
    assert index._matrix is not None and index._seg.scored == 2 * per
    assert f"postings={index.matrix.nnz:,}" in repr(index) and index.matrix.nnz == int(index.df.sum())


def test_sparse_engine_and_dense_scores_merge_the_matrix(tmp_path, pieces):
    ix = tmp_path / "ix"
    pipelines.run("bm25", str(pieces[0]), out=str(ix), variant="bm25l", **KW)
    pipelines.run("bm25", str(pieces[1]), out=str(ix), append=True, **KW)
    index = BM25Index.load(ix, backend="cpu")
    cpu = index.search(QUERIES, k=15)
    assert index._matrix is None
    sparse = index.search(QUERIES, k=15, engine="sparse")
    assert index._matrix is not None
    _exact(cpu, sparse)
    scores = index.get_scores(QUERIES["q2"])
    top = cpu[cpu["query_id"] == "q2"]
    np.testing.assert_allclose(scores[top["doc_id"].to_numpy()], top["score"].to_numpy(), rtol=1e-6)


def test_a_refresh_keeps_the_query_term_hash_while_the_vocabulary_stays(tmp_path, pieces):
    ix = tmp_path / "ix"
    pipelines.run("bm25", str(pieces[0]), out=str(ix), **KW)
    loaded = BM25Index.load(ix, backend="cpu")
    loaded.search(QUERIES, k=5)  # builds the hash
    pipelines.run("bm25", str(pieces[0]), out=str(ix), append=True, on_duplicate="keep", merge_policy="none", **KW)
    same = loaded.refresh()  # the same posts again: no new term
    assert same._term_hash is loaded._term_hash
    _exact(same.search(QUERIES, k=30), BM25Index.load(ix, backend="cpu").search(QUERIES, k=30))
    pipelines.run("bm25", str(pieces[1]), out=str(ix), append=True, merge_policy="none", **KW)
    grown = same.refresh()  # new terms: a new hash, built at its first query
    assert grown._term_hash is None
    _exact(grown.search(QUERIES, k=30), BM25Index.load(ix, backend="cpu").search(QUERIES, k=30))


def test_a_commit_computes_a_term_s_weights_once_and_the_merge_drops_them(tmp_path, pieces, monkeypatch):
    ix = tmp_path / "ix"
    pipelines.run("bm25", str(pieces[0]), out=str(ix), variant="bm25+", **KW)
    pipelines.run("bm25", str(pieces[1]), out=str(ix), append=True, **KW)
    index = BM25Index.load(ix, backend="cpu")
    merged = _merged_load(ix, monkeypatch)
    seg = index._seg
    first = index.search(QUERIES, k=20)  # "computer" of two queries computed before, the other terms while scored
    _exact(first, merged.search(QUERIES, k=20))
    terms = np.unique(index.query_matrix(list(QUERIES.values())).indices)
    kept = seg._kept
    assert (kept.state[terms] == 2).all() and kept.state.sum() == 2 * len(terms)
    M = merged.matrix
    for t in terms:  # each term's runs one after the other: the merged matrix's row, bit for bit
        np.testing.assert_array_equal(kept.weights[kept.slot[t]:kept.slot[t] + index.df[t]],
                                      M.data[M.indptr[t]:M.indptr[t + 1]])
    assert kept.end == index.df[terms].sum()  # placed one after the other: the pages written are those used
    _exact(index.search(QUERIES, k=20), first)  # read back
    mask = np.zeros(index.n_docs, bool)
    mask[1::2] = True
    _exact(index.search(QUERIES, k=20, filter=mask), merged.search(QUERIES, k=20, filter=mask))
    seg.drop_weights()
    seg._kept.state[terms[:2]] = 1  # being computed by another batch: computed here, neither kept nor read
    _exact(index.search(QUERIES, k=20), first)
    assert (seg._kept.state[terms[:2]] == 1).all() and (seg._kept.state[terms[2:]] == 2).all()
    index.search(QUERIES, k=20, engine="sparse")  # merges the matrix
    assert index._matrix is not None and not seg._kept.state.any()


def test_equal_scores_across_segments_keep_the_earlier_segment_s_documents(tmp_path, pieces, monkeypatch):
    ix = tmp_path / "ix"
    pipelines.run("bm25", str(pieces[0]), out=str(ix), **KW)
    for _ in range(2):  # the same posts twice more: each document's score three times, in three segments
        pipelines.run("bm25", str(pieces[0]), out=str(ix), append=True, merge_policy="none", on_duplicate="keep",
                      **KW)
    index = BM25Index.load(ix, backend="cpu")
    assert len(index._seg.parts) == 3
    merged = _merged_load(ix, monkeypatch)
    for k in (1, 4, 7, 40):
        got = index.search(QUERIES, k=k)
        _exact(got, merged.search(QUERIES, k=k))
        n = 300  # the documents of a segment: a top of k < 3 * (ties) holds the first segment's first
        assert (got.groupby("query_id")["doc_id"].min() < n).all()


def test_batches_of_several_threads_keep_and_read_the_same_weights(tmp_path, pieces, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    ix = tmp_path / "ix"
    pipelines.run("bm25", str(pieces[0]), out=str(ix), **KW)
    pipelines.run("bm25", str(pieces[1]), out=str(ix), append=True, **KW)
    index = BM25Index.load(ix, backend="cpu")
    merged = _merged_load(ix, monkeypatch)
    lines = pieces[1].read_text(encoding="utf-8").splitlines()[:40]
    texts = [json.loads(line)["contents"][:60] for line in lines]  # 40 queries sharing many terms
    Q = index.query_matrix(texts)
    want = merged._sm.topk(Q, 10, "cpu")
    for _ in range(3):
        index._seg.drop_weights()
        with ThreadPoolExecutor(4) as pool:  # the same rows at once: terms claimed, kept and read across threads
            got = list(pool.map(lambda i: index._seg.topk(Q[i::4], 10), [0, 1, 2, 3, 0, 1, 2, 3]))
        for i, g in enumerate(got):
            for a, b in zip(g, want):
                np.testing.assert_array_equal(a, b[i % 4::4])
    assert (index._seg._kept.state[np.unique(Q.indices)] == 2).all()
