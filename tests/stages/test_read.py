"""Tests for cutext.stages.readers.files: formats, splitting, undecodable bytes, errors, atomic index writes, CSV
quoting. Archives and globs are in ``test_read_archives.py``.

Every corpus here is built from the first 50 documents of the bundled CACM collection
(``data/cacm/cacm.json``), written out in each reader format; the expected documents are the
CACM ids and texts themselves, so every format is checked against the same oracle.
"""

from __future__ import annotations

import gzip
import json
import uuid

import fsspec
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cutext import pipelines
from cutext.stages.readers.base import CorpusError, decode_counting
from cutext.stages.readers.source import read_corpus
from tests.stages.read_helpers import (
    assert_docs,
    build,
    cacm_docs,
    compress,
    jsonl_bytes,
    leftovers,
    lines_bytes,
    read_docs,
    tree,
)

from helpers import read_index

pytest.importorskip("zstandard")  # the .zst corpora (read_helpers.compress)


@pytest.fixture(scope="module")
def cacm():
    """(ids, texts) of the first 50 CACM documents; texts on one line, whitespace collapsed."""
    return cacm_docs()


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
