"""Where a pipeline computes: an existing Client, a local cluster, or an in-process scheduler (one policy).

Used by the corpus front end (:mod:`cutext.stages.text.frontend`) and by every pipeline that maps dask
partitions.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass

import dask
import dask.local
import dask.threaded

from cutext.stages.runtime.params import count, param
from cutext.stages.runtime.progress import wait

SCHEDULERS = ("auto", "sync", "threads", "cluster")
SMALL_INPUT_BYTES = 256 << 20


@dataclass
class ComputeInfo:
    """Where one run computes: the resolved backend (``"cpu"``/``"gpu"``), the scheduler
    (``"client"``, ``"sync"``, ``"threads"``, ``"cluster"``), its worker count and client (or None)."""

    backend: str
    scheduler: str
    n_workers: int
    client: object = None


class GPUOutOfMemoryError(MemoryError):
    """A device allocation failed during a GPU pipeline run; the message says what to change."""


_DEVICE_OOM_TEXT = ("out_of_memory", "bad_alloc", "cudaErrorMemoryAllocation", "out of memory")


def _is_device_oom(exc: BaseException) -> bool:
    """Whether ``exc`` is a failed device allocation, judged by its type's name and module (no import):
    cupy's ``cupy.cuda.memory.OutOfMemoryError``, rmm's / cudf's ``MemoryError`` (``std::bad_alloc:
    out_of_memory``), including those re-raised by dask workers."""
    t = type(exc)
    mod, name = t.__module__ or "", t.__name__
    if name == "OutOfMemoryError" and mod.startswith(("cupy", "cupy_backends")):
        return True
    if mod.startswith(("rmm", "cudf")) and "MemoryError" in name:
        return True
    if isinstance(exc, MemoryError) and not isinstance(exc, GPUOutOfMemoryError):
        text = str(exc)
        return any(s in text for s in _DEVICE_OOM_TEXT)
    return False


def device_oom_error(exc: BaseException, n_workers: int | None = None):
    """The :class:`GPUOutOfMemoryError` for a device out-of-memory ``exc`` (or one in its cause
    chain), else None.  The message names the remedies: a smaller ``blocksize=``, more GPUs
    (workers), an RMM pool with spilling (``device_memory_limit``) on a ``LocalCUDACluster``."""
    seen = set()
    e = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if _is_device_oom(e):
            where = f" on {n_workers} GPU worker(s)" if n_workers else ""
            return GPUOutOfMemoryError(
                f"the GPU ran out of memory{where} ({type(e).__module__}.{type(e).__name__}: {e}). "
                f"Try: a smaller {param('blocksize')} (bytes of text per partition, e.g. 16 MiB; each partition "
                "is tokenized in device memory at once); more GPUs (a LocalCUDACluster with more "
                "workers, or client=Client(LocalCUDACluster(...))); or spilling to host memory: "
                "LocalCUDACluster(device_memory_limit=\"0.8\", rmm_pool_size=..., enable_cudf_spill=True) "
                f"passed as client=; or {param('backend', 'cpu')}.")
        e = e.__cause__ or e.__context__
    return None


def input_bytes(pieces, fs) -> int:
    """Bytes of the files behind the reader's pieces (a file split into pieces counted once)."""
    total = 0
    for path in dict.fromkeys(path for p in pieces for path in p.paths):  # a split file once
        try:
            total += fs.size(path) or 0
        except Exception:
            pass
    return total


@contextlib.contextmanager
def compute_context(backend: str, client=None, scheduler: str = "auto", nbytes: int = 0,
                    n_workers: int | None = None, worker_threads: bool = False):
    """Configure dask for one pipeline run and yield a :class:`ComputeInfo`.

    ``client`` (a ``distributed.Client``) wins.  Otherwise ``scheduler="auto"`` stays in-process on
    the GPU backend (synchronous: one stream of work on the device) whatever the input size, and on the
    CPU backend for inputs under 256 MiB (threads), using a ``LocalCluster`` (one process per core)
    above that.  ``scheduler="cluster"`` starts a ``LocalCUDACluster`` (one worker per GPU) on the GPU
    backend, a ``LocalCluster`` on the CPU backend.  ``n_workers`` sizes that local cluster: given with
    ``"auto"`` it starts one whatever the input size; with ``"sync"`` or ``"threads"`` (no cluster) it is
    refused.  The whole rule: :func:`local_plan`.

    ``worker_threads=True`` (a pipeline whose in-process stages run on dask's threads and release the GIL:
    the bm25 build) makes ``n_workers`` on the CPU backend the threads of this process instead: with
    ``"auto"`` below 256 MiB and with ``"threads"`` the run computes on ``n_workers`` threads (dask's pool and
    pyarrow's), and no process is started (:func:`local_plan`).

    Raises
    ------
    ValueError
        An unknown ``scheduler``, ``n_workers`` < 1; ``n_workers`` with ``"sync"`` / ``"threads"`` (with
        ``worker_threads``: with ``"sync"``, or ``"threads"`` on the GPU backend); ``scheduler`` other than
        ``"auto"`` or ``n_workers`` with a ``client`` (whose workers are the cluster).
    """
    if scheduler not in SCHEDULERS:
        raise ValueError(f"{param('scheduler', bare=True)} must be one of {SCHEDULERS}, got {scheduler!r}")

    n_workers = count("n_workers", n_workers, lo=1, none_ok=True)
    if client is not None and (scheduler != "auto" or n_workers is not None):
        name = "scheduler" if scheduler != "auto" else "n_workers"
        raise ValueError(f"{param(name, scheduler if name == 'scheduler' else n_workers)} with {param('client')}: "
                         f"the client's workers run the stages, there is no local cluster to choose or size; "
                         f"drop {param(name, bare=True)}")
    if n_workers is not None and scheduler in ("sync", "threads") and not (
            worker_threads and backend == "cpu" and scheduler == "threads"):
        # in-process schedulers start no worker: the count would change nothing
        raise ValueError(f"{param('n_workers', n_workers)} sizes a local cluster, but {param('scheduler', scheduler)} "
                         f"runs in this process; use {param('scheduler', 'cluster')} or \"auto\", or drop "
                         f"{param('n_workers', bare=True)}")
    cfg = {"dataframe.backend": "cudf" if backend == "gpu" else "pandas",
           "dataframe.convert-string": False,
           "dataframe.shuffle.method": "tasks"}
    with _device_oom_guard(backend):
        if client is not None:
            forget_lost_placements(client)
            with dask.config.set(cfg):
                yield ComputeInfo(backend, "client", len(client.scheduler_info().get("workers", {})), client)
            return
        yield from _context(backend, cfg, *local_plan(backend, scheduler, nbytes, n_workers, worker_threads))


def forget_lost_placements(client) -> None:
    """Install :class:`cutext.stages.runtime.placements.LostPlacements` on ``client``'s scheduler (a plugin of
    that name replaces the last).  Best effort: a scheduler that cannot take it (another process without
    cutext) is left as is."""
    from cutext.stages.runtime.placements import LostPlacements  # imports distributed: only runs on a Client

    try:
        client.register_plugin(LostPlacements(), name=LostPlacements.name)
    except Exception:  # noqa: BLE001 - a placement preference must not fail a run
        pass


@contextlib.contextmanager
def _device_oom_guard(backend: str):
    """The one place GPU stages run under: a device out-of-memory becomes :class:`GPUOutOfMemoryError`."""
    try:
        yield
    except Exception as exc:  # MemoryError included
        err = device_oom_error(exc) if backend == "gpu" else None
        if err is None:
            raise
        raise err from exc


# ----------------------------------------------------------------------------- step profile
PROFILE_ENV = "CUTEXT_GPUTEXT_PROFILE"
_profile: dict = {}
_profile_lock = threading.Lock()


class StepClock:
    """Seconds per sub-step of a stage into :func:`step_profile` when ``$CUTEXT_GPUTEXT_PROFILE`` is
    ``1`` (off by default).  ``StepClock(xp)`` starts it; ``clock(name)`` adds the time since the last
    mark to ``name``.  With ``xp`` = cupy the device is synchronized at each mark (so the profile
    slows the path a little); with numpy only the host clock is read."""

    def __init__(self, xp):
        import numpy as np

        self.on = os.environ.get(PROFILE_ENV) == "1"
        self.sync = xp is not np
        self.xp = xp
        if self.on and self.sync:  # work queued before the clock starts is not charged to its first step
            xp.cuda.runtime.deviceSynchronize()
        self.t = time.perf_counter()

    def __call__(self, name):
        if not self.on:
            return
        if self.sync:
            self.xp.cuda.runtime.deviceSynchronize()
        now = time.perf_counter()
        with _profile_lock:
            _profile[name] = _profile.get(name, 0.0) + now - self.t
        self.t = now


def step_profile(reset: bool = False) -> dict:
    """Seconds per sub-step (read, tokenize, encode, count, write) summed over partitions in this
    process (empty unless ``$CUTEXT_GPUTEXT_PROFILE=1``); ``reset`` clears it."""
    with _profile_lock:
        out = dict(_profile)
        if reset:
            _profile.clear()
    return out


@contextlib.contextmanager
def device_pool():
    """Allocate device memory from a stream-ordered pool (``cudaMallocAsync``, RMM's
    ``CudaAsyncMemoryResource``) for the duration of an in-process GPU run, CuPy's arrays included
    (:func:`cupy_from_rmm`).

    The pool only when the process still has RMM's default resource (a plain ``CudaMemoryResource``, under
    which every cupy and cudf allocation is a ``cudaMalloc`` and every free a device-wide
    ``cudaFree``); a resource the caller chose (a pool, managed memory, statistics, a dask-cuda
    worker's) is left alone, and CuPy allocates from it.  The previous resource and allocator are
    restored afterwards; buffers allocated in the run keep their pool until they are freed.  Yields
    whether the pool was installed.
    """
    try:
        import rmm
    except ImportError:  # pragma: no cover - GPU installs have rmm (cudf needs it)
        yield False
        return
    old = rmm.mr.get_current_device_resource()
    mine = type(old) is rmm.mr.CudaMemoryResource
    if mine:
        rmm.mr.set_current_device_resource(rmm.mr.CudaAsyncMemoryResource())
    try:
        with cupy_from_rmm():
            yield mine
    finally:
        if mine:
            rmm.mr.set_current_device_resource(old)


def rmm_cupy():
    """Make CuPy allocate from RMM's current device resource (what a dask-cuda worker and an
    in-process run use), so that cudf and the kernels share one pool, one limit and one count."""
    import cupy
    from rmm.allocators.cupy import rmm_cupy_allocator

    cupy.cuda.set_allocator(rmm_cupy_allocator)


@contextlib.contextmanager
def cupy_from_rmm():
    """:func:`rmm_cupy` for the duration of a run; CuPy's previous allocator is restored afterwards.

    Without it CuPy may keep its own pool beside RMM's: blocks one library freed stay reserved and
    the other cannot reuse them, and RMM's statistics and limits miss every CuPy array.  Importing
    cudf already routes CuPy to RMM in the RAPIDS 26.10 kit (measured: CuPy's pool stayed empty
    without this context, benchmarks/micro/memory_ab.py); the context makes it hold whatever was
    imported, e.g. for the kernels that use CuPy alone."""
    try:
        import cupy
    except ImportError:  # pragma: no cover - GPU installs have cupy (and rmm, which cudf needs)
        yield
        return
    old = cupy.cuda.get_allocator()
    rmm_cupy()
    try:
        yield
    finally:
        cupy.cuda.set_allocator(old)


# threads a worker of cutext's own LocalCUDACluster: with two, one task's host work (the Parquet writer's,
# Python's, the comm's) overlaps another's device work, as the in-process GPU index keeps two files in
# flight. The 2 GB bm25 index on one worker of an H200: 2.74 s against 3.14 with one thread, and 3.75 against
# 4.53 on a slower machine of the kind (docs/history/benchmarks-journal.md). The two
# threads share the device's default stream: host work overlaps, device work does not.
GPU_THREADS_PER_WORKER = 2


def gpu_worker_config() -> dict:
    """The dask settings under which a GPU worker's nanny starts it (:func:`local_gpu_cluster`).

    distributed's defaults are made for many one-core CPU workers: the nanny starts each worker with
    ``OMP_NUM_THREADS=1`` (and MKL's, OpenBLAS's) and ``MALLOC_TRIM_THRESHOLD_=65536``
    (``distributed.nanny.pre-spawn-environ``), and every worker samples its threads' stacks every 10 ms
    (``distributed.worker.profile``). A GPU worker is one process per GPU that owns a share of the host's
    cores. Under those defaults a one-worker Client built a 4 GB bm25 index in 4.23 s, against 3.52 s
    without them and 3.90 s in process; the in-process build under the same environment took 6.46 s
    (its Parquet writer on one thread) (``benchmarks/micro/worker_env.py``, one H200). These settings unset
    the nanny's variables and turn the sampling profiler off; the dashboard's profile page stays empty.
    """
    import distributed  # noqa: F401  (its import fills the defaults that the mapping below overrides)

    env = dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {}
    return {"distributed.nanny.pre-spawn-environ": {k: None for k in env},
            "distributed.worker.profile.enabled": False}


def local_gpu_cluster(n_workers: int | None = None, **kwargs):
    """A ``dask_cuda.LocalCUDACluster`` set up as cutext's GPU stages want it: one worker per GPU (of
    ``CUDA_VISIBLE_DEVICES``, or ``n_workers`` of them), ``GPU_THREADS_PER_WORKER`` threads a worker, RMM's
    stream-ordered pool (``rmm_async=True``, the in-process runs' :func:`device_pool`), and the workers
    started under :func:`gpu_worker_config` (the nanny's one-thread and malloc-trim environment unset, no
    sampling profiler).  Any keyword of ``LocalCUDACluster`` overrides these.

    Parameters
    ----------
    n_workers : int, optional
        Workers (GPUs); default every visible GPU.
    **kwargs
        Passed to ``LocalCUDACluster``.

    Returns
    -------
    dask_cuda.LocalCUDACluster
        Started; close it (or use it as a context manager) when done.

    Raises
    ------
    ImportError
        dask-cuda is not installed (the ``[gpu]`` install).
    """
    from dask_cuda import LocalCUDACluster

    kw = {"threads_per_worker": GPU_THREADS_PER_WORKER, "rmm_async": True}
    kw.update(kwargs)
    if n_workers is not None:
        kw["n_workers"] = n_workers
    with dask.config.set(gpu_worker_config()):
        return LocalCUDACluster(**kw)


def cpu_threads(n_workers: int | None = None) -> int:
    """The threads of an in-process CPU run: ``n_workers`` when given, else the cores this process may use
    (:func:`host_cpus`: its affinity and cgroup quota, not the machine's core count).

    Other jobs on the machine lower no count: the kernel shares a busy machine's cores among runnable
    threads, so a run's second thread still adds its share (the bm25 build of 20 Newsgroups beside two busy
    processes on two cores, ``benchmarks/cpu_build.py``)."""
    return int(n_workers) if n_workers is not None else host_cpus()


def local_plan(backend: str, scheduler: str, nbytes: int, n_workers: int | None,
               worker_threads: bool = False) -> tuple[str, int | None]:
    """Where a run without a client computes: ``(scheduler, n_workers)``, ``scheduler`` one of ``"sync"``,
    ``"threads"`` (:func:`cpu_threads` threads) or ``"cluster"`` (a local cluster of ``n_workers``; None: one
    worker per GPU / core), ``n_workers`` as given.

    ``"auto"``: the GPU in-process (synchronous) whatever the input; the CPU in-process on threads below
    256 MiB of input (:data:`SMALL_INPUT_BYTES`), a local cluster above.  ``n_workers`` with ``"auto"`` asks
    for that many workers: a local cluster of them, except with ``worker_threads`` on the CPU below 256 MiB,
    where they are threads of this process (no process to start, nothing copied between processes).
    Arguments are checked by :func:`compute_context`.
    """
    if scheduler == "auto":
        # the GPU stays in-process whatever the input: a LocalCUDACluster's start (about 10 s) and its
        # slower front end never paid back (4 GB on two H200: 3.7 s in process, 4.2 s on two workers);
        # on the CPU small inputs stay in-process on threads (pyarrow, numba and numpy release the GIL)
        small = backend == "cpu" and nbytes < SMALL_INPUT_BYTES
        if n_workers is not None:  # workers asked for: threads of this process where they may be, else a cluster
            scheduler = "threads" if worker_threads and small else "cluster"
        elif backend == "gpu":
            scheduler = "sync"
        else:
            scheduler = "threads" if small else "cluster"
    return scheduler, n_workers


def _context(backend, cfg, scheduler, n_workers):
    if scheduler in ("sync", "threads"):
        # the function, not its name: a named scheduler has dask import distributed to look for a client (0.1 s)
        cfg["scheduler"] = dask.local.get_sync if scheduler == "sync" else dask.threaded.get
        nw = 1 if scheduler == "sync" else cpu_threads(n_workers)
        pools = contextlib.ExitStack()
        if backend == "gpu":
            pools.enter_context(device_pool())
        if scheduler == "threads":
            cfg["num_workers"] = nw
            if n_workers is not None:  # workers asked for: pyarrow's pool of the same size, n threads on n cores
                pools.enter_context(arrow_threads(nw))
        with dask.config.set(cfg), pools:
            yield ComputeInfo(backend, scheduler, nw, None)
        return
    from distributed import Client

    if backend == "gpu":
        cluster = local_gpu_cluster(n_workers)
    else:
        from distributed import LocalCluster

        n = n_workers or host_cpus()
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=None)
    try:
        with Client(cluster) as c, dask.config.set(cfg):
            forget_lost_placements(c)
            if backend == "gpu":
                c.run(rmm_cupy)  # the workers' CuPy arrays from their RMM pool, as in-process
            yield ComputeInfo(backend, "cluster", len(c.scheduler_info().get("workers", {})), c)
    finally:
        cluster.close()


# Device bytes an in-memory GPU corpus build needs per input byte, at its peak (the count stage:
# the tokenize scans, 12 bytes a distinct (term, document) pair, beside the counts, 20 bytes a
# pair, and the sort's temporaries).  Measured 2.3-2.5x on 2 GB of replicated 20 Newsgroups with
# the text and each scan freed as soon as they are used (3.9x when they were kept;
# benchmarks/bm25_limited.py); 4 leaves a margin.
DEVICE_BYTES_PER_INPUT_BYTE = 4


def device_memory_budget() -> int:
    """Bytes of device memory this process can still allocate on the current GPU.

    The device's free memory (``cudaMemGetInfo``) plus what CuPy's own pool holds unused, bounded
    by what a :class:`rmm.mr.LimitingResourceAdaptor` in the current RMM resource chain still
    allows (the way to give a run less than the whole device).
    """
    import cupy

    free, _ = cupy.cuda.runtime.memGetInfo()
    budget = int(free) + int(cupy.get_default_memory_pool().free_bytes())
    try:
        import rmm
    except ImportError:  # pragma: no cover - GPU installs have rmm
        return budget
    mr, seen = rmm.mr.get_current_device_resource(), 0
    while mr is not None and seen < 16:
        if isinstance(mr, rmm.mr.LimitingResourceAdaptor):
            budget = min(budget, int(mr.get_allocation_limit()) - int(mr.get_allocated_bytes()))
        mr = mr.get_upstream() if hasattr(mr, "get_upstream") else None
        seen += 1
    return budget


def gpu_spill_budget(nbytes: int, info: ComputeInfo) -> int | None:
    """The per-GPU device budget (bytes, :func:`device_memory_budget`, the smallest over the
    workers) when a GPU corpus build of ``nbytes`` of input should keep its per-partition results
    in files (``spill=``) instead of device memory, else None: spill when
    ``DEVICE_BYTES_PER_INPUT_BYTE * nbytes``, shared among the workers, exceeds that budget."""
    need = DEVICE_BYTES_PER_INPUT_BYTE * int(nbytes)
    if info.client is None:
        budget, n = device_memory_budget(), 1
    else:
        budgets = list(info.client.run(device_memory_budget).values())
        if not budgets:
            return None
        budget, n = min(budgets), len(budgets)
    return budget if need / n > budget else None


def _in_process() -> bool:
    """Whether dask computes in this process now (the synchronous, threaded or multiprocessing
    scheduler, or none configured and no default client), not on a ``distributed`` cluster."""
    import dask.base
    import dask.local
    import dask.multiprocessing
    import dask.threaded

    get = dask.base.get_scheduler()
    return get is None or get in (dask.local.get_sync, dask.threaded.get, dask.multiprocessing.get)


def nbytes_of(*values) -> int:
    """Bytes held by ``values`` as dask measures them (``dask.sizeof``: arrays, frames, series of either
    library; None counts 0).  For the ``__sizeof__`` of the objects that stages pass between tasks: a
    distributed scheduler places a task beside its largest inputs and moves (or steals) one whose inputs
    look small, and an object without ``__sizeof__`` looks like a few dozen bytes whatever it holds
    (count tasks pulled their tokenize summaries from the other worker)."""
    from dask.sizeof import sizeof

    return sum(int(sizeof(v)) for v in values if v is not None)


def cluster_client():
    """The ``distributed.Client`` that dask computes on now, or None (an in-process scheduler, or none)."""
    if _in_process():
        return None
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


def shared_key(obj, client=None):
    """One key for an object that many tasks take (a vocabulary, BM25 weights, document lengths): on a
    distributed ``client`` (default: :func:`cluster_client`) scattered to every worker at once, else a
    delayed literal of the in-process graph.  Not a copy inside every task (each went from the scheduler
    to its worker: 16 x 8.4 MB of lengths for the 2 GB index), nor a graph key computed on one worker
    that the others then fetch."""
    client = client if client is not None else cluster_client()
    if client is not None:
        return client.scatter(obj, broadcast=True, hash=False)
    return dask.delayed(obj, pure=True, traverse=False)


class WorkerActors:
    """Dask actors, one a worker, called straight on their workers, the calls of all workers waited for at once.

    A ``distributed.Actor``'s call goes through the scheduler unless the client was made with
    ``direct_to_workers=True`` (``distributed.client.direct-to-workers``, off by default): the scheduler's one
    event loop then carries every call's arguments and every reply, and each ``ActorFuture.result()`` is a
    round trip of its own to the client's event loop.  Here a call is the ``actor_execute`` message a direct
    client's actor sends, on the client's connection pool to the actor's worker, and ``start`` returns one
    wait for the calls of every actor.  A client made with ``direct_to_workers=False``, or a worker it cannot
    reach when this is made (a client outside the cluster's network), is called through the scheduler, as a
    ``distributed.Actor`` is.

    Parameters
    ----------
    client : distributed.Client
    futures : list of distributed.Future
        Of ``client.submit(cls, ..., actor=True, workers=[address])``, one a worker; kept, so the actors live
        as long as this object.
    addresses : list of str
        The worker of each actor.

    Raises
    ------
    Exception
        From ``start``'s wait: the first error raised by an actor's method, as ``ActorFuture.result()``.
    """

    def __init__(self, client, futures, addresses):
        self.client = client
        self.futures = list(futures)
        try:
            self.actors = [f.result() for f in self.futures]
        except BaseException:  # an actor that failed to start: the others are not kept alive by the traceback
            for f in self.futures:
                f.release()
            raise
        self.keys = [f.key for f in self.futures]
        self.addresses = list(addresses)
        self.direct = [False] * len(self.addresses)
        if client.direct_to_workers is not False:
            self.direct = client.sync(self._reachable)

    def __len__(self) -> int:
        return len(self.actors)

    async def _reachable(self) -> list[bool]:
        import asyncio

        async def one(address):
            try:
                await self.client.rpc(address).identity()
                return True
            except OSError:
                return False

        return list(await asyncio.gather(*(one(a) for a in self.addresses)))

    async def _call(self, i: int, method: str, args: tuple):
        if not self.direct[i]:
            return await getattr(self.actors[i], method)(*args)
        from distributed.protocol import to_serialize

        r = await self.client.rpc(self.addresses[i]).actor_execute(
            function=method, actor=self.keys[i], args=[to_serialize(a) for a in args], kwargs={})
        if r["status"] != "OK":
            raise r["exception"]
        return r["result"]

    def start(self, method: str, *args, per_actor: list | None = None, only: int | None = None):
        """Send ``method(*args)`` to every actor (``per_actor``: a tuple of arguments for each instead;
        ``only``: to that actor alone) and return ``wait()`` -> the results in the actors' order."""
        import asyncio

        which = range(len(self.actors)) if only is None else [only]
        calls = [(i, per_actor[i] if per_actor is not None else args) for i in which]

        async def every():
            return list(await asyncio.gather(*(self._call(i, method, a) for i, a in calls)))

        return asyncio.run_coroutine_threadsafe(every(), self.client.loop.asyncio_loop).result

    def call(self, method: str, *args, per_actor: list | None = None) -> list:
        """:meth:`start` and its wait: every actor's result."""
        return self.start(method, *args, per_actor=per_actor)()

    def call_one(self, i: int, method: str, *args):
        """``method(*args)`` on actor ``i`` alone: its result."""
        return self.start(method, *args, only=i)()[0]

    def release(self) -> None:
        """Release the actors (what they hold on their workers)."""
        for f in self.futures:
            f.release()
        self.futures, self.actors, self.keys, self.addresses, self.direct = [], [], [], [], []


def cluster_workers() -> list[str] | None:
    """The worker addresses (sorted) of :func:`cluster_client`, or None when dask computes in-process
    or the cluster has fewer than two workers (nothing to spread)."""
    client = cluster_client()
    if client is None:
        return None
    workers = sorted(client.scheduler_info().get("workers", {}))
    return workers if len(workers) > 1 else None


def host_share(client, workers: list[str]) -> dict[str, int]:
    """For each of ``workers`` (addresses of ``client``), how many of them run on its host: a task that is
    its worker's whole share of the work takes that fraction of the host's cores (:func:`share_threads`)."""
    info = client.scheduler_info().get("workers", {})
    host = {w: info.get(w, {}).get("host", w) for w in workers}
    per_host: dict[str, int] = {}
    for h in host.values():
        per_host[h] = per_host.get(h, 0) + 1
    return {w: per_host[host[w]] for w in workers}


def host_cpus() -> int:
    """The cores this process may run on: the fewest of the machine's, its CPU affinity's
    (``os.sched_getaffinity``) and its cgroup CPU quota's (``dask.system.cpu_count``)."""
    from dask.system import cpu_count

    return max(1, int(cpu_count()))


@contextlib.contextmanager
def arrow_threads(n: int):
    """Within the block, pyarrow's CPU pool has ``n`` threads (at least one); the process's previous setting
    comes back after.  Yields the pool's size."""
    import pyarrow as pa

    before = pa.cpu_count()
    pa.set_cpu_count(max(1, int(n)))
    try:
        yield pa.cpu_count()
    finally:
        pa.set_cpu_count(before)


@contextlib.contextmanager
def share_threads(sharing: int = 1):
    """Within the block, pyarrow's CPU pool has this process's cores / ``sharing`` threads (at least one).

    For a task that is its dask worker's whole share (a Client build's or scoring run's one task a
    worker): distributed's nanny starts workers with ``OMP_NUM_THREADS=1``, which pyarrow's pool honours,
    so the share's Parquet encoding and Arrow compute ran on one core (a 16 GB build's write 7.45 s on a
    worker against 5.63 in process).  The setting is the process's; the previous one comes back after.
    """
    with arrow_threads(host_cpus() // max(1, int(sharing))) as n:
        yield n


def on_worker(i: int, workers: list[str] | None):
    """Context in which the dask tasks made go preferably to worker ``i mod len(workers)``.

    Spreads tasks that depend on every partition alike (a term range gathers a slice of each counts
    partition), which the scheduler would otherwise put where most of their inputs are: on a
    2-worker LocalCUDACluster it ran all 11 term ranges of the 2 GB bm25 index, and wrote all their
    files, on one GPU (docs/history/benchmarks-journal.md).  A preference
    (``allow_other_workers``), so a lost worker's tasks still run elsewhere.  No-op when ``workers``
    is None.
    """
    if not workers:
        return contextlib.nullcontext()
    return dask.annotate(workers=[workers[i % len(workers)]], allow_other_workers=True)


def partition_homes(frame):
    """``(futures, workers)``: the future and a worker holding it of each partition of a collection
    persisted on a distributed cluster, in partition order; None when its partitions are not futures.

    For tasks on single partitions that must run where their partition is: a task made under
    :func:`on_worker` passes that annotation on to dependencies that have none of their own (dask,
    measured with distributed 2026.8), so the slices of a spread term range otherwise ran on the
    range's worker and pulled whole partitions there.  Passing the futures
    themselves also skips the alias task a persisted collection puts before each partition.
    """
    client = cluster_client()
    if client is None:
        return None
    from distributed import futures_of

    futs = {f.key: f for f in futures_of(frame)}
    if not futs:
        return None
    graph = dict(frame.__dask_graph__())
    keys = []
    for k in frame.__dask_keys__():
        if k not in futs:  # an alias of the future's key
            deps = getattr(graph.get(k), "dependencies", None) or ()
            k = next(iter(deps)) if len(deps) == 1 else None
        if k not in futs:
            return None
        keys.append(k)
    who = client.who_has([futs[k] for k in keys])
    homes = [(who.get(k) or [None])[0] for k in keys]
    if not all(homes):
        return None
    return [futs[k] for k in keys], homes


def _is_frame_collection(obj) -> bool:
    return all(hasattr(obj, a) for a in ("to_delayed", "_meta", "npartitions", "known_divisions"))


def _persist_in_process(objs: list) -> list:
    """``dask.persist(*objs)`` for an in-process scheduler, without naming the persisted frame
    collections by their contents.

    dask names a persisted DataFrame collection by a token of its computed partitions; for cudf
    partitions that token hashes every row on the device and copies the hashes to the host
    (``cudf.DataFrame.__dask_tokenize__``): 0.4-0.6 s of the 2 GB bm25 index on an H200
    (cProfile).  Here the partitions are computed in one graph and wrapped
    as a collection again under random keys (``dask.delayed(pure=False)``), with the same meta and
    divisions.  Other objects (delayed) are persisted as usual.
    """
    import dask
    import dask.dataframe as dd

    out = list(objs)
    frames = [i for i, o in enumerate(objs) if _is_frame_collection(o)]
    if frames:
        parts = dask.compute(*[objs[i].to_delayed() for i in frames])
        for i, ps in zip(frames, parts):
            o = objs[i]
            out[i] = dd.from_delayed([dask.delayed(p, pure=False, traverse=False) for p in ps], meta=o._meta,
                                     divisions=o.divisions if o.known_divisions else None, verify_meta=False)
    rest = [i for i in range(len(objs)) if i not in frames]
    if rest:
        for i, p in zip(rest, dask.persist(*[objs[i] for i in rest])):
            out[i] = p
    return out


def materialize(ddf, info: ComputeInfo):
    """Persist a collection and wait until it is computed (so stage timings are honest)."""
    if info.client is None and _in_process():
        return _persist_in_process([ddf])[0]
    out = ddf.persist()
    if info.client is not None:
        wait(out)
    return out


def persist_all(objs: list) -> list:
    """Persist a list of dask objects (delayed, collections) and wait until they are computed: on a
    ``distributed.Client`` (the one in effect, found from the futures) the finished futures feed the
    current stage's progress (:func:`cutext.stages.runtime.progress.wait`); in-process without dask's
    content tokens of the results (:func:`_persist_in_process`)."""
    import dask

    if _in_process():
        return _persist_in_process(objs)
    out = list(dask.persist(*objs))
    try:
        from distributed import futures_of
    except ImportError:  # pragma: no cover
        return out
    if futures_of(out):
        wait(out)
    return out


def compute_all(tasks: list, info: ComputeInfo | None = None) -> list:
    """``dask.compute(*tasks)`` as a list; on the context's ``distributed.Client`` (``info=None``: the one
    dask computes on now, :func:`cluster_client`) through futures, so that their completion feeds the
    current stage's progress (:func:`cutext.stages.runtime.progress.wait`)."""
    import dask

    client = info.client if info is not None else cluster_client()
    if client is None:
        return list(dask.compute(*tasks))

    futures = client.compute(list(tasks))
    wait(futures)
    return client.gather(futures)


_FANNED_OUT: set = set()  # the kinds of :func:`compute_fanned_out` that have run in this process
_FANNED_OUT_LOCK = threading.Lock()


def compute_fanned_out(tasks: list, info: ComputeInfo, kind: str, threads: int) -> list:
    """:func:`compute_all` of in-process tasks that run on ``threads`` threads, with the first task alone the
    first time ``kind`` runs in this process on the GPU.  CuPy compiles a kernel at its first use in a
    process (from its disk cache when there) and several threads compiling the same kernels wait for one
    another: on one H200, with no cache, 16 threads writing 16 segments spent 86 s of a 107 s build of
    2 GB compiling.  So the first task compiles them once, and the rest find them built.

    ``tasks``: dask delayed objects; ``kind``: a name of the fan-out (its kernels); ``threads``: the
    threads the tasks run on."""
    if info.backend != "gpu" or info.client is not None or threads < 2 or len(tasks) < 2:
        return compute_all(tasks, info)
    with _FANNED_OUT_LOCK:
        first = kind not in _FANNED_OUT
        _FANNED_OUT.add(kind)
    if not first:
        return compute_all(tasks, info)
    try:
        head = compute_all(tasks[:1], info)
    except BaseException:
        with _FANNED_OUT_LOCK:
            _FANNED_OUT.discard(kind)
        raise
    return head + compute_all(tasks[1:], info)
