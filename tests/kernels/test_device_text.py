"""The device text path on the CPU: its array code on numpy, its CUDA source under g++.

:mod:`cutext.stages.text.device` is array code over numpy or cupy, so here it runs on numpy (the
kernels' numba twins) and is compared with the CPU front end; the new CUDA kernels of
``kernels/tokenize.cu`` (token hashes, byte-exact token comparison) are compiled as C++ and run
thread by thread against their twins and against a pure-Python statement of the hash.
tests/gpu/test_device_text.py runs the same on a device.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cutext.kernels import tokenize as K
from cutext.pipelines import datasets
from cutext.stages.readers import device as GR
from cutext.stages.readers import pread
from cutext.stages.readers.base import _lines_table
from cutext.stages.readers.files import _valid_utf8 as python_valid_utf8
from cutext.stages.text import device as GT
from cutext.stages.text import token_bytes as TB
from cutext.stages.text.partitions import tokenize_partition_scan
from cutext.stages.text.tokenize import TokenizerConfig

from helpers import c_ptr as _ptr  # the C pointer of a contiguous array
from helpers import need_corpus

CONFIGS = {"plain": TokenizerConfig.make(),
           "lucene+porter": TokenizerConfig.make(stopwords="lucene", stemmer="porter", min_len=2),
           "keep-case+max_len": TokenizerConfig.make(lowercase=False, max_len=12)}
# rows of bytes: valid text with marks, CJK, emoji, connectors, and undecodable bytes
PIECES = ["ab", " ", "Ça", "é", "e\u0301", "中文", "😀", "_", "\ufe0f", "\u0301", "1", ".", "Σς", "\n",
          "\r"]
BYTE_ROWS = st.lists(st.lists(st.one_of(st.sampled_from([p.encode() for p in PIECES]),
                                        st.binary(min_size=1, max_size=3)), max_size=12).map(b"".join),
                     max_size=8)


def _pack(rows):
    data = np.frombuffer(b"".join(rows), np.uint8).copy()
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    return data, offsets


def _split_tokens(data, offsets):
    tok_off, tok_bytes, docs = K.split_utf8(data, offsets)
    return [(bytes(tok_bytes[tok_off[i]:tok_off[i + 1]]), int(docs[i])) for i in range(len(docs))]


def _fnv_splitmix(b: bytes) -> int:
    """The hash as stated (FNV-1a 64, xor length, splitmix64 finalizer), in Python integers."""
    m = (1 << 64) - 1
    h = 14695981039346656037
    for x in b:
        h = ((h ^ x) * 1099511628211) & m
    h = (h ^ len(b)) + 0x9E3779B97F4A7C15 & m
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & m
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & m
    return h ^ (h >> 31)


# ----------------------------------------------------------------------------- token offsets

@settings(max_examples=300, deadline=None)
@given(BYTE_ROWS, st.integers(0, 3))
def test_token_bounds_of_blanked_bytes_equal_split_utf8(rows, pad):
    data, offsets = _pack(rows)
    data = np.concatenate([np.full(pad, ord("x"), np.uint8), data])  # rows need not start at byte 0
    offsets = offsets + pad
    starts, ends, docs = K.token_bounds(K.blank_separators(data, offsets), offsets)
    got = [(bytes(data[a:b]), int(d)) for a, b, d in zip(starts, ends, docs)]
    assert got == _split_tokens(data, offsets)


def test_token_bounds_on_a_corpus():
    texts = need_corpus("nltk-brown")["text"].tolist()[:60] + ["", "x", " "]
    data, offsets = _pack([t.encode() for t in texts])
    starts, ends, docs = K.token_bounds(K.blank_separators(data, offsets), offsets)
    assert [(bytes(data[a:b]), int(r)) for a, b, r in zip(starts, ends, docs)] == _split_tokens(data, offsets)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=9), max_size=30))
def test_hash_twin_is_the_stated_hash_and_equal_compares_bytes(tokens):
    data, offsets = _pack(tokens)
    starts, ends = offsets[:-1].copy(), offsets[1:].copy()
    h = K.hash_tokens(data, starts, ends)
    assert h.tolist() == [_fnv_splitmix(t) for t in tokens]
    rng = np.random.default_rng(len(tokens))
    rep = rng.integers(0, max(len(tokens), 1), len(tokens)).astype(np.int64)
    assert K.tokens_equal(data, starts, ends, rep).tolist() == [tokens[i] == tokens[r] for i, r in enumerate(rep)]


def test_token_kernels_check_their_inputs():
    data, offsets = _pack([b"ab cd"])
    with pytest.raises(ValueError, match="int64"):
        K.hash_tokens(data, offsets[:-1].astype(np.int32), offsets[1:])
    with pytest.raises(ValueError, match="uint8"):
        K.hash_tokens(data.astype(np.int8), offsets[:-1], offsets[1:])
    with pytest.raises(ValueError, match="rep"):
        K.tokens_equal(data, offsets[:-1], offsets[1:], np.zeros(2, np.int64))


# ----------------------------------------------------------------------------- CUDA source under g++



@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([b"", b"a", b"ab", b"ba", b"\xc3\xa9", b"\xff", b"word", b"wore"]) |
                st.binary(max_size=6), max_size=40),
       st.sampled_from([(1, 1), (1, 7), (3, 4), (64, 64)]))
def test_token_kernels_cuda_source_equal_numba_twins(tokenize_emu, tokens, launch):
    data, offsets = _pack(tokens)
    if len(data) == 0:
        data = np.zeros(1, np.uint8)
    starts, ends = offsets[:-1].copy(), offsets[1:].copy()
    n = len(starts)
    grid, block = launch
    got = np.zeros(n, np.uint64)
    tokenize_emu.launch_hash(ctypes.c_uint(grid), ctypes.c_uint(block), _ptr(data), _ptr(starts), _ptr(ends),
                             ctypes.c_longlong(n), _ptr(got))
    assert got.tolist() == K.hash_tokens(data, starts, ends).tolist()
    rep = np.random.default_rng(n).integers(0, max(n, 1), n).astype(np.int64)
    same = np.full(n, 7, np.uint8)
    tokenize_emu.launch_equal(ctypes.c_uint(grid), ctypes.c_uint(block), _ptr(data), _ptr(starts), _ptr(ends),
                              _ptr(rep), ctypes.c_longlong(n), _ptr(same))
    assert same.astype(bool).tolist() == K.tokens_equal(data, starts, ends, rep).tolist()


# ----------------------------------------------------------------------------- the partition scan

def _triples(uniq, code, pos, tf):
    u = np.asarray(pd.Series(uniq).astype(str), dtype=object)
    return sorted(zip(u[np.asarray(code)].tolist(), np.asarray(pos).tolist(), np.asarray(tf).tolist()))


def _assert_scan_equal(texts, cfg, label):
    text = pd.Series(list(texts), dtype=pd.StringDtype("pyarrow"))
    want = tokenize_partition_scan(pd.DataFrame({"text": text}), cfg)
    got = GT.scan_partition(text, cfg)
    assert got is not None, f"{label}: hash collision on real text"
    uniq, code, pos, tf, lengths = got
    np.testing.assert_array_equal(lengths, want.lengths, err_msg=f"{label}: document lengths")
    assert sorted(pd.Series(uniq).astype(str)) == sorted(pd.Series(want.uniq).astype(str)), f"{label}: terms"
    assert len(set(pd.Series(uniq).astype(str))) == len(uniq), f"{label}: unique terms repeat"
    assert _triples(uniq, code, pos, tf) == _triples(want.uniq, want.code, want.pos, want.tf), f"{label}: tf"
    keys = np.asarray(code).astype(np.int64) * (len(texts) + 1) + np.asarray(pos)
    assert np.all(np.diff(keys) > 0), f"{label}: pairs not sorted by (code, pos)"


@pytest.mark.parametrize("cfg", list(CONFIGS), ids=list(CONFIGS))
@pytest.mark.parametrize("name", ["gensim-lee.cor", "cacm", "nltk-abc"])
def test_scan_partition_equals_the_cpu_front_end_on_corpora(name, cfg):
    _assert_scan_equal(need_corpus(name)["text"].tolist(), CONFIGS[cfg], name)


@pytest.mark.parametrize("cfg", list(CONFIGS), ids=list(CONFIGS))
def test_scan_partition_on_scripts_marks_and_empty_rows(cfg):
    texts = ["हिन्दी भाषा", "cafe\u0301 café CAFÉ", "", "  ", "ΟΔΟΣ οδός Σ", "I \u2764\ufe0f NY 😀x", "a_b x\u203fy",
             "東京タワー 東京", "\u0301abc \u0301 d", "the the THE a an", "running runs ran"]
    _assert_scan_equal(texts, CONFIGS[cfg], "cases")


def test_scan_partition_without_tokens():
    uniq, code, pos, tf, lengths = GT.scan_partition(pd.Series(["", " .. ", "!"], dtype=pd.StringDtype("pyarrow")),
                                                   CONFIGS["plain"])
    assert len(uniq) == len(code) == len(pos) == len(tf) == 0
    assert lengths.tolist() == [0, 0, 0]
    # every token a stopword
    uniq, code, _, _, lengths = GT.scan_partition(pd.Series(["the a", "an"], dtype=pd.StringDtype("pyarrow")),
                                                 CONFIGS["lucene+porter"])
    assert len(code) == 0 and lengths.tolist() == [0, 0]


def _term_map_of(terms, cfg):
    """:func:`GT._term_map` of distinct terms given as strings (packed, hashed and sorted by hash as a scan does),
    its lut back in the order of ``terms``."""
    data, offsets = _pack([t.encode() for t in terms])
    starts, ends = offsets[:-1].copy(), offsets[1:].copy()
    h = K.hash_tokens(data, starts, ends)
    order = np.argsort(h, kind="stable")
    got = GT._term_map(data, starts[order], ends[order], h[order], cfg)
    if got is None:
        return None
    final, lut = got
    back = np.empty_like(lut)
    back[order] = lut
    return final, back


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "an", "the", "running", "runs", "ran", "café", "cafe\u0301", "東京", "x" * 13,
                                 "is", "naïve", "ab_cd", "ΣΟΦΙΑ"]) | st.text(min_size=1, max_size=8),
                unique=True, max_size=30),
       st.sampled_from(list(CONFIGS) + ["stop-only"]))
def test_term_map_on_uniques_equals_map_terms(terms, which):
    from cutext.stages.text.tokenize import map_terms

    cfg = TokenizerConfig.make(stopwords=["the", "a", "is"]) if which == "stop-only" else CONFIGS[which]
    final, lut = _term_map_of(terms, cfg)
    final = final.to_pylist()
    assert [None if k < 0 else final[k] for k in lut] == map_terms(terms, cfg)
    assert len(set(final)) == len(final) and set(final) <= {m for m in map_terms(terms, cfg) if m is not None}


@pytest.mark.parametrize("which", ["lucene+porter", "anserini"])
def test_term_map_maps_only_terms_new_to_the_setting(monkeypatch, which):
    """A partition's term map reuses the mappings of earlier ones (same setting): only unseen terms are stemmed,
    and the result equals a map of its own terms alone (its final terms, none of an earlier partition's)."""
    cfg = CONFIGS.get(which) or ANSERINI
    monkeypatch.setattr(GT, "_term_cache", {})
    stemmed = []
    real, real_array = GT.stem_words, GT.stem_array
    monkeypatch.setattr(GT, "stem_words", lambda words, name: stemmed.append(list(words)) or real(words, name))
    monkeypatch.setattr(GT, "stem_array",
                        lambda words, name: stemmed.append(words.to_pylist()) or real_array(words, name))
    first = ["Running", "runs", "the", "Dog's", "cats", "zebra"]
    second = ["runs", "DOGS", "Dog's", "ran", "the", "yak"]
    calls = []
    for terms in (first, second, second):
        del stemmed[:]
        final, lut = _term_map_of(terms, cfg)
        calls.append(sorted(sum(stemmed, [])))
        direct, dlut = GT._map_terms_of(pa.array(terms, type=pa.large_string()), cfg)
        final, direct = final.to_pylist(), direct.to_pylist()
        assert [None if k < 0 else final[k] for k in lut] == [None if k < 0 else direct[k] for k in dlut]
        assert sorted(final) == sorted(direct) and len(set(final)) == len(final)
    assert len(calls[0]) == 5 and calls[2] == []  # "the" is a stopword; a partition seen before: nothing stemmed
    assert calls[1] == (["dogs", "ran", "yak"] if which == "anserini" else ["DOGS", "ran", "yak"])


SEQUENCE_CONFIGS = {"stopwords": TokenizerConfig.make(stopwords="lucene"),
                    "stemmer": TokenizerConfig.make(stemmer="porter"),
                    "lucene+porter": CONFIGS["lucene+porter"],
                    "anserini": TokenizerConfig.make(analyzer="anserini")}


@pytest.mark.parametrize("which", list(SEQUENCE_CONFIGS))
def test_partitions_in_sequence_through_the_term_cache_equal_the_cpu_front_end(monkeypatch, which):
    """Partitions scanned one after another: the later ones find most tokens in the cache (only the new ones are
    copied and mapped) and each still equals the CPU front end token for token."""
    cfg = SEQUENCE_CONFIGS[which]
    monkeypatch.setattr(GT, "_term_cache", {})
    mapped = []
    real = GT._map_terms_of
    monkeypatch.setattr(GT, "_map_terms_of", lambda uniq, c: mapped.append(len(uniq)) or real(uniq, c))
    texts = need_corpus("cacm")["text"].tolist()[:600] + ["The Dog's bones, THE DOG'S bone", "the dog"]
    parts = [texts[:300], texts[300:], texts[300:450] + texts[-2:]]
    for k, part in enumerate(parts):
        _assert_scan_equal(part, cfg, f"{which} partition {k}")
    assert len(mapped) == 2 and 0 < mapped[1] < mapped[0]  # the third partition's tokens all found in the cache
    (cache,) = GT._term_cache.values()
    assert len(cache.known_hash) == sum(mapped) and np.all(np.diff(cache.known_hash.astype(np.float64)) >= 0)


def _colliding(monkeypatch, module, pairs):
    """``module.hash_tokens`` with each token of ``pairs`` hashed as its partner (two different tokens, one hash)."""
    real = module.hash_tokens

    def hash_tokens(data, starts, ends):
        h = real(data, starts, ends)
        for k in range(len(starts)):
            tok = bytes(data[starts[k]:ends[k]])
            if tok in pairs:
                b = np.frombuffer(pairs[tok], np.uint8)
                h[k] = real(b, np.zeros(1, np.int64), np.full(1, len(b), np.int64))[0]
        return h
    monkeypatch.setattr(module, "hash_tokens", hash_tokens)


@pytest.mark.parametrize("new", [b"dog", b"mouse"])
def test_a_token_colliding_with_a_cached_one_falls_back(monkeypatch, new):
    """A token whose hash is a different cached token's (same length or not) is not mapped as that token: the
    scan reports it, so the caller takes the exact string path."""
    cfg = CONFIGS["lucene+porter"]
    monkeypatch.setattr(GT, "_term_cache", {})
    _colliding(monkeypatch, TB, {new: b"cats"})
    first = _pack([b"cats sat", b"on cats"])
    assert GT.scan_arrays(*first, cfg) is not None
    assert GT.scan_arrays(*_pack([b"the " + new + b" sat", b"x"]), cfg) is None
    uniq, code, pos, tf, lengths = GT.scan_arrays(*_pack([b"sat cats", b"owl"]), cfg)  # hits of the same bytes pass
    assert _triples(uniq, code, pos, tf) == [("cat", 0, 1), ("owl", 1, 1), ("sat", 0, 1)]
    assert lengths.tolist() == [2, 1]


def test_final_terms_colliding_fall_back(monkeypatch):
    """Final terms are found among the cached ones by hash: a collision there, with a cached final term or
    between two new ones, reports rather than merging two terms."""
    cfg = CONFIGS["lucene+porter"]
    monkeypatch.setattr(GT, "_term_cache", {})
    _colliding(monkeypatch, GT, {b"dog": b"cat", b"emu": b"yak"})
    assert _term_map_of(["cats", "runs"], cfg) is not None
    assert _term_map_of(["dogs"], cfg) is None  # "dog" hashed as the cached "cat"
    assert _term_map_of(["emu", "yak"], cfg) is None  # two new final terms, one hash
    final, lut = _term_map_of(["cat", "cats", "ran"], cfg)
    assert [final.to_pylist()[k] for k in lut] == ["cat", "cat", "ran"]


def test_term_cache_is_bounded(monkeypatch):
    """Past TERM_CACHE_MAX tokens a partition's new tokens are mapped but not kept; results do not change."""
    from cutext.stages.text.tokenize import map_terms

    cfg = CONFIGS["lucene+porter"]
    monkeypatch.setattr(GT, "_term_cache", {})
    monkeypatch.setattr(GT, "TERM_CACHE_MAX", 5)
    for terms, kept in ((["runs", "the", "cats", "dog"], 4), (["runs", "ran", "emus", "yaks"], 4),
                        (["ran", "dog"], 5), (["cats", "owl"], 5)):
        final, lut = _term_map_of(terms, cfg)
        assert [final.to_pylist()[k] if k >= 0 else None for k in lut] == map_terms(terms, cfg)
        (cache,) = GT._term_cache.values()
        assert len(cache.known_hash) == len(cache.final) == len(cache.length) == kept
    GT.clear_term_cache()
    assert GT._term_cache == {}


def test_partitions_on_threads_share_the_term_cache(monkeypatch):
    """Partitions scanned on threads at once (each merges into its own copy of the cache) equal the CPU front end."""
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(GT, "_term_cache", {})
    texts = need_corpus("cacm")["text"].tolist()[:400]
    parts = [texts[k::4] for k in range(4)] * 2
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda p: _assert_scan_equal(p, CONFIGS["lucene+porter"], "threads"), parts))


def test_a_hash_collision_is_detected(monkeypatch):
    """Different tokens with one hash must not be merged: the scan reports it (the caller falls
    back to the exact string path); equal hashes of equal tokens pass."""
    data, offsets = _pack([b"ab cd ab", b"cd"])
    monkeypatch.setattr(TB, "hash_tokens", lambda d, s, e: (e - s).astype(np.uint64))  # ab and cd collide
    assert GT.scan_arrays(data, offsets, CONFIGS["plain"]) is None
    data, offsets = _pack([b"ab xyz ab", b"xyz"])  # lengths differ: no collision
    uniq, code, pos, tf, lengths = GT.scan_arrays(data, offsets, CONFIGS["plain"])
    assert _triples(uniq, code, pos, tf) == [("ab", 0, 2), ("xyz", 0, 1), ("xyz", 1, 1)]
    assert lengths.tolist() == [3, 1]


# ----------------------------------------------------------------------------- the lines reader

class _Piece:
    options = {"encoding": "utf-8"}


@pytest.mark.parametrize("blocksize", [13, 64, 1000, 1 << 20])  # >= 9: at most 1,000 pieces (check_blocksize)
def test_read_piece_bytes_equals_the_host_reader(tmp_path, monkeypatch, blocksize):
    """The device reader's host side (parallel preadv into one buffer) reads every piece's bytes
    exactly as ``_read_bytes`` does: same start, same line-aligned range, for any block size."""
    from cutext.stages.readers.files import _read_bytes, plan

    monkeypatch.setattr(pread, "READ_CHUNK", 5)  # many chunks, several threads, short reads in between
    rng = np.random.default_rng(blocksize)
    lines = [("w" * int(rng.integers(0, 40)) + " é").encode() for _ in range(300)]
    (tmp_path / "a.txt").write_bytes(b"\xef\xbb\xbf" + b"\r\n".join(lines) + b"\r\n")
    (tmp_path / "b.txt").write_bytes(b"\n".join(lines[:50]))  # no final newline
    (tmp_path / "c.txt").write_bytes(b"")
    (tmp_path / "d.txt").write_bytes(b"\n\n\nx")
    fs, pieces, _ = plan(str(tmp_path), format="lines", blocksize=blocksize)
    assert len(pieces) >= 4
    for p in pieces:
        want = _read_bytes(fs, p)
        got = GR.read_piece_bytes(fs, p)
        assert got is not None
        assert (bytes(got[0]), got[1]) == want, (p.paths[0], p.start, p.end)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b"a", b"b c", b"", b"\r", b"\n", b"\r\n", b"\xc3\xa9", b" "]), max_size=20)
       .map(b"".join))
def test_split_lines_equals_the_host_reader(data):
    chars, offsets = GR.split_lines(np.frombuffer(data, np.uint8))
    got = [bytes(chars[offsets[i]:offsets[i + 1]]).decode() for i in range(len(offsets) - 1)]
    want, reps = _lines_table(data, _Piece(), None, 0)
    assert got == want.to_pylist()


UTF8_PIECES = [b"a", b"\xc3\xa9", b"\xed\xa0\x80", b"\xed\x9f\xbf", b"\xc0\xaf", b"\xc2\x80", b"\xe0\x9f\xbf",
               b"\xe0\xa0\x80", b"\xf0\x8f\xbf\xbf", b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf",
               b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xf0\x9f\x98", b"\xe2\x82\xac", b"\x80", b"\xff"]
UTF8_BYTES = st.binary(max_size=24) | st.lists(st.sampled_from(UTF8_PIECES), max_size=6).map(b"".join)


@settings(max_examples=500, deadline=None)
@given(UTF8_BYTES)
def test_utf8_validation_agrees_with_python(data):
    """The device reader's fallback test says "valid" exactly when Python decodes the bytes."""
    assert K.utf8_valid(np.frombuffer(data, np.uint8)) == python_valid_utf8(data)


@settings(max_examples=300, deadline=None)
@given(UTF8_BYTES, st.sampled_from([(1, 1), (1, 5), (4, 3), (64, 64)]))
def test_utf8_kernel_cuda_source_equals_twin(tokenize_emu, data, launch):
    buf = np.frombuffer(data + b"\x00", np.uint8).copy()  # one spare byte: never read (n excludes it)
    flag = np.zeros(1, np.uint8)
    tokenize_emu.launch_utf8(ctypes.c_uint(launch[0]), ctypes.c_uint(launch[1]), _ptr(buf),
                             ctypes.c_longlong(len(data)), _ptr(flag))
    assert (flag[0] == 0) == K.utf8_valid(np.frombuffer(data, np.uint8)) == python_valid_utf8(data)


def test_utf8_validation_on_a_corpus():
    text = "\n".join(need_corpus("nltk-brown")["text"].tolist()[:200]).encode()
    assert K.utf8_valid(np.frombuffer(text, np.uint8))
    bad = text[:5000] + b"\xed\xa0\x80" + text[5000:]
    assert not K.utf8_valid(np.frombuffer(bad, np.uint8))


# ----------------------------------------------------------------------------- JSON Lines subset

_PLAIN = [
    b"",
    b"\n  \r\n\n",
    b'{"id": 1, "text": "a \\"q\\" \\\\ b \\/ \\n \\t \\u00e9 \\u20AC"}\n\n  \r\n{"text": "x"}\r\n',
    b'{"text": "\\\\x"}',                      # an escaped backslash, then a plain x
    b'{"text": "\\\\\\\\"}\n{"text": "\xc3\xa9 raw UTF-8"}\n',
    b'  {"text": {"nested": [1, 2]}}  \n',
    b'{"text": "a", "n": [0, 0.5, 10, -1, 1e3], "m": {}}\n',   # numbers that are fine
    b'{"text": "at 09:30, 01 NaN [a,] {b,} \\" :01 \\\\", "id": "x,}"}\n',  # all inside strings
]
_NOT_PLAIN = [
    b'{"text": "a\tb"}\n',                    # a raw tab (invalid inside a string)
    b'{"text": "a\x01b"}\n',                  # a raw control byte
    b'{"text": "a\\x41"}\n',                  # not a JSON escape
    b'{"text": "\\\\\\x"}\n',                 # three backslashes: the last escapes x
    b'{"text": "\\ud83d\\ude00"}\n',          # a surrogate pair (an emoji written with ensure_ascii)
    b'{"text": "\\uDC00"}\n',                 # a lone surrogate
    b'{"text": "\\u00g1"}\n',                 # not hex
    b'{"text": "\\u00"}',                     # too short
    b'{"text": "a\\',                         # a backslash at the end
    b'[1, 2]\n',                              # not an object
    b'{"text": "a"}\n"str"\n',
    b'5\n',
    b'{"text": "abc"\n',                      # truncated
    b'{"text": "abc"} x\n',
    b'{"text": "a",}\n',                     # a trailing comma
    b'{"text": "a", "n": [1, 2 , ]}\n',
    b'{"text": "a", "n": 01}\n',             # a leading zero
    b'{"text": "a", "n": -0.5}\n',           # refused too (-0 is not told apart from -01)
    b'{"text": "a", "n": NaN}\n',
    b'{"text": "a", "n": -Infinity}\n',
    b'{"text": "a \\"}\n',                  # the quote is escaped: the string is not closed
]


@pytest.mark.parametrize("data", _PLAIN)
def test_jsonl_plain_accepts_valid_objects_and_counts_records(data):
    import json

    a = np.frombuffer(data, np.uint8)
    assert GR.jsonl_plain(a)
    lines = [ln for ln in data.split(b"\n") if ln.strip(b" \t\r")]
    assert GR.jsonl_records(a) == len(lines)
    assert all(isinstance(json.loads(ln), dict) for ln in lines)  # the subset is valid JSON


@pytest.mark.parametrize("data", _NOT_PLAIN)
def test_jsonl_plain_refuses_what_readers_may_read_differently(data):
    assert not GR.jsonl_plain(np.frombuffer(data, np.uint8))


@pytest.mark.slow
def test_jsonl_plain_accepts_real_corpora_written_as_json_lines(shared_data):
    """20 Newsgroups and SciFact as JSON Lines (``json.dumps``, as most writers write them) are in
    the subset, so the device reader parses them; the same texts with ensure_ascii are too unless a
    character outside the BMP needs a surrogate pair."""
    import gzip
    import json

    news = datasets.load_20newsgroups(shared_data / "corpora" / "20news-bydate.tar.gz")
    data = "".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n"
                   for i, t in enumerate(news["text"])).encode("utf-8")
    a = np.frombuffer(data, np.uint8)
    assert GR.jsonl_plain(a) and GR.jsonl_records(a) == len(news)
    with gzip.open(shared_data / "ir" / "scifact" / "corpus.jsonl.gz", "rb") as fh:
        sci = fh.read()
    lines = [ln for ln in sci.split(b"\n") if ln.strip()]
    surrogate = any(b"\\ud8" in ln.lower() or b"\\ud9" in ln.lower() or b"\\uda" in ln.lower()
                    or b"\\udb" in ln.lower() for ln in lines)
    assert GR.jsonl_plain(np.frombuffer(sci, np.uint8)) == (not surrogate)
    assert GR.jsonl_records(np.frombuffer(sci, np.uint8)) == len(lines)


# ----------------------------------------------------------------------------- CSV subset (read_csv_device)

_CSV_PLAIN = [  # (bytes, delimiter)
    (b"text,id\nhello world,1\nbye,2\n", ","),
    (b"text,id\nhello,1\nbye,2", ","),                              # no final line break
    (b'"text","id"\n"a, b",1\n"say ""hi""",2\n', ","),             # quoted header, delimiter and "" inside
    (b'text,id\n"two\nlines",1\n"",2\n,3\n', ","),                  # a line break inside quotes; empty fields
    (b'text,id\n"""",1\n"a"""" b",2\n', ","),                      # a lone quote; quotes around text
    (b"title\ttext\tid\n\xc3\xa9t\xc3\xa9\ta b, c\t007\n", "\t"),      # TSV, commas and UTF-8 inside
    (b'text\n"  padded inside quotes  "\n', ","),
    (b"text\nNA\nnull\n#not a comment\n", ","),
    (b'text,id\n"form\x0cfeed, esc\x1b, cr\rlf\n\rx",1\n', ","),     # control bytes inside quotes
    (b"text,id\n hello , 1\n\tx\t,2 ", ","),                         # spaces and tabs kept
    (b'id,title,text\n1,,""\n2,"",\n', ","),                         # empty fields, quoted or not
]
_CSV_NOT_PLAIN = [
    (b"text,id\r\nhello,1\r\n", ","),                              # CRLF
    (b"text,id\nhel\x00lo,1\n", ","),                              # NUL
    (b"text,id\nhel\x0clo,1\n", ","),                              # a control byte outside quotes
    (b"text,id\n\nhello,1\n", ","),                                # a blank line
    (b'text,id\n5" disk,1\n', ","),                                # a quote inside an unquoted field
    (b'text,id\n"a"b,1\n', ","),                                   # text after a closing quote
    (b'text,id\n"never closed,1\nb,2\n', ","),                     # an unclosed quote
    (b"text,id\nhello,1,extra\n", ","),                            # too many fields
    (b"text,id\nhello\n", ","),                                    # too few
    (b"text,id\n \nhello,1\n", ","),                               # a record of a space
    (b"text\tid\n\t\n", "\t"),                                     # a record of delimiters only
    (b"\ntext,id\nhello,1\n", ","),                                # a blank line before the header
    (b"", ","),
]


@pytest.mark.parametrize("data,delim", _CSV_PLAIN)
def test_csv_layout_gives_the_header_rows_and_values_pyarrow_reads(data, delim):
    import csv
    import io

    import pyarrow.csv as pcsv

    a = np.frombuffer(data, np.uint8)
    layout = GR.csv_plain(a, ord(delim))
    assert layout is not None
    header_end, n_rows = layout
    names = next(csv.reader([data[:header_end].decode()], delimiter=delim))
    table = pcsv.read_csv(io.BytesIO(data), parse_options=pcsv.ParseOptions(delimiter=delim, newlines_in_values=True),
                          convert_options=pcsv.ConvertOptions(column_types={c: pa.large_string() for c in names}))
    assert n_rows == table.num_rows
    assert data[header_end:header_end + 1] in (b"\n", b"")
    assert names == table.column_names
    lay = GR.csv_layout(a, ord(delim))
    for j, name in enumerate(names):
        chars, offsets = GR.csv_column(a, lay, j)
        got = [bytes(chars[offsets[i]:offsets[i + 1]]).decode() for i in range(n_rows)]
        assert got == table.column(name).to_pylist(), name


@pytest.mark.parametrize("data,delim", _CSV_NOT_PLAIN)
def test_csv_plain_refuses_what_readers_may_read_differently(data, delim):
    assert GR.csv_plain(np.frombuffer(data, np.uint8), ord(delim)) is None


@pytest.mark.slow
def test_csv_layout_reads_real_corpora_written_as_csv(shared_data, tmp_path):
    """20 Newsgroups written by pyarrow's CSV writer (every string quoted) and by Python's csv module
    (quoted where needed) are in the subset, and the device parse (here on numpy) gives pyarrow's
    values."""
    import csv

    import pyarrow.csv as pcsv

    news = datasets.load_20newsgroups(shared_data / "corpora" / "20news-bydate.tar.gz").iloc[:4000]
    table = pa.table({"id": [f"n{i}" for i in range(len(news))], "text": news["text"].tolist()})
    pcsv.write_csv(table, tmp_path / "a.csv")
    with open(tmp_path / "b.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["id", "text"])
        w.writerows(zip(table.column("id").to_pylist(), table.column("text").to_pylist()))
    for name in ("a.csv", "b.csv"):
        a = np.fromfile(tmp_path / name, np.uint8)
        lay = GR.csv_layout(a, ord(","))
        assert lay is not None and lay.n_rows == len(news), name
        for j, col in enumerate(["id", "text"]):
            chars, offsets = GR.csv_column(a, lay, j)
            want = table.column(col).to_pylist()
            got = [bytes(chars[offsets[i]:offsets[i + 1]]).decode() for i in range(len(want))]
            assert got == want, (name, col)


# ----------------------------------------------------------------------------- rules 1-2 (normalize_buffers)

NORMALIZE_ROWS = ["The QUICK Brown fox", "", "cafe\u0301 CAFÉ", "İstanbul IŞIK", "ΟΔΟΣ οδός Σ", "H\u0331 x",
                  "plain ascii 123", "\u212bngstro\u0308m", "東京 TOKYO", "A\u030a\u0301 e\u0301\u0301", "MiXeD_Z"]


def _normalize_via_buffers(texts, lowercase, max_fraction):
    """normalize_buffers on numpy, the column rebuilt as its callers do; None when it declines."""
    import pyarrow.compute as pc

    from cutext.stages.text.tokenize import normalize_buffers

    arr = pa.array(texts, type=pa.large_string())
    data, offsets = K.arrow_buffers(arr)
    got = normalize_buffers(data.copy(), offsets.copy(), lowercase, max_fraction)
    if got is None:
        return None
    out = pa.LargeStringArray.from_buffers(len(arr), pa.py_buffer(offsets.copy()), pa.py_buffer(got.chars))
    if got.fixed is not None:
        mask = np.zeros(len(arr), bool)
        mask[got.fix] = True
        out = pc.replace_with_mask(out, pa.array(mask), got.fixed)
    return out.to_pylist()


@pytest.mark.parametrize("lowercase", [True, False])
def test_normalize_buffers_equals_the_cpu_rules(lowercase):
    """ASCII rows folded on the array, the others through the CPU rules and put back (in place, or
    rebuilt when NFC or lowercase changed their length) == the CPU rules on every row; it declines
    (None) above ``max_fraction`` of non-ASCII bytes and on bytes that are not UTF-8."""
    from cutext.stages.text.tokenize import _normalize_cpu

    rng = np.random.default_rng(5)
    for rows in ([NORMALIZE_ROWS[i] for i in rng.integers(0, len(NORMALIZE_ROWS), 300)],
                 ["ASCII ONLY", "Row Two", ""], ["caf\u00e9 na\u00efve", "ABC"],  # same lengths: in place
                 ["cafe\u0301", "XY"], ["İ", "Q"]):                                  # lengths change
        want = _normalize_cpu(pa.array(rows, type=pa.large_string()), lowercase).to_pylist()
        assert _normalize_via_buffers(rows, lowercase, 1.0) == want, rows[:4]
    assert _normalize_via_buffers(["ASCII", "\u00e9\u00e9\u00e9"], lowercase, 0.1) is None
    from cutext.stages.text.tokenize import normalize_buffers

    data, offsets = _pack([b"AB \xff CD", b"xy"])
    assert normalize_buffers(data, offsets, lowercase) is None
    data, offsets = _pack([b"AB CD", b"xy"])  # no row to fix: the input itself, or its fold
    got = normalize_buffers(data, offsets, lowercase)
    assert bytes(got.chars) == (b"ab cdxy" if lowercase else b"AB CDxy") and got.fixed is None
    assert (got.chars is data) == (not lowercase)


@pytest.mark.slow
def test_normalize_buffers_on_a_corpus_equals_the_cpu_rules():
    from cutext.stages.text.tokenize import _normalize_cpu

    texts = need_corpus("20news")["text"].tolist()
    nonascii = [t for t in texts if not t.isascii()]
    assert nonascii, "20 Newsgroups has posts with bytes >= 0x80"
    rows = texts[:2000] + nonascii
    for lowercase in (True, False):
        want = _normalize_cpu(pa.array(rows, type=pa.large_string()), lowercase).to_pylist()
        assert _normalize_via_buffers(rows, lowercase, 0.05) == want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=7), max_size=30))
def test_code_points_twin_counts_what_python_counts(tokens):
    """The term map's length filters on the device count code points as Python's len() does."""
    data, offsets = _pack([t.encode() for t in tokens])
    got = K.code_points(data, offsets[:-1].copy(), offsets[1:].copy())
    assert got.tolist() == [len(t) for t in tokens]


# ----------------------------------------------------------------------------- analyzer="anserini"

ANSERINI = TokenizerConfig.make(analyzer="anserini")


def test_scan_partition_with_the_anserini_analyzer_equals_the_cpu_front_end():
    """The word-break twins, the possessive filter and lowercase on the unique terms, then Lucene's stopwords
    and Porter: the scan of the CPU analyzer's tokens (no NFC: the decomposed and the composed spelling differ)."""
    from wordbreak_cases import HOSTILE

    texts = HOSTILE + need_corpus("cacm")["text"].tolist()[:400] + [
        "The Dog's bones, THE DOG'S bone and dogs\u2019 dog\uff07S", "cafe\u0301 café", "U.S.A.'s 1,000.5"]
    _assert_scan_equal(texts, ANSERINI, "anserini")
    uniq, code, pos, _, _ = GT.scan_partition(pd.Series(texts[-3:], dtype=pd.StringDtype("pyarrow")), ANSERINI)
    terms = pd.Series(uniq).astype(str).to_numpy()[np.asarray(code)]
    assert sorted(terms[np.asarray(pos) == 0].tolist()) == ["bone", "dog"]
    assert sorted(terms[np.asarray(pos) == 1].tolist()) == ["cafe\u0301", "café"]
    assert "u.s.a" in terms.tolist() and "1,000.5" in terms.tolist()


def test_anserini_scan_reports_text_past_the_kernels_stack(monkeypatch):
    """Text the word-break kernels report (nested scans past their stack): the scan returns None, so the caller
    takes the exact string path."""
    text = pd.Series(["a" * 254 + "'\u0e31bbb x", "y"], dtype=pd.StringDtype("pyarrow"))
    want = tokenize_partition_scan(pd.DataFrame({"text": text}), ANSERINI)
    monkeypatch.setattr(GT, "standard_token_bounds", lambda data, offsets: None)
    assert GT.scan_partition(text, ANSERINI) is None
    got = tokenize_partition_scan(pd.DataFrame({"text": text}), ANSERINI)
    assert _triples(got.uniq, got.code, got.pos, got.tf) == _triples(want.uniq, want.code, want.pos, want.tf)
