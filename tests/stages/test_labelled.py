"""Labelled-protocol stages: the protocol payload, scoring against it, the report."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vertebrae.core.errors import ArtifactError, ValidationError
from vertebrae.core.identity import DatasetIdentity
from vertebrae.data.labelled import BenchmarkDataset
from vertebrae.scoring.overlap import OverlapScoringConfig
from vertebrae.stages.common import EmbeddingBlock
from vertebrae.stages.labelled import LabelledProtocol, build_protocol, build_report, candidate_result, score_embeddings

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
    payload = score_embeddings(block, protocol, SCORING, seed=0)
    # Two tight clusters 10*sqrt(2) apart: no prototype of one class is near the other, a perfect score.
    assert payload["overlap"]["score"] == pytest.approx(1.0)
    assert payload["overlap"]["per_class_scores"] == pytest.approx({"a": 1.0, "@int:1": 1.0})
    assert payload["embedding_metadata"] == {"n_rows": 30, "dim": 3, "dtype": "float64", "sparse": False}


def test_score_embeddings_refuses_different_row_ids_naming_the_row(dataset, protocol):
    row_ids = list(dataset.row_ids)
    row_ids[2], row_ids[3] = row_ids[3], row_ids[2]
    block = EmbeddingBlock(dataset.inputs, tuple(row_ids))
    with pytest.raises(ValidationError) as info:
        score_embeddings(block, protocol, SCORING, seed=0, endpoint="samples")
    message = str(info.value)
    assert "'samples'" in message
    assert "row 2" in message and "'r3'" in message and "'r2'" in message


def test_score_embeddings_refuses_a_different_row_count(dataset, protocol):
    block = EmbeddingBlock(dataset.inputs[:29], dataset.row_ids[:29])
    with pytest.raises(ValidationError, match=r"embeddings have 29 rows, the protocol has 30"):
        score_embeddings(block, protocol, SCORING, seed=0)


def _candidate(name, dataset, protocol):
    payload = score_embeddings(EmbeddingBlock(dataset.inputs, dataset.row_ids), protocol, SCORING, seed=0)
    return candidate_result(name, payload, embedding_metadata={"fingerprint": "f" * 16}, metadata={"score_fingerprint": "s" * 16})


def test_build_report_refuses_duplicate_candidate_names(dataset, protocol):
    one = _candidate("pixels", dataset, protocol)
    other = _candidate("pca", dataset, protocol)
    with pytest.raises(ValidationError) as info:
        build_report([one, other, one], protocol, benchmark="toy", seed=0, scoring=SCORING)
    assert "'toy'" in str(info.value) and "'pixels'" in str(info.value)
    assert "'pca'" not in str(info.value)


def test_build_report_keeps_candidates_and_records_settings(dataset, protocol):
    one = _candidate("pixels", dataset, protocol)
    other = _candidate("pca", dataset, protocol)
    report = build_report([one, other], protocol, benchmark="toy", seed=5, scoring=SCORING)
    assert [r.name for r in report.extractor_results] == ["pixels", "pca"]
    assert report.extractor_results[0].embedding_metadata["dim"] == 3
    assert report.extractor_results[0].embedding_metadata["fingerprint"] == "f" * 16
    assert report.metadata["benchmark"] == "toy" and report.metadata["seed"] == 5
    assert report.metadata["protocol"] == "labelled"
    assert report.metadata["scoring"]["k"] == 2
    assert report.dataset_summary == protocol.dataset_summary

