"""Result of a pipeline run; the output directory helpers live in :mod:`cutext.stages.runtime.output`."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cutext.stages.engines.lda_model import LDAModel
from cutext.stages.runtime.output import atomic_directory, check_output, param_files, write_json  # noqa: F401 (re-exported)
from cutext.stages.runtime.params import count


def default_out(name: str) -> str:
    """The one default of ``out=`` for every pipeline: ``"<name>-out"`` in the working directory.

    ``pipelines.run("bm25", path)`` writes ``bm25-out/``, ``run("lda", path)`` ``lda-out/`` and so on;
    the command line uses the same default for ``--out``.  As any ``out=``, an existing directory is
    replaced only when it is an earlier output of the same pipeline (:mod:`cutext.stages.runtime.output`).
    """
    return f"{name}-out"


def _fmt(v) -> str:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.4f}" if abs(v) < 1e4 else f"{v:,.1f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


@dataclass
class RunResult:
    """What a pipeline run did.

    Attributes
    ----------
    pipeline : str
    path : pathlib.Path
        The output directory (complete: it appears only once everything is written).
    backend : str
        ``"cpu"`` or ``"gpu"``: the backend that actually ran.
    scheduler : str
        ``"sync"``, ``"threads"``, ``"cluster"`` or ``"client"``.
    n_workers : int
    counts : dict
        Sizes (documents, terms, postings, tokens, empty documents, replaced byte sequences...).
    timings : dict
        Seconds per stage (wall clock; each stage is materialized before the next starts).
    params : dict
    headline : dict
        The pipeline's headline figure(s), first in the summary: ``bm25`` documents and terms,
        ``ngram`` the corpus perplexity, ``lda`` the final LLPT (bits per token), ``cluster`` the
        number of clusters.
    """

    pipeline: str
    path: Path
    backend: str
    scheduler: str
    n_workers: int
    counts: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    headline: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["path"] = str(self.path)
        return d

    def __repr__(self) -> str:  # short: a notebook cell shows this
        h = ", ".join(f"{k}={_fmt(v)}" for k, v in self.headline.items())
        return (f"RunResult({self.pipeline!r}, path={str(self.path)!r}, backend={self.backend!r}"
                + (f", {h}" if h else "") + f", {sum(self.timings.values()):.2f} s)")

    def _repr_html_(self) -> str:
        """A notebook's view: the headline, then counts and stage seconds as two small tables."""
        from html import escape

        def table(title, items, fmt):
            rows = "".join(f"<tr><td>{escape(str(k))}</td><td style='text-align:right'>{escape(fmt(v))}</td></tr>"
                           for k, v in items)
            return f"<table><thead><tr><th colspan='2'>{title}</th></tr></thead><tbody>{rows}</tbody></table>"

        head = ", ".join(f"{escape(str(k))} = <b>{escape(_fmt(v))}</b>" for k, v in self.headline.items())
        return (f"<div><p><code>{escape(self.pipeline)}</code> wrote <code>{escape(str(self.path))}</code> on "
                f"{escape(self.backend)} ({escape(self.scheduler)}, {self.n_workers} worker(s))"
                + (f": {head}" if head else "") + "</p><div style='display:flex;gap:2em'>"
                + table("counts", self.counts.items(), lambda v: f"{v:,}" if isinstance(v, int) else str(v))
                + table("seconds", self.timings.items(), lambda v: f"{v:.3f}")
                + f"</div><p>total {sum(self.timings.values()):.2f} s</p></div>")

    def _needs(self, pipeline: str, what: str) -> None:
        if self.pipeline != pipeline:
            raise ValueError(f"{what} reads a {pipeline!r} output; this is a {self.pipeline!r} result")

    def topic_table(self, n: int = 10):
        """An ``lda`` run's topics, one row a topic (:meth:`cutext.pipelines.lda.LDAModel.topic_table`: topic,
        weight, docs, words), read from the model directory ``path``.

        Raises
        ------
        ValueError
            Not an ``lda`` result, or ``n`` < 1.
        ArtifactError
            The model directory was changed since the run (:meth:`LDAModel.load`).
        """
        self._needs("lda", "topic_table()")
        return LDAModel.load(self.path).topic_table(n)

    def top_terms(self, n: int = 10):
        """A ``cluster`` run's clusters, one row a cluster, largest first: ``cluster_id``, ``size``, ``weight``
        (share of the clustered documents), ``terms`` (the ``n`` heaviest joined by spaces), ``first_doc_id``;
        read from ``clusters.parquet`` (as :meth:`StreamClusterer.top_terms`).

        The file holds the run's ``n_top_terms=`` terms a cluster (10 by default); more come from the
        clusterer's state: ``StreamClusterer.load(path / "state").top_terms(n)``.

        Raises
        ------
        ValueError
            Not a ``cluster`` result, or ``n`` < 1.
        """
        import numpy as np
        import pandas as pd
        import pyarrow.parquet as pq

        self._needs("cluster", "top_terms()")
        n = count("n", n, lo=1)
        cl = pq.read_table(Path(self.path) / "clusters.parquet").to_pandas()
        size = cl["size"].to_numpy(np.int64)
        out = pd.DataFrame({"cluster_id": cl["cluster_id"].to_numpy(np.int64), "size": size,
                            "weight": size / max(int(size.sum()), 1),
                            "terms": [" ".join(t[:n]) for t in cl["terms"]],
                            "first_doc_id": cl["first_doc_id"].to_numpy(np.int64)})
        return out.sort_values(["size", "cluster_id"], ascending=[False, True], ignore_index=True)

    def __str__(self) -> str:  # a short human summary for the CLI
        t = ", ".join(f"{k} {v:.2f}s" for k, v in self.timings.items())
        c = ", ".join(f"{k}={v}" for k, v in self.counts.items())
        h = ", ".join(f"{k} = {_fmt(v)}" for k, v in self.headline.items())
        return (f"{self.pipeline}: wrote {self.path} on {self.backend} ({self.scheduler}, "
                f"{self.n_workers} worker(s))\n" + (f"  {h}\n" if h else "") + f"  {c}\n  {t}")
