"""Partial counts of a (query block, gallery shard) unit (``RetrievalPartial``) and their merge.

A rank is a count, and counts add up across gallery shards: per (query, positive) the eligible competitors
that outrank it and those that tie with it, per query the best eligible non-positive. ``merge_partials`` adds
the counts and keeps the best negative (max; equal scores: the lower gallery row).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from vertebrae.core.errors import ArtifactError, ValidationError


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


def _keep_best_negative(score, index, similarity, other_score, other_index, other_similarity) -> None:
    """In place: per query, the better of two best negatives (higher score; equal scores: lower gallery row)."""
    better = (other_score > score) | (
        (other_score == score) & (other_index >= 0) & ((index < 0) | (other_index < index)))
    score[better] = other_score[better]
    index[better] = other_index[better]
    similarity[better] = other_similarity[better]


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
