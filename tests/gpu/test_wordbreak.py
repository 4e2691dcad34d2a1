"""``analyzer="anserini"`` on the GPU: the word-break kernels (kernels/wordbreak.cu) equal their numba twins, and the
GPU analyzer (device scan, cudf split, the bm25 build) equals the CPU analyzer, on 20 Newsgroups and hostile text.

Run on the lent GPU machine; skipped without a device.  The twins equal the CPU analyzer's split
(tests/kernels/test_wordbreak.py), so the chain is kernel == twin == ``standard_tokens``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from cutext import pipelines
from cutext.kernels import wordbreak as W
from cutext.kernels.backend import to_cudf, to_host
from cutext.kernels.tokenize import arrow_buffers
from cutext.pipelines import datasets
from cutext.stages.text import device as GT
from cutext.stages.text import token_bytes as TB
from cutext.stages.text.partitions import tokenize_partition_scan
from cutext.stages.text.tokenize import TokenizerConfig, tokenize_partition

from helpers import assert_same_index, need_corpus, need_data, read_index
from wordbreak_cases import HOSTILE, random_texts

pytestmark = pytest.mark.gpu

ANSERINI = TokenizerConfig.make(analyzer="anserini")


@pytest.fixture(scope="module")
def news():
    return need_corpus("20news")["text"].tolist()


def _frames(texts):
    pdf = pd.DataFrame({"doc_id": np.arange(len(texts), dtype=np.int64),
                        "text": pd.Series(list(texts), dtype=pd.StringDtype("pyarrow"))})
    return pdf, to_cudf(pdf)


def test_kernels_equal_twins(news):
    import cupy

    texts = HOSTILE + random_texts(0) + random_texts(1) + news
    data, offsets = arrow_buffers(pa.array([None, "x"] + texts, type=pa.large_string()).slice(1))
    want = W.standard_token_bounds(data, offsets)
    got = W.standard_token_bounds(cupy.asarray(data), cupy.asarray(offsets))
    for name, w, g in zip(("starts", "ends", "rows"), want, got):
        assert isinstance(g, cupy.ndarray)
        np.testing.assert_array_equal(g.get(), w, err_msg=name)
    assert len(want[0]) > 5_000_000


def test_gpu_split_equals_cpu_analyzer_token_for_token(news):
    texts = HOSTILE + news
    pdf, gdf = _frames(texts)
    cpu = tokenize_partition(pdf, ANSERINI)
    gpu = tokenize_partition(gdf, ANSERINI).to_pandas()
    assert len(cpu) > 3_000_000
    np.testing.assert_array_equal(cpu["doc_id"].to_numpy(), gpu["doc_id"].to_numpy())
    c, g = cpu["token"].astype(str).to_numpy(), gpu["token"].astype(str).to_numpy()
    bad = np.flatnonzero(c != g)
    assert len(bad) == 0, f"{len(bad)} tokens differ, first {[(c[i], g[i]) for i in bad[:5]]}"


def test_device_scan_equals_cpu_analyzer(news):
    text = pd.Series(HOSTILE + news, dtype=pd.StringDtype("pyarrow"))
    want = tokenize_partition_scan(pd.DataFrame({"text": text}), ANSERINI)
    got = GT.scan_partition(to_cudf(text).reset_index(drop=True), ANSERINI)
    assert got is not None, "a 64-bit hash collision or a text past the kernels' stack on real text: report it"
    uniq, code, pos, tf, lengths = got
    np.testing.assert_array_equal(to_host(lengths), want.lengths)

    def triples(u, c, p, t):
        terms = np.asarray(to_host(u).astype(str).tolist(), dtype=object)[np.asarray(to_host(c))]
        return pd.DataFrame({"term": terms, "pos": to_host(p), "tf": to_host(t)}).sort_values(
            ["term", "pos"], ignore_index=True)

    pd.testing.assert_frame_equal(triples(uniq, code, pos, tf), triples(want.uniq, want.code, want.pos, want.tf))


def test_fallbacks_equal_cpu_analyzer(monkeypatch):
    """Text the kernels report, and a hash collision: the partition and the cudf split take exact paths."""
    import cudf

    texts = HOSTILE[:20] + ["The dog's bone", "dogs DOG'S"]
    pdf, gdf = _frames(texts)
    want = tokenize_partition(pdf, ANSERINI)
    want_scan = tokenize_partition_scan(pdf[["text"]], ANSERINI)
    for case in ("reported", "collision"):
        with monkeypatch.context() as m:
            if case == "reported":
                m.setattr(GT, "standard_token_bounds", lambda d, o: None)
                m.setattr(TB, "standard_token_bounds", lambda d, o: None)
            else:  # tokens of one length share a hash
                m.setattr(TB, "hash_tokens", lambda d, s, e: (e - s).astype(np.uint64))
            assert GT.scan_partition(gdf["text"], ANSERINI) is None
            got = tokenize_partition(gdf, ANSERINI).to_pandas()
            assert got["token"].astype(str).tolist() == want["token"].astype(str).tolist(), case
            scan = tokenize_partition_scan(cudf.DataFrame({"text": gdf["text"]}), ANSERINI)
            np.testing.assert_array_equal(to_host(scan.lengths), want_scan.lengths)


def test_bm25_build_gpu_equals_cpu(tmp_path):
    docs = datasets.load_20newsgroups(need_data("20newsgroups"))
    src = datasets.write_files(docs.iloc[::4].reset_index(drop=True), tmp_path / "posts")
    kw = dict(analyzer="anserini", progress=False, blocksize=2 << 20)
    cpu = pipelines.run("bm25", src, out=tmp_path / "cpu", backend="cpu", **kw)
    gpu = pipelines.run("bm25", src, out=tmp_path / "gpu", backend="gpu", scheduler="sync", **kw)
    assert gpu.backend == "gpu" and gpu.counts == cpu.counts
    assert_same_index(read_index(cpu.path), read_index(gpu.path))


def test_bm25_append_on_the_gpu_equals_a_cpu_build(tmp_path, data_dir):
    """An index built with the analyzer on the CPU, appended to on the GPU: the scores of a one-shot CPU build."""
    lines = (data_dir / "cacm" / "cacm.json").read_text("utf-8").splitlines()
    (tmp_path / "a.jsonl").write_text("\n".join(lines[:300]) + "\n", "utf-8")
    (tmp_path / "b.jsonl").write_text("\n".join(lines[300:400]) + "\n", "utf-8")
    (tmp_path / "ab.jsonl").write_text("\n".join(lines[:400]) + "\n", "utf-8")
    kw = dict(analyzer="anserini", scheduler="sync", progress=False)
    pipelines.run("bm25", tmp_path / "a.jsonl", out=tmp_path / "idx", backend="cpu", **kw)
    r = pipelines.run("bm25", tmp_path / "b.jsonl", out=tmp_path / "idx", append=True, backend="gpu",
                      scheduler="sync", progress=False)
    assert r.backend == "gpu"
    pipelines.run("bm25", tmp_path / "ab.jsonl", out=tmp_path / "one", backend="cpu", **kw)
    q = "parallel sorting algorithms for computers"
    a = pipelines.BM25Index.load(tmp_path / "idx", backend="cpu").search(q, k=20)
    b = pipelines.BM25Index.load(tmp_path / "one", backend="cpu").search(q, k=20)
    assert a["source_id"].tolist() == b["source_id"].tolist()
    np.testing.assert_allclose(a["score"], b["score"], rtol=1e-6)
