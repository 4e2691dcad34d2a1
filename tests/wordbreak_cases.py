"""Texts for the word-break kernels of ``analyzer="anserini"`` (kernels/wordbreak.py) and a reader of their output:
the hostile cases every test of the split (twin, emulated CUDA C, device) runs, and seeded random strings of the
characters whose word-break rules interact."""
from __future__ import annotations

import numpy as np

HOSTILE = [
    "", " ", "http://www.example.com/path?q=1&x=2 https://x.y/z", "mail me at john.doe@example.co.uk or a_b@c.d",
    "0.05 1,000.5 3.14.15 1.2.3.4 -7 +8 1e10 $5.00 50% 1/2", "U.S.A. U.S.A e.g. i.e.", "controls.Only x.Y a.b.c",
    "don't can't it's James' O'Neil\u2019s l\u2019homme \uff07s \uff2f\uff07\uff53 rock'n'roll '90s",
    "foo_bar __init__ _x x_ ___", "東京タワー 日本語の文章です ひらがな カタカナー ｶﾀｶﾅ",
    "ภาษาไทยง่ายนิดเดียว ສະບາຍດີ ភាសាខ្មែរ မြန်မာ", "한국어 텍스트 \u1112\u1161\u11ab\u1100\u1173\u11af",
    "😀 👍🏽 👨\u200d👩\u200d👧\u200d👦 🏳️\u200d🌈 ❤️ 1️⃣ #️⃣ a😀b", "🇺🇸🇫🇷🇩🇪 🇺 x🇺🇸y 🇺🇸🇫",
    "cafe\u0301 nai\u0308ve \u0301abc !\u0301x", "zalgo" + "\u0301\u0316\u0327" * 40 + " x",
    "a" * 300, "b" * 600 + " c", "ab." * 120, "1" * 256, "a" * 254 + "'s", "x" * 255 + "\u0301" * 3,
    "a" * 254 + "'\u0e31bbb", "ก" * 300, "ภาษา" * 100 + " " + "ไทย" * 100, "!\u0e31\u0e31 ก\u0e31",
    "!\u200d😀 !\u200d\u200d\u200d😀", "\u200d" * 40 + "😀", "!" + "\u200d" * 40 + "😀x", "a\u00adb soft\u00adhyphen",
    "a\u2060b word\u2060joiner", "שלום עולם צה\"ל ג'ירפה", "ab:cd a:b:c 3:45 x;y", "a\r\nb\rc\nd\u2028e\u0085f",
    "tab\there  two  spaces", "12:30pm 3.5kg v1.2.3-beta", "C++ C# .NET node.js", "ǅemal ﬁne ß İstanbul",
    "٣٤٥ ١٢.٥ عربي", "а.б.в Привет, мир!", "x\u0301\u200d😀", " \u0301", "\u0301", "\u200d", "a\u200b b",
    "\ufeffBOM text", "\U0001F3FB alone 👋\U0001F3FB", "_" * 300 + "a", "a" + "_" * 300, "😀" * 300,
    "\u3000全角\u3000スペース", "ｆｕｌｌ．ｗｉｄｔｈ １２３", "a.\u0301b 1,\u03012", "ab\u2019\u2019cd", "x'y'z 1'2'3",
]
_CHARS = ["a", "B", "7", "0", " ", ".", ",", "'", "\u2019", ":", "_", "-", "\u0301", "\u200d", "\u00ad", "😀",
          "\U0001F3FB", "\U0001F1FA", "\U0001F1F8", "ก", "\u0e31", "カ", "ー", "ひ", "東", "한", "א", "\"", "\r", "\n",
          "\u3000", "@", "/", "!", "\ufe0f", "²", "ⅷ", "\u0660", "\t", "ǅ", "\u2060", "\u200b"]
# the characters that join long segments, weighted so that segments pass 255 code points
_LONG = ["a", "b", "7", ".", ",", "'", "_", "\u0301", "\u200d", "😀", "ก", "\u0e31", "カ", "א", "\"", "\U0001F1FA",
         "\u00ad", ":"]
_LONG_P = np.array([8, 8, 8, 2, 2, 2, 1, 1, 1, 1, 3, 1, 1, 1, 0.3, 0.5, 0.5, 0.5])


def random_texts(seed: int, n_short: int = 3000, n_long: int = 150) -> list[str]:
    """Short strings of every interacting character class, and long ones of the joining classes."""
    rng = np.random.default_rng(seed)
    short = ["".join(rng.choice(_CHARS, int(rng.integers(0, 40)))) for _ in range(n_short)]
    long = ["".join(rng.choice(_LONG, int(rng.integers(200, 1500)), p=_LONG_P / _LONG_P.sum())) for _ in range(n_long)]
    return short + long


def tokens_by_row(data, starts, ends, rows, n_rows: int) -> list[list[str]]:
    """The tokens ``data[starts[k]:ends[k]]`` (host arrays) as one list of str a row."""
    raw = np.asarray(data).tobytes()
    out: list[list[str]] = [[] for _ in range(n_rows)]
    for a, z, r in zip(np.asarray(starts).tolist(), np.asarray(ends).tolist(), np.asarray(rows).tolist()):
        out[r].append(raw[a:z].decode("utf-8"))
    return out
