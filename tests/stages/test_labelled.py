"""Labelled-protocol stages: the protocol payload, scoring against it, the report."""

from __future__ import annotations

import json

import metric_fixtures
import numpy as np
import pytest
from sklearn.decomposition import PCA

from vertebrae.compression import EmbeddingCompressionConfig
from vertebrae.core.errors import ArtifactError, ValidationError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.core.identity import DatasetIdentity
from vertebrae.data.labelled import BenchmarkDataset
from vertebrae.scoring.metrics import CallableMetric, LabelRetrievalMetric, OverlapMetric
from vertebrae.scoring.overlap import ContinuousOverlapScoringConfig, OverlapScoringConfig
from vertebrae.scoring.separatix import SeparatixConfig
from vertebrae.scoring.stability import StabilityConfig, run_stability_analysis
from vertebrae.stages.common import EmbeddingBlock
from vertebrae.stages.labelled import (
    ScoringPlan,
    build_protocol,
    build_report,
    candidate_result,
    compress_block,
    compression_recipe,
    score_embeddings,
    score_recipe,
)
from vertebrae.data.labelled import LabelledProtocol

N_PER_CLASS = 15


@pytest.fixture(scope="module")
def dataset() -> BenchmarkDataset:
    """Two tight, far-apart clusters: class 'a' near (10, 0, 0), class int 1 near (0, 10, 0)."""
    rng = np.random.default_rng(0)
    X = np.vstack([
        rng.normal(size=(N_PER_CLASS, 3)) * 0.01 + [10.0, 0.0, 0.0],
        rng.normal(size=(N_PER_CLASS, 3)) * 0.01 + [0.0, 10.0, 0.0],
    ])
    labels = ["a"] * N_PER_CLASS + [1] * N_PER_CLASS
    return BenchmarkDataset.from_embeddings(X, labels, identity=DatasetIdentity.declared("toy", "1"),
                                            row_ids=[f"r{i}" for i in range(2 * N_PER_CLASS)])


@pytest.fixture(scope="module")
def protocol(dataset) -> LabelledProtocol:
    return build_protocol(dataset)


SCORING = OverlapScoringConfig(k=2)
PLAN = ScoringPlan(SCORING, seed=0)


def test_protocol_payload_round_trip_through_json(protocol):
    payload = json.loads(json.dumps(protocol.to_payload()))
    back = LabelledProtocol.from_payload(payload, source="p.json")
    assert back.row_ids == protocol.row_ids == tuple(f"r{i}" for i in range(30))
    assert back.targets.target_type == "classification"
    assert list(back.targets.values) == list(protocol.targets.values)
    assert list(back.targets.values[:2]) == ["a", "a"] and back.targets.values[-1] == "@int:1"
    assert back.targets.catalog == protocol.targets.catalog
    assert back.targets.catalog.keys == ("@int:1", "a")
    assert back.targets.catalog.value("@int:1") == 1 and type(back.targets.catalog.value("@int:1")) is int
    assert back.dataset_summary == protocol.dataset_summary
    assert back.dataset_summary["class_counts"] == {"@int:1": 15, "a": 15}


def test_protocol_payload_with_a_label_key_outside_the_catalog_is_refused(protocol):
    payload = json.loads(json.dumps(protocol.to_payload()))
    payload["targets"]["label_keys"][4] = "zebra"
    with pytest.raises(ArtifactError) as info:
        LabelledProtocol.from_payload(payload, source="results/protocols/x.json")
    assert "results/protocols/x.json" in str(info.value)
    assert "zebra" in str(info.value)


def test_protocol_payload_with_fewer_label_keys_than_rows_is_refused(protocol):
    payload = json.loads(json.dumps(protocol.to_payload()))
    payload["targets"]["label_keys"].pop()
    with pytest.raises(ArtifactError, match="results/protocols/y.json"):
        LabelledProtocol.from_payload(payload, source="results/protocols/y.json")


def test_score_embeddings_on_separate_clusters(dataset, protocol):
    block = EmbeddingBlock(dataset.inputs, dataset.row_ids)
    payload = score_embeddings(block, protocol, PLAN)
    # Two tight clusters 10*sqrt(2) apart: no prototype of one class is near the other, a perfect score.
    assert payload["overlap"]["score"] == pytest.approx(1.0)
    assert payload["overlap"]["per_class_scores"] == pytest.approx({"a": 1.0, "@int:1": 1.0})
    assert payload["embedding_metadata"] == {"n_rows": 30, "dim": 3, "dtype": "float64", "sparse": False}


def test_score_embeddings_refuses_different_row_ids_naming_the_row(dataset, protocol):
    row_ids = list(dataset.row_ids)
    row_ids[2], row_ids[3] = row_ids[3], row_ids[2]
    block = EmbeddingBlock(dataset.inputs, tuple(row_ids))
    with pytest.raises(ValidationError) as info:
        score_embeddings(block, protocol, PLAN, endpoint="samples")
    message = str(info.value)
    assert "'samples'" in message
    assert "row 2" in message and "'r3'" in message and "'r2'" in message


def test_score_embeddings_refuses_a_different_row_count(dataset, protocol):
    block = EmbeddingBlock(dataset.inputs[:29], dataset.row_ids[:29])
    with pytest.raises(ValidationError, match=r"embeddings have 29 rows, the protocol has 30"):
        score_embeddings(block, protocol, PLAN)


def _candidate(name, dataset, protocol):
    payload = score_embeddings(EmbeddingBlock(dataset.inputs, dataset.row_ids), protocol, PLAN)
    return candidate_result(name, payload, plan=PLAN, embedding_metadata={"fingerprint": "f" * 16}, compression_metadata=None,
                            metadata={"score_fingerprint": "s" * 16})


def test_build_report_refuses_duplicate_candidate_names(dataset, protocol):
    one = _candidate("pixels", dataset, protocol)
    other = _candidate("pca", dataset, protocol)
    with pytest.raises(ValidationError) as info:
        build_report([one, other, one], protocol, benchmark="toy", plan=PLAN)
    assert "'toy'" in str(info.value) and "'pixels'" in str(info.value)
    assert "'pca'" not in str(info.value)


def test_build_report_keeps_candidates_and_records_settings(dataset, protocol):
    one = _candidate("pixels", dataset, protocol)
    other = _candidate("pca", dataset, protocol)
    report = build_report([one, other], protocol, benchmark="toy", plan=ScoringPlan(SCORING, seed=5))
    assert [r.name for r in report.extractor_results] == ["pixels", "pca"]
    assert report.extractor_results[0].embedding_metadata["dim"] == 3
    assert report.extractor_results[0].embedding_metadata["fingerprint"] == "f" * 16
    assert report.metadata["benchmark"] == "toy" and report.metadata["seed"] == 5
    assert report.metadata["protocol"] == "labelled"
    assert report.metadata["plan"]["scoring"]["k"] == 2
    assert report.dataset_summary == protocol.dataset_summary



# --------------------------------------------------------------------------------------------------
# ScoringPlan: what is computed per candidate, and its recorded form


def _full_plan(seed: int = 7) -> ScoringPlan:
    return ScoringPlan(
        SCORING,
        seed=seed,
        metrics=(CallableMetric.from_path("metric_fixtures:embedding_width"),
                 LabelRetrievalMetric(ks=(1, 3), primary="ndcg@3")),
        stability=StabilityConfig(mode="subsample", repeats=4, subsample_fraction=0.5, random_state=2),
        separatix=SeparatixConfig(overlap_threshold=0.5, random_state=9),
        primary_metric="embedding_width",
    )


def test_scoring_plan_round_trips_through_json_with_the_same_fingerprint():
    plan = _full_plan()
    data = json.loads(json.dumps(plan.to_dict()))
    back = ScoringPlan.from_dict(data, "classification")
    assert back.to_dict() == plan.to_dict()
    assert back.scoring == SCORING and back.seed == 7
    assert back.stability == plan.stability and back.separatix == plan.separatix
    assert back.primary_metric == "embedding_width"
    assert [m.name for m in back.metrics] == ["embedding_width", "label_retrieval"]
    assert back.metrics[0].fn is metric_fixtures.embedding_width
    assert back.metrics[1].recipe() == plan.metrics[1].recipe()
    same = fingerprint("score", score_recipe("e" * 16, "p" * 16, back))
    assert same == fingerprint("score", score_recipe("e" * 16, "p" * 16, plan))
    # the fingerprint does depend on the plan
    assert same != fingerprint("score", score_recipe("e" * 16, "p" * 16, _full_plan(seed=8)))
    assert data["metrics"][0] == {"type": "callable", "name": "embedding_width", "path": "metric_fixtures:embedding_width",
                                  "cache_identity": None}


def test_scoring_plan_round_trip_for_regression_uses_the_continuous_config():
    plan = ScoringPlan(ContinuousOverlapScoringConfig(k=4, n_null_permutations=3), seed=1,
                       stability=StabilityConfig(repeats=2))
    back = ScoringPlan.from_dict(json.loads(json.dumps(plan.to_dict())), "regression")
    assert back.scoring == plan.scoring and back.to_dict() == plan.to_dict()


def test_a_lambda_metric_is_recorded_as_unrecorded_and_cannot_be_replayed():
    plan = ScoringPlan(SCORING, metrics=(CallableMetric("lam", lambda embeddings, labels, **_: 1.0),))
    data = plan.to_dict()  # fine for an in-process run
    assert data["metrics"] == [{"type": "unrecorded", "name": "lam"}]
    # but another process cannot rebuild it: from_dict refuses, naming the metric
    with pytest.raises(ValidationError, match=r"'lam'.*cannot be replayed"):
        ScoringPlan.from_dict(json.loads(json.dumps(data)), "classification")
    # with an explicit cache_identity it is recorded as a callable
    named = ScoringPlan(SCORING, metrics=(CallableMetric("lam", lambda embeddings, labels, **_: 1.0, cache_identity="lam@1"),))
    assert named.to_dict()["metrics"] == [{"type": "callable", "name": "lam", "path": None, "cache_identity": "lam@1"}]


def test_scoring_plan_refuses_overlap_as_a_custom_metric_and_an_unknown_primary_metric():
    with pytest.raises(ValidationError, match="overlap"):
        ScoringPlan(SCORING, metrics=(OverlapMetric(SCORING),))
    with pytest.raises(ValidationError, match="overlap"):
        ScoringPlan(SCORING, metrics=(CallableMetric.from_path("metric_fixtures:embedding_width", "overlap"),))
    with pytest.raises(ValidationError, match="'label_retrieval'"):
        ScoringPlan(SCORING, primary_metric="label_retrieval")


def test_score_embeddings_with_metrics_stability_and_a_disabled_separatix(dataset, protocol):
    plan = ScoringPlan(SCORING, seed=4, metrics=(CallableMetric.from_path("metric_fixtures:embedding_width"),),
                       stability=StabilityConfig(repeats=2), separatix=SeparatixConfig(enabled=False),
                       primary_metric="embedding_width")
    payload = score_embeddings(EmbeddingBlock(dataset.inputs, dataset.row_ids), protocol, plan)
    assert payload["metrics"]["embedding_width"]["score"] == 3.0
    assert payload["metrics"]["embedding_width"]["diagnostics"] == {"n_rows": 30}
    direct = run_stability_analysis(dataset.inputs, protocol.targets, scoring_config=SCORING,
                                    stability_config=StabilityConfig(repeats=2), seed=4, row_ids=dataset.row_ids)
    assert payload["stability"] == direct.to_dict()
    assert payload["separatix"]["ran"] is False and "disabled" in payload["separatix"]["skipped_reason"]
    assert payload["separatix"]["gate"]["score"] == payload["overlap"]["score"]
    result = candidate_result("pixels", payload, plan=plan, embedding_metadata={"fingerprint": "f" * 16},
                              compression_metadata={"method": "pca", "applied": True}, metadata={})
    assert result.primary_metric_name == "embedding_width" and result.primary_score == 3.0
    assert result.compression_metadata == {"method": "pca", "applied": True}
    assert result.embedding_metadata == {"n_rows": 30, "dim": 3, "dtype": "float64", "sparse": False, "fingerprint": "f" * 16}
    report = build_report([result], protocol, benchmark="toy", plan=plan)
    assert report.metadata["plan"] == plan.to_dict()


def test_compress_block_fits_on_the_samples_and_keeps_row_ids(dataset):
    block, metadata = compress_block(EmbeddingBlock(dataset.inputs, dataset.row_ids),
                                     EmbeddingCompressionConfig(method="pca", n_components=2))
    assert block.row_ids == dataset.row_ids
    assert np.allclose(block.matrix, PCA(2).fit(dataset.inputs).transform(dataset.inputs))
    assert metadata["fit_side"] == "samples" and metadata["applied"] is True and metadata["compressed_dim"] == 2
    recipe = compression_recipe("e" * 16, EmbeddingCompressionConfig(method="pca", n_components=2))
    assert recipe == {"embedding": "e" * 16, "fit_endpoint": "samples",
                      "compression": EmbeddingCompressionConfig(method="pca", n_components=2).to_dict()}


def test_score_embeddings_plans_each_builtin_metric_once_and_equals_its_own_compute(dataset, protocol, monkeypatch):
    """check_metrics refuses bad declarations before any scoring and hands its plans (folds, episodes) to compute:
    the splits are made once a score, and the numbers equal the metric computed alone."""
    from vertebrae import FewShotMetric, KNNMetric

    metrics = (KNNMetric(k=3, folds=3), FewShotMetric(shots=(1, 2), episodes=3))
    alone = {m.name: m.compute(dataset.inputs, protocol.targets, row_ids=dataset.row_ids, seed=0).to_dict()
             for m in metrics}
    calls = []
    for cls in (KNNMetric, FewShotMetric):
        original = cls._plan
        monkeypatch.setattr(cls, "_plan", lambda self, *a, _o=original, **k: calls.append(self.name) or _o(self, *a, **k))
    payload = score_embeddings(EmbeddingBlock(dataset.inputs, dataset.row_ids), protocol,
                               ScoringPlan(SCORING, seed=0, metrics=metrics))
    assert sorted(calls) == sorted(m.name for m in metrics)
    assert payload["metrics"] == alone
