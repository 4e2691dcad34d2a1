"""Helpers of the reader tests (``test_read.py``, ``test_read_archives.py``): the CACM oracle, a read of a corpus
into its documents, byte writers and a CPU bm25 build."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
from pathlib import Path

import dask
import pandas as pd
import pytest

from cutext import pipelines
from cutext.stages.readers.files import assign_doc_ids
from cutext.stages.readers.source import read_corpus

CACM = Path(__file__).resolve().parents[2] / "data" / "cacm" / "cacm.json"
N_DOCS = 50

zstd = pytest.importorskip("zstandard")  # the .zst corpora; the modules importing these helpers skip without it


def cacm_docs():
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
