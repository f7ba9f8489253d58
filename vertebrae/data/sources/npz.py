"""``{"type": "npz", "path": ..., "features_key": "embeddings", "labels_key": "labels", "ids_key": None,
"groups_key": None}``: a NumPy ``.npz`` archive of features, labels and optional row ids and groups (members read
from their headers to count; an archive without a member of the default features key is a labels-only table)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.data.sources.checks import (
    READ_ERRORS,
    _GROUP_KINDS,
    _ID_KINDS,
    _LABEL_KINDS,
    SourceData,
    _check_aux_meta,
    _check_features_meta,
    _check_length,
    _read_npy_header,
    _values_from_array,
    labels_only_rows,
    open_npz,
)
from vertebrae.data.sources.keys import _REQUIRED, SourceFormat, _check_rows, _key, _listing, _resolve


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
    try:
        fh = archive.zip.open(member)
    except READ_ERRORS as exc:  # a damaged member's local header
        raise ValidationError(f"{path}[{name!r}] is not a readable array (truncated or corrupt?): {exc}") from None
    with fh:
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


def _count(opts: dict[str, Any], base_dir: Path, where: str) -> int:
    path = _resolve(opts, "path", base_dir, where)
    with open_npz(path) as archive:  # type: ignore[arg-type]
        return _npz_checked_names(archive, opts, path, where)[3]  # type: ignore[arg-type]


def _npz_array(archive: Any, name: str, path: Path) -> np.ndarray:
    try:
        return archive[name]
    except READ_ERRORS as exc:  # a truncated member: zipfile.BadZipFile, EOFError or zlib.error
        raise ValidationError(f"{path}[{name!r}] is not a readable array (truncated or corrupt?): {exc}") from None


def _npz_groups(archive: Any, opts: Mapping[str, Any], path: Path, where: str, n: int, fwhat: str):
    """``(array, what)`` of the declared ``groups_key`` (checked: 1-D integers or text, one per row), or None."""
    gkey = _npz_require(archive, opts, "groups_key", path, where)
    if gkey is None:
        return None
    array, gwhat = _npz_array(archive, gkey, path), f"{path}[{gkey!r}]"
    _check_aux_meta(array.shape, array.dtype, _GROUP_KINDS, "groups", gwhat)
    _check_length(array.shape[0], n, "groups", gwhat, fwhat)
    return array, gwhat


def _groups(opts: dict[str, Any], base_dir: Path, where: str) -> list | None:
    path = _resolve(opts, "path", base_dir, where)
    assert path is not None
    with open_npz(path) as archive:
        fkey, _, _, n = _npz_checked_names(archive, opts, path, where)
        groups = _npz_groups(archive, opts, path, where, n, f"{path}[{fkey!r}]")
    return None if groups is None else _values_from_array(groups[0], _GROUP_KINDS, "groups", groups[1])


def _load(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
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


def _labels_only(opts: dict[str, Any], base_dir: Path, where: str) -> str | None:
    path = _resolve(opts, "path", base_dir, where)
    with open_npz(path) as archive:  # type: ignore[arg-type]
        return npz_labels_only(archive, opts, path)  # type: ignore[arg-type]


FORMAT = SourceFormat(
    keys={"path": _REQUIRED, "features_key": "embeddings", "labels_key": "labels", "ids_key": None, "groups_key": None},
    count=_count, load=_load, groups_key="groups_key", groups=_groups, labels_only=_labels_only,
)
