"""The eligible positives of a run of queries and their direct scores (``PositivePairs``, ``positive_scores``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.errors import ValidationError
from vertebrae.scoring.retrieval.arithmetic import _pairwise, _rowwise_dot, _rowwise_sqdist
from vertebrae.scoring.retrieval.config import RetrievalConfig
from vertebrae.scoring.retrieval.inputs import Endpoint


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
