"""The labelled protocol's jobs: write the protocol, compress, score, report (one function per CLI subcommand)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from vertebrae.compression import EmbeddingCompressionConfig
from vertebrae.core.artifacts import read_json_artifact, read_json_document, write_embeddings, write_json_artifact
from vertebrae.core.errors import ValidationError
from vertebrae.core.throughput import COSTS_KEY, KEY as THROUGHPUT, PAYLOAD_KEY as THROUGHPUT_PAYLOAD, costs_of, score_costs
from vertebrae.core.throughput import carried as carried_throughput
from vertebrae.data.declared.labelled import load_declared_dataset
from vertebrae.data.labelled import LabelledProtocol
from vertebrae.reports.steps import with_step_definitions
from vertebrae.data.target_views import declared_view_dataset
from vertebrae.scoring.metrics import CallableMetric
from vertebrae.stages.jobs import check_score_count, read_block
from vertebrae.stages.labelled import (ScoringPlan, build_protocol, build_report, candidate_result, compress_block,
                                       protocol_recipe, score_embeddings)
from vertebrae.stages.plan import BASE_DIR, load_plan


def run_write_protocol(plan: str | Path, output: str | Path) -> None:
    """``vertebrae write-protocol``: row ids, targets and groups of the declared dataset, checked against the plan."""
    spec = load_plan(plan, "protocol")
    if spec.get("view") is not None:  # a target view or hierarchy level (vertebrae.planning.views)
        dataset = declared_view_dataset(spec["dataset"], spec["view"], base_dir=BASE_DIR, where=spec["benchmark_where"])
    else:
        dataset = load_declared_dataset(spec["dataset"], base_dir=BASE_DIR, where=spec["where"])
    if dataset.identity_key() != spec["identity"]:
        raise ValidationError(f"{spec['where']}: dataset identity is now {dataset.identity_key()!r}, planned as {spec['identity']!r}; re-plan")
    if protocol_recipe(dataset.identity_key(), dataset.target_declaration) != spec["recipe"]:
        raise ValidationError(f"{spec['where']}: the targets no longer match the plan; re-plan")
    write_json_artifact(output, "protocol", build_protocol(dataset).to_payload(), fingerprint=spec["fingerprint"], recipe=spec["recipe"])


def run_compress(plan: str | Path, embeddings: str | Path, output: str | Path) -> None:
    """``vertebrae compress``: fit the label-free compressor on the samples and apply it to them."""
    spec = load_plan(plan, "compress")
    raw, raw_meta = read_block(embeddings, spec["embedding"]["fingerprint"])
    block, metadata = compress_block(raw, EmbeddingCompressionConfig.from_dict(spec["compression"]))
    write_embeddings(output, block.matrix, list(block.row_ids), fingerprint=spec["fingerprint"], recipe=spec["recipe"],
                     metadata={"compression": metadata, **carried_throughput(raw_meta)})


def _read_protocol(ref: Mapping[str, str], path: str | Path) -> LabelledProtocol:
    payload = read_json_artifact(path, "protocol", fingerprint=ref["fingerprint"])
    return LabelledProtocol.from_payload(payload, source=str(path))


def run_score(plan: str | Path, embeddings: str | Path, protocol: str | Path, output: str | Path, *,
              extra_metrics: Sequence[str] = ()) -> None:
    """``vertebrae score``: one candidate; ``extra_metrics`` (``module:function`` paths) add ad-hoc callable metrics."""
    spec = load_plan(plan, "score")
    block, metadata = read_block(embeddings, spec["embedding"]["fingerprint"])
    targets = _read_protocol(spec["protocol"], protocol)
    scoring_plan = ScoringPlan.from_dict(spec["plan"], spec["target_type"])
    if extra_metrics:
        scoring_plan = replace(scoring_plan, metrics=scoring_plan.metrics + tuple(CallableMetric.from_path(p) for p in extra_metrics))
    payload = score_embeddings(block, targets, scoring_plan)
    payload["compression_metadata"] = metadata.get("compression")
    payload[THROUGHPUT_PAYLOAD] = [metadata.get(THROUGHPUT)]
    recipe = spec["recipe"] if not extra_metrics else {**spec["recipe"], "extra_metrics": list(extra_metrics)}
    write_json_artifact(output, "score", payload, fingerprint=spec["fingerprint"], recipe=recipe,
                        metadata={COSTS_KEY: score_costs(payload[THROUGHPUT_PAYLOAD])})  # embed peak, own seconds


def load_report(plan: str | Path, protocol: str | Path, scores: Sequence[str | Path]):
    """The ranked labelled report (a BenchmarkResult) of the planned candidates' score artifacts."""
    spec = load_plan(plan, "report")
    candidates = spec["candidates"]
    check_score_count(plan, spec, scores)
    scoring_plan = ScoringPlan.from_dict(spec["plan"], spec["target_type"])
    results = []
    for candidate, path in zip(candidates, scores):
        manifest, payload = read_json_document(path, "score", fingerprint=candidate["score"]["fingerprint"])
        provenance = {"fingerprint": candidate["scored_embedding"], "extractor": candidate["extractor"],
                      "cache_status": "disabled", "cache_eligible": True}
        if candidate["compression"] is not None:
            provenance["source_fingerprint"] = candidate["embedding"]
        results.append(candidate_result(
            candidate["name"], payload, plan=scoring_plan, embedding_metadata=provenance,
            compression_metadata=payload.get("compression_metadata"),
            metadata={"score_fingerprint": candidate["score"]["fingerprint"],
                      THROUGHPUT_PAYLOAD: payload.get(THROUGHPUT_PAYLOAD),  # with_costs turns them into the cost
                      COSTS_KEY: costs_of(manifest)},
        ))
    report = build_report(results, _read_protocol(spec["protocol"], protocol), benchmark=spec["benchmark"], plan=scoring_plan)
    view = spec.get("target_view")  # a target view's report (planning.views): its role sets the ranking direction
    if view is not None:
        report = report.with_view(view["name"], view["role"])
    return with_step_definitions(report, spec.get("checkpoints"))  # checkpoint sweeps' step series (reports.steps)


__all__ = ["load_report", "run_compress", "run_score", "run_write_protocol"]
