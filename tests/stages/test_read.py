"""Tests for cutext.stages.readers.files: formats, splitting, undecodable bytes, errors, atomic index writes.

Every corpus here is built from the first 50 documents of the bundled CACM collection
(``data/cacm/cacm.json``), written out in each reader format; the expected documents are the
CACM ids and texts themselves, so every format is checked against the same oracle.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import uuid
from pathlib import Path

import dask
import fsspec
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cutext import pipelines
from cutext.stages.readers.base import CorpusError, decode_counting
from cutext.stages.readers.files import assign_doc_ids
from cutext.stages.readers.source import read_corpus

zstd = pytest.importorskip("zstandard")

CACM = Path(__file__).resolve().parents[2] / "data" / "cacm" / "cacm.json"
N_DOCS = 50


# ----------------------------------------------------------------------------- helpers

@pytest.fixture(scope="module")
def cacm():
    """(ids, texts) of the first 50 CACM documents; texts on one line, whitespace collapsed."""
    ids, texts = [], []
    with open(CACM, encoding="utf-8") as fh:
        for line in fh:
            obj = json.loads(line)
            ids.append(obj["id"])
            texts.append(" ".join(obj["contents"].split()))
            if len(ids) == N_DOCS:
                break
    assert len(set(ids)) == N_DOCS and all(texts)
    return ids, texts


def read_docs(path, **kw) -> pd.DataFrame:
    """read_corpus + assign_doc_ids, computed; checks the dense doc ids."""
    with dask.config.set(scheduler="synchronous"):
        ddf, pieces, fmt = read_corpus(path, **kw)
        assert ddf.npartitions == len(pieces)
        out, counts = assign_doc_ids(ddf, pieces)
        df = out.compute()
    assert list(df.columns) == ["doc_id", "source_id", "text", "replaced"]
    assert df["doc_id"].tolist() == list(range(len(df)))
    assert int(counts.sum()) == len(df)
    df.attrs["format"] = fmt
    df.attrs["npartitions"] = len(pieces)
    return df.reset_index(drop=True)


def assert_docs(df, source_ids, texts, replaced=None):
    assert df["source_id"].astype(object).tolist() == list(source_ids)
    assert df["text"].astype(object).tolist() == list(texts)
    assert df["replaced"].tolist() == (list(replaced) if replaced is not None else [0] * len(texts))


def jsonl_bytes(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8")


def lines_bytes(texts) -> bytes:
    return "".join(t + "\n" for t in texts).encode("utf-8")


def compress(data: bytes, comp: str) -> bytes:
    if comp == "gz":
        return gzip.compress(data)
    if comp == "bz2":
        return bz2.compress(data)
    if comp == "xz":
        return lzma.compress(data)
    return zstd.ZstdCompressor().compress(data)


def tree(path: Path) -> dict:
    """{relative path: bytes} of every file under ``path``."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def leftovers(parent: Path, name: str) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(f".{name}."))


def build(path, out, **kw):
    return pipelines.run("bm25", path, out=out, progress=False, backend="cpu", scheduler="sync", **kw)


# ----------------------------------------------------------------------------- 1. formats

def _write_files_dir(tmp, ids, texts):
    root = tmp / "files"
    names = []
    for i, (d, t) in enumerate(zip(ids, texts)):
        rel = f"{i:03d}_{d}.txt" if i < 40 else f"sub/{i:03d}_{d}.txt"  # nested: relative path
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(t, encoding="utf-8")
        names.append(rel)
    (root / ".hidden").write_text("not a document")
    return root, {}, names


def _write_lines(tmp, ids, texts):
    p = tmp / "corpus.txt"
    p.write_bytes(lines_bytes(texts))
    return p, {}, [str(i) for i in range(len(texts))]


def _write_lines_two_files(tmp, ids, texts):
    root = tmp / "two"
    root.mkdir()
    (root / "a.txt").write_bytes(lines_bytes(texts[:20]))
    (root / "b.txt").write_bytes(lines_bytes(texts[20:]))
    sids = [f"a.txt:{i}" for i in range(20)] + [f"b.txt:{i}" for i in range(len(texts) - 20)]
    return root, {"format": "lines"}, sids


def _write_lines_list(tmp, ids, texts):
    a, b = tmp / "x.txt", tmp / "y.txt"
    a.write_bytes(lines_bytes(texts[:30]))
    b.write_bytes(lines_bytes(texts[30:]))
    sids = [f"x.txt:{i}" for i in range(30)] + [f"y.txt:{i}" for i in range(len(texts) - 30)]
    return [str(a), str(b)], {"format": "lines"}, sids


def _write_jsonl_default(tmp, ids, texts):
    p = tmp / "corpus.jsonl"
    p.write_bytes(jsonl_bytes({"id": d, "contents": t} for d, t in zip(ids, texts)))
    return p, {}, ids


def _write_jsonl_text_default(tmp, ids, texts):
    p = tmp / "corpus.ndjson"
    p.write_bytes(jsonl_bytes({"_id": d, "text": t, "extra": 1} for d, t in zip(ids, texts)))
    return p, {}, ids


def _write_jsonl_beir(tmp, ids, texts):
    p = tmp / "beir.jsonl"
    rows = []
    for d, t in zip(ids, texts):
        words = t.split(" ")
        rows.append({"_id": d, "title": " ".join(words[:3]), "text": " ".join(words[3:]), "metadata": {}})
    p.write_bytes(jsonl_bytes(rows))
    return p, {"text_column": ["title", "text"]}, ids


def _write_jsonl_named(tmp, ids, texts):
    p = tmp / "named.json"
    p.write_bytes(jsonl_bytes({"key": d, "id": i, "body_x": t} for i, (d, t) in enumerate(zip(ids, texts))))
    return p, {"text_column": "body_x", "id_column": "key"}, ids


def _write_parquet(tmp, ids, texts):
    p = tmp / "corpus.parquet"
    pq.write_table(pa.table({"id": ids, "text": texts}), p, row_group_size=7)
    return p, {}, ids


def _write_parquet_no_id(tmp, ids, texts):
    p = tmp / "corpus.pq"
    pq.write_table(pa.table({"body": texts}), p)
    return p, {"text_column": "body"}, [str(i) for i in range(len(texts))]


def _write_csv(tmp, ids, texts):
    p = tmp / "corpus.csv"
    pd.DataFrame({"docno": ids, "contents": texts}).to_csv(p, index=False)
    return p, {}, ids


def _write_tsv_named(tmp, ids, texts):
    p = tmp / "corpus.tsv"
    pd.DataFrame({"k": ids, "t": texts}).to_csv(p, index=False, sep="\t")
    return p, {"text_column": "t", "id_column": "k"}, ids


def _compressed(kind, comp):
    def write(tmp, ids, texts):
        if kind == "lines":
            p = tmp / f"corpus.txt.{comp}"
            p.write_bytes(compress(lines_bytes(texts), comp))
            return p, {}, [str(i) for i in range(len(texts))]
        p = tmp / f"corpus.jsonl.{comp}"
        p.write_bytes(compress(jsonl_bytes({"id": d, "contents": t} for d, t in zip(ids, texts)), comp))
        return p, {}, ids
    return write


def _memory(kind):
    def write(tmp, ids, texts):
        url = f"memory://cutext-test-{uuid.uuid4().hex}/corpus.{'txt' if kind == 'lines' else 'jsonl'}"
        data = lines_bytes(texts) if kind == "lines" else \
            jsonl_bytes({"id": d, "contents": t} for d, t in zip(ids, texts))
        with fsspec.open(url, "wb") as fh:
            fh.write(data)
        return url, {}, [str(i) for i in range(len(texts))] if kind == "lines" else ids
    return write


FORMATS = {
    "files-dir": (_write_files_dir, "files"),
    "lines": (_write_lines, "lines"),
    "lines-two-files": (_write_lines_two_files, "lines"),
    "lines-list": (_write_lines_list, "lines"),
    "jsonl-id-contents": (_write_jsonl_default, "jsonl"),
    "jsonl-_id-text": (_write_jsonl_text_default, "jsonl"),
    "jsonl-beir-title-text": (_write_jsonl_beir, "jsonl"),
    "jsonl-named-columns": (_write_jsonl_named, "jsonl"),
    "parquet": (_write_parquet, "parquet"),
    "parquet-no-id": (_write_parquet_no_id, "parquet"),
    "csv": (_write_csv, "csv"),
    "tsv-named-columns": (_write_tsv_named, "csv"),
    **{f"{k}-{c}": (_compressed(k, c), k) for k in ("lines", "jsonl") for c in ("gz", "bz2", "zst", "xz")},
    "memory-lines": (_memory("lines"), "lines"),
    "memory-jsonl": (_memory("jsonl"), "jsonl"),
}


@pytest.mark.parametrize("name", list(FORMATS))
def test_formats_give_the_same_documents(tmp_path, cacm, name):
    ids, texts = cacm
    writer, fmt = FORMATS[name]
    path, kw, source_ids = writer(tmp_path, ids, texts)
    df = read_docs(path, **kw)
    assert df.attrs["format"] == fmt
    assert_docs(df, source_ids, texts)


def test_files_source_ids_relative_to_glob_prefix(tmp_path, cacm):
    ids, texts = cacm
    for i in range(5):
        (tmp_path / f"doc{i}.txt").write_text(texts[i], encoding="utf-8")
    (tmp_path / "other.md").write_text("excluded by the glob")
    df = read_docs(str(tmp_path / "doc*.txt"))
    assert df.attrs["format"] == "files"
    assert_docs(df, [f"doc{i}.txt" for i in range(5)], texts[:5])


def test_files_in_groups_by_blocksize(tmp_path, cacm):
    ids, texts = cacm
    root, _, names = _write_files_dir(tmp_path, ids, texts)
    df = read_docs(root, blocksize=2048)
    assert df.attrs["npartitions"] > 3
    assert_docs(df, names, texts)


def test_directory_skips_hidden_entries_and_dataset_markers(tmp_path, cacm):
    ids, texts = cacm
    d = tmp_path / "ds"
    d.mkdir()
    pq.write_table(pa.table({"id": ids[:20], "text": texts[:20]}), d / "part.0.parquet")
    pq.write_table(pa.table({"id": ids[20:], "text": texts[20:]}), d / "part.1.parquet")
    pq.write_metadata(pq.read_schema(d / "part.0.parquet"), d / "_metadata")
    (d / "_SUCCESS").write_bytes(b"")
    (d / ".ipynb_checkpoints").mkdir()
    (d / ".ipynb_checkpoints" / "part.0-checkpoint.parquet").write_bytes(b"stale")
    (d / ".part.0.parquet.crc").write_bytes(b"crc")
    df = read_docs(d)
    assert df.attrs["format"] == "parquet"
    assert_docs(df, ids, texts)


def test_utf8_bom_is_not_text(tmp_path, cacm):
    ids, texts = cacm
    bom = b"\xef\xbb\xbf"
    (tmp_path / "c.txt").write_bytes(bom + lines_bytes(texts[:3]))
    assert_docs(read_docs(tmp_path / "c.txt"), ["0", "1", "2"], texts[:3])
    (tmp_path / "c.jsonl").write_bytes(bom + jsonl_bytes({"id": d, "text": t} for d, t in zip(ids[:3], texts[:3])))
    assert_docs(read_docs(tmp_path / "c.jsonl"), ids[:3], texts[:3])
    (tmp_path / "c.csv").write_bytes(bom + b"id,text\n1,a b\n")
    assert_docs(read_docs(tmp_path / "c.csv"), ["1"], ["a b"])
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "one.txt").write_bytes(bom + texts[0].encode())
    assert_docs(read_docs(tmp_path / "f"), ["one.txt"], texts[:1])


def test_ids_and_texts_kept_verbatim(tmp_path):
    """No type inference on ids or texts: "007" and "2020-01-01" are not numbers or dates."""
    c = tmp_path / "c.csv"
    c.write_text("id,text\n007,1.50\n010,2\n")
    assert_docs(read_docs(c), ["007", "010"], ["1.50", "2"])
    j = tmp_path / "d.jsonl"
    j.write_text('{"id": "2020-01-01", "text": "2021-02-03T04:05:06"}\n'
                 '{"id": "2020-01-02", "text": "x"}\n')
    assert_docs(read_docs(j), ["2020-01-01", "2020-01-02"], ["2021-02-03T04:05:06", "x"])
    n = tmp_path / "n.jsonl"
    n.write_text('{"id": 7, "text": "a"}\n{"id": 8, "text": "b"}\n')
    assert_docs(read_docs(n), ["7", "8"], ["a", "b"])
    m = tmp_path / "mixed.jsonl"   # an id column of numbers and strings
    m.write_text('{"id": 7, "text": "a"}\n{"id": "x", "text": "b"}\n')
    assert_docs(read_docs(m), ["7", "x"], ["a", "b"])
    q = tmp_path / "n.parquet"
    pq.write_table(pa.table({"id": pa.array([3, 4], pa.int64()), "text": ["a", "b"]}), q)
    assert_docs(read_docs(q), ["3", "4"], ["a", "b"])


@pytest.mark.parametrize("name,data", [
    ("c.txt", "café\nnaïve\r\n".encode("latin-1")),
    ("c.jsonl", '{"id": "é", "text": "café"}\n{"id": "2", "text": "naïve"}\n'.encode("latin-1")),
    ("c.csv", "id,text\né,café\n2,naïve\n".encode("latin-1")),
])
def test_encoding_parameter(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    df = read_docs(p, encoding="latin-1")
    assert df["text"].tolist() == ["café", "naïve"]
    assert df["replaced"].tolist() == [0, 0]
    assert df["source_id"].tolist() == (["0", "1"] if name.endswith(".txt") else ["é", "2"])
    # read as UTF-8, the Latin-1 bytes are undecodable: é and ï are one replacement each
    df = read_docs(p)
    assert df["text"].tolist() == ["caf\ufffd", "na\ufffdve"]
    assert df["replaced"].sum() == (2 if name.endswith(".txt") else 3)


# ----------------------------------------------------------------------------- 2. splitting

def _variants(texts):
    """Line-file variants of the corpus: (name, bytes, expected texts)."""
    with_empty = []
    for i, t in enumerate(texts):
        with_empty.append(t)
        if i % 7 == 3:
            with_empty.append("")
    with_empty = [""] + with_empty + ["", ""]
    return {
        "plain": (lines_bytes(texts), texts),
        "no-trailing-newline": (lines_bytes(texts)[:-1], texts),
        "empty-lines": (lines_bytes(with_empty), with_empty),
        "crlf": ("".join(t + "\r\n" for t in texts).encode(), texts),
        "crlf-no-trailing-newline": ("\r\n".join(texts).encode(), texts),
    }


@pytest.mark.parametrize("variant", ["plain", "no-trailing-newline", "empty-lines", "crlf",
                                     "crlf-no-trailing-newline"])
def test_lines_split_into_blocks_same_documents(tmp_path, cacm, variant):
    data, expected = _variants(cacm[1])[variant]
    p = tmp_path / "corpus.txt"
    p.write_bytes(data)
    whole = read_docs(p, blocksize=64 << 20)
    assert whole.attrs["npartitions"] == 1
    assert_docs(whole, [str(i) for i in range(len(expected))], expected)
    line_ends = [i + 1 for i, c in enumerate(data) if c == 10]
    at_line_end = max(e for e in line_ends if e <= 4096)
    # 4 KiB blocks; blocks shorter than most lines (some blocks hold no line start);
    # a first block that ends exactly at a line end
    for bs in (4096, 700, at_line_end):
        split = read_docs(p, blocksize=bs)
        assert split.attrs["npartitions"] > 1, bs
        pd.testing.assert_frame_equal(split, whole, check_index_type=False)


def test_lines_split_several_files_numbering(tmp_path, cacm):
    texts = cacm[1]
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_bytes(lines_bytes(texts))
    (tmp_path / "d" / "b.txt").write_bytes(lines_bytes(texts[:10]))
    df = read_docs(tmp_path / "d", format="lines", blocksize=4096)
    assert df.attrs["npartitions"] > 3
    assert_docs(df, [f"a.txt:{i}" for i in range(50)] + [f"b.txt:{i}" for i in range(10)],
                texts + texts[:10])


@pytest.mark.parametrize("variant", ["plain", "no-trailing-newline", "crlf-blank-lines"])
def test_jsonl_split_into_blocks_same_documents(tmp_path, cacm, variant):
    ids, texts = cacm
    data = jsonl_bytes({"id": d, "contents": t} for d, t in zip(ids, texts))
    if variant == "no-trailing-newline":
        data = data[:-1]
    elif variant == "crlf-blank-lines":
        data = b"\r\n" + data.replace(b"}\n", b"}\r\n\r\n")
    p = tmp_path / "corpus.jsonl"
    p.write_bytes(data)
    whole = read_docs(p)
    assert whole.attrs["npartitions"] == 1
    assert_docs(whole, ids, texts)
    for bs in (4096, 700):
        split = read_docs(p, blocksize=bs)
        assert split.attrs["npartitions"] > 4
        pd.testing.assert_frame_equal(split, whole, check_index_type=False)


def test_jsonl_split_without_id_numbers_rows(tmp_path, cacm):
    texts = cacm[1]
    p = tmp_path / "corpus.jsonl"
    p.write_bytes(jsonl_bytes({"text": t} for t in texts))
    df = read_docs(p, blocksize=4096)
    assert df.attrs["npartitions"] > 4
    assert_docs(df, [str(i) for i in range(50)], texts)


# ----------------------------------------------------------------------------- 3. undecodable bytes

BAD = b"caf\xe9 au lait \xff\xfe end"          # 3 invalid sequences: \xe9, \xff, \xfe
BAD_TEXT = "caf\ufffd au lait \ufffd\ufffd end"


def test_decode_counting():
    assert decode_counting(BAD) == (BAD_TEXT, 3)
    assert decode_counting("naïve".encode()) == ("naïve", 0)
    assert decode_counting(b"\xe2\x82") == ("\ufffd", 1)  # truncated sequence: one replacement


def test_undecodable_files(tmp_path, cacm):
    texts = cacm[1]
    d = tmp_path / "docs"
    d.mkdir()
    (d / "a.txt").write_bytes(texts[0].encode())
    (d / "b.txt").write_bytes(BAD)
    (d / "c.txt").write_bytes(b"\x80" + texts[2].encode())
    df = read_docs(d)
    assert_docs(df, ["a.txt", "b.txt", "c.txt"], [texts[0], BAD_TEXT, "\ufffd" + texts[2]], [0, 3, 1])


@pytest.mark.parametrize("blocksize", [64 << 20, 4096])
def test_undecodable_lines_counted_per_document(tmp_path, cacm, blocksize):
    texts = cacm[1]
    raw = [t.encode() for t in texts]
    raw[1] = BAD
    raw[30] = raw[30] + b" \xc3"
    p = tmp_path / "corpus.txt"
    p.write_bytes(b"\n".join(raw) + b"\n")
    expected = list(texts)
    expected[1] = BAD_TEXT
    expected[30] = texts[30] + " \ufffd"
    reps = [0] * 50
    reps[1], reps[30] = 3, 1
    df = read_docs(p, blocksize=blocksize)
    assert_docs(df, [str(i) for i in range(50)], expected, reps)


def test_undecodable_jsonl_and_csv_counted(tmp_path, cacm):
    ids, texts = cacm
    lines = [json.dumps({"id": d, "contents": t}).encode() for d, t in zip(ids[:5], texts[:5])]
    lines[2] = b'{"id": "x", "contents": "' + BAD + b'"}'
    lines[4] = b'{"id": "y\xff", "contents": "ok"}'
    lines.insert(1, b"")  # blank lines hold no record
    p = tmp_path / "bad.jsonl"
    p.write_bytes(b"\n".join(lines) + b"\n")
    df = read_docs(p)
    assert df["text"].tolist()[2] == BAD_TEXT
    assert df["source_id"].tolist()[4] == "y\ufffd"
    assert df["replaced"].tolist() == [0, 0, 3, 0, 1]

    c = tmp_path / "bad.csv"
    c.write_bytes(b"id,text\n1,good\n2," + BAD + b"\n3,fine\n")
    df = read_docs(c)
    assert_docs(df, ["1", "2", "3"], ["good", BAD_TEXT, "fine"], [0, 3, 0])


def test_undecodable_counts_reach_the_index(tmp_path, cacm):
    texts = cacm[1]
    raw = [t.encode() for t in texts[:20]]
    raw[4] = BAD
    raw[11] = raw[11] + b"\xff"
    p = tmp_path / "corpus.txt"
    p.write_bytes(b"\n".join(raw) + b"\n")
    for fmt in (2, 1):  # the total in index.json; format 1's documents table also holds them per document
        out = tmp_path / f"index{fmt}"
        res = build(p, out, index_format=fmt)
        assert res.counts["replaced"] == 4
        meta = json.loads((out / "index.json").read_text())
        assert meta["counts"]["replaced"] == 4
    docs = pq.read_table(tmp_path / "index1" / "documents").to_pandas().sort_values("doc_id")
    assert docs["replaced"].tolist() == [3 if i == 4 else 1 if i == 11 else 0 for i in range(20)]


# ----------------------------------------------------------------------------- 4. errors

def test_missing_path(tmp_path):
    missing = tmp_path / "nope" / "corpus.jsonl"
    with pytest.raises(FileNotFoundError, match="corpus.jsonl"):
        read_corpus(missing)
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        read_corpus(str(tmp_path / "nothing-here*.txt"))
    with pytest.raises(FileNotFoundError, match="corpus.jsonl"):
        build(missing, tmp_path / "index")
    assert not (tmp_path / "index").exists()


def _jsonl_with_bad_line(ids, texts, bad_line: int) -> bytes:
    lines = [json.dumps({"id": d, "contents": t}) for d, t in zip(ids, texts)]
    lines[bad_line - 1] = '{"id": "broken", "contents": "no closing quote}'
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("blocksize", [64 << 20, 4096])
def test_jsonl_malformed_line_3(tmp_path, cacm, blocksize):
    p = tmp_path / "broken.jsonl"
    p.write_bytes(_jsonl_with_bad_line(*cacm, 3))
    with pytest.raises(CorpusError, match=r"broken\.jsonl.*line 3\b"):
        read_docs(p, blocksize=blocksize)


@pytest.mark.parametrize("bad_line", [17, 41, 50])
def test_jsonl_malformed_line_in_later_block(tmp_path, cacm, bad_line):
    data = _jsonl_with_bad_line(*cacm, bad_line)
    p = tmp_path / "broken.jsonl"
    p.write_bytes(data)
    offset = sum(len(x) + 1 for x in data.split(b"\n")[:bad_line - 1])
    assert offset > 4096  # the bad line is not in the first block
    with pytest.raises(CorpusError, match=rf"broken\.jsonl.*line {bad_line}\b"):
        read_docs(p, blocksize=4096)
    gz = tmp_path / "broken.jsonl.gz"
    gz.write_bytes(gzip.compress(data))
    with pytest.raises(CorpusError, match=rf"broken\.jsonl\.gz.*line {bad_line}\b"):
        read_docs(gz)


def test_jsonl_not_an_object(tmp_path):
    p = tmp_path / "arr.jsonl"
    p.write_text('{"text": "a"}\n[1, 2]\n')
    with pytest.raises(CorpusError, match=r"arr\.jsonl.*line 2"):
        read_docs(p)


def test_missing_text_column(tmp_path, cacm):
    ids, texts = cacm
    p = tmp_path / "corpus.jsonl"
    p.write_bytes(jsonl_bytes({"id": d, "body_x": t} for d, t in zip(ids, texts)))
    with pytest.raises(CorpusError, match=r"corpus\.jsonl") as ei:
        read_docs(p)
    assert "'id'" in str(ei.value) and "'body_x'" in str(ei.value)
    with pytest.raises(CorpusError, match=r"corpus\.jsonl.*'nope'") as ei:
        read_docs(p, text_column="nope")
    assert "'body_x'" in str(ei.value)
    with pytest.raises(CorpusError, match=r"corpus\.jsonl.*'title'"):
        read_docs(p, text_column=["title", "body_x"])
    with pytest.raises(CorpusError, match=r"corpus\.jsonl.*'key'"):
        read_docs(p, text_column="body_x", id_column="key")
    q = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": [1], "b": ["x"]}), q)
    with pytest.raises(CorpusError, match=r"t\.parquet") as ei:
        read_docs(q)
    assert "'a'" in str(ei.value) and "'b'" in str(ei.value)
    with pytest.raises(CorpusError, match="corpus.jsonl"):
        build(p, tmp_path / "index")
    assert not (tmp_path / "index").exists()


def test_corrupt_parquet(tmp_path):
    p = tmp_path / "corrupt.parquet"
    p.write_bytes(b"PAR1 this is not a parquet file at all")
    with pytest.raises(CorpusError, match=r"corrupt\.parquet"):
        read_docs(p)


@pytest.mark.parametrize("comp", ["gz", "bz2", "zst", "xz"])
def test_corrupt_compressed_file(tmp_path, cacm, comp):
    good = compress(lines_bytes(cacm[1]), comp)
    p = tmp_path / f"trunc.txt.{comp}"
    p.write_bytes(good[:-40])      # truncated stream
    with pytest.raises(CorpusError, match=rf"trunc\.txt\.{comp}"):
        read_docs(p)
    q = tmp_path / f"junk.jsonl.{comp}"
    q.write_bytes(good[:6] + b"\x00junk" * 50)
    with pytest.raises(CorpusError, match=rf"junk\.jsonl\.{comp}"):
        read_docs(q)


def test_empty_path_list():
    with pytest.raises(FileNotFoundError):
        read_corpus([])


@pytest.mark.parametrize("name,data", [("empty.txt", b""), ("empty.jsonl", b""),
                                       ("blank.jsonl", b"\n\n"), ("empty.txt.gz", gzip.compress(b""))])
def test_empty_corpus(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(CorpusError, match=name.replace(".", r"\.")):
        read_docs(p)
    out = tmp_path / "index"
    with pytest.raises(CorpusError, match=name.replace(".", r"\.")):
        build(p, out)
    assert not out.exists() and leftovers(tmp_path, "index") == []


def test_empty_directory(tmp_path):
    (tmp_path / "emptydir").mkdir()
    with pytest.raises(FileNotFoundError, match="emptydir"):
        read_corpus(tmp_path / "emptydir")


def test_only_empty_lines_are_documents(tmp_path):
    p = tmp_path / "blank.txt"
    p.write_bytes(b"\n\n\n")
    df = read_docs(p)
    assert_docs(df, ["0", "1", "2"], ["", "", ""])


def test_empty_documents_kept_in_index(tmp_path, cacm):
    texts = cacm[1][:10]
    lines = texts[:3] + ["", "   "] + texts[3:] + [""]
    p = tmp_path / "corpus.txt"
    p.write_bytes(lines_bytes(lines))
    out = tmp_path / "index"
    res = build(p, out)
    assert res.counts["n_docs"] == len(lines) == 13
    assert res.counts["n_empty_docs"] == 3
    meta = json.loads((out / "index.json").read_text())
    assert meta["counts"]["n_empty_docs"] == 3 and meta["N"] == 13
    docs = read_index(out)["docs"]
    assert docs["doc_id"].tolist() == list(range(13))
    assert docs["source_id"].tolist() == [str(i) for i in range(13)]
    lengths = docs["length"].tolist()
    assert [i for i, n in enumerate(lengths) if n == 0] == [3, 4, 12]
    index = pipelines.BM25Index.load(out)
    assert index.n_docs == 13


# ----------------------------------------------------------------------------- 5. atomicity

def _parquet_dir(tmp_path, cacm, corrupt_second: bool):
    ids, texts = cacm
    d = tmp_path / "pq"
    d.mkdir(exist_ok=True)
    pq.write_table(pa.table({"id": ids[:25], "text": texts[:25]}), d / "part-0.parquet")
    if corrupt_second:
        good = (d / "part-0.parquet").read_bytes()
        (d / "part-1.parquet").write_bytes(good[: len(good) // 2] + b"garbage")
    else:
        pq.write_table(pa.table({"id": ids[25:], "text": texts[25:]}), d / "part-1.parquet")
    return d


def test_failed_build_leaves_no_output(tmp_path, cacm):
    d = _parquet_dir(tmp_path, cacm, corrupt_second=True)
    out = tmp_path / "out" / "index"
    with pytest.raises(CorpusError, match=r"part-1\.parquet"):
        build(d, out)
    assert not out.exists()
    assert leftovers(out.parent, "index") == []


def test_failed_build_keeps_previous_index(tmp_path, cacm):
    d = _parquet_dir(tmp_path, cacm, corrupt_second=False)
    out = tmp_path / "index"
    res = build(d, out)
    assert res.counts["n_docs"] == 50
    before = tree(out)
    assert "index.json" in before and any(k.startswith("segments/") for k in before)

    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(_jsonl_with_bad_line(*cacm, 3))
    with pytest.raises(CorpusError, match=r"bad\.jsonl.*line 3"):
        build(bad, out)
    assert tree(out) == before
    assert leftovers(tmp_path, "index") == []

    _parquet_dir(tmp_path, cacm, corrupt_second=True)
    with pytest.raises(CorpusError, match=r"part-1\.parquet"):
        build(d, out)
    assert tree(out) == before
    assert leftovers(tmp_path, "index") == []
    assert pipelines.BM25Index.load(out).n_docs == 50


def test_successful_rebuild_replaces_index(tmp_path, cacm):
    ids, texts = cacm
    p = tmp_path / "c.jsonl"
    p.write_bytes(jsonl_bytes({"id": d, "contents": t} for d, t in zip(ids, texts)))
    out = tmp_path / "index"
    build(p, out)
    p.write_bytes(jsonl_bytes({"id": d, "contents": t} for d, t in zip(ids[:10], texts[:10])))
    res = build(p, out)
    assert res.counts["n_docs"] == 10
    assert json.loads((out / "index.json").read_text())["N"] == 10
    docs = read_index(out)["docs"]
    assert docs["source_id"].tolist() == ids[:10]
    assert leftovers(tmp_path, "index") == []


# ----------------------------------------------------------------------------- archives

import io as _io  # noqa: E402
import tarfile  # noqa: E402
import zipfile  # noqa: E402

from cutext.stages.readers.files import detect_format, plan  # noqa: E402

from helpers import assert_same_index, need_data, read_index  # noqa: E402

ARCHIVE_KINDS = ["tar", "tar.gz", "tgz", "tar.bz2", "tar.xz", "zip"]


def _add_tar(tf, name, data=b"", kind=tarfile.REGTYPE, linkname=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    info.linkname = linkname
    tf.addfile(info, _io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def _write_archive(path: Path, members, extras=True):
    """An archive of ``members`` ([(name, bytes)], in order) plus entries that are no documents:
    directories, hidden members, a dataset marker and (tar) a symlink."""
    noise_dirs = ["./docs/", "docs/sub/"]
    noise = [(".hidden", b"hidden file"), ("docs/.DS_Store", b"x"), ("docs/.git/config", b"x"),
             ("docs/_SUCCESS", b"")]
    if path.suffix == ".zip":
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            if extras:
                for d in noise_dirs:
                    zf.writestr(d.removeprefix("./"), b"")
            for i, (name, data) in enumerate(members):
                zf.writestr(name, data)
                if extras and i == 3:
                    for n, d in noise:
                        zf.writestr(n, d)
        return
    mode = {"tar": "w", "tar.gz": "w:gz", "tgz": "w:gz", "tar.bz2": "w:bz2", "tar.xz": "w:xz"}[
        path.name.split(".", 1)[1]]
    with tarfile.open(path, mode) as tf:
        if extras:
            for d in noise_dirs:
                _add_tar(tf, d.rstrip("/"), kind=tarfile.DIRTYPE)
        for i, (name, data) in enumerate(members):
            _add_tar(tf, ("./" + name) if i % 2 else name, data)   # "./" prefixes are dropped
            if extras and i == 3:
                for n, d in noise:
                    _add_tar(tf, n, d)
                _add_tar(tf, "docs/link", kind=tarfile.SYMTYPE, linkname="000.txt")


def _cacm_members(ids, texts):
    return [(f"docs/{i:03d}_{d}.txt" if i < 40 else f"docs/sub/{i:03d}_{d}.txt", t.encode("utf-8"))
            for i, (d, t) in enumerate(zip(ids, texts))]


@pytest.mark.parametrize("kind", ARCHIVE_KINDS)
def test_archive_one_document_per_member(tmp_path, cacm, kind):
    ids, texts = cacm
    members = _cacm_members(ids, texts)
    p = tmp_path / f"corpus.{kind}"
    _write_archive(p, members)
    assert detect_format([str(p)], False) == "files"
    df = read_docs(p)
    assert df.attrs["format"] == "files"
    assert_docs(df, [m for m, _ in members], texts)
    # small blocks: members grouped into several partitions where the archive allows random
    # access (tar, zip); a compressed tar is one streamed partition; same documents either way
    df2 = read_docs(p, blocksize=2000)
    assert_docs(df2, [m for m, _ in members], texts)
    if kind in ("tar", "zip"):
        assert df2.attrs["npartitions"] > 5
    else:
        assert df2.attrs["npartitions"] == 1


@pytest.mark.parametrize("kind", ["tar", "tar.gz", "zip"])
def test_archive_as_lines(tmp_path, cacm, kind):
    ids, texts = cacm
    members = [("a.txt", lines_bytes(texts[:20])), ("dir/b.txt.gz", gzip.compress(lines_bytes(texts[20:])))]
    p = tmp_path / f"lines.{kind}"
    _write_archive(p, members, extras=False)
    df = read_docs(p, format="lines")
    sids = [f"a.txt:{i}" for i in range(20)] + [f"dir/b.txt.gz:{i}" for i in range(len(texts) - 20)]
    assert_docs(df, sids, texts)


def test_archives_inside_a_directory_and_table_formats(tmp_path, cacm):
    ids, texts = cacm
    root = tmp_path / "mixed"
    root.mkdir()
    (root / "a.txt").write_text(texts[0])
    _write_archive(root / "b.zip", [("x.txt", texts[1].encode()), ("y/z.txt", texts[2].encode())], extras=False)
    (root / "c.txt").write_text(texts[3])
    df = read_docs(root)
    assert_docs(df, ["a.txt", "b.zip/x.txt", "b.zip/y/z.txt", "c.txt"], texts[:4])
    with pytest.raises(CorpusError, match=r"b\.zip: archives are read with format 'files'.*not 'jsonl'"):
        read_corpus(root / "b.zip", format="jsonl")


@pytest.mark.parametrize("kind", ["tar.gz", "zip", "tar"])
def test_corrupt_archive_names_it(tmp_path, cacm, kind):
    members = _cacm_members(*cacm)
    good = tmp_path / f"good.{kind}"
    _write_archive(good, members)
    data = good.read_bytes()
    p = tmp_path / f"bad.{kind}"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorpusError, match=rf"bad\.{kind.replace('.', r'[.]')}"):
        read_docs(p)


@pytest.mark.parametrize("kind", ARCHIVE_KINDS)
def test_archive_members_glob_leaves_the_readme_out(tmp_path, cacm, kind):
    """``members=`` keeps the members matching an fnmatch glob (or any of a list), on the member path
    without its ``./``; '*' also matches '/'; the noise rules still apply to what matches."""
    import warnings

    from cutext.stages.readers.base import ArchiveMemberWarning

    ids, texts = cacm
    docs = _cacm_members(ids, texts)[:12] + _cacm_members(ids, texts)[40:42]
    members = [("README", b"About this corpus.")] + docs
    p = tmp_path / f"corpus.{kind}"
    _write_archive(p, members)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ArchiveMemberWarning)   # the tar's symbolic link among the noise
        # without members=, the README above the documents' folder is left out (test_archive_notes_...)
        assert read_docs(p)["source_id"].iloc[0] == "docs/000_CACM-2636.txt"
    want = [m for m, _ in docs]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ArchiveMemberWarning)   # a member left out is not warned about
        assert_docs(read_docs(p, members="*/*.txt"), want, texts[:12] + texts[40:42])
        assert_docs(read_docs(p, members="*/*.txt", blocksize=2000), want, texts[:12] + texts[40:42])
        got = read_docs(p, members=["docs/sub/*", "README"])
    assert got["source_id"].tolist() == ["README"] + want[-2:]
    lines = read_docs(p, members=("README",), format="lines")
    assert lines["source_id"].tolist() == ["README:0"] and lines["text"].tolist() == ["About this corpus."]


@pytest.mark.parametrize("kind", ["tar", "tar.gz", "zip"])
@pytest.mark.parametrize("fmt", ["files", "lines"])
def test_archive_notes_above_the_documents_folders_are_left_out(tmp_path, cacm, kind, fmt):
    """BBC's layout: ``bbc/README.TXT`` beside the folders ``bbc/<topic>/`` of the documents is a note about the
    collection, not a document (one warning names it); a README among documents of its own folder (Reuters'
    ``README.txt`` among the ``.sgm`` files) or in a collection of READMEs stays a document."""
    import warnings

    from cutext.stages.readers.base import ArchiveMemberWarning

    ids, texts = cacm
    docs = [(f"bbc/{'tech' if i % 2 else 'sport'}/{i:03d}.txt", t.encode()) for i, t in enumerate(texts[:6])]
    notes = [("bbc/README.TXT", b"Consists of 2225 documents from the BBC news website"),
             ("bbc/LICENSE", b"All rights, including copyright, in the content belong to the BBC."),
             ("bbc/Changes.md", b"2006: first release")]
    p = tmp_path / f"bbc.{kind}"
    _write_archive(p, notes[:1] + docs[:3] + notes[1:] + docs[3:], extras=False)
    with pytest.warns(ArchiveMemberWarning, match=r"bbc\.[a-z.]+: left out 3 member\(s\) that describe the "
                                                  r"collection, not documents of it: 'bbc/README.TXT', 'bbc/LICENSE'"):
        got = read_docs(p, format=fmt)
    if fmt == "files":
        assert_docs(got, [m for m, _ in docs], texts[:6])
    else:
        assert got["source_id"].tolist() == [f"{m}:0" for m, _ in docs]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ArchiveMemberWarning)
        # members= chooses alone; the rule does not apply where a README may be a document
        assert read_docs(p, members="*")["source_id"].iloc[0] == "bbc/README.TXT"
        flat = tmp_path / f"reuters.{kind}"
        _write_archive(flat, [("r/README.txt", b"Reuters-21578 text categorization collection")]
                       + [(f"r/reut2-{i:03d}.sgm", t.encode()) for i, t in enumerate(texts[:3])], extras=False)
        assert read_docs(flat)["source_id"].tolist() == ["r/README.txt"] + [f"r/reut2-{i:03d}.sgm" for i in range(3)]
        repos = tmp_path / f"repos.{kind}"
        _write_archive(repos, [(f"repo{i}/README.md", t.encode()) for i, t in enumerate(texts[:3])], extras=False)
        assert len(read_docs(repos)) == 3


def test_collection_notes_rule():
    from cutext.stages.readers.base import collection_notes

    assert collection_notes(["bbc/README.TXT", "bbc/business/001.txt", "bbc/tech/002.txt"]) == {0}
    assert collection_notes(["README", "licence.txt", "CHANGELOG", "a/1.txt", "b/c/2.txt"]) == {0, 1, 2}
    assert collection_notes(["README", "a/1.txt", "notes.txt"]) == set()    # a document beside it
    assert collection_notes(["a/README", "b/1.txt"]) == set()               # no document below its folder
    assert collection_notes(["readme_first/1.txt", "READMEs.txt", "a/2.txt", "changes-of-state/3.txt"]) == set()


@pytest.mark.parametrize("kind", ["tar", "tar.gz", "zip"])
def test_archive_members_pattern_matching_nothing_names_the_archive(tmp_path, cacm, kind):
    p = tmp_path / f"corpus.{kind}"
    _write_archive(p, _cacm_members(*cacm)[:5], extras=False)
    with pytest.raises(CorpusError, match=rf"corpus\.{kind.replace('.', r'[.]')}: members='\*\.md' matches no "
                                          r"member of this archive \(its members are named like 'docs/000_"):
        read_docs(p, members=["*/*.txt", "*.md"])   # a compressed tar: when it is read
    with pytest.raises(CorpusError, match="matches no member"):
        read_docs(p, members="DOCS/*")   # case-sensitive


def test_archive_members_bad_values_and_inputs_without_an_archive_are_refused(tmp_path, cacm):
    from cutext.stages.readers.frames import frame_source

    p = tmp_path / "corpus.zip"
    _write_archive(p, _cacm_members(*cacm)[:3], extras=False)
    for bad in ([], "", ["*.txt", ""], 3, [b"*.txt"]):
        with pytest.raises(ValueError, match="members must be a glob pattern"):
            read_corpus(p, members=bad)
    with pytest.raises(CorpusError, match=r"cacm\.json: members=\['\*\.txt'\] selects archive members, but this "
                                          "input holds no archive"):
        read_corpus(CACM, members="*.txt")
    with pytest.raises(ValueError, match=r"members='\*\.txt'.*meaningless for a frame"):
        frame_source(pd.DataFrame({"text": ["a"]}), members="*.txt")
    # every pipeline takes it: lda forwards reader options, the others name them
    for name in ("bm25", "cluster", "ngram", "lda"):
        assert "members" in pipelines.pipeline_keywords(pipelines.pipeline_function(name)), name


def test_archive_members_through_a_pipeline(tmp_path, cacm):
    ids, texts = cacm
    p = tmp_path / "bbc.zip"
    _write_archive(p, [("README.TXT", b"BBC news articles, 5 topics")] + _cacm_members(ids, texts)[:6], extras=False)
    r = pipelines.run("bm25", p, out=tmp_path / "idx", members="*/*.txt", backend="cpu", progress=False)
    index = read_index(r.path)
    assert index["docs"]["source_id"].tolist() == [m for m, _ in _cacm_members(ids, texts)[:6]]
    c = pipelines.run("cluster", p, out=tmp_path / "cl", members=["*/*.txt"], backend="cpu", progress=False)
    assert c.counts["n_docs"] == 6
    with pytest.raises(CorpusError, match=r"bbc\.zip: members='\*\.md' matches no member"):
        pipelines.run("bm25", p, out=tmp_path / "idx2", members="*.md", backend="cpu", progress=False)


def _file_members(tar_path: Path) -> list[str]:
    """Regular, non-hidden file members of a tar, by Python's tarfile (the oracle)."""
    with tarfile.open(tar_path) as tf:
        return [m.name for m in tf if m.isreg() and not any(c.startswith(".") for c in m.name.split("/"))]


@pytest.mark.slow
def test_20news_archive_indexes_its_posts_and_a_zip_gives_the_same_index(tmp_path, news20):
    """The 20 Newsgroups "bydate" tarball is its 18,846 posts (the data README's count), and a zip
    of the same members, read in several partitions, gives the same index."""
    names = _file_members(news20)
    assert len(names) == 18846
    r = build(news20, tmp_path / "tar-index")
    assert r.counts["n_docs"] == len(names) and r.counts["n_empty_docs"] == 0
    tar_index = read_index(tmp_path / "tar-index")
    assert tar_index["docs"]["source_id"].astype(str).tolist() == names
    zpath = tmp_path / "20news.zip"
    with tarfile.open(news20) as tf, zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as zf:
        for m in tf:
            if m.isreg():
                zf.writestr(m.name, tf.extractfile(m).read())
    r2 = build(zpath, tmp_path / "zip-index", blocksize=8 << 20)
    assert r2.counts["partitions"] > 1
    assert_same_index(tar_index, read_index(tmp_path / "zip-index"))


def test_reuters_archive_one_document_per_member():
    """Reuters-21578 ships as 22 SGML files of many articles each plus documentation files: read as
    an archive, it is one document per file member (``datasets.load_reuters21578`` gives articles)."""
    p = need_data("reuters21578")
    names = _file_members(p)
    df = read_docs(p)
    assert df["source_id"].astype(str).tolist() == names
    assert sum(n.endswith(".sgm") for n in names) == 22


# ----------------------------------------------------------------------------- literal paths win over globs

def test_existing_path_is_literal_not_a_glob(tmp_path):
    (tmp_path / "a[1].txt").write_text("literal one\nliteral two\n")
    (tmp_path / "a1.txt").write_text("globbed\n")
    lit = str(tmp_path / "a[1].txt")
    assert read_docs(lit)["text"].tolist() == ["literal one", "literal two"]
    assert read_docs(lit, glob=False)["text"].tolist() == ["literal one", "literal two"]
    df = read_docs(lit, glob=True)      # forced: the pattern matches a1.txt only (a collection: files)
    assert df["source_id"].tolist() == ["a1.txt"] and df["text"].tolist() == ["globbed\n"]
    # a pattern that names no existing path is still a glob
    assert read_docs(str(tmp_path / "a?.txt"))["source_id"].tolist() == ["a1.txt"]
    with pytest.raises(FileNotFoundError, match=r"a\?\.txt.*glob=False"):
        read_corpus(str(tmp_path / "a?.txt"), glob=False)
    with pytest.raises(ValueError, match="glob must be None"):
        read_corpus(lit, glob="yes")
    _, pieces, _ = plan([lit, str(tmp_path / "a1.txt")])
    assert [f.rsplit("/", 1)[-1] for p in pieces for f in p.paths] == ["a[1].txt", "a1.txt"]


def test_glob_reaches_the_reader_from_every_text_pipeline(tmp_path):
    (tmp_path / "a[1].txt").write_text("alpha beta gamma\nbeta gamma delta\n")
    (tmp_path / "a1.txt").write_text("other words only here\n")
    lit = str(tmp_path / "a[1].txt")
    kw = dict(backend="cpu", progress=False)
    for glob, n in ((None, 2), (True, 1)):
        r = pipelines.run("bm25", lit, out=tmp_path / f"bm25-{glob}", scheduler="sync", glob=glob, **kw)
        assert r.counts["n_docs"] == n
        r = pipelines.run("cluster", lit, out=tmp_path / f"cl-{glob}", min_len=1, stopwords=None, glob=glob, **kw)
        assert r.counts["n_docs"] == n
    r = pipelines.run("lda", lit, out=tmp_path / "lda", K=2, iterations=2, glob=False, **kw)
    assert r.counts["n_docs"] == 2
    arpa = tmp_path / "lm.arpa"
    arpa.write_text("\\data\\\nngram 1=5\n\n\\1-grams:\n-2.0\t<unk>\n-1.0\t<s>\n-0.5\t</s>\n-0.6\talpha\n"
                    "-0.6\tbeta\n\n\\end\\\n")
    for glob, n in ((None, 2), (True, 1)):
        r = pipelines.run("ngram", lit, out=tmp_path / f"ng-{glob}", model=arpa, glob=glob, **kw)
        assert r.counts["n_docs"] == n
    from cutext.pipelines.__main__ import main

    for flag, n in (("auto", 2), ("on", 1), ("off", 2)):
        assert main(["bm25", lit, "--out", str(tmp_path / f"cli-{flag}"), "--backend", "cpu", "--scheduler", "sync",
                     "--no-progress", "--glob", flag]) == 0
        assert read_index(tmp_path / f"cli-{flag}")["docs"].shape[0] == n
        assert main(["cluster", lit, "--out", str(tmp_path / f"clu-{flag}"), "--backend", "cpu", "--min-len", "1",
                     "--no-progress", "--glob", flag]) == 0
        assert main(["ngram", lit, "--model", str(arpa), "--out", str(tmp_path / f"ngc-{flag}"), "--backend", "cpu",
                     "--no-progress", "--glob", flag]) == 0
        assert pq.read_table(tmp_path / f"ngc-{flag}" / "scores.parquet").num_rows == n
    with pytest.raises(FileNotFoundError):
        pipelines.run("lda", str(tmp_path / "a?.txt"), out=tmp_path / "lda2", K=2, iterations=2, glob=False, **kw)


# ----------------------------------------------------------------------------- CSV quoting

def test_csv_unterminated_quote_names_file_and_line(tmp_path):
    p = tmp_path / "q.csv"
    p.write_bytes(b'id,text\n1,"hello\n2,world\n')
    with pytest.raises(CorpusError, match=r"q\.csv: line 2: unterminated quoted field"):
        read_docs(p)
    t = tmp_path / "q.tsv"
    t.write_bytes(b'id\ttext\n1\tfine\n2\t"open\n3\tmore\n')
    with pytest.raises(CorpusError, match=r"q\.tsv: line 3: unterminated"):
        read_docs(t)
    g = tmp_path / "q.csv.gz"
    g.write_bytes(gzip.compress(b'id,text\n1,ok\n2,"a ""quoted"" word\n3,x\n'))
    with pytest.raises(CorpusError, match=r"q\.csv\.gz: line 3: unterminated"):
        read_docs(g)
    with pytest.raises(CorpusError, match=r"q\.csv"):
        build(p, tmp_path / "index")


def test_csv_well_formed_quotes_still_read(tmp_path):
    p = tmp_path / "ok.csv"
    p.write_bytes(b'id,text\n1,"multi\nline, with ""quotes"""\n2,he said "hi" there\n3,""\n4,"a"\n')
    df = read_docs(p)
    assert df["source_id"].astype(object).tolist() == ["1", "2", "3", "4"]
    assert df["text"].astype(object).tolist() == ['multi\nline, with "quotes"', 'he said "hi" there', "", "a"]


def test_csv_repeated_header_name_is_a_corpus_error(tmp_path):
    """A header that names the text (or id) column twice was a KeyError from pyarrow; it is a clear
    error naming the file and the column. A repeated name that is not read is fine."""
    p = tmp_path / "dup.csv"
    p.write_bytes(b"text,text\na,b\n")
    with pytest.raises(CorpusError, match=r"dup\.csv: column 'text' appears 2 times in the header"):
        read_docs(p)
    q = tmp_path / "dupid.csv"
    q.write_bytes(b"id,text,id\n1,a,2\n")
    with pytest.raises(CorpusError, match=r"dupid\.csv: column 'id' appears 2 times"):
        read_docs(q)
    r = tmp_path / "dupother.csv"
    r.write_bytes(b"x,text,x\n1,a,2\n")
    assert read_docs(r)["text"].astype(object).tolist() == ["a"]


def test_csv_several_text_columns_joined(tmp_path):
    """text_column=[title, text] on a CSV joined the columns with pyarrow's binary_join, which had no
    kernel for the large_string columns the CSV reader makes (an ArrowNotImplementedError)."""
    p = tmp_path / "t.csv"
    p.write_bytes(b'id,title,text\n1,A title,"body, one"\n2,,body two\n')
    df = read_docs(p, text_column=["title", "text"])
    assert df["text"].astype(object).tolist() == ["A title body, one", " body two"]
    assert df["source_id"].astype(object).tolist() == ["1", "2"]


def test_a_beir_layout_reads_title_and_text_by_default(tmp_path, data_dir):
    """_id, title, text (BEIR's corpus.jsonl): without text_column the document is title + " " + text, as
    Anserini and Pyserini index it; a table with text but no title reads the text alone."""
    p = data_dir / "scifact" / "corpus.jsonl.gz"
    default = read_docs(p)
    explicit = read_docs(p, text_column=["title", "text"])
    assert default["text"].tolist() == explicit["text"].tolist()
    assert default["source_id"].tolist() == explicit["source_id"].tolist()
    first = json.loads(gzip.open(p, "rt", encoding="utf-8").readline())
    assert default["text"].iloc[0] == f"{first['title']} {first['text']}"
    q = tmp_path / "no_title.jsonl"
    q.write_text(json.dumps({"_id": "a", "text": "only the body", "name": "x"}) + "\n", encoding="utf-8")
    assert read_docs(q)["text"].tolist() == ["only the body"]
