"""The Separatix section of the labelled Markdown report and its Warnings lines.

Oracles: a real grouped Separatix run (its result object's own numbers, formatted by hand) and hand-set
warnings, skipped diagnostics and MLP status on that result (``dataclasses.replace``), whose lines are written
out by hand.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from reports.test_markdown import ROWS, SCORING, SEED, _blobs, _cells, _columns, _section, _table_lines

from vertebrae import Benchmark, BenchmarkDataset, DatasetIdentity, PrecomputedExtractor, SeparatixConfig
from vertebrae.reports.markdown import render_markdown
from vertebrae.reports.separatix import INTRODUCTION


@pytest.fixture(scope="module")
def grouped():
    """Three blob classes in 6 groups (every class in every group); ``p`` passes the gate, ``noise`` does not."""
    X, labels = _blobs()
    dataset = BenchmarkDataset.from_embeddings(X, labels, identity=DatasetIdentity.declared("blobs", "1"))
    dataset = dataset.with_groups([f"g{i % 6}" for i in range(len(labels))])
    return Benchmark(dataset, [PrecomputedExtractor("p"), _columns("noise", [3, 4])], scoring_config=SCORING,
                     separatix_config=SeparatixConfig(overlap_threshold=0.3), row_resampling=ROWS, seed=SEED).run()


def _block(section: str, title: str) -> list[str]:
    """The lines after the bold ``title`` paragraph up to the next bold paragraph."""
    body = section.split(f"**{title}**", 1)[1].split("\n**", 1)[0]
    return [line for line in body.splitlines() if line.strip()]


def _rows(lines: list[str]) -> dict[str, list[str]]:
    return {_cells(line)[0]: _cells(line) for line in [line for line in lines if line.startswith("|")][2:]}


def test_grouped_run_shows_every_part_of_the_section(grouped):
    by_name = {r.name: r for r in grouped.extractor_results}
    ran, skipped = by_name["p"].separatix, by_name["noise"].separatix
    assert ran.ran and not skipped.ran
    section = _section(render_markdown(grouped), "Separatix")
    assert INTRODUCTION in section

    summary = _rows(_table_lines(section.split("**Decision path**")[0]))
    assert summary["p"] == ["p", "True", ran.recommendation, ran.confidence,
                            f"overlap {ran.gate['score']:.4f} >= 0.3000", "–"]
    assert summary["noise"][1:4] == ["False", "–", "–"]
    assert summary["noise"][4] == f"overlap {skipped.gate['score']:.4f} < 0.3000"
    assert summary["noise"][5].startswith("overlap gate not passed")

    steps = _block(section, "Decision path")
    assert steps == [f"- **p** step {i}: {text}" for i, text in enumerate(ran.decision_path, start=1)]
    assert len(steps) >= 1

    scores = _rows(_block(section, "Key scores"))
    assert set(scores) == {key.removesuffix("_score") for key in ran.scores}
    for key, value in ran.scores.items():
        row = scores[key.removesuffix("_score")]
        assert row[1] == ("–" if value is None else f"{value:.4f}")
        assert row[2] == ran.report["interpretations"].get(key.removesuffix("_score"), "–")
    assert "Higher values mean neighborhoods are more class-mixed" in scores["overlap"][2]
    assert "its overlap is neighbourhood mixing, higher = more mixed, not the OverlapIndex score" in section

    versus = ran.probe_summary["linear_vs_nonlinear"]
    best = ran.probe_summary["best_probe"]
    probe = _rows(_block(section, "Probe evidence"))["p"]
    assert probe == ["p", f"{best['name']} ({best['family']})", "balanced_accuracy", f"{best['score']:.4f}",
                     f"{versus['linear_score']:.4f}",
                     f"{versus['nonlinear_probe']} ({versus['nonlinear_family']}) {versus['nonlinear_score']:.4f}",
                     f"{versus['improvement']:+.4f}",
                     f"[{versus['paired']['lower_95']:+.4f}, {versus['paired']['upper_95']:+.4f}]", versus["confidence"]]

    # group CV: the folds respect the 6 declared groups
    evaluation = _rows(_block(section, "Evaluation context"))
    assert list(evaluation) == ["p"]
    assert evaluation["p"] == ["p", "stratified_group", "3", "yes", "6 groups", "group_cross_validation",
                               "90 of 90", "fast"]

    skips = _block(section, "Skips")
    assert f"- **noise**: not run: {skipped.skipped_reason}" in skips
    for name, reason in ran.probe_summary["skips"]["probes"].items():
        assert f"- **p**: probe {name} skipped: {reason}" in skips


def test_ungrouped_run_says_no_group_cv():
    X, labels = _blobs()
    dataset = BenchmarkDataset.from_embeddings(X, labels, identity=DatasetIdentity.declared("blobs", "1"))
    result = Benchmark(dataset, [PrecomputedExtractor("p")], scoring_config=SCORING, row_resampling=ROWS,
                       separatix_config=SeparatixConfig(overlap_threshold=0.3), seed=SEED).run()
    row = _rows(_block(_section(render_markdown(result), "Separatix"), "Evaluation context"))["p"]
    assert row[1:6] == ["stratified", "3", "no", "none declared", "cross_validation"]


def _with_separatix(result, name: str, **changes):
    """The report with candidate ``name``'s Separatix result changed."""
    candidates = [replace(r, separatix=replace(r.separatix, **changes)) if r.name == name else r
                  for r in result.extractor_results]
    return replace(result, extractor_results=candidates)


def test_separatix_warnings_skipped_diagnostics_and_mlp(grouped):
    summary = dict(grouped.extractor_results[0].separatix.probe_summary)
    summary["mlp"] = {"requested": True, "status": "not_triggered", "reason": "linear skill already high"}
    changed = _with_separatix(
        grouped, "p",
        warnings=["Sparse input densified for probes.", "UserWarning: tiny | folds"],
        skipped_diagnostics=[{"name": "topology", "reason": "too few rows", "severity": "info"}],
        probe_summary=summary)
    text = render_markdown(changed)
    warnings = _section(text, "Warnings")
    assert "- **p**: separatix: Sparse input densified for probes." in warnings
    assert "- **p**: separatix: UserWarning: tiny \\| folds" in warnings
    skips = _block(_section(text, "Separatix"), "Skips")
    assert "- **p**: diagnostic topology skipped: too few rows" in skips
    assert "- **p**: MLP probes not_triggered: linear skill already high" in skips
    # a warning-free Separatix result adds nothing to the Warnings section
    assert "separatix:" not in _section(render_markdown(grouped), "Warnings")


def test_nothing_skipped_says_none(grouped):
    summary = dict(grouped.extractor_results[0].separatix.probe_summary)
    summary["skips"] = {"probes": {}, "diagnostics": []}
    only_p = replace(grouped, extractor_results=[grouped.extractor_results[0]])
    text = render_markdown(_with_separatix(only_p, "p", probe_summary=summary, skipped_diagnostics=[]))
    assert _block(_section(text, "Separatix"), "Skips") == ["None."]


def test_a_score_without_its_own_interpretation_takes_its_prefix_meaning(grouped):
    """Multi-label scores are per metric (``signal_micro_f1``); separatix interprets ``signal`` once."""
    ran = grouped.extractor_results[0].separatix
    report = dict(ran.report, interpretations={"signal": "Higher values mean labels are predictable."})
    only_p = replace(grouped, extractor_results=[grouped.extractor_results[0]])
    text = render_markdown(_with_separatix(only_p, "p", scores={"signal_micro_f1": 0.25, "coherence": 0.5},
                                           report=report))
    block = _block(_section(text, "Separatix"), "Key scores")
    assert _rows(block) == {"signal_micro_f1": ["signal_micro_f1", "0.2500", "Higher values mean labels are predictable."],
                            "coherence": ["coherence", "0.5000", "–"]}
    assert "not the OverlapIndex score" not in text  # no separatix overlap score to tell apart
