"""The retrieval protocol: query and gallery ids, relevance and exclusions, from what a user gives to canonical CSR,
validated together as a :class:`RetrievalProtocol`.

Relevance: a query x gallery grade matrix (NumPy or scipy sparse, read from its stored entries; a pair stored
twice is refused, as a pair graded by two records is) or records ``(query_id, gallery_id[, grade])`` -> CSR
float64 of the grades > 0, sorted indices. Exclusions: records ``(query_id, gallery_id)`` or a 0/1 matrix -> CSR
bool. Ids resolve by semantic key (typed: ``1`` and ``"1"`` differ); every error names the record or the
(query, gallery) pair.

RetrievalProtocol invariants (checked on construction): ids are unique str/int semantic keys; relevance is
canonical CSR float64 holding finite grades > 0; exclusions are canonical CSR bool (including every same-id pair
when ``exclude_same_id``); every query keeps an eligible positive. ``to_payload``/``from_payload`` are its strict
JSON form (schema ``vertebrae.retrieval-protocol/v1``).
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.errors import LabelError, ValidationError
from vertebrae.core.labels import _parse_key, describe_key, semantic_key

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


PROTOCOL_SCHEMA = "vertebrae.retrieval-protocol/v1"
_PAYLOAD_KEYS = ("schema", "query_ids", "gallery_ids", "relevance", "exclusions", "exclude_same_id")
_INT_KEY = re.compile(r"@int:(0|-?[1-9][0-9]*)")


def _check_keys(keys: Any, what: str) -> tuple[str, ...]:
    if not isinstance(keys, tuple):
        raise ValidationError(f"{what} must be a tuple of semantic keys, got {type(keys).__name__}")
    if not keys:
        raise ValidationError(f"{what}: retrieval needs at least one row")
    for i, key in enumerate(keys):
        if isinstance(key, str) and (not key.startswith("@") or _INT_KEY.fullmatch(key) or key.startswith("@str:@")):
            continue  # fast path for the canonical str and int keys
        try:
            kind, _ = _parse_key(key)
        except LabelError as exc:
            raise ValidationError(f"{what}[{i}]: {exc}") from None
        if kind not in ("str", "int"):
            raise ValidationError(f"{what}[{i}]: id {describe_key(key)} is a {kind}; ids must be str or int")
    if len(set(keys)) != len(keys):
        seen: set[str] = set()
        for i, key in enumerate(keys):
            if key in seen:
                raise ValidationError(f"{what}: duplicate id {describe_key(key)} (again at index {i})")
            seen.add(key)
    return keys


def _check_csr(matrix: Any, shape: tuple[int, int], dtype: Any, what: str) -> None:
    if not isinstance(matrix, sp.csr_matrix) or matrix.dtype != dtype:
        raise ValidationError(f"{what} must be a scipy CSR matrix of {np.dtype(dtype)}, got {type(matrix).__name__}")
    if matrix.shape != shape:
        raise ValidationError(f"{what} has shape {matrix.shape}, expected {shape}")
    if not matrix.has_canonical_format:
        raise ValidationError(f"{what} must have sorted indices and no duplicate entries")


class QueryGallerySizes:
    """``n_queries`` and ``n_gallery`` of a class with ``query_ids`` and ``gallery_ids``."""

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)

    @property
    def n_gallery(self) -> int:
        return len(self.gallery_ids)


@dataclass(frozen=True, eq=False)
class RetrievalProtocol(QueryGallerySizes):
    """Ids, relevance (CSR float64 of grades > 0) and exclusions (CSR bool, the union including same-id pairs)."""

    query_ids: tuple[str, ...]
    gallery_ids: tuple[str, ...]
    relevance: sp.csr_matrix
    exclusions: sp.csr_matrix
    exclude_same_id: bool = False

    def __post_init__(self) -> None:
        _check_keys(self.query_ids, "query_ids")
        _check_keys(self.gallery_ids, "gallery_ids")
        shape = (len(self.query_ids), len(self.gallery_ids))
        _check_csr(self.relevance, shape, np.float64, "relevance")
        _check_csr(self.exclusions, shape, np.bool_, "exclusions")
        if not isinstance(self.exclude_same_id, bool):
            raise ValidationError(f"exclude_same_id must be a bool, got {self.exclude_same_id!r}")
        data = self.relevance.data
        if data.size and not (np.isfinite(data).all() and (data > 0).all()):
            raise ValidationError("relevance must hold only finite grades > 0 (zero grades are not stored)")
        if self.exclusions.nnz and not self.exclusions.data.all():
            raise ValidationError("exclusions must not store False entries")
        if self.exclude_same_id:
            same = _same_id_pairs(self.query_ids, self.gallery_ids)
            covered = sp.csr_matrix(same.multiply(self.exclusions)).count_nonzero()
            if covered != same.nnz:
                raise ValidationError("exclude_same_id is set but exclusions lack some same-id pairs")
        counts = np.diff(_eligible(self.relevance, self.exclusions).indptr)
        lacking = np.flatnonzero(counts == 0)
        if lacking.size:
            raise ValidationError(
                f"{lacking.size} of {shape[0]} queries have no eligible positive (grade > 0 and not excluded); "
                f"every query needs one: query ids {_names([self.query_ids[i] for i in lacking])}"
            )

    def eligible_relevance(self) -> sp.csr_matrix:
        return _eligible(self.relevance, self.exclusions)

    def relevance_records(self) -> list[tuple[str, str, float]]:
        r = self.relevance
        rows = np.repeat(np.arange(r.shape[0]), np.diff(r.indptr))
        return [(self.query_ids[q], self.gallery_ids[g], float(v)) for q, g, v in zip(rows, r.indices, r.data)]

    def exclusion_records(self) -> list[tuple[str, str]]:
        e = self.exclusions
        rows = np.repeat(np.arange(e.shape[0]), np.diff(e.indptr))
        return [(self.query_ids[q], self.gallery_ids[g]) for q, g in zip(rows, e.indices)]

    def transposed(self) -> RetrievalProtocol:
        """The reverse direction: gallery items become the queries (relevance and exclusions transposed)."""
        try:
            return RetrievalProtocol(
                self.gallery_ids, self.query_ids,
                _canonical(sp.csr_matrix(self.relevance.T, dtype=np.float64)),
                _canonical(sp.csr_matrix(self.exclusions.T, dtype=bool)),
                self.exclude_same_id,
            )
        except ValidationError as exc:
            raise ValidationError(f"reverse direction (gallery items as queries): {exc}") from None

    def to_payload(self) -> dict[str, Any]:
        """Strict JSON form: ids as semantic keys, records [query_key, gallery_key, grade], exclusions."""
        return {
            "schema": PROTOCOL_SCHEMA,
            "query_ids": list(self.query_ids),
            "gallery_ids": list(self.gallery_ids),
            "relevance": [[q, g, v] for q, g, v in self.relevance_records()],
            "exclusions": [[q, g] for q, g in self.exclusion_records()],
            "exclude_same_id": self.exclude_same_id,
        }

    @classmethod
    def from_payload(cls, payload: Any) -> RetrievalProtocol:
        """Inverse of ``to_payload``; ValidationError for any malformed, inconsistent or invalid payload."""
        if not isinstance(payload, Mapping):
            raise ValidationError(f"retrieval protocol payload must be a JSON object, got {type(payload).__name__}")
        if set(payload) != set(_PAYLOAD_KEYS):
            missing = sorted(set(_PAYLOAD_KEYS) - set(payload))
            unknown = sorted(map(str, set(payload) - set(_PAYLOAD_KEYS)))
            raise ValidationError(f"retrieval protocol payload: missing keys {missing}, unknown keys {unknown}")
        if payload["schema"] != PROTOCOL_SCHEMA:
            raise ValidationError(
                f"retrieval protocol schema {payload['schema']!r} is not supported; expected {PROTOCOL_SCHEMA!r}"
            )
        ids = {}
        for side in ("query_ids", "gallery_ids"):
            value = payload[side]
            if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
                raise ValidationError(f"retrieval protocol payload: {side} must be a list of semantic keys (strings)")
            ids[side] = _check_keys(tuple(value), f"payload {side}")
        q_ids, g_ids = ids["query_ids"], ids["gallery_ids"]
        q_index, g_index = _index_of(q_ids), _index_of(g_ids)
        flag = payload["exclude_same_id"]
        if not isinstance(flag, bool):
            raise ValidationError(f"retrieval protocol payload: exclude_same_id must be true or false, got {flag!r}")

        def locate(item: Any, n: int, what: str, size: int) -> tuple[int, int]:
            if not isinstance(item, list) or len(item) != size or not all(isinstance(k, str) for k in item[:2]):
                raise ValidationError(f"retrieval protocol payload: {what}[{n}] must be a list of {size} items "
                                      f"starting with two id keys, got {item!r}")
            if item[0] not in q_index:
                raise ValidationError(f"retrieval protocol payload: {what}[{n}] names unknown query id {item[0]!r}")
            if item[1] not in g_index:
                raise ValidationError(f"retrieval protocol payload: {what}[{n}] names unknown gallery id {item[1]!r}")
            return q_index[item[0]], g_index[item[1]]

        for what in ("relevance", "exclusions"):
            if not isinstance(payload[what], list):
                raise ValidationError(f"retrieval protocol payload: {what} must be a list")
        rows, cols, grades, seen = [], [], [], set()
        for n, item in enumerate(payload["relevance"]):
            qi, gi = locate(item, n, "relevance", 3)
            grade = item[2]
            if isinstance(grade, bool) or not isinstance(grade, (int, float)) or not math.isfinite(grade) or grade <= 0:
                raise ValidationError(
                    f"retrieval protocol payload: relevance[{n}] {_pair(q_ids, g_ids, qi, gi)} grade {grade!r} "
                    "must be a finite number > 0"
                )
            if (qi, gi) in seen:
                raise ValidationError(
                    f"retrieval protocol payload: relevance[{n}] repeats the pair {_pair(q_ids, g_ids, qi, gi)}"
                )
            seen.add((qi, gi))
            rows.append(qi)
            cols.append(gi)
            grades.append(float(grade))
        shape = (len(q_ids), len(g_ids))
        relevance = _from_pairs(rows, cols, grades, shape, np.float64)
        pairs = [locate(item, n, "exclusions", 2) for n, item in enumerate(payload["exclusions"])]
        if len(set(pairs)) != len(pairs):
            raise ValidationError("retrieval protocol payload: exclusions repeat a pair")
        exclusions = _from_pairs([p[0] for p in pairs], [p[1] for p in pairs], None, shape, bool)
        return cls(q_ids, g_ids, relevance, exclusions, flag)


def _build_protocol(
    relevance: Any, exclusions: Any, exclude_same_id: Any, query_ids, gallery_ids, *, matrix: bool
) -> RetrievalProtocol:
    if not isinstance(exclude_same_id, bool):
        raise ValidationError(f"exclude_same_id must be a bool, got {exclude_same_id!r}")
    hint = not matrix and _looks_like_matrix(relevance, len(query_ids), len(gallery_ids))
    try:
        if matrix:
            grades = _parse_matrix(relevance, query_ids, gallery_ids, from_records_api=False)
        else:
            grades = _parse_relevance(relevance, query_ids, gallery_ids)
        excluded = _parse_exclusions(exclusions, query_ids, gallery_ids)
        if exclude_same_id:
            excluded = _union(excluded, _same_id_pairs(query_ids, gallery_ids))
        return RetrievalProtocol(query_ids, gallery_ids, grades, excluded, exclude_same_id)
    except ValidationError as exc:
        if hint and _MATRIX_HINT not in str(exc):
            raise ValidationError(
                f"{exc}; relevance was read as (query_id, gallery_id, grade) records but looks like a nested-list "
                f"matrix: {_MATRIX_HINT}"
            ) from None
        raise
