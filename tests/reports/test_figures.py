"""Report figures: the drawn numbers are the given numbers; bad input is refused naming what is wrong."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.datasets import load_iris

from vertebrae import Benchmark, BenchmarkDataset, DatasetIdentity, FewShotMetric, OverlapScoringConfig
from vertebrae.core.errors import ArtifactError, ValidationError
from vertebrae.extractors import PrecomputedExtractor, SklearnExtractor
from vertebrae.scoring.paired.rows import RowResamplingConfig
from vertebrae.reports.figures import (
    confusion_matrix_figure,
    few_shot_curves,
    figure_targets,
    per_class_figure,
    ranking_figure,
    report_figures,
    report_names,
    report_names_pattern,
    write_report_figures,
)

ROWS = RowResamplingConfig(resamples=20)  # iris's 3 classes: the comparison resamples rows; 20 (the least), not 200


def _close(fig):
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_confusion_matrix_colours_are_row_fractions_and_cells_are_counts():
    matrix = [[8, 2, 0], [1, 1, 2], [0, 0, 0]]  # the last class has no samples: its row stays 0
    fig = confusion_matrix_figure(matrix, ["cat", "dog", "eel"], title="t")
    ax = fig.axes[0]
    shown = np.asarray(ax.images[0].get_array())
    np.testing.assert_allclose(shown, [[0.8, 0.2, 0.0], [0.25, 0.25, 0.5], [0.0, 0.0, 0.0]])
    assert [t.get_text() for t in ax.texts] == ["8", "2", "0", "1", "1", "2", "0", "0", "0"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["cat", "dog", "eel"]
    assert ax.get_xlabel() == "predicted class" and ax.get_ylabel() == "true class"
    _close(fig)


@pytest.mark.parametrize("matrix, names, message", [
    ([[1, 0], [0, 1]], ["a", "b", "c"], "does not match 3 class names"),
    ([[1, 0], [0]], ["a", "b"], "does not match 2 class names"),
    ([[1, -1], [0, 1]], ["a", "b"], "class 'a' holds -1"),
    ([[1, 0.5], [0, 1]], ["a", "b"], "class 'a' holds 0.5"),
])
def test_confusion_matrix_refuses_bad_input(matrix, names, message):
    with pytest.raises(ValidationError, match=message):
        confusion_matrix_figure(matrix, names)


def test_ranking_bars_are_the_scores_in_order():
    fig = ranking_figure(["b", "a", "c"], [0.9, 0.5, -0.1], metric="ndcg@10")
    ax = fig.axes[0]
    assert [round(p.get_width(), 6) for p in ax.patches] == [0.9, 0.5, -0.1]
    assert [round(p.get_y() + p.get_height() / 2) for p in ax.patches] == [2, 1, 0]  # first on top
    assert ax.get_xlabel() == "ndcg@10"
    _close(fig)
    with pytest.raises(ValidationError, match="candidate 'a'"):
        ranking_figure(["b", "a"], [0.9, float("nan")], metric="m")


def test_per_class_heat_map_and_its_checks():
    fig = per_class_figure(["x", "y"], {"m1": [0.25, 1.0], "m2": [None, 0.5]}, metric="score")
    shown = np.ma.filled(np.asarray(fig.axes[0].images[0].get_array(), dtype=float), np.nan)
    np.testing.assert_allclose(shown, [[0.25, np.nan], [1.0, 0.5]])
    _close(fig)
    with pytest.raises(ValidationError, match="candidate 'm2' has 1 scores for 2 classes"):
        per_class_figure(["x", "y"], {"m1": [0.1, 0.2], "m2": [0.1]}, metric="s")


@pytest.fixture(scope="module")
def iris_report() -> dict:
    X, y = load_iris(return_X_y=True)
    dataset = BenchmarkDataset.from_arrays(X, y, identity=DatasetIdentity.declared("iris", "1"))
    from sklearn.decomposition import PCA

    result = Benchmark(dataset, [PrecomputedExtractor("raw"), SklearnExtractor("pca2", PCA(2), cache_identity="pca2")],
                       scoring_config=OverlapScoringConfig(k=3), row_resampling=ROWS, seed=0, name="iris").run()
    return result.to_dict()


def test_labelled_report_figures_show_the_reported_numbers(iris_report, tmp_path):
    figures = report_figures(iris_report, name="iris")
    ranked = [next(r for r in iris_report["extractor_results"] if r["name"] == n) for n in iris_report["ranking"]]
    bars = [p.get_width() for p in figures["ranking"].axes[0].patches]
    assert bars == pytest.approx([r["primary_score"] for r in ranked])
    keys = list(iris_report["dataset_summary"]["labels"])
    shown = np.asarray(figures["detail"].axes[0].images[0].get_array())
    expected = [[r["overlap"]["per_class_scores"][k] for r in ranked] for k in keys]
    np.testing.assert_allclose(shown, expected)
    for fig in figures.values():
        _close(fig)

    path = tmp_path / "reports" / "iris" / "report.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(iris_report))
    write_report_figures(path, path.with_name("ranking.png"), path.with_name("detail.png"))
    for name in ("ranking.png", "detail.png"):
        assert path.with_name(name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(path.parent.glob(".*tmp*"))


@pytest.fixture(scope="module")
def few_shot_report() -> dict:
    X, y = load_iris(return_X_y=True)
    dataset = BenchmarkDataset.from_arrays(X, y, identity=DatasetIdentity.declared("iris", "1"))
    from sklearn.decomposition import PCA

    return Benchmark(dataset, [PrecomputedExtractor("raw"), SklearnExtractor("noisy", PCA(2), cache_identity="pca2")],
                     metrics=[FewShotMetric(shots=[1, 3, 10], episodes=12)], scoring_config=OverlapScoringConfig(k=3),
                     row_resampling=ROWS, seed=0, name="iris").run().to_dict()


def test_few_shot_curves_sit_beside_the_heat_map_with_the_reported_numbers(few_shot_report, tmp_path):
    figures = report_figures(few_shot_report, name="iris")
    detail = figures["detail"]
    heat, curves = detail.axes[0], detail.axes[1]  # then the heat map's colour bar
    assert heat.images and curves.get_xlabel() == "shots per class"
    ranked = [next(r for r in few_shot_report["extractor_results"] if r["name"] == n) for n in few_shot_report["ranking"]]
    assert [t.get_text() for t in curves.get_legend().get_texts()] == [r["name"] for r in ranked]
    for container, candidate in zip(curves.containers, ranked):
        per_shot = candidate["metrics"]["few_shot"]["diagnostics"]["per_shot"]
        line, _, (bars,) = container.lines
        assert list(line.get_xdata()) == [1, 3, 10]
        np.testing.assert_allclose(np.asarray(line.get_ydata(), float), [per_shot[s]["accuracy"] for s in ("1", "3", "10")])
        np.testing.assert_allclose([(seg[0][1], seg[1][1]) for seg in bars.get_segments()],
                                   [(per_shot[s]["ci_low"], per_shot[s]["ci_high"]) for s in ("1", "3", "10")])
    for fig in figures.values():
        _close(fig)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(few_shot_report))
    write_report_figures(path, tmp_path / "ranking.png", tmp_path / "detail.png")
    assert (tmp_path / "detail.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("entry, message", [
    ({"accuracy": float("nan"), "ci_low": 0.1, "ci_high": 0.9}, "candidate 'noisy', few-shot metric 'few_shot', 3 shots: accuracy"),
    ({"accuracy": 0.5, "ci_low": 0.6, "ci_high": 0.9}, "3 shots: interval \\[0.6, 0.9\\] does not hold accuracy 0.5"),
    ({"accuracy": 0.5, "ci_high": 0.9}, "3 shots: ci_low"),
])
def test_few_shot_curves_refuse_numbers_that_are_not_an_accuracy_in_its_interval(few_shot_report, entry, message):
    report = json.loads(json.dumps(few_shot_report))
    noisy = next(r for r in report["extractor_results"] if r["name"] == "noisy")
    noisy["metrics"]["few_shot"]["diagnostics"]["per_shot"]["3"] = entry
    with pytest.raises(ValidationError, match=message):
        few_shot_curves(report["extractor_results"])
    with pytest.raises(ValidationError, match="report 'iris'|noisy"):
        report_figures(report, name="iris")


def test_zero_shot_detail_is_the_best_candidates_confusion_matrix():
    def candidate(name, score, matrix):
        return {"name": name, "primary_metric": "accuracy", "primary_score": score,
                "zero_shot": {"confusion_matrix": matrix, "class_keys": ["@int:0", "@int:1"],
                              "labels": {"@int:0": "zero", "@int:1": "one"}}}

    report = {"schema": "vertebrae.zero-shot-report/v1", "ranking": ["good", "bad"],
              "candidate_results": [candidate("bad", 0.5, [[1, 1], [1, 1]]), candidate("good", 0.75, [[2, 0], [1, 1]])],
              "dataset_summary": {}, "metadata": {}}
    figures = report_figures(report, name="zs")
    ax = figures["detail"].axes[0]
    np.testing.assert_allclose(np.asarray(ax.images[0].get_array()), [[1.0, 0.0], [0.5, 0.5]])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["zero", "one"] and "good" in ax.get_title()
    for fig in figures.values():
        _close(fig)


def test_unknown_or_malformed_reports_are_refused(tmp_path):
    with pytest.raises(ValidationError, match="unknown report schema 'nope'"):
        report_figures({"schema": "nope"}, name="x")
    with pytest.raises(ValidationError, match="report 'x': malformed"):
        report_figures({"schema": "vertebrae.zero-shot-report/v1", "ranking": []}, name="x")
    bad = tmp_path / "report.json"
    bad.write_text("{not json")
    with pytest.raises(ArtifactError, match=str(bad)):
        write_report_figures(bad, tmp_path / "r.png", tmp_path / "d.png")
    assert not (tmp_path / "r.png").exists()


def test_figure_targets_follow_the_report_targets():
    outputs = ["results/reports/a/report.json", "results/reports/a/report.md", "results/reports/b/report.json"]
    assert report_names(outputs) == ["a", "b"]
    assert report_names_pattern(outputs) == "a|b" and report_names_pattern(["x/report.md"]) == "no-report"
    assert figure_targets(outputs) == ["results/reports/a/ranking.png", "results/reports/a/detail.png",
                                       "results/reports/a/comparison.png", "results/reports/b/ranking.png",
                                       "results/reports/b/detail.png", "results/reports/b/comparison.png"]


def test_equal_retrieval_scores_do_not_hide_each_other_in_the_metric_at_k_plot():
    metrics = {"ndcg@1": 0.5, "ndcg@5": 0.6, "ndcg@10": 0.7}
    report = {"schema": "vertebrae.retrieval-report/v1", "ranking": ["a", "b"], "dataset_summary": {},
              "metadata": {"primary_metric": "ndcg@10"},
              "candidate_results": [{"name": n, "primary_score": 0.7, "score": {"forward": {"metrics": dict(metrics)}}}
                                    for n in ("a", "b")]}
    figures = report_figures(report, name="twins")
    lines = figures["detail"].axes[0].get_lines()
    assert [line.get_label() for line in lines] == ["a", "b"]
    np.testing.assert_allclose(lines[0].get_ydata(), lines[1].get_ydata())  # the same scores, drawn as given
    assert not np.allclose(lines[0].get_xdata(), lines[1].get_xdata())  # side by side, not on top of each other
    assert lines[0].get_marker() != lines[1].get_marker() and lines[0].get_linestyle() != lines[1].get_linestyle()
    for fig in figures.values():
        _close(fig)
