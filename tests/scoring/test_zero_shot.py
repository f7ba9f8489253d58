"""ZeroShotScorer: metrics against scikit-learn and a dense oracle, hand-worked ties, blocks, admission, validation."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import accuracy_score, balanced_accuracy_score, confusion_matrix, f1_score, precision_recall_fscore_support
from sklearn.preprocessing import normalize

from vertebrae.core.errors import ArtifactError, BudgetError, ConfigError, LabelError, ValidationError
from vertebrae.scoring.zero_shot import ZeroShotConfig, ZeroShotResult, ZeroShotScorer, working_set_bytes


def _problem(seed=0, n=120, d=10, classes=("cat", "dog", "owl", "eel")):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(len(classes), d))
    y = rng.integers(0, len(classes), n)
    X = centers[y] + 1.2 * rng.normal(size=(n, d))
    prompts, prompt_labels = [], []
    for c, name in enumerate(classes):
        for _ in range(1 + c % 2):  # 1 or 2 prompts per class
            prompts.append(centers[c] + 0.3 * rng.normal(size=d))
            prompt_labels.append(name)
    return X, np.array(classes)[y], np.array(prompts), prompt_labels, list(classes)


def _oracle(X, P, prompt_labels, classes, similarity):
    """Dense, independent: prototypes = normalised mean of normalised prompts; argmax over the full matrix."""
    unit = normalize(P)
    protos = normalize(np.stack([unit[[lab == c for lab in prompt_labels]].mean(axis=0) for c in classes]))
    if similarity == "cosine":
        S = normalize(X) @ protos.T
    elif similarity == "dot":
        S = X @ protos.T
    else:
        S = -((X[:, None, :] - protos[None, :, :]) ** 2).sum(axis=2)
    return S


@pytest.mark.parametrize("similarity", ["cosine", "dot", "squared_l2"])
def test_metrics_match_sklearn_and_a_dense_oracle(similarity):
    X, y, P, prompt_labels, classes = _problem()
    result = ZeroShotScorer(ZeroShotConfig(similarity=similarity, top_k=(1, 2, 3))).score(
        X, P, y, class_labels=classes, prompt_labels=prompt_labels)
    S = _oracle(X, P, prompt_labels, classes, similarity)
    pred = np.array(classes)[S.argmax(axis=1)]
    assert result.metrics["accuracy"] == pytest.approx(accuracy_score(y, pred), abs=1e-12)
    assert result.metrics["macro_f1"] == pytest.approx(f1_score(y, pred, average="macro", labels=classes, zero_division=0), abs=1e-12)
    assert result.metrics["weighted_f1"] == pytest.approx(f1_score(y, pred, average="weighted", labels=classes, zero_division=0), abs=1e-12)
    assert result.metrics["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(y, pred), abs=1e-12)
    assert result.confusion_matrix == confusion_matrix(y, pred, labels=classes).tolist()
    p, r, f, s = precision_recall_fscore_support(y, pred, labels=classes, zero_division=0)
    for i, c in enumerate(classes):
        assert result.per_class[c] == pytest.approx({"precision": p[i], "recall": r[i], "f1": f[i], "support": s[i]})
    true = S[np.arange(len(y)), [classes.index(v) for v in y]]
    for k in (2, 3):
        ranks = 1 + (S > true[:, None]).sum(axis=1)  # no exact ties with random data
        assert result.metrics[f"top_k_accuracy@{k}"] == pytest.approx((ranks <= k).mean())
    others = np.where(np.eye(len(classes), dtype=bool)[[classes.index(v) for v in y]], -np.inf, S).max(axis=1)
    assert result.margins["margin"]["mean"] == pytest.approx((true - others).mean(), rel=1e-9)
    assert result.score == result.metrics["accuracy"]
    assert 0.4 < result.metrics["accuracy"] < 1.0  # a non-trivial problem


def test_block_size_changes_nothing_and_sparse_equals_dense():
    X, y, P, prompt_labels, classes = _problem(seed=3)
    docs = [ZeroShotScorer(ZeroShotConfig(sample_batch_size=bs)).score(X, P, y, class_labels=classes,
                                                                          prompt_labels=prompt_labels).to_dict()
            for bs in (1, 7, 128, 1000)]
    for doc in docs[1:]:
        doc["config"]["sample_batch_size"] = docs[0]["config"]["sample_batch_size"]
        assert doc == docs[0]
    sparse = ZeroShotScorer(ZeroShotConfig(sample_batch_size=1)).score(sp.csr_matrix(X), P, y, class_labels=classes,
                                                                       prompt_labels=prompt_labels).to_dict()
    sparse["metadata"]["sample_sparse"] = False
    assert sparse == docs[0]


def test_hand_worked_ties_go_to_the_first_declared_class():
    # prototypes: class a = e1, class b = e2, class c = (e1 + e2)/sqrt2 (renormalised mean of its two prompts)
    P = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    X = np.array([[1.0, 1.0],    # a and b tie at 1/sqrt2 below c = 1 -> predicted c (true a): rank of a = 2, no top tie
                  [1.0, 0.0],    # a scores 1, c 1/sqrt2, b 0 -> a
                  [0.0, 2.0],    # b
                  [-1.0, -1.0],  # a and b tie at -1/sqrt2 at the row maximum -> a wins (declared first); true b: rank 2
                  [2.0, 2.0]])   # c
    y = ["a", "a", "b", "b", "c"]
    result = ZeroShotScorer(ZeroShotConfig(top_k=(1, 2))).score(
        X, P, y, class_labels=["a", "b", "c"], prompt_labels=["a", "b", "c", "c"],
        sample_ids=["s0", "s1", "s2", "s3", "s4"])
    assert result.confusion_matrix == [[1, 0, 1], [1, 1, 0], [0, 0, 1]]
    assert result.metrics["accuracy"] == 0.6
    assert result.metrics["top_k_accuracy@2"] == 1.0
    assert result.n_top_score_ties == 1
    assert any("'s3'" in w and "first class in declared order" in w and "'s0'" not in w for w in result.warnings)
    # a: precision 1/2, recall 1/2; b: 1/1, 1/2; c: 1/2, 1/1
    assert result.per_class["a"]["f1"] == pytest.approx(0.5)
    assert result.per_class["b"]["f1"] == pytest.approx(2 / 3)
    assert result.per_class["c"] == pytest.approx({"precision": 0.5, "recall": 1.0, "f1": 2 / 3, "support": 1})
    assert result.metrics["macro_f1"] == pytest.approx((0.5 + 2 / 3 + 2 / 3) / 3)
    worst = result.worst_samples[0]
    assert worst["sample_id"] == "s0" and worst["margin"] == pytest.approx(1 / np.sqrt(2) - 1)


def test_squared_l2_ranks_by_negative_squared_distance():
    # unit prototypes e1 (a) and e2 (b); (0.1, 0) is closer to e1 (0.81 vs 1.01), (0, 3) closer to e2 (4 vs 10)
    P = np.eye(2)
    X = np.array([[0.1, 0.0], [0.0, 3.0]])
    result = ZeroShotScorer(ZeroShotConfig(similarity="squared_l2", top_k=(1,))).score(
        X, P, ["a", "b"], class_labels=["a", "b"], prompt_labels=["a", "b"])
    assert result.metrics["accuracy"] == 1.0
    # true-class similarity = -|x - p|^2: 0.81 for the first sample, 4 for the second
    assert result.margins["correct_class_similarity"]["min"] == pytest.approx(-4.0)
    assert result.margins["correct_class_similarity"]["max"] == pytest.approx(-0.81)


def test_zero_rows_cosine_versus_dot():
    P = np.eye(2)
    X = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]])
    kwargs = dict(class_labels=["a", "b"], prompt_labels=["a", "b"], sample_ids=["x", "zero", "y"])
    with pytest.raises(ValidationError, match=r"Sample embeddings: 1 zero-norm row.*index 1 \(id 'zero'\)"):
        ZeroShotScorer().score(X, P, ["a", "b", "b"], **kwargs)
    result = ZeroShotScorer(ZeroShotConfig(similarity="dot")).score(X, P, ["a", "b", "b"], **kwargs)
    assert result.n_top_score_ties == 1  # the zero row ties at 0 and goes to 'a'
    assert ZeroShotScorer(ZeroShotConfig(similarity="squared_l2")).score(X, P, ["a", "b", "b"], **kwargs).n_samples == 3


def test_zero_prompt_and_zero_prototype_are_named():
    X = np.eye(2)
    with pytest.raises(ValidationError, match=r"zero-norm prompt.*'a dog' \(class 'b'\)"):
        ZeroShotScorer().score(X, np.array([[1.0, 0.0], [0.0, 0.0]]), ["a", "b"], class_labels=["a", "b"],
                               prompt_labels=["a", "b"], prompt_texts=["a cat", "a dog"])
    with pytest.raises(ValidationError, match=r"class 'b'.*zero prototype"):
        ZeroShotScorer().score(X, np.array([[1.0, 0.0], [0.0, 1.0], [0.0, -1.0]]), ["a", "b"], class_labels=["a", "b"],
                               prompt_labels=["a", "b", "b"])


def test_declared_classes_must_equal_observed_labels_and_labels_are_typed():
    X, P = np.eye(3), np.eye(3)
    with pytest.raises(ValidationError, match=r"\['c'\] have no samples"):
        ZeroShotScorer().score(X, P, ["a", "b", "b"], class_labels=["a", "b", "c"], prompt_labels=["a", "b", "c"])
    with pytest.raises(ValidationError, match=r"label '1'.*not a declared class"):
        ZeroShotScorer().score(X, P, [1, 2, "1"], class_labels=[1, 2, 3], prompt_labels=[1, 2, 3])
    with pytest.raises(LabelError, match=r"labels\[0\]"):
        ZeroShotScorer().score(X, P, [object(), 2, 3], class_labels=[1, 2, 3], prompt_labels=[1, 2, 3])
    with pytest.raises(ValidationError, match="3 dimensions but Prompt embeddings have 2"):
        ZeroShotScorer().score(X, np.eye(3)[:, :2], [1, 2, 3], class_labels=[1, 2, 3], prompt_labels=[1, 2, 3])
    with pytest.raises(ValidationError, match="NaN"):
        ZeroShotScorer().score(np.array([[np.nan, 0, 0], [0, 1, 0], [0, 0, 1]]), P, [1, 2, 3], class_labels=[1, 2, 3],
                               prompt_labels=[1, 2, 3])


def test_top_k_beyond_the_class_count_is_dropped_with_a_warning():
    result = ZeroShotScorer(ZeroShotConfig(top_k=(1, 2, 5))).score(np.eye(2), np.eye(2), ["a", "b"], class_labels=["a", "b"],
                                                                    prompt_labels=["a", "b"])
    assert "top_k_accuracy@2" in result.metrics and "top_k_accuracy@5" not in result.metrics
    assert any("top_k=5 exceeds the number of classes (2)" in w for w in result.warnings)


def test_admission_refuses_the_working_set_and_says_what_to_lower():
    X, y, P, prompt_labels, classes = _problem(n=50, d=8)
    need = working_set_bytes(50, len(P), 8, len(classes), 16)
    assert need == 8 * (50 + len(P)) * 8 + 8 * 4 * 8 + 56 * 50 + 16 * 16 * 4
    ZeroShotScorer(ZeroShotConfig(sample_batch_size=16, max_dense_bytes=need)).score(
        X, P, y, class_labels=classes, prompt_labels=prompt_labels)
    with pytest.raises(BudgetError, match="lower ZeroShotConfig.sample_batch_size") as info:
        ZeroShotScorer(ZeroShotConfig(sample_batch_size=16, max_dense_bytes=need - 1)).score(
            X, P, y, class_labels=classes, prompt_labels=prompt_labels)
    assert isinstance(info.value, MemoryError)
    with pytest.raises(BudgetError, match="endpoints alone exceed it"):
        ZeroShotScorer(ZeroShotConfig(max_dense_bytes=1000)).score(sp.csr_matrix(X), P, y, class_labels=classes,
                                                                    prompt_labels=prompt_labels)


@pytest.mark.parametrize("kwargs, field", [
    ({"similarity": "euclid"}, "similarity"), ({"primary_metric": "f1"}, "primary_metric"), ({"top_k": ()}, "top_k"),
    ({"top_k": (1, 1)}, "top_k"), ({"top_k": (0,)}, "top_k"), ({"sample_batch_size": 0}, "sample_batch_size"),
    ({"max_dense_bytes": True}, "max_dense_bytes"), ({"worst_samples": -1}, "worst_samples"),
])
def test_config_errors_name_the_field(kwargs, field):
    with pytest.raises(ConfigError, match=f"ZeroShotConfig.{field}"):
        ZeroShotConfig(**kwargs)


def test_primary_metric_and_result_round_trip():
    X, y, P, prompt_labels, classes = _problem(seed=5)
    config = ZeroShotConfig(primary_metric="macro_f1")
    result = ZeroShotScorer(config).score(X, P, y, class_labels=classes, prompt_labels=prompt_labels,
                                          template_ids=None)
    assert result.score == result.metrics["macro_f1"]
    again = ZeroShotResult.from_dict(result.to_dict(), expected_config=config)
    assert again == result
    with pytest.raises(ArtifactError, match="primary_metric: recorded 'macro_f1', expected 'accuracy'"):
        ZeroShotResult.from_dict(result.to_dict(), expected_config=ZeroShotConfig())
    assert ZeroShotConfig.from_dict(config.to_dict()) == config


def test_per_template_metrics_rebuild_prototypes_from_one_template():
    P = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [1.0, 0.0]])  # template t2 swaps the classes
    X = np.array([[1.0, 0.1], [0.1, 1.0]])
    result = ZeroShotScorer().score(X, P, ["a", "b"], class_labels=["a", "b"], prompt_labels=["a", "b", "a", "b"],
                                    template_ids=["t1", "t1", "t2", "t2"])
    assert result.template_metrics["t1"]["accuracy"] == 1.0
    assert result.template_metrics["t2"]["accuracy"] == 0.0
    assert result.prompt_coherence["a"]["n_prompts"] == 2 and result.prompt_coherence["a"]["min"] == pytest.approx(np.sqrt(0.5))


def test_collapsed_samples_and_coinciding_prototypes_are_flagged_not_aggregate_valid():
    P = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [1.0, 0.0]])
    X = np.array([[1.0, 0.1], [0.1, 1.0]])
    # a's prompts e1 and e2 and b's prompts e2 and e1 average to the same prototype: the classes cannot differ
    result = ZeroShotScorer().score(X, P, ["a", "b"], class_labels=["a", "b"], prompt_labels=["a", "b", "a", "b"])
    (finding,) = result.metadata["degenerate"]
    assert finding["what"] == "Class prototypes" and finding["invalid"] and finding["n_points"] == 1
    assert result.warnings[0].startswith("degenerate-embedding: Class prototypes: all 2 rows are one point")
    assert not result.aggregate_valid
    assert ZeroShotResult.from_dict(result.to_dict()).aggregate_valid is False
    # samples on one direction at different lengths: one point for cosine, two points (one per class) for dot
    X = np.array([[1.0, 1.0], [2.0, 2.0]])
    P = np.eye(2)
    cosine = ZeroShotScorer().score(X, P, ["a", "b"], class_labels=["a", "b"], prompt_labels=["a", "b"])
    assert cosine.metadata["degenerate"][0]["what"] == "Sample embeddings (L2-normalised)" and not cosine.aggregate_valid
    dot = ZeroShotScorer(ZeroShotConfig(similarity="dot")).score(X, P, ["a", "b"], class_labels=["a", "b"],
                                                                 prompt_labels=["a", "b"])
    assert "degenerate" not in dot.metadata and dot.aggregate_valid


def test_zero_shot_rescales_exactly_outside_the_shared_ordinary_band():
    """The band is core.arrays' (peaks in [2**-100, 2**100)): a peak just below 2**-100 is brought to [0.5, 1)."""
    from vertebrae.core.arrays import ORDINARY_EXPONENT
    from vertebrae.scoring.zero_shot import _scale_free

    base = np.array([[0.75, -0.5], [0.25, 0.625]])
    inside = base * 2.0 ** -(ORDINARY_EXPONENT - 1)
    assert _scale_free(inside) is inside
    below = base * 2.0 ** -ORDINARY_EXPONENT  # peak 0.75 * 2**-100, in [2**-101, 2**-100)
    np.testing.assert_array_equal(_scale_free(below), base)
