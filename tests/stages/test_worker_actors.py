"""WorkerActors (cutext.stages.runtime.compute): dask actors called on their workers, not through the scheduler.

On a 2-worker process LocalCluster: the calls of a default client reach the workers straight (the scheduler's
``proxy`` handler, counted on the scheduler, is never called), give what the actors' methods return (plain and
coroutine methods, one argument tuple each, one actor alone) and raise an actor's error; a client made with
``direct_to_workers=False``, or a worker the client cannot reach, is called through the scheduler with the
same results.
"""
from __future__ import annotations

import dask
import pytest

from cutext.stages.runtime.compute import WorkerActors

distributed = pytest.importorskip("distributed")


def _counter_class():
    """An actor class defined in a function, so the workers receive it by value."""

    class Counter:
        def __init__(self, start: int):
            self.n = start

        def add(self, x: int) -> int:
            self.n += x
            return self.n

        async def twice(self, x: int) -> int:
            return 2 * x

        def fail(self):
            raise KeyError("no such term")

    return Counter


def _count_proxied(dask_scheduler):
    """Wrap the scheduler's proxy handler (the path of a non-direct actor call) with a counter, set to 0."""
    dask_scheduler.cutext_proxied = 0
    if getattr(dask_scheduler, "cutext_counting", False):  # wrapped by an earlier test of the module
        return
    dask_scheduler.cutext_counting = True
    orig = dask_scheduler.handlers["proxy"]

    async def counted(*args, **kwargs):
        dask_scheduler.cutext_proxied += 1
        return await orig(*args, **kwargs)

    dask_scheduler.handlers["proxy"] = counted


def _proxied(dask_scheduler):
    return dask_scheduler.cutext_proxied


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as c:
        yield c


def _actors(client, addresses=None):
    workers = sorted(client.scheduler_info()["workers"])
    futs = [client.submit(_counter_class(), 10 * (i + 1), workers=[w], allow_other_workers=False, actor=True,
                          pure=False) for i, w in enumerate(workers)]
    return WorkerActors(client, futs, addresses or workers)


def _check_calls(wa):
    assert wa.call("add", 5) == [15, 25]
    assert wa.call("add", per_actor=[(1,), (2,)]) == [16, 27]
    assert wa.call("twice", 4) == [8, 8]  # a coroutine method, run on the worker's event loop
    assert wa.call_one(1, "add", 3) == 30
    wait = wa.start("add", 0)  # sent now, waited for later
    assert wait() == [16, 30]
    with pytest.raises(KeyError, match="no such term"):
        wa.call("fail")


def test_direct_calls_skip_the_scheduler(cluster):
    with distributed.Client(cluster) as client:
        client.run_on_scheduler(_count_proxied)
        wa = _actors(client)
        assert wa.direct == [True, True] and len(wa) == 2
        _check_calls(wa)
        assert client.run_on_scheduler(_proxied) == 0
        wa.release()


def test_direct_to_workers_false_goes_through_the_scheduler(cluster):
    with distributed.Client(cluster, direct_to_workers=False) as client:
        client.run_on_scheduler(_count_proxied)
        wa = _actors(client)
        assert wa.direct == [False, False]
        _check_calls(wa)
        assert client.run_on_scheduler(_proxied) == 11  # every call of both actors
        wa.release()


def test_unreachable_worker_goes_through_the_scheduler(cluster):
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}), distributed.Client(cluster) as client:
        client.run_on_scheduler(_count_proxied)
        workers = sorted(client.scheduler_info()["workers"])
        # the second worker as the client would see it from outside the cluster's network: nothing listens there
        wa = _actors(client, [workers[0], "tcp://127.0.0.1:9"])
        assert wa.direct == [True, False]
        _check_calls(wa)
        assert client.run_on_scheduler(_proxied) == 6  # the second actor's calls only
        wa.release()
