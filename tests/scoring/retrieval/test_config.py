"""RetrievalConfig: validation naming the field, and the JSON round trip."""

from __future__ import annotations

import json

import pytest

from vertebrae.core.errors import ConfigError
from vertebrae.scoring.retrieval import RetrievalConfig


def test_config_validation_and_round_trip():
    config = RetrievalConfig(similarity="dot", ks=[10, 1], primary_metric="recall@10", max_comparisons=5)
    assert config.ks == (1, 10)
    assert RetrievalConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    for kwargs, field in (({"similarity": "l1"}, "similarity"), ({"ks": ()}, "ks"), ({"ks": (1, 1)}, "ks"),
                          ({"primary_metric": "ndcg@20"}, "primary_metric"), ({"query_block_size": 0}, "query_block_size"),
                          ({"max_comparisons": 0}, "max_comparisons"), ({"worst_queries": -1}, "worst_queries"),
                          ({"bidirectional": "yes"}, "bidirectional")):
        with pytest.raises(ConfigError, match=f"RetrievalConfig.{field}"):
            RetrievalConfig(**kwargs)
    with pytest.raises(ConfigError, match="unknown RetrievalConfig fields"):
        RetrievalConfig.from_dict({"k": 3})

