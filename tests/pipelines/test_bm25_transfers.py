"""What crosses between the workers of a bm25 build on a Client: the bytes in dask's transfer logs.

Proxies of a scale-out build that need no second GPU: on two workers (a ``LocalCluster`` of processes on
the CPU; two processes sharing GPU 0) the bytes one worker fetched from the other (its incoming transfer
log) and served to the other (its outgoing log, requests from a worker: it also holds the replication of
``scatter(broadcast=True)``, which the incoming log does not record) stay under 1 % of the input bytes,
and the index equals an in-process build.  What the caller gathers (results, statistics) is no transfer
between workers and is not counted.

The inputs are those a worker's share cannot split (``pipelines/bm25.py::_shares``): 20 Newsgroups as it
ships, one tar.gz archive (a single piece, spread over the workers), and as a dask frame of four
partitions with an id column.  Both now move nothing between workers.  Before, the archive moved
21.4 MB (incoming logs; 27.1 MB served) between the workers, 140 % of its 15.2 MB: the other worker's half
of the posts (18.4 MB), the vocabulary's merge tree (1.5 MB), the numbered document tables (1.4 MB), and,
in the outgoing logs only, the vocabulary (2.5 MB) and its lookup frame (3.2 MB) replicated to the other
worker; the frame moved 3.2 MB (8.9 % of its 35.9 MB of text; 8.9 MB served, 25 %), 1.1 MB of it the id
check's shuffle.  Those were the best runs: where the scheduler ran a partition's tasks on the other
worker than its read, whole partitions moved too (52 MB and 38 MB in one run of these tests).
"""
from __future__ import annotations

import json

import pytest

from cutext import pipelines

from helpers import assert_same_index, read_index

distributed = pytest.importorskip("distributed")

KW = dict(backend="cpu", progress=False, index_format=2)


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc, \
            distributed.Client(lc) as c:
        yield c


def _logs(client) -> dict:
    return client.run(lambda dask_worker: {"in": list(dask_worker.transfer_incoming_log),
                                           "out": list(dask_worker.transfer_outgoing_log)})


def _transfers(client, run) -> tuple:
    """``run()`` on ``client``: its result and, for this run only, the bytes the workers fetched from each
    other (incoming logs, by key), served to each other (outgoing logs, requests from a worker) and served to
    the caller (outgoing logs, other requests)."""
    workers = set(client.scheduler_info()["workers"])
    before = {w: (len(v["in"]), len(v["out"])) for w, v in _logs(client).items()}
    result = run()
    keys, to_workers, to_caller = {}, 0, 0
    for w, v in _logs(client).items():
        n_in, n_out = before.get(w, (0, 0))
        for e in v["in"][n_in:]:
            for k, n in e["keys"].items():
                keys[k] = keys.get(k, 0) + int(n)
        for e in v["out"][n_out:]:
            if e.get("who") in workers:
                to_workers += int(e["total"])
            else:
                to_caller += int(e["total"])
    return result, keys, to_workers, to_caller


def _check_transfers(keys: dict, to_workers: int, to_caller: int, nbytes: int):
    assert sum(keys.values()) < 0.01 * nbytes, keys
    assert to_workers < 0.01 * nbytes, to_workers
    assert to_caller > 0  # the logs are live: the partitions' results reached the caller through them


def _same_build(got, ref):
    assert_same_index(read_index(got.path), read_index(ref.path), rtol=0)
    a, b = (json.loads((r.path / "index.json").read_text())["counts"] for r in (got, ref))
    for k in ("n_docs", "n_terms", "n_postings", "n_tokens", "n_empty_docs", "replaced"):
        assert a[k] == b[k], k


@pytest.mark.slow
def test_an_archive_on_two_workers_moves_under_one_percent_of_its_bytes(client, news20, tmp_path):
    got, *moved = _transfers(client, lambda: pipelines.run("bm25", news20, out=tmp_path / "ix", client=client, **KW))
    nbytes = got.counts["input_bytes"]
    assert nbytes == news20.stat().st_size and got.counts["partitions"] == 2  # one piece, spread to the workers
    _check_transfers(*moved, nbytes)
    ref = pipelines.run("bm25", news20, out=tmp_path / "ref", scheduler="sync", **KW)
    _same_build(got, ref)


@pytest.mark.slow
def test_a_frame_on_two_workers_moves_under_one_percent_of_its_bytes(client, news20, tmp_path):
    import dask.dataframe as dd

    from cutext.pipelines import datasets

    posts = datasets.load_20newsgroups(news20)[["source_id", "text"]]
    frame = dd.from_pandas(posts, npartitions=4, sort=False)
    nbytes = int(posts["text"].str.len().sum())  # characters: at most the UTF-8 bytes
    got, *moved = _transfers(client, lambda: pipelines.run("bm25", frame, out=tmp_path / "ix", client=client,
                                                           id_column="source_id", **KW))
    assert got.counts["partitions"] == 4
    _check_transfers(*moved, nbytes)
    ref = pipelines.run("bm25", frame, out=tmp_path / "ref", scheduler="sync", id_column="source_id", **KW)
    _same_build(got, ref)


@pytest.mark.gpu
@pytest.mark.slow
def test_an_archive_on_two_workers_of_one_gpu_moves_under_one_percent_of_its_bytes(news20, tmp_path):
    """The same on the GPU backend: two worker processes sharing GPU 0 (dask-cuda refuses a GPU twice, so
    distributed's LocalCluster, as tests/gpu/test_bm25.py does); the index equals the CPU's in-process one."""
    from cutext.stages.runtime.compute import rmm_cupy

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc, \
            distributed.Client(lc) as c:
        c.run(rmm_cupy)
        got, *moved = _transfers(c, lambda: pipelines.run("bm25", news20, out=tmp_path / "ix", client=c,
                                                          **dict(KW, backend="gpu")))
    assert got.backend == "gpu" and got.counts["partitions"] == 2
    _check_transfers(*moved, got.counts["input_bytes"])
    ref = pipelines.run("bm25", news20, out=tmp_path / "ref", scheduler="sync", **KW)
    assert_same_index(read_index(got.path), read_index(ref.path))
