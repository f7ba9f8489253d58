"""Planning of a labelled benchmark's target views and hierarchy levels (``vertebrae.data.target_views``).

``plan_labelled`` plans the benchmark on its dataset's own target; ``plan_views`` then adds, per view, one
protocol (its targets: the same rows, so every candidate's embeddings are the very same jobs), one score per
candidate (the same score jobs, fan-out included, keyed by that protocol) and one labelled report named
``BENCH@VIEW`` (its paired comparison comes from ``plan_comparisons`` as for any report). The primary view's report
is the benchmark's own (``BENCH``): without ``targets:`` that is the dataset's target, unchanged, so every existing
fingerprint stays as it was. Last, one ``views`` job reads every view's report.json and writes the candidates x
views table, the nuisance verdicts and the score-by-level figure (``reports/BENCH/views.{json,md,png}``). Adding a
view or a level adds its protocol, scores, compare and report jobs and reruns the views job, nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.data.declared.labelled import load_declared_dataset
from vertebrae.data.split_files import with_split_files
from vertebrae.data.target_views import (
    Hierarchy, ResolvedView, TargetView, load_view, resolve_views, view_dataset, views_from_decl,
)
from vertebrae.extractors.checkpoints import checkpoint_series
from vertebrae.planning.comparison import comparison_config
from vertebrae.planning.dag import WorkflowPlan, ref
from vertebrae.planning.config import validate_config
from vertebrae.planning.labelled import (
    _add_score, _check_against_targets, _row_resampling, benchmarks_from_config, fans_out, row_resampling_of,
    scoring_from_decl, scoring_plan_from_decl,
)
from vertebrae.stages.labelled import protocol_recipe, score_recipe
from vertebrae.stages.plan import references
from vertebrae.stages.labelled_partials import MERGE_STAGE, PART_STAGE

VIEW_SEPARATOR = "@"  # never in a benchmark name: BENCH@VIEW names no other benchmark's report
VIEWS_FILES = ("json", "md", "png")


def declares_views(bench: Mapping[str, Any]) -> bool:
    return bool(bench.get("targets")) or bench.get("hierarchy") is not None


def view_report_name(benchmark: str, view: str, primary: str) -> str:
    return benchmark if view == primary else f"{benchmark}{VIEW_SEPARATOR}{view}"


def views_paths(benchmark: str, plan: WorkflowPlan) -> dict[str, str]:
    """``reports/BENCH/views.{json,md,png}`` under the plan's out folder."""
    return {suffix: plan.path(f"reports/{benchmark}/views.{suffix}") for suffix in VIEWS_FILES}


class _Shim:
    """What the plan-time checks of ``planning.labelled`` ask of a loaded dataset."""

    def __init__(self, dataset: Any) -> None:
        self._dataset = dataset

    def dataset(self) -> Any:
        return self._dataset


def resolve_declared(bench: Mapping[str, Any], *, base_dir: Path, where: str):
    """(base dataset, resolved views, primary view name) of a labelled benchmark's declaration."""
    views, primary = views_from_decl(bench, where=where)
    hdecl = bench.get("hierarchy")
    hierarchy = None if hdecl is None else Hierarchy.from_dict(hdecl, where=f"{where}.hierarchy")
    dataset_decl = bench["dataset"]
    base = load_declared_dataset(dataset_decl, base_dir=base_dir, where=f"{where}.dataset")
    resolved = resolve_views(views, hierarchy, base,
                             lambda view: load_view(dataset_decl, view, base, base_dir=base_dir, where=where),
                             base_dir=base_dir, where=where)
    return base, resolved, primary


def view_entry(item: ResolvedView, bench: Mapping[str, Any]) -> dict[str, Any]:
    """What a protocol job needs to rebuild a view's targets (``data.target_views.declared_view_targets``)."""
    view = item.view
    if view.hierarchy is not None:
        return {"name": view.name, "hierarchy": dict(bench["hierarchy"]), "level": view.level}
    return {"name": view.name, "decl": dict(bench["targets"][view.name])}


def plan_views(result: WorkflowPlan, name: str, bench: Mapping[str, Any], config: Mapping[str, Any],
               base_dir: Path) -> None:
    """Add the view jobs of labelled benchmark ``name`` (planned by ``plan_labelled`` first) to ``result``."""
    where = f"benchmarks.{name}"
    base, resolved, primary = resolve_declared(bench, base_dir=base_dir, where=where)
    bench = with_split_files(bench, base_dir=base_dir, where=where, row_ids=lambda: base.row_ids)
    own_fp = result.reports[name]  # plan_labelled's report: the dataset's own target
    base_report = result.specs[own_fp]
    base_candidates = base_report["candidates"]
    compare_enabled = comparison_config(config, "benchmarks", name).enabled
    reports: dict[str, str] = {}
    entries = []
    for item in resolved:
        view = item.view
        if item.alias is not None:
            entries.append({"view": view.name, "role": view.role, "type": item.targets.target_type,
                            "level": view.level, "alias": item.alias})
            continue
        report_name = view_report_name(name, view.name, primary)
        if item.recipe is None:  # the dataset's own target: plan_labelled's report
            report_fp = own_fp
        else:
            report_fp = _plan_view(result, name, report_name, bench, config, base_dir, item, base, base_candidates,
                                   base_report["protocol"]["fingerprint"], compare_enabled)
        reports[view.name] = report_fp
        result.reports[report_name] = report_fp
        entries.append({"view": view.name, "role": view.role, "type": item.targets.target_type, "level": view.level,
                        "alias": None, "report": report_name})
    if own_fp not in reports.values():  # `targets:` leaves the dataset's own target out: nothing requests its jobs
        _drop_unrequested(result, own_fp)
    hierarchy = bench.get("hierarchy")
    recipe = {"benchmark": name, "primary": primary, "views": entries,
              "reports": {view: reports[view] for view in reports},
              "levels": None if hierarchy is None else [e["view"] for e in entries if e["level"] is not None]}
    fp = result.add({"stage": "views", "fingerprint": fingerprint("views", recipe), "recipe": recipe,
                     "benchmark": name, "primary": primary, "views": entries, "levels": recipe["levels"],
                     "view_reports": [{"view": e["view"], "path": result.report_paths(e["report"])["json"]}
                                      for e in entries if e["alias"] is None],
                     "outputs": views_paths(name, result)})
    result.views[name] = fp


_DROPPABLE = ("report", "protocol", "score", MERGE_STAGE, PART_STAGE)  # never an embedding, fit or compression


def _refs(value: Any) -> Iterator[str]:
    """The fingerprints of the ``{"fingerprint", "path"}`` references inside a spec."""
    return (ref["fingerprint"] for ref in references(value) if isinstance(ref["fingerprint"], str))


def _drop_unrequested(result: WorkflowPlan, report_fp: str) -> None:
    """Remove report ``report_fp`` and the protocol and score jobs only it needs (a job another spec references, a
    score another benchmark shares above all, stays)."""
    mine, queue = set(), [report_fp]
    while queue:
        fp = queue.pop()
        spec = result.specs.get(fp)
        if fp in mine or spec is None or (fp != report_fp and spec["stage"] not in _DROPPABLE):
            continue
        mine.add(fp)
        queue += list(_refs({k: v for k, v in spec.items() if k != "fingerprint"}))
    alive, queue = set(), [r for fp, spec in result.specs.items() if fp not in mine for r in _refs(spec) if r != fp]
    while queue:
        fp = queue.pop()
        if fp in mine and fp not in alive:
            alive.add(fp)
            queue += list(_refs({k: v for k, v in result.specs[fp].items() if k != "fingerprint"}))
    for fp in mine - alive:
        for table in (result.specs, result.layouts, result.shard_counts, result.memory, result.fanouts):
            table.pop(fp, None)


def _plan_view(result: WorkflowPlan, name: str, report_name: str, bench: Mapping[str, Any],
               config: Mapping[str, Any], base_dir: Path, item: ResolvedView, base: Any,
               base_candidates: list[dict[str, Any]], base_protocol: str, compare_enabled: bool) -> str:
    view: TargetView = item.view
    where = f"benchmarks.{name}.targets.{view.name}"
    target_type = item.targets.target_type
    vbench = {**bench, "dataset": {**bench["dataset"], "target_type": target_type}}
    dataset = view_dataset(base, view, item.targets, item.recipe)
    scoring_plan = scoring_plan_from_decl(vbench, config["seed"], where=where)
    shim = _Shim(dataset)
    try:
        _check_against_targets(scoring_plan, vbench["dataset"], where, shim)
        scoring_plan = _row_resampling(scoring_plan, vbench, where, compare_enabled, shim)
    except ConfigError as exc:
        raise ConfigError(f"{where} (view {view.name!r}): {exc}") from None
    identity_key = result.specs[base_protocol]["identity"]  # as the benchmark's own protocol: groups folded in
    p_recipe = protocol_recipe(identity_key, dataset.target_declaration)
    common = {"dataset": bench["dataset"], "identity": identity_key, "where": f"benchmarks.{name}.dataset"}
    protocol_fp = result.add({"stage": "protocol", "fingerprint": fingerprint("protocol", p_recipe), "recipe": p_recipe,
                              **common, "view": view_entry(item, bench), "benchmark_where": f"benchmarks.{name}"})
    protocol_ref = ref(protocol_fp, result.artifact_path("protocol", protocol_fp))
    candidates = []
    for candidate in base_candidates:
        scored_fp = candidate["scored_embedding"]
        kind = "embedding" if candidate["compression"] is None else "compressed"
        scored_ref = ref(scored_fp, result.artifact_path(kind, scored_fp))
        s_recipe = score_recipe(scored_fp, protocol_fp, scoring_plan)
        score_fp = _add_score(result, {
            "stage": "score", "fingerprint": fingerprint("score", s_recipe), "recipe": s_recipe,
            "embedding": scored_ref, "protocol": protocol_ref, "plan": scoring_plan.to_dict(), "target_type": target_type,
        }, scoring_plan, fans_out(bench))
        candidates.append({**candidate, "score": ref(score_fp, result.artifact_path("score", score_fp))})
    r_recipe = {"benchmark": report_name, "protocol": protocol_fp, "candidates": result.recipe_refs(candidates),
                "plan": scoring_plan.to_dict()}
    series = checkpoint_series(bench["extractors"])  # checkpoint sweeps: each view's report draws score against step
    if series:
        r_recipe["checkpoints"] = series
    if view.role == "nuisance":  # ranked lowest first: a role change rewrites the report (a task view's recipe as was)
        r_recipe["role"] = view.role
    return result.add({
        **r_recipe, "candidates": candidates, "stage": "report", "fingerprint": fingerprint("report", r_recipe),
        "recipe": r_recipe, "protocol": protocol_ref, "target_type": target_type,
        "target_view": {"name": view.name, "role": view.role},
    })


def views_benchmarks_from_config(config: Mapping[str, Any], *, base_dir: str | Path = "."):
    """In-process ``ViewsBenchmark`` objects for every labelled benchmark of ``config`` that declares views, with
    the workflow's settings (the twin of ``planning.labelled.benchmarks_from_config``)."""
    from vertebrae.protocols.views import ViewsBenchmark

    config = validate_config(config)
    out = {}
    for name, bench in config.get("benchmarks", {}).items():
        if not declares_views(bench):
            continue
        where = f"benchmarks.{name}"
        benchmark = benchmarks_from_config({**config, "benchmarks": {name: bench}}, base_dir=base_dir)[name]
        base, resolved, primary = resolve_declared(bench, base_dir=Path(base_dir), where=where)
        scoring = [scoring_from_decl({**bench, "dataset": {**bench["dataset"], "target_type": kind}}, where=where)
                   for kind in ("classification", "regression")]
        plan = benchmark.plan
        out[name] = ViewsBenchmark.from_resolved(
            base, benchmark.extractors, resolved, primary, name=name, metrics=plan.metrics,
            primary_metric=plan.primary_metric, scoring_config=scoring[0], continuous_scoring_config=scoring[1],
            compression_configs=benchmark.compression_configs, stability_config=plan.stability,
            separatix_config=plan.separatix, embedding_config=benchmark.embedding_config, seed=plan.seed,
            comparison_config=benchmark.comparison_config, row_resampling=row_resampling_of(bench, where))
    return out


__all__ = ["VIEW_SEPARATOR", "declares_views", "plan_views", "resolve_declared", "view_report_name", "views_paths",
           "views_benchmarks_from_config"]
