from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"


def _gpu_ok() -> bool:
    try:
        from cutext.kernels.backend import resolve_backend

        return resolve_backend("auto") == "gpu"
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _gpu_ok():
        return
    skip = pytest.mark.skip(reason="no CUDA device with cudf/cupy visible")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The repository's bundled data (CACM, SciFact)."""
    return DATA


@pytest.fixture(scope="session")
def shared_data():
    """The shared data folder (../shared/data or $CUTEXT_DATA); tests needing it skip without it."""
    from cutext.pipelines.datasets import default_data_dir

    d = default_data_dir()
    if d is None:
        pytest.skip("shared data folder not found (set CUTEXT_DATA)")
    return d


@pytest.fixture(scope="session")
def news20(shared_data):
    """20 Newsgroups' tarball from the shared data (skipped where it is absent)."""
    p = shared_data / "corpora" / "20news-bydate.tar.gz"
    if not p.exists():
        pytest.skip("20news-bydate.tar.gz not in the shared data")
    return p


@pytest.fixture(scope="session")
def arpa(shared_data):
    """The ARPA models of the shared data (``arpa/``); tests needing them skip without it."""
    d = shared_data / "arpa"
    if not d.is_dir():
        pytest.skip("no arpa/ in the shared data")
    return d
