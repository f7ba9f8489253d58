"""What ``BenchmarkDataset``'s convenience constructors and views are built from (pure functions, no dataset class).

- ``raw_inputs(X, modality, row_ids)``: what a user naturally holds, as dataset inputs. Texts (a list or 1-D array of
  str, ``modality="text"``) and image file paths (``modality="image"``, each file must exist) become ``RawInputs``;
  in-memory images (a uint8 array N x H x W x C or N x H x W, or a list of PIL images / uint8 H x W (x C) arrays)
  become ``InMemoryImages``; numeric rows are returned as they are (``modality`` "features" or "embedding").
- ``InMemoryImages``: RawInputs of kind "image" whose rows are RGB uint8 arrays instead of file paths; model
  extractors decode them like files (``torch_runtime._ImageRows``), and a content identity hashes the pixels.
- ``dataframe_columns(df, ...)``: a pandas DataFrame's feature columns, or text / image-path column, its label
  column(s) and id column, checked cell by cell (errors name the column and the row).
- ``select_rows``, ``subset_identity``, ``subset_targets``: what ``BenchmarkDataset.subset(rows)`` is made of. A
  subset is a new dataset: its identity derives from the parent's identity key and the selected row ids (the same
  rows of the same parent give the same identity; an ephemeral parent gives an ephemeral subset).
- ``typed_labels(targets, start, stop)``: the rows' labels as the user's values (``iter_batches``).
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.errors import ValidationError
from vertebrae.core.fingerprint import canonical_json, sha256_hex
from vertebrae.core.identity import DatasetIdentity
from vertebrae.core.inputs import RawInputs
from vertebrae.core.labels import describe_key
from vertebrae.data.targets import Targets, build_targets

SUBSET_SCHEMA = "vertebrae.subset/v1"


# ---------------------------------------------------------------------------------------------------------
# in-memory images


def _image_array(item: Any, rid: Any, what: str) -> np.ndarray:
    """One in-memory image as a read-only H x W x 3 uint8 array (grayscale repeated, alpha dropped)."""
    if hasattr(item, "convert") and hasattr(item, "size"):  # a PIL image
        array = np.asarray(item.convert("RGB"))
    elif isinstance(item, np.ndarray):
        if item.dtype != np.uint8:
            raise ValidationError(f"{what}: image of row {rid!r} has dtype {item.dtype}; in-memory images must be uint8 "
                                  "(0-255): scale and cast with .astype(np.uint8)")
        if item.ndim == 2 or (item.ndim == 3 and item.shape[2] == 1):
            array = np.repeat(item.reshape(item.shape[0], item.shape[1], 1), 3, axis=2)
        elif item.ndim == 3 and item.shape[2] in (3, 4):
            array = item[:, :, :3]
        else:
            raise ValidationError(f"{what}: image of row {rid!r} has shape {item.shape}; expected H x W, H x W x 1, "
                                  "H x W x 3 or H x W x 4")
    else:
        raise ValidationError(f"{what}: row {rid!r} holds {type(item).__name__}; expected a PIL image or a uint8 array")
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise ValidationError(f"{what}: image of row {rid!r} is empty (shape {array.shape})")
    array = np.ascontiguousarray(array)
    array.flags.writeable = False
    return array


@dataclass(frozen=True, eq=False)
class InMemoryImages(RawInputs):
    """Images held in memory: ``values`` are RGB uint8 arrays (H x W x 3), ``ids`` the rows' declared ids."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", tuple(self.values))
        object.__setattr__(self, "ids", tuple(self.ids))
        if self.kind != "image":
            raise ValidationError(f"InMemoryImages.kind must be 'image', got {self.kind!r}")
        if len(self.values) != len(self.ids):
            raise ValidationError(f"InMemoryImages: {len(self.values)} images for {len(self.ids)} ids")
        for rid, value in zip(self.ids, self.values):
            if not (isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.ndim == 3 and value.shape[2] == 3):
                raise ValidationError(f"InMemoryImages: row {rid!r} is not an H x W x 3 uint8 array; build it with "
                                      "InMemoryImages.of(...)")

    @classmethod
    def of(cls, images: Any, ids: Sequence[Any] | None = None, *, what: str = "images") -> InMemoryImages:
        """From a uint8 array N x H x W (x C) or a sequence of PIL images / uint8 arrays."""
        items = list(images) if isinstance(images, np.ndarray) else list(images)
        ids = tuple(range(len(items))) if ids is None else tuple(ids)
        if len(ids) != len(items):
            ids = tuple(range(len(items)))
        return cls("image", tuple(_image_array(item, rid, what) for item, rid in zip(items, ids)), ids)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, (int, np.integer)):
            return self.values[key]
        if isinstance(key, slice):
            return InMemoryImages("image", self.values[key], self.ids[key])
        index = np.asarray(key)
        if index.dtype == bool:
            index = np.flatnonzero(index)
        if index.dtype.kind not in "iu" or index.ndim != 1:
            raise ValidationError(f"InMemoryImages cannot be indexed by {key!r}")
        return InMemoryImages("image", tuple(self.values[i] for i in index), tuple(self.ids[i] for i in index))

    def tolist(self) -> list[np.ndarray]:
        return list(self.values)

    def __repr__(self) -> str:
        shapes = sorted({value.shape for value in self.values})
        shown = ", ".join(str(s) for s in shapes[:3]) + (", ..." if len(shapes) > 3 else "")
        return f"InMemoryImages({len(self)} RGB uint8 images of shape {shown})"

    def digest(self) -> str:
        """SHA-256 of every image's shape and pixels, in row order."""
        digest = hashlib.sha256(f"vertebrae.in-memory-images/v1|{len(self)}|".encode())
        for value in self.values:
            digest.update(f"{value.shape}|".encode())
            digest.update(hashlib.sha256(value.tobytes()).digest())
        return digest.hexdigest()


# ---------------------------------------------------------------------------------------------------------
# inputs as users hold them


def _is_path(item: Any) -> bool:
    return isinstance(item, (str, os.PathLike))


def _is_image(item: Any) -> bool:
    return (hasattr(item, "convert") and hasattr(item, "size")) or isinstance(item, np.ndarray)


def _ids_for(row_ids: Sequence[Any] | None, n: int) -> tuple[Any, ...]:
    """Declared ids for messages (row order when absent, or when their count is wrong: the dataset reports that)."""
    if row_ids is None:
        return tuple(range(n))
    ids = tuple(row_ids.tolist() if isinstance(row_ids, np.ndarray) else row_ids)
    return ids if len(ids) == n else tuple(range(n))


def image_paths(paths: Any, row_ids: Sequence[Any] | None = None, *, base_dir: str | os.PathLike | None = None,
                what: str = "paths") -> RawInputs:
    """RawInputs of absolute image paths (relative ones resolved against ``base_dir``, default the working folder);
    a non-path entry or a missing file is refused naming the row and the path."""
    if isinstance(paths, (str, bytes, os.PathLike, Mapping)) or not hasattr(paths, "__len__"):
        raise ValidationError(f"{what} must be a sequence of image file paths, got {type(paths).__name__}")
    items = list(paths.tolist() if isinstance(paths, np.ndarray) else paths)
    ids = _ids_for(row_ids, len(items))
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    resolved = []
    for rid, item in zip(ids, items):
        if not _is_path(item):
            raise ValidationError(f"{what}: row {rid!r} holds {type(item).__name__}, expected an image file path")
        path = Path(item).expanduser()
        path = path if path.is_absolute() else base / path
        if not path.is_file():
            raise ValidationError(f"{what}: row {rid!r}: image file not found: {path}")
        resolved.append(os.path.abspath(path))
    return RawInputs.images(resolved, ids)


def _texts(items: list[Any], ids: tuple[Any, ...], what: str) -> RawInputs:
    for rid, item in zip(ids, items):
        if not isinstance(item, str):
            raise ValidationError(f"{what}: row {rid!r} holds {type(item).__name__} {item!r:.60}; modality 'text' "
                                  "needs one str per row")
    return RawInputs.texts(items, ids)


def raw_inputs(X: Any, modality: str | None, row_ids: Sequence[Any] | None, *, what: str = "X",
               base_dir: str | os.PathLike | None = None) -> tuple[Any, str]:
    """``(inputs, modality)`` for ``BenchmarkDataset``: RawInputs for texts / image paths, InMemoryImages for images
    held in memory, numeric rows unchanged. ``modality`` None infers it where the rows leave no doubt (numeric ->
    "features", a 4-D uint8 array or PIL images -> "image"); strings need "text" or "image" said explicitly."""
    if isinstance(X, RawInputs):
        if modality not in (None, X.kind):
            raise ValidationError(f"modality {modality!r} does not fit {what}: RawInputs of kind {X.kind!r}")
        return X, X.kind
    if modality not in (None, "text", "image"):
        return X, modality
    if sp.issparse(X):
        if modality is None:
            return X, "features"
        raise ValidationError(f"modality {modality!r} does not fit {what}: a sparse matrix holds numeric rows; use "
                              "modality='features' (or 'embedding')")
    if isinstance(X, np.ndarray):
        if X.dtype == np.uint8 and X.ndim in (3, 4) and modality in (None, "image"):
            return InMemoryImages.of(X, _ids_for(row_ids, X.shape[0]), what=what), "image"
        if modality is None:
            if not (X.ndim == 1 and X.dtype.kind in "UO"):
                return X, "features"  # numeric rows (anything else is refused by the matrix check)
        elif X.ndim == 4 and modality == "image":
            raise ValidationError(f"{what}: in-memory images must be a uint8 array N x H x W x C, got dtype {X.dtype}; "
                                  "scale to 0-255 and cast with .astype(np.uint8)")
        elif X.dtype.kind in "biuf":
            raise ValidationError(f"modality {modality!r} does not fit {what}: a numeric array of shape {X.shape}; "
                                  "texts and image paths are str, in-memory images a uint8 array N x H x W x C")
        elif X.ndim != 1:
            raise ValidationError(f"{what}: texts or image paths must be a 1-D sequence, got an array of shape {X.shape}")
    if isinstance(X, (str, bytes, Mapping)) or not hasattr(X, "__len__"):
        raise ValidationError(f"{what} must hold one row per sample, got {type(X).__name__}")
    items = list(X.tolist() if isinstance(X, np.ndarray) else X)
    ids = _ids_for(row_ids, len(items))
    if not items:
        raise ValidationError("dataset has no rows")
    if modality is None:
        if all(_is_image(item) and not isinstance(item, np.ndarray) for item in items):
            return InMemoryImages.of(items, ids, what=what), "image"
        if all(_is_path(item) for item in items):
            raise ValidationError(f"{what} holds strings: pass modality='text' for texts or modality='image' for image "
                                  "file paths")
        return X, "features"  # numeric nested lists; anything else is refused by the matrix check
    if modality == "text":
        return _texts(items, ids, what), "text"
    if _is_path(items[0]):
        for rid, item in zip(ids, items):
            if not _is_path(item):
                raise ValidationError(f"{what}: row {rid!r} holds {type(item).__name__} but row {ids[0]!r} an image path; "
                                      "give all paths or all in-memory images")
        return image_paths(items, ids, base_dir=base_dir, what=what), "image"
    return InMemoryImages.of(items, ids, what=what), "image"


# ---------------------------------------------------------------------------------------------------------
# pandas


def _missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    try:
        import pandas as pd

        return bool(pd.api.types.is_scalar(value) and pd.isna(value))
    except (ImportError, TypeError, ValueError):
        return False


def _at(df: Any, i: int) -> str:
    """Row ``i`` as a message names it: its position and its index label."""
    label = df.index[i]
    label = label.item() if isinstance(label, np.generic) else label
    return f"row {i} (index {label!r})"


def _column(df: Any, name: Any, argument: str) -> Any:
    if name not in df.columns:
        shown = ", ".join(repr(c) for c in list(df.columns)[:20])
        raise ValidationError(f"from_dataframe: {argument}={name!r} is not a column of the DataFrame (columns: {shown})")
    column = df[name]
    if getattr(column, "ndim", 1) != 1:
        raise ValidationError(f"from_dataframe: {argument}={name!r} names more than one column (duplicate column name)")
    return column


def _cells(df: Any, name: Any, argument: str) -> list[Any]:
    """The column's cells; an empty cell (None, NaN, NA) is refused naming the column and the row."""
    values = _column(df, name, argument).tolist()
    for i, value in enumerate(values):
        if _missing(value):
            raise ValidationError(f"from_dataframe: column {name!r} ({argument}) is empty at {_at(df, i)}")
    return values


def _names(value: Any, argument: str) -> list[Any]:
    if isinstance(value, (list, tuple)):
        if not value:
            raise ValidationError(f"from_dataframe: {argument} must name at least one column")
        return list(value)
    return [value]


@dataclass(frozen=True)
class FrameColumns:
    """What ``from_dataframe`` read: rows (numeric matrix or raw inputs), labels, row ids and the declaration."""

    inputs: Any
    modality: str
    labels: Any
    row_ids: list[Any] | None
    label_names: list[Any] | None
    target_names: list[str] | None


def dataframe_columns(df: Any, *, label_col: Any, input_col: Any = None, feature_cols: Sequence[Any] | None = None,
                      id_col: Any = None, modality: str | None = None, target_type: str | None = None,
                      base_dir: str | os.PathLike | None = None) -> FrameColumns:
    """Columns of a pandas DataFrame (see ``BenchmarkDataset.from_dataframe``)."""
    if not (hasattr(df, "columns") and hasattr(df, "index") and hasattr(df, "iloc")):
        raise ValidationError(f"from_dataframe needs a pandas DataFrame, got {type(df).__name__}")
    if len(df) == 0:
        raise ValidationError("from_dataframe: the DataFrame has no rows")
    if input_col is not None and feature_cols is not None:
        raise ValidationError("from_dataframe: give input_col (a text or image column) or feature_cols, not both")
    labels_given = _names(label_col, "label_col")
    taken = set(labels_given) | ({id_col} if id_col is not None else set())
    row_ids = None if id_col is None else _cells(df, id_col, "id_col")
    label_names = target_names = None
    if len(labels_given) == 1 and not isinstance(label_col, (list, tuple)):
        labels: Any = _cells(df, label_col, "label_col")
        if target_type == "regression":
            labels = _numeric(df, [label_col], "label_col")[:, 0]
    elif target_type == "regression":
        labels, target_names = _numeric(df, labels_given, "label_col"), [str(c) for c in labels_given]
    elif target_type == "multilabel":
        labels, label_names = _numeric(df, labels_given, "label_col"), labels_given
    else:
        raise ValidationError("from_dataframe: several label columns need target_type='multilabel' (0/1 indicator "
                              "columns) or target_type='regression' (one column per target)")
    if input_col is not None:
        if input_col in taken:
            raise ValidationError(f"from_dataframe: input_col={input_col!r} is also the label or id column")
        cells = _cells(df, input_col, "input_col")
        if modality is None and not all(_is_image(c) and not isinstance(c, str) for c in cells):
            raise ValidationError(f"from_dataframe: input_col={input_col!r} needs modality='text' (texts) or "
                                  "modality='image' (image file paths)")
        inputs, modality = raw_inputs(cells, modality, row_ids, what=f"column {input_col!r}", base_dir=base_dir)
    else:
        if modality not in (None, "features", "embedding"):
            raise ValidationError(f"from_dataframe: modality {modality!r} needs input_col (one text or image column)")
        columns = list(feature_cols) if feature_cols is not None else [c for c in df.columns if c not in taken]
        if not columns:
            raise ValidationError("from_dataframe: no feature columns; pass feature_cols=[...] or input_col=...")
        for column in columns:
            if column in taken:
                raise ValidationError(f"from_dataframe: feature column {column!r} is also the label or id column")
        inputs, modality = _numeric(df, columns, "feature_cols"), modality or "features"
    return FrameColumns(inputs, modality, labels, row_ids, label_names, target_names)


def _numeric(df: Any, columns: Sequence[Any], argument: str) -> np.ndarray:
    """A float64 matrix of the columns; a non-numeric column or an empty / non-finite cell is named."""
    out = np.empty((len(df), len(columns)), dtype=np.float64)
    for j, name in enumerate(columns):
        column = _column(df, name, argument)
        kind = getattr(column.dtype, "kind", "O")
        if kind not in "biuf":
            hint = "" if argument != "feature_cols" else "; pass feature_cols=[...] or input_col=... for a text column"
            raise ValidationError(f"from_dataframe: column {name!r} ({argument}) is not numeric (dtype {column.dtype}){hint}")
        values = column.to_numpy(dtype=np.float64, na_value=np.nan)
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            i = int(bad[0])
            raise ValidationError(f"from_dataframe: column {name!r} ({argument}) holds {float(values[i])!r} at "
                                  f"{_at(df, i)}; every cell must be a finite number")
        out[:, j] = values
    return out


# ---------------------------------------------------------------------------------------------------------
# subsets and batches


def select_rows(rows: Any, n_rows: int) -> np.ndarray:
    """Row positions (int64) from integer positions or a boolean mask of length ``n_rows``; refuses an empty
    selection, positions out of range and repeated rows, naming them."""
    if isinstance(rows, slice):
        index = np.arange(n_rows)[rows]
    else:
        if isinstance(rows, (str, bytes, Mapping)) or not hasattr(rows, "__len__"):
            raise ValidationError(f"subset: rows must be integer positions or a boolean mask, got {type(rows).__name__}")
        index = np.asarray(rows.tolist() if hasattr(rows, "tolist") else list(rows))
        if index.dtype == bool:
            if index.shape != (n_rows,):
                raise ValidationError(f"subset: a boolean mask needs one entry per row ({n_rows}), got shape {index.shape}")
            index = np.flatnonzero(index)
        elif index.size == 0:
            index = index.astype(np.int64)
        elif index.dtype.kind not in "iu" or index.ndim != 1:
            raise ValidationError(f"subset: rows must be integer positions or a boolean mask, got {rows!r:.80}")
    index = index.astype(np.int64)
    if index.size == 0:
        raise ValidationError("subset: no rows selected; a dataset needs at least one row")
    outside = index[(index < 0) | (index >= n_rows)]
    if outside.size:
        raise ValidationError(f"subset: row position(s) {outside[:10].tolist()} outside 0..{n_rows - 1}")
    unique, counts = np.unique(index, return_counts=True)
    if (counts > 1).any():
        raise ValidationError(f"subset: row position(s) {unique[counts > 1][:10].tolist()} selected more than once")
    return index


def subset_identity(parent: DatasetIdentity, selected_row_ids: Sequence[str]) -> DatasetIdentity:
    """The identity of a subset: derived from the parent's key and the selected row ids (in order)."""
    recipe = {"schema": SUBSET_SCHEMA, "parent": parent.key(), "row_ids": list(selected_row_ids)}
    if not parent.reusable:
        return DatasetIdentity("ephemeral", digest=sha256_hex(canonical_json(recipe)))
    base = parent.dataset_id if parent.dataset_id else parent.kind
    return DatasetIdentity.from_manifest(f"{base}.subset", recipe)


def subset_targets(targets: Targets, index: np.ndarray) -> tuple[Targets, list[str] | None]:
    """The targets of the selected rows; classes and labels absent from the subset leave its catalog. Returns the
    targets and, for multi-label targets, the kept labels' keys (the subset's declared label names)."""
    kind = targets.target_type
    if kind == "regression":
        values = targets.values[index]
        return build_targets(values, "regression", target_names=list(targets.names)), None
    catalog = targets.catalog
    if kind == "classification":
        return build_targets([catalog.value(k) for k in targets.values[index]], "classification"), None
    indicator = targets.values[index]
    kept = np.flatnonzero(np.asarray(indicator.sum(axis=0)).ravel() > 0)
    names = [catalog.value(catalog.keys[j]) for j in kept]
    return build_targets(indicator[:, kept], "multilabel", label_names=names), [catalog.keys[j] for j in kept]


def typed_labels(targets: Targets, start: int, stop: int) -> Any:
    """Labels of rows ``start:stop`` as the user's values: a list (classification), a list of tuples (multilabel)
    or the float array (regression)."""
    if targets.target_type == "regression":
        return targets.values[start:stop]
    catalog = targets.catalog
    if targets.target_type == "classification":
        return [catalog.value(k) for k in targets.values[start:stop]]
    block = targets.values[start:stop]
    return [tuple(catalog.value(catalog.keys[j]) for j in block.indices[block.indptr[i]:block.indptr[i + 1]])
            for i in range(block.shape[0])]


@dataclass(frozen=True)
class DatasetBatch:
    """Rows ``start:stop`` of a dataset: their inputs, row ids (semantic keys), labels (the user's values) and groups."""

    start: int
    stop: int
    inputs: Any
    row_ids: tuple[str, ...]
    labels: Any
    groups: tuple[str, ...] | None = None

    def __len__(self) -> int:
        return self.stop - self.start

    def describe_rows(self) -> list[str]:
        return [describe_key(k) for k in self.row_ids]
