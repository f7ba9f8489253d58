"""The Markdown report, rendered from real (small) benchmark runs.

Oracles: the numbers in the tables are the result objects' numbers formatted by hand; the table structure is
checked by counting unescaped pipes, independently of the renderer.
"""

from __future__ import annotations

import re

import numpy as np
from sklearn.preprocessing import FunctionTransformer

from vertebrae import (
    Benchmark,
    BenchmarkDataset,
    CallableMetric,
    ContinuousOverlapScoringConfig,
    DatasetIdentity,
    EmbeddingCompressionConfig,
    OverlapScoringConfig,
    PrecomputedExtractor,
    SeparatixConfig,
    SklearnExtractor,
    StabilityConfig,
)
from vertebrae.reports.markdown import render_markdown

SCORING = OverlapScoringConfig(k=3)
SEED = 5


def _columns(name: str, cols) -> SklearnExtractor:
    return SklearnExtractor(name, FunctionTransformer(lambda X, c=tuple(cols): X[:, list(c)]))


def _blobs(labels=("a", "b", "c"), n: int = 30, seed: int = 0):
    """Class i is shifted by 3 along column i; columns 3-4 are noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n * len(labels), 5))
    for i in range(len(labels)):
        X[i * n:(i + 1) * n, i] += 3.0
    return X, [label for label in labels for _ in range(n)]


def _section(text: str, title: str) -> str:
    """The body of ``## title`` up to the next ``## `` heading."""
    assert f"## {title}\n" in text, f"no section {title!r} in:\n{text}"
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _table_lines(section: str) -> list[str]:
    return [line for line in section.splitlines() if line.startswith("|")]


def _cells(line: str) -> list[str]:
    """Cells of a table line, splitting only on unescaped pipes."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def _headers(text: str) -> list[str]:
    return re.findall(r"^## (.+)$", text, flags=re.MULTILINE)


def test_regression_report_has_the_regression_diagnostics_section():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(80, 4))
    y = 2.0 * X[:, 0] + 0.1 * rng.normal(size=80)
    dataset = BenchmarkDataset.from_embeddings(X, y, target_type="regression", target_names=["height"],
                                               identity=DatasetIdentity.declared("reg", "1"))
    result = Benchmark(dataset, [_columns("good", [0, 1]), _columns("noise", [2, 3])],
                       scoring_config=ContinuousOverlapScoringConfig(k=4, n_null_permutations=2), seed=SEED).run()
    text = render_markdown(result)
    assert "Labelled protocol (regression)" in text and "regression target(s) height" in text
    assert "## Per-class scores" not in text and "## Per-label scores" not in text
    lines = _table_lines(_section(text, "Regression diagnostics"))
    assert _cells(lines[0]) == ["extractor", "score", "loss ratio", "null mode", "prototypes"]
    body = {_cells(line)[0]: _cells(line) for line in lines[2:]}
    assert set(body) == {"good", "noise"}
    for r in result.extractor_results:
        assert body[r.name] == [r.name, f"{r.overlap.score:.4f}", f"{r.overlap.loss_ratio:.4f}", "refit_permutation",
                                str(r.overlap.continuous["n_prototypes"])]


def test_multilabel_report_says_per_label_scores():
    rng = np.random.default_rng(4)
    pool = [("x",), ("y",), ("x", "z"), ("y", "z")]
    labels = [pool[i % 4] for i in range(80)]
    X = rng.normal(size=(80, 3))
    for i, row in enumerate(labels):
        for j, name in enumerate("xyz"):
            X[i, j] += 3.0 * (name in row)
    dataset = BenchmarkDataset.from_embeddings(X, labels, identity=DatasetIdentity.declared("ml", "1"))
    result = Benchmark(dataset, [PrecomputedExtractor("p")], scoring_config=OverlapScoringConfig(k=2), seed=SEED).run()
    text = render_markdown(result)
    assert "Labelled protocol (multilabel)" in text and "3 labels" in text
    assert "## Per-class scores" not in text
    lines = _table_lines(_section(text, "Per-label scores"))
    assert _cells(lines[0]) == ["label", "rows", "p"]
    r = result.extractor_results[0]
    rows = {_cells(line)[0]: _cells(line)[1:] for line in lines[2:]}
    # occurrences per label, counted by hand from the pool: x and y in 40 rows each, z in 40
    assert rows == {key: [str(count), f"{r.overlap.per_class_scores[key]:.4f}"]
                    for key, count in {"x": 40, "y": 40, "z": 40}.items()}


def test_separatix_section_when_diagnosed_and_absent_otherwise():
    X, labels = _blobs()
    dataset = BenchmarkDataset.from_embeddings(X, labels, identity=DatasetIdentity.declared("blobs", "1"))
    plain = Benchmark(dataset, [PrecomputedExtractor("p")], scoring_config=SCORING, seed=SEED).run()
    assert "## Separatix" not in render_markdown(plain)

    diagnosed = Benchmark(dataset, [PrecomputedExtractor("p"), _columns("noise", [3, 4])], scoring_config=SCORING,
                          separatix_config=SeparatixConfig(overlap_threshold=0.3), seed=SEED).run()
    by_name = {r.name: r for r in diagnosed.extractor_results}
    assert by_name["p"].overlap.score >= 0.3 > by_name["noise"].overlap.score  # one passes the gate, one does not
    ran = by_name["p"].separatix
    assert ran.ran is True and ran.recommendation
    text = render_markdown(diagnosed)
    lines = _table_lines(_section(text, "Separatix"))
    assert _cells(lines[0]) == ["extractor", "ran", "recommendation", "confidence", "decision path", "skipped"]
    rows = {_cells(line)[0]: _cells(line) for line in lines[2:]}
    assert rows["p"][1:4] == ["True", ran.recommendation, ran.confidence]
    assert rows["p"][5] == "–"
    assert rows["noise"][1:4] == ["False", "–", "–"]
    assert "overlap gate not passed" in rows["noise"][5]
    # the ranking table carries the recommendation of the candidate that ran
    ranking = {_cells(line)[1]: _cells(line) for line in _table_lines(_section(text, "Ranking"))[2:]}
    assert ranking["p"][-1] == ran.recommendation and ranking["noise"][-1] == "–"


def test_stability_interval_is_formatted_in_the_ranking_table():
    X, labels = _blobs()
    dataset = BenchmarkDataset.from_embeddings(X, labels, identity=DatasetIdentity.declared("blobs", "1"))
    result = Benchmark(dataset, [PrecomputedExtractor("p")], scoring_config=SCORING,
                       stability_config=StabilityConfig(repeats=3, interval_level=0.5), seed=SEED).run()
    r = result.extractor_results[0]
    low, high = np.percentile(r.stability.scores, [25.0, 75.0])
    lines = _table_lines(_section(render_markdown(result), "Ranking"))
    header = _cells(lines[0])
    row = dict(zip(header, _cells(lines[2])))
    assert row["stability interval"] == f"[{low:.4f}, {high:.4f}]"
    assert "not confidence intervals" in render_markdown(result)


def test_pipes_in_names_are_escaped_in_every_table():
    X, labels = _blobs(labels=("a|b", "c", "d"))
    dataset = BenchmarkDataset.from_embeddings(X, labels, identity=DatasetIdentity.declared("pipes", "1"))
    result = Benchmark(dataset, [PrecomputedExtractor("raw|v2"), _columns("cols", [0, 1, 2])],
                       metrics=[CallableMetric.from_path("metric_fixtures:embedding_width", "width|dims")],
                       scoring_config=SCORING, seed=SEED).run()
    text = render_markdown(result)
    # every table keeps one column count: each line has as many unescaped pipes as its header
    for title in _headers(text):
        lines = _table_lines(_section(text, title))
        if not lines:
            continue
        counts = [len(re.findall(r"(?<!\\)\|", line)) for line in lines]
        assert counts == [counts[0]] * len(counts), f"section {title!r} has a broken table:\n" + "\n".join(lines)
    # names appear only escaped: extractor, class label and custom metric name
    for name in ("raw|v2", "a|b", "width|dims"):
        escaped = name.replace("|", "\\|")
        assert escaped in text
        assert name not in text.replace(escaped, ""), f"{name!r} appears unescaped"


def test_warnings_of_an_unranked_candidate_still_reach_the_report():
    """A candidate left out of the ranking (primary metric not aggregate-valid) is still reported, warnings included."""
    X, labels = _blobs()
    dataset = BenchmarkDataset.from_embeddings(X, labels, identity=DatasetIdentity.declared("blobs", "1"))
    result = Benchmark(dataset, [PrecomputedExtractor("wide"), _columns("narrow", [0, 1, 2])],
                       metrics=[CallableMetric.from_path("metric_fixtures:narrow_only")], primary_metric="narrow_only",
                       compression_configs=[EmbeddingCompressionConfig(method="pca", n_components=5)],
                       scoring_config=SCORING, seed=SEED).run()
    # pca to 5 components is a no-op with a warning for both the 5-wide and the 3-wide embedding
    assert [r.name for r in result.ranked_results()] == ["narrow", "narrow[pca_5]"]
    unranked = [r.name for r in result.extractor_results if not r.aggregate_valid]
    assert unranked == ["wide", "wide[pca_5]"]
    text = render_markdown(result)
    ranking = {_cells(line)[1]: _cells(line)[0] for line in _table_lines(_section(text, "Ranking"))[2:]}
    assert ranking == {"narrow": "1", "narrow[pca_5]": "2", "wide": "–", "wide[pca_5]": "–"}
    warnings = _section(text, "Warnings")
    assert "**narrow[pca_5]**" in warnings
    assert "**wide[pca_5]**" in warnings, "the unranked variant's no-op warning is missing from the report"


def test_ranking_table_has_the_dataframe_columns_in_order():
    from vertebrae.reports.markdown import HEADERS
    from vertebrae.results import TABLE_COLUMNS

    assert tuple(HEADERS) == TABLE_COLUMNS
    assert list(HEADERS.values())[:4] == ["rank", "extractor", "primary metric", "primary score"]
