"""Where the seconds of writing one piece's scores go on the device: cudf's chunked Parquet writer by sink,
compression and statistics, column by column, pylibcudf's chunked writer with delta encodings by column,
the copy to the host and pyarrow's writer, and two writers at once.

The frame is the one the ngram pipeline writes for the first piece (``--blocksize-mb``) of
``benchmarks/ngram.py``'s end-to-end file: the held-out sentences replicated to ``--queries`` queries,
scored on the GPU and framed as ``_ScoresWriter`` frames it.  Each row: the median of ``--repeats`` calls
(one row group each into a writer opened once), the device synchronized around each; ``cpu s`` is the
calling thread's CPU seconds in the call (the rest of ``s`` is waiting: for the GPU or for other threads).

    source benchmarks/gpu_env.sh
    python benchmarks/micro/ngram_encode.py --queries 2e8 --blocksize-mb 256
"""
from __future__ import annotations

import argparse
import inspect
import io
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

import ngram as bench  # noqa: E402  (the text files and data folder of the ngram benchmark)


class NullSink(io.RawIOBase):
    """A writable file that keeps nothing but the count of bytes written."""

    def __init__(self):
        self.n = 0

    def writable(self):
        return True

    def write(self, b):
        n = memoryview(b).nbytes
        self.n += n
        return n


def timed(fn, repeats: int, sync) -> tuple:
    """Median wall and calling-thread CPU seconds of ``repeats`` calls of ``fn`` (after one warm-up call)."""
    fn()
    sync()
    walls, cpus = [], []
    for _ in range(repeats):
        sync()
        t, c = time.perf_counter(), time.thread_time()
        fn()
        sync()
        walls.append(time.perf_counter() - t)
        cpus.append(time.thread_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=float, default=2e8)
    ap.add_argument("--blocksize-mb", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--data", default=None)
    ap.add_argument("--tmp", default="/tmp")
    return ap.parse_args(argv)


def first_piece(args, sync):
    """The first piece of the end-to-end file scored and framed on the device: ``(writer, pieces, scores,
    frame, frame bytes)``."""
    from cudf.io.parquet import ParquetWriter

    from cutext.pipelines import ngram as ng
    from cutext.pipelines.ngram import NGramModel, _ScoresWriter
    from cutext.stages.readers.files import plan
    from cutext.stages.text.ngram_text import read_lines_buffers

    d = bench.data_dir(args.data)
    sentences = (d / "arpa" / "lmplz" / "heldout.inaugural2001-2009.tok.txt").read_text(encoding="utf-8").splitlines()
    print(bench.environment(), flush=True)
    print("cudf ParquetWriter", inspect.signature(ParquetWriter), flush=True)
    path, _ = bench.text_file(sentences, args.queries, args.tmp)
    lm = NGramModel.load(d / "arpa" / "lmplz" / "abc.o3.arpa.gz", backend="gpu")
    fs, pieces, _ = plan(path, format="lines", blocksize=args.blocksize_mb << 20)
    texts = read_lines_buffers(pieces[0], fs, device=True)
    sync()
    t = time.perf_counter()
    df = ng._score_piece_device(lm, texts, "line", True, True)
    sync()
    t_score = time.perf_counter() - t
    w = _ScoresWriter(Path(args.tmp) / "unused.parquet", pieces, device=True)
    t = time.perf_counter()
    frame, _, _ = w._frame_device(pieces[0], df, 0, 0)
    sync()
    t_frame = time.perf_counter() - t
    raw = sum(int(c.memory_usage()) for _, c in frame.items())
    text_mb = ((pieces[0].end or path.stat().st_size) - pieces[0].start) / 1e6
    print(f"piece 0: {text_mb:.1f} MB of text, {len(frame):,} rows, frame {raw / 1e6:.1f} MB on the device; "
          f"score {t_score:.3f} s, frame {t_frame:.3f} s (one call, cold)", flush=True)
    return w, pieces, df, frame, raw


def writer_rows(rows, frame, folder, files, args, sync) -> None:
    """cudf's chunked writer by sink and options, then pylibcudf's with encodings by column."""
    from cudf.io.parquet import ParquetWriter

    from cutext.pipelines import ngram as ng
    from cutext.stages.runtime.checksums import open_checksummed

    def cudf_row(label, sink_fn, table=frame, **opts):
        sink = sink_fn()
        writer = ParquetWriter(sink, index=False, **opts)
        s, c = timed(lambda: writer.write_table(table), args.repeats, sync)
        writer.close()
        n = getattr(sink, "n", None)
        if hasattr(sink, "close"):
            sink.close()
        rows.append((label, s, c, n))
        print(rows[-1], flush=True)

    cudf_row("cudf -> null sink (snappy, rowgroup statistics: the pipeline's options)", NullSink)
    cudf_row("cudf -> BytesIO", io.BytesIO)
    cudf_row("cudf -> checksummed file (the pipeline)", lambda: open_checksummed(folder / f"f{next(files)}.parquet"))
    cudf_row("cudf -> plain file object", lambda: open(folder / f"f{next(files)}.parquet", "wb"))
    cudf_row("cudf -> path (cudf's own file sink)", lambda: str(folder / f"f{next(files)}.parquet"))
    cudf_row("cudf -> null, no compression", NullSink, compression=None)
    cudf_row("cudf -> null, statistics NONE", NullSink, statistics="NONE")
    cudf_row("cudf -> null, no compression, statistics NONE", NullSink, compression=None, statistics="NONE")
    cudf_row("cudf -> null, no dictionary", NullSink, use_dictionary=False)
    cudf_row("cudf -> null, LZ4", NullSink, compression="LZ4")
    cudf_row("cudf -> null, LZ4, no dictionary", NullSink, compression="LZ4", use_dictionary=False)
    cudf_row("cudf -> null, ZSTD", NullSink, compression="ZSTD")
    cudf_row("cudf -> checksummed file, no dictionary", lambda: open_checksummed(folder / f"f{next(files)}.parquet"),
             use_dictionary=False)
    cudf_row("cudf -> checksummed file, LZ4, no dictionary",
             lambda: open_checksummed(folder / f"f{next(files)}.parquet"), compression="LZ4", use_dictionary=False)
    for name in frame.columns:
        cudf_row(f"cudf -> null, column {name} alone", NullSink, table=frame[[name]])

    # pylibcudf's chunked writer with encodings by column, as the pipeline writes (cudf's ParquetWriter takes none)
    def plc_row(label, sink_fn, encodings):
        sink = sink_fn()
        writer = ng._EncodedParquetWriter(sink, list(frame.columns), encodings)
        s, c = timed(lambda: writer.write_table(frame), args.repeats, sync)
        writer.close()
        n = getattr(sink, "n", None)
        if hasattr(sink, "close"):
            sink.close()
        rows.append((label, s, c, n))
        print(rows[-1], flush=True)

    delta_ids = {"doc_id": "DELTA_BINARY_PACKED"}
    delta_all = {**delta_ids, "source_id": "DELTA_BYTE_ARRAY", "sentences": "DELTA_BINARY_PACKED",
                 "tokens": "DELTA_BINARY_PACKED", "oov": "DELTA_BINARY_PACKED"}
    delta_ids_src = {**delta_ids, "source_id": "DELTA_BYTE_ARRAY"}
    for label, enc in (("default encodings", {}), ("doc_id DELTA_BINARY_PACKED", delta_ids),
                       ("doc_id delta, source_id DELTA_BYTE_ARRAY", delta_ids_src),
                       ("doc_id delta, source_id DELTA_LENGTH_BYTE_ARRAY",
                        {**delta_ids, "source_id": "DELTA_LENGTH_BYTE_ARRAY"}),
                       ("doc_id delta, source_id DELTA_BYTE_ARRAY, counts delta", delta_all)):
        try:
            plc_row(f"pylibcudf -> null, {label}", NullSink, enc)
        except Exception as exc:  # noqa: BLE001 - an encoding this libcudf refuses: say so, go on
            print(f"pylibcudf {label}: {type(exc).__name__}: {exc}", flush=True)
    try:
        plc_row(f"pylibcudf -> checksummed file, the pipeline's DEVICE_SCORE_ENCODINGS {ng.DEVICE_SCORE_ENCODINGS}",
                lambda: open_checksummed(folder / f"f{next(files)}.parquet"), ng.DEVICE_SCORE_ENCODINGS or {})
        plc_row("pylibcudf -> checksummed file, doc_id delta, source_id DELTA_BYTE_ARRAY, counts delta",
                lambda: open_checksummed(folder / f"f{next(files)}.parquet"), delta_all)
    except Exception as exc:  # noqa: BLE001
        print(f"pylibcudf to a file: {type(exc).__name__}: {exc}", flush=True)


def step_rows(rows, w, pieces, df, frame, folder, files, args, sync) -> None:
    """The frame's steps, the copy to the host and pyarrow's writer, and cudf writers at once."""
    import cudf
    import cupy
    import pyarrow.parquet as pq
    from cudf.io.parquet import ParquetWriter

    from cutext.stages.runtime.checksums import open_checksummed

    n = len(frame)

    def step(label, fn):
        s, c = timed(fn, args.repeats, sync)
        rows.append((f"frame step: {label}", s, c, None))
        print(rows[-1], flush=True)

    step("the whole frame (_frame_device)", lambda: w._frame_device(pieces[0], df, 0, 0))
    step("doc_id: cupy.arange", lambda: cupy.arange(0, n, dtype="int64"))
    step("row numbers as strings: Series(arange).astype(str)",
         lambda: cudf.Series(cupy.arange(0, n, dtype="int64")).astype(str))
    digits = cudf.Series(cupy.arange(0, n, dtype="int64")).astype(str)
    step("label prefix: .str.insert(0, label)", lambda: digits.str.insert(0, "text.txt:"))
    step("sums and log10 to the host",
         lambda: (cupy.stack([frame[c].values.sum() for c in ("sentences", "tokens", "oov")]
                             + [(frame["tokens"].values == 0).sum()]).get(),
                  frame["log10_prob"].values.get()))
    s, c = timed(lambda: frame.to_arrow(), args.repeats, sync)
    rows.append(("to_arrow (device to host)", s, c, None))
    print(rows[-1], flush=True)
    host = frame.to_arrow()

    def arrow_row(label, **opts):
        sink = NullSink()
        writer = pq.ParquetWriter(sink, host.schema, use_dictionary=False, **opts)
        s, c = timed(lambda: writer.write_table(host), args.repeats, lambda: None)
        writer.close()
        rows.append((label, s, c, sink.n))
        print(rows[-1], flush=True)

    arrow_row("pyarrow -> null (snappy), host table")
    arrow_row("pyarrow -> null, no compression", compression="NONE")

    def two(sink_fn, n_writers=2):
        writers = [ParquetWriter(sink_fn(), index=False) for _ in range(n_writers)]

        def both():
            ts = [threading.Thread(target=wr.write_table, args=(frame,)) for wr in writers]
            for x in ts:
                x.start()
            for x in ts:
                x.join()
        s, c = timed(both, args.repeats, sync)
        for wr in writers:
            wr.close()
        return s, c

    for n_writers in (2, 4):
        s, c = two(NullSink, n_writers)
        rows.append((f"{n_writers} cudf writers at once, threads -> null (the same frame each)", s, c, None))
        print(rows[-1], flush=True)
    s, c = two(lambda: open_checksummed(folder / f"f{next(files)}.parquet"))
    rows.append(("2 cudf writers at once -> checksummed files", s, c, None))
    print(rows[-1], flush=True)


def main(argv=None) -> int:
    args = parse_args(argv)
    import cupy

    sync = cupy.cuda.runtime.deviceSynchronize
    w, pieces, df, frame, raw = first_piece(args, sync)
    rows = []
    folder = Path(tempfile.mkdtemp(prefix="ngram-encode-", dir=args.tmp))
    files = iter(range(1000))
    writer_rows(rows, frame, folder, files, args, sync)
    step_rows(rows, w, pieces, df, frame, folder, files, args, sync)

    print(f"\n{len(frame):,} rows, {raw / 1e6:.1f} MB a frame on the device (median of {args.repeats})\n")
    print("| row | s | cpu s | rows / s (M) | bytes out |\n| --- | --- | --- | --- | --- |")
    for label, s, c, n in rows:
        print(f"| {label} | {s:.4f} | {c:.4f} | {len(frame) / s / 1e6:.1f} | {'' if n is None else f'{n:,}'} |")
    w.close()
    import shutil

    shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
