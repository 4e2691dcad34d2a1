"""The ``ngram`` pipeline: an ARPA language model in a GPU forward trie, queried in batches.

Paper 003 (Li, "Language Model on GPU", building on gLM by Bogoychev and Lopez): the model is a
forward trie whose levels hold each context's children as B-tree nodes of 31 keys, searched K-ary
by a warp; the queries are batched. :class:`NGramModel` loads an ARPA file and answers

* :meth:`NGramModel.score` -- per-sentence and per-token log10 probabilities (KenLM's semantics);
* :meth:`NGramModel.next_word_distribution` -- the full distribution over the vocabulary for each
  context (paper 003's query, for neural / n-gram mixtures), dense or sparse;
* :meth:`NGramModel.top_k_next` -- the k most probable next words;
* :meth:`NGramModel.perplexity` -- of a corpus.

:func:`score_corpus` (``pipelines.run("ngram", path, model=...)``) scores a corpus into Parquet.

Output directory::

    scores.parquet   doc_id: int64, source_id: string, sentences: int32, tokens: int64, oov: int64,
                     log10_prob: float64, perplexity: float64
    ngram.json       model, order, counts, memory, corpus totals and perplexity, backend, timings

Tokens are the white-space separated words of the text (ASCII white space, as KenLM's Python module
splits), without lowercasing. Words are matched byte for byte, as KenLM matches them: a ``str``
sentence is encoded with the model's ``encoding`` (UTF-8 by default, what KenLM's module does with a
``str``), a ``bytes`` sentence is taken as it is. With ``sentence="line"`` (default) every non-blank line of a document is
a sentence (``<s>`` ... ``</s>``) and the document's log10 probability is the sum over its lines;
with ``sentence="document"`` the whole document is one sentence. ``tokens`` counts the scored tokens
(words plus one ``</s>`` per sentence when ``eos``), the denominator of the perplexity
``10 ** (-log10_prob / tokens)``, as KenLM's ``perplexity``.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from cutext.kernels import trie as trie_kernels
from cutext.kernels._version import __version__
from cutext.kernels.backend import ARRAY_STACK, array_module, is_gpu_object, resolve_backend, to_host
from cutext.pipelines._result import RunResult, atomic_directory, check_output, write_json
from cutext.stages.arpa import ArpaModel, read_arpa
from cutext.stages.read import CorpusError

DIST_BATCH_OUTPUTS = 1 << 26  # floats per batch of dense distributions in top_k_next


def _as_string_array(texts) -> pa.Array:
    """Sentences as a LargeStringArray (``str`` input) or a LargeBinaryArray (``bytes`` input, as KenLM takes).

    Items are ``str``, ``bytes``, or lists of words (of one kind); a mix of ``str`` and ``bytes`` is a
    TypeError (which codec would join them is the caller's choice).
    """
    if isinstance(texts, (str, bytes)):
        raise TypeError("pass a list of sentences, not one string (use [sentence])")
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    if isinstance(texts, pa.Array):
        if pa.types.is_binary(texts.type) or pa.types.is_large_binary(texts.type):
            return texts.cast(pa.large_binary())
        return texts.cast(pa.large_string())
    if isinstance(texts, pd.Series):
        texts = texts.astype(object).tolist()
    items = [t if isinstance(t, (str, bytes)) else (b" " if t and isinstance(t[0], bytes) else " ").join(t)
             for t in texts]
    kinds = {type(t) for t in items}
    if kinds == {bytes}:
        return pa.array(items, pa.large_binary())
    if bytes in kinds:
        raise TypeError("sentences mix str and bytes; pass all str or all bytes")
    return pa.array(items, pa.large_string())


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


class NGramModel:
    """An ARPA back-off language model in a forward trie, on the CPU (numba) or the GPU (CUDA).

    Build with :meth:`load`. The trie is built on the host with vectorized numpy and copied to the
    device once when ``backend="gpu"``.

    Attributes
    ----------
    order : int
    vocab : pyarrow.LargeStringArray (V,)
        Word of each id as text (``vocab_bytes`` decoded with ``encoding``; invalid bytes as ``\\xNN``).
    vocab_bytes : pyarrow.LargeBinaryArray (V,)
        The exact bytes of each word: what queries are matched against (as KenLM).
    encoding : str
        Codec of ``str`` queries and of ``vocab`` (``load(encoding=...)``).
    counts : list of int
        n-grams per order.
    unk_id, bos_id, eos_id : int
        ``unk_id`` is the model's ``<unk>`` or ``<UNK>`` (KenLM takes both), or the ``<unk>`` added at
        log10 probability -100 when the file has neither.
    backend : {"cpu", "gpu"}
    trie : cutext.kernels.trie.Trie
    """

    def __init__(self, arpa: ArpaModel, trie, backend: str = "cpu", load_seconds: dict | None = None):
        self.path = arpa.path
        self.order = arpa.order
        self.vocab = arpa.vocab
        self.counts = [len(o.prob) for o in arpa.orders]
        self.unk_id, self.bos_id, self.eos_id = arpa.unk_id, arpa.bos_id, arpa.eos_id
        self.unk_added = arpa.unk_added
        self.encoding = arpa.encoding
        self.vocab_bytes = (arpa.vocab_bytes if arpa.vocab_bytes is not None
                            else arpa.vocab.cast(pa.large_string()).cast(pa.large_binary()))
        self.backend = backend
        self.host_trie = trie
        self.trie = trie.to_device() if backend == "gpu" else trie
        self.load_seconds = load_seconds or {}
        self._vocab_index = None

    @classmethod
    def load(cls, path, backend: str = "auto", encoding: str = "utf-8") -> NGramModel:
        """Read an ARPA file (plain, gzip, bz2, xz) and build the trie.

        Parameters
        ----------
        path : str or os.PathLike
        backend : {"auto", "cpu", "gpu"}
            Where the trie lives and sentences are scored.  ``"auto"`` (the default of every
            loader) = the GPU when cupy is installed and a device is visible, else the CPU.
        encoding : str
            Codec of the model's words (default UTF-8; e.g. ``"latin-1"``). Words stay bytes; this
            decides how ``str`` queries become bytes and how ``vocab`` shows them. Bytes that are not
            valid in it are kept exactly (one warning names the first such line), as KenLM reads them.

        Raises
        ------
        FileNotFoundError
        cutext.stages.arpa.ArpaError
            Malformed ARPA input (message names the file and line).
        ValueError
            ``encoding`` is not a codec that writes ASCII as ASCII.
        """
        from cutext.stages.trie import build_trie

        be = resolve_backend(backend, needs=ARRAY_STACK)
        t0 = time.perf_counter()
        arpa = read_arpa(path, encoding=encoding)
        t1 = time.perf_counter()
        trie = build_trie(arpa)
        t2 = time.perf_counter()
        model = cls(arpa, trie, be)
        t3 = time.perf_counter()
        model.load_seconds = {"read_arpa": t1 - t0, "build_trie": t2 - t1, "to_device": t3 - t2}
        return model

    # ------------------------------------------------------------------ vocabulary
    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def _word_bytes(self, words) -> pa.Array:
        """Words (str or bytes; list or pyarrow array) as a LargeBinaryArray: ``str`` encoded with
        ``encoding``; a word that the codec cannot write is null (an unknown word)."""
        if isinstance(words, pa.ChunkedArray):
            words = words.combine_chunks()
        if not isinstance(words, pa.Array):
            words = list(words)
            if all(isinstance(w, bytes) for w in words):
                return pa.array(words, pa.large_binary())
            words = pa.array(words, pa.large_string())
        if pa.types.is_binary(words.type) or pa.types.is_large_binary(words.type):
            return words.cast(pa.large_binary())
        words = words.cast(pa.large_string())
        if self.encoding == "utf-8":
            return words.view(pa.large_binary())

        def enc(w):
            try:
                return None if w is None else w.encode(self.encoding)
            except UnicodeEncodeError:
                return None
        return pa.array([enc(w) for w in words.to_pylist()], pa.large_binary())

    def word_ids(self, words) -> np.ndarray:
        """int32 ids of words (a list or pyarrow array of str or bytes); unknown words -> ``unk_id``.

        Matched byte for byte against ``vocab_bytes`` (``str`` encoded with ``encoding``), as KenLM's
        ``vocab.Index``; ``<unk>`` and ``<UNK>`` are ``unk_id`` (KenLM keeps neither in its table).
        """
        return pc.index_in(self._word_bytes(words), value_set=self.vocab_bytes).fill_null(self.unk_id).to_numpy(
            zero_copy_only=False).astype(np.int32)

    def encode(self, sentences):
        """Split sentences on ASCII white space (KenLM's module: ``bytes.split()``) and map words to ids.

        Parameters
        ----------
        sentences : list of str or of bytes (or of lists of words), pandas Series or pyarrow array

        Returns
        -------
        ids : int32 (n_words,)
        offsets : int64 (n_sent + 1,)
        """
        texts = _as_string_array(sentences)
        as_bytes = pa.types.is_large_binary(texts.type)
        if as_bytes:  # the ASCII kernels read bytes: run them on a view, the words go back to bytes
            texts = texts.view(pa.large_string())
        arr = pc.ascii_trim_whitespace(texts)
        if arr.null_count:
            arr = arr.fill_null("")
        split = pc.ascii_split_whitespace(arr)
        lens = pc.list_value_length(split).to_numpy(zero_copy_only=False).astype(np.int64)
        blank = pc.equal(pc.binary_length(arr), 0).to_numpy(zero_copy_only=False)
        words = split.flatten()
        if as_bytes:
            words = words.view(pa.large_binary())
        if blank.any():  # a blank string splits into one empty word: drop it
            words = words.filter(pa.array(~np.repeat(blank, lens)))
            lens[blank] = 0
        offsets = np.zeros(len(lens) + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        return self.word_ids(words), offsets

    # ------------------------------------------------------------------ scoring
    def score_ids(self, ids, offsets, bos: bool = True, eos: bool = True):
        """Score id sequences on the model's backend; see :func:`cutext.kernels.trie.score_tokens`.

        Raises
        ------
        ValueError
            ``eos`` with a model that has no ``</s>``.
        """
        if eos and self.eos_id < 0:
            raise ValueError(f"{self.path}: the model has no </s>; score with eos=False")
        if self.backend == "gpu" and not is_gpu_object(ids):  # host ids to the trie's device
            xp = array_module(self.trie.keys)
            ids, offsets = xp.asarray(ids), xp.asarray(offsets)
        return trie_kernels.score_tokens(self.trie, ids, offsets, bos_id=self.bos_id, eos_id=self.eos_id,
                                         bos=bos, eos=eos)

    def score(self, sentences, bos: bool = True, eos: bool = True) -> Scores:
        """log10 probabilities of sentences, per sentence and per token (KenLM's ``score`` / ``full_scores``).

        Parameters
        ----------
        sentences : list of str (or of lists of words), pandas Series or pyarrow array
            Words are separated by ASCII white space; case is kept.
        bos : bool
            Begin in the context ``<s>`` (not scored).
        eos : bool
            Score ``</s>`` at the end of each sentence.

        Returns
        -------
        Scores
            ``log10_prob`` equals KenLM's ``Model.score(s, bos, eos)`` (summed in float64, KenLM
            sums in float32) and ``full_scores(i)`` equals KenLM's ``full_scores``.
        """
        ids, offsets = self.encode(sentences)
        tok, nlen, total, out_off = self.score_ids(ids, offsets, bos, eos)
        tok, nlen, total, out_off = (to_host(x) for x in (tok, nlen, total, out_off))
        oov_words = ids == self.unk_id
        if eos:
            oov = np.zeros(len(tok), bool)
            sent_of_word = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
            oov[np.arange(len(ids)) + sent_of_word] = oov_words
        else:
            oov = oov_words
        return Scores(total, np.diff(out_off), tok, nlen, oov, out_off)

    def full_scores(self, sentence: str, bos: bool = True, eos: bool = True) -> list:
        """One sentence as KenLM's ``full_scores``: list of ``(log10 prob, ngram_length, oov)``."""
        return self.score([sentence], bos, eos).full_scores(0)

    def perplexity(self, sentences, bos: bool = True, eos: bool = True) -> float:
        """Perplexity ``10 ** (-sum log10 p / tokens)`` of sentences (or a text file, one sentence a line).

        ``tokens`` counts ``</s>`` once per sentence when ``eos`` (KenLM's ``perplexity``).
        """
        if isinstance(sentences, (str, Path)):
            with open(sentences, "rb") as fh:  # bytes, matched as they are (as KenLM's module reads bytes)
                sentences = fh.read().splitlines()
        return self.score(sentences, bos, eos).perplexity

    # ------------------------------------------------------------------ next-word queries
    def _contexts(self, contexts, bos: bool):
        arr = _as_string_array(contexts)
        if bos:
            b = pa.types.is_large_binary(arr.type)
            arr = pc.binary_join_element_wise(pa.scalar(b"<s>" if b else "<s>", arr.type), arr,
                                              pa.scalar(b" " if b else " ", arr.type))
        return self.encode(arr)

    def _order(self, order):
        n = self.order if order is None else int(order)
        if not 1 <= n <= self.order:
            raise ValueError(f"order must be in 1..{self.order}, got {order}")
        return n

    def context_entries(self, contexts, order=None, bos: bool = False):
        """Trie entries of the context suffixes: array (n_contexts, order - 1), -1 where absent."""
        n = self._order(order)
        ids, offsets = self._contexts(contexts, bos)
        xp = array_module(self.trie.keys)  # the ids go where the trie is
        ids, offsets = xp.asarray(ids), xp.asarray(offsets)
        return trie_kernels.suffix_entries(self.trie, ids, offsets, n - 1)

    def next_word_distribution(self, contexts, order=None, sparse: bool = False, bos: bool = False,
                               log10=None):
        """The distribution over the whole vocabulary of the word following each context (paper 003, 3.3).

        Parameters
        ----------
        contexts : list of str (or of lists of words)
            The preceding words; only the last ``order - 1`` matter.
        order : int, optional
            Use the model's n-grams of orders 1 .. ``order`` (default: the model's order).
        sparse : bool
            False: the dense back-off distribution, every word of the vocabulary.
            True: paper 003's per-order answer -- only the n-grams ``(context, w)`` stored at exactly
            ``order`` (the children of the context's trie node), as a CSR matrix.
        bos : bool
            Prepend ``<s>`` to every context.
        log10 : bool, optional
            Values as log10 (default for dense) or as probabilities (default for sparse, so that the
            implicit zeros of the sparse matrix are probability 0: "not stored").

        Returns
        -------
        dense: float32 array (n_contexts, V), numpy (cpu) or cupy (gpu)
            Row r sums to 1 (in probability) for a normalized model; entries equal
            :meth:`score` of ``context + w``; the column of ``<s>`` is -inf (probability 0: ``<s>``
            is a context, never a next word).
        sparse: scipy.sparse.csr_matrix (cpu) or cupyx.scipy.sparse.csr_matrix (gpu), (n_contexts, V)
            float32, column indices sorted within each row.

        Raises
        ------
        ValueError
            ``order`` outside 1..N.
        """
        n = self._order(order)
        log10 = (not sparse) if log10 is None else bool(log10)
        if sparse:
            return self._sparse_distribution(contexts, n, bos, log10)
        ctx = self.context_entries(contexts, n, bos)
        out = self._dense(ctx, n)
        if not log10:
            xp = array_module(self.trie.keys)
            out = xp.power(xp.float32(10.0), out)
        return out

    def _dense(self, ctx, n):
        out = trie_kernels.fill_distribution(self.trie, ctx, n)
        if self.bos_id >= 0:  # <s> is a context, never a next word
            out[:, self.bos_id] = -np.inf
        return out

    def _sparse_distribution(self, contexts, n, bos, log10):
        xp = array_module(self.trie.keys)
        C = len(contexts)
        V = self.vocab_size
        t = self.trie
        if n == 1:
            lo = xp.zeros(C, np.int64)
            hi = xp.full(C, V, np.int64)
        else:
            h = self.context_entries(contexts, n, bos)[:, n - 2].astype(np.int64)
            ok = h >= 0
            hc = xp.where(ok, h, 0)
            lo = xp.where(ok, t.child[hc].astype(np.int64), 0)
            hi = xp.where(ok, t.child[hc + 1].astype(np.int64), 0)
        cnt = hi - lo
        indptr = xp.zeros(C + 1, np.int64)
        xp.cumsum(cnt, out=indptr[1:])
        total = int(indptr[-1])
        ar = xp.arange(total, dtype=np.int64)
        row = xp.searchsorted(indptr, ar, side="right") - 1
        pos = ar + (lo - indptr[:-1])[row]
        cols = t.keys[pos]
        vals = t.prob[pos]
        if n == 1 and self.bos_id >= 0:  # <s> is a context, never a next word
            keep = cols != self.bos_id
            cols, vals = cols[keep], vals[keep]
            indptr = indptr - xp.arange(C + 1, dtype=np.int64)
        if not log10:
            # 10**x in float64, then rounded to float32: CUDA's powf and numpy's float32 power differ
            # in the last bit; the float64 results round to the same float32 (GPU == CPU, tested).
            vals = xp.power(10.0, vals.astype(np.float64)).astype(np.float32)
        if xp is np:
            import scipy.sparse as sp

            return sp.csr_matrix((vals, cols, indptr), shape=(C, V))
        import cupyx.scipy.sparse as csp

        return csp.csr_matrix((vals, cols.astype(np.int32), indptr.astype(np.int32)), shape=(C, V))

    def top_k_next(self, contexts, k: int = 10, order=None, bos: bool = False) -> TopK:
        """The k most probable next words of each context (back-off distribution over the vocabulary).

        Parameters
        ----------
        contexts : list of str
        k : int
        order : int, optional
        bos : bool

        Returns
        -------
        TopK
            Host arrays; ties are broken by the smaller word id.
        """
        n = self._order(order)
        from cutext.stages.params import count

        k = min(count("k", k, lo=1), self.vocab_size)
        xp = array_module(self.trie.keys)
        ctx_all = self.context_entries(contexts, n, bos)
        C = ctx_all.shape[0]
        batch = max(1, DIST_BATCH_OUTPUTS // self.vocab_size)
        ids_out = np.empty((C, k), np.int32)
        p_out = np.empty((C, k), np.float32)
        for a in range(0, C, batch):
            d = self._dense(ctx_all[a:a + batch], n)
            order_ = xp.argsort(-d, axis=1, kind="stable")[:, :k] if xp is np else xp.argsort(-d, axis=1)[:, :k]
            vals = xp.take_along_axis(d, order_, axis=1)
            order_, vals = to_host(order_), to_host(vals)
            ids_out[a:a + batch] = order_
            p_out[a:a + batch] = vals
        words = self.vocab.take(pa.array(ids_out.ravel())).to_pylist() if C else []
        return TopK(ids_out, p_out, [words[i * k:(i + 1) * k] for i in range(C)])

    # ------------------------------------------------------------------ memory
    def memory(self) -> dict:
        """Bytes of the trie arrays (``keys``, ``prob``, ``backoff``, ``child``, ``total``,
        ``bytes_per_ngram``) and of the vocabulary strings (``vocab_bytes``, host only)."""
        d = self.host_trie.nbytes()
        d["vocab_bytes"] = int(self.vocab.nbytes)
        d["n_ngrams"] = self.host_trie.n_ngrams
        return d

    def bytes_per_ngram(self) -> float:
        """Trie bytes per n-gram (without the vocabulary strings)."""
        return float(self.host_trie.nbytes()["bytes_per_ngram"])

    def summary(self) -> dict:
        return {"path": str(self.path), "order": self.order, "counts": self.counts,
                "vocab_size": self.vocab_size, "unk_added": self.unk_added, "backend": self.backend,
                "memory": self.memory(), "load_seconds": self.load_seconds}


# ----------------------------------------------------------------------------- corpus pipeline

def _sentences_of(texts: pa.Array, sentence: str):
    """Sentences of documents and the document of each sentence (blank lines dropped in line mode)."""
    if sentence == "document":
        return texts, np.arange(len(texts), dtype=np.int64)
    lines = pc.split_pattern(texts, "\n")
    parent = pc.list_parent_indices(lines).to_numpy().astype(np.int64)
    flat = lines.flatten()
    keep = pc.greater(pc.utf8_length(pc.ascii_trim_whitespace(flat)), 0).to_numpy(zero_copy_only=False)
    idx = np.flatnonzero(keep)
    return flat.take(pa.array(idx)), parent[idx]


def score_corpus(path, out, *, model, backend: str = "auto", sentence: str = "line", bos: bool = True,
                 eos: bool = True, format="auto", text_column=None, id_column=None, blocksize=64 << 20,
                 encoding="utf-8", storage_options=None, glob=None, overwrite: bool = True, progress: bool = True,
                 client=None, scheduler="auto", n_workers=None) -> RunResult:
    """Score every document of a corpus with an n-gram model; write Parquet (per document) and JSON.

    Parameters
    ----------
    path : str, os.PathLike or list
        Corpus (see :func:`cutext.stages.read.read_corpus` for the formats).
    out : str or os.PathLike
        Output directory (appears only when complete).
    model : str, os.PathLike or NGramModel
        An ARPA file or a loaded model (whose backend is then used).
    backend : {"auto", "cpu", "gpu"}
        Where the trie is queried when ``model`` is a path (reading and word splitting run on the host).
    sentence : {"line", "document"}
        ``"line"``: every non-blank line of a document is a sentence; ``"document"``: one sentence.
    bos, eos : bool
        KenLM's sentence boundaries.
    format, text_column, id_column, blocksize, encoding, storage_options, glob
        Reader settings (:func:`cutext.stages.read.read_corpus`).
    overwrite, progress : bool
    client, scheduler, n_workers
        Accepted for the common pipeline signature; the corpus is read piece by piece in-process.

    Returns
    -------
    RunResult
        ``counts``: n_docs, n_sentences, n_tokens, n_oov, empty_docs; ``params`` records the model.

    Raises
    ------
    FileNotFoundError
    CorpusError
        Unreadable input or an empty corpus (message names the file).
    ArpaError
        Malformed model (message names the file and line).
    OutputDirectoryError (FileExistsError)
        ``out`` is not a new or empty directory nor an earlier ngram output, or is the working
        directory, an input or a parent of one (:mod:`cutext.stages.output`); checked before any work.
    """
    from cutext.stages.read import plan, read_piece

    check_output(out, kind="cutext.ngram", manifest="ngram.json", inputs=[path, model], overwrite=overwrite)

    if sentence not in ("line", "document"):
        raise ValueError(f"sentence must be 'line' or 'document', got {sentence!r}")
    timings = {}
    t0 = time.perf_counter()
    if isinstance(model, NGramModel):
        lm = model
    else:
        lm = NGramModel.load(model, backend=backend)
    timings["load_model"] = time.perf_counter() - t0
    fs, pieces, fmt = plan(path, format=format, text_column=text_column, id_column=id_column,
                           blocksize=blocksize, encoding=encoding, storage_options=storage_options,
                           glob=glob)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(pieces), desc="ngram", unit="piece")
    tables = []
    n_docs = 0
    rows_seen: dict[int, int] = {}
    t_read = t_score = 0.0
    totals = {"n_sentences": 0, "n_tokens": 0, "n_oov": 0}
    sum_log10 = 0.0
    try:
        with atomic_directory(out, overwrite=overwrite, kind="cutext.ngram", manifest="ngram.json",
                              inputs=[path, model]) as tmp:
            for piece in pieces:
                ta = time.perf_counter()
                df = read_piece(piece, fs)
                tb = time.perf_counter()
                t_read += tb - ta
                nd = len(df)
                src = pa.array(df["source_id"], pa.large_string(), from_pandas=True)
                if piece.numbered and src.null_count:
                    r0 = rows_seen.get(piece.file_index, 0)
                    prefix = f"{piece.labels[0]}:" if piece.labels[0] else ""
                    rows = [f"{prefix}{r}" for r in range(r0, r0 + nd)]
                    src = pc.if_else(src.is_null(), pa.array(rows, pa.large_string()), src)
                rows_seen[piece.file_index] = rows_seen.get(piece.file_index, 0) + nd
                texts = pa.array(df["text"], pa.large_string(), from_pandas=True).fill_null("")
                sents, doc_of = _sentences_of(texts, sentence)
                sc = lm.score(sents, bos=bos, eos=eos)
                logp = np.bincount(doc_of, weights=sc.log10_prob, minlength=nd).astype(np.float64)
                toks = np.bincount(doc_of, weights=sc.tokens, minlength=nd).astype(np.int64)
                nsent = np.bincount(doc_of, minlength=nd).astype(np.int32)
                oov = np.bincount(doc_of, weights=sc.oov_counts(), minlength=nd).astype(np.int64)
                with np.errstate(divide="ignore", invalid="ignore"):
                    ppl = np.where(toks > 0, 10.0 ** (-logp / np.maximum(toks, 1)), np.nan)
                tables.append(pa.table({
                    "doc_id": pa.array(np.arange(n_docs, n_docs + nd, dtype=np.int64)),
                    "source_id": src, "sentences": pa.array(nsent), "tokens": pa.array(toks),
                    "oov": pa.array(oov), "log10_prob": pa.array(logp), "perplexity": pa.array(ppl)}))
                n_docs += nd
                totals["n_sentences"] += len(sc)
                totals["n_tokens"] += int(toks.sum())
                totals["n_oov"] += int(oov.sum())
                sum_log10 += float(sc.log10_prob.sum())
                t_score += time.perf_counter() - tb
                if bar is not None:
                    bar.update(1)
            if n_docs == 0:
                raise CorpusError(f"{path}: the corpus holds no document")
            tw = time.perf_counter()
            table = pa.concat_tables(tables)
            pq.write_table(table, tmp / "scores.parquet")
            empty = int(pc.sum(pc.equal(table["tokens"], 0)).as_py() or 0)
            ppl_all = 10.0 ** (-sum_log10 / totals["n_tokens"]) if totals["n_tokens"] else float("nan")
            timings.update({"read": t_read, "score": t_score, "write": time.perf_counter() - tw})
            counts = {"n_docs": n_docs, **totals, "empty_docs": empty, "partitions": len(pieces)}
            write_json(tmp / "ngram.json", {
                "kind": "cutext.ngram", "version": __version__, "source": str(path), "format": fmt,
                "model": lm.summary(), "sentence": sentence, "bos": bos, "eos": eos,
                "log10_prob": sum_log10, "perplexity": ppl_all, "counts": counts, "timings": timings,
                "backend": lm.backend, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    finally:
        if bar is not None:
            bar.close()
    params = {"model": str(lm.path), "order": lm.order, "sentence": sentence, "bos": bos, "eos": eos,
              "format": fmt, "perplexity": ppl_all, "log10_prob": sum_log10}
    return RunResult("ngram", Path(out).absolute(), lm.backend, "sync", 1, counts, timings, params)


# ----------------------------------------------------------------------------- command line

def add_cli(sub):
    """Register ``ngram``: score a corpus into Parquet, or standard input line by line (path ``-``)."""
    p = sub.add_parser("ngram", help="score text with an ARPA n-gram language model",
                       description="Score a corpus with an ARPA model into Parquet (per-document log10 "
                                   "probability, tokens, perplexity), or, with path '-', score standard "
                                   "input line by line and print 'log10_prob<TAB>tokens<TAB>oov<TAB>"
                                   "perplexity' per line.")
    p.add_argument("path", nargs="+", help="corpus (files, directory, glob), or '-' for standard input")
    p.add_argument("--model", required=True, help="ARPA file (plain, .gz, .bz2, .xz)")
    p.add_argument("--out", default=None, help="output directory (required unless path is '-')")
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", "gpu"])
    p.add_argument("--sentence", default="line", choices=["line", "document"],
                   help="sentence unit inside a document (default: every non-blank line)")
    p.add_argument("--no-bos", action="store_true", help="do not start sentences in the <s> context")
    p.add_argument("--no-eos", action="store_true", help="do not score </s>")
    p.add_argument("--format", default="auto", choices=["auto", "files", "lines", "jsonl", "parquet", "csv"])
    p.add_argument("--text-column", default=None)
    p.add_argument("--id-column", default=None)
    p.add_argument("--glob", default="auto", choices=["auto", "on", "off"],
                   help="paths as glob patterns: auto (default: a path that exists is itself, else *?[ are "
                        "patterns), on (always), off (never)")
    p.add_argument("--batch-lines", type=int, default=10000, help="stdin lines scored per batch")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(cli_main=_cli_main)


def _cli_main(args) -> int:
    bos, eos = not args.no_bos, not args.no_eos
    if args.path == ["-"]:
        lm = NGramModel.load(args.model, backend=args.backend)
        out = sys.stdout
        total_lp, total_tok = 0.0, 0

        def flush(lines):
            nonlocal total_lp, total_tok
            sc = lm.score(lines, bos=bos, eos=eos)
            oov = sc.oov_counts()
            for lp, nt, no in zip(sc.log10_prob, sc.tokens, oov):
                ppl = 10.0 ** (-lp / nt) if nt else float("nan")
                out.write(f"{lp:.6f}\t{int(nt)}\t{int(no)}\t{ppl:.4f}\n")
            total_lp += float(sc.log10_prob.sum())
            total_tok += int(sc.tokens.sum())

        batch = []
        for line in sys.stdin:
            batch.append(line.rstrip("\n"))
            if len(batch) >= args.batch_lines:
                flush(batch)
                out.flush()
                batch = []
        if batch:
            flush(batch)
        ppl = 10.0 ** (-total_lp / total_tok) if total_tok else float("nan")
        print(f"total log10_prob={total_lp:.6f} tokens={total_tok} perplexity={ppl:.4f}", file=sys.stderr)
        return 0
    if args.out is None:
        print("error: --out is required unless the path is '-'", file=sys.stderr)
        return 2
    path = args.path[0] if len(args.path) == 1 else args.path
    r = score_corpus(path, args.out, model=args.model, backend=args.backend, sentence=args.sentence, bos=bos,
                     eos=eos, format=args.format, text_column=args.text_column, id_column=args.id_column,
                     glob={"auto": None, "on": True, "off": False}[args.glob], progress=not args.no_progress)
    print(json.dumps(r.to_dict(), indent=2, default=str) if args.json else str(r))
    return 0
