"""Where a pipeline computes: an existing Client, a local cluster, or an in-process scheduler (one policy).

Used by the corpus front end (:mod:`cutext.stages.corpus`) and by every pipeline that maps dask
partitions; ``cutext.pipelines._compute`` re-exports it.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass

import dask

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
                "Try: a smaller blocksize= (bytes of text per partition, e.g. 16 << 20; each partition "
                "is tokenized in device memory at once); more GPUs (a LocalCUDACluster with more "
                "workers, or client=Client(LocalCUDACluster(...))); or spilling to host memory: "
                "LocalCUDACluster(device_memory_limit=\"0.8\", rmm_pool_size=..., enable_cudf_spill=True) "
                "passed as client=; or backend=\"cpu\".")
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
                    n_workers: int | None = None):
    """Configure dask for one pipeline run and yield a :class:`ComputeInfo`.

    ``client`` (a ``distributed.Client``) wins.  Otherwise ``scheduler="auto"`` stays in-process
    for inputs under 256 MiB (threads on the CPU, synchronous on the GPU) and uses a local cluster
    above that: a
    ``LocalCUDACluster`` (one worker per GPU) on the GPU backend, a ``LocalCluster`` (one
    process per core) on the CPU backend.
    """
    if scheduler not in SCHEDULERS:
        raise ValueError(f"scheduler must be one of {SCHEDULERS}, got {scheduler!r}")
    from cutext.stages.params import count

    n_workers = count("n_workers", n_workers, lo=1, none_ok=True)
    cfg = {"dataframe.backend": "cudf" if backend == "gpu" else "pandas",
           "dataframe.convert-string": False,
           "dataframe.shuffle.method": "tasks"}
    with _device_oom_guard(backend):
        if client is not None:
            with dask.config.set(cfg):
                yield ComputeInfo(backend, "client", len(client.scheduler_info().get("workers", {})), client)
            return
        yield from _context(backend, cfg, scheduler, nbytes, n_workers)


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
    ``CudaAsyncMemoryResource``) for the duration of an in-process GPU run.

    Only when the process still has RMM's default resource (a plain ``CudaMemoryResource``, under
    which every cupy and cudf allocation is a ``cudaMalloc`` and every free a device-wide
    ``cudaFree``); a resource the caller chose (a pool, managed memory, statistics, a dask-cuda
    worker's) is left alone.  The previous resource is restored afterwards; buffers allocated in the
    run keep their pool until they are freed.  Yields whether the pool was installed.
    """
    try:
        import rmm
    except ImportError:  # pragma: no cover - GPU installs have rmm (cudf needs it)
        yield False
        return
    old = rmm.mr.get_current_device_resource()
    if type(old) is not rmm.mr.CudaMemoryResource:
        yield False
        return
    rmm.mr.set_current_device_resource(rmm.mr.CudaAsyncMemoryResource())
    try:
        yield True
    finally:
        rmm.mr.set_current_device_resource(old)


def _context(backend, cfg, scheduler, nbytes, n_workers):
    if scheduler == "auto":
        # small inputs stay in-process: threads on the CPU (pyarrow, numba and numpy release the
        # GIL), one stream of work on the GPU
        small = "sync" if backend == "gpu" else "threads"
        scheduler = small if nbytes < SMALL_INPUT_BYTES else "cluster"
    if scheduler in ("sync", "threads"):
        cfg["scheduler"] = "synchronous" if scheduler == "sync" else "threads"
        nw = 1 if scheduler == "sync" else (os.cpu_count() or 1)
        with dask.config.set(cfg), (device_pool() if backend == "gpu" else contextlib.nullcontext()):
            yield ComputeInfo(backend, scheduler, nw, None)
        return
    from distributed import Client

    if backend == "gpu":
        from dask_cuda import LocalCUDACluster

        cluster = LocalCUDACluster(n_workers=n_workers, rmm_async=True)  # as device_pool() in-process
    else:
        from distributed import LocalCluster

        n = n_workers or (os.cpu_count() or 1)
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=None)
    try:
        with Client(cluster) as c, dask.config.set(cfg):
            yield ComputeInfo(backend, "cluster", len(c.scheduler_info().get("workers", {})), c)
    finally:
        cluster.close()


def materialize(ddf, info: ComputeInfo):
    """Persist a collection and wait until it is computed (so stage timings are honest)."""
    out = ddf.persist()
    if info.client is not None:
        from cutext.stages.progress import wait  # distributed.wait, feeding the stage's progress

        wait(out)
    return out


def persist_all(objs: list) -> list:
    """Persist a list of dask objects (delayed, collections) and wait until they are computed: on a
    ``distributed.Client`` (the one in effect, found from the futures) the finished futures feed the
    current stage's progress (:func:`cutext.stages.progress.wait`)."""
    import dask

    out = list(dask.persist(*objs))
    try:
        from distributed import futures_of
    except ImportError:  # pragma: no cover
        return out
    if futures_of(out):
        from cutext.stages.progress import wait

        wait(out)
    return out


def compute_all(tasks: list, info: ComputeInfo) -> list:
    """``dask.compute(*tasks)`` as a list; on the context's ``distributed.Client`` through futures, so
    that their completion feeds the current stage's progress (:func:`cutext.stages.progress.wait`)."""
    import dask

    if info.client is None:
        return list(dask.compute(*tasks))
    from cutext.stages.progress import wait

    futures = info.client.compute(list(tasks))
    wait(futures)
    return info.client.gather(futures)
