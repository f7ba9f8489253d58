"""Relevance and exclusions of a retrieval protocol, from what a user gives to canonical CSR.

Relevance: a query x gallery grade matrix (NumPy or scipy sparse, read from its stored entries; a pair stored
twice is refused, as a pair graded by two records is) or records ``(query_id, gallery_id[, grade])`` -> CSR
float64 of the grades > 0, sorted indices. Exclusions: records ``(query_id, gallery_id)`` or a 0/1 matrix -> CSR
bool. Ids resolve by semantic key (typed: ``1`` and ``"1"`` differ); every error names the record or the
(query, gallery) pair. Also the small CSR helpers the protocol shares (pairs to CSR, union, eligible positives).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.errors import LabelError, ValidationError
from vertebrae.core.labels import describe_key, semantic_key

_SHOWN = 10
_MATRIX_HINT = "use RetrievalDataset.from_relevance_matrix(...) for a nested-list query x gallery grade matrix"


# ----------------------------------------------------------------------------------------------------------
# Small helpers
# ----------------------------------------------------------------------------------------------------------


def _names(keys: Sequence[str], limit: int = _SHOWN) -> str:
    shown = ", ".join(describe_key(k) for k in keys[:limit])
    return shown + (", ..." if len(keys) > limit else "")


def _pair(query_ids: Sequence[str], gallery_ids: Sequence[str], qi: int, gi: int) -> str:
    return f"(query {describe_key(query_ids[qi])}, gallery {describe_key(gallery_ids[gi])})"


def _pairs(query_ids, gallery_ids, rows, cols) -> str:
    shown = ", ".join(_pair(query_ids, gallery_ids, int(q), int(g)) for q, g in zip(rows[:_SHOWN], cols[:_SHOWN]))
    return shown + (", ..." if len(rows) > _SHOWN else "")


def _empty_bool(shape: tuple[int, int]) -> sp.csr_matrix:
    return sp.csr_matrix(shape, dtype=bool)


def _from_pairs(rows: Sequence[int], cols: Sequence[int], values: Any, shape: tuple[int, int], dtype: Any
                ) -> sp.csr_matrix:
    """Canonical CSR from coordinate lists (``values`` None: all True)."""
    data = np.ones(len(rows), dtype=bool) if values is None else np.asarray(values, dtype=dtype)
    coords = (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64))
    return _canonical(sp.csr_matrix((data, coords), shape=shape, dtype=dtype))


def _canonical(matrix: sp.csr_matrix) -> sp.csr_matrix:
    matrix.sum_duplicates()
    matrix.eliminate_zeros()
    matrix.sort_indices()
    return matrix


def _index_of(keys: Sequence[str]) -> dict[str, int]:
    return {key: i for i, key in enumerate(keys)}


def _same_id_pairs(query_ids: Sequence[str], gallery_ids: Sequence[str]) -> sp.csr_matrix:
    """Boolean CSR of the pairs whose query id equals a gallery id (same semantic key)."""
    gallery_index = _index_of(gallery_ids)
    rows, cols = [], []
    for qi, key in enumerate(query_ids):
        gi = gallery_index.get(key)
        if gi is not None:
            rows.append(qi)
            cols.append(gi)
    return _from_pairs(rows, cols, None, (len(query_ids), len(gallery_ids)), bool)


def _union(a: sp.csr_matrix, b: sp.csr_matrix) -> sp.csr_matrix:
    if b.nnz == 0:
        return a
    if a.nnz == 0:
        return b
    return _canonical(sp.csr_matrix((a.astype(np.int8) + b.astype(np.int8)) > 0, dtype=bool))


def _eligible(relevance: sp.csr_matrix, exclusions: sp.csr_matrix) -> sp.csr_matrix:
    """Relevance with excluded pairs removed (O(nnz); nothing dense)."""
    if exclusions.nnz == 0:
        return relevance.copy()
    excluded = sp.csr_matrix(relevance.multiply(exclusions.astype(np.float64)))
    return _canonical(sp.csr_matrix(relevance - excluded, dtype=np.float64))


def _is_grade(value: Any) -> bool:
    return isinstance(value, (numbers.Real, np.bool_)) and not isinstance(value, (str, bytes))


# ----------------------------------------------------------------------------------------------------------
# Relevance and exclusion parsing
# ----------------------------------------------------------------------------------------------------------


def _resolve_id(value: Any, index: Mapping[str, int], side: str, record: int, what: str) -> int:
    try:
        key = semantic_key(value)
    except LabelError:
        raise ValidationError(
            f"{what} record {record}: {side} id {value!r} of type {type(value).__name__} is not a str or int id"
        ) from None
    found = index.get(key)
    if found is not None:
        return found
    hint = ""
    alternatives = []
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        alternatives.append(semantic_key(str(int(value))))
    elif isinstance(value, str):
        try:
            alternatives.append(semantic_key(int(value)))
        except ValueError:
            pass
    for alt in alternatives:
        if alt in index:
            hint = f" (ids are typed: {describe_key(alt)} is a declared {side} id, {describe_key(key)} is not)"
    raise ValidationError(f"{what} record {record}: unknown {side} id {describe_key(key)}{hint}")


def _looks_like_matrix(records: Any, n_queries: int, n_gallery: int) -> bool:
    """n_queries rows of n_gallery plain numbers: probably a nested-list grade matrix, not records."""
    if not isinstance(records, (list, tuple)) or len(records) != n_queries:
        return False
    return all(
        isinstance(row, (list, tuple)) and len(row) == n_gallery and all(_is_grade(x) for x in row) for row in records
    )


def _parse_records(records: Any, query_ids, gallery_ids) -> sp.csr_matrix:
    """Relevance records ``(query_id, gallery_id[, grade])`` -> canonical CSR of the grades > 0."""
    if isinstance(records, (str, bytes)):
        raise ValidationError(
            f"relevance must be a grade matrix or an iterable of records, got {type(records).__name__}"
        )
    if isinstance(records, Mapping):
        raise ValidationError(
            "relevance must be a grade matrix or records (query_id, gallery_id, grade), not a mapping; for "
            "{query_id: {gallery_id: grade}} pass "
            "[(q, g, grade) for q, row in mapping.items() for g, grade in row.items()]"
        )
    if not isinstance(records, Iterable):
        raise ValidationError(
            f"relevance must be a NumPy/scipy grade matrix or an iterable of (query_id, gallery_id, grade) records, "
            f"got {type(records).__name__}"
        )
    q_index, g_index = _index_of(query_ids), _index_of(gallery_ids)
    rows, cols, grades = [], [], []
    seen: dict[tuple[int, int], int] = {}
    for n, record in enumerate(records):
        if isinstance(record, (str, bytes)) or not isinstance(record, Sequence):
            raise ValidationError(
                f"relevance record {n} is {record!r} ({type(record).__name__}), not a (query_id, gallery_id, grade) "
                f"record; {_MATRIX_HINT}"
            )
        if len(record) not in (2, 3):
            raise ValidationError(
                f"relevance record {n} has {len(record)} items, expected (query_id, gallery_id) or "
                f"(query_id, gallery_id, grade): {list(record)[:6]!r}; {_MATRIX_HINT}"
            )
        qi = _resolve_id(record[0], q_index, "query", n, "relevance")
        gi = _resolve_id(record[1], g_index, "gallery", n, "relevance")
        grade = record[2] if len(record) == 3 else 1.0
        where = _pair(query_ids, gallery_ids, qi, gi)
        if not _is_grade(grade):
            raise ValidationError(f"relevance record {n} {where}: grade {grade!r} is not a number")
        grade = float(grade)
        if not math.isfinite(grade):
            raise ValidationError(f"relevance record {n} {where}: grade {grade!r} is not finite")
        if grade < 0:
            raise ValidationError(f"relevance record {n} {where}: grade {grade!r} is negative; grades must be >= 0")
        if (qi, gi) in seen:
            raise ValidationError(f"relevance records {seen[(qi, gi)]} and {n} both grade the pair {where}")
        seen[(qi, gi)] = n
        if grade > 0:
            rows.append(qi)
            cols.append(gi)
            grades.append(grade)
    return _from_pairs(rows, cols, grades, (len(query_ids), len(gallery_ids)), np.float64)


def _check_shape(shape: tuple[int, ...], query_ids, gallery_ids, what: str, extra: str = "") -> None:
    expected = (len(query_ids), len(gallery_ids))
    if tuple(shape) != expected:
        raise ValidationError(
            f"{what} has shape {tuple(shape)} but the dataset has {expected[0]} queries x {expected[1]} gallery items "
            f"(expected shape {expected}){extra}"
        )


def _refuse_duplicate_entries(matrix: Any, query_ids, gallery_ids) -> None:
    """Refuse a sparse matrix that stores one (query, gallery) pair more than once (scipy would sum the grades,
    as duplicate records are refused too); O(nnz)."""
    coo = matrix.tocoo(copy=False)
    linear = coo.row.astype(np.int64) * np.int64(coo.shape[1]) + coo.col.astype(np.int64)
    if linear.size < 2:
        return
    order = np.argsort(linear, kind="stable")
    repeated = np.flatnonzero(linear[order][1:] == linear[order][:-1])
    if not repeated.size:
        return
    doubled = np.unique(linear[order][repeated + 1])
    rows, cols = doubled // coo.shape[1], doubled % coo.shape[1]
    first = linear == doubled[0]
    grades = ", ".join(repr(float(v)) for v in np.asarray(coo.data)[first][:5])
    raise ValidationError(
        f"relevance matrix stores {doubled.size} pair(s) more than once: "
        f"{_pairs(query_ids, gallery_ids, rows, cols)}; the first holds grades {grades}, which a sparse matrix would "
        "sum into one grade; store each pair once (call sum_duplicates() first if the sum is meant)"
    )


def _parse_matrix(matrix: Any, query_ids, gallery_ids, *, from_records_api: bool) -> sp.csr_matrix:
    """A query x gallery grade matrix (NumPy, nested list or scipy sparse) -> canonical CSR float64."""
    if sp.issparse(matrix):
        _check_shape(matrix.shape, query_ids, gallery_ids, "relevance matrix")
        if matrix.dtype.kind not in "fiub":
            raise ValidationError(f"relevance matrix must be numeric, got dtype {matrix.dtype}")
        _refuse_duplicate_entries(matrix, query_ids, gallery_ids)
        csr = sp.csr_matrix(matrix, dtype=np.float64, copy=True)  # from the stored entries only, never dense
        bad = ~np.isfinite(csr.data) | (csr.data < 0)
        if bad.any():
            rows = np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))[bad]
            raise ValidationError(
                f"relevance grades must be finite and >= 0; {int(bad.sum())} bad grade(s) at "
                f"{_pairs(query_ids, gallery_ids, rows, csr.indices[bad])}"
            )
        return _canonical(csr)
    try:
        dense = np.asarray(matrix)
    except ValueError as exc:  # ragged nested lists
        raise ValidationError(f"relevance matrix is not rectangular: {exc}") from None
    if dense.ndim != 2:
        raise ValidationError(f"relevance matrix must be 2-D (queries x gallery), got shape {dense.shape}")
    if dense.dtype.kind not in "fiub":
        raise ValidationError(
            f"relevance matrix must hold numbers, got dtype {dense.dtype}; for (query_id, gallery_id, grade) "
            "records use RetrievalDataset.from_embeddings / from_arrays"
        )
    extra = ""
    if from_records_api and dense.shape[1] in (2, 3):
        extra = "; records (query_id, gallery_id, grade) must be a list of tuples, not an array"
    _check_shape(dense.shape, query_ids, gallery_ids, "relevance matrix", extra)
    dense = dense.astype(np.float64, copy=False)
    bad_rows, bad_cols = np.nonzero(~np.isfinite(dense) | (dense < 0))
    if bad_rows.size:
        raise ValidationError(
            f"relevance grades must be finite and >= 0; {bad_rows.size} bad grade(s) at "
            f"{_pairs(query_ids, gallery_ids, bad_rows, bad_cols)}"
        )
    return _canonical(sp.csr_matrix(dense, dtype=np.float64))


def _parse_relevance(relevance: Any, query_ids, gallery_ids) -> sp.csr_matrix:
    if relevance is None:
        raise ValidationError("relevance is required: a grade matrix or records (query_id, gallery_id, grade)")
    if sp.issparse(relevance) or isinstance(relevance, np.ndarray):
        return _parse_matrix(relevance, query_ids, gallery_ids, from_records_api=True)
    return _parse_records(relevance, query_ids, gallery_ids)


def _parse_exclusions(exclusions: Any, query_ids, gallery_ids) -> sp.csr_matrix:
    """Exclusions as records (query_id, gallery_id) or a boolean (0/1) matrix -> canonical CSR bool."""
    shape = (len(query_ids), len(gallery_ids))
    if exclusions is None:
        return _empty_bool(shape)
    if sp.issparse(exclusions) or isinstance(exclusions, np.ndarray):
        _check_shape(exclusions.shape, query_ids, gallery_ids, "exclusion matrix")
        if exclusions.dtype.kind not in "biuf":
            raise ValidationError(f"exclusion matrix must be boolean, got dtype {exclusions.dtype}")
        csr = sp.csr_matrix(exclusions, copy=True)
        csr.sum_duplicates()
        csr.eliminate_zeros()
        if csr.dtype.kind != "b" and not np.all(csr.data == 1):
            values = np.unique(csr.data)[:5]
            raise ValidationError(f"exclusion matrix must hold only 0/1 (or booleans), got values {values}")
        return _canonical(sp.csr_matrix(csr, dtype=bool))
    if isinstance(exclusions, (str, bytes, Mapping)) or not isinstance(exclusions, Iterable):
        raise ValidationError(
            f"exclusions must be records (query_id, gallery_id) or a boolean matrix, got {type(exclusions).__name__}"
        )
    q_index, g_index = _index_of(query_ids), _index_of(gallery_ids)
    rows, cols = [], []
    for n, record in enumerate(exclusions):
        if isinstance(record, (str, bytes)) or not isinstance(record, Sequence) or len(record) != 2:
            raise ValidationError(f"exclusion record {n} must be a (query_id, gallery_id) pair, got {record!r}")
        rows.append(_resolve_id(record[0], q_index, "query", n, "exclusion"))
        cols.append(_resolve_id(record[1], g_index, "gallery", n, "exclusion"))
    return _from_pairs(rows, cols, None, shape, bool)

