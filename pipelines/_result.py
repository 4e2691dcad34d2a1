"""Result of a pipeline run, and the atomic output directory."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path


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


@contextlib.contextmanager
def atomic_directory(out, overwrite: bool = True):
    """Yield a temporary directory next to ``out``; rename it to ``out`` only on success.

    A failure removes the temporary directory and leaves any previous ``out`` untouched, so a
    reader never sees a half-written output.

    Raises
    ------
    FileExistsError
        ``out`` exists and ``overwrite`` is False.
    """
    out = Path(out).absolute()
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists (pass overwrite=True to replace it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:8]
    tmp = out.parent / f".{out.name}.tmp-{tag}"
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{tag}"
        os.replace(out, old)
    os.replace(tmp, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def write_json(path, obj) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=2, sort_keys=True, default=str)
        fh.write("\n")
