"""Documents back from a BM25 index built with ``store_text=True``: ``doc``, ``docs``, ``search(with_text=True)``,
through appends, deletions and compaction, checked against the input text on CACM and SciFact."""
from __future__ import annotations

import gzip
import json

import pytest

from cutext import pipelines
from cutext.pipelines.__main__ import main
from cutext.stages.engines.bm25_index import BM25Index
from cutext.stages.runtime.artifacts import ArtifactError

KW = dict(backend="cpu", scheduler="sync", progress=False)


def _corpus(data_dir, name):
    """(JSON lines, source ids, input texts, reader keywords) of a bundled collection."""
    if name == "cacm":
        lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()
        recs = [json.loads(x) for x in lines]
        return lines, [r["id"] for r in recs], [r["contents"] for r in recs], {}
    with gzip.open(data_dir / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        lines = [x for x in fh.read().splitlines() if x.strip()]
    recs = [json.loads(x) for x in lines]
    # text_column=[title, text]: the reader joins the columns with one space
    return (lines, [str(r["_id"]) for r in recs], [f"{r['title']} {r['text']}" for r in recs],
            {"text_column": ["title", "text"], "id_column": "_id"})


def _write(folder, name, lines):
    p = folder / f"{name}.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def _assert_texts(index: BM25Index, expected: dict):
    assert index.n_docs == len(expected)
    assert index.docs(list(expected)) == list(expected.values())
    sid = next(reversed(expected))
    assert index.doc(sid) == expected[sid]


@pytest.mark.parametrize("name", ["cacm", "scifact"])
def test_every_document_comes_back_after_appends_a_deletion_and_compaction(tmp_path, data_dir, name):
    lines, ids, texts, reader = _corpus(data_dir, name)
    n = len(lines)
    ix = tmp_path / "ix"
    # several read partitions: each segment keeps the texts of its own partition
    r = pipelines.run("bm25", _write(tmp_path, "a", lines[: n // 2]), out=ix, store_text=True, blocksize=1 << 18,
                      **KW, **reader)
    first = json.loads((ix / "index.json").read_text())
    assert r.path == ix.absolute() and first["store_text"] is True and len(first["segments"]) >= 3
    index = BM25Index.load(ix)
    _assert_texts(index, dict(zip(ids[: n // 2], texts[: n // 2])))
    # an append follows the index's own setting: its segments store texts too
    pipelines.run("bm25", _write(tmp_path, "b", lines[n // 2:]), out=ix, append=True, **KW, **reader)
    index = BM25Index.load(ix)
    now = json.loads((ix / "index.json").read_text())["segments"]
    assert index.store_text and set(now) - set(first["segments"])  # new segments (some merged by the policy)
    expected = dict(zip(ids, texts))
    _assert_texts(index, expected)
    gone = ids[3::7]
    index.delete(gone)
    for g in gone:
        del expected[g]
    _assert_texts(index, expected)
    with pytest.raises(KeyError, match=repr(gone[0])):
        index.doc(gone[0])
    n_segments = len(json.loads((ix / "index.json").read_text())["segments"])
    assert index.compact() == n_segments
    (seg,) = json.loads((ix / "index.json").read_text())["segments"]
    assert (ix / "segments" / seg / "text.parquet").is_file()
    _assert_texts(index, expected)
    _assert_texts(BM25Index.load(ix), expected)


def test_search_with_text_adds_each_hits_text(tmp_path, data_dir):
    _, ids, texts, _ = _corpus(data_dir, "cacm")
    index = BM25Index.load(pipelines.run("bm25", data_dir / "cacm" / "cacm.json", out=tmp_path / "ix",
                                         store_text=True, **KW).path)
    qs = {"q1": "parallel sorting algorithms", "q2": "compiler optimization", "q3": "zzqqxxv"}  # q3 matches nothing
    plain = index.search(qs, k=25)
    hits = index.search(qs, k=25, with_text=True)
    assert list(hits.columns) == list(plain.columns) + ["text"]
    assert hits.drop(columns="text").equals(plain)
    by_id = dict(zip(ids, texts))
    assert len(hits) == 50 and hits["text"].tolist() == [by_id[s] for s in hits["source_id"]]
    assert hits["text"].str.contains("sort", case=False).iloc[0]


def test_texts_are_refused_clearly_where_there_are_none(tmp_path, data_dir):
    lines, ids, _, _ = _corpus(data_dir, "cacm")
    src = _write(tmp_path, "a", lines[:300])
    plain = BM25Index.load(pipelines.run("bm25", src, out=tmp_path / "plain", **KW).path)
    assert not plain.store_text
    for call in (lambda: plain.doc(ids[0]), lambda: plain.docs(ids[:2]),
                 lambda: plain.search("sorting", with_text=True)):
        with pytest.raises(ValueError, match=r"store_text=True"):
            call()
    with pytest.raises(ValueError, match=r"store_text=True .*index_format=2"):
        pipelines.run("bm25", src, out=tmp_path / "v1", index_format=1, store_text=True, **KW)
    with pytest.raises(ValueError, match=r"append=True .*store_text"):  # the index's setting is the index's
        pipelines.run("bm25", _write(tmp_path, "b", lines[300:400]), out=tmp_path / "plain", append=True,
                      store_text=True, **KW)
    v1 = BM25Index.load(pipelines.run("bm25", src, out=tmp_path / "v1", index_format=1, **KW).path)
    with pytest.raises(ValueError, match="format-1 index .*store_text=True"):
        v1.doc(ids[0])
    index = BM25Index.load(pipelines.run("bm25", src, out=tmp_path / "t", store_text=True, **KW).path)
    with pytest.raises(KeyError, match=r"'CACM-no-such'"):
        index.doc("CACM-no-such")
    assert index.docs([]) == []


def test_text_files_are_listed_and_verified(tmp_path, data_dir):
    lines, ids, texts, _ = _corpus(data_dir, "cacm")
    ix = tmp_path / "ix"
    assert main(["bm25", str(_write(tmp_path, "a", lines[:200])), "--out", str(ix), "--store-text",
                 "--backend", "cpu", "--no-progress"]) == 0  # the command line's switch
    meta = json.loads((ix / "index.json").read_text())
    listed = [f for f in meta["files"] if f.endswith("text.parquet")]
    assert listed == ["segments/seg-00000/text.parquet"]
    assert BM25Index.load(ix).doc(ids[199]) == texts[199]
    f = ix / listed[0]
    raw = bytearray(f.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    f.write_bytes(bytes(raw))
    with pytest.raises(ArtifactError, match="text.parquet"):
        BM25Index.load(ix)


@pytest.mark.slow
def test_workers_of_a_client_store_their_partitions_texts(tmp_path, data_dir):
    """Both Client routes: the workers' shares of a file input, and a frame's partitions written where they are."""
    distributed = pytest.importorskip("distributed")
    import pandas as pd

    lines, ids, texts, _ = _corpus(data_dir, "cacm")
    folder = tmp_path / "src"
    folder.mkdir()
    for i in range(4):
        _write(folder, f"part-{i}", lines[i * 801:(i + 1) * 801])
    frame = pd.DataFrame({"id": ids, "contents": texts})
    expected = dict(zip(ids, texts))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc, \
            distributed.Client(lc) as c:
        a = pipelines.run("bm25", str(folder), out=tmp_path / "a", store_text=True, client=c, backend="cpu",
                          progress=False)
        b = pipelines.run("bm25", frame, out=tmp_path / "b", store_text=True, client=c, backend="cpu",
                          progress=False, text_column="contents", id_column="id")
    for r in (a, b):
        assert len(json.loads((r.path / "index.json").read_text())["segments"]) >= 2
        _assert_texts(BM25Index.load(r.path), expected)
