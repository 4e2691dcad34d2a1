"""Phrase and proximity queries: ``positions=True`` stores term positions, ``search('"a b"~N c')`` matches
equal a brute-force scan of the token streams on CACM (phrases of 2-4 tokens taken from the documents, and
phrases that match nothing; slop 0, 1, 3), the scores are the BM25 of the query's terms, the user's filter
intersects; positions kept by append, delete and compaction equal to a one-shot build; the CLI flag; the
errors."""
from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cutext import pipelines
from cutext.pipelines.__main__ import main
from cutext.stages.engines.bm25_index import BM25Index
from cutext.stages.text.tokenize import TokenizerConfig, map_terms, split_tokens

KW = dict(backend="cpu", scheduler="sync", progress=False)
TOK = dict(stopwords="english")  # stopwords leave position gaps: the phrases below cross them


def _cacm(data_dir) -> pd.DataFrame:
    recs = [json.loads(x) for x in (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()]
    return pd.DataFrame({"id": [r["id"] for r in recs], "text": [r["contents"] for r in recs]})


def _streams(texts, cfg: TokenizerConfig) -> list:
    """Brute force's token streams: per document ``{term: [positions]}``, a position counting every split token
    (a dropped one leaves a gap), from the tokenizer's own split and term map."""
    s = pd.Series(pd.arrays.ArrowStringArray(pa.array(list(texts), pa.string())))
    raw, doc = split_tokens(s, np.arange(len(s), dtype=np.int64), cfg.lowercase)
    raw = list(raw)
    uniq = sorted(set(raw))
    mapped = dict(zip(uniq, map_terms(uniq, cfg)))
    out = [dict() for _ in range(len(s))]
    doc = np.asarray(doc)
    first = np.searchsorted(doc, doc)
    for i, (t, d) in enumerate(zip(raw, doc)):
        m = mapped[t]
        if m is not None:
            out[d].setdefault(m, []).append(i - int(first[i]))
    return out


def _analysed(phrase: str, cfg: TokenizerConfig) -> list:
    """(term, offset) of a phrase's kept tokens, offsets from its first kept token."""
    stream = _streams([phrase], cfg)[0]
    pairs = sorted((p, t) for t, ps in stream.items() for p in ps)
    return [(t, p - pairs[0][0]) for p, t in pairs]


def _brute(streams, phrase, slop, cfg) -> set:
    """Documents where some choice of distinct occurrences has max - min of (position - offset) <= slop."""
    terms = _analysed(phrase, cfg)
    out = set()
    if not terms:  # every word dropped: no term to score, so no document
        return out
    for d, st in enumerate(streams):
        if not all(t in st for t, _ in terms):
            continue
        for choice in itertools.product(*[st[t] for t, _ in terms]):
            if len(terms) != len({(t, p) for (t, _), p in zip(terms, choice)}):
                continue  # a repeated term takes distinct occurrences
            adj = [p - q for (_, q), p in zip(terms, choice)]
            if max(adj) - min(adj) <= slop:
                out.add(d)
                break
    return out


def _phrases(df, cfg, n: int, seed: int) -> list:
    """Phrases taken from the documents (2-4 consecutive words of the text, stopwords included), plus
    phrases that match nothing (their words shuffled, words of two documents)."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        words = df.text[int(rng.integers(len(df)))].split()
        if len(words) < 6:
            continue
        m = int(rng.integers(2, 5))
        a = int(rng.integers(0, len(words) - m))
        window = " ".join(words[a:a + m])
        if len(_analysed(window, cfg)) >= 2:
            out.append(window)
    other = [df.text[int(rng.integers(len(df)))].split()[:1][0] + " " + out[i].split()[-1] for i in range(5)]
    return out + [" ".join(reversed(p.split())) for p in out[:8]] + other + ["zzzunknown retrieval"]


@pytest.fixture(scope="module")
def cacm(data_dir, tmp_path_factory):
    """(index in two segments, frame, token streams, tokenizer config)."""
    df = _cacm(data_dir)
    folder = tmp_path_factory.mktemp("phrases")
    (folder / "in").mkdir()
    half = len(df) // 2
    pq.write_table(pa.Table.from_pandas(df.iloc[:half], preserve_index=False), folder / "in" / "a.parquet")
    pq.write_table(pa.Table.from_pandas(df.iloc[half:], preserve_index=False), folder / "in" / "b.parquet")
    r = pipelines.run("bm25", folder / "in", out=folder / "ix", positions=True, id_column="id", **TOK, **KW)
    index = BM25Index.load(r.path, backend="cpu")
    cfg = index.tokenizer
    return index, df, _streams(df.text, cfg), cfg


@pytest.mark.parametrize("slop", [0, 1, 3])
def test_phrases_equal_a_brute_force_scan(cacm, slop):
    index, df, streams, cfg = cacm
    phrases = _phrases(df, cfg, 40, seed=slop)
    queries = [f'"{p}"~{slop}' if slop else f'"{p}"' for p in phrases]
    got = index.search(queries, k=index.n_docs, engine="cpu")
    sparse = index.search(queries, k=index.n_docs, engine="sparse")
    pd.testing.assert_frame_equal(got, sparse)
    matched = 0
    for i, p in enumerate(phrases):
        want = _brute(streams, p, slop, cfg)
        have = set(got.doc_id[got.query_id == str(i)])
        assert have == want, (p, slop, sorted(want ^ have)[:5])
        matched += bool(want)
    assert matched >= 40  # the phrases taken from the documents match at least their own


def test_scores_are_the_bm25_of_the_terms(cacm):
    index, _, streams, cfg = cacm
    q = '"operating system" design'
    got = index.search(q, k=index.n_docs)
    scores = index.get_scores("operating system design")
    want = _brute(streams, "operating system", 0, cfg)
    assert set(got.doc_id) == want
    np.testing.assert_allclose(got.score, scores[got.doc_id], rtol=1e-6)
    assert (np.diff(got.score) <= 0).all()
    top = index.search(q, k=5)  # ranked among the matching documents only
    assert top.doc_id.tolist() == got.doc_id[:5].tolist()


def test_a_batch_mixes_phrases_and_plain_queries(cacm):
    index = cacm[0]
    qs = ["parallel sorting algorithms", '"sorting algorithms"~1 parallel', "computer graphics"]
    got = index.search(qs, k=20)
    for i, q in enumerate(qs):
        alone = index.search([q], k=20)
        part = got[got.query_id == str(i)].reset_index(drop=True)
        pd.testing.assert_frame_equal(part.drop(columns="query_id"), alone.drop(columns="query_id"))
    plain = index.search(qs[0], k=20)
    pd.testing.assert_frame_equal(got[got.query_id == "0"].reset_index(drop=True), plain)


def test_two_phrases_and_a_user_filter_intersect(cacm):
    index, df, streams, cfg = cacm
    a, b = _brute(streams, "programming language", 0, cfg), _brute(streams, "compiler", 0, cfg)
    got = index.search('"programming language" "compiler"', k=index.n_docs)
    assert set(got.doc_id) == a & b and len(a & b)
    mask = np.arange(index.n_docs) % 2 == 0
    got = index.search('"programming language" systems', k=index.n_docs, filter=mask)
    assert set(got.doc_id) == {d for d in a if mask[d]}
    ids = [list(df.id[sorted(a)][:5]) + ["CACM-0001"]]
    got = index.search(['"programming language"'], k=100, filter=ids)
    assert set(got.source_id) == set(ids[0][:5])


def test_empty_and_one_word_phrases(cacm):
    index, _, streams, _ = cacm
    assert set(index.search('"the"', k=index.n_docs).doc_id) == set()  # no term left: an empty query
    one = index.search('"compiler"~3', k=index.n_docs)
    assert set(one.doc_id) == {d for d, st in enumerate(streams) if "compiler" in st}
    stop = index.search('"of the" compiler', k=index.n_docs)  # an empty phrase constrains nothing
    pd.testing.assert_frame_equal(stop, index.search("compiler", k=index.n_docs))


def test_repeated_terms_take_distinct_occurrences(tmp_path):
    texts = ["a b a", "a a", "a x y a", "a b", "b a c a a"]
    df = pd.DataFrame({"id": [f"d{i}" for i in range(len(texts))], "text": texts})
    index = BM25Index.load(pipelines.run("bm25", df, out=tmp_path / "ix", id_column="id", positions=True,
                                         **KW).path, backend="cpu")
    cfg = index.tokenizer
    streams = _streams(texts, cfg)
    for phrase in ["a a", "a b a", "a a a", "b a", "a b"]:
        for slop in range(5):
            got = set(index.search(f'"{phrase}"~{slop}', k=10).doc_id)
            assert got == _brute(streams, phrase, slop, cfg), (phrase, slop)
    assert set(index.search('"a a"', k=10).source_id) == {"d1", "d4"}
    assert set(index.search('"a a"~1', k=10).source_id) == {"d0", "d1", "d4"}


def test_a_slop_past_lucenes_int_is_refused_naming_the_query(tmp_path):
    """Lucene's slop is an int: a slop up to 2**31 - 1 matches the words anywhere in a document, one above it
    (or of thousands of digits) is a ValueError naming the query, never a numba typing error."""
    from cutext.stages.engines.phrases import MAX_SLOP

    texts = ["alpha x y z beta", "beta alpha", "alpha"]
    df = pd.DataFrame({"id": ["d0", "d1", "d2"], "text": texts})
    index = BM25Index.load(pipelines.run("bm25", df, out=tmp_path / "ix", id_column="id", positions=True,
                                         **KW).path, backend="cpu")
    assert MAX_SLOP == 2**31 - 1
    assert set(index.search(f'"alpha beta"~{MAX_SLOP}', k=10).source_id) == {"d0", "d1"}
    assert set(index.search(f'"alpha beta"~000{MAX_SLOP}', k=10).source_id) == {"d0", "d1"}  # zeros in front
    for slop in (str(MAX_SLOP + 1), "99999999999999999999999", "9" * 5000):
        with pytest.raises(ValueError, match=r"^query '.*': slop ~\d+(\.\.\.)? is past 2,147,483,647 "
                                             r"\(2\*\*31 - 1, Lucene's bound"):
            index.search(["alpha", f'"alpha beta"~{slop}'])


def _positions_of(index: BM25Index):
    index.search('"a b"', k=1)  # reads the positions
    px = index._phrase_index
    return px.indptr, px.doc, px.starts, px.pos


def test_append_delete_compact_keep_positions(tmp_path, data_dir):
    df = _cacm(data_dir).iloc[:1200].reset_index(drop=True)
    a, b = df.iloc[:700], df.iloc[700:]
    kw = dict(id_column="id", positions=True, **TOK, **KW)
    ix = pipelines.run("bm25", a, out=tmp_path / "ix", **kw).path
    pipelines.run("bm25", b, out=ix, append=True, id_column="id", **KW)
    index = BM25Index.load(ix, backend="cpu")
    one = BM25Index.load(pipelines.run("bm25", df, out=tmp_path / "one", **kw).path, backend="cpu")
    for x, y in zip(_positions_of(index), _positions_of(one)):
        np.testing.assert_array_equal(x, y)
    qs = ['"computer programs"~2', '"data structures"', '"language for"~3 list']
    pd.testing.assert_frame_equal(index.search(qs, k=50), one.search(qs, k=50))
    gone = list(df.id[::9])
    index.delete(gone)
    live = df[~df.id.isin(gone)].reset_index(drop=True)
    rest = BM25Index.load(pipelines.run("bm25", live, out=tmp_path / "rest", **kw).path, backend="cpu")
    for x, y in zip(_positions_of(index), _positions_of(rest)):
        np.testing.assert_array_equal(x, y)
    before = index.search(qs, k=50)
    pd.testing.assert_frame_equal(before, rest.search(qs, k=50))
    assert index.compact() == 2
    assert index.positions and json.loads((ix / "index.json").read_text())["positions"] is True
    for x, y in zip(_positions_of(index), _positions_of(rest)):
        np.testing.assert_array_equal(x, y)
    pd.testing.assert_frame_equal(index.search(qs, k=50), before)
    seg = json.loads(next((ix / "segments").glob("*/segment.json")).read_text())
    assert seg["positions"] is True and "positions.parquet" in seg["files"] and seg["texts"] is False


def test_store_text_and_positions_together(tmp_path, data_dir):
    df = _cacm(data_dir).iloc[:300]
    r = pipelines.run("bm25", df, out=tmp_path / "ix", id_column="id", positions=True, store_text=True, **KW)
    index = BM25Index.load(r.path, backend="cpu")
    assert index.store_text and index.positions
    got = index.search('"computer"', k=3, with_text=True)
    assert got.text.str.lower().str.contains("computer").all()


def test_cli_flag(tmp_path):
    src = tmp_path / "docs.jsonl"
    src.write_text("\n".join(json.dumps({"id": f"d{i}", "text": t}) for i, t in
                             enumerate(["new york city", "york new city", "the city of new york"])) + "\n")
    assert main(["bm25", str(src), "--out", str(tmp_path / "ix"), "--positions", "--backend", "cpu",
                 "--scheduler", "sync", "--no-progress"]) == 0
    index = BM25Index.load(tmp_path / "ix", backend="cpu")
    assert index.positions
    assert set(index.search('"new york"', k=3).source_id) == {"d0", "d2"}
    assert set(index.search('"new york"~2', k=3).source_id) == {"d0", "d1", "d2"}
    assert set(index.search('"new york"~1', k=3).source_id) == {"d0", "d2"}  # a swap needs slop 2
    assert main(["bm25", str(src), "--out", str(tmp_path / "no"), "--backend", "cpu", "--scheduler", "sync",
                 "--no-progress"]) == 0
    assert not BM25Index.load(tmp_path / "no", backend="cpu").positions


def test_errors(tmp_path, data_dir, cacm):
    index = cacm[0]
    for q, msg in [('"a b', "unbalanced quote"), ('x "a b" "c', "unbalanced quote"),
                   ('"a b"~', r"bad proximity '~'"), ('"a b"~-1', "bad proximity '~-1'"),
                   ('"a b"~1.5', r"bad proximity '~1.5'"), ('"a b"~x', "bad proximity '~x'")]:
        with pytest.raises(ValueError, match=msg):
            index.search(["fine", q])
    src = data_dir / "cacm" / "cacm.json"
    plain = BM25Index.load(pipelines.run("bm25", src, out=tmp_path / "plain", **KW).path, backend="cpu")
    with pytest.raises(ValueError, match=r"stores no term positions.*positions=True.*--positions"):
        plain.search('"information retrieval"', phrases=True)
    # by default quotes are phrases only where the index stores positions (CACM's topics quote titles)
    pd.testing.assert_frame_equal(plain.search('"information retrieval"~2', k=5),
                                  plain.search("information retrieval 2", k=5))
    with pytest.raises(ValueError, match="phrases must be True, False or None"):
        plain.search("x", phrases=1)
    pd.testing.assert_frame_equal(index.search('"a b"~x', k=5, phrases=False), index.search("a b x", k=5))
    with pytest.raises(ValueError, match="positions=True stores term positions beside the segments.*index_format=2"):
        pipelines.run("bm25", src, out=tmp_path / "f1", index_format=1, positions=True, **KW)
    f1 = BM25Index.load(pipelines.run("bm25", src, out=tmp_path / "f1", index_format=1, **KW).path, backend="cpu")
    with pytest.raises(ValueError, match="positions=True"):
        f1.search('"information retrieval"', phrases=True)
    with pytest.raises(ValueError, match="positions=True is not available with BM25F fields"):
        pipelines.run("bm25", data_dir / "scifact" / "corpus.jsonl.gz", out=tmp_path / "f", positions=True,
                      text_column=["title", "text"], field_weights={"title": 2.0}, **KW)
    with pytest.raises(ValueError, match="positions must be True or False"):
        pipelines.run("bm25", src, out=tmp_path / "g", positions="yes", **KW)
    with pytest.raises(ValueError, match="positions"):  # an append cannot turn positions on
        pipelines.run("bm25", src, out=tmp_path / "plain", append=True, positions=True, **KW)


def test_client_build_stores_the_positions_of_an_in_process_build(tmp_path, data_dir):
    """A Client and files: each worker writes its share's segments with their texts; the positions stage reads
    them from the shared output, giving the in-process build's positions."""
    from distributed import Client, LocalCluster

    df = _cacm(data_dir)
    (tmp_path / "in").mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(df)), 4)):
        pq.write_table(pa.Table.from_pandas(df.iloc[part], preserve_index=False), tmp_path / "in" / f"{i}.parquet")
    kw = dict(positions=True, id_column="id", text_column="text", backend="cpu", progress=False, **TOK)
    one = BM25Index.load(pipelines.run("bm25", tmp_path / "in", out=tmp_path / "one", scheduler="sync", **kw).path,
                         backend="cpu")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        two = BM25Index.load(pipelines.run("bm25", tmp_path / "in", out=tmp_path / "two", client=client, **kw).path,
                             backend="cpu")
    for x, y in zip(_positions_of(two), _positions_of(one)):
        np.testing.assert_array_equal(x, y)
    assert not list((tmp_path / "two" / "segments").glob("*/text.parquet"))  # the texts went again


def test_a_damaged_positions_file_is_refused(tmp_path):
    from cutext.stages.runtime.artifacts import ArtifactError

    df = pd.DataFrame({"id": ["a", "b"], "text": ["new york city", "york new city"]})
    ix = pipelines.run("bm25", df, out=tmp_path / "ix", id_column="id", positions=True, **KW).path
    f = next((ix / "segments").glob("*/positions.parquet"))
    raw = bytearray(f.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    f.write_bytes(bytes(raw))
    with pytest.raises(ArtifactError, match="positions.parquet"):
        BM25Index.load(ix, backend="cpu")
