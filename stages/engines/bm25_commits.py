"""Commits made through a loaded BM25 index and its refresh: delete, compact, merge (new commits of
:mod:`cutext.stages.engines.index_commits` and :mod:`cutext.stages.engines.merge_policy`), then the object
refreshed to the newest commit (a mixin of :class:`cutext.stages.engines.bm25_index.BM25Index`).
"""
from __future__ import annotations

from cutext.stages.engines import index_commits, merge_policy


class IndexCommits:
    """The writer side of :class:`cutext.stages.engines.bm25_index.BM25Index` (Lucene's ``IndexWriter`` calls a
    reader's user makes, then ``DirectoryReader.openIfChanged``).  A mixin: the index object holds the
    attributes these methods read."""

    def delete(self, source_ids) -> int:
        """Delete documents by their source ids: a new commit of the index, then this index reloaded from it.

        The deletion is recorded, not rewritten (Lucene's deleteDocuments): every later load, and this
        object from now on, scores as a one-shot build of the remaining documents (N, avgdl and df
        recounted), and search never returns a deleted document.  :meth:`compact` rewrites the segments
        without them.  :func:`cutext.stages.engines.index_commits.commit_deletion`.

        Parameters
        ----------
        source_ids : str or iterable of str
            The ``source_id`` of each document to delete, exactly as stored; each must be in the index and
            live.

        Returns
        -------
        int
            The number of documents deleted (every live copy of an id counts).

        Raises
        ------
        ArtifactError (ValueError)
            A format-1 index (the message names the command that converts it), or a damaged one.
        ValueError
            Source ids that are not in the index or already deleted (up to five named), or none
            given; nothing is written.
        OutputBusyError (FileExistsError)
            Another writer committed to the index meanwhile; nothing is written.
        """
        counts = index_commits.commit_deletion(self.path, source_ids, reader=self._reader)
        self._reload()
        return int(counts["deleted_docs"])

    def compact(self) -> int:
        """Merge the index's segments into one without its deleted documents (Lucene's ``forceMerge(1)``):
        a new commit, then this index reloaded from it; scores and results are unchanged.
        :func:`cutext.stages.engines.index_commits.commit_compaction`.

        Returns
        -------
        int
            The number of segments merged.

        Raises
        ------
        ArtifactError (ValueError)
            A format-1 index, or a damaged one.
        OutputBusyError (FileExistsError)
            Another writer committed to the index meanwhile; nothing is written.
        """
        counts = index_commits.commit_compaction(self.path)
        self._reload()
        return int(counts["compacted_segments"])

    def merge(self, max_segments: int | None = None) -> int:
        """Merge runs of adjacent segments (the merge policy's, Lucene's ``maybeMerge``; with ``max_segments``,
        until at most that many remain, Lucene's ``forceMerge(n)``): a new commit, then this index reloaded
        from it; scores and results are unchanged.
        :func:`cutext.stages.engines.merge_policy.commit_merges`.

        Parameters
        ----------
        max_segments : int, optional
            At most this many segments afterwards (>= 1; 1 is :meth:`compact`); None: the merges of the
            policy (:func:`cutext.stages.engines.merge_policy.plan_merges`).

        Returns
        -------
        int
            The number of segments merged away (0: nothing to merge; nothing is written).

        Raises
        ------
        ArtifactError (ValueError)
            A format-1 index, or a damaged one.
        ValueError
            ``max_segments`` not an integer >= 1.
        OutputBusyError (FileExistsError)
            Another writer committed to the index meanwhile; nothing is written.
        """
        counts = merge_policy.commit_merges(self.path, max_segments)
        if counts["merged_segments"]:
            self._reload()
        return int(counts["merged_segments"])

    def refresh(self) -> IndexCommits:  # a BM25Index
        """The index as of its newest commit (Lucene's ``DirectoryReader.openIfChanged``, Tantivy's
        ``IndexReader::reload``): this object when nothing was committed since it was loaded, else a new
        one; this object keeps searching its own commit either way.

        A segmented index loaded in this process reuses every segment whose files and deletions are
        unchanged (:class:`cutext.stages.engines.index_reader.IndexReader`): only the new segments, and the
        segments with new deletions, are read and verified; the global statistics are summed again and, on
        the CPU, the segments are searched as they are with query-time weights (the unchanged ones' arrays
        taken over: :class:`cutext.stages.engines.segment_search.SegmentSearch`), else their postings are
        merged and weighted from memory.  An index loaded with a ``client`` or ``devices``, or of format 1,
        is loaded again whole.

        Returns
        -------
        BM25Index

        Raises
        ------
        ArtifactError, ArtifactNotFoundError
            The newest commit is damaged (the file named) or gone.
        """
        backend, client, verify, devices = getattr(self, "_load_args", (self.backend, self._client, True, None))
        if self._reader is None or client is not None or devices is not None:
            if self._reader is not None and index_commits.manifest_bytes(self.path) == self._reader.raw:
                return self
            fresh = type(self).load(self.path, backend=backend, client=client, verify=verify, devices=devices)
            return fresh if fresh.meta != self.meta else self
        reader = self._reader.refresh(verify=verify)
        if reader is self._reader:
            return self
        fresh = type(self)._from_reader(reader, backend, previous=self)
        fresh._load_args = (backend, client, verify, devices)
        return fresh

    def _reload(self) -> None:
        fresh = self.refresh()
        if fresh is self:
            return
        self.__dict__.clear()
        self.__dict__.update(fresh.__dict__)
