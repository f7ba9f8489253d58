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
    {"type": "image_folder" | "hf_dataset" | "webdataset", ...}  # data as held; see image_folder.py, ...

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

Each type is one module ending in its ``FORMAT`` (``npz.py``, ``csv_table.py``, ``webdataset.py``...), and
:mod:`vertebrae.data.sources.registry` maps every ``type:`` to it (``FORMATS``, one line per type) and checks a
declaration against it (``parse_decl``); the functions below dispatch through that table and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vertebrae.data.sources import registry
from vertebrae.data.sources.checks import SourceData
from vertebrae.data.sources.registry import GROUPS_KEYS, SOURCE_TYPES
from vertebrae.data.sources.sklearn_datasets import SKLEARN_DATASETS

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
    kind, opts = registry.parse_decl(decl, where)
    return registry.FORMATS[kind].count(opts, Path(base_dir), where)


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
    kind, opts = registry.parse_decl(decl, where)
    return registry.FORMATS[kind].load(opts, Path(base_dir), where, rows)


def source_groups(decl: Mapping[str, Any], *, base_dir: Path, where: str) -> tuple[str, list] | None:
    """``(groups_name, groups)`` of every row of the declared source, read without its features (array sources)
    and checked like :func:`load_source` checks them; None when the source declares no groups."""
    kind, opts = registry.parse_decl(decl, where)
    fmt = registry.FORMATS[kind]
    key = fmt.groups_key
    if key is None or opts[key] is None:
        return None
    assert fmt.groups is not None
    groups = fmt.groups(opts, Path(base_dir), where)
    assert groups is not None
    return (Path(opts[key]).stem if key == "groups_path" else opts[key]), groups


def source_labels_only(decl: Mapping[str, Any], *, base_dir: Path, where: str) -> str | None:
    """Why the declared table holds ids and labels but no features (a ``csv`` without feature columns, an ``npz`` /
    ``hdf5`` without a member or dataset named like its features key), or None. Such a source is valid when every
    candidate brings its own rows (precomputed files aligned by id); its ``features`` are a zero placeholder."""
    kind, opts = registry.parse_decl(decl, where)
    labels_only = registry.FORMATS[kind].labels_only
    return None if labels_only is None else labels_only(opts, Path(base_dir), where)
