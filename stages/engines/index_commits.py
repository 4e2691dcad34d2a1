"""Commits of a segmented BM25 index (``index_format`` 2): deletions, compaction, and the commit step that
append and conversion share.

A commit is a directory: ``index.json`` (the manifest: the segments in order, the deletion file of each,
the generation, the global N and avgdl) with ``segments/`` and ``deletes/`` beside it.  A new commit is
written into a temporary directory beside the index, the unchanged segments hard-linked into it (segments
are immutable), and swapped in atomically (:func:`cutext.stages.runtime.output.atomic_directory`); it is
swapped in only over the commit it was built from (:func:`read_commit`), so of two writers that start from
one commit one wins and the other writes nothing, as Lucene's ``write.lock`` allows one IndexWriter.
Deletions are recorded, not rewritten (Lucene's live-docs files): ``deletes/<segment>-g<generation>.npy``
holds a segment's deleted local doc numbers; :func:`commit_compaction` rewrites the live documents as one
segment (Lucene's ``forceMerge(1)``), and :mod:`cutext.stages.engines.merge_policy` merges runs of adjacent
segments (:mod:`cutext.stages.engines.segment_merge`).

Every commit also keeps its global vocabulary, ``terms.arrow`` (:func:`write_commit_terms`: the live terms
and their df over all its segments), so that an append's commit counts the new segments only and merges
their terms into it, O(new segments + vocabulary) instead of reading every segment's terms
(:func:`write_commit`); an index without it (written before it existed) takes the full recount once.
"""
from __future__ import annotations

import functools
import json
import os
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cutext.kernels._version import __version__
from cutext.kernels.postings import sorted_term_ids
from cutext.stages.engines.index_ids import duplicate_deletes, segment_source_ids, source_id_list
from cutext.stages.engines.index_manifest import read_index_manifest
from cutext.stages.engines.segment_merge import SEGMENTS_DIR, merge_commit_runs
from cutext.stages.engines.segments import (
    deleted_postings,
    merge_terms,
    postings_doc,
    segment_heads,
    terms_of_docs,
    union_terms,
    write_segment,
)
from cutext.stages.runtime import artifacts as art
from cutext.stages.runtime.npy import read_npy
from cutext.stages.runtime.output import OutputBusyError, atomic_directory, write_json

__all__ = ["SEGMENTS_DIR", "read_deletes", "commit_segments", "read_commit", "segmented_commit", "commit_deletion",
           "commit_compaction", "write_commit", "index_counts", "link_segments", "write_index_manifest",
           "TERMS_FILE", "write_commit_terms", "read_commit_terms", "merge_vocabularies", "update_deletes",
           "dedupe_build", "check_kept_types"]

KIND = "cutext.bm25"
TERMS_FILE = "terms.arrow"
_TERMS_SCHEMA = pa.schema([("term", pa.large_string()), ("df", pa.int64())])


def read_deletes(path: Path, meta: dict, names: list) -> list:
    """The deleted local doc numbers of each segment (int64 arrays; empty: none) from index.json's
    ``deletes`` (``{segment: file under deletes/}``).

    Raises
    ------
    ArtifactError (ValueError)
        A ``deletes`` entry that names no segment of the index, no file under ``deletes/``, or an
        unreadable or non-integer array.
    """
    mf = path / "index.json"
    spec = meta.get("deletes", {})
    if not isinstance(spec, dict) or not set(spec) <= set(names):
        raise art.ArtifactError(f"{mf}: 'deletes' must map segments of the index to files, got {spec!r}")
    out = []
    for n in names:
        if n not in spec:
            out.append(np.zeros(0, np.int64))
            continue
        f = path / "deletes" / str(spec[n])
        if not isinstance(spec[n], str) or "/" in spec[n] or not f.is_file():
            raise art.ArtifactError(f"{mf}: deletions of {n!r} are not a file under deletes/: {spec[n]!r}")
        try:
            d = read_npy(f)
        except (OSError, ValueError) as exc:
            raise art.ArtifactError(f"{f}: unreadable deletions ({exc})") from None
        if d.ndim != 1 or (d.size and d.dtype.kind not in "iu"):
            raise art.ArtifactError(f"{f}: deletions must be a 1-d integer array")
        out.append(d.astype(np.int64))
    return out


def commit_segments(path: Path, meta: dict) -> tuple[list, list]:
    """The segment folders a commit lists (``meta["segments"]``, checked to be plain folder names) and the
    deleted local doc numbers of each (:func:`read_deletes`).

    Raises
    ------
    ArtifactError (ValueError)
        ``segments`` that is not a list of folder names, or unreadable deletions.
    """
    names = meta.get("segments")
    if not isinstance(names, list) or not all(isinstance(n, str) and "/" not in n and n not in ("", ".", "..")
                                              for n in names):
        raise art.ArtifactError(f"{Path(path) / 'index.json'}: 'segments' must be a list of segment folder names, "
                                f"got {names!r}")
    return [Path(path) / SEGMENTS_DIR / n for n in names], read_deletes(Path(path), meta, names)


def read_commit(index: Path) -> tuple[dict, Callable[[Path], None]]:
    """The index's manifest, and the check that it is still the index's commit when a new one is swapped in.

    A new commit builds on the one it read (its segments, deletions, statistics): if another writer
    committed in between, swapping this one in would drop that writer's change, so the check (run under
    the output's lock at the swap: ``atomic_directory(expect=...)``) refuses it.

    Returns
    -------
    (dict, callable)
        The manifest and ``expect(out)``, which raises :class:`OutputBusyError` when ``out/index.json``
        is no longer the bytes read here.

    Raises
    ------
    ArtifactNotFoundError, ArtifactError
        Not a cutext bm25 index, or an unreadable manifest.
    OutputBusyError
        The index was committed while it was being read.
    """
    index = Path(index)
    raw = manifest_bytes(index)
    old = read_index_manifest(index, verify=False)  # every field checked: a writer trusts them
    if json.loads(raw or b"null") != old:
        raise OutputBusyError(f"{index} was committed by another writer while this run read it; nothing was "
                              "written (run it again)")

    def expect(out: Path) -> None:
        now = manifest_bytes(out)
        if now != raw:
            raise OutputBusyError(f"{index} was changed by another writer (generation {old.get('generation', 0)}"
                                  f" -> {_generation(now)}) while this run worked on it; this run wrote "
                                  "nothing (run it again on the new commit)")
    return old, expect


def _generation(raw: bytes):
    try:
        return json.loads(raw or b"null").get("generation", 0)
    except (ValueError, AttributeError):
        return "unreadable"


def segmented_commit(index: Path, what: str) -> tuple[dict, Callable[[Path], None]]:
    """:func:`read_commit` of an index that must be segmented; ``what`` names the operation in the error.

    Raises
    ------
    ArtifactError (ValueError)
        A format-1 index (the message names the command that converts it).
    """
    old, expect = read_commit(index)
    if old.get("index_format", 1) != 2:
        raise art.ArtifactError(f"{Path(index) / 'index.json'}: {what} needs a segmented index; convert it with "
                                f"cutext bm25-convert --index {index} (or rebuild it with --index-format 2)")
    return old, expect


def link_segments(index: Path, tmp: Path, names: list) -> None:
    """The index's segments in the new commit ``tmp`` as hard links (no byte copied; segments are immutable)."""
    for n in names:
        src, dst = Path(index) / SEGMENTS_DIR / n, Path(tmp) / SEGMENTS_DIR / n
        dst.mkdir(parents=True)
        for f in src.iterdir():
            os.link(f, dst / f.name)


def index_counts(heads: list, old: dict, replaced: int = 0, input_bytes: int = 0, **extra) -> tuple:
    """The global statistics of a commit's segments (:func:`merge_terms`) and its manifest's ``counts``:
    the sizes of the whole index, ``replaced`` and ``input_bytes`` added to the earlier commit's."""
    mt = merge_terms(heads)
    lengths = np.concatenate([h.lengths for h in heads]) if heads else np.zeros(0, np.int32)
    oc = old.get("counts", {})
    return mt, {"n_docs": mt.n_docs, "n_terms": len(mt.vocab), "n_postings": int(mt.df.sum()), "n_tokens": mt.sum_dl,
                "n_empty_docs": int((lengths == 0).sum()), "replaced": int(oc.get("replaced", 0)) + replaced,
                "input_bytes": int(oc.get("input_bytes", 0)) + input_bytes, "partitions": len(heads), **extra}


def write_index_manifest(tmp: Path, fields: dict) -> None:
    """``tmp/index.json``: ``fields`` with the kind, the cutext version and the local time of the commit."""
    write_json(Path(tmp) / "index.json", {"kind": KIND, "version": __version__, **fields,
                                          "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")})


def write_commit_terms(tmp, vocab, df) -> None:
    """Write a commit's global vocabulary ``tmp/terms.arrow`` (an Arrow IPC file).

    Parameters
    ----------
    tmp : str or os.PathLike
        The commit's directory (sealed afterwards with the rest of the commit).
    vocab : pyarrow string array, shape (V,)
        The terms of all the commit's segments, ascending by UTF-8 bytes (``MergedTerms.vocab``).
    df : integer array, shape (V,)
        The live df of each term over the commit's segments (``MergedTerms.df[1:]``); terms of df 0 are
        left out, so the file holds the terms a merge of the live segments holds.

    A commit of one segment without deletions keeps no file: its vocabulary and df are the segment's own
    (``terms.parquet``), so the index holds one copy of them, as Lucene's per-segment term dictionaries do
    (:mod:`cutext.stages.engines.index_reader` reads them from the segment).

    Raises
    ------
    ValueError
        ``vocab`` and ``df`` of different lengths.
    """
    segs, dels = Path(tmp) / SEGMENTS_DIR, Path(tmp) / "deletes"
    if segs.is_dir() and len(list(segs.iterdir())) == 1 and not (dels.is_dir() and any(dels.iterdir())):
        (Path(tmp) / TERMS_FILE).unlink(missing_ok=True)
        return
    vocab = vocab.combine_chunks() if isinstance(vocab, pa.ChunkedArray) else vocab
    vocab = vocab.cast(pa.large_string())
    df = np.asarray(df, np.int64)
    if len(vocab) != len(df):
        raise ValueError(f"terms.arrow: {len(vocab)} terms and {len(df)} df values")
    held = df > 0
    if not held.all():
        vocab, df = vocab.filter(pa.array(held)), df[held]
    table = pa.table({"term": vocab, "df": pa.array(df, pa.int64())}, schema=_TERMS_SCHEMA)
    with pa.OSFile(str(Path(tmp) / TERMS_FILE), "wb") as sink, pa.ipc.new_file(sink, _TERMS_SCHEMA) as w:
        w.write_table(table)


def read_commit_terms(index, meta: dict | None = None) -> tuple[pa.Array, np.ndarray] | None:
    """The global vocabulary a commit keeps (:func:`write_commit_terms`), or None when it has none usable.

    Parameters
    ----------
    index : str or os.PathLike
        The commit's directory.
    meta : dict, optional
        Its manifest (``index.json``, parsed): the file must then be listed in its ``files`` with the
        same size and CRC32 (a file the commit did not seal, or one damaged since, is not used), and hold
        ``counts["n_terms"]`` terms whose df sum to ``counts["n_postings"]``.

    Returns
    -------
    (pyarrow.LargeStringArray, numpy int64 array) or None
        The terms, ascending by UTF-8 bytes, and their df (>= 1); None when the file is missing (an index
        written before commits kept it), unreadable, or does not match ``meta``.  The caller then
        recounts from the segments; nothing here raises.
    """
    f = Path(index) / TERMS_FILE
    try:
        raw = f.read_bytes()
    except OSError:
        return None
    if meta is not None:
        rec = (meta.get("files") or {}).get(TERMS_FILE)
        if (not isinstance(rec, dict) or rec.get("bytes") != len(raw)
                or rec.get("crc32") != f"{zlib.crc32(raw):08x}"):
            return None
    try:
        table = pa.ipc.open_file(pa.py_buffer(raw)).read_all()
        if table.schema.names != ["term", "df"] or table.column("term").null_count or table.column("df").null_count:
            return None
        terms = table.column("term").combine_chunks().cast(pa.large_string())
        df = table.column("df").combine_chunks().to_numpy().astype(np.int64)
    except (pa.ArrowException, ValueError, TypeError):
        return None
    if len(df) and int(df.min()) < 1:
        return None
    if len(terms) > 1 and not pc.all(pc.less(terms[:-1], terms[1:])).as_py():
        return None
    if meta is not None:
        oc = meta.get("counts") or {}
        if oc.get("n_terms") != len(terms) or oc.get("n_postings") != int(df.sum()):
            return None
    return terms, df


def merge_vocabularies(parts) -> tuple[pa.Array, np.ndarray]:
    """The union of vocabularies and their summed df, as :func:`merge_terms` merges segments' terms
    (:func:`cutext.stages.engines.segments.union_terms`).

    Parameters
    ----------
    parts : sequence of (pyarrow string array, integer array)
        Each a vocabulary (its terms distinct, ascending by UTF-8 bytes: a segment's, a commit's kept
        one, a writer's) and the df of its terms, of equal lengths.

    Returns
    -------
    (pyarrow.LargeStringArray, numpy int64 array)
        The distinct terms of all the parts, ascending by UTF-8 bytes, and each one's df summed over the
        parts (terms of df 0 stay: :func:`write_commit_terms` leaves them out).  One part is returned as
        it is (cast), none as empty arrays.

    Raises
    ------
    ValueError
        A part whose terms and df differ in length.
    """
    parts = [((t.combine_chunks() if isinstance(t, pa.ChunkedArray) else t).cast(pa.large_string()),
              np.asarray(d, np.int64)) for t, d in parts]
    for t, d in parts:
        if len(t) != len(d):
            raise ValueError(f"a vocabulary of {len(t)} terms with {len(d)} df values")
    parts = [(t, d) for t, d in parts if len(t)]
    if len(parts) == 1:
        return parts[0]
    vocab, ids = union_terms([t for t, _ in parts])
    df = np.zeros(len(vocab) + 1, np.int64)
    for g, (_, d) in zip(ids, parts):  # within one part a term occurs once
        df[g] += d
    return vocab, df[1:]


def _append_stats(index: Path, tmp: Path, old: dict, names: list, deletes: list, added: list, new):
    """The statistics of an append's commit from the earlier commit's and the ``added`` segments' alone
    (:func:`write_commit`), or None when the commit is not a plain append of a commit that keeps its
    vocabulary (then the caller recounts every segment).

    Returns
    -------
    (heads, (n_docs, sum_dl, vocab, df)) or None
        The added segments as read (terms and documents, no ids) and the commit's N, tokens, vocabulary
        and df; N, tokens and df are those :func:`merge_terms` gives over every segment.
    """
    if new is not None or old.get("index_format", 1) != 2 or list(names) != list(old.get("segments") or ()):
        return None
    oc = old.get("counts")
    if not isinstance(oc, dict) or not all(isinstance(oc.get(k), int) and not isinstance(oc.get(k), bool)
                                           for k in ("n_docs", "n_tokens", "n_postings", "n_empty_docs")):
        return None
    if old.get("N") != oc["n_docs"]:
        return None
    try:  # the deletions recorded are the earlier commit's: an append deletes nothing
        before = read_deletes(Path(index), old, list(names))
    except (art.ArtifactError, OSError):
        return None
    if len(before) != len(deletes) or not all(np.array_equal(np.unique(np.asarray(a, np.int64)), np.unique(b))
                                              for a, b in zip(deletes, before)):
        return None
    kept = read_commit_terms(index, old)
    if kept is None:
        return None
    heads = segment_heads([Path(tmp) / SEGMENTS_DIR / n for n in added], [np.zeros(0, np.int64)] * len(added),
                          ids=False)
    fields = tuple((old.get("bm25f") or {}).get("fields") or ()) if isinstance(old.get("bm25f"), dict) else ()
    if any(tuple(h.fields) != fields for h in heads):  # the full recount names the mismatch
        return None
    terms, df = merge_vocabularies([kept] + [(h.terms, h.df) for h in heads if h.n_terms])
    n_docs = oc["n_docs"] + sum(h.n_docs for h in heads)
    sum_dl = oc["n_tokens"] + sum(h.sum_dl for h in heads)
    return heads, (n_docs, sum_dl, terms, df)


def _deletion_stats(index: Path, old: dict, names: list, deletes: list):
    """The statistics of a deletion's commit from the earlier commit's kept vocabulary and counts, corrected by
    the postings of the newly deleted documents only (each segment with new deletions reads its postings
    and lengths; the others nothing), or None when the earlier commit keeps no usable statistics.

    Returns
    -------
    (n_docs, sum_dl, vocab, df, n_empty_docs) or None
        The live documents' N, tokens, vocabulary (terms of df 0 dropped) and df, and empty documents: what
        :func:`merge_terms` gives over the live segments.
    """
    oc = old.get("counts")
    if not isinstance(oc, dict) or not all(isinstance(oc.get(k), int) and not isinstance(oc.get(k), bool)
                                           for k in ("n_docs", "n_tokens", "n_postings", "n_empty_docs")):
        return None
    if old.get("N") != oc["n_docs"] or list(names) != list(old.get("segments") or ()) or len(deletes) != len(names):
        return None
    kept = read_commit_terms(index, old)
    if kept is None:
        return None
    try:
        before = read_deletes(Path(index), old, list(names))
    except (art.ArtifactError, OSError):
        return None
    vocab, df = kept
    df = df.copy()
    n_docs, sum_dl, empty = oc["n_docs"], oc["n_tokens"], oc["n_empty_docs"]
    todo = []
    for n, b, a in zip(names, before, deletes):
        gone = np.setdiff1d(np.asarray(a, np.int64), b)
        if len(np.setdiff1d(b, a)):  # a deletion never brings a document back
            return None
        if len(gone):
            todo.append((Path(index) / SEGMENTS_DIR / n, gone))

    def correction(job):  # a segment's terms held by the documents deleted now, and how many of them
        terms, corr, lengths = deleted_postings(*job)
        return sorted_term_ids(vocab, terms), corr, lengths

    with ThreadPoolExecutor(max(1, min(len(todo), os.cpu_count() or 1))) as pool:  # pyarrow decodes off the GIL
        for g, corr, lens in pool.map(correction, todo):
            if len(g) and int(g.min()) == 0:
                return None
            df[g - 1] -= corr  # within a segment a term occurs once
            n_docs, sum_dl, empty = n_docs - len(lens), sum_dl - int(lens.sum()), empty - int((lens == 0).sum())
    if len(df) and int(df.min()) < 0:
        return None
    held = df > 0
    return n_docs, sum_dl, vocab.filter(pa.array(held)), df[held], empty


def write_commit(tmp: Path, index: Path, old: dict, names: list, deletes: list, extra: dict,
                 new=None, added: list = (), timings: dict | None = None, fields: dict | None = None,
                 stats: tuple | None = None) -> dict:
    """Write a commit into ``tmp`` and return its manifest's ``counts``.

    The commit lists the segments ``names`` of ``index`` (hard links) with their ``deletes``, then the
    segments ``added`` (already written into ``tmp/segments``, e.g. by an append's writers), then ``new``
    (``(name, write_segment arguments)``, written here); the manifest's statistics are recounted from them,
    and the commit's vocabulary is kept in ``tmp/terms.arrow`` (:func:`write_commit_terms`).  An append (only
    ``added`` segments, the earlier commit's segments and deletions unchanged) of a commit that keeps its
    vocabulary (:func:`read_commit_terms`) reads only the added segments: N, tokens, postings and empty
    documents are the earlier commit's plus theirs, and the vocabulary is the kept one merged with their
    terms; the same manifest as a recount of every segment (:func:`index_counts`).
    ``stats`` (``(n_docs, sum_dl, vocab, df, n_empty_docs)``, the live documents'), when given, are the new
    commit's statistics (a deletion through a reader: :func:`commit_deletion`).
    ``extra`` goes to :func:`index_counts` (``replaced``, ``input_bytes`` and counts of the operation),
    ``timings`` (seconds per step) and ``fields`` (``backend``, ``scheduler``, ``n_workers`` of the run)
    into the manifest; the other settings are the earlier commit's.
    """
    timings = {} if timings is None else timings
    gen = int(old.get("generation", 0)) + 1
    link_segments(index, tmp, names)
    spec = {}
    for n, d in zip(list(names) + list(added), deletes):  # an added segment may come with deletions (an update)
        if len(d):
            spec[n] = f"{n}-g{gen:05d}.npy"
            (tmp / "deletes").mkdir(exist_ok=True)
            np.save(tmp / "deletes" / spec[n], d, allow_pickle=False)
    segs = list(names) + list(added)
    if new is not None:
        t0 = time.perf_counter()
        write_segment(tmp / SEGMENTS_DIR / new[0], **new[1])
        timings["write"] = time.perf_counter() - t0
        segs.append(new[0])
    fast = stats if stats is not None else _append_stats(index, tmp, old, names, deletes, added, new)
    if stats is not None:  # a deletion through a reader of the commit: its statistics, corrected in memory
        heads, (n_docs, sum_dl, vocab, df, empty) = [], stats
    elif fast is not None:
        heads, (n_docs, sum_dl, vocab, df) = fast
        empty = old["counts"]["n_empty_docs"] + sum(int((h.lengths == 0).sum()) for h in heads)
    elif not added and new is None:
        fast = _deletion_stats(index, old, names, deletes)
        if fast is not None:
            heads, (n_docs, sum_dl, vocab, df, empty) = [], fast
    if fast is not None:  # an append or a deletion: the earlier commit's statistics and what changed
        oc, extra = old["counts"], dict(extra)
        counts = {"n_docs": n_docs, "n_terms": len(vocab), "n_postings": int(df.sum()), "n_tokens": sum_dl,
                  "n_empty_docs": empty,
                  "replaced": int(oc.get("replaced", 0)) + int(extra.pop("replaced", 0)),
                  "input_bytes": int(oc.get("input_bytes", 0)) + int(extra.pop("input_bytes", 0)),
                  "partitions": len(segs), **extra}
        avgdl = sum_dl / n_docs if n_docs else 0.0  # as MergedTerms.avgdl: the same bits as a load's
    else:
        heads = segment_heads([tmp / SEGMENTS_DIR / n for n in segs],
                              list(deletes) + [np.zeros(0, np.int64)] * (len(segs) - len(deletes)), ids=False)
        mt, counts = index_counts(heads, old, **extra)
        n_docs, avgdl, vocab, df = mt.n_docs, mt.avgdl, mt.vocab, mt.df[1:]
    del heads
    write_commit_terms(tmp, vocab, df)
    keep = {k: old[k] for k in ("variant", "k1", "b", "delta", "tokenizer", "format", "source", "backend",
                                "scheduler", "n_workers", "store_text", "bm25f", "keep_columns", "positions", "norms")
                if k in old}
    next_segment = int(old.get("next_segment", len(old["segments"]))) + len(added) + (new is not None)
    # writers that numbered their segments by their input pieces may leave gaps: never reuse a number
    numbers = [int(n.rsplit("-", 1)[1]) for n in segs if n.rsplit("-", 1)[-1].isdigit()]
    next_segment = max([next_segment] + [x + 1 for x in numbers])
    write_index_manifest(tmp, {"index_format": 2, "segments": segs, "deletes": spec, "generation": gen,
                               "next_segment": next_segment, "N": n_docs, "avgdl": avgdl, **keep,
                               **(fields or {}), "counts": counts, "timings": timings})
    return counts


def _busy_if_committed(fn):
    """``fn(index, ...)``, a writer that reads the index's segments before its commit: a failure of those reads
    (a segment folder gone, a deletion file replaced) while another writer committed to the index comes from
    that commit, not from damage, and is raised as :class:`OutputBusyError` naming the index, chained to it."""
    @functools.wraps(fn)
    def writer(index, *args, **kwargs):
        before = manifest_bytes(index)
        try:
            return fn(index, *args, **kwargs)
        except OutputBusyError:
            raise
        except Exception as exc:
            if before is not None and manifest_bytes(index) != before:
                raise OutputBusyError(f"{index} was committed by another writer while this run read it "
                                      f"({type(exc).__name__}: {exc}); nothing was written (run it again on the "
                                      "new commit)"[:600]) from exc
            raise
    return writer


def manifest_bytes(index) -> bytes | None:
    """The bytes of ``index/index.json`` (None when it cannot be read): what a writer or reader compares to
    find another writer's commit."""
    try:
        return (Path(index) / "index.json").read_bytes()
    except OSError:
        return None


def _reader_deletion(reader, old: dict, wanted: pa.Array):
    """A deletion's new deletions and statistics from a reader of the commit (``IndexReader``: its live
    segments in memory): no segment is read.  Returns ``(deletes, found, removed, stats)``."""
    mt = reader.terms
    df = mt.df.copy()
    found = np.zeros(len(wanted), bool)
    n_docs, sum_dl, empty = mt.n_docs, mt.sum_dl, int(old["counts"]["n_empty_docs"])
    new_deletes, removed = [], 0
    for r, g in zip(reader.segments, mt.term_ids):
        seg = r.segment
        hit = pc.is_in(seg.source_ids.cast(pa.string()), value_set=wanted).to_numpy(zero_copy_only=False)
        if not hit.any():
            new_deletes.append(r.deleted)
            continue
        found[pc.index_in(seg.source_ids.cast(pa.string()).filter(pa.array(hit)), value_set=wanted).to_numpy()] = True
        removed += int(hit.sum())
        new_deletes.append(np.union1d(r.deleted, r.live_docs[hit]).astype(np.int64))
        doc = seg.doc if seg.doc is not None else postings_doc(seg.path, seg.n_postings, seg.n_docs)
        local, corr = terms_of_docs(seg.df, doc, hit)
        df[g[local]] -= corr
        lens = seg.lengths[hit]
        n_docs, sum_dl, empty = n_docs - int(hit.sum()), sum_dl - int(lens.sum()), empty - int((lens == 0).sum())
    held = df[1:] > 0
    return new_deletes, found, removed, (n_docs, sum_dl, mt.vocab.filter(pa.array(held)), df[1:][held], empty)


@_busy_if_committed
def commit_deletion(index, source_ids, reader=None) -> dict:
    """Delete documents from a segmented index by their source ids: a new commit that records them.

    Each segment's deleted local documents go to ``deletes/`` and are listed in the new commit (the
    segments are hard-linked into it); a load drops them, so the index scores as a one-shot build of the
    remaining documents (N, avgdl and df recounted).

    Parameters
    ----------
    index : str or os.PathLike
        A segmented index.
    source_ids : str or iterable of str
        The ``source_id`` of each document to delete, exactly as stored (never stripped or converted:
        :func:`cutext.stages.engines.index_ids.source_id_list`); each must be in the index and not deleted yet.
        Every live copy of an id is deleted (an index appended with ``on_duplicate="keep"`` may hold several).
    reader : cutext.stages.engines.index_reader.IndexReader, optional
        A reader of the index's commit (``BM25Index``'s): the ids are found and the statistics corrected in
        its segments in memory; ignored when the index was committed since it was opened.

    Returns
    -------
    dict
        The new commit's ``counts``, with ``deleted_docs``: the documents removed (copies of one id counted
        each).

    Raises
    ------
    ArtifactError (ValueError)
        Not a segmented cutext bm25 index, or a damaged one.
    TypeError
        ``source_ids`` is not a str or an iterable of str (an int, None, ...).
    ValueError
        Source ids that are not in the index (up to five named), or none given; nothing is written.
    OutputBusyError
        Another writer committed to the index meanwhile; nothing is written.
    """
    index = Path(index)
    wanted = pa.array(sorted(set(source_id_list(source_ids))), pa.string())
    old, expect = segmented_commit(index, "deleting documents")
    if not len(wanted):
        raise ValueError(f"{index}: no source id given to delete")
    names = old["segments"]
    stats = None
    if (reader is not None and json.loads(reader.raw or b"null") == old and isinstance(old.get("counts"), dict)
            and isinstance(old["counts"].get("n_empty_docs"), int) and [r.name for r in reader.segments] == names):
        new_deletes, found, removed, stats = _reader_deletion(reader, old, wanted)
    else:
        found, new_deletes, removed = _found_in_segments(index, old, names, wanted)
    if not found.all():
        missing = wanted.filter(pa.array(~found)).to_pylist()
        raise ValueError(f"{index}: {len(missing)} source id(s) not in the index (or already deleted), e.g. "
                         f"{missing[:5]}; nothing was deleted")
    with atomic_directory(index, kind=KIND, manifest="index.json", expect=expect) as tmp:
        return write_commit(tmp, index, old, names, new_deletes, {"deleted_docs": removed}, stats=stats)


def _found_in_segments(index: Path, old: dict, names: list, wanted: pa.Array) -> tuple:
    """``(found, deletes, removed)`` of a deletion: which ids the segments hold live, each segment's deleted
    local docs with them, and the documents they delete (the segments' source ids read)."""
    found = np.zeros(len(wanted), bool)
    new_deletes, removed = [], 0
    deletes = read_deletes(index, old, names)
    for ids, d in zip(segment_source_ids([index / SEGMENTS_DIR / n for n in names], deletes), deletes):
        hit = pc.is_in(ids, value_set=wanted).fill_null(False).to_numpy(zero_copy_only=False)  # deleted: null
        found[pc.index_in(ids.filter(pa.array(hit)), value_set=wanted).to_numpy()] = True
        removed += int(hit.sum())
        new_deletes.append(np.union1d(d, np.flatnonzero(hit)).astype(np.int64))
    return found, new_deletes, removed


@_busy_if_committed
def commit_compaction(index) -> dict:
    """Rewrite a segmented index as one segment without its deleted documents (Lucene's ``forceMerge(1)``):
    the merge of the run of all its segments (:func:`cutext.stages.engines.segment_merge.merge_commit_runs`).

    Parameters
    ----------
    index : str or os.PathLike
        A segmented index.

    Returns
    -------
    dict
        The new commit's ``counts`` (with ``compacted_segments``); its scores are those before.  The
        documents' texts are kept when every segment stores them, and so are the kept columns
        (``keep_columns=``; their types unified, e.g. an int column of one segment and a double of
        another become double), and the term positions (``positions=True``) move with their postings.

    Raises
    ------
    ArtifactError (ValueError)
        Not a segmented cutext bm25 index, or a damaged one.
    OutputBusyError
        Another writer committed to the index meanwhile; nothing is written.
    """
    index = Path(index)
    old, expect = segmented_commit(index, "compacting")
    names = old["segments"]
    deletes = read_deletes(index, old, names)
    with atomic_directory(index, kind=KIND, manifest="index.json", expect=expect) as tmp:
        write_commit(tmp, index, old, names, deletes, {"compacted_segments": len(names)})
        return merge_commit_runs(tmp, [(0, len(names))] if names else [], deletes)


def update_deletes(index: Path, old: dict, tmp: Path, added: list, on_duplicate: str) -> tuple[list, int]:
    """The deletions of an append's commit: the earlier commit's, and those ``on_duplicate`` makes of documents
    whose source ids the ``added`` segments (written into ``tmp``) bring again
    (:func:`cutext.stages.engines.index_ids.duplicate_deletes`).

    Returns
    -------
    (list of int64 arrays, int)
        The deleted local doc numbers of each of the index's segments, then (only when an update deleted
        some) of each added segment, for :func:`write_commit`; and the number of documents the update
        deleted (0 but for ``"replace"``).

    Raises
    ------
    DuplicateIdError (ValueError)
        ``on_duplicate="error"`` and a new document's id is live in the index or repeats among the new
        ones; nothing is committed.
    """
    index, names = Path(index), list(old["segments"])
    deletes = read_deletes(index, old, names)
    if on_duplicate == "keep":
        return deletes, 0
    old_ids = segment_source_ids([index / SEGMENTS_DIR / n for n in names], deletes)
    new_ids = segment_source_ids([Path(tmp) / SEGMENTS_DIR / n for n in added])
    old_del, new_del, n = duplicate_deletes(old_ids, new_ids, on_duplicate, f"appending to {index}")
    if not n:
        return deletes, 0
    merged = [np.union1d(d, x).astype(np.int64) for d, x in zip(deletes, old_del)]
    return merged + new_del, n


def dedupe_build(tmp: Path, names: list, on_duplicate: str, where: str, counts: dict) -> dict | None:
    """Apply ``on_duplicate`` to a one-shot build's segments (written into ``tmp``) whose input repeats ids.

    Parameters
    ----------
    tmp : pathlib.Path
        The new index's directory, its segments under ``segments/`` and its ``terms.arrow`` written.
    names : list of str
        The segments, in document order.
    on_duplicate : {"error", "replace", "keep"}
    where : str
        The input, for the message.
    counts : dict
        The build's ``counts``; with ``"replace"`` and repeated ids, updated in place to the live documents.

    Returns
    -------
    dict or None
        None when nothing is deleted; else the manifest's fields that change (``deletes``, ``N``,
        ``avgdl``): the earlier copies of a repeated id are recorded as deleted (``deletes/``), the
        statistics and ``terms.arrow`` recounted over the live documents, so the index scores as a build of
        the input without them.

    Raises
    ------
    DuplicateIdError (ValueError)
        ``"error"`` and an id repeats in the input; nothing is committed.
    """
    if on_duplicate == "keep":
        return None
    folders = [Path(tmp) / SEGMENTS_DIR / n for n in names]
    _, deletes, n = duplicate_deletes([], segment_source_ids(folders), on_duplicate, where)
    if not n:
        return None
    spec = {}
    for name, d in zip(names, deletes):
        if len(d):
            spec[name] = f"{name}-g00000.npy"
            (Path(tmp) / "deletes").mkdir(exist_ok=True)
            np.save(Path(tmp) / "deletes" / spec[name], d, allow_pickle=False)
    heads = segment_heads(folders, deletes, ids=False)
    mt, recount = index_counts(heads, {})
    counts.update({k: recount[k] for k in ("n_docs", "n_terms", "n_postings", "n_tokens", "n_empty_docs")},
                  updated_docs=n)
    write_commit_terms(tmp, mt.vocab, mt.df[1:])
    return {"deletes": spec, "N": mt.n_docs, "avgdl": mt.avgdl}


def _type_family(t: pa.DataType) -> str:
    """The family of a kept column's Arrow type: types of one family (and integers with floats) unify
    without changing what a filter compares; ``null`` (a column with no value) joins any."""
    for fam, test in (("null", pa.types.is_null), ("bool", pa.types.is_boolean), ("number", pa.types.is_integer),
                      ("number", pa.types.is_floating), ("number", pa.types.is_decimal),
                      ("string", pa.types.is_string), ("string", pa.types.is_large_string),
                      ("binary", pa.types.is_binary), ("binary", pa.types.is_large_binary),
                      ("date", pa.types.is_date), ("timestamp", pa.types.is_timestamp)):
        if test(t):
            return fam
    return str(t)


def check_kept_types(index: Path, names: list, tmp: Path, added: list) -> None:
    """Refuse an append whose kept columns (``keep_columns=``) have types that cannot be compared with the
    index's: a string column where the index holds numbers, say, would make every later ``filter=`` of the
    column fail.  Integers and floats mix (a filter compares them as numbers; a compaction unifies them as
    ``pa.concat_tables(promote_options="permissive")`` does), and an all-null column joins any type.

    Parameters
    ----------
    index : pathlib.Path
        The index; its segments ``names`` hold the kept columns so far.
    names : list of str
        The index's segments.
    tmp, added
        The new commit's directory and the segments an append wrote into it.

    Raises
    ------
    ValueError
        A kept column whose type in the new documents cannot be compared with its type in the index (the
        column and both types named); nothing is committed.
    """
    def schemas(folders):
        out = []
        for f in folders:
            p = Path(f) / "columns.parquet"
            if p.exists():
                out.append(pq.read_schema(p))
        return out

    def families(schemas_):
        fam = {}
        for sch in schemas_:
            for field in sch:
                f = _type_family(field.type)
                if f != "null":
                    fam.setdefault(field.name, (f, field.type))
        return fam

    have = families(schemas([Path(index) / SEGMENTS_DIR / n for n in names]))
    new = schemas([Path(tmp) / SEGMENTS_DIR / n for n in added])
    for sch in new:
        for field in sch:
            f = _type_family(field.type)
            if f == "null" or field.name not in have or have[field.name][0] == f:
                continue
            raise ValueError(f"{index}: kept column {field.name!r} is {have[field.name][1]} in the index but "
                             f"{field.type} in the new documents; a filter could not compare them, so nothing was "
                             f"appended (convert the column in the input to {have[field.name][1]})")
