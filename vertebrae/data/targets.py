"""Targets of the labelled protocol: single-label classes, multi-label sets, or a regression target.

- classification: one label per row, stored as semantic keys (object array) with the label catalog;
- multilabel: a CSR 0/1 indicator (rows x labels, columns in catalog order); every row has >= 1 label
  and every label occurs at least once;
- regression: finite float64 values, shape (n,) or (n, t), with target names. Only ever explicit: numeric
  labels are classes unless ``target_type="regression"`` is asked for.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.errors import LabelError, ValidationError
from vertebrae.core.labels import LabelCatalog

TARGET_TYPES = ("classification", "multilabel", "regression")
_SET_TYPES = (list, tuple, set, frozenset)


def _as_list(values: Any) -> list:
    if isinstance(values, (str, bytes, Mapping)):
        raise ValidationError(f"targets must be a sequence with one entry per row, got {type(values).__name__}")
    return list(values.tolist() if isinstance(values, np.ndarray) else values)


def infer_target_type(y: Any) -> str:
    """multilabel for a 2-D indicator or a sequence of label collections, else classification (never regression)."""
    if sp.issparse(y) or (isinstance(y, np.ndarray) and y.ndim == 2):
        return "multilabel"
    if not isinstance(y, (str, bytes, Mapping, np.ndarray)):
        items = list(y)
        if items and all(isinstance(item, _SET_TYPES) for item in items):
            return "multilabel"
    return "classification"


@dataclass(frozen=True, eq=False)
class Targets:
    """Validated targets aligned with the dataset rows (see module docstring)."""

    target_type: str
    values: np.ndarray | sp.csr_matrix
    catalog: LabelCatalog | None = None
    names: tuple[str, ...] = ()

    @property
    def n_rows(self) -> int:
        return self.values.shape[0]

    def subset(self, rows: Sequence[int] | np.ndarray) -> Targets:
        rows = np.asarray(rows, dtype=np.int64)
        return Targets(self.target_type, self.values[rows], self.catalog, self.names)

    def counts(self) -> dict[str, int]:
        """Rows per class (classification) or occurrences per label (multilabel); empty for regression."""
        if self.target_type == "classification":
            found = Counter(str(key) for key in self.values.tolist())  # not astype(str): NumPy drops trailing NULs
            return {key: int(found.get(key, 0)) for key in self.catalog.keys}
        if self.target_type == "multilabel":
            occurrences = np.asarray(self.values.sum(axis=0)).ravel()
            return {key: int(n) for key, n in zip(self.catalog.keys, occurrences)}
        return {}

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"target_type": self.target_type}
        if self.catalog is not None:
            out.update({"n_classes": len(self.catalog), "class_counts": self.counts(),
                        "labels": {key: self.catalog.display(key) for key in self.catalog.keys}})
        else:
            out["target_names"] = list(self.names)
        return out

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"target_type": self.target_type}
        if self.target_type == "classification":
            payload.update(catalog=self.catalog.to_dict(), label_keys=[str(k) for k in self.values])
        elif self.target_type == "multilabel":
            payload.update(catalog=self.catalog.to_dict(), indptr=self.values.indptr.tolist(), indices=self.values.indices.tolist())
        else:
            payload.update(names=list(self.names), values=self.values.tolist())
        return payload

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Targets:
        kind = payload.get("target_type")
        if kind == "classification":
            catalog = LabelCatalog.from_dict(payload["catalog"])
            keys = np.asarray(payload["label_keys"], dtype=object)
            unknown = sorted(set(keys.tolist()) - set(catalog.keys))
            if unknown:
                raise ValidationError(f"label keys not in the catalog: {unknown[:3]}")
            return cls(kind, keys, catalog)
        if kind == "multilabel":
            catalog = LabelCatalog.from_dict(payload["catalog"])
            indptr, indices = np.asarray(payload["indptr"], np.int64), np.asarray(payload["indices"], np.int64)
            n_labels = len(catalog)
            if (indptr.ndim != 1 or len(indptr) < 1 or indptr[0] != 0 or indptr[-1] != len(indices)
                    or np.any(np.diff(indptr) < 1)):
                raise ValidationError("multi-label indicator: malformed indptr or a row without labels")
            if len(indices) and (indices.min() < 0 or indices.max() >= n_labels):
                raise ValidationError(f"multi-label indicator: label column outside the catalog of {n_labels} labels")
            within_row = np.diff(indices) > 0
            row_starts = np.zeros(len(indices), dtype=bool)
            row_starts[indptr[:-1]] = True
            if not np.all(within_row | row_starts[1:]):
                raise ValidationError("multi-label indicator: a row lists a label twice or out of order")
            data = np.ones(len(indices), dtype=np.int8)
            return cls(kind, sp.csr_matrix((data, indices, indptr), shape=(len(indptr) - 1, len(catalog))), catalog)
        if kind == "regression":
            return regression_targets(np.asarray(payload["values"], dtype=np.float64), target_names=payload["names"])
        raise ValidationError(f"unknown target type {kind!r}; expected one of {TARGET_TYPES}")


def classification_targets(labels: Any) -> Targets:
    labels = _as_list(labels)
    try:
        catalog = LabelCatalog.from_values(labels)
    except LabelError as exc:
        raise LabelError(f"dataset labels: {exc}") from None
    if len(catalog) == 1:
        raise ValidationError(f"dataset has a single class ({catalog.display(catalog.keys[0])!r}); class separation needs at least 2 classes")
    return Targets("classification", catalog.encode(labels), catalog)


def multilabel_targets(y: Any, label_names: Sequence[Any] | None = None) -> Targets:
    """From a 0/1 indicator (dense or sparse) with ``label_names``, or from one label collection per row."""
    if sp.issparse(y) or (isinstance(y, np.ndarray) and y.ndim == 2):
        indicator = sp.csr_matrix(y, copy=True)
        if label_names is None or len(label_names) != indicator.shape[1]:
            raise ValidationError(f"a multi-label indicator with {indicator.shape[1]} columns needs label_names, one per column")
        indicator.sum_duplicates()
        if indicator.nnz and not np.isin(indicator.data, (0, 1)).all():
            bad = np.flatnonzero(~np.isin(indicator.data, (0, 1)))[0]
            row = int(np.searchsorted(indicator.indptr, bad, side="right") - 1)
            raise ValidationError(f"multi-label indicator must be 0/1; row {row} holds {indicator.data[bad]!r}")
        indicator.eliminate_zeros()
        names = _as_list(label_names)
        catalog = LabelCatalog.from_values(names)
        if len(catalog) != len(names):
            raise ValidationError("label_names holds duplicates")
        order = [catalog.index(key) for key in catalog.encode(names)]
        indicator = indicator[:, np.argsort(order)]
    else:
        rows = _as_list(y)
        for i, row in enumerate(rows):
            if not isinstance(row, _SET_TYPES):
                raise ValidationError(f"multi-label row {i} must be a list, tuple or set of labels, got {row!r}")
        try:
            catalog = LabelCatalog.from_values([label for row in rows for label in row])
        except LabelError as exc:
            raise LabelError(f"multi-label targets: {exc}") from None
        indptr, indices = [0], []
        for row in rows:
            cols = sorted({catalog.index(key) for key in catalog.encode(list(row))})
            indices += cols
            indptr.append(len(indices))
        indicator = sp.csr_matrix((np.ones(len(indices), np.int8), indices, indptr), shape=(len(rows), len(catalog)))
    indicator = sp.csr_matrix(indicator, dtype=np.int8)
    indicator.sort_indices()  # column reordering may leave them unsorted; payloads require sorted rows
    empty = np.flatnonzero(np.diff(indicator.indptr) == 0)
    if empty.size:
        raise ValidationError(f"multi-label rows need at least one label; row(s) {empty[:10].tolist()} have none")
    unused = [catalog.display(key) for key, n in zip(catalog.keys, np.asarray(indicator.sum(axis=0)).ravel()) if n == 0]
    if unused:
        raise ValidationError(f"multi-label targets: label(s) {unused[:10]} never occur; drop them from label_names")
    if len(catalog) < 2:
        raise ValidationError("multi-label targets need at least 2 labels")
    return Targets("multilabel", indicator, catalog)


def regression_targets(y: Any, target_names: Sequence[str] | None = None) -> Targets:
    """Finite numeric targets, shape (n,) or (n, t); names default to target_0..target_{t-1}."""
    values = np.asarray(y)
    if values.dtype.kind not in "iuf" or values.ndim not in (1, 2):
        raise ValidationError(f"regression targets must be a numeric 1-D or 2-D array, got dtype {values.dtype} shape {values.shape}")
    values = values.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(values.reshape(len(values), -1)).all(axis=1))
    if bad.size:
        raise ValidationError(f"regression targets must be finite; row(s) {bad[:10].tolist()} hold NaN or infinity")
    width = 1 if values.ndim == 1 else values.shape[1]
    names = tuple(str(n) for n in target_names) if target_names is not None else tuple(f"target_{j}" for j in range(width))
    if len(names) != width or len(set(names)) != width:
        raise ValidationError(f"target_names must be {width} distinct names, got {list(names)}")
    flat = values.reshape(len(values), -1)
    if len(values) >= 2 and np.all((flat == flat[0]).all(axis=0)):
        raise ValidationError("regression target is constant; there is nothing to separate")
    return Targets("regression", values, None, names)


def build_targets(y: Any, target_type: str | None = None, *, label_names: Sequence[Any] | None = None,
                  target_names: Sequence[str] | None = None) -> Targets:
    """Targets of the requested (or inferred, never regression) type."""
    kind = target_type or infer_target_type(y)
    if kind not in TARGET_TYPES:
        raise ValidationError(f"target_type must be one of {TARGET_TYPES}, got {kind!r}")
    if kind == "classification":
        return classification_targets(y)
    if kind == "multilabel":
        return multilabel_targets(y, label_names)
    return regression_targets(y, target_names)
