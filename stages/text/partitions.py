"""Per-partition tasks of the corpus front end (:mod:`cutext.stages.text.frontend`) and of the public
stages (:mod:`cutext.stages.text.public`): tokenize a partition to a compact summary, its unique
terms, and its counts with global term ids, in memory or spilled to files.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from cutext.kernels.backend import array_module, is_gpu, to_host, values
from cutext.stages.readers.device import cudf_strings
from cutext.stages.runtime.compute import StepClock, nbytes_of
from cutext.stages.runtime.npy import read_npy
from cutext.stages.text.count import run_lengths
from cutext.stages.text.device import scan_partition
from cutext.stages.text.encode import lookup_ids
from cutext.stages.text.sort import pair_keys, sort_pairs
from cutext.stages.text.tokenize import tokenize_partition, tokenize_partition_codes

# ----------------------------------------------------------------------------- partition tasks
# Bounded memory: no stage persists the text or a row per token.  The read stage keeps
# the document table without its text; the tokenize stage re-reads each piece and keeps only a
# compact per-partition result (:class:`_Scan`: the partition's unique tokens and its distinct
# (local code, document) pairs with their tf, 12 bytes a pair); the count stage turns those into
# the ``counts`` table with global term ids.

def _doc_table(df):
    """A read partition without its text: ``(source_id, replaced)``."""
    return df[["source_id", "replaced"]].copy()


@dataclass
class _Scan:
    """The tokenize stage's result for one partition (arrays of the partition's library).

    uniq : Series of str, shape (U,)
        The partition's distinct tokens (local code ``i`` is ``uniq[i]``).
    code, pos, tf : int32 arrays, shape (P,)
        One entry per distinct (token, document) pair of the partition, sorted by (code, pos):
        the local code, the document's position in the partition, the count.
    lengths : int64 array, shape (n_docs_of_partition,)
        Tokens per document.
    """

    uniq: object
    code: object
    pos: object
    tf: object
    lengths: object

    def __sizeof__(self) -> int:  # what a distributed scheduler weighs before moving it (nbytes_of)
        return object.__sizeof__(self) + nbytes_of(self.uniq, self.code, self.pos, self.tf, self.lengths)


# the task keys name their stage (tokenize_/encode_/count_partition...): progress, task streams
# and tests/faults/test_workers.py find the stages by them
def tokenize_partition_scan(df, cfg):
    """Tokenize one read partition and count its (token, document) pairs locally (a :class:`_Scan`).

    cudf partitions take the device text path (:func:`cutext.stages.text.device.scan_partition`:
    token byte offsets and hashes, no token strings); the string path below is the CPU path and
    the device path's exact fallback (a hash collision)."""
    if is_gpu(df):
        got = scan_partition(df["text"], cfg)
        if got is not None:
            return _Scan(*got)
    xp = array_module(df)
    n = len(df)
    frame = df[["text"]].copy()
    frame.insert(0, "doc_id", xp.arange(n, dtype=np.int64))  # doc_id = position within the partition
    gpu = is_gpu(df)
    del df
    if not gpu:  # the term map's codes as they are: the tokens' strings are never gathered nor factorized again
        pos, codes, uniq = tokenize_partition_codes(frame, cfg)
        del frame
        if len(pos) == 0:
            z = np.zeros(0, np.int32)
            return _Scan(pd.Series(uniq[:0], dtype=uniq.dtype), z, z, z, np.zeros(n, np.int64))
        lengths = np.bincount(pos, minlength=n).astype(np.int64)
    else:
        toks = tokenize_partition(frame, cfg)
        del frame
        pos = values(toks["doc_id"])
        lengths = xp.bincount(pos, minlength=n).astype(np.int64) if len(pos) else xp.zeros(n, np.int64)
        if len(toks) == 0:
            z = xp.zeros(0, np.int32)
            return _Scan(toks["token"].iloc[:0], z, z, z, lengths)
        codes, uniq = toks["token"].factorize()
        del toks
    codes = xp.asarray(codes).astype(np.int32)
    keys, doc_min, span = sort_pairs(codes, pos)
    del codes, pos
    ukeys, tf = run_lengths(keys)
    del keys
    return _Scan(uniq, (ukeys // span).astype(np.int32), (ukeys % span + doc_min).astype(np.int32),
                 tf.astype(np.int32), lengths)


def count_partition_scan(scan: _Scan, vocab_frame, offset: int, like):
    """``(term_id, doc_id, tf, dl)`` of one partition from its scan: what
    :func:`cutext.stages.text.count.count_partition` gives for the partition's encoded tokens."""
    lib = type(like)
    xp = array_module(scan.lengths)
    if len(scan.code) == 0:
        return lib({"term_id": xp.zeros(0, np.int32), "doc_id": xp.zeros(0, np.int64),
                    "tf": xp.zeros(0, np.int32), "dl": xp.zeros(0, np.int32)})
    clock = StepClock(xp)
    lut = lookup_ids(scan.uniq, vocab_frame)
    term = lut[scan.code]
    clock("count: term ids")
    keys, _, span = pair_keys(term, scan.pos)
    order = xp.argsort(keys, kind="stable")
    del keys
    clock("count: pair sort")
    pos = scan.pos[order]
    out = lib({"term_id": term[order], "doc_id": pos.astype(np.int64) + offset, "tf": scan.tf[order],
               "dl": scan.lengths[pos].astype(np.int32)})
    clock("count: gather")
    return out


# ----------------------------------------------------------------------------- spilled partitions
# With ``spill=`` (a directory every worker can reach), the per-partition results are files, not
# persisted collections: host memory then holds the partitions in flight, never the corpus
# (and on the GPU, device memory holds the partitions in flight: each is copied to the host when
# written and back when read)
# (<= 3x the input plus a constant).  Each file is written under a temporary name and
# renamed, so a retried task (a killed worker) rewrites it whole.

SPILL_SCAN, SPILL_COUNTS = "scan", "counts"
COUNT_COLUMNS = ("term_id", "doc_id", "tf", "dl")


def spill_dir(spill, stage: str, i: int):
    """Folder of partition ``i``'s spilled ``stage`` (``"scan"`` or ``"counts"``) result."""
    from pathlib import Path

    return Path(spill) / f"{stage}-{i:05d}"


def _save_arrays(folder, arrays: dict) -> None:
    import os

    folder.mkdir(parents=True, exist_ok=True)
    for name, a in arrays.items():
        tmp = folder / f".{name}.{os.getpid()}.npy"
        np.save(tmp, np.ascontiguousarray(to_host(a)), allow_pickle=False)
        os.replace(tmp, folder / f"{name}.npy")


def load_spilled(folder, names, mmap: bool = False) -> dict:
    """Arrays ``names`` of a spilled partition (``mmap``: memory-mapped, read only where sliced)."""
    return {n: read_npy(folder / f"{n}.npy", mmap=mmap) for n in names}


def _spilled_uniques(folder, like=None):
    """The spilled scan's unique tokens: a pandas Series, or a cudf one when ``like`` is a cudf object."""
    import pandas as pd

    with pa.memory_map(str(folder / "uniq.arrow")) as mm:
        arr = pa.ipc.open_file(mm).read_all().column("token").combine_chunks()
    if like is not None and is_gpu(like):
        return cudf_strings(arr)
    return pd.Series(arr, dtype=pd.StringDtype("pyarrow"))


def _to_like(arrays: dict, like) -> dict:
    """Host arrays as arrays of ``like``'s library (copied to the device for a cudf ``like``)."""
    if not is_gpu(like):
        return arrays
    import cupy

    return {k: cupy.asarray(a) for k, a in arrays.items()}


def load_counts_partition(folder, like):
    """A spilled counts partition as a ``(term_id, doc_id, tf, dl)`` frame (of ``like``'s library)."""
    return type(like)(_to_like(load_spilled(folder, COUNT_COLUMNS), like))
