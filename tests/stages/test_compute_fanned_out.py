"""``compute_fanned_out``: the first GPU fan-out of a kind in a process runs its first task alone (so that
CuPy compiles its kernels once, not once a thread at a time); later fan-outs, and the CPU's, run every
task at once."""
from __future__ import annotations

import threading
import time

import dask
import pytest

from cutext.stages.runtime import compute
from cutext.stages.runtime.compute import ComputeInfo, compute_fanned_out

N = 4


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.setattr(compute, "_FANNED_OUT", set())


def _run(backend: str, kind: str, check):
    info = ComputeInfo(backend, "sync", 1)
    tasks = [dask.delayed(check)(i, pure=False) for i in range(N)]
    with dask.config.set(scheduler="threads", num_workers=N):
        return compute_fanned_out(tasks, info, kind, N)


def _together(barrier):
    def check(i):
        barrier.wait(timeout=20)  # BrokenBarrierError unless all N run at once
        return i
    return check


def test_the_first_gpu_fan_out_runs_its_first_task_alone_then_the_rest():
    first_done = threading.Event()
    seen = []

    def check(i):
        if i == 0:
            time.sleep(0.3)  # the others, were they started beside it, would look before it is done
            first_done.set()
        else:
            seen.append(first_done.is_set())
        return i

    assert _run("gpu", "segments", check) == list(range(N))
    assert seen == [True] * (N - 1)
    # the same kind again: every task at once (a barrier of N passes only if they all run together)
    assert _run("gpu", "segments", _together(threading.Barrier(N))) == list(range(N))


def test_the_cpu_and_a_warm_kind_run_every_task_at_once():
    assert _run("cpu", "segments", _together(threading.Barrier(N))) == list(range(N))
    compute._FANNED_OUT.add("files")
    assert _run("gpu", "files", _together(threading.Barrier(N))) == list(range(N))


def test_a_failed_first_task_leaves_the_kind_cold():
    def fail(i):
        raise ValueError("bad partition")

    with pytest.raises(ValueError, match="bad partition"):
        _run("gpu", "segments", fail)
    assert "segments" not in compute._FANNED_OUT
