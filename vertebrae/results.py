"""Result objects of the labelled protocol: JSON round trip, ranking and a tabular view."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vertebrae.core.fingerprint import to_json_value
from vertebrae.scoring.overlap import OverlapScoreResult

REPORT_SCHEMA = "vertebrae.report/v1"
TABLE_COLUMNS = (
    "rank", "extractor", "primary_metric", "primary_score", "overlap_macro", "overlap_weighted",
    "weakest_class", "weakest_class_score", "embedding_dim", "n_warnings",
)


@dataclass(frozen=True)
class ExtractorResult:
    """One candidate's scores; ``primary_score`` is the OverlapIndex macro score."""

    name: str
    overlap: OverlapScoreResult
    embedding_metadata: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    primary_metric_name: str = "overlap"

    @property
    def primary_score(self) -> float:
        return self.overlap.score

    @property
    def metrics(self) -> dict[str, OverlapScoreResult]:
        return {"overlap": self.overlap}

    def weakest_class(self) -> tuple[str, float] | None:
        """(display label, score) of the aggregated class with the lowest per-class score."""
        scores = {key: self.overlap.per_class_scores[key] for key in self.overlap.aggregation_classes}
        if not scores:
            return None
        key = min(scores, key=lambda k: (scores[k], k))
        return self.overlap.labels[key], scores[key]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "primary_metric_name": self.primary_metric_name,
            "primary_score": self.primary_score,
            "overlap": self.overlap.to_dict(),
            "embedding_metadata": to_json_value(self.embedding_metadata),
            "warnings": list(self.warnings),
            "metadata": to_json_value(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExtractorResult:
        return cls(
            name=data["name"],
            overlap=OverlapScoreResult.from_dict(data["overlap"]),
            embedding_metadata=dict(data["embedding_metadata"]),
            warnings=list(data["warnings"]),
            metadata=dict(data["metadata"]),
            primary_metric_name=data["primary_metric_name"],
        )


@dataclass(frozen=True)
class BenchmarkResult:
    """All candidates of one benchmark, in declaration order; ``ranked_results()`` orders them best first."""

    extractor_results: list[ExtractorResult]
    dataset_summary: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)

    def ranked_results(self) -> list[ExtractorResult]:
        """Best primary score first; ties keep declaration order."""
        return sorted(self.extractor_results, key=lambda r: -r.primary_score)

    def table_rows(self) -> list[dict[str, Any]]:
        rows = []
        for rank, result in enumerate(self.ranked_results(), start=1):
            weakest = result.weakest_class()
            rows.append({
                "rank": rank,
                "extractor": result.name,
                "primary_metric": result.primary_metric_name,
                "primary_score": result.primary_score,
                "overlap_macro": result.overlap.macro_score,
                "overlap_weighted": result.overlap.weighted_score,
                "weakest_class": weakest[0] if weakest else None,
                "weakest_class_score": weakest[1] if weakest else None,
                "embedding_dim": result.embedding_metadata.get("dim"),
                "n_warnings": len(result.warnings) + len(result.overlap.warnings),
            })
        return rows

    def to_dataframe(self):
        """The ranking table as a pandas DataFrame (pandas is needed only here)."""
        import pandas as pd

        return pd.DataFrame(self.table_rows(), columns=list(TABLE_COLUMNS))

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": REPORT_SCHEMA,
            "ranking": [result.name for result in self.ranked_results()],
            "extractor_results": [result.to_dict() for result in self.extractor_results],
            "dataset_summary": to_json_value(self.dataset_summary),
            "metadata": to_json_value(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchmarkResult:
        from vertebrae.core.errors import ArtifactError

        if data.get("schema") != REPORT_SCHEMA:
            raise ArtifactError(f"unknown report schema {data.get('schema')!r}, expected {REPORT_SCHEMA!r}")
        return cls(
            extractor_results=[ExtractorResult.from_dict(item) for item in data["extractor_results"]],
            dataset_summary=dict(data["dataset_summary"]),
            metadata=dict(data["metadata"]),
        )

    def save_json(self, path: str | Path) -> None:
        from vertebrae.core.artifacts import write_json

        write_json(path, self.to_dict())

    def save_markdown(self, path: str | Path) -> None:
        from vertebrae.core.artifacts import atomic_write
        from vertebrae.reports.markdown import render_markdown

        with atomic_write(path) as tmp:
            Path(tmp).write_text(render_markdown(self), encoding="utf-8")
