"""The views job of a labelled benchmark with target views (``vertebrae.planning.views``): every view's report.json
-> ``reports/BENCH/views.{json,md,png}`` (``vertebrae.reports.views``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from vertebrae.core.errors import ArtifactError, ValidationError
from vertebrae.reports.views import views_summary, write_views
from vertebrae.stages.plan import load_plan


def read_view_reports(spec: dict, reports: Sequence[str | Path]) -> dict[str, dict]:
    """view name -> its report document, the paths in the order the views spec plans them."""
    planned = spec["view_reports"]
    if len(reports) != len(planned):
        raise ValidationError(f"views of {spec['benchmark']!r}: {len(reports)} report(s) given, {len(planned)} planned")
    out = {}
    for item, path in zip(planned, reports):
        try:
            out[item["view"]] = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ArtifactError(f"report {path} of view {item['view']!r}: cannot be read as JSON: {exc}") from None
    return out


def run_views_report(plan: str | Path, reports: Sequence[str | Path], json_output: str | Path,
                     markdown_output: str | Path, figure_output: str | Path) -> None:
    """``vertebrae views-report``: the candidates x views table, nuisance verdicts and score-by-level figure."""
    spec = load_plan(plan, "views")
    summary = views_summary(read_view_reports(spec, reports), spec["views"], benchmark=spec["benchmark"],
                            primary=spec["primary"])
    write_views(summary, json_output, markdown_output, figure_output)


__all__ = ["read_view_reports", "run_views_report"]
