"""The example notebooks run top to bottom on the CPU backend and show what they should.

The notebooks are executed with nbclient in a kernel that is this interpreter
(``sys.executable``): a kernelspec written to a temporary folder and put first on
``JUPYTER_PATH``, so neither the user's nor the environment's ``python3`` kernelspec (whose
``argv[0]`` is a bare ``python`` found on ``PATH``) decides which Python runs the notebook.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
DATALAKE = NOTEBOOKS / "bm25_datalake.ipynb"
KERNEL = "python3"  # the name the notebooks' metadata asks for

# Anserini's published BM25 (flat index, k1=0.9, b=0.4) on the SciFact test queries.
ANSERINI_NDCG10, ANSERINI_R100 = 0.6789, 0.9253


@pytest.fixture
def kernel(tmp_path_factory, monkeypatch):
    """A ``python3`` kernelspec whose argv runs this interpreter, first on JUPYTER_PATH."""
    from jupyter_client.kernelspec import KernelSpecManager

    jp = tmp_path_factory.mktemp("jupyter")
    spec = jp / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (cutext tests)",
        "language": "python",
    }), encoding="utf-8")
    monkeypatch.setenv("JUPYTER_PATH", str(jp))
    monkeypatch.delenv("MPLBACKEND", raising=False)  # let ipykernel choose its inline backend
    assert KernelSpecManager().get_kernel_spec(KERNEL).argv[0] == sys.executable
    return KERNEL


def _execute(nb, cwd: Path, kernel_name: str):
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name=kernel_name,
                                     resources={"metadata": {"path": str(cwd)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    return nb


def _outputs(nb) -> tuple[str, list[dict]]:
    """All printed and displayed text of the executed notebook, and every output object."""
    texts, outs = [], []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            outs.append(out)
            if out.output_type == "stream":
                texts.append(out.text)
            elif out.output_type in ("execute_result", "display_data"):
                texts.append(out.get("data", {}).get("text/plain", ""))
    return "\n".join(texts), outs


def _metric(text: str, label: str) -> float:
    """The number printed on the one line ``label = <number>`` of a notebook's output."""
    m = re.findall(rf"^{re.escape(label)} = (-?[0-9]+(?:\.[0-9]+)?)\s*$", text, flags=re.M)
    assert len(m) == 1, f"expected one line '{label} = <value>' in the notebook output"
    return float(m[0])


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.name)
def test_committed_notebook_has_no_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:80]


def test_bm25_datalake_notebook(kernel, tmp_path, monkeypatch):
    work = tmp_path / "work"
    monkeypatch.setenv("CUTEXT_NOTEBOOK_WORKDIR", str(work))
    nb = _execute(nbformat.read(DATALAKE, as_version=4), NOTEBOOKS, kernel)
    text, outs = _outputs(nb)

    assert not [o for o in outs if o.output_type == "error"]
    assert f"working folder:  {work}" in text
    assert f"repository root: {ROOT}" in text

    # 1. Parquet in: 4 files holding the whole corpus.
    parts = sorted((work / "scifact-corpus").glob("*.parquet"))
    assert len(parts) == 4
    import pyarrow.parquet as pq

    assert sum(pq.ParquetFile(p).metadata.num_rows for p in parts) == 5183

    # 2. Index out: on the CPU, every table written and shown.
    assert "backend: cpu" in text
    index = work / "scifact-bm25"
    meta = json.loads((index / "index.json").read_text(encoding="utf-8"))
    assert meta["backend"] == "cpu" and meta["N"] == 5183 and meta["format"] == "parquet"
    assert (index / "vocab.parquet").is_file()
    assert list((index / "documents").glob("*.parquet")) and list((index / "postings").glob("*.parquet"))
    for table in ("vocab.parquet", "documents/", "postings/"):
        assert re.search(rf"^{re.escape(table)}\s+[0-9,]+ rows", text, flags=re.M), table

    # 3. Evaluation: Anserini's SciFact BM25 effectiveness.
    assert abs(_metric(text, "nDCG@10") - ANSERINI_NDCG10) <= 0.01
    assert abs(_metric(text, "R@100") - ANSERINI_R100) <= 0.01
    assert 0.0 < _metric(text, "MAP") <= 1.0

    # 4. A plot: displayed inline and saved as a PNG.
    assert any("image/png" in o.get("data", {}) for o in outs)
    png = work / "scifact-bm25.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # 5. Run out: the ranked run as Parquet.
    import pandas as pd

    run = pd.read_parquet(work / "scifact-run.parquet")
    assert {"query_id", "doc_id", "rank", "score"} <= set(run.columns)
    assert run["query_id"].nunique() == 300 and run.groupby("query_id").size().max() == 100


def test_datalake_notebook_finds_the_repository_from_its_root(kernel, tmp_path, monkeypatch):
    """Run with cwd = the repository root, the set-up cell still finds data/ (walks up to pyproject.toml)."""
    monkeypatch.setenv("CUTEXT_NOTEBOOK_WORKDIR", str(tmp_path))
    nb = nbformat.read(DATALAKE, as_version=4)
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells = nb.cells[: first + 1]
    text, _ = _outputs(_execute(nb, ROOT, kernel))
    assert f"repository root: {ROOT}" in text
    assert f"working folder:  {tmp_path}" in text
