"""Every ``benchmarks/results`` file that the current docs and the code's comments cite exists.

A result is cited by its dated name (``bm25f-cpu-2026-11-27.json``), bare or under ``results/``, with ``{a,b}``
alternatives and ``*`` globs (``lda-gpu-h200-lanes-{,before-}2026-11-28.*``); a name without an extension stands
for ``name.*``. Each alternative must match a file. The journals under ``docs/history/`` cite removed files on
purpose (marked "file removed") and are not checked.
"""
from __future__ import annotations

import fnmatch
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path("benchmarks") / "results"
CITING_DOCS = ("README.md", "benchmarks/README.md", "docs/decisions.md", "docs/architecture.md", "CONTRIBUTING.md")
CODE_FOLDERS = ("benchmarks", "pipelines", "stages", "kernels")  # their .py files' comments and docstrings
# a dated name: word characters, dots, dashes, slashes, globs and {a,b} groups around "-YYYY-MM-DD" (or "}YYYY-...")
NAME = re.compile(r"(?:[\w.*/-]|\{[^{}\s]*\})*(?<=[-}])20\d\d-\d\d-\d\d(?:[\w.*-]|\{[^{}\s]*\})*")


def expand(name: str) -> list[str]:
    """The names a ``{a,b}`` pattern stands for, groups expanded left to right (``x{,y}`` -> ``x``, ``xy``)."""
    m = re.search(r"\{([^{}]*)\}", name)
    if not m:
        return [name]
    return [n for alt in m.group(1).split(",") for n in expand(name[:m.start()] + alt + name[m.end():])]


def cited_patterns(text: str):
    """``(line number, glob pattern)`` for each results name cited in ``text``."""
    for lineno, line in enumerate(text.splitlines(), 1):
        for m in NAME.finditer(line):
            name = m.group(0).rstrip(".").split("/")[-1]
            for pattern in expand(name):
                yield lineno, pattern if re.search(r"\.\w+$|\*$", pattern) else pattern + ".*"


def citing_files(root: Path):
    yield from (root / d for d in CITING_DOCS if (root / d).is_file())
    for folder in CODE_FOLDERS:
        yield from sorted((root / folder).rglob("*.py"))


def missing_citations(root: Path) -> list[str]:
    """``path:line: pattern`` for each cited results name that matches no file of ``root/benchmarks/results``."""
    present = sorted(p.name for p in (root / RESULTS).iterdir())
    return [f"{path.relative_to(root)}:{lineno}: {pattern}"
            for path in citing_files(root)
            for lineno, pattern in cited_patterns(path.read_text(encoding="utf-8"))
            if not fnmatch.filter(present, pattern)]


def test_every_cited_result_exists():
    assert any((ROOT / RESULTS).iterdir())
    missing = missing_citations(ROOT)
    assert not missing, ("cited in the docs but not in benchmarks/results (restore the file or rewrite the "
                         "citation):\n" + "\n".join(missing))


def test_the_check_expands_groups_and_globs_and_names_what_is_missing(tmp_path):
    (tmp_path / RESULTS).mkdir(parents=True)
    for name in ("lda-gpu-lanes-2026-11-28.json", "lda-gpu-lanes-before-2026-11-28.json", "ngram-cpu-2026-11-22.log"):
        (tmp_path / RESULTS / name).write_text("{}")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "decisions.md").write_text(
        "* kept (`results/lda-gpu-lanes-{,before-}2026-11-28.*`, `ngram-cpu-2026-11-22.{log}`) on 2026-11-28.\n"
        "* gone: `lda-gpu-lanes-{,repeat-}2026-11-28.json`; `ngram-cpu-2026-11-22.{json,log}`.\n")
    (tmp_path / "stages").mkdir()
    (tmp_path / "stages" / "mod.py").write_text("# measured in search-ab-gpu-2026-11-23 (both rows)\nX = 1\n")
    assert missing_citations(tmp_path) == [
        "docs/decisions.md:2: lda-gpu-lanes-repeat-2026-11-28.json",
        "docs/decisions.md:2: ngram-cpu-2026-11-22.json",
        "stages/mod.py:1: search-ab-gpu-2026-11-23.*",
    ]
