"""Planning of ``zero_shot:`` benchmarks: the job specs of one benchmark, and its in-process twin.

A benchmark declares a single-label ``dataset``, rendered ``prompts`` or ``templates`` (+ ``template_ids``,
``class_names``), ``extractors``, the branch pair (``sample_branch`` / ``text_branch``), an optional paired
``compression``, ``zero_shot`` (ZeroShotConfig) and ``scoring`` (OverlapScoringConfig). Planning builds the
protocol from the source labels, so prompt mistakes surface before anything runs.

Sample-side specs depend on the source dataset and the extractor only: a prompt edit changes the protocol
fingerprint, hence the prompt embeddings, scores and report, and nothing else. A branch-less encoder embeds the
samples exactly as the labelled protocol does, so that embedding is the labelled ``embed`` job, shared.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vertebrae.compression import variant_name
from vertebrae.core.errors import ConfigError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.data.declared.names import dataset_name
from vertebrae.data.zero_shot import build_zero_shot_dataset
from vertebrae.extractors.registry import build_extractor
from vertebrae.planning.labelled import check_own_rows
from vertebrae.stages.common import extractor_entry, shard_bounds
from vertebrae.stages.plan import endpoint_layout
from vertebrae.planning.comparison import comparison_config
from vertebrae.planning.config import (
    config_from_decl, embedding_config, endpoint_shards, paired_compression, validate_config,
)
from vertebrae.planning.dag import WorkflowPlan, ref, segment_key

PROTOCOL = "zero_shot"


def prompt_declaration(bench: Mapping[str, Any]) -> dict[str, Any]:
    """The protocol-defining part of a benchmark declaration (what the protocol job rebuilds from)."""
    return {key: bench.get(key) for key in ("prompts", "templates", "template_ids", "class_names", "metadata")}


def _zero_shot_config(bench: Mapping[str, Any], where: str):
    from vertebrae.scoring.zero_shot import ZeroShotConfig

    decl = dict(bench["zero_shot"])
    if "top_k" in decl:
        decl["top_k"] = tuple(decl["top_k"])
    return config_from_decl(ZeroShotConfig, decl, where=f"{where}.zero_shot")


def _overlap_config(bench: Mapping[str, Any], where: str):
    from vertebrae.scoring.overlap import OverlapScoringConfig

    return config_from_decl(OverlapScoringConfig, bench["scoring"], where=f"{where}.scoring")


def _candidate_extractor(name: str, decl: Mapping[str, Any], bench: Mapping[str, Any], where: str):
    from vertebrae.stages.zero_shot import check_zero_shot_extractor

    extractor = build_extractor(name, decl, where=where)
    try:
        check_zero_shot_extractor(extractor, bench.get("sample_branch"), bench.get("text_branch"))
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return extractor


def plan_zero_shot(result: WorkflowPlan, name: str, bench: Mapping[str, Any], config: Mapping[str, Any],
                   base_dir: Path) -> None:
    """Add every job spec of zero-shot benchmark ``name`` to ``result``."""
    from vertebrae.stages.zero_shot import (
        prompt_embedding_recipe, sample_embedding_recipe, zero_shot_compression_recipe, zero_shot_score_recipe,
    )

    where = f"zero_shot.{name}"
    declaration = prompt_declaration(bench)
    zs = build_zero_shot_dataset(bench["dataset"], declaration, base_dir=base_dir, where=where)
    identity_key, protocol = zs.identity_key(), zs.protocol
    protocol_fp = protocol.fingerprint()
    zs_config, overlap_config = _zero_shot_config(bench, where), _overlap_config(bench, where)
    compression = paired_compression(bench, where)
    common = {"dataset": bench["dataset"], "identity": identity_key, "where": where}
    result.add({"stage": "zero-shot-protocol", "fingerprint": protocol_fp,
                "recipe": {"zero_shot_protocol": protocol_fp, "source_dataset_identity_key": identity_key},
                "declaration": declaration, **common}, protocol=PROTOCOL)
    protocol_ref = ref(protocol_fp, result.artifact_path("protocol", protocol_fp, protocol=PROTOCOL))
    batch_size = config["embedding"]["batch_size"]
    sample_branch, text_branch = bench.get("sample_branch"), bench.get("text_branch")
    sample_segments, sample_tars = endpoint_layout({"dataset": bench["dataset"], "where": f"{where}.dataset"}, base_dir)
    candidates = []
    for ext_name, decl in bench["extractors"].items():
        ext_where = f"{where}.extractors.{ext_name}"
        extractor = _candidate_extractor(ext_name, decl, bench, ext_where)
        check_own_rows(bench["dataset"]["source"], extractor, base_dir=base_dir, where=f"{where}.dataset", ext_where=ext_where)
        if getattr(extractor, "reads_rows", False):  # precomputed files: every sample / prompt row and no other
            extractor.check_rows(protocol.sample_ids, branch=sample_branch, endpoint="samples")
            extractor.check_rows(protocol.prompt_ids(), branch=text_branch, endpoint="prompts")
        refs = {}
        for side, branch, recipe, n_rows, extra in (
            ("samples", sample_branch, sample_embedding_recipe(identity_key, extractor, sample_branch),
             protocol.n_samples, {"dataset": bench["dataset"], "identity": identity_key, "where": f"{where}.dataset"}),
            ("prompts", text_branch, prompt_embedding_recipe(protocol_fp, extractor, text_branch),
             len(protocol.prompts), {"protocol": protocol_ref, "where": where}),
        ):
            n_shards = endpoint_shards(bench, config, extractor, n_rows)
            segments = sample_segments if side == "samples" else None
            tars = sample_tars if side == "samples" else None
            shards = [list(b) for b in shard_bounds(n_rows, n_shards, batch_size=batch_size, segments=segments)]
            fp = fingerprint("embedding", recipe)
            if side == "samples" and branch is None:  # the labelled protocol's embedding job, shared
                result.add({"stage": "embed", "fingerprint": fp, "recipe": recipe, **extra,
                            "extractor": extractor_entry(ext_name, decl, ext_where),
                            "endpoint": side, "n_rows": n_rows, "shards": shards, "batch_size": batch_size, "fit": None,
                            **segment_key(segments, tars)})
                path = result.artifact_path("embedding", fp)
            else:
                result.add({"stage": "zero-shot-embed", "fingerprint": fp, "recipe": recipe, "side": side,
                            "endpoint": side, "branch": branch, "n_rows": n_rows, "shards": shards,
                            "extractor": extractor_entry(ext_name, decl, ext_where, extractor, branch),
                            "batch_size": batch_size, **extra, **segment_key(segments, tars)}, protocol=PROTOCOL)
                path = result.artifact_path("embedding", fp, protocol=PROTOCOL, side=side)
            result.size(fp, extractor, rows=max(b - a for a, b in shards), batch_size=batch_size)
            refs[side] = ref(fp, path)
        eligible = bool(extractor.reusable and zs.dataset.identity.reusable)
        variants = [(ext_name, refs["samples"], refs["samples"]["fingerprint"], refs["prompts"]["fingerprint"], None, None)]
        if compression is not None:
            c_recipe = zero_shot_compression_recipe(refs["samples"]["fingerprint"], compression)
            pair_fp = result.add({"stage": "compress-zero-shot", "fingerprint": fingerprint("compressed", c_recipe),
                                  "recipe": c_recipe, "samples": refs["samples"], "compression": compression.to_dict()},
                                 protocol=PROTOCOL)
            variants.append((variant_name(ext_name, compression),
                             ref(f"{pair_fp}/samples", result.artifact_path("compressed", pair_fp, protocol=PROTOCOL)),
                             f"{pair_fp}/samples", f"{pair_fp}/prompts:{refs['prompts']['fingerprint']}", pair_fp,
                             compression.to_dict()))
        for variant, samples_ref, s_key, p_key, pair_fp, compression_decl in variants:
            entry = {"name": variant, "extractor": extractor.recipe(), "sample_fingerprint": refs["samples"]["fingerprint"],
                     "prompt_fingerprint": refs["prompts"]["fingerprint"], "sample_branch": sample_branch,
                     "text_branch": text_branch, "cache_eligible": eligible, "scored_samples": s_key, "scored_prompts": p_key}
            s_recipe = zero_shot_score_recipe(s_key, p_key, protocol_fp, zs_config, overlap_config, config["seed"])
            score_fp = result.add({
                "stage": "score-zero-shot", "fingerprint": fingerprint("score", s_recipe), "recipe": s_recipe,
                "samples": samples_ref, "prompts": refs["prompts"], "protocol": protocol_ref,
                "raw_samples": None if pair_fp is None else refs["samples"], "pair": pair_fp,
                "compression": compression_decl, "zero_shot": zs_config.to_dict(), "overlap": overlap_config.to_dict(),
                "seed": config["seed"], "candidate": entry,
            }, protocol=PROTOCOL)
            candidates.append({"name": variant, "score": ref(score_fp, result.artifact_path("score", score_fp, protocol=PROTOCOL))})
    r_recipe = {"benchmark": name, "protocol": protocol_fp, "candidates": result.recipe_refs(candidates),
                "zero_shot": zs_config.to_dict(), "overlap": overlap_config.to_dict(), "seed": config["seed"]}
    result.zero_shot_reports[name] = result.add({
        **r_recipe, "candidates": candidates, "stage": "zero-shot-report", "fingerprint": fingerprint("report", r_recipe), "recipe": r_recipe,
        "protocol": protocol_ref, "dataset_name": dataset_name(bench["dataset"]),
    }, protocol=PROTOCOL)


def zero_shot_benchmarks_from_config(config: Mapping[str, Any], *, base_dir: str | Path = "."):
    """In-process ``ZeroShotBenchmark`` objects for every zero-shot benchmark of ``config``."""
    from vertebrae.protocols.zero_shot import ZeroShotBenchmark

    config = validate_config(config)
    benchmarks = {}
    for name, bench in config.get("zero_shot", {}).items():
        where = f"zero_shot.{name}"
        zs = build_zero_shot_dataset(bench["dataset"], prompt_declaration(bench), base_dir=Path(base_dir), where=where)
        extractors = [_candidate_extractor(n, d, bench, f"{where}.extractors.{n}") for n, d in bench["extractors"].items()]
        for extractor in extractors:
            check_own_rows(bench["dataset"]["source"], extractor, base_dir=Path(base_dir), where=f"{where}.dataset",
                           ext_where=f"{where}.extractors.{extractor.name}")
        benchmarks[name] = ZeroShotBenchmark(
            zs, extractors, sample_branch=bench.get("sample_branch"), text_branch=bench.get("text_branch"),
            zero_shot_config=_zero_shot_config(bench, where), overlap_config=_overlap_config(bench, where),
            compression_config=paired_compression(bench, where), embedding_config=embedding_config(bench, config),
            seed=config["seed"], name=name, comparison_config=comparison_config(config, "zero_shot", name),
        )
    return benchmarks


__all__ = ["plan_zero_shot", "prompt_declaration", "zero_shot_benchmarks_from_config"]
