"""Bundled scikit-learn datasets: ``{"type": "sklearn", "name": "digits"}`` (or iris, wine, breast_cancer,
diabetes), read from the data files scikit-learn ships without importing it where they read as expected.

They read no file of the user's, so they have no ``files`` recipe: the workflow asks them to declare an identity.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from vertebrae.core.errors import ConfigError
from vertebrae.data.sources.checks import SourceData
from vertebrae.data.sources.keys import _REQUIRED, SourceFormat, _check_rows, _key

#: Bundled scikit-learn datasets a ``{"type": "sklearn"}`` source may name.
SKLEARN_DATASETS: tuple[str, ...] = ("breast_cancer", "diabetes", "digits", "iris", "wine")


def _load_sklearn_bunch(name: str) -> tuple[np.ndarray, list]:
    """Features and labels of bundled dataset ``name``: read from its data file as ``sklearn.datasets.load_<name>``
    reads it (equal bit for bit, tests/data), without importing scikit-learn (1.3 s of every shard job's start);
    through scikit-learn where the file is not found or reads otherwise than expected (diabetes, which it scales)."""
    arrays = _sklearn_file_arrays(name)
    if arrays is None:
        from sklearn import datasets

        bunch = getattr(datasets, f"load_{name}")()
        arrays = np.asarray(bunch.data), np.asarray(bunch.target)
    features = np.ascontiguousarray(arrays[0], dtype=np.float64)
    target = arrays[1]
    # diabetes has a continuous target (regression); the others have integer classes
    labels = target.astype(np.float64).tolist() if target.dtype.kind == "f" else [int(v) for v in target.tolist()]
    return features, labels


#: How each bundled dataset's row count reads from its file under sklearn/datasets/data, without importing
#: scikit-learn (planning counts rows at every Snakemake start; the import alone took most of the default config's
#: plan): a header whose first field is the row count, or one row per line of a gzipped table.
_SKLEARN_ROW_FILES: dict[str, tuple[str, str]] = {
    "iris": ("iris.csv", "header"), "wine": ("wine_data.csv", "header"),
    "breast_cancer": ("breast_cancer.csv", "header"), "digits": ("digits.csv.gz", "lines"),
    "diabetes": ("diabetes_data_raw.csv.gz", "lines"),
}


def _sklearn_file_rows(name: str) -> int | None:
    """The row count of bundled dataset ``name`` read from its data file, or None where that file is not found
    or reads otherwise than expected (then the caller loads the dataset)."""
    import gzip

    located = _sklearn_data_file(name)
    if located is None:
        return None
    path, kind = located
    try:
        if kind == "header":
            with path.open(encoding="utf-8") as handle:
                first = handle.readline().split(",")[0].strip()
            return int(first) if first.isdigit() else None
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            return sum(1 for line in handle if line.strip())
    except OSError:
        return None


def _sklearn_data_file(name: str) -> tuple[Path, str] | None:
    import importlib.util

    spec = importlib.util.find_spec("sklearn")  # locates the package without importing it
    if name not in _SKLEARN_ROW_FILES or spec is None or not spec.submodule_search_locations:
        return None
    filename, kind = _SKLEARN_ROW_FILES[name]
    return Path(list(spec.submodule_search_locations)[0]) / "datasets" / "data" / filename, kind


def _sklearn_file_arrays(name: str) -> tuple[np.ndarray, np.ndarray] | None:
    """``(data, target)`` of a bundled classification dataset from its file: a csv whose header's first two fields
    are the row and feature counts, one row per line, the integer target last (iris, wine, breast_cancer); or the
    gzipped table of digits, target last. None for another name or a file that does not read so."""
    import csv
    import gzip

    located = _sklearn_data_file(name) if name != "diabetes" else None
    if located is None:
        return None
    path, kind = located
    try:
        if kind == "lines":
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                table = np.loadtxt(handle, delimiter=",")
            return table[:, :-1], table[:, -1].astype(int, copy=False)
        with path.open(encoding="utf-8") as handle:
            reader = csv.reader(handle)
            header = next(reader)
            n_samples, n_features = int(header[0]), int(header[1])
            data, target = np.empty((n_samples, n_features)), np.empty((n_samples,), dtype=int)
            for i, row in enumerate(reader):
                data[i] = np.asarray(row[:-1], dtype=np.float64)
                target[i] = np.asarray(row[-1], dtype=int)
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return data, target


def _count(opts: dict[str, Any], base_dir: Path, where: str) -> int:
    rows = _sklearn_file_rows(opts["name"])
    if rows is not None:
        return rows
    features, _ = _load_sklearn_bunch(opts["name"])
    return int(features.shape[0])


def _load(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
    features, labels = _load_sklearn_bunch(opts["name"])
    start, stop = _check_rows(rows, features.shape[0], where)
    if (start, stop) != (0, features.shape[0]):
        features = features[start:stop].copy()
        labels = labels[start:stop]
    return SourceData(features=features, labels=labels, row_ids=None)


def _check_decl(opts: dict[str, Any], where: str) -> None:
    if opts["name"] not in SKLEARN_DATASETS:
        raise ConfigError(
            f"{_key(where, 'name')}: unknown sklearn dataset {opts['name']!r}; "
            f"allowed: {', '.join(SKLEARN_DATASETS)}"
        )


FORMAT = SourceFormat(keys={"name": _REQUIRED}, count=_count, load=_load, check=_check_decl, tracked=False)
