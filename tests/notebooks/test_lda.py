"""notebooks/lda_topics.ipynb runs top to bottom on the CPU backend and shows what it should."""
from __future__ import annotations

import re

import pytest

from helpers import need_data
from notebook_helpers import NOTEBOOKS, _execute, _outputs, kernel, nbformat  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves this module out

LDA_NB = NOTEBOOKS / "lda_topics.ipynb"



def test_lda_topics_notebook(kernel, tmp_path, monkeypatch, shared_data):  # noqa: F811
    monkeypatch.setenv("CUTEXT_NOTEBOOK_WORKDIR", str(tmp_path))
    monkeypatch.setenv("CUTEXT_DATA", str(shared_data))
    need_data("lda-reuters")  # what the notebook fetches: skipped by name where it is not here
    nb = _execute(nbformat.read(LDA_NB, as_version=4), NOTEBOOKS, kernel)
    text, outs = _outputs(nb)
    assert not [o for o in outs if o.output_type == "error"]
    assert "backend: cpu" in text
    for name in ("params.json", "topic_word.parquet", "doc_topic.parquet", "llpt.parquet", "vocab.parquet"):
        assert name in text
    ll = {m[0]: float(m[1]) for m in re.findall(r"^LLPT (\w+) = (-[0-9]+\.[0-9]+)\s*$", text, flags=re.MULTILINE)}
    assert set(ll) == {"sparse", "three_branch"}
    assert abs(ll["sparse"] - ll["three_branch"]) < 0.02 * abs(ll["sparse"])
    assert -12.0 < ll["sparse"] < -9.0  # bits per token on a 4,258-word vocabulary (log2 4258 = 12.06)
    skipped = float(re.search(r"^skipped at the last iteration = ([0-9.]+)", text, flags=re.MULTILINE).group(1))
    assert skipped > 0.1
    png = tmp_path / "reuters-llpt.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert any("image/png" in o.get("data", {}) for o in outs)
    assert re.search(r"pope.*topic|topic.*pope", text)  # the pope/Vatican story finds its topic
    assert "held-out perplexity" in text
