"""Named retrieval conventions against the tools they name, on data full of exact score ties.

The data: small integer embeddings scored by dot product (every score exact in float32 and float64, so the
tools and we see the same ties: almost every positive shares its score with other gallery items), duplicated
gallery rows, graded qrels with judged non-relevant entries, gallery ids shuffled so that their text order is
not the row order ("d10" < "d9"), and a gallery of 1,200 rows so that @1000 cuts. Oracles: pytrec_eval
(trec_eval's C code) for ``trec_eval``; pytrec_eval's map_cut / ndcg_cut / recall / P / success plus BEIR's and
MTEB's MRR@k (transcribed, over the run in trec_eval's order) for ``beir`` / ``mteb``; sentence-transformers'
own ``InformationRetrievalEvaluator.compute_all_metrics`` for ``sentence_transformers``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from vertebrae.core.arrays import encode_row_ids
from vertebrae.core.errors import ConfigError
from vertebrae.scoring.retrieval import (
    RetrievalConfig, RetrievalScorer, eligible_relevance, exclusion_matrix, finalize, merge_partials,
    positive_scores, prepare_endpoint, relevance_matrix, score_shard,
)
from vertebrae.scoring.retrieval.conventions import CONVENTIONS, IdTies, describe, id_text, tie_order
from vertebrae.stages.retrieval_fanout import merge_retrieval_partials, score_retrieval_partial

TREC = {"map": "map", "mrr": "recip_rank", "ndcg": "ndcg_cut", "precision": "P", "recall": "recall",
        "hit_rate": "success"}


def _tied_problem(seed: int = 11, nq: int = 40, ng: int = 1200, d: int = 5):
    """(Q, G, grades (nq x ng ints), judged (bool: in the qrels), query ids, gallery ids)."""
    rng = np.random.default_rng(seed)
    Q = rng.integers(-2, 3, size=(nq, d)).astype(np.float64)
    G = rng.integers(-2, 3, size=(ng, d)).astype(np.float64)
    G[rng.choice(ng, 150, replace=False)] = G[rng.choice(ng, 150, replace=False)]  # exact duplicates
    S = Q @ G.T
    grades = np.zeros((nq, ng), dtype=np.int64)
    judged = np.zeros((nq, ng), dtype=bool)
    for i in range(nq):
        top = np.argsort(-S[i], kind="stable")[:60]
        cols = np.unique(np.concatenate([rng.choice(top, rng.integers(1, 8), replace=False),
                                         rng.choice(ng, rng.integers(0, 6), replace=False)]))
        grades[i, cols] = rng.integers(1, 4, size=cols.size)
        judged[i, cols] = True
        judged[i, rng.choice(top, 5, replace=False)] |= True  # some judged non-relevant (grade 0)
    perm = rng.permutation(ng)
    gallery_ids = [f"d{p}" for p in perm]
    query_ids = [f"q{i}" for i in range(nq)]
    return Q, G, grades, judged, query_ids, gallery_ids


def _qrels_run(Q, G, grades, judged, query_ids, gallery_ids, excluded=None):
    S = Q @ G.T
    qrels, run = {}, {}
    for i, q in enumerate(query_ids):
        keep = np.ones(G.shape[0], bool) if excluded is None else ~excluded[i]
        qrels[q] = {gallery_ids[j]: int(grades[i, j]) for j in np.flatnonzero(judged[i] & keep)}
        run[q] = {gallery_ids[j]: float(S[i, j]) for j in np.flatnonzero(keep)}
    return qrels, run


def _score(Q, G, grades, query_ids, gallery_ids, excluded=None, kernel="auto", **config):
    config.setdefault("similarity", "dot")
    config.setdefault("query_block_size", 7)
    config.setdefault("gallery_block_size", 300)
    return RetrievalScorer(RetrievalConfig(**config), kernel=kernel).score(
        Q, G, sp.csr_matrix(grades), exclusions=None if excluded is None else sp.csr_matrix(excluded),
        query_ids=None if query_ids is None else encode_row_ids(query_ids, len(query_ids), what="q"),
        gallery_ids=None if gallery_ids is None else encode_row_ids(gallery_ids, len(gallery_ids), what="g"))


def _trec_order(docs: dict[str, float]) -> list[str]:
    """trec_eval's order of a query's results: score descending, then docno descending (strcmp)."""
    by_id = sorted(docs, reverse=True)
    return sorted(by_id, key=lambda doc: -docs[doc])


def _compare(result, expected: dict[str, np.ndarray], tol: float = 1e-12) -> float:
    """Per query and mean, every metric of ``expected``; returns the largest absolute difference."""
    worst = 0.0
    for name, values in expected.items():
        ours = np.asarray(result.per_query[name], dtype=np.float64)
        diff = float(np.max(np.abs(ours - values)))
        assert diff <= tol, (name, diff)
        assert abs(result.metrics[name] - float(np.mean(values))) <= tol, name
        worst = max(worst, diff)
    return worst


# --------------------------------------------------------------------------------------------------
# The table and the config


def test_config_takes_a_named_convention_and_the_default_recipe_is_unchanged():
    default = RetrievalConfig()
    # the recipe of every config written before conventions existed: the same keys and values, so the same
    # fingerprints (the default convention stays out of to_dict)
    assert default.to_dict() == {
        "similarity": "cosine", "ks": [1, 5, 10], "primary_metric": "ndcg@10", "bidirectional": False,
        "query_block_size": 512, "gallery_block_size": 10_000, "max_dense_bytes": 2_000_000_000,
        "max_comparisons": None, "worst_queries": 10}
    assert RetrievalConfig(conventions="vertebrae") == default
    assert RetrievalConfig.from_dict(default.to_dict()) == default
    for name, rules in CONVENTIONS.items():
        config = RetrievalConfig(conventions=name)
        assert config.ks == rules.ks and config.rules is rules
        assert RetrievalConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
        assert ("conventions" in config.to_dict()) == (name != "vertebrae")
    assert RetrievalConfig(conventions="trec_eval").ks == (1, 5, 10, 100, 1000)
    assert RetrievalConfig(conventions="mteb", ks=[10, 1]).ks == (1, 10)
    assert RetrievalConfig(conventions="beir").metric_names()[:7] == (
        "map@1", "map@3", "map@5", "map@10", "map@100", "map@1000", "mrr@1")
    assert RetrievalConfig(conventions="sentence_transformers", primary_metric="map@100").primary_metric == "map@100"
    with pytest.raises(ConfigError, match="RetrievalConfig.conventions must be one of vertebrae, trec_eval, beir, "
                                          "mteb, sentence_transformers; got 'trec'"):
        RetrievalConfig(conventions="trec")
    with pytest.raises(ConfigError, match=r"must be 'map@K', 'mrr@K' or one of .* under conventions beir; got 'mrr'"):
        RetrievalConfig(conventions="beir", primary_metric="mrr")
    with pytest.raises(ConfigError, match=r"must be 'map', 'mrr' or one of .*; got 'mrr@10'"):
        RetrievalConfig(primary_metric="mrr@10")
    with pytest.raises(ConfigError, match=r"'map@20' uses K=20, which is not in ks"):
        RetrievalConfig(conventions="beir", primary_metric="map@20")


def test_the_schema_and_the_table_name_the_same_conventions():
    from vertebrae.planning.config import config_schema

    retrieval = config_schema()["$defs"]["retrieval_benchmark"]["properties"]["retrieval"]["properties"]
    assert retrieval["conventions"]["enum"] == list(CONVENTIONS)
    assert "default" not in retrieval["ks"]  # the conventions bring their own
    from vertebrae.planning.config import validate_config

    bench = {"dataset": {"source": {"type": "label_split", "source": {"type": "sklearn", "name": "iris"}},
                         "identity": {"kind": "content"}},
             "extractors": {"p": {"type": "precomputed"}}, "retrieval": {"conventions": "trec"}}
    with pytest.raises(ConfigError, match=r"retrieval.x.retrieval.conventions: 'trec' is not one of \['vertebrae', "
                                          r"'trec_eval', 'beir', 'mteb', 'sentence_transformers'\]"):
        validate_config({"retrieval": {"x": bench}})


def test_label_retrieval_keeps_vertebrae_conventions():
    from vertebrae.scoring.metrics import LabelRetrievalMetric

    with pytest.raises(ConfigError, match="conventions='trec_eval' applies to query-gallery retrieval"):
        LabelRetrievalMetric(RetrievalConfig(conventions="trec_eval"))


def test_ids_compare_as_text_and_equal_texts_keep_row_order():
    assert [id_text(k) for k in ("d9", "@int:10", "@str:@x", "@float:1.5")] == ["d9", "10", "@x", "@float:1.5"]
    keys = ["9", "@int:10", "b", "B", "@int:9", "a"]  # "9" and 9 share the text "9"
    descending = IdTies(lambda rows: [keys[r] for r in rows], descending=True)
    assert descending.rank(np.arange(6)).tolist() == [3, 5, 0, 2, 4, 1]  # b a B 9(row 0) 9(row 4) 10
    ascending = tie_order("sentence_transformers", keys)
    assert ascending.rank(np.array([5, 1, 1])).tolist() == [1, 0, 0]  # "10" < "a"
    assert descending.before(np.array([0, 4, 2]), np.array([4, 0, 3])).tolist() == [True, False, True]
    assert tie_order("vertebrae", keys) is None  # row order: the kernel's own fast path
    assert tie_order("trec_eval").rank(np.array([9, 10, 100])).tolist() == [0, 2, 1]  # no ids: "9" > "100" > "10"
    known = IdTies(lambda rows: [keys[r] for r in rows], descending=True, universe=np.array([5, 2, 3, 0]))
    known._FEW = 0  # the order of the rows it knows, built once: the same comparisons
    assert known.before(np.array([2, 3, 0]), np.array([5, 0, 5])).tolist() == [True, True, False]
    assert describe("trec_eval").startswith("Conventions: trec_eval (as trec_eval 9 / pytrec_eval computes them)")
    assert "ties are broken by gallery row order" in describe(None)


# --------------------------------------------------------------------------------------------------
# Oracles


@pytest.fixture(params=["per-call", "universe"])
def id_order(request, monkeypatch):
    """Both ways IdTies orders rows: each call sorting its own rows, or (many rows: data full of ties) one order
    of every gallery row the job knows, built once."""
    if request.param == "universe":
        monkeypatch.setattr(IdTies, "_FEW", 0)
    return request.param


@pytest.mark.parametrize("kernel", ["numpy", "fused"])
@pytest.mark.parametrize("with_exclusions", [False, True])
def test_trec_eval_conventions_equal_pytrec_eval_on_exact_ties(kernel, with_exclusions, id_order):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    Q, G, grades, judged, qids, gids = _tied_problem()
    excluded = None
    if with_exclusions:
        excluded = np.random.default_rng(5).random(grades.shape) < 0.1
        excluded &= ~((grades > 0) & (np.cumsum(grades > 0, axis=1) == 1))  # every query keeps a positive
    result = _score(Q, G, grades, qids, gids, excluded, kernel=kernel, conventions="trec_eval").forward
    ks = (1, 5, 10, 100, 1000)
    assert result.config.ks == ks
    assert result.n_queries_with_ties >= 35  # nearly every query has a positive whose rank a tie decides
    assert result.metadata["conventions"] == "trec_eval"
    qrels, run = _qrels_run(Q, G, grades, judged, qids, gids, excluded)
    cut = ",".join(map(str, ks))
    measures = {"map", "recip_rank"} | {f"{m}.{cut}" for m in ("ndcg_cut", "P", "recall", "success")}
    oracle = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    expected = {name: np.array([oracle[q][TREC[name]] for q in qids]) for name in ("map", "mrr")}
    for family in ("ndcg", "precision", "recall", "hit_rate"):
        expected.update({f"{family}@{k}": np.array([oracle[q][f"{TREC[family]}_{k}"] for q in qids]) for k in ks})
    assert set(expected) == set(result.metrics)
    _compare(result, expected)
    # row order (our default tie rule) gives other numbers on this data: the ties matter
    row_order = _score(Q, G, grades, qids, gids, excluded, kernel=kernel, ks=ks, primary_metric="map").forward
    assert row_order.metrics["mrr"] != result.metrics["mrr"]


def test_trec_eval_ties_without_ids_order_by_the_row_number_text():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    Q, G, grades, judged, qids, _ = _tied_problem(seed=3, nq=25, ng=300)
    result = _score(Q, G, grades, None, None, conventions="trec_eval", ks=(1, 5, 10, 100)).forward
    qrels, run = _qrels_run(Q, G, grades, judged, [str(i) for i in range(25)], [str(j) for j in range(300)])
    oracle = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "map", "ndcg_cut.1,5,10,100"}).evaluate(run)
    _compare(result, {"mrr": np.array([oracle[str(i)]["recip_rank"] for i in range(25)]),
                      "map": np.array([oracle[str(i)]["map"] for i in range(25)]),
                      **{f"ndcg@{k}": np.array([oracle[str(i)][f"ndcg_cut_{k}"] for i in range(25)])
                         for k in (1, 5, 10, 100)}})


def test_trec_eval_ties_hold_in_the_reverse_direction_and_across_partials(id_order):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = np.random.default_rng(8)
    nq, ng = 30, 70
    Q = rng.integers(-1, 2, size=(nq, 4)).astype(np.float64)
    G = rng.integers(-1, 2, size=(ng, 4)).astype(np.float64)
    grades = np.zeros((nq, ng), dtype=np.int64)
    for j in range(ng):  # every gallery item relevant to a query (the reverse direction needs it)
        grades[rng.choice(nq, 2, replace=False), j] = rng.integers(1, 3, size=2)
    qids = [f"q{p}" for p in rng.permutation(nq)]
    gids = [f"g{p}" for p in rng.permutation(ng)]
    config = RetrievalConfig(similarity="dot", conventions="trec_eval", bidirectional=True, ks=(1, 5, 10),
                             query_block_size=4, gallery_block_size=9)
    qk, gk = encode_row_ids(qids, nq, what="q"), encode_row_ids(gids, ng, what="g")
    score = RetrievalScorer(config).score(Q, G, sp.csr_matrix(grades), query_ids=qk, gallery_ids=gk)
    reverse_qrels, reverse_run = _qrels_run(G, Q, grades.T, grades.T > 0, gids, qids)
    oracle = pytrec_eval.RelevanceEvaluator(reverse_qrels, {"recip_rank", "map", "ndcg_cut.1,5,10"}).evaluate(reverse_run)
    _compare(score.reverse, {"mrr": np.array([oracle[g]["recip_rank"] for g in gids]),
                             "map": np.array([oracle[g]["map"] for g in gids]),
                             **{f"ndcg@{k}": np.array([oracle[g][f"ndcg_cut_{k}"] for g in gids]) for k in (1, 5, 10)}})
    # fanned out: ties across shard edges are decided by the ids the partial looks up, to the bit
    partials = [score_retrieval_partial(Q, G, sp.csr_matrix(grades), query_rows=qr, gallery_rows=gr, config=config,
                                        query_ids=qk, gallery_ids=gk, direction=direction)
                for direction, rows_a, rows_b in (("forward", ((0, 13), (13, 30)), ((0, 31), (31, 50), (50, 70))),
                                                  ("reverse", ((0, 31), (31, 70)), ((0, 13), (13, 30))))
                for qr in rows_a for gr in rows_b]
    merged = merge_retrieval_partials(partials, config=config)
    for ours, theirs in ((merged.forward, score.forward), (merged.reverse, score.reverse)):
        assert ours.to_dict()["per_query"] == theirs.to_dict()["per_query"]
        assert ours.metrics == theirs.metrics
    # score_shard units with the gallery ids, merged, finalize to the same forward result
    Qp, Gp = prepare_endpoint(Q, "dot", what="q"), prepare_endpoint(G, "dot", what="g")
    positives = positive_scores(Qp, Gp, eligible_relevance(relevance_matrix(sp.csr_matrix(grades), (nq, ng)),
                                                           exclusion_matrix(None, (nq, ng))), config=config)
    units = [score_shard(Qp, Gp[a:b], query_offset=0, gallery_offset=a, positives=positives, config=config,
                         gallery_ids=gk) for a, b in ((0, 33), (33, 70))]
    shards = finalize(merge_partials(units), positives, config, n_gallery=ng, query_ids=qk, gallery_ids=gk)
    assert shards.metrics == score.forward.metrics


def _mrr_at_k(qrels, run, ks):
    """BEIR's and MTEB's MRR@k (custom_metrics.mrr / retrieval_metrics.mrr), over trec_eval's order of ties."""
    out = {k: [] for k in ks}
    for q, docs in run.items():
        relevant = {d for d, g in qrels[q].items() if g > 0}
        hits = _trec_order(docs)[:max(ks)]
        first = next((r for r, d in enumerate(hits, 1) if d in relevant), None)
        for k in ks:
            out[k].append(1.0 / first if first is not None and first <= k else 0.0)
    return {k: np.array(v) for k, v in out.items()}


@pytest.mark.parametrize("name", ["beir", "mteb"])
def test_beir_and_mteb_conventions_equal_their_pytrec_eval_measures(name):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    Q, G, grades, judged, qids, gids = _tied_problem(seed=23)
    result = _score(Q, G, grades, qids, gids, conventions=name).forward
    ks = CONVENTIONS[name].ks
    assert result.config.ks == ks == ((1, 3, 5, 10, 100, 1000) if name == "beir" else (1, 3, 5, 10, 20, 100, 1000))
    qrels, run = _qrels_run(Q, G, grades, judged, qids, gids)
    run = {q: dict((d, docs[d]) for d in _trec_order(docs)[:max(ks)]) for q, docs in run.items()}  # their top-k
    cut = ",".join(map(str, ks))
    oracle = pytrec_eval.RelevanceEvaluator(
        qrels, {f"{m}.{cut}" for m in ("map_cut", "ndcg_cut", "recall", "P", "success")}).evaluate(run)
    expected = {}
    for family, measure in (("map", "map_cut"), ("ndcg", "ndcg_cut"), ("precision", "P"), ("recall", "recall"),
                            ("hit_rate", "success")):
        expected.update({f"{family}@{k}": np.array([oracle[q][f"{measure}_{k}"] for q in qids]) for k in ks})
    expected.update({f"mrr@{k}": v for k, v in _mrr_at_k(qrels, run, ks).items()})
    assert set(expected) == set(result.metrics)
    _compare(result, expected)


def test_sentence_transformers_conventions_equal_information_retrieval_evaluator(id_order):
    torch = pytest.importorskip("torch")
    ir = pytest.importorskip("sentence_transformers.sentence_transformer.evaluation.information_retrieval")
    Q, G, grades, _, qids, gids = _tied_problem(seed=17)
    result = _score(Q, G, grades, qids, gids, conventions="sentence_transformers").forward
    ks = [1, 3, 5, 10, 100]
    assert list(result.config.ks) == ks
    evaluator = ir.InformationRetrievalEvaluator(
        queries={q: q for q in qids}, corpus={g: g for g in gids},
        relevant_docs={q: {gids[j] for j in np.flatnonzero(grades[i] > 0)} for i, q in enumerate(qids)},
        corpus_chunk_size=250, mrr_at_k=ks, ndcg_at_k=ks, accuracy_at_k=ks, precision_recall_at_k=ks, map_at_k=ks,
        score_functions={"dot": lambda a, b: a @ b.T}, write_csv=False)
    evaluator.embed_inputs = lambda model, sentences, **kwargs: torch.from_numpy(Q)  # our embeddings, as given
    theirs = evaluator.compute_all_metrics(None, corpus_embeddings=torch.from_numpy(G))["dot"]
    worst = 0.0
    for ours, key in (("hit_rate", "accuracy@k"), ("precision", "precision@k"), ("recall", "recall@k"),
                      ("ndcg", "ndcg@k"), ("mrr", "mrr@k"), ("map", "map@k")):
        for k in ks:
            diff = abs(result.metrics[f"{ours}@{k}"] - float(theirs[key][k]))
            assert diff <= 1e-12, (ours, k, result.metrics[f"{ours}@{k}"], theirs[key][k])
            worst = max(worst, diff)
    assert result.n_queries_with_ties > 30
    # the grades do not matter to it (relevant_docs are sets): our binary gain neither
    flat = _score(Q, G, (grades > 0).astype(np.int64), qids, gids, conventions="sentence_transformers").forward
    assert flat.metrics == result.metrics
