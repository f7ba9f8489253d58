"""Row-resampled paired verdicts (m-out-of-n subsampling) for labelled benchmarks with few classes."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_iris, load_wine
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.identity import DatasetIdentity
from vertebrae.data.labelled import BenchmarkDataset
from vertebrae.extractors import CallableExtractor
from vertebrae.protocols.labelled import Benchmark
from vertebrae.results import BenchmarkResult
from vertebrae.scoring.paired import ComparisonConfig, PairedComparison
from vertebrae.scoring.paired.rows import METHOD, RowResamplingConfig, compare_row_resamples, resolve

FAST = RowResamplingConfig(resamples=100)


def _raw(batch):
    return np.asarray(batch, dtype=np.float64)


def _noise(batch):
    return np.random.default_rng(7).normal(size=(len(batch), 8))


def _benchmark(loader, **kwargs) -> Benchmark:
    X, y = loader(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    dataset = BenchmarkDataset.from_arrays(X, y, identity=DatasetIdentity.declared(loader.__name__, "1"))
    pca = PCA(2, random_state=0).fit(X)
    extractors = [CallableExtractor("raw", _raw, cache_identity="raw"),
                  CallableExtractor("pca", lambda b: pca.transform(np.asarray(b, dtype=np.float64)), cache_identity="pca"),
                  CallableExtractor("random", _noise, cache_identity="noise")]
    return Benchmark(dataset, extractors, **kwargs)


@pytest.mark.parametrize("loader", [load_wine, load_iris])
def test_a_random_embedding_is_significantly_behind_the_leader_row_resampled(loader):
    result = _benchmark(loader, row_resampling=FAST).run()
    comparison = result.comparison
    assert comparison.row_resampled and comparison.method["name"] == METHOD
    assert comparison.unit == "row subsample" and comparison.n_units == 100 and comparison.n_strata == 3
    assert comparison.leader in ("raw", "pca")
    row = next(r for r in comparison.versus_leader() if r["name"] == "random")
    assert row["verdict"] == "behind" and row["p_adjusted"] < 0.05 and row["ci_high"] < 0
    markdown = result.markdown()
    assert "Row-resampled comparison" in markdown and METHOD in markdown and "Politis and Romano (1994)" in markdown
    assert "| random | " in markdown and "| behind |" in markdown
    # the result round-trips through JSON with its resamples and method
    again = BenchmarkResult.from_dict(result.to_dict())
    assert again.comparison == comparison and again.compare(result.comparison.config) == comparison


def test_the_old_per_class_unit_could_not_tell_them_apart():
    result = _benchmark(load_iris, row_resampling=RowResamplingConfig(mode="class")).run()
    assert result.comparison.unit == "class" and result.comparison.method is None
    assert result.comparison.pair("random", result.comparison.leader)["verdict"] == "indistinguishable"
    assert "row_resamples" not in result.to_dict()["extractor_results"][0]


def _targets(counts):
    labels = np.concatenate([[f"c{i}"] * n for i, n in enumerate(counts)])
    return BenchmarkDataset.from_arrays(np.zeros((labels.size, 2)), labels, identity=DatasetIdentity.declared("t", "1")).targets


def test_a_class_too_small_to_subsample_is_refused_by_name():
    with pytest.raises(ValidationError, match=r"class 'c1' \(3 -> 1\)"):
        resolve(RowResamplingConfig(mode="rows"), _targets([10, 3, 8]), primary_metric="overlap")
    # auto keeps the per-class unit where rows cannot be subsampled, and from 10 classes on
    assert resolve(None, _targets([10, 3, 8]), primary_metric="overlap") is None
    assert resolve(None, _targets([4] * 10), primary_metric="overlap") is None
    assert resolve(None, _targets([4] * 9), primary_metric="overlap") == RowResamplingConfig()
    assert resolve(None, _targets([4] * 3), primary_metric="knn") is None


def test_config_is_validated():
    for bad in ({"fraction": 1.0}, {"resamples": 5}, {"mode": "bootstrap"}, {"random_state": -1}):
        with pytest.raises(ConfigError):
            RowResamplingConfig(**bad)


def test_equal_candidates_are_indistinguishable_and_the_document_round_trips():
    rng = np.random.default_rng(0)
    scores = rng.normal(0.5, 0.02, size=(1, 200)).repeat(2, axis=0) + rng.normal(0, 0.01, size=(2, 200))
    doc = compare_row_resamples(["a", "b"], [0.5, 0.501], scores, n_rows=180, subsample_rows=90, n_classes=3,
                                config=ComparisonConfig(), rows=RowResamplingConfig())
    assert doc.pairs[0]["verdict"] == "indistinguishable" and doc.pairs[0]["test"] == "subsampling"
    assert PairedComparison.from_dict(doc.to_dict()) == doc
