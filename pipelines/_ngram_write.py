"""The ngram pipeline's writers besides its scores folder's (:mod:`cutext.pipelines.ngram`): pylibcudf's chunked
Parquet writer with per-column encodings, and standard input scored line by line to standard output."""
from __future__ import annotations

import sys

from cutext.stages.engines.ngram_model import NGramModel


class _EncodedParquetWriter:
    """pylibcudf's chunked Parquet writer of cudf frames with the given encoding for each named column
    (``{"doc_id": "DELTA_BINARY_PACKED", ...}``, names of ``pylibcudf.io.types.ColumnEncoding``); the
    interface of cudf's ``ParquetWriter`` (``write_table``, ``close``), which takes no encodings. Every
    column is nullable, as in cudf's chunked writer; no pandas metadata, as from pyarrow's writer on the host.

    Raises
    ------
    ValueError
        An encoding libcudf does not name, an option other than ``compression`` and ``statistics``, or a
        column of ``encodings`` not in ``columns``.
    """

    def __init__(self, sink, columns: list, encodings: dict, compression: str | None = "snappy",
                 statistics: str = "ROWGROUP", **unknown):
        if unknown:
            raise ValueError(f"options of cudf's ParquetWriter not taken with column encodings: {sorted(unknown)}")
        if set(encodings) - set(columns):
            raise ValueError(f"encodings for columns not written: {sorted(set(encodings) - set(columns))}")
        import pylibcudf as plc

        kinds = plc.io.types.ColumnEncoding
        bad = [e for e in encodings.values() if not hasattr(kinds, str(e))]
        if bad:
            raise ValueError(f"Parquet encodings libcudf does not name: {bad}")
        self._plc = plc
        self._sink = plc.io.SinkInfo([sink])
        self._columns = list(columns)
        self._encodings = dict(encodings)
        self._compression = getattr(plc.io.types.CompressionType, str(compression or "none").upper())
        self._statistics = getattr(plc.io.types.StatisticsFreq, f"STATISTICS_{statistics.upper()}")
        self._writer = None

    def _table(self, frame):
        if list(frame.columns) != self._columns:
            raise ValueError(f"columns {list(frame.columns)} after {self._columns}")
        return self._plc.Table([frame[c]._column.plc_column for c in self._columns])

    def write_table(self, frame) -> None:
        plc = self._plc
        table = self._table(frame)
        if self._writer is None:
            meta = plc.io.types.TableInputMetadata(table)
            for i, name in enumerate(self._columns):
                meta.column_metadata[i].set_name(name)
                if name in self._encodings:
                    meta.column_metadata[i].set_encoding(getattr(plc.io.types.ColumnEncoding, self._encodings[name]))
            options = (plc.io.parquet.ChunkedParquetWriterOptions.builder(self._sink).metadata(meta)
                       .compression(self._compression).stats_level(self._statistics).build())
            self._writer = plc.io.parquet.ChunkedParquetWriter.from_options(options)
        self._writer.write(table)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close([])


def _score_stdin(kw: dict, batch_lines: int) -> int:
    """Score standard input line by line: ``log10_prob<TAB>tokens<TAB>oov<TAB>perplexity`` a line on standard
    output, the totals on standard error."""
    lm = NGramModel.load(kw["model"], backend=kw.get("backend", "auto"))
    bos, eos = kw.get("bos", True), kw.get("eos", True)
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
        if len(batch) >= batch_lines:
            flush(batch)
            out.flush()
            batch = []
    if batch:
        flush(batch)
    ppl = 10.0 ** (-total_lp / total_tok) if total_tok else float("nan")
    print(f"total log10_prob={total_lp:.6f} tokens={total_tok} perplexity={ppl:.4f}", file=sys.stderr)
    return 0
