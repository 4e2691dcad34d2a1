"""A worker's whole-share task takes its share of the host's cores in pyarrow's pool
(distributed's nanny starts workers with OMP_NUM_THREADS=1, which pyarrow honours)."""
from __future__ import annotations

import pyarrow as pa
import pytest

from cutext.stages.runtime.compute import host_cpus, host_share, share_threads


class _Client:
    def __init__(self, hosts):
        self.hosts = hosts

    def scheduler_info(self):
        return {"workers": {w: {"host": h} for w, h in self.hosts.items()}}


def test_host_share_counts_the_workers_of_each_host():
    c = _Client({"tcp://a:1": "a", "tcp://a:2": "a", "tcp://b:1": "b", "tcp://a:3": "a"})
    assert host_share(c, ["tcp://a:1", "tcp://a:2", "tcp://b:1"]) == {"tcp://a:1": 2, "tcp://a:2": 2, "tcp://b:1": 1}


@pytest.mark.parametrize("sharing", [1, 2, 10_000])
def test_share_threads_sets_the_pool_and_gives_it_back(sharing):
    before = pa.cpu_count()
    pa.set_cpu_count(1)  # as in a dask worker
    try:
        with share_threads(sharing) as n:
            assert n == pa.cpu_count() == max(1, host_cpus() // sharing)
        assert pa.cpu_count() == 1
    finally:
        pa.set_cpu_count(before)


def test_a_dask_worker_starts_with_one_arrow_thread_and_a_share_task_gets_the_cores():
    distributed = pytest.importorskip("distributed")

    def probe():
        with share_threads(1) as n:
            inside = pa.cpu_count()
        return pa.cpu_count(), inside, n

    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        [(outside, inside, n)] = c.run(probe).values()
    assert outside == 1 or host_cpus() == 1  # what the share task has to undo
    assert inside == n == host_cpus()


@pytest.mark.slow  # two LocalClusters of processes
def test_gpu_worker_config_starts_workers_without_the_nannys_environment_or_profiler(monkeypatch):
    """A worker started under gpu_worker_config() has the caller's environment (not the nanny's
    OMP_NUM_THREADS=1 / MALLOC_TRIM_THRESHOLD_) and no sampling profiler, and the nanny leaves the
    caller's own environment alone."""
    distributed = pytest.importorskip("distributed")
    import os

    import dask

    from cutext.stages.runtime.compute import gpu_worker_config

    names = ("OMP_NUM_THREADS", "MALLOC_TRIM_THRESHOLD_", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
    for k in names:  # set, then removed: the fixture restores each afterwards (the nanny sets them here too)
        monkeypatch.setenv(k, "0")
        monkeypatch.delenv(k)

    def probe(dask_worker):
        return {k: os.environ.get(k) for k in names}, bool(dask_worker.profile_recent.get("count", 0)) or \
            dask.config.get("distributed.worker.profile.enabled")

    with dask.config.set(gpu_worker_config()):
        cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None)
    with cluster, distributed.Client(cluster) as c:
        [(env, profiling)] = c.run(probe).values()
    assert env == dict.fromkeys(names)
    assert not profiling
    assert {k: os.environ.get(k) for k in names} == dict.fromkeys(names)
    # the default: the nanny sets them, in the worker and in this process
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cl, \
            distributed.Client(cl) as c:
        [(env, _)] = c.run(probe).values()
    assert env["OMP_NUM_THREADS"] == "1" and env["MALLOC_TRIM_THRESHOLD_"] is not None
