"""lda on a 2-GPU LocalCUDACluster equals the in-process two-GPU chain; transform of cudf / dask-cudf frames
equals the pandas result (run on the lent GPU machine, nvidia-h200-x2).

Real data: KOS (UCI, 467,714 tokens) and Reuters (LDA-C) from ../shared/data/bow.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cutext import pipelines
from cutext.pipelines.lda import LDAModel

pytestmark = pytest.mark.gpu

cupy = pytest.importorskip("cupy")
distributed = pytest.importorskip("distributed")


def _two_gpus():
    from cutext.kernels.backend import device_count

    if device_count() < 2:
        pytest.skip("needs 2 GPUs (nvidia-h200-x2)")


@pytest.fixture(scope="module")
def cuda_client():
    _two_gpus()
    dask_cuda = pytest.importorskip("dask_cuda")
    with dask_cuda.LocalCUDACluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as c:
        c.wait_for_workers(2)
        yield c


def _tables(d):
    out = {f: pd.read_parquet(d / f) for f in ("topic_word.parquet", "doc_topic.parquet", "vocab.parquet")}
    out["llpt"] = pd.read_parquet(d / "llpt.parquet").drop(columns="seconds")
    return out


@pytest.mark.parametrize("collective", ["nccl", "client"])
def test_two_gpu_workers_equal_the_in_process_two_gpu_chain(shared_data, tmp_path, cuda_client, collective):
    """One shard per GPU worker, W summed every iteration (ncclAllReduce or through the client) = the
    in-process two-GPU chain (n_devices=2) draw for draw."""
    if collective == "nccl":
        from cupy.cuda import nccl

        if not getattr(nccl, "available", True):
            pytest.skip("cupy.cuda.nccl is not available in this environment")
    src = shared_data / "bow" / "uci" / "docword.kos.txt.gz"
    kw = dict(K=64, iterations=4, sampler="three_branch", backend="gpu", progress=False, seed=2)

    def check(it, state):
        state.check_invariants()

    local = pipelines.run("lda", str(src), out=tmp_path / "local", n_devices=2, **kw)
    remote = pipelines.run("lda", str(src), out=tmp_path / "remote", client=cuda_client, collective=collective,
                           callback=check, **kw)
    assert remote.backend == "gpu" and remote.scheduler == "client" and remote.n_workers == 2
    params = json.loads((tmp_path / "remote" / "params.json").read_text())
    assert params["sampling"]["collective"] == collective
    a, b = _tables(tmp_path / "local"), _tables(tmp_path / "remote")
    for name in a:
        pd.testing.assert_frame_equal(a[name], b[name], obj=name)
    assert remote.params["llpt"] == pytest.approx(local.params["llpt"], rel=1e-12)
    # no callback: the shards run the passes in blocks, summing W among themselves (NCCL) -- the same chain
    blocks = pipelines.run("lda", str(src), out=tmp_path / "blocks", client=cuda_client, collective=collective, **kw)
    c = _tables(tmp_path / "blocks")
    for name in a:
        pd.testing.assert_frame_equal(a[name], c[name], obj=name)
    assert blocks.params["llpt"] == pytest.approx(local.params["llpt"], rel=1e-12)


def test_transform_cudf_and_dask_cudf_frames_equal_pandas(shared_data, tmp_path):
    cudf = pytest.importorskip("cudf")
    dask_cudf = pytest.importorskip("dask_cudf")
    src = shared_data / "bow" / "lda_reuters" / "reuters.ldac"
    r = pipelines.run("lda", str(src), out=tmp_path / "m", K=8, iterations=10, backend="cpu", progress=False)
    m = LDAModel.load(r.path)
    texts = ["oil prices rose as opec met", "the pope visited the vatican church", "", "zzzzqx",
             "wheat and corn exports to the soviet union"] * 4
    df = pd.DataFrame({"id": np.arange(len(texts)), "text": texts})
    want = m.transform(df, "text", iterations=10, backend="cpu")
    gdf = cudf.from_pandas(df)
    got = m.transform(gdf, "text", iterations=10, backend="gpu")
    assert isinstance(got, cudf.DataFrame)
    pd.testing.assert_frame_equal(got.to_pandas().drop(columns="text"), want.drop(columns="text"))
    dgot = m.transform(dask_cudf.from_cudf(gdf, npartitions=3), "text", iterations=10, backend="gpu").compute()
    pd.testing.assert_frame_equal(dgot.to_pandas().drop(columns="text"), want.drop(columns="text"))


# run on the workers (exec, a builtin, travels by name): the shard on the second GPU fails its passes
_FAIL_ON_THE_SECOND_GPU = """
import os
from cutext.stages.engines import lda_dist
real = lda_dist._ShardActor.__dict__.get("_real_steps") or lda_dist._ShardActor.steps
lda_dist._ShardActor._real_steps = real
def steps(self, *args):
    if os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() == "1":
        raise RuntimeError("a shard failed")
    return real(self, *args)
lda_dist._ShardActor.steps = steps
"""
_RESTORE = """
from cutext.stages.engines import lda_dist
if "_real_steps" in lda_dist._ShardActor.__dict__:
    lda_dist._ShardActor.steps = lda_dist._ShardActor._real_steps
"""


def test_a_shard_that_fails_under_nccl_frees_its_peer_for_the_next_run(shared_data, tmp_path, cuda_client):
    """The shard on one GPU fails while the other waits in ncclAllReduce for it: the run raises the shard's
    error, the waiting shard's communicator is aborted once the run lets its shards go, and the next run on
    the same workers (whose actor threads the waiting shard held) completes."""
    import threading

    from cupy.cuda import nccl

    if not getattr(nccl, "available", True):
        pytest.skip("cupy.cuda.nccl is not available in this environment")
    src = shared_data / "bow" / "uci" / "docword.kos.txt.gz"
    # the LLPT after the last pass only: the shards run the passes in one call, summing W among themselves
    kw = dict(K=16, backend="gpu", progress=False, seed=3, client=cuda_client, collective="nccl", llpt_every=4)
    cuda_client.run(exec, _FAIL_ON_THE_SECOND_GPU, {})
    try:
        with pytest.raises(RuntimeError, match="a shard failed"):
            pipelines.run("lda", str(src), out=tmp_path / "failed", iterations=4, **kw)
    finally:
        cuda_client.run(exec, _RESTORE, {})
    assert not (tmp_path / "failed").exists()
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", pipelines.run("lda", str(src), out=tmp_path / "next",
                                                                          iterations=2, **kw)), daemon=True)
    t.start()
    t.join(180)
    assert not t.is_alive(), "the next run on the same workers did not end"
    assert box["r"].n_workers == 2 and (tmp_path / "next" / "params.json").exists()
