"""PairedUnits: validation with named candidates/units, and point values equal to direct computations."""

import numpy as np
import pytest

from vertebrae.core.errors import ValidationError
from vertebrae.scoring.paired import PairedUnits, macro_f1_features
from vertebrae.scoring.zero_shot import _classification_metrics


def make(values, **kwargs):
    m, n = np.shape(values)[:2]
    return PairedUnits(unit=kwargs.pop("unit", "query"), statistic=kwargs.pop("statistic", "ndcg@10"),
                       candidates=kwargs.pop("candidates", tuple(f"c{i}" for i in range(m))),
                       unit_ids=kwargs.pop("unit_ids", tuple(f"q{i}" for i in range(n))), values=values, **kwargs)


def test_mean_point_values_equal_numpy_mean_bit_for_bit():
    rng = np.random.default_rng(0)
    values = rng.random((3, 1001))
    units = make(values)
    assert units.values.shape == (3, 1001, 1)
    assert units.point_values().tolist() == [float(np.mean(row)) for row in values]


def test_two_strata_statistic_is_the_mean_of_stratum_means():
    rng = np.random.default_rng(1)
    values = rng.random((2, 50))
    strata = np.array([1, 0] * 20 + [1] * 10)
    units = make(values, strata=strata)
    expected = [np.mean([row[strata == 0].mean(), row[strata == 1].mean()]) for row in values]
    np.testing.assert_allclose(units.point_values(), expected, rtol=1e-15)
    assert units.point_values()[0] != pytest.approx(values[0].mean(), rel=1e-6)  # not the plain mean


def test_ratio_point_values_are_weighted_means():
    rng = np.random.default_rng(2)
    x, w = rng.random((2, 40)), rng.integers(1, 9, size=40).astype(float)
    units = make(np.stack([x * w, np.broadcast_to(w, x.shape)], axis=-1), reducer="ratio")
    np.testing.assert_allclose(units.point_values(), [(row * w).sum() / w.sum() for row in x], rtol=1e-15)


@pytest.mark.parametrize("n_classes", [7, 37])
def test_macro_f1_equals_zero_shot_classification_metrics_bit_for_bit(n_classes):
    rng = np.random.default_rng(n_classes)
    n = 500
    y = rng.integers(0, n_classes - 1, size=n)  # the last class has no support and is never predicted
    predictions = [np.where(rng.random(n) < q, y, rng.integers(0, n_classes - 1, size=n)) for q in (0.3, 0.6, 0.9)]
    values = np.stack([macro_f1_features(y, p, n_classes) for p in predictions])
    units = make(values, reducer="macro_f1", unit="sample", statistic="macro_f1")
    expected = [_classification_metrics(y, p, n_classes)["macro_f1"] for p in predictions]
    assert units.point_values().tolist() == expected


@pytest.mark.parametrize("kwargs, message", [
    ({"candidates": ("a",), "values": np.zeros((1, 3))}, "candidates must hold at least 2"),
    ({"candidates": ("a", "a")}, r"candidates holds duplicates: \['a'\]"),
    ({"unit_ids": ("q0", "q0", "q2")}, r"unit_ids holds duplicates: \['q0'\]"),
    ({"values": np.zeros((2, 4)), "unit_ids": ("q0", "q1", "q2")}, r"values must have shape \(2 candidates, 3 units"),
    ({"strata": np.zeros(2, dtype=int)}, "strata must be 3 integer labels"),
    ({"strata": np.zeros(3)}, "strata must be 3 integer labels"),
    ({"reducer": "median"}, "reducer must be one of"),
    ({"unit": ""}, "unit must be a non-empty string"),
])
def test_bad_declarations_are_refused(kwargs, message):
    values = kwargs.pop("values", np.zeros((2, 3)))
    with pytest.raises(ValidationError, match=message):
        make(values, **kwargs)


def test_non_finite_value_names_candidate_and_unit():
    values = np.zeros((2, 3))
    values[1, 2] = np.nan
    with pytest.raises(ValidationError, match=r"candidate 'c1' at unit 'q2'"):
        make(values)
    values[1, 2] = np.inf
    with pytest.raises(ValidationError, match=r"candidate 'c1' at unit 'q2'"):
        make(values)


def test_reducer_feature_checks():
    with pytest.raises(ValidationError, match="'mean' takes 1 feature"):
        make(np.zeros((2, 3, 2)))
    with pytest.raises(ValidationError, match="'ratio' takes 2 features"):
        make(np.zeros((2, 3, 1)), reducer="ratio")
    ratio = np.ones((2, 3, 2))
    ratio[1, :, 1] = 0
    with pytest.raises(ValidationError, match="candidate 'c1' has a zero denominator total in stratum 0"):
        make(ratio, reducer="ratio")
    y = np.array([0, 1, 2])
    good = macro_f1_features(y, np.array([0, 2, 2]), 3)
    bad = good.copy()
    bad[1, 3 + 1] = 1.0  # two predicted classes
    with pytest.raises(ValidationError, match="candidate 'c1' at unit 'q1' does not hold one-hot"):
        make(np.stack([good, bad]), reducer="macro_f1")
    other_truth = macro_f1_features(np.array([0, 1, 1]), np.array([0, 1, 1]), 3)
    with pytest.raises(ValidationError, match="another true class than 'c0' at unit 'q2'"):
        make(np.stack([good, other_truth]), reducer="macro_f1")
    with pytest.raises(ValidationError, match="one stratum only"):
        make(np.stack([good, good]), reducer="macro_f1", strata=np.array([0, 1, 1]))
