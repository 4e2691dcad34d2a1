"""Documents, queries and qrels by ir_datasets id: ``"irds:beir/scifact/test"`` (the optional extra
``pip install 'cutext[irds]'``, or ``pip install ir_datasets``).

ir_datasets (MacAvaney et al., SIGIR 2021) downloads and caches each collection itself; here its records
become the frames cutext reads: documents ``(doc_id, text)`` (a record's ``default_text()``: BEIR's title
and text joined, as Anserini indexes them), queries ``(query_id, query)`` and qrels
``(query_id, doc_id, relevance)``.  Nothing here imports ir_datasets until an ``irds:`` id is read.
"""
from __future__ import annotations

import pandas as pd

__all__ = ["PREFIX", "is_irds", "irds_dataset", "irds_docs", "irds_queries", "irds_qrels"]

PREFIX = "irds:"


def is_irds(path) -> bool:
    """Whether ``path`` is an ``irds:<id>`` string."""
    return isinstance(path, str) and path.startswith(PREFIX)


def irds_dataset(path: str, has: str):
    """The ir_datasets dataset of ``"irds:<id>"``, checked to provide ``has`` (``"docs"``, ``"queries"``,
    ``"qrels"``).

    Raises
    ------
    RuntimeError
        ir_datasets is not installed (the message gives the pip command).
    ValueError
        An id ir_datasets does not know, or a dataset without ``has`` (the message names both).
    """
    name = path[len(PREFIX):]
    try:
        import ir_datasets
    except ImportError:
        raise RuntimeError(f"{path!r} is an ir_datasets id, and the ir_datasets package is not installed: "
                           "pip install ir_datasets (or pip install 'cutext[irds]')") from None
    try:
        ds = ir_datasets.load(name)
    except KeyError:
        raise ValueError(f"{path!r}: ir_datasets has no dataset {name!r} (its ids are listed at "
                         "https://ir-datasets.com)") from None
    if not getattr(ds, f"has_{has}")():
        raise ValueError(f"{path!r}: this ir_datasets dataset has no {has} (a corpus id such as 'beir/scifact' "
                         "has documents; a split such as 'beir/scifact/test' has queries and qrels)")
    return ds


def _text(record) -> str:
    if hasattr(record, "default_text"):
        return record.default_text()
    return record.text


def irds_docs(path: str) -> pd.DataFrame:
    """The documents of ``"irds:<id>"``: a pandas DataFrame ``doc_id`` (str), ``text`` (str), in the
    dataset's order; read it with ``text_column="text", id_column="doc_id"``."""
    ds = irds_dataset(path, "docs")
    rows = [(d.doc_id, _text(d)) for d in ds.docs_iter()]
    return pd.DataFrame(rows, columns=["doc_id", "text"], dtype=str)


def irds_queries(path: str) -> pd.DataFrame:
    """The queries of ``"irds:<id>"``: ``query_id`` (str), ``query`` (str), in the dataset's order."""
    ds = irds_dataset(path, "queries")
    rows = [(q.query_id, " ".join(_text(q).split())) for q in ds.queries_iter()]
    return pd.DataFrame(rows, columns=["query_id", "query"], dtype=str)


def irds_qrels(path: str) -> pd.DataFrame:
    """The qrels of ``"irds:<id>"``: ``query_id`` (str), ``doc_id`` (str), ``relevance`` (int64)."""
    ds = irds_dataset(path, "qrels")
    rows = [(q.query_id, q.doc_id, int(q.relevance)) for q in ds.qrels_iter()]
    df = pd.DataFrame(rows, columns=["query_id", "doc_id", "relevance"])
    return df.astype({"query_id": str, "doc_id": str, "relevance": "int64"})
