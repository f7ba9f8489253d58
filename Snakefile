# vertebrae: plan -> fit -> embed shard -> merge -> compress -> protocol -> score -> report.
# Planning lives in the library (vertebrae.workflow); rules only call `vertebrae` subcommands.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/plan.smk"
include: "workflow/rules/embed.smk"
include: "workflow/rules/merge.smk"
include: "workflow/rules/compress.smk"
include: "workflow/rules/protocol.smk"
include: "workflow/rules/score.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/retrieval.smk"


rule all:
    input:
        get_final_outputs(),
