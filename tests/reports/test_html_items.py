"""The HTML pages of a report for `snakemake --report`: cut from report.md by kind, every text escaped."""

from __future__ import annotations

import pytest

from vertebrae.core.errors import ArtifactError, ValidationError
from vertebrae.reports.html_items import (
    ITEMS,
    item_targets,
    report_items,
    report_options,
    write_report_items,
)

LABELLED = """# vertebrae report: digits

Labelled protocol on dataset `declared:digits@1`. Seed 0.

## Ranking

| rank | extractor | primary score |
|---|---|---|
| 1 | a<b>\\|c | 0.9732 |
| 2 | pca16 | – |

Not ranked: **flat**: collapsed

## Per-class scores

| class | rows | a<b>\\|c | pca16 |
|---|---|---|---|
| 0 | 178 | 1.0000 | 0.9944 |

## Is the leader really ahead?

No paired comparison: one candidate.

## Warnings

- **pca16**: NDCG@10 is undefined for user@example.org

Per-class score = 1 minus the largest fraction.
"""


def test_each_kind_gets_its_sections_and_every_text_is_escaped():
    pages = report_items(LABELLED, benchmark="digits")
    assert set(pages) == set(ITEMS)
    ranking = pages["ranking"]
    assert "<h1>vertebrae report: digits</h1>" in ranking and "<code>declared:digits@1</code>" in ranking
    assert "<td>a&lt;b&gt;|c</td>" in ranking and "<td class=num>0.9732</td>" in ranking
    assert "Not ranked: <strong>flat</strong>" in ranking and "Per-class score = 1 minus" in ranking
    assert "<h2>Per-class scores</h2>" in pages["detail"] and "<th>a&lt;b&gt;|c</th>" in pages["detail"]
    assert "No paired comparison: one candidate." in pages["comparison"]
    warnings = pages["warnings"]
    assert '<ul class="warnings"><li><strong>pca16</strong>: NDCG@10 is undefined for user@example.org</li></ul>' in warnings
    assert "Per-class" not in warnings
    assert all("<a " not in page and "mailto" not in page for page in pages.values())


def test_missing_sections_say_so():
    pages = report_items("# r\n\n## Ranking\n\n| rank | extractor |\n|---|---|\n| 1 | x |\n", benchmark="r")
    assert "without a paired comparison" in pages["comparison"]
    assert "no per-class or diagnostic tables" in pages["detail"] and "None." in pages["warnings"]
    with pytest.raises(ArtifactError, match="benchmark 'r'.*no '## Ranking'"):
        report_items("# r\n\nnothing\n", benchmark="r")


def test_pages_are_written_as_complete_documents(tmp_path):
    source = tmp_path / "reports" / "digits" / "report.md"
    source.parent.mkdir(parents=True)
    source.write_text(LABELLED, encoding="utf-8")
    outputs = {item: tmp_path / "out" / f"{item}.html" for item in ITEMS}
    write_report_items(source, outputs)
    for path in outputs.values():
        text = path.read_text(encoding="utf-8")
        assert text.startswith("<!DOCTYPE html>") and "<title>digits: " in text and text.rstrip().endswith("</html>")
    assert not list((tmp_path / "out").glob(".*"))  # no temporary files left
    with pytest.raises(ArtifactError, match="cannot be read"):
        write_report_items(tmp_path / "none.md", outputs)


def test_report_options_and_targets():
    assert report_options("ranking", "figure")["caption"] == "../report/ranking.rst"
    table = report_options("warnings", "table")
    assert table["caption"] == "../report/warnings_table.rst" and table["category"] == "{report_name}"
    assert table["labels"] == {"benchmark": "{report_name}", "item": "warnings", "form": "table"}
    with pytest.raises(ValidationError):
        report_options("warnings", "figure")
    targets = item_targets(["results/reports/a/report.json", "results/reports/a/report.md", "results/x.json"])
    assert targets == [f"results/reports/a/{item}.html" for item in ITEMS]
