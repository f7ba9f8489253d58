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
from sklearn.preprocessing import FunctionTransformer

from vertebrae import (
    ArtifactError,
    Benchmark,
    BenchmarkDataset,
    BenchmarkResult,
    CacheConfig,
    DatasetIdentity,
    EmbeddingConfig,
    Evaluator,
    ExtractorResult,
    OverlapIndexScorer,
    OverlapScoringConfig,
    PrecomputedExtractor,
    SklearnExtractor,
    ValidationError,
)

SCORING = OverlapScoringConfig(k=4)
SEED = 3
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
    result = Benchmark(dataset, extractors, scoring_config=SCORING, seed=SEED, name="toy-bench").run()
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
    assert result.metadata["scoring"] == SCORING.to_dict()
    assert result.dataset_summary["n_rows"] == 3 * N_PER_CLASS


def test_ties_keep_declaration_order():
    dataset = _dataset()
    result = Benchmark(dataset, [PrecomputedExtractor("b"), PrecomputedExtractor("a")], scoring_config=SCORING).run()
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
        "rank", "extractor", "primary_metric", "primary_score", "overlap_macro", "overlap_weighted",
        "weakest_class", "weakest_class_score", "embedding_dim", "n_warnings",
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
        assert row.weakest_class_score == min(per.values())
        assert r.overlap.labels[min(per, key=lambda k: (per[k], k))] == row.weakest_class


def test_save_json_and_markdown(ranked_run, tmp_path):
    _, result = ranked_run
    json_path, md_path = tmp_path / "out" / "report.json", tmp_path / "out" / "report.md"
    os.makedirs(json_path.parent)
    result.save_json(json_path)
    result.save_markdown(md_path)
    assert json.loads(json_path.read_text(encoding="utf-8")) == json.loads(json.dumps(result.to_dict()))
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
    base = Benchmark(dataset, [PrecomputedExtractor("p")], scoring_config=SCORING, seed=SEED).run()
    for config in (EmbeddingConfig(batch_size=7, shards=3), EmbeddingConfig(batch_size=1, shards=120),
                   EmbeddingConfig(batch_size=1000, shards=500)):
        other = Benchmark(dataset, [PrecomputedExtractor("p")], scoring_config=SCORING, embedding_config=config,
                          seed=SEED).run()
        assert other.extractor_results[0].overlap == base.extractor_results[0].overlap


def test_sparse_embeddings_with_shards_match_direct_scoring():
    dataset = _dataset(sparse=True)
    result = Benchmark(dataset, [PrecomputedExtractor("p")], scoring_config=SCORING,
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
    first = Benchmark(dataset, [PrecomputedExtractor("p")], scoring_config=SCORING, cache_config=cache, seed=SEED).run()
    r1 = first.extractor_results[0]
    assert r1.embedding_metadata["cache_status"] == "miss"
    assert r1.embedding_metadata["cache_eligible"] is True
    assert (tmp_path / "embeddings" / f"{r1.embedding_metadata['fingerprint']}.h5").is_file()
    second = Benchmark(dataset, [PrecomputedExtractor("p")], scoring_config=SCORING, cache_config=cache, seed=SEED).run()
    r2 = second.extractor_results[0]
    assert r2.embedding_metadata["cache_status"] == "hit"
    assert r2.overlap == r1.overlap


def test_cache_miss_then_hit_for_sklearn_with_cache_identity(tmp_path):
    dataset = _dataset()
    cache = CacheConfig(enabled=True, cache_dir=tmp_path)
    first = Benchmark(dataset, [_columns("sig", range(4), identity="signal-cols@1")], scoring_config=SCORING,
                      cache_config=cache, seed=SEED).run()
    assert first.extractor_results[0].embedding_metadata["cache_status"] == "miss"
    # a fresh extractor with the same declared identity: a hit, never refitted (Boom would fail)
    second = Benchmark(dataset, [SklearnExtractor("sig", Boom(), cache_identity="signal-cols@1")], scoring_config=SCORING,
                       cache_config=cache, seed=SEED).run()
    hit = second.extractor_results[0]
    assert hit.embedding_metadata["cache_status"] == "hit"
    assert hit.overlap == first.extractor_results[0].overlap
    X, labels = _features()
    assert hit.overlap.to_dict() == OverlapIndexScorer(SCORING).score(X[:, :4], labels, seed=SEED).to_dict()
    # a different identity is a different artifact
    third = Benchmark(dataset, [_columns("sig", range(4), identity="signal-cols@2")], scoring_config=SCORING,
                      cache_config=cache, seed=SEED).run()
    assert third.extractor_results[0].embedding_metadata["cache_status"] == "miss"


def test_cache_bypassed_for_unsafe_identities(tmp_path):
    cache = CacheConfig(enabled=True, cache_dir=tmp_path)
    live = Benchmark(_dataset(), [_columns("sig", range(4))], scoring_config=SCORING, cache_config=cache).run()
    r = live.extractor_results[0]
    assert r.embedding_metadata["cache_status"] == "bypassed_unsafe_identity"
    assert r.embedding_metadata["cache_eligible"] is False
    ephemeral = _dataset(identity=DatasetIdentity.ephemeral())
    for _ in range(2):
        eph = Benchmark(ephemeral, [PrecomputedExtractor("p")], scoring_config=SCORING, cache_config=cache).run()
        assert eph.extractor_results[0].embedding_metadata["cache_status"] == "bypassed_unsafe_identity"
    assert not (tmp_path / "embeddings").exists() or not any((tmp_path / "embeddings").iterdir())


def test_corrupted_cache_file_is_refused(tmp_path):
    dataset = _dataset()
    cache = CacheConfig(enabled=True, cache_dir=tmp_path)
    first = Benchmark(dataset, [PrecomputedExtractor("p")], scoring_config=SCORING, cache_config=cache).run()
    path = tmp_path / "embeddings" / f"{first.extractor_results[0].embedding_metadata['fingerprint']}.h5"
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.truncate(size // 2)
    with pytest.raises(ArtifactError) as info:
        Benchmark(dataset, [PrecomputedExtractor("p")], scoring_config=SCORING, cache_config=cache).run()
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
    single = Evaluator(dataset=dataset, extractor=_columns("signal", range(4)), scoring_config=SCORING, seed=SEED).run()
    assert isinstance(single, ExtractorResult)
    assert single.name == "signal"
    expected = next(r for r in result.extractor_results if r.name == "signal")
    assert single.overlap == expected.overlap
    assert single.primary_metric_name == "overlap" and single.metrics == {"overlap": single.overlap}
