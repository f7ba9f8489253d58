"""Row counts of the bundled scikit-learn datasets, read from their data files without importing scikit-learn."""

from __future__ import annotations

import subprocess
import sys

import pytest

from vertebrae.data.source_arrays import _load_sklearn_bunch, _sklearn_file_rows
from vertebrae.data.source_decl import SKLEARN_DATASETS


@pytest.mark.parametrize("name", SKLEARN_DATASETS)
def test_file_row_count_equals_the_loaded_dataset(name):
    features, labels = _load_sklearn_bunch(name)  # oracle: scikit-learn's own loader
    assert _sklearn_file_rows(name) == features.shape[0] == len(labels)


def test_unknown_name_falls_back_to_the_loader():
    assert _sklearn_file_rows("linnerud") is None


PLAN_SCRIPT = """
import sys
from vertebrae.workflow import plan
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
