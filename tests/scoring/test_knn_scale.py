"""kNN at scale (issue 49): the blocked neighbour search (``knn.top_k``) equals a brute-force search over the whole
similarity matrix at 200,000 train rows, ties included, in bounded memory; the metric does not depend on the block
budget or the thread count."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from vertebrae import KNNMetric
from vertebrae.data.targets import classification_targets
from vertebrae.scoring import knn
from vertebrae.scoring.knn import top_k

ROWS, DIMS, K = 200_000, 8, 5


def _brute_force(gallery, queries, k, chunk=100):
    """Each query's k best gallery rows from the whole product matrix: score descending, ties by the lower row."""
    index = np.empty((len(queries), k), dtype=np.int64)
    for lo in range(0, len(queries), chunk):
        scores = queries[lo:lo + chunk] @ gallery.T
        kth = np.partition(scores, scores.shape[1] - k, axis=1)[:, -k]
        for i, row in enumerate(scores):
            candidates = np.flatnonzero(row >= kth[i])
            index[lo + i] = candidates[np.lexsort((candidates, -row[candidates]))][:k]
    return index


@pytest.fixture(scope="module")
def integer_rows():
    """Small integer coordinates: every product is exact whatever the blocking, and ties are everywhere."""
    rng = np.random.default_rng(0)
    gallery = rng.integers(-3, 4, size=(ROWS, DIMS)).astype(np.float64)
    gallery[1000:1100] = gallery[0]  # exact duplicate rows
    return gallery, rng.integers(-3, 4, size=(400, DIMS)).astype(np.float64)


def test_blocked_top_k_equals_brute_force_with_ties(integer_rows):
    gallery, queries = integer_rows
    index, score = top_k(gallery, queries, K, block_bytes=2**20, threads=2)
    assert np.array_equal(index, _brute_force(gallery, queries, K))
    assert np.array_equal(score, np.einsum("qd,qkd->qk", queries, gallery[index]))


def test_blocked_top_k_on_unit_rows_equals_brute_force():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(ROWS + 400, DIMS))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    train, test = np.arange(400, ROWS + 400), np.arange(400)
    index, _ = top_k(x, x, K, gallery_rows=train, query_rows=test, block_bytes=2**20)
    assert np.array_equal(index, _brute_force(x[train], x[test], K))


def test_a_gallery_in_rising_order_takes_the_blocks_own_top_k():
    """Later blocks all beat the running k-th: each is cut to its own best k before the merge."""
    rng = np.random.default_rng(3)
    gallery = rng.integers(0, 5, size=(20_000, DIMS)).astype(np.float64)
    gallery = gallery[np.argsort(gallery.sum(axis=1), kind="stable")]
    queries = np.vstack([np.ones(DIMS), rng.integers(0, 3, size=(50, DIMS))]).astype(np.float64)
    index, _ = top_k(gallery, queries, K, block_bytes=2**18)
    assert np.array_equal(index, _brute_force(gallery, queries, K))


def test_memory_stays_within_the_block_budget(integer_rows):
    gallery, queries = integer_rows
    tracemalloc.start()
    top_k(gallery, queries[:200], K, block_bytes=4 * 2**20, threads=1)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 12 * 2**20, peak  # the whole matrix would be 200 x 200,000 x 8 bytes = 320 MB


def test_the_metric_does_not_depend_on_blocks_or_threads(monkeypatch):
    rng = np.random.default_rng(2)
    y = np.arange(3000) % 7
    x = rng.normal(size=(7, 16))[y] + rng.normal(size=(3000, 16))
    targets = classification_targets(y)
    with threadpool_limits(1):
        reference = KNNMetric(k=9, weighting="temperature").compute(x, targets, row_ids=None, seed=0).to_dict()
    monkeypatch.setattr(knn, "BLOCK_BYTES", 2**19)  # blocks of a few dozen rows against a few hundred columns
    for threads in (1, 2):
        with threadpool_limits(threads):
            assert KNNMetric(k=9, weighting="temperature").compute(x, targets, row_ids=None, seed=0).to_dict() \
                == reference


def test_the_search_follows_the_memory_budget(integer_rows):
    """``memory_config`` (``MemoryConfig.max_resident_bytes``, shared by the worker threads) bounds the search's
    working memory: a small budget gives the same result as the default, with smaller score blocks and a smaller
    peak; the budget stays out of the recipe (no result depends on it)."""
    from vertebrae import MemoryConfig

    gallery, queries = integer_rows
    y = np.arange(6000) % 5
    x = gallery[:6000] + 10.0 * np.eye(5, DIMS)[y]  # classes apart, exact ties everywhere
    targets = classification_targets(y)
    small = KNNMetric(k=K, folds=2, memory_config=MemoryConfig(max_resident_bytes=2**21))
    with threadpool_limits(2):
        default, bounded = KNNMetric(k=K, folds=2).search(3000, 3000, DIMS), small.search(3000, 3000, DIMS)
        assert bounded["block_bytes"] == 2**20 and default["block_bytes"] == knn.BLOCK_BYTES
        assert bounded["query_rows"] * bounded["gallery_rows"] < default["query_rows"] * default["gallery_rows"] / 8
        reference = KNNMetric(k=K, folds=2).compute(x, targets, row_ids=None, seed=0).to_dict()  # and warm-up
        peaks = []
        for metric in (KNNMetric(k=K, folds=2), small):
            tracemalloc.start()
            result = metric.compute(x, targets, row_ids=None, seed=0).to_dict()
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
            assert result == reference
        assert small.recipe() == KNNMetric(k=K, folds=2).recipe()
    assert peaks[1] < peaks[0] / 4, peaks
