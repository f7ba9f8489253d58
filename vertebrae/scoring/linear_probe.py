"""``LinearProbeMetric``: a linear probe on frozen embeddings (a multinomial logistic regression; a ridge
regression for regression targets).

Per outer split (stratified ``folds``, default 5, or a declared ``split``; see ``labelled_common``): all rows are
first scaled by one exact power of two that brings the largest |value| into [0.5, 1) (``core.arrays.to_unit_peak``,
so any positive multiple of an embedding scores the same), the train rows are standardised (``StandardScaler``
fitted on them, applied to the test rows), then a multinomial logistic regression (scikit-learn's objective:
``C`` times the summed log-loss plus half the squared weights, intercepts unpenalised) picks ``C`` from ``Cs``
(default the 7 values 1e-3, 1e-2, ..., 1e3) by mean accuracy over ``inner_folds`` (default 3) stratified inner
folds shuffled with the run's seed (ties: the first in ``Cs``), and is refitted on all train rows with that ``C``.
Scores: ``accuracy`` and ``balanced_accuracy`` over the predicted rows; ``score`` is ``primary``. Per-sample
correctness and the chosen ``C`` per split are kept.

A declared ``split`` of train/val/test rows: the probe reports on the rows ``eval_split`` names (``test``, the
default, or ``val``). Evaluated on ``test``, a split with ``val`` rows chooses ``C`` on them: the train and val rows
are standardised together (one ``StandardScaler`` fitted on both, as on an outer split's train rows), each ``C`` is
fitted on the train rows and judged by accuracy on the val rows (one held-out fold in place of ``inner_folds``:
``LogisticRegressionCV(cv=[(train, val)])``), and the refit with the chosen ``C`` uses train and val rows.
``clip_benchmark`` searches its weight decay on them (CLIP_benchmark's ``--val_split``; not with
``val_proportion``, as there); ``mteb`` takes no part of them. Without val rows (or evaluated on ``val``) the
hyper-parameters are chosen as without a split.

``solver``: ``vertebrae`` (the default) fits with ``scoring.probe_solver``: float32 products, each inner fold's C
path from strong to weak with warm starts, a fit ending when the predictions it is judged on stop changing (or at
scikit-learn's gradient tolerance), the fits on worker threads of single-threaded BLAS; on digits, wine and a
5,000 x 64, 20-class set it chooses scikit-learn's C in every outer fold and its accuracy per fold equals
scikit-learn's (``tests/scoring/test_probe_solver.py``). ``sklearn`` is scikit-learn's ``LogisticRegressionCV``
(lbfgs, float64, ``tol`` 1e-4), the oracle. Either solver warns, naming the outer fold (and with ``vertebrae`` the
inner fold and C), when a fit reached no stopping rule within ``max_iter`` iterations.
Seeded and deterministic (with ``vertebrae``, whatever the thread count; with ``sklearn``, at a given BLAS thread
count). ``device`` (``vertebrae`` only): where the logistic fits' products run, as the retrieval kernel takes it:
``cpu`` (NumPy, the default), ``torch:cpu``, ``cuda`` / ``cuda:N`` or ``auto``; the same float32 fits, only the
summation order differs. A device torch cannot use is refused when the metric is built (``vertebrae validate``),
naming the key. The ridge probe runs on NumPy whatever the device.

``recipe``: ``vertebrae`` (the default: everything above) or a published recipe computed as its tool computes it
(``scoring.probe_recipes``), on the same outer splits: ``clip_benchmark`` (a torch linear layer trained with AdamW
on L2-normalised rows, ``lr`` 0.1, ``epochs`` 10, ``batch_size`` 64, a weight-decay search on a ``val_proportion``
of each split's train rows when set, else weight decay 0) or ``mteb`` (``LogisticRegression(max_iter=100)``
fitted on ``samples_per_label`` (8) rows per class, ``n_experiments`` (10) undersampled experiments, the scores
averaged over them). Both take classification targets only; a key another recipe uses, set away from its default,
is refused naming the recipe it belongs to. A recipe other than ``vertebrae`` enters the metric's recipe (and so its
fingerprint) with its own keys; the default adds nothing.

Regression targets: a ridge probe (``alpha = 1 / C`` over the same grid, chosen by inner K-fold mean squared error;
``vertebrae``: every alpha from one eigendecomposition per inner fold, ``sklearn``: ``RidgeCV``) on the
standardised rows; the score is R² over the predicted rows (``knn.r2``). Multi-label targets are refused naming
the target type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vertebrae.core.arrays import to_unit_peak
from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.scoring.knn import r2
from vertebrae.scoring.labelled_common import (
    BuiltinMetric, check_name, check_policy, choice, class_names, classification_scores, declares_val, eval_split_entry,
    evaluation_name, flag, fold_plan, l2_normalised, parse_eval_split, parse_split, per_sample, positive, positive_float,
    sample_paired, small_classes_entry, split_group_warnings,
)
from vertebrae.scoring.metrics import MetricResult
from vertebrae.scoring.probe_solver import logistic_probe, ridge_probe, thread_limits

DEFAULT_CS = (1e-3, 1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3)
SOLVERS = ("vertebrae", "sklearn")
RECIPES = ("vertebrae", "clip_benchmark", "mteb")
#: each published recipe's own keys and defaults (CLIP_benchmark's CLI defaults; MTEB's AbsTaskClassification)
RECIPE_KEYS: dict[str, dict[str, Any]] = {
    "vertebrae": {"Cs": DEFAULT_CS, "inner_folds": 3, "solver": "vertebrae", "device": "cpu"},
    "clip_benchmark": {"lr": 0.1, "epochs": 10, "batch_size": 64, "val_proportion": None},
    "mteb": {"n_experiments": 10, "samples_per_label": 8},
}
MAX_ITER = {"vertebrae": 1000, "clip_benchmark": 1000, "mteb": 100}


def _grid(values: Any, owner: str) -> tuple[float, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)) or not len(values):
        raise ConfigError(f"{owner}: key 'Cs' must be a non-empty list of positive numbers, got {values!r}")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not np.isfinite(v) or v <= 0:
            raise ConfigError(f"{owner}: key 'Cs' must hold finite numbers > 0, got {v!r}")
        out.append(float(v))
    return tuple(out)


class LinearProbeMetric(BuiltinMetric):
    """Logistic-regression probe accuracy (see the module docstring)."""

    TARGET_TYPES = ("classification", "regression")

    def __init__(self, Cs: Sequence[float] = DEFAULT_CS, folds: int = 5, inner_folds: int = 3, split: Any = None,
                 primary: str = "accuracy", max_iter: int | None = None, group_folds: bool = True,
                 small_classes: str = "refuse", solver: str = "vertebrae", recipe: str = "vertebrae", lr: float = 0.1,
                 epochs: int = 10, batch_size: int = 64, val_proportion: float | None = None, n_experiments: int = 10,
                 samples_per_label: int = 8, device: str = "cpu", eval_split: str = "test", *,
                 name: str = "linear_probe") -> None:
        owner = "LinearProbeMetric"
        self.name = check_name(name, owner)
        self.Cs = _grid(Cs, owner)
        self.folds = positive(folds, owner, "folds", minimum=2)
        self.inner_folds = positive(inner_folds, owner, "inner_folds", minimum=2)
        self.split = parse_split(split, owner)
        self.eval_split = parse_eval_split(eval_split, self.split, owner)
        self.primary = choice(primary, ("accuracy", "balanced_accuracy"), owner, "primary")
        self.recipe_name = choice(recipe, RECIPES, owner, "recipe")
        self.max_iter = MAX_ITER[self.recipe_name] if max_iter is None else positive(max_iter, owner, "max_iter")
        self.group_folds = flag(group_folds, owner, "group_folds")
        self.small_classes = check_policy(small_classes, owner)
        self.solver = choice(solver, SOLVERS, owner, "solver")
        self.device = self._device(device, owner)
        self.lr = positive_float(lr, owner, "lr")
        self.epochs = positive(epochs, owner, "epochs")
        self.batch_size = positive(batch_size, owner, "batch_size")
        if val_proportion is not None:
            val_proportion = positive_float(val_proportion, owner, "val_proportion")
            if val_proportion >= 1:
                raise ConfigError(f"{owner}: key 'val_proportion' must lie strictly between 0 and 1, got {val_proportion!r}")
        self.val_proportion = val_proportion
        self.n_experiments = positive(n_experiments, owner, "n_experiments")
        self.samples_per_label = positive(samples_per_label, owner, "samples_per_label")
        for other, keys in RECIPE_KEYS.items():
            changed = [key for key, default in keys.items() if other != self.recipe_name and getattr(self, key) != default]
            if changed:
                raise ConfigError(f"{owner}: key(s) {changed} belong to recipe {other!r}, not to recipe "
                                  f"{self.recipe_name!r} (recipes: {list(RECIPES)})")
        if val_proportion is not None and isinstance(self.split, dict) and self.eval_split == "test" \
                and self.split.get("val"):
            raise ConfigError(self._val_twice(owner))

    def _val_twice(self, where: str) -> str:
        return (f"{where}: recipe 'clip_benchmark': key 'split' declares val rows and key 'val_proportion' = "
                f"{self.val_proportion:g} carves validation rows from train: give one (CLIP_benchmark's --val_split "
                "and --val_proportion exclude each other)")

    def _device(self, device: Any, owner: str) -> str:
        """``device`` as given, once ``retrieval.device.resolve_device`` accepts it here (a missing GPU or torch is
        refused when the metric is built, i.e. at validate / plan time); only solver 'vertebrae' takes it."""
        from vertebrae.scoring.retrieval.device import DEVICES, resolve_device

        if device == "cpu":
            return device
        try:
            resolve_device(device)
        except ConfigError as exc:
            raise ConfigError(f"{owner}: key 'device': {exc} (devices: {list(DEVICES)})") from None
        if self.solver != "vertebrae":
            raise ConfigError(f"{owner}: key 'device' = {device!r} needs solver 'vertebrae' (solver "
                              f"{self.solver!r} runs on NumPy / scikit-learn)")
        return device

    def recipe(self) -> dict[str, Any]:
        own = {} if self.recipe_name == "vertebrae" else {
            "recipe": self.recipe_name, **{key: getattr(self, key) for key in RECIPE_KEYS[self.recipe_name]}}
        return {"type": "linear_probe", "name": self.name, "Cs": list(self.Cs), "folds": self.folds,
                "inner_folds": self.inner_folds, "split": self.split, "primary": self.primary, "max_iter": self.max_iter,
                "group_folds": self.group_folds, **small_classes_entry(self), **eval_split_entry(self),
                "solver": self.solver,
                **({} if self.device == "cpu" else {"device": self.device}), **own}

    def _inner(self, train: np.ndarray, codes: np.ndarray | None, seed: int, groups: np.ndarray | None
               ) -> list[tuple[np.ndarray, np.ndarray]]:
        """The inner (fit, held-out) folds of one outer split's train rows, as positions among them: stratified
        (plain KFold for regression), shuffled with the run's seed; with ``groups`` each group on one side."""
        from sklearn.model_selection import GroupKFold, KFold, StratifiedGroupKFold, StratifiedKFold

        rows = np.zeros(len(train))
        if codes is None:
            folds = (KFold(self.inner_folds, shuffle=True, random_state=seed) if groups is None else
                     GroupKFold(self.inner_folds, shuffle=True, random_state=seed))
            return list(folds.split(rows, groups=groups))
        folds = (StratifiedKFold(self.inner_folds, shuffle=True, random_state=seed) if groups is None else
                 StratifiedGroupKFold(self.inner_folds, shuffle=True, random_state=seed))
        return list(folds.split(rows, codes[train], groups))

    def _sklearn(self, matrix, values, splits, inner, regression: bool, seed: int, where: str):
        """(predictions, chosen C, warnings) per outer split with scikit-learn's LogisticRegressionCV / RidgeCV."""
        import warnings as _warnings

        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import LogisticRegressionCV, RidgeCV
        from sklearn.preprocessing import StandardScaler

        out = []
        for j, ((train, test), folds) in enumerate(zip(splits, inner)):
            scaler = StandardScaler().fit(matrix[train])
            x_train, x_test = scaler.transform(matrix[train]), scaler.transform(matrix[test])
            with _warnings.catch_warnings(record=True) as caught, thread_limits(None):
                _warnings.simplefilter("always", ConvergenceWarning)
                _warnings.simplefilter("ignore", FutureWarning)  # scikit-learn's l1_ratios / legacy-attribute notices
                if regression:
                    model = RidgeCV(alphas=[1.0 / c for c in self.Cs], cv=folds,
                                    scoring="neg_mean_squared_error").fit(x_train, values[train])
                    predicted, c = model.predict(x_test).reshape(len(test), -1), 1.0 / float(model.alpha_)
                else:
                    model = LogisticRegressionCV(Cs=list(self.Cs), cv=folds, scoring="accuracy",
                                                 max_iter=self.max_iter, random_state=seed).fit(x_train, values[train])
                    predicted, c = model.predict(x_test), float(np.ravel(model.C_)[0])
            warned = sum(issubclass(w.category, ConvergenceWarning) for w in caught)
            out.append((predicted, c, [f"{where}: {self._fold_name(j, splits)}: the solver did not converge within "
                                       f"max_iter = {self.max_iter} in {warned} fit(s)"] if warned else []))
        return out

    def _vertebrae(self, matrix, values, splits, inner, regression: bool, where: str):
        """(predictions, chosen C, warnings) per outer split with ``scoring.probe_solver``."""
        if regression:
            fits = ridge_probe(matrix, values, splits, inner, [1.0 / c for c in self.Cs])
            return [(predicted, 1.0 / alpha, []) for predicted, alpha in fits]
        out = []
        from vertebrae.scoring.retrieval.device import resolve_device

        device = resolve_device(self.device)  # "auto": a GPU where the job runs, if torch sees one
        for j, path in enumerate(logistic_probe(matrix, values, splits, inner, self.Cs, max_iter=self.max_iter,
                                                device=device)):
            warned = [f"{where}: {self._fold_name(j, splits)}, "
                      + (f"inner fold {f + 1}" if f != "refit" else "the refit") + f", C = {c:g}: the fit did not "
                      f"reach its stopping rule (predictions stable, or the gradient tolerance) within max_iter = "
                      f"{self.max_iter}" for f, c in path.unfinished]
            out.append((path.predicted, path.chosen, warned))
        return out

    @staticmethod
    def _fold_name(j: int, splits: Sequence[Any]) -> str:
        return "the declared split" if len(splits) == 1 else f"outer fold {j + 1} of {len(splits)}"

    def _plan(self, targets: Any, keys: Sequence[str], where: str, seed: int, groups: Any = None):
        if self.recipe_name != "vertebrae":
            return self._recipe_plan(targets, keys, where, seed, groups)
        with_val = declares_val(self)
        needed = (self.folds, f"key 'folds' = {self.folds}") if self.split is None else \
            (1, "a declared split") if with_val else (self.inner_folds, f"key 'inner_folds' = {self.inner_folds}")
        plan = fold_plan(self, targets, keys, where, seed, groups, needed, uses_val=True)
        codes, splits, grouped, notes = plan
        if plan.val is not None:  # C is chosen on the val rows, not by inner folds
            return plan
        for train, _ in splits if codes is not None else ():
            counts = np.bincount(codes[train], minlength=len(targets.catalog))
            small = np.flatnonzero((counts > 0) & (counts < self.inner_folds))
            if small.size:
                raise ValidationError(f"{where}: key 'inner_folds' = {self.inner_folds}: classes "
                                      f"{class_names(targets, small)} have fewer train rows than inner folds")
        if codes is None and min(len(train) for train, _ in splits) < self.inner_folds:
            raise ValidationError(f"{where}: key 'inner_folds' = {self.inner_folds} exceeds the train rows")
        if grouped is not None and self.split is None:
            fewest = min(np.unique(grouped[train]).size for train, _ in splits)
            if fewest < self.inner_folds:
                raise ValidationError(f"{where}: key 'inner_folds' = {self.inner_folds} exceeds the {fewest} "
                                      "independence groups of a fold's train rows")
        return plan

    def _recipe_plan(self, targets: Any, keys: Sequence[str], where: str, seed: int, groups: Any = None):
        """The outer splits of a published recipe: classification only; with ``val_proportion`` every split's train
        rows must leave both a fit part and a validation part."""
        if targets.target_type != "classification":
            raise ValidationError(f"{where}: recipe {self.recipe_name!r} is defined for classification targets only "
                                  f"(target type {targets.target_type!r}); recipe 'vertebrae' also takes regression")
        needed = (self.folds, f"key 'folds' = {self.folds}") if self.split is None else (1, "a declared split")
        plan = fold_plan(self, targets, keys, where, seed, groups, needed,
                         uses_val=self.recipe_name == "clip_benchmark")
        codes, splits, grouped, notes = plan
        if plan.val is not None and self.val_proportion is not None:
            raise ValidationError(self._val_twice(where))
        if self.recipe_name == "clip_benchmark" and self.val_proportion is not None:
            from vertebrae.scoring.probe_recipes import random_split_lengths

            for j, (train, _) in enumerate(splits):
                n_fit, n_val = random_split_lengths(len(train), self.val_proportion)
                if not n_fit or not n_val:
                    part = "validation" if not n_val else "fit"
                    raise ValidationError(f"{where}: recipe 'clip_benchmark': key 'val_proportion' = "
                                          f"{self.val_proportion:g} leaves no {part} rows among the {len(train)} train "
                                          f"rows of {self._fold_name(j, splits)}: its weight-decay search needs both")
        return plan

    def _published(self, matrix, codes, splits, keys, seed: int, where: str, catalog=(), val=None):
        """(predictions per experiment, each a list over splits; diagnostics; warnings) of a published recipe."""
        from vertebrae.scoring.probe_recipes import clip_benchmark_probe, mteb_probe

        if self.recipe_name == "clip_benchmark":
            unit = l2_normalised(matrix, keys, where)
            fits = [clip_benchmark_probe(unit, codes, train, test, lr=self.lr, epochs=self.epochs,
                                         batch_size=self.batch_size, val_proportion=self.val_proportion, seed=seed,
                                         n_classes=len(catalog), val=val) for train, test in splits]
            top5 = {} if any(f[2] is None for f in fits) else {"_top5": np.concatenate([f[2] for f in fits])}
            return [[f[0] for f in fits]], {"weight_decay": [f[1] for f in fits], **top5}, []
        fits = [mteb_probe(matrix, codes, train, test, n_experiments=self.n_experiments,
                           samples_per_label=self.samples_per_label, max_iter=self.max_iter, seed=seed)
                for train, test in splits]
        warnings = [f"{where}: recipe 'mteb': {self._fold_name(j, splits)}: {f[1]} of {self.n_experiments} fits stopped "
                    f"at max_iter = {self.max_iter} before converging (as MTEB's do)" for j, f in enumerate(fits) if f[1]]
        return [[f[0][e] for f in fits] for e in range(self.n_experiments)], {}, warnings

    def _compute_published(self, matrix, targets, keys, where, seed, groups, plan) -> MetricResult:
        (codes, splits, grouped, notes), val = plan, plan.val
        experiments, extra, warned = self._published(matrix, codes, splits, keys, seed, where, targets.catalog, val)
        test = np.concatenate([t for _, t in splits])
        true = codes[test]
        runs = [np.concatenate(e) for e in experiments]
        per_run = [classification_scores(true, p) for p in runs]
        scores = {k: float(np.mean([r[k] for r in per_run])) for k in per_run[0]}
        from sklearn.metrics import f1_score

        scores["f1_macro"] = float(np.mean([f1_score(true, p, average="macro") for p in runs]))
        top5 = extra.pop("_top5", None)
        if top5 is not None:  # clip_benchmark's acc5, over every predicted row
            scores["top5_accuracy"] = float(np.mean(top5))
        samples = per_sample(keys, test, true, runs[0])
        if len(runs) > 1:  # a row's correctness: its share of correct experiments, so the mean is the score
            order = np.argsort(test, kind="stable")
            samples["correct"] = np.mean([(p == true)[order] for p in runs], axis=0).tolist()
        diagnostics = {**scores, **extra, "per_sample": samples, "paired": sample_paired(self.primary),
                       "statistic": self.primary}
        if len(runs) > 1:
            diagnostics["per_experiment"] = per_run
        warnings = notes + warned + split_group_warnings(self.split, *splits[0], groups, where, grouped)
        metadata = {**self.recipe(), "n_rows": len(keys), "n_evaluated": int(test.size), "seed": int(seed),
                    "target_type": targets.target_type, "evaluation": evaluation_name(self),
                    **({} if val is None else {"n_validation": int(val.size)})}
        return MetricResult(self.name, scores[self.primary], True, diagnostics, warnings, metadata)

    def compute(self, embeddings: Any, targets: Any, *, row_ids: Sequence[str] | None,
                groups: Sequence[Any] | None = None, seed: int = 0, plan: Any = None) -> MetricResult:
        matrix, keys, where, plan = self._planned(embeddings, targets, row_ids, seed, groups, plan)
        if self.recipe_name != "vertebrae":
            return self._compute_published(matrix, targets, keys, where, seed, groups, plan)
        (codes, splits, grouped, notes), val = plan, plan.val
        matrix = to_unit_peak(matrix)  # one exact power of two for all rows: standardisation neither over- nor underflows
        regression = targets.target_type == "regression"
        values = np.asarray(targets.values, dtype=np.float64).reshape(targets.n_rows, -1) if regression else codes
        if val is not None:  # a declared val part: the one held-out fold choosing C; the refit on train and val
            (train, test), = splits
            both = np.union1d(train, val)
            splits = [(both, test)]
            inner = [[(np.flatnonzero(np.isin(both, train)), np.flatnonzero(np.isin(both, val)))]]
        else:
            inner = [self._inner(train, codes, seed, None if grouped is None or self.split else grouped[train])
                     for train, _ in splits]
        fit = self._sklearn(matrix, values, splits, inner, regression, seed, where) if self.solver == "sklearn" \
            else self._vertebrae(matrix, values, splits, inner, regression, where)
        tests, outputs, chosen = [test for _, test in splits], [f[0] for f in fit], [f[1] for f in fit]
        test = np.concatenate(tests)
        predicted = np.concatenate(outputs)
        warnings = notes + [w for f in fit for w in f[2]]
        warnings += split_group_warnings(self.split, *splits[0], groups, where, grouped)
        metadata = {**self.recipe(), "n_rows": len(keys), "n_evaluated": int(test.size), "seed": int(seed),
                    "target_type": targets.target_type, "evaluation": evaluation_name(self),
                    **({} if val is None else {"n_validation": int(val.size)})}
        if regression:
            score = r2(values[test], predicted)
            return MetricResult(self.name, score, True, {"r2": score, "chosen_C": chosen}, warnings, metadata)
        scores = classification_scores(codes[test], predicted)
        diagnostics = {**scores, "chosen_C": chosen, "per_sample": per_sample(keys, test, codes[test], predicted),
                       "paired": sample_paired(self.primary), "statistic": self.primary}
        return MetricResult(self.name, scores[self.primary], True, diagnostics, warnings, metadata)


__all__ = ["DEFAULT_CS", "LinearProbeMetric", "RECIPES", "RECIPE_KEYS", "SOLVERS"]
