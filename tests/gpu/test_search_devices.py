"""A bm25 index sharded over the GPUs of one process (``BM25Index.load(devices=[...])``), and a living
segmented index (append, delete, compact) built and searched on the GPU: the same results as the CPU."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cutext import pipelines
from cutext.kernels.backend import device_count
from cutext.stages.engines.bm25_index import BM25Index

from helpers import cacm_topics

pytestmark = pytest.mark.gpu

KW = dict(progress=False, stopwords="lucene", stemmer="porter", blocksize=300_000)


@pytest.fixture(scope="module")
def cacm_index(tmp_path_factory, data_dir):
    """CACM as a segmented index of several segments, built on the CPU."""
    r = pipelines.run("bm25", data_dir / "cacm" / "cacm.json", out=tmp_path_factory.mktemp("ix") / "ix",
                      backend="cpu", index_format=2, **KW)
    assert len(json.loads((r.path / "index.json").read_text())["segments"]) >= 3
    return r.path


@pytest.mark.parametrize("devices", [[0], [0, 0], [0, 0, 0]])
def test_shards_on_devices_equal_one_index(cacm_index, data_dir, devices):
    qs = cacm_topics(data_dir)
    want = BM25Index.load(cacm_index, backend="cpu")
    got = BM25Index.load(cacm_index, backend="gpu", devices=devices)
    assert [s[2] for s in got.shards] == ["gpu:0"] * len(devices) and got.shards[-1][1] == want.n_docs
    for k, engine in ((10, "auto"), (1000, "auto"), (10, "sparse")):
        pd.testing.assert_frame_equal(got.search(qs, k=k, engine=engine, batch_size=17),
                                      want.search(qs, k=k, engine="cpu"))
    q = next(iter(qs.values()))
    np.testing.assert_allclose(got.get_scores(q), want.get_scores(q), rtol=1e-6)


def test_shards_of_a_format_1_index_on_devices_equal_one_index(tmp_path, data_dir):
    r = pipelines.run("bm25", data_dir / "cacm" / "cacm.json", out=tmp_path / "v1", backend="cpu", index_format=1,
                      **KW)
    qs = cacm_topics(data_dir)
    pd.testing.assert_frame_equal(BM25Index.load(r.path, backend="gpu", devices=[0, 0]).search(qs, k=20),
                                  BM25Index.load(r.path, backend="cpu").search(qs, k=20))


def test_shards_on_two_gpus_equal_one_index(cacm_index, data_dir):
    if device_count() < 2:
        pytest.skip("needs 2 GPUs")
    qs = cacm_topics(data_dir)
    got = BM25Index.load(cacm_index, backend="gpu", devices=[0, 1])
    assert [s[2] for s in got.shards] == ["gpu:0", "gpu:1"]
    pd.testing.assert_frame_equal(got.search(qs, k=100), BM25Index.load(cacm_index, backend="cpu").search(qs, k=100))


def test_an_error_on_a_devices_thread_reaches_the_caller_and_no_buffer_set_stays_taken(cacm_index, data_dir):
    """Each device's batches start on a thread of that device: an error there is raised by the search, every
    device's batch is still waited for, and the engines' buffer sets are all free after a search."""
    qs = cacm_topics(data_dir)
    got = BM25Index.load(cacm_index, backend="gpu", devices=[0, 0])
    with pytest.raises(ValueError, match="n_threads is a setting of the CPU engine"):
        got.search(qs, n_threads=1, batch_size=17)
    pd.testing.assert_frame_equal(got.search(qs, k=10, batch_size=17),
                                  BM25Index.load(cacm_index, backend="cpu").search(qs, k=10))
    held = [shard.sm.workspace for _, _, _, shard in got._shard_futures]
    assert all(len(w._free) == len(w._sets) for w in held)


def test_devices_are_refused_clearly(cacm_index):
    with pytest.raises(ValueError, match=r"device numbers in \[0, "):
        BM25Index.load(cacm_index, backend="gpu", devices=[device_count()])
    with pytest.raises(ValueError, match="non-empty"):
        BM25Index.load(cacm_index, backend="gpu", devices=[])
    with pytest.raises(ValueError, match="backend is 'cpu'"):
        BM25Index.load(cacm_index, backend="cpu", devices=[0])


def test_living_index_on_the_gpu_equals_a_one_shot_cpu_build(tmp_path, data_dir):
    """Build and append on the GPU, delete and compact through a GPU-loaded index (reloaded on the GPU):
    the results of a one-shot CPU build of the live documents at every step."""
    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()
    ids = [json.loads(x)["id"] for x in lines]
    qs = cacm_topics(data_dir)

    def write(name, ls):
        p = tmp_path / f"{name}.jsonl"
        p.write_text("\n".join(ls) + "\n", encoding="utf-8")
        return p

    def check(index, live):
        ref = pipelines.run("bm25", write("ref", [lines[j] for j in live]), out=tmp_path / "ref", backend="cpu",
                            index_format=2, **KW)
        assert index.backend == "gpu"
        pd.testing.assert_frame_equal(index.search(qs, k=20), BM25Index.load(ref.path, backend="cpu").search(qs, k=20))

    ix = tmp_path / "ix"
    pipelines.run("bm25", write("a", lines[:1500]), out=ix, backend="gpu", scheduler="sync", index_format=2, **KW)
    pipelines.run("bm25", write("b", lines[1500:]), out=ix, append=True, backend="gpu", scheduler="sync",
                  progress=False)
    live = list(range(len(lines)))
    index = BM25Index.load(ix, backend="gpu")
    check(index, live)
    gone = [ids[j] for j in range(3, len(lines), 41)]
    assert index.delete(gone) == len(gone)
    live = [j for j in live if ids[j] not in set(gone)]
    check(index, live)
    n_seg = len(json.loads((ix / "index.json").read_text())["segments"])
    assert n_seg >= 2 and index.compact() == n_seg
    assert json.loads((ix / "index.json").read_text())["segments"] == [f"seg-{n_seg:05d}"]
    check(index, live)
    check(BM25Index.load(ix, backend="gpu", devices=[0, 0]), live)
