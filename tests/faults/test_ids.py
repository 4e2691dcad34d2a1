"""Source ids are taken as the user wrote them, and a document whose id repeats is handled by the
writer's explicit ``on_duplicate`` choice (Lucene's addDocument / updateDocument), on CACM documents."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pytest

from cutext import pipelines
from cutext.pipelines.__main__ import main
from cutext.pipelines.bm25_index_ops import delete_documents, read_ids_file
from cutext.stages.engines.bm25_index import BM25Index
from cutext.stages.engines.index_ids import DuplicateIdError, source_id_list

KW = dict(backend="cpu", scheduler="sync", progress=False)
QUERIES = {"q1": "computer programs", "q2": "algorithm for sorting", "q3": "information retrieval systems"}


@pytest.fixture(scope="module")
def cacm(data_dir):
    recs = [json.loads(x) for x in (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()[:120]]
    return [{"id": str(r["id"]).split("-")[-1], "text": r["contents"]} for r in recs]  # numeric ids: "2636"


def _jsonl(path, recs):
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    return path


def _same_search(got: BM25Index, ref: BM25Index):
    assert sorted(got.source_ids) == sorted(ref.source_ids)
    a, b = got.search(QUERIES, k=10), ref.search(QUERIES, k=10)
    assert list(a["source_id"]) == list(b["source_id"])
    np.testing.assert_allclose(a["score"], b["score"], rtol=1e-6)


def test_ids_file_lines_are_ids_exactly_as_written(tmp_path, cacm):
    recs = cacm[:5] + [{"id": "spaced", "text": "spaced document about compilers"}]
    ix = tmp_path / "ix"
    pipelines.run("bm25", str(_jsonl(tmp_path / "d.jsonl", recs)), out=str(ix), **KW)
    f = tmp_path / "ids.txt"
    f.write_bytes(b"\xef\xbb\xbf spaced \r\n\n" + recs[0]["id"].encode() + b"\n")
    assert read_ids_file(f) == [" spaced ", recs[0]["id"]]
    assert main(["bm25-delete", "--index", str(ix), "--ids-file", str(f)]) == 2  # " spaced " is no id of the index
    assert "spaced" in set(BM25Index.load(ix).source_ids)  # nothing deleted
    assert main(["bm25-delete", "--index", str(ix), "--ids-file", str(tmp_path)]) == 2  # a directory: one line


def test_ids_given_in_python_are_strings_taken_as_given(tmp_path, cacm):
    ix = tmp_path / "ix"
    pipelines.run("bm25", str(_jsonl(tmp_path / "d.jsonl", cacm[:5])), out=str(ix), **KW)
    first = cacm[0]["id"]
    for bad in (None, int(first), [first, int(first)], b"1", 3.5):
        with pytest.raises(TypeError, match="source_ids"):
            delete_documents(ix, bad)
    with pytest.raises(ValueError, match="not in the index"):
        delete_documents(ix, [f" {first}"])
    with pytest.raises(TypeError, match="not a str"):
        BM25Index.load(ix).doc_ids([int(first)])
    assert source_id_list(np.array([" a", "b "])) == [" a", "b "]
    assert delete_documents(ix, first).counts["deleted_docs"] == 1  # one str is one id


def test_a_one_shot_build_whose_input_repeats_an_id(tmp_path, cacm):
    recs = cacm[:60] + [dict(cacm[3], text=cacm[70]["text"])]  # id of doc 3 again, with other text
    src = _jsonl(tmp_path / "d.jsonl", recs)
    with pytest.raises(DuplicateIdError, match=repr(cacm[3]["id"])):
        pipelines.run("bm25", str(src), out=str(tmp_path / "err"), **KW)
    assert not (tmp_path / "err").exists()
    keep = pipelines.run("bm25", str(src), out=str(tmp_path / "keep"), on_duplicate="keep", **KW)
    assert keep.counts["n_docs"] == 61
    rep = pipelines.run("bm25", str(src), out=str(tmp_path / "rep"), on_duplicate="replace", **KW)
    assert rep.counts["n_docs"] == 60 and rep.counts["updated_docs"] == 1
    live = [r for i, r in enumerate(recs) if i != 3]  # the last copy stays
    ref = pipelines.run("bm25", str(_jsonl(tmp_path / "live.jsonl", live)), out=str(tmp_path / "ref"), **KW)
    _same_search(BM25Index.load(rep.path), BM25Index.load(ref.path))
    frame = pd.DataFrame(recs)
    with pytest.raises(DuplicateIdError):
        pipelines.run("bm25", frame, out=str(tmp_path / "frame"), id_column="id", **KW)
    with pytest.raises(ValueError, match="index_format"):
        pipelines.run("bm25", str(src), out=str(tmp_path / "f1"), on_duplicate="replace", index_format=1, **KW)
    with pytest.raises(DuplicateIdError):
        pipelines.run("bm25", str(src), out=str(tmp_path / "f1"), index_format=1, **KW)


def test_append_of_ids_already_in_the_index(tmp_path, cacm):
    ix = tmp_path / "ix"
    pipelines.run("bm25", str(_jsonl(tmp_path / "a.jsonl", cacm[:60])), out=str(ix), **KW)
    update = [dict(cacm[5], text=cacm[90]["text"]), dict(cacm[7], text=cacm[91]["text"])] + cacm[60:80]
    more = _jsonl(tmp_path / "b.jsonl", update)
    before = (ix / "index.json").read_bytes()
    with pytest.raises(DuplicateIdError, match=repr(cacm[5]["id"])):
        pipelines.run("bm25", str(more), out=str(ix), append=True, **KW)
    assert (ix / "index.json").read_bytes() == before  # nothing committed
    r = pipelines.run("bm25", str(more), out=str(ix), append=True, on_duplicate="replace", **KW)
    assert r.counts["n_docs"] == 80 and r.counts["updated_docs"] == 2
    live = [x for i, x in enumerate(cacm[:60]) if i not in (5, 7)] + update
    ref = pipelines.run("bm25", str(_jsonl(tmp_path / "live.jsonl", live)), out=str(tmp_path / "ref"), **KW)
    _same_search(BM25Index.load(ix), BM25Index.load(ref.path))
    assert main(["bm25-append", str(more), "--index", str(ix), "--on-duplicate", "keep"]) == 0
    loaded = BM25Index.load(ix)
    assert loaded.n_docs == 102 and list(loaded.source_ids).count(cacm[5]["id"]) == 2
    assert loaded.delete([cacm[5]["id"]]) == 2  # every copy, counted


def test_append_that_changes_a_kept_columns_type_is_refused(tmp_path, cacm):
    ix = tmp_path / "ix"
    years = [dict(r, year=1960 + i % 20) for i, r in enumerate(cacm[:40])]
    pipelines.run("bm25", str(_jsonl(tmp_path / "a.jsonl", years)), out=str(ix), keep_columns=["year"], **KW)
    before = (ix / "index.json").read_bytes()
    text_years = [dict(r, year="nineteen") for r in cacm[40:50]]
    with pytest.raises(ValueError, match=r"'year' is int64 in the index but string"):
        pipelines.run("bm25", str(_jsonl(tmp_path / "b.jsonl", text_years)), out=str(ix), append=True, **KW)
    assert (ix / "index.json").read_bytes() == before
    floats = [dict(r, year=1970.5) for r in cacm[40:50]]
    pipelines.run("bm25", str(_jsonl(tmp_path / "c.jsonl", floats)), out=str(ix), append=True, **KW)
    hits = BM25Index.load(ix).search("computer", k=100, filter=pc.field("year") > 1970)
    assert len(hits) and set(hits["source_id"]) <= {r["id"] for r in years[11:20] + years[31:40] + cacm[40:50]}
