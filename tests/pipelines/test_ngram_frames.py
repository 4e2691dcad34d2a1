"""ngram with frames and on a Client: NGramModel.score_frame (pandas, dask) and pipelines.run(..., client=).

Every result is compared with the pipeline run in one process on the same real text written to a file
(the file path is the reference: tested against KenLM in tests/pipelines/test_ngram.py).
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from cutext import pipelines
from cutext.pipelines import ngram as ng
from cutext.pipelines.ngram import NGramModel
from cutext.stages.engines import ngram_model as ngm

COLS = ["sentences", "tokens", "oov", "log10_prob", "perplexity"]


@pytest.fixture(scope="module")
def abc(arpa):
    return NGramModel.load(arpa / "lmplz" / "abc.o3.arpa.gz", backend="cpu")


@pytest.fixture(scope="module")
def docs(arpa, shared_data):
    """Real documents of several lines: held-out inaugural sentences and Lee news documents, grouped
    with blank lines and \\r\\n, plus empty documents."""
    held = (arpa / "lmplz" / "heldout.inaugural2001-2009.tok.txt").read_text(encoding="utf-8").splitlines()
    lee = (shared_data / "corpora" / "gensim" / "lee_background.cor").read_text(encoding="utf-8").splitlines()
    rng = np.random.default_rng(3)
    out, i = [], 0
    while i < len(held):
        k = int(rng.integers(1, 6))
        out.append(["\n", "\n\n", "\r\n"][i % 3].join(held[i:i + k]))
        i += k
    out += lee[:60] + ["", "   ", "\n\n"]
    return out


def _frame(docs):
    return pd.DataFrame({"id": [f"d{i}" for i in range(len(docs))], "text": docs,
                         "n": np.arange(len(docs)) * 7}, index=pd.RangeIndex(100, 100 + len(docs)))


def _pipeline_scores(model, docs, tmp_path, sentence="line", **kw):
    src = tmp_path / "docs.jsonl"
    with open(src, "w", encoding="utf-8") as fh:
        for i, t in enumerate(docs):
            fh.write(json.dumps({"id": f"d{i}", "text": t}) + "\n")
    r = pipelines.run("ngram", src, out=tmp_path / "out", model=model, format="jsonl", sentence=sentence,
                      progress=False, **kw)
    return pq.read_table(r.path / "scores.parquet").to_pandas()


@pytest.mark.parametrize("sentence", ["line", "document"])
def test_score_frame_pandas_equals_pipeline(abc, docs, tmp_path, sentence):
    want = _pipeline_scores(abc, docs, tmp_path, sentence)
    frame = _frame(docs)
    got = abc.score_frame(frame, "text", sentence=sentence)
    assert list(got.columns) == ["id", "text", "n"] + COLS
    assert got.index.equals(frame.index) and list(frame.columns) == ["id", "text", "n"]  # input untouched
    assert got["id"].tolist() == want["source_id"].tolist()
    for c in COLS:
        assert got[c].dtype == want[c].dtype, c
        np.testing.assert_array_equal(got[c].to_numpy(), want[c].to_numpy(), err_msg=c)
    assert (got["oov"] > 0).any()
    assert got["perplexity"].isna().sum() == (3 if sentence == "line" else 0)  # empty documents (no line)


def test_score_frame_dask_equals_pandas(abc, docs):
    dd = pytest.importorskip("dask.dataframe")
    frame = _frame(docs)
    want = abc.score_frame(frame, "text", prefix="lm_")
    lazy = abc.score_frame(dd.from_pandas(frame, npartitions=4), "text", prefix="lm_")
    assert list(lazy.columns) == list(want.columns) and lazy.npartitions == 4
    assert lazy._meta["lm_tokens"].dtype == np.int64
    got = lazy.compute()
    new = ["lm_" + c for c in COLS]
    pd.testing.assert_frame_equal(got[new], want[new], check_exact=True)
    assert got["id"].tolist() == want["id"].tolist()  # (dask may convert the string dtype of the input)


def test_score_frame_nulls_and_bytes(abc, docs):
    frame = pd.DataFrame({"text": [docs[0], None, docs[1]]})
    got = abc.score_frame(frame, "text")
    assert got["tokens"].tolist()[1] == 0 and got["sentences"].tolist()[1] == 0
    np.testing.assert_array_equal(got["log10_prob"].to_numpy()[[0, 2]],
                                  abc.score_frame(frame.iloc[[0, 2]], "text")["log10_prob"].to_numpy())


def test_score_frame_bad_frames(abc, docs):
    frame = _frame(docs[:5])
    with pytest.raises(KeyError, match="no column 'body'.*'id', 'text', 'n'"):
        abc.score_frame(frame, "body")
    with pytest.raises(TypeError, match="'n' holds int64, not text"):
        abc.score_frame(frame, "n")
    with pytest.raises(ValueError, match="already has column.*prefix="):
        abc.score_frame(frame.assign(tokens=1), "text")
    with pytest.raises(TypeError, match="DataFrame.*to_frame"):
        abc.score_frame(frame["text"], "text")
    with pytest.raises(TypeError, match="does not hold text|text must be strings"):
        abc.score_frame(pd.DataFrame({"text": [1, "a", 2.5]}, dtype=object), "text")
    with pytest.raises(ValueError, match="sentence must be"):
        abc.score_frame(frame, "text", sentence="paragraph")


# ----------------------------------------------------------------------------- on a Client

@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       memory_limit="2GiB")
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def _lines_file(docs, path, compress=False):
    body = "\n".join(d.replace("\r\n", " ").replace("\n", " ") for d in docs) + "\n"
    if compress:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(body)
    else:
        path.write_text(body, encoding="utf-8")
    return path


def _run(model, src, out, **kw):
    r = pipelines.run("ngram", src, out=out, model=model, format="lines", progress=False, **kw)
    return r, pq.read_table(r.path / "scores.parquet").to_pandas()


@pytest.mark.slow
def test_client_scores_identical_to_one_process(client, abc, docs, tmp_path):
    """Several pieces (a small blocksize) scored on 2 workers == in this process, source ids included."""
    src = _lines_file(docs, tmp_path / "docs.txt")
    r1, one = _run(abc, src, tmp_path / "one", blocksize=16384)
    r2, two = _run(abc, src, tmp_path / "two", blocksize=16384, client=client)
    assert r1.scheduler != "client" and r2.scheduler == "client" and r2.n_workers == 2
    assert r2.counts["partitions"] > 4 and r2.counts["workers"] == 2
    pd.testing.assert_frame_equal(two, one, check_exact=True)
    assert one["source_id"].iloc[3] == "3"
    j1 = json.loads((r1.path / "ngram.json").read_text())
    j2 = json.loads((r2.path / "ngram.json").read_text())
    assert j1["log10_prob"] == j2["log10_prob"] and j1["counts"]["n_tokens"] == j2["counts"]["n_tokens"]
    # the model was loaded once in each worker process, from its path (not shipped with the tasks)
    cached = client.run(lambda: [k[0] for k in ngm._MODELS])
    assert len(cached) == 2
    assert all(v == [str(Path(abc.path).resolve())] for v in cached.values()), cached


@pytest.mark.slow
def test_client_single_compressed_file_uses_every_worker(client, abc, docs, tmp_path):
    """One gzip file is one piece: it is split into row ranges so that both workers score."""
    src = _lines_file(docs, tmp_path / "docs.txt.gz", compress=True)
    _, one = _run(abc, src, tmp_path / "one")
    r, two = _run(abc, src, tmp_path / "two", client=client)
    assert r.counts["partitions"] == 1 and r.counts["tasks"] == 2 and r.counts["workers"] == 2
    pd.testing.assert_frame_equal(two, one, check_exact=True)


def test_score_slice_of_text_buffers_names_the_worker_that_scored(client, abc, docs):
    """A lines piece read to buffers (what a GPU model's workers hold) reports the worker that scored
    it, as a table piece does: the pipeline's ``workers`` count is made of these addresses."""
    from cutext.stages.text.ngram_text import TextBuffers, text_buffers

    chars, offsets = text_buffers(docs[:6], device=False)
    buf = TextBuffers(chars, offsets)
    workers = sorted(client.scheduler_info()["workers"])
    got = client.gather([client.submit(ng._score_slice, abc, buf, a, b, "line", True, True, workers=[w],
                                       allow_other_workers=False, pure=False)
                         for w, (a, b) in zip(workers, [(0, 3), (3, 6)])])
    assert [w for _, w in got] == workers
    table, where = ng._score_slice(abc, buf, 0, 6, "line", True, True)
    assert where == "local" and table.num_rows == 6
    assert table["tokens"].to_pylist() == [t for t, _ in got for t in t["tokens"].to_pylist()]


def test_client_score_frame_dask(client, abc, docs):
    dd = pytest.importorskip("dask.dataframe")
    frame = _frame(docs)
    want = abc.score_frame(frame, "text")
    got = abc.score_frame(dd.from_pandas(frame, npartitions=3), "text").compute()
    pd.testing.assert_frame_equal(got[COLS], want[COLS], check_exact=True)


def test_client_and_n_workers_refused(abc, tmp_path, docs, client):
    src = _lines_file(docs[:3], tmp_path / "d.txt")
    with pytest.raises(ValueError, match="client= or n_workers="):
        pipelines.run("ngram", src, out=tmp_path / "o", model=abc, client=client, n_workers=2, progress=False)
