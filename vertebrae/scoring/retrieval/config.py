"""``RetrievalConfig``: the settings of exact retrieval scoring (frozen; strict ``from_dict``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from vertebrae.core.errors import ConfigError
from vertebrae.core.fingerprint import to_json_value
from vertebrae.core.records import cutoffs, from_record, non_negative_int, positive_int
from vertebrae.scoring.retrieval.conventions import DEFAULT, Conventions, conventions as _conventions
from vertebrae.scoring.retrieval.metrics import metric_names as _metric_names, parse_retrieval_metric

SIMILARITIES = ("cosine", "dot", "squared_l2")


@dataclass(frozen=True)
class RetrievalConfig:
    """Settings of exact retrieval scoring.

    ``primary_metric`` may be any reported metric: ``map``, ``mrr`` or ``ndcg@K``, ``precision@K``,
    ``recall@K``, ``hit_rate@K`` with K in ``ks`` (``map@K``, ``mrr@K`` under conventions that cut them).
    ``worst_queries`` = how many lowest-scoring queries (by the primary metric) to report. A score block
    (``query_block_size x gallery_block_size x 8`` bytes: 41 MB by default) counts against ``max_dense_bytes``;
    BLAS packs the gallery block once per query block.

    ``conventions``: whose definitions the metrics follow (``conventions.CONVENTIONS``: ``vertebrae``, the default,
    ``trec_eval``, ``beir``, ``mteb``, ``sentence_transformers``): tie order, NDCG gain, MRR and MAP cutoffs and
    the default ``ks`` (None: the convention's; ``vertebrae``: 1, 5, 10). ``to_dict`` leaves the default
    convention out, so the fingerprints of configs written before it existed do not change.
    """

    similarity: str = "cosine"
    ks: tuple[int, ...] | None = None
    primary_metric: str = "ndcg@10"
    bidirectional: bool = False
    query_block_size: int = 512
    gallery_block_size: int = 10_000
    max_dense_bytes: int = 2_000_000_000
    max_comparisons: int | None = None
    worst_queries: int = 10
    conventions: str = DEFAULT

    def __post_init__(self) -> None:
        if self.similarity not in SIMILARITIES:
            raise ConfigError(f"RetrievalConfig.similarity must be one of {SIMILARITIES}, got {self.similarity!r}")
        rules = _conventions(self.conventions, owner="RetrievalConfig.conventions")
        object.__setattr__(self, "conventions", rules.name)
        object.__setattr__(self, "ks", rules.ks if self.ks is None else cutoffs(self.ks, "RetrievalConfig", "ks"))
        parse_retrieval_metric(self.primary_metric, self.ks, owner="RetrievalConfig.primary_metric",
                               conventions=rules)
        if not isinstance(self.bidirectional, (bool, np.bool_)):
            raise ConfigError(f"RetrievalConfig.bidirectional must be a bool, got {self.bidirectional!r}")
        object.__setattr__(self, "bidirectional", bool(self.bidirectional))
        for name in ("query_block_size", "gallery_block_size", "max_dense_bytes"):
            object.__setattr__(self, name, positive_int(getattr(self, name), "RetrievalConfig", name))
        if self.max_comparisons is not None:
            object.__setattr__(self, "max_comparisons", positive_int(self.max_comparisons, "RetrievalConfig", "max_comparisons"))
        object.__setattr__(self, "worst_queries", non_negative_int(self.worst_queries, "RetrievalConfig", "worst_queries"))

    @property
    def rules(self) -> Conventions:
        """The ``Conventions`` named by ``conventions``."""
        return _conventions(self.conventions)

    def metric_names(self) -> tuple[str, ...]:
        """``map``, ``mrr`` (``map@k``, ``mrr@k`` where the conventions cut them), then ``ndcg@k``,
        ``precision@k``, ``recall@k``, ``hit_rate@k`` for each k."""
        return _metric_names(self.ks, self.conventions)

    def to_dict(self) -> dict[str, Any]:
        """Every field; ``conventions`` only when it is not the default (recipes and fingerprints of default
        configs are those of the versions before it)."""
        return {name: to_json_value(getattr(self, name)) for name in self.__dataclass_fields__
                if name != "conventions" or self.conventions != DEFAULT}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetrievalConfig:
        return from_record(cls, data, tuples=("ks",))
