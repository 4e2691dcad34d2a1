"""Frames as pipeline input, the public stages, and work for every worker on a Client.

Every pipeline is run on the same real documents (a CACM subset, the bundled collection) given as
a Parquet file, a pandas DataFrame and a dask DataFrame; the output files must be identical.
The public stages (``cutext.stages.text.tokenize/encode/count/bm25/lda_chunks``) composed by hand must
give the bm25 index and the LDA chunks of the pipelines.
"""
from __future__ import annotations

import gc
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cutext import pipelines, stages
from cutext.stages.engines.index_ids import DuplicateIdError
from cutext.stages.readers.frames import FrameError

from helpers import assert_same_index, read_index

dd = pytest.importorskip("dask.dataframe")
import dask  # noqa: E402  (after the importorskip of dask.dataframe)

N_DOCS = 400
ANALYSIS = dict(stopwords="lucene", stemmer="porter")


@pytest.fixture(scope="module")
def cacm(data_dir) -> pd.DataFrame:
    """The first 400 CACM documents: ``(id, contents)`` strings, in file order."""
    df = pd.read_json(data_dir / "cacm" / "cacm.json", lines=True, dtype={"id": str})
    return df.iloc[:N_DOCS][["id", "contents"]].reset_index(drop=True)


@pytest.fixture(scope="module")
def cacm_parquet(cacm, tmp_path_factory):
    p = tmp_path_factory.mktemp("cacm") / "cacm.parquet"
    pq.write_table(pa.Table.from_pandas(cacm, preserve_index=False), p)
    return p


def _inputs(cacm, cacm_parquet):
    """The same documents three ways: a Parquet file, a pandas frame, a dask frame of 3 partitions."""
    return {"file": str(cacm_parquet), "pandas": cacm, "dask": dd.from_pandas(cacm, npartitions=3, sort=False)}


def _read_dir(path) -> dict:
    """Every Parquet table of an output directory, as pandas frames (sorted files, concatenated)."""
    from pathlib import Path

    path = Path(path)
    out = {}
    for f in sorted(path.rglob("*.parquet")):
        key = str(f.relative_to(path).parent if f.parent != path else f.name)
        out.setdefault(key, []).append(pq.read_table(f).to_pandas())
    return {k: pd.concat(v, ignore_index=True) for k, v in out.items()}


def _assert_same_tables(a: dict, b: dict):
    assert sorted(a) == sorted(b)
    for k in a:  # (llpt.parquet's seconds are wall clock)
        pd.testing.assert_frame_equal(a[k].drop(columns=["seconds"], errors="ignore"),
                                      b[k].drop(columns=["seconds"], errors="ignore"), obj=k)


# ----------------------------------------------------------------------------- each pipeline

def test_bm25_from_pandas_and_dask_frames_equals_the_file(cacm, cacm_parquet, tmp_path):
    runs = {name: pipelines.run("bm25", src, out=tmp_path / name, progress=False, **ANALYSIS)
            for name, src in _inputs(cacm, cacm_parquet).items()}
    ref = read_index(runs["file"].path)
    assert ref["docs"]["source_id"].tolist() == cacm["id"].tolist()
    for name in ("pandas", "dask"):
        assert_same_index(ref, read_index(runs[name].path), rtol=0)
        assert runs[name].counts["n_docs"] == N_DOCS
        meta = json.loads((runs[name].path / "index.json").read_text())
        assert meta["format"] == "frame" and meta["source"].startswith(f"<{name} DataFrame")
    assert runs["dask"].counts["partitions"] == 3  # the frame's own partitions


def test_a_series_is_the_text_with_row_numbers_as_ids(cacm, tmp_path):
    """A Series of texts equals a lines file of the same texts (source ids = row numbers)."""
    texts = cacm["contents"].str.replace("\n", " ")
    lines = tmp_path / "c.txt"
    lines.write_text("\n".join(texts) + "\n", encoding="utf-8")
    a = pipelines.run("bm25", str(lines), out=tmp_path / "file", progress=False)
    b = pipelines.run("bm25", dd.from_pandas(texts, npartitions=2), out=tmp_path / "series", progress=False)
    ia, ib = read_index(a.path), read_index(b.path)
    assert ib["docs"]["source_id"].tolist() == [str(i) for i in range(N_DOCS)]
    assert_same_index(ia, ib, rtol=0)


def test_lda_from_frames_equals_the_file(cacm, cacm_parquet, tmp_path):
    from cutext.pipelines.lda import LDAModel

    kw = dict(K=4, iterations=4, seed=3, backend="cpu", progress=False, stopwords="lucene")
    runs = {name: pipelines.run("lda", src, out=tmp_path / name, **kw)
            for name, src in _inputs(cacm, cacm_parquet).items()}
    ref = LDAModel.load(runs["file"].path)
    assert ref.documents["source_id"].tolist() == cacm["id"].tolist()
    for name in ("pandas", "dask"):
        m = LDAModel.load(runs[name].path)
        assert m.vocab == ref.vocab
        np.testing.assert_array_equal(m.W, ref.W)
        pd.testing.assert_frame_equal(m.documents, ref.documents)
        pd.testing.assert_frame_equal(m.doc_topic, ref.doc_topic)
        np.testing.assert_array_equal(m.llpt["llpt"].to_numpy(), ref.llpt["llpt"].to_numpy())


def test_cluster_from_frames_equals_the_file(cacm, cacm_parquet, tmp_path):
    kw = dict(threshold=0.3, backend="cpu", progress=False)
    runs = {name: pipelines.run("cluster", src, out=tmp_path / name, **kw)
            for name, src in _inputs(cacm, cacm_parquet).items()}
    ref = _read_dir(runs["file"].path)
    assert ref["assignments.parquet"]["cluster_id"].nunique() > 10
    for name in ("pandas", "dask"):
        _assert_same_tables(ref, _read_dir(runs[name].path))


def test_cluster_order_by_a_column_of_the_frame(cacm, tmp_path):
    """``order_by=<column>`` of a frame input is the frame's column (reversed ids: reversed stream)."""
    df = cacm.assign(key=np.arange(N_DOCS)[::-1])
    r = pipelines.run("cluster", dd.from_pandas(df, npartitions=2), out=tmp_path / "c", order_by="key",
                      threshold=0.3, backend="cpu", progress=False)
    a = pd.read_parquet(r.path / "assignments.parquet").sort_values("doc_id")
    np.testing.assert_array_equal(a["position"].to_numpy(), np.arange(N_DOCS)[::-1])
    with pytest.raises(FrameError, match="order_by column 'nope' not found"):
        pipelines.run("cluster", df, out=tmp_path / "d", order_by="nope", backend="cpu", progress=False)


@pytest.mark.slow
def test_ngram_from_frames_equals_the_file(cacm, cacm_parquet, tmp_path, arpa):
    from cutext.pipelines.ngram import NGramModel

    lm = NGramModel.load(arpa / "lmplz" / "abc.o3.arpa.gz", backend="cpu")
    runs = {name: pipelines.run("ngram", src, out=tmp_path / name, model=lm, sentence="document", progress=False)
            for name, src in _inputs(cacm, cacm_parquet).items()}
    ref = pd.read_parquet(runs["file"].path / "scores.parquet")
    assert len(ref) == N_DOCS and ref["tokens"].sum() > 0
    for name in ("pandas", "dask"):
        pd.testing.assert_frame_equal(ref, pd.read_parquet(runs[name].path / "scores.parquet"))
        assert json.loads((runs[name].path / "ngram.json").read_text())["format"] == "frame"


# ----------------------------------------------------------------------------- bad frames

def test_bad_frames_give_clear_errors(cacm, tmp_path):
    run = lambda src, **kw: pipelines.run("bm25", src, out=tmp_path / "x", progress=False, **kw)  # noqa: E731
    with pytest.raises(FrameError, match=r"no text column .*columns are \['id', 'body2'\]"):
        run(cacm.rename(columns={"contents": "body2"}))
    with pytest.raises(FrameError, match=r"missing text column\(s\) \['title'\]"):
        run(cacm, text_column="title")
    with pytest.raises(FrameError, match="text column 'contents' has dtype int64, not strings"):
        run(cacm.assign(contents=np.arange(N_DOCS)))
    # object text with a number inside: found when the partition is read, row named
    bad = cacm.assign(contents=cacm["contents"].astype(object))
    bad.loc[123, "contents"] = 42
    with pytest.raises(FrameError, match=r"holds a int \(42\) at partition \d+, row \d+ \(index 123\)"):
        run(bad, blocksize=20_000)
    dup = cacm.copy()
    dup.loc[[5, 9], "id"] = "CACM-dup"
    dup.loc[7, "id"] = "CACM-again"
    dup.loc[300, "id"] = "CACM-again"
    for src in (dup, dd.from_pandas(dup, npartitions=3)):
        # a repeated id of the bm25 index follows on_duplicate (default: refused naming them, nothing written)
        with pytest.raises(DuplicateIdError, match=r"2 source id\(s\) .* 'CACM-again', 'CACM-dup'; nothing was"):
            run(src)
    missing = cacm.assign(id=cacm["id"].where(cacm.index != 3, None))
    with pytest.raises(FrameError, match="id column 'id' has 1 missing ids"):
        run(missing)
    with pytest.raises(FrameError, match="id_column='id' given with a Series"):
        run(cacm["contents"], id_column="id")
    with pytest.raises(ValueError, match="format='jsonl'.*meaningless for a frame"):
        run(cacm, format="jsonl")
    with pytest.raises(ValueError, match="encoding='latin-1'"):
        run(cacm, encoding="latin-1")
    assert not (tmp_path / "x").exists()


def test_duplicate_ids_are_refused_by_every_pipeline(cacm, tmp_path, arpa):
    dup = cacm.copy()
    dup.loc[1, "id"] = dup.loc[0, "id"]
    for name, kw in (("lda", dict(K=2, iterations=1, progress=False)), ("cluster", dict(progress=False)),
                     ("ngram", dict(model=arpa / "kenlm" / "test.arpa", progress=False))):
        with pytest.raises(FrameError, match="duplicate id"):
            pipelines.run(name, dup, out=tmp_path / name, backend="cpu", **kw)
        assert not (tmp_path / name).exists()


def test_output_checks_accept_a_frame_input(cacm, tmp_path):
    from cutext.stages.runtime.output import check_output

    assert check_output(tmp_path / "o", kind="cutext.bm25", manifest="index.json", inputs=cacm) == tmp_path / "o"
    assert check_output(tmp_path / "o", kind="cutext.lda", manifest="params.json",
                        inputs=[dd.from_pandas(cacm, npartitions=2), None]) == tmp_path / "o"


# ----------------------------------------------------------------------------- public stages

def test_public_stages_compose_to_the_bm25_index(cacm, cacm_parquet, tmp_path):
    ref = read_index(pipelines.run("bm25", str(cacm_parquet), out=tmp_path / "ix", k1=0.9, b=0.4,
                                   progress=False, **ANALYSIS).path)
    texts = dd.from_pandas(cacm.rename(columns={"contents": "text"}), npartitions=3, sort=False)
    for persist in (True, False):  # from the partition summaries, and row by row
        tokens = stages.tokenize(texts, persist=persist, **ANALYSIS)
        assert list(tokens.columns) == ["doc_id", "token"]
        vocab, encoded = stages.encode(tokens)
        c = stages.count(encoded, n_docs=N_DOCS)
        assert c.n_docs == N_DOCS and c.n_terms == len(vocab)
        np.testing.assert_array_equal(c.lengths, ref["docs"]["length"].to_numpy())
        np.testing.assert_array_equal(c.df[1:], ref["vocab"]["df"].to_numpy())
        assert vocab.to_pylist() == ref["vocab"]["term"].tolist()
        w = stages.bm25(c, k1=0.9, b=0.4)
        np.testing.assert_allclose(w.idf[1:], ref["vocab"]["idf"].to_numpy(), rtol=0)
        post = w.postings.compute().reset_index(drop=True)
        for col in ("term_id", "doc_id", "tf", "weight"):
            np.testing.assert_array_equal(post[col].to_numpy(), ref["postings"][col].to_numpy(), err_msg=col)


def test_a_spilled_token_table_counts_as_the_one_in_memory(cacm, tmp_path):
    """One intermediate, two storages: the summaries written to a folder per partition give the counts,
    df and lengths of the persisted ones (and of the rows counted one by one); release removes them."""
    texts = dd.from_pandas(cacm.rename(columns={"contents": "text"}).iloc[:900], npartitions=3, sort=False)
    mem = stages.tokenize(texts, **ANALYSIS)
    spilled = stages.tokenize(texts, spill=tmp_path / "spill", **ANALYSIS)
    lazy = stages.tokenize(texts, persist=False, **ANALYSIS)
    assert (mem.storage, spilled.storage, lazy.storage) == ("memory", "spill", None)
    assert [f.name for f in spilled.parts] == ["scan-00000", "scan-00001", "scan-00002"]
    got = []
    for table in (mem, spilled, lazy):
        vocab, encoded = stages.encode(table)
        c = stages.count(encoded, n_docs=900)
        got.append((vocab, c, c.counts.compute().sort_values(["term_id", "doc_id"], ignore_index=True)))
    (v0, c0, k0) = got[0]
    for v, c, k in got[1:]:
        assert v.equals(v0)
        np.testing.assert_array_equal(c.df, c0.df)
        np.testing.assert_array_equal(c.lengths, c0.lengths)
        pd.testing.assert_frame_equal(k, k0)
    assert got[1][1].folders == [tmp_path / "spill" / f"counts-{i:05d}" for i in range(3)]
    pd.testing.assert_frame_equal(spilled.compute(), mem.compute())
    spilled.release()
    assert not spilled.summarized and not any((tmp_path / "spill").glob("scan-*"))
    with pytest.raises(ValueError, match="persist=True"):
        stages.tokenize(texts, persist=False, spill=tmp_path / "x")


def test_with_texts_keeps_the_summaries_and_recomputes_rows_from_the_new_texts(cacm):
    """``TokenTable.with_texts``: the rows come from the texts given (the GPU front end re-reads its input so
    that the device text can be freed), the encode / count results from the persisted summaries."""
    frame = cacm.rename(columns={"contents": "text"})[["text"]].iloc[:400]
    frame.insert(0, "doc_id", np.arange(len(frame), dtype=np.int64))
    first = dd.from_pandas(frame, npartitions=3, sort=False)
    tokens = stages.tokenize(first, **ANALYSIS)
    again = dd.from_pandas(frame.copy(), npartitions=3, sort=False)
    re = tokens.with_texts(again)
    pd.testing.assert_frame_equal(re.compute().reset_index(drop=True), tokens.compute().reset_index(drop=True))
    assert re.parts is tokens.parts  # the summaries are shared, not recomputed
    # rows come from the texts given: other texts give other rows, while encode / count still
    # give the summaries' results
    other = dd.from_pandas(frame.assign(text="zz " * 3), npartitions=3, sort=False)
    rows = tokens.with_texts(other).compute()
    assert set(rows["token"]) == {"zz"} and len(rows) == 3 * len(frame)
    (v1, e1), (v2, e2) = stages.encode(tokens), stages.encode(tokens.with_texts(other))
    assert v1.equals(v2)
    c1, c2 = stages.count(e1, n_docs=len(frame)), stages.count(e2, n_docs=len(frame))
    np.testing.assert_array_equal(c1.df, c2.df)
    pd.testing.assert_frame_equal(c1.counts.compute(), c2.counts.compute())
    with pytest.raises(ValueError, match="persist=True"):
        stages.tokenize(first, persist=False).with_texts(again)


def test_count_releasing_equals_count_and_frees_the_summaries(cacm):
    """The front end's count (``api.count_releasing``): the same counts as ``count``, each partition's
    summary dropped once counted, and the encoded frame still countable (from its rows) afterwards."""
    import weakref

    from cutext.stages.text import public as api

    frame = cacm.rename(columns={"contents": "text"})[["text"]].iloc[:600]
    texts = dd.from_pandas(frame, npartitions=4, sort=False)
    ref_tokens = stages.tokenize(texts, **ANALYSIS)
    ref = stages.count(stages.encode(ref_tokens)[1], n_docs=len(frame))
    tokens = stages.tokenize(texts, **ANALYSIS)
    scans = [weakref.ref(s.compute(scheduler="sync").scan) for s in tokens.parts]
    vocab, encoded = stages.encode(tokens)
    with dask.config.set(scheduler="sync"):
        got = api.count_releasing(encoded, n_docs=len(frame))
    np.testing.assert_array_equal(got.df, ref.df)
    np.testing.assert_array_equal(got.lengths, ref.lengths)
    pd.testing.assert_frame_equal(got.counts.compute(), ref.counts.compute())
    assert tokens.parts == [None] * 4 and not encoded.summarized
    gc.collect()
    assert all(r() is None for r in scans), "a counted summary is still alive"
    again = stages.count(encoded, n_docs=len(frame))  # from the rows now
    pd.testing.assert_frame_equal(again.counts.compute().sort_values(["term_id", "doc_id"], ignore_index=True),
                                  ref.counts.compute().sort_values(["term_id", "doc_id"], ignore_index=True))
    with pytest.raises(ValueError, match="unchanged result"):
        api.count_releasing(encoded)


def test_public_stages_on_a_users_own_ids_and_filtered_tokens(cacm):
    """Given doc ids (not 0..N-1, not contiguous) are kept; a filtered token frame is counted row by row."""
    from collections import Counter

    from cutext.stages.text.tokenize import TokenizerConfig, tokenize_texts

    sub = cacm.iloc[:60]
    frame = pd.DataFrame({"doc_id": np.arange(60, dtype=np.int64) * 7 + 1000, "body": sub["contents"].to_numpy()})
    texts = dd.from_pandas(frame, npartitions=2, sort=False)
    tokens = stages.tokenize(texts, text_column="body")
    rows = tokens.to_frame()
    tokens = rows[rows["token"].str.len() > 3]  # a user's filter of the rows: counted row by row
    vocab, encoded = stages.encode(tokens)
    c = stages.count(encoded)
    by_hand = Counter()
    for d, toks in zip(frame["doc_id"], tokenize_texts(frame["body"].tolist(), TokenizerConfig.make())):
        for t in toks:
            if len(t) > 3:
                by_hand[(int(d), t)] += 1
    got = c.counts.compute()
    terms = vocab.to_pylist()
    assert Counter({(int(d), terms[t - 1]): int(tf) for d, t, tf in zip(got.doc_id, got.term_id, got.tf)}) == by_hand
    assert c.n_docs == 1000 + 59 * 7 + 1 and c.lengths[1000] == sum(v for (d, _), v in by_hand.items() if d == 1000)


def test_public_stage_errors(cacm):
    with pytest.raises(FrameError, match="no text column 'text'"):
        stages.tokenize(dd.from_pandas(cacm, npartitions=1))
    with pytest.raises(FrameError, match="has dtype int64, not strings"):
        stages.tokenize(pd.DataFrame({"text": [1, 2]}))
    with pytest.raises(TypeError, match="dask"):
        stages.tokenize(["a list"])
    with pytest.raises(ValueError, match="doc_id and token"):
        stages.encode(pd.DataFrame({"x": [1]}))


def test_the_public_stages_are_functions_and_the_submodules_stay_importable():
    """``cutext.stages.tokenize`` is the public function (no module made callable); the partition
    operations live in their own modules under ``cutext.stages.text``."""
    import inspect
    import types

    from cutext.stages.text import bm25 as bm25_module
    from cutext.stages.text import public
    from cutext.stages.text.tokenize import TokenizerConfig

    for name in ("tokenize", "encode", "count", "bm25", "lda_chunks"):
        f = getattr(stages, name)
        assert inspect.isfunction(f) and not isinstance(f, types.ModuleType), name
    assert stages.tokenize is public.tokenize
    assert "texts" in inspect.signature(stages.tokenize).parameters
    assert bm25_module.VARIANTS and TokenizerConfig.make().lowercase


def test_lda_chunks_compose_to_the_pipelines_chunks(cacm, cacm_parquet):
    from cutext.stages.engines.lda_chunk import bow_from_corpus, build_chunks

    bow = bow_from_corpus(str(cacm_parquet), backend="cpu")
    want = build_chunks(bow, 5, 2)
    tokens = stages.tokenize(dd.from_pandas(cacm, npartitions=2).rename(columns={"contents": "text"}))
    vocab, encoded = stages.encode(tokens)
    got = stages.lda_chunks(stages.count(encoded), vocab, K=5, n_chunks=2)
    for name in ("word", "doc", "keys", "doc_ptr", "doc_tok", "chunk_ptr", "chunk_split", "old_id"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    assert got.vocab == want.vocab


# ----------------------------------------------------------------------------- every worker

def test_an_unsplittable_file_is_spread_over_the_workers(cacm, tmp_path):
    """A gzip file is one piece; on a 2-worker Client both workers tokenize, and the index is the same."""
    import gzip

    distributed = pytest.importorskip("distributed")
    src = tmp_path / "c.txt.gz"
    with gzip.open(src, "wt", encoding="utf-8") as fh:
        fh.write("\n".join(cacm["contents"].str.replace("\n", " ")) + "\n")
    ref = pipelines.run("bm25", str(src), out=tmp_path / "one", progress=False)
    assert ref.counts["partitions"] == 1
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        with distributed.get_task_stream(client=client) as ts:
            r = pipelines.run("bm25", str(src), out=tmp_path / "two", client=client, progress=False)
    assert r.counts["partitions"] == 2
    workers = {t["worker"] for t in ts.data if "tokenize_partition" in str(t["key"])}
    assert len(workers) == 2, workers
    assert_same_index(read_index(ref.path), read_index(r.path), rtol=0)


def test_term_ranges_are_spread_over_the_workers(cacm, tmp_path):
    """Left to the scheduler, every term range went where most of its slices were, which
    put them all on one worker of two; on a 2-worker Client range ``i`` now runs on worker ``i mod 2``
    (``BM25Postings.ranges``), each slice where its partition is, with the vocabulary scattered to the
    workers, and the postings do not change."""
    distributed = pytest.importorskip("distributed")

    texts = dd.from_pandas(cacm.rename(columns={"contents": "text"}), npartitions=3, sort=False)
    ref = stages.bm25(stages.count(stages.encode(stages.tokenize(texts, **ANALYSIS))[1], n_docs=N_DOCS),
                      n_partitions=6)
    ref_post = ref.postings.compute().reset_index(drop=True)

    def where(frame):
        from distributed import get_worker

        return frame, get_worker().address

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        workers = sorted(client.scheduler_info()["workers"])
        tokens = stages.tokenize(texts, **ANALYSIS)
        vocab, encoded = stages.encode(tokens)
        c = stages.count(encoded, n_docs=N_DOCS)  # the vocabulary scattered to the workers
        w = stages.bm25(c, n_partitions=6)
        assert w.ranges is not None and len(w.ranges) == 6 and w.range_workers == workers
        from cutext.stages.runtime.compute import on_worker, partition_homes

        homes = set(partition_homes(c.counts)[1])  # the workers holding counts partitions

        tasks = []
        for i, r in enumerate(w.ranges):  # a task made beside range i (as the GPU index writes it)
            with on_worker(i, workers):
                tasks.append(dask.delayed(where)(r))
        with distributed.get_task_stream(client=client) as ts:
            got = dask.compute(*tasks)
    assert [workers.index(a) for _, a in got] == [i % 2 for i in range(6)]
    # no range moved to the task beside it; a range takes the cut partitions of its own worker and one
    # slice task from each other worker holding partitions, made where those partitions are (only
    # those slices move to their range)
    beside = [t for t in ts.data if str(t["key"]).startswith("where")]
    slices = [t for t in ts.data if str(t["key"]).startswith("_term_slices")]
    assert len(beside) == 6 and len(slices) == 6 * (len(homes) - 1) and len(homes) == 2
    assert not any(s["action"] == "transfer" for t in beside + slices for s in t["startstops"])
    post = pd.concat([f for f, _ in got], ignore_index=True)
    for col in ("term_id", "doc_id", "tf", "weight"):
        np.testing.assert_array_equal(post[col].to_numpy(), ref_post[col].to_numpy(), err_msg=col)


def test_tokenize_summaries_weigh_their_arrays(cacm):
    """A distributed scheduler places a task beside its largest inputs and moves one whose inputs look
    small: a partition's tokenize summary reports the bytes of its arrays, not the few dozen bytes of a
    plain object (count tasks pulled their summaries from the other worker)."""
    from dask.sizeof import sizeof

    texts = dd.from_pandas(cacm.rename(columns={"contents": "text"}), npartitions=2, sort=False)
    item = stages.tokenize(texts, **ANALYSIS).parts[0]
    summary = item.compute(scheduler="sync") if hasattr(item, "dask") else item
    scan = summary.scan
    arrays = sum(a.nbytes for a in (scan.code, scan.pos, scan.tf, scan.lengths))
    assert arrays > 10_000 and sizeof(summary) >= arrays + len(scan.uniq)


def _counts_columns(cacm, partition: int, wide: bool, wide_row):
    """``(term_id, doc_id, tf, dl)`` numpy columns of one counts partition of the CACM sample, and V;
    ``wide``: doc ids moved past 2**31 and a tf of 70,000 at row ``wide_row(n_rows)``."""
    texts = dd.from_pandas(cacm.rename(columns={"contents": "text"}), npartitions=2, sort=False)
    c = stages.count(stages.encode(stages.tokenize(texts, **ANALYSIS))[1], n_docs=N_DOCS)
    part = c.counts.partitions[partition].compute()
    cols = {k: part[k].to_numpy() for k in ("term_id", "doc_id", "tf", "dl")}
    if wide:
        cols["doc_id"] = cols["doc_id"] + 2**31
        cols["tf"] = cols["tf"].copy()
        cols["tf"][wide_row(len(cols["tf"]))] = 70_000
    return cols, c.n_terms


def _packed_round_trip(cols: dict, weight_fn, serializers=("dask", "pickle")):
    """(unpacked, sent, frames, expected) of counts column arrays packed as a term range's remote rows and
    sent as they travel between workers: the tuple through distributed's serialize (``serializers``,
    raising if none applies), its frames, and deserialize."""
    from distributed.protocol import deserialize, serialize

    from cutext.stages.text.ranges import _pack_rows, _PackedRows

    header, frames = serialize(_pack_rows(cols, weight_fn).astuple(), serializers=serializers, on_error="raise")
    sent = _PackedRows(*deserialize(header, frames))
    expected = {"term_id": cols["term_id"], "doc_id": cols["doc_id"], "tf": cols["tf"],
                "weight": weight_fn.weights(cols["term_id"], cols["tf"], cols["dl"])}
    return sent.unpack(), sent, frames, expected


@pytest.mark.parametrize("wide", [False, True])
def test_packed_remote_rows_unpack_to_the_weighted_rows(cacm, wide):
    """The rows a term range takes from another worker are weighted there and
    sent packed (term runs, int32 doc ids, uint16 tf); unpacked they are the rows and weights the range
    would have made, and ids or counts too large for the narrow types stay wide (``wide``: a doc id past
    2**31 and a tf of 70,000)."""
    from cutext.stages.text.bm25 import WeightPartition

    cols, n_terms = _counts_columns(cacm, 1, wide, lambda n: n // 2)
    weight_fn = WeightPartition(np.linspace(0.5, 3.0, n_terms + 1), 40.0, "lucene", 1.2, 0.75, 0.0)
    got, packed, _, want = _packed_round_trip(cols, weight_fn)
    from dask.sizeof import sizeof

    assert sizeof(packed.astuple()) >= sum(a.nbytes for a in packed.astuple())
    assert packed.doc_id.dtype == (np.int64 if wide else np.int32)
    assert packed.tf.dtype == (np.int32 if wide else np.uint16)
    assert len(packed.terms) < len(cols["term_id"]) // 2  # a partition's rows are term-sorted: few runs
    for k in ("term_id", "doc_id", "tf", "weight"):
        assert got[k].dtype == want[k].dtype, k
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


# ----------------------------------------------------------------------------- GPU frames

@pytest.mark.gpu
@pytest.mark.parametrize("wide", [False, True])
def test_packed_remote_rows_on_the_gpu_equal_the_cpu(cacm, wide):
    """The packed rows of a term range (cupy arrays: term runs by a search of their cumulative counts)
    equal the numpy twin's, weights included.  They serialize with distributed's ``cuda`` family alone,
    to device frames: what UCX sends device to device."""
    import cupy

    from cutext.stages.text.bm25 import WeightPartition

    cols, n_terms = _counts_columns(cacm, 0, wide, lambda n: n - 1)
    weight_fn = WeightPartition(np.linspace(0.5, 3.0, n_terms + 1), 40.0, "bm25+", 1.2, 0.75, 1.0)
    cpu, _, _, _ = _packed_round_trip(cols, weight_fn)
    gpu, packed, frames, _ = _packed_round_trip({k: cupy.asarray(v) for k, v in cols.items()}, weight_fn,
                                                serializers=("cuda",))
    assert frames and all(hasattr(f, "__cuda_array_interface__") for f in frames)
    assert isinstance(packed.doc_id, cupy.ndarray) and packed.tf.dtype == (np.int32 if wide else np.uint16)
    for k in ("term_id", "doc_id", "tf", "weight"):
        assert gpu[k].dtype == cpu[k].dtype, k
        np.testing.assert_array_equal(cupy.asnumpy(gpu[k]), cpu[k], err_msg=k)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["cudf", "dask_cudf"])
def test_bm25_from_cudf_frames_equals_the_cpu_file(cacm, cacm_parquet, tmp_path, kind):
    import cudf

    frame = cudf.from_pandas(cacm)
    if kind == "dask_cudf":
        import dask_cudf

        frame = dask_cudf.from_cudf(frame, npartitions=3)
    ref = pipelines.run("bm25", str(cacm_parquet), out=tmp_path / "cpu", backend="cpu", progress=False, **ANALYSIS)
    got = pipelines.run("bm25", frame, out=tmp_path / "gpu", backend="gpu", progress=False, **ANALYSIS)
    assert got.backend == "gpu"
    assert_same_index(read_index(ref.path), read_index(got.path))


@pytest.mark.gpu
def test_public_stages_on_dask_cudf_equal_the_cpu(cacm):
    import dask_cudf

    texts = dd.from_pandas(cacm.rename(columns={"contents": "text"}), npartitions=3, sort=False)
    gtexts = dask_cudf.from_cudf(__import__("cudf").from_pandas(cacm.rename(columns={"contents": "text"})), 3)
    out = []
    for t in (texts, gtexts):
        vocab, enc = stages.encode(stages.tokenize(t, **ANALYSIS))
        c = stages.count(enc)
        out.append((vocab.to_pylist(), c.df, c.lengths, stages.bm25(c).postings.compute()))
    (v1, df1, l1, p1), (v2, df2, l2, p2) = out
    assert v1 == v2
    np.testing.assert_array_equal(df1, df2)
    np.testing.assert_array_equal(l1, l2)
    p2 = p2.to_pandas().reset_index(drop=True)
    p1 = p1.reset_index(drop=True)
    for col in ("term_id", "doc_id", "tf"):
        np.testing.assert_array_equal(p1[col].to_numpy(), p2[col].to_numpy())
    np.testing.assert_allclose(p1["weight"].to_numpy(), p2["weight"].to_numpy(), rtol=1e-6)


@pytest.mark.gpu
def test_lda_and_cluster_from_a_dask_cudf_frame(cacm, cacm_parquet, tmp_path):
    import cudf
    import dask_cudf

    frame = dask_cudf.from_cudf(cudf.from_pandas(cacm), npartitions=2)
    for name, kw in (("lda", dict(K=4, iterations=2, seed=3)), ("cluster", dict(threshold=0.3))):
        a = pipelines.run(name, str(cacm_parquet), out=tmp_path / f"{name}-file", backend="gpu", progress=False, **kw)
        b = pipelines.run(name, frame, out=tmp_path / f"{name}-frame", backend="gpu", progress=False, **kw)
        _assert_same_tables(_read_dir(a.path), _read_dir(b.path))
