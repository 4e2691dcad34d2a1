"""Shards of a loaded BM25 index: contiguous document ranges held by a Client's workers or by GPUs of this
process (:class:`_Devices`), each with its engine, scored per query batch and merged by the caller
(:class:`cutext.stages.engines.bm25_index.BM25Index`).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from cutext.kernels.backend import ARRAY_STACK, resolve_backend
from cutext.stages.engines import search as search_stage
from cutext.stages.engines import segments
from cutext.stages.engines.bm25_format1 import _read_postings
from cutext.stages.engines.bm25_weights import _segment_matrix
from cutext.stages.runtime.compute import StepClock


def _to_backend(M, backend: str):
    """The CSR on the device for ``backend == "gpu"`` (cupyx), else as is."""
    if backend != "gpu":
        return M
    import cupy
    import cupyx.scipy.sparse as csp

    return csp.csr_matrix((cupy.asarray(M.data), cupy.asarray(M.indices.astype(np.int32)),
                           cupy.asarray(M.indptr.astype(np.int32) if M.nnz < 2**31 else M.indptr)),
                          shape=M.shape)


class _Shard:
    """The documents ``[lo, hi)`` of an index, held by one worker of a cluster (sharded search)."""

    def __init__(self, lo: int, hi: int, matrix, backend: str):
        self.lo, self.hi, self.backend = lo, hi, backend
        self.sm = search_stage.SearchMatrix(matrix)
        self.device = None  # the GPU of a shard of BM25Index.load(devices=...)


def _load_shard(path: str, lo: int, hi: int, backend: str, N: int, V: int, df, w0, wmax=None) -> _Shard:
    """Worker side of :meth:`BM25Index.load` with a client: read the shard, put it on this worker's device."""
    be = resolve_backend(backend, needs=ARRAY_STACK)
    return _Shard(lo, hi, _to_backend(_read_postings(Path(path), N, V, df, w0, lo, hi, wmax), be), be)


def _load_segment_shard(folders: list, deletes: list, vocab, df, run: tuple, lo: int, hi: int, backend: str, fn,
                        w0) -> _Shard:
    """Worker side of a segmented :meth:`BM25Index.load` with a client: a consecutive run of segments
    (``vocab``, ``df``: the index's global terms, shared by every worker; ``run``: ``(n_docs, sum_dl,
    doc_base, term_ids)`` of the :class:`cutext.stages.engines.segments.MergedTerms` of this run;
    ``deletes``: their deleted documents) as the shard of documents ``[lo, hi)``, weighted on this
    worker's device."""
    be = resolve_backend(backend, needs=ARRAY_STACK)
    terms = segments.MergedTerms(vocab, df, *run)
    segs = [segments.live_segment(segments.read_segment(Path(f), verify=False), d) for f, d in zip(folders, deletes)]
    merged = segments.merge_segments(segs, terms=terms, device=be == "gpu")
    del segs
    return _Shard(lo, hi, _segment_matrix(merged, fn, w0, be), be)


class _Devices:
    """Shards on GPUs of this process (``BM25Index.load(devices=...)``): the stand-in of a client whose
    workers are devices; a shard is loaded, and its engine started, under its own device."""

    def __init__(self, devices, backend: str):
        if backend != "gpu":
            raise ValueError(f"BM25Index.load: devices= shards the index over GPUs, but the backend is {backend!r}")
        if isinstance(devices, (int, np.integer)):
            devices = [devices]
        devices = list(devices)
        import cupy

        n = cupy.cuda.runtime.getDeviceCount()
        if not devices or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and 0 <= d < n
                                  for d in devices):
            raise ValueError(f"BM25Index.load: devices must be a non-empty list of device numbers in [0, {n}), "
                             f"got {devices!r}")
        self.devices = [int(d) for d in devices]
        self._lanes: dict = {}  # device -> the thread that starts its batches (:meth:`submit`)

    def place(self, jobs) -> list:
        """Run each ``(device, lo, hi, (loader, *args))`` under its device, on a thread each."""
        import cupy

        def one(job):
            dev, lo, hi, (fn, *args) = job
            with cupy.cuda.Device(dev):
                shard = fn(*args)
                shard.device = dev
                cupy.cuda.Device(dev).synchronize()
            return lo, hi, f"gpu:{dev}", shard

        with ThreadPoolExecutor(len(jobs) or 1) as pool:
            return list(pool.map(one, jobs))

    def run(self, shard: "_Shard", fn, *args):
        import cupy

        with cupy.cuda.Device(shard.device):
            return fn(shard, *args)

    def submit(self, shard: "_Shard", fn, *args):
        """:meth:`run` on the thread of the shard's device (one a device, made at its first call): a future."""
        lane = self._lanes.get(shard.device)
        if lane is None:
            lane = ThreadPoolExecutor(1, thread_name_prefix=f"cutext-search-gpu{shard.device}")
            self._lanes[shard.device] = lane
        return lane.submit(self.run, shard, fn, *args)


def _slots(client) -> list:
    """Where the shards go: the client's workers (sorted), or the devices of :class:`_Devices`."""
    if isinstance(client, _Devices):
        return client.devices
    workers = sorted(client.scheduler_info()["workers"])
    if not workers:
        raise ValueError("BM25Index.load(client=...): the client has no workers")
    return workers


def _shard_topk_start(shard: _Shard, Q, k: int, engine: str, max_workspace, n_threads, doc_filter=None):
    """Worker side of a sharded search: :meth:`cutext.stages.engines.search.SearchMatrix.topk_start` of the shard,
    doc ids numbered within the shard (the merge adds the shard's first doc id,
    :func:`cutext.stages.engines.search.merge_topk`; ``doc_filter``: the shard's part of the filter,
    :meth:`cutext.stages.engines.search.DocFilter.shard`)."""
    return shard.sm.topk_start(Q, k, engine, max_workspace, n_threads, doc_filter)


def _shard_finish(shard: _Shard, finish):
    return finish()


def _on_device(device: int, fn, *args):
    """``fn(*args)`` under GPU ``device`` (on a thread of its own, whose current device is not the caller's)."""
    import cupy

    with cupy.cuda.Device(device):
        return fn(*args)


def _query_batch(Q):
    """The query CSR ``Q`` serialized once (``distributed.protocol.Serialized``), for every worker's call: the
    message to each worker carries the same header and frames (the arrays' buffers, no copy), none pickled
    again per worker; the worker receives the CSR itself."""
    from distributed.protocol import Serialized, serialize

    return Serialized(*serialize(Q, serializers=("dask", "pickle"), on_error="raise"))


class _ShardEngine:
    """A shard's long-lived search engine on its worker (a dask actor): a query batch is one call sent
    straight to the worker that holds the shard, with no task for the scheduler to place.

    A call starts its batch on one thread and waits for it on another (:meth:`topk` is a coroutine, run on
    the worker's event loop): the next batch, sent while this one is scored, is started as soon as it
    arrives, so the device scores it while this one's results are copied out and sent back, as the engines
    of one process do (``devices=``)."""

    def __init__(self, shard: _Shard):
        self.shard = shard
        self._start = ThreadPoolExecutor(1, thread_name_prefix="cutext-shard-start")
        self._finish = ThreadPoolExecutor(1, thread_name_prefix="cutext-shard-finish")

    async def topk(self, Q, k: int, engine: str, max_workspace, n_threads, doc_filter=None):
        import asyncio

        from distributed.protocol import Serialized, deserialize

        if isinstance(Q, Serialized):  # an in-process worker is handed the message's objects as they are
            Q = deserialize(Q.header, Q.frames)
        loop = asyncio.get_running_loop()
        clock = StepClock(np)  # $CUTEXT_GPUTEXT_PROFILE=1: the worker's side of a batch (queue waits included)
        finish = await loop.run_in_executor(self._start, _shard_topk_start, self.shard, Q, k, engine,
                                            max_workspace, n_threads, doc_filter)
        clock("shard: start (worker)")
        out = await loop.run_in_executor(self._finish, finish)
        clock("shard: finish (worker)")
        return out


def _shard_dense(shard: _Shard, Q):
    return shard.sm.dense(Q)


def _shard_info(shard: _Shard):
    return shard.lo, shard.hi, shard.backend, shard.sm.nonnegative


def shard_ranges(lengths: np.ndarray, n_shards: int) -> list[tuple[int, int]]:
    """Split items ``0..N-1`` (documents, or whole segments) into at most ``n_shards`` contiguous non-empty
    ranges of about equal weight (``lengths``: postings or tokens, +1 each so that empty items count).
    Each cut is the item boundary nearest to its share ``i / n_shards`` of the total: with few, large
    items (segments) the first boundary past the share could leave one shard a third of the work."""
    N = len(lengths)
    if N == 0:
        return []
    ends = np.concatenate([[0.0], np.cumsum(np.asarray(lengths, np.float64) + 1.0)])  # ends[j]: weight of 0..j-1
    cuts = [0]
    for i in range(1, n_shards):
        t = ends[-1] * i / n_shards
        j = int(np.searchsorted(ends, t))  # ends[j - 1] < t <= ends[j]
        if j > 0 and t - ends[j - 1] <= ends[min(j, N)] - t:
            j -= 1
        cuts.append(min(max(j, cuts[-1]), N))
    cuts.append(N)
    cuts = sorted(set(cuts))
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]
