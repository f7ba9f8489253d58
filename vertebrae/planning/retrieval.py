"""Planning of ``retrieval:`` benchmarks: the job specs of one benchmark, and its in-process twin.

Per benchmark: one relevance-protocol spec; per extractor an optional fit (on the gallery), a query and a gallery
embedding (sharded), an optional paired compression; one score per (extractor, variant); one report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from vertebrae.compression import variant_name
from vertebrae.core.fingerprint import fingerprint
from vertebrae.data.declared.names import dataset_name
from vertebrae.data.declared.retrieval import retrieval_endpoint_keys, retrieval_identity, retrieval_identity_key
from vertebrae.extractors.registry import build_extractor
from vertebrae.stages.common import embedding_recipe, extractor_entry, fit_recipe, shard_bounds
from vertebrae.stages.plan import endpoint_layout
from vertebrae.stages.retrieval_fanout import fanout_specs
from vertebrae.planning.comparison import comparison_config
from vertebrae.planning.config import (
    config_from_decl, embedding_config, endpoint_shards, paired_compression, validate_config,
)
from vertebrae.planning.dag import WorkflowPlan, ref, segment_key
from vertebrae.planning.labelled import check_own_rows

SIDES = ("query", "gallery")


def retrieval_row_ids(source: Mapping[str, Any], *, base_dir: Path, where: str) -> dict[str, tuple[str, ...]]:
    """The query and gallery row ids (semantic keys) of a retrieval source."""
    from vertebrae.core.arrays import encode_row_ids
    from vertebrae.data.declared.retrieval import load_retrieval_source

    data = load_retrieval_source(source, base_dir=base_dir, where=where)
    return {"query": encode_row_ids(list(data.query_ids), len(data.query_ids), what=f"{where} queries"),
            "gallery": encode_row_ids(list(data.gallery_ids), len(data.gallery_ids), what=f"{where} gallery")}


def retrieval_config_from_decl(bench: Mapping[str, Any], *, where: str):
    from vertebrae.scoring.retrieval import RetrievalConfig

    decl = dict(bench["retrieval"])
    if "ks" in decl:  # absent: the conventions' default ks
        decl["ks"] = tuple(decl["ks"])
    return config_from_decl(RetrievalConfig, decl, where=f"{where}.retrieval")


def plan_retrieval(result: WorkflowPlan, name: str, bench: Mapping[str, Any], config: Mapping[str, Any],
                   base_dir: Path) -> None:
    """Add every job spec of retrieval benchmark ``name`` to ``result``."""
    from vertebrae.data.declared.retrieval import retrieval_row_counts
    from vertebrae.stages.retrieval import (
        FIT_ENDPOINT, retrieval_branch, retrieval_compression_recipe, retrieval_protocol_recipe, retrieval_score_recipe,
    )

    where = f"retrieval.{name}"
    dataset = bench["dataset"]
    identity_key = retrieval_identity_key(dataset, base_dir=base_dir, where=f"{where}.dataset")
    # each endpoint's embeddings are named by its own rows, never the relevance: a qrels edit re-embeds nothing
    endpoint_keys = retrieval_endpoint_keys(dataset, base_dir=base_dir, where=f"{where}.dataset")
    counts = dict(zip(SIDES, retrieval_row_counts(dataset["source"], base_dir=base_dir, where=f"{where}.dataset.source")))
    retrieval_config = retrieval_config_from_decl(bench, where=where)
    compression = paired_compression(bench, where)
    common = {"protocol": "retrieval", "dataset": dataset, "identity": identity_key, "where": f"{where}.dataset"}
    p_recipe = retrieval_protocol_recipe(identity_key, dataset["exclude_same_id"])
    protocol_fp = result.add({"stage": "retrieval-protocol", "fingerprint": fingerprint("protocol", p_recipe), "recipe": p_recipe,
                              **common}, protocol="retrieval")
    protocol_ref = ref(protocol_fp, result.artifact_path("protocol", protocol_fp, protocol="retrieval"))
    layouts = {side: endpoint_layout({**common, "side": side}, base_dir) for side in SIDES}  # WebDataset tars: a
    side_segments = {side: layout[0] for side, layout in layouts.items()}  # shard job opens its own
    side_tars = {side: layout[1] for side, layout in layouts.items()}
    candidates = []
    side_ids: dict[str, tuple[str, ...]] = {}  # read once, for precomputed files only
    for ext_name, decl in bench["extractors"].items():
        ext_where = f"{where}.extractors.{ext_name}"
        extractor = build_extractor(ext_name, decl, where=ext_where)
        if dataset["source"].get("type") == "label_split":
            check_own_rows(dataset["source"]["source"], extractor, base_dir=base_dir, where=f"{where}.dataset.source",
                           ext_where=ext_where)
        job = {**common, "extractor": extractor_entry(ext_name, decl, ext_where)}
        fit_ref = None
        if extractor.learns:
            f_recipe = fit_recipe(endpoint_keys[FIT_ENDPOINT], FIT_ENDPOINT, extractor)
            fit_fp = result.add({"stage": "fit", "fingerprint": fingerprint("fitted-extractor", f_recipe), "recipe": f_recipe,
                                 **job, "identity": endpoint_keys[FIT_ENDPOINT], "endpoint": FIT_ENDPOINT},
                                protocol="retrieval")
            result.size(fit_fp, extractor, rows=counts[FIT_ENDPOINT], batch_size=config["embedding"]["batch_size"])
            fit_ref = ref(fit_fp, result.artifact_path("fitted", fit_fp, protocol="retrieval"))
        refs = {}
        for side in SIDES:
            branch = retrieval_branch(extractor, side, bench.get(f"{side}_branch"), where=where)
            if getattr(extractor, "reads_rows", False):  # a precomputed file: every row id of the side and no other
                if not side_ids:
                    side_ids.update(retrieval_row_ids(dataset["source"], base_dir=base_dir, where=f"{where}.dataset.source"))
                extractor.check_rows(side_ids[side], branch=branch, endpoint=side)
            e_recipe = embedding_recipe(endpoint_keys[side], side, extractor, branch, fit_endpoint=FIT_ENDPOINT,
                                        fit_identity=endpoint_keys[FIT_ENDPOINT])
            bounds = shard_bounds(counts[side], endpoint_shards(bench, config, extractor, counts[side]),
                                  batch_size=config["embedding"]["batch_size"], segments=side_segments[side])
            fp = result.add({
                "stage": "embed", "fingerprint": fingerprint("embedding", e_recipe), "recipe": e_recipe, **job,
                "extractor": extractor_entry(ext_name, decl, ext_where, extractor, branch),
                "identity": endpoint_keys[side], "endpoint": side, "side": side, "branch": branch,
                "fit_endpoint": FIT_ENDPOINT, "n_rows": counts[side],
                **({"fit_identity": endpoint_keys[FIT_ENDPOINT]} if extractor.learns else {}),  # a fit reads the gallery
                "shards": [list(b) for b in bounds], "batch_size": config["embedding"]["batch_size"], "fit": fit_ref,
                **segment_key(side_segments[side], side_tars[side]),
            }, protocol="retrieval")
            result.size(fp, extractor, rows=max(b - a for a, b in bounds), batch_size=config["embedding"]["batch_size"])
            refs[side] = ref(fp, result.artifact_path("embedding", fp, protocol="retrieval"))
        variants = [(ext_name, refs["query"], refs["gallery"], None)]
        if compression is not None:
            c_recipe = retrieval_compression_recipe(refs["query"]["fingerprint"], refs["gallery"]["fingerprint"], compression)
            pair_fp = result.add({"stage": "compress-retrieval", "fingerprint": fingerprint("compressed", c_recipe),
                                  "recipe": c_recipe, "query": refs["query"], "gallery": refs["gallery"],
                                  "compression": compression.to_dict()}, protocol="retrieval")
            q_path, g_path = (result.artifact_path("compressed", pair_fp, protocol="retrieval", side=side) for side in SIDES)
            variants.append((variant_name(ext_name, compression), ref(f"{pair_fp}/query", q_path),
                             ref(f"{pair_fp}/gallery", g_path), compression.to_dict()))
        for variant, q_ref, g_ref, compression_decl in variants:
            s_recipe = retrieval_score_recipe(q_ref["fingerprint"], g_ref["fingerprint"], protocol_fp, retrieval_config)
            score_fp = _add_score(result, {
                "stage": "score-retrieval", "fingerprint": fingerprint("score", s_recipe), "recipe": s_recipe,
                "query": q_ref, "gallery": g_ref, "protocol": protocol_ref, "retrieval": retrieval_config.to_dict(),
            }, bench["scoring"], counts, where)
            candidates.append({"name": variant, "score": ref(score_fp, result.artifact_path("score", score_fp, protocol="retrieval")),
                               "query": q_ref["fingerprint"], "gallery": g_ref["fingerprint"],
                               "extractor": extractor.recipe(), "compression": compression_decl})
    r_recipe = {"benchmark": name, "protocol": protocol_fp, "candidates": result.recipe_refs(candidates),
                "retrieval": retrieval_config.to_dict()}
    result.retrieval_reports[name] = result.add({
        **r_recipe, "candidates": candidates, "stage": "retrieval-report", "fingerprint": fingerprint("report", r_recipe), "recipe": r_recipe,
        "protocol": protocol_ref, "identity": identity_key, "dataset_name": dataset_name(dataset),
    }, protocol="retrieval")


def _add_score(result: WorkflowPlan, spec: dict[str, Any], scoring: Mapping[str, Any], counts: Mapping[str, int],
               where: str) -> str:
    """Plan one candidate's score: the one score-retrieval job, or (``scoring.query_shards`` x
    ``scoring.gallery_shards`` > 1) its partial-score jobs and the merge job, which writes the same score artifact
    under the same fingerprint. A device other than cpu is recorded in the specs (never in a recipe). A score
    that an earlier benchmark planned (same fingerprint) keeps that plan, its split and device included."""
    if spec["fingerprint"] in result.specs:  # the same score, planned by an earlier benchmark: its plan stands
        return spec["fingerprint"]
    device = scoring.get("device", "cpu")
    if device != "cpu":
        spec = {**spec, "device": device}
    q_shards, g_shards = scoring.get("query_shards", 1), scoring.get("gallery_shards", 1)
    if q_shards * g_shards == 1:
        return result.add(spec, protocol="retrieval")
    partials, merge = fanout_specs(spec, query_shards=q_shards, gallery_shards=g_shards, n_queries=counts["query"],
                                   n_gallery=counts["gallery"], where=f"{where}.scoring",
                                   partial_path=lambda fp: result.artifact_path("partial", fp, protocol="retrieval",
                                                                                merge=spec["fingerprint"]))
    merge_fp = result.add(merge, protocol="retrieval")
    for partial in partials:
        result.fanouts[result.add(partial if device == "cpu" else {**partial, "device": device},
                                  protocol="retrieval")] = merge_fp
    return merge_fp


def check_retrieval_sources(config: Mapping[str, Any], *, base_dir: str | Path = ".") -> None:
    """What ``vertebrae validate`` reads beyond the plan: every retrieval benchmark's source loaded and its protocol
    built (relevance records and their ids, every query with a positive), so a broken relevance file is refused
    naming its file and line before any job runs."""
    from vertebrae.core.identity import DatasetIdentity
    from vertebrae.data.declared.retrieval import load_retrieval_source

    for name, bench in validate_config(config).get("retrieval", {}).items():
        where = f"retrieval.{name}.dataset"
        data = load_retrieval_source(bench["dataset"]["source"], base_dir=Path(base_dir), where=f"{where}.source")
        data.to_dataset(DatasetIdentity.declared("validate", "0"), exclude_same_id=bench["dataset"]["exclude_same_id"])


def retrieval_benchmarks_from_config(config: Mapping[str, Any], *, base_dir: str | Path = "."):
    """In-process ``RetrievalBenchmark`` objects for every retrieval benchmark of ``config``."""
    from vertebrae.data.declared.retrieval import load_retrieval_source
    from vertebrae.protocols.retrieval import RetrievalBenchmark

    config = validate_config(config)
    benchmarks = {}
    for name, bench in config.get("retrieval", {}).items():
        where = f"retrieval.{name}"
        decl = bench["dataset"]
        data = load_retrieval_source(decl["source"], base_dir=Path(base_dir), where=f"{where}.dataset.source")
        dataset = replace(data.to_dataset(retrieval_identity(decl, base_dir=Path(base_dir), where=f"{where}.dataset"),
                                          exclude_same_id=decl["exclude_same_id"]),
                          endpoint_keys=retrieval_endpoint_keys(decl, base_dir=Path(base_dir), where=f"{where}.dataset"),
                          metadata={"name": dataset_name(decl)})
        extractors = [build_extractor(n, d, where=f"{where}.extractors.{n}") for n, d in bench["extractors"].items()]
        compression = paired_compression(bench, where)
        benchmarks[name] = RetrievalBenchmark(
            dataset, extractors, retrieval_config=retrieval_config_from_decl(bench, where=where),
            compression_config=compression, embedding_config=embedding_config(bench, config),
            query_branch=bench.get("query_branch"), gallery_branch=bench.get("gallery_branch"), name=name,
            comparison_config=comparison_config(config, "retrieval", name), device=bench["scoring"]["device"],
        )
    return benchmarks


__all__ = ["SIDES", "check_retrieval_sources", "plan_retrieval", "retrieval_benchmarks_from_config", "retrieval_config_from_decl"]
