"""A dask scheduler plugin of cutext's runs on a Client (its own module: distributed is imported only here,
when a run uses a Client, not by ``import cutext``)."""
from __future__ import annotations

from distributed.diagnostics.plugin import SchedulerPlugin

__all__ = ["LostPlacements"]


class LostPlacements(SchedulerPlugin):
    """A dask scheduler plugin: a worker that leaves is taken out of the worker restrictions of the tasks
    placed on it as a preference (``allow_other_workers``); a task left with none may run anywhere.

    dask's scheduler honours such a preference by falling back to any worker when it decides a task's
    worker, but a task that became unrunnable while no worker was up (every worker lost at once) is
    re-examined when a worker joins by its restrictions alone, which name only departed workers: it would
    wait forever (seen on a LocalCluster whose two workers were killed together mid-build)."""

    name = "cutext-lost-placements"

    def remove_worker(self, scheduler=None, worker=None, **kwargs):
        for ts in scheduler.tasks.values():
            if ts.loose_restrictions and ts.worker_restrictions and worker in ts.worker_restrictions:
                ts.worker_restrictions.discard(worker)
