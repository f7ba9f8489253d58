"""``ClusteringMetric``: how well k-means on the embeddings recovers the classes (MTEB-clustering style).

Rows are L2-normalised, each first scaled by its own exact power of two (``labelled_common.l2_normalised``: any
positive multiple of an embedding scores the same). Repeat ``r`` (``r = 0 .. repeats-1``, default 3) runs
scikit-learn ``KMeans`` with as many clusters as classes present, ``n_init`` (default 10) initialisations and
``random_state = seed + r``, on all rows, or fitted on the train rows of a declared ``split`` and assigning the test
rows. The cluster assignment is scored against the classes of the scored rows with V-measure (harmonic mean of
homogeneity and completeness), the adjusted Rand index and normalised mutual information (arithmetic mean
normalisation), each averaged over the repeats; ``score`` is the mean of ``primary`` (default ``v_measure``). The
per-repeat values are kept (``diagnostics["per_seed"]``): repeats use the same seeds for every candidate, so they
pair. Classification only; other target types are refused naming the type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vertebrae.core.errors import ValidationError
from vertebrae.scoring.labelled_common import (
    BuiltinMetric, check_name, check_split_classes, choice, class_codes, l2_normalised, parse_split, positive, prepared, split_positions,
)
from vertebrae.scoring.metrics import MetricResult

SCORES = ("v_measure", "ari", "nmi")


def cluster_scores(true: np.ndarray, assigned: np.ndarray) -> dict[str, float]:
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score, v_measure_score

    return {"v_measure": float(v_measure_score(true, assigned)), "ari": float(adjusted_rand_score(true, assigned)),
            "nmi": float(normalized_mutual_info_score(true, assigned))}


class ClusteringMetric(BuiltinMetric):
    """k-means V-measure, ARI and NMI (see the module docstring)."""

    TARGET_TYPES = ("classification",)

    def __init__(self, n_init: int = 10, repeats: int = 3, split: Any = None, primary: str = "v_measure", *,
                 name: str = "clustering") -> None:
        owner = "ClusteringMetric"
        self.name = check_name(name, owner)
        self.n_init = positive(n_init, owner, "n_init")
        self.repeats = positive(repeats, owner, "repeats")
        self.split = parse_split(split, owner)
        self.primary = choice(primary, SCORES, owner, "primary")

    def recipe(self) -> dict[str, Any]:
        return {"type": "clustering", "name": self.name, "n_init": self.n_init, "repeats": self.repeats,
                "split": self.split, "primary": self.primary}

    def _plan(self, targets: Any, keys: Sequence[str], where: str, seed: int, groups: Any = None):  # no folds
        codes = class_codes(targets, where)
        if self.split is not None:
            train, test = split_positions(self.split, keys, where)
            check_split_classes(codes, train, test, targets, where)
        else:
            train = test = np.arange(len(keys))
        n_clusters = int(np.unique(codes[train]).size)
        if n_clusters < 2:
            raise ValidationError(f"{where}: clustering needs at least 2 classes, got {n_clusters}")
        if n_clusters > train.size:
            raise ValidationError(f"{where}: {n_clusters} clusters exceed the {train.size} rows")
        return codes, train, test, n_clusters

    def compute(self, embeddings: Any, targets: Any, *, row_ids: Sequence[str] | None,
                groups: Sequence[Any] | None = None, seed: int = 0, plan: Any = None) -> MetricResult:
        from sklearn.cluster import KMeans

        matrix, keys, where = prepared(self, embeddings, targets, row_ids)
        x = l2_normalised(matrix, keys, where)
        codes, train, test, n_clusters = self._plan(targets, keys, where, seed) if plan is None else plan
        per_seed: dict[str, list[Any]] = {"ids": [], **{name: [] for name in SCORES}}
        for r in range(self.repeats):
            model = KMeans(n_clusters=n_clusters, n_init=self.n_init, random_state=seed + r)
            model.fit(x if self.split is None else x[train])
            assigned = model.labels_ if self.split is None else model.predict(x[test])
            scores = cluster_scores(codes[test], assigned)
            per_seed["ids"].append(str(seed + r))
            for name in SCORES:
                per_seed[name].append(scores[name])
        means = {name: float(np.mean(per_seed[name])) for name in SCORES}
        diagnostics = {**means, "n_clusters": n_clusters, "per_seed": per_seed,
                       "paired": {"unit": "repeat", "source": "per_seed", "column": self.primary, "strata": None},
                       "statistic": self.primary}
        metadata = {**self.recipe(), "n_rows": len(keys), "n_scored": int(test.size), "seed": int(seed),
                    "target_type": targets.target_type}
        return MetricResult(self.name, means[self.primary], True, diagnostics, [], metadata)


__all__ = ["ClusteringMetric", "cluster_scores"]
