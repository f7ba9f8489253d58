"""``KNNMetric``: cosine k-nearest-neighbour classification (the DINO-style evaluation) and regression.

Rows are L2-normalised, each first scaled by its own exact power of two (``labelled_common.l2_normalised``: any
positive multiple of an embedding scores the same, subnormal rows included); an all-zero row is refused by id. A
test row's neighbours are the ``k`` train rows of highest cosine similarity ``s``.
Each neighbour votes for its class with weight 1 (``weighting="uniform"``) or ``exp(s / T)`` (``"temperature"``,
DINO's weighting, ``T`` = ``temperature``, default 0.07); the prediction is the class with the largest vote
total (ties: the class first in catalog order). Train/test rows come from stratified folds (``folds``, default 5,
shuffled with the run's seed; every row is predicted once) or a declared ``split``
(``vertebrae.scoring.labelled_common``).

Scores: ``accuracy`` = mean correctness over predicted rows; ``balanced_accuracy`` = mean over true classes of
the per-class recall; ``score`` is ``primary`` (default accuracy). Per-sample correctness is kept
(``diagnostics["per_sample"]``) for the paired comparison. Regression targets: the prediction is the
vote-weighted mean of the neighbours' targets and the score is R² (``1 - SS_res / SS_tot`` per target column,
averaged over columns) over the predicted rows. Multi-label targets are refused naming the target type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vertebrae.core.errors import ValidationError
from vertebrae.scoring.labelled_common import (
    BuiltinMetric, check_name, check_policy, choice, classification_scores, flag, fold_plan, l2_normalised, parse_split, per_sample,
    positive, positive_float, sample_paired, small_classes_entry, split_group_warnings,
)
from vertebrae.scoring.metrics import MetricResult

_BLOCK_BYTES = 64 * 2**20


def neighbour_votes(train: np.ndarray, test: np.ndarray, k: int, weighting: str, temperature: float
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``(indices, weights)`` ``(n_test, k)``: each test row's k most similar train rows and their vote weights."""
    rows = max(1, _BLOCK_BYTES // (8 * max(1, train.shape[0])))
    indices = np.empty((test.shape[0], k), dtype=np.int64)
    weights = np.empty((test.shape[0], k))
    for lo in range(0, test.shape[0], rows):
        sims = test[lo:lo + rows] @ train.T
        top = np.argpartition(sims, -k, axis=1)[:, -k:] if k < train.shape[0] else np.argsort(sims, axis=1)
        indices[lo:lo + rows] = top
        if weighting == "uniform":
            weights[lo:lo + rows] = 1.0
        else:
            weights[lo:lo + rows] = np.exp(np.take_along_axis(sims, top, axis=1) / temperature)
    return indices, weights


def vote(labels: np.ndarray, indices: np.ndarray, weights: np.ndarray, n_classes: int) -> np.ndarray:
    """The class with the largest vote total per row (ties: the lowest class code)."""
    n = indices.shape[0]
    flat = (np.arange(n)[:, None] * n_classes + labels[indices]).ravel()
    totals = np.bincount(flat, weights=weights.ravel(), minlength=n * n_classes).reshape(n, n_classes)
    return totals.argmax(axis=1)


def r2(true: np.ndarray, predicted: np.ndarray) -> float:
    """R² per target column, averaged over columns (scikit-learn's ``r2_score`` uniform average)."""
    true, predicted = true.reshape(len(true), -1), predicted.reshape(len(predicted), -1)
    ss_res = ((true - predicted) ** 2).sum(axis=0)
    ss_tot = ((true - true.mean(axis=0)) ** 2).sum(axis=0)
    if (ss_tot == 0).any():
        raise ValidationError("R² is undefined: a regression target is constant over the test rows")
    return float(np.mean(1.0 - ss_res / ss_tot))


class KNNMetric(BuiltinMetric):
    """Cosine kNN accuracy (see the module docstring)."""

    TARGET_TYPES = ("classification", "regression")

    def __init__(self, k: int = 20, weighting: str = "uniform", temperature: float = 0.07, folds: int = 5,
                 split: Any = None, primary: str = "accuracy", group_folds: bool = True, small_classes: str = "refuse",
                 *, name: str = "knn") -> None:
        owner = "KNNMetric"
        self.name = check_name(name, owner)
        self.k = positive(k, owner, "k")
        self.weighting = choice(weighting, ("uniform", "temperature"), owner, "weighting")
        self.temperature = positive_float(temperature, owner, "temperature")
        self.folds = positive(folds, owner, "folds", minimum=2)
        self.split = parse_split(split, owner)
        self.primary = choice(primary, ("accuracy", "balanced_accuracy"), owner, "primary")
        self.group_folds = flag(group_folds, owner, "group_folds")
        self.small_classes = check_policy(small_classes, owner)

    def recipe(self) -> dict[str, Any]:
        return {"type": "knn", "name": self.name, "k": self.k, "weighting": self.weighting,
                "temperature": self.temperature, "folds": self.folds, "split": self.split, "primary": self.primary,
                "group_folds": self.group_folds, **small_classes_entry(self)}

    def needed(self) -> tuple[int, str]:
        """Rows a class needs: ``k + 1`` (a test row and k neighbours of its own class), and with folds at least
        ``folds`` (each fold tests the class)."""
        if self.split is None and self.folds > self.k + 1:
            return self.folds, f"key 'folds' = {self.folds}"
        return self.k + 1, f"key 'k' = {self.k} (a test row and its k neighbours)"

    def _plan(self, targets: Any, keys: Sequence[str], where: str, seed: int, groups: Any = None):
        codes, splits, grouped, notes = fold_plan(self, targets, keys, where, seed, groups, self.needed())
        smallest = min(len(train) for train, _ in splits)
        if self.k >= smallest:
            raise ValidationError(f"{where}: key 'k' = {self.k} must be below the {smallest} train rows")
        return codes, splits, grouped, notes

    def compute(self, embeddings: Any, targets: Any, *, row_ids: Sequence[str] | None,
                groups: Sequence[Any] | None = None, seed: int = 0, plan: Any = None) -> MetricResult:
        matrix, keys, where, (codes, splits, grouped, notes) = self._planned(embeddings, targets, row_ids, seed, groups, plan)
        regression = targets.target_type == "regression"
        x = l2_normalised(matrix, keys, where)
        tests, outputs = [], []
        for train, test in splits:
            indices, weights = neighbour_votes(x[train], x[test], self.k, self.weighting, self.temperature)
            if regression:
                values = np.asarray(targets.values, dtype=np.float64).reshape(targets.n_rows, -1)[train]
                outputs.append(np.einsum("nk,nkd->nd", weights, values[indices]) / weights.sum(axis=1)[:, None])
            else:
                outputs.append(vote(codes[train], indices, weights, len(targets.catalog)))
            tests.append(test)
        test = np.concatenate(tests)
        predicted = np.concatenate(outputs)
        warnings = notes + split_group_warnings(self.split, *splits[0], groups, where, grouped)
        metadata = {**self.recipe(), "n_rows": len(keys), "n_evaluated": int(test.size), "seed": int(seed),
                    "target_type": targets.target_type, "evaluation": "split" if self.split else f"{self.folds} folds"}
        if regression:
            true = np.asarray(targets.values, dtype=np.float64).reshape(targets.n_rows, -1)[test]
            score = r2(true, predicted)
            return MetricResult(self.name, score, True, {"r2": score}, warnings, metadata)
        scores = classification_scores(codes[test], predicted)
        diagnostics = {**scores, "per_sample": per_sample(keys, test, codes[test], predicted),
                       "paired": sample_paired(self.primary), "statistic": self.primary}
        return MetricResult(self.name, scores[self.primary], True, diagnostics, warnings, metadata)


__all__ = ["KNNMetric", "neighbour_votes", "r2", "vote"]
