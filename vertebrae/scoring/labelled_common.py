"""What the built-in labelled metrics (``knn``, ``linear_probe``, ``few_shot``, ``clustering``) share.

- **Classes.** Single-label targets become class codes in catalog order (``class_codes``); a metric that is not
  defined for the target type is refused naming it (``require_target_type``).
- **Evaluation rows.** Either stratified folds (``StratifiedKFold(folds, shuffle=True, random_state=seed)`` on
  the class codes: every row is a test row exactly once) or a declared split: ``split`` is a sequence of
  ``"train"``/``"val"``/``"test"`` aligned with the rows, or a mapping ``{"train": [row ids], "val": [row ids],
  "test": [row ids]}`` (``val`` optional; rows in none are left out). The metric's ``eval_split`` (``test``, the
  default, or ``val``: DINO's "train/val") names the rows it reports on; ``evaluation_splits`` returns the (train,
  evaluated) index pairs. The ``val`` rows of a split evaluated on ``test`` are the rows a metric that chooses a
  hyper-parameter chooses it on (``fold_plan(..., uses_val=True)``: the linear probe's ``C``, CLIP_benchmark's
  weight decay); a metric that chooses nothing leaves them out.
- **Refusals** (``ValidationError``/``ConfigError`` naming the key): split values other than train/val/test, an
  unknown or repeated row id, a row in two parts, an empty ``val`` list, an evaluated part without rows, classes
  with fewer rows than folds (named), an evaluated or val class absent from train.
- **Paired units.** A metric's diagnostics carry ``"paired"``: ``{"unit", "source", "column", "strata"}`` naming
  which per-unit array of the diagnostics (``diagnostics[source][column]``, ids ``diagnostics[source]["ids"]``)
  reproduces the score as a mean (``strata``: a column of stratum labels, or None).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.arrays import rows_to_unit_peak
from vertebrae.core.labels import describe_key, semantic_key
from vertebrae.scoring.class_sizes import apply_policy, check_policy
from vertebrae.scoring.metrics import Metric, _check_name, _check_targets, _n_rows, _row_keys

SPLIT_VALUES = ("train", "val", "test")
#: the parts of a declared split a metric may report on (its ``eval_split``)
EVAL_SPLITS = ("test", "val")


def positive(value: Any, owner: str, key: str, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"{owner}: key {key!r} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def positive_float(value: Any, owner: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(value)) or value <= 0:
        raise ConfigError(f"{owner}: key {key!r} must be a finite number > 0, got {value!r}")
    return float(value)


def flag(value: Any, owner: str, key: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ConfigError(f"{owner}: key {key!r} must be true or false, got {value!r}")
    return bool(value)


def choice(value: Any, options: Sequence[str], owner: str, key: str) -> str:
    if value not in options:
        raise ConfigError(f"{owner}: key {key!r} must be one of {list(options)}, got {value!r}")
    return str(value)


def parse_split(split: Any, owner: str) -> list[str] | dict[str, list[str]] | None:
    """The JSON form of a declared split (see the module docstring); ConfigError naming ``split``. A mapping keeps
    ``val`` only where it is given (a train/test split keeps its JSON form, and so its fingerprint)."""
    if split is None:
        return None
    if isinstance(split, Mapping):
        unknown = sorted(str(k) for k in split if k not in SPLIT_VALUES)
        if "path" in split:
            raise ConfigError(f"{owner}: key 'split' names a file ({split['path']!r}): a config's split file is read "
                              "when the workflow is planned; in Python, read it with vertebrae.read_split(path)")
        if unknown:
            raise ConfigError(f"{owner}: key 'split' may hold only {list(SPLIT_VALUES)}, got {unknown}")
        out = {}
        for part in SPLIT_VALUES:
            if part == "val" and part not in split:
                continue
            ids = split.get(part, [])
            if isinstance(ids, (str, bytes)) or not isinstance(ids, (Sequence, np.ndarray)):
                raise ConfigError(f"{owner}: key 'split.{part}' must be a list of row ids, got {type(ids).__name__}")
            out[part] = [i if isinstance(i, str) else semantic_key(i.item() if isinstance(i, np.generic) else i)
                         for i in (ids.tolist() if isinstance(ids, np.ndarray) else ids)]
        for a, b in (("train", "test"), ("train", "val"), ("val", "test")):
            both = sorted(set(out.get(a, ())) & set(out.get(b, ())))
            if both:
                raise ConfigError(f"{owner}: key 'split': row ids {both[:10]} are both {a} and {b}")
        if "val" in out and not out["val"]:
            raise ConfigError(f"{owner}: key 'split.val' is an empty list: give the validation rows' ids, or leave "
                              "the key out")
        if not out["train"] or not (out["test"] or out.get("val")):
            raise ConfigError(f"{owner}: key 'split' needs train rows and test (or val) rows")
        return out
    if isinstance(split, (str, bytes)) or not isinstance(split, (Sequence, np.ndarray)):
        raise ConfigError(f"{owner}: key 'split' must be a list of train/val/test per row or a mapping "
                          f"{{train: [row ids], val: [row ids], test: [row ids]}}, got {type(split).__name__}")
    values = split.tolist() if isinstance(split, np.ndarray) else list(split)
    bad = sorted({str(v) for v in values if v not in SPLIT_VALUES})
    if bad:
        raise ConfigError(f"{owner}: key 'split' holds values other than train/val/test: {bad[:10]}")
    return [str(v) for v in values]


def parse_eval_split(value: Any, split: list[str] | dict[str, list[str]] | None, owner: str) -> str:
    """The part of a declared split a metric reports on (``EVAL_SPLITS``); ConfigError naming ``eval_split``: a
    value other than ``test`` without a declared split, or a mapping that declares no rows of that part."""
    value = choice(value, EVAL_SPLITS, owner, "eval_split")
    if split is None and value != "test":
        raise ConfigError(f"{owner}: key 'eval_split' = {value!r} needs a declared 'split' (without one, stratified "
                          "folds test every row)")
    if isinstance(split, dict) and not split.get(value):
        other = "val" if value == "test" else "test"
        hint = f" (set eval_split: {other} to report on its {other} rows)" if split.get(other) else ""
        raise ConfigError(f"{owner}: key 'split' declares no {value} rows, and key 'eval_split' = {value!r} "
                          f"reports on them{hint}")
    return value


def class_codes(targets: Any, where: str) -> np.ndarray:
    """Single-label class codes in catalog order."""
    catalog = targets.catalog
    return np.fromiter((catalog.index(k) for k in targets.values), dtype=np.int64, count=targets.n_rows)


def require_target_type(targets: Any, allowed: Sequence[str], where: str) -> None:
    if targets.target_type not in allowed:
        raise ValidationError(f"{where} is not defined for {targets.target_type} targets (target type "
                              f"{targets.target_type!r}); it accepts {list(allowed)}")


def class_names(targets: Any, codes: Sequence[int]) -> list[str]:
    catalog = targets.catalog
    return [catalog.display(catalog.keys[int(c)]) for c in codes]


def split_parts(split: list[str] | dict[str, list[str]], keys: Sequence[str], where: str) -> dict[str, np.ndarray]:
    """Each part of a declared split (``SPLIT_VALUES``; a part not declared is empty), as row indices in ascending
    order."""
    n = len(keys)
    if isinstance(split, list):
        if len(split) != n:
            raise ValidationError(f"{where}: key 'split' has {len(split)} values for {n} rows")
        labels = np.asarray(split, dtype=object)
        return {part: np.flatnonzero(labels == part) for part in SPLIT_VALUES}
    index = {key: i for i, key in enumerate(keys)}
    out = {}
    for part in SPLIT_VALUES:
        ids = split.get(part, [])
        missing = [k for k in ids if k not in index]
        if missing:
            raise ValidationError(f"{where}: key 'split.{part}' names row ids absent from the dataset: {missing[:10]}")
        out[part] = np.sort(np.fromiter((index[k] for k in ids), dtype=np.int64, count=len(ids)))
    return out


def split_positions(split: list[str] | dict[str, list[str]], keys: Sequence[str], where: str,
                    evaluate: str = "test", *, eval_key: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(train rows, ``evaluate`` rows) of a declared split, as row indices in ascending order; a split without
    either is refused (``eval_key``: the message names the metric's ``eval_split``)."""
    parts = split_parts(split, keys, where)
    if not parts["train"].size:
        raise ValidationError(f"{where}: key 'split' has no train rows")
    if not parts[evaluate].size:
        named = f", and key 'eval_split' = {evaluate!r} reports on them" if eval_key else ", the rows it reports on"
        other = "val" if evaluate == "test" else "test"
        hint = f" (set eval_split: {other} to report on its {other} rows)" if eval_key and parts[other].size else ""
        raise ValidationError(f"{where}: key 'split' has no {evaluate} rows{named}{hint}")
    return parts["train"], parts[evaluate]


def group_codes(groups: Sequence[Any] | None, n: int, where: str) -> np.ndarray | None:
    """Independence groups (one str/int per row, the dataset's ``groups``) as codes 0..G-1 in order of first row."""
    if groups is None:
        return None
    values = groups.tolist() if isinstance(groups, np.ndarray) else list(groups)
    if len(values) != n:
        raise ValidationError(f"{where}: {len(values)} groups for {n} rows")
    index: dict[tuple[str, str], int] = {}
    return np.fromiter((index.setdefault((type(v).__name__, str(v)), len(index)) for v in values), dtype=np.int64,
                       count=n)


def split_group_warnings(split: Any, train: np.ndarray, test: np.ndarray, groups: Sequence[Any] | None,
                         where: str, grouped: np.ndarray | None = None) -> list[str]:
    """A declared split is taken as given; with the dataset's independence groups, a warning when some group has
    rows on both sides (its test rows are then not independent of the train rows), naming up to five groups.
    ``grouped``: the groups' ``group_codes`` when the caller holds them."""
    if split is None or groups is None:
        return []
    if grouped is None:
        grouped = group_codes(groups, len(groups), where)
    shared = np.intersect1d(grouped[train], grouped[test])
    if not shared.size:
        return []
    codes, first = np.unique(grouped, return_index=True)
    names = [groups[int(i)] for i in first[np.searchsorted(codes, shared[:5])]]
    names = [n.item() if isinstance(n, np.generic) else n for n in names]
    return [f"{where}: key 'split': {shared.size} of the {int(grouped.max()) + 1} independence groups have rows in "
            f"both train and test (e.g. {names}): those test rows are not independent of the train rows"]


def small_class_rows(metric: Any, codes: np.ndarray, rows: np.ndarray, targets: Any, needed: int, what: str,
                     where: str) -> tuple[np.ndarray, list[str]]:
    """``(rows of ``rows`` kept, warnings)``: classes with fewer than ``needed`` of ``rows`` refused by name, or with
    the metric's ``small_classes: exclude``, their rows left out (``vertebrae.scoring.class_sizes``); ``what``
    names the key that sets the need."""
    catalog = targets.catalog
    counts = np.bincount(codes[rows], minlength=len(catalog))
    small, warnings = apply_policy(metric.small_classes, {key: int(n) for key, n in zip(catalog.keys, counts)}, needed,
                                   catalog.display, what=f"{where}: {what} needs at least {needed}",
                                   key="small_classes")
    if not small:
        return rows, []
    dropped = np.isin(codes[rows], [catalog.keys.index(key) for key in small])
    return rows[~dropped], warnings


def declares_val(metric: Any) -> bool:
    """Does the metric's declared split, evaluated on ``test``, hold val rows (to choose a hyper-parameter on)?"""
    if metric.split is None or getattr(metric, "eval_split", "test") != "test":
        return False
    if isinstance(metric.split, dict):
        return bool(metric.split.get("val"))
    return "val" in metric.split


def eval_split_entry(metric: Any) -> dict[str, str]:
    """A metric's ``eval_split`` for its recipe, only when set away from ``test``: a recipe without it keeps its
    fingerprint."""
    return {"eval_split": metric.eval_split} if metric.eval_split != "test" else {}


def evaluation_name(metric: Any) -> str:
    """How the metric's rows were evaluated, for its metadata: ``"split"`` (train -> test), ``"split (val)"``
    (train -> val), or ``"N folds"``."""
    if metric.split is None:
        return f"{metric.folds} folds"
    return "split" if metric.eval_split == "test" else f"split ({metric.eval_split})"


def small_classes_entry(metric: Any) -> dict[str, str]:
    """A metric's ``small_classes`` for its recipe, only when set: a recipe without it keeps its fingerprint."""
    return {"small_classes": metric.small_classes} if metric.small_classes != "refuse" else {}


class FoldPlan(tuple):
    """``fold_plan``'s answer: unpacks as (class codes, splits, group codes, warnings), with ``val``, the declared
    validation rows (None without them), beside."""

    val: np.ndarray | None

    def __new__(cls, codes: Any, splits: Any, grouped: Any, warnings: Any, val: np.ndarray | None = None) -> FoldPlan:
        plan = super().__new__(cls, (codes, splits, grouped, warnings))
        plan.val = val
        return plan

    def __getnewargs__(self) -> tuple:
        return (*self, self.val)


def fold_plan(metric: Any, targets: Any, keys: Sequence[str], where: str, seed: int, groups: Sequence[Any] | None,
              needed: tuple[int, str] | None = None, *, uses_val: bool = False) -> FoldPlan:
    """(class codes, None for regression; ``evaluation_splits``; group codes, None unless ``group_folds``;
    warnings), and as ``.val`` the declared validation rows, of a metric declaring ``folds``, ``split``,
    ``eval_split``, ``group_folds`` and ``small_classes``. ``needed``: ``(rows a class needs, the key that sets it)``; classes with
    fewer rows (all rows, or a declared split's train and evaluated rows, and its val rows with ``uses_val``) are
    refused or, excluded, in no split (``small_class_rows``). The validation rows are None unless ``uses_val``
    and the split, evaluated on ``test``, declares ``val`` rows; a class they hold that no train row has is
    refused."""
    codes = None if targets.target_type == "regression" else class_codes(targets, where)
    grouped = group_codes(groups, len(keys), where) if metric.group_folds else None
    evaluate = getattr(metric, "eval_split", "test")
    parts = None if metric.split is None else split_parts(metric.split, keys, where)
    val = parts["val"] if parts is not None and uses_val and evaluate != "val" and parts["val"].size else None
    rows, warnings = np.arange(len(keys)), []
    if codes is not None and needed is not None:
        if parts is not None:
            rows = np.union1d(parts["train"], parts[evaluate])
            rows = rows if val is None else np.union1d(rows, val)
        rows, warnings = small_class_rows(metric, codes, rows, targets, needed[0], needed[1], where)
    if rows.size == len(keys):
        splits = evaluation_splits(codes, keys, split=metric.split, folds=metric.folds, seed=seed, targets=targets,
                                   where=where, groups=grouped, evaluate=evaluate)
    elif metric.split is not None:
        kept = np.zeros(len(keys), dtype=bool)
        kept[rows] = True
        splits = [(train[kept[train]], test[kept[test]]) for train, test in evaluation_splits(
            codes, keys, split=metric.split, folds=metric.folds, seed=seed, targets=targets, where=where,
            evaluate=evaluate)]
        if val is not None:
            val = val[kept[val]]
            if not val.size:
                raise ValidationError(f"{where}: key 'split': no val rows are left once key 'small_classes' = "
                                      "'exclude' leaves out the classes it names")
    else:  # folds over the kept rows only, as row indices of the whole
        splits = [(rows[train], rows[test]) for train, test in evaluation_splits(
            codes[rows], [keys[i] for i in rows], split=None, folds=metric.folds, seed=seed, targets=targets,
            where=where, groups=None if grouped is None else grouped[rows])]
    if val is not None and codes is not None:
        check_split_classes(codes, splits[0][0], val, targets, where, "val")
    return FoldPlan(codes, splits, grouped, warnings, val)


def check_split_classes(codes: np.ndarray, train: np.ndarray, test: np.ndarray, targets: Any, where: str,
                        part: str = "test") -> None:
    """A declared split whose ``part`` rows (test, val) hold a class no train row has is refused, naming the
    classes."""
    absent = np.setdiff1d(np.unique(codes[test]), np.unique(codes[train]))
    if absent.size:
        raise ValidationError(f"{where}: key 'split': classes {class_names(targets, absent)} have {part} rows but no "
                              "train row")


def evaluation_splits(codes: np.ndarray | None, keys: Sequence[str], *, split: Any, folds: int, seed: int,
                      targets: Any, where: str, groups: np.ndarray | None = None,
                      evaluate: str = "test") -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) row indices: the declared split (its ``evaluate`` rows tested), or stratified folds (plain
    KFold without classes); with ``groups`` (``group_codes``) the folds keep each group on one side
    (StratifiedGroupKFold, GroupKFold)."""
    from sklearn.model_selection import GroupKFold, KFold, StratifiedGroupKFold, StratifiedKFold

    if split is not None:
        train, test = split_positions(split, keys, where, evaluate, eval_key=True)
        if codes is not None:
            check_split_classes(codes, train, test, targets, where, evaluate)
        return [(train, test)]
    n = len(keys)
    n_groups = None if groups is None else int(groups.max()) + 1 if groups.size else 0
    if n_groups is not None and n_groups < folds:
        raise ValidationError(f"{where}: key 'folds' = {folds} exceeds the {n_groups} independence groups (the "
                              "dataset's groups: each stays on one side of every fold; or set group_folds: false)")
    if codes is None:
        if n < folds:
            raise ValidationError(f"{where}: key 'folds' = {folds} exceeds the {n} rows")
        if groups is not None:
            return list(GroupKFold(folds, shuffle=True, random_state=seed).split(np.zeros(n), groups=groups))
        return list(KFold(folds, shuffle=True, random_state=seed).split(np.zeros(n)))
    counts = np.bincount(codes, minlength=len(targets.catalog))
    small = np.flatnonzero((counts > 0) & (counts < folds))
    if small.size:
        raise ValidationError(f"{where}: key 'folds' = {folds}: classes {class_names(targets, small)} have fewer rows "
                              f"({sorted(set(counts[small].tolist()))}) than folds")
    if groups is not None:
        return list(StratifiedGroupKFold(folds, shuffle=True, random_state=seed).split(np.zeros(n), codes, groups))
    return list(StratifiedKFold(folds, shuffle=True, random_state=seed).split(np.zeros(n), codes))


def dense_rows(embeddings: Any, where: str) -> np.ndarray:
    """The embeddings as a C-contiguous float64 array (sparse input densified); non-finite values refused."""
    matrix = embeddings.toarray() if sp.issparse(embeddings) else np.asarray(embeddings)
    matrix = np.ascontiguousarray(matrix, dtype=np.float64)
    bad = ~np.isfinite(matrix).all(axis=1)
    if bad.any():
        raise ValidationError(f"{where}: embedding row {int(np.flatnonzero(bad)[0])} holds non-finite values")
    return matrix


def l2_normalised(matrix: np.ndarray, keys: Sequence[str], where: str) -> np.ndarray:
    """Unit rows for the cosine geometry: each row is first scaled by its own power of two (``rows_to_unit_peak``:
    exact, subnormal rows included), so any positive multiple of an embedding gets the same unit rows and no norm
    overflows or underflows. An all-zero row has no direction and is refused, naming up to 10 row ids."""
    scaled = rows_to_unit_peak(matrix)
    norms = np.linalg.norm(scaled, axis=1)
    zero = np.flatnonzero(norms == 0)
    if zero.size:
        shown = ", ".join(f"{describe_key(keys[i])} (index {i})" for i in zero[:10]) + (", ..." if zero.size > 10 else "")
        raise ValidationError(f"{where}: {zero.size} embedding row(s) are all zero and have no direction to "
                              f"normalise: row id {shown}")
    scaled /= norms[:, None]  # rows_to_unit_peak made a new array: one copy of the embeddings, not two
    return scaled


def prepared(metric: Any, embeddings: Any, targets: Any, row_ids: Any) -> tuple[np.ndarray, tuple[str, ...], str]:
    """(dense matrix, row keys, where) after the shared boundary checks."""
    n = _n_rows(embeddings)
    _check_targets(targets, n)
    where = f"{type(metric).__name__} {metric.name!r}"
    require_target_type(targets, metric.TARGET_TYPES, where)
    return dense_rows(embeddings, where), _row_keys(row_ids, n), where


def classification_scores(true: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """Accuracy and balanced accuracy (mean over true classes of per-class recall)."""
    correct = (true == predicted).astype(np.float64)
    classes = np.unique(true)
    recall = [correct[true == c].mean() for c in classes]
    return {"accuracy": float(correct.mean()), "balanced_accuracy": float(np.mean(recall))}


def per_sample(keys: Sequence[str], test: np.ndarray, true: np.ndarray, predicted: np.ndarray) -> dict[str, Any]:
    """The per-sample diagnostics, rows in ascending row order."""
    order = np.argsort(test, kind="stable")
    return {"ids": [keys[i] for i in test[order]], "true": true[order].tolist(), "predicted": predicted[order].tolist(),
            "correct": (true[order] == predicted[order]).astype(int).tolist()}


def sample_paired(primary: str) -> dict[str, Any]:
    return {"unit": "sample", "source": "per_sample", "column": "correct",
            "strata": "true" if primary == "balanced_accuracy" else None}


class BuiltinMetric(Metric):
    """A built-in labelled metric: ``check`` runs every refusal of ``compute`` from the targets alone (no
    embedding), so a benchmark can refuse a bad declaration before any extraction or scoring."""

    TARGET_TYPES: tuple[str, ...] = ()

    def _plan(self, targets: Any, keys: Sequence[str], where: str, seed: int, groups: Sequence[Any] | None = None) -> Any:
        raise NotImplementedError

    def check(self, targets: Any, *, row_ids: Sequence[str] | None = None, seed: int = 0,
              groups: Sequence[Any] | None = None) -> Any:
        """Returns the plan (codes, splits, episodes' pool) that ``compute`` makes from the same targets, row ids,
        seed and groups: pass it there as ``plan`` and the work is not done twice."""
        return self._target_plan(targets, row_ids, seed, groups)[2]

    def _target_plan(self, targets: Any, row_ids: Sequence[str] | None, seed: int,
                     groups: Sequence[Any] | None) -> tuple[tuple[str, ...], str, Any]:
        """(row keys, where, ``check``'s plan) from the targets alone."""
        where = f"{type(self).__name__} {self.name!r}"
        require_target_type(targets, self.TARGET_TYPES, where)
        keys = _row_keys(row_ids, targets.n_rows)
        return keys, where, self._plan(targets, keys, where, seed, groups)

    def _planned(self, embeddings: Any, targets: Any, row_ids: Sequence[str] | None, seed: int,
                 groups: Sequence[Any] | None, plan: Any) -> tuple[np.ndarray, tuple[str, ...], str, Any]:
        """``prepared``'s (matrix, keys, where) and the plan: ``check``'s as given, else made here."""
        matrix, keys, where = prepared(self, embeddings, targets, row_ids)
        return matrix, keys, where, self._plan(targets, keys, where, seed, groups) if plan is None else plan


def check_name(name: Any, owner: str) -> str:
    return _check_name(name, owner)


__all__ = ["BuiltinMetric", "EVAL_SPLITS", "FoldPlan", "SPLIT_VALUES", "declares_val", "eval_split_entry", "evaluation_name", "check_name", "check_policy", "check_split_classes", "choice", "class_codes", "classification_scores", "dense_rows",
           "evaluation_splits", "flag", "fold_plan", "group_codes", "l2_normalised", "parse_eval_split", "parse_split", "per_sample", "positive", "positive_float", "prepared", "small_class_rows", "small_classes_entry",
           "require_target_type", "sample_paired", "split_group_warnings", "split_parts", "split_positions"]
