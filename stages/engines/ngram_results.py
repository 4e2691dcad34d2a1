"""The results of :class:`cutext.stages.engines.ngram_model.NGramModel`'s queries: :class:`Scores` of a batch
of sentences (KenLM's ``full_scores`` per sentence) and :class:`TopK`, the most probable next words."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass
class Scores:
    """Scores of a batch of sentences (host numpy arrays).

    Attributes
    ----------
    log10_prob : float64 (n_sent,)
        Sentence log10 probability (sum of its token scores, in token order).
    tokens : int64 (n_sent,)
        Scored tokens per sentence (words, plus ``</s>`` when eos).
    token_log10_prob : float32 (n_scored,)
        log10 p of every scored token; sentence s owns ``offsets[s]:offsets[s + 1]``.
    ngram_length : int32 (n_scored,)
        Order of the longest n-gram of the model that matched (KenLM's ``ngram_length``).
    oov : bool (n_scored,)
        The word is not in the vocabulary (scored as ``<unk>``).
    offsets : int64 (n_sent + 1,)
    """

    log10_prob: np.ndarray
    tokens: np.ndarray
    token_log10_prob: np.ndarray
    ngram_length: np.ndarray
    oov: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.log10_prob)

    def full_scores(self, i: int) -> list:
        """Sentence i as KenLM's ``full_scores``: a list of ``(log10 prob, ngram_length, oov)``."""
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        return [(float(p), int(n), bool(o)) for p, n, o in
                zip(self.token_log10_prob[a:b], self.ngram_length[a:b], self.oov[a:b])]

    def oov_counts(self) -> np.ndarray:
        """int64 (n_sent,): out-of-vocabulary words per sentence."""
        sent = np.repeat(np.arange(len(self.tokens)), self.tokens)
        return np.bincount(sent, weights=self.oov, minlength=len(self.tokens)).astype(np.int64)

    @property
    def perplexity(self) -> float:
        """``10 ** (-sum log10 p / sum tokens)`` over all sentences (KenLM's definition)."""
        n = int(self.tokens.sum())
        return float(10.0 ** (-float(self.log10_prob.sum()) / n)) if n else float("nan")

    def __repr__(self) -> str:  # one line: a notebook shows it; the arrays are the attributes
        return (f"Scores(sentences={len(self):,}, tokens={int(self.tokens.sum()):,}, oov={int(self.oov.sum()):,}, "
                f"log10_prob={float(self.log10_prob.sum()):.4f}, perplexity={self.perplexity:.4f})")

    def to_frame(self) -> pd.DataFrame:
        """One row a sentence: ``log10_prob: float64``, ``tokens: int64``, ``oov: int64``, ``perplexity:
        float64`` (``10 ** (-log10_prob / tokens)``, NaN for a sentence without a scored token)."""
        tokens = self.tokens.astype(np.int64)
        with np.errstate(divide="ignore", invalid="ignore"):
            ppl = np.where(tokens > 0, 10.0 ** (-self.log10_prob / np.maximum(tokens, 1)), np.nan)
        return pd.DataFrame({"log10_prob": self.log10_prob.astype(np.float64), "tokens": tokens,
                             "oov": self.oov_counts(), "perplexity": ppl})

    def _repr_html_(self) -> str:
        """For notebooks: the one-line repr over the first 10 sentences (:meth:`to_frame`)."""
        import html

        more = f"<p>... {len(self) - 10:,} more sentences: to_frame()</p>" if len(self) > 10 else ""
        return (f"<p><code>{html.escape(repr(self))}</code></p>"
                + self.to_frame().head(10).to_html(float_format=lambda v: f"{v:.4f}") + more)


@dataclass
class TopK:
    """The k most probable next words of each context.

    Attributes
    ----------
    ids : int32 (n_contexts, k)
        Word ids, most probable first (ties: smaller id first).
    log10_prob : float32 (n_contexts, k)
    words : list of list of str
    """

    ids: np.ndarray
    log10_prob: np.ndarray
    words: list

    def __repr__(self) -> str:  # one line: the first context's words, not the arrays
        n, k = (int(d) for d in self.ids.shape) if self.ids.ndim == 2 else (len(self.words), 0)
        first = list(self.words[0][:5]) + (["..."] if k > 5 else []) if n else []
        return f"TopK(contexts={n:,}, k={k}, words[0]={first})"
