"""The reader of a segmented BM25 index: a commit as a list of per-segment readers (Lucene's
``DirectoryReader`` of ``SegmentReader`` s, Tantivy's ``Searcher`` of ``SegmentReader`` s).

A :class:`SegmentReader` is one segment of a commit, read and checked once, its deletions applied (the live
documents renumbered in order, :func:`cutext.stages.engines.segments.live_segment`); it is immutable, keyed
by the segment's name and its deletion file, and shared by the readers of later commits that list the same
pair.  An :class:`IndexReader` is a commit: its manifest, its segment readers in order and the global
statistics summed across them (N, the sum of lengths, the vocabulary and df: Lucene's
``collectionStatistics`` / ``termStatistics``), from which every score follows.

:meth:`IndexReader.refresh` (Lucene's ``DirectoryReader.openIfChanged``, Tantivy's ``IndexReader::reload``)
returns the reader of the index's newest commit, reusing every segment reader whose segment and deletions
are unchanged: only new segments and segments with new deletions are read and verified, so a refresh after
an append reads the appended segments alone.  The global vocabulary is the commit's kept ``terms.arrow``
(:func:`cutext.stages.engines.index_commits.read_commit_terms`); each segment's terms are found in it by one
merge pass over the two sorted lists (:func:`cutext.kernels.postings.sorted_term_ids`) and the df the
segments hold is checked against it, so no hash table of all the segments' terms is built (an index
without the file takes :func:`cutext.stages.engines.segments.merge_terms`).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from cutext.kernels.postings import sorted_term_ids
from cutext.stages.engines import segments
from cutext.stages.engines.index_commits import (
    SEGMENTS_DIR,
    TERMS_FILE,
    commit_segments,
    manifest_bytes,
    read_commit_terms,
)
from cutext.stages.engines.index_manifest import read_index_manifest
from cutext.stages.runtime import artifacts as art
from cutext.stages.runtime import checksums
from cutext.stages.runtime.output import OutputBusyError

__all__ = ["SegmentReader", "IndexReader"]


@dataclass(frozen=True)
class SegmentReader:
    """One segment of a commit, read once with its postings and source ids, deletions applied.

    Attributes
    ----------
    name : str
        The segment's folder under ``segments/``.
    deletes : str or None
        Its deletion file under ``deletes/`` in the commit (None: no deletion); with ``name`` the key under
        which later commits reuse this reader.
    segment : cutext.stages.engines.segments.Segment
        The live documents (renumbered in order) and their postings.
    deleted : numpy int64 array
        The deleted local doc numbers (as written, before renumbering), ascending.
    derived : tuple or None
        ``(earlier segment, bool mask of its terms kept)`` when derived in memory from an earlier reader's
        segment with fewer deletions: a refresh takes its global term ids from the earlier ones.
    """

    name: str
    deletes: str | None
    segment: segments.Segment
    deleted: np.ndarray
    derived: tuple | None = field(default=None, compare=False, repr=False)

    @property
    def live_docs(self) -> np.ndarray:
        """int64 (n_live,): the written local doc number of each live document."""
        n = int(self.segment.meta.get("n_docs", self.segment.n_docs + len(self.deleted)))
        keep = np.ones(n, bool)
        keep[self.deleted] = False
        return np.flatnonzero(keep)

    @property
    def key(self) -> tuple:
        return self.name, self.deletes


def _read(path: Path, name: str, deletes_file, deleted: np.ndarray, earlier: SegmentReader | None,
          postings: bool = True) -> SegmentReader:
    """The segment reader of ``name`` with ``deleted``: derived in memory from ``earlier`` (the same segment
    with fewer deletions, read with its postings) when given, else read from its files (without the postings
    when not ``postings`` and nothing is deleted)."""
    deleted = np.unique(np.asarray(deleted, np.int64))
    try:
        if earlier is not None and earlier.segment.doc is not None and np.isin(earlier.deleted, deleted).all():
            gone = np.setdiff1d(deleted, earlier.deleted)
            seg, held = segments.live_segment(earlier.segment, np.searchsorted(earlier.live_docs, gone),
                                              with_held=True)
            return SegmentReader(name, deletes_file, seg, deleted, (earlier.segment, held))
        else:
            seg = segments.read_segment(path / SEGMENTS_DIR / name, verify=False, postings=postings or len(deleted) > 0)
            seg = segments.live_segment(seg, deleted)
    except ValueError as exc:
        raise art.ArtifactError(f"{path / 'index.json'}: deletions of {name!r}: {exc}") from None
    return SegmentReader(name, deletes_file, seg, deleted)


def _threads(n: int) -> int:
    return max(1, min(n, os.cpu_count() or 1))


class IndexReader:
    """A commit of a segmented index: its segment readers and the global statistics summed across them.

    Attributes
    ----------
    path : pathlib.Path
    meta : dict
        The commit's ``index.json``.
    raw : bytes
        Its bytes (a refresh compares them to find a new commit).
    segments : list of SegmentReader
        In commit order.
    terms : cutext.stages.engines.segments.MergedTerms
        N, sum of lengths, vocabulary, df, doc bases and each segment's global term ids.
    reused : int
        Segment readers taken over from the reader this one was refreshed from (0 for an open).
    postings : bool
        False: the segments without deletions were read without their postings (``doc`` and ``tf`` None;
        a GPU load decodes them on the device from the files).
    """

    def __init__(self, path: Path, meta: dict, raw: bytes, readers: list, terms, reused: int = 0,
                 postings: bool = True):
        self.path, self.meta, self.raw = Path(path), meta, raw
        self.segments, self.terms, self.reused, self.postings = readers, terms, reused, postings

    @property
    def generation(self) -> int:
        return int(self.meta.get("generation", 0))

    def __repr__(self) -> str:
        return (f"IndexReader(generation={self.generation}, segments={len(self.segments)}, "
                f"N={self.terms.n_docs:,}, V={len(self.terms.vocab):,}, path={str(self.path)!r})")

    @classmethod
    def open(cls, path, *, verify: bool = True, previous: "IndexReader | None" = None,
             postings: bool = True) -> "IndexReader":
        """The reader of the index's current commit.

        Parameters
        ----------
        path : str or os.PathLike
            A segmented index (``index_format`` 2).
        verify : bool, default True
            Check the size and CRC32 of the files read (all of them for an open; with ``previous``, those
            of the segments and deletions it does not hold, and ``terms.arrow``), and the manifest's own.
        previous : IndexReader, optional
            A reader of an earlier commit of the same index: its segment readers are reused where the
            segment and its deletions are unchanged.
        postings : bool, default True
            False: a segment without deletions is read without its postings (its terms, df, lengths and ids
            only; :attr:`postings`).

        Raises
        ------
        ArtifactNotFoundError, ArtifactError
            Not a cutext index, a damaged manifest or segment (the file named), or an index that is not
            segmented.
        OutputBusyError
            Other writers committed five times while it was read.
        """
        path = Path(path)
        for _ in range(_RETRIES):  # another writer's commit swapped in while reading: read the new one
            raw = manifest_bytes(path)
            try:
                reader = cls._open(path, raw, verify, previous, postings)
            except (art.ArtifactError, FileNotFoundError):
                if manifest_bytes(path) == raw:
                    raise
                continue
            if manifest_bytes(path) == raw:
                return reader
        raise OutputBusyError(f"{path}: committed to {_RETRIES} times while this reader read it; open it again")

    @classmethod
    def _open(cls, path: Path, raw: bytes, verify: bool, previous, postings: bool = True) -> "IndexReader":
        mf = path / "index.json"
        # a reader read without postings serves one that wants them only where they are held
        reuse = ({r.key: r for r in previous.segments if not postings or r.segment.doc is not None
                  or not r.segment.n_postings} if previous is not None else {})
        by_name = {r.name: r for r in previous.segments} if previous is not None else {}
        meta = read_index_manifest(path, verify=verify and not reuse)  # every field checked
        if meta.get("index_format", 1) != 2:
            raise art.ArtifactError(f"{mf}: not a segmented index (index_format 2)")
        folders, deletes = commit_segments(path, meta)
        names = list(meta["segments"])
        spec = meta.get("deletes") or {}
        keys = [(n, spec.get(n)) for n in names]
        if verify and reuse:  # the files this reader reads: new segments and deletions, the vocabulary
            _verify_some(path, meta, {k for k in keys if k not in reuse}, set(by_name))
        todo = [i for i, k in enumerate(keys) if k not in reuse]
        readers = [reuse.get(k) for k in keys]
        with ThreadPoolExecutor(_threads(len(todo))) as pool:
            for i, r in zip(todo, pool.map(lambda i: _read(path, names[i], keys[i][1], deletes[i],
                                                           by_name.get(names[i]), postings), todo)):
                readers[i] = r
        terms = _global_terms(path, meta, [r.segment for r in readers], _earlier(previous, readers))
        return cls(path, meta, raw, readers, terms, reused=len(readers) - len(todo), postings=postings)

    def refresh(self, verify: bool = True) -> "IndexReader":
        """The reader of the index's newest commit, or this one when nothing was committed since
        (Lucene's ``DirectoryReader.openIfChanged``): unchanged segments are not read again.

        Raises
        ------
        ArtifactNotFoundError, ArtifactError
            As :meth:`open`.
        """
        if manifest_bytes(self.path) == self.raw:
            return self
        return type(self).open(self.path, verify=verify, previous=self, postings=self.postings)


_RETRIES = 5


def _verify_some(path: Path, meta: dict, keys: set, held: set) -> None:
    """:func:`checksums.verify` of the files of the segments and deletions ``keys`` and of ``terms.arrow``
    only: of a segment in ``held`` (read before; its files are immutable) only the deletion file."""
    files = meta.get("files")
    if not isinstance(files, dict):
        raise art.ArtifactError(f"{path / 'index.json'}: records no file checksums; load it with verify=False")
    wanted = {TERMS_FILE}
    for name, dfile in keys:
        if name not in held:
            wanted.update(k for k in files if k.startswith(f"{SEGMENTS_DIR}/{name}/"))
        if dfile:
            wanted.add(f"deletes/{dfile}")
    subset = dict(meta, files={k: v for k, v in files.items() if k in wanted})
    try:
        checksums.verify(path, "index.json", subset, contents=True, listed_only=True)
        checksums.verify(path, "index.json", meta, contents=False)  # nothing unlisted beside them
    except checksums.MissingFileError as exc:
        raise art.ArtifactNotFoundError(str(exc)) from None
    except checksums.ChecksumError as exc:
        raise art.ArtifactError(str(exc)) from None


@dataclass(frozen=True)
class _Earlier:
    """What a refresh takes over from the reader of an earlier commit (:func:`_earlier`)."""

    vocab: pa.Array  # its vocabulary
    ids: list  # the global term ids in it of each live segment it held too, else None
    df: np.ndarray  # its df (V + 1,)
    gone: list  # (segment, its term ids) of its segments that are not live now
    derived: list = None  # the global term ids in it of each segment derived from one of its segments, else None


def _earlier(previous: "IndexReader | None", readers: list) -> _Earlier | None:
    """The :class:`_Earlier` of ``previous`` for the live segments of ``readers`` (a segment it holds too is the
    same object: a new deletion file without new deletions, which a later commit writes, keeps it); None
    without one."""
    if previous is None:
        return None
    at = {id(r.segment): g for r, g in zip(previous.segments, previous.terms.term_ids)}
    kept = {id(r.segment) for r in readers}
    gone = [(r.segment, g) for r, g in zip(previous.segments, previous.terms.term_ids) if id(r.segment) not in kept]
    derived = [at[id(r.derived[0])][r.derived[1]] if r.derived is not None and id(r.derived[0]) in at else None
               for r in readers]  # a segment's terms kept by its live documents: its earlier ids, filtered
    return _Earlier(previous.terms.vocab, [at.get(id(r.segment)) for r in readers], previous.terms.df, gone, derived)


def _term_ids(vocab, segs: list, earlier: _Earlier | None, same: bool) -> list:
    """The global term ids of each segment's terms in ``vocab``: a segment read for an earlier commit keeps
    its earlier ids, as they are when the vocabulary is the ``same``, else renumbered through one merge of the
    two vocabularies (:func:`sorted_term_ids`); the others are merged with ``vocab`` each."""
    old = earlier.ids if earlier is not None else [None] * len(segs)
    derived = (earlier.derived or [None] * len(segs)) if earlier is not None else [None] * len(segs)
    old = [g if g is not None else d for g, d in zip(old, derived)]
    ids = [None] * len(segs)
    if any(g is not None for g in old):
        if same:
            ids = list(old)
        else:
            renumber = np.concatenate([[0], sorted_term_ids(vocab, earlier.vocab)]).astype(np.int32)
            ids = [renumber[g] if g is not None else None for g in old]
    todo = [i for i in range(len(segs)) if ids[i] is None]
    with ThreadPoolExecutor(_threads(len(todo))) as pool:
        for i, g in zip(todo, pool.map(lambda i: sorted_term_ids(vocab, segs[i].terms), todo)):
            ids[i] = g
    return ids


def _global_terms(path: Path, meta: dict, segs: list, earlier: _Earlier | None = None) -> segments.MergedTerms:
    """The global statistics of a commit's live segments: the kept vocabulary and df when the commit has
    them and the segments agree with them (every live term found, the df summed equal), else the union of
    the segments' terms (:func:`segments.merge_terms`).  ``earlier``: :func:`_earlier`."""
    kept = read_commit_terms(path, meta)
    if kept is None and len(segs) == 1:  # one segment: its own vocabulary is the commit's
        s = segs[0]
        kept = s.terms.cast(pa.large_string()), s.df
    if kept is None:
        return segments.merge_terms(segs)
    vocab, df_kept = kept
    same = earlier is not None and earlier.vocab.equals(vocab)  # a commit that adds no term and drops none
    ids = _term_ids(vocab, segs, earlier, same)
    if same:  # the earlier df, less the segments gone, plus the new ones: O(change), checked below as a whole
        df = earlier.df.copy()
        for s, g in earlier.gone:
            df[g] -= s.df
    else:
        df = np.zeros(len(vocab) + 1, np.int64)
    for s, g, before in zip(segs, ids, earlier.ids if same else [None] * len(segs)):
        if before is not None:
            continue
        if len(g) and int(g.min()) == 0:  # a live term the kept vocabulary lacks
            return segments.merge_terms(segs)
        df[g] += s.df  # within a segment a term occurs once
    if not np.array_equal(df[1:], df_kept):
        return segments.merge_terms(segs)
    n = np.array([s.n_docs for s in segs], np.int64)
    doc_base = np.zeros(len(segs) + 1, np.int64)
    np.cumsum(n, out=doc_base[1:])
    sum_dl = sum(s.sum_dl for s in segs)
    nonempty = sum(int(np.count_nonzero(s.lengths)) for s in segs)
    return segments.MergedTerms(vocab, df, int(doc_base[-1]), sum_dl, doc_base, ids, segments._field_sums(segs),
                                nonempty)
