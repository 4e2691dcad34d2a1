"""Command line: ``python -m cutext.pipelines {bm25,search,evaluate,ngram,cluster,lda} ...`` (also the
``cutext`` script).

Every subcommand is registered the same way: a module of ``cutext.pipelines`` named in
``CLI_MODULES`` defines ``add_cli(subparsers)``, which adds its parser(s) and binds each to its
handler with ``set_defaults(cli_main=f)``; ``f(args)`` returns the exit status. The pipelines' modules
list their subcommands as ``COMMANDS`` (:class:`cutext.pipelines._cli.Command`), whose options are
generated from the keywords of the Python functions they run, so that ``--text-column`` is
``text_column=``; while one runs, messages name parameters as options. Errors a user can cause
(missing files, an existing output, bad values) print ``error: ...`` and exit with status 2.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from cutext.kernels._version import __version__

# The registry, in the order the subcommands are listed by ``--help``: ``bm25`` registers
# ``bm25`` and ``search``, ``bm25_index_ops`` the index maintenance (``bm25-append``, ``bm25-delete``,
# ``bm25-compact``); ``evaluate`` registers ``evaluate``; each other pipeline its own name.
CLI_MODULES = ("bm25", "bm25_index_ops", "evaluate", "ngram", "cluster", "lda", "datasets")  # datasets: fetch


def _cli_modules():
    """The modules of ``CLI_MODULES`` present in this installation, imported, in registry order."""
    mods = []
    for name in CLI_MODULES:
        full = f"cutext.pipelines.{name}"
        try:
            mods.append(importlib.import_module(full))
        except ModuleNotFoundError as exc:
            if exc.name != full:
                raise
    return mods


def _unrecognized(parser: argparse.ArgumentParser, extra: list) -> None:
    """Exit with status 2 naming each unknown argument and, for options, the closest valid one."""
    import difflib

    options = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    parts = []
    for arg in extra:
        if arg.startswith("-"):
            name = arg.split("=", 1)[0]
            close = difflib.get_close_matches(name, options, n=1, cutoff=0.6) or \
                difflib.get_close_matches(name.replace("_", "-"), options, n=1, cutoff=0.6)
            parts.append(f"{name} (did you mean {close[0]}?)" if close else name)
        else:
            parts.append(arg)
    parser.error("unrecognized arguments: " + " ".join(parts))


def _unknown_command(parser: argparse.ArgumentParser, sub, argv: list) -> None:
    """Exit with status 2 where the subcommand (the first argument that is not an option: the top-level
    options take no value) is unknown, naming the closest ones."""
    import difflib

    command = next((a for a in argv if not a.startswith("-")), None)
    if command is None or command in sub.choices:
        return
    close = difflib.get_close_matches(command, list(sub.choices), n=2, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    parser.error(f"unknown command {command!r}{hint} (choose from {', '.join(sub.choices)})")


def main(argv=None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the subcommand, return its exit status.

    Returns
    -------
    int
        0 on success; 2 for a usage error (argparse exits with 2 itself) or a
        ``FileNotFoundError``, ``FileExistsError``, ``ValueError`` or ``RuntimeError`` raised by
        the subcommand, or an ``OSError`` about a path (a directory where a file is read, no
        permission), whose message is printed to standard error as ``error: <message>``.
    """
    ap = argparse.ArgumentParser(prog="python -m cutext.pipelines",
                                 description="cutext: GPU/CPU text-analytics pipelines")
    ap.add_argument("--version", action="version", version=f"cutext {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)
    for mod in _cli_modules():
        mod.add_cli(sub)
    for parser in sub.choices.values():  # no prefix matching: "--iteration" is a typo, not "--iterations"
        parser.allow_abbrev = False
    _unknown_command(ap, sub, sys.argv[1:] if argv is None else argv)
    args, extra = ap.parse_known_args(argv)
    if extra:
        _unrecognized(sub.choices[args.command], extra)
    try:
        return int(args.cli_main(args) or 0)
    except (FileNotFoundError, FileExistsError, ValueError, RuntimeError) as exc:
        print(f"error: {_said(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:  # a path the system refused (a directory where a file is read, no permission)
        if exc.filename is None:
            raise
        print(f"error: {_said(exc)}", file=sys.stderr)
        return 2


def _said(exc: Exception) -> str:
    """The message of an error; the system's ``[Errno 21] Is a directory: 'x'`` as ``x: is a directory``."""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror and str(exc).startswith("[Errno"):
        return f"{exc.filename}: {exc.strerror[:1].lower()}{exc.strerror[1:]}"
    return str(exc)


if __name__ == "__main__":
    sys.exit(main())
