"""The retrieval protocol's jobs: write the relevance protocol, compress a query/gallery pair, score, report.

The endpoint jobs (fit on the gallery, embed a shard, merge) are the shared ones of ``vertebrae.stages.jobs``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from vertebrae.compression import EmbeddingCompressionConfig
from vertebrae.core.artifacts import read_json_artifact, read_json_document, write_embeddings, write_json_artifact
from vertebrae.core.errors import ArtifactError, ValidationError
from vertebrae.core.phases import Phases
from vertebrae.core.provenance import software
from vertebrae.core.throughput import COSTS_KEY, KEY as THROUGHPUT, PAYLOAD_KEY as THROUGHPUT_PAYLOAD, costs_of, score_costs
from vertebrae.core.throughput import carried as carried_throughput
from vertebrae.data.relevance import RetrievalProtocol
from vertebrae.data.declared.retrieval import load_retrieval_source, retrieval_identity
from vertebrae.results.retrieval import RetrievalCandidateResult
from vertebrae.scoring.retrieval import RetrievalConfig, RetrievalScore
from vertebrae.stages.jobs import check_score_count, read_block
from vertebrae.stages.plan import BASE_DIR, load_plan
from vertebrae.stages.retrieval import (compress_retrieval_pair, endpoint_metadata, retrieval_protocol_recipe,
                                        retrieval_protocol_summary, retrieval_report, score_retrieval)


def run_write_relevance(plan: str | Path, output: str | Path) -> None:
    """``vertebrae write-retrieval-relevance``: query and gallery ids, relevance and exclusions, checked against the plan."""
    spec = load_plan(plan, "retrieval-protocol")
    data = load_retrieval_source(spec["dataset"]["source"], base_dir=BASE_DIR, where=f"{spec['where']}.source")
    dataset = data.to_dataset(retrieval_identity(spec["dataset"], base_dir=BASE_DIR, where=spec["where"]),
                              exclude_same_id=spec["dataset"]["exclude_same_id"])
    if retrieval_protocol_recipe(dataset.identity_key(), dataset.exclude_same_id) != spec["recipe"]:
        raise ValidationError(f"{spec['where']}: the retrieval dataset no longer matches the plan; re-plan")
    write_json_artifact(output, "protocol", dataset.protocol_payload(), fingerprint=spec["fingerprint"], recipe=spec["recipe"])


def _read_protocol(ref: Mapping[str, str], path: str | Path) -> RetrievalProtocol:
    payload = read_json_artifact(path, "protocol", fingerprint=ref["fingerprint"])
    try:
        return RetrievalProtocol.from_payload(payload)
    except ValueError as exc:
        raise ArtifactError(f"{path}: invalid retrieval protocol: {exc}") from None


def run_compress(plan: str | Path, queries: str | Path, gallery: str | Path, query_output: str | Path,
                 gallery_output: str | Path) -> None:
    """``vertebrae compress-retrieval``: fit on the gallery, apply the same transform to the queries."""
    spec = load_plan(plan, "compress-retrieval")
    q, q_meta = read_block(queries, spec["query"]["fingerprint"])
    g, g_meta = read_block(gallery, spec["gallery"]["fingerprint"])
    q_c, g_c, metadata = compress_retrieval_pair(q, g, EmbeddingCompressionConfig.from_dict(spec["compression"]))
    for block, output, side, source in ((q_c, query_output, "query", q_meta), (g_c, gallery_output, "gallery", g_meta)):
        write_embeddings(output, block.matrix, list(block.row_ids), fingerprint=f"{spec['fingerprint']}/{side}",
                         recipe=spec["recipe"], metadata={"compression": metadata, **carried_throughput(source)})


def run_score(plan: str | Path, queries: str | Path, gallery: str | Path, protocol: str | Path, output: str | Path) -> None:
    """``vertebrae score-retrieval``: exact ranking of one candidate's queries against its gallery."""
    phases = Phases()
    spec = load_plan(plan, "score-retrieval")
    with phases("read"):
        q, q_meta = read_block(queries, spec["query"]["fingerprint"])
        g, g_meta = read_block(gallery, spec["gallery"]["fingerprint"])
        retrieval_protocol = _read_protocol(spec["protocol"], protocol)
    config = RetrievalConfig.from_dict(spec["retrieval"])
    with phases("kernel"):
        score = score_retrieval(q, g, retrieval_protocol, config, device=spec.get("device", "cpu"))
    payload = {"score": score.to_dict(), "endpoints": endpoint_metadata(q, g), "compression_metadata": q_meta.get("compression"),
               THROUGHPUT_PAYLOAD: [q_meta.get(THROUGHPUT), g_meta.get(THROUGHPUT)]}
    costs = score_costs(payload[THROUGHPUT_PAYLOAD])  # the embed jobs' peak, this job's seconds
    with phases("write"):
        write_json_artifact(output, "score", payload, fingerprint=spec["fingerprint"], recipe=spec["recipe"],
                            metadata={COSTS_KEY: costs})
    phases.log()


def load_report(plan: str | Path, protocol: str | Path, scores: Sequence[str | Path]):
    """The ranked retrieval report of the planned candidates' score artifacts."""
    spec = load_plan(plan, "retrieval-report")
    config = RetrievalConfig.from_dict(spec["retrieval"])
    check_score_count(plan, spec, scores)
    candidates = []
    for candidate, path in zip(spec["candidates"], scores):
        manifest, payload = read_json_document(path, "score", fingerprint=candidate["score"]["fingerprint"])
        score = RetrievalScore.from_dict(payload["score"], expected_config=config)
        candidates.append(RetrievalCandidateResult(
            candidate["name"], score,
            {**payload["endpoints"], "query_fingerprint": candidate["query"], "gallery_fingerprint": candidate["gallery"],
             "extractor": candidate["extractor"]},
            payload.get("compression_metadata"), {"score_fingerprint": candidate["score"]["fingerprint"],
                                                  THROUGHPUT_PAYLOAD: payload.get(THROUGHPUT_PAYLOAD),
                                                  COSTS_KEY: costs_of(manifest)},
        ))
    retrieval_protocol = _read_protocol(spec["protocol"], protocol)
    return retrieval_report(candidates, retrieval_protocol, benchmark=spec["benchmark"], config=config,
                            dataset_summary=retrieval_protocol_summary(retrieval_protocol, spec["identity"],
                                                                       spec.get("dataset_name")))


def run_report(plan: str | Path, protocol: str | Path, scores: Sequence[str | Path], json_output: str | Path,
               markdown_output: str | Path) -> None:
    """``vertebrae retrieval-from-artifacts``: the report of ``load_report`` with the default paired comparison."""
    report = load_report(plan, protocol, scores).with_comparison().with_costs()  # no records: times unknown
    report = report.with_software(software())  # the version (and git revision) that wrote it
    report.save_json(json_output)
    report.save_markdown(markdown_output)


__all__ = ["load_report", "run_compress", "run_report", "run_score", "run_write_relevance"]
