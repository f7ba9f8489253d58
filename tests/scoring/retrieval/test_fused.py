"""The fused numba kernel (``kernel="fused"``) gives the NumPy passes' score documents exactly.

The NumPy passes (``kernel="numpy"``) stay the reference: every comparison scores the same problem both ways and
asserts ``RetrievalScore.to_dict()`` equal, on random data, on exact ties, with graded relevance, exclusions, every
similarity, many or few positives per query, float32 and float64 scan rows, sparse endpoints, worker threads and
block shapes that give one or many shards. A spy checks that the fused kernel really counted the blocks.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("numba")

import vertebrae.scoring.retrieval.fused as fused  # noqa: E402
from vertebrae.core.errors import ConfigError  # noqa: E402
from vertebrae.scoring.retrieval import (  # noqa: E402
    RetrievalConfig,
    RetrievalScorer,
    positive_scores,
    prepare_endpoint,
    relevance_matrix,
    score_shard,
)
from vertebrae.scoring.retrieval.fused import use_fused  # noqa: E402

SIMILARITIES = ("cosine", "dot", "squared_l2")
BLOCKS = ((512, 10_000), (7, 37), (1, 9), (16, 2))
KS = (1, 3, 10, 50)


@pytest.fixture
def spy(monkeypatch):
    """Counts the blocks the fused kernel counted."""
    calls = {"blocks": 0}
    original = fused.count_block

    def counted(*args, **kwargs):
        calls["blocks"] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(fused, "count_block", counted)
    return calls


def _problem(rng, nq, ng, d, n_pos=3, integer=False, exclusion_rate=0.05):
    if integer:  # few distinct values: exact ties everywhere
        Q = rng.integers(-2, 3, (nq, d)).astype(float)
        G = rng.integers(-2, 3, (ng, d)).astype(float)
        Q[np.abs(Q).sum(axis=1) == 0, 0] = 1.0
        G[np.abs(G).sum(axis=1) == 0, 0] = 1.0
    else:
        Q = rng.standard_normal((nq, d))
        G = rng.standard_normal((ng, d))
    rel = np.zeros((nq, ng))
    for i in range(nq):
        rel[i, rng.choice(ng, size=n_pos, replace=False)] = rng.integers(1, 4, size=n_pos)  # graded
    excl = rng.random((nq, ng)) < exclusion_rate
    excl[rel > 0] &= rng.random(int((rel > 0).sum())) < 0.2  # some excluded positives too
    for i in range(nq):
        if not ((rel[i] > 0) & ~excl[i]).any():
            excl[i, np.flatnonzero(rel[i])[0]] = False
    for j in range(ng):  # every gallery item needs a reverse positive (bidirectional)
        if not ((rel[:, j] > 0) & ~excl[:, j]).any():
            i = rng.integers(nq)
            rel[i, j], excl[i, j] = 1.0, False
    return Q, G, rel, excl


def _both(Q, G, rel, excl=None, *, threads=1, **config):
    config.setdefault("ks", KS)
    config.setdefault("primary_metric", "map")
    cfg = RetrievalConfig(**config)
    reference = RetrievalScorer(cfg, threads=threads, kernel="numpy").score(Q, G, rel, exclusions=excl).to_dict()
    fused_doc = RetrievalScorer(cfg, threads=threads, kernel="fused").score(Q, G, rel, exclusions=excl).to_dict()
    return reference, fused_doc


@pytest.mark.parametrize("similarity", SIMILARITIES)
def test_fused_equals_numpy_on_random_data(spy, similarity):
    rng = np.random.default_rng(SIMILARITIES.index(similarity))
    Q, G, rel, excl = _problem(rng, 30, 120, 24)
    for qbs, gbs in BLOCKS:
        for bidirectional in (False, True):
            a, b = _both(Q, G, rel, excl, similarity=similarity, bidirectional=bidirectional,
                         query_block_size=qbs, gallery_block_size=gbs)
            assert a == b, (qbs, gbs, bidirectional)
    assert spy["blocks"] > 0


@pytest.mark.parametrize("similarity", SIMILARITIES)
def test_fused_equals_numpy_on_ties(spy, similarity):
    # integer rows: many exact ties; duplicated gallery rows tie with each other and with positives
    rng = np.random.default_rng(7)
    for trial in range(4):
        Q, G, rel, excl = _problem(rng, 13, 60, 3, n_pos=4, integer=trial % 2 == 0, exclusion_rate=0.1)
        G[30:] = G[:30]
        for i, j in np.argwhere(rel > 0)[:10]:  # an extra copy of a positive beside it: ties its score exactly
            G[(j + 1) % 60] = G[j]
        for qbs, gbs in ((128, 10_000), (3, 7), (5, 30)):
            a, b = _both(Q, G, rel, excl, similarity=similarity, bidirectional=True, query_block_size=qbs,
                         gallery_block_size=gbs)
            assert a == b, (trial, qbs, gbs)
        assert a["forward"]["n_queries_with_ties"] > 0
    assert spy["blocks"] > 0


def test_fused_with_many_positives_and_long_rows(spy):
    # > 16 positives a query: located by bisection; long rows: sampled runs, dense and sparse positives together;
    # a query whose gallery is nearly all excluded
    rng = np.random.default_rng(2)
    Q, G, rel, excl = _problem(rng, 9, 3000, 16, n_pos=40, exclusion_rate=0.02)
    excl[3] = True
    excl[3, np.flatnonzero(rel[3])[:2]] = False
    for qbs, gbs in ((512, 10_000), (4, 700)):
        a, b = _both(Q, G, rel, excl, query_block_size=qbs, gallery_block_size=gbs)
        assert a == b
    assert spy["blocks"] > 0


def test_fused_with_worker_threads_and_float64_scan(spy):
    rng = np.random.default_rng(3)
    Q, G, rel, excl = _problem(rng, 60, 150, 8)
    for similarity in SIMILARITIES:
        a, b = _both(Q, G, rel, excl, threads=4, similarity=similarity, query_block_size=4, gallery_block_size=50)
        assert a == b
    G[:, :] *= 1e10
    G[5] *= 1e12  # norm ~ 1e22: float64 scan rows (a float64 block is scored in two column halves)
    for similarity in ("dot", "squared_l2"):
        a, b = _both(Q, G, rel, excl, similarity=similarity, bidirectional=True, query_block_size=7,
                     gallery_block_size=40)
        assert a == b
    assert spy["blocks"] > 0


def test_fused_with_sparse_endpoints_and_float32_inputs(spy):
    rng = np.random.default_rng(4)
    Q, G, rel, excl = _problem(rng, 15, 80, 12)
    Q[rng.random(Q.shape) < 0.6] = 0.0
    G[rng.random(G.shape) < 0.6] = 0.0
    Q[:, 0] += 0.1
    G[:, 0] += 0.1
    for similarity in SIMILARITIES:
        for q, g in ((sp.csr_matrix(Q), G), (Q, sp.csr_matrix(G)), (Q.astype(np.float32), G.astype(np.float32))):
            a, b = _both(q, g, rel, excl, similarity=similarity, gallery_block_size=13)
            assert a == b
    assert spy["blocks"] > 0


def test_score_shard_partials_equal(spy):
    rng = np.random.default_rng(8)
    Q, G, rel, excl = _problem(rng, 12, 90, 10, n_pos=5)
    cfg = RetrievalConfig()
    Qp, Gp = prepare_endpoint(Q, "cosine", what="q"), prepare_endpoint(G, "cosine", what="g")
    positives = positive_scores(Qp, Gp, relevance_matrix(rel, (12, 90)), config=cfg)
    for start, stop in ((0, 90), (30, 61)):
        parts = [score_shard(Qp[3:9], Gp[start:stop], query_offset=3, gallery_offset=start, positives=positives,
                             exclusions=sp.csr_matrix(excl), config=cfg, kernel=kernel)
                 for kernel in ("numpy", "fused")]
        assert parts[0].to_dict() == parts[1].to_dict()
    assert spy["blocks"] == 2


def test_kernel_choice():
    assert use_fused("fused", 1) and not use_fused("numpy", 1 << 40)
    assert not use_fused("auto", fused._FUSED_MIN_PAIRS - 1) and use_fused("auto", fused._FUSED_MIN_PAIRS)
    with pytest.raises(ConfigError, match="kernel must be one of"):
        RetrievalScorer(kernel="numba")


def test_small_scoring_never_imports_numba():
    # "auto" leaves small work to the NumPy passes, so a small scoring job never pays numba's import
    code = ("import sys, numpy as np; from vertebrae.scoring.retrieval import RetrievalScorer; "
            "RetrievalScorer().score(np.eye(3), np.eye(3), np.eye(3)); print('numba' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "False"
