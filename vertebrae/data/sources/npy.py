"""``{"type": "npy", "path": ..., "labels_path": ..., "ids_path": None, "groups_path": None}``: a ``.npy`` matrix
(memory-mapped: only the requested rows are read) with labels, ids and groups files, each ``.npy`` or UTF-8 text with
one value per line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from vertebrae.data.sources.checks import SourceData, _aux_columns, _check_features_meta, _npy_header, _npy_mmap
from vertebrae.data.sources.keys import _REQUIRED, SourceFormat, _check_rows, _resolve


def _count(opts: dict[str, Any], base_dir: Path, where: str) -> int:
    path = _resolve(opts, "path", base_dir, where)
    _resolve(opts, "labels_path", base_dir, where)
    _resolve(opts, "ids_path", base_dir, where)
    shape, dtype = _npy_header(path)  # type: ignore[arg-type]
    _check_features_meta(shape, dtype, str(path))
    return int(shape[0])


def _load(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
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


def _groups(opts: dict[str, Any], base_dir: Path, where: str) -> list | None:
    if opts["groups_path"] is None:
        return None
    path = _resolve(opts, "path", base_dir, where)
    shape, dtype = _npy_header(path)  # type: ignore[arg-type]
    _check_features_meta(shape, dtype, str(path))
    groups = _aux_columns(opts, base_dir, where, int(shape[0]), str(path))[2]
    assert groups is not None
    return groups.read(0, groups.length)


FORMAT = SourceFormat(
    keys={"path": _REQUIRED, "labels_path": _REQUIRED, "ids_path": None, "groups_path": None},
    count=_count, load=_load, groups_key="groups_path", groups=_groups,
)
