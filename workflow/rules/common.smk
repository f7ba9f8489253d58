# Turns the config into a plan by calling the library; input functions only.
import vertebrae.cluster
import vertebrae.reports.figures
import vertebrae.workflow
import vertebrae.workflow_zero_shot

PLAN = vertebrae.workflow.plan(config)


wildcard_constraints:
    fp="[0-9a-f]{16}",
    i="[0-9]+",
    n="[0-9]+",
    benchmark="|".join(PLAN.reports) or "no-benchmark",
    retrieval_benchmark="|".join(PLAN.retrieval_reports) or "no-retrieval-benchmark",


def get_final_outputs():
    return PLAN.final_outputs()


def get_figure_outputs():
    return vertebrae.reports.figures.figure_targets(PLAN.final_outputs())


def get_report_names_pattern():
    return vertebrae.reports.figures.report_names_pattern(PLAN.final_outputs())


def get_spec(wildcards):
    return PLAN.spec_json(wildcards.fp)


def get_fitted(wildcards):
    fit = PLAN.spec(wildcards.fp)["fit"]
    return [] if fit is None else fit["path"]


def get_gpus(wildcards):
    return vertebrae.cluster.gpus(PLAN.spec(wildcards.fp))


def get_shards(wildcards):
    return PLAN.shard_paths(wildcards.fp)


def get_compress_input(wildcards):
    return PLAN.spec(wildcards.fp)["embedding"]["path"]


def get_score_inputs(wildcards):
    spec = PLAN.spec(wildcards.fp)
    return {"embeddings": spec["embedding"]["path"], "protocol": spec["protocol"]["path"]}


def get_report_plan(wildcards):
    return vertebrae.workflow.plan_path(PLAN.reports[wildcards.benchmark])


def get_report_protocol(wildcards):
    return PLAN.spec(PLAN.reports[wildcards.benchmark])["protocol"]["path"]


def get_report_scores(wildcards):
    spec = PLAN.spec(PLAN.reports[wildcards.benchmark])
    return [candidate["score"]["path"] for candidate in spec["candidates"]]


def get_side(wildcards):
    return PLAN.spec(wildcards.fp)["side"]


def get_retrieval_pair(wildcards):
    spec = PLAN.spec(wildcards.fp)
    return {"queries": spec["query"]["path"], "gallery": spec["gallery"]["path"]}


def get_retrieval_protocol(wildcards):
    return PLAN.spec(wildcards.fp)["protocol"]["path"]


def get_retrieval_report_plan(wildcards):
    return vertebrae.workflow.plan_path(PLAN.retrieval_reports[wildcards.retrieval_benchmark])


def get_retrieval_report_protocol(wildcards):
    return PLAN.spec(PLAN.retrieval_reports[wildcards.retrieval_benchmark])["protocol"]["path"]


def get_retrieval_report_scores(wildcards):
    spec = PLAN.spec(PLAN.retrieval_reports[wildcards.retrieval_benchmark])
    return [candidate["score"]["path"] for candidate in spec["candidates"]]


def get_zero_shot_protocol(wildcards):
    return PLAN.spec(wildcards.fp)["protocol"]["path"]


def get_zero_shot_raw_samples(wildcards):
    return PLAN.spec(wildcards.fp)["samples"]["path"]


def get_zero_shot_score_inputs(wildcards):
    spec = PLAN.spec(wildcards.fp)
    inputs = {"samples": spec["samples"]["path"], "prompts": spec["prompts"]["path"], "protocol": spec["protocol"]["path"]}
    if spec["raw_samples"] is not None:
        inputs["raw_samples"] = spec["raw_samples"]["path"]
    return inputs


def get_zero_shot_raw_option(wildcards):
    raw = PLAN.spec(wildcards.fp)["raw_samples"]
    return "" if raw is None else f" --raw-samples {raw['path']}"


def get_zero_shot_report_plan(wildcards):
    return vertebrae.workflow_zero_shot.plan_path(PLAN.zero_shot_reports[wildcards.zero_shot_benchmark])


def get_zero_shot_report_protocol(wildcards):
    return PLAN.spec(PLAN.zero_shot_reports[wildcards.zero_shot_benchmark])["protocol"]["path"]


def get_zero_shot_report_scores(wildcards):
    spec = PLAN.spec(PLAN.zero_shot_reports[wildcards.zero_shot_benchmark])
    return [candidate["score"]["path"] for candidate in spec["candidates"]]


def get_zero_shot_score_keys(wildcards):
    return " ".join(f"--score-key {path}" for path in get_zero_shot_report_scores(wildcards))
