"""Progress inside long stages: partitions done / total for every pipeline, and a
bounded number of plain lines (no bar, no carriage return) when standard error is not a terminal."""
from __future__ import annotations

import io
import re
from pathlib import Path

import dask.dataframe as dd
import pandas as pd
import pytest

from cutext import pipelines
from cutext.stages.runtime import progress as prog


class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_plain_progress_writes_a_line_per_interval_and_one_at_the_end():
    clock, out = _Clock(), io.StringIO()
    bar = prog.PlainProgress(total=1000, desc="demo", unit="partitions", interval=10.0, stream=out, clock=clock)
    for _ in range(1000):  # 1,000 updates over 100 simulated seconds
        clock.t += 0.1
        bar.update(1)
    bar.close()
    bar.close()  # closing twice writes nothing more
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert 10 <= len(lines) <= 11  # one per 10 s, plus the final line
    assert lines[-1].startswith("demo: 1,000/1,000 partitions (100%), 1:40")
    assert re.match(r"demo: \d+/1,000 partitions \(\d+%\), ", lines[0])


def test_progress_bar_is_plain_off_a_terminal_and_tqdm_on_one():
    assert isinstance(prog.progress_bar(total=3, stream=io.StringIO()), prog.PlainProgress)
    tty = _Tty()
    bar = prog.progress_bar(total=3, desc="x", stream=tty)
    assert not isinstance(bar, prog.PlainProgress)
    bar.update(3)
    bar.close()
    assert "3/3" in tty.getvalue()


def _screen(text: str) -> list[str]:
    """The lines a terminal shows for ``text``: ``\\r`` returns, ``\\n`` moves down, ESC[A moves up, other
    escape sequences are ignored, characters overwrite."""
    lines, row, col, i = [""], 0, 0, 0
    while i < len(text):
        m = re.match(r"\x1b\[(\d*)([A-Za-z])", text[i:])
        if m:
            if m.group(2) == "A":
                row = max(0, row - int(m.group(1) or 1))
            i += len(m.group(0))
            continue
        ch = text[i]
        if ch == "\r":
            col = 0
        elif ch == "\n":
            row, col = row + 1, 0
            lines += [""] * (row + 1 - len(lines))
        else:
            line = lines[row].ljust(col)
            lines[row], col = line[:col] + ch + line[col + 1:], col + 1
        i += 1
    return [ln.rstrip() for ln in lines]


def test_a_finished_bar_leaves_its_one_line_whatever_else_is_open():
    """A bar that an earlier failed run never closed (or one open around this one) does not push the next
    bars down: each finished bar is one line on the terminal, its last, with no blank or stale lines."""
    tty = _Tty()
    leaked = prog.progress_bar(total=5, desc="leaked", stream=tty)
    leaked.update(1)
    tty.seek(0)
    tty.truncate()
    for k in range(3):
        bar = prog.progress_bar(total=4, desc=f"stage{k}", stream=tty)
        for _ in range(4):
            bar.update(1)
        bar.close()
    shown = _screen(tty.getvalue())
    assert [ln.split(":")[0] for ln in shown[:3]] == ["stage0", "stage1", "stage2"]
    assert all("4/4" in ln for ln in shown[:3]) and shown[3:] == [""]
    leaked.close()


def _corpus(tmp_path, data_dir, n_files=3):
    """CACM abstracts split into ``n_files`` JSON Lines files (one partition each)."""
    lines = (data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines()[:300]
    d = tmp_path / "corpus"
    d.mkdir()
    step = -(-len(lines) // n_files)
    for i in range(n_files):
        (d / f"part{i}.jsonl").write_text("\n".join(lines[i * step:(i + 1) * step]) + "\n", encoding="utf-8")
    return str(d / "*.jsonl")


STAGE_LINE = re.compile(r"^(\w+) ([\w+]+): ([\d,]+)/([\d,]+) (partitions|tasks) \(\d+%\), [\d.:]+( s)?(, .*)?$")


def _lines(text: str) -> list[str]:
    assert "\r" not in text
    # the compile notice comes only where numba's cache does not hold the kernels yet
    return [ln for ln in text.splitlines() if ln.strip() and ln != prog.COMPILE_NOTICE]


@pytest.mark.parametrize("index_format, last", [(2, "write"), (1, "weight+write")])
def test_bm25_progress_off_a_terminal_is_one_plain_line_per_stage(tmp_path, data_dir, capsys, index_format, last):
    r = pipelines.run("bm25", _corpus(tmp_path, data_dir), out=tmp_path / "idx", backend="cpu",
                      scheduler="threads", text_column="contents", progress=True, index_format=index_format)
    assert r.counts["partitions"] == 3
    lines = _lines(capsys.readouterr().err)
    parsed = [STAGE_LINE.match(ln) for ln in lines]
    assert all(parsed), lines
    stages = [m.group(2) for m in parsed]
    assert stages == ["read", "tokenize", "encode", "count", last]  # fast: only the closing lines
    by = {m.group(2): m for m in parsed}
    for name in ("read", "tokenize"):  # one task per partition: partitions done / total
        assert by[name].group(3) == by[name].group(4) == "3" and by[name].group(5) == "partitions"


def test_progress_false_writes_nothing(tmp_path, data_dir, capsys):
    pipelines.run("bm25", _corpus(tmp_path, data_dir), out=tmp_path / "idx", backend="cpu",
                  scheduler="sync", text_column="contents", progress=False)
    assert capsys.readouterr().err == ""


def test_periodic_lines_are_bounded_by_the_interval(tmp_path, data_dir, capsys, monkeypatch):
    """With an interval of 0 every finished partition writes a line: one line per partition, never a
    bar's redraws."""
    monkeypatch.setattr(prog, "PLAIN_INTERVAL", 0.0)
    pipelines.run("bm25", _corpus(tmp_path, data_dir), out=tmp_path / "idx", backend="cpu",
                  scheduler="sync", text_column="contents", progress=True)
    lines = _lines(capsys.readouterr().err)
    tok = [ln.split(":")[1].split()[0] for ln in lines if ln.startswith("bm25 tokenize:")]
    # the stage tokenizes each partition once (cutext.stages.text.public.tokenize persists its summary; the
    # lengths come from the summaries): 1/3 .. 3/3; the closing line would repeat the last one, so it
    # is left out
    assert tok == ["1/3", "2/3", "3/3"]


def test_progress_on_a_distributed_client(tmp_path, data_dir, capsys):
    """With a Client, stages count their futures as they finish (distributed.as_completed), never the
    computations of the workers' own threads; a file input built by the workers' shares counts the pieces of
    each share as it finishes."""
    distributed = pytest.importorskip("distributed")
    corpus = _corpus(tmp_path, data_dir)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        r = pipelines.run("bm25", corpus, out=tmp_path / "idx", backend="cpu",
                          client=client, text_column="contents", progress=True)
        assert r.scheduler == "client"
        lines = _lines(capsys.readouterr().err)
        built = [ln for ln in lines if ln.startswith("bm25 build on workers:")]
        assert built and built[-1].startswith("bm25 build on workers: 3/3 pieces"), lines
        frame = pd.concat([pd.read_json(p, lines=True) for p in sorted(Path(corpus).parent.glob("*.jsonl"))],
                          ignore_index=True)
        pipelines.run("bm25", dd.from_pandas(frame, npartitions=3), out=tmp_path / "idx2", backend="cpu",
                      client=client, text_column="contents", progress=True)
    lines = _lines(capsys.readouterr().err)
    # a frame's partitions: each tokenized and written as a segment where it is, counted as they finish
    tok = [ln for ln in lines if ln.startswith("bm25 tokenize+write:")]
    assert tok and tok[-1].startswith("bm25 tokenize+write: 3/3 "), lines


def _names(lines):
    """The bars' names in order, a bar that also wrote a periodic line (a slow first JIT compile) once."""
    names = [ln.split(":")[0] for ln in lines]
    return [n for i, n in enumerate(names) if i == 0 or n != names[i - 1]]


def test_lda_and_cluster_progress_off_a_terminal(tmp_path, data_dir, capsys):
    corpus = _corpus(tmp_path, data_dir)
    r = pipelines.run("lda", corpus, out=tmp_path / "lda", K=3, iterations=40, backend="cpu",
                      text_column="contents", progress=True)
    lines = _lines(capsys.readouterr().err)
    assert _names(lines) == ["lda read", "lda tokenize", "lda encode", "lda count", "lda K=3"]
    assert lines[-1].startswith("lda K=3: 40/40 it (100%)") and f"LLPT {r.headline['LLPT']:.4f}" in lines[-1]
    r = pipelines.run("cluster", corpus, out=tmp_path / "cl", backend="cpu", text_column="contents",
                      threshold=0.3, progress=True)
    lines = _lines(capsys.readouterr().err)
    assert _names(lines) == ["cluster read", "cluster tokenize", "cluster encode",
                                                 "cluster count", "cluster"]
    assert lines[-1].startswith("cluster: 300/300 docs (100%)")
    assert f"{r.headline['clusters']} clusters" in lines[-1]


class TestCompileNotice:
    @staticmethod
    def _jitted(module: str):
        import numba

        def f(x):
            return x + 1

        f.__module__ = module
        return numba.njit(f)

    def test_once_a_process_at_the_first_compile_of_cutext(self, capsys, monkeypatch):
        monkeypatch.setitem(prog._NOTICE, "said", False)
        prog.notice_compiles(True)
        other, ours = self._jitted("elsewhere"), self._jitted("cutext.kernels.fake")
        other(1)
        assert prog.COMPILE_NOTICE not in capsys.readouterr().err
        ours(1)
        ours(1.5)  # a second signature compiles too
        assert capsys.readouterr().err.count(prog.COMPILE_NOTICE) == 1
        self._jitted("cutext.kernels.fake")(2)
        assert prog.COMPILE_NOTICE not in capsys.readouterr().err

    def test_quiet_runs_log_it(self, capsys, caplog, monkeypatch):
        monkeypatch.setitem(prog._NOTICE, "said", False)
        prog.notice_compiles(False)
        try:
            with caplog.at_level("INFO", logger="cutext"):
                self._jitted("cutext.kernels.fake")(1)
        finally:
            prog.notice_compiles(True)
        assert prog.COMPILE_NOTICE not in capsys.readouterr().err
        assert [r.getMessage() for r in caplog.records] == [prog.COMPILE_NOTICE]


class TestGpuCompileNotice:
    """The line said at the first GPU run of a process when CuPy's kernel cache is empty."""

    @staticmethod
    def _fresh(monkeypatch, folder):
        monkeypatch.setitem(prog._GPU_NOTICE, "checked", False)
        monkeypatch.setenv("CUPY_CACHE_DIR", str(folder))
        monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)

    def test_an_absent_or_empty_cache_is_said_once(self, tmp_path, capsys, monkeypatch):
        self._fresh(monkeypatch, tmp_path / "absent")
        assert prog.cupy_cache_dir() == tmp_path / "absent"
        prog.notice_gpu_compiles(True)
        prog.notice_gpu_compiles(True)
        err = capsys.readouterr().err
        assert err.count("compiling GPU kernels") == 1 and str(tmp_path / "absent") in err
        (tmp_path / "empty").mkdir()
        self._fresh(monkeypatch, tmp_path / "empty")
        prog.notice_gpu_compiles(True)
        assert "compiling GPU kernels" in capsys.readouterr().err

    def test_a_cache_with_kernels_says_nothing(self, tmp_path, capsys, monkeypatch):
        (tmp_path / "k").mkdir()
        (tmp_path / "k" / "0123abcd.cubin").write_bytes(b"x")
        self._fresh(monkeypatch, tmp_path / "k")
        prog.notice_gpu_compiles(True)
        assert capsys.readouterr().err == ""

    def test_quiet_runs_log_it_and_an_in_memory_cache_is_named(self, tmp_path, capsys, caplog, monkeypatch):
        self._fresh(monkeypatch, tmp_path / "absent")
        monkeypatch.setenv("CUPY_CACHE_IN_MEMORY", "1")
        with caplog.at_level("INFO", logger="cutext"):
            prog.notice_gpu_compiles(False)
        assert capsys.readouterr().err == ""
        assert [r.getMessage() for r in caplog.records] == [
            prog.GPU_COMPILE_NOTICE.format(where="memory (CUPY_CACHE_IN_MEMORY=1: this process only)")]

    def test_the_default_folder_is_cupys(self, monkeypatch):
        monkeypatch.delenv("CUPY_CACHE_DIR", raising=False)
        assert prog.cupy_cache_dir() == Path.home() / ".cupy" / "kernel_cache"


@pytest.mark.slow
def test_a_failed_task_on_a_client_raises_at_once_and_stops_the_others():
    """``wait`` raises the first task's error as it happens, not after every other task of the stage (as
    ``distributed.wait`` does), and returns only when no worker still runs one of them (the queued ones
    cancelled, the running ones waited for), so none writes into an output its caller then removes."""
    import time

    distributed = pytest.importorskip("distributed")
    finished = []  # the sleeping tasks that ran to their end (workers in this process)

    def fail():
        time.sleep(0.2)
        raise ValueError("one task failed")

    def sleep(i):
        time.sleep(1.0)
        finished.append(i)

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        futures = [client.submit(fail, pure=False)] + [client.submit(sleep, i, pure=False) for i in range(8)]
        with pytest.raises(ValueError, match="one task failed"):
            prog.wait(futures)
        assert not any(client.run(lambda dask_worker: len(dask_worker.state.executing)).values())
        done = len(finished)
        time.sleep(1.5)
        assert len(finished) == done  # none ran after wait returned
    assert done < 8  # raised before the queued tasks ran: distributed.wait runs all eight first
