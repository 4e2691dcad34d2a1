"""BM25F on the GPU: an index of weighted fields (``field_weights`` / ``field_b``) weighed on the device at load
(``_segment_matrix``: the per-field tf and lengths go to the device, ``FieldWeights`` runs on cupy arrays),
loaded whole and sharded over devices, built on the GPU, appended to, deleted from and compacted there: the
same matrix and results as the CPU's."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest

from cutext import pipelines
from cutext.stages.engines.bm25_index import BM25Index

from helpers import scifact_topics

pytestmark = pytest.mark.gpu

READER = {"text_column": ["title", "text"], "id_column": "_id"}
SPEC = dict(field_weights={"title": 2.0, "text": 1.0}, field_b={"title": 0.5, "text": 0.8}, stopwords="lucene",
            progress=False, **READER)


def _queries(data_dir) -> dict:
    return dict(list(scifact_topics(data_dir).items())[:100])


def _assert_same_search(got: BM25Index, want: BM25Index, qs: dict, k: int = 20):
    assert list(got.source_ids) == list(want.source_ids)
    a, b = got.search(qs, k=k), want.search(qs, k=k, engine="cpu")
    pd.testing.assert_frame_equal(a.drop(columns="score"), b.drop(columns="score"))
    np.testing.assert_allclose(a["score"], b["score"], rtol=1e-6)


def _host(matrix):
    """(indptr, indices, data) of a scipy or cupyx CSR, on the host."""
    get = (lambda x: x.get()) if hasattr(matrix.data, "get") else np.asarray
    return get(matrix.indptr).astype(np.int64), get(matrix.indices).astype(np.int64), get(matrix.data)


@pytest.fixture(scope="module")
def scifact_bm25f(tmp_path_factory, data_dir):
    """SciFact as a BM25F index of several segments, built on the CPU (from uncompressed lines: a .gz file is
    one read partition)."""
    folder = tmp_path_factory.mktemp("f")
    with gzip.open(data_dir / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        (folder / "scifact.jsonl").write_text(fh.read(), encoding="utf-8")
    r = pipelines.run("bm25", folder / "scifact.jsonl", out=folder / "ix", backend="cpu", blocksize=1 << 20, **SPEC)
    assert len(json.loads((r.path / "index.json").read_text())["segments"]) >= 2
    return r.path


def test_device_weights_equal_the_host_weights(scifact_bm25f, data_dir):
    cpu = BM25Index.load(scifact_bm25f, backend="cpu")
    gpu = BM25Index.load(scifact_bm25f, backend="gpu")
    assert gpu.backend == "gpu"
    (ip_c, ix_c, w_c), (ip_g, ix_g, w_g) = _host(cpu.matrix), _host(gpu.matrix)
    np.testing.assert_array_equal(ip_g, ip_c)
    np.testing.assert_array_equal(ix_g, ix_c)
    np.testing.assert_allclose(w_g, w_c, rtol=1e-6)  # the same float64 formula on the device, then float32
    _assert_same_search(gpu, cpu, _queries(data_dir))
    q = next(iter(_queries(data_dir).values()))
    np.testing.assert_allclose(gpu.get_scores(q), cpu.get_scores(q), rtol=1e-6)


@pytest.mark.parametrize("devices", [[0], [0, 0]])
def test_shards_on_devices_equal_one_index(scifact_bm25f, data_dir, devices):
    """The sharded load takes the global per-field lengths from every segment's documents (segment_heads)."""
    got = BM25Index.load(scifact_bm25f, backend="gpu", devices=devices)
    assert [s[2] for s in got.shards] == ["gpu:0"] * len(devices)
    _assert_same_search(got, BM25Index.load(scifact_bm25f, backend="cpu"), _queries(data_dir), k=100)


def test_living_index_built_on_the_gpu_equals_a_one_shot_cpu_build(tmp_path, data_dir):
    """Build and append on the GPU, delete and compact through a GPU-loaded index: the results of a one-shot
    CPU build of the live documents at every step."""
    with gzip.open(data_dir / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        lines = [x for x in fh.read().splitlines() if x.strip()]
    ids = [str(json.loads(x)["_id"]) for x in lines]
    qs = _queries(data_dir)

    def write(name, ls):
        p = tmp_path / f"{name}.jsonl"
        p.write_text("\n".join(ls) + "\n", encoding="utf-8")
        return p

    def check(index, live):
        ref = pipelines.run("bm25", write("ref", [lines[j] for j in live]), out=tmp_path / "ref", backend="cpu",
                            **SPEC)
        assert index.backend == "gpu"
        _assert_same_search(index, BM25Index.load(ref.path, backend="cpu"), qs)

    ix = tmp_path / "ix"
    half = len(lines) // 2
    pipelines.run("bm25", write("a", lines[:half]), out=ix, backend="gpu", scheduler="sync", **SPEC)
    # the GPU build's segments hold the CPU build's per-field tf and lengths: the same host weights
    cpu_built = pipelines.run("bm25", write("a", lines[:half]), out=tmp_path / "a-cpu", backend="cpu", **SPEC)
    for a, b in zip(_host(BM25Index.load(ix, backend="cpu").matrix),
                    _host(BM25Index.load(cpu_built.path, backend="cpu").matrix)):
        np.testing.assert_array_equal(a, b)
    # the append reads the index's fields (title, text) and takes its weights and b's
    pipelines.run("bm25", write("b", lines[half:]), out=ix, append=True, backend="gpu", scheduler="sync",
                  id_column="_id", progress=False)
    live = list(range(len(lines)))
    index = BM25Index.load(ix, backend="gpu")
    check(index, live)
    gone = [ids[j] for j in range(3, len(lines), 41)]
    assert index.delete(gone) == len(gone)
    live = [j for j in live if ids[j] not in set(gone)]
    check(index, live)
    n_seg = len(json.loads((ix / "index.json").read_text())["segments"])
    assert n_seg >= 2 and index.compact() == n_seg
    check(index, live)
    check(BM25Index.load(ix, backend="gpu", devices=[0, 0]), live)
