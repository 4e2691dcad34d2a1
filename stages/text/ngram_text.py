"""Text to word ids for the n-gram LM, where the text is: sentences, words and vocabulary ids in one pass.

The GPU text path of :mod:`cutext.pipelines.ngram`: the bytes of a strings column go
to the device once (or are already there, in a cudf column), and sentences, words and word ids are found
there by the kernels of :mod:`cutext.kernels.wordsplit`; only per-document numbers come back.  The same
functions run on numpy arrays with the numba twins (the oracle of the GPU tests).

Rules (those of the CPU path, :meth:`cutext.pipelines.ngram.NGramModel.encode`, i.e. KenLM's module):

* words are the runs of bytes between ASCII white space (``bytes.split()``), matched to the model's words
  byte for byte; unknown words become ``unk_id``;
* ``sentence="document"``: every row is one sentence (a blank row is a sentence of no word);
* ``sentence="line"``: every line (split at ``\\n``) of a row is a sentence, and lines without a word are
  dropped (the CPU path drops the lines that are blank after trimming ASCII white space: the same lines).

All arrays are int64 unless stated; the functions take the array module from the data (numpy or cupy).
"""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa

from cutext.kernels.backend import array_module, is_gpu_object
from cutext.kernels.tokenize import count_newlines, utf8_valid
from cutext.kernels.wordsplit import VocabHash, lookup_words, segment_sum, word_bounds
from cutext.stages.readers.base import BOM, CorpusError, _is_utf8, _read_errors
from cutext.stages.readers.device import _local_plain, _piece_range, piece_bytes, piece_device_bytes
from cutext.stages.readers.pread import READ_CHUNK, READ_THREADS, _pread_chunk
from cutext.stages.text.token_bytes import cudf_string_buffers

# threads and bytes a read of :func:`count_lines_rows` (it runs beside a worker's scoring); "numpy" counts with
# ``count_nonzero(buf == 10)`` (a temporary and two calls that take the GIL a chunk) instead of the numba kernel
COUNT_THREADS = READ_THREADS
COUNT_CHUNK = READ_CHUNK
COUNT_WITH = "numba"

SENTENCE_MODES = ("line", "document")


class TextBuffers:
    """A column of texts as its bytes and row offsets (numpy or cupy), e.g. from :func:`read_lines_buffers`.

    Attributes
    ----------
    chars : uint8 (n_bytes,)
    offsets : int64 (n_rows + 1,)
    """

    def __init__(self, chars, offsets):
        self.chars = chars
        self.offsets = offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def on_gpu(self) -> bool:
        return is_gpu_object(self.chars)


def read_lines_buffers(piece, fs, device: bool = True):
    """The documents of a ``format="lines"`` piece straight to (device) buffers, or None where the
    general reader must run (another format, an archive, a codec other than UTF-8, invalid UTF-8).

    The bytes are read as they are (:func:`cutext.stages.readers.device.piece_bytes`: the reader's byte range,
    decompressed, BOM removed; for the device :func:`~cutext.stages.readers.device.piece_device_bytes`, through
    pinned staging buffers), checked there to be valid UTF-8 (:func:`cutext.kernels.tokenize.utf8_valid`,
    the numba twin on the host), and the lines found there: row r ends after its ``\n``.  The terminator
    stays inside the row: it is white space, so the words, sentences and scores are those of the reader's
    lines (which drop it). Text that is not valid UTF-8 returns None: the reader replaces such bytes (and
    counts them), and the scores must be those of the replaced text.

    Returns
    -------
    TextBuffers or None

    Raises
    ------
    CorpusError
        The file cannot be read (the message names it).
    """

    if piece.format != "lines" or piece.archive is not None or len(piece.paths) != 1:
        return None
    if not _is_utf8(piece.options.get("encoding", "utf-8")):
        return None
    if device:
        import cupy


        chars = piece_device_bytes(piece, fs)
        xp = cupy
    else:
        xp, chars = np, piece_bytes(piece, fs)
    if not utf8_valid(chars):
        return None
    ends = xp.flatnonzero(chars == 10).astype(np.int64) + 1
    parts = [xp.zeros(1, np.int64), ends]
    if len(chars) and (len(ends) == 0 or int(ends[-1]) != len(chars)):
        parts.append(xp.full(1, len(chars), np.int64))
    return TextBuffers(chars, xp.concatenate(parts))


def lines_rows_counted(piece, fs) -> bool:
    """Whether :func:`count_lines_rows` counts the rows of ``piece``: a ``lines`` piece of one uncompressed
    local file, not in an archive, in UTF-8."""
    return (piece.format == "lines" and piece.archive is None and len(piece.paths) == 1
            and _is_utf8(piece.options.get("encoding", "utf-8")) and _local_plain(fs, piece))


def count_lines_rows(piece, fs) -> int:
    """The rows (documents) of a ``lines`` piece, counted from its bytes without decoding or keeping them:
    the ``\\n`` bytes of the byte range the reader takes (:func:`cutext.stages.readers.device.read_piece_bytes`),
    plus a last line without one; a file's byte order mark is no row.  The row rule of
    :func:`read_lines_buffers` (``len`` of its buffers) and of the host reader (one document a line, empty
    lines included), for a piece of :func:`lines_rows_counted`.  The range is read in chunks on threads
    (``os.preadv`` and numpy's count release the GIL), so counting costs about one read from the page cache.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        The piece is not one :func:`lines_rows_counted` accepts.
    CorpusError
        The file cannot be read (the message names it).
    """
    import threading
    from concurrent.futures import ThreadPoolExecutor

    if not lines_rows_counted(piece, fs):
        raise ValueError(f"{piece.paths[0]}: only an uncompressed local lines piece in UTF-8 is counted from its bytes")
    local = threading.local()

    try:
        with open(piece.paths[0], "rb") as fh:
            start, end, tail = _piece_range(fh, piece)
            if end <= start:
                return 0
            fd = fh.fileno()

            chunk, numba_count = COUNT_CHUNK, COUNT_WITH == "numba"

            def newlines(a: int) -> tuple[int, int]:
                n = min(chunk, end - a)
                buf = getattr(local, "buf", None)
                if buf is None or len(buf) < chunk:
                    buf = local.buf = np.empty(chunk, np.uint8)
                _pread_chunk(fd, memoryview(buf)[:n], a)
                got = count_newlines(buf[:n]) if numba_count else np.count_nonzero(buf[:n] == 10)
                return int(got), int(buf[n - 1])

            starts = range(start, end, chunk)
            if len(starts) == 1:
                got = [newlines(start)]
            else:
                with ThreadPoolExecutor(min(COUNT_THREADS, len(starts))) as pool:
                    got = list(pool.map(newlines, starts))
            head = os.pread(fd, len(BOM), 0) if start == 0 else b""
    except _read_errors() as exc:
        raise CorpusError(f"{piece.paths[0]}: cannot read: {type(exc).__name__}: {exc}") from exc
    rows = sum(n for n, _ in got) + tail.count(b"\n")
    size = end - start + len(tail) - (len(BOM) if head == BOM else 0)
    last = tail[-1] if tail else got[-1][1]
    return rows + (1 if size > 0 and last != 10 else 0)


def _cudf_buffers(s):
    """(chars uint8, offsets int64 (n + 1,)) cupy views of a cudf strings Series (nulls are empty rows)."""
    import pylibcudf as plc


    if s.null_count:
        s = s.fillna("")
    col, chars, offsets = cudf_string_buffers(s)
    if col.type().id() != plc.TypeId.STRING:
        raise TypeError(f"text must be strings, got a cudf column of {s.dtype}")
    return chars, offsets


def _arrow_text(texts) -> pa.Array:
    """A pyarrow LargeBinary view of texts (pyarrow array / chunked array, pandas Series, list of str/bytes)."""
    import pandas as pd

    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    if isinstance(texts, pd.Series):
        texts = pa.array(texts, from_pandas=True)
        if pa.types.is_null(texts.type):
            texts = texts.cast(pa.large_string())
    elif not isinstance(texts, pa.Array):
        texts = list(texts)
        texts = pa.array(texts, pa.large_binary() if texts and all(isinstance(t, bytes) for t in texts)
                         else pa.large_string())
    t = texts.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        texts = texts.cast(pa.large_string()).view(pa.large_binary())
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        texts = texts.cast(pa.large_binary())
    elif pa.types.is_string_view(t) or pa.types.is_binary_view(t):
        texts = texts.cast(pa.large_binary())
    else:
        raise TypeError(f"text must be strings (or bytes), got {t}")
    return texts


def text_buffers(texts, device: bool):
    """The bytes and row offsets of a column of texts, on the host (numpy) or the device (cupy).

    Parameters
    ----------
    texts : pyarrow (large) string / binary array, pandas Series of str, list of str / bytes, or a cudf
        strings Series (already on the device: viewed, not copied).  Nulls are empty rows.
    device : bool
        Return cupy arrays (one host-to-device copy of the bytes and offsets for host input).

    Returns
    -------
    chars : uint8 (n_bytes,)
    offsets : int64 (n_rows + 1,)
        Row r is ``chars[offsets[r]:offsets[r + 1]]`` (``offsets[0]`` may be > 0).

    Raises
    ------
    TypeError
        A column that is not strings.
    """
    if isinstance(texts, TextBuffers):
        if texts.on_gpu == device:
            return texts.chars, texts.offsets
        if device:
            import cupy

            return cupy.asarray(texts.chars), cupy.asarray(texts.offsets)
        return texts.chars.get(), texts.offsets.get()
    if is_gpu_object(texts):
        chars, offsets = _cudf_buffers(texts)
        if device:
            return chars, offsets
        return chars.get(), offsets.get()
    arr = _arrow_text(texts)
    bufs = arr.buffers()
    n = len(arr)
    offsets = np.frombuffer(bufs[1], np.int64, count=n + 1, offset=arr.offset * 8) if bufs[1] is not None \
        else np.zeros(n + 1, np.int64)
    chars = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None and len(bufs[2]) else np.zeros(0, np.uint8)
    if arr.null_count and len(chars):
        # a null row may own bytes in Arrow: make it empty (the CPU path fills nulls with "")
        valid = arr.is_valid().to_numpy(zero_copy_only=False)
        lens = np.where(valid, np.diff(offsets), 0)
        keep = np.repeat(valid, np.diff(offsets))
        chars = chars[offsets[0]:offsets[-1]][keep]
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
    if not device:
        return chars, offsets
    import cupy

    lo, hi = int(offsets[0]), int(offsets[-1])
    return cupy.asarray(chars[lo:hi]), cupy.asarray(offsets - lo)


def sentences(chars, offsets, starts, sentence: str = "line"):
    """Sentences of the rows and the words of each sentence.

    Parameters
    ----------
    chars : uint8 (n_bytes,)
    offsets : int64 (n_rows + 1,)
    starts : int64 (n_words,)
        Word starts from :func:`cutext.kernels.wordsplit.word_bounds`.
    sentence : {"line", "document"}

    Returns
    -------
    word_offsets : int64 (n_sent + 1,)
        Sentence s holds the words ``word_offsets[s]:word_offsets[s + 1]``.
    sent_doc : int64 (n_sent,)
        Row of each sentence (non-decreasing).

    Raises
    ------
    ValueError
        ``sentence`` is not "line" or "document".
    """
    xp = array_module(chars)
    D = len(offsets) - 1
    if sentence == "document":
        return xp.searchsorted(starts, offsets, side="left").astype(np.int64), xp.arange(D, dtype=np.int64)
    if sentence != "line":
        raise ValueError(f"sentence must be one of {SENTENCE_MODES}, got {sentence!r}")
    base, stop = int(offsets[0]), int(offsets[-1])
    nl = xp.flatnonzero(chars[base:stop] == 10).astype(np.int64) + base
    nl_doc = xp.searchsorted(offsets, nl, side="right").astype(np.int64) - 1
    # a row's first sentence starts at the row; one more starts after each newline; sentence index of
    # row d's first one: d + (newlines before it); of the one after newline k: k + 1 + (row of newline k)
    first = xp.arange(D, dtype=np.int64) + xp.searchsorted(nl, offsets[:-1], side="left").astype(np.int64)
    after = xp.arange(len(nl), dtype=np.int64) + 1 + nl_doc
    S = D + len(nl)
    begin = xp.empty(S + 1, np.int64)
    begin[first] = offsets[:-1]
    begin[after] = nl + 1
    begin[S] = stop
    sdoc = xp.empty(S, np.int64)
    sdoc[first] = xp.arange(D, dtype=np.int64)
    sdoc[after] = nl_doc
    woff = xp.searchsorted(starts, begin, side="left").astype(np.int64)
    keep = xp.flatnonzero(woff[1:] > woff[:-1])  # lines with a word
    word_offsets = xp.concatenate([woff[keep], woff[-1:]])
    return word_offsets, sdoc[keep]


def encode_text(chars, offsets, vocab: VocabHash, unk_id: int, sentence: str = "document"):
    """Word ids and sentence structure of a column of texts (bytes and row offsets), where they are.

    Parameters
    ----------
    chars : uint8 (n_bytes,), numpy or cupy
    offsets : int64 (n_rows + 1,)
    vocab : VocabHash
        The model's words, on the side of ``chars``.
    unk_id : int
    sentence : {"line", "document"}

    Returns
    -------
    ids : int32 (n_words,)
        Word ids, sentences back to back.
    word_offsets : int64 (n_sent + 1,)
    sent_doc : int64 (n_sent,)
        Row of each sentence.
    """
    starts, ends = word_bounds(chars, offsets)
    ids = lookup_words(chars, starts, ends, vocab, unk_id)
    word_offsets, sent_doc = sentences(chars, offsets, starts, sentence)
    return ids, word_offsets, sent_doc


def document_scores(ids, word_offsets, sent_doc, sent_total, n_docs: int, unk_id: int, eos: bool) -> dict:
    """Per-document sums of sentence scores (the columns of the ngram pipeline's ``scores.parquet``).

    Parameters
    ----------
    ids : int32 (n_words,)
    word_offsets : int64 (n_sent + 1,)
    sent_doc : int64 (n_sent,), non-decreasing
    sent_total : float64 (n_sent,)
        log10 probability of each sentence (:func:`cutext.kernels.trie.score_tokens`).
    n_docs : int
    unk_id : int
    eos : bool
        Whether ``</s>`` was scored (one more token per sentence).

    Returns
    -------
    dict of arrays (n_docs,) of the input's module
        ``sentences`` int32, ``tokens`` int64, ``oov`` int64 (words scored as ``<unk>``), ``log10_prob``
        float64 (sentences added in order: the bits of ``numpy.bincount``), ``perplexity`` float64
        (``10 ** (-log10_prob / tokens)``, NaN without tokens).
    """
    xp = array_module(ids)
    doc_soff = xp.searchsorted(sent_doc, xp.arange(n_docs + 1, dtype=np.int64), side="left").astype(np.int64)
    zero = xp.zeros(1, np.int64)
    ntok = (word_offsets[1:] - word_offsets[:-1]) + (1 if eos else 0)
    cs_tok = xp.concatenate([zero, xp.cumsum(ntok).astype(np.int64)])
    cs_unk = xp.concatenate([zero, xp.cumsum((ids == unk_id).astype(np.int64))])
    oov_sent = cs_unk[word_offsets[1:]] - cs_unk[word_offsets[:-1]]
    cs_oov = xp.concatenate([zero, xp.cumsum(oov_sent).astype(np.int64)])
    toks = cs_tok[doc_soff[1:]] - cs_tok[doc_soff[:-1]]
    logp = segment_sum(sent_total, doc_soff)
    with np.errstate(divide="ignore", invalid="ignore"):
        ppl = xp.where(toks > 0, 10.0 ** (-logp / xp.maximum(toks, 1)), xp.nan)
    return {"sentences": (doc_soff[1:] - doc_soff[:-1]).astype(np.int32), "tokens": toks,
            "oov": cs_oov[doc_soff[1:]] - cs_oov[doc_soff[:-1]], "log10_prob": logp, "perplexity": ppl}


__all__ = ["SENTENCE_MODES", "TextBuffers", "document_scores", "encode_text", "read_lines_buffers", "sentences",
           "text_buffers"]
