"""Format 1 of the BM25 index (one global vocabulary, weighted term-major postings, a documents table): its
postings and documents read and checked for :class:`cutext.stages.engines.bm25_index.BM25Index`.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from cutext.stages.runtime import artifacts as art


def read_postings(folder, N: int, V: int, df: np.ndarray, wmax: np.ndarray | None = None):
    """The postings of an index, read file by file and row group by row group into preallocated arrays.

    Bounded memory: the result is one copy of each column in its final dtype, filled
    from one row group at a time (about 1 M rows), so loading never holds the Arrow table and the
    arrays together; ``tf`` is not read.

    Parameters
    ----------
    folder : pathlib.Path
        ``<index>/postings``.
    N, V : int
        Documents and vocabulary size from the manifest and the vocabulary.
    df : int64 array, shape (V + 1,)
        The vocabulary's df (its sum is the number of postings).
    wmax : float array, shape (V + 1,), optional
        The largest weight each term can have (:func:`weight_bounds`); weights must lie in
        ``[0, wmax[term_id]]``.

    Returns
    -------
    (term_id, doc_id, weight, counts) : int32 array, int32 (int64 when N >= 2**31) array, float32
        array, shape (n_postings,), in file order; int64 array (V + 1,), postings per term id.

    Raises
    ------
    ArtifactNotFoundError
        No postings folder.
    ArtifactError
        Unreadable Parquet, a missing or ill-typed column, nulls, term ids outside [1, V], doc ids
        outside [0, N), weights that are not finite, or a row count other than ``df.sum()``;
        the message names the file.
    """
    import pyarrow.parquet as pq


    cols = {"term_id": "int", "doc_id": "int", "weight": "float"}
    if not folder.exists():
        raise art.ArtifactNotFoundError(f"{folder}: missing postings")
    files = sorted(folder.glob("*.parquet")) if folder.is_dir() else [folder]
    try:
        pfs = [pq.ParquetFile(f) for f in files]
    except (OSError, pa.ArrowException) as exc:
        raise art.ArtifactError(f"{folder}: unreadable postings ({exc})") from None
    for f, pf in zip(files, pfs):
        schema = pf.schema_arrow
        for name, kind in cols.items():
            if name not in schema.names:
                raise art.ArtifactError(f"{f}: postings has no column {name!r} (columns: {schema.names})")
            if not art._TYPES[kind](schema.field(name).type):
                raise art.ArtifactError(f"{f}: column {name!r} of postings must be {kind}, "
                                        f"got {schema.field(name).type}")
    n = sum(pf.metadata.num_rows for pf in pfs)
    if n != int(df.sum()):
        raise art.ArtifactError(f"{folder}: postings do not match the vocabulary's df "
                                f"({n} postings, df sums to {int(df.sum())})")
    t = np.empty(n, np.int32)
    d = np.empty(n, np.int32 if N < 2**31 else np.int64)
    w = np.empty(n, np.float32)
    counts = np.zeros(V + 1, np.int64)
    pos = 0
    for f, pf in zip(files, pfs):
        for g in range(pf.num_row_groups):
            try:
                tb = pf.read_row_group(g, columns=list(cols))
            except (OSError, pa.ArrowException) as exc:
                raise art.ArtifactError(f"{f}: unreadable postings ({exc})") from None
            k = tb.num_rows
            if pos + k > n or any(c.null_count for c in tb.columns):
                raise art.ArtifactError(f"{f}: postings row group {g} has nulls or more rows than its footer")
            tt, dd, ww = (tb.column(c).to_numpy() for c in cols)
            del tb
            art.check_range(tt, 1, V, "posting term ids", f)
            art.check_range(dd, 0, N - 1, "posting doc ids", f)
            art.check_finite(ww, "posting weights", f)
            if wmax is not None and k and ((ww < 0).any() or (ww > wmax[tt]).any()):
                i = int(np.flatnonzero((ww < 0) | (ww > wmax[tt]))[0])
                raise art.ArtifactError(f"{f}: posting weight {float(ww[i])!r} of term id {int(tt[i])} is outside "
                                        f"[0, {float(wmax[tt[i]])!r}], the range its idf, k1 and delta allow")
            t[pos:pos + k], d[pos:pos + k], w[pos:pos + k] = tt, dd, ww
            counts += np.bincount(t[pos:pos + k], minlength=V + 1)
            pos += k
            del tt, dd, ww
    if pos != n:
        raise art.ArtifactError(f"{folder}: postings hold {pos} rows, their footers {n}")
    pa.default_memory_pool().release_unused()  # the row groups' buffers, kept by the allocator
    return t, d, w, counts


def _term_major_order(t, d, block: int = 1 << 22) -> bool:
    """Whether (t, d) pairs are strictly increasing (term-major, then doc), checked in blocks so
    that the temporaries stay small (index load)."""
    n = len(t)
    for a in range(0, max(n - 1, 0), block):
        e = min(a + block + 1, n)
        tt, dd = t[a:e], d[a:e]
        dt = tt[1:] > tt[:-1]
        if not bool(np.all(dt | ((tt[1:] == tt[:-1]) & (dd[1:] > dd[:-1])))):
            return False
    return True



def weight_bounds(idf_t: np.ndarray, k1: float, delta: float) -> np.ndarray:
    """The largest weight a posting of each term can have, float64 (V + 1,): ``idf * (k1 + 1 + delta)``
    bounds every variant's weight (the tf factor of each variant is below ``k1 + 1 + delta``,
    :mod:`cutext.stages.text.bm25`), widened by float32 rounding."""
    return np.abs(idf_t) * (k1 + 1.0 + delta) * (1 + 1e-5) + 1e-6


def _read_postings(path, N: int, V: int, df, w0, lo: int = 0, hi: int | None = None, wmax=None):
    """The postings of documents ``[lo, hi)`` as a scipy CSR (V + 1, hi - lo) float32 of ``w - w0``
    (columns = doc id - lo), validated (see :meth:`BM25Index.load`; :func:`read_postings` reads them
    row group by row group into one copy of each column)."""
    import scipy.sparse as sp


    hi = N if hi is None else hi
    t, d, w, counts = read_postings(path / "postings", N, V, df, wmax)
    if lo == 0 and hi == N:
        if not np.array_equal(counts, df):
            raise art.ArtifactError(f"{path / 'postings'}: postings do not match the vocabulary's df")
    else:  # a shard: keep the rows of its document range
        keep = (d >= lo) & (d < hi)
        t, d, w = t[keep], d[keep] - lo, w[keep]
        del keep
        counts = np.bincount(t, minlength=V + 1) if len(t) else np.zeros(V + 1, np.int64)
    if not _term_major_order(t, d):  # not term-major on disk: sort (older or foreign writers)
        o = np.lexsort((d, t))
        t, d, w = t[o], d[o], w[o]
        del o
    if hi - lo < 2**31 and d.dtype != np.int32:
        d = d.astype(np.int32)
    if np.any(w0):  # store w - w0 (in place, in blocks); search adds the w0 of every query term back
        for a in range(0, len(w), 1 << 22):
            w[a:a + (1 << 22)] -= w0[t[a:a + (1 << 22)]]
    del t
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return sp.csr_matrix((w, d, indptr), shape=(V + 1, hi - lo), copy=False)


def _read_documents(folder: Path, N: int) -> pd.DataFrame:
    """The documents table (``doc_id``, ``source_id``, ``length``) in doc id order, checked: each file holds
    ascending consecutive doc ids (as the build writes them) and together they are 0..N-1."""

    files = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
    if not folder.exists():
        raise art.ArtifactNotFoundError(f"{folder}: missing documents table")
    parts = []
    for f in files:
        t = art.read_table(f, {"doc_id": "int", "source_id": "any", "length": "int"}, "documents table")
        ids = t.column("doc_id").to_numpy()
        if len(ids) and not np.array_equal(ids, np.arange(ids[0], ids[0] + len(ids))):
            raise art.ArtifactError(f"{f}: doc ids are not ascending and consecutive (reordered rows)")
        parts.append((int(ids[0]) if len(ids) else -1, t))
    parts = [t for _, t in sorted(parts, key=lambda x: x[0])]
    docs = (pa.concat_tables(parts).to_pandas() if parts else
            pd.DataFrame({"doc_id": np.zeros(0, np.int64), "source_id": [], "length": np.zeros(0, np.int64)}))
    if len(docs) != N or not np.array_equal(docs["doc_id"].to_numpy(), np.arange(N)):
        raise art.ArtifactError(f"{folder}: documents table does not hold doc ids 0..{N - 1}")
    return docs
