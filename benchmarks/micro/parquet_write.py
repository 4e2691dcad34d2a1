# Ad hoc micro-benchmark of the GPU text path (issue 10), run once on the lent H200 from the repository root
# after `source benchmarks/gpu_env.sh`, data in .devdata/; output in results/textpath-micro-gpu-h200-2026-11-23.log.
import io, os, shutil
import cupy as cp, cudf, numpy as np
from _common import med, postings_frame

df = postings_frame(1)
rng = cp.random.default_rng(1)
os.makedirs("/tmp/pq", exist_ok=True)
rows = []
for name, kw in [("default (snappy)", {}), ("compression=None", {"compression": None}),
                 ("use_dictionary=False", {"use_dictionary": False}),
                 ("statistics=NONE", {"statistics": "NONE"}),
                 ("no dict, no stats", {"use_dictionary": False, "statistics": "NONE"}),
                 ("zstd", {"compression": "ZSTD"})]:
    try:
        t_disk = med(lambda: df.to_parquet("/tmp/pq/x.parquet", index=False, **kw))
        size = os.path.getsize("/tmp/pq/x.parquet")
        t_mem = med(lambda: df.to_parquet(io.BytesIO(), index=False, **kw))
        rows.append((name, t_disk, t_mem, size))
    except Exception as e:
        rows.append((name, float("nan"), float("nan"), repr(e)[:80]))
print("8 M postings (160 MB raw): parquet write variants, median of 3")
for r in rows:
    print(f"  {r[0]:24s} disk {r[1]*1e3:8.1f} ms  BytesIO {r[2]*1e3:8.1f} ms  size {r[3]}")
# host copy alone, and the pandas->arrow write of the same table
t = med(lambda: df.to_arrow())
print(f"  to_arrow (device->host) {t*1e3:.1f} ms")
import pyarrow.parquet as pq
tab = df.to_arrow()
print(f"  pyarrow write (host, snappy) {med(lambda: pq.write_table(tab, '/tmp/pq/y.parquet'))*1e3:.1f} ms")
# documents: 1.05 M rows in 31 files vs 1
nd = 1_050_000
docs = cudf.DataFrame({"doc_id": cp.arange(nd, dtype=cp.int64),
                       "source_id": cudf.Series([f"data-{i % 8}.txt:{i}" for i in range(nd)]),
                       "length": rng.integers(0, 900, nd, dtype=cp.int32), "replaced": cp.zeros(nd, cp.int32)})
parts = [docs.iloc[i * nd // 31:(i + 1) * nd // 31] for i in range(31)]
def many():
    shutil.rmtree("/tmp/pq/d", ignore_errors=True); os.makedirs("/tmp/pq/d")
    for i, p in enumerate(parts):
        p.to_parquet(f"/tmp/pq/d/part.{i:05d}.parquet", index=False)
def one():
    shutil.rmtree("/tmp/pq/d", ignore_errors=True); os.makedirs("/tmp/pq/d")
    docs.to_parquet("/tmp/pq/d/part.00000.parquet", index=False)
print(f"documents 1.05 M rows: 31 files {med(many)*1e3:.1f} ms, 1 file {med(one)*1e3:.1f} ms")
s = cudf.Series(["Hello World ABC " * 16] * 1_000_000)
print(f"cudf str.lower 256 MB: {med(lambda: s.str.lower())*1e3:.1f} ms")
c = cp.frombuffer(b"Hello World ABC " * 16_000_000, dtype=cp.uint8) if False else cp.asarray(np.frombuffer(b"Hello World ABC " * 16_000_000, dtype=np.uint8))
low = cp.ElementwiseKernel("uint8 c", "uint8 o", "o = (unsigned char)(c - 65) < 26 ? c + 32 : c", "asc_low")
print(f"ascii lower kernel 256 MB: {med(lambda: low(c))*1e3:.1f} ms")
os.system("dd if=/dev/zero of=/tmp/pq/dd bs=1M count=3000 conv=fdatasync 2>&1 | tail -1; df -h /tmp | tail -1")
