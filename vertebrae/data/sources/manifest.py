"""Raw inputs from a manifest: a CSV or Parquet table with one row per sample.

Columns: exactly one of ``text_column`` (the text itself) or ``image_column`` (an image file path, relative
paths resolved against the manifest's folder); ``label_column`` (the label or target; ``label_dtype`` str, int
or float); optional ``id_column`` (row ids; row order when absent); optional ``groups_column`` (the
independence group of each row, text or integer; its own column). The format follows the suffix (``.csv``,
``.parquet`` / ``.pq``) unless ``format`` names it. A retrieval endpoint's manifest has no label column
(``label_column=None``; its rows are matched by id through a relevance file).

Problems name what is wrong: a missing column is a ConfigError naming the config key and the columns there
are; an empty cell, an unparsable label or a missing image file is a ValidationError naming the row (its id,
or its index and CSV line) and, for images, the resolved path. Image files are only checked for existence
here; an undecodable image is reported the same way when an extractor decodes it.
"""

from __future__ import annotations

import csv
import hashlib
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.file_digests import FileDigests
from vertebrae.core.inputs import RawInputs
from vertebrae.data.sources.checks import SourceData
from vertebrae.data.sources.keys import _REQUIRED, SourceFormat, _parse_rows, check_groups_column

FORMATS = ("csv", "parquet")
IMAGES_SCHEMA = "vertebrae.manifest-images/v1"
LABEL_DTYPES = ("str", "int", "float")
_SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


@dataclass(frozen=True)
class ManifestRows:
    """Rows of a manifest: ``inputs`` (RawInputs), ``labels`` (one per row; None without a label column),
    ``row_ids`` (None = row order), ``groups`` (one per row; None without a groups column)."""

    inputs: RawInputs
    labels: list | None
    row_ids: list | None
    groups: list | None = None


@dataclass(frozen=True)
class ManifestSpec:
    """A validated manifest declaration (see the module docstring); ``where`` prefixes config-key messages."""

    path: Path
    text_column: str | None = None
    image_column: str | None = None
    label_column: str | None = "label"
    id_column: str | None = None
    label_dtype: str = "str"
    format: str | None = None
    where: str = "manifest"
    groups_column: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))
        if (self.text_column is None) == (self.image_column is None):
            raise ConfigError(f"{self.where}: declare exactly one of text_column or image_column")
        if self.label_dtype not in LABEL_DTYPES:
            raise ConfigError(f"{self.where}.label_dtype: must be one of {LABEL_DTYPES}, got {self.label_dtype!r}")
        fmt = self.format if self.format is not None else _SUFFIXES.get(self.path.suffix.lower())
        if fmt not in FORMATS:
            raise ConfigError(f"{self.where}.format: cannot tell the format of {self.path} (suffix "
                              f"{self.path.suffix!r}); set format to one of {FORMATS}")
        object.__setattr__(self, "format", fmt)
        used = [c for c in (self.input_column, self.label_column, self.id_column, self.groups_column) if c is not None]
        if len(set(used)) != len(used):
            raise ConfigError(f"{self.where}: the input, label, id and groups columns must differ, got {used}")

    @property
    def kind(self) -> str:
        return "text" if self.text_column is not None else "image"

    @property
    def input_column(self) -> str:
        return self.text_column if self.text_column is not None else self.image_column  # type: ignore[return-value]

    @classmethod
    def from_decl(cls, opts: Mapping[str, Any], *, base_dir: Path, where: str) -> ManifestSpec:
        path = Path(opts["path"])
        if not path.is_absolute():
            path = Path(base_dir) / path
        if not path.is_file():
            raise ConfigError(f"{where}.path: file not found: {path}")
        return cls(path, opts.get("text_column"), opts.get("image_column"), opts.get("label_column", "label"),
                   opts.get("id_column"), opts.get("label_dtype", "str"), opts.get("format"), where,
                   opts.get("groups_column"))


def _table(spec: ManifestSpec) -> tuple[list[str], dict[str, list], list[int] | None]:
    """(header, needed columns as lists of cells, CSV line of each record or None for Parquet)."""
    needed = [c for c in (spec.input_column, spec.label_column, spec.id_column, spec.groups_column) if c is not None]
    if spec.format == "parquet":
        import pyarrow.parquet as pq

        try:
            header = list(pq.read_schema(spec.path).names)
        except (OSError, ValueError) as exc:  # pyarrow's errors subclass these
            raise ValidationError(f"{spec.path} is not a readable Parquet file: {exc}") from None
        _check_columns(spec, header)  # a ConfigError naming the key, not an unreadable file
        try:
            table = pq.read_table(spec.path, columns=needed)
        except (OSError, ValueError) as exc:
            raise ValidationError(f"{spec.path} is not a readable Parquet file: {exc}") from None
        return header, {c: table.column(c).to_pylist() for c in needed}, None
    columns: dict[str, list] = {c: [] for c in needed}
    lines: list[int] = []
    reader: Any = None
    try:
        with open(spec.path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if not header:
                raise ValidationError(f"manifest {spec.path} is empty (no header line)")
            if len(set(header)) != len(header):
                raise ValidationError(f"manifest {spec.path}: a column name appears twice in the header {header}")
            _check_columns(spec, header)
            positions = {c: header.index(c) for c in needed}
            for record in reader:
                if not record:
                    continue
                if len(record) != len(header):
                    raise ValidationError(f"manifest {spec.path}, line {reader.line_num}: {len(record)} fields, "
                                          f"header has {len(header)}")
                for c, i in positions.items():
                    columns[c].append(record[i])
                lines.append(reader.line_num)
    except UnicodeDecodeError as exc:
        raise ValidationError(f"manifest {spec.path} is not UTF-8 text: {exc}") from None
    except csv.Error as exc:
        raise ValidationError(f"manifest {spec.path}, line {reader.line_num if reader else 0}: {exc}") from None
    return header, columns, lines


def _check_columns(spec: ManifestSpec, header: list[str]) -> None:
    keys = {"text_column": spec.text_column, "image_column": spec.image_column,
            "label_column": spec.label_column, "id_column": spec.id_column, "groups_column": spec.groups_column}
    for key, column in keys.items():
        if column is not None and column not in header:
            raise ConfigError(f"{spec.where}.{key}: column {column!r} not found in {spec.path}; "
                              f"available columns: {', '.join(map(repr, header))}")


def _row_name(spec: ManifestSpec, index: int, rid: Any, lines: list[int] | None) -> str:
    where = f"line {lines[index]}" if lines is not None else f"index {index}"
    shown = f"row {rid!r}" if spec.id_column is not None else f"row {index}"
    return f"manifest {spec.path}, {shown} ({where})"


def _label(value: Any, spec: ManifestSpec, name: str) -> Any:
    if value is None or value == "":
        raise ValidationError(f"{name}: empty {spec.label_column!r} (label)")
    if spec.label_dtype == "str":
        return value if isinstance(value, str) else str(value)
    try:
        return int(value) if spec.label_dtype == "int" else float(value)
    except (TypeError, ValueError):
        raise ValidationError(f"{name}: label {value!r} is not a{'n int' if spec.label_dtype == 'int' else ' float'}") from None


def _group(value: Any, spec: ManifestSpec, name: str) -> Any:
    if value is None or value == "":
        raise ValidationError(f"{name}: empty {spec.groups_column!r} (group)")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValidationError(f"{name}: group {value!r} in column {spec.groups_column!r} is not text or an integer")
    return value


def manifest_groups(spec: ManifestSpec) -> list | None:
    """The groups column of every row (checked like ``read_manifest`` checks them), without touching image files."""
    if spec.groups_column is None:
        return None
    _, columns, lines = _table(spec)
    ids = None if spec.id_column is None else columns[spec.id_column]
    return [_group(value, spec, _row_name(spec, i, ids[i] if ids is not None else i, lines))
            for i, value in enumerate(columns[spec.groups_column])]


def manifest_row_count(spec: ManifestSpec) -> int:
    """Rows of the manifest (Parquet: from its metadata; CSV: its records, columns checked)."""
    if spec.format == "parquet":
        import pyarrow.parquet as pq

        try:
            meta = pq.read_metadata(spec.path)
            header = list(meta.schema.to_arrow_schema().names)
        except (OSError, ValueError) as exc:
            raise ValidationError(f"{spec.path} is not a readable Parquet file: {exc}") from None
        _check_columns(spec, header)
        return int(meta.num_rows)
    _, columns, _ = _table(spec)
    return len(columns[spec.input_column])


def read_manifest(spec: ManifestSpec, rows: tuple[int, int] | None = None) -> ManifestRows:
    """All rows, or rows ``start:stop``; image paths are resolved and checked to exist (only those rows)."""
    _, columns, lines = _table(spec)
    n = len(columns[spec.input_column])
    start, stop = (0, n) if rows is None else (operator.index(rows[0]), operator.index(rows[1]))
    if not 0 <= start <= stop <= n:
        raise ValidationError(f"{spec.where}: rows=({start}, {stop}) out of range for {spec.path} with {n} rows")
    ids = None if spec.id_column is None else columns[spec.id_column][start:stop]
    values, labels, groups = [], [], []
    for offset, value in enumerate(columns[spec.input_column][start:stop]):
        index = start + offset
        rid = ids[offset] if ids is not None else index
        name = _row_name(spec, index, rid, lines)
        if ids is not None and (rid is None or rid == ""):
            raise ValidationError(f"{name}: empty id in column {spec.id_column!r}")
        if not isinstance(value, str) or not value.strip():
            raise ValidationError(f"{name}: empty or non-text {spec.input_column!r} cell ({value!r})")
        if spec.kind == "image":
            if "://" in value:
                raise ValidationError(f"{name}: image {value!r} is a URL; a manifest's images are files, each named "
                                      "by its path relative to the manifest's folder (on object storage: an object "
                                      "under the run's prefix, named so)")
            path = Path(value)
            if not path.is_absolute():
                path = spec.path.parent / path
            if not path.is_file():
                raise ValidationError(f"{name}: image file not found: {path}")
            value = str(path)
        values.append(value)
        if spec.label_column is not None:
            labels.append(_label(columns[spec.label_column][offset + start], spec, name))
        if spec.groups_column is not None:
            groups.append(_group(columns[spec.groups_column][offset + start], spec, name))
    display_ids = ids if ids is not None else list(range(start, stop))
    return ManifestRows(RawInputs(spec.kind, tuple(values), tuple(display_ids)),
                        labels if spec.label_column is not None else None, None if ids is None else list(ids),
                        groups if spec.groups_column is not None else None)


def manifest_recipe(spec: ManifestSpec, options: Mapping[str, Any], digests: FileDigests) -> dict[str, Any]:
    """A manifest's recipe: ``options`` (its declaration without the path), the manifest file's digest and, for
    image rows, one digest over the digests of every image file in row order."""
    recipe = {**{k: v for k, v in options.items() if k != "path"}, "path": {"sha256": digests.digest(spec.path)}}
    if spec.kind == "image":
        images = hashlib.sha256(f"{IMAGES_SCHEMA}|".encode())
        paths = read_manifest(spec).inputs.values
        for path in paths:
            images.update(digests.digest(path).encode())
        recipe["images"] = {"count": len(paths), "sha256": images.hexdigest()}
    return recipe


# --------------------------------------------------------------------------------------------------------
# the ``manifest`` source type: {"type": "manifest", "path": ..., "text_column": None, "image_column": None,
# "label_column": "label", "id_column": None, "label_dtype": "str", "format": None, "groups_column": None}


def _spec(opts: dict[str, Any], base_dir: Path, where: str) -> ManifestSpec:
    return ManifestSpec.from_decl(opts, base_dir=base_dir, where=where)


def _count(opts: dict[str, Any], base_dir: Path, where: str) -> int:
    return manifest_row_count(_spec(opts, base_dir, where))


def _load(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
    spec = _spec(opts, base_dir, where)
    data = read_manifest(spec, _parse_rows(rows, where))
    return SourceData(data.inputs, data.labels, data.row_ids, data.groups, spec.groups_column)


def _groups(opts: dict[str, Any], base_dir: Path, where: str) -> list | None:
    spec = _spec(opts, base_dir, where)
    return None if spec.groups_column is None else manifest_groups(spec)


def _files_recipe(opts: dict[str, Any], base_dir: Path, where: str, digests: FileDigests) -> dict[str, Any]:
    return {"type": "manifest", **manifest_recipe(_spec(opts, base_dir, where), opts, digests)}


FORMAT = SourceFormat(
    keys={
        "path": _REQUIRED,
        "text_column": None,
        "image_column": None,
        "label_column": "label",
        "id_column": None,
        "label_dtype": "str",
        "format": None,
        "groups_column": None,
    },
    count=_count, load=_load, check=check_groups_column, groups_key="groups_column", groups=_groups,
    files_recipe=_files_recipe,
)
