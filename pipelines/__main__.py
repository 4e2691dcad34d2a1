"""Command line: ``python -m cutext.pipelines {bm25,search,evaluate} ...`` (also the ``cutext`` script)."""
from __future__ import annotations

import argparse
import json
import sys


def _add_bm25(sub):
    p = sub.add_parser("bm25", help="build a BM25 index from a corpus",
                       description="Build a term-major BM25 index (Parquet + JSON) from a corpus. "
                                   "The index directory appears only when complete.")
    p.add_argument("path", nargs="+", help="corpus: files, a directory, a glob or fsspec URLs")
    p.add_argument("--out", required=True, help="index directory to write")
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", "gpu"],
                   help="auto = GPU when cudf and a device are present (default: auto)")
    p.add_argument("--scheduler", default="auto", choices=["auto", "sync", "threads", "cluster"],
                   help="auto = in-process for inputs under 256 MiB, else a local (CUDA) cluster")
    p.add_argument("--workers", type=int, default=None, help="workers of a local cluster (default: one per GPU/core)")
    p.add_argument("--scheduler-address", default=None, help="connect to an existing dask scheduler (tcp://host:8786)")
    p.add_argument("--variant", default="lucene", choices=["lucene", "robertson", "atire", "bm25l", "bm25+"],
                   help="BM25 formula (default lucene)")
    p.add_argument("--k1", type=float, default=1.2, help="term-frequency saturation (default 1.2)")
    p.add_argument("--b", type=float, default=0.75, help="length normalization in [0, 1] (default 0.75)")
    p.add_argument("--delta", type=float, default=None, help="bm25l/bm25+ lower bound (default 0.5 / 1.0)")
    p.add_argument("--stopwords", default=None,
                   help="'lucene' (Lucene's 33 English stopwords), 'none', or a file with one word per line")
    p.add_argument("--stemmer", default=None, help="Snowball algorithm: porter, english, german, ... (default none)")
    p.add_argument("--no-lowercase", action="store_true", help="keep case")
    p.add_argument("--min-len", type=int, default=1, help="drop tokens shorter than this (code points)")
    p.add_argument("--max-len", type=int, default=None, help="drop tokens longer than this (code points)")
    p.add_argument("--format", default="auto", choices=["auto", "files", "lines", "jsonl", "parquet", "csv"],
                   help="input format (auto: by suffix; a directory of other files = one document per file)")
    p.add_argument("--text-column", action="append", default=None,
                   help="text column of jsonl/parquet/csv input; repeat to join several (title, text)")
    p.add_argument("--id-column", default=None, help="source id column (default: id, _id, doc_id, docid if present)")
    p.add_argument("--blocksize", type=int, default=64 << 20, help="bytes per input partition (default 64 MiB)")
    p.add_argument("--encoding", default="utf-8", help="input text encoding (undecodable bytes are replaced and counted)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _add_search(sub):
    p = sub.add_parser("search", help="run queries against an index, write a TREC run",
                       description="Score queries with an index; writes a TREC run (qid Q0 docid rank score tag).")
    p.add_argument("index", help="index directory written by 'bm25'")
    p.add_argument("--queries", required=True,
                   help="queries: TREC topics (SGML), BEIR queries.jsonl, 'qid<TAB>text' TSV, or one query per line")
    p.add_argument("--k", type=int, default=1000, help="documents per query (default 1000)")
    p.add_argument("--out", default="-", help="run file to write (default: standard output)")
    p.add_argument("--backend", default="cpu", choices=["auto", "cpu", "gpu"], help="where to score (default cpu)")
    p.add_argument("--batch-size", type=int, default=4096, help="queries per sparse product")
    p.add_argument("--tag", default="cutext", help="run tag (last column)")
    p.add_argument("--topic-field", default="title", choices=["title", "desc", "title+desc"],
                   help="field of classic TREC topics to use")


def _add_evaluate(sub):
    p = sub.add_parser("evaluate", help="score a TREC run against qrels (trec_eval conventions)",
                       description="MAP, P@k, nDCG@k, recall@k, MRR of a run, as trec_eval computes them.")
    p.add_argument("run", help="TREC run file")
    p.add_argument("qrels", help="TREC qrels (qid iter docid rel) or BEIR qrels TSV")
    p.add_argument("--metrics", nargs="+", default=["map", "P@30", "ndcg@10"], help="metrics (default map P@30 ndcg@10)")
    p.add_argument("--per-query", action="store_true", help="also print per-query values")


def read_queries(path, topic_field="title"):
    """Queries from TREC SGML topics, BEIR jsonl/TSV, or plain lines (ids 1..n)."""
    import gzip

    import pandas as pd

    from cutext.pipelines import evaluate as ev

    p = str(path)
    opener = gzip.open if p.endswith(".gz") else open
    with opener(p, "rt", encoding="utf-8") as fh:
        head = fh.read(4096)
    if "<top>" in head or "<DOC>" in head or "<doc>" in head:
        return ev.read_trec_topics(p, field=topic_field)
    first = head.lstrip().split("\n", 1)[0]
    if first.startswith("{") or "\t" in first:
        return ev.read_beir_queries(p)
    with opener(p, "rt", encoding="utf-8") as fh:
        lines = [line.strip() for line in fh if line.strip()]
    return pd.DataFrame({"query_id": [str(i + 1) for i in range(len(lines))], "query": lines})


# Pipelines other than bm25 bring their own subcommands: a module here that defines
# ``add_cli(subparsers)`` (which registers its parsers with ``set_defaults(cli_main=f)``, f(args) -> int).
_CLI_MODULES = ("ngram", "cluster", "lda")


def _plugin_modules():
    import importlib

    mods = []
    for name in _CLI_MODULES:
        full = f"cutext.pipelines.{name}"
        try:
            mods.append(importlib.import_module(full))
        except ModuleNotFoundError as exc:
            if exc.name != full:
                raise
    return mods


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cutext.pipelines",
                                 description="cutext: GPU/CPU text-analytics pipelines")
    sub = ap.add_subparsers(dest="command", required=True)
    _add_bm25(sub)
    _add_search(sub)
    _add_evaluate(sub)
    for mod in _plugin_modules():
        if hasattr(mod, "add_cli"):
            mod.add_cli(sub)
    args = ap.parse_args(argv)
    try:
        if getattr(args, "cli_main", None) is not None:
            return int(args.cli_main(args) or 0)
        if args.command == "bm25":
            from cutext import pipelines

            client = None
            if args.scheduler_address:
                from distributed import Client

                client = Client(args.scheduler_address)
            text_col = args.text_column[0] if args.text_column and len(args.text_column) == 1 else args.text_column
            path = args.path[0] if len(args.path) == 1 else args.path
            r = pipelines.run("bm25", path, out=args.out, backend=args.backend, scheduler=args.scheduler,
                              n_workers=args.workers, client=client, variant=args.variant, k1=args.k1, b=args.b,
                              delta=args.delta, stopwords=args.stopwords, stemmer=args.stemmer,
                              lowercase=not args.no_lowercase, min_len=args.min_len, max_len=args.max_len,
                              format=args.format, text_column=text_col, id_column=args.id_column,
                              blocksize=args.blocksize, encoding=args.encoding, progress=not args.no_progress)
            print(json.dumps(r.to_dict(), indent=2, default=str) if args.json else str(r))
        elif args.command == "search":
            from cutext.pipelines import BM25Index
            from cutext.pipelines.evaluate import write_trec_run

            queries = read_queries(args.queries, args.topic_field)
            index = BM25Index.load(args.index, backend=args.backend)
            run = index.search(queries, k=args.k, batch_size=args.batch_size, progress=sys.stderr.isatty())
            if args.out == "-":
                for q, d, r_, s in zip(run.query_id, run.doc_id, run["rank"], run.score):
                    sys.stdout.write(f"{q} Q0 {d} {r_} {s:.6f} {args.tag}\n")
            else:
                write_trec_run(run, args.out, tag=args.tag)
                print(f"wrote {len(run)} rows for {run.query_id.nunique()} queries to {args.out}", file=sys.stderr)
        elif args.command == "evaluate":
            from cutext.pipelines.evaluate import evaluate, read_beir_qrels, read_trec_run

            res = evaluate(read_trec_run(args.run), read_beir_qrels(args.qrels), metrics=args.metrics,
                           per_query=args.per_query)
            if args.per_query:
                res, per = res
                print(per.to_string(index=False))
            for k, v in res.items():
                print(f"{k}\t{v:.4f}")
    except (FileNotFoundError, FileExistsError, ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
