"""ZeroShotBenchmark: the zero-shot protocol in one process.

Per candidate: embed the samples through the sample branch and the prompts through the text branch (same shard
and batch boundaries as the workflow) -> optional paired compression fitted on the samples and applied to the
prompts -> prototypes and exact scoring, with OverlapIndex on the same sample embeddings beside it -> a report
ranked by the primary zero-shot metric. With ``CacheConfig(enabled=True, cache_dir=D)`` endpoint embeddings are
kept under ``D/zero_shot/embeddings/{fingerprint}.h5``; sample keys depend on the source dataset identity only,
so a prompt edit reuses them. An extractor or dataset without a reusable identity bypasses the cache.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vertebrae.compression import EmbeddingCompressionConfig, variant_name
from vertebrae.core.errors import ValidationError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.core.memory import MemoryConfig
from vertebrae.data.zero_shot import ZeroShotDataset
from vertebrae.extractors.base import Extractor
from vertebrae.core.config import CacheConfig, EmbeddingConfig
from vertebrae.reports.costs import peak_memory_mb, reset_peak_memory
from vertebrae.scoring.overlap import OverlapScoringConfig
from vertebrae.scoring.zero_shot import ZeroShotConfig
from vertebrae.scoring.paired import ComparisonConfig
from vertebrae.stages.common import comparison_config_or_default, embed_cached, embed_endpoint, EmbeddingBlock
from vertebrae.stages.zero_shot import (
    PROMPTS,
    SAMPLES,
    candidate,
    check_zero_shot_extractor,
    compress_prompts,
    endpoint_metadata,
    fit_sample_compression,
    prompt_embedding_recipe,
    sample_embedding_recipe,
    score_zero_shot,
    zero_shot_compression_recipe,
    zero_shot_report,
    zero_shot_score_recipe,
)
from vertebrae.results.zero_shot import ZeroShotBenchmarkResult


@dataclass(frozen=True)
class ZeroShotCandidate:
    """An extractor with the branch that encodes the samples and the branch that encodes the prompts."""

    extractor: Extractor
    sample_branch: str | None
    text_branch: str | None

    def __post_init__(self) -> None:
        check_zero_shot_extractor(self.extractor, self.sample_branch, self.text_branch)


class ZeroShotBenchmark:
    """Compare shared-space extractors on one ZeroShotDataset (samples, classes, prompts); ``run()`` returns a
    ZeroShotBenchmarkResult.

    ``extractors`` holds ZeroShotCandidate entries, or extractors that use the global ``sample_branch`` and
    ``text_branch``. ``compression_config`` adds, per candidate, a variant compressed by a transform fitted on the
    samples and applied to the prompts.
    """

    def __init__(
        self,
        dataset: ZeroShotDataset,
        extractors: Sequence[Extractor | ZeroShotCandidate] = (),
        *,
        sample_branch: str | None = None,
        text_branch: str | None = None,
        zero_shot_config: ZeroShotConfig | None = None,
        overlap_config: OverlapScoringConfig | None = None,
        compression_config: EmbeddingCompressionConfig | None = None,
        embedding_config: EmbeddingConfig | None = None,
        memory_config: MemoryConfig | None = None,
        cache_config: CacheConfig | None = None,
        seed: int = 0,
        name: str = "zero_shot",
        comparison_config: ComparisonConfig | None = None,
    ) -> None:
        if not isinstance(dataset, ZeroShotDataset):
            raise ValidationError(f"ZeroShotBenchmark needs a ZeroShotDataset, got {type(dataset).__name__}")
        self.dataset = dataset
        self.config = zero_shot_config or ZeroShotConfig()
        if not isinstance(self.config, ZeroShotConfig):
            raise ValidationError(f"zero_shot_config must be a ZeroShotConfig, got {type(self.config).__name__}")
        self.overlap_config = overlap_config or OverlapScoringConfig()
        if not isinstance(self.overlap_config, OverlapScoringConfig):
            raise ValidationError(f"overlap_config must be an OverlapScoringConfig, got {type(self.overlap_config).__name__}")
        if compression_config is not None and not isinstance(compression_config, EmbeddingCompressionConfig):
            raise ValidationError(f"compression_config must be an EmbeddingCompressionConfig, got {type(compression_config).__name__}")
        self.compression_config = compression_config
        self.embedding_config = embedding_config or EmbeddingConfig()
        self.memory_config = memory_config
        self.cache_config = cache_config or CacheConfig()
        self.seed, self.name = seed, name
        self.comparison_config = comparison_config_or_default(comparison_config, seed)
        self.candidates: list[ZeroShotCandidate] = []
        for entry in extractors:
            if not isinstance(entry, ZeroShotCandidate):
                entry = ZeroShotCandidate(entry, sample_branch, text_branch)
            if any(c.extractor.name == entry.extractor.name for c in self.candidates):
                raise ValidationError(f"benchmark {name!r} already has an extractor named {entry.extractor.name!r}")
            self.candidates.append(entry)

    def _embed(self, extractor: Extractor, endpoint: str, inputs: Any, row_ids: Sequence[str], branch: str | None,
               recipe: dict[str, Any]) -> tuple[EmbeddingBlock, str, str]:
        fp = fingerprint("embedding", recipe)
        compute = lambda: embed_endpoint(  # noqa: E731
            extractor, inputs, row_ids, shards=self.embedding_config.shards, batch_size=self.embedding_config.batch_size,
            endpoint=endpoint, branch=branch, fit=False, memory=self.memory_config)
        block, status = embed_cached(compute, fp=fp, recipe=recipe, cache=self.cache_config,
                                     reusable=extractor.reusable and self.dataset.dataset.identity.reusable,
                                     folder="zero_shot/embeddings")
        return block, fp, status

    def run(self) -> ZeroShotBenchmarkResult:
        if not self.candidates:
            raise ValidationError(f"benchmark {self.name!r} has no extractors")
        zs, protocol = self.dataset, self.dataset.protocol
        protocol_fp = zs.protocol_fingerprint()
        results = []
        for entry in self.candidates:
            extractor = entry.extractor
            reset = reset_peak_memory()
            started = time.perf_counter()
            samples, sample_fp, sample_cache = self._embed(
                extractor, SAMPLES, zs.dataset.inputs, zs.dataset.row_ids, entry.sample_branch,
                sample_embedding_recipe(zs.identity_key(), extractor, entry.sample_branch))
            prompts, prompt_fp, prompt_cache = self._embed(
                extractor, PROMPTS, zs.prompt_inputs(), protocol.prompt_ids(), entry.text_branch,
                prompt_embedding_recipe(protocol_fp, extractor, entry.text_branch))
            eligible = extractor.reusable and zs.dataset.identity.reusable
            provenance = {"sample_fingerprint": sample_fp, "prompt_fingerprint": prompt_fp, "extractor": extractor.recipe(),
                          "sample_branch": entry.sample_branch, "text_branch": entry.text_branch,
                          "cache_status": {"samples": sample_cache, "prompts": prompt_cache}, "cache_eligible": eligible}
            variants = [(extractor.name, samples, prompts, sample_fp, prompt_fp, None, None)]
            if self.compression_config is not None:
                fitted, samples_c, metadata = fit_sample_compression(samples, self.compression_config)
                pair_fp = fingerprint("compressed", zero_shot_compression_recipe(sample_fp, self.compression_config))
                variants.append((variant_name(extractor.name, self.compression_config), samples_c,
                                 compress_prompts(fitted, prompts), f"{pair_fp}/samples", f"{pair_fp}/prompts:{prompt_fp}",
                                 pair_fp, metadata))
            embedded, peak = time.perf_counter(), peak_memory_mb() if reset else None
            for name, s, p, s_key, p_key, pair, compression in variants:
                begun = time.perf_counter()
                result, overlap = score_zero_shot(s, p, protocol, self.config, self.overlap_config, self.seed,
                                                  sample_pair=pair, prompt_pair=pair)
                score_fp = fingerprint("score", zero_shot_score_recipe(s_key, p_key, protocol_fp, self.config,
                                                                       self.overlap_config, self.seed))
                results.append(candidate(
                    name, result, overlap, endpoint_metadata(s, p),
                    {**provenance, "scored_samples": s_key, "scored_prompts": p_key}, compression,
                    {"score_fingerprint": score_fp,
                     "timings": {"embed_s": embedded - started, "embed_peak_mb": peak,
                                 "score_s": time.perf_counter() - begun}}))
        report = zero_shot_report(results, protocol, benchmark=self.name, config=self.config,
                                  overlap_config=self.overlap_config, seed=self.seed, protocol_fingerprint=protocol_fp,
                                  dataset_name=self.dataset.dataset.metadata.get("name"))
        return report.with_comparison(self.comparison_config).with_costs(measured=True)
