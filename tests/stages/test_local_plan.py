"""Where a run without a client computes (``local_plan``), how many threads an in-process CPU run takes
(``cpu_threads``), and what the threaded context sets up for a worker count."""
from __future__ import annotations

import dask
import pyarrow as pa
import pytest

from cutext.stages.runtime import compute
from cutext.stages.runtime.compute import SMALL_INPUT_BYTES, compute_context, cpu_threads, host_cpus, local_plan

SMALL, LARGE = SMALL_INPUT_BYTES - 1, SMALL_INPUT_BYTES


@pytest.mark.parametrize("backend, scheduler, nbytes, n_workers, worker_threads, plan", [
    # without worker_threads n_workers sizes a local cluster, whatever the input
    ("cpu", "auto", SMALL, None, False, ("threads", None)),
    ("cpu", "auto", LARGE, None, False, ("cluster", None)),
    ("cpu", "auto", SMALL, 2, False, ("cluster", 2)),
    ("gpu", "auto", LARGE, None, True, ("sync", None)),
    ("gpu", "auto", SMALL, 2, True, ("cluster", 2)),
    # with it, the CPU's workers below 256 MiB are threads of this process
    ("cpu", "auto", SMALL, 1, True, ("threads", 1)),
    ("cpu", "auto", SMALL, 2, True, ("threads", 2)),
    ("cpu", "auto", LARGE, 2, True, ("cluster", 2)),
    ("cpu", "threads", LARGE, 3, True, ("threads", 3)),
    ("cpu", "cluster", SMALL, 2, True, ("cluster", 2)),
    ("cpu", "sync", SMALL, None, True, ("sync", None)),
])
def test_local_plan(backend, scheduler, nbytes, n_workers, worker_threads, plan):
    assert local_plan(backend, scheduler, nbytes, n_workers, worker_threads) == plan


def test_cpu_threads_are_the_workers_asked_for_else_the_usable_cores(monkeypatch):
    import dask.system

    assert cpu_threads(3) == 3
    monkeypatch.setattr(dask.system, "cpu_count", lambda: 5)  # affinity and cgroup quota, as dask reads them
    assert host_cpus() == cpu_threads() == 5
    monkeypatch.setattr(dask.system, "cpu_count", lambda: 0)
    assert cpu_threads() == 1


def test_worker_threads_size_dasks_and_pyarrows_pools_and_give_them_back():
    before = pa.cpu_count()
    with compute_context("cpu", nbytes=1000, n_workers=3, worker_threads=True) as info:
        assert (info.scheduler, info.n_workers, info.client) == ("threads", 3, None)
        assert dask.config.get("scheduler") is dask.threaded.get and dask.config.get("num_workers") == 3
        assert pa.cpu_count() == 3
    assert pa.cpu_count() == before
    with compute_context("cpu", nbytes=1000) as info:  # no count asked: pyarrow's pool left alone
        assert (info.scheduler, info.n_workers) == ("threads", host_cpus()) and pa.cpu_count() == before


@pytest.mark.parametrize("backend, scheduler", [("cpu", "sync"), ("gpu", "threads")])
def test_worker_threads_still_refuse_a_count_that_sizes_nothing(backend, scheduler, monkeypatch):
    monkeypatch.setattr(compute, "_context", lambda *a: pytest.fail("no context may be made"))
    with pytest.raises(ValueError, match="n_workers=2 sizes a local cluster"):
        with compute_context(backend, scheduler=scheduler, n_workers=2, worker_threads=True):
            pass
    with pytest.raises(ValueError, match="n_workers=2 sizes a local cluster"):  # and without worker_threads
        with compute_context("cpu", scheduler="threads", n_workers=2):
            pass
