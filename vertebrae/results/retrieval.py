"""Result objects of the retrieval protocol: ranking by the primary score, quality cohort, JSON round trip."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vertebrae.reports.markdown import render_retrieval_markdown
from vertebrae.reports.schemas import RETRIEVAL_SCHEMA
from vertebrae.results.base import CohortReport, compression_method, provenance_dict
from vertebrae.results.comparison import retrieval_units
from vertebrae.scoring.degenerate import invalid_reasons, is_invalid
from vertebrae.scoring.retrieval import RetrievalScore
from vertebrae.scoring.retrieval.conventions import conventions as rules_of


def table_metrics(ks, conventions: str = "vertebrae") -> list[str]:
    """The ranking table's metric columns: NDCG, precision, recall and hit rate at each k, then MRR and mAP (at
    each k under conventions that cut them: ``scoring.retrieval.conventions``).

    Derived from the scoring config's ks and conventions, so a report written by an earlier version renders the
    same columns."""
    rules = rules_of(conventions)
    tail = [f"{name}@{k}" if cut else name for name, cut in (("mrr", rules.mrr_at_k), ("map", rules.map_at_k))
            for k in (ks if cut else ks[:1])]
    return [f"{name}@{k}" for name in ("ndcg", "precision", "recall", "hit_rate") for k in ks] + tail


@dataclass(frozen=True)
class RetrievalCandidateResult:
    """One candidate (an extractor or a compressed variant) under the retrieval protocol."""

    name: str
    score: RetrievalScore
    embedding_metadata: dict[str, Any]
    compression_metadata: dict[str, Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def primary_score(self) -> float:
        return self.score.primary_score

    @property
    def aggregate_valid(self) -> bool:
        """False when an endpoint collapsed (``metadata["degenerate"]`` of the forward result): not ranked."""
        return not is_invalid(self.score.forward.metadata.get("degenerate"))

    def collapse_reasons(self) -> list[str]:
        return invalid_reasons(self.score.forward.metadata.get("degenerate"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "primary_score": self.primary_score,
            "score": self.score.to_dict(),
            **provenance_dict(self),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetrievalCandidateResult:
        return cls(data["name"], RetrievalScore.from_dict(data["score"]), dict(data["embedding_metadata"]),
                   data.get("compression_metadata"), dict(data.get("metadata") or {}))


@dataclass(frozen=True)
class RetrievalBenchmarkResult(CohortReport):
    """All candidates of one retrieval benchmark, in declaration order."""

    SCHEMA = RETRIEVAL_SCHEMA
    SCHEMA_LABEL = "retrieval "
    CANDIDATE_TYPE = RetrievalCandidateResult
    UNITS = staticmethod(retrieval_units)
    RENDER = staticmethod(render_retrieval_markdown)

    def _columns(self, result: RetrievalCandidateResult) -> dict[str, Any]:
        forward = result.score.forward
        margin = (forward.summaries.get("margin") or {}).get("mean")
        return {
            "primary_metric": self.metadata.get("primary_metric"),
            "primary_score": result.primary_score,
            **{name: forward.metrics[name] for name in table_metrics(forward.config.ks, forward.config.conventions) if name in forward.metrics},
            "margin_mean": margin,
            "reverse_primary": None if result.score.reverse is None else result.score.reverse.score,
            "embedding_dim": result.embedding_metadata.get("dim"),
            "compression": compression_method(result.compression_metadata),
        }
