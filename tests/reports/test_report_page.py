"""A benchmark's one-page report.html and the results index (``vertebrae.reports.report_page``)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from sklearn.datasets import load_iris

from vertebrae import Benchmark, BenchmarkDataset, DatasetIdentity, OverlapScoringConfig
from vertebrae.extractors.callable import CallableExtractor
from vertebrae.scoring.paired.rows import RowResamplingConfig
from vertebrae.reports.report_page import MAX_COLUMNS, index_page, report_folders, report_page, write_report_page


def _report():
    X, y = load_iris(return_X_y=True)
    dataset = BenchmarkDataset.from_arrays(X, y, identity=DatasetIdentity.declared("iris", "1"))
    candidates = [CallableExtractor("a<b>", np.asarray, cache_identity="a"),
                  CallableExtractor("half", lambda r: np.asarray(r)[:, :2], cache_identity="half")]
    # iris's 3 classes: the comparison resamples rows; 20 subsamples (the least), not the default 200
    return Benchmark(dataset, candidates, scoring_config=OverlapScoringConfig(k=5),
                     row_resampling=RowResamplingConfig(resamples=20), seed=0, name="iris").run()


def _columns(table_html: str) -> int:
    return table_html.split("</tr>")[0].count("<th>")


def test_the_page_holds_the_ranking_narrow_the_figures_and_every_section(tmp_path):
    report = _report()
    folder = tmp_path / "results" / "reports" / "iris"
    folder.mkdir(parents=True)
    report.save_markdown(folder / "report.md")
    (folder / "ranking.png").write_bytes(b"")  # only this one drawn
    write_report_page(folder / "report.md", folder / "report.html")
    page = (folder / "report.html").read_text(encoding="utf-8")
    ranking = page.split('<div id="ranking">')[1]
    assert 2 <= _columns(ranking) <= MAX_COLUMNS
    assert "More ranking columns" in page  # the labelled ranking is wider than 8: the rest below it
    wide = report.RENDER(report).split("## Ranking")[1].split("\n\n")[1].splitlines()[0]
    assert _columns(page.split("More ranking columns")[1]) == wide.count("|") - 1 - MAX_COLUMNS + 1
    assert '<img src="ranking.png"' in page and '<img src="detail.png"' not in page
    assert "Not drawn yet: comparison.png, detail.png" in page
    order = [page.index(h) for h in ("<h2>Ranking", "<h2>Figures", "<h2>Is the leader really ahead?",
                                      "<h2>Quality vs cost", "<h2>Warnings", "<h2>Per-class scores")]
    assert order == sorted(order)
    assert "a&lt;b&gt;" in page and "<b>" not in page  # a name is text
    assert re.findall(r'href="([^"]+)"', page) == ["../../index.html", "../../leaderboard.html", "report.md",
                                                   "report.json"]


def test_the_index_links_every_benchmark_page_and_the_leaderboard(tmp_path):
    results = tmp_path / "results"
    report = _report()
    for name in ("iris", "other"):
        folder = results / "reports" / name
        folder.mkdir(parents=True)
        report.save_json(folder / "report.json")
        (folder / "report.html").write_text(report_page(report.RENDER(report), benchmark=name), encoding="utf-8")
    (results / "reports" / "no-page").mkdir()
    page = index_page(results, results / "index.html")
    assert re.findall(r'href="([^"]+)"', page) == ["leaderboard.html", "reports/iris/report.html",
                                                   "reports/other/report.html"]
    assert page.count("<td>labelled</td><td>overlap</td><td>a&lt;b&gt;</td>") == 2  # protocol, metric, leader
    assert Path(results / "reports" / "no-page").name not in page
    # the plan's listing (issue 47): the folders holding a report.json, with the files the pages read or link
    (results / "reports" / "no-page" / "report.md").write_text("x", encoding="utf-8")  # no report.json: not listed
    (results / "reports" / "iris" / "report.md").write_text("x", encoding="utf-8")
    assert report_folders(results) == {"iris": ["report.json", "report.md", "report.html"],
                                       "other": ["report.json", "report.html"]}
    assert report_folders(tmp_path / "nowhere") == {}
    # given the report.json files (the workflow's job), the index lists exactly those pages
    given = index_page(results, results / "index.html", [results / "reports" / "other" / "report.json"])
    assert re.findall(r'href="([^"]+)"', given) == ["leaderboard.html", "reports/other/report.html"]
    assert index_page(results, results / "index.html", [results / "reports" / name / "report.json"
                                                        for name in report_folders(results)]) == page
