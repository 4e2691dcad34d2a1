"""Every committed notebook is valid and carries no outputs (they are executed by test_notebook_<name>.py)."""
from __future__ import annotations

import pytest
from notebook_helpers import NOTEBOOKS, nbformat


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.name)
def test_committed_notebook_has_no_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:80]
