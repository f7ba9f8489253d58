"""``FewShotMetric``: nearest-class-mean few-shot classification over seeded episodes.

Rows are L2-normalised, each first scaled by its own exact power of two (``labelled_common.l2_normalised``: any
positive multiple of an embedding scores the same). Episode ``e`` (``e = 0 .. episodes-1``) draws, with
``numpy.random.default_rng([seed, e])``, one permutation of every class's support pool (in catalog order); for each
shot count ``s`` in ``shots`` (default 1, 5, 10) the first ``s`` rows of each class's permutation are its support
(supports are nested across shot counts). Each class's mean is the mean of its normalised support rows; a query row
is predicted as the class of the nearest mean (Euclidean distance; ties: first class in catalog order). Queries are
every row that is not in that support (or, with a declared ``split``, the test rows; the support pool is then the
train rows). Where the dataset declares independence groups (e.g. the images of one subject) and ``group_episodes``
is true (default), a query row must also share no group with that episode's support (no episode tests a subject it
holds as support); a declared split is taken as given. An episode left without a query row is refused naming
``shots``.

Per shot count: the mean accuracy over episodes with its normal interval ``mean +- 1.96 sd / sqrt(episodes)``;
``score`` is the mean accuracy at ``primary_shots`` (default 5 when listed, else the largest shot count). Every
episode's accuracy is kept (``diagnostics["per_episode"]``): episodes depend only on the seed and the labels, so
every candidate sees the same episodes and they pair. Classes with fewer pool rows than the largest shot count
are refused by name. Classification only; other target types are refused naming the type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.scoring.labelled_common import (
    BuiltinMetric, check_name, check_policy, check_split_classes, class_codes, flag, group_codes, l2_normalised,
    parse_split, positive, prepared, small_class_rows, small_classes_entry, split_group_warnings, split_positions,
)
from vertebrae.scoring.metrics import MetricResult


def _shots(value: Any, owner: str) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)) or not len(value):
        raise ConfigError(f"{owner}: key 'shots' must be a non-empty list of positive integers, got {value!r}")
    shots = tuple(positive(v, owner, "shots") for v in value)
    if len(set(shots)) != len(shots):
        raise ConfigError(f"{owner}: key 'shots' holds duplicates: {list(shots)}")
    return tuple(sorted(shots))


def nearest_mean(x: np.ndarray, rows: np.ndarray, support: np.ndarray, support_codes: np.ndarray,
                 n_classes: int) -> np.ndarray:
    """Class of the nearest support-class mean for the rows ``rows`` of ``x`` (classes without support never win)."""
    sums = np.zeros((n_classes, x.shape[1]))
    np.add.at(sums, support_codes, x[support])
    counts = np.bincount(support_codes, minlength=n_classes)
    present = counts > 0
    means = sums[present] / counts[present, None]
    # ||x - m||^2 = ||x||^2 - 2 x.m + ||m||^2; ||x||^2 is the same for every class
    distances = -2.0 * (x[rows] @ means.T) + (means ** 2).sum(axis=1)[None, :]
    return np.flatnonzero(present)[distances.argmin(axis=1)]


class FewShotMetric(BuiltinMetric):
    """Nearest-class-mean few-shot accuracy (see the module docstring)."""

    TARGET_TYPES = ("classification",)

    def __init__(self, shots: Sequence[int] = (1, 5, 10), episodes: int = 100, split: Any = None,
                 primary_shots: int | None = None, group_episodes: bool = True, small_classes: str = "refuse", *,
                 name: str = "few_shot") -> None:
        owner = "FewShotMetric"
        self.name = check_name(name, owner)
        self.shots = _shots(shots, owner)
        self.episodes = positive(episodes, owner, "episodes")
        self.split = parse_split(split, owner)
        if primary_shots is None:
            primary_shots = 5 if 5 in self.shots else self.shots[-1]
        if primary_shots not in self.shots:
            raise ConfigError(f"{owner}: key 'primary_shots' = {primary_shots!r} is not one of shots {list(self.shots)}")
        self.primary_shots = int(primary_shots)
        self.group_episodes = flag(group_episodes, owner, "group_episodes")
        self.small_classes = check_policy(small_classes, owner)

    def recipe(self) -> dict[str, Any]:
        return {"type": "few_shot", "name": self.name, "shots": list(self.shots), "episodes": self.episodes,
                "split": self.split, "primary_shots": self.primary_shots, "group_episodes": self.group_episodes,
                **small_classes_entry(self)}

    def episodes_of(self, codes: np.ndarray, pool: np.ndarray, queries: np.ndarray | None, grouped: np.ndarray | None,
                    n_classes: int, seed: int, active: np.ndarray | None = None):
        """Yield ``(episode, shot index, support rows, query rows)`` (module docstring); ``queries`` None means every
        row outside the support (and, with ``grouped`` codes, outside the support's groups) and, with an ``active``
        mask, inside it (rows of excluded small classes are never queried)."""
        n = codes.shape[0]
        members = [pool[codes[pool] == c] for c in range(n_classes)]
        present = [c for c in range(n_classes) if members[c].size]
        n_groups = 0 if grouped is None else int(grouped.max()) + 1
        for e in range(self.episodes):
            rng = np.random.default_rng([seed, e])
            perms = {c: rng.permutation(members[c]) for c in present}
            for j, s in enumerate(self.shots):
                support = np.concatenate([perms[c][:s] for c in present])
                if queries is None:
                    mask = np.ones(n, dtype=bool) if active is None else active.copy()
                    mask[support] = False
                    if grouped is not None:
                        held = np.zeros(n_groups, dtype=bool)
                        held[grouped[support]] = True
                        mask &= ~held[grouped]
                    rows = np.flatnonzero(mask)
                else:
                    rows = queries
                yield e, j, support, rows

    def episode_accuracies(self, x: np.ndarray, codes: np.ndarray, pool: np.ndarray, queries: np.ndarray | None,
                           n_classes: int, seed: int, grouped: np.ndarray | None = None,
                           active: np.ndarray | None = None) -> np.ndarray:
        """``(episodes, len(shots))`` accuracies over :meth:`episodes_of`."""
        out = np.empty((self.episodes, len(self.shots)))
        for e, j, support, rows in self.episodes_of(codes, pool, queries, grouped, n_classes, seed, active):
            predicted = nearest_mean(x, rows, support, codes[support], n_classes)
            out[e, j] = float((predicted == codes[rows]).mean())
        return out

    def _plan(self, targets: Any, keys: Sequence[str], where: str, seed: int, groups: Any = None):  # no folds
        codes = class_codes(targets, where)
        n_classes = len(targets.catalog)
        if self.split is not None:
            pool, queries = split_positions(self.split, keys, where)
            check_split_classes(codes, pool, queries, targets, where)
        else:
            pool, queries = np.arange(len(keys)), None
        # a support of the largest shot count and, without a split, a row of the class left to query
        needed = self.shots[-1] + (queries is None)
        kept, notes = small_class_rows(self, codes, pool, targets, needed, f"key 'shots' = {list(self.shots)}", where)
        active = None
        if kept.size < pool.size:
            active = np.zeros(len(keys), dtype=bool)
            active[kept] = True
            pool = kept
            queries = None if queries is None else queries[active[queries]]
        counts = np.bincount(codes[pool], minlength=n_classes)
        if queries is None and (counts[counts > 0] <= self.shots[-1]).all():
            raise ValidationError(f"{where}: key 'shots': no row is left to query at {self.shots[-1]} shots")
        grouped = group_codes(groups, len(keys), where) if self.group_episodes and queries is None else None
        if grouped is not None:
            for e, j, _, rows in self.episodes_of(codes, pool, queries, grouped, n_classes, seed, active):
                if not rows.size:
                    raise ValidationError(
                        f"{where}: key 'shots': at {self.shots[j]} shots, episode {e}'s support holds a row of every "
                        "independence group, so no row is left to query; declare fewer shots or "
                        "'group_episodes: false'")
        return codes, pool, queries, grouped, active, notes

    def compute(self, embeddings: Any, targets: Any, *, row_ids: Sequence[str] | None,
                groups: Sequence[Any] | None = None, seed: int = 0, plan: Any = None) -> MetricResult:
        matrix, keys, where = prepared(self, embeddings, targets, row_ids)
        x = l2_normalised(matrix, keys, where)
        codes, pool, queries, grouped, active, notes = self._plan(targets, keys, where, seed, groups) if plan is None \
            else plan
        n_classes = len(targets.catalog)
        acc = self.episode_accuracies(x, codes, pool, queries, n_classes, seed, grouped, active)
        per_shot = {}
        for j, s in enumerate(self.shots):
            mean = float(acc[:, j].mean())
            half = 1.96 * float(acc[:, j].std(ddof=1)) / np.sqrt(self.episodes) if self.episodes > 1 else 0.0
            per_shot[str(s)] = {"accuracy": mean, "ci_low": mean - half, "ci_high": mean + half}
        diagnostics = {
            "per_shot": per_shot,
            "per_episode": {"ids": [str(e) for e in range(self.episodes)],
                            **{str(s): acc[:, j].tolist() for j, s in enumerate(self.shots)}},
            "paired": {"unit": "episode", "source": "per_episode", "column": str(self.primary_shots), "strata": None},
            "statistic": f"accuracy@{self.primary_shots}-shot",
        }
        metadata = {**self.recipe(), "n_rows": len(keys), "seed": int(seed), "target_type": targets.target_type}
        warnings = notes + ([] if queries is None else split_group_warnings(self.split, pool, queries, groups, where))
        return MetricResult(self.name, per_shot[str(self.primary_shots)]["accuracy"], True, diagnostics, warnings,
                            metadata)


__all__ = ["FewShotMetric", "nearest_mean"]
