"""Build the forward trie of an ARPA model with vectorized numpy (the gLM paper (Li), section 3.2; gLM's layout).

Layout (one flat array per field; entry indices are global, levels are stored one after another)::

    level 1 (unigrams)  entries [0, V)               entry index = word id (the root, indexed directly)
    level n             entries [start[n], start[n+1])
    keys[e]     int32    word id of the last word of the n-gram of entry e (level 1: the id itself)
    prob[e]     float32  log10 probability                                     (all levels)
    backoff[e]  float32  log10 backoff weight                                  (levels 1 .. N-1)
    child[e]    int32    first entry of e's children in level n+1; they end at child[e + 1]
                         (levels 1 .. N-1, plus one sentinel: child[start[N]] = total)

The children of one context are contiguous and sorted by word id. Each such run is an implicit
static B-tree of 31-key nodes (gLM's default node size): its leaves are consecutive groups of keys
of the sorted run, and the keys of an inner node are the keys at stride ``32**h`` in the run (the
last key of each child subtree), read in place. No memory is spent on inner nodes; the price is that
an inner node's 31 keys are strided, not contiguous (the leaf reads are contiguous). See
:mod:`cutext.kernels.trie` for the K-ary search.

Contexts are entered in the order of their entries, so a level is sorted by (parent entry, word id):
the key ``parent * V + word`` (int64). Building a level is one argsort; finding the parent of every
n-gram is n-2 ``searchsorted`` passes down the levels already built.
"""
from __future__ import annotations

import numpy as np

from cutext.kernels.trie import Trie
from cutext.stages.readers.arpa import ArpaError, ArpaModel

INT32_MAX = np.iinfo(np.int32).max


def _words_text(model: ArpaModel, ids) -> str:
    return " ".join(model.vocab[int(i)].as_py() for i in ids)


def build_trie(model: ArpaModel) -> Trie:
    """Lay out the n-grams of ``model`` as a forward trie (host numpy arrays).

    Parameters
    ----------
    model : ArpaModel
        From :func:`cutext.stages.readers.arpa.read_arpa`.

    Returns
    -------
    Trie
        numpy arrays; ``Trie.to_device()`` copies them to the GPU once.

    Raises
    ------
    ArpaError
        An n-gram whose context (its first n-1 words) is not an (n-1)-gram of the model (KenLM's
        probing model refuses such files too), a duplicate n-gram, or more than 2**31 - 1 n-grams.
    """
    V = len(model.vocab)
    N = model.order
    counts = [len(o.prob) for o in model.orders]
    total = int(sum(counts))
    if total > INT32_MAX:
        raise ArpaError(f"{model.path}: {total} n-grams; the int32 trie holds at most {INT32_MAX}")
    start = np.zeros(N + 1, np.int64)
    start[1:] = np.cumsum(counts)

    keys = np.empty(total, np.int32)
    prob = np.empty(total, np.float32)
    # backoff and child cover levels 1..N-1 (a unigram model keeps its unigram backoffs, unused)
    n_inner = int(start[N - 1]) if N > 1 else V
    backoff = np.empty(n_inner, np.float32)
    child = np.empty(n_inner + 1, np.int32)

    uni = model.orders[0]
    keys[:V] = np.arange(V, dtype=np.int32)
    prob[:V] = uni.prob
    backoff[:V] = uni.backoff
    if N == 1:
        child[:] = V
        return Trie(keys, prob, backoff, child, start, N, V)

    level_keys = [None, None]  # level_keys[n] = sorted int64 (parent_local * V + word) of level n
    Vl = np.int64(V)
    for n in range(2, N + 1):
        o = model.orders[n - 1]
        W = o.words
        par = W[:, 0].astype(np.int64)
        for k in range(1, n - 1):  # walk down the levels built so far: local entry of the k+1 prefix
            lk = level_keys[k + 1]
            key = par * Vl + W[:, k]
            pos = np.searchsorted(lk, key)
            pos_c = np.minimum(pos, len(lk) - 1)
            ok = (pos < len(lk)) & (lk[pos_c] == key) if len(lk) else np.zeros(len(key), bool)
            if not ok.all():
                b = int(np.flatnonzero(~ok)[0])
                raise ArpaError(f"{model.path}:{int(o.lines[b])}: the context '{_words_text(model, W[b, :k + 1])}' "
                                f"of the {n}-gram '{_words_text(model, W[b])}' is not a {k + 1}-gram of the model "
                                "(every n-gram's context must appear as an (n-1)-gram)")
            par = pos_c.astype(np.int64)
        comp = par * Vl + W[:, n - 1]
        order = np.argsort(comp, kind="stable")
        comp_sorted = comp[order]
        dup = np.flatnonzero(comp_sorted[1:] == comp_sorted[:-1])
        if len(dup):
            b = int(order[dup[0] + 1])
            raise ArpaError(f"{model.path}:{int(o.lines[b])}: duplicate {n}-gram '{_words_text(model, W[b])}'")
        level_keys.append(comp_sorted)
        s, e = int(start[n - 1]), int(start[n])
        keys[s:e] = W[order, n - 1]
        prob[s:e] = o.prob[order]
        if n < N:
            backoff[s:e] = o.backoff[order]
        # children of level n-1: CSR offsets over the parent entries (global indices)
        n_par = counts[n - 2]
        parents = comp_sorted // Vl
        first = np.searchsorted(parents, np.arange(n_par, dtype=np.int64))
        ps = int(start[n - 2])
        child[ps:ps + n_par] = (s + first).astype(np.int32)
    child[n_inner] = total
    return Trie(keys, prob, backoff, child, start, N, V)
