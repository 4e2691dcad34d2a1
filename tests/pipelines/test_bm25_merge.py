"""The merge policy of a living bm25 index: many small appends keep few segments (``merge_policy="tiered"``,
the default), ``BM25Index.merge`` / ``bm25-merge`` merge on request, and after any mix of appends, deletes
and merges search equals a one-shot build of the live documents in order (ids, ranks, scores to 1e-6), with
texts, kept columns and term positions moved along (filters and phrase queries equal too)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pytest

from cutext import pipelines
from cutext.pipelines.__main__ import main
from cutext.stages.engines.bm25_index import BM25Index

from helpers import cacm_topics

ANALYSIS = dict(stopwords="lucene", stemmer="porter")
RUN = dict(backend="cpu", scheduler="sync", progress=False)
FULL = dict(store_text=True, positions=True, keep_columns=["n"])


@pytest.fixture(scope="module")
def docs(data_dir):
    """The first 150 CACM documents as JSON records, each with a kept integer column ``n``."""
    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()[:150]
    return [{**json.loads(x), "n": i} for i, x in enumerate(lines)]


def _write(folder, name, recs):
    p = folder / f"{name}.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    return p


def _segments(ix) -> list:
    return json.loads((ix / "index.json").read_text())["segments"]


def _queries(data_dir, recs) -> tuple[dict, dict]:
    """Forty CACM topics, and phrase queries of two adjacent words of some documents."""
    qs = {k: v.replace('"', " ") for k, v in list(cacm_topics(data_dir).items())[:40]}  # no phrase
    phrases = {}
    for r in recs[::9]:
        words = [w for w in r["contents"].split() if w.isalpha() and len(w) > 3]
        if len(words) > 2:
            phrases[f"p{r['n']}"] = f'"{words[1]} {words[2]}"'
    return qs, phrases


def _assert_same_search(got: BM25Index, ref: BM25Index, qs: dict, phrases: dict | None = None):
    assert got.n_docs == ref.n_docs and list(got.source_ids) == list(ref.source_ids)
    runs = [dict(k=20)]
    if phrases is not None:  # texts, kept columns and positions moved with their documents
        runs += [dict(k=20, with_text=True, filter=(pc.field("n") > 30) & (pc.field("n") < 120))]
    for kw in runs:
        a, b = got.search(qs, **kw), ref.search(qs, **kw)
        pd.testing.assert_frame_equal(a.drop(columns="score"), b.drop(columns="score"))
        np.testing.assert_allclose(a["score"], b["score"], rtol=1e-6)
    if phrases is not None:
        a, b = got.search(phrases, k=5, phrases=True), ref.search(phrases, k=5, phrases=True)
        assert len(a) >= len(phrases)  # each phrase finds at least its document
        pd.testing.assert_frame_equal(a.drop(columns="score"), b.drop(columns="score"))
        np.testing.assert_allclose(a["score"], b["score"], rtol=1e-6)


def _reference(tmp_path, recs, **kw) -> BM25Index:
    return BM25Index.load(pipelines.run("bm25", _write(tmp_path, "ref", recs), out=tmp_path / "ref", **RUN,
                                        **ANALYSIS, **kw).path)


def test_many_small_appends_keep_few_segments_and_search_equals_a_one_shot_build(tmp_path, docs, data_dir):
    """22 commits of 5 documents (a build and 21 appends), deletes between them: the tiered policy merges
    runs of ten adjacent segments in the appends' commits, and the index keeps searching as one build."""
    from cutext.pipelines.bm25_index_ops import append_index

    ix = tmp_path / "ix"
    pipelines.run("bm25", _write(tmp_path, "p0", docs[:5]), out=ix, **RUN, **ANALYSIS, **FULL)
    live, most, merged = list(range(5)), 1, 0
    for i in range(1, 22):
        r = append_index(_write(tmp_path, f"p{i}", docs[5 * i:5 * i + 5]), ix, **RUN)
        merged += r.counts.get("merged_segments", 0)
        live += range(5 * i, 5 * i + 5)
        if i % 7 == 3:  # delete two documents: one of the newest segment, one older
            gone = [docs[live[-2]]["id"], docs[live[len(live) // 3]]["id"]]
            assert BM25Index.load(ix, verify=False).delete(gone) == 2
            live = [j for j in live if docs[j]["id"] not in gone]
        n_seg = len(_segments(ix))
        assert n_seg == r.counts["partitions"] or i % 7 == 3
        most = max(most, n_seg)
    assert merged >= 20 and most <= 10  # 22 segments without the policy
    qs, phrases = _queries(data_dir, [docs[j] for j in live])
    ref = _reference(tmp_path, [docs[j] for j in live], **FULL)
    _assert_same_search(BM25Index.load(ix), ref, qs, phrases)


def test_merge_on_request_and_forced_merges_keep_search(tmp_path, docs, data_dir):
    """``merge_policy="none"`` only adds segments; ``BM25Index.merge()`` runs the policy's merges,
    ``merge(max_segments=n)`` leaves at most n segments, ``bm25-merge`` does the same from the command line."""
    from cutext.pipelines.bm25_index_ops import append_index

    ix = tmp_path / "ix"
    pipelines.run("bm25", _write(tmp_path, "p0", docs[:10]), out=ix, **RUN, **ANALYSIS)
    for i in range(1, 13):
        more = _write(tmp_path, f"p{i}", docs[10 * i:10 * i + 10])
        r = (append_index(more, ix, merge_policy="none", **RUN) if i % 2 else
             pipelines.run("bm25", more, out=ix, append=True, merge_policy="none", **RUN))
        assert "merged_segments" not in r.counts
    before = _segments(ix)
    assert len(before) == 13
    index = BM25Index.load(ix)
    gone = [d["id"] for d in docs[3:130:11]]
    index.delete(gone)
    live = [d for d in docs[:130] if d["id"] not in gone]
    qs, _ = _queries(data_dir, live)
    ref = _reference(tmp_path, live)
    assert index.merge() == 10  # ten adjacent small segments of one level
    after = _segments(ix)
    assert after[1:] == before[10:] and after[0] not in before  # one new segment in the run's place
    _assert_same_search(index, ref, qs)  # the object reloaded
    assert index.merge() == 0 and _segments(ix) == after  # nothing more to merge: no commit
    assert index.merge(max_segments=2) == 3 and _segments(ix)[0] == after[0]  # the three small ones joined
    _assert_same_search(BM25Index.load(ix), ref, qs)
    assert main(["bm25-merge", "--index", str(ix), "--max-segments", "1", "--json"]) == 0
    meta = json.loads((ix / "index.json").read_text())
    assert len(meta["segments"]) == 1 and meta["deletes"] == {} and meta["counts"]["merged_segments"] == 2
    assert not (ix / "deletes").exists()
    _assert_same_search(BM25Index.load(ix), ref, qs)


def test_an_append_rewrites_a_mostly_deleted_segment(tmp_path, docs, data_dir):
    from cutext.pipelines.bm25_index_ops import append_index, delete_documents

    ix = tmp_path / "ix"
    pipelines.run("bm25", _write(tmp_path, "a", docs[:40]), out=ix, **RUN, **ANALYSIS)
    append_index(_write(tmp_path, "b", docs[40:80]), ix, merge_policy="none", **RUN)
    a, b = _segments(ix)
    delete_documents(ix, [d["id"] for d in docs[40:70]])  # three quarters of segment b
    delete_documents(ix, [docs[0]["id"]])  # a little of segment a
    r = append_index(_write(tmp_path, "c", docs[80:100]), ix, **RUN)
    meta = json.loads((ix / "index.json").read_text())
    assert r.counts["merged_segments"] == 1
    assert meta["segments"][0] == a and b not in meta["segments"] and len(meta["segments"]) == 3
    assert list(meta["deletes"]) == [a]  # the rewritten segment holds only its live documents
    live = docs[1:40] + docs[70:100]
    _assert_same_search(BM25Index.load(ix), _reference(tmp_path, live), _queries(data_dir, live)[0])


def test_merge_parameters_are_used_or_refused(tmp_path, docs, capsys):
    from cutext.pipelines.bm25_index_ops import append_index
    from cutext.stages.runtime.artifacts import ArtifactError

    src = _write(tmp_path, "a", docs[:20])
    ix = pipelines.run("bm25", src, out=tmp_path / "ix", **RUN).path
    before = (ix / "index.json").read_bytes()
    with pytest.raises(ValueError, match="merge_policy must be one of .*'tiered'"):
        append_index(src, ix, merge_policy="tierd", **RUN)
    with pytest.raises(ValueError, match="merge_policy='none' applies to an append"):
        pipelines.run("bm25", src, out=tmp_path / "other", merge_policy="none", **RUN)
    with pytest.raises(ValueError, match="max_segments=0: must be an integer >= 1"):
        BM25Index.load(ix).merge(max_segments=0)
    assert main(["bm25-merge", "--index", str(ix), "--max-segments", "0"]) == 2
    assert "--max-segments 0" in capsys.readouterr().err
    assert (ix / "index.json").read_bytes() == before and not (tmp_path / "other").exists()
    v1 = pipelines.run("bm25", src, out=tmp_path / "v1", index_format=1, **RUN).path
    with pytest.raises(ArtifactError, match="bm25-convert"):
        BM25Index.load(v1).merge()


def test_bm25f_appends_merge_their_field_segments(tmp_path, docs, data_dir):
    """A BM25F index (two text columns scored apart): the appends' commits merge with the policy, the
    per-field tf and lengths move with their postings, and search equals a one-shot BM25F build."""
    from cutext.pipelines.bm25_index_ops import append_index

    recs = [{"id": d["id"], "title": " ".join(d["contents"].split()[:6]), "text": " ".join(d["contents"].split()[6:])}
            for d in docs[:120]]
    spec = dict(text_column=["title", "text"], field_weights={"title": 2.0}, field_b={"title": 0.4, "text": 0.8},
                stopwords="lucene")
    ix = tmp_path / "ix"
    pipelines.run("bm25", _write(tmp_path, "p0", recs[:10]), out=ix, **RUN, **spec)
    merged = sum(append_index(_write(tmp_path, f"p{i}", recs[10 * i:10 * i + 10]), ix, **RUN).counts
                 .get("merged_segments", 0) for i in range(1, 12))
    assert merged == 10 and len(_segments(ix)) == 3
    ref = BM25Index.load(pipelines.run("bm25", _write(tmp_path, "ref", recs), out=tmp_path / "ref", **RUN,
                                       **spec).path)
    _assert_same_search(BM25Index.load(ix), ref, _queries(data_dir, [])[0])


def test_a_merge_that_fails_leaves_the_commit_before(tmp_path, docs, monkeypatch):
    """The merges run inside the append's commit: one that fails (a full disk, say) commits nothing, the
    index stays the commit before and no temporary is left beside it."""
    from cutext.pipelines.bm25_index_ops import append_index
    from cutext.stages.engines import segment_merge

    ix = tmp_path / "ix"
    pipelines.run("bm25", _write(tmp_path, "p0", docs[:10]), out=ix, **RUN)
    for i in range(1, 9):
        append_index(_write(tmp_path, f"p{i}", docs[10 * i:10 * i + 10]), ix, merge_policy="none", **RUN)
    before = (ix / "index.json").read_bytes()

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(segment_merge, "write_segment", full)
    with pytest.raises(OSError, match="No space left"):
        append_index(_write(tmp_path, "p9", docs[90:100]), ix, **RUN)  # the tenth segment: a merge
    assert (ix / "index.json").read_bytes() == before
    assert BM25Index.load(ix).n_docs == 90 and [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []
