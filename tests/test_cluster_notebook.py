"""notebooks/stream_clustering.ipynb runs top to bottom on the CPU backend and shows what it should."""
from __future__ import annotations

import json
import re

import pytest
from test_notebooks import NOTEBOOKS, _execute, _outputs, kernel  # noqa: F401  (kernel is a fixture)

nbformat = pytest.importorskip("nbformat")

NOTEBOOK = NOTEBOOKS / "stream_clustering.ipynb"


def _value(text, label):
    m = re.findall(rf"^{re.escape(label)} = ([0-9.]+)\s*$", text, flags=re.M)
    assert len(m) == 1, f"expected one line '{label} = <value>' in the notebook output"
    return float(m[0])


def test_committed_notebook_has_no_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:80]


def test_stream_clustering_notebook(kernel, tmp_path, monkeypatch, shared_data):  # noqa: F811
    import pandas as pd

    monkeypatch.setenv("CUTEXT_NOTEBOOK_WORKDIR", str(tmp_path))
    monkeypatch.setenv("CUTEXT_DATA", str(shared_data))
    nb = _execute(nbformat.read(NOTEBOOK, as_version=4), NOTEBOOKS, kernel)
    text, outs = _outputs(nb)
    assert not [o for o in outs if o.output_type == "error"]
    assert "backend: cpu" in text
    out = tmp_path / "reuters-clusters"
    meta = json.loads((out / "cluster.json").read_text())
    assert meta["params"]["order_by"] == "date" and meta["counts"]["n_docs"] == 3000
    n = _value(text, "clusters")
    assert n == meta["counts"]["n_clusters"] and 1 < n < 3000
    a = pd.read_parquet(out / "assignments.parquet")
    assert len(a) == 3000 and int(a["new_cluster"].sum()) == n
    # clusters carry topic information: better than the same sizes shuffled
    assert _value(text, "NMI") > _value(text, "NMI shuffled") + 0.05
    assert _value(text, "purity") > _value(text, "purity shuffled") + 0.05
    # the plot: shown inline and saved
    assert any("image/png" in o.get("data", {}) for o in outs)
    assert (tmp_path / "reuters-clusters.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the live feed continued from the saved state
    assert _value(text, "live stories") == 300
    assert 0 < _value(text, "joined an existing cluster") <= 300
    assert n <= _value(text, "clusters after the feed") <= n + 300
