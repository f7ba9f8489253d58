"""``vertebrae summary``: the cross-benchmark summary (``vertebrae.reports.summary``) of the workflow's reports.

Every report.json is verified first (``vertebrae.stages.verify.check_report``: a corrupt one is refused naming its
path, and the CLI moves it aside for the workflow to rebuild); the CSV, Markdown and JSON files are then written
atomically.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from vertebrae.core.artifacts import atomic_write, write_json
from vertebrae.core.provenance import software
from vertebrae.reports.summary import build_summary, summary_csv, summary_markdown
from vertebrae.stages.verify import check_report


def run_summary(reports: Sequence[str | Path], output_csv: str | Path, output_markdown: str | Path,
                output_json: str | Path) -> None:
    """``vertebrae summary --output-csv ... --output-markdown ... --output-json ... REPORT.json...``: verify
    ``reports`` and write their summary as CSV, Markdown and JSON (the JSON and Markdown stamped with the version
    that wrote them)."""
    summary = build_summary([(str(path), check_report(path)) for path in reports]).with_software(software())
    for path, text in ((output_csv, summary_csv(summary)), (output_markdown, summary_markdown(summary))):
        with atomic_write(path) as tmp:
            Path(tmp).write_text(text, encoding="utf-8")
    write_json(output_json, summary.to_dict())


__all__ = ["run_summary"]
