"""``.npy`` files read by a pool of threads in a loop, with ``numpy.load`` and with cutext's reader
(:func:`cutext.stages.runtime.npy.read_npy`): counts the errors each raises, and the time a read takes.

``numpy.load`` parses each header with ``ast.literal_eval``; on CPython 3.11-3.12 the AST constructor keeps
one recursion counter for the interpreter (gh-106905), so two threads converting an AST at once may raise
``SystemError: AST constructor recursion depth mismatch``.  A thread switches inside that conversion only
where Python code runs in it: a garbage collection calling a finaliser written in Python (as the test suite's
dask and distributed objects have), so a background thread here keeps making cyclic garbage with ``__del__``
(``--no-garbage``: none), and the switch interval is short (``--switch``).

    python benchmarks/micro/npy_threads.py [--seconds 60] [--threads 8] [--files 64] [--reader numpy,cutext]

Exit status 0; prints one line a reader: reads, errors by kind, microseconds a read.
"""
from __future__ import annotations

import argparse
import collections
import gc
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np


class _Cycle:
    """A reference cycle with a Python finaliser: collecting it runs Python code inside an allocation."""

    def __init__(self):
        self.me = self

    def __del__(self):
        sum(range(20))


def _garbage(stop: threading.Event) -> None:
    while not stop.is_set():
        for _ in range(200):
            _Cycle()
        time.sleep(0)


def _run(load, files, threads: int, seconds: float) -> tuple:
    """``(reads, Counter of error messages)`` of ``load`` over ``files`` on ``threads`` threads for ``seconds``."""
    errors, reads = collections.Counter(), 0
    deadline = time.perf_counter() + seconds

    def one(f):
        try:
            a = load(f)
            assert a.shape == (1000,)
            return None
        except Exception as exc:  # counted, the loop goes on
            return f"{type(exc).__name__}: {str(exc)[:60]}"

    with ThreadPoolExecutor(threads) as pool:
        while time.perf_counter() < deadline:
            for err in pool.map(one, files):
                reads += 1
                if err:
                    errors[err] += 1
    return reads, errors


def main(argv=None) -> int:
    from cutext.stages.runtime.npy import read_npy

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="seconds of reads a reader (default 60)")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--files", type=int, default=64)
    ap.add_argument("--reader", default="numpy,cutext", help="numpy, cutext or both (default numpy,cutext)")
    ap.add_argument("--switch", type=float, default=1e-6, help="sys.setswitchinterval, seconds (default 1e-6)")
    ap.add_argument("--no-garbage", action="store_true", help="no background cyclic garbage with finalisers")
    args = ap.parse_args(argv)
    readers = {"numpy": lambda f: np.load(f, allow_pickle=False), "cutext": read_npy}
    sys.setswitchinterval(args.switch)
    gc.set_threshold(100, 5, 5)  # collections often, as in a long test session
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, {args.threads} threads, {args.files} files, "
          f"{args.seconds:g} s a reader, garbage {'off' if args.no_garbage else 'on'}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i in range(args.files):
            files.append(Path(tmp) / f"a{i}.npy")
            np.save(files[-1], np.arange(1000, dtype=np.int64), allow_pickle=False)
        for name in args.reader.split(","):
            stop = threading.Event()
            bg = None if args.no_garbage else threading.Thread(target=_garbage, args=(stop,), daemon=True)
            if bg:
                bg.start()
            t = time.perf_counter()
            reads, errors = _run(readers[name], files, args.threads, args.seconds)
            dt = time.perf_counter() - t
            stop.set()
            if bg:
                bg.join()
            shown = "; ".join(f"{n} x {e}" for e, n in errors.most_common(3)) or "none"
            print(f"{name:>6}: {reads:,} reads, {sum(errors.values())} errors ({shown}), "
                  f"{dt / max(reads, 1) * 1e6:.1f} us a read", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
