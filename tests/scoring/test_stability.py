"""run_stability_analysis, StabilityConfig and StabilityResult against the real OverlapIndexScorer.

Repeat scores are checked against independent OverlapIndexScorer calls, summaries against numpy and a
hand-worked example, subsample plans against the documented draw procedure re-implemented here with
numpy, and "fails before scoring" with a spy on the real ``OverlapIndexScorer.score_targets``.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from vertebrae.core.errors import ValidationError
from vertebrae.core.arrays import encode_row_ids
from vertebrae.data.targets import classification_targets, multilabel_targets, regression_targets
from vertebrae.scoring.overlap import ContinuousOverlapScoringConfig, OverlapIndexScorer, OverlapScoringConfig
from vertebrae.scoring.stability import (
    StabilityConfig,
    StabilityResult,
    check_subsample_minimums,
    run_stability_analysis,
    stability_summary,
)

CFG = OverlapScoringConfig(k=3)


@pytest.fixture(scope="module", autouse=True)
def _single_thread():
    """Tiny KMeans fits: OpenMP/BLAS threads only add oversubscription overhead on a loaded machine."""
    import sklearn.cluster  # noqa: F401  (loads the OpenMP runtime so that threadpoolctl can limit it)

    with threadpool_limits(limits=1):
        yield


def _blobs(sizes, *, dim: int = 5, seed: int = 0):
    rng = np.random.default_rng(seed)
    rows, labels = [], []
    for i, (label, n) in enumerate(sizes):
        centre = np.zeros(dim)
        centre[i % dim] = 3.0
        rows.append(centre + rng.normal(size=(n, dim)))
        labels += [label] * n
    return np.vstack(rows), labels


@pytest.fixture(scope="module")
def three_classes():
    X, y = _blobs([("a", 30), ("b", 30), ("c", 30)])
    return X, classification_targets(y)


@pytest.fixture(scope="module")
def prototype_run(three_classes):
    X, targets = three_classes
    ids = [f"row-{i}" for i in range(len(X))]
    result = run_stability_analysis(X, targets, scoring_config=CFG, stability_config=StabilityConfig(repeats=3),
                                    seed=7, row_ids=ids)
    return X, targets, ids, result


@pytest.fixture
def spy(monkeypatch):
    """Record every real ``score_targets`` call: (embeddings, targets, seed, row_ids, score)."""
    calls = []
    original = OverlapIndexScorer.score_targets

    def recording(self, embeddings, targets, *, seed, row_ids):
        result = original(self, embeddings, targets, seed=seed, row_ids=row_ids)
        calls.append({"embeddings": embeddings, "targets": targets, "seed": seed, "row_ids": list(row_ids),
                      "score": result.score})
        return result

    monkeypatch.setattr(OverlapIndexScorer, "score_targets", recording)
    return calls


# --------------------------------------------------------------------------------------------------
# StabilityConfig


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"enabled": 1}, "enabled"),
        ({"mode": "bootstrap"}, "mode"),
        ({"repeats": 1}, "repeats"),
        ({"repeats": 2.0}, "repeats"),
        ({"repeats": True}, "repeats"),
        ({"interval_level": 0.0}, "interval_level"),
        ({"interval_level": 1.0}, "interval_level"),
        ({"interval_level": "0.9"}, "interval_level"),
        ({"mode": "subsample"}, "subsample_fraction"),
        ({"mode": "subsample", "subsample_fraction": 0.0}, "subsample_fraction"),
        ({"mode": "subsample", "subsample_fraction": 1.2}, "subsample_fraction"),
        ({"mode": "subsample", "subsample_fraction": True}, "subsample_fraction"),
        ({"subsample_fraction": 0.5}, "subsample_fraction"),  # prototype mode takes no fraction
        ({"random_state": -1}, "random_state"),
        ({"random_state": 1.5}, "random_state"),
    ],
)
def test_config_validation_names_the_field(kwargs, field):
    with pytest.raises(ValidationError, match=rf"StabilityConfig\.{field}\b"):
        StabilityConfig(**kwargs)


def test_config_defaults_and_boundaries():
    config = StabilityConfig()
    assert (config.enabled, config.mode, config.repeats, config.interval_level, config.subsample_fraction,
            config.random_state) == (True, "prototype", 10, 0.95, None, 0)
    assert StabilityConfig(mode="subsample", subsample_fraction=1, repeats=2).subsample_fraction == 1.0


def test_config_round_trips_and_refuses_unknown_fields():
    config = StabilityConfig(mode="subsample", repeats=20, subsample_fraction=0.8, random_state=42)
    data = json.loads(json.dumps(config.to_dict()))
    assert data == {"enabled": True, "mode": "subsample", "repeats": 20, "interval_level": 0.95,
                    "subsample_fraction": 0.8, "random_state": 42}
    assert StabilityConfig.from_dict(data) == config
    with pytest.raises(ValidationError, match="unknown StabilityConfig fields: \\['bogus'\\]"):
        StabilityConfig.from_dict({**data, "bogus": 1})


@pytest.mark.parametrize("value", [True, False, None])
def test_serialized_stratified_is_refused(value):
    with pytest.raises(ValidationError) as caught:
        StabilityConfig.from_dict({"mode": "subsample", "subsample_fraction": 0.5, "stratified": value})
    message = str(caught.value)
    assert "StabilityConfig.stratified has been removed" in message
    assert "target-aware" in message


# --------------------------------------------------------------------------------------------------
# Summaries


def test_summary_hand_worked():
    # percentiles 25/75 of [.1,.2,.3,.4]: positions 0.75 and 2.25 -> .175 and .325 (linear interpolation);
    # population std = sqrt((.15^2 + .05^2 + .05^2 + .15^2) / 4) = sqrt(.0125)
    summary = stability_summary([0.4, 0.1, 0.3, 0.2], 0.5)
    assert summary == pytest.approx({"mean": 0.25, "std": math.sqrt(0.0125), "min": 0.1, "max": 0.4,
                                     "interval_low": 0.175, "interval_high": 0.325})


# --------------------------------------------------------------------------------------------------
# Prototype mode


def test_prototype_repeats_equal_independent_scorer_calls(prototype_run):
    X, targets, ids, result = prototype_run
    expected_seeds = [int(s) for s in np.random.SeedSequence([7, 0x5C0]).generate_state(3)]
    assert result.scoring_seeds == expected_seeds
    keys = encode_row_ids(ids, len(X), what="embeddings")
    for r, seed in enumerate(expected_seeds):
        independent = OverlapIndexScorer(CFG).score_targets(X, targets, seed=seed, row_ids=keys)
        assert result.scores[r] == independent.score
    assert result.mode == "prototype" and result.repeats == 3 and result.interval_level == 0.95
    assert result.sampling_seeds == []
    assert result.effective_sample_counts == [90, 90, 90]
    assert result.effective_subsample_fractions == [1.0, 1.0, 1.0]


def test_prototype_summary_matches_numpy(prototype_run):
    result = prototype_run[3]
    scores = np.asarray(result.scores)
    low, high = np.percentile(scores, [2.5, 97.5])
    assert result.summary == {"mean": scores.mean(), "std": scores.std(ddof=0), "min": scores.min(),
                              "max": scores.max(), "interval_low": low, "interval_high": high}


def test_result_round_trips_through_json(prototype_run):
    result = prototype_run[3]
    text = json.dumps(result.to_dict(), allow_nan=False)
    again = StabilityResult.from_dict(json.loads(text))
    assert again == result
    with pytest.raises(ValidationError, match="unknown StabilityResult fields"):
        StabilityResult.from_dict({**result.to_dict(), "confidence_interval": [0, 1]})


def test_same_inputs_give_identical_results(prototype_run):
    X, targets, ids, result = prototype_run
    again = run_stability_analysis(X, targets, scoring_config=CFG, stability_config=StabilityConfig(repeats=3),
                                   seed=7, row_ids=ids)
    assert again.to_dict() == result.to_dict()


def test_different_seed_gives_different_scoring_seeds(three_classes, spy):
    X, targets = three_classes
    result = run_stability_analysis(X, targets, scoring_config=CFG, stability_config=StabilityConfig(repeats=2), seed=8)
    assert result.scoring_seeds == [int(s) for s in np.random.SeedSequence([8, 0x5C0]).generate_state(2)]
    assert result.scoring_seeds != [int(s) for s in np.random.SeedSequence([7, 0x5C0]).generate_state(2)]
    assert [call["seed"] for call in spy] == result.scoring_seeds
    # prototype mode: the same embeddings and targets every repeat
    assert all(call["embeddings"] is spy[0]["embeddings"] and call["targets"] is targets for call in spy)


def test_scorer_warnings_are_collected_once(spy):
    # class 'c' has 4 rows: k is capped at max(min(2, 4), 4 // 5) = 2, a warning in every repeat
    X, y = _blobs([("a", 30), ("b", 30), ("c", 4)])
    result = run_stability_analysis(X, classification_targets(y), scoring_config=CFG,
                                    stability_config=StabilityConfig(repeats=2))
    expected = "k reduced for small class 'c': 3 -> 2 (4 rows, min_samples_per_cluster=5)"
    assert len(spy) == 2
    assert result.warnings.count(expected) == 1


# --------------------------------------------------------------------------------------------------
# Subsample mode


def _redraw_classification(targets, fraction, sampling_seed):
    """The documented per-class procedure, re-implemented: catalog order, permutation, first floor(c x f)."""
    rng = np.random.default_rng(sampling_seed)
    keys = np.asarray(targets.values).astype(str)
    parts = []
    for key in targets.catalog.keys:
        rows = np.flatnonzero(keys == key)
        parts.append(rng.permutation(rows)[: math.floor(rows.size * fraction)])
    return np.sort(np.concatenate(parts))


def test_classification_subsample_is_per_class(spy):
    X, y = _blobs([("a", 40), ("b", 30), ("c", 20)])
    targets = classification_targets(y)
    ids = [f"r{i}" for i in range(len(X))]
    config = StabilityConfig(mode="subsample", repeats=2, subsample_fraction=0.55, random_state=3)
    result = run_stability_analysis(X, targets, scoring_config=CFG, stability_config=config, seed=7, row_ids=ids)

    # floor(40 x .55) = 22, floor(30 x .55) = 16, floor(20 x .55) = 11
    expected_counts = {"a": 22, "b": 16, "c": 11}
    assert result.sampling_seeds == [int(s) for s in np.random.SeedSequence([3, 0x5A3]).generate_state(2)]
    # the scoring stream ignores random_state: the same seeds as a prototype run with seed=7
    assert result.scoring_seeds == [int(s) for s in np.random.SeedSequence([7, 0x5C0]).generate_state(2)]
    assert result.effective_sample_counts == [49, 49]
    assert result.effective_subsample_fractions == [49 / 90, 49 / 90]
    assert len(spy) == 2
    position = {key: i for i, key in enumerate(encode_row_ids(ids, len(X), what="embeddings"))}
    chosen = []
    for r, call in enumerate(spy):
        counts = {targets.catalog.display(k): n for k, n in call["targets"].counts().items()}
        assert counts == expected_counts
        rows = np.asarray([position[key] for key in call["row_ids"]])
        assert np.array_equal(rows, _redraw_classification(targets, 0.55, result.sampling_seeds[r]))
        # embeddings, targets and row ids stay aligned
        assert np.array_equal(call["embeddings"], X[rows])
        assert list(call["targets"].values) == list(targets.values[rows])
        assert call["seed"] == result.scoring_seeds[r]
        chosen.append(set(rows.tolist()))
    assert chosen[0] != chosen[1]
    assert result.scores == [call["score"] for call in spy]


def test_classification_minimum_violation_raises_before_scoring(spy):
    X, y = _blobs([("common", 30), ("other", 30), ("rare", 3)])
    config = StabilityConfig(mode="subsample", repeats=3, subsample_fraction=0.5)
    with pytest.raises(ValidationError) as caught:
        run_stability_analysis(X, classification_targets(y), scoring_config=CFG, stability_config=config)
    message = str(caught.value)
    assert "'rare' (3 -> 1)" in message  # floor(3 x .5) = 1 < 2
    assert "common" not in message and "'other'" not in message
    assert "larger subsample_fraction" in message and "mode='prototype'" in message
    assert spy == []


def test_minimum_boundaries_are_inclusive():
    # floor(4 x .5) = 2 occurrences and floor(6 x .5) = 3 regression rows are exactly enough
    check_subsample_minimums(classification_targets(["a"] * 4 + ["b"] * 4), 0.5)
    check_subsample_minimums(regression_targets(np.arange(6.0)), 0.5)
    with pytest.raises(ValidationError, match="keeps floor\\(5 x 0.5\\) = 2 row"):
        check_subsample_minimums(regression_targets(np.arange(5.0)), 0.5)
    with pytest.raises(ValidationError, match="'b' \\(3 -> 1\\)"):
        check_subsample_minimums(classification_targets(["a"] * 4 + ["b"] * 3), 0.5)


def test_multilabel_subsample_keeps_every_label(spy):
    X, y = _blobs([("a", 30), ("b", 30), ("c", 30)])
    label_sets = [[label, "shared"] if i % 6 == 0 else [label] for i, label in enumerate(y)]  # shared: 15 rows
    targets = multilabel_targets(label_sets)
    config = StabilityConfig(mode="subsample", repeats=2, subsample_fraction=0.6, random_state=11)
    result = run_stability_analysis(X, targets, scoring_config=CFG, stability_config=config)

    assert result.effective_sample_counts == [54, 54]  # floor(90 x .6)
    assert result.effective_subsample_fractions == [0.6, 0.6]
    indicator = targets.values.toarray()
    for r, call in enumerate(spy):
        assert sp.isspmatrix_csr(call["targets"].values)
        assert min(call["targets"].counts().values()) >= 2
        # the documented procedure: permutations of all rows from default_rng(sampling_seed) until every
        # active label keeps two occurrences
        rng = np.random.default_rng(result.sampling_seeds[r])
        while True:
            rows = np.sort(rng.permutation(90)[:54])
            if indicator[rows].sum(axis=0).min() >= 2:
                break
        assert np.array_equal(call["targets"].values.toarray(), indicator[rows])
        assert np.array_equal(call["embeddings"], X[rows])


def _few_label_data():
    X, y = _blobs([("a", 30), ("b", 30)])
    label_sets = [[label, "few"] if i in (0, 10, 31, 40) else [label] for i, label in enumerate(y)]
    return X, multilabel_targets(label_sets)


def test_multilabel_draw_missing_a_label_is_redrawn(spy):
    # 'few' occurs 4 times: floor(4 x .5) = 2 passes the count check, but a draw of 30 of 60 rows can miss it
    X, targets = _few_label_data()
    few = targets.values.toarray()[:, targets.catalog.keys.index("few")].astype(bool)
    config = StabilityConfig(mode="subsample", repeats=2, subsample_fraction=0.5, random_state=4)
    result = run_stability_analysis(X, targets, scoring_config=CFG, stability_config=config)
    rng = np.random.default_rng(result.sampling_seeds[0])
    draws = [np.sort(rng.permutation(60)[:30]) for _ in range(3)]
    assert few[draws[0]].sum() < 2  # premise: the first draw misses the minimum
    first_ok = next(rows for rows in draws if few[rows].sum() >= 2)
    assert np.array_equal(spy[0]["embeddings"], X[first_ok])
    assert spy[0]["targets"].counts()["few"] >= 2
    assert result.effective_sample_counts == [30, 30]


def test_multilabel_redraw_budget_exhausted_raises_before_scoring(spy, monkeypatch):
    import vertebrae.scoring.stability as stability

    monkeypatch.setattr(stability, "MAX_SUBSAMPLE_DRAWS", 1)
    X, targets = _few_label_data()
    config = StabilityConfig(mode="subsample", repeats=2, subsample_fraction=0.5, random_state=4)
    with pytest.raises(ValidationError, match="repeat 0 could not keep 2 occurrences of label\\(s\\) 'few' in 1 draws"
                                              ".*larger subsample_fraction or mode='prototype'"):
        run_stability_analysis(X, targets, scoring_config=CFG, stability_config=config)
    assert spy == []


def test_multilabel_minimum_violation_names_the_label(spy):
    X, y = _blobs([("a", 30), ("b", 30)])
    label_sets = [[label, "few"] if i in (0, 31, 40) else [label] for i, label in enumerate(y)]
    config = StabilityConfig(mode="subsample", repeats=2, subsample_fraction=0.5)
    with pytest.raises(ValidationError, match="label 'few' \\(3 -> 1\\).*larger subsample_fraction or mode='prototype'"):
        run_stability_analysis(X, multilabel_targets(label_sets), scoring_config=CFG, stability_config=config)
    assert spy == []


def test_regression_subsample(spy):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(120, 4))
    values = X[:, 0] + 0.1 * rng.normal(size=120)
    targets = regression_targets(values)
    config = StabilityConfig(mode="subsample", repeats=2, subsample_fraction=0.75, random_state=1)
    scoring = ContinuousOverlapScoringConfig(k=3, n_null_permutations=2)
    result = run_stability_analysis(X, targets, scoring_config=scoring, stability_config=config, seed=2)

    assert result.effective_sample_counts == [90, 90]  # floor(120 x .75)
    assert result.effective_subsample_fractions == [0.75, 0.75]
    for r, call in enumerate(spy):
        rows = np.sort(np.random.default_rng(result.sampling_seeds[r]).permutation(120)[:90])
        assert np.array_equal(call["targets"].values, values[rows])
        assert np.array_equal(call["embeddings"], X[rows])
        assert call["seed"] == result.scoring_seeds[r]
    assert result.scores == [call["score"] for call in spy]
    assert all(np.isfinite(result.scores))


def test_regression_constant_draws_raise_before_scoring(spy):
    # one non-zero row in 1000; a draw of floor(1000 x .003) = 3 rows is constant unless it holds row 999
    values = np.zeros(1000)
    values[999] = 1.0
    X = np.random.default_rng(0).normal(size=(1000, 3))
    config = StabilityConfig(mode="subsample", repeats=2, subsample_fraction=0.003, random_state=0)
    seed0 = int(np.random.SeedSequence([0, 0x5A3]).generate_state(1)[0])
    rng = np.random.default_rng(seed0)
    assert all(999 not in rng.permutation(1000)[:3] for _ in range(100))  # premise: 100 constant draws
    with pytest.raises(ValidationError, match="repeat 0 drew a constant regression target in 100 draws.*mode='prototype'"):
        run_stability_analysis(X, regression_targets(values), stability_config=config,
                               scoring_config=ContinuousOverlapScoringConfig(k=3, n_null_permutations=2))
    assert spy == []


def test_regression_row_minimum_raises_before_scoring(spy):
    X = np.random.default_rng(0).normal(size=(5, 3))
    config = StabilityConfig(mode="subsample", repeats=2, subsample_fraction=0.5)
    with pytest.raises(ValidationError, match="2 row\\(s\\) of the 5 regression rows.*at least 3.*mode='prototype'"):
        run_stability_analysis(X, regression_targets(np.arange(5.0)), stability_config=config)
    assert spy == []


# --------------------------------------------------------------------------------------------------
# Sparse embeddings and argument checks


@pytest.mark.parametrize("mode", ["prototype", "subsample"])
def test_sparse_embeddings_stay_csr(three_classes, spy, mode):
    X, targets = three_classes
    sparse = sp.csr_matrix(np.where(np.abs(X) > 0.5, X, 0.0))
    fraction = 0.5 if mode == "subsample" else None
    config = StabilityConfig(mode=mode, repeats=2, subsample_fraction=fraction)
    result = run_stability_analysis(sparse, targets, scoring_config=CFG, stability_config=config)
    assert len(spy) == 2
    assert all(sp.issparse(call["embeddings"]) and call["embeddings"].format == "csr" for call in spy)
    expected_rows = 45 if mode == "subsample" else 90  # 3 x floor(30 x .5)
    assert [call["embeddings"].shape[0] for call in spy] == [expected_rows] * 2
    assert result.effective_sample_counts == [expected_rows] * 2


def test_arguments_are_checked_before_scoring(three_classes, spy):
    X, targets = three_classes
    with pytest.raises(ValidationError, match="scored with ContinuousOverlapScoringConfig"):
        run_stability_analysis(X, regression_targets(X[:, 0]), scoring_config=CFG)
    with pytest.raises(ValidationError, match="StabilityConfig.enabled is False"):
        run_stability_analysis(X, targets, stability_config=StabilityConfig(enabled=False))
    with pytest.raises(ValidationError, match="embeddings have 89 rows but the targets have 90"):
        run_stability_analysis(X[:89], targets, scoring_config=CFG)
    with pytest.raises(ValidationError, match="seed must be a non-negative integer"):
        run_stability_analysis(X, targets, scoring_config=CFG, seed=-1)
    assert spy == []
