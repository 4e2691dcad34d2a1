"""The cluster pipeline on a Client: the client runs the front end, the clustering stays one
ordered stream in this process; assignments join back to the input on ``source_id``.

Real data: the first 300 Reuters-21578 stories (../shared/data/corpora).
"""
from __future__ import annotations

import json

import pandas as pd
import pytest

from cutext import pipelines
from cutext.pipelines import datasets

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves this module out

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def reuters_table(shared_data, tmp_path_factory):
    docs = datasets.load_reuters21578(shared_data / "corpora" / "reuters21578.tar.gz").iloc[:300]
    docs = docs[["source_id", "text", "date"]].rename(columns={"source_id": "story"}).reset_index(drop=True)
    p = tmp_path_factory.mktemp("reuters") / "reuters.jsonl"
    docs.to_json(p, orient="records", lines=True)
    return p, docs


def test_client_runs_the_front_end_and_the_stream_stays_in_process(reuters_table, tmp_path):
    path, docs = reuters_table
    kw = dict(threshold=0.3, top_k=20, order_by="date", backend="cpu", progress=False, id_column="story",
              text_column="text", blocksize=60_000)
    pipelines.run("cluster", str(path), out=tmp_path / "local", **kw)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        with distributed.get_task_stream(client=client) as ts:
            remote = pipelines.run("cluster", str(path), out=tmp_path / "remote", client=client, **kw)
        for bad in (dict(n_workers=2), dict(scheduler="threads")):
            with pytest.raises(ValueError, match="one ordered stream in this process"):
                pipelines.run("cluster", str(path), out=tmp_path / "bad", client=client, **kw, **bad)
    assert not (tmp_path / "bad").exists()
    assert remote.scheduler == "client" and remote.n_workers == 2
    keys = [str(t["key"]) for t in ts.data]
    assert any("tokenize_partition" in k for k in keys), keys[:10]  # the front end ran on the workers
    meta = json.loads((tmp_path / "remote" / "cluster.json").read_text())
    assert meta["clustering"] == "in-process" and meta["scheduler"] == "client"
    a = pd.read_parquet(tmp_path / "local" / "assignments.parquet")
    b = pd.read_parquet(tmp_path / "remote" / "assignments.parquet")
    pd.testing.assert_frame_equal(a, b)
    # joinable on source_id: every input row finds exactly its assignment
    joined = docs.assign(story=docs["story"].astype(str)).merge(b, left_on="story", right_on="source_id",
                                                                 how="left", validate="one_to_one")
    assert len(joined) == len(docs) and joined["cluster_id"].notna().all()
    assert (joined["doc_id"].to_numpy() == range(len(docs))).all()  # doc_id: the row's reader number
