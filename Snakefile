# vertebrae: plan -> fit -> embed shard -> merge -> compress -> protocol -> score -> report, for three protocols.
# Planning lives in the library (vertebrae.workflow); rules only call `vertebrae` subcommands.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/labelled.smk"
include: "workflow/rules/retrieval.smk"
include: "workflow/rules/zero_shot.smk"
include: "workflow/rules/figures.smk"


# Bookkeeping jobs that take a second run where Snakemake runs; on a cluster each would wait a scheduler round trip.
localrules:
    all,
    plan,
    write_protocol,
    write_retrieval_relevance,
    report,
    plan_zero_shot,
    write_zero_shot_protocol,
    figures,
    report_tables,


rule all:
    input:
        get_final_outputs(),
        get_figure_outputs(),
        get_report_item_outputs(),
