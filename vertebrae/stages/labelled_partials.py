"""A labelled score split into one job per metric: OverlapIndex, each stability repeat, Separatix and each declared
metric (built-in or custom) write a partial artifact of their own, and a merge writes the score artifact that
``vertebrae score`` writes in one job, payload for payload, under the same fingerprint.

A partial is keyed by what decides it alone (``part_recipes``): the scored embedding, the protocol and that one
part's configuration (and the backend it runs), never the other metrics. So adding or changing one metric plans
only that metric's partial job, the merge and what follows it; a stability repeat is keyed by its own seeds, so
more repeats reuse the earlier ones. The matched row subsamples of a row-resampled comparison run in blocks of
``ROW_RESAMPLES_PER_JOB`` (a subsample's OverlapIndex costs a fraction of a job's start, and a comparison draws
hundreds): block ``b`` scores subsamples ``[b * size, (b + 1) * size)``, keyed by their seeds, so more resamples
reuse the full blocks before them. Separatix is gated by the overlap score: its job also reads the OverlapIndex
partial (and is keyed by it).

Each partial records the content hashes of the embedding and protocol it read; the merge refuses partials that
disagree with each other or with the files in place, naming the file (a stale partial is moved aside by the CLI).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vertebrae.core.artifacts import read_embeddings, read_json_document, read_manifest, write_json_artifact
from vertebrae.core.throughput import COSTS_KEY, KEY as THROUGHPUT, PAYLOAD_KEY as THROUGHPUT_PAYLOAD, job_seconds
from vertebrae.core.throughput import costs_of, score_costs
from vertebrae.core.errors import ArtifactError, StaleArtifactError, ValidationError
from vertebrae.core.fingerprint import SCHEMAS, fingerprint
from vertebrae.core.provenance import installed_version
from vertebrae.data.labelled import LabelledProtocol
from vertebrae.stages.common import EmbeddingBlock, check_row_ids
from vertebrae.stages.labelled import ScoringPlan
from vertebrae.stages.plan import load_plan

PART_STAGE, MERGE_STAGE, KIND = "score-labelled-partial", "merge-labelled-partials", "labelled-partial"
ROW_RESAMPLES_PER_JOB = 50  # the row subsamples one partial job scores


# ------------------------------------------------------------------------------------------------ job specs


def part_recipes(embedding_fp: str, protocol_fp: str, plan: ScoringPlan) -> list[dict[str, Any]]:
    """The recipe of every partial of one candidate's score, in merge order: overlap, the stability repeats, the
    declared metrics, Separatix (its recipe names the overlap partial's fingerprint, whose score gates it)."""
    from vertebrae.scoring.stability import sampling_seeds_for, scoring_seeds_for

    base = {"embedding": embedding_fp, "protocol": protocol_fp, "schema": SCHEMAS[KIND]}
    overlap_backend = {"overlapindex": installed_version("overlapindex")}
    scoring = plan.scoring.to_dict()
    overlap = {**base, "part": "overlap", "scoring": scoring, "seed": int(plan.seed), "backend": overlap_backend}
    recipes = [overlap]
    stability = plan.stability
    if stability is not None and stability.enabled:
        scoring_seeds = scoring_seeds_for(plan.seed, stability.repeats)
        subsample = stability.mode == "subsample"
        sampling_seeds = sampling_seeds_for(stability.random_state, stability.repeats) if subsample else None
        for r in range(stability.repeats):
            recipes.append({**base, "part": "stability", "repeat": r, "scoring": scoring, "mode": stability.mode,
                            "scoring_seed": scoring_seeds[r],
                            "subsample": {"fraction": stability.subsample_fraction, "sampling_seed": sampling_seeds[r]}
                            if subsample else None, "backend": overlap_backend})
    rows = plan.row_resampling  # the matched row subsamples of a row-resampled comparison, in blocks
    if rows is not None:
        scoring_seeds = scoring_seeds_for(plan.seed, rows.resamples)
        sampling_seeds = sampling_seeds_for(rows.random_state, rows.resamples)
        for start in range(0, rows.resamples, ROW_RESAMPLES_PER_JOB):
            stop = min(start + ROW_RESAMPLES_PER_JOB, rows.resamples)
            recipes.append({**base, "part": "row-resamples", "first": start, "scoring": scoring,
                            "scoring_seeds": scoring_seeds[start:stop],
                            "subsample": {"fraction": rows.fraction, "sampling_seeds": sampling_seeds[start:stop]},
                            "backend": overlap_backend})
    for metric in plan.metrics:
        recipe = metric.recipe()
        if recipe is None:
            raise ValidationError(f"metric {metric.name!r} has no importable path or cache_identity: it cannot run "
                                  "as a job of its own")
        entry = {**base, "part": "metric", "name": metric.name, "metric": recipe, "seed": int(plan.seed)}
        folds = metric.job_folds()
        recipes.extend([entry] if folds == 1 else [{**entry, "fold": f, "folds": folds} for f in range(folds)])
    if plan.separatix is not None:
        recipes.append({**base, "part": "separatix", "separatix": plan.separatix.to_dict(),
                        "overlap": fingerprint(KIND, overlap), "normalize_embeddings": plan.scoring.normalize_embeddings,
                        "max_dense_bytes": plan.scoring.max_dense_bytes,
                        "backend": {"separatix": installed_version("separatix")}})
    return recipes


def part_name(recipe: Mapping[str, Any]) -> str:
    """``overlap``, ``stability[3]``, ``row-resamples[50:100]``, ``metric knn`` or ``separatix``: the part a recipe
    computes."""
    part = recipe["part"]
    if part == "row-resamples":
        return f"row-resamples[{recipe['first']}:{recipe['first'] + len(recipe['scoring_seeds'])}]"
    if part == "metric" and "fold" in recipe:
        return f"metric {recipe.get('name')} fold {recipe['fold']}"
    return {"stability": f"stability[{recipe.get('repeat')}]", "metric": f"metric {recipe.get('name')}"}.get(part, part)


def fanout_specs(score_spec: Mapping[str, Any], plan: ScoringPlan, partial_path: Any
                 ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The partial specs and the merge spec that replace one planned labelled ``score`` spec: the merge spec is the
    score spec with ``stage`` = MERGE_STAGE and ``partials`` = ``[{"fingerprint", "path": partial_path(fp)}]`` in
    merge order (same fingerprint and recipe: the split changes no bit of the score)."""
    recipes = part_recipes(score_spec["embedding"]["fingerprint"], score_spec["protocol"]["fingerprint"], plan)
    refs: dict[str, dict[str, str]] = {}
    partials = []
    for recipe in recipes:
        fp = fingerprint(KIND, recipe)
        refs[part_name(recipe)] = {"fingerprint": fp, "path": partial_path(fp)}
        partials.append({"stage": PART_STAGE, "fingerprint": fp, "recipe": recipe, "embedding": score_spec["embedding"],
                         "protocol": score_spec["protocol"], "target_type": score_spec["target_type"],
                         "overlap": refs["overlap"] if recipe["part"] == "separatix" else None})
    return partials, {**score_spec, "stage": MERGE_STAGE, "partials": list(refs.values())}


# ------------------------------------------------------------------------------------------------- the jobs


def _read_protocol(ref: Mapping[str, str], path: str | Path) -> tuple[LabelledProtocol, str]:
    manifest, payload = read_json_document(path, "protocol", fingerprint=ref["fingerprint"])
    return LabelledProtocol.from_payload(payload, source=str(path)), manifest["content_hash"]


def compute_part(recipe: Mapping[str, Any], block: EmbeddingBlock, protocol: LabelledProtocol, target_type: str,
                 overlap: Mapping[str, Any] | None = None) -> Any:
    """The result of one part on a candidate's embeddings (what ``score_embeddings`` computes for it);
    ``overlap``: the overlap part's result, for Separatix's gate."""
    from vertebrae.scoring.overlap import OverlapIndexScorer, scoring_config_from_dict

    targets = protocol.targets
    part = recipe["part"]
    if part == "metric":
        from vertebrae.scoring.metric_registry import metric_from_config

        metric = metric_from_config(recipe["metric"])  # a built-in's compute makes every refusal of its check
        if "fold" in recipe:  # one fold of a metric run as jobs of its own (Metric.job_folds)
            return metric.compute_fold(block.matrix, targets, row_ids=block.row_ids, groups=protocol.groups,
                                       seed=recipe["seed"], fold=recipe["fold"])
        return metric.compute(block.matrix, targets, row_ids=block.row_ids, groups=protocol.groups,
                              seed=recipe["seed"]).to_dict()
    if part == "separatix":
        from vertebrae.scoring.separatix import SeparatixConfig, SeparatixScorer

        if overlap is None:
            raise ValidationError("the Separatix part needs the overlap part's result (its gate)")
        return SeparatixScorer(SeparatixConfig.from_dict(recipe["separatix"])).run(
            block.matrix, targets, overlap_score=overlap["score"], groups=protocol.groups,
            normalize_embeddings=recipe["normalize_embeddings"], fallback_max_dense_bytes=recipe["max_dense_bytes"],
        ).to_dict()
    scorer = OverlapIndexScorer(scoring_config_from_dict(recipe["scoring"], target_type))
    if part == "overlap":
        return scorer.score_targets(block.matrix, targets, seed=recipe["seed"], row_ids=block.row_ids).to_dict()
    from vertebrae.scoring.stability import check_subsample_minimums, draw_subsample, stability_repeat

    scorer.config_for(targets.target_type)
    if part == "stability":
        rows = None
        if recipe["subsample"] is not None:
            fraction = recipe["subsample"]["fraction"]
            check_subsample_minimums(targets, fraction)
            rows = draw_subsample(targets, fraction, recipe["subsample"]["sampling_seed"], repeat=recipe["repeat"])
        return stability_repeat(scorer, block.matrix, targets, block.row_ids, recipe["scoring_seed"], rows)
    if part == "row-resamples":  # as the one score job: the subsamples' warnings are in the result, not repeated
        fraction, first = recipe["subsample"]["fraction"], recipe["first"]
        check_subsample_minimums(targets, fraction)
        results = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i, (scoring_seed, sampling_seed) in enumerate(zip(recipe["scoring_seeds"],
                                                                   recipe["subsample"]["sampling_seeds"])):
                rows = draw_subsample(targets, fraction, sampling_seed, repeat=first + i)
                results.append(stability_repeat(scorer, block.matrix, targets, block.row_ids, scoring_seed, rows))
        return results
    raise ValidationError(f"unknown labelled partial {part!r}")


def run_score_partial(plan: str | Path, embeddings: str | Path, protocol: str | Path, output: str | Path,
                      overlap: str | Path | None = None) -> None:
    """``vertebrae score-labelled-partial``: one part of a candidate's labelled score (``overlap``: the overlap
    partial, which the Separatix part reads for its gate)."""
    spec = load_plan(plan, PART_STAGE)
    artifact = read_embeddings(embeddings, fingerprint=spec["embedding"]["fingerprint"])
    block = EmbeddingBlock(artifact.matrix, artifact.row_ids)
    prot, protocol_hash = _read_protocol(spec["protocol"], protocol)
    check_row_ids(block, prot.row_ids, "samples")
    overlap_result = None
    if spec["recipe"]["part"] == "separatix":
        if overlap is None:
            raise ValidationError(f"{plan}: the Separatix partial needs --overlap (the overlap partial)")
        overlap_result = _load_partial(overlap, spec["overlap"]["fingerprint"], artifact.manifest["content_hash"],
                                       protocol_hash)[1]["result"]
    result = compute_part(spec["recipe"], block, prot, spec["target_type"], overlap_result)
    payload = {"part": part_name(spec["recipe"]), "result": result,
               "contents": {"embedding": artifact.manifest["content_hash"], "protocol": protocol_hash},
               "embedding_metadata": block.metadata(),
               "compression_metadata": (artifact.manifest.get("metadata") or {}).get("compression")}
    write_json_artifact(output, KIND, payload, fingerprint=spec["fingerprint"], recipe=spec["recipe"],
                        metadata={COSTS_KEY: {"score_seconds": job_seconds()}})  # the merge adds the parts' up


def _load_partial(path: str | Path, fp: str, embedding_hash: str, protocol_hash: str
                  ) -> tuple[Any, dict[str, Any], Any]:
    """(recipe, payload, its job's costs: ``COSTS_KEY`` of its manifest) of a verified partial (schema,
    fingerprint, content hash, recipe) computed from the contents in place."""
    manifest, payload = read_json_document(path, KIND, fingerprint=fp)
    if fingerprint(KIND, manifest.get("recipe")) != fp:
        raise StaleArtifactError(f"artifact {path}: its recipe does not hash to its fingerprint {fp}", str(path))
    contents = payload.get("contents") if isinstance(payload, dict) else None
    if contents != {"embedding": embedding_hash, "protocol": protocol_hash}:
        raise StaleArtifactError(f"artifact {path}: stale labelled partial: computed from other embedding or protocol "
                                 "contents than those in place", str(path), always_move=True)
    return manifest["recipe"], payload, costs_of(manifest)


def merge_parts(plan: ScoringPlan, parts: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
                protocol: LabelledProtocol | None = None) -> dict[str, Any]:
    """The score payload (``score_embeddings``' plus ``compression_metadata``) from ``(recipe, partial payload)``
    pairs in ``part_recipes`` order; ``protocol`` (its targets, row ids and groups) combines a metric run fold by
    fold (``Metric.combine_folds``)."""
    from vertebrae.scoring.stability import stability_result

    by_part: dict[str, list[tuple[Mapping[str, Any], Mapping[str, Any]]]] = {}
    for recipe, payload in parts:
        by_part.setdefault(recipe["part"], []).append((recipe, payload))
    first = by_part["overlap"][0][1]
    for recipe, payload in parts:
        for key in ("embedding_metadata", "compression_metadata"):
            if payload.get(key) != first.get(key):
                raise ValidationError(f"partial {part_name(recipe)} disagrees with the overlap partial on {key}")
    stability = None
    if plan.stability is not None and plan.stability.enabled:
        repeats = sorted(by_part["stability"], key=lambda item: item[0]["repeat"])
        subsample = plan.stability.mode == "subsample"
        stability = stability_result(
            plan.stability, [payload["result"] for _, payload in repeats], first["embedding_metadata"]["n_rows"],
            [recipe["scoring_seed"] for recipe, _ in repeats],
            [recipe["subsample"]["sampling_seed"] for recipe, _ in repeats] if subsample else []).to_dict()
    resamples = {}
    if plan.row_resampling is not None:
        blocks = sorted(by_part["row-resamples"], key=lambda item: item[0]["first"])
        resamples["row_resamples"] = stability_result(
            plan.row_resampling.stability_config(), [result for _, payload in blocks for result in payload["result"]],
            first["embedding_metadata"]["n_rows"], [seed for recipe, _ in blocks for seed in recipe["scoring_seeds"]],
            [seed for recipe, _ in blocks for seed in recipe["subsample"]["sampling_seeds"]]).to_dict()
    metrics = _metric_results(by_part.get("metric", []), protocol)
    separatix = by_part["separatix"][0][1]["result"] if "separatix" in by_part else None
    return {"overlap": first["result"], "metrics": metrics, "stability": stability, "separatix": separatix,
            "embedding_metadata": first["embedding_metadata"], "compression_metadata": first["compression_metadata"],
            **resamples}


def _metric_results(parts: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
                    protocol: LabelledProtocol | None) -> dict[str, Any]:
    """Each metric's result by name, in merge order: a whole metric's partial result as it is, a metric run fold by
    fold combined from its folds' outputs."""
    folds: dict[str, list[tuple[Mapping[str, Any], Mapping[str, Any]]]] = {}
    for recipe, payload in parts:
        if "fold" in recipe:
            folds.setdefault(recipe["name"], []).append((recipe, payload))
    results: dict[str, Any] = {}
    for recipe, payload in parts:
        name = recipe["name"]
        if "fold" not in recipe:
            results[name] = payload["result"]
        elif name not in results:
            if protocol is None:
                raise ValidationError(f"metric {name!r} ran fold by fold: combining its folds needs the protocol")
            from vertebrae.scoring.metric_registry import metric_from_config

            results[name] = metric_from_config(recipe["metric"]).combine_folds(
                protocol.targets, row_ids=protocol.row_ids, groups=protocol.groups, seed=recipe["seed"],
                folds=[payload["result"] for _, payload in folds[name]]).to_dict()
    return results


def run_merge_partials(plan: str | Path, embeddings: str | Path, protocol: str | Path, output: str | Path,
                       partials: Sequence[str | Path] = ()) -> None:
    """``vertebrae merge-labelled-partials``: the score artifact of a candidate scored part by part, equal to the one
    ``vertebrae score`` writes. Every partial is verified (schema, fingerprint = the planned one, content hash,
    recipe) and must have been computed from the embedding and protocol contents in place (the embedding's manifest
    is read, not its rows); a missing or stale partial is refused naming its file. No ``partials`` given: the
    paths the merge spec plans."""
    spec = load_plan(plan, MERGE_STAGE)
    planned = spec["partials"]
    paths = list(partials) or [ref["path"] for ref in planned]
    if len(paths) != len(planned):
        raise ValidationError(f"{plan}: {len(paths)} partial files given, the plan has {len(planned)}")
    manifest = read_manifest(embeddings)
    if manifest.get("fingerprint") != spec["embedding"]["fingerprint"]:
        raise StaleArtifactError(f"artifact {embeddings}: fingerprint {manifest.get('fingerprint')}, expected "
                                 f"{spec['embedding']['fingerprint']}", str(embeddings))
    prot, protocol_hash = _read_protocol(spec["protocol"], protocol)
    scoring_plan = ScoringPlan.from_dict(spec["plan"], spec["target_type"])
    parts, costs = [], []
    for ref, path in zip(planned, paths):
        recipe, payload, cost = _load_partial(path, ref["fingerprint"], manifest["content_hash"], protocol_hash)
        parts.append((recipe, payload))
        costs.append(cost)
    expected = [fingerprint(KIND, r) for r in part_recipes(spec["embedding"]["fingerprint"],
                                                           spec["protocol"]["fingerprint"], scoring_plan)]
    if expected != [ref["fingerprint"] for ref in planned]:
        raise ArtifactError(f"{plan}: its partials are not those of its scoring plan; re-plan")
    payload = {**merge_parts(scoring_plan, parts, prot),
               THROUGHPUT_PAYLOAD: [(manifest.get("metadata") or {}).get(THROUGHPUT)]}  # as ``vertebrae score`` writes
    write_json_artifact(output, "score", payload, fingerprint=spec["fingerprint"], recipe=spec["recipe"],
                        metadata={COSTS_KEY: score_costs(payload[THROUGHPUT_PAYLOAD], costs)})  # own + parts' seconds


__all__ = ["KIND", "MERGE_STAGE", "PART_STAGE", "ROW_RESAMPLES_PER_JOB", "compute_part", "fanout_specs", "merge_parts", "part_name",
           "part_recipes", "run_merge_partials", "run_score_partial"]
