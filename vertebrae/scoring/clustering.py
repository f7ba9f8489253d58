"""``ClusteringMetric``: how well k-means on the embeddings recovers the classes.

Rows are L2-normalised (``normalize``, default true), each first scaled by its own exact power of two
(``labelled_common.l2_normalised``); with ``normalize: false`` the whole matrix is scaled by one exact power of two
instead (``core.arrays.to_unit_peak``): either way any positive multiple of an embedding scores the same. Repeat
``r`` (``r = 0 .. repeats-1``, default 3) clusters with as many clusters as classes present and ``random_state =
seed + r``: ``algorithm: kmeans`` (default) runs scikit-learn ``KMeans`` with ``n_init`` (default 10)
initialisations; ``algorithm: minibatch`` runs ``MiniBatchKMeans(batch_size=batch_size, n_init=n_init)``, MTEB's
clustering evaluator (MTEB: ``batch_size`` 500 or 512, ``n_init`` 1, raw embeddings: ``normalize: false``). It
clusters all rows, or is fitted on the train rows of a declared ``split`` and assigns the test rows.

Scores, each averaged over the repeats: ``v_measure`` (harmonic mean of homogeneity and completeness),
``ari`` (adjusted Rand index), ``nmi`` (normalised mutual information with arithmetic-mean normalisation, which is
the V-measure by definition: kept under the name other tools print, always equal to ``v_measure``) and
``cluster_accuracy`` (the fraction of rows whose cluster maps to their class under the best one-to-one mapping of
clusters to classes, Hungarian matching, as MTEB reports it). ``score`` is the mean of ``primary`` (default
``v_measure``). The per-repeat values are kept (``diagnostics["per_seed"]``): repeats use the same seeds for every
candidate, so they pair. Classification only; other target types are refused naming the type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vertebrae.core.arrays import to_unit_peak
from vertebrae.core.errors import ValidationError
from vertebrae.scoring.labelled_common import (
    BuiltinMetric, check_name, check_split_classes, choice, class_codes, flag, l2_normalised, parse_split, positive,
    prepared, split_positions,
)
from vertebrae.scoring.metrics import MetricResult

SCORES = ("v_measure", "ari", "nmi", "cluster_accuracy")
ALGORITHMS = ("kmeans", "minibatch")


def cluster_accuracy(true: np.ndarray, assigned: np.ndarray) -> float:
    """Rows whose cluster maps to their class under the best one-to-one cluster -> class mapping (Hungarian)."""
    from scipy.optimize import linear_sum_assignment

    _, t = np.unique(true, return_inverse=True)
    _, a = np.unique(assigned, return_inverse=True)
    table = np.zeros((t.max() + 1, a.max() + 1), dtype=np.int64)
    np.add.at(table, (t, a), 1)
    rows, cols = linear_sum_assignment(table, maximize=True)
    return float(table[rows, cols].sum() / true.size)


def cluster_scores(true: np.ndarray, assigned: np.ndarray) -> dict[str, float]:
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score, v_measure_score

    return {"v_measure": float(v_measure_score(true, assigned)), "ari": float(adjusted_rand_score(true, assigned)),
            "nmi": float(normalized_mutual_info_score(true, assigned)),
            "cluster_accuracy": cluster_accuracy(true, assigned)}


class ClusteringMetric(BuiltinMetric):
    """k-means V-measure, ARI, NMI and cluster accuracy (see the module docstring)."""

    TARGET_TYPES = ("classification",)

    def __init__(self, n_init: int = 10, repeats: int = 3, split: Any = None, primary: str = "v_measure",
                 algorithm: str = "kmeans", batch_size: int = 512, normalize: bool = True, *,
                 name: str = "clustering") -> None:
        owner = "ClusteringMetric"
        self.name = check_name(name, owner)
        self.n_init = positive(n_init, owner, "n_init")
        self.repeats = positive(repeats, owner, "repeats")
        self.split = parse_split(split, owner)
        self.primary = choice(primary, SCORES, owner, "primary")
        self.algorithm = choice(algorithm, ALGORITHMS, owner, "algorithm")
        self.batch_size = positive(batch_size, owner, "batch_size")
        self.normalize = flag(normalize, owner, "normalize")

    def recipe(self) -> dict[str, Any]:
        """The settings; ``algorithm``, ``batch_size`` and ``normalize`` only where they differ from k-means on
        normalised rows, so a recipe without them keeps its fingerprint."""
        out = {"type": "clustering", "name": self.name, "n_init": self.n_init, "repeats": self.repeats,
               "split": self.split, "primary": self.primary}
        if self.algorithm != "kmeans":
            out.update(algorithm=self.algorithm, batch_size=self.batch_size)
        return out if self.normalize else {**out, "normalize": False}

    def _model(self, n_clusters: int, random_state: int) -> Any:
        from sklearn.cluster import KMeans, MiniBatchKMeans

        if self.algorithm == "minibatch":
            return MiniBatchKMeans(n_clusters=n_clusters, batch_size=self.batch_size, n_init=self.n_init,
                                   random_state=random_state)
        return KMeans(n_clusters=n_clusters, n_init=self.n_init, random_state=random_state)

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
        matrix, keys, where = prepared(self, embeddings, targets, row_ids)
        x = l2_normalised(matrix, keys, where) if self.normalize else to_unit_peak(matrix)
        codes, train, test, n_clusters = self._plan(targets, keys, where, seed) if plan is None else plan
        per_seed: dict[str, list[Any]] = {"ids": [], **{name: [] for name in SCORES}}
        for r in range(self.repeats):
            model = self._model(n_clusters, seed + r)
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


__all__ = ["ALGORITHMS", "ClusteringMetric", "SCORES", "cluster_accuracy", "cluster_scores"]
