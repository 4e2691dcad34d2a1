"""Progress of long pipeline stages: a bar on a terminal, a few plain lines in a log.

Two pieces, both used by every pipeline:

* :func:`progress_bar` -- a tqdm-like object (``update``, ``set_postfix_str``, ``close``): a tqdm
  bar when standard error is a terminal, else a :class:`PlainProgress` that writes one plain line
  at most every :data:`PLAIN_INTERVAL` seconds and one when it closes (a run of an hour writes a few
  hundred lines at most, a run of seconds one line per stage; never a carriage return).
* :func:`pipeline_progress` / :func:`stage` -- progress *inside* a dask stage, partitions done /
  total.  ``pipeline_progress(name, enabled)`` marks a pipeline run; inside it, each
  ``with stage("tokenize")`` (the corpus front end wraps its four stages so) shows a bar fed by
  dask itself: a :class:`dask.callbacks.Callback` for the in-process schedulers (sync, threads),
  and ``distributed.as_completed`` over the persisted futures for a ``Client`` (:func:`wait`).
  Outside a pipeline run (or with ``progress=False``) both are no-ops.
* :func:`notice_compiles` -- one line, once a process, when numba starts compiling a cutext kernel
  that its cache does not hold (the first run on a machine, or the first after an upgrade);
  :func:`notice_gpu_compiles` -- one line at the first GPU run of a process when CuPy's kernel cache is empty.

What a stage counts: a dask graph holds several kinds of task (reading, tokenizing, ...); the bar
counts the most numerous kind among the tasks that run, which, after dask's fusion of blockwise
steps, is one task per partition: shown as "partitions" when their number is the stage's partition
count, else as "tasks" (a tree reduction, a shuffle).
"""
from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import sys
import threading
import time
from pathlib import Path

from dask.callbacks import Callback

__all__ = ["PLAIN_INTERVAL", "COMPILE_NOTICE", "PlainProgress", "progress_bar", "pipeline_progress", "stage", "wait",
           "gather", "stop_tasks", "task_released", "released_check", "STOP_TIMEOUT",
           "notice_compiles", "notice_gpu_compiles", "GPU_COMPILE_NOTICE", "cupy_cache_dir",
           "is_terminal"]

PLAIN_INTERVAL = 10.0  # seconds between two plain lines of one bar (plus one line when it closes)

_PIPELINE: contextvars.ContextVar = contextvars.ContextVar("cutext_pipeline_progress", default=None)
_STAGE: contextvars.ContextVar = contextvars.ContextVar("cutext_stage_progress", default=None)


def is_terminal(stream=None) -> bool:
    """Whether ``stream`` (default: standard error) is an interactive terminal."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _seconds(s: float) -> str:
    if s < 60:
        return f"{s:.1f} s"
    m, sec = divmod(int(round(s)), 60)
    return f"{m}:{sec:02d}" if m < 60 else f"{m // 60}:{m % 60:02d}:{sec:02d}"


class PlainProgress:
    """A progress counter that writes plain lines: at most one every ``interval`` seconds, and one at
    :meth:`close` (``desc: n/total unit (p %), elapsed[, postfix]``).

    Parameters
    ----------
    total : int, optional
    desc : str
    unit : str
    interval : float, optional
        Seconds between two lines (default :data:`PLAIN_INTERVAL`).
    stream : file, optional
        Default: standard error.
    clock : callable, optional
        Seconds, monotonic (default ``time.monotonic``; tests pass a fake clock).
    """

    def __init__(self, total=None, desc: str = "", unit: str = "it", interval=None, stream=None, clock=None):
        self.total = total
        self.desc = desc
        self.unit = unit
        self.interval = PLAIN_INTERVAL if interval is None else float(interval)
        self.stream = sys.stderr if stream is None else stream
        self.clock = clock or time.monotonic
        self.n = 0
        self.postfix = ""
        self.start = self.clock()
        self.last = self.start
        self.lines = 0
        self.closed = False
        self._said = None

    def _line(self) -> str:
        if self.total:
            frac = f" ({100.0 * self.n / self.total:.0f}%)"
            count = f"{self.n:,}/{self.total:,} {self.unit}"
        else:
            frac, count = "", f"{self.n:,} {self.unit}"
        post = f", {self.postfix}" if self.postfix else ""
        return f"{self.desc}: {count}{frac}, {_seconds(self.clock() - self.start)}{post}"

    def _emit(self):
        self.stream.write(self._line() + "\n")
        self.stream.flush()
        self.lines += 1
        self.last = self.clock()
        self._said = (self.n, self.total, self.postfix)

    def update(self, n: int = 1):
        self.n += n
        if self.clock() - self.last >= self.interval:
            self._emit()

    def set_postfix_str(self, s: str = "", refresh: bool = True):
        self.postfix = s

    def set_description(self, desc: str = "", refresh: bool = True):
        self.desc = desc

    def reset(self, total=None):
        self.n = 0
        self.total = total

    def refresh(self):
        pass

    def close(self):
        """Write the closing line (unless the last periodic line already said the same)."""
        if not self.closed:
            self.closed = True
            if self.lines == 0 or self._said != (self.n, self.total, self.postfix):
                self._emit()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def progress_bar(total=None, desc: str = "", unit: str = "it", stream=None, leave: bool = True):
    """A tqdm bar on a terminal, else a :class:`PlainProgress` (plain periodic lines).

    Parameters
    ----------
    total : int, optional
    desc, unit : str
    stream : file, optional
        Where it writes (default: standard error); a terminal gets a bar.
    leave : bool
        Keep the finished bar on screen as one line (tqdm); False clears it.
    """
    stream = sys.stderr if stream is None else stream
    if is_terminal(stream):
        from tqdm import tqdm

        # position=0: tqdm's automatic position counts every bar still open in the process (a bar a failed
        # run never closed, or one open around this one) and draws below them after newlines, which stay
        # on screen as blank or stale lines; on line 0 a finished bar leaves exactly its own last line
        return tqdm(total=total, desc=desc, unit=unit, file=stream, leave=leave, position=0, dynamic_ncols=True)
    return PlainProgress(total=total, desc=desc, unit=unit, stream=stream)


@contextlib.contextmanager
def pipeline_progress(name: str, enabled: bool = True):
    """Mark a pipeline run: inside it, :func:`stage` shows the progress of each stage as ``name stage``."""
    token = _PIPELINE.set(name if enabled else None)
    try:
        yield
    finally:
        _PIPELINE.reset(token)


def _key_kind(key) -> str:
    from dask.utils import key_split

    return key_split(key)


class _StageProgress:
    """The bar of one stage, fed by dask: a local-scheduler callback and :func:`wait` for a client."""

    def __init__(self, desc: str, partitions=None):
        self.desc = desc
        self.partitions = partitions
        self.bar = None
        self.t0 = time.monotonic()

    def start(self, total: int, unit: str):
        if self.bar is None:
            self.bar = progress_bar(total=total, desc=self.desc, unit=unit)
            if isinstance(self.bar, PlainProgress):
                self.bar.start = self.t0  # elapsed time of the stage, not of its first computation
        else:  # a second computation inside the stage: count it from zero
            self.bar.reset(total=total)
        self.bar.unit = unit

    def update(self, n: int = 1):
        if self.bar is not None:
            self.bar.update(n)

    def close(self):
        if self.bar is not None:
            self.bar.close()


class _DaskCallback(Callback):
    """dask local-scheduler callback: counts the finished tasks of the graph's most numerous kind."""

    def __init__(self, sp: _StageProgress):
        super().__init__()
        self.sp = sp
        self.kind = None
        # dask's callbacks are process-wide: a computation of another thread (a task of a threaded
        # worker of a Client in this process) is not this stage's
        self.thread = threading.get_ident()

    def _start_state(self, dsk, state):
        if threading.get_ident() != self.thread:
            return
        cache = state.get("cache", {})
        counts: dict = {}
        for key in dsk:
            if key not in cache:
                k = _key_kind(key)
                counts[k] = counts.get(k, 0) + 1
        if not counts:
            self.kind = None
            return
        self.kind, total = max(counts.items(), key=lambda kv: kv[1])
        self.sp.start(total, "partitions" if total == self.sp.partitions else "tasks")

    def _posttask(self, key, result, dsk, state, worker_id):
        if self.kind is not None and threading.get_ident() == self.thread and _key_kind(key) == self.kind:
            self.sp.update(1)


@contextlib.contextmanager
def stage(name: str, partitions=None):
    """Show the progress inside one stage of the current pipeline run (a no-op outside one).

    ``partitions``: the stage's partition count, if known; a graph whose most numerous kind of
    task has that many is counted in "partitions", any other in "tasks".

    Every dask computation run by the in-process schedulers inside the ``with`` block feeds the
    bar through a :class:`dask.callbacks.Callback`; with a ``distributed.Client`` the stage's
    persisted collections feed it through :func:`wait`.
    """
    pipeline = _PIPELINE.get()
    if pipeline is None or _STAGE.get() is not None:  # disabled, or nested inside a stage already shown
        yield
        return
    sp = _StageProgress(f"{pipeline} {name}", partitions)
    token = _STAGE.set(sp)
    try:
        with _DaskCallback(sp):
            yield
    finally:
        _STAGE.reset(token)
        sp.close()


def wait(collections) -> None:
    """Wait for persisted collections computing on a ``distributed.Client``, feeding the current
    stage's bar as their futures finish (``distributed.as_completed``).

    The first task that fails raises its error at once (``distributed.wait`` would wait for every other
    task first, the rest of a stage of a large corpus); before it is raised the other tasks are cancelled
    and their running ones waited for (:func:`stop_tasks`), so none writes into an output its caller then
    removes.

    Raises
    ------
    Exception
        The error of the first task that failed.
    """
    from distributed import futures_of

    futures = futures_of(collections)
    if not futures:
        return
    sp = _STAGE.get()
    if sp is not None:
        sp.start(len(futures), "partitions" if len(futures) == sp.partitions else "tasks")
    _until_done(futures, None if sp is None else (lambda i: sp.update(1)))
    cancelled = [f for f in futures if f.cancelled()]
    if cancelled:  # cancelled elsewhere (the client closed): raises as distributed.wait does
        cancelled[0].result()


def gather(futures, on_done=None) -> list:
    """``client.gather(futures)`` on their client, but the first task that fails raises its error at once,
    after the other tasks are stopped (:func:`wait`); ``on_done(i)`` as task ``i`` finishes well.

    Returns
    -------
    list
        The tasks' results, in the order of ``futures``.
    """
    futures = list(futures)
    if not futures:
        return []
    _until_done(futures, on_done)
    return futures[0].client.gather(futures)


def _until_done(futures: list, on_done) -> None:
    """Wait for ``futures`` as they finish, ``on_done(i)`` for each that finished well; the first error is
    raised at once, after :func:`stop_tasks` has stopped the others."""
    from distributed import as_completed

    where = {f.key: i for i, f in enumerate(futures)}
    try:
        for f in as_completed(futures):
            if f.status == "error":
                f.result()  # raises the task's error
            if on_done is not None:
                on_done(where[f.key])
    except BaseException:
        stop_tasks(futures)
        raise


STOP_TIMEOUT = 120.0  # seconds stop_tasks waits for the running tasks of a failed run to return


def stop_tasks(futures, timeout: float = STOP_TIMEOUT) -> bool:
    """Cancel ``futures`` (distributed Futures of one client) and wait until no worker still runs one of them.

    A cancelled task that is running goes on until its function returns (a thread cannot be stopped from
    outside, and the scheduler forgets it at once: ``client.processing()`` no longer lists it); a task that
    writes into a run's temporary output would write after the failed run removed it.  A long task can
    return early by asking :func:`task_released` between its steps.

    Returns
    -------
    bool
        True when none runs any more; False when ``timeout`` seconds passed first (or the client is closed).
    """
    futures = [f for f in futures if getattr(f, "client", None) is not None]
    if not futures:
        return True
    client = futures[0].client
    keys = [f.key for f in futures]
    deadline = time.monotonic() + timeout
    try:
        client.cancel(futures)
        while True:
            running = client.run(_running_tasks, keys, on_error="ignore")
            if not any(running.values()):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
    except Exception:  # noqa: BLE001 - the client or its scheduler is gone: nothing is left to wait for
        return False


def _running_tasks(keys, dask_worker=None) -> int:
    """Run on a worker (``client.run``): how many of the tasks ``keys`` it is still executing, cancelled ones
    included."""
    running = ("executing", "long-running")
    n = 0
    for k in keys:
        ts = dask_worker.state.tasks.get(k)
        if ts is not None and (ts.state in running
                               or (ts.state in ("cancelled", "resumed") and ts.previous in running)):
            n += 1
    return n


def task_released() -> bool:
    """Whether the dask task running in this thread is no longer wanted: its client cancelled or released
    it (:func:`stop_tasks`, or its caller left).  False outside a task of a distributed worker."""
    return released_check()()


def released_check():
    """:func:`task_released` of the dask task running in this thread, as a function that any thread may call
    (a task's own helper threads have no dask thread state); one that says False outside a task."""
    try:
        from distributed import get_worker
        from distributed.worker import thread_state

        worker, key = get_worker(), thread_state.key
    except (ImportError, ValueError, AttributeError):
        return lambda: False

    def released() -> bool:
        ts = worker.state.tasks.get(key)
        return ts is None or ts.state in ("cancelled", "released", "forgotten")

    return released


COMPILE_NOTICE = "compiling CPU kernels (first run; cached for later runs)"
_NOTICE = {"enabled": True, "said": False, "listener": None}
_NOTICE_LOCK = threading.Lock()


def _say(text: str, enabled: bool) -> None:
    """A notice: a line on standard error, or with ``enabled=False`` an INFO record of logger ``cutext``."""
    if enabled:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    else:
        logging.getLogger("cutext").info(text)


def _compile_listener():
    """A numba event listener that says :data:`COMPILE_NOTICE` at the first compile of a cutext function."""
    from numba.core.event import Listener

    class CompileNotice(Listener):
        def on_start(self, event):
            disp = (event.data or {}).get("dispatcher")
            module = getattr(getattr(disp, "py_func", None), "__module__", None) or ""
            if not module.startswith("cutext."):
                return
            with _NOTICE_LOCK:
                if _NOTICE["said"]:
                    return
                _NOTICE["said"] = True
            _say(COMPILE_NOTICE, _NOTICE["enabled"])

        def on_end(self, event):
            pass

    return CompileNotice()


GPU_COMPILE_NOTICE = "compiling GPU kernels (first GPU run on this machine; CuPy keeps them in {where} for later runs)"
_GPU_NOTICE = {"checked": False}


def cupy_cache_dir() -> Path:
    """The folder of CuPy's compiled kernels: ``$CUPY_CACHE_DIR``, else ``~/.cupy/kernel_cache`` (CuPy's default)."""
    return Path(os.environ.get("CUPY_CACHE_DIR") or Path.home() / ".cupy" / "kernel_cache")


def notice_gpu_compiles(enabled: bool = True) -> None:
    """Say :data:`GPU_COMPILE_NOTICE` once a process, at the first GPU run, when CuPy's kernel cache
    (:func:`cupy_cache_dir`) is empty or absent: that run compiles every CUDA kernel it uses (a first 2 GB
    bm25 build on an H200: about 30 s against 7 s with the kernels on disk).  A line on standard error, or
    with ``enabled=False`` a log record (logger ``cutext``, level INFO).  A cache that holds other
    programs' kernels but not cutext's says nothing; with ``CUPY_CACHE_IN_MEMORY=1`` (no disk cache) the
    notice names that setting."""
    with _NOTICE_LOCK:
        if _GPU_NOTICE["checked"]:
            return
        _GPU_NOTICE["checked"] = True
    if os.environ.get("CUPY_CACHE_IN_MEMORY") == "1":
        where = "memory (CUPY_CACHE_IN_MEMORY=1: this process only)"
    else:
        folder = cupy_cache_dir()
        try:
            with os.scandir(folder) as entries:
                if any(True for _ in entries):
                    return
        except OSError:  # absent or unreadable: CuPy compiles (and makes it)
            pass
        where = str(folder)
    _say(GPU_COMPILE_NOTICE.format(where=where), enabled)


def notice_compiles(enabled: bool = True) -> None:
    """Say :data:`COMPILE_NOTICE` once a process, when numba starts compiling a cutext kernel that its
    cache does not hold (a compile of a few seconds to a minute; a kernel loaded from the cache says
    nothing): a line on standard error, or with ``enabled=False`` a log record (logger ``cutext``,
    level INFO).

    Every pipeline run calls it with its ``progress``, :meth:`BM25Index.search` with ``True``; the latest
    call's ``enabled`` holds for the process.  A numba event listener (``numba:compile``, fired only
    when a function is compiled, not when it is loaded from the cache) is installed at the first call
    and stays.  The workers of a local cluster compile in their own processes, unseen here.
    """
    _NOTICE["enabled"] = bool(enabled)
    if _NOTICE["listener"] is not None or _NOTICE["said"]:
        return
    with _NOTICE_LOCK:
        if _NOTICE["listener"] is None:
            from numba.core import event

            _NOTICE["listener"] = _compile_listener()
            event.register("numba:compile", _NOTICE["listener"])
