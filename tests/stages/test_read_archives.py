"""Tests for cutext.stages.readers.files: archives as collections (tar, zip; members, notes, globs over members,
the real 20 Newsgroups and Reuters archives) and literal paths against globs. The other formats are in
``test_read.py``; the documents are the first 50 of the bundled CACM collection, as there.
"""

from __future__ import annotations

import gzip
import io as _io
import tarfile
import zipfile
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from cutext import pipelines
from cutext.stages.readers.base import CorpusError
from cutext.stages.readers.files import detect_format, plan
from cutext.stages.readers.source import read_corpus
from tests.stages.read_helpers import CACM, assert_docs, build, cacm_docs, lines_bytes, read_docs

from helpers import assert_same_index, need_data, read_index


@pytest.fixture(scope="module")
def cacm():
    """(ids, texts) of the first 50 CACM documents; texts on one line, whitespace collapsed."""
    return cacm_docs()


# ----------------------------------------------------------------------------- archives




ARCHIVE_KINDS = ["tar", "tar.gz", "tgz", "tar.bz2", "tar.xz", "zip"]


def _add_tar(tf, name, data=b"", kind=tarfile.REGTYPE, linkname=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    info.linkname = linkname
    tf.addfile(info, _io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def _write_archive(path: Path, members, extras=True):
    """An archive of ``members`` ([(name, bytes)], in order) plus entries that are no documents:
    directories, hidden members, a dataset marker and (tar) a symlink."""
    noise_dirs = ["./docs/", "docs/sub/"]
    noise = [(".hidden", b"hidden file"), ("docs/.DS_Store", b"x"), ("docs/.git/config", b"x"),
             ("docs/_SUCCESS", b"")]
    if path.suffix == ".zip":
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            if extras:
                for d in noise_dirs:
                    zf.writestr(d.removeprefix("./"), b"")
            for i, (name, data) in enumerate(members):
                zf.writestr(name, data)
                if extras and i == 3:
                    for n, d in noise:
                        zf.writestr(n, d)
        return
    mode = {"tar": "w", "tar.gz": "w:gz", "tgz": "w:gz", "tar.bz2": "w:bz2", "tar.xz": "w:xz"}[
        path.name.split(".", 1)[1]]
    with tarfile.open(path, mode) as tf:
        if extras:
            for d in noise_dirs:
                _add_tar(tf, d.rstrip("/"), kind=tarfile.DIRTYPE)
        for i, (name, data) in enumerate(members):
            _add_tar(tf, ("./" + name) if i % 2 else name, data)   # "./" prefixes are dropped
            if extras and i == 3:
                for n, d in noise:
                    _add_tar(tf, n, d)
                _add_tar(tf, "docs/link", kind=tarfile.SYMTYPE, linkname="000.txt")


def _cacm_members(ids, texts):
    return [(f"docs/{i:03d}_{d}.txt" if i < 40 else f"docs/sub/{i:03d}_{d}.txt", t.encode("utf-8"))
            for i, (d, t) in enumerate(zip(ids, texts))]


@pytest.mark.parametrize("kind", ARCHIVE_KINDS)
def test_archive_one_document_per_member(tmp_path, cacm, kind):
    ids, texts = cacm
    members = _cacm_members(ids, texts)
    p = tmp_path / f"corpus.{kind}"
    _write_archive(p, members)
    assert detect_format([str(p)], False) == "files"
    df = read_docs(p)
    assert df.attrs["format"] == "files"
    assert_docs(df, [m for m, _ in members], texts)
    # small blocks: members grouped into several partitions where the archive allows random
    # access (tar, zip); a compressed tar is one streamed partition; same documents either way
    df2 = read_docs(p, blocksize=2000)
    assert_docs(df2, [m for m, _ in members], texts)
    if kind in ("tar", "zip"):
        assert df2.attrs["npartitions"] > 5
    else:
        assert df2.attrs["npartitions"] == 1


@pytest.mark.parametrize("kind", ["tar", "tar.gz", "zip"])
def test_archive_as_lines(tmp_path, cacm, kind):
    ids, texts = cacm
    members = [("a.txt", lines_bytes(texts[:20])), ("dir/b.txt.gz", gzip.compress(lines_bytes(texts[20:])))]
    p = tmp_path / f"lines.{kind}"
    _write_archive(p, members, extras=False)
    df = read_docs(p, format="lines")
    sids = [f"a.txt:{i}" for i in range(20)] + [f"dir/b.txt.gz:{i}" for i in range(len(texts) - 20)]
    assert_docs(df, sids, texts)


def test_archives_inside_a_directory_and_table_formats(tmp_path, cacm):
    ids, texts = cacm
    root = tmp_path / "mixed"
    root.mkdir()
    (root / "a.txt").write_text(texts[0])
    _write_archive(root / "b.zip", [("x.txt", texts[1].encode()), ("y/z.txt", texts[2].encode())], extras=False)
    (root / "c.txt").write_text(texts[3])
    df = read_docs(root)
    assert_docs(df, ["a.txt", "b.zip/x.txt", "b.zip/y/z.txt", "c.txt"], texts[:4])
    with pytest.raises(CorpusError, match=r"b\.zip: archives are read with format 'files'.*not 'jsonl'"):
        read_corpus(root / "b.zip", format="jsonl")


@pytest.mark.parametrize("kind", ["tar.gz", "zip", "tar"])
def test_corrupt_archive_names_it(tmp_path, cacm, kind):
    members = _cacm_members(*cacm)
    good = tmp_path / f"good.{kind}"
    _write_archive(good, members)
    data = good.read_bytes()
    p = tmp_path / f"bad.{kind}"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorpusError, match=rf"bad\.{kind.replace('.', r'[.]')}"):
        read_docs(p)


@pytest.mark.parametrize("kind", ARCHIVE_KINDS)
def test_archive_members_glob_leaves_the_readme_out(tmp_path, cacm, kind):
    """``members=`` keeps the members matching an fnmatch glob (or any of a list), on the member path
    without its ``./``; '*' also matches '/'; the noise rules still apply to what matches."""
    import warnings

    from cutext.stages.readers.base import ArchiveMemberWarning

    ids, texts = cacm
    docs = _cacm_members(ids, texts)[:12] + _cacm_members(ids, texts)[40:42]
    members = [("README", b"About this corpus.")] + docs
    p = tmp_path / f"corpus.{kind}"
    _write_archive(p, members)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ArchiveMemberWarning)   # the tar's symbolic link among the noise
        # without members=, the README above the documents' folder is left out (test_archive_notes_...)
        assert read_docs(p)["source_id"].iloc[0] == "docs/000_CACM-2636.txt"
    want = [m for m, _ in docs]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ArchiveMemberWarning)   # a member left out is not warned about
        assert_docs(read_docs(p, members="*/*.txt"), want, texts[:12] + texts[40:42])
        assert_docs(read_docs(p, members="*/*.txt", blocksize=2000), want, texts[:12] + texts[40:42])
        got = read_docs(p, members=["docs/sub/*", "README"])
    assert got["source_id"].tolist() == ["README"] + want[-2:]
    lines = read_docs(p, members=("README",), format="lines")
    assert lines["source_id"].tolist() == ["README:0"] and lines["text"].tolist() == ["About this corpus."]


@pytest.mark.parametrize("kind", ["tar", "tar.gz", "zip"])
@pytest.mark.parametrize("fmt", ["files", "lines"])
def test_archive_notes_above_the_documents_folders_are_left_out(tmp_path, cacm, kind, fmt):
    """BBC's layout: ``bbc/README.TXT`` beside the folders ``bbc/<topic>/`` of the documents is a note about the
    collection, not a document (one warning names it); a README among documents of its own folder (Reuters'
    ``README.txt`` among the ``.sgm`` files) or in a collection of READMEs stays a document."""
    import warnings

    from cutext.stages.readers.base import ArchiveMemberWarning

    ids, texts = cacm
    docs = [(f"bbc/{'tech' if i % 2 else 'sport'}/{i:03d}.txt", t.encode()) for i, t in enumerate(texts[:6])]
    notes = [("bbc/README.TXT", b"Consists of 2225 documents from the BBC news website"),
             ("bbc/LICENSE", b"All rights, including copyright, in the content belong to the BBC."),
             ("bbc/Changes.md", b"2006: first release")]
    p = tmp_path / f"bbc.{kind}"
    _write_archive(p, notes[:1] + docs[:3] + notes[1:] + docs[3:], extras=False)
    with pytest.warns(ArchiveMemberWarning, match=r"bbc\.[a-z.]+: left out 3 member\(s\) that describe the "
                                                  r"collection, not documents of it: 'bbc/README.TXT', 'bbc/LICENSE'"):
        got = read_docs(p, format=fmt)
    if fmt == "files":
        assert_docs(got, [m for m, _ in docs], texts[:6])
    else:
        assert got["source_id"].tolist() == [f"{m}:0" for m, _ in docs]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ArchiveMemberWarning)
        # members= chooses alone; the rule does not apply where a README may be a document
        assert read_docs(p, members="*")["source_id"].iloc[0] == "bbc/README.TXT"
        flat = tmp_path / f"reuters.{kind}"
        _write_archive(flat, [("r/README.txt", b"Reuters-21578 text categorization collection")]
                       + [(f"r/reut2-{i:03d}.sgm", t.encode()) for i, t in enumerate(texts[:3])], extras=False)
        assert read_docs(flat)["source_id"].tolist() == ["r/README.txt"] + [f"r/reut2-{i:03d}.sgm" for i in range(3)]
        repos = tmp_path / f"repos.{kind}"
        _write_archive(repos, [(f"repo{i}/README.md", t.encode()) for i, t in enumerate(texts[:3])], extras=False)
        assert len(read_docs(repos)) == 3


def test_collection_notes_rule():
    from cutext.stages.readers.base import collection_notes

    assert collection_notes(["bbc/README.TXT", "bbc/business/001.txt", "bbc/tech/002.txt"]) == {0}
    assert collection_notes(["README", "licence.txt", "CHANGELOG", "a/1.txt", "b/c/2.txt"]) == {0, 1, 2}
    assert collection_notes(["README", "a/1.txt", "notes.txt"]) == set()    # a document beside it
    assert collection_notes(["a/README", "b/1.txt"]) == set()               # no document below its folder
    assert collection_notes(["readme_first/1.txt", "READMEs.txt", "a/2.txt", "changes-of-state/3.txt"]) == set()


@pytest.mark.parametrize("kind", ["tar", "tar.gz", "zip"])
def test_archive_members_pattern_matching_nothing_names_the_archive(tmp_path, cacm, kind):
    p = tmp_path / f"corpus.{kind}"
    _write_archive(p, _cacm_members(*cacm)[:5], extras=False)
    with pytest.raises(CorpusError, match=rf"corpus\.{kind.replace('.', r'[.]')}: members='\*\.md' matches no "
                                          r"member of this archive \(its members are named like 'docs/000_"):
        read_docs(p, members=["*/*.txt", "*.md"])   # a compressed tar: when it is read
    with pytest.raises(CorpusError, match="matches no member"):
        read_docs(p, members="DOCS/*")   # case-sensitive


def test_archive_members_bad_values_and_inputs_without_an_archive_are_refused(tmp_path, cacm):
    from cutext.stages.readers.frames import frame_source

    p = tmp_path / "corpus.zip"
    _write_archive(p, _cacm_members(*cacm)[:3], extras=False)
    for bad in ([], "", ["*.txt", ""], 3, [b"*.txt"]):
        with pytest.raises(ValueError, match="members must be a glob pattern"):
            read_corpus(p, members=bad)
    with pytest.raises(CorpusError, match=r"cacm\.json: members=\['\*\.txt'\] selects archive members, but this "
                                          "input holds no archive"):
        read_corpus(CACM, members="*.txt")
    with pytest.raises(ValueError, match=r"members='\*\.txt'.*meaningless for a frame"):
        frame_source(pd.DataFrame({"text": ["a"]}), members="*.txt")
    # every pipeline takes it: lda forwards reader options, the others name them
    for name in ("bm25", "cluster", "ngram", "lda"):
        assert "members" in pipelines.pipeline_keywords(pipelines.pipeline_function(name)), name


def test_archive_members_through_a_pipeline(tmp_path, cacm):
    ids, texts = cacm
    p = tmp_path / "bbc.zip"
    _write_archive(p, [("README.TXT", b"BBC news articles, 5 topics")] + _cacm_members(ids, texts)[:6], extras=False)
    r = pipelines.run("bm25", p, out=tmp_path / "idx", members="*/*.txt", backend="cpu", progress=False)
    index = read_index(r.path)
    assert index["docs"]["source_id"].tolist() == [m for m, _ in _cacm_members(ids, texts)[:6]]
    c = pipelines.run("cluster", p, out=tmp_path / "cl", members=["*/*.txt"], backend="cpu", progress=False)
    assert c.counts["n_docs"] == 6
    with pytest.raises(CorpusError, match=r"bbc\.zip: members='\*\.md' matches no member"):
        pipelines.run("bm25", p, out=tmp_path / "idx2", members="*.md", backend="cpu", progress=False)


def _file_members(tar_path: Path) -> list[str]:
    """Regular, non-hidden file members of a tar, by Python's tarfile (the oracle)."""
    with tarfile.open(tar_path) as tf:
        return [m.name for m in tf if m.isreg() and not any(c.startswith(".") for c in m.name.split("/"))]


@pytest.mark.slow
def test_20news_archive_indexes_its_posts_and_a_zip_gives_the_same_index(tmp_path, news20):
    """The 20 Newsgroups "bydate" tarball is its 18,846 posts (the data README's count), and a zip
    of the same members, read in several partitions, gives the same index."""
    names = _file_members(news20)
    assert len(names) == 18846
    r = build(news20, tmp_path / "tar-index")
    assert r.counts["n_docs"] == len(names) and r.counts["n_empty_docs"] == 0
    tar_index = read_index(tmp_path / "tar-index")
    assert tar_index["docs"]["source_id"].astype(str).tolist() == names
    zpath = tmp_path / "20news.zip"
    with tarfile.open(news20) as tf, zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as zf:
        for m in tf:
            if m.isreg():
                zf.writestr(m.name, tf.extractfile(m).read())
    r2 = build(zpath, tmp_path / "zip-index", blocksize=8 << 20)
    assert r2.counts["partitions"] > 1
    assert_same_index(tar_index, read_index(tmp_path / "zip-index"))


def test_reuters_archive_one_document_per_member():
    """Reuters-21578 ships as 22 SGML files of many articles each plus documentation files: read as
    an archive, it is one document per file member (``datasets.load_reuters21578`` gives articles)."""
    p = need_data("reuters21578")
    names = _file_members(p)
    df = read_docs(p)
    assert df["source_id"].astype(str).tolist() == names
    assert sum(n.endswith(".sgm") for n in names) == 22


# ----------------------------------------------------------------------------- literal paths win over globs

def test_existing_path_is_literal_not_a_glob(tmp_path):
    (tmp_path / "a[1].txt").write_text("literal one\nliteral two\n")
    (tmp_path / "a1.txt").write_text("globbed\n")
    lit = str(tmp_path / "a[1].txt")
    assert read_docs(lit)["text"].tolist() == ["literal one", "literal two"]
    assert read_docs(lit, glob=False)["text"].tolist() == ["literal one", "literal two"]
    df = read_docs(lit, glob=True)      # forced: the pattern matches a1.txt only (a collection: files)
    assert df["source_id"].tolist() == ["a1.txt"] and df["text"].tolist() == ["globbed\n"]
    # a pattern that names no existing path is still a glob
    assert read_docs(str(tmp_path / "a?.txt"))["source_id"].tolist() == ["a1.txt"]
    with pytest.raises(FileNotFoundError, match=r"a\?\.txt.*glob=False"):
        read_corpus(str(tmp_path / "a?.txt"), glob=False)
    with pytest.raises(ValueError, match="glob must be None"):
        read_corpus(lit, glob="yes")
    _, pieces, _ = plan([lit, str(tmp_path / "a1.txt")])
    assert [f.rsplit("/", 1)[-1] for p in pieces for f in p.paths] == ["a[1].txt", "a1.txt"]


def test_glob_reaches_the_reader_from_every_text_pipeline(tmp_path):
    (tmp_path / "a[1].txt").write_text("alpha beta gamma\nbeta gamma delta\n")
    (tmp_path / "a1.txt").write_text("other words only here\n")
    lit = str(tmp_path / "a[1].txt")
    kw = dict(backend="cpu", progress=False)
    for glob, n in ((None, 2), (True, 1)):
        r = pipelines.run("bm25", lit, out=tmp_path / f"bm25-{glob}", scheduler="sync", glob=glob, **kw)
        assert r.counts["n_docs"] == n
        r = pipelines.run("cluster", lit, out=tmp_path / f"cl-{glob}", min_len=1, stopwords=None, glob=glob, **kw)
        assert r.counts["n_docs"] == n
    r = pipelines.run("lda", lit, out=tmp_path / "lda", K=2, iterations=2, glob=False, **kw)
    assert r.counts["n_docs"] == 2
    arpa = tmp_path / "lm.arpa"
    arpa.write_text("\\data\\\nngram 1=5\n\n\\1-grams:\n-2.0\t<unk>\n-1.0\t<s>\n-0.5\t</s>\n-0.6\talpha\n"
                    "-0.6\tbeta\n\n\\end\\\n")
    for glob, n in ((None, 2), (True, 1)):
        r = pipelines.run("ngram", lit, out=tmp_path / f"ng-{glob}", model=arpa, glob=glob, **kw)
        assert r.counts["n_docs"] == n
    from cutext.pipelines.__main__ import main

    for flag, n in (("auto", 2), ("on", 1), ("off", 2)):
        assert main(["bm25", lit, "--out", str(tmp_path / f"cli-{flag}"), "--backend", "cpu", "--scheduler", "sync",
                     "--no-progress", "--glob", flag]) == 0
        assert read_index(tmp_path / f"cli-{flag}")["docs"].shape[0] == n
        assert main(["cluster", lit, "--out", str(tmp_path / f"clu-{flag}"), "--backend", "cpu", "--min-len", "1",
                     "--no-progress", "--glob", flag]) == 0
        assert main(["ngram", lit, "--model", str(arpa), "--out", str(tmp_path / f"ngc-{flag}"), "--backend", "cpu",
                     "--no-progress", "--glob", flag]) == 0
        assert pq.read_table(tmp_path / f"ngc-{flag}" / "scores.parquet").num_rows == n
    with pytest.raises(FileNotFoundError):
        pipelines.run("lda", str(tmp_path / "a?.txt"), out=tmp_path / "lda2", K=2, iterations=2, glob=False, **kw)


