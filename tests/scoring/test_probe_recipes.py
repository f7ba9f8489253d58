"""The linear probe's published recipes against loops written here from the tools' own steps: ``clip_benchmark``
against a torch loop with a real ``DataLoader(shuffle=True)`` and ``nn.Linear`` under ``torch.manual_seed``,
``mteb`` against scikit-learn's ``LogisticRegression`` over MTEB's undersampling; plus the recipe key's
fingerprint contract and its refusals."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score
from sklearn.model_selection import StratifiedKFold

from vertebrae import LinearProbeMetric
from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.data.targets import classification_targets, regression_targets
from vertebrae.scoring.metric_registry import metric_from_config

SEED = 5


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(1)
    centers = rng.normal(size=(3, 8))
    y = np.repeat(np.arange(3), [50, 40, 30])
    x = centers[y] * 0.8 + rng.normal(size=(len(y), 8))
    return x, y


def _folds(y, n):
    return list(StratifiedKFold(n, shuffle=True, random_state=SEED).split(np.zeros(len(y)), y))


# ---- CLIP_benchmark: its steps, written with torch's own DataLoader ---------------------------------------------

def _clip_train(features, labels, wd, lr, epochs, batch_size, seed):
    torch.manual_seed(seed)
    model = torch.nn.Linear(features.shape[1], int(labels.max()) + 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=wd)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(features, labels), batch_size=batch_size,
                                         shuffle=True)
    total = epochs * len(loader)
    for epoch in range(epochs):
        for i, (xb, yb) in enumerate(loader):
            step = i + epoch * len(loader)
            for group in optimizer.param_groups:
                group["lr"] = 0.5 * (1 + np.cos(np.pi * step / total)) * lr
            optimizer.zero_grad()
            torch.nn.CrossEntropyLoss()(model(xb), yb).backward()
            optimizer.step()
    return model


def _clip_oracle(x, y, train, test, *, lr=0.1, epochs=10, batch_size=64, val_proportion=None, seed=SEED, val=None):
    unit = torch.from_numpy((x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32))
    labels = torch.from_numpy(y.astype(np.int64))
    g = torch.Generator().manual_seed(seed)
    if val is not None:  # --val_split: a split of its own, in its order; no random_split draw
        fit = train
    elif val_proportion is None:
        fit, val = train, None
    else:  # random_split's own arithmetic, on the positions of the train rows
        fit_part, val_part = torch.utils.data.random_split(range(len(train)), [1 - val_proportion, val_proportion],
                                                           generator=g)
        fit, val = train[list(fit_part.indices)], train[list(val_part.indices)]
    fit = fit[torch.randperm(len(fit), generator=g).numpy()]
    wd = 0.0
    with torch.random.fork_rng(devices=[]):
        def accuracy(model, rows):
            with torch.no_grad():
                return float((model(unit[rows]).argmax(1) == labels[rows]).float().mean())
        if val is not None:
            grid = list(np.logspace(-6, 2, 97))
            tried = {}

            def peak(idxs):
                best, best_acc = 0, 0.0
                for idx in idxs:
                    if idx not in tried:
                        tried[idx] = accuracy(_clip_train(unit[fit], labels[fit], grid[idx], lr, epochs, batch_size,
                                                          seed), val)
                    if best_acc < tried[idx]:
                        best, best_acc = idx, tried[idx]
                return best
            best = peak([0, 16, 32, 48, 64, 80, 96])
            for span in (8, 4, 2, 1):
                best = peak([max(best - span, 0), best, min(best + span, 96)])
            wd = grid[best]
            fit = np.concatenate([fit, val])
        model = _clip_train(unit[fit], labels[fit], wd, lr, epochs, batch_size, seed)
        with torch.no_grad():
            return model(unit[test]).argmax(1).numpy(), wd


def test_clip_benchmark_equals_a_torch_loop_with_its_dataloader(data):
    x, y = data
    metric = LinearProbeMetric(recipe="clip_benchmark", folds=3, epochs=5, batch_size=16)
    state = torch.random.get_rng_state()
    result = metric.compute(x, classification_targets(y), row_ids=None, seed=SEED)
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's torch stream is untouched
    predicted = np.empty(len(y), dtype=int)
    for train, test in _folds(y, 3):
        predicted[test] = _clip_oracle(x, y, train, test, epochs=5, batch_size=16)[0]
    assert result.diagnostics["per_sample"]["predicted"] == predicted.tolist()
    assert result.score == pytest.approx(float((predicted == y).mean()), abs=0)
    assert result.diagnostics["weight_decay"] == [0.0, 0.0, 0.0]
    assert result.metadata["recipe"] == "clip_benchmark" and result.metadata["lr"] == 0.1


def test_clip_benchmark_reports_acc5_as_its_accuracy_function_does():
    """With at least 5 classes CLIP_benchmark also reports acc5: the share of test rows whose class is among the
    layer's 5 largest logits (``topk``); with fewer (the 3-class set above) it reports none, and neither do we."""
    rng = np.random.default_rng(2)
    y = np.arange(84) % 7
    x = rng.normal(size=(7, 6))[y] * 0.5 + rng.normal(size=(84, 6))
    metric = LinearProbeMetric(recipe="clip_benchmark", folds=2, epochs=2, batch_size=16)
    result = metric.compute(x, classification_targets(y), row_ids=None, seed=SEED)
    unit = torch.from_numpy((x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32))
    hits = []
    for train, test in _folds(y, 2):
        fit = train[torch.randperm(len(train), generator=torch.Generator().manual_seed(SEED)).numpy()]
        with torch.random.fork_rng(devices=[]):
            model = _clip_train(unit[fit], torch.from_numpy(y[fit]), 0.0, 0.1, 2, 16, SEED)
        with torch.no_grad():
            top = model(unit[test]).topk(5, 1, True, True).indices.numpy()
        hits.extend((top == y[test][:, None]).any(axis=1))
    assert result.diagnostics["top5_accuracy"] == float(np.mean(hits)) > result.diagnostics["accuracy"]
    three = LinearProbeMetric(recipe="clip_benchmark", folds=2, epochs=1).compute(
        x[y < 3], classification_targets(y[y < 3]), row_ids=None, seed=SEED)
    assert "top5_accuracy" not in three.diagnostics


def test_clip_benchmark_weight_decay_search_equals_the_loop(data):
    x, y = data
    train, test = np.flatnonzero(np.arange(len(y)) % 4 != 0), np.flatnonzero(np.arange(len(y)) % 4 == 0)
    split = ["train" if i % 4 else "test" for i in range(len(y))]
    metric = LinearProbeMetric(recipe="clip_benchmark", split=split, epochs=3, batch_size=16, val_proportion=0.3)
    result = metric.compute(x, classification_targets(y), row_ids=None, seed=SEED)
    predicted, wd = _clip_oracle(x, y, train, test, epochs=3, batch_size=16, val_proportion=0.3)
    assert result.diagnostics["weight_decay"] == [wd]
    assert wd == pytest.approx(0.0825404185, rel=1e-9)  # inside the grid: the search's later steps moved it
    assert result.diagnostics["per_sample"]["predicted"] == predicted.tolist()


def test_clip_benchmark_on_a_declared_train_val_test_split_equals_the_loop(data):
    """Rows marked train / val / test: the weight decay is searched on the val rows (CLIP_benchmark's
    ``--val_split``), the final layer trained on train + val and the score taken on the test rows alone."""
    x, y = data
    split = np.array(["train", "train", "val", "train", "test"])[np.arange(len(y)) % 5]
    train, val, test = (np.flatnonzero(split == part) for part in ("train", "val", "test"))
    metric = LinearProbeMetric(recipe="clip_benchmark", split=split.tolist(), epochs=3, batch_size=16)
    result = metric.compute(x, classification_targets(y), row_ids=None, seed=SEED)
    predicted, wd = _clip_oracle(x, y, train, test, epochs=3, batch_size=16, val=val)
    assert result.diagnostics["weight_decay"] == [wd] and wd != 0.0  # searched, on the val rows
    assert result.diagnostics["per_sample"]["ids"] == [f"@int:{i}" for i in test]  # the test rows alone
    assert result.diagnostics["per_sample"]["predicted"] == predicted.tolist()
    assert result.score == float((predicted == y[test]).mean())
    assert result.metadata["n_validation"] == len(val) and result.metadata["evaluation"] == "split"
    by_id = LinearProbeMetric(recipe="clip_benchmark", epochs=3, batch_size=16, split={
        part: rows.tolist() for part, rows in (("train", train), ("val", val), ("test", test))})
    assert by_id.compute(x, classification_targets(y), row_ids=None, seed=SEED).diagnostics["per_sample"] == \
        result.diagnostics["per_sample"]
    # evaluated on val instead (no search rows left: weight decay 0, as CLIP_benchmark without a validation part)
    on_val = LinearProbeMetric(recipe="clip_benchmark", split=split.tolist(), eval_split="val", epochs=3,
                               batch_size=16).compute(x, classification_targets(y), row_ids=None, seed=SEED)
    assert on_val.diagnostics["per_sample"]["predicted"] == \
        _clip_oracle(x, y, train, val, epochs=3, batch_size=16)[0].tolist()
    assert on_val.diagnostics["weight_decay"] == [0.0] and on_val.metadata["eval_split"] == "val"


def test_clip_benchmark_refuses_declared_val_rows_with_val_proportion(data):
    x, y = data
    with pytest.raises(ConfigError, match=r"key 'split' declares val rows and key 'val_proportion' = 0.2.*"
                                          r"--val_split and --val_proportion exclude each other"):
        LinearProbeMetric(recipe="clip_benchmark", val_proportion=0.2, split={"train": [0, 1], "val": [2], "test": [3]})
    split = ["train", "val", "test"] * (len(y) // 3)
    metric = LinearProbeMetric(recipe="clip_benchmark", val_proportion=0.2, split=split)
    with pytest.raises(ValidationError, match=r"key 'split' declares val rows and key 'val_proportion'"):
        metric.check(classification_targets(y))  # at plan / validate time, before any embedding
    only_val = ["train" if i % 3 else "val" for i in range(len(y))]
    assert LinearProbeMetric(recipe="clip_benchmark", val_proportion=0.2, split=only_val, eval_split="val").check(
        classification_targets(y))  # evaluated on val, val_proportion carves its search rows from train


# ---- MTEB: AbsTaskClassification's undersampled experiments -----------------------------------------------------

def _mteb_oracle(x, y, train, test, n_experiments, samples_per_label, seed):
    idxs, out = list(range(len(train))), []
    for _ in range(n_experiments):
        np.random.RandomState(seed).shuffle(idxs)
        counter, chosen = defaultdict(int), []
        for i in idxs:
            if counter[y[train][i]] < samples_per_label:
                chosen.append(train[i])
                counter[y[train][i]] += 1
        clf = LogisticRegression(max_iter=100, random_state=seed).fit(x[chosen], y[chosen])
        out.append(clf.predict(x[test]))
    return out


def test_mteb_equals_logistic_regression_over_its_undersampling(data):
    x, y = data
    metric = LinearProbeMetric(recipe="mteb", folds=3, n_experiments=4, samples_per_label=6)
    result = metric.compute(x, classification_targets(y), row_ids=None, seed=SEED)
    runs = [np.empty(len(y), dtype=int) for _ in range(4)]
    for train, test in _folds(y, 3):
        for run, predicted in zip(runs, _mteb_oracle(x, y, train, test, 4, 6, SEED)):
            run[test] = predicted
    accuracy = np.mean([(r == y).mean() for r in runs])
    assert result.score == pytest.approx(accuracy, abs=1e-15)
    assert result.diagnostics["f1_macro"] == pytest.approx(np.mean([f1_score(y, r, average="macro") for r in runs]),
                                                           abs=1e-15)
    assert result.diagnostics["per_sample"]["correct"] == pytest.approx(np.mean([r == y for r in runs], axis=0))
    assert [e["accuracy"] for e in result.diagnostics["per_experiment"]] == [float((r == y).mean()) for r in runs]
    assert result.metadata["max_iter"] == 100 and result.metadata["recipe"] == "mteb"
    # the experiments differ (each reshuffles the last order), or the average would be one fit
    assert len({tuple(r) for r in runs}) > 1


# ---- the recipe key: fingerprint contract, round trip, refusals -------------------------------------------------

def test_default_recipe_adds_nothing_and_published_ones_round_trip():
    assert "recipe" not in LinearProbeMetric().recipe()
    assert LinearProbeMetric().recipe() == LinearProbeMetric(recipe="vertebrae", max_iter=1000).recipe()
    for kwargs in ({"recipe": "clip_benchmark", "val_proportion": 0.2}, {"recipe": "mteb", "samples_per_label": 16}):
        metric = LinearProbeMetric(**kwargs)
        assert metric_from_config(metric.recipe()).recipe() == metric.recipe()


def test_unknown_recipe_and_foreign_keys_are_refused():
    with pytest.raises(ConfigError, match=r"'recipe'.*\['vertebrae', 'clip_benchmark', 'mteb'\].*'sklearn_cv'"):
        LinearProbeMetric(recipe="sklearn_cv")
    with pytest.raises(ConfigError, match=r"\['val_proportion'\] belong to recipe 'clip_benchmark'"):
        LinearProbeMetric(recipe="mteb", val_proportion=0.2)
    with pytest.raises(ConfigError, match=r"\['Cs'\] belong to recipe 'vertebrae'"):
        LinearProbeMetric(recipe="clip_benchmark", Cs=(1.0,))
    with pytest.raises(ConfigError, match="val_proportion"):
        LinearProbeMetric(recipe="clip_benchmark", val_proportion=1.0)


def test_a_recipe_missing_what_it_needs_says_what(data):
    x, y = data
    split = ["train"] * 3 + ["test"] * (len(y) - 3)
    y_small = np.array([0, 1, 2] + list(np.arange(len(y) - 3) % 3))
    metric = LinearProbeMetric(recipe="clip_benchmark", split=split, val_proportion=0.1)
    with pytest.raises(ValidationError, match=r"val_proportion' = 0.1 leaves no validation rows among the 3 train"):
        metric.check(classification_targets(y_small))
    with pytest.raises(ValidationError, match="recipe 'mteb' is defined for classification targets only"):
        LinearProbeMetric(recipe="mteb").check(regression_targets(np.arange(20.0)))


@pytest.mark.filterwarnings("ignore:Length of split")
def test_clip_benchmark_split_sizes_follow_random_split():
    from vertebrae.scoring.probe_recipes import random_split_lengths

    for n in (4, 10, 97, 101):
        for p in (0.1, 0.2, 0.3, 0.5):
            parts = torch.utils.data.random_split(range(n), [1 - p, p])
            assert random_split_lengths(n, p) == (len(parts[0]), len(parts[1]))
    assert math.isclose(sum(random_split_lengths(7, 0.3)), 7)
