"""Benchmark / Evaluator (in-process labelled protocol) and the result objects.

Oracle: the benchmark's numbers must equal OverlapIndexScorer applied directly to the same embeddings.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.decomposition import PCA
from sklearn.preprocessing import FunctionTransformer

from vertebrae import (
    ArtifactError,
    Benchmark,
    BenchmarkDataset,
    BenchmarkResult,
    CacheConfig,
    CallableMetric,
    ContinuousOverlapScoringConfig,
    DatasetIdentity,
    EmbeddingCompressionConfig,
    EmbeddingConfig,
    Evaluator,
    ExtractorResult,
    OverlapIndexScorer,
    OverlapMetric,
    OverlapScoreResult,
    OverlapScoringConfig,
    PrecomputedExtractor,
    SeparatixConfig,
    SklearnExtractor,
    StabilityConfig,
    ValidationError,
    run_stability_analysis,
)
from vertebrae.core.errors import VertebraeWarning
from vertebrae.reports.markdown import render_markdown
from vertebrae.scoring.paired.rows import RowResamplingConfig

SCORING = OverlapScoringConfig(k=4)
SEED = 3
# a 3-class dataset ranked by OverlapIndex makes the comparison resample rows (default 200 subsamples, one
# OverlapIndex fit each per candidate), which these tests do not read: 20, the least, runs the same path
ROWS = RowResamplingConfig(resamples=20)
N_PER_CLASS = 40
CLASSES = ["cat", "dog", 7]  # typed labels: two strings and an int


def _features(seed: int = 0) -> tuple[np.ndarray, list]:
    """Columns 0-3 carry the class (shifted means), columns 4-7 are pure noise."""
    rng = np.random.default_rng(seed)
    rows, labels = [], []
    for i, label in enumerate(CLASSES):
        signal = rng.normal(size=(N_PER_CLASS, 4)) * 0.6
        signal[:, i] += 3.0
        noise = rng.normal(size=(N_PER_CLASS, 4))
        rows.append(np.hstack([signal, noise]))
        labels += [label] * N_PER_CLASS
    return np.vstack(rows), labels


def _dataset(identity=None, sparse=False) -> BenchmarkDataset:
    X, labels = _features()
    if sparse:
        X = sp.csr_matrix(np.where(np.abs(X) < 0.5, 0.0, X))
    return BenchmarkDataset.from_arrays(X, labels, identity=identity or DatasetIdentity.declared("toy", "1"))


def _columns(name: str, cols, identity: str | None = None) -> SklearnExtractor:
    return SklearnExtractor(name, FunctionTransformer(lambda X, c=tuple(cols): X[:, list(c)]), cache_identity=identity)


class Boom(TransformerMixin, BaseEstimator):
    """Fails if it is ever fitted or used: proves a cache hit did not recompute."""

    def fit(self, X, y=None):
        raise AssertionError("Boom.fit called: the cache was not used")

    def transform(self, X):
        raise AssertionError("Boom.transform called: the cache was not used")


@pytest.fixture(scope="module")
def ranked_run():
    dataset = _dataset()
    extractors = [_columns("noise", range(4, 8)), _columns("signal", range(0, 4)), _columns("all", range(8))]
    result = Benchmark(dataset, extractors, scoring_config=SCORING,
                       row_resampling=ROWS, seed=SEED, name="toy-bench").run()
    return dataset, result


# --------------------------------------------------------------------------------------------------
# ranking and the oracle


def test_run_ranks_best_first_and_matches_direct_scoring(ranked_run):
    dataset, result = ranked_run
    X, labels = _features()
    direct = {
        "noise": OverlapIndexScorer(SCORING).score(X[:, 4:8], labels, seed=SEED),
        "signal": OverlapIndexScorer(SCORING).score(X[:, 0:4], labels, seed=SEED),
        "all": OverlapIndexScorer(SCORING).score(X, labels, seed=SEED),
    }
    # declaration order kept in extractor_results
    assert [r.name for r in result.extractor_results] == ["noise", "signal", "all"]
    for r in result.extractor_results:
        assert r.overlap.to_dict() == direct[r.name].to_dict()
        assert r.primary_score == direct[r.name].macro_score
    expected_order = sorted(direct, key=lambda n: -direct[n].macro_score)
    assert [r.name for r in result.ranked_results()] == expected_order
    # hand reasoning: the informative columns separate the classes, the noise columns do not
    assert expected_order[0] == "signal" and expected_order[-1] == "noise"
    assert direct["signal"].macro_score > 0.8 > direct["noise"].macro_score
    assert result.to_dict()["ranking"] == expected_order
    assert result.metadata["benchmark"] == "toy-bench" and result.metadata["seed"] == SEED
    assert result.metadata["plan"]["scoring"] == SCORING.to_dict()
    assert result.dataset_summary["n_rows"] == 3 * N_PER_CLASS


def test_ties_keep_declaration_order():
    dataset = _dataset()
    result = Benchmark(dataset, [PrecomputedExtractor("b"), PrecomputedExtractor("a")], scoring_config=SCORING,
                       row_resampling=ROWS).run()
    assert result.extractor_results[0].primary_score == result.extractor_results[1].primary_score
    assert [r.name for r in result.ranked_results()] == ["b", "a"]


def test_result_round_trips_through_json(ranked_run):
    _, result = ranked_run
    text = json.dumps(result.to_dict())
    restored = BenchmarkResult.from_dict(json.loads(text))
    assert restored == result
    assert restored.to_dict() == result.to_dict()
    assert [r.name for r in restored.ranked_results()] == [r.name for r in result.ranked_results()]
    one = result.extractor_results[1]
    assert ExtractorResult.from_dict(json.loads(json.dumps(one.to_dict()))) == one
    with pytest.raises(ArtifactError, match="schema"):
        BenchmarkResult.from_dict({**result.to_dict(), "schema": "vertebrae.report/v0"})


def test_to_dataframe_columns_and_rows(ranked_run):
    _, result = ranked_run
    frame = result.to_dataframe()
    assert list(frame.columns) == [
        "rank", "extractor", "primary_metric", "primary_score", "overlap_score", "overlap_macro", "overlap_weighted",
        "stability_interval", "weakest_class", "best_probe", "probe_metric", "probe_score", "embedding_dim",
        "compression", "recommendation",
    ]
    ranked = result.ranked_results()
    assert list(frame["rank"]) == [1, 2, 3]
    assert list(frame["extractor"]) == [r.name for r in ranked]
    assert list(frame["primary_score"]) == [r.overlap.macro_score for r in ranked]
    assert list(frame["overlap_weighted"]) == [r.overlap.weighted_score for r in ranked]
    dims = dict(zip(frame["extractor"], frame["embedding_dim"]))
    assert dims == {"signal": 4, "noise": 4, "all": 8}
    for row, r in zip(frame.itertuples(), ranked):
        per = r.overlap.per_class_scores
        weakest = min(per, key=lambda k: (per[k], k))
        # the weakest class cell names the class by its display label and gives its (lowest) score
        assert row.weakest_class == f"{r.overlap.labels[weakest]} ({min(per.values()):.4f})"


def test_save_json_and_markdown(ranked_run, tmp_path):
    _, result = ranked_run
    json_path, md_path = tmp_path / "out" / "report.json", tmp_path / "out" / "report.md"
    os.makedirs(json_path.parent)
    result.save_json(json_path)
    result.save_markdown(md_path)
    saved = json.loads(json_path.read_text(encoding="utf-8"))
    assert saved.pop("content_hash") and saved == json.loads(json.dumps(result.to_dict()))
    text = md_path.read_text(encoding="utf-8")
    assert "## Ranking" in text
    ranking = text.split("## Ranking", 1)[1].split("##", 1)[0]
    table_rows = [line for line in ranking.splitlines() if line.startswith("| ") and not line.startswith("| rank")]
    assert len(table_rows) == 3
    for rank, (line, r) in enumerate(zip(table_rows, result.ranked_results()), start=1):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[0] == str(rank) and cells[1] == r.name
        assert cells[3] == f"{r.primary_score:.4f}"
    # per-class section names every class by its display label
    per_class = text.split("## Per-class scores", 1)[1]
    for display in ("cat", "dog", "7"):
        assert f"| {display} |" in per_class


# --------------------------------------------------------------------------------------------------
# embedding configuration


def test_shards_and_batch_size_do_not_change_scores():
    X, labels = _features()
    dataset = BenchmarkDataset.from_embeddings(X, labels, identity=DatasetIdentity.declared("toy-emb", "1"))
    base = Benchmark(dataset, [PrecomputedExtractor("p")], scoring_config=SCORING, row_resampling=ROWS, seed=SEED).run()
    for config in (EmbeddingConfig(batch_size=7, shards=3), EmbeddingConfig(batch_size=1, shards=120),
                   EmbeddingConfig(batch_size=1000, shards=500)):
        other = Benchmark(dataset, [PrecomputedExtractor("p")], scoring_config=SCORING,
                          row_resampling=ROWS, embedding_config=config, seed=SEED).run()
        assert other.extractor_results[0].overlap == base.extractor_results[0].overlap


def test_sparse_embeddings_with_shards_match_direct_scoring():
    dataset = _dataset(sparse=True)
    result = Benchmark(dataset, [PrecomputedExtractor("p")], scoring_config=SCORING, row_resampling=ROWS,
                       embedding_config=EmbeddingConfig(batch_size=9, shards=4), seed=SEED).run()
    X, labels = _features()
    direct = OverlapIndexScorer(SCORING).score(sp.csr_matrix(np.where(np.abs(X) < 0.5, 0.0, X)), labels, seed=SEED)
    r = result.extractor_results[0]
    assert r.overlap.to_dict() == direct.to_dict()
    assert r.overlap.metadata["input_sparse"] is True
    assert r.embedding_metadata["sparse"] is True


@pytest.mark.parametrize("kwargs", [{"batch_size": 0}, {"shards": -1}, {"batch_size": 2.0}, {"shards": True}])
def test_embedding_config_validation(kwargs):
    with pytest.raises(ValidationError, match=next(iter(kwargs))):
        EmbeddingConfig(**kwargs)


# --------------------------------------------------------------------------------------------------
# cache


def test_cache_disabled_by_default(ranked_run):
    _, result = ranked_run
    assert {r.embedding_metadata["cache_status"] for r in result.extractor_results} == {"disabled"}


def test_cache_requires_dir():
    with pytest.raises(ValidationError, match="cache_dir"):
        CacheConfig(enabled=True)


def test_cache_miss_then_hit_for_precomputed(tmp_path):
    dataset = _dataset()
    cache = CacheConfig(enabled=True, cache_dir=tmp_path)
    first = Benchmark(dataset, [PrecomputedExtractor("p")], scoring_config=SCORING,
                      row_resampling=ROWS, cache_config=cache, seed=SEED).run()
    r1 = first.extractor_results[0]
    assert r1.embedding_metadata["cache_status"] == "miss"
    assert r1.embedding_metadata["cache_eligible"] is True
    assert (tmp_path / "embeddings" / f"{r1.embedding_metadata['fingerprint']}.h5").is_file()
    second = Benchmark(dataset, [PrecomputedExtractor("p")], scoring_config=SCORING,
                       row_resampling=ROWS, cache_config=cache, seed=SEED).run()
    r2 = second.extractor_results[0]
    assert r2.embedding_metadata["cache_status"] == "hit"
    assert r2.overlap == r1.overlap


def test_cache_miss_then_hit_for_sklearn_with_cache_identity(tmp_path):
    dataset = _dataset()
    cache = CacheConfig(enabled=True, cache_dir=tmp_path)
    first = Benchmark(dataset, [_columns("sig", range(4), identity="signal-cols@1")], scoring_config=SCORING,
                      row_resampling=ROWS, cache_config=cache, seed=SEED).run()
    assert first.extractor_results[0].embedding_metadata["cache_status"] == "miss"
    # a fresh extractor with the same declared identity: a hit, never refitted (Boom would fail)
    second = Benchmark(dataset, [SklearnExtractor("sig", Boom(), cache_identity="signal-cols@1")], scoring_config=SCORING,
                       row_resampling=ROWS, cache_config=cache, seed=SEED).run()
    hit = second.extractor_results[0]
    assert hit.embedding_metadata["cache_status"] == "hit"
    assert hit.overlap == first.extractor_results[0].overlap
    X, labels = _features()
    assert hit.overlap.to_dict() == OverlapIndexScorer(SCORING).score(X[:, :4], labels, seed=SEED).to_dict()
    # a different identity is a different artifact
    third = Benchmark(dataset, [_columns("sig", range(4), identity="signal-cols@2")], scoring_config=SCORING,
                      row_resampling=ROWS, cache_config=cache, seed=SEED).run()
    assert third.extractor_results[0].embedding_metadata["cache_status"] == "miss"


def test_cache_bypassed_for_unsafe_identities(tmp_path):
    cache = CacheConfig(enabled=True, cache_dir=tmp_path)
    live = Benchmark(_dataset(), [_columns("sig", range(4))], scoring_config=SCORING,
                     row_resampling=ROWS, cache_config=cache).run()
    r = live.extractor_results[0]
    assert r.embedding_metadata["cache_status"] == "bypassed_unsafe_identity"
    assert r.embedding_metadata["cache_eligible"] is False
    ephemeral = _dataset(identity=DatasetIdentity.ephemeral())
    for _ in range(2):
        eph = Benchmark(ephemeral, [PrecomputedExtractor("p")], scoring_config=SCORING,
                        row_resampling=ROWS, cache_config=cache).run()
        assert eph.extractor_results[0].embedding_metadata["cache_status"] == "bypassed_unsafe_identity"
    assert not (tmp_path / "embeddings").exists() or not any((tmp_path / "embeddings").iterdir())


def test_corrupted_cache_file_is_refused(tmp_path):
    dataset = _dataset()
    cache = CacheConfig(enabled=True, cache_dir=tmp_path)
    first = Benchmark(dataset, [PrecomputedExtractor("p")], scoring_config=SCORING,
                      row_resampling=ROWS, cache_config=cache).run()
    path = tmp_path / "embeddings" / f"{first.extractor_results[0].embedding_metadata['fingerprint']}.h5"
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.truncate(size // 2)
    with pytest.raises(ArtifactError) as info:
        Benchmark(dataset, [PrecomputedExtractor("p")], scoring_config=SCORING,
                  row_resampling=ROWS, cache_config=cache).run()
    assert str(path) in str(info.value)


# --------------------------------------------------------------------------------------------------
# construction errors and Evaluator


def test_duplicate_extractor_names_are_refused():
    dataset = _dataset()
    with pytest.raises(ValidationError, match="'p'"):
        Benchmark(dataset, [PrecomputedExtractor("p"), PrecomputedExtractor("p")])
    bench = Benchmark(dataset, [PrecomputedExtractor("p")])
    with pytest.raises(ValidationError, match="'p'"):
        bench.add_extractor(_columns("p", range(2)))


def test_empty_benchmark_and_wrong_dataset_are_refused():
    with pytest.raises(ValidationError, match="no extractors"):
        Benchmark(_dataset(), []).run()
    with pytest.raises(ValidationError, match="BenchmarkDataset"):
        Benchmark(np.zeros((4, 2)), [PrecomputedExtractor("p")])


def test_evaluator_returns_one_extractor_result(ranked_run):
    dataset, result = ranked_run
    single = Evaluator(dataset=dataset, extractor=_columns("signal", range(4)), scoring_config=SCORING,
                       row_resampling=ROWS, seed=SEED).run()
    assert isinstance(single, ExtractorResult)
    assert single.name == "signal"
    expected = next(r for r in result.extractor_results if r.name == "signal")
    assert single.overlap == expected.overlap
    assert single.primary_metric_name == "overlap" and list(single.metrics) == ["overlap"]
    assert single.custom_metrics == {}
    overlap = single.metrics["overlap"]
    assert OverlapScoreResult.from_dict(overlap.diagnostics) == single.overlap
    assert overlap.score == single.overlap.score and overlap.aggregate_valid is True


# --------------------------------------------------------------------------------------------------
# compressed variants (oracle: sklearn PCA + OverlapIndexScorer applied directly)


@pytest.fixture(scope="module")
def compressed_run():
    dataset = _dataset()
    configs = [EmbeddingCompressionConfig(method="pca", n_components=4),
               EmbeddingCompressionConfig(method="pca", n_components=8)]  # 8 >= width 8: an explicit no-op
    result = Benchmark(dataset, [_columns("all", range(8))], scoring_config=SCORING,
                       row_resampling=ROWS, compression_configs=configs, seed=SEED).run()
    return dataset, result


def test_pca_variant_equals_independent_pca_then_overlap(compressed_run):
    _, result = compressed_run
    X, labels = _features()
    assert [r.name for r in result.extractor_results] == ["all", "all[pca_4]", "all[pca_8]"]
    raw, pca4, _ = result.extractor_results
    expected = OverlapIndexScorer(SCORING).score(PCA(4).fit_transform(X), labels, seed=SEED)
    assert pca4.overlap.to_dict() == expected.to_dict()
    assert pca4.primary_score == expected.score
    meta = pca4.compression_metadata
    assert meta["applied"] is True and meta["compressed_dim"] == 4 and meta["original_dim"] == 8
    assert meta["fit_side"] == "samples" and meta["method"] == "pca"
    assert meta["recipe"] == EmbeddingCompressionConfig(method="pca", n_components=4).to_dict()
    assert pca4.embedding_metadata["dim"] == 4
    # the variant's provenance points back at the raw embedding it was fitted on
    assert pca4.embedding_metadata["source_fingerprint"] == raw.embedding_metadata["fingerprint"]
    assert pca4.embedding_metadata["fingerprint"] != raw.embedding_metadata["fingerprint"]
    assert raw.compression_metadata is None
    rows = {row["extractor"]: row for row in result.table_rows()}
    assert rows["all[pca_4]"]["compression"] == "pca" and rows["all"]["compression"] is None


def test_noop_compression_scores_like_the_raw_variant_and_keeps_the_requested_name(compressed_run):
    _, result = compressed_run
    raw, _, noop = result.extractor_results
    assert noop.name == "all[pca_8]"
    assert noop.overlap.to_dict() == raw.overlap.to_dict()
    meta = noop.compression_metadata
    assert meta["applied"] is False and meta["compressed_dim"] == 8 and meta["original_dim"] == 8
    assert len(meta["warnings"]) == 1 and "n_components=8" in meta["warnings"][0] and "8 dimension" in meta["warnings"][0]
    assert noop.embedding_metadata["dim"] == 8
    assert {row["extractor"]: row["compression"] for row in result.table_rows()}["all[pca_8]"] is None
    # the warning reaches the Markdown report under the variant's name
    warnings = render_markdown(result).split("## Warnings", 1)[1]
    assert "**all[pca_8]**" in warnings and "no-op" in warnings


# --------------------------------------------------------------------------------------------------
# custom metrics and the primary metric


def width_metric(embeddings, labels, *, target_metadata=None, groups=None, seed=None):
    """score = embedding width: unrelated to class separation, so it can disagree with OverlapIndex."""
    return {"score": float(embeddings.shape[1]), "diagnostics": {"n_rows": int(embeddings.shape[0])}}


def narrow_only_metric(embeddings, labels, *, target_metadata=None, groups=None, seed=None):
    """Like width_metric, but a width of 5 or more is declared not aggregate-valid."""
    return {"score": float(embeddings.shape[1]), "aggregate_valid": bool(embeddings.shape[1] < 5)}


def _two_candidates():
    # "signal": columns 0-2 carry the class shifts (width 3); "noise5": columns 3-7 carry none (width 5)
    return [_columns("signal", range(0, 3)), _columns("noise5", range(3, 8))]


def test_primary_custom_metric_ranks_against_the_overlap_order():
    dataset = _dataset()
    result = Benchmark(dataset, _two_candidates(), metrics=[CallableMetric("my_metric", width_metric)],
                       primary_metric="my_metric", scoring_config=SCORING, seed=SEED).run()
    X, labels = _features()
    direct = {"signal": OverlapIndexScorer(SCORING).score(X[:, 0:3], labels, seed=SEED),
              "noise5": OverlapIndexScorer(SCORING).score(X[:, 3:8], labels, seed=SEED)}
    # OverlapIndex prefers the informative columns ...
    assert direct["signal"].score > direct["noise5"].score
    # ... the primary metric (width) prefers the wider noise: the ranking follows the primary metric
    assert [r.name for r in result.ranked_results()] == ["noise5", "signal"]
    assert result.to_dict()["ranking"] == ["noise5", "signal"]
    by_name = {r.name: r for r in result.extractor_results}
    assert by_name["noise5"].primary_score == 5.0 and by_name["signal"].primary_score == 3.0
    for name, r in by_name.items():
        assert r.primary_metric_name == "my_metric"
        assert set(r.metrics) == {"overlap", "my_metric"}
        assert r.overlap.to_dict() == direct[name].to_dict()
        assert r.metrics["overlap"].score == direct[name].score
        custom = r.custom_metrics["my_metric"]
        assert custom.diagnostics == {"n_rows": 3 * N_PER_CLASS}
        assert custom.metadata["callable_path"] == f"{width_metric.__module__}:width_metric"
        assert custom.metadata["cacheable"] is True
    assert [row["primary_metric"] for row in result.table_rows()] == ["my_metric", "my_metric"]
    assert [row["rank"] for row in result.table_rows()] == [1, 2]
    assert result.metadata["plan"]["primary_metric"] == "my_metric"
    assert [m["name"] for m in result.metadata["plan"]["metrics"]] == ["my_metric"]
    restored = BenchmarkResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert [r.name for r in restored.ranked_results()] == ["noise5", "signal"]


def test_a_candidate_whose_primary_metric_is_not_aggregate_valid_is_left_unranked():
    dataset = _dataset()
    result = Benchmark(dataset, _two_candidates(), metrics=[CallableMetric("narrow", narrow_only_metric)],
                       primary_metric="narrow", scoring_config=SCORING, seed=SEED).run()
    assert [r.name for r in result.extractor_results] == ["signal", "noise5"]
    assert [r.aggregate_valid for r in result.extractor_results] == [True, False]
    assert [r.name for r in result.ranked_results()] == ["signal"]
    assert result.ranking_available is True
    assert [(row["extractor"], row["rank"]) for row in result.table_rows()] == [("signal", 1), ("noise5", None)]
    assert list(result.to_dataframe()["extractor"]) == ["signal", "noise5"]
    assert result.to_dict()["ranking"] == ["signal"]
    # OverlapIndex still ran (and is valid) for the unranked candidate
    unranked = result.extractor_results[1]
    assert unranked.metrics["overlap"].aggregate_valid is True
    X, labels = _features()
    assert unranked.overlap.to_dict() == OverlapIndexScorer(SCORING).score(X[:, 3:8], labels, seed=SEED).to_dict()
    assert "Ranking unavailable" not in render_markdown(result)


def test_no_aggregate_valid_candidate_means_no_ranking():
    dataset = _dataset()
    result = Benchmark(dataset, _two_candidates(), metrics=[CallableMetric.from_path("metric_fixtures:never_valid")],
                       primary_metric="never_valid", scoring_config=SCORING, seed=SEED).run()
    assert result.ranked_results() == []
    assert result.ranking_available is False
    assert result.to_dict()["ranking"] == [] and result.to_dict()["ranking_available"] is False
    assert [row["rank"] for row in result.table_rows()] == [None, None]
    assert "Ranking unavailable" in render_markdown(result)
    X, labels = _features()
    for r, cols in zip(result.extractor_results, (slice(0, 3), slice(3, 8))):
        assert "overlap" in r.metrics
        assert r.overlap.to_dict() == OverlapIndexScorer(SCORING).score(X[:, cols], labels, seed=SEED).to_dict()
        assert r.custom_metrics["never_valid"].warnings == ["never_valid: not rankable by design"]


def test_an_overlap_metric_configures_overlap_index_once():
    dataset = _dataset()
    bench = Benchmark(dataset, [PrecomputedExtractor("p")], metrics=[OverlapMetric(SCORING)])
    assert bench.scoring_config == SCORING and bench.plan.metrics == ()
    other = OverlapScoringConfig(k=2)
    with pytest.raises(ValidationError, match="OverlapIndex configuration once"):
        Benchmark(dataset, [PrecomputedExtractor("p")], metrics=[OverlapMetric(SCORING)], scoring_config=other)
    with pytest.raises(ValidationError, match="OverlapIndex configuration once"):
        Benchmark(dataset, [PrecomputedExtractor("p")], metrics=[OverlapMetric(SCORING), OverlapMetric(other)])


def test_a_custom_metric_named_overlap_and_an_unknown_primary_metric_are_refused():
    dataset = _dataset()
    with pytest.raises(ValidationError, match="overlap"):
        Benchmark(dataset, [PrecomputedExtractor("p")], metrics=[CallableMetric("overlap", width_metric)])
    with pytest.raises(ValidationError, match="'nope'"):
        Benchmark(dataset, [PrecomputedExtractor("p")], metrics=[CallableMetric("my_metric", width_metric)],
                  primary_metric="nope")
    with pytest.raises(ValidationError, match="'my_metric'"):
        Benchmark(dataset, [PrecomputedExtractor("p")], primary_metric="my_metric")  # no such custom metric
    with pytest.raises(ValidationError, match="duplicate"):
        Benchmark(dataset, [PrecomputedExtractor("p")],
                  metrics=[CallableMetric("m", width_metric), CallableMetric("m", narrow_only_metric)])


def test_a_lambda_metric_runs_in_process_with_a_not_cacheable_warning():
    """CallableMetric's contract: a metric without identity still runs; its results only carry a warning.

    (The spec's own example defines the metric in the user's script, i.e. in ``__main__``, which has no
    importable path either.)
    """
    dataset = _dataset()
    lam = CallableMetric("lam", lambda embeddings, labels, **_: float(embeddings.shape[1]))
    result = Benchmark(dataset, [PrecomputedExtractor("p")], metrics=[lam], scoring_config=SCORING,
                       row_resampling=ROWS, seed=SEED).run()
    custom = result.extractor_results[0].custom_metrics["lam"]
    assert custom.score == 8.0
    assert custom.metadata["cacheable"] is False
    assert any("not cacheable" in w for w in custom.warnings)


# --------------------------------------------------------------------------------------------------
# stability, separatix and groups through Benchmark


def test_stability_through_benchmark_equals_the_direct_analysis():
    dataset = _dataset()
    config = StabilityConfig(repeats=3)
    result = Benchmark(dataset, [_columns("signal", range(4))], scoring_config=SCORING,
                       row_resampling=ROWS, stability_config=config, seed=SEED).run()
    X, labels = _features()
    direct = run_stability_analysis(X[:, 0:4], dataset.targets, scoring_config=SCORING, stability_config=config,
                                    seed=SEED, row_ids=dataset.row_ids)
    r = result.extractor_results[0]
    assert r.stability.to_dict() == direct.to_dict()
    assert len(r.stability.scores) == 3
    low, high = np.percentile(r.stability.scores, [2.5, 97.5])
    assert result.table_rows()[0]["stability_interval"] == [pytest.approx(low), pytest.approx(high)]
    # the stability analysis does not replace the main score
    assert r.overlap.to_dict() == OverlapIndexScorer(SCORING).score(X[:, 0:4], labels, seed=SEED).to_dict()


def test_separatix_gate_failure_is_recorded_without_running_separatix():
    dataset = _dataset()
    result = Benchmark(dataset, [_columns("noise", range(4, 8))], scoring_config=SCORING, row_resampling=ROWS,
                       separatix_config=SeparatixConfig(overlap_threshold=0.999), seed=SEED).run()
    r = result.extractor_results[0]
    assert r.overlap.score < 0.999  # the noise columns overlap
    assert r.separatix.ran is False
    assert "overlap gate not passed" in r.separatix.skipped_reason and "0.999" in r.separatix.skipped_reason
    assert r.separatix.gate == {"metric": "overlap", "score": r.overlap.score, "threshold": 0.999, "passed": False}
    assert r.separatix.report is None and r.separatix.recommendation is None
    row = result.table_rows()[0]
    assert row["recommendation"] is None and row["best_probe"] is None
    assert result.metadata["plan"]["separatix"]["overlap_threshold"] == 0.999


def test_groups_reach_a_custom_metric_as_semantic_keys():
    groups = [1, "x", 2] * N_PER_CLASS  # ints and strings
    dataset = _dataset().with_groups(groups, name="site")
    result = Benchmark(dataset, [PrecomputedExtractor("p")], metrics=[CallableMetric.from_path("metric_fixtures:echo_inputs")],
                       scoring_config=SCORING, row_resampling=ROWS, seed=SEED).run()
    seen = result.extractor_results[0].custom_metrics["echo_inputs"].diagnostics
    assert seen["groups"] == ["@int:1", "x", "@int:2"] * N_PER_CLASS
    assert seen["groups_type"] == "ndarray"
    # labels cross as semantic keys too: the int class 7 arrives as "@int:7"
    assert seen["labels"] == ["cat"] * N_PER_CLASS + ["dog"] * N_PER_CLASS + ["@int:7"] * N_PER_CLASS
    assert seen["target_metadata"]["target_type"] == "classification"
    assert seen["seed"] == SEED
    assert result.dataset_summary["groups"] == {"name": "site", "n_groups": 3}


# --------------------------------------------------------------------------------------------------
# multi-label and regression datasets

ML_POOL = [("red",), ("green",), ("red", "blue"), ("green", "blue"), ("blue",)]
ML_SCORING = OverlapScoringConfig(k=2)


def _multilabel_features(seed: int = 1):
    """100 rows; column j is shifted by 3 when label j (red, green, blue) is present; column 3 is noise."""
    rng = np.random.default_rng(seed)
    labels = [ML_POOL[i % len(ML_POOL)] for i in range(100)]
    X = rng.normal(size=(100, 4))
    for i, row in enumerate(labels):
        for j, name in enumerate(("red", "green", "blue")):
            if name in row:
                X[i, j] += 3.0
    return X, labels


def test_multilabel_from_label_tuples_ranks_and_reports_per_label_scores():
    X, labels = _multilabel_features()
    dataset = BenchmarkDataset.from_embeddings(X, labels, identity=DatasetIdentity.declared("ml", "1"))
    assert dataset.target_type == "multilabel"
    result = Benchmark(dataset, [_columns("noise", [3]), _columns("sig", [0, 1, 2])],
                       metrics=[CallableMetric.from_path("metric_fixtures:echo_inputs")], scoring_config=ML_SCORING,
                       seed=SEED).run()
    direct = {"sig": OverlapIndexScorer(ML_SCORING).score(X[:, [0, 1, 2]], labels, seed=SEED),
              "noise": OverlapIndexScorer(ML_SCORING).score(X[:, [3]], labels, seed=SEED)}
    assert direct["sig"].target_type == "multilabel"
    for r in result.extractor_results:
        assert r.overlap.to_dict() == direct[r.name].to_dict()
        assert set(r.overlap.per_class_scores) == {"red", "green", "blue"}
    # one L2-normalised column keeps only its sign: 2 points for 5 label sets, a collapsed embedding (issue 15)
    noise = result.extractor_results[0]
    assert not noise.aggregate_valid and noise.overlap.degeneracy["n_points"] == 2
    assert [r.name for r in result.ranked_results()] == ["sig"]  # the shifted columns carry the labels
    assert result.dataset_summary["target_type"] == "multilabel"
    assert result.dataset_summary["class_counts"] == {"blue": 60, "green": 40, "red": 40}
    # label sets cross the metric boundary as tuples of keys in catalog order: ("red", "blue") -> ("blue", "red")
    seen = result.extractor_results[0].custom_metrics["echo_inputs"].diagnostics["labels"]
    assert seen[:5] == [["red"], ["green"], ["blue", "red"], ["blue", "green"], ["blue"]]
    text = render_markdown(result)
    assert "## Per-label scores" in text and "## Per-class scores" not in text


REG_SCORING = ContinuousOverlapScoringConfig(k=4, n_null_permutations=3)


def _regression_features(n: int = 300, seed: int = 2):
    """The target is 2 x column 0 plus small noise; columns 2-4 are unrelated noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    return X, 2.0 * X[:, 0] + 0.1 * rng.normal(size=n)


def test_regression_through_benchmark_reports_loss_ratio_and_continuous_metadata():
    X, y = _regression_features()
    dataset = BenchmarkDataset.from_embeddings(X, y, target_type="regression", identity=DatasetIdentity.declared("reg", "1"))
    result = Benchmark(dataset, [_columns("noise", [2, 3, 4]), _columns("good", [0, 1])], scoring_config=REG_SCORING,
                       seed=SEED).run()
    direct = OverlapIndexScorer(REG_SCORING).score(X[:, [0, 1]], y, target_type="regression", seed=SEED)
    by_name = {r.name: r for r in result.extractor_results}
    assert by_name["good"].overlap.to_dict() == direct.to_dict()
    for r in result.extractor_results:
        assert r.overlap.target_type == "regression"
        assert r.overlap.loss_ratio == r.overlap.continuous["loss_ratio"]
        assert r.overlap.continuous["n_null_permutations"] == 3
        assert r.overlap.continuous["null_mode"] == "refit_permutation"
        assert r.overlap.continuous["target_names"] == ["target_0"]
        assert r.weakest_class() is None
    # hand reasoning: columns 0-1 hold the target (loss well below the permutation null); 2-4 are unrelated to it
    assert by_name["good"].overlap.loss_ratio < 0.8 < by_name["noise"].overlap.loss_ratio
    assert [r.name for r in result.ranked_results()] == ["good", "noise"]
    assert result.metadata["plan"]["scoring"] == REG_SCORING.to_dict()
    assert result.dataset_summary["target_names"] == ["target_0"]


def test_a_categorical_scoring_config_for_a_regression_dataset_is_refused():
    X, y = _regression_features(n=40)
    dataset = BenchmarkDataset.from_embeddings(X, y, target_type="regression", identity=DatasetIdentity.declared("reg", "1"))
    with pytest.raises(ValidationError, match="ContinuousOverlapScoringConfig"):
        Benchmark(dataset, [PrecomputedExtractor("p")], scoring_config=OverlapScoringConfig(k=4))
    with pytest.raises(ValidationError, match="OverlapScoringConfig"):
        Benchmark(_dataset(), [PrecomputedExtractor("p")], scoring_config=REG_SCORING)


# --------------------------------------------------------------------------------------------------
# collapsed embeddings (issue 15, item 1): they once scored 1.0, aggregate-valid, and ranked first


def _constant(X):
    return np.ones((X.shape[0], 4))


def _one_direction(X):
    return np.abs(X[:, :1]) * np.array([[1.0, -2.0, 0.5, 3.0]])  # every row on one direction, different lengths


def test_a_collapsed_embedding_never_ranks_above_a_real_one():
    dataset = _dataset()
    extractors = [_columns("noise", range(4, 8)), SklearnExtractor("constant", FunctionTransformer(_constant)),
                  SklearnExtractor("one_direction", FunctionTransformer(_one_direction)), _columns("signal", range(0, 4))]
    with pytest.warns(VertebraeWarning, match="degenerate-embedding"):
        result = Benchmark(dataset, extractors, scoring_config=SCORING, row_resampling=ROWS, seed=SEED, name="collapse",
                           stability_config=StabilityConfig(repeats=2)).run()
    by_name = {r.name: r for r in result.extractor_results}
    collapsed = ["constant", "one_direction"]
    # the scores themselves are still the (meaningless) OverlapIndex values: 1.0, tying the real "signal", which
    # they preceded in declaration order (and so in the ranking, before the check)
    assert by_name["constant"].overlap.score == by_name["one_direction"].overlap.score == by_name["signal"].overlap.score == 1.0
    for name in collapsed:
        r = by_name[name]
        assert not r.aggregate_valid and r.to_dict()["aggregate_valid"] is False
        assert r.overlap.warnings[0].startswith("degenerate-embedding: embeddings (L2-normalised): all 120 rows are one point")
        assert r.stability.degenerate_repeats == [0, 1]
    ranked = [r.name for r in result.ranked_results()]
    assert ranked == ["signal", "noise"] and result.to_dict()["ranking"] == ranked
    rows = {row["extractor"]: row for row in result.table_rows()}
    assert [rows[n]["rank"] for n in ("signal", "noise", "constant", "one_direction")] == [1, 2, None, None]
    text = render_markdown(result)
    for name in collapsed:
        assert f"Not ranked: **{name}**: embeddings (L2-normalised): all 120 rows are one point" in text
        assert f"- **{name}**: degenerate-embedding: " in text  # and in the warnings section
    assert "Not ranked: **signal**" not in text and "Not ranked: **noise**" not in text
    restored = BenchmarkResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert [r.name for r in restored.ranked_results()] == ranked and restored.to_dict() == result.to_dict()
    # healthy candidates carry no finding: their JSON is what it was before the check
    assert all("degeneracy" not in by_name[n].to_dict()["overlap"] for n in ("signal", "noise"))
    assert all("degenerate_repeats" not in by_name[n].to_dict()["stability"] for n in ("signal", "noise"))


def test_a_compressed_variant_that_collapses_is_not_ranked():
    # PCA(2) of "one_direction" keeps its one varying direction (the second component is rounding noise): after L2
    # normalisation every row is (+1, 0) or (-1, 0), two points for three classes; "signal" and its PCA(2) stay healthy
    dataset = _dataset()
    extractors = [SklearnExtractor("one_direction", FunctionTransformer(_one_direction)), _columns("signal", range(0, 4))]
    result = Benchmark(dataset, extractors, scoring_config=SCORING, row_resampling=ROWS, seed=SEED,
                       compression_configs=[EmbeddingCompressionConfig(method="pca", n_components=2)]).run()
    by_name = {r.name: r for r in result.extractor_results}
    variant = by_name["one_direction[pca_2]"]
    assert not variant.aggregate_valid and variant.overlap.degeneracy["n_points"] == 2
    assert "fewer than the 3 classes" in variant.overlap.degeneracy["reason"]
    assert [r.name for r in result.ranked_results()] == ["signal", "signal[pca_2]"]
    assert "Not ranked: **one_direction[pca_2]**: embeddings (L2-normalised): its 120 rows collapse onto 2" in render_markdown(result)


def test_a_collapsed_embedding_is_unranked_whatever_the_primary_metric():
    dataset = _dataset()
    extractors = [SklearnExtractor("constant", FunctionTransformer(_constant)), _columns("signal", range(0, 3))]
    result = Benchmark(dataset, extractors, metrics=[CallableMetric("my_metric", width_metric)],
                       primary_metric="my_metric", scoring_config=SCORING, seed=SEED).run()
    # width 4 beats width 3 on my_metric, but the constant rows are collapsed
    assert [r.name for r in result.ranked_results()] == ["signal"]


def test_a_run_plans_each_builtin_metric_once_for_all_its_candidates(monkeypatch):
    """The built-in metrics' plans (folds, episodes) depend on the targets, row ids, groups and seed, which every
    candidate of a benchmark shares: a run makes them once (and the constructor once, to refuse early), not once a
    candidate, and each candidate's numbers equal the metric computed alone on its embeddings."""
    from vertebrae import ClusteringMetric, FewShotMetric, KNNMetric, LinearProbeMetric

    metrics = [KNNMetric(k=3, folds=3), LinearProbeMetric(Cs=(0.1,), folds=2, inner_folds=2, max_iter=200),
               FewShotMetric(shots=(1, 2), episodes=3), ClusteringMetric(n_init=1, repeats=1)]
    dataset = _dataset()
    extractors = [_columns("noise", range(4, 8)), _columns("signal", range(0, 4)), _columns("all", range(8))]
    calls = []
    for cls in (KNNMetric, LinearProbeMetric, FewShotMetric, ClusteringMetric):
        original = cls._plan
        monkeypatch.setattr(cls, "_plan", lambda self, *a, _o=original, **k: calls.append(self.name) or _o(self, *a, **k))
    result = Benchmark(dataset, extractors, scoring_config=SCORING,
                       row_resampling=ROWS, seed=SEED, metrics=metrics).run()
    assert sorted(calls) == sorted(2 * [m.name for m in metrics]), calls  # the constructor's check and the run's
    monkeypatch.undo()
    X = _features()[0]
    for candidate in result.extractor_results:
        columns = {"noise": range(4, 8), "signal": range(0, 4), "all": range(8)}[candidate.name]
        for metric in metrics:
            alone = metric.compute(X[:, list(columns)], dataset.targets, row_ids=dataset.row_ids, seed=SEED).to_dict()
            assert candidate.to_dict()["metrics"][metric.name] == alone, (candidate.name, metric.name)
