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
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from cutext import pipelines
from cutext.pipelines import bm25_index_ops as ops
from cutext.stages.engines import index_commits as commits
from cutext.stages.engines import index_ids, segment_merge
from cutext.stages.engines.bm25_index import BM25Index
from cutext.stages.runtime.artifacts import ArtifactError
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
    real = commits.write_commit_terms

    def race(*a, **k):  # an append commits while the delete / compact is writing
        monkeypatch.setattr(commits, "write_commit_terms", real)
        ops.append_index(parts["b"], ix, backend="cpu", scheduler="sync", progress=False)
        return real(*a, **k)

    monkeypatch.setattr(commits, "write_commit_terms", race)
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


# ----------------------------------------------------------------------------- the vocabulary a commit keeps

def _cacm_parts(tmp_path, data_dir, k=4) -> list:
    """CACM cut in ``k`` JSON-lines files of about equal size, in order."""
    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()
    cuts = [len(lines) * i // k for i in range(k + 1)]
    out = []
    for i in range(k):
        out.append(tmp_path / f"part{i}.jsonl")
        out[-1].write_text("\n".join(lines[cuts[i]:cuts[i + 1]]) + "\n", encoding="utf-8")
    return out


def _recorded_append_stats(monkeypatch) -> list:
    """Whether each commit took the append's fast path (``_append_stats`` returned its statistics)."""
    taken = []
    real = commits._append_stats

    def record(*a, **k):
        out = real(*a, **k)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(commits, "_append_stats", record)
    return taken


def _commit_state(ix) -> dict:
    meta = json.loads((ix / "index.json").read_text())
    return {k: meta.get(k) for k in ("N", "avgdl", "counts", "segments", "deletes", "generation", "next_segment")}


def _assert_terms_are_the_live_merge(ix):
    """terms.arrow (listed and sealed in index.json) holds merge_terms of the commit's live segments."""
    from cutext.stages.engines import segments

    meta = json.loads((ix / "index.json").read_text())
    folders, deletes = commits.commit_segments(ix, meta)
    mt = segments.merge_terms(segments.segment_heads(folders, deletes, ids=False))
    if len(folders) == 1 and not len(deletes[0]):  # one segment: its own vocabulary, one copy on disk
        assert commits.TERMS_FILE not in meta["files"] and not (ix / commits.TERMS_FILE).exists()
        kept = segments.read_segment(folders[0], postings=False)
        kept = kept.terms.cast(pa.large_string()), kept.df
    else:
        assert commits.TERMS_FILE in meta["files"]
        kept = commits.read_commit_terms(ix, meta)
    assert kept is not None
    terms, df = kept
    assert terms.type == pa.large_string() and terms.equals(mt.vocab)
    np.testing.assert_array_equal(df, mt.df[1:])
    assert (df > 0).all() and meta["counts"]["n_terms"] == len(terms) and meta["N"] == mt.n_docs
    assert meta["avgdl"] == mt.avgdl  # bit for bit: what a load recomputes


def _living_sequence(ix, parts, ids) -> list:
    """A build, an append, a deletion, an append, a compaction and an append, each commit's state."""
    states = []
    pipelines.run("bm25", parts[0], out=ix, **KW)
    states.append(_commit_state(ix))
    ops.append_index(parts[1], ix, backend="cpu", scheduler="sync", progress=False)
    states.append(_commit_state(ix))
    ops.delete_documents(ix, ids)
    states.append(_commit_state(ix))
    ops.append_index(parts[2], ix, backend="cpu", scheduler="sync", progress=False)
    states.append(_commit_state(ix))
    ops.compact_index(ix)
    states.append(_commit_state(ix))
    ops.append_index(parts[3], ix, backend="cpu", scheduler="sync", progress=False)
    states.append(_commit_state(ix))
    return states


def test_an_appends_commit_from_the_kept_vocabulary_equals_a_recount_of_every_segment(tmp_path, data_dir,
                                                                                     monkeypatch):
    """Build, append, delete (of old and new documents), append, compact, append on CACM: every commit's N,
    avgdl and counts (all keys) equal those of the full recount (the fast path switched off), its terms.arrow
    is merge_terms of its live segments, and the index loads verified and searches as the recounted one."""
    parts = _cacm_parts(tmp_path, data_dir)
    first = [json.loads(x)["id"] for x in parts[0].read_text().splitlines()]
    second = [json.loads(x)["id"] for x in parts[1].read_text().splitlines()]
    ids = [str(x) for x in first[3::50] + second[7::40]]
    taken = _recorded_append_stats(monkeypatch)
    fast = _living_sequence(tmp_path / "fast", parts, ids)
    # the later appends and the compaction (a merge changes no statistic: the kept ones stand); not the first
    # append (a build of one segment keeps no terms.arrow: the segment's vocabulary is the commit's) nor the delete
    assert taken == [False, False, True, True, True]
    _assert_terms_are_the_live_merge(tmp_path / "fast")

    taken.clear()
    monkeypatch.setattr(commits, "read_commit_terms", lambda *a, **k: None)  # every commit recounts
    full = _living_sequence(tmp_path / "full", parts, ids)
    assert taken == [False] * 5
    assert fast == full
    assert full[-1]["counts"]["n_docs"] == sum(len(p.read_text().splitlines()) for p in parts) - len(ids)
    monkeypatch.undo()
    for name in ("fast", "full"):
        _assert_terms_are_the_live_merge(tmp_path / name)
    assert (tmp_path / "fast" / "terms.arrow").read_bytes() == (tmp_path / "full" / "terms.arrow").read_bytes()
    qs = dict(list(cacm_topics(data_dir).items())[:10])
    pd.testing.assert_frame_equal(BM25Index.load(tmp_path / "fast").search(qs, k=10),
                                  BM25Index.load(tmp_path / "full").search(qs, k=10))


def test_every_commit_of_a_bm25f_index_keeps_its_vocabulary_and_an_append_counts_as_a_recount(tmp_path, data_dir,
                                                                                             monkeypatch):
    """BM25F (SciFact title + text): the build and each append keep terms.arrow; the fast path's manifest is
    the full recount's (the per-field sums are not in the manifest: a load recounts them)."""
    import gzip

    with gzip.open(data_dir / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        lines = [x for x in fh.read().splitlines() if x.strip()]
    n = len(lines)
    spec = dict(text_column=["title", "text"], id_column="_id", field_weights={"title": 2.0},
                field_b={"title": 0.4, "text": 0.8})
    files = []
    for i, (a, e) in enumerate([(0, n // 3), (n // 3, 2 * n // 3), (2 * n // 3, n)]):
        files.append(tmp_path / f"s{i}.jsonl")
        files[-1].write_text("\n".join(lines[a:e]) + "\n", encoding="utf-8")
    states = {}
    taken = _recorded_append_stats(monkeypatch)
    for name in ("fast", "full"):
        if name == "full":
            monkeypatch.setattr(commits, "read_commit_terms", lambda *a, **k: None)
        ix = tmp_path / name
        pipelines.run("bm25", files[0], out=ix, **KW, **spec)
        if name == "fast":
            _assert_terms_are_the_live_merge(ix)
        for f in files[1:]:
            pipelines.run("bm25", f, out=ix, append=True, id_column="_id", backend="cpu", scheduler="sync",
                          progress=False)
        states[name] = _commit_state(ix)
    assert taken == [False, True, False, False]  # the first append recounts its one-segment build (no terms.arrow)
    assert states["fast"] == states["full"]
    monkeypatch.undo()
    _assert_terms_are_the_live_merge(tmp_path / "fast")
    a, b = BM25Index.load(tmp_path / "fast"), BM25Index.load(tmp_path / "full")  # verified
    assert a.n_docs == b.n_docs == n
    np.testing.assert_array_equal(a.df, b.df)
    np.testing.assert_array_equal(a.w0, b.w0)


@pytest.mark.parametrize("old", ["missing", "damaged"])
def test_an_index_without_a_usable_vocabulary_file_appends_by_a_recount_and_keeps_one_after(tmp_path, parts, old,
                                                                                            monkeypatch):
    """An index written before commits kept terms.arrow (the file removed and the manifest sealed again), or
    one whose terms.arrow was damaged on disk (same size: only its CRC32 tells), takes the full recount; the
    new commit keeps a correct terms.arrow and the next append takes the fast path."""
    from cutext.stages.runtime import checksums

    ix = pipelines.run("bm25", parts["a"], out=tmp_path / "ix", **KW).path
    ops.append_index(parts["b"], ix, backend="cpu", scheduler="sync", progress=False, merge_policy="none")
    f = ix / commits.TERMS_FILE  # two segments: the commit keeps its vocabulary
    if old == "missing":
        f.unlink()
        checksums.seal(ix, "index.json")  # as an index of an earlier version: nothing unlisted, nothing missing
        BM25Index.load(ix)  # verified
        assert commits.TERMS_FILE not in json.loads((ix / "index.json").read_text())["files"]
    else:
        raw = bytearray(f.read_bytes())
        raw[len(raw) // 2] ^= 0x01
        f.write_bytes(bytes(raw))
    assert commits.read_commit_terms(ix, json.loads((ix / "index.json").read_text())) is None
    taken = _recorded_append_stats(monkeypatch)
    r = ops.append_index(parts["c"], ix, backend="cpu", scheduler="sync", progress=False, merge_policy="none")
    n = sum(len(parts[k].read_text().splitlines()) for k in "abc")
    assert r.counts["n_docs"] == n and taken == [False]
    _assert_terms_are_the_live_merge(ix)
    BM25Index.load(ix)  # verified: the new commit's terms.arrow is sealed in its manifest
    ops.append_index(parts["a"], ix, backend="cpu", scheduler="sync", progress=False, on_duplicate="keep")
    assert taken == [False, True]
    _assert_terms_are_the_live_merge(ix)
    n += len(parts["a"].read_text().splitlines())
    assert BM25Index.load(ix).n_docs == n == json.loads((ix / "index.json").read_text())["N"]


def test_an_appends_commit_reads_only_the_new_segments(tmp_path, parts, monkeypatch):
    """With the vocabulary kept, the commit of an append reads the terms and documents of its new segments
    only (segment_heads / read_segment never see an old segment), even with deletions in the old ones."""
    from cutext.stages.engines import segments

    ix = pipelines.run("bm25", parts["a"], out=tmp_path / "ix", **KW).path
    ops.append_index(parts["b"], ix, backend="cpu", scheduler="sync", progress=False)
    ops.delete_documents(ix, list(BM25Index.load(ix).source_ids[::97]))
    old = set(json.loads((ix / "index.json").read_text())["segments"])
    heads, reads = [], []
    real_heads, real_read = commits.segment_heads, segments.read_segment
    monkeypatch.setattr(commits, "segment_heads",
                        lambda folders, *a, **k: heads.extend(folders) or real_heads(folders, *a, **k))
    monkeypatch.setattr(segments, "read_segment", lambda folder, *a, **k: reads.append(folder) or
                        real_read(folder, *a, **k))
    ops.append_index(parts["c"], ix, backend="cpu", scheduler="sync", progress=False)
    monkeypatch.undo()
    new = set(json.loads((ix / "index.json").read_text())["segments"]) - old
    assert new and heads and {p.name for p in heads} == new
    assert reads and {Path(p).name for p in reads} <= new
    _assert_terms_are_the_live_merge(ix)
    BM25Index.load(ix)


def test_a_deletions_commit_reads_ids_and_the_deleted_documents_postings_only(tmp_path, parts, monkeypatch):
    """A deletion reads the segments' ids, and of a segment with new deletions its doc column, terms and
    lengths (segments.deleted_postings): no whole segment (read_segment), and the statistics it commits are
    those of the live documents."""
    from cutext.stages.engines import segments

    ix = pipelines.run("bm25", parts["a"], out=tmp_path / "ix", **KW).path
    ops.append_index(parts["b"], ix, backend="cpu", scheduler="sync", progress=False)
    ids = list(BM25Index.load(ix).source_ids[::7])

    def whole(*a, **k):
        raise AssertionError("a deletion read a whole segment")

    for mod in (segments, commits, index_ids):
        monkeypatch.setattr(mod, "read_segment", whole, raising=False)
    counts = ops.delete_documents(ix, ids).counts
    monkeypatch.undo()
    _assert_terms_are_the_live_merge(ix)
    fresh = BM25Index.load(ix)
    assert counts["n_docs"] == fresh.n_docs and counts["n_terms"] == len(fresh.vocab)
    assert not set(ids) & set(fresh.source_ids)


# ----------------------------------------------------------------------------- third probe

@pytest.fixture()
def small(tmp_path, data_dir):
    """Two JSON-lines files of 150 CACM documents each."""
    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()
    out = {}
    for name, ls in {"a": lines[:150], "b": lines[150:300]}.items():
        out[name] = tmp_path / f"{name}.jsonl"
        out[name].write_text("\n".join(ls) + "\n", encoding="utf-8")
    return out


def _forge(ix: Path, **changes) -> bytes:
    """Edit index.json and seal it again (its checksum and the files' recomputed), as a forger would."""
    from cutext.stages.runtime.output import _seal_all

    meta = json.loads((ix / "index.json").read_text())
    for k, v in changes.items():
        if "." in k:
            outer, inner = k.split(".")
            meta[outer][inner] = v
        else:
            meta[k] = v
    (ix / "index.json").write_text(json.dumps(meta))
    _seal_all(ix, "index.json")
    return (ix / "index.json").read_bytes()


@pytest.mark.parametrize("changes, match", [
    ({"next_segment": 0}, r"field 'next_segment' = 0 must be greater than the number of every listed segment "
                          r"\(seg-00001\)"),
    ({"generation": -1}, r"field 'generation' = -1 is outside \[0, None\]"),
    ({"generation": "1"}, r"field 'generation' must be an integer, got '1'"),
    ({"segments": ["seg-00000", "seg-00000"]}, r"field 'segments' lists \['seg-00000'\] more than once"),
    ({"counts.n_docs": 7}, r"field 'counts.n_docs' = 7 is not N = 300"),
    ({"counts.n_tokens": -5}, r"counts: field 'n_tokens' = -5 is outside"),
    ({"store_text": "yes"}, r"field 'store_text' must be true or false, got 'yes'"),
    ({"keep_columns": [1]}, r"field 'keep_columns' must be a list of distinct column names"),
    ({"index_format": True}, r"index_format True is not one this cutext reads"),
    ({"n_workers": 0}, r"field 'n_workers' = 0 is outside"),
    ({"timings.read": float("inf")}, r"timings: field 'read' must be a finite number"),
    ({"deletes": {"seg-00000": "../x.npy"}}, r"'deletes' must map segments of the index to files"),
    ({"version": 3}, r"field 'version' must be a string"),
])
def test_every_field_of_index_json_is_checked_when_it_is_read(tmp_path, small, changes, match):
    """A forged field that a load never needs (next_segment, generation) is refused like the others: by a load
    and by every writer, before anything is written."""
    ix = pipelines.run("bm25", small["a"], out=tmp_path / "ix", **KW).path
    ops.append_index(small["b"], ix, backend="cpu", scheduler="sync", progress=False)
    raw = _forge(ix, **changes)
    for read in (lambda: BM25Index.load(ix), lambda: BM25Index.load(ix, verify=False), lambda: ops.compact_index(ix),
                 lambda: ops.delete_documents(ix, ["CACM-0001"])):
        with pytest.raises(ArtifactError, match=match) as e:
            read()
        assert str(e.value).startswith(str(ix / "index.json"))
    assert (ix / "index.json").read_bytes() == raw and _siblings(ix) == []


def test_a_valid_index_loads_after_every_kind_of_commit(tmp_path, small):
    ix = pipelines.run("bm25", small["a"], out=tmp_path / "ix", **KW, store_text=True).path
    ops.append_index(small["b"], ix, backend="cpu", scheduler="sync", progress=False)
    ids = list(BM25Index.load(ix).source_ids[:2])
    ops.delete_documents(ix, ids)
    assert BM25Index.load(ix).n_docs == 298
    ops.compact_index(ix)
    meta = json.loads((ix / "index.json").read_text())
    assert meta["segments"] == ["seg-00002"] and meta["next_segment"] == 3 and meta["generation"] == 3
    assert BM25Index.load(ix).n_docs == 298
    one = pipelines.run("bm25", small["a"], out=tmp_path / "f1", **{**KW, "index_format": 1}).path
    ops.convert_index(one)
    assert BM25Index.load(one).n_docs == 150


@pytest.mark.parametrize("loser", ["append", "compact", "delete"])
def test_a_writer_whose_segments_a_compaction_replaced_is_busy_not_a_missing_file(
        tmp_path, small, monkeypatch, loser):
    """The loser of a race with a compaction reads a segment folder the compaction merged away: that is the
    other writer's commit, raised as OutputBusyError naming the index, and nothing is written."""
    ix = pipelines.run("bm25", small["a"], out=tmp_path / "ix", **KW).path
    ops.append_index(small["b"], ix, backend="cpu", scheduler="sync", progress=False)
    ids = list(BM25Index.load(ix).source_ids[:2])
    # the loser's first read of a segment: a compaction's through the run merge, a deletion's of the ids
    step = {"append": "write_commit", "compact": "read_segment", "delete": "segment_ids"}[loser]
    where = {"append": commits, "compact": segment_merge, "delete": index_ids}[loser]
    real, won = getattr(where, step), {}

    def race(*a, **k):  # a compaction commits first
        if not won:
            won["counts"] = None
            won["counts"] = ops.compact_index(ix).counts
        return real(*a, **k)

    monkeypatch.setattr(where, step, race)
    with pytest.raises(OutputBusyError, match=rf"^{ix} was (changed|committed) by another writer.*run it again") as e:
        if loser == "append":
            ops.append_index(small["a"], ix, backend="cpu", scheduler="sync", progress=False, on_duplicate="keep")
        elif loser == "compact":
            ops.compact_index(ix)
        else:
            ops.delete_documents(ix, ids)
    if loser != "compact":  # a compaction reads its own commit's links: the swap finds the other commit
        assert isinstance(e.value.__cause__, FileNotFoundError) and "seg-0000" in str(e.value.__cause__)
    meta = json.loads((ix / "index.json").read_text())
    assert meta["segments"] == ["seg-00002"] and won["counts"]["compacted_segments"] == 2
    assert BM25Index.load(ix).n_docs == 300 and _siblings(ix) == []
