"""Source declarations: the keys each source type takes (with defaults), their checks, path resolution and
row ranges. Messages start with the key path (``where`` + ``.key``); see :mod:`vertebrae.data.sources`."""

from __future__ import annotations

import operator
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError, ValidationError

#: Bundled scikit-learn datasets a ``{"type": "sklearn"}`` source may name.
SKLEARN_DATASETS: tuple[str, ...] = ("breast_cancer", "diabetes", "digits", "iris", "wine")

_REQUIRED = object()

# Allowed keys per source type (besides "type") and their defaults; _REQUIRED marks mandatory keys.
_SPECS: dict[str, dict[str, Any]] = {
    "sklearn": {"name": _REQUIRED},
    "npz": {"path": _REQUIRED, "features_key": "embeddings", "labels_key": "labels", "ids_key": None,
            "groups_key": None},
    "npy": {"path": _REQUIRED, "labels_path": _REQUIRED, "ids_path": None, "groups_path": None},
    "sparse_npz": {"path": _REQUIRED, "labels_path": _REQUIRED, "ids_path": None, "groups_path": None},
    "hdf5": {
        "path": _REQUIRED,
        "features_dataset": "embeddings",
        "labels_dataset": "labels",
        "ids_dataset": None,
        "groups_dataset": None,
    },
    "csv": {
        "path": _REQUIRED,
        "label_column": "label",
        "id_column": None,
        "feature_columns": None,
        "label_dtype": "str",
        "groups_column": None,
    },
    "manifest": {
        "path": _REQUIRED,
        "text_column": None,
        "image_column": None,
        "label_column": "label",
        "id_column": None,
        "label_dtype": "str",
        "format": None,
        "groups_column": None,
    },
    # data as researchers hold it (vertebrae/data/sources/formats.py)
    "image_folder": {"path": _REQUIRED},
    "hf_dataset": {"path": _REQUIRED, "split": None, "image_column": None, "text_column": None,
                   "label_column": "label", "id_column": None, "groups_column": None},
    "webdataset": {"path": _REQUIRED, "image_key": "jpg;jpeg;png;webp", "label_key": "cls", "label_field": None},
}

#: Source types a declaration may use.
SOURCE_TYPES: tuple[str, ...] = tuple(sorted(_SPECS))

_PATH_KEYS = frozenset({"path", "labels_path", "ids_path", "groups_path"})

#: The key naming each source type's independence groups (one group per row); sklearn sources have none.
GROUPS_KEYS: dict[str, str] = {"npz": "groups_key", "npy": "groups_path", "sparse_npz": "groups_path",
                               "hdf5": "groups_dataset", "csv": "groups_column", "manifest": "groups_column",
                               "hf_dataset": "groups_column"}
_MAX_LISTED = 50  # cap on names listed in "available ..." messages


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
            owners = [t for t, keys in _SPECS.items() if key in keys]
            belongs = f" (a key of source type(s) {', '.join(owners)}, which a {kind!r} source would ignore)" if owners else ""
            raise ConfigError(
                f"{_key(where, str(key))}: unknown key for a {kind!r} source{belongs}; allowed keys: "
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
    if kind in ("csv", "manifest", "hf_dataset") and opts["groups_column"] is not None:
        others = {opts.get("label_column"), opts.get("id_column"), opts.get("text_column"), opts.get("image_column")}
        if opts["groups_column"] in others - {None}:
            raise ConfigError(f"{_key(where, 'groups_column')}: {opts['groups_column']!r} is also the label, id or "
                              "input column; groups need a column of their own")
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
