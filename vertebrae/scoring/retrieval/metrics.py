"""Retrieval metrics, each written once: one kernel per metric over a ranking of each query's positives.

Per query with R positives at ranks r_1 < r_2 < ... < r_R and hits h_k = #{i : r_i <= k}: ``map``, ``mrr`` and,
for each cutoff k, ``ndcg@k``, ``precision@k``, ``recall@k``, ``hit_rate@k`` (``RANK_METRICS``,
``CUTOFF_METRICS``: the family list, in report order). Aggregates are plain means over queries (the callers').
A convention (``conventions.Conventions``) may cut MRR and MAP at each k (``mrr@k``, ``map@k`` in place of ``mrr``,
``map``), divide AP by min(k, R), and take NDCG's gain linear or binary (``SparseRanking.of``); the default,
``vertebrae``, is the list above.

A kernel reads a *ranking*: ``count`` (R per query), ``rank`` and ``position`` (r_i and i of each positive,
float64 / int), ``gain`` (each positive's gain relative to its query's largest, in rank order),
``first_rank()`` (r_1), ``hits(k)`` (h_k), ``total(values, within=k)`` (per query, the sum of ``values`` over
the positives ranked <= k, or all) and ``ideal()`` (the same gains ranked best first, at ranks 1..R).
``SparseRanking`` holds the positives' ranks in CSR layout (the exact scorer); ``DenseRanking`` the relevance
flags of every candidate in ranked order (``LabelRetrievalMetric``, binary gains). Each sums in a fixed order
(sequential per query; numpy's pairwise row sums), so a metric's bits do not depend on block sizes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from vertebrae.core.errors import ConfigError
from vertebrae.scoring.retrieval.conventions import DEFAULT, conventions as _conventions

__all__ = ["CUTOFF_METRICS", "DenseRanking", "RANK_METRICS", "SparseRanking", "log_gain", "metric_names",
           "parse_retrieval_metric", "per_query_metrics"]

_LN2 = math.log(2.0)


# --------------------------------------------------------------------------------------------------
# Kernels


def average_precision(ranking: Any, k: int | None = None, denominator: str = "R") -> np.ndarray:
    """``map``: (1 / R) sum_i i / r_i (the denominator is all R positives). ``map@k`` (a convention's): the sum
    over r_i <= k only, divided by R or, with ``denominator="min(k, R)"``, by min(k, R)."""
    total = ranking.total(ranking.position / ranking.rank, within=k)
    if denominator == "R" or k is None:
        return total / ranking.count
    return total / np.minimum(ranking.count, k)


def reciprocal_rank(ranking: Any, k: int | None = None) -> np.ndarray:
    """``mrr``: 1 / r_1 (no cutoff). ``mrr@k`` (a convention's): 1 / r_1 if r_1 <= k, else 0."""
    first = ranking.first_rank()
    if k is None:
        return 1.0 / first
    return np.where(first <= k, 1.0 / first, 0.0)


def ndcg(ranking: Any, k: int) -> np.ndarray:
    """``ndcg@k`` = DCG@k / IDCG@k, DCG@k = sum over r_i <= k of gain_i / log2(r_i + 1), IDCG@k the same sum
    of the ideal ranking (gains descending at ranks 1..R); 0 where IDCG@k is 0; clipped to [0, 1]."""
    dcg = ranking.total(ranking.gain / np.log2(ranking.rank + 1.0), within=k)
    ideal = ranking.ideal()
    idcg = ideal.total(ideal.gain / np.log2(ideal.rank + 1.0), within=k)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.clip(np.where(idcg > 0, dcg / idcg, 0.0), 0.0, 1.0)


def precision(ranking: Any, k: int) -> np.ndarray:
    """``precision@k`` = h_k / k (k even beyond the candidates)."""
    return ranking.hits(k) / k


def recall(ranking: Any, k: int) -> np.ndarray:
    """``recall@k`` = h_k / R."""
    return ranking.hits(k) / ranking.count


def hit_rate(ranking: Any, k: int) -> np.ndarray:
    """``hit_rate@k`` = 1 if h_k > 0, else 0."""
    return (ranking.hits(k) > 0).astype(np.float64)


RANK_METRICS: dict[str, Callable[[Any], np.ndarray]] = {"map": average_precision, "mrr": reciprocal_rank}
CUTOFF_METRICS: dict[str, Callable[[Any, int], np.ndarray]] = {
    "ndcg": ndcg, "precision": precision, "recall": recall, "hit_rate": hit_rate}


def _cut(name: str, conventions: Any) -> bool:
    """Whether the rank metric ``name`` (map, mrr) is reported at each k under ``conventions``."""
    c = _conventions(conventions)
    return c.map_at_k if name == "map" else c.mrr_at_k


def metric_names(ks: Sequence[int], conventions: Any = DEFAULT) -> tuple[str, ...]:
    """``map``, ``mrr`` (or ``map@k``, ``mrr@k`` for each k where the conventions cut them), then ``ndcg@k``,
    ``precision@k``, ``recall@k``, ``hit_rate@k`` for each k."""
    rank = tuple(name2 for name in RANK_METRICS
                 for name2 in ([f"{name}@{k}" for k in ks] if _cut(name, conventions) else [name]))
    return rank + tuple(f"{family}@{k}" for family in CUTOFF_METRICS for k in ks)


def per_query_metrics(ranking: Any, ks: Sequence[int], conventions: Any = DEFAULT) -> dict[str, np.ndarray]:
    """Every metric of ``metric_names(ks, conventions)``, per query of ``ranking``."""
    c = _conventions(conventions)
    values: dict[str, np.ndarray] = {}
    if c.map_at_k:
        values.update({f"map@{k}": average_precision(ranking, k, c.map_denominator) for k in ks})
    else:
        values["map"] = average_precision(ranking)
    if c.mrr_at_k:
        values.update({f"mrr@{k}": reciprocal_rank(ranking, k) for k in ks})
    else:
        values["mrr"] = reciprocal_rank(ranking)
    for family, kernel in CUTOFF_METRICS.items():
        values.update({f"{family}@{k}": kernel(ranking, k) for k in ks})
    return values


_METRIC_NAME = re.compile(rf"^(({'|'.join(RANK_METRICS)})(@([1-9][0-9]*))?|({'|'.join(CUTOFF_METRICS)})@([1-9][0-9]*))$")


def parse_retrieval_metric(name: Any, ks: Sequence[int], owner: str = "LabelRetrievalMetric.primary",
                           conventions: Any = DEFAULT) -> str:
    """Validate a metric name of the small ``map | mrr | family@K`` language (K must be one of ``ks``); under
    conventions that cut MRR / MAP at each k, ``mrr@K`` / ``map@K`` in place of ``mrr`` / ``map``."""
    match = _METRIC_NAME.match(name) if isinstance(name, str) else None
    rank = match.group(2) if match else None
    if match is not None and rank is not None and (match.group(3) is not None) != _cut(rank, conventions):
        match = None
    if match is None:
        c = _conventions(conventions)
        ranks = [f"{n}@K" if _cut(n, c) else n for n in RANK_METRICS]
        under = "" if c.name == DEFAULT else f" under conventions {c.name}"
        raise ConfigError(f"{owner} must be {', '.join(map(repr, ranks))} or one of "
                          f"{', '.join(f'{family}@K' for family in CUTOFF_METRICS)}{under}; got {name!r}")
    k = match.group(4) or match.group(6)
    if k is not None and int(k) not in ks:
        raise ConfigError(f"{owner} {name!r} uses K={k}, which is not in ks={list(ks)}")
    return name


# --------------------------------------------------------------------------------------------------
# Gains and rankings


def log_gain(grades: Any) -> np.ndarray:
    """log(2^g - 1) for grades g > 0, without forming 2^g.

    With x = g ln 2: ``x < 1e-4``: log g + log ln 2 + log1p(x/2 + x^2/6); ``x <= 50``: log(expm1 x); else
    x + log1p(-e^-x).
    """
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


class SparseRanking:
    """Each query's positives in CSR layout (``indptr``; every query has one): ranks ascending (float64), gains
    in rank order and, for ``ideal()``, the same gains in descending order. Sums are sequential per query."""

    def __init__(self, indptr: np.ndarray, rank: np.ndarray, gain: np.ndarray, ideal_gain: np.ndarray) -> None:
        self.indptr = indptr
        self.count = np.diff(indptr)
        self.row = np.repeat(np.arange(self.count.size), self.count)
        self.rank = rank
        self.position = np.arange(rank.size) - indptr[self.row] + 1
        self.gain = gain
        self._ideal_gain = ideal_gain
        self._hits: dict[int, np.ndarray] = {}

    @classmethod
    def of(cls, indptr: np.ndarray, rank: np.ndarray, grades: np.ndarray, gain: str = "exponential"
           ) -> SparseRanking:
        """From each positive's rank and grade (grouped by query, any order within one). NDCG gains relative to
        the query's largest: ``exponential`` ``2^g - 1``, never formed (``exp(log_gain(g) - max log_gain)``);
        ``linear`` g / max g; ``binary`` 1."""
        row = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
        order = np.lexsort((rank, row))
        if gain == "exponential":
            lg = log_gain(grades)
            ratio = np.exp(lg - np.maximum.reduceat(lg, indptr[:-1])[row])
        elif gain == "linear":
            g = np.asarray(grades, dtype=np.float64)
            ratio = g / np.maximum.reduceat(g, indptr[:-1])[row] if g.size else g
        else:
            ratio = np.ones(row.size)
        return cls(indptr, rank[order].astype(np.float64), ratio[order], ratio[np.lexsort((-ratio, row))])

    def first_rank(self) -> np.ndarray:
        return self.rank[self.indptr[:-1]]

    def hits(self, k: int) -> np.ndarray:
        if k not in self._hits:
            self._hits[k] = np.bincount(self.row, weights=self.rank <= k, minlength=self.count.size)
        return self._hits[k]

    def total(self, values: np.ndarray, within: int | None = None) -> np.ndarray:
        if within is not None:
            values = np.where(self.rank <= within, values, 0.0)
        return np.bincount(self.row, weights=values, minlength=self.count.size)

    def ideal(self) -> SparseRanking:
        return SparseRanking(self.indptr, self.position.astype(np.float64), self._ideal_gain, self._ideal_gain)


class DenseRanking:
    """Binary relevance of every candidate of each query in ranked order (``relevant``: queries x candidates,
    every query with a positive). Sums are numpy's row sums; the ideal DCG a running (sequential) sum."""

    gain = 1.0

    def __init__(self, relevant: np.ndarray) -> None:
        self.relevant = relevant
        self.rank = np.arange(1, relevant.shape[1] + 1, dtype=np.float64)
        self.position = np.cumsum(relevant, axis=1)  # at the i-th positive: i
        self.count = relevant.sum(axis=1)

    def first_rank(self) -> np.ndarray:
        return np.argmax(self.relevant, axis=1) + 1.0

    def hits(self, k: int) -> np.ndarray:
        return self.position[:, min(k, self.rank.size) - 1]

    def total(self, values: np.ndarray, within: int | None = None) -> np.ndarray:
        if within is None:
            return (self.relevant * values).sum(axis=1)
        return (self.relevant[:, :within] * values[..., :within]).sum(axis=1)

    def ideal(self) -> _DenseIdeal:
        return _DenseIdeal(self.count, self.rank)


class _DenseIdeal:
    """The ideal ranking of binary gains: each query's R positives at ranks 1..R."""

    gain = 1.0

    def __init__(self, count: np.ndarray, rank: np.ndarray) -> None:
        self.count, self.rank = count, rank

    def total(self, values: np.ndarray, within: int | None = None) -> np.ndarray:
        upto = self.count if within is None else np.minimum(self.count, within)
        return np.cumsum(values)[upto - 1]
