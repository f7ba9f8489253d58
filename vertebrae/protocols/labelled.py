"""Benchmark and Evaluator: the labelled protocol in one process.

Per candidate: fit (if the extractor learns) -> embed every shard -> merge -> score; then the report ranks
candidates by the OverlapIndex macro score. Shard and batch boundaries follow ``EmbeddingConfig`` so a run
with the workflow's settings computes the very same numbers. With ``CacheConfig(enabled=True, cache_dir=D)``
merged embeddings are kept as verified artifacts under ``D/embeddings/{fingerprint}.h5`` and reused, but only
for extractors and datasets whose identity is reusable across runs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from vertebrae.core.errors import ValidationError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.core.config import CacheConfig, EmbeddingConfig
from vertebrae.data.labelled import BenchmarkDataset
from vertebrae.extractors.base import Extractor
from vertebrae.reports.costs import peak_memory_mb, reset_peak_memory
from vertebrae.results import BenchmarkResult, ExtractorResult
from vertebrae.compression import EmbeddingCompressionConfig, variant_name
from vertebrae.scoring.metrics import Metric, OverlapMetric
from vertebrae.scoring.overlap import ContinuousOverlapScoringConfig, OverlapIndexScorer, OverlapScoringConfig
from vertebrae.scoring.separatix import SeparatixConfig
from vertebrae.scoring.stability import StabilityConfig
from vertebrae.scoring.paired import ComparisonConfig
from vertebrae.scoring.paired.rows import RowResamplingConfig, resolve
from vertebrae.stages.common import comparison_config_or_default, embed_cached, embed_endpoint, embedding_recipe, EmbeddingBlock
from vertebrae.stages.labelled import (
    ScoringPlan,
    build_protocol,
    build_report,
    candidate_result,
    check_metrics,
    compress_block,
    compression_recipe,
    protocol_recipe,
    score_embeddings,
    score_recipe,
)

ENDPOINT = "samples"


def _embed_cached(extractor: Extractor, dataset: BenchmarkDataset, embedding: EmbeddingConfig, cache: CacheConfig) -> tuple[EmbeddingBlock, str, str]:
    recipe = embedding_recipe(dataset.identity_key(), ENDPOINT, extractor)
    fp = fingerprint("embedding", recipe)
    compute = lambda: embed_endpoint(  # noqa: E731
        extractor, dataset.inputs, dataset.row_ids, shards=embedding.shards, batch_size=embedding.batch_size, endpoint=ENDPOINT
    )
    block, status = embed_cached(compute, fp=fp, recipe=recipe, cache=cache,
                                 reusable=extractor.reusable and dataset.identity.reusable, folder="embeddings")
    return block, fp, status


class Benchmark:
    """Compare extractors on one labelled dataset; ``run()`` returns a ranked BenchmarkResult.

    Each extractor is scored raw and, for every entry of ``compression_configs``, as a compressed variant
    (``name[suffix]``). ``metrics`` adds custom metrics next to OverlapIndex (which always runs);
    ``primary_metric`` picks the ranking metric. ``stability_config`` and ``separatix_config`` add the
    stability analysis and the gated Separatix diagnostic to every candidate. ``row_resampling`` decides when the
    comparison resamples rows instead of pairing over classes (default: with fewer than 10 classes; see
    ``vertebrae.scoring.paired.rows``); a dataset too small for an explicit ``mode="rows"`` is refused here.
    """

    def __init__(
        self,
        dataset: BenchmarkDataset,
        extractors: Sequence[Extractor] = (),
        *,
        metrics: Sequence[Metric] = (),
        primary_metric: str = "overlap",
        scoring_config: OverlapScoringConfig | ContinuousOverlapScoringConfig | None = None,
        compression_configs: Sequence[EmbeddingCompressionConfig] = (),
        stability_config: StabilityConfig | None = None,
        separatix_config: SeparatixConfig | None = None,
        embedding_config: EmbeddingConfig | None = None,
        cache_config: CacheConfig | None = None,
        seed: int = 0,
        name: str = "benchmark",
        comparison_config: ComparisonConfig | None = None,
        row_resampling: RowResamplingConfig | None = None,
    ) -> None:
        if not isinstance(dataset, BenchmarkDataset):
            raise ValidationError(f"Benchmark needs a BenchmarkDataset, got {type(dataset).__name__}")
        self.dataset = dataset
        self.extractors: list[Extractor] = []
        overlap_metrics = [m for m in metrics if isinstance(m, OverlapMetric)]
        if overlap_metrics:
            # OverlapIndex always runs; an OverlapMetric in `metrics` only configures it (spec/scoring.md)
            configured = [m.config for m in overlap_metrics if m.config is not None]
            if len(overlap_metrics) > 1 or (configured and scoring_config is not None and configured[0] != scoring_config):
                raise ValidationError("give the OverlapIndex configuration once: one OverlapMetric or scoring_config")
            scoring_config = configured[0] if configured else scoring_config
            metrics = [m for m in metrics if not isinstance(m, OverlapMetric)]
        self.plan = ScoringPlan(
            scoring=OverlapIndexScorer(scoring_config).config_for(dataset.target_type),
            seed=seed,
            metrics=tuple(metrics),
            stability=stability_config,
            separatix=separatix_config,
            primary_metric=primary_metric,
        )
        check_metrics(self.plan, dataset.targets, dataset.row_ids, dataset.groups)  # bad metric declarations fail here, not mid-run
        self.compression_configs = list(compression_configs)
        self.embedding_config = embedding_config or EmbeddingConfig()
        self.cache_config = cache_config or CacheConfig()
        self.name = name
        self.comparison_config = comparison_config_or_default(comparison_config, seed)
        rows = resolve(row_resampling, dataset.targets, primary_metric=primary_metric,
                       comparison_enabled=self.comparison_config.enabled)
        if rows is not None:
            self.plan = replace(self.plan, row_resampling=rows)
        for extractor in extractors:
            self.add_extractor(extractor)

    @property
    def scoring_config(self):
        return self.plan.scoring

    @property
    def seed(self) -> int:
        return self.plan.seed

    def add_extractor(self, extractor: Extractor) -> Benchmark:
        if not isinstance(extractor, Extractor):
            raise ValidationError(f"not an extractor: {extractor!r}")
        if any(e.name == extractor.name for e in self.extractors):
            raise ValidationError(f"benchmark {self.name!r} already has an extractor named {extractor.name!r}")
        self.extractors.append(extractor)
        return self

    def _variants(self, extractor: Extractor) -> list[tuple[str, EmbeddingBlock, str, dict[str, Any] | None, dict[str, Any]]]:
        """(name, block, embedding fingerprint, compression metadata, embedding metadata) per variant."""
        reset = reset_peak_memory()
        started = time.perf_counter()
        block, embed_fp, cache_status = _embed_cached(extractor, self.dataset, self.embedding_config, self.cache_config)
        provenance = {"fingerprint": embed_fp, "extractor": extractor.recipe(), "cache_status": cache_status,
                      "cache_eligible": extractor.reusable and self.dataset.identity.reusable,
                      "embed_s": time.perf_counter() - started, "embed_peak_mb": peak_memory_mb() if reset else None}
        variants = [(extractor.name, block, embed_fp, None, provenance)]
        for config in self.compression_configs:
            compressed, metadata = compress_block(block, config)
            compressed_fp = fingerprint("compressed", compression_recipe(embed_fp, config))
            variants.append((variant_name(extractor.name, config), compressed, compressed_fp, metadata,
                             {**provenance, "fingerprint": compressed_fp, "source_fingerprint": embed_fp}))
        return variants

    def run(self) -> BenchmarkResult:
        if not self.extractors:
            raise ValidationError(f"benchmark {self.name!r} has no extractors")
        protocol = build_protocol(self.dataset)
        protocol_fp = fingerprint("protocol", protocol_recipe(self.dataset.identity_key(), self.dataset.target_declaration))
        checked = check_metrics(self.plan, protocol.targets, protocol.row_ids, protocol.groups)  # every candidate's
        results = []
        for extractor in self.extractors:
            for name, block, embed_fp, compression, provenance in self._variants(extractor):
                started = time.perf_counter()
                payload = score_embeddings(block, protocol, self.plan, checked=checked)
                timings = {"embed_s": provenance.pop("embed_s"), "embed_peak_mb": provenance.pop("embed_peak_mb"),
                           "score_s": time.perf_counter() - started}
                results.append(candidate_result(
                    name, payload, plan=self.plan, embedding_metadata=provenance, compression_metadata=compression,
                    metadata={"score_fingerprint": fingerprint("score", score_recipe(embed_fp, protocol_fp, self.plan)),
                              "timings": timings},
                ))
        report = build_report(results, protocol, benchmark=self.name, plan=self.plan)
        return report.with_comparison(self.comparison_config).with_costs(measured=True)


class Evaluator:
    """One extractor on one dataset; ``run()`` returns its ExtractorResult (the raw variant)."""

    def __init__(self, *, dataset: BenchmarkDataset, extractor: Extractor, **options: Any) -> None:
        self._benchmark = Benchmark(dataset, [extractor], **options)

    def run(self) -> ExtractorResult:
        return self._benchmark.run().extractor_results[0]
