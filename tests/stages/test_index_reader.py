"""stages/engines/index_reader.py: a commit as per-segment readers, and a refresh that reads only what changed
(on CACM documents), with another process committing while the reader searches."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from cutext import pipelines
from cutext.stages.engines import index_commits, segments
from cutext.stages.engines.bm25_index import BM25Index
from cutext.stages.engines.index_commits import SEGMENTS_DIR, commit_segments
from cutext.stages.engines.index_reader import IndexReader

KW = dict(backend="cpu", scheduler="sync", progress=False)
QUERIES = {"q1": "computer programs", "q2": "algorithm for sorting", "q3": "information retrieval systems"}


def _same(a: BM25Index, b: BM25Index):
    assert list(a.source_ids) == list(b.source_ids)
    x, y = a.search(QUERIES, k=20), b.search(QUERIES, k=20)
    pd.testing.assert_frame_equal(x.drop(columns="score"), y.drop(columns="score"))
    np.testing.assert_array_equal(x["score"].to_numpy(), y["score"].to_numpy())  # the same bits


def test_the_global_statistics_are_those_of_a_union_of_the_live_segments(tmp_path, pieces):
    ix = tmp_path / "ix"
    pipelines.run("bm25", str(pieces[0]), out=str(ix), **KW)
    pipelines.run("bm25", str(pieces[1]), out=str(ix), append=True, **KW)
    first = BM25Index.load(ix, backend="cpu")
    first.delete(list(first.source_ids[::7]))
    reader = IndexReader.open(ix)
    folders, deletes = commit_segments(ix, reader.meta)
    want = segments.merge_terms([segments.live_segment(segments.read_segment(f), d) for f, d in zip(folders, deletes)])
    got = reader.terms
    assert got.n_docs == want.n_docs and got.sum_dl == want.sum_dl
    assert got.vocab.equals(want.vocab)
    np.testing.assert_array_equal(got.df, want.df)
    for a, b in zip(got.term_ids, want.term_ids):
        np.testing.assert_array_equal(a, b)


def test_refresh_reads_only_new_segments_and_equals_a_fresh_load(tmp_path, pieces):
    ix = tmp_path / "ix"
    pipelines.run("bm25", str(pieces[0]), out=str(ix), **KW)
    loaded = BM25Index.load(ix, backend="cpu")
    assert loaded.refresh() is loaded  # nothing committed
    before = loaded.search(QUERIES, k=20)
    pipelines.run("bm25", str(pieces[1]), out=str(ix), append=True, **KW)
    pd.testing.assert_frame_equal(loaded.search(QUERIES, k=20), before)  # it keeps searching its commit
    fresh = loaded.refresh()
    assert fresh is not loaded and fresh._reader.reused == len(loaded._reader.segments)
    _same(fresh, BM25Index.load(ix, backend="cpu"))
    gone = list(fresh.source_ids[:50])
    fresh.delete(gone)  # a delete through the index refreshes it: the other segments are reused
    assert not set(gone) & set(fresh.source_ids) and fresh._reader.reused == len(fresh._reader.segments) - 1
    _same(fresh, BM25Index.load(ix, backend="cpu"))


def test_refresh_sums_df_from_the_earlier_commit_and_the_changed_segments_only(tmp_path, pieces, monkeypatch):
    """A refresh whose vocabulary is unchanged takes the earlier df, less the segments gone, plus the new ones,
    and never recounts the union (the slow path, which a wrong difference would fall back to)."""
    ix = tmp_path / "ix"
    pipelines.run("bm25", str(pieces[0]), out=str(ix), **KW)
    pipelines.run("bm25", str(pieces[1]), out=str(ix), append=True, **KW)
    reader = IndexReader.open(ix)
    pipelines.run("bm25", str(pieces[0]), out=str(ix), append=True, on_duplicate="keep", merge_policy="none", **KW)
    assert BM25Index.load(ix, backend="cpu").merge(max_segments=2) == 2  # two segments gone, one new
    monkeypatch.setattr(segments, "merge_terms", lambda segs: pytest.fail("the union recounted"))
    fresh = reader.refresh()
    assert fresh.terms.vocab.equals(reader.terms.vocab)  # the vocabulary unchanged: the difference was taken
    folders, deletes = commit_segments(ix, fresh.meta)
    monkeypatch.undo()
    want = segments.merge_terms([segments.live_segment(segments.read_segment(f), d) for f, d in zip(folders, deletes)])
    assert fresh.terms.vocab.equals(want.vocab)
    np.testing.assert_array_equal(fresh.terms.df, want.df)


def test_refresh_verifies_the_files_it_reads(tmp_path, pieces):
    ix = tmp_path / "ix"
    pipelines.run("bm25", str(pieces[0]), out=str(ix), **KW)
    loaded = BM25Index.load(ix, backend="cpu")
    pipelines.run("bm25", str(pieces[1]), out=str(ix), append=True, **KW)
    new = json.loads((ix / "index.json").read_text())["segments"][-1]
    f = ix / SEGMENTS_DIR / new / "postings.parquet"
    raw = bytearray(f.read_bytes())
    raw[len(raw) // 2] ^= 1
    f.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="postings.parquet"):
        loaded.refresh()


WRITER = """
import sys
from cutext import pipelines
for p in sys.argv[2:]:
    pipelines.run("bm25", p, out=sys.argv[1], append=True, backend="cpu", scheduler="sync", progress=False)
"""


def test_a_reader_searches_its_commit_while_a_writer_process_commits(tmp_path, pieces):
    ix = tmp_path / "ix"
    pipelines.run("bm25", str(pieces[0]), out=str(ix), **KW)
    loaded = BM25Index.load(ix, backend="cpu")
    before = loaded.search(QUERIES, k=20)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(ix), str(pieces[1]), str(pieces[2])])
    seen = set()
    while writer.poll() is None:  # search and refresh while the other process commits
        pd.testing.assert_frame_equal(loaded.search(QUERIES, k=20), before)
        seen.add(loaded.refresh().n_docs)
    assert writer.wait() == 0
    assert seen <= {300, 600, 900}
    final = loaded.refresh()
    assert final.n_docs == 900
    _same(final, BM25Index.load(ix, backend="cpu"))


def test_a_deletion_commit_corrects_the_kept_statistics_as_a_recount_gives_them(tmp_path, pieces):
    from cutext.stages.engines.index_commits import index_counts, read_commit_terms, segment_heads

    ix = tmp_path / "ix"
    pipelines.run("bm25", str(pieces[0]), out=str(ix), **KW)
    pipelines.run("bm25", str(pieces[1]), out=str(ix), append=True, **KW)
    ids = list(BM25Index.load(ix, backend="cpu").source_ids)
    from cutext.pipelines.bm25_index_ops import delete_documents

    for i, gone in enumerate((ids[::5], ids[2:600:5], [ids[-1]])):  # deletions in both segments, then more
        if i == 1:
            delete_documents(ix, gone)  # the segments' postings read
        else:
            BM25Index.load(ix, backend="cpu").delete(gone)  # through a reader: its segments in memory
        meta = json.loads((ix / "index.json").read_text())
        folders, deletes = commit_segments(ix, meta)
        mt, counts = index_counts(segment_heads(folders, deletes, ids=False), meta)
        for k in ("n_docs", "n_terms", "n_postings", "n_tokens", "n_empty_docs"):
            assert meta["counts"][k] == counts[k], k
        assert meta["N"] == mt.n_docs and meta["avgdl"] == mt.avgdl
        vocab, df = read_commit_terms(ix, meta)
        assert vocab.equals(mt.vocab.filter(mt.df[1:] > 0)) and np.array_equal(df, mt.df[1:][mt.df[1:] > 0])


def test_a_reader_without_postings_reads_them_only_where_documents_are_deleted(tmp_path, pieces):
    """The GPU load's reader (``postings=False``): the segments without deletions are read without their postings
    (decoded on the device instead); a deletion through it, and its refresh, equal those through a full reader."""
    runs = {}
    for name in ("full", "bare"):
        ix = tmp_path / name
        pipelines.run("bm25", str(pieces[0]), out=str(ix), **KW)
        pipelines.run("bm25", str(pieces[1]), out=str(ix), append=True, **KW)
        first = BM25Index.load(ix, backend="cpu")
        first.delete(list(first.source_ids[:5]))  # the first segment has deletions
        reader = IndexReader.open(ix, postings=name == "full")
        held = [r.segment.doc is not None for r in reader.segments]
        assert held == ([True] * len(held) if name == "full" else [True] + [False] * (len(held) - 1))
        gone = list(first.source_ids[-40:])  # in the last segment, read without postings when bare
        counts = index_commits.commit_deletion(ix, gone, reader=reader)
        fresh = reader.refresh()
        assert fresh.postings == (name == "full")
        assert [r.segment.doc is not None for r in fresh.segments] == ([True] * len(held) if name == "full"
                                                                       else [True] + [False] * (len(held) - 2) + [True])
        runs[name] = counts, json.loads((ix / "index.json").read_text())["counts"], fresh.terms
    (ca, ma, ta), (cb, mb, tb) = runs["full"], runs["bare"]
    assert ca == cb and ma == mb
    assert ta.vocab.equals(tb.vocab) and ta.n_docs == tb.n_docs and ta.sum_dl == tb.sum_dl
    np.testing.assert_array_equal(ta.df, tb.df)


@pytest.mark.parametrize("how", ["update", "delete"])  # an update keeps the vocabulary; 400 deletions drop terms
def test_a_refresh_after_a_deletion_takes_the_changed_segments_term_ids_from_the_earlier_reader(tmp_path, pieces,
                                                                                               monkeypatch, how):
    """A segment with new deletions, derived in memory from the earlier reader's, gets its global term ids from
    the earlier ones (its kept terms, renumbered when the vocabulary changed), not from a merge of its terms
    with the whole vocabulary; the statistics are a fresh open's."""
    from cutext.stages.engines import index_reader

    ix = tmp_path / "ix"
    pipelines.run("bm25", str(pieces[0]), out=str(ix), **KW)
    pipelines.run("bm25", str(pieces[1]), out=str(ix), append=True, **KW)
    reader = IndexReader.open(ix)
    if how == "update":  # the same documents again: the older copies deleted in the append's commit
        pipelines.run("bm25", str(pieces[0]), out=str(ix), append=True, on_duplicate="replace", merge_policy="none",
                      **KW)
    else:
        index_commits.commit_deletion(ix, list(BM25Index.load(ix, backend="cpu").source_ids[:400]))
    seen = []
    real = index_reader.sorted_term_ids
    monkeypatch.setattr(index_reader, "sorted_term_ids", lambda v, t: seen.append(t) or real(v, t))
    fresh = reader.refresh()
    assert fresh.terms.vocab.equals(reader.terms.vocab) == (how == "update")
    changed = [r.segment.terms for r in fresh.segments if len(r.deleted)]
    assert changed and not any(t is c for t in seen for c in changed)
    want = IndexReader.open(ix)
    assert fresh.terms.vocab.equals(want.terms.vocab)
    np.testing.assert_array_equal(fresh.terms.df, want.terms.df)
    for g, h in zip(fresh.terms.term_ids, want.terms.term_ids):
        np.testing.assert_array_equal(g, h)
