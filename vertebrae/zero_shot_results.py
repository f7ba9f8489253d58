"""Result objects of the zero-shot protocol: ranking by the primary score, quality cohort, JSON round trip.

Each candidate carries its zero-shot result and, separately, OverlapIndex on the same sample embeddings; the two
are reported side by side and never combined.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ArtifactError
from vertebrae.core.fingerprint import to_json_value
from vertebrae.scoring.overlap import OverlapScoreResult
from vertebrae.scoring.zero_shot import ZeroShotResult

REPORT_SCHEMA = "vertebrae.zero-shot-report/v1"
COHORT_TOLERANCE = 0.01


@dataclass(frozen=True)
class ZeroShotCandidateResult:
    """One candidate (an extractor's branch pair, raw or paired-compressed) under the zero-shot protocol."""

    name: str
    zero_shot: ZeroShotResult
    overlap: OverlapScoreResult
    embedding_metadata: dict[str, Any]
    compression_metadata: dict[str, Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def primary_score(self) -> float:
        return self.zero_shot.score

    @property
    def warnings(self) -> list[str]:
        return list(self.zero_shot.warnings) + list(self.overlap.warnings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "primary_metric": self.zero_shot.primary_metric,
            "primary_score": self.primary_score,
            "zero_shot": self.zero_shot.to_dict(),
            "overlap": self.overlap.to_dict(),
            "embedding_metadata": to_json_value(self.embedding_metadata),
            "compression_metadata": to_json_value(self.compression_metadata),
            "metadata": to_json_value(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ZeroShotCandidateResult:
        return cls(data["name"], ZeroShotResult.from_dict(data["zero_shot"]), OverlapScoreResult.from_dict(data["overlap"]),
                   dict(data["embedding_metadata"]), data.get("compression_metadata"), dict(data.get("metadata") or {}))


@dataclass(frozen=True)
class ZeroShotBenchmarkResult:
    """All candidates of one zero-shot benchmark, in declaration order."""

    candidate_results: list[ZeroShotCandidateResult]
    dataset_summary: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)

    def ranked_results(self) -> list[ZeroShotCandidateResult]:
        """Best primary score first; ties keep declaration order."""
        return sorted(self.candidate_results, key=lambda r: -r.primary_score)

    def quality_cohort(self) -> list[str]:
        """Candidates within COHORT_TOLERANCE (0.01) of the best primary score."""
        ranked = self.ranked_results()
        return [r.name for r in ranked if r.primary_score >= ranked[0].primary_score - COHORT_TOLERANCE]

    def table_rows(self) -> list[dict[str, Any]]:
        rows = []
        for rank, result in enumerate(self.ranked_results(), start=1):
            zs = result.zero_shot
            compression = result.compression_metadata or {}
            rows.append({
                "rank": rank,
                "extractor": result.name,
                "primary_metric": zs.primary_metric,
                "primary_score": result.primary_score,
                "accuracy": zs.metrics["accuracy"],
                "macro_f1": zs.metrics["macro_f1"],
                "balanced_accuracy": zs.metrics["balanced_accuracy"],
                **{k: v for k, v in zs.metrics.items() if k.startswith("top_k_accuracy@") and k != "top_k_accuracy@1"},
                "margin_mean": zs.margins["margin"]["mean"],
                "overlap_score": result.overlap.score,
                "embedding_dim": zs.metadata.get("n_dimensions"),
                "compression": compression.get("method") if compression.get("applied") else None,
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
    def from_dict(cls, data: Mapping[str, Any]) -> ZeroShotBenchmarkResult:
        if not isinstance(data, Mapping) or data.get("schema") != REPORT_SCHEMA:
            schema = data.get("schema") if isinstance(data, Mapping) else None
            raise ArtifactError(f"unknown zero-shot report schema {schema!r}, expected {REPORT_SCHEMA!r}")
        return cls([ZeroShotCandidateResult.from_dict(r) for r in data["candidate_results"]],
                   dict(data["dataset_summary"]), dict(data["metadata"]))

    def save_json(self, path: str | Path) -> None:
        from vertebrae.core.artifacts import write_json

        write_json(path, self.to_dict())

    def save_markdown(self, path: str | Path) -> None:
        from vertebrae.core.artifacts import atomic_write
        from vertebrae.reports.zero_shot_markdown import render_zero_shot_markdown

        with atomic_write(path) as tmp:
            Path(tmp).write_text(render_zero_shot_markdown(self), encoding="utf-8")
