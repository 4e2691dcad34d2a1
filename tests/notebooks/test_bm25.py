"""notebooks/bm25_datalake.ipynb runs top to bottom on the CPU backend and shows what it should."""
from __future__ import annotations

import json
import re

import pytest

from notebook_helpers import (  # noqa: F401  (kernel is a fixture)
    NOTEBOOKS,
    ROOT,
    _execute,
    _metric,
    _outputs,
    kernel,
    nbformat,
)

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves this module out

DATALAKE = NOTEBOOKS / "bm25_datalake.ipynb"

# Anserini's published BM25 (flat index, k1=0.9, b=0.4) on the SciFact test queries.
ANSERINI_NDCG10, ANSERINI_R100 = 0.6789, 0.9253


def test_bm25_datalake_notebook(kernel, tmp_path, monkeypatch):  # noqa: F811
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

    # 2. Index out: on the CPU, a segment a Parquet file of the corpus, every table written and shown.
    assert "backend: cpu" in text
    index = work / "scifact-bm25"
    meta = json.loads((index / "index.json").read_text(encoding="utf-8"))
    assert meta["backend"] == "cpu" and meta["N"] == 5183 and meta["format"] == "parquet"
    assert meta["index_format"] == 2 and len(meta["segments"]) == meta["counts"]["partitions"] == 4
    for name in meta["segments"]:
        assert sorted(p.name for p in (index / "segments" / name).iterdir()) == [
            "docs.parquet", "postings.parquet", "segment.json", "terms.parquet"]
    assert f"4 segments: {meta['segments']}" in text
    for table in ("terms.parquet", "docs.parquet", "postings.parquet"):
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
    assert {"query_id", "doc_id", "source_id", "rank", "score", "doc_index"} <= set(run.columns)
    assert "CPU engine == sparse product: True" in text and "sharded == one index: True" in text
    assert run["query_id"].nunique() == 300 and run.groupby("query_id").size().max() == 100


def test_datalake_notebook_finds_the_repository_from_its_root(kernel, tmp_path, monkeypatch):  # noqa: F811
    """Run with cwd = the repository root, the set-up cell still finds data/ (walks up to pyproject.toml)."""
    monkeypatch.setenv("CUTEXT_NOTEBOOK_WORKDIR", str(tmp_path))
    nb = nbformat.read(DATALAKE, as_version=4)
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells = nb.cells[: first + 1]
    text, _ = _outputs(_execute(nb, ROOT, kernel))
    assert f"repository root: {ROOT}" in text
    assert f"working folder:  {tmp_path}" in text
