# Ad hoc micro-benchmark of where cudf's Parquet writer spends its time on the postings (issue 10), run on
# the lent GPU from the repository root after `source benchmarks/gpu_env.sh`:
#   python benchmarks/micro/parquet_sink.py [label]
# (run it once per environment setting, e.g. LIBCUDF_PINNED_POOL_SIZE, KVIKIO_NTHREADS). Medians of 3.
import io
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import cupy as cp
import cupyx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from _common import med, postings_frame

label = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else "default"
os.makedirs("/tmp/pqs", exist_ok=True)
df = postings_frame(1)
n = len(df)
raw = sum(df[c].dtype.itemsize for c in df.columns) * n
print(f"[{label}] 8 M postings, {raw / 1e6:.0f} MB raw")

# 1. the copy to the host alone: pageable vs pinned
a = cp.random.default_rng(2).integers(0, 255, raw, dtype=cp.uint8)
h = np.empty(raw, np.uint8)
p = cupyx.empty_pinned(raw, np.uint8)
t_page = med(lambda: a.get(out=h), warmup=True)
t_pin = med(lambda: a.get(out=p), warmup=True)
print(f"[{label}] D2H {raw / 1e6:.0f} MB: pageable {t_page * 1e3:.1f} ms ({raw / t_page / 1e9:.1f} GB/s), "
      f"pinned {t_pin * 1e3:.1f} ms ({raw / t_pin / 1e9:.1f} GB/s)")
a = None  # free the device buffer


def cudf_row(name, fn):
    try:
        print(f"[{label}] {name:44s} {med(fn, warmup=True) * 1e3:8.1f} ms")
    except Exception as e:  # an option this cudf lacks
        print(f"[{label}] {name:44s} failed: {type(e).__name__}: {str(e)[:100]}")


cudf_row("cudf 8M -> BytesIO", lambda: df.to_parquet(io.BytesIO(), index=False))
cudf_row("cudf 8M -> file", lambda: df.to_parquet("/tmp/pqs/a.parquet", index=False))
cudf_row("cudf 8M -> file, no stats", lambda: df.to_parquet("/tmp/pqs/a.parquet", index=False, statistics="NONE"))
big = __import__("cudf").concat([postings_frame(i) for i in range(4)], ignore_index=True)
cudf_row("cudf 32M -> BytesIO", lambda: big.to_parquet(io.BytesIO(), index=False))
cudf_row("cudf 32M -> file", lambda: big.to_parquet("/tmp/pqs/b.parquet", index=False))
cudf_row("cudf 32M -> file, row groups of 8M",
         lambda: big.to_parquet("/tmp/pqs/b.parquet", index=False, row_group_size_rows=8_000_000))
cudf_row("cudf 32M -> file, pages 4 MB",
         lambda: big.to_parquet("/tmp/pqs/b.parquet", index=False, max_page_size_bytes=4 << 20))
parts = [big.iloc[i * n:(i + 1) * n] for i in range(4)]


def chunked():
    from cudf.io.parquet import ParquetWriter

    w = ParquetWriter("/tmp/pqs/c.parquet", index=False)
    for q in parts:
        w.write_table(q)
    w.close()


cudf_row("cudf ParquetWriter 4 x 8M -> one file", chunked)


def threads4():
    with ThreadPoolExecutor(4) as ex:
        list(ex.map(lambda i: parts[i].to_parquet(f"/tmp/pqs/t{i}.parquet", index=False), range(4)))


cudf_row("cudf 4 x 8M -> 4 files, 4 threads", threads4)
cudf_row("cudf 4 x 8M -> 4 files, serial",
         lambda: [q.to_parquet(f"/tmp/pqs/s{i}.parquet", index=False) for i, q in enumerate(parts)])

if "--cudf-only" in sys.argv:
    sys.exit(0)

# 2. host writer: one pinned copy of the columns, pyarrow encodes (GIL released) in threads
cols = {c: cupyx.empty_pinned(n, df[c].dtype) for c in df.columns}


def to_host(frame):
    for c in frame.columns:
        cp.asarray(frame[c].values).get(out=cols[c])
    return pa.table({c: pa.array(cols[c]) for c in frame.columns})


t_copy = med(lambda: to_host(df))
tab = to_host(df)
print(f"[{label}] pinned column copies 8M: {t_copy * 1e3:.1f} ms")
for name, kw in [("snappy, dict", {}), ("snappy, no dict", {"use_dictionary": False}),
                 ("snappy, dict term_id only", {"use_dictionary": ["term_id"]}),
                 ("none, no dict", {"compression": "none", "use_dictionary": False}),
                 ("lz4, dict term_id only", {"compression": "lz4", "use_dictionary": ["term_id"]}),
                 ("snappy, no dict, no stats", {"use_dictionary": False, "write_statistics": False})]:
    t = med(lambda: pq.write_table(tab, "/tmp/pqs/h.parquet", **kw))
    size = os.path.getsize("/tmp/pqs/h.parquet")
    hosts = [tab] * 8

    def par():
        with ThreadPoolExecutor(8) as ex:
            list(ex.map(lambda i: pq.write_table(hosts[i], f"/tmp/pqs/h{i}.parquet", **kw), range(8)))

    t8 = med(par)
    print(f"[{label}] pyarrow {name:28s} 1 file {t * 1e3:7.1f} ms, 8 files / 8 threads {t8 * 1e3:7.1f} ms "
          f"({t8 / 8 * 1e3:.1f} ms a file), size {size / 1e6:.1f} MB")
