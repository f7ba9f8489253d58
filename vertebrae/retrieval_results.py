"""Result objects of the retrieval protocol: ranking by the primary score, quality cohort, JSON round trip."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ArtifactError
from vertebrae.core.fingerprint import to_json_value
from vertebrae.scoring.retrieval import RetrievalScore

REPORT_SCHEMA = "vertebrae.retrieval-report/v1"
COHORT_TOLERANCE = 0.01


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "primary_score": self.primary_score,
            "score": self.score.to_dict(),
            "embedding_metadata": to_json_value(self.embedding_metadata),
            "compression_metadata": to_json_value(self.compression_metadata),
            "metadata": to_json_value(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetrievalCandidateResult:
        return cls(data["name"], RetrievalScore.from_dict(data["score"]), dict(data["embedding_metadata"]),
                   data.get("compression_metadata"), dict(data.get("metadata") or {}))


@dataclass(frozen=True)
class RetrievalBenchmarkResult:
    """All candidates of one retrieval benchmark, in declaration order."""

    candidate_results: list[RetrievalCandidateResult]
    dataset_summary: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)

    def ranked_results(self) -> list[RetrievalCandidateResult]:
        """Best primary score first; ties keep declaration order."""
        return sorted(self.candidate_results, key=lambda r: -r.primary_score)

    def quality_cohort(self) -> list[str]:
        """Candidates within COHORT_TOLERANCE (0.01) of the best primary score."""
        ranked = self.ranked_results()
        return [r.name for r in ranked if ranked and r.primary_score >= ranked[0].primary_score - COHORT_TOLERANCE]

    def table_rows(self) -> list[dict[str, Any]]:
        rows = []
        for rank, result in enumerate(self.ranked_results(), start=1):
            forward = result.score.forward
            margin = (forward.summaries.get("margin") or {}).get("mean")
            rows.append({
                "rank": rank,
                "extractor": result.name,
                "primary_metric": self.metadata.get("primary_metric"),
                "primary_score": result.primary_score,
                **{name: forward.metrics[name] for name in self.metadata.get("table_metrics", [])},
                "margin_mean": margin,
                "reverse_primary": None if result.score.reverse is None else result.score.reverse.score,
                "embedding_dim": result.embedding_metadata.get("dim"),
                "compression": (result.compression_metadata or {}).get("method") if (result.compression_metadata or {}).get("applied") else None,
            })
        return rows

    def to_dataframe(self):
        import pandas as pd

        return pd.DataFrame(self.table_rows())

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": REPORT_SCHEMA,
            "ranking": [r.name for r in self.ranked_results()],
            "quality_cohort": self.quality_cohort(),
            "candidate_results": [r.to_dict() for r in self.candidate_results],
            "dataset_summary": to_json_value(self.dataset_summary),
            "metadata": to_json_value(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetrievalBenchmarkResult:
        if data.get("schema") != REPORT_SCHEMA:
            raise ArtifactError(f"unknown retrieval report schema {data.get('schema')!r}, expected {REPORT_SCHEMA!r}")
        return cls([RetrievalCandidateResult.from_dict(r) for r in data["candidate_results"]],
                   dict(data["dataset_summary"]), dict(data["metadata"]))

    def save_json(self, path: str | Path) -> None:
        from vertebrae.core.artifacts import write_json

        write_json(path, self.to_dict())

    def save_markdown(self, path: str | Path) -> None:
        from vertebrae.core.artifacts import atomic_write
        from vertebrae.reports.markdown import render_retrieval_markdown

        with atomic_write(path) as tmp:
            Path(tmp).write_text(render_retrieval_markdown(self), encoding="utf-8")
