"""A living bm25 index through its public calls: ``pipelines.run("bm25", more, out=index, append=True)``,
``BM25Index.delete`` and ``BM25Index.compact``.  After any sequence of them, search equals a one-shot build
of the live documents in order (ids and ranks; scores to 1e-6 relative), on CACM and on SciFact."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest

from cutext import pipelines
from cutext.pipelines.__main__ import main
from cutext.stages.engines.bm25_index import BM25Index

from helpers import cacm_topics, scifact_topics

KW = dict(backend="cpu", scheduler="sync", progress=False, index_format=2, stopwords="lucene", stemmer="porter")


def _lines(data_dir, name):
    if name == "cacm":
        return (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()
    with gzip.open(data_dir / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        return [x for x in fh.read().splitlines() if x.strip()]


def _reader(name):
    return {} if name == "cacm" else {"text_column": ["title", "text"], "id_column": "_id"}


def _queries(data_dir, name):
    topics = cacm_topics(data_dir) if name == "cacm" else scifact_topics(data_dir)
    return dict(list(topics.items())[:40])


def _source_id(line, name):
    rec = json.loads(line)
    return str(rec["id"] if name == "cacm" else rec["_id"])


def _write(folder, name, lines):
    p = folder / f"{name}.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def _assert_same_search(got: BM25Index, ref: BM25Index, qs):
    assert got.n_docs == ref.n_docs and list(got.source_ids) == list(ref.source_ids)
    a, b = got.search(qs, k=20), ref.search(qs, k=20)
    pd.testing.assert_frame_equal(a.drop(columns="score"), b.drop(columns="score"))
    np.testing.assert_allclose(a["score"], b["score"], rtol=1e-6)


@pytest.mark.parametrize("name", ["cacm", "scifact"])
def test_appends_deletes_and_compaction_equal_a_one_shot_build(tmp_path, data_dir, name):
    lines = _lines(data_dir, name)
    ids = [_source_id(x, name) for x in lines]
    qs = _queries(data_dir, name)
    n = len(lines)
    cuts = [0, n // 5, n // 2, (3 * n) // 4, n]  # four pieces: a build and three appends
    ix = tmp_path / "ix"
    pipelines.run("bm25", _write(tmp_path, "p0", lines[cuts[0]:cuts[1]]), out=ix, **KW, **_reader(name))
    live = list(range(cuts[0], cuts[1]))
    index = BM25Index.load(ix)
    for i in range(1, 4):
        r = pipelines.run("bm25", _write(tmp_path, f"p{i}", lines[cuts[i]:cuts[i + 1]]), out=ix, append=True,
                          backend="cpu", scheduler="sync", progress=False, **_reader(name))
        assert r.counts["appended_docs"] == cuts[i + 1] - cuts[i]
        live += range(cuts[i], cuts[i + 1])
        if i < 3:  # delete a spread of documents of every piece so far (one of them the newest)
            gone = [ids[j] for j in live[5::97]] + [ids[cuts[i + 1] - 1]]
            index = BM25Index.load(ix)
            assert index.delete(gone) == len(set(gone))
            assert not set(gone) & set(index.search(qs, k=50)["source_id"])  # this object sees the commit
            live = [j for j in live if ids[j] not in set(gone)]
    meta = json.loads((ix / "index.json").read_text())
    assert meta["segments"] == ["seg-00000", "seg-00001", "seg-00002", "seg-00003"] and len(meta["deletes"]) == 3
    ref = BM25Index.load(pipelines.run("bm25", _write(tmp_path, "ref", [lines[j] for j in live]),
                                       out=tmp_path / "ref", **KW, **_reader(name)).path)
    _assert_same_search(BM25Index.load(ix), ref, qs)
    index = BM25Index.load(ix)
    assert index.compact() == 4
    assert json.loads((ix / "index.json").read_text())["segments"] == ["seg-00004"]
    _assert_same_search(index, ref, qs)  # the reloaded object
    _assert_same_search(BM25Index.load(ix), ref, qs)


def test_append_refuses_settings_of_its_own_and_an_index_that_is_not_there(tmp_path, data_dir):
    lines = _lines(data_dir, "cacm")
    ix = tmp_path / "ix"
    pipelines.run("bm25", _write(tmp_path, "a", lines[:200]), out=ix, **KW)
    more = _write(tmp_path, "b", lines[200:400])
    before = (ix / "index.json").read_bytes()
    for bad in (dict(k1=1.5), dict(stemmer="english"), dict(variant="bm25+"), dict(index_format=1),
                dict(overwrite=False)):
        with pytest.raises(ValueError, match=f"append=True .*{next(iter(bad))}"):
            pipelines.run("bm25", more, out=ix, append=True, backend="cpu", progress=False, **bad)
    assert (ix / "index.json").read_bytes() == before
    assert main(["bm25", str(more), "--out", str(ix), "--append", "--stemmer", "porter", "--backend", "cpu",
                 "--no-progress"]) == 0  # a setting equal to the index's own is taken
    assert BM25Index.load(ix).n_docs == 400
    with pytest.raises(FileNotFoundError, match="no index.json"):
        pipelines.run("bm25", more, out=tmp_path / "none", append=True, backend="cpu", progress=False)


def test_delete_refuses_unknown_ids_and_a_format_1_index(tmp_path, data_dir):
    from cutext.stages.runtime.artifacts import ArtifactError

    lines = _lines(data_dir, "cacm")
    src = _write(tmp_path, "a", lines[:300])
    index = BM25Index.load(pipelines.run("bm25", src, out=tmp_path / "ix", **KW).path)
    before = (index.path / "index.json").read_bytes()
    with pytest.raises(ValueError, match=r"1 source id\(s\) not in the index .*'no-such-id'"):
        index.delete([index.source_ids[0], "no-such-id"])
    assert (index.path / "index.json").read_bytes() == before and index.n_docs == 300
    v1 = BM25Index.load(pipelines.run("bm25", src, out=tmp_path / "v1", **{**KW, "index_format": 1}).path)
    with pytest.raises(ArtifactError, match="bm25-convert"):
        v1.delete(v1.source_ids[:1])
    with pytest.raises(ArtifactError, match="bm25-convert"):
        v1.compact()
