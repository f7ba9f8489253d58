"""A declared train / val / test split (issue 49): the kNN on DINO's train/val split against a hand NumPy vote, the
probe choosing C on the val rows against a hand scikit-learn grid search, the refusals that name the key, the value
and the class (at check time, before any embedding), the schema entry, and the docs' snippet as written.
(CLIP_benchmark's weight-decay search on declared val rows: tests/scoring/test_probe_recipes.py.)"""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from jsonschema import Draft202012Validator
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from docs_support import block
from vertebrae import KNNMetric, LinearProbeMetric
from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.data.targets import classification_targets
from vertebrae.scoring.clustering import ClusteringMetric
from vertebrae.scoring.few_shot import FewShotMetric
from vertebrae.scoring.metric_registry import metric_from_config
from workflow_support import REPO

SEED = 3


@pytest.fixture(scope="module")
def data():
    """Three classes; rows marked train / val / test in turn. Each test row copies a val row under another class, so
    a kNN on DINO's train/val split that took test rows as neighbours would vote them in at similarity 1."""
    rng = np.random.default_rng(7)
    n = 90
    y = np.arange(n) % 3
    x = rng.normal(size=(3, 12))[y] * 0.7 + rng.normal(size=(n, 12))
    split = np.array(["train", "train", "val", "test"] * n)[:n]
    val, test = np.flatnonzero(split == "val"), np.flatnonzero(split == "test")
    x_test = x[val[:len(test)]]
    y[test[:len(x_test)]] = (y[val[:len(x_test)]] + 1) % 3
    x[test[:len(x_test)]] = x_test
    return x, y, split


def _dino_knn(x, y, train, evaluated, k=20, t=0.07):
    """DINO's ``knn_classifier`` written out: cosine similarities to the train rows, the top k, one-hot votes weighted
    by exp(s / T), the class of the largest total."""
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    sims = unit[evaluated] @ unit[train].T
    top = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    votes = np.zeros((len(evaluated), y.max() + 1))
    for row, (cols, s) in enumerate(zip(top, np.take_along_axis(sims, top, axis=1))):
        np.add.at(votes[row], y[train][cols], np.exp(s / t))
    return votes.argmax(axis=1)


def test_dino_knn_on_a_declared_train_val_split_equals_a_hand_vote(data):
    x, y, split = data
    train, val = np.flatnonzero(split == "train"), np.flatnonzero(split == "val")
    metric = KNNMetric(k=20, weighting="temperature", temperature=0.07, split=split.tolist(), eval_split="val")
    result = metric.compute(x, classification_targets(y), row_ids=None, seed=SEED)
    expected = _dino_knn(x, y, train, val)
    assert result.diagnostics["per_sample"]["ids"] == [f"@int:{i}" for i in val]  # the val rows, and only them
    assert result.diagnostics["per_sample"]["predicted"] == expected.tolist()
    assert result.score == float((expected == y[val]).mean()) > 0.5
    assert result.metadata["eval_split"] == "val" and result.metadata["evaluation"] == "split (val)"
    # DINO's own layout: {train, val} by row id, no test part
    by_id = KNNMetric(k=20, weighting="temperature", split={"train": train.tolist(), "val": val.tolist()},
                      eval_split="val").compute(x, classification_targets(y), row_ids=None, seed=SEED)
    assert by_id.diagnostics["per_sample"] == result.diagnostics["per_sample"]


def test_knn_on_test_leaves_the_val_rows_out(data):
    """The kNN chooses nothing on val: evaluated on test, its val rows are neither neighbours nor predicted."""
    x, y, split = data
    train, test = np.flatnonzero(split == "train"), np.flatnonzero(split == "test")
    result = KNNMetric(k=5, weighting="temperature", split=split.tolist()).compute(
        x, classification_targets(y), row_ids=None, seed=SEED)
    assert result.diagnostics["per_sample"]["predicted"] == _dino_knn(x, y, train, test, k=5).tolist()
    assert "eval_split" not in result.metadata and result.metadata["evaluation"] == "split"


def test_the_probe_chooses_c_on_the_val_rows_then_refits_on_train_and_val(data):
    """``LogisticRegressionCV(cv=[(train, val)])`` by hand: train and val rows standardised together, each C fitted
    on train and judged on val (the first of the best), the chosen C refitted on train + val, tested on test."""
    x, y, split = data
    train, val, test = (np.flatnonzero(split == part) for part in ("train", "val", "test"))
    grid = (1e-3, 1e-2, 1e-1, 1.0)
    both = np.union1d(train, val)
    scaler = StandardScaler().fit(x[both])
    xs = scaler.transform(x)
    accuracy = [LogisticRegression(C=c, max_iter=1000).fit(xs[train], y[train]).score(xs[val], y[val]) for c in grid]
    best = grid[int(np.argmax(accuracy))]
    assert best != grid[0] and len(set(accuracy)) > 1  # the val rows decide something here
    expected = LogisticRegression(C=best, max_iter=1000).fit(xs[both], y[both]).predict(xs[test])
    for solver in ("sklearn", "vertebrae"):
        result = LinearProbeMetric(Cs=grid, split=split.tolist(), solver=solver).compute(
            x, classification_targets(y), row_ids=None, seed=SEED)
        assert result.diagnostics["chosen_C"] == [best], solver
        assert result.diagnostics["per_sample"]["predicted"] == expected.tolist(), solver
        assert result.metadata["n_validation"] == len(val)


def test_a_train_test_split_keeps_its_recipe_and_the_new_keys_round_trip():
    """A split without val and a metric on test add nothing to the recipe (fingerprints kept); eval_split and val
    rows round-trip through the config form."""
    old = {"train": ["a", "b"], "test": ["c"]}
    assert KNNMetric(split=old).recipe()["split"] == old and "eval_split" not in KNNMetric(split=old).recipe()
    assert "eval_split" not in LinearProbeMetric(split=["train", "test"]).recipe()
    for metric in (KNNMetric(split={"train": ["a"], "val": ["b"]}, eval_split="val"),
                   LinearProbeMetric(recipe="clip_benchmark", split=["train", "val", "test"]),
                   LinearProbeMetric(split=["train", "val", "val"], eval_split="val")):
        assert metric_from_config(metric.recipe()).recipe() == metric.recipe()
    assert KNNMetric(split={"train": ["a"], "val": ["b"]}, eval_split="val").recipe()["eval_split"] == "val"


def test_refusals_name_the_key_the_value_and_the_class(data):
    x, y, split = data
    targets = classification_targets(y)
    with pytest.raises(ConfigError, match=r"'split' holds values other than train/val/test: \['dev'\]"):
        KNNMetric(split=["train", "dev"])
    with pytest.raises(ConfigError, match=r"key 'split.val' is an empty list"):
        LinearProbeMetric(split={"train": [0], "val": [], "test": [1]})
    with pytest.raises(ConfigError, match=r"row ids \['@int:1'\] are both val and test"):
        KNNMetric(split={"train": [0], "val": [1], "test": [1]})
    with pytest.raises(ConfigError, match=r"key 'eval_split' must be one of \['test', 'val'\], got 'train'"):
        KNNMetric(split=["train", "test"], eval_split="train")
    with pytest.raises(ConfigError, match=r"key 'eval_split' = 'val' needs a declared 'split'"):
        LinearProbeMetric(eval_split="val")
    with pytest.raises(ConfigError, match=r"declares no test rows.*set eval_split: val"):
        KNNMetric(split={"train": [0], "val": [1]})
    with pytest.raises(ConfigError, match=r"declares no val rows, and key 'eval_split' = 'val'"):
        KNNMetric(split={"train": [0], "test": [1]}, eval_split="val")
    # decided by the rows: refused by check(), i.e. at plan / validate time, before any embedding
    no_val = ["train" if i % 4 else "test" for i in range(len(y))]
    with pytest.raises(ValidationError, match=r"key 'split' has no val rows, and key 'eval_split' = 'val'"):
        KNNMetric(k=3, split=no_val, eval_split="val").check(targets)
    dino = ["train" if i % 4 else "val" for i in range(len(y))]  # DINO's layout, eval_split left at test
    with pytest.raises(ValidationError, match=r"no test rows, and key 'eval_split' = 'test' reports on them \(set "
                                              r"eval_split: val to report on its val rows\)"):
        KNNMetric(k=3, split=dino).check(targets)
    lonely = ["val" if label == 2 else s for label, s in zip(y, split)]  # class 2: val rows, no train row
    for metric in (KNNMetric(k=3, split=lonely, eval_split="val"), LinearProbeMetric(split=lonely),
                   LinearProbeMetric(recipe="clip_benchmark", split=lonely)):
        with pytest.raises(ValidationError, match=r"key 'split': classes \['2'\] have val rows but no train row"):
            metric.check(targets)
    # few_shot and clustering take the split's train and test rows; a split with no test rows is refused by name
    for metric in (FewShotMetric(shots=(1,), episodes=2, split={"train": [0, 1], "val": [2]}),
                   ClusteringMetric(split={"train": [0, 1], "val": [2]})):
        with pytest.raises(ValidationError, match=r"key 'split' has no test rows, the rows it reports on"):
            metric.check(targets)


def test_the_schema_takes_eval_split_and_names_its_values():
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text(encoding="utf-8"))
    metric = schema["$defs"]["metric"] if "$defs" in schema else schema["definitions"]["metric"]
    validator = Draft202012Validator(metric)
    entry = {"type": "knn", "weighting": "temperature", "split": {"train": ["a"], "val": ["b"]}, "eval_split": "val"}
    assert not list(validator.iter_errors(entry))
    assert [e.message for e in validator.iter_errors({**entry, "eval_split": "dev"})] == \
        ["'dev' is not one of ['test', 'val']"]


def test_the_conventions_snippet_runs_as_written(capsys):
    code = block("docs/conventions.md", "A declared train / val / test split", "python")
    namespace: dict = {}
    exec(compile(code, "docs/conventions.md", "exec"), namespace)
    pixels = namespace["pixels"]
    knn, probe = pixels.metrics["knn"], pixels.metrics["linear_probe"]
    assert knn.metadata["evaluation"] == "split (val)" and knn.metadata["n_evaluated"] == 300
    assert probe.metadata["n_validation"] == 300 and probe.metadata["n_evaluated"] == 497
    assert capsys.readouterr().out.split()[0] == repr(knn.score)


def test_vertebrae_validate_takes_a_declared_split_and_names_the_metric_that_refuses_one(tmp_path, monkeypatch, capsys):
    from vertebrae.cli import main

    monkeypatch.chdir(tmp_path)
    iris = {"dataset": {"source": {"type": "sklearn", "name": "iris"}, "identity": {"kind": "content"}},
            "extractors": {"raw": {"type": "precomputed"}}}
    rows = {"train": [i for i in range(150) if i % 5 < 3], "val": [i for i in range(150) if i % 5 == 3],
            "test": [i for i in range(150) if i % 5 == 4]}
    good = [{"type": "knn", "weighting": "temperature", "split": {"train": rows["train"], "val": rows["val"]},
             "eval_split": "val"},
            {"type": "linear_probe", "recipe": "clip_benchmark", "split": rows}]
    (tmp_path / "good.yaml").write_text(yaml.safe_dump({"benchmarks": {"flowers": {**iris, "metrics": good}}}))
    assert main(["validate", "good.yaml"]) == 0
    capsys.readouterr()
    lonely = {part: [i for i in ids if i < 100] for part, ids in rows.items()}  # class 2 (rows 100-149): val only
    lonely["val"] += list(range(100, 150))
    bad = [{"type": "knn"}, {"type": "linear_probe", "split": lonely}]
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"benchmarks": {"flowers": {**iris, "metrics": bad}}}))
    assert main(["validate", "bad.yaml"]) == 2
    err = capsys.readouterr().err
    assert "benchmarks.flowers.metrics[1] ('linear_probe')" in err
    assert "key 'split': classes ['2'] have val rows but no train row" in err, err
