"""A segmented bm25 index built on a dask Client from a file input: every worker builds the segments of
its share of the files on its own (``stages/engines/index_writer.py::_build_share``), the caller only lists them.
The index equals an in-process build (documents, ids, search), no task of the stages runs on the
scheduler, and nothing moves between workers."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cutext import pipelines
from cutext.stages.engines import index_commits as commits
from cutext.stages.engines.bm25_index import BM25Index

from helpers import cacm_topics

distributed = pytest.importorskip("distributed")
pytestmark = pytest.mark.slow  # Client runs: not in the fast tier

KW = dict(backend="cpu", progress=False, index_format=2, stopwords="lucene", stemmer="porter")


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc, \
            distributed.Client(lc) as c:
        yield c


def _cacm_files(folder, data_dir, n, as_lines):
    """CACM cut into ``n`` files in order: JSON Lines (the corpus's ids), or its texts one a line (ids
    ``<file>:<row>``, numbered across a file's pieces)."""
    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()
    folder.mkdir()
    step = -(-len(lines) // n)
    for i in range(n):
        part = lines[i * step:(i + 1) * step]
        if as_lines:
            part = [" ".join(json.loads(x)["contents"].split()) for x in part]
        (folder / f"part-{i}.{'txt' if as_lines else 'jsonl'}").write_text("\n".join(part) + "\n", encoding="utf-8")
    return str(folder)


def _moved(client) -> int:
    """Bytes the workers received from other workers so far (dask's transfer logs)."""
    logs = client.run(lambda dask_worker: list(dask_worker.transfer_incoming_log))
    return sum(int(e.get("total", 0)) for log in logs.values() for e in log)


def _same(a: BM25Index, b: BM25Index, qs):
    assert a.n_docs == b.n_docs and list(a.source_ids) == list(b.source_ids)
    pd.testing.assert_frame_equal(a.search(qs, k=20), b.search(qs, k=20))


@pytest.mark.parametrize("as_lines", [False, True])
def test_workers_build_their_shares_and_the_index_equals_one_process(client, tmp_path, data_dir, as_lines):
    src = _cacm_files(tmp_path / "src", data_dir, 5, as_lines)
    fmt = {"format": "lines"} if as_lines else {}
    # 64 KiB pieces: a file of several pieces is one unit of a share (its rows numbered across them)
    ref = pipelines.run("bm25", src, out=tmp_path / "ref", scheduler="sync", blocksize=64 << 10, **fmt, **KW)
    client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.task_prefixes.clear())
    moved = _moved(client)
    got = pipelines.run("bm25", src, out=tmp_path / "ix", client=client, blocksize=64 << 10, **fmt, **KW)
    prefixes = client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
    assert "build_share" in prefixes and not any("tokenize" in p or "count" in p for p in prefixes), prefixes
    assert _moved(client) == moved  # no postings, no statistics between workers: only summaries to the caller
    meta = json.loads((got.path / "index.json").read_text())
    assert len(meta["segments"]) == ref.counts["partitions"] > 5 and meta["scheduler"] == "client"
    assert {k: got.counts[k] for k in ("n_docs", "n_terms", "n_postings", "n_tokens")} == \
        {k: ref.counts[k] for k in ("n_docs", "n_terms", "n_postings", "n_tokens")}
    assert got.timings["workers"] > 0 and got.timings["tokenize"] > 0
    qs = cacm_topics(data_dir)
    _same(BM25Index.load(got.path, backend="cpu"), BM25Index.load(ref.path, backend="cpu"), qs)


def test_an_append_on_a_client_writes_its_segments_on_the_workers(client, tmp_path, data_dir):
    _cacm_files(tmp_path / "src", data_dir, 6, False)
    files = sorted((tmp_path / "src").iterdir())
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for f in files[:3]:
        f.rename(tmp_path / "a" / f.name)
    for f in files[3:]:
        f.rename(tmp_path / "b" / f.name)
    ref = pipelines.run("bm25", [str(tmp_path / "a"), str(tmp_path / "b")], out=tmp_path / "ref", scheduler="sync",
                        **KW)
    ix = pipelines.run("bm25", str(tmp_path / "a"), out=tmp_path / "ix", client=client, **KW).path
    pipelines.run("bm25", str(tmp_path / "b"), out=ix, client=client, append=True, progress=False)
    names = json.loads((ix / "index.json").read_text())["segments"]
    assert len(names) == len(set(names)) == 6
    _same(BM25Index.load(ix, backend="cpu"), BM25Index.load(ref.path, backend="cpu"), cacm_topics(data_dir))


def test_fewer_files_than_workers_spread_the_partitions(client, tmp_path, data_dir):
    """One file on two workers: its partitions are spread (a share cannot split a file whose rows are
    numbered), and each is tokenized, counted and written where it is read, with its own vocabulary
    (``_build_parts_on_workers``); the index is still the in-process one."""
    src = _cacm_files(tmp_path / "src", data_dir, 1, True)
    ref = pipelines.run("bm25", src, out=tmp_path / "ref", scheduler="sync", format="lines", blocksize=64 << 10, **KW)
    client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.task_prefixes.clear())
    moved = _moved(client)
    got = pipelines.run("bm25", src, out=tmp_path / "ix", client=client, format="lines", blocksize=64 << 10, **KW)
    prefixes = client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
    assert "build_share" not in prefixes
    assert "tokenize_partition_segment" in prefixes
    assert _moved(client) == moved  # no slice, vocabulary or statistic between workers
    _same(BM25Index.load(got.path, backend="cpu"), BM25Index.load(ref.path, backend="cpu"), cacm_topics(data_dir))


def _assert_kept_terms_are_the_merge(ix):
    """The commit's terms.arrow (sealed in index.json) holds merge_terms of its segments: terms and df."""
    from cutext.stages.engines import segments

    meta = json.loads((ix / "index.json").read_text())
    assert commits.TERMS_FILE in meta["files"]
    kept = commits.read_commit_terms(ix, meta)
    assert kept is not None
    folders, deletes = commits.commit_segments(ix, meta)
    mt = segments.merge_terms(segments.segment_heads(folders, deletes, ids=False))
    terms, df = kept
    assert terms.equals(mt.vocab) and meta["counts"]["n_terms"] == len(terms)
    np.testing.assert_array_equal(df, mt.df[1:])


def _assert_an_append_reads_only_its_segments(ix, src, monkeypatch):
    """An append after the build takes the fast path: its commit reads the new segments only."""
    old = set(json.loads((ix / "index.json").read_text())["segments"])
    heads, stats = [], []
    real_heads, real_stats = commits.segment_heads, commits._append_stats
    monkeypatch.setattr(commits, "segment_heads",
                        lambda folders, *a, **k: heads.extend(folders) or real_heads(folders, *a, **k))
    monkeypatch.setattr(commits, "_append_stats", lambda *a, **k: stats.append(real_stats(*a, **k)) or stats[-1])
    pipelines.run("bm25", src, out=ix, append=True, backend="cpu", scheduler="sync", progress=False,
                  merge_policy="none")  # the segments it adds, as they are
    monkeypatch.undo()
    new = set(json.loads((ix / "index.json").read_text())["segments"]) - old
    assert len(stats) == 1 and stats[0] is not None
    assert new and heads and {Path(p).name for p in heads} == new
    _assert_kept_terms_are_the_merge(ix)


def _cacm_lines(data_dir) -> list:
    return (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()


def test_a_client_build_of_shares_keeps_the_commit_vocabulary(client, tmp_path, data_dir, monkeypatch):
    """A file input split into the workers' shares (``_build_on_workers``): the shares' vocabularies and df,
    merged on the caller, are the commit's terms.arrow, so the next append reads only its segments."""
    lines = _cacm_lines(data_dir)
    src = tmp_path / "src"
    src.mkdir()
    for i in range(4):
        (src / f"part-{i}.jsonl").write_text("\n".join(lines[i * 600:(i + 1) * 600]) + "\n", encoding="utf-8")
    more = tmp_path / "more.jsonl"
    more.write_text("\n".join(lines[2400:]) + "\n", encoding="utf-8")
    client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.task_prefixes.clear())
    ref = pipelines.run("bm25", str(src), out=tmp_path / "ref", scheduler="sync", blocksize=64 << 10, **KW)
    got = pipelines.run("bm25", str(src), out=tmp_path / "ix", client=client, blocksize=64 << 10, **KW)
    prefixes = client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
    assert "build_share" in prefixes
    assert got.counts["n_terms"] == ref.counts["n_terms"]
    _assert_kept_terms_are_the_merge(got.path)
    _assert_an_append_reads_only_its_segments(got.path, more, monkeypatch)


@pytest.mark.parametrize("frame", [False, True])
def test_a_client_build_of_partitions_keeps_the_commit_vocabulary(client, tmp_path, data_dir, monkeypatch, frame):
    """One file of lines, or a dask frame (``_build_parts_on_workers``: a segment a partition): the
    partitions' vocabularies and df, merged on the caller, are the commit's terms.arrow, so the next append
    reads only its segments."""
    import dask.dataframe as dd

    lines = _cacm_lines(data_dir)
    more = tmp_path / "more.jsonl"
    more.write_text("\n".join(lines[2400:]) + "\n", encoding="utf-8")
    if frame:
        rows = [json.loads(x) for x in lines[:2400]]
        posts = pd.DataFrame({"source_id": [r["id"] for r in rows], "text": [r["contents"] for r in rows]})
        src, kw = dd.from_pandas(posts, npartitions=3, sort=False), {"id_column": "source_id"}
    else:
        src = tmp_path / "src.txt"
        src.write_text("\n".join(" ".join(json.loads(x)["contents"].split()) for x in lines[:2400]) + "\n",
                       encoding="utf-8")
        src, kw = str(src), {"format": "lines", "blocksize": 64 << 10}
    client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.task_prefixes.clear())
    ref = pipelines.run("bm25", src, out=tmp_path / "ref", scheduler="sync", **kw, **KW)
    got = pipelines.run("bm25", src, out=tmp_path / "ix", client=client, **kw, **KW)
    prefixes = client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
    assert "build_share" not in prefixes and "tokenize_partition_segment" in prefixes
    assert len(json.loads((got.path / "index.json").read_text())["segments"]) > 1
    assert got.counts["n_terms"] == ref.counts["n_terms"]
    _assert_kept_terms_are_the_merge(got.path)
    _assert_an_append_reads_only_its_segments(got.path, more, monkeypatch)


def test_workers_of_one_process_leave_the_callers_scheduler_as_it_was(tmp_path, data_dir):
    """Two workers in the caller's process (LocalCluster(processes=False)) build their shares at once: each
    share's in-process build sets dask's (process-wide) scheduler, and without turns the last to finish
    restored another's, leaving the caller on the synchronous scheduler from the third build on."""
    import dask

    src = _cacm_files(tmp_path / "src", data_dir, 4, False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as lc, \
            distributed.Client(lc) as c:
        before = dask.config.get("scheduler", None)
        for i in range(4):
            r = pipelines.run("bm25", src, out=tmp_path / f"ix{i}", client=c, **KW)
            assert dask.config.get("scheduler", None) == before, f"build {i}"
            assert r.n_workers == 2 and r.scheduler != "sync", f"build {i} ran on {r.scheduler}"


def _stopped(c, timeout: float = 20.0) -> bool:
    """Whether every worker of ``c`` is executing no task within ``timeout`` seconds (cancelled ones included)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(c.run(lambda dask_worker: len(dask_worker.state.executing)).values()):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("append", [False, True])
def test_a_share_that_fails_stops_the_others_and_leaves_nothing_behind(tmp_path, data_dir, monkeypatch, append):
    """One worker's share fails while the other is still building: the caller gets the error at once, naming
    the failed share's files; the other share stops at its next stage instead of writing its segments into the
    run's temporary directory after the caller removed it (which left a ``.ix.tmp-*`` directory behind); an
    append keeps the commit before it."""
    import contextlib
    import time

    import cutext.stages.engines.index_writer as bm25

    src = _cacm_files(tmp_path / "src", data_dir, 4, False)
    front_end = bm25._front_end

    def failing(run, s, *args, **kwargs):
        if any("part-2" in str(p) for piece in s.pieces for p in piece.paths):
            raise RuntimeError("a share failed")
        time.sleep(2)  # the other share is still at work when the first one fails
        return front_end(run, s, *args, **kwargs)

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as lc, \
            distributed.Client(lc) as c:
        out = tmp_path / "ix"
        if append:
            pipelines.run("bm25", str(data_dir / "cacm" / "cacm.json"), out=out, scheduler="sync", **KW)
        before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} if append else None
        # the shares of workers in one process take turns; in their own processes they run at once, as here
        monkeypatch.setattr(bm25, "_SHARE_LOCK", contextlib.nullcontext())
        monkeypatch.setattr(bm25, "_front_end", failing)
        with pytest.raises(RuntimeError, match="a share failed") as err:
            pipelines.run("bm25", src, out=out, client=c, append=append, **({} if append else KW))
        assert any("part-2.jsonl" in n for n in getattr(err.value, "__notes__", [])), err.value
        assert _stopped(c)
        time.sleep(0.5)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["src"] + (["ix"] if append else []))
    if append:
        assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
