"""Issue 48, problem 5: ``vertebrae verify`` checks every page and table the workflow writes (report.md, the HTML
items, report.html, the leaderboard page, the results index, the summary's CSV and Markdown) against what its
verified sources give, and a symlinked artifact by what it points to. The results trees here are written by the
workflow's own writers, called as its rules call them (from the working folder, on ``results``)."""

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
from vertebrae.stages.verify import dependents, verify
from vertebrae.stages.verify_pages import page_consumers

ITEMS = ("ranking", "detail", "comparison", "warnings")


@pytest.fixture(scope="module")
def iris_report() -> dict:
    from sklearn.decomposition import PCA

    X, y = load_iris(return_X_y=True)
    dataset = BenchmarkDataset.from_arrays(X, y, identity=DatasetIdentity.declared("iris", "1"))
    # iris's 3 classes: the comparison resamples rows; 20 subsamples (the least), not the default 200
    result = Benchmark(dataset, [PrecomputedExtractor("raw"), SklearnExtractor("pca2", PCA(2), cache_identity="pca2")],
                       scoring_config=OverlapScoringConfig(k=3), row_resampling=RowResamplingConfig(resamples=20), seed=0, name="iris").run()
    return json.loads(json.dumps(result.to_dict()))


def _write_pages(workdir: Path, names: tuple[str, ...]) -> None:
    """Every page and table of the reports ``results/reports/<name>/report.json``, as the rules write them."""
    from vertebrae.reports.html_items import write_report_items
    from vertebrae.reports.report_page import write_index, write_report_page
    from vertebrae.stages.leaderboard_job import run_leaderboard
    from vertebrae.stages.summary_job import run_summary

    reports = [Path("results/reports") / name for name in names]
    for folder in reports:
        write_report_items(folder / "report.md", {item: folder / f"{item}.html" for item in ITEMS})
        write_report_page(folder / "report.md", folder / "report.html")
    run_summary([reports[0] / "report.json"], "results/summary/summary.csv",  # one config's: one name each
                "results/summary/summary.md", "results/summary/summary.json")
    run_leaderboard("results", format="html", output="results/leaderboard.html")
    write_index("results", "results/index.html")


def _tree(workdir: Path, document: dict, names: tuple[str, ...] = ("iris",)) -> Path:
    """A results tree of the report ``document`` under each of ``names`` with all its pages; the results folder."""
    from vertebrae.results import BenchmarkResult

    result = BenchmarkResult.from_dict(document)
    for name in names:
        folder = workdir / "results" / "reports" / name
        folder.mkdir(parents=True, exist_ok=True)
        result.save_json(folder / "report.json")
        result.save_markdown(folder / "report.md")
    _write_pages(workdir, names)
    return workdir / "results"


def _rename_candidate(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count("pca2") >= 1
    path.write_text(text.replace("pca2", "pca3"), encoding="utf-8")


def _append_script(path: Path) -> None:
    path.write_text(path.read_text(encoding="utf-8").replace("</body>", "<script>alert(1)</script></body>"),
                    encoding="utf-8")


def _swap_ranks(path: Path) -> None:  # the leaderboard: the leader's rank cell says 2
    text = path.read_text(encoding="utf-8")
    at = text.index("<td>leader</td>")
    rank = text.rindex("<td>1</td>", 0, at)
    path.write_text(text[:rank] + "<td>2</td>" + text[rank + len("<td>1</td>"):], encoding="utf-8")


TAMPERS = {  # file (relative to results/), edit, the files a repair moves with it
    "index.html script": ("index.html", _append_script, []),
    "report.html candidate renamed": ("reports/iris/report.html", _rename_candidate, ["index.html", "leaderboard.html"]),
    "report.html script": ("reports/iris/report.html", _append_script, ["index.html", "leaderboard.html"]),
    "leaderboard.html rank": ("leaderboard.html", _swap_ranks, ["index.html"]),
    "leaderboard.html candidate renamed": ("leaderboard.html", _rename_candidate, ["index.html"]),
    "ranking.html candidate renamed": ("reports/iris/ranking.html", _rename_candidate,
                                       ["index.html", "leaderboard.html"]),
}


def test_every_page_and_table_of_a_written_tree_verifies(iris_report, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results = _tree(tmp_path, iris_report)
    written = sorted(str(p.relative_to(results)) for p in results.rglob("*") if p.is_file())
    assert written == sorted(["index.html", "leaderboard.html", "summary/summary.csv", "summary/summary.json",
                              "summary/summary.md", "reports/iris/report.json", "reports/iris/report.md",
                              "reports/iris/report.html", *(f"reports/iris/{item}.html" for item in ITEMS)])
    assert verify(results) == [] and verify("results") == []


def test_a_leaderboard_of_two_reports_of_one_name_verifies_wherever_verify_is_pointed(iris_report, tmp_path,
                                                                                      monkeypatch):
    """Two reports of one benchmark name are keyed by their paths as the job spelled them (``results/...``); verify
    pointed at the tree by another spelling must render the same keys."""
    monkeypatch.chdir(tmp_path)
    results = _tree(tmp_path, iris_report, names=("iris", "iris-again"))
    assert "(results/reports/iris-again/report.json)" in (results / "leaderboard.html").read_text(encoding="utf-8")
    assert verify(results) == [] and verify("results") == []
    monkeypatch.chdir(tmp_path.parent)
    assert verify(results) == [] and verify(os.path.relpath(results)) == []


@pytest.mark.parametrize("case", sorted(TAMPERS))
def test_a_tampered_page_is_found_and_repair_moves_it_with_the_pages_built_from_it(iris_report, tmp_path, monkeypatch,
                                                                                   case):
    monkeypatch.chdir(tmp_path)
    results = _tree(tmp_path, iris_report)
    name, tamper, moved_with = TAMPERS[case]
    tamper(results / name)
    found = verify(results)
    assert [path for path, _ in found] == [str(results / name)], found
    assert "differs from what its verified sources give" in found[0][1]
    assert verify(results, repair=True) == found
    for path in (name, *moved_with):
        assert not (results / path).exists() and list((results / path).parent.glob(Path(path).name + ".corrupt-*"))
    _write_pages(tmp_path, ("iris",))  # the next run writes them again
    assert verify(results) == []


def test_a_stale_leaderboard_and_index_are_found(iris_report, tmp_path, monkeypatch):
    """A report removed by hand since the leaderboard and the index were written: both list it still."""
    import shutil

    monkeypatch.chdir(tmp_path)
    results = _tree(tmp_path, iris_report, names=("iris", "iris-again"))
    shutil.rmtree(results / "reports" / "iris-again")
    found = {os.path.relpath(path, results) for path, _ in verify(results)}
    assert {"leaderboard.html", "index.html"} <= found, found


@pytest.mark.parametrize("job", ["report-page", "report-tables"])
def test_a_hand_edited_report_md_is_refused_by_the_page_jobs(iris_report, tmp_path, monkeypatch, capsys, job):
    """The report_page and report_tables jobs check report.md against its report.json before cutting pages out of
    it: a fake ranking in report.md (newer than the pages, so a rerun renders them again) is refused naming it and
    moved aside with the pages built from it (exit status 2), so it never reaches a page; the next run writes
    report.md again from report.json."""
    monkeypatch.chdir(tmp_path)
    results = _tree(tmp_path, iris_report)
    folder = results / "reports" / "iris"
    args = {"report-page": ["--output", str(folder / "report.html")],
            "report-tables": [arg for item in ITEMS for arg in (f"--{item}-output", str(folder / f"{item}.html"))]}
    markdown = folder / "report.md"
    assert main([job, "--markdown", str(markdown), *args[job]]) == 0  # the report.md the report job wrote
    text = markdown.read_text(encoding="utf-8")
    assert "| 1 | raw |" in text
    markdown.write_text(text.replace("| 1 | raw |", "| 1 | FAKE |"), encoding="utf-8")
    for page in ("report.html", "ranking.html"):
        (folder / page).unlink()  # Snakemake removes a job's outputs before it runs

    assert main([job, "--markdown", str(markdown), *args[job]]) == 2
    err = capsys.readouterr().err
    assert str(markdown) in err and "edited" in err and "moved it aside to" in err and "run the workflow again" in err
    assert not markdown.exists() and not (folder / "report.html").exists() and not (folder / "ranking.html").exists()
    assert not (results / "index.html").exists() and (folder / "report.json").exists()
    assert not [p for p in results.rglob("*") if p.is_file() and "FAKE" in p.read_text(encoding="utf-8")
                and ".corrupt-" not in p.name]


def test_page_consumers_follow_the_rules():
    folder = Path("/w/results/reports/b")
    tail = [Path("/w/results/leaderboard.html"), Path("/w/results/index.html")]
    assert page_consumers(folder / "ranking.png") == [folder / "report.html", *tail]
    assert page_consumers(folder / "report.md") == [folder / f"{i}.html" for i in ITEMS] + [folder / "report.html",
                                                                                               *tail]
    assert page_consumers(Path("/w/results/leaderboard.html")) == [Path("/w/results/index.html")]
    assert page_consumers(Path("/w/results/index.html")) == [] == page_consumers(Path("/w/results/scores/a.json"))


def test_a_symlinked_report_is_checked_and_set_aside_by_its_target(iris_report, tmp_path, monkeypatch):
    """A link in the tree is checked by what it points to; repair replaces it by a plain copy of the target's bytes,
    moved aside, and never touches the target (here outside the tree)."""
    monkeypatch.chdir(tmp_path)
    results = _tree(tmp_path, iris_report)
    report = results / "reports/iris/report.json"
    outside = tmp_path / "elsewhere" / "report.json"
    outside.parent.mkdir()
    edited = json.loads(report.read_text(encoding="utf-8"))
    edited["ranking"] = list(reversed(edited["ranking"]))
    outside.write_text(json.dumps(edited), encoding="utf-8")
    report.unlink()
    report.symlink_to(outside)
    assert results / "reports/iris/report.md" in dependents(report)  # its own path's dependents, unresolved
    found = verify(results)
    assert str(report) in [path for path, _ in found], found
    verify(results, repair=True)
    assert not os.path.lexists(report) and outside.read_text(encoding="utf-8") == json.dumps(edited)
    aside = list(report.parent.glob("report.json.corrupt-*"))
    assert len(aside) == 1 and not aside[0].is_symlink() and aside[0].read_text(encoding="utf-8") == json.dumps(edited)
    assert not (results / "reports/iris/report.md").exists() and not (results / "index.html").exists()


def test_a_link_to_nothing_is_found_and_moved_aside(iris_report, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results = _tree(tmp_path, iris_report)
    dangling = results / "scores" / "0123456789abcdef.json"
    dangling.parent.mkdir()
    dangling.symlink_to(tmp_path / "gone.json")
    found = verify(results, repair=True)
    assert [path for path, _ in found] == [str(dangling)] and "does not exist" in found[0][1]
    assert not os.path.lexists(dangling) and list(dangling.parent.glob("*.corrupt-*"))
    assert verify(results) == []
