"""Filters before top-k on the GPU: the tiled CUDA engine (``bm25_block_search`` with a bitset or per-query
lists of allowed documents), the device sparse path, shards over devices, and a GPU build that keeps columns
give the CPU engine's results (which tests/pipelines/test_bm25_filters.py checks against a brute force)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from cutext import pipelines
from cutext.stages.engines.bm25_index import BM25Index

from helpers import cacm_topics, same_rows_but_near_ties

pytestmark = pytest.mark.gpu

KW = dict(progress=False, stopwords="lucene", stemmer="porter")


@pytest.fixture(scope="module")
def cacm_kept(tmp_path_factory, data_dir):
    """CACM with random metadata (``r`` uniform, ``category``) in three Parquet files, indexed on the CPU;
    and the frame of the metadata in doc order."""
    import json

    recs = [json.loads(x) for x in (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()]
    rng = np.random.default_rng(11)
    df = pd.DataFrame({"id": [r["id"] for r in recs], "text": [r["contents"] for r in recs],
                       "r": rng.random(len(recs)),
                       "category": np.array(["sci", "math", "os"])[rng.integers(0, 3, len(recs))]})
    folder = tmp_path_factory.mktemp("kept")
    (folder / "in").mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(df)), 3)):
        pq.write_table(pa.Table.from_pandas(df.iloc[part], preserve_index=False), folder / "in" / f"{i}.parquet")
    r = pipelines.run("bm25", folder / "in", out=folder / "ix", backend="cpu", keep_columns=["r", "category"],
                      id_column="id", text_column="text", **KW)
    return r.path, df, folder / "in"


def _filters(index: BM25Index, df: pd.DataFrame, n_queries: int):
    meta = df.set_index("id").loc[list(index.source_ids)]
    rng = np.random.default_rng(2)
    yield "expr 0.1%", pc.field("r") < 0.001
    yield "expr 10%", pc.field("r") < 0.1
    yield "expr category", pc.field("category") == "os"
    yield "mask 50%", meta["r"].to_numpy() < 0.5
    yield "mask 90%", meta["r"].to_numpy() < 0.9
    yield "lists 1%", [list(index.source_ids[rng.random(index.n_docs) < 0.01]) for _ in range(n_queries)]
    yield "lists 30%", [list(index.source_ids[rng.random(index.n_docs) < 0.3]) for _ in range(n_queries)]


@pytest.mark.parametrize("k", [10, 1000])
def test_gpu_engine_filters_equal_cpu(cacm_kept, data_dir, k):
    """The tiled engine with a bitset (expressions, masks) and with per-query lists (binary search of a tile's
    run, atomicOr into shared memory), batches of 17 queries (several passes of the lists' pointer), k above
    and below the allowed counts; and the device sparse path."""
    path, df, _ = cacm_kept
    qs = cacm_topics(data_dir)
    cpu = BM25Index.load(path, backend="cpu")
    gpu = BM25Index.load(path, backend="gpu")
    for what, f in _filters(cpu, df, len(qs)):
        want = cpu.search(qs, k=k, filter=f, engine="cpu")
        for engine in ("gpu", "sparse"):
            got = gpu.search(qs, k=k, filter=f, engine=engine, batch_size=17)
            if engine == "gpu":
                pd.testing.assert_frame_equal(got, want, obj=f"{what} {engine} k={k}")
            else:
                same_rows_but_near_ties(want, got, f"{what} {engine} k={k}")


def test_gpu_engine_filters_with_passes_of_queries(cacm_kept, data_dir):
    """A workspace of 1 MiB cuts a batch into passes: each pass takes its queries' part of the lists."""
    path, df, _ = cacm_kept
    qs = cacm_topics(data_dir)
    cpu = BM25Index.load(path, backend="cpu")
    gpu = BM25Index.load(path, backend="gpu")
    f = [list(cpu.source_ids[np.random.default_rng(i).random(cpu.n_docs) < 0.2]) for i in range(len(qs))]
    pd.testing.assert_frame_equal(gpu.search(qs, k=4000, filter=f, engine="gpu", max_workspace=1 << 20),
                                  cpu.search(qs, k=4000, filter=f, engine="cpu"))


@pytest.mark.parametrize("devices", [[0, 0], [0, 0, 0]])
def test_shards_on_devices_filter_each_range(cacm_kept, data_dir, devices):
    path, df, _ = cacm_kept
    qs = cacm_topics(data_dir)
    cpu = BM25Index.load(path, backend="cpu")
    got = BM25Index.load(path, backend="gpu", devices=devices)
    assert len(got.shards) == len(devices)
    for what, f in _filters(cpu, df, len(qs)):
        pd.testing.assert_frame_equal(got.search(qs, k=50, filter=f), cpu.search(qs, k=50, filter=f, engine="cpu"),
                                      obj=f"{what} devices={devices}")


def test_gpu_build_keeps_the_columns_of_the_cpu_build(cacm_kept, tmp_path):
    """The GPU readers and writer keep the same columns (read on the host beside the device text)."""
    path, _, src = cacm_kept
    r = pipelines.run("bm25", src, out=tmp_path / "g", backend="gpu", keep_columns=["r", "category"],
                      id_column="id", text_column="text", **KW)
    g, c = BM25Index.load(r.path, backend="cpu"), BM25Index.load(path, backend="cpu")
    assert list(g.source_ids) == list(c.source_ids)
    assert g.column_table().equals(c.column_table())
