"""Validated artifacts: a corrupt or crafted index, model or cluster state is refused with one error type
naming the directory and the file, never a crash or a silently wrong result.

The edits below are loaded with ``verify=False`` so that the value checks behind the checksums are the
ones that refuse them (with ``verify=True`` the checksums refuse every edit first:
``tests/faults/test_artifacts.py``)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cutext.pipelines.bm25 import BM25Index
from cutext.pipelines.lda import LDAModel
from cutext.stages.engines.streamcluster import StreamClusterer
from cutext.stages.runtime.artifacts import ArtifactError, ArtifactNotFoundError

from helpers import cacm_jsonl, copy_artifact, saved_cluster_state, saved_index, saved_lda_model


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, data_dir) -> Path:
    return cacm_jsonl(tmp_path_factory.mktemp("corpus"), data_dir, 200)


@pytest.fixture(scope="module")
def index(corpus, tmp_path_factory) -> Path:
    """A format-1 index: the edits below corrupt its files (vocab.parquet, postings/, documents/)."""
    return saved_index(corpus, tmp_path_factory.mktemp("idx") / "index", index_format=1)


@pytest.fixture(scope="module")
def segmented(corpus, tmp_path_factory) -> Path:
    """The default, segmented index (format 2) of the same corpus."""
    return saved_index(corpus, tmp_path_factory.mktemp("idx2") / "index")


@pytest.fixture(scope="module")
def model(corpus, tmp_path_factory) -> Path:
    return saved_lda_model(corpus, tmp_path_factory.mktemp("lda") / "model")


@pytest.fixture(scope="module")
def state(tmp_path_factory, data_dir) -> Path:
    return saved_cluster_state(data_dir, tmp_path_factory.mktemp("state") / "state")



def _edit_json(path: Path, **changes):
    meta = json.loads(path.read_text())
    for k, v in changes.items():
        if v is KeyError:
            meta.pop(k)
        else:
            meta[k] = v
    path.write_text(json.dumps(meta))


def _edit_parquet(path: Path, column: str, fn):
    t = pq.read_table(path)
    i = t.column_names.index(column)
    a = t.column(column).to_numpy().copy()
    t = t.set_column(i, column, pa.array(fn(a), type=t.schema.field(column).type))
    pq.write_table(t, path)


def _postings_file(d: Path) -> Path:
    return sorted((d / "postings").glob("*.parquet"))[0]


def test_valid_artifacts_load(index, segmented, model, state):
    assert len(BM25Index.load(index).lengths) == 200
    assert len(BM25Index.load(segmented).lengths) == 200
    assert LDAModel.load(model).K == 4
    assert StreamClusterer.load(state, backend="cpu").n_docs == 100


# --------------------------------------------------------------------------- BM25 index
def _set(i, v):
    def fn(a):
        a = a.copy()
        a[i] = v
        return a
    return fn


@pytest.mark.parametrize("case, column, fn, match", [
    ("doc_id >= N", "doc_id", _set(0, 10**6), r"posting doc ids must be in \[0, 199\]"),
    ("doc_id < 0", "doc_id", _set(0, -1), r"posting doc ids must be in \[0, 199\]"),
    ("NaN weight", "weight", _set(3, np.nan), "posting weights must be finite"),
    ("inf weight", "weight", _set(3, np.inf), "posting weights must be finite"),
    ("term_id 0", "term_id", _set(0, 0), "posting term ids"),
])
def test_corrupt_postings_are_refused(index, tmp_path, case, column, fn, match):
    d = copy_artifact(index, tmp_path)
    f = _postings_file(d)
    _edit_parquet(f, column, fn)
    with pytest.raises(ArtifactError, match=match) as exc:
        BM25Index.load(d, verify=False)
    assert str(d) in str(exc.value)


@pytest.mark.parametrize("case, edit, match", [
    ("bad JSON", lambda f: f.write_text("{\"kind\": \"cutext.bm25\", "), "not valid JSON"),
    ("no tokenizer", lambda f: _edit_json(f, tokenizer=KeyError), "missing field 'tokenizer'"),
    ("N not a number", lambda f: _edit_json(f, N="abc"), "field 'N' must be an integer"),
    ("N too large", lambda f: _edit_json(f, N=10**6),
     "field 'counts.n_docs' = 200 is not N = 1000000"),  # the manifest's own counts disagree first
    ("another kind", lambda f: _edit_json(f, kind="cutext.lda"), "kind='cutext.lda'"),
    ("no kind", lambda f: _edit_json(f, kind=KeyError), "kind=None"),
    ("a list", lambda f: f.write_text("[1, 2]"), "expected a JSON object"),
])
@pytest.mark.parametrize("index_format", [1, 2])
def test_corrupt_manifest_is_refused(index, segmented, tmp_path, case, edit, match, index_format):
    d = copy_artifact(index if index_format == 1 else segmented, tmp_path)
    edit(d / "index.json")
    with pytest.raises(ArtifactError, match=match[index_format] if isinstance(match, dict) else match) as exc:
        BM25Index.load(d, verify=False)
    assert "index.json" in str(exc.value) or "documents" in str(exc.value)


def test_missing_column_and_files_name_the_file(index, tmp_path):
    d = copy_artifact(index, tmp_path)
    t = pq.read_table(d / "vocab.parquet").drop(["idf"])
    pq.write_table(t, d / "vocab.parquet")
    with pytest.raises(ArtifactError, match=r"vocab.parquet: vocabulary has no column 'idf'"):
        BM25Index.load(d, verify=False)
    d2 = copy_artifact(index, tmp_path / "b")
    (d2 / "vocab.parquet").unlink()
    with pytest.raises(ArtifactNotFoundError, match="vocab.parquet: missing vocabulary"):
        BM25Index.load(d2, verify=False)
    with pytest.raises(FileNotFoundError, match="no index.json"):  # still a FileNotFoundError
        BM25Index.load(tmp_path / "nowhere")


# --------------------------------------------------------------------------- LDA model
@pytest.mark.parametrize("case, edit, match", [
    ("raised K", lambda d: _edit_json(d / "params.json", K=16), "theta does not match K=16"),
    ("alpha -1", lambda d: _edit_json(d / "params.json", alpha=-1), r"field 'alpha' = -1.0 is outside \(0"),
    ("beta inf", lambda d: _edit_json(d / "params.json", beta=float("inf")), "field 'beta' must be a finite"),
    ("K 2.7", lambda d: _edit_json(d / "params.json", K=2.7), "field 'K' must be an integer"),
    ("word id -1", lambda d: _edit_parquet(d / "topic_word.parquet", "word_id", _set(0, -1)), "word ids must be in"),
    ("topic K", lambda d: _edit_parquet(d / "topic_word.parquet", "topic", _set(0, 4)), r"topics must be in \[0, 3\]"),
    ("negative count", lambda d: _edit_parquet(d / "topic_word.parquet", "count", _set(0, -5)), "counts must be in"),
    ("doc id out", lambda d: _edit_parquet(d / "doc_topic.parquet", "doc_id", _set(0, 10**6)), "doc ids must be in"),
    ("lengths", lambda d: _edit_parquet(d / "documents.parquet", "length", _set(0, 10**4)), "do not match the lengths"),
])
def test_corrupt_lda_model_is_refused(model, tmp_path, case, edit, match):
    d = copy_artifact(model, tmp_path)
    edit(d)
    with pytest.raises(ArtifactError, match=match) as exc:
        LDAModel.load(d, verify=False)
    assert str(d) in str(exc.value)


# --------------------------------------------------------------------------- cluster state
def test_truncated_cluster_vocabulary_is_refused(state, tmp_path):
    d = copy_artifact(state, tmp_path)
    t = pq.read_table(d / "vocab.parquet")
    pq.write_table(t.slice(0, t.num_rows // 2), d / "vocab.parquet")
    with pytest.raises(ArtifactError, match="vocab.parquet"):
        StreamClusterer.load(d, backend="cpu", verify=False)


@pytest.mark.parametrize("case, edit, match", [
    ("top_k 0", lambda d: _edit_json(d / "state.json", top_k=0), "field 'top_k'"),
    ("threshold 2", lambda d: _edit_json(d / "state.json", threshold=2), "field 'threshold'"),
    ("n_clusters", lambda d: _edit_json(d / "state.json", n_clusters=1), "state.json says n_clusters=1"),
    ("NaN norm", lambda d: _edit_parquet(d / "clusters.parquet", "norm", _set(0, np.nan)), "norms must be finite"),
])
def test_corrupt_cluster_state_is_refused(state, tmp_path, case, edit, match):
    d = copy_artifact(state, tmp_path)
    edit(d)
    with pytest.raises(ArtifactError, match=match):
        StreamClusterer.load(d, backend="cpu", verify=False)
