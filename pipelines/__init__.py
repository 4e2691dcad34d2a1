"""cutext pipelines: named end-to-end jobs.

>>> from cutext import pipelines
>>> result = pipelines.run("bm25", "corpus/", out="index/")      # doctest: +SKIP
>>> index = pipelines.BM25Index.load(result.path)                 # doctest: +SKIP
>>> run = index.search(["gpu text analytics"], k=10)              # doctest: +SKIP
"""
from __future__ import annotations

import difflib
import importlib

from cutext.kernels._version import __version__
from cutext.pipelines._cli import keyword_owners
from cutext.pipelines._result import RunResult, default_out
from cutext.pipelines.bm25 import BM25Index, build_index
from cutext.pipelines.datasets import DatasetNotFoundError, fetch
from cutext.stages.runtime.compute import local_gpu_cluster
from cutext.stages.runtime.params import UnknownParameterError, check_keywords

# name -> "module:function"; each function is called as f(path, out, **params) and returns a
# RunResult. Modules are imported on first use, so one pipeline's optional dependencies never
# load for another.
PIPELINES = {
    "bm25": "cutext.pipelines.bm25:build_index",
    "ngram": "cutext.pipelines.ngram:score_corpus",
    "cluster": "cutext.pipelines.cluster:cluster_corpus",
    "lda": "cutext.pipelines.lda:train",
}

__all__ = ["__version__", "run", "RunResult", "BM25Index", "build_index", "PIPELINES", "pipeline_function",
           "pipeline_keywords", "UnknownParameterError", "fetch", "DatasetNotFoundError", "local_gpu_cluster"]


def pipeline_function(name: str):
    """The function behind a pipeline name (imports its module).

    Raises
    ------
    ValueError
        Unknown pipeline name, or a pipeline whose module is not in this installation.
    """
    if name not in PIPELINES:
        close = difflib.get_close_matches(str(name), list(PIPELINES), n=2, cutoff=0.6)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(f"unknown pipeline {name!r}{hint} (available: {', '.join(sorted(PIPELINES))})")
    module, func = PIPELINES[name].split(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        raise ValueError(f"pipeline {name!r} is not implemented in this version of cutext") from None
    return getattr(mod, func)


def pipeline_keywords(func) -> set:
    """The keywords a pipeline function takes: its own, and the reader's where it forwards ``**read_kw``
    (:func:`cutext.pipelines._cli.keyword_owners`, which the command line's options are made from)."""
    return set(keyword_owners(func)) - {"path"}


def run(name: str, path, **params) -> RunResult:
    """Run the named pipeline on a corpus.

    Parameters
    ----------
    name : str
        One of ``PIPELINES``: ``"bm25"``, ``"ngram"``, ``"cluster"``, ``"lda"``.
    path : str, os.PathLike, list, or a frame
        The input corpus (file, directory, glob or fsspec URL), or a pandas / cudf / dask /
        dask-cudf DataFrame or Series with ``text_column=`` / ``id_column=`` as for tables
        (:mod:`cutext.stages.readers.frames`: its partitions are the corpus' partitions, nothing is
        written to files).  The command line takes paths only.
    **params
        The pipeline's parameters; ``out=`` names the output directory (default, for every
        pipeline: ``"<name>-out"`` in the working directory, e.g. ``bm25-out``;
        :func:`cutext.pipelines._result.default_out`) and ``backend="auto"|"cpu"|"gpu"``,
        ``client=`` choose where it runs.

    Returns
    -------
    RunResult

    Raises
    ------
    ValueError
        Unknown pipeline name.
    UnknownParameterError (TypeError)
        A keyword the pipeline does not take (reader options are checked against the reader); the
        message names the pipeline, the keyword and the closest valid one.
    """
    func = pipeline_function(name)
    check_keywords(f"pipeline {name!r}", params, pipeline_keywords(func))
    out = params.pop("out", None)
    return func(path, default_out(name) if out is None else out, **params)
