"""The n-gram LM's GPU text path == the CPU path, on the shared ARPA models and corpora.

Runs on the lent GPU machine (skipped without a device). The CPU references are the pyarrow path of
NGramModel (tested against KenLM in tests/pipelines/test_ngram.py) and the numba twins of kernels/wordsplit.py (tested
against pyarrow in tests/kernels/test_wordsplit.py). Every failure prints the first differing rows.
"""
from __future__ import annotations

import gzip
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cutext import pipelines
from cutext.kernels import wordsplit as ws
from cutext.kernels.backend import device_count
from cutext.pipelines import ngram as ng
from cutext.pipelines.ngram import NGramModel
from cutext.stages.readers.files import plan
from cutext.stages.text.ngram_text import encode_text

pytestmark = pytest.mark.gpu

COLS = ["sentences", "tokens", "oov", "log10_prob", "perplexity"]
SMALL = ["kenlm/test.arpa", "kenlm/test_nounk.arpa", "kenlm/toy0.arpa", "kenlm/toy1.arpa", "pocketsphinx/100.lm.gz",
         "pocketsphinx/turtle.lm", "pocketsphinx/turtle.ug.lm"]


def _load(path, backend):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return NGramModel.load(path, backend=backend)


@pytest.fixture(scope="module")
def abc_pair(arpa):
    path = arpa / "lmplz" / "abc.o3.arpa.gz"
    return _load(path, "cpu"), _load(path, "gpu")


@pytest.fixture(scope="module")
def corpora(shared_data):
    """All of 20 Newsgroups and Reuters-21578 (raw documents of many lines)."""
    from cutext.pipelines.datasets import load_20newsgroups, load_reuters21578

    d = shared_data / "corpora"
    news = load_20newsgroups(d / "20news-bydate.tar.gz")["text"].tolist()
    reut = load_reuters21578(d / "reuters21578.tar.gz")["text"].tolist()
    return news + reut


def _first_diff(name, got, want):
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"{name}: shapes {got.shape} vs {want.shape}"
    bad = np.flatnonzero(got != want) if got.dtype.kind != "f" else np.flatnonzero(~np.isclose(got, want, rtol=0,
                                                                                             atol=0, equal_nan=True))
    return f"{name}: {len(bad)} differ, first at {bad[:5].tolist()}: got {got[bad[:5]]} want {want[bad[:5]]}"


def _same(name, got, want):
    got = got.get() if hasattr(got, "get") else got
    assert np.array_equal(got, want, equal_nan=np.asarray(want).dtype.kind == "f"), _first_diff(name, got, want)


def _same_score(name, column, got, want):
    """Equal bit for bit, but ``perplexity`` = 10 ** (-log10_prob / tokens), a power taken on the device
    (CUDA's pow may differ from the host's in the last unit in the last place: rtol 1e-14)."""
    if column != "perplexity":
        return _same(name, got, want)
    assert np.allclose(got, want, rtol=1e-14, atol=0, equal_nan=True), _first_diff(name, got, want)


def test_gpu_kernels_equal_twins_on_corpora(abc_pair, corpora):
    """word bounds, byte-exact lookup, sentences and segment sums: CUDA == numba twin on 20 Newsgroups +
    Reuters (raw bytes, with a few rows of bytes that are not UTF-8)."""
    import cupy

    cpu, _ = abc_pair
    raw = [t.encode("utf-8") for t in corpora] + [b"\xff\xfe bad \xc3 bytes\n\xe9t\xe9", b"", b"\n\n", b" \t"]
    offsets = np.zeros(len(raw) + 1, np.int64)
    np.cumsum([len(t) for t in raw], out=offsets[1:])
    chars = np.frombuffer(b"".join(raw), np.uint8)
    print(f"{len(raw)} documents, {len(chars)} bytes")
    hs, he = ws.word_bounds(chars, offsets)
    ds, de = ws.word_bounds(cupy.asarray(chars), cupy.asarray(offsets))
    print(f"{len(hs)} words")
    _same("starts", ds, hs)
    _same("ends", de, he)
    hid = ws.lookup_words(chars, hs, he, cpu.vocab_hash(), cpu.unk_id)
    did = ws.lookup_words(cupy.asarray(chars), ds, de, cpu.vocab_hash(device=True), cpu.unk_id)
    _same("ids", did, hid)
    print(f"{int((hid == cpu.unk_id).sum())} unknown words")
    for sentence in ("line", "document"):
        h = encode_text(chars, offsets, cpu.vocab_hash(), cpu.unk_id, sentence)
        d = encode_text(cupy.asarray(chars), cupy.asarray(offsets), cpu.vocab_hash(device=True), cpu.unk_id,
                        sentence)
        for name, g, w in zip(("ids", "word_offsets", "sent_doc"), d, h):
            _same(f"{sentence} {name}", g, w)
    x = np.random.default_rng(0).normal(size=len(hs))
    seg = np.searchsorted(hs, offsets)
    _same("segment_sum", ws.segment_sum(cupy.asarray(x), cupy.asarray(seg)), ws.segment_sum(x, seg))


@pytest.mark.parametrize("rel", SMALL + ["lmplz/abc.o3.arpa.gz"])
def test_gpu_encode_device_equals_cpu_encode(arpa, heldout, rel):
    cpu, gpu = _load(arpa / rel, "cpu"), _load(arpa / rel, "gpu")
    words = cpu.vocab.to_pylist() + ["zzz", "<UNK>", "<unk>"]
    rng = np.random.default_rng(1)
    sents = heldout + [" \t".join(rng.choice(words, int(rng.integers(0, 30)))) for _ in range(2000)] + ["", "  "]
    ids, off = gpu.encode_device(sents)
    assert type(ids).__module__.startswith("cupy")
    want_ids, want_off = cpu.encode(sents)
    _same("offsets", off, want_off)
    _same("ids", ids, want_ids)
    raw = [s.encode() for s in sents[:500]] + [b"\xff bad \xc3"]
    ids, off = gpu.encode_device(raw)
    want_ids, want_off = cpu.encode(raw)
    _same("bytes offsets", off, want_off)
    _same("bytes ids", ids, want_ids)


@pytest.mark.parametrize("sentence", ["line", "document"])
@pytest.mark.parametrize("bos, eos", [(True, True), (False, False)])
def test_gpu_score_documents_equal_cpu(abc_pair, corpora, sentence, bos, eos):
    """Per-document scores of all of 20 Newsgroups + Reuters: text split, looked up, scored and summed on
    the device == the CPU pipeline's (pyarrow); log10 sums are added in the same order (same bits)."""
    cpu, gpu = abc_pair
    texts = pa.array(corpora, pa.large_string())
    want = cpu.score_documents(texts, sentence, bos, eos)
    got = gpu.score_documents(texts, sentence, bos, eos)
    assert all(type(got[c]).__module__.startswith("cupy") for c in COLS)
    print({c: (str(got[c].dtype), float(want[c].sum())) for c in COLS if c != "perplexity"})
    for c in ("sentences", "tokens", "oov"):
        _same(c, got[c], want[c])
        assert got[c].dtype == want[c].dtype
    np.testing.assert_allclose(got["log10_prob"].get(), want["log10_prob"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(got["perplexity"].get(), want["perplexity"], rtol=1e-12, equal_nan=True)
    n_equal = int((got["log10_prob"].get() == want["log10_prob"]).sum())
    print(f"log10_prob bit-equal in {n_equal} of {len(texts)} documents")


def test_gpu_score_with_cudf_series_and_list(abc_pair, heldout):
    import cudf

    cpu, gpu = abc_pair
    want = cpu.score(heldout)
    for inp in (heldout, cudf.Series(heldout), pa.array(heldout)):
        got = gpu.score(inp)
        np.testing.assert_array_equal(got.token_log10_prob, want.token_log10_prob)
        np.testing.assert_array_equal(got.oov, want.oov)
        np.testing.assert_allclose(got.log10_prob, want.log10_prob, rtol=0, atol=1e-9)
    assert gpu.perplexity(heldout) == pytest.approx(520.1736, abs=1e-3)


def _frame(corpora, n=3000):
    docs = corpora[:n] + ["", None, "\n"]
    return pd.DataFrame({"id": np.arange(len(docs)), "text": docs}, index=pd.RangeIndex(10, 10 + len(docs)))


def test_gpu_score_frame_cudf_and_dask_cudf(abc_pair, corpora):
    import cudf
    import dask_cudf

    cpu, gpu = abc_pair
    frame = _frame(corpora)
    want = cpu.score_frame(frame, "text")
    gdf = cudf.from_pandas(frame)
    got = gpu.score_frame(gdf, "text")
    assert isinstance(got, cudf.DataFrame) and list(got.columns) == ["id", "text"] + COLS
    got = got.to_pandas()
    assert got.index.equals(frame.index)
    for c in COLS:
        _same_score(f"cudf {c}", c, got[c].to_numpy(), want[c].to_numpy())
    lazy = gpu.score_frame(dask_cudf.from_cudf(gdf, npartitions=3), "text")
    got = lazy.compute().to_pandas()
    for c in COLS:
        _same_score(f"dask-cudf {c}", c, got[c].to_numpy(), want[c].to_numpy())
    # a cudf frame with a CPU model: the text goes to the host, the columns come back to the frame
    got = cpu.score_frame(gdf, "text").to_pandas()
    for c in COLS:
        _same(f"cudf + cpu model {c}", got[c].to_numpy(), want[c].to_numpy())


def test_gpu_pipeline_equals_cpu_on_20news(abc_pair, corpora, tmp_path):
    cpu, gpu = abc_pair
    src = tmp_path / "docs.jsonl"
    pd.DataFrame({"id": np.arange(len(corpora)), "text": corpora}).to_json(src, orient="records", lines=True)
    rc = pipelines.run("ngram", src, out=tmp_path / "c", model=cpu, format="jsonl", progress=False,
                       blocksize=8 << 20)
    rg = pipelines.run("ngram", src, out=tmp_path / "g", model=gpu, format="jsonl", progress=False,
                       blocksize=8 << 20)
    tc = pq.read_table(rc.path / "scores.parquet").to_pandas()
    tg = pq.read_table(rg.path / "scores.parquet").to_pandas()
    print(rg.timings, rg.counts)
    pd.testing.assert_frame_equal(tg, tc, check_exact=False, rtol=1e-12, atol=1e-9)


def _lines_cpu_and_gpu(abc_pair, corpora, tmp_path):
    """The corpora as one lines file of 1 MiB pieces scored by the CPU and the GPU model: (cpu result, gpu
    result, cpu scores frame, gpu scores frame), the frames asserted equal."""
    cpu, gpu = abc_pair
    src = tmp_path / "docs.txt"
    src.write_text("".join(t.replace("\n", " ") + "\n" for t in corpora), encoding="utf-8")
    kw = {"format": "lines", "progress": False, "blocksize": 1 << 20}
    rc = pipelines.run("ngram", src, out=tmp_path / "c", model=cpu, **kw)
    rg = pipelines.run("ngram", src, out=tmp_path / "g", model=gpu, **kw)
    assert rg.counts["partitions"] >= 4
    tc = pq.read_table(rc.path / "scores.parquet").to_pandas()
    tg = pq.read_table(rg.path / "scores.parquet").to_pandas()
    pd.testing.assert_frame_equal(tg, tc, check_exact=False, rtol=1e-12, atol=1e-9)
    return rc, rg, tc, tg


@pytest.mark.parametrize("streams", [True, False])
def test_gpu_lines_read_and_scored_on_streams_equal_cpu(abc_pair, corpora, tmp_path, monkeypatch, streams):
    """A lines file of several pieces read to the device and scored there on non-blocking streams of their own
    (``DEVICE_STREAMS``; or on the legacy default stream) while cudf frames and writes the pieces before on
    other threads: the scores and totals equal the CPU model's."""
    import json

    monkeypatch.setattr(ng, "DEVICE_STREAMS", streams)
    rc, rg, _, _ = _lines_cpu_and_gpu(abc_pair, corpora, tmp_path)
    jc, jg = (json.loads((r.path / "ngram.json").read_text()) for r in (rc, rg))
    assert jg["counts"]["n_tokens"] == jc["counts"]["n_tokens"] and jg["counts"]["n_oov"] == jc["counts"]["n_oov"]


@pytest.mark.parametrize("encodings", ["delta", None])
def test_gpu_scores_written_with_column_encodings_equal_cpu(abc_pair, corpora, tmp_path, monkeypatch, encodings):
    """scores.parquet written on the device by pylibcudf's chunked writer with delta encodings for doc_id and
    source_id (``DEVICE_SCORE_ENCODINGS``), or by cudf's ParquetWriter (None), over several pieces and row
    groups: pyarrow reads the same table as the CPU pipeline's, and the file's column chunks carry the
    encodings asked for."""
    enc = {"doc_id": "DELTA_BINARY_PACKED", "source_id": "DELTA_BYTE_ARRAY"} if encodings else None
    monkeypatch.setattr(ng, "DEVICE_SCORE_ENCODINGS", enc)
    monkeypatch.setattr(ng, "DEVICE_ROWS_PER_WRITE", 1 << 10)  # several row groups
    _, rg, _, tg = _lines_cpu_and_gpu(abc_pair, corpora, tmp_path)
    assert tg["source_id"].iloc[-1] == str(len(tg) - 1)  # a single file: row numbers without a label
    parts = sorted((rg.path / "scores.parquet").glob("*.parquet"))
    assert parts
    meta = pq.ParquetFile(parts[0]).metadata
    assert meta.num_row_groups >= 2
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    chunk = meta.row_group(0)
    got = {n: chunk.column(i).encodings for i, n in enumerate(names)}
    for name, e in (enc or {}).items():
        assert e in got[name], (name, got[name])
    if enc is None:
        assert "DELTA_BINARY_PACKED" not in got["doc_id"]


def test_gpu_pipeline_on_local_cuda_cluster_identical(abc_pair, corpora, tmp_path):
    """ngram on a LocalCUDACluster (one GPU per worker; a single gzip file split over the workers) ==
    the same GPU model in one process, bit for bit."""
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    _, gpu = abc_pair
    src = tmp_path / "docs.txt.gz"
    with gzip.open(src, "wt", encoding="utf-8") as fh:
        for t in corpora:
            fh.write(t.replace("\n", " ") + "\n")
    one = pipelines.run("ngram", src, out=tmp_path / "one", model=gpu, format="lines", progress=False)
    n = min(2, device_count())
    with LocalCUDACluster(n_workers=n) as cluster, Client(cluster) as client:
        many = pipelines.run("ngram", src, out=tmp_path / "many", model=gpu, format="lines", progress=False,
                             client=client)
    print(many.counts, many.timings)
    assert many.scheduler == "client" and many.n_workers == n
    assert many.counts["tasks"] == n and many.counts["workers"] == n
    a = pq.read_table(one.path / "scores.parquet").to_pandas()
    b = pq.read_table(many.path / "scores.parquet").to_pandas()
    pd.testing.assert_frame_equal(b, a, check_exact=True)


def test_gpu_workers_write_their_parts_on_a_local_cuda_cluster(abc_pair, corpora, tmp_path):
    """A lines file of several pieces on a LocalCUDACluster: each worker reads its share to its GPU, scores it
    and writes its part of scores.parquet/ with cudf's writer (the rows of the shares before it counted from
    the file's bytes); rows, source ids, scores and the totals of ngram.json equal one process bit for bit."""
    import json

    from dask_cuda import LocalCUDACluster
    from distributed import Client

    _, gpu = abc_pair
    src = tmp_path / "docs.txt"
    src.write_text("".join(t.replace("\n", " ") + "\n" for t in corpora), encoding="utf-8")
    kw = {"model": gpu, "format": "lines", "progress": False, "blocksize": 4 << 20}
    one = pipelines.run("ngram", src, out=tmp_path / "one", **kw)
    n = min(2, device_count())
    with LocalCUDACluster(n_workers=n) as cluster, Client(cluster) as client:
        many = pipelines.run("ngram", src, out=tmp_path / "many", client=client, **kw)
    print(many.counts, many.timings)
    assert many.counts["partitions"] >= 4 and many.counts["workers"] == n and many.counts["parts"] == n
    assert sorted(p.name for p in (many.path / "scores.parquet").iterdir()) == [f"part-{k:05d}.parquet"
                                                                               for k in range(n)]
    a = pq.read_table(one.path / "scores.parquet").to_pandas()
    b = pq.read_table(many.path / "scores.parquet").to_pandas()
    pd.testing.assert_frame_equal(b, a, check_exact=True)
    assert a["source_id"].tolist()[:2] == ["0", "1"]
    j1, j2 = (json.loads((r.path / "ngram.json").read_text()) for r in (one, many))
    assert j2["log10_prob"] == j1["log10_prob"] and j2["counts"]["n_tokens"] == j1["counts"]["n_tokens"]


@pytest.mark.parametrize("rows_per_write", [1, 10**9])
def test_gpu_scores_written_on_the_device_equal_the_host_writer(abc_pair, corpora, tmp_path, monkeypatch,
                                                                rows_per_write):
    """One GPU in process: cudf's writer (scores kept on the device) writes the file and totals that
    pyarrow's writer writes from the same scores: numbered source ids ``<file>:<row>`` across the
    pieces of two files, jsonl ids, empty documents, NaN perplexities; column types as pyarrow reads them;
    a row group a piece, or all pieces gathered into one write."""
    monkeypatch.setattr(ng, "DEVICE_ROWS_PER_WRITE", rows_per_write)

    _, gpu = abc_pair
    d = tmp_path / "in"
    d.mkdir()
    docs = [t.replace("\n", " ") for t in corpora[:3000]]
    docs[5] = docs[2000] = ""  # empty documents: 0 tokens with eos=False, NaN perplexity
    (d / "a.txt").write_text("\n".join(docs[:2000]) + "\n", encoding="utf-8")
    (d / "b.txt").write_text("\n".join(docs[2000:]) + "\n", encoding="utf-8")
    pd.DataFrame({"id": [f"j{i}" for i in range(500)], "text": docs[:500]}).to_json(
        tmp_path / "j.jsonl", orient="records", lines=True)
    for src, fmt in ((d, "lines"), (tmp_path / "j.jsonl", "jsonl")):
        fs, pieces, _ = plan(src, format=fmt, blocksize=1 << 20)
        assert len(pieces) >= 2
        got = {}
        for device in (False, True):
            path = tmp_path / f"{fmt}-{device}.parquet"
            w = ng._ScoresWriter(path, pieces, device=device)
            for i, p in enumerate(pieces):
                texts = ng._read_for(gpu, p, fs)
                w.add(i, ng._score_piece_device(gpu, texts, "line", True, False) if device
                      else ng._score_slice(gpu, texts, 0, ng._n_rows(texts), "line", True, False)[0])
            w.close()
            got[device] = (pq.read_table(path), w.totals, w.sum_log10, w.empty, w.n_docs)
        (host, *host_tot), (dev, *dev_tot) = got[False], got[True]
        assert dev.schema.types == host.schema.types and dev.column_names == host.column_names, (dev.schema,
                                                                                                 host.schema)
        pd.testing.assert_frame_equal(dev.to_pandas(), host.to_pandas(), check_exact=True)
        assert dev_tot == host_tot and dev_tot[2] >= 1
        groups = pq.ParquetFile(tmp_path / f"{fmt}-True.parquet").num_row_groups
        assert groups == (len(pieces) if rows_per_write == 1 else 1), groups
        ids = dev["source_id"].to_pylist()
        if fmt == "lines":
            assert ids[0] == "a.txt:0" and ids[1999] == "a.txt:1999" and ids[2000] == "b.txt:0", ids[1995:2005]
        else:
            assert ids[:3] == ["j0", "j1", "j2"]
