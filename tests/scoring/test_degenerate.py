"""Collapsed-embedding detection (issue 15, item 1): hand-worked points, then the real OverlapIndex scorer.

Before this check, a constant, all-zero or one-direction embedding scored OverlapIndex 1.0 with
aggregate_valid=True and ranked first.
"""

from __future__ import annotations

import json
import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from vertebrae.data.targets import build_targets
from vertebrae.scoring.degenerate import CODE, DegenerateEmbeddingWarning, detect_collapse, row_points
from vertebrae.scoring.overlap import OverlapIndexScorer, OverlapScoreResult, OverlapScoringConfig
from vertebrae.scoring.stability import StabilityConfig, StabilityResult, run_stability_analysis

Y = np.repeat([0, 1, 2], 30)
RNG = np.random.default_rng(0)
REAL = RNG.normal(size=(90, 8)) + 3.0 * np.eye(8)[Y]
COLLAPSED = {
    "constant": np.ones((90, 8)),
    "all-zero": np.zeros((90, 8)),
    "one direction": RNG.uniform(0.5, 3.0, size=(90, 1)) * RNG.normal(size=(1, 8)),
    "two points shared by all three classes": np.tile([[1.0, 0.0], [0.0, 1.0]], (45, 1)),
}


# --------------------------------------------------------------------------------------------------
# detection, hand-worked


def test_points_are_rows_equal_up_to_rounding_dense_and_csr_alike():
    M = np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 0.0], [1.0, 0.0, 2.0 + 1e-15], [3.0, 0.0, 6.0], [0.0, 0.0, 0.0]])
    assert row_points(M).tolist() == [0, 1, 0, 2, 1]  # row 2 equals row 0 up to rounding; row 3 is 3 x row 0
    assert row_points(sp.csr_matrix(M)).tolist() == [0, 1, 0, 2, 1]
    # L2-normalised, rows 0, 2 and 3 are one direction; zero rows stay zero
    assert row_points(M, normalize=True).tolist() == [0, 1, 0, 0, 1]
    assert row_points(sp.csr_matrix(M), normalize=True).tolist() == [0, 1, 0, 0, 1]


@pytest.mark.parametrize("name", ["constant", "all-zero", "one direction"])
def test_one_point_is_collapsed_after_normalisation(name):
    X = COLLAPSED[name]
    finding = detect_collapse(X, what="E", normalize=True)
    assert finding is not None and finding.invalid and finding.n_points == 1
    assert finding.message().startswith(f"{CODE}: E: all 90 rows are one point")


def test_fewer_points_than_classes_and_shared_majority_are_collapsed():
    two = detect_collapse(COLLAPSED["two points shared by all three classes"], what="E", labels=Y)
    assert two.invalid and (two.n_points, two.n_classes) == (2, 3) and "fewer than the 3 classes" in two.reason
    # three points, each shared by all three classes: as many points as classes, yet every row is shared
    three = detect_collapse(np.tile(np.eye(3), (30, 1)), what="E", labels=Y, row_ids=[f"r{i}" for i in range(90)])
    assert three.invalid and three.n_shared_rows == 90 and three.shared_examples[:2] == ["'r0'", "'r1'"]


def test_a_few_rows_shared_across_classes_only_warn_and_name_them():
    X = REAL.copy()
    X[[0, 30]] = 5.0  # row 0 (class 0) and row 30 (class 1) coincide
    X[1] = X[2]  # two rows of the same class coinciding is no finding
    finding = detect_collapse(X, what="E", labels=Y, row_ids=[f"r{i}" for i in range(90)])
    assert not finding.invalid and finding.n_shared_rows == 2 and finding.shared_examples == ["'r0'", "'r30'"]
    assert "2 of 90 rows lie on points shared by rows of different classes ('r0', 'r30')" in finding.reason


def test_healthy_rows_and_multilabel_label_sets():
    assert detect_collapse(REAL, what="E", labels=Y, normalize=True) is None
    indicator = sp.csr_matrix(np.array([[1, 0], [1, 0], [0, 1], [0, 1]]))
    same = np.array([[1.0], [1.0], [1.0], [2.0]])  # rows 0-2 one point, row 3 another; label sets {0} and {1}
    finding = detect_collapse(same, what="E", labels=indicator)
    assert finding.invalid and finding.n_shared_rows == 3  # rows 0, 1 ({0}) and 2 ({1}) share a point


def test_csr_input_stays_sparse():
    # 200 rows x 50 million columns: a dense copy would need 80 GB; the CSR path touches the 400 stored values only
    n, width = 200, 50_000_000
    rows = np.repeat(np.arange(n), 2)
    cols = np.tile([7, 49_999_999], n)
    X = sp.csr_matrix((np.ones(2 * n), (rows, cols)), shape=(n, width))
    start = time.perf_counter()
    finding = detect_collapse(X, what="E", normalize=True)
    assert finding is not None and finding.invalid and finding.n_points == 1
    X2 = X.tolil()
    X2[0, 3] = 1.0
    assert detect_collapse(X2.tocsr(), what="E") is None
    assert time.perf_counter() - start < 20


# --------------------------------------------------------------------------------------------------
# the real OverlapIndex scorer


@pytest.mark.parametrize("name", sorted(COLLAPSED))
def test_collapsed_embeddings_score_but_are_not_aggregate_valid(name):
    with pytest.warns(DegenerateEmbeddingWarning, match=CODE):
        result = OverlapIndexScorer().score(COLLAPSED[name], Y, seed=0)
    real = OverlapIndexScorer().score(REAL, Y, seed=0)
    assert result.aggregate_valid is False and result.degeneracy["invalid"] is True
    assert result.warnings[0].startswith(f"{CODE}: embeddings (L2-normalised): ")
    assert real.aggregate_valid and real.degeneracy is None and "degeneracy" not in real.to_dict()
    restored = OverlapScoreResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert restored == result and restored.aggregate_valid is False


def test_the_configured_normalisation_decides_what_collapses():
    X = COLLAPSED["one direction"]  # one direction at different lengths
    raw = OverlapScoringConfig(normalize_embeddings=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateEmbeddingWarning)
        assert OverlapIndexScorer(raw).score(X, Y, seed=0).aggregate_valid
    assert not OverlapIndexScorer().score(X, Y, seed=0).aggregate_valid
    assert not OverlapIndexScorer(raw).score(COLLAPSED["constant"], Y, seed=0).aggregate_valid


def test_regression_targets_flag_a_constant_embedding():
    values = np.linspace(0.0, 1.0, 90)
    result = OverlapIndexScorer().score(np.ones((90, 4)), values, seed=0, target_type="regression")
    assert not result.aggregate_valid and "all 90 rows are one point" in result.degeneracy["reason"]


# --------------------------------------------------------------------------------------------------
# stability repeats


@pytest.mark.parametrize("mode", ["prototype", "subsample"])
def test_stability_repeats_of_a_collapsed_embedding_are_flagged(mode):
    targets = build_targets(Y, "classification")
    config = StabilityConfig(mode=mode, repeats=3, subsample_fraction=0.5 if mode == "subsample" else None)
    collapsed = run_stability_analysis(np.ones((90, 4)), targets, stability_config=config)
    assert collapsed.degenerate_repeats == [0, 1, 2] and not collapsed.aggregate_valid
    assert any(w.startswith(f"{CODE}: stability repeats [0, 1, 2]") for w in collapsed.warnings)
    assert StabilityResult.from_dict(json.loads(json.dumps(collapsed.to_dict()))) == collapsed
    healthy = run_stability_analysis(REAL, targets, stability_config=config)
    assert healthy.aggregate_valid and "degenerate_repeats" not in healthy.to_dict()
