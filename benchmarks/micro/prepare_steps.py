# Ad hoc micro-benchmark of the GPU text path (issue 10), run once on the lent H200 from the repository root
# after `source benchmarks/gpu_env.sh`, data in .devdata/; output in results/textpath-micro-gpu-h200-2026-11-23.log.
import tarfile
import cupy as cp, numpy as np, rmm
rmm.mr.set_current_device_resource(rmm.mr.CudaAsyncMemoryResource())
import cudf  # noqa: F401  (after the resource is set: cudf routes cupy through RMM)
from cutext.kernels import tokenize as K
from cutext.stages.gputext import strings_series
from _common import med as _med
from cutext.stages.tokenize import cudf_string_buffers, _nfc_gpu, _lower_gpu

docs = []
with tarfile.open(".devdata/corpora/20news-bydate.tar.gz") as t:
    for m in t:
        if m.isfile():
            docs.append(t.extractfile(m).read().decode("utf-8", "replace").replace("\n", " ").encode())
rows = (docs * 4)[:40000]
off = np.zeros(len(rows) + 1, np.int64); off[1:] = np.cumsum([len(r) for r in rows])
text = strings_series(cp.asarray(np.frombuffer(b"".join(rows), np.uint8)), cp.asarray(off))
print(f"partition: {len(rows)} rows, {off[-1]/2**20:.1f} MiB; rows with a byte >= 0x80: "
      f"{sum(any(b >= 128 for b in r) for r in rows)}")

def med(fn):
    return _med(fn, r=7, warmup=True) * 1e3

s = text.fillna("").reset_index(drop=True)
col, chars, offsets = cudf_string_buffers(s)
tab = K.nfc_unstable_table()
flags = cp.zeros(len(offsets) - 1, cp.uint8)
for name, fn in [
    ("fillna + reset_index", lambda: text.fillna("").reset_index(drop=True)),
    ("cudf_string_buffers", lambda: cudf_string_buffers(s)),
    ("_check (offsets D2H)", lambda: K._check(chars, offsets)),
    ("_device_table", lambda: K._device_table(tab)),
    ("kernel tk_rows_containing", lambda: K._launch("tk_rows_containing", chars, offsets, tab, flags, len(chars))),
    ("rows_containing", lambda: K.rows_containing(chars, offsets, tab)),
    ("_nfc_gpu", lambda: _nfc_gpu(s)),
    ("span >= 0x80 + flatnonzero", lambda: cp.flatnonzero(chars >= 0x80)),
    ("_lower_gpu", lambda: _lower_gpu(s)),
    ("cudf str.lower + replace", lambda: s.str.lower().str.replace("\u03c2", "\u03c3", regex=False)),
    ("blank_separators", lambda: K.blank_separators(chars, offsets)),
]:
    print(f"  {name:30s} {med(fn):8.2f} ms")
