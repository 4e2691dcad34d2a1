"""cutext.stages: the dataflow's stages.

The public stages are functions on dask (or dask-cudf) collections, the building blocks the
pipelines are made of (:mod:`cutext.stages.api`, where each is documented)::

    from cutext import stages

    tokens = stages.tokenize(texts)              # (doc_id, token)
    vocab, encoded = stages.encode(tokens)       # vocabulary; (doc_id, term_id)
    c = stages.count(encoded)                    # (term_id, doc_id, tf, dl); df; document lengths
    w = stages.bm25(c)                           # term-major weighted postings
    chunks = stages.lda_chunks(c, vocab, K=20)   # LDA's chunked token list

``tokenize``, ``encode``, ``count`` and ``bm25`` are also the names of the submodules that hold
each stage's partition functions (``from cutext.stages.tokenize import TokenizerConfig``).  So
that both keep working, those four submodules are *callable*: calling
``cutext.stages.tokenize(...)`` calls :func:`cutext.stages.api.tokenize` (``inspect.signature``
and ``__wrapped__`` lead to it), while ``cutext.stages.tokenize.TokenizerConfig`` is the
submodule's class as before.
"""
from __future__ import annotations

import importlib
import types

from cutext.stages import api
from cutext.stages.api import (  # noqa: F401
    BM25Postings,
    Counts,
    bag_of_words,
    lda_chunks,
    number_documents,
    token_lengths,
)


class _StageModule(types.ModuleType):
    """A stage's submodule that, called, runs the public stage function of :mod:`cutext.stages.api`."""

    def __call__(self, *args, **kwargs):
        return self.__wrapped__(*args, **kwargs)


for _name in ("tokenize", "encode", "count", "bm25"):
    _mod = importlib.import_module(f"cutext.stages.{_name}")
    _mod.__class__ = _StageModule
    _mod.__wrapped__ = getattr(api, _name)
    globals()[_name] = _mod
del _name, _mod

__all__ = ["tokenize", "encode", "count", "bm25", "lda_chunks", "Counts", "BM25Postings", "number_documents",
           "token_lengths", "bag_of_words", "api"]
