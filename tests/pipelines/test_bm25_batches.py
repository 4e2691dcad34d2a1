"""An in-process build of a segmented bm25 index in batches (``stages/engines/index_writer.py``): an input larger than
a batch (a share of the memory free over the front end's bytes an input byte) goes through the front end batch
after batch, each writing its segments with its own vocabulary, the commit's vocabulary merged from theirs.  The
index equals the one-pass build's file for file, holds a batch's input at a time, and appends likewise."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import cutext.stages.engines.index_writer as build
from cutext import pipelines
from cutext.pipelines import bm25_index_ops as ops
from cutext.stages.engines.bm25_index import BM25Index
from cutext.stages.engines.index_ids import DuplicateIdError

from helpers import cacm_topics as _topics

KW = dict(backend="cpu", scheduler="sync", progress=False, stopwords="lucene", stemmer="porter")


def _cacm_files(folder: Path, data_dir: Path, n: int, as_lines: bool, extra=(), docs: int = 1200) -> Path:
    """The first ``docs`` of CACM cut into ``n`` files in order: JSON Lines (the corpus's ids, a kept column
    ``k``), or their texts one a line (ids ``<file>:<row>``); ``extra``: (file number, JSON Lines row) added at
    the end of that file."""
    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()[:docs]
    folder.mkdir()
    step = -(-len(lines) // n)
    for i in range(n):
        rows = [json.loads(x) for x in lines[i * step:(i + 1) * step]] + [r for f, r in extra if f == i]
        if as_lines:
            part = [" ".join(r["contents"].split()) for r in rows]
        else:
            part = [json.dumps({**r, "k": len(r["contents"]) % 7}) for r in rows]
        (folder / f"part-{i}.{'txt' if as_lines else 'jsonl'}").write_text("".join(x + "\n" for x in part),
                                                                           encoding="utf-8")
    return folder


def _in_batches(monkeypatch, limit: int) -> list:
    """Batches of about ``limit`` input bytes (the private hook), and the input bytes of every front end run."""
    seen = []
    front_end = build._front_end
    monkeypatch.setattr(build, "_batch_bytes", lambda info: limit)
    monkeypatch.setattr(build, "_front_end", lambda run, s, *a, **k: seen.append(s.input_bytes) or
                        front_end(run, s, *a, **k))
    return seen


def cacm_topics(data_dir) -> dict:
    """CACM's topics without their quotes (an index with positions reads ``"..."`` as a phrase)."""
    return {k: v.replace('"', " ") for k, v in _topics(data_dir).items()}


def _manifest(ix) -> dict:
    return json.loads((Path(ix) / "index.json").read_text())


def _same_search(a, b, qs):
    a, b = BM25Index.load(a, backend="cpu"), BM25Index.load(b, backend="cpu")
    assert a.n_docs == b.n_docs and list(a.source_ids) == list(b.source_ids)
    pd.testing.assert_frame_equal(a.search(qs, k=20), b.search(qs, k=20))


@pytest.mark.parametrize("as_lines", [False, True])
def test_a_build_in_batches_equals_the_one_pass_build(tmp_path, data_dir, monkeypatch, as_lines):
    """JSON Lines in four files with the texts, positions and a column kept; or one lines file, its ids
    ``<file>:<row>`` numbered on across the batches."""
    src = _cacm_files(tmp_path / "src", data_dir, 1 if as_lines else 4, as_lines)
    kw = dict(KW, blocksize=32 << 10, **({"format": "lines"} if as_lines else {"store_text": True,
                                                                               "positions": True,
                                                                               "keep_columns": ["k"]}))
    ref = pipelines.run("bm25", str(src), out=tmp_path / "ref", **kw)
    nbytes = ref.counts["input_bytes"]
    seen = _in_batches(monkeypatch, int(0.6 * nbytes))  # 32 KiB pieces, about half the input a batch
    got = pipelines.run("bm25", str(src), out=tmp_path / "ix", **kw)
    # the front end held a batch of the input at a time, not the input
    assert "batches" not in ref.counts and got.counts["batches"] == len(seen) == 2
    assert sum(seen) == nbytes and max(seen) <= 0.6 * nbytes
    assert {k: v for k, v in got.counts.items() if k != "batches"} == \
        {k: v for k, v in ref.counts.items() if k != "batches"}
    assert set(got.timings) == set(ref.timings) and got.timings["tokenize"] > 0
    a, b = _manifest(ref.path), _manifest(got.path)
    # the same segments, byte for byte (ids, texts, positions, columns), and the commit's vocabulary
    assert a["segments"] == b["segments"] and len(a["segments"]) > 4 and a["next_segment"] == b["next_segment"]
    assert a["files"] == b["files"]
    qs = cacm_topics(data_dir)
    _same_search(ref.path, got.path, qs)
    if as_lines:
        ops.compact_index(got.path)  # one segment: the scores of the fresh one-pass build
        assert len(_manifest(got.path)["segments"]) == 1
        _same_search(ref.path, got.path, qs)


def test_an_input_that_fits_a_batch_takes_the_one_pass_path(tmp_path, data_dir, monkeypatch):
    src = _cacm_files(tmp_path / "src", data_dir, 3, False, docs=300)
    calls = []
    monkeypatch.setattr(build, "_share_segments", lambda *a, **k: calls.append(a))
    r = pipelines.run("bm25", str(src), out=tmp_path / "ix", **KW)  # the memory free holds it many times
    assert "batches" not in r.counts and not calls


def test_batches_without_documents_and_ids_repeated_across_batches(tmp_path, data_dir, monkeypatch):
    """Empty files and an empty document where batches cut; an id of the first batch again in the last one:
    the documents, ids and scores of the one-pass build, the older copy replaced as there."""
    again = json.loads((data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()[3])
    src = _cacm_files(tmp_path / "src", data_dir, 4, False, extra=[(3, dict(again, contents="replaced copy"))],
                      docs=600)
    for name in ("part-1a.jsonl", "part-1b.jsonl"):
        (src / name).write_text("", encoding="utf-8")
    (src / "part-1c.jsonl").write_text(json.dumps({"id": "no-text", "contents": "", "k": 0}) + "\n")
    kw = dict(KW, on_duplicate="replace")
    ref = pipelines.run("bm25", str(src), out=tmp_path / "ref", **kw)
    monkeypatch.setattr(build, "_batches", lambda s, info: [[0], [1], [2, 3], [4], [5, 6]])  # 1a, 1b alone
    got = pipelines.run("bm25", str(src), out=tmp_path / "ix", **kw)
    assert got.counts["batches"] == 5 and ref.counts["n_empty_docs"] == got.counts["n_empty_docs"] == 1
    assert got.counts["updated_docs"] == ref.counts["updated_docs"] == 1
    # the two empty files add no segment (a one-pass build writes an empty one for each)
    assert len(_manifest(got.path)["segments"]) == len(_manifest(ref.path)["segments"]) - 2
    _same_search(ref.path, got.path, cacm_topics(data_dir))
    with pytest.raises(DuplicateIdError, match=again["id"]):  # named, as by the one-pass build
        pipelines.run("bm25", str(src), out=tmp_path / "dup", **KW)
    assert not (tmp_path / "dup").exists()


def test_an_append_in_batches_equals_the_one_pass_append(tmp_path, data_dir, monkeypatch):
    src = _cacm_files(tmp_path / "src", data_dir, 5, True, docs=800)
    first, more = str(src / "part-0.txt"), [str(src / f"part-{i}.txt") for i in range(1, 5)]
    kw = dict(KW, format="lines")
    for out in ("ref", "ix"):
        pipelines.run("bm25", first, out=tmp_path / out, **kw)
    ref = pipelines.run("bm25", more, out=tmp_path / "ref", append=True, **kw)
    nbytes = sum(Path(f).stat().st_size for f in more)
    seen = _in_batches(monkeypatch, int(0.6 * nbytes))  # two files of four a batch
    got = pipelines.run("bm25", more, out=tmp_path / "ix", append=True, **kw)
    assert len(seen) == 2 and sum(seen) == nbytes and got.counts["appended_docs"] == ref.counts["appended_docs"]
    a, b = _manifest(ref.path), _manifest(got.path)
    assert a["segments"] == b["segments"] and a["files"] == b["files"]
    _same_search(ref.path, got.path, cacm_topics(data_dir))


def test_a_device_too_small_for_one_partition_a_batch_builds_in_one_spilled_pass(monkeypatch):
    """On the GPU, batches only where a batch of one full partition fits the device: below that (an RMM limit of
    a few dozen MB) the one-pass build spills its partitions to files instead, whose writer fits any device."""
    from types import SimpleNamespace

    info = SimpleNamespace(backend="gpu", client=None)
    src = SimpleNamespace(fs=object(), input_bytes=1 << 40, pieces=[object()] * 4)
    monkeypatch.setattr(build, "_piece_bytes", lambda p, fs: 1 << 38)
    need = build.DEVICE_BYTES_PER_INPUT_BYTE * build.GPU_BLOCKSIZE / build.BATCH_MEMORY_FRACTION
    monkeypatch.setattr(build, "device_memory_budget", lambda: int(need) - 1)
    assert build._batches(src, info) is None
    monkeypatch.setattr(build, "device_memory_budget", lambda: 80 << 30)  # an H100: a piece a batch
    assert build._batches(src, info) == [[0], [1], [2], [3]]
    assert build._batches(src, SimpleNamespace(backend="cpu", client=None)) is not None  # the host's own rule
