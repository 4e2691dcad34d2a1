"""The LDA Gibbs chain on the workers of a dask ``distributed`` Client: one shard of documents per worker,
W summed between the workers after every pass (EZLDA section V-B across processes / machines).

:class:`DistributedGibbs` is :class:`cutext.stages.engines.lda_gibbs.ShardedGibbs` with its shards in other
processes: every worker holds a :class:`_ShardActor` (a ``distributed`` actor) that owns one
:class:`cutext.stages.engines.lda_gibbs.GibbsState` (``shard=True``) of a contiguous group of chunks.  An
iteration is: every shard samples its tokens against the summed W of the previous pass and rebuilds
its local counts; the local W are summed (the *collective*); every shard installs the sum.  Because the
draws are keyed by the token's global document-major position (counter-based RNG), the chain equals the
in-process chain with the same chunking (``ShardedGibbs``, ``GibbsState``) draw for draw.

Collectives (``collective=``):

* ``"nccl"`` -- GPU workers (dask-cuda, one GPU per worker): ``ncclAllReduce`` (sum, int32) of W in device
  memory through ``cupy.cuda.nccl``.  The communicator is set up through the Client: the rank-0 actor
  makes the unique id (``nccl.get_unique_id()``), the client hands it to every actor, every actor joins
  as its rank (``NcclCommunicator(n, uid, rank)``, all at once: the init is collective).  W never leaves
  the GPUs.
* ``"client"`` -- every shard returns its local W (host copy) to the client, which sums them and sends
  the sum to every shard: ``2 n V K`` int32 per pass through the client.  The CPU path (what CI tests)
  and the fallback for GPU workers without NCCL.
* ``"auto"`` -- nccl on GPU workers when ``cupy.cuda.nccl`` is available, else client.
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from cutext.stages.engines.lda_chunk import Chunks
from cutext.stages.engines.lda_gibbs import GibbsState, _sub_chunks, check_state_memory
from cutext.stages.runtime.compute import WorkerActors
from cutext.stages.runtime.progress import released_check

COLLECTIVES = ("auto", "nccl", "client")
# seconds between two looks at a collective's stream (a pass takes milliseconds or more)
_COLLECTIVE_POLL = 50e-6


class _ShardActor:
    """One shard of the chain on one worker (created by :class:`DistributedGibbs` as an actor)."""

    def __init__(self, sub: Chunks, K, alpha, beta, seed, gpu, V):
        # on the worker, against its own memory: refuse a K its shard's V x K arrays do not fit, before allocating
        check_state_memory(sub, K, "sparse", gpu=gpu, V=V, owner="lda worker shard")
        self.state = GibbsState(sub, K, alpha, beta, seed=seed, gpu=gpu, V=V, shard=True)
        self.comm = None
        # this actor's own task: released when the caller lets the run's shards go (it ended, or a shard failed)
        self._released = released_check()

    # -- set-up
    def where(self) -> dict:
        import os

        return {"pid": os.getpid(), "gpu": self.state.gpu,
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}

    def nccl_available(self) -> bool:
        if not self.state.gpu:
            return False
        try:
            from cupy.cuda import nccl

            return bool(getattr(nccl, "available", True))
        except Exception:
            return False

    def nccl_unique_id(self):
        from cupy.cuda import nccl

        return nccl.get_unique_id()

    def nccl_init(self, uid, n: int, rank: int) -> int:
        from cupy.cuda import nccl

        self.comm = nccl.NcclCommunicator(int(n), uid, int(rank))
        return rank

    # -- the chain
    def local_w(self) -> np.ndarray:
        return self.state.host(self.state.W_local)

    def set_w(self, W: np.ndarray) -> None:
        st = self.state
        st.set_global_w(st.xp.asarray(W))

    def allreduce_nccl(self) -> None:
        """W = sum over ranks of W_local, in device memory (every rank calls this at once)."""
        import cupy
        from cupy.cuda import nccl

        st = self.state
        W = cupy.empty_like(st.W_local)
        stream = cupy.cuda.get_current_stream()
        self.comm.allReduce(st.W_local.data.ptr, W.data.ptr, int(W.size), nccl.NCCL_INT32, nccl.NCCL_SUM,
                            stream.ptr)
        self._wait_collective(stream)
        st.set_global_w(W)

    def _wait_collective(self, stream) -> None:
        """Wait for ``stream``, where a collective runs.  A rank whose peer failed before joining it would
        wait for ever (its worker's actor thread with it, and the next run's shard behind that): once the
        caller releases this shard, the communicator is aborted (``ncclCommAbort``) and an error raised.

        Raises
        ------
        RuntimeError
            The run released this shard while the collective waited for a peer.
        """
        while not stream.done:
            if self._released():
                comm, self.comm = self.comm, None
                comm.abort()
                raise RuntimeError("the sum of W across the shards stopped: another shard of the run failed")
            time.sleep(_COLLECTIVE_POLL)

    def step(self, iteration: int, sampler: str, exclude: bool, return_w: bool):
        """Sample a pass and rebuild the local counts; returns (skipped, changed[, local W on the host])."""
        st = self.state
        c = st.sample_pass(iteration, sampler, exclude)
        st.commit()
        st.sync()
        return (c["skipped"], c["changed"], self.local_w() if return_w else None)

    def steps(self, first: int, count: int, sampler: str, exclude: bool, alone: bool) -> list:
        """Iterations ``first .. first + count - 1``, each a pass, the count rebuild and the sum of W (NCCL;
        ``alone``: the only shard's W is the sum), without a round trip to the client between them; one
        ``(skipped, changed, seconds)`` a pass."""
        st, out = self.state, []
        for it in range(first, first + count):
            t0 = time.perf_counter()
            c = st.sample_pass(it, sampler, exclude)
            st.commit()
            if alone:
                st.set_global_w(st.W_local.copy())
            else:
                self.allreduce_nccl()
            out.append((c["skipped"], c["changed"], time.perf_counter() - t0))
        return out

    # -- read-out
    def llpt_sum(self) -> float:
        return self.state.llpt_sum()

    def doc_topic_table(self) -> pd.DataFrame:
        return self.state.doc_topic_table()

    def topic_word_table(self):
        return self.state.topic_word_table()

    def global_w(self) -> np.ndarray:
        return self.state.host(self.state.W)

    def nk(self) -> np.ndarray:
        return self.state.host(self.state.nk)

    def nbytes(self) -> dict:
        return self.state.nbytes()

    def check_invariants(self) -> bool:
        self.state.check_invariants()
        return True


class DistributedGibbs:
    """One LDA chain over the workers of a Client (same interface as ``ShardedGibbs``).

    Parameters
    ----------
    ch : Chunks
        At least ``len(workers)`` chunks; shard ``i`` (on ``workers[i]``) takes a contiguous group of
        chunks, split as ``ShardedGibbs`` splits them.
    K : int
    alpha, beta : float
    seed : int
    client : distributed.Client
    workers : list of str
        Worker addresses, one shard each (default: every worker of the client, sorted).
    gpu : bool
        The shards' arrays are cupy arrays on each worker's current GPU (dask-cuda: one per worker).
    collective : {"auto", "nccl", "client"}
        How W is summed (module docstring).

    Raises
    ------
    ValueError
        Fewer chunks than workers, a client without workers, an unknown collective, ``"nccl"`` on CPU
        shards.
    RuntimeError
        ``collective="nccl"`` where a worker cannot import ``cupy.cuda.nccl``, or where the shards are not
        one per process and GPU (told apart by ``CUDA_VISIBLE_DEVICES``, as dask-cuda sets it); ``"auto"``
        then uses ``"client"``.
    """

    def __init__(self, ch: Chunks, K: int, alpha: float, beta: float, seed: int = 0, *, client, workers=None,
                 gpu: bool = False, collective: str = "auto"):
        if collective not in COLLECTIVES:
            raise ValueError(f"collective must be one of {COLLECTIVES}, got {collective!r}")
        if workers is None:
            workers = sorted(client.scheduler_info().get("workers", {}))
        workers = list(workers)
        n = len(workers)
        if n == 0:
            raise ValueError("the client has no workers to run the LDA shards on")
        C = len(ch.chunk_ptr) - 1
        if C < n:
            raise ValueError(f"{C} chunks for {n} workers (one shard per worker needs n_chunks >= {n})")
        if collective == "nccl" and not gpu:
            raise ValueError("collective='nccl' sums W on GPUs; this run uses the CPU backend (use 'client')")
        bounds = np.linspace(0, C, n + 1).round().astype(int)
        self.ch, self.K, self.gpu, self.client, self.workers = ch, int(K), bool(gpu), client, workers
        self.doc_offsets = [int(ch.chunk_docs[b]) for b in bounds[:-1]]
        futs = []
        for i, w in enumerate(workers):
            sub = _sub_chunks(ch, int(bounds[i]), int(bounds[i + 1]))
            sub.vocab = []  # the shards need V (given), not the words
            [sub_f] = client.scatter([sub], workers=[w], hash=False)
            futs.append(client.submit(_ShardActor, sub_f, K, alpha, beta, seed, self.gpu, ch.V, workers=[w],
                                      allow_other_workers=False, actor=True, pure=False))
        self.actors = WorkerActors(client, futs, workers)  # called on their workers, not through the scheduler
        try:
            self.where = self._gather("where")
            distinct_gpus = False
            if self.gpu:  # NCCL needs one GPU per rank: dask-cuda gives each worker its own first visible device
                vis = [x["cuda_visible_devices"] for x in self.where]
                distinct_gpus = (len({x["pid"] for x in self.where}) == n and None not in vis
                                 and len({v.split(",")[0].strip() for v in vis}) == n)
            if collective == "auto":
                collective = ("nccl" if self.gpu and distinct_gpus and all(self._gather("nccl_available"))
                              else "client")
            elif collective == "nccl":
                if not distinct_gpus:
                    raise RuntimeError("collective='nccl' needs one GPU per worker, told apart by CUDA_VISIBLE_DEVICES "
                                       f"(dask-cuda's LocalCUDACluster / dask-cuda-worker); workers: {self.where}")
                if not all(self._gather("nccl_available")):
                    raise RuntimeError("collective='nccl': cupy.cuda.nccl is not available on every worker "
                                       "(install NCCL, e.g. conda install nccl) -- or use collective='client'")
            self.collective = collective
            if collective == "nccl":
                uid = self.actors.call_one(0, "nccl_unique_id")
                # the communicator init is collective: every rank joins at once
                self.actors.call("nccl_init", per_actor=[(uid, n, r) for r in range(n)])
            self._allreduce(None)
        except BaseException:  # a set-up that failed frees the shards it placed on the workers
            self.actors.release()
            raise

    def _gather(self, method, *args):
        return self.actors.call(method, *args)

    def _allreduce(self, local_ws):
        """Sum the shards' local W and install the sum on every shard."""
        if self.collective == "nccl":
            self._gather("allreduce_nccl")
            return
        if local_ws is None:
            local_ws = self._gather("local_w")
        W = local_ws[0].copy()
        for w in local_ws[1:]:
            W += w
        self._gather("set_w", W)

    def step(self, iteration: int, sampler: str, exclude: bool = True) -> dict:
        """One pass on every shard at once, then the collective; fractions of tokens skipped / changed."""
        res = self._gather("step", iteration, sampler, exclude, self.collective == "client")
        self._allreduce([r[2] for r in res] if self.collective == "client" else None)
        n = max(1, self.ch.n_tokens)
        return {"skipped": sum(r[0] for r in res) / n, "changed": sum(r[1] for r in res) / n}

    def steps(self, first: int, count: int, sampler: str, exclude: bool = True) -> list:
        """Iterations ``first .. first + count - 1`` in one call to every shard.

        With NCCL (or a single shard) the shards run the passes and the sums of W among themselves (one
        round trip to the client for ``count`` iterations); through the client, one :meth:`step` an
        iteration.

        Returns
        -------
        list of dict
            A dict an iteration: ``skipped``, ``changed`` (fractions of tokens) and ``seconds`` (the
            slowest shard's time for that pass, its sum of W included).
        """
        n = max(1, self.ch.n_tokens)
        alone = len(self.actors) == 1
        if self.collective != "nccl" and not alone:
            out = []
            for it in range(first, first + count):
                t0 = time.perf_counter()
                out.append({**self.step(it, sampler, exclude), "seconds": time.perf_counter() - t0})
            return out
        per_shard = self._gather("steps", first, count, sampler, exclude, alone)
        return [{"skipped": sum(r[i][0] for r in per_shard) / n, "changed": sum(r[i][1] for r in per_shard) / n,
                 "seconds": max(r[i][2] for r in per_shard)} for i in range(count)]

    def sync(self):  # every actor call above waits for its shard
        pass

    @property
    def W(self) -> np.ndarray:
        """The summed W (host copy from shard 0), int32 (V, K)."""
        return self.actors.call_one(0, "global_w")

    @property
    def nk(self) -> np.ndarray:
        return self.actors.call_one(0, "nk")

    def host(self, a) -> np.ndarray:
        return a

    def topic_word_table(self):
        return self.actors.call_one(0, "topic_word_table")

    def llpt(self) -> float:
        """EZLDA Eq. 5 (log2, bits per token) over every shard's tokens."""
        return sum(self._gather("llpt_sum")) / max(1, self.ch.n_tokens)

    def log_likelihood(self) -> float:
        return sum(self._gather("llpt_sum"))

    def doc_topic_table(self) -> pd.DataFrame:
        tabs = []
        for t, off in zip(self._gather("doc_topic_table"), self.doc_offsets):
            t["doc_id"] += off
            tabs.append(t)
        return pd.concat(tabs, ignore_index=True)

    def nbytes(self) -> dict:
        out: dict = {}
        for b in self._gather("nbytes"):
            for k, v in b.items():
                out[k] = out.get(k, 0) + v
        return out

    def check_invariants(self):
        """Every shard's invariants, the same summed W on every shard, sum W = N."""
        self._gather("check_invariants")
        Ws = self._gather("global_w")
        n = self.ch.n_tokens
        assert int(Ws[0].sum(dtype=np.int64)) == n and int(Ws[0].min()) >= 0, "sum W != N or negative W"
        for W in Ws[1:]:
            np.testing.assert_array_equal(W, Ws[0])

    def close(self):
        """Release the actors (their shards' memory on the workers)."""
        self.actors.release()


__all__ = ["COLLECTIVES", "DistributedGibbs"]
