"""The bundled scikit-learn datasets' rows and arrays, read from their data files without importing scikit-learn."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from vertebrae.data.sources.sklearn_datasets import SKLEARN_DATASETS, _load_sklearn_bunch, _sklearn_file_rows


def _sklearn_loaded(name):
    from sklearn import datasets

    bunch = getattr(datasets, f"load_{name}")()  # oracle: scikit-learn's own loader
    return np.asarray(bunch.data, dtype=np.float64), np.asarray(bunch.target)


@pytest.mark.parametrize("name", SKLEARN_DATASETS)
def test_file_row_count_equals_the_loaded_dataset(name):
    features, labels = _sklearn_loaded(name)
    assert _sklearn_file_rows(name) == features.shape[0] == len(labels)


@pytest.mark.parametrize("name", SKLEARN_DATASETS)
def test_file_arrays_equal_the_loaded_dataset_bit_for_bit(name):
    features, labels = _load_sklearn_bunch(name)
    expected, target = _sklearn_loaded(name)
    assert features.dtype == np.float64 and features.tobytes() == expected.tobytes()
    assert labels == (target.astype(np.float64).tolist() if target.dtype.kind == "f" else target.tolist())
    if name != "diabetes":  # scaled by scikit-learn's loader: read through it
        assert all(type(v) is int for v in labels)


LOAD_SCRIPT = """
import sys
from vertebrae.data.sources.sklearn_datasets import _load_sklearn_bunch
features, labels = _load_sklearn_bunch("digits")
print(features.shape[0], "sklearn" in sys.modules)
"""


def test_loading_a_bundled_classification_dataset_does_not_import_sklearn():
    out = subprocess.run([sys.executable, "-c", LOAD_SCRIPT], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["1797", "False"]


def test_unknown_name_falls_back_to_the_loader():
    assert _sklearn_file_rows("linnerud") is None


PLAN_SCRIPT = """
import sys
from vertebrae.planning import plan
planned = plan({"seed": 0, "embedding": {"shards": 2}, "benchmarks": {"d": {
    "dataset": {"source": {"type": "sklearn", "name": "digits"},
                "identity": {"kind": "declared", "name": "sklearn-digits", "revision": "1"}},
    "extractors": {"pixels": {"type": "precomputed"}}}}})
spec = [planned.spec(fp) for fp in planned.planned() if planned.spec(fp).get("n_rows")][0]
print(spec["n_rows"], "sklearn" in sys.modules)
"""


def test_planning_a_bundled_dataset_does_not_import_sklearn():
    out = subprocess.run([sys.executable, "-c", PLAN_SCRIPT], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["1797", "False"]
