# A/B of the 2 GB GPU index (issue 10, sixth pass) in one process, variants alternated, medians of
# --repeats; run on the lent GPU from the repository root after `source benchmarks/gpu_env.sh`:
#   python benchmarks/micro/index_ab.py --data .devdata [--repeats 3] [--variants now,before,...]
# The corpus is benchmarks/bm25.py's replicated 20 Newsgroups (2.00 GB of lines files, written once).
# Variants:
#   before      rules 1-2 by the old device chain (NFC, cudf-assisted lowercase, NFC again) and each term
#               range sorted by libcudf's two-column sort_values (main before this pass, but for the weight
#               step's shallow copy, which no variant undoes)
#   now         normalize_gpu (ASCII rows by one byte kernel, the rest on the host by the CPU rules) and
#               the packed-key sort of each term range
#   bsN         now, reader blocksize N MiB (bm25's GPU default: GPU_BLOCKSIZE, 64 MiB before this pass)
#   ppfN        now, N M postings a file (GPU_POSTINGS_PER_FILE, 8 before this pass; two files in flight)
#   persist0    (seventh pass) in-process persists by dask.persist, which names the results by hashing
#               every cudf partition (cutext.stages.compute._persist_in_process avoids it)
#   enc0        (seventh pass) the GPU index files without the delta encoding of the sorted ids
#               (GPU_POSTINGS_ENCODING / GPU_DOCUMENTS_ENCODING empty)
#   wN          now, N index files in flight while the GPU writes (GPU_WRITE_WORKERS, 2)
#   zstd, lz4, nocomp  now, the GPU index files compressed by ZSTD / LZ4 / not (GPU_COMPRESSION, snappy)
#   shm         now, the index written to /dev/shm (memory, not the disk: what the disk costs)
#   sN          (ninth pass) the in-process build on dask's threaded scheduler with N threads (N pieces in
#               flight in every stage) instead of the synchronous one
#   pin0        (eighth pass) the read as before: each piece read into pinned memory of its own size (CuPy's
#               pinned pool reuses only blocks of one size) and copied to the device; now the bytes stream through
#               fixed pinned staging buffers (cutext.stages.gputext.piece_device_bytes)
#   bounds0     (tenth pass) token bounds by array code (flag arrays, two flatnonzero, a searchsorted) instead of
#               the tk_bounds_count / tk_bounds_write kernels
#   lines0      (tenth pass) the line split by array code (flatnonzero of the newlines, a boolean mask copy)
#               instead of the tk_lines_count / tk_lines_write kernels
#   slices0     (tenth pass) each term range's slice of a counts partition cut by its own two searches and
#               cudf's iloc, instead of one search of each partition for every range (stages.api._term_cuts)
#   sort0       (eleventh pass) the vocabulary sorted on the host by pyarrow after a copy of the distinct terms,
#               instead of on the device (cutext.stages.encode.sorted_terms)
# --check compares each variant's first index with the first variant's (postings, documents, vocabulary).
# --free-pinned empties CuPy's pinned pool before each timed build, as a new process starts (bm25.py's
# DevicePools does; without it the warm-up's pinned blocks serve the timed builds).
# Each timed build writes a new directory (the removal of the previous index is not timed).
# (the first two runs of the log of this pass predate those defaults: "now" there is 64 MiB and 8 M)
# Prints a table: wall seconds (median, runs), RMM peak MiB, stage seconds (medians), files written.
import argparse
import contextlib
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (bm25.py's corpus writer)


def old_prepare(text, lowercase):
    from cutext.stages.tokenize import _lower_gpu, _nfc_gpu

    s = _nfc_gpu(text.fillna("").reset_index(drop=True))
    return _nfc_gpu(_lower_gpu(s)) if lowercase else s


def old_sort(df):
    return df.sort_values(["term_id", "doc_id"], ignore_index=True)


def old_device_bytes(piece, fs):
    """The read of the seventh pass: pinned memory of the piece's exact size, one copy to the device."""
    import cupy
    import numpy as np

    from cutext.stages import gputext

    def pinned(n, dtype):
        return np.frombuffer(cupy.cuda.alloc_pinned_memory(max(int(n), 1)), dtype, int(n))

    buf = cupy.asarray(gputext.piece_bytes(piece, fs, alloc=pinned))
    cupy.cuda.get_current_stream().synchronize()
    return buf


def old_token_bounds(blanked, offsets):
    """The token bounds of the ninth pass: array code (flags, two flatnonzero, a searchsorted)."""
    import cupy as xp
    import numpy as np

    n = int(offsets[-1]) - int(offsets[0])
    lo = int(offsets[0])
    if n == 0:
        z = xp.zeros(0, np.int64)
        return z, z.copy(), z.copy()
    tok = blanked[lo:lo + n] != 0x20
    edge = xp.zeros(n + 1, dtype=bool)
    edge[offsets - lo] = True
    begin = tok.copy()
    begin[1:] &= edge[1:n] | ~tok[:-1]
    finish = tok.copy()
    finish[:-1] &= edge[1:n] | ~tok[1:]
    del tok, edge
    starts = xp.flatnonzero(begin).astype(np.int64) + lo
    ends = xp.flatnonzero(finish).astype(np.int64) + (lo + 1)
    rows = xp.searchsorted(offsets, starts, side="right").astype(np.int64) - 1
    return starts, ends, rows


def old_split_lines(buf):
    """The line split of the ninth pass: array code (flatnonzero of the newlines, a boolean mask copy)."""
    import cupy as xp
    import numpy as np

    nb = len(buf)
    nl = xp.flatnonzero(buf == 10).astype(np.int64)
    if nb and (len(nl) == 0 or int(nl[-1]) != nb - 1):
        raw_ends = xp.concatenate([nl + 1, xp.asarray([nb], dtype=np.int64)])
    else:
        raw_ends = nl + 1
    n = len(raw_ends)
    if n == 0:
        return buf[:0], xp.zeros(1, np.int64)
    starts = xp.zeros(n, dtype=np.int64)
    starts[1:] = raw_ends[:-1]
    has_nl = buf[raw_ends - 1] == 10
    ends = raw_ends - has_nl.astype(np.int64)
    has_cr = has_nl & (ends > starts)
    has_cr &= buf[xp.maximum(ends - 1, 0)] == 13
    ends = ends - has_cr.astype(np.int64)
    keep = xp.ones(nb, dtype=bool)
    keep[nl] = False
    keep[ends[has_cr]] = False
    chars = buf[keep]
    offsets = xp.zeros(n + 1, dtype=np.int64)
    offsets[1:] = xp.cumsum(ends - starts)
    return chars, offsets


def host_sorted_terms(uniq):
    """The vocabulary sort of the tenth pass: the distinct terms copied to the host, sorted by pyarrow."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = uniq.to_arrow() if hasattr(uniq, "to_arrow") else pa.array(uniq)
    arr = pa.chunked_array([arr]).combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    arr = arr.cast(pa.large_string())
    return pc.take(arr, pc.sort_indices(arr))


def old_term_ranges(counts, divisions, weight_fn):
    """The term ranges of the ninth pass (in process): a slice task a (range, partition), its own two
    searches and a cudf iloc, the range concatenating cudf frames."""
    import cudf
    import dask

    from cutext.kernels.backend import values
    from cutext.stages.api import _drop_dl
    from cutext.stages.sort import sort_frame_by_pairs

    def cut(part, lo, hi, last):
        t = values(part["term_id"])
        a = int(t.searchsorted(lo, side="left"))
        e = int(t.searchsorted(hi, side="right" if last else "left"))
        return part.iloc[a:e]

    def rng(slices, weight_fn):
        kept = [s for s in slices if len(s)] or slices[:1]
        return sort_frame_by_pairs(_drop_dl(weight_fn(cudf.concat(kept, ignore_index=True))))

    parts = counts.to_delayed()
    out = []
    for i in range(len(divisions) - 1):
        lo, hi, last = divisions[i], divisions[i + 1], i == len(divisions) - 2
        out.append(dask.delayed(rng)([dask.delayed(cut)(p, lo, hi, last) for p in parts], weight_fn))
    return out, None


def threaded_context(orig, n):
    """compute._context with the in-process scheduler replaced by dask's threaded one of ``n`` threads."""
    import dask

    def ctx(*a):
        gen = orig(*a)
        info = next(gen)
        try:
            with dask.config.set(scheduler="threads", num_workers=n):
                yield info
        finally:
            gen.close()

    return ctx


def same_index(a: Path, b: Path) -> bool:
    """Whether two index directories hold equal postings, documents and vocabulary (values, file order)."""
    import pyarrow.parquet as pq

    for sub in ("postings", "documents", "vocab.parquet"):
        ta, tb = pq.read_table(a / sub), pq.read_table(b / sub)
        if ta.column_names != tb.column_names or not all(ta.column(c).equals(tb.column(c)) for c in ta.column_names):
            return False
    return True


def variant(name):
    """(context manager, run kwargs) of a variant: its swaps are in effect until the stack is closed."""
    from cutext.pipelines import bm25 as bm25_pipe
    from cutext.stages import api, compute, encode, gputext, sort

    stack = contextlib.ExitStack()

    def swap(obj, attr, value):
        stack.enter_context(mock.patch.object(obj, attr, value))

    kw = {}
    if name.split("+")[0] == "before":
        swap(gputext, "_prepare_device", old_prepare)
        swap(sort, "sort_frame_by_pairs", old_sort)
    for part in name.split("+"):
        if part == "persist0":
            swap(compute, "_in_process", lambda: False)
        if part == "bounds0":
            swap(gputext, "token_bounds", old_token_bounds)
        if part == "lines0":
            swap(gputext, "split_lines", old_split_lines)
        if part == "slices0":
            swap(api, "_term_ranges", old_term_ranges)
        if part == "sort0":
            swap(encode, "sorted_terms", host_sorted_terms)
        if part == "pin0":
            swap(gputext, "piece_device_bytes", old_device_bytes)
        if part == "enc0":
            swap(bm25_pipe, "GPU_POSTINGS_ENCODING", {})
            swap(bm25_pipe, "GPU_DOCUMENTS_ENCODING", {})
        if part.startswith("bs"):
            kw["blocksize"] = int(part[2:]) << 20
        if part.startswith("w") and part[1:].isdigit():
            swap(bm25_pipe, "GPU_WRITE_WORKERS", int(part[1:]))
        if part in ("zstd", "lz4", "nocomp"):
            swap(bm25_pipe, "GPU_COMPRESSION", {"zstd": "ZSTD", "lz4": "LZ4", "nocomp": None}[part])
        if part == "shm":
            kw["out"] = "/dev/shm/cutext-ab-index"
        if part.startswith("s") and part[1:].isdigit():
            swap(compute, "_context", threaded_context(compute._context, int(part[1:])))
        if part.startswith("ppf"):
            swap(bm25_pipe, "GPU_POSTINGS_PER_FILE", int(part[3:]) * 1_000_000)
    return stack, kw


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--gb", type=float, default=2.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--variants", default="before+bs64+ppf8,now+bs64+ppf8,now")
    ap.add_argument("--workdir", default="/tmp/cutext-bench")
    ap.add_argument("--profile", default="now",
                    help="variants run once more with $CUTEXT_GPUTEXT_PROFILE=1 (sub-steps; '' for none)")
    ap.add_argument("--check", action="store_true",
                    help="compare each variant's first index with the first variant's")
    ap.add_argument("--free-pinned", action="store_true",
                    help="empty CuPy's pinned memory pool before each timed build (as in a new process)")
    args = ap.parse_args()

    import cupy
    import rmm
    import rmm.statistics

    from bm25 import Corpus, tokenizer_kwargs, write_replicated
    from cutext import pipelines
    from cutext.stages.compute import step_profile

    rmm.mr.set_current_device_resource(rmm.mr.CudaAsyncMemoryResource())
    rmm.statistics.enable_statistics()
    from cutext.pipelines import bm25 as bm25_pipe

    stage_peaks = {}
    run_stage = bm25_pipe._Stages.run

    def run_measured(self, name, fn, *a, **k):  # RMM peak of what each stage allocates (earlier stages' not counted)
        rmm.statistics.push_statistics()
        try:
            return run_stage(self, name, fn, *a, **k)
        finally:
            stage_peaks[name] = max(stage_peaks.get(name, 0), rmm.statistics.pop_statistics().peak_bytes)

    bm25_pipe._Stages.run = run_measured
    data = Path(args.workdir) / f"data-{args.gb:g}GB"
    man = write_replicated(Corpus(Path(args.data) / "corpora" / "20news-bydate.tar.gz"), data, args.gb * 1e9,
                           256e6, 0)
    nbytes = man.get("bytes") or sum(p.stat().st_size for p in data.iterdir())
    out = Path(args.workdir) / "ab-index"
    tok = tokenizer_kwargs("plain")[0]
    names = args.variants.split(",")
    print(f"{nbytes / 1e9:.2f} GB in {len(list(data.iterdir()))} files; variants {names}; "
          f"repeats {args.repeats}", flush=True)
    pipelines.run("bm25", str(data), out=str(out), backend="gpu", scheduler="sync", format="lines",
                  progress=False, **tok)  # warm-up: CUDA context, kernel compilation
    res = {n: [] for n in names}
    for r in range(args.repeats):
        for n in names:
            stack, kw = variant(n)
            o = Path(kw.pop("out", out))
            with stack:
                cupy.get_default_memory_pool().free_all_blocks()
                if args.free_pinned:
                    cupy.get_default_pinned_memory_pool().free_all_blocks()
                shutil.rmtree(o, ignore_errors=True)  # a new directory each build (not the removal of the last)
                step_profile(reset=True)
                rmm.statistics.push_statistics()
                t = time.perf_counter()
                got = pipelines.run("bm25", str(data), out=str(o), backend="gpu", scheduler="sync",
                                    format="lines", progress=False, **kw, **tok)
                sec = time.perf_counter() - t
                peak = rmm.statistics.pop_statistics().peak_bytes
            files = len(list((o / "postings").iterdir()))
            mb = sum(f.stat().st_size for f in o.rglob("*") if f.is_file()) / 1e6
            res[n].append((sec, peak, got.timings, files, dict(stage_peaks), mb))
            stage_peaks.clear()
            if args.check and r == 0:
                ref = Path(args.workdir) / "ab-ref"
                if n == names[0]:
                    shutil.rmtree(ref, ignore_errors=True)
                    shutil.copytree(o, ref)
                else:
                    print(f"  {n}: index equal to {names[0]}'s: {same_index(o, ref)}", flush=True)
            if o != out:
                shutil.rmtree(o, ignore_errors=True)
            print(f"  repeat {r + 1} {n:14s} {sec:6.2f} s  RMM peak {peak / 2**20:7,.0f} MiB  "
                  f"{files} postings files, {mb:,.0f} MB", flush=True)
    print("\n| variant | seconds (median) | runs | GB/s | RMM peak MiB | x input | stages (median s) | stage peaks MiB "
          "| postings files | index MB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in names:
        secs = [x[0] for x in res[n]]
        st = {k: statistics.median(x[2][k] for x in res[n]) for k in res[n][0][2]}
        peak = max(x[1] for x in res[n])
        print(f"| {n} | {statistics.median(secs):.2f} | {', '.join(f'{s:.2f}' for s in secs)} "
              f"| {nbytes / 1e9 / statistics.median(secs):.3f} | {peak / 2**20:,.0f} | {peak / nbytes:.2f} "
              f"| {', '.join(f'{k} {v:.2f}' for k, v in st.items())} "
              f"| {', '.join(f'{k} {max(x[4].get(k, 0) for x in res[n]) / 2**20:,.0f}' for k in st)} "
              f"| {res[n][0][3]} | {res[n][0][5]:,.0f} |")
    os.environ["CUTEXT_GPUTEXT_PROFILE"] = "1"  # read by every StepClock as it starts
    for n in filter(None, args.profile.split(",")):
        stack, kw = variant(n)
        o = Path(kw.pop("out", out))
        with stack:
            shutil.rmtree(o, ignore_errors=True)
            step_profile(reset=True)
            t = time.perf_counter()
            pipelines.run("bm25", str(data), out=str(o), backend="gpu", scheduler="sync", format="lines",
                          progress=False, **kw, **tok)
            sec = time.perf_counter() - t
        prof = step_profile(reset=True)
        print(f"\nprofiled {n} ({sec:.2f} s, device synchronized at each mark): "
              + ", ".join(f"{k} {v:.3f}" for k, v in prof.items()))


if __name__ == "__main__":
    main()
