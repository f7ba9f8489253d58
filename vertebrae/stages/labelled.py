"""Labelled-protocol stages: write the protocol (row ids, targets, groups), score, report."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vertebrae import __version__
from vertebrae.core.errors import ValidationError
from vertebrae.core.fingerprint import SCHEMAS
from vertebrae.core.provenance import installed_version
from vertebrae.data.labelled import BenchmarkDataset, LabelledProtocol
from vertebrae.results import BenchmarkResult, ExtractorResult
from vertebrae.compression import EmbeddingCompressionConfig, fit_paired_compression
from vertebrae.scoring.labelled_common import BuiltinMetric
from vertebrae.scoring.metric_registry import metric_from_config
from vertebrae.scoring.metrics import Metric
from vertebrae.scoring.overlap import (
    ContinuousOverlapScoringConfig,
    OverlapIndexScorer,
    OverlapScoringConfig,
    scoring_config_from_dict,
)
from vertebrae.scoring.paired.rows import RowResamplingConfig
from vertebrae.scoring.separatix import SeparatixConfig, SeparatixScorer
from vertebrae.scoring.stability import StabilityConfig, run_stability_analysis
from vertebrae.stages.common import EmbeddingBlock, check_row_ids, check_unique_names


def protocol_recipe(identity_key: str, target_declaration: Mapping[str, Any]) -> dict[str, Any]:
    """What determines the targets: the dataset identity and how its labels are read (type, names)."""
    return {"dataset": identity_key, "targets": dict(target_declaration)}


def build_protocol(dataset: BenchmarkDataset) -> LabelledProtocol:
    return LabelledProtocol(dataset.row_ids, dataset.targets, dataset.summary(), dataset.groups)


@dataclass(frozen=True)
class ScoringPlan:
    """Everything computed for each candidate: OverlapIndex (always), custom metrics, stability, Separatix.

    ``primary_metric`` names the metric that ranks candidates ("overlap" or a custom metric's name).
    ``row_resampling``: the matched row subsamples every candidate's OverlapIndex is also scored on, for a
    row-resampled comparison (``vertebrae.scoring.paired.rows.resolve``); None (and absent from ``to_dict``, so
    the fingerprints of benchmarks compared over classes stay as they were) when the comparison pairs classes.
    """

    scoring: OverlapScoringConfig | ContinuousOverlapScoringConfig
    seed: int = 0
    metrics: tuple[Metric, ...] = ()
    stability: StabilityConfig | None = None
    separatix: SeparatixConfig | None = None
    primary_metric: str = "overlap"
    row_resampling: RowResamplingConfig | None = None

    def __post_init__(self) -> None:
        names = [m.name for m in self.metrics]
        if "overlap" in names:
            raise ValidationError("OverlapIndex always runs as metric 'overlap'; do not list an OverlapMetric")
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValidationError(f"duplicate metric names {duplicates}")
        if self.primary_metric not in ["overlap", *names]:
            raise ValidationError(f"primary_metric {self.primary_metric!r} is not one of the metrics {['overlap', *names]}")

    def to_dict(self) -> dict[str, Any]:
        """JSON form. A metric without a stable recipe (a lambda, a nested or ``__main__`` function without
        cache_identity) is recorded as ``{"type": "unrecorded", "name": ...}``: fine for an in-process run,
        refused by ``from_dict`` (it cannot be replayed in another process)."""
        recipes = [metric.recipe() or {"type": "unrecorded", "name": metric.name} for metric in self.metrics]
        return {
            "scoring": self.scoring.to_dict(),
            "seed": int(self.seed),
            "metrics": recipes,
            "stability": None if self.stability is None else self.stability.to_dict(),
            "separatix": None if self.separatix is None else self.separatix.to_dict(),
            "primary_metric": self.primary_metric,
            **({} if self.row_resampling is None else {"row_resampling": self.row_resampling.to_dict()}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], target_type: str) -> ScoringPlan:
        unrecorded = [recipe.get("name") for recipe in data["metrics"] if recipe.get("type") == "unrecorded"]
        if unrecorded:
            raise ValidationError(f"metrics {unrecorded} have no importable path or cache_identity and cannot be replayed")
        return cls(
            scoring=scoring_config_from_dict(data["scoring"], target_type),
            seed=data["seed"],
            metrics=tuple(metric_from_config(recipe) for recipe in data["metrics"]),
            stability=None if data["stability"] is None else StabilityConfig.from_dict(data["stability"]),
            separatix=None if data["separatix"] is None else SeparatixConfig.from_dict(data["separatix"]),
            primary_metric=data["primary_metric"],
            row_resampling=None if data.get("row_resampling") is None
            else RowResamplingConfig.from_dict(data["row_resampling"]),
        )


def backend_versions() -> dict[str, str]:
    return {"overlapindex": installed_version("overlapindex"), "separatix": installed_version("separatix"),
            "schema": SCHEMAS["score"]}


def score_recipe(embedding_fp: str, protocol_fp: str, plan: ScoringPlan) -> dict[str, Any]:
    """What determines a score: embeddings, targets, the scoring plan and the backends' versions."""
    return {"embedding": embedding_fp, "protocol": protocol_fp, "plan": plan.to_dict(), "backend": backend_versions()}


def compression_recipe(embedding_fp: str, config: EmbeddingCompressionConfig) -> dict[str, Any]:
    return {"embedding": embedding_fp, "fit_endpoint": "samples", "compression": config.to_dict()}


def compress_block(block: EmbeddingBlock, config: EmbeddingCompressionConfig) -> tuple[EmbeddingBlock, dict[str, Any]]:
    """Fit the label-free compressor on the samples and apply it to them; returns the block and its metadata."""
    fitted = fit_paired_compression(block.matrix, config)
    metadata = {**fitted.metadata, "fit_side": "samples"}
    return EmbeddingBlock(fitted.compressed_reference, block.row_ids), metadata


def check_metrics(plan: ScoringPlan, targets: Any, row_ids: Sequence[str],
                  groups: Sequence[Any] | None = None) -> dict[str, Any]:
    """Every refusal of the built-in metrics that the targets and groups decide (folds, shots, k, split, target
    type); returns each built-in metric's checked plan by name (``compute``'s ``plan``)."""
    return {metric.name: metric.check(targets, row_ids=row_ids, seed=plan.seed, groups=groups)
            for metric in plan.metrics if isinstance(metric, BuiltinMetric)}


def score_embeddings(block: EmbeddingBlock, protocol: LabelledProtocol, plan: ScoringPlan, *, endpoint: str = "samples",
                     checked: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Score one candidate's (possibly compressed) embeddings; returns the score payload.

    Order: OverlapIndex, custom metrics, stability, then Separatix on the same evaluated variant, gated by
    the overlap score. ``checked``: ``check_metrics(plan, protocol.targets, protocol.row_ids, protocol.groups)``
    made once for several candidates of one protocol (their row ids are the protocol's); made here when None.
    """
    check_row_ids(block, protocol.row_ids, endpoint)
    if checked is None:
        checked = check_metrics(plan, protocol.targets, block.row_ids, protocol.groups)
    overlap = OverlapIndexScorer(plan.scoring).score_targets(block.matrix, protocol.targets, seed=plan.seed, row_ids=block.row_ids)
    metrics = {
        metric.name: metric.compute(block.matrix, protocol.targets, row_ids=block.row_ids, groups=protocol.groups,
                                    seed=plan.seed, **({"plan": checked[metric.name]} if metric.name in checked else {})
                                    ).to_dict()
        for metric in plan.metrics
    }
    stability = None
    if plan.stability is not None and plan.stability.enabled:
        stability = run_stability_analysis(block.matrix, protocol.targets, scoring_config=plan.scoring,
                                           stability_config=plan.stability, seed=plan.seed, row_ids=block.row_ids).to_dict()
    resamples = {}
    if plan.row_resampling is not None:  # the subsamples' warnings are recorded in the result, not repeated R times
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            resamples["row_resamples"] = run_stability_analysis(
                block.matrix, protocol.targets, scoring_config=plan.scoring,
                stability_config=plan.row_resampling.stability_config(), seed=plan.seed, row_ids=block.row_ids).to_dict()
    separatix = None
    if plan.separatix is not None:
        separatix = SeparatixScorer(plan.separatix).run(
            block.matrix, protocol.targets, overlap_score=overlap.score, groups=protocol.groups,
            normalize_embeddings=plan.scoring.normalize_embeddings, fallback_max_dense_bytes=plan.scoring.max_dense_bytes,
        ).to_dict()
    return {"overlap": overlap.to_dict(), "metrics": metrics, "stability": stability, "separatix": separatix,
            "embedding_metadata": block.metadata(), **resamples}


def candidate_result(
    name: str,
    score_payload: Mapping[str, Any],
    *,
    plan: ScoringPlan,
    embedding_metadata: Mapping[str, Any],
    compression_metadata: Mapping[str, Any] | None,
    metadata: Mapping[str, Any],
) -> ExtractorResult:
    """An ExtractorResult from a score payload plus the candidate's name and provenance."""
    return ExtractorResult.from_dict({
        "name": name,
        "primary_metric_name": plan.primary_metric,
        "overlap": score_payload["overlap"],
        "metrics": score_payload["metrics"],
        "stability": score_payload["stability"],
        "separatix": score_payload["separatix"],
        "compression_metadata": None if compression_metadata is None else dict(compression_metadata),
        "embedding_metadata": {**score_payload["embedding_metadata"], **embedding_metadata},
        "warnings": [],
        "metadata": dict(metadata),
        **({"row_resamples": score_payload["row_resamples"]} if score_payload.get("row_resamples") else {}),
    })


def build_report(candidates: Sequence[ExtractorResult], protocol: LabelledProtocol, *, benchmark: str, plan: ScoringPlan) -> BenchmarkResult:
    check_unique_names([c.name for c in candidates], benchmark)
    return BenchmarkResult(
        extractor_results=list(candidates),
        dataset_summary=protocol.dataset_summary,
        metadata={"benchmark": benchmark, "protocol": "labelled", "seed": int(plan.seed), "plan": plan.to_dict(),
                  "vertebrae_version": __version__},
    )
