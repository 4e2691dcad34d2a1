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

BM25F (several text fields, each weighted and length-normalised on its own, then saturated once) is
:class:`FieldWeights` for the variants without a constant term (lucene, robertson, atire).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from cutext.kernels.backend import array_module, values
from cutext.stages.runtime.params import number, param

VARIANTS = ("robertson", "lucene", "atire", "bm25l", "bm25+")
DEFAULT_DELTA = {"bm25l": 0.5, "bm25+": 1.0}
NORMS = ("exact", "lucene")

# Lucene's SmallFloat: lengths below this are stored as they are, larger ones keep 4 significant bits
_LUCENE_FREE_VALUES = 24


def lucene_length(dl):
    """Document lengths as Lucene stores them: ``SmallFloat.byte4ToInt(SmallFloat.intToByte4(dl))``.

    A length below 24 is kept; a larger one keeps the 4 most significant bits of ``dl - 24`` (rounded
    down), so 1,000 reads as 984 (Lucene 9 ``SmallFloat``, the one-byte norm of ``BM25Similarity``).

    Parameters
    ----------
    dl : int array (numpy or cupy), values >= 0 and < 2**31

    Returns
    -------
    int64 array of the same module and shape.
    """
    xp = array_module(dl)
    d = xp.asarray(dl).astype(np.int64)
    x = xp.maximum(d - _LUCENE_FREE_VALUES, 0)
    bits = xp.zeros(x.shape, np.int64)  # the bit length of x, by halving (int64: at most 31 steps)
    y = x.copy()
    while bool((y > 0).any()):
        bits += y > 0
        y >>= 1
    shift = xp.maximum(bits - 4, 0)
    return xp.where(d < _LUCENE_FREE_VALUES, d, _LUCENE_FREE_VALUES + ((x >> shift) << shift))


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


def lucene_idf(df, n_docs: int):
    """Lucene 9's ``BM25Similarity.idf``: ``(float) Math.log(1 + (N - df + 0.5) / (df + 0.5))``, the log of
    the float64 sum (not ``log1p``) rounded to float32; returned as float64 of df's module (0 where
    ``df == 0``)."""
    xp = array_module(df)
    d = df.astype(np.float64)
    safe = xp.where(d > 0, d, 1.0)
    out = xp.log(1.0 + (float(n_docs) - safe + 0.5) / (safe + 0.5)).astype(np.float32).astype(np.float64)
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


def check_norms(norms, variant: str) -> str:
    """``norms`` if it is one of :data:`NORMS` and fits ``variant``.

    Raises
    ------
    ValueError
        Another value, or ``"lucene"`` with a variant other than ``"lucene"`` (Lucene's norms belong to its
        ``BM25Similarity``).
    """
    if norms not in NORMS:
        raise ValueError(f"{param('norms', bare=True)} must be one of {list(NORMS)}, got {norms!r}")
    if norms == "lucene" and variant != "lucene":
        raise ValueError(f"{param('norms', 'lucene')} scores as Lucene's BM25Similarity, {param('variant', 'lucene')}; "
                         f"got {param('variant', variant)} (use {param('norms', 'exact')})")
    return norms


def _decoded_lengths() -> np.ndarray:
    """The 256 lengths a norm byte decodes to (``SmallFloat.byte4ToInt`` of bytes 0..255), int64 ascending:
    0..23, then 24 plus the 232 values of SmallFloat's 4-bit floats (3 mantissa bits, an exponent)."""
    code = np.arange(232, dtype=np.int64)
    shift = (code >> 3) - 1
    int4 = np.where(shift < 0, code & 7, ((code & 7) | 8) << np.maximum(shift, 0))
    return np.concatenate([np.arange(_LUCENE_FREE_VALUES), _LUCENE_FREE_VALUES + int4])


LUCENE_LENGTHS = _decoded_lengths()


def lucene_norm_cache(avgdl: float, k1: float, b: float) -> np.ndarray:
    """``BM25Similarity``'s per-norm cache, float32 (256,): ``1 / (k1 * ((1 - b) + b * len / avgdl))`` for
    the 256 decoded lengths (:data:`LUCENE_LENGTHS`), every operation in float32 as Lucene 9 computes it,
    ``avgdl`` rounded to float32 first."""
    lengths = LUCENE_LENGTHS.astype(np.float32)
    k1, b, avg = np.float32(k1), np.float32(b), np.float32(avgdl)
    return (np.float32(1) / (k1 * ((np.float32(1) - b) + b * lengths / avg))).astype(np.float32)


class WeightPartition:
    """Picklable partition function adding ``weight: float32`` to ``(term_id, doc_id, tf, dl)`` rows.

    With ``norms="lucene"`` (variant lucene) a weight is Lucene 9's ``BM25Scorer.score`` in float32: the idf
    rounded to float32, the length through :func:`lucene_length` and :func:`lucene_norm_cache`, and
    ``w = idf - idf / (1 + tf * cache[len])``.
    """

    def __init__(self, idf_t: np.ndarray, avgdl: float, variant: str, k1: float, b: float, delta: float,
                 norms: str = "exact"):
        self.idf_t = idf_t
        self.avgdl = float(avgdl)
        self.variant, self.k1, self.b, self.delta = variant, float(k1), float(b), float(delta)
        self.norms = norms
        self.cache = lucene_norm_cache(self.avgdl, self.k1, self.b) if norms == "lucene" else None

    def weights(self, t, tf, dl):
        """float32 weights of rows given as arrays (numpy or cupy) of term ids, tf and dl."""
        xp = array_module(t)
        idf_t = xp.asarray(self.idf_t)
        if self.norms == "lucene":
            return self._lucene(xp, idf_t[t].astype(np.float32), tf, dl)
        w = idf_t[t] * tf_component(tf, dl, self.avgdl, self.variant, self.k1, self.b, self.delta)
        return w.astype(np.float32)

    def _lucene(self, xp, idf, tf, dl):
        # the cache is indexed by the norm byte: the rank of the decoded length among the ascending 256
        byte = xp.searchsorted(xp.asarray(LUCENE_LENGTHS), lucene_length(dl))
        inv = xp.asarray(self.cache)[byte]
        one = np.float32(1)
        return (idf - idf / (one + tf.astype(np.float32) * inv)).astype(np.float32)

    def __call__(self, df):
        w = self.weights(values(df["term_id"]), values(df["tf"]), values(df["dl"]))
        out = df.copy(deep=False)  # the new column only: no copy of the range's other columns
        out["weight"] = w
        return out


def corpus_weights(df, n_docs: int, n_tokens: int, variant: str, k1: float, b: float, delta,
                   norms: str = "exact", doc_count: int | None = None) -> WeightPartition:
    """The weight function of a corpus from its global statistics (Eq. 1): checked parameters, ``avgdl =
    n_tokens / n_docs`` (float64), idf per term id and the weights of absent terms.

    Parameters
    ----------
    df : int64 array, shape (V + 1,)
        Documents per term id (``df[0] = 0``).
    n_docs, n_tokens : int
    variant, k1, b, delta
        As :func:`check_params` (``delta`` None: the variant's default).
    norms : {"exact", "lucene"}
        ``"lucene"``: Lucene's one-byte lengths and float32 arithmetic (:class:`WeightPartition`), with
        Lucene's ``docCount`` for N and in ``avgdl = (float) (sumTotalTermFreq / (double) docCount)``.
    doc_count : int, optional
        ``docCount``: the documents with a token (Lucene leaves the others out of N); default ``n_docs``.
        Used by ``norms="lucene"`` only.

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
    check_norms(norms, variant)
    if n_tokens == 0 or n_docs == 0:
        raise ValueError(f"no document has a token ({n_docs} documents): BM25 needs avgdl > 0")
    if norms == "exact":
        fn = WeightPartition(idf(df, n_docs, variant), n_tokens / n_docs, variant, k1, b, delta)
    else:
        n = n_docs if doc_count is None else doc_count
        fn = WeightPartition(lucene_idf(df, n), n_tokens / n, variant, k1, b, delta, norms)
    idf_t = fn.idf_t
    fn.w0 = absent_weight(idf_t, variant, k1, delta)
    return fn


# BM25F's saturation on the combined frequency; bm25l / bm25+ add constants to a one-field tf part
FIELD_VARIANTS = ("lucene", "robertson", "atire")


class FieldWeights:
    """BM25F weights of postings from per-field term frequencies and lengths (picklable, numpy or cupy).

    Robertson, Zaragoza and Taylor 2004, "Simple BM25 extension to multiple weighted fields" (CIKM 2004:
    weight the fields' term frequencies, then saturate once), with each field's length normalised by its own
    b_f and mean length, the form of Zaragoza, Craswell, Taylor, Saria and Robertson, "Microsoft Cambridge at
    TREC-13: Web and HARD tracks" (TREC 2004) and of Robertson and Zaragoza, "The Probabilistic Relevance
    Framework: BM25 and Beyond" (2009), section on BM25F:

        tf~_td = sum_f  w_f * tf_tdf / (1 - b_f + b_f * L_df / avglen_f)
        w_td   = idf_t * tf~_td / (k1 + tf~_td)                (lucene)
        w_td   = idf_t * (k1 + 1) * tf~_td / (k1 + tf~_td)     (robertson, atire)

    with ``idf_t`` of the variant (table above) over the document frequency of the union of the fields
    (a document holds t if any field does), ``L_df`` the length of field f of d and ``avglen_f`` its
    mean over the N documents.  With one field of weight 1 this is the variant's BM25 (``K_d = k1 *
    norm``: ``tf / (K_d + tf) = (tf / norm) / (k1 + tf / norm)``).

    Attributes
    ----------
    idf_t : float64 array, shape (V + 1,)
    w0 : float64 array, shape (V + 1,)
        Zeros: a document without the term scores 0.
    avglen : float64 array, shape (F,)
        ``avglen_f``: tokens of field f / N.
    avgdl : float
        Mean length of all fields together (the index's ``avgdl``).
    field_weights, field_b : float64 arrays, shape (F,)
    variant : str
    k1 : float
    """

    def __init__(self, idf_t, avglen, avgdl: float, variant: str, k1: float, field_weights, field_b):
        self.idf_t = idf_t
        self.avglen = np.asarray(avglen, np.float64)
        self.avgdl = float(avgdl)
        self.variant, self.k1 = variant, float(k1)
        self.field_weights = np.asarray(field_weights, np.float64)
        self.field_b = np.asarray(field_b, np.float64)
        self.w0 = idf_t * 0.0

    def weights(self, t, tf, dl):
        """float32 weights of postings given as arrays (numpy or cupy).

        Parameters
        ----------
        t : integer array, shape (n,)
            Term ids.
        tf : integer array, shape (F, n)
            Occurrences of the term in each field of the document.
        dl : integer array, shape (F, n)
            Length of each field of the document.

        Returns
        -------
        float32 array, shape (n,)
        """
        xp = array_module(t)
        tf_c = xp.zeros(t.shape, np.float64)
        for f in range(len(self.field_weights)):  # a field of no tokens anywhere (avglen 0) adds nothing
            if self.avglen[f] > 0 and self.field_weights[f] > 0:
                b = float(self.field_b[f])
                norm = (1.0 - b) + b * (dl[f].astype(np.float64) / float(self.avglen[f]))
                tf_c += float(self.field_weights[f]) * tf[f].astype(np.float64) / norm
        sat = tf_c / (self.k1 + tf_c) if self.variant == "lucene" else (self.k1 + 1.0) * tf_c / (self.k1 + tf_c)
        return (xp.asarray(self.idf_t)[t] * sat).astype(np.float32)


def check_field_params(fields, field_weights, field_b) -> tuple:
    """Validate BM25F weights and b's of ``fields``; returns them as float tuples in field order.

    Parameters
    ----------
    fields : sequence of str
        The text columns, in order.
    field_weights, field_b : sequence of float, shape (F,)

    Raises
    ------
    ValueError
        A weight that is not a finite number >= 0, all weights 0, or a b outside [0, 1] (the message names
        the field).
    """
    def checked(name, f, v, hi):
        try:
            return number(name, v, lo=0, hi=hi)
        except ValueError:
            rng = "[0, 1]" if hi is not None else "[0, inf)"
            raise ValueError(f"{param(name, bare=True)}: the value of field {f!r} must be a finite number in "
                             f"{rng}, got {v!r}") from None

    ws = tuple(checked("field_weights", f, w, None) for f, w in zip(fields, field_weights))
    bs = tuple(checked("field_b", f, b, 1) for f, b in zip(fields, field_b))
    if not any(w > 0 for w in ws):
        raise ValueError(f"{param('field_weights', bare=True)}: BM25F needs a field of weight > 0, got "
                         f"{dict(zip(fields, ws))}")
    return ws, bs


def field_corpus_weights(df, n_docs: int, field_tokens, variant: str, k1: float, field_weights,
                         field_b) -> FieldWeights:
    """The BM25F weight function of a corpus from its global statistics (:class:`FieldWeights`).

    Parameters
    ----------
    df : int64 array, shape (V + 1,)
        Documents per term id over the union of the fields (``df[0] = 0``).
    n_docs : int
    field_tokens : int array, shape (F,)
        Tokens of each field over all documents (``avglen_f = field_tokens[f] / n_docs``).
    variant : {"lucene", "robertson", "atire"}
    k1 : float
    field_weights, field_b : sequence of float, shape (F,)

    Raises
    ------
    ValueError
        Another variant, bad parameters (:func:`check_params`, :func:`check_field_params`), or no document
        has a token.
    """
    if variant not in FIELD_VARIANTS:
        raise ValueError(f"BM25F weighs the variants {FIELD_VARIANTS}, not {variant!r}")
    check_params(variant, k1, 0.0, None)
    field_tokens = np.asarray(field_tokens, np.int64)
    n_tokens = int(field_tokens.sum())
    if n_tokens == 0 or n_docs == 0:
        raise ValueError(f"no document has a token ({n_docs} documents): BM25F needs avglen > 0")
    idf_t = idf(df, n_docs, variant)
    return FieldWeights(idf_t, field_tokens / n_docs, n_tokens / n_docs, variant, k1, field_weights, field_b)


def weights_meta(counts_meta):
    meta = counts_meta.copy()
    meta["weight"] = np.zeros(0, np.float32) if isinstance(meta, pd.DataFrame) else meta["tf"].astype(np.float32)
    return meta
