"""Every committed notebook is executed, with its outputs and a plot embedded, so that
it shows its results on a code host; ``notebooks/execute.py`` writes them, and the
``tests/notebooks/test_<name>.py`` tests execute every notebook again.

Small outputs only: no output of more than :data:`MAX_TEXT` characters (no whole tables), no error,
no warning text, and the file under ``notebooks/execute.py``'s size limit.
"""
from __future__ import annotations

import importlib.util
import os

import pytest

from notebook_helpers import NOTEBOOKS, ROOT, nbformat

MAX_TEXT = 20_000  # characters of one text output


def _execute_module():
    spec = importlib.util.spec_from_file_location("notebooks_execute", NOTEBOOKS / "execute.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.name)
def test_committed_notebook_is_executed_with_its_plots(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, "no code cell"
    # executed top to bottom in one kernel run
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), \
        f"{path.name}: not executed in order; run: python notebooks/execute.py --in-place {path.name}"
    outs = [o for c in code for o in c.outputs]
    assert outs, f"{path.name}: committed without outputs"
    assert not [o for o in outs if o.output_type == "error"]
    images = [o for o in outs if "image/png" in o.get("data", {})]
    assert images, f"{path.name}: no plot embedded"
    for o in outs:
        text = o.get("text", "") if o.output_type == "stream" else str(o.get("data", {}).get("text/plain", ""))
        assert len(text) <= MAX_TEXT, f"{path.name}: an output of {len(text):,} characters; print less"
        assert "Traceback" not in text and "Warning:" not in text, f"{path.name}: {text[:300]}"
    assert path.stat().st_size <= _execute_module().MAX_BYTES
    # the notebook's own metadata only (no machine-specific kernel details)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"


@pytest.mark.slow
def test_execute_writes_a_copy_unless_asked_to_write_in_place(tmp_path, monkeypatch):
    """``notebooks/execute.py`` leaves the notebook it runs untouched, unless ``--in-place`` is given."""
    for var in ("JUPYTER_PATH", "CUTEXT_NOTEBOOK_WORKDIR", "CUDA_VISIBLE_DEVICES"):  # execute() sets them
        monkeypatch.setenv(var, os.environ.get(var, ""))
    mod = _execute_module()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    src = tmp_path / "book" / "tiny.ipynb"
    src.parent.mkdir()
    nbformat.write(nb, src)
    before = src.read_bytes()
    assert mod.main([str(src), "--out", str(tmp_path / "out")]) == 0
    assert src.read_bytes() == before
    assert nbformat.read(tmp_path / "out" / "tiny.ipynb", as_version=4).cells[0].outputs[0].text == "42\n"
    assert mod.main([str(src), "--in-place"]) == 0
    assert nbformat.read(src, as_version=4).cells[0].outputs[0].text == "42\n"
    with pytest.raises(SystemExit):
        mod.main([str(src), "--in-place", "--out", str(tmp_path / "x")])   # one or the other


def test_notebooks_extra_is_declared_and_named_in_the_readme():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    names = {req.split(">")[0].split("=")[0].split("[")[0].strip().lower() for req in extras["notebooks"]}
    assert {"matplotlib", "ipykernel", "nbformat", "nbclient"} <= names
    assert "pip install -e '.[notebooks]'" in (ROOT / "README.md").read_text(encoding="utf-8")
