"""The public datasets the project tests, documents and benchmarks on: where to get them, and loaders.

:func:`fetch` gives the local path of a named dataset of :data:`DATASETS` (as scikit-learn's
``fetch_20newsgroups`` and ir_datasets do): a local copy first (``$CUTEXT_DATA``, the shared data folder
beside the checkout, the repository's bundled ``data/``), then the download cache (``data_home``, else
``$CUTEXT_DATA``, else ``~/.cache/cutext``), then a download from the original source into the cache,
verified against the sha256 recorded here.  What it returns is verified too (size always, sha256 once,
recorded beside a cache entry): a damaged cache entry is downloaded again, a damaged local copy refused.  Every location
uses the shared data folder's layout
(``corpora/20news-bydate.tar.gz``, ``bow/uci/docword.kos.txt.gz`` ...).  On the command line:
``python -m cutext.pipelines fetch NAME`` prints the path (``--list``: every dataset and where it is).

Each loader returns a pandas DataFrame ``(source_id: str, text: str, ...)`` in a fixed order, with
undecodable bytes replaced (latin-1 posts in 20 Newsgroups); :func:`write_files` and
:func:`write_jsonl` turn one into the reader formats of :mod:`cutext.stages.readers.files`.
"""
from __future__ import annotations

import difflib
import gzip
import hashlib
import json
import os
import re
import sys
import tarfile
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pandas as pd

from cutext.kernels._version import __version__
from cutext.stages.readers.base import decode_counting


def load_20newsgroups(path, subset: str = "all") -> pd.DataFrame:
    """20 Newsgroups "bydate" from ``20news-bydate.tar.gz``.

    Returns
    -------
    DataFrame ``(source_id, text, group, split)``: 18,846 posts for ``subset="all"`` (11,314 train,
    7,532 test); ``source_id`` is ``"<split>/<group>/<number>"``.  The original tarball
    (``20news-bydate-train/<group>/<number>``) and the shared folder's repack (the same under a
    ``20news-bydate/`` folder) read alike.
    """
    rows = []
    with tarfile.open(path, "r:*") as tar:
        for m in tar:
            if not m.isfile():
                continue
            parts = m.name.split("/")
            if len(parts) < 3 or not parts[-3].startswith("20news-bydate-"):
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


def shared_corpora(data_dir=None) -> dict:
    """Every raw-text corpus of the project's shared data folder, by name (loaded lazily).

    Parameters
    ----------
    data_dir : path, optional
        A folder in the shared data folder's layout; None: each corpus where :func:`fetch` finds it
        without downloading (a local copy or the cache).

    Returns
    -------
    dict name -> zero-argument callable returning the DataFrame; only corpora whose files exist.
    """
    if data_dir is None:
        out = {}
        for name, (dataset, load) in CORPORA.items():
            try:
                path = fetch(dataset, download=False)
            except DatasetNotFoundError:
                continue
            out[name] = (lambda load=load, path=path: load(path))
        return out
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
    """The shared data folder: ``$CUTEXT_DATA``, else :func:`shared_data_dir`."""
    env = os.environ.get("CUTEXT_DATA")
    if env and Path(env).is_dir():
        return Path(env)
    return shared_data_dir()


def shared_data_dir() -> Path | None:
    """The project's shared data folder: ``$CUTEXT_SHARED_DATA`` when set (``none`` or empty: there is
    none, as on a user's machine), else ``../shared/data`` beside the checkout, else its ``.devdata/``;
    None when there is no such folder."""
    env = os.environ.get("CUTEXT_SHARED_DATA")
    if env is not None:
        if env.strip().lower() in ("", "none", "0", "off"):
            return None
        return Path(env).expanduser() if Path(env).expanduser().is_dir() else None
    here = Path(__file__).resolve().parents[1]
    for cand in (here.parent / "shared" / "data", here / ".devdata"):
        if cand.is_dir():
            return cand
    return None


# ----------------------------------------------------------------------------- the registry

class DatasetNotFoundError(FileNotFoundError):
    """A dataset in no local copy nor the cache that cannot be downloaded here (``download=False``,
    ``CUTEXT_OFFLINE=1``, no network, or a file with no public download).  The message names every
    missing file, its URL (or how to build it) and the exact path where to put it; ``dataset`` is the
    dataset's name.  IPython and Jupyter show it as one line with the command that gets it, not a traceback."""

    dataset: str = ""
    reason: str = ""

    def _render_traceback_(self) -> list:
        """IPython's hook for an exception's display: one line (its message is about data, not code)."""
        if self.dataset not in DATASETS:
            return [f"DatasetNotFoundError: {self}"]
        return [f"DatasetNotFoundError: dataset {self.dataset!r} is not here ({self.reason}); "
                f"{how_to_get(self.dataset)} (or set CUTEXT_DATA to a folder holding it)"]


class DatasetChecksumError(ValueError):
    """A file whose size or sha256 is not the registry's: a download (deleted, never put in place), or a copy
    found in the cache or a local folder that is not downloaded again here (the message names the path, the
    expected and the found size and sha256, and how to repair it)."""


@dataclass(frozen=True)
class DataFile:
    """One file of a dataset.

    ``path`` is relative to a data folder (the shared data folder's layout, POSIX separators);
    ``size`` (bytes) and ``sha256`` are those of the shared folder's copy; ``urls`` the original
    source first, then mirrors (empty: no public download); ``also_sha256`` the checksums of other
    known-good copies, e.g. the original of an archive that the shared folder repacked.
    """

    path: str
    size: int
    sha256: str
    urls: tuple = ()
    also_sha256: tuple = ()


@dataclass(frozen=True)
class Dataset:
    """A named dataset: its ``files``; ``returns``, the path :func:`fetch` gives (its main file, whose
    companions lie beside it, or the folder of several files); ``build``, how to make the files that have
    no public download; ``bundled``, the folder of the repository's ``data/`` that holds the same files
    (a checkout only)."""

    name: str
    description: str
    licence: str
    files: tuple
    returns: str
    build: str = ""
    bundled: str = ""

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


_UCI = "https://archive.ics.uci.edu/ml/machine-learning-databases/bag-of-words/"
_NLTK = "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/corpora/"
_KENLM = "https://raw.githubusercontent.com/kpu/kenlm/master/lm/"
_GENSIM = "https://raw.githubusercontent.com/piskvorky/gensim/develop/gensim/test/test_data/"
_LDA = "https://raw.githubusercontent.com/lda-project/lda/develop/lda/tests/"
_SPHINX = "https://raw.githubusercontent.com/cmusphinx/pocketsphinx/master/test/unit/test_ngram/"
_ANSERINI_TOOLS = "https://raw.githubusercontent.com/castorini/anserini-tools/master/topics-and-qrels/"
_ABC_BUILD = ("KenLM's lmplz (https://github.com/kpu/kenlm) builds it from the lowercased, tokenized NLTK "
              "ABC corpus (dataset 'abc-tokens', arpa/lmplz/abc.tok.txt.gz): "
              "`zcat abc.tok.txt.gz | lmplz -o 3 | gzip > abc.o3.arpa.gz`")


def _file(path, size, sha256, *urls, also=()):
    return DataFile(path, size, sha256, tuple(urls), tuple(also))


def _nltk(stem, size, sha256, licence, what):
    return Dataset(f"nltk-{stem}", f"NLTK data: {what}", licence,
                   (_file(f"corpora/nltk/{stem}.zip", size, sha256, f"{_NLTK}{stem}.zip"),), f"corpora/nltk/{stem}.zip")


def _uci(corpus, what, docword_size, docword_sha, vocab_size, vocab_sha):
    docword = f"bow/uci/docword.{corpus}.txt.gz"
    return Dataset(corpus, f"UCI Bag of Words {what} (docword + vocab beside it)", "CC BY 4.0 (UCI ML repository)",
                   (_file(docword, docword_size, docword_sha, f"{_UCI}docword.{corpus}.txt.gz"),
                    _file(f"bow/uci/vocab.{corpus}.txt", vocab_size, vocab_sha, f"{_UCI}vocab.{corpus}.txt")), docword)


# Sizes and checksums are those of the shared data folder's copies.
DATASETS = {d.name: d for d in (
    Dataset("20newsgroups", "20 Newsgroups 'bydate': 18,846 posts, 20 groups (load_20newsgroups)", "none stated",
            (_file("corpora/20news-bydate.tar.gz", 15220073,
                   "4d7ab314bce6c8bcdf7c4bea64dfdf7c54f6507931362a0e8b1fdc64da5b6905",
                   "http://qwone.com/~jason/20Newsgroups/20news-bydate.tar.gz",
                   "https://ndownloader.figshare.com/files/5975967",
                   # the original, as scikit-learn's fetch_20newsgroups records it
                   also=("8f1b2514ca22a5ade8fbb9cfa5727df95fa587f4c87b786e15c759fa66d95610",)),),
            "corpora/20news-bydate.tar.gz"),
    Dataset("reuters21578", "Reuters-21578 Distribution 1.0: 22 SGML files, 21,578 stories (load_reuters21578)",
            "research use only (Reuters Ltd. and Carnegie Group)",
            (_file("corpora/reuters21578.tar.gz", 8157920,
                   "15fa9477852e51ce22594ebc859b7a9e519106189612220c7aeb018ad37a99fe",
                   "https://kdd.ics.uci.edu/databases/reuters21578/reuters21578.tar.gz",
                   "https://archive.ics.uci.edu/ml/machine-learning-databases/reuters21578-mld/reuters21578.tar.gz"),),
            "corpora/reuters21578.tar.gz"),
    _uci("kos", "KOS: D=3,430, V=6,906", 1053803, "6439c39f2fccb4876563e4b4c9628974d8ccbeada43d661292a5024911389e30",
         55467, "623b7b969793b32c4ea7d1ae8cd2e9ed99038bf51628f33f52349f9485aeab8e"),
    _uci("nips", "NIPS: D=1,500, V=12,419", 2288169, "d45f9f7ceeadf118117e14346f018273007b765593a4dbe02915d37a1faa58b7",
         100807, "be3f6337e3406ddc24837118e203da57c4c898ad5f6c9280908cd08a2609cf91"),
    _nltk("abc", 1487851, "129bb6001beb828049a90a59b7dd3c2f0594a47012e48fc5177dfae38e658565",
          "Australian Broadcasting Commission 2006, distributed with NLTK (no licence stated)",
          "ABC rural and science news, 2006"),
    _nltk("brown", 3314357, "9b275f9b3b95d7bd66ccfb7cd259f445a13bbe5d1f4107aba09fd3e8364bafa6",
          "non-commercial (Brown University; redistribution permitted)", "the Brown corpus, 500 POS-tagged texts"),
    _nltk("inaugural", 346476, "7c5fb5793e31fbeae12bf1aa0ffda5336468f07cedb50654c6d31ca384e2046b",
          "public domain", "US presidential inaugural addresses 1789-2021"),
    _nltk("state_union", 808757, "366c1dc82b2abf896f42b2ec50ba802a0141a29f75d29ca48a7a243ce5bfbe8d",
          "public domain", "State of the Union addresses 1945-2006"),
    _nltk("movie_reviews", 4004848, "a41211ae685019137410268134db6a1a14428c89b671eb83056151a878539008",
          "CC BY 4.0 (Pang and Lee)", "2,000 movie reviews, polarity dataset 2.0"),
    _nltk("webtext", 646297, "9e32dbae4879464b8f420a0dc721855bb26167b720d7695588d2ca2aeadf501a",
          "no licence stated (NLTK data)", "web text: forums, scripts, ads, reviews"),
    Dataset("lee", "gensim's Lee corpus: 300 + 50 news docs, one a line, and 50x50 human similarities (a folder)",
            "LGPL-2.1 (gensim test data)",
            (_file("corpora/gensim/lee_background.cor", 360082,
                   "5d78d6dafd953bbf65797bef09a9ffb9ec430583381be705f8fd460000f370fb", f"{_GENSIM}lee_background.cor"),
             _file("corpora/gensim/lee.cor", 24658,
                   "a878f9a58f6743c32985c56c2f2f75988386216b38a4023a01fd3bcf7884d93e", f"{_GENSIM}lee.cor"),
             _file("corpora/gensim/similarities0-1.txt", 8738,
                   "23762bc6b728897144dda3d324a2c032dc1e059e1009806226d64b6dd123ed79",
                   f"{_GENSIM}similarities0-1.txt")),
            "corpora/gensim"),
    Dataset("cacm", "CACM: 3,204 abstracts as JSON lines, 64 topics, qrels, Anserini's BM25 run (a folder)",
            "no licence stated (a classic IR test collection); Anserini files Apache-2.0",
            # also: the repository's data/cacm, whose 10 abstracts cut at a "<" are completed from the HTML files
            (_file("ir/cacm/cacm.json", 2197874, "e783a786c696b6150c7c50367c02df99889cca2951b0722e35d9571aa25e96d8",
                   also=("aeffc8dbade06762e813bca722d1fc3c433d9a448e4dbe889a3de4efd9bf33bf",)),
             _file("ir/cacm/topics.cacm.txt", 12445, "1dc7b94fbf4adeb0c49be44fc6d7802ddc7bc4ad1b869013af10d09b44019799",
                   f"{_ANSERINI_TOOLS}topics.cacm.txt"),
             _file("ir/cacm/qrels.cacm.txt", 14194, "359f77ee6aab89333745a7f25f56370268a493abe1baff76979ad37a4d5428ef",
                   f"{_ANSERINI_TOOLS}qrels.cacm.txt"),
             _file("ir/cacm/anserini-sample-run-cacm-bm25.txt", 70890,
                   "a787bd2b31df3e50c778288da5a5b0772a667805b4fffcde0e1a6f215afac3dc",
                   "https://raw.githubusercontent.com/castorini/anserini/master/src/test/resources/sample_runs/cacm/"
                   "cacm-bm25.txt")),
            "ir/cacm", build="cacm.json is cacm.tar.gz (dataset 'cacm-html') as JSON lines `{\"id\": \"CACM-NNNN\", "
            "\"contents\": <the text of CACM-NNNN.html>}`; the repository bundles it in data/cacm", bundled="cacm"),
    Dataset("cacm-html", "CACM as Anserini distributes it: 3,204 CACM-NNNN.html files", "no licence stated",
            (_file("ir/cacm/cacm.tar.gz", 808000, "4e318d8920a384dfe11f81410abdc19d96a0e23e5fb7832c385be75c7cb75bf9",
                   "https://raw.githubusercontent.com/castorini/anserini/master/src/main/resources/cacm/cacm.tar.gz"),),
            "ir/cacm/cacm.tar.gz"),
    Dataset("scifact", "BEIR SciFact: 5,183 abstracts, 300 test queries, qrels (a folder)", "CC BY-NC 2.0",
            (_file("ir/scifact/corpus.jsonl.gz", 2743271,
                   "814778f1becbf0bf197de6adf33148685d6b11e8c57676a842f2380bdfc9319d"),
             _file("ir/scifact/topics.test.tsv.gz", 11998,
                   "a624d39fa2a41da44b0148ac2b1c2cb9856ece2c4afbb6ac9360e8e524d66b4f",
                   f"{_ANSERINI_TOOLS}topics.beir-v1.0.0-scifact.test.tsv.gz"),
             _file("ir/scifact/qrels.test.txt", 5702,
                   "8b7315286f8dc823956025a1fc9c9ff0bfe142d7b409458ccd758cfa0713ccba",
                   f"{_ANSERINI_TOOLS}qrels.beir-v1.0.0-scifact.test.txt")),
            "ir/scifact", build="corpus.jsonl.gz is corpus.jsonl of BEIR's "
            "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/scifact.zip, gzipped; the "
            "repository bundles it in data/scifact", bundled="scifact"),
    Dataset("kenlm-test-arpa", "KenLM's test models: test.arpa (5-gram), test_nounk.arpa, toy0/toy1.arpa beside it",
            "LGPL-2.1 (KenLM)",
            (_file("arpa/kenlm/test.arpa", 2780, "fa7d176e45ce43669a4e057c73c112ffe5be047c33a63bb1be0406252976f75c",
                   f"{_KENLM}test.arpa"),
             _file("arpa/kenlm/test_nounk.arpa", 2694,
                   "9ad8674fb8e8c6465951384bc0236b15c98c1fdf75516df217b2e97c17aa1ba5",
                   f"{_KENLM}test_nounk.arpa"),
             _file("arpa/kenlm/toy0.arpa", 475, "3328482fc803054efbeef80afa04fed5be82d4d9b156a766ab2faac935bc256d",
                   f"{_KENLM}common/test_data/toy0.arpa"),
             _file("arpa/kenlm/toy1.arpa", 470, "5416f84195b4d6a4a1e781b15f8b13e76b65ab889438744c6d39b0c283b780e7",
                   f"{_KENLM}common/test_data/toy1.arpa")),
            "arpa/kenlm/test.arpa"),
    Dataset("pocketsphinx-lm", "CMU toolkit trigram models of PocketSphinx's tests: 100.lm.gz, turtle.lm, "
            "turtle.ug.lm (a folder)", "BSD-2-Clause (CMU Sphinx)",
            (_file("arpa/pocketsphinx/100.lm.gz", 17923,
                   "55164f8bdb6942a0acb48428afea073a670252104155eeb6e4264aa659a03fbf", f"{_SPHINX}100.lm.gz"),
             _file("arpa/pocketsphinx/turtle.lm", 12242,
                   "f90c8f7b216c32d381356612c230c82271eb63f27c4a6bddebcacfab04ccb375", f"{_SPHINX}turtle.lm"),
             _file("arpa/pocketsphinx/turtle.ug.lm", 1496,
                   "10a6c7b15adbfe1d72dc2d448ff2b4ee1781ef3f7febbf1aa0c26916788b424f", f"{_SPHINX}turtle.ug.lm")),
            "arpa/pocketsphinx"),
    Dataset("abc-o3-arpa", "3-gram ARPA model of the NLTK ABC corpus, built by KenLM lmplz: 28,592 / 275,002 / "
            "538,258 n-grams", "derived from NLTK's ABC corpus (Australian Broadcasting Commission 2006)",
            (_file("arpa/lmplz/abc.o3.arpa.gz", 8193721,
                   "d5e68383a7b5a474d676a9074dd01f0d16da4433eb7883303add683cb43a6011"),),
            "arpa/lmplz/abc.o3.arpa.gz", build=_ABC_BUILD),
    Dataset("abc-tokens", "the NLTK ABC corpus lowercased and tokenized, a sentence a line (abc-o3-arpa's input)",
            "derived from NLTK's ABC corpus (Australian Broadcasting Commission 2006)",
            (_file("arpa/lmplz/abc.tok.txt.gz", 1420267,
                   "1d33532ad184e9db07916334bba1f68d702cee12240ab77916ede17e8df253b5"),),
            "arpa/lmplz/abc.tok.txt.gz",
            build="the sentences of nltk-abc (corpora/nltk/abc.zip), lowercased and tokenized (punctuation split "
            "off), one a line, gzipped"),
    Dataset("inaugural-heldout", "664 held-out sentences (US inaugural addresses 2001-2009, tokenized) and "
            "KenLM's scores of them under abc-o3-arpa (the two .tsv files beside it)", "public domain",
            (_file("arpa/lmplz/heldout.inaugural2001-2009.tok.txt", 69990,
                   "2703ffa36d0ce0ecb3c3e7d7dca97fff71b6fca359472ab0b84354a87496d7b7"),
             _file("arpa/lmplz/expected_sentence_scores.kenlm-py.abc.o3.tsv", 77450,
                   "36eef53a40d01ba78cacab44c99324d3040009b4237d347ea43184ac8aa0c379"),
             _file("arpa/lmplz/expected_token_scores.kenlm-py.abc.o3.tsv", 24934,
                   "6ee0e37742ee4969d9b0881b680b0c8eddecbd8d6127590dba6892cb761dc360")),
            "arpa/lmplz/heldout.inaugural2001-2009.tok.txt",
            build="the 2001-2009 addresses of nltk-inaugural, lowercased and tokenized as abc-tokens; the .tsv "
            "files are the kenlm Python module's Model.score / full_scores of them under abc.o3.arpa.gz"),
    Dataset("lda-reuters", "395 Reuters stories in LDA-C format with their vocabulary (reuters.tokens) and "
            "titles beside it, from the lda package's tests", "MPL-2.0 (lda)",
            (_file("bow/lda_reuters/reuters.ldac", 375693,
                   "4bfe5b21ed263334ddf7af56f7b38632f6ccae7d9441c8b56071167841e71b5e", f"{_LDA}reuters.ldac"),
             _file("bow/lda_reuters/reuters.tokens", 32760,
                   "8fc788b258bb76f9e352885cc20971d64e0011b8d74781129d060818930e3d5a", f"{_LDA}reuters.tokens"),
             _file("bow/lda_reuters/reuters.titles", 31902,
                   "fac5f54e85f07852d0edaede84642806b08e3c437e24597f79aae0aa82d5d7ee", f"{_LDA}reuters.titles")),
            "bow/lda_reuters/reuters.ldac"),
)}

# shared_corpora's names -> (dataset, loader of the path fetch gives)
CORPORA = {
    "20news": ("20newsgroups", load_20newsgroups),
    "reuters21578": ("reuters21578", load_reuters21578),
    **{f"nltk-{s}": (f"nltk-{s}", load_nltk_zip)
       for s in ("abc", "brown", "inaugural", "movie_reviews", "state_union", "webtext")},
    "gensim-lee_background.cor": ("lee", lambda d: load_lines(d / "lee_background.cor")),
    "gensim-lee.cor": ("lee", lambda d: load_lines(d / "lee.cor")),
    "cacm": ("cacm", lambda d: load_jsonl(d / "cacm.json")),
    "scifact": ("scifact", lambda d: load_jsonl(d / "corpus.jsonl.gz", ("title", "text"), "_id")),
}


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "false", "no", "off")


def get_data_home(data_home=None) -> Path:
    """The download cache: ``data_home``, else ``$CUTEXT_DATA``, else ``$XDG_CACHE_HOME/cutext``
    (``~/.cache/cutext``).  Not created here."""
    if data_home is not None:
        return Path(data_home).expanduser()
    env = os.environ.get("CUTEXT_DATA")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "cutext"


def _dataset(name: str) -> Dataset:
    if name not in DATASETS:
        close = difflib.get_close_matches(str(name), list(DATASETS), n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(f"unknown dataset {name!r}{hint} (known: {', '.join(sorted(DATASETS))})")
    return DATASETS[name]


def _locations(ds: Dataset, data_home=None) -> list:
    """``(label, folder, {file path: local path}, returned path)`` of every place the dataset may be, in
    lookup order: the local copies, then the cache (a folder named twice is looked at once)."""
    roots = []
    env = os.environ.get("CUTEXT_DATA")
    if env:
        roots.append(("$CUTEXT_DATA", Path(env).expanduser()))
    shared = shared_data_dir()
    if shared is not None:
        roots.append(("the shared data folder", shared))
    out, seen = [], set()
    folder = Path(__file__).resolve().parents[1] / "data" / ds.bundled if ds.bundled else None
    if folder is not None and folder.is_dir():  # a checkout's data/<name> holds the same files, flat
        where = {f.path: folder / PurePosixPath(f.path).name for f in ds.files}
        returned = folder if any(f.path.startswith(ds.returns + "/") for f in ds.files) else \
            folder / PurePosixPath(ds.returns).name
        roots.append(("the repository's data/", (folder, where, returned)))
    roots.append(("the cache", get_data_home(data_home)))
    for label, root in roots:
        if isinstance(root, tuple):
            out.append((label, *root))
        elif os.path.abspath(root) not in seen:
            seen.add(os.path.abspath(root))
            out.append((label, root, {f.path: root / f.path for f in ds.files}, root / ds.returns))
    return out


def _found(ds: Dataset, data_home=None) -> Path | None:
    """The returned path of the first location holding every file of the dataset, or None (not verified:
    for listings)."""
    for _, _, where, returned in _locations(ds, data_home):
        if all(p.is_file() for p in where.values()):
            return returned
    return None


def locate(name: str, *, data_home=None) -> dict | None:
    """Where :func:`fetch` finds each file of a dataset without downloading, each verified as :func:`fetch`
    verifies it.

    Returns
    -------
    dict or None
        ``{path in the data layout (str): local path}`` for every file of the dataset, from the first
        location holding them all; None when none does.

    Raises
    ------
    ValueError
        Unknown name.
    DatasetChecksumError (ValueError)
        A file found whose size or sha256 is not the recorded one.
    """
    try:
        return dict(_lookup(_dataset(name), data_home, download=False)[0])
    except DatasetNotFoundError:
        return None


def fetch(name: str, *, data_home=None, download: bool = True) -> Path:
    """The local path of a named dataset of :data:`DATASETS`, downloaded into the cache once, and verified.

    Lookup order: a local copy (``$CUTEXT_DATA``, then the shared data folder of
    :func:`shared_data_dir`, then the repository's bundled ``data/`` for ``cacm`` and ``scifact``),
    then the cache (:func:`get_data_home`), then a download from the dataset's URLs into the cache (a
    tqdm bar on a terminal; written to a temporary name beside its place, its sha256 checked, then
    renamed, so the cache never holds a partial or unverified file).

    Every file returned is verified as pooch verifies its cache: its size on every use, its sha256 the
    first time it is used.  In the cache the sha256 found is recorded beside the file
    (``<file>.sha256``: sha256, size and mtime), so later uses compare the size and mtime alone; a local
    copy (which cutext does not own, e.g. the read-only shared folder) is hashed once per process.  A
    cache entry that does not match (a truncated file, another file) is downloaded again when it can be;
    a local copy that does not match, or a cache entry that cannot be downloaded here, is refused.

    Parameters
    ----------
    name : str
        A key of :data:`DATASETS` (``"20newsgroups"``, ``"kos"``, ``"abc-o3-arpa"`` ...;
        ``python -m cutext.pipelines fetch --list`` lists them).
    data_home : str or os.PathLike, optional
        The cache folder (default ``$CUTEXT_DATA``, else ``~/.cache/cutext``).
    download : bool
        False: never use the network (also when ``CUTEXT_OFFLINE=1`` is set).

    Returns
    -------
    pathlib.Path
        The dataset's main file (companions such as a UCI vocabulary lie beside it) or, for a
        dataset of several files (``cacm``, ``scifact``, ``lee``, ``pocketsphinx-lm``), their folder.

    Raises
    ------
    ValueError
        Unknown name (the message offers the close names).
    DatasetNotFoundError (FileNotFoundError)
        Not found and not downloadable here; the message names each missing file, its URL or how to
        build it, and the exact path where to put it.
    DatasetChecksumError (ValueError)
        A download whose sha256 is not the recorded one (the message names both; the download is deleted);
        a local copy, or a cache entry that is not downloaded again here, whose size or sha256 is not the
        recorded one (the message names the path, both sizes and both sha256, and the repair).
    """
    return _lookup(_dataset(name), data_home, download)[1]


def _lookup(ds: Dataset, data_home, download: bool) -> tuple[dict, Path]:
    """``({file path: local path}, returned path)`` of a dataset: the first location holding every file,
    verified (:func:`_mismatch`), else the cache, completed and repaired by downloads where allowed."""
    cache = get_data_home(data_home)
    for label, folder, where, returned in _locations(ds, data_home):
        if not all(p.is_file() for p in where.values()):
            continue
        if os.path.abspath(folder) == os.path.abspath(cache):
            break  # the cache: checked, and repaired where it can be, below
        bad = [(f, where[f.path], got) for f in ds.files if (got := _mismatch(where[f.path], f)) is not None]
        if bad:
            raise _damaged(ds, bad, f"{label} is not cutext's to repair: replace the file with a good copy "
                                    f"(`python -m cutext.pipelines fetch {ds.name}` downloads one into the cache), "
                                    "or hide the folder (CUTEXT_SHARED_DATA=none, CUTEXT_DATA unset)")
        return where, returned
    return {f.path: cache / f.path for f in ds.files}, _from_cache(ds, cache, download)


def _from_cache(ds: Dataset, cache: Path, download: bool) -> Path:
    """The dataset in the cache: its files verified (:func:`_mismatch`, recording the sha256 beside each),
    the missing and the damaged ones downloaded where allowed."""
    missing, bad = [], []
    for f in ds.files:
        p = cache / f.path
        if not p.is_file():
            missing.append(f)
        elif (got := _mismatch(p, f, record=True)) is not None:
            bad.append((f, p, got))
    if not missing and not bad:
        return cache / ds.returns
    need = missing + [f for f, _, _ in bad]
    no_url = [f for f in need if not f.urls]
    reason = ("download=False" if not download else "CUTEXT_OFFLINE=1" if _truthy(os.environ.get("CUTEXT_OFFLINE"))
              else f"{', '.join(PurePosixPath(f.path).name for f in no_url)} has no public download" if no_url
              else None)
    if reason is not None and bad:
        raise _damaged(ds, bad, f"it is not downloaded again here ({reason}): delete it and run "
                                f"`python -m cutext.pipelines fetch {ds.name}` where the network is reachable, or "
                                "put a good copy there")
    if reason is not None:
        raise _not_found(ds, cache, missing, reason)
    for f in need:
        _download(ds, f, cache)
    return cache / ds.returns


# sha256 of the local copies hashed in this process, by (path, size, mtime, inode)
_HASHED: dict = {}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _record_of(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _mismatch(path: Path, f: DataFile, record: bool = False) -> tuple[int, str] | None:
    """None when ``path`` is the registry's file ``f`` (its sha256 one of the known ones), else
    ``(size, sha256)`` found.  The size and mtime are compared on every call; the file is hashed when no
    earlier hash of the same size and mtime is known: the record beside it (``record``: a cache entry,
    whose record this writes) or this process's memory (a local copy)."""
    st = path.stat()
    known = (f.sha256, *f.also_sha256)
    key = (os.path.abspath(path), st.st_size, st.st_mtime_ns, st.st_ino)
    if record:
        try:
            rec = json.loads(_record_of(path).read_text(encoding="utf-8"))
            if (isinstance(rec, dict) and rec.get("sha256") in known and rec.get("size") == st.st_size
                    and rec.get("mtime_ns") == st.st_mtime_ns):
                return None
        except (OSError, ValueError):
            pass  # no record, or an unreadable one: hash the file
    elif _HASHED.get(key) in known:
        return None
    got = _sha256(path)
    if got not in known:
        return st.st_size, got
    _HASHED[key] = got
    if record:
        _write_record(path, got, st)
    return None


def _write_record(path: Path, sha256: str, st=None) -> None:
    """The record of a verified cache entry, ``<file>.sha256`` (written to a temporary name, then renamed);
    a cache it cannot be written to is hashed again on the next use instead."""
    st = st or path.stat()
    rec = _record_of(path)
    tmp = rec.with_name(f".{rec.name}.{uuid.uuid4().hex}.part")
    try:
        tmp.write_text(json.dumps({"sha256": sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}) + "\n",
                       encoding="utf-8")
        os.replace(tmp, rec)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _damaged(ds: Dataset, bad: list, repair: str) -> DatasetChecksumError:
    """The error for files found whose size or sha256 is not the registry's (``bad``: ``(file, path, (size,
    sha256) found)``)."""
    lines = [f"dataset {ds.name!r}: {len(bad)} file(s) are not the recorded ones:"]
    for f, p, (size, got) in bad:
        also = f" (or {', '.join(f.also_sha256)})" if f.also_sha256 else ""
        lines.append(f"  {p}: expected {f.size:,} bytes, sha256 {f.sha256}{also}; found {size:,} bytes, "
                     f"sha256 {got}")
    lines.append(f"The file was not used: {repair}.")
    return DatasetChecksumError("\n".join(lines))


def how_to_get(name: str) -> str:
    """One line saying how to get dataset ``name``: the command that downloads it
    (``run `python -m cutext.pipelines fetch NAME```), or, where a file has no public download, how to make it.

    Raises
    ------
    ValueError
        Unknown name (the message offers the close names).
    """
    ds = _dataset(name)
    if all(f.urls for f in ds.files):
        return f"run `python -m cutext.pipelines fetch {ds.name}`"
    return f"no public download; {ds.build}"


def not_found_name(message: str) -> str | None:
    """The dataset a :class:`DatasetNotFoundError`'s message names (its first words), or None."""
    m = re.match(r"dataset '([^']+)' not found", message)
    return m.group(1) if m and m.group(1) in DATASETS else None


def _not_found(ds: Dataset, cache: Path, missing: list, reason: str) -> DatasetNotFoundError:
    """The error for a dataset found nowhere: every missing file, where it comes from, where it goes."""
    looked = [f"{label} ({folder})" for label, folder, _, _ in _locations(ds, cache)]
    lines = [f"dataset {ds.name!r} not found: not in {', '.join(looked)}, and not downloaded ({reason})."]
    for f in missing:
        src = " or ".join(f.urls) if f.urls else "no public download (see below)"
        lines.append(f"  {PurePosixPath(f.path).name} ({f.size:,} bytes, sha256 {f.sha256[:12]}...): {src}")
        lines.append(f"    put it at {cache / f.path}")
    if any(not f.urls for f in missing) and ds.build:
        lines.append(f"  how to make it: {ds.build}")
    lines.append(f"Or set CUTEXT_DATA to a folder holding {PurePosixPath(ds.files[0].path).parent}/"
                 + ("" if all(not f.urls for f in missing) else
                    f", or run `python -m cutext.pipelines fetch {ds.name}` where the network is reachable") + ".")
    err = DatasetNotFoundError("\n".join(lines))
    err.dataset, err.reason = ds.name, reason
    return err


def _download(ds: Dataset, f: DataFile, cache: Path) -> Path:
    """Download ``f`` into ``cache`` from its first URL that answers; verified, then renamed into place."""
    import urllib.error

    dest = cache / f.path
    errors = []
    for url in f.urls:
        try:
            return _download_url(url, dest, f)
        except urllib.error.HTTPError as exc:
            errors.append(f"{url}: HTTP {exc.code} {exc.reason}")
        except (urllib.error.URLError, OSError) as exc:  # no network, timeouts: try the next URL
            errors.append(f"{url}: {getattr(exc, 'reason', None) or exc}")
    raise _not_found(ds, cache, [g for g in ds.files if g is f or not (cache / g.path).is_file()],
                     "download failed: " + "; ".join(errors))


def _download_url(url: str, dest: Path, f: DataFile) -> Path:
    """One download: to a temporary file beside ``dest``, hashed while written, renamed when its sha256 is
    one of the file's known ones.

    Raises
    ------
    DatasetChecksumError
        Another sha256 (the message names the URL, the expected and the got checksum); the temporary
        file is deleted.
    urllib.error.URLError, OSError
        The download failed (the temporary file is deleted).
    """
    import urllib.request

    from tqdm import tqdm

    dest.parent.mkdir(parents=True, exist_ok=True)
    # a unique name beside the file (same file system: the rename is atomic), created with the umask's
    # permissions so that a shared cache stays readable
    tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex}.part")
    h, n = hashlib.sha256(), 0
    try:
        req = urllib.request.Request(url, headers={"User-Agent": f"cutext/{__version__}"})
        with open(tmp, "xb") as out, urllib.request.urlopen(req, timeout=60) as resp:
            total = int(resp.headers.get("Content-Length") or 0) or None
            with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=dest.name,
                      disable=None, leave=False) as bar:
                if bar.disable:  # not a terminal (a log, a notebook): one line instead of a bar
                    print(f"cutext: downloading {url} -> {dest}", file=sys.stderr, flush=True)
                while chunk := resp.read(1 << 20):
                    out.write(chunk)
                    h.update(chunk)
                    n += len(chunk)
                    bar.update(len(chunk))
        got = h.hexdigest()
        if got not in (f.sha256, *f.also_sha256):
            want = " or ".join((f.sha256, *f.also_sha256))
            raise DatasetChecksumError(f"{url}: sha256 mismatch for {dest}: expected {want}, got {got} "
                                       f"({n:,} bytes); the download is deleted. The file at this URL is not the "
                                       "one cutext knows: check the source, or put a known copy at that path")
        os.replace(tmp, dest)
        _write_record(dest, got)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return dest


# ----------------------------------------------------------------------------- command line

def add_cli(subparsers) -> None:
    """Register ``fetch``: print the local path of each named dataset (downloading it once), or list them."""
    p = subparsers.add_parser(
        "fetch", help="print the path of a dataset (a local copy, the cache, or a download into the cache)",
        description="Print the local path of each named dataset, one a line: a local copy ($CUTEXT_DATA, the "
                    "shared data folder), else the cache (--data-home, $CUTEXT_DATA, ~/.cache/cutext), else a "
                    "download into the cache, sha256-checked. Without names, or with --list: every dataset, "
                    "its size, licence and where it is. CUTEXT_OFFLINE=1 never uses the network.")
    p.add_argument("names", nargs="*", metavar="NAME", help="dataset names (see --list)")
    p.add_argument("--list", action="store_true", help="list every dataset and where it is")
    p.add_argument("--data-home", default=None, metavar="DIR", help="the cache folder")
    p.add_argument("--no-download", action="store_true", help="never use the network")
    p.set_defaults(cli_main=_cli_fetch)


def _cli_fetch(args) -> int:
    if args.list or not args.names:
        print(f"{'name':<18} {'MB':>6}  {'where':<60}  licence")
        for ds in DATASETS.values():
            path = _found(ds, args.data_home)
            if path is not None:
                where = str(path)
            elif all(f.urls for f in ds.files):
                where = "not here: download with `fetch " + ds.name + "`"
            else:
                where = "not here: no public download (`fetch " + ds.name + "` says how to make it)"
            print(f"{ds.name:<18} {ds.size / 1e6:>6.1f}  {where:<60}  {ds.licence}")
    paths = [fetch(n, data_home=args.data_home, download=not args.no_download) for n in args.names]
    for path in paths:
        print(path)
    return 0


