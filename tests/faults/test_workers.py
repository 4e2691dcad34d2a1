"""Faults on a process-based LocalCluster: a worker killed while a bm25 run is in flight.

The kill is injected through dask's own plugin API: a WorkerPlugin that ends its worker process
(``os._exit``) when a task whose key names the tokenize stage starts executing.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import dask
import pytest

from cutext import pipelines

from helpers import assert_same_index, read_index

distributed = pytest.importorskip("distributed")


class KillWorker(distributed.WorkerPlugin):
    """End the worker when a task whose key holds one of the ``|``-separated ``pattern`` parts starts; ``once``: only
    the first time (a marker file)."""

    def __init__(self, marker: str, pattern: str, once: bool = True):
        self.marker, self.pattern, self.once = marker, pattern, once

    def transition(self, key, start, finish, **kwargs):
        if finish != "executing" or not any(p in str(key) for p in self.pattern.split("|")):
            return
        if self.once:
            try:  # created by one worker only: two workers starting such a task at once must not both die
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return
        else:
            Path(self.marker).touch()
        os._exit(1)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, data_dir) -> str:
    """All of CACM in two JSON Lines files (four partitions with blocksize 1 MiB)."""
    d = tmp_path_factory.mktemp("corpus")
    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()
    (d / "a.jsonl").write_text("\n".join(lines[:1600]) + "\n", encoding="utf-8")
    (d / "b.jsonl").write_text("\n".join(lines[1600:]) + "\n", encoding="utf-8")
    return str(d / "*.jsonl")


KW = dict(backend="cpu", progress=False, blocksize=1 << 20)
# the tasks a kill waits for: a tokenize task of the stages, or a worker's share of a file input
# (stages/engines/index_writer.py::_build_share: each worker builds the segments of whole files)
STAGE_TASKS = "tokenize|build_share"


def _cluster(**cfg):
    with dask.config.set(cfg):
        return distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)


@pytest.mark.slow
def test_worker_killed_mid_run_gives_an_identical_index(corpus, tmp_path):
    ref = pipelines.run("bm25", corpus, out=tmp_path / "ref", scheduler="sync", **KW)
    with _cluster() as lc, distributed.Client(lc) as c:
        c.register_plugin(KillWorker(str(tmp_path / "killed"), STAGE_TASKS))
        r = pipelines.run("bm25", corpus, out=tmp_path / "idx", client=c, **KW)
    assert (tmp_path / "killed").exists(), "the fault was not injected"
    assert r.scheduler == "client"
    assert_same_index(read_index(ref.path), read_index(r.path))


@pytest.mark.slow
def test_worker_killed_holding_a_slice_of_one_file_gives_an_identical_index(data_dir, tmp_path):
    """One file in one piece: every worker reads it and keeps a slice (spread_source); the worker that dies
    takes its slice along, and another worker reads that slice again instead of the run waiting forever
    for the dead worker's address."""
    src = str(data_dir / "cacm" / "cacm.json")
    kw = dict(KW, blocksize=64 << 20)
    ref = pipelines.run("bm25", src, out=tmp_path / "ref", scheduler="sync", **kw)
    with _cluster() as lc, distributed.Client(lc) as c:
        c.register_plugin(KillWorker(str(tmp_path / "killed"), "tokenize_partition_segment"))
        r = pipelines.run("bm25", src, out=tmp_path / "idx", client=c, **kw)
    assert (tmp_path / "killed").exists(), "the fault was not injected"
    assert r.counts["partitions"] == 2  # the one piece was cut into a slice per worker
    assert_same_index(read_index(ref.path), read_index(r.path))


@pytest.mark.slow
def test_workers_that_keep_dying_fail_clearly_and_keep_the_old_output(corpus, tmp_path):
    out = tmp_path / "idx"
    pipelines.run("bm25", corpus, out=out, scheduler="sync", **KW)
    before = (out / "index.json").read_bytes()
    with _cluster(**{"distributed.scheduler.allowed-failures": 0}) as lc, distributed.Client(lc) as c:
        c.register_plugin(KillWorker(str(tmp_path / "killed"), STAGE_TASKS, once=False))
        with pytest.raises(Exception, match="worker") as exc:
            pipelines.run("bm25", corpus, out=out, client=c, k1=0.5, **KW)
    assert "died" in str(exc.value) or "KilledWorker" in type(exc.value).__name__
    assert (out / "index.json").read_bytes() == before
    assert json.loads(before)["k1"] == 1.2
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".idx.")]


class KillEveryWorker(distributed.WorkerPlugin):
    """End a worker when it starts a task whose key holds ``pattern``, while one of ``n`` kill slots (marker
    files, each created by one worker only) is free: the first ``n`` such tasks kill their workers."""

    def __init__(self, folder: str, pattern: str, n: int):
        self.folder, self.pattern, self.n = folder, pattern, n

    def transition(self, key, start, finish, **kwargs):
        if finish != "executing" or self.pattern not in str(key):
            return
        for i in range(self.n):
            try:
                os.close(os.open(os.path.join(self.folder, f"kill-{i}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                continue
            os._exit(1)


@pytest.mark.slow
def test_every_worker_killed_while_holding_the_slices_the_run_still_finishes(data_dir, tmp_path):
    """Both workers die holding their slices of one file: their restarts have other addresses, and the tasks
    placed on the dead ones as a preference run on the new ones (dask would leave a task that became
    unrunnable while no worker was up waiting for the departed addresses: a run that never ends)."""
    import threading

    src = str(data_dir / "cacm" / "cacm.json")
    kw = dict(KW, blocksize=64 << 20)
    ref = pipelines.run("bm25", src, out=tmp_path / "ref", scheduler="sync", **kw)
    (tmp_path / "kills").mkdir()
    out = {}
    with _cluster() as lc, distributed.Client(lc) as c:
        c.register_plugin(KillEveryWorker(str(tmp_path / "kills"), "tokenize_partition_segment", 2))

        def build():
            out["r"] = pipelines.run("bm25", src, out=tmp_path / "idx", client=c, **kw)
        t = threading.Thread(target=build, daemon=True)
        t.start()
        t.join(120)
        assert not t.is_alive(), "the run did not finish in 120 s after its workers died"
    assert len(list((tmp_path / "kills").iterdir())) == 2, "not every worker was killed"
    assert_same_index(read_index(ref.path), read_index(out["r"].path))
