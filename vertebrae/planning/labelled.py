"""Planning of ``benchmarks:`` (labelled protocol): the job specs of one benchmark, and its in-process twin.

Per benchmark: one protocol spec; per extractor an optional fit, one embedding (sharded), one compression per
``compression`` entry; one score per (extractor, variant); one report over all candidates.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vertebrae.compression import variant_name
from vertebrae.core.errors import ConfigError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.data.declared.labelled import (
    declared_identity_key, declared_row_count, declared_targets, load_declared_dataset, load_declared_rows,
)
from vertebrae.data.split_files import with_split_files
from vertebrae.extractors.checkpoints import checkpoint_series
from vertebrae.extractors.registry import build_extractor
from vertebrae.scoring.metric_registry import metric_from_config
from vertebrae.scoring.overlap import (
    ContinuousOverlapScoringConfig,
    OverlapScoringConfig,
    check_config_classes,
    check_separable,
)
from vertebrae.scoring.separatix import SeparatixConfig
from vertebrae.scoring.stability import StabilityConfig
from vertebrae.stages.common import embedding_recipe, extractor_entry, fit_recipe, shard_bounds
from vertebrae.stages.plan import endpoint_layout
from vertebrae.stages.labelled import ScoringPlan, compression_recipe, protocol_recipe, score_recipe
from vertebrae.planning.comparison import comparison_config
from vertebrae.planning.config import (
    compressions_from_decl, config_from_decl, embedding_config, endpoint_shards, validate_config,
)
from vertebrae.planning.dag import WorkflowPlan, ref, segment_key

ENDPOINT = "samples"


def scoring_from_decl(bench: Mapping[str, Any], *, where: str) -> OverlapScoringConfig | ContinuousOverlapScoringConfig:
    """The benchmark's ``scoring`` (classes, labels) or ``continuous_scoring`` (regression) config."""
    regression = bench["dataset"].get("target_type") == "regression"
    key = "continuous_scoring" if regression else "scoring"
    cls = ContinuousOverlapScoringConfig if regression else OverlapScoringConfig
    return config_from_decl(cls, bench[key], where=f"{where}.{key}")


def scoring_plan_from_decl(bench: Mapping[str, Any], seed: int, *, where: str) -> ScoringPlan:
    """The benchmark's ScoringPlan: overlap config, metrics, stability, Separatix, primary metric."""
    stability, separatix = bench["stability"], bench["separatix"]
    try:
        return ScoringPlan(
            scoring=scoring_from_decl(bench, where=where),
            seed=seed,
            metrics=tuple(metric_from_config(entry) for entry in bench["metrics"]),
            stability=StabilityConfig(**stability) if stability["enabled"] else None,
            separatix=SeparatixConfig(**separatix) if separatix["enabled"] else None,
            primary_metric=bench["primary_metric"],
        )
    except ValueError as exc:  # a ConfigError too: prefixed with the benchmark's key
        raise ConfigError(f"{where}: {exc}") from None


def _check_against_targets(plan: ScoringPlan, dataset: Mapping[str, Any], where: str,
                           loaded: _Loaded) -> None:
    """What the score jobs would refuse from the targets alone, refused at plan time so that validate catches it:
    a ``k`` mapping or ``exclude_classes`` naming classes, classes too small for a prototype
    (``scoring.small_classes``), and multi-label targets whose labels always come together; every built-in metric's
    folds, shots, ``k``, small classes, split and target type (``BuiltinMetric.check``); a subsample stability
    analysis's minimums. The labels are read for it, except those of a WebDataset source without anything else to
    check (reading them is a pass over every shard; its score jobs refuse the same)."""
    from vertebrae.scoring.labelled_common import BuiltinMetric

    scoring = plan.scoring
    overlap = isinstance(scoring, OverlapScoringConfig)
    sharded = _sharded(dataset)
    named = overlap and (isinstance(scoring.k, Mapping) or bool(scoring.exclude_classes) or not sharded
                         or dataset.get("target_type") == "multilabel")
    builtin = [(i, m) for i, m in enumerate(plan.metrics) if isinstance(m, BuiltinMetric)]
    subsample = plan.stability is not None and plan.stability.enabled and plan.stability.mode == "subsample"
    if not (named or builtin or subsample):
        return
    loaded = loaded.dataset()
    if named:
        for check, key in ((check_config_classes, "scoring"), (check_separable, "dataset")):
            try:
                check(scoring, loaded.targets)
            except ValueError as exc:
                raise ConfigError(f"{where}.{key}: {exc}") from None
    for i, metric in builtin:
        try:
            metric.check(loaded.targets, row_ids=loaded.row_ids, seed=plan.seed, groups=loaded.groups)
        except ValueError as exc:
            raise ConfigError(f"{where}.metrics[{i}] ({metric.name!r}): {exc}") from None
    if subsample:
        from vertebrae.scoring.stability import check_subsample_minimums

        try:
            check_subsample_minimums(loaded.targets, plan.stability.subsample_fraction)
        except ValueError as exc:
            raise ConfigError(f"{where}.stability: {exc}") from None


class _Loaded:
    """A benchmark's dataset, loaded on the first ask only and then kept (the plan-time checks share one load)."""

    def __init__(self, dataset: Mapping[str, Any], base_dir: Path, where: str) -> None:
        self._args, self._loaded = (dataset, base_dir, where), None

    def dataset(self):
        if self._loaded is None:
            dataset, base_dir, where = self._args
            self._loaded = load_declared_dataset(dataset, base_dir=base_dir, where=f"{where}.dataset")
        return self._loaded


def _row_resampling(plan: ScoringPlan, bench: Mapping[str, Any], where: str, comparison_enabled: bool,
                    loaded: _Loaded) -> ScoringPlan:
    """The plan with the row resampling its comparison needs (``vertebrae.scoring.paired.rows.resolve`` of the
    benchmark's ``row_resampling``, by default a single-label benchmark ranked by OverlapIndex with fewer than 10
    classes); the labels are read for it, except a WebDataset source's unless ``mode: rows`` asks."""
    from dataclasses import replace

    from vertebrae.scoring.paired.rows import resolve

    declared = row_resampling_of(bench, where)
    dataset = bench["dataset"]
    asked = declared.mode == "rows"
    if not asked and (dataset.get("target_type", "classification") != "classification"
                      or plan.primary_metric != "overlap" or not comparison_enabled or declared.mode == "class"):
        return plan
    try:
        rows = resolve(declared, loaded.dataset().targets, primary_metric=plan.primary_metric,
                       comparison_enabled=comparison_enabled)
    except ValueError as exc:
        raise ConfigError(f"{where}.row_resampling: {exc}") from None
    return plan if rows is None else replace(plan, row_resampling=rows)


def row_resampling_of(bench: Mapping[str, Any], where: str):
    """A labelled benchmark's ``row_resampling`` (a RowResamplingConfig: ConfigError naming the key), decided as
    the workflow's plan and the in-process benchmark both use it: ``auto`` over a WebDataset source pairs over
    classes (deciding would read every shard's label at each plan)."""
    from vertebrae.scoring.paired.rows import RowResamplingConfig

    try:
        declared = RowResamplingConfig.from_dict(bench.get("row_resampling") or {})
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{where}.row_resampling: {exc}") from None
    if declared.mode == "auto" and _sharded(bench["dataset"]):
        from dataclasses import replace

        return replace(declared, mode="class")
    return declared


def _sharded(dataset: Mapping[str, Any]) -> bool:
    """A WebDataset source: reading its labels is a pass over every shard."""
    return isinstance(dataset.get("source"), Mapping) and dataset["source"].get("type") == "webdataset"


def fans_out(bench: Mapping[str, Any]) -> bool:
    """A labelled benchmark's ``fanout``: true/false as declared; ``auto`` fans out when a metric besides
    OverlapIndex is declared (adding or changing one then reruns only its job), else one score job a candidate."""
    return bool(bench["metrics"]) if bench["fanout"] == "auto" else bool(bench["fanout"])


def _add_score(result: WorkflowPlan, spec: dict[str, Any], plan: ScoringPlan, fanout: bool) -> str:
    """Plan one candidate's score: the one score job, or (``fanout``) one partial job per metric and the merge job,
    which writes the same score artifact under the same fingerprint (``stages.labelled_partials``). A score an
    earlier benchmark planned (same fingerprint) keeps that plan."""
    if not fanout or spec["fingerprint"] in result.specs:
        return result.add(spec)
    from vertebrae.stages.labelled_partials import fanout_specs

    partials, merge = fanout_specs(spec, plan, lambda fp: result.artifact_path("labelled-partial", fp))
    for partial in partials:
        result.add(partial)
    return result.add(merge)


def check_own_rows(source: Mapping[str, Any], extractor: Any, *, base_dir: Path, where: str, ext_where: str) -> None:
    """A labels-only table (``source_labels_only``) is valid only when every candidate brings its own rows (reads
    them from files by id); refuse a candidate that needs the dataset's inputs, naming it."""
    from vertebrae.data.sources import source_labels_only

    if getattr(extractor, "reads_rows", False):
        return
    why = source_labels_only(source, base_dir=Path(base_dir), where=f"{where}.source")
    if why is not None:
        raise ConfigError(f"{ext_where}: candidate {extractor.name!r} needs the dataset's inputs, but {where}.source is "
                          f"a labels-only table ({why}); give this candidate its own rows (type: precomputed, path: "
                          "a file of embeddings with ids) or add feature columns to the table")


def plan_labelled(result: WorkflowPlan, name: str, bench: Mapping[str, Any], config: Mapping[str, Any],
                  base_dir: Path) -> None:
    """Add every job spec of labelled benchmark ``name`` to ``result``."""
    where = f"benchmarks.{name}"
    dataset = bench["dataset"]
    identity_key = declared_identity_key(dataset, base_dir=base_dir, where=f"{where}.dataset")
    n_rows = declared_row_count(dataset, base_dir=base_dir, where=f"{where}.dataset")
    batch_size = config["embedding"]["batch_size"]
    loaded = _Loaded(dataset, base_dir, where)
    bench = with_split_files(bench, base_dir=base_dir, where=where, row_ids=lambda: loaded.dataset().row_ids)
    scoring_plan = scoring_plan_from_decl(bench, config["seed"], where=where)
    _check_against_targets(scoring_plan, dataset, where, loaded)
    scoring_plan = _row_resampling(scoring_plan, bench, where, comparison_config(config, "benchmarks", name).enabled,
                                   loaded)
    compressions = compressions_from_decl(bench["compression"], where=f"{where}.compression")
    common = {"dataset": dataset, "identity": identity_key, "where": f"{where}.dataset"}
    # a WebDataset source's tar files: shards and batches follow them, and a shard job opens its own only
    segments, tars = endpoint_layout(common, base_dir)
    p_recipe = protocol_recipe(identity_key, declared_targets(dataset))
    protocol_fp = result.add({"stage": "protocol", "fingerprint": fingerprint("protocol", p_recipe), "recipe": p_recipe, **common})
    protocol_ref = ref(protocol_fp, result.artifact_path("protocol", protocol_fp))
    candidates = []
    dataset_ids = None  # read once, for precomputed files only
    for ext_name, decl in bench["extractors"].items():
        ext_where = f"{where}.extractors.{ext_name}"
        extractor = build_extractor(ext_name, decl, where=ext_where)
        check_own_rows(dataset["source"], extractor, base_dir=base_dir, where=f"{where}.dataset", ext_where=ext_where)
        if getattr(extractor, "reads_rows", False):  # a precomputed file: every dataset row id and no other
            if dataset_ids is None:
                dataset_ids = load_declared_rows(dataset, base_dir=base_dir, where=f"{where}.dataset", start=0, stop=n_rows)[1]
            extractor.check_rows(dataset_ids, endpoint=ENDPOINT)
        job = {**common, "extractor": extractor_entry(ext_name, decl, ext_where), "endpoint": ENDPOINT}
        fit_ref = None
        if extractor.learns:
            f_recipe = fit_recipe(identity_key, ENDPOINT, extractor)
            fit_fp = result.add({"stage": "fit", "fingerprint": fingerprint("fitted-extractor", f_recipe), "recipe": f_recipe, **job})
            result.size(fit_fp, extractor, rows=n_rows, batch_size=batch_size)
            fit_ref = ref(fit_fp, result.artifact_path("fitted", fit_fp))
        e_recipe = embedding_recipe(identity_key, ENDPOINT, extractor)
        bounds = shard_bounds(n_rows, endpoint_shards(bench, config, extractor, n_rows), batch_size=batch_size,
                              segments=segments)
        embed_fp = result.add({
            "stage": "embed", "fingerprint": fingerprint("embedding", e_recipe), "recipe": e_recipe, **job,
            "n_rows": n_rows, "shards": [list(b) for b in bounds], "batch_size": batch_size, "fit": fit_ref,
            **segment_key(segments, tars),
        })
        result.size(embed_fp, extractor, rows=max(b - a for a, b in bounds), batch_size=batch_size)
        embedding_ref = ref(embed_fp, result.artifact_path("embedding", embed_fp))
        variants = [(ext_name, embedding_ref, None)]
        for compression in compressions:
            c_recipe = compression_recipe(embed_fp, compression)
            compressed_fp = result.add({
                "stage": "compress", "fingerprint": fingerprint("compressed", c_recipe), "recipe": c_recipe,
                "embedding": embedding_ref, "compression": compression.to_dict(),
            })
            variants.append((variant_name(ext_name, compression), ref(compressed_fp, result.artifact_path("compressed", compressed_fp)),
                             compression.to_dict()))
        for variant, scored_ref, compression in variants:
            s_recipe = score_recipe(scored_ref["fingerprint"], protocol_fp, scoring_plan)
            score_fp = _add_score(result, {
                "stage": "score", "fingerprint": fingerprint("score", s_recipe), "recipe": s_recipe,
                "embedding": scored_ref, "protocol": protocol_ref, "plan": scoring_plan.to_dict(),
                "target_type": dataset["target_type"],
            }, scoring_plan, fans_out(bench))
            candidates.append({"name": variant, "score": ref(score_fp, result.artifact_path("score", score_fp)), "embedding": embed_fp,
                               "scored_embedding": scored_ref["fingerprint"], "extractor": extractor.recipe(),
                               "compression": compression})
    r_recipe = {"benchmark": name, "protocol": protocol_fp, "candidates": result.recipe_refs(candidates),
                "plan": scoring_plan.to_dict()}
    series = checkpoint_series(bench["extractors"])  # checkpoint sweeps: the report draws score against step
    if series:
        r_recipe["checkpoints"] = series
    result.reports[name] = result.add({
        **r_recipe, "candidates": candidates, "stage": "report", "fingerprint": fingerprint("report", r_recipe), "recipe": r_recipe,
        "protocol": protocol_ref, "target_type": dataset["target_type"],
    })


def benchmarks_from_config(config: Mapping[str, Any], *, base_dir: str | Path = "."):
    """In-process ``Benchmark`` objects for every benchmark of ``config``, with the workflow's settings."""
    from vertebrae.protocols.labelled import Benchmark

    config = validate_config(config)
    benchmarks = {}
    for name, bench in config.get("benchmarks", {}).items():
        where = f"benchmarks.{name}"
        dataset = load_declared_dataset(bench["dataset"], base_dir=Path(base_dir), where=f"{where}.dataset")
        bench = with_split_files(bench, base_dir=Path(base_dir), where=where, row_ids=lambda: dataset.row_ids)
        extractors = [build_extractor(n, d, where=f"{where}.extractors.{n}") for n, d in bench["extractors"].items()]
        for extractor in extractors:
            check_own_rows(bench["dataset"]["source"], extractor, base_dir=Path(base_dir), where=f"{where}.dataset",
                           ext_where=f"{where}.extractors.{extractor.name}")
        embedding = embedding_config(bench, config)
        scoring_plan = scoring_plan_from_decl(bench, config["seed"], where=where)
        benchmarks[name] = Benchmark(
            dataset, extractors, metrics=scoring_plan.metrics, primary_metric=scoring_plan.primary_metric,
            scoring_config=scoring_plan.scoring,
            compression_configs=compressions_from_decl(bench["compression"], where=f"{where}.compression"),
            stability_config=scoring_plan.stability, separatix_config=scoring_plan.separatix,
            embedding_config=embedding, seed=config["seed"], name=name,
            comparison_config=comparison_config(config, "benchmarks", name),
            row_resampling=row_resampling_of(bench, where),
        )
    return benchmarks


__all__ = ["ENDPOINT", "benchmarks_from_config", "plan_labelled", "scoring_from_decl", "scoring_plan_from_decl"]
