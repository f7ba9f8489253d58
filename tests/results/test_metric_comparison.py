"""Paired comparisons of the built-in labelled metrics: per-sample correctness (McNemar), per-episode accuracy,
per-seed clustering scores; the primary metric's in ``comparison``, every declared metric's in
``metric_comparisons``, and the report's metrics table."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import binomtest
from sklearn.preprocessing import FunctionTransformer

from vertebrae import (BenchmarkDataset, ClusteringMetric, DatasetIdentity, FewShotMetric, KNNMetric,
                       LinearProbeMetric)
from vertebrae.extractors import SklearnExtractor
from vertebrae.protocols.labelled import Benchmark
from vertebrae.results import BenchmarkResult
from vertebrae.scoring.overlap import OverlapScoringConfig
from vertebrae.scoring.paired import ComparisonConfig

ID = DatasetIdentity.declared("metric-comparison-toy", "1")
FAST = ComparisonConfig(resamples=400, seed=0)


@pytest.fixture(scope="module")
def result():
    rng = np.random.default_rng(0)
    rows, labels = [], []
    for i in range(4):
        signal = rng.normal(size=(25, 4)) * 0.9
        signal[:, i] += 2.0
        rows.append(np.hstack([signal, rng.normal(size=(25, 4))]))
        labels += [f"c{i}"] * 25
    dataset = BenchmarkDataset.from_arrays(np.vstack(rows), labels, identity=ID)
    extractors = [SklearnExtractor(name, FunctionTransformer(lambda X, c=tuple(cols): X[:, list(c)]))
                  for name, cols in (("signal", range(4)), ("all", range(8)), ("half", (0, 1, 4, 5)))]
    metrics = [KNNMetric(k=5), LinearProbeMetric(Cs=(0.1, 1.0), folds=3),
               FewShotMetric(shots=(1, 3), episodes=8), ClusteringMetric(n_init=2, repeats=3)]
    return Benchmark(dataset, extractors, scoring_config=OverlapScoringConfig(k=3), seed=1, metrics=metrics,
                     primary_metric="knn", comparison_config=FAST).run()


def test_the_primary_metric_ranks_and_is_compared_with_mcnemar_on_its_samples(result):
    ranked = result.ranked_results()
    assert [r.primary_score for r in ranked] == sorted((r.metrics["knn"].score for r in ranked), reverse=True)
    comparison = result.comparison
    assert comparison is not None and comparison.unit == "sample" and comparison.n_units == 100
    pair = comparison.pairs[0]
    a, b = (np.array(result.extractor_results[[r.name for r in result.extractor_results].index(n)]
                     .metrics["knn"].diagnostics["per_sample"]["correct"]) for n in (pair["a"], pair["b"]))
    only_a, only_b = int(((a == 1) & (b == 0)).sum()), int(((a == 0) & (b == 1)).sum())
    assert pair["test"] == "mcnemar-exact"
    expected = 1.0 if only_a + only_b == 0 else binomtest(only_a, only_a + only_b, 0.5).pvalue
    assert pair["p_value"] == pytest.approx(expected, abs=1e-12)
    assert pair["delta"] == pytest.approx(a.mean() - b.mean(), abs=1e-12)


def test_every_declared_metric_has_its_comparison_on_its_own_units(result):
    comparisons = result.metric_comparisons
    assert set(comparisons) == {"knn", "linear_probe", "few_shot", "clustering"}
    units = {name: doc["comparison"]["unit"] for name, doc in comparisons.items()}
    assert units == {"knn": "sample", "linear_probe": "sample", "few_shot": "episode", "clustering": "repeat"}
    few = comparisons["few_shot"]["comparison"]
    assert few["n_units"] == 8
    for item in few["candidates"]:
        candidate = next(r for r in result.extractor_results if r.name == item["name"])
        assert item["score"] == pytest.approx(np.mean(candidate.metrics["few_shot"].diagnostics["per_episode"]["3"]))
    assert comparisons["clustering"]["comparison"]["pairs"][0]["test"] == "randomization-exact"  # 2^3 swaps


def test_balanced_accuracy_pairs_within_true_classes():
    rng = np.random.default_rng(1)
    x = np.vstack([rng.normal(size=(12, 3)) + [2 * i, 0, 0] for i in range(3)])
    labels = np.repeat(["a", "b", "c"], 12)
    dataset = BenchmarkDataset.from_arrays(x, labels, identity=ID)
    extractors = [SklearnExtractor(n, FunctionTransformer(lambda X, c=c: X[:, :c])) for n, c in (("two", 2), ("three", 3))]
    out = Benchmark(dataset, extractors, scoring_config=OverlapScoringConfig(k=2), primary_metric="knn",
                    metrics=[KNNMetric(k=3, folds=3, primary="balanced_accuracy")], comparison_config=FAST).run()
    assert out.comparison.n_strata == 3 and out.comparison.pairs[0]["test"].startswith("randomization")


def test_json_round_trip_and_the_metrics_table(result):
    data = json.loads(json.dumps(result.to_dict()))
    assert BenchmarkResult.from_dict(data).metric_comparisons == result.metric_comparisons
    text = result.to_markdown() if hasattr(result, "to_markdown") else type(result).RENDER(result)
    assert "## Metrics" in text
    low, high = result.metric_interval("signal", "linear_probe")
    score = next(r for r in result.extractor_results if r.name == "signal").metrics["linear_probe"].score
    assert low <= score <= high
    assert f"{score:.4f} [{low:.4f}, {high:.4f}]" in text


def test_a_bad_metric_declaration_is_refused_when_the_benchmark_is_built():
    x = np.random.default_rng(2).normal(size=(14, 3))
    labels = ["a"] * 10 + ["b"] * 4
    dataset = BenchmarkDataset.from_arrays(x, labels, identity=ID)
    extractor = SklearnExtractor("id", FunctionTransformer())
    with pytest.raises(ValueError, match=r"FewShotMetric 'few_shot': key 'shots' = \[1, 5\] needs at least 6 rows per "
                                         r"class; classes 'b' \(4\) have fewer"):
        Benchmark(dataset, [extractor], metrics=[FewShotMetric(shots=(1, 5))])
    with pytest.raises(ValueError, match=r"KNNMetric 'knn': key 'k' = 20 .* needs at least 21 rows per class"):
        Benchmark(dataset, [extractor], metrics=[KNNMetric(folds=2)])
    big = BenchmarkDataset.from_arrays(np.zeros((50, 3)) + np.arange(50)[:, None], ["a"] * 25 + ["b"] * 25, identity=ID)
    split = ["train" if i % 25 < 5 else "test" for i in range(50)]  # classes of 25 rows, 10 train rows in all
    with pytest.raises(ValueError, match="'k' = 20 must be below the 10 train rows"):
        Benchmark(big, [extractor], metrics=[KNNMetric(split=split)])
