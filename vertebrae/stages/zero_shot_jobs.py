"""The zero-shot protocol's jobs: embed a sample or prompt shard, merge, write the protocol, compress, score, report.

The write-protocol job builds the protocol from its declaration (loading the source labels) and checks it against
the planned fingerprint; every later job reads that verified artifact (``read_zero_shot_protocol``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from vertebrae.compression import EmbeddingCompressionConfig
from vertebrae.core.artifacts import read_json_artifact, read_json_document, write_embeddings, write_json_artifact
from vertebrae.core.errors import ArtifactError, ValidationError
from vertebrae.core.provenance import software
from vertebrae.core.throughput import KEY as THROUGHPUT, PAYLOAD_KEY as THROUGHPUT_PAYLOAD, BatchClock
from vertebrae.core.throughput import COSTS_KEY, carried as carried_throughput, costs_of, score_costs
from vertebrae.data.declared.labelled import load_declared_rows
from vertebrae.data.zero_shot import ZeroShotProtocol, build_zero_shot_dataset
from vertebrae.scoring.paired import ComparisonConfig
from vertebrae.scoring.overlap import OverlapScoreResult, OverlapScoringConfig
from vertebrae.scoring.zero_shot import ZeroShotConfig, ZeroShotResult
from vertebrae.stages.jobs import (
    check_score_count, merge_shard_files, planned_tar_rows, read_block, shard_rows, write_shard,
)
from vertebrae.stages.plan import BASE_DIR, load_plan, spec_extractor
from vertebrae.stages.zero_shot import (candidate, compress_prompts, endpoint_metadata, fit_sample_compression,
                                        refit_for_prompts, score_zero_shot, zero_shot_report)


def read_zero_shot_protocol(ref: Mapping[str, str], path: str | Path) -> ZeroShotProtocol:
    """The verified protocol: artifact checks, strict payload, recomputed fingerprint, manifest recipe fields."""
    payload = read_json_artifact(path, "protocol", fingerprint=ref["fingerprint"])
    try:
        protocol = ZeroShotProtocol.from_payload(payload)
    except ValueError as exc:
        raise ArtifactError(f"{path}: invalid zero-shot protocol: {exc}") from None
    if protocol.fingerprint() != ref["fingerprint"]:
        raise ArtifactError(f"{path}: the protocol payload hashes to {protocol.fingerprint()}, not {ref['fingerprint']}")
    with open(path, encoding="utf-8") as handle:  # already verified by read_json_artifact
        recipe = json.load(handle)["manifest"].get("recipe") or {}
    expected = {"zero_shot_protocol": protocol.fingerprint(), "source_dataset_identity_key": protocol.source_identity_key}
    if recipe != expected:
        raise ArtifactError(f"{path}: manifest recipe {recipe!r} does not match the protocol payload {expected!r}")
    return protocol


def run_embed_shard(plan: str | Path, side: str, shard_index: int, output: str | Path, *, protocol: str | Path | None = None) -> None:
    """``vertebrae embed-zero-shot-shard``: one shard of the samples (from the source) or of the prompts (from the
    protocol artifact ``protocol``)."""
    spec = load_plan(plan, "zero-shot-embed")
    start, stop = shard_rows(plan, spec, shard_index, side)
    planned = planned_tar_rows(spec, start, stop) if side == "samples" else None
    if planned is not None:  # a WebDataset source: only this shard's tar files are opened
        inputs, row_ids = planned
    elif side == "samples":
        inputs, row_ids = load_declared_rows(spec["dataset"], base_dir=BASE_DIR, where=spec["where"], start=start, stop=stop)
    else:
        if protocol is None:
            raise ValidationError(f"{plan}: embedding prompts needs --protocol")
        zs_protocol = read_zero_shot_protocol(spec["protocol"], protocol)
        if len(zs_protocol.prompts) != spec["n_rows"]:
            raise ValidationError(f"{protocol}: {len(zs_protocol.prompts)} prompts, the plan expected {spec['n_rows']}")
        inputs, row_ids = zs_protocol.prompt_inputs()[start:stop], zs_protocol.prompt_ids()[start:stop]
    clock = BatchClock()
    extractor = spec_extractor(spec)
    clock.loaded()
    write_shard(output, spec, shard_index, extractor, inputs, row_ids, endpoint=side, branch=spec["branch"], clock=clock)


def run_merge(plan: str | Path, shards: Sequence[str | Path], output: str | Path) -> None:
    """``vertebrae merge-zero-shot-embeddings``: one side's shards, in order, as one artifact."""
    merge_shard_files(plan, load_plan(plan, "zero-shot-embed"), shards, output, endpoint="side")


def run_write_protocol(plan: str | Path, output: str | Path) -> None:
    """``vertebrae write-zero-shot-protocol``: build the protocol from its declaration; it must give the planned
    fingerprint."""
    spec = load_plan(plan, "zero-shot-protocol")
    zs = build_zero_shot_dataset(spec["dataset"], spec["declaration"], base_dir=BASE_DIR, where=spec["where"])
    if zs.protocol_fingerprint() != spec["fingerprint"]:
        raise ValidationError(f"{spec['where']}: the dataset or prompts no longer match the plan; re-plan")
    write_json_artifact(output, "protocol", zs.protocol.to_payload(), fingerprint=spec["fingerprint"], recipe=spec["recipe"])


def run_compress(plan: str | Path, samples: str | Path, output: str | Path) -> None:
    """``vertebrae compress-zero-shot``: fit the compression on the raw samples (the prompts are compressed with the
    same fit at scoring time)."""
    spec = load_plan(plan, "compress-zero-shot")
    raw, raw_meta = read_block(samples, spec["samples"]["fingerprint"])
    _, compressed, metadata = fit_sample_compression(raw, EmbeddingCompressionConfig.from_dict(spec["compression"]))
    write_embeddings(output, compressed.matrix, list(compressed.row_ids), fingerprint=f"{spec['fingerprint']}/samples",
                     recipe=spec["recipe"], metadata={"compression": metadata, "compression_pair": spec["fingerprint"],
                                                      **carried_throughput(raw_meta)})


def run_score(plan: str | Path, samples: str | Path, prompts: str | Path, protocol: str | Path, output: str | Path, *,
              raw_samples: str | Path | None = None) -> None:
    """``vertebrae score-zero-shot``: one candidate; a compressed variant refits the sample compression on
    ``raw_samples`` (checked against the compressed samples) and applies it to the prompts."""
    spec = load_plan(plan, "score-zero-shot")
    zs_protocol = read_zero_shot_protocol(spec["protocol"], protocol)
    s_block, s_meta = read_block(samples, spec["samples"]["fingerprint"])
    p_block, p_meta = read_block(prompts, spec["prompts"]["fingerprint"])
    pair = spec["pair"]
    if pair is not None:
        if raw_samples is None:
            raise ValidationError(f"{plan}: a compressed variant needs --raw-samples to apply the sample fit to the prompts")
        if s_meta.get("compression_pair") != pair:
            raise ArtifactError(f"{samples}: compressed by pair {s_meta.get('compression_pair')!r}, expected {pair!r}")
        raw, _ = read_block(raw_samples, spec["raw_samples"]["fingerprint"])
        fitted = refit_for_prompts(raw, s_block, EmbeddingCompressionConfig.from_dict(spec["compression"]), source=str(samples))
        p_block = compress_prompts(fitted, p_block)
    result, overlap = score_zero_shot(s_block, p_block, zs_protocol, ZeroShotConfig.from_dict(spec["zero_shot"]),
                                      OverlapScoringConfig.from_dict(spec["overlap"]), spec["seed"],
                                      sample_pair=s_meta.get("compression_pair"), prompt_pair=pair)
    payload = {"zero_shot": result.to_dict(), "overlap": overlap.to_dict(), "overlap_config": spec["overlap"],
               "seed": spec["seed"], "protocol": spec["protocol"]["fingerprint"], "candidate": spec["candidate"],
               "endpoints": endpoint_metadata(s_block, p_block),
               "compression_metadata": (s_meta.get("compression") if pair is not None else None), "compression_pair": pair,
               THROUGHPUT_PAYLOAD: [s_meta.get(THROUGHPUT)]}  # the samples' cost: prompts are a fixed, one-off cost
    costs = score_costs([s_meta.get(THROUGHPUT), p_meta.get(THROUGHPUT)])  # the peak: either side's embed jobs
    write_json_artifact(output, "score", payload, fingerprint=spec["fingerprint"], recipe=spec["recipe"],
                        metadata={COSTS_KEY: costs})


def load_report(plan: str | Path | None, protocol: str | Path, scores: Sequence[str | Path], *,
                benchmark: str | None = None):
    """A ranked zero-shot report from score artifacts that share one protocol and one evaluation setting (zero-shot
    config, overlap config, seed); with a ``plan``, the planned candidates (names, score fingerprints) are enforced,
    without one the names come from the score artifacts and the report is called ``benchmark``."""
    if not scores:
        raise ValidationError("zero-shot report: give at least one --score-key")
    spec = None
    if plan is not None:
        spec = load_plan(plan, "zero-shot-report")
        check_score_count(plan, spec, scores)
    payloads, costs = [], []
    for i, path in enumerate(scores):
        expected = None if spec is None else spec["candidates"][i]["score"]["fingerprint"]
        manifest, payload = read_json_document(path, "score", fingerprint=expected)
        payloads.append((path, payload))
        costs.append(costs_of(manifest))
    first_path, first = payloads[0]
    setting = {key: first.get(key) for key in ("protocol", "overlap_config", "seed")}
    setting["zero_shot"] = (first.get("zero_shot") or {}).get("config")
    for path, payload in payloads[1:]:
        other = {key: payload.get(key) for key in ("protocol", "overlap_config", "seed")}
        other["zero_shot"] = (payload.get("zero_shot") or {}).get("config")
        diffs = sorted(k for k in setting if setting[k] != other[k])
        if diffs:
            raise ArtifactError(f"{path}: its {', '.join(diffs)} differ from {first_path}; a report combines only scores of "
                                "one protocol under matching evaluation settings")
    if spec is not None:
        planned = {"protocol": spec["protocol"]["fingerprint"], "overlap_config": spec["overlap"], "seed": spec["seed"],
                   "zero_shot": spec["zero_shot"]}
        diffs = sorted(k for k in planned if planned[k] != setting[k])
        if diffs:
            raise ArtifactError(f"{first_path}: its {', '.join(diffs)} differ from the plan {plan}")
    protocol_fp = setting["protocol"]
    zs_protocol = read_zero_shot_protocol({"fingerprint": protocol_fp}, protocol)
    config = ZeroShotConfig.from_dict(setting["zero_shot"])
    overlap_config = OverlapScoringConfig.from_dict(setting["overlap_config"])
    results = []
    for i, (path, payload) in enumerate(payloads):
        result = ZeroShotResult.from_dict(payload["zero_shot"], expected_config=config)
        entry = dict(payload["candidate"]) if spec is None else {**payload["candidate"], "name": spec["candidates"][i]["name"]}
        name = entry.pop("name")
        entry["cache_status"] = {"samples": "disabled", "prompts": "disabled"}
        score_fp = _manifest_fingerprint(path)
        results.append(candidate(name, result, OverlapScoreResult.from_dict(payload["overlap"]), payload["endpoints"],
                                 entry, payload["compression_metadata"],
                                 {"score_fingerprint": score_fp, THROUGHPUT_PAYLOAD: payload.get(THROUGHPUT_PAYLOAD),
                                  COSTS_KEY: costs[i]}))
    name = benchmark or (spec["benchmark"] if spec is not None else "zero_shot")
    return zero_shot_report(results, zs_protocol, benchmark=name, config=config, overlap_config=overlap_config,
                            seed=setting["seed"], protocol_fingerprint=protocol_fp,
                            dataset_name=None if spec is None else spec.get("dataset_name"))


def run_report(plan: str | Path | None, protocol: str | Path, scores: Sequence[str | Path], json_output: str | Path,
               markdown_output: str | Path, *, benchmark: str | None = None) -> None:
    """``vertebrae zero-shot-from-artifacts``: the report of ``load_report`` with the default paired comparison,
    resampled with the scores' seed (as the workflow's default comparison is)."""
    report = load_report(plan, protocol, scores, benchmark=benchmark)
    report = report.with_comparison(ComparisonConfig(seed=report.metadata["seed"])).with_costs()  # times unknown
    report = report.with_software(software())  # the version (and git revision) that wrote it
    report.save_json(json_output)
    report.save_markdown(markdown_output)


def _manifest_fingerprint(path: str | Path) -> str:
    with open(path, encoding="utf-8") as handle:  # verified by read_json_artifact before
        return json.load(handle)["manifest"]["fingerprint"]


__all__ = ["load_report", "read_zero_shot_protocol", "run_compress", "run_embed_shard", "run_merge", "run_report", "run_score",
           "run_write_protocol"]
