"""Loaders for the table sources: ``csv`` (numeric feature columns) and ``manifest`` (raw texts or image paths,
read by :mod:`vertebrae.data.sources.manifest`). Same counter/loader contract as :mod:`vertebrae.data.sources.arrays`; a
CSV without data rows (an empty file or a header only) is refused naming the file."""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.data.sources.manifest import ManifestSpec, manifest_groups, manifest_row_count, read_manifest
from vertebrae.data.sources.checks import SourceData, labels_only_rows
from vertebrae.data.sources.declaration import (
    _check_rows,
    _key,
    _listing,
    _parse_rows,
    _resolve,
)

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
    _check_not_header_only(count, path)
    return count


def _check_not_header_only(count: int, path: Path) -> None:
    if count == 0:
        raise ValidationError(f"CSV file {path} has a header but no data rows; a source needs at least one row")


def _load_csv(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
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


def _groups_csv(opts: dict[str, Any], base_dir: Path, where: str) -> list | None:
    return None if opts["groups_column"] is None else _load_csv(opts, base_dir, where, None).groups


# --------------------------------------------------------------------------------------------------------
# manifest (raw texts or image paths; see vertebrae.data.sources.manifest)


def _manifest_spec(opts: dict[str, Any], base_dir: Path, where: str) -> ManifestSpec:
    return ManifestSpec.from_decl(opts, base_dir=base_dir, where=where)


def _count_manifest(opts: dict[str, Any], base_dir: Path, where: str) -> int:
    return manifest_row_count(_manifest_spec(opts, base_dir, where))


def _load_manifest(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
    spec = _manifest_spec(opts, base_dir, where)
    data = read_manifest(spec, _parse_rows(rows, where))
    return SourceData(data.inputs, data.labels, data.row_ids, data.groups, spec.groups_column)


def _groups_manifest(opts: dict[str, Any], base_dir: Path, where: str) -> list | None:
    spec = _manifest_spec(opts, base_dir, where)
    return None if spec.groups_column is None else manifest_groups(spec)
