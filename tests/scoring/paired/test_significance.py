"""Paired tests against scipy: permutation_test (randomization), binomtest (McNemar); Holm by hand."""

import numpy as np
import pytest
from scipy import stats

from vertebrae.scoring.paired import ComparisonConfig, PairedUnits, compare_units, holm
from vertebrae.scoring.paired.significance import adjust, bonferroni, mcnemar_exact


def paired(values, **kwargs):
    m, n = np.shape(values)[:2]
    return PairedUnits("query", "ndcg@10", tuple(f"c{i}" for i in range(m)), tuple(f"q{i}" for i in range(n)),
                       values, **kwargs)


def mean_delta(x, y, axis=-1):
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


@pytest.mark.parametrize("n, seed", [(8, 0), (10, 1), (12, 2), (11, 3)])
def test_exact_randomization_equals_permutation_test(n, seed):
    rng = np.random.default_rng(seed)
    values = rng.random((3, n))
    values[1] += 0.15 * rng.random(n)
    result = compare_units(paired(values), ComparisonConfig(resamples=max(100, 2 ** n)))
    for pair, (i, j) in zip(result.pairs, [(0, 1), (0, 2), (1, 2)]):
        ref = stats.permutation_test((values[i], values[j]), mean_delta, permutation_type="samples",
                                     vectorized=True, n_resamples=2 ** n)
        assert pair["test"] == "randomization-exact"
        assert pair["p_value"] == ref.pvalue
        assert pair["min_p_value"] == 2 / 2 ** n


def test_exact_randomization_with_strata_and_ratio_equals_permutation_test():
    """Swaps move a unit's whole feature vector (numerator and weight) between the two candidates."""
    rng = np.random.default_rng(7)
    n = 10
    w = rng.integers(1, 5, size=n).astype(float)
    x = rng.random((2, n))
    x[0] += 0.1
    strata = np.array([0, 1] * 5)
    features = np.stack([x * w, np.broadcast_to(w, x.shape)], axis=-1)  # (2, n, 2)

    def statistic(a, b, axis=-1):  # a, b: (..., 2 features, n units)
        def value(v):
            return np.mean([v[..., 0, strata == s].sum(axis=-1) / v[..., 1, strata == s].sum(axis=-1)
                            for s in (0, 1)], axis=0)
        return value(a) - value(b)

    result = compare_units(paired(features, strata=strata, reducer="ratio"), ComparisonConfig(resamples=1024))
    ref = stats.permutation_test((features[0].T, features[1].T), statistic, permutation_type="samples",
                                 vectorized=True, n_resamples=1024, axis=-1)
    assert result.pairs[0]["test"] == "randomization-exact"
    assert result.pairs[0]["delta"] == pytest.approx(ref.statistic, rel=1e-14)
    assert result.pairs[0]["p_value"] == ref.pvalue


def test_random_randomization_matches_permutation_test_within_monte_carlo_error():
    rng = np.random.default_rng(3)
    n = 40
    a = rng.random(n)
    b = a + 0.05 * rng.standard_normal(n) - 0.004
    result = compare_units(paired(np.stack([a, b])), ComparisonConfig(resamples=20_000))
    ref = stats.permutation_test((a, b), mean_delta, permutation_type="samples", vectorized=True,
                                 n_resamples=20_000, rng=np.random.default_rng(5))
    assert result.pairs[0]["test"] == "randomization"
    assert 0.05 < ref.pvalue < 0.95
    assert result.pairs[0]["p_value"] == pytest.approx(ref.pvalue, abs=0.02)  # ~5 Monte-Carlo SE


def test_better_on_every_unit_reaches_the_minimum_p():
    rng = np.random.default_rng(4)
    b = rng.random(300)
    a = b + 0.001 + 0.01 * rng.random(300)
    result = compare_units(paired(np.stack([a, b])), ComparisonConfig(resamples=1000))
    pair = result.pairs[0]
    assert pair["test"] == "randomization"
    assert pair["p_value"] == pair["min_p_value"] == 2 / 1001
    assert pair["verdict"] == "ahead"


def test_mcnemar_matches_binomtest():
    rng = np.random.default_rng(8)
    for n, flip in [(50, 0.1), (200, 0.05), (30, 0.4), (500, 0.02)]:
        a = (rng.random(n) < 0.7).astype(float)
        b = np.where(rng.random(n) < flip, 1 - a, a)
        b[: n // 10] = 0
        result = compare_units(paired(np.stack([a, b])), ComparisonConfig(resamples=100))
        pair = result.pairs[0]
        b_count, c_count = int(((a == 1) & (b == 0)).sum()), int(((a == 0) & (b == 1)).sum())
        assert pair["test"] == "mcnemar-exact"
        assert pair["p_value"] == pytest.approx(stats.binomtest(b_count, b_count + c_count, 0.5).pvalue, rel=1e-12)
        assert pair["min_p_value"] == min(1.0, 2 * 0.5 ** (b_count + c_count))
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(7, 7) == 1.0


def test_binary_values_with_strata_use_randomization():
    a = np.array([1, 0, 1, 1, 0, 1, 1, 1.0])
    b = np.array([0, 0, 1, 0, 0, 1, 0, 1.0])
    result = compare_units(paired(np.stack([a, b]), strata=np.array([0, 0, 0, 0, 1, 1, 1, 1])),
                           ComparisonConfig(resamples=256))
    assert result.pairs[0]["test"] == "randomization-exact"


def test_holm_hand_worked():
    # p = [0.01, 0.04, 0.03, 0.005], m = 4. Sorted ascending: 0.005 (4th), 0.01 (1st), 0.03 (3rd), 0.04 (2nd).
    # Scaled by m - i + 1 = 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04. Running max: 0.02, 0.03, 0.06, 0.06.
    # Back in input order: [0.03, 0.06, 0.06, 0.02].
    np.testing.assert_allclose(holm([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02], rtol=1e-15)
    # [0.6, 0.7]: 2 * 0.6 = 1.2 -> clipped to 1; 1 * 0.7 = 0.7 -> running max 1.2 -> clipped 1.
    assert holm([0.6, 0.7]).tolist() == [1.0, 1.0]
    # [0.2, 0.5]: 2 * 0.2 = 0.4; 1 * 0.5 = 0.5 (above 0.4, kept).
    np.testing.assert_allclose(holm([0.5, 0.2]), [0.5, 0.4], rtol=1e-15)
    np.testing.assert_allclose(bonferroni([0.01, 0.3]), [0.02, 0.6])
    assert adjust([0.01, 0.3], "none").tolist() == [0.01, 0.3]


def test_adjusted_p_values_and_verdicts_in_a_comparison():
    rng = np.random.default_rng(9)
    base = rng.random(400)
    values = np.stack([base + 0.02, base + 0.02 + 0.01 * rng.standard_normal(400), base])
    for adjustment in ("holm", "bonferroni", "none"):
        result = compare_units(paired(values), ComparisonConfig(resamples=500, adjustment=adjustment))
        p = [pair["p_value"] for pair in result.pairs]
        assert [pair["p_adjusted"] for pair in result.pairs] == adjust(p, adjustment).tolist()
        for pair in result.pairs:
            expected = ("indistinguishable" if pair["p_adjusted"] >= 0.05 else
                        "ahead" if pair["delta"] > 0 else "behind")
            assert pair["verdict"] == expected
    assert result.pairs[1]["verdict"] == "ahead"  # c0 = c2 + 0.02 on every unit
