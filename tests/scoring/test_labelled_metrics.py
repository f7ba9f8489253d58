"""The built-in labelled metrics against direct scikit-learn / NumPy computations written here (same folds,
seeds and grid), their refusals, and their config round trip."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.linear_model import LogisticRegression, RidgeCV
from sklearn.metrics import (adjusted_rand_score, balanced_accuracy_score, normalized_mutual_info_score, r2_score,
                             v_measure_score)
from sklearn.model_selection import GroupKFold, KFold, StratifiedGroupKFold, StratifiedKFold
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
from sklearn.preprocessing import StandardScaler

from vertebrae import ClusteringMetric, FewShotMetric, KNNMetric, LinearProbeMetric
from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.data.targets import classification_targets, multilabel_targets, regression_targets
from vertebrae.scoring.metric_registry import metric_from_config

SEED = 3


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(4, 6)) * 1.2
    y = np.repeat(np.arange(4), [40, 30, 30, 20])
    x = centers[y] + rng.normal(size=(len(y), 6))
    return x, y


def _normalised(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _folds(y, n=5):
    return list(StratifiedKFold(n, shuffle=True, random_state=SEED).split(np.zeros(len(y)), y))


def _knn_oracle(x, y, k, weighting, t=0.07):
    xn = _normalised(x)
    predicted = np.empty(len(y), dtype=int)
    for train, test in _folds(y):
        for i in test:
            sims = xn[train] @ xn[i]
            top = np.argsort(-sims)[:k]
            votes = np.zeros(4)
            for j in top:
                votes[y[train][j]] += 1.0 if weighting == "uniform" else np.exp(sims[j] / t)
            predicted[i] = int(np.argmax(votes))
    return predicted


@pytest.mark.parametrize("weighting", ["uniform", "temperature"])
def test_knn_equals_a_direct_numpy_vote_over_the_same_folds(data, weighting):
    x, y = data
    result = KNNMetric(k=7, weighting=weighting).compute(x, classification_targets(y), row_ids=None, seed=SEED)
    predicted = _knn_oracle(x, y, 7, weighting)
    assert result.diagnostics["per_sample"]["predicted"] == predicted.tolist()
    assert result.score == pytest.approx(np.mean(predicted == y), abs=1e-12)
    assert result.diagnostics["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(y, predicted), abs=1e-12)
    assert result.diagnostics["per_sample"]["correct"] == (predicted == y).astype(int).tolist()


def test_knn_uniform_equals_scikit_learn_brute_cosine(data):
    x, y = data
    expected = np.empty(len(y), dtype=int)
    for train, test in _folds(y):
        model = KNeighborsClassifier(n_neighbors=5, metric="cosine", algorithm="brute").fit(x[train], y[train])
        expected[test] = model.predict(x[test])
    result = KNNMetric(k=5).compute(x, classification_targets(y), row_ids=None, seed=SEED)
    assert result.diagnostics["per_sample"]["predicted"] == expected.tolist()


def test_knn_regression_is_the_r2_of_a_cosine_neighbour_mean(data):
    x, _ = data
    target = x[:, 0] * 2.0 + np.sin(x[:, 1])
    expected = np.empty(len(target))
    for train, test in KFold(5, shuffle=True, random_state=SEED).split(x):
        model = KNeighborsRegressor(n_neighbors=5, metric="cosine", algorithm="brute").fit(x[train], target[train])
        expected[test] = model.predict(x[test])
    order = np.concatenate([test for _, test in KFold(5, shuffle=True, random_state=SEED).split(x)])
    result = KNNMetric(k=5).compute(x, regression_targets(target), row_ids=None, seed=SEED)
    assert result.score == pytest.approx(r2_score(target[order], expected[order]), abs=1e-12)


def test_linear_probe_equals_a_direct_grid_search_over_the_same_folds(data):
    x, y = data
    grid = (1e-2, 1e-1, 1.0)
    result = LinearProbeMetric(Cs=grid, folds=3, inner_folds=3).compute(x, classification_targets(y), row_ids=None, seed=SEED)
    predicted = np.empty(len(y), dtype=int)
    chosen = []
    for train, test in _folds(y, 3):
        scaler = StandardScaler().fit(x[train])
        xtr, xte = scaler.transform(x[train]), scaler.transform(x[test])
        inner = list(StratifiedKFold(3, shuffle=True, random_state=SEED).split(xtr, y[train]))
        means = [np.mean([LogisticRegression(C=c, max_iter=1000).fit(xtr[a], y[train][a]).score(xtr[b], y[train][b])
                          for a, b in inner]) for c in grid]
        best = grid[int(np.argmax(means))]
        chosen.append(best)
        predicted[test] = LogisticRegression(C=best, max_iter=1000).fit(xtr, y[train]).predict(xte)
    assert result.diagnostics["chosen_C"] == chosen
    assert result.diagnostics["per_sample"]["predicted"] == predicted.tolist()
    assert result.score == pytest.approx(np.mean(predicted == y), abs=1e-12)
    again = LinearProbeMetric(Cs=grid, folds=3, inner_folds=3).compute(x, classification_targets(y), row_ids=None, seed=SEED)
    assert again.to_dict() == result.to_dict()  # seeded: the same numbers on a second run


def test_linear_probe_regression_is_a_ridge_probe(data):
    x, _ = data
    target = x @ np.arange(1, 7) + 0.1
    splits = list(KFold(5, shuffle=True, random_state=SEED).split(x))
    true, predicted = [], []
    for train, test in splits:
        scaler = StandardScaler().fit(x[train])
        model = RidgeCV(alphas=[1 / c for c in (0.1, 1.0, 10.0)], cv=KFold(3, shuffle=True, random_state=SEED),
                        scoring="neg_mean_squared_error").fit(scaler.transform(x[train]), target[train])
        true.append(target[test])
        predicted.append(model.predict(scaler.transform(x[test])))
    result = LinearProbeMetric(Cs=(0.1, 1.0, 10.0)).compute(x, regression_targets(target), row_ids=None, seed=SEED)
    assert result.score == pytest.approx(r2_score(np.concatenate(true), np.concatenate(predicted)), abs=1e-12)


def _subjects(y):
    """Independence groups: 4 rows per subject, a subject's rows one class (as images of one person would be)."""
    return [f"s{c}-{i // 4}" for c in range(4) for i in range(int(np.sum(y == c)))]


def test_with_groups_knn_folds_keep_each_group_on_one_side(data):
    """A dataset's independence groups: no fold trains on a subject it tests (StratifiedGroupKFold, same seed)."""
    x, y = data
    groups = _subjects(y)
    codes = np.unique(groups, return_inverse=True)[1]
    folds = list(StratifiedGroupKFold(5, shuffle=True, random_state=SEED).split(np.zeros(len(y)), y, codes))
    assert all(not set(codes[train]) & set(codes[test]) for train, test in folds)
    expected = np.empty(len(y), dtype=int)
    for train, test in folds:
        model = KNeighborsClassifier(n_neighbors=5, metric="cosine", algorithm="brute").fit(x[train], y[train])
        expected[test] = model.predict(x[test])
    metric = KNNMetric(k=5)
    result = metric.compute(x, classification_targets(y), row_ids=None, groups=groups, seed=SEED)
    assert result.diagnostics["per_sample"]["predicted"] == expected.tolist()
    ignored = KNNMetric(k=5, group_folds=False).compute(x, classification_targets(y), row_ids=None, groups=groups,
                                                        seed=SEED)
    assert ignored.to_dict()["diagnostics"] == metric.compute(x, classification_targets(y), row_ids=None,
                                                              seed=SEED).to_dict()["diagnostics"]
    assert metric.recipe()["group_folds"] is True and KNNMetric(k=5, group_folds=False).recipe() != metric.recipe()
    target = x[:, 0] * 2.0
    regression = KNNMetric(k=5).compute(x, regression_targets(target), row_ids=None, groups=groups, seed=SEED)
    splits = list(GroupKFold(5, shuffle=True, random_state=SEED).split(x, groups=codes))
    predicted = np.empty(len(target))
    for train, test in splits:
        predicted[test] = KNeighborsRegressor(n_neighbors=5, metric="cosine", algorithm="brute").fit(
            x[train], target[train]).predict(x[test])
    order = np.concatenate([test for _, test in splits])
    assert regression.score == pytest.approx(r2_score(target[order], predicted[order]), abs=1e-12)


def test_with_groups_the_probe_keeps_groups_apart_in_outer_and_inner_folds(data):
    x, y = data
    groups = _subjects(y)
    codes = np.unique(groups, return_inverse=True)[1]
    grid = (1e-2, 1.0)
    result = LinearProbeMetric(Cs=grid, folds=3, inner_folds=3).compute(x, classification_targets(y), row_ids=None,
                                                                        groups=groups, seed=SEED)
    predicted = np.empty(len(y), dtype=int)
    for train, test in StratifiedGroupKFold(3, shuffle=True, random_state=SEED).split(np.zeros(len(y)), y, codes):
        scaler = StandardScaler().fit(x[train])
        xtr, xte = scaler.transform(x[train]), scaler.transform(x[test])
        inner = list(StratifiedGroupKFold(3, shuffle=True, random_state=SEED).split(xtr, y[train], codes[train]))
        means = [np.mean([LogisticRegression(C=c, max_iter=1000).fit(xtr[a], y[train][a]).score(xtr[b], y[train][b])
                          for a, b in inner]) for c in grid]
        predicted[test] = LogisticRegression(C=grid[int(np.argmax(means))], max_iter=1000).fit(xtr, y[train]).predict(xte)
    assert result.diagnostics["per_sample"]["predicted"] == predicted.tolist()


def test_fewer_groups_than_folds_is_refused_naming_the_key(data):
    x, y = data
    few = [f"g{i % 3}" for i in range(len(y))]
    for metric in (KNNMetric(k=3, folds=5), LinearProbeMetric(folds=5)):
        with pytest.raises(ValidationError, match=r"key 'folds' = 5 exceeds the 3 independence groups"):
            metric.check(classification_targets(y), groups=few)
        metric.check(classification_targets(y))  # without groups: fine
    with pytest.raises(ValidationError, match=r"key 'inner_folds' = 3 exceeds the 2 independence groups"):
        LinearProbeMetric(folds=2, inner_folds=3).check(classification_targets(y), groups=[f"g{i % 4}" for i in range(len(y))])
    with pytest.raises(ConfigError, match="group_folds"):
        KNNMetric(group_folds="yes")


def test_few_shot_equals_a_direct_nearest_class_mean_over_the_same_episodes(data):
    x, y = data
    metric = FewShotMetric(shots=(1, 5), episodes=6)
    result = metric.compute(x, classification_targets(y), row_ids=None, seed=SEED)
    xn = _normalised(x)
    for j, s in enumerate((1, 5)):
        accs = []
        for e in range(6):
            rng = np.random.default_rng([SEED, e])
            perms = [rng.permutation(np.flatnonzero(y == c)) for c in range(4)]
            support = np.concatenate([p[:s] for p in perms])
            means = np.stack([xn[p[:s]].mean(axis=0) for p in perms])
            query = np.setdiff1d(np.arange(len(y)), support)
            dist = np.linalg.norm(xn[query][:, None, :] - means[None], axis=2)
            accs.append(np.mean(dist.argmin(axis=1) == y[query]))
        assert result.diagnostics["per_episode"][str(s)] == pytest.approx(accs, abs=1e-12)
        half = 1.96 * np.std(accs, ddof=1) / np.sqrt(6)
        assert result.diagnostics["per_shot"][str(s)]["ci_low"] == pytest.approx(np.mean(accs) - half, abs=1e-12)
    assert result.score == pytest.approx(np.mean(result.diagnostics["per_episode"]["5"]), abs=1e-12)


def test_with_groups_few_shot_queries_share_no_group_with_the_support(data):
    """Each episode's queries are the rows outside the support and outside every group the support holds."""
    x, y = data
    groups = _subjects(y)  # 4 rows per subject
    metric = FewShotMetric(shots=(1, 3), episodes=5)
    result = metric.compute(x, classification_targets(y), row_ids=None, groups=groups, seed=SEED)
    xn, subject = _normalised(x), np.asarray(groups)
    for j, s in enumerate((1, 3)):
        accs, sizes = [], []
        for e in range(5):
            rng = np.random.default_rng([SEED, e])
            perms = [rng.permutation(np.flatnonzero(y == c)) for c in range(4)]
            support = np.concatenate([p[:s] for p in perms])
            means = np.stack([xn[p[:s]].mean(axis=0) for p in perms])
            query = np.array([i for i in range(len(y)) if subject[i] not in set(subject[support])])
            assert not set(query) & set(support)
            dist = np.linalg.norm(xn[query][:, None, :] - means[None], axis=2)
            accs.append(np.mean(dist.argmin(axis=1) == y[query]))
            sizes.append(len(query))
        assert result.diagnostics["per_episode"][str(s)] == pytest.approx(accs, abs=1e-12)
        assert len(y) - 4 * 4 * s <= min(sizes) and max(sizes) <= len(y) - 4 * 4  # whole subjects left out
    ignored = FewShotMetric(shots=(1, 3), episodes=5, group_episodes=False)
    assert ignored.compute(x, classification_targets(y), row_ids=None, groups=groups, seed=SEED).to_dict()["diagnostics"] \
        == metric.compute(x, classification_targets(y), row_ids=None, seed=SEED).to_dict()["diagnostics"]
    assert metric.recipe()["group_episodes"] is True and ignored.recipe() != metric.recipe()
    assert metric_from_config({"type": "few_shot", "group_episodes": False}).recipe()["group_episodes"] is False


def test_few_shot_refuses_episodes_whose_support_holds_every_group(data):
    x, y = data
    two = [f"g{i % 2}" for i in range(len(y))]  # every class spans both groups: 2 shots can hold both
    with pytest.raises(ValidationError, match=r"key 'shots': at \d+ shots, episode \d+'s support holds a row of every "
                                              r"independence group.*'group_episodes: false'"):
        FewShotMetric(shots=(1, 2), episodes=20).check(classification_targets(y), groups=two, seed=SEED)
    FewShotMetric(shots=(1, 2), episodes=20, group_episodes=False).check(classification_targets(y), groups=two)
    with pytest.raises(ConfigError, match="group_episodes"):
        FewShotMetric(group_episodes=1)


def test_a_declared_split_that_shares_groups_is_kept_with_a_warning_naming_them(data):
    """A user's split is taken as given; where a subject has rows in train and test, each metric says so."""
    x, y = data
    groups = _subjects(y)  # subjects s<class>-<i>, 4 consecutive rows each
    by_row = ["test" if i % 4 == 0 else "train" for i in range(len(y))]  # all but s2-7 (rows 98, 99) on both sides
    by_subject = ["test" if int(g.split("-")[1]) % 4 == 0 else "train" for g in groups]  # whole subjects
    targets = classification_targets(y)
    metrics = (KNNMetric(k=3, split=by_row), LinearProbeMetric(Cs=(1.0,), inner_folds=2, split=by_row),
               FewShotMetric(shots=(1,), episodes=2, split=by_row))
    for metric in metrics:
        warned = metric.compute(x, targets, row_ids=None, groups=groups, seed=SEED)
        shared = [w for w in warned.warnings if "independence groups" in w]
        assert shared == [f"{type(metric).__name__} {metric.name!r}: key 'split': 30 of the 31 independence groups "
                          "have rows in both train and test (e.g. ['s0-0', 's0-1', 's0-2', 's0-3', 's0-4']): those "
                          "test rows are not independent of the train rows"], warned.warnings
        plain = metric.compute(x, targets, row_ids=None, seed=SEED)  # same numbers, no groups: no warning
        assert plain.score == warned.score and not [w for w in plain.warnings if "independence" in w]
    for metric in (KNNMetric(k=3, split=by_subject), FewShotMetric(shots=(1,), episodes=2, split=by_subject)):
        assert not metric.compute(x, targets, row_ids=None, groups=groups, seed=SEED).warnings


def test_clustering_equals_direct_kmeans_and_sklearn_scores(data):
    x, y = data
    result = ClusteringMetric(n_init=2, repeats=2).compute(x, classification_targets(y), row_ids=None, seed=SEED)
    xn = _normalised(x)
    for r in range(2):
        labels = KMeans(n_clusters=4, n_init=2, random_state=SEED + r).fit(xn).labels_
        assert result.diagnostics["per_seed"]["v_measure"][r] == pytest.approx(v_measure_score(y, labels), abs=1e-12)
        assert result.diagnostics["per_seed"]["ari"][r] == pytest.approx(adjusted_rand_score(y, labels), abs=1e-12)
        assert result.diagnostics["per_seed"]["nmi"][r] == pytest.approx(normalized_mutual_info_score(y, labels), abs=1e-12)
    assert result.score == pytest.approx(np.mean(result.diagnostics["per_seed"]["v_measure"]), abs=1e-12)


def test_a_declared_split_is_honoured_by_every_metric(data):
    x, y = data
    split = ["train" if i % 3 else "test" for i in range(len(y))]
    train, test = np.flatnonzero(np.array(split) == "train"), np.flatnonzero(np.array(split) == "test")
    targets = classification_targets(y)
    knn = KNNMetric(k=5, split=split).compute(x, targets, row_ids=None, seed=SEED)
    expected = KNeighborsClassifier(5, metric="cosine", algorithm="brute").fit(x[train], y[train]).predict(x[test])
    assert knn.diagnostics["per_sample"]["predicted"] == expected.tolist()
    assert knn.diagnostics["per_sample"]["ids"] == [f"@int:{i}" for i in test]
    by_id = KNNMetric(k=5, split={"train": train.tolist(), "test": test.tolist()}).compute(x, targets, row_ids=None, seed=SEED)
    assert by_id.score == knn.score
    probe = LinearProbeMetric(Cs=(1.0,), split=split).compute(x, targets, row_ids=None, seed=SEED)
    scaler = StandardScaler().fit(x[train])
    direct = LogisticRegression(C=1.0, max_iter=1000).fit(scaler.transform(x[train]), y[train])
    assert probe.diagnostics["per_sample"]["predicted"] == direct.predict(scaler.transform(x[test])).tolist()
    few = FewShotMetric(shots=(2,), episodes=2, split=split).compute(x, targets, row_ids=None, seed=SEED)
    rng = np.random.default_rng([SEED, 0])
    perms = [rng.permutation(train[y[train] == c]) for c in range(4)]
    means = np.stack([_normalised(x)[p[:2]].mean(axis=0) for p in perms])
    dist = np.linalg.norm(_normalised(x)[test][:, None] - means[None], axis=2)
    assert few.diagnostics["per_episode"]["2"][0] == pytest.approx(np.mean(dist.argmin(axis=1) == y[test]))
    clus = ClusteringMetric(n_init=2, repeats=1, split=split).compute(x, targets, row_ids=None, seed=SEED)
    model = KMeans(4, n_init=2, random_state=SEED).fit(_normalised(x)[train])
    assert clus.score == pytest.approx(v_measure_score(y[test], model.predict(_normalised(x)[test])))


def test_refusals_name_the_key_and_the_classes(data):
    x, y = data
    y_small = y.copy()
    y_small[:3] = 9  # class 9 has 3 rows
    targets = classification_targets(y_small)
    with pytest.raises(ValidationError, match=r"key 'k' = 20 \(a test row and its k neighbours\) needs at least 21 "
                                              r"rows per class; classes '3' \(20\), '9' \(3\) have fewer"):
        KNNMetric().compute(x, targets, row_ids=None)
    with pytest.raises(ValidationError, match=r"key 'folds' = 5 needs at least 5 rows per class; classes '9' \(3\)"):
        LinearProbeMetric().compute(x, targets, row_ids=None)
    with pytest.raises(ValidationError, match=r"key 'shots' = \[1, 5\] needs at least 6 rows per class; classes "
                                              r"'9' \(3\) have fewer"):
        FewShotMetric(shots=(1, 5)).compute(x, targets, row_ids=None)
    with pytest.raises(ValidationError, match=r"'k' = 200 \(a test row and its k neighbours\) needs at least 201"):
        KNNMetric(k=200).compute(x, classification_targets(y), row_ids=None)
    with pytest.raises(ValidationError, match="every class has fewer"):  # nothing would be left to score
        KNNMetric(k=200, small_classes="exclude").compute(x, classification_targets(y), row_ids=None)
    split = ["test" if label == 3 or i % 4 == 0 else "train" for i, label in enumerate(y)]
    for metric in (LinearProbeMetric(split=split), FewShotMetric(split=split), ClusteringMetric(split=split)):
        with pytest.raises(ValidationError, match=r"'split': classes \['3'\] have test rows but no train row"):
            metric.compute(x, classification_targets(y), row_ids=None)
    with pytest.raises(ConfigError, match="'split' holds values other than train/val/test: \\['dev'\\]"):
        KNNMetric(split=["train", "dev"])
    with pytest.raises(ConfigError, match="'split' may hold only"):
        KNNMetric(split={"train": [0], "validation": [1]})
    multilabel = multilabel_targets([["a"], ["a", "b"]] * 60)
    for metric in (KNNMetric(), LinearProbeMetric(), FewShotMetric(), ClusteringMetric()):
        with pytest.raises(ValidationError, match="multilabel targets \\(target type 'multilabel'\\)"):
            metric.compute(x, multilabel, row_ids=None)
    for metric in (FewShotMetric(), ClusteringMetric()):
        with pytest.raises(ValidationError, match="target type 'regression'"):
            metric.compute(x, regression_targets(x[:, 0]), row_ids=None)


@pytest.mark.parametrize("metric", [KNNMetric(k=3, weighting="temperature", split=["train", "test"]),
                                    LinearProbeMetric(Cs=(0.5, 2.0), primary="balanced_accuracy"),
                                    FewShotMetric(shots=(1, 2), episodes=4), ClusteringMetric(repeats=2, primary="ari")])
def test_config_round_trip(metric):
    assert metric_from_config(metric.recipe()).recipe() == metric.recipe()


def test_config_refuses_unknown_keys_naming_them():
    with pytest.raises(ConfigError, match=r"type 'knn' has unknown key\(s\) \['kk'\]"):
        metric_from_config({"type": "knn", "kk": 3})
    with pytest.raises(ConfigError, match="'type' must be one of .*'few_shot'"):
        metric_from_config({"type": "fewshot"})
