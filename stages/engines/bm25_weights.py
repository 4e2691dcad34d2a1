"""The search matrix of a segmented BM25 index: the weight function of its global statistics and the CSR of
``w - w0`` placed and weighed from its segment readers (:class:`cutext.stages.engines.bm25_index.BM25Index`).
"""
from __future__ import annotations

import numpy as np

from cutext.kernels.postings import csr_weights, place_weighted_runs
from cutext.stages.engines import segments
from cutext.stages.engines.index_manifest import bm25f_spec
from cutext.stages.runtime import artifacts as art
from cutext.stages.text import bm25 as bm25_stage


def _weight_fn(meta: dict, mf, terms, variant: str, k1: float, delta: float):
    """The weight function of a segmented index from its global statistics ``terms``
    (:class:`cutext.stages.engines.segments.MergedTerms`): BM25F (:func:`bm25_stage.field_corpus_weights`)
    for an index of fields, else the variant's BM25 (:func:`bm25_stage.corpus_weights`).

    Raises
    ------
    ArtifactError
        Bad parameters, no token, or segments whose fields are not those of index.json.
    """
    spec = bm25f_spec(meta, mf)
    try:
        if spec is None:
            if terms.field_sum_dl is not None:
                raise ValueError("the segments store fields, index.json has no bm25f entry")
            return bm25_stage.corpus_weights(terms.df, terms.n_docs, terms.sum_dl, variant, k1,
                                             float(meta.get("b", 0.4)), delta, meta.get("norms", "exact"),
                                             doc_count=terms.n_nonempty)
        fields, ws, bs = spec
        if meta.get("norms", "exact") != "exact":
            raise ValueError("index.json's norms apply to one-field indexes, not to its bm25f fields")
        if terms.field_sum_dl is None or len(terms.field_sum_dl) != len(fields):
            raise ValueError(f"index.json's bm25f fields {list(fields)} are not those of the segments")
        return bm25_stage.field_corpus_weights(terms.df, terms.n_docs, terms.field_sum_dl, variant, k1, ws, bs)
    except ValueError as exc:
        raise art.ArtifactError(f"{mf}: {exc}") from None


def _weighted_matrix(segs: list, mt, fn, w0: np.ndarray):
    """The scipy CSR (V + 1, N) float32 of ``w - w0`` of live segments in commit order (``mt``: their global
    statistics, :class:`cutext.stages.engines.segments.MergedTerms`; ``fn``: the corpus's one-field weight
    function), each segment's postings placed and weighted in one pass
    (:func:`cutext.kernels.postings.place_weighted_runs`): the matrix :func:`_segment_matrix` makes of
    :func:`cutext.stages.engines.segments.merge_segments`, bit for bit, without the merged tf."""
    import scipy.sparse as sp

    indptr = np.zeros(len(mt.df) + 1, np.int64)
    np.cumsum(mt.df, out=indptr[1:])
    doc = np.empty(int(indptr[-1]), np.int32 if mt.n_docs <= np.iinfo(np.int32).max else np.int64)
    data = np.empty(int(indptr[-1]), np.float32)
    fill = indptr[:-1].copy()  # next free slot of each term id: a term's postings of earlier segments first
    minus = w0 if np.any(w0) else None  # search adds the w0 of every query term back
    for sg, g, base in zip(segs, mt.term_ids, mt.doc_base[:-1]):
        if not sg.n_postings:
            continue
        start = fill[g]
        fill[g] += sg.df
        place_weighted_runs(start, sg.offsets, g, sg.doc, sg.tf, sg.lengths, int(base), fn.idf_t, fn.avgdl,
                            fn.variant, fn.k1, fn.b, fn.delta, doc, data, minus=minus)
    return sp.csr_matrix((data, doc, indptr), shape=(len(mt.df), mt.n_docs), copy=False)


def _segment_matrix(merged, fn, w0: np.ndarray, be: str, block: int = 1 << 24):
    """The CSR (V + 1, N) float32 of ``w - w0`` of merged segments (``fn``: the corpus's weight function),
    scipy on the host or, for ``be == "gpu"``, cupyx with the weights computed on the device (the same
    formulas on the same operands: the same bits as the host) from postings already there
    (``merge_segments(device=True)``) or copied there."""
    V, N = len(merged.indptr) - 2, len(merged.lengths)
    if be != "gpu":
        import scipy.sparse as sp

        # search adds the w0 of every query term back
        minus = w0 if np.any(w0) else None
        if isinstance(fn, bm25_stage.WeightPartition) and fn.norms == "exact":  # the numba twin of the formulas
            data = csr_weights(merged.indptr, merged.doc, merged.tf, merged.lengths, fn.idf_t, fn.avgdl, fn.variant,
                               fn.k1, fn.b, fn.delta, minus=minus)
        else:
            data = segments.posting_weights(merged, fn, minus=minus, block=block)
        return sp.csr_matrix((data, merged.doc, merged.indptr), shape=(V + 1, N), copy=False)
    import cupy
    import cupyx.scipy.sparse as csp

    indptr = cupy.asarray(merged.indptr)
    doc = cupy.asarray(merged.doc)
    # BM25F (fn: bm25_stage.FieldWeights) weighs the (F, n) per-field tf and lengths, as posting_weights does
    fields = merged.field_tf is not None
    tf = cupy.asarray(merged.field_tf if fields else merged.tf)
    lengths = cupy.asarray(merged.field_lengths if fields else merged.lengths)
    w0_d = cupy.asarray(w0)
    data = cupy.empty(len(doc), np.float32)
    for a in range(0, len(doc), block):
        e = min(a + block, len(doc))
        t = (cupy.searchsorted(indptr, cupy.arange(a, e, dtype=np.int64), side="right") - 1).astype(np.int32)
        data[a:e] = fn.weights(t, tf[..., a:e], lengths[..., doc[a:e]])
        if np.any(w0):
            data[a:e] -= w0_d[t]
    del tf, lengths
    return csp.csr_matrix((data, doc.astype(np.int32, copy=False),
                           indptr.astype(np.int32) if len(doc) < 2**31 else indptr), shape=(V + 1, N))
