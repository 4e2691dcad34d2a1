"""The numba Porter stemmer (cutext.kernels.porter, through cutext.stages.text.porter) against the Python
reference ``porter_stem``, word for word: real vocabularies, hostile words, random strings."""
import random
import tarfile

import numpy as np
import pyarrow as pa
import pytest

from cutext.stages.text import porter as P
from cutext.stages.text.porter import porter_stem, porter_stem_array, porter_stems

from helpers import need_corpus, need_data

STEP_SUFFIXES = (
    "s", "es", "sses", "ies", "ss", "eed", "ed", "ing", "ated", "bled", "ized", "ating", "ying", "y", "ly",
    "ational", "tional", "enci", "anci", "izer", "bli", "alli", "entli", "eli", "ousli", "ization", "ation",
    "ator", "alism", "iveness", "fulness", "ousness", "aliti", "iviti", "biliti", "logi", "icate", "ative",
    "alize", "iciti", "ical", "ful", "ness", "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement",
    "ment", "ent", "sion", "tion", "ion", "ou", "ism", "ate", "iti", "ous", "ive", "ize", "e", "le", "ll", "ell",
)
PREFIXES = ("", "b", "y", "tr", "ay", "bat", "hop", "str", "ard", "abab", "oyy", "generaliz", "é", "ü", "ß",
            "ho\u00e9", "ab\u0820", "\u0820\u0820", "σοφ", "x1", "RUN")


def fast(words):
    """The kernel's stems of ``words`` (whatever their number) as a list of str."""
    return porter_stem_array(pa.array(words, type=pa.large_string()), min_words=0).to_pylist()


def assert_same(words):
    want = [porter_stem(w) for w in words]
    got = fast(words)
    bad = [(w, a, b) for w, a, b in zip(words, want, got) if a != b]
    assert not bad, f"{len(bad)} of {len(words)} stems differ (word, reference, kernel): {bad[:10]}"


def test_cacm_terms():
    from cutext.stages.text.anserini import split_anserini

    texts = need_corpus("cacm")["text"]
    tokens, _ = split_anserini(texts, np.arange(len(texts), dtype=np.int64))
    words = sorted(set(tokens))
    assert len(words) > 10_000
    assert_same(words)


def test_20newsgroups_terms_sample():
    """The distinct words of the first 2,500 posts of the tarball (a few groups: reading them all takes seconds)."""
    from cutext.stages.text.anserini import split_anserini

    texts = []
    with tarfile.open(need_data("20newsgroups"), "r:*") as tar:
        for m in tar:
            if m.isfile():
                texts.append(tar.extractfile(m).read().decode("latin-1"))
                if len(texts) == 2500:
                    break
    tokens, _ = split_anserini(pa.array(texts, type=pa.large_string()), np.arange(len(texts), dtype=np.int64))
    words = sorted(set(tokens))
    assert len(words) > 20_000
    assert_same(words)


def test_hostile_words():
    words = ["", "a", "y", "ab", "é", "éé", "ßs", "\u0820", "\x00", "yy", "yyy", "yyyy", "yyyyies", "syzygy", "yay",
             "toy", "toys", "happy", "sky", "eyed", "yed", "ayed", "playing", "crying", "bayeyy", "yyyed", "ayyy",
             "hoéing", "hoßing", "ho\u0820ing", "ta\u0820ing", "ta\u0820\u0820ing", "taééing", "taéing", "hoée",
             "hoxing", "howing", "hoying", "hopping", "hissing", "fizzing", "falling", "filing", "failing",
             "a" * 10_000, "generaliz" * 500 + "ational", "ß" * 5000 + "ing", "é" * 3000 + "e", "\u0820" * 1000,
             "RUNNING", "Caresses", "1990s", "a.b.c", "x-ray", "o'neill", "naïve", "straße", "σοφία", "über",
             "\x00ing", "ab\x00es", "日本語", "日本語s", "\U0001f600ing", "e\U0001f600\U0001f600ing"]
    words += [p + s for p in PREFIXES for s in STEP_SUFFIXES]
    words += [p + s + t for p in PREFIXES[:8] for s in STEP_SUFFIXES for t in ("s", "ed", "ing", "ly", "e")]
    assert_same(words)
    # U+0820 is E0 A0 A0 in UTF-8: one is no double consonant (step 1b's cvc adds an e), two are (one goes)
    assert fast(["ta\u0820ing", "ta\u0820\u0820ing"]) == ["ta\u0820e", "ta\u0820"]


@pytest.mark.parametrize("seed", [0, 1])
def test_random_strings(seed):
    rng = random.Random(seed)
    alphabet = "aeiouyy" + "bcdglmnrstvwxz" + "éüß\u0820σ" + "ss" + "e"
    words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14))) for _ in range(20_000)]
    words += [rng.choice(PREFIXES) + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4)))
              + rng.choice(STEP_SUFFIXES) for _ in range(20_000)]
    assert_same(words)


def test_porter_stems_takes_the_kernel_for_many_words(monkeypatch):
    words = [p + s for p in PREFIXES for s in STEP_SUFFIXES]
    assert len(words) >= P.FAST_MIN_WORDS
    calls = []
    real = P.stem_buffers
    monkeypatch.setattr(P, "stem_buffers", lambda o, d: calls.append(len(o) - 1) or real(o, d))
    assert porter_stems(words) == [porter_stem(w) for w in words]
    assert calls == [len(words)]
    assert porter_stems(words[:5]) == [porter_stem(w) for w in words[:5]] and calls == [len(words)]


def test_a_word_not_utf8_takes_the_python_stemmer():
    words = ["running"] * P.FAST_MIN_WORDS + ["ab\ud800ing", "caresses"]  # a lone surrogate: no UTF-8
    assert porter_stems(words) == [porter_stem(w) for w in words]


def test_arrow_arrays_of_every_shape():
    words = [p + s for p in PREFIXES for s in STEP_SUFFIXES]
    want = [porter_stem(w) for w in words]
    arr = pa.array(words, type=pa.large_string())
    assert porter_stem_array(arr[7:]).to_pylist() == want[7:]  # a slice: offsets not from 0
    assert porter_stem_array(arr.slice(3, 0)).to_pylist() == []
    assert porter_stem_array(pa.array(words, type=pa.string())).to_pylist() == want
    chunked = pa.chunked_array([pa.array(words[:100]), pa.array(words[100:])])
    got = porter_stem_array(chunked)
    assert got.type == pa.large_string() and got.to_pylist() == want
    with pytest.raises(ValueError, match="words has 1 nulls"):
        porter_stem_array(pa.array(words + [None]))
    assert porter_stem_array(pa.chunked_array([], type=pa.string())).to_pylist() == []
    with pytest.raises(TypeError, match="pyarrow string array, got int64"):
        porter_stem_array(pa.array([1, 2]))
    with pytest.raises(ValueError, match="min_words"):
        porter_stem_array(arr, min_words=-1)


def test_threads_at_once():
    from concurrent.futures import ThreadPoolExecutor

    words = [p + s for p in PREFIXES for s in STEP_SUFFIXES]
    want = [porter_stem(w) for w in words]
    arrays = [pa.array(words[i:] + words[:i], type=pa.large_string()) for i in range(8)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda a: porter_stem_array(a, min_words=0).to_pylist(), arrays))
    assert got == [want[i:] + want[:i] for i in range(8)]


def test_stem_words_lucene_porter_is_the_reference(monkeypatch):
    from cutext.stages.text import tokenizer_config as tc

    monkeypatch.setattr(tc, "_stem_memo", {})
    words = [p + s for p in PREFIXES for s in STEP_SUFFIXES]
    want = [porter_stem(w) for w in words]
    assert tc.stem_words(words, "lucene_porter") == want
    assert tc.stem_array(pa.array(words, type=pa.large_string()), "lucene_porter").to_pylist() == want
