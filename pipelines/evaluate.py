"""Retrieval evaluation: TREC / BEIR readers and trec_eval-compatible metrics.

This module is pure Python, numpy and pandas (no GPU imports) so that it runs the same
on every backend: runs produced on the GPU are small (queries x depth) and are scored here.

Readers
-------
All readers open their input with ``fsspec`` (local paths or URLs), infer the compression
from the suffix (``.gz``, ``.bz2``, ``.zst``, ``.xz``, ...), decode UTF-8 (a leading BOM is
dropped), skip blank lines, and raise :class:`ValueError` whose message names the file and
the 1-based line number of the first malformed record. Identifiers are kept verbatim as
strings (``"051"`` stays ``"051"``; trec_eval also matches ids as exact strings). A file with
no records gives an empty DataFrame with the documented columns.

* :func:`read_trec_topics` -- TREC SGML topics: ``<top>`` (classic ad hoc) and ``<DOC>`` (CACM).
* :func:`read_trec_qrels` -- ``qid iter docid rel``.
* :func:`read_trec_run` / :func:`write_trec_run` -- ``qid Q0 docid rank score tag``.
* :func:`read_beir_queries` -- BEIR ``queries.jsonl`` or ``qid<TAB>text`` TSV.
* :func:`read_beir_qrels` -- BEIR ``query-id corpus-id score`` TSV or TREC qrels (sniffed).

Metrics
-------
:func:`evaluate` reimplements the trec_eval 9 measures ``map``, ``P_k``, ``recall_k``,
``ndcg_cut_k``, ``ndcg`` and ``recip_rank`` with numpy, following trec_eval's conventions
exactly (ordering, tie-breaking, which queries are averaged); the test suite checks it
against ``pytrec_eval`` query by query. Decisions recorded here:

* Ids are compared as strings: integer ``doc_id`` columns (the pipelines' corpus ids) are
  converted with ``str`` before matching the qrels, and ties are broken on that string.
* A (query, document) pair may occur only once in a run and once in qrels; duplicates are a
  :class:`ValueError` (which copy trec_eval would count is not specified, and the
  ``pytrec_eval`` dict form cannot express them).
* A query with no retrieved documents is not part of the run (as with a run file); note that
  ``pytrec_eval`` would score an empty ``{qid: {}}`` entry as 0.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from typing import Any

import fsspec
import fsspec.utils
import numpy as np
import pandas as pd

__all__ = [
    "read_trec_topics",
    "read_trec_qrels",
    "read_trec_run",
    "write_trec_run",
    "read_beir_queries",
    "read_beir_qrels",
    "evaluate",
    "DEFAULT_METRICS",
]

#: Metrics computed by :func:`evaluate` when none are named.
DEFAULT_METRICS: tuple[str, ...] = ("map", "P@30", "ndcg@10")

_TOPIC_FIELDS = ("title", "desc", "title+desc")
_QUERY_TSV_HEADER_IDS = {"query-id", "query_id", "qid", "_id", "id"}
_QUERY_TSV_HEADER_TEXTS = {"text", "query", "title"}
_BEIR_QRELS_HEADER = ["query-id", "corpus-id", "score"]


# --------------------------------------------------------------------------------------
# file helpers
# --------------------------------------------------------------------------------------
def _read_text(path: str | os.PathLike) -> str:
    """Return the decoded content of ``path`` with universal newlines.

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    ValueError
        The file is not valid UTF-8 (after decompression).
    """
    spath = os.fspath(path)
    try:
        with fsspec.open(spath, "rt", compression="infer", encoding="utf-8-sig") as f:
            return f.read()
    except UnicodeDecodeError as exc:
        raise ValueError(f"{spath}: not valid UTF-8 text ({exc})") from exc


def _data_lines(path: str | os.PathLike) -> Iterable[tuple[int, str]]:
    """Yield ``(1-based line number, line)`` for the non-blank lines of ``path``."""
    for lineno, line in enumerate(_read_text(path).split("\n"), 1):
        if line.strip():
            yield lineno, line


def _fail(path: str | os.PathLike, lineno: int, message: str) -> ValueError:
    return ValueError(f"{os.fspath(path)}, line {lineno}: {message}")


def _parse_int(path, lineno: int, token: str, what: str) -> int:
    try:
        return int(token)
    except ValueError:
        raise _fail(path, lineno, f"{what} {token!r} is not an integer") from None


def _parse_float(path, lineno: int, token: str, what: str) -> float:
    try:
        value = float(token)
    except ValueError:
        raise _fail(path, lineno, f"{what} {token!r} is not a number") from None
    if math.isnan(value):
        raise _fail(path, lineno, f"{what} is NaN")
    return value


def _str_column(values: list[str]) -> pd.Series:
    return pd.Series(values, dtype=str)


def _qrels_frame(qids: list[str], dids: list[str], rels: list[int]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "query_id": _str_column(qids),
            "doc_id": _str_column(dids),
            "relevance": pd.Series(rels, dtype=np.int64),
        }
    )


def _queries_frame(qids: list[str], texts: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"query_id": _str_column(qids), "query": _str_column(texts)})


def _check_unique_query(path, seen: dict[str, int], qid: str, lineno: int) -> None:
    if qid in seen:
        raise _fail(path, lineno, f"duplicate query id {qid!r} (first seen on line {seen[qid]})")
    seen[qid] = lineno


# --------------------------------------------------------------------------------------
# topics
# --------------------------------------------------------------------------------------
_BLOCK_RE = re.compile(r"<(top|doc)\b[^>]*>(.*?)</\1\s*>", re.IGNORECASE | re.DOTALL)
_OPEN_BLOCK_RE = re.compile(r"<(top|doc)\b[^>]*>", re.IGNORECASE)
_DOCNO_RE = re.compile(r"<docno>(.*?)</docno\s*>", re.IGNORECASE | re.DOTALL)
_TAG_RE = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9_-]*)\b[^>]*>")
_WS_RE = re.compile(r"\s+")
_FIELD_LABELS = {
    "num": re.compile(r"^\s*number\s*:", re.IGNORECASE),
    "title": re.compile(r"^\s*topic\s*:", re.IGNORECASE),
    "desc": re.compile(r"^\s*description\s*:", re.IGNORECASE),
    "narr": re.compile(r"^\s*narrative\s*:", re.IGNORECASE),
}


def _collapse(text: str) -> str:
    return _WS_RE.sub(" ", text).strip()


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def read_trec_topics(path: str | os.PathLike, field: str = "title") -> pd.DataFrame:
    """Read TREC SGML topics.

    Two layouts are recognised, and may be mixed in one file:

    * CACM / ``<DOC>`` style: ``<DOC> <DOCNO> 1 </DOCNO> free text </DOC>``. The query is
      all the text of the block other than the DOCNO element (any other tags removed),
      whitespace-collapsed. ``field`` does not apply: these topics have one text field.
    * Classic TREC ad hoc style: ``<top> <num> Number: 301 <title> ... <desc> Description:
      ... <narr> Narrative: ... </top>``. A field runs from its tag to the next tag; closing
      tags such as ``</title>`` are optional; other tags (``<dom>``, ``<con>``, ...) are
      ignored. The labels ``Number:``, ``Topic:``, ``Description:`` and ``Narrative:`` are
      removed and whitespace is collapsed.

    Parameters
    ----------
    path : str or os.PathLike
        Topics file (local path or fsspec URL; compression inferred from the suffix).
    field : {"title", "desc", "title+desc"}, default "title"
        Which field of a ``<top>`` topic becomes the query (``"title+desc"`` joins the two
        with a space).

    Returns
    -------
    pandas.DataFrame
        One row per topic, in file order; columns ``query_id`` (str, verbatim, e.g. ``"051"``)
        and ``query`` (str).

    Raises
    ------
    ValueError
        ``field`` is not one of the choices; or, naming the file and 1-based line: text
        outside a topic block, a block that is not closed, a topic without an id (DOCNO /
        num) or without the requested field, an empty query, or a duplicate query id.
    FileNotFoundError
        ``path`` does not exist.
    """
    if field not in _TOPIC_FIELDS:
        raise ValueError(f"field must be one of {_TOPIC_FIELDS}, got {field!r}")
    text = _read_text(path)
    qids: list[str] = []
    queries: list[str] = []
    seen: dict[str, int] = {}

    def check_gap(start: int, end: int) -> None:
        gap = text[start:end]
        opened = _OPEN_BLOCK_RE.search(gap)
        if opened:
            raise _fail(path, _line_of(text, start + opened.start()),
                        f"<{opened.group(1)}> block is not closed")
        stray = re.search(r"\S", gap)
        if stray:
            raise _fail(path, _line_of(text, start + stray.start()),
                        "unexpected text outside <top>/<DOC> blocks: "
                        f"{gap[stray.start():stray.start() + 40].splitlines()[0]!r}")

    pos = 0
    for block in _BLOCK_RE.finditer(text):
        check_gap(pos, block.start())
        pos = block.end()
        kind = block.group(1).lower()
        body = block.group(2)
        body_start = block.start(2)
        line = _line_of(text, block.start())
        nested = _OPEN_BLOCK_RE.search(body)
        if nested:
            raise _fail(path, line, f"<{block.group(1)}> block is not closed before the "
                        f"block on line {_line_of(text, body_start + nested.start())}")
        if kind == "doc":
            qid, query = _parse_doc_topic(path, line, body)
        else:
            qid, query = _parse_top_topic(path, text, body_start, line, body, field)
        _check_unique_query(path, seen, qid, line)
        qids.append(qid)
        queries.append(query)
    check_gap(pos, len(text))
    return _queries_frame(qids, queries)


def _parse_doc_topic(path, line: int, body: str) -> tuple[str, str]:
    docnos = _DOCNO_RE.findall(body)
    if len(docnos) != 1:
        raise _fail(path, line, f"<DOC> topic must have exactly one <DOCNO>, found {len(docnos)}")
    qid = _collapse(docnos[0])
    if not qid or " " in qid:
        raise _fail(path, line, f"<DOCNO> must hold one non-empty id, got {docnos[0]!r}")
    query = _collapse(_TAG_RE.sub(" ", _DOCNO_RE.sub(" ", body)))
    if not query:
        raise _fail(path, line, f"topic {qid!r} has no query text")
    return qid, query


def _parse_top_topic(path, text: str, body_start: int, line: int, body: str,
                     field: str) -> tuple[str, str]:
    fields: dict[str, str] = {}
    tags = list(_TAG_RE.finditer(body))
    for i, tag in enumerate(tags):
        name = tag.group(2).lower()
        if tag.group(1) or name not in _FIELD_LABELS:
            continue
        if name in fields:
            raise _fail(path, _line_of(text, body_start + tag.start()),
                        f"<{tag.group(2)}> appears twice in one topic")
        end = tags[i + 1].start() if i + 1 < len(tags) else len(body)
        fields[name] = _collapse(_FIELD_LABELS[name].sub("", body[tag.end():end], count=1))
    qid = fields.get("num", "")
    if not qid or " " in qid:
        raise _fail(path, line, f"<top> topic needs one id in <num>, got {qid!r}")
    parts = ["title", "desc"] if field == "title+desc" else [field]
    for name in parts:
        if not fields.get(name):
            raise _fail(path, line, f"topic {qid!r} has no <{name}> text")
    return qid, " ".join(fields[name] for name in parts)


# --------------------------------------------------------------------------------------
# qrels, runs, queries
# --------------------------------------------------------------------------------------
def read_trec_qrels(path: str | os.PathLike) -> pd.DataFrame:
    """Read TREC qrels (``qid iter docid rel``, whitespace separated).

    Parameters
    ----------
    path : str or os.PathLike
        Qrels file (local path or fsspec URL; compression inferred from the suffix).

    Returns
    -------
    pandas.DataFrame
        Columns ``query_id`` (str), ``doc_id`` (str), ``relevance`` (int64; graded, may be
        negative); one row per line, in file order. The ``iter`` column is dropped.

    Raises
    ------
    ValueError
        Naming the file and 1-based line: a line without exactly 4 fields, or a
        relevance that is not an integer.
    FileNotFoundError
        ``path`` does not exist.
    """
    qids: list[str] = []
    dids: list[str] = []
    rels: list[int] = []
    for lineno, line in _data_lines(path):
        parts = line.split()
        if len(parts) != 4:
            raise _fail(path, lineno, "expected 4 whitespace-separated fields "
                        f"'qid iter docid rel', got {len(parts)}: {line.strip()!r}")
        qids.append(parts[0])
        dids.append(parts[2])
        rels.append(_parse_int(path, lineno, parts[3], "relevance"))
    return _qrels_frame(qids, dids, rels)


def read_trec_run(path: str | os.PathLike) -> pd.DataFrame:
    """Read a TREC run (``qid Q0 docid rank score tag``, whitespace separated).

    Parameters
    ----------
    path : str or os.PathLike
        Run file (local path or fsspec URL; compression inferred from the suffix).

    Returns
    -------
    pandas.DataFrame
        Columns ``query_id`` (str), ``doc_id`` (str), ``rank`` (int64, as written; trec_eval
        ignores it), ``score`` (float64), ``tag`` (str); one row per line, in file order.
        The second (``Q0``) column is dropped.

    Raises
    ------
    ValueError
        Naming the file and 1-based line: a line without exactly 6 fields, a rank that is
        not an integer, or a score that is not a number or is NaN.
    FileNotFoundError
        ``path`` does not exist.
    """
    qids: list[str] = []
    dids: list[str] = []
    ranks: list[int] = []
    scores: list[float] = []
    tags: list[str] = []
    for lineno, line in _data_lines(path):
        parts = line.split()
        if len(parts) != 6:
            raise _fail(path, lineno, "expected 6 whitespace-separated fields "
                        f"'qid Q0 docid rank score tag', got {len(parts)}: {line.strip()!r}")
        qids.append(parts[0])
        dids.append(parts[2])
        ranks.append(_parse_int(path, lineno, parts[3], "rank"))
        scores.append(_parse_float(path, lineno, parts[4], "score"))
        tags.append(parts[5])
    return pd.DataFrame(
        {
            "query_id": _str_column(qids),
            "doc_id": _str_column(dids),
            "rank": pd.Series(ranks, dtype=np.int64),
            "score": pd.Series(scores, dtype=np.float64),
            "tag": _str_column(tags),
        }
    )


_HAS_SPACE_RE = re.compile(r"\s")
_WRITE_CHUNK = 1 << 16  # lines per write call


def write_trec_run(run_df: pd.DataFrame, path: str | os.PathLike, tag: str = "cutext") -> None:
    """Write a run in TREC format, atomically.

    Lines are ``qid Q0 docid rank score tag``. Queries keep their order of first appearance;
    inside a query, documents are written in trec_eval's order (score descending, ties by
    ``doc_id`` descending) and ranked 1, 2, ... (any ``rank`` column of ``run_df`` is
    ignored). Scores are written with ``repr`` so that :func:`read_trec_run` gives back the
    same float64 values. The file is written to a temporary file in the target directory
    and moved into place with :func:`os.replace`, so readers never see a partial run.
    A ``.gz`` / ``.bz2`` / ``.zst`` / ``.xz`` suffix compresses the output.

    Parameters
    ----------
    run_df : pandas.DataFrame
        Columns ``query_id``, ``doc_id`` (any type; written with ``str``) and ``score``
        (numeric), one row per retrieved document.
    path : str or os.PathLike
        Local output path; its directory must exist.
    tag : str, default "cutext"
        Run tag for the last column; no whitespace.

    Raises
    ------
    ValueError
        Missing columns, NaN scores, empty or whitespace-containing ids or tag, or a
        duplicate (query_id, doc_id) pair.
    """
    if not tag or re.search(r"\s", tag):
        raise ValueError(f"run tag must be non-empty and contain no whitespace, got {tag!r}")
    df = _coerce_run(run_df)
    for col in ("query_id", "doc_id"):
        for value in pd.unique(df[col]).tolist():
            if not value or _HAS_SPACE_RE.search(value):
                raise ValueError(f"{col} values must be non-empty without whitespace for a "
                                 f"TREC run, got {value!r}")
    order = pd.Categorical(df["query_id"], categories=pd.unique(df["query_id"]))
    df = df.assign(_q=order.codes).sort_values(
        ["_q", "score", "doc_id"], ascending=[True, False, False], kind="mergesort")
    ranks = df.groupby("_q", sort=False).cumcount().to_numpy() + 1
    lines = [
        f"{q} Q0 {d} {r} {s!r} {tag}\n"
        for q, d, r, s in zip(df["query_id"].tolist(), df["doc_id"].tolist(),
                              ranks.tolist(), df["score"].tolist())
    ]
    spath = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(spath))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".run", dir=directory)
    os.close(fd)
    try:
        compression = fsspec.utils.infer_compression(spath)
        with fsspec.open(tmp, "wt", compression=compression, encoding="utf-8") as f:
            for start in range(0, len(lines), _WRITE_CHUNK):
                f.write("".join(lines[start:start + _WRITE_CHUNK]))
        os.replace(tmp, spath)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_beir_queries(path: str | os.PathLike) -> pd.DataFrame:
    """Read BEIR queries: ``queries.jsonl`` or a ``qid<TAB>text`` TSV.

    The format is JSON lines when the name (compression suffix removed) ends in ``.jsonl``
    or ``.json``, or when the first non-blank line starts with ``{``; otherwise TSV. JSON
    lines need ``_id`` and ``text`` keys (other keys such as ``metadata`` are ignored). TSV
    lines split at the first tab; a first line such as ``query-id<TAB>text`` is taken as a
    header and skipped.

    Parameters
    ----------
    path : str or os.PathLike
        Queries file (local path or fsspec URL; compression inferred from the suffix).

    Returns
    -------
    pandas.DataFrame
        Columns ``query_id`` (str) and ``query`` (str, surrounding whitespace stripped), in
        file order.

    Raises
    ------
    ValueError
        Naming the file and 1-based line: invalid JSON, a record without ``_id`` /
        ``text``, a TSV line without a tab, an empty query text or id, or a duplicate id.
    FileNotFoundError
        ``path`` does not exist.
    """
    spath = os.fspath(path)
    stem = spath
    if fsspec.utils.infer_compression(spath):
        stem = os.path.splitext(spath)[0]
    by_suffix = stem.lower().endswith((".jsonl", ".json"))
    qids: list[str] = []
    texts: list[str] = []
    seen: dict[str, int] = {}
    is_json: bool | None = True if by_suffix else None
    first = True
    for lineno, line in _data_lines(path):
        if is_json is None:
            is_json = line.lstrip().startswith("{")
        if is_json:
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise _fail(path, lineno, f"invalid JSON ({exc.msg})") from None
            if not isinstance(record, dict) or "_id" not in record or "text" not in record:
                raise _fail(path, lineno, "expected a JSON object with '_id' and 'text'")
            qid, text = str(record["_id"]).strip(), record["text"]
            if not isinstance(text, str):
                raise _fail(path, lineno, f"'text' must be a string, got {type(text).__name__}")
        else:
            qid, tab, text = line.partition("\t")
            qid = qid.strip()
            if not tab:
                raise _fail(path, lineno, f"expected 'qid<TAB>text', found no tab: {line!r}")
            if (first and qid.lower() in _QUERY_TSV_HEADER_IDS
                    and text.strip().lower() in _QUERY_TSV_HEADER_TEXTS):
                first = False
                continue
        first = False
        text = text.strip()
        if not qid:
            raise _fail(path, lineno, "empty query id")
        if not text:
            raise _fail(path, lineno, f"query {qid!r} has empty text")
        _check_unique_query(path, seen, qid, lineno)
        qids.append(qid)
        texts.append(text)
    return _queries_frame(qids, texts)


def read_beir_qrels(path: str | os.PathLike) -> pd.DataFrame:
    """Read BEIR qrels (``query-id corpus-id score`` TSV) or TREC qrels, detected by content.

    The first non-blank line decides: the BEIR header ``query-id<TAB>corpus-id<TAB>score``
    (or 3 fields) means BEIR, 4 fields means TREC ``qid iter docid rel``.

    Parameters
    ----------
    path : str or os.PathLike
        Qrels file (local path or fsspec URL; compression inferred from the suffix).

    Returns
    -------
    pandas.DataFrame
        Columns ``query_id`` (str), ``doc_id`` (str), ``relevance`` (int64), in file order;
        the same frame :func:`read_trec_qrels` gives for the same judgments.

    Raises
    ------
    ValueError
        Naming the file and 1-based line: a first line with neither 3 nor 4 fields, a
        line with a different number of fields than the format, or a non-integer
        relevance.
    FileNotFoundError
        ``path`` does not exist.
    """
    lines = iter(_data_lines(path))
    head = next(lines, None)
    if head is None:
        return _qrels_frame([], [], [])
    lineno, line = head
    parts = line.split()
    if [p.lower() for p in parts] == _BEIR_QRELS_HEADER:
        rows: Iterable[tuple[int, str]] = lines
    elif len(parts) == 3:
        rows = [(lineno, line), *lines]
    elif len(parts) == 4:
        return read_trec_qrels(path)
    else:
        raise _fail(path, lineno, "expected BEIR qrels 'query-id<TAB>corpus-id<TAB>score' "
                    f"or TREC qrels 'qid iter docid rel', got {len(parts)} fields: {line!r}")
    qids: list[str] = []
    dids: list[str] = []
    rels: list[int] = []
    for lineno, line in rows:
        parts = line.split()
        if len(parts) != 3:
            raise _fail(path, lineno, "expected 3 fields 'query-id corpus-id score', "
                        f"got {len(parts)}: {line.strip()!r}")
        qids.append(parts[0])
        dids.append(parts[1])
        rels.append(_parse_int(path, lineno, parts[2], "score"))
    return _qrels_frame(qids, dids, rels)


# --------------------------------------------------------------------------------------
# evaluation
# --------------------------------------------------------------------------------------
_CUTOFF_PATTERNS = (
    (re.compile(r"^(p|ndcg|recall)@(\d+)$"), None),
    (re.compile(r"^p_(\d+)$"), "p"),  # trec_eval spellings
    (re.compile(r"^ndcg_cut_(\d+)$"), "ndcg"),
    (re.compile(r"^recall_(\d+)$"), "recall"),
)
_CANONICAL = {"p": "P", "ndcg": "ndcg", "recall": "recall"}


def _parse_metric(name: str) -> tuple[str, int | None, str]:
    """Map a metric name to ``(family, cutoff, canonical name)``."""
    if not isinstance(name, str):
        raise ValueError(f"metric names must be strings, got {name!r}")
    key = name.strip().lower()
    if key == "map":
        return "map", None, "map"
    if key in ("mrr", "recip_rank"):
        return "mrr", None, "mrr"
    if key == "ndcg":
        return "ndcg", None, "ndcg"
    for pattern, family in _CUTOFF_PATTERNS:
        m = pattern.match(key)
        if m:
            family = family or m.group(1)
            k = int(m.group(m.lastindex))
            if k < 1:
                raise ValueError(f"metric {name!r}: the cutoff must be >= 1")
            return family, k, f"{_CANONICAL[family]}@{k}"
    raise ValueError(
        f"unknown metric {name!r}; supported (case-insensitive): 'map', 'mrr' "
        "('recip_rank'), 'ndcg', 'P@k', 'ndcg@k', 'recall@k' for an integer k >= 1 "
        "(trec_eval spellings 'P_k', 'ndcg_cut_k', 'recall_k' are accepted too)")


def _coerce(obj: Any, what: str, value: str) -> pd.DataFrame:
    """A run (``value="score"``) or qrels (``value="relevance"``) as a DataFrame
    ``query_id: str, doc_id: str, <value>: float64``, checked for missing ids, NaN values and
    duplicate (query, doc) pairs."""
    cols = ["query_id", "doc_id", value]
    if isinstance(obj, Mapping):
        _check_nested(obj, what, value)
        rows = [(str(q), str(d), v) for q, docs in obj.items() for d, v in docs.items()]
        df = pd.DataFrame(rows, columns=cols)
    elif isinstance(obj, pd.DataFrame):
        missing = set(cols) - set(obj.columns)
        if missing:
            raise ValueError(f"{what} is missing column(s) {sorted(missing)}; "
                             f"it has {list(obj.columns)}")
        df = obj[cols]
    else:
        raise ValueError(f"{what} must be a pandas DataFrame ({', '.join(cols)}) or a "
                         f"dict {{qid: {{docid: {value}}}}}, got {type(obj).__name__}")
    try:
        vals = pd.to_numeric(df[value]).astype(np.float64)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{what} {value} must be numeric ({exc})") from None
    _check_ids(df, what)
    df = pd.DataFrame({"query_id": df["query_id"].astype(str).to_numpy(),
                       "doc_id": df["doc_id"].astype(str).to_numpy(),
                       value: vals.to_numpy()})
    if df[value].isna().any():
        bad = df[df[value].isna()].iloc[0]
        raise ValueError(f"{what} has a NaN {value} (query {bad.query_id!r}, doc {bad.doc_id!r})")
    _reject_duplicates(df, what)
    return df


def _coerce_run(run: Any) -> pd.DataFrame:
    """Return a run as a DataFrame ``query_id: str, doc_id: str, score: float64``."""
    return _coerce(run, "run", "score")


def _coerce_qrels(qrels: Any) -> pd.DataFrame:
    """Return qrels as a DataFrame ``query_id: str, doc_id: str, relevance: float64``."""
    return _coerce(qrels, "qrels", "relevance")


def _check_nested(obj: Mapping, what: str, value: str) -> None:
    for qid, docs in obj.items():
        if not isinstance(docs, Mapping):
            raise ValueError(f"{what} as a dict must map query id -> {{doc_id: {value}}}; "
                             f"query {qid!r} maps to a {type(docs).__name__}")


def _check_ids(df: pd.DataFrame, what: str) -> None:
    for col in ("query_id", "doc_id"):
        if df[col].isna().any():
            raise ValueError(f"{what} has missing values in column {col!r}")


def _reject_duplicates(df: pd.DataFrame, what: str) -> None:
    dup = df.duplicated(["query_id", "doc_id"])
    if dup.any():
        row = df[dup].iloc[0]
        raise ValueError(f"{what} lists document {row.doc_id!r} more than once for query "
                         f"{row.query_id!r} ({int(dup.sum())} duplicate pair(s) in all)")


def _examples(ids: Iterable[str], n: int = 3) -> str:
    ids = sorted(ids)
    return ", ".join(repr(i) for i in ids[:n]) + (", ..." if len(ids) > n else "")


def evaluate(
    run: pd.DataFrame | Mapping[Any, Mapping[Any, float]],
    qrels: pd.DataFrame | Mapping[Any, Mapping[Any, int]],
    metrics: str | Iterable[str] = DEFAULT_METRICS,
    per_query: bool = False,
) -> dict[str, float] | tuple[dict[str, float], pd.DataFrame]:
    """Score a run against relevance judgments, exactly as trec_eval 9 does.

    Conventions (trec_eval's, without ``-c`` / ``-M`` / ``-l``):

    * Inside a query, documents are ordered by score descending, ties broken by ``doc_id``
      descending (string order, as trec_eval's ``strcmp``); any ``rank`` column is ignored.
    * Only queries present both in the run and in the qrels are scored and averaged; a
      query whose judgments are all non-relevant is scored (as 0).
    * Relevant means ``relevance >= 1``; unjudged documents are non-relevant.

    With ``R`` the number of relevant documents of the query in the qrels, ``rel_i`` the
    0/1 relevance and ``g_i = max(relevance, 0)`` the gain of the document at rank ``i``
    (1-based), and ``n`` the number of retrieved documents:

    * ``map`` -- AP = (sum over relevant retrieved ``i`` of precision@i) / R, 0 when R = 0
      (trec_eval ``map``, m_map.c).
    * ``P@k`` -- (number of relevant in the top k) / k, even when n < k (``P_k``, m_P.c).
    * ``recall@k`` -- (number of relevant in the top k) / R, 0 when R = 0 (``recall_k``).
    * ``ndcg@k`` -- DCG@k / IDCG@k with DCG@k = sum_{i<=k} g_i / log2(i + 1) (linear gain
      equal to the judged relevance value, Jarvelin & Kekalainen 2002 with the log2(i + 1)
      discount of trec_eval 9); IDCG@k is the DCG@k of all the query's judged documents
      sorted by gain; 0 when IDCG = 0 (``ndcg_cut_k``, m_ndcg_cut.c). ``ndcg`` is the same
      without a cutoff (trec_eval ``ndcg``).
    * ``mrr`` -- 1 / (rank of the first relevant document), 0 when none is retrieved
      (``recip_rank``, m_recip_rank.c).

    Parameters
    ----------
    run : pandas.DataFrame or dict
        DataFrame with columns ``query_id``, ``doc_id`` and ``score`` (numeric), one row
        per retrieved document (other columns are ignored); or a pytrec_eval-style dict
        ``{query_id: {doc_id: score}}``. Ids of any type are compared as ``str(id)``.
    qrels : pandas.DataFrame or dict
        DataFrame with columns ``query_id``, ``doc_id``, ``relevance`` (numeric, graded),
        e.g. from :func:`read_trec_qrels`; or a dict ``{query_id: {doc_id: relevance}}``.
    metrics : str or iterable of str, default ("map", "P@30", "ndcg@10")
        Metric names, case-insensitive: ``"map"``, ``"mrr"`` (or ``"recip_rank"``),
        ``"ndcg"``, and ``"P@k"``, ``"ndcg@k"``, ``"recall@k"`` for any integer k >= 1. The
        trec_eval spellings ``"P_k"``, ``"ndcg_cut_k"``, ``"recall_k"`` are accepted.
    per_query : bool, default False
        Also return the per-query values.

    Returns
    -------
    means : dict of str to float
        Mean over the evaluated queries, keyed by canonical metric name (``"map"``,
        ``"mrr"``, ``"ndcg"``, ``"P@k"``, ``"ndcg@k"``, ``"recall@k"``) in the order given;
        e.g. ``"MAP"`` and ``"P_30"`` come back as ``"map"`` and ``"P@30"``.
    per_query_values : pandas.DataFrame
        Only when ``per_query`` is true: one row per evaluated query, sorted by
        ``query_id`` (str); a ``query_id`` column and one float64 column per metric.

    Raises
    ------
    ValueError
        Unknown metric name or cutoff < 1; no metrics; missing columns; non-numeric or
        NaN scores / relevance; a (query_id, doc_id) pair repeated in the run or in the
        qrels; an empty run or empty qrels; or no query id shared by the run and qrels.

    References
    ----------
    trec_eval 9.0 (https://github.com/usnistgov/trec_eval), files m_map.c, m_P.c,
    m_recall.c, m_ndcg.c, m_ndcg_cut.c, m_recip_rank.c.
    K. Jarvelin and J. Kekalainen, "Cumulated gain-based evaluation of IR techniques",
    ACM TOIS 20(4), 2002.
    """
    if isinstance(metrics, str):
        metrics = (metrics,)
    parsed: dict[str, tuple[str, int | None]] = {}
    for name in metrics:
        family, k, canonical = _parse_metric(name)
        parsed.setdefault(canonical, (family, k))
    if not parsed:
        raise ValueError("no metrics requested")

    run_df = _coerce_run(run)
    qrels_df = _coerce_qrels(qrels)
    if run_df.empty:
        raise ValueError("the run is empty: it retrieves no documents")
    if qrels_df.empty:
        raise ValueError("the qrels are empty: there are no judgments")
    run_q = set(run_df["query_id"].unique())
    qrels_q = set(qrels_df["query_id"].unique())
    qids = sorted(run_q & qrels_q)
    if not qids:
        raise ValueError(
            f"the run ({len(run_q)} queries, e.g. {_examples(run_q)}) and the qrels "
            f"({len(qrels_q)} queries, e.g. {_examples(qrels_q)}) share no query id; "
            "ids are compared as strings")
    n_q = len(qids)

    # run rows of evaluated queries, in trec_eval order
    run_df = run_df[run_df["query_id"].isin(qids)]
    run_df = run_df.assign(_q=pd.Categorical(run_df["query_id"], categories=qids).codes)
    run_df = run_df.sort_values(["_q", "score", "doc_id"], ascending=[True, False, False],
                                kind="mergesort")
    run_df = run_df.merge(qrels_df, how="left", on=["query_id", "doc_id"], sort=False)
    q = run_df["_q"].to_numpy(np.int64)
    rank = run_df.groupby("_q", sort=False).cumcount().to_numpy(np.float64) + 1.0
    relevance = run_df["relevance"].fillna(0.0).to_numpy(np.float64)
    is_rel = (relevance >= 1.0).astype(np.float64)
    gain = np.maximum(relevance, 0.0)
    discount = np.log2(rank + 1.0)

    # judgments of evaluated queries: R and the ideal ranking of gains
    qrels_df = qrels_df[qrels_df["query_id"].isin(qids)]
    qrels_df = qrels_df.assign(_q=pd.Categorical(qrels_df["query_id"], categories=qids).codes,
                               _g=np.maximum(qrels_df["relevance"].to_numpy(np.float64), 0.0))
    ideal = qrels_df.sort_values(["_q", "_g"], ascending=[True, False], kind="mergesort")
    iq = ideal["_q"].to_numpy(np.int64)
    igain = ideal["_g"].to_numpy(np.float64)
    irank = ideal.groupby("_q", sort=False).cumcount().to_numpy(np.float64) + 1.0
    idiscount = np.log2(irank + 1.0)
    judged_rel = (qrels_df["relevance"].to_numpy(np.float64) >= 1.0).astype(np.float64)
    num_rel = np.bincount(qrels_df["_q"].to_numpy(np.int64), weights=judged_rel, minlength=n_q)

    def per_q(weights: np.ndarray, codes: np.ndarray = q) -> np.ndarray:
        return np.bincount(codes, weights=weights, minlength=n_q)

    def ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
        out = np.zeros(n_q)
        np.divide(num, den, out=out, where=den > 0)
        return out

    values: dict[str, np.ndarray] = {}
    for canonical, (family, k) in parsed.items():
        top = np.ones_like(rank, dtype=bool) if k is None else rank <= k
        if family == "map":
            rel_so_far = pd.Series(is_rel).groupby(q).cumsum().to_numpy()
            values[canonical] = ratio(per_q(is_rel * rel_so_far / rank), num_rel)
        elif family == "p":
            values[canonical] = per_q(is_rel * top) / k
        elif family == "recall":
            values[canonical] = ratio(per_q(is_rel * top), num_rel)
        elif family == "ndcg":
            itop = np.ones_like(irank, dtype=bool) if k is None else irank <= k
            dcg = per_q(np.where(top, gain / discount, 0.0))
            idcg = per_q(np.where(itop, igain / idiscount, 0.0), iq)
            values[canonical] = ratio(dcg, idcg)
        else:  # mrr
            first = np.full(n_q, np.inf)
            np.minimum.at(first, q[is_rel > 0], rank[is_rel > 0])
            values[canonical] = np.where(np.isfinite(first), 1.0 / first, 0.0)

    means = {name: float(np.mean(v)) for name, v in values.items()}
    if not per_query:
        return means
    table = pd.DataFrame({"query_id": pd.Series(qids, dtype=str), **values})
    return means, table
