"""Matrix checks shared by every protocol: numeric 2-D matrices, finite rows, row ids, block stacking, and the
scale rule (exact power-of-two rescaling: `binary_exponents`, `to_unit_peak`, `rows_to_unit_peak`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.errors import ValidationError
from vertebrae.core.labels import describe_key, semantic_key


def as_matrix(values: Any, *, what: str) -> np.ndarray | sp.csr_matrix:
    """A 2-D float matrix: CSR for any scipy sparse input, else a numeric numpy array (dtype kept if float).

    Rows with no dimensions (shape ``(n, 0)``, n > 0) are refused naming ``what``: no embedding is 0 wide.
    """
    if sp.issparse(values):
        matrix = sp.csr_matrix(values)
        if matrix.dtype.kind not in "fiub":
            raise ValidationError(f"{what} must be numeric, got dtype {matrix.dtype}")
        _check_width(matrix.shape, what)
        if matrix.dtype.kind != "f":
            matrix = matrix.astype(np.float64)
        return matrix
    matrix = np.asarray(values)
    if matrix.ndim != 2:
        raise ValidationError(f"{what} must be a 2-D matrix (rows x dimensions), got shape {matrix.shape}")
    if matrix.dtype.kind not in "fiub":
        raise ValidationError(f"{what} must be numeric, got dtype {matrix.dtype}")
    _check_width(matrix.shape, what)
    return matrix if matrix.dtype.kind == "f" else matrix.astype(np.float64)


def _check_width(shape: tuple[int, ...], what: str) -> None:
    if shape[1] == 0 and shape[0] > 0:
        raise ValidationError(f"{what} have no dimensions (shape {tuple(shape)}): every row needs at least one value")


def paired_matrices(first: Any, second: Any, *, what: tuple[str, str], need: str,
                    mismatch_note: str = "") -> tuple[np.ndarray | sp.csr_matrix, np.ndarray | sp.csr_matrix]:
    """Two endpoints' matrices (``as_matrix``) that each have rows and share one width; ``need`` opens the
    empty-endpoint message, ``mismatch_note`` ends the width one."""
    a, b = as_matrix(first, what=what[0]), as_matrix(second, what=what[1])
    if a.shape[0] == 0 or b.shape[0] == 0:
        raise ValidationError(f"{need}, got {a.shape[0]} and {b.shape[0]}")
    if b.shape[1] != a.shape[1]:
        raise ValidationError(f"{what[0]} have {a.shape[1]} dimensions but {what[1]} have {b.shape[1]}{mismatch_note}")
    return a, b


def nonfinite_rows(matrix: np.ndarray | sp.csr_matrix) -> np.ndarray:
    """Indices of rows holding a NaN or an infinity."""
    if sp.issparse(matrix):
        bad = ~np.isfinite(matrix.data)
        if not bad.any():
            return np.zeros(0, dtype=np.int64)
        row_of_entry = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
        return np.unique(row_of_entry[bad])
    return np.flatnonzero(~np.isfinite(matrix).all(axis=1))


def check_finite(matrix: np.ndarray | sp.csr_matrix, row_ids: Sequence[str], *, what: str, offset: int = 0) -> None:
    """Raise naming up to 10 row ids whose values are NaN or infinite (indices counted from ``offset``)."""
    bad = nonfinite_rows(matrix)
    if bad.size:
        shown = ", ".join(f"{describe_key(row_ids[i])} (index {offset + i})" for i in bad[:10])
        more = ", ..." if bad.size > 10 else ""
        raise ValidationError(f"{what}: {bad.size} row(s) contain NaN or infinite values: row id {shown}{more}")


#: Binary exponents in (-ORDINARY_EXPONENT, ORDINARY_EXPONENT] (largest magnitudes in [2**-100, 2**100)) are
#: ordinary: float64 products and sums of squares of such values neither overflow nor underflow, and float32 holds
#: them. Retrieval and zero-shot use the same band.
ORDINARY_EXPONENT = 100


def is_ordinary(exponent: int) -> bool:
    """Whether a ``peak_exponent`` is within the ordinary band (``ORDINARY_EXPONENT``)."""
    return -ORDINARY_EXPONENT < int(exponent) <= ORDINARY_EXPONENT


def binary_exponents(peaks: Any) -> np.ndarray:
    """``frexp`` exponent of each magnitude in ``peaks`` (0 for zero or non-finite): ``peak * 2**-e`` lies in
    [0.5, 1). The one place vertebrae computes the exponent of its scale rule (docs/protocols/labelled.md, "Scale")."""
    peaks = np.asarray(peaks, dtype=np.float64)
    return np.where(np.isfinite(peaks) & (peaks > 0), np.frexp(peaks)[1], 0)


def peak_magnitude(*matrices: Any) -> float:
    """The largest absolute value of ``matrices`` (dense or sparse; 0.0 when all are empty or zero)."""
    largest = 0.0
    for matrix in matrices:
        values = matrix.data if sp.issparse(matrix) else np.asarray(matrix)
        if values.size and values.dtype.kind == "f":  # max |v| without a copy (NaN propagates as through np.abs)
            largest = max(largest, float(np.maximum(np.max(values), -np.min(values))))
        elif values.size:
            largest = max(largest, float(np.max(np.abs(values))))
    return largest


def peak_exponent(*matrices: Any) -> int:
    """``binary_exponents`` of the largest absolute value of ``matrices`` (0 when all are zero)."""
    return int(binary_exponents(peak_magnitude(*matrices)))


def power_of_two_factor(*matrices: Any) -> float:
    """``2**-peak_exponent(matrices)``: it brings the largest absolute value of ``matrices`` into [0.5, 1) (1.0 when
    all are zero); capped at 2**1023, the largest finite power of two, so subnormal input scales up, not to inf.

    Multiplying by it is exact for normal values, so a matrix and any power-of-two multiple of it rescale to the same
    bits, and any positive multiple to the same values up to rounding (scale-free scoring, issue 32).
    """
    return float(np.ldexp(1.0, min(-peak_exponent(*matrices), 1023)))


def times_power_of_two(matrix: np.ndarray | sp.csr_matrix, exponent: int) -> np.ndarray | sp.csr_matrix:
    """``matrix * 2**exponent`` by ``np.ldexp``: exact wherever the result is a normal number (only the binary
    exponents change; a subnormal scales up without loss). The matrix itself when the exponent is 0; else a new one,
    float dtypes kept (others become float64), CSR staying CSR."""
    if exponent == 0:
        return matrix
    if sp.issparse(matrix):
        out = sp.csr_matrix(matrix, copy=True)
        out.data = _ldexp(out.data, exponent)
        return out
    return _ldexp(np.asarray(matrix), exponent)


def to_unit_peak(matrix: np.ndarray | sp.csr_matrix) -> np.ndarray | sp.csr_matrix:
    """``matrix`` scaled by the power of two that brings its largest |value| into [0.5, 1) (``times_power_of_two``
    by ``-peak_exponent``): a matrix and any positive multiple of it then differ only by the multiple's mantissa, in
    (0.5, 2), and nothing computed from them later overflows or underflows where the other would not."""
    return times_power_of_two(matrix, -peak_exponent(matrix))


def _ldexp(values: np.ndarray, exponent: int) -> np.ndarray:
    if values.dtype.kind != "f":
        values = values.astype(np.float64)
    return np.ldexp(values, np.asarray(exponent, dtype=np.int32)).astype(values.dtype, copy=False)


def rows_to_unit_peak(block: Any) -> np.ndarray:
    """Float64 rows each scaled by its own power of two (``np.ldexp``, exact) so that its largest |value| lies in
    [0.5, 1); zero rows stay zero. Norms of the result neither overflow nor underflow, so L2 normalisation after it
    gives a row and any positive multiple of it the same unit vector (up to the rounding of the multiple itself)."""
    block = np.asarray(block, dtype=np.float64)
    peaks = np.abs(block).max(axis=1) if block.shape[1] else np.zeros(block.shape[0])
    return np.ldexp(block, -binary_exponents(peaks)[:, None])


def rescaled(matrix: np.ndarray | sp.csr_matrix, factor: float) -> np.ndarray | sp.csr_matrix:
    """``matrix`` times ``factor`` (computed in float64, stored in the matrix's float dtype; the matrix itself when
    the factor is 1); CSR stays CSR."""
    if factor == 1.0:
        return matrix
    dtype = matrix.dtype if matrix.dtype.kind == "f" else np.float64
    if sp.issparse(matrix):
        out = sp.csr_matrix(matrix, copy=True)
        out.data = (np.asarray(out.data, dtype=np.float64) * factor).astype(dtype)
        return out
    return (np.asarray(matrix, dtype=np.float64) * factor).astype(dtype, copy=False)


def encode_row_ids(row_ids: Sequence[Any] | None, n_rows: int, *, what: str) -> tuple[str, ...]:
    """Row ids as semantic keys (row order when None); duplicates and unsupported ids are refused."""
    if row_ids is None:
        return tuple(semantic_key(i) for i in range(n_rows))
    row_ids = list(row_ids.tolist() if isinstance(row_ids, np.ndarray) else row_ids)
    if len(row_ids) != n_rows:
        raise ValidationError(f"{what}: {len(row_ids)} row ids for {n_rows} rows")
    keys = []
    for i, value in enumerate(row_ids):
        if isinstance(value, np.integer):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ValidationError(f"{what}: row id at index {i} must be a str or an int, got {value!r}")
        keys.append(semantic_key(value))
    duplicates = [key for key, count in Counter(keys).items() if count > 1]
    if duplicates:
        first = duplicates[0]
        rows = [i for i, key in enumerate(keys) if key == first][:5]
        raise ValidationError(f"{what}: duplicate row id {row_ids[rows[0]]!r} at rows {rows}")
    return tuple(keys)


def stack_blocks(parts: list[Any], name: str) -> np.ndarray | sp.csr_matrix:
    """Row-wise concatenation (CSR if any part is sparse); widths must agree."""
    if not parts:
        raise ValidationError(f"{name!r}: no rows to embed")
    if len({p.shape[1] for p in parts}) > 1:
        raise ValidationError(f"extractor {name!r} returned batches of different widths: {sorted({p.shape[1] for p in parts})}")
    if any(sp.issparse(p) for p in parts):
        return sp.vstack([sp.csr_matrix(p) for p in parts], format="csr")
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
