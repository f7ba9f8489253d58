"""Classes too small for a score (issue 48, problem 2): refused by name, or excluded with a warning on request.

Before: a class of one row is its own prototype and scores 0.0 whatever the embedding; 30 one-row classes ranked a
perfect embedding and noise alike at 0.0, both valid, and one such class among 19 separated ones dragged the score
to 0.95. Oracle for ``small_classes="exclude"``: the same class named in ``exclude_classes`` (the documented
meaning of leaving a class out of the aggregate), and the hand-counted classes.
"""

from __future__ import annotations

import numpy as np
import pytest

from vertebrae import OverlapIndexScorer, OverlapScoringConfig
from vertebrae.core.errors import ValidationError
from vertebrae.scoring.class_sizes import apply_policy, label_on_every_row, too_small

RNG = np.random.default_rng(3)


def _separated(sizes):
    """Rows of well-separated classes (class c around 10 * e_c) with the given row counts."""
    labels = np.repeat(np.arange(len(sizes)), sizes)
    centres = 10.0 * np.eye(len(sizes), max(len(sizes), 4))
    return centres[labels] + 0.1 * RNG.normal(size=(labels.size, centres.shape[1])), labels


def test_one_row_classes_are_refused_naming_them_and_the_opt_in_key():
    x, y = _separated([1] * 30)
    with pytest.raises(ValidationError) as info:
        OverlapIndexScorer(OverlapScoringConfig(k=1)).score(x, y, seed=0)
    message = str(info.value)
    assert "OverlapIndex needs at least 2 rows per class" in message
    assert "classes '0' (1), '1' (1)" in message and "and 20 more" in message
    assert "set scoring.small_classes: exclude" in message


def test_one_small_class_among_separated_ones_is_refused_then_excluded_on_request():
    x, y = _separated([20] * 19 + [1])
    with pytest.raises(ValidationError, match=r"classes '19' \(1\) have fewer"):
        OverlapIndexScorer(OverlapScoringConfig(k=2)).score(x, y, seed=0)
    excluded = OverlapIndexScorer(OverlapScoringConfig(k=2, small_classes="exclude")).score(x, y, seed=0)
    named = OverlapIndexScorer(OverlapScoringConfig(k=2, exclude_classes=[19])).score(x, y, seed=0)
    assert excluded.score == named.score == 1.0  # the 19 separated classes, the one-row class left out
    assert excluded.aggregation_classes == named.aggregation_classes and len(excluded.aggregation_classes) == 19
    warned = [w for w in excluded.warnings if "left out of this score" in w]
    assert warned == ["OverlapIndex needs at least 2 rows per class: classes '19' (1) have fewer and are left out "
                      "of this score (scoring.small_classes: exclude)"]
    assert not any("left out" in w for w in named.warnings)  # named by the user: not warned about again


def test_small_classes_round_trips_and_leaves_default_fingerprints_alone():
    assert "small_classes" not in OverlapScoringConfig().to_dict()  # a config without it keeps its old recipe
    config = OverlapScoringConfig(small_classes="exclude")
    assert OverlapScoringConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValidationError, match=r"'small_classes' must be one of \['refuse', 'exclude'\], got 'drop'"):
        OverlapScoringConfig(small_classes="drop")


def test_excluding_every_class_is_refused():
    x, y = _separated([1, 1, 1])
    with pytest.raises(ValidationError, match="every class has fewer"):
        OverlapIndexScorer(OverlapScoringConfig(k=1, small_classes="exclude")).score(x, y, seed=0)


def test_a_multilabel_label_on_every_row_is_warned():
    n = 40
    tags = np.zeros((n, 3), dtype=np.int8)
    tags[:, 0] = 1  # 'always' on every row
    tags[: n // 2, 1] = 1
    tags[n // 2:, 2] = 1
    x = np.where(tags[:, 1:2] == 1, 5.0, -5.0) * np.ones((n, 4)) + 0.1 * RNG.normal(size=(n, 4))
    result = OverlapIndexScorer(OverlapScoringConfig(k=2)).score(x, tags, seed=0, target_type="multilabel",
                                                                 label_names=["always", "left", "right"])
    assert any(w.startswith("labels 'always' are carried by every one of the 40 rows") for w in result.warnings)


def test_policy_helpers_by_hand():
    counts = {"a": 5, "b": 1, "c": 0, "d": 2}
    assert too_small(counts, 2) == ["b"] and too_small(counts, 3) == ["b", "d"]  # absent classes are not small
    assert apply_policy("exclude", counts, 3, str, what="X needs at least 3", key="k.small_classes") == (
        ["b", "d"], ["X needs at least 3 rows per class: classes 'b' (1), 'd' (2) have fewer and are left out of this "
                     "score (k.small_classes: exclude)"])
    assert apply_policy("refuse", counts, 3, str, what="X", key="k", already=["b", "d"]) == ([], [])
    assert label_on_every_row({"a": 4, "b": 3}, 4, str)[0].startswith("labels 'a' are carried by every one of the 4")


# -- the built-in metrics: a class of 3 rows among classes of 30 ------------------------------------------------

def _builtin(metric_cls, **kwargs):
    from vertebrae import FewShotMetric, KNNMetric, LinearProbeMetric

    return {"knn": KNNMetric, "linear_probe": LinearProbeMetric, "few_shot": FewShotMetric}[metric_cls](**kwargs)


BUILTIN_CASES = [("knn", {"k": 5}), ("linear_probe", {"Cs": (1.0,)}), ("few_shot", {"shots": (1, 5), "episodes": 6})]


@pytest.mark.parametrize("kind,kwargs", BUILTIN_CASES, ids=[c[0] for c in BUILTIN_CASES])
def test_a_builtin_metric_refuses_a_small_class_or_scores_as_if_its_rows_were_absent(kind, kwargs):
    from vertebrae.data.targets import classification_targets

    labels = np.array(["a"] * 30 + ["b"] * 30 + ["tiny"] * 3 + ["c"] * 30)
    x = RNG.normal(size=(labels.size, 6))
    x[np.arange(labels.size), [{"a": 0, "b": 1, "tiny": 2, "c": 3}[label] for label in labels]] += 3.0
    ids = [f"r{i}" for i in range(labels.size)]
    with pytest.raises(ValidationError, match=r"classes 'tiny' \(3\) have fewer \(rows in brackets\): merge or drop "
                                              r"them, or set small_classes: exclude"):
        _builtin(kind, **kwargs).compute(x, classification_targets(labels), row_ids=ids)
    metric = _builtin(kind, small_classes="exclude", **kwargs)
    assert metric.recipe()["small_classes"] == "exclude" and "small_classes" not in _builtin(kind, **kwargs).recipe()
    excluded = metric.compute(x, classification_targets(labels), row_ids=ids)
    keep = labels != "tiny"  # oracle: the same metric on the data without the small class's rows
    absent = _builtin(kind, **kwargs).compute(x[keep], classification_targets(labels[keep]),
                                              row_ids=[i for i, k in zip(ids, keep) if k])
    assert excluded.score == absent.score
    if "per_sample" in absent.diagnostics:
        assert excluded.diagnostics["per_sample"] == absent.diagnostics["per_sample"]
    assert [w for w in excluded.warnings if "'tiny' (3)" in w and "left out of this score" in w]
