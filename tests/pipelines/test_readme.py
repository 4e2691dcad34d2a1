"""The README's code blocks run as written.

Every fenced ``python`` and ``bash`` block of README.md runs, in order, in a working folder laid out
as the README assumes: ``data/`` is the repository's bundled data; every other dataset comes from
``datasets.fetch`` (``python -m cutext.pipelines fetch NAME`` in bash).  The blocks run twice: with
the datasets they fetch at hand (a local copy or the cache; the test is skipped for missing data
otherwise), and with none (``CUTEXT_DATA`` an empty folder, the shared data folder hidden,
``CUTEXT_OFFLINE=1``), where a block that fetches must run or stop at the first
``DatasetNotFoundError`` (a bash block: exit with its message), and a block that fetches nothing must
name no shared data path (it runs as in the first pass).  Python blocks run in this interpreter (one
namespace per block); a top-level expression followed by ``# -> VALUE`` must equal VALUE (a number to the last digit
written, else its ``str``).  Bash blocks run with ``python`` = this interpreter; the set-up steps of
a fresh machine (``python3 -m venv``, ``. .venv/bin/activate``, ``pip install``) are left out.  A
``text`` block right after a bash block is its expected output: each ``name  number`` line must be
printed (the rest of a line after ``#`` is a comment, e.g. Anserini's figure).  A block preceded by
``<!-- readme-test: skip ... -->`` is not run (the test suite itself).

The figures are what the README promises a user; independent checks of them (Anserini, KenLM) are
in the pipelines' own tests.
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cutext.pipelines.datasets import DATASETS, DatasetNotFoundError, locate

from helpers import MISSING_DATA

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves this module out

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

FENCE = re.compile(r"^```(\w*)\s*$")
SKIP = "<!-- readme-test: skip"
SETUP = ("python3 -m venv", ". .venv/bin/activate", "source .venv/bin/activate", "pip install")
FETCH = re.compile(r"""datasets\.fetch\(\s*["']([\w.-]+)["']|cutext\.pipelines fetch ([\w.-]+)""")
NOT_FOUND = re.compile(r"^error: dataset '[\w.-]+' not found: ", re.M)  # DatasetNotFoundError on the CLI


def fetched(code: str) -> list[str]:
    """The datasets a block fetches, in order."""
    return [a or b for a, b in FETCH.findall(code) if (a or b) in DATASETS]


def readme_blocks(text: str) -> list[dict]:
    """Fenced blocks in order: ``{"lang", "code", "line", "skip"}`` (line: 1-based line of the fence)."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, lang, body = i, m.group(1), []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        prev = next((ln for ln in reversed(lines[:start]) if ln.strip()), "")
        blocks.append({"lang": lang, "code": "\n".join(body) + "\n", "line": start + 1,
                       "skip": prev.strip().startswith(SKIP)})
        i += 1
    return blocks


def _number(s: str):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return None


def _digits(s: str) -> int:
    s = s.replace(",", "")
    return len(s.split(".")[1]) if "." in s and "e" not in s.lower() else 0


def check_value(got, expected: str, where: str) -> None:
    """``got`` equals the README's ``expected`` text: a number to its last written digit, else its str."""
    want = _number(expected)
    if want is not None:
        assert isinstance(got, (int, float)) or hasattr(got, "__float__"), f"{where}: {got!r} is not a number"
        tol = 0.5 * 10 ** -_digits(expected) + 1e-12
        assert abs(float(got) - want) <= tol, f"{where}: README says {expected}, got {float(got)!r}"
    else:
        assert str(got) == expected, f"{where}: README says {expected!r}, got {str(got)!r}"


def run_python_block(code: str, line: int, stop_at=()):
    """Execute a block statement by statement; check every ``expr  # -> VALUE``.  An exception of
    ``stop_at`` ends the block and is returned (None when the block ran to its end)."""
    tree = ast.parse(code, filename=f"README.md:{line}")
    src = code.splitlines()
    ns: dict = {"__name__": "__readme__"}
    for node in tree.body:
        where = f"README.md:{line + node.lineno}"
        m = re.search(r"#\s*->\s*(.+?)\s*(?:#.*)?$", src[node.end_lineno - 1])
        try:
            if isinstance(node, ast.Expr):
                got = eval(compile(ast.Expression(node.value), where, "eval"), ns)
                if m:
                    check_value(got, m.group(1), where)
            else:
                assert not m, f"{where}: '# ->' on a statement that is not an expression"
                exec(compile(ast.Module([node], type_ignores=[]), where, "exec"), ns)
        except stop_at as exc:
            return exc
    return None


def bash_commands(code: str) -> str:
    """The block's command lines without the fresh-machine set-up steps."""
    out = []
    for raw in code.splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        parts = [p.strip() for p in raw.split("&&")]
        kept = [p for p in parts if not p.startswith(SETUP)]
        if kept:
            out.append(" && ".join(kept))
    return "\n".join(out)


def expected_lines(text: str) -> list[tuple[str, str]]:
    """``(name, number)`` pairs of an expected-output block (``# ...`` comments dropped)."""
    pairs = []
    for ln in text.splitlines():
        ln = ln.split("#", 1)[0].strip()
        parts = ln.split()
        if len(parts) == 2 and _number(parts[1]) is not None:
            pairs.append((parts[0], parts[1]))
    return pairs


def _workdir(tmp_path_factory):
    """``<tmp>/repo`` (the working folder; ``data`` -> the bundled data) and a folder of ``python`` wrappers."""
    base = tmp_path_factory.mktemp("readme")
    repo = base / "repo"
    repo.mkdir()
    (repo / "data").symlink_to(ROOT / "data", target_is_directory=True)
    bindir = base / "bin"
    bindir.mkdir()
    for name in ("python", "python3"):  # a wrapper, not a symlink: a venv's python must be called by its path
        w = bindir / name
        w.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n', encoding="utf-8")
        w.chmod(0o755)
    return repo, bindir


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return _workdir(tmp_path_factory)


BLOCKS = [b for b in readme_blocks(README.read_text(encoding="utf-8")) if b["lang"] in ("python", "bash")]


def test_readme_has_runnable_blocks():
    langs = [b["lang"] for b in BLOCKS if not b["skip"]]
    assert langs.count("python") >= 4 and langs.count("bash") >= 1  # and the skipped set-up blocks
    text = README.read_text(encoding="utf-8")
    for fname in ("reuters.parquet", "corpus/", "heldout.txt", "held_out_docs"):  # names that exist nowhere
        for b in BLOCKS:
            assert fname not in b["code"] or fname == "reuters.parquet" and "load_reuters21578" in b["code"], \
                f"README.md:{b['line']}: {fname} is not built by the block"
    assert "load_reuters21578" in text and "[notebooks]" in text


def test_readme_blocks_run_as_written(workdir, monkeypatch, capfd):
    missing = sorted({n for b in BLOCKS if not b["skip"] for n in fetched(b["code"]) if locate(n) is None})
    if missing:   # the datasets are at hand, or the test is skipped for missing data (never downloaded here)
        pytest.skip(MISSING_DATA + ", ".join(missing))
    repo, bindir = workdir
    monkeypatch.chdir(repo)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("CUTEXT_OFFLINE", "1")
    all_blocks = readme_blocks(README.read_text(encoding="utf-8"))
    ran = 0
    for i, b in enumerate(all_blocks):
        if b["lang"] not in ("python", "bash") or b["skip"]:
            continue
        if b["lang"] == "python":
            run_python_block(b["code"], b["line"])
        else:
            cmd = bash_commands(b["code"])
            p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", cmd], cwd=repo, capture_output=True,
                               text=True, env={**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"})
            assert p.returncode == 0, f"README.md:{b['line']}: exit {p.returncode}\n{p.stderr[-3000:]}"
            nxt = all_blocks[i + 1] if i + 1 < len(all_blocks) else None
            if nxt is not None and nxt["lang"] == "text":
                printed = {}
                for ln in p.stdout.splitlines():
                    parts = ln.split()
                    if len(parts) == 2 and _number(parts[1]) is not None:
                        printed[parts[0]] = float(parts[1])
                want = expected_lines(nxt["code"])
                assert want, f"README.md:{nxt['line']}: no 'name number' line in the expected output"
                for name, val in want:
                    assert name in printed, f"README.md:{nxt['line']}: {name} not printed:\n{p.stdout}"
                    check_value(printed[name], val, f"README.md:{nxt['line']} ({name})")
        ran += 1
    assert ran == len([b for b in BLOCKS if not b["skip"]])


def test_readme_blocks_without_data_run_or_stop_at_fetch(tmp_path_factory, tmp_path, monkeypatch):
    """A machine with no dataset and no network: a block runs, or stops where ``datasets.fetch`` raises
    DatasetNotFoundError (bash: exits with its message, naming the file's URL and where to put it)."""
    repo, bindir = _workdir(tmp_path_factory)
    empty = tmp_path / "no-data"
    empty.mkdir()
    env = {"CUTEXT_DATA": str(empty), "CUTEXT_SHARED_DATA": "none", "CUTEXT_OFFLINE": "1",
           "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(repo)
    stopped = ran = 0
    for b in BLOCKS:
        if b["skip"]:
            continue
        if not fetched(b["code"]):   # fetches nothing: runs as in the pass with data (not run twice)
            assert "shared/data" not in b["code"] and "CUTEXT_DATA" not in b["code"], \
                f"README.md:{b['line']}: reads the shared data without datasets.fetch"
            continue
        if b["lang"] == "python":
            exc = run_python_block(b["code"], b["line"], stop_at=DatasetNotFoundError)
            assert exc is None or str(exc).startswith("dataset '"), f"README.md:{b['line']}: {exc}"
            stopped += exc is not None
        else:
            p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", bash_commands(b["code"])], cwd=repo,
                               capture_output=True, text=True, env={**os.environ, **env}, check=False)
            assert p.returncode == 0 or (NOT_FOUND.search(p.stderr) and "put it at /" in p.stderr), \
                f"README.md:{b['line']}: exit {p.returncode} without DatasetNotFoundError's message\n{p.stderr[-3000:]}"
            stopped += p.returncode != 0
        ran += 1
    assert ran >= 5 and stopped >= 5   # ngram (Python, frames, CLI), cluster, lda, fetch
    assert list(empty.iterdir()) == []   # nothing downloaded, nothing half-written


def test_the_checks_can_fail():
    check_value(0.30581, "0.3058", "x")
    check_value(3204, "3,204", "x")
    check_value((1, 28592), "(1, 28592)", "x")
    for got, want in ((0.3123, "0.3058"), (3205, "3204"), ((1, 2), "(1, 3)")):
        with pytest.raises(AssertionError):
            check_value(got, want, "x")
    assert expected_lines("map      0.3058    # Anserini: 0.3123\nndcg@10  0.4485\n") == [
        ("map", "0.3058"), ("ndcg@10", "0.4485")]
    assert bash_commands(". .venv/bin/activate && pip install -e . && python -m x && python -m y") == \
        "python -m x && python -m y"
