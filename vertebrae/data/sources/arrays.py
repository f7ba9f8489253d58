"""Loaders for the array sources: bundled scikit-learn datasets, ``npz``, ``npy``, ``sparse_npz`` and ``hdf5``.

Each type has a counter ``(opts, base_dir, where) -> rows`` and a loader ``(opts, base_dir, where, rows) ->
SourceData`` over a declaration checked by :mod:`vertebrae.data.sources.declaration`, and a groups reader ``(opts,
base_dir, where) -> groups or None`` that reads the declared independence groups without the features. h5py,
scipy and scikit-learn are imported only when such a source is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.data.sources.checks import (
    _GROUP_KINDS,
    _ID_KINDS,
    _LABEL_KINDS,
    SourceData,
    _aux_columns,
    _check_aux_meta,
    _check_features_meta,
    _check_length,
    _npy_header,
    labels_only_rows,
    _npy_mmap,
    _read_npy_header,
    _values_from_array,
    open_npz,
)
from vertebrae.data.sources.declaration import _check_rows, _key, _listing, _resolve

# --------------------------------------------------------------------------------------------------------
# sklearn


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


def _count_sklearn(opts: dict[str, Any], base_dir: Path, where: str) -> int:
    rows = _sklearn_file_rows(opts["name"])
    if rows is not None:
        return rows
    features, _ = _load_sklearn_bunch(opts["name"])
    return int(features.shape[0])


def _load_sklearn(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
    features, labels = _load_sklearn_bunch(opts["name"])
    start, stop = _check_rows(rows, features.shape[0], where)
    if (start, stop) != (0, features.shape[0]):
        features = features[start:stop].copy()
        labels = labels[start:stop]
    return SourceData(features=features, labels=labels, row_ids=None)


# --------------------------------------------------------------------------------------------------------
# npz


def _npz_require(archive: Any, opts: Mapping[str, Any], key: str, path: Path, where: str) -> str | None:
    name = opts[key]
    if name is not None and name not in archive.files:
        raise ConfigError(
            f"{_key(where, key)}: key {name!r} not found in {path}; available keys: {_listing(archive.files)}"
        )
    return name


def _npz_member_header(archive: Any, name: str, path: Path) -> tuple[tuple[int, ...], np.dtype]:
    members = archive.zip.namelist()
    member = name + ".npy" if name + ".npy" in members else name
    with archive.zip.open(member) as fh:
        return _read_npy_header(fh, f"{path}[{name!r}]")


def _npz_checked_names(archive: Any, opts: Mapping[str, Any], path: Path, where: str):
    """``(features key, labels key, ids key, rows)``; the features key is None for a labels-only archive (no
    member of that name: the labels then give the row count, see ``npz_labels_only``)."""
    lkey = _npz_require(archive, opts, "labels_key", path, where)
    ikey = _npz_require(archive, opts, "ids_key", path, where)
    if npz_labels_only(archive, opts, path) is not None:
        shape, _ = _npz_member_header(archive, lkey, path)  # type: ignore[arg-type]
        return None, lkey, ikey, int(shape[0]) if shape else 0
    fkey = _npz_require(archive, opts, "features_key", path, where)
    shape, dtype = _npz_member_header(archive, fkey, path)  # type: ignore[arg-type]
    _check_features_meta(shape, dtype, f"{path}[{fkey!r}]")
    return fkey, lkey, ikey, int(shape[0])


def npz_labels_only(archive: Any, opts: Mapping[str, Any], path: Path) -> str | None:
    """Why the archive is a labels-only table (no member of the default ``features_key``, embeddings), or None; a
    features key declared otherwise must be there (a typo is refused naming it)."""
    if opts["features_key"] != "embeddings" or opts["features_key"] in archive.files:
        return None
    return f"{path} has no features member {opts['features_key']!r} (members: {_listing(archive.files)})"


def _count_npz(opts: dict[str, Any], base_dir: Path, where: str) -> int:
    path = _resolve(opts, "path", base_dir, where)
    with open_npz(path) as archive:  # type: ignore[arg-type]
        return _npz_checked_names(archive, opts, path, where)[3]  # type: ignore[arg-type]


def _npz_array(archive: Any, name: str, path: Path) -> np.ndarray:
    try:
        return archive[name]
    except (ValueError, OSError, EOFError) as exc:
        raise ValidationError(f"{path}[{name!r}] is not a readable array: {exc}") from None


def _npz_groups(archive: Any, opts: Mapping[str, Any], path: Path, where: str, n: int, fwhat: str):
    """``(array, what)`` of the declared ``groups_key`` (checked: 1-D integers or text, one per row), or None."""
    gkey = _npz_require(archive, opts, "groups_key", path, where)
    if gkey is None:
        return None
    array, gwhat = _npz_array(archive, gkey, path), f"{path}[{gkey!r}]"
    _check_aux_meta(array.shape, array.dtype, _GROUP_KINDS, "groups", gwhat)
    _check_length(array.shape[0], n, "groups", gwhat, fwhat)
    return array, gwhat


def _groups_npz(opts: dict[str, Any], base_dir: Path, where: str) -> list | None:
    path = _resolve(opts, "path", base_dir, where)
    assert path is not None
    with open_npz(path) as archive:
        fkey, _, _, n = _npz_checked_names(archive, opts, path, where)
        groups = _npz_groups(archive, opts, path, where, n, f"{path}[{fkey!r}]")
    return None if groups is None else _values_from_array(groups[0], _GROUP_KINDS, "groups", groups[1])


def _load_npz(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
    path = _resolve(opts, "path", base_dir, where)
    assert path is not None
    with open_npz(path) as archive:
        fkey, lkey, ikey, n = _npz_checked_names(archive, opts, path, where)
        fwhat = f"{path}[{fkey or lkey!r}]"
        labels_arr = _npz_array(archive, lkey, path)
        lwhat = f"{path}[{lkey!r}]"
        _check_aux_meta(labels_arr.shape, labels_arr.dtype, _LABEL_KINDS, "labels", lwhat)
        _check_length(labels_arr.shape[0], n, "labels", lwhat, fwhat)
        ids_arr = None
        if ikey is not None:
            ids_arr = _npz_array(archive, ikey, path)
            iwhat = f"{path}[{ikey!r}]"
            _check_aux_meta(ids_arr.shape, ids_arr.dtype, _ID_KINDS, "ids", iwhat)
            _check_length(ids_arr.shape[0], n, "ids", iwhat, fwhat)
        groups = _npz_groups(archive, opts, path, where, n, fwhat)
        start, stop = _check_rows(rows, n, where)
        labels_only = npz_labels_only(archive, opts, path)
        features = labels_only_rows(n) if fkey is None else _npz_array(archive, fkey, path)
    if (start, stop) != (0, n):
        features = features[start:stop].copy()
    labels = _values_from_array(labels_arr[start:stop], _LABEL_KINDS, "labels", lwhat, start)
    row_ids = None
    if ids_arr is not None:
        row_ids = _values_from_array(ids_arr[start:stop], _ID_KINDS, "ids", iwhat, start)
    if groups is None:
        return SourceData(features=features, labels=labels, row_ids=row_ids, labels_only=labels_only)
    group_values = _values_from_array(groups[0][start:stop], _GROUP_KINDS, "groups", groups[1], start)
    return SourceData(features, labels, row_ids, group_values, opts["groups_key"], labels_only)


# --------------------------------------------------------------------------------------------------------
# npy


def _count_npy(opts: dict[str, Any], base_dir: Path, where: str) -> int:
    path = _resolve(opts, "path", base_dir, where)
    _resolve(opts, "labels_path", base_dir, where)
    _resolve(opts, "ids_path", base_dir, where)
    shape, dtype = _npy_header(path)  # type: ignore[arg-type]
    _check_features_meta(shape, dtype, str(path))
    return int(shape[0])


def _load_npy(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
    path = _resolve(opts, "path", base_dir, where)
    assert path is not None
    shape, dtype = _npy_header(path)
    _check_features_meta(shape, dtype, str(path))
    n = int(shape[0])
    labels_col, ids_col, groups_col = _aux_columns(opts, base_dir, where, n, str(path))
    start, stop = _check_rows(rows, n, where)
    mapped = _npy_mmap(path)
    features = np.array(mapped[start:stop])  # copies just these rows out of the memory map
    del mapped
    return _with_columns(features, labels_col, ids_col, groups_col, start, stop)


def _with_columns(features: Any, labels_col: Any, ids_col: Any, groups_col: Any, start: int, stop: int) -> SourceData:
    """Rows ``start:stop`` of an ``npy`` / ``sparse_npz`` source's labels, ids and groups files."""
    return SourceData(
        features=features,
        labels=labels_col.read(start, stop),
        row_ids=None if ids_col is None else ids_col.read(start, stop),
        groups=None if groups_col is None else groups_col.read(start, stop),
        groups_name=None if groups_col is None else groups_col.path.stem,
    )


def _groups_npy(opts: dict[str, Any], base_dir: Path, where: str) -> list | None:
    if opts["groups_path"] is None:
        return None
    path = _resolve(opts, "path", base_dir, where)
    shape, dtype = _npy_header(path)  # type: ignore[arg-type]
    _check_features_meta(shape, dtype, str(path))
    groups = _aux_columns(opts, base_dir, where, int(shape[0]), str(path))[2]
    assert groups is not None
    return groups.read(0, groups.length)


# --------------------------------------------------------------------------------------------------------
# sparse_npz


def _sparse_shape(path: Path) -> tuple[int, ...]:
    with open_npz(path) as archive:
        if "shape" not in archive.files or "format" not in archive.files:
            raise ValidationError(
                f"{path} is not a scipy.sparse .npz (keys: {_listing(archive.files)})"
            )
        return tuple(int(v) for v in _npz_array(archive, "shape", path).tolist())


def _count_sparse_npz(opts: dict[str, Any], base_dir: Path, where: str) -> int:
    path = _resolve(opts, "path", base_dir, where)
    _resolve(opts, "labels_path", base_dir, where)
    _resolve(opts, "ids_path", base_dir, where)
    shape = _sparse_shape(path)  # type: ignore[arg-type]
    if len(shape) != 2:
        raise ValidationError(f"features in {path} must be 2-D (rows x dims), got shape {shape}")
    return shape[0]


def _load_sparse_npz(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
    import scipy.sparse

    path = _resolve(opts, "path", base_dir, where)
    assert path is not None
    _sparse_shape(path)  # clear error for a non-sparse archive
    try:
        matrix = scipy.sparse.load_npz(path)
    except (ValueError, OSError, EOFError, KeyError) as exc:
        raise ValidationError(f"{path} is not a readable scipy.sparse .npz: {exc}") from None
    _check_features_meta(matrix.shape, matrix.dtype, str(path))
    matrix = matrix.tocsr()
    n = int(matrix.shape[0])
    labels_col, ids_col, groups_col = _aux_columns(opts, base_dir, where, n, str(path))
    start, stop = _check_rows(rows, n, where)
    if (start, stop) != (0, n):
        matrix = matrix[start:stop].tocsr()
    return _with_columns(matrix, labels_col, ids_col, groups_col, start, stop)


def _groups_sparse_npz(opts: dict[str, Any], base_dir: Path, where: str) -> list | None:
    if opts["groups_path"] is None:
        return None
    n = _count_sparse_npz(opts, base_dir, where)
    path = _resolve(opts, "path", base_dir, where)
    groups = _aux_columns(opts, base_dir, where, n, str(path))[2]
    assert groups is not None
    return groups.read(0, groups.length)


# --------------------------------------------------------------------------------------------------------
# hdf5


def _open_h5(path: Path) -> Any:
    import h5py

    try:
        return h5py.File(path, "r")
    except OSError as exc:
        raise ValidationError(f"{path} is not a readable HDF5 file: {exc}") from None


def _h5_datasets(handle: Any) -> list[str]:
    import h5py

    names: list[str] = []

    def visit(name: str, obj: Any) -> None:
        if isinstance(obj, h5py.Dataset):
            names.append(name)

    handle.visititems(visit)
    return names


def _h5_require(handle: Any, opts: Mapping[str, Any], key: str, path: Path, where: str) -> Any:
    import h5py

    name = opts[key]
    if name is None:
        return None
    try:
        obj = handle.get(name)
    except (KeyError, ValueError):
        obj = None
    if not isinstance(obj, h5py.Dataset):
        raise ConfigError(
            f"{_key(where, key)}: dataset {name!r} not found in {path}; "
            f"available datasets: {_listing(_h5_datasets(handle))}"
        )
    return obj


def _h5_aux_meta(ds: Any, kinds: str, role: str, what: str) -> None:
    import h5py

    dtype = ds.dtype
    if dtype.kind == "O" and h5py.check_string_dtype(dtype) is not None and "S" in kinds:
        dtype = np.dtype("S1")  # variable-length strings: decoded on read
    _check_aux_meta(ds.shape, dtype, kinds, role, what)


def _h5_checked(handle: Any, opts: Mapping[str, Any], path: Path, where: str):
    """``(features, labels, ids, what, rows)``; features None for a labels-only file (``h5_labels_only``)."""
    lds = _h5_require(handle, opts, "labels_dataset", path, where)
    ids = _h5_require(handle, opts, "ids_dataset", path, where)
    if h5_labels_only(handle, opts, path) is not None:
        return None, lds, ids, f"{path}[{lds.name!r}]", int(lds.shape[0]) if lds.shape else 0
    fds = _h5_require(handle, opts, "features_dataset", path, where)
    fwhat = f"{path}[{fds.name!r}]"
    _check_features_meta(fds.shape, fds.dtype, fwhat)
    return fds, lds, ids, fwhat, int(fds.shape[0])


def h5_labels_only(handle: Any, opts: Mapping[str, Any], path: Path) -> str | None:
    """Why the HDF5 file is a labels-only table (no dataset of the default ``features_dataset``, embeddings), or
    None; a features dataset declared otherwise must be there."""
    if opts["features_dataset"] != "embeddings":
        return None
    try:
        handle[opts["features_dataset"]]
        return None
    except (KeyError, ValueError):
        return (f"{path} has no features dataset {opts['features_dataset']!r} (datasets: "
                f"{_listing(_h5_datasets(handle))})")


def _h5_groups(handle: Any, opts: Mapping[str, Any], path: Path, where: str, n: int, fwhat: str):
    """``(dataset, what)`` of the declared ``groups_dataset`` (checked: 1-D integers or text, one per row), or None."""
    gds = _h5_require(handle, opts, "groups_dataset", path, where)
    if gds is None:
        return None
    gwhat = f"{path}[{gds.name!r}]"
    _h5_aux_meta(gds, _GROUP_KINDS, "groups", gwhat)
    _check_length(gds.shape[0], n, "groups", gwhat, fwhat)
    return gds, gwhat


def _groups_hdf5(opts: dict[str, Any], base_dir: Path, where: str) -> list | None:
    path = _resolve(opts, "path", base_dir, where)
    assert path is not None
    with _open_h5(path) as handle:
        _, _, _, fwhat, n = _h5_checked(handle, opts, path, where)
        groups = _h5_groups(handle, opts, path, where, n, fwhat)
        return None if groups is None else _values_from_array(np.asarray(groups[0][:]), _GROUP_KINDS, "groups", groups[1])


def _count_hdf5(opts: dict[str, Any], base_dir: Path, where: str) -> int:
    path = _resolve(opts, "path", base_dir, where)
    with _open_h5(path) as handle:  # type: ignore[arg-type]
        return _h5_checked(handle, opts, path, where)[4]  # type: ignore[arg-type]


def _load_hdf5(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
    path = _resolve(opts, "path", base_dir, where)
    assert path is not None
    with _open_h5(path) as handle:
        fds, lds, ids, fwhat, n = _h5_checked(handle, opts, path, where)
        lwhat = f"{path}[{lds.name!r}]"
        _h5_aux_meta(lds, _LABEL_KINDS, "labels", lwhat)
        _check_length(lds.shape[0], n, "labels", lwhat, fwhat)
        if ids is not None:
            iwhat = f"{path}[{ids.name!r}]"
            _h5_aux_meta(ids, _ID_KINDS, "ids", iwhat)
            _check_length(ids.shape[0], n, "ids", iwhat, fwhat)
        groups = _h5_groups(handle, opts, path, where, n, fwhat)
        start, stop = _check_rows(rows, n, where)
        labels_only = None if fds is not None else h5_labels_only(handle, opts, path)
        features = labels_only_rows(stop - start) if fds is None else np.asarray(fds[start:stop])  # only those rows
        labels = _values_from_array(np.asarray(lds[start:stop]), _LABEL_KINDS, "labels", lwhat, start)
        row_ids = None
        if ids is not None:
            row_ids = _values_from_array(np.asarray(ids[start:stop]), _ID_KINDS, "ids", iwhat, start)
        group_values = None
        if groups is not None:
            group_values = _values_from_array(np.asarray(groups[0][start:stop]), _GROUP_KINDS, "groups", groups[1], start)
    return SourceData(features, labels, row_ids, group_values, None if groups is None else opts["groups_dataset"],
                      labels_only)
