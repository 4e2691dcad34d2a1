"""LDA inputs and the LDA-chunk stage (EZLDA EZLDA, section IV).

Inputs become a :class:`BagOfWords` (documents x words counts in CSR):

* :func:`read_uci` — UCI Bag of Words: ``docword.*.txt[.gz]`` (three header lines D, W, NNZ, then
  ``docID wordID count``, 1-based) and ``vocab.*.txt`` (one word per line);
* :func:`read_ldac` — LDA-C: one document per line, ``n id:count ...`` (0-based ids), with an
  optional vocabulary file (one word per line);
* :func:`bow_from_corpus` — any corpus the readers take, through the tokenize and encode stages.

Bad input raises :class:`LDAInputError` (a ``CorpusError``, so a ``ValueError``) naming the file and
the 1-based line.  Empty documents are kept (they have no tokens; their topic distribution is the
prior) and counted.

:func:`build_chunks` is the stage proper:

1. word ids relabelled by frequency (the most frequent word gets id 0; words with no token are
   dropped from the model vocabulary; ties keep the input order);
2. documents partitioned into ``n_chunks`` contiguous chunks of near-equal token counts (one chunk
   per dask partition / GPU);
3. tokens expanded from the counts and sorted by word id inside every chunk (documents ascending
   within a word, so the order is deterministic);
4. a document inverted index: ``doc_ptr`` (CSR offsets over documents) and ``doc_tok`` (positions of
   every document's tokens in the chunked token list, EZLDA Fig. 5);
5. the dense/sparse split of W: a word with more tokens than K can occupy every topic and is a
   dense row; after the relabelling those are the ids ``0 .. n_dense - 1``, so every chunk's token
   list is ``T_dense`` followed by ``T_sparse`` (``chunk_split``).
"""
from __future__ import annotations

import gzip
import io
import numbers
import os
from dataclasses import dataclass, field
from pathlib import Path

import numba
import numpy as np
import pyarrow as pa

import cutext.kernels._numba_cache  # noqa: F401  # before the decorators: it places and stamps their cache
from cutext.kernels.backend import to_host
from cutext.stages.readers.base import CorpusError
from cutext.stages.readers.frames import input_label, is_frame
from cutext.stages.runtime.reprs import short_repr
from cutext.stages.text.frontend import corpus_session
from cutext.stages.text.public import Counts


class LDAInputError(CorpusError):
    """Malformed LDA input (message: ``file:line: what is wrong``)."""


INT32_MAX = 2**31 - 1
"""Largest count, id and corpus token total: counts, word and document ids and the topic counts
``n_wk``/``n_k`` of the sampler are int32 (the CUDA kernels' type)."""


@dataclass
class BagOfWords:
    """Documents x words counts.

    Attributes
    ----------
    doc_ptr : int64 (D+1,)
        CSR row offsets into ``word`` / ``count``.
    word : int32 (nnz,)
        0-based word ids (index into ``vocab``).
    count : int32 (nnz,)
        Occurrences, >= 1.
    vocab : list of str, length V
    doc_names : list of str, length D
    source : str
    """

    doc_ptr: np.ndarray
    word: np.ndarray
    count: np.ndarray
    vocab: list
    doc_names: list
    source: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def n_docs(self) -> int:
        return int(self.doc_ptr.shape[0] - 1)

    @property
    def n_tokens(self) -> int:
        return int(self.count.sum(dtype=np.int64))

    def __repr__(self) -> str:
        return short_repr(self, ["n_docs", "n_tokens"], V=len(self.vocab), nnz=len(self.word), source=self.source)

    @property
    def doc_lengths(self) -> np.ndarray:
        """int64 (D,) tokens per document."""
        c = np.concatenate([[0], np.cumsum(self.count, dtype=np.int64)])
        return c[self.doc_ptr[1:]] - c[self.doc_ptr[:-1]]


def _open_text(path):
    path = str(path)
    if path.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def read_vocab(path) -> list:
    """One word per line (UCI ``vocab.*.txt``, LDA-C ``.tokens``); trailing whitespace stripped."""
    with _open_text(path) as fh:
        return [line.rstrip("\r\n").strip() for line in fh]


def _header_int(line: str, path, lineno: int, what: str) -> int:
    try:
        v = int(line.strip())
    except ValueError:
        raise LDAInputError(f"{path}:{lineno}: bad UCI header: expected the number of {what}, "
                            f"got {line.strip()!r}") from None
    if v < 0:
        raise LDAInputError(f"{path}:{lineno}: bad UCI header: negative number of {what} ({v})")
    if v > INT32_MAX:
        raise LDAInputError(f"{path}:{lineno}: bad UCI header: {v} {what} is more than {INT32_MAX:,} "
                            "(ids and counts are int32)")
    return v


def _token_total_check(cnt: np.ndarray, path, line_of) -> None:
    """The corpus' token total must fit int32 (the sampler's topic counts); names the line where it
    first does not."""
    total = np.cumsum(cnt, dtype=np.int64)
    if total.shape[0] and total[-1] > INT32_MAX:
        i = int(np.searchsorted(total, INT32_MAX, side="right"))
        raise LDAInputError(f"{path}:{line_of(i)}: the corpus exceeds {INT32_MAX:,} tokens here (topic "
                            "counts are int32); split it or drop rare words")


def read_uci(docword, vocab=None) -> BagOfWords:
    """Read a UCI Bag of Words corpus.

    Parameters
    ----------
    docword : path
        ``docword.<name>.txt`` or ``.txt.gz``: lines 1-3 are D, W, NNZ; then ``docID wordID count``
        triples (1-based ids, any order).
    vocab : path, optional
        ``vocab.<name>.txt`` (W lines).  Default: ``vocab.<name>.txt`` next to ``docword`` if it
        exists, else the words are named ``w<id>``.

    Returns
    -------
    BagOfWords
        D documents (those absent from the triples are empty), word ids 0-based.

    Raises
    ------
    LDAInputError
        Bad header (D, W or NNZ negative or above 2**31 - 1), a line that is not three integers, a
        docID outside 1..D, a wordID outside 1..W, a count outside 1..2**31 - 1, more than
        2**31 - 1 tokens in all, or a triple count different from NNZ (message: file and line).
    FileNotFoundError
    """
    docword = Path(docword)
    if vocab is None:
        name = docword.name
        for suffix in (".gz", ".txt"):
            name = name.removesuffix(suffix)
        guess = docword.parent / (name.replace("docword.", "vocab.", 1) + ".txt")
        vocab = guess if name.startswith("docword.") and guess.exists() else None
    with _open_text(docword) as fh:
        head = [fh.readline() for _ in range(3)]
        if any(h == "" for h in head):
            raise LDAInputError(f"{docword}:{sum(h != '' for h in head) + 1}: bad UCI header: file ends "
                                "before the three header lines D, W, NNZ")
        D = _header_int(head[0], docword, 1, "documents D")
        Wn = _header_int(head[1], docword, 2, "words W")
        NNZ = _header_int(head[2], docword, 3, "nonzero counts NNZ")
        body = fh.read()
    try:
        arr = np.array(body.split(), dtype=np.int64)
        bad = arr.shape[0] % 3 != 0
    except (ValueError, OverflowError):
        arr, bad = None, True
    if bad:
        for i, line in enumerate(body.splitlines(), start=4):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 3 or not all(p.lstrip("-").isdigit() for p in parts):
                raise LDAInputError(f"{docword}:{i}: expected 'docID wordID count' (three integers), got {line!r}")
            for name, p in zip(("docID", "wordID", "count"), parts):
                if abs(int(p)) > INT32_MAX:
                    raise LDAInputError(f"{docword}:{i}: {name} {p} out of range (at most {INT32_MAX:,})")
        raise LDAInputError(f"{docword}: malformed triples")  # pragma: no cover
    trip = arr.reshape(-1, 3)
    doc, wid, cnt = trip[:, 0], trip[:, 1], trip[:, 2]
    line_of = _nonblank_line_numbers(body, 4) if trip.shape[0] else None

    def fail(mask, msg):
        i = int(np.flatnonzero(mask)[0])
        raise LDAInputError(f"{docword}:{line_of[i]}: {msg(i)}")

    if trip.shape[0]:
        m = (doc < 1) | (doc > D)
        if m.any():
            fail(m, lambda i: f"docID {doc[i]} out of range 1..{D} (header D)")
        m = (wid < 1) | (wid > Wn)
        if m.any():
            fail(m, lambda i: f"wordID {wid[i]} out of range 1..{Wn} (header W)")
        m = cnt < 1
        if m.any():
            fail(m, lambda i: f"count {cnt[i]} < 1")
        m = cnt > INT32_MAX
        if m.any():
            fail(m, lambda i: f"count {cnt[i]} out of range 1..{INT32_MAX:,} (counts are int32)")
        _token_total_check(cnt, docword, lambda i: line_of[i])
    if trip.shape[0] != NNZ:
        raise LDAInputError(f"{docword}:3: header NNZ = {NNZ} but the file holds {trip.shape[0]} triples")
    order = np.argsort(doc, kind="stable")
    doc, wid, cnt = doc[order] - 1, wid[order] - 1, cnt[order]
    doc_ptr = np.zeros(D + 1, dtype=np.int64)
    np.cumsum(np.bincount(doc, minlength=D), out=doc_ptr[1:])
    words = read_vocab(vocab) if vocab is not None else [f"w{i + 1}" for i in range(Wn)]
    if len(words) < Wn:
        raise LDAInputError(f"{vocab}: {len(words)} words but {docword} declares W = {Wn}")
    return BagOfWords(doc_ptr, wid.astype(np.int32), cnt.astype(np.int32), words[:Wn],
                      [str(i + 1) for i in range(D)], str(docword))


def _nonblank_line_numbers(body: str, first: int) -> np.ndarray:
    """1-based line number of each non-blank line of ``body`` (its first line is ``first``)."""
    out = [i for i, line in enumerate(body.splitlines(), start=first) if line.strip()]
    return np.asarray(out, dtype=np.int64)


def read_ldac(path, vocab=None) -> BagOfWords:
    """Read an LDA-C corpus: line ``i`` is document ``i``, ``n id:count id:count ...`` (0-based ids).

    Parameters
    ----------
    path : path
        ``.ldac`` / ``.dat`` file (optionally ``.gz``).
    vocab : path, optional
        One word per line.  Default: ``<stem>.tokens`` or ``vocab.txt`` next to the file if present,
        else words are named ``w<id>`` and V = 1 + the largest id.

    Raises
    ------
    LDAInputError
        A malformed pair, ``n`` different from the number of pairs, a count outside
        1..2**31 - 1, an id outside the vocabulary (without one: above 2**31 - 2), or more than
        2**31 - 1 tokens in all (message: file and line).
    """
    path = Path(path)
    if vocab is None:
        for cand in (path.with_suffix(".tokens"), path.parent / "vocab.txt"):
            if cand.exists():
                vocab = cand
                break
    words = read_vocab(vocab) if vocab is not None else None
    V = len(words) if words is not None else None
    ptr = [0]
    wl: list = []
    cl: list = []
    total = 0
    id_max = (V - 1) if V is not None else INT32_MAX - 1
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            parts = line.split()
            if not parts:
                ptr.append(len(wl))
                continue
            try:
                n = int(parts[0])
                pairs = [p.split(":") for p in parts[1:]]
                ids = [int(a) for a, _ in pairs]
                cs = [int(b) for _, b in pairs]
            except ValueError:
                raise LDAInputError(f"{path}:{lineno}: expected 'n id:count ...' (LDA-C), "
                                    f"got {line.strip()[:80]!r}") from None
            if n != len(ids):
                raise LDAInputError(f"{path}:{lineno}: declares {n} distinct words but lists {len(ids)}")
            for a, c in zip(ids, cs):
                if a < 0 or a > id_max:
                    raise LDAInputError(f"{path}:{lineno}: word id {a} out of range 0..{id_max}"
                                        + (f" (vocabulary {vocab})" if V is not None else " (ids are int32)"))
                if c < 1:
                    raise LDAInputError(f"{path}:{lineno}: count {c} < 1 for word id {a}")
                if c > INT32_MAX:
                    raise LDAInputError(f"{path}:{lineno}: count {c} out of range 1..{INT32_MAX:,} for word id "
                                        f"{a} (counts are int32)")
            total += sum(cs)
            if total > INT32_MAX:
                raise LDAInputError(f"{path}:{lineno}: the corpus exceeds {INT32_MAX:,} tokens here (topic "
                                    "counts are int32); split it or drop rare words")
            wl.extend(ids)
            cl.extend(cs)
            ptr.append(len(wl))
    word = np.asarray(wl, dtype=np.int32)
    if words is None:
        V = int(word.max()) + 1 if word.size else 0
        words = [f"w{i}" for i in range(V)]
    n_docs = len(ptr) - 1
    return BagOfWords(np.asarray(ptr, dtype=np.int64), word, np.asarray(cl, dtype=np.int32), words,
                      [str(i) for i in range(n_docs)], str(path))


def bow_from_tokens(token_lists, vocab: list, source: str = "") -> BagOfWords:
    """Bag of words of lists of tokens against a fixed vocabulary; unknown tokens are dropped.

    Returns
    -------
    BagOfWords with ``extra["unknown"]`` = number of dropped tokens.
    """
    index = {w: i for i, w in enumerate(vocab)}
    ptr = [0]
    wl: list = []
    cl: list = []
    unknown = 0
    for toks in token_lists:
        ids = [index.get(t, -1) for t in toks]
        unknown += sum(1 for i in ids if i < 0)
        ids = np.asarray([i for i in ids if i >= 0], dtype=np.int64)
        u, c = np.unique(ids, return_counts=True)
        wl.extend(u.tolist())
        cl.extend(c.tolist())
        ptr.append(len(wl))
    return BagOfWords(np.asarray(ptr, dtype=np.int64), np.asarray(wl, dtype=np.int32),
                      np.asarray(cl, dtype=np.int32), list(vocab), [str(i) for i in range(len(ptr) - 1)],
                      source, {"unknown": unknown})


def bow_from_corpus(path, *, tokenizer=None, format="auto", backend="cpu", client=None, scheduler="auto",
                    n_workers=None, **read_kw) -> BagOfWords:
    """Read, tokenize, encode and count any corpus the readers take, as a bag of words.

    The corpus front end (:func:`cutext.stages.text.frontend.corpus_session`) runs the stages under the
    one compute policy, so a ``client`` runs them on its cluster.

    Parameters
    ----------
    path : str, os.PathLike or list
        See :func:`cutext.stages.readers.source.read_corpus`.
    tokenizer : TokenizerConfig, optional
    format : str
        Reader format (``"auto"``, ``"files"``, ``"lines"``, ``"jsonl"``, ``"parquet"``, ``"csv"``, ``"smart"``).
    backend : {"cpu", "gpu"}
        The resolved backend of the stages; the result is on the host.
    client : distributed.Client, optional
        Run the stages on this cluster.
    scheduler : {"auto", "sync", "threads", "cluster"}
        Without a client: :func:`cutext.stages.runtime.compute.compute_context`'s policy.
    n_workers : int, optional
        Workers of a local cluster.
    **read_kw
        ``text_column``, ``id_column``, ``blocksize``, ``encoding``, ``storage_options``.

    Returns
    -------
    BagOfWords
        Vocabulary sorted by UTF-8 bytes (the encode stage's ids minus one), documents in reader
        order, words ascending within a document; ``extra["timings"]`` holds the front end's stage
        seconds and ``extra["scheduler"]`` / ``extra["n_workers"]`` where they ran.

    Raises
    ------
    CorpusError
        Unreadable input or a corpus without documents.
    """

    with corpus_session(path, tokenizer, backend, client=client, scheduler=scheduler, n_workers=n_workers,
                        format=format, **read_kw) as c:
        names = c.source_ids()
        # one row per distinct (document, term): order by document, then word
        bow = bag_of_words(Counts(c.counts, c.df, c.lengths, c.n_docs, c.n_terms), c.vocab,
                           doc_names=names["source_id"].astype(str).tolist(), source=input_label(path))
    bow.extra.update({"timings": dict(c.timings), "scheduler": c.info.scheduler, "n_workers": c.info.n_workers})
    return bow


def detect_format(path) -> str:
    """``"uci"`` for ``docword.*``, ``"ldac"`` for ``*.ldac`` / ``*.dat``, else ``"corpus"``."""

    if isinstance(path, (list, tuple)) or is_frame(path):
        return "corpus"
    name = os.path.basename(str(path).rstrip("/"))
    if name.startswith("docword.") and os.path.isfile(str(path)):
        return "uci"
    base = name.removesuffix(".gz")
    if base.endswith((".ldac", ".dat", ".lda-c")) and os.path.isfile(str(path)):
        return "ldac"
    return "corpus"


def read_bow(path, *, format="auto", vocab=None, tokenizer=None, backend="cpu", **read_kw) -> tuple:
    """Any LDA input as a bag of words: ``(BagOfWords, resolved format)``.

    ``format``: ``"auto"`` (:func:`detect_format`), ``"uci"``, ``"ldac"``, or a corpus format of the
    readers (``"files"``, ``"lines"``, ``"jsonl"``, ``"parquet"``, ``"csv"``, ``"smart"``; ``"corpus"`` = auto).
    ``backend`` (resolved) and ``read_kw`` (reader settings, ``client``, ``scheduler``,
    ``n_workers``) go to :func:`bow_from_corpus`; UCI and LDA-C files are read on the host.
    """
    fmt = detect_format(path) if format == "auto" else format
    if fmt == "uci":
        return read_uci(path, vocab), fmt
    if fmt == "ldac":
        return read_ldac(path, vocab), fmt
    rf = "auto" if fmt == "corpus" else fmt
    return bow_from_corpus(path, tokenizer=tokenizer, format=rf, backend=backend, **read_kw), fmt


# ----------------------------------------------------------------------------- vocabulary pruning

def check_df_limit(name: str, value):
    """``min_df`` / ``max_df`` checked as scikit-learn's ``CountVectorizer`` reads them: an int is a number
    of documents (>= 1), a float a fraction of the documents in [0, 1].

    Returns
    -------
    int or float
        ``value`` as an int (numpy integers too) or a float.

    Raises
    ------
    ValueError
        A bool, a non-number, NaN, an int < 1, a float outside [0, 1] (the message says how to write a
        number of documents), ``max_df=0.0``.
    """
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        if value < 1:
            raise ValueError(f"{name}={value!r}: an int is a number of documents, >= 1 (a float in [0, 1] is a "
                             "fraction of the documents)")
        return int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= float(value) <= 1.0:
        hint = (f"; for {int(value)} documents give the int {int(value)}" if isinstance(value, numbers.Real)
                and not isinstance(value, bool) and float(value) > 1 and float(value).is_integer() else "")
        raise ValueError(f"{name}={value!r}: give an int (a number of documents, >= 1) or a float (a fraction of "
                         f"the documents, in [0, 1]){hint}")
    if name == "max_df" and float(value) == 0.0:
        raise ValueError("max_df=0.0 keeps no word (a float is a fraction of the documents, in (0, 1])")
    return float(value)


def document_frequencies(bow: BagOfWords) -> np.ndarray:
    """int64 (V,): the documents holding each word of ``bow.vocab`` (a (document, word) pair counted once)."""
    V = len(bow.vocab)
    doc = np.repeat(np.arange(bow.n_docs, dtype=np.int64), np.diff(bow.doc_ptr))
    pairs = np.unique(doc * V + bow.word.astype(np.int64))
    return np.bincount(pairs % V, minlength=V).astype(np.int64)


def prune_bow(bow: BagOfWords, *, stopwords=frozenset(), min_df=1, max_df=1.0) -> BagOfWords:
    """Drop stopwords and the words outside the document-frequency bounds from a bag of words.

    The filter of gensim's ``Dictionary.filter_extremes`` (``no_below`` / ``no_above``) with the
    conventions of scikit-learn's ``CountVectorizer``: a word is kept when ``lo <= df <= hi``, with ``lo =
    min_df`` (an int) or ``min_df * D`` (a float) and ``hi`` likewise from ``max_df``; ``df`` counts the
    documents holding the word.  Applied after counting, so it sees the whole corpus.  The vocabulary and
    the documents are kept (a pruned word has no token left and the chunk stage drops it; a document
    left without a word stays, empty).

    Parameters
    ----------
    bow : BagOfWords
    stopwords : frozenset of str
        Words to drop by their vocabulary term (lowercased before matching; UCI / LDA-C vocabularies).
        Text corpora drop them in the tokenizer instead and pass none here.
    min_df, max_df : int or float
        See :func:`check_df_limit`.

    Returns
    -------
    BagOfWords
        ``bow`` itself when nothing is dropped, else a new one; either way ``extra["pruning"]`` records
        ``min_df``, ``max_df``, ``min_docs`` / ``max_docs`` (the bounds in documents), ``words_kept``,
        ``words_removed``, ``tokens_removed``, ``stopwords_removed`` (words) and ``most_frequent_removed``
        (up to 10 terms, by tokens).

    Raises
    ------
    ValueError
        ``min_df`` / ``max_df`` as :func:`check_df_limit` refuses them, or bounds that no word can meet.
    LDAInputError (ValueError)
        Fewer than two words are left (the message gives the bounds and the most frequent words removed).
    """
    min_df, max_df = check_df_limit("min_df", min_df), check_df_limit("max_df", max_df)
    D, V = bow.n_docs, len(bow.vocab)
    lo = min_df if isinstance(min_df, int) else min_df * D
    hi = max_df if isinstance(max_df, int) else max_df * D
    if hi < lo:
        raise ValueError(f"min_df={min_df!r} keeps the words in at least {lo:g} documents and max_df={max_df!r} "
                         f"those in at most {hi:g} of the {D:,}: no word can meet both")
    df = document_frequencies(bow)
    keep = (df >= lo) & (df <= hi)
    stop = np.zeros(V, dtype=bool)
    if stopwords:
        stop = np.fromiter((str(t).lower() in stopwords for t in bow.vocab), dtype=bool, count=V)
        keep &= ~stop
    present = df > 0
    freq = np.bincount(bow.word, weights=bow.count, minlength=V).astype(np.int64)
    removed = present & ~keep
    top = np.flatnonzero(removed)[np.argsort(-freq[removed], kind="stable")[:10]]
    report = {"min_df": min_df, "max_df": max_df, "min_docs": float(lo), "max_docs": float(hi),
              "words_kept": int((present & keep).sum()), "words_removed": int(removed.sum()),
              "tokens_removed": int(freq[removed].sum()), "stopwords_removed": int((present & stop).sum()),
              "most_frequent_removed": [str(bow.vocab[i]) for i in top]}
    if report["words_kept"] < 2 and report["words_removed"]:
        raise LDAInputError(f"{bow.source + ': ' if bow.source else ''}pruning leaves {report['words_kept']} word(s) "
                            f"of {int(present.sum()):,} "
                            f"(min_df={min_df!r}: df >= {lo:g}; max_df={max_df!r}: df <= {hi:g} of {D:,} documents"
                            f"{'; stopwords' if stopwords else ''}); most frequent removed: "
                            f"{report['most_frequent_removed'][:5]}; LDA needs at least two -- lower min_df or "
                            "raise max_df")
    if not report["words_removed"]:
        bow.extra["pruning"] = report
        return bow
    entry_keep = keep[bow.word]
    kept = np.concatenate([[0], np.cumsum(entry_keep, dtype=np.int64)])
    doc_ptr = kept[bow.doc_ptr].astype(np.int64)
    out = BagOfWords(doc_ptr, bow.word[entry_keep], bow.count[entry_keep], bow.vocab, bow.doc_names, bow.source,
                     dict(bow.extra))
    out.extra["pruning"] = report
    return out


# ----------------------------------------------------------------------------- chunking

@dataclass
class Chunks:
    """The chunked token list of EZLDA section IV (host arrays; see :func:`build_chunks`).

    Attributes
    ----------
    word, doc : int32 (N,)
        Relabelled word id and document of every token; sorted by (word, doc) inside each chunk.
    keys : int64 (N,)
        Position of the token in document-major order (the RNG counter; independent of chunking).
    doc_ptr : int64 (D+1,)
        Document-major offsets; document ``d`` has ``doc_ptr[d+1] - doc_ptr[d]`` tokens.
    doc_tok : int64 (N,)
        Inverted index: ``doc_tok[doc_ptr[d]:doc_ptr[d+1]]`` are the positions of d's tokens.
    chunk_ptr : int64 (C+1,)
        Token offsets of the chunks.
    chunk_docs : int64 (C+1,)
        Document offsets of the chunks (documents are contiguous).
    chunk_split : int64 (C,)
        First token of ``T_sparse`` in each chunk (tokens before it have dense words).
    vocab : list of str, length V
        Relabelled vocabulary (``vocab[i]`` has the i-th largest token count).
    word_count : int64 (V,)
        Tokens per relabelled word (non-increasing).
    old_id : int64 (V,)
        Input word id of each relabelled word.
    n_dense : int
        Words with more than K tokens (dense rows of W).
    """

    word: np.ndarray
    doc: np.ndarray
    keys: np.ndarray
    doc_ptr: np.ndarray
    doc_tok: np.ndarray
    chunk_ptr: np.ndarray
    chunk_docs: np.ndarray
    chunk_split: np.ndarray
    vocab: list
    word_count: np.ndarray
    old_id: np.ndarray
    n_dense: int
    K: int

    @property
    def n_tokens(self) -> int:
        return int(self.word.shape[0])

    @property
    def n_docs(self) -> int:
        return int(self.doc_ptr.shape[0] - 1)

    @property
    def V(self) -> int:
        return len(self.vocab)

    def __repr__(self) -> str:
        return short_repr(self, ["n_tokens", "n_docs", "V", "K", "n_dense"], chunks=len(self.chunk_ptr) - 1)

    def chunk(self, c: int) -> slice:
        return slice(int(self.chunk_ptr[c]), int(self.chunk_ptr[c + 1]))

    def memory_estimate(self) -> dict:
        """Bytes of W and D in the dense, the sparse-D and the hybrid layouts (EZLDA Table I).

        ``dense_w``: V x K int32.  ``hybrid_w``: n_dense x K int32 plus, for each sparse word,
        min(tokens, K) 32-bit (topic, count) pairs (16 + 16 bits, section IV-B) and a row offset.
        ``sparse_d``: one 32-bit pair per token at most, plus offsets.  ``tokens``: word, doc (int32),
        key (int64), topic (int32) and the inverted index (int64) per token.
        """
        K = self.K
        sparse_counts = self.word_count[self.n_dense:]
        return {
            "dense_w": int(self.V) * K * 4,
            "hybrid_w": int(self.n_dense) * K * 4 + int(np.minimum(sparse_counts, K).sum()) * 4
                        + (int(self.V) - int(self.n_dense) + 1) * 8,
            "sparse_d": self.n_tokens * 4 + (self.n_docs + 1) * 8,
            "dense_d": self.n_docs * K * 4,
            "tokens": self.n_tokens * (4 + 4 + 8 + 4 + 8),
        }


@numba.njit(cache=True)
def _expand(doc_ptr, new_word, count, n_tokens, doc_out, word_out):
    p = 0
    for d in range(doc_ptr.shape[0] - 1):
        for j in range(doc_ptr[d], doc_ptr[d + 1]):
            w = new_word[j]
            for _ in range(count[j]):
                doc_out[p] = d
                word_out[p] = w
                p += 1


def build_chunks(bow: BagOfWords, K: int, n_chunks: int = 1, relabel: bool = True) -> Chunks:
    """The LDA-chunk stage: relabel, partition, sort, index (EZLDA section IV-B, IV-C, V-B).

    Parameters
    ----------
    bow : BagOfWords
    K : int
        Number of topics (decides the dense/sparse split of W).
    n_chunks : int
        Chunks of near-equal token counts (each a contiguous range of documents).
    relabel : bool
        Relabel words by frequency and drop unused words (training).  False keeps the input ids and
        the whole vocabulary (inference against a trained model's vocabulary); no corpus checks.

    Returns
    -------
    Chunks

    Raises
    ------
    LDAInputError
        The corpus has no token, or a single distinct word (LDA has nothing to separate).
    ValueError
        ``K < 2`` or ``n_chunks < 1``.
    """
    if K < 2:
        raise ValueError(f"K must be >= 2 topics, got {K}")
    if n_chunks < 1:
        raise ValueError(f"n_chunks must be >= 1, got {n_chunks}")
    n_words_in = len(bow.vocab)
    freq = np.bincount(bow.word, weights=bow.count, minlength=n_words_in).astype(np.int64)
    N = int(freq.sum())
    if not relabel:
        old_id = np.arange(n_words_in, dtype=np.int64)
        new_of_old = np.arange(n_words_in, dtype=np.int32)
        word_count = freq
        n_dense = int((word_count > K).sum())
    elif N == 0:
        raise LDAInputError(f"{bow.source}: the corpus has no token ({bow.n_docs} documents, all empty)")
    if relabel:
        order = np.argsort(-freq, kind="stable")
        used = int((freq > 0).sum())
        if used < 2:
            raise LDAInputError(f"{bow.source}: the corpus has a single distinct word "
                                f"({bow.vocab[int(order[0])]!r}); LDA needs at least two")
        old_id = order[:used].astype(np.int64)
        new_of_old = np.full(n_words_in, -1, dtype=np.int32)
        new_of_old[old_id] = np.arange(used, dtype=np.int32)
        word_count = freq[old_id]
        n_dense = int((word_count > K).sum())

    doc_len = bow.doc_lengths
    doc_ptr = np.zeros(bow.n_docs + 1, dtype=np.int64)
    np.cumsum(doc_len, out=doc_ptr[1:])
    doc_dm = np.empty(N, dtype=np.int32)
    word_dm = np.empty(N, dtype=np.int32)
    _expand(bow.doc_ptr, new_of_old[bow.word], bow.count, N, doc_dm, word_dm)

    # chunks: contiguous documents, boundaries at the documents nearest to i * N / C tokens
    targets = np.arange(1, n_chunks, dtype=np.float64) * N / n_chunks
    cut = np.searchsorted(doc_ptr, targets, side="left")
    chunk_docs = np.concatenate([[0], np.clip(cut, 0, bow.n_docs), [bow.n_docs]]).astype(np.int64)
    chunk_docs = np.maximum.accumulate(chunk_docs)
    chunk_ptr = doc_ptr[chunk_docs]

    perm = np.empty(N, dtype=np.int64)
    split = np.empty(n_chunks, dtype=np.int64)
    for c in range(n_chunks):
        a, b = int(chunk_ptr[c]), int(chunk_ptr[c + 1])
        o = np.argsort(word_dm[a:b], kind="stable") + a  # stable: documents stay ascending within a word
        perm[a:b] = o
        split[c] = a + int(np.searchsorted(word_dm[o], n_dense, side="left"))
    word = word_dm[perm]
    doc = doc_dm[perm]
    keys = perm  # document-major position of each token
    doc_tok = np.empty(N, dtype=np.int64)
    doc_tok[perm] = np.arange(N, dtype=np.int64)
    vocab = [bow.vocab[int(i)] for i in old_id]
    return Chunks(word, doc, keys, doc_ptr, doc_tok, chunk_ptr.astype(np.int64), chunk_docs, split, vocab,
                  word_count, old_id, n_dense, int(K))


_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on a uint64 array (wrapping arithmetic)."""
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def document_keys(bow: BagOfWords, ch: Chunks) -> np.ndarray:
    """RNG keys of a fold-in that depend on each document's own words only, not on its batch.

    ``key = h(d) + (position of the token inside its document)`` (wrapping uint64, viewed as int64),
    with ``h(d)`` = the wrapping sum over the document's bag-of-words entries of
    ``splitmix64(word_id * 2^32 + count)`` (model word ids, ``build_chunks(relabel=False)``).  A
    document therefore draws the same topics whichever other documents are folded in with it and in
    whichever partition or order it arrives: :meth:`cutext.pipelines.lda.LDAModel.transform` of a list,
    a pandas frame or any partitioning of a dask frame agree row for row.  (Training keeps the
    document-major position of :func:`build_chunks`; two documents with the same bag of words draw the
    same topics, as the same input should.)

    Parameters
    ----------
    bow : BagOfWords
        The documents folded in (word ids of the model vocabulary).
    ch : Chunks
        ``build_chunks(bow, K, n_chunks, relabel=False)``.

    Returns
    -------
    int64 (N,) keys in ``ch``'s token order.
    """
    with np.errstate(over="ignore"):
        entry = _mix64(bow.word.astype(np.uint64) * np.uint64(1 << 32) + bow.count.astype(np.uint64))
        csum = np.concatenate([[np.uint64(0)], np.cumsum(entry, dtype=np.uint64)])
        h = csum[bow.doc_ptr[1:]] - csum[bow.doc_ptr[:-1]]  # wrapping sum per document
        d = ch.doc.astype(np.int64)
        key = h[d] + (ch.keys - ch.doc_ptr[d]).astype(np.uint64)  # keys: document-major position
    return key.view(np.int64)


# ----------------------------------------------------------------------------- from the public stages
def lda_chunks(counts, vocab=None, *, K: int, n_chunks: int = 1, doc_names=None, source: str = ""):
    """LDA's chunked token list (EZLDA section IV) of a counted corpus.

    Parameters
    ----------
    counts : Counts or BagOfWords
        From :func:`count` (its counts are taken to the host, one entry per distinct
        (document, term)), or a bag of words already on the host (UCI / LDA-C readers).
    vocab : pyarrow string array or list of str, shape (V,)
        With ``Counts``: the vocabulary of :func:`encode` (term id ``i + 1`` is ``vocab[i]``).
    K : int
        Topics (decides the dense/sparse split of W).
    n_chunks : int
        Chunks of near-equal token counts (one per GPU / worker).
    doc_names : list of str, optional
        With ``Counts``: a name per document (default the doc id).
    source : str
        Named in errors.

    Returns
    -------
    Chunks
        Host arrays: word, doc (int32, (N,)), doc_ptr (int64, (D+1,)), ... (see its docstring).

    Raises
    ------
    LDAInputError (ValueError)
        No token, or a single distinct word.
    ValueError
        ``K < 2``, ``n_chunks < 1``, a ``Counts`` without ``vocab``.
    """
    if isinstance(counts, BagOfWords):
        return build_chunks(counts, K, n_chunks)
    if vocab is None:
        raise ValueError("lda_chunks(Counts) needs the vocabulary of encode() (vocab=)")
    bow = bag_of_words(counts, vocab, doc_names=doc_names, source=source)
    return build_chunks(bow, K, n_chunks)


def bag_of_words(counts: Counts, vocab, *, doc_names=None, source: str = ""):
    """The counts as a host :class:`BagOfWords` (documents x words CSR,
    word id = term id - 1, words ascending within a document)."""
    c = to_host(counts.counts[["doc_id", "term_id", "tf"]].compute())
    host = {k: c[k].to_numpy(np.int64) for k in ("doc_id", "term_id", "tf")}
    n_docs = counts.n_docs
    word = host["term_id"] - 1
    order = np.lexsort((word, host["doc_id"]))
    udoc, uword, cnt = host["doc_id"][order], word[order], host["tf"][order]
    doc_ptr = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(np.bincount(udoc, minlength=n_docs), out=doc_ptr[1:])
    vocab = vocab.to_pylist() if isinstance(vocab, (pa.Array, pa.ChunkedArray)) else list(vocab)
    names = [str(i) for i in range(n_docs)] if doc_names is None else list(doc_names)
    return BagOfWords(doc_ptr, uword.astype(np.int32), cnt.astype(np.int32), vocab, names, source)
