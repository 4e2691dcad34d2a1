#!/usr/bin/env python
"""What ``positions=True`` costs: bytes a posting and a token, and build time, with and without positions.

Data: CACM (``data/cacm/cacm.json``, 3,204 abstracts) and 20 Newsgroups (``corpora/20news-bydate.tar.gz`` of the
shared data, 18,846 posts; ``--data DIR`` for the shared data folder).  Every row builds the segmented index on
the CPU (default tokenizer, Lucene variant) in this process, ``--repeat`` times after an untimed first build,
and reports the median build seconds, the bytes of ``postings.parquet`` and of ``positions.parquet`` summed over
the segments, per posting and per token, and the positions stage's own seconds.  ``--encodings`` also writes
one segment's positions column again under other Parquet encodings (the chosen one: gaps, dictionary; the
others: gaps DELTA_BINARY_PACKED, absolute positions DELTA_BINARY_PACKED, gaps PLAIN), all zstd.
``--json PATH`` writes the environment and the rows.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _bytes(index: Path, name: str) -> int:
    return sum(int(json.loads(f.read_text())["files"].get(name, {}).get("bytes", 0))
               for f in (index / "segments").glob("*/segment.json"))


def _encodings(index: Path) -> dict:
    """Bytes of the positions of the index's segments under other encodings (zstd each)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cutext.stages.engines.phrases import read_positions
    from cutext.stages.engines.segments import read_segment

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for seg_dir in sorted((index / "segments").iterdir()):
            seg = read_segment(seg_dir, verify=False)
            pos = read_positions(seg_dir, seg.tf).astype(np.int64)
            starts = np.concatenate([[0], np.cumsum(seg.tf.astype(np.int64))])
            gaps = np.diff(pos, prepend=0)
            gaps[starts[:-1]] = pos[starts[:-1]]
            kinds = {"gaps dictionary (chosen)": (gaps, dict(use_dictionary=["pos"])),
                     "gaps DELTA_BINARY_PACKED": (gaps, dict(use_dictionary=False,
                                                             column_encoding={"pos": "DELTA_BINARY_PACKED"})),
                     "absolute DELTA_BINARY_PACKED": (pos, dict(use_dictionary=False,
                                                                column_encoding={"pos": "DELTA_BINARY_PACKED"})),
                     "gaps PLAIN": (gaps, dict(use_dictionary=False))}
            for k, (col, kw) in kinds.items():
                f = Path(tmp) / "p.parquet"
                pq.write_table(pa.table({"pos": col.astype(np.int32)}), f, compression="zstd", write_statistics=False,
                               **kw)
                out[k] = out.get(k, 0) + f.stat().st_size
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--corpora", default="cacm,20news")
    ap.add_argument("--encodings", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    from cutext import pipelines

    inputs = {"cacm": REPO / "data" / "cacm" / "cacm.json",
              "20news": Path(a.data) / "corpora" / "20news-bydate.tar.gz"}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.corpora.split(","):
            for positions in (False, True):
                out = Path(tmp) / f"{name}-{positions}"
                kw = dict(out=out, positions=positions, backend="cpu", progress=False)
                pipelines.run("bm25", inputs[name], **kw)  # untimed: numba's cache, the page cache
                secs, stage = [], []
                for _ in range(a.repeat):
                    t0 = time.perf_counter()
                    r = pipelines.run("bm25", inputs[name], **kw)
                    secs.append(time.perf_counter() - t0)
                    stage.append(r.timings.get("positions", 0.0))
                c = r.counts
                row = {"corpus": name, "positions": positions, "docs": c["n_docs"], "postings": c["n_postings"],
                       "tokens": c["n_tokens"], "build_s": statistics.median(secs),
                       "positions_stage_s": statistics.median(stage),
                       "postings_bytes": _bytes(out, "postings.parquet"),
                       "positions_bytes": _bytes(out, "positions.parquet"),
                       "scheduler": r.scheduler}
                row["postings_bytes_per_posting"] = row["postings_bytes"] / c["n_postings"]
                row["positions_bytes_per_posting"] = row["positions_bytes"] / c["n_postings"]
                row["positions_bytes_per_token"] = row["positions_bytes"] / c["n_tokens"]
                if positions and a.encodings:
                    row["encodings"] = _encodings(out)
                rows.append(row)
                print(json.dumps(row), flush=True)
    if a.json:
        env = {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
               "load": os.getloadavg(), "date": time.strftime("%Y-%m-%d")}
        Path(a.json).write_text(json.dumps({"env": env, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
