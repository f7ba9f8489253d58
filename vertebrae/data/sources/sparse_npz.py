"""``{"type": "sparse_npz", "path": ..., "labels_path": ..., "ids_path": None, "groups_path": None}``: a
``scipy.sparse.save_npz`` matrix (scipy imported only when one is loaded) with labels, ids and groups files as for
``npy``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vertebrae.core.errors import ValidationError
from vertebrae.data.sources.checks import READ_ERRORS, SourceData, _aux_columns, _check_features_meta, open_npz
from vertebrae.data.sources.keys import _REQUIRED, SourceFormat, _check_rows, _listing, _resolve
from vertebrae.data.sources.npy import _with_columns
from vertebrae.data.sources.npz import _npz_array


def _sparse_shape(path: Path) -> tuple[int, ...]:
    with open_npz(path) as archive:
        if "shape" not in archive.files or "format" not in archive.files:
            raise ValidationError(
                f"{path} is not a scipy.sparse .npz (keys: {_listing(archive.files)})"
            )
        return tuple(int(v) for v in _npz_array(archive, "shape", path).tolist())


def _count(opts: dict[str, Any], base_dir: Path, where: str) -> int:
    path = _resolve(opts, "path", base_dir, where)
    _resolve(opts, "labels_path", base_dir, where)
    _resolve(opts, "ids_path", base_dir, where)
    shape = _sparse_shape(path)  # type: ignore[arg-type]
    if len(shape) != 2:
        raise ValidationError(f"features in {path} must be 2-D (rows x dims), got shape {shape}")
    return shape[0]


def _load(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
    import scipy.sparse

    path = _resolve(opts, "path", base_dir, where)
    assert path is not None
    _sparse_shape(path)  # clear error for a non-sparse archive
    try:
        matrix = scipy.sparse.load_npz(path)
    except (*READ_ERRORS, KeyError) as exc:
        raise ValidationError(f"{path} is not a readable scipy.sparse .npz: {exc}") from None
    _check_features_meta(matrix.shape, matrix.dtype, str(path))
    matrix = matrix.tocsr()
    n = int(matrix.shape[0])
    labels_col, ids_col, groups_col = _aux_columns(opts, base_dir, where, n, str(path))
    start, stop = _check_rows(rows, n, where)
    if (start, stop) != (0, n):
        matrix = matrix[start:stop].tocsr()
    return _with_columns(matrix, labels_col, ids_col, groups_col, start, stop)


def _groups(opts: dict[str, Any], base_dir: Path, where: str) -> list | None:
    if opts["groups_path"] is None:
        return None
    n = _count(opts, base_dir, where)
    path = _resolve(opts, "path", base_dir, where)
    groups = _aux_columns(opts, base_dir, where, n, str(path))[2]
    assert groups is not None
    return groups.read(0, groups.length)


FORMAT = SourceFormat(
    keys={"path": _REQUIRED, "labels_path": _REQUIRED, "ids_path": None, "groups_path": None},
    count=_count, load=_load, groups_key="groups_path", groups=_groups,
)
