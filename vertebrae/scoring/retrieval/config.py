"""``RetrievalConfig``: the settings of exact retrieval scoring (frozen; strict ``from_dict``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from vertebrae.core.errors import ConfigError
from vertebrae.core.fingerprint import to_json_value
from vertebrae.core.records import cutoffs, from_record, non_negative_int, positive_int
from vertebrae.scoring.retrieval.metrics import metric_names as _metric_names, parse_retrieval_metric

SIMILARITIES = ("cosine", "dot", "squared_l2")


@dataclass(frozen=True)
class RetrievalConfig:
    """Settings of exact retrieval scoring.

    ``primary_metric`` may be any reported metric: ``map``, ``mrr`` or ``ndcg@K``, ``precision@K``,
    ``recall@K``, ``hit_rate@K`` with K in ``ks``. ``worst_queries`` = how many lowest-scoring queries (by the
    primary metric) to report. A score block (``query_block_size x gallery_block_size x 8`` bytes: 41 MB by
    default) counts against ``max_dense_bytes``; BLAS packs the gallery block once per query block.
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
        object.__setattr__(self, "ks", cutoffs(self.ks, "RetrievalConfig", "ks"))
        parse_retrieval_metric(self.primary_metric, self.ks, owner="RetrievalConfig.primary_metric")
        if not isinstance(self.bidirectional, (bool, np.bool_)):
            raise ConfigError(f"RetrievalConfig.bidirectional must be a bool, got {self.bidirectional!r}")
        object.__setattr__(self, "bidirectional", bool(self.bidirectional))
        for name in ("query_block_size", "gallery_block_size", "max_dense_bytes"):
            object.__setattr__(self, name, positive_int(getattr(self, name), "RetrievalConfig", name))
        if self.max_comparisons is not None:
            object.__setattr__(self, "max_comparisons", positive_int(self.max_comparisons, "RetrievalConfig", "max_comparisons"))
        object.__setattr__(self, "worst_queries", non_negative_int(self.worst_queries, "RetrievalConfig", "worst_queries"))

    def metric_names(self) -> tuple[str, ...]:
        """``map``, ``mrr``, then ``ndcg@k``, ``precision@k``, ``recall@k``, ``hit_rate@k`` for each k."""
        return _metric_names(self.ks)

    def to_dict(self) -> dict[str, Any]:
        return {name: to_json_value(getattr(self, name)) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetrievalConfig:
        return from_record(cls, data, tuples=("ks",))
