"""The package's layering, checked by import-linter on the import graph (in-function imports included).

The floors: ``cutext.pipelines`` above ``cutext.stages`` above ``cutext.kernels``; inside stages the
wings ``engines`` above ``text`` above ``readers`` above ``runtime`` (contracts in pyproject.toml).
No import cycle between any two modules of cutext.

cutext's folders are mapped onto ``cutext.*`` by setuptools (``package-dir``), which import-linter's
graph builder cannot follow, so the checks run on a temporary ``cutext/`` of links to the folders (and to
``cutext_init/__init__.py``, the top package's own module).

The sizes (CONTRIBUTING.md): no function over 120 lines and no module over 900 lines outside ``kernels/``
and ``tests/``, read from the source files with :mod:`ast`.
"""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

MAX_FUNCTION_LINES, MAX_MODULE_LINES = 120, 900
SIZE_EXEMPT = ("kernels", "tests", "build", "out")  # top-level folders not checked (the last two: ignored outputs)


@pytest.fixture(scope="module")
def linked_tree(tmp_path_factory) -> Path:
    pytest.importorskip("importlinter")
    d = tmp_path_factory.mktemp("layers")
    (d / "cutext").mkdir()
    for name in ("pipelines", "stages", "kernels"):
        (d / "cutext" / name).symlink_to(ROOT / name, target_is_directory=True)
    (d / "cutext" / "__init__.py").symlink_to(ROOT / "cutext_init" / "__init__.py")
    return d


def _run(args, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(cwd))
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_import_contracts_hold(linked_tree):
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert exe, "import-linter's lint-imports is not installed (pip install -e '.[test]')"
    out = _run([exe, "--no-cache", str(ROOT / "pyproject.toml")], linked_tree)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "BROKEN" not in out.stdout and out.stdout.count("KEPT") >= 3


CYCLES = textwrap.dedent("""
    import json, sys
    import grimp
    g = grimp.build_graph("cutext")
    mods = sorted(g.modules)
    adj = {m: sorted(x for x in g.find_modules_directly_imported_by(m) if x.startswith("cutext")) for m in mods}
    index, low, stack, on, comps, n = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)
    def visit(v):
        index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
        for w in adj[v]:
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))
    for m in mods:
        if m not in index:
            visit(m)
    print(json.dumps({"modules": len(mods), "cycles": comps}))
""")


def test_no_import_cycle(linked_tree):
    import json

    out = _run([sys.executable, "-c", CYCLES], linked_tree)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["modules"] > 40  # the graph saw the whole package
    assert res["cycles"] == [], res["cycles"]


def _sources(root: Path):
    """The repository's Python files outside :data:`SIZE_EXEMPT`, hidden folders and virtual environments."""
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__"
                         and not (here == root and d in SIZE_EXEMPT) and not (here / d / "pyvenv.cfg").exists())
        yield from (here / f for f in sorted(files) if f.endswith(".py"))


def _docstring_lines(node) -> int:
    first = node.body[0] if node.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first.end_lineno - first.lineno + 1
    return 0


def oversized(root: Path) -> list:
    """Each module over the limit (all its lines) and each function over it (its lines but its docstring: a public
    function's numpydoc reference is not logic to split) as ``path: what``."""
    problems = []
    for path in _sources(root):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > MAX_MODULE_LINES:
            problems.append(f"{rel}: {len(text.splitlines())} lines (at most {MAX_MODULE_LINES} a module)")
        for node in ast.walk(ast.parse(text, filename=rel)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1 - _docstring_lines(node)
                if n > MAX_FUNCTION_LINES:
                    problems.append(f"{rel}:{node.lineno} {node.name}: {n} lines besides its docstring (at most "
                                    f"{MAX_FUNCTION_LINES} a function: split it along its seams)")
    return problems


def test_no_function_or_module_over_the_size_limits():
    problems = oversized(ROOT)
    assert not problems, "\n".join(problems)


def test_the_size_check_finds_a_long_function_and_a_long_module(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "long.py").write_text("def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES)
    (tmp_path / "pkg" / "big.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    (tmp_path / "pkg" / "fits.py").write_text("def g():\n" + "    x = 1\n" * (MAX_FUNCTION_LINES - 1))
    (tmp_path / "pkg" / "documented.py").write_text('def h():\n    """A\n' + "    reference.\n" * 50 + '    """\n'
                                                   + "    x = 1\n" * (MAX_FUNCTION_LINES - 1))
    for exempt in (*SIZE_EXEMPT, ".venv"):
        (tmp_path / exempt).mkdir()
        (tmp_path / exempt / "long.py").write_text("def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES)
    problems = oversized(tmp_path)
    assert len(problems) == 2, problems
    assert problems[0].startswith(f"pkg/big.py: {MAX_MODULE_LINES + 1} lines")
    assert problems[1].startswith(f"pkg/long.py:1 f: {MAX_FUNCTION_LINES + 1} lines besides its docstring")
