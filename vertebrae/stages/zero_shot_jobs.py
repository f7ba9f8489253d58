"""File-level runners of the zero-shot workflow: read verified artifacts, call the stage functions, write atomically.

One function per CLI subcommand: ``embed-zero-shot-shard``, ``merge-zero-shot-embeddings``,
``write-zero-shot-protocol``, ``compress-zero-shot``, ``score-zero-shot`` and ``zero-shot-from-artifacts``
(``plan-zero-shot`` is ``vertebrae.stages.plan.run_plan``, which calls ``check_zero_shot_spec``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vertebrae.core.artifacts import read_embeddings, read_json_artifact, write_embeddings, write_json_artifact
from vertebrae.core.errors import ArtifactError, ValidationError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.stages.plan import BASE_DIR, check_rows, endpoint_rows, spec_extractor

KINDS = {"zero-shot-embed": "embedding", "compress-zero-shot": "compressed", "score-zero-shot": "score",
         "zero-shot-report": "report", "zero-shot-protocol": "protocol"}


def _protocol_dataset(spec: Mapping[str, Any]):
    from vertebrae.data.zero_shot import build_zero_shot_dataset

    return build_zero_shot_dataset(spec["dataset"], spec["declaration"], base_dir=BASE_DIR, where=spec["where"])


def check_zero_shot_spec(spec: Mapping[str, Any]) -> None:
    """Re-derive a zero-shot job spec's fingerprint from its content (the protocol: from its declaration)."""
    stage = spec["stage"]
    if stage == "zero-shot-protocol":
        zs = _protocol_dataset(spec)
        if zs.protocol_fingerprint() != spec["fingerprint"]:
            raise ValidationError(f"{spec['where']}: the dataset or prompts now give protocol {zs.protocol_fingerprint()}, "
                                  f"planned as {spec['fingerprint']}; re-plan")
        return
    if fingerprint(KINDS[stage], spec["recipe"]) != spec["fingerprint"]:
        raise ValidationError(f"job spec {spec['fingerprint']}: its recipe does not hash to its fingerprint")
    if stage == "zero-shot-embed":
        from vertebrae.stages.zero_shot import prompt_embedding_recipe, sample_embedding_recipe

        extractor = spec_extractor(spec)
        if spec["side"] == "samples":
            recipe = sample_embedding_recipe(spec["identity"], extractor, spec["branch"])
        else:
            recipe = prompt_embedding_recipe(spec["protocol"]["fingerprint"], extractor, spec["branch"])
        if recipe != spec["recipe"]:
            raise ValidationError(f"job spec {spec['fingerprint']}: extractor {extractor.name!r} does not match its recipe")
        # the prompts' count is fixed by the protocol fingerprint checked above: only their shard bounds can be off
        check_rows(spec, endpoint_rows(spec) if spec["side"] == "samples" else spec["n_rows"])


def _load_plan(path: str | Path, stage: str) -> dict[str, Any]:
    spec = read_json_artifact(path, "plan", fingerprint=None)
    if spec.get("stage") != stage:
        raise ArtifactError(f"{path}: a {spec.get('stage')!r} job spec where a {stage!r} one was expected")
    if Path(path).stem != spec["fingerprint"]:
        raise ArtifactError(f"{path}: holds the job spec {spec['fingerprint']}, not {Path(path).stem}")
    return spec


def read_zero_shot_protocol(ref: Mapping[str, str], path: str | Path):
    """The verified protocol: artifact checks, strict payload, recomputed fingerprint, manifest recipe fields."""
    from vertebrae.data.zero_shot import ZeroShotProtocol

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
    from vertebrae.data.declared import load_declared_rows
    from vertebrae.stages.common import embed_rows
    from vertebrae.stages.jobs import shard_fingerprint

    spec = _load_plan(plan, "zero-shot-embed")
    if spec["side"] != side:
        raise ValidationError(f"{plan}: the plan embeds side {spec['side']!r}, not {side!r}")
    if not 0 <= shard_index < len(spec["shards"]):
        raise ValidationError(f"{plan}: shard index {shard_index} is outside 0..{len(spec['shards']) - 1}")
    start, stop = spec["shards"][shard_index]
    if side == "samples":
        inputs, row_ids = load_declared_rows(spec["dataset"], base_dir=BASE_DIR, where=spec["where"], start=start, stop=stop)
    else:
        if protocol is None:
            raise ValidationError(f"{plan}: embedding prompts needs --protocol")
        zs_protocol = read_zero_shot_protocol(spec["protocol"], protocol)
        if len(zs_protocol.prompts) != spec["n_rows"]:
            raise ValidationError(f"{protocol}: {len(zs_protocol.prompts)} prompts, the plan expected {spec['n_rows']}")
        inputs, row_ids = zs_protocol.prompt_inputs()[start:stop], zs_protocol.prompt_ids()[start:stop]
    block = embed_rows(spec_extractor(spec), inputs, row_ids, batch_size=spec["batch_size"], endpoint=side, branch=spec["branch"])
    write_embeddings(output, block.matrix, list(block.row_ids), fingerprint=shard_fingerprint(spec, shard_index),
                     recipe={"parent": spec["fingerprint"], "rows": [start, stop]})


def run_merge(plan: str | Path, shards: Sequence[str | Path], output: str | Path) -> None:
    from vertebrae.stages.jobs import merge_shard_files

    merge_shard_files(plan, _load_plan(plan, "zero-shot-embed"), shards, output, endpoint="side")


def run_write_protocol(plan: str | Path, output: str | Path) -> None:
    spec = _load_plan(plan, "zero-shot-protocol")
    zs = _protocol_dataset(spec)
    if zs.protocol_fingerprint() != spec["fingerprint"]:
        raise ValidationError(f"{spec['where']}: the dataset or prompts no longer match the plan; re-plan")
    write_json_artifact(output, "protocol", zs.protocol.to_payload(), fingerprint=spec["fingerprint"], recipe=spec["recipe"])


def _block(path: str | Path, fp: str):
    from vertebrae.stages.common import EmbeddingBlock

    artifact = read_embeddings(path, fingerprint=fp)
    return EmbeddingBlock(artifact.matrix, artifact.row_ids), artifact.manifest.get("metadata") or {}


def run_compress(plan: str | Path, samples: str | Path, output: str | Path) -> None:
    """Fit the compression on the raw samples (the prompts are compressed with the same fit at scoring time)."""
    from vertebrae.compression import EmbeddingCompressionConfig
    from vertebrae.stages.zero_shot import fit_sample_compression

    spec = _load_plan(plan, "compress-zero-shot")
    raw, _ = _block(samples, spec["samples"]["fingerprint"])
    _, compressed, metadata = fit_sample_compression(raw, EmbeddingCompressionConfig.from_dict(spec["compression"]))
    write_embeddings(output, compressed.matrix, list(compressed.row_ids), fingerprint=f"{spec['fingerprint']}/samples",
                     recipe=spec["recipe"], metadata={"compression": metadata, "compression_pair": spec["fingerprint"]})


def run_score(plan: str | Path, samples: str | Path, prompts: str | Path, protocol: str | Path, output: str | Path, *,
              raw_samples: str | Path | None = None) -> None:
    from vertebrae.compression import EmbeddingCompressionConfig
    from vertebrae.scoring.overlap import OverlapScoringConfig
    from vertebrae.scoring.zero_shot import ZeroShotConfig
    from vertebrae.stages.zero_shot import compress_prompts, endpoint_metadata, refit_for_prompts, score_zero_shot

    spec = _load_plan(plan, "score-zero-shot")
    zs_protocol = read_zero_shot_protocol(spec["protocol"], protocol)
    s_block, s_meta = _block(samples, spec["samples"]["fingerprint"])
    p_block, _ = _block(prompts, spec["prompts"]["fingerprint"])
    pair = spec["pair"]
    if pair is not None:
        if raw_samples is None:
            raise ValidationError(f"{plan}: a compressed variant needs --raw-samples to apply the sample fit to the prompts")
        if s_meta.get("compression_pair") != pair:
            raise ArtifactError(f"{samples}: compressed by pair {s_meta.get('compression_pair')!r}, expected {pair!r}")
        raw, _ = _block(raw_samples, spec["raw_samples"]["fingerprint"])
        fitted = refit_for_prompts(raw, s_block, EmbeddingCompressionConfig.from_dict(spec["compression"]), source=str(samples))
        p_block = compress_prompts(fitted, p_block)
    result, overlap = score_zero_shot(s_block, p_block, zs_protocol, ZeroShotConfig.from_dict(spec["zero_shot"]),
                                      OverlapScoringConfig.from_dict(spec["overlap"]), spec["seed"],
                                      sample_pair=s_meta.get("compression_pair"), prompt_pair=pair)
    payload = {"zero_shot": result.to_dict(), "overlap": overlap.to_dict(), "overlap_config": spec["overlap"],
               "seed": spec["seed"], "protocol": spec["protocol"]["fingerprint"], "candidate": spec["candidate"],
               "endpoints": endpoint_metadata(s_block, p_block),
               "compression_metadata": (s_meta.get("compression") if pair is not None else None), "compression_pair": pair}
    write_json_artifact(output, "score", payload, fingerprint=spec["fingerprint"], recipe=spec["recipe"])


def run_report(protocol: str | Path, scores: Sequence[str | Path], json_output: str | Path, markdown_output: str | Path, *,
               plan: str | Path | None = None, benchmark: str | None = None) -> None:
    """A ranked zero-shot report from score artifacts that share one protocol and one evaluation setting (zero-shot
    config, overlap config, seed); with ``plan``, the planned candidates (names, score fingerprints) are enforced."""
    from vertebrae.scoring.overlap import OverlapScoreResult, OverlapScoringConfig
    from vertebrae.scoring.zero_shot import ZeroShotConfig, ZeroShotResult
    from vertebrae.stages.zero_shot import candidate, zero_shot_report

    if not scores:
        raise ValidationError("zero-shot report: give at least one --score-key")
    spec = None
    if plan is not None:
        spec = _load_plan(plan, "zero-shot-report")
        if len(scores) != len(spec["candidates"]):
            raise ValidationError(f"{plan}: {len(scores)} score files given, the plan has {len(spec['candidates'])} candidates")
    payloads = []
    for i, path in enumerate(scores):
        expected = None if spec is None else spec["candidates"][i]["score"]["fingerprint"]
        payloads.append((path, read_json_artifact(path, "score", fingerprint=expected)))
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
                                 entry, payload["compression_metadata"], {"score_fingerprint": score_fp}))
    name = benchmark or (spec["benchmark"] if spec is not None else "zero_shot")
    report = zero_shot_report(results, zs_protocol, benchmark=name, config=config, overlap_config=overlap_config,
                              seed=setting["seed"], protocol_fingerprint=protocol_fp)
    report.save_json(json_output)
    report.save_markdown(markdown_output)


def _manifest_fingerprint(path: str | Path) -> str:
    with open(path, encoding="utf-8") as handle:  # verified by read_json_artifact before
        return json.load(handle)["manifest"]["fingerprint"]
