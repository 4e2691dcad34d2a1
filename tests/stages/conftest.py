"""Fixtures of the tests of the index's reader and its per-segment search."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def pieces(data_dir, tmp_path_factory):
    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()[:900]
    folder = tmp_path_factory.mktemp("cacm-pieces")
    out = []
    for i in range(3):
        p = folder / f"p{i}.jsonl"
        p.write_text("\n".join(lines[i * 300:(i + 1) * 300]) + "\n", encoding="utf-8")
        out.append(p)
    return out
