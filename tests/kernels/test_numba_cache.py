"""numba's on-disk cache of the CPU kernels: every jitted function cached, a second process loads
instead of compiling, stale callees invalidated, a read-only install still imports."""
import ast
import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from cutext.kernels import _numba_cache

from helpers import cacm_jsonl, saved_index

ROOT = Path(__file__).resolve().parents[2]
CODE_DIRS = ("kernels", "stages", "pipelines")
JIT_NAMES = {"njit", "jit", "vectorize", "guvectorize", "cfunc", "stencil"}


def _jit_decorators(tree):
    """(decorator node, parent node) of every numba decorator (``numba.njit(...)``, ``@njit``...) in ``tree``."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                f = dec.func if isinstance(dec, ast.Call) else dec
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
                if name in JIT_NAMES:
                    yield node, dec, parents.get(node)


class TestEveryKernelCached:
    def test_jitted_at_module_level_with_cache(self):
        """A function jitted inside another one, or without ``cache=True``, compiles again in every process."""
        bad = []
        for d in CODE_DIRS:
            for path in sorted((ROOT / d).rglob("*.py")):
                for fn, dec, parent in _jit_decorators(ast.parse(path.read_text(encoding="utf-8"))):
                    where = f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name}"
                    if not isinstance(parent, ast.Module):
                        bad.append(f"{where}: jitted inside {type(parent).__name__}")
                    kw = {k.arg: k.value for k in dec.keywords} if isinstance(dec, ast.Call) else {}
                    if not (isinstance(kw.get("cache"), ast.Constant) and kw["cache"].value is True):
                        bad.append(f"{where}: no cache=True")
        assert not bad, "\n".join(bad)

    def test_every_dispatcher_uses_the_cutext_locator(self):
        """Each module with numba functions imports _numba_cache before its decorators run."""
        import importlib
        import pkgutil

        from numba.core.registry import CPUDispatcher

        import cutext.kernels
        import cutext.stages

        names = [m.name for pkg in (cutext.kernels, cutext.stages)
                 for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")]
        found, bad = 0, []
        for name in names:
            mod = importlib.import_module(name)
            for attr, disp in vars(mod).items():
                if isinstance(disp, CPUDispatcher) and disp.__module__ == name:
                    found += 1
                    locator = getattr(getattr(disp._cache, "_impl", None), "locator", None)
                    if not isinstance(locator, _numba_cache.CutextCacheLocator.ORDER):
                        bad.append(f"{name}.{attr}: {type(locator).__name__}")
        assert found > 50
        assert not bad, "\n".join(bad)


class TestLocator:
    def test_stamp_covers_every_kernel_file(self, tmp_path, monkeypatch):
        """A caller keeps a callee of another file compiled in: an edit of any kernel file must change the stamp."""
        from cutext.kernels import termhash

        stamp = termhash._text_csr._cache._impl.locator.get_source_stamp()
        assert stamp[1] == _numba_cache.kernels_digest()
        for p in _numba_cache.KERNELS_DIR.glob("*.py"):
            (tmp_path / p.name).write_bytes(p.read_bytes())
        monkeypatch.setattr(_numba_cache, "KERNELS_DIR", tmp_path)
        same = _numba_cache.kernels_digest.__wrapped__()
        with open(tmp_path / "tokenize.py", "a") as fh:
            fh.write("\n# edited\n")
        assert same == _numba_cache.kernels_digest()
        assert _numba_cache.kernels_digest.__wrapped__() != same

    @pytest.fixture
    def no_writable_cache(self, tmp_path, monkeypatch):
        """A read-only install run with no writable home: numba's own locators all refuse."""
        from numba.core import config

        monkeypatch.setattr(config, "CACHE_DIR", "")
        monkeypatch.setattr(_numba_cache._InTree, "from_function", classmethod(lambda cls, f, p: None))
        monkeypatch.setattr(_numba_cache._UserWide, "from_function", classmethod(lambda cls, f, p: None))
        monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
        _numba_cache.temp_cache_root.cache_clear()
        yield tmp_path
        _numba_cache.temp_cache_root.cache_clear()

    def test_read_only_install_caches_in_the_users_temp_folder(self, no_writable_cache):
        from cutext.kernels import search

        fn = search._cpu_search.py_func
        loc = _numba_cache.CutextCacheLocator.from_function(fn, search.__file__)
        root = no_writable_cache / f"cutext-numba-{os.getuid()}"
        assert isinstance(loc, _numba_cache._TempDir)
        assert Path(loc.get_cache_path()).parent == root
        assert stat.S_IMODE(root.stat().st_mode) == 0o700

    def test_a_folder_others_may_write_is_not_used(self, no_writable_cache):
        from cutext.kernels import search

        shared = no_writable_cache / f"cutext-numba-{os.getuid()}"
        shared.mkdir()
        shared.chmod(0o777)
        loc = _numba_cache.CutextCacheLocator.from_function(search._cpu_search.py_func, search.__file__)
        assert Path(loc.get_cache_path()).parent != shared

    def test_other_packages_keep_numbas_locators(self):
        def f():
            return 1

        assert _numba_cache.CutextCacheLocator.from_function(f, __file__) is None


def test_unicode_tables_kept_beside_the_kernels(tmp_path, monkeypatch):
    """The tokenizer's code point tables are read back from the cache folder, and a torn file is built again."""
    from cutext.kernels import tokenize as K

    monkeypatch.setattr(_numba_cache, "cache_folder", lambda f: str(tmp_path))
    kept, build = K.word_table.__wrapped__, K.word_table.__wrapped__.__wrapped__
    want = build()
    assert (kept() == want).all()
    (path,) = tmp_path.glob("word_table-*.u8")
    (tmp_path / "word_table-old.npy").write_bytes(b"stale")
    # read back as raw bytes: numpy.load parses headers with ast, not thread-safe on CPython 3.11 (gh-106905)
    monkeypatch.setattr(np, "load", lambda *a, **k: pytest.fail("the table is read with numpy.load"))
    assert (kept() == want).all() and path.stat().st_size == want.size
    path.write_bytes(path.read_bytes()[:1000])
    assert (kept() == want).all()
    assert path.stat().st_size == want.size and not (tmp_path / "word_table-old.npy").exists()


STATS = textwrap.dedent("""
    import json, sys
    from numba.core.registry import CPUDispatcher

    hits = misses = 0
    for name, mod in list(sys.modules.items()):
        if name.startswith("cutext."):
            for d in vars(mod).values():
                if isinstance(d, CPUDispatcher) and d.__module__ == name:
                    hits += sum(d.stats.cache_hits.values())
                    misses += sum(d.stats.cache_misses.values())
    print(json.dumps({"hits": hits, "misses": misses}))
""")
SEARCH = textwrap.dedent("""
    import sys
    from cutext import pipelines

    index = pipelines.BM25Index.load(sys.argv[1], backend="cpu")
    index.search({"q1": "parallel sorting algorithms"}, k=10)
    index.search({"q2": "hash table"}, k=10)
""") + STATS
SCORE = textwrap.dedent("""
    import sys
    from cutext.pipelines.ngram import NGramModel

    lm = NGramModel.load(sys.argv[1], backend="cpu")
    lm.score(["looking on a little more loin"])
""") + STATS


def _twice(code: str, arg, cache: Path):
    """Run ``code arg`` in two fresh processes sharing the numba cache folder ``cache``:
    [(dispatcher stats, stderr)] of each."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    runs = []
    for _ in range(2):
        p = subprocess.run([sys.executable, "-c", code, str(arg)], env=env, capture_output=True, text=True,
                           timeout=300, check=False)
        assert p.returncode == 0, p.stderr[-3000:]
        runs.append((json.loads(p.stdout.strip().splitlines()[-1]), p.stderr))
    return runs


def test_second_process_loads_trie_kernels_from_cache(tmp_path, arpa):
    """The scoring kernels of the n-gram trie (one of them parallel): compiled once, loaded after."""
    (cold, _), (warm, _) = _twice(SCORE, arpa / "kenlm" / "test.arpa", tmp_path / "numba-cache")
    assert cold["misses"] > 0 and cold["hits"] == 0, cold
    assert warm["misses"] == 0 and warm["hits"] > 0, warm


@pytest.mark.slow
def test_second_process_loads_search_kernels_from_cache(tmp_path, data_dir):
    """A new process searching with the cache of an earlier one compiles nothing and says nothing
    (20-40 s on 2 cores: the first process compiles the search kernels)."""
    from cutext.stages.runtime.progress import COMPILE_NOTICE

    index = saved_index(cacm_jsonl(tmp_path, data_dir, 200), tmp_path / "index")
    (cold, cold_err), (warm, warm_err) = _twice(SEARCH, index, tmp_path / "numba-cache")
    assert cold["misses"] > 0 and COMPILE_NOTICE in cold_err
    assert warm["misses"] == 0 and warm["hits"] > 0, warm
    assert COMPILE_NOTICE not in warm_err
