"""BenchmarkDataset: rows of inputs (features, precomputed embeddings, texts or images) with their targets.

Contract: a dataset has an explicit DatasetIdentity, at least two classes, unique row ids (str or int,
defaulting to the row order), one label per row encodable by the semantic label catalog, and finite
numeric inputs. Dense inputs stay dense and sparse inputs become CSR; nothing is copied to change dtype.
Texts and image paths are kept as ``RawInputs``, in-memory images as ``InMemoryImages``
(``vertebrae.data.constructors``, which also reads DataFrames and derives the identity of a subset).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.arrays import as_matrix, check_finite, encode_row_ids
from vertebrae.core.errors import ArtifactError, IdentityError, ValidationError
from vertebrae.core.fingerprint import canonical_json, sha256_hex
from vertebrae.core.identity import DatasetIdentity, grouped_key, require_identity
from vertebrae.core.inputs import RawInputs
from vertebrae.core.labels import LabelCatalog, describe_key, semantic_key, semantic_keys
from vertebrae.data.constructors import (
    DatasetBatch,
    InMemoryImages,
    dataframe_columns,
    image_paths,
    raw_inputs,
    select_rows,
    subset_identity,
    subset_targets,
    typed_labels,
)
from vertebrae.data.targets import TARGET_TYPES, Targets, build_targets

__all__ = ["BenchmarkDataset", "DatasetBatch", "InMemoryImages", "LabelledProtocol", "MODALITIES", "content_digest",
           "group_keys"]

MODALITIES = ("embedding", "features", "text", "image")


def group_keys(groups: Any, n_rows: int, row_name: Callable[[int], str]) -> tuple[str, ...]:
    """The semantic key of each row's group (str or int values); one group per row, else ValidationError."""
    if isinstance(groups, (str, bytes, Mapping)):
        raise ValidationError(f"groups must be a sequence with one group per row, got {type(groups).__name__}")
    values = list(groups.tolist() if isinstance(groups, np.ndarray) else groups)
    if len(values) != n_rows:
        raise ValidationError(f"{len(values)} groups for {n_rows} rows; give one group per row")
    return tuple(semantic_keys(values, row_name))


def content_digest(matrix: Any, targets: Targets, row_ids: Sequence[str]) -> str:
    """SHA-256 over the full content: matrix values (format, dtype, shape, bytes) or raw inputs (texts, image
    file bytes), targets and row ids."""
    import hashlib

    digest = hashlib.sha256()
    if isinstance(matrix, RawInputs):
        digest.update(f"raw|{matrix.digest()}".encode())
    elif sp.issparse(matrix):
        m = matrix.copy()
        m.sum_duplicates()
        m.sort_indices()
        digest.update(f"csr|{m.dtype}|{m.shape}".encode())
        for part in (m.data, m.indices.astype(np.int64), m.indptr.astype(np.int64)):
            digest.update(np.ascontiguousarray(part).astype(part.dtype.newbyteorder("<")).tobytes())
    else:
        digest.update(f"dense|{matrix.dtype}|{matrix.shape}".encode())
        digest.update(np.ascontiguousarray(matrix).astype(matrix.dtype.newbyteorder("<")).tobytes())
    digest.update(sha256_hex(canonical_json([targets.to_payload(), list(row_ids)])).encode())
    return digest.hexdigest()


@dataclass(frozen=True, eq=False)
class BenchmarkDataset:
    """Validated rows for the labelled protocol. Build it with ``from_embeddings``, ``from_arrays``,
    ``from_image_paths`` or ``from_dataframe``; ``subset(rows)`` and ``with_groups(...)`` derive new datasets."""

    inputs: np.ndarray | sp.csr_matrix
    targets: Targets
    row_ids: tuple[str, ...]
    identity: DatasetIdentity
    modality: str = "embedding"
    metadata: Mapping[str, Any] = field(default_factory=dict)
    groups: tuple[str, ...] | None = None
    groups_name: str | None = None
    target_declaration: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_embeddings(
        cls,
        embeddings: Any,
        labels: Any,
        *,
        identity: DatasetIdentity | None,
        row_ids: Sequence[Any] | None = None,
        target_type: str | None = None,
        label_names: Sequence[Any] | None = None,
        target_names: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> BenchmarkDataset:
        """Precomputed embeddings (dense or scipy sparse, kept sparse) with targets for every row.

        ``labels``: one label per row (classification), one label collection per row or a 0/1 indicator with
        ``label_names`` (multilabel), or numeric values with ``target_type="regression"``.
        """
        return cls._build(embeddings, labels, identity, row_ids, "embedding", target_type, label_names, target_names, metadata)

    @classmethod
    def from_arrays(
        cls,
        X: Any,
        y: Any,
        *,
        identity: DatasetIdentity | None,
        row_ids: Sequence[Any] | None = None,
        modality: str | None = None,
        target_type: str | None = None,
        label_names: Sequence[Any] | None = None,
        target_names: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> BenchmarkDataset:
        """Raw rows that an extractor turns into embeddings.

        - numeric features (e.g. for a scikit-learn pipeline): ``modality`` "features" (the default for numeric rows);
        - texts: a list (or 1-D array) of str with ``modality="text"``;
        - images for image models: file paths with ``modality="image"`` (each file must exist), or images held in
          memory: a uint8 array N x H x W x C (or N x H x W), or a list of PIL images / uint8 arrays;
        - ``RawInputs`` (e.g. a manifest's rows): the modality is their kind.

        Texts and paths are wrapped into ``RawInputs``, in-memory images into ``InMemoryImages`` (RGB uint8 rows).
        """
        X, modality = raw_inputs(X, modality, row_ids)
        return cls._build(X, y, identity, row_ids, modality, target_type, label_names, target_names, metadata)

    @classmethod
    def from_image_paths(
        cls,
        paths: Sequence[str | os.PathLike],
        labels: Any,
        *,
        identity: DatasetIdentity | None,
        row_ids: Sequence[Any] | None = None,
        base_dir: str | os.PathLike | None = None,
        target_type: str | None = None,
        label_names: Sequence[Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> BenchmarkDataset:
        """Image files for an image model, one label per file. Relative paths resolve against ``base_dir`` (default
        the working folder); a missing file is refused naming its row and path. A content identity hashes the
        files' bytes; nothing is read otherwise until an extractor decodes them."""
        inputs = image_paths(paths, row_ids, base_dir=base_dir)
        return cls._build(inputs, labels, identity, row_ids, "image", target_type, label_names, None, metadata)

    @classmethod
    def from_image_folder(cls, path: str | os.PathLike, *, identity: DatasetIdentity | None = None,
                          metadata: Mapping[str, Any] | None = None) -> BenchmarkDataset:
        """A folder with one sub-folder per class, as torchvision's ImageFolder reads it (classes sorted, the same
        image endings; row ids are paths relative to ``path``). ``identity`` None: the images' bytes, class names
        and row ids (hashed now)."""
        return cls._from_format({"type": "image_folder", "path": os.fspath(path)}, identity, metadata)

    @classmethod
    def from_hf_dataset(cls, path: str | os.PathLike, *, split: str | None = None, image_column: str | None = None,
                        text_column: str | None = None, label_column: str = "label", id_column: str | None = None,
                        groups_column: str | None = None, identity: DatasetIdentity | None = None,
                        metadata: Mapping[str, Any] | None = None) -> BenchmarkDataset:
        """A Hugging Face dataset as ``datasets.save_to_disk`` wrote it (or Arrow / Parquet files): one of
        ``image_column`` (an Image feature, image bytes or paths) or ``text_column``; ``label_column`` (a ClassLabel
        gives the label names); ``id_column`` (default the row order); ``groups_column`` (independence groups, as
        ``with_groups(..., name=groups_column)``). ``identity`` None: the files' bytes."""
        decl = {"type": "hf_dataset", "path": os.fspath(path), "split": split, "image_column": image_column,
                "text_column": text_column, "label_column": label_column, "id_column": id_column,
                "groups_column": groups_column}
        return cls._from_format(decl, identity, metadata)

    @classmethod
    def from_webdataset(cls, pattern: str, *, image_key: str = "jpg;jpeg;png;webp", label_key: str = "cls",
                        label_field: str | None = None, identity: DatasetIdentity | None = None,
                        metadata: Mapping[str, Any] | None = None) -> BenchmarkDataset:
        """WebDataset tar shards by brace pattern (``data/train-{000000..000099}.tar``): each sample's image under
        ``image_key`` (alternatives separated by ``;``) and its label under ``label_key`` (``cls``: an integer,
        ``txt``: text, ``json``: the ``label_field`` of an object); the sample key is the row id. ``identity``
        None: the shards' bytes."""
        decl = {"type": "webdataset", "path": pattern, "image_key": image_key, "label_key": label_key,
                "label_field": label_field}
        return cls._from_format(decl, identity, metadata)

    @classmethod
    def _from_format(cls, decl: dict[str, Any], identity: Any, metadata: Any) -> BenchmarkDataset:
        """Rows of a format source (relative paths: the working folder); ``identity`` None tracks its files
        (``DatasetIdentity.from_files`` of its recipe, hashed without a cache file)."""
        from vertebrae.core.file_digests import FileDigests
        from vertebrae.data.sources.files import source_files_recipe
        from vertebrae.data.sources import load_source

        where = str(decl["type"])
        data = load_source(decl, base_dir=Path.cwd(), where=where)
        if data.labels_only is not None:
            raise ValidationError(f"{data.labels_only}: a dataset built in Python needs its inputs; name the "
                                  "text_column or image_column (a labels-only table is for a config whose candidates "
                                  "read their own rows from files)")
        if identity is None:
            recipe = source_files_recipe(decl, base_dir=Path.cwd(), where=where, digests=FileDigests(None))
            identity = DatasetIdentity.from_files(recipe)
        dataset = cls._build(data.features, data.labels, identity, data.row_ids, data.features.kind, None, None, None,
                             metadata)
        return dataset if data.groups is None else dataset.with_groups(data.groups, name=data.groups_name)

    @classmethod
    def from_dataframe(
        cls,
        df: Any,
        *,
        label_col: Any,
        identity: DatasetIdentity | None,
        input_col: Any = None,
        feature_cols: Sequence[Any] | None = None,
        id_col: Any = None,
        modality: str | None = None,
        target_type: str | None = None,
        label_names: Sequence[Any] | None = None,
        target_names: Sequence[str] | None = None,
        base_dir: str | os.PathLike | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> BenchmarkDataset:
        """A pandas DataFrame: one row per sample.

        Inputs: ``feature_cols`` (numeric columns; default every column but the label and id columns), or
        ``input_col``, one column of texts (``modality="text"``), image file paths (``modality="image"``, relative
        to ``base_dir``) or in-memory images. ``label_col``: the label column (label collections per cell for
        multi-label); a list of columns is a 0/1 indicator with ``target_type="multilabel"`` (the column names are
        the labels) or several targets with ``target_type="regression"``. ``id_col``: row ids (default the row
        order). An empty cell, a non-numeric feature column or a missing column is refused naming the column and
        the row.
        """
        cols = dataframe_columns(df, label_col=label_col, input_col=input_col, feature_cols=feature_cols, id_col=id_col,
                                 modality=modality, target_type=target_type, base_dir=base_dir)
        return cls._build(cols.inputs, cols.labels, identity, cols.row_ids, cols.modality, target_type,
                          label_names if label_names is not None else cols.label_names,
                          target_names if target_names is not None else cols.target_names, metadata)

    @classmethod
    def _build(cls, inputs, labels, identity, row_ids, modality, target_type, label_names, target_names, metadata) -> BenchmarkDataset:
        identity = require_identity(identity)
        if modality not in MODALITIES:
            raise ValidationError(f"modality must be one of {MODALITIES}, got {modality!r}")
        if target_type is not None and target_type not in TARGET_TYPES:
            raise ValidationError(f"target_type must be one of {TARGET_TYPES}, got {target_type!r}")
        raw = isinstance(inputs, RawInputs)
        if raw != (modality in ("text", "image")):
            raise ValidationError(f"modality {modality!r} does not fit inputs of type {type(inputs).__name__}")
        matrix = inputs if raw else as_matrix(inputs, what=f"dataset {modality}")
        n_rows = matrix.shape[0]
        if n_rows == 0:
            raise ValidationError("dataset has no rows")
        keys = encode_row_ids(row_ids, n_rows, what="dataset")
        n_targets = labels.shape[0] if hasattr(labels, "shape") and getattr(labels, "ndim", 1) >= 1 else None
        if n_targets is None:
            if isinstance(labels, (str, bytes, Mapping)):
                raise ValidationError(f"labels must be a sequence with one entry per row, got {type(labels).__name__}")
            labels = list(labels)
            n_targets = len(labels)
        if n_targets != n_rows:
            raise ValidationError(f"dataset has {n_rows} rows but {n_targets} labels; give exactly one label per row")
        if not raw:
            check_finite(matrix, keys, what=f"dataset {modality}")
        targets = build_targets(labels, target_type, label_names=label_names, target_names=target_names)
        digest = content_digest(matrix, targets, keys)
        if identity.kind == "content":
            if identity.digest is not None and identity.digest != digest:
                raise IdentityError(
                    f"content identity digest {identity.digest} does not match the dataset content ({digest}); "
                    "the data changed since the identity was computed"
                )
            identity = identity.with_content_digest(digest)
        declaration = {
            "target_type": targets.target_type,
            "label_names": None if label_names is None else [semantic_key(name) for name in label_names],
            "target_names": None if target_names is None else [str(name) for name in target_names],
        }
        return cls(matrix, targets, keys, identity, modality, dict(metadata or {}), target_declaration=declaration)

    def with_groups(self, groups: Sequence[Any], *, name: str = "group") -> BenchmarkDataset:
        """The same dataset with independence groups (str or int per row), forwarded to Separatix and metrics.

        The groups (and their ``name``) are part of the dataset's identity: ``identity_key()`` and every
        fingerprint built on it differ from the ungrouped dataset's and from another grouping's."""
        keys = group_keys(groups, self.n_rows, lambda i: f"group of row {describe_key(self.row_ids[i])}")
        if not isinstance(name, str) or not name.strip():
            raise ValidationError(f"with_groups: name must be a non-empty string, got {name!r}")
        return replace(self, groups=keys, groups_name=name)

    def subset(self, rows: Any) -> BenchmarkDataset:
        """The selected rows (integer positions in the order given, or a boolean mask) as a new dataset.

        Its identity derives from this dataset's identity key and the selected row ids, so its identity key and
        every fingerprint built on it differ from this dataset's, and the same rows give the same identity (a
        subset of an ephemeral dataset is ephemeral). Classes or labels absent from the subset leave its catalog;
        groups follow their rows.
        """
        index = select_rows(rows, self.n_rows)
        row_ids = tuple(self.row_ids[i] for i in index)
        targets, kept_labels = subset_targets(self.targets, index)
        declaration = dict(self.target_declaration)
        if kept_labels is not None and declaration.get("label_names") is not None:
            declaration["label_names"] = kept_labels
        return replace(
            self,
            inputs=self.inputs[index],
            targets=targets,
            row_ids=row_ids,
            identity=subset_identity(self.identity, row_ids),
            metadata=dict(self.metadata),
            groups=None if self.groups is None else tuple(self.groups[i] for i in index),
            target_declaration=declaration,
        )

    def iter_batches(self, batch_size: int = 32) -> Iterator[DatasetBatch]:
        """Consecutive batches of ``batch_size`` rows (the last may be shorter), in row order: each a
        ``DatasetBatch`` with ``start``, ``stop``, ``inputs`` (sliced like the dataset's), ``row_ids``, ``labels`` (the
        original label values) and ``groups``."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValidationError(f"iter_batches: batch_size must be a positive integer, got {batch_size!r}")
        size = int(batch_size)
        for start in range(0, self.n_rows, size):
            stop = min(start + size, self.n_rows)
            yield DatasetBatch(start, stop, self.inputs[start:stop], self.row_ids[start:stop],
                               typed_labels(self.targets, start, stop),
                               None if self.groups is None else self.groups[start:stop])

    @property
    def target_type(self) -> str:
        return self.targets.target_type

    @property
    def catalog(self) -> LabelCatalog | None:
        return self.targets.catalog

    @property
    def label_keys(self) -> np.ndarray:
        """Semantic keys of the single-label targets (classification only)."""
        if self.target_type != "classification":
            raise ValidationError(f"label_keys exist for classification targets only, not {self.target_type}")
        return self.targets.values

    @property
    def n_rows(self) -> int:
        return self.inputs.shape[0]

    @property
    def is_sparse(self) -> bool:
        return sp.issparse(self.inputs)

    @property
    def is_raw(self) -> bool:
        return isinstance(self.inputs, RawInputs)

    def identity_key(self) -> str:
        """The identity's key, with the groups folded in when the dataset has groups (``grouped_key``)."""
        if self.groups is None:
            return self.identity.key()
        return grouped_key(self.identity.key(), self.groups_name or "group", self.groups)

    def class_counts(self) -> dict[str, int]:
        """Rows per class or occurrences per label, keyed by semantic key in catalog order ({} for regression)."""
        return self.targets.counts()

    def rows(self, start: int, stop: int) -> np.ndarray | sp.csr_matrix:
        return self.inputs[start:stop]

    def summary(self) -> dict[str, Any]:
        """What reports say of the dataset; ``name`` (a person's name for it: ``metadata["name"]``, which a config's
        declaration sets, ``vertebrae.data.declared.names``) only where one is known."""
        name = self.metadata.get("name")
        return {
            **({"name": name} if isinstance(name, str) and name else {}),
            "identity": self.identity_key(),
            "n_rows": self.n_rows,
            "n_features": None if self.is_raw else int(self.inputs.shape[1]),
            "modality": self.modality,
            "sparse": self.is_sparse,
            "groups": None if self.groups is None else {"name": self.groups_name, "n_groups": len(set(self.groups))},
            **self.targets.summary(),
        }


@dataclass(frozen=True)
class LabelledProtocol:
    """The targets every candidate is scored against, in row order, with optional independence groups."""

    row_ids: tuple[str, ...]
    targets: Targets
    dataset_summary: dict[str, Any]
    groups: tuple[str, ...] | None = None

    def to_payload(self) -> dict[str, Any]:
        return {
            "row_ids": list(self.row_ids),
            "targets": self.targets.to_payload(),
            "groups": None if self.groups is None else list(self.groups),
            "dataset_summary": self.dataset_summary,
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any], *, source: str = "protocol") -> LabelledProtocol:
        try:
            targets = Targets.from_payload(payload["targets"])
        except (KeyError, ValueError) as exc:
            raise ArtifactError(f"{source}: invalid targets: {exc}") from None
        groups = payload.get("groups")
        if targets.n_rows != len(payload["row_ids"]) or (groups is not None and len(groups) != targets.n_rows):
            raise ArtifactError(f"{source}: targets, groups and row ids have different lengths")
        return cls(tuple(payload["row_ids"]), targets, dict(payload["dataset_summary"]), None if groups is None else tuple(groups))
