"""Loaders for the public corpora the project tests and benchmarks on (archives as distributed).

Each loader returns a pandas DataFrame ``(source_id: str, text: str, ...)`` in a fixed order, with
undecodable bytes replaced (latin-1 posts in 20 Newsgroups); :func:`write_files` and
:func:`write_jsonl` turn one into the reader formats of :mod:`cutext.stages.readers.files`.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import tarfile
import zipfile
from pathlib import Path

import pandas as pd

from cutext.stages.readers.base import decode_counting


def load_20newsgroups(path, subset: str = "all") -> pd.DataFrame:
    """20 Newsgroups "bydate" from ``20news-bydate.tar.gz``.

    Returns
    -------
    DataFrame ``(source_id, text, group, split)``: 18,846 posts for ``subset="all"`` (11,314 train,
    7,532 test); ``source_id`` is ``"<split>/<group>/<number>"``.
    """
    rows = []
    with tarfile.open(path, "r:*") as tar:
        for m in tar:
            if not m.isfile():
                continue
            parts = m.name.split("/")
            if len(parts) < 4:
                continue
            split = parts[-3].replace("20news-bydate-", "")
            if subset != "all" and split != subset:
                continue
            text, _ = decode_counting(tar.extractfile(m).read())
            rows.append((f"{split}/{parts[-2]}/{parts[-1]}", text, parts[-2], split))
    df = pd.DataFrame(rows, columns=["source_id", "text", "group", "split"])
    return df.sort_values("source_id", ignore_index=True)


_REUTERS = re.compile(r"<REUTERS(?P<attrs>[^>]*)>(?P<body>.*?)</REUTERS>", re.S)


def _tag(body, name):
    m = re.search(fr"<{name}[^>]*>(.*?)</{name}>", body, re.S)
    return m.group(1) if m else ""


def _unescape(s):
    return s.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").replace("&#3;", "").strip()


def load_reuters21578(path, with_body_only: bool = False) -> pd.DataFrame:
    """Reuters-21578 Distribution 1.0 from ``reuters21578.tar.gz``.

    Returns
    -------
    DataFrame ``(source_id, text, topics, date)``: 21,578 stories; ``text`` is title and body joined
    by a newline; ``source_id`` is NEWID; ``topics`` a space-joined label list; ``date`` the DATE
    field as written (``"26-FEB-1987 15:01:01.79"``).
    """
    rows = []
    with tarfile.open(path, "r:*") as tar:
        names = sorted(m.name for m in tar if m.name.endswith(".sgm"))
        for name in names:
            raw, _ = decode_counting(tar.extractfile(name).read(), "latin-1")
            for m in _REUTERS.finditer(raw):
                newid = re.search(r'NEWID="(\d+)"', m.group("attrs")).group(1)
                body = m.group("body")
                title, text = _unescape(_tag(body, "TITLE")), _unescape(_tag(body, "BODY"))
                if with_body_only and not text:
                    continue
                topics = " ".join(re.findall(r"<D>(.*?)</D>", _tag(body, "TOPICS")))
                dm = re.match(r"\s*(\d{1,2}-[A-Za-z]{3}-\d{4} \d\d:\d\d:\d\d(?:\.\d+)?)", _tag(body, "DATE"))
                date = dm.group(1) if dm else ""
                rows.append((newid, (title + "\n" + text).strip(), topics, date))
    return pd.DataFrame(rows, columns=["source_id", "text", "topics", "date"])


def load_nltk_zip(path, lines: bool | None = None) -> pd.DataFrame:
    """A corpus zip of NLTK data (abc, brown, inaugural, state_union, movie_reviews, webtext).

    Every file (README and similar excluded) is a document, except for ``abc`` (two files of news
    items, one per line) where ``lines=None`` makes every non-empty line a document.
    """
    rows = []
    with zipfile.ZipFile(path) as zf:
        names = sorted(n for n in zf.namelist() if not n.endswith("/"))
        stem = Path(path).stem
        per_line = (stem == "abc") if lines is None else lines
        for n in names:
            base = n.rsplit("/", 1)[-1]
            if base.upper().startswith("README") or base in ("cats.txt", "CONTENTS") or base.endswith(".py"):
                continue
            text, _ = decode_counting(zf.read(n))
            if per_line:
                for i, line in enumerate(text.splitlines()):
                    if line.strip():
                        rows.append((f"{n}:{i}", line))
            else:
                rows.append((n, text))
    return pd.DataFrame(rows, columns=["source_id", "text"])


def load_lines(path) -> pd.DataFrame:
    """One document per line (gensim's Lee corpus)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as fh:
        text, _ = decode_counting(fh.read())
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return pd.DataFrame({"source_id": [str(i) for i in range(len(lines))], "text": lines})


def load_jsonl(path, text_fields=("contents",), id_field="id") -> pd.DataFrame:
    """JSON Lines (CACM: ``id``/``contents``; BEIR: ``_id``/``title``+``text``)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    rows = []
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                o = json.loads(line)
                rows.append((str(o[id_field]), " ".join(str(o.get(f) or "") for f in text_fields)))
    return pd.DataFrame(rows, columns=["source_id", "text"])


def shared_corpora(data_dir) -> dict:
    """Every raw-text corpus of the project's shared data folder, by name (loaded lazily).

    Returns
    -------
    dict name -> zero-argument callable returning the DataFrame; only corpora whose files exist.
    """
    d = Path(data_dir)
    out = {}
    c = d / "corpora"
    if (c / "20news-bydate.tar.gz").exists():
        out["20news"] = lambda: load_20newsgroups(c / "20news-bydate.tar.gz")
    if (c / "reuters21578.tar.gz").exists():
        out["reuters21578"] = lambda: load_reuters21578(c / "reuters21578.tar.gz")
    for z in sorted((c / "nltk").glob("*.zip")) if (c / "nltk").exists() else []:
        out[f"nltk-{z.stem}"] = (lambda z=z: load_nltk_zip(z))
    for f in ("lee_background.cor", "lee.cor"):
        if (c / "gensim" / f).exists():
            out[f"gensim-{f}"] = (lambda f=f: load_lines(c / "gensim" / f))
    if (d / "ir" / "cacm" / "cacm.json").exists():
        out["cacm"] = lambda: load_jsonl(d / "ir" / "cacm" / "cacm.json")
    if (d / "ir" / "scifact" / "corpus.jsonl.gz").exists():
        out["scifact"] = lambda: load_jsonl(d / "ir" / "scifact" / "corpus.jsonl.gz", ("title", "text"), "_id")
    return out


def write_files(df: pd.DataFrame, dest) -> Path:
    """One file per document (the ``files`` format); file name = source_id (``/`` keeps folders)."""
    dest = Path(dest)
    for sid, text in zip(df["source_id"], df["text"]):
        p = dest / sid.replace(":", "_")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return dest


def write_jsonl(df: pd.DataFrame, dest, id_field="id", text_field="text") -> Path:
    """The ``jsonl`` format, one object ``{id_field, text_field}`` per document."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest, "w", encoding="utf-8") as fh:
        for sid, text in zip(df["source_id"], df["text"]):
            fh.write(json.dumps({id_field: sid, text_field: text}) + "\n")
    return dest


def default_data_dir() -> Path | None:
    """The shared data folder: ``$CUTEXT_DATA``, else ``../shared/data`` beside the checkout."""
    env = os.environ.get("CUTEXT_DATA")
    if env and Path(env).is_dir():
        return Path(env)
    here = Path(__file__).resolve().parents[1]
    for cand in (here.parent / "shared" / "data", here / ".devdata"):
        if cand.is_dir():
            return cand
    return None


