"""Exact retrieval scoring stays inside its configured memory budget (memory is measured, not time).

20,000 queries x 50,000 gallery items x 64 dims of float32 (5.1 MB + 12.8 MB of input), 3 graded positives
per query. A dense 20k x 50k float64 score matrix would need 8 GB; the scorer must work in
``query_block_size x gallery_block_size`` blocks, and everything it allocates while scoring (the float64
endpoints, a score block and its masks, the positives, partial counts, the per-query results) must stay below
``RetrievalConfig.max_dense_bytes``.

Peak memory is measured with ``tracemalloc`` around the ``score`` call only: numpy registers its data buffers
with tracemalloc, so every array the scorer creates is counted, as are Python objects (per-query lists, ids);
the caller's inputs exist before tracing starts and are not. Two budgets are checked: 64 MiB, and the
tightest budget admission accepts (``8 (nq + ng) d + 8 qbs gbs`` = 42.2 MiB here), since the module promises
that what it allocates after admission stays inside that. Measured peak: 39.0-39.2 MiB. The full-size run takes
about 15 s under tracemalloc on a 2-core machine (block sizes 128 x 8192; other block sizes were no faster);
the size is kept because the bound only means something when the budget is far below the dense matrix and
close to the working set.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

import vertebrae.scoring.retrieval.kernel as kernel
import vertebrae.scoring.retrieval.scorer as scorer
from vertebrae.core.errors import BudgetError
from vertebrae.scoring.retrieval import RetrievalConfig, RetrievalScorer

N_QUERIES, N_GALLERY, DIM, N_POSITIVES = 20_000, 50_000, 64, 3
MiB = 2 ** 20
QUERY_BLOCK, GALLERY_BLOCK = 128, 8192
ADMITTED_BYTES = 8 * (N_QUERIES + N_GALLERY) * DIM + 8 * QUERY_BLOCK * GALLERY_BLOCK  # admission's working set
DENSE_FLOAT64_BYTES = 8 * N_QUERIES * N_GALLERY  # 8 GB: the full score matrix a naive scorer would build


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(20_000)
    Q = rng.standard_normal((N_QUERIES, DIM), dtype=np.float32)
    G = rng.standard_normal((N_GALLERY, DIM), dtype=np.float32)
    cols = rng.integers(0, N_GALLERY, size=(N_QUERIES, N_POSITIVES))
    cols.sort(axis=1)
    while True:  # distinct positives per query
        dup = np.flatnonzero((np.diff(cols, axis=1) == 0).any(axis=1))
        if dup.size == 0:
            break
        cols[dup] = np.sort(rng.integers(0, N_GALLERY, size=(dup.size, N_POSITIVES)), axis=1)
    grades = rng.integers(1, 4, size=cols.size).astype(np.float64)
    indptr = np.arange(0, cols.size + 1, N_POSITIVES)
    relevance = sp.csr_matrix((grades, cols.ravel(), indptr), shape=(N_QUERIES, N_GALLERY))
    return Q, G, relevance


def _traced_peak(fn):
    """(result or raised exception, peak bytes allocated while ``fn`` ran)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        try:
            out = fn()
        except Exception as exc:  # noqa: BLE001 - handed back to the caller to assert on
            out = exc
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return out, peak


@pytest.mark.parametrize("budget", [64 * MiB, ADMITTED_BYTES], ids=["64MiB", "tightest-admitted"])
def test_peak_memory_stays_within_max_dense_bytes(inputs, budget):
    Q, G, relevance = inputs
    assert Q.nbytes + G.nbytes < 20_000_000
    config = RetrievalConfig(ks=(1, 5, 10), primary_metric="ndcg@10", query_block_size=QUERY_BLOCK,
                             gallery_block_size=GALLERY_BLOCK, max_dense_bytes=budget)

    result, peak = _traced_peak(lambda: RetrievalScorer(config).score(Q, G, relevance))

    if isinstance(result, BaseException):
        raise result
    forward = result.forward
    assert forward.n_queries == N_QUERIES and forward.n_gallery == N_GALLERY
    assert forward.n_positive_pairs == relevance.nnz
    assert 0.0 <= result.primary_score <= 1.0
    assert peak <= budget, (f"scoring peaked at {peak / MiB:.1f} MiB, above max_dense_bytes = {budget / MiB:.1f} MiB "
                            f"(admission's working set: {ADMITTED_BYTES / MiB:.1f} MiB)")
    assert peak < DENSE_FLOAT64_BYTES / 100


def test_budget_below_the_inputs_is_refused_before_scoring(inputs, monkeypatch):
    Q, G, relevance = inputs
    budget = 16 * MiB
    assert budget < Q.nbytes + G.nbytes  # smaller than the float32 inputs themselves
    config = RetrievalConfig(ks=(1, 5, 10), query_block_size=QUERY_BLOCK, gallery_block_size=GALLERY_BLOCK,
                             max_dense_bytes=budget)

    def must_not_run(*args, **kwargs):
        raise AssertionError("scoring work started although the budget cannot hold the inputs")

    for module, name in ((scorer, "prepare_endpoint"), (scorer, "positive_scores"), (kernel, "score_shard"),
                         (scorer, "finalize")):
        monkeypatch.setattr(module, name, must_not_run)

    outcome, peak = _traced_peak(lambda: RetrievalScorer(config).score(Q, G, relevance))

    assert isinstance(outcome, BudgetError), f"expected BudgetError, got {outcome!r}"
    assert isinstance(outcome, MemoryError)
    assert "max_dense_bytes" in str(outcome)
    # refused up front: no float64 copy of the gallery (25.6 MB) or of the queries (10.2 MB) was made
    assert peak < 8 * N_QUERIES * DIM
