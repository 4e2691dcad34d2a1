"""An index built on the GPU with ``store_text=True`` keeps the texts a CPU build keeps (cudf text to the host
through Arrow), from one read partition and from several."""
from __future__ import annotations

import json

import pytest

from cutext import pipelines
from cutext.stages.engines.bm25_index import BM25Index

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("blocksize", [None, 1 << 18])
def test_gpu_build_stores_the_texts_of_a_cpu_build(tmp_path, data_dir, blocksize):
    src = data_dir / "cacm" / "cacm.json"
    recs = [json.loads(x) for x in src.read_text(encoding="utf-8").splitlines()]
    kw = dict(store_text=True, progress=False, blocksize=blocksize)
    gpu = BM25Index.load(pipelines.run("bm25", src, out=tmp_path / "gpu", backend="gpu", **kw).path, backend="cpu")
    cpu = BM25Index.load(pipelines.run("bm25", src, out=tmp_path / "cpu", backend="cpu", **kw).path, backend="cpu")
    ids = [r["id"] for r in recs]
    assert gpu.docs(ids) == cpu.docs(ids) == [r["contents"] for r in recs]
    q = {"q1": "parallel sorting algorithms"}
    a, b = gpu.search(q, k=10, with_text=True), cpu.search(q, k=10, with_text=True)
    assert a["text"].tolist() == b["text"].tolist() == [gpu.doc(s) for s in a["source_id"]]
