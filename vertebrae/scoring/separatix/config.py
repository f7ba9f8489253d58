"""SeparatixConfig: whether the Separatix stage runs, its overlap gate and the settings of the separatix call."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vertebrae.core.errors import ValidationError
from vertebrae.core.records import check_bool, from_record, is_int, one_of, positive_int, probability

BUDGETS = ("fast", "standard", "extended")
DENSIFY_POLICIES = ("warn_and_sample", "skip", "fail")
TARGET_MODES = {"classification": "singlelabel", "multilabel": "multilabel", "regression": "regression"}
MIB = 2**20

_OWNER = "SeparatixConfig"
_MAX_RANDOM_STATE = 2**32 - 1


@dataclass(frozen=True)
class SeparatixConfig:
    """Settings of the optional Separatix diagnostic stage (validated at construction).

    - ``enabled``: run at all.
    - ``overlap_threshold`` (0.80): gate for classification and multi-label targets (OverlapIndex, in [0, 1]).
    - ``regression_overlap_threshold`` (0.30): gate for regression. The continuous overlap index is
      null-calibrated (0 = no better than a permuted target) and runs far lower than the categorical index for
      the same quality; 0.30 means "clearly better than the null", so separatix only profiles targets with
      real signal.
    - ``random_state`` (0): always an int in [0, 2**32 - 1]; separatix is non-deterministic without one.
    - ``budget`` ("fast"): separatix effort. "fast" caps the runtime by the budget's sample limits (5,000 probe
      rows, 3 folds, no kernel probe), not by n; "standard" and "extended" cost more. The recommendation can
      change with the budget: compare runs only at a fixed budget.
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
        check_bool(self.enabled, _OWNER, "enabled", error=ValidationError)
        for name in ("overlap_threshold", "regression_overlap_threshold"):
            object.__setattr__(self, name, probability(getattr(self, name), _OWNER, name, error=ValidationError))
        rs = self.random_state
        if not is_int(rs) or not 0 <= rs <= _MAX_RANDOM_STATE:
            raise ValidationError(
                f"SeparatixConfig.random_state must be an integer in [0, 2**32 - 1] (never None: separatix is "
                f"non-deterministic without it), got {rs!r}")
        object.__setattr__(self, "random_state", int(rs))
        one_of(self.budget, BUDGETS, _OWNER, "budget", error=ValidationError)
        one_of(self.densify_policy, DENSIFY_POLICIES, _OWNER, "densify_policy", error=ValidationError)
        for name in ("max_dense_bytes", "max_samples"):
            object.__setattr__(self, name, positive_int(getattr(self, name), _OWNER, name, error=ValidationError,
                                                        optional=True))
        check_bool(self.mlp_probes, _OWNER, "mlp_probes", error=ValidationError)

    def threshold_for(self, target_type: str) -> float:
        """The gate threshold of a target type."""
        if target_type not in TARGET_MODES:
            raise ValidationError(f"unknown target type {target_type!r}; expected one of {tuple(TARGET_MODES)}")
        return self.regression_overlap_threshold if target_type == "regression" else self.overlap_threshold

    def max_dense_mb(self, fallback_max_dense_bytes: int) -> int:
        """Whole-MiB budget passed to separatix: ``max(1, floor(bytes / 2**20))``."""
        fallback = positive_int(fallback_max_dense_bytes, "SeparatixScorer.run", "fallback_max_dense_bytes",
                                error=ValidationError, optional=True)
        if fallback is None:
            raise ValidationError("SeparatixScorer.run.fallback_max_dense_bytes must be a positive integer, got None")
        budget = self.max_dense_bytes if self.max_dense_bytes is not None else fallback
        return max(1, budget // MIB)

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SeparatixConfig:
        return from_record(cls, data, error=ValidationError)
