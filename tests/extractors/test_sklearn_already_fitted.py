"""SklearnExtractor(..., already_fitted=True): the estimator is used exactly as given; fit() is a no-op (no clone,
no refit), for scikit-learn estimators and for any other object with a transform method."""

from __future__ import annotations

import numpy as np
from sklearn.decomposition import PCA

from vertebrae import Benchmark, BenchmarkDataset, DatasetIdentity
from vertebrae.extractors import SklearnExtractor

ID = DatasetIdentity.declared("already-fitted", "1")


def _data(n=40, d=6, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) * np.arange(1, d + 1)


def test_fit_of_an_already_fitted_estimator_is_a_no_op():
    pca = PCA(3, random_state=0).fit(_data(seed=0))
    components = pca.components_.copy()
    extractor = SklearnExtractor("pca", pca, already_fitted=True, cache_identity="pca-fitted-v1")
    assert not extractor.learns
    other = _data(seed=1) ** 3  # data whose principal axes differ
    extractor.fit(other)
    assert extractor._fitted is pca  # no clone
    np.testing.assert_array_equal(pca.components_, components)  # no refit
    np.testing.assert_array_equal(extractor.transform(other), pca.transform(other))


class Scale:
    """Not a scikit-learn estimator: sklearn.base.clone cannot copy it."""

    def __init__(self, factor: float) -> None:
        self.factor = factor

    def transform(self, rows):
        return np.asarray(rows, dtype=np.float64)[:, :4] * self.factor


def test_a_non_scikit_learn_transformer_works_when_already_fitted():
    scale = Scale(2.0)
    extractor = SklearnExtractor("scale", scale, already_fitted=True, cache_identity="scale-2-v1")
    X = _data()
    extractor.fit(X)  # no TypeError: Cannot clone object
    assert extractor._fitted is scale
    np.testing.assert_array_equal(extractor.transform(X), X[:, :4] * 2.0)
    dataset = BenchmarkDataset.from_arrays(X, ["a", "b"] * 20, identity=ID)
    item = Benchmark(dataset, [extractor]).run().extractor_results[0]  # the benchmark never fits it (learns False)
    assert item.name == "scale" and np.isfinite(item.primary_score)
