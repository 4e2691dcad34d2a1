"""An ARPA n-gram language model in a GPU trie (KenLM's semantics): scores of sentences, next-word
distributions, perplexity; the ``ngram`` pipeline (:func:`cutext.pipelines.ngram.score_corpus`) scores
corpora with it.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from cutext.kernels import trie as trie_kernels
from cutext.kernels.backend import ARRAY_STACK, array_module, is_gpu_object, resolve_backend, to_host
from cutext.kernels.wordsplit import VocabHash
from cutext.stages.engines.ngram_results import Scores, TopK
from cutext.stages.engines.trie import build_trie
from cutext.stages.readers.arpa import ArpaModel, read_arpa
from cutext.stages.runtime.params import count
from cutext.stages.text.ngram_text import TextBuffers, document_scores, encode_text, text_buffers

DIST_BATCH_OUTPUTS = 1 << 26  # floats per batch of dense distributions in top_k_next
# the per-document columns of scores.parquet (and of NGramModel.score_frame), in order
SCORE_COLUMNS = (("sentences", np.int32), ("tokens", np.int64), ("oov", np.int64), ("log10_prob", np.float64),
                 ("perplexity", np.float64))


def _perplexity(xp, logp, toks):
    """``10 ** (-log10_prob / tokens)`` per document, NaN where tokens is 0 (KenLM's perplexity)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return xp.where(toks > 0, 10.0 ** (-logp / xp.maximum(toks, 1)), xp.nan)


# ----------------------------------------------------------------------------- one model per process

_MODELS: dict = {}
_MODELS_LOCK = threading.Lock()


def _model_key(path, backend: str, encoding: str) -> tuple:
    p = Path(path).resolve()
    try:
        st = p.stat()
        stamp = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = (None, None)
    return (str(p), *stamp, backend, encoding)


def _restore_model(path, mtime_ns, size, backend, encoding):
    """Unpickle an :class:`NGramModel`: the process's cached copy, loaded from its ARPA file the first time."""
    key = (path, mtime_ns, size, backend, encoding)
    with _MODELS_LOCK:
        m = _MODELS.get(key)
        if m is None:
            now = _model_key(path, backend, encoding)
            if now != key and now[1] is not None:
                raise FileNotFoundError(f"{path}: the ARPA file changed since the model was loaded "
                                        "(modification time or size differ); load it again")
            m = _MODELS[key] = NGramModel.load(path, backend=backend, encoding=encoding)
    return m


def cached_model(path, backend: str = "auto", encoding: str = "utf-8") -> NGramModel:
    """The model of an ARPA file, loaded once per process (keyed by path, modification time, size,
    backend and encoding): what a dask worker calls, so that a model is not loaded or sent per task.

    Parameters
    ----------
    path : str or os.PathLike
    backend : {"auto", "cpu", "gpu"}
    encoding : str

    Raises
    ------
    FileNotFoundError, cutext.stages.readers.arpa.ArpaError
        As :meth:`NGramModel.load`.
    """
    be = resolve_backend(backend, needs=ARRAY_STACK)
    if not Path(path).exists():
        raise FileNotFoundError(f"{path}: no such file")
    key = _model_key(path, be, encoding)
    return _restore_model(*key)


class _FrameScorer:
    """Picklable partition function of :meth:`NGramModel.score_frame` (the model pickles as its path)."""

    def __init__(self, model, text_column, sentence, bos, eos, prefix):
        self.model = model
        self.text_column = text_column
        self.sentence = sentence
        self.bos = bos
        self.eos = eos
        self.prefix = prefix

    def __call__(self, df):
        texts = df[self.text_column]
        gpu_frame = is_gpu_object(df)
        if not gpu_frame:
            texts = texts.reset_index(drop=True)
        try:
            cols = self.model.score_documents(texts, self.sentence, self.bos, self.eos)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise TypeError(f"score_frame: column {self.text_column!r} does not hold text: {exc}") from None
        out = df.copy(deep=False)
        for name, dtype in SCORE_COLUMNS:
            v = cols[name]
            v = v.astype(dtype) if gpu_frame and is_gpu_object(v) else to_host(v).astype(dtype)
            out[self.prefix + name] = v
        return out



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
        self._vocab_hash = {}  # "host" / "device" -> cutext.kernels.wordsplit.VocabHash

    def __reduce__(self):
        """Pickle as a reference to the ARPA file: a dask worker loads the model once per process
        (:func:`cached_model`), so the trie never travels with a task."""
        key = _model_key(self.path, self.backend, self.encoding)
        with _MODELS_LOCK:
            _MODELS.setdefault(key, self)  # unpickled in this process: this very object
        return (_restore_model, key)

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
        cutext.stages.readers.arpa.ArpaError
            Malformed ARPA input (message names the file and line); a path that is not a regular file
            (``/dev/zero``, a FIFO, a directory; refused before it is opened) or a line without an end
            (over :data:`cutext.stages.readers.arpa.MAX_LINE_BYTES`).
        ValueError
            ``encoding`` is not a codec that writes ASCII as ASCII.
        """

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

    def __repr__(self) -> str:
        return (f"NGramModel(order={self.order}, V={self.vocab_size:,}, "
                f"ngrams=[{', '.join(f'{c:,}' for c in self.counts)}], "
                f"bytes_per_ngram={self.bytes_per_ngram():.1f}, backend={self.backend!r}, path={str(self.path)!r})")

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

    def vocab_hash(self, device: bool = False):
        """The vocabulary as a byte-exact hash table (:class:`cutext.kernels.wordsplit.VocabHash`), built
        once on the host and copied once to the device (``device=True``)."""

        key = "device" if device else "host"
        vh = self._vocab_hash.get(key)
        if vh is None:
            host = self._vocab_hash.get("host")
            if host is None:
                vb = self.vocab_bytes
                bufs = vb.buffers()
                offsets = np.frombuffer(bufs[1], np.int64, count=len(vb) + 1, offset=vb.offset * 8)
                chars = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
                lo, hi = int(offsets[0]), int(offsets[-1])
                host = self._vocab_hash["host"] = VocabHash.build(chars[lo:hi], offsets - lo)
            vh = self._vocab_hash[key] = host.to_device() if device else host
        return vh

    def _text_on_device(self, texts) -> bool:
        """Whether :meth:`score` splits ``texts`` on the device: a GPU model, and text that is bytes, a cudf
        column, or ``str`` under UTF-8 (other codecs encode on the host, word by word)."""

        if self.backend != "gpu":
            return False
        if is_gpu_object(texts) or self.encoding == "utf-8" or isinstance(texts, TextBuffers):
            return True
        if isinstance(texts, pa.ChunkedArray):
            texts = texts.combine_chunks()
        if isinstance(texts, pa.Array):
            return pa.types.is_binary(texts.type) or pa.types.is_large_binary(texts.type)
        return isinstance(texts, (list, tuple)) and len(texts) > 0 and all(isinstance(t, bytes) for t in texts)

    def encode_device(self, sentences, device: bool = True):
        """:meth:`encode` on the device: split on ASCII white space and look words up by their bytes there.

        Parameters
        ----------
        sentences : list of str / bytes (or of lists of words), pandas Series, pyarrow array, or cudf
            strings Series. ``str`` text is taken as UTF-8 bytes.
        device : bool
            True: the kernels of :mod:`cutext.kernels.wordsplit` on the current device (needs cupy);
            False: their numba twins on the host (the oracle of the GPU tests).

        Returns
        -------
        ids : int32 (n_words,), cupy (device) or numpy
        offsets : int64 (n_sent + 1,)
            Equal to :meth:`encode` for UTF-8 text.
        """

        if not is_gpu_object(sentences) and not (isinstance(sentences, (pa.Array, pa.ChunkedArray)) or (
                isinstance(sentences, pd.Series) and sentences.dtype != object)):
            sentences = _as_string_array(sentences)  # lists, and object Series (which may hold lists of words)
        chars, offsets = text_buffers(sentences, device=device)
        ids, word_offsets, _ = encode_text(chars, offsets, self.vocab_hash(device), self.unk_id, "document")
        return ids, word_offsets

    def score_documents(self, texts, sentence: str = "line", bos: bool = True, eos: bool = True,
                        kernels=None) -> dict:
        """Per-document scores of a column of documents (the columns of the pipeline's ``scores.parquet``).

        Parameters
        ----------
        texts : pyarrow string array, pandas Series, list of str, or cudf strings Series (nulls: empty)
        sentence : {"line", "document"}
            ``"line"``: every non-blank line is a sentence; ``"document"``: the document is one sentence.
        bos, eos : bool
        kernels : bool, optional
            True: split, look up and sum with :mod:`cutext.kernels.wordsplit` where the model is (CUDA on
            a GPU model, their numba twins on a CPU model); False: pyarrow on the host (the CPU path);
            None (default): the kernels on a GPU model when :meth:`score` would use them, else pyarrow.

        Returns
        -------
        dict of arrays (n_docs,), numpy, or cupy when the text was split on the device
            ``sentences`` int32, ``tokens`` int64 (words + one ``</s>`` per sentence when eos), ``oov``
            int64, ``log10_prob`` float64 (sum over the sentences), ``perplexity`` float64
            (``10 ** (-log10_prob / tokens)``, NaN when tokens is 0).

        Raises
        ------
        ValueError
            ``sentence`` not "line" / "document"; ``eos`` with a model that has no ``</s>``.
        TypeError
            ``texts`` is not strings.
        """
        if sentence not in ("line", "document"):
            raise ValueError(f"sentence must be 'line' or 'document', got {sentence!r}")

        if kernels is None:
            kernels = self._text_on_device(texts)
        if kernels:
            return self._score_documents_kernels(texts, sentence, bos, eos)
        if isinstance(texts, TextBuffers):  # bytes and offsets: a binary column on the host
            c, o = (to_host(x) for x in (texts.chars, texts.offsets))
            texts = pa.Array.from_buffers(pa.large_binary(), len(o) - 1,
                                          [None, pa.py_buffer(np.ascontiguousarray(o, np.int64)),
                                           pa.py_buffer(np.ascontiguousarray(c, np.uint8))])
        if is_gpu_object(texts):
            texts = texts.to_arrow()
        if isinstance(texts, pd.Series):
            texts = pa.array(texts, from_pandas=True)
        elif not isinstance(texts, (pa.Array, pa.ChunkedArray)):
            texts = _as_string_array(texts)
        if isinstance(texts, pa.ChunkedArray):
            texts = texts.combine_chunks()
        if pa.types.is_null(texts.type):
            texts = texts.cast(pa.large_string())
        if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)
                or pa.types.is_binary(texts.type) or pa.types.is_large_binary(texts.type)):
            raise TypeError(f"text must be strings, got {texts.type}")
        if pa.types.is_binary(texts.type) or pa.types.is_large_binary(texts.type):
            texts = texts.cast(pa.large_binary()).fill_null(b"")
            sents, doc_of = _sentences_of(texts.view(pa.large_string()), sentence)
            sents = sents.view(pa.large_binary())
        else:
            texts = texts.cast(pa.large_string()).fill_null("")
            sents, doc_of = _sentences_of(texts, sentence)
        nd = len(texts)
        sc = self.score(sents, bos=bos, eos=eos) if len(sents) else None
        if sc is None:
            z = np.zeros(nd, np.int64)
            return {"sentences": z.astype(np.int32), "tokens": z, "oov": z.copy(),
                    "log10_prob": np.zeros(nd, np.float64), "perplexity": np.full(nd, np.nan)}
        logp = np.bincount(doc_of, weights=sc.log10_prob, minlength=nd).astype(np.float64)
        toks = np.bincount(doc_of, weights=sc.tokens, minlength=nd).astype(np.int64)
        nsent = np.bincount(doc_of, minlength=nd).astype(np.int32)
        oov = np.bincount(doc_of, weights=sc.oov_counts(), minlength=nd).astype(np.int64)
        return {"sentences": nsent, "tokens": toks, "oov": oov, "log10_prob": logp,
                "perplexity": _perplexity(np, logp, toks)}

    def _score_documents_kernels(self, texts, sentence, bos, eos) -> dict:
        """:meth:`score_documents` with the wordsplit kernels where the model is: on a GPU model text,
        words, ids, scores and sums stay on the device (cupy out); on a CPU model the numba twins."""

        if eos and self.eos_id < 0:
            raise ValueError(f"{self.path}: the model has no </s>; score with eos=False")

        if not is_gpu_object(texts) and not isinstance(texts, (pa.Array, pa.ChunkedArray, pd.Series, TextBuffers)):
            texts = _as_string_array(texts)
        device = self.backend == "gpu"
        chars, offsets = text_buffers(texts, device=device)
        nd = len(offsets) - 1
        ids, woff, sdoc = encode_text(chars, offsets, self.vocab_hash(device), self.unk_id, sentence)
        _, _, total, _ = self.score_ids(ids, woff, bos, eos)
        return document_scores(ids, woff, sdoc, total, nd, self.unk_id, eos)

    def score_frame(self, frame, text_column: str = "text", *, sentence: str = "line", bos: bool = True,
                    eos: bool = True, prefix: str = ""):
        """The frame with the per-document scores of its text column added (partition by partition).

        Parameters
        ----------
        frame : pandas / cudf DataFrame, or dask / dask-cudf DataFrame
            One document per row.
        text_column : str
            The column holding the text (strings; nulls score as empty documents).
        sentence : {"line", "document"}
            As the ``ngram`` pipeline: every non-blank line is a sentence, or the document is one.
        bos, eos : bool
        prefix : str
            Prepended to the new column names.

        Returns
        -------
        The same kind of frame (same rows, index and columns) with the columns of the pipeline's
        ``scores.parquet``: ``sentences`` int32, ``tokens`` int64, ``oov`` int64, ``log10_prob`` float64,
        ``perplexity`` float64 (per row; equal to ``pipelines.run("ngram", ...)`` on the same texts).
        A dask frame stays lazy: ``map_partitions``; the model travels to the workers as a reference to
        its ARPA file and is loaded once per worker process (:func:`cached_model`), on the worker's GPU
        for a GPU model. cudf partitions are split and looked up on the device.

        Raises
        ------
        KeyError
            No ``text_column`` in the frame (the message lists the columns).
        TypeError
            Not a DataFrame, or a text column that is not strings.
        ValueError
            A new column name is already a column of the frame (pass ``prefix=``); bad ``sentence``.
        """
        if sentence not in ("line", "document"):
            raise ValueError(f"sentence must be 'line' or 'document', got {sentence!r}")
        meta = getattr(frame, "_meta", None)
        like = frame if meta is None else meta
        if not hasattr(like, "columns") or not hasattr(like, "iloc"):
            raise TypeError(f"score_frame takes a pandas / cudf / dask DataFrame, got {type(frame).__name__}"
                            " (a Series: series.to_frame())")
        if text_column not in like.columns:
            raise KeyError(f"score_frame: the frame has no column {text_column!r}; its columns are "
                           f"{list(like.columns)}")
        names = [prefix + c for c, _ in SCORE_COLUMNS]
        clash = [c for c in names if c in like.columns]
        if clash:
            raise ValueError(f"score_frame: the frame already has column(s) {clash}; pass prefix= to name the "
                             "score columns apart")
        dt = like[text_column].dtype
        if getattr(dt, "kind", "O") in "biufcmM":
            raise TypeError(f"score_frame: column {text_column!r} holds {dt}, not text")
        fn = _FrameScorer(self, text_column, sentence, bos, eos, prefix)
        if meta is None:
            return fn(frame)
        out_meta = meta.copy()
        for (_, dtype), name in zip(SCORE_COLUMNS, names):
            out_meta[name] = np.empty(0, dtype)
        return frame.map_partitions(fn, meta=out_meta)

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
        sentences : list of str (or of lists of words), pandas Series, pyarrow array, or a cudf strings
            Series (GPU models). Words are separated by ASCII white space; case is kept. On a GPU model
            the text is split and its words looked up on the device (:meth:`encode_device`) unless
            ``str`` text must be encoded with a codec other than UTF-8.
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
        if self._text_on_device(sentences):
            ids, offsets = self.encode_device(sentences)
        else:
            ids, offsets = self.encode(sentences)
        tok, nlen, total, out_off = self.score_ids(ids, offsets, bos, eos)
        tok, nlen, total, out_off, ids, offsets = (to_host(x) for x in (tok, nlen, total, out_off, ids, offsets))
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

    def next_word_log10_prob(self, contexts, order=None, bos: bool = False):
        """log10 p(w | context) for every word w of the vocabulary (dense back-off distribution, the gLM paper (Li),
        3.3).

        Parameters
        ----------
        contexts : list of str (or of lists of words)
            The preceding words; only the last ``order - 1`` matter.
        order : int, optional
            Use the model's n-grams of orders 1 .. ``order`` (default: the model's order).
        bos : bool
            Prepend ``<s>`` to every context.

        Returns
        -------
        float32 array (n_contexts, V), numpy (cpu) or cupy (gpu)
            log10 probabilities; ``10 ** row`` sums to 1 for a normalized model; entries equal
            :meth:`score` of ``context + w``; the column of ``<s>`` is -inf.

        Raises
        ------
        ValueError
            ``order`` outside 1..N.
        """
        return self.next_word_distribution(contexts, order=order, sparse=False, bos=bos, log10=True)

    def next_word_prob(self, contexts, order=None, sparse: bool = False, bos: bool = False):
        """p(w | context) as plain probabilities (not log10), dense or sparse.

        Parameters
        ----------
        contexts, order, bos
            As in :meth:`next_word_log10_prob`.
        sparse : bool
            False: the dense back-off distribution over every word (rows sum to 1).  True: paper
            003's per-order answer -- only the n-grams ``(context, w)`` stored at exactly ``order``
            (the children of the context's trie node), as a CSR matrix whose implicit zeros are
            probability 0 ("not stored").

        Returns
        -------
        dense: float32 array (n_contexts, V), numpy (cpu) or cupy (gpu)
        sparse: scipy.sparse.csr_matrix (cpu) or cupyx.scipy.sparse.csr_matrix (gpu), (n_contexts, V)
            float32 probabilities, column indices sorted within each row.
        """
        return self.next_word_distribution(contexts, order=order, sparse=sparse, bos=bos, log10=False)

    def next_word_distribution(self, contexts, order=None, sparse: bool = False, bos: bool = False,
                               log10=None):
        """The distribution over the whole vocabulary of the word following each context (the gLM paper (Li), 3.3).

        Kept for compatibility; the scale is in the name of :meth:`next_word_log10_prob` (dense,
        log10) and :meth:`next_word_prob` (probabilities, dense or sparse), which new code should
        use.  Here the scale follows ``log10=``; left out, it is log10 for the dense form and
        probabilities for the sparse form (a ``FutureWarning`` says so for ``sparse=True``).

        Parameters
        ----------
        contexts : list of str (or of lists of words)
            The preceding words; only the last ``order - 1`` matter.
        order : int, optional
            Use the model's n-grams of orders 1 .. ``order`` (default: the model's order).
        sparse : bool
            False: the dense back-off distribution, every word of the vocabulary.
            True: the gLM paper's per-order answer -- only the n-grams ``(context, w)`` stored at exactly
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
        if sparse and log10 is None:
            import warnings

            warnings.warn("next_word_distribution(sparse=True) returns plain probabilities while the dense "
                          "form is log10; say which with next_word_prob(sparse=True) or log10=False/True",
                          FutureWarning, stacklevel=2)
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
    keep = pc.greater(pc.binary_length(pc.ascii_trim_whitespace(flat)), 0).to_numpy(zero_copy_only=False)
    idx = np.flatnonzero(keep)
    return flat.take(pa.array(idx)), parent[idx]

__all__ = ["NGramModel", "Scores", "TopK", "SCORE_COLUMNS", "cached_model"]
