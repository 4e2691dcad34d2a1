"""ngram on a dask Client: every worker reads, scores and writes its own share of the corpus.

``pipelines.run("ngram", ..., client=c)`` on a 2-worker process LocalCluster (CPU): one task a worker writes a
part file of ``scores.parquet/``; the caller gets row counts and totals only.  The oracle is the run in one
process (tested against KenLM in tests/pipelines/test_ngram.py): the same rows, source ids, scores and
totals, for lines input of several files (uncompressed files cut into several pieces, a gzip file) and of one
file cut over the two workers (several pieces; one piece cut into row slices).

Real data: the held-out inaugural sentences of the shared ARPA folder and gensim's Lee background corpus.
"""
from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from cutext import pipelines
from cutext.pipelines import ngram as ng
from cutext.pipelines.ngram import NGramModel
from cutext.stages.readers.base import CorpusError
from cutext.stages.readers.files import plan, read_piece
from cutext.stages.runtime.progress import task_released
from cutext.stages.text.ngram_text import count_lines_rows

pytestmark = pytest.mark.slow  # a LocalCluster of two processes

distributed = pytest.importorskip("distributed")

TOTALS = ("n_docs", "n_sentences", "n_tokens", "n_oov", "empty_docs")


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  memory_limit="2GiB") as cluster, distributed.Client(cluster) as c:
        c.wait_for_workers(2)
        yield c


@pytest.fixture(scope="module")
def abc(arpa):
    return NGramModel.load(arpa / "lmplz" / "abc.o3.arpa.gz", backend="cpu")


@pytest.fixture(scope="module")
def lines(arpa, shared_data):
    """Real lines: the held-out inaugural sentences and the Lee background documents, with empty lines."""
    held = (arpa / "lmplz" / "heldout.inaugural2001-2009.tok.txt").read_text(encoding="utf-8").splitlines()
    lee = (shared_data / "corpora" / "gensim" / "lee_background.cor").read_text(encoding="utf-8").splitlines()
    out = held + lee
    for i in range(0, len(out), 97):
        out[i] = ""
    return out


def _write(path, lines, compress=False):
    body = "\n".join(lines) + "\n"
    if compress:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(body)
    else:
        path.write_text(body, encoding="utf-8")
    return path


def _inputs(kind, lines, d):
    """(path, blocksize, pieces) of each input layout."""
    d.mkdir()
    if kind == "files":  # several files: two cut into pieces (counted from their bytes), a gzip one (read ahead)
        n = len(lines) // 3
        _write(d / "a.txt", lines[:n])
        _write(d / "b.txt.gz", lines[n:2 * n], compress=True)
        _write(d / "c.txt", lines[2 * n:])
        return d, 16384
    src = _write(d / "one.txt", lines)
    return src, (16384 if kind == "one file" else 64 << 20)


def _run(model, src, out, **kw):
    r = pipelines.run("ngram", src, out=out, model=model, format="lines", progress=False, **kw)
    return r, pq.read_table(r.path / "scores.parquet").to_pandas(), json.loads((r.path / "ngram.json").read_text())


@pytest.mark.parametrize("kind", ["files", "one file", "one piece"])
def test_client_run_equals_one_process(client, abc, lines, tmp_path, kind):
    """Every row, source id, score and total of a Client run equals the run in one process; each worker
    wrote one part, in corpus order."""
    src, blocksize = _inputs(kind, lines, tmp_path / "in")
    r1, one, j1 = _run(abc, src, tmp_path / "one", blocksize=blocksize)
    r2, two, j2 = _run(abc, src, tmp_path / "two", blocksize=blocksize, client=client)
    assert r2.scheduler == "client" and r2.counts["workers"] == 2
    pd.testing.assert_frame_equal(two, one, check_exact=True)
    assert one["doc_id"].tolist() == list(range(len(lines)))
    if kind == "files":
        assert r2.counts["partitions"] > 4
        n = len(lines) // 3
        ids = one["source_id"].tolist()
        assert ids[:2] == ["a.txt:0", "a.txt:1"] and ids[n] == "b.txt.gz:0"
        assert ids[-1] == f"c.txt:{len(lines) - 2 * n - 1}"
    else:
        assert one["source_id"].tolist() == [str(i) for i in range(len(lines))]
        assert r2.counts["partitions"] == (1 if kind == "one piece" else r1.counts["partitions"])
        assert r2.counts["partitions"] > (0 if kind == "one piece" else 4)
    for k in TOTALS:
        assert j2["counts"][k] == j1["counts"][k] == r2.counts[k], k
    if kind == "one piece":  # one piece cut into two row ranges: its log10 sum is taken a range at a time
        assert r2.counts["tasks"] == 2
        assert j2["log10_prob"] == pytest.approx(j1["log10_prob"], rel=1e-12, abs=0)
    else:  # piece by piece in corpus order, as in one process: the same bits
        assert j2["log10_prob"] == j1["log10_prob"] and j2["perplexity"] == j1["perplexity"]
    # the layout: one part in one process, one a worker on the client, read in name order
    assert sorted(p.name for p in (r1.path / "scores.parquet").iterdir()) == ["part-00000.parquet"]
    parts = sorted((r2.path / "scores.parquet").iterdir())
    assert [p.name for p in parts] == ["part-00000.parquet", "part-00001.parquet"] and r2.counts["parts"] == 2
    first = [pq.read_table(p, columns=["doc_id"])["doc_id"].to_pylist() for p in parts]
    assert first[0][0] == 0 and first[1][0] == first[0][-1] + 1 and len(first[0]) > 0.2 * len(lines)
    assert set(j2["timings"]) >= {"workers", "read", "score", "write"}


@pytest.mark.parametrize("kind", ["files", "one file", "one piece"])
def test_client_run_with_pieces_split_at_the_shares_equals_one_process(client, abc, lines, tmp_path, kind,
                                                                      monkeypatch):
    """With the byte ranges that hold the cut between the two shares split there (any size here), the rows,
    source ids, scores and totals still equal one process; the first share of one file ends at the line
    that holds its middle byte."""
    monkeypatch.setattr(ng, "MIN_SPLIT", 64)  # the caller cuts the pieces: the workers need no patch
    src, blocksize = _inputs(kind, lines, tmp_path / "in")
    _, one, j1 = _run(abc, src, tmp_path / "one", blocksize=blocksize)
    r2, two, j2 = _run(abc, src, tmp_path / "two", blocksize=blocksize, client=client)
    pd.testing.assert_frame_equal(two, one, check_exact=True)
    for k in TOTALS:
        assert j2["counts"][k] == j1["counts"][k], k
    assert r2.counts["parts"] == 2
    assert r2.counts["tasks"] == r2.counts["partitions"] + 1  # one piece split in two
    if kind != "files":  # (a gzip file weighs its compressed bytes)
        first = pq.read_table(min((r2.path / "scores.parquet").iterdir()), columns=["doc_id"]).num_rows
        size = Path(src).stat().st_size
        nbytes = sum(len(x.encode()) + 1 for x in lines[:first])  # the first share's text, to a line's end
        assert 0 <= nbytes - size // 2 <= max(len(x.encode()) + 1 for x in lines), (nbytes, size)


def _pieces_rows(pieces, fs):
    return [t for p in pieces for t in read_piece(p, fs)["text"].tolist()]


@pytest.mark.parametrize("blocksize,n", [(16384, 2), (16384, 3), (5000, 4), (64 << 20, 2), (64 << 20, 5)])
def test_pieces_split_at_the_shares_read_the_same_rows(lines, tmp_path, monkeypatch, blocksize, n):
    """Split at the shares' cuts, the pieces are consecutive byte ranges of their file that read the same rows
    in the same order, and cut into ``n`` shares of equal bytes (to a byte each); the halves of a share's
    row count sum to its rows."""
    monkeypatch.setattr(ng, "MIN_SPLIT", 1)
    src = _write(tmp_path / "one.txt", lines)
    fs, pieces, _ = plan(str(src), format="lines", blocksize=blocksize)
    split, source = ng._split_at_shares(pieces, fs, n)
    assert len(split) > len(pieces) and sorted(source) == source and set(source) == set(range(len(pieces)))
    assert split[0].start == 0 and split[-1].end is None
    assert all(a.end == b.start for a, b in itertools.pairwise(split))
    assert _pieces_rows(split, fs) == _pieces_rows(pieces, fs)
    w = [ng._piece_weight(p, fs) for p in split]
    shares = ng._contiguous_shares(w, n)
    assert len(shares) == n
    total = sum(w)
    for k, (a, b) in enumerate(shares):
        assert abs(sum(w[a:b]) - total // n) <= n, (k, sum(w[a:b]), total // n)
    entries = [(p, None, 0, 1) for p in split[shares[0][0]:shares[0][1]]]
    first, second = ng._halves(entries, fs)
    assert first and second
    whole = sum(count_lines_rows(p, fs) for p, *_ in entries)
    assert sum(count_lines_rows(p, fs) for p, *_ in first + second) == whole
    # a gzip piece is no byte range: it is not cut
    gz = _write(tmp_path / "one.txt.gz", lines, compress=True)
    fs, pieces, _ = plan(str(gz), format="lines", blocksize=blocksize)
    assert ng._split_at_shares(pieces, fs, n)[0] == pieces


def test_parts_are_sealed_with_the_crc_their_writer_took(client, abc, lines, tmp_path, monkeypatch):
    """The part files' CRC32s in ngram.json are taken by their writer as it writes them (in this process and on
    each worker), not read back at the seal; they are the files' CRC32s, and the output verifies."""
    from cutext.stages.runtime import checksums

    src, blocksize = _inputs("one file", lines, tmp_path / "in")
    seals = []  # the files each seal read back
    real = checksums._crc_files
    monkeypatch.setattr(checksums, "_crc_files",
                        lambda paths: seals.append([Path(p).name for p in paths]) or real(paths))
    runs = [_run(abc, src, tmp_path / name, blocksize=blocksize, **kw)
            for name, kw in (("one", {}), ("two", {"client": client}))]
    assert seals == [[], []]  # two seals; neither read a file back
    for r, _, j in runs:
        parts = sorted((r.path / "scores.parquet").glob("part-*.parquet"))
        assert len(parts) == (2 if r.scheduler == "client" else 1)
        for p in parts:
            assert j["files"][f"scores.parquet/{p.name}"] == {"bytes": p.stat().st_size,
                                                              "crc32": checksums.crc32_file(p)}
        checksums.verify(r.path, "ngram.json", j)


@pytest.mark.parametrize("npartitions", [1, 3])
@pytest.mark.parametrize("ids", [True, False])
def test_client_frame_equals_one_process(client, abc, lines, tmp_path, npartitions, ids):
    """A dask frame (its partitions computed on the workers, then scored and written there), with an id
    column or numbered by row across its partitions, equals the run in one process."""
    dd = pytest.importorskip("dask.dataframe")
    frame = pd.DataFrame({"id": [f"d{i}" for i in range(len(lines))], "text": lines})
    kw = {"model": abc, "text_column": "text", "progress": False, "id_column": "id" if ids else None}
    src = dd.from_pandas(frame if ids else frame[["text"]], npartitions=npartitions)
    r1 = pipelines.run("ngram", src, out=tmp_path / "one", **kw)
    r2 = pipelines.run("ngram", src, out=tmp_path / "two", client=client, **kw)
    one, two = (pq.read_table(r.path / "scores.parquet").to_pandas() for r in (r1, r2))
    pd.testing.assert_frame_equal(two, one, check_exact=True)
    assert one["source_id"].tolist()[-1] == (f"d{len(lines) - 1}" if ids else str(len(lines) - 1))
    assert r2.counts["workers"] == 2 and r2.counts["tasks"] == max(2, npartitions)
    j1, j2 = (json.loads((r.path / "ngram.json").read_text()) for r in (r1, r2))
    for k in TOTALS:
        assert j2["counts"][k] == j1["counts"][k], k
    assert j2["log10_prob"] == pytest.approx(j1["log10_prob"], rel=1e-12, abs=0)
    if npartitions > 1:
        assert j2["log10_prob"] == j1["log10_prob"]


def test_client_piece_of_one_line(client, abc, tmp_path):
    """A piece of fewer rows than workers: one worker scores the row, the other has an empty slice and
    writes nothing."""
    src = _write(tmp_path / "one.txt", ["thank you"])
    _, one, j1 = _run(abc, src, tmp_path / "one")
    r2, two, j2 = _run(abc, src, tmp_path / "two", client=client)
    pd.testing.assert_frame_equal(two, one, check_exact=True)
    assert j2["log10_prob"] == j1["log10_prob"] and r2.counts["n_docs"] == 1 and r2.counts["parts"] == 1


def _logs(client) -> dict:
    return client.run(lambda dask_worker: {"in": list(dask_worker.transfer_incoming_log),
                                           "out": list(dask_worker.transfer_outgoing_log)})


def test_workers_write_the_scores(client, abc, lines, tmp_path, monkeypatch):
    """The caller writes no score and receives none: the workers' transfer logs show only small results
    served to the caller (row counts, totals, seconds), under 5 % of the scores' bytes, and nothing of size
    between the workers; a writer of scores in the calling process would fail the run."""
    src = _write(tmp_path / "big.txt", lines * 24)
    _, one, _ = _run(abc, src, tmp_path / "one", blocksize=1 << 20)
    nbytes = int(one.memory_usage(deep=True).sum())

    class NoWriterHere:
        def __init__(self, *a, **k):
            raise AssertionError("the calling process wrote scores")

    monkeypatch.setattr(ng, "_ScoresWriter", NoWriterHere)  # the caller's module only: workers are processes
    workers = set(client.scheduler_info()["workers"])
    before = {w: (len(v["in"]), len(v["out"])) for w, v in _logs(client).items()}
    r2, two, _ = _run(abc, src, tmp_path / "two", blocksize=1 << 20, client=client)
    to_workers = to_caller = 0
    for w, v in _logs(client).items():
        n_in, n_out = before.get(w, (0, 0))
        to_workers += sum(int(e["total"]) for e in v["in"][n_in:])
        to_caller += sum(int(e["total"]) for e in v["out"][n_out:] if e.get("who") not in workers)
    pd.testing.assert_frame_equal(two, one, check_exact=True)
    assert r2.counts["partitions"] >= 2 and r2.counts["parts"] == 2
    assert nbytes > 1_000_000
    print("bytes served to the caller", to_caller, "between workers", to_workers, "scores", nbytes)
    assert 0 < to_caller < 0.05 * nbytes, (to_caller, nbytes)  # > 0: the logs are live
    assert to_workers < 0.01 * nbytes, (to_workers, nbytes)


def test_shares_cover_the_pieces_in_order():
    """One share a worker, contiguous, non-empty, of about equal bytes; fewer pieces than workers are cut
    into row slices, the largest piece into the most."""
    assert ng._contiguous_shares([10] * 8, 2) == [(0, 4), (4, 8)]
    assert ng._contiguous_shares([100, 1, 1], 3) == [(0, 1), (1, 2), (2, 3)]
    assert ng._contiguous_shares([1, 1, 1, 100], 2) == [(0, 3), (3, 4)]
    assert ng._contiguous_shares([5], 4) == [(0, 1)]
    assert ng._slices_per_piece([100, 10], 4) == [3, 1]
    assert [ng._slice_bounds(5, k, 3) for k in range(3)] == [(0, 1), (1, 3), (3, 5)]
    assert [ng._slice_bounds(1, k, 2) for k in range(2)] == [(0, 0), (0, 1)]
    rng = np.random.default_rng(0)
    for _ in range(200):
        w = rng.integers(0, 50, int(rng.integers(1, 30)))
        n = int(rng.integers(1, 12))
        got = ng._contiguous_shares(w, n)
        assert len(got) == min(n, len(w)) and got[0][0] == 0 and got[-1][1] == len(w)
        assert all(a < b for a, b in got) and all(x[1] == y[0] for x, y in itertools.pairwise(got))


_LOG: list = []  # (what, part, perf_counter) from the patched steps below, in this process


def _slow_rows(entries, fs, name=None):
    """_share_rows that takes a second longer (a large share to count)."""
    import time

    time.sleep(1.0)
    out = _REAL_ROWS(entries, fs, name)
    _LOG.append(("counted", None, time.perf_counter()))
    return out


def _logged_add(self, i, table):
    import time

    _LOG.append(("scored", Path(self.path).name, time.perf_counter()))
    return _REAL_ADD(self, i, table)


_REAL_ROWS, _REAL_ADD = ng._share_rows, ng._ScoresWriter.add


@pytest.mark.parametrize("threads", [1, 2])
def test_a_share_scores_before_the_rows_before_it_are_counted(abc, lines, tmp_path, monkeypatch, threads):
    """The second share starts scoring while the rows of the first are still being counted (its writer holds
    the scored rows until the count arrives), on workers of two threads; on workers of one thread the count
    runs while the share waits for it, seceded from the pool (no deadlock). The rows equal one process."""
    src, blocksize = _inputs("one file", lines, tmp_path / "in")
    _, one, _ = _run(abc, src, tmp_path / "one", blocksize=blocksize)
    _LOG.clear()
    monkeypatch.setattr(ng, "_share_rows", _slow_rows)
    monkeypatch.setattr(ng._ScoresWriter, "add", _logged_add)
    # workers in this process, so that the patches reach them
    with distributed.LocalCluster(n_workers=2, threads_per_worker=threads, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        r, two, _ = _run(abc, src, tmp_path / "two", blocksize=blocksize, client=c)
    pd.testing.assert_frame_equal(two, one, check_exact=True)
    assert r.counts["parts"] == 2
    counted = min(t for what, _, t in _LOG if what == "counted")
    second = min(t for what, part, t in _LOG if what == "scored" and part == "part-00001.parquet")
    if threads == 2:
        assert second < counted  # scored before the first share's rows were counted


def _count_fails(piece, fs):
    """count_lines_rows of a file that can no longer be read."""
    raise CorpusError(f"{piece.paths[0]}: cannot read: a test's error")


_STOPPED: list = []  # the errors with which the shares' waits for the counts ended, in this process
_WAITED: list = []  # a share that began to wait for the counts (the failed count may end the run before one does)
_REAL_GET = ng._Offsets.get


def _recorded_get(self):
    if self.names:  # the first share waits for no count
        _WAITED.append(self)
    try:
        return _REAL_GET(self)
    except Exception as exc:
        _STOPPED.append(exc)
        raise


def _run_guarded(fn, seconds=120.0):
    """``fn()`` on a thread: its error, or a failure if it is still running after ``seconds`` (a hang)."""
    import threading

    box = {}

    def call():
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001  (handed to the test)
            box["error"] = exc

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "the run did not end"
    return box.get("error")


def _wait_for(cond, seconds=60.0):
    import time

    deadline = time.monotonic() + seconds
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.05)
    return cond()


def test_a_failed_row_count_raises_its_error_and_the_share_waiting_for_it_stops(abc, lines, tmp_path,
                                                                                monkeypatch):
    """A row count that fails is the run's error (it does not leave the caller waiting for a share that waits
    for that count): the share after it stops with an error naming the count's, and nothing is written."""
    src, blocksize = _inputs("one file", lines, tmp_path / "in")
    _STOPPED.clear()
    _WAITED.clear()
    monkeypatch.setattr(ng, "count_lines_rows", _count_fails)
    monkeypatch.setattr(ng._Offsets, "get", _recorded_get)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        err = _run_guarded(lambda: _run(abc, src, tmp_path / "out", blocksize=blocksize, client=c))
        # the count's own error, or the waiting share's that gives it (whichever reaches the caller first)
        assert isinstance(err, (CorpusError, RuntimeError)), err
        assert "one.txt: cannot read: a test's error" in str(err), err
        assert _wait_for(lambda: not any(c.processing().values()))  # no task left running
        # a share that waited for the count stopped with an error (woken by the failed count, or released by the
        # caller, whichever came first); the run may also end before the second share begins to wait
        assert len(_STOPPED) == len(_WAITED) and all(isinstance(e, RuntimeError) for e in _STOPPED), _STOPPED
    assert not (tmp_path / "out").exists()


def _never_rows(entries, fs, name=None):
    """_share_rows that never publishes (a count whose worker hangs), until its task is released."""
    import time

    while not task_released():
        time.sleep(0.05)
    raise RuntimeError("released")


def _read_fails_for_the_first_share(lm, piece, fs):
    if piece.start == 0:
        raise CorpusError(f"{piece.paths[0]}: cannot read: a test's error")
    return _REAL_READ(lm, piece, fs)


_REAL_READ = ng._read_for


def test_a_failed_share_stops_the_shares_waiting_for_counts_that_will_not_come(abc, lines, tmp_path, monkeypatch):
    """The first share fails while its rows are still being counted: the run raises the share's error and the
    share after it, waiting for that count, stops instead of waiting for ever; nothing is written."""
    src, blocksize = _inputs("one file", lines, tmp_path / "in")
    _STOPPED.clear()
    monkeypatch.setattr(ng, "_share_rows", _never_rows)
    monkeypatch.setattr(ng._Offsets, "get", _recorded_get)
    monkeypatch.setattr(ng, "_read_for", _read_fails_for_the_first_share)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        err = _run_guarded(lambda: _run(abc, src, tmp_path / "out", blocksize=blocksize, client=c))
        assert isinstance(err, CorpusError) and "a test's error" in str(err), err
        assert _wait_for(lambda: _STOPPED)
        assert isinstance(_STOPPED[0], RuntimeError)
        assert _wait_for(lambda: not any(c.processing().values()))
    assert not (tmp_path / "out").exists()


def test_offsets_sum_the_published_counts_and_raise_a_failed_one():
    """A share's offsets: the published counts summed (first doc_id, first row of each file); a count published
    as failed is an error that gives the count's."""
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None) as c:
        ng._publish_rows("t-a", {0: 5, 1: 2}, client=c)
        ng._publish_rows("t-b", {1: 3}, client=c)
        assert ng._Offsets(("t-a", "t-b")).get() == (10, {0: 5, 1: 5})
        ng._publish_rows("t-c", {ng._COUNT_FAILED: "CorpusError: x.txt: cannot read"}, client=c)
        with pytest.raises(RuntimeError, match="x.txt: cannot read"):
            ng._Offsets(("t-a", "t-c")).get()
        ng._Offsets(("t-d",)).stop(c)  # a count that never came, published as failed by the caller
        with pytest.raises(RuntimeError, match="stopped before it was counted"):
            ng._Offsets(("t-d",)).get()
        ng._Offsets(("t-a", "t-b", "t-c", "t-d")).release(c)
        assert not ng._Offsets(("t-a",)).ready()


_READS: list = []  # the start offsets of the pieces read, in this process


def test_a_failed_share_stops_the_other_shares_before_their_next_piece(abc, lines, tmp_path, monkeypatch):
    """The second share fails at its first piece while the first share is still scoring its many pieces: the
    run raises the error once the first share has stopped, before its next piece, and nothing is written."""
    src, blocksize = _inputs("one file", lines, tmp_path / "in")
    size = src.stat().st_size
    _READS.clear()

    def read(lm, piece, fs):
        import time

        _READS.append(piece.start)
        if piece.start >= size // 2:
            raise CorpusError(f"{piece.paths[0]}: cannot read: a test's error")
        time.sleep(0.2)  # a share of many large pieces
        return _REAL_READ(lm, piece, fs)

    monkeypatch.setattr(ng, "_read_for", read)
    first = [p for p in plan(src, format="lines", blocksize=blocksize)[1] if p.start < size // 2]
    assert len(first) >= 8
    with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        err = _run_guarded(lambda: _run(abc, src, tmp_path / "out", blocksize=blocksize, client=c))
        assert isinstance(err, CorpusError) and "a test's error" in str(err), err
        n_read = sum(1 for s in _READS if s < size // 2)
        assert not any(c.processing().values())
        assert sum(1 for s in _READS if s < size // 2) == n_read  # nothing read after the error was raised
    assert n_read < len(first)  # the first share stopped before its last pieces
    assert not (tmp_path / "out").exists()
