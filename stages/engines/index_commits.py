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
segment (Lucene's ``forceMerge(1)``).
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cutext.kernels._version import __version__
from cutext.stages.engines.segments import (live_positions, live_segment, merge_positions, merge_segments,
                                            merge_terms, read_positions, read_segment, read_segment_columns,
                                            read_segment_texts, segment_heads, write_segment)
from cutext.stages.runtime import artifacts as art
from cutext.stages.runtime.output import OutputBusyError, atomic_directory, write_json

__all__ = ["SEGMENTS_DIR", "read_deletes", "commit_segments", "read_commit", "segmented_commit", "commit_deletion",
           "commit_compaction", "write_commit", "index_counts", "link_segments", "write_index_manifest"]

SEGMENTS_DIR = "segments"
KIND = "cutext.bm25"


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
            d = np.load(f, allow_pickle=False)
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
    try:
        raw = (index / "index.json").read_bytes()
    except FileNotFoundError:
        raw = b""
    old = art.read_manifest(index, "index.json", KIND, "a cutext BM25 index", verify=False)
    if json.loads(raw or b"null") != old:
        raise OutputBusyError(f"{index} was committed by another writer while this run read it; nothing was "
                              "written (run it again)")

    def expect(out: Path) -> None:
        try:
            now = (Path(out) / "index.json").read_bytes()
        except FileNotFoundError:
            now = b""
        if now != raw:
            raise OutputBusyError(f"{index} was changed by another writer (generation {old.get('generation', 0)}"
                                  f" -> {_generation(now)}) while this run worked on it; this run wrote "
                                  "nothing (run it again on the new commit)")
    return old, expect


def _generation(raw: bytes):
    try:
        return json.loads(raw).get("generation", 0)
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


def write_commit(tmp: Path, index: Path, old: dict, names: list, deletes: list, extra: dict,
                 new=None, added: list = (), timings: dict | None = None, fields: dict | None = None) -> dict:
    """Write a commit into ``tmp`` and return its manifest's ``counts``.

    The commit lists the segments ``names`` of ``index`` (hard links) with their ``deletes``, then the
    segments ``added`` (already written into ``tmp/segments``, e.g. by an append's writers), then ``new``
    (``(name, write_segment arguments)``, written here); the manifest's statistics are recounted from them.
    ``extra`` goes to :func:`index_counts` (``replaced``, ``input_bytes`` and counts of the operation),
    ``timings`` (seconds per step) and ``fields`` (``backend``, ``scheduler``, ``n_workers`` of the run)
    into the manifest; the other settings are the earlier commit's.
    """
    timings = {} if timings is None else timings
    gen = int(old.get("generation", 0)) + 1
    link_segments(index, tmp, names)
    spec = {}
    for n, d in zip(names, deletes):
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
    heads = segment_heads([tmp / SEGMENTS_DIR / n for n in segs],
                          list(deletes) + [np.zeros(0, np.int64)] * (len(segs) - len(deletes)), ids=False)
    mt, counts = index_counts(heads, old, **extra)
    keep = {k: old[k] for k in ("variant", "k1", "b", "delta", "tokenizer", "format", "source", "backend",
                                "scheduler", "n_workers", "store_text", "bm25f", "keep_columns", "positions")
                if k in old}
    next_segment = int(old.get("next_segment", len(old["segments"]))) + len(added) + (new is not None)
    # writers that numbered their segments by their input pieces may leave gaps: never reuse a number
    numbers = [int(n.rsplit("-", 1)[1]) for n in segs if n.rsplit("-", 1)[-1].isdigit()]
    next_segment = max([next_segment] + [x + 1 for x in numbers])
    write_index_manifest(tmp, {"index_format": 2, "segments": segs, "deletes": spec, "generation": gen,
                               "next_segment": next_segment, "N": mt.n_docs, "avgdl": mt.avgdl, **keep,
                               **(fields or {}), "counts": counts, "timings": timings})
    return counts


def commit_deletion(index, source_ids) -> dict:
    """Delete documents from a segmented index by their source ids: a new commit that records them.

    Each segment's deleted local documents go to ``deletes/`` and are listed in the new commit (the
    segments are hard-linked into it); a load drops them, so the index scores as a one-shot build of the
    remaining documents (N, avgdl and df recounted).

    Parameters
    ----------
    index : str or os.PathLike
        A segmented index.
    source_ids : iterable of str
        The ``source_id`` of each document to delete; each must be in the index and not deleted yet.

    Returns
    -------
    dict
        The new commit's ``counts`` (with ``deleted_docs``).

    Raises
    ------
    ArtifactError (ValueError)
        Not a segmented cutext bm25 index, or a damaged one.
    ValueError
        Source ids that are not in the index (up to five named), or none given; nothing is written.
    OutputBusyError
        Another writer committed to the index meanwhile; nothing is written.
    """
    index = Path(index)
    old, expect = segmented_commit(index, "deleting documents")
    wanted = pa.array(sorted({str(x) for x in source_ids}), pa.string())
    if not len(wanted):
        raise ValueError(f"{index}: no source id given to delete")
    names = old["segments"]
    found = np.zeros(len(wanted), bool)
    new_deletes = []
    for n, d in zip(names, read_deletes(index, old, names)):
        ids = read_segment(index / SEGMENTS_DIR / n, verify=False, postings=False).source_ids.cast(pa.string())
        hit = pc.is_in(ids, value_set=wanted).to_numpy(zero_copy_only=False)
        hit[d] = False  # deleted before: not there any more
        found[pc.index_in(ids.filter(pa.array(hit)), value_set=wanted).to_numpy()] = True
        new_deletes.append(np.union1d(d, np.flatnonzero(hit)).astype(np.int64))
    if not found.all():
        missing = wanted.filter(pa.array(~found)).to_pylist()
        raise ValueError(f"{index}: {len(missing)} source id(s) not in the index (or already deleted), e.g. "
                         f"{missing[:5]}; nothing was deleted")
    with atomic_directory(index, kind=KIND, manifest="index.json", expect=expect) as tmp:
        return write_commit(tmp, index, old, names, new_deletes, {"deleted_docs": int(len(wanted))})


def commit_compaction(index) -> dict:
    """Rewrite a segmented index as one segment without its deleted documents (Lucene's ``forceMerge(1)``).

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
    segs = [live_segment(read_segment(index / SEGMENTS_DIR / n), d) for n, d in zip(names, deletes)]
    merged = merge_segments(segs)
    segs_for_positions = segs if old.get("positions") is True else None
    del segs
    name = f"seg-{int(old.get('next_segment', len(names))):05d}"
    staged = {"terms": merged.vocab, "df": merged.df[1:], "doc": merged.doc, "tf": merged.tf,
              "lengths": merged.lengths, "source_ids": merged.source_ids}
    if merged.fields:  # a BM25F index keeps its per-field tf and lengths
        staged.update(fields=merged.fields, field_tf=merged.field_tf, field_lengths=merged.field_lengths)
    texts = [read_segment_texts(index / SEGMENTS_DIR / n, d) for n, d in zip(names, deletes)]
    if texts and all(t is not None for t in texts):
        staged["texts"] = pa.concat_arrays(texts)
    del texts
    kept = [read_segment_columns(index / SEGMENTS_DIR / n, d) for n, d in zip(names, deletes)]
    if kept and all(t is not None for t in kept):  # the kept columns, their types unified across segments
        staged["columns"] = pa.concat_tables(kept, promote_options="permissive")
    del kept
    if old.get("positions") is True:  # the term positions move with their postings
        staged["positions"] = _merged_positions(index, names, deletes, segs_for_positions, merged)
    with atomic_directory(index, kind=KIND, manifest="index.json", expect=expect) as tmp:
        return write_commit(tmp, index, old, [], [], {"compacted_segments": len(names)}, new=(name, staged))


def _merged_positions(index: Path, names: list, deletes: list, segs: list, merged) -> np.ndarray:
    """The term positions of a compaction's merged postings: each segment's live postings' positions
    (:func:`cutext.stages.engines.segments.read_positions`), moved as :func:`merge_segments` moved the postings."""
    pos = []
    for n, d, seg in zip(names, deletes, segs):
        full = read_segment(index / SEGMENTS_DIR / n, verify=False)
        p = read_positions(index / SEGMENTS_DIR / n, full.tf)
        d = np.unique(np.asarray(d, np.int64))
        if len(d):
            live = np.ones(full.n_docs, bool)
            live[d] = False
            p = live_positions(p, full.tf, live[full.doc])
        pos.append(p)
    return merge_positions(segs, pos, merged)
