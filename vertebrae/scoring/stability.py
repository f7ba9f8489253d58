"""Stability analysis: repeated OverlapIndex scoring.

Every repeat is one ``OverlapIndexScorer(scoring_config).score_targets(...)`` call. The results are
reported as *stability summaries* and *stability intervals*: descriptive statistics of the repeated
scores, not formal confidence intervals.

Modes
-----
``"prototype"`` (default)
    Embeddings and targets stay fixed; only the MiniBatchKMeans seed changes between repeats.
``"subsample"``
    Each repeat scores a target-aware subsample (see :func:`draw_subsample`). Every subsample plan is
    drawn and validated before the first repeat is scored; if the minimums cannot be met the run fails
    with a ValidationError recommending a larger ``subsample_fraction`` or ``mode="prototype"``. The
    subset is never silently expanded.

Seed streams
------------
Two independent deterministic streams (numpy ``SeedSequence``; values are uint32, stored as ``int``)::

    scoring_seeds  = SeedSequence([seed, 0x5C0]).generate_state(repeats)
    sampling_seeds = SeedSequence([stability_config.random_state, 0x5A3]).generate_state(repeats)

Repeat ``r`` scores with ``seed=scoring_seeds[r]`` and, in subsample mode, draws its rows with
``numpy.random.default_rng(sampling_seeds[r])``. Changing ``seed`` never changes the sampling plan and
changing ``random_state`` never changes the scoring seeds. Same inputs give identical results.

Sparse embeddings are converted to CSR once and stay CSR: row slicing a CSR matrix yields CSR, so every
repeat's OverlapIndex call receives CSR.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.fingerprint import to_json_value
from vertebrae.core.records import bounded_int, from_record, is_int, is_real, non_negative_int, record_fields, seed_int
from vertebrae.core.arrays import as_matrix, encode_row_ids
from vertebrae.scoring.degenerate import CODE as COLLAPSE_CODE
from vertebrae.scoring.overlap import ContinuousOverlapScoringConfig, OverlapIndexScorer, OverlapScoringConfig

STABILITY_MODES = ("prototype", "subsample")
SCORING_STREAM_TAG = 0x5C0
SAMPLING_STREAM_TAG = 0x5A3
MIN_CATEGORICAL_OCCURRENCES = 2
MIN_REGRESSION_ROWS = 3
MAX_SUBSAMPLE_DRAWS = 100
MAX_REPEATS = 10_000
"""Multi-label and regression draws per repeat before the minimums are declared unmet."""

_REMEDY = "use a larger subsample_fraction or mode='prototype'"


@dataclass(frozen=True)
class StabilityConfig:
    """Settings of the stability analysis, validated at construction.

    - ``enabled``: whether callers run the analysis at all;
    - ``mode``: ``"prototype"`` (fixed data, changing MiniBatchKMeans seeds) or ``"subsample"``;
    - ``repeats``: number of scored repeats, at least 2;
    - ``interval_level``: coverage of the percentile stability interval, in (0, 1);
    - ``subsample_fraction``: share of rows per repeat, in (0, 1]; required in subsample mode and must
      be None in prototype mode;
    - ``random_state``: non-negative seed of the sampling stream (see the module docstring).

    There is no ``stratified`` field: categorical subsampling is always target-aware.
    """

    enabled: bool = True
    mode: str = "prototype"
    repeats: int = 10
    interval_level: float = 0.95
    subsample_fraction: float | None = None
    random_state: int = 0

    def __post_init__(self) -> None:
        name = "StabilityConfig"
        if not isinstance(self.enabled, (bool, np.bool_)):
            raise ConfigError(f"{name}.enabled must be a bool, got {self.enabled!r}")
        object.__setattr__(self, "enabled", bool(self.enabled))
        if not isinstance(self.mode, str) or self.mode not in STABILITY_MODES:
            raise ConfigError(f"{name}.mode must be one of {STABILITY_MODES}, got {self.mode!r}")
        if not is_int(self.repeats) or self.repeats < 2:
            raise ConfigError(f"{name}.repeats must be an integer >= 2, got {self.repeats!r}")
        object.__setattr__(self, "repeats", bounded_int(self.repeats, name, "repeats", 2, MAX_REPEATS,
                                                        "each repeat is a full scoring fit"))
        if not is_real(self.interval_level) or not 0.0 < float(self.interval_level) < 1.0:
            raise ConfigError(f"{name}.interval_level must be a number strictly between 0 and 1, got {self.interval_level!r}")
        object.__setattr__(self, "interval_level", float(self.interval_level))
        if self.mode == "subsample":
            fraction = self.subsample_fraction
            if fraction is None:
                raise ConfigError(f"{name}.subsample_fraction is required when mode='subsample' (a number in (0, 1])")
            if not is_real(fraction) or not 0.0 < float(fraction) <= 1.0:
                raise ConfigError(f"{name}.subsample_fraction must be a number in (0, 1], got {fraction!r}")
            object.__setattr__(self, "subsample_fraction", float(fraction))
        elif self.subsample_fraction is not None:
            raise ConfigError(
                f"{name}.subsample_fraction applies only to mode='subsample'; leave it None for mode='prototype', "
                f"got {self.subsample_fraction!r}"
            )
        object.__setattr__(self, "random_state", non_negative_int(self.random_state, name, "random_state"))

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StabilityConfig:
        if isinstance(data, Mapping) and "stratified" in data:
            raise ConfigError(
                "StabilityConfig.stratified has been removed: categorical subsampling is always target-aware "
                "(per class for single-label targets, preserving every active label for multi-label targets); "
                "delete the 'stratified' field from the configuration"
            )
        return from_record(cls, data)


@dataclass(frozen=True)
class StabilityResult:
    """Repeated overlap scores with their stability summary and stability interval.

    ``summary`` holds ``mean``, ``std`` (population standard deviation, ddof=0), ``min``, ``max`` and the
    percentile stability interval ``interval_low``/``interval_high`` =
    ``np.percentile(scores, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])`` (numpy's default linear
    interpolation). This describes the spread of the repeats; it is not a confidence interval.

    ``sampling_seeds`` is empty in prototype mode. ``effective_sample_counts`` are the rows scored per
    repeat and ``effective_subsample_fractions`` those counts divided by the input row count (all rows and
    1.0 in prototype mode). ``warnings`` are the distinct scorer warnings of all repeats, in first-seen
    order. ``degenerate_repeats`` are the repeats whose scored rows collapsed (``vertebrae.scoring.degenerate``:
    their scores are meaningless, so the interval is too); empty, and absent from ``to_dict``, when none did.
    """

    mode: str
    repeats: int
    interval_level: float
    scores: list[float]
    summary: dict[str, float]
    scoring_seeds: list[int]
    sampling_seeds: list[int]
    effective_sample_counts: list[int]
    effective_subsample_fractions: list[float]
    warnings: list[str] = field(default_factory=list)
    degenerate_repeats: list[int] = field(default_factory=list)

    @property
    def aggregate_valid(self) -> bool:
        return not self.degenerate_repeats

    def to_dict(self) -> dict[str, Any]:
        return {name: to_json_value(getattr(self, name), f"StabilityResult.{name}") for name in self.__dataclass_fields__
                if name != "degenerate_repeats" or self.degenerate_repeats}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StabilityResult:
        data = record_fields(cls, data, error=ValidationError)
        missing = [name for name in cls.__dataclass_fields__ if name not in ("warnings", "degenerate_repeats") and name not in data]
        if missing:
            raise ValidationError(f"StabilityResult is missing fields: {missing}")
        return cls(
            mode=str(data["mode"]),
            repeats=int(data["repeats"]),
            interval_level=float(data["interval_level"]),
            scores=[float(v) for v in data["scores"]],
            summary={str(k): float(v) for k, v in data["summary"].items()},
            scoring_seeds=[int(v) for v in data["scoring_seeds"]],
            sampling_seeds=[int(v) for v in data["sampling_seeds"]],
            effective_sample_counts=[int(v) for v in data["effective_sample_counts"]],
            effective_subsample_fractions=[float(v) for v in data["effective_subsample_fractions"]],
            warnings=[str(v) for v in data.get("warnings", [])],
            degenerate_repeats=[int(v) for v in data.get("degenerate_repeats", [])],
        )


def scoring_seeds_for(seed: int, repeats: int) -> list[int]:
    """``SeedSequence([seed, 0x5C0]).generate_state(repeats)`` as Python ints."""
    return [int(s) for s in np.random.SeedSequence([int(seed), SCORING_STREAM_TAG]).generate_state(repeats)]


def sampling_seeds_for(random_state: int, repeats: int) -> list[int]:
    """``SeedSequence([random_state, 0x5A3]).generate_state(repeats)`` as Python ints."""
    return [int(s) for s in np.random.SeedSequence([int(random_state), SAMPLING_STREAM_TAG]).generate_state(repeats)]


def stability_summary(scores: Sequence[float], interval_level: float) -> dict[str, float]:
    """Mean, population std (ddof=0), min, max and the percentile stability interval of ``scores``."""
    arr = np.asarray(list(scores), dtype=np.float64)
    low, high = np.percentile(arr, [(1.0 - interval_level) / 2.0 * 100.0, (1.0 + interval_level) / 2.0 * 100.0])
    return {
        "mean": float(arr.mean()),
        "std": float(arr.std(ddof=0)),
        "min": float(arr.min()),
        "max": float(arr.max()),
        "interval_low": float(low),
        "interval_high": float(high),
    }


def _requested(count: int, fraction: float) -> int:
    return int(math.floor(count * fraction))


def check_subsample_minimums(targets, fraction: float) -> None:
    """Raise ValidationError when floor(count x fraction) cannot meet the minimums (draw-independent check).

    - classification: every class present in ``targets`` needs floor(count x fraction) >= 2;
    - multilabel: every active label (count > 0) needs floor(count x fraction) >= 2;
    - regression: floor(n x fraction) >= 3 rows.
    """
    if targets.target_type == "regression":
        n = targets.n_rows
        m = _requested(n, fraction)
        if m < MIN_REGRESSION_ROWS:
            raise ValidationError(
                f"subsample stability: subsample_fraction={fraction} keeps floor({n} x {fraction}) = {m} row(s) of the "
                f"{n} regression rows; at least {MIN_REGRESSION_ROWS} rows are required; {_REMEDY}"
            )
        return
    what = "class" if targets.target_type == "classification" else "label"
    short = []
    for key, count in targets.counts().items():
        if count > 0 and _requested(count, fraction) < MIN_CATEGORICAL_OCCURRENCES:
            short.append(f"{targets.catalog.display(key)!r} ({count} -> {_requested(count, fraction)})")
    if short:
        shown = ", ".join(short[:10]) + (", ..." if len(short) > 10 else "")
        raise ValidationError(
            f"subsample stability: subsample_fraction={fraction} keeps fewer than {MIN_CATEGORICAL_OCCURRENCES} "
            f"occurrences of {what} {shown} (count -> floor(count x fraction)); {_REMEDY}"
        )


def draw_subsample(targets, fraction: float, sampling_seed: int, *, repeat: int = 0) -> np.ndarray:
    """Sorted row indices of one target-aware subsample, drawn with ``default_rng(sampling_seed)``.

    - classification: for each class in catalog order with count c > 0, the first floor(c x fraction)
      entries of ``rng.permutation(rows_of_class)`` (rows of the class in ascending order);
    - multilabel: the first floor(n x fraction) entries of ``rng.permutation(n)``; if an active label keeps
      fewer than 2 occurrences, the draw is repeated with the same generator, at most
      ``MAX_SUBSAMPLE_DRAWS`` (100) draws in all;
    - regression: the first floor(n x fraction) entries of ``rng.permutation(n)``, redrawn the same way
      while every target column of the draw is constant.

    Call :func:`check_subsample_minimums` first. When the redraw budget is spent a ValidationError names
    the repeat and the labels (or the row count) and recommends a larger fraction or prototype mode.
    """
    rng = np.random.default_rng(sampling_seed)
    n = targets.n_rows
    if targets.target_type == "classification":
        keys = np.asarray(targets.values).astype(str)
        parts = []
        for key in targets.catalog.keys:
            rows = np.flatnonzero(keys == key)
            if rows.size:
                parts.append(rng.permutation(rows)[: _requested(rows.size, fraction)])
        return np.sort(np.concatenate(parts)).astype(np.int64)
    m = _requested(n, fraction)
    if targets.target_type == "multilabel":
        indicator = sp.csr_matrix(targets.values)
        active = np.asarray(indicator.sum(axis=0)).ravel() > 0
        for _ in range(MAX_SUBSAMPLE_DRAWS):
            rows = np.sort(rng.permutation(n)[:m]).astype(np.int64)
            kept = np.asarray(indicator[rows].sum(axis=0)).ravel()
            short = np.flatnonzero(active & (kept < MIN_CATEGORICAL_OCCURRENCES))
            if short.size == 0:
                return rows
        names = ", ".join(repr(targets.catalog.display(targets.catalog.keys[j])) for j in short[:10])
        raise ValidationError(
            f"subsample stability: repeat {repeat} could not keep {MIN_CATEGORICAL_OCCURRENCES} occurrences of "
            f"label(s) {names} in {MAX_SUBSAMPLE_DRAWS} draws of {m} of {n} rows "
            f"(subsample_fraction={fraction}); {_REMEDY}"
        )
    values = np.asarray(targets.values, dtype=np.float64).reshape(n, -1)
    for _ in range(MAX_SUBSAMPLE_DRAWS):
        rows = np.sort(rng.permutation(n)[:m]).astype(np.int64)
        if np.any(values[rows].std(axis=0) > 0):
            return rows
    raise ValidationError(
        f"subsample stability: repeat {repeat} drew a constant regression target in {MAX_SUBSAMPLE_DRAWS} draws of "
        f"{m} of {n} rows (subsample_fraction={fraction}); {_REMEDY}"
    )


def run_stability_analysis(
    embeddings: Any,
    targets,
    *,
    scoring_config: OverlapScoringConfig | ContinuousOverlapScoringConfig | None = None,
    stability_config: StabilityConfig = StabilityConfig(),
    seed: int = 0,
    row_ids: Sequence[Any] | None = None,
) -> StabilityResult:
    """Score ``stability_config.repeats`` repeats with OverlapIndexScorer and summarise them.

    ``targets`` is a ``vertebrae.data.targets.Targets`` aligned with ``embeddings``; ``seed`` seeds the
    scoring stream and ``stability_config.random_state`` the sampling stream (module docstring). All
    validation, including every subsample plan, happens before the first repeat is scored.
    """
    from vertebrae.data.targets import Targets

    if not isinstance(stability_config, StabilityConfig):
        raise ValidationError(f"stability_config must be a StabilityConfig, got {type(stability_config).__name__}")
    if not stability_config.enabled:
        raise ValidationError("StabilityConfig.enabled is False; skip the stability analysis instead of running it")
    if not isinstance(targets, Targets):
        raise ValidationError(f"targets must be vertebrae.data.targets.Targets, got {type(targets).__name__}")
    seed_int(seed, "run_stability_analysis", "seed", error=ValidationError)
    scorer = OverlapIndexScorer(scoring_config)
    scorer.config_for(targets.target_type)  # refuse a config of the wrong kind before any work
    matrix = as_matrix(embeddings, what="embeddings")
    n = matrix.shape[0]
    if targets.n_rows != n:
        raise ValidationError(f"embeddings have {n} rows but the targets have {targets.n_rows}")
    keys = encode_row_ids(row_ids, n, what="embeddings")

    repeats = stability_config.repeats
    scoring_seeds = scoring_seeds_for(seed, repeats)
    if stability_config.mode == "subsample":
        fraction = stability_config.subsample_fraction
        check_subsample_minimums(targets, fraction)
        sampling_seeds = sampling_seeds_for(stability_config.random_state, repeats)
        plans = [draw_subsample(targets, fraction, s, repeat=r) for r, s in enumerate(sampling_seeds)]
    else:
        sampling_seeds, plans = [], [None] * repeats

    repeats_done = [stability_repeat(scorer, matrix, targets, keys, scoring_seeds[r], plan) for r, plan in enumerate(plans)]
    return stability_result(stability_config, repeats_done, n, scoring_seeds, sampling_seeds)


def stability_repeat(scorer: OverlapIndexScorer, matrix: Any, targets, keys: Sequence[str], scoring_seed: int,
                     plan: np.ndarray | None) -> dict[str, Any]:
    """One repeat: ``{"score", "warnings", "degenerate", "count"}`` of the rows ``plan`` (all rows when None)
    scored with ``scoring_seed``; the workflow runs each repeat as a job of its own."""
    if plan is None:
        result = scorer.score_targets(matrix, targets, seed=scoring_seed, row_ids=keys)
    else:
        result = scorer.score_targets(matrix[plan], targets.subset(plan), seed=scoring_seed,
                                      row_ids=tuple(keys[i] for i in plan))
    return {"score": float(result.score), "warnings": list(result.warnings), "degenerate": not result.aggregate_valid,
            "count": int(matrix.shape[0] if plan is None else plan.size)}


def stability_result(stability_config: StabilityConfig, repeats: Sequence[Mapping[str, Any]], n: int,
                     scoring_seeds: Sequence[int], sampling_seeds: Sequence[int]) -> StabilityResult:
    """The StabilityResult of the repeats (``stability_repeat``'s dicts, in repeat order) of ``n`` rows."""
    scores = [float(r["score"]) for r in repeats]
    messages: list[str] = []
    for r in repeats:
        messages += [m for m in r["warnings"] if m not in messages]
    degenerate = [i for i, r in enumerate(repeats) if r["degenerate"]]
    counts = [int(r["count"]) for r in repeats]
    return StabilityResult(
        mode=stability_config.mode,
        repeats=stability_config.repeats,
        interval_level=stability_config.interval_level,
        scores=scores,
        summary=stability_summary(scores, stability_config.interval_level),
        scoring_seeds=list(scoring_seeds),
        sampling_seeds=list(sampling_seeds),
        effective_sample_counts=counts,
        effective_subsample_fractions=[c / n for c in counts],
        warnings=messages + ([f"{COLLAPSE_CODE}: stability repeats {degenerate} scored collapsed rows; the "
                              "stability interval is meaningless"] if degenerate else []),
        degenerate_repeats=degenerate,
    )
