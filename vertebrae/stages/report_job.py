"""``vertebrae report``: the ranked report of one report job spec, whichever protocol the plan's stage names."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from vertebrae.core.artifacts import read_json_artifact


def run_report(plan: str | Path, protocol: str | Path, scores: Sequence[str | Path], json_output: str | Path,
               markdown_output: str | Path) -> None:
    """Rank the score artifacts ``scores`` of the report spec ``plan`` into JSON and Markdown: a "retrieval-report" or
    "zero-shot-report" spec goes to that protocol's report job, any other to the labelled one (which refuses a spec
    that is not a "report"); each checks the spec, the protocol artifact and every score."""
    stage = read_json_artifact(plan, "plan", fingerprint=None).get("stage")
    if stage == "retrieval-report":
        from vertebrae.stages.retrieval_jobs import run_report as report
    elif stage == "zero-shot-report":
        from vertebrae.stages.zero_shot_jobs import run_report as report
    else:
        from vertebrae.stages.labelled_jobs import run_report as report
    report(plan, protocol, scores, json_output, markdown_output)


__all__ = ["run_report"]
