"""Small shared helpers for the tests (reading an index back, topics, the shared datasets)."""
from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq


def read_index(path: Path) -> dict:
    """Everything an index holds, as host objects, in a canonical order: ``vocab`` (term_id, term, df, idf,
    w0), ``docs`` (doc_id, source_id, length; replaced in format 1, which stores it per document),
    ``postings`` (term_id, doc_id, tf, weight, term-major) and ``replaced`` (the index's total).  Format 1:
    its files as written; format 2 (segmented): its live segments read (checked), merged in commit order
    and weighted from the global statistics (:mod:`cutext.stages.engines.segments`)."""
    path = Path(path)
    meta = json.loads((path / "index.json").read_text(encoding="utf-8"))
    if meta.get("index_format", 1) == 2:
        return _read_segmented_index(path, meta)
    vocab = pq.read_table(path / "vocab.parquet").to_pandas()
    docs = pq.read_table(path / "documents").to_pandas().sort_values("doc_id", ignore_index=True)
    files = sorted((path / "postings").glob("*.parquet"))
    post = pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)
    return {"vocab": vocab, "docs": docs, "postings": post, "replaced": int(docs["replaced"].sum())}


def _read_segmented_index(path: Path, meta: dict) -> dict:
    """:func:`read_index` of a segmented index, in format 1's columns and types."""
    from cutext.stages.engines import segments as seg
    from cutext.stages.engines.index_commits import read_deletes

    names = meta["segments"]
    deletes = read_deletes(path, meta, names)
    merged = seg.merge_segments([seg.live_segment(seg.read_segment(path / "segments" / n), d)
                                 for n, d in zip(names, deletes)])
    w = seg.segment_weights(merged, variant=meta["variant"], k1=meta["k1"], b=meta["b"], delta=meta["delta"])
    V, N = len(merged.vocab), merged.n_docs
    vocab = pd.DataFrame({"term_id": np.arange(1, V + 1, dtype=np.int32),
                          "term": merged.vocab.cast(pa.string()).to_pandas(),
                          "df": merged.df[1:], "idf": w.idf[1:], "w0": w.w0[1:].astype(np.float32)})
    docs = pd.DataFrame({"doc_id": np.arange(N, dtype=np.int64),
                         "source_id": merged.source_ids.to_pandas(), "length": merged.lengths})
    post = pd.DataFrame({"term_id": merged.term_ids(), "doc_id": merged.doc.astype(np.int64), "tf": merged.tf,
                         "weight": w.weight})
    return {"vocab": vocab, "docs": docs, "postings": post, "replaced": int(meta["counts"]["replaced"])}


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
    """Same vocabulary (terms, ids, df), documents (ids, lengths, replaced byte sequences: per document
    where both indexes store them, format 1, else the totals) and postings (tf, weights), of indexes of
    either format (:func:`read_index`)."""
    pd.testing.assert_frame_equal(a["vocab"][["term_id", "term", "df"]].astype({"term": str}),
                                  b["vocab"][["term_id", "term", "df"]].astype({"term": str}))
    np.testing.assert_allclose(a["vocab"]["idf"], b["vocab"]["idf"], rtol=1e-12)
    cols = ("doc_id", "length") + (("replaced",) if "replaced" in a["docs"] and "replaced" in b["docs"] else ())
    for col in cols:
        np.testing.assert_array_equal(a["docs"][col].to_numpy(), b["docs"][col].to_numpy(), err_msg=col)
    assert a["replaced"] == b["replaced"]
    assert a["docs"]["source_id"].astype(str).tolist() == b["docs"]["source_id"].astype(str).tolist()
    pa_, pb = a["postings"], b["postings"]
    assert len(pa_) == len(pb)
    for col in ("term_id", "doc_id", "tf"):
        np.testing.assert_array_equal(pa_[col].to_numpy(), pb[col].to_numpy(), err_msg=col)
    np.testing.assert_allclose(pa_["weight"].to_numpy(), pb["weight"].to_numpy(), rtol=rtol)


EMU_DIR = Path(__file__).resolve().parent / "cuda_emu"


def build_cuda_emulation(out_dir: Path, kernel_source: Path, harness: str, *, define: str = "KERNEL_SOURCE",
                         std: str = "c++20", flags=("-O1", "-ffp-contract=off")) -> Path:
    """Compile a kernel's ``.cu`` source under a host harness of ``tests/cuda_emu/`` into a shared library.

    Skips the test where no C++ compiler (or no C++20 ``<barrier>``) is available; fails it when the
    kernel source does not compile as C++ (that is a defect of the source, not of the machine).
    """
    import shutil
    import subprocess

    import pytest

    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler (g++ or clang++)")
    lib = Path(out_dir) / (Path(harness).stem + ".so")
    cmd = [cxx, f"-std={std}", *flags, "-shared", "-fPIC", f'-D{define}="{kernel_source}"',
           str(EMU_DIR / harness), "-o", str(lib), "-lpthread"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        if "c++20" in r.stderr or "<barrier>" in r.stderr:
            pytest.skip(f"{cxx} without C++20 <barrier>: {r.stderr[:200]}")
        pytest.fail(f"{kernel_source.name} does not compile as C++ under {harness}:\n{r.stderr[-4000:]}")
    return lib


def load_fake_cupy():
    """The module ``tests/cuda_emu/fake_cupy.py`` (a CPU stand-in for CuPy), loaded fresh."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("fake_cupy", EMU_DIR / "fake_cupy.py")
    fake = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake)
    return fake


def fake_cudf():
    """A CPU stand-in of cudf's Parquet reader (pyarrow underneath): the frame's columns have ``has_nulls``,
    ``dtype`` and ``values``, as cudf's Series have."""
    import types

    import pyarrow.parquet as pq

    class Col:
        def __init__(self, arr):
            self.has_nulls, self.values = arr.null_count > 0, arr.to_numpy(zero_copy_only=False)
            self.dtype = self.values.dtype

    class Frame:
        def __init__(self, table):
            self.columns, self._t = table.schema.names, table

        def __len__(self):
            return self._t.num_rows

        def __getitem__(self, name):
            return Col(self._t.column(name).combine_chunks())

    mod = types.ModuleType("cudf")
    mod.read_parquet = lambda path: Frame(pq.read_table(path))
    return mod


def install_fake_cupy(emu_lib: Path, monkeypatch, extend=None):
    """Make ``import cupy`` give the CPU stand-in whose kernels are the emulated CUDA C of ``emu_lib``
    (a library from :func:`build_cuda_emulation`), with empty kernel-loader caches (modules built by
    this fake only).  ``extend(mod, fake)``: adds what a test needs beyond fake_cupy's arrays."""
    from cutext.kernels import _cuda

    fake = load_fake_cupy()
    mod = fake.make(emu_lib)
    if extend is not None:
        extend(mod, fake)
    monkeypatch.setitem(sys.modules, "cupy", mod)
    monkeypatch.setattr(_cuda, "_modules", {})
    monkeypatch.setattr(_cuda, "_functions", {})
    return mod


def c_ptr(a):
    """The C pointer of a C-contiguous numpy array, for the ctypes calls of an emulation library."""
    import ctypes

    assert a.flags.c_contiguous
    return ctypes.c_void_p(a.ctypes.data)


# ----------------------------------------------------------------------------- saved artifacts of CACM
def cacm_jsonl(folder: Path, data_dir: Path, n: int) -> Path:
    """The first ``n`` CACM abstracts as one JSON Lines file in ``folder``."""
    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()[:n]
    p = folder / f"cacm{n}.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def saved_index(corpus: Path, out: Path, **params) -> Path:
    """A BM25 index of ``corpus`` built on the CPU in one process."""
    from cutext import pipelines

    pipelines.run("bm25", corpus, out=out, backend="cpu", scheduler="sync", progress=False, **params)
    return out


def saved_lda_model(corpus: Path, out: Path) -> Path:
    """A 4-topic LDA model of ``corpus`` after 2 iterations on the CPU."""
    from cutext import pipelines

    pipelines.run("lda", corpus, out=out, K=4, iterations=2, backend="cpu", progress=False)
    return out


def saved_cluster_state(data_dir: Path, out: Path) -> Path:
    """The state of a StreamClusterer (T=0.3, top_k=20) after the first 100 CACM abstracts."""
    import json

    from cutext.stages.engines.streamcluster import StreamClusterer

    texts = [json.loads(x)["contents"] for x in
             (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()[:100]]
    sc = StreamClusterer(0.3, 20, backend="cpu")
    sc.partial_fit(texts)
    sc.save(out)
    return out


MISSING_DATA = "missing data: "  # the skip reason tests/conftest.py counts at the end of a run
FETCH = "python -m cutext.pipelines fetch"  # the command line that gets a dataset with a public download (how_to_get)


def missing_data_lines(reasons: list) -> list:
    """The end-of-run summary of skips for missing data: a first line counting the tests, then one line a
    dataset with the number of its tests and the exact command that gets it (``fetch NAME``), or, for a
    file with no public download, how to make it.  ``reasons`` are the skip reasons, each
    ``"missing data: name[, name...]"`` naming datasets of ``cutext.pipelines.datasets.DATASETS``."""
    from cutext.pipelines.datasets import DATASETS, how_to_get

    counts: dict = {}
    tests = 0
    for reason in reasons:
        if not reason.startswith(MISSING_DATA):
            continue
        tests += 1
        for name in dict.fromkeys(n.strip() for n in reason[len(MISSING_DATA):].split(",") if n.strip()):
            counts[name] = counts.get(name, 0) + 1
    if not tests:
        return []
    lines = [f"{tests} test{'s' if tests != 1 else ''} skipped for missing data, by dataset "
             "(or set CUTEXT_DATA to a folder holding them):"]
    for name in sorted(counts):
        n = f"{name} ({counts[name]} test{'s' if counts[name] != 1 else ''})"
        if name not in DATASETS:
            lines.append(f"  {n}: not a dataset of cutext.pipelines.datasets (a test names it wrongly)")
        else:
            lines.append(f"  {n}: {how_to_get(name)}")
    return lines


def need_data(name: str) -> Path:
    """The path of dataset ``name`` where ``datasets.fetch`` finds it without downloading (a local copy or
    the cache), or skip the test with a reason the end-of-run summary counts and names."""
    import pytest

    from cutext.pipelines.datasets import DatasetNotFoundError, fetch

    try:
        return fetch(name, download=False)
    except DatasetNotFoundError:
        pytest.skip(f"{MISSING_DATA}{name}")


def need_corpus(name: str) -> pd.DataFrame:
    """A corpus of ``datasets.shared_corpora`` by its name (``"nltk-brown"``, ``"20news"``, ``"cacm"``
    ...), loaded, or skip the test as :func:`need_data` does."""
    from cutext.pipelines.datasets import CORPORA

    dataset, load = CORPORA[name]
    return load(need_data(dataset))


def copy_artifact(src: Path, tmp_path: Path) -> Path:
    """A copy of a saved output in ``tmp_path`` (to edit without touching the module's fixture)."""
    import shutil

    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    return dst


def same_rows_but_near_ties(want, got, what, rtol=1e-6, max_extra=0.001):
    """cuSPARSE sums a score in another order than the CPU engine, so two documents whose float32 scores differ
    in the last bits may swap, also across the k-th place: every row of ``got`` is a row of ``want`` (an
    allowed document), or has the score of that query's last row in ``want`` within ``rtol`` (at most
    ``max_extra`` of the rows, None: any number); the scores of the rows both hold agree within ``rtol``."""
    assert len(got) == len(want), what
    m = want.merge(got, on=["query_id", "doc_id"], how="right", suffixes=("_c", "_g"), indicator=True)
    both = m[m["_merge"] == "both"]
    np.testing.assert_allclose(both["score_c"], both["score_g"], rtol=rtol, err_msg=what)
    extra = m[m["_merge"] == "right_only"]
    last = want.groupby("query_id")["score"].min()
    np.testing.assert_allclose(extra["score_g"].to_numpy(), last.loc[extra["query_id"]].to_numpy(), rtol=rtol,
                               err_msg=f"{what}: a document outside the CPU's top k that is not a tie at the "
                                       "k-th place")
    if max_extra is not None:  # the share of rows that are such ties
        assert len(extra) <= max_extra * len(want), what
