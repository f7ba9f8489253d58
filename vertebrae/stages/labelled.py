"""Labelled-protocol stages: write the protocol (row ids, targets, groups), score, report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from vertebrae import __version__
from vertebrae.core.errors import ArtifactError, ValidationError
from vertebrae.core.fingerprint import SCHEMAS
from vertebrae.core.labels import describe_key
from vertebrae.data.targets import Targets
from vertebrae.data.labelled import BenchmarkDataset
from vertebrae.results import BenchmarkResult, ExtractorResult
from vertebrae.scoring.overlap import OverlapIndexScorer, OverlapScoringConfig
from vertebrae.stages.common import EmbeddingBlock


@dataclass(frozen=True)
class LabelledProtocol:
    """The targets every candidate is scored against, in row order, with optional independence groups."""

    row_ids: tuple[str, ...]
    targets: Targets
    dataset_summary: dict[str, Any]
    groups: tuple[str, ...] | None = None

    def to_payload(self) -> dict[str, Any]:
        return {
            "row_ids": list(self.row_ids),
            "targets": self.targets.to_payload(),
            "groups": None if self.groups is None else list(self.groups),
            "dataset_summary": self.dataset_summary,
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any], *, source: str = "protocol") -> LabelledProtocol:
        try:
            targets = Targets.from_payload(payload["targets"])
        except (KeyError, ValueError) as exc:
            raise ArtifactError(f"{source}: invalid targets: {exc}") from None
        groups = payload.get("groups")
        if targets.n_rows != len(payload["row_ids"]) or (groups is not None and len(groups) != targets.n_rows):
            raise ArtifactError(f"{source}: targets, groups and row ids have different lengths")
        return cls(tuple(payload["row_ids"]), targets, dict(payload["dataset_summary"]), None if groups is None else tuple(groups))


def protocol_recipe(identity_key: str, target_declaration: Mapping[str, Any]) -> dict[str, Any]:
    """What determines the targets: the dataset identity and how its labels are read (type, names)."""
    return {"dataset": identity_key, "targets": dict(target_declaration)}


def build_protocol(dataset: BenchmarkDataset) -> LabelledProtocol:
    return LabelledProtocol(dataset.row_ids, dataset.targets, dataset.summary(), dataset.groups)


def score_recipe(embedding_fp: str, protocol_fp: str, scoring: OverlapScoringConfig, seed: int) -> dict[str, Any]:
    """What determines a score: embeddings, targets, scoring config, seed and the backend's version."""
    return {
        "embedding": embedding_fp,
        "protocol": protocol_fp,
        "scoring": scoring.to_dict(),
        "seed": int(seed),
        "backend": {"overlapindex": version("overlapindex"), "schema": SCHEMAS["score"]},
    }


def score_embeddings(
    block: EmbeddingBlock, protocol: LabelledProtocol, scoring: OverlapScoringConfig, *, seed: int, endpoint: str = "samples"
) -> dict[str, Any]:
    """Score one candidate's merged embeddings; returns the score payload (overlap + embedding metadata)."""
    if block.row_ids != protocol.row_ids:
        if len(block.row_ids) != len(protocol.row_ids):
            raise ValidationError(
                f"endpoint {endpoint!r}: embeddings have {len(block.row_ids)} rows, the protocol has {len(protocol.row_ids)}"
            )
        i = next(i for i, (a, b) in enumerate(zip(block.row_ids, protocol.row_ids)) if a != b)
        raise ValidationError(f"endpoint {endpoint!r}: embedding row {i} is {describe_key(block.row_ids[i])}, "
                              f"protocol row is {describe_key(protocol.row_ids[i])}")
    overlap = OverlapIndexScorer(scoring).score_targets(block.matrix, protocol.targets, seed=seed, row_ids=block.row_ids)
    return {"overlap": overlap.to_dict(), "embedding_metadata": block.metadata()}


def candidate_result(name: str, score_payload: Mapping[str, Any], *, embedding_metadata: Mapping[str, Any], metadata: Mapping[str, Any]) -> ExtractorResult:
    """An ExtractorResult from a score payload plus the candidate's name and provenance."""
    from vertebrae.scoring.overlap import OverlapScoreResult

    return ExtractorResult(
        name=name,
        overlap=OverlapScoreResult.from_dict(score_payload["overlap"]),
        embedding_metadata={**score_payload["embedding_metadata"], **embedding_metadata},
        metadata=dict(metadata),
    )


def build_report(
    candidates: Sequence[ExtractorResult], protocol: LabelledProtocol, *, benchmark: str, seed: int, scoring: OverlapScoringConfig
) -> BenchmarkResult:
    names = [c.name for c in candidates]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValidationError(f"benchmark {benchmark!r}: duplicate extractor names {duplicates}")
    return BenchmarkResult(
        extractor_results=list(candidates),
        dataset_summary=protocol.dataset_summary,
        metadata={"benchmark": benchmark, "protocol": "labelled", "seed": int(seed), "scoring": scoring.to_dict(),
                  "vertebrae_version": __version__},
    )
