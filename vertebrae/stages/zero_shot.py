"""Zero-shot stages: recipes, paired compression (fitted on the samples), scoring, report.

Keys: sample embeddings depend on the source dataset identity, the extractor and its sample branch only, so a
prompt edit leaves them (and their compression fit) untouched; prompt embeddings and the protocol depend on the
protocol fingerprint; a score hashes the sample key, prompt key, protocol key, zero-shot config, overlap config
and seed. Sample and prompt endpoints are both raw or both from one paired compression (same pair identity).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae import __version__
from vertebrae.compression import EmbeddingCompressionConfig, FittedCompression, fit_paired_compression
from vertebrae.core.errors import ArtifactError, ValidationError
from vertebrae.core.fingerprint import SCHEMAS
from vertebrae.core.provenance import installed_version
from vertebrae.data.zero_shot import ZeroShotProtocol
from vertebrae.extractors.base import Extractor
from vertebrae.scoring.overlap import OverlapIndexScorer, OverlapScoreResult, OverlapScoringConfig
from vertebrae.scoring.zero_shot import RESULT_SCHEMA, ZeroShotConfig, ZeroShotResult, score_encoded
from vertebrae.stages.common import EmbeddingBlock, check_row_ids, check_unique_names, embedding_recipe
from vertebrae.results.zero_shot import ZeroShotBenchmarkResult, ZeroShotCandidateResult

SAMPLES, PROMPTS = "samples", "prompts"
FIT_ENDPOINT = SAMPLES


def is_text_encoder(extractor: Extractor) -> bool:
    """A branch-less extractor whose one transform encodes text (e.g. a sentence encoder)."""
    return not extractor.branches and getattr(extractor, "branch_modality", None) == {None: "text"}


def check_zero_shot_extractor(extractor: Extractor, sample_branch: Any, text_branch: Any) -> None:
    """Only training-free extractors with independently encodable shared-space branches qualify; a branch-less
    text encoder qualifies too (text samples and prompts share its one space), with both branches None."""
    if not isinstance(extractor, Extractor):
        raise ValidationError(f"zero-shot candidates must be extractors, got {type(extractor).__name__}")
    if extractor.learns:
        raise ValidationError(f"extractor {extractor.name!r} learns from data; zero-shot evaluation is training-free")
    if is_text_encoder(extractor):
        if sample_branch is not None or text_branch is not None:
            raise ValidationError(f"extractor {extractor.name!r} is a branch-less text encoder: sample_branch and "
                                  f"text_branch must be None, got {sample_branch!r} and {text_branch!r}")
        return
    if not extractor.branches:
        raise ValidationError(f"extractor {extractor.name!r} declares no branches; zero-shot needs an extractor with "
                              "independently encodable shared-space branches (e.g. image and text)")
    for value, what in ((sample_branch, "sample_branch"), (text_branch, "text_branch")):
        if value is None:
            raise ValidationError(f"extractor {extractor.name!r}: {what} is required (its branches: {list(extractor.branches)})")
        if value not in extractor.branches:
            raise ValidationError(f"extractor {extractor.name!r}: {what} {value!r} is not one of its branches "
                                  f"{list(extractor.branches)}")


def sample_embedding_recipe(identity_key: str, extractor: Extractor, branch: str | None) -> dict[str, Any]:
    """The source dataset, the extractor and its sample branch only. For a branch-less text encoder this is the
    labelled protocol's embedding recipe: the same rows through the same transform are one artifact."""
    return embedding_recipe(identity_key, SAMPLES, extractor, branch)


def prompt_embedding_recipe(protocol_fp: str, extractor: Extractor, branch: str | None) -> dict[str, Any]:
    return embedding_recipe(f"zero-shot-protocol:{protocol_fp}", PROMPTS, extractor, branch)


def zero_shot_protocol_recipe(protocol: ZeroShotProtocol) -> dict[str, Any]:
    return {"zero_shot": protocol.to_payload()}


def zero_shot_compression_recipe(sample_fp: str, config: EmbeddingCompressionConfig) -> dict[str, Any]:
    """Sample-side only: the fit never sees prompts, so a prompt edit keeps it."""
    return {"samples": sample_fp, "fit_endpoint": FIT_ENDPOINT, "compression": config.to_dict(), "protocol": "zero-shot"}


def zero_shot_score_recipe(sample_key: str, prompt_key: str, protocol_fp: str, config: ZeroShotConfig,
                           overlap: OverlapScoringConfig, seed: int) -> dict[str, Any]:
    """``result`` names the result schema: a v2 result keeps per-sample outcomes (paired comparisons), so v1
    artifacts, which lack them, are rescored rather than reused."""
    return {"samples": sample_key, "prompts": prompt_key, "protocol": protocol_fp, "zero_shot": config.to_dict(),
            "overlap": overlap.to_dict(), "seed": seed, "backend": {"schema": SCHEMAS["score"]}, "result": RESULT_SCHEMA}


def fit_sample_compression(samples: EmbeddingBlock, config: EmbeddingCompressionConfig) -> tuple[FittedCompression, EmbeddingBlock, dict[str, Any]]:
    """Fit on the samples (label-free): (fitted transform, compressed samples, metadata with fit_side)."""
    fitted = fit_paired_compression(samples.matrix, config)
    return fitted, EmbeddingBlock(fitted.compressed_reference, samples.row_ids), {**fitted.metadata, "fit_side": FIT_ENDPOINT}


def compress_prompts(fitted: FittedCompression, prompts: EmbeddingBlock) -> EmbeddingBlock:
    return EmbeddingBlock(fitted.transform(prompts.matrix, what="Prompt embeddings"), prompts.row_ids)


def _same_matrix(a: Any, b: Any) -> bool:
    if sp.issparse(a) != sp.issparse(b) or a.shape != b.shape or a.dtype != b.dtype:
        return False
    if sp.issparse(a):
        return (a != b).nnz == 0
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))


def refit_for_prompts(raw_samples: EmbeddingBlock, compressed_samples: EmbeddingBlock, config: EmbeddingCompressionConfig,
                      *, source: str) -> FittedCompression:
    """Re-derive the sample-fitted transform (deterministic, seeded) and check it reproduces the compressed-sample
    artifact exactly before it is applied to prompts; ArtifactError naming ``source`` otherwise."""
    fitted = fit_paired_compression(raw_samples.matrix, config)
    if not _same_matrix(fitted.compressed_reference, compressed_samples.matrix):
        raise ArtifactError(f"{source}: refitting the compression on the raw samples does not reproduce these compressed "
                            "samples; the artifact is stale or was produced elsewhere")
    return fitted


def check_pairing(sample_pair: str | None, prompt_pair: str | None) -> None:
    """Both endpoints raw, or both from the same paired compression (dimensions are not evidence)."""
    if sample_pair == prompt_pair:
        return
    describe = lambda p: "raw" if p is None else f"compressed by pair {p}"  # noqa: E731
    raise ValidationError(f"mixed zero-shot endpoints: sample embeddings are {describe(sample_pair)}, prompt embeddings "
                          f"are {describe(prompt_pair)}; both must be raw or come from the same paired compression")


def score_zero_shot(samples: EmbeddingBlock, prompts: EmbeddingBlock, protocol: ZeroShotProtocol, config: ZeroShotConfig,
                    overlap_config: OverlapScoringConfig, seed: int, *, sample_pair: str | None = None,
                    prompt_pair: str | None = None) -> tuple[ZeroShotResult, OverlapScoreResult]:
    """Zero-shot metrics and, separately, OverlapIndex of the same sample embeddings (row ids checked first)."""
    check_pairing(sample_pair, prompt_pair)
    check_row_ids(samples, protocol.sample_ids, SAMPLES)
    check_row_ids(prompts, protocol.prompt_ids(), PROMPTS)
    catalog = protocol.catalog
    result = score_encoded(
        samples.matrix, prompts.matrix, protocol.sample_labels, class_keys=protocol.class_keys,
        prompt_labels=protocol.prompt_labels, sample_ids=protocol.sample_ids,
        class_names=[catalog.display(k) for k in protocol.class_keys], prompt_texts=protocol.prompt_texts,
        template_ids=protocol.template_ids, config=config, metadata={"compression_pair": sample_pair},
    )
    labels = np.empty(protocol.n_samples, dtype=object)
    labels[:] = list(protocol.sample_labels)
    overlap = OverlapIndexScorer(overlap_config).score_encoded(samples.matrix, labels, catalog, seed=seed,
                                                               row_ids=protocol.sample_ids)
    return result, overlap


def endpoint_metadata(samples: EmbeddingBlock, prompts: EmbeddingBlock) -> dict[str, Any]:
    return {"dim": int(samples.matrix.shape[1]), "samples": samples.metadata(), "prompts": prompts.metadata()}


def zero_shot_protocol_summary(protocol: ZeroShotProtocol, name: str | None = None) -> dict[str, Any]:
    """Derivable from the protocol alone (the same in-process and from artifacts); keeps the prompt texts.
    ``name``: the dataset's name for reports (``vertebrae.data.declared.names``), where one is known."""
    catalog = protocol.catalog
    return {**({"name": name} if isinstance(name, str) and name else {}), **protocol.summary(),
            "prompts": [{**row.to_dict(), "display": catalog.display(row.label)} for row in protocol.prompts],
            "protocol_metadata": dict(protocol.metadata)}


def zero_shot_report(candidates: Sequence[ZeroShotCandidateResult], protocol: ZeroShotProtocol, *, benchmark: str,
                     config: ZeroShotConfig, overlap_config: OverlapScoringConfig, seed: int,
                     protocol_fingerprint: str, dataset_name: str | None = None) -> ZeroShotBenchmarkResult:
    check_unique_names([c.name for c in candidates], benchmark)
    for c in candidates:
        if c.zero_shot.config != config:
            raise ValidationError(f"benchmark {benchmark!r}: candidate {c.name!r} was scored under other zero-shot settings")
    return ZeroShotBenchmarkResult(
        list(candidates), zero_shot_protocol_summary(protocol, dataset_name),
        {"benchmark": benchmark, "protocol": "zero-shot", "protocol_fingerprint": protocol_fingerprint,
         "primary_metric": config.primary_metric, "similarity": config.similarity, "zero_shot": config.to_dict(),
         "overlap": overlap_config.to_dict(), "seed": seed, "vertebrae_version": __version__, "numpy": installed_version("numpy")},
    )


def candidate(name: str, result: ZeroShotResult, overlap: OverlapScoreResult, endpoints: Mapping[str, Any],
              provenance: Mapping[str, Any], compression: Mapping[str, Any] | None,
              metadata: Mapping[str, Any]) -> ZeroShotCandidateResult:
    return ZeroShotCandidateResult(name, result, overlap, {**endpoints, **provenance},
                                   None if compression is None else dict(compression), dict(metadata))
