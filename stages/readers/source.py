"""The corpus source: a path, a list of paths or a frame planned into pieces (nothing read yet),
and the lazy dask collection of its documents, one partition a piece.
"""
from __future__ import annotations

from cutext.kernels.backend import is_gpu
from cutext.stages.readers import device
from cutext.stages.readers.base import DEFAULT_BLOCKSIZE, DEFAULT_MAX_RATIO, CorpusError, Piece
from cutext.stages.readers.files import (
    KEEP_FORMATS,
    CorpusSource,
    meta_frame,
    plan,
    read_piece,
    read_piece_columns,
    to_backend,
)
from cutext.stages.readers.frames import frame_source, input_label, is_frame
from cutext.stages.readers.irds import irds_docs, is_irds
from cutext.stages.runtime.compute import input_bytes
from cutext.stages.runtime.params import param

__all__ = ["CorpusSource", "open_corpus", "read_corpus", "source_of_pieces", "kept_columns", "DEVICE_READERS"]

# the readers that put a piece's text straight into device buffers, by format
DEVICE_READERS = {"lines": device.read_lines_device, "parquet": device.read_parquet_device,
                  "files": device.read_files_device, "jsonl": device.read_jsonl_device,
                  "csv": device.read_csv_device}


def open_corpus(path, *, backend: str = "cpu", format="auto", text_column=None, id_column=None,
                blocksize=DEFAULT_BLOCKSIZE, encoding="utf-8", storage_options=None, glob=None,
                max_ratio=DEFAULT_MAX_RATIO, members=None) -> CorpusSource:
    """Plan a corpus (list its pieces, measure its bytes); nothing is read yet.

    Parameters
    ----------
    path : str, os.PathLike, list, or a frame
        A file, a directory, a glob or fsspec URLs (:func:`cutext.stages.readers.source.read_corpus`); or a
        pandas / cudf / dask / dask-cudf DataFrame or Series (:func:`cutext.stages.readers.frames.frame_source`);
        or ``"irds:<id>"``, the documents of an ir_datasets dataset (:mod:`cutext.stages.readers.irds`).
    backend : {"cpu", "gpu"}
        The resolved backend (``cutext.kernels.backend.resolve_backend``): pandas or cudf partitions.
    format, text_column, id_column, blocksize, encoding, storage_options, glob, max_ratio, members
        Reader settings (:func:`cutext.stages.readers.source.read_corpus`; for a frame only ``text_column``,
        ``id_column`` and ``blocksize`` apply, the others are refused unless at their defaults).

    Returns
    -------
    CorpusSource

    Raises
    ------
    FileNotFoundError
        The path matches nothing.
    CorpusError (ValueError)
        An unknown format or unreadable input found while planning; a frame without its text
        column or with non-string text (``FrameError``).
    ValueError
        ``backend`` is not ``"cpu"`` / ``"gpu"`` (resolve ``"auto"`` first).
    """
    from fsspec.core import url_to_fs

    is_gpu(backend)  # validates the resolved string
    if is_irds(path):  # an ir_datasets id: its documents as a frame
        path = irds_docs(path)
        text_column = "text" if text_column is None else text_column
        id_column = "doc_id" if id_column is None else id_column
    if is_frame(path):
        return frame_source(path, backend=backend, format=format, text_column=text_column, id_column=id_column,
                            blocksize=blocksize, encoding=encoding, storage_options=storage_options, glob=glob,
                            max_ratio=max_ratio, members=members)
    docs, pieces, fmt = read_corpus(path, format=format, text_column=text_column, id_column=id_column,
                                    blocksize=blocksize, encoding=encoding, storage_options=storage_options,
                                    glob=glob, backend=backend, max_ratio=max_ratio, members=members)
    p0 = path[0] if isinstance(path, (list, tuple)) else path
    fs = url_to_fs(str(p0), **(storage_options or {}))[0]
    return CorpusSource(path, docs, pieces, fmt, input_bytes(pieces, fs), backend, fs=fs)


def source_of_pieces(source: CorpusSource, pieces: list) -> CorpusSource:
    """The corpus of a subset of ``source``'s pieces, read the same way (a worker's share of a file input).

    Raises
    ------
    ValueError
        ``source`` is a frame input (it has no pieces to read again).
    """
    if source.fs is None:
        raise ValueError("source_of_pieces: the source is a frame, not files")
    return CorpusSource(source.path, _read_pieces(list(pieces), source.fs, source.backend), list(pieces),
                        source.format, input_bytes(pieces, source.fs), source.backend, fs=source.fs)


def _frame_columns(part, columns: list):
    """A frame partition's kept columns as a pyarrow Table (pandas without its index; cudf through Arrow)."""
    import pyarrow as pa

    part = part[columns]
    if hasattr(part, "to_arrow"):
        return part.to_arrow().replace_schema_metadata(None)
    return pa.Table.from_pandas(part, preserve_index=False).replace_schema_metadata(None)


def kept_columns(source: CorpusSource, columns) -> list:
    """The other columns of the input that an index keeps, as lazy pyarrow Tables, one a partition of
    ``source.docs`` and a row per document in its order (``keep_columns=`` of the bm25 pipeline).

    Parameters
    ----------
    source : CorpusSource
        A table input (jsonl, parquet, csv files) or a DataFrame.
    columns : list of str

    Returns
    -------
    list of dask.delayed.Delayed, one a piece (files: :func:`read_piece_columns`; a frame: its partitions)

    Raises
    ------
    CorpusError (ValueError)
        An input that is not a table (files, lines, archives, a Series: the message names the input), or a
        DataFrame without one of the columns (named, with the frame's columns); for files a missing column
        is found when the piece is read.
    """
    import dask

    columns = list(columns)
    label = input_label(source.path)
    if source.format == "frame":
        if source.frame is None:
            raise CorpusError(f"{label}: {param('keep_columns', bare=True)} keeps other columns of a DataFrame; "
                              "a Series holds the text alone")
        have = list(source.frame.columns)
        missing = [c for c in columns if c not in have]
        if missing:
            raise CorpusError(f"{label}: {param('keep_columns', bare=True)}: column(s) {missing} not in the input; "
                              f"its columns are {have}")
        return [dask.delayed(_frame_columns)(p, columns) for p in source.frame.to_delayed()]
    if source.format not in KEEP_FORMATS:
        raise CorpusError(f"{label}: {param('keep_columns', bare=True)} keeps columns of a table input "
                          f"({', '.join(KEEP_FORMATS)} or a DataFrame); this input is read as {source.format!r}")
    return [dask.delayed(read_piece_columns)(p, source.fs, columns) for p in source.pieces]


class _PieceReader:
    """Picklable callable for dask.dataframe.from_map: a piece -> a pandas or cudf partition."""

    def __init__(self, fs, backend: str):
        self.fs = fs
        self.backend = backend

    def __call__(self, piece: Piece):
        if is_gpu(self.backend) and piece.archive is None and piece.format in DEVICE_READERS:
            return DEVICE_READERS[piece.format](piece, self.fs)
        df = read_piece(piece, self.fs)
        return to_backend(df, self.backend)


def read_corpus(path, *, format="auto", text_column=None, id_column=None, blocksize=DEFAULT_BLOCKSIZE,
                encoding="utf-8", storage_options=None, glob=None, backend="cpu", max_ratio=DEFAULT_MAX_RATIO,
                members=None):
    """Lazily read a corpus into a dask DataFrame ``(source_id, text, replaced)``, one partition a piece.

    Call :func:`assign_doc_ids` on the result to get the dense ``doc_id`` column.

    Parameters
    ----------
    path : str, os.PathLike or list
        A file, a directory, an archive (``.tar``, ``.tar.gz``/``.tgz``, ``.tar.bz2``, ``.tar.xz``,
        ``.zip``), a glob, or any fsspec URL (``s3://``, ``memory://`` ...).
    format : {"auto", "files", "lines", "jsonl", "parquet", "csv", "smart"}
        ``"smart"``: the SMART records of the classic collections (``.I``, ``.T``, ``.W`` ...;
        :mod:`cutext.stages.readers.smart`), one document a record, ``source_id`` its ``.I`` number;
        ``"auto"`` chooses it for a single file whose first non-blank line is ``.I <number>``.
    text_column, id_column : str or list of str, optional
        Column(s) holding the text (joined by a space) and the source id: table formats only (refused
        for ``files`` / ``lines``; the defaults are :func:`cutext.stages.readers.files._pick`'s: ``title``
        joined with the first body column present, ``text``, ``contents``, ``content``, ``body``,
        ``abstract`` or ``description``); for ``smart``, ``text_column`` names the fields that are the text by
        letter (default ``["T", "W", "K"]``: title, abstract, keywords) and ``id_column`` is refused.
    blocksize : int
        Bytes per partition for splittable inputs.
    encoding : str
        Text encoding of the input (a Python codec that writes ASCII as ASCII; checked before any
        work); undecodable bytes are replaced and counted.
    storage_options : dict, optional
        fsspec options of the filesystem (credentials, endpoints).
    glob : bool or None
        None (default): a path that exists is read as itself even when its name holds ``*``,
        ``?`` or ``[`` (a file ``a[1].txt``), otherwise such a path is a glob pattern; True: always
        a pattern; False: never (the name is literal).
    backend : {"cpu", "gpu"}
        The resolved backend (:func:`cutext.kernels.backend.resolve_backend`): pandas or cudf
        partitions.  Downstream stages take the library from the partitions.
    max_ratio : float or None
        Refuse a compressed file or archive member that expands more than ``max_ratio`` times its
        compressed bytes (zip/gz bombs; default :data:`DEFAULT_MAX_RATIO` = 100, Apache POI's zip
        bomb guard: text compresses 3-10x, so only a bomb or a freak input trips it, and no member
        can take more memory than 100 times its compressed size); output under 1 MiB is never
        refused; None: no limit.
    members : str or list of str, optional
        Archive inputs: read only the members whose path matches one of these :mod:`fnmatch` globs
        (``"*/*.txt"``: every ``.txt`` member in a folder, not a README at the top; ``*`` also
        matches ``/``).  A pattern matching no member of an archive is a :class:`CorpusError` naming
        the archive; given for an input without an archive, it is refused.

    Returns
    -------
    (dask.dataframe.DataFrame, list[Piece], str)
        The lazy corpus, its pieces (one per partition) and the resolved format.

    Raises
    ------
    FileNotFoundError
        Nothing matches ``path``.
    ValueError
        A bad ``format``, ``blocksize``, ``encoding``, ``max_ratio`` or ``members`` (before any file is
        read).
    CorpusError (ValueError)
        Raised while planning: a path that is neither a regular file nor a directory (FIFO, device,
        socket), ``text_column``/``id_column`` for text read as files or lines, an archive that
        cannot be listed, ``members`` for an input without an archive or a pattern matching no member;
        raised by the partitions when computed: unreadable or malformed input (:func:`read_piece`),
        :class:`ExpansionError` for a bomb, a ``members`` pattern matching no member of a compressed tar.

    Warns
    -----
    BinaryInputWarning
        Once per file: read as text, it looks binary (:func:`binary_reason`).
    ArchiveMemberWarning
        Once per archive: members skipped (path traversal names, links, devices) or renamed
        (duplicate names get ``#2``, ``#3`` ...).
    """
    fs, pieces, fmt = plan(path, format=format, text_column=text_column, id_column=id_column,
                           blocksize=blocksize, encoding=encoding, storage_options=storage_options,
                           glob=glob, max_ratio=max_ratio, members=members)
    return _read_pieces(pieces, fs, backend), pieces, fmt


def _read_pieces(pieces: list, fs, backend: str):
    """The lazy dask DataFrame of ``pieces``, one partition a piece (:class:`_PieceReader`)."""
    import dask.dataframe as dd

    return dd.from_map(_PieceReader(fs, backend), pieces, meta=meta_frame(backend), enforce_metadata=False,
                       label="read-corpus")


