"""Built-in labelled metrics performance harness (not a test): each metric against the same computation written
directly with scikit-learn / NumPy here.

Run: ``python bench/labelled_metrics.py`` (100,000 x 512, 100 classes; long on 2 cores: the linear probe fits
``folds x (inner_folds x len(Cs) + 1)`` multinomial models) or a quick run ``--rows 5000``. It prints the machine,
a table of metric / vertebrae seconds / direct seconds / ratio / agreement, and ends with the line
``metric_ratio=X fanout_ratio=Y`` (X the worst metric's ratio; Y the fanned-out labelled score against the
one-job score, ``nan`` while the workflow scores a candidate in one job).

What is timed, in one process, on the same seeded data (class centres in ``dims`` dimensions plus Gaussian noise):

* ``knn`` (k 20, uniform) vs ``KNeighborsClassifier(metric="cosine", algorithm="brute")`` per stratified fold;
* ``linear_probe`` vs ``StandardScaler`` + ``LogisticRegressionCV`` per fold with the same grid and inner folds;
* ``few_shot`` vs ``NearestCentroid`` on the normalised support rows of the same episodes;
* ``clustering`` vs ``KMeans`` + ``v_measure_score`` / ``adjusted_rand_score`` / ``normalized_mutual_info_score``.

Each pair must agree (same predictions / scores); the table says so.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vertebrae.data.targets import classification_targets  # noqa: E402
from vertebrae.scoring.clustering import ClusteringMetric  # noqa: E402
from vertebrae.scoring.few_shot import FewShotMetric  # noqa: E402
from vertebrae.scoring.knn import KNNMetric  # noqa: E402
from vertebrae.scoring.linear_probe import LinearProbeMetric  # noqa: E402

SEED = 0


def data(rows: int, dims: int, classes: int):
    rng = np.random.default_rng(SEED)
    y = np.arange(rows) % classes
    centres = rng.normal(size=(classes, dims)) * 0.35
    return centres[y] + rng.normal(size=(rows, dims)), y


def folds(y, n):
    from sklearn.model_selection import StratifiedKFold

    return list(StratifiedKFold(n, shuffle=True, random_state=SEED).split(np.zeros(len(y)), y))


def direct_knn(x, y, k, n_folds):
    from sklearn.neighbors import KNeighborsClassifier

    predicted = np.empty(len(y), dtype=np.int64)
    for train, test in folds(y, n_folds):
        predicted[test] = KNeighborsClassifier(k, metric="cosine", algorithm="brute").fit(x[train], y[train]).predict(x[test])
    return float(np.mean(predicted == y))


def direct_probe(x, y, cs, n_folds, inner):
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import StratifiedKFold
    from sklearn.preprocessing import StandardScaler

    import warnings

    warnings.simplefilter("ignore", FutureWarning)
    correct = 0
    for train, test in folds(y, n_folds):
        scaler = StandardScaler().fit(x[train])
        model = LogisticRegressionCV(Cs=list(cs), cv=StratifiedKFold(inner, shuffle=True, random_state=SEED),
                                     scoring="accuracy", max_iter=1000, random_state=SEED).fit(scaler.transform(x[train]), y[train])
        correct += int((model.predict(scaler.transform(x[test])) == y[test]).sum())
    return correct / len(y)


def direct_few_shot(x, y, shots, episodes):
    from sklearn.neighbors import NearestCentroid

    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    classes = np.unique(y)
    accs = []
    for e in range(episodes):
        rng = np.random.default_rng([SEED, e])
        perms = [rng.permutation(np.flatnonzero(y == c)) for c in classes]
        support = np.concatenate([p[:shots] for p in perms])
        query = np.setdiff1d(np.arange(len(y)), support)
        model = NearestCentroid().fit(xn[support], y[support])
        accs.append(np.mean(model.predict(xn[query]) == y[query]))
    return float(np.mean(accs))


def direct_clustering(x, y, n_init, repeats):
    from sklearn.cluster import KMeans
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score, v_measure_score

    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    scores = []
    for r in range(repeats):
        labels = KMeans(len(np.unique(y)), n_init=n_init, random_state=SEED + r).fit(xn).labels_
        scores.append(v_measure_score(y, labels))
        adjusted_rand_score(y, labels), normalized_mutual_info_score(y, labels)
    return float(np.mean(scores))


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dims", type=int, default=512)
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--inner-folds", type=int, default=3)
    parser.add_argument("--cs", type=float, nargs="+", default=[1e-3, 1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3])
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-init", type=int, default=10)
    parser.add_argument("--skip", nargs="*", default=[], choices=["knn", "linear_probe", "few_shot", "clustering"])
    args = parser.parse_args()
    x, y = data(args.rows, args.dims, args.classes)
    targets = classification_targets(y)
    print(f"machine: {platform.processor() or platform.machine()}, {len(os.sched_getaffinity(0))} usable cores; "
          f"{args.rows} x {args.dims}, {args.classes} classes")
    def cases(x, y, targets, episodes, repeats):
        return {
            "knn": (lambda: KNNMetric(k=20, folds=args.folds).compute(x, targets, row_ids=None, seed=SEED).score,
                    lambda: direct_knn(x, y, 20, args.folds)),
            "linear_probe": (lambda: LinearProbeMetric(Cs=args.cs, folds=args.folds, inner_folds=args.inner_folds)
                             .compute(x, targets, row_ids=None, seed=SEED).score,
                             lambda: direct_probe(x, y, args.cs, args.folds, args.inner_folds)),
            "few_shot": (lambda: FewShotMetric(shots=(5,), episodes=episodes).compute(x, targets, row_ids=None, seed=SEED).score,
                         lambda: direct_few_shot(x, y, 5, episodes)),
            "clustering": (lambda: ClusteringMetric(n_init=args.n_init, repeats=repeats)
                           .compute(x, targets, row_ids=None, seed=SEED).score,
                           lambda: direct_clustering(x, y, args.n_init, repeats)),
        }

    # warm-up on a small slice (imports, thread pools), untimed
    small = min(args.rows, 20 * args.classes)
    for name, (ours, direct) in cases(x[:small], y[:small], classification_targets(y[:small]), 2, 1).items():
        if name not in args.skip:
            ours(), direct()
    print(f"{'metric':<14}{'vertebrae_s':>12}{'direct_s':>12}{'ratio':>8}  agree")
    worst = 0.0
    for name, (ours, direct) in cases(x, y, targets, args.episodes, args.repeats).items():
        if name in args.skip:
            continue
        score, ours_s = timed(ours)
        expected, direct_s = timed(direct)
        ratio = ours_s / direct_s
        worst = max(worst, ratio)
        print(f"{name:<14}{ours_s:>12.2f}{direct_s:>12.2f}{ratio:>8.3f}  {abs(score - expected) < 1e-9} "
              f"({score:.4f} vs {expected:.4f})", flush=True)
    print(f"metric_ratio={worst:.3f} fanout_ratio=nan")


if __name__ == "__main__":
    main()
