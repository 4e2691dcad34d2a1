"""Running the example notebooks in tests: the kernel fixture, execution and output helpers.

The notebooks are executed with nbclient in a kernel that is this interpreter
(``sys.executable``): a kernelspec written to a temporary folder and put first on
``JUPYTER_PATH``, so neither the user's nor the environment's ``python3`` kernelspec (whose
``argv[0]`` is a bare ``python`` found on ``PATH``) decides which Python runs the notebook.

Importing this module skips the importing test module where nbformat, nbclient, ipykernel
or matplotlib is missing. Tests of one notebook live in ``tests/notebooks/test_<name>.py``.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
KERNEL = "python3"  # the name the notebooks' metadata asks for


@pytest.fixture
def kernel(tmp_path_factory, monkeypatch):
    """A ``python3`` kernelspec whose argv runs this interpreter, first on JUPYTER_PATH."""
    from jupyter_client.kernelspec import KernelSpecManager

    jp = tmp_path_factory.mktemp("jupyter")
    spec = jp / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (cutext tests)",
        "language": "python",
    }), encoding="utf-8")
    monkeypatch.setenv("JUPYTER_PATH", str(jp))
    monkeypatch.delenv("MPLBACKEND", raising=False)  # let ipykernel choose its inline backend
    assert KernelSpecManager().get_kernel_spec(KERNEL).argv[0] == sys.executable
    return KERNEL


def _execute(nb, cwd: Path, kernel_name: str):
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name=kernel_name,
                                     resources={"metadata": {"path": str(cwd)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    return nb


def _outputs(nb) -> tuple[str, list[dict]]:
    """All printed and displayed text of the executed notebook, and every output object."""
    texts, outs = [], []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            outs.append(out)
            if out.output_type == "stream":
                texts.append(out.text)
            elif out.output_type in ("execute_result", "display_data"):
                texts.append(out.get("data", {}).get("text/plain", ""))
    return "\n".join(texts), outs


def _metric(text: str, label: str) -> float:
    """The number printed on the one line ``label = <number>`` of a notebook's output."""
    m = re.findall(rf"^{re.escape(label)} = (-?[0-9]+(?:\.[0-9]+)?)\s*$", text, flags=re.M)
    assert len(m) == 1, f"expected one line '{label} = <value>' in the notebook output"
    return float(m[0])
