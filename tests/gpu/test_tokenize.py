"""GPU tokenizer == CPU tokenizer on scripts with marks, NFC variants and real corpora.

Run on the lent GPU machine; skipped without a device.  The CPU side (numba twin) is the oracle.
"""
from __future__ import annotations

import unicodedata

import numpy as np
import pandas as pd
import pytest

from cutext.kernels import tokenize as K
from cutext.kernels.backend import to_cudf
from cutext.pipelines import datasets
from cutext.stages.text.tokenize import TokenizerConfig, tokenize_partition

from helpers import need_corpus

pytestmark = pytest.mark.gpu

CASES = [
    "हिन्दी भाषा", "क़िताब पढ़ो। नमस्ते", "اَلْعَرَبِيَّةُ لُغَةٌ جَمِيلَةٌ", "\u0639\u064e\u0631\u064e\u0628\u0650\u064a\u0651\u064c",
    "café naïve Ångström", "cafe\u0301 nai\u0308ve A\u030angstro\u0308m", "\u212bx \u212a", "H\u0331 \u1e96",
    "東京タワー 東京。한국어 \u1112\u1161\u11ab\u1100\u1173\u11af", "I \u2764\ufe0f NY 😀x 1\ufe0f\u20e3 👍🏽ok",
    "\u0301abc \u0301 d", "a_b x\u203fy z\uff3fw", "3Σ ΟΔΟΣ οδός", "", "   ", "line\nbreak\ttab\r\nend",
    "Ελληνικά ΚΑΛΗΜΕΡΑ", "İstanbul İZMİR Işık", "zalgo" + "\u0301\u0316\u0327" * 40 + " x",
]


def _frames(texts):
    pdf = pd.DataFrame({"doc_id": np.arange(len(texts), dtype=np.int64),
                        "text": pd.Series(list(texts), dtype=pd.StringDtype("pyarrow"))})
    return pdf, to_cudf(pdf)


def _assert_same(texts, cfg, label):
    pdf, gdf = _frames(texts)
    cpu = tokenize_partition(pdf, cfg)
    gpu = tokenize_partition(gdf, cfg).to_pandas()
    c = cpu.groupby("doc_id")["token"].apply(list)
    g = gpu.groupby("doc_id")["token"].apply(list)
    for d in c.index.union(g.index):
        a, b = list(c.get(d, [])), list(g.get(d, []))
        assert a == b, f"{label}: document {d} {texts[d][:60]!r}: cpu {a[:8]} gpu {b[:8]}"
    assert np.array_equal(cpu["doc_id"].to_numpy(), gpu["doc_id"].to_numpy())
    return cpu


@pytest.mark.parametrize("lowercase", [True, False])
def test_cases_gpu_equal_cpu(lowercase):
    cfg = TokenizerConfig.make(lowercase=lowercase)
    cpu = _assert_same(CASES, cfg, "cases")
    got = cpu.groupby("doc_id")["token"].apply(list)
    assert got[0] == ["हिन्दी", "भाषा"]                    # the example, on both backends
    assert got[4] == got[5]                                 # composed == decomposed


def test_nfd_corpora_gpu_equal_cpu_and_equal_nfc():
    """Every shared corpus decomposed (NFD): GPU == CPU, and both equal the tokens of the NFC text."""
    cfg = TokenizerConfig.make()
    for name in ("nltk-brown", "20news", "reuters21578", "scifact"):
        texts = need_corpus(name)["text"].tolist()[:3000]
        nfd = [unicodedata.normalize("NFD", t) for t in texts]
        a = _assert_same(nfd, cfg, name + " NFD")
        pdf, _ = _frames(texts)
        b = tokenize_partition(pdf, cfg)
        assert a["token"].astype(str).tolist() == b["token"].astype(str).tolist(), name


def test_byte_kernels_gpu_equal_numba():
    import cupy

    rng = np.random.default_rng(11)
    pieces = [t.encode() for t in CASES] + [bytes(rng.integers(0, 256, rng.integers(0, 40)).astype(np.uint8))
                                            for _ in range(3000)]
    pieces += [b"\xe0\xa4", b"\x80\x80abc", b"a\xcc\x81", b"\xef\xb8\x8f", b"\xf0\x9f\x98", b"\xed\xa0\x80x"]
    data = np.frombuffer(b"XYZ" + b"".join(pieces), dtype=np.uint8).copy()  # 3 bytes before row 0
    offsets = np.zeros(len(pieces) + 1, np.int64)
    np.cumsum([len(p) for p in pieces], out=offsets[1:])
    offsets += 3
    span = slice(3, int(offsets[-1]))
    want = K.blank_separators(data, offsets)
    got = K.blank_separators(cupy.asarray(data), cupy.asarray(offsets)).get()
    assert bytes(got[span]) == bytes(want[span])
    table = K.nfc_unstable_table()
    assert np.array_equal(K.rows_containing(cupy.asarray(data), cupy.asarray(offsets), table).get(),
                          K.rows_containing(data, offsets, table))


def test_sliced_and_null_columns():
    """A cudf column with an offset (a slice) and nulls: the buffers are read at the right rows."""
    import cudf

    s = cudf.Series(["x y", None, "हिन्दी भाषा", "cafe\u0301", "😀a"])[1:]
    pdf = pd.DataFrame({"doc_id": np.arange(4, dtype=np.int64),
                        "text": pd.Series(s.to_arrow().to_pylist(), dtype=pd.StringDtype("pyarrow"))})
    gdf = cudf.DataFrame({"doc_id": np.arange(4, dtype=np.int64), "text": s.reset_index(drop=True)})
    cfg = TokenizerConfig.make()
    cpu = tokenize_partition(pdf, cfg)
    gpu = tokenize_partition(gdf, cfg).to_pandas()
    assert cpu["token"].astype(str).tolist() == gpu["token"].astype(str).tolist() == ["हिन्दी", "भाषा", "café", "a"]


@pytest.mark.parametrize("max_fraction", [0.0, 0.25, 1.0])
def test_ascii_lowercase_path_equals_cudf_lower(max_fraction):
    """``_lower_gpu``: ASCII rows by the byte kernel, the rest by cudf, put back in place == cudf
    ``str.lower`` (U+0130 mapped to ``i`` first, as the CPU rule lowercases it) + the sigma fold on every
    row (mixed rows, bytes that are not UTF-8, a slice)."""
    import cupy

    from cutext.stages.readers.device import strings_series
    from cutext.stages.text.tokenize import FINAL_SIGMA, SIGMA, _lower_gpu

    rng = np.random.default_rng(3)
    pool = ["The QUICK Brown fox", "ΟΔΟΣ οδός Σ", "ÉCOLE Straße İx", "MiXeD 123 _Z", "", "@[\\]^`{", "AZaz"]
    # (a sequence cut short at the end of a row is left out: cudf's str.lower reads past the row
    # there, and the reader replaces such bytes before text reaches the tokenizer anyway)
    rows = [pool[i].encode() for i in rng.integers(0, len(pool), 400)] + [b"ABC \xff DEF", b"X\x80Y"]

    def series(rows):
        offsets = np.zeros(len(rows) + 1, np.int64)
        offsets[1:] = np.cumsum([len(r) for r in rows])
        return strings_series(cupy.asarray(np.frombuffer(b"".join(rows), np.uint8)), cupy.asarray(offsets))

    s = series(rows)
    same_length = series([r for r in rows if "İ".encode() not in r])  # rows put back byte for byte
    for col in (s, s[7:].reset_index(drop=True), s[:400], same_length):
        want = col.str.replace("\u0130", "i", regex=False).str.lower().str.replace(FINAL_SIGMA, SIGMA, regex=False)
        got = _lower_gpu(col, max_fraction=max_fraction)
        assert got.to_arrow().cast("binary").to_pylist() == want.to_arrow().cast("binary").to_pylist()


@pytest.mark.parametrize("lowercase", [True, False])
@pytest.mark.parametrize("max_fraction", [0.0, 0.05, 1.0])
def test_normalize_gpu_equals_the_cpu_rules(lowercase, max_fraction):
    """``normalize_gpu`` (ASCII rows by the byte kernel, the others by the CPU rules on the host, put
    back in place or rebuilt; above ``max_fraction`` the device's own rules) == the CPU rules: the
    cases, 20 Newsgroups with its non-ASCII posts, a slice with nulls."""
    import cudf
    import pyarrow as pa

    from cutext.stages.text.tokenize import _normalize_cpu, normalize_gpu

    d = datasets.default_data_dir()
    corpus = datasets.shared_corpora(d)["20news"]()["text"].tolist() if d is not None else []
    rows_sets = [CASES, corpus[:3000] + [t for t in corpus if not t.isascii()],
                 ["ASCII", "caf\u00e9 N\u00c4IVE", "cafe\u0301", "İx", "Q"]]
    for rows in rows_sets:
        if not rows:
            continue
        want = _normalize_cpu(pa.array(rows, type=pa.large_string()), lowercase).to_pylist()
        got = normalize_gpu(cudf.Series(rows), lowercase, max_fraction=max_fraction).to_arrow().to_pylist()
        assert got == want, [(a, b) for a, b in zip(got, want) if a != b][:3]
    s = cudf.Series(["x", None, "Ab\u00c9", None, "CD"])[1:]
    got = normalize_gpu(s, lowercase, max_fraction=max_fraction)
    assert got.index.to_pandas().tolist() == [0, 1, 2, 3]
    assert got.to_arrow().to_pylist() == (["", "ab\u00e9", "", "cd"] if lowercase else ["", "Ab\u00c9", "", "CD"])
