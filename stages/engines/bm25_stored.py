"""Stored fields of a loaded BM25 index: source ids, texts, kept columns, filters and phrase matches
(a mixin of :class:`cutext.stages.engines.bm25_index.BM25Index`).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from cutext.kernels.backend import to_host
from cutext.kernels.termhash import TermHash
from cutext.stages.engines import phrases as phrase_stage
from cutext.stages.engines import search as search_stage
from cutext.stages.engines import search_input, segments
from cutext.stages.engines.index_ids import source_id_list
from cutext.stages.runtime import artifacts as art
from cutext.stages.runtime.params import param
from cutext.stages.text.tokenize import (
    token_positions,
)


class StoredFields:
    """The stored side of :class:`cutext.stages.engines.bm25_index.BM25Index` (Lucene's stored fields and doc
    values): documents by source id, their texts, the kept columns, and the filters and phrase matches built
    from them.  A mixin: the index object holds the attributes these methods read."""

    # -- documents
    def _no_text(self) -> str:
        if self.meta.get("index_format", 1) != 2:
            return (f"{self.path}: a format-1 index stores no document text; rebuild it with store_text=True "
                    "(segmented, the default index_format=2)")
        return (f"{self.path}: this index stores no document text; build it with store_text=True "
                "(python -m cutext.pipelines bm25 ... --store-text)")

    def doc_ids(self, source_ids) -> np.ndarray:
        """The doc ids (0..N-1) of documents given by their source ids.

        Parameters
        ----------
        source_ids : str or iterable of str
            Source ids as search results give them, exactly (a non-str is refused, not converted:
            :func:`cutext.stages.engines.index_ids.source_id_list`).  Of equal source ids in the index (an
            append with ``on_duplicate="keep"``) the first document is taken.

        Returns
        -------
        numpy int64 array, shape (len(source_ids),) (1 for one str)

        Raises
        ------
        KeyError
            A source id that is not in the index (up to five named).
        """
        if self._id_index is None:
            ids = pd.Index(self.source_ids, dtype=object)
            first = ~ids.duplicated(keep="first")  # equal ids after an append: the first document answers
            self._id_index, self._id_pos = ids[first], np.flatnonzero(first).astype(np.int64)
        wanted = source_id_list(source_ids)
        pos = self._id_index.get_indexer(wanted)
        if (pos < 0).any():
            missing = [w for w, p in zip(wanted, pos) if p < 0]
            raise KeyError(f"{len(missing)} source id(s) not in the index {self.path}, e.g. {missing[:5]}")
        return self._id_pos[pos]

    def _segment_texts(self, s: int) -> pa.Array:
        """The live texts of segment ``s``, read at the first use and kept."""
        if s not in self._texts_cache:
            folders, deletes, _ = self._text_segments
            t = segments.read_segment_texts(folders[s], deletes[s])
            if t is None:
                raise ValueError(f"{folders[s]}: this segment stores no document text; " + self._no_text())
            self._texts_cache[s] = t
        return self._texts_cache[s]

    def texts_at(self, doc_ids) -> pa.Array:
        """The texts of documents given by doc id, read from the segments that hold them.

        Parameters
        ----------
        doc_ids : integer array, shape (n,)
            In ``[0, N)``, any order, repeats allowed.

        Returns
        -------
        pyarrow.LargeStringArray, shape (n,)
            The texts as read at the build (``text_column=`` lists joined by a space, invalid UTF-8
            replaced by U+FFFD).

        Raises
        ------
        ValueError
            The index stores no text (the message names ``store_text=True``), or a doc id out of range.
        """
        if not self.store_text:
            raise ValueError(self._no_text())
        d = np.asarray(doc_ids, np.int64).ravel()
        if d.size and (d.min() < 0 or d.max() >= self.n_docs):
            raise ValueError(f"doc ids must be in [0, {self.n_docs}), got {int(d[(d < 0) | (d >= self.n_docs)][0])}")
        if not d.size:
            return pa.array([], pa.large_string())
        base = self._text_segments[2]
        seg = np.searchsorted(base, d, side="right") - 1
        order = np.argsort(seg, kind="stable")  # gathered segment by segment, then put back in order
        cuts = np.flatnonzero(np.diff(seg[order])) + 1
        parts = [self._segment_texts(int(seg[g[0]])).take(pa.array(d[g] - base[seg[g[0]]]))
                 for g in np.split(order, cuts)]
        back = np.empty(len(d), np.int64)
        back[order] = np.arange(len(d), dtype=np.int64)
        return pa.concat_arrays(parts).take(pa.array(back))

    def doc(self, source_id) -> str:
        """The text of the document with this source id (Pyserini's ``doc(docid).raw()``).

        Parameters
        ----------
        source_id : str
            As search results give it.

        Returns
        -------
        str

        Raises
        ------
        KeyError
            ``source_id`` is not in the index (a deleted document is not).
        ValueError
            The index stores no text: build it with ``store_text=True``.
        """
        if not self.store_text:
            raise ValueError(self._no_text())
        return self.texts_at(self.doc_ids([source_id]))[0].as_py()

    def docs(self, source_ids) -> list:
        """The texts of documents given by their source ids, in the order given (:meth:`doc` of each).

        Returns
        -------
        list of str, len(source_ids)

        Raises
        ------
        KeyError, ValueError
            As :meth:`doc`.
        """
        if not self.store_text:
            raise ValueError(self._no_text())
        ids = [source_ids] if isinstance(source_ids, str) else list(source_ids)
        return self.texts_at(self.doc_ids(ids)).to_pylist()

    # -- kept columns and filters
    def _not_kept(self, names) -> str:
        how = (f"build the index with {param('keep_columns', list(names))} (python -m cutext.pipelines bm25 ... "
               + " ".join(f"--keep-column {n}" for n in names) + ")")
        if self.meta.get("index_format", 1) != 2:
            return (f"{self.path}: a format-1 index keeps no column; rebuild it (segmented, the default "
                    f"index_format=2) and {how}")
        kept = self.keep_columns
        return (f"{self.path}: column(s) {list(names)} not kept in this index (kept: {kept or 'none'}); "
                f"to filter by them, {how}")

    def column_table(self) -> pa.Table:
        """The kept columns of every live document (``keep_columns=`` of the build), read from the segments
        at the first call and kept.

        Returns
        -------
        pyarrow.Table, N rows (row = doc id), the kept columns; their types unified across segments
            (``promote_options="permissive"``: an int column of one segment and a double of another are double).

        Raises
        ------
        ValueError
            The index keeps no column (the message names ``keep_columns=``), or segments whose types of a
            column cannot be unified (strings in one, numbers in another).
        """
        if not self.keep_columns:
            raise ValueError(f"{self.path}: this index keeps no column; build it with "
                             f"{param('keep_columns', ['date', 'category'])} (python -m cutext.pipelines bm25 ... "
                             "--keep-column date --keep-column category)")
        if self._columns is None:
            folders, deletes, _ = self._text_segments
            parts = [segments.read_segment_columns(f, d) for f, d in zip(folders, deletes)]
            if any(t is None for t in parts):
                bad = [str(f) for f, t in zip(folders, parts) if t is None][:3]
                raise art.ArtifactError(f"{self.path}: index.json keeps {self.keep_columns} but segment(s) {bad} "
                                        "hold no columns.parquet")
            try:
                table = pa.concat_tables(parts, promote_options="permissive").combine_chunks()
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise ValueError(f"{self.path}: the kept columns have types that differ between segments "
                                 f"({exc})") from None
            if table.num_rows != self.n_docs:
                raise art.ArtifactError(f"{self.path}: {table.num_rows} rows of kept columns for N={self.n_docs}")
            self._columns = table
        return self._columns

    def doc_filter(self, filter, n_queries: int):
        """A search filter as the engines take it (:class:`cutext.stages.engines.search.DocFilter`).

        Parameters
        ----------
        filter : pyarrow.compute.Expression, bool array (N,) or list of n_queries lists of source ids
            An expression over the kept columns (``pc.field("category") == "sci"``; a null result
            excludes the document), a boolean mask over the doc ids (numpy, a list or anything
            ``numpy.asarray`` takes, cupy included), or per query the source ids it may return (ids not
            in the index match nothing, as a terms filter; every document of a repeated id matches).
        n_queries : int

        Returns
        -------
        DocFilter or None (None for ``filter=None``)

        Raises
        ------
        ValueError
            An expression on a column that is not kept (the message names it and ``keep_columns=``) or that
            is not boolean; an expression that compares a column with a value of another kind, a set lookup
            included, or with a null or NaN literal (:func:`cutext.stages.engines.search_input.check_filter_types`:
            the message names the column, its type and the value's); a mask of another length than N;
            per-query lists whose number is not ``n_queries`` or that hold an id that is not a string (an int
            is never converted: the message names it); a filter of another type.
        TypeError
            A per-query entry that is a single string (a list of ids is needed).
        """
        import pyarrow.dataset as ds

        if filter is None:
            return None
        if isinstance(filter, pc.Expression):
            # without kept columns an empty table names the expression's first column in pyarrow's error
            table = self.column_table() if self.keep_columns else pa.table({"": pa.nulls(0)})
            try:
                got = ds.dataset(table).to_table(columns={"allowed": filter}).column("allowed")
            except pa.ArrowInvalid as exc:
                names = re.findall(r"FieldRef\.Name\(([^)]*)\)", str(exc))
                if names:
                    raise ValueError("filter: " + self._not_kept(names)) from None
                detail = (str(exc).splitlines() or [type(exc).__name__])[0]
                raise ValueError(f"filter {search_input.expression_text(filter)}: {detail}") from None
            except (pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:  # no kernel for the types compared
                raise search_input.type_error(filter, table.schema, exc) from None
            if not self.keep_columns:  # an expression of no column (pc.scalar(True)): column_table's message
                self.column_table()
            search_input.check_filter_types(filter, table.schema)  # what Arrow casts or answers with nothing
            if not pa.types.is_boolean(got.type):
                raise ValueError(f"filter {search_input.expression_text(filter)} gives {got.type} values; a filter "
                                 "must be a boolean expression (a comparison such as pc.field('year') >= 2000)")
            return search_stage.DocFilter(mask=got.fill_null(False).to_numpy(zero_copy_only=False).astype(bool))
        if isinstance(filter, (list, tuple)) and filter and all(
                not isinstance(x, (bool, np.bool_, str)) and hasattr(x, "__iter__") for x in filter):
            return self._id_filter(filter, n_queries)
        if isinstance(filter, (str, dict)):
            raise ValueError(f"filter must be a pyarrow expression, a boolean mask over the {self.n_docs} documents "
                             f"or a list of allowed source ids per query, got {type(filter).__name__}")
        mask = np.asarray(to_host(filter))  # a cupy or cudf mask comes to the host (the engines cut it per shard)
        if mask.dtype != np.bool_:
            raise ValueError(f"filter: a mask must be boolean (got dtype {mask.dtype}); a per-query filter is a list "
                             "of lists of source ids, one a query")
        if mask.shape != (self.n_docs,):
            raise ValueError(f"filter: a mask needs one entry a document, shape ({self.n_docs},); got {mask.shape}")
        return search_stage.DocFilter(mask=np.ascontiguousarray(mask))

    def _id_filter(self, lists, n_queries: int):
        """:meth:`doc_filter` of per-query lists of source ids: doc ids sorted within a query (an Arrow hash
        lookup of the ids; where the index holds a source id twice, a merge, so each of its documents is
        allowed)."""
        if len(lists) != n_queries:
            raise ValueError(f"filter: per-query lists of source ids need one list a query: {len(lists)} lists "
                             f"for {n_queries} queries")
        for i, x in enumerate(lists):
            if isinstance(x, (str, bytes)):
                raise TypeError(f"filter: entry {i} is a string; each query's entry is a list of source ids")
        lists = [x if isinstance(x, list) else list(x) for x in lists]
        search_input.check_source_id_lists(lists)  # strings only: an id is compared as the caller wrote it
        nested = pa.array(lists, pa.list_(pa.string()))
        ids = nested.flatten()
        rows = np.repeat(np.arange(len(lists), dtype=np.int64), pc.list_value_length(nested).to_numpy())
        known = self._source_ids_arrow()
        if getattr(self, "_ids_unique", None) is None:
            self._ids_unique = pc.count_distinct(known).as_py() == len(known)
        if self._ids_unique:  # a hash lookup in Arrow (10k queries x 188 ids: 0.12 s; a pandas merge took 1.8)
            pos = pc.index_in(ids, value_set=known).fill_null(-1).to_numpy()
            rows, docs = rows[pos >= 0], pos[pos >= 0].astype(np.int64)
        else:  # an id held by several documents (appended again) allows each of them
            given = pd.DataFrame({"row": rows, "sid": ids.to_pandas()})
            m = given.merge(pd.DataFrame({"sid": pd.Series(self.source_ids, dtype=object),
                                          "doc": np.arange(self.n_docs, dtype=np.int64)}), on="sid", how="inner")
            rows, docs = m["row"].to_numpy(np.int64), m["doc"].to_numpy(np.int64)
        key = np.sort(rows * max(self.n_docs, 1) + docs)  # by query, then doc (a sort: numpy's unique hashes)
        key = key[np.concatenate([[True], key[1:] != key[:-1]])] if len(key) else key  # repeats dropped
        rows, docs = key // max(self.n_docs, 1), key % max(self.n_docs, 1)
        ptr = np.zeros(len(lists) + 1, np.int64)
        np.cumsum(np.bincount(rows, minlength=len(lists)), out=ptr[1:])
        return search_stage.DocFilter(ptr=ptr, docs=docs)

    def phrase_filter(self, phrase_lists: list, texts: list, doc_filter=None):
        """The documents each query may return given its phrases
        (:func:`cutext.stages.engines.phrases.parse_queries`), as one
        :class:`cutext.stages.engines.search.DocFilter` of per-query sorted doc lists, intersected with the
        user's ``doc_filter`` (a mask or lists; None: none).

        A query with phrases may return the documents that match every one of them
        (:func:`cutext.stages.engines.phrases.match_phrase`; a phrase with a term not in the index matches
        nothing, one whose words are all dropped by the tokenizer constrains nothing, as Lucene's parser drops
        an empty phrase); a query without one, the documents that hold one of its terms (the only ones with a
        positive score, so its result is the one without phrases in the batch).

        Parameters
        ----------
        phrase_lists : list (n_queries,) of lists of Phrase
        texts : list (n_queries,) of str, the queries' BM25 texts (quotes and ``~N`` removed)
        doc_filter : DocFilter or None

        Returns
        -------
        DocFilter (ptr int64 (n_queries + 1,), docs int64)

        Raises
        ------
        ValueError
            The index stores no positions (the message names ``positions=True`` and ``--positions``).
        """
        if not self.positions:
            raise ValueError(phrase_stage.no_positions_message(self.path))
        if self._phrase_index is None:
            folders, deletes, _ = self._text_segments
            self._phrase_index = phrase_stage.PhraseIndex.load(folders, deletes)
        px = self._phrase_index
        flat = [ph for lst in phrase_lists for ph in lst]
        tokens, row, pos = token_positions([ph.text for ph in flat], self.tokenizer)
        if self._term_hash is None:
            self._term_hash = TermHash(self.vocab)
        ids = self._term_hash.lookup(tokens) if len(tokens) else np.zeros(0, np.int64)
        cut = np.searchsorted(row, np.arange(len(flat) + 1))
        Q = self.query_matrix(texts)
        out, k = [], 0
        for q, lst in enumerate(phrase_lists):
            allowed = None
            for _ in lst:
                a, e = cut[k], cut[k + 1]
                slop = flat[k].slop
                k += 1
                if a == e:  # every word dropped by the tokenizer: no constraint
                    continue
                got = phrase_stage.match_phrase(px, ids[a:e], pos[a:e] - pos[a], slop)
                allowed = got if allowed is None else np.intersect1d(allowed, got, assume_unique=True)
            if allowed is None:  # no phrase constraint: the documents holding a query term
                terms = Q.indices[Q.indptr[q]:Q.indptr[q + 1]]
                allowed = (np.unique(np.concatenate([px.doc[px.indptr[t]:px.indptr[t + 1]] for t in terms]))
                           .astype(np.int64) if len(terms) else np.zeros(0, np.int64))
            if doc_filter is not None:
                if doc_filter.mask is not None:
                    allowed = allowed[doc_filter.mask[allowed]]
                else:
                    allowed = np.intersect1d(allowed, doc_filter.docs[doc_filter.ptr[q]:doc_filter.ptr[q + 1]],
                                             assume_unique=True)
            out.append(allowed.astype(np.int64))
        ptr = np.zeros(len(out) + 1, np.int64)
        np.cumsum([len(x) for x in out], out=ptr[1:])
        docs = np.concatenate(out) if out else np.zeros(0, np.int64)
        return search_stage.DocFilter(ptr=ptr, docs=docs)
