"""The paired comparison in reports: the Markdown section, the figures and the document check.

Oracles: hand-made comparison documents whose numbers are chosen so that every printed value can be written out
by hand (Δ, its interval seen from either side of a pair, the adjusted p, the verdict), and hand-made report JSON.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from reports.test_figures import _close
from reports.test_markdown import _cells

from vertebrae.core.errors import ValidationError
from vertebrae.scoring.paired.rows import RowResamplingConfig
from vertebrae.reports.comparison import (
    TITLE,
    check_comparison,
    comparison_lines,
    result_comparison_lines,
)
from vertebrae.reports.figures import (
    FIGURES,
    comparison_figure,
    figure_targets,
    report_figures,
    write_report_figures,
)

CONFIG = {"resamples": 10000, "confidence_level": 0.95, "interval": "percentile", "adjustment": "holm", "alpha": 0.05,
          "seed": 0, "enabled": True}


def _pair(a, b, delta, p_adjusted, verdict, *, test="randomization", half=0.03):
    return {"a": a, "b": b, "delta": delta, "ci_low": delta - half, "ci_high": delta + half, "test": test,
            "p_value": p_adjusted / 3, "p_adjusted": p_adjusted, "verdict": verdict}


def _document(**changes):
    """Three candidates in declaration order a, b, c|x; b leads, c|x is tied with it, a is behind both."""
    doc = {
        "schema": "vertebrae.comparison/v1", "config": dict(CONFIG), "unit": "query", "statistic": "ndcg@10",
        "n_units": 64, "leader": "b",
        "candidates": [{"name": "a", "score": 0.5, "ci_low": 0.4, "ci_high": 0.6},
                       {"name": "b", "score": 0.75, "ci_low": 0.7, "ci_high": 0.8},
                       {"name": "c|x", "score": 0.73, "ci_low": 0.65, "ci_high": 0.79}],
        "pairs": [_pair("a", "b", 0.5 - 0.75, 0.0003, "behind"),
                  _pair("a", "c|x", 0.5 - 0.73, 0.002, "behind"),
                  _pair("b", "c|x", 0.75 - 0.73, 0.2, "indistinguishable")],
        "min_p_value": 1 / 10001, "notes": ["a first note", "a second | note"],
    }
    doc.update(changes)
    return doc


def test_section_sets_each_candidate_against_the_leader_in_score_order():
    lines = comparison_lines(_document(), None)
    assert lines[:3] == ["", f"## {TITLE}", ""]
    paragraph = lines[3]
    for part in ("**b**", "ndcg@10", "64 queries", "95%", "percentile bootstrap", "10000 resamples", "seed 0",
                 "randomization test", "Holm", "alpha = 0.05", "reach here is 1.0e-04"):
        assert part in paragraph, part
    table = [line for line in lines if line.startswith("|")]
    assert _cells(table[0]) == ["candidate", "score", "Δ vs leader", "CI of Δ", "adjusted p", "verdict"]
    rows = [_cells(line) for line in table[2:]]
    assert rows == [
        ["b (leader)", "0.7500", "–", "–", "–", "leader"],
        # the pair is stored as (b, c|x): seen from c|x, Δ and its interval change sign
        ["c\\|x", "0.7300", "-0.0200", "[-0.0500, +0.0100]", "0.2000", "indistinguishable"],
        ["a", "0.5000", "-0.2500", "[-0.2800, -0.2200]", "0.0003", "behind"],
    ]
    assert ("Statistically tied with the leader: **c\\|x** (rank 2). The ranking stays by point score, but ranks 1 "
            "and 2 are not told apart at alpha = 0.05.") in lines
    assert lines[-2:] == ["- a first note", "- a second \\| note"]


def test_no_tie_mcnemar_over_samples_and_a_leader_that_is_ahead():
    doc = _document(unit="sample", n_units=1, statistic="accuracy", leader="b", notes=[],
                    pairs=[_pair("a", "b", -0.25, 0.01, "behind", test="mcnemar-exact"),
                           _pair("a", "c|x", -0.23, 0.01, "behind", test="mcnemar-exact"),
                           _pair("b", "c|x", 0.02, 0.04, "ahead", test="mcnemar-exact")])
    lines = comparison_lines(doc, None)
    assert "McNemar's exact test" in lines[3] and "over the same 1 sample," in lines[3]
    rows = [_cells(line) for line in lines if line.startswith("|")][2:]
    assert [row[-1] for row in rows] == ["leader", "behind", "behind"]
    assert lines[-1] == "Statistically tied with the leader: none. Every other candidate is behind it at alpha = 0.05."


def test_coarse_tests_over_few_classes_say_their_smallest_p():
    doc = _document(unit="class", n_units=3, statistic="overlap_macro", min_p_value=0.25,
                    notes=["with 3 classes the exact test cannot reach p < 0.25"],
                    pairs=[_pair("a", "b", -0.25, 0.75, "indistinguishable", test="randomization-exact"),
                           _pair("a", "c|x", -0.23, 0.75, "indistinguishable", test="randomization-exact"),
                           _pair("b", "c|x", 0.02, 1.0, "indistinguishable", test="randomization-exact")])
    lines = comparison_lines(doc, None)
    assert "3 classes" in lines[3] and "exact paired randomization test" in lines[3] and "is 0.2500" in lines[3]
    assert any(line.startswith("Statistically tied with the leader: **c\\|x** (rank 2), **a** (rank 3).")
               and "ranks 1, 2 and 3" in line for line in lines)
    assert lines[-1] == "- with 3 classes the exact test cannot reach p < 0.25"


def test_skipped_says_why_and_nothing_says_nothing():
    assert comparison_lines(None, "fewer than two ranked candidates") == [
        "", f"## {TITLE}", "", "No paired comparison: fewer than two ranked candidates."]
    assert comparison_lines(None, None) == []


class _Comparison:
    def __init__(self, document):
        self.document = document

    def to_dict(self):
        return self.document


class _Result:
    pass


def test_result_lines_read_the_attributes_when_there_are_any():
    assert result_comparison_lines(_Result()) == []  # an old result: no attributes at all
    result = _Result()
    result.comparison, result.comparison_skipped = _Comparison(_document()), None
    assert result_comparison_lines(result) == comparison_lines(_document(), None)
    result.comparison, result.comparison_skipped = None, "disabled by the configuration"
    assert result_comparison_lines(result)[-1] == "No paired comparison: disabled by the configuration."


BAD = [
    ({"schema": "vertebrae.comparison/v0"}, "comparison: schema: expected 'vertebrae.comparison/v1'"),
    ({"unit": "row"}, "comparison: unit: expected one of"),
    ({"n_units": 0}, "comparison: n_units"),
    ({"leader": "zed"}, "comparison: leader: 'zed' is not one of the candidates"),
    ({"min_p_value": 1.5}, "comparison: min_p_value"),
    ({"notes": [1]}, "comparison: notes"),
    ({"config": {**CONFIG, "alpha": 0.0}}, "comparison: config.alpha"),
    ({"config": {**CONFIG, "resamples": 0}}, "comparison: config.resamples"),
    ({"candidates": []}, "comparison: candidates: expected a list of at least two"),
]


def _mutated(path, value):
    doc = _document()
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


BAD_ENTRIES = [
    (("candidates", 0, "score"), float("nan"), "comparison: candidate 'a'.score: expected a finite number, got nan"),
    (("candidates", 2, "ci_high"), 0.1, "comparison: candidate 'c|x': ci_low 0.65 is above ci_high 0.1"),
    (("candidates", 1, "name"), "a", "comparison: candidate 'a': listed twice"),
    (("pairs", 0, "b"), "zed", r"comparison: pairs\[0\].b: unknown candidate 'zed'"),
    (("pairs", 1, "delta"), 0.1, "comparison: pair 'a' vs 'c|x'.delta: 0.1 is not score a - score b"),
    (("pairs", 2, "p_adjusted"), 1.5, "comparison: pair 'b' vs 'c|x'.p_adjusted"),
    (("pairs", 2, "verdict"), "better", "comparison: pair 'b' vs 'c|x'.verdict"),
    (("pairs", 2, "test"), "t-test", "comparison: pair 'b' vs 'c|x'.test"),
    (("pairs", 2, "ci_low"), None, "comparison: pair 'b' vs 'c|x'.ci_low: expected a finite number"),
]


@pytest.mark.parametrize("change, message", BAD)
def test_bad_documents_are_refused_naming_the_field(change, message):
    with pytest.raises(ValidationError, match=message.replace("|", r"\|")):
        check_comparison(_document(**change))
    with pytest.raises(ValidationError, match="comparison: "):
        comparison_lines(_document(**change), None)


@pytest.mark.parametrize("path, value, message", BAD_ENTRIES)
def test_bad_entries_are_refused_naming_the_candidate_or_pair(path, value, message):
    doc = _mutated(path, value)
    with pytest.raises(ValidationError, match=message.replace("|", r"\|") if "\\" not in message else message):
        check_comparison(doc)
    with pytest.raises(ValidationError, match="comparison: "):
        comparison_figure(doc)


def test_pairs_must_cover_every_pair_once():
    doc = _document()
    doc["pairs"] = doc["pairs"][:2]
    with pytest.raises(ValidationError, match=r"comparison: pairs: 2 pairs for 3 candidates; missing 'b' vs 'c\|x'"):
        check_comparison(doc)
    doc = _document()
    doc["pairs"].append(_pair("c|x", "b", -0.02, 0.2, "indistinguishable"))
    with pytest.raises(ValidationError, match=r"pair 'c\|x' vs 'b': listed twice"):
        check_comparison(doc)
    assert check_comparison(_document()) == _document()


def _report(**extra):
    """A hand-made zero-shot report JSON of the three candidates (ranking by score)."""
    def candidate(name, score):
        return {"name": name, "primary_metric": "ndcg@10", "primary_score": score,
                "zero_shot": {"confusion_matrix": [[2, 0], [1, 1]], "class_keys": ["@int:0", "@int:1"],
                              "labels": {"@int:0": "zero", "@int:1": "one"}}}

    return {"schema": "vertebrae.zero-shot-report/v1", "ranking": ["b", "c|x", "a"],
            "candidate_results": [candidate("a", 0.5), candidate("b", 0.75), candidate("c|x", 0.73)],
            "dataset_summary": {}, "metadata": {"benchmark": "toy"}, **extra}


def test_comparison_matrix_is_delta_row_minus_column_in_ranking_order():
    fig = comparison_figure(_document())
    ax = fig.axes[0]
    shown = np.ma.filled(np.asarray(ax.images[0].get_array(), dtype=float), np.nan)
    expected = [[np.nan, 0.02, 0.25], [-0.02, np.nan, 0.23], [-0.25, -0.23, np.nan]]  # b, c|x, a
    np.testing.assert_allclose(shown, expected, atol=1e-12)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["b", "c|x", "a"]
    assert [t.get_text() for t in ax.texts] == ["+0.0200", "+0.2500*", "-0.0200", "+0.2300*", "-0.2500*", "-0.2300*"]
    _close(fig)


def test_ranking_whiskers_are_the_candidates_intervals():
    figures = report_figures(_report(comparison=_document(), comparison_skipped=None), name="toy")
    assert set(figures) == set(FIGURES)
    ax = figures["ranking"].axes[0]
    assert [p.get_width() for p in ax.patches] == pytest.approx([0.75, 0.73, 0.5])
    (whiskers,) = [c for c in ax.collections if len(c.get_segments()) == 3]
    spans = sorted((seg[0][0], seg[1][0], seg[0][1]) for seg in whiskers.get_segments())
    assert spans == [pytest.approx((0.4, 0.6, 0)), pytest.approx((0.65, 0.79, 1)), pytest.approx((0.7, 0.8, 2))]
    assert "95% bootstrap CI over queries" in ax.get_xlabel()
    for fig in figures.values():
        _close(fig)
    plain = report_figures(_report(), name="toy")
    assert not plain["ranking"].axes[0].collections and plain["ranking"].axes[0].get_xlabel() == "ndcg@10"
    for fig in plain.values():
        _close(fig)


@pytest.mark.parametrize("extra, text", [
    ({"comparison": None, "comparison_skipped": "fewer than two ranked candidates"},
     "no comparison: fewer than two ranked candidates"),
    ({}, "no comparison: this report was written without a paired comparison"),
])
def test_figures_are_written_with_and_without_a_comparison(tmp_path, extra, text):
    figures = report_figures(_report(**extra), name="toy")
    assert [t.get_text() for t in figures["comparison"].axes[0].texts] == [text]
    for fig in figures.values():
        _close(fig)
    for i, report in enumerate((_report(**extra), _report(comparison=_document(), comparison_skipped=None))):
        folder = tmp_path / str(i)
        folder.mkdir()
        path = folder / "report.json"
        path.write_text(json.dumps(report))
        write_report_figures(path, folder / "ranking.png", folder / "detail.png", folder / "comparison.png")
        for name in ("ranking.png", "detail.png", "comparison.png"):
            assert (folder / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert not list(folder.glob(".*tmp*"))
        (folder / "comparison.png").unlink()
        write_report_figures(path, folder / "ranking.png", folder / "detail.png")  # comparison_path is optional
        assert not (folder / "comparison.png").exists()


def test_a_bad_comparison_in_a_report_is_refused_with_the_report_path(tmp_path):
    doc = _document()
    doc["candidates"][1]["ci_low"] = float("inf")
    path = tmp_path / "report.json"
    path.write_text(json.dumps(_report(comparison=doc)))
    with pytest.raises(ValidationError, match=f"{path}: comparison: candidate 'b'.ci_low"):
        write_report_figures(path, tmp_path / "r.png", tmp_path / "d.png", tmp_path / "c.png")
    assert not list(tmp_path.glob("*.png"))


def test_figure_targets_include_the_comparison():
    assert FIGURES == ("ranking", "detail", "comparison")
    assert figure_targets(["results/reports/a/report.json"])[-1] == "results/reports/a/comparison.png"


def test_figures_subcommand_takes_an_optional_comparison_output():
    from vertebrae.cli import _parser

    base = ["figures", "--report", "r.json", "--ranking-output", "r.png", "--detail-output", "d.png"]
    assert _parser().parse_args([*base, "--comparison-output", "c.png"]).comparison_path == "c.png"
    assert "comparison_path" not in vars(_parser().parse_args(base))


def test_figures_rule_writes_the_comparison_figure():
    from pathlib import Path

    rules = (Path(__file__).resolve().parents[2] / "workflow" / "rules" / "figures.smk").read_text()
    assert 'PLAN.path("reports/{report_name}/comparison.png"), **ITEM("comparison", "figure")' in rules
    from vertebrae.reports.html_items import report_options

    assert report_options("comparison", "figure")["caption"] == "../report/comparison.rst"
    assert "--comparison-output {output.comparison}" in rules
    assert (Path(__file__).resolve().parents[2] / "workflow" / "report" / "comparison.rst").read_text().strip()


def _with(result, document, skipped):
    """``result`` seen with a ``comparison`` (or None) and a ``comparison_skipped`` reason."""
    class View:
        comparison = None if document is None else _Comparison(document)
        comparison_skipped = skipped

        def __getattr__(self, name):
            return getattr(result, name)

    return View()


def _labelled():
    from sklearn.datasets import load_iris
    from sklearn.decomposition import PCA

    from vertebrae import (
        Benchmark,
        BenchmarkDataset,
        DatasetIdentity,
        OverlapScoringConfig,
    )
    from vertebrae.extractors import PrecomputedExtractor, SklearnExtractor
    from vertebrae.reports.markdown import render_markdown

    X, y = load_iris(return_X_y=True)
    dataset = BenchmarkDataset.from_arrays(X, y, identity=DatasetIdentity.declared("iris", "1"))
    result = Benchmark(dataset, [PrecomputedExtractor("raw"), SklearnExtractor("pca2", PCA(2), cache_identity="pca2")],
                       scoring_config=OverlapScoringConfig(k=3), row_resampling=RowResamplingConfig(resamples=20), seed=0,
                       name="iris").run()  # iris's 3 classes resample rows: 20 subsamples (the least), not 200
    return result, render_markdown


def _retrieval():
    from vertebrae import DatasetIdentity, RetrievalDataset
    from vertebrae.extractors import PrecomputedExtractor
    from vertebrae.protocols.retrieval import RetrievalBenchmark
    from vertebrae.reports.markdown import render_retrieval_markdown

    rng = np.random.default_rng(5)
    G = rng.normal(size=(30, 6))
    target = rng.integers(0, 30, size=12)
    Q = G[target] + 0.2 * rng.normal(size=(12, 6))
    dataset = RetrievalDataset.from_embeddings(Q, G, [(i, int(t), 1.0) for i, t in enumerate(target)],
                                               identity=DatasetIdentity.declared("synthetic", "1"))
    return RetrievalBenchmark(dataset, [PrecomputedExtractor("raw")]).run(), render_retrieval_markdown


def encode_texts(rows):
    return np.asarray([[float("alpha" in t), float("beta" in t), 0.1 * len(t)] for t in rows])


def _zero_shot():
    from vertebrae import BenchmarkDataset, DatasetIdentity
    from vertebrae.data.zero_shot import ZeroShotDataset
    from vertebrae.extractors.callable import CallableRetrievalExtractor
    from vertebrae.protocols.zero_shot import ZeroShotBenchmark
    from vertebrae.reports.markdown import render_zero_shot_markdown

    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, 40)
    X = np.eye(3)[y] + 0.3 * rng.normal(size=(40, 3))
    dataset = BenchmarkDataset.from_arrays(X, np.array(["alpha", "beta"])[y], identity=DatasetIdentity.declared("t", "1"))
    zs = ZeroShotDataset.from_dataset(dataset, {"alpha": "an alpha", "beta": "a beta"})
    extractor = CallableRetrievalExtractor("toy", np.asarray, encode_texts)
    return ZeroShotBenchmark(zs, [extractor], sample_branch="query", text_branch="gallery").run(), render_zero_shot_markdown


@pytest.mark.parametrize("build", [_labelled, _retrieval, _zero_shot], ids=["labelled", "retrieval", "zero-shot"])
def test_each_renderer_puts_the_section_just_before_the_warnings(build):
    result, base = build()

    def render(report):  # without the cost section, whose verdicts come from the comparison (tests/reports/test_cost_report.py)
        text = base(report)
        start = text.index("\n## Quality vs cost")
        return text[:start] + text[text.index("\n## ", start + 1):]

    before = render(_with(result, None, None))
    assert f"## {TITLE}" not in before
    section = "\n".join(comparison_lines(_document(), None))
    text = render(_with(result, _document(), None))
    headers = [line for line in text.splitlines() if line.startswith("## ")]
    assert headers[-3:] == [f"## {TITLE}", "## Warnings", "## Figures"]
    assert text.replace("\n" + section, "", 1) == before  # every other line as it was
    skipped = render(_with(result, None, "fewer than two ranked candidates"))
    assert skipped.replace("\n" + "\n".join(comparison_lines(None, "fewer than two ranked candidates")), "", 1) == before
