"""Retrieval inputs: row ids in messages, validated relevance and exclusions, prepared endpoints (``Endpoint``).

Eligible pairs: every (query, gallery) pair except the excluded ones. Excluded pairs leave both the candidates
and the positives. A positive is an eligible pair with grade > 0 (explicit zero grades are non-relevant, like
missing pairs). Every query needs at least one eligible positive.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.arrays import as_matrix, check_finite, power_of_two_factor, rescaled
from vertebrae.core.errors import ConfigError, LabelError, ValidationError
from vertebrae.core.labels import describe_key
from vertebrae.scoring.retrieval.arithmetic import _ROW_CHUNK, _chunked, _row_norms, _row_sq, _sparse_row_norms
from vertebrae.scoring.retrieval.config import SIMILARITIES

_LIST_LIMIT = 10


def _describe(key: Any) -> str:
    try:
        return describe_key(key)
    except (LabelError, TypeError):
        return repr(key)


def _listing(indices: np.ndarray, keys: Sequence[str] | None, limit: int = _LIST_LIMIT) -> str:
    """``'a' (index 0), 'b' (index 3), ...`` for at most ``limit`` row indices."""
    shown = []
    for i in indices[:limit]:
        i = int(i)
        shown.append(f"{_describe(keys[i])} (index {i})" if keys is not None else f"index {i}")
    return ", ".join(shown) + (", ..." if len(indices) > limit else "")


def _pair_listing(rows: np.ndarray, cols: np.ndarray, qkeys, gkeys, limit: int = _LIST_LIMIT) -> str:
    shown = [f"(query {_describe(qkeys[r]) if qkeys is not None else r}, gallery "
             f"{_describe(gkeys[c]) if gkeys is not None else c})" for r, c in zip(rows[:limit], cols[:limit])]
    return ", ".join(shown) + (", ..." if len(rows) > limit else "")


class _IndexKeys(Sequence):
    """The semantic keys ``@int:i`` (== ``semantic_key(i)``) of row indices 0..n-1, made on demand."""

    def __init__(self, n: int) -> None:
        self._n = int(n)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [f"@int:{j}" for j in range(*i.indices(self._n))]
        i = int(i)
        if not -self._n <= i < self._n:
            raise IndexError(f"row index {i} out of range for {self._n} rows")
        return f"@int:{i % self._n}"


def _row_id_keys(ids: Sequence[str] | None, n: int, what: str) -> Sequence[str]:
    """Row ids as given (semantic-key strings); None means the row indices' keys."""
    if ids is None:
        return _IndexKeys(n)
    if isinstance(ids, _IndexKeys) and len(ids) == n:
        return ids
    ids = tuple(ids.tolist() if isinstance(ids, np.ndarray) else ids)
    if len(ids) != n:
        raise ValidationError(f"{what}: {len(ids)} row ids for {n} rows")
    bad = [i for i, key in enumerate(ids) if not isinstance(key, str)]
    if bad:
        raise ValidationError(f"{what}: row ids must be semantic-key strings; index {bad[0]} holds {ids[bad[0]]!r}")
    return tuple(str(key) for key in ids)


def _canonical_csr(matrix: Any, dtype: Any) -> sp.csr_matrix:
    out = sp.csr_matrix(matrix, dtype=dtype, copy=True)
    out.sum_duplicates()
    out.sort_indices()
    return out


def relevance_matrix(relevance: Any, shape: tuple[int, int], *, query_ids: Sequence[str] | None = None,
                     gallery_ids: Sequence[str] | None = None) -> sp.csr_matrix:
    """Validated grades as canonical float64 CSR (explicit zeros dropped).

    Accepts a scipy sparse matrix, a 2-D array or ``{query_index: {gallery_index: grade}}``. Grades must be
    finite and >= 0; the message names the offending (query, gallery) ids.
    """
    nq, ng = shape
    if sp.issparse(relevance):
        matrix = _canonical_csr(relevance, np.float64)
    elif isinstance(relevance, Mapping):
        rows, cols, vals = [], [], []
        for qi, row in relevance.items():
            if isinstance(qi, (bool, np.bool_)) or not isinstance(qi, (int, np.integer)) or not 0 <= qi < nq:
                raise ValidationError(f"relevance: query index {qi!r} is not a row index in [0, {nq})")
            if not isinstance(row, Mapping):
                raise ValidationError(f"relevance[{qi}] must map gallery indices to grades, got {type(row).__name__}")
            for gi, grade in row.items():
                if isinstance(gi, (bool, np.bool_)) or not isinstance(gi, (int, np.integer)) or not 0 <= gi < ng:
                    raise ValidationError(f"relevance[{qi}]: gallery index {gi!r} is not a row index in [0, {ng})")
                if isinstance(grade, (bool, np.bool_)) or not isinstance(grade, (int, float, np.integer, np.floating)):
                    raise ValidationError(f"relevance[{qi}][{gi}]: grade must be a number, got {grade!r}")
                rows.append(int(qi))
                cols.append(int(gi))
                vals.append(float(grade))
        matrix = _canonical_csr(sp.coo_matrix((np.asarray(vals, dtype=np.float64), (rows, cols)), shape=shape),
                                np.float64)
    else:
        array = np.asarray(relevance)
        if array.ndim != 2 or array.dtype.kind not in "biuf":
            raise ValidationError("relevance must be a scipy sparse matrix, a 2-D numeric array or a "
                                  f"{{query_index: {{gallery_index: grade}}}} mapping; got {type(relevance).__name__}"
                                  + (f" of shape {array.shape}, dtype {array.dtype}" if array.ndim else ""))
        matrix = _canonical_csr(sp.csr_matrix(array), np.float64)  # stores only the nonzero grades
    if matrix.shape != (nq, ng):
        raise ValidationError(f"relevance has shape {matrix.shape}, expected (n_queries, n_gallery) = {(nq, ng)}")
    data_rows = np.repeat(np.arange(nq), np.diff(matrix.indptr))
    for bad, what in ((~np.isfinite(matrix.data), "non-finite"), (matrix.data < 0, "negative")):
        bad = np.flatnonzero(bad)
        if bad.size:
            raise ValidationError(f"relevance: {bad.size} {what} grade(s); grades must be finite and >= 0: "
                                  + _pair_listing(data_rows[bad], matrix.indices[bad], query_ids, gallery_ids))
    matrix.eliminate_zeros()
    return matrix


def exclusion_matrix(exclusions: Any, shape: tuple[int, int]) -> sp.csr_matrix | None:
    """Excluded pairs as canonical bool CSR (every nonzero entry excludes its pair); None stays None."""
    if exclusions is None:
        return None
    if sp.issparse(exclusions):
        matrix = sp.csr_matrix(exclusions, copy=True)
    else:
        array = np.asarray(exclusions)
        if array.ndim != 2 or array.dtype.kind not in "biuf":
            raise ValidationError(f"exclusions must be a scipy sparse or 2-D boolean matrix, got {type(exclusions).__name__}")
        matrix = sp.csr_matrix(array)
    if matrix.shape != tuple(shape):
        raise ValidationError(f"exclusions has shape {matrix.shape}, expected (n_queries, n_gallery) = {tuple(shape)}")
    matrix.sum_duplicates()
    matrix.eliminate_zeros()
    matrix = sp.csr_matrix(matrix, dtype=bool)
    matrix.sort_indices()
    return matrix


def eligible_relevance(relevance: sp.csr_matrix, exclusions: sp.csr_matrix | None, *,
                       query_ids: Sequence[str] | None = None, what: str = "query") -> sp.csr_matrix:
    """Grades of the eligible positives (relevance minus excluded pairs); every row needs one.

    ``what`` names the rows in the error (``"query"``, or ``"gallery item"`` for the reverse direction).
    """
    eligible = relevance.copy()
    if exclusions is not None and eligible.nnz:
        rows = np.repeat(np.arange(eligible.shape[0]), np.diff(eligible.indptr))
        excluded = np.asarray(exclusions[rows, eligible.indices]).ravel().astype(bool)
        eligible.data[excluded] = 0.0
        eligible.eliminate_zeros()
    eligible.sort_indices()
    empty = np.flatnonzero(np.diff(eligible.indptr) == 0)
    if empty.size:
        extra = " (bidirectional retrieval needs a reverse positive for every gallery item)" if what != "query" else ""
        raise ValidationError(f"{empty.size} {what}(s) have no eligible positive after exclusions{extra}: "
                              + _listing(empty, query_ids))
    return eligible


_SAFE_FACTOR = 2.0 ** -100  # cosine rows whose largest magnitude is within 2^+-100 are used unscaled
_UNDERFLOW = 1e-250  # dot / squared_l2: a largest-norm product below this loses ranks to underflow


def _largest_norm(endpoints: Sequence[Endpoint]) -> float:
    """The largest row norm of the endpoints' rows."""
    largest = max(float(np.sqrt(e.sq.max())) if len(e) else 0.0 for e in endpoints)
    if largest == 0.0:  # squares underflow: the overflow-safe norms
        return max((float(_row_norms(e.values.astype(np.float64)).max()) if len(e) else 0.0) for e in endpoints)
    return largest


def check_representable(similarity: str, queries: Sequence[Endpoint], gallery: Sequence[Endpoint],
                        what: tuple[str, str]) -> None:
    """Refuse dot / squared_l2 scoring whose similarities would overflow or underflow float64, naming both
    endpoints (``what``) and their largest row norms; cosine rows are rescaled instead (``prepare_endpoint``)."""
    if similarity == "cosine":
        return
    q_max, g_max = _largest_norm(queries), _largest_norm(gallery)
    if not (q_max + g_max) ** 2 < 1e300:
        trouble = "overflow"
    elif q_max > 0.0 and g_max > 0.0 and q_max * g_max < _UNDERFLOW:
        trouble = "underflow"
    else:
        return
    raise ValidationError(f"{similarity} similarity would {trouble} float64 (largest row norms: {what[0]} "
                          f"{q_max:.3g}, {what[1]} {g_max:.3g}); rescale the embeddings or use cosine similarity, "
                          "which does not depend on their scale")


_SCAN_DTYPES = ("float32", "float64")
_FLOAT32_SAFE_NORM = 1e18  # rows up to this norm keep every float32 scan product, sum and |g|^2 finite


@dataclass(frozen=True, eq=False)
class Endpoint:
    """Prepared rows of one endpoint, as the kernel reads them.

    ``values``: the rows as given when they are floats (float32/float64 C-contiguous array, or canonical CSR):
    they are not copied. ``inv_norms``: 1 / |row| (float64) for cosine, else None; cosine scores are
    ``(q.g) / |q| / |g|``. ``sq``: |row|^2 of the scored rows in float64 (1 for cosine), computed by the
    defining arithmetic. ``scan``: what block products read: a float32 copy (L2-normalised for cosine), or the
    float32 values themselves (dot / squared_l2), or float64 rows when a row norm exceeds 1e18 or
    ``scan="float64"``; results never depend on it. ``endpoint[a:b]`` takes rows, sharing memory.
    """

    values: Any
    inv_norms: np.ndarray | None
    sq: np.ndarray
    scan: Any
    similarity: str

    def __post_init__(self) -> None:
        if self.similarity not in SIMILARITIES:
            raise ValidationError(f"Endpoint.similarity must be one of {SIMILARITIES}, got {self.similarity!r}")
        if (self.values.shape[0] != self.sq.shape[0] or self.scan.shape != self.values.shape
                or (self.inv_norms is None) != (self.similarity != "cosine")
                or (self.inv_norms is not None and self.inv_norms.shape != self.sq.shape)):
            raise ValidationError("Endpoint values, inv_norms, sq and scan must describe the same rows")
        if self.values.dtype not in (np.float32, np.float64) or self.scan.dtype not in (np.float32, np.float64):
            raise ValidationError("Endpoint values and scan must be float32 or float64")

    @property
    def shape(self) -> tuple[int, int]:
        return self.values.shape

    @property
    def is_sparse(self) -> bool:
        return sp.issparse(self.values)

    def __len__(self) -> int:
        return int(self.values.shape[0])

    def __getitem__(self, rows: slice) -> Endpoint:
        if not isinstance(rows, slice) or rows.step not in (None, 1):
            raise ValidationError("Endpoint rows are taken with a contiguous slice")
        values = self.values[rows]
        scan = values if self.scan is self.values else self.scan[rows]
        inv = None if self.inv_norms is None else self.inv_norms[rows]
        return Endpoint(values, inv, self.sq[rows], scan, self.similarity)


def prepare_endpoint(matrix: Any, similarity: str, *, what: str, row_ids: Sequence[str] | None = None,
                     scan: str = "float32", workers: int = 1) -> Endpoint:
    """Validate one endpoint and prepare it for scoring (``Endpoint``), copying only what must change.

    Refuses NaN/infinite rows and, for cosine, zero-norm rows, naming ``what`` ("Query embeddings" /
    "Gallery embeddings"), the count, and up to 10 indices with their row ids. Dense float rows are used in
    place (other dtypes become float64); sparse rows become canonical CSR. ``scan="float32"`` block products
    read float32 rows (a normalised copy for cosine, a copy of float64 rows); ``"float64"`` read float64 rows.
    ``workers``: threads for the row-wise arithmetic (the same bits whatever the count).
    """
    if similarity not in SIMILARITIES:
        raise ConfigError(f"similarity must be one of {SIMILARITIES}, got {similarity!r}")
    if scan not in _SCAN_DTYPES:
        raise ConfigError(f"scan must be one of {_SCAN_DTYPES}, got {scan!r}")
    values = as_matrix(matrix, what=what)
    keys = _row_id_keys(row_ids, values.shape[0], what)
    if similarity == "cosine":
        # cosine is scale-free: rows far from 1 in magnitude are brought there by a power of two (exact), so
        # their norms and products neither underflow nor overflow; ordinary rows are used as given
        factor = power_of_two_factor(values)
        if not _SAFE_FACTOR <= factor <= 1.0 / _SAFE_FACTOR:
            values = rescaled(values, factor)
    if sp.issparse(values):
        check_finite(values, keys, what=what)
        values = _canonical_csr(values, values.dtype if values.dtype in (np.float32, np.float64) else np.float64)
        with np.errstate(over="ignore"):
            sq = _row_sq(values)
        norms = _sparse_row_norms(values.astype(np.float64)) if similarity == "cosine" else None
    else:
        if values.dtype not in (np.float32, np.float64) or not values.flags.c_contiguous:
            values = np.ascontiguousarray(values, dtype=np.float64 if values.dtype != np.float32 else np.float32)
        norms, sq = _checked_norms(values, keys, what, workers)
    inv_norms = None
    if similarity == "cosine":
        zero = np.flatnonzero(norms == 0)
        if zero.size:
            shown = ", ".join(f"index {int(i)} (row id {_describe(keys[i])})" for i in zero[:_LIST_LIMIT])
            raise ValidationError(f"{what}: cosine similarity needs nonzero rows; {zero.size} zero-norm row(s): "
                                  f"{shown}{', ...' if zero.size > _LIST_LIMIT else ''}")
        inv_norms = 1.0 / norms
        sq = np.ones(values.shape[0])  # unit rows (to rounding; the kernel's tolerance has the margin)
    narrow = scan == "float32" and (sq.size == 0 or bool(np.sqrt(sq.max()) <= _FLOAT32_SAFE_NORM))
    dtype = np.float32 if narrow else np.float64
    if inv_norms is not None:
        scan_values = _normalised(values, inv_norms, dtype, workers)
    elif values.dtype == dtype:
        scan_values = values
    else:
        scan_values = values.astype(dtype)
    return Endpoint(values, inv_norms, sq, scan_values, similarity)


def _normalised(values: Any, inv_norms: np.ndarray, dtype: Any, workers: int = 1) -> Any:
    """Rows scaled by ``inv_norms`` (computed in float64), stored as ``dtype``, in chunks of rows."""
    if sp.issparse(values):
        out = values.astype(np.float64)
        out.data *= np.repeat(inv_norms, np.diff(out.indptr))
        return out.astype(dtype)
    out = np.empty(values.shape, dtype=dtype)

    def scale(rows: slice) -> None:  # the float64 product, rounded once to dtype
        np.multiply(values[rows], inv_norms[rows, None], out=out[rows], dtype=np.float64, casting="unsafe")

    _chunked(scale, values.shape[0], _ROW_CHUNK, workers)
    return out


def _checked_norms(values: np.ndarray, keys: Sequence[str], what: str,
                   workers: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Row L2 norms and ``_row_sq`` of a dense float matrix; rows holding NaN or infinities are refused.

    Fast path: sqrt of the row sums of squares; rows where that is not finite or could have under/overflowed
    are redone with the overflow-safe scaled formula (after checking their values are finite).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        sq = _row_sq(values, workers=workers)
    suspicious = np.flatnonzero(~np.isfinite(sq) | (sq < 1e-280) | (sq > 1e280))
    norms = np.sqrt(sq)
    if suspicious.size:
        rows = values[suspicious].astype(np.float64)
        bad = suspicious[~np.isfinite(rows).all(axis=1)]
        if bad.size:
            shown = ", ".join(f"{_describe(keys[i])} (index {int(i)})" for i in bad[:_LIST_LIMIT])
            raise ValidationError(f"{what}: {bad.size} row(s) contain NaN or infinite values: row id {shown}"
                                  f"{', ...' if bad.size > _LIST_LIMIT else ''}")
        norms[suspicious] = _row_norms(rows)
    return norms, sq
