"""The ``vertebrae`` command: one subcommand per job, from the table ``COMMANDS``; argument parsing only.

Each subcommand names the job function it runs (``module:function``, imported only when that subcommand runs, so
``vertebrae --help`` and the scoring subcommands import no model library) and the arguments it takes; an argument's
``dest`` is the function's parameter. Errors vertebrae raises on purpose are printed as one line
(``vertebrae: error: ...``) with exit status 2; when a job refuses a corrupt input artifact, that file and everything
built from it are moved aside first (``vertebrae.stages.verify.quarantine``; a stale or foreign one of a results
tree too) and the message says where, so that the next run rebuilds them. Under ``vertebrae run`` a job subcommand
is first offered to the run's job server (``vertebrae.core.job_client``), which runs this same ``main`` warm.

Besides the job subcommands the workflow calls, four take a user's config file directly:
``vertebrae run CONFIG [snakemake args...]`` (exit status: Snakemake's), ``vertebrae validate CONFIG``,
``vertebrae status CONFIG`` and ``vertebrae show CONFIG [BENCHMARK]``; ``vertebrae eval`` builds such a config from
``--data`` / ``--model`` specs and runs it. ``status``, ``show`` and ``leaderboard`` print one JSON document on
request (``--json``, ``--format json``). Exit status: 0 done, 2 a refusal (its one line on stderr), 141 when the
reader of stdout closed the pipe early (``| head``): no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vertebrae.core.errors import CorruptArtifactError, StaleArtifactError, VertebraeError
from vertebrae.core.job_client import SERVER_ENV, run_served
from vertebrae.core.storage import STORAGE_ROOT_ENV, enter_root


@dataclass(frozen=True)
class Arg:
    """One ``add_argument`` call: its flags (or positional name) and keyword options."""

    flags: tuple[str, ...]
    options: Mapping[str, Any] = field(default_factory=dict)


def arg(*flags: str, **options: Any) -> Arg:
    return Arg(flags, options)


@dataclass(frozen=True)
class Command:
    """A subcommand: its help line, the job function it runs and its arguments, in usage order."""

    help: str
    run: str
    args: tuple[Arg, ...]


#: exit status when stdout's reader closed the pipe early (128 + SIGPIPE, as a shell reports it)
CLOSED_PIPE = 141


def positive_int(text: str) -> int:
    """An argument that counts something (``--cores``, ``--shards``): a whole number of at least 1; argparse names
    the option in its usage error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


PLAN = arg("--plan-json", dest="plan", metavar="PLAN_JSON", required=True)
OUTPUT = arg("--output", required=True)
SPEC = arg("--spec", dest="spec", help="the job spec as JSON text (or give --spec-file)")
SPEC_FILE = arg("--spec-file", dest="spec_file", help="a job spec file the workflow wrote, named "
                                                      "{fingerprint}-{digest}.json and checked against both")
SHARD_INDEX = arg("--shard-index", required=True, type=int)
SHARDS = arg("shards", nargs="+")
PROTOCOL = arg("--protocol", required=True)
JSON_OUTPUT, MARKDOWN_OUTPUT = arg("--json-output", required=True), arg("--markdown-output", required=True)
JSON_FLAG = arg("--json", dest="json_output", action="store_true", help="print one JSON document instead of text")
REPORT = (PLAN, PROTOCOL, JSON_OUTPUT, MARKDOWN_OUTPUT, arg("scores", nargs="+"))

JOBS, LABELLED, RETRIEVAL, ZERO_SHOT = (f"vertebrae.stages.{m}" for m in ("jobs", "labelled_jobs", "retrieval_jobs",
                                                                          "zero_shot_jobs"))
RUN_PLAN = "vertebrae.stages.plan:run_plan"
FROM_ARTIFACTS, USER = "vertebrae.stages.from_artifacts", "vertebrae.cli.commands"
SCORE_KEY = arg("--score-key", dest="score_keys", action="append", metavar="SCORE",
                help="a score artifact; repeatable (before any positional ones)")
OPTIONAL_PROTOCOL = arg("--protocol", help="the protocol artifact; by default the one the --plan-json report spec "
                                           "names")
CONFIG = arg("config", metavar="CONFIG", help="a workflow config file (YAML or JSON); paths in it are relative to "
                                              "the current directory")
OUT_FOLDER = arg("--out", metavar="DIR", help="the run's one folder: reports, artifacts, logs, benchmark records and "
                "the run's state all go under it (default: the config's out, else results/); the config key out")
CONFIGS = arg("config", metavar="CONFIG", nargs="+", help="workflow config file(s) (YAML or JSON), merged in order "
                                                          "as Snakemake merges --configfile a.yaml b.yaml; paths in "
                                                          "them are relative to the current directory")

COMMANDS: dict[str, Command] = {
    "plan": Command("write one job spec (from the workflow plan) after re-deriving its fingerprint", RUN_PLAN,
                    (SPEC, SPEC_FILE, OUTPUT)),
    "fit-extractor": Command("fit a learning extractor once on its fit endpoint", f"{JOBS}:run_fit", (PLAN, OUTPUT)),
    "embed-shard": Command("embed one shard of an endpoint", f"{JOBS}:run_embed_shard", (PLAN, SHARD_INDEX, OUTPUT)),
    "embed-sweep-shard": Command("embed one shard of an endpoint at every layer of a layer sweep (one forward pass)",
                                 f"{JOBS}:run_embed_sweep_shard", (PLAN, SHARD_INDEX, OUTPUT)),
    "merge-embeddings": Command("merge an endpoint's shards, checking row order and ids", f"{JOBS}:run_merge",
                                (PLAN, OUTPUT, SHARDS)),
    "compress": Command("fit a label-free compressor on the samples and apply it", f"{LABELLED}:run_compress",
                        (PLAN, arg("--embeddings", required=True), OUTPUT)),
    "write-protocol": Command("write the labelled protocol (row ids, label keys, label catalog)",
                              f"{LABELLED}:run_write_protocol", (PLAN, OUTPUT)),
    "score": Command("score one candidate's embeddings against the protocol", f"{LABELLED}:run_score",
                     (PLAN, arg("--embeddings", required=True), PROTOCOL, OUTPUT,
                      arg("--metric", dest="extra_metrics", action="append", default=[], metavar="MODULE:FUNCTION",
                          help="an extra callable metric (importable path); repeatable"))),
    "score-labelled-partial": Command("one part of a candidate's labelled score (OverlapIndex, a stability repeat, "
                                      "Separatix or one declared metric), the workflow's per-metric job",
                                      "vertebrae.stages.labelled_partials:run_score_partial",
                                      (PLAN, arg("--embeddings", required=True), PROTOCOL, OUTPUT,
                                       arg("--overlap", help="the overlap partial (the Separatix part's gate)"))),
    "merge-labelled-partials": Command("merge a candidate's per-metric partials into its labelled score artifact",
                                       "vertebrae.stages.labelled_partials:run_merge_partials",
                                       (PLAN, arg("--embeddings", required=True), PROTOCOL, OUTPUT,
                                        arg("partials", nargs="*", help="the partial artifacts (default: the paths "
                                                                        "the merge spec plans)"))),
    "report": Command("rank a benchmark's scores into JSON and Markdown reports (labelled, retrieval or zero-shot plan)",
                      "vertebrae.stages.report_job:run_report",
                      (*REPORT, arg("--comparison", help="the benchmark's comparison artifact (vertebrae compare)"))),
    "compare": Command("paired intervals and tests of every pair of a benchmark's ranked candidates",
                       "vertebrae.stages.report_job:run_compare",
                       (PLAN, arg("--report-plan", required=True, help="the benchmark's report job spec"), PROTOCOL,
                        OUTPUT, arg("scores", nargs="+"))),
    "embed-retrieval-shard": Command("embed one shard of the query or gallery endpoint", f"{JOBS}:run_embed_shard",
                                     (PLAN, arg("--side", required=True, choices=["query", "gallery"]), SHARD_INDEX,
                                      OUTPUT)),
    "merge-retrieval-embeddings": Command("merge an endpoint's shards", f"{JOBS}:run_merge", (PLAN, OUTPUT, SHARDS)),
    "write-retrieval-relevance": Command("write the retrieval protocol (ids, relevance, exclusions)",
                                         f"{RETRIEVAL}:run_write_relevance", (PLAN, OUTPUT)),
    "compress-retrieval": Command("fit compression on the gallery and apply it to both endpoints",
                                  f"{RETRIEVAL}:run_compress",
                                  (PLAN, arg("--queries", required=True), arg("--gallery", required=True),
                                   arg("--query-output", required=True), arg("--gallery-output", required=True))),
    "score-retrieval": Command("exact ranking of one candidate against the protocol", f"{RETRIEVAL}:run_score",
                               (PLAN, arg("--queries", required=True), arg("--gallery", required=True), PROTOCOL,
                                OUTPUT)),
    "score-retrieval-partial": Command("one partial score of a fanned-out candidate: its query rows x gallery rows "
                                       "(one direction)", "vertebrae.stages.retrieval_fanout_jobs:run_score_partial",
                                       (PLAN, arg("--partial", metavar="FINGERPRINT",
                                                  help="the partial to score when --plan-json is the candidate's "
                                                       "merge spec"),
                                        arg("--queries", required=True), arg("--gallery", required=True),
                                        PROTOCOL, OUTPUT)),
    "score-retrieval-fanout-partial": Command(
        "one partial score of a fanned-out candidate, from the files of its stage-retrieval-fanout bundle (the "
        "workflow's partial jobs)", "vertebrae.stages.retrieval_fanout_jobs:run_score_fanout_partial",
        (arg("--fanout", required=True, metavar="FANOUT_DIR", help="the candidate's stage-retrieval-fanout bundle "
                                                                    "(a folder)"),
         arg("--partial", required=True, metavar="FINGERPRINT", help="the partial to score"), OUTPUT)),
    "stage-retrieval-fanout": Command("write a fanned-out candidate's fan-out bundle (a folder: its merge spec, "
                                      "endpoints and the protocol's relevance rows by query and by gallery item, "
                                      "with content hashes), the one input of its partial-score jobs",
                                      "vertebrae.stages.retrieval_fanout_jobs:run_fanout_inputs",
                                      (PLAN, arg("--queries", required=True), arg("--gallery", required=True),
                                       PROTOCOL, OUTPUT)),
    "merge-retrieval-partials": Command("merge a fanned-out candidate's partial scores into its score artifact",
                                        "vertebrae.stages.retrieval_fanout_jobs:run_merge_partials",
                                        (PLAN, PROTOCOL, OUTPUT,
                                         arg("partials", nargs="*", help="the partial artifacts (default: the paths "
                                                                         "the merge spec plans)"))),
    "retrieval-from-artifacts": Command("a ranked retrieval report from score artifacts",
                                        f"{FROM_ARTIFACTS}:retrieval_report",
                                        (PLAN, OPTIONAL_PROTOCOL, SCORE_KEY, JSON_OUTPUT, MARKDOWN_OUTPUT,
                                         arg("scores", nargs="*",
                                             help="score artifacts (or give them as --score-key)"))),
    "views-report": Command("a labelled benchmark's target views: the candidates x views table, the nuisance "
                            "verdicts and the score-by-level figure", "vertebrae.stages.views_job:run_views_report",
                            (PLAN, JSON_OUTPUT, MARKDOWN_OUTPUT,
                             arg("--figure-output", dest="figure_output", required=True),
                             arg("reports", nargs="+", help="every view's report.json, in the planned order"))),
    "figures": Command("render a report's figures (ranking; per-class scores or confusion matrix; comparison)",
                       "vertebrae.stages.verify:run_figures",
                       (arg("--report", dest="report_path", metavar="REPORT", required=True,
                            help="a report.json (labelled, retrieval or zero-shot); verified before it is drawn"),
                        arg("--ranking-output", dest="ranking_path", metavar="RANKING_OUTPUT", required=True),
                        arg("--detail-output", dest="detail_path", metavar="DETAIL_OUTPUT", required=True),
                        arg("--comparison-output", dest="comparison_path", metavar="COMPARISON_OUTPUT",
                            default=argparse.SUPPRESS,
                            help="the pairwise comparison matrix (or why the report has none); optional"))),
    "report-tables": Command("write a report's tables and warnings (from its report.md, checked against its "
                             "report.json) as HTML pages for snakemake --report",
                             "vertebrae.stages.verify_pages:run_report_tables",
                             (arg("--markdown", dest="markdown_path", metavar="REPORT_MD", required=True),
                              arg("--ranking-output", dest="ranking_path", required=True),
                              arg("--detail-output", dest="detail_path", required=True),
                              arg("--comparison-output", dest="comparison_path", required=True),
                              arg("--warnings-output", dest="warnings_path", required=True))),
    "report-page": Command("write a benchmark's one-page report.html from its report.md (checked against its "
                           "report.json; figures beside it)", "vertebrae.stages.verify_pages:write_report_page",
                           (arg("--markdown", dest="markdown_path", metavar="REPORT_MD", required=True), OUTPUT)),
    "results-index": Command("write results/index.html: every benchmark's report.html under RESULTS_DIR and the "
                             "leaderboard", "vertebrae.reports.report_page:write_index",
                             (arg("results_dir", metavar="RESULTS_DIR"), OUTPUT,
                              arg("--reports", nargs="*", metavar="REPORT_JSON",
                                  help="list the pages beside exactly these report.json files (the workflow's job: "
                                       "its plan lists them) instead of every reports/*/report.html"))),
    "verify": Command("check every artifact under RESULTS_DIR (schema, fingerprint, content hash); exit status 2 "
                      "when any is corrupt or stale; --storage s3://BUCKET/PREFIX checks the objects of a run on "
                      "object storage instead", "vertebrae.stages.verify_storage:run_verify",
                      (arg("results_dir", nargs="?", default="results", metavar="RESULTS_DIR",
                           help="the results folder (default results); with --storage, the run's out folder under "
                                "the prefix, as the run spelled it"),
                       arg("--repair", action="store_true",
                           help="move corrupt or stale artifacts, and what was built from them, aside so that the "
                                "workflow rebuilds exactly those (with --storage: in the bucket)"),
                       arg("--storage", metavar="URL",
                           help="s3://BUCKET/PREFIX, as given to `vertebrae run CONFIG --storage`: verify the objects "
                                "under PREFIX/RESULTS_DIR/ (downloaded into a temporary folder; endpoint and "
                                "credentials from the environment)"))),
    "plan-zero-shot": Command("write one zero-shot job spec (same as plan)", RUN_PLAN,
                              (SPEC, SPEC_FILE, OUTPUT)),
    "embed-zero-shot-shard": Command("embed one shard of the samples or the prompts", f"{ZERO_SHOT}:run_embed_shard",
                                     (PLAN, arg("--side", required=True, choices=["samples", "prompts"]), SHARD_INDEX,
                                      arg("--protocol", help="the zero-shot protocol (required for --side prompts)"),
                                      OUTPUT)),
    "merge-zero-shot-embeddings": Command("merge an endpoint's shards", f"{ZERO_SHOT}:run_merge", (PLAN, OUTPUT, SHARDS)),
    "write-zero-shot-protocol": Command("write the zero-shot protocol (labels, prompts, catalog)",
                                        f"{ZERO_SHOT}:run_write_protocol", (PLAN, OUTPUT)),
    "compress-zero-shot": Command("fit compression on the samples (applied to the prompts when scoring)",
                                  f"{ZERO_SHOT}:run_compress", (PLAN, arg("--samples", required=True), OUTPUT)),
    "score-zero-shot": Command("score one candidate's samples against its prompt prototypes", f"{ZERO_SHOT}:run_score",
                               (PLAN, arg("--samples", required=True), arg("--prompts", required=True), PROTOCOL,
                                arg("--raw-samples", help="the raw samples a compressed variant was fitted on"), OUTPUT)),
    "zero-shot-from-artifacts": Command(
        "a ranked zero-shot report from score artifacts", f"{FROM_ARTIFACTS}:zero_shot_report",
        (arg(*SCORE_KEY.flags, **SCORE_KEY.options, required=True), OPTIONAL_PROTOCOL,
         arg("--plan-json", dest="plan", metavar="PLAN_JSON",
             help="the report job spec (candidate names and expected score fingerprints)"),
         arg("--benchmark", help="report name when no --plan-json is given"),
         JSON_OUTPUT, MARKDOWN_OUTPUT)),
    "run": Command("run the workflow on CONFIG (several: merged in order) alone, in the current directory; further arguments go "
                   "to Snakemake (e.g. -n, --cores 8, --profile slurm: a profile of yours, or the one vertebrae carries); --storage "
                   "s3://BUCKET/PREFIX keeps the data and results in object storage, checked first", f"{USER}:run_workflow",
                   (arg("--verbose", action="store_true",
                        help="print Snakemake's output as it comes instead of the progress display (which writes it "
                             "to OUT/logs/snakemake/); before CONFIG (after it, --verbose is Snakemake's own option)"),
                    OUT_FOLDER, CONFIGS, arg("snakemake_args", nargs=argparse.REMAINDER, metavar="SNAKEMAKE_ARGS",
                                 help="passed to Snakemake as they are"))),
    "validate": Command("check CONFIG (schema and plan) and list its benchmarks, candidates and the jobs a run would "
                        "start now; runs no job", f"{USER}:validate", (CONFIGS,)),
    "status": Command("per benchmark of CONFIG, its jobs by rule: how many are done (up to date) and how many a run "
                      "would start, with Snakemake's reasons (missing output, changed input, params or code)",
                      f"{USER}:status", (CONFIG, JSON_FLAG)),
    "show": Command("the plan of CONFIG as a user reads it: each benchmark's protocol, dataset identity, candidates "
                    "(fingerprints, score and report paths) and, once written, its ranking", f"{USER}:show",
                    (CONFIG, arg("benchmark", nargs="?", metavar="BENCHMARK", help="show this benchmark only"),
                     JSON_FLAG)),
    "eval": Command("evaluate models by name on one data set through the workflow (the config a user would write, "
                    "in OUT/eval/), then print the ranking and the verdicts",
                    "vertebrae.cli.eval_command:run_eval",
                    (arg("--protocol", required=True, choices=["labelled", "retrieval", "zero-shot"]),
                     arg("--data", required=True, metavar="PREFIX:PATH[,key=value...]",
                         help="npz:, csv:, manifest:, sklearn:, npz_pair: ... (a source type and its keys)"),
                     arg("--model", dest="models", action="append", required=True,
                         metavar="PREFIX:VALUE[,key=value...]",
                         help="timm:, st:, open_clip:NAME/PRETRAINED, hf_text:, hf_vision:, hf_multimodal:, "
                              "precomputed:FILE; name=... names the candidate; repeatable"),
                     arg("--metric", dest="metrics", action="append", metavar="TYPE[,key=value...]",
                         help="labelled: a metric beside OverlapIndex, as the YAML's metrics: entries (knn, "
                              "linear_probe, few_shot, clustering, label_retrieval, callable,path=MOD:FN), e.g. "
                              "knn,k=20; repeatable"),
                     arg("--primary", metavar="METRIC",
                         help="the metric that ranks: labelled overlap or a --metric's name; retrieval map, mrr, "
                              "ndcg@K, ...; zero-shot accuracy, macro_f1 or balanced_accuracy"),
                     arg("--prompts", metavar="FILE",
                         help="zero-shot: the prompts, a YAML/JSON file of the zero-shot benchmark's keys "
                              "(templates, prompts, template_ids, class_names) or a .txt of templates, one a line"),
                     arg("--name", help="the benchmark's name (default: the data's)"),
                     arg("--conventions", metavar="NAME",
                         help="retrieval: whose metric definitions to follow, vertebrae (default), trec_eval, beir, "
                              "mteb or sentence_transformers (docs/conventions.md)"),
                     arg("--shards", type=positive_int, help="embedding.shards (default: the schema's)"),
                     arg("--cores", type=positive_int, help="Snakemake's --cores (default 1 without --profile)"),
                     arg("--profile", help="a Snakemake profile, e.g. slurm"),
                     arg("--print-config", action="store_true", help="print the config and run nothing"),
                     OUT_FOLDER,
                     arg("--verbose", action="store_true",
                         help="print Snakemake's output as it comes instead of the progress display (which writes it "
                              "to OUT/logs/snakemake/)"))),
    "profile": Command("write a Snakemake profile for a SLURM cluster with your account and partitions, where "
                       "`--profile slurm` finds it (or --out DIR); no checkout needed",
                       "vertebrae.workflow.slurm_profile:run_profile",
                       (arg("kind", choices=["slurm"]), arg("--account", required=True, help="sbatch -A: the account "
                                                                "jobs are charged to"),
                        arg("--partition", required=True, help="the partition of jobs without GPUs (sinfo -s)"),
                        arg("--gpu-partition", help="a partition with GPUs, for embedding jobs that ask for one"),
                        arg("--max-gpus", type=positive_int, default=8, help="GPUs a job may take there (default 8)"),
                        arg("--out", help="write the profile folder here (default: Snakemake's user profile folder, "
                                          "slurm)"))),
    "summary": Command("a candidates x benchmarks table of primary scores from verified report.json files (CSV, "
                       "Markdown, JSON)", "vertebrae.stages.summary_job:run_summary",
                       (arg("--output-csv", required=True), arg("--output-markdown", required=True),
                        arg("--output-json", required=True), arg("reports", nargs="+", metavar="REPORT_JSON"))),
    "leaderboard": Command(
        "every verified report under RESULTS_DIR (whichever config wrote it): candidates x benchmarks, a long tidy "
        "table, mean rank and head to head across benchmarks, and what each candidate costs",
        "vertebrae.stages.leaderboard_job:run_leaderboard",
        (arg("results_dir", nargs="?", default="results", metavar="RESULTS_DIR"),
         arg("--metric", help="rank by this metric where a report holds it (default: each benchmark's primary metric; "
                              "verdicts are for the primary metric only)"),
         arg("--format", default="md", choices=["md", "csv", "html", "json", "parquet"],
             help="md or html: the page; csv or parquet: the long tidy table; json: the table and the standings "
                  "(default md)"),
         arg("--output", help="write to this file (required for parquet; default: stdout)"),
         arg("--cost", default="size", choices=["size", "throughput", "bytes_per_vector", "dim"],
             help="the cost of the Pareto front and the cheapest candidate tied with the leader: size (default: bytes "
                  "per vector, then dim; the same on every run), throughput (steady-state embedding seconds per "
                  "1,000 rows, measured: it varies by run and machine), bytes_per_vector or dim"),
         arg("--records", dest="records_dir", metavar="DIR",
             help="Snakemake benchmark records (default: RESULTS_DIR/benchmarks, else benchmarks/ beside "
                  "RESULTS_DIR: a folder of the old layout)"),
         arg("--reports", nargs="*", metavar="REPORT_JSON",
             help="read exactly these report.json files (and the files the page links beside them) instead of every "
                  "one under RESULTS_DIR, and no benchmark record unless --records names one (the workflow's job: "
                  "its plan lists them)"))),
}
# the commands a user types, listed first by --help; the others are the jobs the workflow's rules run
USER_COMMANDS = ("run", "eval", "validate", "status", "show", "verify", "leaderboard", "summary", "figures",
                 "profile")


class _Version(argparse.Action):
    """``--version``: ``vertebrae VERSION``, and from a git checkout ``(git COMMIT[, uncommitted changes])``; git is
    asked only when the option is given, so that no other command pays for it."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **_: Any) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0,
                         help="print the version (and the git commit when run from a checkout) and exit")

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from vertebrae.core.provenance import software, software_line

        print(software_line(software()).removeprefix("Written by ").removesuffix("."))
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    jobs = [name for name in COMMANDS if name not in USER_COMMANDS]
    width = max(map(len, jobs)) + 2
    epilog = "job subcommands (the workflow's rules run these; `vertebrae JOB --help` for one):\n" + "\n".join(
        f"  {name:<{width}}{COMMANDS[name].help.split(';')[0].split(' (')[0]}" for name in jobs)
    parser = argparse.ArgumentParser(prog="vertebrae", description="Compare frozen embedding backbones on your data.",
                                     epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, title="commands", metavar="COMMAND")
    ordered = [n for n in USER_COMMANDS if n in COMMANDS] + jobs
    for name in ordered:
        command = COMMANDS[name]
        p = sub.add_parser(name, **({"help": command.help} if name in USER_COMMANDS else {}),
                           description=command.help)
        for a in command.args:
            p.add_argument(*a.flags, **a.options)
        p.set_defaults(_run=command.run)
    return parser


def _run(args: argparse.Namespace) -> int:
    """Call the subcommand's job function with its parsed arguments as keywords; its exit status (0 unless it
    returns one: `run` returns Snakemake's)."""
    options = {key: value for key, value in vars(args).items() if key not in ("command", "_run")}
    module, _, function = args._run.partition(":")
    status = getattr(importlib.import_module(module), function)(**options)
    return status if isinstance(status, int) else 0


def main(argv: Sequence[str] | None = None) -> int:
    if os.environ.get(STORAGE_ROOT_ENV):  # a job of a run on object storage: inside its local copies (core.storage)
        argv = enter_root(sys.argv[1:] if argv is None else list(argv))
    elif os.environ.get(SERVER_ENV):  # a job of `vertebrae run`: its job server runs it, if it serves the subcommand
        served = run_served(sys.argv[1:] if argv is None else list(argv))
        if served is not None:
            return served
    args = _parser().parse_args(argv)
    try:
        code = _run(args)
        sys.stdout.flush()  # a reader that closed the pipe early (`vertebrae status | head`) is noticed here
        return code
    except BrokenPipeError:
        return _closed_pipe()
    except (CorruptArtifactError, StaleArtifactError) as exc:
        from vertebrae.stages.verify import describe_quarantine, quarantine, quarantine_refused

        moved = (quarantine_refused(exc.path, always=exc.always_move) if isinstance(exc, StaleArtifactError)
                 else quarantine(exc.path))
        _error(f"{exc}{describe_quarantine(moved)}")
        return 2
    except VertebraeError as exc:
        _error(str(exc))
        return 2


def _closed_pipe() -> int:
    """The reader of stdout went away: stop quietly, as Unix tools do, with the status a shell gives a command
    that SIGPIPE ended (128 + 13); what is still buffered goes nowhere instead of into a traceback at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return CLOSED_PIPE


def _error(message: str) -> None:
    """The one error line (or lines) of a refusal, on stderr; text from data in it cannot drive the terminal."""
    from vertebrae.reports.text import terminal_text

    print(f"vertebrae: error: {terminal_text(message, lines=True)}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
