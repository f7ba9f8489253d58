"""The cross-benchmark summary: hand-made reports of the three protocols give an exact table (CSV, Markdown, JSON)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from vertebrae.core.errors import ArtifactError, CorruptArtifactError, ValidationError
from vertebrae.reports.schemas import LABELLED_SCHEMA, RETRIEVAL_SCHEMA, ZERO_SHOT_SCHEMA
from vertebrae.reports.summary import (
    SUMMARY_PATHS,
    Summary,
    build_summary,
    check_summary,
    summary_csv,
    summary_inputs,
    summary_markdown,
    summary_targets,
)


def labelled() -> dict:
    # b outranks a; c is collapsed (aggregate-invalid): not in the ranking
    return {"schema": LABELLED_SCHEMA, "ranking": ["b", "a"], "metadata": {"benchmark": "cls"},
            "extractor_results": [{"name": "a", "primary_metric_name": "overlap", "primary_score": 0.5},
                                  {"name": "b", "primary_metric_name": "overlap", "primary_score": 0.75},
                                  {"name": "c", "primary_metric_name": "overlap", "primary_score": 0.125}]}


def retrieval() -> dict:
    return {"schema": RETRIEVAL_SCHEMA, "ranking": ["d", "b"], "metadata": {"benchmark": "search",
                                                                          "primary_metric": "ndcg@10"},
            "candidate_results": [{"name": "b", "primary_score": 0.25}, {"name": "d", "primary_score": 0.875}]}


def zero_shot() -> dict:
    # no metadata.benchmark: the name comes from the report's folder; its one candidate is unranked
    return {"schema": ZERO_SHOT_SCHEMA, "ranking": [], "metadata": {"primary_metric": "accuracy"},
            "candidate_results": [{"name": "a", "primary_metric": "accuracy", "primary_score": 0.0625}]}


REPORTS = [("results/reports/cls/report.json", labelled()), ("results/reports/search/report.json", retrieval()),
           ("results/reports/prompts/report.json", zero_shot())]


def test_the_table_holds_each_candidate_in_each_benchmark_it_is_in():
    summary = build_summary(REPORTS)
    assert [c.name for c in summary.benchmarks] == ["cls", "search", "prompts"]
    assert [(c.protocol, c.primary_metric, c.candidates, c.ranked) for c in summary.benchmarks] == [
        ("labelled", "overlap", 3, 2), ("retrieval", "ndcg@10", 2, 2), ("zero-shot", "accuracy", 1, 0)]
    assert summary.candidates == ("a", "b", "c", "d")  # first appearance, declaration order within a benchmark
    assert summary_csv(summary) == (
        "candidate,cls (overlap),cls rank,search (ndcg@10),search rank,prompts (accuracy),prompts rank\n"
        "a,0.5,2,,,0.0625,unranked\n"
        "b,0.75,1,0.25,2,,\n"
        "c,0.125,unranked,,,,\n"
        "d,,,0.875,1,,\n")
    rows = list(csv.DictReader(io.StringIO(summary_csv(summary))))
    assert rows[3]["search (ndcg@10)"] == "0.875" and rows[3]["cls (overlap)"] == ""


def test_markdown_marks_ranks_unranked_and_blank_cells():
    text = summary_markdown(build_summary(REPORTS))
    table = text[text.index("## Primary scores"):].splitlines()[2:]
    assert table == [
        "| candidate | cls (overlap) | search (ndcg@10) | prompts (accuracy) |",
        "|---|---|---|---|",
        "| a | 0.5000 (#2) |  | 0.0625 (unranked) |",
        "| b | 0.7500 (#1) | 0.2500 (#2) |  |",
        "| c | 0.1250 (unranked) |  |  |",
        "| d |  | 0.8750 (#1) |  |",
    ]
    assert ("| search | retrieval | ndcg@10 | 2 | 2 | d | results/reports/search/report.json |"
            in text.splitlines())
    assert "| prompts | zero-shot | accuracy | 1 | 0 | – |" in text  # nobody ranked: no leader


def test_json_form_is_exact_and_reads_back():
    summary = build_summary(REPORTS)
    document = summary.to_dict()
    assert document["benchmarks"][1] == {"name": "search", "protocol": "retrieval", "primary_metric": "ndcg@10",
                                         "report": "results/reports/search/report.json", "candidates": 2,
                                         "ranked": 2}
    assert document["candidates"][0] == {"name": "a", "scores": {
        "cls": {"score": 0.5, "rank": 2, "ranked": True}, "search": None,
        "prompts": {"score": 0.0625, "rank": None, "ranked": False}}}
    assert Summary.from_dict(json.loads(json.dumps(document))) == summary


def test_bad_reports_are_refused_naming_the_file():
    twice = [REPORTS[0], ("elsewhere/cls/report.json", labelled())]
    with pytest.raises(ValidationError, match="results/reports/cls/report.json and elsewhere/cls/report.json"):
        build_summary(twice)
    unknown = {**retrieval(), "ranking": ["d", "zzz"]}
    with pytest.raises(ValidationError, match=r"search/report.json.*'zzz'"):
        build_summary([("results/reports/search/report.json", unknown)])
    with pytest.raises(ValidationError, match="x/report.json: unknown report schema 'nope'"):
        build_summary([("x/report.json", {"schema": "nope"})])
    text_score = labelled()
    text_score["extractor_results"][0]["primary_score"] = "0.5"
    with pytest.raises(ValidationError, match="candidate 'a'"):
        build_summary([("r/cls/report.json", text_score)])


def test_a_written_summary_verifies_and_an_edited_one_is_corrupt(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(build_summary(REPORTS).to_dict()), encoding="utf-8")
    assert check_summary(path) == build_summary(REPORTS)
    edited = json.loads(path.read_text(encoding="utf-8"))
    edited["candidates"][0]["scores"]["cls"]["ranked"] = False  # a cell with rank 2 that says it is unranked
    path.write_text(json.dumps(edited), encoding="utf-8")
    with pytest.raises(CorruptArtifactError) as info:
        check_summary(path)
    assert info.value.path == str(path)
    with pytest.raises(ArtifactError, match="not found"):
        check_summary(tmp_path / "missing.json")


def test_targets_follow_the_workflow_reports():
    outputs = ["results/reports/a/report.json", "results/reports/a/report.md", "results/reports/b/report.json"]
    assert summary_inputs(outputs) == ["results/reports/a/report.json", "results/reports/b/report.json"]
    assert summary_targets(outputs) == list(SUMMARY_PATHS.values())
    assert summary_targets([]) == []


def test_a_metric_name_from_data_is_text_in_the_markdown():
    # a custom metric's name is the user's: a backtick or pipe in it broke the table (it sat inside a code span)
    from markdown_it import MarkdownIt

    hostile = "m`| <img src=x onerror=alert(1)>"
    report = labelled()
    for candidate in report["extractor_results"]:
        candidate["primary_metric_name"] = hostile
    text = summary_markdown(build_summary([("results/reports/cls/report.json", report)]))
    html = MarkdownIt("commonmark").enable("table").render(text)
    assert "<img" not in html and "<code>" not in html
    tables = html.count("<table>")
    assert tables == 2 and all(row.count("<td>") == 7 for row in html.split("<tr>")[2:3])  # one cell per column
