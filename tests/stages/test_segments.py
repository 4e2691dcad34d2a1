"""Tests of index segments (stages/engines/segments.py) on CACM.

The reference is a one-shot format-1 index of the whole of CACM (``pipelines.run("bm25", ..., index_format=1)``): the
same corpus counted in three partitions of consecutive documents, written as three segments and
merged, must give its vocabulary, df, N, avgdl, documents and every (term, doc, tf, weight) bit for bit.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cutext import stages
from cutext.stages.engines import segments as seg
from cutext.stages.runtime import checksums
from cutext.stages.runtime.artifacts import ArtifactError, ArtifactNotFoundError
from cutext.stages.text.bm25 import VARIANTS
from cutext.stages.text.tokenize import TokenizerConfig

from helpers import cacm_jsonl, fake_cudf, load_fake_cupy, read_index, saved_index

N_PARTS = 3


@pytest.fixture(scope="module")
def cacm(tmp_path_factory, data_dir):
    """The one-shot index of CACM, and CACM's counts in three partitions of consecutive documents."""
    root = tmp_path_factory.mktemp("segments")
    rows = [json.loads(line) for line in (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()]
    index = saved_index(cacm_jsonl(root, data_dir, len(rows)), root / "index", index_format=1)
    meta = json.loads((index / "index.json").read_text(encoding="utf-8"))
    texts = pd.DataFrame({"doc_id": np.arange(len(rows), dtype=np.int64),
                          "text": pd.Series([r["contents"] for r in rows], dtype=object)})
    with dask.config.set({"dataframe.convert-string": False, "scheduler": "sync"}):
        frame = dd.from_pandas(texts, npartitions=N_PARTS, sort=False)
        sizes = frame.map_partitions(len, meta=(None, "int64")).compute().to_numpy()
        tokens = stages.tokenize(frame, TokenizerConfig.from_dict(meta["tokenizer"]))
        vocab, encoded = stages.encode(tokens)
        counts = stages.count(encoded, n_docs=len(rows))
        parts = [counts.counts.partitions[i].compute() for i in range(N_PARTS)]
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    ids = np.array([r["id"] for r in rows], dtype=object)
    folders = []
    for i, part in enumerate(parts):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        folders.append(root / f"seg{i}")
        seg.write_segment(folders[-1], **seg.segments_from_counts(part, vocab, ids[lo:hi], lo, hi))
    return {"root": root, "index": index, "meta": meta, "reference": read_index(index), "vocab": vocab,
            "counts": counts, "parts": parts, "bounds": bounds, "ids": ids, "folders": folders}


@pytest.fixture(scope="module")
def merged(cacm):
    return seg.merge_segments(cacm["folders"])


def _postings(m: seg.MergedSegments) -> pd.DataFrame:
    return pd.DataFrame({"term_id": m.term_ids(), "doc_id": m.doc.astype(np.int64), "tf": m.tf})


# ----------------------------------------------------------------------------- against the one-shot build

class TestOneShotEquality:
    def test_vocabulary_df_n_avgdl(self, cacm, merged):
        ref, meta = cacm["reference"], cacm["meta"]
        assert merged.vocab.to_pylist() == ref["vocab"]["term"].tolist()
        assert merged.vocab.type == pa.large_string()
        np.testing.assert_array_equal(merged.df[1:], ref["vocab"]["df"].to_numpy())
        assert merged.df[0] == 0
        assert merged.n_docs == meta["N"] == len(cacm["ids"])
        assert merged.avgdl == meta["avgdl"]  # the same float64, not merely close
        np.testing.assert_array_equal(merged.doc_base, cacm["bounds"])

    def test_documents(self, cacm, merged):
        docs = cacm["reference"]["docs"]
        np.testing.assert_array_equal(merged.lengths, docs["length"].to_numpy())
        assert merged.source_ids.to_pylist() == docs["source_id"].astype(str).tolist() == list(cacm["ids"])

    def test_every_posting_and_weight_bit_for_bit(self, cacm, merged):
        meta, ref = cacm["meta"], cacm["reference"]
        w = seg.segment_weights(merged, variant=meta["variant"], k1=meta["k1"], b=meta["b"], delta=meta["delta"])
        post = ref["postings"]
        got = _postings(merged)
        for col in ("term_id", "doc_id", "tf"):
            np.testing.assert_array_equal(got[col].to_numpy(), post[col].to_numpy(), err_msg=col)
        assert w.weight.dtype == np.float32
        np.testing.assert_array_equal(w.weight, post["weight"].to_numpy())
        np.testing.assert_array_equal(w.idf[1:], ref["vocab"]["idf"].to_numpy())
        np.testing.assert_array_equal(w.w0[1:].astype(np.float32), ref["vocab"]["w0"].to_numpy())
        assert w.avgdl == meta["avgdl"]

    @pytest.mark.parametrize("variant", VARIANTS)
    def test_every_variant_equals_the_bm25_stage(self, cacm, merged, variant):
        # the public bm25 stage is what the format-1 build writes
        with dask.config.set({"dataframe.convert-string": False, "scheduler": "sync"}):
            ref = stages.bm25(cacm["counts"], variant=variant, k1=0.9, b=0.4)
            post = ref.postings.compute()
        w = seg.segment_weights(merged, variant=variant, k1=0.9, b=0.4, block=50_000)  # several blocks
        np.testing.assert_array_equal(merged.term_ids(), post["term_id"].to_numpy())
        np.testing.assert_array_equal(merged.doc, post["doc_id"].to_numpy())
        np.testing.assert_array_equal(w.weight, post["weight"].to_numpy())
        np.testing.assert_array_equal(w.w0, ref.w0)
        assert w.avgdl == ref.avgdl


    @pytest.mark.parametrize("block", [seg.DEVICE_MERGE_BLOCK, 997])
    @pytest.mark.parametrize("read", ["host", "device"])
    def test_device_merge_places_every_posting_as_the_host(self, cacm, merged, monkeypatch, block, read):
        """merge_segments(device=True) on CPU stand-ins of CuPy and cudf (several blocks a segment with 997),
        of segments read with their postings (copied up) or without (decoded from the files on the device):
        the device CSR holds the host's postings slot for slot, and the terms and documents are the host's."""
        fake = load_fake_cupy()
        monkeypatch.setitem(sys.modules, "cupy", fake.make(None))
        monkeypatch.setitem(sys.modules, "cudf", fake_cudf())
        monkeypatch.setattr(seg, "DEVICE_MERGE_BLOCK", block)
        given = cacm["folders"] if read == "device" else [seg.read_segment(f) for f in cacm["folders"]]
        dev = seg.merge_segments(given, device=True)
        assert isinstance(dev.doc, fake.ndarray) and isinstance(dev.tf, fake.ndarray)
        assert dev.doc.dtype == merged.doc.dtype and dev.tf.dtype == np.int32
        np.testing.assert_array_equal(dev.indptr, merged.indptr)
        np.testing.assert_array_equal(np.asarray(dev.doc), merged.doc)
        np.testing.assert_array_equal(np.asarray(dev.tf), merged.tf)
        np.testing.assert_array_equal(dev.lengths, merged.lengths)
        assert dev.vocab.equals(merged.vocab) and dev.source_ids.equals(merged.source_ids)


    def test_a_device_read_refuses_a_damaged_postings_file_naming_it(self, cacm, tmp_path, monkeypatch):
        fake = load_fake_cupy()
        monkeypatch.setitem(sys.modules, "cupy", fake.make(None))
        monkeypatch.setitem(sys.modules, "cudf", fake_cudf())
        s = seg.read_segment(cacm["folders"][0], postings=False)
        good = seg.read_postings_device(s.path, s.n_postings, s.n_docs, s.offsets)
        np.testing.assert_array_equal(np.asarray(good[0]), seg.read_segment(s.path).doc)
        table = pq.read_table(s.path / seg.POSTINGS)
        for what, col, value in [("doc numbers must be in", "doc", s.n_docs), ("tf must be in", "tf", 0),
                                 ("not strictly ascending", "doc", None)]:
            f = tmp_path / what.replace(" ", "_")
            shutil.copytree(s.path, f)
            vals = table.column(col).to_numpy().copy()
            if value is None:  # a term's second posting repeats its first
                o = s.offsets[np.flatnonzero(s.df > 1)[0]]
                vals[o + 1] = vals[o]
            else:
                vals[-1] = value
            pq.write_table(table.set_column(table.schema.get_field_index(col), col, pa.array(vals, pa.int32())),
                           f / seg.POSTINGS)
            with pytest.raises(ArtifactError, match=what) as exc:
                seg.read_postings_device(f, s.n_postings, s.n_docs, s.offsets)
            assert str(f / seg.POSTINGS) in str(exc.value)
        with pytest.raises(ArtifactError, match="and df record 100"):
            seg.read_postings_device(s.path, 100, s.n_docs, s.offsets)


# ----------------------------------------------------------------------------- the files

class TestFiles:
    def test_round_trip_is_exact(self, cacm):
        part, lo, hi = cacm["parts"][1], int(cacm["bounds"][1]), int(cacm["bounds"][2])
        want = seg.segments_from_counts(part, cacm["vocab"], cacm["ids"][lo:hi], lo, hi)
        s = seg.read_segment(cacm["folders"][1])
        assert s.terms.type == pa.large_string() and s.terms.equals(want["terms"])
        assert s.source_ids.type == pa.string() and s.source_ids.to_pylist() == list(want["source_ids"])
        for name in ("df", "doc", "tf", "lengths"):
            np.testing.assert_array_equal(getattr(s, name), want[name], err_msg=name)
        assert (s.doc.dtype, s.tf.dtype, s.lengths.dtype, s.df.dtype) == (np.int32, np.int32, np.int32, np.int64)
        assert (s.n_docs, s.n_terms, s.n_postings) == (hi - lo, len(want["df"]), len(want["doc"]))
        assert s.meta["sum_dl"] == s.sum_dl == int(part.drop_duplicates("doc_id")["dl"].sum())
        # term j's postings are doc[offsets[j]:offsets[j + 1]]; the local order is the global id order
        j = s.n_terms // 2
        term_id = pa.compute.index_in(s.terms[j:j + 1], cacm["vocab"]).to_numpy()[0] + 1
        rows = part[part["term_id"] == term_id]
        np.testing.assert_array_equal(s.doc[s.offsets[j]:s.offsets[j + 1]], rows["doc_id"].to_numpy() - lo)

    def test_layout_and_no_temporary_files(self, cacm):
        folder = cacm["folders"][0]
        assert sorted(os.listdir(folder)) == ["docs.parquet", "postings.parquet", "segment.json", "terms.parquet"]
        meta = json.loads((folder / "segment.json").read_text())
        assert meta["kind"] == "cutext.segment" and meta["format"] == 1
        assert set(meta["files"]) == {"docs.parquet", "postings.parquet", "terms.parquet"}
        for name, rec in meta["files"].items():
            assert rec["bytes"] == os.path.getsize(folder / name)
        schema = pq.read_schema(folder / "postings.parquet")
        assert schema.names == ["doc", "tf"]
        col = pq.ParquetFile(folder / "postings.parquet").metadata.row_group(0).column(0)
        assert "DELTA_BINARY_PACKED" in col.encodings and col.compression == "ZSTD"

    def test_bytes_per_posting_on_cacm(self, cacm, tmp_path):
        # the whole of CACM as one segment, and the three segments
        full = pd.concat(cacm["parts"], ignore_index=True)
        N = len(cacm["ids"])
        seg.write_segment(tmp_path / "all", **seg.segments_from_counts(full, cacm["vocab"], cacm["ids"], 0, N))
        t0 = time.perf_counter()
        s = seg.read_segment(tmp_path / "all", verify=False)
        read_s = time.perf_counter() - t0
        one = seg.postings_bytes(tmp_path / "all")
        three = [seg.postings_bytes(f) for f in cacm["folders"]]
        per3 = sum(x["files"]["postings.parquet"] for x in three) / sum(x["n_postings"] for x in three)
        print(f"\nCACM {s.n_postings:,} postings: one segment {one['bytes_per_posting']:.3f} bytes/posting "
              f"(all files {one['total_bytes_per_posting']:.3f}), three segments {per3:.3f}; "
              f"read {read_s * 1e3:.1f} ms")
        assert one["bytes_per_posting"] <= 2.0
        assert per3 <= 2.0


# ----------------------------------------------------------------------------- merging

class TestMerge:
    def test_disjoint_vocabularies(self, cacm, tmp_path):
        # segment 0 keeps the even term ids, segment 1 the odd ones: every term lives in one segment
        p0, p1 = cacm["parts"][0], cacm["parts"][1]
        b = cacm["bounds"]
        a = p0[p0["term_id"] % 2 == 0]
        c = p1[p1["term_id"] % 2 == 1]
        lengths = [np.zeros(int(b[i + 1] - b[i]), np.int32) for i in (0, 1)]
        for L, p, lo in ((lengths[0], p0, b[0]), (lengths[1], p1, b[1])):
            L[p["doc_id"].to_numpy() - lo] = p["dl"].to_numpy()
        for i, part in enumerate((a, c)):
            lo, hi = int(b[i]), int(b[i + 1])
            seg.write_segment(tmp_path / f"s{i}", **seg.segments_from_counts(
                part, cacm["vocab"], cacm["ids"][lo:hi], lo, hi, lengths=lengths[i]))
        m = seg.merge_segments([tmp_path / "s0", tmp_path / "s1"])
        both = pd.concat([a, c]).sort_values(["term_id", "doc_id"], ignore_index=True)
        present = np.unique(both["term_id"].to_numpy())
        assert m.vocab.to_pylist() == cacm["vocab"].take(pa.array(present - 1)).to_pylist()
        local = np.searchsorted(present, both["term_id"].to_numpy()) + 1  # ids in the merged vocabulary
        got = _postings(m)
        np.testing.assert_array_equal(got["term_id"].to_numpy(), local)
        np.testing.assert_array_equal(got["doc_id"].to_numpy(), both["doc_id"].to_numpy())
        np.testing.assert_array_equal(got["tf"].to_numpy(), both["tf"].to_numpy())
        np.testing.assert_array_equal(m.df[1:], np.bincount(local)[1:])
        assert m.terms.sum_dl == int(lengths[0].sum() + lengths[1].sum())

    def test_empty_segments(self, cacm, merged, tmp_path):
        # no documents, and two documents without a token, between the real segments
        none = seg.segments_from_counts(cacm["parts"][0].iloc[:0], cacm["vocab"], [], 0, 0)
        blank = seg.segments_from_counts(cacm["parts"][0].iloc[:0], cacm["vocab"], ["blank-1", "blank-2"], 0, 2)
        seg.write_segment(tmp_path / "none", **none)
        seg.write_segment(tmp_path / "blank", **blank)
        assert seg.read_segment(tmp_path / "none").n_docs == 0
        assert seg.read_segment(tmp_path / "blank").lengths.tolist() == [0, 0]
        f = cacm["folders"]
        m = seg.merge_segments([tmp_path / "none", f[0], tmp_path / "blank", f[1], tmp_path / "none", f[2]])
        b = cacm["bounds"]
        np.testing.assert_array_equal(m.doc_base, [0, 0, b[1], b[1] + 2, b[2] + 2, b[2] + 2, b[3] + 2])
        assert m.vocab.equals(merged.vocab)
        np.testing.assert_array_equal(m.df, merged.df)
        np.testing.assert_array_equal(m.indptr, merged.indptr)
        np.testing.assert_array_equal(m.tf, merged.tf)
        shift = np.where(merged.doc >= b[1], 2, 0)
        np.testing.assert_array_equal(m.doc, merged.doc + shift)
        np.testing.assert_array_equal(m.lengths, np.insert(merged.lengths, b[1], [0, 0]))
        assert m.source_ids.to_pylist()[b[1]:b[1] + 2] == ["blank-1", "blank-2"]
        assert m.terms.sum_dl == merged.terms.sum_dl and m.n_docs == merged.n_docs + 2
        w = seg.segment_weights(m)  # N counts the blank documents, avgdl falls
        assert w.avgdl == merged.terms.sum_dl / (merged.n_docs + 2)

        only_empty = seg.merge_segments([tmp_path / "none", tmp_path / "blank"])
        assert len(only_empty.vocab) == 0 and only_empty.n_docs == 2 and len(only_empty.doc) == 0
        np.testing.assert_array_equal(only_empty.indptr, [0, 0])
        with pytest.raises(ValueError, match="no document has a token"):
            seg.segment_weights(only_empty)
        assert seg.merge_segments([]).n_docs == 0

    def test_segments_from_counts_sorts_shuffled_rows_and_drops_unknown_terms(self, cacm):
        part, lo, hi = cacm["parts"][2], int(cacm["bounds"][2]), int(cacm["bounds"][3])
        want = seg.segments_from_counts(part, cacm["vocab"], cacm["ids"][lo:hi], lo, hi)
        unknown = part.iloc[:3].assign(term_id=np.int32(0))  # term id 0 has no string: never searchable
        shuffled = pd.concat([part, unknown]).sample(frac=1.0, random_state=3)
        got = seg.segments_from_counts(shuffled, cacm["vocab"], cacm["ids"][lo:hi], lo, hi)
        assert got["terms"].equals(want["terms"])
        for name in ("df", "doc", "tf", "lengths"):
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)

    def test_segments_from_counts_refuses_rows_outside_the_range(self, cacm):
        part, lo, hi = cacm["parts"][1], int(cacm["bounds"][1]), int(cacm["bounds"][2])
        with pytest.raises(ValueError, match="doc_id must be in"):
            seg.segments_from_counts(part, cacm["vocab"], cacm["ids"][lo:hi], lo + 1, hi)
        with pytest.raises(ValueError, match="repeat"):
            seg.segments_from_counts(pd.concat([part, part.iloc[:1]]), cacm["vocab"], cacm["ids"][lo:hi], lo, hi)


# ----------------------------------------------------------------------------- damaged and invalid segments

def _copy(src, tmp_path):
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    return dst


class TestDamage:
    def test_edited_byte_names_the_file(self, cacm, tmp_path):
        d = _copy(cacm["folders"][0], tmp_path)
        f = d / "postings.parquet"
        raw = bytearray(f.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        f.write_bytes(bytes(raw))
        with pytest.raises(ArtifactError, match=r"postings\.parquet.*CRC32"):
            seg.read_segment(d)

    def test_truncated_file_names_the_file(self, cacm, tmp_path):
        d = _copy(cacm["folders"][0], tmp_path)
        f = d / "terms.parquet"
        f.write_bytes(f.read_bytes()[:-100])
        with pytest.raises(ArtifactError, match=r"terms\.parquet.*truncated"):
            seg.read_segment(d)
        with pytest.raises(ArtifactError, match=r"terms\.parquet: unreadable"):  # pyarrow's own error
            seg.read_segment(d, verify=False)

    def test_missing_files(self, cacm, tmp_path):
        d = _copy(cacm["folders"][0], tmp_path)
        (d / "docs.parquet").unlink()
        with pytest.raises(ArtifactNotFoundError, match=r"docs\.parquet"):
            seg.read_segment(d)
        (d / "segment.json").unlink()
        with pytest.raises(ArtifactNotFoundError, match="not a cutext segment"):
            seg.read_segment(d)

    def test_resealed_postings_out_of_order(self, cacm, tmp_path):
        # a consistent checksum does not make bad values pass: the value checks still run
        d = _copy(cacm["folders"][0], tmp_path)
        t = pq.read_table(d / "postings.parquet")
        doc = t.column("doc").to_numpy().copy()
        df = pq.read_table(d / "terms.parquet").column("df").to_numpy()
        j = int(np.argmax(df >= 2))  # swap the first two postings of a term
        a = int(df[:j].sum())
        doc[a], doc[a + 1] = doc[a + 1], doc[a]
        pq.write_table(pa.table({"doc": pa.array(doc), "tf": t.column("tf")}), d / "postings.parquet")
        checksums.seal(d, "segment.json")
        with pytest.raises(ArtifactError, match=r"postings\.parquet: doc numbers are not strictly ascending"):
            seg.read_segment(d)


class TestWriteRefuses:
    @staticmethod
    def _small(cacm):
        part, lo, hi = cacm["parts"][0], int(cacm["bounds"][0]), int(cacm["bounds"][1])
        return seg.segments_from_counts(part, cacm["vocab"], cacm["ids"][lo:hi], lo, hi)

    @pytest.mark.parametrize("edit, match", [
        (lambda a: a.update(terms=a["terms"].take(pa.array(np.r_[1, 0, 2:len(a["terms"])]))), "strictly ascending"),
        (lambda a: a.update(df=a["df"] + 1), "df sums to"),
        (lambda a: a.update(doc=a["doc"][::-1].copy()), "ascending within each term"),
        (lambda a: a.update(tf=a["tf"] - 1), "tf must be in"),
        (lambda a: a.update(lengths=a["lengths"] // 2), "has tf summing to"),
        (lambda a: a.update(source_ids=a["source_ids"][:-1]), "shapes disagree"),
    ])
    def test_bad_arrays(self, cacm, tmp_path, edit, match):
        args = self._small(cacm)
        edit(args)
        with pytest.raises(ValueError, match=match):
            seg.write_segment(tmp_path / "s", **args)
        assert not (tmp_path / "s").exists()

    def test_a_segment_is_written_once(self, cacm, tmp_path):
        seg.write_segment(tmp_path / "s", **self._small(cacm))
        with pytest.raises(FileExistsError, match="written once"):
            seg.write_segment(tmp_path / "s", **self._small(cacm))


@pytest.mark.gpu
def test_device_inputs_write_the_same_segment(cacm, tmp_path):
    import cudf

    part, lo, hi = cacm["parts"][0], int(cacm["bounds"][0]), int(cacm["bounds"][1])
    host = seg.segments_from_counts(part, cacm["vocab"], cacm["ids"][lo:hi], lo, hi)
    dev = seg.segments_from_counts(cudf.from_pandas(part), cacm["vocab"], cacm["ids"][lo:hi], lo, hi)
    seg.write_segment(tmp_path / "s", **dev)
    s = seg.read_segment(tmp_path / "s")
    assert s.terms.equals(host["terms"])
    for name in ("df", "doc", "tf", "lengths"):
        np.testing.assert_array_equal(getattr(s, name), host[name], err_msg=name)


def test_deleted_postings_count_the_deleted_documents_terms_and_refuse_a_doc_outside(cacm, tmp_path):
    """A deletion's partial read (the doc column, the terms, the lengths) gives each term the deleted
    documents hold, counted as the whole segment's postings count them; a doc number beyond the segment's
    documents in the file is refused naming it."""
    args = TestWriteRefuses._small(cacm)
    seg.write_segment(tmp_path / "s", **args)
    full = seg.read_segment(tmp_path / "s")
    gone = np.array([0, 3, full.n_docs - 1])
    terms, counts, lengths = seg.deleted_postings(tmp_path / "s", gone)
    term_of = np.repeat(np.arange(full.n_terms), full.df)
    held = np.isin(full.doc, gone)
    want, n = np.unique(term_of[held], return_counts=True)
    assert terms.to_pylist() == full.terms.take(pa.array(want)).to_pylist()
    np.testing.assert_array_equal(counts, n)
    np.testing.assert_array_equal(lengths, full.lengths[gone])
    f = tmp_path / "s" / "postings.parquet"
    table = pq.read_table(f)
    doc = table.column("doc").to_numpy().copy()
    doc[-1] = full.n_docs
    pq.write_table(table.set_column(0, "doc", pa.array(doc, pa.int32())), f)
    with pytest.raises(ArtifactError, match=r"postings\.parquet: doc numbers outside"):
        seg.deleted_postings(tmp_path / "s", gone)
