"""DAG-time planning of each benchmark's compare job: the paired comparison of its report's candidates.

The compare spec's recipe is the report spec's fingerprint and the ComparisonConfig (the top-level ``comparison``
keys, overridden by the benchmark's own; ``seed`` defaults to the top-level ``seed``): a change of comparison
settings reruns that compare job and the report, never a score. A non-default ``costs:`` section (``CostConfig``:
which cost the line "cheapest candidate statistically tied with the leader" uses) joins the recipe and the spec the
same way (the compare job passes it on to the report); the default adds nothing, so fingerprints stay as they were.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.reports.costs import CONFIG_KEY as COSTS, CostConfig
from vertebrae.scoring.paired import ComparisonConfig
from vertebrae.planning.dag import WorkflowPlan, ref

SECTION_OF_REPORTS = {"reports": "benchmarks", "retrieval_reports": "retrieval", "zero_shot_reports": "zero_shot"}


def comparison_config(config: Mapping[str, Any], section: str, name: str) -> ComparisonConfig:
    """The ComparisonConfig of benchmark ``section.name`` (ConfigError naming the key)."""
    name = name.partition("@")[0]  # a target view's report, BENCH@VIEW (planning.views), compares as BENCH
    decl = {"seed": config.get("seed", 0), **(config.get("comparison") or {}),
            **(config[section][name].get("comparison") or {})}
    try:
        return ComparisonConfig.from_dict(decl)
    except (ValidationError, TypeError) as exc:
        raise ConfigError(f"config key {section}.{name}.comparison (or the top-level comparison): {exc}") from None


def cost_config(config: Mapping[str, Any]) -> CostConfig:
    """The top-level ``costs:`` section as a CostConfig (ConfigError naming the key)."""
    try:
        return CostConfig.from_dict(config.get(COSTS))
    except (ValidationError, TypeError) as exc:
        raise ConfigError(f"config key {COSTS}: {exc}") from None


def plan_comparisons(result: WorkflowPlan, config: Mapping[str, Any]) -> None:
    """One compare spec per report spec of ``result``; ``result.comparisons`` maps report -> compare fingerprint."""
    costs = cost_config(config)
    for attribute, section in SECTION_OF_REPORTS.items():
        for name, report_fp in getattr(result, attribute).items():
            recipe = {"report": report_fp, "comparison": comparison_config(config, section, name).to_dict()}
            if not costs.is_default:
                recipe[COSTS] = costs.to_dict()
            compare_fp = result.add({
                "stage": "compare", "fingerprint": fingerprint("comparison", recipe), "recipe": recipe,
                "benchmark": name, "report": ref(report_fp, result.plan_path(report_fp)),
                "comparison": recipe["comparison"], **({COSTS: recipe[COSTS]} if COSTS in recipe else {}),
            })
            result.comparisons[report_fp] = compare_fp


__all__ = ["comparison_config", "cost_config", "plan_comparisons"]
