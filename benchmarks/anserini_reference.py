"""Regenerate the Anserini reference files of tests/data/anserini (needs Java and Anserini's fat jar; the tests do not).

    pip download --no-deps pyserini==1.6.0 -d /tmp/pyserini    # the sdist holds anserini-1.7.1-fatjar.jar
    tar xzf /tmp/pyserini/pyserini-1.6.0.tar.gz -C /tmp/pyserini --wildcards '*fatjar.jar'
    python benchmarks/anserini_reference.py \
        --jar /tmp/pyserini/pyserini-1.6.0/pyserini/resources/jars/anserini-1.7.1-fatjar.jar

Writes, for CACM (the bundled data/cacm/cacm.json) and SciFact (BEIR corpus, title + "\\n" + text as Anserini's
BeirFlatCollection joins them):

* ``run.<name>.txt.gz``: ``SearchCollection -bm25 -bm25.k1 0.9 -bm25.b 0.4 -hits 100`` over an
  ``IndexCollection -collection JsonCollection -generator DefaultLuceneDocumentGenerator`` index (topics
  through ``-topicReader Cacm`` / ``TsvString``);
* ``tokens.<name>.tsv.gz``: ``kind id std ana`` a line for every document and topic: the first 16 hex digits of
  the SHA-1 of the tokens of Lucene's ``StandardTokenizer`` and of Anserini's ``DefaultEnglishAnalyzer``
  (tokens joined by U+001F), from benchmarks/anserini/Analyze.java, so a test compares tokens without Java.

With Anserini 1.7.1 the CACM run gives MAP 0.3123 and P@30 0.1942 at depth 1000 (its regression figures) on
the bundled text; the script prints the MAP at depth 100 of each run.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _sh(cmd, **kw):
    print("+", " ".join(map(str, cmd)), file=sys.stderr, flush=True)
    subprocess.run(list(map(str, cmd)), check=True, **kw)


def _digest(tokens) -> str:
    return hashlib.sha1("\x1f".join(tokens).encode("utf-8")).hexdigest()[:16]


def _write_gz(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    with gzip.GzipFile(tmp, "wb", mtime=0) as fh:  # mtime 0: the same input gives the same bytes
        fh.write(text.encode("utf-8"))
    os.replace(tmp, path)


def collections(data: Path, work: Path) -> dict:
    """{name: (collection folder, topics file, topic reader)} as JsonCollection inputs."""
    cacm = work / "cacm"
    cacm.mkdir()
    (cacm / "cacm.json").write_bytes((ROOT / "data" / "cacm" / "cacm.json").read_bytes())
    sci = work / "scifact"
    sci.mkdir()
    with gzip.open(data / "ir" / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as f, \
            open(sci / "scifact.jsonl", "w", encoding="utf-8") as out:
        for line in f:
            d = json.loads(line)
            out.write(json.dumps({"id": d["_id"], "contents": d["title"] + "\n" + d["text"]}) + "\n")
    topics = work / "topics.scifact.tsv"
    with gzip.open(data / "ir" / "scifact" / "topics.test.tsv.gz", "rt", encoding="utf-8") as f:
        topics.write_text(f.read(), encoding="utf-8")
    return {"cacm": (cacm, ROOT / "data" / "cacm" / "topics.cacm.txt", "Cacm"),
            "scifact": (sci, topics, "TsvString")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jar", required=True, help="anserini-1.7.1-fatjar.jar")
    ap.add_argument("--java", default="/usr/lib/jvm/temurin-25-jdk-amd64/bin/java")
    ap.add_argument("--data", default=os.environ.get("CUTEXT_SHARED_DATA", "/work/shared/data"))
    ap.add_argument("--out", default=str(ROOT / "tests" / "data" / "anserini"))
    ap.add_argument("--hits", type=int, default=100)
    a = ap.parse_args(argv)
    java, jar, out = Path(a.java), Path(a.jar).resolve(), Path(a.out)
    javac = java.with_name("javac")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        classes = work / "classes"
        _sh([javac, "-cp", jar, "-d", classes, *sorted((ROOT / "benchmarks" / "anserini").glob("*.java"))])
        cp = f"{jar}{os.pathsep}{classes}"
        for name, (coll, topics, reader) in collections(Path(a.data), work).items():
            idx, run = work / f"index.{name}", work / f"run.{name}.txt"
            _sh([java, "-cp", jar, "io.anserini.index.IndexCollection", "-collection", "JsonCollection",
                 "-generator", "DefaultLuceneDocumentGenerator", "-input", coll, "-index", idx, "-threads", 1,
                 "-storePositions", "-storeDocvectors", "-storeRaw"], stdout=subprocess.DEVNULL)
            _sh([java, "-cp", jar, "io.anserini.search.SearchCollection", "-index", idx, "-topics", topics,
                 "-topicReader", reader, "-output", run, "-bm25", "-bm25.k1", 0.9, "-bm25.b", 0.4,
                 "-hits", a.hits], stdout=subprocess.DEVNULL)
            _write_gz(out / f"run.{name}.txt.gz", run.read_text(encoding="utf-8"))
            parsed = work / f"topics.{name}.jsonl"
            _sh([java, "-cp", cp, "Topics", "Cacm" if reader == "Cacm" else "Tsv", topics, parsed])
            lines = []
            for kind, src in (("doc", next(coll.iterdir())), ("topic", parsed)):
                dump = work / f"tokens.{name}.{kind}.jsonl"
                _sh([java, "-cp", cp, "Analyze", src, dump], stderr=subprocess.DEVNULL)
                for line in dump.read_text(encoding="utf-8").splitlines():
                    d = json.loads(line)
                    lines.append(f"{kind}\t{d['id']}\t{_digest(d['std'])}\t{_digest(d['ana'])}\n")
            _write_gz(out / f"tokens.{name}.tsv.gz", "kind\tid\tstd\tana\n" + "".join(lines))
            print(f"{name}: {out / f'run.{name}.txt.gz'}, {len(lines)} token digests", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
