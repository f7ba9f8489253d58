"""Regression scoring on data where the embedding clearly predicts the target, against a shuffled target.

Guards the null-mode trap of overlapindex: with its automatic null a large dataset scores ~0 even when the
embedding predicts the target well; vertebrae's default (refit permutation null) must not collapse.
"""

from __future__ import annotations

import numpy as np

from vertebrae.core.arrays import encode_row_ids
from vertebrae.data.targets import regression_targets
from vertebrae.scoring.overlap import ContinuousOverlapScoringConfig, OverlapIndexScorer

N = 6000


def _data():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(N, 8))
    y = 3 * X[:, 0] - 2 * X[:, 1] + 0.2 * rng.normal(size=N)
    return X, y, rng


def test_predictable_target_scores_well_above_zero_and_shuffled_near_zero():
    X, y, rng = _data()
    config = ContinuousOverlapScoringConfig(k=8, n_null_permutations=2)
    scorer = OverlapIndexScorer(config)
    rows = encode_row_ids(None, N, what="test")
    informative = scorer.score_targets(X, regression_targets(y), seed=0, row_ids=rows)
    shuffled = scorer.score_targets(X, regression_targets(rng.permutation(y)), seed=0, row_ids=rows)
    assert informative.continuous["null_mode"] == "refit_permutation"
    assert informative.score > 0.3, informative.score
    assert informative.loss_ratio < 0.7
    assert shuffled.score < 0.05, shuffled.score
    assert 0.9 < shuffled.loss_ratio < 1.1
