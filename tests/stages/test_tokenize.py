"""Unit tests of the tokenize stage (stages/text/tokenize.py) through ``tokenize_partition``.

The expected tokens come from a plain-Python reading of the rules in the module docstring
(``unicodedata.normalize``, ``str.lower``, ``unicodedata.category``, PyStemmer called directly), never
from the stage itself.
"""
from __future__ import annotations

import unicodedata

import numpy as np
import pandas as pd
import pytest

from cutext.stages.text.tokenize import LUCENE_STOPWORDS, TokenizerConfig, map_terms, tokenize_partition

from helpers import need_data


def _docs(texts, ids=None) -> pd.DataFrame:
    ids = np.arange(len(texts), dtype=np.int64) if ids is None else np.asarray(ids, dtype=np.int64)
    return pd.DataFrame({"doc_id": ids, "text": pd.Series(list(texts), dtype=object)})


def _by_doc(out: pd.DataFrame) -> dict[int, list[str]]:
    got: dict[int, list[str]] = {}
    for d, t in zip(out["doc_id"].tolist(), out["token"].tolist()):
        got.setdefault(d, []).append(t)
    return got


def _split_rule(text: str, lowercase: bool = True) -> list[str]:
    """Rules 1-3 read literally: NFC; lowercase (final sigma folded), NFC; maximal runs of letters,
    numbers and connector punctuation with the marks that follow them."""
    text = unicodedata.normalize("NFC", text)
    if lowercase:
        text = unicodedata.normalize("NFC", text.lower().replace("\u03c2", "\u03c3"))
    tokens, cur = [], []
    for ch in text:
        cat = unicodedata.category(ch)
        if cat[0] in "LN" or cat == "Pc" or (cat[0] == "M" and cur):
            cur.append(ch)
        elif cur:
            tokens.append("".join(cur))
            cur = []
    if cur:
        tokens.append("".join(cur))
    return tokens


def _rules(text: str, stop=frozenset(), stemmer=None, min_len=1, max_len=None) -> list[str]:
    """Rules 1-5: length filter and stopwords on the raw lowercased token, then the stemmer."""
    import Stemmer

    st = Stemmer.Stemmer(stemmer) if stemmer else None
    out = []
    for t in _split_rule(text):
        if len(t) < min_len or (max_len is not None and len(t) > max_len) or t in stop:
            continue
        # Lucene's PorterStemmer: "if (k > k0+1)" stem, so words of 1-2 characters stay as they are
        short = stemmer == "porter" and len(t) <= 2
        out.append(st.stemWord(t) if st and not short else t)
    return out


@pytest.fixture(scope="module")
def lee_texts():
    path = need_data("lee") / "lee_background.cor"
    return [line.rstrip("\n") for line in path.read_text(encoding="utf-8", errors="replace").splitlines()]


# ----------------------------------------------------------------------------- contract

def test_columns_and_dtypes_same_for_empty_and_full_partitions():
    cfg = TokenizerConfig.make()
    full = tokenize_partition(_docs(["Alpha beta", "gamma"]), cfg)
    empty = tokenize_partition(_docs([]), cfg)
    assert list(full.columns) == ["doc_id", "token"]
    assert full["doc_id"].dtype == np.int64
    assert pd.api.types.is_string_dtype(full["token"].dtype)
    assert len(empty) == 0
    assert dict(empty.dtypes) == dict(full.dtypes)  # what a dask meta must promise


def test_rows_in_document_order_with_the_documents_ids():
    cfg = TokenizerConfig.make()
    ids = [42, 7, 1000, 3]
    texts = ["one two", "", "three, four five", "six"]
    out = tokenize_partition(_docs(texts, ids), cfg)
    # document order, not sorted ids; a document without tokens has no row
    assert out["doc_id"].tolist() == [42, 42, 1000, 1000, 1000, 3]
    assert out["token"].tolist() == ["one", "two", "three", "four", "five", "six"]
    assert out.index.tolist() == list(range(len(out)))


# ----------------------------------------------------------------------------- rules 1-2

@pytest.mark.parametrize("text", [
    "Hello, World!  foo_bar 3.14 e-mail",
    "ÜBER-straße naïve\tx² Ⅻ ٣٤",                  # letters and numbers of any script, superscripts
    "nai\u0308ve \u0308x हिन्दी",                     # a mark (M*) stays in its word, after a space it separates
    "ΟΔΟΣ οδός ΣΙΣΥΦΟΣ",                             # final sigma folded into sigma
    "line\nbreak\r\nand\u00a0nbsp\u2028sep",         # every kind of space separates
    "__init__ a_b_ _ 9_9",
    "emoji 🙂 ok ✓ done",
])
def test_split_and_lowercase_rule(text):
    out = tokenize_partition(_docs([text]), TokenizerConfig.make())
    assert out["token"].tolist() == _split_rule(text)


def test_final_sigma_folded_only_when_lowercasing():
    low = tokenize_partition(_docs(["ΟΔΟΣ οδός"]), TokenizerConfig.make())["token"].tolist()
    assert not any("\u03c2" in t for t in low) and all(t.endswith("\u03c3") for t in low)
    keep = tokenize_partition(_docs(["ΟΔΟΣ οδός"]), TokenizerConfig.make(lowercase=False))["token"].tolist()
    assert keep == ["ΟΔΟΣ", "οδός"]


def test_split_rule_on_real_text(lee_texts):
    docs = _docs(lee_texts)
    got = _by_doc(tokenize_partition(docs, TokenizerConfig.make()))
    want = {i: _split_rule(t) for i, t in enumerate(lee_texts) if _split_rule(t)}
    assert got == want
    assert sum(map(len, got.values())) > 50_000  # the real text is really there


# ----------------------------------------------------------------------------- rules 3-5

def test_length_filter_is_measured_before_stemming():
    # "running" (7) stems to "run" (3) and "computers" (9) to "comput" (6)
    cfg = TokenizerConfig.make(stemmer="porter", min_len=4, max_len=8)
    out = tokenize_partition(_docs(["running computers run"]), cfg)["token"].tolist()
    assert out == ["run"]  # "running" kept though its stem is short; "computers" dropped; raw "run" too short


def test_stopwords_after_lowercasing_before_stemming():
    cfg = TokenizerConfig.make(stopwords="lucene", stemmer="porter")
    # "Beings" -> "be" and "thes" -> "the": stems that are stopwords are kept; "Be", "THE" are dropped
    out = tokenize_partition(_docs(["Beings Be thes THE"]), cfg)["token"].tolist()
    assert out == ["be", "the"]
    cased = TokenizerConfig.make(lowercase=False, stopwords="lucene")
    assert tokenize_partition(_docs(["The the"]), cased)["token"].tolist() == ["The"]


def test_stopword_file_and_list(tmp_path):
    f = tmp_path / "stop.txt"
    f.write_text("Alpha\n\n  gamma \n", encoding="utf-8")
    for stop in (str(f), ["ALPHA", "gamma"]):
        out = tokenize_partition(_docs(["alpha beta Gamma delta"]), TokenizerConfig.make(stopwords=stop))
        assert out["token"].tolist() == ["beta", "delta"]


def _english_list() -> frozenset:
    """The bundled Snowball list read here: first word of a line before ``|``, split by the split rule, the
    pieces can, won and let of can't, won't and let's left out."""
    from pathlib import Path

    from cutext.stages.text import tokenize as T

    words = set()
    for line in Path(T.__file__).with_name("stopwords_english.txt").read_text(encoding="utf-8").splitlines():
        head = line.split("|", 1)[0].split()
        if head:
            pieces = _split_rule(head[0])
            words.update(pieces if len(pieces) == 1 else set(pieces) - {"can", "won", "let"})
    return frozenset(words)


def test_english_list_is_snowballs_split_as_the_tokenizer_splits(tmp_path):
    """``"english"``: the Snowball list bundled as package data; its contractions stop the pieces the
    tokenizer makes of them (``don't`` -> ``don``, ``t``), except the words can, won and let."""
    from pathlib import Path

    from cutext.stages.text import tokenize as T

    data = Path(T.__file__).with_name("stopwords_english.txt")
    entries = [ln.split("|", 1)[0].split()[0] for ln in data.read_text(encoding="utf-8").splitlines()
               if ln.split("|", 1)[0].strip()]
    assert len(entries) == 174 and "BSD" in data.read_text(encoding="utf-8")
    plain = {e for e in entries if "'" not in e}
    assert plain <= T.ENGLISH_STOPWORDS and {"s", "t", "don", "ll", "isn"} <= T.ENGLISH_STOPWORDS
    assert not {"can", "won", "let", "us", "will", "may"} & T.ENGLISH_STOPWORDS and len(T.ENGLISH_STOPWORDS) == 146
    assert T.ENGLISH_STOPWORDS == _english_list()
    cfg = TokenizerConfig.make(stopwords="english")
    out = tokenize_partition(_docs(["The team won't say it's the end; they can't, and we won."]), cfg)
    assert out["token"].tolist() == ["team", "won", "say", "end", "can", "won"]
    assert T.resolve_stopwords("english") is T.ENGLISH_STOPWORDS
    with pytest.raises(ValueError, match="'lucene', 'english', 'none'"):
        T.resolve_stopwords("englsh")


@pytest.mark.parametrize("kw", [
    dict(stopwords="lucene"),
    dict(stopwords="english"),
    dict(stemmer="porter"),
    dict(stopwords="lucene", stemmer="porter", min_len=2),
    dict(stemmer="english", min_len=3, max_len=12),
])
def test_all_rules_on_real_text(lee_texts, kw):
    texts = lee_texts[:120]
    cfg = TokenizerConfig.make(**kw)
    got = _by_doc(tokenize_partition(_docs(texts), cfg))
    stop = {"lucene": LUCENE_STOPWORDS, "english": _english_list()}.get(kw.get("stopwords"), frozenset())
    want = {}
    for i, t in enumerate(texts):
        toks = _rules(t, stop, kw.get("stemmer"), kw.get("min_len", 1), kw.get("max_len"))
        if toks:
            want[i] = toks
    assert got == want


def test_partitioning_does_not_change_the_tokens(lee_texts):
    cfg = TokenizerConfig.make(stopwords="lucene", stemmer="porter", min_len=2)
    docs = _docs(lee_texts)
    whole = tokenize_partition(docs, cfg)
    parts = pd.concat([tokenize_partition(docs.iloc[a:a + 37], cfg) for a in range(0, len(docs), 37)],
                      ignore_index=True)
    pd.testing.assert_frame_equal(parts, whole)


def test_bad_settings_raise():
    with pytest.raises(ValueError, match="stemmer"):
        TokenizerConfig.make(stemmer="klingon")
    with pytest.raises(ValueError, match=r"max_len must be an integer >= 3, got 2"):
        TokenizerConfig.make(min_len=3, max_len=2)
    with pytest.raises(ValueError, match="stopword"):
        TokenizerConfig.make(stopwords="no-such-list")


def test_no_empty_tokens_after_stemming():
    """Snowball's 'porter' stems "s" to ""; as in Lucene's PorterStemmer, words of 1-2 letters stay."""
    out = tokenize_partition(_docs(["it's the cat's toy as is"]), TokenizerConfig.make(stemmer="porter"))
    assert (out["token"].str.len() > 0).all()
    assert out["token"].tolist() == ["it", "s", "the", "cat", "s", "toi", "as", "is"]


def test_scatter_ranges_copies_each_row_to_its_place():
    """``scatter_ranges`` (the GPU lowercase path puts cudf-lowered rows back with it), on numpy:
    random rows, empty ones included, from a buffer with a leading offset, into a poisoned buffer."""
    from cutext.stages.text.tokenize import scatter_ranges

    rng = np.random.default_rng(11)
    for _ in range(50):
        lens = rng.integers(0, 6, rng.integers(1, 30))
        src_off = np.r_[0, np.cumsum(lens)].astype(np.int64) + 3          # rows start after 3 bytes
        src = rng.integers(0, 256, int(src_off[-1]) + 2, dtype=np.uint8)
        gaps = rng.integers(0, 4, len(lens))
        dst_starts = (np.cumsum(gaps + lens) - lens).astype(np.int64)   # disjoint places, gaps between
        dst = np.full(int(dst_starts[-1] + lens[-1]) + 4, 0xAA, dtype=np.uint8)
        want = dst.copy()
        for k, n in enumerate(lens):
            want[dst_starts[k]:dst_starts[k] + n] = src[src_off[k]:src_off[k] + n]
        assert np.array_equal(scatter_ranges(dst, dst_starts, src, src_off), want)


@pytest.mark.parametrize("min_len,max_len", [(2, None), (1, 3), (3, 5), (2, 2)])
def test_length_filter_alone_equals_the_term_map(min_len, max_len):
    """min_len / max_len without stopwords or a stemmer (counted per token by pyarrow, in code points)
    keep exactly the tokens that the per-term map keeps (forced here by a stopword no token can be)."""
    from cutext.stages.text.tokenize import apply_term_map, split_tokens

    texts = ["The computers are running", "", "--", "Ünïcode café and the CAFÉ", "x²  3.14 οδός a ab abc",
             "ﬁ ǅ 𝔘𝔫𝔦 ab", "a b c dd eee ffff ggggg hhhhhh"]
    tok, doc = split_tokens(pd.Series(texts, dtype=pd.StringDtype("pyarrow")), np.arange(len(texts)), True)
    fast = TokenizerConfig.make(min_len=min_len, max_len=max_len)
    slow = TokenizerConfig.make(min_len=min_len, max_len=max_len, stopwords=["\x00 not a token"])
    a, da = apply_term_map(tok, doc, fast)
    b, db = apply_term_map(tok, doc, slow)
    assert a.tolist() == b.tolist() and len(a) < len(tok)
    np.testing.assert_array_equal(da, db)
    assert str(a.dtype) == str(b.dtype)


@pytest.mark.parametrize("start", [0, 3])
def test_non_ascii_rows_are_the_rows_with_a_non_ascii_character(start):
    """non_ascii_rows == the rows with a character > U+007F, also over a slice of the rows (offsets not
    starting at 0)."""
    import pyarrow as pa

    from cutext.kernels.tokenize import arrow_buffers
    from cutext.stages.text.tokenize import non_ascii_rows

    texts = ["plain", "café", "", "x\u0301", "ascii only", "ΟΔΟΣ", "tail é", "a", "日本", "zz"]
    data, offsets = arrow_buffers(pa.array(texts, pa.large_string()))
    got = non_ascii_rows(data, offsets[start:])
    want = [i - start for i, t in enumerate(texts) if i >= start and any(ord(c) > 127 for c in t)]
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.int64


def test_stems_come_from_the_process_memo_and_equal_fresh_ones(monkeypatch):
    """A word stemmed before in this process is not stemmed again (PyStemmer holds the GIL: threads building
    one index stemmed the words their partitions share each); the stems equal PyStemmer's, the memo is
    cleared when full."""
    from cutext.stages.text import tokenizer_config as tc

    words = ["running", "runs", "as", "ponies", "caresses", "running", "flies"]
    monkeypatch.setattr(tc, "_stem_memo", {})
    fresh = tc._stem_fresh(words, "porter")
    seen = []

    def spy(ws, stemmer):
        seen.append(list(ws))
        return fresh_of(ws, stemmer)

    fresh_of = tc._stem_fresh
    monkeypatch.setattr(tc, "_stem_fresh", spy)
    assert tc.stem_words(words, "porter") == fresh and fresh[0] == "run" and fresh[2] == "as"
    assert tc.stem_words(words[:3] + ["flying"], "porter") == fresh[:3] + fresh_of(["flying"], "porter")
    assert seen == [words, ["flying"]]
    monkeypatch.setattr(tc, "STEM_MEMO_MAX", 3)
    assert tc.stem_words(["walked", "talked", "jumped", "hopped"], "english") == ["walk", "talk", "jump", "hop"]
    assert len(tc._stem_memo["english"]) <= 4 and len(tc._stem_memo["porter"]) == 7


@pytest.mark.parametrize("kw", [{}, {"min_len": 3}, {"stopwords": "lucene"},
                                {"stopwords": "lucene", "stemmer": "porter"}, {"stemmer": "english", "max_len": 6}])
def test_codes_are_the_tokens_of_a_partition(kw):
    """``tokenize_partition_codes`` (the scan's path: the term map's codes, no string a token) gives
    ``tokenize_partition``'s tokens, row for row, as indices into distinct terms."""
    from cutext.stages.text.tokenize import tokenize_partition_codes

    texts = ["The runners were running, and the runner ran.", "", "A cat; cats and CATS", "of the a", "Stemming stems"]
    cfg = TokenizerConfig.make(**kw)
    want = tokenize_partition(_docs(texts, [5, 6, 7, 8, 9]), cfg)
    ids, codes, uniq = tokenize_partition_codes(_docs(texts, [5, 6, 7, 8, 9]), cfg)
    assert ids.dtype == np.int64 and ids.tolist() == want["doc_id"].tolist()
    assert uniq.is_unique and np.asarray(uniq, dtype=object)[codes].tolist() == want["token"].tolist()


@pytest.mark.parametrize("kw", [{"min_len": 3, "max_len": 7}, {"stopwords": "lucene"},
                                {"stopwords": "lucene", "stemmer": "porter"}, {"stemmer": "english", "min_len": 2},
                                {"stemmer": "lucene_porter"}])
def test_the_arrow_term_map_is_map_terms(kw, monkeypatch):
    """``map_terms_arrow`` (Arrow's kernels, stems of known words gathered from the process memo) gives
    ``map_terms``' terms, cold and warm, with the memo cleared when full."""
    import pyarrow as pa

    from cutext.stages.text import tokenizer_config as tc

    monkeypatch.setattr(tc, "_arrow_memo", {})
    cfg = TokenizerConfig.make(**kw)
    words = ["the", "running", "runs", "a", "ponies", "naïve", "straße", "über", "x", "caresses", "of", "runner",
             "generalizations", "σοφία", "it's"]
    for batch in (words[:9], words, words[::-1], words[4:]):
        want = map_terms(batch, cfg)
        keep, got = tc.map_terms_arrow(pa.array(batch, type=pa.large_string()), cfg)
        assert keep.tolist() == [w is not None for w in want]
        assert got.to_pylist() == [w for w in want if w is not None]
        monkeypatch.setattr(tc, "STEM_MEMO_MAX", 10)  # the later batches refill a cleared memo
    if cfg.stemmer == "lucene_porter":  # the numba stemmer stems every word: no memo
        assert cfg.stemmer not in tc._arrow_memo
    elif cfg.stemmer is not None:
        assert 0 < len(tc._arrow_memo[cfg.stemmer][0]) <= len(words)
