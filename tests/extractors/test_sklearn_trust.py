"""Issue 15, items 6, 7, 8, 12: scikit-learn extractors from a config cannot run code, load only what they
declare, save reproducible bytes and name the extractor and config key when a fit fails. Real scikit-learn,
skops and workflow configs; no mocks."""

from __future__ import annotations

import base64
import io
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.decomposition import PCA
from sklearn.ensemble import RandomTreesEmbedding
from sklearn.pipeline import make_pipeline

from vertebrae.core.errors import ArtifactError, ConfigError
from vertebrae.extractors import SklearnExtractor
from vertebrae.extractors.registry import build_extractor

WHERE = "benchmarks.digits.extractors.cand"
PCA2 = [{"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 2}}]


def _data(n=60, d=12, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) @ rng.normal(size=(d, d))


class Marker(TransformerMixin, BaseEstimator):
    """A custom transformer; its module is trusted only when a config lists it."""

    def __init__(self, scale=2.0):
        self.scale = scale

    def fit(self, X, y=None):
        self.width_ = X.shape[1]
        return self

    def transform(self, X):
        return X * self.scale


def _zip_entries(raw: bytes):
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        return [(info.filename, info.date_time, z.read(info)) for info in z.infolist()]


# --------------------------------------------------------------------------------------------------
# item 6: byte-reproducible fitted state


@pytest.mark.parametrize("steps", [
    [{"estimator": "sklearn.preprocessing.StandardScaler"}, PCA2[0]],
    [{"estimator": "sklearn.random_projection.SparseRandomProjection", "params": {"n_components": 6}}],  # nested npz
], ids=["scaler-pca", "sparse-projection"])
def test_two_fits_give_identical_bytes(steps):
    X = _data(n=40, d=30)
    first = SklearnExtractor.from_steps("a", steps)
    second = SklearnExtractor.from_steps("b", steps)
    first.fit(X)
    second.fit(X)  # both fitted objects alive: their arrays have different memory ids
    a, b = first.fitted_state(), second.fitted_state()
    assert a == b
    raw = base64.b64decode(a["data"])
    for name, date_time, content in _zip_entries(raw):
        assert date_time == (1980, 1, 1, 0, 0, 0), name
        if name.endswith(".npz"):
            assert {dt for _, dt, _ in _zip_entries(content)} == {(1980, 1, 1, 0, 0, 0)}
    fresh = SklearnExtractor.from_steps("c", steps)
    fresh.load_fitted(a)
    np.testing.assert_array_equal(
        fresh.transform(X).toarray() if hasattr(fresh.transform(X), "toarray") else fresh.transform(X),
        first.transform(X).toarray() if hasattr(first.transform(X), "toarray") else first.transform(X),
    )


def test_fitted_bytes_identical_across_processes():
    script = """
import numpy as np
from vertebrae.extractors import SklearnExtractor
X = np.random.default_rng(0).normal(size=(30, 8))
e = SklearnExtractor.from_steps("p", [{"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 3}}])
e.fit(X)
print(e.fitted_state()["data"])
"""
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout for _ in range(2)]
    assert runs[0] == runs[1] and len(runs[0]) > 100


# --------------------------------------------------------------------------------------------------
# item 7: a step names a scikit-learn estimator, or a class of a module the config trusts


def test_popen_step_is_refused_before_anything_runs(tmp_path):
    marker = tmp_path / "ran"
    decl = {"type": "sklearn", "steps": [
        {"estimator": "subprocess.Popen", "params": {"args": ["touch", str(marker)]}}]}
    with pytest.raises(ConfigError) as info:
        build_extractor("evil", decl, where=WHERE)
    assert f"{WHERE}.steps[0].estimator" in str(info.value) and "subprocess.Popen" in str(info.value)
    assert not marker.exists()


def test_untrusted_module_is_not_imported():
    module = "vertebrae_t3_never_imported_module"
    code = f"""
import sys
from vertebrae.core.errors import ConfigError
from vertebrae.extractors.registry import build_extractor
try:
    build_extractor("x", {{"type": "sklearn", "steps": [{{"estimator": "{module}.Thing"}}]}}, where="w")
except ConfigError as exc:
    print("refused", "w.steps[0].estimator" in str(exc), "trusted" in str(exc))
print("{module}" in sys.modules)
"""
    # a module on the path that would record being imported
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        Path(d, f"{module}.py").write_text(f"open({str(Path(d, 'imported'))!r}, 'w').close()\nclass Thing:\n    def transform(self, X): return X\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**__import__("os").environ, "PYTHONPATH": d}).stdout.split()
        assert out == ["refused", "True", "True", "False"]
        assert not Path(d, "imported").exists()


@pytest.mark.parametrize("path,why", [
    ("os.system", "trusted"),
    ("builtins.eval", "trusted"),
    ("sklearnx.Thing", "trusted"),  # a prefix, not the package
    ("sklearn.datasets.fetch_openml", "not an estimator class"),  # a function inside scikit-learn
    ("sklearn.utils.Bunch", "not a scikit-learn estimator"),  # a class, not an estimator
    ("sklearn.linear_model.LogisticRegression", "no transform"),
])
def test_only_sklearn_estimators_with_transform(path, why):
    with pytest.raises(ConfigError) as info:
        build_extractor("x", {"type": "sklearn", "steps": [PCA2[0], {"estimator": path}]}, where=WHERE)
    assert f"{WHERE}.steps[1].estimator" in str(info.value) and why in str(info.value)


def test_trusted_modules_admit_a_custom_class_and_round_trip():
    decl = {"type": "sklearn", "trusted_modules": [__name__],
            "steps": [{"estimator": f"{__name__}.Marker", "params": {"scale": 3.0}}, PCA2[0]]}
    with pytest.raises(ConfigError, match=rf"{WHERE}\.steps\[0\]\.estimator"):
        build_extractor("m", {**decl, "trusted_modules": []}, where=WHERE)
    extractor = build_extractor("m", decl, where=WHERE)
    X = _data()
    extractor.fit(X)
    fresh = build_extractor("m", decl, where=WHERE)
    fresh.load_fitted(extractor.fitted_state())
    expected = make_pipeline(Marker(3.0), PCA(n_components=2, random_state=0)).fit(X).transform(X)
    np.testing.assert_allclose(fresh.transform(X), expected, rtol=1e-10, atol=1e-10)
    with pytest.raises(ConfigError, match=rf"{WHERE}\.trusted_modules"):
        build_extractor("m", {**decl, "trusted_modules": "tests"}, where=WHERE)


def test_trusted_modules_do_not_change_the_recipe():
    plain = build_extractor("p", {"type": "sklearn", "steps": PCA2}, where=WHERE)
    listed = build_extractor("p", {"type": "sklearn", "steps": PCA2, "trusted_modules": [__name__]}, where=WHERE)
    assert plain.recipe() == listed.recipe()


def _dry_run_config(extractor: dict) -> dict:
    return {"seed": 0, "embedding": {"shards": 1, "batch_size": 256}, "benchmarks": {"digits": {
        "dataset": {"source": {"type": "sklearn", "name": "digits"},
                    "identity": {"kind": "declared", "name": "sklearn-digits", "revision": "1"}},
        "extractors": {"cand": extractor}}}}


def test_snakemake_dry_run_refuses_popen_and_accepts_trusted_module(tmp_path, monkeypatch):
    """The reported attack, through the real workflow: ``snakemake -n`` ran the shell command."""
    from workflow_support import snakemake, write_config

    marker = tmp_path / "ran"
    evil = {"type": "sklearn", "steps": [{"estimator": "subprocess.Popen", "params": {"args": ["touch", str(marker)]}}]}
    write_config(tmp_path / "evil", _dry_run_config(evil))
    proc = snakemake(tmp_path / "evil", "-n", check=False)
    assert proc.returncode != 0 and not marker.exists()
    assert "benchmarks.digits.extractors.cand.steps[0].estimator" in proc.stdout + proc.stderr

    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "t3_trusted_steps.py").write_text(
        "from sklearn.base import BaseEstimator, TransformerMixin\n"
        "class Half(TransformerMixin, BaseEstimator):\n"
        "    def fit(self, X, y=None):\n        return self\n"
        "    def transform(self, X):\n        return X / 2\n")
    monkeypatch.setenv("PYTHONPATH", str(mods))
    trusted = {"type": "sklearn", "trusted_modules": ["t3_trusted_steps"], "steps": [{"estimator": "t3_trusted_steps.Half"}]}
    write_config(tmp_path / "trusted", _dry_run_config(trusted))
    snakemake(tmp_path / "trusted", "-n")  # the schema knows the key; the planner builds the extractor
    untrusted = {k: v for k, v in trusted.items() if k != "trusted_modules"}
    write_config(tmp_path / "untrusted", _dry_run_config(untrusted))
    proc = snakemake(tmp_path / "untrusted", "-n", check=False)
    assert proc.returncode != 0 and "not in a trusted module" in proc.stdout + proc.stderr


# --------------------------------------------------------------------------------------------------
# item 8: load exactly what the declaration produces


def _state_of(steps_or_estimator, X=None):
    X = _data() if X is None else X
    if isinstance(steps_or_estimator, list):
        e = SklearnExtractor.from_steps("src", steps_or_estimator)
    else:
        e = SklearnExtractor("src", steps_or_estimator, cache_identity="live@1")
    e.fit(X)
    return e.fitted_state()


def test_pca2_refuses_a_pca3_state():
    state = _state_of([{"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 3}}])
    target = SklearnExtractor.from_steps("pca2", PCA2)
    with pytest.raises(ArtifactError) as info:
        target.load_fitted(state, source="work/fitted/f.json")
    message = str(info.value)
    assert "work/fitted/f.json" in message and "n_components=3" in message and "declared 2" in message
    assert target._fitted is None


def test_pca2_refuses_a_different_class_and_seed():
    target = SklearnExtractor.from_steps("pca2", PCA2)
    grp = _state_of([{"estimator": "sklearn.random_projection.GaussianRandomProjection", "params": {"n_components": 2}}])
    with pytest.raises(ArtifactError, match="GaussianRandomProjection"):
        target.load_fitted(grp, source="f.json")
    other_seed = SklearnExtractor.from_steps("pca2", PCA2, random_state=5)
    other_seed.fit(_data())
    with pytest.raises(ArtifactError, match="random_state=5"):
        target.load_fitted(other_seed.fitted_state(), source="f.json")


def test_pca2_refuses_random_trees_embedding_by_name():
    state = _state_of(make_pipeline(RandomTreesEmbedding(n_estimators=3, max_depth=2, random_state=0)))
    target = SklearnExtractor.from_steps("pca2", PCA2)
    with pytest.raises(ArtifactError) as info:
        target.load_fitted(state, source="f.json")
    assert "sklearn.tree._tree.Tree" in str(info.value) and "f.json" in str(info.value)


def test_declared_random_trees_embedding_loads_its_trees():
    decl = [{"estimator": "sklearn.ensemble.RandomTreesEmbedding", "params": {"n_estimators": 3, "max_depth": 2}}]
    X = _data()
    state = _state_of(decl, X)
    fresh = SklearnExtractor.from_steps("rte", decl)
    fresh.load_fitted(state)
    expected = RandomTreesEmbedding(n_estimators=3, max_depth=2, random_state=0).fit(X).transform(X)
    assert (fresh.transform(X) != expected).nnz == 0


@pytest.mark.parametrize("data", [
    base64.b64encode(b"garbage, not a zip file" * 10).decode(),
    "!!! not base64 !!!",
    base64.b64encode(b"PK\x03\x04" + bytes(200)).decode(),
])
def test_garbage_bytes_are_an_artifact_error_with_the_path(data):
    target = SklearnExtractor.from_steps("pca2", PCA2)
    with pytest.raises(ArtifactError, match="results/work/fitted/abc.json"):
        target.load_fitted({"format": "skops", "data": data}, source="results/work/fitted/abc.json")
    with pytest.raises(ArtifactError, match="abc.json"):
        target.load_fitted({"format": "skops"}, source="abc.json")


def test_truncated_state_is_an_artifact_error():
    state = _state_of(PCA2)
    raw = base64.b64decode(state["data"])
    cut = {"format": "skops", "data": base64.b64encode(raw[: len(raw) // 2]).decode()}
    with pytest.raises(ArtifactError, match="cut.json"):
        SklearnExtractor.from_steps("pca2", PCA2).load_fitted(cut, source="cut.json")


# --------------------------------------------------------------------------------------------------
# item 12: parameter checks at plan time, fit failures name the extractor and the config key


def test_invalid_parameter_value_fails_at_plan_time():
    with pytest.raises(ConfigError) as info:
        build_extractor("pca", {"type": "sklearn", "steps": [
            {"estimator": "sklearn.decomposition.PCA", "params": {"n_components": -3}}]}, where=WHERE)
    assert f"{WHERE}.steps[0].params" in str(info.value) and "n_components" in str(info.value)


def test_n_components_above_width_names_extractor_and_step():
    decl = {"type": "sklearn", "steps": [{"estimator": "sklearn.preprocessing.StandardScaler"},
                                         {"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 50}}]}
    extractor = build_extractor("pca50", decl, where=WHERE)  # the input width is unknown when planning
    with pytest.raises(ConfigError) as info:
        extractor.fit(_data(n=60, d=4))
    message = str(info.value)
    assert "'pca50'" in message and f"{WHERE}.steps[1] (PCA)" in message and "60x4" in message
    assert isinstance(info.value, ValueError)
