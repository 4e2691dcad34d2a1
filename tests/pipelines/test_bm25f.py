"""BM25F: ``build_index(text_column=[...], field_weights=..., field_b=...)`` scores the text columns as weighted
fields (Robertson, Zaragoza and Taylor 2004), checked against a direct numpy / scipy implementation of the
formula on SciFact (title + abstract) and NFCorpus (where the shared data holds it), through appends, a
deletion and compaction (bit for bit against a one-shot build), on the CPU, built on a Client and loaded in
shards; with its errors and its command line."""
from __future__ import annotations

import gzip
import json
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from cutext import pipelines
from cutext.pipelines.__main__ import main
from cutext.pipelines.datasets import shared_data_dir
from cutext.stages.engines import segments
from cutext.stages.engines.bm25_index import BM25Index
from cutext.stages.text.tokenize import TokenizerConfig, tokenize_flat

from helpers import fake_cudf, load_fake_cupy, scifact_topics

KW = dict(backend="cpu", scheduler="sync", progress=False)
READER = {"text_column": ["title", "text"], "id_column": "_id"}


def _records(path) -> list:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(x) for x in fh if x.strip()]


def _write(folder, name, recs) -> object:
    p = folder / f"{name}.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    return p


def reference_bm25f(fields: dict, queries: list, cfg: TokenizerConfig, weights: dict, bs: dict, k1: float,
                    variant: str = "lucene") -> np.ndarray:
    """Dense BM25F scores (n_queries, N), float64, straight from the formula: tf~ = sum_f w_f tf_f / (1 - b_f +
    b_f len_f / avglen_f), score = sum over query tokens of idf * tf~ / (k1 + tf~) (lucene; (k1 + 1) times
    that for robertson), idf over the document frequency of the union of the fields."""
    names = list(fields)
    n = len(fields[names[0]])
    toks = {f: tokenize_flat(fields[f], cfg) for f in names}
    every = np.concatenate([np.asarray(toks[f][0].to_pylist(), object) for f in names])
    vocab, ids = np.unique(every, return_inverse=True)
    V, tf, a = len(vocab), {}, 0
    for f in names:
        rows = toks[f][1]
        tf[f] = sp.csr_matrix((np.ones(len(rows)), (rows, ids[a:a + len(rows)])), shape=(n, V))
        a += len(rows)
    tilde = sp.csr_matrix((n, V))
    union = sp.csr_matrix((n, V))
    for f in names:
        length = np.asarray(tf[f].sum(axis=1)).ravel()
        avg = length.sum() / n
        norm = (1 - bs[f]) + bs[f] * length / avg
        tilde = tilde + weights[f] * sp.diags(1.0 / norm) @ tf[f]
        union = union + tf[f]
    df = np.asarray((union > 0).sum(axis=0)).ravel().astype(np.float64)
    idf = np.log1p((n - df + 0.5) / (df + 0.5)) if variant == "lucene" else np.log(n / df)
    w = tilde.tocsr()
    w.data = idf[w.indices] * w.data / (k1 + w.data) * (1.0 if variant == "lucene" else k1 + 1.0)
    qt, qrow = tokenize_flat(queries, cfg)
    where = {t: i for i, t in enumerate(vocab)}
    q = np.zeros((len(queries), V))
    for t, r in zip(qt.to_pylist(), qrow):
        if t in where:
            q[r, where[t]] += 1
    return np.asarray(w @ q.T).T


def _assert_reference(index: BM25Index, ref: np.ndarray, queries: list):
    got = np.stack([index.get_scores(x) for x in queries]).astype(np.float64)
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-6)
    hits = index.search(queries, k=10)
    for i in range(len(queries)):  # the top 10 are the reference's best scores
        top = np.sort(ref[i])[::-1][:10]
        np.testing.assert_allclose(np.sort(hits[hits.query_id == str(i)].score.to_numpy())[::-1],
                                   top[:int((hits.query_id == str(i)).sum())], rtol=2e-6)


@pytest.mark.parametrize("variant, weights, bs", [
    ("lucene", {"title": 2.0, "text": 1.0}, {"title": 0.5, "text": 0.8}),
    ("robertson", {"title": 3.0, "text": 0.5}, {"title": 0.75, "text": 0.75}),
    ("lucene", {"title": 0.0, "text": 1.0}, {"title": 0.0, "text": 1.0}),
])
def test_scifact_equals_a_direct_bm25f(tmp_path, data_dir, variant, weights, bs):
    recs = _records(data_dir / "scifact" / "corpus.jsonl.gz")
    queries = list(scifact_topics(data_dir).values())[:60]
    ix = pipelines.run("bm25", data_dir / "scifact" / "corpus.jsonl.gz", out=tmp_path / "ix", variant=variant,
                       k1=1.2, stopwords="lucene", field_weights=weights, field_b=bs, **KW, **READER).path
    meta = json.loads((ix / "index.json").read_text())
    assert meta["bm25f"] == {"fields": ["title", "text"], "weights": [weights["title"], weights["text"]],
                             "b": [bs["title"], bs["text"]]}
    index = BM25Index.load(ix, backend="cpu")
    assert f"fields={weights}, field_b={bs}" in repr(index)
    cfg = TokenizerConfig.make(stopwords="lucene")
    ref = reference_bm25f({"title": [r["title"] for r in recs], "text": [r["text"] for r in recs]}, queries, cfg,
                          weights, bs, 1.2, variant)
    _assert_reference(index, ref, queries)
    assert list(index.source_ids) == [str(r["_id"]) for r in recs]


def test_nfcorpus_equals_a_direct_bm25f(tmp_path):
    root = shared_data_dir()
    corpus = root / "ir" / "nfcorpus" / "corpus.jsonl.gz" if root is not None else None
    if corpus is None or not corpus.is_file():
        pytest.skip("BEIR's nfcorpus is in no dataset registry (no fetch gets it): its corpus.jsonl.gz at "
                    "$CUTEXT_SHARED_DATA/ir/nfcorpus/ runs this test")
    recs = _records(corpus)
    queries = [r["text"] for r in recs[:40]]  # document texts as queries: every term occurs
    weights, bs = {"title": 2.5, "text": 1.0}, {"title": 0.3, "text": 0.75}
    ix = pipelines.run("bm25", corpus, out=tmp_path / "ix", field_weights=weights, field_b=bs, **KW, **READER).path
    ref = reference_bm25f({"title": [r["title"] for r in recs], "text": [r["text"] for r in recs]}, queries,
                          TokenizerConfig.make(), weights, bs, 1.2)
    _assert_reference(BM25Index.load(ix, backend="cpu"), ref, queries)


def test_one_field_of_weight_1_is_bm25(tmp_path, data_dir):
    corpus = data_dir / "cacm" / "cacm.json"
    plain = BM25Index.load(pipelines.run("bm25", corpus, out=tmp_path / "a", b=0.4, k1=0.9, **KW).path)
    one = BM25Index.load(pipelines.run("bm25", corpus, out=tmp_path / "f", k1=0.9, text_column="contents",
                                       field_b={"contents": 0.4}, **KW).path)
    assert one.matrix.nnz == plain.matrix.nnz
    np.testing.assert_array_equal(one.matrix.indices, plain.matrix.indices)
    # tf / (k1 norm + tf) against (tf / norm) / (k1 + tf / norm): the same number, rounded apart
    np.testing.assert_allclose(one.matrix.data, plain.matrix.data, rtol=1e-6)


def _same_matrix(a: BM25Index, b: BM25Index):
    assert list(a.source_ids) == list(b.source_ids)
    assert a.vocab.equals(b.vocab)
    np.testing.assert_array_equal(a.matrix.indptr, b.matrix.indptr)
    np.testing.assert_array_equal(a.matrix.indices, b.matrix.indices)
    np.testing.assert_array_equal(a.matrix.data, b.matrix.data)  # bit for bit


def test_appends_a_deletion_and_compaction_equal_a_one_shot_build(tmp_path, data_dir):
    recs = _records(data_dir / "scifact" / "corpus.jsonl.gz")
    n = len(recs)
    spec = dict(field_weights={"title": 2.0}, field_b={"title": 0.4, "text": 0.8}, stopwords="lucene", **READER)
    ix = tmp_path / "ix"
    # several read partitions: segments of every field cut alike, joined segment by segment
    pipelines.run("bm25", _write(tmp_path, "a", recs[: n // 3]), out=ix, blocksize=1 << 18, **KW, **spec)
    assert len(json.loads((ix / "index.json").read_text())["segments"]) >= 3
    # an append takes the index's fields, weights and b's; giving the same ones is allowed
    pipelines.run("bm25", _write(tmp_path, "b", recs[n // 3: 2 * n // 3]), out=ix, append=True, id_column="_id", **KW)
    pipelines.run("bm25", _write(tmp_path, "c", recs[2 * n // 3:]), out=ix, append=True, **KW, **spec)
    whole = pipelines.run("bm25", _write(tmp_path, "all", recs), out=tmp_path / "one", **KW, **spec).path
    index = BM25Index.load(ix, backend="cpu")
    _same_matrix(index, BM25Index.load(whole, backend="cpu"))
    for name in json.loads((ix / "index.json").read_text())["segments"]:
        seg = segments.read_segment(ix / "segments" / name)
        assert seg.meta["format"] == 2 and seg.fields == ("title", "text")
        np.testing.assert_array_equal(seg.field_tf.sum(axis=0), seg.tf)
    gone = [str(r["_id"]) for r in recs[5::9]]
    index.delete(gone)
    rest = [r for r in recs if str(r["_id"]) not in set(gone)]
    live = BM25Index.load(pipelines.run("bm25", _write(tmp_path, "rest", rest), out=tmp_path / "rest", **KW,
                                        **spec).path, backend="cpu")
    _same_matrix(index, live)
    index.compact()
    (seg,) = json.loads((ix / "index.json").read_text())["segments"]
    assert segments.read_segment(ix / "segments" / seg).fields == ("title", "text")
    _same_matrix(index, live)
    _same_matrix(BM25Index.load(ix, backend="cpu"), live)


def test_device_merge_moves_each_fields_tf_as_the_host(tmp_path, data_dir, monkeypatch):
    """merge_segments(device=True) on CPU stand-ins of CuPy and cudf, BM25F segments of SciFact (several blocks a
    segment): the (F, n) field tf lands in the host's slots with the postings."""
    recs = _records(data_dir / "scifact" / "corpus.jsonl.gz")[:1500]
    spec = dict(field_weights={"title": 2.0}, field_b={"title": 0.4, "text": 0.8}, stopwords="lucene", **READER)
    ix = pipelines.run("bm25", _write(tmp_path, "a", recs), out=tmp_path / "ix", blocksize=1 << 17, **KW, **spec).path
    folders = [ix / "segments" / n for n in json.loads((ix / "index.json").read_text())["segments"]]
    assert len(folders) >= 2
    host = segments.merge_segments(folders)
    fake = load_fake_cupy()
    monkeypatch.setitem(sys.modules, "cupy", fake.make(None))
    monkeypatch.setitem(sys.modules, "cudf", fake_cudf())  # segments given as folders: decoded "on the device"
    monkeypatch.setattr(segments, "DEVICE_MERGE_BLOCK", 1000)
    dev = segments.merge_segments(folders, device=True)
    assert isinstance(dev.field_tf, fake.ndarray) and dev.fields == host.fields == ("title", "text")
    for name in ("doc", "tf", "field_tf"):
        np.testing.assert_array_equal(np.asarray(getattr(dev, name)), getattr(host, name), err_msg=name)
    np.testing.assert_array_equal(dev.field_lengths, host.field_lengths)


def test_errors_name_the_field_the_value_and_the_way_out(tmp_path, data_dir):
    corpus = data_dir / "scifact" / "corpus.jsonl.gz"
    with pytest.raises(ValueError, match=r"field_weights names 'abstract', which is not a text column; the text "
                                         r"columns \(text_column\) are \['title', 'text'\]"):
        pipelines.run("bm25", corpus, out=tmp_path / "x", field_weights={"abstract": 2.0}, **KW, **READER)
    with pytest.raises(ValueError, match=r"field_b names 'body'"):
        pipelines.run("bm25", corpus, out=tmp_path / "x", field_b={"body": 0.5}, **KW, **READER)
    with pytest.raises(ValueError, match=r"field_weights: the value of field 'title' must be a finite number in "
                                         r"\[0, inf\), got -1"):
        pipelines.run("bm25", corpus, out=tmp_path / "x", field_weights={"title": -1}, **KW, **READER)
    with pytest.raises(ValueError, match=r"field_b: the value of field 'text' must be a finite number in \[0, 1\], "
                                         r"got 1.5"):
        pipelines.run("bm25", corpus, out=tmp_path / "x", field_b={"text": 1.5}, **KW, **READER)
    with pytest.raises(ValueError, match=r"BM25F needs a field of weight > 0"):
        pipelines.run("bm25", corpus, out=tmp_path / "x", field_weights={"title": 0, "text": 0}, **KW, **READER)
    with pytest.raises(ValueError, match=r"score the columns of text_column as BM25F fields: name them"):
        pipelines.run("bm25", corpus, out=tmp_path / "x", field_weights={"title": 2.0}, **KW)
    with pytest.raises(ValueError, match=r"segmented index: use index_format=2 .*format 1 stores weights of one"):
        pipelines.run("bm25", corpus, out=tmp_path / "x", field_weights={"title": 2.0}, index_format=1, **KW,
                      **READER)
    with pytest.raises(ValueError, match=r"BM25F weighs the variants .* variant='bm25l'"):
        pipelines.run("bm25", corpus, out=tmp_path / "x", field_weights={"title": 2.0}, variant="bm25l", **KW,
                      **READER)
    with pytest.raises(ValueError, match=r"store_text=True is not available with BM25F"):
        pipelines.run("bm25", corpus, out=tmp_path / "x", field_weights={"title": 2.0}, store_text=True, **KW,
                      **READER)
    assert not (tmp_path / "x").exists()


def test_an_append_refuses_other_fields_and_weights(tmp_path, data_dir):
    recs = _records(data_dir / "scifact" / "corpus.jsonl.gz")[:300]
    a, b = _write(tmp_path, "a", recs[:200]), _write(tmp_path, "b", recs[200:])
    ix = pipelines.run("bm25", a, out=tmp_path / "ix", field_weights={"title": 2.0}, **KW, **READER).path
    before = (ix / "index.json").read_bytes()
    with pytest.raises(ValueError, match=r"scores the fields \['title', 'text'\] with weights \[2.0, 1.0\] .* "
                                         r"given here are \['title', 'text'\] with weights \[3.0, 1.0\]"):
        pipelines.run("bm25", b, out=ix, append=True, field_weights={"title": 3.0}, **KW, **READER)
    with pytest.raises(ValueError, match=r"scores the text columns \['title', 'text'\] as BM25F fields; "
                                         r"text_column=\['text', 'title'\] differs"):
        pipelines.run("bm25", b, out=ix, append=True, text_column=["text", "title"], **KW)
    plain = pipelines.run("bm25", a, out=tmp_path / "plain", **KW, **READER).path
    with pytest.raises(ValueError, match=r"joins its text columns into one field; field_weights and field_b"):
        pipelines.run("bm25", b, out=plain, append=True, field_weights={"title": 2.0}, **KW, **READER)
    assert (ix / "index.json").read_bytes() == before


def test_command_line_takes_field_weight_and_field_b_pairs(tmp_path, data_dir):
    corpus = data_dir / "scifact" / "corpus.jsonl.gz"
    out = tmp_path / "ix"
    assert main(["bm25", str(corpus), "--out", str(out), "--text-column", "title", "--text-column", "text",
                 "--field-weight", "title=2.5", "--field-weight", "text=1", "--field-b", "title=0.3",
                 "--backend", "cpu", "--no-progress"]) == 0
    assert json.loads((out / "index.json").read_text())["bm25f"] == {"fields": ["title", "text"],
                                                                      "weights": [2.5, 1.0], "b": [0.3, 0.75]}
    with pytest.raises(SystemExit):
        main(["bm25", str(corpus), "--out", str(tmp_path / "y"), "--field-weight", "title"])


def test_segments_refuse_field_columns_that_do_not_add_up(tmp_path):
    base = dict(terms=["a", "b"], df=[2, 1], doc=[0, 1, 1], tf=[1, 2, 1], lengths=[2, 3], source_ids=["x", "y"])
    good = np.array([[1, 0, 1], [0, 2, 0]])
    meta = segments.write_segment(tmp_path / "s", **base, fields=["t", "b"], field_tf=good,
                                  field_lengths=[[1, 1], [1, 2]])
    assert meta["format"] == 2 and meta["fields"] == ["t", "b"]
    seg = segments.read_segment(tmp_path / "s")
    np.testing.assert_array_equal(seg.field_tf, good)
    np.testing.assert_array_equal(seg.field_lengths, [[1, 1], [1, 2]])
    with pytest.raises(ValueError, match="field_tf must sum over the fields to tf"):
        segments.write_segment(tmp_path / "t", **base, fields=["t", "b"], field_tf=good * 2,
                               field_lengths=[[1, 1], [1, 2]])
    with pytest.raises(ValueError, match="field 'b' has more tf than tokens"):
        segments.write_segment(tmp_path / "u", **base, fields=["t", "b"], field_tf=good,
                               field_lengths=[[2, 2], [0, 1]])
    with pytest.raises(ValueError, match="needs fields, field_tf and field_lengths together"):
        segments.write_segment(tmp_path / "v", **base, fields=["t", "b"], field_tf=good)


@pytest.mark.slow  # a Client run: not in the fast tier
def test_a_client_build_and_a_sharded_load_equal_the_in_process_index(tmp_path, data_dir):
    """Every field's build takes the Client's route (worker shares of the files), the join the same segments;
    a sharded load takes the global per-field lengths from the segments' documents."""
    distributed = pytest.importorskip("distributed")
    recs = _records(data_dir / "scifact" / "corpus.jsonl.gz")
    files = tmp_path / "parts"
    files.mkdir()
    for i in range(4):
        _write(files, f"part-{i}", recs[i * 1300:(i + 1) * 1300])
    spec = dict(field_weights={"title": 2.0}, field_b={"text": 0.6}, progress=False, backend="cpu", **READER)
    one = pipelines.run("bm25", files, out=tmp_path / "one", scheduler="sync", **spec).path
    queries = list(scifact_topics(data_dir).values())[:50]
    want = BM25Index.load(one, backend="cpu")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc, \
            distributed.Client(lc) as c:
        r = pipelines.run("bm25", files, out=tmp_path / "on-client", client=c, **spec)
        assert r.scheduler == "client" and json.loads((r.path / "index.json").read_text())["bm25f"]["fields"] == \
            ["title", "text"]
        _same_matrix(BM25Index.load(r.path, backend="cpu"), want)
        sharded = BM25Index.load(one, backend="cpu", client=c)
        assert len(sharded.shards) == 2
        np.testing.assert_array_equal(sharded.search(queries, k=20).drop(columns="score"),
                                      want.search(queries, k=20).drop(columns="score"))
        np.testing.assert_allclose(sharded.search(queries, k=20).score, want.search(queries, k=20).score, rtol=1e-6)
