"""TREC and BEIR file formats: topics, queries, qrels and runs, read and written in one place.

Every reader of a retrieval file lives here, beside the others (the command line's ``search`` and
``evaluate``, :mod:`cutext.pipelines.evaluate` and the notebooks use these); the corpus readers are
``cutext.stages.readers.files`` and the ARPA reader is ``cutext.stages.readers.arpa``. Pure Python, numpy and pandas
(no GPU imports): these files are small (queries x depth).

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
* :func:`read_smart_queries` / :func:`read_smart_qrels` -- the SMART collections' ``.I`` queries and
  relevance lists ``qid docid 0 0`` (CISI, CACM's originals, Cranfield, MED).
* :func:`read_queries` -- any of the query formats above, or plain lines, sniffed from the
  content (the ``search`` command's ``--queries``); :func:`read_qrels` -- any of the qrels layouts
  (the ``evaluate`` command's qrels).  Both take an ``irds:<id>`` of ir_datasets where it is installed.

Runs and qrels given as DataFrames or ``{qid: {docid: value}}`` dicts are brought to one frame
form (``query_id: str, doc_id: str, score | relevance: float64``) by :func:`_coerce_run` and
:func:`_coerce_qrels`, which the run writer and :func:`cutext.pipelines.evaluate.evaluate` share.
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

from cutext.stages.readers.irds import irds_qrels, irds_queries, is_irds
from cutext.stages.readers.smart import QUERY_TEXT_FIELDS, check_fields, is_smart, parse_smart, smart_texts
from cutext.stages.runtime.output import check_output_file

__all__ = [
    "read_trec_topics",
    "read_trec_qrels",
    "read_trec_run",
    "write_trec_run",
    "read_beir_queries",
    "read_beir_qrels",
    "read_queries",
    "read_qrels",
    "read_smart_queries",
    "read_smart_qrels",
    "anserini_scores",
]

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


def _parse_grade(path, lineno: int, token: str, what: str) -> int:
    """A relevance grade: an integer, or a number written with a fraction that is whole (``0.000000``, ``2.0``:
    SMART-era and some converted qrels); trec_eval keeps grades as integers."""
    try:
        return int(token)
    except ValueError:
        pass
    value = _parse_float(path, lineno, token, what)
    if not value.is_integer():
        raise _fail(path, lineno, f"{what} {token!r} is not a whole number (trec_eval's grades are integers)")
    return int(value)


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
        negative, written ``2`` or ``2.000000``); one row per line, in file order. The ``iter`` column
        is dropped.

    Raises
    ------
    ValueError
        Naming the file and 1-based line: a line without exactly 4 fields, a relevance that is
        not a whole number, or a SMART relevance list ``qid docid 0 0`` (:func:`read_smart_qrels`).
    FileNotFoundError
        ``path`` does not exist.
    """
    rows = []
    for lineno, line in _data_lines(path):
        parts = line.split()
        if len(parts) != 4:
            raise _fail(path, lineno, "expected 4 whitespace-separated fields "
                        f"'qid iter docid rel', got {len(parts)}: {line.strip()!r}")
        rows.append((lineno, parts))
    if _smart_list(rows):
        raise _fail(path, rows[0][0], "a SMART relevance list 'qid docid 0 0' (every document id of TREC's third "
                    "column would be 0), not TREC qrels 'qid iter docid rel': read it with read_qrels or "
                    "read_smart_qrels")
    return _qrels_frame([p[0] for _, p in rows], [p[2] for _, p in rows],
                        [_parse_grade(path, lineno, p[3], "relevance") for lineno, p in rows])


def _smart_list(rows: list) -> bool:
    """Whether 4-field qrels lines are a SMART-era relevance list ``qid docid 0 0`` (CISI.REL, CACM's
    qrels.text): the second field varies and the third is 0 on every line (in TREC's layout, the document id)."""
    def zero(token: str) -> bool:
        try:
            return float(token) == 0
        except ValueError:
            return False

    return len({p[1] for _, p in rows}) > 1 and all(zero(p[2]) for _, p in rows)


def read_smart_qrels(path: str | os.PathLike) -> pd.DataFrame:
    """Read a SMART-era relevance list: ``qid docid ...`` a line, whitespace separated, every listed pair
    relevant (CISI.REL ``1 28 0 0.000000``, CACM's ``qrels.text`` ``01 1410 0 0``; the fields after the two
    ids are not grades there: they are 0 on every line).

    Parameters
    ----------
    path : str or os.PathLike
        Relevance file (local path or fsspec URL; compression inferred from the suffix).

    Returns
    -------
    pandas.DataFrame
        Columns ``query_id`` (str), ``doc_id`` (str), ``relevance`` (int64, 1), in file order, a pair listed
        twice kept once.  Numeric ids lose their leading zeros (``01`` is ``"1"``), as the SMART records'
        ``.I`` numbers do (:func:`read_smart_queries`, the ``smart`` corpus format).

    Raises
    ------
    ValueError
        Naming the file and 1-based line: a line with fewer than 2 fields.
    FileNotFoundError
        ``path`` does not exist.
    """
    qids: list[str] = []
    dids: list[str] = []
    seen: set = set()
    for lineno, line in _data_lines(path):
        parts = line.split()
        if len(parts) < 2:
            raise _fail(path, lineno, f"expected 'qid docid ...', got {len(parts)} field(s): {line.strip()!r}")
        pair = (_smart_id(parts[0]), _smart_id(parts[1]))
        if pair not in seen:
            seen.add(pair)
            qids.append(pair[0])
            dids.append(pair[1])
    return _qrels_frame(qids, dids, [1] * len(qids))


def _smart_id(token: str) -> str:
    return str(int(token)) if token.isdigit() else token


def read_qrels(path: str | os.PathLike) -> pd.DataFrame:
    """Read qrels of any layout, told apart by content: an ``irds:<id>`` of ir_datasets; BEIR's
    ``query-id corpus-id score`` TSV (a header or 3 fields); TREC's ``qid iter docid rel``; a SMART-era
    relevance list ``qid docid 0 0`` (:func:`read_smart_qrels`: 4 fields whose second varies and whose third
    is 0 on every line).  Grades may be written ``2`` or ``2.000000``.  This is how the ``evaluate`` command
    reads its qrels.

    Returns
    -------
    pandas.DataFrame
        Columns ``query_id`` (str), ``doc_id`` (str), ``relevance`` (int64), in file order.

    Raises
    ------
    ValueError
        A malformed file (see the readers above), naming the file and line; a grade that is not a whole number.
    FileNotFoundError
        ``path`` does not exist.
    RuntimeError
        An ``irds:`` id without the ir_datasets package installed (:mod:`cutext.stages.readers.irds`).
    """
    if is_irds(path):
        return irds_qrels(path)
    lines = iter(_data_lines(path))
    head = next(lines, None)
    if head is not None and len(head[1].split()) == 4:
        rows = [(head[0], head[1].split()), *((n, x.split()) for n, x in lines)]
        if all(len(p) == 4 for _, p in rows) and _smart_list(rows):
            return read_smart_qrels(path)
    return read_beir_qrels(path)


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


def anserini_scores(query_id, score) -> np.ndarray:
    """The scores Anserini prints for ranked hits: its ``ScoreTiesAdjusterReranker`` and ``%.6f``.

    Down each query's ranking, a score (float32) is rounded to 4 decimals (``Math.round(s * 10000) /
    10000``, half up, back to float32); a hit whose rounded score is within 1e-4 of the one above it (as
    adjusted) takes ``d * 1e-6`` off, ``d`` counting such hits in a row, so the printed scores strictly
    decrease in rank order and trec_eval keeps that order; the result is read back from 6 decimals.

    Parameters
    ----------
    query_id : array-like, shape (n,)
        Rows by query, each query's rows in rank order (a search result's order).
    score : array-like of float, shape (n,)

    Returns
    -------
    numpy float64 array, shape (n,)
    """
    q = np.asarray(query_id)
    s = np.asarray(score, np.float64).astype(np.float32).astype(np.float64)
    rounded = (np.floor(s * 10000.0 + 0.5) / 10000.0).astype(np.float32)
    out = np.empty(len(rounded), np.float32)
    step, gap = np.float32(1e-6), np.float32(1e-4)
    dup = 0
    for i in range(len(rounded)):
        if i and q[i] == q[i - 1] and out[i - 1] - rounded[i] <= gap:
            dup += 1
            out[i] = rounded[i] - np.float32(dup) * step
        else:
            dup = 0
            out[i] = rounded[i]
    return np.array([float(f"{v:.6f}") for v in out.astype(np.float64).tolist()])


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
        (numeric), one row per retrieved document.  A search result of
        :meth:`cutext.pipelines.BM25Index.search` (it has a ``source_id`` column) is written
        with the source id as the docno (its ``doc_id`` is the index's own number).
    path : str or os.PathLike
        Local output path; its directory must exist.
    tag : str, default "cutext"
        Run tag for the last column; no whitespace.

    Raises
    ------
    ValueError
        Missing columns, NaN scores, empty or whitespace-containing ids or tag, or a
        duplicate (query_id, doc_id) pair.
    OutputDirectoryError (FileExistsError)
        ``path`` is a directory or lies inside a cutext output (an index or a model)
        (:func:`cutext.stages.runtime.output.check_output_file`).
    """
    if not tag or re.search(r"\s", tag):
        raise ValueError(f"run tag must be non-empty and contain no whitespace, got {tag!r}")
    check_output_file(path)
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
        rels.append(_parse_grade(path, lineno, parts[2], "score"))
    return _qrels_frame(qids, dids, rels)

def read_queries(path: str | os.PathLike, topic_field: str = "title") -> pd.DataFrame:
    """Queries from TREC SGML topics, BEIR jsonl / TSV, or plain lines, sniffed from the content.

    An ``irds:<id>`` is the queries of that ir_datasets dataset (where the package is installed). Else
    the first 4096 characters decide: a first non-blank line ``.I <number>`` means SMART queries
    (:func:`read_smart_queries`); a ``<top>`` or ``<DOC>`` tag means TREC topics
    (:func:`read_trec_topics`); a first line starting with ``{`` or holding a tab means BEIR
    queries (:func:`read_beir_queries`); anything else is one query per non-blank line, with ids
    ``"1"``, ``"2"``, ... in file order. This is how the ``search`` command reads ``--queries``.

    Parameters
    ----------
    path : str or os.PathLike
        Local queries file; a ``.gz`` suffix is decompressed.
    topic_field : {"title", "desc", "title+desc"}, default "title"
        Field of classic ``<top>`` topics that becomes the query (see :func:`read_trec_topics`).

    Returns
    -------
    pandas.DataFrame
        Columns ``query_id`` (str) and ``query`` (str), in file order.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        A malformed topics or BEIR file (see those readers), or ``topic_field`` not one of the
        choices for a topics file.
    """
    import gzip

    if is_irds(path):
        return irds_queries(path)
    p = str(path)
    opener = gzip.open if p.endswith(".gz") else open
    with opener(p, "rt", encoding="utf-8") as fh:
        head = fh.read(4096)
    if is_smart(head):
        return read_smart_queries(p)
    if "<top>" in head or "<DOC>" in head or "<doc>" in head:
        return read_trec_topics(p, field=topic_field)
    first = head.lstrip().split("\n", 1)[0]
    if first.startswith("{") or "\t" in first:
        return read_beir_queries(p)
    with opener(p, "rt", encoding="utf-8") as fh:
        lines = [line.strip() for line in fh if line.strip()]
    return pd.DataFrame({"query_id": [str(i + 1) for i in range(len(lines))], "query": lines})


def read_smart_queries(path: str | os.PathLike, fields=QUERY_TEXT_FIELDS) -> pd.DataFrame:
    """Read SMART queries (``.I`` records: CISI.QRY, CACM's query.text, cran.qry, MED.QRY;
    :mod:`cutext.stages.readers.smart`).

    Parameters
    ----------
    path : str or os.PathLike
        Queries file (local path or fsspec URL; compression inferred from the suffix).
    fields : tuple of str, default ("T", "W")
        The fields whose text is the query, by letter (``.A`` authors, ``.B`` source and ``.N`` notes of
        CACM's and CISI's queries are not).

    Returns
    -------
    pandas.DataFrame
        Columns ``query_id`` (str: the ``.I`` number without leading zeros) and ``query`` (str,
        whitespace collapsed), in file order.

    Raises
    ------
    ValueError
        Naming the file and line: a malformed SMART file (:func:`cutext.stages.readers.smart.parse_smart`),
        a query with no text in ``fields``, or an unknown field letter.
    FileNotFoundError
        ``path`` does not exist.
    """
    fields = check_fields(fields, "fields")
    starts: list = []
    records = parse_smart(_read_text(path), os.fspath(path), starts)
    texts = [_collapse(t) for t in smart_texts(records, fields)]
    for (rid, _), text, start in zip(records, texts, starts, strict=True):
        if not text:
            raise _fail(path, start + 1, f"query {rid!r} has no text in its {'/'.join('.' + f for f in fields)} "
                        "field(s)")
    return _queries_frame([rid for rid, _ in records], texts)


# --------------------------------------------------------------------------------------
# runs and qrels as frames (shared with cutext.pipelines.evaluate)
# --------------------------------------------------------------------------------------
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
        if value == "score" and "source_id" in obj.columns:
            # a search result (BM25Index.search): its documents are named by the caller's id,
            # ``doc_id`` there is the index's own number
            obj = obj.drop(columns=["doc_id"], errors="ignore").rename(columns={"source_id": "doc_id"})
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
