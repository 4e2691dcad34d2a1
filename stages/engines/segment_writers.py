"""The writers of a segment (:mod:`cutext.stages.engines.segments`' format): :func:`write_segment` from
its arrays, and the count stage's writers (a segment from a partition's counts or its text).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cutext.kernels.backend import array_module, is_gpu_object, to_host, values
from cutext.stages.engines.segment_format import (
    _ENCODINGS,
    _INT32_MAX,
    COLUMNS,
    COMPRESSION,
    DOCS,
    FIELDS_FORMAT,
    FORMAT,
    KIND,
    MANIFEST,
    POSTINGS,
    TERMS,
    TEXT,
    _check_in,
    _field_schema,
)
from cutext.stages.engines.segment_positions import write_positions
from cutext.stages.runtime import checksums
from cutext.stages.text.encode import sorted_terms, vocabulary_frame
from cutext.stages.text.tokens import WithDocIds, count_partition_summary, tokenize_partition_summary


def _as_strings(values, typ, what: str) -> pa.Array:
    """A pyarrow string array of type ``typ`` from pyarrow, pandas, cudf, numpy or a list."""
    values = to_host(values)
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not isinstance(values, pa.Array):
        values = pa.array(values.tolist() if isinstance(values, np.ndarray) else values)
    try:
        return values.cast(typ)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ValueError(f"{what}: not castable to {typ} ({exc})") from None


def text_array(texts) -> pa.Array:
    """Documents' texts as one pyarrow ``large_string`` array on the host, nulls made empty texts (as the
    tokenizer reads them).

    Parameters
    ----------
    texts : array of str, shape (n,)
        pyarrow (array or chunked), a pandas or cudf Series (cudf through ``.to_arrow()``: the device
        column is copied once, never through Python objects), a frame with a ``text`` column, numpy or
        a list.

    Returns
    -------
    pyarrow.LargeStringArray, shape (n,)

    Raises
    ------
    ValueError
        Values that are not strings.
    """
    if getattr(texts, "ndim", 1) == 2:  # a read partition: its text column
        texts = texts["text"]
    if is_gpu_object(texts):
        texts = texts.to_arrow()
    elif isinstance(texts, pd.Series):
        texts = pa.array(texts, type=pa.large_string(), from_pandas=True)
    out = _as_strings(texts, pa.large_string(), "texts")
    return out.fill_null("") if out.null_count else out


def _as_ints(values, what: str, device: bool = False):
    """A 1-d integer array from numpy, cupy, pandas, cudf or pyarrow (no copy where possible): numpy, or
    with ``device`` a cupy array stays one (cudf columns give their cupy array)."""
    if device and is_gpu_object(values):
        a = values.values if hasattr(values, "values") and not hasattr(values, "__cuda_array_interface__") else values
        if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
            raise ValueError(f"{what}: expected a 1-d integer array, got dtype {a.dtype} and shape {a.shape}")
        return a
    values = to_host(values)
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        values = values.to_numpy()
    a = np.asarray(values)
    if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise ValueError(f"{what}: expected a 1-d integer array, got dtype {a.dtype} and shape {a.shape}")
    return a


def _ascending_within_terms(doc: np.ndarray, offsets: np.ndarray) -> bool:
    """Whether ``doc`` strictly increases inside every term's run of postings."""
    if len(doc) < 2:
        return True
    xp = array_module(doc)
    up = doc[1:] > doc[:-1]
    starts = xp.asarray(offsets[1:-1])
    starts = starts[(starts > 0) & (starts < len(doc))]
    up[starts - 1] = True  # a term's first posting may be below the previous term's last
    return bool(up.all())


def _write_parquet(folder: Path, name: str, columns: dict, n_fields: int = 0) -> None:
    """``folder/name`` written under a temporary name and renamed; device (cupy) columns are encoded by
    cudf with the same encodings and codec, into host memory (then written through the page cache);
    ``n_fields``: the per-field columns of a BM25F segment, dictionary-coded as ``tf`` and ``length``."""
    dictionary, encoding = _ENCODINGS[name]
    if n_fields:
        dictionary = dictionary + [c for c in columns if c.startswith(("tf_", "length_"))]
    tmp = folder / f".{name}.tmp"
    if any(is_gpu_object(c) for c in columns.values()):
        import io

        import cudf

        enc = dict(encoding, **{c: "DICTIONARY" for c in dictionary})
        buf = io.BytesIO()
        cudf.DataFrame(columns).to_parquet(buf, index=False, compression=COMPRESSION.upper(), column_encoding=enc,
                                           statistics="NONE")
        with open(tmp, "wb") as fh:
            fh.write(buf.getbuffer())
        os.replace(tmp, folder / name)
        return
    table = pa.table(columns, schema=_field_schema(name, n_fields))
    # no statistics: min/max of local doc numbers or of terms prune nothing for a reader of whole files
    pq.write_table(table, tmp, use_dictionary=dictionary, column_encoding=encoding, compression=COMPRESSION,
                   write_statistics=False)
    os.replace(tmp, folder / name)


def write_segment(folder, terms, df, doc, tf, lengths, source_ids, texts=None, fields=None, field_tf=None,
                  field_lengths=None, columns=None, positions=None) -> dict:
    """Write one immutable segment (module docstring for the layout).

    Lucene's segment design (immutable segments, per-segment term dictionaries, tf and norms stored,
    scoring from global statistics).  Host arrays are written by pyarrow; cupy / cudf ``doc`` and ``tf``
    are checked on the device and their postings file encoded by cudf (the same encodings and codec,
    read back alike); terms and documents go through the host.

    Parameters
    ----------
    folder : str or os.PathLike
        The segment's folder: new, or an empty folder (segments are written once).
    terms : array of str, shape (n_terms,)
        pyarrow (string / large_string), pandas, cudf, numpy or a list; strictly ascending by
        UTF-8 bytes (the order of ``pyarrow.compute.sort_indices`` and of cutext's vocabulary), no nulls.
    df : integer array, shape (n_terms,)
        Postings of each term (>= 1), which is the number of documents containing it.
    doc : integer array, shape (n_postings,)
        Local document numbers in ``[0, n_docs)``, term-major (the ``df[0]`` postings of ``terms[0]``
        first), strictly ascending within a term.
    tf : integer array, shape (n_postings,)
        Occurrences of the term in the document, in ``[1, 2**31 - 1]``.
    lengths : integer array, shape (n_docs,)
        Tokens per document (BM25's dl), in ``[0, 2**31 - 1]``; at least the sum of its postings' tf.
    source_ids : array of str, shape (n_docs,)
        The documents' ids in the source (cast to string).
    texts : array of str, shape (n_docs,), optional
        The documents' texts (:func:`text_array`: pyarrow, pandas, cudf, numpy or a list; a null is an
        empty text), written to ``text.parquet``; None writes no text.
    fields : sequence of str, optional
        The text fields of a BM25F segment (format 2, module docstring), with ``field_tf`` and
        ``field_lengths``; None: one field (format 1).
    field_tf : integer array, shape (F, n_postings), optional
        Occurrences of each posting's term in each field, in ``[0, 2**31 - 1]``, summing to ``tf``.
    field_lengths : integer array, shape (F, n_docs), optional
        Tokens of each field of each document, summing to ``lengths``; at least the field's tf sum.
    columns : pyarrow Table or pandas / cudf DataFrame, n_docs rows, optional
        Kept columns of the documents (:func:`column_table`), written to ``columns.parquet`` with their
        types; None writes none.
    positions : integer array, shape (sum(tf),), optional
        The postings' term positions, posting by posting, ascending within one, written to
        ``positions.parquet`` (:mod:`cutext.stages.engines.phrases`); None writes none.

    Returns
    -------
    dict
        The segment's manifest (``segment.json``): ``kind``, ``format``, ``n_docs``, ``n_terms``,
        ``n_postings``, ``sum_dl``, ``texts``, ``fields`` (BM25F), ``columns`` (kept column names) and
        ``files`` (``{name: {"bytes", "crc32"}}``).

    Raises
    ------
    FileExistsError
        ``folder`` exists and is not an empty folder.
    ValueError
        Shapes that disagree, terms that are not strictly ascending or null, df < 1 or not summing to
        n_postings, doc numbers out of range or not ascending within a term, tf < 1, negative or
        too large lengths, a document whose tf sum exceeds its length, more than 2**31 - 1 documents;
        field arrays of another shape, with negative entries or whose sums are not ``tf`` and
        ``lengths``, fields without both arrays, or repeated field names.
    """
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise FileExistsError(f"{folder}: a segment is written once, into a new or empty folder")
    if fields is not None or field_tf is not None or field_lengths is not None:
        fields, field_tf, field_lengths = _checked_fields(fields, field_tf, field_lengths, to_host(tf),
                                                          to_host(lengths))
    terms = _as_strings(terms, pa.large_string(), "terms")
    doc, tf = _as_ints(doc, "doc", device=True), _as_ints(tf, "tf", device=True)
    df, lengths = _as_ints(df, "df", device=True), _as_ints(lengths, "lengths", device=True)
    xp = array_module(doc)
    df, tf, lengths = xp.asarray(df), xp.asarray(tf), xp.asarray(lengths)
    source_ids = _as_strings(source_ids, pa.string(), "source_ids")
    texts = text_array(texts) if texts is not None else None
    n_docs, n_terms, n_postings = len(lengths), len(terms), len(doc)
    if len(df) != n_terms or len(tf) != n_postings or len(source_ids) != n_docs:
        raise ValueError(f"shapes disagree: {n_terms} terms and {len(df)} df, {n_postings} doc and {len(tf)} tf, "
                         f"{n_docs} lengths and {len(source_ids)} source_ids")
    if texts is not None and len(texts) != n_docs:
        raise ValueError(f"shapes disagree: {len(texts)} texts for {n_docs} documents")
    columns = column_table(columns) if columns is not None else None
    if columns is not None and columns.num_rows != n_docs:
        raise ValueError(f"shapes disagree: {columns.num_rows} rows of kept columns for {n_docs} documents")
    _check_values(terms, df, doc, tf, lengths, fields, field_tf, field_lengths)
    folder.mkdir(parents=True, exist_ok=True)
    _write_parquet(folder, TERMS, {"term": terms, "df": to_host(df).astype(np.int32, copy=False)})
    n_fields = len(fields) if fields is not None else 0
    _write_parquet(folder, POSTINGS, {"doc": doc.astype(np.int32, copy=False), "tf": tf.astype(np.int32, copy=False),
                                      **{f"tf_{i}": field_tf[i] for i in range(n_fields)}}, n_fields)
    _write_parquet(folder, DOCS, {"source_id": source_ids, "length": to_host(lengths).astype(np.int32, copy=False),
                                  **{f"length_{i}": field_lengths[i] for i in range(n_fields)}}, n_fields)
    if texts is not None:
        _write_parquet(folder, TEXT, {"text": texts})
    if positions is not None:
        if n_fields:
            raise ValueError("positions of BM25F fields are not stored")
        write_positions(folder, to_host(positions), to_host(tf))
    if columns is not None:  # the input's own types; pyarrow's default dictionary suits categories and dates
        tmp = folder / f".{COLUMNS}.tmp"
        pq.write_table(columns, tmp, compression=COMPRESSION)
        os.replace(tmp, folder / COLUMNS)
    meta = {"kind": KIND, "format": FORMAT, "n_docs": n_docs, "n_terms": n_terms, "n_postings": n_postings,
            "sum_dl": int(lengths.sum(dtype=np.int64)), "compression": COMPRESSION, "texts": texts is not None}
    if n_fields:
        meta.update(format=FIELDS_FORMAT, fields=list(fields))
    if columns is not None:
        meta["columns"] = list(columns.column_names)
    if positions is not None:
        meta["positions"] = True
    tmp = folder / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, folder / MANIFEST)
    checksums.seal(folder, MANIFEST)  # sizes and CRC32 of the files, rewritten under a temporary name
    return json.loads((folder / MANIFEST).read_text(encoding="utf-8"))


def _check_values(terms, df, doc, tf, lengths, fields, field_tf, field_lengths) -> None:
    """The values of :func:`write_segment`'s arrays checked, their shapes already agreeing (its ``ValueError``)."""
    n_docs, n_terms, n_postings = len(lengths), len(terms), len(doc)
    xp = array_module(doc)
    if n_docs > _INT32_MAX:
        raise ValueError(f"a segment holds at most {_INT32_MAX} documents, got {n_docs}")
    if terms.null_count:
        raise ValueError("terms must not be null")
    if n_terms > 1 and not pc.all(pc.less(terms[:-1], terms[1:])).as_py():
        i = int(np.flatnonzero(~pc.less(terms[:-1], terms[1:]).to_numpy(zero_copy_only=False))[0])
        raise ValueError(f"terms must be strictly ascending by UTF-8 bytes: {terms[i].as_py()!r} at {i} "
                         f"is followed by {terms[i + 1].as_py()!r}")
    _check_in(df, 1, _INT32_MAX, "df")
    offsets = xp.zeros(n_terms + 1, np.int64)
    xp.cumsum(df, out=offsets[1:])
    if int(offsets[-1]) != n_postings:
        raise ValueError(f"df sums to {int(offsets[-1])}, but there are {n_postings} postings")
    _check_in(doc, 0, n_docs - 1, "doc")
    _check_in(tf, 1, _INT32_MAX, "tf")
    _check_in(lengths, 0, _INT32_MAX, "lengths")
    if not _ascending_within_terms(doc, offsets):
        raise ValueError("doc must be strictly ascending within each term (term-major postings)")
    if n_postings:  # lengths that belong to other documents (a shifted slice) show here
        tf_sum = xp.bincount(doc, weights=tf, minlength=n_docs)
        if bool((tf_sum > lengths).any()):
            i = int(xp.flatnonzero(tf_sum > lengths)[0])
            raise ValueError(f"document {i} has tf summing to {int(tf_sum[i])} but length {int(lengths[i])}")
        for i, name in enumerate(fields or ()):
            over = np.bincount(to_host(doc), weights=field_tf[i], minlength=n_docs) > field_lengths[i]
            if over.any():
                raise ValueError(f"document {int(np.flatnonzero(over)[0])}: field {name!r} has more tf than tokens")


def _checked_fields(fields, field_tf, field_lengths, tf: np.ndarray, lengths: np.ndarray) -> tuple:
    """``(fields, field_tf, field_lengths)`` of :func:`write_segment` checked: a tuple of distinct names and
    two host int32 arrays (F, n_postings) and (F, n_docs) whose columns sum to ``tf`` and ``lengths``."""
    if fields is None or field_tf is None or field_lengths is None:
        raise ValueError("a BM25F segment needs fields, field_tf and field_lengths together")
    fields = tuple(str(f) for f in fields)
    if not fields or len(set(fields)) != len(fields):
        raise ValueError(f"fields must be distinct names, got {list(fields)}")
    out = []
    for what, a, ref in (("field_tf", field_tf, tf), ("field_lengths", field_lengths, lengths)):
        a = np.asarray(to_host(a))
        if a.shape != (len(fields), len(ref)) or (a.size and not np.issubdtype(a.dtype, np.integer)):
            raise ValueError(f"{what}: expected integers of shape ({len(fields)}, {len(ref)}), got dtype {a.dtype} "
                             f"and shape {a.shape}")
        _check_in(a, 0, _INT32_MAX, what)
        if not np.array_equal(a.sum(axis=0, dtype=np.int64), np.asarray(ref, np.int64)):
            raise ValueError(f"{what} must sum over the fields to {'tf' if what == 'field_tf' else 'lengths'}")
        out.append(a.astype(np.int32, copy=False))
    return fields, out[0], out[1]


def column_table(columns) -> pa.Table:
    """Kept columns as one pyarrow Table on the host (cudf through ``.to_arrow()``, pandas without its index).

    Parameters
    ----------
    columns : pyarrow Table, pandas or cudf DataFrame
        Columns named by distinct non-empty strings.

    Returns
    -------
    pyarrow.Table

    Raises
    ------
    ValueError
        Not a table, no column, or names that are not distinct non-empty strings.
    """
    if is_gpu_object(columns):
        columns = columns.to_arrow()
    elif isinstance(columns, pd.DataFrame):
        columns = pa.Table.from_pandas(columns, preserve_index=False)
    if not isinstance(columns, pa.Table):
        raise ValueError(f"kept columns must be a table (pyarrow, pandas or cudf), got {type(columns).__name__}")
    names = columns.column_names
    if not names or len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"kept columns need distinct non-empty names, got {names}")
    return columns.combine_chunks()


def segments_from_counts(counts, vocab, source_ids, doc_lo: int, doc_hi: int, lengths=None) -> dict:
    """The arguments of :func:`write_segment` for one partition of the count stage.

    Parameters
    ----------
    counts : pandas or cudf DataFrame
        ``(term_id: int32, doc_id: int64, tf: int32, dl: int32)`` rows of documents ``[doc_lo, doc_hi)``
        (:class:`cutext.stages.text.public.Counts` partitions), global term ids into ``vocab``; any
        row order (re-sorted by (term_id, doc_id) unless already so).  Rows of term id 0 (unknown
        terms, no string) are dropped: a query can never match them; their tokens stay in dl.
    vocab : pyarrow string array, shape (V,)
        Term id ``i + 1`` is ``vocab[i]``, sorted by UTF-8 bytes (:func:`cutext.stages.text.public.encode`),
        so the segment's terms in term id order are sorted too.
    source_ids : array of str, shape (doc_hi - doc_lo,)
    doc_lo, doc_hi : int
        The partition's documents; local doc = doc_id - doc_lo.
    lengths : integer array, shape (doc_hi - doc_lo,), optional
        dl of the partition's documents; default from the ``dl`` column (0 for a document without rows).

    Returns
    -------
    dict
        ``terms`` (pyarrow.LargeStringArray), ``df`` (int64), ``doc`` (int32), ``tf`` (int32),
        ``lengths`` (int32), ``source_ids``: ``write_segment(folder, **result)``.

    Raises
    ------
    ValueError
        A missing column, doc ids outside ``[doc_lo, doc_hi)``, term ids outside ``[0, V]``, a repeated
        (term, doc) pair, ``dl`` that differs between rows of one document, or ``lengths`` /
        ``source_ids`` of another length.
    """
    need = {"term_id", "doc_id", "tf"} | ({"dl"} if lengths is None else set())
    if not need <= set(counts.columns):
        raise ValueError(f"counts needs columns {sorted(need)}, has {list(counts.columns)}")
    n_docs = int(doc_hi) - int(doc_lo)
    if n_docs < 0:
        raise ValueError(f"doc_hi {doc_hi} < doc_lo {doc_lo}")
    vocab = _as_strings(vocab, pa.large_string(), "vocab")
    t, d, f = values(counts["term_id"]), values(counts["doc_id"]), values(counts["tf"])
    dl = values(counts["dl"]) if lengths is None else None
    xp = array_module(t)
    known = t != 0
    if not bool(known.all()):
        t, d, f = t[known], d[known], f[known]
        dl = dl[known] if dl is not None else None
    _check_in(d, doc_lo, doc_hi - 1, "doc_id")
    _check_in(t, 1, len(vocab), "term_id")
    if lengths is None:
        lengths = xp.zeros(n_docs, np.int32)
        lengths[d - doc_lo] = dl
        if not bool(xp.array_equal(lengths[d - doc_lo], dl)):
            raise ValueError("dl differs between rows of one document")
    else:
        lengths = _as_ints(lengths, "lengths").astype(np.int32, copy=False)
        if len(lengths) != n_docs:
            raise ValueError(f"lengths has {len(lengths)} entries for the {n_docs} documents [{doc_lo}, {doc_hi})")
    n = len(t)
    if n > 1:
        same = t[1:] == t[:-1]
        if not bool(((t[1:] > t[:-1]) | (same & (d[1:] > d[:-1]))).all()):  # not term-major already
            o = xp.lexsort(xp.stack([d, t]))
            t, d, f = t[o], d[o], f[o]
            same = t[1:] == t[:-1]
            if bool((same & (d[1:] == d[:-1])).any()):
                raise ValueError("counts repeat a (term_id, doc_id) pair")
        starts = xp.flatnonzero(xp.concatenate([xp.ones(1, bool), ~same]))
    else:
        starts = xp.arange(n)
    ids = to_host(t[starts]).astype(np.int64)
    df = xp.diff(xp.concatenate([starts, xp.asarray([n])])).astype(np.int64)
    return {"terms": vocab.take(pa.array(ids - 1)), "df": df,
            "doc": (d - doc_lo).astype(np.int32), "tf": f.astype(np.int32, copy=False), "lengths": lengths,
            "source_ids": source_ids}


def write_partition_segment(counts, docs, vocab, folder, texts=None, columns=None, host: bool = False) -> dict:
    """One segment from a partition of the count stage and the same partition of the document table:
    the bm25 pipeline's segmented writer, run by the worker that holds the partition (no postings move
    between workers; the vocabulary's strings are the one O(V) input every writer shares).

    Parameters
    ----------
    counts : pandas or cudf DataFrame
        ``(term_id, doc_id, tf, dl)`` of the partition's documents (:func:`segments_from_counts`).
    docs : pandas or cudf DataFrame
        ``(doc_id, source_id, replaced)`` of the partition, doc ids consecutive and ascending (the read
        stage numbers them so).
    vocab : pyarrow string array, shape (V,)
    folder : str or os.PathLike
        New or empty.
    texts : pandas or cudf DataFrame or Series, optional
        The same partition as read (a ``text`` column, a row per document of ``docs`` in its order): the
        segment stores the texts (:func:`text_array`; a cudf column reaches the host through Arrow).
    columns : pyarrow Table or pandas / cudf DataFrame, optional
        The partition's kept columns, a row per document of ``docs`` in its order (:func:`column_table`).
    host : bool
        Move device counts to host memory first and encode the segment there (the same files): for a
        build under a device memory budget, since libcudf's ZSTD encoder asks for scratch of hundreds of MB
        even for a small segment.

    Returns
    -------
    dict
        The segment's ``segment.json``, ``doc_lo`` (its first global doc id), ``replaced`` (U+FFFD
        replacements of its documents), and its ``terms`` and their ``df`` (what a commit's vocabulary
        counts).

    Raises
    ------
    ValueError
        Doc ids that are not consecutive; see :func:`segments_from_counts`, :func:`write_segment`.
    """
    texts = text_array(texts) if texts is not None else None
    docs = to_host(docs)
    if host:
        counts = to_host(counts)
    ids = docs["doc_id"].to_numpy()
    lo, hi = (int(ids[0]), int(ids[-1]) + 1) if len(ids) else (0, 0)
    if hi - lo != len(ids) or (len(ids) and not (np.diff(ids) == 1).all()):
        raise ValueError(f"{folder}: the partition's doc ids are not consecutive ({len(ids)} ids in [{lo}, {hi}))")
    source_ids = pa.array(docs["source_id"].to_numpy(dtype=object), pa.large_string())
    seg = segments_from_counts(counts, vocab, source_ids, lo, hi)
    meta = write_segment(folder, **seg, texts=texts, columns=columns)
    return dict(meta, doc_lo=lo, replaced=int(docs["replaced"].sum()) if "replaced" in docs.columns else 0,
                terms=seg["terms"], df=seg["df"])


def write_text_segment(texts, docs, tokenizer, folder, store_text: bool = False) -> dict:
    """One segment straight from a read partition's text, with the partition's own vocabulary: the
    tokenize and count stages of :mod:`cutext.stages.text` on this partition alone, then
    :func:`write_partition_segment`.  A segment stores its terms as strings and numbers its documents
    locally, so it needs no global term id: the files equal those written from the global
    vocabulary's counts (its terms, in UTF-8 byte order, are the partition's distinct tokens in that
    order), and a cluster run that writes each segment where its text is moves no vocabulary between
    workers.

    Parameters
    ----------
    texts : pandas or cudf DataFrame
        A read partition with a ``text`` column, a row per document of ``docs`` in the same order.
    docs : pandas or cudf DataFrame
        ``(doc_id, source_id, replaced)`` of the partition, doc ids consecutive and ascending (the read
        stage's numbering).
    tokenizer : cutext.stages.text.tokenize.TokenizerConfig
    folder : str or os.PathLike
        New or empty.
    store_text : bool, default False
        Keep the texts in the segment (``text.parquet``).

    Returns
    -------
    dict
        :func:`write_partition_segment`'s result (``terms``: the partition's vocabulary, sorted, and
        ``df``), with ``n_empty_docs`` (documents without a token).

    Raises
    ------
    ValueError
        ``texts`` and ``docs`` of different lengths; see :func:`write_partition_segment`.
    """
    if len(texts) != len(docs):
        raise ValueError(f"{folder}: {len(texts)} texts for {len(docs)} documents")
    ids = values(docs["doc_id"])
    lo = int(ids[0]) if len(ids) else 0
    summary = tokenize_partition_summary(WithDocIds([lo], "text")(texts, {"number": 0}), tokenizer, "text")
    kept = text_array(texts) if store_text else None
    del texts
    vocab = sorted_terms(summary.scan.uniq)
    counts = count_partition_summary(summary, vocabulary_frame(vocab, docs), docs)
    n_empty = int((to_host(summary.scan.lengths) == 0).sum())
    del summary
    return dict(write_partition_segment(counts, docs, vocab, folder, texts=kept), n_empty_docs=n_empty)
