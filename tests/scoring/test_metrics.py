"""The custom-metric contract: MetricResult, OverlapMetric, CallableMetric, LabelRetrievalMetric, the registry.

Retrieval values are worked by hand on tiny examples (exact integer arithmetic, so ties are real ties) and
checked against a plain reference below that ranks every candidate with a full stable sort.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.labels import LabelCatalog
from vertebrae.core.arrays import encode_row_ids
from vertebrae.data.targets import build_targets
from vertebrae.scoring.metrics import (
    CallableMetric,
    LabelRetrievalMetric,
    MetricResult,
    OverlapMetric,
    metric_from_config,
)
from vertebrae.scoring.overlap import OverlapIndexScorer, OverlapScoreResult, OverlapScoringConfig

RECORDED: list[dict] = []


def recording_metric(embeddings, labels, *, target_metadata=None, groups=None, seed=None):
    """A top-level metric that records what crossed the boundary."""
    RECORDED.append({"embeddings": embeddings, "labels": labels, "target_metadata": target_metadata,
                     "groups": groups, "seed": seed})
    return {"score": 0.5, "diagnostics": {"n": len(labels)}, "metadata": {"who": "test"}, "warnings": ["w"]}


def _record(targets, embeddings=None, **kwargs):
    RECORDED.clear()
    n = targets.n_rows
    embeddings = np.arange(2.0 * n).reshape(n, 2) if embeddings is None else embeddings
    result = CallableMetric("rec", recording_metric).compute(embeddings, targets, row_ids=None, **kwargs)
    assert len(RECORDED) == 1
    return RECORDED[0], result


# --------------------------------------------------------------------------------------------------
# MetricResult


def test_metric_result_round_trips_through_json():
    result = MetricResult("m", np.float32(0.25), diagnostics={"a": np.arange(3), "b": (1, 2)},
                          warnings=["x"], metadata={"k": np.int64(3)})
    assert result.score == 0.25 and type(result.score) is float
    assert result.diagnostics == {"a": [0, 1, 2], "b": [1, 2]}
    doc = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert doc == {"name": "m", "score": 0.25, "aggregate_valid": True, "diagnostics": {"a": [0, 1, 2], "b": [1, 2]},
                   "warnings": ["x"], "metadata": {"k": 3}}
    assert MetricResult.from_dict(doc) == result


@pytest.mark.parametrize("kwargs", [{"score": math.nan}, {"score": "0.5"}, {"score": True},
                                    {"score": 1.0, "diagnostics": {"s": {1}}}, {"score": 1.0, "aggregate_valid": 1}])
def test_metric_result_refuses_invalid_fields(kwargs):
    with pytest.raises(ValidationError, match="'m'"):
        MetricResult("m", **kwargs)


def test_metric_result_from_dict_refuses_unknown_fields():
    with pytest.raises(ValidationError, match="bogus"):
        MetricResult.from_dict({"name": "m", "score": 1.0, "bogus": 1})


# --------------------------------------------------------------------------------------------------
# CallableMetric: what crosses the boundary


def test_int_labels_cross_as_semantic_keys_with_a_round_tripping_catalog():
    targets = build_targets([1, 2, 1, 2])
    seen, result = _record(targets, seed=7)
    labels = seen["labels"]
    assert isinstance(labels, np.ndarray) and labels.ndim == 1 and labels.dtype == object
    assert labels.tolist() == ["@int:1", "@int:2", "@int:1", "@int:2"]
    meta = seen["target_metadata"]
    assert meta["target_type"] == "classification" and meta["target_names"] == []
    assert LabelCatalog.from_dict(meta["label_catalog"]) == targets.catalog
    assert seen["groups"] is None and seen["seed"] == 7
    assert result.score == 0.5 and result.diagnostics == {"n": 4} and result.warnings == ["w"]
    assert result.metadata["who"] == "test" and result.metadata["cacheable"] is True


def test_string_labels_and_groups_cross_as_keys():
    targets = build_targets(["a", "b", "a", "@b"])
    seen, _ = _record(targets, groups=[10, 10, "g", "@int:3"])
    assert seen["labels"].tolist() == ["a", "b", "a", "@str:@b"]
    groups = seen["groups"]
    assert isinstance(groups, np.ndarray) and groups.dtype == object
    assert groups.tolist() == ["@int:10", "@int:10", "g", "@int:3"]  # strings are already keys


def test_groups_must_match_the_rows_and_be_keys():
    with pytest.raises(ValidationError, match="3 groups for 4 rows"):
        _record(build_targets(["a", "b", "a", "b"]), groups=[1, 2, 3])
    with pytest.raises(ValidationError, match="malformed label key '@nope:1'"):
        _record(build_targets(["a", "b", "a", "b"]), groups=["g", "g", "@nope:1", "h"])


def test_sparse_embeddings_stay_sparse():
    matrix = sp.random(4, 6, density=0.5, format="csr", random_state=0)
    seen, _ = _record(build_targets(["a", "b", "a", "b"]), embeddings=matrix)
    assert seen["embeddings"] is matrix


def test_multilabel_crosses_as_tuples_of_keys_in_catalog_order():
    targets = build_targets([("x",), ("x", 2), (2,)])
    seen, _ = _record(targets)
    assert seen["labels"] == [("x",), ("@int:2", "x"), ("@int:2",)]  # catalog order: ints before strings
    meta = seen["target_metadata"]
    assert meta["target_type"] == "multilabel"
    assert LabelCatalog.from_dict(meta["label_catalog"]).keys == ("@int:2", "x")


def test_regression_crosses_as_floats():
    targets = build_targets([1, 2, 4], target_type="regression")
    seen, _ = _record(targets)
    assert seen["labels"].dtype == np.float64 and seen["labels"].tolist() == [1.0, 2.0, 4.0]
    assert seen["target_metadata"] == {"target_type": "regression", "label_catalog": None, "target_names": ["target_0"]}


def test_row_count_mismatch_is_refused():
    with pytest.raises(ValidationError, match="3 rows but the targets have 4"):
        CallableMetric("m", recording_metric).compute(np.zeros((3, 2)), build_targets(list("abab")), row_ids=None)


# --------------------------------------------------------------------------------------------------
# CallableMetric: return validation


@pytest.mark.parametrize(
    ("returned", "problem"),
    [
        (math.nan, "finite"),
        (math.inf, "finite"),
        ("abc", "str"),
        (None, "NoneType"),
        (True, "bool"),
        ({"score": 1, "bogus": 2}, "bogus"),
        ({"diagnostics": {}}, "without 'score'"),
        ({"score": float("nan")}, "finite"),
        ({"score": 1, "diagnostics": {"s": {1, 2}}}, "set"),
        ({"score": 1, "diagnostics": [1]}, "mapping"),
        ({"score": 1, "metadata": {"f": math.inf}}, "non-finite"),
        ({"score": 1, "warnings": "one"}, "warnings"),
        ({"score": 1, "aggregate_valid": "yes"}, "aggregate_valid"),
        ({"score": 1, "metadata": {"cacheable": False}}, "reserved"),
    ],
)
def test_invalid_returns_name_the_metric_and_the_problem(returned, problem):
    metric = CallableMetric("bad_metric", lambda *a, **k: returned)
    with pytest.raises(ValidationError, match="'bad_metric'") as info:
        metric.compute(np.zeros((4, 2)), build_targets(list("abab")), row_ids=None)
    assert problem in str(info.value)


def test_a_plain_number_is_wrapped():
    for value, expected in ((0.25, 0.25), (np.float32(0.5), 0.5), (3, 3.0), (np.array(0.75), 0.75)):
        result = CallableMetric("m", lambda *a, value=value, **k: value).compute(np.zeros((4, 2)), build_targets(list("abab")), row_ids=None)
        assert result.score == expected and result.aggregate_valid is True and result.diagnostics == {}


def test_aggregate_valid_false_is_kept():
    fn = lambda *a, **k: {"score": 0.0, "aggregate_valid": False}  # noqa: E731
    result = CallableMetric("m", fn).compute(np.zeros((4, 2)), build_targets(list("abab")), row_ids=None)
    assert result.aggregate_valid is False


# --------------------------------------------------------------------------------------------------
# CallableMetric: identity


def test_path_is_derived_for_a_top_level_function():
    metric = CallableMetric("rec", recording_metric)
    path = f"{recording_metric.__module__}:recording_metric"
    assert metric.callable_path == path
    assert metric.recipe() == {"type": "callable", "name": "rec", "path": path, "cache_identity": None}
    rebuilt = metric_from_config(metric.recipe())
    assert rebuilt.fn is recording_metric and rebuilt.recipe() == metric.recipe()


def _nested_factory():
    def nested(embeddings, labels, **kwargs):
        return 1.0
    return nested


def _main_function():
    fn = _nested_factory()
    fn.__module__, fn.__qualname__ = "__main__", "nested"
    return fn


@pytest.mark.parametrize("fn", [lambda *a, **k: 1.0, _nested_factory(), _main_function()], ids=["lambda", "nested", "main"])
def test_functions_without_a_stable_identity_are_not_cacheable(fn):
    metric = CallableMetric("anon", fn)
    assert metric.callable_path is None and metric.recipe() is None and not metric.cacheable
    result = metric.compute(np.zeros((4, 2)), build_targets(list("abab")), row_ids=None)
    assert result.metadata == {"callable_path": None, "cacheable": False}
    assert any("not cacheable" in w and "'anon'" in w for w in result.warnings)


def test_cache_identity_makes_a_lambda_cacheable():
    metric = CallableMetric("anon", lambda *a, **k: 1.0, cache_identity={"version": 2})
    assert metric.recipe() == {"type": "callable", "name": "anon", "path": None, "cache_identity": {"version": 2}}
    result = metric.compute(np.zeros((4, 2)), build_targets(list("abab")), row_ids=None)
    assert result.metadata["cacheable"] is True and not any("cacheable" in w for w in result.warnings)


def test_cache_identity_must_be_json_safe():
    with pytest.raises(ConfigError, match="'anon': cache_identity must be JSON-safe"):
        CallableMetric("anon", lambda *a, **k: 1.0, cache_identity={"v": {1, 2}})


def test_from_path_imports_the_function():
    import math as math_module

    metric = CallableMetric.from_path("math:fsum")
    assert metric.fn is math_module.fsum and metric.name == "fsum" and metric.callable_path == "math:fsum"
    assert CallableMetric.from_path("os.path:join", name="joined").name == "joined"
    assert CallableMetric.from_path(f"{recording_metric.__module__}:recording_metric").fn is recording_metric


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("vertebrae_no_such_module_xyz:fn", "cannot import module"),
        ("math:no_such_function", "no attribute"),
        ("math", "must look like"),
        ("math:", "must look like"),
        ("math:pi", "not callable"),
    ],
)
def test_from_path_errors_name_the_path(path, problem):
    with pytest.raises(ConfigError, match=problem) as info:
        CallableMetric.from_path(path)
    assert repr(path) in str(info.value)


def test_a_callable_path_naming_another_object_is_refused():
    with pytest.raises(ConfigError, match="different object"):
        CallableMetric("m", recording_metric, callable_path="math:fsum")


# --------------------------------------------------------------------------------------------------
# LabelRetrievalMetric: hand-worked values

# Six rows on a line (squared_l2 score = -(x_q - x_g)^2), labels a b a b a c.
POSITIONS = np.array([[-2.0], [-1.0], [0.0], [4.0], [1.0], [10.0]])
LABELS = ["a", "b", "a", "b", "a", "c"]
# Rankings by (score descending, row order), the query itself excluded (it would rank first at distance 0):
#   q0 (x=-2,a): 1b(-1) 2a(-4) 4a(-9) 3b(-36) 5c          relevant ranks [2, 3]
#   q1 (x=-1,b): 0a(-1) 2a(-1) 4a(-4) 3b(-25) 5c          relevant ranks [4]     (tie of two irrelevant rows)
#   q2 (x=0,a):  1b(-1) 4a(-1) 0a(-4) 3b(-16) 5c          relevant ranks [2, 3]  (tie: irrelevant row 1 is earlier)
#   q3 (x=4,b):  4a(-9) 2a(-16) 1b(-25) 0a(-36) 5c(-36)   relevant ranks [3]     (tie of two irrelevant rows)
#   q4 (x=1,a):  2a(-1) 1b(-4) 0a(-9) 3b(-9) 5c           relevant ranks [1, 3]  (tie: relevant row 0 is earlier)
#   q5 (x=10,c): the only c, no positive: skipped.
# Breaking ties the other way would give q2 ranks [1, 3] and q4 ranks [1, 4]: mAP 0.55 and MRR 37/60 instead.
L2, L3 = 1 / math.log2(3), 1 / math.log2(4)  # discounts of ranks 2 and 3
HAND = {  # per query q0..q4, ks = (1, 2, 3)
    "map": [Fraction(7, 12), Fraction(1, 4), Fraction(7, 12), Fraction(1, 3), Fraction(5, 6)],
    "mrr": [Fraction(1, 2), Fraction(1, 4), Fraction(1, 2), Fraction(1, 3), 1],
    "precision@1": [0, 0, 0, 0, 1],
    "precision@2": [Fraction(1, 2), 0, Fraction(1, 2), 0, Fraction(1, 2)],
    "precision@3": [Fraction(2, 3), 0, Fraction(2, 3), Fraction(1, 3), Fraction(2, 3)],
    "recall@1": [0, 0, 0, 0, Fraction(1, 2)],
    "recall@2": [Fraction(1, 2), 0, Fraction(1, 2), 0, Fraction(1, 2)],
    "recall@3": [1, 0, 1, 1, 1],
    "hit_rate@1": [0, 0, 0, 0, 1],
    "hit_rate@2": [1, 0, 1, 0, 1],
    "hit_rate@3": [1, 0, 1, 1, 1],
    "ndcg@1": [0, 0, 0, 0, 1],
    "ndcg@2": [L2 / (1 + L2), 0, L2 / (1 + L2), 0, 1 / (1 + L2)],
    "ndcg@3": [(L2 + L3) / (1 + L2), 0, (L2 + L3) / (1 + L2), L3, (1 + L3) / (1 + L2)],
}


def _hand_mean(name, queries=range(5)):
    return float(sum(HAND[name][q] for q in queries)) / len(queries)


@pytest.mark.parametrize("query_block", [1, 2, 256])
@pytest.mark.parametrize("sparse", [False, True])
def test_label_retrieval_matches_hand_worked_values(query_block, sparse):
    embeddings = sp.csr_matrix(POSITIONS) if sparse else POSITIONS
    metric = LabelRetrievalMetric("squared_l2", ks=(3, 1, 2), query_block=query_block)
    result = metric.compute(embeddings, build_targets(LABELS), row_ids=encode_row_ids(None, 6, what="e"))
    assert _hand_mean("map") == pytest.approx(31 / 60) and _hand_mean("mrr") == pytest.approx(31 / 60)
    for name in HAND:
        assert result.diagnostics[name] == pytest.approx(_hand_mean(name), abs=1e-12), name
    assert result.score == pytest.approx(31 / 60) and result.aggregate_valid is True
    assert result.diagnostics["n_queries"] == 5 and result.diagnostics["n_skipped_queries"] == 1
    assert result.diagnostics["n_queries_with_relevance_ties"] == 2  # q2 and q4
    per_class = result.diagnostics["per_class"]
    assert set(per_class) == {"a", "b"}
    assert per_class["a"]["n_queries"] == 3 and per_class["a"]["mrr"] == pytest.approx((1 / 2 + 1 / 2 + 1) / 3)
    assert per_class["b"]["n_queries"] == 2 and per_class["b"]["map"] == pytest.approx((1 / 4 + 1 / 3) / 2)
    assert result.metadata["input_sparse"] is sparse and result.metadata["ks"] == [1, 2, 3]
    assert any("skipped" in w and "'c'" in w and "index 5" in w for w in result.warnings)
    assert any("ties are broken by row order" in w for w in result.warnings)
    json.dumps(result.to_dict(), allow_nan=False)


def test_primary_selects_the_score():
    targets = build_targets(LABELS)
    for primary in ("mrr", "ndcg@2", "recall@3", "hit_rate@1", "precision@2"):
        result = LabelRetrievalMetric("squared_l2", ks=(1, 2, 3), primary=primary).compute(POSITIONS, targets, row_ids=None)
        assert result.score == pytest.approx(_hand_mean(primary)), primary


def test_ties_are_broken_by_row_order():
    # dot similarity on one dimension: query row 0 (x=1) scores rows 1 and 2 (both x=2) equally.
    x = np.array([[1.0], [2.0], [2.0]])
    metric = LabelRetrievalMetric("dot", ks=(1,), primary="mrr")
    # a a b: for q0 the relevant row 1 is earlier than the tied row 2 -> rank 1; q1 (x=2): row 2 (4) > row 0 (2) -> rank 2
    earlier = metric.compute(x, build_targets(["a", "a", "b"]), row_ids=None)
    assert earlier.score == pytest.approx((1 + 1 / 2) / 2)
    # a b a: for q0 the irrelevant row 1 is earlier than the tied relevant row 2 -> rank 2; q2: row 1 (4) > row 0 (2) -> rank 2
    later = metric.compute(x, build_targets(["a", "b", "a"]), row_ids=None)
    assert later.score == pytest.approx((1 / 2 + 1 / 2) / 2)
    assert later.diagnostics["n_queries_with_relevance_ties"] == 1


def test_the_query_itself_is_never_a_candidate():
    # Each row is its own nearest neighbour (distance 0); counted as a candidate it would push every rank down by one.
    x = np.array([[0.0], [1.0], [5.0], [6.0]])
    result = LabelRetrievalMetric("squared_l2", ks=(1,), primary="mrr").compute(x, build_targets(["a", "b", "a", "b"]), row_ids=None)
    # q0 (0,a): 1b(-1) 2a(-25) 3b(-36) -> 1/2;  q1 (1,b): 0a(-1) 2a(-16) 3b(-25) -> 1/3
    # q2 (5,a): 3b(-1) 1b(-16) 0a(-25) -> 1/3;  q3 (6,b): 2a(-1) 1b(-25) 0a(-36) -> 1/2
    assert result.score == pytest.approx((1 / 2 + 1 / 3 + 1 / 3 + 1 / 2) / 4)


def test_a_k_beyond_the_candidates_is_warned_about():
    result = LabelRetrievalMetric("squared_l2", ks=(1, 10)).compute(POSITIONS, build_targets(LABELS), row_ids=None)
    assert result.diagnostics["precision@10"] == pytest.approx((2 + 1 + 2 + 1 + 2) / 10 / 5)  # every positive is found
    assert result.diagnostics["recall@10"] == 1.0
    assert any("exceed the 5 candidates" in w for w in result.warnings)


# --------------------------------------------------------------------------------------------------
# LabelRetrievalMetric against a plain reference


def _reference(x, labels, similarity, ks):
    """Every metric per query from a full stable sort of the candidates by (-score, row)."""
    n = len(labels)
    if similarity == "cosine":
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
    per_query, ties = [], 0
    for q in range(n):
        scored = []
        for g in range(n):
            if g == q:
                continue
            if similarity == "squared_l2":
                score = -float(np.sum((x[q] - x[g]) ** 2))
            else:
                score = float(np.dot(x[q], x[g]))
            scored.append((-score, g))
        ranking = sorted(scored)  # ties: smaller row first
        rel = [labels[g] == labels[q] for _, g in ranking]
        ranks = [i + 1 for i, r in enumerate(rel) if r]
        if not ranks:
            continue
        ties += any(ranking[i][0] == ranking[i + 1][0] and rel[i] != rel[i + 1] for i in range(len(ranking) - 1))
        R = len(ranks)
        m = {"map": sum((i + 1) / r for i, r in enumerate(ranks)) / R, "mrr": 1 / ranks[0]}
        for k in ks:
            hits = sum(r <= k for r in ranks)
            dcg = sum(1 / math.log2(r + 1) for r in ranks if r <= k)
            idcg = sum(1 / math.log2(i + 1) for i in range(1, min(R, k) + 1))
            m.update({f"ndcg@{k}": dcg / idcg, f"precision@{k}": hits / k, f"recall@{k}": hits / R,
                      f"hit_rate@{k}": float(hits > 0)})
        per_query.append(m)
    return {name: sum(m[name] for m in per_query) / len(per_query) for name in per_query[0]}, len(per_query), ties


@pytest.mark.parametrize("similarity", ["cosine", "dot", "squared_l2"])
def test_label_retrieval_equals_a_brute_force_reference(similarity):
    rng = np.random.default_rng(3)
    n = 200
    labels = rng.integers(0, 4, size=n).tolist()
    labels[57] = 99  # a class of one: skipped
    if similarity == "cosine":
        x = rng.normal(size=(n, 8)) + np.eye(8)[np.array(labels) % 8] * 1.5
    else:  # small integers: exact arithmetic and many real ties
        x = rng.integers(-2, 3, size=(n, 3)).astype(float)
    ks = (1, 3, 10, 50, 250)
    expected, n_queries, ties = _reference(x, labels, similarity, ks)
    for block in (37, 256):
        result = LabelRetrievalMetric(similarity, ks=ks, query_block=block).compute(x, build_targets(labels), row_ids=None)
        for name, value in expected.items():
            assert result.diagnostics[name] == pytest.approx(value, rel=1e-12, abs=1e-12), (name, block)
        assert result.diagnostics["n_queries"] == n_queries == n - 1
        assert result.diagnostics["n_queries_with_relevance_ties"] == ties
    if similarity != "cosine":
        assert ties > 0  # the integer data really exercises the tie rule
    sparse = LabelRetrievalMetric(similarity, ks=ks).compute(sp.csr_matrix(x), build_targets(labels), row_ids=None)
    assert sparse.diagnostics["map"] == pytest.approx(expected["map"], rel=1e-12)


# --------------------------------------------------------------------------------------------------
# LabelRetrievalMetric: refusals


def test_cosine_needs_nonzero_rows():
    x = np.ones((14, 3))
    x[[2, 5]] = 0.0
    row_ids = encode_row_ids([f"r{i}" for i in range(14)], 14, what="e")
    with pytest.raises(ValidationError, match=r"2 zero-norm row\(s\): row id 'r2' \(index 2\), row id 'r5' \(index 5\)$"):
        LabelRetrievalMetric().compute(x, build_targets(["a", "b"] * 7), row_ids=row_ids)
    x[:12] = 0.0
    with pytest.raises(ValidationError, match=r"12 zero-norm row\(s\).*'r9' \(index 9\), \.\.\.$"):
        LabelRetrievalMetric().compute(sp.csr_matrix(x), build_targets(["a", "b"] * 7), row_ids=row_ids)


@pytest.mark.parametrize(("y", "target_type"), [([("a",), ("a", "b"), ("b",)], "multilabel"), ([1.0, 2.0, 3.0], "regression")])
def test_multilabel_and_regression_are_refused(y, target_type):
    with pytest.raises(ValidationError, match=f"for {target_type} targets relevance must be declared"):
        LabelRetrievalMetric().compute(np.eye(3), build_targets(y, target_type), row_ids=None)


def test_overflowing_similarities_are_refused():
    x = np.array([[1e200], [2e200], [1.0]])
    with pytest.raises(ValidationError, match=r"dot similarity overflowed for query row\(s\) row id 0 \(index 0\)"):
        LabelRetrievalMetric("dot").compute(x, build_targets(["a", "a", "b"]), row_ids=None)


def test_nothing_to_retrieve_is_an_error():
    with pytest.raises(ValidationError, match="no row shares its label"):
        LabelRetrievalMetric("dot").compute(np.eye(3), build_targets(["a", "b", "c"]), row_ids=None)


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"similarity": "euclidean"}, "similarity"),
        ({"ks": ()}, "ks"),
        ({"ks": (0, 5)}, "ks"),
        ({"ks": (5, 5)}, "ks"),
        ({"ks": (1.5,)}, "ks"),
        ({"primary": "ndcg@3"}, "primary"),
        ({"primary": "auc"}, "primary"),
        ({"query_block": 0}, "query_block"),
    ],
)
def test_label_retrieval_config_errors_name_the_field(kwargs, key):
    with pytest.raises(ConfigError, match=f"LabelRetrievalMetric.{key}"):
        LabelRetrievalMetric(**kwargs)


# --------------------------------------------------------------------------------------------------
# OverlapMetric


def test_overlap_metric_is_the_overlap_scorer():
    rng = np.random.default_rng(0)
    centres = np.repeat(np.eye(4)[:3] * 3.0, 30, axis=0)
    x = centres + rng.normal(size=(90, 4))
    targets = build_targets(np.repeat(["a", "b", "c"], 30))
    row_ids = encode_row_ids(None, 90, what="e")
    config = OverlapScoringConfig(min_k=2, max_k=3)
    result = OverlapMetric(config).compute(x, targets, row_ids=row_ids, seed=4)
    direct = OverlapIndexScorer(config).score_targets(x, targets, seed=4, row_ids=row_ids)
    assert result.name == "overlap" and result.score == direct.score
    assert result.diagnostics == direct.to_dict()
    assert OverlapScoreResult.from_dict(result.diagnostics) == direct
    assert result.warnings == direct.warnings
    recipe = OverlapMetric(config).recipe()
    assert recipe["type"] == "overlap" and recipe["config"]["class"] == "OverlapScoringConfig"
    assert metric_from_config(recipe).config == config
    assert metric_from_config({"type": "overlap"}).recipe() == {"type": "overlap", "config": None}


# --------------------------------------------------------------------------------------------------
# metric_from_config


def test_label_retrieval_recipe_round_trips():
    metric = LabelRetrievalMetric("dot", ks=(5, 1), primary="ndcg@5", query_block=64, name="knn")
    rebuilt = metric_from_config(json.loads(json.dumps(metric.recipe())))
    assert isinstance(rebuilt, LabelRetrievalMetric) and rebuilt.recipe() == metric.recipe()
    assert metric_from_config({"type": "label_retrieval"}).recipe()["primary"] == "map"


@pytest.mark.parametrize(
    ("entry", "key"),
    [
        ("overlap", "mapping"),
        ({}, "'type'"),
        ({"type": "knn"}, "'type'"),
        ({"type": "overlap", "confg": {}}, "confg"),
        ({"type": "overlap", "config": 3}, "'config'"),
        ({"type": "overlap", "config": {"class": "Nope"}}, "'config.class'"),
        ({"type": "overlap", "config": {"k": 0}}, "'config'"),
        ({"type": "callable"}, "'path'"),
        ({"type": "callable", "path": "math:nothing_here"}, "math:nothing_here"),
        ({"type": "callable", "path": "math:fsum", "fn": 1}, "'fn'"),
        ({"type": "label_retrieval", "ks": [0]}, "ks"),
        ({"type": "label_retrieval", "primary": "map@3"}, "primary"),
    ],
)
def test_metric_from_config_errors_name_the_key(entry, key):
    with pytest.raises(ConfigError) as info:
        metric_from_config(entry)
    assert key in str(info.value)
