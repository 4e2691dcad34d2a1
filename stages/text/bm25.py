"""BM25 stage: a weight for every (doc, term) posting.

Notation: ``N`` documents, ``df_t`` documents containing term t, ``tf_td`` occurrences of t in d,
``L_d`` length of d (tokens after the tokenizer's filters), ``avgdl`` mean ``L_d``, natural logs.
Let ``K_d = k1 * (1 - b + b * L_d / avgdl)``.

=============  ==============================================  =======================================
variant        idf_t                                           weight w_td
=============  ==============================================  =======================================
``robertson``  ln(N / df_t)                                    idf * (k1 + 1) tf / (K_d + tf)
``lucene``     ln(1 + (N - df_t + 0.5) / (df_t + 0.5))         idf * tf / (K_d + tf)
``atire``      ln(N / df_t)                                    idf * (k1 + 1) tf / (K_d + tf)
``bm25l``      ln((N + 1) / (df_t + 0.5))                      idf * (k1 + 1)(c + delta) / (k1 + c + delta),
                                                               c = tf / (1 - b + b L_d / avgdl)
``bm25+``      ln((N + 1) / df_t)                              idf * ((k1 + 1) tf / (K_d + tf) + delta)
=============  ==============================================  =======================================

``robertson`` is Wakatsuki et al.'s Eq. 1 as printed (Okapi BM25 with idf ln(N/df)); it is the same
formula as ATIRE's (Kamphuis et al., ECIR 2020, Table 1), and differs from the Robertson-Sparck
Jones idf that bm25s calls "robertson".  ``lucene`` is Lucene >= 8 (no ``k1 + 1`` factor).  For
``bm25l`` and ``bm25+`` a term absent from a document still scores ``w0_t = w(tf=0)``; postings
store the full weight ``w_td`` and the vocabulary stores ``w0_t``, and search adds ``w0`` for
absent query terms exactly (see :class:`cutext.pipelines.bm25.BM25Index`).

Weights are computed in float64 and stored as float32.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from cutext.kernels.backend import array_module, values
from cutext.stages.runtime.params import number

VARIANTS = ("robertson", "lucene", "atire", "bm25l", "bm25+")
DEFAULT_DELTA = {"bm25l": 0.5, "bm25+": 1.0}


def check_params(variant: str, k1: float, b: float, delta: float | None) -> float:
    """Validate BM25 parameters; returns the delta in effect (0 for variants without one).

    Raises
    ------
    ValueError
        Unknown variant; ``k1``, ``b`` or ``delta`` not a finite number, ``k1 < 0``, ``b`` outside
        [0, 1] or ``delta < 0``.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown BM25 variant {variant!r}; choose from {VARIANTS}")

    number("k1", k1, lo=0)
    number("b", b, lo=0, hi=1)
    if delta is None:
        delta = DEFAULT_DELTA.get(variant, 0.0)
    return number("delta", delta, lo=0)


def idf(df, n_docs: int, variant: str):
    """idf per term (table above); float64 array of df's module, shape of ``df``.

    Entries with ``df == 0`` (the unknown id, unseen terms) are 0.
    """
    xp = array_module(df)
    d = df.astype(np.float64)
    n = float(n_docs)
    safe = xp.where(d > 0, d, 1.0)
    if variant == "lucene":
        out = xp.log1p((n - safe + 0.5) / (safe + 0.5))
    elif variant in ("robertson", "atire"):
        out = xp.log(n / safe)
    elif variant == "bm25l":
        out = xp.log((n + 1.0) / (safe + 0.5))
    elif variant == "bm25+":
        out = xp.log((n + 1.0) / safe)
    else:
        raise ValueError(variant)
    return xp.where(d > 0, out, 0.0)


def tf_component(tf, dl, avgdl: float, variant: str, k1: float, b: float, delta: float):
    """Term-frequency part of the weight (table above), float64, elementwise."""
    xp = array_module(tf)
    tf = tf.astype(np.float64)
    norm = (1.0 - b) + b * (dl.astype(np.float64) / avgdl) if avgdl > 0 else xp.ones_like(tf)
    if variant == "lucene":
        return tf / (k1 * norm + tf)
    if variant in ("robertson", "atire"):
        return (k1 + 1.0) * tf / (k1 * norm + tf)
    if variant == "bm25l":
        c = tf / norm
        return (k1 + 1.0) * (c + delta) / (k1 + c + delta)
    if variant == "bm25+":
        return (k1 + 1.0) * tf / (k1 * norm + tf) + delta
    raise ValueError(variant)


def absent_weight(idf_t, variant: str, k1: float, delta: float):
    """``w0_t``: the weight a document without term t gets (nonzero for bm25l and bm25+)."""
    if variant == "bm25l":
        return idf_t * (k1 + 1.0) * delta / (k1 + delta)
    if variant == "bm25+":
        return idf_t * delta
    return idf_t * 0.0


class WeightPartition:
    """Picklable partition function adding ``weight: float32`` to ``(term_id, doc_id, tf, dl)`` rows."""

    def __init__(self, idf_t: np.ndarray, avgdl: float, variant: str, k1: float, b: float, delta: float):
        self.idf_t = idf_t
        self.avgdl = float(avgdl)
        self.variant, self.k1, self.b, self.delta = variant, float(k1), float(b), float(delta)

    def weights(self, t, tf, dl):
        """float32 weights of rows given as arrays (numpy or cupy) of term ids, tf and dl."""
        xp = array_module(t)
        idf_t = xp.asarray(self.idf_t)
        w = idf_t[t] * tf_component(tf, dl, self.avgdl, self.variant, self.k1, self.b, self.delta)
        return w.astype(np.float32)

    def __call__(self, df):
        w = self.weights(values(df["term_id"]), values(df["tf"]), values(df["dl"]))
        out = df.copy(deep=False)  # the new column only: no copy of the range's other columns
        out["weight"] = w
        return out


def corpus_weights(df, n_docs: int, n_tokens: int, variant: str, k1: float, b: float, delta) -> WeightPartition:
    """The weight function of a corpus from its global statistics (Eq. 1): checked parameters, ``avgdl =
    n_tokens / n_docs`` (float64), idf per term id and the weights of absent terms.

    Parameters
    ----------
    df : int64 array, shape (V + 1,)
        Documents per term id (``df[0] = 0``).
    n_docs, n_tokens : int
    variant, k1, b, delta
        As :func:`check_params` (``delta`` None: the variant's default).

    Returns
    -------
    WeightPartition
        With ``idf_t`` (float64, (V + 1,)), ``avgdl``, ``delta`` and ``w0`` (float64, (V + 1,), the weight
        of an absent term) set.

    Raises
    ------
    ValueError
        Bad parameters, or no document has a token (avgdl = 0).
    """
    delta = check_params(variant, k1, b, delta)
    if n_tokens == 0 or n_docs == 0:
        raise ValueError(f"no document has a token ({n_docs} documents): BM25 needs avgdl > 0")
    idf_t = idf(df, n_docs, variant)
    fn = WeightPartition(idf_t, n_tokens / n_docs, variant, k1, b, delta)
    fn.w0 = absent_weight(idf_t, variant, k1, delta)
    return fn


def weights_meta(counts_meta):
    meta = counts_meta.copy()
    meta["weight"] = np.zeros(0, np.float32) if isinstance(meta, pd.DataFrame) else meta["tf"].astype(np.float32)
    return meta
