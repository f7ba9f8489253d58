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



# ---------------------------------------------------------------------------------------------------------
# LabelRetrievalMetric(RetrievalConfig(...)): the established library's spelling


def test_label_options_read_a_retrieval_config():
    from vertebrae.scoring.retrieval.label import label_options

    config = RetrievalConfig(similarity="dot", ks=(3, 1), primary_metric="ndcg@3", query_block_size=7)
    assert label_options(config) == {"similarity": "dot", "ks": (1, 3), "primary": "ndcg@3", "query_block": 7}
    with pytest.raises(ConfigError, match="bidirectional=True does not apply to leave-one-out"):
        label_options(RetrievalConfig(bidirectional=True))
    with pytest.raises(ConfigError, match="LabelRetrievalMetric: expected a RetrievalConfig, got dict"):
        label_options({"similarity": "dot"})


def test_label_retrieval_metric_takes_a_retrieval_config():
    import numpy as np

    from vertebrae.data.targets import build_targets
    from vertebrae.scoring.metrics import LabelRetrievalMetric

    config = RetrievalConfig(similarity="dot", ks=(1, 3), primary_metric="ndcg@3", query_block_size=2)
    by_config = LabelRetrievalMetric(RetrievalConfig(similarity="dot", ks=(1, 3), primary_metric="ndcg@3",
                                                     query_block_size=2))
    explicit = LabelRetrievalMetric("dot", (1, 3), "ndcg@3", 2)
    assert by_config.recipe() == explicit.recipe() == LabelRetrievalMetric(config=config).recipe()
    x = np.array([[0.0, 1.0], [0.1, 1.0], [1.0, 0.0], [1.0, 0.2], [0.5, 0.5]])
    targets = build_targets(["a", "a", "b", "b", "a"])
    assert by_config.compute(x, targets, row_ids=None).score == explicit.compute(x, targets, row_ids=None).score
    with pytest.raises(ConfigError, match="leave similarity, ks, primary and query_block out"):
        LabelRetrievalMetric(config, ks=(1,))
    with pytest.raises(ConfigError, match="bidirectional"):
        LabelRetrievalMetric(RetrievalConfig(bidirectional=True))
