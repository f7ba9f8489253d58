"""RetrievalProtocol: query and gallery ids, relevance and exclusions, validated together.

Invariants (checked on construction): ids are unique str/int semantic keys; relevance is canonical CSR float64
holding finite grades > 0; exclusions are canonical CSR bool (including every same-id pair when
``exclude_same_id``); every query keeps an eligible positive. ``to_payload``/``from_payload`` are its strict JSON
form (schema ``vertebrae.retrieval-protocol/v1``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.errors import LabelError, ValidationError
from vertebrae.core.labels import _parse_key, describe_key
from vertebrae.data.relevance import (
    _MATRIX_HINT,
    _canonical,
    _eligible,
    _from_pairs,
    _index_of,
    _looks_like_matrix,
    _names,
    _pair,
    _parse_exclusions,
    _parse_matrix,
    _parse_relevance,
    _same_id_pairs,
    _union,
)

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
