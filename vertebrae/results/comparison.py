"""The per-unit values each protocol's ranked candidates are paired on (``PairedUnits`` for ``compare_units``).

- retrieval: the primary metric of every query (``per_query``); bidirectional scoring adds the reverse direction's
  queries as a second stratum, so the statistic is the mean of both directions' means, as ``primary_score`` is;
- zero-shot: every sample's outcome: ``accuracy`` = mean correctness, ``balanced_accuracy`` = the mean over true
  classes (strata) of each class's correctness, ``macro_f1`` from each sample's true and predicted class;
- labelled: the OverlapIndex score of every aggregated class (the macro score is their mean); without classes
  (regression), the stability repeats, paired by seed, when every candidate ran the same repeats; a built-in
  metric (knn, linear_probe: per-sample correctness, strata = true classes for balanced accuracy; few_shot:
  per-episode accuracy; clustering: per-seed score) the units its diagnostics declare under ``"paired"``.

A unit source that does not reproduce a candidate's primary score (within 1e-9) is refused, never compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vertebrae.core.errors import ValidationError
from vertebrae.scoring.paired import PairedUnits

SCORE_TOLERANCE = 1e-9


class ComparisonUnavailable(ValidationError):
    """The candidates have no shared per-unit values for their primary metric; the message says why."""


def _shared(candidates: Sequence[Any], ids_of, what: str) -> list[str]:
    """The unit ids every candidate shares, in the first candidate's order; differing ids are refused by name."""
    first = list(ids_of(candidates[0]))
    for candidate in candidates[1:]:
        if list(ids_of(candidate)) != first:
            raise ValidationError(f"comparison: candidate {candidate.name!r} was scored on other {what} than "
                                  f"{candidates[0].name!r}; paired comparisons need the same {what}")
    return first


def _checked(units: PairedUnits, candidates: Sequence[Any], scores: Sequence[float]) -> PairedUnits:
    points = units.point_values()
    for candidate, point, score in zip(candidates, points, scores):
        if not abs(point - score) <= SCORE_TOLERANCE * max(1.0, abs(score)):
            raise ComparisonUnavailable(f"the per-{units.unit} values of {candidate.name!r} give {point!r}, not its "
                                        f"score {score!r}; they cannot be compared")
    return units


def retrieval_units(candidates: Sequence[Any]) -> PairedUnits:
    """Per query of the primary metric (both directions when bidirectional: two strata)."""
    config = candidates[0].score.config
    metric = config.primary_metric
    directions = ["forward"] + (["reverse"] if config.bidirectional else [])
    ids: list[str] = []
    strata: list[int] = []
    for s, direction in enumerate(directions):
        shared = _shared(candidates, lambda c, d=direction: getattr(c.score, d).query_ids, f"{direction} queries")
        ids += [f"{direction}:{q}" for q in shared] if config.bidirectional else shared
        strata += [s] * len(shared)
    values = np.stack([np.concatenate([getattr(c.score, d).per_query[metric] for d in directions]) for c in candidates])
    statistic = metric + (" (mean of both directions)" if config.bidirectional else "")
    units = PairedUnits(unit="query", statistic=statistic, candidates=tuple(c.name for c in candidates),
                        unit_ids=tuple(ids), values=values[:, :, None], strata=np.asarray(strata), reducer="mean")
    return _checked(units, candidates, [c.primary_score for c in candidates])


def zero_shot_units(candidates: Sequence[Any]) -> PairedUnits:
    """Per sample: correctness (accuracy, balanced accuracy) or true and predicted class (macro F1)."""
    results = [c.zero_shot for c in candidates]
    metric = results[0].primary_metric
    ids = _shared(candidates, lambda c: c.zero_shot.per_sample["sample_ids"], "samples")
    _shared(candidates, lambda c: c.zero_shot.per_sample["true_class"], "true classes")
    true = np.asarray(results[0].per_sample["true_class"])
    predicted = np.stack([np.asarray(r.per_sample["predicted"]) for r in results])
    strata = np.zeros(true.size, dtype=np.int64)
    if metric == "macro_f1":
        k = results[0].n_classes
        eye = np.eye(k)
        values = np.stack([np.concatenate([eye[true] * (p == true)[:, None], eye[p], eye[true]], axis=1)
                           for p in predicted])
        reducer = "macro_f1"
    else:
        values = (predicted == true).astype(np.float64)[:, :, None]
        reducer = "mean"
        if metric == "balanced_accuracy":
            strata = true.astype(np.int64)
        elif metric != "accuracy":
            raise ComparisonUnavailable(f"the zero-shot primary metric {metric!r} has no per-sample form")
    units = PairedUnits(unit="sample", statistic=metric, candidates=tuple(c.name for c in candidates),
                        unit_ids=tuple(ids), values=values, strata=strata, reducer=reducer)
    return _checked(units, candidates, [c.primary_score for c in candidates])


def metric_units(candidates: Sequence[Any], name: str) -> PairedUnits:
    """The per-unit values of metric ``name`` that its diagnostics declare under ``"paired"`` (the built-in
    labelled metrics: per-sample correctness, per-episode accuracy, per-seed clustering score)."""
    results = [c.metrics.get(name) for c in candidates]
    missing = [c.name for c, r in zip(candidates, results) if r is None]
    if missing:
        raise ComparisonUnavailable(f"candidates {missing} have no metric {name!r}")
    paired = [r.diagnostics.get("paired") for r in results]
    if any(p is None for p in paired) or any(p != paired[0] for p in paired):
        raise ComparisonUnavailable(f"the metric {name!r} has no per-unit values")
    spec = paired[0]
    source, column = spec["source"], spec["column"]
    ids = _shared(candidates, lambda c: c.metrics[name].diagnostics[source]["ids"], f"{spec['unit']}s of {name!r}")
    values = np.array([r.diagnostics[source][column] for r in results], dtype=np.float64)
    strata = np.zeros(len(ids), dtype=np.int64)
    if spec["strata"] is not None:
        _shared(candidates, lambda c: [str(v) for v in c.metrics[name].diagnostics[source][spec["strata"]]],
                f"true classes of {name!r}")
        strata = np.asarray(results[0].diagnostics[source][spec["strata"]], dtype=np.int64)
    statistic = results[0].diagnostics.get("statistic", name)
    units = PairedUnits(unit=spec["unit"], statistic=f"{name}: {statistic}", candidates=tuple(c.name for c in candidates),
                        unit_ids=tuple(ids), values=values[:, :, None], strata=strata, reducer="mean")
    return _checked(units, candidates, [r.score for r in results])


def labelled_units(candidates: Sequence[Any]) -> PairedUnits:
    """Per aggregated class of the OverlapIndex score; stability repeats (paired by seed) without classes; a
    built-in metric's own units (``metric_units``) when it is the primary metric."""
    custom = [c.name for c in candidates if c.primary_metric_name != "overlap"]
    if custom:
        metric = next(c.primary_metric_name for c in candidates if c.primary_metric_name != "overlap")
        return metric_units(candidates, metric)
    names = tuple(c.name for c in candidates)
    if all(c.overlap.aggregation_classes for c in candidates):
        classes = _shared(candidates, lambda c: c.overlap.aggregation_classes, "classes")
        values = np.array([[c.overlap.per_class_scores[key] for key in classes] for c in candidates], dtype=np.float64)
        labels = candidates[0].overlap.labels
        units = PairedUnits(unit="class", statistic="overlap (macro over classes)", candidates=names,
                            unit_ids=tuple(str(labels.get(key, key)) for key in classes), values=values[:, :, None],
                            strata=np.zeros(len(classes), dtype=np.int64), reducer="mean")
        return _checked(units, candidates, [c.overlap.score for c in candidates])
    if all(c.stability is not None for c in candidates):
        seeds = _shared(candidates, lambda c: [str(s) for s in c.stability.scoring_seeds], "stability seeds")
        values = np.array([c.stability.scores for c in candidates], dtype=np.float64)
        return PairedUnits(unit="repeat", statistic="overlap (mean over stability repeats)", candidates=names,
                           unit_ids=tuple(seeds), values=values[:, :, None], strata=np.zeros(len(seeds), dtype=np.int64),
                           reducer="mean")
    raise ComparisonUnavailable("the scores have no per-class values and no stability repeats to pair on")


def row_resampled_comparison(candidates: Sequence[Any], config: Any, rows: Any, n_classes: int) -> Any:
    """The row-resampled comparison (``vertebrae.scoring.paired.rows``) of candidates that every one carry their
    OverlapIndex scores on the same row subsamples (``row_resamples``: same sampling and scoring seeds, same sizes)."""
    from vertebrae.scoring.paired.rows import compare_row_resamples

    missing = [c.name for c in candidates if c.row_resamples is None]
    if missing:
        raise ComparisonUnavailable(f"candidates {missing} have no row-resampled scores")
    first = candidates[0].row_resamples
    for candidate in candidates[1:]:
        other = candidate.row_resamples
        for key in ("sampling_seeds", "scoring_seeds", "effective_sample_counts"):
            if getattr(other, key) != getattr(first, key):
                raise ComparisonUnavailable(f"candidate {candidate.name!r} was scored on other row subsamples than "
                                            f"{candidates[0].name!r} ({key} differ); they cannot be paired")
    count, share = first.effective_sample_counts[0], first.effective_subsample_fractions[0]
    return compare_row_resamples([c.name for c in candidates], [c.overlap.score for c in candidates],
                                 [c.row_resamples.scores for c in candidates], n_rows=int(round(count / share)),
                                 subsample_rows=count, n_classes=n_classes, config=config, rows=rows)


__all__ = ["ComparisonUnavailable", "labelled_units", "row_resampled_comparison", "metric_units", "retrieval_units", "zero_shot_units"]
