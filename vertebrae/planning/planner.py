"""``plan(config)``: the config validated and every job planned into a ``WorkflowPlan`` (one module per protocol)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError
from vertebrae.data.sources.one_look import one_pass
from vertebrae.core.out_folder import check_out_folder, normal_out, writing_to
from vertebrae.planning.comparison import plan_comparisons
from vertebrae.planning.config import check_benchmark_names, check_config_files, validate_config
from vertebrae.planning.dag import WorkflowPlan
from vertebrae.planning.labelled import plan_labelled
from vertebrae.planning.retrieval import plan_retrieval
from vertebrae.planning.sweeps import group_layer_sweeps
from vertebrae.planning.views import declares_views, plan_views
from vertebrae.planning.zero_shot import plan_zero_shot


@one_pass()  # each data file looked at once per plan (vertebrae.data.sources.one_look)
def plan(config: Mapping[str, Any], *, base_dir: str | Path = ".",
         config_files: Iterable[str | Path] = (),
         listed_reports: Callable[[str], Iterable[str]] | None = None) -> WorkflowPlan:
    """Validate ``config`` and plan every job; paths in the config resolve against ``base_dir``.

    ``config_files``: the files ``config`` was read from by another parser (Snakemake's), re-read here so that a
    key given twice (silently dropping a block there) is refused naming the file, key and lines.
    ``listed_reports``: where the out folder lies elsewhere (object storage), the files under ``OUT/reports/``
    (``<name>/<file>``) given the out folder: ``other_reports`` comes from that listing, not from ``base_dir``.
    """
    check_config_files(config_files)
    config = validate_config(config)
    check_benchmark_names(config)
    base_dir = Path(base_dir)
    out = normal_out(config["out"])
    check_out_folder(out, base_dir, where="config key out")
    with writing_to(out):  # data files' digests are cached in the out folder's state
        planned = _plan(config, base_dir, WorkflowPlan(threads=dict(config["threads"]), out=out))
    planned.other_reports = other_reports(planned, base_dir, listed_reports)
    return planned


def other_reports(planned: WorkflowPlan, base_dir: Path,
                  listed: Callable[[str], Iterable[str]] | None = None) -> dict[str, list[str]]:
    """The report folders other configs wrote into the out folder (``OUT/reports/<name>/`` holding a report.json,
    with the files the pages read: ``reports.report_page.report_folders``, a listing of ``reports/`` and of each
    folder in it), less this config's own (its final outputs): the pages over the whole out folder declare them.
    ``listed``: the out folder's files under ``reports/`` given the out folder (on object storage, the bucket's:
    ``core.storage.list_under``), read by the same rules (``report_folders_listed``) instead of ``base_dir``."""
    from vertebrae.reports.report_page import report_folders, report_folders_listed

    own = {*planned.reports, *planned.retrieval_reports, *planned.zero_shot_reports}
    found = (report_folders(base_dir / planned.out) if listed is None
             else report_folders_listed(listed(planned.out)))
    return {name: files for name, files in found.items() if name not in own}


def _plan(config: Mapping[str, Any], base_dir: Path, result: WorkflowPlan) -> WorkflowPlan:
    for name, bench in config.get("benchmarks", {}).items():
        plan_labelled(result, name, bench, config, base_dir)
        if declares_views(bench):
            plan_views(result, name, bench, config, base_dir)
    for name, bench in config.get("retrieval", {}).items():
        if name in result.reports:
            raise ConfigError(f"retrieval.{name}: a labelled benchmark has the same name; report names must be unique")
        plan_retrieval(result, name, bench, config, base_dir)
    for name, bench in config.get("zero_shot", {}).items():
        if name in result.reports or name in result.retrieval_reports:
            raise ConfigError(f"zero_shot.{name}: another benchmark has the same name; report names must be unique")
        plan_zero_shot(result, name, bench, config, base_dir)
    group_layer_sweeps(result)
    plan_comparisons(result, config)
    return result
