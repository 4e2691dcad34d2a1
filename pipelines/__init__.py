"""cutext pipelines: named end-to-end jobs.

>>> from cutext import pipelines
>>> result = pipelines.run("bm25", "corpus/", out="index/")      # doctest: +SKIP
>>> index = pipelines.BM25Index.load(result.path)                 # doctest: +SKIP
>>> run = index.search(["gpu text analytics"], k=10)              # doctest: +SKIP
"""
from __future__ import annotations

from cutext.pipelines._result import RunResult
from cutext.pipelines.bm25 import BM25Index, build_index

PIPELINES = {"bm25": build_index}

__all__ = ["run", "RunResult", "BM25Index", "build_index", "PIPELINES"]


def run(name: str, path, **params) -> RunResult:
    """Run the named pipeline on a corpus.

    Parameters
    ----------
    name : str
        One of ``PIPELINES`` (``"bm25"``).
    path : str, os.PathLike or list
        The input corpus (file, directory, glob or fsspec URL).
    **params
        The pipeline's parameters; ``out=`` names the output directory (default
        ``"<name>-index"`` in the working directory) and ``backend="auto"|"cpu"|"gpu"``,
        ``client=`` choose where it runs.

    Returns
    -------
    RunResult

    Raises
    ------
    ValueError
        Unknown pipeline name.
    """
    if name not in PIPELINES:
        raise ValueError(f"unknown pipeline {name!r}; available: {sorted(PIPELINES)}")
    out = params.pop("out", f"{name}-index")
    return PIPELINES[name](path, out, **params)
