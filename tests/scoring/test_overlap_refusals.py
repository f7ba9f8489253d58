"""Clear refusals of labelled scoring (issue 32): what used to end in a dependency's error, a bare MemoryError
after minutes or a silently dropped class."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from vertebrae import OverlapIndexScorer, OverlapScoringConfig
from vertebrae.core.errors import BudgetError, ValidationError
from vertebrae.scoring.overlap import working_set_bytes

X = np.random.default_rng(0).normal(size=(40, 4))


@pytest.mark.parametrize("n_classes", [5000, 100_000])
def test_many_classes_are_refused_by_the_admission_estimate_before_fitting(n_classes):
    # 5,000 used to end in a MemoryError after ~4 minutes, 100,000 to hang: the least any k needs (one prototype a
    # class) is refused before the embeddings are normalised or k is chosen
    y = np.repeat(np.arange(n_classes), 2)
    with pytest.raises(BudgetError, match=rf"{n_classes} classes with at least {n_classes} prototypes.*needs at least "
                                          r"[\d,]+ bytes, over scoring\.max_dense_bytes"):
        OverlapIndexScorer().score(np.random.default_rng(1).normal(size=(2 * n_classes, 8)), y)


def test_a_class_count_within_the_lower_bound_is_still_checked_with_its_chosen_k():
    # 300 classes pass the lower bound (one prototype a class) but not the estimate with k chosen per class
    y = np.repeat(np.arange(300), 20)
    low = working_set_bytes(300, 300, 8, 0, 10_000)
    with pytest.raises(BudgetError, match=r"300 classes with \d+ prototypes in 8 dimensions needs about"):
        OverlapIndexScorer(OverlapScoringConfig(k=2, max_dense_bytes=low)).score(
            np.random.default_rng(1).normal(size=(6000, 8)), y)


def test_the_admission_budget_is_the_configured_one_and_the_estimate_is_hand_worked():
    # 2 classes x 2 prototypes each in 4 dimensions, 40 rows: class pairs + prototypes + class bests + one chunk
    assert working_set_bytes(2, 4, 4, 40, 10_000) == 2 * 2 * 160 + 16 * 4 * 4 + 8 * 2 * 4 + 16 * 40 * 4
    y = ["a"] * 20 + ["b"] * 20
    config = OverlapScoringConfig(k=2, max_dense_bytes=working_set_bytes(2, 4, 4, 40, 10_000) - 1)
    with pytest.raises(BudgetError, match="2 classes with 4 prototypes in 4 dimensions"):
        OverlapIndexScorer(config).score(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        OverlapIndexScorer(OverlapScoringConfig(k=2, max_dense_bytes=working_set_bytes(2, 4, 4, 40, 10_000))).score(X, y)


def test_multilabel_with_every_label_on_every_row_is_refused_naming_the_labels():
    with pytest.raises(ValidationError, match=r"multilabel targets: .*\['a', 'b'\].*none can be told apart"):
        OverlapIndexScorer(OverlapScoringConfig(k=2)).score(X, [["a", "b"]] * 40, target_type="multilabel")


@pytest.mark.parametrize("label", ["x\x00", "\x00"])
def test_a_label_ending_in_nul_is_its_own_class(label):
    # NumPy's str conversion drops trailing NULs: the class was counted as empty and overlapindex missed its k
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = OverlapIndexScorer(OverlapScoringConfig(k=2)).score(X, [label] * 20 + ["x"] * 20)
    assert sorted(result.class_counts.values()) == [20, 20]
    assert set(result.labels.values()) >= {"x"} and len(result.per_class_scores) == 2


def test_a_regression_whose_rows_are_each_a_prototype_is_refused():
    # issue 32: 2 rows scored 0.0 without a word
    rng = np.random.default_rng(4)
    embeddings = rng.normal(size=(2, 3))
    with pytest.raises(ValidationError, match=r"regression scoring of 2 rows found 2 prototypes.*scoring\.k \(8\)"):
        OverlapIndexScorer().score(embeddings, embeddings[:, 0], target_type="regression")
