"""The probe's own solver (``solver: vertebrae``, ``scoring.probe_solver``) against its oracle, scikit-learn's
``LogisticRegressionCV`` / ``RidgeCV`` (``solver: sklearn``), on the same folds, grid and seed.

Oracle bounds (issue 49): on digits, wine and a synthetic 5,000 x 64, 20-class set the chosen C equals
scikit-learn's in at least 90% of the outer folds and each fold's accuracy differs by at most 0.005; the ridge
probe's R² equals RidgeCV's to 1e-6."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits, load_wine

from vertebrae import LinearProbeMetric
from vertebrae.core.errors import ConfigError
from vertebrae.data.targets import classification_targets, regression_targets
from vertebrae.scoring.metric_registry import metric_from_config
from vertebrae.scoring.probe_solver import logistic_probe

SEED = 0


def _synthetic(rows=5000, dims=64, classes=20, spread=0.35):
    rng = np.random.default_rng(SEED)
    y = np.arange(rows) % classes
    return rng.normal(size=(classes, dims))[y] * spread + rng.normal(size=(rows, dims)), y


def _per_fold(metric, x, y):
    """(chosen C per outer fold, accuracy per outer fold) of ``metric`` on ``x``, ``y``."""
    targets = classification_targets(y)
    result = metric.compute(x, targets, row_ids=None, seed=SEED)
    _, splits, _, _ = metric.check(targets, seed=SEED)
    correct = np.array(result.diagnostics["per_sample"]["correct"])  # rows in ascending order: every row once
    return result.diagnostics["chosen_C"], [float(correct[test].mean()) for _, test in splits]


@pytest.fixture(scope="module")
def oracle_runs():
    sets = {"digits": load_digits(return_X_y=True), "wine": load_wine(return_X_y=True), "synthetic": _synthetic()}
    return {name: (_per_fold(LinearProbeMetric(), x, y), _per_fold(LinearProbeMetric(solver="sklearn"), x, y))
            for name, (x, y) in sets.items()}


def test_the_solver_chooses_scikit_learns_C_and_matches_its_accuracy_per_fold(oracle_runs):
    agree = total = 0
    for name, ((ours_c, ours_acc), (their_c, their_acc)) in oracle_runs.items():
        agree += sum(a == b for a, b in zip(ours_c, their_c))
        total += len(their_c)
        assert np.max(np.abs(np.subtract(ours_acc, their_acc))) <= 0.005, (name, ours_acc, their_acc)
    assert agree >= 0.9 * total, oracle_runs


def test_two_classes_match_scikit_learns_binary_model():
    """scikit-learn fits one binary model for two classes; the multinomial model at C / 2 has its optimum."""
    x, y = load_breast_cancer(return_X_y=True)
    grid = (1e-2, 1e-1, 1.0, 10.0)
    ours = _per_fold(LinearProbeMetric(Cs=grid), x, y)
    theirs = _per_fold(LinearProbeMetric(Cs=grid, solver="sklearn"), x, y)
    assert ours[0] == theirs[0]
    assert np.max(np.abs(np.subtract(ours[1], theirs[1]))) <= 0.005


@pytest.mark.parametrize("shape", [(400, 12, 2), (60, 90, 1)], ids=["rows>cols,2 targets", "rows<cols"])
def test_ridge_r2_equals_ridgecv(shape):
    rows, dims, outputs = shape
    rng = np.random.default_rng(1)
    x = rng.normal(size=(rows, dims)) @ rng.normal(size=(dims, dims))  # correlated columns
    target = x[:, :3] @ rng.normal(size=(3, outputs)) + rng.normal(size=(rows, outputs))
    values = regression_targets(target if outputs > 1 else target[:, 0])
    ours = LinearProbeMetric().compute(x, values, row_ids=None, seed=SEED)
    theirs = LinearProbeMetric(solver="sklearn").compute(x, values, row_ids=None, seed=SEED)
    assert ours.score == pytest.approx(theirs.score, abs=1e-6)
    assert ours.diagnostics["chosen_C"] == theirs.diagnostics["chosen_C"]


def test_a_fit_that_reaches_no_stopping_rule_is_named_in_the_warnings():
    x, y = load_wine(return_X_y=True)
    result = LinearProbeMetric(Cs=(1.0, 100.0), folds=2, inner_folds=2, max_iter=2).compute(
        x, classification_targets(y), row_ids=None, seed=SEED)
    assert any("outer fold 1 of 2, inner fold 1, C = 1: the fit did not reach its stopping rule" in w
               for w in result.warnings), result.warnings
    assert any("the refit" in w and "max_iter = 2" in w for w in result.warnings)
    done = LinearProbeMetric(Cs=(1.0, 100.0), folds=2, inner_folds=2).compute(x, classification_targets(y),
                                                                              row_ids=None, seed=SEED)
    assert not done.warnings


def test_results_do_not_depend_on_the_thread_count():
    x, y = _synthetic(600, 16, 6, 0.5)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    splits = [(np.sort(order[:450]), np.sort(order[450:]))]
    inner = [[(np.arange(0, 450, 2)[:-1], np.arange(1, 450, 2)), (np.arange(1, 450, 2), np.arange(0, 450, 2))]]
    one, two = (logistic_probe(x, y, splits, inner, (0.01, 1.0), threads=t)[0] for t in (1, 2))
    assert np.array_equal(one.predicted, two.predicted) and one.chosen == two.chosen
    assert np.array_equal(one.scores, two.scores) and one.iterations == two.iterations


def test_without_a_gradient_tolerance_the_predictions_end_every_fit():
    """gtol 0 is never met: each fit ends when its judged rows' predictions stop moving (at most 0.2% of them
    changed between checks 5 iterations apart, 3 checks in a row), long before max_iter, with the predictions the
    gradient tolerance gives to within that share."""
    x, y = _synthetic(1500, 32, 5, 0.3)
    order = np.random.default_rng(0).permutation(len(y))
    splits = [(np.sort(order[:1200]), np.sort(order[1200:]))]
    inner = [[(np.arange(1200)[np.arange(1200) % 3 != f], np.arange(1200)[np.arange(1200) % 3 == f]) for f in range(3)]]
    ruled = logistic_probe(x, y, splits, inner, (0.01, 1.0, 100.0), gtol=0.0, threads=1)[0]
    assert not ruled.unfinished and max(max(its) for its in ruled.iterations) < 200, ruled.iterations
    tolerant = logistic_probe(x, y, splits, inner, (0.01, 1.0, 100.0), threads=1)[0]
    assert ruled.chosen == tolerant.chosen
    assert np.mean(ruled.predicted != tolerant.predicted) <= 0.01


def test_solver_is_a_config_key_in_the_recipe():
    assert LinearProbeMetric().recipe()["solver"] == "vertebrae"
    metric = metric_from_config({"type": "linear_probe", "solver": "sklearn"})
    assert metric.solver == "sklearn" and metric_from_config(metric.recipe()).recipe() == metric.recipe()
    with pytest.raises(ConfigError, match=r"'solver' must be one of \['vertebrae', 'sklearn'\]"):
        LinearProbeMetric(solver="lbfgs")


def test_the_torch_device_fits_the_same_probe():
    """``device: torch:cpu`` runs the same float32 fits with torch's products: only the summation order differs, so
    the chosen C and the accuracy per fold meet the oracle bounds against NumPy's fits (here: equal)."""
    pytest.importorskip("torch")
    x, y = load_wine(return_X_y=True)
    on_numpy, on_torch = (_per_fold(LinearProbeMetric(device=device), x, y) for device in ("cpu", "torch:cpu"))
    assert on_torch[0] == on_numpy[0]
    assert np.max(np.abs(np.subtract(on_torch[1], on_numpy[1]))) <= 0.005
    assert LinearProbeMetric(device="torch:cpu").recipe()["device"] == "torch:cpu"
    assert "device" not in LinearProbeMetric().recipe()  # the default adds nothing: no fingerprint moves


def test_a_device_torch_cannot_use_is_refused_at_validate_naming_the_key(tmp_path, monkeypatch, capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is visible: device cuda is valid here")
    import yaml

    from vertebrae.cli import main

    monkeypatch.chdir(tmp_path)
    config = {"benchmarks": {"flowers": {
        "dataset": {"source": {"type": "sklearn", "name": "iris"}, "identity": {"kind": "content"}},
        "extractors": {"raw": {"type": "precomputed"}},
        "metrics": [{"type": "linear_probe", "device": "cuda"}]}}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    assert main(["validate", "c.yaml"]) == 2
    err = capsys.readouterr().err
    assert "key 'device'" in err and "device='cuda': no CUDA GPU is visible" in err, err
    with pytest.raises(ConfigError, match="key 'device' = 'torch:cpu' needs solver 'vertebrae'"):
        LinearProbeMetric(solver="sklearn", device="torch:cpu")
    with pytest.raises(ConfigError, match=r"key\(s\) \['device'\] belong to recipe 'vertebrae'"):
        LinearProbeMetric(recipe="mteb", device="torch:cpu")


def test_the_standardisation_is_standard_scalers_bit_for_bit():
    """``Standardised.fit`` is StandardScaler's arithmetic without its NaN pass: the same mean and scale, to the
    bit, constant and all-zero columns included."""
    from sklearn.preprocessing import StandardScaler

    from vertebrae.scoring.probe_solver import Standardised

    rng = np.random.default_rng(0)
    x = np.c_[rng.normal(size=(300, 6)) * 1e3 + 5, np.full(300, 0.3), np.zeros(300), load_digits().data[:300] / 16]
    train = np.sort(rng.choice(300, 220, replace=False))
    scaler, ours = StandardScaler().fit(x[train]), Standardised.fit(x, train)
    assert np.array_equal(scaler.mean_, ours.mean) and np.array_equal(scaler.scale_, ours.scale)
    assert np.array_equal(ours.rows(train)[:, :-1], scaler.transform(x[train]).astype(np.float32))


def _float64_objective(xa, y, w, k):
    """(mean loss, gradient) of the multinomial model in float64, shifted by each row's largest logit."""
    x = xa.astype(np.float64)
    z = x @ w.reshape(k, -1).T
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    total = e.sum(axis=1)
    loss = np.mean(np.log(total) - z[np.arange(len(y)), y])
    p = e / total[:, None]
    p[np.arange(len(y)), y] -= 1.0
    return loss, (p.T @ x).reshape(-1) / len(y)


@pytest.mark.parametrize("device", ["cpu", "torch:cpu"])
def test_the_loss_and_gradient_keep_their_digits_on_well_fitted_and_far_off_rows(device):
    """Each row is taken relative to its own class's logit (``log1p`` of the other classes' exp sum): rows fitted with
    margins of 17-30 still add their ``exp(-margin)`` to the loss and to their own class's gradient, which a float32
    ``log(1 + s)`` and ``1 / (1 + s) - 1`` round away; rows whose own class is far behind (``exp`` overflows
    float32) are evaluated shifted by their largest logit, without a warning. Loss and gradient equal a float64
    evaluation to float32 precision."""
    import warnings

    from vertebrae.scoring.probe_solver import _objective

    if device != "cpu":
        pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    k, d = 4, 9
    xa = np.c_[rng.normal(size=(4000, d - 1)), np.ones(4000)].astype(np.float32)
    w = rng.normal(size=(k, d)) * 6
    z = np.sort(xa.astype(np.float64) @ w.T, axis=1)
    keep = (z[:, -1] - z[:, -2] > 17) & (z[:, -1] - z[:, -2] < 30)  # every row well fitted
    xa = xa[keep][:300]
    y = np.argmax(xa.astype(np.float64) @ w.T, axis=1)
    for scale, wrong in ((1.0, 0), (4.0, 30), (1e-3, 30)):
        labels = y.copy()
        labels[:wrong] = (labels[:wrong] + 1) % k  # far off at scale 4: margins of -68 and below
        weights = (w * scale).reshape(-1)
        loss, grad = _float64_objective(xa, labels, weights, k)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ours = _objective(xa, labels, k, device).data_term(weights)
        assert ours[0] == pytest.approx(loss, rel=1e-4), (scale, wrong)
        assert np.max(np.abs(ours[1] - grad)) <= 1e-4 * np.max(np.abs(grad)), (scale, wrong)


def test_a_fit_that_ends_before_its_stopping_rule_could_fire_predicts_its_rows_once(monkeypatch):
    """Predictions are made for the stopping rule only once ``patience + 1`` checks exist: a fit ending within
    ``check_every * (patience + 1)`` iterations (here at the gradient tolerance) predicts its judged rows once, at
    its end, and its results are those of a fit that predicted at every check."""
    import vertebrae.scoring.probe_solver as solver

    calls = []
    original = solver._predict
    monkeypatch.setattr(solver, "_predict", lambda xa, w, k: calls.append(len(xa)) or original(xa, w, k))
    x, y = _synthetic(900, 16, 6, 0.5)
    order = np.random.default_rng(0).permutation(len(y))
    splits = [(np.sort(order[:700]), np.sort(order[700:]))]
    inner = [[(np.arange(700)[np.arange(700) % 2 != f], np.arange(700)[np.arange(700) % 2 == f]) for f in range(2)]]
    path = logistic_probe(x, y, splits, inner, (0.01, 1.0), threads=1)[0]
    its = [i for fold in path.iterations for i in fold]
    assert 5 <= max(its) < 20, path.iterations  # checks were due, none could end a fit
    fits = sum(1 for fold in path.iterations[:-1] for c, i in enumerate(fold) if i or c == 0) + 1
    assert len(calls) == fits, (calls, path.iterations)
    assert not path.unfinished


def test_a_task_runs_once_those_it_follows_have_returned_without_a_barrier():
    """``run_graph``: a free worker takes the first ready task, so a refit waits for its own split's inner folds
    only, not for every other task; results come back in task order and the first exception is raised."""
    import threading

    from vertebrae.scoring.probe_solver import run_graph

    follower_ran = threading.Event()
    seen = []
    tasks = [lambda: "first",
             lambda: follower_ran.wait(timeout=30),  # returns once task 2 has run on the other worker
             lambda: seen.append("follower") or follower_ran.set() or "after first"]
    assert run_graph(tasks, [[], [], [0]], threads=2) == ["first", True, "after first"]
    results = [None, None]
    assert run_graph([lambda: 2, lambda: results[0] * 10], [[], [0]], threads=2, results=results) == [2, 20]

    def fails():
        raise ValueError("a fit failed")

    with pytest.raises(ValueError, match="a fit failed"):
        run_graph([fails, lambda: 1, lambda: 2], [[], [], [0]], threads=2)
    with pytest.raises(ValueError, match=r"tasks \[1\] follow tasks that never run"):
        run_graph([lambda: 1, lambda: 2], [[], [5]], threads=2)


def test_the_path_starts_further_along_where_that_lowers_the_loss_and_follows_scikit_learn_on_few_rows(monkeypatch):
    """``_path_start``: the extrapolated start ``w + PATH_STEP (w - before)`` where its penalised loss is below
    ``w``'s, else ``w`` with its evaluation kept (the fit does not repeat it). A fold with 500 held-out rows or more
    starts a C after two fitted ones there, in fewer evaluations in all; with fewer each C starts at the previous
    C's weights, as scikit-learn's path does."""
    import vertebrae.scoring.probe_solver as solver

    x, y = _synthetic(2400, 32, 6, 0.8)
    xa = np.hstack([(x - x.mean(axis=0)) / x.std(axis=0), np.ones((len(x), 1))]).astype(np.float32)
    objective = solver._objective(xa, y, 6, "cpu")
    fits = [solver._fit(objective, objective.at_zero(), 1e-3, xa, 100, 5, 3, 1e-4)[0]]
    fits.append(solver._fit(objective, fits[0], 1e-2, xa, 100, 5, 3, 1e-4)[0])
    l2 = 1.0 / (0.1 * len(y))
    start = solver._path_start(objective, fits[0], fits[1], l2, 1e-4)
    assert np.array_equal(start, fits[1] + solver.PATH_STEP * (fits[1] - fits[0]))
    assert objective(start, l2)[0] < objective(fits[1], l2)[0]
    objective(fits[1], 100.0 / len(y))  # the last C's weights evaluated last, a wrong "before" behind them
    kept = objective.last
    assert solver._path_start(objective, fits[1] + 5.0, fits[1], l2, 1e-4) is fits[1]
    assert objective.last is kept

    fits_made, evaluations = [], [0]  # (start, end) of each fit; evaluations over the rows
    fit, data_term = solver._fit, solver._Objective.data_term

    def recorded(objective, w0, *rest):
        out = fit(objective, w0, *rest)
        fits_made.append((w0, out[0]))
        return out

    monkeypatch.setattr(solver, "_fit", recorded)
    monkeypatch.setattr(solver._Objective, "data_term",
                        lambda self, w: evaluations.__setitem__(0, evaluations[0] + 1) or data_term(self, w))
    cs = (1e-3, 1e-2, 1e-1, 1.0, 10.0)
    order = np.random.default_rng(0).permutation(len(y))
    splits = [(np.sort(order[:1800]), np.sort(order[1800:]))]
    for held, extrapolates in ((600, True), (480, False)):
        inner = [[(np.arange(held, 1800), np.arange(held))]]
        fits_made.clear()
        evaluations[0] = 0
        path = logistic_probe(x, y, splits, inner, cs, threads=1)[0]
        inner_fits = fits_made[:len(cs)]  # in path order; the refit's last
        further = [not np.array_equal(start, end) for (_, end), (start, _) in itertools.pairwise(inner_fits)]
        assert any(further) == extrapolates and not any(further[:1]), (held, further)
        with_path = evaluations[0]
        monkeypatch.setattr(solver, "PATH_STEP", 0.0)  # w + 0 (w - before) = w: every C starts at the last
        evaluations[0] = 0
        plain = logistic_probe(x, y, splits, inner, cs, threads=1)[0]
        monkeypatch.setattr(solver, "PATH_STEP", 0.8)
        assert (with_path < evaluations[0]) == extrapolates, (held, with_path, evaluations[0])
        assert plain.chosen == path.chosen


def test_a_splits_inner_paths_start_at_its_first_folds_first_fit_where_500_rows_are_held_out(monkeypatch):
    """With 500 held-out rows or more in every inner fold, the first fold's first C is fitted once from zero (a task
    of its own) and every fold's path starts there: the others' first fits from its weights, the first fold's own
    path at its second C. With fewer, each fold's path starts from zero, as scikit-learn's does."""
    import vertebrae.scoring.probe_solver as solver

    x, y = _synthetic(2400, 32, 6, 0.8)
    fits_made = []
    fit = solver._fit
    monkeypatch.setattr(solver, "_fit", lambda objective, w0, C, *rest: fits_made.append((objective.n, C, w0.copy()))
                        or fit(objective, w0, C, *rest))
    order = np.random.default_rng(0).permutation(len(y))
    cs = (1e-2, 1.0)
    for held, seeded in ((600, True), (480, False)):
        splits = [(np.sort(order[:2 * held]), np.sort(order[2 * held:]))]
        inner = [[(np.arange(held, 2 * held), np.arange(held)), (np.arange(held), np.arange(held, 2 * held))]]
        fits_made.clear()
        path = logistic_probe(x, y, splits, inner, cs, threads=1)[0]
        firsts = [w0 for n, C, w0 in fits_made if C == 1e-2 and n == held]  # the inner folds' first fits
        assert len(firsts) == 2, (held, len(firsts))
        assert not firsts[0].any()  # the first fold's first C from zero
        assert firsts[1].any() == seeded  # the second fold's: from the first fold's weights, or from zero
        assert path.iterations[0][0] > 0 and path.iterations[1][0] > 0 and not path.unfinished


def test_the_refit_starts_along_the_inner_paths_toward_its_own_rows_where_500_rows_are_held_out(monkeypatch):
    """The refit's start: the inner folds' mean weights at the chosen C, moved (500 held-out rows or more in every
    inner fold) toward the next weaker C's mean by ``log(n / n') / log(C_next / C)`` (``n``, ``n'``: the refit's rows
    and an inner fold's): its ``n`` rows weigh against the penalty as ``n'`` rows do at ``C n / n'``."""
    import vertebrae.scoring.probe_solver as solver

    x, y = _synthetic(2400, 32, 6, 0.8)
    paths, starts = [], []
    inner_path, refit = solver._inner_path, solver._refit
    monkeypatch.setattr(solver, "_inner_path", lambda *a, **k: paths.append(inner_path(*a, **k)) or paths[-1])
    monkeypatch.setattr(solver, "_refit", lambda split, w0, *rest: starts.append(w0) or refit(split, w0, *rest))
    order = np.random.default_rng(0).permutation(len(y))
    cs = (1e-3, 1e-2, 1e3)
    for held, along in ((600, True), (480, False)):
        splits = [(np.sort(order[:2 * held]), np.sort(order[2 * held:]))]
        inner = [[(np.arange(held, 2 * held), np.arange(held)), (np.arange(held), np.arange(held, 2 * held))]]
        paths.clear()
        starts.clear()
        path = logistic_probe(x, y, splits, inner, cs, threads=1)[0]
        best = cs.index(path.chosen)
        assert best < 2, path.scores  # a weaker C exists
        mean = np.mean([p[0][best] for p in paths], axis=0)
        share = np.log(2.0) / np.log(cs[best + 1] / cs[best]) if along else 0.0
        expected = mean + share * (np.mean([p[0][best + 1] for p in paths], axis=0) - mean)
        assert np.allclose(starts[0], expected, rtol=0, atol=1e-12), held
        assert along == (not np.allclose(starts[0], mean, rtol=0, atol=1e-6)), held


def test_the_next_splits_standardisation_and_first_fit_come_before_a_splits_inner_folds(monkeypatch):
    """In the task list (so on one thread, in this order) split j + 1's standardisation and first fit come before
    split j's inner folds, so that a worker freed by split j's folds finds split j + 1's ready."""
    import vertebrae.scoring.probe_solver as solver

    ran = []
    prepare, first_fit, inner_path, refit = (solver._Split.prepare, solver._first_fit, solver._inner_path,
                                             solver._refit_split)
    monkeypatch.setattr(solver._Split, "prepare", lambda self: ran.append(("prepare", len(self.train)))
                        or prepare(self))
    monkeypatch.setattr(solver, "_first_fit", lambda split, *a: ran.append(("first", len(split.train)))
                        or first_fit(split, *a))
    monkeypatch.setattr(solver, "_inner_path", lambda split, *a: ran.append(("fold", len(split.train)))
                        or inner_path(split, *a))
    monkeypatch.setattr(solver, "_refit_split", lambda split, *a: ran.append(("refit", len(split.train)))
                        or refit(split, *a))
    x, y = _synthetic(2600, 16, 4, 0.8)
    order = np.random.default_rng(0).permutation(len(y))
    splits = [(np.sort(order[:1200]), np.sort(order[1200:])), (np.sort(order[:1300]), np.sort(order[1300:]))]
    inner = [[(np.arange(n)[np.arange(n) % 2 != f], np.arange(n)[np.arange(n) % 2 == f]) for f in range(2)]
             for n in (1200, 1300)]
    logistic_probe(x, y, splits, inner, (0.01, 1.0), threads=1)
    assert ran == [("prepare", 1200), ("first", 1200), ("prepare", 1300), ("first", 1300), ("fold", 1200),
                   ("fold", 1200), ("refit", 1200), ("fold", 1300), ("fold", 1300), ("refit", 1300)], ran
