"""Declared scikit-learn steps are checked once per declaration and versions (vertebrae.core.check_records): a
process that recalls the check imports no scikit-learn while planning, and its extractor builds the very pipeline
when first used."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from vertebrae.core.check_records import remembered_in
from vertebrae.core.errors import ConfigError
from vertebrae.extractors import SklearnExtractor

STEPS = [{"estimator": "sklearn.preprocessing.StandardScaler"},
         {"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 3}}]
PLAN_IN_A_FRESH_PROCESS = """
import json, sys
from vertebrae.core.check_records import remembered_in
from vertebrae.extractors import SklearnExtractor
with remembered_in(sys.argv[1]):
    extractor = SklearnExtractor.from_steps("p", json.loads(sys.argv[2]), where="w")
print(json.dumps({"sklearn": "sklearn" in sys.modules, "recipe": extractor.recipe(),
                  "classes": list(extractor._declared_classes)}))
"""


def _plan_elsewhere(records, steps) -> dict:
    proc = subprocess.run([sys.executable, "-c", PLAN_IN_A_FRESH_PROCESS, str(records), json.dumps(steps)],
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def test_a_recalled_check_imports_no_sklearn_and_builds_the_same_pipeline_when_used(tmp_path):
    records = tmp_path / "checks"
    first = _plan_elsewhere(records, STEPS)
    assert first["sklearn"] and len(list(records.glob("*.json"))) == 1  # checked in full, recorded
    again = _plan_elsewhere(records, STEPS)
    assert not again["sklearn"]  # recalled: nothing of scikit-learn imported while planning
    assert again["recipe"] == first["recipe"] and again["classes"] == first["classes"] == [
        "sklearn.preprocessing._data.StandardScaler", "sklearn.decomposition._pca.PCA"]
    with remembered_in(records):
        recalled = SklearnExtractor.from_steps("p", STEPS, where="w")
    checked = SklearnExtractor.from_steps("p", STEPS, where="w")
    X = np.random.default_rng(0).normal(size=(40, 6))
    recalled.fit(X)
    checked.fit(X)
    np.testing.assert_array_equal(recalled.transform(X), checked.transform(X))
    assert recalled.fitted_state() == checked.fitted_state()
    fresh = SklearnExtractor.from_steps("p", STEPS, where="w")
    fresh.load_fitted(recalled.fitted_state())  # the recalled classes admit exactly the declared types
    np.testing.assert_array_equal(fresh.transform(X), checked.transform(X))


def test_a_refused_declaration_is_not_recorded_and_stays_refused(tmp_path):
    bad = [{"estimator": "sklearn.decomposition.PCA", "params": {"n_components": -2}}]
    for _ in range(2):
        with remembered_in(tmp_path), pytest.raises(ConfigError, match=r"w\.steps\[0\]\.params \(PCA\)"):
            SklearnExtractor.from_steps("p", bad, where="w")
    assert not list(tmp_path.glob("*.json"))


def test_steps_of_a_trusted_module_are_checked_every_time(tmp_path):
    steps = [{"estimator": "sklearn.preprocessing.StandardScaler"},
             {"estimator": "sklearn_step_helpers.Scale", "params": {"by": 2.0}}]
    helper = tmp_path / "sklearn_step_helpers.py"
    helper.write_text("from sklearn.base import BaseEstimator, TransformerMixin\n"
                      "class Scale(TransformerMixin, BaseEstimator):\n"
                      "    def __init__(self, by=1.0):\n        self.by = by\n"
                      "    def fit(self, X, y=None):\n        return self\n"
                      "    def transform(self, X):\n        return X * self.by\n", encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        with remembered_in(tmp_path / "checks"):
            SklearnExtractor.from_steps("p", steps, where="w", trusted_modules=["sklearn_step_helpers"])
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("sklearn_step_helpers", None)
    assert not (tmp_path / "checks").exists()  # its class may change under the same versions: never recorded
