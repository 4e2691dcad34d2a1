"""notebooks/ngram_scoring.ipynb runs top to bottom on the CPU backend and shows what it should."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers import need_data
from notebook_helpers import _execute, _metric, _outputs, kernel, nbformat  # noqa: F401  (kernel is a fixture)

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves this module out

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "ngram_scoring.ipynb"




def test_ngram_scoring_notebook(kernel, tmp_path, monkeypatch, shared_data):  # noqa: F811
    work = tmp_path / "work"
    monkeypatch.setenv("CUTEXT_NOTEBOOK_WORKDIR", str(work))
    monkeypatch.setenv("CUTEXT_DATA", str(shared_data))
    need_data("abc-o3-arpa")  # what the notebook fetches: skipped by name where it is not here
    need_data("inaugural-heldout")
    nb = _execute(nbformat.read(NOTEBOOK, as_version=4), NOTEBOOK.parent, kernel)
    text, outs = _outputs(nb)
    assert not [o for o in outs if o.output_type == "error"]
    assert f"working folder:  {work}" in text
    # KenLM's scores shipped with the data, and the data README's perplexity
    assert _metric(text, "max abs diff vs KenLM (tokens)") <= 1e-4
    assert _metric(text, "max abs diff vs KenLM (sentences)") <= 1e-4
    assert _metric(text, "perplexity") == pytest.approx(520.1736, abs=1e-3)
    assert _metric(text, "pipeline perplexity") == pytest.approx(520.1736, abs=1e-3)
    sums = re.findall(r"^order (\d): distribution sums: min = ([0-9.]+) max = ([0-9.]+)$", text, flags=re.MULTILINE)
    assert [int(o) for o, _, _ in sums] == [1, 2, 3]
    for _, lo, hi in sums:
        assert abs(float(lo) - 1) <= 1e-4 and abs(float(hi) - 1) <= 1e-4
    import pyarrow.parquet as pq

    t = pq.read_table(work / "inaugural-ngram" / "scores.parquet")
    assert t.num_rows == 664
    assert set(t.column("source_id").to_pylist()) == {f"inaugural-{i:04d}" for i in range(664)}
    assert (work / "inaugural-ngram" / "ngram.json").is_file()
    assert any("image/png" in o.get("data", {}) for o in outs)
    assert (work / "ngram-scores.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
