"""Loaders for the data sources a run configuration declares.

A source declaration is a plain dict with a ``type`` and type-specific keys (defaults shown)::

    {"type": "sklearn", "name": "digits"}            # or iris, wine, breast_cancer
    {"type": "npz", "path": ..., "features_key": "embeddings", "labels_key": "labels", "ids_key": None}
    {"type": "npy", "path": ..., "labels_path": ..., "ids_path": None}
    {"type": "sparse_npz", "path": ..., "labels_path": ..., "ids_path": None}
    {"type": "hdf5", "path": ..., "features_dataset": "embeddings", "labels_dataset": "labels",
     "ids_dataset": None}
    {"type": "csv", "path": ..., "label_column": "label", "id_column": None, "feature_columns": None,
     "label_dtype": "str"}
    {"type": "manifest", "path": ..., "text_column": None, "image_column": None, "label_column": "label",
     "id_column": None, "label_dtype": "str", "format": None}      # raw inputs, see manifest.py

Relative paths resolve against ``base_dir``; nothing ever scans a directory. For ``npy`` and ``sparse_npz``
the labels and ids files are either ``.npy`` arrays or, for any other suffix, UTF-8 text with one value per
line (kept verbatim as ``str``; a trailing newline is fine, a blank line is an error naming its number).

Declaration problems (unknown type or key, missing file, missing npz key / HDF5 dataset / CSV column) raise
:class:`ConfigError` whose message starts with the key path (``where`` + ``.key``); data problems (shapes,
dtypes, lengths, unparsable cells, rows out of range) raise :class:`ValidationError` naming the file.

``load_source(..., rows=(start, stop))`` returns only those rows; ``npy`` (memory map) and ``hdf5`` read
only the requested feature rows from disk, the other formats load the file and slice.
"""

from __future__ import annotations

import csv
import operator
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vertebrae.core.errors import ConfigError, ValidationError

__all__ = [
    "SKLEARN_DATASETS",
    "SOURCE_TYPES",
    "SourceData",
    "load_source",
    "source_row_count",
]

#: Bundled scikit-learn datasets a ``{"type": "sklearn"}`` source may name.
SKLEARN_DATASETS: tuple[str, ...] = ("breast_cancer", "diabetes", "digits", "iris", "wine")

_REQUIRED = object()

# Allowed keys per source type (besides "type") and their defaults; _REQUIRED marks mandatory keys.
_SPECS: dict[str, dict[str, Any]] = {
    "sklearn": {"name": _REQUIRED},
    "npz": {"path": _REQUIRED, "features_key": "embeddings", "labels_key": "labels", "ids_key": None},
    "npy": {"path": _REQUIRED, "labels_path": _REQUIRED, "ids_path": None},
    "sparse_npz": {"path": _REQUIRED, "labels_path": _REQUIRED, "ids_path": None},
    "hdf5": {
        "path": _REQUIRED,
        "features_dataset": "embeddings",
        "labels_dataset": "labels",
        "ids_dataset": None,
    },
    "csv": {
        "path": _REQUIRED,
        "label_column": "label",
        "id_column": None,
        "feature_columns": None,
        "label_dtype": "str",
    },
    "manifest": {
        "path": _REQUIRED,
        "text_column": None,
        "image_column": None,
        "label_column": "label",
        "id_column": None,
        "label_dtype": "str",
        "format": None,
    },
}

#: Source types a declaration may use.
SOURCE_TYPES: tuple[str, ...] = tuple(sorted(_SPECS))

_PATH_KEYS = frozenset({"path", "labels_path", "ids_path"})
_FEATURE_KINDS = "iuf"  # numeric feature dtypes: signed/unsigned integers and floats
_LABEL_KINDS = "biufUS"  # bool, numbers, text
_ID_KINDS = "iuUS"  # integers and text
_MAX_LISTED = 50  # cap on names listed in "available ..." messages


@dataclass(frozen=True)
class SourceData:
    """Rows of one source: ``features`` (2-D numeric ndarray or scipy.sparse CSR; RawInputs for a manifest),
    ``labels`` (one Python scalar per row), ``row_ids`` (one str/int per row, or None when the source declares
    no ids)."""

    features: Any
    labels: list
    row_ids: list | None = None

    @property
    def n_rows(self) -> int:
        return int(self.features.shape[0])


# --------------------------------------------------------------------------------------------------------
# public API


def source_row_count(decl: Mapping[str, Any], *, base_dir: Path, where: str) -> int:
    """Number of rows the declared source holds, read cheaply (array headers, dataset shapes, CSV records).

    Validates the declaration, that its files exist and that the features are 2-D and numeric; label and
    id lengths are checked by :func:`load_source`. ``sklearn`` sources are loaded to count them.
    """
    kind, opts = _parse_decl(decl, where)
    return _COUNTERS[kind](opts, Path(base_dir), where)


def load_source(
    decl: Mapping[str, Any],
    *,
    base_dir: Path,
    where: str,
    rows: tuple[int, int] | None = None,
) -> SourceData:
    """Load the declared source, or only ``rows=(start, stop)`` of it (labels and ids sliced alike).

    ``0 <= start <= stop <= row count`` must hold, else ValidationError.
    """
    kind, opts = _parse_decl(decl, where)
    return _LOADERS[kind](opts, Path(base_dir), where, rows)


# --------------------------------------------------------------------------------------------------------
# declaration checks


def _key(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _label(where: str) -> str:
    return where or "source"


def _listing(names: Sequence[str]) -> str:
    names = list(names)
    if not names:
        return "(none)"
    shown = ", ".join(repr(n) for n in names[:_MAX_LISTED])
    if len(names) > _MAX_LISTED:
        shown += f", ... ({len(names) - _MAX_LISTED} more)"
    return shown


def _parse_decl(decl: Any, where: str) -> tuple[str, dict[str, Any]]:
    if not isinstance(decl, Mapping):
        raise ConfigError(f"{_label(where)}: a source declaration must be a mapping, got {type(decl).__name__}")
    if "type" not in decl:
        raise ConfigError(f"{_key(where, 'type')}: missing; allowed types: {', '.join(SOURCE_TYPES)}")
    kind = decl["type"]
    if not isinstance(kind, str) or kind not in _SPECS:
        raise ConfigError(
            f"{_key(where, 'type')}: unknown source type {kind!r}; allowed types: {', '.join(SOURCE_TYPES)}"
        )
    spec = _SPECS[kind]
    for key in decl:
        if key != "type" and key not in spec:
            raise ConfigError(
                f"{_key(where, str(key))}: unknown key for a {kind!r} source; allowed keys: "
                f"{', '.join(['type', *spec])}"
            )
    opts: dict[str, Any] = {}
    for key, default in spec.items():
        value = decl.get(key, None if default is _REQUIRED else default)
        if value is None and default is not None:
            if default is _REQUIRED:
                raise ConfigError(f"{_key(where, key)}: required for a {kind!r} source")
            raise ConfigError(f"{_key(where, key)}: must not be null (default {default!r})")
        if value is not None:
            if key in _PATH_KEYS:
                if isinstance(value, os.PathLike):
                    value = os.fspath(value)
                if not isinstance(value, str) or not value:
                    raise ConfigError(f"{_key(where, key)}: must be a non-empty path string, got {value!r}")
            elif key == "feature_columns":
                value = _check_feature_columns(value, where)
            elif not isinstance(value, str) or not value:
                raise ConfigError(f"{_key(where, key)}: must be a non-empty string, got {value!r}")
        opts[key] = value
    if kind == "sklearn" and opts["name"] not in SKLEARN_DATASETS:
        raise ConfigError(
            f"{_key(where, 'name')}: unknown sklearn dataset {opts['name']!r}; "
            f"allowed: {', '.join(SKLEARN_DATASETS)}"
        )
    if kind == "csv":
        if opts["label_dtype"] not in ("str", "int"):
            raise ConfigError(f"{_key(where, 'label_dtype')}: must be 'str' or 'int', got {opts['label_dtype']!r}")
        if opts["id_column"] is not None and opts["id_column"] == opts["label_column"]:
            raise ConfigError(
                f"{_key(where, 'id_column')}: {opts['id_column']!r} is also the label column"
            )
    return kind, opts


def _check_feature_columns(value: Any, where: str) -> list[str]:
    key = _key(where, "feature_columns")
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ConfigError(f"{key}: must be a list of column names, got {value!r}")
    if not value:
        raise ConfigError(f"{key}: must name at least one column")
    seen: set[str] = set()
    for i, name in enumerate(value):
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{key}[{i}]: must be a non-empty column name, got {name!r}")
        if name in seen:
            raise ConfigError(f"{key}[{i}]: column {name!r} listed twice")
        seen.add(name)
    return list(value)


def _resolve(opts: Mapping[str, Any], key: str, base_dir: Path, where: str) -> Path | None:
    raw = opts[key]
    if raw is None:
        return None
    path = Path(raw)
    if not path.is_absolute():
        path = base_dir / path
    if not path.exists():
        raise ConfigError(f"{_key(where, key)}: file not found: {path}")
    if not path.is_file():
        raise ConfigError(f"{_key(where, key)}: not a file: {path}")
    return path


def _parse_rows(rows: Any, where: str) -> tuple[int, int] | None:
    if rows is None:
        return None
    try:
        start, stop = rows
        if isinstance(start, bool) or isinstance(stop, bool):
            raise TypeError
        return operator.index(start), operator.index(stop)
    except (TypeError, ValueError):
        raise ValidationError(
            f"{_label(where)}: rows must be a (start, stop) pair of integers, got {rows!r}"
        ) from None


def _check_rows(rows: Any, n: int, where: str) -> tuple[int, int]:
    parsed = _parse_rows(rows, where)
    if parsed is None:
        return 0, n
    start, stop = parsed
    if not 0 <= start <= stop <= n:
        raise ValidationError(
            f"{_label(where)}: rows=({start}, {stop}) out of range for a source of {n} rows "
            f"(need 0 <= start <= stop <= {n})"
        )
    return start, stop


# --------------------------------------------------------------------------------------------------------
# shared data checks and conversions


def _check_features_meta(shape: tuple[int, ...], dtype: np.dtype, what: str) -> None:
    if len(shape) != 2:
        raise ValidationError(f"features in {what} must be 2-D (rows x dims), got shape {tuple(shape)}")
    if dtype.kind not in _FEATURE_KINDS:
        raise ValidationError(f"features in {what} must be numeric, got dtype {dtype}")
    if shape[1] == 0:
        raise ValidationError(f"features in {what} have no columns (shape {tuple(shape)})")


def _check_length(length: int, n: int, role: str, what: str, features_what: str) -> None:
    if length != n:
        raise ValidationError(
            f"{role} in {what} have {length} entries but the features in {features_what} have {n} rows"
        )


def _decode(value: Any, what: str, row: int) -> str:
    if isinstance(value, str):
        return value
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        raise ValidationError(f"{what}: row {row} is not valid UTF-8: {value!r}") from None


def _values_from_array(arr: np.ndarray, kinds: str, role: str, what: str, offset: int = 0) -> list:
    """Python scalars from a 1-D array slice (``offset`` = row index of its first item, for messages).

    Labels may also be a 2-D numeric array (a multi-label 0/1 indicator or a multi-output regression target),
    returned as the array itself.
    """
    if arr.ndim == 2 and role == "labels" and arr.dtype.kind in "biuf":
        return np.asarray(arr)
    if arr.ndim != 1:
        raise ValidationError(f"{role} in {what} must be 1-D, got shape {arr.shape}")
    kind = arr.dtype.kind
    if kind == "S" and "S" in kinds:
        return [_decode(v, what, offset + i) for i, v in enumerate(arr.tolist())]
    if kind == "O":  # h5py variable-length strings only (pickled objects are never loaded)
        return [_decode(v, what, offset + i) for i, v in enumerate(arr.tolist())]
    if kind in kinds:
        return arr.tolist()
    raise ValidationError(f"{role} in {what} have unsupported dtype {arr.dtype}")


def _check_aux_meta(shape: tuple[int, ...], dtype: np.dtype, kinds: str, role: str, what: str) -> None:
    if len(shape) == 2 and role == "labels" and dtype.kind in "biuf":
        return
    if len(shape) != 1:
        raise ValidationError(f"{role} in {what} must be 1-D, got shape {tuple(shape)}")
    if dtype.kind not in kinds:
        raise ValidationError(f"{role} in {what} have unsupported dtype {dtype}")


def _read_npy_header(fh: Any, what: str) -> tuple[tuple[int, ...], np.dtype]:
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fh)
        if version == (1, 0):
            shape, _fortran, dtype = fmt.read_array_header_1_0(fh)
        else:
            shape, _fortran, dtype = fmt.read_array_header_2_0(fh)
    except (ValueError, OSError, EOFError) as exc:
        raise ValidationError(f"{what} is not a readable .npy array: {exc}") from None
    return tuple(shape), np.dtype(dtype)


def _npy_header(path: Path) -> tuple[tuple[int, ...], np.dtype]:
    with open(path, "rb") as fh:
        return _read_npy_header(fh, str(path))


def _npy_mmap(path: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise ValidationError(f"{path} is not a readable .npy array: {exc}") from None


def _read_text_lines(path: Path, role: str) -> list[str]:
    try:
        with open(path, encoding="utf-8-sig", newline=None) as fh:
            text = fh.read()
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{role} file {path} is not UTF-8 text: {exc}") from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # trailing newline (or empty file)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            raise ValidationError(f"{role} file {path}: line {number} is blank")
    return lines


class _Column:
    """A labels or ids file (``.npy`` or one-value-per-line text) with its length known up front."""

    def __init__(self, path: Path, role: str, kinds: str) -> None:
        self.path, self.role, self.kinds = path, role, kinds
        self.what = str(path)
        if path.suffix.lower() == ".npy":
            shape, dtype = _npy_header(path)
            _check_aux_meta(shape, dtype, kinds, role, self.what)
            self._array: np.ndarray | None = _npy_mmap(path)
            self._lines: list[str] | None = None
            self.length = int(shape[0])
        else:
            self._array = None
            self._lines = _read_text_lines(path, role)
            self.length = len(self._lines)

    def read(self, start: int, stop: int) -> list:
        if self._lines is not None:
            return self._lines[start:stop]
        assert self._array is not None
        return _values_from_array(np.asarray(self._array[start:stop]), self.kinds, self.role, self.what, start)


def _aux_columns(
    opts: Mapping[str, Any], base_dir: Path, where: str, n: int, features_what: str
) -> tuple[_Column, _Column | None]:
    labels = _Column(_resolve(opts, "labels_path", base_dir, where), "labels", _LABEL_KINDS)  # type: ignore[arg-type]
    _check_length(labels.length, n, "labels", labels.what, features_what)
    ids_path = _resolve(opts, "ids_path", base_dir, where)
    ids = None
    if ids_path is not None:
        ids = _Column(ids_path, "ids", _ID_KINDS)
        _check_length(ids.length, n, "ids", ids.what, features_what)
    return labels, ids


# --------------------------------------------------------------------------------------------------------
# sklearn


def _load_sklearn_bunch(name: str) -> tuple[np.ndarray, list]:
    from sklearn import datasets

    bunch = getattr(datasets, f"load_{name}")()
    features = np.ascontiguousarray(bunch.data, dtype=np.float64)
    target = np.asarray(bunch.target)
    # diabetes has a continuous target (regression); the others have integer classes
    labels = target.astype(np.float64).tolist() if target.dtype.kind == "f" else [int(v) for v in target.tolist()]
    return features, labels


def _count_sklearn(opts: dict[str, Any], base_dir: Path, where: str) -> int:
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


def _open_npz(path: Path) -> Any:
    try:
        archive = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise ValidationError(f"{path} is not a readable .npz archive: {exc}") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValidationError(f"{path} is not an .npz archive (it holds a single array)")
    return archive


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
    fkey = _npz_require(archive, opts, "features_key", path, where)
    lkey = _npz_require(archive, opts, "labels_key", path, where)
    ikey = _npz_require(archive, opts, "ids_key", path, where)
    shape, dtype = _npz_member_header(archive, fkey, path)  # type: ignore[arg-type]
    _check_features_meta(shape, dtype, f"{path}[{fkey!r}]")
    return fkey, lkey, ikey, int(shape[0])


def _count_npz(opts: dict[str, Any], base_dir: Path, where: str) -> int:
    path = _resolve(opts, "path", base_dir, where)
    with _open_npz(path) as archive:  # type: ignore[arg-type]
        return _npz_checked_names(archive, opts, path, where)[3]  # type: ignore[arg-type]


def _npz_array(archive: Any, name: str, path: Path) -> np.ndarray:
    try:
        return archive[name]
    except (ValueError, OSError, EOFError) as exc:
        raise ValidationError(f"{path}[{name!r}] is not a readable array: {exc}") from None


def _load_npz(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
    path = _resolve(opts, "path", base_dir, where)
    assert path is not None
    with _open_npz(path) as archive:
        fkey, lkey, ikey, n = _npz_checked_names(archive, opts, path, where)
        fwhat = f"{path}[{fkey!r}]"
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
        start, stop = _check_rows(rows, n, where)
        features = _npz_array(archive, fkey, path)
    if (start, stop) != (0, n):
        features = features[start:stop].copy()
    labels = _values_from_array(labels_arr[start:stop], _LABEL_KINDS, "labels", lwhat, start)
    row_ids = None
    if ids_arr is not None:
        row_ids = _values_from_array(ids_arr[start:stop], _ID_KINDS, "ids", iwhat, start)
    return SourceData(features=features, labels=labels, row_ids=row_ids)


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
    labels_col, ids_col = _aux_columns(opts, base_dir, where, n, str(path))
    start, stop = _check_rows(rows, n, where)
    mapped = _npy_mmap(path)
    features = np.array(mapped[start:stop])  # copies just these rows out of the memory map
    del mapped
    return SourceData(
        features=features,
        labels=labels_col.read(start, stop),
        row_ids=None if ids_col is None else ids_col.read(start, stop),
    )


# --------------------------------------------------------------------------------------------------------
# sparse_npz


def _sparse_shape(path: Path) -> tuple[int, ...]:
    with _open_npz(path) as archive:
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
    labels_col, ids_col = _aux_columns(opts, base_dir, where, n, str(path))
    start, stop = _check_rows(rows, n, where)
    if (start, stop) != (0, n):
        matrix = matrix[start:stop].tocsr()
    return SourceData(
        features=matrix,
        labels=labels_col.read(start, stop),
        row_ids=None if ids_col is None else ids_col.read(start, stop),
    )


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
    fds = _h5_require(handle, opts, "features_dataset", path, where)
    lds = _h5_require(handle, opts, "labels_dataset", path, where)
    ids = _h5_require(handle, opts, "ids_dataset", path, where)
    fwhat = f"{path}[{fds.name!r}]"
    _check_features_meta(fds.shape, fds.dtype, fwhat)
    return fds, lds, ids, fwhat, int(fds.shape[0])


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
        start, stop = _check_rows(rows, n, where)
        features = np.asarray(fds[start:stop])  # h5py reads only the selected rows
        labels = _values_from_array(np.asarray(lds[start:stop]), _LABEL_KINDS, "labels", lwhat, start)
        row_ids = None
        if ids is not None:
            row_ids = _values_from_array(np.asarray(ids[start:stop]), _ID_KINDS, "ids", iwhat, start)
    return SourceData(features=features, labels=labels, row_ids=row_ids)


# --------------------------------------------------------------------------------------------------------
# csv


def _csv_columns(header: list[str] | None, opts: Mapping[str, Any], path: Path, where: str) -> list[str]:
    """Validate the header against the declaration; return the feature columns in order."""
    if not header:
        raise ValidationError(f"CSV file {path} is empty (no header line)")
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise ValidationError(f"CSV file {path}: column {name!r} appears twice in the header")
        seen.add(name)
    available = _listing(header)
    for key in ("label_column", "id_column"):
        name = opts[key]
        if name is not None and name not in seen:
            raise ConfigError(
                f"{_key(where, key)}: column {name!r} not found in {path}; available columns: {available}"
            )
    reserved = {opts["label_column"], opts["id_column"]}
    declared = opts["feature_columns"]
    if declared is None:
        features = [name for name in header if name not in reserved]
        if not features:
            raise ValidationError(f"CSV file {path} has no feature columns besides the label/id columns")
        return features
    for i, name in enumerate(declared):
        if name not in seen:
            raise ConfigError(
                f"{_key(where, 'feature_columns')}[{i}]: column {name!r} not found in {path}; "
                f"available columns: {available}"
            )
        if name in reserved:
            raise ConfigError(
                f"{_key(where, 'feature_columns')}[{i}]: column {name!r} is the label or id column"
            )
    return list(declared)


def _count_csv(opts: dict[str, Any], base_dir: Path, where: str) -> int:
    path = _resolve(opts, "path", base_dir, where)
    assert path is not None
    count = 0
    reader: Any = None
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            _csv_columns(next(reader, None), opts, path, where)
            for record in reader:
                if record:  # csv.DictReader skips blank lines too
                    count += 1
    except UnicodeDecodeError as exc:
        raise ValidationError(f"CSV file {path} is not UTF-8 text: {exc}") from None
    except csv.Error as exc:
        line = reader.line_num if reader is not None else 0
        raise ValidationError(f"CSV file {path}, line {line}: {exc}") from None
    return count


def _load_csv(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
    path = _resolve(opts, "path", base_dir, where)
    assert path is not None
    parsed = _parse_rows(rows, where)  # the range is checked once the records are counted
    start, stop = parsed if parsed is not None else (0, 0)
    label_col, id_col = opts["label_column"], opts["id_column"]
    as_int = opts["label_dtype"] == "int"
    values: list[list[float]] = []
    labels: list = []
    row_ids: list | None = None if id_col is None else []
    n = 0
    reader: Any = None
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            feature_cols = _csv_columns(reader.fieldnames, opts, path, where)
            width = len(reader.fieldnames or [])
            for record in reader:
                line = reader.reader.line_num  # DictReader.line_num is stale after skipped blank lines
                index = n
                n += 1
                if None in record:
                    raise ValidationError(
                        f"CSV file {path}, line {line}: {width + len(record[None])} fields, header has {width}"
                    )
                if parsed is not None and not start <= index < stop:
                    continue
                row = []
                for col in feature_cols:
                    cell = record[col]
                    try:
                        row.append(float(cell))
                    except (TypeError, ValueError):
                        what = "missing value" if cell is None else f"not a number: {cell!r}"
                        raise ValidationError(f"CSV file {path}, line {line}, column {col!r}: {what}") from None
                values.append(row)
                label = record[label_col]
                if not label:
                    raise ValidationError(f"CSV file {path}, line {line}, column {label_col!r}: empty label")
                if as_int:
                    try:
                        label = int(label)
                    except ValueError:
                        raise ValidationError(
                            f"CSV file {path}, line {line}, column {label_col!r}: not an integer label: {label!r}"
                        ) from None
                labels.append(label)
                if row_ids is not None:
                    rid = record[id_col]
                    if not rid:
                        raise ValidationError(f"CSV file {path}, line {line}, column {id_col!r}: empty id")
                    row_ids.append(rid)
    except UnicodeDecodeError as exc:
        raise ValidationError(f"CSV file {path} is not UTF-8 text: {exc}") from None
    except csv.Error as exc:
        line = reader.reader.line_num if reader is not None else 0
        raise ValidationError(f"CSV file {path}, line {line}: {exc}") from None
    _check_rows(rows, n, where)
    features = np.array(values, dtype=np.float64).reshape(len(values), len(feature_cols))
    return SourceData(features=features, labels=labels, row_ids=row_ids)


# --------------------------------------------------------------------------------------------------------
# manifest (raw texts or image paths; see vertebrae.data.manifest)


def _manifest_spec(opts: dict[str, Any], base_dir: Path, where: str) -> Any:
    from vertebrae.data.manifest import ManifestSpec

    return ManifestSpec.from_decl(opts, base_dir=base_dir, where=where)


def _count_manifest(opts: dict[str, Any], base_dir: Path, where: str) -> int:
    from vertebrae.data.manifest import manifest_row_count

    return manifest_row_count(_manifest_spec(opts, base_dir, where))


def _load_manifest(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
    from vertebrae.data.manifest import read_manifest

    data = read_manifest(_manifest_spec(opts, base_dir, where), _parse_rows(rows, where))
    return SourceData(features=data.inputs, labels=data.labels, row_ids=data.row_ids)


_COUNTERS: dict[str, Callable[[dict[str, Any], Path, str], int]] = {
    "sklearn": _count_sklearn,
    "npz": _count_npz,
    "npy": _count_npy,
    "sparse_npz": _count_sparse_npz,
    "hdf5": _count_hdf5,
    "csv": _count_csv,
    "manifest": _count_manifest,
}

_LOADERS: dict[str, Callable[[dict[str, Any], Path, str, Any], SourceData]] = {
    "sklearn": _load_sklearn,
    "npz": _load_npz,
    "npy": _load_npy,
    "sparse_npz": _load_sparse_npz,
    "hdf5": _load_hdf5,
    "csv": _load_csv,
    "manifest": _load_manifest,
}
