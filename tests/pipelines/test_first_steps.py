"""What a new user types first: ``cutext.__version__``, a misspelt command or pipeline, a notebook run
without its dataset."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from cutext import pipelines
from cutext.pipelines.__main__ import main
from cutext.pipelines.datasets import DatasetNotFoundError, fetch

ROOT = Path(__file__).resolve().parents[2]


def test_cutext_has_the_installed_version():
    import cutext

    assert cutext.__version__ == version("cutext") == pipelines.__version__
    assert cutext.__file__ is not None  # a regular package, not a namespace


def test_the_checkout_does_not_shadow_the_installed_package():
    """Python started in the repository's root (its folder first on sys.path) still finds cutext's subpackages."""
    code = ("import cutext, importlib.util as u; assert all(u.find_spec(f'cutext.{n}') for n in "
            "('pipelines', 'stages.runtime', 'kernels')); print(cutext.__version__)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == version("cutext")


@pytest.mark.parametrize("argv, hint", [(["cluser"], "did you mean 'cluster'?"),
                                        (["--version", "serch"], "did you mean 'search'"),
                                        (["bm25-compcat", "x"], "did you mean 'bm25-compact'")])
def test_an_unknown_command_names_the_closest(argv, hint, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and hint in err and "unknown command" in err and "Traceback" not in err


def test_an_unknown_command_far_from_any_lists_them(capsys):
    with pytest.raises(SystemExit):
        main(["zzzz"])
    err = capsys.readouterr().err
    assert "did you mean" not in err and "choose from bm25, search" in err


def test_an_unknown_pipeline_names_the_closest(tmp_path):
    with pytest.raises(ValueError, match=r"unknown pipeline 'cluser'; did you mean 'cluster'\? \(available: bm25, "):
        pipelines.run("cluser", tmp_path)
    with pytest.raises(ValueError, match=r"unknown pipeline 'zzzz' \(available"):
        pipelines.run("zzzz", tmp_path)


@pytest.fixture
def no_data(tmp_path, monkeypatch):
    monkeypatch.setenv("CUTEXT_DATA", str(tmp_path / "empty"))
    monkeypatch.setenv("CUTEXT_SHARED_DATA", "none")
    return tmp_path


def test_a_missing_dataset_shows_in_ipython_as_one_line_with_the_command(no_data):
    with pytest.raises(DatasetNotFoundError) as exc:
        fetch("kos", download=False)
    assert exc.value.dataset == "kos"
    (line,) = exc.value._render_traceback_()  # IPython's hook: what Jupyter shows instead of the traceback
    assert line == ("DatasetNotFoundError: dataset 'kos' is not here (download=False); run "
                    "`python -m cutext.pipelines fetch kos` (or set CUTEXT_DATA to a folder holding it)")


def _execute_module():
    spec = importlib.util.spec_from_file_location("nb_execute", ROOT / "notebooks" / "execute.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_execute_prints_a_missing_dataset_as_one_line(no_data, monkeypatch, capsys):
    """A notebook stopped by a missing dataset: one line with the command, exit status 2, no colour codes."""
    nbclient = pytest.importorskip("nbclient")
    ex = _execute_module()
    with pytest.raises(DatasetNotFoundError) as real:
        fetch("lda-reuters", download=False)
    tb = "\x1b[0;31m---------------------------------------------------------------------------\x1b[0m\n" * 20
    err = nbclient.exceptions.CellExecutionError(tb, "DatasetNotFoundError", str(real.value))

    def fail(path, dest, workdir=None):
        raise err

    monkeypatch.setattr(ex, "execute", fail)
    assert ex.main(["lda_topics.ipynb", "--out", str(no_data / "out")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == ["error: lda_topics.ipynb needs dataset 'lda-reuters', which is not here and could not be "
                     "downloaded: run `python -m cutext.pipelines fetch lda-reuters` (or set CUTEXT_DATA to a "
                     "folder holding it)"]
    other = nbclient.exceptions.CellExecutionError(tb + "ZeroDivisionError", "ZeroDivisionError", "division by zero")
    monkeypatch.setattr(ex, "execute", lambda *a, **k: (_ for _ in ()).throw(other))
    assert ex.main(["lda_topics.ipynb", "--out", str(no_data / "out")]) == 1
    err_text = capsys.readouterr().err
    assert "\x1b" not in err_text and "a cell raised ZeroDivisionError" in err_text


@pytest.mark.slow
def test_a_notebook_without_its_dataset_ends_in_one_line(no_data, tmp_path):
    """End to end: a kernel runs a notebook whose dataset is absent (offline)."""
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": "a", "metadata": {}, "outputs": [],
                     "source": "from cutext.pipelines.datasets import fetch\nfetch('kos')"}],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "needs_kos.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    env = {"CUTEXT_OFFLINE": "1", "CUTEXT_DATA": str(no_data / "empty"), "CUTEXT_SHARED_DATA": "none"}
    out = subprocess.run([sys.executable, str(ROOT / "notebooks" / "execute.py"), str(path), "--out",
                          str(tmp_path / "out")], capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, **env})
    assert out.returncode == 2, out.stderr[-3000:]
    lines = [x for x in out.stderr.strip().splitlines() if not x.startswith("[IPKernelApp] WARNING")]
    assert lines == ["error: needs_kos.ipynb needs dataset 'kos', which is not here and could not be downloaded: "
                     "run `python -m cutext.pipelines fetch kos` (or set CUTEXT_DATA to a folder holding it)"]
