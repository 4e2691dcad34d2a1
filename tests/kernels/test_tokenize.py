"""Word characters are letters, marks, numbers and connector punctuation; text is NFC first.

The reference below is written from the rule's statement with ``unicodedata`` only (no shared code
with the kernels): NFC, then maximal runs of L*/N*/Pc code points with the marks (M*) that follow
them (UAX #29 WB4: a mark belongs to the character before it).  The GPU kernel's CUDA source is run
on the CPU (g++, thread by thread) against the numba twins; tests/gpu/test_tokenize.py runs it on
a device.
"""
from __future__ import annotations

import ctypes
import unicodedata

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cutext.kernels import tokenize as K
from cutext.kernels.tokenize import arrow_buffers
from cutext.stages.text.tokenize import TokenizerConfig, _nfc_cpu, tokenize_texts

from helpers import c_ptr as _ptr  # the C pointer of a contiguous array
from helpers import need_corpus

PLAIN = TokenizerConfig.make()
KEEP_CASE = TokenizerConfig.make(lowercase=False)


def kind(ch: str) -> str:
    c = unicodedata.category(ch)
    return "w" if c[0] in "LN" or c == "Pc" else "m" if c[0] == "M" else "s"


def reference(text: str) -> list[str]:
    """The rule as stated, on Python strings (lowercase=False)."""
    out, cur = [], []
    for ch in unicodedata.normalize("NFC", text):
        k = kind(ch)
        if k == "w" or (k == "m" and cur):
            cur.append(ch)
        elif cur:
            out.append("".join(cur))
            cur = []
    if cur:
        out.append("".join(cur))
    return out


# ----------------------------------------------------------------------------- the cases

def test_hindi_words_stay_whole():
    assert tokenize_texts(["हिन्दी भाषा"], PLAIN)[0] == ["हिन्दी", "भाषा"]
    # vowel signs (Mc, Mn), virama and nukta are inside the word
    assert tokenize_texts(["क़िताब पढ़ो।"], PLAIN)[0] == [unicodedata.normalize("NFC", "क़िताब"), "पढ़ो"]


def test_arabic_with_vowel_marks_stays_whole():
    text = "اَلْعَرَبِيَّةُ لُغَةٌ جَمِيلَةٌ"
    assert tokenize_texts([text], PLAIN)[0] == text.split()
    # shadda (ccc 33) after dammatan (ccc 28): NFC puts them in canonical order, the word stays whole
    word = "\u0639\u064e\u0631\u064e\u0628\u0650\u064a\u0651\u064c"
    assert tokenize_texts([word], PLAIN)[0] == [unicodedata.normalize("NFC", word)] != [word]


def test_decomposed_equals_composed():
    composed, decomposed = "caf\u00e9 na\u00efve \u00c5ngstr\u00f6m", "cafe\u0301 nai\u0308ve A\u030angstro\u0308m"
    a, b = tokenize_texts([composed, decomposed], PLAIN)
    assert a == b == ["caf\u00e9", "na\u00efve", "\u00e5ngstr\u00f6m"]
    # singletons and compositions: the Angstrom sign and Kelvin sign are NFC-mapped
    assert tokenize_texts(["\u212bx \u212a"], PLAIN)[0] == ["\u00e5x", "k"]
    # Hangul jamo compose to syllables
    assert tokenize_texts(["\u1112\u1161\u11ab\u1100\u1173\u11af \ud55c\uae00"], PLAIN)[0] == ["\ud55c\uae00"] * 2


def test_lowercase_then_nfc_again():
    # H + macron below is NFC; its lowercase h + U+0331 composes to U+1E96: tokens are NFC
    assert tokenize_texts(["H\u0331 \u1e96"], PLAIN)[0] == ["\u1e96", "\u1e96"]
    # NFC before lowercasing: I + combining dot and U+0130 are canonically equivalent
    a, b = tokenize_texts(["I\u0307stanbul", "\u0130stanbul"], PLAIN)
    assert a == b


def test_cjk_emoji_connectors():
    assert tokenize_texts(["東京タワー 東京。한국어"], PLAIN)[0] == ["東京タワー", "東京", "한국어"]
    # emoji are symbols; the variation selector (Mn) and keycap (Me) follow their base
    assert tokenize_texts(["I \u2764\ufe0f NY 😀x 1\ufe0f\u20e3"], PLAIN)[0] == ["i", "ny", "x", "1\ufe0f\u20e3"]
    assert tokenize_texts(["a_b x\u203fy z\uff3fw snake_case_"], PLAIN)[0] == ["a_b", "x\u203fy", "z\uff3fw",
                                                                          "snake_case_"]
    # a mark after a separator or at the start of a text is a separator
    assert tokenize_texts(["\u0301abc \u0301 d"], PLAIN)[0] == ["abc", "d"]


def test_config_records_the_rule():
    d = PLAIN.to_dict()
    assert d["normalization"] == "NFC" and "marks (M*)" in d["split"]


# ----------------------------------------------------------------------------- tables

def test_word_table_is_the_category_rule():
    t = K.word_table()
    rng = np.random.default_rng(5)
    for c in np.r_[rng.integers(0, 0x110000, 20000), np.arange(0x900, 0x980), np.arange(0x600, 0x700)]:
        c = int(c)
        want = 0 if 0xD800 <= c < 0xE000 else {"w": 1, "m": 2, "s": 0}[kind(chr(c))]
        assert t[c] == want, hex(c)
    assert t[ord("_")] == 1 and t[0x0301] == 2 and t[0x093F] == 2 and t[ord(" ")] == 0 and t[0x1F600] == 0
    # tokenize.cu decides an ASCII byte by the table alone (no row search): no ASCII mark
    assert not (t[:0x80] == K.MARK).any()


UNSTABLE = st.sampled_from([c for c in map(chr, range(0x3000)) if K.nfc_unstable_table()[ord(c)]])
STABLE = st.characters(codec="utf-8").filter(lambda c: not K.nfc_unstable_table()[ord(c)])


@settings(max_examples=300, deadline=None)
@given(st.text(STABLE, max_size=40))
def test_text_without_unstable_code_points_is_nfc(s):
    assert unicodedata.is_normalized("NFC", s)
    assert pc.utf8_normalize(pa.array([s]), "NFC")[0].as_py() == s


# ----------------------------------------------------------------------------- properties

ALPHABET = st.one_of(
    st.sampled_from(list("aAbZ_ 0,.\n\t-'") + ["\u03a3", "\u03c2", "\u0130", "\u00e9", "\u00c5", "\u212b", "\u1e96",
                                             "\ufe0f", "\u20e3", "\u200c", "\u200d", "\u2764", "😀", "東", "\uff3f"]),
    st.characters(min_codepoint=0x300, max_codepoint=0x36F),   # combining diacritics
    st.characters(min_codepoint=0x900, max_codepoint=0x97F),   # Devanagari
    st.characters(min_codepoint=0x600, max_codepoint=0x6FF),   # Arabic
    st.characters(min_codepoint=0x1100, max_codepoint=0x11FF),  # Hangul jamo
    st.characters(min_codepoint=0xAC00, max_codepoint=0xAC40),  # Hangul syllables
    st.characters(codec="utf-8"),
)
TEXTS = st.text(ALPHABET, max_size=30)


@settings(max_examples=400, deadline=None)
@given(TEXTS)
def test_tokens_equal_the_stated_rule(text):
    toks = tokenize_texts([text], KEEP_CASE)[0]
    assert toks == reference(text)
    nfc = unicodedata.normalize("NFC", text)
    for t in toks:
        assert t and all(kind(ch) in "wm" for ch in t) and kind(t[0]) == "w"
        assert unicodedata.is_normalized("NFC", t)
    # concatenating the tokens loses only separators and the marks that follow them
    kept = iter("".join(toks))
    want = next(kept, None)
    prev = "s"
    for ch in nfc:
        k = kind(ch)
        if ch == want:
            want, prev = next(kept, None), "w"
        else:
            assert k == "s" or (k == "m" and prev == "s"), (ch, nfc)
            prev = "s" if k == "s" else prev
    assert want is None


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_canonically_equivalent_texts_give_the_same_tokens(text):
    forms = [text, unicodedata.normalize("NFD", text), unicodedata.normalize("NFC", text)]
    got = tokenize_texts(forms, PLAIN)
    assert got[0] == got[1] == got[2]
    assert all(unicodedata.is_normalized("NFC", t) for t in got[0])


def nfc_all(texts):
    """The oracle: Python's NFC of every row."""
    return [unicodedata.normalize("NFC", t) for t in texts]


@settings(max_examples=200, deadline=None)
@given(st.lists(TEXTS, max_size=8))
def test_nfc_of_flagged_rows_equals_nfc_of_all(texts):
    """_nfc_cpu normalizes only rows_containing's rows (the GPU's way) and equals NFC of every row."""
    arr = pa.array(texts, type=pa.large_string())
    assert _nfc_cpu(arr).to_pylist() == nfc_all(texts)
    flags = K.rows_containing(*arrow_buffers(arr), K.nfc_unstable_table())
    assert all(f or unicodedata.is_normalized("NFC", t) for f, t in zip(flags, texts))


def test_nfc_does_not_depend_on_pyarrow_normalize(monkeypatch):
    """pyarrow 25.0.1 of the GPU machine's image returns cafe\u0301 unchanged from utf8_normalize:
    the tokenizer's NFC must not use it (a broken normalizer here would leave the text decomposed)."""
    monkeypatch.setattr(pc, "utf8_normalize", lambda arr, form: arr)
    arr = pa.array(["cafe\u0301", "plain", "\u1100\u1161"], type=pa.large_string())
    assert _nfc_cpu(arr).to_pylist() == ["caf\u00e9", "plain", "\uac00"]
    assert tokenize_texts(["cafe\u0301 caf\u00e9"], PLAIN) == [["caf\u00e9", "caf\u00e9"]]


@pytest.mark.slow
def test_nfc_of_flagged_rows_on_corpora():
    for name in ("nltk-brown", "20news", "reuters21578"):
        texts = need_corpus(name)["text"].tolist()
        texts = texts + [unicodedata.normalize("NFD", t) for t in texts[:300]]
        arr = pa.array(texts, type=pa.large_string())
        assert _nfc_cpu(arr).to_pylist() == nfc_all(texts), name


# ----------------------------------------------------------------------------- byte kernels

BYTES = st.lists(st.one_of(
    st.binary(max_size=12),
    TEXTS.map(lambda s: s.encode("utf-8")),
    st.sampled_from([b"\xe0\xa4", b"\x80", b"\xcc\x81", b"\xef\xb8\x8f", b"\xf0\x9f\x98", b"\xc1\xa1", b"\xed\xa0\x80",
                     b"\xf4\x90\x80\x80", b" "])), max_size=10)


def _pack(rows):
    data = np.frombuffer(b"".join(rows), dtype=np.uint8).copy()
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    return data, offsets


def _tokens_of_split(data, offsets):
    tok_off, tok, doc = K.split_utf8(data, offsets)
    return [(int(doc[i]), bytes(tok[tok_off[i]:tok_off[i + 1]])) for i in range(len(doc))]


def _tokens_of_blanked(blank, offsets):
    return [(d, t) for d in range(len(offsets) - 1)
            for t in bytes(blank[offsets[d]:offsets[d + 1]]).split(b" ") if t]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.binary(max_size=3), max_size=3), BYTES)
def test_blanking_then_splitting_on_spaces_equals_split_utf8(pre, rows):
    data, offsets = _pack(rows)
    lead = b"".join(pre)
    data = np.r_[np.frombuffer(lead, np.uint8), data].astype(np.uint8)  # bytes before the first row
    offsets = offsets + len(lead)
    blank = K.blank_separators(data, offsets)
    assert _tokens_of_blanked(blank, offsets) == _tokens_of_split(data, offsets)
    span = slice(offsets[0], offsets[-1])
    assert np.all((blank[span] == data[span]) | (blank[span] == 32))


def test_kernel_entry_points_check_their_inputs():
    data, offsets = _pack([b"ab", b"c"])
    with pytest.raises(ValueError, match="uint8"):
        K.blank_separators(data.astype(np.int8), offsets)
    with pytest.raises(ValueError, match="int64"):
        K.rows_containing(data, offsets.astype(np.int32), K.nfc_unstable_table())
    with pytest.raises(ValueError, match="outside"):
        K.blank_separators(data, offsets + 5)




def _emu(tokenize_emu, name, grid, block, data, offsets, table, out):
    getattr(tokenize_emu, name)(ctypes.c_uint(grid), ctypes.c_uint(block), _ptr(data), _ptr(offsets),
                                ctypes.c_longlong(len(offsets) - 1), _ptr(table), _ptr(out))


@settings(max_examples=300, deadline=None)
@given(BYTES, st.sampled_from([(1, 1), (1, 7), (3, 4), (64, 64)]))
def test_cuda_source_equals_numba_twins(tokenize_emu, rows, launch):
    data, offsets = _pack(rows)
    if len(data) == 0:
        data = np.zeros(1, np.uint8)
    grid, block = launch
    want = K.blank_separators(data, offsets)
    got = np.full_like(data, 0xAA)
    _emu(tokenize_emu, "launch_blank", grid, block, data, offsets, K.word_table(), got)
    span = slice(int(offsets[0]), int(offsets[-1]))
    assert bytes(got[span]) == bytes(want[span])
    # the NFC table (no ASCII flagged) and a table flagging ASCII letters and a 2-byte code point
    letters = np.zeros(0x110000, np.uint8)
    letters[[ord("a"), ord("Z"), 0xE9]] = 1
    for table in (K.nfc_unstable_table(), letters):
        flags = np.zeros(len(rows), np.uint8)
        _emu(tokenize_emu, "launch_rows", grid, block, data, offsets, table, flags)
        assert flags.astype(bool).tolist() == K.rows_containing(data, offsets, table).tolist()


def test_cuda_source_on_a_corpus(tokenize_emu):
    texts = need_corpus("nltk-brown")["text"].tolist()[:40]
    texts += ["हिन्दी भाषा", "اَلْعَرَبِيَّةُ", "cafe\u0301 \u0301x", "I \u2764\ufe0f 😀 1\ufe0f\u20e3"]
    data, offsets = _pack([unicodedata.normalize("NFD", t).encode() for t in texts])
    got = np.empty_like(data)
    _emu(tokenize_emu, "launch_blank", 256, 256, data, offsets, K.word_table(), got)
    assert _tokens_of_blanked(got, offsets) == _tokens_of_split(data, offsets)
