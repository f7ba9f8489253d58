"""File-level stage runners: read verified artifacts, call the stage functions, write artifacts atomically.

Each ``run_*`` is what one CLI subcommand (and so one workflow rule) does. Job specs come from
``vertebrae.workflow.plan`` and are written by ``run_plan`` (``vertebrae.stages.plan``, re-exported here) after
re-deriving their fingerprints.
"""

from __future__ import annotations

from dataclasses import replace
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vertebrae.core.artifacts import read_embeddings, read_json_artifact, write_embeddings, write_json_artifact
from vertebrae.core.errors import ArtifactError, ValidationError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.data.declared import load_declared_dataset, load_declared_rows
from vertebrae.compression import EmbeddingCompressionConfig
from vertebrae.data.declared import identity_from_decl
from vertebrae.core.arrays import encode_row_ids
from vertebrae.data.retrieval import RetrievalProtocol
from vertebrae.data.retrieval_sources import load_retrieval_source
from vertebrae.results.retrieval import RetrievalCandidateResult
from vertebrae.scoring.retrieval import RetrievalConfig, RetrievalScore
from vertebrae.stages.retrieval import (
    compress_retrieval_pair,
    endpoint_metadata,
    retrieval_protocol_recipe,
    retrieval_protocol_summary,
    retrieval_report,
    score_retrieval,
)
from vertebrae.scoring.metrics import CallableMetric
from vertebrae.stages.common import EmbeddingBlock, embed_rows, merge_blocks
from vertebrae.stages.plan import BASE_DIR, KIND_OF_STAGE, ZERO_SHOT_STAGES, check_spec, run_plan, spec_extractor
from vertebrae.stages.labelled import (
    ScoringPlan,
    build_protocol,
    build_report,
    candidate_result,
    compress_block,
    protocol_recipe,
    score_embeddings,
)
from vertebrae.data.labelled import LabelledProtocol

def _retrieval_source(spec: Mapping[str, Any]):
    return load_retrieval_source(spec["dataset"]["source"], base_dir=BASE_DIR, where=f"{spec['where']}.source")


def load_plan(path: str | Path, stage: str) -> dict[str, Any]:
    spec = read_json_artifact(path, "plan", fingerprint=None)
    if spec.get("stage") != stage:
        raise ArtifactError(f"{path}: a {spec.get('stage')!r} job spec where a {stage!r} one was expected")
    if Path(path).stem != spec["fingerprint"]:
        raise ArtifactError(f"{path}: holds the job spec {spec['fingerprint']}, not {Path(path).stem}")
    return spec


def run_fit(plan: str | Path, output: str | Path) -> None:
    spec = load_plan(plan, "fit")
    if spec.get("protocol") == "retrieval":
        inputs = _retrieval_source(spec).gallery
    else:
        inputs = load_declared_dataset(spec["dataset"], base_dir=BASE_DIR, where=spec["where"]).inputs
    extractor = spec_extractor(spec)
    extractor.fit(inputs)
    write_json_artifact(output, "fitted-extractor", extractor.fitted_state(), fingerprint=spec["fingerprint"], recipe=spec["recipe"])


def shard_fingerprint(spec: Mapping[str, Any], index: int) -> str:
    return fingerprint("embedding", {"parent": spec["fingerprint"], "rows": spec["shards"][index]})


def run_embed_shard(plan: str | Path, shard_index: int, output: str | Path, *, side: str | None = None) -> None:
    """One shard of an endpoint; ``side`` (query | gallery) must match the plan of a retrieval endpoint."""
    spec = load_plan(plan, "embed")
    if side is not None and spec.get("side") != side:
        raise ValidationError(f"{plan}: the plan embeds side {spec.get('side')!r}, not {side!r}")
    if not 0 <= shard_index < len(spec["shards"]):
        raise ValidationError(f"{plan}: shard index {shard_index} is outside 0..{len(spec['shards']) - 1}")
    start, stop = spec["shards"][shard_index]
    extractor = spec_extractor(spec)
    if spec["fit"] is not None:
        state = read_json_artifact(spec["fit"]["path"], "fitted-extractor", fingerprint=spec["fit"]["fingerprint"])
        extractor.load_fitted(state, source=spec["fit"]["path"])
    if spec.get("protocol") == "retrieval":
        data = _retrieval_source(spec)
        rows, ids = (data.queries, data.query_ids) if spec["side"] == "query" else (data.gallery, data.gallery_ids)
        inputs, row_ids = rows[start:stop], encode_row_ids(list(ids[start:stop]), stop - start, what=spec["where"])
    else:
        inputs, row_ids = load_declared_rows(spec["dataset"], base_dir=BASE_DIR, where=spec["where"], start=start, stop=stop)
    block = embed_rows(extractor, inputs, row_ids, batch_size=spec["batch_size"], endpoint=spec["endpoint"], branch=spec.get("branch"))
    write_embeddings(output, block.matrix, list(block.row_ids), fingerprint=shard_fingerprint(spec, shard_index),
                     recipe={"parent": spec["fingerprint"], "rows": [start, stop]})


def run_merge(plan: str | Path, shards: Sequence[str | Path], output: str | Path) -> None:
    merge_shard_files(plan, load_plan(plan, "embed"), shards, output, endpoint="endpoint")


def merge_shard_files(plan: str | Path, spec: Mapping[str, Any], shards: Sequence[str | Path], output: str | Path,
                      *, endpoint: str) -> None:
    """Verify each shard against its planned fingerprint, merge in row order and write the endpoint artifact;
    ``endpoint`` names the spec key holding the endpoint name (errors cite it)."""
    if len(shards) != len(spec["shards"]):
        raise ValidationError(f"{plan}: {len(shards)} shard files given, the plan has {len(spec['shards'])}")
    blocks = []
    for i, path in enumerate(shards):
        artifact = read_embeddings(path, fingerprint=shard_fingerprint(spec, i))
        blocks.append(EmbeddingBlock(artifact.matrix, artifact.row_ids))
    block = merge_blocks(blocks, [rid for b in blocks for rid in b.row_ids], endpoint=spec[endpoint])
    if block.matrix.shape[0] != spec["n_rows"]:
        raise ValidationError(f"{plan}: merged shards hold {block.matrix.shape[0]} rows, expected {spec['n_rows']}")
    write_embeddings(output, block.matrix, list(block.row_ids), fingerprint=spec["fingerprint"], recipe=spec["recipe"])


def run_write_protocol(plan: str | Path, output: str | Path) -> None:
    spec = load_plan(plan, "protocol")
    dataset = load_declared_dataset(spec["dataset"], base_dir=BASE_DIR, where=spec["where"])
    if dataset.identity_key() != spec["identity"]:
        raise ValidationError(f"{spec['where']}: dataset identity is now {dataset.identity_key()!r}, planned as {spec['identity']!r}; re-plan")
    if protocol_recipe(dataset.identity_key(), dataset.target_declaration) != spec["recipe"]:
        raise ValidationError(f"{spec['where']}: the targets no longer match the plan; re-plan")
    write_json_artifact(output, "protocol", build_protocol(dataset).to_payload(), fingerprint=spec["fingerprint"], recipe=spec["recipe"])


def run_compress(plan: str | Path, embeddings: str | Path, output: str | Path) -> None:
    spec = load_plan(plan, "compress")
    artifact = read_embeddings(embeddings, fingerprint=spec["embedding"]["fingerprint"])
    block, metadata = compress_block(EmbeddingBlock(artifact.matrix, artifact.row_ids), EmbeddingCompressionConfig.from_dict(spec["compression"]))
    write_embeddings(output, block.matrix, list(block.row_ids), fingerprint=spec["fingerprint"], recipe=spec["recipe"],
                     metadata={"compression": metadata})


def _read_protocol(ref: Mapping[str, str], path: str | Path | None = None) -> LabelledProtocol:
    path = path or ref["path"]
    payload = read_json_artifact(path, "protocol", fingerprint=ref["fingerprint"])
    return LabelledProtocol.from_payload(payload, source=str(path))


def run_score(plan: str | Path, embeddings: str | Path, protocol: str | Path, output: str | Path, *, extra_metrics: Sequence[str] = ()) -> None:
    """Score one candidate; ``extra_metrics`` (``module:function`` paths) add ad-hoc callable metrics."""
    spec = load_plan(plan, "score")
    artifact = read_embeddings(embeddings, fingerprint=spec["embedding"]["fingerprint"])
    targets = _read_protocol(spec["protocol"], protocol)
    scoring_plan = ScoringPlan.from_dict(spec["plan"], spec["target_type"])
    if extra_metrics:
        scoring_plan = replace(scoring_plan, metrics=scoring_plan.metrics + tuple(CallableMetric.from_path(p) for p in extra_metrics))
    payload = score_embeddings(EmbeddingBlock(artifact.matrix, artifact.row_ids), targets, scoring_plan)
    payload["compression_metadata"] = artifact.manifest.get("metadata", {}).get("compression")
    recipe = spec["recipe"] if not extra_metrics else {**spec["recipe"], "extra_metrics": list(extra_metrics)}
    write_json_artifact(output, "score", payload, fingerprint=spec["fingerprint"], recipe=recipe)


def run_report(plan: str | Path, protocol: str | Path, scores: Sequence[str | Path], json_output: str | Path, markdown_output: str | Path) -> None:
    spec = load_plan(plan, "report")
    candidates = spec["candidates"]
    if len(scores) != len(candidates):
        raise ValidationError(f"{plan}: {len(scores)} score files given, the plan has {len(candidates)} candidates")
    scoring_plan = ScoringPlan.from_dict(spec["plan"], spec["target_type"])
    results = []
    for candidate, path in zip(candidates, scores):
        payload = read_json_artifact(path, "score", fingerprint=candidate["score"]["fingerprint"])
        provenance = {"fingerprint": candidate["scored_embedding"], "extractor": candidate["extractor"],
                      "cache_status": "disabled", "cache_eligible": True}
        if candidate["compression"] is not None:
            provenance["source_fingerprint"] = candidate["embedding"]
        results.append(candidate_result(
            candidate["name"], payload, plan=scoring_plan, embedding_metadata=provenance,
            compression_metadata=payload.get("compression_metadata"),
            metadata={"score_fingerprint": candidate["score"]["fingerprint"]},
        ))
    report = build_report(results, _read_protocol(spec["protocol"], protocol), benchmark=spec["benchmark"], plan=scoring_plan)
    report.save_json(json_output)
    report.save_markdown(markdown_output)


def _retrieval_dataset(spec: Mapping[str, Any]):
    data = _retrieval_source(spec)
    return data.to_dataset(identity_from_decl(spec["dataset"]["identity"], where=f"{spec['where']}.identity"),
                           exclude_same_id=spec["dataset"]["exclude_same_id"])


def run_write_retrieval_relevance(plan: str | Path, output: str | Path) -> None:
    spec = load_plan(plan, "retrieval-protocol")
    dataset = _retrieval_dataset(spec)
    if retrieval_protocol_recipe(dataset.identity_key(), dataset.exclude_same_id) != spec["recipe"]:
        raise ValidationError(f"{spec['where']}: the retrieval dataset no longer matches the plan; re-plan")
    write_json_artifact(output, "protocol", dataset.protocol_payload(), fingerprint=spec["fingerprint"], recipe=spec["recipe"])


def _read_retrieval_protocol(ref: Mapping[str, str], path: str | Path) -> RetrievalProtocol:
    payload = read_json_artifact(path, "protocol", fingerprint=ref["fingerprint"])
    try:
        return RetrievalProtocol.from_payload(payload)
    except ValueError as exc:
        raise ArtifactError(f"{path}: invalid retrieval protocol: {exc}") from None


def _read_block(path: str | Path, fp: str) -> EmbeddingBlock:
    artifact = read_embeddings(path, fingerprint=fp)
    return EmbeddingBlock(artifact.matrix, artifact.row_ids), artifact.manifest.get("metadata", {})


def run_compress_retrieval(plan: str | Path, queries: str | Path, gallery: str | Path, query_output: str | Path,
                           gallery_output: str | Path) -> None:
    spec = load_plan(plan, "compress-retrieval")
    q, _ = _read_block(queries, spec["query"]["fingerprint"])
    g, _ = _read_block(gallery, spec["gallery"]["fingerprint"])
    q_c, g_c, metadata = compress_retrieval_pair(q, g, EmbeddingCompressionConfig.from_dict(spec["compression"]))
    for block, output, side in ((q_c, query_output, "query"), (g_c, gallery_output, "gallery")):
        write_embeddings(output, block.matrix, list(block.row_ids), fingerprint=f"{spec['fingerprint']}/{side}",
                         recipe=spec["recipe"], metadata={"compression": metadata})


def run_score_retrieval(plan: str | Path, queries: str | Path, gallery: str | Path, protocol: str | Path, output: str | Path) -> None:
    spec = load_plan(plan, "score-retrieval")
    q, q_meta = _read_block(queries, spec["query"]["fingerprint"])
    g, _ = _read_block(gallery, spec["gallery"]["fingerprint"])
    config = RetrievalConfig.from_dict(spec["retrieval"])
    score = score_retrieval(q, g, _read_retrieval_protocol(spec["protocol"], protocol), config)
    payload = {"score": score.to_dict(), "endpoints": endpoint_metadata(q, g), "compression_metadata": q_meta.get("compression")}
    write_json_artifact(output, "score", payload, fingerprint=spec["fingerprint"], recipe=spec["recipe"])


def run_retrieval_report(plan: str | Path, protocol: str | Path, scores: Sequence[str | Path], json_output: str | Path,
                         markdown_output: str | Path) -> None:
    """A ranked retrieval report from score artifacts alone (``vertebrae retrieval-from-artifacts``)."""
    spec = load_plan(plan, "retrieval-report")
    config = RetrievalConfig.from_dict(spec["retrieval"])
    if len(scores) != len(spec["candidates"]):
        raise ValidationError(f"{plan}: {len(scores)} score files given, the plan has {len(spec['candidates'])} candidates")
    candidates = []
    for candidate, path in zip(spec["candidates"], scores):
        payload = read_json_artifact(path, "score", fingerprint=candidate["score"]["fingerprint"])
        score = RetrievalScore.from_dict(payload["score"], expected_config=config)
        candidates.append(RetrievalCandidateResult(
            candidate["name"], score,
            {**payload["endpoints"], "query_fingerprint": candidate["query"], "gallery_fingerprint": candidate["gallery"],
             "extractor": candidate["extractor"]},
            payload.get("compression_metadata"), {"score_fingerprint": candidate["score"]["fingerprint"]},
        ))
    retrieval_protocol = _read_retrieval_protocol(spec["protocol"], protocol)
    report = retrieval_report(candidates, retrieval_protocol, benchmark=spec["benchmark"], config=config,
                              dataset_summary=retrieval_protocol_summary(retrieval_protocol, spec["identity"]))
    report.save_json(json_output)
    report.save_markdown(markdown_output)


__all__ = ["KIND_OF_STAGE", "ZERO_SHOT_STAGES", "check_spec",
           "run_plan", "run_fit", "run_embed_shard", "run_merge", "run_compress", "run_write_protocol", "run_score", "run_report",
           "run_write_retrieval_relevance", "run_compress_retrieval", "run_score_retrieval", "run_retrieval_report"]
