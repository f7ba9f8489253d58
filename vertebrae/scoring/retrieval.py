"""Exact, memory-bounded query--gallery retrieval scoring (spec/retrieval.md).

Definitions
-----------
* Similarity: ``cosine`` (both sides L2-normalised; a zero row is an error), ``dot`` (inner product) or
  ``squared_l2`` (similarity ``-|q - g|^2``, larger is better; ranked by the equivalent ``2 q.g - |g|^2``,
  which drops the per-query constant ``|q|^2``; every similarity *reported* is the true ``-|q - g|^2``).
* Eligible pairs: every (query, gallery) pair except the excluded ones. Excluded pairs leave both the
  candidates and the positives. A positive is an eligible pair with grade > 0 (explicit zero grades are
  non-relevant, like missing pairs). Every query needs at least one eligible positive.
* Rank of a positive = 1 + the number of eligible gallery items that score strictly higher, or score the same
  and come earlier in gallery row order (tie rule: gallery row order). Other positives are competitors.
* Per query with R positives at ranks r_1 < r_2 < ... < r_R and hits h_k = #{i : r_i <= k}:
  ``mrr = 1 / r_1`` (no cutoff); ``map = mean_i i / r_i`` (denominator R); ``precision@k = h_k / k``;
  ``recall@k = h_k / R``; ``hit_rate@k = [h_k > 0]``; ``ndcg@k = DCG@k / IDCG@k`` with gain ``2^g - 1``,
  discount ``log2(rank + 1)``, IDCG from the k largest grades (0 if IDCG is 0), clipped to [0, 1]. Gains are
  never formed: ``log(2^g - 1)`` is computed stably (x = g ln 2: ``x < 1e-4``: ``log g + log ln 2 +
  log1p(x/2 + x^2/6)``; ``x <= 50``: ``log(expm1 x)``; else ``x + log1p(-e^-x)``), the query's largest
  log-gain is subtracted and the exponentiated ratios are used in both DCG and IDCG. Aggregates are plain
  means over queries.
* Margin per query = best positive similarity - highest eligible non-positive similarity (no margin, and a
  warning, for a query without eligible negatives).

Decomposition
-------------
Every metric is a function of the ranks, and a rank is a count, so the work splits into units of one
(query block, gallery shard) pair: ``score_shard`` returns a ``RetrievalPartial`` holding, per (query,
positive), the number of eligible competitors in the shard that outrank it and the number that tie with it,
and per query the best eligible non-positive of the shard. ``merge_partials`` adds counts and keeps the best
negative (max); ``finalize`` turns the merged counts into metrics. ``RetrievalScorer`` runs the same kernel
(``_score_unit``) over every gallery shard of a query block into one ``_BlockState``, whose partial covers
the whole gallery (equal to merging the per-shard partials: counts add; the direct scores it defers are
computed once per query block), and spreads the query blocks over worker threads (``RetrievalScorer.workers``:
as many as BLAS threads, each thread multiplying with single-threaded BLAS); a workflow can fan the units out.

Arithmetic
----------
The score of a pair is defined by its *direct* computation (``pair_rank_scores``): the float64 inner product
of the two rows as given (numpy's pairwise row sum: the same bits whichever batch computes it), scaled
``(q.g) / |q| / |g|`` for cosine, ``2 q.g - |g|^2`` for squared_l2. Positives' scores are computed that way
once (``positive_scores``). Block products (one BLAS call per unit, on float32 copies of the rows unless a row
norm exceeds 1e18) only *filter*: every block score is within ``tol`` of its direct value, a rigorous bound
(``_tolerance``: about ``(d + 2) u |q| max|g|`` for scan precision u), so a competitor more than ``tol`` above
(below) a positive's score outranks (does not outrank) it, and one inside that band is recomputed directly and
compared exactly. Likewise the nearest negative is chosen, by direct scores, among the items whose upper
bound (block score + tol) reaches the best lower bound (block score - tol) of any eligible negative. Ranks,
ties, nearest negatives and metrics therefore do not depend on block sizes, shard boundaries, worker threads,
the BLAS or the scan precision.

Memory admission
----------------
Before any work: ``8 (nq + ng) d + 8 min(qbs, nq) min(gbs, ng)`` bytes (both directions when bidirectional)
must fit ``max_dense_bytes`` (a sparse endpoint counts ``16 nnz + 8 (rows + 1)`` instead of ``8 rows d``: it
stays sparse), and ``nq ng`` must not exceed ``max_comparisons`` when set; otherwise ``BudgetError``. What is
then allocated stays inside that: float rows are used in place and the only endpoint copies are the scan
rows (float32, 4 bytes a value; float64 rows beyond the float32 range; non-float input is first converted to
float64, 8 bytes more); a unit
holds its float32 score block, two boolean masks and at most half the block again, about 8 bytes an element
(a float64 block is scored in two column halves); candidates of the sparse path are processed in chunks near
one byte an element; per-query results are arrays. Each worker thread holds one unit, so the scorer runs only
as many workers as ``max_dense_bytes`` holds score blocks beside the endpoints.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.errors import ArtifactError, BudgetError, ConfigError, LabelError, ValidationError
from vertebrae.core.fingerprint import to_json_value
from vertebrae.core.labels import describe_key, semantic_key
from vertebrae.core.arrays import as_matrix, check_finite
from vertebrae.scoring.metrics import SIMILARITIES, parse_retrieval_metric
from vertebrae.scoring.metrics import _row_norms as _sparse_row_norms

__all__ = [
    "Endpoint",
    "PositivePairs",
    "RetrievalConfig",
    "RetrievalPartial",
    "RetrievalResult",
    "RetrievalScore",
    "RetrievalScorer",
    "admit",
    "eligible_relevance",
    "exclusion_matrix",
    "finalize",
    "log_gain",
    "merge_partials",
    "pair_rank_scores",
    "positive_scores",
    "prepare_endpoint",
    "relevance_matrix",
    "row_sq_norms",
    "score_shard",
]

RETRIEVAL_SCORE_SCHEMA = "vertebrae.retrieval-score/v1"
RETRIEVAL_RESULT_SCHEMA = "vertebrae.retrieval-result/v1"
TIE_RULE = "gallery row order (equal scores: the earlier gallery row ranks first)"
RANK_RULE = "1 + eligible gallery items scoring strictly higher, or equal and earlier in gallery row order"

_U = 2.0 ** -53  # float64 unit roundoff
_PAIR_CHUNK = 8192  # at most this many pairs per direct-computation chunk
_LN2 = math.log(2.0)
# cost model of the shard kernel, measured (relative units): the passes of one dense positive, per row
# element, versus extracting and locating one candidate of a sparse positive
_DENSE_PASS_COST = 1.0
_SPARSE_CANDIDATE_COST = 150.0
_GROUP_BYTES = 2 << 20  # bytes of scores per row group of the shard kernel's passes (1-4 MiB measured alike)
_LIST_LIMIT = 10


# --------------------------------------------------------------------------------------------------
# Configuration


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"RetrievalConfig.{name} must be a positive integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class RetrievalConfig:
    """Settings of exact retrieval scoring.

    ``primary_metric`` may be any reported metric: ``map``, ``mrr`` or ``ndcg@K``, ``precision@K``,
    ``recall@K``, ``hit_rate@K`` with K in ``ks`` (upstream allows only ``ndcg@K``; every such config stays
    valid here). ``worst_queries`` = how many lowest-scoring queries (by the primary metric) to report.
    ``query_block_size`` defaults to 512 (upstream: 128): BLAS packs the gallery block once per query block,
    and 512-query products run 10-14% faster at no cost to exactness; a block is 512 x 10,000 x 8 bytes = 41 MB
    of the memory budget.
    """

    similarity: str = "cosine"
    ks: tuple[int, ...] = (1, 5, 10)
    primary_metric: str = "ndcg@10"
    bidirectional: bool = False
    query_block_size: int = 512
    gallery_block_size: int = 10_000
    max_dense_bytes: int = 2_000_000_000
    max_comparisons: int | None = None
    worst_queries: int = 10

    def __post_init__(self) -> None:
        if self.similarity not in SIMILARITIES:
            raise ConfigError(f"RetrievalConfig.similarity must be one of {SIMILARITIES}, got {self.similarity!r}")
        ks = self.ks
        if isinstance(ks, (str, bytes)) or not isinstance(ks, (Sequence, np.ndarray)) or len(ks) == 0:
            raise ConfigError(f"RetrievalConfig.ks must be a non-empty sequence of positive integers, got {ks!r}")
        for k in ks:
            if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
                raise ConfigError(f"RetrievalConfig.ks must hold positive integers, got {k!r}")
        if len({int(k) for k in ks}) != len(ks):
            raise ConfigError(f"RetrievalConfig.ks holds duplicates: {list(ks)}")
        object.__setattr__(self, "ks", tuple(sorted(int(k) for k in ks)))
        parse_retrieval_metric(self.primary_metric, self.ks, owner="RetrievalConfig.primary_metric")
        if not isinstance(self.bidirectional, (bool, np.bool_)):
            raise ConfigError(f"RetrievalConfig.bidirectional must be a bool, got {self.bidirectional!r}")
        object.__setattr__(self, "bidirectional", bool(self.bidirectional))
        for name in ("query_block_size", "gallery_block_size", "max_dense_bytes"):
            object.__setattr__(self, name, _positive_int(getattr(self, name), name))
        if self.max_comparisons is not None:
            object.__setattr__(self, "max_comparisons", _positive_int(self.max_comparisons, "max_comparisons"))
        w = self.worst_queries
        if isinstance(w, (bool, np.bool_)) or not isinstance(w, (int, np.integer)) or w < 0:
            raise ConfigError(f"RetrievalConfig.worst_queries must be a non-negative integer, got {w!r}")
        object.__setattr__(self, "worst_queries", int(w))

    def metric_names(self) -> tuple[str, ...]:
        """``map``, ``mrr``, then ``ndcg@k``, ``precision@k``, ``recall@k``, ``hit_rate@k`` for each k."""
        names = ["map", "mrr"]
        for family in ("ndcg", "precision", "recall", "hit_rate"):
            names += [f"{family}@{k}" for k in self.ks]
        return tuple(names)

    def to_dict(self) -> dict[str, Any]:
        return {name: to_json_value(getattr(self, name)) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetrievalConfig:
        if not isinstance(data, Mapping):
            raise ConfigError(f"RetrievalConfig must be a mapping, got {type(data).__name__}")
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ConfigError(f"unknown RetrievalConfig fields: {sorted(unknown)}")
        data = dict(data)
        if isinstance(data.get("ks"), list):
            data["ks"] = tuple(data["ks"])
        return cls(**data)


# --------------------------------------------------------------------------------------------------
# Inputs: ids, relevance, exclusions, endpoints


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


_SCAN_DTYPES = ("float32", "float64")
_SCAN = "float32"  # the scan precision the scorer asks for (float64 only for rows beyond _FLOAT32_SAFE_NORM)
_FLOAT32_SAFE_NORM = 1e18  # rows up to this norm keep every float32 scan product, sum and |g|^2 finite
_ROW_CHUNK = 4096


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


# --------------------------------------------------------------------------------------------------
# Direct (defining) pair arithmetic and block products


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


def pair_rank_scores(Q: Endpoint, rows: np.ndarray, G: Endpoint, cols: np.ndarray, workers: int = 1) -> np.ndarray:
    """The defining rank score of the pairs (Q row ``rows[i]``, G row ``cols[i]``): the float64 q.g of the raw
    rows, scaled ``(q.g) / |q| / |g|`` for cosine, ``2 q.g - |g|^2`` for squared_l2."""
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    dots = _pairwise(_rowwise_dot, Q.values, rows, G.values, cols, workers)
    if Q.similarity == "cosine":
        return dots * Q.inv_norms[rows] * G.inv_norms[cols]
    if Q.similarity == "squared_l2":
        return 2.0 * dots - G.sq[cols]
    return dots


def _pair_similarities(Q: Endpoint, rows: np.ndarray, G: Endpoint, cols: np.ndarray,
                       rank_scores: np.ndarray, workers: int = 1) -> np.ndarray:
    """Reported similarities: the rank scores, or the true -|q - g|^2 for squared_l2."""
    if Q.similarity != "squared_l2":
        return rank_scores.copy()
    return -_pairwise(_rowwise_sqdist, Q.values, np.asarray(rows, dtype=np.int64), G.values,
                      np.asarray(cols, dtype=np.int64), workers)


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


# --------------------------------------------------------------------------------------------------
# Positives


@dataclass(frozen=True, eq=False)
class PositivePairs:
    """The eligible positives of a run of queries, in CSR layout (``indptr`` rebased to the first query).

    ``indices`` are global gallery rows (ascending within a query); ``rank_scores`` the defining scores that
    ranks compare against; ``similarities`` the reported values (true -|q - g|^2 for squared_l2).
    """

    indptr: np.ndarray
    indices: np.ndarray
    grades: np.ndarray
    rank_scores: np.ndarray
    similarities: np.ndarray

    def __post_init__(self) -> None:
        for name, dtype in (("indptr", np.int64), ("indices", np.int64), ("grades", np.float64),
                            ("rank_scores", np.float64), ("similarities", np.float64)):
            object.__setattr__(self, name, np.ascontiguousarray(getattr(self, name), dtype=dtype))
        n = int(self.indptr[-1]) if self.indptr.size else -1
        if self.indptr.ndim != 1 or self.indptr.size < 1 or self.indptr[0] != 0 or np.any(np.diff(self.indptr) < 0):
            raise ValidationError("PositivePairs.indptr must start at 0 and be non-decreasing")
        for name in ("indices", "grades", "rank_scores", "similarities"):
            if getattr(self, name).shape != (n,):
                raise ValidationError(f"PositivePairs.{name} must hold {n} values (one per positive pair)")

    @property
    def n_queries(self) -> int:
        return int(self.indptr.size - 1)

    @property
    def n_pairs(self) -> int:
        return int(self.indptr[-1])

    def rows(self, start: int, stop: int) -> PositivePairs:
        """The positives of queries [start, stop) (indptr rebased)."""
        if not 0 <= start <= stop <= self.n_queries:
            raise ValidationError(f"PositivePairs.rows: [{start}, {stop}) is outside [0, {self.n_queries})")
        a, b = int(self.indptr[start]), int(self.indptr[stop])
        return PositivePairs(self.indptr[start:stop + 1] - a, self.indices[a:b], self.grades[a:b],
                             self.rank_scores[a:b], self.similarities[a:b])


def _check_endpoints(Q: Any, G: Any, config: RetrievalConfig, where: str) -> None:
    if not isinstance(Q, Endpoint) or not isinstance(G, Endpoint):
        raise ValidationError(f"{where} takes prepared endpoints (prepare_endpoint(...), sliced by rows)")
    for name, endpoint in (("queries", Q), ("gallery", G)):
        if endpoint.similarity != config.similarity:
            raise ValidationError(f"{where}: the {name} were prepared for {endpoint.similarity!r} similarity, "
                                  f"the config scores {config.similarity!r}")


def positive_scores(Q: Endpoint, G: Endpoint, relevance: sp.csr_matrix, *, config: RetrievalConfig,
                    workers: int = 1) -> PositivePairs:
    """Score every eligible (query, positive) pair directly (``pair_rank_scores``).

    ``Q`` and ``G`` are prepared endpoints (``prepare_endpoint``); ``relevance`` the eligible grades
    (``eligible_relevance``), one row per row of ``Q``. ``workers``: threads (the same bits whatever the count).
    """
    _check_endpoints(Q, G, config, "positive_scores")
    relevance = sp.csr_matrix(relevance)
    if relevance.shape != (len(Q), len(G)):
        raise ValidationError(f"relevance has shape {relevance.shape}, expected {(len(Q), len(G))}")
    relevance.sort_indices()
    rows = np.repeat(np.arange(len(Q), dtype=np.int64), np.diff(relevance.indptr))
    cols = relevance.indices.astype(np.int64)
    rank = pair_rank_scores(Q, rows, G, cols, workers)
    similarity = _pair_similarities(Q, rows, G, cols, rank, workers)
    return PositivePairs(relevance.indptr.astype(np.int64), cols, relevance.data, rank, similarity)


# --------------------------------------------------------------------------------------------------
# Partial counts


def _normalize_ranges(ranges: Iterable[Any]) -> tuple[tuple[int, int], ...]:
    """Sorted, adjacent-merged gallery ranges; an overlap (double counting) is refused."""
    pairs = sorted((int(a), int(b)) for a, b in ranges)
    out: list[list[int]] = []
    for a, b in pairs:
        if b < a:
            raise ValidationError(f"gallery range [{a}, {b}) is reversed")
        if out and a < out[-1][1]:
            raise ValidationError(f"gallery rows [{a}, {min(b, out[-1][1])}) are covered by more than one partial")
        if out and a == out[-1][1]:
            out[-1][1] = b
        elif b > a:
            out.append([a, b])
    return tuple((a, b) for a, b in out)


@dataclass(frozen=True, eq=False)
class RetrievalPartial:
    """Partial counts of queries [query_start, query_stop) over the gallery rows in ``gallery_ranges``.

    Per (query, positive) pair, aligned with the positives' CSR layout (``positive_indptr`` rebased,
    ``positive_indices`` global gallery rows): ``outranked`` = eligible competitors that outrank it, ``tied`` =
    eligible competitors with exactly its score. Per query: the best eligible non-positive by rank score
    (``negative_score``, -inf if none; ``negative_index``, -1; ``negative_similarity``, NaN). Counts add
    across gallery shards; the best negative merges by max (ties: lower gallery row).
    """

    query_start: int
    query_stop: int
    gallery_ranges: tuple[tuple[int, int], ...]
    positive_indptr: np.ndarray
    positive_indices: np.ndarray
    outranked: np.ndarray
    tied: np.ndarray
    negative_score: np.ndarray
    negative_index: np.ndarray
    negative_similarity: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "query_start", int(self.query_start))
        object.__setattr__(self, "query_stop", int(self.query_stop))
        object.__setattr__(self, "gallery_ranges", _normalize_ranges(self.gallery_ranges))
        for name, dtype in (("positive_indptr", np.int64), ("positive_indices", np.int64), ("outranked", np.int64),
                            ("tied", np.int64), ("negative_score", np.float64), ("negative_index", np.int64),
                            ("negative_similarity", np.float64)):
            object.__setattr__(self, name, np.ascontiguousarray(getattr(self, name), dtype=dtype))
        n = self.query_stop - self.query_start
        if n < 0 or self.query_start < 0:
            raise ValidationError(f"RetrievalPartial query range [{self.query_start}, {self.query_stop}) is invalid")
        if self.positive_indptr.shape != (n + 1,) or self.positive_indptr[0] != 0:
            raise ValidationError(f"RetrievalPartial.positive_indptr must hold {n + 1} offsets starting at 0")
        pairs = int(self.positive_indptr[-1])
        for name in ("positive_indices", "outranked", "tied"):
            if getattr(self, name).shape != (pairs,):
                raise ValidationError(f"RetrievalPartial.{name} must hold {pairs} values (one per positive pair)")
        for name in ("negative_score", "negative_index", "negative_similarity"):
            if getattr(self, name).shape != (n,):
                raise ValidationError(f"RetrievalPartial.{name} must hold {n} values (one per query)")

    @property
    def n_queries(self) -> int:
        return self.query_stop - self.query_start

    def to_dict(self) -> dict[str, Any]:
        """JSON form; missing negatives are null."""
        has = self.negative_index >= 0
        return {
            "query_start": self.query_start,
            "query_stop": self.query_stop,
            "gallery_ranges": [list(r) for r in self.gallery_ranges],
            "positive_indptr": self.positive_indptr.tolist(),
            "positive_indices": self.positive_indices.tolist(),
            "outranked": self.outranked.tolist(),
            "tied": self.tied.tolist(),
            "negative_score": [float(v) if h else None for v, h in zip(self.negative_score, has)],
            "negative_index": self.negative_index.tolist(),
            "negative_similarity": [float(v) if h else None for v, h in zip(self.negative_similarity, has)],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetrievalPartial:
        try:
            score = [-np.inf if v is None else v for v in data["negative_score"]]
            similarity = [np.nan if v is None else v for v in data["negative_similarity"]]
            return cls(data["query_start"], data["query_stop"], tuple(tuple(r) for r in data["gallery_ranges"]),
                       np.asarray(data["positive_indptr"], dtype=np.int64),
                       np.asarray(data["positive_indices"], dtype=np.int64),
                       np.asarray(data["outranked"], dtype=np.int64), np.asarray(data["tied"], dtype=np.int64),
                       np.asarray(score, dtype=np.float64), np.asarray(data["negative_index"], dtype=np.int64),
                       np.asarray(similarity, dtype=np.float64))
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactError(f"malformed retrieval partial: {exc}") from None


def _block_entries(matrix: Any, b: int, s: int, query_offset: int, gallery_offset: int, what: str
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(row, column) of the block's nonzero entries in block coordinates; a matrix of the block's shape is
    block-local, otherwise its rows/columns are global and are sliced at the offsets."""
    if matrix is None:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    matrix = matrix if sp.isspmatrix_csr(matrix) or isinstance(matrix, sp.csr_array) else sp.csr_matrix(matrix)
    if matrix.shape[0] != b:
        if matrix.shape[0] < query_offset + b:
            raise ValidationError(f"{what} has {matrix.shape[0]} rows; the block needs rows "
                                  f"[{query_offset}, {query_offset + b})")
        matrix = matrix[query_offset:query_offset + b]
    mask = np.asarray(matrix.data != 0)
    rows = np.repeat(np.arange(b, dtype=np.int64), np.diff(matrix.indptr))[mask]
    cols = matrix.indices.astype(np.int64)[mask]
    if matrix.shape[1] != s:
        if matrix.shape[1] < gallery_offset + s:
            raise ValidationError(f"{what} has {matrix.shape[1]} columns; the shard needs columns "
                                  f"[{gallery_offset}, {gallery_offset + s})")
        keep = (cols >= gallery_offset) & (cols < gallery_offset + s)
        rows, cols = rows[keep], cols[keep] - gallery_offset
    return rows, cols


def _count_true_rows(mask: np.ndarray) -> np.ndarray:
    """Count of True along the last axis of a bool array whose last axis is contiguous and a multiple of 8 long.

    Bytes are 0 or 1, so adding up to 255 of a row's 8-byte words never carries from one byte lane into the
    next: the row's count is the sum of the lanes of its chunk sums (SWAR; ~3x a per-word popcount)."""
    words = mask.view(np.uint64)
    if words.shape[-1] == 0:
        return np.zeros(words.shape[:-1], dtype=np.int64)
    lanes = np.add.reduceat(words, np.arange(0, words.shape[-1], 255), axis=-1)
    return lanes.view(np.uint8).sum(axis=-1, dtype=np.int64)


def _round_up(x: np.ndarray, dtype: Any) -> np.ndarray:
    """The smallest ``dtype`` values >= x (x itself for float64)."""
    if dtype == np.float64:
        return x
    y = x.astype(dtype)
    return np.where(y.astype(np.float64) < x, np.nextafter(y, dtype(np.inf)), y)


def _round_down(x: np.ndarray, dtype: Any) -> np.ndarray:
    """The largest ``dtype`` values <= x (x itself for float64)."""
    if dtype == np.float64:
        return x
    y = x.astype(dtype)
    return np.where(y.astype(np.float64) > x, np.nextafter(y, dtype(-np.inf)), y)


def score_shard(Q_block: Endpoint, G_shard: Endpoint, *, query_offset: int, gallery_offset: int,
                positives: PositivePairs, exclusions: Any = None, config: RetrievalConfig) -> RetrievalPartial:
    """Partial counts of one (query block, gallery shard) unit.

    ``Q_block`` = rows [query_offset, query_offset + b) of the prepared queries, ``G_shard`` = rows
    [gallery_offset, gallery_offset + s) of the prepared gallery (``prepare_endpoint(...)[a:b]``).
    ``positives`` covers the block's queries (or all queries; then it is sliced). ``exclusions`` is None, a
    (b x s) block, or a matrix in global coordinates.

    Kernel (``_score_unit``): S = Q.scan @ G.scan.T (squared_l2: (2 Q.scan) @ G.scan.T - |g|^2), one BLAS
    call; excluded pairs and the shard's positives are set to -inf. Every score is within ``tol``
    (``_tolerance``) of its direct value, so against a positive of direct score t an item scoring above
    ``hi = t + tol`` outranks it, one below ``lo = t - tol`` does not, and one in the band [lo, hi] is
    recomputed directly and compared exactly (tie rule: gallery row order). Each row's positives are split
    by the share of items expected to reach them (``_split_positives``: from a sample of the block, or from
    the block's earlier shards): the top ones, which few items reach, are *sparse*: one pass finds the items
    at or above the lowest sparse ``lo`` (and the nearest-negative candidates, see ``_BlockState``) and each
    is located among the row's sorted bands; every other positive is *dense*: one pass counts the items above
    its ``hi`` (bit counts of the mask) and one finds its band items, pass k taking every row's k-th dense
    positive (the product's rows are put in order of dense count, so a pass reads a prefix of S). All passes
    run over groups of S rows of about ``_GROUP_BYTES``, so a group stays in cache from pass to pass. Thresholds
    are rounded outwards to the scan precision. Direct scores (band items, nearest-negative candidates) are
    computed at the end, in gallery order. Positives compare among themselves by their direct scores. A
    float64 scan block is scored in two column halves (memory).
    """
    _check_endpoints(Q_block, G_shard, config, "score_shard")
    b = len(Q_block)
    if Q_block.shape[1] != G_shard.shape[1]:
        raise ValidationError(f"score_shard: query block {Q_block.shape} and gallery shard {G_shard.shape} must have "
                              "the same number of columns")
    query_offset, gallery_offset = int(query_offset), int(gallery_offset)
    if positives.n_queries != b:
        if positives.n_queries < query_offset + b:
            raise ValidationError(f"score_shard: positives cover {positives.n_queries} queries; the block needs "
                                  f"[{query_offset}, {query_offset + b})")
        positives = positives.rows(query_offset, query_offset + b)
    state = _BlockState(_BlockPositives.of(positives), Q_block, G_shard, gallery_offset)
    state.count_positives(gallery_offset, gallery_offset + len(G_shard))
    state.add_shard(G_shard, gallery_offset, exclusions, query_offset, config, _Workspace())
    return state.partial(query_offset, ((gallery_offset, gallery_offset + len(G_shard)),))


@dataclass(frozen=True, eq=False)
class _BlockPositives:
    """A query block's positives, derived once and read by every shard of the block.

    ``indptr``, ``rows`` (block row of each positive), ``cols`` (global gallery rows) and ``t`` (direct
    rank scores) in the positives' own order; ``order`` sorts them by (row, rank score ascending), the
    kernel's order, in which ``sorted_cols`` / ``sorted_t`` are given (``rows`` is the same in both).
    """

    indptr: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    t: np.ndarray
    order: np.ndarray
    sorted_cols: np.ndarray
    sorted_t: np.ndarray

    @classmethod
    def of(cls, positives: PositivePairs) -> _BlockPositives:
        indptr = positives.indptr
        rows = np.repeat(np.arange(positives.n_queries, dtype=np.int64), np.diff(indptr))
        order = np.lexsort((positives.rank_scores, rows))
        return cls(indptr, rows, positives.indices, positives.rank_scores, order, positives.indices[order],
                   positives.rank_scores[order])


class _Workspace:
    """One worker's reusable buffers (the score block and two masks): no fresh pages for every unit."""

    def __init__(self) -> None:
        self._buffers: dict[str, np.ndarray] = {}

    def get(self, name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        n = math.prod(shape) * np.dtype(dtype).itemsize
        buffer = self._buffers.get(name)
        if buffer is None or buffer.size < n:
            buffer = self._buffers[name] = np.empty(n, dtype=np.uint8)
        return buffer[:n].view(dtype).reshape(shape)


class _BlockState:
    """What one query block accumulates over gallery shards until its partial is exact.

    Counts decided by block scores (in kernel order), the positives' counts among themselves (positives'
    order), and the pairs that need a direct score, deferred so that each is computed once, in gallery order:
    band items (row, gallery row, positive) and nearest-negative candidates (row, gallery row, upper bound
    ``block score + tol``). ``lower`` is per row the best lower bound ``block max - tol`` seen: a candidate
    whose upper bound is below it cannot be the best negative and is dropped. ``G`` / ``g_offset``: the
    gallery rows the deferred pairs index (global row = g_offset + local row).
    """

    def __init__(self, block: _BlockPositives, Q_block: Endpoint, G: Endpoint, g_offset: int) -> None:
        P, b = block.t.size, len(Q_block)
        self.block, self.Q, self.G, self.g_offset = block, Q_block, G, int(g_offset)
        self.counts = np.zeros(P + 1, dtype=np.int64)  # index P: "no positive" (padding)
        self.ties = np.zeros(P, dtype=np.int64)
        self.outranked = np.zeros(P, dtype=np.int64)
        self.tied = np.zeros(P, dtype=np.int64)
        self.band: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.near: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.lower = np.full(b, -np.inf)
        self.seen = 0  # gallery columns counted so far
        self._bands: tuple[Any, ...] = ()

    def bands(self, g_max: float, narrow: bool, dtype: Any, similarity: str) -> tuple[np.ndarray, ...]:
        """(tol, lo, hi, key_lo, key_hi) against a shard whose largest row norm is ``g_max``, its block scores in
        ``dtype`` (``narrow``: either side scans float32 rows): per row the kernel's tolerance; per positive
        (kernel order) its band [lo, hi] rounded outwards to ``dtype``, padded at index P with +inf (never
        reached), and the (row, lo) / (row, hi) keys. Kept while the arguments repeat (a cosine gallery)."""
        if self._bands[:3] != (g_max, narrow, dtype):
            block, Q = self.block, self.Q
            P, rows = block.t.size, block.rows
            tol = _tolerance(similarity, Q.shape[1], np.sqrt(Q.sq), g_max, 2.0 ** -24 if narrow else _U)
            lo = np.append(_round_down(block.sorted_t - tol[rows], dtype), dtype(np.inf))
            hi = np.append(_round_up(block.sorted_t + tol[rows], dtype), dtype(np.inf))
            self._bands = (g_max, narrow, dtype, tol, lo, hi, _row_keys(rows, lo[:P]), _row_keys(rows, hi[:P]))
        return self._bands[3:]

    def count_positives(self, start: int, stop: int) -> None:
        """Count the positives in gallery rows [start, stop) as competitors of their query's positives."""
        block = self.block
        _count_positive_competitors(block.indptr, block.rows, block.cols, block.t,
                                    (block.cols >= start) & (block.cols < stop), self.outranked, self.tied)

    def add_shard(self, G_shard: Endpoint, gallery_offset: int, exclusions: Any, query_offset: int,
                  config: RetrievalConfig, workspace: _Workspace) -> None:
        """Count one shard (rows [gallery_offset, gallery_offset + s) of the gallery) into the state against
        the positives' scores (``count_positives`` counts the positives themselves)."""
        b, s = len(self.Q), len(G_shard)
        if b == 0 or s == 0:
            return
        er, ec = _block_entries(exclusions, b, s, query_offset, gallery_offset, "exclusions")
        narrow = self.Q.scan.dtype == np.float32 or G_shard.scan.dtype == np.float32
        halves = ((0, s),) if narrow or s < 2 else ((0, s // 2), (s // 2, s))  # a float64 block: two halves
        for lo_col, hi_col in halves:
            keep = (ec >= lo_col) & (ec < hi_col)
            _score_unit(self, G_shard[lo_col:hi_col], gallery_offset + lo_col, er[keep], ec[keep] - lo_col, config,
                        workspace)
            self.seen += hi_col - lo_col

    def add_near(self, rows: np.ndarray, cols: np.ndarray, upper: np.ndarray, lower: np.ndarray) -> None:
        """Nearest-negative candidates (global gallery rows), their upper and lower bounds."""
        np.maximum.at(self.lower, rows, lower)
        keep = upper >= self.lower[rows]
        self.near.append((rows[keep], cols[keep], upper[keep]))
        if len(self.near) > 64:  # prune what later shards have outbid
            rows, cols, upper = (np.concatenate(parts) for parts in zip(*self.near))
            keep = upper >= self.lower[rows]
            self.near = [(rows[keep], cols[keep], upper[keep])]

    def _direct(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Direct rank scores of (block row, global gallery row) pairs, computed in gallery order (locality)."""
        order = np.argsort(cols, kind="stable")
        x = np.empty(rows.size)
        x[order] = pair_rank_scores(self.Q, rows[order], self.G, cols[order] - self.g_offset)
        return x

    def partial(self, query_offset: int, gallery_ranges: tuple[tuple[int, int], ...]) -> RetrievalPartial:
        """Settle the deferred pairs and return the block's exact partial counts."""
        block, b = self.block, len(self.Q)
        t, cols = block.sorted_t, block.sorted_cols
        P = t.size
        counts, ties = self.counts[:P].copy(), self.ties.copy()
        if self.band:  # band items compared exactly with their positives (equal: the earlier gallery row wins)
            r, c, positions = (np.concatenate(parts) for parts in zip(*self.band))
            x = self._direct(r, c)
            equal = x == t[positions]
            wins = (x > t[positions]) | (equal & (c < cols[positions]))
            counts += np.bincount(positions, weights=wins, minlength=P).astype(np.int64)
            ties += np.bincount(positions, weights=equal, minlength=P).astype(np.int64)
        score, index, similarity = np.full(b, -np.inf), np.full(b, -1, dtype=np.int64), np.full(b, np.nan)
        if self.near:  # the best negative by direct scores (equal scores: the lower gallery row)
            r, c, upper = (np.concatenate(parts) for parts in zip(*self.near))
            keep = upper >= self.lower[r]
            r, c = r[keep], c[keep]
            x = self._direct(r, c)
            first = np.lexsort((c, -x, r))
            first = first[np.r_[True, r[first][1:] != r[first][:-1]]]
            r, c, x = r[first], c[first], x[first]
            score[r], index[r] = x, c
            similarity[r] = _pair_similarities(self.Q, r, self.G, c - self.g_offset, x)
        outranked, tied = self.outranked.copy(), self.tied.copy()
        outranked[block.order] += counts
        tied[block.order] += ties
        return RetrievalPartial(query_offset, query_offset + b, gallery_ranges, block.indptr, block.cols, outranked,
                                tied, score, index, similarity)


def _keep_best_negative(score, index, similarity, other_score, other_index, other_similarity) -> None:
    """In place: per query, the better of two best negatives (higher score; equal scores: lower gallery row)."""
    better = (other_score > score) | (
        (other_score == score) & (other_index >= 0) & ((index < 0) | (other_index < index)))
    score[better] = other_score[better]
    index[better] = other_index[better]
    similarity[better] = other_similarity[better]


def _row_keys(rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Keys that order (row, value) pairs by row, then value: int64 for float32 values (the row in the high
    32 bits, the value's order-preserving integer in the low ones), complex otherwise."""
    values = values + values.dtype.type(0)  # -0.0 -> +0.0: equal values get equal keys
    if values.dtype != np.float32:
        return rows + 1j * values
    bits = values.view(np.int32).astype(np.int64)
    ordered = np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)  # IEEE: negative floats order by -magnitude
    return (rows.astype(np.int64) << 32) + ordered


_SAMPLE_RUNS, _SAMPLE_RUN = 8, 32


def _split_positives(S: np.ndarray | None, lo: np.ndarray, indptr: np.ndarray, rows: np.ndarray,
                     share: np.ndarray | None = None) -> np.ndarray:
    """Per row, the position (kernel order) of its lowest *sparse* positive; the row's end if it has none.

    ``lo`` holds the positives' lower band edges in kernel order, padded with +inf at index P. ``share``
    estimates, per positive, the share of the row's items that outrank it (from the block's earlier shards);
    without it, the share at or above each ``lo`` is estimated from 8 evenly spread runs of 32 columns (the
    whole row when it is short). Making positives [p, end) sparse costs about
    ``share(p) * _SPARSE_CANDIDATE_COST`` per item (the located candidates) plus ``_DENSE_PASS_COST`` per dense
    positive [start, p) (its passes); each row takes its cheapest split (all dense on a tie).
    """
    P = rows.size
    start, R = indptr[:-1], np.diff(indptr)
    if share is None:
        share = _sample_share(S, lo, indptr, rows)
    cost = share * _SPARSE_CANDIDATE_COST + (np.arange(P) - start[rows]) * _DENSE_PASS_COST
    best = np.lexsort((cost, rows))  # per row: its cheapest split first
    nonempty = np.flatnonzero(R > 0)
    heads = best[start[nonempty]]
    first_sparse = indptr[1:].copy()
    sparse = cost[heads] < R[nonempty] * _DENSE_PASS_COST
    first_sparse[nonempty[sparse]] = heads[sparse]
    return first_sparse


def _sample_share(S: np.ndarray, lo: np.ndarray, indptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per positive, the share of a sample of its row's columns at or above its ``lo``."""
    b, s = S.shape
    P = rows.size
    start, R = indptr[:-1], np.diff(indptr)
    if s > _SAMPLE_RUNS * _SAMPLE_RUN:
        firsts = np.linspace(0, s - _SAMPLE_RUN, _SAMPLE_RUNS).astype(np.int64)
        sample = np.concatenate([S[:, a:a + _SAMPLE_RUN] for a in firsts], axis=1)
    else:
        sample = S
    m = sample.shape[1]
    share = np.empty(P)
    if R.max() <= 16:  # one comparison of the sample per k-th positive of every row
        for k in range(int(R.max())):
            positions = np.where(R > k, start + k, P)
            counted = np.count_nonzero(sample >= lo[positions][:, None], axis=1)
            share[positions[R > k]] = counted[R > k]
    else:
        step = max(1, (1 << 18) // m)
        for a in range(0, P, step):
            sl = slice(a, min(a + step, P))
            share[sl] = np.count_nonzero(sample[rows[sl]] >= lo[sl][:, None], axis=1)
    return share / m


def _nonzero_words(mask: np.ndarray) -> np.ndarray:
    """Indices of the nonzero 8-byte words of a C-contiguous bool matrix (rows a multiple of 8 long)."""
    return np.flatnonzero(mask.view(np.uint64).ravel() != 0)  # a bool scan: faster than on the words


def _expand_words(mask: np.ndarray, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, column) of the True entries of a (rows x width) bool ``mask`` inside the given 8-byte words (width
    a multiple of 8, so no word spans two rows)."""
    word, byte = np.nonzero(mask.view(np.uint64).ravel()[words].view(np.uint8).reshape(-1, 8))
    words_per_row = mask.shape[1] // 8
    word = words[word]
    row = word // words_per_row
    return row, (word - row * words_per_row) * 8 + byte


def _block_product(Q_block: Endpoint, G_shard: Endpoint, similarity: str, workspace: _Workspace,
                   order: np.ndarray | None = None) -> np.ndarray:
    """The block's scan scores into the workspace: Q.scan @ G.scan.T, or (2 Q.scan) @ G.scan.T - |g|^2, with
    the query rows taken in ``order`` when given."""
    A, B = Q_block.scan, G_shard.scan
    if order is not None:
        A = A[order]
    if similarity == "squared_l2":
        A = 2 * A  # doubling is exact
    if sp.issparse(A) or sp.issparse(B):
        S = _product(A, B)
    else:
        S = np.matmul(A, B.T, out=workspace.get("scores", (A.shape[0], B.shape[0]), np.result_type(A, B)))
    if similarity == "squared_l2":
        S -= G_shard.sq.astype(S.dtype)
    return S


def _score_unit(state: _BlockState, G_shard: Endpoint, gallery_offset: int, er: np.ndarray, ec: np.ndarray,
                config: RetrievalConfig, workspace: _Workspace) -> None:
    """The shard kernel (``score_shard``): pass-decided counts into ``state``, band items and nearest-negative
    candidates deferred to it."""
    Q_block, block = state.Q, state.block
    b, s = len(Q_block), len(G_shard)
    indptr, rows, cols, t = block.indptr, block.rows, block.sorted_cols, block.sorted_t
    P = t.size
    local = cols - gallery_offset
    inunit = (local >= 0) & (local < s)
    narrow = Q_block.scan.dtype == np.float32 or G_shard.scan.dtype == np.float32
    dtype = np.result_type(Q_block.scan.dtype, G_shard.scan.dtype).type
    tol, lo, hi, key_lo, key_hi = state.bands(float(np.sqrt(G_shard.sq.max())), narrow, dtype, config.similarity)
    start, end = indptr[:-1], indptr[1:]
    first_sparse, order = end.copy(), None
    if P and state.seen:  # split by the earlier shards' counts, and put the rows with most dense positives first
        first_sparse = _split_positives(None, lo, indptr, rows, state.counts[:P] / state.seen)
        order = np.argsort(start - first_sparse, kind="stable")  # S row i is block row order[i]
    S = _block_product(Q_block, G_shard, config.similarity, workspace, order)
    srow = np.arange(b) if order is None else np.argsort(order)  # block row -> S row
    S[srow[er], ec] = -np.inf
    S[srow[rows[inunit]], local[inunit]] = -np.inf

    # nearest-negative candidates: items that may reach the best lower bound (block score - tol) of the
    # block's earlier shards, or, for rows without one yet, items within 2 tol of the row maximum
    near = state.lower - tol
    fresh = np.flatnonzero(state.lower == -np.inf)
    if fresh.size:
        row_max = (S.max(axis=1)[srow] if fresh.size == b else S[srow[fresh]].max(axis=1)).astype(np.float64)
        near[fresh] = np.where(row_max > -np.inf, row_max - 2.0 * tol[fresh], np.inf)
    near = _round_down(near, dtype)
    if P and not state.seen:  # the first shard: split by a sample of its scores
        first_sparse = _split_positives(S, lo, indptr, rows)

    counts = state.counts
    width = -(-s // 8) * 8
    words = width // 8  # 8-byte words per mask row
    mask = workspace.get("mask", (b, width), bool)
    mask[:, s:] = False  # padding columns: never set
    s_rows = np.arange(b) if order is None else order  # S row -> block row
    dense = (first_sparse - start)[s_rows]  # per S row: its dense positives [start, first_sparse)
    s_start = start[s_rows]
    levels = int(dense.max()) if P else 0
    # dense pass k takes every row's k-th dense positive: with S's rows in order of dense count the rows with a
    # k-th one are a prefix [0, reach[k]) of S; otherwise every row, those without it against P (+inf bands)
    reach = [b if order is None else int(np.count_nonzero(dense > k)) for k in range(levels)]
    positions = [np.where(dense[:n] > k, s_start[:n] + k, P) for k, n in enumerate(reach)]
    bounds = [(hi[pos][:, None], lo[pos][:, None]) for pos in positions]
    above_count = np.zeros((levels, b), dtype=np.int64)  # per level and S row: the items above hi
    group = max(1, min(b, _GROUP_BYTES // (width * S.itemsize)))
    level_masks = workspace.get("levels", (2, group, width), bool)
    level_masks[:, :, s:] = False

    # Both passes run on groups of S rows small enough to stay in cache from one pass to the next (after the
    # product, S is out of cache: a pass over a whole large block costs about twice as much). The candidate
    # pass: the candidates of the sparse positives and of the nearest negative (a row without sparse positives
    # has first_sparse = its end, the next row's first positive: its sparse threshold is +inf). The dense
    # passes: the bit count of the items above each dense positive's hi, and the items in its band [lo, hi]
    sparse_lo = np.where(first_sparse < end, lo[first_sparse], dtype(np.inf))
    threshold = np.minimum(near, sparse_lo)[s_rows][:, None]
    found = []
    for a in range(0, b, group):
        e = min(a + group, b)
        np.greater_equal(S[a:e], threshold[a:e], out=mask[a:e, :s])
        words_hit = _nonzero_words(mask[a:e])  # the 8-byte words holding candidates
        if words_hit.size:
            found.append(words_hit + a * words)
        for k in range(int(dense[a:e].max()) if levels else 0):
            m = min(e, reach[k]) - a
            h, l = bounds[k]
            above, at_least = level_masks[0, :m], level_masks[1, :m]
            np.greater(S[a:a + m], h[a:a + m], out=above[:, :s])
            above_count[k, a:a + m] = _count_true_rows(above)
            np.greater_equal(S[a:a + m], l[a:a + m], out=at_least[:, :s])
            at_least, above = at_least.view(np.uint64).ravel(), above.view(np.uint64).ravel()
            hit = np.flatnonzero(at_least != above)  # the 8-byte words holding items with lo <= item <= hi
            if hit.size:
                word, byte = np.nonzero((at_least[hit] ^ above[hit]).view(np.uint8).reshape(-1, 8))
                i, col = np.divmod(hit[word] * 8 + byte, width)
                state.band.append((s_rows[a + i], gallery_offset + col, positions[k][i + a]))
    for n, pos, count in zip(reach, positions, above_count):
        counts[pos] += count[:n]
    hits = np.concatenate(found) if found else np.empty(0, dtype=np.int64)
    chunk = max(1024, b * s // 256)  # words per chunk: its temporaries stay near 1 byte per block element
    Sflat = S.reshape(-1)
    sparse_counts = np.zeros(P + 1, dtype=np.int64)
    for a in range(0, hits.size, chunk):
        r, c = _expand_words(mask, hits[a:a + chunk])
        v = Sflat[r * s + c]
        r = r if order is None else order[r]  # block rows
        pick = np.flatnonzero(v >= near[r])
        score, margin = v[pick].astype(np.float64), tol[r[pick]]
        state.add_near(r[pick], gallery_offset + c[pick], score + margin, score - margin)
        sel = np.flatnonzero(v >= sparse_lo[r])
        if P == 0 or sel.size == 0:
            continue
        r, c, v = r[sel], c[sel], v[sel]
        fs = first_sparse[r]
        key = _row_keys(r, v)
        above = np.maximum(np.searchsorted(key_hi, key, side="left"), fs)  # sparse [fs, above): hi < v
        sparse_counts += np.bincount(fs, minlength=P + 1) - np.bincount(above, minlength=P + 1)
        maybe = np.flatnonzero((above < end[r]) & (lo[above] <= v))
        if maybe.size:  # sparse [above, upto): lo <= v <= hi
            upto = np.searchsorted(key_lo, key[maybe], side="right")
            n = upto - above[maybe]
            positions = np.repeat(above[maybe] - np.cumsum(n) + n, n) + np.arange(n.sum())
            state.band.append((np.repeat(r[maybe], n), gallery_offset + np.repeat(c[maybe], n), positions))
    del hits
    counts += np.cumsum(sparse_counts)


def _count_positive_competitors(indptr, prow, pcol, t, inshard, outranked, tied) -> None:
    """Add, per positive, the shard's positives of its query that outrank / tie it (direct scores).

    In ranking order (score descending, then gallery row ascending) the in-shard positives ahead of a positive
    outrank it; those with exactly its score tie with it.
    """
    P = prow.size
    if P == 0 or not inshard.any():
        return
    order = np.lexsort((pcol, -t, prow))
    rs, ts = prow[order], t[order]
    flag = inshard[order].astype(np.int64)
    before = np.cumsum(flag) - flag
    ahead = before - before[indptr[rs]]
    new_run = np.ones(P, dtype=bool)
    new_run[1:] = (rs[1:] != rs[:-1]) | (ts[1:] != ts[:-1])
    run = np.cumsum(new_run) - 1
    in_run = np.bincount(run, weights=flag).astype(np.int64)
    outranked[order] += ahead
    tied[order] += in_run[run] - flag


def _merge_same_queries(group: list[RetrievalPartial]) -> RetrievalPartial:
    first = group[0]
    outranked = first.outranked.copy()
    tied = first.tied.copy()
    score = first.negative_score.copy()
    index = first.negative_index.copy()
    similarity = first.negative_similarity.copy()
    ranges = list(first.gallery_ranges)
    for other in group[1:]:
        if not (np.array_equal(other.positive_indptr, first.positive_indptr)
                and np.array_equal(other.positive_indices, first.positive_indices)):
            raise ValidationError(f"partials of queries [{first.query_start}, {first.query_stop}) disagree on the "
                                  "positive pairs; they were computed from different relevance or exclusions")
        outranked += other.outranked
        tied += other.tied
        _keep_best_negative(score, index, similarity, other.negative_score, other.negative_index,
                            other.negative_similarity)
        ranges += list(other.gallery_ranges)
    return RetrievalPartial(first.query_start, first.query_stop, tuple(ranges), first.positive_indptr,
                            first.positive_indices, outranked, tied, score, index, similarity)


def merge_partials(partials: Iterable[RetrievalPartial]) -> RetrievalPartial:
    """Merge partials: same query range -> counts add, best negative by max (gallery shards must not overlap);
    different query ranges -> concatenated (they must be contiguous and cover the same gallery rows)."""
    partials = list(partials)
    if not partials:
        raise ValidationError("merge_partials needs at least one partial")
    for p in partials:
        if not isinstance(p, RetrievalPartial):
            raise ValidationError(f"merge_partials takes RetrievalPartial objects, got {type(p).__name__}")
    groups: dict[tuple[int, int], list[RetrievalPartial]] = {}
    for p in partials:
        groups.setdefault((p.query_start, p.query_stop), []).append(p)
    merged = [_merge_same_queries(groups[key]) for key in sorted(groups)]
    if len(merged) == 1:
        return merged[0]
    for a, b in zip(merged, merged[1:]):
        if b.query_start != a.query_stop:
            raise ValidationError(f"partials of queries [{a.query_start}, {a.query_stop}) and "
                                  f"[{b.query_start}, {b.query_stop}) overlap or leave a gap")
        if b.gallery_ranges != a.gallery_ranges:
            raise ValidationError(f"queries [{a.query_start}, {a.query_stop}) cover gallery rows {a.gallery_ranges} "
                                  f"but queries [{b.query_start}, {b.query_stop}) cover {b.gallery_ranges}")
    offsets = np.cumsum([0] + [int(p.positive_indptr[-1]) for p in merged])
    indptr = np.concatenate([[0]] + [p.positive_indptr[1:] + off for p, off in zip(merged, offsets)])
    cat = lambda name: np.concatenate([getattr(p, name) for p in merged])  # noqa: E731
    return RetrievalPartial(merged[0].query_start, merged[-1].query_stop, merged[0].gallery_ranges, indptr,
                            cat("positive_indices"), cat("outranked"), cat("tied"), cat("negative_score"),
                            cat("negative_index"), cat("negative_similarity"))


# --------------------------------------------------------------------------------------------------
# Metrics


def log_gain(grades: Any) -> np.ndarray:
    """log(2^g - 1) for grades g > 0, without forming 2^g (see the module docstring)."""
    g = np.asarray(grades, dtype=np.float64)
    x = g * _LN2
    out = np.empty_like(x)
    small = x < 1e-4
    mid = ~small & (x <= 50.0)
    big = x > 50.0
    out[small] = np.log(g[small]) + math.log(_LN2) + np.log1p(x[small] / 2.0 + x[small] ** 2 / 6.0)
    out[mid] = np.log(np.expm1(x[mid]))
    out[big] = x[big] + np.log1p(-np.exp(-x[big]))
    return out


def _summary(values: np.ndarray) -> dict[str, float] | None:
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return None
    return {"mean": float(values.mean()), "median": float(np.median(values)), "min": float(values.min()),
            "max": float(values.max()), "count": int(values.size)}


def finalize(partial: RetrievalPartial, positives: PositivePairs, config: RetrievalConfig, *, n_gallery: int,
             query_ids: Sequence[str] | None = None, gallery_ids: Sequence[str] | None = None,
             direction: str = "forward", metadata: Mapping[str, Any] | None = None) -> RetrievalResult:
    """Metrics from merged partial counts covering every query and gallery rows [0, n_gallery)."""
    nq = positives.n_queries
    if partial.query_start != 0 or partial.query_stop != nq:
        raise ValidationError(f"finalize: the partial covers queries [{partial.query_start}, {partial.query_stop}); "
                              f"all {nq} queries are needed")
    if partial.gallery_ranges != ((0, int(n_gallery)),):
        raise ValidationError(f"finalize: the partial covers gallery rows {list(partial.gallery_ranges)}; "
                              f"rows [0, {n_gallery}) are needed")
    if not (np.array_equal(partial.positive_indptr, positives.indptr)
            and np.array_equal(partial.positive_indices, positives.indices)):
        raise ValidationError("finalize: the partial was computed for different positive pairs")
    qkeys = _row_id_keys(query_ids, nq, "query ids" if direction == "forward" else "gallery ids")
    gkeys = None if gallery_ids is None else _row_id_keys(gallery_ids, int(n_gallery), "gallery ids")
    R = np.diff(positives.indptr)
    if np.any(R == 0):
        empty = np.flatnonzero(R == 0)
        raise ValidationError(f"{empty.size} query(ies) have no eligible positive: {_listing(empty, qkeys)}")
    indptr = positives.indptr
    P = positives.n_pairs
    row = np.repeat(np.arange(nq), R)
    rank = partial.outranked + 1

    order = np.lexsort((rank, row))
    rank_sorted = rank[order].astype(np.float64)
    same_query = row[1:] == row[:-1]
    if np.any(rank_sorted > n_gallery) or np.any(same_query & (rank_sorted[1:] <= rank_sorted[:-1])):
        raise ValidationError("finalize: the partial counts are inconsistent (ranks beyond the gallery or shared "
                              "by two positives of a query); were all partials computed with the same inputs?")
    position = np.arange(P) - indptr[row]  # 0-based position within the query (rows stay grouped)
    values: dict[str, np.ndarray] = {
        "map": np.bincount(row, weights=(position + 1) / rank_sorted, minlength=nq) / R,
        "mrr": 1.0 / rank_sorted[indptr[:-1]],
    }
    lg = log_gain(positives.grades)
    ratio = np.exp(lg - np.maximum.reduceat(lg, indptr[:-1])[row])
    gain_sorted = ratio[order] / np.log2(rank_sorted + 1.0)
    ideal = ratio[np.lexsort((-ratio, row))] / np.log2(position + 2.0)
    for k in config.ks:
        within = rank_sorted <= k
        hits = np.bincount(row, weights=within, minlength=nq)
        dcg = np.bincount(row, weights=np.where(within, gain_sorted, 0.0), minlength=nq)
        idcg = np.bincount(row, weights=np.where(position < k, ideal, 0.0), minlength=nq)
        with np.errstate(divide="ignore", invalid="ignore"):
            values[f"ndcg@{k}"] = np.clip(np.where(idcg > 0, dcg / idcg, 0.0), 0.0, 1.0)
        values[f"precision@{k}"] = hits / k
        values[f"recall@{k}"] = hits / R
        values[f"hit_rate@{k}"] = (hits > 0).astype(np.float64)
    names = config.metric_names()
    metrics = {name: float(values[name].mean()) for name in names}

    first_rank = rank_sorted[indptr[:-1]].astype(np.int64)
    best_positive = np.maximum.reduceat(positives.similarities, indptr[:-1])
    has_negative = partial.negative_index >= 0
    margin = best_positive - partial.negative_similarity
    tie_queries = np.bincount(row, weights=partial.tied > 0, minlength=nq) > 0

    warnings: list[str] = []
    where = "retrieval" if direction == "forward" else "reverse retrieval"
    if tie_queries.any():
        warnings.append(f"{where}: {int(tie_queries.sum())} query(ies) had a positive whose rank was decided by an "
                        f"exactly equal score; ties are broken by {TIE_RULE}")
    no_negative = np.flatnonzero(~has_negative)
    if no_negative.size:
        warnings.append(f"{where}: {no_negative.size} query(ies) have no eligible negative and no margin: "
                        + _listing(no_negative, qkeys))
    large = [k for k in config.ks if k > n_gallery]
    if large:
        warnings.append(f"{where}: ks {large} exceed the {n_gallery} gallery items; precision@k still divides by k")

    per_query: dict[str, np.ndarray] = {name: values[name] for name in names}
    per_query.update({
        "n_positives": R.astype(np.int64),
        "first_rank": first_rank,
        "best_positive_similarity": best_positive,
        "nearest_negative_similarity": np.where(has_negative, partial.negative_similarity, np.nan),
        "margin": np.where(has_negative, margin, np.nan),
        "tie": tie_queries,
    })
    primary = values[config.primary_metric]
    worst = []
    for i in np.lexsort((np.arange(nq), primary))[:config.worst_queries]:
        neg = int(partial.negative_index[i])
        worst.append({
            "query_index": int(i),
            "query_id": qkeys[i],
            "query": _describe(qkeys[i]),
            **{name: float(values[name][i]) for name in names},
            "n_positives": int(R[i]),
            "first_rank": int(first_rank[i]),
            "best_positive_similarity": float(best_positive[i]),
            "nearest_negative_similarity": float(partial.negative_similarity[i]) if neg >= 0 else None,
            "nearest_negative_id": (gkeys[neg] if gkeys is not None else semantic_key(neg)) if neg >= 0 else None,
            "margin": float(margin[i]) if neg >= 0 else None,
        })
    meta = {
        "similarity": config.similarity,
        "rank": RANK_RULE,
        "tie_rule": TIE_RULE,
        "ndcg_gain": "2^grade - 1 (stable log-domain ratios)",
        "map_denominator": "all eligible positives R",
        "mrr_cutoff": None,
        **dict(metadata or {}),
    }
    return RetrievalResult(
        direction=direction, config=config, score=metrics[config.primary_metric], metrics=metrics,
        per_query=per_query, query_ids=list(qkeys), n_queries=nq, n_gallery=int(n_gallery), n_positive_pairs=P,
        n_queries_with_ties=int(tie_queries.sum()), n_queries_without_negatives=int(no_negative.size),
        summaries={
            "positive_similarity": _summary(positives.similarities),
            "nearest_negative_similarity": _summary(partial.negative_similarity[has_negative]),
            "margin": _summary(margin[has_negative]),
        },
        worst_queries=worst, warnings=warnings, metadata=meta,
    )


# --------------------------------------------------------------------------------------------------
# Results


def _artifact_config(data: Any, expected: RetrievalConfig | None, where: str) -> RetrievalConfig:
    if not isinstance(data, Mapping):
        raise ArtifactError(f"{where}: config must be a mapping, got {type(data).__name__}")
    try:
        config = RetrievalConfig.from_dict(data)
    except ValidationError as exc:
        raise ArtifactError(f"{where}: invalid recorded config: {exc}") from None
    if expected is not None:
        if not isinstance(expected, RetrievalConfig):
            raise ValidationError(f"expected_config must be a RetrievalConfig, got {type(expected).__name__}")
        recorded, wanted = config.to_dict(), expected.to_dict()
        diffs = [f"{key}: recorded {recorded[key]!r}, expected {wanted[key]!r}"
                 for key in wanted if recorded[key] != wanted[key]]
        if diffs:
            raise ArtifactError(f"{where}: retrieval config mismatch ({'; '.join(diffs)})")
    return config


_INT_COLUMNS = ("n_positives", "first_rank")
_BOOL_COLUMNS = ("tie",)


def _column(name: str, values: Any) -> np.ndarray:
    """A per-query column as an array: int64, bool, or float64 with NaN for null."""
    if name in _INT_COLUMNS:
        return np.asarray(values, dtype=np.int64)
    if name in _BOOL_COLUMNS:
        return np.asarray(values, dtype=bool)
    if isinstance(values, np.ndarray):
        return values.astype(np.float64, copy=False)
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


@dataclass(frozen=True, eq=False)
class RetrievalResult:
    """One direction's metrics (``metrics``: plain means of ``per_query`` over queries) and diagnostics.

    ``per_query`` maps every metric, and n_positives, first_rank, best_positive_similarity,
    nearest_negative_similarity and margin (NaN, null in JSON, without eligible negatives) and tie (a rank
    was decided by an exactly equal score), to one numpy array over the queries. ``summaries``:
    mean/median/min/max/count of positive similarity (all positive pairs), nearest-negative similarity and
    margin. Equality compares the ``to_dict`` documents.
    """

    direction: str
    config: RetrievalConfig
    score: float
    metrics: dict[str, float]
    per_query: dict[str, np.ndarray]
    query_ids: list[str]
    n_queries: int
    n_gallery: int
    n_positive_pairs: int
    n_queries_with_ties: int
    n_queries_without_negatives: int
    summaries: dict[str, Any]
    worst_queries: list[dict[str, Any]]
    warnings: list[str]
    metadata: dict[str, Any]

    def __post_init__(self) -> None:
        if self.direction not in ("forward", "reverse"):
            raise ValidationError(f"RetrievalResult.direction must be 'forward' or 'reverse', got {self.direction!r}")
        if not isinstance(self.config, RetrievalConfig):
            raise ValidationError(f"RetrievalResult.config must be a RetrievalConfig, got {type(self.config).__name__}")
        names = set(self.config.metric_names())
        if set(self.metrics) != names:
            raise ValidationError(f"RetrievalResult.metrics must hold exactly {sorted(names)}, got {sorted(self.metrics)}")
        if float(self.score) != float(self.metrics[self.config.primary_metric]):
            raise ValidationError("RetrievalResult.score must equal metrics[config.primary_metric]")
        missing = names - set(self.per_query)
        if missing:
            raise ValidationError(f"RetrievalResult.per_query lacks {sorted(missing)}")
        columns = {name: _column(name, values) for name, values in self.per_query.items()}
        for name, column in columns.items():
            if column.shape != (self.n_queries,):
                raise ValidationError(f"RetrievalResult.per_query[{name!r}] holds {column.shape} values for "
                                      f"{self.n_queries} queries")
        object.__setattr__(self, "per_query", columns)
        if len(self.query_ids) != self.n_queries:
            raise ValidationError(f"RetrievalResult.query_ids holds {len(self.query_ids)} ids for {self.n_queries} queries")

    @property
    def primary_metric(self) -> str:
        return self.config.primary_metric

    def to_dict(self) -> dict[str, Any]:
        doc = {name: getattr(self, name) for name in self.__dataclass_fields__ if name not in ("config", "per_query")}
        per_query = {name: [None if v != v else v for v in column.tolist()]  # NaN -> null
                     for name, column in self.per_query.items()}
        return {"schema": RETRIEVAL_RESULT_SCHEMA, "config": self.config.to_dict(), **to_json_value(doc),
                "per_query": to_json_value(per_query, "$.per_query")}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RetrievalResult) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, expected_config: RetrievalConfig | None = None) -> RetrievalResult:
        if not isinstance(data, Mapping):
            raise ArtifactError(f"retrieval result must be a mapping, got {type(data).__name__}")
        if data.get("schema") != RETRIEVAL_RESULT_SCHEMA:
            raise ArtifactError(f"retrieval result has schema {data.get('schema')!r}, expected {RETRIEVAL_RESULT_SCHEMA!r}")
        missing = [name for name in cls.__dataclass_fields__ if name not in data]
        if missing:
            raise ArtifactError(f"retrieval result lacks fields {missing}")
        config = _artifact_config(data["config"], expected_config, f"{data.get('direction', '?')} retrieval result")
        try:
            return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name != "config"}, config=config)
        except (ValidationError, TypeError, KeyError, ValueError, AttributeError) as exc:
            raise ArtifactError(f"malformed retrieval result: {exc}") from None


@dataclass(frozen=True, eq=False)
class RetrievalScore:
    """Forward result, the reverse one (bidirectional) and ``primary_score`` = their primary scores' mean
    (forward alone when not bidirectional)."""

    forward: RetrievalResult
    reverse: RetrievalResult | None
    primary_score: float

    def __post_init__(self) -> None:
        if not isinstance(self.forward, RetrievalResult) or self.forward.direction != "forward":
            raise ValidationError("RetrievalScore.forward must be a forward RetrievalResult")
        if self.forward.config.bidirectional != (self.reverse is not None):
            raise ValidationError("RetrievalScore.reverse must be present exactly when the config is bidirectional")
        if self.reverse is not None:
            if not isinstance(self.reverse, RetrievalResult) or self.reverse.direction != "reverse":
                raise ValidationError("RetrievalScore.reverse must be a reverse RetrievalResult")
            if self.reverse.config != self.forward.config:
                raise ValidationError("RetrievalScore.forward and reverse were scored under different configs")
        expected = self.forward.score if self.reverse is None else (self.forward.score + self.reverse.score) / 2.0
        if float(self.primary_score) != expected:
            raise ValidationError(f"RetrievalScore.primary_score {self.primary_score!r} is not the mean of the "
                                  f"directions' primary scores ({expected!r})")
        object.__setattr__(self, "primary_score", float(self.primary_score))

    @property
    def config(self) -> RetrievalConfig:
        return self.forward.config

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RetrievalScore) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    @property
    def score(self) -> float:
        return self.primary_score

    @property
    def primary_metric(self) -> str:
        return self.config.primary_metric

    @property
    def metrics(self) -> dict[str, float]:
        """The forward metrics."""
        return self.forward.metrics

    @property
    def warnings(self) -> list[str]:
        return list(self.forward.warnings) + (list(self.reverse.warnings) if self.reverse is not None else [])

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": RETRIEVAL_SCORE_SCHEMA,
            "config": self.config.to_dict(),
            "primary_metric": self.primary_metric,
            "primary_score": self.primary_score,
            "forward": self.forward.to_dict(),
            "reverse": None if self.reverse is None else self.reverse.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, expected_config: RetrievalConfig | None = None) -> RetrievalScore:
        """Rebuild a score document; with ``expected_config``, a document scored under another config is
        refused (ArtifactError naming every differing field)."""
        if not isinstance(data, Mapping):
            raise ArtifactError(f"retrieval score must be a mapping, got {type(data).__name__}")
        if data.get("schema") != RETRIEVAL_SCORE_SCHEMA:
            raise ArtifactError(f"retrieval score has schema {data.get('schema')!r}, expected {RETRIEVAL_SCORE_SCHEMA!r}")
        for key in ("config", "primary_score", "forward", "reverse"):
            if key not in data:
                raise ArtifactError(f"retrieval score lacks {key!r}")
        config = _artifact_config(data["config"], expected_config, "retrieval score")
        forward = RetrievalResult.from_dict(data["forward"], expected_config=config)
        reverse = None if data["reverse"] is None else RetrievalResult.from_dict(data["reverse"], expected_config=config)
        try:
            return cls(forward, reverse, data["primary_score"])
        except (ValidationError, TypeError) as exc:
            raise ArtifactError(f"malformed retrieval score: {exc}") from None


# --------------------------------------------------------------------------------------------------
# Scorer


def _endpoint_bytes(matrix: Any) -> int:
    if sp.issparse(matrix):
        return 16 * int(matrix.nnz) + 8 * (matrix.shape[0] + 1)
    return 8 * int(matrix.shape[0]) * int(matrix.shape[1])


def admit(config: RetrievalConfig, queries: Any, gallery: Any) -> None:
    """Memory admission (module docstring): BudgetError saying what to lower."""
    nq, ng = int(queries.shape[0]), int(gallery.shape[0])
    endpoints = _endpoint_bytes(queries) + _endpoint_bytes(gallery)
    directions = [(nq, ng)] + ([(ng, nq)] if config.bidirectional else [])
    block = max(8 * min(config.query_block_size, a) * min(config.gallery_block_size, b) for a, b in directions)
    total = endpoints + block
    if total > config.max_dense_bytes:
        if endpoints > config.max_dense_bytes:
            hint = ("the float64 endpoints alone exceed it: shard the gallery (scoring decomposes over gallery "
                    "shards) or raise RetrievalConfig.max_dense_bytes")
        else:
            hint = ("lower RetrievalConfig.query_block_size or RetrievalConfig.gallery_block_size, or raise "
                    "RetrievalConfig.max_dense_bytes")
        raise BudgetError(f"retrieval needs {total:,} bytes (float64 endpoints {endpoints:,} + score block {block:,} "
                          f"= {min(config.query_block_size, nq)} x {min(config.gallery_block_size, ng)} x 8), more "
                          f"than RetrievalConfig.max_dense_bytes={config.max_dense_bytes:,}; {hint}")
    if config.max_comparisons is not None and nq * ng > config.max_comparisons:
        raise BudgetError(f"retrieval compares {nq:,} queries x {ng:,} gallery items = {nq * ng:,} pairs, more than "
                          f"RetrievalConfig.max_comparisons={config.max_comparisons:,}; raise it or score fewer rows")


class RetrievalScorer:
    """Exact retrieval of every query against the whole gallery, in (query block x gallery block) units.

    ``threads``: how many query blocks are scored at once (None: as many as the loaded BLAS would use
    threads, e.g. ``OMP_NUM_THREADS``), fewer when ``max_dense_bytes`` cannot hold that many score blocks
    beside the endpoints. Results do not depend on it.
    """

    def __init__(self, config: RetrievalConfig | None = None, *, threads: int | None = None) -> None:
        if config is not None and not isinstance(config, RetrievalConfig):
            raise ValidationError(f"RetrievalScorer config must be a RetrievalConfig, got {type(config).__name__}")
        if threads is not None and (isinstance(threads, (bool, np.bool_)) or not isinstance(threads, (int, np.integer))
                                    or threads < 1):
            raise ConfigError(f"RetrievalScorer threads must be a positive integer or None, got {threads!r}")
        self.config = config if config is not None else RetrievalConfig()
        self.threads = None if threads is None else int(threads)

    def workers(self, queries: Any, gallery: Any) -> int:
        """Query blocks scored at once: ``threads`` (default: the BLAS thread count), capped so that the
        endpoints plus one score block per worker fit ``max_dense_bytes`` (at least 1)."""
        config = self.config
        nq, ng = int(queries.shape[0]), int(gallery.shape[0])
        threads = self.threads if self.threads is not None else _blas_threads()
        directions = [(nq, ng)] + ([(ng, nq)] if config.bidirectional else [])
        block = max(8 * min(config.query_block_size, a) * min(config.gallery_block_size, b) for a, b in directions)
        spare = config.max_dense_bytes - _endpoint_bytes(queries) - _endpoint_bytes(gallery)
        return max(1, min(threads, spare // max(1, block)))

    def score(self, queries: Any, gallery: Any, relevance: Any, *, query_ids: Sequence[str] | None = None,
              gallery_ids: Sequence[str] | None = None, exclusions: Any = None) -> RetrievalScore:
        """Score queries against the gallery. ``relevance``: grades (CSR, array or {qi: {gi: grade}});
        ``exclusions``: excluded pairs; ids: semantic-key strings used in messages and worst queries."""
        config = self.config
        Q = as_matrix(queries, what="Query embeddings")
        G = as_matrix(gallery, what="Gallery embeddings")
        nq, d = Q.shape
        ng = G.shape[0]
        if nq == 0 or ng == 0:
            raise ValidationError(f"retrieval needs at least one query and one gallery item, got {nq} and {ng}")
        if G.shape[1] != d:
            raise ValidationError(f"Query embeddings have {d} dimensions but Gallery embeddings have {G.shape[1]}")
        qkeys = _row_id_keys(query_ids, nq, "Query embeddings")
        gkeys = _row_id_keys(gallery_ids, ng, "Gallery embeddings")
        admit(config, Q, G)
        grades = relevance_matrix(relevance, (nq, ng), query_ids=qkeys, gallery_ids=gkeys)
        excluded = exclusion_matrix(exclusions, (nq, ng))
        forward_relevance = eligible_relevance(grades, excluded, query_ids=qkeys, what="query")
        reverse_relevance = None
        if config.bidirectional:
            reverse_relevance = eligible_relevance(forward_relevance.T.tocsr(), None, query_ids=gkeys,
                                                   what="gallery item")
        scan = _SCAN
        workers = self.workers(Q, G)
        Qp = prepare_endpoint(Q, config.similarity, what="Query embeddings", row_ids=qkeys, scan=scan, workers=workers)
        Gp = prepare_endpoint(G, config.similarity, what="Gallery embeddings", row_ids=gkeys, scan=scan,
                              workers=workers)
        q_max, g_max = float(np.sqrt(Qp.sq.max())), float(np.sqrt(Gp.sq.max()))
        if not (q_max + g_max) ** 2 < 1e300:
            raise ValidationError(f"{config.similarity} similarity would overflow float64 (largest row norms: Query "
                                  f"embeddings {q_max:.3g}, Gallery embeddings {g_max:.3g}); rescale the embeddings")
        meta = {"n_dimensions": int(d), "query_sparse": bool(sp.issparse(Q)), "gallery_sparse": bool(sp.issparse(G))}
        forward = _score_direction(Qp, Gp, forward_relevance, excluded, config, qkeys, gkeys, "forward", meta,
                                   workers)
        reverse = None
        if config.bidirectional:
            reverse_excluded = None if excluded is None else excluded.T.tocsr()
            reverse = _score_direction(Gp, Qp, reverse_relevance, reverse_excluded, config, gkeys, qkeys, "reverse",
                                       {**meta, "query_sparse": meta["gallery_sparse"],
                                        "gallery_sparse": meta["query_sparse"]}, workers)
        primary = forward.score if reverse is None else (forward.score + reverse.score) / 2.0
        return RetrievalScore(forward, reverse, primary)


def _score_direction(Q, G, relevance, exclusions, config, qkeys, gkeys, direction, metadata,
                     workers: int) -> RetrievalResult:
    """One direction: positives, every query block over every gallery shard (the same kernel and state as
    ``score_shard``; a block's partial covers the whole gallery), merge, finalize. Query blocks are spread
    over ``workers`` threads (``_map_blocks``); the partials do not depend on it."""
    positives = positive_scores(Q, G, relevance, config=config, workers=workers)
    nq, ng = len(Q), len(G)
    starts = range(0, ng, config.gallery_block_size)
    shards = [G[gs:min(gs + config.gallery_block_size, ng)] for gs in starts]  # views (CSR: sliced once)
    local = threading.local()  # one workspace per worker thread, reused by all its blocks

    def query_block(qs: int) -> RetrievalPartial:
        qe = min(qs + config.query_block_size, nq)
        state = _BlockState(_BlockPositives.of(positives.rows(qs, qe)), Q[qs:qe], G, 0)
        state.count_positives(0, ng)
        block_exclusions = None if exclusions is None else exclusions[qs:qe]
        workspace = getattr(local, "workspace", None) or _Workspace()
        local.workspace = workspace
        for gs, shard in zip(starts, shards):
            state.add_shard(shard, gs, block_exclusions, qs, config, workspace)
        return state.partial(qs, ((0, ng),))

    merged = merge_partials(_map_blocks(query_block, range(0, nq, config.query_block_size), workers))
    return finalize(merged, positives, config, n_gallery=ng, query_ids=qkeys, gallery_ids=gkeys,
                    direction=direction, metadata=metadata)


def _map_blocks(fn, items: Sequence[int], workers: int) -> list[Any]:
    """``[fn(i) for i in items]``, on ``workers`` threads when > 1. Each thread then runs single-threaded BLAS
    (threadpoolctl, for the call's duration), so the process uses ``workers`` cores in all: while one thread
    multiplies, another post-processes (numpy releases the GIL in both)."""
    if workers <= 1 or len(items) <= 1:
        return [fn(i) for i in items]
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, items))


def _blas_threads() -> int:
    """The thread count the loaded BLAS would use (1 if unknown)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - a dependency of scikit-learn
        return 1
    counts = [int(pool.get("num_threads") or 1) for pool in threadpool_info() if pool.get("user_api") == "blas"]
    return max(counts, default=1)
