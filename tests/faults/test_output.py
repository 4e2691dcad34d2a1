"""Nothing a user owns is lost: every file the command line writes, every output and every file a run
reads are guarded (the data-loss cases of the second fault probe, `docs/faults.md`)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cutext import pipelines
from cutext.pipelines.__main__ import main as cli
from cutext.pipelines.bm25 import BM25Index
from cutext.pipelines.trec import write_trec_run
from cutext.stages.runtime.output import OutputDirectoryError, check_output_file

BM25 = dict(backend="cpu", scheduler="sync", progress=False)


@pytest.fixture()
def corpus(tmp_path, data_dir) -> Path:
    """A folder of 11 CACM abstracts, one document per file."""
    d = tmp_path / "corpus"
    d.mkdir()
    for i, line in enumerate((data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()[:11]):
        (d / f"doc{i:02d}.txt").write_text(json.loads(line)["contents"], encoding="utf-8")
    return d


@pytest.fixture()
def index(corpus, tmp_path) -> Path:
    out = tmp_path / "idx"
    pipelines.run("bm25", corpus, out=out, **BM25)
    return out


@pytest.fixture()
def queries(tmp_path) -> Path:
    q = tmp_path / "q.txt"
    q.write_text("1\tcomputer programs\n2\talgebraic languages\n", encoding="utf-8")
    return q


def _tree(d: Path) -> dict:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------- files the CLI writes
def test_search_out_onto_the_queries_file_is_refused_and_keeps_it(index, queries, capsys):
    before = queries.read_bytes()
    assert cli(["search", str(index), "--queries", str(queries), "--out", str(queries)]) == 2
    assert "an input of this command" in capsys.readouterr().err
    assert queries.read_bytes() == before


@pytest.mark.parametrize("target", ["index.json", "segments/seg-00000/postings.parquet", "segments/run.txt",
                                    "run.txt"])
def test_search_out_inside_the_index_is_refused_and_keeps_it(index, queries, capsys, target):
    before = _tree(index)
    assert cli(["search", str(index), "--queries", str(queries), "--out", str(index / target)]) == 2
    assert "inside the input" in capsys.readouterr().err
    assert _tree(index) == before
    BM25Index.load(index)  # still sealed and whole


def test_a_run_file_is_never_written_inside_any_cutext_output(index, tmp_path):
    other = tmp_path / "elsewhere"  # not an input of this call: still refused, the folder is an artifact
    with pytest.raises(OutputDirectoryError, match="inside the cutext output"):
        check_output_file(index / "notes" / "run.txt")
    import pandas as pd

    run = pd.DataFrame({"query_id": ["1"], "doc_id": ["a"], "score": [1.0]})
    with pytest.raises(OutputDirectoryError, match="inside the cutext output"):
        write_trec_run(run, index / "run.txt")
    assert not (index / "run.txt").exists()
    other.mkdir()
    write_trec_run(run, other / "run.txt")  # anywhere else is fine
    assert (other / "run.txt").read_text().startswith("1 Q0 a 1 ")
    with pytest.raises(OutputDirectoryError, match="is a directory"):
        check_output_file(other)


def test_search_out_elsewhere_writes_the_run(index, queries, tmp_path):
    out = tmp_path / "runs" / "cacm.run"
    out.parent.mkdir()
    assert cli(["search", str(index), "--queries", str(queries), "--out", str(out), "--k", "3"]) == 0
    rows = [r.split() for r in out.read_text().splitlines()]
    assert rows and all(len(r) == 6 and r[1] == "Q0" and r[2].startswith("doc") for r in rows)
    assert max(sum(r[0] == q for r in rows) for q in ("1", "2")) <= 3


# --------------------------------------------------------------------------- out= and the inputs
def test_output_inside_the_input_folder_is_refused(corpus):
    before = _tree(corpus)
    with pytest.raises(OutputDirectoryError, match="inside the input folder"):
        pipelines.run("bm25", corpus, out=corpus / "idx", **BM25)
    with pytest.raises(OutputDirectoryError, match="matches the input pattern"):
        pipelines.run("bm25", str(corpus / "*"), out=corpus / "idx", **BM25)
    with pytest.raises(OutputDirectoryError, match="matches the input pattern"):
        pipelines.run("bm25", str(corpus / "doc*"), out=corpus / "docs-index", **BM25)
    assert _tree(corpus) == before  # nothing was added, so the next build still sees 11 documents
    assert pipelines.run("bm25", corpus, out=corpus.parent / "ok", **BM25).counts["n_docs"] == 11


@pytest.mark.parametrize("name, params", [
    ("bm25", BM25),
    ("lda", dict(K=3, iterations=1, backend="cpu", progress=False)),
    ("cluster", dict(backend="cpu", progress=False)),
])
def test_a_parameter_file_inside_the_old_output_is_a_protected_input(corpus, tmp_path, name, params):
    out = tmp_path / "idx3"
    pipelines.run(name, corpus, out=out, **params)
    stop = out / "stop.txt"  # a user keeps the stopword list beside the output's files
    # the output now holds a file its manifest does not list, and the list is read by the run: refused
    stop.write_text("the\nof\nand\n", encoding="utf-8")
    with pytest.raises(OutputDirectoryError, match="parent of the input"):
        pipelines.run(name, corpus, out=out, stopwords=str(stop), **params)
    assert stop.read_text(encoding="utf-8") == "the\nof\nand\n"


def test_a_forged_manifest_beside_user_files_is_not_replaced(corpus, tmp_path):
    d = tmp_path / "mine"
    d.mkdir()
    (d / "index.json").write_text(json.dumps({"kind": "cutext.bm25"}), encoding="utf-8")
    (d / "thesis.txt").write_text("three years of work", encoding="utf-8")
    with pytest.raises(OutputDirectoryError, match="lists none of its files"):
        pipelines.run("bm25", corpus, out=d, **BM25)
    assert (d / "thesis.txt").read_text(encoding="utf-8") == "three years of work"
    # a forged list does not help either: the user's file is not in it
    (d / "index.json").write_text(json.dumps({"kind": "cutext.bm25", "files": {}}), encoding="utf-8")
    with pytest.raises(OutputDirectoryError, match="thesis.txt"):
        pipelines.run("bm25", corpus, out=d, **BM25)
    assert (d / "thesis.txt").exists()


def test_a_file_added_inside_an_earlier_output_is_named_and_kept(index, corpus):
    note = index / "segments" / "my-notes.txt"
    note.write_text("keep me", encoding="utf-8")
    with pytest.raises(OutputDirectoryError, match="segments/my-notes.txt"):
        pipelines.run("bm25", corpus, out=index, **BM25)
    assert note.read_text(encoding="utf-8") == "keep me"
    note.unlink()  # once moved out, the earlier output is replaced as before
    assert pipelines.run("bm25", corpus, out=index, **BM25).counts["n_docs"] == 11


def test_an_output_symlink_is_refused_and_nothing_is_left_behind(corpus, tmp_path):
    target = tmp_path / "real-index"
    pipelines.run("bm25", corpus, out=target, **BM25)
    link = tmp_path / "latest"
    link.symlink_to(target)
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(OutputDirectoryError, match="symbolic link"):
        pipelines.run("bm25", corpus, out=link, **BM25)
    assert link.is_symlink() and sorted(os.listdir(tmp_path)) == before
