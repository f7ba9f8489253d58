"""`snakemake --report report.html` after the default run: figures from the figures rule, with their captions."""

from __future__ import annotations

import json

from workflow_support import snakemake


def test_html_report_bundles_every_reports_figures(workdir_copy):
    reports = sorted(p.parent.name for p in (workdir_copy / "results" / "reports").glob("*/report.json"))
    assert reports
    for name in reports:
        folder = workdir_copy / "results" / "reports" / name
        json.loads((folder / "report.json").read_text())
        for figure in ("ranking.png", "detail.png"):
            assert (folder / figure).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", (name, figure)
    snakemake(workdir_copy, "--report", "report.html")
    html = (workdir_copy / "report.html").read_text(encoding="utf-8", errors="replace")
    assert len(html) > 50_000
    for name in reports:
        assert f"results/reports/{name}/ranking.png" in html and f"results/reports/{name}/detail.png" in html
    assert "Ranking of benchmark" in html and "confusion matrix" in html  # the captions
