"""DAG-time planning from a workflow config (pure: the Snakefile imports it; no Snakemake here).

``plan(config)`` validates the config against ``schemas/config.schema.yaml`` (unknown keys are errors, defaults
are filled, benchmark names are safe path components), re-reads ``config_files`` (the files Snakemake loaded)
refusing duplicate keys, computes every fingerprint and shard boundary, and returns a ``WorkflowPlan``: one job
spec per fingerprint, the report targets, and what each rule reads. ``artifact_path`` is the results/ layout;
``*benchmarks_from_config`` build the in-process twins of the three protocols.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError
from vertebrae.workflow.config import (
    check_benchmark_names,
    check_config_files,
    load_config_file,
    validate_config,
)
from vertebrae.workflow.comparison import plan_comparisons
from vertebrae.workflow.dag import WorkflowPlan, gpus
from vertebrae.workflow.labelled import benchmarks_from_config, plan_labelled
from vertebrae.workflow.paths import artifact_path, report_paths
from vertebrae.workflow.sweeps import group_layer_sweeps
from vertebrae.workflow.retrieval import plan_retrieval, retrieval_benchmarks_from_config
from vertebrae.workflow.zero_shot import plan_zero_shot, zero_shot_benchmarks_from_config


def plan(config: Mapping[str, Any], *, base_dir: str | Path = ".",
         config_files: Iterable[str | Path] = ()) -> WorkflowPlan:
    """Validate ``config`` and plan every job; paths in the config resolve against ``base_dir``.

    ``config_files``: the files ``config`` was read from by another parser (Snakemake's), re-read here so that a
    key given twice (silently dropping a block there) is refused naming the file, key and lines.
    """
    check_config_files(config_files)
    config = validate_config(config)
    check_benchmark_names(config)
    base_dir = Path(base_dir)
    result = WorkflowPlan(threads=dict(config["threads"]))
    for name, bench in config.get("benchmarks", {}).items():
        plan_labelled(result, name, bench, config, base_dir)
    for name, bench in config.get("retrieval", {}).items():
        if name in result.reports:
            raise ConfigError(f"retrieval.{name}: a labelled benchmark has the same name; report names must be unique")
        plan_retrieval(result, name, bench, config, base_dir)
    for name, bench in config.get("zero_shot", {}).items():
        if name in result.reports or name in result.retrieval_reports:
            raise ConfigError(f"zero_shot.{name}: another benchmark has the same name; report names must be unique")
        plan_zero_shot(result, name, bench, config, base_dir)
    group_layer_sweeps(result)
    plan_comparisons(result, config)
    return result


__all__ = ["WorkflowPlan", "artifact_path", "benchmarks_from_config", "check_config_files", "gpus", "load_config_file",
           "plan", "report_paths", "retrieval_benchmarks_from_config", "validate_config",
           "zero_shot_benchmarks_from_config"]
