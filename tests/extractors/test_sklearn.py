"""SklearnExtractor, PrecomputedExtractor and the config registry, with real scikit-learn and skops."""

from __future__ import annotations

import builtins
import subprocess
import sys
import json

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.decomposition import PCA
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler
from sklearn.random_projection import GaussianRandomProjection

from vertebrae.core.callables import import_object
from vertebrae.core.errors import ArtifactError, ConfigError, ValidationError
from vertebrae.extractors import PrecomputedExtractor, SklearnExtractor
from vertebrae.extractors.registry import build_extractor

WHERE = "benchmarks.digits.extractors.cand"


def _data(n=60, d=12, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) @ rng.normal(size=(d, d))


class Doubler(TransformerMixin, BaseEstimator):
    """A custom transformer defined in this test module (outside every allow-list)."""

    def fit(self, X, y=None):
        self.seen_sparse_ = sp.issparse(X)
        return self

    def transform(self, X):
        return X * 2


def _negate(X):
    return -X


SCALER_PCA = [
    {"estimator": "sklearn.preprocessing.StandardScaler"},
    {"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 3}},
]
GRP = [{"estimator": "sklearn.random_projection.GaussianRandomProjection", "params": {"n_components": 5}}]


# --------------------------------------------------------------------------------------------------
# from_steps and seeding


def test_from_steps_builds_declared_pipeline():
    extractor = SklearnExtractor.from_steps("cand", SCALER_PCA, where=WHERE)
    assert isinstance(extractor.estimator, Pipeline)
    steps = [step for _, step in extractor.estimator.steps]
    assert [type(s) for s in steps] == [StandardScaler, PCA]
    assert steps[1].n_components == 3
    assert extractor.learns is True and extractor.reusable is True
    X = _data()
    extractor.fit(X)
    out = extractor.transform(X)
    # independent oracle: the same pipeline fitted directly
    expected = make_pipeline(StandardScaler(), PCA(n_components=3, random_state=0)).fit(X).transform(X)
    assert out.shape == (60, 3)
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-10)



def test_a_step_skops_cannot_save_is_refused_when_declared():
    # issue 32: a Birch step passed validate; the fit job then failed saving it ("Objects of type Birch are not
    # supported yet")
    with pytest.raises(ConfigError, match=r"sklearn\.cluster\._birch\.Birch cannot be saved once fitted"):
        SklearnExtractor.from_steps("c", [{"estimator": "sklearn.cluster.Birch"}], where=WHERE)


def test_the_unsupported_types_read_from_skops_source_are_skops_own():
    from skops.io import _sklearn  # oracle: the set skops itself builds

    from vertebrae.extractors.sklearn import _declared_unsupported

    declared = _declared_unsupported()
    assert declared, "skops.io._sklearn no longer reads as a literal set: _skops_unsupported imports skops instead"
    assert {f"{c.__module__}.{c.__qualname__}" for c in _sklearn.UNSUPPORTED_TYPES} == {
        f"{c.__module__}.{c.__qualname__}" for c in (import_object(p, where="t") for p in declared)}


STEPS_SCRIPT = """
import sys
from vertebrae.extractors import SklearnExtractor
SklearnExtractor.from_steps("p", [{"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 2}}])
print("skops" in sys.modules)
"""


def test_checking_a_declared_pipeline_does_not_import_skops():
    out = subprocess.run([sys.executable, "-c", STEPS_SCRIPT], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False"]

def test_from_steps_colon_path_is_accepted():
    extractor = SklearnExtractor.from_steps("c", [{"estimator": "sklearn.preprocessing:StandardScaler"}])
    assert type(extractor.estimator.steps[0][1]) is StandardScaler


def test_unset_random_state_is_seeded_reproducibly():
    X = _data(n=40, d=30)
    a = SklearnExtractor.from_steps("a", GRP)
    b = SklearnExtractor.from_steps("b", GRP)
    a.fit(X)
    b.fit(X)
    np.testing.assert_array_equal(a.transform(X), b.transform(X))
    # the extractor's random_state (default 0) was used: same as the estimator seeded by hand
    direct = GaussianRandomProjection(n_components=5, random_state=0).fit(X).transform(X)
    np.testing.assert_array_equal(a.transform(X), direct)
    # the declared estimator itself is not mutated
    assert a.estimator.steps[0][1].random_state is None

    other = SklearnExtractor.from_steps("c", GRP, random_state=1)
    other.fit(X)
    assert not np.allclose(other.transform(X), a.transform(X))


def test_explicit_random_state_is_kept():
    X = _data(n=40, d=30)
    declared = [{"estimator": "sklearn.random_projection.GaussianRandomProjection",
                 "params": {"n_components": 5, "random_state": 7}}]
    extractor = SklearnExtractor.from_steps("a", declared, random_state=0)
    extractor.fit(X)
    direct = GaussianRandomProjection(n_components=5, random_state=7).fit(X).transform(X)
    np.testing.assert_array_equal(extractor.transform(X), direct)


def test_transform_before_fit_is_refused():
    extractor = SklearnExtractor.from_steps("cand", SCALER_PCA)
    with pytest.raises(ValidationError, match="not fitted"):
        extractor.transform(_data())
    with pytest.raises(ValidationError, match="no fitted state"):
        extractor.fitted_state()


def test_estimator_without_transform_is_refused():
    from sklearn.linear_model import LogisticRegression

    with pytest.raises(ValidationError, match="transform"):
        SklearnExtractor("clf", LogisticRegression())


def test_allow_sparse_false_densifies_input():
    X = sp.csr_matrix(np.eye(5))
    dense = SklearnExtractor("d", Doubler(), allow_sparse=False)
    dense.fit(X)
    assert dense._fitted.seen_sparse_ is False
    assert isinstance(dense.transform(X), np.ndarray)
    keep = SklearnExtractor("s", Doubler())
    keep.fit(X)
    assert keep._fitted.seen_sparse_ is True
    assert sp.issparse(keep.transform(X))


def test_already_fitted_estimator_does_not_learn():
    X = _data()
    fitted = PCA(n_components=2, random_state=0).fit(X)
    extractor = SklearnExtractor("pre", fitted, already_fitted=True, cache_identity="pca@v1")
    assert extractor.learns is False
    np.testing.assert_array_equal(extractor.transform(X), fitted.transform(X))
    assert extractor.recipe()["already_fitted"] is True


# --------------------------------------------------------------------------------------------------
# fitted state persistence (skops)


def test_fitted_state_round_trip_on_fresh_extractor():
    X = _data()
    X_new = _data(n=25, seed=3)
    first = SklearnExtractor.from_steps("cand", SCALER_PCA)
    first.fit(X)
    state = json.loads(json.dumps(first.fitted_state()))
    assert state["format"] == "skops"
    fresh = SklearnExtractor.from_steps("cand", SCALER_PCA)
    fresh.load_fitted(state)
    np.testing.assert_array_equal(fresh.transform(X_new), first.transform(X_new))


def test_round_trip_of_sparse_output_types():
    # SparseRandomProjection stores a scipy CSR matrix: a trusted library *type*
    X = _data(n=30, d=40)
    decl = [{"estimator": "sklearn.random_projection.SparseRandomProjection", "params": {"n_components": 6}}]
    first = SklearnExtractor.from_steps("srp", decl)
    first.fit(X)
    fresh = SklearnExtractor.from_steps("srp", decl)
    fresh.load_fitted(first.fitted_state())
    np.testing.assert_array_equal(fresh.transform(X), first.transform(X))


def test_load_fitted_refuses_custom_class_outside_allow_list():
    live = SklearnExtractor("live", make_pipeline(StandardScaler(), Doubler()), cache_identity="doubler@1")
    live.fit(_data())
    state = live.fitted_state()
    target = SklearnExtractor.from_steps("declared", [{"estimator": "sklearn.preprocessing.StandardScaler"}])
    with pytest.raises(ArtifactError) as info:
        target.load_fitted(state, source="work/fitted/abc123.json")
    message = str(info.value)
    assert "Doubler" in message and "work/fitted/abc123.json" in message
    with pytest.raises(ValidationError, match="not fitted"):
        target.transform(_data())


@pytest.mark.parametrize("func", [_negate, builtins.eval, np.load], ids=["test-module-function", "builtins.eval", "numpy.load"])
def test_load_fitted_refuses_functions_outside_allow_list(func):
    # FunctionTransformer itself is declared; the function it wraps is not a trusted type
    live = SklearnExtractor("live", FunctionTransformer(func), cache_identity="fn@1")
    live.fit(_data())
    state = live.fitted_state()
    target = SklearnExtractor.from_steps("declared", [{"estimator": "sklearn.preprocessing.FunctionTransformer"}])
    with pytest.raises(ArtifactError, match="untrusted"):
        target.load_fitted(state)


def test_load_fitted_refuses_unknown_format():
    extractor = SklearnExtractor.from_steps("cand", SCALER_PCA)
    with pytest.raises(ArtifactError, match="fitted/x.json"):
        extractor.load_fitted({"format": "pickle", "data": ""}, source="fitted/x.json")


# --------------------------------------------------------------------------------------------------
# reusability and recipes


def test_live_estimator_is_reusable_only_with_cache_identity():
    a = SklearnExtractor("a", PCA(n_components=2))
    b = SklearnExtractor("a", PCA(n_components=2))
    assert a.reusable is False and b.reusable is False
    assert a.recipe() != b.recipe()
    assert a.recipe()["identity"].startswith("unsafe-session:")

    c = SklearnExtractor("a", PCA(n_components=2), cache_identity="pca2@v1")
    d = SklearnExtractor("other-name", PCA(n_components=2), cache_identity="pca2@v1")
    assert c.reusable is True
    assert c.recipe() == d.recipe()  # the name is not part of the recipe
    assert SklearnExtractor("a", PCA(n_components=2), cache_identity="pca2@v1", random_state=3).recipe() != c.recipe()
    with pytest.raises(ValidationError, match="cache_identity"):
        SklearnExtractor("a", PCA(), cache_identity="")


def test_declared_steps_recipe_follows_declaration():
    one = SklearnExtractor.from_steps("x", SCALER_PCA)
    two = SklearnExtractor.from_steps("y", SCALER_PCA)
    assert one.recipe() == two.recipe()
    changed = [SCALER_PCA[0], {"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 4}}]
    assert SklearnExtractor.from_steps("x", changed).recipe() != one.recipe()
    assert SklearnExtractor.from_steps("x", SCALER_PCA, allow_sparse=False).recipe() != one.recipe()


# --------------------------------------------------------------------------------------------------
# registry and config errors


def test_registry_builds_sklearn_and_precomputed():
    sk = build_extractor("cand", {"type": "sklearn", "steps": SCALER_PCA, "random_state": 4}, where=WHERE)
    assert isinstance(sk, SklearnExtractor) and sk.name == "cand" and sk.random_state == 4
    assert sk.recipe() == SklearnExtractor.from_steps("cand", SCALER_PCA, random_state=4).recipe()
    pre = build_extractor("raw", {"type": "precomputed"}, where=WHERE)
    assert isinstance(pre, PrecomputedExtractor) and pre.name == "raw"


def test_registry_unknown_type_names_config_key():
    with pytest.raises(ConfigError) as info:
        build_extractor("cand", {"type": "torchvision"}, where=WHERE)
    assert f"{WHERE}.type" in str(info.value) and "torchvision" in str(info.value)
    with pytest.raises(ConfigError, match=f"{WHERE}.type"):
        build_extractor("cand", {}, where=WHERE)


@pytest.mark.parametrize(
    "path",
    ["sklearn.decomposition.NoSuchPCA", "no_such_module_vertebrae_test.Thing", "PCA", ""],
)
def test_unimportable_estimator_names_config_key(path):
    decl = {"type": "sklearn", "steps": [SCALER_PCA[0], {"estimator": path}]}
    with pytest.raises(ConfigError) as info:
        build_extractor("cand", decl, where=WHERE)
    assert f"{WHERE}.steps[1].estimator" in str(info.value)


def test_step_errors_name_config_key():
    with pytest.raises(ConfigError, match=rf"{WHERE}\.steps"):
        build_extractor("cand", {"type": "sklearn", "steps": []}, where=WHERE)
    with pytest.raises(ConfigError, match=rf"{WHERE}\.steps\[0\]\.params"):
        build_extractor("cand", {"type": "sklearn", "steps": [
            {"estimator": "sklearn.decomposition.PCA", "params": {"n_komponents": 2}}]}, where=WHERE)
    with pytest.raises(ConfigError, match=rf"{WHERE}\.steps\[0\]\.estimator"):
        build_extractor("cand", {"type": "sklearn", "steps": [{"params": {"n_components": 2}}]}, where=WHERE)


# --------------------------------------------------------------------------------------------------
# PrecomputedExtractor


def test_precomputed_passes_rows_through():
    extractor = PrecomputedExtractor("emb")
    dense = np.arange(12, dtype=np.float32).reshape(4, 3)
    assert extractor.transform(dense) is dense
    sparse = sp.csr_matrix(dense)
    assert extractor.transform(sparse) is sparse
    assert extractor.learns is False and extractor.reusable is True
    assert extractor.recipe() == {"type": "precomputed"} == PrecomputedExtractor("other").recipe()


def test_fitted_state_round_trip_does_not_import_torch(tmp_path):
    """skops' trusted-type scan walks scikit-learn's packages, torch array-API shim included; a fitted-state
    save and load (every fit and sklearn embed job) must not pay torch's import for it, and the shim stays
    importable afterwards."""
    import subprocess
    import sys

    script = """
import sys
import numpy as np
from vertebrae.extractors import SklearnExtractor
from vertebrae.extractors.registry import build_extractor
decl = {"type": "sklearn", "steps": [{"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 2}}]}
X = np.random.default_rng(0).normal(size=(20, 5))
a = build_extractor("pca", decl, where="t")
a.fit(X)
b = build_extractor("pca", decl, where="t")
b.load_fitted(a.fitted_state())
assert np.array_equal(a.transform(X), b.transform(X))
print("torch" in sys.modules)
import sklearn.externals.array_api_compat.torch
print("torch" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]
