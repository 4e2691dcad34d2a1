"""Fixtures shared by the GPU tests (tests/gpu/)."""
import pytest


@pytest.fixture(scope="module")
def heldout(arpa):
    """The held-out text of the shared ARPA models (one sentence a line)."""
    return (arpa / "lmplz" / "heldout.inaugural2001-2009.tok.txt").read_text(encoding="utf-8").splitlines()
