"""cutext.stages: the dataflow's stages.

The public stages are functions on dask (or dask-cudf) collections, the building blocks the
pipelines are made of (:mod:`cutext.stages.text.public`, where each is documented)::

    from cutext import stages

    tokens = stages.tokenize(texts)              # (doc_id, token)
    vocab, encoded = stages.encode(tokens)       # vocabulary; (doc_id, term_id)
    c = stages.count(encoded)                    # (term_id, doc_id, tf, dl); df; document lengths
    w = stages.bm25(c)                           # term-major weighted postings
    chunks = stages.lda_chunks(c, vocab, K=20)   # LDA's chunked token list

The layers below (imports run one way, engines -> text -> readers -> runtime; ``tests/stages/test_layers.py``):

* :mod:`cutext.stages.readers` -- host files and archives, device buffers, frames, ARPA files; the
  corpus source (a planned corpus and its lazy collection);
* :mod:`cutext.stages.text` -- tokenize (host and device), encode, sort, count, term vectors, BM25
  weights, the corpus front end and the public stages;
* :mod:`cutext.stages.engines` -- LDA chunks and Gibbs samplers, stream clustering, search matrices,
  the n-gram trie;
* :mod:`cutext.stages.runtime` -- compute contexts, progress, outputs and checksums, parameters,
  artifact checks.
"""
from __future__ import annotations

from cutext.stages.engines.lda_chunk import bag_of_words, lda_chunks
from cutext.stages.text.public import (
    BM25Postings,
    Counts,
    bm25,
    count,
    encode,
    number_documents,
    token_lengths,
    tokenize,
)

__all__ = ["tokenize", "encode", "count", "bm25", "lda_chunks", "Counts", "BM25Postings", "number_documents",
           "token_lengths", "bag_of_words"]
