"""``{"type": "csv", "path": ..., "label_column": "label", "id_column": None, "feature_columns": None, "label_dtype":
"str", "groups_column": None}``: a CSV table of numeric feature columns (every column but the label, id and groups
ones when ``feature_columns`` is null; none left: a labels-only table). A CSV without data rows (an empty file or
a header only) is refused naming the file."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.data.sources.checks import SourceData, labels_only_rows
from vertebrae.data.sources.keys import (
    _REQUIRED,
    SourceFormat,
    _check_rows,
    _key,
    _listing,
    _parse_rows,
    _resolve,
    check_groups_column,
)


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
    for key in ("label_column", "id_column", "groups_column"):
        name = opts[key]
        if name is not None and name not in seen:
            raise ConfigError(
                f"{_key(where, key)}: column {name!r} not found in {path}; available columns: {available}"
            )
    reserved = {opts["label_column"], opts["id_column"], opts["groups_column"]}
    declared = opts["feature_columns"]
    if declared is None:
        # none left: a labels-only table (``csv_labels_only``), valid when every candidate brings its own rows
        return [name for name in header if name not in reserved]
    for i, name in enumerate(declared):
        if name not in seen:
            raise ConfigError(
                f"{_key(where, 'feature_columns')}[{i}]: column {name!r} not found in {path}; "
                f"available columns: {available}"
            )
        if name in reserved:
            raise ConfigError(
                f"{_key(where, 'feature_columns')}[{i}]: column {name!r} is the label, id or groups column"
            )
    return list(declared)


def _count(opts: dict[str, Any], base_dir: Path, where: str) -> int:
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
    _check_not_header_only(count, path)
    return count


def _check_not_header_only(count: int, path: Path) -> None:
    if count == 0:
        raise ValidationError(f"CSV file {path} has a header but no data rows; a source needs at least one row")


def _load(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
    path = _resolve(opts, "path", base_dir, where)
    assert path is not None
    parsed = _parse_rows(rows, where)  # the range is checked once the records are counted
    start, stop = parsed if parsed is not None else (0, 0)
    label_col, id_col, group_col = opts["label_column"], opts["id_column"], opts["groups_column"]
    as_int = opts["label_dtype"] == "int"
    values: list[list[float]] = []
    labels: list = []
    row_ids: list | None = None if id_col is None else []
    groups: list | None = None if group_col is None else []
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
                if groups is not None:
                    group = record[group_col]
                    if not group:
                        raise ValidationError(f"CSV file {path}, line {line}, column {group_col!r}: empty group")
                    groups.append(group)
    except UnicodeDecodeError as exc:
        raise ValidationError(f"CSV file {path} is not UTF-8 text: {exc}") from None
    except csv.Error as exc:
        line = reader.reader.line_num if reader is not None else 0
        raise ValidationError(f"CSV file {path}, line {line}: {exc}") from None
    _check_not_header_only(n, path)
    _check_rows(rows, n, where)
    if not feature_cols:
        return SourceData(labels_only_rows(len(values)), labels, row_ids, groups, group_col,
                          f"CSV file {path} has no feature columns besides the label/id/groups columns")
    features = np.array(values, dtype=np.float64).reshape(len(values), len(feature_cols))
    return SourceData(features, labels, row_ids, groups, group_col)


def _groups(opts: dict[str, Any], base_dir: Path, where: str) -> list | None:
    return None if opts["groups_column"] is None else _load(opts, base_dir, where, None).groups


def _labels_only(opts: dict[str, Any], base_dir: Path, where: str) -> str | None:
    path = _resolve(opts, "path", base_dir, where)
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:  # type: ignore[arg-type]
            header = next(csv.reader(fh), None)
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ValidationError(f"CSV file {path}: cannot read its header: {exc}") from None
    if _csv_columns(header, opts, path, where):  # type: ignore[arg-type]
        return None
    return f"CSV file {path} has no feature columns besides the label/id/groups columns"


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


def _check_decl(opts: dict[str, Any], where: str) -> None:
    if opts["label_dtype"] not in ("str", "int"):
        raise ConfigError(f"{_key(where, 'label_dtype')}: must be 'str' or 'int', got {opts['label_dtype']!r}")
    if opts["id_column"] is not None and opts["id_column"] == opts["label_column"]:
        raise ConfigError(
            f"{_key(where, 'id_column')}: {opts['id_column']!r} is also the label column"
        )
    check_groups_column(opts, where)


FORMAT = SourceFormat(
    keys={
        "path": _REQUIRED,
        "label_column": "label",
        "id_column": None,
        "feature_columns": None,
        "label_dtype": "str",
        "groups_column": None,
    },
    count=_count, load=_load, check=_check_decl, values={"feature_columns": _check_feature_columns},
    groups_key="groups_column", groups=_groups, labels_only=_labels_only,
)
