"""notebooks/stream_clustering.ipynb runs top to bottom on the CPU backend and shows what it should."""
from __future__ import annotations

import json

import pytest

from helpers import need_data
from notebook_helpers import NOTEBOOKS, _execute, _metric, _outputs, kernel  # noqa: F401  (kernel is a fixture)

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves this module out

nbformat = pytest.importorskip("nbformat")

NOTEBOOK = NOTEBOOKS / "stream_clustering.ipynb"




def test_stream_clustering_notebook(kernel, tmp_path, monkeypatch, shared_data):  # noqa: F811
    import pandas as pd

    monkeypatch.setenv("CUTEXT_NOTEBOOK_WORKDIR", str(tmp_path))
    monkeypatch.setenv("CUTEXT_DATA", str(shared_data))
    need_data("reuters21578")  # what the notebook fetches: skipped by name where it is not here
    nb = _execute(nbformat.read(NOTEBOOK, as_version=4), NOTEBOOKS, kernel)
    text, outs = _outputs(nb)
    assert not [o for o in outs if o.output_type == "error"]
    assert "backend: cpu" in text
    out = tmp_path / "reuters-clusters"
    meta = json.loads((out / "cluster.json").read_text())
    assert meta["params"]["order_by"] == "date" and meta["counts"]["n_docs"] == 3000
    n = _metric(text, "clusters")
    assert n == meta["counts"]["n_clusters"] and 1 < n < 3000
    a = pd.read_parquet(out / "assignments.parquet")
    assert len(a) == 3000 and int(a["new_cluster"].sum()) == n
    # clusters carry topic information: better than the same sizes shuffled
    assert _metric(text, "NMI") > _metric(text, "NMI shuffled") + 0.05
    assert _metric(text, "purity") > _metric(text, "purity shuffled") + 0.05
    # the plot: shown inline and saved
    assert any("image/png" in o.get("data", {}) for o in outs)
    assert (tmp_path / "reuters-clusters.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the live feed continued from the saved state
    assert _metric(text, "live stories") == 300
    assert 0 < _metric(text, "joined an existing cluster") <= 300
    assert n <= _metric(text, "clusters after the feed") <= n + 300
