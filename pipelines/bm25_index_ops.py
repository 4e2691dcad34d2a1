"""Maintenance of a segmented bm25 index (``index_format=2``): append documents, delete documents,
merge or compact segments; each a new commit swapped in atomically, the old segments hard-linked into it
(Lucene's IndexWriter in append mode, deleteDocuments, maybeMerge and forceMerge).  The command line:
``bm25-append``, ``bm25-delete``, ``bm25-merge``, ``bm25-compact``.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cutext.pipelines._cli import Command, print_result
from cutext.pipelines._result import RunResult
from cutext.pipelines._run import PipelineRun
from cutext.pipelines.bm25 import append_index
from cutext.stages.engines import index_commits as commits
from cutext.stages.engines import merge_policy
from cutext.stages.engines.bm25_index import BM25Index
from cutext.stages.runtime import artifacts as art

__all__ = ["append_index", "delete_documents", "compact_index", "merge_index", "convert_index", "add_cli",
           "read_ids_file"]


def delete_documents(index, source_ids) -> RunResult:
    """Delete documents from a segmented index by their source ids (Lucene's deletes: recorded, not rewritten).

    Each segment's deleted local documents are written to ``deletes/`` and listed in a new commit (the
    segments are hard-linked into it); the loader drops them, so the index scores as a one-shot build of the
    remaining documents (N, avgdl and df recounted).  :func:`compact_index` rewrites the segments without them.

    Parameters
    ----------
    index : str or os.PathLike
        A segmented index (``index_format=2``).
    source_ids : str or iterable of str
        The ``source_id`` of every document to delete, exactly as stored (never stripped or converted: an
        int is refused); every one must be in the index (a document already deleted counts as absent).

    Returns
    -------
    RunResult
        ``counts`` of the index after the deletion, with ``deleted_docs``: the documents removed (every live
        copy of an id counts).

    Raises
    ------
    ArtifactError (ValueError)
        Not a segmented cutext bm25 index, or a damaged one.
    TypeError
        ``source_ids`` is None, a number, or holds a non-str.
    ValueError
        Source ids that are not in the index (up to five named), or none given.
    OutputBusyError (FileExistsError)
        Another writer committed to the index meanwhile; nothing was written.
    """
    t0 = time.perf_counter()
    counts = commits.commit_deletion(index, source_ids)
    return _result(index, counts, time.perf_counter() - t0)


def compact_index(index) -> RunResult:
    """Rewrite a segmented index as one segment without its deleted documents (Lucene's forceMerge(1)).

    Parameters
    ----------
    index : str or os.PathLike
        A segmented index (``index_format=2``).

    Returns
    -------
    RunResult
        ``counts`` of the compacted index; its scores are those before (and of a one-shot build of its
        documents).

    Raises
    ------
    ArtifactError (ValueError)
        Not a segmented cutext bm25 index, or a damaged one.
    OutputBusyError (FileExistsError)
        Another writer committed to the index meanwhile; nothing was written.
    """
    t0 = time.perf_counter()
    counts = commits.commit_compaction(index)
    return _result(index, counts, time.perf_counter() - t0)


def merge_index(index, max_segments=None) -> RunResult:
    """Merge runs of adjacent segments of a segmented index (Lucene's maybeMerge, or forceMerge(n)).

    Parameters
    ----------
    index : str or os.PathLike
        A segmented index (``index_format=2``).
    max_segments : int, optional
        Merge until at most this many segments remain (>= 1; 1 is a compaction); default: the merges of the
        merge policy (ten adjacent segments of one size tier become one;
        :func:`cutext.stages.engines.merge_policy.plan_merges`).

    Returns
    -------
    RunResult
        ``counts`` of the index afterwards, with ``merged_segments`` (0: nothing to merge, nothing written);
        its scores are those before.

    Raises
    ------
    ArtifactError (ValueError)
        Not a segmented cutext bm25 index, or a damaged one.
    ValueError
        ``max_segments`` not an integer >= 1.
    OutputBusyError (FileExistsError)
        Another writer committed to the index meanwhile; nothing was written.
    """
    t0 = time.perf_counter()
    counts = merge_policy.commit_merges(index, max_segments)
    return _result(index, counts, time.perf_counter() - t0)


def convert_index(index, out=None) -> RunResult:
    """A format-1 index rewritten as a segmented one (one segment), without its source documents.

    The tf of every posting, the vocabulary and the documents table are what a segment stores; the weights
    are dropped and recomputed at load from the same statistics, so the converted index scores as before.

    Parameters
    ----------
    index : str or os.PathLike
        A format-1 index (it is checked whole: :meth:`BM25Index.load`).
    out : str or os.PathLike, optional
        Where to write the segmented index (default: replace ``index``, atomically).

    Returns
    -------
    RunResult

    Raises
    ------
    ArtifactError (ValueError)
        Not a cutext bm25 index, a damaged one, or one already segmented.
    """
    index = Path(index)
    out = index if out is None else Path(out)
    old, expect = commits.read_commit(index)
    if old.get("index_format", 1) != 1:
        raise art.ArtifactError(f"{index / 'index.json'}: already a segmented index (index_format 2)")
    loaded = BM25Index.load(index, backend="cpu")  # every check of a format-1 index
    files = sorted((index / "postings").glob("*.parquet"))
    post = pa.concat_tables([pq.read_table(f, columns=["term_id", "doc_id", "tf"]) for f in files])
    t, d, tf = (post.column(c).to_numpy() for c in ("term_id", "doc_id", "tf"))
    del post
    o = np.lexsort((d, t))  # term-major, docs ascending (as written; a foreign writer may differ)
    staged = {"terms": loaded.vocab, "df": loaded.df[1:], "doc": d[o].astype(np.int32), "tf": tf[o],
              "lengths": loaded.lengths, "source_ids": pa.array(loaded.source_ids, pa.string())}
    del loaded, t, d, tf, o
    base = {**old, "index_format": 2, "segments": [], "deletes": {}, "next_segment": 0}
    run = PipelineRun("bm25", out, manifest="index.json", inputs=None if out == index else [index],
                      progress=False)
    with run.output(expect if out == index else None) as tmp:
        counts = commits.write_commit(tmp, index, base, [], [], {"converted_from_format": 1},
                                      new=("seg-00000", staged), timings=run.timings)
    return _result(out, counts, sum(run.timings.values()), old)


def _result(index, counts: dict, seconds: float, meta: dict | None = None) -> RunResult:
    """The :class:`RunResult` of a commit without a front end (delete, compact, convert)."""
    meta = meta or json.loads((Path(index) / "index.json").read_text(encoding="utf-8"))
    return RunResult("bm25", Path(index).absolute(), meta.get("backend", "cpu"), "sync", 1, counts,
                     {"commit": seconds},
                     {k: meta[k] for k in ("variant", "k1", "b", "delta", "tokenizer") if k in meta},
                     headline={"documents": counts["n_docs"], "terms": counts["n_terms"],
                               "postings": counts["n_postings"]})


def _append_cli_main(args, kw) -> int:
    """``bm25-append PATH... --index DIR``: add the documents, print the result (``--json``: as JSON)."""
    r = append_index(kw.pop("path"), kw.pop("index"), **kw)
    print_result(r, args.json)
    return 0


def _delete_cli_main(args, kw) -> int:
    """``bm25-delete ID... --index DIR``: delete the documents, print the result."""
    ids = list(kw.pop("source_ids", []))
    if args.ids_file:
        ids += read_ids_file(args.ids_file)
    r = delete_documents(kw.pop("index"), ids, **kw)
    print_result(r, args.json)
    return 0


def read_ids_file(path) -> list:
    """The source ids of a file of one id a line, each line exactly as written: only the line break (``\\n``
    or ``\\r\\n``) ends it, nothing is stripped, and an empty line is no id (a UTF-8 byte-order mark at the
    start is dropped: it is the file's encoding, not an id's first character).

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        ``path`` is a directory, or not UTF-8 text (the line named).
    """
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"--ids-file {path}: is a directory; give a file of one source id a line")
    if not p.exists():
        raise FileNotFoundError(f"--ids-file {path}: no such file")
    raw = p.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ValueError(f"--ids-file {path}:{line}: not UTF-8 text ({exc.reason})") from None
    lines = text.split("\n")
    return [x[:-1] if x.endswith("\r") else x for x in lines if x not in ("", "\r")]


def _compact_cli_main(args, kw) -> int:
    """``bm25-compact --index DIR``: one segment without deletions, print the result."""
    print_result(compact_index(**kw), args.json)
    return 0


def _merge_cli_main(args, kw) -> int:
    """``bm25-merge --index DIR [--max-segments N]``: the merges, print the result."""
    print_result(merge_index(**kw), args.json)
    return 0


def _convert_cli_main(args, kw) -> int:
    """``bm25-convert --index DIR [--out DIR]``: the segmented index, print the result."""
    print_result(convert_index(**kw), args.json)
    return 0


_INDEX = {"index": dict(required=True)}

# the subcommands of this module; their options are the keywords of the functions they run
COMMANDS = (
    Command("bm25-append", append_index, _append_cli_main, help="append documents to a segmented BM25 index",
            description="Add documents to an index built with --index-format 2: new segments after the old ones, "
                        "with the index's own tokenizer and BM25 settings; the commit is atomic.",
            positional={"path": dict(nargs="+", metavar="PATH",
                                     help="the documents to add: files, a directory, a glob or fsspec URLs")},
            options=_INDEX, json=True),
    Command("bm25-delete", delete_documents, _delete_cli_main,
            help="delete documents from a segmented BM25 index by source id",
            description="Record deletions in a new commit of an index built with --index-format 2; the index then "
                        "scores as a build of the remaining documents.",
            positional={"source_ids": dict(nargs="*", metavar="ID", help="source ids of the documents to delete")},
            options=_INDEX, json=True,
            extra=((("--ids-file",), dict(default=None,
                                          help="a file with one source id per line (added to the IDs)")),),
            files=("ids_file",)),
    Command("bm25-convert", convert_index, _convert_cli_main,
            help="rewrite a format-1 BM25 index as a segmented one (no source needed)", options=_INDEX, json=True),
    Command("bm25-merge", merge_index, _merge_cli_main,
            help="merge runs of adjacent segments of a segmented BM25 index (its merge policy, or --max-segments)",
            options=_INDEX, json=True),
    Command("bm25-compact", compact_index, _compact_cli_main,
            help="rewrite a segmented BM25 index as one segment without its deletions", options=_INDEX, json=True),
)


def add_cli(sub) -> None:
    """Register ``bm25-append``, ``bm25-delete``, ``bm25-convert``, ``bm25-merge`` and ``bm25-compact`` with
    ``python -m cutext.pipelines``."""
    for command in COMMANDS:
        command.add_to(sub)
