"""The defining float64 arithmetic of retrieval scores, and the block products that only filter.

A pair's score is defined by its *direct* computation: the float64 inner product of the two rows as given
(numpy's pairwise row sum: the same bits whichever batch computes it), scaled ``(q.g) / |q| / |g|`` for cosine,
``2 q.g - |g|^2`` for squared_l2 (``positives.pair_rank_scores``). Block products (``_product``, one BLAS call
per unit in the scan precision) are within ``_tolerance`` of the direct values: a rigorous bound, about
``(d + 2) u |q| max|g|`` for scan precision u.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

_U = 2.0 ** -53  # float64 unit roundoff
_PAIR_CHUNK = 8192  # at most this many pairs per direct-computation chunk
_ROW_CHUNK = 4096


def _chunked(fn, n: int, chunk: int, workers: int = 1) -> None:
    """``fn(rows)`` for consecutive slices of ``range(n)`` of ``chunk`` rows, on ``workers`` threads when
    > 1 (numpy releases the GIL; each slice is computed alone, so the results do not depend on it)."""
    slices = [slice(a, min(a + chunk, n)) for a in range(0, n, chunk)]
    if workers <= 1 or len(slices) <= 1:
        for rows in slices:
            fn(rows)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(fn, slices))


def _sparse_row_norms(matrix: sp.csr_matrix) -> np.ndarray:
    """Overflow-safe L2 norms of sparse float64 rows (scaled by the row's largest magnitude)."""
    absolute = abs(matrix)
    scale = absolute.max(axis=1).toarray().ravel()
    safe = np.where(scale > 0, scale, 1.0)
    scaled = sp.diags(1.0 / safe) @ absolute
    return scale * np.sqrt(np.asarray(scaled.multiply(scaled).sum(axis=1)).ravel())


def _row_norms(M: Any) -> np.ndarray:
    """Overflow-safe L2 norms of float64 rows (scaled by each row's largest magnitude), in chunks of rows."""
    if sp.issparse(M):
        return _sparse_row_norms(M)
    out = np.empty(M.shape[0], dtype=np.float64)
    for start in range(0, M.shape[0], _ROW_CHUNK):
        block = M[start:start + _ROW_CHUNK]
        scale = np.abs(block).max(axis=1) if block.shape[1] else np.zeros(block.shape[0])
        safe = np.where(scale > 0, scale, 1.0)
        scaled = block / safe[:, None]
        out[start:start + block.shape[0]] = scale * np.sqrt(np.multiply(scaled, scaled).sum(axis=1))
    return out


def _as64(X: Any) -> Any:
    return X.astype(np.float64) if X.dtype != np.float64 else X


def _rowwise_dot(X: Any, Y: Any) -> np.ndarray:
    """Row-wise float64 inner products of two equally shaped row sets (dense: numpy's pairwise row sum, the
    same bits for a row whatever the batch, unlike einsum beyond 8192 columns; sparse: stored order)."""
    X, Y = _as64(X), _as64(Y)
    n = X.shape[0]
    if not sp.issparse(X) and not sp.issparse(Y):
        return np.multiply(X, Y).sum(axis=1)
    if sp.issparse(X) and sp.issparse(Y):
        product = sp.csr_matrix(X.multiply(Y))
        product.sort_indices()
        rows = np.repeat(np.arange(n), np.diff(product.indptr))
        return np.bincount(rows, weights=product.data, minlength=n)
    if sp.issparse(Y):
        X, Y = Y, X
    rows = np.repeat(np.arange(n), np.diff(X.indptr))
    return np.bincount(rows, weights=X.data * Y[rows, X.indices], minlength=n)


def _rowwise_sqdist(X: Any, Y: Any) -> np.ndarray:
    """Row-wise squared Euclidean distances in float64, summed from the differences (no cancellation)."""
    X, Y = _as64(X), _as64(Y)
    n = X.shape[0]
    if sp.issparse(X) != sp.issparse(Y):
        X, Y = (X.toarray(), Y) if sp.issparse(X) else (X, Y.toarray())
    diff = X - Y
    if sp.issparse(diff):
        diff = sp.csr_matrix(diff)
        diff.sort_indices()
        rows = np.repeat(np.arange(n), np.diff(diff.indptr))
        return np.bincount(rows, weights=diff.data * diff.data, minlength=n)
    diff = np.asarray(diff)
    return np.multiply(diff, diff).sum(axis=1)


def _take_rows(M: Any, index: np.ndarray | None, sl: slice) -> Any:
    return M[sl] if index is None else M[index[sl]]


def _pairwise(fn, A: Any, ia: np.ndarray | None, B: Any, ib: np.ndarray | None, workers: int = 1) -> np.ndarray:
    """``fn`` over row pairs in chunks of ~256K values (results do not depend on the chunking)."""
    n = A.shape[0] if ia is None else len(ia)
    out = np.empty(n, dtype=np.float64)

    def pairs(sl: slice) -> None:
        out[sl] = fn(_take_rows(A, ia, sl), _take_rows(B, ib, sl))

    _chunked(pairs, n, max(1, min(_PAIR_CHUNK, (1 << 18) // max(1, A.shape[1]))), workers)
    return out


def _square_sums(X: Any, _: Any) -> np.ndarray:
    """``_rowwise_dot(X, X)`` for dense rows, squaring one float64 copy in place (the same bits)."""
    x = X.astype(np.float64, copy=True)
    return np.multiply(x, x, out=x).sum(axis=1)


def _row_sq(M: Any, index: np.ndarray | None = None, workers: int = 1) -> np.ndarray:
    """Squared norms |m|^2 (float64) of (the selected) raw rows, computed the same way for every row."""
    return _pairwise(_rowwise_dot if sp.issparse(M) else _square_sums, M, index, M, index, workers)


def row_sq_norms(M: Any) -> np.ndarray:
    """|m|^2 of every row of a float matrix, computed as the kernel computes them."""
    return _row_sq(M)


def _product(A: Any, B: Any) -> np.ndarray:
    """Dense C-contiguous block A @ B.T in the operands' precision, never densifying a sparse operand."""
    a_sparse, b_sparse = sp.issparse(A), sp.issparse(B)
    if not a_sparse and not b_sparse:
        return A @ B.T
    if a_sparse and b_sparse:
        return np.ascontiguousarray((A @ B.T).toarray())
    if a_sparse:
        return np.ascontiguousarray(A @ np.ascontiguousarray(B.T))
    return np.ascontiguousarray((B @ np.ascontiguousarray(A.T)).T)


def _tolerance(similarity: str, d: int, q_norms: np.ndarray, g_max: float, unit: float) -> np.ndarray:
    """Per query row, a rigorous bound on |block score - direct score| for every gallery row of the shard.

    The direct score is a float64 sum of d products, within gamma_d(2^-53) |q||g| of the exact inner product
    (gamma_d(u) = d u / (1 - d u) bounds any summation order; sum|q_k g_k| <= |q||g|), plus a few roundings
    for the cosine scaling (8 u64 allowed).
    The block score rounds the rows to the scan precision u (relative error <= u each) and sums in that
    precision: within ((d + 2.1) u / (1 - d u)) |q||g|. squared_l2 doubles that and adds the rounding of |g|^2 and of the
    subtraction. A 10% margin is added, and an absolute term covers subnormal products.
    """
    u64 = _U
    dot = ((d + 2.1) * unit / (1.0 - d * unit) + (d + 8) * u64 / (1.0 - d * u64)) * q_norms * g_max
    tiny = (2.0 ** -140 if unit > u64 else 2.0 ** -1000) * (d + 2) * (1.0 + q_norms + g_max) ** 2
    if similarity == "squared_l2":
        dot = 2.0 * dot + 2.1 * (unit + u64) * (2.0 * q_norms * g_max + 2.0 * g_max * g_max)
    return 1.1 * dot + tiny
