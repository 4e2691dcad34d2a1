"""The index writer (``stages/engines/index_writer.py``) owns a build from an opened corpus to its commit for any run
that times stages and writes a manifest (``BuildRun``), not only a pipeline's: its segments and commit vocabulary are
the pipeline's file for file."""
from __future__ import annotations

import json
from pathlib import Path

from cutext import pipelines
from cutext.stages.engines.index_writer import IndexWriter, WriterConfig, open_source
from cutext.stages.runtime.compute import compute_context
from cutext.stages.text.tokenize import TokenizerConfig


class _Run:
    """A run that is not a pipeline's: stages run as they are, the manifest written as plain JSON."""

    def __init__(self):
        self.timings: dict = {}

    def stage(self, name, fn, /, *args, **kwargs):
        self.timings[name] = 0.0
        return fn(*args, **kwargs)

    def bar(self, total, desc, unit):
        return None

    def write_manifest(self, tmp, fields):
        (Path(tmp) / "index.json").write_text(json.dumps(fields, default=str))


def _files(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != "index.json"}


def test_a_writer_builds_the_pipelines_index_for_any_run(tmp_path, data_dir):
    path = data_dir / "cacm" / "cacm.json"
    ref = pipelines.run("bm25", path, out=tmp_path / "ref", backend="cpu", scheduler="sync", progress=False,
                        blocksize=1 << 20)
    src, reopen = open_source(path, "cpu", 1 << 20)
    src.check_documents = None
    out = tmp_path / "ix"
    out.mkdir()
    run = _Run()
    with compute_context("cpu", scheduler="sync") as info:
        counts = IndexWriter(run, out, info, WriterConfig(TokenizerConfig.make()), path).build(src, reopen)
    assert counts == {k: ref.counts[k] for k in counts} and counts["partitions"] > 1
    assert _files(out) == _files(ref.path) and "terms.arrow" in _files(out)
    meta = json.loads((out / "index.json").read_text())
    assert meta["segments"] == json.loads((ref.path / "index.json").read_text())["segments"]
    assert list(run.timings) == [k for k in ref.timings if k in run.timings] and "write" in run.timings
