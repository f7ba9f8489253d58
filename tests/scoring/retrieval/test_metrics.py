"""The retrieval metric kernels: the family list, the metric-name language, log gains, and one formula for both
rankings (the exact scorer's sparse ranks, ``LabelRetrievalMetric``'s dense relevance flags)."""

from __future__ import annotations

import math
from decimal import Decimal, getcontext
from fractions import Fraction

import numpy as np
import pytest

from vertebrae.core.errors import ConfigError
from vertebrae.scoring.retrieval.metrics import (
    DenseRanking,
    SparseRanking,
    log_gain,
    metric_names,
    parse_retrieval_metric,
    per_query_metrics,
)


def test_metric_names_are_the_language_parse_accepts():
    names = metric_names((10, 1))
    assert names == ("map", "mrr", "ndcg@10", "ndcg@1", "precision@10", "precision@1", "recall@10", "recall@1",
                     "hit_rate@10", "hit_rate@1")
    for name in names:
        assert parse_retrieval_metric(name, (1, 10)) == name
    with pytest.raises(ConfigError, match=r"^X must be 'map', 'mrr' or one of ndcg@K, precision@K, recall@K, "
                                          r"hit_rate@K; got 'auc'$"):
        parse_retrieval_metric("auc", (1,), owner="X")
    with pytest.raises(ConfigError, match=r"uses K=5, which is not in ks=\[1\]"):
        parse_retrieval_metric("recall@5", (1,))


def test_kernels_on_hand_worked_ranks():
    # query 0: binary positives at ranks 2 and 3; query 1: one positive at rank 1
    ranking = SparseRanking.of(np.array([0, 2, 3]), np.array([3, 2, 1]), np.array([1.0, 1.0, 1.0]))
    values = per_query_metrics(ranking, (1, 2, 3))
    d2, d3 = 1 / math.log2(3), 1 / math.log2(4)
    expected = {
        "map": [float(Fraction(7, 12)), 1.0], "mrr": [0.5, 1.0],
        "precision@2": [0.5, 0.5], "recall@2": [0.5, 1.0], "hit_rate@1": [0.0, 1.0],
        "ndcg@1": [0.0, 1.0], "ndcg@3": [(d2 + d3) / (1 + d2), 1.0],
    }
    for name, want in expected.items():
        np.testing.assert_allclose(values[name], want, rtol=1e-15, err_msg=name)


def test_sparse_and_dense_rankings_agree_on_binary_relevance():
    rng = np.random.default_rng(5)
    relevant = rng.random((40, 70)) < 0.1
    relevant[np.arange(40), rng.integers(0, 70, 40)] = True
    rows, cols = np.nonzero(relevant)
    indptr = np.concatenate([[0], np.cumsum(relevant.sum(axis=1))])
    ks = (1, 5, 10, 100)
    sparse = per_query_metrics(SparseRanking.of(indptr, cols + 1, np.ones(cols.size)), ks)
    dense = per_query_metrics(DenseRanking(relevant), ks)
    assert list(sparse) == list(dense) == list(metric_names(ks))
    for name in sparse:
        np.testing.assert_allclose(sparse[name], dense[name], rtol=1e-13, atol=0, err_msg=name)


def test_log_gain_is_stable_and_matches_exact_arithmetic():
    getcontext().prec = 60
    grades = [1e-9, 5e-5, 1e-4 / math.log(2) * 0.999, 0.5, 1.0, 3.0, 40.0, 72.1, 1e4]
    for g, value in zip(grades, log_gain(np.array(grades))):
        exact = (Decimal(2) ** Decimal(repr(g)) - 1).ln()
        assert math.isfinite(value)
        assert value == pytest.approx(float(exact), rel=1e-13, abs=1e-13), g
