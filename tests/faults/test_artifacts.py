"""Crafted or damaged artifacts never answer: every file is checksummed in its manifest (CRC32, as Lucene's
footers) and verified on load, and the values behind the checksums are checked too (the silently-wrong
cases of the second fault probe, `docs/faults.md`)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cutext.pipelines.bm25 import BM25Index
from cutext.pipelines.lda import LDAModel
from cutext.stages.engines.streamcluster import StreamClusterer
from cutext.stages.runtime import checksums
from cutext.stages.runtime.artifacts import ArtifactError, ArtifactNotFoundError

from helpers import cacm_jsonl, copy_artifact, saved_cluster_state, saved_index, saved_lda_model


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, data_dir) -> Path:
    return cacm_jsonl(tmp_path_factory.mktemp("corpus"), data_dir, 150)


@pytest.fixture(scope="module")
def index(corpus, tmp_path_factory) -> Path:
    """A format-1 index: the edits below truncate, add and rewrite its files (vocab.parquet, postings/, documents/)."""
    return saved_index(corpus, tmp_path_factory.mktemp("idx") / "index", blocksize=2**16, index_format=1)


@pytest.fixture(scope="module")
def segmented(corpus, tmp_path_factory) -> Path:
    """The default, segmented index (format 2) of the same corpus, a segment a read partition."""
    return saved_index(corpus, tmp_path_factory.mktemp("idx2") / "index", blocksize=2**16)


@pytest.fixture(scope="module")
def model(corpus, tmp_path_factory) -> Path:
    return saved_lda_model(corpus, tmp_path_factory.mktemp("lda") / "model")


@pytest.fixture(scope="module")
def state(tmp_path_factory, data_dir) -> Path:
    return saved_cluster_state(data_dir, tmp_path_factory.mktemp("state") / "state")


LOADERS = {
    "index": (lambda d, **kw: BM25Index.load(d, **kw), "index.json"),
    "segmented": (lambda d, **kw: BM25Index.load(d, **kw), "index.json"),
    "model": (lambda d, **kw: LDAModel.load(d, **kw), "params.json"),
    "state": (lambda d, **kw: StreamClusterer.load(d, backend="cpu", **kw), "state.json"),
}



def _files(d: Path) -> list[str]:
    return sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file())


def _rewrite_parquet(path: Path, column: str, fn) -> None:
    t = pq.read_table(path)
    i = t.column_names.index(column)
    t = t.set_column(i, column, pa.array(fn(t.column(column).to_numpy(zero_copy_only=False)),
                                         type=t.schema.field(column).type))
    pq.write_table(t, path)


# --------------------------------------------------------------------------- checksums
@pytest.mark.parametrize("kind", list(LOADERS))
def test_every_file_is_listed_with_its_checksum(kind, request):
    d = request.getfixturevalue(kind)
    load, manifest = LOADERS[kind]
    meta = json.loads((d / manifest).read_text())
    assert sorted(meta["files"]) == [f for f in _files(d) if f != manifest]
    for rel, rec in meta["files"].items():
        assert rec["crc32"] == checksums.crc32_file(d / rel) and rec["bytes"] == (d / rel).stat().st_size
    load(d)  # and it verifies


@pytest.mark.parametrize("size", [0, 1, 999, 1000, 1001, 4095, 4096, 10_007])
def test_a_file_checked_in_spans_has_the_crc_of_its_whole_bytes(tmp_path, monkeypatch, size):
    """A large file is checked in spans on several threads and the spans' CRCs combined (zlib's
    crc32_combine): the result is zlib.crc32 of the whole file for any size around the span boundaries."""
    import zlib

    monkeypatch.setattr(checksums, "_SPAN", 1000)
    monkeypatch.setattr(checksums, "_BLOCK", 64)
    checksums._zeros_operator.cache_clear()
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    (tmp_path / "f").write_bytes(data)
    assert len(checksums._spans(size)) == max(1, -(-size // 1000))
    assert checksums.crc32_file(tmp_path / "f") == f"{zlib.crc32(data):08x}"
    a, b = data[:size // 3], data[size // 3:]
    assert checksums.crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(data)


@pytest.mark.parametrize("block", [None, 64])
def test_a_file_checksummed_as_written_has_the_crc_of_its_bytes(tmp_path, monkeypatch, block):
    """The CRC32 taken on the bytes as pyarrow's writer wrote them (small writes through the buffer and
    large ones past it; with 64-byte spans, the large writes' spans checked on threads and combined) is the
    file's; a seek back is refused; the seal takes the recorded CRC32 for a file of the recorded size, and
    reads back a file whose size differs."""
    import io

    from cutext.stages.runtime.output import _seal_all

    if block is not None:
        monkeypatch.setattr(checksums, "_BLOCK", block)

    rng = np.random.default_rng(0)
    f = checksums.open_checksummed(tmp_path / "a.parquet", buffer_size=4096)
    w = pq.ParquetWriter(f, pa.schema([("x", pa.int64()), ("s", pa.string())]))
    for n in (10, 50_000, 3):
        w.write_table(pa.table({"x": rng.integers(0, 1 << 40, n), "s": [str(v) for v in range(n)]}))
    w.close()
    assert f.tell() == f.checksum[0]
    with pytest.raises(io.UnsupportedOperation):
        f.seek(0)
    got = f.checksum
    f.close()
    path = tmp_path / "a.parquet"
    assert got == (path.stat().st_size, checksums.crc32_file(path)) and pq.read_table(path).num_rows == 50_013
    assert f.checksum == got  # after close, as it was
    (tmp_path / "m.json").write_text("{}")
    (tmp_path / "b.bin").write_bytes(b"xyz")
    _seal_all(tmp_path, "m.json", {"a.parquet": (got[0], "0badc0de"), "b.bin": (2, "0badc0de")})
    files = json.loads((tmp_path / "m.json").read_text())["files"]
    assert files["a.parquet"]["crc32"] == "0badc0de"  # taken as recorded, not read back
    assert files["b.bin"]["crc32"] == checksums.crc32_file(tmp_path / "b.bin")  # another size: read back


@pytest.mark.parametrize("kind", list(LOADERS))
def test_any_byte_edit_of_any_file_is_refused_naming_the_file(kind, request, tmp_path):
    src = request.getfixturevalue(kind)
    load, manifest = LOADERS[kind]
    rng = np.random.default_rng(7)
    for i, rel in enumerate(_files(src)):
        d = copy_artifact(src, tmp_path / str(i))
        raw = bytearray((d / rel).read_bytes())
        at = int(rng.integers(len(raw)))
        raw[at] ^= 1 << int(rng.integers(8))  # one bit of one byte
        (d / rel).write_bytes(bytes(raw))
        with pytest.raises(ArtifactError) as exc:
            load(d)
        assert rel.split("/")[-1] in str(exc.value), (rel, str(exc.value))


def test_a_truncated_or_missing_file_is_refused(index, tmp_path):
    d = copy_artifact(index, tmp_path / "a")
    f = sorted((d / "postings").glob("*.parquet"))[0]
    f.write_bytes(f.read_bytes()[:-10])
    with pytest.raises(ArtifactError, match=r"postings/.*bytes, index.json records"):
        BM25Index.load(d)
    d = copy_artifact(index, tmp_path / "b")
    (d / "vocab.parquet").unlink()
    with pytest.raises(ArtifactNotFoundError, match="vocab.parquet: listed in index.json but missing"):
        BM25Index.load(d)


def test_an_unlisted_file_is_refused_even_without_verify(index, tmp_path):
    d = copy_artifact(index, tmp_path)
    shutil.copy(sorted((d / "postings").glob("*.parquet"))[0], d / "postings" / "zz-extra.parquet")
    for verify in (True, False):
        with pytest.raises(ArtifactError, match="does not list: postings/zz-extra.parquet"):
            BM25Index.load(d, verify=verify)


def test_a_manifest_without_checksums_loads_only_without_verify(index, tmp_path):
    d = copy_artifact(index, tmp_path)
    meta = json.loads((d / "index.json").read_text())
    for key in ("files", "dirs", "checksum"):
        meta.pop(key)
    (d / "index.json").write_text(json.dumps(meta))
    with pytest.raises(ArtifactError, match="records no file checksums.*verify=False"):
        BM25Index.load(d)
    assert BM25Index.load(d, verify=False).n_docs == 150


# --------------------------------------------------------------------------- values behind the checksums
def _reverse(a):
    return a[::-1].copy()


def _shuffle(a):
    return np.random.default_rng(3).permutation(a)


@pytest.mark.parametrize("case, edit, match", [
    ("vocab shuffled", lambda d: _rewrite_parquet(d / "vocab.parquet", "term", _shuffle), "not strictly ascending"),
    ("vocab duplicated", lambda d: _rewrite_parquet(d / "vocab.parquet", "term",
                                                    lambda a: np.where(np.arange(len(a)) == 5, a[4], a)),
     "not strictly ascending"),
    ("idf shuffled", lambda d: _rewrite_parquet(d / "vocab.parquet", "idf", _shuffle), "idf does not follow"),
    ("doc_id reversed", lambda d: [_rewrite_parquet(f, "doc_id", _reverse)
                                   for f in sorted((d / "documents").glob("*.parquet"))],
     "not ascending and consecutive"),
    ("negative weight", lambda d: _rewrite_parquet(sorted((d / "postings").glob("*.parquet"))[0], "weight",
                                                   lambda a: np.where(np.arange(len(a)) == 3, -a, a)),
     r"posting weight -.* is outside \[0, "),
    ("3e38 weight", lambda d: _rewrite_parquet(sorted((d / "postings").glob("*.parquet"))[0], "weight",
                                               lambda a: np.where(np.arange(len(a)) == 3, np.float32(3e38), a)),
     r"posting weight 3.*e\+38 .* is outside"),
    ("k1 1e308", lambda d: _edit_json(d / "index.json", k1=1e308), "k1"),
    ("avgdl", lambda d: _edit_json(d / "index.json", avgdl=1.0), r"'avgdl' = 1.0 is not counts.n_tokens / N"),
    ("stemmer klingon", lambda d: _edit_json(d / "index.json", tokenizer={"stemmer": "klingon"}), "klingon"),
])
def test_crafted_index_values_are_refused(index, tmp_path, case, edit, match):
    d = copy_artifact(index, tmp_path)
    edit(d)
    with pytest.raises(ArtifactError):  # the checksums refuse every edit first
        BM25Index.load(d)
    with pytest.raises(ArtifactError, match=match) as exc:  # and the values behind them
        BM25Index.load(d, verify=False)
    assert str(d) in str(exc.value)


def _edit_json(path: Path, **changes):
    meta = json.loads(path.read_text())
    meta.update(changes)
    path.write_text(json.dumps(meta))


@pytest.mark.parametrize("case, edit, match", [
    ("vocab duplicated", lambda d: _rewrite_parquet(d / "vocab.parquet", "term",
                                                    lambda a: np.where(np.arange(len(a)) == 5, a[4], a)),
     "repeated terms"),
    ("beta 1e300", lambda d: _edit_json(d / "params.json", beta=1e300), "field 'beta'"),
    ("alpha 1e300", lambda d: _edit_json(d / "params.json", alpha=1e300), "field 'alpha'"),
])
def test_crafted_lda_model_values_are_refused(model, tmp_path, case, edit, match):
    d = copy_artifact(model, tmp_path)
    edit(d)
    with pytest.raises(ArtifactError):
        LDAModel.load(d)
    with pytest.raises(ArtifactError, match=match):
        LDAModel.load(d, verify=False)


def test_a_shuffled_lda_vocabulary_is_refused_by_its_checksum(model, tmp_path):
    d = copy_artifact(model, tmp_path)
    _rewrite_parquet(d / "vocab.parquet", "term", _shuffle)
    with pytest.raises(ArtifactError, match=r"vocab.parquet: (CRC32|\d+ bytes)"):
        LDAModel.load(d)


@pytest.mark.parametrize("case, edit, match", [
    ("n_ref 0", lambda d: _edit_json(d / "state.json", vectorizer={
        **json.loads((d / "state.json").read_text())["vectorizer"], "n_ref": 0}), "field 'n_ref'"),
    ("vocab duplicated", lambda d: _rewrite_parquet(d / "vocab.parquet", "term",
                                                    lambda a: np.where(np.arange(len(a)) == 5, a[4], a)),
     "repeated terms"),
])
def test_crafted_cluster_state_values_are_refused(state, tmp_path, case, edit, match):
    d = copy_artifact(state, tmp_path)
    edit(d)
    with pytest.raises(ArtifactError):
        StreamClusterer.load(d, backend="cpu")
    with pytest.raises(ArtifactError, match=match):
        StreamClusterer.load(d, backend="cpu", verify=False)


def test_a_shuffled_cluster_vocabulary_is_refused_by_its_checksum(state, tmp_path):
    d = copy_artifact(state, tmp_path)
    _rewrite_parquet(d / "vocab.parquet", "term", _shuffle)
    with pytest.raises(ArtifactError, match=r"vocab.parquet: (CRC32|\d+ bytes)"):
        StreamClusterer.load(d, backend="cpu")
