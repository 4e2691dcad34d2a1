"""Execute notebooks on the CPU backend: into a copy by default, or in place (``--in-place``) so that
they are committed with their outputs and plots.

Usage (from anywhere; needs ``pip install -e '.[notebooks]'`` and the datasets the notebooks fetch)::

    python notebooks/execute.py                           # every notebook of this folder, into a temporary folder
    python notebooks/execute.py lda_topics.ipynb          # some of them
    python notebooks/execute.py --out executed/           # the executed copies kept in executed/
    python notebooks/execute.py --in-place                # rewrite the committed notebooks with their outputs

Without ``--in-place`` the committed notebooks are never written; the executed copies go to ``--out``
(created if needed), else to a fresh temporary folder, and their paths are printed.

Each notebook runs top to bottom with nbclient in a kernel that is this interpreter, with cwd =
``notebooks/``, ``CUDA_VISIBLE_DEVICES=""`` (so ``backend="auto"`` picks the CPU) and its working
files under ``$CUTEXT_NOTEBOOK_WORKDIR`` = ``<tmp>/cutext-notebooks/<name>`` (emptied first).  The notebook's
own metadata is kept (no kernel version, no timings), so a re-run changes only the outputs.  A
notebook whose outputs would exceed :data:`MAX_BYTES` is refused: print less (no whole tables).
``tests/notebooks/test_committed.py`` checks the committed result; ``tests/notebooks/test_<name>.py``
execute the notebooks again.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
MAX_BYTES = 600_000  # a committed notebook, outputs and images included


def _kernelspec(folder: Path) -> str:
    """A ``python3`` kernelspec running this interpreter, first on JUPYTER_PATH."""
    spec = folder / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (ipykernel)", "language": "python"}), encoding="utf-8")
    os.environ["JUPYTER_PATH"] = str(folder)
    return "python3"


def execute(path: Path, dest: Path, workdir: Path | None = None) -> int:
    """Execute the notebook ``path`` (cwd: its folder) and write it with its outputs to ``dest`` (``path``
    itself to update it in place); returns its size in bytes.

    Raises
    ------
    nbclient.exceptions.CellExecutionError
        A cell failed (nothing is written).
    ValueError
        The executed notebook is larger than :data:`MAX_BYTES` (nothing is written).
    """
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    metadata = json.loads(json.dumps(nb.metadata))
    with tempfile.TemporaryDirectory(prefix="cutext-kernel-") as kdir:
        kernel = _kernelspec(Path(kdir))
        work = workdir or Path(tempfile.gettempdir()) / "cutext-notebooks" / path.stem  # stable: quiet diffs
        if workdir is None and work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True, exist_ok=True)
        os.environ["CUTEXT_NOTEBOOK_WORKDIR"] = str(work)
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        os.environ.pop("MPLBACKEND", None)  # ipykernel's inline backend: the plots are embedded
        nbclient.NotebookClient(nb, timeout=1200, kernel_name=kernel, record_timing=False,
                                resources={"metadata": {"path": str(path.parent)}}).execute()
    nb.metadata = nbformat.from_dict(metadata)
    nbformat.validate(nb)
    text = nbformat.writes(nb) + "\n"
    if len(text.encode()) > MAX_BYTES:
        raise ValueError(f"{path}: {len(text.encode()):,} bytes with outputs (limit {MAX_BYTES:,}); print less")
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text, encoding="utf-8")
    return len(text.encode())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebooks", nargs="*", help="notebook names or paths (default: every *.ipynb here)")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--in-place", action="store_true", help="rewrite the notebooks themselves with their outputs")
    where.add_argument("--out", type=Path, metavar="DIR",
                       help="write the executed copies into DIR (default: a fresh temporary folder)")
    args = ap.parse_args(argv)
    paths = [Path(p) if Path(p).exists() else HERE / p for p in args.notebooks] or sorted(HERE.glob("*.ipynb"))
    out = None if args.in_place else (args.out or Path(tempfile.mkdtemp(prefix="cutext-executed-notebooks-")))
    for p in paths:
        p = p.resolve()
        dest = p if out is None else out / p.name
        print(f"{p.name}: executing ...", flush=True)
        try:
            n = execute(p, dest)
        except Exception as exc:  # noqa: BLE001  # a cell's error: told plainly, not as a kernel's coloured traceback
            if type(exc).__name__ != "CellExecutionError":
                raise
            print(cell_error(p.name, exc), file=sys.stderr, flush=True)
            return 2 if missing_dataset(exc) else 1
        print(f"{p.name}: {n:,} bytes with outputs -> {dest}", flush=True)
    return 0


ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def missing_dataset(exc) -> str | None:
    """The dataset whose absence stopped a notebook (a cell raising ``DatasetNotFoundError``), or None."""
    from cutext.pipelines.datasets import not_found_name

    if getattr(exc, "ename", None) != "DatasetNotFoundError":
        return None
    return not_found_name(ANSI.sub("", str(getattr(exc, "evalue", ""))))


def cell_error(name: str, exc) -> str:
    """What to print for a notebook stopped by a cell's error ``exc`` (nbclient's ``CellExecutionError``): one
    line with the command that gets a missing dataset, else the kernel's traceback without colour codes."""
    from cutext.pipelines.datasets import how_to_get

    dataset = missing_dataset(exc)
    if dataset is not None:
        return (f"error: {name} needs dataset {dataset!r}, which is not here and could not be downloaded: "
                f"{how_to_get(dataset)} (or set CUTEXT_DATA to a folder holding it)")
    return f"error: {name}: a cell raised {exc.ename}\n{ANSI.sub('', str(exc))}"


if __name__ == "__main__":
    sys.exit(main())
