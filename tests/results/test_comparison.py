"""Reports carry the paired comparison of their ranked candidates, built from per-unit values that reproduce the
scores: retrieval per query (both directions as strata), zero-shot per sample, labelled per class."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.preprocessing import FunctionTransformer

from vertebrae import BenchmarkDataset, DatasetIdentity, RetrievalDataset
from vertebrae.data.zero_shot import ZeroShotDataset
from vertebrae.extractors import SklearnExtractor
from vertebrae.extractors.callable import CallableRetrievalExtractor
from vertebrae.protocols.labelled import Benchmark
from vertebrae.protocols.retrieval import RetrievalBenchmark
from vertebrae.protocols.zero_shot import ZeroShotBenchmark
from vertebrae.results.comparison import ComparisonUnavailable
from vertebrae.scoring.metrics import CallableMetric
from vertebrae.scoring.overlap import OverlapScoringConfig
from vertebrae.scoring.paired import ComparisonConfig, PairedUnits, compare_units
from vertebrae.scoring.retrieval import RetrievalConfig
from vertebrae.scoring.zero_shot import ZeroShotConfig

ID = DatasetIdentity.declared("toy", "1")
FAST = ComparisonConfig(resamples=500, seed=3)


def _noisy(scale):
    def encode(rows):
        rows = np.asarray(rows, dtype=np.float64)
        return rows + scale * np.random.default_rng(int(scale * 100)).normal(size=rows.shape)
    return encode


def _retrieval(config=RetrievalConfig(), comparison=FAST):
    rng = np.random.default_rng(5)
    gallery = rng.normal(size=(30, 8))
    target = rng.permutation(30)  # one positive each way: bidirectional scoring needs one per gallery item
    queries = gallery[target] + 0.3 * rng.normal(size=(30, 8))
    records = [(i, int(t), 1.0 + (i % 2)) for i, t in enumerate(target)]
    dataset = RetrievalDataset.from_arrays(queries, gallery, records, identity=ID, query_modality="vector",
                                           gallery_modality="vector")
    candidates = [CallableRetrievalExtractor(name, _noisy(s), _noisy(s), cache_identity=name) for name, s in
                  (("clean", 0.0), ("noisy", 0.8), ("noisier", 2.0))]
    return RetrievalBenchmark(dataset, candidates, retrieval_config=config, comparison_config=comparison).run()


def test_retrieval_comparison_is_the_paired_comparison_of_per_query_values():
    result = _retrieval()
    ranked = result.ranked_results()
    values = np.stack([r.score.forward.per_query["ndcg@10"] for r in ranked])[:, :, None]
    direct = compare_units(PairedUnits(unit="query", statistic="ndcg@10", candidates=tuple(r.name for r in ranked),
                                       unit_ids=tuple(ranked[0].score.forward.query_ids), values=values,
                                       strata=np.zeros(values.shape[1], dtype=np.int64), reducer="mean"), FAST)
    assert result.comparison.to_dict() == direct.to_dict()
    doc = result.comparison.to_dict()
    assert doc["unit"] == "query" and doc["n_units"] == 30 and len(doc["pairs"]) == 3
    for entry, candidate in zip(doc["candidates"], ranked):
        assert entry["name"] == candidate.name and entry["score"] == pytest.approx(candidate.primary_score, abs=1e-12)
    report = result.to_dict()
    assert report["comparison"] == doc and report["comparison_skipped"] is None
    assert type(result).from_dict(report).to_dict() == report


def test_bidirectional_retrieval_pairs_both_directions_as_strata():
    result = _retrieval(RetrievalConfig(bidirectional=True))
    units = result.comparison_units()
    assert units.unit_ids[0].startswith("forward:") and units.unit_ids[-1].startswith("reverse:")
    assert sorted(set(units.strata.tolist())) == [0, 1]
    np.testing.assert_allclose(units.point_values(), [r.primary_score for r in result.ranked_results()], atol=1e-12)


def test_disabled_and_single_candidate_comparisons_say_why():
    result = _retrieval(comparison=ComparisonConfig(enabled=False))
    assert result.comparison is None and "disabled" in result.comparison_skipped
    single = type(result)([result.candidate_results[0]], result.dataset_summary, result.metadata).with_comparison(FAST)
    assert single.comparison is None and "1 ranked candidate" in single.comparison_skipped


def test_candidates_scored_on_other_queries_are_refused_by_name():
    result = _retrieval()
    first, second = result.candidate_results[:2]
    forward = second.score.forward
    moved = type(forward).from_dict({**forward.to_dict(), "query_ids": list(reversed(forward.query_ids))})
    score = type(second.score)(moved, None, second.score.primary_score)
    other = type(second)(second.name, score, second.embedding_metadata)
    mixed = type(result)([first, other], result.dataset_summary, result.metadata)
    with pytest.raises(ValueError, match="'noisy' was scored on other forward queries than 'clean'"):
        mixed.compare(FAST)


# --------------------------------------------------------------------------------------------------
# zero-shot

CLASSES = ("alpha", "beta", "gamma")
CENTERS = np.random.default_rng(11).normal(size=(3, 8))


def _texts(rows):
    out = np.zeros((len(rows), 8))
    for i, text in enumerate(rows):
        for c, name in enumerate(CLASSES):
            if name in text:
                out[i] += CENTERS[c]
    return out


def _zero_shot(metric):
    rng = np.random.default_rng(2)
    y = rng.integers(0, 3, 90)
    X = CENTERS[y] + 1.2 * rng.normal(size=(90, 8))
    zs = ZeroShotDataset.from_dataset(BenchmarkDataset.from_arrays(X, np.array(CLASSES)[y], identity=ID),
                                      {"alpha": "an alpha", "beta": "a beta", "gamma": "a gamma"})
    candidates = [CallableRetrievalExtractor(name, _noisy(s), _texts, cache_identity=name)
                  for name, s in (("a", 0.0), ("b", 1.5))]
    return ZeroShotBenchmark(zs, candidates, sample_branch="query", text_branch="gallery",
                             zero_shot_config=ZeroShotConfig(primary_metric=metric), comparison_config=FAST).run()


@pytest.mark.parametrize("metric", ["accuracy", "balanced_accuracy", "macro_f1"])
def test_zero_shot_units_reproduce_every_primary_metric(metric):
    result = _zero_shot(metric)
    units = result.comparison_units()
    assert units.unit == "sample" and len(units.unit_ids) == 90
    np.testing.assert_allclose(units.point_values(), [r.primary_score for r in result.ranked_results()], atol=1e-12)
    pair = result.comparison.to_dict()["pairs"][0]
    if metric == "accuracy":  # correctness is 0/1 on one stratum: McNemar's exact test
        assert pair["test"] == "mcnemar-exact"
    else:
        assert pair["test"].startswith("randomization")
    if metric == "balanced_accuracy":
        assert sorted(set(units.strata.tolist())) == [0, 1, 2]


def test_zero_shot_results_keep_each_samples_outcome():
    result = _zero_shot("accuracy")
    zs = result.candidate_results[0].zero_shot
    per = zs.per_sample
    assert len(per["sample_ids"]) == zs.n_samples == 90
    correct = np.equal(per["predicted"], per["true_class"])
    assert correct.mean() == zs.metrics["accuracy"]
    assert (np.asarray(per["true_class_rank"]) == 1).tolist() == correct.tolist()  # no ties in this data
    assert type(zs).from_dict(zs.to_dict()) == zs


# --------------------------------------------------------------------------------------------------
# labelled


def _labelled(**kwargs):
    rng = np.random.default_rng(0)
    rows, labels = [], []
    for i in range(4):
        signal = rng.normal(size=(30, 4)) * 0.8
        signal[:, i] += 2.5
        rows.append(np.hstack([signal, rng.normal(size=(30, 4))]))
        labels += [f"c{i}"] * 30
    dataset = BenchmarkDataset.from_arrays(np.vstack(rows), labels, identity=ID)
    extractors = [SklearnExtractor(name, FunctionTransformer(lambda X, c=tuple(cols): X[:, list(c)]))
                  for name, cols in (("signal", range(4)), ("all", range(8)), ("half", (0, 1, 4, 5)))]
    return Benchmark(dataset, extractors, scoring_config=OverlapScoringConfig(k=4), seed=1,
                     comparison_config=FAST, **kwargs).run()


def _dim(embeddings, labels, **context):
    return float(np.asarray(embeddings).shape[1])


def test_labelled_comparison_pairs_the_candidates_on_their_classes():
    from vertebrae.scoring.paired.rows import RowResamplingConfig

    result = _labelled(row_resampling=RowResamplingConfig(mode="class"))  # 4 classes: rows by default
    units = result.comparison_units()
    assert units.unit == "class" and units.unit_ids == ("c0", "c1", "c2", "c3")
    np.testing.assert_allclose(units.point_values(), [r.overlap.score for r in result.ranked_results()], atol=1e-9)
    doc = result.to_dict()["comparison"]
    assert doc["pairs"][0]["test"] == "randomization-exact"  # 2^4 swaps enumerated: the coarsest possible test
    assert doc["min_p_value"] == pytest.approx(2 / 16)


def test_a_custom_primary_metric_without_units_is_skipped_with_its_name():
    result = _labelled(metrics=[CallableMetric("dim", _dim)], primary_metric="dim")
    assert result.comparison is None
    assert "'dim' has no per-unit values" in result.comparison_skipped
    with pytest.raises(ComparisonUnavailable):
        result.compare()


def test_the_readme_snippet_runs_as_written():
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "docs" / "statistics.md").read_text(encoding="utf-8")
    section = readme.split("## Is the leader really ahead?", 1)[1].split("\n## ", 1)[0]
    (snippet,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    namespace = {"result": _retrieval()}
    exec(compile(snippet, "docs/statistics.md", "exec"), namespace)
    comparison = namespace["comparison"]
    assert comparison.to_dict()["config"]["resamples"] == 2000
    assert comparison.tied_with_leader()[0] == comparison.leader == "clean"
    assert [row["name"] for row in comparison.versus_leader()] == ["noisy", "noisier"]
