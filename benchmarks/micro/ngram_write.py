# Where the ngram end-to-end time goes on one GPU: per piece read / score / frame / write,
# run one after another, then pipelines.run("ngram", ...) end to end (median of 5) for cudf's Parquet
# writer options x rows gathered per write. Run on the lent GPU from the repository root after
# `source benchmarks/gpu_env.sh`:
#   python benchmarks/micro/ngram_write.py [--data ../shared/data]
# The text file is benchmarks/ngram.py's end-to-end file (the held-out sentences replicated to 1e8 queries).
import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


class _Done:
    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


def main():
    import cupy

    from cutext import pipelines
    from cutext.pipelines import ngram as ng
    from cutext.pipelines.ngram import NGramModel, _ScoresWriter
    from cutext.stages.readers.files import plan
    from cutext.stages.text.ngram_text import read_lines_buffers

    import ngram as nb

    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=".devdata", help="the shared data folder (arpa/lmplz/...)")
    d = Path(ap.parse_args().data)
    sentences = (d / "arpa/lmplz/heldout.inaugural2001-2009.tok.txt").read_text(encoding="utf-8").splitlines()
    path, nq = nb.text_file(sentences, 1e8, "/tmp")
    print("file", path, path.stat().st_size)
    lm = NGramModel.load(d / "arpa/lmplz/abc.o3.arpa.gz", backend="gpu")
    fs, pieces, fmt = plan(path, format="lines", blocksize=64 << 20)
    defaults = (dict(ng.DEVICE_WRITER_OPTIONS), ng.DEVICE_ROWS_PER_WRITE)
    sync = cupy.cuda.runtime.deviceSynchronize

    def e2e(label, reps=5):
        ts = []
        for _ in range(reps):
            t = time.perf_counter()
            r = pipelines.run("ngram", path, out="/tmp/ng-out", model=lm, format="lines", progress=False,
                              overwrite=True)
            ts.append(time.perf_counter() - t)
        ts.sort()
        med = ts[len(ts) // 2]
        print(f"e2e {label:28s} median {med:.3f} s = {r.counts['n_tokens'] / med / 1e6:.0f} M q/s  "
              f"all {[round(x, 3) for x in ts]}  {({k: round(v, 3) for k, v in r.timings.items()})}")

    e2e("warm", 2)
    T = {}
    w = _ScoresWriter(Path("/tmp/ng-prof-d.parquet"), pieces, device=True)
    r0 = 0
    for p in pieces:  # one after another, the device synchronized between steps
        t = time.perf_counter()
        buf = read_lines_buffers(p, fs, device=True)
        sync()
        t1 = time.perf_counter()
        df = ng._score_piece_device(lm, buf, "line", True, True)
        sync()
        t2 = time.perf_counter()
        made = w._frame_device(p, df, r0, r0)
        sync()
        t3 = time.perf_counter()
        w._write_device([_Done(made)])
        sync()
        t4 = time.perf_counter()
        r0 += len(df)
        for k, v in (("read", t1 - t), ("score", t2 - t1), ("frame", t3 - t2), ("write", t4 - t3)):
            T[k] = T.get(k, 0.0) + v
    w.close()
    print("serial per-stage seconds over the pieces (row group a piece):", {k: round(v, 3) for k, v in T.items()})
    for opts in ({}, {"compression": None}):
        for rows in (1, 1 << 20, 1 << 21, 1 << 22):
            ng.DEVICE_WRITER_OPTIONS.clear()
            ng.DEVICE_WRITER_OPTIONS.update(opts)
            ng.DEVICE_ROWS_PER_WRITE = rows
            e2e(f"{opts} rows/write {rows}")
    ng.DEVICE_WRITER_OPTIONS.clear()
    ng.DEVICE_WRITER_OPTIONS.update(defaults[0])
    ng.DEVICE_ROWS_PER_WRITE = defaults[1]


if __name__ == "__main__":
    main()
