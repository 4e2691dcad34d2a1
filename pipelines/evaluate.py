"""Retrieval evaluation: trec_eval-compatible metrics (and the TREC / BEIR readers, re-exported).

This module is pure Python, numpy and pandas (no GPU imports) so that it runs the same
on every backend: runs produced on the GPU are small (queries x depth) and are scored here.

Readers
-------
The readers and the run writer live in :mod:`cutext.pipelines.trec`, beside every other reader
of a retrieval file; they are re-exported here, so ``from cutext.pipelines.evaluate import
read_trec_qrels`` keeps working:

* :func:`read_trec_topics` -- TREC SGML topics: ``<top>`` (classic ad hoc) and ``<DOC>`` (CACM).
* :func:`read_trec_qrels` -- ``qid iter docid rel``.
* :func:`read_trec_run` / :func:`write_trec_run` -- ``qid Q0 docid rank score tag``.
* :func:`read_beir_queries` -- BEIR ``queries.jsonl`` or ``qid<TAB>text`` TSV.
* :func:`read_beir_qrels` -- BEIR ``query-id corpus-id score`` TSV or TREC qrels (sniffed).
* :func:`read_qrels` -- those, a SMART relevance list ``qid docid 0 0`` or an ``irds:`` id (sniffed).

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

import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from cutext.pipelines._cli import Command
from cutext.pipelines.trec import (
    _coerce_qrels,
    _coerce_run,
    read_beir_qrels,
    read_beir_queries,
    read_qrels,
    read_trec_qrels,
    read_trec_run,
    read_trec_topics,
    write_trec_run,
)

__all__ = [
    "read_trec_topics",
    "read_trec_qrels",
    "read_trec_run",
    "write_trec_run",
    "read_beir_queries",
    "read_beir_qrels",
    "read_qrels",
    "evaluate",
    "DEFAULT_METRICS",
]

#: Metrics computed by :func:`evaluate` when none are named.
DEFAULT_METRICS: tuple[str, ...] = ("map", "P@30", "ndcg@10")


# --------------------------------------------------------------------------------------
# evaluation
# --------------------------------------------------------------------------------------
_CUTOFF_PATTERNS = (
    (re.compile(r"^(p|ndcg|recall)@(\d+)$"), None),
    (re.compile(r"^p_(\d+)$"), "p"),  # trec_eval spellings
    (re.compile(r"^ndcg_cut_(\d+)$"), "ndcg"),
    (re.compile(r"^recall_(\d+)$"), "recall"),
    (re.compile(r"^r@(\d+)$"), "recall"),  # ir_measures' R@k
)
_CANONICAL = {"p": "P", "ndcg": "ndcg", "recall": "recall"}


def _parse_metric(name: str) -> tuple[str, int | None, str]:
    """Map a metric name to ``(family, cutoff, canonical name)``."""
    if not isinstance(name, str):
        raise ValueError(f"metric names must be strings, got {name!r}")
    key = name.strip().lower()
    if key in ("map", "ap"):  # AP: ir_measures' name of trec_eval's map
        return "map", None, "map"
    if key in ("mrr", "recip_rank", "rr"):  # RR: ir_measures' name
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
        "(trec_eval spellings 'P_k', 'ndcg_cut_k', 'recall_k' and ir_measures names 'AP', 'RR', 'nDCG@k', "
        "'R@k' are accepted too)")



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
        per retrieved document (other columns are ignored; a search result of
        :meth:`cutext.pipelines.BM25Index.search`, which has a ``source_id`` column, is
        compared by its source id, the id the qrels use); or a pytrec_eval-style dict
        ``{query_id: {doc_id: score}}``. Ids of any type are compared as ``str(id)``.
    qrels : pandas.DataFrame or dict
        DataFrame with columns ``query_id``, ``doc_id``, ``relevance`` (numeric, graded),
        e.g. from :func:`read_trec_qrels`; or a dict ``{query_id: {doc_id: relevance}}``.
    metrics : str or iterable of str, default ("map", "P@30", "ndcg@10")
        Metric names, case-insensitive: ``"map"``, ``"mrr"`` (or ``"recip_rank"``),
        ``"ndcg"``, and ``"P@k"``, ``"ndcg@k"``, ``"recall@k"`` for any integer k >= 1. The
        trec_eval spellings ``"P_k"``, ``"ndcg_cut_k"``, ``"recall_k"`` are accepted, and the
        ir_measures names of the same measures: ``"AP"`` (map), ``"RR"`` (mrr), ``"nDCG"``,
        ``"nDCG@k"``, ``"P@k"``, ``"R@k"`` (recall@k), each equal to trec_eval's value.
    per_query : bool, default False
        Also return the per-query values.

    Returns
    -------
    means : dict of str to float
        Mean over the evaluated queries, keyed by canonical metric name (``"map"``,
        ``"mrr"``, ``"ndcg"``, ``"P@k"``, ``"ndcg@k"``, ``"recall@k"``) in the order given;
        e.g. ``"MAP"``, ``"AP"`` and ``"P_30"`` come back as ``"map"``, ``"map"`` and ``"P@30"``,
        ``"R@1000"`` as ``"recall@1000"``.
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
    parsed = _parse_metrics(metrics)
    run_df, qrels_df, qids = _shared_queries(run, qrels)
    n_q = len(qids)
    ranked = _ranked_run(run_df, qrels_df, qids)
    ideal = _ideal_ranking(qrels_df, qids)
    values = {canonical: _metric_values(family, k, ranked, ideal, n_q) for canonical, (family, k) in parsed.items()}
    means = {name: float(np.mean(v)) for name, v in values.items()}
    if not per_query:
        return means
    table = pd.DataFrame({"query_id": pd.Series(qids, dtype=str), **values})
    return means, table


def _parse_metrics(metrics: str | Iterable[str]) -> dict[str, tuple[str, int | None]]:
    """``{canonical name: (family, cutoff)}`` of the requested metrics, in the order given, each once.

    Raises
    ------
    ValueError
        An unknown metric or a cutoff < 1 (:func:`_parse_metric`); no metrics.
    """
    if isinstance(metrics, str):
        metrics = (metrics,)
    parsed: dict[str, tuple[str, int | None]] = {}
    for name in metrics:
        family, k, canonical = _parse_metric(name)
        parsed.setdefault(canonical, (family, k))
    if not parsed:
        raise ValueError("no metrics requested")
    return parsed


def _shared_queries(run, qrels) -> tuple[pd.DataFrame, pd.DataFrame, list]:
    """The run and the qrels as checked frames, and the sorted query ids they share (those evaluated).

    Raises
    ------
    ValueError
        A malformed run or qrels (:func:`cutext.pipelines.trec._coerce_run`), an empty one, or no
        shared query id.
    """
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
    return run_df, qrels_df, qids


def _ranked_run(run_df: pd.DataFrame, qrels_df: pd.DataFrame, qids: list) -> dict[str, np.ndarray]:
    """The run rows of the evaluated queries in trec_eval order, as arrays of one entry a row:
    ``q`` (query code, index in ``qids``), ``rank`` (1-based, float64), ``is_rel`` (0/1), ``gain``
    (the judged relevance, >= 0) and ``discount`` (log2(rank + 1))."""
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
    return {"q": q, "rank": rank, "is_rel": is_rel, "gain": gain, "discount": discount}


def _ideal_ranking(qrels_df: pd.DataFrame, qids: list) -> dict[str, np.ndarray]:
    """The judgments of the evaluated queries: ``num_rel`` (R per query, (n_q,)) and the ideal ranking
    of gains, one entry a judgment: ``iq`` (query code), ``igain``, ``irank`` (1-based) and ``idiscount``."""
    n_q = len(qids)
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
    return {"iq": iq, "igain": igain, "irank": irank, "idiscount": idiscount, "num_rel": num_rel}


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``num / den``, 0 where ``den`` is 0."""
    out = np.zeros(len(num))
    np.divide(num, den, out=out, where=den > 0)
    return out


def _metric_values(family: str, k: int | None, ranked: dict, ideal: dict, n_q: int) -> np.ndarray:
    """The per-query values (n_q,) of one metric (``family`` at cutoff ``k``, None: no cutoff), from
    :func:`_ranked_run` and :func:`_ideal_ranking`; the formulas of :func:`evaluate`."""
    q, rank, is_rel = ranked["q"], ranked["rank"], ranked["is_rel"]
    num_rel = ideal["num_rel"]

    def per_q(weights: np.ndarray, codes: np.ndarray = q) -> np.ndarray:
        return np.bincount(codes, weights=weights, minlength=n_q)

    top = np.ones_like(rank, dtype=bool) if k is None else rank <= k
    if family == "map":
        rel_so_far = pd.Series(is_rel).groupby(q).cumsum().to_numpy()
        return _ratio(per_q(is_rel * rel_so_far / rank), num_rel)
    if family == "p":
        return per_q(is_rel * top) / k
    if family == "recall":
        return _ratio(per_q(is_rel * top), num_rel)
    if family == "ndcg":
        irank = ideal["irank"]
        itop = np.ones_like(irank, dtype=bool) if k is None else irank <= k
        dcg = per_q(np.where(top, ranked["gain"] / ranked["discount"], 0.0))
        idcg = per_q(np.where(itop, ideal["igain"] / ideal["idiscount"], 0.0), ideal["iq"])
        return _ratio(dcg, idcg)
    # mrr
    first = np.full(n_q, np.inf)
    np.minimum.at(first, q[is_rel > 0], rank[is_rel > 0])
    return np.where(np.isfinite(first), 1.0 / first, 0.0)


# --------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------
def _cli_main(args, kw) -> int:
    """``evaluate RUN QRELS ...``: print ``metric<TAB>value`` lines (``--per-query``: the table first)."""
    res = evaluate(read_trec_run(kw.pop("run")), read_qrels(kw.pop("qrels")), **kw)
    if kw.get("per_query"):
        res, per = res
        print(per.to_string(index=False))
    for k, v in res.items():
        print(f"{k}\t{v:.4f}")
    return 0


# the subcommand of this module; its options are the keywords of evaluate()
COMMANDS = (
    Command("evaluate", evaluate, _cli_main, help="score a TREC run against qrels (trec_eval conventions)",
            description="MAP, P@k, nDCG@k, recall@k, MRR of a run, as trec_eval computes them. The options are "
                        "the keywords of cutext.pipelines.evaluate.evaluate.",
            positional={"run": dict(help="TREC run file"),
                        "qrels": dict(help="qrels: TREC (qid iter docid rel), BEIR TSV, a SMART relevance list "
                                           "(qid docid 0 0: CISI.REL, CACM's qrels.text), or irds:<id>")},
            options={"metrics": dict(nargs="+")}, files=("run", "qrels")),
)


def add_cli(sub) -> None:
    """Register ``evaluate`` (score a TREC run against qrels) with the ``python -m cutext.pipelines``
    command line."""
    for command in COMMANDS:
        command.add_to(sub)
