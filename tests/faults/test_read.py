"""Faults of the readers on the CPU path: every bad input gives the right documents or a clear error
(or warning) naming the file, the archive member or the parameter.

Realistic inputs come from the shared data (20 Newsgroups, Reuters-21578, the NLTK zips, the Lee
corpus, CACM, SciFact); malformed ones are small files crafted in ``tmp_path``.  Each case:

1. binary or undecodable input read as text warns (``BinaryInputWarning``), once per file;
2. zip / gz bombs stop at ``max_ratio`` with an error naming the archive, member and ratio;
3. FIFOs, devices and sockets are refused without being opened;
4. raw exceptions become errors naming the row, member or parameter (lone surrogates, non-UTF-8
   zip names, unknown codecs, null ids, ``text_column`` for plain text);
5. archive members skipped (traversal names, links) are warned about, duplicate names get ``#k``.
"""
from __future__ import annotations

import concurrent.futures
import gzip
import io
import json
import os
import shutil
import socket
import stat
import tarfile
import warnings
import zipfile

import dask
import pandas as pd
import pytest

from cutext.pipelines.datasets import DATASETS
from cutext.stages.readers.base import (
    DEFAULT_MAX_RATIO,
    ArchiveMemberWarning,
    BinaryInputWarning,
    CorpusError,
    ExpansionError,
    InputWarning,
    binary_reason,
    text_array,
)
from cutext.stages.readers.files import assign_doc_ids
from cutext.stages.readers.frames import FrameError, frame_source
from cutext.stages.readers.source import read_corpus

from helpers import MISSING_DATA, need_data


def read_docs(path, **kw) -> pd.DataFrame:
    """read_corpus + assign_doc_ids on the synchronous scheduler, computed."""
    with dask.config.set(scheduler="synchronous"):
        ddf, pieces, _ = read_corpus(path, **kw)
        out, _ = assign_doc_ids(ddf, pieces)
        return out.compute()


def input_warnings(record) -> list:
    return [w for w in record if issubclass(w.category, InputWarning)]


@pytest.fixture(scope="module")
def lee_text() -> bytes:
    return (need_data("lee") / "lee_background.cor").read_bytes()


def _add_tar(tf, name, data=b"", kind=tarfile.REGTYPE, linkname=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    info.linkname = linkname
    tf.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


# ----------------------------------------------------------------------------- 1. binary read as text

@pytest.mark.slow
def test_tarball_renamed_txt_warns_once_naming_the_file(tmp_path, news20):
    """The 20 Newsgroups tarball renamed .txt was 7,602 line documents of replaced bytes, silently."""
    p = tmp_path / "news.txt"
    shutil.copyfile(news20, p)
    with pytest.warns(BinaryInputWarning) as rec:
        df = read_docs(p, blocksize=4 << 20)   # several pieces: still one warning for the file
    binary = [w for w in rec if issubclass(w.category, BinaryInputWarning)]
    assert len(binary) == 1
    msg = str(binary[0].message)
    assert msg.startswith(str(p)) and "gzip" in msg and "suffix" in msg
    assert int(df["replaced"].sum()) > 0   # still read as asked: the warning tells, it does not refuse


def test_uncompressed_tar_renamed_txt_warns_on_nul_bytes(tmp_path, lee_text):
    """An uncompressed tar of real text is valid UTF-8 (NUL is UTF-8), so only the NUL rule sees it."""
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w") as tf:
        _add_tar(tf, "lee.cor", lee_text)
    p = tmp_path / "lee.txt"
    p.write_bytes(tar.getvalue())
    with pytest.warns(BinaryInputWarning, match=r"lee\.txt: read as text .*(tar|NUL)"):
        read_docs(p)
    assert binary_reason(tar.getvalue()[:8192], len(tar.getvalue()), 0) == "it starts like a tar file"
    assert "NUL" in binary_reason(b"abc\0def", 7, 0, file_start=False)


def test_undecodable_share_over_one_percent_warns_under_does_not(tmp_path, lee_text):
    text = lee_text[:200_000]
    lines = text.split(b"\n")

    def damaged(every: int) -> bytes:   # one 0xFF byte (never UTF-8) every `every` bytes
        out = bytearray(text)
        out[::every] = b"\xff" * len(out[::every])
        return bytes(out).replace(b"\xff\n", b"\xff ")   # keep the line structure

    bad = tmp_path / "bad.txt"
    bad.write_bytes(damaged(50))              # 2 % replaced
    with pytest.warns(BinaryInputWarning, match=r"bad\.txt: .*2\.0 %\) are undecodable"):
        df = read_docs(bad)
    assert int(df["replaced"].sum()) == len(text[::50])
    ok = tmp_path / "ok.txt"
    ok.write_bytes(damaged(500))              # 0.2 % replaced: a few stray bytes are not a wrong file
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputWarning)
        df = read_docs(ok)
    assert int(df["replaced"].sum()) == len(text[::500]) and len(df) == len(lines) - (lines[-1] == b"")


def test_binary_members_of_an_archive_warn_once_for_the_archive(tmp_path, lee_text):
    p = tmp_path / "mixed.zip"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("lee.txt", lee_text)
        zf.writestr("a.png", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
        zf.writestr("b.txt", gzip.compress(lee_text[:5000]))   # gzip data without its .gz suffix
    with pytest.warns(BinaryInputWarning) as rec:
        df = read_docs(p)
    binary = [str(w.message) for w in rec if issubclass(w.category, BinaryInputWarning)]
    assert len(binary) == 1
    assert binary[0].startswith(f"{p}: member 'a.png'") and "PNG" in binary[0] and "1 more member" in binary[0]
    assert df["source_id"].tolist() == ["lee.txt", "a.png", "b.txt"]


@pytest.mark.slow
def test_real_corpora_do_not_warn(shared_data):
    """The rule must stay silent on real text: every corpus of the shared data, as the readers take it."""
    inputs = [("corpora/20news-bydate.tar.gz", {}), ("corpora/reuters21578.tar.gz", {}),
              ("corpora/gensim/lee_background.cor", {}), ("corpora/gensim/lee.cor", {}),
              ("ir/cacm/cacm.json", {}), ("ir/cacm/cacm.tar.gz", {}), ("ir/scifact/corpus.jsonl.gz", {}),
              ("bow/uci/docword.kos.txt.gz", {}), ("arpa/lmplz/abc.o3.arpa.gz", {}),
              ("corpora/reuters21578.tar.gz", {"format": "lines"})]
    inputs += [(f.path, {}) for d in DATASETS.values() if d.name.startswith("nltk-") for f in d.files]
    absent = sorted({d.name for rel, _ in inputs if not (shared_data / rel).exists()
                     for d in DATASETS.values() if any(f.path == rel for f in d.files)})
    inputs = [(rel, kw) for rel, kw in inputs if (shared_data / rel).exists()]
    if len(inputs) < 10:  # the bundled CACM and SciFact alone: the shared corpora are not on this machine
        pytest.skip(MISSING_DATA + ", ".join(absent))
    read = 0
    for rel, kw in inputs:
        p = shared_data / rel
        with warnings.catch_warnings():
            warnings.simplefilter("error", InputWarning)
            # a README above the documents' folders (movie_reviews) is left out, saying so: not a false alarm
            warnings.filterwarnings("ignore", message=".*describe the collection, not documents", category=InputWarning)
            df = read_docs(p, **kw)
        assert len(df) > 0, rel
        read += 1
    assert read >= 10


# ----------------------------------------------------------------------------- 2. bombs

MIB = 1 << 20


def test_zip_bomb_is_refused_before_reading(tmp_path):
    p = tmp_path / "bomb.zip"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as zf, zf.open("zeros.txt", "w") as fh:
        for _ in range(32):
            fh.write(b"\0" * MIB)
    assert p.stat().st_size < 100_000
    with pytest.raises(ExpansionError, match=r"bomb\.zip: member 'zeros\.txt': expands more than max_ratio=100 "
                                             r"times \(33,554,432 bytes .*\d+x\).*max_ratio="):
        read_corpus(p)   # the member list declares it: refused while planning, nothing inflated
    assert DEFAULT_MAX_RATIO == 100
    with pytest.warns(BinaryInputWarning, match="member 'zeros.txt'.*NUL"):
        df = read_docs(p, max_ratio=None)   # the guard off: read, and warned about as binary
    assert len(df) == 1 and len(df["text"].iloc[0]) == 32 * MIB


@pytest.mark.parametrize("case", ["gz member in tar.gz", "tar.gz stream", "txt.gz file"])
def test_gz_bombs_stop_at_max_ratio_naming_archive_and_member(tmp_path, case):
    payload = b" " * (64 * MIB)
    if case == "gz member in tar.gz":
        p = tmp_path / "inner.tar.gz"
        with tarfile.open(p, "w:gz", compresslevel=0) as tf:   # stored: only the member's own gzip expands
            _add_tar(tf, "ok.txt", b"a real document")
            _add_tar(tf, "big.txt.gz", gzip.compress(payload))
        pattern = r"inner\.tar\.gz: member 'big\.txt\.gz': expands more than max_ratio=100 times"
    elif case == "tar.gz stream":
        p = tmp_path / "outer.tar.gz"
        with tarfile.open(p, "w:gz") as tf:
            _add_tar(tf, "big.txt", payload)
        pattern = r"outer\.tar\.gz: member 'big\.txt': expands more than max_ratio=100 times"
    else:
        p = tmp_path / "big.txt.gz"
        p.write_bytes(gzip.compress(payload))
        pattern = r"big\.txt\.gz: expands more than max_ratio=100 times \([\d,]+ bytes out of [\d,]+ compressed"
    with pytest.raises(ExpansionError, match=pattern):
        read_docs(p)
    with pytest.raises(ExpansionError, match="max_ratio=500 times"):
        read_docs(p, max_ratio=500)   # gzip of one byte repeated: ~1,000x
    df = read_docs(p, max_ratio=None)   # the guard off: the member is one document of 64 MiB
    assert df["text"].str.len().max() == 64 * MIB


@pytest.mark.slow
def test_real_compressed_corpora_pass_the_default_ratio(shared_data):
    for rel in ("corpora/20news-bydate.tar.gz", "ir/scifact/corpus.jsonl.gz", "corpora/nltk/brown.zip"):
        p = shared_data / rel
        if p.exists():
            assert len(read_docs(p, max_ratio=DEFAULT_MAX_RATIO)) > 0


@pytest.mark.parametrize("bad", [0.5, 0, "10", float("nan"), True])
def test_max_ratio_is_checked_before_any_work(tmp_path, bad):
    p = tmp_path / "a.txt"
    p.write_text("one line\n")
    with pytest.raises(ValueError, match="max_ratio must be a finite number >= 1"):
        read_corpus(p, max_ratio=bad)
    with pytest.raises(ValueError, match="max_ratio=5.*meaningless for a frame"):
        frame_source(pd.DataFrame({"text": ["a"]}), max_ratio=5)


# ----------------------------------------------------------------------------- 3. FIFOs, devices, sockets

def _within(seconds, fn, *args, **kw):
    """fn(*args) in a thread, failing (not hanging) if it does not finish: a FIFO opened would block."""
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        return pool.submit(fn, *args, **kw).result(timeout=seconds)
    finally:
        pool.shutdown(wait=False)


def _refusal(path, **kw) -> str:
    def go():
        try:
            read_corpus(path, **kw)
        except CorpusError as exc:
            return str(exc)
        return "no error"
    return _within(60, go)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_is_refused_without_being_opened(tmp_path):
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    msg = _refusal(fifo)
    assert msg.startswith(f"{fifo}: not a regular file but a FIFO (named pipe)")
    # inside a directory, and through a glob: the same
    (tmp_path / "a.txt").write_text("text\n")
    assert _refusal(tmp_path).startswith(f"{fifo}: not a regular file but a FIFO")
    assert _refusal(str(tmp_path / "*.txt")).startswith(f"{fifo}: not a regular file but a FIFO")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_devices_and_links_to_them_are_refused(tmp_path):
    assert _refusal("/dev/zero").startswith("/dev/zero: not a regular file but a character device")
    link = tmp_path / "zero.txt"
    link.symlink_to("/dev/zero")
    assert _refusal(link).startswith(f"{link}: not a regular file but a character device")


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="no Unix sockets")
def test_socket_is_refused(tmp_path):
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        assert _refusal(path).startswith(f"{path}: not a regular file but a socket")
    assert stat.S_ISSOCK(os.stat(path).st_mode)


# ----------------------------------------------------------------------------- 4. raw exceptions wrapped

def test_lone_surrogates_in_a_frame_name_the_row_and_id():
    # object columns: pandas' own string dtype (pyarrow) cannot even hold a lone surrogate
    df = pd.DataFrame({"id": ["d0", "d1", "d2"], "text": pd.Series(["fine", "also fine", "bad \udc80 byte"],
                                                                   dtype=object, index=[10, 11, 12])},
                      index=[10, 11, 12])
    with pytest.raises(FrameError, match=r"text column 'text': partition 0, row 2 \(index 12, id 'd2'\) holds a lone "
                                         r"surrogate "
                                         r"'\\udc80' at character 4"):
        frame_source(df).docs.compute()
    ids = pd.DataFrame({"id": pd.Series(["ok", "b\udcffd"], dtype=object), "text": ["a", "b"]})
    with pytest.raises(FrameError, match=r"id column 'id': partition 0, row 1 \(index 1\) holds a lone surrogate"):
        frame_source(ids).docs.compute()
    texts = ["one", "two \ud800"]
    with pytest.raises(ValueError, match=r"queries: row 1 holds a lone surrogate '\\ud800' at character 4"):
        text_array(texts, "queries")
    assert text_array(["one", None], "queries").to_pylist() == ["one", None]


def test_file_and_member_names_that_are_not_utf8_become_escaped_source_ids(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "plain.txt").write_text("plain")
    with open(os.path.join(os.fsencode(d), b"caf\xe9.txt"), "w") as fh:   # a Latin-1 file name
        fh.write("latin one name")
    df = read_docs(d)
    assert sorted(df["source_id"]) == ["caf\\xe9.txt", "plain.txt"]
    p = tmp_path / "names.tar"
    with tarfile.open(p, "w", format=tarfile.GNU_FORMAT, encoding="latin-1") as tf:   # raw Latin-1 bytes
        _add_tar(tf, "caf\xe9.txt", b"member text")
    assert read_docs(p)["source_id"].tolist() == ["caf\\xe9.txt"]


def test_zip_member_name_flagged_utf8_but_not_is_named(tmp_path):
    good = io.BytesIO()
    with zipfile.ZipFile(good, "w") as zf:
        zf.writestr("ok.txt", "fine")
        zf.writestr("caf\u00e9.txt", "text")   # non-ASCII: zipfile sets the UTF-8 flag
    data = good.getvalue().replace("caf\u00e9".encode(), b"caf\xff\xfe")   # same length, not UTF-8
    p = tmp_path / "names.zip"
    p.write_bytes(data)
    with pytest.raises(CorpusError, match=r"names\.zip: cannot read zip archive: member name b'caf\\xff\\xfe\.txt' "
                                          r"is flagged as UTF-8 but is not UTF-8"):
        read_corpus(p)


@pytest.mark.parametrize("encoding, why", [("bogus", "unknown text codec"), ("utf-16", "not ASCII-compatible"),
                                           ("rot13", "not a text encoding"), (7, "must be a codec name")])
def test_bad_encoding_is_a_value_error_naming_it_before_any_work(tmp_path, encoding, why):
    p = tmp_path / "a.txt"
    p.write_text("one line\n")
    with pytest.raises(ValueError, match=why) as exc:
        read_corpus(p, encoding=encoding)
    assert "encoding" in str(exc.value)


def test_bad_encoding_on_the_command_line_is_an_error_line(tmp_path, capsys):
    from cutext.pipelines.__main__ import main

    p = tmp_path / "a.txt"
    p.write_text("one line\n")
    rc = main(["bm25", str(p), "--out", str(tmp_path.parent / f"{tmp_path.name}-idx"), "--backend", "cpu",
               "--no-progress", "--encoding", "bogus"])
    err = capsys.readouterr().err
    assert rc == 2 and "error: --encoding bogus: unknown text codec" in err and "Traceback" not in err


def test_null_ids_name_the_column_and_row(tmp_path):
    p = tmp_path / "docs.jsonl"
    p.write_text('{"id": "a", "text": "x"}\n\n{"id": "b", "text": "y"}\n{"id": null, "text": "z"}\n')
    with pytest.raises(CorpusError, match=r"docs\.jsonl: id column 'id' has 1 missing \(null\) id\(s\), the first "
                                          r"at line 4"):
        read_docs(p)
    p2 = tmp_path / "obj.jsonl"
    p2.write_text('{"id": {"k": 1}, "text": "x"}\n{"id": {"k": 2}, "text": "y"}\n')
    with pytest.raises(CorpusError, match=r"obj\.jsonl: id column 'id' holds struct<k: int64> values, which have "
                                          r"no string form"):
        read_docs(p2)
    frame = pd.DataFrame({"key": ["a", None, "c"], "text": ["x", "y", "z"]})
    with pytest.raises(FrameError, match=r"id column 'key' has 1 missing ids \(the first at partition 0, row 1 "
                                         r"\(index 1\)\)"):
        frame_source(frame, id_column="key").docs.compute()
    mixed = pd.DataFrame({"id": pd.Series([1, "a"], dtype=object), "text": ["x", "y"]})
    assert frame_source(mixed).docs.compute()["source_id"].tolist() == ["1", "a"]
    odd = pd.DataFrame({"id": pd.Series([1, {"k": 1}], dtype=object), "text": ["x", "y"]})
    with pytest.raises(FrameError, match=r"id column 'id' holds a dict .* at partition 0, row 1 \(index 1\)"):
        frame_source(odd).docs.compute()


def test_text_column_for_plain_text_is_refused(tmp_path, lee_text):
    p = tmp_path / "lee.txt"
    p.write_bytes(lee_text[:5000])
    with pytest.raises(CorpusError, match=r"lee\.txt: text_column='nope' applies only to tables \(JSON Lines, "
                                          r"Parquet, CSV/TSV\), but this input is read as 'lines'"):
        read_corpus(p, text_column="nope")
    with pytest.raises(CorpusError, match=r"id_column='id' applies only to tables.*read as 'files'"):
        read_corpus(tmp_path, id_column="id")
    assert len(read_docs(p)) == lee_text[:5000].count(b"\n") + 1   # without it: one document a line


# ----------------------------------------------------------------------------- 5. archive members

def _write_tricky(path, kind: str):
    """Members: a.txt three times, a traversal name, a symlink, a hardlink (tar) and two documents."""
    if kind == "zip":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)   # zipfile warns about the duplicate names
            with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
                zf.writestr("a.txt", "first")
                zf.writestr("../../etc/evil.txt", "outside")
                zf.writestr("docs/b.txt", "bee")
                zf.writestr("a.txt", "second")
                link = zipfile.ZipInfo("docs/link")
                link.external_attr = (stat.S_IFLNK | 0o777) << 16
                zf.writestr(link, "a.txt")
                zf.writestr("a.txt", "third")
        return 2   # skipped: traversal, link; renamed: 2
    mode = {"tar": "w", "tar.gz": "w:gz"}[kind]
    with tarfile.open(path, mode) as tf:
        _add_tar(tf, "a.txt", b"first")
        _add_tar(tf, "../../etc/evil.txt", b"outside")
        _add_tar(tf, "docs/b.txt", b"bee")
        _add_tar(tf, "./a.txt", b"second")
        _add_tar(tf, "docs/link", kind=tarfile.SYMTYPE, linkname="../a.txt")
        _add_tar(tf, "docs/hard", kind=tarfile.LNKTYPE, linkname="a.txt")
        _add_tar(tf, "a.txt", b"third")
    return 3   # skipped: traversal, symlink, hardlink; renamed: 2


@pytest.mark.parametrize("kind", ["tar", "tar.gz", "zip"])
def test_skipped_members_warn_once_and_duplicates_get_unique_ids(tmp_path, kind):
    p = tmp_path / f"tricky.{kind}"
    n_skipped = _write_tricky(p, kind)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        df = read_docs(p, blocksize=1)   # one piece a member where the archive allows: still one warning
    found = [str(w.message) for w in input_warnings(rec)]
    assert len(found) == 1 and all(issubclass(w.category, ArchiveMemberWarning) for w in input_warnings(rec))
    msg = found[0]
    assert msg.startswith(f"{p}: skipped {n_skipped} member(s)")
    assert "1 with '..' in the path" in msg and "'../../etc/evil.txt'" in msg and "link" in msg
    assert "2 member(s) repeat an earlier name" in msg and "'a.txt' -> 'a.txt#2'" in msg
    assert df["source_id"].tolist() == ["a.txt", "docs/b.txt", "a.txt#2", "a.txt#3"]
    assert df["text"].tolist() == ["first", "bee", "second", "third"]   # each member's own bytes
    assert df["source_id"].is_unique
    with pytest.warns(ArchiveMemberWarning):   # a new read warns again
        lines = read_docs(p, format="lines")
    assert lines["source_id"].tolist() == ["a.txt:0", "docs/b.txt:0", "a.txt#2:0", "a.txt#3:0"]


def test_clean_archive_gives_no_member_warning(tmp_path, lee_text):
    p = tmp_path / "clean.tar.gz"
    with tarfile.open(p, "w:gz") as tf:
        _add_tar(tf, "docs", kind=tarfile.DIRTYPE)
        _add_tar(tf, "docs/a.txt", lee_text[:3000])
        _add_tar(tf, "docs/.hidden", b"not a document")   # hidden: the directory rule, silent
        _add_tar(tf, "docs/b.txt", lee_text[3000:6000])
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputWarning)
        df = read_docs(p)
    assert df["source_id"].tolist() == ["docs/a.txt", "docs/b.txt"]
    assert json.dumps(df["text"].tolist())  # plain strings


# ----------------------------------------------------------------------------- the guards reach every pipeline
@pytest.fixture()
def gz_bomb(tmp_path):
    """A 4 KiB .txt.gz that expands to 2 MiB of real words (a ratio above 100, small enough to index)."""
    p = tmp_path / "words.txt.gz"
    p.write_bytes(gzip.compress(b"alpha beta gamma delta\n" * (2 * MIB // 23), compresslevel=9))
    return p


@pytest.mark.parametrize("name, params", [
    ("bm25", dict(scheduler="sync")),
    ("cluster", dict()),
    ("lda", dict(K=2, iterations=1, max_df=1.0)),  # the same line in every document: no word is in at most 30 %
])
def test_max_ratio_reaches_the_reader_from_every_text_pipeline(tmp_path, gz_bomb, name, params):
    from cutext import pipelines

    kw = dict(backend="cpu", progress=False, format="lines", **params)
    with pytest.raises(ExpansionError, match=r"words\.txt\.gz: expands more than max_ratio=100 times"):
        pipelines.run(name, gz_bomb, out=tmp_path / f"{name}-1", **kw)
    assert not (tmp_path / f"{name}-1").exists()
    r = pipelines.run(name, gz_bomb, out=tmp_path / f"{name}-2", max_ratio=None, **kw)
    assert r.counts["n_docs"] == 2 * MIB // 23


def test_max_ratio_reaches_the_ngram_reader_and_the_command_line(tmp_path, gz_bomb, capsys):
    from cutext import pipelines
    from cutext.pipelines.__main__ import main

    arpa = tmp_path / "lm.arpa"
    arpa.write_text("\\data\\\nngram 1=4\n\n\\1-grams:\n-2.0\t<unk>\n-1.0\t<s>\n-0.5\t</s>\n-0.6\talpha\n\n\\end\\\n")
    with pytest.raises(ExpansionError, match="max_ratio=100"):
        pipelines.run("ngram", gz_bomb, out=tmp_path / "ng", model=arpa, backend="cpu", progress=False)
    assert main(["bm25", str(gz_bomb), "--out", str(tmp_path / "cli"), "--backend", "cpu", "--scheduler", "sync",
                 "--format", "lines", "--no-progress"]) == 2
    assert "expands more than max_ratio=100" in capsys.readouterr().err
    assert main(["bm25", str(gz_bomb), "--out", str(tmp_path / "cli"), "--backend", "cpu", "--scheduler", "sync",
                 "--format", "lines", "--no-progress", "--max-ratio", "none"]) == 0


def test_lone_surrogates_in_queries_and_transform_name_the_query(tmp_path, data_dir):
    from cutext import pipelines
    from cutext.pipelines.bm25 import BM25Index
    from cutext.pipelines.lda import LDAModel

    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()[:60]
    src = tmp_path / "cacm60.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    idx = BM25Index.load(pipelines.run("bm25", src, out=tmp_path / "i", backend="cpu", scheduler="sync",
                                       progress=False).path)
    queries = {"q1": "computer programs", "q2": "bad \ud800 query"}
    with pytest.raises(ValueError, match=r"query 'q2': holds a lone surrogate '\\ud800' at character 4"):
        idx.search(queries, k=5)
    model = LDAModel.load(pipelines.run("lda", src, out=tmp_path / "m", K=2, iterations=1, backend="cpu",
                                        progress=False).path)
    with pytest.raises(ValueError, match=r"texts: row 1 holds a lone surrogate '\\udfff' at character 2"):
        model.transform(["fine text", "a \udfff b"])


def test_a_plain_text_reference_corpus_beside_a_table_input(tmp_path, data_dir):
    """cluster's idf_from is read with the main input's settings, except table columns for plain text."""
    from cutext import pipelines

    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()[:40]
    src = tmp_path / "cacm40.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    ref = tmp_path / "ref.txt"
    ref.write_text("\n".join(json.loads(x)["contents"] for x in lines), encoding="utf-8")
    r = pipelines.run("cluster", src, out=tmp_path / "c", idf_from=ref, text_column="contents", id_column="id",
                      backend="cpu", progress=False)
    assert r.counts["n_docs"] == 40
