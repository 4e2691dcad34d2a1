"""The numba twins of kernels/wordbreak.py equal the CPU analyzer's split (``standard_tokens``) token for token.

``standard_tokens`` (stages/text/anserini.py: the ``regex`` module's word boundaries read as Lucene's scanner
reads them) is itself checked against Anserini; the twins are the oracle of the device kernels
(tests/emulated/test_wordbreak.py, tests/gpu/test_wordbreak.py).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from cutext.kernels import wordbreak as W
from cutext.kernels.tokenize import arrow_buffers
from cutext.stages.text.anserini import standard_tokens

from helpers import need_corpus
from wordbreak_cases import _CHARS, HOSTILE, random_texts, tokens_by_row


def _twin(texts):
    data, offsets = arrow_buffers(pa.array(texts, type=pa.large_string()))
    got = W.standard_token_bounds(data, offsets)
    assert got is not None
    return tokens_by_row(data, *got, len(texts))


def _assert_equal(texts, label):
    got = _twin(texts)
    for i, t in enumerate(texts):
        want = standard_tokens(t)
        assert got[i] == want, f"{label} {i} {t[:80]!r}: twin {got[i][:8]} cpu {want[:8]}"


def test_class_table_is_the_regex_modules():
    regex = pytest.importorskip("regex")
    t = W.class_table()
    t1, t2 = W.lookup_tables()
    cps = np.arange(0x110000)
    np.testing.assert_array_equal(t2[(t1[cps >> 7].astype(np.int64) << 7) | (cps & 127)], t)
    assert len(t2) < 0x110000 // 8  # shared blocks: the two-level table is small
    rng = np.random.default_rng(0)
    sample = np.r_[np.arange(0x3000), rng.integers(0x3000, 0x110000, 3000)]
    sample = sample[(sample < 0xD800) | (sample >= 0xE000)]
    token = regex.compile(f"[{W.TOKEN_CHARS}]")
    for c in sample.tolist():
        ch, k = chr(c), int(t[c])
        assert regex.match(rf"\p{{WB={W.WORD_BREAK[k & 31]}}}", ch), hex(c)
        assert bool(k & W.TOKEN) == bool(token.match(ch)), hex(c)
        assert bool(k & W.PICT) == bool(regex.match(r"\p{Extended_Pictographic}", ch)), hex(c)
        assert bool(k & W.SOUTH_EAST_ASIAN) == bool(regex.match(r"\p{Line_Break=Complex_Context}", ch)), hex(c)


def test_twin_equals_cpu_split_on_hostile_text():
    _assert_equal(HOSTILE, "hostile")
    got = _twin(HOSTILE)
    assert got[HOSTILE.index("0.05 1,000.5 3.14.15 1.2.3.4 -7 +8 1e10 $5.00 50% 1/2")][:2] == ["0.05", "1,000.5"]
    assert [len(t) for t in got[HOSTILE.index("b" * 600 + " c")]] == [255, 255, 90, 1]


@pytest.mark.parametrize("seed", [0, 1])
def test_twin_equals_cpu_split_on_random_text(seed):
    _assert_equal(random_texts(seed), f"random{seed}")


def test_twin_equals_cpu_split_on_20newsgroups_sample():
    texts = need_corpus("20news")["text"].tolist()[::8]
    _assert_equal(texts, "20news")


@pytest.mark.slow
def test_twin_equals_cpu_split_on_all_20newsgroups():
    texts = need_corpus("20news")["text"].tolist()
    _assert_equal(texts, "20news")


def test_sliced_column_nulls_and_empty_rows():
    texts = ["skip me", None, "", "Hello, World's 3.5", None, "ภาษาไทย x"]
    arr = pa.array(texts, type=pa.large_string()).slice(1)
    data, offsets = arrow_buffers(arr)
    assert offsets[0] > 0
    starts, ends, rows = W.standard_token_bounds(data, offsets)
    assert tokens_by_row(data, starts, ends, rows, len(arr)) == [standard_tokens(t or "") for t in texts[1:]]
    z = W.standard_token_bounds(np.zeros(0, np.uint8), np.zeros(1, np.int64))
    assert [len(a) for a in z] == [0, 0, 0]
    with pytest.raises(ValueError, match="offsets span"):
        W.standard_token_bounds(data, offsets + 1000)


def test_nested_scans_past_the_stack_are_reported():
    """A scan nested in a scan that does not end with it needs a second level: one level reports -1."""
    text = "a" * 254 + "'\u0e31bbb"
    data = np.frombuffer(text.encode(), np.uint8).copy()
    bound = np.zeros(len(data) + 1, np.uint8)
    bound[[0, len(data)]] = 1
    t1, t2 = W.lookup_tables()
    flags = np.zeros(len(data), np.uint8)
    flags[0] = 1
    e64, e8 = np.zeros(0, np.int64), np.zeros(0, np.uint8)
    counts = np.zeros(1, np.int64)
    for depth, want in ((1, -1), (2, len(standard_tokens(text)))):
        stack = np.empty(depth, np.int64), np.empty(depth, np.int64)
        W._pieces_cpu(data, bound, t1, t2, flags, len(data), counts, e64, e64, e8, False, *stack)
        assert counts[0] == want
    assert standard_tokens(text) == ["a" * 254, "\u0e31", "bbb"]
    assert _twin([text]) == [standard_tokens(text)]


def _flags(texts, pairs):
    """(body, bound, flags, offsets) of the texts as one column, the flags decided with the pair table ``pairs``."""
    data, offsets = arrow_buffers(pa.array(texts, type=pa.large_string()))
    body, bound, _ = W._buffers(data, offsets)
    t1, t2 = W.lookup_tables()
    flags = np.zeros(len(body), np.uint8)
    W._segment_flags(body, bound, t1, t2, pairs, flags)
    return body, bound, flags, offsets


def _all_undecided():
    return np.full(128 * 128, W.PAIR_UNDECIDED, np.uint8)


def test_ascii_pairs_hold_in_every_context():
    """A decided pair gives the full rules' answer between any left and right context (runs of Extend / Format /
    ZWJ, quotes, numbers, row edges); an undecided one has a MidLetter / MidNum / MidNumLet / quote beside it."""
    pairs = W.ascii_pairs()
    assert pairs.shape == (128 * 128,) and set(np.unique(pairs)) <= {W.PAIR_NO_BREAK, W.PAIR_BREAK, W.PAIR_UNDECIDED}
    np.testing.assert_array_equal(pairs, W._build_ascii_pairs())  # the copy kept on disk is the rules' table
    rng = np.random.default_rng(0)
    a, b = np.divmod(np.arange(128 * 128), 128)
    texts, at = [], []
    for left, right in zip(a.tolist(), b.tolist()):
        for _ in range(3):
            x = "".join(rng.choice(_CHARS, int(rng.integers(0, 4))))
            texts.append(x + chr(left) + chr(right) + "".join(rng.choice(_CHARS, int(rng.integers(0, 4)))))
            at.append(len(x.encode()) + 1)
    *_, full, offsets = _flags(texts, _all_undecided())
    got = full[offsets[:-1] + np.array(at)].reshape(-1, 3)
    decided = pairs != W.PAIR_UNDECIDED
    np.testing.assert_array_equal(got[decided], np.repeat(pairs[decided, None], 3, axis=1))
    wb = W.class_table()[:128] & 31
    mid = np.isin(wb, [W.MIDLETTER, W.MIDNUM, W.MIDNUMLET, W.SQUOTE])
    assert (mid[a] | mid[b])[~decided].all()
    assert pairs[(ord("a") << 7) | ord("b")] == W.PAIR_NO_BREAK and pairs[(ord(" ") << 7) | ord("b")] == W.PAIR_BREAK


@pytest.mark.parametrize("seed", [0, 1])
def test_fast_paths_equal_full_rules(seed):
    """The ASCII pair table and the ASCII segments' one pass give the flags and pieces of the full rules, byte for
    byte, on hostile, random and real text."""
    texts = HOSTILE + random_texts(seed, n_short=1500, n_long=60) + need_corpus("20news")["text"].tolist()[seed::40]
    body, bound, fast, _ = _flags(texts, W.ascii_pairs())
    full = _flags(texts, _all_undecided())[2]
    np.testing.assert_array_equal(fast, full)
    t1, t2 = W.lookup_tables()
    n = len(body)
    chunk = 64
    n_chunks = -(-n // chunk)
    stack = np.empty(W.STACK_DEPTH, np.int64), np.empty(W.STACK_DEPTH, np.int64)
    e64, e8 = np.zeros(0, np.int64), np.zeros(0, np.uint8)
    out = []
    for ascii_fast in (True, False):
        counts = np.zeros(n_chunks, np.int64)
        W._pieces_cpu(body, bound, t1, t2, full, chunk, counts, e64, e64, e8, False, *stack, ascii_fast)
        first = np.cumsum(counts) - counts
        total = int(counts.sum())
        ps, pe, pf = np.empty(total, np.int64), np.empty(total, np.int64), np.empty(total, np.uint8)
        W._pieces_cpu(body, bound, t1, t2, full, chunk, first, ps, pe, pf, True, *stack, ascii_fast)
        out.append((counts, ps, pe, pf))
    assert (out[1][0] >= 0).all() and len(out[1][1]) > 10_000
    for f, s in zip(*out):
        np.testing.assert_array_equal(f, s)


def test_ascii_pairs_kept_beside_the_kernels(tmp_path, monkeypatch):
    """The pair table (16,384 entries, not one a code point) is read back from the cache folder, not built again."""
    from cutext.kernels import _numba_cache

    monkeypatch.setattr(_numba_cache, "cache_folder", lambda f: str(tmp_path))
    want = W._ascii_pairs_kept()
    (path,) = tmp_path.glob("_build_ascii_pairs-*.u8")
    assert path.stat().st_size == 128 * 128
    monkeypatch.setattr(W, "_segment_flags", lambda *a: pytest.fail("the pair table was built again"))
    np.testing.assert_array_equal(W._ascii_pairs_kept(), want)
