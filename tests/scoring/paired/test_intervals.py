"""Bootstrap intervals against scipy.stats.bootstrap on the same data, and the stratified bootstrap against a
brute-force loop over the same resample counts."""

import numpy as np
import pytest
from scipy import stats

from vertebrae.scoring.paired import ComparisonConfig, PairedUnits, compare_units
from vertebrae.scoring.paired import comparison as comparison_module
from vertebrae.scoring.paired.resampling import CHUNK, blocks, quantile

B = 20_000


def paired(values, **kwargs):
    m, n = np.shape(values)[:2]
    return PairedUnits("query", "ndcg@10", tuple(f"c{i}" for i in range(m)), tuple(f"q{i}" for i in range(n)),
                       values, **kwargs)


def correlated(n=150, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.beta(2, 3, size=n)
    a = np.clip(base + 0.08 * rng.standard_normal(n), 0, 1)
    b = np.clip(base + 0.03 + 0.08 * rng.standard_normal(n), 0, 1)
    return a, b


def mean_delta(x, y, axis=-1):
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_pair_interval_matches_scipy_bootstrap(method):
    a, b = correlated()
    result = compare_units(paired(np.stack([a, b])), ComparisonConfig(resamples=B, interval=method, seed=3))
    pair = result.pairs[0]
    scipy_method = "percentile" if method == "percentile" else "BCa"
    ref = stats.bootstrap((a, b), mean_delta, paired=True, vectorized=True, n_resamples=B, method=scipy_method,
                          rng=np.random.default_rng(11))
    tolerance = 0.1 * ref.standard_error  # Monte-Carlo error of a 2.5% quantile at B = 20000: ~0.03 SE
    assert pair["delta"] == mean_delta(a, b)
    assert pair["ci_low"] == pytest.approx(ref.confidence_interval.low, abs=tolerance)
    assert pair["ci_high"] == pytest.approx(ref.confidence_interval.high, abs=tolerance)
    # and each candidate's own interval
    own = stats.bootstrap((a,), np.mean, vectorized=True, n_resamples=B, method=scipy_method,
                          rng=np.random.default_rng(12))
    assert result.candidates[0]["ci_low"] == pytest.approx(own.confidence_interval.low, abs=0.1 * own.standard_error)
    assert result.candidates[0]["ci_high"] == pytest.approx(own.confidence_interval.high, abs=0.1 * own.standard_error)


def test_stratified_bca_matches_scipy_with_strata_as_samples():
    """Two strata resampled separately = scipy's unpaired multi-sample bootstrap of the strata's unit indices
    (the jackknife leaves one unit out within its stratum, scipy's multi-sample acceleration)."""
    a, b = correlated(n=120, seed=5)
    b[:40] -= 0.1
    strata = np.array([0] * 40 + [1] * 80)
    idx0, idx1 = np.arange(40), np.arange(40, 120)

    def statistic(i0, i1, axis=-1):
        value = lambda v: (v[i0].mean(axis=axis) + v[i1].mean(axis=axis)) / 2  # noqa: E731
        return value(a) - value(b)

    result = compare_units(paired(np.stack([a, b]), strata=strata), ComparisonConfig(resamples=B, interval="bca"))
    ref = stats.bootstrap((idx0, idx1), statistic, vectorized=True, n_resamples=B, method="BCa",
                          rng=np.random.default_rng(2))
    pair = result.pairs[0]
    assert pair["delta"] == pytest.approx(statistic(idx0, idx1), abs=1e-15)
    assert pair["ci_low"] == pytest.approx(ref.confidence_interval.low, abs=0.1 * ref.standard_error)
    assert pair["ci_high"] == pytest.approx(ref.confidence_interval.high, abs=0.1 * ref.standard_error)


def test_quantile_rule_is_scipys_exactly():
    rng = np.random.default_rng(4)
    values = np.sort(rng.standard_normal((997, 3)), axis=0)
    p = np.array([0.025, 0.5, 0.9731])
    expected = [stats.quantile(values[:, k], p[k], method="linear") for k in range(3)]
    assert quantile(values, p).tolist() == [float(e) for e in expected]


def test_stratified_bootstrap_equals_brute_force_over_the_same_counts():
    rng = np.random.default_rng(6)
    n, m = 23, 3
    strata = rng.integers(0, 3, size=n)
    values = rng.random((m, n))
    units = paired(values, strata=strata)
    config = ComparisonConfig(resamples=112, seed=9)
    prep = comparison_module._Prepared(units)
    dist = comparison_module._bootstrap(prep, config, rows=2 * CHUNK, workers=1)
    order = np.argsort(strata, kind="stable")
    seen = 0
    for start, block in blocks("bootstrap", 112, n, prep.bounds, 9, rows_per_block=3 * CHUNK):
        for r, counts in enumerate(block):
            for s in range(3):
                lo, hi = prep.bounds[s], prep.bounds[s + 1]
                assert counts[lo:hi].sum() == hi - lo  # n_s draws within the stratum
            for c in range(m):
                ordered = values[c, order]
                means = [np.repeat(ordered[lo:hi], counts[lo:hi].astype(int)).mean()
                         for lo, hi in zip(prep.bounds[:-1], prep.bounds[1:])]
                assert dist[start + r, c] == pytest.approx(np.mean(means), rel=1e-13)
            seen += 1
    assert seen == 112


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_identical_candidates(method):
    a, _ = correlated(n=60)
    result = compare_units(paired(np.stack([a, a, a + 0.1])), ComparisonConfig(resamples=1000, interval=method))
    pair = result.pairs[0]
    assert (pair["delta"], pair["ci_low"], pair["ci_high"], pair["p_value"]) == (0.0, 0.0, 0.0, 1.0)
    assert pair["verdict"] == "indistinguishable"
    binary = (a > 0.5).astype(float)
    result = compare_units(paired(np.stack([binary, binary])), ComparisonConfig(resamples=1000, interval=method))
    pair = result.pairs[0]
    assert pair["test"] == "mcnemar-exact"
    assert (pair["delta"], pair["ci_low"], pair["ci_high"], pair["p_value"]) == (0.0, 0.0, 0.0, 1.0)


def test_degenerate_distribution_gives_the_point():
    """Every unit holds the same values: every resample equals the point, the interval is [point, point]."""
    values = np.stack([np.full(30, 0.3), np.full(30, 0.7)])
    for method in ("percentile", "bca"):
        result = compare_units(paired(values), ComparisonConfig(resamples=500, interval=method))
        pair = result.pairs[0]
        assert pair["ci_low"] == pair["ci_high"] == pair["delta"] == pytest.approx(-0.4, abs=1e-15)
        assert [(c["ci_low"], c["ci_high"]) for c in result.candidates] == [(c["score"], c["score"])
                                                                          for c in result.candidates]
