"""Result objects of the labelled protocol: JSON round trip, ranking and a tabular view.

An ExtractorResult is one candidate (an extractor, or a compressed variant named like ``pixels[pca_16]``).
Its ``metrics`` always hold ``"overlap"`` (the OverlapIndex result as a MetricResult) plus any custom metric;
``primary_score`` is the score of ``primary_metric_name``. Only candidates whose primary metric declares
``aggregate_valid`` are ranked; a collapsed embedding (``OverlapScoreResult.degeneracy`` marks it meaningless) is
never ranked, whichever metric is primary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from vertebrae.core.fingerprint import to_json_value
from vertebrae.reports.markdown import render_markdown
from vertebrae.reports.schemas import LABELLED_SCHEMA
from vertebrae.results.base import RankedReport, compression_method
from vertebrae.results.comparison import (
    ComparisonUnavailable, labelled_units, metric_units, row_resampled_comparison,
)
from vertebrae.scoring.degenerate import invalid_reasons
from vertebrae.scoring.metrics import MetricResult
from vertebrae.scoring.overlap import OverlapScoreResult
from vertebrae.scoring.paired import ComparisonConfig, PairedComparison, compare_units
from vertebrae.scoring.separatix import SeparatixResult
from vertebrae.scoring.stability import StabilityResult

TABLE_COLUMNS = (
    "rank", "extractor", "primary_metric", "primary_score", "overlap_score", "overlap_macro", "overlap_weighted",
    "stability_interval", "weakest_class", "best_probe", "probe_metric", "probe_score", "embedding_dim",
    "compression", "recommendation",
)


def overlap_metric_result(overlap: OverlapScoreResult) -> MetricResult:
    """The OverlapIndex result seen through the custom-metric contract (diagnostics = the full result)."""
    return MetricResult("overlap", overlap.score, overlap.aggregate_valid, overlap.to_dict(), list(overlap.warnings),
                        {"target_type": overlap.target_type})


@dataclass(frozen=True)
class ExtractorResult:
    """One candidate's scores and diagnostics."""

    name: str
    overlap: OverlapScoreResult
    embedding_metadata: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    primary_metric_name: str = "overlap"
    custom_metrics: dict[str, MetricResult] = field(default_factory=dict)
    stability: StabilityResult | None = None
    separatix: Any = None
    compression_metadata: dict[str, Any] | None = None
    row_resamples: StabilityResult | None = None  # OverlapIndex on the matched row subsamples of a row-resampled comparison

    @property
    def metrics(self) -> dict[str, MetricResult]:
        return {"overlap": overlap_metric_result(self.overlap), **self.custom_metrics}

    @property
    def primary_score(self) -> float:
        return self.metrics[self.primary_metric_name].score

    @property
    def aggregate_valid(self) -> bool:
        """The primary metric's flag, and False for a collapsed embedding whatever the primary metric."""
        return self.overlap.aggregate_valid and self.metrics[self.primary_metric_name].aggregate_valid

    def collapse_reasons(self) -> list[str]:
        """Why the embedding collapsed (``what: reason`` each); empty when it did not."""
        return invalid_reasons(self.overlap.degeneracy)

    def weakest_class(self) -> tuple[str, float] | None:
        """(display label, score) of the aggregated class with the lowest per-class score."""
        scores = {key: self.overlap.per_class_scores[key] for key in self.overlap.aggregation_classes}
        if not scores:
            return None
        key = min(scores, key=lambda k: (scores[k], k))
        return self.overlap.labels[key], scores[key]

    def to_dict(self) -> dict[str, Any]:
        resamples = {} if self.row_resamples is None else {"row_resamples": self.row_resamples.to_dict()}
        return {
            "name": self.name,
            "primary_metric_name": self.primary_metric_name,
            "primary_score": self.primary_score,
            "aggregate_valid": self.aggregate_valid,
            "overlap": self.overlap.to_dict(),
            "metrics": {name: result.to_dict() for name, result in self.custom_metrics.items()},
            "stability": None if self.stability is None else self.stability.to_dict(),
            "separatix": None if self.separatix is None else self.separatix.to_dict(),
            "compression_metadata": to_json_value(self.compression_metadata),
            "embedding_metadata": to_json_value(self.embedding_metadata),
            "warnings": list(self.warnings),
            "metadata": to_json_value(self.metadata),
            **resamples,
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
            custom_metrics={name: MetricResult.from_dict(item) for name, item in (data.get("metrics") or {}).items()},
            stability=None if data.get("stability") is None else StabilityResult.from_dict(data["stability"]),
            separatix=None if data.get("separatix") is None else SeparatixResult.from_dict(data["separatix"]),
            compression_metadata=data.get("compression_metadata"),
            row_resamples=None if data.get("row_resamples") is None else StabilityResult.from_dict(data["row_resamples"]),
        )


@dataclass(frozen=True)
class BenchmarkResult(RankedReport):
    """All candidates of one benchmark, in declaration order; ``ranked_results()`` orders the valid ones."""

    extractor_results: list[ExtractorResult]
    dataset_summary: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)
    comparison: PairedComparison | None = None
    comparison_skipped: str | None = None
    metric_comparisons: dict[str, Any] = field(default_factory=dict)

    SCHEMA = LABELLED_SCHEMA
    CANDIDATES_KEY = "extractor_results"
    CANDIDATE_TYPE = ExtractorResult
    RENDER = staticmethod(render_markdown)
    TABLE_COLUMNS = TABLE_COLUMNS
    UNITS = staticmethod(labelled_units)

    def _ranks(self, candidate: ExtractorResult) -> bool:
        """Only candidates whose primary metric is aggregate-valid are ranked."""
        return candidate.aggregate_valid

    @property
    def lower_is_better(self) -> bool:
        """A ``role: nuisance`` target view's report (``metadata["view"]``, ``with_view``): the candidate that
        separates the nuisance least ranks first."""
        return (self.metadata.get("view") or {}).get("role") == "nuisance"

    def ranked_results(self) -> list[ExtractorResult]:
        """Best primary score first (a nuisance view's report: lowest first); ties keep declaration order."""
        if not self.lower_is_better:
            return super().ranked_results()
        return sorted((r for r in self.candidates if self._ranks(r)), key=lambda r: r.primary_score)

    def with_view(self, view: str | None, role: str | None) -> BenchmarkResult:
        """This report as target view ``view``'s, of ``role`` (``vertebrae.data.target_views``), recorded in
        ``metadata["view"]`` (``{"name", "role", "better"}``) for its readers; ``view`` None: unchanged."""
        if view is None:
            return self
        better = "lower" if role == "nuisance" else "higher"
        return replace(self, metadata={**self.metadata, "view": {"name": view, "role": role, "better": better}})

    @property
    def ranking_available(self) -> bool:
        return bool(self.ranked_results())

    def _summary(self) -> dict[str, Any]:
        return {"ranking_available": self.ranking_available}

    def declared_metrics(self) -> list[str]:
        """The custom and built-in metric names of the candidates, first-seen order."""
        return list(dict.fromkeys(m for c in self.extractor_results for m in c.custom_metrics))

    def compare(self, config: ComparisonConfig | None = None) -> PairedComparison:
        """Over the classes (``RankedReport.compare``), or over matched row subsamples when the scoring plan ran a
        row-resampled comparison (``metadata["plan"]["row_resampling"]``: the benchmark has too few classes)."""
        from vertebrae.scoring.paired.rows import RowResamplingConfig

        rows = (self.metadata.get("plan") or {}).get("row_resampling")
        if rows is None:
            return super().compare(config)
        ranked = self.ranked_results()
        if len(ranked) < 2:
            raise ComparisonUnavailable(f"{len(ranked)} ranked candidate(s); a comparison needs at least two")
        n_classes = int(self.dataset_summary.get("n_classes") or len(ranked[0].overlap.aggregation_classes))
        return row_resampled_comparison(ranked, config or ComparisonConfig(), RowResamplingConfig.from_dict(rows),
                                        n_classes)

    def with_comparison(self, config: ComparisonConfig | None = None) -> BenchmarkResult:
        """The primary metric's comparison (``RankedReport.with_comparison``) plus, in ``metric_comparisons``, one
        per declared metric over the same ranked candidates: ``{"comparison": {...}}`` or ``{"skipped": why}``."""
        config = config or ComparisonConfig()
        result = super().with_comparison(config)
        ranked = self.ranked_results()
        out: dict[str, Any] = {}
        for name in self.declared_metrics():
            if not config.enabled:
                out[name] = {"skipped": "disabled by the configuration (enabled: false)"}
                continue
            try:
                if len(ranked) < 2:
                    raise ComparisonUnavailable(f"{len(ranked)} ranked candidate(s); a comparison needs at least two")
                out[name] = {"comparison": compare_units(metric_units(ranked, name), config).to_dict()}
            except ComparisonUnavailable as exc:
                out[name] = {"skipped": str(exc)}
        return replace(result, metric_comparisons=out)

    def metric_interval(self, candidate: str, metric: str) -> tuple[float, float] | None:
        """The bootstrap interval of ``candidate``'s ``metric`` from ``metric_comparisons``, if computed."""
        comparison = (self.metric_comparisons.get(metric) or {}).get("comparison") or {}
        for item in comparison.get("candidates", []):
            if item["name"] == candidate:
                return item["ci_low"], item["ci_high"]
        return None

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "metric_comparisons": to_json_value(self.metric_comparisons)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchmarkResult:
        return replace(super().from_dict(data), metric_comparisons=dict(data.get("metric_comparisons") or {}))

    def _columns(self, result: ExtractorResult) -> dict[str, Any]:
        weakest = result.weakest_class()
        interval = None
        if result.stability is not None:
            interval = [result.stability.summary["interval_low"], result.stability.summary["interval_high"]]
        ran = result.separatix is not None and result.separatix.ran
        probe = ((result.separatix.probe_summary or {}) if ran else {}).get("best_probe") or {}
        return {
            "primary_metric": result.primary_metric_name,
            "primary_score": result.primary_score,
            "overlap_score": result.overlap.score,
            "overlap_macro": result.overlap.macro_score,
            "overlap_weighted": result.overlap.weighted_score,
            "stability_interval": interval,
            "weakest_class": None if weakest is None else f"{weakest[0]} ({weakest[1]:.4f})",
            "best_probe": probe.get("name"),
            "probe_metric": probe.get("metric"),
            "probe_score": probe.get("score"),
            "embedding_dim": result.embedding_metadata.get("dim"),
            "compression": compression_method(result.compression_metadata),
            "recommendation": result.separatix.recommendation if ran else None,
        }
