"""The ``vertebrae`` command: one subcommand per stage; argument parsing only.

Errors vertebrae raises on purpose are printed as one line (``vertebrae: error: ...``) with exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from vertebrae import __version__
from vertebrae.core.errors import VertebraeError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vertebrae", description="Compare frozen embedding backbones on your data.")
    parser.add_argument("--version", action="version", version=f"vertebrae {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("plan", help="write one job spec (from the workflow plan) after re-deriving its fingerprint")
    p.add_argument("--spec", required=True, help="the job spec as JSON text")
    p.add_argument("--output", required=True)

    p = sub.add_parser("fit-extractor", help="fit a learning extractor once on its fit endpoint")
    p.add_argument("--plan-json", required=True)
    p.add_argument("--output", required=True)

    p = sub.add_parser("embed-shard", help="embed one shard of an endpoint")
    p.add_argument("--plan-json", required=True)
    p.add_argument("--shard-index", required=True, type=int)
    p.add_argument("--output", required=True)

    p = sub.add_parser("merge-embeddings", help="merge an endpoint's shards, checking row order and ids")
    p.add_argument("--plan-json", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("shards", nargs="+")

    p = sub.add_parser("compress", help="fit a label-free compressor on the samples and apply it")
    p.add_argument("--plan-json", required=True)
    p.add_argument("--embeddings", required=True)
    p.add_argument("--output", required=True)

    p = sub.add_parser("write-protocol", help="write the labelled protocol (row ids, label keys, label catalog)")
    p.add_argument("--plan-json", required=True)
    p.add_argument("--output", required=True)

    p = sub.add_parser("score", help="score one candidate's embeddings against the protocol")
    p.add_argument("--plan-json", required=True)
    p.add_argument("--embeddings", required=True)
    p.add_argument("--protocol", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--metric", action="append", default=[], metavar="MODULE:FUNCTION",
                   help="an extra callable metric (importable path); repeatable")

    p = sub.add_parser("report", help="rank a benchmark's scores into JSON and Markdown reports")
    p.add_argument("--plan-json", required=True)
    p.add_argument("--protocol", required=True)
    p.add_argument("--json-output", required=True)
    p.add_argument("--markdown-output", required=True)
    p.add_argument("scores", nargs="+")
    p = sub.add_parser("plan-retrieval", help="write one retrieval job spec (same as plan)")
    p.add_argument("--spec", required=True)
    p.add_argument("--output", required=True)

    p = sub.add_parser("embed-retrieval-shard", help="embed one shard of the query or gallery endpoint")
    p.add_argument("--plan-json", required=True)
    p.add_argument("--side", required=True, choices=["query", "gallery"])
    p.add_argument("--shard-index", required=True, type=int)
    p.add_argument("--output", required=True)

    p = sub.add_parser("merge-retrieval-embeddings", help="merge an endpoint's shards")
    p.add_argument("--plan-json", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("shards", nargs="+")

    p = sub.add_parser("write-retrieval-relevance", help="write the retrieval protocol (ids, relevance, exclusions)")
    p.add_argument("--plan-json", required=True)
    p.add_argument("--output", required=True)

    p = sub.add_parser("compress-retrieval", help="fit compression on the gallery and apply it to both endpoints")
    p.add_argument("--plan-json", required=True)
    p.add_argument("--queries", required=True)
    p.add_argument("--gallery", required=True)
    p.add_argument("--query-output", required=True)
    p.add_argument("--gallery-output", required=True)

    p = sub.add_parser("score-retrieval", help="exact ranking of one candidate against the protocol")
    p.add_argument("--plan-json", required=True)
    p.add_argument("--queries", required=True)
    p.add_argument("--gallery", required=True)
    p.add_argument("--protocol", required=True)
    p.add_argument("--output", required=True)

    p = sub.add_parser("retrieval-from-artifacts", help="a ranked retrieval report from score artifacts")
    p.add_argument("--plan-json", required=True)
    p.add_argument("--protocol", required=True)
    p.add_argument("--json-output", required=True)
    p.add_argument("--markdown-output", required=True)
    p.add_argument("scores", nargs="+")

    p = sub.add_parser("figures", help="render a report's figures (ranking; per-class scores or confusion matrix)")
    p.add_argument("--report", required=True, help="a report.json (labelled, retrieval or zero-shot)")
    p.add_argument("--ranking-output", required=True)
    p.add_argument("--detail-output", required=True)
    _zero_shot_parsers(sub)
    return parser


def _zero_shot_parsers(sub) -> None:
    p = sub.add_parser("plan-zero-shot", help="write one zero-shot job spec (same as plan)")
    p.add_argument("--spec", required=True)
    p.add_argument("--output", required=True)

    p = sub.add_parser("embed-zero-shot-shard", help="embed one shard of the samples or the prompts")
    p.add_argument("--plan-json", required=True)
    p.add_argument("--side", required=True, choices=["samples", "prompts"])
    p.add_argument("--shard-index", required=True, type=int)
    p.add_argument("--protocol", help="the zero-shot protocol (required for --side prompts)")
    p.add_argument("--output", required=True)

    p = sub.add_parser("merge-zero-shot-embeddings", help="merge an endpoint's shards")
    p.add_argument("--plan-json", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("shards", nargs="+")

    p = sub.add_parser("write-zero-shot-protocol", help="write the zero-shot protocol (labels, prompts, catalog)")
    p.add_argument("--plan-json", required=True)
    p.add_argument("--output", required=True)

    p = sub.add_parser("compress-zero-shot", help="fit compression on the samples (applied to the prompts when scoring)")
    p.add_argument("--plan-json", required=True)
    p.add_argument("--samples", required=True)
    p.add_argument("--output", required=True)

    p = sub.add_parser("score-zero-shot", help="score one candidate's samples against its prompt prototypes")
    p.add_argument("--plan-json", required=True)
    p.add_argument("--samples", required=True)
    p.add_argument("--prompts", required=True)
    p.add_argument("--protocol", required=True)
    p.add_argument("--raw-samples", help="the raw samples a compressed variant was fitted on")
    p.add_argument("--output", required=True)

    p = sub.add_parser("zero-shot-from-artifacts", help="a ranked zero-shot report from score artifacts")
    p.add_argument("--score-key", action="append", required=True, metavar="SCORE", help="a score artifact; repeatable")
    p.add_argument("--protocol", required=True)
    p.add_argument("--plan-json", help="the report job spec (candidate names and expected score fingerprints)")
    p.add_argument("--benchmark", help="report name when no --plan-json is given")
    p.add_argument("--json-output", required=True)
    p.add_argument("--markdown-output", required=True)


def _dispatch(args: argparse.Namespace) -> None:
    if args.command == "figures":
        from vertebrae.reports.figures import write_report_figures

        return write_report_figures(args.report, args.ranking_output, args.detail_output)
    if args.command in ("plan", "plan-retrieval", "plan-zero-shot"):
        # one job spec checked and written: about fifty per workflow run, so a light module of its own
        from vertebrae.stages.plan import run_plan

        return run_plan(args.spec, args.output)
    if args.command.startswith(("embed-zero-shot", "merge-zero-shot", "write-zero-shot", "compress-zero-shot",
                                "score-zero-shot", "zero-shot-")):
        return _dispatch_zero_shot(args)
    from vertebrae.stages import jobs

    if args.command == "fit-extractor":
        jobs.run_fit(args.plan_json, args.output)
    elif args.command == "embed-shard":
        jobs.run_embed_shard(args.plan_json, args.shard_index, args.output)
    elif args.command == "merge-embeddings":
        jobs.run_merge(args.plan_json, args.shards, args.output)
    elif args.command == "compress":
        jobs.run_compress(args.plan_json, args.embeddings, args.output)
    elif args.command == "write-protocol":
        jobs.run_write_protocol(args.plan_json, args.output)
    elif args.command == "score":
        jobs.run_score(args.plan_json, args.embeddings, args.protocol, args.output, extra_metrics=args.metric)
    elif args.command == "embed-retrieval-shard":
        jobs.run_embed_shard(args.plan_json, args.shard_index, args.output, side=args.side)
    elif args.command == "merge-retrieval-embeddings":
        jobs.run_merge(args.plan_json, args.shards, args.output)
    elif args.command == "write-retrieval-relevance":
        jobs.run_write_retrieval_relevance(args.plan_json, args.output)
    elif args.command == "compress-retrieval":
        jobs.run_compress_retrieval(args.plan_json, args.queries, args.gallery, args.query_output, args.gallery_output)
    elif args.command == "score-retrieval":
        jobs.run_score_retrieval(args.plan_json, args.queries, args.gallery, args.protocol, args.output)
    elif args.command == "retrieval-from-artifacts":
        jobs.run_retrieval_report(args.plan_json, args.protocol, args.scores, args.json_output, args.markdown_output)
    elif args.command == "report":
        jobs.run_report(args.plan_json, args.protocol, args.scores, args.json_output, args.markdown_output)


def _dispatch_zero_shot(args: argparse.Namespace) -> None:
    from vertebrae.stages import zero_shot_jobs as zs

    if args.command == "embed-zero-shot-shard":
        zs.run_embed_shard(args.plan_json, args.side, args.shard_index, args.output, protocol=args.protocol)
    elif args.command == "merge-zero-shot-embeddings":
        zs.run_merge(args.plan_json, args.shards, args.output)
    elif args.command == "write-zero-shot-protocol":
        zs.run_write_protocol(args.plan_json, args.output)
    elif args.command == "compress-zero-shot":
        zs.run_compress(args.plan_json, args.samples, args.output)
    elif args.command == "score-zero-shot":
        zs.run_score(args.plan_json, args.samples, args.prompts, args.protocol, args.output, raw_samples=args.raw_samples)
    elif args.command == "zero-shot-from-artifacts":
        zs.run_report(args.protocol, args.score_key, args.json_output, args.markdown_output, plan=args.plan_json,
                      benchmark=args.benchmark)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        _dispatch(args)
    except VertebraeError as exc:
        print(f"vertebrae: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
