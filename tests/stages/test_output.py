"""Output safety (items 1 and 3): what ``out=`` may replace, and replacement without a window.

Every case of the fault probe is here: a user's folder, the input corpus, a parent of the input,
``.`` and its parents, another pipeline's output, a remote URL; SIGKILL of a writer at several points
of an overwrite; two writers at once; temporaries of dead writers.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cutext import pipelines
from cutext.pipelines.bm25 import BM25Index
from cutext.stages.runtime import output
from cutext.stages.runtime.output import OutputBusyError, OutputDirectoryError

BM25 = dict(backend="cpu", scheduler="sync", progress=False)


@pytest.fixture()
def corpus(tmp_path, data_dir) -> Path:
    """The first 200 CACM abstracts as JSON Lines (a real corpus, small enough to index in a second)."""
    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()[:200]
    d = tmp_path / "corpus"
    d.mkdir()
    p = d / "cacm200.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def _hidden(parent: Path) -> list[str]:
    return sorted(e.name for e in parent.iterdir() if e.name.startswith("."))


def _user_folder(tmp_path) -> Path:
    d = tmp_path / "mydocs"
    d.mkdir()
    (d / "thesis.txt").write_text("three years of work", encoding="utf-8")
    (d / "sub").mkdir()
    (d / "sub" / "data.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    return d


def _assert_user_folder_intact(d: Path):
    assert (d / "thesis.txt").read_text(encoding="utf-8") == "three years of work"
    assert (d / "sub" / "data.csv").read_text(encoding="utf-8") == "a,b\n1,2\n"


# --------------------------------------------------------------------------- what may be replaced
@pytest.mark.parametrize("name, params", [
    ("bm25", BM25),
    ("lda", dict(K=4, iterations=1, backend="cpu", progress=False)),
    ("cluster", dict(backend="cpu", progress=False)),
    ("ngram", dict(model="missing.arpa", backend="cpu", progress=False)),
])
def test_user_folder_is_refused_before_any_work(tmp_path, name, params):
    """A folder of the user's files is never replaced; the error comes first (the input does not even exist)."""
    d = _user_folder(tmp_path)
    with pytest.raises(OutputDirectoryError, match="mydocs"):
        pipelines.run(name, tmp_path / "no-such-corpus.txt", out=d, **params)
    _assert_user_folder_intact(d)
    assert _hidden(tmp_path) == []


def test_input_corpus_folder_and_its_parents_are_refused(tmp_path, corpus):
    before = corpus.read_bytes()
    for out in (corpus.parent, tmp_path, corpus):
        with pytest.raises(OutputDirectoryError, match="input"):
            pipelines.run("bm25", corpus, out=out, **BM25)
    assert corpus.read_bytes() == before
    glob = str(corpus.parent / "*.jsonl")
    with pytest.raises(OutputDirectoryError, match="input"):
        pipelines.run("bm25", glob, out=corpus.parent, **BM25)
    assert corpus.read_bytes() == before


def test_working_directory_and_its_parents_are_refused(tmp_path, corpus, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    (work / "keep.txt").write_text("x", encoding="utf-8")
    monkeypatch.chdir(work)
    for out in (".", "..", str(work), "./"):
        with pytest.raises(OutputDirectoryError, match="working directory"):
            pipelines.run("bm25", corpus, out=out, **BM25)
    assert (work / "keep.txt").read_text(encoding="utf-8") == "x"
    assert corpus.is_file()


def test_other_pipelines_output_is_refused(tmp_path, corpus):
    lda_out = tmp_path / "topics"
    lda_out.mkdir()
    (lda_out / "params.json").write_text(json.dumps({"kind": "cutext.lda"}), encoding="utf-8")
    with pytest.raises(OutputDirectoryError, match="'cutext.lda'"):
        pipelines.run("bm25", corpus, out=lda_out, **BM25)
    assert (lda_out / "params.json").is_file()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "index.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(OutputDirectoryError, match="no index.json of a cutext output"):
        pipelines.run("bm25", corpus, out=broken, **BM25)


def test_a_file_and_a_remote_url_are_refused(tmp_path, corpus):
    f = tmp_path / "notes.txt"
    f.write_text("x", encoding="utf-8")
    with pytest.raises(OutputDirectoryError, match="not a directory"):
        pipelines.run("bm25", corpus, out=f, **BM25)
    assert f.read_text(encoding="utf-8") == "x"
    for url in ("s3://bucket/idx", "memory://idx", "gcs://b/i"):
        with pytest.raises(ValueError, match="remote output"):
            pipelines.run("bm25", corpus, out=url, **BM25)
    assert not (Path.cwd() / "s3:").exists()


def test_empty_directory_and_earlier_output_are_replaced(tmp_path, corpus):
    out = tmp_path / "idx"
    out.mkdir()
    r = pipelines.run("bm25", corpus, out=out, **BM25)
    first = BM25Index.load(r.path)
    assert len(first.lengths) == 200
    r2 = pipelines.run("bm25", corpus, out=out, k1=0.9, **BM25)
    meta = json.loads((out / "index.json").read_text())
    assert meta["k1"] == 0.9 and len(BM25Index.load(r2.path).lengths) == 200
    assert _hidden(tmp_path) == []
    with pytest.raises(FileExistsError, match="overwrite"):
        pipelines.run("bm25", corpus, out=out, overwrite=False, **BM25)


def test_stream_clusterer_save_refuses_a_user_folder(tmp_path):
    from cutext.stages.engines.streamcluster import StreamClusterer

    sc = StreamClusterer(0.5, 10, backend="cpu")
    sc.partial_fit(["oil prices rose", "oil prices fell", "a new chip design"])
    d = _user_folder(tmp_path)
    with pytest.raises(OutputDirectoryError):
        sc.save(d)
    _assert_user_folder_intact(d)
    sc.save(tmp_path / "state")
    sc.save(tmp_path / "state")  # an earlier state is replaced
    assert StreamClusterer.load(tmp_path / "state", backend="cpu").n_docs == 3


# --------------------------------------------------------------------------- temporaries and writers
def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_temporaries_of_dead_writers_are_removed_live_ones_kept(tmp_path, corpus):
    host = socket.gethostname()
    dead = tmp_path / f".idx.tmp-0badf00d-{_dead_pid()}-{host}"
    live = tmp_path / f".idx.tmp-00c0ffee-{os.getpid()}-{host}"
    other = tmp_path / f".other.tmp-0badf00d-{_dead_pid()}-{host}"
    for d in (dead, live, other):
        d.mkdir()
        (d / "postings").mkdir()
    pipelines.run("bm25", corpus, out=tmp_path / "idx", **BM25)
    assert not dead.exists()
    assert live.is_dir() and other.is_dir()


def test_old_copy_of_a_writer_killed_between_renames_is_restored(tmp_path, corpus):
    out = tmp_path / "idx"
    pipelines.run("bm25", corpus, out=out, **BM25)
    old = tmp_path / f".idx.old-0badf00d-{_dead_pid()}-{socket.gethostname()}"
    os.rename(out, old)  # what a writer killed between the two renames of the fallback leaves
    output.clean_stale(out)
    assert len(BM25Index.load(out).lengths) == 200 and not old.exists()


def test_concurrent_writer_gets_a_clear_error_and_leaves_nothing(tmp_path, corpus):
    out = tmp_path / "idx"
    pipelines.run("bm25", corpus, out=out, **BM25)
    before = (out / "index.json").read_bytes()
    with output._lock(out.absolute()):  # another writer is in its swap right now
        with pytest.raises(OutputBusyError, match="another run is replacing"):
            pipelines.run("bm25", corpus, out=out, k1=0.5, **BM25)
    assert (out / "index.json").read_bytes() == before
    assert _hidden(tmp_path) == []
    pipelines.run("bm25", corpus, out=out, k1=0.5, **BM25)  # the lock is gone with its holder
    assert json.loads((out / "index.json").read_text())["k1"] == 0.5


def test_fallback_swap_without_exchange(tmp_path, corpus, monkeypatch):
    """Where renameat2(RENAME_EXCHANGE) is missing, two renames replace the output and nothing remains."""
    monkeypatch.setattr(output, "_exchange", lambda a, b: False)
    out = tmp_path / "idx"
    pipelines.run("bm25", corpus, out=out, **BM25)
    pipelines.run("bm25", corpus, out=out, k1=0.7, **BM25)
    assert json.loads((out / "index.json").read_text())["k1"] == 0.7
    assert _hidden(tmp_path) == []


# --------------------------------------------------------------------------- SIGKILL at every point
KILLER = textwrap.dedent("""
    import os, signal, sys
    import pyarrow.parquet as pq
    from cutext import pipelines
    from cutext.stages.runtime import output

    point, corpus, out = sys.argv[1:4]
    die = lambda: os.kill(os.getpid(), signal.SIGKILL)
    if point == "write":
        pq.write_table = lambda *a, **k: die()
    elif point == "swap":
        output._swap_in = lambda *a, **k: die()
    elif point == "exchanged":
        real = output._exchange
        output._exchange = lambda a, b: (real(a, b), die())
    elif point == "between":
        output._exchange = lambda a, b: False
        real_rename = os.rename
        def rename(a, b):
            real_rename(a, b)
            if ".old-" in str(b):
                die()
        os.rename = rename
    pipelines.run("bm25", corpus, out=out, k1=0.5, backend="cpu", scheduler="sync", progress=False)
""")


@pytest.mark.slow
@pytest.mark.parametrize("point", ["write", "swap", "exchanged", "between"])
def test_sigkill_during_an_overwrite(tmp_path, corpus, point):
    out = tmp_path / "idx"
    pipelines.run("bm25", corpus, out=out, **BM25)
    if point == "exchanged":
        (tmp_path / "probe-a").mkdir()
        (tmp_path / "probe-b").mkdir()
        if not output._exchange(tmp_path / "probe-a", tmp_path / "probe-b"):
            pytest.skip("this file system has no renameat2(RENAME_EXCHANGE)")
        (tmp_path / "probe-a").rmdir()
        (tmp_path / "probe-b").rmdir()
    proc = subprocess.run([sys.executable, "-c", KILLER, point, str(corpus), str(out)], capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    if point == "between":
        # the fallback has a window (out renamed away); the next run restores the old output
        assert not out.exists()
        output.clean_stale(out)
    # an output always exists and loads: the old one, or the new one once the swap happened
    k1 = json.loads((out / "index.json").read_text())["k1"]
    assert k1 == (0.5 if point == "exchanged" else 1.2)
    assert len(BM25Index.load(out).lengths) == 200
    pipelines.run("bm25", corpus, out=out, **BM25)  # the next run removes what the killed one left
    assert _hidden(tmp_path) == []
