"""``ComparisonConfig``: the settings of a paired comparison (frozen; strict ``from_dict``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vertebrae.core.errors import ConfigError
from vertebrae.core.fingerprint import to_json_value
from vertebrae.core.records import bounded_int, check_bool, from_record, is_real, one_of, positive_int, seed_int

INTERVALS = ("percentile", "bca")
ADJUSTMENTS = ("holm", "bonferroni", "none")
MIN_RESAMPLES = 100
MAX_RESAMPLES = 1_000_000


def _open_unit(value: Any, name: str) -> float:
    """``float(value)`` for a finite number strictly between 0 and 1."""
    if not is_real(value) or not math.isfinite(float(value)) or not 0.0 < float(value) < 1.0:
        raise ConfigError(f"ComparisonConfig.{name} must be a number strictly between 0 and 1, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class ComparisonConfig:
    """How candidates are compared (recorded in every comparison document).

    - ``resamples``: bootstrap resamples, and random swaps of the randomization test (>= 100). The test
      enumerates all ``2**n`` swaps instead when ``2**n <= resamples``.
    - ``confidence_level``: two-sided level of every interval (0 < level < 1).
    - ``interval``: ``"percentile"`` or ``"bca"`` (bias-corrected and accelerated, jackknife acceleration).
    - ``adjustment``: multiplicity adjustment of the pairwise p-values: ``"holm"``, ``"bonferroni"``, ``"none"``.
    - ``alpha``: a pair is "ahead"/"behind" when its adjusted p-value is below ``alpha``.
    - ``seed``: every random draw derives from it (same seed, same document).
    - ``enabled``: the switch the stages read; :func:`compare_units` itself does not look at it.
    """

    resamples: int = 10_000
    confidence_level: float = 0.95
    interval: str = "percentile"
    adjustment: str = "holm"
    alpha: float = 0.05
    seed: int = 0
    enabled: bool = True

    def __post_init__(self) -> None:
        resamples = positive_int(self.resamples, "ComparisonConfig", "resamples")
        if resamples < MIN_RESAMPLES:
            raise ConfigError(f"ComparisonConfig.resamples must be at least {MIN_RESAMPLES}, got {resamples!r}")
        bounded_int(resamples, "ComparisonConfig", "resamples", MIN_RESAMPLES, MAX_RESAMPLES,
                    "each resample draws an index per unit, held in memory")
        object.__setattr__(self, "resamples", resamples)
        object.__setattr__(self, "confidence_level", _open_unit(self.confidence_level, "confidence_level"))
        one_of(self.interval, INTERVALS, "ComparisonConfig", "interval")
        one_of(self.adjustment, ADJUSTMENTS, "ComparisonConfig", "adjustment")
        object.__setattr__(self, "alpha", _open_unit(self.alpha, "alpha"))
        object.__setattr__(self, "seed", seed_int(self.seed, "ComparisonConfig", "seed"))
        check_bool(self.enabled, "ComparisonConfig", "enabled")

    def to_dict(self) -> dict[str, Any]:
        return {name: to_json_value(getattr(self, name)) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ComparisonConfig:
        """Strict: a non-mapping or an unknown key is refused (``ConfigError`` naming the keys)."""
        return from_record(cls, data)
