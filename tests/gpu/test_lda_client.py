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
