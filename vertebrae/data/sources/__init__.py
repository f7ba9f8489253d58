"""Loaders for the data sources a run configuration declares.

A source declaration is a plain dict with a ``type`` and type-specific keys (defaults shown)::

    {"type": "sklearn", "name": "digits"}            # or iris, wine, breast_cancer
    {"type": "npz", "path": ..., "features_key": "embeddings", "labels_key": "labels", "ids_key": None,
     "groups_key": None}
    {"type": "npy", "path": ..., "labels_path": ..., "ids_path": None, "groups_path": None}
    {"type": "sparse_npz", "path": ..., "labels_path": ..., "ids_path": None, "groups_path": None}
    {"type": "hdf5", "path": ..., "features_dataset": "embeddings", "labels_dataset": "labels",
     "ids_dataset": None, "groups_dataset": None}
    {"type": "csv", "path": ..., "label_column": "label", "id_column": None, "feature_columns": None,
     "label_dtype": "str", "groups_column": None}
    {"type": "manifest", "path": ..., "text_column": None, "image_column": None, "label_column": "label",
     "id_column": None, "label_dtype": "str", "format": None, "groups_column": None}  # raw inputs, manifest.py
    {"type": "image_folder" | "hf_dataset" | "webdataset", ...}  # data as held; see source_formats.py

The ``groups_*`` key (``GROUPS_KEYS``) names each row's independence group (text or integer; a groups file like
the labels file for ``npy`` / ``sparse_npz``): ``SourceData.groups`` holds them, ``groups_name`` the declared
key, column or dataset (a groups file's stem), and :func:`source_groups` reads them without the features.

Relative paths resolve against ``base_dir``; nothing scans a directory but an ``image_folder`` or ``hf_dataset`` source. For ``npy`` and ``sparse_npz``
the labels and ids files are either ``.npy`` arrays or, for any other suffix, UTF-8 text with one value per
line (kept verbatim as ``str``; a trailing newline is fine, a blank line is an error naming its number).

Declaration problems (unknown type or key, missing file, missing npz key / HDF5 dataset / CSV column) raise
:class:`ConfigError` whose message starts with the key path (``where`` + ``.key``); data problems (shapes,
dtypes, lengths, unparsable cells, rows out of range) raise :class:`ValidationError` naming the file.

``load_source(..., rows=(start, stop))`` returns only those rows; ``npy`` (memory map) and ``hdf5`` read
only the requested feature rows from disk, the other formats load the file and slice.

The declaration checks live in :mod:`vertebrae.data.sources.declaration`, the loaders in
:mod:`vertebrae.data.sources.arrays` and :mod:`vertebrae.data.sources.tables`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ValidationError
from vertebrae.data.sources.arrays import (
    _count_hdf5,
    _count_npy,
    _count_npz,
    _count_sklearn,
    _count_sparse_npz,
    _groups_hdf5,
    _groups_npy,
    _groups_npz,
    _groups_sparse_npz,
    _load_hdf5,
    _load_npy,
    _load_npz,
    _load_sklearn,
    _load_sparse_npz,
)
from vertebrae.data.sources.checks import SourceData
from vertebrae.data.sources.formats import (
    _count_hf_dataset,
    _count_image_folder,
    _count_webdataset,
    _groups_hf_dataset,
    _labels_only_hf_dataset,
    _load_hf_dataset,
    _load_image_folder,
    _load_webdataset,
)
from vertebrae.data.sources.declaration import GROUPS_KEYS, SKLEARN_DATASETS, SOURCE_TYPES, _parse_decl
from vertebrae.data.sources.tables import (
    _count_csv,
    _count_manifest,
    _groups_csv,
    _groups_manifest,
    _load_csv,
    _load_manifest,
)

__all__ = [
    "GROUPS_KEYS",
    "SKLEARN_DATASETS",
    "SOURCE_TYPES",
    "SourceData",
    "load_source",
    "source_groups",
    "source_labels_only",
    "source_row_count",
]


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


def source_groups(decl: Mapping[str, Any], *, base_dir: Path, where: str) -> tuple[str, list] | None:
    """``(groups_name, groups)`` of every row of the declared source, read without its features (array sources)
    and checked like :func:`load_source` checks them; None when the source declares no groups."""
    kind, opts = _parse_decl(decl, where)
    key = GROUPS_KEYS.get(kind)
    if key is None or opts[key] is None:
        return None
    groups = _GROUP_READERS[kind](opts, Path(base_dir), where)
    assert groups is not None
    return (Path(opts[key]).stem if key == "groups_path" else opts[key]), groups


def source_labels_only(decl: Mapping[str, Any], *, base_dir: Path, where: str) -> str | None:
    """Why the declared table holds ids and labels but no features (a ``csv`` without feature columns, an ``npz`` /
    ``hdf5`` without a member or dataset named like its features key), or None. Such a source is valid when every
    candidate brings its own rows (precomputed files aligned by id); its ``features`` are a zero placeholder."""
    kind, opts = _parse_decl(decl, where)
    if kind not in _LABELS_ONLY:
        return None
    return _LABELS_ONLY[kind](opts, Path(base_dir), where)


def _csv_labels_only(opts: dict[str, Any], base_dir: Path, where: str) -> str | None:
    import csv

    from vertebrae.data.sources.declaration import _resolve
    from vertebrae.data.sources.tables import _csv_columns

    path = _resolve(opts, "path", base_dir, where)
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:  # type: ignore[arg-type]
            header = next(csv.reader(fh), None)
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ValidationError(f"CSV file {path}: cannot read its header: {exc}") from None
    if _csv_columns(header, opts, path, where):  # type: ignore[arg-type]
        return None
    return f"CSV file {path} has no feature columns besides the label/id/groups columns"


def _npz_labels_only(opts: dict[str, Any], base_dir: Path, where: str) -> str | None:
    from vertebrae.data.sources.arrays import npz_labels_only
    from vertebrae.data.sources.checks import open_npz
    from vertebrae.data.sources.declaration import _resolve

    path = _resolve(opts, "path", base_dir, where)
    with open_npz(path) as archive:  # type: ignore[arg-type]
        return npz_labels_only(archive, opts, path)  # type: ignore[arg-type]


def _hdf5_labels_only(opts: dict[str, Any], base_dir: Path, where: str) -> str | None:
    from vertebrae.data.sources.arrays import _open_h5, h5_labels_only
    from vertebrae.data.sources.declaration import _resolve

    path = _resolve(opts, "path", base_dir, where)
    with _open_h5(path) as handle:  # type: ignore[arg-type]
        return h5_labels_only(handle, opts, path)  # type: ignore[arg-type]


_LABELS_ONLY = {"csv": _csv_labels_only, "npz": _npz_labels_only, "hdf5": _hdf5_labels_only,
                "hf_dataset": _labels_only_hf_dataset}

_COUNTERS: dict[str, Callable[[dict[str, Any], Path, str], int]] = {
    "sklearn": _count_sklearn,
    "npz": _count_npz,
    "npy": _count_npy,
    "sparse_npz": _count_sparse_npz,
    "hdf5": _count_hdf5,
    "csv": _count_csv,
    "manifest": _count_manifest,
    "image_folder": _count_image_folder,
    "hf_dataset": _count_hf_dataset,
    "webdataset": _count_webdataset,
}

_LOADERS: dict[str, Callable[[dict[str, Any], Path, str, Any], SourceData]] = {
    "sklearn": _load_sklearn,
    "npz": _load_npz,
    "npy": _load_npy,
    "sparse_npz": _load_sparse_npz,
    "hdf5": _load_hdf5,
    "csv": _load_csv,
    "manifest": _load_manifest,
    "image_folder": _load_image_folder,
    "hf_dataset": _load_hf_dataset,
    "webdataset": _load_webdataset,
}

_GROUP_READERS: dict[str, Callable[[dict[str, Any], Path, str], list | None]] = {
    "npz": _groups_npz,
    "npy": _groups_npy,
    "sparse_npz": _groups_sparse_npz,
    "hdf5": _groups_hdf5,
    "csv": _groups_csv,
    "manifest": _groups_manifest,
    "hf_dataset": _groups_hf_dataset,
}
