"""The manifest of a BM25 index, ``index.json``: every field that a reader or a writer of the index uses,
checked in one place when the manifest is read (:func:`read_index_manifest`).

A load reads some fields (N, avgdl, the BM25 parameters, the tokenizer, the segments and their deletions) and
checks the segments against them; a writer (append, delete, compact, convert) also trusts others that a load
never needs: ``next_segment`` names its new segment and ``generation`` its deletion files, so a forged value
(``next_segment=0`` beside ``seg-00000``) would make it write over a segment.  Every field is therefore
checked here, its type, its range and its agreement with the others, before either kind of caller uses it,
and a bad one is refused naming the file and the field (:class:`cutext.stages.runtime.artifacts.ArtifactError`).
"""
from __future__ import annotations

import math
from pathlib import Path

from cutext.stages.runtime import artifacts as art
from cutext.stages.text import bm25 as bm25_stage
from cutext.stages.text.tokenize import TokenizerConfig

__all__ = ["KIND", "read_index_manifest", "check_index_manifest", "bm25f_spec", "segment_number"]

KIND = "cutext.bm25"
# informational fields: a string (or null) when present
_TEXT_FIELDS = ("version", "created", "format", "source", "backend", "scheduler", "checksum")
# counts of the whole index that a commit carries over and sums
_COUNTS = ("n_docs", "n_terms", "n_postings", "n_tokens", "n_empty_docs")


def read_index_manifest(index, verify: bool = True) -> dict:
    """``index/index.json`` read (:func:`cutext.stages.runtime.artifacts.read_manifest`) and checked
    (:func:`check_index_manifest`).

    Raises
    ------
    ArtifactNotFoundError
        No such directory or manifest.
    ArtifactError (ValueError)
        Not a cutext BM25 index, a checksum that does not match (with ``verify``), or a field of the
        manifest that is not valid (the message names the file and the field).
    """
    meta = art.read_manifest(index, "index.json", KIND, "a cutext BM25 index", verify=verify)
    check_index_manifest(meta, Path(index) / "index.json")
    return meta


def segment_number(name: str) -> int | None:
    """The number a writer gave a segment folder (``seg-00012`` -> 12), or None for a name without one."""
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if "-" in name and tail.isdigit() else None


def check_index_manifest(meta: dict, mf) -> None:
    """Check every field of an index manifest ``meta`` (read from the file ``mf``).

    Fields and rules: ``index_format`` 1 or 2; ``N`` an int >= 0 and ``avgdl`` a finite float >= 0 (0 when N
    is); ``variant``, ``k1``, ``b``, ``delta`` as :func:`cutext.stages.text.bm25.check_params` takes them;
    ``tokenizer`` as :meth:`TokenizerConfig.from_dict` takes it; ``bm25f`` as :func:`bm25f_spec`;
    ``store_text`` and ``positions`` bools; ``keep_columns`` distinct column names; ``n_workers`` an int >= 1;
    ``counts`` ints >= 0, its ``n_docs`` equal to N, ``n_tokens / n_docs`` to avgdl and ``n_empty_docs`` at
    most N; ``timings`` finite seconds >= 0; ``generation`` an int >= 0; the informational fields strings.
    A segmented index (format 2) also: ``segments`` distinct folder names, ``deletes`` a map of some of them
    to file names, and ``next_segment`` (absent: the number of segments, as the writers take it) an int
    greater than the number of every listed segment, so that no writer reuses a segment's name.  Fields not
    named here are not used by any code and are left alone.

    Raises
    ------
    ArtifactError (ValueError)
        The first field that breaks its rule; the message names the file and the field.
    """
    fmt = meta.get("index_format", 1)
    if isinstance(fmt, bool) or fmt not in (1, 2):
        raise art.ArtifactError(f"{mf}: index_format {fmt!r} is not one this cutext reads (1 or 2); "
                                "rebuild the index with this version (cutext bm25 PATH --out DIR)")
    for key in _TEXT_FIELDS:
        if meta.get(key) is not None and not isinstance(meta[key], str):
            raise art.ArtifactError(f"{mf}: field {key!r} must be a string, got {meta[key]!r}"[:300])
    N = art.field_int(meta, "N", mf, lo=0)
    avgdl = art.field_float(meta, "avgdl", mf, lo=0)
    if N == 0 and avgdl != 0:
        raise art.ArtifactError(f"{mf}: field 'avgdl' = {avgdl} with N = 0 (no document: 0)")
    try:
        TokenizerConfig.from_dict(art.field_dict(meta, "tokenizer", mf))
        bm25_stage.check_params(meta.get("variant", "lucene"), meta.get("k1", 0.9), meta.get("b", 0.4),
                                meta.get("delta"))
    except art.ArtifactError:
        raise
    except (TypeError, ValueError, KeyError) as exc:
        raise art.ArtifactError(f"{mf}: {exc}") from None
    bm25f_spec(meta, mf)
    for key in ("store_text", "positions"):
        if key in meta and not isinstance(meta[key], bool):
            raise art.ArtifactError(f"{mf}: field {key!r} must be true or false, got {meta[key]!r}"[:300])
    cols = meta.get("keep_columns")
    if cols is not None and not (isinstance(cols, list) and all(isinstance(c, str) and c for c in cols)
                                 and len(set(cols)) == len(cols)):
        raise art.ArtifactError(f"{mf}: field 'keep_columns' must be a list of distinct column names, "
                                f"got {cols!r}"[:300])
    if meta.get("n_workers") is not None:
        art.field_int(meta, "n_workers", mf, lo=1)
    if "generation" in meta:
        art.field_int(meta, "generation", mf, lo=0)
    _check_counts(meta, mf, N, avgdl)
    _check_timings(meta, mf)
    _check_listing(meta, mf)
    if fmt == 2:
        _check_segments(meta, mf)


def _check_counts(meta: dict, mf, N: int, avgdl: float) -> None:
    if "counts" not in meta:
        return
    counts = art.field_dict(meta, "counts", mf)
    for key in counts:
        art.field_int(counts, key, f"{mf}: counts", lo=0)
    if "n_docs" in counts and counts["n_docs"] != N:
        raise art.ArtifactError(f"{mf}: field 'counts.n_docs' = {counts['n_docs']} is not N = {N}")
    if "n_empty_docs" in counts and counts["n_empty_docs"] > N:
        raise art.ArtifactError(f"{mf}: field 'counts.n_empty_docs' = {counts['n_empty_docs']} exceeds N = {N}")
    if N and "n_tokens" in counts and not math.isclose(counts["n_tokens"] / N, avgdl, rel_tol=1e-9):
        raise art.ArtifactError(f"{mf}: field 'avgdl' = {avgdl} is not counts.n_tokens / N = "
                                f"{counts['n_tokens']} / {N}")


def _check_timings(meta: dict, mf) -> None:
    if "timings" not in meta:
        return
    timings = art.field_dict(meta, "timings", mf)
    for key in timings:
        art.field_float(timings, key, f"{mf}: timings", lo=0)


def _check_listing(meta: dict, mf) -> None:
    """The checksum listing's shape (its contents are checked against the files by
    :mod:`cutext.stages.runtime.checksums`)."""
    if "files" in meta and not isinstance(meta["files"], dict):
        raise art.ArtifactError(f"{mf}: field 'files' must be an object, got {meta['files']!r}"[:300])
    dirs = meta.get("dirs")
    if "dirs" in meta and not (isinstance(dirs, list) and all(isinstance(d, str) for d in dirs)):
        raise art.ArtifactError(f"{mf}: field 'dirs' must be a list of folder names, got {dirs!r}"[:300])


def _check_segments(meta: dict, mf) -> None:
    names = meta.get("segments")
    if not isinstance(names, list) or not all(isinstance(n, str) and "/" not in n and "\\" not in n
                                              and n not in ("", ".", "..") for n in names):
        raise art.ArtifactError(f"{mf}: 'segments' must be a list of segment folder names, got {names!r}"[:300])
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise art.ArtifactError(f"{mf}: field 'segments' lists {twice[:5]} more than once")
    spec = meta.get("deletes", {})
    if not isinstance(spec, dict) or not set(spec) <= set(names) or not all(
            isinstance(v, str) and v and "/" not in v and "\\" not in v and v not in (".", "..")
            for v in spec.values()):
        raise art.ArtifactError(f"{mf}: 'deletes' must map segments of the index to files, got {spec!r}"[:300])
    if "next_segment" in meta:
        nxt, what = art.field_int(meta, "next_segment", mf, lo=0), "field 'next_segment'"
    else:
        nxt, what = len(names), "field 'next_segment' (absent: the number of segments)"
    numbers = [(k, n) for n in names if (k := segment_number(n)) is not None]
    if numbers and nxt <= max(numbers)[0]:
        top = max(numbers)
        raise art.ArtifactError(f"{mf}: {what} = {nxt} must be greater than the number of every listed segment "
                                f"({top[1]}): a writer would reuse a segment's name")


def bm25f_spec(meta: dict, mf) -> tuple | None:
    """``(fields, weights, bs)`` of a BM25F index from its index.json's ``bm25f`` (None: one field).

    Raises
    ------
    ArtifactError
        A ``bm25f`` entry that is not ``{"fields": [str, ...], "weights": [float, ...], "b": [float, ...]}`` of
        one length with valid values.
    """
    spec = meta.get("bm25f")
    if spec is None:
        return None
    try:
        fields, ws, bs = spec["fields"], spec["weights"], spec["b"]
        if not (isinstance(fields, list) and fields and all(isinstance(f, str) for f in fields)
                and len(set(fields)) == len(fields) and isinstance(ws, list) and isinstance(bs, list)
                and len(ws) == len(bs) == len(fields)):
            raise ValueError("fields, weights and b must be lists of one length")
        ws, bs = bm25_stage.check_field_params(fields, ws, bs)
    except (TypeError, KeyError, ValueError) as exc:
        raise art.ArtifactError(f"{mf}: bm25f {spec!r}: {exc}"[:500]) from None
    return tuple(fields), ws, bs
