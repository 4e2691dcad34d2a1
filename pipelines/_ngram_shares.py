"""The ngram pipeline's shares on a Client (:mod:`cutext.pipelines.ngram`): the corpus cut into contiguous
shares of about equal bytes, the row counts that place each share published and awaited through dask, the
pinned tasks gathered, and the corpus totals of a Client run."""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from cutext.stages.runtime.progress import task_released


def _piece_weight(piece, fs) -> int:
    """Bytes of a piece (its byte range, else its files), to cut the corpus into shares of about equal work;
    1 for a frame's partition (no files).  A size the file system cannot give only skews the cut."""
    if fs is None:
        return 1
    if piece.end is not None:
        return max(0, int(piece.end) - int(piece.start))
    try:
        return max(0, sum(int(fs.size(p) or 0) for p in piece.paths) - int(piece.start))
    except (OSError, TypeError, ValueError):
        return 1


def _contiguous_shares(weights, n: int) -> list:
    """``min(n, N)`` contiguous, non-empty ranges ``(a, b)`` of the items ``0..N-1``, in order, of about equal
    weight: each cut is the item boundary nearest to its share ``k / n`` of the total weight (+1 an item, so
    that empty items count), moved where needed so that every range keeps at least one item."""
    N = len(weights)
    n = max(1, min(n, N))
    ends = np.concatenate([[0.0], np.cumsum(np.asarray(weights, np.float64) + 1.0)])
    cuts = [0]
    for k in range(1, n):
        j = int(np.argmin(np.abs(ends - ends[-1] * k / n)))
        cuts.append(min(max(j, cuts[-1] + 1), N - (n - k)))
    cuts.append(N)
    return list(itertools.pairwise(cuts))


def _slices_per_piece(weights, n: int) -> list:
    """Into how many row slices each of fewer pieces than ``n`` workers is cut: ``n`` slices in all, at least
    one a piece, each further one to the piece of the most bytes a slice."""
    m = [1] * len(weights)
    for _ in range(n - len(weights)):
        i = max(range(len(weights)), key=lambda j: (weights[j] + 1) / m[j])
        m[i] += 1
    return m


def _byte_range_piece(piece) -> bool:
    """Whether ``piece`` is a byte range of one uncompressed ``lines`` / ``jsonl`` file (as the plan cuts
    them at ``blocksize``): cut anywhere, its reader moves each cut to a line end."""
    return (piece.format in ("lines", "jsonl") and piece.compression is None and piece.archive is None
            and len(piece.paths) == 1)


# the key of a published row count that failed (a row count's keys are file indexes)
_COUNT_FAILED = "failed"
# seconds between two looks, while a share waits for the row counts before it, at whether its run still wants it
_WAIT_POLL = 0.5


def _publish_rows(name: str, rows: dict, client=None) -> None:
    """Publish a row count (or a failure, ``{_COUNT_FAILED: why}``) as the dask ``Variable`` ``name``, then set
    the ``Event`` ``name`` (:class:`_Offsets`)."""
    from distributed import Event, Variable

    Variable(name, client=client).set(rows)
    Event(name, client=client).set()


def _summed_rows(before) -> tuple[int, dict]:
    """``(first doc_id, {file_index: rows before})`` from the row counts of the shares before one."""
    doc0, rows0 = 0, {}
    for rows in before:
        for f, n in rows.items():
            rows0[f] = rows0.get(f, 0) + n
            doc0 += n
    return doc0, rows0


@dataclass(frozen=True)
class _Offsets:
    """Where a share starts, from the row counts of the shares before it, published by their
    :func:`_share_rows` tasks under ``names`` (a dask ``Variable`` and ``Event`` each), so that the share's
    task does not wait for them to start: it scores while they count.  :meth:`ready` asks without waiting;
    :meth:`get` waits with the task's thread seceded from the worker's pool, so a count queued on the same
    worker runs meanwhile.  (Futures of the counts cannot be handed to the task without the scheduler
    holding the task until they finish.)"""

    names: tuple

    def ready(self) -> bool:
        from distributed import Event

        return all(Event(n).is_set() for n in self.names)

    def get(self) -> tuple[int, dict]:
        """Wait for the counts and sum them (:func:`_summed_rows`).

        Raises
        ------
        RuntimeError
            A count failed (the message gives its error), or the run stopped while this share waited (its
            task was released: a count's worker left, or the caller failed or left).
        """
        from distributed import Event, Variable, rejoin, secede
        from distributed.utils import TimeoutError as DaskTimeout  # asyncio's, not the builtin, on Python 3.10

        def stopped():
            return RuntimeError("the run stopped while this share of the corpus waited for the row counts of the "
                                "shares before it; nothing of it is kept")

        got = []
        seceded = not self.ready()
        if seceded:
            secede()
        try:
            for n in self.names:
                while not Event(n).wait(timeout=_WAIT_POLL):
                    if task_released():
                        raise stopped()
                while True:
                    try:
                        got.append(Variable(n).get(timeout=_WAIT_POLL))
                        break
                    except (TimeoutError, DaskTimeout):
                        if task_released():
                            raise stopped() from None
        finally:
            if seceded:
                rejoin()
        failed = [rows[_COUNT_FAILED] for rows in got if _COUNT_FAILED in rows]
        if failed:
            raise RuntimeError(f"the row count of a share of the corpus before this one failed ({failed[0]}); "
                               "this share is not written")
        return _summed_rows(got)

    def stop(self, client) -> None:
        """Wake the shares that wait for a count that will not come (the run failed): each count not yet
        published is published as failed."""
        from distributed import Event

        for n in self.names:
            if not Event(n, client=client).is_set():
                _publish_rows(n, {_COUNT_FAILED: "the run stopped before it was counted"}, client=client)

    def release(self, client) -> None:
        """Drop the published counts from ``client``'s scheduler (the caller, once the run is over)."""
        from distributed import Event, Variable

        for n in self.names:
            Variable(n, client=client).delete()
            Event(n, client=client).clear()


def _gather_pinned(client, futures, workers, on_done=None) -> list:
    """The results of tasks pinned to ``workers``, in order; ``on_done(k)`` when task ``k`` has finished.

    A task pinned to a worker that left the cluster would wait for it for ever: that is an error here.

    Raises
    ------
    RuntimeError
        One of ``workers`` left before its task finished.
    Exception
        The first error of a task.
    """
    from distributed import wait

    index = {f.key: k for k, f in enumerate(futures)}
    pending = list(futures)
    while pending:
        try:
            done, pending = wait(pending, timeout=2.0, return_when="FIRST_COMPLETED")
        except TimeoutError:
            gone = sorted(set(workers) - set(client.scheduler_info().get("workers", {})))
            if gone:
                raise RuntimeError(f"worker {gone[0]} left the cluster during the run; the share of the corpus "
                                   "pinned to it cannot finish (run again on the workers present)") from None
            continue
        pending = list(pending)
        for f in done:
            if f.status == "error":
                f.result()  # raises the task's error
            if on_done is not None:
                on_done(index[f.key])
    return client.gather(futures)


@dataclass
class _Totals:
    """The corpus totals of a Client run (those :class:`_ScoresWriter` keeps in one process)."""

    n_docs: int
    totals: dict
    sum_log10: float
    empty: int


def _check_counted(counted_rows, results, firsts) -> None:
    """Each share's rows as scored against those counted for it before it was scored (``firsts[s]``: the
    share's first piece, named in the error).

    Raises
    ------
    RuntimeError
        A share held another number of rows than was counted for it: the input changed while it was read.
    """
    for s, rows in enumerate(counted_rows):
        want = {}
        for r in rows:
            for f, n in r.items():
                want[f] = want.get(f, 0) + n
        got = results[s]["rows"]
        if rows and {f: n for f, n in want.items() if n} != {f: n for f, n in got.items() if n}:
            raise RuntimeError(f"the share of the corpus from {firsts[s].paths[0]} held {sum(got.values())} "
                               f"documents, {sum(want.values())} were counted before it was scored: the input "
                               "changed while it was read")


def _client_totals(results, folder, wrote) -> tuple[_Totals, dict]:
    """The corpus totals of the shares' results (in corpus order) and the slowest worker's ``read``, ``score``
    and ``write`` seconds; ``wrote(path, checksum)`` records each part written."""
    sum_log10 = 0.0
    for r in results:  # item by item in corpus order, as the writer of one process adds them
        if r["part"] is not None:
            wrote(folder / r["part"], r["checksum"])
        for x in r["log10"]:
            sum_log10 += x
    totals = _Totals(sum(r["n_docs"] for r in results),
                     {k: sum(r["totals"][k] for r in results) for k in results[0]["totals"]}, sum_log10,
                     sum(r["empty"] for r in results))
    return totals, {name: max(r["timings"][name] for r in results) for name in ("read", "score", "write")}
