"""Clustering as MTEB computes it (issue 49): MiniBatchKMeans on the raw rows, and the cluster accuracy MTEB
prints. Oracles: scikit-learn's MiniBatchKMeans and v_measure_score called directly (MTEB's ClusteringEvaluator
does exactly that), and cluster accuracy by brute force over every cluster -> class mapping."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from sklearn.cluster import MiniBatchKMeans
from sklearn.metrics import normalized_mutual_info_score, v_measure_score

from vertebrae import ClusteringMetric
from vertebrae.core.errors import ConfigError
from vertebrae.data.targets import classification_targets
from vertebrae.scoring.clustering import cluster_accuracy
from vertebrae.scoring.metric_registry import metric_from_config

RNG = np.random.default_rng(11)
Y = np.repeat(np.arange(4), 60)
X = 2.0 * RNG.normal(size=(4, 8))[Y] + RNG.normal(size=(240, 8)) + 5.0  # off-centre: normalising would matter


def test_minibatch_on_raw_rows_equals_mteb_s_direct_computation():
    metric = ClusteringMetric(algorithm="minibatch", batch_size=64, n_init=1, repeats=2, normalize=False)
    result = metric.compute(X, classification_targets(Y), row_ids=None, seed=7)
    for r in range(2):
        labels = MiniBatchKMeans(n_clusters=4, batch_size=64, n_init=1, random_state=7 + r).fit(X).labels_
        assert result.diagnostics["per_seed"]["v_measure"][r] == v_measure_score(Y, labels)
    # normalised rows (the default) are another computation, named in the recipe only when it differs
    assert metric.recipe()["normalize"] is False and metric.recipe()["algorithm"] == "minibatch"
    assert set(ClusteringMetric().recipe()) == {"type", "name", "n_init", "repeats", "split", "primary"}


def test_cluster_accuracy_is_the_best_one_to_one_mapping():
    rng = np.random.default_rng(2)
    for _ in range(200):
        true = rng.integers(0, 3, size=30)
        assigned = rng.integers(0, 3, size=30)
        best = max(np.mean(np.array([mapping[a] for a in assigned]) == true)
                   for mapping in itertools.permutations(range(3)))
        assert cluster_accuracy(true, assigned) == pytest.approx(best, abs=1e-15)
    assert cluster_accuracy(np.array([0, 0, 1, 1]), np.array([5, 5, 5, 5])) == 0.5  # fewer clusters than classes


def test_nmi_is_the_v_measure_and_cluster_accuracy_is_reported():
    result = ClusteringMetric(n_init=2, repeats=1, primary="cluster_accuracy").compute(
        X, classification_targets(Y), row_ids=None, seed=0)
    per_seed = result.diagnostics["per_seed"]
    assert per_seed["nmi"] == pytest.approx(per_seed["v_measure"], abs=1e-12)  # arithmetic NMI = V-measure (beta 1)
    assert result.score == per_seed["cluster_accuracy"][0] and 0.25 <= result.score <= 1.0
    assert normalized_mutual_info_score(Y, Y) == v_measure_score(Y, Y) == 1.0


def test_the_config_keys_and_their_refusals():
    metric = metric_from_config({"type": "clustering", "algorithm": "minibatch", "batch_size": 500, "normalize": False})
    assert (metric.algorithm, metric.batch_size, metric.normalize) == ("minibatch", 500, False)
    with pytest.raises(ConfigError, match=r"key 'algorithm' must be one of \['kmeans', 'minibatch'\]"):
        ClusteringMetric(algorithm="dbscan")
    with pytest.raises(ConfigError, match="key 'normalize' must be true or false"):
        ClusteringMetric(normalize="no")


@pytest.mark.parametrize("scale", [1e-300, 1e-170, 1e200, 1e300])
def test_raw_rows_are_scale_free_too(scale):
    metric = ClusteringMetric(algorithm="minibatch", batch_size=64, n_init=1, repeats=2, normalize=False)
    once = metric.compute(X, classification_targets(Y), row_ids=None, seed=3).diagnostics["per_seed"]
    assert metric.compute(X * scale, classification_targets(Y), row_ids=None, seed=3).diagnostics["per_seed"] == once
