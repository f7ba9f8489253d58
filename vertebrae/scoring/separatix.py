"""Separatix complexity diagnostics: the one adapter between vertebrae and ``separatix`` (spec/scoring.md).

``separatix`` is imported lazily, inside the functions that need it (the import costs ~1.3 s).

Gate
    Separatix runs only when ``SeparatixConfig.enabled`` and the overlap score of the evaluated embedding variant
    is at least the threshold of the target type: ``overlap_threshold`` for classification and multi-label
    targets, ``regression_overlap_threshold`` for regression. Otherwise the result has ``ran=False`` and a
    ``skipped_reason``; ``gate`` always records ``{"metric": "overlap", "score", "threshold", "passed"}``.

Call
    ``separatix.diagnose(X, y, return_report=True, target_mode=..., groups=..., budget=..., random_state=...,
    densify_policy=..., max_dense_mb=..., max_samples=..., mlp_probes=...)`` exactly once per run, where

    - X is the embedding matrix, L2-normalised row-wise with sklearn ``normalize`` when
      ``normalize_embeddings`` (the overlap-scoring convention; CSR stays CSR, zero rows stay zero);
    - classification -> ``target_mode="singlelabel"``, y = the semantic-key labels as a 1-D str array;
      multilabel -> ``"multilabel"``, y = the CSR 0/1 indicator (columns in catalog order);
      regression -> ``"regression"``, y = the float64 values ((n,) or (n, t));
    - ``max_dense_mb = max(1, floor(max_dense_bytes / 2**20))`` with ``max_dense_bytes`` from the config or,
      when None, the caller's ``fallback_max_dense_bytes`` (the overlap config's ``max_dense_bytes``). It is a
      per-operation cap inside separatix, not a process cap.

Failures
    - grouped diagnostics without cross-group support (separatix raises ValueError mentioning "distinct
      groups": fewer than two single-label classes in >= 2 groups, or no multi-label column with >= 2 groups on
      both sides) -> ``ran=False``, ``skipped_reason="grouped diagnostic skipped: <separatix message>"``. The
      diagnostic is never retried without groups (that would leak group identity across folds).
    - ``densify_policy="fail"`` with a dense operation over budget (``separatix.exceptions.DensificationError``)
      -> :class:`vertebrae.core.errors.BudgetError` naming the MiB budget and max_dense_bytes.
    - any other error propagates.

Warnings
    ``SeparatixResult.warnings`` is the report's own warning list followed by every Python warning raised
    during the call (separatix, scikit-learn, ...) whose text is not already listed, as ``"Category: text"``.

probe_summary (built from the report only; nothing is fitted)
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
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.errors import BudgetError, ValidationError
from vertebrae.core.fingerprint import to_json_value
from vertebrae.core.arrays import as_matrix, nonfinite_rows

BUDGETS = ("fast", "standard", "extended")
DENSIFY_POLICIES = ("warn_and_sample", "skip", "fail")
TARGET_MODES = {"classification": "singlelabel", "multilabel": "multilabel", "regression": "regression"}
MIB = 2**20
GROUP_SUPPORT_MARKER = "distinct groups"
GROUP_SKIP_PREFIX = "grouped diagnostic skipped: "

_MAX_RANDOM_STATE = 2**32 - 1
_NONLINEAR_EXCLUDED_FAMILIES = ("dummy", "linear")
# separatix.models.probes._PROBE_FAMILIES (0.1.1), used when a probe carries no recipe.
_PROBE_FAMILIES = {"dummy": "dummy", "linear": "linear", "knn": "local_kernel", "smooth_poly": "smooth_nonlinear",
                   "kernel_approx": "local_kernel"}
_BOOKKEEPING_SUFFIXES = ("_seconds", "_bytes", "_mb", "_count", "_repeats", "_degree", "_components")
_SMALLER_TOKENS = frozenset({"rmse", "mae", "mse", "loss", "error"})
_LARGER_TOKENS = frozenset({"accuracy", "f1", "jaccard", "r2", "precision", "recall"})
_PROBE_SKIP_NAMES = frozenset({"supervised_cross_validation", "unsupported_group_classes",
                               "unsupported_multilabel_columns", "constant_regression_targets"})


# --------------------------------------------------------------------------------------------------
# config


def _check_bool(value: Any, name: str) -> None:
    if not isinstance(value, bool):
        raise ValidationError(f"SeparatixConfig.{name} must be a bool, got {value!r}")


def _check_fraction(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValidationError(f"SeparatixConfig.{name} must be a number in [0, 1], got {value!r}")
    value = float(value)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValidationError(f"SeparatixConfig.{name} must be a number in [0, 1], got {value!r}")
    return value


def _check_optional_positive(value: Any, name: str, owner: str = "SeparatixConfig") -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValidationError(f"{owner}.{name} must be a positive integer or None, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class SeparatixConfig:
    """Settings of the optional Separatix diagnostic stage (validated at construction).

    - ``enabled``: run at all.
    - ``overlap_threshold`` (0.80): gate for classification and multi-label targets (OverlapIndex, in [0, 1]).
    - ``regression_overlap_threshold`` (0.30): gate for regression. The continuous overlap index is
      null-calibrated (0 = no better than a permuted target) and runs far lower than the categorical index for
      the same quality: a target an embedding predicts well scored ~0.39 here. 0.30 means "clearly better than
      the null", so separatix only profiles targets with real signal.
    - ``random_state`` (0): always an int in [0, 2**32 - 1]; separatix is non-deterministic without one.
    - ``budget`` ("fast"): separatix effort. "fast" keeps the demo quick: runtime is capped by the budget's
      sample limits (5,000 probe rows, 3 folds, no kernel probe), not by n -- ~9 s and ~0.9 GB peak on one
      20k x 512 set in the dependency notes, but 30-55 s (0.95 GB) measured on 20k x 512 Gaussian data with
      2-10 classes on 2 cores, where the linear and low-rank quadratic probes dominate. "standard" took ~4 min
      and 2.6 GB peak on 20k x 512; "extended" costs more still. The recommendation can change with the
      budget: compare runs only at a fixed budget.
    - ``densify_policy`` ("warn_and_sample"): dense-only diagnostics on sparse/over-budget data sample within
      the budget ("warn_and_sample"), are recorded as skipped ("skip"), or raise BudgetError ("fail").
    - ``max_dense_bytes`` (None): per-operation dense budget; None uses the overlap config's max_dense_bytes.
      Separatix receives whole MiB: ``max(1, floor(bytes / 2**20))``.
    - ``max_samples`` (None): hard row cap for separatix sampling.
    - ``mlp_probes`` (False): optional separatix MLP probes (need torch; reported as dependency_unavailable
      otherwise).
    """

    enabled: bool = True
    overlap_threshold: float = 0.80
    regression_overlap_threshold: float = 0.30
    random_state: int = 0
    budget: str = "fast"
    densify_policy: str = "warn_and_sample"
    max_dense_bytes: int | None = None
    max_samples: int | None = None
    mlp_probes: bool = False

    def __post_init__(self) -> None:
        _check_bool(self.enabled, "enabled")
        object.__setattr__(self, "overlap_threshold", _check_fraction(self.overlap_threshold, "overlap_threshold"))
        object.__setattr__(self, "regression_overlap_threshold",
                           _check_fraction(self.regression_overlap_threshold, "regression_overlap_threshold"))
        rs = self.random_state
        if isinstance(rs, bool) or not isinstance(rs, (int, np.integer)) or not 0 <= rs <= _MAX_RANDOM_STATE:
            raise ValidationError(
                f"SeparatixConfig.random_state must be an integer in [0, 2**32 - 1] (never None: separatix is "
                f"non-deterministic without it), got {rs!r}")
        object.__setattr__(self, "random_state", int(rs))
        if self.budget not in BUDGETS:
            raise ValidationError(f"SeparatixConfig.budget must be one of {BUDGETS}, got {self.budget!r}")
        if self.densify_policy not in DENSIFY_POLICIES:
            raise ValidationError(f"SeparatixConfig.densify_policy must be one of {DENSIFY_POLICIES}, got {self.densify_policy!r}")
        object.__setattr__(self, "max_dense_bytes", _check_optional_positive(self.max_dense_bytes, "max_dense_bytes"))
        object.__setattr__(self, "max_samples", _check_optional_positive(self.max_samples, "max_samples"))
        _check_bool(self.mlp_probes, "mlp_probes")

    def threshold_for(self, target_type: str) -> float:
        """The gate threshold of a target type."""
        if target_type not in TARGET_MODES:
            raise ValidationError(f"unknown target type {target_type!r}; expected one of {tuple(TARGET_MODES)}")
        return self.regression_overlap_threshold if target_type == "regression" else self.overlap_threshold

    def max_dense_mb(self, fallback_max_dense_bytes: int) -> int:
        """Whole-MiB budget passed to separatix: ``max(1, floor(bytes / 2**20))``."""
        fallback = _check_optional_positive(fallback_max_dense_bytes, "fallback_max_dense_bytes", "SeparatixScorer.run")
        if fallback is None:
            raise ValidationError("SeparatixScorer.run.fallback_max_dense_bytes must be a positive integer, got None")
        budget = self.max_dense_bytes if self.max_dense_bytes is not None else fallback
        return max(1, budget // MIB)

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SeparatixConfig:
        if not isinstance(data, Mapping):
            raise ValidationError(f"SeparatixConfig.from_dict needs a mapping, got {type(data).__name__}")
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValidationError(f"unknown SeparatixConfig fields: {sorted(unknown)}")
        return cls(**data)


# --------------------------------------------------------------------------------------------------
# result


def json_safe(value: Any) -> Any:
    """Plain JSON data: numpy values converted, NaN/inf -> None, keys as str, tuples as lists.

    Objects JSON has no form for are written as their ``str`` (separatix's terse report holds none).
    """
    if value is None or isinstance(value, (bool, str)):
        return str.__str__(value) if isinstance(value, str) else value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, Mapping):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(item) for item in value]
    return str(value)


@dataclass(frozen=True)
class SeparatixResult:
    """Outcome of the Separatix stage; descriptive only (never used for ranking).

    ``report`` is the complete terse separatix report (``DiagnosticReport.to_dict(terse=True)`` made JSON-safe:
    recommendation, recommendation_text, confidence, metrics, scores, interpretations, decision_path, warnings,
    errors, skipped_diagnostics, preprocessing, sampling, densification_events, class_summary, grouping,
    runtime, config); row-level arrays (predictions, indices, fold assignments, per-label/target metrics) are
    pruned by separatix. ``preprocessing``, ``densification_events``, ``skipped_diagnostics`` and ``grouping``
    repeat the report's entries for direct access; ``warnings`` adds captured Python warnings (module
    docstring). ``settings`` are the arguments given (or that would have been given) to ``separatix.diagnose``.
    """

    ran: bool
    skipped_reason: str | None
    gate: dict[str, Any]
    target_type: str
    target_mode: str
    recommendation: str | None = None
    confidence: str | None = None
    decision_path: list[str] = field(default_factory=list)
    scores: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] | None = None
    probe_summary: dict[str, Any] | None = None
    preprocessing: dict[str, Any] = field(default_factory=dict)
    densification_events: list[dict[str, Any]] = field(default_factory=list)
    skipped_diagnostics: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    grouping: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {name: to_json_value(json_safe(getattr(self, name)), f"SeparatixResult.{name}")
                for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SeparatixResult:
        if not isinstance(data, Mapping):
            raise ValidationError(f"SeparatixResult.from_dict needs a mapping, got {type(data).__name__}")
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValidationError(f"unknown SeparatixResult fields: {sorted(unknown)}")
        missing = [name for name in ("ran", "skipped_reason", "gate", "target_type", "target_mode") if name not in data]
        if missing:
            raise ValidationError(f"SeparatixResult fields missing: {missing}")
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


# --------------------------------------------------------------------------------------------------
# probe summary


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


# --------------------------------------------------------------------------------------------------
# scorer


def _separatix_targets(targets: Any) -> tuple[str, Any]:
    kind = getattr(targets, "target_type", None)
    if kind not in TARGET_MODES:
        raise ValidationError(f"targets must be vertebrae Targets of type {tuple(TARGET_MODES)}, got {type(targets).__name__} ({kind!r})")
    values = targets.values
    if kind == "classification":
        return "singlelabel", np.asarray([str(key) for key in values], dtype=str)
    if kind == "multilabel":
        return "multilabel", sp.csr_matrix(values, dtype=np.int8)
    return "regression", np.asarray(values, dtype=np.float64)


def _group_array(groups: Any, n_rows: int) -> np.ndarray | None:
    if groups is None:
        return None
    array = np.asarray(groups.tolist() if isinstance(groups, np.ndarray) else list(groups), dtype=object)
    if array.ndim != 1 or array.shape[0] != n_rows:
        raise ValidationError(f"groups must be a 1-D sequence with one key per row ({n_rows}), got shape {array.shape}")
    return array


def _merge_warnings(reported: Sequence[str], caught: Sequence[warnings.WarningMessage]) -> list[str]:
    out = [str(message) for message in reported]
    seen = set(out)
    for item in caught:
        text = str(item.message)
        line = f"{item.category.__name__}: {text}"
        if text in seen or line in seen:
            continue
        seen.add(line)
        out.append(line)
    return out


class SeparatixScorer:
    """Runs ``separatix.diagnose`` behind the overlap gate (module docstring)."""

    def __init__(self, config: SeparatixConfig | None = None) -> None:
        if config is not None and not isinstance(config, SeparatixConfig):
            raise ValidationError(f"config must be a SeparatixConfig, got {type(config).__name__}")
        self.config = config or SeparatixConfig()

    def run(
        self,
        embeddings: Any,
        targets: Any,
        *,
        overlap_score: float,
        groups: Any = None,
        normalize_embeddings: bool = True,
        fallback_max_dense_bytes: int = 2_000_000_000,
    ) -> SeparatixResult:
        config = self.config
        target_mode, y = _separatix_targets(targets)
        target_type = targets.target_type
        if isinstance(overlap_score, bool) or not isinstance(overlap_score, (int, float, np.integer, np.floating)) \
                or not math.isfinite(float(overlap_score)):
            raise ValidationError(f"overlap_score must be a finite number, got {overlap_score!r}")
        if not isinstance(normalize_embeddings, bool):
            raise ValidationError(f"normalize_embeddings must be a bool, got {normalize_embeddings!r}")
        score = float(overlap_score)
        threshold = config.threshold_for(target_type)
        passed = score >= threshold
        gate = {"metric": "overlap", "score": score, "threshold": threshold, "passed": passed}

        matrix = as_matrix(embeddings, what="embeddings")
        if matrix.shape[0] != targets.n_rows:
            raise ValidationError(f"embeddings have {matrix.shape[0]} rows but the targets have {targets.n_rows}")
        group_keys = _group_array(groups, matrix.shape[0])
        settings = {
            "target_mode": target_mode,
            "budget": config.budget,
            "random_state": config.random_state,
            "densify_policy": config.densify_policy,
            "max_dense_mb": config.max_dense_mb(fallback_max_dense_bytes),
            "max_dense_bytes": config.max_dense_bytes if config.max_dense_bytes is not None else fallback_max_dense_bytes,
            "max_samples": config.max_samples,
            "mlp_probes": config.mlp_probes,
            "normalize_embeddings": normalize_embeddings,
            "groups_provided": group_keys is not None,
            "input_sparse": bool(sp.issparse(matrix)),
        }
        base = {"gate": gate, "target_type": target_type, "target_mode": target_mode, "settings": settings}

        if not config.enabled:
            return SeparatixResult(ran=False, skipped_reason="separatix disabled (SeparatixConfig.enabled=False)", **base)
        if not passed:
            return SeparatixResult(
                ran=False,
                skipped_reason=(f"overlap gate not passed: overlap score {score:.6g} is below the {target_type} "
                                f"threshold {threshold:.6g}"),
                **base)

        bad = nonfinite_rows(matrix)
        if bad.size:
            raise ValidationError(f"embeddings: {bad.size} row(s) contain NaN or infinite values (first index {int(bad[0])})")
        if normalize_embeddings:
            from vertebrae.scoring.overlap import l2_normalize

            matrix = l2_normalize(matrix)

        import separatix
        from separatix.exceptions import DensificationError

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                report = separatix.diagnose(
                    matrix, y,
                    groups=group_keys,
                    return_report=True,
                    target_mode=target_mode,
                    budget=config.budget,
                    densify_policy=config.densify_policy,
                    max_dense_mb=settings["max_dense_mb"],
                    max_samples=config.max_samples,
                    random_state=config.random_state,
                    mlp_probes=config.mlp_probes,
                )
            except DensificationError as exc:
                raise BudgetError(
                    f"separatix (densify_policy={config.densify_policy!r}) needs a dense operation over the budget of "
                    f"{settings['max_dense_mb']} MiB (max_dense_bytes={settings['max_dense_bytes']}): {exc}") from exc
            except ValueError as exc:
                if group_keys is None or GROUP_SUPPORT_MARKER not in str(exc):
                    raise
                n_groups = len(set(group_keys.tolist()))
                return SeparatixResult(
                    ran=False,
                    skipped_reason=f"{GROUP_SKIP_PREFIX}{exc}",
                    warnings=_merge_warnings([], caught),
                    grouping={"provided": True, "group_count": n_groups},
                    **base)

        document = json_safe(report.to_dict(terse=True))
        return SeparatixResult(
            ran=True,
            skipped_reason=None,
            recommendation=document["recommendation"],
            confidence=document["confidence"],
            decision_path=list(document.get("decision_path") or []),
            scores=dict(document.get("scores") or {}),
            report=document,
            probe_summary=summarize_probes(document),
            preprocessing=dict(document.get("preprocessing") or {}),
            densification_events=list(document.get("densification_events") or []),
            skipped_diagnostics=list(document.get("skipped_diagnostics") or []),
            warnings=_merge_warnings(document.get("warnings") or [], caught),
            grouping=dict(document.get("grouping") or {}),
            **base,
        )
