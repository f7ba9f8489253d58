"""Metrics and diagnostics of one direction from merged partial counts (``finalize``).

Rank of a positive = 1 + the number of eligible gallery items that score strictly higher, or score the same and
come first under the config's conventions (``conventions``: gallery row order by default, or gallery id order);
other positives are competitors. The metric formulas are ``retrieval.metrics``'s, under the same conventions. Margin per query = best positive similarity - highest eligible
non-positive similarity (no margin, and a warning, for a query without eligible negatives).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from vertebrae.core.errors import ValidationError
from vertebrae.core.labels import semantic_key
from vertebrae.scoring.retrieval.config import RetrievalConfig
from vertebrae.scoring.retrieval.conventions import CONVENTIONS, DEFAULT
from vertebrae.scoring.retrieval.inputs import _describe, _listing, _row_id_keys
from vertebrae.scoring.retrieval.metrics import SparseRanking, per_query_metrics
from vertebrae.scoring.retrieval.partial import RetrievalPartial
from vertebrae.scoring.retrieval.positives import PositivePairs
from vertebrae.scoring.retrieval.results import RetrievalResult

TIE_RULE = CONVENTIONS[DEFAULT].tie_rule  # the default conventions' (vertebrae)
RANK_RULE = CONVENTIONS[DEFAULT].rank_rule


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
    rules = config.rules
    ranking = SparseRanking.of(indptr, partial.outranked + 1, positives.grades, rules.gain)
    rank_sorted = ranking.rank
    same_query = row[1:] == row[:-1]
    if np.any(rank_sorted > n_gallery) or np.any(same_query & (rank_sorted[1:] <= rank_sorted[:-1])):
        raise ValidationError("finalize: the partial counts are inconsistent (ranks beyond the gallery or shared "
                              "by two positives of a query); were all partials computed with the same inputs?")
    values = per_query_metrics(ranking, config.ks, rules)
    names = config.metric_names()
    metrics = {name: float(values[name].mean()) for name in names}

    first_rank = ranking.first_rank().astype(np.int64)
    best_positive = np.maximum.reduceat(positives.similarities, indptr[:-1])
    has_negative = partial.negative_index >= 0
    margin = best_positive - partial.negative_similarity
    tie_queries = np.bincount(row, weights=partial.tied > 0, minlength=nq) > 0

    warnings: list[str] = []
    where = "retrieval" if direction == "forward" else "reverse retrieval"
    if tie_queries.any():
        warnings.append(f"{where}: {int(tie_queries.sum())} query(ies) had a positive whose rank was decided by an "
                        f"exactly equal score; ties are broken by {rules.tie_rule}")
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
    meta = {"similarity": config.similarity, **rules.metadata(), **dict(metadata or {})}
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
