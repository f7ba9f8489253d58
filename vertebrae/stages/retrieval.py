"""Retrieval-protocol stages: protocol recipe, paired compression (fitted on the gallery), exact scoring, report.

The gallery is the reference endpoint: a learning extractor is fitted on it and paired compression is fitted on
it, then applied unchanged to the queries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from vertebrae import __version__
from vertebrae.compression import EmbeddingCompressionConfig, compress_pair
from vertebrae.core.errors import ValidationError
from vertebrae.core.fingerprint import SCHEMAS
from vertebrae.core.provenance import installed_version
from vertebrae.data.relevance import RetrievalProtocol
from vertebrae.results.retrieval import RetrievalBenchmarkResult, RetrievalCandidateResult
from vertebrae.scoring.degenerate import detect_collapse, warn_collapse
from vertebrae.scoring.retrieval import RetrievalConfig, RetrievalScore, RetrievalScorer
from vertebrae.stages.common import EmbeddingBlock, check_row_ids, check_unique_names

QUERY, GALLERY = "query", "gallery"
FIT_ENDPOINT = GALLERY


def retrieval_branch(extractor: Any, side: str, chosen: str | None = None, *, where: str = "retrieval") -> str | None:
    """The branch that encodes one endpoint (``side``: query or gallery).

    An extractor without branches encodes both endpoints with its one transform (None). Otherwise ``chosen``
    (``query_branch`` / ``gallery_branch``; a ValidationError naming ``where`` when the extractor has no such
    branch), else the branch named like the side (explicit query / gallery encoders), else None: the extractor's
    default branch for both endpoints (same-modality retrieval, e.g. images with an image-text model).
    """
    branches = tuple(getattr(extractor, "branches", ()) or ())
    if not branches:
        return None
    if chosen is not None:
        if chosen not in branches:
            raise ValidationError(f"{where}.{side}_branch: extractor {extractor.name!r} has branches {list(branches)}, "
                                  f"not {chosen!r}")
        return chosen
    return side if side in branches else None


def retrieval_protocol_recipe(identity_key: str, exclude_same_id: bool) -> dict[str, Any]:
    """What determines the relevance protocol: the dataset identity (relevance is part of it) and exclusions."""
    return {"dataset": identity_key, "protocol": "retrieval", "exclude_same_id": bool(exclude_same_id)}


def retrieval_compression_recipe(query_fp: str, gallery_fp: str, config: EmbeddingCompressionConfig) -> dict[str, Any]:
    return {"query": query_fp, "gallery": gallery_fp, "fit_endpoint": FIT_ENDPOINT, "compression": config.to_dict()}


def retrieval_score_recipe(query_fp: str, gallery_fp: str, protocol_fp: str, config: RetrievalConfig) -> dict[str, Any]:
    return {"query": query_fp, "gallery": gallery_fp, "protocol": protocol_fp, "retrieval": config.to_dict(),
            "backend": {"schema": SCHEMAS["score"]}}


def compress_retrieval_pair(queries: EmbeddingBlock, gallery: EmbeddingBlock, config: EmbeddingCompressionConfig):
    """Fit on the gallery, apply the same transform to the queries; returns (queries, gallery, metadata)."""
    gallery_c, (queries_c,), metadata = compress_pair(gallery.matrix, [queries.matrix], config)
    return EmbeddingBlock(queries_c, queries.row_ids), EmbeddingBlock(gallery_c, gallery.row_ids), {**metadata, "fit_side": FIT_ENDPOINT}


def score_retrieval(queries: EmbeddingBlock, gallery: EmbeddingBlock, protocol: RetrievalProtocol, config: RetrievalConfig,
                    *, device: str = "cpu") -> RetrievalScore:
    """Exact scoring of one candidate's endpoints against the protocol (row ids checked first), its block products
    on ``device`` (``vertebrae.scoring.retrieval.device``: the same result on every device).

    An endpoint whose rows collapse onto one point (``vertebrae.scoring.degenerate``; compared L2-normalised for
    cosine) ranks by row order alone: the finding is recorded in the forward result's ``metadata["degenerate"]``
    with a ``degenerate-embedding`` warning, and the candidate is not ranked.
    """
    check_row_ids(queries, protocol.query_ids, QUERY)
    check_row_ids(gallery, protocol.gallery_ids, GALLERY)
    score = RetrievalScorer(config, device=device).score(queries.matrix, gallery.matrix, protocol.relevance, query_ids=protocol.query_ids,
                                          gallery_ids=protocol.gallery_ids, exclusions=protocol.exclusions)
    cosine = config.similarity == "cosine"
    findings = [f for f in (detect_collapse(block.matrix, what=f"{what} embeddings" + (" (L2-normalised)" if cosine else ""),
                                            normalize=cosine) for block, what in ((queries, "Query"), (gallery, "Gallery")))
                if f is not None]
    if not findings:
        return score
    texts = [text for f in findings for text in warn_collapse(f)]
    forward = replace(score.forward, warnings=texts + list(score.forward.warnings),
                      metadata={**score.forward.metadata, "degenerate": [f.to_dict() for f in findings]})
    return RetrievalScore(forward, score.reverse, score.primary_score)


def endpoint_metadata(queries: EmbeddingBlock, gallery: EmbeddingBlock) -> dict[str, Any]:
    return {"dim": int(gallery.matrix.shape[1]), "query": queries.metadata(), "gallery": gallery.metadata()}


def retrieval_report(
    candidates: Sequence[RetrievalCandidateResult], protocol: RetrievalProtocol, *, benchmark: str, config: RetrievalConfig,
    dataset_summary: Mapping[str, Any],
) -> RetrievalBenchmarkResult:
    check_unique_names([c.name for c in candidates], benchmark)
    return RetrievalBenchmarkResult(
        list(candidates), dict(dataset_summary),
        {"benchmark": benchmark, "protocol": "retrieval", "primary_metric": config.primary_metric,
         "similarity": config.similarity, "bidirectional": config.bidirectional, "conventions": config.conventions,
         "retrieval": config.to_dict(),
         "vertebrae_version": __version__, "numpy": installed_version("numpy")},
    )


def retrieval_protocol_summary(protocol: RetrievalProtocol, identity_key: str, name: str | None = None) -> dict[str, Any]:
    """Dataset summary derivable from the protocol alone (the same in-process and from artifacts); ``name``: the
    dataset's name for reports (``vertebrae.data.declared.names``), where one is known."""
    grades = protocol.relevance.data
    eligible = protocol.eligible_relevance()
    return {
        **({"name": name} if isinstance(name, str) and name else {}),
        "identity": identity_key,
        "n_queries": protocol.n_queries,
        "n_gallery": protocol.n_gallery,
        "n_positives": int(protocol.relevance.nnz),
        "n_eligible_positives": int(eligible.nnz),
        "n_exclusions": int(protocol.exclusions.nnz),
        "exclude_same_id": protocol.exclude_same_id,
        "grade_min": float(grades.min()) if grades.size else None,
        "grade_max": float(grades.max()) if grades.size else None,
    }
