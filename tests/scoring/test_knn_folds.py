"""kNN fold by fold (issue 49, the fan-out at full size): each fold's output, through JSON as a partial artifact holds
it, combines into exactly the result of the one ``compute`` (classification with groups, regression); a declared
split is one job; a missing or foreign fold is refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vertebrae import KNNMetric
from vertebrae.core.errors import ValidationError
from vertebrae.data.targets import classification_targets, regression_targets

ROWS = 600


@pytest.fixture(scope="module")
def rows():
    rng = np.random.default_rng(49)
    y = np.arange(ROWS) % 5
    x = rng.normal(size=(5, 12))[y] + rng.normal(size=(ROWS, 12))
    return x, y, [f"s{i}" for i in range(ROWS)], (np.arange(ROWS) // 4).tolist()


def _by_folds(metric, x, targets, ids, groups):
    outputs = [json.loads(json.dumps(metric.compute_fold(x, targets, row_ids=ids, groups=groups, seed=7, fold=f)))
               for f in range(metric.job_folds())]
    return outputs, metric.combine_folds(targets, row_ids=ids, groups=groups, seed=7, folds=outputs[::-1])


@pytest.mark.parametrize("weighting", ["uniform", "temperature"])
def test_classification_folds_combine_to_the_one_compute(rows, weighting):
    x, y, ids, groups = rows
    metric = KNNMetric(k=7, weighting=weighting, folds=4)
    targets = classification_targets(y)
    outputs, combined = _by_folds(metric, x, targets, ids, groups)
    assert metric.job_folds() == 4 and sum(o["n_test"] for o in outputs) == ROWS
    expected = metric.compute(x, targets, row_ids=ids, groups=groups, seed=7)
    assert combined.to_dict() == expected.to_dict()
    assert len(combined.diagnostics["per_sample"]["ids"]) == ROWS


def test_regression_folds_combine_to_the_one_compute(rows):
    x, y, ids, _ = rows
    values = np.column_stack([y * 1.5 + x[:, 0], np.sin(x[:, 1])])  # floats that must round-trip through JSON
    targets = regression_targets(values)
    metric = KNNMetric(k=5, weighting="temperature", folds=3)
    _, combined = _by_folds(metric, x, targets, ids, None)
    assert combined.to_dict() == metric.compute(x, targets, row_ids=ids, seed=7).to_dict()


def test_a_declared_split_is_one_job_and_a_fold_set_must_be_whole(rows):
    x, y, ids, _ = rows
    split = {"train": ids[:400], "test": ids[400:]}
    assert KNNMetric(k=5, split=split).job_folds() == 1
    metric, targets = KNNMetric(k=5, folds=3), classification_targets(y)
    outputs, _ = _by_folds(metric, x, targets, ids, None)
    with pytest.raises(ValidationError, match=r"folds \[0, 2\] given, the plan has 3"):
        metric.combine_folds(targets, row_ids=ids, seed=7, folds=[outputs[0], outputs[2]])
    other = metric.compute_fold(x, targets, row_ids=ids, seed=8, fold=1)  # another seed: other test rows
    with pytest.raises(ValidationError, match="fold 1 predicted"):
        metric.combine_folds(targets, row_ids=ids, seed=7, folds=[outputs[0], {**other, "predicted": other[
            "predicted"][:-1]}, outputs[2]])
    with pytest.raises(ValidationError, match="fold 3 of 3"):
        metric.compute_fold(x, targets, row_ids=ids, seed=7, fold=3)
