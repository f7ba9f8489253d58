"""Collapsed-embedding detection: an embedding whose rows cannot be told apart must never look perfect.

A constant, all-zero or one-direction embedding (after the scorer's normalisation) makes OverlapIndex return 1.0
and retrieval rank by row order; this module finds such embeddings so that every protocol can flag them.

Contract of :func:`detect_collapse` (``matrix`` is what the scorer sees, i.e. after its normalisation):

* Two rows are the same *point* when they agree on a grid of ``GRID`` (1e-9) x the largest absolute entry
  (exactly equal rows and rows equal up to rounding, e.g. one direction after L2 normalisation, are one point).
  Points are found by quantising the rows and hashing each with two seeded 64-bit linear hashes: O(n d) time,
  a bounded dense working set (``CHUNK_ROWS`` rows at a time), CSR input stays CSR.
* The embedding is **collapsed** (``invalid``: its score is meaningless and must not be ranked) when, with n >= 2
  rows, it has a single point (zero variance); with ``labels``, also when it has fewer points than classes, or
  when at least ``SHARED_FRACTION`` (half) of the rows lie on points shared by rows of different classes.
* Fewer shared rows than that is only a warning (``invalid`` False), naming up to 10 of those rows.

Findings are :class:`Collapse` records; their ``message()`` starts with the warning code ``CODE`` and they are
also raised as :class:`DegenerateEmbeddingWarning` by the scorers.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.arrays import binary_exponents, rows_to_unit_peak
from vertebrae.core.errors import VertebraeWarning
from vertebrae.core.labels import describe_key

CODE = "degenerate-embedding"
GRID = 1e-9
SHARED_FRACTION = 0.5
CHUNK_ROWS = 4096
_LIST = 10
_HASH_SEEDS = (0x5EED_0001, 0x5EED_0002)


class DegenerateEmbeddingWarning(VertebraeWarning):
    """An embedding whose rows collapse onto too few points (constant, zero, one direction, shared across classes)."""


@dataclass(frozen=True)
class Collapse:
    """One finding of :func:`detect_collapse` (see the module docstring); JSON form via ``to_dict``."""

    what: str
    invalid: bool
    reason: str
    n_rows: int
    n_points: int
    n_classes: int | None = None
    n_shared_rows: int = 0
    shared_examples: list[str] = field(default_factory=list)

    def message(self) -> str:
        return f"{CODE}: {self.what}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {"code": CODE, "what": self.what, "invalid": self.invalid, "reason": self.reason, "n_rows": self.n_rows,
                "n_points": self.n_points, "n_classes": self.n_classes, "n_shared_rows": self.n_shared_rows,
                "shared_examples": list(self.shared_examples)}


def _multipliers(columns: np.ndarray) -> np.ndarray:
    """(len(columns), 2) odd uint64 multipliers of the two hashes: splitmix64 of the column index and a fixed seed,
    so the same rows always give the same points and only the columns in use are computed."""
    out = []
    with np.errstate(over="ignore"):  # arithmetic modulo 2^64 is the hash
        for seed in _HASH_SEEDS:
            z = np.asarray(columns, dtype=np.uint64) + np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            out.append((z ^ (z >> np.uint64(31))) | np.uint64(1))
    return np.stack(out, axis=1)


def _quantise(values: np.ndarray, grid: float) -> np.ndarray:
    return np.rint(np.asarray(values, dtype=np.float64) / grid).astype(np.int64).view(np.uint64)


def _unit_rows(block: np.ndarray) -> np.ndarray:
    """L2-normalised float64 rows (zero rows stay zero), scaled first (``rows_to_unit_peak``) so norms neither
    underflow nor overflow."""
    block = rows_to_unit_peak(block)
    norms = np.sqrt(np.einsum("ij,ij->i", block, block))
    return block / np.where(norms > 0, norms, 1.0)[:, None]


def unit_csr_data(csr: sp.csr_matrix) -> np.ndarray:
    """The stored values of CSR rows L2-normalised (float64), scaled first like ``_unit_rows``."""
    data = np.asarray(csr.data, dtype=np.float64)
    n = csr.shape[0]
    row_of_entry = np.repeat(np.arange(n), np.diff(csr.indptr))
    peaks = np.zeros(n)
    np.maximum.at(peaks, row_of_entry, np.abs(data))
    data = np.ldexp(data, -binary_exponents(peaks)[row_of_entry])
    norms = np.sqrt(np.bincount(row_of_entry, weights=data * data, minlength=n))[row_of_entry]
    return data / np.where(norms > 0, norms, 1.0)


def row_points(matrix: Any, *, normalize: bool = False) -> np.ndarray:
    """Point id (0..points-1, in first-seen order) of every row of a dense or CSR matrix (module docstring).

    ``normalize``: compare the L2-normalised rows (zero rows stay zero) without copying the whole matrix.
    """
    n, width = matrix.shape
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if sp.issparse(matrix):
        csr = sp.csr_matrix(matrix)
        data = unit_csr_data(csr) if normalize else np.asarray(csr.data, dtype=np.float64)
        scale = float(np.abs(data).max()) if data.size else 0.0
    else:
        dense = np.asarray(matrix)
        scale = 1.0 if normalize and dense.size and np.any(dense) else (float(np.abs(dense).max()) if dense.size else 0.0)
    if scale == 0.0:
        return np.zeros(n, dtype=np.int64)
    grid = GRID * scale
    hashes = np.empty((n, 2), dtype=np.uint64)
    if sp.issparse(matrix):  # per-row sums of value x column multiplier, wrapping mod 2^64 (zeros add nothing)
        products = _quantise(data, grid)[:, None] * _multipliers(csr.indices)
        sums = np.concatenate([np.zeros((1, 2), dtype=np.uint64), np.cumsum(products, axis=0, dtype=np.uint64)])
        hashes[:] = sums[csr.indptr[1:]] - sums[csr.indptr[:-1]]
    else:
        mult = _multipliers(np.arange(width))
        for start in range(0, n, CHUNK_ROWS):
            block = dense[start:start + CHUNK_ROWS]
            hashes[start:start + CHUNK_ROWS] = _quantise(_unit_rows(block) if normalize else block, grid) @ mult
    _, first, inverse = np.unique(hashes, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # renumber points in first-seen order
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return rank[np.asarray(inverse).ravel()].astype(np.int64)


def label_codes(labels: Any) -> np.ndarray:
    """Integer class code per row: of a 1-D label array, or of each row of a (dense or CSR) indicator matrix."""
    if sp.issparse(labels) or (hasattr(labels, "ndim") and labels.ndim == 2):
        return row_points(labels)
    index: dict[str, int] = {}  # not astype(str): NumPy drops trailing NULs ("a\0" and "a" are two classes)
    return np.asarray([index.setdefault(str(v), len(index)) for v in np.asarray(labels, dtype=object).ravel().tolist()],
                      dtype=np.int64)


def detect_collapse(matrix: Any, *, what: str, labels: Any = None, n_classes: int | None = None,
                    row_ids: Sequence[str] | None = None, normalize: bool = False) -> Collapse | None:
    """The collapse finding of ``matrix`` (None when its rows are healthy); see the module docstring.

    ``labels``: one class per row (1-D) or an indicator matrix (multi-label: rows with different label sets are
    different classes); ``n_classes``: the number of classes to compare points with (default: distinct labels);
    ``normalize``: compare L2-normalised rows (see :func:`row_points`).
    """
    n = int(matrix.shape[0])
    if n < 2:
        return None
    points = row_points(matrix, normalize=normalize)
    n_points = int(points.max()) + 1
    if n_points == 1:
        return Collapse(what, True, f"all {n} rows are one point (zero variance: constant, all-zero or one direction "
                        "after normalisation); its score is meaningless and it is not ranked", n, 1, n_classes)
    if labels is None:
        return None
    codes = label_codes(labels)
    classes = int(n_classes if n_classes is not None else np.unique(codes).size)
    if n_points < classes:
        return Collapse(what, True, f"its {n} rows collapse onto {n_points} distinct points, fewer than the {classes} "
                        "classes; its score is meaningless and it is not ranked", n, n_points, classes)
    pairs = np.unique(np.stack([points, codes], axis=1), axis=0)
    shared_points = np.flatnonzero(np.bincount(pairs[:, 0], minlength=n_points) > 1)
    shared = np.flatnonzero(np.isin(points, shared_points))
    if shared.size == 0:
        return None
    examples = [describe_key(row_ids[i]) if row_ids is not None else f"index {i}" for i in shared[:_LIST]]
    listing = ", ".join(examples) + (", ..." if shared.size > _LIST else "")
    detail = f"{shared.size} of {n} rows lie on points shared by rows of different classes ({listing})"
    if shared.size >= SHARED_FRACTION * n:
        return Collapse(what, True, f"{detail}; its score is meaningless and it is not ranked", n, n_points, classes,
                        int(shared.size), examples)
    return Collapse(what, False, f"{detail}; those rows cannot be separated", n, n_points, classes, int(shared.size),
                    examples)


def warn_collapse(finding: Collapse | None, stacklevel: int = 3) -> list[str]:
    """Raise ``finding`` as a DegenerateEmbeddingWarning; its message as a list (empty when None)."""
    if finding is None:
        return []
    warnings.warn(finding.message(), DegenerateEmbeddingWarning, stacklevel=stacklevel)
    return [finding.message()]


def is_invalid(findings: Any) -> bool:
    """Whether a recorded finding (a ``to_dict`` mapping) or any of a list of them marks the score meaningless."""
    if findings is None:
        return False
    if isinstance(findings, Mapping):
        return bool(findings.get("invalid"))
    return any(is_invalid(item) for item in findings)


def invalid_reasons(findings: Any) -> list[str]:
    """The ``what: reason`` text of every invalid recorded finding (for report lines)."""
    if findings is None:
        return []
    if isinstance(findings, Mapping):
        return [f"{findings.get('what')}: {findings.get('reason')}"] if findings.get("invalid") else []
    return [text for item in findings for text in invalid_reasons(item)]
