"""Streaming reader for ARPA back-off language models (the format of SRILM, KenLM's lmplz, CMU-SLM).

The file is read in blocks of bytes (gzip, bz2 and xz are recognised by their magic bytes), decoded
as UTF-8 and split into lines; every block of n-gram lines is parsed at once with pyarrow compute
(whitespace split, string -> float cast, word -> id hash lookup), so no Python code runs per n-gram.

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

Fields are separated by any ASCII white space (tabs or spaces, as the CMU files use). Blank lines
are ignored. The vocabulary is the words of the 1-gram section, with ids in file order. A model
without ``<unk>`` gets one with log10 probability -100 and backoff 0 (KenLM's behaviour, with a
warning). Positive log10 probabilities are set to 0 with a warning (KenLM's behaviour).

Errors (:class:`ArpaError`, a ``ValueError``) name the file and the line: no ``\\data\\`` line, a
malformed counts header, a section out of order, a section whose number of n-grams differs from
the header, a line with the wrong number of fields, a number that does not parse, a word missing
from the 1-grams, a duplicate unigram, a truncated file (no ``\\end\\``), bytes that are not UTF-8.
"""
from __future__ import annotations

import bz2
import gzip
import lzma
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

BLOCK_BYTES = 1 << 24
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
    vocab : pyarrow.StringArray (V,)
        Word of each id (1-gram section order; ``<unk>`` appended when the file lacks it).
    orders : list of ArpaOrder
        ``orders[n - 1]`` holds the n-grams; ``orders[0].words`` is ``arange(V)[:, None]``.
    counts : list of int
        Number of n-grams per order as announced by ``\\data\\`` (checked against the sections).
    unk_id, bos_id, eos_id : int
        Ids of ``<unk>``, ``<s>``, ``</s>`` (-1 for ``<s>``/``</s>`` when absent).
    unk_added : bool
        True when ``<unk>`` was missing from the file and was added.
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

    @property
    def order(self) -> int:
        return len(self.orders)


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


def _line_blocks(fh, name: str, block_bytes: int):
    """Yield ``(first_line_number, lines)``: the file's lines (each with its newline), a block at a time.

    ``lines`` is a pyarrow LargeStringArray built directly on the block's bytes (offsets at the
    newlines), so no Python string is made per line; the block is checked to be UTF-8.
    """
    carry = b""
    lineno = 1
    while True:
        data = fh.read(block_bytes)
        if not data:
            break
        data = carry + data
        cut = data.rfind(b"\n")
        if cut < 0:
            carry = data
            continue
        carry = data[cut + 1:]
        lines = _as_lines(data[: cut + 1], name, lineno)
        yield lineno, lines
        lineno += len(lines)
    if carry:
        yield lineno, _as_lines(carry, name, lineno)


def _as_lines(chunk: bytes, name: str, lineno: int) -> pa.Array:
    nl = np.flatnonzero(np.frombuffer(chunk, np.uint8) == 10)
    ends = nl + 1 if len(nl) and nl[-1] == len(chunk) - 1 else np.append(nl + 1, len(chunk))
    offsets = np.zeros(len(ends) + 1, np.int64)
    offsets[1:] = ends
    arr = pa.LargeStringArray.from_buffers(len(ends), pa.py_buffer(offsets), pa.py_buffer(chunk))
    try:
        arr.validate(full=True)
    except pa.ArrowInvalid:
        try:
            chunk.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = lineno + chunk[: exc.start].count(b"\n")
            raise ArpaError(f"{name}:{line}: bytes that are not UTF-8 ({exc.reason})") from None
        raise
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
    def __init__(self, name: str):
        self.name = name
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
            if self.state == "end":
                return False
            if self.state == "preamble":
                hit = pc.equal(pc.ascii_trim_whitespace(lines.slice(i)), "\\data\\").to_numpy(zero_copy_only=False)
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
                line = lines[i].as_py().strip()
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
        arr = lines.slice(i)
        trimmed = pc.ascii_trim_whitespace(arr)
        is_header = pc.starts_with(trimmed, "\\").to_numpy(zero_copy_only=False)
        hdr = np.flatnonzero(is_header)
        stop = int(hdr[0]) if len(hdr) else len(arr)
        if stop:
            self._parse(trimmed.slice(0, stop), first + i)
        if stop < len(arr):
            self._header(trimmed[stop].as_py(), first + i + stop)
        return i + stop + (1 if stop < len(arr) else 0)

    def _parse(self, trimmed: pa.Array, first_line: int):
        s = self.current
        n = s.n
        lens_all = pc.utf8_length(trimmed).to_numpy(zero_copy_only=False)
        rows = np.flatnonzero(lens_all > 0)
        if len(rows) == 0:
            return
        line_no = first_line + rows.astype(np.int64)
        if s.seen + len(rows) > s.count:
            k = s.count - s.seen
            self.err(int(line_no[k]), f"more {n}-grams than the {s.count} announced by \\data\\")
        data = trimmed.take(pa.array(rows))
        split = pc.ascii_split_whitespace(data)
        offs = split.offsets.to_numpy()
        nf = np.diff(offs)
        allowed = (nf == n + 1) | ((nf == n + 2) & (n < len(self.counts)))
        if not allowed.all():
            b = int(np.flatnonzero(~allowed)[0])
            want = f"{n + 1} or {n + 2}" if n < len(self.counts) else f"{n + 1}"
            self.err(int(line_no[b]), f"expected {want} fields (log10 prob, {n} word(s)"
                     f"{', backoff' if n < len(self.counts) else ''}) in a {n}-gram line, got {int(nf[b])}: "
                     f"{data[b].as_py()!r}")
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
                self.err(int(line_no[b]), f"backoff weight is not finite: {data[b].as_py()!r}")
        if np.isnan(prob).any():
            b = int(np.flatnonzero(np.isnan(prob))[0])
            self.err(int(line_no[b]), f"log10 probability is NaN: {data[b].as_py()!r}")
        pos = prob > 0
        if pos.any():
            b = int(np.flatnonzero(pos)[0])
            self.warnings.append(f"{self.name}:{int(line_no[b])}: positive log10 probability set to 0 "
                                 f"({int(pos.sum())} such n-grams of order {n})")
            warnings.warn(self.warnings[-1], stacklevel=4)
            prob[pos] = 0.0
        widx = start[:, None] + 1 + np.arange(n)[None, :]
        words = flat.take(pa.array(widx.ravel()))
        if n == 1:
            s.words.append(words)
        else:
            found = pc.index_in(words, value_set=self.vocab)
            if found.null_count:
                miss = int(np.flatnonzero(found.is_null().to_numpy(zero_copy_only=False))[0])
                self.err(int(line_no[miss // n]), f"word {words[miss].as_py()!r} is not in the 1-grams")
            ids = found.to_numpy(zero_copy_only=False)
            s.words.append(ids.astype(np.int32).reshape(-1, n))
        s.prob.append(prob.astype(np.float32))
        s.backoff.append(bo.astype(np.float32))
        s.lines.append(line_no)
        s.seen += len(rows)

    def _floats(self, flat, idx, line_no, what) -> np.ndarray:
        strings = flat.take(pa.array(idx))
        try:
            return pc.cast(strings, pa.float64()).to_numpy(zero_copy_only=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            for k, v in enumerate(strings.to_pylist()):
                try:
                    float(v)
                except ValueError:
                    self.err(int(line_no[k]), f"bad {what} {v!r}")
            raise

    def _finish_vocab(self, s: _Section):
        vocab = pa.concat_arrays(s.words) if s.words else pa.array([], pa.large_string())
        if len(pc.unique(vocab)) != len(vocab):
            codes = pc.dictionary_encode(vocab).indices.to_numpy(zero_copy_only=False)
            _, first_idx = np.unique(codes, return_index=True)
            seen = np.zeros(len(codes), bool)
            seen[first_idx] = True
            dup = int(np.flatnonzero(~seen)[0])
            lines = np.concatenate(s.lines)
            self.err(int(lines[dup]), f"duplicate 1-gram {vocab[dup].as_py()!r}")
        self.vocab = vocab


def read_arpa(path, *, block_bytes: int = BLOCK_BYTES) -> ArpaModel:
    """Read an ARPA file into per-order numpy arrays.

    Parameters
    ----------
    path : str or os.PathLike
        Plain, gzip, bz2 or xz file.
    block_bytes : int
        Bytes decoded and parsed at a time (memory bound of the streaming reader).

    Returns
    -------
    ArpaModel

    Raises
    ------
    FileNotFoundError
    ArpaError
        Malformed input; the message names the file and the line.
    """
    name = str(path)
    if not Path(path).exists():
        raise FileNotFoundError(f"{name}: no such file")
    p = _Parser(name)
    try:
        with open_binary(path) as fh:
            for first, lines in _line_blocks(fh, name, block_bytes):
                if not p.feed(first, lines):
                    break
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
            words = np.arange(len(vocab), dtype=np.int32)[:, None]
        else:
            words = np.concatenate(s.words) if s.words else np.zeros((0, s.n), np.int32)
        orders.append(ArpaOrder(words, prob, bo, lines))
    if not orders:
        raise ArpaError(f"{name}: \\data\\ announces no n-gram orders")

    def find(word):
        idx = pc.index(vocab, word).as_py()
        return int(idx)

    unk_id = find("<unk>")
    unk_added = False
    if unk_id < 0:
        unk_added = True
        msg = f"{name}: the model has no <unk>; substituting log10 probability {UNK_MISSING_LOGPROB} (as KenLM)"
        warnings.warn(msg, stacklevel=2)
        p.warnings.append(msg)
        vocab = pa.concat_arrays([vocab, pa.array(["<unk>"], pa.large_string())])
        o = orders[0]
        unk_id = len(vocab) - 1
        orders[0] = ArpaOrder(np.arange(len(vocab), dtype=np.int32)[:, None],
                              np.append(o.prob, np.float32(UNK_MISSING_LOGPROB)).astype(np.float32),
                              np.append(o.backoff, np.float32(0)).astype(np.float32),
                              np.append(o.lines, np.int64(0)))
    return ArpaModel(name, vocab, orders, list(p.counts), unk_id, find("<s>"), find("</s>"), unk_added,
                     p.preamble_lines, p.warnings)
