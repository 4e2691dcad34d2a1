"""Archives as collections (``.tar`` with or without compression, ``.zip``): their members listed,
checked (path traversal names, links, duplicates, the expansion guard) and read in pieces, never
extracted (:mod:`cutext.stages.readers.files` describes the formats).
"""
from __future__ import annotations

import fnmatch
import io
import posixpath
import stat
from collections import Counter

import numpy as np
import pandas as pd
import pyarrow as pa

from cutext.stages.readers.base import (
    DEFAULT_MAX_RATIO,
    RATIO_GRACE,
    READ_CHUNK,
    SNIFF_BYTES,
    ArchiveMemberWarning,
    CorpusError,
    ExpansionError,
    Piece,
    _escape_name,
    _frame,
    _ignored,
    _lines_table,
    _read_errors,
    _strip_bom,
    _strip_compression,
    check_text,
    collection_notes,
    decode_counting,
    warn_once,
)
from cutext.stages.runtime.params import param

# archive suffix -> (kind, compression of the whole archive); ".tar.gz" etc. are ".tar" after
# the compression suffix is stripped
ARCHIVE_SUFFIXES = {".tar": ("tar", None), ".tgz": ("tar", "gzip"), ".taz": ("tar", "gzip"),
                    ".tbz": ("tar", "bz2"), ".tbz2": ("tar", "bz2"), ".txz": ("tar", "xz"),
                    ".tzst": ("tar", "zstd"), ".zip": ("zip", None)}
MAX_MEMBERS_PER_PIECE = 4096


def archive_kind(path: str) -> tuple[str | None, str | None]:
    """``(kind, compression)`` of an archive path by its suffix: ``("tar", "gzip")`` for ``.tar.gz``
    and ``.tgz``, ``("tar", None)`` for ``.tar``, ``("zip", None)`` for ``.zip``; ``(None, None)``
    for anything else."""
    name = path.lower()
    ext = posixpath.splitext(name)[1]
    if ext in ARCHIVE_SUFFIXES:
        return ARCHIVE_SUFFIXES[ext]
    base, comp = _strip_compression(name)
    if comp is not None and posixpath.splitext(base)[1] == ".tar":
        return "tar", comp
    return None, None


def check_members(members) -> tuple | None:
    """``members`` as a tuple of glob patterns, or None (every member).

    Parameters
    ----------
    members : None, str or list of str
        :mod:`fnmatch` patterns matched, case-sensitively, against each member's path as its source
        id is written (no leading ``./``); ``*`` also matches ``/``, so ``"*/*.txt"`` is every ``.txt``
        member in a folder.

    Raises
    ------
    ValueError
        Not None, a non-empty string, nor a non-empty list of them (the message names ``members``).
    """
    if members is None:
        return None
    pats = (members,) if isinstance(members, str) else members
    try:
        pats = tuple(pats)
    except TypeError:
        pats = ()
    if not pats or not all(isinstance(p, str) and p for p in pats):
        raise ValueError(f"members must be a glob pattern or a non-empty list of them (e.g. '*/*.txt'), "
                         f"got {members!r}")
    return pats


def _member_name(name: str) -> str:
    """A member's path as its source id: without a leading ``/`` or ``./``; bytes that are not UTF-8
    (tarfile gives them as surrogate escapes) written as ``\\xNN``."""
    while name.startswith("./"):
        name = name[2:]
    return _escape_name(name.lstrip("/"))


class _MemberNames:
    """The member rules of one archive: which members are documents, under which unique source id.

    Directories, hidden members and dataset markers are left out silently (the rules of directory
    input).  Members whose path has a ``..`` component (path traversal names), symbolic and hard
    links, and other non-regular members (devices, FIFOs, sparse files) are skipped and counted; a
    name already taken gets ``#2``, ``#3`` ... (the first free suffix; a tar may hold one path
    several times, e.g. appended versions), so source ids are unique.  :meth:`warn` gives one
    :class:`ArchiveMemberWarning` for the archive with the counts.
    """

    REASONS = {"traversal": "with '..' in the path (path traversal names are not read)",
               "link": "symbolic or hard link(s) (links are not followed)",
               "other": "not regular file(s) (devices, FIFOs, sparse files)"}

    def __init__(self, archive: str, members: tuple | None = None):
        self.archive = archive
        self.members = members
        self.matched: set = set()
        self.names: list = []   # a few member names, for the message of a pattern matching none
        self.taken: set = set()
        self.skipped: Counter = Counter()
        self.example: dict = {}
        self.renamed: list = []

    def source_id(self, raw: str, kind: str) -> str | None:
        """The member's source id, or None when it is no document; ``kind``: ``"file"``, ``"dir"``,
        ``"link"`` or ``"other"``."""
        if kind == "dir":
            return None
        name = _member_name(raw)
        if self.members is not None:  # first: a member left out by the user is neither read nor warned about
            if name and not _ignored(name) and len(self.names) < 3:
                self.names.append(name)
            hits = [p for p in self.members if fnmatch.fnmatchcase(name, p)]
            if not hits:
                return None
            self.matched.update(hits)
        reason = ("traversal" if ".." in raw.replace("\\", "/").split("/") else
                  None if kind == "file" else kind)
        if reason is not None:
            self.skipped[reason] += 1
            self.example.setdefault(reason, _escape_name(raw))
            return None
        if not name or _ignored(name):
            return None
        sid, k = name, 2
        while sid in self.taken:
            sid, k = f"{name}#{k}", k + 1
        if sid != name:
            self.renamed.append((name, sid))
        self.taken.add(sid)
        return sid

    def message(self) -> str | None:
        parts = [f"{n} {self.REASONS[r]}, e.g. {self.example[r]!r}" for r, n in self.skipped.items()]
        text = f"skipped {sum(self.skipped.values())} member(s): " + "; ".join(parts) if parts else ""
        if self.renamed:
            a, b = self.renamed[0]
            text += ("; " if text else "") + (f"{len(self.renamed)} member(s) repeat an earlier name and got a "
                                              f"'#k' suffix to keep source ids unique, e.g. {a!r} -> {b!r}")
        return f"{self.archive}: {text}" if text else None

    def warn(self, read_id=None) -> None:
        msg = self.message()
        if msg is not None:
            warn_once((read_id, self.archive, "members"), msg, ArchiveMemberWarning, stacklevel=4)

    def check_members(self) -> None:
        """Refuse a ``members`` pattern that matched no member of the archive.

        Raises
        ------
        CorpusError
            The message names the archive, the pattern(s) and a few member names.
        """
        if self.members is None:
            return
        unmatched = [p for p in self.members if p not in self.matched]
        if unmatched:
            seen = f"its members are named like {', '.join(repr(n) for n in self.names)}" if self.names else \
                "it holds no document member"
            raise CorpusError(f"{self.archive}: members={unmatched[0]!r} matches no member of this archive "
                              f"({seen}; patterns are fnmatch globs on the member path, '*' matches '/' too)")


def _tar_kind(m) -> str:
    if m.isdir():
        return "dir"
    if m.issym() or m.islnk():
        return "link"
    return "file" if m.isreg() and not m.issparse() else "other"


def _zip_kind(info) -> str:
    if info.is_dir():
        return "dir"
    ftype = stat.S_IFMT(info.external_attr >> 16)   # 0: no Unix type recorded
    return "file" if ftype in (0, stat.S_IFREG) else "link" if ftype == stat.S_IFLNK else "other"


def _zip_name_error(path: str, exc: UnicodeDecodeError) -> CorpusError:
    return CorpusError(f"{path}: cannot read zip archive: member name {exc.object!r} is flagged as UTF-8 but "
                       f"is not UTF-8 ({exc.reason} at byte {exc.start}); repack the archive")


def _ratio_error(where: str, out: int, consumed: int, max_ratio: float) -> ExpansionError:
    return ExpansionError(f"{where}: expands more than max_ratio={max_ratio:g} times ({out:,} bytes out of "
                          f"{consumed:,} compressed bytes so far, {out / max(consumed, 1):,.0f}x): a "
                          f"decompression bomb? Pass a larger {param('max_ratio')} (or {param('max_ratio', None)}: no "
                          "limit) to read it anyway")


def read_capped(fh, consumed, max_ratio, where: str) -> bytes:
    """Read a decompressing stream to its end in :data:`READ_CHUNK` pieces, refusing a bomb.

    Parameters
    ----------
    fh : file object
        The decompressed stream.
    consumed : callable
        ``consumed()`` -> compressed bytes read so far (the raw file's ``tell``, or a member's size).
    max_ratio : float or None
        Refuse more than ``max_ratio`` times the compressed bytes once past :data:`RATIO_GRACE`
        (1 MiB) of output; None: no limit.
    where : str
        The file (and member) for the message.

    Returns
    -------
    bytes
        The decompressed bytes (at most ``max(RATIO_GRACE, max_ratio * compressed) + READ_CHUNK``
        are ever held when the limit trips).

    Raises
    ------
    ExpansionError
        The limit was passed (the message names ``where``, the ratio and ``max_ratio``).
    """
    chunks, out = [], 0
    while True:
        chunk = fh.read(READ_CHUNK)
        if not chunk:
            break
        chunks.append(chunk)
        out += len(chunk)
        if max_ratio is not None and out > RATIO_GRACE:
            c = consumed()
            if out > max_ratio * c:
                raise _ratio_error(where, out, c, max_ratio)
    return b"".join(chunks)


def _read_compressed(fs, path: str, compression: str, max_ratio, where: str | None = None) -> bytes:
    """A compressed file's decompressed bytes, read in pieces under the ``max_ratio`` limit."""
    from fsspec.compression import compr

    with fs.open(path, "rb") as raw, compr[compression](raw, mode="rb") as fh:
        return read_capped(fh, raw.tell, max_ratio, where or path)


def _read_file(fs, path: str, compression: str | None, piece: "Piece") -> bytes:
    """A whole file's bytes, decompressed (under ``max_ratio``) when it is compressed."""
    if compression:
        return _read_compressed(fs, path, compression, piece.options.get("max_ratio", DEFAULT_MAX_RATIO))
    with fs.open(path, "rb") as fh:
        return fh.read()


class _CappedStream:
    """A decompressing stream (a compressed tar) whose total output is held to ``max_ratio`` times the
    compressed bytes read so far; ``where`` names the member being read for the message."""

    def __init__(self, fh, consumed, max_ratio, path: str):
        self.fh, self.consumed, self.max_ratio, self.path = fh, consumed, max_ratio, path
        self.out = 0
        self.where = path

    def read(self, n=-1) -> bytes:
        data = self.fh.read(n)
        self.out += len(data)
        if self.max_ratio is not None and self.out > RATIO_GRACE:
            c = self.consumed()
            if self.out > self.max_ratio * c:
                raise _ratio_error(self.where, self.out, c, self.max_ratio)
        return data


def _archive_members(fs, path: str, kind: str, compression: str | None, max_ratio=DEFAULT_MAX_RATIO,
                     read_id=None, members=None):
    """The members of an archive to read, in archive order: ``(name, source id, data offset, size)``
    (zip: the offset of the member's header).

    The member rules of :class:`_MemberNames` apply (skipped members and renamed duplicates are
    warned about once; with ``members`` patterns, only the members matching one).  Returns None for a
    compressed tar, whose listing would cost a full decompression: it is read in one streaming pass
    (a ``members`` pattern matching nothing is refused when it is read).

    Raises
    ------
    CorpusError
        The archive cannot be read (the message names it), a zip member name flagged as UTF-8 is not,
        or a ``members`` pattern matches no member.
    ExpansionError
        A zip member whose declared size is more than ``max_ratio`` times its compressed size.
    """
    import tarfile
    import zipfile

    names = _MemberNames(path, members)
    try:
        if kind == "zip":
            with fs.open(path, "rb") as fh, zipfile.ZipFile(fh) as zf:
                out = []
                for info in zf.infolist():
                    sid = names.source_id(info.filename, _zip_kind(info))
                    if sid is None:
                        continue
                    if max_ratio is not None and info.file_size > max(RATIO_GRACE, max_ratio * info.compress_size):
                        raise _ratio_error(f"{path}: member {info.filename!r}", info.file_size,
                                           info.compress_size, max_ratio)
                    out.append((info.filename, sid, info.header_offset, info.file_size))
        elif compression is not None:
            return None
        else:
            with fs.open(path, "rb") as fh, tarfile.open(fileobj=fh, mode="r:") as tf:
                out = []
                last = None
                for m in tf:   # uncompressed: tarfile seeks over member data, only headers are read
                    last = m.name
                    sid = names.source_id(m.name, _tar_kind(m))
                    if sid is not None:
                        out.append((m.name, sid, m.offset_data, m.size))
                fh.seek(tf.offset)  # tarfile stops quietly where a file cut at a block boundary ends
                if fh.read(512) != bytes(512):
                    raise CorpusError(f"{path}: cannot read tar archive: it ends after member {last!r} without "
                                      "tar's end-of-archive blocks (a truncated file?)")
    except UnicodeDecodeError as exc:
        raise _zip_name_error(path, exc) from None
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as exc:
        raise CorpusError(f"{path}: cannot read {kind} archive: {type(exc).__name__}: {exc}") from None
    names.warn(read_id)
    names.check_members()
    if members is None:  # with members= the user's patterns alone choose
        notes = _notes(path, [m[1] for m in out], read_id)
        out = [m for i, m in enumerate(out) if i not in notes]
    return out


def _notes(archive: str, names: list, read_id=None) -> set:
    """Positions of the members among ``names`` that describe the archive's collection rather than belong to
    it (:func:`cutext.stages.readers.base.collection_notes`), with one :class:`ArchiveMemberWarning` naming
    them."""
    notes = collection_notes(names)
    if notes:
        left = [names[i] for i in sorted(notes)]
        warn_once((read_id, archive, "notes"), f"{archive}: left out {len(left)} member(s) that describe the "
                  f"collection, not documents of it: {', '.join(repr(n) for n in left[:3])} (a README, LICENSE or "
                  f"CHANGES file above the folders of the documents); pass {param('members')} to choose the "
                  "members yourself", ArchiveMemberWarning, stacklevel=5)
    return notes


def _archive_pieces(fs, path: str, fmt: str, prefix: str, opts: dict, blocksize: int,
                    file_index: int) -> list:
    """Pieces of one archive: its members grouped to about ``blocksize`` bytes (a compressed tar:
    one piece, streamed)."""
    kind, comp = archive_kind(path)
    members = _archive_members(fs, path, kind, comp, opts.get("max_ratio", DEFAULT_MAX_RATIO), opts.get("read_id"),
                               opts.get("members"))
    if members is None:
        return [Piece(fmt, [path], [prefix], comp, 0, None, file_index, False, opts, kind, None)]
    pieces, group, size = [], [], 0
    for m in members:
        group.append(m)
        size += m[-1]
        if size >= blocksize or len(group) >= MAX_MEMBERS_PER_PIECE:
            pieces.append(group)
            group, size = [], 0
    if group or not pieces:
        pieces.append(group)
    out = []
    for g in pieces:
        labels = [prefix + m[1] for m in g]
        ref = [(m[0], m[2]) if kind == "zip" else (m[0], m[2], m[3]) for m in g]
        out.append(Piece(fmt, [path], labels, None, 0, None, file_index, False, opts, kind, ref))
    return out


def _archive_members_data(fs, piece: Piece):
    """Yield ``(source id, member name, bytes)`` of the piece's archive members, in archive order,
    streaming (nothing is extracted to disk; a compressed tar is decompressed once, front to back).

    Compressed data is read in :data:`READ_CHUNK` pieces under the ``max_ratio`` limit: a zip member
    against its compressed size, a compressed tar's output against the compressed bytes read so far.
    """
    import tarfile
    import zipfile

    from fsspec.compression import compr

    path = piece.paths[0]
    max_ratio = piece.options.get("max_ratio", DEFAULT_MAX_RATIO)
    if piece.archive == "zip":
        with fs.open(path, "rb") as fh, zipfile.ZipFile(fh) as zf:
            by_offset = {info.header_offset: info for info in zf.infolist()}
            for (name, offset), label in zip(piece.members, piece.labels):
                info = by_offset[offset]   # by header: a zip may hold one name twice
                with zf.open(info) as member:
                    data = read_capped(member, lambda: info.compress_size, max_ratio, f"{path}: member {name!r}")
                yield label, name, data
    elif piece.members is not None:   # uncompressed tar: seek to each member's data
        with fs.open(path, "rb") as fh:
            for (name, offset, size), label in zip(piece.members, piece.labels):
                fh.seek(offset)
                data = fh.read(size)
                if len(data) != size:
                    raise EOFError(f"member {name!r} is truncated ({len(data)} of {size} bytes)")
                yield label, name, data
    else:
        prefix = piece.labels[0] or ""
        names = _MemberNames(path, piece.options.get("members"))
        with fs.open(path, "rb") as raw, compr[piece.compression](raw, mode="rb") as dec:
            stream = _CappedStream(dec, raw.tell, max_ratio, path)
            with tarfile.open(fileobj=stream, mode="r|") as tf:
                for m in tf:
                    sid = names.source_id(m.name, _tar_kind(m))
                    if sid is None:
                        continue
                    stream.where = f"{path}: member {m.name!r}"
                    member = tf.extractfile(m)
                    chunks = []
                    while chunk := member.read(READ_CHUNK):
                        chunks.append(chunk)
                    yield prefix + sid, m.name, b"".join(chunks)
        names.warn(piece.options.get("read_id"))
        names.check_members()


def _decompress_member(data: bytes, name: str, max_ratio=DEFAULT_MAX_RATIO, where: str = "") -> bytes:
    """A member compressed on its own (``x.txt.gz`` inside a tar) is decompressed, as a file is, in
    pieces under the ``max_ratio`` limit (against the member's compressed bytes)."""
    _, comp = _strip_compression(name)
    if comp is None:
        return data
    from fsspec.compression import compr

    raw = io.BytesIO(data)
    with compr[comp](raw, mode="rb") as fh:
        return read_capped(fh, raw.tell, max_ratio, where or name)


def _read_archive_piece(piece: Piece, fs) -> pd.DataFrame:
    """Members of a tar/zip archive as documents: one per member (``files``) or per line of each
    member (``lines``, source id ``"<member>:<line>"``, line 0-based)."""
    import tarfile
    import zipfile

    encoding = piece.options.get("encoding", "utf-8")
    max_ratio = piece.options.get("max_ratio", DEFAULT_MAX_RATIO)
    path = piece.paths[0]
    ids, texts, reps, checks, read = [], [], [], [], []
    label = None
    try:
        for label, name, raw in _archive_members_data(fs, piece):
            read.append(_member_name(name))
            raw = _strip_bom(_decompress_member(raw, name, max_ratio, f"{path}: member {name!r}"), 0, encoding)
            if piece.format == "lines":
                t, r = _lines_table(raw, piece, fs, 0)
                ids.append(pa.array([f"{label}:{i}" for i in range(len(t))], pa.large_string()))
                texts.append(t)
                reps.append(r)
                checks.append((f"member {name!r}", raw[:SNIFF_BYTES], len(raw), int(r.sum()), True))
            else:
                t, r = decode_counting(raw, encoding)
                ids.append(label)
                texts.append(t)
                reps.append(r)
                checks.append((f"member {name!r}", raw[:SNIFF_BYTES], len(raw), r, True))
    except CorpusError:
        raise
    except UnicodeDecodeError as exc:
        if piece.archive == "zip" and label is None:   # ZipFile() decodes every member name
            raise _zip_name_error(path, exc) from None
        raise CorpusError(f"{path}: cannot read {piece.archive} archive: {type(exc).__name__}: {exc}") from exc
    except (tarfile.TarError, zipfile.BadZipFile) + _read_errors() as exc:
        where = f"{path}" + (f" (after member {label!r})" if label else "")
        raise CorpusError(f"{where}: cannot read {piece.archive} archive: {type(exc).__name__}: {exc}") from exc
    if piece.members is None and piece.options.get("members") is None:  # a compressed tar, listed as it is read
        notes = _notes(path, read, piece.options.get("read_id"))
        ids, texts, reps, checks = ([x for i, x in enumerate(a) if i not in notes] for a in (ids, texts, reps, checks))
    check_text(piece, checks, archive=path)
    if piece.format == "lines":
        if not texts:
            return _frame(None, pa.array([], pa.large_string()), np.zeros(0, np.int32))
        return _frame(pa.concat_arrays(ids), pa.concat_arrays(texts), np.concatenate(reps).astype(np.int32))
    return _frame(pa.array(ids, pa.large_string()), pa.array(texts, pa.large_string()),
                  np.asarray(reps, np.int32))
