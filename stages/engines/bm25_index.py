"""A BM25 index on disk, loaded for search: the vocabulary, the documents table and the postings as a
CSR matrix on the host or the device (or one shard per worker of a Client), scored by the query
engines of :mod:`cutext.stages.engines.search`.  Built by the ``bm25`` pipeline
(:func:`cutext.pipelines.bm25.build_index`).

:class:`BM25Index` is the one public face of the index wing: a segmented commit is read by
:mod:`~cutext.stages.engines.index_reader`, weighed by :mod:`~cutext.stages.engines.bm25_weights`, its stored
fields and filters are :mod:`~cutext.stages.engines.bm25_stored`, shards :mod:`~cutext.stages.engines.bm25_shards`,
format 1 :mod:`~cutext.stages.engines.bm25_format1`, result frames :mod:`~cutext.stages.engines.bm25_results`,
commits through a loaded index and its refresh :mod:`~cutext.stages.engines.bm25_commits`.
"""
from __future__ import annotations

import math
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from cutext.kernels.backend import ARRAY_STACK, resolve_backend
from cutext.kernels.termhash import TermHash, query_csr, text_csr
from cutext.stages.engines import index_commits, search_input, segments
from cutext.stages.engines import phrases as phrase_stage
from cutext.stages.engines import search as search_stage
from cutext.stages.engines.bm25_commits import IndexCommits
from cutext.stages.engines.bm25_format1 import _read_documents, _read_postings, read_postings, weight_bounds
from cutext.stages.engines.bm25_results import _batch_rows, _ResultColumns, _str_series, _take_str, ties_by_source_id
from cutext.stages.engines.bm25_shards import (  # noqa: F401  # the shards' helpers stay reachable here
    _Devices,
    _load_segment_shard,
    _load_shard,
    _on_device,
    _query_batch,
    _shard_dense,
    _shard_finish,
    _shard_info,
    _shard_topk_start,
    _ShardEngine,
    _slots,
    _to_backend,
    shard_ranges,
)
from cutext.stages.engines.bm25_stored import StoredFields
from cutext.stages.engines.bm25_weights import _segment_matrix, _weight_fn, _weighted_matrix
from cutext.stages.engines.index_manifest import bm25f_spec, read_index_manifest
from cutext.stages.engines.index_reader import IndexReader
from cutext.stages.engines.segment_search import SegmentSearch
from cutext.stages.runtime import artifacts as art
from cutext.stages.runtime.compute import StepClock, WorkerActors
from cutext.stages.runtime.params import choice, count, param
from cutext.stages.runtime.progress import notice_compiles, notice_gpu_compiles
from cutext.stages.text import bm25 as bm25_stage
from cutext.stages.text.tokenize import (
    TextEncodingError,
    TokenizerConfig,
    normalize_texts,
    text_array,
    tokenize_flat,
)

# ----------------------------------------------------------------------------- retrieval

# queries a numba thread of the query CSR takes at least (text_csr's chunk): a batch of 8192 on a 64-core
# host took 0.134 us a query on 32 threads and 0.236 on all 64 (benchmarks/micro/query_csr.py)
QUERIES_PER_THREAD = 256
RESULT_ROWS_FIRST = 1 << 24  # rows a search's result columns hold before they first grow
# a segmented index on the CPU searches segment by segment until its queries would score more than this many
# times its postings, then merges its matrix (MERGE_AFTER = 0: at the load; None: never)
MERGE_AFTER = 1.0
_MERGE_LOCK = threading.Lock()


def _settings(meta: dict, mf: Path) -> tuple:
    """``(N, avgdl, variant, k1, delta)`` of an index manifest, its tokenizer and norms checked too.

    Raises
    ------
    ArtifactError
        A field out of range or of the wrong type (the file named).
    """
    N = art.field_int(meta, "N", mf, lo=0)
    avgdl = art.field_float(meta, "avgdl", mf, lo=0)
    try:
        TokenizerConfig.from_dict(art.field_dict(meta, "tokenizer", mf))
        variant = meta.get("variant", "lucene")
        delta = bm25_stage.check_params(variant, meta.get("k1", 0.9), meta.get("b", 0.4), meta.get("delta"))
        k1 = float(meta.get("k1", 0.9))
        if bm25_stage.check_norms(meta.get("norms", "exact"), variant) != "exact" and meta.get("index_format") != 2:
            raise ValueError("norms='lucene' is kept by segmented indexes (index_format 2) only")
    except (TypeError, ValueError, KeyError) as exc:
        raise art.ArtifactError(f"{mf}: {exc}") from None
    return N, avgdl, variant, k1, delta


class BM25Index(StoredFields, IndexCommits):
    """A BM25 index loaded for search.

    The postings form a term-major CSR matrix ``M`` of shape (V + 1, N), float32 (stored weights
    ``w - w0``); a batch of queries is a CSR ``Q`` (n_queries, V + 1) of query term counts; the
    scores are the rows of ``Q @ M`` plus, for bm25l/bm25+, the weight ``w0`` of the query terms a
    document lacks.  The top k of each query come from one of the engines of
    :mod:`cutext.stages.engines.search` (CPU: numba threads; GPU: the tiled CUDA engine; or the sparse
    product itself), all with one ties rule: equal scores are ranked by the smaller ``doc_id``.

    Loaded with a dask ``client``, the documents are split into ranges (shards) over the client's
    workers; each worker keeps its shard (on its GPU or CPU) in a long-lived engine (a dask actor:
    a batch is one call to each worker, no task graph), every query batch is tokenized once here,
    scored on every shard and the top k merged on the caller, the same result as one index.  With
    ``devices``, the shards live on GPUs of this process and each batch runs on all of them at once.

    A segmented index of one field and exact norms on the CPU is searched segment by segment first, the
    weights of the global statistics computed at query time
    (:class:`cutext.stages.engines.segment_search.SegmentSearch`: the same bits as ``M``), so an open or a
    refresh merges and weighs nothing; ``M`` is merged at its first use (:attr:`matrix`).

    Attributes
    ----------
    path : pathlib.Path
    meta : dict        (index.json)
    vocab : pyarrow.LargeStringArray, shape (V,), sorted
    df, idf, w0 : numpy arrays, shape (V + 1,), index = term id
    source_ids : numpy object array, shape (N,)
    lengths : numpy int32 array, shape (N,)
    backend : str      ("cpu" / "gpu"; with a client, that of the shards, comma-joined if they differ)
    matrix : scipy / cupyx CSR, or None for a sharded index (merged at the first use: :attr:`matrix`)
    shards : list of (lo, hi, worker address or "gpu:<device>"), empty unless loaded with a client or devices
    store_text : bool  (the documents' texts are kept: :meth:`doc`, :meth:`docs`, ``search(with_text=True)``)
    keep_columns : list of str  (the input's columns kept for filters: :meth:`column_table`, ``search(filter=)``)
    positions : bool  (term positions are stored: phrase and proximity queries, ``search('"a b"~2')``)
    """

    def __init__(self, path, meta, vocab, df, idf, w0, source_ids, lengths, matrix, backend,
                 client=None, shards=None):
        self.path, self.meta, self.vocab = Path(path), meta, vocab
        self.df, self.idf, self.w0 = df, idf, w0
        # a pyarrow array stays one until a caller asks for the numpy objects: an open builds no Python string
        self._ids_np, self._source_ids_pa = (None, source_ids) if isinstance(source_ids, pa.Array) else (source_ids,
                                                                                                          None)
        self.lengths = lengths
        self._matrix, self.backend = matrix, backend
        self.tokenizer = TokenizerConfig.from_dict(meta["tokenizer"])
        self._has_w0 = bool(np.any(w0 != 0))
        self._sm_obj = search_stage.SearchMatrix(matrix) if matrix is not None else None
        self._seg = None  # segment_search.SegmentSearch of a segmented index on the CPU: its engine's first form
        self._merge = None  # the function of no arguments that merges its matrix, until it has run
        self._term_hash = None  # kernels.termhash.TermHash of the vocabulary, built at the first query
        self._client = client
        self._engines = None  # WorkerActors: the engines (_ShardEngine) of a client's shards, one per worker
        self._shard_futures = list(shards or [])  # (lo, hi, worker, future)
        self.shards = [(lo, hi, w) for lo, hi, w, _ in self._shard_futures]
        self._text_segments = None  # (folders, deletes, doc_base) of a segmented index, for its texts
        self._texts_cache: dict = {}  # segment number -> its live texts, read at the first use
        self._id_index = None  # pandas Index of the source ids (first of equal ids), built at the first doc()
        self._columns = None  # pyarrow Table of the kept columns, read at the first filter by them
        self._phrase_index = None  # phrases.PhraseIndex (postings with positions), read at the first phrase query
        self._reader = None  # index_reader.IndexReader of a segmented index loaded in this process: refresh()

    @property
    def matrix(self):
        """The term-major CSR (V + 1, N) float32 of stored weights ``w - w0`` (scipy or cupyx), or None for a
        sharded index.  A segmented index on the CPU searches segment by segment
        (:class:`cutext.stages.engines.segment_search.SegmentSearch`) and merges this matrix at its first use (the
        sparse engine, :meth:`get_scores`) or before a batch that would take the postings its queries scored past
        :data:`MERGE_AFTER` times its own."""
        if self._matrix is None and self._merge is not None:
            self._merged()
        return self._matrix

    @property
    def _sm(self):
        """The :class:`cutext.stages.engines.search.SearchMatrix` of :attr:`matrix` (merged at the first use)."""
        if self._sm_obj is None and self._merge is not None:
            self._merged()
        return self._sm_obj

    def _merged(self) -> None:
        with _MERGE_LOCK:  # two threads' first searches merge once
            if self._merge is not None:
                M = self._merge()
                self._matrix, self._sm_obj, self._merge = M, search_stage.SearchMatrix(M), None
                if self._seg is not None:  # the matrix holds every weight the per-segment search kept
                    self._seg.drop_weights()

    @property
    def _local(self) -> bool:
        """Whether the index is searched in this process (not sharded over workers or devices)."""
        return self._sm_obj is not None or self._merge is not None

    @property
    def _on_gpu(self) -> bool:
        return self._sm_obj is not None and self._sm_obj.on_gpu

    @property
    def store_text(self) -> bool:
        """Whether the index keeps its documents' texts (built with ``store_text=True``)."""
        return self._text_segments is not None and self.meta.get("store_text") is True

    @property
    def n_docs(self) -> int:
        return int(self.meta["N"])

    @property
    def positions(self) -> bool:
        """Whether the index stores term positions (built with ``positions=True``): phrase queries."""
        return self._text_segments is not None and self.meta.get("positions") is True

    @property
    def keep_columns(self) -> list:
        """The input's columns kept in the index (``keep_columns=`` of the build), for filters; [] if none."""
        return list(self.meta.get("keep_columns") or []) if self._text_segments is not None else []

    def __repr__(self) -> str:
        m = self.meta
        delta = f", delta={m['delta']}" if m.get("variant") in ("bm25l", "bm25+") else ""
        delta += f", norms={m['norms']!r}" if m.get("norms", "exact") != "exact" else ""
        postings = self._matrix.nnz if self._matrix is not None else int(self.df.sum())
        shards = f", shards={len(self.shards)}" if self.shards else ""
        texts = ", texts=True" if self.store_text else ""
        texts += f", keep_columns={self.keep_columns}" if self.keep_columns else ""
        texts += ", positions=True" if self.positions else ""
        f = m.get("bm25f") if isinstance(m.get("bm25f"), dict) else None
        # BM25F: the fields' weights and b's stand for the one b
        b = (f"fields={dict(zip(f['fields'], f['weights']))}, field_b={dict(zip(f['fields'], f['b']))}"
             if f is not None else f"b={m.get('b')}")
        return (f"BM25Index(N={self.n_docs:,}, V={len(self.vocab):,}, postings={postings:,}, "
                f"variant={m.get('variant')!r}, k1={m.get('k1')}, {b}{delta}, "
                f"backend={self.backend!r}{shards}{texts}, path={str(self.path)!r})")

    @classmethod
    def load(cls, path, backend="auto", client=None, verify: bool = True, devices=None) -> "BM25Index":
        """Load an index directory written by :func:`build_index`.

        Parameters
        ----------
        path : str or os.PathLike
        backend : {"auto", "cpu", "gpu"}
            Where the matrix lives and queries are scored.  ``"auto"`` (the default of every loader)
            = the GPU when cupy is installed and a device is visible, else the CPU; the index files
            are the same for both.  With a ``client``, each worker resolves it for itself.
        client : distributed.Client, optional
            Shard the index over the client's workers: documents ``0..N-1`` are cut into one contiguous
            range per worker (about equal token counts, :func:`shard_ranges`); each worker reads and
            keeps its range's postings (the path must be readable by the workers).  Search results are
            the same as without a client.
        verify : bool, default True
            Check the CRC32 of every file against index.json before reading (one extra read of the
            index; :func:`cutext.stages.runtime.artifacts.read_manifest`, ``benchmarks/checksums.py`` for its
            cost).  False skips it; the value checks below still run.
        devices : list of int, optional
            Shard the index over these GPUs of this process (the GPU backend): one contiguous range of
            documents per entry, as with a client (a segmented index is cut on segment boundaries), read
            on a thread each; every query batch runs on all of them at once and the top k are merged
            here.  Search results are the same as one device's.  A device may be named twice (two shards
            on it).

        Raises
        ------
        ArtifactNotFoundError (ArtifactError, FileNotFoundError)
            Not an index directory (no index.json), or a missing table.
        ArtifactError (ValueError)
            A corrupt index, naming the directory and file: a file whose checksum or size does not
            match index.json or that it does not list (with ``verify``), invalid JSON, another kind, a
            missing or ill-typed field or column, BM25 parameters out of range, a vocabulary that is
            not strictly sorted (shuffled or duplicated terms), df outside [1, N], idf or w0 that do
            not follow from df, N and the variant, document ids that are not 0..N-1 ascending in
            every file, doc ids outside [0, N), term ids outside [1, V], weights that are not finite
            or outside [0, idf * (k1 + 1 + delta)], postings that disagree with the vocabulary's df.
        ValueError
            A client without workers; ``devices`` that are not visible device numbers, with a client or
            on the CPU backend.
        """
        if devices is not None:
            if client is not None:
                raise ValueError(f"BM25Index.load: {param('devices')} shards over this process's GPUs; with "
                                 f"{param('client')} each worker holds the shard of its own device (pass one or the "
                                 "other)")
            client = _Devices(devices, resolve_backend(backend, needs=ARRAY_STACK))
        index = cls._open(Path(path), backend, client, verify)
        # a commit made through the index (delete, compact) reloads it alike
        index._load_args = (backend, None if isinstance(client, _Devices) else client, verify, devices)
        return index

    @classmethod
    def _open(cls, path: Path, backend, client, verify: bool) -> "BM25Index":
        meta = read_index_manifest(path, verify=verify)  # every field checked
        mf = path / "index.json"
        N, avgdl, variant, k1, delta = _settings(meta, mf)
        if client is None or isinstance(client, _Devices):
            be = resolve_backend(backend, needs=ARRAY_STACK)
        else:
            be = choice("backend", backend, ("auto", "cpu", "gpu"))
        fmt = meta.get("index_format", 1)
        if fmt == 2:
            return cls._load_segments(path, meta, N, avgdl, variant, k1, delta, be, client)
        if fmt != 1:
            raise art.ArtifactError(f"{mf}: index_format {fmt!r} is not one this cutext reads (1 or 2); "
                                    "rebuild the index with this version (cutext bm25 PATH --out DIR)")
        vt = art.read_table(path / "vocab.parquet", {"term_id": "int", "term": "string", "df": "int",
                                                      "idf": "float", "w0": "float"}, "vocabulary")
        V = vt.num_rows
        if not np.array_equal(vt.column("term_id").to_numpy(), np.arange(1, V + 1)):
            raise art.ArtifactError(f"{path / 'vocab.parquet'}: term ids must be 1..{V} in order")
        vocab = vt.column("term").combine_chunks().cast(pa.large_string())
        vf = path / "vocab.parquet"
        if V > 1 and not pc.all(pc.less(vocab[:-1], vocab[1:])).as_py():  # sorted at build: a shuffle or repeat
            raise art.ArtifactError(f"{vf}: terms are not strictly ascending (shuffled or duplicated terms)")
        docs = _read_documents(path / "documents", N)
        df = np.concatenate([[0], vt.column("df").to_numpy()]).astype(np.int64)
        idf_t = np.concatenate([[0.0], vt.column("idf").to_numpy()])
        w0 = np.concatenate([[0.0], vt.column("w0").to_numpy()]).astype(np.float32)
        art.check_range(df[1:], 1, N, "df", vf)
        art.check_finite(idf_t, "idf", vf)
        art.check_finite(w0, "w0", vf)
        if V and not np.allclose(idf_t[1:], bm25_stage.idf(df[1:], N, variant), rtol=1e-6, atol=1e-9):
            raise art.ArtifactError(f"{vf}: idf does not follow from df, N={N} and variant {variant!r}")
        if V and not np.allclose(w0[1:], bm25_stage.absent_weight(idf_t[1:], variant, k1, delta), rtol=1e-5,
                                 atol=1e-6):
            raise art.ArtifactError(f"{vf}: w0 does not follow from idf, k1 and delta of index.json")
        lengths = docs["length"].to_numpy()
        art.check_range(lengths, 0, np.iinfo(np.int64).max, "lengths", path / "documents")
        if N and not math.isclose(float(lengths.sum()) / N, avgdl, rel_tol=1e-6, abs_tol=1e-9):
            raise art.ArtifactError(f"{mf}: avgdl={avgdl} is not the mean length of the documents table "
                                    f"({float(lengths.sum()) / N})")
        source_ids = docs["source_id"].to_numpy(dtype=object)
        wmax = weight_bounds(idf_t, k1, delta)
        if client is None:
            M = _to_backend(_read_postings(path, N, V, df, w0, wmax=wmax), be)
            return cls(path, meta, vocab, df, idf_t, w0, source_ids, lengths, M, be)
        slots = _slots(client)
        jobs = [(slot, lo, hi, (_load_shard, str(path.absolute()), lo, hi, be, N, V, df, w0, wmax))
                for (lo, hi), slot in zip(shard_ranges(lengths, len(slots)), slots)]
        return cls._placed(client, jobs, path, meta, vocab, df, idf_t, w0, source_ids, lengths)

    @classmethod
    def _placed(cls, client, jobs, *fields) -> "BM25Index":
        """The sharded index of ``jobs`` = ``[(slot, lo, hi, (loader, *args)), ...]``: each loader run on its
        slot (a client's worker, or a device of :class:`_Devices`), the shards' engines checked alike."""
        if isinstance(client, _Devices):
            futures = client.place(jobs)
            infos = [_shard_info(f) for _, _, _, f in futures]
        else:
            futures = [(lo, hi, w, client.submit(*job, workers=[w], allow_other_workers=False, pure=False))
                       for w, lo, hi, job in jobs]
            infos = client.gather([client.submit(_shard_info, f, workers=[w], allow_other_workers=False,
                                                 pure=False) for _, _, w, f in futures])
        index = cls(*fields, None, ",".join(sorted({i[2] for i in infos})), client=client, shards=futures)
        index._shard_nonnegative = all(i[3] for i in infos)
        if not isinstance(client, _Devices):  # one engine per worker, holding the shard it loaded
            engines = [client.submit(_ShardEngine, f, workers=[w], allow_other_workers=False, actor=True, pure=False)
                       for _, _, w, f in futures]
            index._engines = WorkerActors(client, engines, [w for _, _, w, _ in futures])
        return index

    @classmethod
    def _load_segments(cls, path: Path, meta: dict, N: int, avgdl: float, variant: str, k1: float, delta: float,
                       be: str, client, reader: IndexReader | None = None, previous=None) -> "BM25Index":
        """:meth:`load` of a segmented index (``index_format`` 2): the commit's segment readers
        (:class:`cutext.stages.engines.index_reader.IndexReader`: ``reader``, or those of ``path``'s commit,
        whose files :meth:`load` verified) merged in their order, weighted from the global N, avgdl and df
        (:mod:`cutext.stages.engines.segments`; on the GPU backend the weights are computed on the device).
        On the CPU, a one-field index of exact norms is searched segment by segment with the weights of the
        global statistics computed at query time (:class:`SegmentSearch`; ``previous``: the
        :class:`SegmentSearch` of an earlier commit, whose unchanged segments it takes over), the merge deferred
        (:attr:`matrix`)."""
        mf = path / "index.json"
        folders, deletes = index_commits.commit_segments(path, meta)
        if client is not None:
            return cls._load_segment_shards(path, meta, folders, deletes, N, avgdl, variant, k1, delta, be, client)
        if reader is None:
            reader = IndexReader.open(path, verify=False, postings=be != "gpu")  # the GPU decodes them itself
            if reader.meta != meta:  # committed since the manifest was read and verified: read the new commit
                return cls._open(path, be, None, True)
        mt, segs = reader.terms, [r.segment for r in reader.segments]
        if mt.n_docs != N:
            raise art.ArtifactError(f"{mf}: N={N}, the segments hold {mt.n_docs} documents")
        if N and not math.isclose(mt.avgdl, avgdl, rel_tol=1e-12, abs_tol=1e-12):
            raise art.ArtifactError(f"{mf}: avgdl={avgdl} is not the segments' mean length ({mt.avgdl})")
        fn = _weight_fn(meta, mf, mt, variant, k1, delta)
        w0 = fn.w0.astype(np.float32)  # as format 1 stores it: the scores of both formats are the same
        seg = None
        if be != "gpu" and isinstance(fn, bm25_stage.WeightPartition) and fn.norms == "exact":  # one pass
            if MERGE_AFTER is None or MERGE_AFTER > 0:
                M, seg = None, SegmentSearch(reader, fn, w0, previous)
            else:
                M = _weighted_matrix(segs, mt, fn, w0)
            lengths = np.concatenate([sg.lengths for sg in segs]).astype(np.int32, copy=False) if segs else \
                np.zeros(0, np.int32)
            ids = pa.concat_arrays([sg.source_ids.cast(pa.string()) for sg in segs]) if segs else \
                pa.array([], pa.string())
        else:
            merged = segments.merge_segments(segs, terms=mt, device=be == "gpu")  # the GPU's postings placed there
            M = _segment_matrix(merged, fn, w0, be)
            lengths, ids = merged.lengths, merged.source_ids
            del merged
        index = cls(path, meta, mt.vocab, mt.df, fn.idf_t, w0, ids.cast(pa.string()), lengths, M, be)
        if seg is not None:
            index._seg = seg
            index._merge = lambda: _weighted_matrix(segs, mt, fn, w0)
        index._text_segments = (folders, deletes, mt.doc_base)
        index._reader = reader
        return index

    @classmethod
    def _load_segment_shards(cls, path: Path, meta: dict, folders: list, deletes: list, N: int, avgdl: float,
                             variant: str, k1: float, delta: float, be: str, client) -> "BM25Index":
        """:meth:`load` of a segmented index with a client (or ``devices``): the global statistics from every
        segment's terms and documents here (O(vocabulary + documents)), then each worker (device) reads a
        consecutive run of segments (about equal postings) and weighs its postings on its own device."""
        mf = path / "index.json"
        slots = _slots(client)
        heads = segments.segment_heads(folders, deletes)
        mt = segments.merge_terms(heads)
        if mt.n_docs != N or (N and not math.isclose(mt.avgdl, avgdl, rel_tol=1e-12, abs_tol=1e-12)):
            raise art.ArtifactError(f"{mf}: N={N}, avgdl={avgdl}; the segments hold {mt.n_docs} documents of "
                                    f"mean length {mt.avgdl}")
        fn = _weight_fn(meta, mf, mt, variant, k1, delta)
        w0 = fn.w0.astype(np.float32)
        lengths = (np.concatenate([h.lengths for h in heads]).astype(np.int32) if heads else np.zeros(0, np.int32))
        source_ids = (pa.concat_arrays([h.source_ids.cast(pa.string()) for h in heads]).to_numpy(zero_copy_only=False)
                      .astype(object) if heads else np.zeros(0, object))
        runs = shard_ranges(np.array([h.n_postings for h in heads], np.int64), len(slots))
        shared = [mt.vocab, mt.df, fn, w0]  # O(V), the same for every worker: sent to each once, not in a graph
        if not isinstance(client, _Devices):
            shared = client.scatter(shared, broadcast=True, hash=False)
        vocab, df, fn_s, w0_s = shared
        jobs = []
        for (a, e), slot in zip(runs, slots):
            run = (mt.n_docs, mt.sum_dl, mt.doc_base[a:e + 1], mt.term_ids[a:e])
            lo, hi = int(mt.doc_base[a]), int(mt.doc_base[e])
            jobs.append((slot, lo, hi, (_load_segment_shard, [str(p.absolute()) for p in folders[a:e]], deletes[a:e],
                                        vocab, df, run, lo, hi, be, fn_s, w0_s)))
        index = cls._placed(client, jobs, path, meta, mt.vocab, mt.df, fn.idf_t, w0, source_ids, lengths)
        index._text_segments = (folders, deletes, mt.doc_base)
        return index

    @classmethod
    def _from_reader(cls, reader: IndexReader, backend, previous: "BM25Index | None" = None) -> "BM25Index":
        """The index of a segmented commit's reader (its manifest's settings checked as :meth:`load` does);
        ``previous``: the index of an earlier commit, whose per-segment search form is taken over, and its
        queries' term hash where the vocabulary is the same."""
        N, avgdl, variant, k1, delta = _settings(reader.meta, reader.path / "index.json")
        be = resolve_backend(backend, needs=ARRAY_STACK)
        index = cls._load_segments(reader.path, reader.meta, N, avgdl, variant, k1, delta, be, None, reader=reader,
                                   previous=previous._seg if previous is not None else None)
        if previous is not None and previous._term_hash is not None and previous.vocab.equals(index.vocab):
            index._term_hash = previous._term_hash  # a hash of the vocabulary alone: O(V) to build again
        return index

    # -- queries
    def query_matrix(self, texts, n_threads: int | None = None):
        """CSR (n_queries, V + 1) float32 of query term counts (unknown terms dropped), canonical
        (term ids ascending within a query), looked up in a hash of the vocabulary built at the first
        call (:class:`cutext.kernels.termhash.TermHash`).  Without a stemmer the batch is split and
        looked up in one pass over its bytes on numba's threads
        (:func:`cutext.kernels.termhash.text_csr`); with one, it is tokenized into one array first
        (stopwords and stemming on its distinct terms).  ``texts``: a sequence of str, or a pyarrow string
        array (read as it is: :meth:`search` converts all its queries once).  ``n_threads``: numba threads of
        the one pass (default: one per :data:`QUERIES_PER_THREAD` queries, at most numba's setting)."""
        import scipy.sparse as sp

        if not isinstance(texts, pa.Array):
            texts = list(texts)
        if self._term_hash is None:  # built once: a batch then costs one probe per token
            self._term_hash = TermHash(self.vocab)
        cfg = self.tokenizer
        if cfg.stemmer is None:
            # without a stemmer a kept token is the raw token, and a token that stopwords or the length
            # bounds drop is not in the vocabulary (they dropped it from the corpus): the split and the
            # lookup of the raw tokens are then one pass over the bytes, with no token array
            data, offsets, fold = normalize_texts(texts, cfg.lowercase)
            if n_threads is None:  # a thread per QUERIES_PER_THREAD queries: a many-core fork/join costs more
                import numba

                n_threads = max(1, min(numba.get_num_threads(), -(-len(texts) // QUERIES_PER_THREAD)))
            q_ptr, q_terms, q_w = text_csr(data, offsets, self._term_hash, fold, n_threads)
        else:
            tokens, rows = tokenize_flat(texts if isinstance(texts, list) else texts.to_pylist(),
                                         cfg)  # one array for the batch, no list per query
            ids = self._term_hash.lookup(tokens)
            if len(rows) > 1 and np.any(rows[1:] < rows[:-1]):
                o = np.argsort(rows, kind="stable")
                rows, ids = rows[o], ids[o]
            q_ptr, q_terms, q_w = query_csr(rows, ids, len(texts))
        Q = sp.csr_matrix((q_w, q_terms, q_ptr), shape=(len(texts), len(self.vocab) + 1))
        Q.has_canonical_format = True  # ascending, distinct term ids within a query (query_csr)
        return Q

    def _absent(self, Q):
        """Per-query constant: sum over query terms of w0 (bm25l / bm25+), shape (n_queries,)."""
        return np.asarray(Q @ self.w0.astype(np.float64)).ravel()

    def _submit(self, fn, *args):
        """Run ``fn(shard, *args)`` on every shard's worker; the results in shard order."""
        c = self._client
        if isinstance(c, _Devices):
            return [c.run(f, fn, *args) for _, _, _, f in self._shard_futures]
        futs = [c.submit(fn, f, *args, workers=[w], allow_other_workers=False, pure=False)
                for _, _, w, f in self._shard_futures]
        return c.gather(futs)

    @property
    def source_ids(self) -> np.ndarray:
        """numpy object array (N,): each document's source id (built from the stored ids at first use)."""
        if self._ids_np is None:
            self._ids_np = self._source_ids_pa.to_numpy(zero_copy_only=False).astype(object)
        return self._ids_np

    def _source_ids_arrow(self) -> pa.Array:
        """:attr:`source_ids` as a pyarrow string array (built once, for the result frames)."""
        cached = self._source_ids_pa
        if cached is None or (self._ids_np is not None and len(cached) != len(self._ids_np)):
            cached = self._source_ids_pa = pa.array(self._ids_np, type=pa.string())
        return cached

    def get_scores(self, query: str) -> np.ndarray:
        """Dense BM25 scores of one query against every document, float32 array (N,), on the host
        (the sparse product; on every shard for a sharded index).  A ``query`` that is not a string is a
        TypeError."""
        if not isinstance(query, str):
            raise TypeError(f"query must be a string (one query; search() takes several), got {type(query).__name__} "
                            f"{query!r}"[:300])
        Q = self.query_matrix([query])
        if self._local:
            dense = self._sm.dense(Q)[0].astype(np.float64)
        else:
            parts = self._submit(_shard_dense, Q)
            dense = np.concatenate([p[0] for p in parts]).astype(np.float64) if parts else np.zeros(0)
        if self._has_w0:
            dense += self._absent(Q)[0]
        return dense.astype(np.float32)

    def topk_start(self, Q, k: int = 10, engine: str = "auto", max_workspace=None, n_threads=None,
                   doc_filter=None):
        """:meth:`topk_arrays` in two halves: starts the engine and returns ``finish()`` -> ``(doc, score,
        n)``; the GPU engine is still running when this returns
        (:meth:`cutext.stages.engines.search.SearchMatrix.topk_start`).  ``doc_filter``: a
        :class:`cutext.stages.engines.search.DocFilter` of the rows of ``Q`` (:meth:`doc_filter`), cut into
        each shard's part here, so a worker receives only its documents' part."""
        if self._local:
            seg = self._seg if self._matrix is None else None
            if seg is not None and (MERGE_AFTER is None
                                    or seg.scored + seg.postings(Q) <= MERGE_AFTER * seg.n_postings):
                eff = search_stage.resolve_engine(engine, False, search_stage.cap_k(k, self.n_docs))
                if eff == "cpu":
                    n_threads = search_stage.check_engine_options(eff, max_workspace, n_threads)[1]
                    out = seg.topk(Q, k, n_threads, doc_filter)
                    return lambda: out
            if not self._sm.on_gpu:
                return self._sm.topk_start(Q, k, engine, max_workspace, n_threads, doc_filter)
            # on the index's own thread (as a shard of devices=): the device scores this batch as soon as it
            # has copied out the last one, while the caller merges and collects that one
            return self._gpu_lane().submit(_on_device, self._sm.matrix.data.device.id, self._sm.topk, Q, k, engine,
                                           max_workspace, n_threads, doc_filter).result

        def part(lo, hi):
            return doc_filter.shard(lo, hi) if doc_filter is not None else None

        offsets = [lo for lo, _, _, _ in self._shard_futures]  # added to each shard's doc ids in the merge
        if isinstance(self._client, _Devices):  # every device's batch started on that device's own thread (its
            # order, upload and launches), so the devices start at once while this thread collects the batch
            # before; the results are waited for here (a device's thread that also waited measured slower)
            starts = [(f, self._client.submit(f, _shard_topk_start, Q, k, engine, max_workspace, n_threads,
                                              part(lo, hi)))
                      for lo, hi, _, f in self._shard_futures]

            def finish_devices():
                got, err = [], None
                for f, fin in starts:  # every device's batch waited for (its buffers given back), even after an error
                    try:
                        got.append(self._client.run(f, _shard_finish, fin.result()))
                    except BaseException as exc:
                        err = err or exc
                if err is not None:
                    raise err
                return search_stage.merge_topk(got, k, offsets)

            return finish_devices
        # every worker's engine called at once; the calls return at finish() (the next batch may be sent first)
        clock = StepClock(np)  # $CUTEXT_GPUTEXT_PROFILE=1: parts of a Client batch on the caller
        Qs = _query_batch(Q)  # serialized once for all the workers
        wait = self._engines.start("topk", per_actor=[(Qs, k, engine, max_workspace, n_threads, part(lo, hi))
                                                      for lo, hi, _, _ in self._shard_futures])
        clock("search: shards' calls sent (client)")

        def finish():
            clock = StepClock(np)
            got = wait()
            clock("search: shards' results waited for (client)")
            out = search_stage.merge_topk(got, k, offsets)
            clock("search: shards' results merged (client)")
            return out

        return finish

    def _gpu_lane(self) -> ThreadPoolExecutor:
        """The thread of an index on one GPU that runs its batches (:meth:`topk_start`), made at the first."""
        lane = self.__dict__.get("_lane")
        if lane is None:
            lane = self._lane = ThreadPoolExecutor(1, thread_name_prefix="cutext-search")
        return lane

    def topk_arrays(self, Q, k: int = 10, engine: str = "auto", max_workspace=None, n_threads=None, filter=None):
        """Top ``k`` of a query CSR ``Q`` (:meth:`query_matrix`) as arrays (no frame, no w0 term).

        ``filter``: the documents each query may return, applied before the top k (:meth:`doc_filter`; per-query
        lists one a row of ``Q``).

        Returns
        -------
        (doc, score, n) : int64 (nq, k) doc ids (-1 past ``n``), float32 (nq, k) scores of the stored
            weights (without the per-query w0 constant), int32 (nq,) documents found per query.
        """
        return self.topk_start(Q, k, engine, max_workspace, n_threads, self.doc_filter(filter, Q.shape[0]))()

    def search(self, queries, k: int = 10, batch_size: int = 4096, progress: bool = False,
               engine: str = "auto", max_workspace: int | None = None, n_threads: int | None = None,
               with_text: bool = False, filter=None, phrases: bool | None = None) -> pd.DataFrame:
        """Top-``k`` documents for every query, among the documents of ``filter`` if given.

        Parameters
        ----------
        queries : str, list of str, dict {query_id: text}, pandas Series (index = query id) or
            DataFrame ``(query_id, query)``
            A list (tuple, numpy or pyarrow array, any ordered iterable) numbers its queries ``"0"``,
            ``"1"``, ...; other ids are written with ``str`` and must stay distinct.
        k : int >= 1
        batch_size : int >= 1
            Queries tokenized and scored together.
        progress : bool
        engine : {"auto", "cpu", "gpu", "sparse"}
            ``"cpu"``: numba threads (an index on the CPU); ``"gpu"``: the tiled CUDA engine (an index
            on the GPU, ``k <= 4096``); ``"sparse"``: the sparse product ``Q @ M`` and a top-k of its rows
            (the oracle); ``"auto"``: ``"gpu"`` on the GPU (``"sparse"`` for ``k > 4096``), else ``"cpu"``.
            :mod:`cutext.stages.engines.search`.
        max_workspace : int, optional
            Bytes of device workspace of the GPU engine (default 1 GiB, at least 1 MiB); the engine's
            device memory does not grow with ``batch_size``.  Refused by the other engines.
        n_threads : int, optional
            Threads of the CPU engine and of its query tokenization (default: all, numba's setting).
            Refused by the other engines.
        with_text : bool, default False
            Add a ``text`` column: each hit's document text (:meth:`texts_at`; an index built with
            ``store_text=True``), read from the segments of the hits only.
        filter : optional
            Documents a query may return, applied inside the engines before the top k, so every query
            returns ``min(k, allowed documents with a positive score)`` rows and never a filtered-out
            document: a ``pyarrow.compute`` expression over the kept columns (``keep_columns=`` of the
            build; ``pc.field("category") == "sci"``, a null counts as False), a boolean mask over the doc
            ids (shape (N,)), or a list with one list of allowed source ids a query (ids not in the index
            match nothing).  :meth:`doc_filter`.
        phrases : bool or None, default None
            Read ``"..."`` in a query as a phrase and ``"..."~N`` as a proximity query (Lucene's PhraseQuery
            slop, :mod:`cutext.stages.engines.phrases`): a query returns only the documents that hold each of
            its phrases, scored by the BM25 of all its words (a phrase's words are terms of the query too).
            None: when the index stores positions (``positions=True`` of the build); True: always (an index
            without positions is refused); False: never (quotes are ordinary characters, as in natural-language
            topics such as CACM's, which quote titles).

        Returns
        -------
        pandas.DataFrame
            ``query_id: str``; ``doc_id: int64``, the document's number in the index (0..N-1, the
            ``doc_id`` of ``documents/``); ``source_id``: the caller's id of the document (the source
            id the corpus gave it); ``rank: int64`` (1-based); ``score: float64``; ``doc_index:
            int64``, an alias of ``doc_id`` (kept for the earlier contract); with ``with_text``, ``text``
            (pandas' str dtype).  Rows by query, then rank:
            score descending, equal scores by the smaller ``doc_id`` (every engine and a sharded
            index give the same rows); on an index built with ``norms="lucene"``, equal scores by the
            source id (UTF-8 bytes ascending), as Anserini ranks (:func:`ties_by_source_id`), and each
            score summed as Lucene sums it (float32 term scores added in float64).  Documents that match
            no query term (score of the stored weights not > 0) are not returned, so a query may have
            fewer than ``k`` rows.

        Raises
        ------
        ValueError
            ``k``, ``batch_size``, ``engine``, ``max_workspace`` or ``n_threads`` out of range, or
            an option the engine in effect does not use; ``with_text`` on an index without texts (the
            message names ``store_text=True``); a filter on a column that is not kept (the message names it
            and ``keep_columns=``), a mask of another length than N, per-query lists whose number is not
            the number of queries, a filter whose types cannot match its column or a per-query id that is not
            a string (:meth:`doc_filter`).  Query ids that are one string once written as ``query_id`` (``1``
            and ``"1"``, a repeated DataFrame id) or missing (the message names up to five).  With phrases: an
            unbalanced quote, a ``~`` after a phrase that is not followed by a non-negative integer, a slop
            above 2**31 - 1 (Lucene's int); ``phrases=True`` on an index without positions (the message names
            ``positions=True`` and ``--positions``).
        TypeError
            ``queries`` of another type (a number, None, bytes, a set), or a query that is not a string
            (:func:`cutext.stages.engines.search_input.as_queries`).
        """
        if self.meta.get("norms") == "lucene":  # Anserini's ranking: equal scores by source id
            k = search_stage.cap_k(k, self.n_docs)
            kw = dict(batch_size=batch_size, progress=progress, engine=engine, max_workspace=max_workspace,
                      n_threads=n_threads, with_text=with_text, filter=filter, phrases=phrases)
            return ties_by_source_id(lambda qs, kk: self._lucene_sums(qs, self._search(qs, kk, **kw), phrases),
                                     queries, k, self.n_docs)
        return self._search(queries, k, batch_size, progress, engine, max_workspace, n_threads, with_text, filter,
                            phrases)

    def _lucene_sums(self, queries, hits: pd.DataFrame, phrases) -> pd.DataFrame:
        """``hits`` with each score summed as Lucene sums a BooleanQuery's clauses: the float32 term scores
        added in float64, then rounded to float32 (the engines add in float32, one ulp away at times).  On an
        index whose matrix is on the host (scipy); elsewhere the engines' sums are kept."""
        import scipy.sparse as sp

        if len(hits) == 0 or not sp.issparse(self.matrix):
            return hits
        qids, texts = search_input.as_queries(queries)
        parsed = phrase_stage.parse_queries(texts) if (self.positions if phrases is None else phrases) else None
        Q = self.query_matrix(parsed[0] if parsed is not None else texts)  # the words the engines scored
        where = {q: i for i, q in enumerate(qids.to_pylist())}
        rows = hits["query_id"].map(where).to_numpy()
        docs = hits["doc_id"].to_numpy()
        out = hits["score"].to_numpy(np.float64).copy()
        for r in np.unique(rows):
            sel = np.flatnonzero(rows == r)
            lo, hi = Q.indptr[r], Q.indptr[r + 1]
            terms, c = Q.indices[lo:hi], Q.data[lo:hi].astype(np.float32)
            w = self.matrix[terms][:, docs[sel]].toarray().astype(np.float32) * c[:, None]
            out[sel] = w.astype(np.float64).sum(axis=0).astype(np.float32)
        return hits.assign(score=out)

    def _search_input(self, queries, k, batch_size, engine, max_workspace, n_threads, with_text, filter, phrases):
        """:meth:`_search`'s options checked and its queries read, before any work: ``(k, batch_size, query ids,
        texts, doc filter)``, the texts without their quoted phrases, whose documents the filter then holds."""
        if with_text and not self.store_text:  # before any work
            raise ValueError("with_text=True: " + self._no_text())
        notice_compiles()  # the first search on a machine compiles the CPU kernels for seconds: say so once
        if self.backend == "gpu":  # and, on the GPU, CuPy compiles the engine's CUDA kernels
            notice_gpu_compiles()
        k = search_stage.cap_k(k, self.n_docs)  # no query has more than N documents; arrays are sized by k
        batch_size = count("batch_size", batch_size, lo=1)
        engine = choice("engine", engine, search_stage.ENGINES)
        if self._local:  # check the options before any work (shards check them on their worker)
            nonnegative = self._sm_obj.nonnegative if self._sm_obj is not None else True  # query-time weights: >= 0
            eff = search_stage.resolve_engine(engine, self._on_gpu, k, nonnegative)
            search_stage.check_engine_options(eff, max_workspace, n_threads)
        qids, texts = search_input.as_queries(queries)
        if not (phrases is None or isinstance(phrases, bool)):
            raise ValueError(f"{param('phrases', bare=True)} must be True, False or None, got {phrases!r}")
        if phrases is True and not self.positions:  # before any work
            raise ValueError(phrase_stage.no_positions_message(self.path))
        use = self.positions if phrases is None else phrases
        parsed = phrase_stage.parse_queries(texts) if use else None  # None also when no query holds a quote
        doc_filter = self.doc_filter(filter, len(texts))  # checked and resolved once, before any query is scored
        if parsed is not None:  # phrases: per-query doc lists, the user's filter intersected
            texts = parsed[0]
            doc_filter = self.phrase_filter(parsed[1], texts, doc_filter)
        return k, batch_size, qids, texts, doc_filter

    def _search(self, queries, k, batch_size, progress, engine, max_workspace, n_threads, with_text, filter,
                phrases) -> pd.DataFrame:
        """:meth:`search` with the engines' ties (the smaller ``doc_id``)."""
        k, batch_size, qids, texts, doc_filter = self._search_input(queries, k, batch_size, engine, max_workspace,
                                                                    n_threads, with_text, filter, phrases)
        rng = range(0, len(texts), batch_size)
        if progress:
            from tqdm.auto import tqdm

            rng = tqdm(rng, desc="search", unit="batch")
        clock = StepClock(np)  # $CUTEXT_GPUTEXT_PROFILE=1: host clocks of the parts of a search
        parts = []
        source_ids = self._source_ids_arrow()
        # the frame's numeric columns, filled batch by batch while the engines score the next one
        cols = _ResultColumns(len(texts) * k, RESULT_ROWS_FIRST)

        def collect(s, Q, finish):
            doc, score, n = finish()
            clock("search: engine (wait)")
            rows, rank, docs, vals = _batch_rows(doc, score, n, k)
            if self._has_w0:
                vals += self._absent(Q)[rows]
            rows += s  # fresh arrays: in place
            cols.add(rank, docs, vals)
            # the batch's strings gathered while the engines score the next batch: on a thread of their own
            # where the engines run off this thread's cores (pyarrow releases the GIL), so that this thread
            # starts the next batch meanwhile
            parts.append(takes.submit(strings, rows, docs) if takes is not None else strings(rows, docs))
            clock("search: collect")

        def strings(rows, docs):
            return qids.take(pa.array(rows)), source_ids.take(pa.array(docs))

        # batch i + 1 is tokenized while the GPU engine scores batch i (topk_start returns before the
        # kernels end; the other engines have finished when it returns).  Where the engines run off this
        # thread's cores (a GPU, or the shards of workers or devices), the next two batches are tokenized on
        # a thread of its own meanwhile, beside this thread's merge and collection of the last one (numba
        # and numpy release the GIL); the CPU engine uses every core itself.
        ahead = not self._local or self._on_gpu
        pool = ThreadPoolExecutor(1) if ahead and len(rng) > 1 else None
        takes = ThreadPoolExecutor(1, thread_name_prefix="cutext-collect") if pool is not None else None

        try:  # the texts in Arrow once (under the GIL): a batch's tokenizer then reads its slice without it
            arrow_texts = text_array(texts)
        except TextEncodingError as exc:
            raise ValueError(f"query {qids[exc.row].as_py()!r}: {exc.detail}") from None

        def csr(s):
            own = StepClock(np)  # on the tokenizer's thread: its own time, not the caller's wait
            Q = self.query_matrix(arrow_texts[s:s + batch_size], n_threads)  # n_threads: the CPU engine's
            own("search: query csr (tokenizer thread)")
            return Q

        starts = list(range(0, len(texts), batch_size))  # the bar (if any) advances as the loop takes a batch
        # two batches queued on the tokenizer's thread, so it does not wait for the caller to take one
        nxt = deque(pool.submit(csr, s) for s in starts[:2]) if pool is not None else None
        pending = None
        try:
            for i, s in enumerate(rng):
                Q = nxt.popleft().result() if pool is not None else csr(s)  # the texts were checked above
                if pool is not None and i + 2 < len(starts):
                    nxt.append(pool.submit(csr, starts[i + 2]))
                clock("search: query csr")
                fb = doc_filter.queries(s, s + Q.shape[0]) if doc_filter is not None else None
                started = (s, Q, self.topk_start(Q, k, engine, max_workspace, n_threads, fb))
                clock("search: engine (start)")
                if pending is not None:  # batch i - 1 collected while the engines score batch i
                    collect(*pending)
                pending = started
            if pending is not None:
                collect(*pending)
            strs = [p.result() if takes is not None else p for p in parts]
        finally:
            for ex in (pool, takes):
                if ex is not None:
                    ex.shutdown(wait=True, cancel_futures=True)
        num = cols.views()
        docs = num["doc_id"]
        # string columns gathered in pyarrow per batch and wrapped as pandas' str dtype (no Python objects)
        out = pd.DataFrame({"query_id": _str_series([q for q, _ in strs]), "doc_id": docs,
                            "source_id": _str_series([d for _, d in strs]), "rank": num["rank"],
                            "score": num["score"], "doc_index": num["doc_index"]}, copy=False)
        if with_text:
            out["text"] = _take_str(self.texts_at(docs), np.arange(len(docs)))
        clock("search: result frame")
        return out

__all__ = ["BM25Index", "bm25f_spec", "read_postings", "shard_ranges", "weight_bounds"]
