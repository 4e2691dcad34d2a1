"""lda on a dask Client and LDAModel.transform of frames (items 3 and 4), on the CPU.

* ``pipelines.run("lda", ..., client=c)`` on a 2-worker process LocalCluster: one shard per worker, W
  summed through the client every iteration; the oracle is the in-process sharded chain with the same
  chunking (``n_devices=2``), itself tested equal to the one-shard chain in tests/pipelines/test_lda.py -- draws equal,
  so the model tables are equal and the LLPT equal to the last bit.
* ``LDAModel.transform(frame, text_column)`` on pandas and dask frames: equal to transforming the same
  documents as a list (and one by one), the model read once per worker process.

Real data: Reuters in LDA-C (395 docs, 84,010 tokens) from ../shared/data/bow.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cutext import pipelines
from cutext.pipelines.lda import LDAModel
from cutext.stages.engines.lda_chunk import read_ldac

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves this module out

distributed = pytest.importorskip("distributed")
dd = pytest.importorskip("dask.dataframe")


@pytest.fixture(scope="module")
def client():
    """Two worker processes, one thread each (the chain's shards live in different processes)."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        c.wait_for_workers(2)
        yield c


@pytest.fixture(scope="module")
def model(reuters_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("lda") / "m"
    pipelines.run("lda", str(reuters_path), out=out, K=8, iterations=15, seed=3, backend="cpu", progress=False)
    return LDAModel.load(out)


def _tables(d):
    out = {f: pd.read_parquet(d / f) for f in ("topic_word.parquet", "doc_topic.parquet", "vocab.parquet",
                                                 "documents.parquet")}
    out["llpt"] = pd.read_parquet(d / "llpt.parquet").drop(columns="seconds")
    return out


# ----------------------------------------------------------------------------- lda on a client

@pytest.mark.parametrize("sampler", ["three_branch", "dense"])
def test_two_workers_equal_the_in_process_two_shard_chain(reuters_path, tmp_path, client, sampler):
    seen = []

    def check(it, state):
        state.check_invariants()  # every shard's counts, the same summed W on both workers
        seen.append(it)

    kw = dict(K=10, iterations=4, sampler=sampler, seed=5, backend="cpu", progress=False)
    local = pipelines.run("lda", str(reuters_path), out=tmp_path / "local", n_devices=2, **kw)
    with distributed.get_task_stream(client=client) as ts:
        remote = pipelines.run("lda", str(reuters_path), out=tmp_path / "remote", client=client, callback=check, **kw)
    assert seen == list(range(5))
    assert remote.scheduler == "client" and remote.n_workers == 2 and local.n_workers == 2
    # the shards were made on both workers (their actors' constructors are tasks)
    assert len({t["worker"] for t in ts.data if "_ShardActor" in str(t["key"])}) == 2
    a, b = _tables(tmp_path / "local"), _tables(tmp_path / "remote")
    for name in a:
        pd.testing.assert_frame_equal(a[name], b[name], obj=name)
    assert remote.params["llpt"] == local.params["llpt"]
    params = json.loads((tmp_path / "remote" / "params.json").read_text())
    assert params["sampling"] == {"scheduler": "client", "n_workers": 2, "collective": "client"}
    assert local.counts == remote.counts


def test_one_worker_of_the_client_equals_the_single_chain(reuters_path, tmp_path, client):
    kw = dict(K=6, iterations=3, seed=1, backend="cpu", progress=False)
    pipelines.run("lda", str(reuters_path), out=tmp_path / "one", **kw)
    r = pipelines.run("lda", str(reuters_path), out=tmp_path / "w1", client=client, n_workers=1, **kw)
    assert r.n_workers == 1
    a, b = _tables(tmp_path / "one"), _tables(tmp_path / "w1")
    for name in a:
        pd.testing.assert_frame_equal(a[name], b[name], obj=name)


def test_a_lone_shard_runs_iterations_in_blocks_and_equals_the_single_chain(reuters_path, tmp_path, client,
                                                                           monkeypatch):
    """One worker runs several passes a call (no callback watching each): the same chain, an LLPT where
    llpt_every asks, a row and a time for every iteration."""
    import cutext.pipelines.lda as lda_pipeline

    monkeypatch.setattr(lda_pipeline, "STEPS_PER_CALL", 3)
    kw = dict(K=6, iterations=7, seed=4, backend="cpu", progress=False, llpt_every=5)
    pipelines.run("lda", str(reuters_path), out=tmp_path / "one", **kw)
    pipelines.run("lda", str(reuters_path), out=tmp_path / "w1", client=client, n_workers=1, **kw)
    a, b = _tables(tmp_path / "one"), _tables(tmp_path / "w1")
    for name in a:
        pd.testing.assert_frame_equal(a[name], b[name], obj=name)
    ll = pd.read_parquet(tmp_path / "w1" / "llpt.parquet")
    assert list(ll["iteration"]) == list(range(8))
    assert list(ll["iteration"][ll["llpt"].notna()]) == [0, 5, 7]
    assert (ll["seconds"][1:] > 0).all()


def test_client_parameters_are_used_or_refused(reuters_path, tmp_path, client):
    src = str(reuters_path)
    kw = dict(K=4, iterations=1, backend="cpu", progress=False)
    with pytest.raises(ValueError, match="n_devices=2 with client="):
        pipelines.run("lda", src, out=tmp_path / "a", client=client, n_devices=2, **kw)
    with pytest.raises(ValueError, match="hybrid"):
        pipelines.run("lda", src, out=tmp_path / "b", client=client, sampler="hybrid", **kw)
    with pytest.raises(ValueError, match="n_workers=3 but the client has 2"):
        pipelines.run("lda", src, out=tmp_path / "c", client=client, n_workers=3, **kw)
    with pytest.raises(ValueError, match="collective='nccl' sums W on GPUs"):
        pipelines.run("lda", src, out=tmp_path / "d", client=client, collective="nccl", **kw)
    with pytest.raises(ValueError, match="no client= given"):
        pipelines.run("lda", src, out=tmp_path / "e", collective="client", **kw)
    with pytest.raises(ValueError, match="collective must be one of"):
        pipelines.run("lda", src, out=tmp_path / "f", client=client, collective="mpi", **kw)
    assert not any((tmp_path / x).exists() for x in "abcdef")


# ----------------------------------------------------------------------------- transform of frames

def _texts(reuters_path, n=24):
    """Held-out style texts: Reuters documents written out as words (UTF-8), plus an empty document and
    one without a vocabulary word."""
    bow = read_ldac(reuters_path)
    texts = []
    for d in range(n):
        a, b = bow.doc_ptr[d], bow.doc_ptr[d + 1]
        texts.append(" ".join(bow.vocab[w] for w, c in zip(bow.word[a:b], bow.count[a:b]) for _ in range(int(c))))
    return texts + ["", "zzzzqx qqqqzx"]


def test_transform_pandas_and_dask_frames_equal_the_list_api(model, reuters_path):
    texts = _texts(reuters_path)
    kw = dict(iterations=10, seed=4)
    theta = model.transform(texts, **kw)
    df = pd.DataFrame({"doc": [f"d{i}" for i in range(len(texts))], "text": texts},
                      index=pd.RangeIndex(100, 100 + len(texts)))
    out = model.transform(df, "text", **kw)
    K = model.K
    assert list(out.columns) == ["doc", "text", "topic", "topic_prob", "n_tokens"] + [f"theta_{k}" for k in range(K)]
    pd.testing.assert_frame_equal(out[["doc", "text"]], df)  # rows, index and columns kept
    np.testing.assert_array_equal(out[[f"theta_{k}" for k in range(K)]].to_numpy(), theta)
    np.testing.assert_array_equal(out["topic"].to_numpy()[:-2], theta[:-2].argmax(1))
    np.testing.assert_array_equal(out["topic_prob"].to_numpy(), theta.max(1))
    assert out["topic"].dtype == np.int32 and list(out["topic"].iloc[-2:]) == [-1, -1]
    assert list(out["n_tokens"].iloc[-2:]) == [0, 0]
    from cutext.stages.text.tokenize import TokenizerConfig, tokenize_texts

    vocab = set(model.vocab)  # model trained on LDA-C: the default tokenizer
    known = [sum(t in vocab for t in toks) for toks in tokenize_texts(texts, TokenizerConfig.make())]
    assert out["n_tokens"].tolist() == known and min(known[:-2]) > 20
    # dask: partition by partition, the same rows whatever the partitioning
    for nparts in (1, 3, 7):
        got = model.transform(dd.from_pandas(df, npartitions=nparts), "text", **kw)
        assert isinstance(got, dd.DataFrame)
        res = got.compute()
        # (dask turns the object string columns into pyarrow strings: compared as lists)
        pd.testing.assert_frame_equal(res.drop(columns=["doc", "text"]), out.drop(columns=["doc", "text"]))
        assert res["text"].tolist() == texts and res["doc"].tolist() == df["doc"].tolist()
    slim = model.transform(df, "text", theta_columns=False, **kw)
    assert list(slim.columns) == ["doc", "text", "topic", "topic_prob", "n_tokens"]


def test_a_document_draws_the_same_topics_alone_or_in_a_batch(model, reuters_path):
    texts = _texts(reuters_path, n=6)
    together = model.transform(texts, iterations=8, seed=2)
    alone = np.vstack([model.transform([t], iterations=8, seed=2) for t in texts])
    np.testing.assert_array_equal(together, alone)
    reordered = model.transform(texts[::-1], iterations=8, seed=2)
    np.testing.assert_array_equal(reordered[::-1], together)
    assert not np.array_equal(model.transform(texts, iterations=8, seed=3), together)  # the seed matters


def test_transform_loads_the_model_once_per_worker(model, reuters_path, client):
    texts = _texts(reuters_path)
    df = pd.DataFrame({"text": texts})
    want = model.transform(df, "text", iterations=5)
    ddf = dd.from_pandas(df, npartitions=6)
    with distributed.get_task_stream(client=client) as ts:
        got = client.compute(model.transform(ddf, "text", iterations=5)).result()
    pd.testing.assert_frame_equal(got.drop(columns="text").reset_index(drop=True),
                                  want.drop(columns="text").reset_index(drop=True))
    ran = {t["worker"] for t in ts.data if "transform_partition" in str(t["key"])}
    loads = client.run(lambda: __import__("cutext.stages.engines.lda_model", fromlist=["x"]).MODEL_LOADS[0])
    assert ran and all(loads[w] == 1 for w in ran), (ran, loads)
    # again: no new read
    client.compute(model.transform(ddf, "text", iterations=5)).result()
    assert client.run(lambda: __import__("cutext.stages.engines.lda_model", fromlist=["x"]).MODEL_LOADS[0]) == loads


def test_transform_frame_errors(model):
    df = pd.DataFrame({"text": ["oil price", "pope"], "topic": [1, 2]})
    with pytest.raises(ValueError, match="needs text_column="):
        model.transform(df[["text"]])
    with pytest.raises(ValueError, match="'body' is not a column"):
        model.transform(df, "body")
    with pytest.raises(ValueError, match=r"already has column\(s\) \['topic'\]"):
        model.transform(df, "text")
    with pytest.raises(TypeError, match="row 1 holds int 7, not a string"):
        model.transform(pd.DataFrame({"text": ["oil", 7]}), "text")
    with pytest.raises(TypeError, match="row 0 is missing"):
        model.transform(pd.DataFrame({"text": [None, "oil"]}, dtype=object), "text")
    with pytest.raises(ValueError, match="text_column='text' is for DataFrames"):
        model.transform(["oil price"], "text")
    with pytest.raises(ValueError, match="dask Series"):
        model.transform(dd.from_pandas(df["text"], npartitions=1))


def test_load_cached_reads_a_model_once_and_again_when_rewritten(model, tmp_path):
    import os
    import shutil

    from cutext.stages.engines import lda_model as lda_model

    d = tmp_path / "copy"
    shutil.copytree(model.path, d)
    before = lda_model.MODEL_LOADS[0]
    a = lda_model.load_cached(d)
    assert lda_model.load_cached(str(d)) is a and lda_model.MODEL_LOADS[0] == before + 1
    st = os.stat(d / "params.json")
    os.utime(d / "params.json", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # the directory was rewritten
    b = lda_model.load_cached(d)
    assert b is not a and lda_model.MODEL_LOADS[0] == before + 2
    np.testing.assert_array_equal(a.W, b.W)


def test_a_shard_that_fails_frees_every_shard_on_the_workers(reuters_path, tmp_path, monkeypatch):
    """A shard's pass fails on one worker: the caller gets its error, no model is written, and the shards'
    actors are freed on both workers even while the error (its traceback holding the run's frames, as a
    notebook keeps the last one) is still alive."""
    import time

    from distributed import get_worker

    from cutext.stages.engines import lda_dist

    step = lda_dist._ShardActor.step
    bad = {}

    def failing(self, iteration, *args):
        if get_worker().address == bad["worker"] and iteration == 2:
            raise RuntimeError("a shard failed")
        return step(self, iteration, *args)

    monkeypatch.setattr(lda_dist._ShardActor, "step", failing)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        bad["worker"] = sorted(c.scheduler_info()["workers"])[1]
        with pytest.raises(RuntimeError, match="a shard failed") as err:
            pipelines.run("lda", str(reuters_path), out=tmp_path / "m", client=c, K=4, iterations=4, seed=1,
                          backend="cpu", progress=False)
        assert err.value.__traceback__ is not None
        deadline = time.monotonic() + 10  # an actor is freed once the scheduler has handled its release
        while any(c.run(lambda dask_worker: len(dask_worker.state.actors)).values()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(c.run(lambda dask_worker: len(dask_worker.state.actors)).values())
    assert not (tmp_path / "m").exists() and not list(tmp_path.iterdir())
