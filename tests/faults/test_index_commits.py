"""Commits of a living bm25 index under failure and concurrency: a reader keeps the commit it loaded while
the next one is written, kill -9 during an append leaves the previous commit loadable, and of two writers
that start from the same commit one wins and the other writes nothing."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from cutext import pipelines
from cutext.pipelines import bm25_index_ops as ops
from cutext.stages.engines import index_commits as commits
from cutext.stages.engines.bm25_index import BM25Index
from cutext.stages.runtime.output import OutputBusyError

from helpers import cacm_topics

KW = dict(backend="cpu", scheduler="sync", progress=False, index_format=2)


@pytest.fixture()
def parts(tmp_path, data_dir):
    """CACM cut in three JSON-lines files (1000 documents each and the rest)."""
    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()
    out = {}
    for name, ls in {"a": lines[:1000], "b": lines[1000:2000], "c": lines[2000:]}.items():
        out[name] = tmp_path / f"{name}.jsonl"
        out[name].write_text("\n".join(ls) + "\n", encoding="utf-8")
    return out


def _siblings(ix):
    """Entries beside the index other than itself (temporaries, locks)."""
    return sorted(p.name for p in ix.parent.iterdir() if p.name.startswith(f".{ix.name}."))


def test_a_reader_keeps_its_commit_while_the_next_is_written(tmp_path, parts, data_dir, monkeypatch):
    ix = pipelines.run("bm25", parts["a"], out=tmp_path / "ix", **KW).path
    qs = dict(list(cacm_topics(data_dir).items())[:10])
    reader = BM25Index.load(ix)
    before = reader.search(qs, k=10)
    seen = {}
    real = commits.write_commit

    def during(*a, **k):  # the new segments are written, the commit not yet swapped in
        seen["reader"] = reader.search(qs, k=10)
        seen["fresh"] = BM25Index.load(ix).search(qs, k=10)
        return real(*a, **k)

    monkeypatch.setattr(commits, "write_commit", during)
    ops.append_index(parts["b"], ix, backend="cpu", scheduler="sync", progress=False)
    pd.testing.assert_frame_equal(seen["reader"], before)
    pd.testing.assert_frame_equal(seen["fresh"], before)
    pd.testing.assert_frame_equal(reader.search(qs, k=10), before)  # after the commit, still commit n
    after = BM25Index.load(ix)
    assert after.n_docs == 2000 and reader.n_docs == 1000


def test_two_appenders_from_one_commit_one_wins_the_other_writes_nothing(tmp_path, parts, monkeypatch):
    ix = pipelines.run("bm25", parts["a"], out=tmp_path / "ix", **KW).path
    real = commits.write_commit
    inner = {}

    def race(*a, **k):  # a second appender starts from the same commit and finishes first
        if not inner:
            inner["started"] = True
            inner["result"] = ops.append_index(parts["c"], ix, backend="cpu", scheduler="sync", progress=False)
        return real(*a, **k)

    monkeypatch.setattr(commits, "write_commit", race)
    with pytest.raises(OutputBusyError, match="changed by another writer .*generation 0 -> 1.* wrote nothing"):
        ops.append_index(parts["b"], ix, backend="cpu", scheduler="sync", progress=False)
    meta = json.loads((ix / "index.json").read_text())
    assert meta["generation"] == 1 and meta["segments"] == ["seg-00000", "seg-00001"]
    assert meta["N"] == inner["result"].counts["n_docs"] > 1000
    assert BM25Index.load(ix).n_docs == meta["N"]  # the winner's commit, whole and verified
    assert _siblings(ix) == []  # the loser's temporary is gone


@pytest.mark.parametrize("second", ["delete", "compact"])
def test_a_delete_or_compact_that_lost_the_race_to_an_append_writes_nothing(tmp_path, parts, monkeypatch, second):
    ix = pipelines.run("bm25", parts["a"], out=tmp_path / "ix", **KW).path
    ids = list(BM25Index.load(ix).source_ids[:3])
    real = commits.index_counts

    def race(*a, **k):  # an append commits while the delete / compact is writing
        monkeypatch.setattr(commits, "index_counts", real)
        ops.append_index(parts["b"], ix, backend="cpu", scheduler="sync", progress=False)
        return real(*a, **k)

    monkeypatch.setattr(commits, "index_counts", race)
    with pytest.raises(OutputBusyError, match="another writer"):
        if second == "delete":
            ops.delete_documents(ix, ids)
        else:
            ops.compact_index(ix)
    loaded = BM25Index.load(ix)
    assert loaded.n_docs == 2000 and set(ids) <= set(loaded.source_ids)  # the append kept, nothing deleted
    assert _siblings(ix) == []


_KILLED_APPEND = textwrap.dedent("""
    import sys, time
    from cutext.pipelines import bm25_index_ops as ops
    from cutext.stages.engines import index_commits as commits
    real = commits.write_commit
    def stall(*a, **k):
        out = real(*a, **k)
        print("written", flush=True)
        time.sleep(120)
        return out
    commits.write_commit = stall
    ops.append_index(sys.argv[1], sys.argv[2], backend="cpu", scheduler="sync", progress=False)
""")


def test_kill_9_during_an_append_leaves_the_previous_commit_loadable(tmp_path, parts, data_dir):
    ix = pipelines.run("bm25", parts["a"], out=tmp_path / "ix", **KW).path
    qs = dict(list(cacm_topics(data_dir).items())[:10])
    before = BM25Index.load(ix).search(qs, k=10)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_APPEND, str(parts["b"]), str(ix)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "written", proc.stderr.read()
        assert any(".tmp-" in s for s in _siblings(ix))  # its segments sit in a temporary beside the index
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    pd.testing.assert_frame_equal(BM25Index.load(ix).search(qs, k=10), before)  # commit n, verified
    r = ops.append_index(parts["b"], ix, backend="cpu", scheduler="sync", progress=False)  # the next one works
    assert r.counts["n_docs"] == 2000 and BM25Index.load(ix).n_docs == 2000
    assert _siblings(ix) == []  # the dead writer's temporary was removed


def test_an_append_reads_only_what_it_wrote_and_never_blesses_a_damaged_segment(tmp_path, parts, monkeypatch):
    """A commit takes the CRC32s of the segments it links from their sealed manifests: it reads none of their
    bytes, and a segment damaged on disk before the append (same size) still fails the next load, naming it."""
    from cutext.stages.runtime import artifacts, checksums

    ix = pipelines.run("bm25", parts["a"], out=tmp_path / "ix", **KW).path
    seg = sorted((ix / "segments").iterdir())[0]
    read = []
    real = checksums._crc_files
    monkeypatch.setattr(checksums, "_crc_files", lambda paths: read.extend(paths) or real(paths))
    ops.append_index(parts["b"], ix, backend="cpu", scheduler="sync", progress=False)
    new = json.loads((ix / "index.json").read_text())["segments"][-1]
    data = [p for p in read if p.suffix == ".parquet"]  # the manifests (segment.json) are read: a few KB
    assert data and all(p.parent.name == new for p in data), data  # the new segment's, sealed by its writer
    BM25Index.load(ix)  # verified

    f = ix / "segments" / seg.name / "postings.parquet"
    raw = bytearray(f.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    f.write_bytes(bytes(raw))  # same size: only the CRC32 tells
    ops.append_index(parts["c"], ix, backend="cpu", scheduler="sync", progress=False)
    with pytest.raises(artifacts.ArtifactError, match="postings.parquet"):
        BM25Index.load(ix)
