# vertebrae: plan -> fit -> embed shard -> merge -> compress -> protocol -> score -> report, for three protocols.
# Planning lives in the library (vertebrae.planning); rules only call `vertebrae` subcommands.
import os
import sys

from snakemake.utils import min_version

min_version("9.0")

# Jobs run the `vertebrae` of the environment Snakemake itself runs in, activated or not (`.venv/bin/snakemake`):
# its bin folder goes first on PATH before any job starts, here and inside every SLURM job (which re-runs this file
# with the same interpreter). A rule's conda env, when used (--sdm conda), is activated inside the job and comes first.
_BIN = os.path.dirname(sys.executable)
if os.environ.get("PATH", "").split(os.pathsep)[0] != _BIN:
    os.environ.update(PATH=os.pathsep.join((_BIN, os.environ.get("PATH", ""))))


# A config file given on the command line (`--configfile my.yaml`, or in a profile) is the config, ALONE: the
# default below is read only when none is given. Snakemake passes the same files down to every job it spawns
# (locally and on SLURM), so each job plans from the same config as the main process.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"



report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/labelled.smk"
include: "workflow/rules/retrieval.smk"
include: "workflow/rules/zero_shot.smk"
include: "workflow/rules/sweep.smk"
include: "workflow/rules/figures.smk"


# Bookkeeping jobs that take a second run where Snakemake runs; on a cluster each would wait a scheduler round trip.
localrules:
    all,
    plan,
    write_protocol,
    write_retrieval_relevance,
    stage_retrieval_fanout,
    report,
    plan_zero_shot,
    write_zero_shot_protocol,
    figures,
    report_tables,
    report_page,
    leaderboard_page,
    results_index,
    summary,


rule all:
    input:
        get_final_outputs(),
        get_figure_outputs(),
        get_report_item_outputs(),
        get_summary_outputs(),
        PLAN.path("index.html"),


# The plan and the parsed rules live as long as this process: out of the garbage collector's way while Snakemake
# builds the DAG (vertebrae.planning.plan_once.freeze_parsed_objects).
vertebrae.planning.plan_once.freeze_parsed_objects()
