"""The SMART format of the classic IR test collections (CACM, CISI, Cranfield, MED/Medline, Time ...):
documents and queries as records that start with ``.I <number>``, then fields each opened by a line that
holds only its marker::

    .I 1
    .T
    18 Editions of the Dewey Decimal Classifications
    .A
    Comaromi, J.P.
    .W
    The present study is a history of the DEWEY Decimal Classification. ...
    .X
    1	5	1

Fields (Salton's SMART system, as the collections' READMEs describe them): ``.T`` title, ``.A`` authors,
``.W`` abstract or body (a query's text), ``.B`` bibliographic source, ``.K`` keywords, ``.N`` entry date or
notes, ``.C`` categories, ``.X`` cross-references (citation triples).  A record's id is its ``.I`` number
without leading zeros (``.I 001`` is ``"1"``), the form the collections' relevance files use.

A document's text is its ``.T``, ``.W`` and ``.K`` fields (:data:`DOC_TEXT_FIELDS`: what it says, not who
wrote it or where it appeared); a query's is ``.T`` and ``.W`` (:data:`QUERY_TEXT_FIELDS`).  A file is
SMART when its first non-blank line is ``.I <number>`` (:func:`is_smart`).
"""
from __future__ import annotations

import re

from cutext.stages.readers.base import CorpusError

__all__ = ["SMART_FIELDS", "DOC_TEXT_FIELDS", "QUERY_TEXT_FIELDS", "SmartError", "is_smart", "parse_smart",
           "smart_texts", "check_fields"]

SMART_FIELDS = {"T": "title", "A": "authors", "W": "abstract / text", "B": "bibliographic source",
                "K": "keywords", "N": "entry date / notes", "C": "categories", "X": "cross-references"}
DOC_TEXT_FIELDS = ("T", "W", "K")
QUERY_TEXT_FIELDS = ("T", "W")
_RECORD = re.compile(r"\.I[ \t]+(\S+)[ \t]*")
_MARKER = re.compile(r"\.([A-Z])[ \t]*")
_FIRST = re.compile(r"\s*\.I[ \t]+\d+[ \t]*\r?(\n|$)")


class SmartError(CorpusError):
    """A SMART file that does not follow the format; the message names the file and the 1-based line."""


def is_smart(head: str) -> bool:
    """Whether text starting with ``head`` (a file's first bytes, decoded) is SMART: its first non-blank line
    is ``.I <number>``."""
    return _FIRST.match(head) is not None


def check_fields(fields, what: str = "text_column") -> tuple:
    """``fields`` (a SMART field letter or a list of them, e.g. ``["T", "W"]``) as a tuple.

    Raises
    ------
    ValueError
        Empty, or a letter that is not a SMART text field (the message lists them).
    """
    got = (fields,) if isinstance(fields, str) else tuple(fields)
    bad = [f for f in got if not isinstance(f, str) or f.lstrip(".").upper() not in SMART_FIELDS]
    if not got or bad:
        known = ", ".join(f"{k} ({v})" for k, v in SMART_FIELDS.items())
        raise ValueError(f"{what} of a SMART input names its fields by letter; got {list(got)!r}; known: {known}")
    return tuple(f.lstrip(".").upper() for f in got)


def parse_smart(text: str, path, starts: list | None = None) -> list:
    """The records of a SMART file's ``text``: ``[(id, {field letter: text}), ...]`` in file order; a field
    given twice in a record (two ``.A`` blocks) is the two joined by a newline.  ``starts``, a list, gets the
    0-based line of each record's ``.I``.

    Raises
    ------
    SmartError (CorpusError, ValueError)
        Naming ``path`` and the line: text before the first ``.I``, an id that is not a number, an id seen
        before, a marker that is not a SMART field, or text in a record before its first field marker.
    """
    records: list = []
    seen: dict = {}
    lines: list | None = None
    fields: dict = {}
    for lineno, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r")
        m = _RECORD.fullmatch(line)
        if m is not None:
            raw = m.group(1)
            if not raw.isdigit():
                raise SmartError(f"{path}, line {lineno}: a SMART record id must be a number, got {raw!r}")
            rid = str(int(raw))
            if rid in seen:
                raise SmartError(f"{path}, line {lineno}: record .I {rid} appears twice (first on line {seen[rid]})")
            seen[rid] = lineno
            fields = {}
            records.append((rid, fields))
            if starts is not None:
                starts.append(lineno - 1)
            lines = None
            continue
        m = _MARKER.fullmatch(line)
        if m is not None and records:
            letter = m.group(1)
            if letter not in SMART_FIELDS:
                raise SmartError(f"{path}, line {lineno}: .{letter} is not a SMART field (known: .I, "
                                 f"{', '.join('.' + k for k in SMART_FIELDS)})")
            lines = fields.setdefault(letter, [])
            if lines:
                lines.append("")
            continue
        if not line.strip():
            if lines is not None:
                lines.append("")
            continue
        if not records:
            raise SmartError(f"{path}, line {lineno}: text before the first .I record: {line[:60]!r} "
                             "(a SMART file starts with '.I <number>')")
        if lines is None:
            raise SmartError(f"{path}, line {lineno}: text of record .I {records[-1][0]} before its first field "
                             f"marker (.T, .W ...): {line[:60]!r}")
        lines.append(line)
    return [(rid, {k: "\n".join(v).strip() for k, v in f.items()}) for rid, f in records]


def smart_texts(records: list, fields: tuple) -> list:
    """The text of each record: its ``fields`` that it has, in that order, joined by a newline."""
    return ["\n".join(f[k] for k in fields if f.get(k)) for _, f in records]
