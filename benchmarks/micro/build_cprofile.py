# cProfile of one 2 GB GPU index build in process (issue 10, tenth pass): where the host's time goes.
# Run on the lent GPU from the repository root after `source benchmarks/gpu_env.sh`:
#   python benchmarks/micro/build_cprofile.py --data .devdata [--out build.prof]
# Writes benchmarks/bm25.py's replicated 20 Newsgroups corpus (2.00 GB of lines files) once, builds one
# warm-up index and one plain one (timed), then one under cProfile; prints the stage timings and the
# functions by cumulative and by own time (only the main thread is profiled: dask's threaded scheduler
# runs the index writes in its own threads).
import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (bm25.py's corpus writer)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--workdir", default="/tmp/cutext-bench")
    ap.add_argument("--out", default="build.prof", help="where the raw profile goes (pstats format)")
    args = ap.parse_args()

    import rmm

    from bm25 import Corpus, tokenizer_kwargs, write_replicated
    from cutext import pipelines

    rmm.mr.set_current_device_resource(rmm.mr.CudaAsyncMemoryResource())
    data = Path(args.workdir) / "data-2GB"
    write_replicated(Corpus(Path(args.data) / "corpora" / "20news-bydate.tar.gz"), data, 2e9, 256e6, 0)
    tok = tokenizer_kwargs("plain")[0]
    n = [0]

    def run():  # a new index directory each time: the removal of an old one is not part of a build
        n[0] += 1
        out = Path(args.workdir) / f"cprofile-index-{n[0]}"
        return pipelines.run("bm25", str(data), out=str(out), backend="gpu", scheduler="sync", format="lines",
                             progress=False, **tok)

    run()
    t = time.perf_counter()
    r = run()
    print("plain run", round(time.perf_counter() - t, 3), {k: round(v, 3) for k, v in r.timings.items()})
    pr = cProfile.Profile()
    t = time.perf_counter()
    pr.enable()
    r = run()
    pr.disable()
    print("profiled run", round(time.perf_counter() - t, 3), {k: round(v, 3) for k, v in r.timings.items()})
    pr.dump_stats(args.out)
    for key, k in (("cumulative", 70), ("tottime", 40)):
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats(key).print_stats(k)
        print(s.getvalue())


if __name__ == "__main__":
    main()
