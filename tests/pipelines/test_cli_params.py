"""One parameter table for Python and the command line (cutext.pipelines._cli).

Every keyword a subcommand's functions take is an option of the same name (``text_column`` is
``--text-column``), except the Python-only ones, and the value given reaches the function under that
name; options left out are not passed (the function's defaults apply); ``search`` reads queries from
standard input or takes them inline; messages that name a parameter speak the caller's syntax.
"""
from __future__ import annotations

import argparse
import inspect
import io
import json

import pytest

from cutext import pipelines
from cutext.pipelines import _cli
from cutext.pipelines import bm25 as bm25_mod
from cutext.pipelines import bm25_index_ops as ops_mod
from cutext.pipelines import cluster as cluster_mod
from cutext.pipelines import evaluate as evaluate_mod
from cutext.pipelines import lda as lda_mod
from cutext.pipelines import ngram as ngram_mod
from cutext.pipelines.__main__ import _cli_modules, main
from cutext.pipelines._result import RunResult
from cutext.stages.runtime.params import cli_syntax, param

COMMANDS = {c.name: c for m in _cli_modules() for c in getattr(m, "COMMANDS", ())}

# the module attribute each subcommand calls, replaced by a recorder in the tests
TARGETS = {"bm25": (bm25_mod, "build_index"), "bm25-append": (ops_mod, "append_index"),
           "bm25-delete": (ops_mod, "delete_documents"), "bm25-convert": (ops_mod, "convert_index"),
           "bm25-compact": (ops_mod, "compact_index"), "bm25-merge": (ops_mod, "merge_index"),
           "evaluate": (evaluate_mod, "evaluate"),
           "ngram": (ngram_mod, "score_corpus"), "cluster": (cluster_mod, "cluster_corpus"),
           "lda": (lda_mod, "train")}


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command")
    for mod in _cli_modules():
        mod.add_cli(sub)
    return ap


def _funcs(command) -> tuple:
    return command.funcs if isinstance(command.funcs, tuple) else (command.funcs,)


def test_every_pipeline_has_a_command_and_its_table_is_what_run_accepts():
    for name in pipelines.PIPELINES:
        command = COMMANDS[name]
        func = pipelines.pipeline_function(name)
        assert command.funcs is func
        table = {n for n, row in command.table.items() if not row.positional}
        python_only = set(command.python_only)
        # run()'s own check of the keywords, computed independently of the table
        assert table | python_only == pipelines.pipeline_keywords(func), name
        assert python_only <= set(_cli.PYTHON_ONLY) and python_only >= {"client"}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_keyword_is_an_option_of_the_same_name(name):
    """The option ``--<keyword with - for _>`` exists and stores under the keyword; the others are Python-only
    (listed, with the reason, in the subcommand's help) or positional."""
    command = COMMANDS[name]
    sub = _parser()._subparsers._group_actions[0].choices[name]
    by_option = {o: a for a in sub._actions for o in a.option_strings}
    positional = {a.dest for a in sub._actions if not a.option_strings}
    for func in _funcs(command):
        for p in inspect.signature(func).parameters.values():
            if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) or p.name in ("self", "cls") \
                    or p.name in command.skip:
                continue
            if p.name in _cli.PYTHON_ONLY:
                assert p.name in (sub.epilog or ""), f"{name}: Python-only {p.name} is not listed in the help"
                continue
            if p.name in positional:
                continue
            option = "--" + p.name.replace("_", "-")
            assert option in by_option, f"{name}: no {option} for {p.name}="
            assert by_option[option].dest == p.name


def _sample(row):
    """``(argv, expected value)`` setting ``row`` to something other than its default."""
    opt = "--" + row.name.replace("_", "-")  # the keyword's own name, whatever the aliases
    if row.kind == "bool":
        return ([opt] if row.default is not True else ["--no-" + opt[2:]]), row.default is not True
    if row.choices is not None:
        spelling = next(s for s, v in reversed(list(row.choices.items())) if v != row.default or type(v) is not
                        type(row.default))
        return [opt, spelling], row.choices[spelling]
    if row.many and row.kind == "int":
        return [opt, "0,1", opt, "2"], [0, 1, 2]
    if row.kind == "pairs":  # a dict of str to float, a NAME=NUMBER an option
        return [opt, "title=2", opt, "text=0.5"], {"title": 2.0, "text": 0.5}
    if row.many:
        if row.argparse.get("nargs") == "+":
            return [opt, "map", "P@5"], ["map", "P@5"]
        return [opt, "title", opt, "text"], ["title", "text"]
    values = {"int": ("7", 7), "float": ("0.25", 0.25), "number": ("0.5", 0.5),
              "json": ('{"anon": true}', {"anon": True}), "str": (f"{row.name}-value", f"{row.name}-value")}
    text, value = values[row.kind]
    return [opt, text], value


def _recorder(calls: list, returns):
    def fake(*args, **kwargs):
        calls.append((args, kwargs))
        return returns(kwargs) if callable(returns) else returns
    return fake


def _evaluated(kwargs):
    """What evaluate() returns: the means, and with ``per_query`` the per-query table too."""
    import pandas as pd

    means = {"map": 0.5}
    return (means, pd.DataFrame({"query_id": ["1"], "map": [0.5]})) if kwargs.get("per_query") else means


def _stub_result() -> RunResult:
    return RunResult("stub", "stub-out", "cpu", "sync", 1)


@pytest.fixture(autouse=True)
def _no_topics_of_a_stub(monkeypatch):
    """A stubbed lda train writes no model: the CLI prints no topic of it (``--top 0``'s setting)."""
    monkeypatch.setattr(lda_mod, "CLI_TOP_WORDS", 0)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_every_option_reaches_the_function_under_its_name(name, monkeypatch, capsys, tmp_path):
    command = COMMANDS[name]
    monkeypatch.chdir(tmp_path)  # the files a command reads are checked before it runs: they exist here
    calls: list = []
    mod, attr = TARGETS[name]
    monkeypatch.setattr(mod, attr, _recorder(calls, _evaluated if name == "evaluate" else _stub_result()))
    if name == "evaluate":  # the files are read first: pass their names through
        monkeypatch.setattr(evaluate_mod, "read_trec_run", lambda p: f"run:{p}")
        monkeypatch.setattr(evaluate_mod, "read_qrels", lambda p: f"qrels:{p}")
    argv, want = [name], {}
    for row in command.table.values():
        if row.positional:
            argv.append(f"{row.name}-arg")
            if row.name in command.files:
                (tmp_path / f"{row.name}-arg").write_text("")
            continue
        a, v = _sample(row)
        argv += a
        want[row.name] = v
    assert main(argv) == 0, capsys.readouterr().err
    (args, kwargs), = calls
    given = dict(zip(inspect.signature(_funcs(command)[0]).parameters, args), **kwargs)
    for key, value in want.items():
        assert given[key] == value, (name, key)
        assert type(given[key]) is type(value), (name, key)


@pytest.mark.parametrize("name", sorted(set(TARGETS) & set(pipelines.PIPELINES)))
def test_options_left_out_are_not_passed(name, monkeypatch, capsys):
    """The function's own defaults apply, as in Python: only the input and ``out`` (default ``<name>-out``) are
    passed when no option is given (and ``model``, which ngram requires)."""
    calls: list = []
    mod, attr = TARGETS[name]
    monkeypatch.setattr(mod, attr, _recorder(calls, _stub_result()))
    extra = ["--model", "m.arpa"] if name == "ngram" else []
    assert main([name, "corpus.txt", *extra]) == 0, capsys.readouterr().err
    (args, kwargs), = calls
    assert args == ("corpus.txt", f"{name}-out")
    assert kwargs == ({"model": "m.arpa"} if name == "ngram" else {})


@pytest.mark.parametrize("argv, key, value", [
    (["lda", "c.txt", "-K", "5"], "K", 5),
    (["lda", "c.txt", "--topics", "6"], "K", 6),
    (["lda", "c.txt", "--K", "7"], "K", 7),
    (["bm25", "c.txt", "--workers", "3"], "n_workers", 3),
    (["bm25", "c.txt", "--no-lowercase"], "lowercase", False),
    (["bm25", "c.txt", "--text-column", "contents"], "text_column", "contents"),  # one column: a str
    (["bm25", "c.txt", "--glob", "off"], "glob", False),
    (["bm25", "c.txt", "--max-ratio", "none"], "max_ratio", None),
    (["bm25", "c.txt", "--index-format", "1"], "index_format", 1),
    (["cluster", "c.txt", "--candidates", "on"], "candidates", True),
    (["cluster", "c.txt", "--devices", "0,1"], "devices", [0, 1]),
    (["lda", "c.txt", "--min-df", "5", "--max-df", "0.5"], "min_df", 5),
    (["ngram", "c.txt", "--model", "m.arpa", "--no-bos", "--encoding", "latin-1"], "encoding", "latin-1"),
])
def test_earlier_spellings_and_value_forms(argv, key, value, monkeypatch, capsys):
    calls: list = []
    mod, attr = TARGETS[argv[0]]
    monkeypatch.setattr(mod, attr, _recorder(calls, _stub_result()))
    assert main(argv) == 0, capsys.readouterr().err
    assert calls[0][1][key] == value and type(calls[0][1][key]) is type(value)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_of_every_command(name, capsys):
    with pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:")
    assert "Python only:" in out or not COMMANDS[name].python_only


# --------------------------------------------------------------------------- search: stdin and inline queries

@pytest.fixture(scope="module")
def small_index(tmp_path_factory, data_dir):
    tmp = tmp_path_factory.mktemp("cli-search")
    src = tmp / "c.jsonl"
    src.write_text("".join((data_dir / "cacm" / "cacm.json").read_text(encoding="utf-8").splitlines(True)[:300]),
                   encoding="utf-8")
    r = pipelines.run("bm25", src, out=tmp / "ix", backend="cpu", scheduler="sync", progress=False)
    return r.path


def _rows(text: str) -> list:
    return [line.split() for line in text.splitlines() if line.strip()]


def test_search_takes_inline_queries_and_queries_from_stdin(small_index, monkeypatch, capsys):
    from cutext.pipelines import BM25Index

    queries = ["computer programs", "matrix inversion methods"]
    want = BM25Index.load(small_index, backend="cpu").search(queries, k=4)
    expect = [[q, "Q0", d, str(r)] for q, d, r in zip(want.query_id.map(lambda q: str(int(q) + 1)),
                                                       want.source_id, want["rank"])]
    assert main(["search", str(small_index), "--query", queries[0], "--query", queries[1], "--k", "4",
                 "--out", "-"]) == 0
    inline = _rows(capsys.readouterr().out)
    assert [r[:4] for r in inline] == expect
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(queries) + "\n"))
    assert main(["search", str(small_index), "--queries", "-", "--k", "4", "--out", "-"]) == 0
    assert _rows(capsys.readouterr().out) == inline
    # a TSV of ids and texts from standard input keeps its ids
    monkeypatch.setattr("sys.stdin", io.StringIO(f"q7\t{queries[1]}\n"))
    assert main(["search", str(small_index), "--queries", "-", "--k", "4", "--out", "-"]) == 0
    assert [r[0] for r in _rows(capsys.readouterr().out)] == ["q7"] * 4


def test_search_writes_search_out_by_default_and_takes_one_source_of_queries(small_index, tmp_path, monkeypatch,
                                                                              capsys):
    """``--out`` follows the one rule (``<name>-out`` in the working directory); ``-`` is standard output."""
    monkeypatch.chdir(tmp_path)
    assert main(["search", str(small_index), "--query", "computer", "--k", "3"]) == 0
    rows = _rows((tmp_path / "search-out").read_text())
    assert len(rows) == 3 and all(r[1] == "Q0" and r[5] == "cutext" for r in rows)
    with pytest.raises(SystemExit) as exc:
        main(["search", str(small_index), "--query", "a", "--queries", "q.txt"])
    assert exc.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_search_options_reach_load_search_and_the_writer(small_index, tmp_path, monkeypatch):
    """``search`` runs four functions: each gets its own keywords."""
    seen: dict = {}
    real_load = bm25_mod.BM25Index.load

    def load(path, **kw):
        seen["load"] = kw
        index = real_load(path, **kw)
        real_search = index.search

        def search(queries, **skw):
            seen["search"] = skw
            return real_search(queries, **skw)

        index.search = search
        return index

    monkeypatch.setattr(bm25_mod.BM25Index, "load", staticmethod(load))
    monkeypatch.setattr(bm25_mod, "write_trec_run", lambda run, out, **kw: seen.setdefault("write", kw))
    assert main(["search", str(small_index), "--query", "computer", "--k", "2", "--batch-size", "8",
                 "--engine", "sparse", "--no-verify", "--tag", "mine", "--no-progress",
                 "--out", str(tmp_path / "run.txt")]) == 0
    assert seen["load"] == {"backend": "cpu", "verify": False}
    assert seen["search"] == {"k": 2, "batch_size": 8, "engine": "sparse", "progress": False}
    assert seen["write"] == {"tag": "mine"}


# --------------------------------------------------------------------------- messages in the caller's syntax

def test_param_spells_python_or_the_running_command():
    assert (param("text_column"), param("glob", False), param("K", bare=True)) == ("text_column=", "glob=False", "K")
    with cli_syntax(COMMANDS["bm25"].spell):
        assert param("text_column") == "--text-column"
        assert param("text_column", ["title", "text"]) == "--text-column title --text-column text"
        assert param("glob", False) == "--glob off"
        assert param("max_ratio", None) == "--max-ratio none"
        assert param("lowercase", False) == "--no-lowercase"
        assert param("storage_options", {"anon": True}) == "--storage-options '{\"anon\": true}'"
        assert param("client") == "--scheduler-address"
        assert param("min_df") == "min_df="  # not an option of bm25: the Python spelling
    with cli_syntax(COMMANDS["lda"].spell):
        assert param("K", 1) == "-K 1" and param("K", bare=True) == "-K"
    assert param("text_column") == "text_column="  # the block ended


def _jsonl(tmp_path, rows):
    p = tmp_path / "c.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return p


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_a_missing_text_column_names_the_option_or_the_keyword(tmp_path, capsys, scheduler):
    """Raised inside the read tasks (on dask's threads too): the CLI says --text-column, Python text_column=."""
    p = _jsonl(tmp_path, [{"id": 1, "summary": "one text"}, {"id": 2, "summary": "two texts"}])
    assert main(["bm25", str(p), "--out", str(tmp_path / "cli"), "--backend", "cpu", "--scheduler", scheduler,
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "pass --text-column" in err and "text_column=" not in err
    with pytest.raises(ValueError, match="pass text_column="):
        pipelines.run("bm25", p, out=tmp_path / "py", backend="cpu", scheduler=scheduler, progress=False)


def test_range_and_reader_messages_name_options_on_the_command_line(tmp_path, capsys):
    p = tmp_path / "c.txt"
    p.write_text("one line\nanother line\n", encoding="utf-8")
    arpa = tmp_path / "lm.arpa"
    arpa.write_text("\\data\\\nngram 1=4\n\n\\1-grams:\n-2.0\t<unk>\n-1.0\t<s>\n-0.5\t</s>\n-0.6\talpha\n\n\\end\\\n")
    cases = [
        (["lda", str(p), "-K", "1"], "error: -K must be an integer >= 2, got 1"),
        (["lda", str(p), "--iterations", "-3"], "error: --iterations must be an integer in [1, 100000], got -3"),
        (["bm25", str(p), "--format", "lines", "--text-column", "a"],
         "--text-column a applies only to tables"),
        (["bm25", str(p), "--format", "lines", "--text-column", "a"], "pass --format for a table"),
        (["ngram", str(p), "--model", str(arpa), "--encoding", "bogus"], "error: --encoding bogus: unknown text codec"),
        (["cluster", str(p), "--threshold", "2"], "error: --threshold must be a finite number in [0, 1], got 2.0"),
    ]
    for argv, want in cases:
        assert main([*argv, "--out", str(tmp_path / "o"), "--backend", "cpu", "--no-progress"]) == 2, argv
        assert want in capsys.readouterr().err, argv
    with pytest.raises(ValueError, match=r"K must be an integer >= 2, got 1"):
        pipelines.run("lda", p, out=tmp_path / "o", K=1, backend="cpu", progress=False)
    with pytest.raises(ValueError, match=r"encoding='bogus': unknown text codec"):
        pipelines.run("ngram", p, out=tmp_path / "o", model=arpa, encoding="bogus", backend="cpu", progress=False)


# --------------------------------------------------------------------------- files the commands read

def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err.strip()


def test_a_directory_or_a_missing_path_given_for_a_file_is_one_error_line(small_index, tmp_path, capsys):
    """Every argument a command reads as a file (search --queries, evaluate's run and qrels, bm25-delete
    --ids-file) is checked before any work: a directory or a missing path exits 2 naming the argument."""
    folder, missing = tmp_path / "folder", tmp_path / "missing.txt"
    folder.mkdir()
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1 0 CACM-0001 1\n")
    cases = [
        (["search", str(small_index), "--queries", "{}", "--out", str(tmp_path / "run")], "--queries"),
        (["evaluate", "{}", str(qrels)], "run"),
        (["evaluate", str(qrels), "{}"], "qrels"),
        (["bm25-delete", "--index", str(small_index), "--ids-file", "{}"], "--ids-file"),
    ]
    for argv, option in cases:
        for path, said in ((folder, "is a directory"), (missing, "no such file")):
            assert main([a.replace("{}", str(path)) for a in argv]) == 2
            assert _one_error_line(capsys) == f"error: {option} {path}: {said}" + \
                (f"; {option} reads a file" if path == folder else "")
    assert not (tmp_path / "run").exists()


def test_a_run_file_in_a_folder_that_does_not_exist_is_refused_before_the_search(small_index, tmp_path, capsys):
    out = tmp_path / "no" / "run.txt"
    assert main(["search", str(small_index), "--query", "computer", "--out", str(out)]) == 2
    assert _one_error_line(capsys) == (f"error: refusing to write '{out}': its folder {out.parent} does not exist; "
                                       "create it first")
    assert not out.parent.exists()


def test_a_path_the_system_refuses_deep_in_a_command_is_one_error_line(tmp_path, capsys):
    """The net under every command: an OSError about a path (here a directory as a UCI vocabulary, opened by the
    reader) prints ``error: <path>: <reason>`` and exits 2."""
    (tmp_path / "docword.t.txt").write_text("2\n3\n3\n1 1 1\n1 2 2\n2 3 1\n")
    (tmp_path / "vocab").mkdir()
    assert main(["lda", str(tmp_path / "docword.t.txt"), "--vocab", str(tmp_path / "vocab"), "-K", "2",
                 "--iterations", "2", "--out", str(tmp_path / "lda"), "--no-progress"]) == 2
    assert _one_error_line(capsys) == f"error: {tmp_path / 'vocab'}: is a directory"


@pytest.mark.parametrize("name, text", [
    ("q.tsv", "1\tcomputer\n1\tprogram\n"),
    ("q.jsonl", '{"_id": 1, "text": "computer"}\n{"_id": "1", "text": "program"}\n'),
    ("topics.txt", "<top>\n<num> Number: 7\n<title> computer\n</top>\n<top>\n<num> Number: 7\n<title> program\n"
                   "</top>\n"),
], ids=["tsv", "jsonl", "trec"])
def test_search_refuses_a_queries_file_whose_ids_repeat(small_index, tmp_path, capsys, name, text):
    """Every format ``--queries`` reads: two queries of one id exit 2 naming the file and line, no run written."""
    (tmp_path / name).write_text(text)
    out = tmp_path / "run.txt"
    assert main(["search", str(small_index), "--queries", str(tmp_path / name), "--out", str(out)]) == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"error: {tmp_path / name}, line ") and "duplicate query id" in line
    assert not out.exists()
