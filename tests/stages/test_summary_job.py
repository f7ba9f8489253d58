"""``vertebrae summary``: verified reports in, the summary files out; a hand-edited report is refused, moved aside."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from sklearn.datasets import load_iris

from vertebrae import Benchmark, BenchmarkDataset, DatasetIdentity, OverlapScoringConfig
from vertebrae.cli import main
from vertebrae.extractors import PrecomputedExtractor, SklearnExtractor
from vertebrae.scoring.paired.rows import RowResamplingConfig
from vertebrae import __version__
from vertebrae.core.errors import ValidationError
from vertebrae.core.provenance import software, software_line
from vertebrae.reports.summary import Summary, check_summary
from vertebrae.results.base import with_content_hash
from vertebrae.stages.verify import verify


@pytest.fixture(scope="module")
def iris_report() -> dict:
    from sklearn.decomposition import PCA

    X, y = load_iris(return_X_y=True)
    dataset = BenchmarkDataset.from_arrays(X, y, identity=DatasetIdentity.declared("iris", "1"))
    # iris's 3 classes: the comparison resamples rows; 20 subsamples (the least), not the default 200
    result = Benchmark(dataset, [PrecomputedExtractor("raw"), SklearnExtractor("pca1", PCA(1), cache_identity="pca1")],
                       scoring_config=OverlapScoringConfig(k=3), row_resampling=RowResamplingConfig(resamples=20), seed=0, name="iris").run()
    return with_content_hash(json.loads(json.dumps(result.to_dict())))  # as report.json holds it


def _outputs(results):
    return [str(results / "summary" / f"summary.{suffix}") for suffix in ("csv", "md", "json")]


def _summary(results, *reports) -> int:
    csv_path, md_path, json_path = _outputs(results)
    return main(["summary", "--output-csv", csv_path, "--output-markdown", md_path, "--output-json", json_path,
                 *map(str, reports)])


def test_summary_of_a_verified_report(iris_report, tmp_path):
    results = tmp_path / "results"
    report = results / "reports" / "iris" / "report.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps(iris_report), encoding="utf-8")
    assert _summary(results, report) == 0
    scores = {c["name"]: c["primary_score"] for c in iris_report["extractor_results"]}
    # PCA(1), L2-normalised, collapses onto two points: a degenerate candidate the report does not rank
    assert iris_report["ranking"] == ["raw"]
    lines = (results / "summary" / "summary.csv").read_text(encoding="utf-8").splitlines()
    assert lines == ["candidate,iris (overlap),iris rank", f"raw,{scores['raw']!r},1",
                     f"pca1,{scores['pca1']!r},unranked"]
    assert f"| pca1 | {scores['pca1']:.4f} (unranked) |" in (results / "summary" / "summary.md").read_text()
    summary = check_summary(results / "summary" / "summary.json")
    assert summary.cell("pca1", "iris").score == scores["pca1"] and summary.cell("pca1", "iris").rank is None
    assert verify(results) == []  # the summary verifies beside the artifacts


def test_the_summary_says_which_vertebrae_wrote_it(iris_report, tmp_path):
    """As every report does: summary.json carries ``software`` (the version, and the commit from a checkout) and
    summary.md ends with its "Written by" line; a summary whose stamp is not one is refused."""
    results = tmp_path / "results"
    report = results / "reports" / "iris" / "report.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps(iris_report), encoding="utf-8")
    assert _summary(results, report) == 0
    document = json.loads((results / "summary" / "summary.json").read_text(encoding="utf-8"))
    assert document["software"] == software() and document["software"]["vertebrae"] == __version__
    assert check_summary(results / "summary" / "summary.json").software == software()
    markdown = (results / "summary" / "summary.md").read_text(encoding="utf-8")
    assert markdown.rstrip("\n").splitlines()[-1] == software_line(software())
    with pytest.raises(ValidationError, match="software"):
        Summary.from_dict({**document, "software": "0.1"})


def test_a_hand_edited_report_is_refused_and_moved_aside(iris_report, tmp_path, capsys):
    results = tmp_path / "results"
    report = results / "reports" / "iris" / "report.json"
    report.parent.mkdir(parents=True)
    edited = json.loads(json.dumps(iris_report))
    edited["extractor_results"][0]["primary_score"] = 0.999  # not the candidate's own OverlapIndex score
    report.write_text(json.dumps(edited), encoding="utf-8")
    assert _summary(results, report) == 2
    message = capsys.readouterr().err
    assert str(report) in message and "moved it aside" in message
    assert not os.path.exists(report) and not any(os.path.exists(p) for p in _outputs(results))


def test_an_edited_summary_fails_verify(iris_report, tmp_path):
    results = tmp_path / "results"
    report = results / "reports" / "iris" / "report.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps(iris_report), encoding="utf-8")
    assert _summary(results, report) == 0
    path = results / "summary" / "summary.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    document["benchmarks"][0]["ranked"] = 0
    document["note"] = "hand-written"
    path.write_text(json.dumps(document), encoding="utf-8")
    assert [bad for bad, _ in verify(results)] == [str(path)]


def test_a_summary_with_an_edited_score_is_not_the_summary_of_its_reports(iris_report, tmp_path, monkeypatch):
    """Issue 32, item 2: a score edited in summary.json round-trips through its schema; verify rebuilds the summary
    from the verified reports it names and finds the edit."""
    monkeypatch.chdir(tmp_path)
    report = Path("results/reports/iris/report.json")
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps(iris_report), encoding="utf-8")
    assert _summary(Path("results"), report) == 0 and verify("results") == []
    path = Path("results/summary/summary.json")
    document = json.loads(path.read_text(encoding="utf-8"))
    text = json.dumps(document)
    edited = json.loads(text.replace(repr(iris_report["extractor_results"][0]["primary_score"]),
                                     repr(iris_report["extractor_results"][0]["primary_score"] + 1e-4), 1))
    assert edited != document and check_summary_roundtrips(edited)
    path.write_text(json.dumps(edited), encoding="utf-8")
    assert [(bad, "not the summary of the reports" in problem) for bad, problem in verify("results")] == \
        [(str(path), True)]


def check_summary_roundtrips(document) -> bool:
    from vertebrae.reports.summary import Summary

    return Summary.from_dict(document).to_dict() == document
