"""DAG-time planning from a workflow config (pure: the Snakefile imports it; no Snakemake here).

``plan(config)`` validates the config against ``schemas/config.schema.yaml`` (unknown keys are errors, defaults
are filled, benchmark names are safe path components), re-reads ``config_files`` (the files Snakemake loaded)
refusing duplicate keys, computes every fingerprint and shard boundary, and returns a ``WorkflowPlan``: one job
spec per fingerprint, the report targets, and what each rule reads. ``artifact_path`` is the results/ layout;
``*benchmarks_from_config`` build the in-process twins of the three protocols.

The names below load on first use (PEP 562): a SLURM job re-parsing the Snakefile reads the main process's plan
(``plan_once``) and needs only ``WorkflowPlan`` and the paths, not the planners and their imports.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "WorkflowPlan": "dag", "gpus": "dag", "artifact_path": "paths", "report_paths": "paths", "plan": "planner",
    "check_config_files": "config", "load_config_file": "config", "validate_config": "config",
    "benchmarks_from_config": "labelled", "retrieval_benchmarks_from_config": "retrieval",
    "zero_shot_benchmarks_from_config": "zero_shot",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'vertebrae.planning' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"vertebrae.planning.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value
