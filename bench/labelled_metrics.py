"""Built-in labelled metrics performance harness (not a test): each metric against the same computation written
directly with scikit-learn / NumPy here.

Run: ``python bench/labelled_metrics.py`` (100,000 x 512, 100 classes) or a quick run ``--rows 5000``. It prints
the machine, a table of metric / vertebrae seconds / direct seconds / ratio / agreement, and ends with the line
``metric_ratio=X fanout_ratio=Y probe_ratio=Z`` (X the worst metric's ratio; Y the fanned-out labelled score
against the one-job score, below; Z the linear probe's ratio: its time over scikit-learn's LogisticRegressionCV's).

What is timed, in one process, on the same seeded data (class centres in ``dims`` dimensions plus Gaussian noise):

* ``knn`` (k 20, uniform) vs ``KNeighborsClassifier(metric="cosine", algorithm="brute")`` per stratified fold;
* ``linear_probe`` (its default solver) vs ``StandardScaler`` + ``LogisticRegressionCV`` per fold with the same
  grid, inner folds, ``max_iter`` and seed, on the first ``--probe-rows`` rows (default all);
* ``few_shot`` vs ``NearestCentroid`` on the normalised support rows of the same episodes;
* ``clustering`` vs ``KMeans`` + ``v_measure_score`` / ``adjusted_rand_score`` / ``normalized_mutual_info_score``.

Each pair must agree (same predictions / scores); the table says so. The probe's two solvers are not the same
computation: its row gives the outer folds whose chosen C is the same and the largest difference of a fold's
accuracy (issue 49's oracle bounds: C equal in >= 90% of folds, accuracy within 0.005). Each side's time is the
fastest of ``--timing-repeats`` runs (default 2) whose order alternates (ours first, then the direct code first): at
100,000 x 512 whichever ran first on the fresh data was 15-25% slower (memory the process had not touched yet),
which a single run charges to vertebrae.

Threads are set explicitly (``--threads``, default 2): every metric and its direct code run inside
``threadpool_limits(T)`` (BLAS and OpenMP on T threads, no more); vertebrae's probe and kNN use T worker threads of
single-threaded BLAS. scikit-learn's probe runs as it does best on T cores without oversubscription:
``LogisticRegressionCV(n_jobs=T)`` (its inner folds in T processes) with BLAS and OpenMP on one thread each. With
its default threads on this shared 2-core machine, one fold of a 30,000-row probe took several times longer than
pinned (nested OpenMP and BLAS pools spinning on busy cores), which would flatter the ratio.

``fanout_ratio``: one precomputed candidate of ``--fanout-rows`` x ``--dims`` (``--classes`` classes) scored through
the workflow with OverlapIndex, 2 stability repeats and the four metrics (reduced settings), first as the one
``score`` job on 2 threads, then (``fanout: true``) as one job per part (kNN one per fold: 11 jobs) on 1 thread
each, two at a time (``--cores 2``), plus the merge; each run is ``--forcerun`` of its score rules (compare, report and figures follow in both).
Both run as a user runs the workflow on one machine, ``vertebrae run CONFIG --cores 2`` (its scoring jobs served
from one warm process, ``vertebrae.job_server``); ``--unserved`` runs plain ``snakemake`` instead (every job its
own interpreter and imports: what a cluster's jobs pay). The ratio is of wall times (the fastest of
``--fanout-repeats`` interleaved runs); CPU seconds are printed beside it. The two score artifacts must be equal.
``--fanout-rows 0`` skips it (``nan``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
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


def direct_probe(x, y, cs, n_folds, inner, threads):
    """(accuracy, chosen C per fold, accuracy per fold) of StandardScaler + LogisticRegressionCV per fold."""
    import warnings

    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import StratifiedKFold
    from sklearn.preprocessing import StandardScaler
    from threadpoolctl import threadpool_limits

    warnings.simplefilter("ignore", FutureWarning)
    correct, chosen, accuracy = 0, [], []
    with threadpool_limits(1):
        for train, test in folds(y, n_folds):
            scaler = StandardScaler().fit(x[train])
            model = LogisticRegressionCV(Cs=list(cs), cv=StratifiedKFold(inner, shuffle=True, random_state=SEED),
                                         scoring="accuracy", max_iter=1000, random_state=SEED, n_jobs=threads
                                         ).fit(scaler.transform(x[train]), y[train])
            right = model.predict(scaler.transform(x[test])) == y[test]
            correct += int(right.sum())
            chosen.append(float(model.C_[0]))
            accuracy.append(float(right.mean()))
    return correct / len(y), chosen, accuracy


def ours_probe(x, y, targets, cs, n_folds, inner):
    """The same three numbers from LinearProbeMetric (its default solver); ``targets``: ``y``'s, built untimed as
    every other metric's are."""
    result = LinearProbeMetric(Cs=cs, folds=n_folds, inner_folds=inner).compute(x, targets, row_ids=None, seed=SEED)
    correct = np.array(result.diagnostics["per_sample"]["correct"])
    return result.score, result.diagnostics["chosen_C"], [float(correct[test].mean()) for _, test in folds(y, n_folds)]


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


def _snakemake(workdir: Path, *args: str, served: bool = True) -> tuple[float, float]:
    """(wall, CPU seconds of the jobs) of one run of the workflow in ``workdir``: ``vertebrae run`` (``served``), or
    plain Snakemake."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if served:
        cmd = [str(Path(sys.executable).parent / "vertebrae"), "run", "config/config.yaml", "--cores", "2", *args]
    else:
        cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(Path(__file__).resolve().parents[1] / "Snakefile"),
               "--directory", str(workdir), "--cores", "2", *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _fanout_config(fanout: bool, threads: int) -> dict:
    return {"seed": SEED, "embedding": {"shards": 1, "batch_size": 65536},
            "threads": {"embedding": 1, "scoring": threads},
            "benchmarks": {"bench": {
                "dataset": {"source": {"type": "npz", "path": "data/feat.npz"}},
                "extractors": {"raw": {"type": "precomputed"}},
                "fanout": fanout,
                "stability": {"enabled": True, "repeats": 2}, "separatix": {"enabled": False},
                "metrics": [{"type": "knn", "k": 20},
                            {"type": "linear_probe", "Cs": [0.1, 1.0], "folds": 2, "inner_folds": 2, "max_iter": 100},
                            {"type": "few_shot", "shots": [1, 5], "episodes": 20},
                            {"type": "clustering", "n_init": 1, "repeats": 2}],
                "comparison": {"resamples": 200},
            }}}


def fanout_ratio(x: np.ndarray, y: np.ndarray, repeats: int, served: bool = True) -> float:
    """Wall time of the fanned-out score stage over the one-job score stage (module docstring)."""
    import yaml

    from vertebrae.core.artifacts import read_json_artifact
    from vertebrae.planning import artifact_path, plan

    root = Path(tempfile.mkdtemp(prefix="labelled-fanout-"))
    (root / "data").mkdir()
    (root / "config").mkdir()
    np.savez(root / "data/feat.npz", embeddings=x.astype(np.float32), labels=y)

    def configure(fanout: bool, threads: int) -> dict:
        config = _fanout_config(fanout, threads)
        (root / "config/config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        return config

    configure(False, 2)
    _snakemake(root, "--until", "merge_embeddings", "write_protocol")
    one = fanned = one_cpu = fanned_cpu = float("inf")
    for _ in range(repeats):  # interleaved, the fastest of each kept
        config = configure(False, 2)
        (score_fp,) = plan(config, base_dir=root).fingerprints("score")
        wall, cpu = _snakemake(root, "--forcerun", "score", served=served)
        one, one_cpu = min(one, wall), min(one_cpu, cpu)
        single = read_json_artifact(root / artifact_path("score", score_fp), "score", fingerprint=score_fp)
        configure(True, 1)
        wall, cpu = _snakemake(root, "--forcerun", "score_labelled_partial", "merge_labelled_partials", served=served)
        fanned, fanned_cpu = min(fanned, wall), min(fanned_cpu, cpu)
        merged = read_json_artifact(root / artifact_path("score", score_fp), "score", fingerprint=score_fp)
        assert json.dumps(merged, sort_keys=True) == json.dumps(single, sort_keys=True), \
            "the fanned-out score differs from the one-job score"
    how = "vertebrae run (served)" if served else "snakemake (unserved)"
    print(f"| {how}: one score job on 2 threads, {x.shape[0]} x {x.shape[1]} (+ compare, report, figures), fastest of "
          f"{repeats}: wall, CPU | {one:.1f} s, {one_cpu:.1f} s |")
    parts = len(plan(_fanout_config(True, 1), base_dir=root).fingerprints("score-labelled-partial"))
    print(f"| {parts} part jobs of 1 thread + merge, --cores 2 (+ compare, report, figures), fastest of {repeats}: "
          f"wall, CPU | {fanned:.1f} s, {fanned_cpu:.1f} s |")
    print(f"| ratio: wall, CPU | {fanned / one:.2f}, {fanned_cpu / one_cpu:.2f} |", flush=True)
    return fanned / one


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
    parser.add_argument("--fanout-rows", type=int, default=100_000, help="rows of the fan-out run (0: skip it)")
    parser.add_argument("--fanout-repeats", type=int, default=2)
    parser.add_argument("--unserved", action="store_true",
                        help="the fan-out run with plain snakemake (every job its own process) instead of vertebrae run")
    parser.add_argument("--timing-repeats", type=int, default=2, help="timed runs of each pair, order alternating")
    parser.add_argument("--threads", type=int, default=2, help="threads of every metric and its direct code")
    parser.add_argument("--probe-rows", type=int, default=0, help="rows of the probe pair (0: all)")
    args = parser.parse_args()
    from threadpoolctl import threadpool_limits

    x, y = data(args.rows, args.dims, args.classes)
    targets = classification_targets(y)
    probe_rows = args.probe_rows or args.rows
    print(f"machine: {platform.processor() or platform.machine()}, {len(os.sched_getaffinity(0))} usable cores; "
          f"{args.rows} x {args.dims}, {args.classes} classes; {args.threads} thread(s); the probe on {probe_rows} rows")

    def cases(x, y, targets, episodes, repeats):
        px, py = x[:probe_rows], y[:probe_rows]
        probe_targets = targets if probe_rows >= len(y) else classification_targets(py)
        return {
            "knn": (lambda: KNNMetric(k=20, folds=args.folds).compute(x, targets, row_ids=None, seed=SEED).score,
                    lambda: direct_knn(x, y, 20, args.folds)),
            "linear_probe": (lambda: ours_probe(px, py, probe_targets, args.cs, args.folds, args.inner_folds),
                             lambda: direct_probe(px, py, args.cs, args.folds, args.inner_folds, args.threads)),
            "few_shot": (lambda: FewShotMetric(shots=(5,), episodes=episodes).compute(x, targets, row_ids=None, seed=SEED).score,
                         lambda: direct_few_shot(x, y, 5, episodes)),
            "clustering": (lambda: ClusteringMetric(n_init=args.n_init, repeats=repeats)
                           .compute(x, targets, row_ids=None, seed=SEED).score,
                           lambda: direct_clustering(x, y, args.n_init, repeats)),
        }

    def agreement(score, expected) -> str:
        if isinstance(score, tuple):  # the probe: (accuracy, chosen C per fold, accuracy per fold)
            same = sum(a == b for a, b in zip(score[1], expected[1]))
            gap = max(abs(a - b) for a, b in zip(score[2], expected[2]))
            return (f"{same >= 0.9 * len(expected[1]) and gap <= 0.005} (C equal in {same}/{len(expected[1])} folds, "
                    f"largest fold accuracy difference {gap:.4f}; {score[0]:.4f} vs {expected[0]:.4f})")
        return f"{abs(score - expected) < 1e-9} ({score:.4f} vs {expected:.4f})"

    with threadpool_limits(args.threads):
        # warm-up on a small slice (imports, thread pools), untimed
        small = min(args.rows, 40 * args.classes)  # k = 20 needs 21 rows a class
        for name, (ours, direct) in cases(x[:small], y[:small], classification_targets(y[:small]), 2, 1).items():
            if name not in args.skip:
                ours(), direct()
        print(f"{'metric':<14}{'vertebrae_s':>12}{'direct_s':>12}{'ratio':>8}  agree")
        worst = probe = float("nan")  # stays nan when every metric is skipped
        for name, (ours, direct) in cases(x, y, targets, args.episodes, args.repeats).items():
            if name in args.skip:
                continue
            value, fastest = {}, {ours: float("inf"), direct: float("inf")}
            for repeat in range(max(1, args.timing_repeats)):  # the order alternates: the first run pays the fresh memory
                for fn in (ours, direct) if repeat % 2 == 0 else (direct, ours):
                    value[fn], seconds = timed(fn)
                    fastest[fn] = min(fastest[fn], seconds)
            (score, expected), (ours_s, direct_s) = (value[ours], value[direct]), (fastest[ours], fastest[direct])
            ratio = ours_s / direct_s
            worst = ratio if not worst >= ratio else worst
            probe = ratio if name == "linear_probe" else probe
            print(f"{name:<14}{ours_s:>12.2f}{direct_s:>12.2f}{ratio:>8.3f}  {agreement(score, expected)}", flush=True)
    fanned = float("nan")
    if args.fanout_rows:
        fanned = fanout_ratio(x[:args.fanout_rows], y[:args.fanout_rows], args.fanout_repeats, not args.unserved)
    print(f"metric_ratio={worst:.3f} fanout_ratio={fanned:.3f} probe_ratio={probe:.3f}")

if __name__ == "__main__":
    main()
