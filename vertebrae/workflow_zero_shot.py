"""DAG-time planning of ``zero_shot:`` benchmarks (pure; ``vertebrae.workflow.plan`` calls it).

A benchmark declares a labelled ``dataset`` (single-label), either rendered ``prompts`` (``[{label, texts}]``) or
``templates`` (with optional ``template_ids`` and ``class_names: [{label, name}]``), ``extractors``, the branch pair
(``sample_branch`` / ``text_branch``; null for a branch-less text encoder), an optional paired ``compression``,
``zero_shot`` (ZeroShotConfig) and ``scoring`` (OverlapScoringConfig). Planning loads the source labels to build and
validate the protocol, so prompt mistakes surface before anything runs.

Sample-side specs (embedding, merge, compression fit) depend on the source dataset and the extractor only; a prompt
edit changes the protocol fingerprint, hence the prompt embeddings, scores and report, and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.data.zero_shot import build_zero_shot_dataset

RESULTS = "results/zero_shot"
STAGES = ("zero-shot-embed", "zero-shot-protocol", "compress-zero-shot", "score-zero-shot", "zero-shot-report")


def plan_path(fp: str) -> str:
    return f"{RESULTS}/plans/{fp}.json"


def shard_path(side: str, fp: str, index: int, count: int) -> str:
    return f"{RESULTS}/{side}/{fp}/shard-{index}-of-{count}.h5"


def embedding_path(side: str, fp: str) -> str:
    return f"{RESULTS}/{side}/{fp}.h5"


def protocol_path(fp: str) -> str:
    return f"{RESULTS}/protocols/{fp}.json"


def compressed_path(fp: str) -> str:
    return f"{RESULTS}/compressed/{fp}/samples.h5"


def score_path(fp: str) -> str:
    return f"{RESULTS}/scores/{fp}.json"


def _ref(fp: str, path: str) -> dict[str, str]:
    return {"fingerprint": fp, "path": path}


def prompt_declaration(bench: Mapping[str, Any]) -> dict[str, Any]:
    """The protocol-defining part of a benchmark declaration (what the protocol job rebuilds from)."""
    return {key: bench.get(key) for key in ("prompts", "templates", "template_ids", "class_names", "metadata")}


def _zero_shot_config(bench: Mapping[str, Any], where: str):
    from vertebrae.scoring.zero_shot import ZeroShotConfig

    decl = dict(bench["zero_shot"])
    if "top_k" in decl:
        decl["top_k"] = tuple(decl["top_k"])
    try:
        return ZeroShotConfig(**decl)
    except ValueError as exc:
        raise ConfigError(f"{where}.zero_shot: {exc}") from None


def _overlap_config(bench: Mapping[str, Any], where: str):
    from vertebrae.scoring.overlap import OverlapScoringConfig

    try:
        return OverlapScoringConfig(**bench["scoring"])
    except ValueError as exc:
        raise ConfigError(f"{where}.scoring: {exc}") from None


def _candidate_extractor(name: str, decl: Mapping[str, Any], bench: Mapping[str, Any], where: str):
    from vertebrae.extractors.registry import build_extractor
    from vertebrae.stages.zero_shot import check_zero_shot_extractor

    extractor = build_extractor(name, decl, where=where)
    try:
        check_zero_shot_extractor(extractor, bench.get("sample_branch"), bench.get("text_branch"))
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return extractor


def plan_zero_shot(result, name: str, bench: Mapping[str, Any], config: Mapping[str, Any], base_dir: Path) -> None:
    """Add every job spec of one zero-shot benchmark to ``result`` (a ``vertebrae.workflow.WorkflowPlan``)."""
    from vertebrae.compression import EmbeddingCompressionConfig, variant_name
    from vertebrae.stages.common import shard_bounds
    from vertebrae.stages.zero_shot import (
        prompt_embedding_recipe, sample_embedding_recipe, zero_shot_compression_recipe, zero_shot_score_recipe,
    )

    where = f"zero_shot.{name}"
    declaration = prompt_declaration(bench)
    zs = build_zero_shot_dataset(bench["dataset"], declaration, base_dir=base_dir, where=where)
    identity_key, protocol = zs.identity_key(), zs.protocol
    protocol_fp = protocol.fingerprint()
    zs_config, overlap_config = _zero_shot_config(bench, where), _overlap_config(bench, where)
    try:
        compression = None if bench["compression"] is None else EmbeddingCompressionConfig(**bench["compression"])
    except ValueError as exc:
        raise ConfigError(f"{where}.compression: {exc}") from None
    common = {"dataset": bench["dataset"], "identity": identity_key, "where": where}
    result.add({"stage": "zero-shot-protocol", "fingerprint": protocol_fp,
                "recipe": {"zero_shot_protocol": protocol_fp, "source_dataset_identity_key": identity_key},
                "declaration": declaration, **common})
    protocol_ref = _ref(protocol_fp, protocol_path(protocol_fp))
    n_shards = bench.get("shards", config["embedding"]["shards"])
    batch_size = config["embedding"]["batch_size"]
    sample_branch, text_branch = bench.get("sample_branch"), bench.get("text_branch")
    candidates = []
    for ext_name, decl in bench["extractors"].items():
        ext_where = f"{where}.extractors.{ext_name}"
        extractor = _candidate_extractor(ext_name, decl, bench, ext_where)
        ext = {"name": ext_name, "decl": decl, "where": ext_where}
        refs = {}
        for side, branch, recipe, n_rows, extra in (
            ("samples", sample_branch, sample_embedding_recipe(identity_key, extractor, sample_branch),
             protocol.n_samples, {"dataset": bench["dataset"], "identity": identity_key, "where": f"{where}.dataset"}),
            ("prompts", text_branch, prompt_embedding_recipe(protocol_fp, extractor, text_branch),
             len(protocol.prompts), {"protocol": protocol_ref, "where": where}),
        ):
            shards = [list(b) for b in shard_bounds(n_rows, n_shards, batch_size=batch_size)]
            fp = fingerprint("embedding", recipe)
            if side == "samples" and branch is None:
                # a branch-less encoder embeds the samples exactly as the labelled protocol does: share its job
                from vertebrae.workflow import embedding_path as labelled_embedding_path

                result.add({"stage": "embed", "fingerprint": fp, "recipe": recipe, **extra, "extractor": ext,
                            "endpoint": side, "n_rows": n_rows, "shards": shards, "batch_size": batch_size, "fit": None})
                path = labelled_embedding_path(fp)
            else:
                result.add({"stage": "zero-shot-embed", "fingerprint": fp, "recipe": recipe, "side": side,
                            "endpoint": side, "branch": branch, "extractor": ext, "n_rows": n_rows, "shards": shards,
                            "batch_size": batch_size, **extra})
                path = embedding_path(side, fp)
            result.shard_counts.setdefault(fp, len(result.specs[fp]["shards"]))
            refs[side] = _ref(fp, path)
        eligible = bool(extractor.reusable and zs.dataset.identity.reusable)
        variants = [(ext_name, refs["samples"], refs["samples"]["fingerprint"], refs["prompts"]["fingerprint"], None, None)]
        if compression is not None:
            c_recipe = zero_shot_compression_recipe(refs["samples"]["fingerprint"], compression)
            pair_fp = result.add({"stage": "compress-zero-shot", "fingerprint": fingerprint("compressed", c_recipe),
                                  "recipe": c_recipe, "samples": refs["samples"], "compression": compression.to_dict()})
            variants.append((variant_name(ext_name, compression), _ref(f"{pair_fp}/samples", compressed_path(pair_fp)),
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
            })
            candidates.append({"name": variant, "score": _ref(score_fp, score_path(score_fp))})
    r_recipe = {"benchmark": name, "protocol": protocol_fp, "candidates": candidates, "zero_shot": zs_config.to_dict(),
                "overlap": overlap_config.to_dict(), "seed": config["seed"]}
    result.zero_shot_reports[name] = result.add({
        **r_recipe, "stage": "zero-shot-report", "fingerprint": fingerprint("report", r_recipe), "recipe": r_recipe,
        "protocol": protocol_ref,
    })


def zero_shot_benchmarks_from_config(config: Mapping[str, Any], *, base_dir: str | Path = "."):
    """In-process ``ZeroShotBenchmark`` objects for every zero-shot benchmark of ``config``."""
    from vertebrae.compression import EmbeddingCompressionConfig
    from vertebrae.core.config import EmbeddingConfig
    from vertebrae.protocols.zero_shot import ZeroShotBenchmark
    from vertebrae.workflow import validate_config

    config = validate_config(config)
    benchmarks = {}
    for name, bench in config.get("zero_shot", {}).items():
        where = f"zero_shot.{name}"
        zs = build_zero_shot_dataset(bench["dataset"], prompt_declaration(bench), base_dir=Path(base_dir), where=where)
        extractors = [_candidate_extractor(n, d, bench, f"{where}.extractors.{n}") for n, d in bench["extractors"].items()]
        benchmarks[name] = ZeroShotBenchmark(
            zs, extractors, sample_branch=bench.get("sample_branch"), text_branch=bench.get("text_branch"),
            zero_shot_config=_zero_shot_config(bench, where), overlap_config=_overlap_config(bench, where),
            compression_config=None if bench["compression"] is None else EmbeddingCompressionConfig(**bench["compression"]),
            embedding_config=EmbeddingConfig(batch_size=config["embedding"]["batch_size"],
                                             shards=bench.get("shards", config["embedding"]["shards"])),
            seed=config["seed"], name=name,
        )
    return benchmarks
