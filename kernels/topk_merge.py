"""Merge of the ranked top-k rows of document shards into one top k, the shards' doc offsets added on the way.

The host side of a sharded search (:func:`cutext.stages.engines.search.merge_topk`): each shard returns,
per query, its documents ranked by score descending then doc id ascending, numbered from 0 within the
shard.  One pass per query reads the shards' rows in place (no concatenation of the parts, no
``np.where`` of the offsets per part) and writes the global doc ids of the merged top k.  A host-only
kernel: the parts are on the host when they are merged (the device engines copy out ``(nq, k)`` results).
"""
from __future__ import annotations

import cutext.kernels._numba_cache  # noqa: F401  # before the decorators: it places and stamps their cache
import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def _merge_shards(docs, scores, ns, offs, k, out_doc, out_score, out_n):  # pragma: no cover - numba
    nq = out_n.shape[0]
    P = len(docs)
    pos = np.zeros(P, np.int64)
    cnt = np.zeros(P, np.int64)
    head = np.zeros(P, np.float32)  # the score at pos[p], -inf once shard p is exhausted (scores are finite)
    for r in range(nq):
        for p in range(P):
            pos[p] = 0
            c = np.int64(ns[p][r])
            w = docs[p].shape[1]
            cnt[p] = min(c, w)
            head[p] = scores[p][r, 0] if cnt[p] > 0 else -np.inf
        j = 0
        while j < k:
            best = -1
            bs = -np.inf
            for p in range(P):
                if head[p] > bs:  # strictly: equal scores keep the earlier shard (smaller doc ids)
                    best = p
                    bs = head[p]
            if best < 0:
                break
            i = pos[best]
            out_doc[r, j] = docs[best][r, i] + offs[best]
            out_score[r, j] = bs
            i += 1
            pos[best] = i
            head[best] = scores[best][r, i] if i < cnt[best] else -np.inf
            j += 1
        out_n[r] = j


def merge_shards(parts, offsets, k: int):
    """Top ``k`` of each query over ``P`` shards' ranked rows, doc ids made global (``+ offsets[p]``).

    Parameters
    ----------
    parts : list of (doc, score, n)
        Per shard, in document order (shard ``p``'s documents below shard ``p + 1``'s): int64 (nq, k_p) doc
        ids numbered from 0 within the shard, float32 (nq, k_p) scores, int32 (nq,) counts; the first
        ``n[r]`` entries of row ``r`` ranked by score descending then doc id ascending.
    offsets : sequence of int, (P,)
        The global doc id of each shard's first document.
    k : int >= 1

    Returns
    -------
    (doc, score, n) : int64 (nq, k), float32 (nq, k), int32 (nq,); entries past ``n`` are -1 / 0.  Equal
        scores keep the earlier shard first (the smaller doc id), so the merge equals one index's ranking.

    Raises
    ------
    ValueError
        No parts, parts with different numbers of queries, ``len(offsets) != len(parts)`` or ``k < 1``.
    """
    if not parts:
        raise ValueError("merge_shards: no parts")
    if len(offsets) != len(parts):
        raise ValueError(f"merge_shards: {len(parts)} parts but {len(offsets)} offsets")
    k = int(k)
    if k < 1:
        raise ValueError(f"merge_shards: k must be >= 1, got {k}")
    nq = len(parts[0][2])
    if any(len(p[2]) != nq or p[0].shape[0] != nq or p[1].shape != p[0].shape for p in parts):
        raise ValueError("merge_shards: the parts must hold the same queries (nq rows each)")
    docs = tuple(np.ascontiguousarray(p[0], dtype=np.int64) for p in parts)
    scores = tuple(np.ascontiguousarray(p[1], dtype=np.float32) for p in parts)
    ns = tuple(np.ascontiguousarray(p[2], dtype=np.int32) for p in parts)
    out_doc = np.full((nq, k), -1, np.int64)
    out_score = np.zeros((nq, k), np.float32)
    out_n = np.zeros(nq, np.int32)
    _merge_shards(docs, scores, ns, np.asarray(offsets, np.int64), k, out_doc, out_score, out_n)
    return out_doc, out_score, out_n


__all__ = ["merge_shards"]
