"""``{"type": "hdf5", "path": ..., "features_dataset": "embeddings", "labels_dataset": "labels", "ids_dataset":
None, "groups_dataset": None}``: an HDF5 file (h5py imported only when one is read; only the requested feature rows
are read from disk; a file without a dataset of the default features name is a labels-only table).

Every dataset read must be stored in the file itself (``h5_refuse_indirect``): the file is named by the SHA-256 of its
own bytes, so rows read from another file (an external link, a virtual dataset, raw data in external files) would
change unseen."""

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
    _check_aux_meta,
    _check_features_meta,
    _check_length,
    _values_from_array,
    labels_only_rows,
)
from vertebrae.data.sources.keys import _REQUIRED, SourceFormat, _check_rows, _key, _listing, _resolve


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


def h5_external_links(handle: Any) -> list[str]:
    """The names of the file's external links (to a dataset or a group of another file), none followed."""
    import h5py

    groups = [""]
    handle.visititems(lambda name, obj: groups.append(f"{name}/") if isinstance(obj, h5py.Group) else None)
    return [prefix + key for prefix in groups for key in (handle[prefix] if prefix else handle)
            if isinstance((handle[prefix] if prefix else handle).get(key, getlink=True), h5py.ExternalLink)]


def _h5_files(names: Any) -> str:
    return ", ".join(sorted({repr(str(name)) for name in names}))


def _h5_unseen(other: str, path: Path, name: str, link: str) -> str:
    return (f"vertebrae names the file by its own bytes, so an edit of {other} would go unnoticed; copy the rows into "
            f"a regular dataset of the file, e.g. with h5py: with h5py.File({str(path)!r}, 'r+') as f: "
            f"rows = f[{name!r}][()]; del f[{link!r}]; f.create_dataset({name!r}, data=rows)")


def h5_refuse_indirect(handle: Any, name: str, path: Path, what: str) -> None:
    """ValidationError naming ``what`` (the declaration key), ``path`` and dataset ``name`` when the dataset's rows are
    not stored in the file: it (or a group on its way) is an external link, it is a virtual dataset (rows mapped from
    other datasets), or its raw data lies in external files. Nothing when the name is not in the file."""
    import h5py

    parts = [part for part in name.split("/") if part]
    for i in range(len(parts)):
        link_name = "/".join(parts[:i + 1])
        try:
            link = handle.get(link_name, getlink=True)
        except (KeyError, ValueError):
            return
        if link is None:
            return
        if isinstance(link, h5py.ExternalLink):
            via = "" if i == len(parts) - 1 else f" (through the external link {link_name!r})"
            raise ValidationError(
                f"{what}: dataset {name!r} of {path} is an external link{via} to {link.path!r} in {link.filename!r}; "
                + _h5_unseen(repr(link.filename), path, name, link_name))
    try:
        obj = handle.get(name)
    except (KeyError, ValueError, OSError):
        return
    if not isinstance(obj, h5py.Dataset):
        return
    if obj.file != handle.file:  # a soft link leading through an external link
        raise ValidationError(f"{what}: dataset {name!r} of {path} is reached through a link to {obj.file.filename!r}; "
                              + _h5_unseen(repr(obj.file.filename), path, name, name))
    if obj.is_virtual:
        files = _h5_files(str(path) if src.file_name == "." else src.file_name for src in obj.virtual_sources())
        raise ValidationError(f"{what}: dataset {name!r} of {path} is an HDF5 virtual dataset mapping rows of {files}; "
                              + _h5_unseen("them", path, name, name))
    if obj.external:
        files = _h5_files(entry[0] for entry in obj.external)
        raise ValidationError(f"{what}: dataset {name!r} of {path} keeps its raw data in external file(s) {files}; "
                              + _h5_unseen("them", path, name, name))


def _h5_require(handle: Any, opts: Mapping[str, Any], key: str, path: Path, where: str) -> Any:
    import h5py

    name = opts[key]
    if name is None:
        return None
    h5_refuse_indirect(handle, name, path, _key(where, key))
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
    """``(features, labels, ids, what, rows)``; features None for a labels-only file (``h5_labels_only``). The groups
    dataset is checked to be stored in the file too, so that the row count at plan time refuses every dataset read."""
    if opts["groups_dataset"] is not None:
        h5_refuse_indirect(handle, opts["groups_dataset"], path, _key(where, "groups_dataset"))
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
    if handle.get(opts["features_dataset"], getlink=True) is not None:
        return None  # there, perhaps as a link to another file (refused by ``h5_refuse_indirect``)
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


def _groups(opts: dict[str, Any], base_dir: Path, where: str) -> list | None:
    path = _resolve(opts, "path", base_dir, where)
    assert path is not None
    with _open_h5(path) as handle:
        _, _, _, fwhat, n = _h5_checked(handle, opts, path, where)
        groups = _h5_groups(handle, opts, path, where, n, fwhat)
        return None if groups is None else _values_from_array(np.asarray(groups[0][:]), _GROUP_KINDS, "groups", groups[1])


def _count(opts: dict[str, Any], base_dir: Path, where: str) -> int:
    path = _resolve(opts, "path", base_dir, where)
    with _open_h5(path) as handle:  # type: ignore[arg-type]
        return _h5_checked(handle, opts, path, where)[4]  # type: ignore[arg-type]


def _load(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
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


def _labels_only(opts: dict[str, Any], base_dir: Path, where: str) -> str | None:
    path = _resolve(opts, "path", base_dir, where)
    with _open_h5(path) as handle:  # type: ignore[arg-type]
        return h5_labels_only(handle, opts, path)  # type: ignore[arg-type]


FORMAT = SourceFormat(
    keys={
        "path": _REQUIRED,
        "features_dataset": "embeddings",
        "labels_dataset": "labels",
        "ids_dataset": None,
        "groups_dataset": None,
    },
    count=_count, load=_load, groups_key="groups_dataset", groups=_groups, labels_only=_labels_only,
)
