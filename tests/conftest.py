"""Fixtures and hooks of the whole suite.

Tests marked ``gpu`` are skipped where no CUDA device with cudf is visible.  Tests that need a shared
dataset get it through ``cutext.pipelines.datasets.fetch`` without downloading (``helpers.need_data``,
the fixtures below); where it is absent they are skipped with a reason starting ``missing data:``, and
the run ends with one line that counts and names them, apart from the GPU skips.
"""
import re
from pathlib import Path

import pytest

from helpers import MISSING_DATA, missing_data_lines, need_data

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
DATA_ROOTS: list = []  # the data folders handed to tests (shared_data): a file absent there is missing data


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
def shared_data(tmp_path_factory) -> Path:
    """A folder in the shared data folder's layout holding every dataset that ``datasets.fetch`` finds
    without downloading: the one folder holding them all (the shared data folder, ``$CUTEXT_DATA`` or
    the cache), else a folder of symbolic links to each file.  Skipped when no dataset is found; a test
    that reads a file of an absent dataset is skipped naming it (:func:`pytest_runtest_makereport`)."""
    from cutext.pipelines.datasets import DATASETS, locate

    files = {}
    for name in DATASETS:
        files.update(locate(name) or {})
    if not files:
        pytest.skip(MISSING_DATA + ", ".join(DATASETS))
    roots = {p.as_posix()[: -len(rel)] for rel, p in files.items()}
    if len(roots) == 1 and all(p.as_posix().endswith("/" + rel) for rel, p in files.items()):
        root = Path(roots.pop())
    else:
        root = tmp_path_factory.mktemp("shared-data")
        for rel, p in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).symlink_to(p.resolve())
    DATA_ROOTS.append(root)
    return root


@pytest.fixture(scope="session")
def news20() -> Path:
    """20 Newsgroups' tarball (``datasets.fetch("20newsgroups")``)."""
    return need_data("20newsgroups")


@pytest.fixture(scope="session")
def arpa(shared_data):
    """The ARPA models (``arpa/`` of :func:`shared_data`: kenlm-test-arpa, abc-o3-arpa, inaugural-heldout,
    pocketsphinx-lm)."""
    d = shared_data / "arpa"
    if not d.is_dir():
        pytest.skip(MISSING_DATA + "kenlm-test-arpa, abc-o3-arpa, inaugural-heldout, pocketsphinx-lm")
    return d


def _missing_datasets(exc) -> str | None:
    """The dataset(s) whose absence raised ``exc``: a DatasetNotFoundError, or a FileNotFoundError naming a
    path of the registry inside a folder :func:`shared_data` gave; None for any other error."""
    from cutext.pipelines.datasets import DATASETS, DatasetNotFoundError

    if isinstance(exc, DatasetNotFoundError):
        m = re.match(r"dataset '([^']+)' not found", str(exc))
        return m.group(1) if m else None
    if not isinstance(exc, FileNotFoundError) or not DATA_ROOTS:
        return None
    texts = [str(x) for x in (exc.filename, exc.filename2) if x] + [str(exc)]
    for root in DATA_ROOTS:
        for text in texts:
            for m in re.finditer(re.escape(str(root)) + r"/([^\s:'\"]+)", text):
                rel = m.group(1).rstrip(".,;)/")
                names = [d.name for d in DATASETS.values()
                         if any(f.path == rel or f.path.startswith(rel + "/") for f in d.files)]
                if names:
                    return ", ".join(names)
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test (or its fixture) failing on a dataset file that is absent is a skip for missing data."""
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and call.excinfo is not None:
        names = _missing_datasets(call.excinfo.value)
        if names:
            rep.outcome = "skipped"
            rep.longrepr = (str(item.path), (item.location[1] or 0) + 1, f"Skipped: {MISSING_DATA}{names}")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line counting the tests skipped for missing data, then one line a dataset with the command that
    gets it (:func:`helpers.missing_data_lines`; GPU skips are not among them); ``-v`` names the tests."""
    reasons, tests = [], []
    for rep in terminalreporter.stats.get("skipped", []):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        reason = reason.removeprefix("Skipped: ")
        if reason.startswith(MISSING_DATA):
            reasons.append(reason)
            tests.append(rep.nodeid)
    for i, line in enumerate(missing_data_lines(reasons)):
        terminalreporter.write_line(line, yellow=i == 0)
    if tests and config.option.verbose > 0:
        for nodeid in tests:
            terminalreporter.write_line(f"  {nodeid}")
