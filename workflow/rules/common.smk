# Turns the config into a plan by calling the library; input functions only.
import vertebrae.workflow

PLAN = vertebrae.workflow.plan(config)


wildcard_constraints:
    fp="[0-9a-f]{16}",
    i="[0-9]+",
    n="[0-9]+",
    benchmark="|".join(PLAN.reports) or "no-benchmark",
    retrieval_benchmark="|".join(PLAN.retrieval_reports) or "no-retrieval-benchmark",


def get_final_outputs():
    return PLAN.final_outputs()


def get_spec(wildcards):
    return PLAN.spec_json(wildcards.fp)


def get_fitted(wildcards):
    fit = PLAN.spec(wildcards.fp)["fit"]
    return [] if fit is None else fit["path"]


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
