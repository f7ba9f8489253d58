"""The probe summary of a separatix report: normalised probe evidence, built from the report only (nothing is fitted).

Source: ``report.metrics`` of the terse report (``probes``, ``baseline``, ``probe_evaluation``,
``paired_probe_comparisons``, ``mlp_probes``), ``report.sampling["probe"]``, ``report.grouping`` and
``report.skipped_diagnostics``. Keys:

- ``target_mode``.
- ``primary_metrics`` / ``primary_metric`` / ``primary_metric_source``: the ``primary_metrics`` list that
  separatix attaches to every evaluated multi-label probe (``micro_f1, macro_f1, sample_jaccard``) and
  regression probe (``r2_variance_weighted, r2_uniform_average``), else ``metrics.baseline
  ["primary_metrics"]`` (source ``"probe_declaration"``). Single-label probes declare none; the fallback is
  separatix's balanced-accuracy baseline contract (``metrics.baseline = summarize_probe_family(probes)``:
  best probe = the first probe, in report order and dummy included, with the highest
  ``balanced_accuracy``) -> ``["balanced_accuracy"]``, source ``"baseline_contract"``. The primary
  metric is the first declared one (separatix's own order); with no declaration it is None -- multi-label
  and regression never fall back to accuracy or pick an undeclared metric.
- ``best_probe`` ``{"name", "family", "metric", "score", "source"}``: single-label from
  ``metrics.baseline["best_probe"/"best_probe_score"]`` (recomputed with the same contract if absent);
  multi-label/regression from ``metrics.baseline["best_by_metric"][primary_metric]`` (separatix excludes
  the dummy there). ``best_by_metric``: ``{metric: {"probe", "score"} | None}`` for each declared metric.
- ``probes``: ``{name: {"family", "model_name", "status": "evaluated" | "skipped", "evaluation_mode",
  "metrics", "skipped_reason"}}``. ``metrics`` is the complete reported metric map: every finite numeric
  top-level value of the probe result except bookkeeping (keys ending in ``_seconds, _bytes, _mb, _count,
  _repeats, _degree, _components``), plus the numeric entries of nested ``*_summary`` dicts as
  ``"summary_key.entry"``. None (unavailable) values are left out. Family: the probe recipe's
  ``probe.family``, else separatix's fixed map (dummy, linear, knn/kernel_approx -> local_kernel,
  smooth_poly -> smooth_nonlinear).
- ``linear_vs_nonlinear``: the ``linear`` probe against the best nonlinear core probe (family not dummy or
  linear) on the primary metric, ties to the first in report order. Direction per metric name:
  ``rmse, mae, mse, loss, error`` tokens -> ``smaller_is_better``; ``accuracy, f1, jaccard, r2, precision,
  recall`` tokens -> ``larger_is_better``; anything else (and ``stability_*`` / nested entries) has no
  direction and is not compared. ``improvement`` = nonlinear - linear when larger is better, linear -
  nonlinear when smaller is better, so > 0 always favours the nonlinear probe; ``favored_family`` is
  ``"nonlinear"`` (> 0), ``"linear"`` (< 0) or ``"tie"``. ``metrics`` repeats this for every metric both
  probes report with a direction (e.g. regression ``normalized_rmse_mean``, multi-label ``hamming_loss``).
  ``paired`` is separatix's paired out-of-fold bootstrap interval for the primary metric, oriented as
  ``improvement``; ``confidence`` (probe-comparison confidence, distinct from the recommendation's) is
  ``"clear"`` when that 95 % interval excludes 0, ``"inconclusive"`` when it includes 0, ``"unavailable"``
  without one. ``status="unavailable"`` with a ``reason`` when no comparison is possible.
- ``evaluation``: ``metrics.probe_evaluation`` (alignment, cv method, folds, sizes, group awareness,
  effective train size, plan id), per-probe ``evaluation_modes`` and the paired-comparison status.
- ``sampling``: ``report.sampling["probe"]`` (row indices dropped) with the budget, max_samples and
  max_dense_mb from ``report.config``.
- ``grouping``: the scalar/dict entries of ``report.grouping`` plus ``<key>_count`` for its list entries.
- ``skips``: ``{"probes": {name: skipped_reason}, "diagnostics": [probe-related skipped_diagnostics]}``
  (names containing ``probe`` or ``held_out``, and ``supervised_cross_validation``,
  ``unsupported_group_classes``, ``unsupported_multilabel_columns``, ``constant_regression_targets``).
- ``mlp``: ``{"requested", "status", "reason", "recommendation_override", "best_architecture"}`` from
  ``metrics.mlp_probes`` (MLP probes run on their own cohort, so they are not mixed into the core
  comparison).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from vertebrae.scoring.separatix.result import json_safe

_NONLINEAR_EXCLUDED_FAMILIES = ("dummy", "linear")
# separatix.models.probes._PROBE_FAMILIES (0.1.1), used when a probe carries no recipe.
_PROBE_FAMILIES = {"dummy": "dummy", "linear": "linear", "knn": "local_kernel", "smooth_poly": "smooth_nonlinear",
                   "kernel_approx": "local_kernel"}
_BOOKKEEPING_SUFFIXES = ("_seconds", "_bytes", "_mb", "_count", "_repeats", "_degree", "_components")
_SMALLER_TOKENS = frozenset({"rmse", "mae", "mse", "loss", "error"})
_LARGER_TOKENS = frozenset({"accuracy", "f1", "jaccard", "r2", "precision", "recall"})
_PROBE_SKIP_NAMES = frozenset({"supervised_cross_validation", "unsupported_group_classes",
                               "unsupported_multilabel_columns", "constant_regression_targets"})


def metric_direction(name: str) -> str | None:
    """``"larger_is_better"``, ``"smaller_is_better"`` or None (no declared direction; not compared)."""
    if "." in name or name.startswith("stability_"):
        return None
    tokens = set(name.lower().split("_"))
    if tokens & _SMALLER_TOKENS:
        return "smaller_is_better"
    if tokens & _LARGER_TOKENS:
        return "larger_is_better"
    return None


def _finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _metric_map(probe: Mapping[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in probe.items():
        if key.endswith(_BOOKKEEPING_SUFFIXES):
            continue
        if _finite_number(value):
            out[key] = float(value)
        elif isinstance(value, Mapping) and key.endswith("_summary"):
            for sub, item in value.items():
                if _finite_number(item) and not str(sub).endswith(_BOOKKEEPING_SUFFIXES):
                    out[f"{key}.{sub}"] = float(item)
    return out


def _probe_family(name: str, probe: Mapping[str, Any]) -> str | None:
    recipe = probe.get("probe_recipe")
    if isinstance(recipe, Mapping) and isinstance(recipe.get("probe"), Mapping) and recipe["probe"].get("family"):
        return str(recipe["probe"]["family"])
    return _PROBE_FAMILIES.get(name)


def _improvement(linear: float, nonlinear: float, direction: str) -> float:
    return nonlinear - linear if direction == "larger_is_better" else linear - nonlinear


def _favored(improvement: float) -> str:
    return "nonlinear" if improvement > 0 else "linear" if improvement < 0 else "tie"


def _paired_interval(paired: Mapping[str, Any], linear: str, nonlinear: str, metric: str, direction: str) -> dict | None:
    """Separatix's paired bootstrap delta for ``metric``, oriented as the direction-adjusted improvement."""
    if not isinstance(paired, Mapping) or paired.get("status") != "available":
        return None
    comparisons = paired.get("comparisons") or {}
    item, sign = None, 1.0  # sign converts the stored delta to (nonlinear - linear)
    if f"{nonlinear}__vs__{linear}" in comparisons:
        item = (comparisons[f"{nonlinear}__vs__{linear}"].get("metrics") or {}).get(metric)
    elif f"{linear}__vs__{nonlinear}" in comparisons:
        item, sign = (comparisons[f"{linear}__vs__{nonlinear}"].get("metrics") or {}).get(metric), -1.0
    if not item or not all(_finite_number(item.get(k)) for k in ("point_delta", "lower_95", "upper_95")):
        return None
    if direction == "smaller_is_better":
        sign = -sign
    bounds = sorted((sign * item["lower_95"], sign * item["upper_95"]))
    return {
        "point": sign * item["point_delta"],
        "mean": sign * item["mean_delta"] if _finite_number(item.get("mean_delta")) else None,
        "lower_95": bounds[0],
        "upper_95": bounds[1],
        "standard_error": item.get("paired_standard_error"),
        "resamples_used": item.get("resamples_used"),
        "method": paired.get("method"),
    }


def _linear_vs_nonlinear(probes: dict[str, dict[str, Any]], metric: str | None, paired: Mapping[str, Any]) -> dict[str, Any]:
    def unavailable(reason: str) -> dict[str, Any]:
        return {"status": "unavailable", "reason": reason, "metric": metric, "confidence": "unavailable"}

    if metric is None:
        return unavailable("separatix declared no primary metric")
    direction = metric_direction(metric)
    if direction is None:
        return unavailable(f"primary metric {metric!r} has no known direction")
    linear = probes.get("linear")
    if not linear or metric not in linear["metrics"]:
        return unavailable(f"the linear probe reports no {metric}")
    candidates = [(name, p) for name, p in probes.items()
                  if p["family"] not in _NONLINEAR_EXCLUDED_FAMILIES and metric in p["metrics"]]
    if not candidates:
        return unavailable(f"no nonlinear probe reports {metric}")
    best_name, best = candidates[0]
    for name, p in candidates[1:]:
        if _improvement(best["metrics"][metric], p["metrics"][metric], direction) > 0:
            best_name, best = name, p
    per_metric = {}
    for name, value in linear["metrics"].items():
        d = metric_direction(name)
        if d is None or name not in best["metrics"]:
            continue
        gain = _improvement(value, best["metrics"][name], d)
        per_metric[name] = {"direction": d, "linear": value, "nonlinear": best["metrics"][name],
                            "improvement": gain, "favored_family": _favored(gain)}
    interval = _paired_interval(paired, "linear", best_name, metric, direction)
    if interval is None:
        confidence = "unavailable"
    else:
        confidence = "clear" if interval["lower_95"] > 0 or interval["upper_95"] < 0 else "inconclusive"
    primary = per_metric[metric]
    return {
        "status": "available",
        "reason": None,
        "metric": metric,
        "direction": direction,
        "linear_probe": "linear",
        "nonlinear_probe": best_name,
        "nonlinear_family": best["family"],
        "linear_score": primary["linear"],
        "nonlinear_score": primary["nonlinear"],
        "improvement": primary["improvement"],
        "favored_family": primary["favored_family"],
        "paired": interval,
        "confidence": confidence,
        "metrics": per_metric,
    }


def summarize_probes(report: Mapping[str, Any]) -> dict[str, Any]:
    """Normalised probe evidence of a terse, JSON-safe separatix report (mapping in the module docstring)."""
    metrics = report.get("metrics") or {}
    config = report.get("config") or {}
    target_mode = config.get("target_mode")
    raw_probes = metrics.get("probes") or {}
    baseline = metrics.get("baseline") or {}

    probes: dict[str, dict[str, Any]] = {}
    skipped_probes: dict[str, str] = {}
    for name, probe in raw_probes.items():
        if not isinstance(probe, Mapping):
            continue
        metric_map = _metric_map(probe)
        skipped = probe.get("skipped_reason")
        status = "skipped" if skipped or not metric_map else "evaluated"
        if status == "skipped":
            skipped_probes[name] = str(skipped or "no metrics reported")
            metric_map = {}
        probes[name] = {
            "family": _probe_family(name, probe),
            "model_name": probe.get("model_name"),
            "status": status,
            "evaluation_mode": probe.get("evaluation_mode"),
            "metrics": metric_map,
            "skipped_reason": str(skipped) if skipped else None,
        }

    declared: list[str] = []
    for probe in raw_probes.values():
        if isinstance(probe, Mapping) and isinstance(probe.get("primary_metrics"), list) and not probe.get("skipped_reason"):
            declared = [str(m) for m in probe["primary_metrics"]]
            break
    if not declared and isinstance(baseline.get("primary_metrics"), list):
        declared = [str(m) for m in baseline["primary_metrics"]]
    source = "probe_declaration" if declared else None

    best_probe = None
    best_by_metric: dict[str, Any] = {}
    if declared:
        for m in declared:
            entry = (baseline.get("best_by_metric") or {}).get(m)
            best_by_metric[m] = {"probe": entry.get("probe"), "score": entry.get("score")} if isinstance(entry, Mapping) else None
        top = best_by_metric.get(declared[0])
        if top is not None:
            best_probe = {"name": top["probe"], "family": probes.get(top["probe"], {}).get("family"),
                          "metric": declared[0], "score": top["score"], "source": "metrics.baseline.best_by_metric"}
    elif target_mode == "singlelabel":
        declared, source = ["balanced_accuracy"], "baseline_contract"
        if "best_probe" in baseline:
            name, score, origin = baseline.get("best_probe"), baseline.get("best_probe_score"), "metrics.baseline"
        else:  # the same contract as separatix.metrics.baseline.summarize_probe_family
            name, score, origin = None, None, "baseline_contract_recomputed"
            for probe_name, p in probes.items():
                value = p["metrics"].get("balanced_accuracy")
                if value is not None and (score is None or value > score):
                    name, score = probe_name, value
        best_by_metric["balanced_accuracy"] = {"probe": name, "score": score} if name is not None else None
        if name is not None:
            best_probe = {"name": name, "family": probes.get(name, {}).get("family"), "metric": "balanced_accuracy",
                          "score": score, "source": origin}
    primary = declared[0] if declared else None

    evaluation = dict(metrics.get("probe_evaluation") or {})
    for key in ("fold_assignments", "row_indices"):
        evaluation.pop(key, None)
    paired = metrics.get("paired_probe_comparisons") or {}
    evaluation["evaluation_modes"] = {name: p["evaluation_mode"] for name, p in probes.items()}
    evaluation["paired_comparisons"] = {key: paired.get(key) for key in
                                        ("status", "method", "reason", "resamples_requested", "resamples_used")}

    sampling = {k: v for k, v in ((report.get("sampling") or {}).get("probe") or {}).items() if k != "indices"}
    sampling.update({k: config.get(k) for k in ("budget", "max_samples", "max_dense_mb", "densify_policy")})

    grouping: dict[str, Any] = {}
    for key, value in (report.get("grouping") or {}).items():
        if isinstance(value, list):
            grouping[f"{key}_count"] = len(value)
        else:
            grouping[key] = value

    diagnostics = [entry for entry in report.get("skipped_diagnostics") or []
                   if isinstance(entry, Mapping) and _probe_skip(str(entry.get("name", "")))]

    mlp_raw = metrics.get("mlp_probes") or {}
    mlp = {
        "requested": config.get("mlp_probes"),
        "status": mlp_raw.get("status"),
        "reason": mlp_raw.get("reason"),
        "recommendation_override": mlp_raw.get("recommendation_override"),
        "best_architecture": mlp_raw.get("best_architecture"),
    }

    return json_safe({
        "target_mode": target_mode,
        "primary_metrics": declared,
        "primary_metric": primary,
        "primary_metric_source": source,
        "best_probe": best_probe,
        "best_by_metric": best_by_metric,
        "probes": probes,
        "linear_vs_nonlinear": _linear_vs_nonlinear(probes, primary, paired),
        "evaluation": evaluation,
        "sampling": sampling,
        "grouping": grouping,
        "skips": {"probes": skipped_probes, "diagnostics": diagnostics},
        "mlp": mlp,
    })


def _probe_skip(name: str) -> bool:
    return "probe" in name or "held_out" in name or name in _PROBE_SKIP_NAMES
