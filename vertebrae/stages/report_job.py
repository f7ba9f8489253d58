"""``vertebrae compare`` and ``vertebrae report``: a benchmark's paired comparison and its ranked report, whichever
protocol the report spec's stage names.

The comparison artifact's payload is ``{"report": <report spec fingerprint>, "comparison": <PairedComparison
document> | None, "skipped": <why there is none> | None}`` (and ``"costs"``, a non-default ``CostConfig`` of the compare
spec, which the report carries in its ``metadata["costs"]``); the report job refuses one made for another report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from vertebrae.core.artifacts import read_json_artifact, write_json_artifact
from vertebrae.core.errors import ArtifactError
from vertebrae.core.provenance import software
from vertebrae.reports.costs import CONFIG_KEY as COSTS, CostConfig
from vertebrae.reports.steps import with_step_series
from vertebrae.scoring.paired import ComparisonConfig, PairedComparison
from vertebrae.stages.plan import load_plan


def load_report(plan: str | Path, protocol: str | Path, scores: Sequence[str | Path]):
    """The report object of the report spec ``plan``: a "retrieval-report" or "zero-shot-report" spec goes to that
    protocol's job, any other to the labelled one (which refuses a spec that is not a "report"); each checks the
    spec, the protocol artifact and every score."""
    stage = read_json_artifact(plan, "plan", fingerprint=None).get("stage")
    if stage == "retrieval-report":
        from vertebrae.stages.retrieval_jobs import load_report as load
    elif stage == "zero-shot-report":
        from vertebrae.stages.zero_shot_jobs import load_report as load
    else:
        from vertebrae.stages.labelled_jobs import load_report as load
    return load(plan, protocol, scores)


def run_compare(plan: str | Path, report_plan: str | Path, protocol: str | Path, scores: Sequence[str | Path],
                output: str | Path) -> None:
    """The paired comparison of the report spec ``report_plan``'s ranked candidates, under the compare spec ``plan``."""
    spec = load_plan(plan, "compare")
    report_fp = read_json_artifact(report_plan, "plan", fingerprint=spec["report"]["fingerprint"])["fingerprint"]
    report = load_report(report_plan, protocol, scores).with_comparison(ComparisonConfig.from_dict(spec["comparison"]))
    payload = {"report": report_fp, "comparison": None if report.comparison is None else report.comparison.to_dict(),
               "skipped": report.comparison_skipped}
    if getattr(report, "metric_comparisons", None):  # labelled: every declared metric's comparison
        payload["metric_comparisons"] = report.metric_comparisons
    if spec.get(COSTS) is not None:
        payload[COSTS] = CostConfig.from_dict(spec[COSTS]).to_dict()
    write_json_artifact(output, "comparison", payload, fingerprint=spec["fingerprint"], recipe=spec["recipe"])


def run_report(plan: str | Path, protocol: str | Path, scores: Sequence[str | Path], json_output: str | Path,
               markdown_output: str | Path, *, comparison: str | Path | None = None) -> None:
    """Rank the score artifacts ``scores`` of the report spec ``plan`` into JSON and Markdown, carrying the
    comparison artifact ``comparison`` (which must have been made for this report spec) and every candidate's cost
    (``RankedReport.with_costs``) from what its jobs measured of themselves, carried in its score artifact
    (``vertebrae.reports.costs``). No Snakemake benchmark record is read (a job reads only its declared inputs)."""
    report = load_report(plan, protocol, scores)
    if comparison is not None:
        payload = read_json_artifact(comparison, "comparison", fingerprint=None)
        report_fp = read_json_artifact(plan, "plan", fingerprint=None)["fingerprint"]
        if payload.get("report") != report_fp:
            raise ArtifactError(f"{comparison}: a comparison of report {payload.get('report')!r}, not of {report_fp!r} "
                                f"({plan}); rerun its compare job")
        document = payload["comparison"]
        report = replace(report, comparison=None if document is None else PairedComparison.from_dict(document),
                         comparison_skipped=payload["skipped"])
        if payload.get("metric_comparisons"):
            report = replace(report, metric_comparisons=dict(payload["metric_comparisons"]))
        report = report.with_cost_config(CostConfig.from_dict(payload.get(COSTS)))
        if report.comparison is not None:
            planned = [r.name for r in report.ranked_results()]
            if [c["name"] for c in report.comparison.to_dict()["candidates"]] != planned:
                raise ArtifactError(f"{comparison}: compares other candidates than the report ranks ({planned})")
    report = with_step_series(report.with_costs())  # a checkpoint sweep's numbers, with their intervals
    report = report.with_software(software())  # the version (and git revision) that wrote it
    report.save_json(json_output)
    report.save_markdown(markdown_output)


__all__ = ["load_report", "run_compare", "run_report"]
