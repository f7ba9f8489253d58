"""Paired-comparison performance harness (not a test): vertebrae's compare_units vs scipy.stats.

Run: ``python bench/compare.py`` (20 candidates x 100,000 queries, 10,000 resamples; scipy's share takes
tens of minutes at full resamples, see ``--scipy-resamples``) or a smoke run ``python bench/compare.py --quick``.
It prints the machine, a table of component / seconds, a cross-check of one pair, and ends with the line
``compare_seconds=X ratio_to_scipy=Y``.

What is timed, in one process on the same data:

* **vertebrae** (X): ``compare_units(PairedUnits(... reducer="mean"), ComparisonConfig(resamples=R))`` on all
  candidates: every candidate's percentile interval, and for all m(m-1)/2 pairs the paired bootstrap interval,
  the randomization test and the Holm adjustment, on one shared set of resamples.
* **scipy** (the baseline): on the 10 pairs of the first 5 candidates, per pair
  ``scipy.stats.bootstrap((a, b), mean difference, paired=True, vectorized=True, method="percentile",
  batch=...)`` plus ``scipy.stats.permutation_test((a, b), mean difference, permutation_type="samples",
  vectorized=True, batch=...)`` with the same resample count (batches keep memory near 2 GB).
  ``--scipy-resamples N`` (N < R) times scipy at N resamples and scales the time by R / N — both scipy
  functions cost the same per resample batch, so the time is linear in the count; the table marks it
  "extrapolated". ``ratio_to_scipy = X / scipy time``.

Data: seeded NDCG-like values in [0, 1]: a per-query difficulty shared by all candidates, a per-candidate
shift and per-query noise (so candidates are correlated, as real backbones on the same queries are); about
10% of the values are clipped to exactly 0 and some to 1, the rest continuous (non-binary, so the
randomization test rather than McNemar's applies).
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

from vertebrae.scoring.paired import ComparisonConfig, PairedUnits, compare_units  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--candidates", type=int, default=20)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--scipy-candidates", type=int, default=5, help="scipy runs on the pairs of the first N")
    parser.add_argument("--scipy-resamples", type=int, default=None,
                        help="time scipy at N resamples and scale to --resamples (default: the same count)")
    parser.add_argument("--bootstrap-batch", type=int, default=100, help="scipy.stats.bootstrap batch")
    parser.add_argument("--permutation-batch", type=int, default=250, help="scipy.stats.permutation_test batch")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="smoke run: 5,000 queries, 6 candidates, 1,000 resamples")
    args = parser.parse_args(argv)
    if args.quick:
        args.queries, args.candidates, args.resamples = 5_000, 6, 1_000
    args.scipy_candidates = min(args.scipy_candidates, args.candidates)
    if args.scipy_resamples is None or args.scipy_resamples > args.resamples:
        args.scipy_resamples = args.resamples
    if args.candidates < 2 or args.scipy_candidates < 2:
        parser.error("--candidates and --scipy-candidates must be at least 2")
    return args


def make_values(n_queries: int, n_candidates: int, seed: int) -> np.ndarray:
    """``(m, n)`` correlated NDCG-like values in [0, 1]."""
    rng = np.random.default_rng(seed)
    difficulty = rng.beta(2.0, 2.5, size=n_queries)
    shift = np.linspace(-0.02, 0.02, n_candidates)[:, None] + 0.002 * rng.standard_normal((n_candidates, 1))
    noise = 0.12 * rng.standard_normal((n_candidates, n_queries))
    return np.clip(difficulty + shift + noise - 0.05, 0.0, 1.0)


def mean_difference(x, y, axis=-1):
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def run_scipy(values: np.ndarray, resamples: int, args) -> tuple[float, float, dict]:
    from scipy import stats

    rng = np.random.default_rng(args.seed + 1)
    boot = perm = 0.0
    first = {}
    k = args.scipy_candidates
    for i in range(k):
        for j in range(i + 1, k):
            t0 = time.perf_counter()
            ci = stats.bootstrap((values[i], values[j]), mean_difference, paired=True, vectorized=True,
                                 n_resamples=resamples, method="percentile", batch=args.bootstrap_batch, rng=rng)
            t1 = time.perf_counter()
            test = stats.permutation_test((values[i], values[j]), mean_difference, permutation_type="samples",
                                          vectorized=True, n_resamples=resamples, batch=args.permutation_batch,
                                          rng=rng)
            t2 = time.perf_counter()
            boot, perm = boot + (t1 - t0), perm + (t2 - t1)
            if not first:
                first = {"ci": (float(ci.confidence_interval.low), float(ci.confidence_interval.high)),
                         "p": float(test.pvalue)}
    return boot, perm, first


def main(argv=None) -> None:
    args = parse_args(argv)
    m, n, R = args.candidates, args.queries, args.resamples
    print(f"machine: {platform.machine()} {platform.processor() or ''} cores={len(os.sched_getaffinity(0))} "
          f"python={platform.python_version()} numpy={np.__version__}")
    values = make_values(n, m, args.seed)
    units = PairedUnits("query", "ndcg@10", tuple(f"model{i:02d}" for i in range(m)),
                        tuple(f"q{i}" for i in range(n)), values)
    config = ComparisonConfig(resamples=R, seed=args.seed)
    compare_units(PairedUnits("query", "warm-up", ("a", "b"), ("x", "y", "z"), values[:2, :3]),
                  ComparisonConfig(resamples=100))
    t0 = time.perf_counter()
    result = compare_units(units, config)
    ours = time.perf_counter() - t0

    k = args.scipy_candidates
    boot, perm, first = run_scipy(values[:k], args.scipy_resamples, args)
    scale = R / args.scipy_resamples
    scipy_total = (boot + perm) * scale
    marker = "" if scale == 1 else " (extrapolated)"

    n_pairs = m * (m - 1) // 2
    print(f"\n{m} candidates x {n} queries, {R} resamples, {n_pairs} pairs (vertebrae); scipy on the "
          f"{k * (k - 1) // 2} pairs of {k} candidates")
    print(f"{'component':<58}{'seconds':>12}")
    print(f"{'vertebrae compare_units (all candidates, all pairs)':<58}{ours:>12.2f}")
    print(f"{'scipy.stats.bootstrap, ' + str(k * (k - 1) // 2) + ' pairs' + marker:<58}{boot * scale:>12.2f}")
    print(f"{'scipy.stats.permutation_test, ' + str(k * (k - 1) // 2) + ' pairs' + marker:<58}{perm * scale:>12.2f}")
    pair = result.pairs[0]
    if scale != 1:
        print(f"(extrapolated: scipy timed at {args.scipy_resamples} resamples, times scaled by {scale:g})")
    print(f"\ncross-check {pair['a']} vs {pair['b']}: delta={pair['delta']:.6f}")
    print(f"  vertebrae CI=[{pair['ci_low']:.6f}, {pair['ci_high']:.6f}] p={pair['p_value']:.4g} ({pair['test']})")
    print(f"  scipy     CI=[{first['ci'][0]:.6f}, {first['ci'][1]:.6f}] p={first['p']:.4g}")
    print(f"leader {result.leader}; tied with it: {result.tied_with_leader()}")
    print(f"compare_seconds={ours:.2f} ratio_to_scipy={ours / scipy_total:.4f}")


if __name__ == "__main__":
    main()
