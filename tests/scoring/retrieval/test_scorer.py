"""Exact retrieval scoring: pytrec_eval oracle, hand-worked cases, decomposition and errors.

The oracle runs trec_eval (through pytrec-eval-terrier) on random continuous data (no score ties) with
integer grades given to it as 2^g - 1, so its linear-gain NDCG equals our exponential-gain NDCG and its
binary measures are unchanged. A brute-force reference (full stable sort of every candidate on the direct
scores) checks the kernel's two counting paths on data full of exact ties.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal, getcontext

import numpy as np
import pytest
import scipy.sparse as sp

import vertebrae.scoring.retrieval as retrieval
import vertebrae.scoring.retrieval.kernel as kernel
import vertebrae.scoring.retrieval.scorer as scorer
from vertebrae.core.errors import BudgetError, ConfigError, ValidationError
from vertebrae.scoring.retrieval import (
    RetrievalConfig,
    RetrievalPartial,
    RetrievalResult,
    RetrievalScorer,
    eligible_relevance,
    exclusion_matrix,
    finalize,
    merge_partials,
    positive_scores,
    prepare_endpoint,
    relevance_matrix,
    score_shard,
)

KS = (1, 5, 10, 100)


def _names(ks):
    return ["map", "mrr"] + [f"{f}@{k}" for f in ("ndcg", "precision", "recall", "hit_rate") for k in ks]


def _score(Q, G, rel, **kwargs):
    exclusions = kwargs.pop("exclusions", None)
    ids = {key: kwargs.pop(key) for key in ("query_ids", "gallery_ids") if key in kwargs}
    if "ks" in kwargs and 10 not in kwargs["ks"]:
        kwargs.setdefault("primary_metric", "map")
    return RetrievalScorer(RetrievalConfig(**kwargs)).score(Q, G, rel, exclusions=exclusions, **ids)


def _random_problem(rng, nq, ng, d, n_pos, grades=(1, 3)):
    Q = rng.standard_normal((nq, d))
    G = rng.standard_normal((ng, d))
    rel = np.zeros((nq, ng))
    for i in range(nq):
        cols = rng.choice(ng, size=n_pos, replace=False)
        rel[i, cols] = rng.integers(grades[0], grades[1] + 1, size=n_pos)
    return Q, G, rel


def _reference(Q, G, rel, excl, similarity, ks):
    """Brute force: every candidate of every query fully sorted by (direct score desc, gallery row asc)."""
    Qe = prepare_endpoint(Q, similarity, what="q")
    Ge = prepare_endpoint(G, similarity, what="g")
    out = {name: [] for name in _names(ks)}
    ng = len(Ge)
    for i in range(len(Qe)):
        # the defining direct scores (exact ties included); ranking and metrics below are independent
        scores = retrieval.pair_rank_scores(Qe, np.full(ng, i), Ge, np.arange(ng))
        eligible = np.flatnonzero(~excl[i]) if excl is not None else np.arange(ng)
        ranking = eligible[np.lexsort((eligible, -scores[eligible]))]
        grades = rel[i][ranking]
        ranks = np.flatnonzero(grades > 0) + 1
        R = ranks.size
        ideal = np.sort(grades[grades > 0])[::-1]
        out["mrr"].append(1.0 / ranks[0])
        out["map"].append(float(np.mean(np.arange(1, R + 1) / ranks)))
        for k in ks:
            hits = int(np.sum(ranks <= k))
            dcg = sum((2.0 ** grades[r - 1] - 1) / math.log2(r + 1) for r in ranks if r <= k)
            idcg = sum((2.0 ** g - 1) / math.log2(j + 2) for j, g in enumerate(ideal[:k]))
            out[f"ndcg@{k}"].append(min(1.0, dcg / idcg))
            out[f"precision@{k}"].append(hits / k)
            out[f"recall@{k}"].append(hits / R)
            out[f"hit_rate@{k}"].append(float(hits > 0))
    return out


def _same_result(a: RetrievalResult, b: RetrievalResult) -> None:
    da, db = a.to_dict(), b.to_dict()
    for key in ("metrics", "per_query", "summaries", "worst_queries", "warnings", "n_queries_with_ties"):
        assert da[key] == db[key], key


def _list(column):
    return [None if isinstance(v, float) and math.isnan(v) else v for v in np.asarray(column).tolist()]


# --------------------------------------------------------------------------------------------------
# Oracle


@pytest.mark.parametrize("similarity", ["cosine", "dot"])
@pytest.mark.parametrize("with_exclusions", [False, True])
def test_metrics_match_trec_eval(similarity, with_exclusions):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = np.random.default_rng(7)
    nq, ng = 200, 2000
    Q, G, rel = _random_problem(rng, nq, ng, 16, n_pos=6)
    excl = None
    if with_exclusions:
        excl = rng.random((nq, ng)) < 0.05
        for i in range(nq):  # keep at least one eligible positive per query
            excl[i, np.flatnonzero(rel[i])[0]] = False
    result = _score(Q, G, sp.csr_matrix(rel), exclusions=None if excl is None else sp.csr_matrix(excl),
                    similarity=similarity, ks=KS, primary_metric="ndcg@10").forward
    if similarity == "cosine":
        scores = (Q / np.linalg.norm(Q, axis=1, keepdims=True)) @ (G / np.linalg.norm(G, axis=1, keepdims=True)).T
    else:
        scores = Q @ G.T
    gaps = np.diff(np.sort(scores, axis=1), axis=1)
    assert gaps.min() > 1e-12  # the oracle needs data without (near) ties: rounding cannot reorder them
    qrels, run = {}, {}
    for i in range(nq):
        keep = np.ones(ng, bool) if excl is None else ~excl[i]
        qrels[f"q{i}"] = {f"d{j}": int(2 ** rel[i, j] - 1) for j in np.flatnonzero((rel[i] > 0) & keep)}
        run[f"q{i}"] = {f"d{j}": float(scores[i, j]) for j in np.flatnonzero(keep)}
    cut = ",".join(str(k) for k in KS)
    measures = {f"ndcg_cut.{cut}", f"P.{cut}", f"recall.{cut}", f"success.{cut}", "map", "recip_rank"}
    oracle = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    names = {"map": "map", "mrr": "recip_rank"}
    for k in KS:
        names.update({f"ndcg@{k}": f"ndcg_cut_{k}", f"precision@{k}": f"P_{k}", f"recall@{k}": f"recall_{k}",
                      f"hit_rate@{k}": f"success_{k}"})
    for ours, theirs in names.items():
        expected = np.array([oracle[f"q{i}"][theirs] for i in range(nq)])
        np.testing.assert_allclose(result.per_query[ours], expected, rtol=0, atol=1e-9, err_msg=ours)
        assert result.metrics[ours] == pytest.approx(expected.mean(), abs=1e-9)
    assert result.score == result.metrics["ndcg@10"]
    assert result.n_queries_with_ties == 0 and not any("tie" in w for w in result.warnings)


# --------------------------------------------------------------------------------------------------
# Hand-worked cases


def test_tie_rule_earlier_gallery_row_wins_and_ties_are_counted():
    Q = np.array([[1.0, 0.0], [0.0, 1.0]])
    G = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.5, 0.0]])
    # query 0: positive g1 ties with g0 (earlier: outranks it) and g3 (later: does not) -> rank 2
    # query 1: positive g2 is alone on top -> rank 1, no tie
    rel = np.zeros((2, 5))
    rel[0, 1] = 1
    rel[1, 2] = 1
    result = _score(Q, G, rel, similarity="dot", ks=(1, 2), primary_metric="mrr").forward
    assert _list(result.per_query["first_rank"]) == [2, 1]
    assert _list(result.per_query["mrr"]) == [0.5, 1.0]
    assert _list(result.per_query["tie"]) == [True, False]
    assert result.n_queries_with_ties == 1
    assert any("1 query(ies) had a positive whose rank was decided by an exactly equal score" in w
               for w in result.warnings)
    # the earliest of the tied rows wins even when it is the positive; the tie is still counted
    rel2 = np.zeros((1, 5))
    rel2[0, 0] = 1
    result = _score(Q[:1], G, rel2, similarity="dot", ks=(1,), primary_metric="mrr").forward
    assert _list(result.per_query["first_rank"]) == [1] and result.n_queries_with_ties == 1


def test_tied_positives_rank_in_gallery_order():
    Q = np.array([[1.0, 0.0]])
    G = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 0.0], [2.0, 0.0]])
    rel = np.array([[0.0, 1.0, 2.0, 0.0]])  # g1 and g2 tie at 1, behind g3 (2): ranks 2 and 3
    result = _score(Q, G, rel, similarity="dot", ks=(1, 3), primary_metric="ndcg@3").forward
    assert _list(result.per_query["map"]) == [pytest.approx((1 / 2 + 2 / 3) / 2)]
    dcg = 1 / math.log2(3) + 3 / math.log2(4)  # gains 2^1 - 1 at rank 2, 2^2 - 1 at rank 3
    idcg = 3 / math.log2(2) + 1 / math.log2(3)
    assert _list(result.per_query["ndcg@3"]) == [pytest.approx(dcg / idcg, abs=1e-15)]
    assert _list(result.per_query["precision@3"]) == [pytest.approx(2 / 3)]


def test_exclusions_leave_candidates_and_positives():
    Q = np.array([[1.0, 0.0]])
    G = np.array([[3.0, 0.0], [2.0, 0.0], [1.0, 0.0], [0.5, 0.0]])
    rel = np.array([[1.0, 0.0, 1.0, 0.0]])  # positives g0 (rank 1) and g2 (rank 3)
    base = _score(Q, G, rel, similarity="dot", ks=(1, 2), primary_metric="map").forward
    assert _list(base.per_query["map"]) == [pytest.approx((1 + 2 / 3) / 2)]
    assert _list(base.per_query["recall@2"]) == [0.5]
    # excluding the positive g0: R drops to 1, and g0 no longer outranks g2 (now rank 2 behind g1)
    excluded_positive = _score(Q, G, rel, exclusions=np.array([[True, False, False, False]]), similarity="dot",
                               ks=(1, 2), primary_metric="map").forward
    assert _list(excluded_positive.per_query["n_positives"]) == [1]
    assert _list(excluded_positive.per_query["first_rank"]) == [2]
    assert _list(excluded_positive.per_query["recall@2"]) == [1.0]
    assert _list(excluded_positive.per_query["map"]) == [0.5]
    # excluding the negative g1: g2 moves up to rank 2
    excluded_negative = _score(Q, G, rel, exclusions=sp.csr_matrix(np.array([[False, True, False, False]])),
                               similarity="dot", ks=(1, 2), primary_metric="map").forward
    assert _list(excluded_negative.per_query["map"]) == [1.0]
    assert _list(excluded_negative.per_query["nearest_negative_similarity"]) == [0.5]
    assert _list(excluded_negative.per_query["margin"]) == [2.5]


def test_explicit_zero_grades_are_not_relevant():
    Q = np.array([[1.0, 0.0]])
    G = np.array([[2.0, 0.0], [1.0, 0.0]])
    rel = sp.csr_matrix((np.array([0.0, 1.0]), (np.array([0, 0]), np.array([0, 1]))), shape=(1, 2))
    assert rel.nnz == 2
    result = _score(Q, G, rel, similarity="dot", ks=(1,), primary_metric="mrr").forward
    assert _list(result.per_query["n_positives"]) == [1] and _list(result.per_query["first_rank"]) == [2]


def test_relevance_mapping_form_matches_matrix_form():
    rng = np.random.default_rng(3)
    Q, G, rel = _random_problem(rng, 5, 30, 4, n_pos=3)
    mapping = {i: {int(j): float(rel[i, j]) for j in np.flatnonzero(rel[i])} for i in range(5)}
    a = _score(Q, G, mapping, ks=(1, 5)).forward
    b = _score(Q, G, rel, ks=(1, 5)).forward
    _same_result(a, b)


def test_huge_grades_stay_finite_and_exact():
    # positives: grade 1 at rank 1 (g1 scores 3), grade 1e4 at rank 2 (g2 scores 2); g0 is a negative at 1
    Q = np.array([[1.0, 0.0]])
    G = np.array([[1.0, 0.0], [3.0, 0.0], [2.0, 0.0]])
    rel = np.array([[0.0, 1.0, 1e4]])
    result = _score(Q, G, rel, similarity="dot", ks=(1, 2, 3), primary_metric="ndcg@2").forward
    getcontext().prec = 80
    big = Decimal(2 ** 10000 - 1)
    log2_3 = Decimal(3).ln() / Decimal(2).ln()
    dcg = Decimal(1) / 1 + big / log2_3
    idcg = big / 1 + Decimal(1) / log2_3
    assert result.per_query["ndcg@2"][0] == pytest.approx(float(dcg / idcg), rel=1e-15)
    assert result.per_query["ndcg@1"][0] == pytest.approx(float(Decimal(1) / big), abs=1e-300)
    # grades 10001 and 10000: the gain ratio is (2^10000 - 1) / (2^10001 - 1), about 1/2
    rel = np.array([[0.0, 10001.0, 10000.0]])
    result = _score(Q, G, rel, similarity="dot", ks=(2,), primary_metric="ndcg@2").forward
    assert _list(result.per_query["ndcg@2"]) == [1.0]
    rel = np.array([[0.0, 10000.0, 10001.0]])  # the larger grade now ranks second
    result = _score(Q, G, rel, similarity="dot", ks=(2,), primary_metric="ndcg@2").forward
    a, b = Decimal(2 ** 10000 - 1), Decimal(2 ** 10001 - 1)
    expected = (a + b / log2_3) / (b + a / log2_3)
    assert result.per_query["ndcg@2"][0] == pytest.approx(float(expected), rel=1e-15)


def test_reverse_direction_on_a_three_by_three_example():
    Q = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    G = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])
    # S = Q G^T = [[1, 0, 2], [0, 1, 2], [1, 1, 4]]; qi is relevant to gi
    rel = np.eye(3)
    score = _score(Q, G, rel, similarity="dot", ks=(1, 2), primary_metric="mrr", bidirectional=True,
                   query_ids=["qa", "qb", "qc"], gallery_ids=["ga", "gb", "gc"])
    # forward: g2 outranks the positives of q0 and q1
    assert _list(score.forward.per_query["first_rank"]) == [2, 2, 1]
    assert score.forward.metrics["mrr"] == pytest.approx(2 / 3)
    assert _list(score.forward.per_query["margin"]) == [-1.0, -1.0, 3.0]
    # reverse: S^T = [[1, 0, 1], [0, 1, 1], [2, 2, 4]]; g0 and g1 tie with q2 but come first
    reverse = score.reverse
    assert reverse.direction == "reverse" and reverse.query_ids == ["ga", "gb", "gc"]
    assert _list(reverse.per_query["first_rank"]) == [1, 1, 1]
    assert reverse.n_queries_with_ties == 2
    assert _list(reverse.per_query["nearest_negative_similarity"]) == [1.0, 1.0, 2.0]
    assert reverse.worst_queries[0]["nearest_negative_id"] == "qc"
    assert score.primary_score == pytest.approx((2 / 3 + 1) / 2)
    assert score.score == score.primary_score and score.metrics == score.forward.metrics
    # not bidirectional: forward alone
    single = _score(Q, G, rel, similarity="dot", ks=(1, 2), primary_metric="mrr")
    assert single.reverse is None and single.primary_score == single.forward.score


def test_squared_l2_ranks_by_true_distance_and_reports_true_similarities():
    rng = np.random.default_rng(11)
    Q, G, rel = _random_problem(rng, 12, 60, 5, n_pos=3)
    Q += 50.0  # a large common offset: 2 q.g - |g|^2 would lose digits if it were reported
    G += 50.0
    result = _score(Q, G, rel, similarity="squared_l2", ks=(1, 5)).forward
    distance = ((Q[:, None, :] - G[None, :, :]) ** 2).sum(axis=2)
    for i in range(12):
        ranking = np.lexsort((np.arange(60), distance[i]))
        ranks = np.flatnonzero(rel[i][ranking] > 0) + 1
        assert result.per_query["first_rank"][i] == ranks[0]
        positives = np.flatnonzero(rel[i])
        negatives = np.flatnonzero(rel[i] == 0)
        assert result.per_query["best_positive_similarity"][i] == pytest.approx(-distance[i, positives].min(), rel=1e-12)
        assert result.per_query["nearest_negative_similarity"][i] == pytest.approx(-distance[i, negatives].min(), rel=1e-12)
    summary = result.summaries["positive_similarity"]
    true = -distance[rel > 0]
    assert summary["min"] == pytest.approx(true.min(), rel=1e-12)
    assert summary["max"] == pytest.approx(true.max(), rel=1e-12)
    assert summary["mean"] == pytest.approx(true.mean(), rel=1e-12)
    assert summary["median"] == pytest.approx(np.median(true), rel=1e-12)


def test_summaries_and_worst_queries():
    rng = np.random.default_rng(5)
    Q, G, rel = _random_problem(rng, 30, 200, 6, n_pos=4)
    ids = [f"q{i}" for i in range(30)]
    result = _score(Q, G, rel, ks=(1, 10), primary_metric="ndcg@10", worst_queries=4, query_ids=ids).forward
    ndcg = np.array(result.per_query["ndcg@10"])
    worst = result.worst_queries
    assert [w["query_index"] for w in worst] == list(np.lexsort((np.arange(30), ndcg))[:4])
    assert [w["query_id"] for w in worst] == [ids[w["query_index"]] for w in worst]
    assert set(_names((1, 10))) <= set(worst[0])
    margins = np.array(result.per_query["margin"])
    np.testing.assert_allclose(margins, np.array(result.per_query["best_positive_similarity"])
                               - np.array(result.per_query["nearest_negative_similarity"]))
    assert result.summaries["margin"]["min"] == margins.min()
    for name in _names((1, 10)):
        assert result.metrics[name] == pytest.approx(np.mean(result.per_query[name]), abs=1e-15)


def test_query_without_negatives_gets_a_warning_and_no_margin():
    result = _score(np.ones((2, 2)), np.ones((1, 2)), np.ones((2, 1)), ks=(1, 5)).forward
    assert _list(result.per_query["margin"]) == [None, None]
    assert result.summaries["margin"] is None and result.n_queries_without_negatives == 2
    assert any("no eligible negative" in w for w in result.warnings)
    assert any("ks [5] exceed the 1 gallery items" in w for w in result.warnings)


# --------------------------------------------------------------------------------------------------
# Kernel and decomposition


def _tied_problem(rng, integer):
    nq, ng, d = rng.integers(2, 20), rng.integers(10, 90), rng.integers(1, 4)
    Q = rng.integers(-2, 3, (nq, d)).astype(float) if integer else rng.standard_normal((nq, d))
    G = rng.integers(-2, 3, (ng, d)).astype(float) if integer else rng.standard_normal((ng, d))
    G[ng // 2:] = G[:ng - ng // 2]  # duplicated gallery rows: exact ties
    Q[np.abs(Q).sum(axis=1) == 0, 0] = 1.0
    G[np.abs(G).sum(axis=1) == 0, 0] = 1.0
    rel = (rng.random((nq, ng)) < 0.3) * rng.integers(1, 4, (nq, ng)).astype(float)
    excl = rng.random((nq, ng)) < 0.1
    for i in range(nq):
        if not ((rel[i] > 0) & ~excl[i]).any():
            j = rng.integers(ng)
            rel[i, j], excl[i, j] = 2.0, False
    return Q, G, rel, excl


@pytest.mark.parametrize("path", ["dense", "sparse"])
@pytest.mark.parametrize("scan", ["float32", "float64"])
@pytest.mark.parametrize("group_bytes", [1, 100, kernel._GROUP_BYTES], ids=["row-groups", "small-groups", "default"])
def test_both_counting_paths_match_brute_force_on_ties(monkeypatch, path, scan, group_bytes):
    # group_bytes: the kernel's passes run over groups of 1 row, of a few rows (prefixes of dense passes end
    # inside groups) and, by default, of every row of these small blocks
    monkeypatch.setattr(kernel, "_GROUP_BYTES", group_bytes)
    monkeypatch.setattr(kernel, "_DENSE_PASS_COST", 0.0 if path == "dense" else 1.0)
    monkeypatch.setattr(kernel, "_SPARSE_CANDIDATE_COST", 1.0 if path == "dense" else 0.0)
    monkeypatch.setattr(scorer, "_SCAN", scan)
    rng = np.random.default_rng(21)
    for trial in range(12):
        similarity = ("cosine", "dot", "squared_l2")[trial % 3]
        Q, G, rel, excl = _tied_problem(rng, integer=trial % 2 == 0)
        ks = (1, 3, 10)
        expected = _reference(Q, G, rel, excl, similarity, ks)
        for qbs, gbs in ((128, 10_000), (3, 7)):
            result = _score(Q, G, rel, exclusions=excl, similarity=similarity, ks=ks, primary_metric="map",
                            query_block_size=qbs, gallery_block_size=gbs).forward
            for name, values in expected.items():
                np.testing.assert_allclose(result.per_query[name], values, rtol=0, atol=1e-12,
                                           err_msg=f"{similarity} {name} qbs={qbs} gbs={gbs}")


@pytest.mark.parametrize("d", [3, 257, 10_000])
def test_direct_scores_do_not_depend_on_the_batch(d):
    # ties are exact only if a pair's direct score has the same bits whichever batch computes it
    rng = np.random.default_rng(d)
    for similarity in ("cosine", "squared_l2"):
        A = prepare_endpoint(rng.standard_normal((40, d)).astype(np.float32), similarity, what="a")
        B = prepare_endpoint(rng.standard_normal((40, d)), similarity, what="b")
        everything = retrieval.pair_rank_scores(A, np.arange(40), B, np.arange(40))
        order = rng.permutation(40)
        assert np.array_equal(retrieval.pair_rank_scores(A, order, B, order), everything[order])
        for start, n in ((0, 1), (5, 2), (17, 7)):
            rows = np.arange(n)
            part = retrieval.pair_rank_scores(A[start:start + n], rows, B[start:start + n], rows)
            assert np.array_equal(part, everything[start:start + n])


@pytest.mark.parametrize("scan", [True, False])
def test_nearest_negative_is_exact_among_near_ties(monkeypatch, scan):
    monkeypatch.setattr(scorer, "_SCAN", "float32" if scan else "float64")
    rng = np.random.default_rng(13)
    Q = rng.standard_normal((40, 8))
    base = rng.standard_normal((1, 8))
    G = base + 1e-9 * rng.standard_normal((300, 8))  # far below float32 resolution, distinct in float64
    rel = np.zeros((40, 300))
    rel[np.arange(40), rng.integers(0, 300, 40)] = 1
    for similarity in ("cosine", "dot", "squared_l2"):
        result = _score(Q, G, rel, similarity=similarity, gallery_block_size=64).forward
        Qe = prepare_endpoint(Q, similarity, what="q")
        Ge = prepare_endpoint(G, similarity, what="g")
        for i in range(40):
            negatives = np.flatnonzero(rel[i] == 0)
            rows = np.full(negatives.size, i)
            # the defining (direct) arithmetic decides which negative is nearest
            rank_scores = retrieval.pair_rank_scores(Qe, rows, Ge, negatives)
            best = negatives[np.argmax(rank_scores)]
            reported = result.per_query["nearest_negative_similarity"][i]
            if similarity == "squared_l2":
                assert reported == pytest.approx(-np.sum((Q[i] - G[best]) ** 2), rel=1e-14)
            else:
                assert reported == rank_scores.max()
            assert result.per_query["margin"][i] == result.per_query["best_positive_similarity"][i] - reported


def test_block_sizes_and_scan_precision_do_not_change_results(monkeypatch):
    rng = np.random.default_rng(2)
    Q, G, rel = _random_problem(rng, 23, 150, 8, n_pos=5)
    G[100:120] = G[:20]  # exact ties too
    excl = rng.random((23, 150)) < 0.05
    for i in range(23):
        excl[i, np.flatnonzero(rel[i])[0]] = False
    for similarity in ("cosine", "squared_l2"):
        base = _score(Q, G, rel, exclusions=excl, similarity=similarity, bidirectional=False).forward
        for qbs, gbs in ((3, 7), (128, 7), (3, 10_000), (1, 150), (23, 1)):
            other = _score(Q, G, rel, exclusions=excl, similarity=similarity, query_block_size=qbs,
                           gallery_block_size=gbs).forward
            _same_result(base, other)
        monkeypatch.setattr(scorer, "_SCAN", "float64")
        _same_result(base, _score(Q, G, rel, exclusions=excl, similarity=similarity).forward)
        monkeypatch.undo()


def test_partials_over_two_gallery_halves_merge_to_the_one_shot_result():
    rng = np.random.default_rng(9)
    Q, G, rel = _random_problem(rng, 17, 90, 6, n_pos=4)
    excl = rng.random((17, 90)) < 0.05
    for i in range(17):
        excl[i, np.flatnonzero(rel[i])[0]] = False
    config = RetrievalConfig(ks=(1, 5, 10))
    one_shot = RetrievalScorer(config).score(Q, G, rel, exclusions=excl).forward

    Qp = prepare_endpoint(Q, config.similarity, what="Query embeddings")
    Gp = prepare_endpoint(G, config.similarity, what="Gallery embeddings")
    excluded = exclusion_matrix(excl, (17, 90))
    eligible = eligible_relevance(relevance_matrix(rel, (17, 90)), excluded)
    positives = positive_scores(Qp, Gp, eligible, config=config)
    halves = [score_shard(Qp, Gp[a:b], query_offset=0, gallery_offset=a, positives=positives,
                          exclusions=excluded, config=config) for a, b in ((0, 41), (41, 90))]
    # partials travel as JSON between jobs
    halves = [RetrievalPartial.from_dict(json.loads(json.dumps(p.to_dict(), allow_nan=False))) for p in halves]
    merged = merge_partials(halves[::-1])
    assert merged.gallery_ranges == ((0, 90),)
    _same_result(finalize(merged, positives, config, n_gallery=90), one_shot)
    # query blocks too: two query halves, each over both gallery halves
    blocks = [score_shard(Qp[qa:qb], Gp[ga:gb], query_offset=qa, gallery_offset=ga, positives=positives,
                          exclusions=excluded[qa:qb, ga:gb], config=config)
              for qa, qb in ((0, 8), (8, 17)) for ga, gb in ((0, 50), (50, 90))]
    _same_result(finalize(merge_partials(blocks), positives, config, n_gallery=90), one_shot)
    # the counts are what add: outranked counts of the halves sum to rank - 1
    assert np.array_equal(halves[0].outranked + halves[1].outranked, merged.outranked)
    assert np.array_equal(np.array(one_shot.per_query["first_rank"]),
                          np.minimum.reduceat(merged.outranked + 1, positives.indptr[:-1]))

    with pytest.raises(ValidationError, match="covered by more than one partial"):
        merge_partials([halves[0], halves[0]])
    with pytest.raises(ValidationError, match=r"rows \[0, 90\) are needed"):
        finalize(halves[0], positives, config, n_gallery=90)
    with pytest.raises(ValidationError, match=r"queries \[8, 17\) cover \(\(50, 90\),\)"):
        merge_partials([blocks[0], blocks[1], blocks[3]])
    with pytest.raises(ValidationError, match="prepared for 'dot' similarity"):
        score_shard(prepare_endpoint(Q, "dot", what="q"), Gp, query_offset=0, gallery_offset=0,
                    positives=positives, config=config)
    late = score_shard(Qp[9:17], Gp, query_offset=9, gallery_offset=0, positives=positives, exclusions=excluded,
                       config=config)
    with pytest.raises(ValidationError, match="leave a gap"):
        merge_partials([blocks[0], blocks[1], late])


def test_worker_threads_give_the_single_thread_result():
    # query blocks spread over threads (each with single-threaded BLAS) must not change a single bit
    rng = np.random.default_rng(31)
    Q, G, rel, excl = _tied_problem(rng, integer=True)
    Q2, G2, rel2 = _random_problem(rng, 70, 300, 9, n_pos=4)
    for Qx, Gx, relx, exclx in ((Q, G, rel, excl), (Q2, G2, rel2, None)):
        for similarity in ("cosine", "dot", "squared_l2"):
            config = RetrievalConfig(similarity=similarity, ks=(1, 5, 10), query_block_size=3, gallery_block_size=17)
            one = RetrievalScorer(config, threads=1).score(Qx, Gx, relx, exclusions=exclx)
            assert RetrievalScorer(config, threads=1).workers(Qx, Gx) == 1
            assert RetrievalScorer(config, threads=3).workers(Qx, Gx) == 3
            assert RetrievalScorer(config, threads=3).score(Qx, Gx, relx, exclusions=exclx).to_dict() == one.to_dict()
    # the row-wise preparation too (its chunks go to threads)
    X = rng.standard_normal((9000, 70)).astype(np.float32)
    for similarity in ("cosine", "dot"):
        a, b = (prepare_endpoint(X, similarity, what="x", workers=w) for w in (1, 3))
        assert np.array_equal(a.scan, b.scan) and np.array_equal(a.sq, b.sq)


def test_worker_count_respects_the_memory_budget():
    Q, G = np.ones((50, 4)), np.ones((60, 4))
    block = 8 * 10 * 20
    endpoints = 8 * (50 + 60) * 4
    config = RetrievalConfig(query_block_size=10, gallery_block_size=20, max_dense_bytes=endpoints + 2 * block + 7)
    assert RetrievalScorer(config, threads=8).workers(Q, G) == 2  # two score blocks fit beside the endpoints
    assert RetrievalScorer(config, threads=1).workers(Q, G) == 1
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ConfigError, match="threads"):
            RetrievalScorer(config, threads=bad)


def test_sparse_embeddings_give_the_dense_result():
    rng = np.random.default_rng(4)
    Q, G, rel = _random_problem(rng, 15, 80, 12, n_pos=3)
    Q[rng.random(Q.shape) < 0.6] = 0.0
    G[rng.random(G.shape) < 0.6] = 0.0
    Q[:, 0] += 0.1  # no zero rows (cosine)
    G[:, 0] += 0.1
    for similarity in ("cosine", "dot", "squared_l2"):
        dense = _score(Q, G, rel, similarity=similarity).forward
        for q, g in ((sp.csr_matrix(Q), G), (Q, sp.csr_matrix(G)), (sp.csr_matrix(Q), sp.csc_matrix(G))):
            other = _score(q, g, rel, similarity=similarity, gallery_block_size=13).forward
            assert other.metrics == dense.metrics
            assert np.array_equal(other.per_query["first_rank"], dense.per_query["first_rank"])
            np.testing.assert_allclose(other.per_query["margin"], dense.per_query["margin"], rtol=1e-12, atol=1e-12)
            assert other.metadata["query_sparse"] == sp.issparse(q)


def test_float32_inputs_are_scored_in_float64():
    rng = np.random.default_rng(8)
    Q, G, rel = _random_problem(rng, 10, 50, 7, n_pos=3)
    a = _score(Q.astype(np.float32), G.astype(np.float32), rel).forward
    b = _score(Q.astype(np.float32).astype(np.float64), G.astype(np.float32).astype(np.float64), rel).forward
    _same_result(a, b)


# --------------------------------------------------------------------------------------------------
# Errors


def test_cosine_zero_rows_are_refused_naming_endpoint_and_rows():
    Q = np.ones((3, 2))
    G = np.ones((14, 2))
    G[[2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]] = 0.0
    rel = np.zeros((3, 14))
    rel[:, 0] = 1
    with pytest.raises(ValidationError, match=r"Gallery embeddings: .*11 zero-norm row\(s\): index 2 \(row id 'g2'\)"
                                              r".*index 12 \(row id 'g12'\), \.\.\.") as info:
        _score(Q, G, rel, gallery_ids=[f"g{i}" for i in range(14)])
    assert "g13" not in str(info.value)
    Q[1] = 0.0
    with pytest.raises(ValidationError, match=r"Query embeddings: .*1 zero-norm row\(s\): index 1 \(row id 1\)$"):
        _score(Q, G, rel)
    # zero rows are valid for dot and squared_l2
    for similarity in ("dot", "squared_l2"):
        result = _score(Q, G, rel, similarity=similarity).forward
        assert result.n_queries == 3


def test_query_without_eligible_positive_is_refused_naming_it():
    Q, G = np.eye(3), np.eye(3)
    rel = np.array([[1.0, 0, 0], [0, 0, 0], [0, 0, 1.0]])
    with pytest.raises(ValidationError, match=r"1 query\(s\) have no eligible positive after exclusions: 'b' \(index 1\)"):
        _score(Q, G, rel, query_ids=["a", "b", "c"])
    rel[1, 1] = 1.0
    excl = np.zeros((3, 3), bool)
    excl[1, 1] = True  # its only positive is excluded
    with pytest.raises(ValidationError, match=r"'b' \(index 1\)"):
        _score(Q, G, rel, exclusions=excl, query_ids=["a", "b", "c"])
    rel = np.array([[1.0, 1.0, 0], [0, 1.0, 0], [0, 0, 1.0]])
    rel[:, 2] = 0.0
    rel[2, 0] = 1.0
    with pytest.raises(ValidationError, match=r"1 gallery item\(s\) have no eligible positive.*'z' \(index 2\)"):
        _score(Q, G, rel, bidirectional=True, gallery_ids=["x", "y", "z"])


def test_bad_grades_are_refused_naming_pairs():
    Q, G = np.eye(2), np.eye(2)
    with pytest.raises(ValidationError, match=r"1 negative grade\(s\).*\(query 'b', gallery 'x'\)"):
        _score(Q, G, np.array([[1.0, 0], [-1.0, 1]]), query_ids=["a", "b"], gallery_ids=["x", "y"])
    with pytest.raises(ValidationError, match="non-finite"):
        _score(Q, G, np.array([[np.nan, 1.0], [0, 1]]))
    with pytest.raises(ValidationError, match=r"relevance has shape \(2, 3\)"):
        _score(Q, G, np.ones((2, 3)))
    with pytest.raises(ValidationError, match="NaN or infinite"):
        _score(np.array([[np.nan, 1.0], [1.0, 0]]), G, np.eye(2))


def test_budget_errors_before_any_work():
    Q, G = np.ones((10, 4)), np.ones((20, 4))
    rel = np.ones((10, 20))
    with pytest.raises(BudgetError, match="max_dense_bytes") as info:
        _score(Q, G, rel, max_dense_bytes=1000)
    assert isinstance(info.value, MemoryError)
    needed = 8 * (10 * 4 + 20 * 4) + 8 * 10 * 20
    _score(Q, G, rel, max_dense_bytes=needed)  # exactly fits
    with pytest.raises(BudgetError, match="gallery_block_size"):
        _score(Q, G, rel, max_dense_bytes=needed - 1)
    with pytest.raises(BudgetError, match="max_comparisons=199"):
        _score(Q, G, rel, max_comparisons=199)
    # admission comes before relevance validation
    with pytest.raises(BudgetError):
        _score(Q, G, -rel, max_dense_bytes=1000)
