"""Row-resampled paired comparison: m-out-of-n subsampling without replacement, for few-class labelled benchmarks.

A labelled benchmark is compared over its classes; with few classes (3-class wine, iris) the per-class
randomization test cannot reach significance (its smallest p is 2/2^K). Then the comparison resamples *rows*:
``resamples`` subsamples drawn without replacement, stratified by class (each class keeps ``floor(n_c x
fraction)`` rows; the draws of ``vertebrae.scoring.stability.draw_subsample``), the same subsamples for every
candidate (matched), each candidate's OverlapIndex scored on each.

The method is subsampling (Politis & Romano 1994; Politis, Romano & Wolf 1999; Bickel, Gotze & van Zwet 1997):
the distribution of ``tau_b (theta_b - theta)`` over subsamples of size b estimates that of ``tau_n (theta_n -
theta)``, with no duplicated rows (a bootstrap's duplicates distort a neighbourhood statistic such as
OverlapIndex). With ``tau_n = sqrt(n)`` and the finite-population correction of sampling without replacement
(the delete-d jackknife's factor, Shao & Wu 1989), a subsample deviation ``theta_b - mean_b`` times
``c = sqrt(b / (n - b))`` is a draw of ``theta_n - theta`` (``c -> sqrt(b/n) = tau_b / tau_n`` when b << n).
Deviations are centred on the mean over subsamples, not on the full-data value, so the small-sample bias of a
statistic that depends on n cancels. For candidate i (pair delta likewise, per subsample ``theta_a - theta_b``):

- interval: ``[theta_n - q_(1+level)/2(d), theta_n - q_(1-level)/2(d)]``, ``d_r = c (theta_r - mean)``;
- symmetric subsampling test of delta = 0: ``p = (1 + #{|d_r| >= |delta_n|}) / (R + 1)`` (smallest 1/(R+1)),
  adjusted across pairs (``config.adjustment``).

It answers how the verdict varies over the rows of *this* dataset; it says nothing about other datasets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.records import bounded_int, from_record, is_real, one_of, positive_int
from vertebrae.scoring.paired.config import ComparisonConfig
from vertebrae.scoring.paired.result import PairedComparison
from vertebrae.scoring.paired.significance import adjust, verdict

MODES = ("auto", "rows", "class")
METHOD = "m-out-of-n subsampling without replacement"
REFERENCE = ("Politis and Romano (1994), Ann. Statist. 22:2031-2050; Politis, Romano and Wolf (1999), Subsampling; "
             "finite-population rate correction sqrt(b/(n-b))")
TEST = "subsampling"
UNIT = "row subsample"
MIN_ROWS_PER_CLASS = 2
_OWNER = "RowResamplingConfig"


@dataclass(frozen=True)
class RowResamplingConfig:
    """When and how a labelled comparison resamples rows instead of pairing over classes.

    - ``mode``: ``"auto"`` (rows when a single-label benchmark ranked by OverlapIndex has fewer than
      ``min_classes`` classes and every class keeps at least 2 rows per subsample, else classes), ``"rows"``
      (always; a class too small to subsample is refused by name), ``"class"`` (never);
    - ``resamples``: matched subsamples (>= 20; the smallest p-value is 1/(resamples + 1));
    - ``fraction``: share of each class's rows per subsample, strictly between 0 and 1;
    - ``random_state``: seed of the subsample draws (the stability analysis's sampling stream);
    - ``min_classes``: the class count from which the per-class unit is used in ``auto`` mode.
    """

    mode: str = "auto"
    resamples: int = 200
    fraction: float = 0.5
    random_state: int = 0
    min_classes: int = 10

    def __post_init__(self) -> None:
        one_of(self.mode, MODES, _OWNER, "mode")
        resamples = positive_int(self.resamples, _OWNER, "resamples")
        bounded_int(resamples, _OWNER, "resamples", 20, 100_000, "each resample is one OverlapIndex fit per candidate")
        object.__setattr__(self, "resamples", resamples)
        fraction = self.fraction
        if not is_real(fraction) or not math.isfinite(float(fraction)) or not 0.0 < float(fraction) < 1.0:
            raise ConfigError(f"{_OWNER}.fraction must be a number strictly between 0 and 1, got {fraction!r}")
        object.__setattr__(self, "fraction", float(fraction))
        if not isinstance(self.random_state, int) or isinstance(self.random_state, bool) or self.random_state < 0:
            raise ConfigError(f"{_OWNER}.random_state must be a non-negative integer, got {self.random_state!r}")
        object.__setattr__(self, "min_classes", positive_int(self.min_classes, _OWNER, "min_classes"))

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RowResamplingConfig:
        return from_record(cls, data)

    def stability_config(self):
        """The subsample stability analysis that scores the resamples (same draws, same seeds)."""
        from vertebrae.scoring.stability import StabilityConfig

        return StabilityConfig(mode="subsample", repeats=self.resamples, subsample_fraction=self.fraction,
                               random_state=self.random_state)


def too_small(targets: Any, fraction: float) -> list[str]:
    """``'class' (count -> kept)`` for every class that keeps fewer than 2 rows in a subsample."""
    short = []
    for key, count in targets.counts().items():
        kept = int(math.floor(count * fraction))
        if count > 0 and kept < MIN_ROWS_PER_CLASS:
            short.append(f"{targets.catalog.display(key)!r} ({count} -> {kept})")
    return short


def resolve(config: RowResamplingConfig | None, targets: Any, *, primary_metric: str,
            comparison_enabled: bool = True) -> RowResamplingConfig | None:
    """The row resampling a benchmark runs (None: its comparison pairs over classes, or none runs).

    ``mode="rows"`` on a dataset too small to subsample is refused (``ValidationError`` naming the classes)."""
    config = config or RowResamplingConfig()
    if config.mode == "class" or not comparison_enabled:
        return None
    eligible = targets.target_type == "classification" and primary_metric == "overlap"
    if config.mode == "rows" and not eligible:
        raise ValidationError("a row-resampled comparison needs single-label classes and OverlapIndex as the primary "
                              f"metric (target type {targets.target_type!r}, primary metric {primary_metric!r})")
    if not eligible:
        return None
    n_classes = sum(1 for count in targets.counts().values() if count > 0)
    if config.mode == "auto" and n_classes >= config.min_classes:
        return None
    short = too_small(targets, config.fraction)
    if short:
        if config.mode == "auto":
            return None
        shown = ", ".join(short[:10]) + (", ..." if len(short) > 10 else "")
        raise ValidationError(f"row-resampled comparison: a subsample of fraction {config.fraction} keeps fewer than "
                              f"{MIN_ROWS_PER_CLASS} rows of class {shown} (count -> floor(count x fraction)); the "
                              "dataset is too small to subsample")
    return config


def _quantiles(values: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    alpha = (1.0 - level) / 2.0
    return np.quantile(values, alpha, axis=0), np.quantile(values, 1.0 - alpha, axis=0)


def compare_row_resamples(names: Sequence[str], points: Sequence[float], resampled: Any, *, n_rows: int,
                          subsample_rows: int, n_classes: int, config: ComparisonConfig,
                          rows: RowResamplingConfig) -> PairedComparison:
    """The comparison of candidates ``names`` (full-data scores ``points``) from their scores ``resampled``
    ``(m, R)`` on the same R subsamples of ``subsample_rows`` of ``n_rows`` rows (module docstring)."""
    values = np.asarray(resampled, dtype=np.float64)
    point = np.asarray(points, dtype=np.float64)
    m = len(names)
    if values.ndim != 2 or values.shape[0] != m or point.shape != (m,) or m < 2:
        raise ValidationError(f"compare_row_resamples: needs (m >= 2, R) resample scores for {m} candidates, got "
                              f"{values.shape}")
    if not np.isfinite(values).all() or not np.isfinite(point).all():
        raise ValidationError("compare_row_resamples: non-finite scores")
    if not 0 < subsample_rows < n_rows:
        raise ValidationError(f"compare_row_resamples: subsample size {subsample_rows} must lie in (0, {n_rows})")
    r = values.shape[1]
    scale = math.sqrt(subsample_rows / (n_rows - subsample_rows))
    dev = scale * (values - values.mean(axis=1, keepdims=True))  # (m, R)
    low, high = _quantiles(dev.T, config.confidence_level)
    pairs_ix = list(combinations(range(m), 2))
    ia = np.array([a for a, _ in pairs_ix]); ib = np.array([b for _, b in pairs_ix])
    delta = point[ia] - point[ib]
    diff = values[ia] - values[ib]
    dev_p = scale * (diff - diff.mean(axis=1, keepdims=True))  # (P, R)
    p_low, p_high = _quantiles(dev_p.T, config.confidence_level)
    exceed = np.count_nonzero(np.abs(dev_p) >= np.abs(delta)[:, None] * (1 - 1e-12), axis=1)
    p_value = (1.0 + exceed) / (r + 1.0)
    identical = np.array([np.array_equal(values[a], values[b]) and point[a] == point[b] for a, b in pairs_ix])
    p_value = np.where(identical, 1.0, p_value)
    p_adjusted = adjust(p_value, config.adjustment)
    min_p = 1.0 / (r + 1.0)
    candidates = [{"name": names[i], "score": float(point[i]), "ci_low": float(point[i] - high[i]),
                   "ci_high": float(point[i] - low[i])} for i in range(m)]
    pairs = [{"a": names[a], "b": names[b], "delta": float(delta[k]),
              "ci_low": 0.0 if identical[k] else float(delta[k] - p_high[k]),
              "ci_high": 0.0 if identical[k] else float(delta[k] - p_low[k]), "test": TEST,
              "p_value": float(p_value[k]), "p_adjusted": float(p_adjusted[k]), "min_p_value": min_p,
              "verdict": verdict(float(delta[k]), float(p_adjusted[k]), config.alpha)}
             for k, (a, b) in enumerate(pairs_ix)]
    method = {"name": METHOD, "unit": "rows", "reference": REFERENCE, "resamples": r, "fraction": rows.fraction,
              "random_state": rows.random_state, "n_rows": int(n_rows), "subsample_rows": int(subsample_rows),
              "n_classes": int(n_classes), "rate_correction": "sqrt(b / (n - b))", "scale": scale}
    notes = [f"Row-resampled: with {n_classes} classes the per-class unit cannot reach significance, so rows are "
             f"resampled instead ({METHOD}: {r} matched subsamples of {subsample_rows} of {n_rows} rows, stratified "
             f"by class, rate-corrected by sqrt(b/(n-b)) = {scale:.3g}). It answers how the verdict varies over the "
             "rows of this dataset, not over other datasets."]
    threshold = config.alpha if config.adjustment == "none" or len(pairs) == 1 else config.alpha / len(pairs)
    if min_p > threshold:
        notes.append(f"The subsampling test's smallest p-value is 1/{r + 1} = {min_p:.3g}, above the significance "
                     f"threshold {threshold:.3g}: use more row resamples.")
    return PairedComparison(
        config=config, unit=UNIT, statistic="overlap (row-resampled)", reducer="mean", n_units=r, n_strata=n_classes,
        candidates=candidates, pairs=pairs, min_p_value=min_p, leader=names[int(np.argmax(point))], notes=notes,
        method=method)


__all__ = ["METHOD", "MODES", "REFERENCE", "RowResamplingConfig", "TEST", "compare_row_resamples", "resolve",
           "too_small"]
