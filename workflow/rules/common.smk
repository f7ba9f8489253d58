# The plan of the config, made by the library (vertebrae.planning); wildcard constraints and input functions.
# Every rule's inputs come whole from the plan: PLAN.inputs(fp) names them as the rule's shell line does.
import os
import sys

import vertebrae.reports.figures
import vertebrae.reports.html_items
import vertebrae.reports.summary
import vertebrae.planning.plan_once
import vertebrae.reports.text
from vertebrae.core.config import require_benchmarks
from vertebrae.core.errors import VertebraeError
from vertebrae.core.out_folder import OUT_ENV

# workflow.configfiles: the files Snakemake read `config` from, re-read refusing duplicate keys. Planned once per
# invocation: a job that re-parses this file (each SLURM job) reads the main process's plan (VERTEBRAE_PLAN).
# A config vertebrae refuses ends the run with its one message (as `vertebrae validate` prints it), exit status 1,
# not followed by Snakemake's stack trace of this file.
# Object storage (`vertebrae run --storage s3://...`, snakemake --default-storage-provider s3): the config's data paths
# name objects under the storage prefix, fetched into Snakemake's local copy of it (STORAGE_ROOT) and planned from
# there; each job works inside the local copies of its storage objects, laid out as the working folder is
# (vertebrae.core.storage); the plan jobs' spec files stay local (written below, by every process that parses this).
STORAGE = workflow.storage_settings.default_storage_provider is not None
try:
    require_benchmarks(config, workflow.configfiles)
    PLAN, STORAGE_ROOT = vertebrae.planning.plan_once.plan_where_jobs_run(
        config, config_files=workflow.configfiles, storage_provider=workflow.storage_settings.default_storage_provider,
        storage_prefix=workflow.storage_settings.default_storage_prefix,
        local_storage_prefix=workflow.storage_settings.local_storage_prefix, argv=sys.argv)
except VertebraeError as exc:
    sys.exit(f"vertebrae: error: {vertebrae.reports.text.terminal_text(str(exc), lines=True)}")
# Everything the run writes lies under PLAN.out (config `out`, default results/): the rules take every path from the
# plan (PLAN.artifact_path, PLAN.log, PLAN.record, PLAN.path; vertebrae.planning.paths). Its jobs inherit the folder
# for their caches (vertebrae.core.out_folder.current_out).
os.environ[OUT_ENV] = PLAN.out
PLAN.write_spec_files()  # OUT/.vertebrae/specs/{fp}-{digest}.json: the plan jobs' specs (never a shell argument)

# The image every job runs in under `--software-deployment-method apptainer` (ignored otherwise): config `container`,
# by default the one envs/Containerfile and envs/vertebrae.def build for this very version, so that the jobs run the
# vertebrae that planned them (docs/cloud.md, "Containers").
container: config.get("container") or f"docker://ghcr.io/vertebrae/vertebrae:{vertebrae.__version__}"


wildcard_constraints:
    fp="[0-9a-f]{16}",
    partial="[0-9a-f]{16}",
    i="[0-9]+",
    n="[0-9]+",
    side="samples|prompts",


def get_final_outputs():
    return PLAN.final_outputs()


def get_figure_outputs():
    return vertebrae.reports.figures.figure_targets(PLAN.final_outputs())


def get_report_item_outputs():
    return vertebrae.reports.html_items.item_targets(PLAN.final_outputs())


def get_page_outputs():
    return [PLAN.path(f"reports/{name}/report.html") for name in vertebrae.reports.figures.report_names(PLAN.final_outputs())]


def get_summary_outputs():
    return vertebrae.reports.summary.summary_targets(PLAN.final_outputs(), PLAN.out)


def out_folder_of(wildcards, output):
    return os.path.dirname(output[0])


def get_report_names_pattern():
    return vertebrae.reports.figures.report_names_pattern(PLAN.final_outputs())


def get_spec_file(wildcards):
    return PLAN.spec_file(wildcards.fp)


def get_side(wildcards):
    return PLAN.spec(wildcards.fp)["side"]


def get_gpus(wildcards):
    return PLAN.gpus(wildcards.fp)


def get_fanout_scores_pattern():
    return PLAN.fanout_scores_pattern()


def get_mem_mb(wildcards):
    return PLAN.mem_mb(wildcards.fp)


def get_partial_mem_mb(wildcards):
    return PLAN.mem_mb(wildcards.partial)


def get_part_priority(wildcards):
    return PLAN.priority(wildcards.fp)


def get_partial_gpus(wildcards):
    return PLAN.gpus(wildcards.partial)


def _ancient_data(named):
    """The user's data files (``data``) as ``ancient`` inputs: their bytes are in the fingerprints already."""
    if "data" in named:
        named = {**named, "data": [ancient(path) for path in named["data"]]}
    return named


def get_inputs(wildcards):
    """The job's inputs; an embedding shard job's data files are its own rows' (``{i}``: images, tar files)."""
    shard = getattr(wildcards, "i", None)
    return _ancient_data(PLAN.inputs(wildcards.fp, shard=None if shard is None else int(shard)))


def get_plan_inputs(wildcards):
    """A plan job's spec file (named by the spec's text: a new spec, a new name, a rerun; written at parse, so
    ``ancient``) and the user's files it checks."""
    named = _ancient_data(PLAN.plan_inputs(wildcards.fp))
    return {**named, "spec": ancient(local(named["spec"]) if STORAGE else named["spec"])}


def get_merge_inputs(wildcards):
    return PLAN.inputs(wildcards.fp, merge=True)


def get_fanout_inputs(wildcards):
    return PLAN.inputs(wildcards.fp, fanout=True)


def get_views_inputs(wildcards):
    return PLAN.inputs(PLAN.views[wildcards.benchmark])


def get_report_inputs(wildcards):
    return PLAN.inputs(PLAN.report_fingerprint(wildcards.benchmark))


def get_zero_shot_raw_option(wildcards):
    raw = PLAN.spec(wildcards.fp)["raw_samples"]
    return "" if raw is None else f" --raw-samples {raw['path']}"


def get_labelled_fanout_pattern():
    """A regular expression matching exactly the fingerprints of labelled scores merged from partials."""
    return "|".join(PLAN.fingerprints("merge-labelled-partials")) or "no-fanout"


def get_overlap_option(wildcards):
    overlap = PLAN.spec(wildcards.fp).get("overlap")
    return "" if overlap is None else f" --overlap {overlap['path']}"
