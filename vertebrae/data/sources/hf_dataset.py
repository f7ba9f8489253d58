"""A Hugging Face ``datasets`` dataset as it sits on disk: a folder written by ``save_to_disk`` (a Dataset, or a
DatasetDict with one folder per split), an ``.arrow`` / ``.parquet`` file, or a folder of such files (the Hub's
``data/<split>-00000-of-00001.parquet`` layout; ``split`` picks the files whose name starts with it).

Columns: at most one of ``image_column`` (an ``Image`` feature, raw image bytes, or image paths relative to the
dataset's folder) or ``text_column`` (neither: a labels-only table, valid when every candidate brings its own rows
from a file aligned by id); ``label_column`` (a ``ClassLabel`` gives the label names, other values are kept as they
are); ``id_column`` (row ids; the row order when absent); ``groups_column`` (each row's independence group, text or
an integer; a ``ClassLabel`` gives its name). Embedded image bytes are not copied out:
each row is a reference into its Arrow / Parquet file (:mod:`vertebrae.core.image_refs`), decoded when a model
reads it. The features (``ClassLabel`` names, ``Image``) are read with the ``datasets`` library
(``Features.from_arrow_schema``), the split's files from ``save_to_disk``'s own ``dataset_dict.json`` /
``state.json``, the columns with pyarrow (memory-mapped; ``load_from_disk`` would do the same underneath);
``datasets`` is imported here only.

Problems name the dataset and the key: a split that is not there (listing the splits), a column absent from the
split (listing its columns), an empty label or id cell (naming the row), an image path that does not exist.
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.file_digests import FileDigests
from vertebrae.core.image_refs import table_ref
from vertebrae.core.inputs import RawInputs
from vertebrae.data.sources.checks import SourceData, labels_only_rows
from vertebrae.data.sources.keys import _REQUIRED, SourceFormat, check_groups_column

_DATA_SUFFIXES = (".arrow", ".parquet", ".pq")
IMAGES_SCHEMA = "vertebrae.hf-dataset-images/v1"


@dataclass(frozen=True)
class HFRows:
    inputs: RawInputs | None  # None for a labels-only table
    labels: list
    row_ids: list | None
    groups: list | None = None
    n_rows: int = 0


@dataclass(frozen=True)
class HFDatasetSpec:
    path: Path
    split: str | None = None
    image_column: str | None = None
    text_column: str | None = None
    label_column: str | None = "label"
    id_column: str | None = None
    where: str = "hf_dataset"
    groups_column: str | None = None

    def __post_init__(self) -> None:
        if self.text_column is not None and self.image_column is not None:
            raise ConfigError(f"{self.where}: declare one of text_column or image_column, not both")
        used = [c for c in (self.image_column, self.text_column, self.label_column, self.id_column, self.groups_column)
                if c is not None]
        if len(set(used)) != len(used):
            raise ConfigError(f"{self.where}: the input, label, id and groups columns must differ, got {used}")

    @classmethod
    def from_decl(cls, opts: Mapping[str, Any], *, base_dir: Path, where: str) -> HFDatasetSpec:
        path = Path(opts["path"])
        if not path.is_absolute():
            path = Path(base_dir) / path
        if not path.exists():
            raise ConfigError(f"{where}.path: dataset not found: {path}")
        return cls(path, opts.get("split"), opts.get("image_column"), opts.get("text_column"),
                   opts.get("label_column", "label"), opts.get("id_column"), where, opts.get("groups_column"))

    @property
    def input_column(self) -> str | None:
        """The text or image column; None for a labels-only table."""
        return self.image_column if self.image_column is not None else self.text_column

    @property
    def labels_only(self) -> str | None:
        """Why the table has no input rows (no text_column nor image_column), or None."""
        if self.input_column is not None:
            return None
        return f"{self.where}: Hugging Face dataset {self.path} declares no text_column nor image_column"

    @property
    def folder(self) -> Path:
        return self.path if self.path.is_dir() else self.path.parent


def _split_name(spec: HFDatasetSpec) -> str:
    return f"split {spec.split!r} of {spec.path}" if spec.split is not None else str(spec.path)


def data_files(spec: HFDatasetSpec) -> list[Path]:
    """The Arrow / Parquet files of the split, in row order; ValidationError naming a missing split."""
    path = spec.path
    if path.is_file():
        if path.suffix.lower() not in _DATA_SUFFIXES:
            raise ConfigError(f"{spec.where}.path: {path} is not an .arrow or .parquet file nor a dataset folder")
        if spec.split is not None and not path.name.startswith(spec.split):  # the folder rule, for one file
            raise ConfigError(f"{spec.where}.split: {path} is one data file, not named after split {spec.split!r}; "
                              "leave split out to read it, or give the dataset folder")
        return [path]
    if (path / "dataset_dict.json").is_file():
        splits = json.loads((path / "dataset_dict.json").read_text(encoding="utf-8")).get("splits") or []
        if spec.split is None and len(splits) != 1:
            raise ConfigError(f"{spec.where}.split: {path} holds the splits {splits}; name one")
        split = spec.split if spec.split is not None else splits[0]
        if split not in splits:
            raise ValidationError(f"{spec.where}.split: split {split!r} not found in {path}; its splits: {splits}")
        return _saved_files(path / split)
    if (path / "state.json").is_file():
        state = json.loads((path / "state.json").read_text(encoding="utf-8"))
        if spec.split is not None and state.get("_split") is None:  # not silently ignored: every row would be read
            raise ConfigError(f"{spec.where}.split: {path} is a single Dataset saved by save_to_disk, without splits "
                              f"(not a DatasetDict), so split {spec.split!r} names nothing in it; leave split out to "
                              "read all its rows")
        if spec.split is not None and state.get("_split") != spec.split:
            raise ValidationError(f"{spec.where}.split: {path} holds split {state.get('_split')!r}, not {spec.split!r}")
        return _saved_files(path)
    files = sorted(p for p in path.rglob("*") if p.suffix.lower() in _DATA_SUFFIXES and p.is_file())
    if spec.split is not None:
        files = [p for p in files if p.name.startswith(spec.split)]
    if not files:
        raise ValidationError(f"{spec.where}: no .arrow / .parquet file of {_split_name(spec)} (nor a save_to_disk "
                              "dataset_dict.json or state.json)")
    return files


def _saved_files(folder: Path) -> list[Path]:
    state = json.loads((folder / "state.json").read_text(encoding="utf-8"))
    return [folder / entry["filename"] for entry in state.get("_data_files") or []]


def _schema(path: Path) -> Any:
    import pyarrow as pa

    try:
        if path.suffix.lower() == ".arrow":
            with pa.memory_map(str(path)) as source:
                try:
                    return pa.ipc.open_stream(source).schema
                except pa.ArrowInvalid:
                    return pa.ipc.open_file(source).schema
        import pyarrow.parquet as pq

        return pq.read_schema(path)
    except (OSError, ValueError) as exc:
        raise ValidationError(f"{path} is not a readable Arrow / Parquet file: {exc}") from None


def _num_rows(path: Path) -> int:
    if path.suffix.lower() != ".arrow":
        import pyarrow.parquet as pq

        return int(pq.read_metadata(path).num_rows)
    return int(_read_table(path, []).num_rows)


def _read_table(path: Path, columns: list[str]) -> Any:
    import pyarrow as pa

    try:
        if path.suffix.lower() == ".arrow":
            with pa.memory_map(str(path)) as source:
                try:
                    table = pa.ipc.open_stream(source).read_all()
                except pa.ArrowInvalid:
                    table = pa.ipc.open_file(source).read_all()
            return table.select(columns)
        import pyarrow.parquet as pq

        return pq.read_table(path, columns=columns, memory_map=True)
    except (OSError, ValueError) as exc:
        raise ValidationError(f"{path} is not a readable Arrow / Parquet file: {exc}") from None


def features_of(spec: HFDatasetSpec, files: list[Path]) -> Any:
    """The ``datasets.Features`` of the split (from its first file), columns checked against the declaration."""
    import datasets

    features = datasets.Features.from_arrow_schema(_schema(files[0]))
    keys = {"image_column": spec.image_column, "text_column": spec.text_column, "label_column": spec.label_column,
            "id_column": spec.id_column, "groups_column": spec.groups_column}
    for key, column in keys.items():
        if column is not None and column not in features:
            raise ConfigError(f"{spec.where}.{key}: column {column!r} not found in {_split_name(spec)}; its columns: "
                              f"{', '.join(map(repr, features))}")
    return features


def hf_row_count(spec: HFDatasetSpec) -> int:
    """Rows of the split (file metadata), its columns checked: ``vertebrae validate``'s look at the dataset."""
    files = data_files(spec)
    features_of(spec, files)
    return sum(_num_rows(path) for path in files)


def _label(value: Any, feature: Any, name: str, spec: HFDatasetSpec) -> Any:
    import datasets

    if value is None or value == "":
        raise ValidationError(f"{name}: empty {spec.label_column!r} (label)")
    if isinstance(feature, datasets.ClassLabel):
        if not 0 <= int(value) < feature.num_classes:
            raise ValidationError(f"{name}: label {value!r} is not a class of {spec.label_column!r} "
                                  f"({feature.num_classes} classes)")
        return feature.names[int(value)]
    if isinstance(value, (str, int, float, bool)):
        return value
    raise ValidationError(f"{name}: label {value!r} in {spec.label_column!r} is not a class name or number")


def _group(value: Any, feature: Any, name: str, spec: HFDatasetSpec) -> Any:
    import datasets

    if isinstance(feature, datasets.ClassLabel) and isinstance(value, int) and 0 <= value < feature.num_classes:
        return feature.names[value]
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise ValidationError(f"{name}: group {value!r} in {spec.groups_column!r} must be a non-empty text or an integer")
    return value


def _image(value: Any, path: Path, row: int, spec: HFDatasetSpec, name: str) -> str:
    if isinstance(value, Mapping):
        if value.get("bytes") is not None:
            return table_ref(path, row, spec.input_column)
        value = value.get("path")
    elif isinstance(value, (bytes, bytearray)):
        return table_ref(path, row, spec.input_column)
    if not isinstance(value, str) or not value:
        raise ValidationError(f"{name}: no image in {spec.input_column!r} (neither bytes nor a path)")
    image = Path(value) if Path(value).is_absolute() else spec.folder / value
    if not image.is_file():
        raise ValidationError(f"{name}: image file not found: {image}")
    return str(image)


def read_hf_rows(spec: HFDatasetSpec, rows: Any = None) -> HFRows:
    """All rows of the split, or rows ``start:stop``; labels decoded, image rows as paths or references."""
    files = data_files(spec)
    features = features_of(spec, files)
    counts = [_num_rows(path) for path in files]
    n = sum(counts)
    start, stop = (0, n) if rows is None else (operator.index(rows[0]), operator.index(rows[1]))
    if not 0 <= start <= stop <= n:
        raise ValidationError(f"{spec.where}: rows=({start}, {stop}) out of range for {_split_name(spec)} with {n} rows")
    columns = [c for c in (spec.input_column, spec.label_column, spec.id_column, spec.groups_column) if c is not None]
    values, labels, ids, groups = [], [], [], []
    offset = 0
    for path, count in zip(files, counts):
        lo, hi = max(start - offset, 0), min(stop - offset, count)
        if lo < hi:
            table = _read_table(path, columns).slice(lo, hi - lo)
            cells = {c: table.column(c).to_pylist() for c in columns}
            for i in range(hi - lo):
                row = offset + lo + i
                rid = cells[spec.id_column][i] if spec.id_column is not None else row
                name = f"{_split_name(spec)}, row {rid!r}" + (f" (index {row})" if spec.id_column is not None else "")
                if rid is None or rid == "":
                    raise ValidationError(f"{name}: empty id in column {spec.id_column!r}")
                if spec.input_column is not None:
                    value = cells[spec.input_column][i]
                    if spec.image_column is not None:
                        value = _image(value, path, lo + i, spec, name)
                    elif not isinstance(value, str) or not value.strip():
                        raise ValidationError(f"{name}: empty or non-text {spec.text_column!r} cell ({value!r})")
                    values.append(value)
                ids.append(rid)
                if spec.groups_column is not None:
                    groups.append(_group(cells[spec.groups_column][i], features[spec.groups_column], name, spec))
                if spec.label_column is not None:
                    labels.append(_label(cells[spec.label_column][i], features[spec.label_column], name, spec))
        offset += count
    kind = "image" if spec.image_column is not None else "text"
    inputs = None if spec.input_column is None else RawInputs(kind, tuple(values), tuple(ids))
    return HFRows(inputs, labels, ids if spec.id_column is not None else None,
                  groups if spec.groups_column is not None else None, len(ids))


def hf_recipe(spec: HFDatasetSpec, options: Mapping[str, Any], digests: FileDigests) -> dict[str, Any]:
    """The ``files`` identity recipe: the options, the SHA-256 of every data file of the split in order and, for
    image paths, one digest over the images' digests."""
    files = data_files(spec)
    recipe: dict[str, Any] = {**{k: v for k, v in options.items()
                                 if k != "path" and not (k == "groups_column" and v is None)},
                              "files": [digests.digest(path) for path in files]}
    if spec.image_column is not None:
        values = read_hf_rows(spec).inputs.values  # type: ignore[union-attr]
        paths = [v for v in values if not v.startswith("vertebrae-")]
        if paths:
            images = hashlib.sha256(f"{IMAGES_SCHEMA}|".encode())
            for path in paths:
                images.update(digests.digest(path).encode())
            recipe["images"] = {"count": len(paths), "sha256": images.hexdigest()}
    return recipe


__all__ = ["HFDatasetSpec", "HFRows", "data_files", "features_of", "hf_recipe", "hf_row_count", "read_hf_rows"]


# --------------------------------------------------------------------------------------------------------
# the ``hf_dataset`` source type: {"type": "hf_dataset", "path": ..., "split": None, "image_column": None,
# "text_column": None, "label_column": "label", "id_column": None, "groups_column": None} (neither input column:
# a labels-only table)


def _spec(opts: dict[str, Any], base_dir: Path, where: str) -> HFDatasetSpec:
    return HFDatasetSpec.from_decl(opts, base_dir=base_dir, where=where)


def _count(opts: dict[str, Any], base_dir: Path, where: str) -> int:
    return hf_row_count(_spec(opts, base_dir, where))


def _load(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
    spec = _spec(opts, base_dir, where)
    data = read_hf_rows(spec, rows)
    if spec.labels_only is not None:
        return SourceData(labels_only_rows(data.n_rows), data.labels, data.row_ids, data.groups, spec.groups_column,
                          spec.labels_only)
    return SourceData(data.inputs, data.labels, data.row_ids, data.groups, spec.groups_column)


def _groups(opts: dict[str, Any], base_dir: Path, where: str) -> list | None:
    if opts["groups_column"] is None:
        return None
    spec = _spec({**opts, "image_column": None, "text_column": None}, base_dir, where)  # no input cells read
    return read_hf_rows(spec).groups


def _labels_only(opts: dict[str, Any], base_dir: Path, where: str) -> str | None:
    return _spec(opts, base_dir, where).labels_only


def _files_recipe(opts: dict[str, Any], base_dir: Path, where: str, digests: FileDigests) -> dict[str, Any]:
    return {"type": "hf_dataset", **hf_recipe(_spec(opts, base_dir, where), opts, digests)}


FORMAT = SourceFormat(
    keys={"path": _REQUIRED, "split": None, "image_column": None, "text_column": None, "label_column": "label",
          "id_column": None, "groups_column": None},
    count=_count, load=_load, check=check_groups_column, groups_key="groups_column", groups=_groups,
    labels_only=_labels_only, files_recipe=_files_recipe,
)
