"""Retrieval score documents: the JSON round trip, and refusal of another config, a tampered score or schema."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vertebrae.core.errors import ArtifactError
from vertebrae.scoring.retrieval import RetrievalConfig, RetrievalResult, RetrievalScore, RetrievalScorer


def test_score_documents_round_trip_and_refuse_other_configs():
    rng = np.random.default_rng(1)
    Q, G = rng.standard_normal((6, 3)), rng.standard_normal((20, 3))
    rel = np.zeros((6, 20))
    rel[np.arange(20) % 6, np.arange(20)] = rng.integers(1, 4, 20)  # every query and gallery item has one
    config = RetrievalConfig(ks=(1, 5), primary_metric="ndcg@5", bidirectional=True, worst_queries=2)
    score = RetrievalScorer(config).score(Q, G, rel)
    text = json.dumps(score.to_dict(), allow_nan=False)
    back = RetrievalScore.from_dict(json.loads(text), expected_config=config)
    assert back == score
    other = RetrievalConfig(ks=(1, 5), primary_metric="ndcg@5", bidirectional=True, similarity="dot")
    with pytest.raises(ArtifactError, match="similarity: recorded 'cosine', expected 'dot'"):
        RetrievalScore.from_dict(json.loads(text), expected_config=other)
    tampered = json.loads(text)
    tampered["primary_score"] = 0.123
    with pytest.raises(ArtifactError, match="primary_score"):
        RetrievalScore.from_dict(tampered)
    tampered = json.loads(text)
    tampered["schema"] = "vertebrae.retrieval-score/v0"
    with pytest.raises(ArtifactError, match="schema"):
        RetrievalScore.from_dict(tampered)
    result = RetrievalResult.from_dict(json.loads(json.dumps(score.forward.to_dict())), expected_config=config)
    assert result == score.forward
