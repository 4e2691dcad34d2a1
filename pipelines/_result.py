"""Result of a pipeline run; the output directory helpers live in :mod:`cutext.stages.output`."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from cutext.stages.output import atomic_directory, check_output, write_json  # noqa: F401 (re-exported)


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
    """

    pipeline: str
    path: Path
    backend: str
    scheduler: str
    n_workers: int
    counts: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["path"] = str(self.path)
        return d

    def __str__(self) -> str:  # a short human summary for the CLI
        t = ", ".join(f"{k} {v:.2f}s" for k, v in self.timings.items())
        c = ", ".join(f"{k}={v}" for k, v in self.counts.items())
        return (f"{self.pipeline}: wrote {self.path} on {self.backend} ({self.scheduler}, "
                f"{self.n_workers} worker(s))\n  {c}\n  {t}")
