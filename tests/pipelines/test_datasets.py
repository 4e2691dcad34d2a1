"""cutext.pipelines.datasets: the registry, fetch's lookup order, downloads into the checksummed cache,
the errors of a dataset found nowhere, the ``fetch`` subcommand, and the loaders' archive layouts.

Downloads are tested against a local HTTP server (and ``file://`` URLs) serving small files: the
original sources are not reachable from the test machines.
"""
from __future__ import annotations

import hashlib
import http.server
import io
import os
import re
import tarfile
import threading
from pathlib import Path

import pytest

from cutext import pipelines
from cutext.pipelines import datasets
from cutext.pipelines.__main__ import main
from cutext.pipelines.datasets import DATASETS, DataFile, Dataset, DatasetChecksumError, DatasetNotFoundError, fetch

ROOT = Path(__file__).resolve().parents[2]
PAYLOAD = b"docID wordID count\n1 1 3\n" * 1000
PAYLOAD_SHA = hashlib.sha256(PAYLOAD).hexdigest()


@pytest.fixture
def no_data(tmp_path, monkeypatch):
    """No local copy anywhere: an empty $CUTEXT_DATA (also the cache), the shared folder hidden, online."""
    empty = tmp_path / "cutext-data"
    empty.mkdir()
    monkeypatch.setenv("CUTEXT_DATA", str(empty))
    monkeypatch.setenv("CUTEXT_SHARED_DATA", "none")
    monkeypatch.delenv("CUTEXT_OFFLINE", raising=False)
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    return empty


@pytest.fixture
def server(tmp_path):
    """A local HTTP server of ``<tmp>/www``; yields (base URL, folder, list of requested paths)."""
    www = tmp_path / "www"
    www.mkdir()
    hits: list = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(www), **kw)

        def log_request(self, *a):
            hits.append(self.path)

        def log_message(self, *a):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", www, hits
    finally:
        httpd.shutdown()
        httpd.server_close()


def _register(monkeypatch, name, files, returns=None, **kw):
    ds = Dataset(name, "a test dataset", "test", tuple(files), returns or files[0].path, **kw)
    monkeypatch.setitem(DATASETS, name, ds)
    return ds


# ----------------------------------------------------------------------------- the registry

def test_registry_names_every_dataset_the_project_uses():
    assert {"20newsgroups", "reuters21578", "nips", "kos", "nltk-abc", "nltk-brown", "nltk-inaugural",
            "nltk-state_union", "nltk-movie_reviews", "nltk-webtext", "cacm", "scifact", "kenlm-test-arpa",
            "abc-o3-arpa", "inaugural-heldout", "lee", "lda-reuters", "pocketsphinx-lm"} <= set(DATASETS)
    paths = [f.path for d in DATASETS.values() for f in d.files]
    assert len(paths) == len(set(paths)), "a file belongs to one dataset"
    for d in DATASETS.values():
        assert d.licence and d.description, d.name
        for f in d.files:
            assert re.fullmatch(r"[0-9a-f]{64}", f.sha256) and f.size > 0, f.path
            assert all(re.fullmatch(r"[0-9a-f]{64}", s) for s in f.also_sha256), f.path
            assert all(u.startswith(("http://", "https://")) for u in f.urls), f.path
            assert f.urls or d.build, f"{d.name}: {f.path} has no URL and no way to make it"
        # the returned path: one of its files, or the folder of several
        assert d.returns in {f.path for f in d.files} or all(f.path.startswith(d.returns + "/") for f in d.files)
    assert DATASETS["20newsgroups"].files[0].urls[0] == "http://qwone.com/~jason/20Newsgroups/20news-bydate.tar.gz"
    assert DATASETS["kenlm-test-arpa"].files[0].urls == (
        "https://raw.githubusercontent.com/kpu/kenlm/master/lm/test.arpa",)
    assert DATASETS["kos"].files[0].urls[0].startswith("https://archive.ics.uci.edu/ml/machine-learning-databases/"
                                                       "bag-of-words/")
    assert DATASETS["nltk-abc"].files[0].urls == (
        "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/corpora/abc.zip",)
    assert not DATASETS["abc-o3-arpa"].files[0].urls and "lmplz" in DATASETS["abc-o3-arpa"].build


def test_registry_checksums_are_those_of_the_shared_copies():
    shared = datasets.shared_data_dir()
    if shared is None:
        pytest.skip("no shared data folder ($CUTEXT_SHARED_DATA): the checksums are those of its copies")
    checked = 0
    for d in DATASETS.values():
        for f in d.files:
            p = shared / f.path
            if p.is_file():
                assert p.stat().st_size == f.size, f.path
                assert hashlib.sha256(p.read_bytes()).hexdigest() == f.sha256, f.path
                checked += 1
    assert checked >= 30


def test_unknown_name_offers_the_close_ones():
    with pytest.raises(ValueError, match=r"unknown dataset 'kso'; did you mean 'kos'\?"):
        fetch("kso")
    with pytest.raises(ValueError, match=r"'20newsgroup'.*did you mean '20newsgroups'"):
        fetch("20newsgroup")
    assert issubclass(DatasetNotFoundError, FileNotFoundError)
    assert pipelines.fetch is fetch and pipelines.DatasetNotFoundError is DatasetNotFoundError


# ----------------------------------------------------------------------------- lookup order

def test_local_copies_come_first_then_the_cache(tmp_path, no_data, monkeypatch):
    f = DataFile("bow/uci/docword.t.txt", len(PAYLOAD), PAYLOAD_SHA, ("http://127.0.0.1:9/nothing",))
    v = DataFile("bow/uci/vocab.t.txt", 3, hashlib.sha256(b"a\nb").hexdigest())
    _register(monkeypatch, "t", [f, v])
    shared, home = tmp_path / "shared", tmp_path / "home"
    for root in (no_data, shared, home):
        (root / "bow" / "uci").mkdir(parents=True)
        (root / f.path).write_bytes(PAYLOAD)
        (root / v.path).write_bytes(b"a\nb")
    monkeypatch.setenv("CUTEXT_SHARED_DATA", str(shared))
    assert fetch("t", data_home=home) == no_data / f.path                  # $CUTEXT_DATA first
    (no_data / v.path).unlink()                                             # a copy lacking a file is no copy
    assert fetch("t", data_home=home) == shared / f.path                    # then the shared folder
    monkeypatch.setenv("CUTEXT_SHARED_DATA", "none")
    assert fetch("t", data_home=home) == home / f.path                      # then the cache
    assert datasets.locate("t", data_home=home) == {f.path: home / f.path, v.path: home / v.path}
    monkeypatch.delenv("CUTEXT_DATA")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert datasets.get_data_home() == tmp_path / "xdg" / "cutext"
    assert datasets.locate("t") is None


def test_shared_folder_can_be_hidden_and_the_bundled_collections_stay(no_data):
    assert datasets.shared_data_dir() is None and datasets.default_data_dir() == no_data
    assert fetch("cacm", download=False) == ROOT / "data" / "cacm"   # the checkout's data/cacm
    assert (fetch("scifact", download=False) / "corpus.jsonl.gz").is_file()
    with pytest.raises(DatasetNotFoundError):
        fetch("kos", download=False)


# ----------------------------------------------------------------------------- downloads

def test_download_into_the_cache_verified_then_found_there(no_data, server, monkeypatch):
    base, www, hits = server
    (www / "docword.t.txt").write_bytes(PAYLOAD)
    f = DataFile("bow/uci/docword.t.txt", len(PAYLOAD), PAYLOAD_SHA, (f"{base}/docword.t.txt",))
    _register(monkeypatch, "t", [f])
    got = fetch("t")
    assert got == no_data / "bow" / "uci" / "docword.t.txt" and got.read_bytes() == PAYLOAD
    # no temporary file left; the sha256 found is recorded beside the file
    assert sorted(p.name for p in got.parent.iterdir()) == ["docword.t.txt", "docword.t.txt.sha256"]
    umask = os.umask(0)
    os.umask(umask)
    assert got.stat().st_mode & 0o777 == 0o666 & ~umask   # a shared cache stays readable
    assert hits == ["/docword.t.txt"]
    assert fetch("t") == got and hits == ["/docword.t.txt"]                    # cached: no second request
    home = no_data.parent / "home"
    assert fetch("t", data_home=home) == got                                   # $CUTEXT_DATA is a local copy
    monkeypatch.delenv("CUTEXT_DATA")
    assert fetch("t", data_home=home) == home / f.path and len(hits) == 2     # data_home is the cache


def test_a_checksum_mismatch_deletes_the_download_and_names_both_checksums(no_data, server, monkeypatch):
    base, www, _ = server
    (www / "x.txt").write_bytes(PAYLOAD + b"tampered")
    _register(monkeypatch, "t", [DataFile("corpora/x.txt", len(PAYLOAD), PAYLOAD_SHA, (f"{base}/x.txt",))])
    bad = hashlib.sha256(PAYLOAD + b"tampered").hexdigest()
    with pytest.raises(DatasetChecksumError, match=rf"{re.escape(base)}/x\.txt: sha256 mismatch for "
                                                   rf"{re.escape(str(no_data / 'corpora' / 'x.txt'))}: "
                                                   rf"expected {PAYLOAD_SHA}, got {bad}"):
        fetch("t")
    assert list((no_data / "corpora").iterdir()) == []   # neither the file nor its temporary name


def test_a_damaged_cache_entry_is_downloaded_again(no_data, server, monkeypatch):
    """A truncated file or another file at the cache's name (a crash, a hand copy) is never returned: it is
    downloaded again (to a temporary name, verified, renamed over it)."""
    base, www, hits = server
    (www / "x.txt").write_bytes(PAYLOAD)
    _register(monkeypatch, "t", [DataFile("corpora/x.txt", len(PAYLOAD), PAYLOAD_SHA, (f"{base}/x.txt",))])
    dest = no_data / "corpora" / "x.txt"
    dest.parent.mkdir()
    for damaged in (PAYLOAD[:1000], PAYLOAD[:-7] + b"garbage"):   # truncated; same size, other bytes
        dest.write_bytes(damaged)
        assert fetch("t") == dest and dest.read_bytes() == PAYLOAD
    assert hits == ["/x.txt", "/x.txt"]
    assert sorted(p.name for p in dest.parent.iterdir()) == ["x.txt", "x.txt.sha256"]


def test_a_damaged_cache_entry_that_cannot_be_downloaded_is_refused(no_data, monkeypatch):
    _register(monkeypatch, "t", [DataFile("corpora/x.txt", len(PAYLOAD), PAYLOAD_SHA, ("http://127.0.0.1:9/x",))])
    dest = no_data / "corpora" / "x.txt"
    dest.parent.mkdir()
    dest.write_bytes(PAYLOAD[:1000])
    bad = hashlib.sha256(PAYLOAD[:1000]).hexdigest()
    for call in (lambda: fetch("t", download=False), lambda: datasets.locate("t")):
        with pytest.raises(DatasetChecksumError) as e:
            call()
        msg = str(e.value)
        assert f"{dest}: expected {len(PAYLOAD):,} bytes, sha256 {PAYLOAD_SHA}; found 1,000 bytes, sha256 {bad}" in msg
        assert "not downloaded again here (download=False)" in msg
    assert dest.read_bytes() == PAYLOAD[:1000] and not (dest.parent / "x.txt.sha256").exists()


def test_a_damaged_local_copy_is_refused_not_returned(no_data, tmp_path, monkeypatch):
    """The shared data folder (read-only, not cutext's) with a corrupt copy: refused naming the path and both
    checksums, although the cache holds a good one; hidden, the cache's copy is used."""
    f = DataFile("corpora/x.txt", len(PAYLOAD), PAYLOAD_SHA)
    _register(monkeypatch, "t", [f])
    shared, home = tmp_path / "shared", tmp_path / "home"
    for root, data in ((shared, PAYLOAD[:-1] + b"!"), (home, PAYLOAD)):
        (root / "corpora").mkdir(parents=True)
        (root / f.path).write_bytes(data)
    monkeypatch.delenv("CUTEXT_DATA")
    monkeypatch.setenv("CUTEXT_SHARED_DATA", str(shared))
    bad = hashlib.sha256(PAYLOAD[:-1] + b"!").hexdigest()
    with pytest.raises(DatasetChecksumError, match=rf"{re.escape(str(shared / f.path))}: expected "
                                                   rf"{len(PAYLOAD):,} bytes, sha256 {PAYLOAD_SHA}; found "
                                                   rf"{len(PAYLOAD):,} bytes, sha256 {bad}") as e:
        fetch("t", data_home=home)
    assert "the shared data folder is not cutext's to repair" in str(e.value)
    assert not (shared / "corpora" / "x.txt.sha256").exists()       # nothing written into a local copy
    monkeypatch.setenv("CUTEXT_SHARED_DATA", "none")
    assert fetch("t", data_home=home) == home / f.path


def test_the_sha256_is_computed_once_then_size_and_mtime_are_compared(no_data, monkeypatch):
    f = DataFile("corpora/x.txt", len(PAYLOAD), PAYLOAD_SHA)
    _register(monkeypatch, "t", [f])
    dest = no_data / f.path
    dest.parent.mkdir()
    dest.write_bytes(PAYLOAD)
    hashed = []
    real = datasets._sha256
    monkeypatch.setattr(datasets, "_sha256", lambda p: hashed.append(p) or real(p))
    assert fetch("t") == dest and fetch("t") == dest and hashed == [dest]   # the first use hashes
    assert (no_data / "corpora" / "x.txt.sha256").read_text().startswith(f'{{"sha256": "{PAYLOAD_SHA}"')
    os.utime(dest, ns=(0, 0))                                                   # touched: hashed again
    assert fetch("t") == dest and hashed == [dest, dest]
    with open(dest, "r+b") as fh:                                               # truncated in place
        fh.truncate(10)
    with pytest.raises(DatasetChecksumError, match="found 10 bytes"):
        fetch("t")


def test_file_urls_mirrors_and_other_known_copies(no_data, server, tmp_path, monkeypatch):
    base, www, hits = server
    src = tmp_path / "src.txt"
    src.write_bytes(b"repacked")
    (www / "orig.txt").write_bytes(PAYLOAD)
    repack = hashlib.sha256(b"repacked").hexdigest()
    # the first URL answers 404, the mirror serves the original, whose checksum is a known copy's
    _register(monkeypatch, "t", [DataFile("a/orig.txt", 8, repack, (f"{base}/gone.txt", f"{base}/orig.txt"),
                                          also_sha256=(PAYLOAD_SHA,))])
    assert fetch("t").read_bytes() == PAYLOAD and hits == ["/gone.txt", "/orig.txt"]
    _register(monkeypatch, "u", [DataFile("a/src.txt", 8, repack, (src.as_uri(),))])
    assert fetch("u").read_bytes() == b"repacked"


def test_unreachable_sources_name_the_urls_and_the_place(no_data, server, monkeypatch):
    base, _, _ = server
    _register(monkeypatch, "t", [DataFile("a/x.txt", 5, PAYLOAD_SHA, (f"{base}/missing.txt", "http://127.0.0.1:9/x"))])
    with pytest.raises(DatasetNotFoundError) as e:
        fetch("t")
    msg = str(e.value)
    assert msg.startswith("dataset 't' not found:") and "download failed:" in msg
    assert f"{base}/missing.txt: HTTP 404 File not found" in msg and "http://127.0.0.1:9/x: [Errno" in msg
    assert f"put it at {no_data / 'a' / 'x.txt'}" in msg
    assert not (no_data / "a" / "x.txt").exists()


def test_offline_never_touches_the_network(no_data, server, monkeypatch):
    base, www, hits = server
    (www / "docword.t.txt").write_bytes(PAYLOAD)
    f = DataFile("bow/uci/docword.t.txt", len(PAYLOAD), PAYLOAD_SHA, (f"{base}/docword.t.txt",))
    _register(monkeypatch, "t", [f])
    for how in ("env", "argument"):
        if how == "env":
            monkeypatch.setenv("CUTEXT_OFFLINE", "1")
            kwargs = {}
        else:
            monkeypatch.delenv("CUTEXT_OFFLINE")
            kwargs = {"download": False}
        with pytest.raises(DatasetNotFoundError) as e:
            fetch("t", **kwargs)
        msg = str(e.value)
        assert msg.startswith(f"dataset 't' not found: not in $CUTEXT_DATA ({no_data})")
        assert ("CUTEXT_OFFLINE=1" if how == "env" else "download=False") in msg
        assert f"docword.t.txt ({len(PAYLOAD):,} bytes" in msg and f"{base}/docword.t.txt" in msg
        assert f"put it at {no_data / f.path}" in msg
        assert "python -m cutext.pipelines fetch t" in msg
    assert hits == []


def test_real_datasets_offline_name_file_url_and_place(no_data, monkeypatch):
    monkeypatch.setenv("CUTEXT_OFFLINE", "1")
    with pytest.raises(DatasetNotFoundError) as e:
        fetch("kos")
    msg = str(e.value)
    for name in ("docword.kos.txt.gz", "vocab.kos.txt"):
        assert f"https://archive.ics.uci.edu/ml/machine-learning-databases/bag-of-words/{name}" in msg
        assert f"put it at {no_data / 'bow' / 'uci' / name}" in msg
    # no public URL: says how to build it, and where to put it
    monkeypatch.delenv("CUTEXT_OFFLINE")
    with pytest.raises(DatasetNotFoundError) as e:
        fetch("abc-o3-arpa")
    msg = str(e.value)
    assert "abc.o3.arpa.gz has no public download" in msg and "lmplz -o 3" in msg
    assert f"put it at {no_data / 'arpa' / 'lmplz' / 'abc.o3.arpa.gz'}" in msg


# ----------------------------------------------------------------------------- the command line

def test_fetch_subcommand_prints_paths_lists_and_fails_cleanly(no_data, server, monkeypatch, capsys):
    base, www, _ = server
    (www / "docword.t.txt").write_bytes(PAYLOAD)
    _register(monkeypatch, "t", [DataFile("bow/uci/docword.t.txt", len(PAYLOAD), PAYLOAD_SHA,
                                          (f"{base}/docword.t.txt",))])
    assert main(["fetch", "t", "cacm"]) == 0
    assert capsys.readouterr().out.splitlines() == [str(no_data / "bow" / "uci" / "docword.t.txt"),
                                                    str(ROOT / "data" / "cacm")]
    assert main(["fetch", "--list"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^kos +1\.1 +not here: download with `fetch kos`", out, flags=re.M)
    assert re.search(r"^abc-o3-arpa +8\.2 +not here: no public download", out, flags=re.M)
    assert re.search(rf"^t +0\.0 +{re.escape(str(no_data))}", out, flags=re.M)
    assert main(["fetch", "kos", "--no-download"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: dataset 'kos' not found:") and "put it at" in err
    assert main(["fetch", "kso"]) == 2 and "did you mean 'kos'" in capsys.readouterr().err


# ----------------------------------------------------------------------------- loaders

def _tar(path: Path, members: dict):
    with tarfile.open(path, "w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def test_20newsgroups_reads_the_original_layout_and_the_shared_repack(tmp_path):
    posts = {"20news-bydate-train/sci.space/1": b"From: a\n\norbit", "20news-bydate-test/rec.autos/2": b"car\xe9"}
    _tar(tmp_path / "orig.tar.gz", posts)
    _tar(tmp_path / "repack.tar.gz", {f"20news-bydate/{k}": v for k, v in posts.items()})
    a = datasets.load_20newsgroups(tmp_path / "orig.tar.gz")
    b = datasets.load_20newsgroups(tmp_path / "repack.tar.gz")
    assert a.equals(b)
    assert a["source_id"].tolist() == ["test/rec.autos/2", "train/sci.space/1"]
    assert a["split"].tolist() == ["test", "train"] and a["group"].tolist() == ["rec.autos", "sci.space"]
    assert len(datasets.load_20newsgroups(tmp_path / "orig.tar.gz", subset="train")) == 1


def test_shared_corpora_without_a_folder_uses_fetch(no_data):
    corpora = datasets.shared_corpora()
    assert sorted(corpora) == ["cacm", "scifact"]   # the checkout's bundled collections only
    assert len(corpora["cacm"]()) == 3204


# ----------------------------------------------------------------------------- the test suite's summary

def test_missing_data_summary_is_one_line_a_dataset_with_a_command_that_runs(monkeypatch, capsys):
    from helpers import FETCH, MISSING_DATA, missing_data_lines

    reasons = [MISSING_DATA + "lee", MISSING_DATA + "kos, lee", MISSING_DATA + "abc-o3-arpa", "no CUDA device"]
    lines = missing_data_lines(reasons)
    assert lines[0].startswith("3 tests skipped for missing data") and "shared data folder" not in lines[0]
    assert lines[1:] == [f"  abc-o3-arpa (1 test): no public download; {DATASETS['abc-o3-arpa'].build}",
                         f"  kos (1 test): run `{FETCH} kos`", f"  lee (2 tests): run `{FETCH} lee`"]
    fetched = []
    monkeypatch.setattr(datasets, "fetch", lambda name, **kw: fetched.append(name) or Path(name))
    for line in lines[1:]:
        if FETCH in line:  # the printed command parses and fetches that dataset
            argv = line.split(FETCH, 1)[1].strip("` ").split()
            assert main(["fetch", *argv]) == 0
    assert fetched == ["kos", "lee"] and capsys.readouterr().out.split() == ["kos", "lee"]


def test_every_missing_data_skip_of_the_suite_names_registry_datasets():
    """The summary gives a command a dataset: a skip reason naming anything else has no command to print."""
    literal = re.compile(r'MISSING_DATA\s*\+\s*f?"([^"{]*)"\s*\)|\{MISSING_DATA\}([^"{]*)"'
                         r'|skip\(\s*f?"missing data: ([^"{]*)"')
    found = 0
    for f in (ROOT / "tests").rglob("*.py"):
        for m in literal.finditer(f.read_text(encoding="utf-8")):
            names = [n.strip() for n in (m.group(1) or m.group(2) or m.group(3)).split(",") if n.strip()]
            found += 1
            assert names and set(names) <= set(DATASETS), f"{f.relative_to(ROOT)}: skip reason names {names}"
    assert found >= 1
