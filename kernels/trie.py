"""Forward-trie n-gram LM queries: CUDA kernels (CuPy) and their numba CPU twins (the gLM paper (Li); gLM).

The trie (built by :func:`cutext.stages.engines.trie.build_trie`) is a :class:`Trie` of flat arrays; level 1
(the vocabulary) is indexed directly by word id, deeper levels hold each context's children as a
sorted run searched as an implicit B-tree of 31-key nodes. On the GPU a warp searches one node at a
time (31 lanes compare one key each and vote with ``__ballot_sync``; K-ary search, gLM section 3.2);
:func:`_find` is the sequential model of that walk (tested against a binary search), and the CPU twins
bisect the sorted run (:func:`_bisect`, the same entry, faster on a CPU), so the GPU tests compare the
B-tree walk with an independent search.

Back-off semantics are KenLM's (Heafield 2011), for a word ``w`` after history ``h``::

    log10 p(w | h) = prob(s, w) + sum_{k = |s|+1}^{N-1} backoff(h_k)

where ``(s, w)`` is the longest n-gram of the model whose context ``s`` is a suffix of ``h``, and
``h_k`` are the suffixes of ``h`` of length k that are n-grams of the model (absent ones count 0).
The sum is accumulated in float32 from the shortest context outwards, as KenLM does.

Three kernels, each with two bodies chosen by the type of the query arrays (numpy -> numba,
cupy -> CUDA; the trie must live on the same side):

* :func:`score_tokens` -- per-token and per-sentence log10 probabilities of word-id sequences;
* :func:`suffix_entries` -- for each word sequence, the trie entries of its last k words;
* :func:`fill_distribution` -- the full next-word distribution of each context.
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

import cutext.kernels._numba_cache  # noqa: F401  # before the decorators: it places and stamps their cache
from cutext.kernels import _cuda
from cutext.kernels.backend import array_module, is_gpu_object

MAX_ORDER = 16
NODE_KEYS = 31  # gLM's default B-tree node size
SOURCE = "trie.cu"
THREADS = _cuda.THREADS


@dataclass
class Trie:
    """Flat arrays of the forward trie (numpy on the host, cupy on the device).

    Attributes
    ----------
    keys : int32 (total,)
        Word id of the last word of each entry (level 1: the id itself).
    prob : float32 (total,)
        log10 probability of each entry.
    backoff : float32 (start[N-1],)
        log10 backoff of the entries of levels 1 .. N-1.
    child : int32 (start[N-1] + 1,)
        Children of entry e (levels 1 .. N-1) are entries ``child[e]:child[e + 1]``.
    start : int64 (N + 1,), host
        Level n holds entries ``start[n-1]:start[n]`` (level 1 starts at 0 and has V entries).
    order : int
        N, the highest order.
    vocab_size : int
        V.
    """

    keys: object
    prob: object
    backoff: object
    child: object
    start: np.ndarray
    order: int
    vocab_size: int

    @property
    def n_ngrams(self) -> int:
        return int(self.start[-1])

    @property
    def on_gpu(self) -> bool:
        return is_gpu_object(self.keys)

    def nbytes(self) -> dict:
        """Bytes of each array, and ``bytes_per_ngram`` = total bytes / number of n-grams."""
        d = {k: int(getattr(self, k).nbytes) for k in ("keys", "prob", "backoff", "child")}
        d["total"] = sum(d.values())
        d["bytes_per_ngram"] = d["total"] / max(1, self.n_ngrams)
        return d

    def to_device(self) -> Trie:
        """A copy of the trie on the current CUDA device (one host-to-device copy per array)."""
        import cupy

        return Trie(cupy.asarray(self.keys), cupy.asarray(self.prob), cupy.asarray(self.backoff),
                    cupy.asarray(self.child), self.start, self.order, self.vocab_size)


# ----------------------------------------------------------------------------- CPU twins (numba)

@numba.njit(cache=True, nogil=True)
def _find(keys, lo, hi, w):
    """Entry index of key w in the sorted run keys[lo:hi] (implicit 31-key B-tree), or -1.

    The sequential model of ``warp_find`` in trie.cu: the same nodes, visited in the same order; inside a
    node the 31 keys are bisected instead of compared by 31 lanes at once (the entry found is the same).
    Tested against a binary search; the CPU kernels use :func:`_bisect`.
    """
    m = hi - lo
    if m <= 0:
        return -1
    S = np.int64(1)
    while S * 32 - 1 < m:
        S *= 32
    base = np.int64(lo)
    while True:
        nk = (hi - base) // S  # keys of this node: base + (j + 1) * S - 1 < hi
        nk = min(nk, 31)
        a = 0
        b = nk
        while a < b:  # first j whose key >= w
            mid = (a + b) >> 1
            if keys[base + (mid + 1) * S - 1] < w:
                a = mid + 1
            else:
                b = mid
        if a < nk and keys[base + (a + 1) * S - 1] == w:
            return base + (a + 1) * S - 1
        if S == 1:
            return -1
        base += a * S
        S //= 32


@numba.njit(cache=True, nogil=True)
def _bisect(keys, lo, hi, w):
    """Entry index of key w in the sorted run keys[lo:hi], or -1: the CPU kernels' search.

    Returns the same entry as :func:`_find` (keys are unique within a run); a plain binary search is
    1.6x faster on a CPU than walking the strided inner nodes, and it makes the CPU twin an
    independent oracle for the warp B-tree search of the GPU kernels.
    """
    a = np.int64(lo)
    b = np.int64(hi)
    while a < b:
        mid = (a + b) >> 1
        if keys[mid] < w:
            a = mid + 1
        else:
            b = mid
    if a < hi and keys[a] == w:
        return a
    return -1


@numba.njit(cache=True, nogil=True, parallel=True)
def _twin_score(keys, prob, bo, child, order, ids, offsets, bos_id, eos_id, use_bos, use_eos,
                out_offsets, tok_prob, tok_len, sent_total):
    n_sent = len(offsets) - 1
    n_chunks = min(n_sent, 256)
    for ch in numba.prange(n_chunks):
        ctx = np.empty(MAX_ORDER, np.int64)
        e = np.empty(MAX_ORDER, np.int64)
        for s in range(ch * n_sent // n_chunks, (ch + 1) * n_sent // n_chunks):
            for k in range(MAX_ORDER):
                ctx[k] = -1
            if use_bos and order > 1:
                ctx[0] = bos_id
            a = offsets[s]
            b = offsets[s + 1]
            o = out_offsets[s]
            ntok = (b - a) + (1 if use_eos else 0)
            total = 0.0
            for t in range(ntok):
                w = ids[a + t] if t < b - a else eos_id
                e[0] = w
                for k in range(1, order):
                    c = ctx[k - 1]
                    e[k] = _bisect(keys, child[c], child[c + 1], w) if c >= 0 else -1
                j = 1
                for k in range(2, order + 1):
                    if e[k - 1] >= 0:
                        j = k
                p = prob[e[j - 1]]
                for k in range(j, order):
                    c = ctx[k - 1]
                    if c >= 0:
                        p = p + bo[c]
                for k in range(1, order):
                    ctx[k - 1] = e[k - 1]
                tok_prob[o + t] = p
                tok_len[o + t] = j
                total += np.float64(p)
            sent_total[s] = total


@numba.njit(cache=True, nogil=True, parallel=True)
def _twin_suffix(keys, child, ids, offsets, max_len, out):
    n_rows = len(offsets) - 1
    for r in numba.prange(n_rows):
        a = offsets[r]
        L = offsets[r + 1] - a
        for k in range(1, max_len + 1):
            ent = -1
            if L >= k:
                ent = np.int64(ids[a + L - k])
                for t in range(L - k + 1, L):
                    ent = _bisect(keys, child[ent], child[ent + 1], ids[a + t])
                    if ent < 0:
                        break
            out[r, k - 1] = ent


@numba.njit(cache=True, nogil=True, parallel=True)
def _twin_fill(keys, prob, bo, child, V, n, ctx, out):
    n_rows = ctx.shape[0]
    for r in numba.prange(n_rows):
        hb = np.zeros(MAX_ORDER, np.float32)
        for k in range(n - 1):
            c = ctx[r, k]
            if c >= 0:
                hb[k] = bo[c]
        for w in range(V):
            p = prob[w]
            for k in range(1, n):
                if ctx[r, k - 1] >= 0:
                    p = p + hb[k - 1]
            out[r, w] = p
        for j in range(2, n + 1):
            c = ctx[r, j - 2]
            if c < 0:
                continue
            for e in range(child[c], child[c + 1]):
                p = prob[e]
                for k in range(j, n):
                    if ctx[r, k - 1] >= 0:
                        p = p + hb[k - 1]
                out[r, keys[e]] = p


# ----------------------------------------------------------------------------- CUDA bodies

def _kernel(name):
    """A kernel of ``trie.cu`` on the current device (:func:`cutext.kernels._cuda.kernel`)."""
    return _cuda.kernel(SOURCE, name)


def _check(trie: Trie, gpu: bool):
    if trie.on_gpu != gpu:
        side = "cupy" if gpu else "numpy"
        raise TypeError(f"the queries are {side} arrays but the trie is on the "
                        f"{'device' if trie.on_gpu else 'host'}; use Trie.to_device() or host arrays")
    if trie.order > MAX_ORDER:
        raise ValueError(f"order {trie.order} > MAX_ORDER {MAX_ORDER}")


def output_offsets(offsets, eos: bool):
    """Token offsets of the scores: ``offsets + arange(n_sent + 1)`` when eos adds one token."""
    xp = array_module(offsets)
    if not eos:
        return offsets.astype(np.int64, copy=True)
    return offsets.astype(np.int64) + xp.arange(len(offsets), dtype=np.int64)


def score_tokens(trie: Trie, ids, offsets, *, bos_id: int, eos_id: int, bos: bool = True, eos: bool = True):
    """log10 probability of every token of every sentence, with KenLM's back-off (KenLM ``full_scores``).

    Parameters
    ----------
    trie : Trie
    ids : int32 array (n_tokens,), numpy or cupy
        Word ids of all sentences back to back (out-of-vocabulary words already mapped to ``<unk>``).
    offsets : int64 array (n_sent + 1,)
        Sentence s is ``ids[offsets[s]:offsets[s + 1]]``.
    bos_id, eos_id : int
        Ids of ``<s>`` and ``</s>``.
    bos : bool
        Start each sentence in the context ``<s>`` (not scored).
    eos : bool
        Score ``</s>`` after each sentence (one extra token per sentence).

    Returns
    -------
    tok_prob : float32 (n_out,)
        log10 p of each scored token; sentence s owns ``out_offsets[s]:out_offsets[s + 1]``.
    tok_len : int32 (n_out,)
        Order of the longest n-gram of the model that matched (KenLM's ``ngram_length``).
    sent_total : float64 (n_sent,)
        Sum of the sentence's token log10 probabilities, in token order.
    out_offsets : int64 (n_sent + 1,)
    """
    gpu = is_gpu_object(ids)
    _check(trie, gpu)
    n_sent = len(offsets) - 1
    out_off = output_offsets(offsets, eos)
    n_out = int(out_off[-1])
    xp = array_module(ids)
    ids = xp.ascontiguousarray(ids, dtype=np.int32)
    offsets = xp.ascontiguousarray(offsets, dtype=np.int64)
    tok_prob = xp.empty(n_out, np.float32)
    tok_len = xp.empty(n_out, np.int32)
    total = xp.empty(n_sent, np.float64)
    if not n_sent:
        return tok_prob, tok_len, total, out_off
    if xp is np:
        _twin_score(trie.keys, trie.prob, trie.backoff, trie.child, trie.order, ids, offsets, bos_id, eos_id,
                    bool(bos), bool(eos), out_off, tok_prob, tok_len, total)
    else:
        g, b = _cuda.grid(n_sent * 32)  # a warp per sentence
        _kernel("score_sentences")(g, b, (
            trie.keys, trie.prob, trie.backoff, trie.child, np.int32(trie.order), ids, offsets,
            np.int32(n_sent), np.int32(bos_id), np.int32(eos_id), np.int32(bool(bos)), np.int32(bool(eos)),
            out_off, tok_prob, tok_len, total))
    return tok_prob, tok_len, total, out_off


def suffix_entries(trie: Trie, ids, offsets, max_len: int):
    """Trie entries of the suffixes of word sequences (the contexts of a next-word query).

    Parameters
    ----------
    trie : Trie
    ids : int32 array (n_tokens,), numpy or cupy
    offsets : int64 array (n_rows + 1,)
    max_len : int
        Longest suffix looked up (at most the order).

    Returns
    -------
    int32 array (n_rows, max_len)
        ``[r, k - 1]`` = global entry of the n-gram made of the last k words of row r (an entry of
        level k), or -1 when the model lacks it or the row has fewer than k words.
    """
    gpu = is_gpu_object(ids)
    _check(trie, gpu)
    n_rows = len(offsets) - 1
    max_len = int(max_len)
    if not 0 <= max_len <= trie.order:
        raise ValueError(f"max_len must be in 0..{trie.order}, got {max_len}")
    xp = array_module(ids)
    out = xp.full((n_rows, max_len), -1, np.int32)
    if not (n_rows and max_len):
        return out
    ids = xp.ascontiguousarray(ids, dtype=np.int32)
    offsets = xp.ascontiguousarray(offsets, dtype=np.int64)
    if xp is np:
        _twin_suffix(trie.keys, trie.child, ids, offsets, max_len, out)
    else:
        g, b = _cuda.grid(n_rows * 32)  # a warp per row
        _kernel("suffix_entries")(g, b, (trie.keys, trie.child, ids, offsets, np.int32(n_rows), np.int32(max_len),
                                         out))
    return out


def fill_distribution(trie: Trie, ctx, order: int, out=None):
    """The full next-word distribution (log10) of each context (the gLM paper (Li), section 3.3.2.2).

    Parameters
    ----------
    trie : Trie
    ctx : int32 array (n_rows, order - 1), numpy or cupy
        ``[r, k - 1]``: entry of the last k context words (from :func:`suffix_entries`), -1 if absent.
    order : int
        Use the n-grams of orders 1 .. ``order`` (``order - 1`` context words).
    out : float32 array (n_rows, V), optional

    Returns
    -------
    float32 array (n_rows, V)
        ``[r, w]`` = log10 p(w | context r) with back-off (the same value :func:`score_tokens` gives).
    """
    gpu = is_gpu_object(ctx)
    _check(trie, gpu)
    n_rows = ctx.shape[0]
    V = trie.vocab_size
    order = int(order)
    if ctx.shape[1] != order - 1:
        raise ValueError(f"ctx has {ctx.shape[1]} columns, expected order - 1 = {order - 1}")
    xp = array_module(ctx)
    ctx = xp.ascontiguousarray(ctx, dtype=np.int32)
    if out is None:
        out = xp.empty((n_rows, V), np.float32)
    if not n_rows:
        return out
    if xp is np:
        _twin_fill(trie.keys, trie.prob, trie.backoff, trie.child, V, order, ctx, out)
    else:
        _kernel("fill_distribution")((n_rows,), (THREADS,), (  # a block per row
            trie.keys, trie.prob, trie.backoff, trie.child, np.int32(V), np.int32(order), ctx, np.int32(n_rows),
            out))
    return out
