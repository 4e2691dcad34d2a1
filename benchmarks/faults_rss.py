"""Peak memory of the CPU reader on decompression bombs: a zip and a gz member inside a tar.gz.

Builds two archives in a temporary folder (streamed, so building them takes little memory):

* ``zip``: one deflated member of ``--zip-gib`` GiB (default 1) of NUL bytes, about 1 MB on disk;
* ``tar.gz``: a tar.gz (stored, gzip level 0) holding one member ``big.txt.gz``, itself a gzip
  stream of ``--gz-gib`` GiB (default 2) of NUL bytes, about 2 MB on disk;

then reads each with :func:`cutext.stages.readers.source.read_corpus` (synchronous scheduler) in a fresh
subprocess, once per ``--max-ratio`` value, and prints a table of the subprocess' peak resident set
(``ru_maxrss``), its wall time and the outcome.  A baseline row reads a small text file, so the cost
of the interpreter and the imports can be subtracted.

Run::

    .venv/bin/python benchmarks/faults_rss.py                      # the default max_ratio (100)
    .venv/bin/python benchmarks/faults_rss.py --max-ratio 100 none # also with the guard off

With the guard off the member is read whole (it is one document), so the peak then grows with the
member; with the default the read stops after about 100 times the compressed bytes.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile

CHUNK = 16 << 20

CHILD = r"""
import json, resource, sys, time
import dask
from cutext.stages.readers.source import read_corpus
path, ratio = sys.argv[1], sys.argv[2]
ratio = None if ratio == "none" else float(ratio)
t0 = time.perf_counter()
try:
    with dask.config.set(scheduler="synchronous"):
        ddf, pieces, fmt = read_corpus(path, max_ratio=ratio)
        df = ddf.compute()
    outcome = f"read: {len(df)} doc(s), {int(df['text'].str.len().sum()):,} chars"
except Exception as exc:
    outcome = f"{type(exc).__name__}: {str(exc)[:150]}"
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024   # Linux: KiB
print(json.dumps({"peak": peak, "seconds": time.perf_counter() - t0, "outcome": outcome}))
"""


def _zeros(n: int):
    left = n
    block = b"\0" * CHUNK
    while left > 0:
        yield block[:min(left, CHUNK)]
        left -= CHUNK


def build_zip(folder: str, gib: float) -> str:
    path = os.path.join(folder, "bomb.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf, \
            zf.open("zeros.txt", "w", force_zip64=True) as fh:
        for block in _zeros(int(gib * (1 << 30))):
            fh.write(block)
    return path


def build_tar_gz(folder: str, gib: float) -> str:
    inner = os.path.join(folder, "big.txt.gz")
    with gzip.open(inner, "wb", compresslevel=9) as fh:
        for block in _zeros(int(gib * (1 << 30))):
            fh.write(block)
    path = os.path.join(folder, "bomb.tar.gz")
    # level 0: the outer gzip stores the member, so the member's own expansion is what is measured
    # (at level 9 the outer stream would shrink the repetitive member again and trip first)
    with tarfile.open(path, "w:gz", compresslevel=0) as tf:
        tf.add(inner, arcname="big.txt.gz")
    os.remove(inner)
    return path


def build_baseline(folder: str) -> str:
    path = os.path.join(folder, "small.txt")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("a small text file\n" * 1000)
    return path


def measure(path: str, ratio: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, path, ratio], capture_output=True, text=True, check=False)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"peak": float("nan"), "seconds": float("nan"),
                "outcome": f"child failed (rc {out.returncode}): {out.stderr.strip()[-150:]}"}
    return json.loads(lines[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zip-gib", type=float, default=1.0, help="GiB of NUL in the zip member (default 1)")
    ap.add_argument("--gz-gib", type=float, default=2.0, help="GiB of NUL in the gz member of the tar.gz (default 2)")
    ap.add_argument("--max-ratio", nargs="+", default=["100"],
                    help="max_ratio values to read with ('none': no limit); default 100")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        cases = [("baseline (small .txt)", build_baseline(d)),
                 (f"zip, {args.zip_gib:g} GiB NUL member", build_zip(d, args.zip_gib)),
                 (f"tar.gz, gz member of {args.gz_gib:g} GiB NUL", build_tar_gz(d, args.gz_gib))]
        print(f"built in {time.perf_counter() - t0:.1f} s: " +
              ", ".join(f"{os.path.basename(p)} {os.path.getsize(p):,} B" for _, p in cases))
        print()
        print("| case | file size | max_ratio | peak RSS | time | outcome |")
        print("| --- | ---: | ---: | ---: | ---: | --- |")
        for name, path in cases:
            for ratio in (args.max_ratio[:1] if name.startswith("baseline") else args.max_ratio):
                r = measure(path, ratio)
                print(f"| {name} | {os.path.getsize(path):,} B | {ratio} | {r['peak'] / 2**20:,.0f} MiB | "
                      f"{r['seconds']:.1f} s | {r['outcome'].replace('|', '/')} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
