"""Result objects of the zero-shot protocol: ranking by the primary score, quality cohort, JSON round trip.

Each candidate carries its zero-shot result and, separately, OverlapIndex on the same sample embeddings; the two
are reported side by side and never combined.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vertebrae.reports.markdown import render_zero_shot_markdown
from vertebrae.reports.schemas import ZERO_SHOT_SCHEMA
from vertebrae.results.base import CohortReport, compression_method, provenance_dict
from vertebrae.results.comparison import zero_shot_units
from vertebrae.scoring.degenerate import invalid_reasons
from vertebrae.scoring.overlap import OverlapScoreResult
from vertebrae.scoring.zero_shot import ZeroShotResult


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
    def aggregate_valid(self) -> bool:
        """False when the zero-shot samples or prototypes, or the OverlapIndex rows, collapsed: not ranked."""
        return self.zero_shot.aggregate_valid and self.overlap.aggregate_valid

    def collapse_reasons(self) -> list[str]:
        return invalid_reasons(self.zero_shot.metadata.get("degenerate")) + invalid_reasons(self.overlap.degeneracy)

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
            **provenance_dict(self),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ZeroShotCandidateResult:
        return cls(data["name"], ZeroShotResult.from_dict(data["zero_shot"]), OverlapScoreResult.from_dict(data["overlap"]),
                   dict(data["embedding_metadata"]), data.get("compression_metadata"), dict(data.get("metadata") or {}))


@dataclass(frozen=True)
class ZeroShotBenchmarkResult(CohortReport):
    """All candidates of one zero-shot benchmark, in declaration order."""

    SCHEMA = ZERO_SHOT_SCHEMA
    SCHEMA_LABEL = "zero-shot "
    CANDIDATE_TYPE = ZeroShotCandidateResult
    UNITS = staticmethod(zero_shot_units)
    RENDER = staticmethod(render_zero_shot_markdown)

    def _columns(self, result: ZeroShotCandidateResult) -> dict[str, Any]:
        zs = result.zero_shot
        return {
            "primary_metric": zs.primary_metric,
            "primary_score": result.primary_score,
            "accuracy": zs.metrics["accuracy"],
            "macro_f1": zs.metrics["macro_f1"],
            "balanced_accuracy": zs.metrics["balanced_accuracy"],
            **{k: v for k, v in zs.metrics.items() if k.startswith("top_k_accuracy@") and k != "top_k_accuracy@1"},
            "margin_mean": zs.margins["margin"]["mean"],
            "overlap_score": result.overlap.score,
            "embedding_dim": zs.metadata.get("n_dimensions"),
            "compression": compression_method(result.compression_metadata),
        }
