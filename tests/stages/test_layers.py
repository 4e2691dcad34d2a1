"""The package's layering, checked by import-linter on the import graph (in-function imports included).

The floors: ``cutext.pipelines`` above ``cutext.stages`` above ``cutext.kernels``; inside stages the
wings ``engines`` above ``text`` above ``readers`` above ``runtime`` (contracts in pyproject.toml).
No import cycle between any two modules of cutext.

cutext's folders are mapped onto ``cutext.*`` by setuptools (``package-dir``), which import-linter's
graph builder cannot follow, so the checks run on a temporary ``cutext/`` of links to the folders (and to
``cutext_init/__init__.py``, the top package's own module).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("importlinter")


@pytest.fixture(scope="module")
def linked_tree(tmp_path_factory) -> Path:
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
