"""One pipeline run: the wrapper every pipeline entry point shares around its own stages.

Every pipeline (``bm25``, ``cluster``, ``lda``, ``ngram``) runs the same skeleton::

    run = PipelineRun("bm25", out, manifest="index.json", inputs=[path], overwrite=overwrite,
                      progress=progress)                       # out checked here, before any work
    be = run.resolve_backend(backend)
    with run.shown(), run.compute(be, client=client, nbytes=n) as info, run.output() as tmp:
        corpus = run.stage("read", read, path)                 # timed, progress inside it shown
        ...
        run.write_manifest(tmp, {"N": ..., "timings": run.timings})
    return run.result(info.backend, info.scheduler, info.n_workers, counts, params, headline)

:class:`PipelineRun` owns each piece of that skeleton: the output check
(:func:`cutext.stages.runtime.output.check_output`), the backend resolution, the compute context
(:func:`cutext.stages.runtime.compute.compute_context`), the atomic output directory
(:func:`cutext.stages.runtime.output.atomic_directory`), the progress and wall-clock timings of the
stages (:mod:`cutext.stages.runtime.progress`), the manifest and the :class:`RunResult`.  The
pipeline keeps only its stages, and chooses which pieces it enters and where: a pipeline whose
front end opens its own compute context (``cluster``, ``lda``) enters only :meth:`output`.
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from cutext.kernels._version import __version__
from cutext.kernels.backend import resolve_backend
from cutext.pipelines._result import RunResult
from cutext.stages.runtime.compute import ComputeInfo, compute_context
from cutext.stages.runtime.output import atomic_directory, check_output, check_workers_see, write_json
from cutext.stages.runtime.params import flag
from cutext.stages.runtime.progress import notice_compiles, notice_gpu_compiles, pipeline_progress, progress_bar, stage

__all__ = ["PipelineRun"]


class PipelineRun:
    """One run of a pipeline: output check, backend, compute context, output directory, stages, manifest.

    Creating it checks the output directory, so that a run that could not write its output fails
    before any work.

    Parameters
    ----------
    name : str
        The pipeline's name (``"bm25"``, ``"cluster"``, ``"lda"``, ``"ngram"``): the result's
        ``pipeline``, the prefix of the progress lines, and the manifest kind ``"cutext.<name>"``.
    out : str or os.PathLike
        The output directory: a local path or a ``file://`` URL of one; with a cluster of several hosts, a
        path on a file system every worker mounts when the workers write into it (:meth:`output`).
    manifest : str
        The manifest file inside the output (``"index.json"``, ``"params.json"``...).
    inputs : path, list of paths, or None
        Every local file the run reads (corpus, parameter files such as a stopword list or a model):
        ``out`` may be none of them nor a parent of one, nor lie inside an input folder.
    overwrite : bool
        False: an existing ``out`` is refused even when it is an earlier output of this pipeline.
    progress : bool
        Show the progress inside the stages (:meth:`shown`, :meth:`bar`).

    Attributes
    ----------
    name, kind, manifest : str
    out : str or os.PathLike
        As given.
    path : pathlib.Path
        ``out`` as an absolute local path (a ``file://`` URL's path): the result's ``path``.
    timings : dict of str to float
        Wall-clock seconds per stage, in the order the stages ran (the manifest's and the result's
        ``timings``; a pipeline may also add sums of its own, e.g. the seconds of all iterations).
    backend : str or None
        ``"cpu"`` or ``"gpu"`` once :meth:`resolve_backend` ran.
    info : ComputeInfo or None
        The compute context once :meth:`compute` is entered.

    Raises
    ------
    OutputDirectoryError (FileExistsError)
        ``out`` may not receive this pipeline's output: it is the working directory, an input or a
        parent of either, a file, or a non-empty directory that is not an earlier output of this
        pipeline (:func:`cutext.stages.runtime.output.check_output`).
    ValueError
        ``out`` is a URL of another file system than the local one (``s3://``, ``memory://``...): the
        output is committed by renaming a directory (:mod:`cutext.stages.runtime.output`); ``overwrite`` or
        ``progress`` not a bool.
    """

    def __init__(self, name: str, out, *, manifest: str, inputs=None, overwrite: bool = True,
                 progress: bool = True):
        overwrite, progress = flag("overwrite", overwrite), flag("progress", progress)  # "no" is truthy
        self.name = name
        self.kind = f"cutext.{name}"
        self.out = out
        self.manifest = manifest
        self.inputs = inputs
        self.overwrite = overwrite
        self.progress = progress
        self.timings: dict[str, float] = {}
        self.backend: str | None = None
        self.info: ComputeInfo | None = None
        self._tmp: Path | None = None  # the output's temporary directory, inside output()
        self._written: dict = {}  # {path relative to it: (bytes, crc32)}: see wrote()
        self.path = check_output(out, kind=self.kind, manifest=manifest, inputs=inputs, overwrite=overwrite)
        notice_compiles(progress)  # a first run compiles the CPU kernels for a while: say so once, with the progress

    def resolve_backend(self, backend: str) -> str:
        """The backend that runs: ``"cpu"`` or ``"gpu"`` (``"auto"``: the GPU when cudf and a device
        are present); also kept as :attr:`backend`.

        Raises
        ------
        ValueError
            Unknown backend name.
        RuntimeError
            ``"gpu"`` without cudf, cupy or a visible device.
        """
        self.backend = resolve_backend(backend)
        if self.backend == "gpu":  # a first GPU run on a machine compiles its CUDA kernels: say so once
            notice_gpu_compiles(self.progress)
        return self.backend

    def shown(self) -> contextlib.AbstractContextManager:
        """The block in which :meth:`stage` (and the corpus front end's own stages) show their progress,
        partitions done / total, as ``"<name> <stage>"`` (:func:`cutext.stages.runtime.progress.pipeline_progress`;
        nothing is shown with ``progress=False``)."""
        return pipeline_progress(self.name, self.progress)

    @contextlib.contextmanager
    def compute(self, backend: str, *, client=None, scheduler: str = "auto", nbytes: int = 0,
                n_workers: int | None = None, worker_threads: bool = False) -> Iterator[ComputeInfo]:
        """Where the run computes (:func:`cutext.stages.runtime.compute.compute_context`), kept as :attr:`info`.

        Parameters
        ----------
        backend : {"cpu", "gpu"}
            The resolved backend.
        client : distributed.Client, optional
        scheduler : {"auto", "sync", "threads", "cluster"}
        nbytes : int
            Bytes of input: ``"auto"`` on the CPU stays in-process under 256 MiB.
        n_workers : int, optional
            Workers of a local cluster (with ``worker_threads``, on the CPU below 256 MiB: threads of this
            process).
        worker_threads : bool, default False
            The pipeline's in-process stages run on dask's threads and release the GIL, so ``n_workers`` on
            the CPU may be threads of this process (:func:`cutext.stages.runtime.compute.local_plan`).

        Yields
        ------
        ComputeInfo

        Raises
        ------
        ValueError
            Unknown scheduler, ``n_workers`` < 1, or ``n_workers`` where it sizes nothing.
        GPUOutOfMemoryError (MemoryError)
            A device allocation failed inside the block (GPU backend).
        """
        with compute_context(backend, client=client, scheduler=scheduler, nbytes=nbytes,
                             n_workers=n_workers, worker_threads=worker_threads) as info:
            self.info = info
            yield info

    @contextlib.contextmanager
    def output(self, expect=None, *, workers_write: bool = False) -> Iterator[Path]:
        """A temporary directory beside ``out`` that becomes ``out`` (sealed by its manifest's checksums)
        only when the block succeeds (:func:`cutext.stages.runtime.output.atomic_directory`); ``expect(out)``,
        if given, runs under the output's lock just before the swap and aborts it by raising.

        Parameters
        ----------
        expect : callable, optional
        workers_write : bool, default False
            The dask workers of :meth:`compute`'s client write into the directory themselves: before the
            block runs, every worker is checked to see it and be able to write into it
            (:func:`cutext.stages.runtime.output.check_workers_see`).  Enter :meth:`compute` first.

        Yields
        ------
        pathlib.Path
            The directory to write into.

        Raises
        ------
        OutputDirectoryError
            ``out`` may no longer be replaced (checked again at the swap).
        OutputBusyError
            Another run was replacing ``out`` at the swap; nothing was written.
        OutputNotSharedError (OSError)
            ``workers_write`` and a worker does not see the directory (the message names the worker and
            the path): ``out`` is not on a file system every worker mounts.  Nothing is left behind.
        """
        self._written = {}
        with atomic_directory(self.out, overwrite=self.overwrite, kind=self.kind, manifest=self.manifest,
                              inputs=self.inputs, expect=expect, written=self._written) as tmp:
            client = self.info.client if self.info is not None else None
            if workers_write and client is not None:
                check_workers_see(client, tmp)
            self._tmp = tmp
            try:
                yield tmp
            finally:
                self._tmp = None

    def wrote(self, path, checksum) -> None:
        """Record that the file ``path`` inside :meth:`output`'s directory was written with the CRC32
        ``checksum = (bytes, crc32)`` taken as it was written
        (:func:`cutext.stages.runtime.checksums.open_checksummed`): the seal takes it instead of reading
        the file back (it still reads a file whose size differs)."""
        self._written[Path(path).relative_to(self._tmp).as_posix()] = (int(checksum[0]), str(checksum[1]))

    def stage(self, name: str, fn: Callable, /, *args, **kwargs):
        """Run ``fn(*args, **kwargs)`` as the stage ``name``: its seconds go to ``timings[name]`` and,
        inside :meth:`shown`, the dask partitions it computes move a bar
        (:func:`cutext.stages.runtime.progress.stage`; a stage nested in another shows nothing).

        Returns
        -------
        What ``fn`` returns.
        """
        t0 = time.perf_counter()
        with stage(name):
            out = fn(*args, **kwargs)
        self.timings[name] = time.perf_counter() - t0
        return out

    def start(self, name: str) -> Callable[[], float]:
        """Start timing the stage ``name`` now; calling the returned function records its seconds so far
        in ``timings[name]`` and returns them.  For a stage that ends inside a block it does not
        span (the files written before the manifest that lists the timings)."""
        t0 = time.perf_counter()

        def stop() -> float:
            self.timings[name] = time.perf_counter() - t0
            return self.timings[name]

        return stop

    def bar(self, total: int | None, desc: str, unit: str):
        """A progress counter of the run's own loop (documents, iterations, pieces), or None with
        ``progress=False``: a tqdm bar when standard error is a terminal, else plain lines
        (:func:`cutext.stages.runtime.progress.progress_bar`); the caller closes it."""
        return progress_bar(total=total, desc=desc, unit=unit) if self.progress else None

    def write_manifest(self, tmp: Path, fields: dict) -> None:
        """Write the manifest into the output directory ``tmp``: ``fields`` with the run's ``kind``,
        the cutext ``version`` and the ``created`` local time (key-sorted, indented JSON)."""
        write_json(Path(tmp) / self.manifest, {"kind": self.kind, "version": __version__, **fields,
                                               "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")})

    def result(self, backend: str, scheduler: str, n_workers: int, counts: dict, params: dict,
               headline: dict) -> RunResult:
        """The :class:`RunResult` of the run: its path is ``out`` made absolute, its timings :attr:`timings`.

        Parameters
        ----------
        backend : {"cpu", "gpu"}
            The backend that ran.
        scheduler : str
            Where it ran (``"sync"``, ``"threads"``, ``"cluster"``, ``"client"``, ``"in-process"``).
        n_workers : int
        counts, params, headline : dict
            See :class:`RunResult`.
        """
        return RunResult(self.name, self.path, backend, scheduler, n_workers, counts, self.timings,
                         params, headline=headline)
