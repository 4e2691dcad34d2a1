"""The command line's subcommands, generated from the parameters of the Python functions behind them.

A subcommand of ``python -m cutext.pipelines`` is a :class:`Command`: the function it runs (a pipeline such
as :func:`cutext.pipelines.lda.train`; ``search`` runs four) is its one parameter table.  Every keyword that
the function takes -- the names :func:`cutext.pipelines.run` accepts, the reader's keywords included where
the function forwards ``**read_kw`` (:func:`keyword_owners`) -- is the option ``--`` + the name with ``-``
for ``_`` (``text_column`` -> ``--text-column``), typed from the numpydoc type, the annotation or the
default, and helped by the first sentence of its numpydoc description:

* a bool is a pair of switches (``--lowercase`` / ``--no-lowercase``);
* a list-valued parameter is repeated (``--text-column title --text-column text``);
* ``{a, b}`` in the numpydoc type are the choices, True / False among them spelled ``on`` / ``off``, and
  ``bool or None`` is ``auto`` / ``on`` / ``off``; a dict is a JSON object, except a ``dict of str to
  float``: a repeated ``NAME=NUMBER`` under the singular option (``--field-weight title=2``, also
  ``--field-weights``); ``none`` is None where the type allows it;
* the earlier spellings stay as aliases (:data:`ALIASES`: ``-K`` and ``--topics`` for ``K``).

Options the user leaves out are not passed, so the function's own defaults apply, as in Python.  The
parameters no command line can give are :data:`PYTHON_ONLY` (a ``distributed.Client``, a callback, query
or frame objects); ``client`` is reached through ``--scheduler-address``.  While a subcommand runs,
messages that name a parameter spell it as its option
(:func:`cutext.stages.runtime.params.cli_syntax`, :func:`~cutext.stages.runtime.params.param`).
"""
from __future__ import annotations

import argparse
import ast
import functools
import inspect
import json
import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Callable

from cutext.pipelines._result import default_out
from cutext.stages.readers.source import read_corpus
from cutext.stages.runtime.params import cli_syntax, keywords_of

__all__ = ["ALIASES", "Command", "Keywords", "Param", "PYTHON_ONLY", "SHARED", "check_input_file", "keyword_owners",
           "print_result"]

# Parameters that no command line can give; the tests check that every other keyword has an option.
PYTHON_ONLY = {
    "client": "a distributed.Client; the command line connects to a running scheduler with --scheduler-address",
    "callback": "a Python function called after every iteration",
    "queries": "query objects (str, list, dict, Series, DataFrame); the command line reads --queries FILE "
               "(- for standard input) or takes --query TEXT",
    "run_df": "the search result frame; search writes it to --out",
}

# Earlier spellings of options, kept working; the first short one is what messages use.
ALIASES = {"K": ("-K", "--topics"), "n_workers": ("--workers",), "keep_columns": ("--keep-column",)}


@dataclass(frozen=True)
class Shared:
    """The command-line type and help of a setting that every corpus pipeline shares (the pipelines document
    them as groups: "Reader settings", "Tokenizer settings")."""

    kind: str | None  # None: the help only (the type comes from the docstring)
    help: str
    many: bool = False
    alone: bool = False  # list-valued, and one value is passed alone (a str)


SHARED = {
    "text_column": Shared("str", "text column of jsonl/parquet/csv input; repeat to join several (title, text)",
                          many=True, alone=True),
    "id_column": Shared("str", "source id column (default: id, _id, doc_id, docid if present)"),
    "blocksize": Shared("int", "bytes per input partition"),
    "encoding": Shared("str", "input text encoding (undecodable bytes are replaced and counted)"),
    "storage_options": Shared("json", "fsspec options of the file system (credentials, endpoints), a JSON object"),
    "glob": Shared("tristate", "paths as glob patterns: auto (a path that exists is itself, else *?[ are "
                               "patterns), on (always), off (never)"),
    "max_ratio": Shared("float", "refuse compressed input that expands more than this many times (zip/gz bombs); "
                                 "none: no limit"),
    "members": Shared("str", "archive members to read: an fnmatch glob of the member path (* also matches /); "
                             "repeat for several", many=True, alone=True),
    "lowercase": Shared("bool", "lowercase the text"),
    "stopwords": Shared("str", "'english' (Snowball's English list), 'english-topics' (that list and closed classes "
                               "a topic never needs: will, one, also, said, mr ...), 'lucene' (Lucene's 33 English "
                               "stopwords), 'none', or a file with one word per line; lda: 'auto' (the default) is "
                               "'english-topics' for text and none for a UCI / LDA-C vocabulary"),
    "stemmer": Shared("str", "Snowball algorithm: porter, english, german, ...; lucene_porter: Porter as Lucene's "
                             "PorterStemFilter runs it"),
    "min_len": Shared("int", "drop tokens shorter than this (code points)"),
    "max_len": Shared("int", "drop tokens longer than this (code points)"),
    "backend": Shared(None, "where it runs: auto (the GPU when cudf and a device are present), cpu or gpu"),
    "scheduler": Shared(None, "without a client: where the dask stages run (auto: in this process for small "
                              "inputs and on the GPU, else a local cluster)"),
    "overwrite": Shared(None, "replace an earlier output of the same pipeline at --out"),
    "progress": Shared(None, "show progress on standard error (a bar on a terminal)"),
}

# reader keywords a pipeline does not take through **read_kw: it has its own (format, backend) or they are the input
_READER_OWN = ("path", "format", "backend")


def keyword_owners(func) -> dict:
    """``{keyword: function}`` of every keyword ``func`` takes, in signature order: its own, then, where it
    forwards ``**read_kw``, the reader's (:func:`cutext.stages.readers.source.read_corpus`), as
    :func:`cutext.pipelines.run` checks them.  Positional-only and ``*args`` / ``**kwargs`` are left out."""
    sig = inspect.signature(func).parameters.values()
    owners = {p.name: func for p in sig if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    if any(p.kind == p.VAR_KEYWORD for p in sig):
        for name in keywords_of(read_corpus, exclude=_READER_OWN):
            owners.setdefault(name, read_corpus)
        order = list(inspect.signature(read_corpus).parameters)
        owners = dict(sorted(owners.items(), key=lambda kv: (kv[1] is read_corpus, order.index(kv[0])
                                                               if kv[1] is read_corpus else 0)))
    return owners


class Keywords(dict):
    """The parameters a subcommand was given, ``{keyword: value}``, knowing which function takes each."""

    def __init__(self, values: dict, owners: dict):
        super().__init__(values)
        self.owners = owners

    def of(self, func_name: str) -> dict:
        """The entries taken by the function named ``func_name`` (``search`` runs ``load``, ``search``, ...)."""
        return {k: v for k, v in self.items() if getattr(self.owners.get(k), "__name__", None) == func_name}


def print_result(result, as_json: bool) -> None:
    """Print a :class:`~cutext.pipelines._result.RunResult`: its summary, or (``--json``) its fields as JSON."""
    print(json.dumps(result.to_dict(), indent=2, default=str) if as_json else str(result))


# ----------------------------------------------------------------------------- numpydoc

_ROLE = re.compile(r":(?:func|meth|mod|class|data|attr|obj):`~?([^`]+)`")


@functools.lru_cache(maxsize=None)
def _doc_params(func) -> dict:
    """``{name: (type, description, group size)}`` of the numpydoc "Parameters" section of ``func``."""
    lines = (inspect.getdoc(func) or "").splitlines()
    out: dict = {}
    try:
        i = next(k for k in range(len(lines) - 1)
                 if lines[k].strip() == "Parameters" and set(lines[k + 1].strip()) == {"-"})
    except StopIteration:
        return out
    k, names, typ, desc = i + 2, None, "", []

    def flush():
        if names:
            text = " ".join(d.strip() for d in desc if d.strip())
            for n in names:
                out.setdefault(n, (typ, text, len(names)))

    while k < len(lines):
        line = lines[k]
        if line and not line[0].isspace():
            if k + 1 < len(lines) and lines[k + 1].strip() and set(lines[k + 1].strip()) == {"-"}:
                break  # the next section
            flush()
            head, _, typ = line.partition(" : ")
            names, typ, desc = [n.strip() for n in head.split(",") if n.strip()], typ.strip(), []
        else:
            desc.append(line)
        k += 1
    flush()
    return out


_ABBREVIATIONS = ("al", "e.g", "i.e", "etc", "cf", "vs", "Eq", "eq")


def _first_sentence(text: str) -> str:
    """The first sentence of a numpydoc description (a period outside parentheses that ends a word other
    than an abbreviation), without reST markup."""
    text = _ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1], text).replace("``", "")
    depth = 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if ch == "." and depth == 0 and (i + 1 == len(text) or text[i + 1].isspace()):
            word = re.search(r"([\w.]*)$", text[:i]).group(1)
            if word not in _ABBREVIATIONS:
                return text[:i].strip()
    return text.strip()


def _choices(typ: str):
    """The values listed in braces in a numpydoc type (``{"auto", True, False}``), or None."""
    m = re.search(r"\{([^{}]*)\}", typ)
    if not m:
        return None
    try:
        return tuple(ast.literal_eval(x.strip()) for x in m.group(1).split(",") if x.strip())
    except (ValueError, SyntaxError):
        return None


# ----------------------------------------------------------------------------- parameters

def _number(text: str):
    """An int where the text is one, else a float (``--min-df 5`` is 5 documents, ``--max-df 0.5`` a fraction)."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def _json_object(text: str) -> dict:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(text)
    return value


def _ints(text: str) -> list:
    """Integers separated by commas (``--devices 0,1``)."""
    return [int(x) for x in text.split(",") if x.strip()]


def _pair(text: str) -> tuple:
    """``NAME=NUMBER`` (``--field-weight title=2.0``) as ``(name, float)``."""
    name, sep, value = text.rpartition("=")
    if not sep or not name:
        raise ValueError(text)
    return name, float(value)


_number.__name__ = "number"
_json_object.__name__ = "JSON object"
_ints.__name__ = "integers (0,1)"
_pair.__name__ = "NAME=NUMBER"
_PARSERS = {"int": int, "float": float, "number": _number, "str": str, "json": _json_object, "pairs": _pair}


def _parser(parse, nullable: bool, literals: tuple):
    """``parse``, with ``none`` read as None (``nullable``) and the strings ``literals`` taken as they are."""
    if not nullable and not literals:
        return parse

    def parse_also(text: str):
        if nullable and text.strip().lower() == "none":
            return None
        return text if text in literals else parse(text)

    parse_also.__name__ = " or ".join([parse.__name__, *(["none"] if nullable else []), *literals])
    return parse_also


@dataclass
class Param:
    """One row of a subcommand's parameter table.

    Attributes
    ----------
    name : str
        The Python keyword.
    owner : callable
        The function that takes it.
    default : object
        Its default in the signature (``inspect.Parameter.empty``: required).
    kind : str
        ``"bool"``, ``"int"``, ``"float"``, ``"number"`` (int or float), ``"str"``, ``"json"``, ``"pairs"``
        (a dict of str to float given as repeated ``NAME=NUMBER``), or ``"choice"`` (``choices`` maps each
        spelling to its value).
    many : bool
        List-valued: the option is repeated.
    alone : bool
        A list of one value is passed as that value (``text_column="title"``).
    nullable : bool
        ``none`` on the command line is None.
    choices : dict, optional
        Command-line spelling -> Python value.
    literals : tuple of str
        Strings a number parameter also takes (``float or "auto"`` in its numpydoc type).
    help : str
    options : tuple of str
        The option strings; ``options[0]`` is what messages use.
    positional : bool
    argparse : dict
        Keywords merged into its ``add_argument`` (the command's ``positional`` / ``options``).
    """

    name: str
    owner: Callable
    default: Any
    kind: str
    many: bool = False
    alone: bool = False
    nullable: bool = False
    choices: dict | None = None
    literals: tuple = ()
    help: str = ""
    options: tuple = ()
    positional: bool = False
    argparse: dict = field(default_factory=dict)

    @property
    def display(self) -> str:
        return self.options[0] if self.options else self.name.upper()

    def spell(self, *value) -> str:
        """The option, with ``value`` as the command line writes it (``--glob off``, ``--no-lowercase``)."""
        if not value:
            return self.display
        v = value[0]
        if self.kind == "bool":
            return self.display if v else "--no-" + self.display[2:]
        if self.choices is not None:
            for text, val in self.choices.items():
                if val is v or (type(val) is type(v) and val == v):
                    return f"{self.display} {text}"
        if v is None:
            return f"{self.display} none"
        if isinstance(v, dict) and self.kind == "pairs":
            return " ".join(f"{self.display} {shlex.quote(f'{k}={x}')}" for k, x in v.items())
        if isinstance(v, dict):
            return f"{self.display} {shlex.quote(json.dumps(v))}"
        if isinstance(v, (list, tuple)) and self.many:
            return " ".join(f"{self.display} {shlex.quote(str(x))}" for x in v)
        return f"{self.display} {shlex.quote(str(v))}"

    def convert(self, value):
        """The Python value of what argparse parsed."""
        if self.choices is not None:
            return [self.choices[v] for v in value] if self.many else self.choices[value]
        if self.kind == "pairs" and isinstance(value, list):
            return dict(value)
        if self.many and isinstance(value, list):
            if self.kind == "int":  # "0,1" and repeated options alike
                return [x for v in value for x in (v if isinstance(v, list) else [v])]
            return value[0] if self.alone and len(value) == 1 else value
        return value


def _resolve(owner, target: str):
    """The function a reST role of ``owner``'s docstring names (``build_index``, ``a.b.compute_context``)."""
    import importlib

    parts = target.split(".")
    obj = getattr(owner, "__globals__", {}).get(parts[0])
    try:
        if obj is not None:
            for part in parts[1:]:
                obj = getattr(obj, part)
            return obj
        return getattr(importlib.import_module(".".join(parts[:-1])), parts[-1])
    except (ImportError, AttributeError, ValueError):
        return None


def _referenced(name: str, owner) -> list:
    """The functions that ``owner``'s description of ``name`` refers to (``As for :func:`build_index```),
    where they take ``name`` themselves, then the reader (its settings are documented once, there)."""
    desc = _doc_params(owner).get(name, ("", "", 1))[1]
    found = [_resolve(owner, m.group(1).lstrip("~")) for m in re.finditer(r":(?:func|meth):`([^`]+)`", desc)]
    found = [f for f in found if callable(f) and f is not owner and name in _signature_names(f)]
    if name not in ("path", "backend") and owner is not read_corpus and name in _signature_names(read_corpus):
        found.append(read_corpus)  # the reader's own backend is the resolved one ("cpu" / "gpu")
    return found


def _signature_names(func) -> tuple:
    try:
        return tuple(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return ()


def _annotation(func, name: str) -> str:
    ann = getattr(func, "__annotations__", {}).get(name)
    return ann if isinstance(ann, str) else getattr(ann, "__name__", "") if ann is not None else ""


def _kind_of(name: str, owner, default, doc: dict) -> dict:
    """``kind``, ``many``, ``nullable`` and ``choices`` of a parameter: from :data:`SHARED`, else the numpydoc
    type (its own, else that of a function its description refers to, else the reader's), the annotation and
    the default."""
    refs = _referenced(name, owner)
    typ = doc.get(name, ("", "", 1))[0] or next(
        (t for t in (_doc_params(f).get(name, ("", "", 1))[0] for f in refs) if t), "")
    ann = _annotation(owner, name) or next((a for a in (_annotation(f, name) for f in refs) if a), "")
    nullable = default is None or "None" in typ or "optional" in typ or "None" in ann
    s = SHARED.get(name)
    if s is not None and s.kind is not None:
        if s.kind == "tristate":
            return dict(kind="choice", choices={"auto": None, "on": True, "off": False})
        return dict(kind=s.kind, many=s.many, alone=s.alone, nullable=nullable and s.kind != "bool")
    found = _choices(typ)
    if found:
        if any(isinstance(c, bool) for c in found):
            spelled = {("on" if c is True else "off" if c is False else str(c)): c for c in found}
        else:
            spelled = {str(c): c for c in found}
        return dict(kind="choice", choices=spelled)
    words = set(re.findall(r"[A-Za-z_]+", typ))
    if re.search(r"\bdict of str to float\b", typ):
        return dict(kind="pairs", many=True)
    many = bool(re.search(r"\b(list|iterable|sequence|tuple) of\b", typ))
    if "bool" in words and "None" in words and not many:
        return dict(kind="choice", choices={"auto": None, "on": True, "off": False})
    if isinstance(default, bool) or (not typ and "bool" in ann):
        return dict(kind="bool")
    if "int" in words and "float" in words:
        kind = "number"
    elif "int" in words:
        kind = "int"
    elif "float" in words:
        kind = "float"
    elif "dict" in words:
        kind = "json"
    elif isinstance(default, float) or ann.startswith("float"):
        kind = "float"
    elif isinstance(default, int) or ann.startswith("int"):
        kind = "int"
    else:
        kind = "str"
    literals = tuple(re.findall(r'"([^"]+)"', typ)) if kind in ("int", "float", "number") else ()
    return dict(kind=kind, many=many, nullable=nullable and kind in ("int", "float", "number"), literals=literals)


def _help_of(name: str, owner) -> str:
    """The help of a parameter: its own numpydoc description, else :data:`SHARED`'s, else that of a function
    its description refers to (the reader's for reader settings), else the description of its group."""
    own = _doc_params(owner).get(name)
    refs = [_doc_params(f).get(name) for f in _referenced(name, owner)]
    alone = [d for d in refs if d and d[2] == 1]
    for cand in (own if own and own[2] == 1 else None, SHARED.get(name), *alone, own, *refs):
        if cand is None:
            continue
        text = cand.help if isinstance(cand, Shared) else _first_sentence(cand[1])
        if text:
            return text
    return ""


# ----------------------------------------------------------------------------- commands

@dataclass
class Command:
    """A subcommand: the functions it runs, whose keywords are its options, and the handler that runs them.

    Parameters
    ----------
    name : str
        The subcommand.
    funcs : callable or tuple of callables
        Whose keywords the subcommand takes (in this order; a name taken by two belongs to the first).
    main : callable
        ``main(args, kw) -> int``: ``kw`` holds the parameters given (a positional and ``out`` always) and
        ``client`` where ``--scheduler-address`` was given; ``args`` the argparse namespace, for the
        command's own options (``--json`` ...).
    help, description : str
    positional : dict
        ``{name: argparse keywords}`` of the parameters that are positional arguments (``path``).
    options : dict
        ``{name: argparse keywords}`` merged into a parameter's option (``required=True``, ``nargs``...).
    defaults : dict
        Command-line defaults that differ from the function's (``search --k 1000``); always passed.
    skip : tuple of str
        Keywords of ``funcs`` that the command gives itself (search: the index path, the queries, the run).
    extra : tuple of (tuple, dict)
        The command's own options, ``(option strings, argparse keywords)`` (``--top`` ...).
    setup : callable, optional
        ``setup(parser)`` adds the arguments that are no keyword of ``funcs`` (``search``: the index, the
        queries, the run file).
    json : bool
        Add ``--json``: print the result as JSON.
    files : tuple of str
        The arguments (their ``dest``) that name a file the command reads (``search --queries``); each is
        checked before any work (:func:`check_input_file`).
    """

    name: str
    funcs: Any
    main: Callable
    help: str = ""
    description: str = ""
    positional: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    defaults: dict = field(default_factory=dict)
    skip: tuple = ()
    extra: tuple = ()
    setup: Callable | None = None
    json: bool = False
    files: tuple = ()

    @functools.cached_property
    def table(self) -> dict:
        """``{name: Param}``: the parameter table, in signature order (positional ones first)."""
        funcs = self.funcs if isinstance(self.funcs, tuple) else (self.funcs,)
        owners: dict = {}
        for f in funcs:
            for name, owner in keyword_owners(f).items():
                owners.setdefault(name, owner)
        rows = {}
        for name, owner in owners.items():
            if name in self.skip or name in ("self", "cls") or (name in PYTHON_ONLY and name not in self.positional):
                continue
            p = inspect.signature(owner).parameters[name]
            doc = _doc_params(owner)
            row = Param(name, owner, p.default, **_kind_of(name, owner, p.default, doc), help=_help_of(name, owner))
            if name in self.positional:
                row.positional = True
                row.argparse = dict(self.positional[name])
            else:
                long = "--" + name.replace("_", "-")
                aliases = ALIASES.get(name, ())
                short = [a for a in aliases if not a.startswith("--")]
                row.options = (*short, long, *[a for a in aliases if a.startswith("--")])
                if row.kind == "pairs" and long.endswith("s"):  # one NAME=NUMBER an option: --field-weight
                    row.options = (long[:-1], *row.options)
                row.argparse = dict(self.options.get(name, {}))
            rows[name] = row
        positional = {n: r for n, r in rows.items() if r.positional}
        return {**{n: positional[n] for n in self.positional if n in positional},
                **{n: r for n, r in rows.items() if not r.positional}}

    @property
    def python_only(self) -> dict:
        """``{name: why}`` of the keywords of its functions that have no option."""
        funcs = self.funcs if isinstance(self.funcs, tuple) else (self.funcs,)
        names = {n for f in funcs for n in keyword_owners(f)}
        return {n: why for n, why in PYTHON_ONLY.items() if n in names and n not in self.positional}

    def _default(self, row: Param):
        """The default shown and passed by the command line (None: nothing is passed)."""
        if row.name in self.defaults:
            return self.defaults[row.name]
        if row.name == "out" and row.default is inspect.Parameter.empty:
            return default_out(self.name)
        return None

    def add_to(self, sub) -> argparse.ArgumentParser:
        """Add the subcommand's parser to ``sub`` (argparse subparsers)."""
        epilog = None
        if self.python_only:
            epilog = "Python only: " + "; ".join(f"{n}= ({why})" for n, why in self.python_only.items())
        p = sub.add_parser(self.name, help=self.help, description=self.description, epilog=epilog)
        for row in self.table.values():
            self._add(p, row)
        if "client" in self.python_only:
            p.add_argument("--scheduler-address", default=None, metavar="ADDRESS",
                           help="run on the dask cluster of this scheduler (tcp://host:8786): client= in Python")
        for opts, kw in self.extra:
            p.add_argument(*opts, **kw)
        if self.setup is not None:
            self.setup(p)
        if self.json:
            p.add_argument("--json", action="store_true", help="print the result as JSON")
        p.set_defaults(cli_main=self)
        # the command's own options (search's --out) name its parameters in messages too
        self._own_options = {a.dest: a.option_strings[-1] for a in p._actions
                             if a.option_strings and a.dest not in self.table}
        return p

    def _add(self, p, row: Param) -> None:
        kw: dict = {"help": row.help.replace("%", "%%")}
        shown = self._default(row)
        if row.positional:
            kw.update(row.argparse)
            p.add_argument(row.name, **kw)
            return
        shown_default = shown if shown is not None else row.default
        required = row.default is inspect.Parameter.empty and shown is None
        if not required and shown_default is not inspect.Parameter.empty:
            text = _default_text(row, shown_default)
            kw["help"] += f" (default: {text})".replace("%", "%%")
        kw["default"] = shown if shown is not None else argparse.SUPPRESS
        kw["dest"] = row.name
        if required:
            kw["required"] = True
        if row.kind == "bool":
            kw["action"] = argparse.BooleanOptionalAction
        else:
            if row.choices is not None:
                kw["choices"] = list(row.choices)
            else:
                parse = _ints if row.many and row.kind == "int" else _PARSERS[row.kind]
                kw["type"] = _parser(parse, row.nullable and not row.many, row.literals)
            if row.many:
                kw["action"] = "append"
            kw["metavar"] = (None if row.choices is not None else "NAME=NUMBER" if row.kind == "pairs"
                             else row.name.upper())
        kw.update(row.argparse)
        if kw.get("nargs") in ("+", "*") and kw.get("action") == "append":
            kw["action"] = "extend"
        p.add_argument(*row.options, **kw)

    def spell(self, name: str, *value):
        """How this subcommand's command line writes the parameter ``name`` (None: it has no option)."""
        row = self.table.get(name)
        if row is not None and not row.positional:
            return row.spell(*value)
        if name == "client" and "client" in self.python_only:
            return "--scheduler-address"
        own = getattr(self, "_own_options", {}).get(name)
        if own is not None:
            return own + (f" {shlex.quote(str(value[0]))}" if value else "")
        return None

    def keywords(self, args) -> Keywords:
        """The parameters the command line gave (and its own defaults), as the functions take them."""
        kw = {}
        for name, row in self.table.items():
            if hasattr(args, name):
                value = getattr(args, name)
                kw[name] = value if value is None and not row.positional else row.convert(value)
        if row_path := self.table.get("path"):
            if row_path.positional and isinstance(kw.get("path"), list) and len(kw["path"]) == 1:
                kw["path"] = kw["path"][0]
        return Keywords(kw, {n: row.owner for n, row in self.table.items()})

    def __call__(self, args) -> int:
        """Run the subcommand: its parameters' messages speak the command line (:func:`cli_syntax`)."""
        with cli_syntax(self.spell):
            for name in self.files:  # before any work: a directory or a missing path given for a file
                value = getattr(args, name, None)
                if value is not None and not str(value).startswith("irds:"):  # an ir_datasets id is no file
                    check_input_file(value, self.spell(name) or name)
            kw = self.keywords(args)
            client = None
            if getattr(args, "scheduler_address", None):
                from distributed import Client

                kw["client"] = client = Client(args.scheduler_address)
            try:
                return self.main(args, kw)
            finally:
                if client is not None:
                    client.close()


def check_input_file(path, option: str) -> None:
    """Refuse a path given where the command reads a file, before any work: a path that does not exist or
    a directory.  ``-`` (standard input) and URLs of other file systems pass (their readers check them).

    Parameters
    ----------
    path : str or os.PathLike
    option : str
        How the command line names the argument (``--queries``, ``run``), for the message.

    Raises
    ------
    FileNotFoundError
        No such path (the message names the option and the path).
    ValueError
        A directory (the message names the option and the path).
    """
    text = os.fspath(path)
    if text == "-" or ("://" in text and not text.startswith("file://")):
        return
    local = text[len("file://"):] if text.startswith("file://") else text
    if os.path.isdir(local):
        raise ValueError(f"{option} {text}: is a directory; {option} reads a file")
    if not os.path.exists(local):
        raise FileNotFoundError(f"{option} {text}: no such file")


def _default_text(row: Param, value) -> str:
    """A default as the command line writes it (``--no-append``, ``auto``, ``none``)."""
    if row.kind == "bool":
        return ("--" if value else "--no-") + row.name.replace("_", "-")
    if row.choices is not None:
        for text, val in row.choices.items():
            if val is value or (type(val) is type(value) and val == value):
                return text
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value))
    return str(value)
