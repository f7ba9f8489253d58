"""The Markdown report, rendered from real (small) benchmark runs.

Oracles: the numbers in the tables are the result objects' numbers formatted by hand; the table structure is
checked by counting unescaped pipes, independently of the renderer.
"""

from __future__ import annotations

import re
from dataclasses import replace

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
from vertebrae.scoring.paired.rows import RowResamplingConfig

SCORING = OverlapScoringConfig(k=3)
SEED = 5
# a 3-class dataset's comparison resamples rows (default 200 subsamples, one OverlapIndex fit each per candidate);
# these tests read the report's tables, not the comparison's p-values: 20 subsamples (the least) run the same path
ROWS = RowResamplingConfig(resamples=20)


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
    # the regression macro score differs from the score, so its column stays; the overlap score is the primary score
    assert any(r.overlap.macro_score != r.overlap.score for r in result.extractor_results)
    header = _cells(_table_lines(_section(text, "Ranking"))[0])
    assert "overlap macro" in header and "overlap score" not in header
    assert ("Overlap score is left out of this table: for every candidate the overlap score equals the primary "
            "score (the JSON report and to_dataframe() keep it).") in text
    # no per-class table, so no per-class footnote; the note says what the regression numbers mean
    assert "Per-class" not in text and "k_per_class" not in text
    assert "Regression score: 1 = no observed harmful continuous-target overlap" in text
    assert "loss ratio = observed loss / permutation-null loss" in text


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
    plain = Benchmark(dataset, [PrecomputedExtractor("p")], scoring_config=SCORING, row_resampling=ROWS,
                      seed=SEED).run()
    assert "## Separatix" not in render_markdown(plain)

    diagnosed = Benchmark(dataset, [PrecomputedExtractor("p"), _columns("noise", [3, 4])], scoring_config=SCORING,
                          separatix_config=SeparatixConfig(overlap_threshold=0.3), row_resampling=ROWS, seed=SEED).run()
    by_name = {r.name: r for r in diagnosed.extractor_results}
    assert by_name["p"].overlap.score >= 0.3 > by_name["noise"].overlap.score  # one passes the gate, one does not
    ran = by_name["p"].separatix
    assert ran.ran is True and ran.recommendation
    text = render_markdown(diagnosed)
    lines = _table_lines(_section(text, "Separatix").split("**Decision path**")[0])  # the summary table
    assert _cells(lines[0]) == ["extractor", "ran", "recommendation", "confidence", "overlap gate", "skipped"]
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
    result = Benchmark(dataset, [PrecomputedExtractor("p")], scoring_config=SCORING, row_resampling=ROWS,
                       stability_config=StabilityConfig(repeats=3, interval_level=0.5), seed=SEED).run()
    r = result.extractor_results[0]
    low, high = np.percentile(r.stability.scores, [25.0, 75.0])
    lines = _table_lines(_section(render_markdown(result), "Ranking"))
    header = _cells(lines[0])
    row = dict(zip(header, _cells(lines[2])))
    outside = not low <= r.overlap.score <= high  # with this seed the point score lies outside its 3 repeats' interval
    assert outside, (r.overlap.score, low, high)
    assert row["stability interval"] == f"[{low:.4f}, {high:.4f}] \u2020"
    text = render_markdown(result)
    assert "not confidence intervals" in text
    caveat = ("\u2020 The overlap score of **p** lies outside its stability interval. The interval is the spread of 3 "
              "repeats of a resampled score (prototype mode: re-clustered with 3 other seeds on the same rows), not an "
              "interval around the full-data point score, which may lie outside it.")
    assert caveat in _section(text, "Ranking")
    # the same report with an interval that holds the point score: no mark, no caveat
    inside = dict(r.stability.summary, interval_low=r.overlap.score - 0.01, interval_high=r.overlap.score + 0.01)
    held = replace(result, extractor_results=[replace(r, stability=replace(r.stability, summary=inside))])
    text = render_markdown(held)
    row = dict(zip(header, _cells(_table_lines(_section(text, "Ranking"))[2])))
    assert row["stability interval"] == f"[{r.overlap.score - 0.01:.4f}, {r.overlap.score + 0.01:.4f}]"
    assert "\u2020" not in text and "not confidence intervals" in text


def test_pipes_in_names_are_escaped_in_every_table():
    X, labels = _blobs(labels=("a|b", "c", "d"))
    dataset = BenchmarkDataset.from_embeddings(X, labels, identity=DatasetIdentity.declared("pipes", "1"))
    result = Benchmark(dataset, [PrecomputedExtractor("raw|v2"), _columns("cols", [0, 1, 2])],
                       metrics=[CallableMetric.from_path("metric_fixtures:embedding_width", "width|dims")],
                       scoring_config=SCORING, row_resampling=ROWS, seed=SEED).run()
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


def test_ranking_leaves_out_columns_equal_for_every_candidate():
    X, labels = _blobs()
    dataset = BenchmarkDataset.from_embeddings(X, labels, identity=DatasetIdentity.declared("blobs", "1"))
    plain = Benchmark(dataset, [PrecomputedExtractor("p"), _columns("cols", [0, 1])], scoring_config=SCORING,
                      row_resampling=ROWS, seed=SEED).run()
    for r in plain.extractor_results:  # classification: score = macro score = primary score
        assert r.primary_score == r.overlap.score == r.overlap.macro_score
    text = render_markdown(plain)
    header = _cells(_table_lines(_section(text, "Ranking"))[0])
    assert header == ["rank", "extractor", "primary metric", "primary score", "overlap weighted", "stability interval",
                      "weakest class", "best probe", "probe metric", "probe score", "dim", "compression", "recommendation"]
    assert ("Overlap score and overlap macro are left out of this table: for every candidate the overlap score "
            "equals the primary score and the overlap macro score equals the overlap score (the JSON report and "
            "to_dataframe() keep both).") in text
    assert list(plain.to_dataframe().columns)[4:6] == ["overlap_score", "overlap_macro"]  # the data keeps them
    assert "Per-class score = 1 minus" in text and "Stability intervals" not in text  # no stability was run

    # a custom primary metric: the overlap score now differs from the primary score and is shown
    custom = Benchmark(dataset, [PrecomputedExtractor("p")], metrics=[CallableMetric.from_path("metric_fixtures:embedding_width")],
                       primary_metric="embedding_width", scoring_config=SCORING, seed=SEED).run()
    text = render_markdown(custom)
    lines = _table_lines(_section(text, "Ranking"))
    row = dict(zip(_cells(lines[0]), _cells(lines[2])))
    r = custom.extractor_results[0]
    assert row["primary score"] == f"{r.primary_score:.4f}" and row["overlap score"] == f"{r.overlap.score:.4f}"
    assert "overlap macro" not in row
    assert "Overlap macro is left out of this table: for every candidate the overlap macro score equals the overlap score" in text


def _retrieval_case():
    """6 queries, 8 gallery items in 4 dimensions; queries 0-4 have 1-2 relevant items, query 5 every item but one."""
    rng = np.random.default_rng(7)
    Q, G = rng.normal(size=(6, 4)), rng.normal(size=(8, 4))
    relevant = {0: [0, 3], 1: [1], 2: [2, 5], 3: [6], 4: [4, 7], 5: [0, 1, 2, 3, 4, 5, 6]}
    return Q, G, relevant


def test_retrieval_report_shows_precision_hit_rate_and_the_margin_parts():
    from vertebrae import RetrievalConfig, RetrievalDataset
    from vertebrae.protocols.retrieval import RetrievalBenchmark
    from vertebrae.reports.markdown import render_retrieval_markdown

    Q, G, relevant = _retrieval_case()
    records = [(q, g, 1.0) for q, items in relevant.items() for g in items]
    dataset = RetrievalDataset.from_embeddings(Q, G, records, identity=DatasetIdentity.declared("tiny-search", "1"))
    result = RetrievalBenchmark(dataset, [PrecomputedExtractor("raw")],
                                retrieval_config=RetrievalConfig(ks=(1, 3), primary_metric="ndcg@3")).run()
    text = render_retrieval_markdown(result)

    # oracle: cosine similarities by hand
    S = (Q / np.linalg.norm(Q, axis=1, keepdims=True)) @ (G / np.linalg.norm(G, axis=1, keepdims=True)).T
    order = np.argsort(-S, axis=1, kind="stable")
    precision = {k: np.mean([len(set(order[q, :k]) & set(items)) / k for q, items in relevant.items()]) for k in (1, 3)}
    hit = {k: np.mean([bool(set(order[q, :k]) & set(items)) for q, items in relevant.items()]) for k in (1, 3)}
    lines = _table_lines(_section(text, "Ranking"))
    header, row = _cells(lines[0]), dict(zip(_cells(lines[0]), _cells(lines[2])))
    assert header[4:14] == ["ndcg@1", "ndcg@3", "precision@1", "precision@3", "recall@1", "recall@3", "hit_rate@1",
                            "hit_rate@3", "mrr", "map"]
    for k in (1, 3):
        assert row[f"precision@{k}"] == f"{precision[k]:.4f}" and row[f"hit_rate@{k}"] == f"{hit[k]:.4f}"

    best = np.array([S[q, items].max() for q, items in relevant.items()])
    nearest = np.array([np.delete(S[q], items).max() for q, items in relevant.items()])
    pairs = np.concatenate([S[q, items] for q, items in relevant.items()])
    section = _section(text, "Similarity diagnostics (forward)")
    lines = _table_lines(section)
    assert _cells(lines[0]) == ["extractor", "best positive (mean per query)", "nearest negative (mean per query)",
                                "margin (mean per query)", "queries", "all positive pairs (mean)", "positive pairs"]
    assert _cells(lines[2]) == ["raw", f"{best.mean():.4f}", f"{nearest.mean():.4f}", f"{(best - nearest).mean():.4f}",
                                "6", f"{pairs.mean():.4f}", str(pairs.size)]
    assert "margin = best positive - nearest negative" in section
    assert "not only each query's best" in section
    # the point of the columns: best - nearest = margin, while the all-pairs mean is a different number
    assert abs(best.mean() - nearest.mean() - (best - nearest).mean()) < 1e-12
    assert abs(pairs.mean() - best.mean()) > 1e-3


def _zero_shot_run(counts=(25, 25, 30)):
    from vertebrae.data.zero_shot import ZeroShotDataset
    from vertebrae.extractors.callable import CallableRetrievalExtractor
    from vertebrae.protocols.zero_shot import ZeroShotBenchmark

    classes = ("alpha", "beta", "gamma")
    centers = np.random.default_rng(11).normal(size=(3, 6))
    y = np.repeat(np.arange(3), counts)
    X = centers[y] + np.random.default_rng(2).normal(size=(len(y), 6))

    def texts(rows):
        return np.asarray([sum(centers[c] for c, name in enumerate(classes) if name in t) for t in rows])

    dataset = BenchmarkDataset.from_arrays(X, np.array(classes)[y], identity=DatasetIdentity.declared("zs", "1"))
    zs = ZeroShotDataset.from_dataset(dataset, {"alpha": "an alpha", "beta": "a beta", "gamma": "a gamma"})
    extractor = CallableRetrievalExtractor("toy", lambda rows: np.asarray(rows, dtype=np.float64), texts,
                                           cache_identity="toy-zero-shot-v1")
    return ZeroShotBenchmark(zs, [extractor], sample_branch="query", text_branch="gallery",
                             compression_config=EmbeddingCompressionConfig(method="pca", n_components=4)).run()


def test_zero_shot_report_names_the_sample_fitted_variant_and_collapses_k_warnings():
    from vertebrae.reports.markdown import render_zero_shot_markdown

    result = _zero_shot_run()
    raw, compressed = result.candidate_results
    assert compressed.compression_metadata["fit_side"] == "samples"
    # OverlapIndex defaults: k = clip(rows // 5, 10, 50), capped at rows // 5, so every class is reduced
    expected = {"'alpha': 10 -> 5 (25 rows", "'beta': 10 -> 5 (25 rows", "'gamma': 10 -> 6 (30 rows"}
    for r in (raw, compressed):
        assert {w.split(", min_samples")[0].removeprefix("k reduced for small class ") for w in r.overlap.warnings} == expected
    text = render_zero_shot_markdown(result)
    assert _section(text, "Compression").strip() == (
        "- **toy[pca_4]**: the pca transform was fitted on the 80 evaluation samples themselves (without their labels) "
        "and then applied to the prompts, so this variant's scores are not held out from its compression fit.")
    warnings = [line for line in _section(text, "Warnings").splitlines() if line.startswith("- ")]
    names = "**toy[pca_4]**, **toy**" if result.ranked_results()[0] is compressed else "**toy**, **toy[pca_4]**"
    assert warnings == [
        f"- {names}: top_k=5 exceeds the number of classes (3); top_k_accuracy@5 is not reported",
        f"- {names}: OverlapIndex (side score), 4 warning(s): k reduced for 2 small class(es) ('alpha', 'beta'): "
        "10 -> 5 (25 rows, min_samples_per_cluster=5)",
        f"- {names}: OverlapIndex (side score), 2 warning(s): k reduced for 1 small class(es) ('gamma'): "
        "10 -> 6 (30 rows, min_samples_per_cluster=5)",
    ]


def test_zero_shot_report_without_compression_has_no_compression_note():
    from dataclasses import replace as _replace

    from vertebrae.reports.markdown import render_zero_shot_markdown

    result = _zero_shot_run()
    raw_only = _replace(result, candidate_results=[r for r in result.candidate_results if r.compression_metadata is None])
    assert "## Compression" not in render_zero_shot_markdown(raw_only)


def test_the_dataset_is_named_as_declared_and_its_identity_folded_away(tmp_path, monkeypatch):
    """Issue 44: a config's dataset without a declared identity (tracked by its files) is named in the report by
    its source path, not by its ``files:v1:...`` digest; the digest follows as a "Dataset identity" line, which the
    HTML page folds into a details element; a declared identity shows its name."""
    from vertebrae.planning import benchmarks_from_config
    from vertebrae.reports.html_items import report_items

    monkeypatch.chdir(tmp_path)
    X, y = _blobs()
    np.savez(tmp_path / "blobs.npz", embeddings=X, labels=np.asarray(y))
    source = {"type": "npz", "path": "blobs.npz"}

    def report(dataset: dict) -> str:
        config = {"benchmarks": {"b": {"dataset": dataset, "extractors": {"raw": {"type": "precomputed"}},
                                       "scoring": {"k": 3}, "row_resampling": {"resamples": 20}}}}
        return render_markdown(benchmarks_from_config(config)["b"].run())

    text = report({"source": source})
    intro = text.split("## Ranking")[0]
    key = re.search(r"files:v1:[0-9a-f]{64}", text).group(0)
    assert "on dataset blobs.npz:" in intro and key not in intro.split("\n\n")[1]  # the introduction names the file
    assert f"Dataset identity: {key} (what the fingerprints key on)." in intro
    page = report_items(text, benchmark="b")["ranking"]
    assert f"<details><summary>Dataset identity</summary><p>{key}" in page and page.count(key) == 1
    declared = report({"source": source, "identity": {"kind": "declared", "name": "blobs-v", "revision": "3"}})
    assert "on dataset blobs-v:" in declared and "Dataset identity: declared:blobs-v@3" in declared


def test_retrieval_and_zero_shot_reports_name_the_dataset_too(tmp_path, monkeypatch):
    """The same in the other protocols: a config's retrieval and zero-shot datasets are named by their source."""
    from vertebrae.planning import retrieval_benchmarks_from_config, zero_shot_benchmarks_from_config
    from vertebrae.reports.markdown import render_retrieval_markdown, render_zero_shot_markdown

    monkeypatch.chdir(tmp_path)
    X, y = _blobs()
    np.savez(tmp_path / "blobs.npz", embeddings=X, labels=np.asarray(y))
    source = {"type": "npz", "path": "blobs.npz"}
    retrieval = {"retrieval": {"r": {"dataset": {"source": {"type": "label_split", "source": source, "query_every": 5}},
                                     "extractors": {"raw": {"type": "precomputed"}}}}}
    text = render_retrieval_markdown(retrieval_benchmarks_from_config(retrieval)["r"].run())
    assert "(dataset blobs.npz)" in text and re.search(r"Dataset identity: files:v1:[0-9a-f]{64}", text)
    prompts = [{"label": label, "texts": [f"a {label}"]} for label in ("a", "b", "c")]
    zero_shot = {"zero_shot": {"z": {"dataset": {"source": source}, "prompts": prompts, "sample_branch": "samples",
                                     "text_branch": "text",
                                     "extractors": {"raw": {"type": "callable", "branches": {
                                         "samples": "numpy:asarray", "text": "zs_text:encode"}}}}}}
    (tmp_path / "zs_text.py").write_text("import numpy as np\n\ndef encode(texts):\n"
                                         "    return np.eye(len(texts), 5)[:, :5] + 1\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    text = render_zero_shot_markdown(zero_shot_benchmarks_from_config(zero_shot)["z"].run())
    assert "(dataset blobs.npz)" in text and re.search(r"Dataset identity: files:v1:[0-9a-f]{64}", text)
