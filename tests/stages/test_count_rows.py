"""The row count of a lines piece from its bytes (what a Client run's shares wait for to write) against the
rows the reader makes of the same piece."""
from __future__ import annotations

import numpy as np
import pytest

from cutext.kernels.tokenize import count_newlines
from cutext.stages.readers.files import plan, read_piece
from cutext.stages.text import ngram_text
from cutext.stages.text.ngram_text import count_lines_rows


def test_count_newlines_equals_numpy():
    rng = np.random.default_rng(7)
    for n in (0, 1, 255, 256, 4097, 1 << 16):
        buf = rng.choice(np.array([10, 13, 32, 97, 255], np.uint8), size=n)
        assert count_newlines(buf) == int(np.count_nonzero(buf == 10))


@pytest.mark.parametrize("kernel", ["numba", "numpy"])
@pytest.mark.parametrize("body", [
    b"a b\nc\n\nd e f\n",          # a final newline, an empty line
    b"\xef\xbb\xbfa\nb\r\nc",      # byte order mark, CRLF, no final newline
    b"\n\n\n",
    b"x" * 3000 + b"\n" + b"y z\n" * 700 + b"last",
])
def test_count_lines_rows_equals_rows_read(tmp_path, monkeypatch, kernel, body):
    monkeypatch.setattr(ngram_text, "COUNT_WITH", kernel)
    monkeypatch.setattr(ngram_text, "COUNT_CHUNK", 64)  # many chunks a piece, on threads
    path = tmp_path / "t.txt"
    path.write_bytes(body)
    for blocksize in (256, 1 << 20):
        fs, pieces, _ = plan(str(path), format="lines", blocksize=blocksize)
        counted = [count_lines_rows(p, fs) for p in pieces]
        read = [len(read_piece(p, fs)) for p in pieces]
        assert counted == read, (blocksize, counted, read)
