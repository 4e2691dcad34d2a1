"""Small shared helpers for the tests (reading an index back, topics)."""
from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq


def read_index(path: Path) -> dict:
    """Everything an index holds, as host objects, in a canonical order."""
    path = Path(path)
    vocab = pq.read_table(path / "vocab.parquet").to_pandas()
    docs = pq.read_table(path / "documents").to_pandas().sort_values("doc_id", ignore_index=True)
    files = sorted((path / "postings").glob("*.parquet"))
    post = pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)
    return {"vocab": vocab, "docs": docs, "postings": post}


def cacm_topics(data_dir: Path) -> dict:
    txt = (data_dir / "cacm" / "topics.cacm.txt").read_text()
    return {m.group(1): " ".join(m.group(2).split())
            for m in re.finditer(r"<DOC>\s*<DOCNO>\s*(\S+)\s*</DOCNO>(.*?)</DOC>", txt, re.S)}


def scifact_topics(data_dir: Path) -> dict:
    out = {}
    with gzip.open(data_dir / "scifact" / "topics.test.tsv.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            q, t = line.rstrip("\n").split("\t", 1)
            out[q] = t
    return out


def qrels_dict(path: Path) -> dict:
    out: dict = {}
    for line in open(path):
        q, _, d, r = line.split()
        out.setdefault(q, {})[d] = int(r)
    return out


def assert_same_index(a: dict, b: dict, rtol=1e-6):
    """Same vocabulary (terms, ids, df), documents (ids, lengths) and postings (tf, weights)."""
    pd.testing.assert_frame_equal(a["vocab"][["term_id", "term", "df"]].astype({"term": str}),
                                  b["vocab"][["term_id", "term", "df"]].astype({"term": str}))
    np.testing.assert_allclose(a["vocab"]["idf"], b["vocab"]["idf"], rtol=1e-12)
    for col in ("doc_id", "length", "replaced"):
        np.testing.assert_array_equal(a["docs"][col].to_numpy(), b["docs"][col].to_numpy())
    assert a["docs"]["source_id"].astype(str).tolist() == b["docs"]["source_id"].astype(str).tolist()
    pa_, pb = a["postings"], b["postings"]
    assert len(pa_) == len(pb)
    for col in ("term_id", "doc_id", "tf"):
        np.testing.assert_array_equal(pa_[col].to_numpy(), pb[col].to_numpy(), err_msg=col)
    np.testing.assert_allclose(pa_["weight"].to_numpy(), pb["weight"].to_numpy(), rtol=rtol)
