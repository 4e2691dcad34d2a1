"""The device text path on a GPU == the CPU path (skipped without a device).

* the token kernels (offsets, hashes, byte comparison) on cupy == their numba twins;
* the partition scan on cudf == the CPU front end's scan, on every shared corpus;
* the device lines reader == the host reader (CRLF, BOM, empty lines, undecodable bytes, blocks);
* a bm25 index from lines files built on the GPU (1 GPU and 2) == the CPU index.

Each failure message names the corpus, document and first differing terms.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from cutext import pipelines
from cutext.kernels import tokenize as K
from cutext.kernels.backend import device_count, to_cudf, to_host
from cutext.pipelines import datasets
from cutext.stages.readers import device as GR
from cutext.stages.readers import pread
from cutext.stages.readers.files import plan, read_piece
from cutext.stages.text import device as GT
from cutext.stages.text import token_bytes as TB
from cutext.stages.text.partitions import tokenize_partition_scan
from cutext.stages.text.tokenize import TokenizerConfig

from helpers import assert_same_index, need_corpus, read_index

pytestmark = pytest.mark.gpu

CONFIGS = {"plain": TokenizerConfig.make(),
           "lucene+porter": TokenizerConfig.make(stopwords="lucene", stemmer="porter"),
           "keep-case+len": TokenizerConfig.make(lowercase=False, min_len=2, max_len=15)}


def _corpus_names():
    return sorted(datasets.CORPORA)


def _shared():
    """The shared corpora by name, each loaded when called (an absent one skips the test: need_corpus)."""
    return {name: (lambda name=name: need_corpus(name)) for name in datasets.CORPORA}


def test_token_kernels_gpu_equal_numba():
    import cupy

    rng = np.random.default_rng(5)
    texts = _shared()["nltk-brown"]()["text"].tolist()[:300]
    pieces = [t.encode() for t in texts] + [bytes(rng.integers(0, 256, rng.integers(0, 40)).astype(np.uint8))
                                            for _ in range(2000)] + [b"", b"x", b"\xff", b"a\xcc\x81 b"]
    data = np.frombuffer(b"QQ" + b"".join(pieces), np.uint8).copy()
    offsets = np.zeros(len(pieces) + 1, np.int64)
    np.cumsum([len(p) for p in pieces], out=offsets[1:])
    offsets += 2
    want = K.token_bounds(K.blank_separators(data, offsets), offsets)
    dd, do = cupy.asarray(data), cupy.asarray(offsets)
    got = K.token_bounds(K.blank_separators(dd, do), do)
    for name, w, g in zip(("starts", "ends", "rows"), want, got):
        assert np.array_equal(w, g.get()), \
            f"token_bounds {name}: first difference at {np.flatnonzero(w != g.get())[:5]}"
    s, e, _ = want
    h = K.hash_tokens(data, s, e)
    hg = K.hash_tokens(dd, cupy.asarray(s), cupy.asarray(e)).get()
    assert np.array_equal(h, hg), f"hash_tokens: {np.count_nonzero(h != hg)} of {len(h)} differ"
    rep = rng.integers(0, len(s), len(s)).astype(np.int64)
    eq = K.tokens_equal(data, s, e, rep)
    eqg = K.tokens_equal(dd, cupy.asarray(s), cupy.asarray(e), cupy.asarray(rep)).get()
    assert np.array_equal(eq, eqg), f"tokens_equal: {np.count_nonzero(eq != eqg)} differ"


def test_split_lines_gpu_equals_numba():
    """The device line split (tk_lines_*) == its twin: real lines with LF and CRLF ends, stray CRs,
    empty lines, a last line with and without its newline, lines across the kernels' chunks."""
    import cupy

    rng = np.random.default_rng(11)
    texts = _shared()["nltk-brown"]()["text"].tolist()[:2000]
    ends = rng.choice([b"\n", b"\r\n", b"\r\r\n", b"\n\n", b"\r"], size=len(texts))
    body = b"".join(t.encode() + e for t, e in zip(texts, ends))
    for raw in (body, body + b"tail", body[:-1], b"\r\n" * 100, b"x"):
        buf = np.frombuffer(raw, np.uint8)
        want = K.split_lines(buf)
        got = K.split_lines(cupy.asarray(buf))
        for name, w, g in zip(("chars", "offsets"), want, got):
            assert np.array_equal(w, g.get()), f"split_lines {name} of {len(raw)} bytes"


def _triples(uniq, code, pos, tf):
    u = np.asarray(to_host(uniq).astype(str).tolist(), dtype=object)
    c, p, t = (np.asarray(to_host(x)) for x in (code, pos, tf))
    return pd.DataFrame({"term": u[c], "pos": p, "tf": t}).sort_values(["term", "pos"], ignore_index=True)


@pytest.mark.parametrize("cfg", ["plain", "lucene+porter"])
@pytest.mark.parametrize("name", _corpus_names())
def test_scan_partition_gpu_equals_cpu_on_every_corpus(name, cfg):
    _check_scan(name, cfg)


def test_scan_partition_gpu_equals_cpu_keeping_case_with_length_bounds():
    _check_scan("nltk-brown", "keep-case+len")


def _check_scan(name, cfg):
    docs = _shared()[name]()
    text = pd.Series(list(docs["text"]), dtype=pd.StringDtype("pyarrow"))
    c = CONFIGS[cfg]
    want = tokenize_partition_scan(pd.DataFrame({"text": text}), c)
    got = GT.scan_partition(to_cudf(text).reset_index(drop=True), c)
    assert got is not None, f"{name}: a 64-bit hash collision (the exact fallback would run); report it"
    uniq, code, pos, tf, lengths = got
    lg = lengths.get()
    if not np.array_equal(lg, want.lengths):
        bad = np.flatnonzero(lg != want.lengths)[:5]
        pytest.fail(f"{name}/{cfg}: document lengths differ at {len(np.flatnonzero(lg != want.lengths))} "
                    f"documents, first {[(docs['source_id'][i], int(want.lengths[i]), int(lg[i])) for i in bad]}")
    a, b = _triples(want.uniq, want.code, want.pos, want.tf), _triples(uniq, code, pos, tf)
    if not a.equals(b):
        m = a.merge(b, how="outer", on=["term", "pos"], suffixes=("_cpu", "_gpu"), indicator=True)
        diff = m[(m["_merge"] != "both") | (m["tf_cpu"] != m["tf_gpu"])].head(10)
        pytest.fail(f"{name}/{cfg}: (term, document, tf) differ; cpu {len(a)} gpu {len(b)} pairs; first:\n{diff}")
    assert uniq.nunique() == len(uniq), f"{name}: unique terms repeat"


def test_scan_partition_gpu_falls_back_on_a_collision(monkeypatch):
    """A forced collision: the front end's GPU scan takes the exact string path, same result."""
    import cudf

    text = pd.Series(["ab cd ab", "cd xy", ""], dtype=pd.StringDtype("pyarrow"))
    want = tokenize_partition_scan(pd.DataFrame({"text": text}), CONFIGS["plain"])
    monkeypatch.setattr(TB, "hash_tokens", lambda d, s, e: (e - s).astype(np.uint64))
    assert GT.scan_partition(to_cudf(text), CONFIGS["plain"]) is None
    got = tokenize_partition_scan(cudf.DataFrame({"text": to_cudf(text)}), CONFIGS["plain"])
    pd.testing.assert_frame_equal(_triples(want.uniq, want.code, want.pos, want.tf),
                                  _triples(got.uniq, got.code, got.pos, got.tf))


def _write_lines_corpus(dest, n_docs=None):
    """20 Newsgroups posts, one a line, in two files: the first with a BOM and CRLF endings, the
    second with undecodable bytes in a few lines and no final newline."""
    docs = _shared()["20news"]()
    texts = [" ".join(t.split()) for t in docs["text"].tolist()[:n_docs]]
    half = len(texts) // 2
    dest.mkdir(parents=True, exist_ok=True)
    a = "\r\n".join(texts[:half]).encode() + b"\r\n\r\n"
    (dest / "a.txt").write_bytes(b"\xef\xbb\xbf" + a)
    lines = [t.encode() for t in texts[half:]]
    for i in range(0, len(lines), 997):
        lines[i] = lines[i][:20] + b" caf\xc3 \xff\xfe na\xcc" + lines[i][20:] + b" \xed\xa0\x80x"
    (dest / "b.txt").write_bytes(b"\n".join(lines))
    return dest


def test_read_lines_device_equals_host_reader(tmp_path):
    src = _write_lines_corpus(tmp_path / "lines", 4000)
    fs, pieces, fmt = plan(str(src), format="lines", blocksize=256 << 10)
    assert fmt == "lines" and len(pieces) > 4
    for k, piece in enumerate(pieces):
        want = read_piece(piece, fs)
        got = GR.read_lines_device(piece, fs).to_pandas()
        where = f"piece {k} ({piece.paths[0]} bytes {piece.start}-{piece.end})"
        assert len(got) == len(want), f"{where}: {len(got)} lines on the device, {len(want)} on the host"
        assert got["text"].astype(str).tolist() == want["text"].astype(str).tolist(), where
        np.testing.assert_array_equal(got["replaced"].to_numpy(), want["replaced"].to_numpy(), err_msg=where)
        assert got["source_id"].isna().all() and want["source_id"].isna().all(), where


@pytest.mark.parametrize("chunk", [5, 1 << 20])
def test_piece_device_bytes_equal_the_host_bytes(tmp_path, monkeypatch, chunk):
    """The device bytes of every piece (streamed through pinned staging buffers, several threads,
    short chunks) == the host reader's bytes (BOM of a file start dropped, CRLF kept, a last line
    without newline, an empty file); and the pinned reader of JSON/CSV pieces gives them too."""
    import cupy

    from cutext.stages.readers.files import _read_bytes

    monkeypatch.setattr(pread, "READ_CHUNK", chunk)
    rng = np.random.default_rng(chunk)
    lines = [("w" * int(rng.integers(0, 40)) + " é").encode() for _ in range(300)]
    (tmp_path / "a.txt").write_bytes(b"\xef\xbb\xbf" + b"\r\n".join(lines) + b"\r\n")
    (tmp_path / "b.txt").write_bytes(b"\n".join(lines[:50]))
    (tmp_path / "c.txt").write_bytes(b"")
    (tmp_path / "d.txt").write_bytes(b"\xef\xbb\xbfx\n\n\ny")
    fs, pieces, _ = plan(str(tmp_path), format="lines", blocksize=997)
    assert len(pieces) >= 8
    for p in pieces:
        where = (p.paths[0], p.start, p.end)
        want = GR.piece_bytes(p, fs)
        raw, start = _read_bytes(fs, p)
        assert bytes(want) == (raw[3:] if start == 0 and raw[:3] == b"\xef\xbb\xbf" else raw), where
        got = GR.piece_device_bytes(p, fs)
        assert isinstance(got, cupy.ndarray), where
        assert bytes(got.get()) == bytes(want), where
        host, dev = GR.piece_to_device(p, fs)
        assert bytes(host) == bytes(want) and bytes(dev.get()) == bytes(want), where


def _build(src, out, **kw):
    return pipelines.run("bm25", str(src), out=str(out), progress=False, format="lines", **kw)


@pytest.fixture(scope="module")
def lines_cpu(tmp_path_factory):
    src = _write_lines_corpus(tmp_path_factory.mktemp("lines") / "corpus")
    r = _build(src, tmp_path_factory.mktemp("idx") / "cpu", backend="cpu", blocksize=2 << 20,
               stopwords="lucene", stemmer="porter")
    assert r.counts["replaced"] > 0
    return src, r, read_index(r.path)


def test_lines_index_gpu_equals_cpu(lines_cpu, tmp_path):
    src, cpu, cpu_index = lines_cpu
    gpu = _build(src, tmp_path / "gpu", backend="gpu", scheduler="sync", blocksize=2 << 20,
                 stopwords="lucene", stemmer="porter")
    print("gpu timings", gpu.timings)
    assert gpu.counts == cpu.counts
    assert_same_index(cpu_index, read_index(gpu.path))


@pytest.mark.parametrize("index_format", [2, 1])
def test_lines_index_under_a_device_memory_limit_spills_and_equals_cpu(lines_cpu, tmp_path, monkeypatch,
                                                                       index_format):
    """With RMM limited to 2x the input (the in-memory build needs ~4x), the GPU build keeps its
    partitions in files (``spill=``), stays under the limit (else RMM raises), and gives the same index
    (format 1: in term ranges sized to the budget)."""
    import rmm

    from cutext.stages.runtime.compute import device_memory_budget
    from cutext.stages.text import public as api

    src, cpu, cpu_index = lines_cpu
    limit = 2 * cpu.counts["input_bytes"]
    calls = []  # the spill= folder of each tokenize the front end runs
    real = api.tokenize
    monkeypatch.setattr(api, "tokenize", lambda *a, **k: calls.append(k.get("spill")) or real(*a, **k))
    before = rmm.mr.get_current_device_resource()
    rmm.mr.set_current_device_resource(rmm.mr.LimitingResourceAdaptor(rmm.mr.CudaAsyncMemoryResource(), limit))
    try:
        assert device_memory_budget() <= limit
        gpu = _build(src, tmp_path / "gpu", backend="gpu", scheduler="sync", blocksize=2 << 20,
                     stopwords="lucene", stemmer="porter", index_format=index_format)
    finally:
        rmm.mr.set_current_device_resource(before)
    assert calls and calls[0] is not None, "the limited build did not take the spilled path"
    assert gpu.counts["input_bytes"] == cpu.counts["input_bytes"]
    assert gpu.counts == cpu.counts
    assert_same_index(cpu_index, read_index(gpu.path))
    assert not list(gpu.path.rglob(".spill"))
    if index_format == 1:
        assert len(list((gpu.path / "postings").glob("*.parquet"))) > 1  # term ranges sized to the budget


def test_lines_index_on_two_gpus_equals_cpu(lines_cpu, tmp_path):
    if device_count() < 2:
        pytest.skip("needs 2 GPUs")
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    src, cpu, cpu_index = lines_cpu
    with LocalCUDACluster(n_workers=2) as cluster, Client(cluster) as client:
        gpu = _build(src, tmp_path / "gpu2", backend="gpu", client=client, blocksize=2 << 20,
                     stopwords="lucene", stemmer="porter")
    assert gpu.n_workers == 2 and gpu.counts["partitions"] >= 4
    assert_same_index(cpu_index, read_index(gpu.path))


def test_read_parquet_device_equals_host_reader(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    docs = _shared()["20news"]().iloc[:3000]
    texts = docs["text"].tolist()
    n = len(texts)
    titles = [None if i % 7 == 0 else f"title {i} é" for i in range(n)]
    pq.write_table(pa.table({"id": pa.array(range(n), pa.int64()), "title": titles,
                             "text": [None if i % 11 == 0 else t for i, t in enumerate(texts)]}),
                   tmp_path / "a.parquet", row_group_size=500)
    pq.write_table(pa.table({"_id": docs["source_id"].astype(str).tolist(), "contents": texts}),
                   tmp_path / "b.parquet")
    pq.write_table(pa.table({"text": pa.array(range(n), pa.int64())}), tmp_path / "c.parquet")  # host fallback
    cases = [("a.parquet", {"text_column": ["title", "text"]}), ("a.parquet", {}), ("b.parquet", {}),
             ("c.parquet", {})]
    for name, opts in cases:
        fs, pieces, fmt = plan(str(tmp_path / name), format="parquet", **opts)
        for piece in pieces:
            want = read_piece(piece, fs)
            got = GR.read_parquet_device(piece, fs).to_pandas()
            where = f"{name} {opts}"
            assert len(got) == len(want), where
            assert got["text"].astype(str).tolist() == want["text"].astype(str).tolist(), where
            assert got["source_id"].astype(str).tolist() == want["source_id"].astype(str).tolist(), where
            np.testing.assert_array_equal(got["replaced"].to_numpy(), want["replaced"].to_numpy(), err_msg=where)


def test_parquet_index_gpu_equals_cpu(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    docs = _shared()["20news"]()
    half = len(docs) // 2
    src = tmp_path / "pq"
    src.mkdir()
    for i, part in enumerate((docs.iloc[:half], docs.iloc[half:])):
        pq.write_table(pa.table({"id": part["source_id"].astype(str).tolist(), "text": part["text"].tolist()}),
                       src / f"part-{i}.parquet")
    kw = dict(format="parquet", stopwords="lucene", stemmer="porter", progress=False)
    cpu = pipelines.run("bm25", str(src), out=str(tmp_path / "cpu"), backend="cpu", **kw)
    gpu = pipelines.run("bm25", str(src), out=str(tmp_path / "gpu"), backend="gpu", scheduler="sync", **kw)
    print("gpu timings", gpu.timings)
    assert gpu.counts == cpu.counts
    assert_same_index(read_index(cpu.path), read_index(gpu.path))


def test_read_files_device_equals_host_reader(tmp_path):
    import gzip

    docs = _shared()["20news"]().iloc[:1500]
    src = datasets.write_files(docs, tmp_path / "posts")
    extra = src / "zz-extra"
    extra.mkdir()
    (extra / "bom.txt").write_bytes(b"\xef\xbb\xbfcaf\xc3\xa9 bom")
    (extra / "bad.txt").write_bytes(b"caf\xc3 \xff\xfe na\xcc x \xed\xa0\x80")
    (extra / "cont-first.txt").write_bytes(b"\xa9 starts with a continuation byte")
    (extra / "ends-open.txt").write_bytes(b"ends with a lead byte \xc3")
    (extra / "empty.txt").write_bytes(b"")
    with gzip.open(extra / "z.txt.gz", "wb") as fh:
        fh.write("compressed é".encode())
    for blocksize in (64 << 10, 64 << 20):
        fs, pieces, fmt = plan(str(src), format="files", blocksize=blocksize)
        assert fmt == "files"
        n_fallback = 0
        for k, piece in enumerate(pieces):
            want = read_piece(piece, fs)
            got = GR.read_files_device(piece, fs).to_pandas()
            n_fallback += int(want["replaced"].sum() > 0)
            where = f"blocksize {blocksize} piece {k} ({len(piece.paths)} files from {piece.paths[0]})"
            assert got["source_id"].astype(str).tolist() == want["source_id"].astype(str).tolist(), where
            assert got["text"].astype(str).tolist() == want["text"].astype(str).tolist(), where
            np.testing.assert_array_equal(got["replaced"].to_numpy(), want["replaced"].to_numpy(), err_msg=where)
        assert n_fallback >= 1


def _jsonl_cases(tmp):
    """JSON Lines files: real posts (several pieces, a BOM and CRLF), SciFact (gzip), and records the
    device reader must hand to the host reader (escapes, types, errors)."""
    import json

    docs = _shared()["20news"]().iloc[:3000]
    texts = docs["text"].tolist()
    rows = [json.dumps({"id": i, "title": None if i % 7 == 0 else f"t{i} é", "text": t}, ensure_ascii=i % 2 == 0)
            for i, t in enumerate(texts)]
    rows[5] = json.dumps({"id": 5, "title": "no text key"})
    rows[6] = json.dumps({"id": 6, "text": None})
    (tmp / "news.jsonl").write_bytes(b"\xef\xbb\xbf" + ("\r\n".join(rows[:1500]) + "\r\n\r\n  \r\n").encode()
                                     + ("\n".join(rows[1500:]) + "\n").encode())
    odd = {  # name: (lines, plain?) -- plain: the device parses them
        "str_ids.jsonl": (['{"_id": "a1", "contents": "x \\" y \\\\ z \\u00e9 \\/"}', '{"_id": "b", "contents": ""}'],
                          True),
        "surrogate.jsonl": (['{"id": "a", "text": "emoji \\ud83d\\ude00"}', '{"id": "b", "text": "ok"}'], False),
        "float_ids.jsonl": (['{"id": 1.5, "text": "a"}', '{"id": 2e3, "text": "b"}'], True),
        "mixed_ids.jsonl": (['{"id": 1, "text": "a"}', '{"id": "x", "text": "b"}'], True),
        "num_text.jsonl": (['{"id": "a", "text": 5}', '{"id": "b", "text": "b"}'], True),
        "null_id.jsonl": (['{"id": "a", "text": "a"}', '{"id": null, "text": "b"}'], True),
        "bad_line.jsonl": (['{"id": "a", "text": "a"}', '{"id": "b", "text": "b",}'], False),
        "leading_zero.jsonl": (['{"id": "a", "text": "a", "n": 01}'], False),
        "nan.jsonl": (['{"id": "a", "text": "a", "x": NaN}'], False),
        "truncated.jsonl": (['{"id": "a", "text": "a"}', '{"id": "b", "te'], False),
        "bad_escape.jsonl": (['{"id": "a", "text": "a\\x41"}'], False),
        "not_object.jsonl": (['{"id": "a", "text": "a"}', '[1, 2]'], False),
        "raw_tab.jsonl": (['{"id": "a", "text": "a\tb"}'], False),
        "nested.jsonl": (['{"id": "a", "text": "a", "meta": {"k": [1, 2]}}', '{"id": "b", "text": "b"}'], True),
    }
    for name, (lines, _) in odd.items():
        (tmp / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return odd


def _read_both(piece, fs):
    from cutext.stages.readers.base import CorpusError

    out = []
    for fn in (lambda: read_piece(piece, fs), lambda: GR.read_jsonl_device(piece, fs).to_pandas()):
        try:
            out.append(fn())
        except CorpusError as exc:
            out.append(str(exc))
    return out


def test_read_jsonl_device_equals_host_reader(shared_data, tmp_path, monkeypatch):
    """libcudf parses the JSON Lines the host reader would read the same way, and hands everything else
    (surrogate escapes, invalid JSON, values that are not strings) to the host reader: same texts, ids,
    replaced counts, and the same error messages naming file and line."""
    import cutext.stages.readers.device as R  # the device readers hand a piece to read_piece, the host reader

    odd = _jsonl_cases(tmp_path)
    host_calls = []
    real = R.read_piece
    monkeypatch.setattr(R, "read_piece", lambda p, fs: host_calls.append(p.paths[0]) or real(p, fs))
    cases = [("news.jsonl", {}, 64 << 10), ("news.jsonl", {"text_column": ["title", "text"]}, 1 << 20),
             (str(shared_data / "ir" / "scifact" / "corpus.jsonl.gz"), {"text_column": ["title", "text"]}, None)]
    cases += [(name, {}, None) for name in odd]
    for name, opts, bs in cases:
        path = name if "/" in name else str(tmp_path / name)
        kw = {"blocksize": bs} if bs else {}
        fs, pieces, fmt = plan(path, format="jsonl", **opts, **kw)
        assert fmt == "jsonl"
        if name == "news.jsonl" and bs:
            assert len(pieces) > 4
        for k, piece in enumerate(pieces):
            host_calls.clear()
            want, got = _read_both(piece, fs)
            where = f"{name} {opts} piece {k}"
            if isinstance(want, str) or isinstance(got, str):
                assert isinstance(got, str) and got == want, f"{where}: host {want!r}, device {got!r}"
                continue
            assert len(got) == len(want), where
            assert got["text"].astype(str).tolist() == want["text"].astype(str).tolist(), where
            assert got["source_id"].isna().tolist() == want["source_id"].isna().tolist(), where
            assert (got["source_id"].dropna().astype(str).tolist()
                    == want["source_id"].dropna().astype(str).tolist()), where
            np.testing.assert_array_equal(got["replaced"].to_numpy(), want["replaced"].to_numpy(), err_msg=where)
            plain = odd[name][1] if name in odd else True
            if (name == "news.jsonl" or "scifact" in name) and len(want):  # real corpora: parsed on the device
                # (a piece inside a long line holds no record: the host reader returns its empty frame)
                assert host_calls == [], f"{where}: the device reader fell back to the host"
            elif not plain:
                assert host_calls == [piece.paths[0]], f"{where}: expected the host reader"


def test_jsonl_index_gpu_equals_cpu(shared_data, tmp_path):
    src = shared_data / "ir" / "scifact" / "corpus.jsonl.gz"
    kw = dict(format="jsonl", text_column=["title", "text"], stopwords="lucene", stemmer="porter", progress=False)
    cpu = pipelines.run("bm25", str(src), out=str(tmp_path / "cpu"), backend="cpu", **kw)
    gpu = pipelines.run("bm25", str(src), out=str(tmp_path / "gpu"), backend="gpu", scheduler="sync", **kw)
    print("gpu timings", gpu.timings)
    assert gpu.counts == cpu.counts
    assert_same_index(read_index(cpu.path), read_index(gpu.path))


def _csv_cases(tmp, shared_data):
    """CSV/TSV files: real posts written by pyarrow (every string quoted; a BOM; TSV; gzip), SciFact,
    and files the device reader must hand to the host reader (CRLF, blank lines, ragged rows, quotes
    inside unquoted fields, undecodable bytes...)."""
    import gzip
    import json

    import pyarrow.csv as pcsv

    docs = _shared()["20news"]().iloc[:3000]
    news = pa.table({"id": [f"n{i:04d}" for i in range(len(docs))],
                     "title": ["" if i % 7 == 0 else f"t{i} é" for i in range(len(docs))],
                     "text": docs["text"].tolist()})
    pcsv.write_csv(news, tmp / "news.csv")
    (tmp / "news_bom.csv").write_bytes(b"\xef\xbb\xbf" + (tmp / "news.csv").read_bytes())
    pcsv.write_csv(news, tmp / "news.tsv", write_options=pcsv.WriteOptions(delimiter="\t"))
    with gzip.open(tmp / "news.csv.gz", "wb") as fh:
        fh.write((tmp / "news.csv").read_bytes())
    with gzip.open(shared_data / "ir" / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        sci = [json.loads(line) for line in fh if line.strip()]
    pcsv.write_csv(pa.table({"_id": [str(r["_id"]) for r in sci], "title": [r["title"] for r in sci],
                             "text": [r["text"] for r in sci]}), tmp / "scifact.csv")
    odd = {  # name: (bytes, plain?) -- plain: the device parses them
        "quoted.csv": (b'"text","id"\n"a, b",1\n"say ""hi""",2\n"two\nlines",3\n"",4\n,5\n"""",6\n', True),
        "ctrl.csv": (b'text,id\n"form\x0cfeed, esc\x1b",1\n"cr\r\nlf\r\n\r\nend",2\n', True),
        "utf8.tsv": ("title\ttext\tid\nété\ta b, c\t007\n\t\"x\ty\"\t08\n".encode(), True),
        "na.csv": (b"id,text\n1,NA\n2,null\n3,NaN\n4,#hash\n5,True\n6,1e3\n7,2\n", True),
        "pad_quoted.csv": (b'text,id\n"  padded  ",1\n" ",2\n', True),
        "floaty_ids.csv": (b"id,text\n1.50,a\n-0,b\n1e3,c\n", True),
        "crlf.csv": (b"text,id\r\nhello,1\r\nbye,2\r\n", False),
        "blank.csv": (b"text,id\nhello,1\n\nbye,2\n", False),
        "literal_quote.csv": (b'text,id\n5" disk,1\n', False),
        "ragged.csv": (b"text,id\nhello,1\nbye,2,3\n", False),
        "unterminated.csv": (b'text,id\n"never closed,1\nb,2\n', False),
        "spaces.csv": (b"text,id\n hello ,1\n\tx\t, 2 \n", True),
        "dup_header.csv": (b"text,text\na,b\n", False),
        "no_text.csv": (b"a,b\n1,2\n", False),
        "bad_utf8.csv": (b"text,id\nab\xffcd,1\n", False),
        "only_header.csv": (b"text,id\n", False),
        "no_id.csv": (b'text,n\n"a, b",1\nc,2\n', True),           # no id column: ids numbered later
    }
    for name, (data, _) in odd.items():
        (tmp / name).write_bytes(data)
    return odd


def test_read_csv_device_equals_host_reader(shared_data, tmp_path, monkeypatch, caplog):
    """The device parses the CSV/TSV files in the subset the host reader (pyarrow) reads the same way,
    and hands everything else to the host reader: same texts, ids, replaced counts, and the same error
    messages."""
    import cutext.stages.readers.device as R  # the device readers hand a piece to read_piece, the host reader

    odd = _csv_cases(tmp_path, shared_data)
    host_calls = []
    real = R.read_piece
    monkeypatch.setattr(R, "read_piece", lambda p, fs: host_calls.append(p.paths[0]) or real(p, fs))
    real_names = ("news.csv", "news_bom.csv", "news.tsv", "news.csv.gz", "scifact.csv")
    cases = [(n, {}) for n in real_names] + [("news.csv", {"text_column": ["title", "text"]}),
                                            ("scifact.csv", {"text_column": ["title", "text"]}),
                                            ("news.csv", {"id_column": "title"})]
    cases += [(name, {}) for name in odd]
    problems = []
    caplog.set_level("DEBUG", logger=GR.__name__)
    for name, opts in cases:
        caplog.clear()
        fs, pieces, fmt = plan(str(tmp_path / name), format="csv", **opts)
        assert fmt == "csv" and len(pieces) == 1
        piece = pieces[0]
        host_calls.clear()
        out = []
        for fn in (lambda: read_piece(piece, fs), lambda: GR.read_csv_device(piece, fs).to_pandas()):
            try:
                out.append(fn())
            except R.CorpusError as exc:
                out.append(str(exc))
        want, got = out
        where = f"{name} {opts}"
        if isinstance(want, str) or isinstance(got, str):
            if not (isinstance(got, str) and got == want):
                problems.append(f"{where}: host {want!r:.300}, device {got!r:.300}")
            continue
        if len(got) != len(want):
            problems.append(f"{where}: {len(got)} rows, host {len(want)}")
            continue
        gt, wt = got["text"].astype(str).tolist(), want["text"].astype(str).tolist()
        if gt != wt:
            i = next(i for i in range(len(gt)) if gt[i] != wt[i])
            problems.append(f"{where}: row {i} text {gt[i][:80]!r}, host {wt[i][:80]!r}")
        if (got["source_id"].isna().tolist() != want["source_id"].isna().tolist()
                or got["source_id"].dropna().astype(str).tolist() != want["source_id"].dropna().astype(str).tolist()):
            problems.append(f"{where}: ids {got['source_id'].head(3).tolist()}, "
                            f"host {want['source_id'].head(3).tolist()}")
        if not np.array_equal(got["replaced"].to_numpy(), want["replaced"].to_numpy()):
            problems.append(f"{where}: replaced counts differ")
        plain = odd[name][1] if name in odd else True
        if plain and host_calls:
            problems.append(f"{where}: the device reader fell back to the host: {caplog.messages}")
        elif not plain and host_calls != [piece.paths[0]]:
            problems.append(f"{where}: expected the host reader")
    assert not problems, "\n".join(problems)


def test_csv_too_large_for_the_device_goes_to_the_host_reader(tmp_path, monkeypatch, caplog):
    p = tmp_path / "t.csv"
    p.write_bytes(b'id,text\n1,"a, b"\n2,c\n')
    fs, pieces, _ = plan(str(p), format="csv")
    caplog.set_level("DEBUG", logger=GR.__name__)
    assert GR.read_csv_device(pieces[0], fs).to_pandas()["text"].astype(str).tolist() == ["a, b", "c"]
    assert not caplog.messages
    monkeypatch.setattr(GR, "CSV_DEVICE_BYTES_PER_BYTE", 1 << 50)
    got = GR.read_csv_device(pieces[0], fs).to_pandas()
    assert got["text"].astype(str).tolist() == ["a, b", "c"]
    assert got["source_id"].astype(str).tolist() == ["1", "2"]
    assert any("too large for the device" in m for m in caplog.messages)


def test_csv_index_gpu_equals_cpu(tmp_path, shared_data):
    import pyarrow.csv as pcsv

    docs = _shared()["20news"]()
    src = tmp_path / "news.csv"
    pcsv.write_csv(pa.table({"id": [f"n{i}" for i in range(len(docs))], "text": docs["text"].tolist()}), src)
    kw = dict(format="csv", stopwords="lucene", stemmer="porter", progress=False)
    cpu = pipelines.run("bm25", str(src), out=str(tmp_path / "cpu"), backend="cpu", **kw)
    gpu = pipelines.run("bm25", str(src), out=str(tmp_path / "gpu"), backend="gpu", scheduler="sync", **kw)
    print("gpu timings", gpu.timings)
    assert gpu.counts == cpu.counts
    assert_same_index(read_index(cpu.path), read_index(gpu.path))
