"""Outputs on a cluster: ``out=`` is a path every worker sees, or a run fails before any work.

* a ``file://`` URL is the local path it names; a URL of another file system (``s3://``, ``memory://``)
  is refused before any work, by every pipeline, because the commit is a rename of a directory;
* the workers that write into the output (a bm25 index's segments and spill files) are checked first:
  one that does not see the run's temporary directory fails the run with its address and the path
  named, and nothing is left behind.  The worker that does not see it is a real ``dask worker``
  process in its own mount namespace (``unshare``) with an empty tmpfs mounted over the output's
  parent: the view of a host that does not mount the caller's file system.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cutext import pipelines
from cutext.stages.runtime.output import OutputNotSharedError, check_workers_see

from helpers import assert_same_index, read_index

distributed = pytest.importorskip("distributed")

KW = {"backend": "cpu", "progress": False}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, data_dir) -> Path:
    """The first 400 CACM abstracts as JSON Lines, in two files (two partitions)."""
    d = tmp_path_factory.mktemp("corpus")
    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()[:400]
    (d / "a.jsonl").write_text("\n".join(lines[:200]) + "\n", encoding="utf-8")
    (d / "b.jsonl").write_text("\n".join(lines[200:]) + "\n", encoding="utf-8")
    return d


@pytest.fixture(scope="module")
def client():
    """Two worker processes on this host (they see the caller's file system)."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as lc, distributed.Client(lc) as c:
        yield c


# ----------------------------------------------------------------------------- out= as a URL

@pytest.mark.slow
def test_a_file_url_out_is_the_path_it_names(corpus, tmp_path, client):
    url = "file://" + str(tmp_path / "by-url")
    by_url = pipelines.run("bm25", str(corpus), out=url, client=client, **KW)
    by_path = pipelines.run("bm25", str(corpus), out=tmp_path / "by-path", client=client, **KW)
    assert by_url.path == tmp_path / "by-url"
    assert by_url.scheduler == "client" and by_url.counts == by_path.counts
    assert_same_index(read_index(by_path.path), read_index(tmp_path / "by-url"))
    # an append through the URL finds the index it names
    more = pipelines.run("bm25", str(corpus / "a.jsonl"), out=url, append=True, client=client, on_duplicate="keep",
                         **KW)
    assert more.path == tmp_path / "by-url" and more.counts["n_docs"] == 600
    assert sorted(os.listdir(tmp_path)) == ["by-path", "by-url"]


@pytest.mark.parametrize("url", ["s3://bucket/idx", "memory://idx", "gs://b/i", "file://localhost/tmp/idx"])
@pytest.mark.parametrize("name, params", [
    ("bm25", {}), ("bm25", {"append": True}), ("lda", {"K": 2}), ("cluster", {}), ("ngram", {"model": "lm.arpa"})])
def test_another_file_system_is_refused_before_any_work(tmp_path, monkeypatch, url, name, params):
    monkeypatch.chdir(tmp_path)
    # the corpus does not exist: a run that read anything would raise FileNotFoundError instead
    with pytest.raises(ValueError, match="out=") as exc:
        pipelines.run(name, str(tmp_path / "missing.jsonl"), out=url, **params, **KW)
    msg = str(exc.value)
    assert repr(url) in msg
    if url.startswith("file://"):  # fsspec would read it as the relative path localhost/tmp/idx
        assert "absolute path" in msg and "'localhost/tmp/idx'" in msg
    else:
        assert "atomic rename" in msg and "every worker mounts" in msg
    assert os.listdir(tmp_path) == []  # nothing made in the working directory (no "s3:" folder)


# ----------------------------------------------------------------------------- workers that do not see it

@pytest.mark.slow
def test_the_check_names_each_worker_that_does_not_see_the_directory(tmp_path, client):
    seen = tmp_path / "seen"
    seen.mkdir()
    check_workers_see(client, seen)  # every worker sees it and writes a probe there
    assert os.listdir(seen) == []  # the probes are removed
    gone = tmp_path / "gone"
    gone.mkdir()
    gone.rmdir()  # made by the caller, gone by the time the workers look
    with pytest.raises(OutputNotSharedError) as exc:
        check_workers_see(client, gone)
    msg = str(exc.value)
    for w in client.scheduler_info()["workers"]:
        assert f"worker {w}: cannot see the output directory {gone}" in msg
    assert "every worker mounts" in msg


def _mount_namespaces_work(tmp_path: Path) -> bool:
    """Whether this user can start a process in its own user and mount namespace and mount a tmpfs there."""
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
        return False
    probe = tmp_path / "ns-probe"
    probe.mkdir()
    try:
        done = subprocess.run(["unshare", "-Urm", "sh", "-c", 'mount -t tmpfs none "$1"', "sh", str(probe)],
                              capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        probe.rmdir()
    return done.returncode == 0


@pytest.fixture()
def hidden_worker(tmp_path):
    """``start(address, hide)``: a ``dask worker`` process joining ``address`` that sees an empty tmpfs at
    ``hide`` (its own mount namespace); stopped at teardown."""
    if not _mount_namespaces_work(tmp_path):
        pytest.skip("no unprivileged user and mount namespaces here (unshare -Urm)")
    procs = []

    def start(address: str, hide: Path) -> subprocess.Popen:
        script = 'mount -t tmpfs none "$1" && exec "$2" -m distributed.cli.dask_worker "$3" ' \
                 '--name hidden --nthreads 1 --no-nanny --no-dashboard'
        procs.append(subprocess.Popen(["unshare", "-Urm", "sh", "-c", script, "sh", str(hide), sys.executable,
                                       address], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        return procs[-1]

    yield start
    for p in procs:
        p.terminate()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@pytest.mark.slow
def test_a_worker_that_does_not_see_the_output_fails_the_run_and_leaves_nothing(corpus, tmp_path, hidden_worker):
    out = tmp_path / "idx"
    pipelines.run("bm25", str(corpus), out=out, scheduler="sync", **KW)
    before = (out / "index.json").read_bytes()
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as lc, distributed.Client(lc) as c:
        hidden_worker(lc.scheduler_address, tmp_path)
        c.wait_for_workers(2, timeout=120)
        workers = c.scheduler_info()["workers"]
        hidden = next(w for w, info in workers.items() if info.get("name") == "hidden")
        other = next(w for w in workers if w != hidden)
        with pytest.raises(OutputNotSharedError) as exc:
            pipelines.run("bm25", str(corpus), out=out, client=c, k1=0.5, **KW)
    msg = str(exc.value)
    assert f"worker {hidden}: cannot see the output directory {tmp_path}{os.sep}.idx.tmp-" in msg
    assert other not in msg
    assert "every worker mounts" in msg
    # the earlier output untouched, no temporary, lock or probe left beside it
    assert (out / "index.json").read_bytes() == before
    assert json.loads(before)["k1"] == 1.2
    assert sorted(os.listdir(tmp_path)) == ["idx"]
