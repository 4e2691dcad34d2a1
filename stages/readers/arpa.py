"""Streaming reader for ARPA back-off language models (the format of SRILM, KenLM's lmplz, CMU-SLM).

The file is read in blocks of bytes (gzip, bz2 and xz are recognised by their magic bytes) and split
into lines; every block of n-gram lines is parsed at once with pyarrow compute (field split, string ->
float cast, word -> id hash lookup), so no Python code runs per n-gram. Words are bytes, as in KenLM:
the vocabulary is matched byte for byte, whatever the encoding.

Format accepted::

    free text (ignored; it may itself contain "\\1-grams:" or "ngram 1=..." lines)
    \\data\\
    ngram 1=<count>
    ...
    ngram N=<count>
    \\1-grams:
    <log10 prob> <word> [<log10 backoff>]
    ...
    \\N-grams:
    <log10 prob> <w1> ... <wN>
    \\end\\

Fields are separated by tabs, spaces or carriage returns (KenLM's ``kARPASpaces``; a vertical tab or
form feed is part of a word, as in KenLM); KenLM wants a tab after a 1-gram's probability and before a
backoff, cutext takes any of them (the CMU files use spaces). Blank lines are ignored, and so is free
text before ``\\data\\`` (KenLM takes only ``#`` lines there). The vocabulary is the words of the
1-gram section, with ids in file order.

KenLM semantics (lm/read_arpa.hh, lm/vocab.cc, lm/config.cc):

* ``<unk>`` and ``<UNK>`` are both the unknown word (KenLM hashes both to word 0). When the file has
  both, the later 1-gram line wins and the earlier spelling becomes an alias of it (KenLM overwrites
  the unigram of word 0). Only when neither is present is ``<unk>`` added with log10 probability -100
  and backoff 0 (``config.unknown_missing_logprob``), with a warning.
* ``<s>`` and ``</s>`` are found by their exact bytes; KenLM refuses a model without them
  (``sentence_marker_missing = THROW_UP``); cutext loads it with a warning (score with ``eos=False``
  when ``</s>`` is missing; without ``<s>`` a sentence starts from the empty context).
* A positive log10 probability (``0.25``, ``inf``) is set to 0 with a warning naming its line, as
  KenLM does with ``positive_log_probability = COMPLAIN`` (its default ``THROW_UP`` refuses the file).
  ``-inf`` and ``-99`` are kept as they are. A NaN probability, a non-finite backoff: errors (as KenLM).
* Words are bytes. ``encoding`` (default UTF-8, any ASCII-compatible codec) is used only to show words
  (``ArpaModel.vocab``) and to turn ``str`` queries into bytes; bytes that are not valid in it are kept
  exactly, with one warning naming the first line that holds them.

Errors (:class:`ArpaError`, a ``ValueError``) name the file and the line: no ``\\data\\`` line, a
malformed counts header, a section out of order, a section whose number of n-grams differs from
the header, a line with the wrong number of fields, a number that does not parse, a word missing
from the 1-grams, a duplicate unigram, a truncated file (no ``\\end\\``), text after ``\\end\\``.
"""
from __future__ import annotations

import bz2
import codecs
import gzip
import lzma
import os
import re
import stat
import warnings
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

BLOCK_BYTES = 1 << 24
# An ARPA line is a number, at most a few words and a number: a longer run without a newline is a file
# that is not a model (or a stream with no end), and would otherwise be buffered without bound.
MAX_LINE_BYTES = 1 << 24
UNK_MISSING_LOGPROB = -100.0  # KenLM's config.unknown_missing_logprob

_COUNT_RE = re.compile(r"^ngram\s+(\d+)\s*=\s*(\d+)$")
_SECTION_RE = re.compile(r"^\\(\d+)-grams:$")


class ArpaError(ValueError):
    """Malformed ARPA input; the message names the file and the line number (1-based)."""


@dataclass
class ArpaOrder:
    """The n-grams of one order, in file order.

    Attributes
    ----------
    words : int32 array (count, n)
        Word ids (indices into :attr:`ArpaModel.vocab`).
    prob : float32 array (count,)
        log10 probability.
    backoff : float32 array (count,)
        log10 backoff weight (0 where the file has none, and for the highest order).
    lines : int64 array (count,)
        1-based line number of each n-gram in the file (for error messages downstream).
    """

    words: np.ndarray
    prob: np.ndarray
    backoff: np.ndarray
    lines: np.ndarray


@dataclass
class ArpaModel:
    """A parsed ARPA model.

    Attributes
    ----------
    path : str
    vocab : pyarrow.LargeStringArray (V,)
        Word of each id as text (1-gram section order; ``<unk>`` appended when the file lacks both
        ``<unk>`` and ``<UNK>``): ``vocab_bytes`` decoded with ``encoding``, bytes that are not valid
        in it shown as ``\\xNN`` escapes.
    orders : list of ArpaOrder
        ``orders[n - 1]`` holds the n-grams; ``orders[0].words`` is ``arange(V)[:, None]``.
    counts : list of int
        Number of n-grams per order as announced by ``\\data\\`` (checked against the sections).
    unk_id, bos_id, eos_id : int
        Ids of ``<unk>``, ``<s>``, ``</s>`` (-1 for ``<s>``/``</s>`` when absent).
    unk_added : bool
        True when the file has neither ``<unk>`` nor ``<UNK>`` and ``<unk>`` was added.
    vocab_bytes : pyarrow.LargeBinaryArray (V,)
        The exact bytes of each word (what queries are matched against, as in KenLM).
    encoding : str
        Codec of ``vocab`` and of ``str`` queries.
    invalid_bytes : bool
        Some word held bytes that are not valid in ``encoding`` (kept exactly).
    unk_alias : bytes or None
        ``b"<unk>"`` or ``b"<UNK>"``: the earlier of the two spellings when the file has both (it
        maps to ``unk_id``).
    """

    path: str
    vocab: pa.Array
    orders: list
    counts: list
    unk_id: int
    bos_id: int
    eos_id: int
    unk_added: bool = False
    preamble_lines: int = 0
    warnings: list = field(default_factory=list)
    vocab_bytes: pa.Array | None = None
    encoding: str = "utf-8"
    invalid_bytes: bool = False
    unk_alias: bytes | None = None

    @property
    def order(self) -> int:
        return len(self.orders)


def check_regular_file(path) -> None:
    """Refuse what is not a regular file (a device such as ``/dev/zero``, a FIFO, a directory), by
    ``os.stat`` before opening it: opening a FIFO blocks and a device may never end.

    Raises
    ------
    FileNotFoundError
        No such path.
    ArpaError
        Not a regular file; the message names the path and what it is.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    if not stat.S_ISREG(st.st_mode):
        kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                else "a character device" if stat.S_ISCHR(st.st_mode) else "a block device"
                if stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a file")
        raise ArpaError(f"{path}: not a regular file ({kind}); an ARPA model is read from a file")


def open_binary(path):
    """Open ``path`` for reading bytes, decompressing gzip / bz2 / xz by their magic bytes."""
    with open(path, "rb") as fh:
        magic = fh.read(6)
    if magic[:2] == b"\x1f\x8b":
        return gzip.open(path, "rb")
    if magic[:3] == b"BZh":
        return bz2.open(path, "rb")
    if magic[:6] == b"\xfd7zXZ\x00":
        return lzma.open(path, "rb")
    return open(path, "rb")


def check_encoding(encoding: str) -> str:
    """The canonical name of ``encoding``; ValueError unless it is a known codec that writes ASCII as ASCII."""
    try:
        name = codecs.lookup(encoding).name
    except (LookupError, TypeError):
        raise ValueError(f"encoding must be the name of a codec, got {encoding!r}") from None
    probe = "\\data\\ ngram 1=0\t-0.5 <s> </s> <unk>\r\n"
    try:
        ok = probe.encode(name) == probe.encode("ascii")
    except UnicodeError:
        ok = False
    if not ok:
        raise ValueError(f"encoding must write ASCII as ASCII (ARPA syntax is ASCII), got {encoding!r}")
    return name


def _text(x, encoding: str = "utf-8") -> str:
    """A word, a line or a field (bytes, or a pyarrow scalar of bytes / text) as text for messages."""
    if isinstance(x, pa.Scalar):
        x = x.cast(pa.large_binary()).as_py() if pa.types.is_large_string(x.type) else x.as_py()
    if isinstance(x, bytes):
        return x.decode(encoding, errors="backslashreplace")
    return x


def _sview(arr: pa.Array) -> pa.Array:
    """``arr`` (large binary or large string) as a LargeStringArray on the same buffers, unvalidated.

    The ASCII kernels of pyarrow (trim, split on white space, starts_with, float cast) read bytes, so
    they run on words that are not UTF-8 unchanged; nothing decodes these arrays as text.
    """
    return arr if pa.types.is_large_string(arr.type) else arr.view(pa.large_string())


def _bview(arr: pa.Array) -> pa.Array:
    """``arr`` (large string or large binary) as a LargeBinaryArray on the same buffers."""
    return arr if pa.types.is_large_binary(arr.type) else arr.view(pa.large_binary())


def split_fields(lines: pa.Array) -> pa.Array:
    """Split trimmed ARPA lines into fields at runs of tab, space and carriage return (KenLM's kARPASpaces).

    A vertical tab or a form feed stays inside a word, as in KenLM. Returns a LargeListArray of large
    binary fields.
    """
    b = _bview(lines)
    if pc.any(pc.match_substring(b, b"\t")).as_py():
        b = pc.replace_substring(b, b"\t", b" ")
    if pc.any(pc.match_substring(b, b"\r")).as_py():
        b = pc.replace_substring(b, b"\r", b" ")
    parts = pc.split_pattern(b, b" ")
    lens = pc.binary_length(parts.flatten()).to_numpy(zero_copy_only=False)
    if (lens > 0).all():
        return parts
    keep = lens > 0
    offs = parts.offsets.to_numpy().astype(np.int64)
    kept = np.concatenate([[0], np.cumsum(keep)])
    new_offs = kept[offs - offs[0]]
    values = parts.flatten().filter(pa.array(keep))
    return pa.LargeListArray.from_arrays(pa.array(new_offs, pa.int64()), values)


def _line_blocks(fh, name: str, block_bytes: int, encoding: str = "utf-8", state: dict | None = None):
    """Yield ``(first_line_number, lines)``: the file's lines (each with its newline), a block at a time.

    ``lines`` is a pyarrow LargeBinaryArray built directly on the block's bytes (offsets at the
    newlines), so no Python object is made per line. The first line holding bytes that are not
    valid in ``encoding`` is warned about once (``state["invalid_line"]``); the bytes are kept.
    """
    state = {} if state is None else state
    carry = b""
    lineno = 1
    while True:
        data = fh.read(block_bytes)
        if not data:
            break
        data = carry + data
        cut = data.rfind(b"\n")
        if cut < 0:
            if len(data) > MAX_LINE_BYTES:
                raise ArpaError(f"{name}:{lineno}: a line longer than {MAX_LINE_BYTES:,} bytes (no newline); "
                                "not an ARPA file")
            carry = data
            continue
        carry = data[cut + 1:]
        lines = _as_lines(data[: cut + 1], name, lineno, encoding, state)
        yield lineno, lines
        lineno += len(lines)
    if carry:
        yield lineno, _as_lines(carry, name, lineno, encoding, state)


def _as_lines(chunk: bytes, name: str, lineno: int, encoding: str, state: dict) -> pa.Array:
    nl = np.flatnonzero(np.frombuffer(chunk, np.uint8) == 10)
    ends = nl + 1 if len(nl) and nl[-1] == len(chunk) - 1 else np.append(nl + 1, len(chunk))
    offsets = np.zeros(len(ends) + 1, np.int64)
    offsets[1:] = ends
    arr = pa.Array.from_buffers(pa.large_binary(), len(ends), [None, pa.py_buffer(offsets), pa.py_buffer(chunk)])
    if "invalid_line" not in state:
        if encoding == "utf-8":
            try:
                arr.view(pa.large_string()).validate(full=True)
                return arr
            except pa.ArrowInvalid:
                pass
        try:
            chunk.decode(encoding)
        except UnicodeDecodeError as exc:
            line = lineno + chunk[: exc.start].count(b"\n")
            state["invalid_line"] = line
            msg = (f"{name}:{line}: bytes that are not valid {encoding} ({exc.reason}); words are kept "
                   "byte for byte (as KenLM reads them); NGramModel.load(path, encoding=...) reads them as text")
            state.setdefault("warnings", []).append(msg)
            warnings.warn(msg, stacklevel=4)
    return arr


class _Section:
    """Accumulates the parsed blocks of one n-gram section."""

    def __init__(self, n: int, count: int, header_line: int):
        self.n = n
        self.count = count
        self.header_line = header_line
        self.words: list = []      # pyarrow string arrays (n == 1) or int32 arrays (n, k)
        self.prob: list = []
        self.backoff: list = []
        self.lines: list = []
        self.seen = 0


class _Parser:
    def __init__(self, name: str, encoding: str = "utf-8"):
        self.name = name
        self.encoding = encoding
        self.unk_alias: bytes | None = None   # the earlier of <unk> / <UNK> when the file has both
        self.unk_drop = -1                    # its row in the 1-gram section (dropped from the vocabulary)
        self.unk_id = -1
        self.unk_added = False
        self.state = "preamble"
        self.counts: list[int] = []
        self.sections: list[_Section] = []
        self.current: _Section | None = None
        self.vocab: pa.Array | None = None
        self.preamble_lines = 0
        self.warnings: list[str] = []
        self.last_line = 0

    def err(self, line: int, msg: str):
        raise ArpaError(f"{self.name}:{line}: {msg}")

    # ------------------------------------------------------------------ header
    def feed(self, first: int, lines: pa.Array) -> bool:
        """Consume one block of lines; return False once ``\\end\\`` was seen."""
        i = 0
        n_lines = len(lines)
        self.last_line = first + n_lines - 1
        while i < n_lines:
            if self.state == "end":  # only blank lines may follow \\end\\ (KenLM's ReadEnd: "Trailing line")
                rest = pc.binary_length(pc.ascii_trim_whitespace(_sview(lines.slice(i)))).to_numpy(
                    zero_copy_only=False)
                junk = np.flatnonzero(rest > 0)
                if len(junk):
                    j = i + int(junk[0])
                    self.err(first + j, f"text after \\end\\: {_text(lines[j], self.encoding).strip()[:80]!r} "
                                        "(two models in one file?)")
                return False
            if self.state == "preamble":
                hit = pc.equal(pc.ascii_trim_whitespace(_sview(lines.slice(i))), "\\data\\").to_numpy(
                    zero_copy_only=False)
                where = np.flatnonzero(hit)
                if len(where) == 0:
                    i = n_lines
                    continue
                i += int(where[0])
                self.preamble_lines = first + i - 1
                self.state = "counts"
                i += 1
                continue
            if self.state == "counts":
                line = _text(lines[i], self.encoding).strip()
                lineno = first + i
                i += 1
                if not line:
                    continue
                m = _COUNT_RE.match(line)
                if m:
                    n, c = int(m.group(1)), int(m.group(2))
                    if n != len(self.counts) + 1:
                        self.err(lineno, f"expected 'ngram {len(self.counts) + 1}=<count>', got {line!r}")
                    self.counts.append(c)
                    continue
                if not self.counts:
                    self.err(lineno, f"expected 'ngram 1=<count>' after \\data\\, got {line!r}")
                self._header(line, lineno)
                continue
            # inside a section: everything up to the next header line, vectorized
            i = self._section_block(first, lines, i)
        return self.state != "end"

    def _header(self, line: str, lineno: int):
        """A line starting with a backslash: the next section's header or \\end\\."""
        expect = len(self.sections) + 1
        if self.current is not None:
            self._close(lineno)
        if line == "\\end\\":
            if len(self.sections) != len(self.counts):
                self.err(lineno, f"\\end\\ before the \\{expect}-grams: section "
                                 f"(\\data\\ announced {len(self.counts)} orders)")
            self.state = "end"
            return
        m = _SECTION_RE.match(line)
        if not m:
            self.err(lineno, f"expected \\{expect}-grams: or \\end\\, got {line!r}")
        n = int(m.group(1))
        if n != expect or n > len(self.counts):
            want = f"\\{expect}-grams:" if expect <= len(self.counts) else "\\end\\"
            self.err(lineno, f"expected {want}, got {line!r}")
        self.current = _Section(n, self.counts[n - 1], lineno)
        self.sections.append(self.current)
        self.state = "section"

    def _close(self, lineno: int):
        s = self.current
        if s.seen != s.count:
            self.err(lineno, f"the \\{s.n}-grams: section (line {s.header_line}) has {s.seen} n-grams but "
                             f"\\data\\ announced {s.count}")
        if s.n == 1:
            self._finish_vocab(s)
        self.current = None

    # ------------------------------------------------------------------ n-gram lines
    def _section_block(self, first: int, lines: pa.Array, i: int) -> int:
        arr = _sview(lines.slice(i))
        trimmed = pc.ascii_trim_whitespace(arr)
        is_header = pc.starts_with(trimmed, "\\").to_numpy(zero_copy_only=False)
        hdr = np.flatnonzero(is_header)
        stop = int(hdr[0]) if len(hdr) else len(arr)
        if stop:
            self._parse(trimmed.slice(0, stop), first + i)
        if stop < len(arr):
            self._header(_text(trimmed[stop], self.encoding), first + i + stop)
        return i + stop + (1 if stop < len(arr) else 0)

    def _parse(self, trimmed: pa.Array, first_line: int):
        s = self.current
        n = s.n
        lens_all = pc.binary_length(trimmed).to_numpy(zero_copy_only=False)
        rows = np.flatnonzero(lens_all > 0)
        if len(rows) == 0:
            return
        line_no = first_line + rows.astype(np.int64)
        if s.seen + len(rows) > s.count:
            k = s.count - s.seen
            self.err(int(line_no[k]), f"more {n}-grams than the {s.count} announced by \\data\\")
        data = trimmed.take(pa.array(rows))
        split = split_fields(data)
        offs = split.offsets.to_numpy()
        nf = np.diff(offs)
        allowed = (nf == n + 1) | ((nf == n + 2) & (n < len(self.counts)))
        if not allowed.all():
            b = int(np.flatnonzero(~allowed)[0])
            want = f"{n + 1} or {n + 2}" if n < len(self.counts) else f"{n + 1}"
            self.err(int(line_no[b]), f"expected {want} fields (log10 prob, {n} word(s)"
                     f"{', backoff' if n < len(self.counts) else ''}) in a {n}-gram line, got {int(nf[b])}: "
                     f"{_text(data[b], self.encoding)!r}")
        flat = split.values
        start = offs[:-1].astype(np.int64)
        prob = self._floats(flat, start, line_no, "log10 probability")
        bo = np.zeros(len(rows), np.float64)
        has_bo = np.flatnonzero(nf == n + 2)
        if len(has_bo):
            bo[has_bo] = self._floats(flat, start[has_bo] + n + 1, line_no[has_bo], "backoff weight")
            bad = ~np.isfinite(bo)
            if bad.any():
                b = int(np.flatnonzero(bad)[0])
                self.err(int(line_no[b]), f"backoff weight is not finite: {_text(data[b], self.encoding)!r}")
        if np.isnan(prob).any():
            b = int(np.flatnonzero(np.isnan(prob))[0])
            self.err(int(line_no[b]), f"log10 probability is NaN: {_text(data[b], self.encoding)!r}")
        pos = prob > 0
        if pos.any():  # KenLM with positive_log_probability = COMPLAIN: 0.0 in their place
            b = int(np.flatnonzero(pos)[0])
            self.warnings.append(f"{self.name}:{int(line_no[b])}: positive log10 probability {prob[b]} set to 0 "
                                 f"(as KenLM with positive_log_probability=COMPLAIN; {int(pos.sum())} such "
                                 f"{n}-grams in this block)")
            warnings.warn(self.warnings[-1], stacklevel=4)
            prob = np.where(pos, 0.0, prob)
        widx = start[:, None] + 1 + np.arange(n)[None, :]
        words = flat.take(pa.array(widx.ravel()))
        if n == 1:
            s.words.append(words)
        else:
            found = pc.index_in(words, value_set=self.vocab)
            if found.null_count:  # either spelling of the unknown word is the unknown word (KenLM)
                unk = pc.or_(pc.equal(words, pa.scalar(b"<unk>", pa.large_binary())),
                             pc.equal(words, pa.scalar(b"<UNK>", pa.large_binary())))
                found = pc.if_else(unk, pa.scalar(self.unk_id, found.type), found)
            if found.null_count:
                miss = int(np.flatnonzero(found.is_null().to_numpy(zero_copy_only=False))[0])
                self.err(int(line_no[miss // n]), f"word {_text(words[miss], self.encoding)!r} is not in the 1-grams")
            ids = found.to_numpy(zero_copy_only=False)
            s.words.append(ids.astype(np.int32).reshape(-1, n))
        s.prob.append(prob.astype(np.float32))
        s.backoff.append(bo.astype(np.float32))
        s.lines.append(line_no)
        s.seen += len(rows)

    def _floats(self, flat, idx, line_no, what) -> np.ndarray:
        strings = flat.take(pa.array(idx))
        try:
            return np.array(pc.cast(_sview(strings), pa.float64()).to_numpy(zero_copy_only=False))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            for k, v in enumerate(strings.to_pylist()):
                try:
                    float(v)
                except ValueError:
                    self.err(int(line_no[k]), f"bad {what} {_text(v, self.encoding)!r}")
            raise

    def _finish_vocab(self, s: _Section):
        vocab = pa.concat_arrays(s.words) if s.words else pa.array([], pa.large_binary())
        if len(pc.unique(vocab)) != len(vocab):
            codes = pc.dictionary_encode(vocab).indices.to_numpy(zero_copy_only=False)
            _, first_idx = np.unique(codes, return_index=True)
            seen = np.zeros(len(codes), bool)
            seen[first_idx] = True
            dup = int(np.flatnonzero(~seen)[0])
            lines = np.concatenate(s.lines)
            self.err(int(lines[dup]), f"duplicate 1-gram {_text(vocab[dup], self.encoding)!r}")
        # <unk> and <UNK> are one word (KenLM's vocab.cc hashes both to word 0); with both, the later
        # 1-gram line sets it (KenLM overwrites the unigram) and the earlier spelling is an alias
        at = [pc.index(vocab, pa.scalar(w, pa.large_binary())).as_py() for w in (b"<unk>", b"<UNK>")]
        if min(at) >= 0:
            drop = min(at)
            self.unk_alias = (b"<unk>", b"<UNK>")[at.index(drop)]
            self.unk_drop = drop
            lines = np.concatenate(s.lines)
            msg = (f"{self.name}:{int(lines[max(at)])}: the model has both <unk> (line {int(lines[at[0]])}) and "
                   f"<UNK> (line {int(lines[at[1]])}); as in KenLM they are one word, and the later line "
                   "gives its probability and backoff")
            self.warnings.append(msg)
            warnings.warn(msg, stacklevel=5)
            keep = np.ones(len(vocab), bool)
            keep[drop] = False
            vocab = vocab.filter(pa.array(keep))
            self.unk_id = max(at) - 1
        elif max(at) >= 0:
            self.unk_id = max(at)
        else:  # neither: <unk> is added at log10 probability -100 (read_arpa appends its unigram)
            self.unk_added = True
            vocab = pa.concat_arrays([vocab, pa.array([b"<unk>"], pa.large_binary())])
            self.unk_id = len(vocab) - 1
        self.vocab = vocab


def read_arpa(path, *, encoding: str = "utf-8", block_bytes: int = BLOCK_BYTES) -> ArpaModel:
    """Read an ARPA file into per-order numpy arrays.

    Parameters
    ----------
    path : str or os.PathLike
        Plain, gzip, bz2 or xz file.
    encoding : str
        Codec of the words (default UTF-8; any codec that writes ASCII as ASCII, e.g. ``"latin-1"``).
        Words are kept as bytes whatever it is; it decides ``vocab`` (the words as text) and how
        ``str`` queries become bytes. Bytes not valid in it: one warning naming the first such line.
    block_bytes : int
        Bytes decoded and parsed at a time (memory bound of the streaming reader).

    Returns
    -------
    ArpaModel

    Raises
    ------
    FileNotFoundError
    ArpaError
        Malformed input; the message names the file and the line.  A path that is not a regular file
        (``/dev/zero``, a FIFO, a directory: checked by ``os.stat`` before opening), or a line longer than
        :data:`MAX_LINE_BYTES` (a file with no end of line is never buffered whole).
    ValueError
        ``encoding`` is not a codec that writes ASCII as ASCII.
    """
    name = str(path)
    encoding = check_encoding(encoding)
    check_regular_file(path)
    p = _Parser(name, encoding)
    state: dict = {}
    try:
        with open_binary(path) as fh:
            for first, lines in _line_blocks(fh, name, block_bytes, encoding, state):
                p.feed(first, lines)
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise ArpaError(f"{name}: cannot decompress/read: {exc}") from None
    if p.state == "preamble":
        raise ArpaError(f"{name}:{p.last_line}: no \\data\\ line (end of file reached)")
    if p.state != "end":
        if p.current is not None:
            s = p.current
            if s.seen != s.count:
                p.err(p.last_line, f"truncated file: the \\{s.n}-grams: section (line {s.header_line}) ends at "
                                   f"end of file with {s.seen} of the {s.count} n-grams announced")
        p.err(p.last_line, "truncated file: end of file before \\end\\")

    vocab = p.vocab
    orders = []
    for s in p.sections:
        prob = np.concatenate(s.prob) if s.prob else np.zeros(0, np.float32)
        bo = np.concatenate(s.backoff) if s.backoff else np.zeros(0, np.float32)
        lines = np.concatenate(s.lines) if s.lines else np.zeros(0, np.int64)
        if s.n == 1:
            if p.unk_drop >= 0:  # the earlier of <unk> / <UNK>: overwritten by the later (KenLM)
                prob, bo, lines = (np.delete(a, p.unk_drop) for a in (prob, bo, lines))
            words = np.arange(len(vocab), dtype=np.int32)[:, None]
        else:
            words = np.concatenate(s.words) if s.words else np.zeros((0, s.n), np.int32)
        orders.append(ArpaOrder(words, prob, bo, lines))
    if not orders:
        raise ArpaError(f"{name}: \\data\\ announces no n-gram orders")

    def find(word: bytes) -> int:
        return int(pc.index(vocab, pa.scalar(word, pa.large_binary())).as_py())

    unk_id, unk_added = p.unk_id, p.unk_added
    if unk_added:  # neither <unk> nor <UNK> (KenLM: config.unknown_missing = COMPLAIN)
        msg = (f"{name}: the model has no <unk> (nor <UNK>); substituting log10 probability "
               f"{UNK_MISSING_LOGPROB} (as KenLM)")
        warnings.warn(msg, stacklevel=2)
        p.warnings.append(msg)
        o = orders[0]
        orders[0] = ArpaOrder(np.arange(len(vocab), dtype=np.int32)[:, None],
                              np.append(o.prob, np.float32(UNK_MISSING_LOGPROB)).astype(np.float32),
                              np.append(o.backoff, np.float32(0)).astype(np.float32),
                              np.append(o.lines, np.int64(0)))
    bos_id, eos_id = find(b"<s>"), find(b"</s>")
    for word, wid in (("<s>", bos_id), ("</s>", eos_id)):
        if wid < 0:  # KenLM: config.sentence_marker_missing = THROW_UP; cutext loads the model
            msg = (f"{name}: the model has no {word} (KenLM refuses such a model); "
                   + ("sentences start from the empty context" if word == "<s>" else "score with eos=False"))
            warnings.warn(msg, stacklevel=2)
            p.warnings.append(msg)
    warns = state.get("warnings", []) + p.warnings
    return ArpaModel(name, vocab_text(vocab, encoding), orders, list(p.counts), unk_id, bos_id, eos_id,
                     unk_added, p.preamble_lines, warns, vocab, encoding, "invalid_line" in state, p.unk_alias)


def vocab_text(vocab_bytes: pa.Array, encoding: str) -> pa.Array:
    """Words (large binary) as a LargeStringArray: decoded with ``encoding``, invalid bytes as ``\\xNN``.

    UTF-8 words that are valid are viewed in place (no copy); other codecs decode word by word.
    """
    if encoding == "utf-8":
        view = vocab_bytes.view(pa.large_string())
        try:
            view.validate(full=True)
            return view
        except pa.ArrowInvalid:
            pass
    return pa.array([w.decode(encoding, errors="backslashreplace") for w in vocab_bytes.to_pylist()],
                    pa.large_string())
